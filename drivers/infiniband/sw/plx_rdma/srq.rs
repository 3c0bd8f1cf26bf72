// SPDX-License-Identifier: GPL-2.0

//! Shared receive queues: receive requests posted once, taken by whichever
//! of the QPs attached to the queue a message comes to first.
//!
//! A QP with an SRQ takes its receives here instead of from its own
//! receive queue (which it then has none of), on both fabrics and for
//! datagrams as for RC. The limit, once armed, raises
//! `IB_EVENT_SRQ_LIMIT_REACHED` the first time a take leaves fewer
//! receives than it, and disarms itself, as verbs says and rxe does.

use crate::{
    pd::Pd,
    qp::{RecvWqe, MAX_SGE},
    rdma::{
        srq::SrqNotifier,
        types::{srq_mask, RecvWr, Sge, SrqAttr},
    },
    wq::WorkQueue,
};
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{Arc, SpinLock},
};

/// Receive requests an SRQ holds at most: more than a QP's own queue, since
/// several QPs draw on one (rdma-core's tests ask for 1,000 per QP). The
/// ring is charged to the creator's memory cgroup.
pub(crate) const MAX_SRQ_WR: u32 = 16384;

/// A shared receive queue.
#[pin_data]
pub(crate) struct Srq {
    pub(crate) pd: Arc<Pd>,
    notifier: Arc<SrqNotifier>,
    #[pin]
    state: SpinLock<SrqState>,
}

struct SrqState {
    rq: WorkQueue<RecvWqe>,
    max_sge: u32,
    /// The armed limit; 0 when not armed.
    limit: u32,
}

impl Srq {
    /// A queue of `attr.max_wr` receives of `attr.max_sge` entries each,
    /// on `pd`; `attr` comes back with what is granted (`EINVAL` above the
    /// device's limits). A limit given at creation is not armed (verbs
    /// arms it with a modify).
    pub(crate) fn new(
        pd: Arc<Pd>,
        attr: &mut SrqAttr,
        notifier: Arc<SrqNotifier>,
    ) -> Result<Arc<Self>> {
        if attr.max_wr > MAX_SRQ_WR || attr.max_sge > MAX_SGE {
            return Err(EINVAL);
        }
        attr.max_wr = attr.max_wr.max(1);
        attr.srq_limit = 0;
        let rq = WorkQueue::new(attr.max_wr as usize)?;
        Arc::pin_init(
            try_pin_init!(Self {
                pd,
                notifier,
                state <- new_spinlock!(SrqState {
                    rq,
                    max_sge: attr.max_sge,
                    limit: 0,
                }, "plx_rdma_srq"),
            }),
            GFP_KERNEL,
        )
    }

    /// Queues a receive: `EINVAL` for too many entries, `ENOMEM` when the
    /// queue is full.
    pub(crate) fn post_recv(&self, wr: &RecvWr<'_>) -> Result {
        let mut st = self.state.lock();
        if wr.sges.len() > st.max_sge as usize {
            return Err(EINVAL);
        }
        let mut wqe = RecvWqe {
            wr_id: wr.wr_id,
            sges: [Sge::default(); MAX_SGE as usize],
            num_sge: wr.sges.len(),
            kmem: None,
        };
        wqe.sges[..wr.sges.len()].copy_from_slice(wr.sges);
        st.rq.push(wqe)
    }

    /// Takes the oldest receive; raises the limit event if this take
    /// crossed the armed limit.
    pub(crate) fn take(&self) -> Option<RecvWqe> {
        let mut st = self.state.lock();
        let wqe = st.rq.pop()?;
        let crossed = st.limit != 0 && st.rq.len() < st.limit as usize;
        if crossed {
            st.limit = 0;
        }
        drop(st);
        if crossed {
            self.notifier.limit_reached();
        }
        Some(wqe)
    }

    /// Whether a receive is queued.
    pub(crate) fn has_recv(&self) -> bool {
        !self.state.lock().rq.is_empty()
    }

    /// Resizes the queue (`srq_mask::MAX_WR`: not below the receives it
    /// holds, nor above the device's limit) and arms the limit
    /// (`srq_mask::LIMIT`: at most the queue's size), as rxe checks them.
    pub(crate) fn modify(&self, attr: &SrqAttr, mask: u32) -> Result {
        if mask & !(srq_mask::MAX_WR | srq_mask::LIMIT) != 0 {
            return Err(EINVAL);
        }
        // The new ring is allocated before the lock is taken.
        let grown = match mask & srq_mask::MAX_WR {
            0 => None,
            _ if attr.max_wr == 0 || attr.max_wr > MAX_SRQ_WR => return Err(EINVAL),
            _ => Some(WorkQueue::new(attr.max_wr as usize)?),
        };
        let mut st = self.state.lock();
        let size = grown.as_ref().map_or(st.rq.capacity(), |q| q.capacity());
        if mask & srq_mask::LIMIT != 0 && attr.srq_limit as usize > size {
            drop(st);
            return Err(EINVAL);
        }
        let mut old = None;
        if let Some(mut q) = grown {
            if st.rq.len() > q.capacity() {
                drop(st);
                return Err(EINVAL);
            }
            while let Some(w) = st.rq.pop() {
                // Room was checked above.
                let _ = q.try_push(w);
            }
            old = Some(core::mem::replace(&mut st.rq, q));
        }
        if mask & srq_mask::LIMIT != 0 {
            st.limit = attr.srq_limit;
        }
        drop(st);
        // Freed outside the lock: a large ring is vmalloc'ed.
        drop(old);
        Ok(())
    }

    /// The queue's size, entries and armed limit.
    pub(crate) fn query(&self) -> SrqAttr {
        let st = self.state.lock();
        SrqAttr {
            max_wr: st.rq.capacity() as u32,
            max_sge: st.max_sge,
            srq_limit: st.limit,
        }
    }
}
