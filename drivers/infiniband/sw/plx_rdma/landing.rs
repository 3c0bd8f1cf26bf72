// SPDX-License-Identifier: GPL-2.0

//! Received payloads on their way into memory regions.
//!
//! The receive work item takes packets one after the other. A payload the
//! engine is to place is not copied at once: the copy joins the burst of
//! the packets before it. A burst goes to the engine as one: its payloads
//! mapped for the engine together (one IOVA range, one IOTLB sync, one
//! invalidation when it ended), its descriptors handed over together, one
//! start of the channel, an interrupt at its end (and every few copies),
//! one wait. On an emulated engine behind an emulated IOMMU each mapping,
//! start and interrupt is a round trip through the hypervisor, so a burst
//! costs them once instead of once per packet. A burst whose payloads
//! could not be mapped is written by the CPU, in order.
//!
//! A copy must have ended before anything says that its bytes are there.
//! So the work item copies the burst and waits for it ("settles") before
//! it
//! - sends an acknowledge or a NAK (either tells the requester how far the
//!   responder executed);
//! - completes a receive, or the READ whose responses it placed (at a
//!   message's last packet);
//! - reads a region for a READ response or an atomic;
//! - has the CPU write a payload (an earlier copy must not land after it);
//! - goes idle;
//!
//! and when [`MAX_BURST`] copies wait, or a copy for another device (whose
//! engine is another channel) comes.
//!
//! A copy that failed marks its QP; the QP's next settle reports it, and
//! the caller then fails what it was about to confirm, as it would had
//! the copy failed at once.

use crate::{
    mover::{CopyError, Span},
    mr::MrUse,
    qp::Qp,
    replies::Replies,
    skb_dma::{SkbBurstDma, SkbPart},
    udp_tunnel::LinearSkb,
    user_pages::{GateGuard, Segment},
    work_list::WorkList,
};
use kernel::{
    prelude::*,
    sync::{atomic::Relaxed, Arc},
};

/// Copies in a burst at most (the engine reports failures per copy in a
/// 64-bit mask).
const MAX_BURST: usize = 64;

/// A received datagram, the burst its payload's copies join, and the READs
/// its device's QPs answer.
pub(crate) struct Incoming<'a> {
    pub(crate) skb: &'a Arc<LinearSkb>,
    pub(crate) landing: &'a Landing,
    pub(crate) replies: &'a Replies,
}

/// The copies the receive work item has not handed to the engine yet
/// (its own list: nothing done while the list is worked on comes back to
/// the landing).
pub(crate) struct Landing {
    copies: WorkList<Pending>,
}

/// One payload to copy: its bytes, and the region they go to.
struct Pending {
    qp: Arc<Qp>,
    dst: MrUse,
    at: u64,
    src: SkbPart,
    /// The payload's bus address, once its burst is mapped.
    seg: [Segment; 1],
    /// Holds the engine's mappings (the region's, the burst's) until the
    /// copy ended.
    gate: GateGuard,
}

impl Landing {
    pub(crate) const fn new() -> Self {
        Self {
            copies: WorkList::new(),
        }
    }

    /// Adds the copy of `src` by `qp`'s engine (held by `gate`) to byte
    /// `at` of the region `dst` to the burst.
    pub(crate) fn start(
        &self,
        qp: &Arc<Qp>,
        dst: MrUse,
        at: u64,
        src: SkbPart,
        gate: GateGuard,
    ) -> Result {
        let full_or_other = self.copies.with(|c| {
            c.len() >= MAX_BURST || c.first().is_some_and(|p| !Arc::ptr_eq(&p.qp.dev, &qp.dev))
        });
        if full_or_other {
            self.settle_all();
        }
        let seg = [Segment {
            addr: 0,
            len: src.len(),
        }];
        let entry = Pending {
            qp: qp.clone(),
            dst,
            at,
            src,
            seg,
            gate,
        };
        self.copies.with(|c| c.push(entry, GFP_KERNEL))?;
        Ok(())
    }

    /// Copies the burst and waits for it. A failed copy marks its QP.
    pub(crate) fn settle_all(&self) {
        let mut copies = self.copies.take_all();
        if let Some(first) = copies.first() {
            let dev = first.qp.dev.clone();
            // Every entry holds the gate: the engine is there.
            let engine = dev.mover.engine_with(first.gate.clone());
            let burst = match &engine {
                Some(e) => match SkbBurstDma::map(e.device(), copies.iter().map(|p| &p.src)) {
                    Ok(burst) => Some(burst),
                    Err(_) => {
                        Self::write_by_cpu(&mut copies);
                        None
                    }
                },
                None => None,
            };
            if let Some(burst) = &burst {
                for (i, p) in copies.iter_mut().enumerate() {
                    // `map` gave an address for every entry.
                    p.seg[0].addr = burst.addr(i).unwrap_or(0);
                }
            }
            let span = |i: usize| {
                let p = &copies[i];
                let dst = p.dst.mem.segments_in(&p.gate);
                let fits =
                    p.at.checked_add(u64::from(p.src.len()))
                        .is_some_and(|end| end <= p.dst.mem.len() as u64);
                Span {
                    dst,
                    dst_off: p.at,
                    src: &p.seg,
                    src_off: 0,
                    // A copy out of its region's range is given no bytes,
                    // and fails.
                    len: if fits { u64::from(p.src.len()) } else { 0 },
                }
            };
            for p in copies.iter() {
                p.dst
                    .mem
                    .sync_in(&p.gate, p.at, u64::from(p.src.len()), true);
            }
            let ended = match (&engine, &burst) {
                // SAFETY: Each span's destination is a region's mapping for
                // the engine's device, valid while the entry's guard lives
                // (`segments_in`), the region held by the entry (`dst`);
                // its source the payload's bytes, mapped for that device
                // by `burst`. The entries and `burst` live until the burst
                // ended, and are kept for good below if the channel could
                // not be stopped.
                (Some(e), Some(b)) if core::ptr::eq(e.device(), b.device()) => unsafe {
                    dev.mover.copy_burst(e, &dev.stats, copies.len(), span)
                },
                _ => Err(CopyError::Failed),
            };
            let failed = match ended {
                Ok(mask) => mask,
                Err(CopyError::Failed) => u64::MAX,
                Err(CopyError::Stuck) => {
                    core::mem::forget(burst);
                    for p in copies.drain_all() {
                        p.dst.leak();
                        p.qp.state.lock().rc.landing_failed = true;
                    }
                    0
                }
            };
            for (i, p) in copies.drain_all().enumerate() {
                // What the engine wrote (a failed copy: part of it) is
                // made the CPU's.
                p.dst
                    .mem
                    .sync_in(&p.gate, p.at, u64::from(p.src.len()), false);
                if failed & (1 << i) != 0 {
                    p.qp.state.lock().rc.landing_failed = true;
                } else {
                    let n = u64::from(p.src.len());
                    dev.wire_stats.rx_payload_engine_bytes.fetch_add(n, Relaxed);
                }
            }
        }
        // Keep the allocation for the next burst.
        self.copies.put_back(copies);
    }

    /// Writes a burst whose payloads could not be mapped for the engine by
    /// the CPU, in order, and empties it.
    fn write_by_cpu(copies: &mut KVec<Pending>) {
        for p in copies.drain_all() {
            let written = usize::try_from(p.at)
                .map_err(|_| EFAULT)
                .and_then(|at| p.dst.mem.write_at(at, p.src.bytes()));
            match written {
                Ok(()) => {
                    let n = u64::from(p.src.len());
                    let stats = &p.qp.dev.wire_stats;
                    stats.rx_payload_cpu_bytes.fetch_add(n, Relaxed);
                }
                Err(_) => p.qp.state.lock().rc.landing_failed = true,
            }
        }
    }

    /// Copies the burst and waits for it; `EIO` if one of `qp`'s copies
    /// failed since its last settle. The QP's state lock must not be held.
    pub(crate) fn settle(&self, qp: &Qp) -> Result {
        self.settle_all();
        if core::mem::take(&mut qp.state.lock().rc.landing_failed) {
            return Err(EIO);
        }
        Ok(())
    }
}
