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
//!
//! A terminate called with interrupts off (a client's `spin_lock_irqsave`
//! held, or hard IRQ context) cannot take the ring lock, a `_bh` lock: it
//! posts its request instead, in atomics ([`PostedTerminate`]), asks for the
//! pause and queues the same work item, which takes the request under the
//! lock. The bound is the same: what was submitted before the call, as the
//! last submit published it.

use super::{Drain, PlxChannel, Stop};
use crate::module_queue::{self, QueueKind};
use crate::spinlock_bh::may_lock_bh;
use kernel::{
    impl_has_work,
    prelude::*,
    sync::{
        atomic::{Acquire, Atomic, AtomicFlag, Relaxed, Release},
        Arc, ArcBorrow,
    },
    workqueue::WorkItem,
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

/// What a terminate with interrupts off leaves for the work item, outside
/// the ring lock.
pub(super) struct PostedTerminate {
    /// The ring's free-running head as of the last submit (a `u32`, kept in
    /// 64 bits: the kernel's 32-bit atomics cost a module an out-of-line
    /// call per operation, and this one is on every submit).
    head: Atomic<u64>,
    /// A posted request: [`POSTED`] with the head in the low bits, or 0.
    request: Atomic<u64>,
    /// The channel was declared dead (mirrors `RingState::dead`).
    dead: AtomicFlag,
}

/// Marks [`PostedTerminate::request`] as holding a request.
const POSTED: u64 = 1 << 32;

impl PostedTerminate {
    pub(super) fn new() -> Self {
        Self {
            head: Atomic::new(0),
            request: Atomic::new(0),
            dead: AtomicFlag::new(false),
        }
    }

    /// Publishes the head a submit (or a reset) left, under the ring lock.
    #[inline(always)]
    pub(super) fn publish_head(&self, head: u32) {
        self.head.store(head.into(), Release);
    }

    /// The channel is dead: posted terminates fail from now on.
    pub(super) fn mark_dead(&self) {
        self.dead.store(true, Relaxed);
    }

    /// Takes the posted request's bound, if any.
    fn take(&self) -> Option<u32> {
        let r = self.request.xchg(0, Acquire);
        // The low 32 bits are the head (truncation intended).
        (r & POSTED != 0).then_some(r as u32)
    }

    fn is_pending(&self) -> bool {
        self.request.load(Relaxed) != 0
    }
}

/// The later of two free-running ring indices, as seen from `tail`.
fn later(tail: u32, a: u32, b: u32) -> u32 {
    if b.wrapping_sub(tail) > a.wrapping_sub(tail) {
        b
    } else {
        a
    }
}

impl PlxChannel {
    /// `device_terminate_all`: asks the engine to stop, without waiting.
    ///
    /// `EIO` when the channel is dead with descriptors outstanding: the
    /// engine did not stop for an earlier terminate or recovery, so their
    /// buffers are not free (with interrupts off, whenever it is dead:
    /// what is outstanding is not known without the lock).
    pub(super) fn request_terminate(this: ArcBorrow<'_, Self>) -> Result {
        if !may_lock_bh() {
            return Self::post_terminate(this);
        }
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
        let _ =
            module_queue::queue(QueueKind::Long).enqueue::<Arc<Self>, TERMINATE>(Arc::from(this));
        Ok(())
    }

    /// [`Self::request_terminate`] with interrupts off: posts the request
    /// for the work item, which detaches the ring and takes the bound
    /// under the lock.
    fn post_terminate(this: ArcBorrow<'_, Self>) -> Result {
        let posted = &this.posted_terminate;
        if posted.dead.load(Relaxed) {
            return Err(EIO);
        }
        let bound = posted.head.load(Acquire);
        posted.request.store(POSTED | bound, Release);
        // An early hint; the work item asks again once the ring is
        // detached, since a doorbell rung meanwhile may clear it.
        this.request_pause();
        let _ =
            module_queue::queue(QueueKind::Long).enqueue::<Arc<Self>, TERMINATE>(Arc::from(this));
        Ok(())
    }

    /// Whether a terminate is queued, posted or in progress.
    pub(super) fn terminating(&self) -> bool {
        self.posted_terminate.is_pending() || self.state.lock().terminate.pending
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
                if let Some(posted) = self.posted_terminate.take() {
                    let bound = match st.terminate.abort_before {
                        Some(b) => later(st.tail, b, posted),
                        None => posted,
                    };
                    st.terminate.abort_before = Some(bound);
                    st.terminate.pending = true;
                    st.attached = false;
                }
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
            if !self.stop_engine(Stop::Graceful) {
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
                self.set_active(&mut self.state.lock(), false);
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
