// SPDX-License-Identifier: GPL-2.0

//! RDMA WRITEs and READs of one send queue, copied by the engine as one
//! burst.
//!
//! On the loopback fabric a WRITE or a READ is a copy between two regions
//! that have been mapped for the engine since their registration. Copied
//! one request at a time, each costs an engine round trip (the doorbell,
//! the engine's turn, the interrupt, the wake-up) before the next may
//! start, whatever its size. The QP's work item instead queues the copies
//! of consecutive WRITEs and READs whose checks passed, hands them to the
//! engine together, waits once ("flushes"), and then completes the
//! requests in order.
//!
//! The work item flushes before anything else it does with the queue: a
//! request of another kind (a SEND, an atomic, an immediate, an inline or
//! short request: its bytes must not overtake a queued copy), a request
//! that failed its checks (completions stay in order), a full burst, and
//! the end of its run. The engine ends descriptors in order, so a READ
//! queued after a WRITE of the same bytes reads what the WRITE wrote.
//!
//! A copy that failed fails its request, and the QP goes to ERR; the
//! requests queued after it were carried out, but complete as flushed, as
//! they would have had they not started.

use crate::{
    exec::{piece_pairs, Piece},
    mover::{CopyError, Span},
    qp::Qp,
    rdma::types::{wc_status, Wc},
    stats::Stats,
    user_pages::GateGuard,
};
use kernel::{prelude::*, sync::Arc};

/// Copies in a burst at most (the engine reports failures per copy in a
/// 64-bit mask).
const MAX_COPIES: usize = 64;

/// A queued request: its copy, and its completion.
struct Entry {
    dst: KVec<Piece>,
    src: KVec<Piece>,
    /// The completion of its success.
    wc: Wc,
    signaled: bool,
    /// Its first copy in the burst, and the number of its copies.
    first: usize,
    copies: usize,
}

/// One copy of a burst: between piece `d` of an entry's destination (from
/// byte `doff` of it) and piece `s` of its source (from `soff`).
struct Stretch {
    entry: usize,
    d: usize,
    doff: u64,
    s: usize,
    soff: u64,
    len: u64,
}

/// The requests a send queue's work item has queued for the engine.
pub(crate) struct SendBurst {
    entries: KVec<Entry>,
    copies: usize,
    /// The engine's gate, held from the first queued request to the flush.
    guard: Option<GateGuard>,
}

impl SendBurst {
    pub(crate) const fn new() -> Self {
        Self {
            entries: KVec::new(),
            copies: 0,
            guard: None,
        }
    }

    /// Queues the copy of `src` into `dst` (lists of `qp`'s regions, in
    /// list order) of a request that completes as `wc` (if `signaled`),
    /// flushing the burst first if it is full. Gives the lists back, the
    /// burst flushed, when the engine cannot take them (no channel, or a
    /// region with no mapping for it): the caller copies them, after
    /// every queued copy.
    pub(crate) fn queue(
        &mut self,
        qp: &Arc<Qp>,
        dst: KVec<Piece>,
        src: KVec<Piece>,
        wc: Wc,
        signaled: bool,
    ) -> core::result::Result<(), (KVec<Piece>, KVec<Piece>)> {
        // A refusal flushes: the caller's copy comes after every queued one.
        let refuse = |this: &mut Self, lists| {
            this.flush(qp);
            Err(lists)
        };
        let mut copies = 0;
        let _ = piece_pairs(&dst, &src, |_, _, _, _, _| {
            copies += 1;
            Ok::<(), ()>(())
        });
        if copies == 0 || copies > MAX_COPIES {
            return refuse(self, (dst, src));
        }
        if self.copies + copies > MAX_COPIES {
            self.flush(qp);
        }
        let mover = &qp.dev.mover;
        let engine = match self.guard.take() {
            Some(g) => mover.engine_with(g),
            None => mover.engine(),
        };
        let Some(engine) = engine else {
            return refuse(self, (dst, src));
        };
        let mapped = Iterator::chain(dst.iter(), src.iter())
            .all(|p| !p.mr.mem.segments_in(engine.guard()).is_empty());
        self.guard = Some(engine.into_guard());
        if !mapped || self.entries.reserve(1, GFP_KERNEL).is_err() {
            return refuse(self, (dst, src));
        }
        let entry = Entry {
            dst,
            src,
            wc,
            signaled,
            first: self.copies,
            copies,
        };
        // Room was reserved above.
        let _ = self.entries.push_within_capacity(entry);
        self.copies += copies;
        Ok(())
    }

    /// Copies the burst, waits for it, and completes its requests in
    /// order.
    pub(crate) fn flush(&mut self, qp: &Arc<Qp>) {
        let guard = self.guard.take();
        let entries = core::mem::take(&mut self.entries);
        let copies = core::mem::take(&mut self.copies);
        let (Some(guard), false) = (guard, entries.is_empty()) else {
            return;
        };
        // Without room for the list every request fails, as a copy that
        // could not start.
        let mut list = KVec::<Stretch>::with_capacity(copies, GFP_KERNEL).unwrap_or_default();
        for (i, e) in entries.iter().enumerate() {
            let _ = piece_pairs(&e.dst, &e.src, |d, doff, s, soff, len| {
                // Room for `copies` was reserved, if any.
                let _ = list.push_within_capacity(Stretch {
                    entry: i,
                    d,
                    doff,
                    s,
                    soff,
                    len,
                });
                Ok::<(), ()>(())
            });
        }
        let dev = &qp.dev;
        if entries.len() > 1 {
            Stats::add(&dev.stats.burst_wrs, entries.len() as u64);
        }
        let engine = dev.mover.engine_with(guard);
        let ended = match &engine {
            Some(engine) if list.len() == copies => {
                let g = engine.guard();
                let ends = |c: &Stretch| {
                    let e = &entries[c.entry];
                    let (d, s) = (&e.dst[c.d], &e.src[c.s]);
                    (d, d.offset + c.doff, s, s.offset + c.soff)
                };
                for c in list.iter() {
                    let (d, doff, s, soff) = ends(c);
                    s.mr.mem.sync_in(g, soff, c.len, true);
                    d.mr.mem.sync_in(g, doff, c.len, true);
                }
                let span = |i: usize| {
                    let c = &list[i];
                    let (d, doff, s, soff) = ends(c);
                    Span {
                        dst: d.mr.mem.segments_in(g),
                        dst_off: doff,
                        src: s.mr.mem.segments_in(g),
                        src_off: soff,
                        len: c.len,
                    }
                };
                // SAFETY: Every span's lists are its regions' mappings for
                // the engine's device, valid while `engine` holds the gate
                // (until this returns); the regions are held by the
                // entries, whose ranges `resolve` checked. If the channel
                // cannot be stopped, the regions are kept for good below.
                let ended = unsafe { dev.mover.copy_burst(engine, &dev.stats, list.len(), span) };
                if ended != Err(CopyError::Stuck) {
                    for c in list.iter() {
                        let (d, doff, _, _) = ends(c);
                        d.mr.mem.sync_in(g, doff, c.len, false);
                    }
                }
                ended
            }
            _ => Err(CopyError::Failed),
        };
        let (failed, status) = match ended {
            Ok(mask) => (mask, wc_status::LOC_QP_OP_ERR),
            Err(CopyError::Failed) => (u64::MAX, wc_status::LOC_QP_OP_ERR),
            Err(CopyError::Stuck) => {
                for p in entries
                    .iter()
                    .flat_map(|e| Iterator::chain(e.dst.iter(), e.src.iter()))
                {
                    p.mr.leak();
                }
                (u64::MAX, wc_status::FATAL_ERR)
            }
        };
        let mut broken = false;
        for e in entries.iter() {
            if broken {
                qp.complete_send(Wc {
                    status: wc_status::WR_FLUSH_ERR,
                    byte_len: 0,
                    ..e.wc
                });
                continue;
            }
            let mine = (e.first..e.first + e.copies).fold(0u64, |m, i| m | 1 << i);
            if failed & mine != 0 {
                // An error completes whether or not it was signalled.
                qp.complete_send(Wc {
                    status,
                    byte_len: 0,
                    ..e.wc
                });
                qp.enter_error();
                broken = true;
            } else if e.signaled {
                qp.complete_send(e.wc);
            }
        }
    }
}
