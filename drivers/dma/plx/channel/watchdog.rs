// SPDX-License-Identifier: GPL-2.0

//! The ticker of a channel: its stall watchdog, and its poller in polled
//! mode.
//!
//! A periodic soft hrtimer, armed for as long as the function is bound,
//! does two things at each tick:
//!
//! - it reaps finished descriptors. With interrupts, a lost completion
//!   interrupt then delays a client by at most one period instead of
//!   forever; in polled mode (see
//!   [`ChannelConfig::poll`](super::ChannelConfig::poll)) this is how
//!   every completion is found, and the tick comes every poll period
//!   while descriptors are in flight;
//! - it watches progress: when descriptors have been in flight with `tail`
//!   unmoved for the watchdog timeout, the engine has stalled, and the
//!   channel is recovered like after an error interrupt: the unfinished
//!   copies are aborted and the ring restarts.
//!
//! The tick runs in softirq context, where dmaengine clients expect their
//! callbacks anyway. The recovery does not: stopping a stalled engine may
//! take a second (a pause, then an abort), which a softirq must not spend
//! spinning, so the tick queues a work item that recovers in process
//! context, sleeping while it waits for the engine.

use super::{Drain, PlxChannel};
use crate::module_queue::{self, QueueKind};
use crate::stats::Stats;
use kernel::{
    impl_has_hr_timer, impl_has_work,
    sync::{Arc, ArcBorrow},
    time::{
        hrtimer::{
            ArcHrTimerHandle, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
            HrTimerRestart, RelativeSoftMode,
        },
        Instant, Monotonic,
    },
    workqueue::WorkItem,
};

/// Idle ticks for which a polled channel keeps polling at full rate after
/// its ring drained, so that a client copying one buffer at a time is not
/// slowed to the idle period.
const LINGER_TICKS: u32 = 200;

/// What the ticker remembers between ticks, under the ring lock.
#[derive(Default)]
pub(super) struct WatchdogState {
    /// `tail` at the previous tick.
    last_tail: u32,
    /// Since when descriptors have been in flight with `tail` unmoved.
    stale_since: Option<Instant<Monotonic>>,
    /// Consecutive ticks that found nothing in flight.
    idle_ticks: u32,
    /// The recovery work item is queued or running.
    recovery_queued: bool,
    /// What it recovers from is an engine error (a reap found
    /// `INTR_STATUS.ERROR`), not a stall.
    engine_error: bool,
}

/// The running ticker of a channel: dropping it stops the timer and waits
/// for a tick in progress.
pub(crate) struct Watchdog(#[allow(dead_code)] ArcHrTimerHandle<PlxChannel>);

impl Watchdog {
    /// Starts the ticker of `chan`, or returns `None` if `chan` needs none
    /// (no watchdog timeout and not polled).
    pub(crate) fn start(chan: &Arc<PlxChannel>) -> Option<Self> {
        let period = chan.config.tick(false)?;
        Some(Self(chan.clone().start(period)))
    }
}

impl PlxChannel {
    /// One tick. Returns whether the engine is stalled, and whether the
    /// channel counts as busy for the next period.
    fn watchdog_tick(&self) -> (bool, bool) {
        self.drain(Drain::Finished);
        let mut st = self.state.lock();
        let tail = st.tail;
        let busy = st.active && st.issued.wrapping_sub(tail) != 0;
        let progressed = tail != st.watchdog.last_tail;
        st.watchdog.last_tail = tail;
        st.watchdog.idle_ticks = if busy {
            0
        } else {
            st.watchdog.idle_ticks.saturating_add(1)
        };
        let lingering = st.watchdog.idle_ticks < LINGER_TICKS;
        if !busy || progressed {
            st.watchdog.stale_since = None;
            return (false, busy || lingering);
        }
        let Some(timeout) = self.config.watchdog else {
            return (false, true);
        };
        let since = *st.watchdog.stale_since.get_or_insert_with(Instant::now);
        if since.elapsed().as_nanos() < timeout.as_nanos() {
            return (false, true);
        }
        st.watchdog.stale_since = None;
        (true, true)
    }
}

impl PlxChannel {
    /// Queues the recovery work item, for an engine error or a stall,
    /// unless it is queued already (an engine error still tells it why) or
    /// the channel is shutting down.
    pub(super) fn queue_recovery(this: ArcBorrow<'_, Self>, engine_error: bool) {
        {
            let mut st = this.state.lock();
            st.watchdog.engine_error |= engine_error;
            if st.dead || st.watchdog.recovery_queued {
                return;
            }
            st.watchdog.recovery_queued = true;
        }
        // Cannot be queued already: `recovery_queued` was clear.
        let _ = module_queue::queue(QueueKind::Long).enqueue::<Arc<Self>, 0>(Arc::from(this));
    }

    /// Waits until no recovery work item is queued or running. The
    /// channel must be marked dead first, so that no tick queues another.
    pub(super) fn wait_recovery_idle(&self) {
        // The work item wakes `idle` when it clears the flag.
        self.wait_idle(|_| !self.state.lock().watchdog.recovery_queued);
    }
}

impl HrTimerCallback for PlxChannel {
    type Pointer<'a> = Arc<Self>;

    fn run(this: ArcBorrow<'_, Self>, mut ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        if this.state.lock().dead {
            return HrTimerRestart::NoRestart;
        }
        let (stalled, busy) = this.watchdog_tick();
        if stalled {
            Stats::bump(&this.stats.stalls);
            Self::queue_recovery(this, false);
        }
        match this.config.tick(busy) {
            Some(period) => {
                ctx.forward_now(period);
                HrTimerRestart::Restart
            }
            None => HrTimerRestart::NoRestart,
        }
    }
}

impl WorkItem for PlxChannel {
    type Pointer = Arc<Self>;

    /// Recovers the stalled or failed channel, in process context.
    fn run(this: Arc<Self>) {
        let (dead, engine_error) = {
            let mut st = this.state.lock();
            (st.dead, core::mem::take(&mut st.watchdog.engine_error))
        };
        if !dead {
            if engine_error {
                this.recover(format_args!("engine error"));
            } else {
                let ms = this.config.watchdog.map_or(0, |t| t.as_millis());
                this.recover(format_args!("no progress for {ms} ms"));
            }
        }
        let again = {
            let mut st = this.state.lock();
            // The abort moved `tail`: that is no progress of the engine's.
            st.watchdog.last_tail = st.tail;
            st.watchdog.stale_since = None;
            // An engine error reported while this one ran found it queued:
            // it runs again for that one.
            let again = st.watchdog.engine_error && !st.dead;
            st.watchdog.recovery_queued = again;
            again
        };
        if again {
            // Cannot be queued already: it is running, and only a caller
            // that found `recovery_queued` clear queues it.
            let _ = module_queue::queue(QueueKind::Long).enqueue::<Arc<Self>, 0>(this);
        } else {
            // A shutdown may be waiting for this (`wait_recovery_idle`).
            this.notify_idle();
        }
    }
}

impl_has_work! {
    impl HasWork<Self> for PlxChannel { self.recovery_work }
}

impl_has_hr_timer! {
    impl HasHrTimer<Self> for PlxChannel {
        mode: RelativeSoftMode<Monotonic>,
        field: self.watchdog_timer,
    }
}
