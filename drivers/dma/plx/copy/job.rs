// SPDX-License-Identifier: GPL-2.0

//! One user copy: its two ranges pinned and mapped, and the descriptors
//! that move it.
//!
//! The source and destination map to different lists of DMA segments; a
//! descriptor covers the overlap of the current source and destination
//! segment, never more than the channel's longest descriptor.

use crate::{
    abi::CopyReq,
    dmaengine::client::MemcpyChannel,
    pins::PinReservation,
    user_pages::{Access, Chunks, PinDuration, SegmentCursor, UserDma},
};
use kernel::prelude::*;

/// Limits a copy is checked against.
#[derive(Clone, Copy)]
pub(crate) struct Limits {
    /// Longest copy (bytes).
    pub(crate) max_len: u64,
    /// Pages all files may pin at once.
    pub(crate) max_pinned_pages: u64,
}

/// A copy whose memory is pinned and mapped until it is reaped or its
/// device goes away; dropping it unmaps and unpins (it may sleep).
pub(crate) struct Job {
    pub(crate) req: CopyReq,
    mapped: Option<Mapped>,
}

/// The pinned and mapped memory of a [`Job`].
struct Mapped {
    src: UserDma,
    dst: UserDma,
    pins: PinReservation,
}

impl Job {
    /// Checks `req`, reserves its pages (for a file that has `file_pinned`
    /// pinned already) and pins and maps both ranges for `chan`'s device.
    ///
    /// Errors: `EINVAL` for a zero length or overlapping ranges, `E2BIG`
    /// beyond `limits.max_len`, `EFAULT` for a range that wraps, is not
    /// mapped, or (the destination) is not writable, `EAGAIN` when the
    /// pin bound or the file's share of it is reached, `ENOMEM` beyond the
    /// caller's `RLIMIT_MEMLOCK`.
    pub(crate) fn map(
        chan: &MemcpyChannel,
        req: CopyReq,
        limits: Limits,
        duration: PinDuration,
        file_pinned: u64,
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
        let pins = PinReservation::take(pages as u64, file_pinned, limits.max_pinned_pages)?;
        let dev = chan.device();
        let src_map = UserDma::map(dev, src, len, Access::ToDevice, duration)?;
        let dst_map = UserDma::map(dev, dst, len, Access::FromDevice, duration)?;
        Ok(Self {
            req,
            mapped: Some(Mapped {
                src: src_map,
                dst: dst_map,
                pins,
            }),
        })
    }

    /// Unmaps and unpins now, keeping what reaping reports. For a device
    /// going away: the copy must be stopped first.
    pub(crate) fn unmap(&mut self) {
        self.mapped = None;
    }

    /// The pages this copy holds pinned (none once unmapped).
    pub(crate) fn pinned_pages(&self) -> u64 {
        self.mapped.as_ref().map_or(0, |m| m.pins.pages())
    }

    /// Gives up the copy's memory without unpinning or unmapping it: for a
    /// channel that could not be stopped, whose engine may still write it.
    /// The pages stay pinned (and charged) until reboot; that is the price
    /// of never letting a device write freed memory.
    pub(crate) fn abandon(&mut self) {
        if let Some(m) = self.mapped.take() {
            core::mem::forget(m);
        }
    }

    /// The descriptors of this copy, none longer than `max_seg` bytes;
    /// none once unmapped.
    pub(crate) fn chunks(&self, max_seg: u32) -> Chunks<'_> {
        let (src, dst) = match &self.mapped {
            Some(m) => (m.src.segments(), m.dst.segments()),
            None => (&[][..], &[][..]),
        };
        Chunks::new(
            SegmentCursor::new(dst, 0),
            SegmentCursor::new(src, 0),
            self.req.len,
            max_seg,
        )
    }
}
