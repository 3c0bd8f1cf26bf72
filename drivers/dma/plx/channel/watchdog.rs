// SPDX-License-Identifier: GPL-2.0

//! The stall watchdog of a channel.
//!
//! A periodic soft hrtimer, armed for as long as the function is bound,
//! does two things at each tick:
//!
//! - it reaps finished descriptors, so that a lost completion interrupt
//!   delays a client by at most one period instead of forever;
//! - it counts the ticks at which descriptors were in flight and `tail` had
//!   not moved since the previous tick. After [`STALE_TICKS`] of them the
//!   engine has made no progress for at least the watchdog timeout (the
//!   period is half of it), and the channel is recovered like after an
//!   error interrupt: the unfinished copies are aborted and the ring
//!   restarts.
//!
//! The tick runs in softirq context, where dmaengine clients expect their
//! callbacks anyway. The recovery does not: stopping a stalled engine may
//! take a second (a pause, then an abort), which a softirq must not spend
//! spinning, so the tick queues a work item that recovers in process
//! context, sleeping while it waits for the engine.

use super::{Drain, PlxChannel};
use crate::stats::Stats;
use kernel::{
    impl_has_hr_timer, impl_has_work,
    sync::{Arc, ArcBorrow},
    time::{
        delay::fsleep,
        hrtimer::{
            ArcHrTimerHandle, HrTimerCallback, HrTimerCallbackContext, HrTimerPointer,
            HrTimerRestart, RelativeSoftMode,
        },
        Delta, Monotonic,
    },
    workqueue::{self, WorkItem},
};

/// Ticks without progress before the engine is declared stalled. Ticks
/// come every half timeout and the first may come right after a submit, so
/// three of them span at least one whole timeout.
const STALE_TICKS: u32 = 3;

/// What the watchdog remembers between ticks, under the ring lock.
#[derive(Default)]
pub(super) struct WatchdogState {
    /// `tail` at the previous tick.
    last_tail: u32,
    /// Consecutive ticks with work in flight and no progress.
    stale: u32,
    /// The recovery work item is queued or running.
    recovery_queued: bool,
}

/// The running watchdog of a channel: dropping it stops the timer and
/// waits for a tick in progress.
pub(crate) struct Watchdog(#[allow(dead_code)] ArcHrTimerHandle<PlxChannel>);

impl Watchdog {
    /// Starts the watchdog of `chan`, or returns `None` if `chan` has no
    /// watchdog timeout.
    pub(crate) fn start(chan: &Arc<PlxChannel>) -> Option<Self> {
        let period = chan.watchdog_period?;
        Some(Self(chan.clone().start(period)))
    }
}

impl PlxChannel {
    /// One watchdog tick. Returns whether the engine is stalled.
    fn watchdog_tick(&self) -> bool {
        self.drain(Drain::Finished);
        let mut st = self.state.lock();
        let tail = st.tail;
        let stalled = st.active && st.in_flight() != 0 && tail == st.watchdog.last_tail;
        st.watchdog.last_tail = tail;
        if !stalled {
            st.watchdog.stale = 0;
            return false;
        }
        st.watchdog.stale += 1;
        if st.watchdog.stale < STALE_TICKS {
            return false;
        }
        st.watchdog.stale = 0;
        true
    }
}

impl PlxChannel {
    /// Queues the recovery work item, unless it is queued already or the
    /// channel is shutting down.
    fn queue_recovery(this: ArcBorrow<'_, Self>) {
        {
            let mut st = this.state.lock();
            if st.dead || st.watchdog.recovery_queued {
                return;
            }
            st.watchdog.recovery_queued = true;
        }
        // Cannot be queued already: `recovery_queued` was clear.
        let _ = workqueue::system_long().enqueue(Arc::from(this));
    }

    /// Waits until no recovery work item is queued or running. The
    /// channel must be marked dead first, so that no tick queues another.
    pub(super) fn wait_recovery_idle(&self) {
        while self.state.lock().watchdog.recovery_queued {
            fsleep(Delta::from_millis(1));
        }
    }
}

impl HrTimerCallback for PlxChannel {
    type Pointer<'a> = Arc<Self>;

    fn run(this: ArcBorrow<'_, Self>, mut ctx: HrTimerCallbackContext<'_, Self>) -> HrTimerRestart {
        if this.state.lock().dead {
            return HrTimerRestart::NoRestart;
        }
        if this.watchdog_tick() {
            Stats::bump(&this.stats.stalls);
            Self::queue_recovery(this);
        }
        if let Some(period) = this.watchdog_period {
            ctx.forward_now(period);
        }
        HrTimerRestart::Restart
    }
}

impl WorkItem for PlxChannel {
    type Pointer = Arc<Self>;

    /// Recovers the stalled channel, in process context.
    fn run(this: Arc<Self>) {
        if !this.state.lock().dead {
            let ms = this.watchdog_period.map_or(0, |p| p.as_millis() * 2);
            this.recover(format_args!("no progress for {ms} ms"));
        }
        let mut st = this.state.lock();
        // The abort moved `tail`: that is no progress of the engine's.
        st.watchdog.last_tail = st.tail;
        st.watchdog.stale = 0;
        st.watchdog.recovery_queued = false;
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

/// The tick period for a watchdog timeout of `timeout_ms` (0: none).
pub(crate) fn period(timeout_ms: u32) -> Option<Delta> {
    (timeout_ms != 0).then(|| Delta::from_millis(i64::from(timeout_ms) / 2))
}
