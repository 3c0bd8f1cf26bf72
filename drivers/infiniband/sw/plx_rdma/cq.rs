// SPDX-License-Identifier: GPL-2.0

//! Completion queues.
//!
//! A ring of work completions filled by the QPs' executors and drained by
//! `poll_cq`, and the arming that decides when the consumer's completion
//! channel is woken: once armed (`req_notify_cq`), the next completion, or
//! the next solicited one, raises a single event.

use crate::rdma::{
    cq::CqNotifier,
    types::{cq_notify, QpHandle, Wc},
};
use crate::wq::WorkQueue;
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{Arc, SpinLock},
};

struct CqState {
    entries: WorkQueue<Wc>,
    /// 0, or the `cq_notify` kind the CQ is armed for.
    armed: u32,
    /// A completion was lost because the CQ was full.
    overflowed: bool,
}

/// A completion queue.
#[pin_data]
pub(crate) struct Cq {
    #[pin]
    state: SpinLock<CqState>,
    notifier: Arc<CqNotifier>,
}

impl Cq {
    /// A CQ of `entries` completions.
    pub(crate) fn new(entries: u32, notifier: Arc<CqNotifier>) -> Result<Arc<Self>> {
        let entries = WorkQueue::new(entries as usize)?;
        Arc::pin_init(
            try_pin_init!(Self {
                state <- new_spinlock!(CqState { entries, armed: 0, overflowed: false }, "plx_rdma_cq"),
                notifier,
            }),
            GFP_KERNEL,
        )
    }

    /// Adds `wc`. A full CQ loses it, logs that once and raises
    /// `IB_EVENT_CQ_ERR` each time, as rxe does: the consumer sized the CQ
    /// below its queues, as verbs forbids.
    pub(crate) fn push(&self, wc: Wc, solicited: bool) {
        let mut st = self.state.lock();
        if st.entries.push(wc).is_err() {
            if !st.overflowed {
                pr_warn!(
                    "plx_rdma: CQ overflow: completion of QP {} lost\n",
                    wc.qp_num
                );
            }
            st.overflowed = true;
            drop(st);
            self.notifier.error();
            return;
        }
        let fire = match st.armed {
            cq_notify::NEXT_COMP => true,
            cq_notify::SOLICITED => solicited || wc.status != 0,
            _ => false,
        };
        if fire {
            st.armed = 0;
        }
        drop(st);
        if fire {
            self.notifier.notify();
        }
    }

    /// Moves up to `out.len()` completions out, oldest first.
    pub(crate) fn poll(&self, out: &mut [Wc]) -> usize {
        let mut st = self.state.lock();
        let mut n = 0;
        for slot in out.iter_mut() {
            let Some(wc) = st.entries.pop() else {
                break;
            };
            *slot = wc;
            n += 1;
        }
        n
    }

    /// Gives the CQ room for `entries` completions, keeping those it
    /// holds in order; `EINVAL` if they would not fit (as rxe).
    ///
    /// A smaller size keeps the ring as it is: a CQ's size is a minimum,
    /// and completions of requests already posted may still be on their
    /// way (the QPs execute them from work items), which a smaller ring
    /// would then lose.
    pub(crate) fn resize(&self, entries: u32) -> Result {
        {
            let st = self.state.lock();
            if entries as usize <= st.entries.capacity() {
                return if st.entries.len() > entries as usize {
                    Err(EINVAL)
                } else {
                    Ok(())
                };
            }
        }
        // Allocated before the lock, freed after it (vmalloc'ed rings).
        let mut ring = WorkQueue::new(entries as usize)?;
        let mut st = self.state.lock();
        if st.entries.len() > ring.capacity() {
            drop(st);
            return Err(EINVAL);
        }
        while let Some(wc) = st.entries.pop() {
            // Room was checked above.
            let _ = ring.try_push(wc);
        }
        let old = core::mem::replace(&mut st.entries, ring);
        drop(st);
        drop(old);
        Ok(())
    }

    /// Drops the completions of the QP whose handle is `qp_handle`.
    pub(crate) fn purge(&self, qp_handle: QpHandle) {
        self.state
            .lock()
            .entries
            .retain(|wc| wc.qp_handle != qp_handle);
    }

    /// Arms the CQ; with `REPORT_MISSED_EVENTS`, 1 if completions wait.
    pub(crate) fn arm(&self, flags: u32) -> i32 {
        let mut st = self.state.lock();
        let kind = flags & cq_notify::SOLICITED_MASK;
        // NEXT_COMP includes solicited completions: never narrow an arm.
        if st.armed != cq_notify::NEXT_COMP {
            st.armed = kind;
        }
        i32::from(flags & cq_notify::REPORT_MISSED_EVENTS != 0 && !st.entries.is_empty())
    }
}
