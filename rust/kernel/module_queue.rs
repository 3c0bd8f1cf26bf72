// SPDX-License-Identifier: GPL-2.0

//! Workqueues that belong to the module queueing on them.
//!
//! Work queued on a system workqueue can still be running, or returning
//! through its last `Arc` drop, when the module's exit has finished and its
//! code is gone. Work queued here cannot: the module type is wrapped in
//! [`WithQueues`], which creates the module's queues before anything the
//! module registers and destroys them, draining every item, after all of
//! it is dropped. Field order inside [`WithQueues`] fixes that order, so
//! a module cannot declare it the wrong way round.
//!
//! Every module compiles its own copy of this file, so [`queue`] names the
//! queues of the calling module.
//!
//! C header: [`include/linux/workqueue.h`](srctree/include/linux/workqueue.h)

use core::ptr::null_mut;
use kernel::{
    bindings,
    prelude::*,
    sync::atomic::{Acquire, Atomic, Release},
    workqueue::{self, Queue},
};

/// What a queue runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum QueueKind {
    /// Work that may sleep for long (the module's `system_long`).
    Long,
    /// Short work in softirq context (the module's `system_bh`).
    Bh,
    /// Short, latency-bound work (the module's `system_highpri`).
    HighPri,
}

/// The module's queues, while its [`WithQueues`] lives.
static LONG: Atomic<*mut bindings::workqueue_struct> = Atomic::new(null_mut());
static BH: Atomic<*mut bindings::workqueue_struct> = Atomic::new(null_mut());
static HIGHPRI: Atomic<*mut bindings::workqueue_struct> = Atomic::new(null_mut());

fn slot(kind: QueueKind) -> &'static Atomic<*mut bindings::workqueue_struct> {
    match kind {
        QueueKind::Long => &LONG,
        QueueKind::Bh => &BH,
        QueueKind::HighPri => &HIGHPRI,
    }
}

/// The module's queue of `kind`.
///
/// Outside the module's [`WithQueues`] (a module that does not use one,
/// or code running while it is created or destroyed), the system queue of
/// the same kind, which leaves the draining to the caller as before.
pub fn queue(kind: QueueKind) -> &'static Queue {
    let raw = slot(kind).load(Acquire);
    if raw.is_null() {
        return match kind {
            QueueKind::Long => workqueue::system_long(),
            QueueKind::Bh => workqueue::system_bh(),
            QueueKind::HighPri => workqueue::system_highpri(),
        };
    }
    // SAFETY: A non-null pointer was published by `OwnedQueue::new` and is
    // withdrawn by its drop before the queue is destroyed; the queue lives
    // until the module's `WithQueues` is dropped, after everything the
    // module registered, so for as long as any of the module's code that
    // could call this runs.
    unsafe { Queue::from_raw(raw) }
}

/// The module's own queue of `kind`, if it runs its [`WithQueues`]: for
/// C glue that queues the module's work itself.
pub fn owned_raw(kind: QueueKind) -> Option<*mut bindings::workqueue_struct> {
    let raw = slot(kind).load(Acquire);
    (!raw.is_null()).then_some(raw)
}

/// One workqueue of the module, destroyed (drained) when dropped.
struct OwnedQueue {
    kind: QueueKind,
    raw: *mut bindings::workqueue_struct,
}

impl OwnedQueue {
    fn new(kind: QueueKind, name: &CStr) -> Result<Self> {
        let flags = match kind {
            // As `system_long`: per-CPU, may sleep for long.
            QueueKind::Long => bindings::wq_flags_WQ_PERCPU,
            // As `system_bh`.
            QueueKind::Bh => bindings::wq_flags_WQ_BH | bindings::wq_flags_WQ_PERCPU,
            // As `system_highpri`.
            QueueKind::HighPri => bindings::wq_flags_WQ_HIGHPRI | bindings::wq_flags_WQ_PERCPU,
        };
        // SAFETY: The format takes one string argument, `name`, which is
        // NUL-terminated; the workqueue core copies the formatted name.
        let raw = unsafe {
            bindings::alloc_workqueue_noprof(c"%s".as_char_ptr(), flags, 0, name.as_char_ptr())
        };
        if raw.is_null() {
            return Err(ENOMEM);
        }
        slot(kind).store(raw, Release);
        Ok(Self { kind, raw })
    }
}

impl Drop for OwnedQueue {
    fn drop(&mut self) {
        slot(self.kind).store(null_mut(), Release);
        // SAFETY: `raw` came from `alloc_workqueue_noprof` and is destroyed
        // once; this waits for every item queued on it, including items
        // that requeue themselves until it is empty.
        unsafe { bindings::destroy_workqueue(self.raw) };
    }
}

/// A module's registrations, `inner`, with the module's queues around
/// them: created before `inner`, destroyed after it.
#[pin_data]
pub struct WithQueues<R> {
    /// Dropped first (declaration order).
    #[pin]
    inner: R,
    long: OwnedQueue,
    bh: OwnedQueue,
    highpri: OwnedQueue,
}

// SAFETY: The queue pointers are only handed to the workqueue core, which
// may be called from any thread.
unsafe impl Send for OwnedQueue {}
// SAFETY: As for `Send`; `&OwnedQueue` allows nothing.
unsafe impl Sync for OwnedQueue {}

impl<R> WithQueues<R> {
    /// Creates the module's queues (named after `name`), then calls
    /// `inner` for the initializer of the module's registrations: a
    /// closure, so that nothing of them is made before the queues exist.
    pub fn new<E: From<Error>, I: PinInit<R, E>>(
        name: &'static CStr,
        inner: impl FnOnce() -> I,
    ) -> impl PinInit<Self, E> {
        // Initialized in the order written: the queues exist before
        // anything of `inner` could queue work.
        try_pin_init!(Self {
            long: OwnedQueue::new(QueueKind::Long, name)?,
            bh: OwnedQueue::new(QueueKind::Bh, name)?,
            highpri: OwnedQueue::new(QueueKind::HighPri, name)?,
            inner <- inner(),
        }? E)
    }

    /// The module's registrations.
    pub fn inner(&self) -> &R {
        &self.inner
    }
}
