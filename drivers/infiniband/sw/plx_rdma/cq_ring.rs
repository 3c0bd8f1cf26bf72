// SPDX-License-Identifier: GPL-2.0

//! A user CQ's ring, mapped into its process: the provider
//! (`providers/plx_rdma/plx_rdma.c`) polls it with loads, no system call.
//!
//! Layout (the provider's `PLX_RDMA_RING_*` and `struct plx_rdma_cqe`,
//! keep both in step):
//! the producer index at byte 0, written by the kernel only; the consumer
//! index at byte 64 (its own cache line), written by the process only;
//! completions from byte 128 on, [`ENTRY_WORDS`] 32-bit words each. An
//! index runs over `0..2 * capacity`: its slot is the index, or the index
//! less the capacity, so that a full ring and an empty one differ without
//! a division. The producer publishes an entry with a release store of its
//! index; the process gives slots back with a release store of its own.
//!
//! The process may write anything anywhere in the ring. The kernel keeps
//! its producer index to itself, and a consumer index out of range reads
//! as a full ring: completions are then lost (and reported as an overflow,
//! `IB_EVENT_CQ_ERR`) to that process alone.

use crate::plain_data::impl_plain_data;
use crate::rdma::{
    types::Wc,
    user_ring::{UserData, UserRing},
};
use kernel::{
    prelude::*,
    sync::atomic::{Acquire, Release},
};

/// Byte offset of the producer index.
const PRODUCER: usize = 0;
/// Byte offset of the consumer index.
const CONSUMER: usize = 64;
/// Byte offset of the first completion.
const ENTRIES: usize = 128;
/// 32-bit words per completion: `wr_id` (two), `status`, `opcode`,
/// `byte_len`, `imm_data`, `qp_num`, `src_qp`, `wc_flags`,
/// `network_hdr_type`, two reserved.
const ENTRY_WORDS: usize = 12;

/// The driver's part of the create and resize responses of a mapped CQ:
/// where the process maps its ring (`struct plx_rdma_cq_resp`).
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct CqResp {
    offset: u64,
    size: u32,
    capacity: u32,
}
impl_plain_data!(CqResp {
    offset: u64,
    size: u32,
    capacity: u32,
});

/// The kernel's side of a mapped CQ ring.
pub(crate) struct CqRing {
    ring: UserRing,
    capacity: u32,
    /// The producer index, as the kernel last published it.
    producer: u32,
}

impl CqRing {
    /// A ring of `capacity` completions in the process `udata` belongs to,
    /// if it left room for the ring's whereabouts in its response.
    pub(crate) fn new(udata: &mut UserData<'_>, capacity: u32) -> Result<Option<Self>> {
        if udata.response_room() < core::mem::size_of::<CqResp>() {
            return Ok(None);
        }
        let size = (capacity as usize)
            .checked_mul(ENTRY_WORDS * 4)
            .and_then(|n| n.checked_add(ENTRIES))
            .ok_or(EINVAL)?;
        capacity.checked_mul(2).ok_or(EINVAL)?;
        let ring = udata.new_ring(size)?;
        let ring = Self {
            ring,
            capacity,
            producer: 0,
        };
        udata.respond(&ring.response())?;
        Ok(Some(ring))
    }

    /// Where the process finds the ring.
    pub(crate) fn response(&self) -> CqResp {
        CqResp {
            offset: self.ring.offset(),
            size: u32::try_from(self.ring.size()).unwrap_or(u32::MAX),
            capacity: self.capacity,
        }
    }

    /// Completions the ring holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity as usize
    }

    fn next(&self, i: u32) -> u32 {
        if i + 1 == 2 * self.capacity {
            0
        } else {
            i + 1
        }
    }

    fn slot(&self, i: u32) -> usize {
        let s = if i >= self.capacity {
            i - self.capacity
        } else {
            i
        };
        ENTRIES + s as usize * ENTRY_WORDS * 4
    }

    /// The process's consumer index, `None` if out of range or ahead of
    /// the producer by more than the ring holds.
    fn consumer(&self) -> Option<u32> {
        let c = self.ring.word(CONSUMER)?.load(Acquire);
        (c < 2 * self.capacity && self.distance(c) <= self.capacity).then_some(c)
    }

    /// Entries from index `c` up to the producer.
    fn distance(&self, c: u32) -> u32 {
        if self.producer >= c {
            self.producer - c
        } else {
            self.producer + 2 * self.capacity - c
        }
    }

    /// Completions waiting for the process; a corrupt consumer index counts
    /// as a full ring.
    pub(crate) fn len(&self) -> usize {
        match self.consumer() {
            Some(c) => self.distance(c) as usize,
            None => self.capacity(),
        }
    }

    /// Appends `wc`, or gives it back when the ring is full.
    pub(crate) fn push(&mut self, wc: Wc) -> core::result::Result<(), Wc> {
        if self.len() >= self.capacity() {
            return Err(wc);
        }
        let id = wc.wr_id.to_ne_bytes();
        let words: [u32; ENTRY_WORDS] = [
            u32::from_ne_bytes([id[0], id[1], id[2], id[3]]),
            u32::from_ne_bytes([id[4], id[5], id[6], id[7]]),
            wc.status,
            wc.opcode,
            wc.byte_len,
            wc.imm_data,
            wc.qp_num,
            wc.src_qp,
            wc.wc_flags,
            wc.network_hdr_type,
            0,
            0,
        ];
        if self.ring.write(self.slot(self.producer), &words).is_err() {
            return Err(wc);
        }
        self.producer = self.next(self.producer);
        match self.ring.word(PRODUCER) {
            Some(w) => w.store(self.producer, Release),
            None => return Err(wc),
        }
        Ok(())
    }

    /// Takes the oldest completion, for a process that polls through the
    /// kernel all the same.
    pub(crate) fn pop(&mut self) -> Option<Wc> {
        let c = self.consumer()?;
        if c == self.producer {
            return None;
        }
        let mut w = [0u32; ENTRY_WORDS];
        self.ring.read(self.slot(c), &mut w).ok()?;
        self.ring.word(CONSUMER)?.store(self.next(c), Release);
        let (lo, hi) = (w[0].to_ne_bytes(), w[1].to_ne_bytes());
        Some(Wc {
            wr_id: u64::from_ne_bytes([lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]]),
            status: w[2],
            opcode: w[3],
            byte_len: w[4],
            imm_data: w[5],
            qp_num: w[6],
            src_qp: w[7],
            wc_flags: w[8],
            network_hdr_type: w[9],
            ..Wc::default()
        })
    }

    /// Withdraws the ring from its process's reach (a larger one took its
    /// place).
    pub(crate) fn retire(self) {
        self.ring.retire();
    }

    /// Moves the completions of `old` into this ring, oldest first;
    /// `EINVAL` if they do not fit.
    pub(crate) fn take_from(&mut self, old: &mut CqRing) -> Result {
        if old.len() > self.capacity() {
            return Err(EINVAL);
        }
        while let Some(wc) = old.pop() {
            self.push(wc).map_err(|_| EINVAL)?;
        }
        Ok(())
    }
}
