// SPDX-License-Identifier: GPL-2.0

//! Completion queues.
//!
//! A ring of work completions filled by the QPs' executors and drained by
//! `poll_cq`, and the arming that decides when the consumer's completion
//! channel is woken: once armed (`req_notify_cq`), the next completion, or
//! the next solicited one, raises a single event.
//!
//! A user's CQ whose provider asks for it lives in a ring mapped into the
//! process ([`CqRing`]), which polls it without a system call; a kernel
//! consumer's, or one created without room for the ring's whereabouts in
//! the response, in kernel memory.

use crate::cq_ring::CqRing;
use crate::rdma::{
    cq::CqNotifier,
    types::{cq_notify, QpHandle, Wc},
    user_ring::UserData,
};
use crate::wq::WorkQueue;
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{Arc, SpinLock},
};

/// Where a CQ keeps its completions.
enum Entries {
    /// In kernel memory, polled through the kernel.
    Kernel(WorkQueue<Wc>),
    /// In a ring mapped into the CQ's process.
    Mapped(CqRing),
    /// Destroyed: what still comes is dropped.
    Closed,
}

impl Entries {
    fn push(&mut self, wc: Wc) -> core::result::Result<(), Wc> {
        match self {
            Self::Kernel(q) => q.try_push(wc),
            Self::Mapped(r) => r.push(wc),
            Self::Closed => Ok(()),
        }
    }

    fn pop(&mut self) -> Option<Wc> {
        match self {
            Self::Kernel(q) => q.pop(),
            Self::Mapped(r) => r.pop(),
            Self::Closed => None,
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Kernel(q) => q.len(),
            Self::Mapped(r) => r.len(),
            Self::Closed => 0,
        }
    }

    fn capacity(&self) -> usize {
        match self {
            Self::Kernel(q) => q.capacity(),
            Self::Mapped(r) => r.capacity(),
            Self::Closed => 0,
        }
    }
}

struct CqState {
    entries: Entries,
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
    /// A CQ of `entries` completions, mapped into the process `udata`
    /// belongs to if its provider left room for the ring's whereabouts.
    pub(crate) fn new(
        entries: u32,
        notifier: Arc<CqNotifier>,
        udata: Option<UserData<'_>>,
    ) -> Result<Arc<Self>> {
        let ring = match udata {
            Some(mut u) => CqRing::new(&mut u, entries)?,
            None => None,
        };
        let entries = match ring {
            Some(r) => Entries::Mapped(r),
            None => Entries::Kernel(WorkQueue::new(entries as usize)?),
        };
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
    /// would then lose. A mapped CQ's process learns from the response
    /// where its ring is now (the same place when it was kept).
    pub(crate) fn resize(&self, entries: u32, udata: Option<UserData<'_>>) -> Result {
        let (held, capacity, mapped) = {
            let st = self.state.lock();
            let mapped = match &st.entries {
                Entries::Mapped(r) => Some(r.response()),
                _ => None,
            };
            (st.entries.len(), st.entries.capacity(), mapped)
        };
        if entries as usize <= capacity {
            if held > entries as usize {
                return Err(EINVAL);
            }
            return match (mapped, udata) {
                (Some(resp), Some(mut u)) => u.respond(&resp),
                _ => Ok(()),
            };
        }
        if mapped.is_some() {
            return self.resize_mapped(entries, udata.ok_or(EINVAL)?);
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
        let old = core::mem::replace(&mut st.entries, Entries::Kernel(ring));
        drop(st);
        drop(old);
        Ok(())
    }

    /// [`Self::resize`] of a mapped CQ to a larger ring: the old one is
    /// retired (the process maps the new one).
    fn resize_mapped(&self, entries: u32, mut udata: UserData<'_>) -> Result {
        let mut ring = CqRing::new(&mut udata, entries)?.ok_or(EINVAL)?;
        let mut st = self.state.lock();
        let moved = match &mut st.entries {
            Entries::Mapped(old) => ring.take_from(old),
            _ => Err(EINVAL),
        };
        if let Err(e) = moved {
            drop(st);
            ring.retire();
            return Err(e);
        }
        let old = core::mem::replace(&mut st.entries, Entries::Mapped(ring));
        drop(st);
        if let Entries::Mapped(old) = old {
            old.retire();
        }
        Ok(())
    }

    /// At destroy: the completions go now (a mapped ring's memory once its
    /// process unmapped it), not with the CQ's last reference, which a QP's
    /// work may hold a while longer; what still comes is dropped.
    pub(crate) fn close(&self) {
        let old = core::mem::replace(&mut self.state.lock().entries, Entries::Closed);
        // Outside the lock: freeing a ring may sleep.
        drop(old);
    }

    /// Drops the completions of the QP whose handle is `qp_handle`.
    ///
    /// A mapped CQ keeps them: its process reads them as rxe's do, and
    /// nothing in them points into the kernel.
    pub(crate) fn purge(&self, qp_handle: QpHandle) {
        if let Entries::Kernel(q) = &mut self.state.lock().entries {
            q.retain(|wc| wc.qp_handle != qp_handle);
        }
    }

    /// Arms the CQ; with `REPORT_MISSED_EVENTS`, 1 if completions wait.
    pub(crate) fn arm(&self, flags: u32) -> i32 {
        let mut st = self.state.lock();
        let kind = flags & cq_notify::SOLICITED_MASK;
        // NEXT_COMP includes solicited completions: never narrow an arm.
        if st.armed != cq_notify::NEXT_COMP {
            st.armed = kind;
        }
        i32::from(flags & cq_notify::REPORT_MISSED_EVENTS != 0 && st.entries.len() != 0)
    }
}
