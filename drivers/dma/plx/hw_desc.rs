// SPDX-License-Identifier: GPL-2.0

//! The 16-byte hardware descriptor and its write-back.

use crate::dmaengine::TxResult;
use kernel::dma::DmaAddress;

/// Longest copy one descriptor can describe (27-bit size field).
pub(crate) const MAX_COPY: u32 = (1 << 27) - 1;
/// Highest address the engine can reach (48 bits).
pub(crate) const MAX_ADDRESS: DmaAddress = (1 << 48) - 1;

const SIZE_MASK: u32 = MAX_COPY;
/// Owned by the engine; cleared by the write-back.
pub(crate) const FLAG_VALID: u32 = 1 << 31;
/// Interrupt when this descriptor completes.
const FLAG_INT_WHEN_DONE: u32 = 1 << 30;
const WB_SUCCESS: u32 = 1 << 30;
const WB_RD_FAIL: u32 = 1 << 29;
const WB_WR_FAIL: u32 = 1 << 28;

/// Whether the engine reaches every byte of the `len` bytes at `addr`
/// (of two buffers, the higher address tells for both).
#[inline]
pub(crate) fn reachable(addr: DmaAddress, len: u32) -> bool {
    // Once `addr` is within reach, the room above it neither wraps nor
    // goes negative.
    addr <= MAX_ADDRESS && u64::from(len) <= MAX_ADDRESS - addr + 1
}

/// `len` as one descriptor's size, if one descriptor can copy it (1 to
/// [`MAX_COPY`] bytes).
#[inline]
pub(crate) fn copy_len(len: usize) -> Option<u32> {
    // One comparison for both ends: 0 wraps to the top.
    if len.wrapping_sub(1) < MAX_COPY as usize {
        u32::try_from(len).ok()
    } else {
        None
    }
}

/// A descriptor as it sits in the ring (little-endian on the wire; the
/// coherent-memory accessors convert).
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(crate) struct HwDesc {
    pub(crate) flags_and_size: u32,
    pub(crate) dst_hi: u16,
    pub(crate) src_hi: u16,
    pub(crate) dst_lo: u32,
    pub(crate) src_lo: u32,
}

crate::plain_data::impl_plain_data!(HwDesc {
    flags_and_size: u32,
    dst_hi: u16,
    src_hi: u16,
    dst_lo: u32,
    src_lo: u32,
});

impl HwDesc {
    /// Builds a copy descriptor, not yet VALID.
    pub(crate) fn copy(dst: DmaAddress, src: DmaAddress, len: u32, interrupt: bool) -> Self {
        let int = if interrupt { FLAG_INT_WHEN_DONE } else { 0 };
        Self {
            flags_and_size: (len & SIZE_MASK) | int,
            dst_hi: (dst >> 32) as u16,
            src_hi: (src >> 32) as u16,
            dst_lo: dst as u32,
            src_lo: src as u32,
        }
    }
}

/// The first word of an issued descriptor: its size, VALID, and
/// INT_WHEN_DONE when `interrupt`.
pub(crate) fn issued_word(len: u32, interrupt: bool) -> u32 {
    HwDesc::copy(0, 0, len, interrupt).flags_and_size | FLAG_VALID
}

/// What the engine wrote back into a descriptor's first word.
#[derive(Clone, Copy)]
pub(crate) struct WriteBack(pub(crate) u32);

impl WriteBack {
    /// Whether the engine still owns the descriptor.
    pub(crate) fn pending(self) -> bool {
        self.0 & FLAG_VALID != 0
    }

    /// The transfer's outcome.
    pub(crate) fn result(self) -> TxResult {
        if self.0 & WB_SUCCESS != 0 {
            TxResult::NoError
        } else if self.0 & WB_WR_FAIL != 0 {
            TxResult::WriteFailed
        } else if self.0 & WB_RD_FAIL != 0 {
            TxResult::ReadFailed
        } else {
            // Written back without a verdict: the engine gave up on it.
            TxResult::Aborted
        }
    }

    /// Bytes not transferred, given the descriptor's original length.
    pub(crate) fn residue(self, len: u32) -> u32 {
        len.saturating_sub(self.0 & SIZE_MASK)
    }
}
