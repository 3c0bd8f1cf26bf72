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
    pins::{FilePins, PinReservation},
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
    mapped: Option<Mapped>,
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
            mapped: Some(Mapped {
                src: src_pin,
                dst: dst_pin,
                _pins: pins,
            }),
        })
    }

    /// Maps the pinned ranges for `chan`'s device; touches no user memory.
    ///
    /// Errors: `ENODEV` once unmapped, or the error of the DMA API.
    pub(crate) fn map(&mut self, chan: &MemcpyChannel) -> Result {
        let m = self.mapped.as_mut().ok_or(ENODEV)?;
        let dev = chan.device();
        m.src.attach(dev)?;
        m.dst.attach(dev)
    }

    /// Unmaps and unpins now, keeping what reaping reports. For a device
    /// going away: the copy must be stopped first.
    pub(crate) fn unmap(&mut self) {
        self.mapped = None;
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
