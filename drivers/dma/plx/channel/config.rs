// SPDX-License-Identifier: GPL-2.0

//! How a channel hears of completions and when it gives up on its engine.

use kernel::time::Delta;

/// Reaping period while a polled channel is idle: a copy issued then waits
/// at most this long for its first poll (every later one `poll` at most).
const IDLE_POLL: Delta = Delta::from_millis(1);

/// Completion settings of a channel, fixed when it is created (module
/// parameters `irq_coalesce`, `poll_us` and `watchdog_ms`).
#[derive(Clone, Copy)]
pub(crate) struct ChannelConfig {
    /// Descriptors per completion interrupt, at most. With 1, every
    /// descriptor prepared with `DMA_PREP_INTERRUPT` asks for one. With
    /// `n > 1`, a batch in which any descriptor wants a callback asks for
    /// one on every `n`-th descriptor and on its last: the ring completes
    /// in order, so each interrupt finds every earlier write-back, and the
    /// ones inside a long batch let its client refill the ring while the
    /// engine still works on the rest.
    pub(crate) coalesce: u32,
    /// Polled mode: no descriptor asks for a completion interrupt; the
    /// channel's ticker reaps write-backs this often while descriptors are
    /// in flight.
    pub(crate) poll: Option<Delta>,
    /// Abort the engine's copies after this long without progress.
    pub(crate) watchdog: Option<Delta>,
    /// Reap completions in the IRQ thread, a context switch per interrupt,
    /// instead of in softirq context (see `reaper`).
    pub(crate) reap_in_thread: bool,
}

impl ChannelConfig {
    /// The interrupt requests of an issued batch of `n` descriptors;
    /// `batch_asked` tells whether any of them wants a callback.
    #[inline]
    pub(crate) fn batch(&self, n: u32, batch_asked: bool) -> BatchInterrupts {
        let (each, every) = match (self.poll, self.coalesce) {
            (Some(_), _) => (false, None),
            (None, 0 | 1) => (true, None),
            (None, every) => (false, batch_asked.then_some(every)),
        };
        BatchInterrupts {
            each,
            last: every.is_some(),
            left: n,
            // Never reaches 1 within a batch when nothing is periodic: a
            // batch is at most a ring, far fewer than `u32::MAX` slots.
            every: every.unwrap_or(u32::MAX),
            countdown: every.unwrap_or(u32::MAX),
        }
    }

    /// When the ticker runs next: every poll period while a polled channel
    /// is `busy` (descriptors in flight, or were a moment ago), else at
    /// half the watchdog timeout (a stall is then seen between one and one
    /// and a half timeouts late) or [`IDLE_POLL`], whichever comes first;
    /// `None` when the channel needs no ticker at all.
    pub(crate) fn tick(&self, busy: bool) -> Option<Delta> {
        let watch = self.watchdog.map(|t| t.as_nanos() / 2);
        let nanos = match self.poll {
            Some(p) if busy => p.as_nanos(),
            Some(_) => watch.map_or(IDLE_POLL.as_nanos(), |w| w.min(IDLE_POLL.as_nanos())),
            None => watch?,
        };
        Some(Delta::from_nanos(nanos))
    }
}

/// Which descriptors of one issued batch ask the engine for an interrupt,
/// in ring order (see [`ChannelConfig::coalesce`]). A countdown rather than
/// a remainder (a division is a helper call under TCG), and no branch on the
/// mode per descriptor: `issue_pending` asks once for each.
pub(crate) struct BatchInterrupts {
    /// Each descriptor that wants a callback asks (no coalescing).
    each: bool,
    /// The batch's last descriptor asks (coalescing, and some descriptor
    /// wants a callback). The same as `every != u32::MAX`, kept apart: that
    /// comparison per descriptor measured 5 instructions a copy more.
    last: bool,
    /// Descriptors of the batch not decided yet.
    left: u32,
    /// Every this many descriptors, one asks; `u32::MAX` when none does
    /// for its place in the batch.
    every: u32,
    /// Descriptors up to and including the next periodic one.
    countdown: u32,
}

impl BatchInterrupts {
    /// Whether the batch's next descriptor, which wants a callback if
    /// `asked`, asks for an interrupt.
    #[inline]
    pub(crate) fn next(&mut self, asked: bool) -> bool {
        self.left = self.left.wrapping_sub(1);
        let nth = self.countdown == 1;
        self.countdown = if nth {
            self.every
        } else {
            self.countdown.wrapping_sub(1)
        };
        (asked & self.each) | nth | (self.last & (self.left == 0))
    }
}
