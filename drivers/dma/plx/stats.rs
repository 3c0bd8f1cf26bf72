// SPDX-License-Identifier: GPL-2.0

//! Per-channel counters, shown in debugfs.
//!
//! Each counter has one writer at a time: `submitted`, `bytes`,
//! `irq_requests` and `doorbells` change under the ring lock, `completed`
//! and `failed` under the completion lock, `interrupts` in the channel's
//! interrupt handler (which does not run on two CPUs at once), `recoveries`
//! under the recovery mutex and `stalls` in the channel's one timer. So an
//! update is a plain load and store, not a locked read-modify-write: under
//! emulation (TCG) an atomic RMW per copy is a measurable share of a 64 B
//! copy's cost. Readers may see a count a moment old, never a torn one.

use kernel::sync::atomic::{Atomic, Relaxed};

/// Counters of one channel since it was probed.
pub(crate) struct Stats {
    /// Descriptors handed to the engine.
    pub(crate) submitted: Atomic<u64>,
    /// Descriptors completed without error.
    pub(crate) completed: Atomic<u64>,
    /// Descriptors that ended in a read or write failure, or were aborted.
    pub(crate) failed: Atomic<u64>,
    /// Bytes copied by completed descriptors.
    pub(crate) bytes: Atomic<u64>,
    /// Interrupts taken.
    pub(crate) interrupts: Atomic<u64>,
    /// START doorbells rung by `issue_pending` (one per issued batch).
    pub(crate) doorbells: Atomic<u64>,
    /// Descriptors issued with INT_WHEN_DONE.
    pub(crate) irq_requests: Atomic<u64>,
    /// Channel recoveries after an engine error or a stall.
    pub(crate) recoveries: Atomic<u64>,
    /// Stalls caught by the watchdog (each one also a recovery).
    pub(crate) stalls: Atomic<u64>,
}

impl Stats {
    pub(crate) const fn new() -> Self {
        Self {
            submitted: Atomic::new(0),
            completed: Atomic::new(0),
            failed: Atomic::new(0),
            bytes: Atomic::new(0),
            interrupts: Atomic::new(0),
            doorbells: Atomic::new(0),
            irq_requests: Atomic::new(0),
            recoveries: Atomic::new(0),
            stalls: Atomic::new(0),
        }
    }

    /// Adds one to `counter`; its writers must be serialized (see the
    /// module documentation), or increments may be lost.
    pub(crate) fn bump(counter: &Atomic<u64>) {
        counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// Adds `n` to `counter`; its writers must be serialized, as for
    /// [`Stats::bump`].
    pub(crate) fn add(counter: &Atomic<u64>, n: u64) {
        counter.store(counter.load(Relaxed).wrapping_add(n), Relaxed);
    }

    /// Reads `counter`.
    pub(crate) fn get(counter: &Atomic<u64>) -> u64 {
        counter.load(Relaxed)
    }
}
