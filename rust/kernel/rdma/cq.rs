// SPDX-License-Identifier: GPL-2.0

//! Completion events of a completion queue.

use super::ffi;
use core::ptr::NonNull;
use kernel::{
    ffi::c_void,
    new_spinlock_irq,
    prelude::*,
    sync::{Arc, SpinLockIrq},
};

/// Raises the events of one CQ: completions (`ib_cq.comp_handler`: for a
/// user CQ, uverbs wakes the consumer's completion channel) and errors
/// (`ib_cq.event_handler`).
///
/// Handed to [`super::device::Driver::create_cq`]. The abstraction revokes
/// it before the driver's `destroy_cq` runs, so an event raised late does
/// nothing instead of touching a freed `ib_cq`.
///
/// # Invariants
///
/// While `cq` is `Some`, it points to the live `ib_cq` this notifier was
/// made for: it is cleared, under the lock, before that CQ is destroyed.
#[pin_data]
pub struct CqNotifier {
    #[pin]
    cq: SpinLockIrq<Option<NonNull<c_void>>>,
}

// SAFETY: The pointer is only used under the lock, from any thread; the
// completion handler may be called in any context but hard IRQ.
unsafe impl Send for CqNotifier {}
// SAFETY: See `Send`.
unsafe impl Sync for CqNotifier {}

impl CqNotifier {
    pub(super) fn new(cq: NonNull<c_void>) -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                cq <- new_spinlock_irq!(Some(cq), "rdma_cq_notifier"),
            }),
            GFP_KERNEL,
        )
    }

    /// Raises the CQ's completion event, unless the CQ is being destroyed.
    pub fn notify(&self) {
        let cq = self.cq.lock();
        if let Some(p) = *cq {
            // SAFETY: `p` is a live `ib_cq` while set (type invariant); the
            // lock keeps `revoke` from completing meanwhile.
            unsafe { ffi::rust_ib_cq_event(p.as_ptr()) };
        }
    }

    /// Raises `IB_EVENT_CQ_ERR` on the CQ (a completion was lost: the CQ
    /// overflowed), unless the CQ is being destroyed.
    pub fn error(&self) {
        let cq = self.cq.lock();
        if let Some(p) = *cq {
            // SAFETY: As in `notify`.
            unsafe { ffi::rust_ib_cq_error(p.as_ptr()) };
        }
    }

    pub(super) fn revoke(&self) {
        *self.cq.lock() = None;
    }
}
