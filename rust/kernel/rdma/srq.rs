// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: the event a driver raises on one.

use super::ffi;
use core::ptr::NonNull;
use kernel::{
    ffi::c_void,
    new_spinlock_irq,
    prelude::*,
    sync::{Arc, SpinLockIrq},
};

/// Raises the events of one `ib_srq`, until the SRQ is destroyed.
///
/// # Invariants
///
/// While set, the pointer is the live `ib_srq` the notifier was made for.
#[pin_data]
pub struct SrqNotifier {
    #[pin]
    srq: SpinLockIrq<Option<NonNull<c_void>>>,
}

// SAFETY: The pointer is only used under the lock, from any thread.
unsafe impl Send for SrqNotifier {}
// SAFETY: See `Send`.
unsafe impl Sync for SrqNotifier {}

impl SrqNotifier {
    pub(super) fn new(srq: NonNull<c_void>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                srq <- new_spinlock_irq!(Some(srq), "rdma_srq_notifier"),
            }),
            GFP_KERNEL,
        )
    }

    /// Raises `IB_EVENT_SRQ_LIMIT_REACHED` (the armed limit was crossed),
    /// unless the SRQ is being destroyed.
    pub fn limit_reached(&self) {
        let srq = self.srq.lock();
        if let Some(p) = *srq {
            // SAFETY: `p` is a live `ib_srq` while set (type invariant); the
            // lock keeps `revoke` from completing meanwhile.
            unsafe { ffi::rust_ib_srq_limit_reached(p.as_ptr()) };
        }
    }

    pub(super) fn revoke(&self) {
        *self.srq.lock() = None;
    }
}
