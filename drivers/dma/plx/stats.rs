// SPDX-License-Identifier: GPL-2.0

//! Per-channel counters, shown in debugfs.
//!
//! The counters that change per copy live under the lock that already
//! serializes their writer, as plain integers: `RingCounters` under the
//! ring lock, `CompletionCounters` under the completion lock. An atomic
//! costs a call into a C helper for each load and store (the kernel's Rust
//! atomics are not inlined here), and under emulation (TCG) that is a
//! measurable share of a 64 B copy. The rare events (interrupts, recoveries,
//! stalls) are counted outside those locks, in [`Stats`]: each has one
//! writer at a time (the channel's interrupt handler, which does not run on
//! two CPUs at once, the recovery mutex, the channel's one timer), so an
//! update is a plain load and store, not a locked read-modify-write.

use kernel::sync::atomic::{Atomic, Relaxed};

/// Counters of the ring, under `PlxChannel::state`.
#[derive(Clone, Copy, Default)]
pub(crate) struct RingCounters {
    /// Descriptors handed to the engine.
    pub(crate) submitted: u64,
    /// Bytes copied by completed descriptors.
    pub(crate) bytes: u64,
    /// START doorbells rung by `issue_pending` (one per issued batch).
    pub(crate) doorbells: u64,
    /// Descriptors issued with INT_WHEN_DONE.
    pub(crate) irq_requests: u64,
}

/// Counters of completions, under `PlxChannel::completions`.
#[derive(Clone, Copy, Default)]
pub(crate) struct CompletionCounters {
    /// Descriptors completed without error.
    pub(crate) completed: u64,
    /// Descriptors that ended in a read or write failure, or were aborted.
    pub(crate) failed: u64,
}

/// Counters of rare events, updated outside the channel's locks.
pub(crate) struct Stats {
    /// Interrupts taken.
    pub(crate) interrupts: Atomic<u64>,
    /// Channel recoveries after an engine error or a stall.
    pub(crate) recoveries: Atomic<u64>,
    /// Stalls caught by the watchdog (each one also a recovery).
    pub(crate) stalls: Atomic<u64>,
    /// Reads of `INTR_STATUS` by the reap, each an MMIO round trip to the
    /// device (see `PlxChannel::reap_interrupt`).
    pub(crate) status_reads: Atomic<u64>,
}

/// Every counter of a channel at one moment, for debugfs and the log.
pub(crate) struct Snapshot {
    pub(crate) ring: RingCounters,
    pub(crate) done: CompletionCounters,
    pub(crate) interrupts: u64,
    pub(crate) recoveries: u64,
    pub(crate) stalls: u64,
    pub(crate) status_reads: u64,
}

impl Stats {
    pub(crate) const fn new() -> Self {
        Self {
            interrupts: Atomic::new(0),
            recoveries: Atomic::new(0),
            stalls: Atomic::new(0),
            status_reads: Atomic::new(0),
        }
    }

    /// Adds one to `counter`; its writers must be serialized (see the
    /// module documentation), or increments may be lost.
    pub(crate) fn bump(counter: &Atomic<u64>) {
        counter.store(counter.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// Reads `counter`.
    pub(crate) fn get(counter: &Atomic<u64>) -> u64 {
        counter.load(Relaxed)
    }
}
