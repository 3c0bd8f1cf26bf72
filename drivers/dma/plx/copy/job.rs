// SPDX-License-Identifier: GPL-2.0

//! One user copy: its two ranges pinned and mapped, and the descriptors
//! that move it.
//!
//! The source and destination map to different lists of DMA segments; a
//! descriptor covers the overlap of the current source and destination
//! segment, never more than the channel's longest descriptor.
//!
//! A copy between registered regions pins and maps nothing: it holds a
//! reference on each region, which keeps the pages pinned and mapped until
//! the copy is reaped, even if the region is deregistered meanwhile.

use crate::{
    abi::CopyReq,
    dmaengine::client::MemcpyChannel,
    pins::{FilePins, PinReservation},
    region::Region,
    user_pages::{Access, Chunks, PinDuration, SegmentCursor, UserDma},
};
use kernel::{prelude::*, sync::Arc};

/// Limits a copy is checked against.
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    /// Longest copy (bytes).
    pub(crate) max_len: u64,
    /// Pages all files may pin at once.
    pub(crate) max_pinned_pages: u64,
}

/// A copy whose memory is pinned (then mapped) until it is reaped or its
/// device goes away; dropping it unmaps and unpins (it may sleep).
pub(crate) struct Job {
    pub(crate) req: CopyReq,
    memory: Option<Memory>,
}

/// The memory a [`Job`] copies through.
enum Memory {
    /// Pinned for this copy alone.
    Own(Mapped),
    /// Registered regions, at the request's offsets. Dropped with the
    /// file's lock held (see [`crate::region`]).
    Registered { src: Arc<Region>, dst: Arc<Region> },
}

/// The pinned memory of a [`Job`], mapped once [`Job::map`] succeeded.
struct Mapped {
    src: UserDma,
    dst: UserDma,
    /// Held for its `Drop`: gives the pages back to the file's count.
    _pins: PinReservation,
}

impl Job {
    /// Checks `req`, reserves its pages in `file`'s share and pins both
    /// ranges, for the CPU only as yet: [`Self::map`] maps them.
    ///
    /// This is the part of queueing a copy that touches user memory and so
    /// may wait on page faults indefinitely: callers hold no lock.
    ///
    /// Errors: `EINVAL` for a zero length or overlapping ranges, `E2BIG`
    /// beyond `limits.max_len`, `EFAULT` for a range that wraps, is not
    /// mapped, or (the destination) is not writable, `EAGAIN` when the
    /// pin bound or the file's share of it is reached, `ENOMEM` beyond the
    /// caller's `RLIMIT_MEMLOCK`.
    pub(crate) fn pin(
        req: CopyReq,
        limits: Limits,
        duration: PinDuration,
        file: &Arc<FilePins>,
    ) -> Result<Self> {
        if req.len == 0 {
            return Err(EINVAL);
        }
        if req.len > limits.max_len {
            return Err(E2BIG);
        }
        let len = usize::try_from(req.len).map_err(|_| E2BIG)?;
        let src = usize::try_from(req.src).map_err(|_| EFAULT)?;
        let dst = usize::try_from(req.dst).map_err(|_| EFAULT)?;
        let src_end = src.checked_add(len).ok_or(EFAULT)?;
        let dst_end = dst.checked_add(len).ok_or(EFAULT)?;
        if src < dst_end && dst < src_end {
            return Err(EINVAL);
        }
        let pages = UserDma::pages_spanned(src, len).ok_or(EFAULT)?
            + UserDma::pages_spanned(dst, len).ok_or(EFAULT)?;
        let pins = PinReservation::take(pages as u64, file, limits.max_pinned_pages)?;
        let src_pin = UserDma::pin(src, len, Access::ToDevice, duration)?;
        let dst_pin = UserDma::pin(dst, len, Access::FromDevice, duration)?;
        Ok(Self {
            req,
            memory: Some(Memory::Own(Mapped {
                src: src_pin,
                dst: dst_pin,
                _pins: pins,
            })),
        })
    }

    /// A copy of `req` from offset `req.src` of `src` to offset `req.dst`
    /// of `dst`, which are already pinned and mapped: nothing is pinned,
    /// mapped or allocated. Called, and the job later dropped, with the
    /// file's lock held.
    ///
    /// Errors: `EINVAL` for a zero length, a range not inside its region
    /// (or whose end overflows) or ranges that overlap in user memory,
    /// `E2BIG` beyond `limits.max_len`, `EACCES` for a source region not
    /// registered readable or a destination region not registered
    /// writable.
    pub(crate) fn registered(
        req: CopyReq,
        limits: Limits,
        src: &Arc<Region>,
        dst: &Arc<Region>,
    ) -> Result<Self> {
        if req.len == 0 {
            return Err(EINVAL);
        }
        if req.len > limits.max_len {
            return Err(E2BIG);
        }
        let s = src.span(req.src, req.len)?;
        let d = dst.span(req.dst, req.len)?;
        if !src.readable() || !dst.writable() {
            return Err(EACCES);
        }
        // Both spans lie inside user ranges that were pinned, so neither
        // end overflows; `len` fits since the spans do.
        let len = req.len as usize;
        if s < d + len && d < s + len {
            return Err(EINVAL);
        }
        Ok(Self {
            req,
            memory: Some(Memory::Registered {
                src: src.clone(),
                dst: dst.clone(),
            }),
        })
    }

    /// Maps the pinned ranges for `chan`'s device; touches no user memory.
    /// Registered regions are mapped already.
    ///
    /// Errors: `ENODEV` once unmapped, or the error of the DMA API.
    pub(crate) fn map(&mut self, chan: &MemcpyChannel) -> Result {
        match self.memory.as_mut().ok_or(ENODEV)? {
            Memory::Own(m) => {
                let dev = chan.device();
                m.src.attach(dev)?;
                m.dst.attach(dev)
            }
            Memory::Registered { .. } => Ok(()),
        }
    }

    /// Unmaps and unpins now (for registered regions: drops the copy's
    /// references on them), keeping what reaping reports. For a device
    /// going away: the copy must be stopped first.
    pub(crate) fn unmap(&mut self) {
        self.memory = None;
    }

    /// Gives up the copy's memory without unpinning or unmapping it: for a
    /// channel that could not be stopped, whose engine may still write it.
    /// The pages stay pinned (and charged) until reboot; that is the price
    /// of never letting a device write freed memory.
    pub(crate) fn abandon(&mut self) {
        if let Some(m) = self.memory.take() {
            core::mem::forget(m);
        }
    }

    /// The descriptors of this copy, none longer than `max_seg` bytes;
    /// none once unmapped.
    pub(crate) fn chunks(&self, max_seg: u32) -> Chunks<'_> {
        let (src, src_off, dst, dst_off) = match &self.memory {
            Some(Memory::Own(m)) => (m.src.segments(), 0, m.dst.segments(), 0),
            Some(Memory::Registered { src, dst }) => {
                (src.segments(), self.req.src, dst.segments(), self.req.dst)
            }
            None => (&[][..], 0, &[][..], 0),
        };
        Chunks::new(
            SegmentCursor::new(dst, dst_off),
            SegmentCursor::new(src, src_off),
            self.req.len,
            max_seg,
        )
    }
}
