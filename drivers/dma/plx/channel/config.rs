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
    /// Whether descriptor `i` of an issued batch of `n`, `asked` telling
    /// whether its client wants a callback and `batch_asked` whether any
    /// descriptor of the batch does, asks the engine for an interrupt.
    #[inline]
    pub(crate) fn interrupt(&self, i: u32, n: u32, asked: bool, batch_asked: bool) -> bool {
        match (self.poll, self.coalesce) {
            (Some(_), _) => false,
            (None, 0 | 1) => asked,
            (None, every) => batch_asked && (i + 1 == n || (i + 1) % every == 0),
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
