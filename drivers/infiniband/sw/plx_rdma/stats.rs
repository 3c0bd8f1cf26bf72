// SPDX-License-Identifier: GPL-2.0

//! Device counters, shown in debugfs: which path moved the data, and how
//! work requests ended.

use core::fmt;
use kernel::sync::atomic::{Atomic, Relaxed};

/// Counters since the device was registered.
pub(crate) struct Stats {
    /// Copies (one per work request and memory pair) done by the engine.
    pub(crate) engine_copies: Atomic<u64>,
    /// Bytes the engine moved.
    pub(crate) engine_bytes: Atomic<u64>,
    /// Copies done by the CPU: shorter than `copy_engine_min`, or no
    /// channel was there (or its device went, or a region was registered
    /// while it was going).
    pub(crate) cpu_copies: Atomic<u64>,
    /// Bytes the CPU moved.
    pub(crate) cpu_bytes: Atomic<u64>,
    /// Send work requests executed.
    pub(crate) send_wrs: Atomic<u64>,
    /// Of those, the ones executed in the thread that posted them.
    pub(crate) poster_wrs: Atomic<u64>,
    /// Requests the posting thread handed to the QP's work item because
    /// they had to wait (no receive posted yet).
    pub(crate) poster_deferred: Atomic<u64>,
    /// RDMA WRITEs and READs whose copies the QP's work item handed to
    /// the engine in one burst with others.
    pub(crate) burst_wrs: Atomic<u64>,
    /// Work completions with an error status (flushes included).
    pub(crate) error_wcs: Atomic<u64>,
    /// Datagrams (MADs on QP1) delivered to a receive.
    pub(crate) datagrams: Atomic<u64>,
    /// Datagrams nobody received (unknown GID or QP, wrong Q_Key, no
    /// receive posted): unreliable transport drops them.
    pub(crate) datagrams_dropped: Atomic<u64>,
    /// Engine copies that outlasted their timeout while the channel still
    /// made progress: waited for, nothing stopped.
    pub(crate) slow_copies: Atomic<u64>,
    /// Times the channel was stopped: a copy outlasted its timeout with
    /// the channel making no progress at all.
    pub(crate) channel_stops: Atomic<u64>,
    /// Times the channel's device lost its driver (the CPU moves the data
    /// from then on).
    pub(crate) engine_losses: Atomic<u64>,
    /// Regions unmapped from a departing engine's device.
    pub(crate) regions_unmapped: Atomic<u64>,
}

impl Stats {
    pub(crate) const fn new() -> Self {
        Self {
            engine_copies: Atomic::new(0),
            engine_bytes: Atomic::new(0),
            cpu_copies: Atomic::new(0),
            cpu_bytes: Atomic::new(0),
            send_wrs: Atomic::new(0),
            poster_wrs: Atomic::new(0),
            poster_deferred: Atomic::new(0),
            burst_wrs: Atomic::new(0),
            error_wcs: Atomic::new(0),
            datagrams: Atomic::new(0),
            datagrams_dropped: Atomic::new(0),
            slow_copies: Atomic::new(0),
            channel_stops: Atomic::new(0),
            engine_losses: Atomic::new(0),
            regions_unmapped: Atomic::new(0),
        }
    }

    /// Adds `n` to `counter`.
    pub(crate) fn add(counter: &Atomic<u64>, n: u64) {
        counter.fetch_add(n, Relaxed);
    }

    /// Writes every counter, one `name: value` line each.
    pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "engine_copies: {}", self.engine_copies.load(Relaxed))?;
        writeln!(f, "engine_bytes: {}", self.engine_bytes.load(Relaxed))?;
        writeln!(f, "cpu_copies: {}", self.cpu_copies.load(Relaxed))?;
        writeln!(f, "cpu_bytes: {}", self.cpu_bytes.load(Relaxed))?;
        writeln!(f, "send_wrs: {}", self.send_wrs.load(Relaxed))?;
        writeln!(f, "poster_wrs: {}", self.poster_wrs.load(Relaxed))?;
        writeln!(f, "poster_deferred: {}", self.poster_deferred.load(Relaxed))?;
        writeln!(f, "burst_wrs: {}", self.burst_wrs.load(Relaxed))?;
        writeln!(f, "error_wcs: {}", self.error_wcs.load(Relaxed))?;
        writeln!(f, "datagrams: {}", self.datagrams.load(Relaxed))?;
        writeln!(
            f,
            "datagrams_dropped: {}",
            self.datagrams_dropped.load(Relaxed)
        )?;
        writeln!(f, "slow_copies: {}", self.slow_copies.load(Relaxed))?;
        writeln!(f, "channel_stops: {}", self.channel_stops.load(Relaxed))?;
        writeln!(f, "engine_losses: {}", self.engine_losses.load(Relaxed))?;
        writeln!(
            f,
            "regions_unmapped: {}",
            self.regions_unmapped.load(Relaxed)
        )
    }
}
