// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The 16-byte hardware descriptor and its write-back word.
//!
//! Layout (little endian, `struct plx_dma_hw_std_desc` in plx_dma.c):
//!
//! ```text
//! 0x0  le32 flags_and_size   bits 26:0 size, 30 INT_WHEN_DONE, 31 VALID
//! 0x4  le16 dst_addr_hi      address bits 47:32
//! 0x6  le16 src_addr_hi
//! 0x8  le32 dst_addr_lo      address bits 31:0
//! 0xC  le32 src_addr_lo
//! ```
//!
//! On completion the engine rewrites only the first dword: VALID and
//! INT_WHEN_DONE cleared, one status bit set, and bits 26:0 holding the
//! number of bytes transferred. (plx_dma.c computes the residue as
//! `orig_size - (flags & SIZE_MASK)`, so the field must be the transferred
//! count for a successful descriptor to report a residue of 0.)

/// Mask of the 27-bit transfer size field.
pub const SIZE_MASK: u32 = 0x07FF_FFFF;
/// Largest transfer one descriptor can describe.
pub const MAX_SIZE: u32 = SIZE_MASK;
/// Descriptor is owned by the engine.
pub const FLAG_VALID: u32 = 1 << 31;
/// Raise DESC_DONE (and an interrupt) when this descriptor completes.
pub const FLAG_INT_WHEN_DONE: u32 = 1 << 30;
/// Bits 29:27 are reserved in a submitted descriptor; non-zero is malformed.
pub const FLAG_RESERVED: u32 = 0x3800_0000;

/// Write-back: the transfer completed.
pub const WB_SUCCESS: u32 = 1 << 30;
/// Write-back: reading the source failed.
pub const WB_RD_FAIL: u32 = 1 << 29;
/// Write-back: writing the destination failed.
pub const WB_WR_FAIL: u32 = 1 << 28;

/// Highest address the 48-bit descriptor fields can express, plus one.
pub const ADDR_LIMIT: u64 = 1 << 48;

/// A decoded descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Raw first dword.
    pub flags_and_size: u32,
    /// 48-bit source address.
    pub src: u64,
    /// 48-bit destination address.
    pub dst: u64,
}

/// Why a VALID descriptor cannot be executed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// The size field is zero.
    ZeroSize,
    /// Reserved bits 29:27 are set.
    ReservedBits,
}

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Malformed::ZeroSize => write!(f, "size 0"),
            Malformed::ReservedBits => write!(f, "reserved bits 29:27 set"),
        }
    }
}

impl Descriptor {
    /// Decodes 16 bytes as they sit in guest memory.
    pub fn decode(b: &[u8; 16]) -> Descriptor {
        let flags_and_size = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let dst_hi = u16::from_le_bytes([b[4], b[5]]) as u64;
        let src_hi = u16::from_le_bytes([b[6], b[7]]) as u64;
        let dst_lo = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as u64;
        let src_lo = u32::from_le_bytes([b[12], b[13], b[14], b[15]]) as u64;
        Descriptor {
            flags_and_size,
            src: (src_hi << 32) | src_lo,
            dst: (dst_hi << 32) | dst_lo,
        }
    }

    /// Encodes a descriptor the way a driver would write it (for tests and
    /// the host benchmark).
    pub fn encode(src: u64, dst: u64, size: u32, valid: bool, int_when_done: bool) -> [u8; 16] {
        let mut flags = size & SIZE_MASK;
        if valid {
            flags |= FLAG_VALID;
        }
        if int_when_done {
            flags |= FLAG_INT_WHEN_DONE;
        }
        let mut b = [0u8; 16];
        b[0..4].copy_from_slice(&flags.to_le_bytes());
        b[4..6].copy_from_slice(&((dst >> 32) as u16).to_le_bytes());
        b[6..8].copy_from_slice(&((src >> 32) as u16).to_le_bytes());
        b[8..12].copy_from_slice(&(dst as u32).to_le_bytes());
        b[12..16].copy_from_slice(&(src as u32).to_le_bytes());
        b
    }

    /// The engine owns the descriptor.
    pub fn valid(&self) -> bool {
        self.flags_and_size & FLAG_VALID != 0
    }

    /// Completion should raise DESC_DONE.
    pub fn int_when_done(&self) -> bool {
        self.flags_and_size & FLAG_INT_WHEN_DONE != 0
    }

    /// Transfer size in bytes.
    pub fn size(&self) -> u32 {
        self.flags_and_size & SIZE_MASK
    }

    /// Checks the fields a VALID descriptor must satisfy.
    pub fn check(&self) -> Result<(), Malformed> {
        if self.flags_and_size & FLAG_RESERVED != 0 {
            Err(Malformed::ReservedBits)
        } else if self.size() == 0 {
            Err(Malformed::ZeroSize)
        } else {
            Ok(())
        }
    }
}

/// Completion status of one descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Completion {
    /// All bytes copied.
    Success,
    /// The source read failed after `transferred` bytes.
    ReadFail,
    /// The destination write failed after `transferred` bytes.
    WriteFail,
    /// The descriptor was malformed; nothing was copied.
    Invalid,
}

/// Builds the write-back dword: VALID and INT_WHEN_DONE cleared, one status
/// bit, and the transferred byte count.
pub fn write_back_word(status: Completion, transferred: u32) -> u32 {
    let bits = match status {
        Completion::Success => WB_SUCCESS,
        Completion::ReadFail => WB_RD_FAIL,
        Completion::WriteFail => WB_WR_FAIL,
        // No status bit: plx_dma.c reports such a descriptor as
        // DMA_TRANS_READ_FAILED, which is the closest dmaengine result.
        Completion::Invalid => 0,
    };
    bits | (transferred & SIZE_MASK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip_48_bit_addresses() {
        let src = 0xABCD_1234_5678;
        let dst = 0xFFFF_FFFF_FFF0;
        let b = Descriptor::encode(src, dst, 4096, true, true);
        let d = Descriptor::decode(&b);
        assert_eq!(d.src, src);
        assert_eq!(d.dst, dst);
        assert_eq!(d.size(), 4096);
        assert!(d.valid());
        assert!(d.int_when_done());
        assert_eq!(d.check(), Ok(()));
    }

    #[test]
    fn layout_matches_driver_struct() {
        let b = Descriptor::encode(0x1111_2222_3333, 0x4444_5555_6666, 7, false, false);
        assert_eq!(&b[0..4], &7u32.to_le_bytes());
        assert_eq!(&b[4..6], &0x4444u16.to_le_bytes()); // dst_hi
        assert_eq!(&b[6..8], &0x1111u16.to_le_bytes()); // src_hi
        assert_eq!(&b[8..12], &0x5555_6666u32.to_le_bytes()); // dst_lo
        assert_eq!(&b[12..16], &0x2222_3333u32.to_le_bytes()); // src_lo
    }

    #[test]
    fn max_size_and_malformed() {
        let d = Descriptor::decode(&Descriptor::encode(0, 0, MAX_SIZE, true, false));
        assert_eq!(d.size(), 0x7FF_FFFF);
        assert_eq!(d.check(), Ok(()));
        let zero = Descriptor::decode(&Descriptor::encode(0, 0, 0, true, false));
        assert_eq!(zero.check(), Err(Malformed::ZeroSize));
        let mut raw = Descriptor::encode(0, 0, 8, true, false);
        raw[3] |= 0x08; // bit 27
        assert_eq!(
            Descriptor::decode(&raw).check(),
            Err(Malformed::ReservedBits)
        );
    }

    #[test]
    fn write_back_words() {
        assert_eq!(
            write_back_word(Completion::Success, 4096),
            WB_SUCCESS | 4096
        );
        assert_eq!(write_back_word(Completion::ReadFail, 0), WB_RD_FAIL);
        assert_eq!(
            write_back_word(Completion::WriteFail, 512),
            WB_WR_FAIL | 512
        );
        assert_eq!(write_back_word(Completion::Invalid, 0), 0);
        // VALID is never set in a write-back word.
        assert_eq!(
            write_back_word(Completion::Success, u32::MAX) & FLAG_VALID,
            0
        );
    }
}
