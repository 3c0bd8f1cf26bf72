// SPDX-License-Identifier: GPL-2.0

//! Terminating a channel without waiting in the caller's context.
//!
//! `device_terminate_all` may be called in atomic context: from a
//! completion callback, or with a client's spinlock held
//! (`dmaengine_terminate_async`). Stopping the engine may take more than a
//! second, though: a graceful pause waits for the descriptor in progress,
//! which can be 64 MiB long, and after the pause times out the abort has
//! to be confirmed. Nothing may spin that long.
//!
//! So a terminate only detaches the ring (no more doorbells), asks the
//! engine to pause, and queues a work item. The work item waits for the
//! engine in process context, sleeping between reads of CTRL, aborts what
//! was submitted before the terminate, and restarts the ring for what was
//! submitted since. `device_synchronize` waits for the work item, which is
//! the promise of `dmaengine_synchronize`: once it returns, the engine
//! touches none of the terminated descriptors' buffers.
//!
//! An engine that neither pauses nor aborts leaves the channel dead with
//! its descriptors outstanding (their cookies stay in progress), and every
//! later terminate fails with `EIO`: a client must then keep those buffers.

use super::{Drain, PlxChannel};
use kernel::{
    impl_has_work,
    prelude::*,
    sync::{Arc, ArcBorrow},
    workqueue::{self, WorkItem},
};

/// Work item ID of the terminate work (recovery is 0, reaping 1).
pub(super) const TERMINATE: u64 = 2;

/// What a terminate asked for, under the ring lock.
#[derive(Default)]
pub(super) struct TerminateState {
    /// Abort what was submitted before this free-running index; not yet
    /// taken by the work item.
    abort_before: Option<u32>,
    /// A terminate is queued or in progress: `synchronize` waits.
    pending: bool,
}

impl PlxChannel {
    /// `device_terminate_all`: asks the engine to stop, without waiting.
    ///
    /// `EIO` when the channel is dead with descriptors outstanding: the
    /// engine did not stop for an earlier terminate or recovery, so their
    /// buffers are not free.
    pub(super) fn request_terminate(this: ArcBorrow<'_, Self>) -> Result {
        {
            let mut st = this.state.lock();
            if st.dead {
                // Shut down (nothing outstanding) or stuck (see above).
                return match st.in_flight() {
                    0 => Ok(()),
                    _ => Err(EIO),
                };
            }
            st.terminate.abort_before = Some(st.head);
            st.terminate.pending = true;
            // No doorbell until the work item restarts the ring.
            st.attached = false;
        }
        // Lets the engine stop at the next descriptor boundary while the
        // work item is on its way.
        this.request_pause();
        // Already queued: it will take the bound set above.
        let _ = workqueue::system_long().enqueue::<Arc<Self>, TERMINATE>(Arc::from(this));
        Ok(())
    }

    /// Whether a terminate is queued or in progress.
    pub(super) fn terminating(&self) -> bool {
        self.state.lock().terminate.pending
    }

    /// Waits until no terminate is queued or in progress. The channel must
    /// be marked dead first, so that none is requested meanwhile.
    pub(super) fn wait_terminate_idle(&self) {
        self.wait_idle(|_| !self.terminating());
    }

    /// The work item's body: stop, abort, restart, until no terminate is
    /// left to handle.
    fn finish_terminates(&self) {
        let _serial = self.recovery.lock();
        loop {
            let bound = {
                let mut st = self.state.lock();
                match st.terminate.abort_before.take() {
                    // Shutdown stops the engine itself.
                    Some(bound) if !st.dead => bound,
                    _ => {
                        st.terminate.pending = false;
                        drop(st);
                        self.notify_idle();
                        return;
                    }
                }
            };
            if !self.stop_engine() {
                // Dead: the descriptors stay outstanding, see the module
                // documentation.
                let mut st = self.state.lock();
                st.terminate.abort_before = None;
                st.terminate.pending = false;
                drop(st);
                self.notify_idle();
                return;
            }
            self.drain(Drain::AbortBefore(bound));
            let active = self.state.lock().active;
            if active && self.restart().is_err() {
                self.state.lock().active = false;
            }
        }
    }
}

impl WorkItem<TERMINATE> for PlxChannel {
    type Pointer = Arc<Self>;

    fn run(this: Arc<Self>) {
        this.finish_terminates();
    }
}

impl_has_work! {
    impl HasWork<Self, TERMINATE> for PlxChannel { self.terminate_work }
}
