// SPDX-License-Identifier: GPL-2.0

//! RDMA READ responses still to be sent.
//!
//! A READ of `n` path MTUs is answered with `n` responses. Were they all
//! sent at once, by the receive work item that took the request, every
//! datagram queued behind it would wait as long, the responses and
//! acknowledges this device's own requesters wait for among them. Between
//! two QPs of one device that is fatal to a long READ: its 1,024
//! responses (1 MiB) sit in the queue behind their own responder while
//! the requester's timer runs, and on a slow machine the timer wins.
//!
//! So the receive work item keeps the READs it answers here and sends
//! [`BATCH`] responses of one of them at a time, between the datagrams it
//! takes (`net::Rx`): answers first, then a batch, then a request. The
//! list is the work item's own ([`WorkList`]).
//!
//! A QP's responses still leave in PSN order, before anything else it
//! sends as a responder: a new request for a QP whose READ is not all
//! sent first sends the rest ([`Replies::finish`]), and a READ asked
//! again, which starts at the first response its requester lacks, takes
//! the place of the one being sent ([`Replies::start`]).
//!
//! The region is looked up by its R_Key again for each batch, so that a
//! long READ does not hold it between batches; one deregistered in the
//! meantime ends the READ with a remote access NAK, as at its first
//! response.

use crate::{qp::Qp, rc::send_read_responses, wire::psn::Psn, work_list::WorkList};
use kernel::{prelude::*, sync::Arc};

/// Responses sent in a row before the receive work item looks at its
/// queue again.
pub(crate) const BATCH: u32 = 16;

/// A READ being answered.
pub(crate) struct Reply {
    pub(crate) qp: Arc<Qp>,
    /// The QP's [`crate::qp::QpState::epoch`] when the READ came: one
    /// reset since ends it.
    pub(crate) epoch: u32,
    /// The PSN of response 0, and how many responses the READ has.
    pub(crate) first: Psn,
    pub(crate) n: u32,
    /// The next response to send.
    pub(crate) next: u32,
    /// The MSN the responses carry.
    pub(crate) msn: u32,
    /// What the request asked for: R_Key, address, length.
    pub(crate) rkey: u32,
    pub(crate) va: u64,
    pub(crate) len: u64,
    /// Payload bytes per response.
    pub(crate) mtu: u64,
}

/// The READs the receive work item answers.
pub(crate) struct Replies {
    list: WorkList<Reply>,
}

impl Replies {
    pub(crate) const fn new() -> Self {
        Self {
            list: WorkList::new(),
        }
    }

    /// Whether no READ is left to answer.
    pub(crate) fn is_empty(&self) -> bool {
        self.list.with(|l| l.is_empty())
    }

    /// Takes `qp`'s READ out of the list.
    fn take(&self, qp: &Qp) -> Option<Reply> {
        self.list.with(|l| {
            let i = l.iter().position(|r| core::ptr::eq(&*r.qp, qp))?;
            l.remove(i).ok()
        })
    }

    /// Answers `reply` from now on, in place of a READ of the same QP
    /// being answered (`reply` asks again for the rest of it). Where the
    /// list cannot grow, the READ is answered at once, whole.
    pub(crate) fn start(&self, reply: Reply) {
        drop(self.take(&reply.qp));
        let refused = self.list.with(|l| match l.reserve(1, GFP_KERNEL) {
            Ok(()) => l.push_within_capacity(reply).err().map(|e| e.0),
            Err(_) => Some(reply),
        });
        if let Some(mut reply) = refused {
            send_read_responses(&mut reply, u32::MAX);
        }
    }

    /// Sends what is left of `qp`'s READ, if one is being answered.
    pub(crate) fn finish(&self, qp: &Qp) {
        if let Some(mut reply) = self.take(qp) {
            send_read_responses(&mut reply, u32::MAX);
        }
    }

    /// Sends a batch of the oldest READ's responses; a READ with more
    /// left goes to the back of the list, so that the READs of several
    /// QPs take turns.
    pub(crate) fn send_batch(&self) {
        let Some(mut reply) = self
            .list
            .with(|l| (!l.is_empty()).then(|| l.remove(0).ok()).flatten())
        else {
            return;
        };
        if send_read_responses(&mut reply, BATCH) {
            // Cannot fail: the list had room for it a moment ago.
            let _ = self.list.with(|l| l.push_within_capacity(reply));
        }
    }

    /// Forgets every READ (the port shuts down).
    pub(crate) fn clear(&self) {
        drop(self.list.take_all());
    }
}
