// SPDX-License-Identifier: GPL-2.0

//! The ioctl ABI of `include/uapi/linux/plx_dma_copy.h`, read and written
//! field by field.
//!
//! Each argument structure starts with its size as the caller built it.
//! [`read_sized`] accepts any size from the first published one up; bytes
//! beyond what this version knows must be zero (`E2BIG` otherwise), and
//! missing trailing fields read as zero. Outputs are written back only up
//! to the caller's size.

use kernel::{
    ioctl::{_IOW, _IOWR},
    prelude::*,
    uaccess::{UserPtr, UserSlice},
};

/// `PLX_DMA_COPY_ABI_VERSION`.
pub(crate) const ABI_VERSION: u32 = 2;
/// `PLX_DMA_CHAN_NAME_LEN`.
pub(crate) const CHAN_NAME_LEN: usize = 32;
/// `PLX_DMA_DEFAULT_TIMEOUT_MS`.
pub(crate) const DEFAULT_TIMEOUT_MS: u32 = 10_000;

/// `PLX_DMA_IOC_MAGIC`.
const IOC_MAGIC: u32 = 0xd7;

/// The ioctls, matched on the whole command as the header defines it
/// (type, number, direction and size bits): the size bits are those of the
/// first version and do not limit the argument, whose own `size` field
/// says how large it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Command {
    Info,
    Attach,
    Copy,
    Submit,
    Reap,
    Register,
    Deregister,
}

impl Command {
    /// Decodes an ioctl command; `None` for one that is not ours.
    pub(crate) fn decode(cmd: u32) -> Option<Self> {
        const INFO: u32 = _IOWR::<[u8; info::MIN]>(IOC_MAGIC, 0);
        const ATTACH: u32 = _IOW::<[u8; attach::SIZE]>(IOC_MAGIC, 1);
        const COPY: u32 = _IOW::<[u8; copy::MIN]>(IOC_MAGIC, 2);
        const SUBMIT: u32 = _IOWR::<[u8; submit::SIZE]>(IOC_MAGIC, 3);
        const REAP: u32 = _IOWR::<[u8; reap::SIZE]>(IOC_MAGIC, 4);
        const REGISTER: u32 = _IOWR::<[u8; region::SIZE]>(IOC_MAGIC, 5);
        const DEREGISTER: u32 = _IOW::<[u8; deregister::SIZE]>(IOC_MAGIC, 6);
        Some(match cmd {
            INFO => Self::Info,
            ATTACH => Self::Attach,
            COPY => Self::Copy,
            SUBMIT => Self::Submit,
            REAP => Self::Reap,
            REGISTER => Self::Register,
            DEREGISTER => Self::Deregister,
            _ => return None,
        })
    }
}

/// Largest argument size accepted: a bound on the zero check of unknown
/// trailing bytes.
const MAX_ARG_SIZE: usize = 4096;

/// The first `N` bytes of an argument structure, as the caller gave them.
pub(crate) struct Arg<const N: usize> {
    pub(crate) bytes: [u8; N],
    /// The caller's `size` field.
    pub(crate) size: usize,
}

impl<const N: usize> Arg<N> {
    pub(crate) fn u32_at(&self, off: usize) -> u32 {
        let mut b = [0u8; 4];
        b.copy_from_slice(&self.bytes[off..off + 4]);
        u32::from_ne_bytes(b)
    }

    pub(crate) fn u64_at(&self, off: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.bytes[off..off + 8]);
        u64::from_ne_bytes(b)
    }
}

/// Reads a structure of this version's size `N` from `addr`, whose first
/// published size was `min`, taking its size from its first field.
pub(crate) fn read_sized<const N: usize>(addr: usize, min: usize) -> Result<Arg<N>> {
    let mut head = UserSlice::new(UserPtr::from_addr(addr), 4).reader();
    let mut b = [0u8; 4];
    head.read_slice(&mut b)?;
    let size = u32::from_ne_bytes(b) as usize;
    read_with_size(addr, size, min)
}

/// Reads a structure of `size` bytes (the caller's), of which this version
/// knows `N`, at `addr`.
pub(crate) fn read_with_size<const N: usize>(
    addr: usize,
    size: usize,
    min: usize,
) -> Result<Arg<N>> {
    if size < min {
        return Err(EINVAL);
    }
    if size > MAX_ARG_SIZE {
        return Err(E2BIG);
    }
    let mut reader = UserSlice::new(UserPtr::from_addr(addr), size).reader();
    let mut bytes = [0u8; N];
    let known = size.min(N);
    reader.read_slice(&mut bytes[..known])?;
    let mut rest = [0u8; 64];
    let mut left = size - known;
    while left > 0 {
        let n = left.min(rest.len());
        reader.read_slice(&mut rest[..n])?;
        if rest[..n].iter().any(|&x| x != 0) {
            return Err(E2BIG);
        }
        left -= n;
    }
    Ok(Arg { bytes, size })
}

/// An output structure being built; written back up to the caller's size.
pub(crate) struct Out<const N: usize>([u8; N]);

impl<const N: usize> Out<N> {
    /// Starts from the caller's own bytes, so fields not written stay.
    pub(crate) fn from_arg(arg: &Arg<N>) -> Self {
        Self(arg.bytes)
    }

    pub(crate) fn put_u32(&mut self, off: usize, v: u32) {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
    }

    pub(crate) fn put_u64(&mut self, off: usize, v: u64) {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
    }

    pub(crate) fn put_bytes(&mut self, off: usize, v: &[u8]) {
        self.0[off..off + v.len()].copy_from_slice(v);
    }

    /// Writes the first `size` bytes (at most `N`) back to `addr`.
    pub(crate) fn write(&self, addr: usize, size: usize) -> Result {
        let n = size.min(N);
        UserSlice::new(UserPtr::from_addr(addr), n)
            .writer()
            .write_slice(&self.0[..n])
    }
}

/// `struct plx_dma_info` field offsets.
pub(crate) mod info {
    pub(crate) const SIZE: usize = 120;
    /// Version 1's size, which the ioctl number carries.
    pub(crate) const MIN: usize = 104;
    pub(crate) const ABI_VERSION: usize = 4;
    pub(crate) const MAX_LEN: usize = 8;
    pub(crate) const MAX_BATCH: usize = 16;
    pub(crate) const MAX_IN_FLIGHT: usize = 20;
    pub(crate) const MAX_PINNED: usize = 24;
    pub(crate) const PINNED: usize = 32;
    pub(crate) const CHANNEL: usize = 40;
    pub(crate) const COPIES: usize = 72;
    pub(crate) const FAILED: usize = 80;
    pub(crate) const BYTES: usize = 88;
    pub(crate) const IN_FLIGHT: usize = 96;
    pub(crate) const REGIONS: usize = 104;
    pub(crate) const MAX_REGIONS: usize = 108;
    pub(crate) const REGION_PAGES: usize = 112;
}

/// `struct plx_dma_attach` field offsets.
pub(crate) mod attach {
    pub(crate) const SIZE: usize = 40;
    pub(crate) const MIN: usize = SIZE;
    pub(crate) const FLAGS: usize = 4;
    pub(crate) const CHANNEL: usize = 8;
}

/// `struct plx_dma_copy` field offsets.
pub(crate) mod copy {
    pub(crate) const SIZE: usize = 56;
    /// Version 1's size, which the ioctl number carries.
    pub(crate) const MIN: usize = 48;
    /// `PLX_DMA_COPY_REGISTERED`.
    pub(crate) const FLAG_REGISTERED: u32 = 1 << 0;
    pub(crate) const FLAGS: usize = 4;
    pub(crate) const SRC: usize = 8;
    pub(crate) const DST: usize = 16;
    pub(crate) const LEN: usize = 24;
    pub(crate) const USER_DATA: usize = 32;
    pub(crate) const TIMEOUT_MS: usize = 40;
    pub(crate) const RESERVED: usize = 44;
    pub(crate) const SRC_REGION: usize = 48;
    pub(crate) const DST_REGION: usize = 52;
}

/// `struct plx_dma_submit` field offsets.
pub(crate) mod submit {
    pub(crate) const SIZE: usize = 24;
    pub(crate) const MIN: usize = SIZE;
    pub(crate) const COUNT: usize = 4;
    pub(crate) const COPIES: usize = 8;
    pub(crate) const COPY_SIZE: usize = 16;
    pub(crate) const SUBMITTED: usize = 20;
}

/// `struct plx_dma_completion` layout.
pub(crate) mod completion {
    pub(crate) const SIZE: usize = 16;
}

/// `struct plx_dma_reap` field offsets.
pub(crate) mod reap {
    pub(crate) const SIZE: usize = 32;
    pub(crate) const MIN: usize = SIZE;
    pub(crate) const MIN_COUNT: usize = 4;
    pub(crate) const MAX: usize = 8;
    pub(crate) const TIMEOUT_MS: usize = 12;
    pub(crate) const COMPLETIONS: usize = 16;
    pub(crate) const REAPED: usize = 24;
    pub(crate) const RESERVED: usize = 28;
}

/// `struct plx_dma_region` field offsets.
pub(crate) mod region {
    pub(crate) const SIZE: usize = 32;
    pub(crate) const MIN: usize = SIZE;
    pub(crate) const ACCESS: usize = 4;
    pub(crate) const ADDR: usize = 8;
    pub(crate) const LEN: usize = 16;
    pub(crate) const ID: usize = 24;
    pub(crate) const RESERVED: usize = 28;
    /// `PLX_DMA_REGION_READ`.
    pub(crate) const READ: u32 = 1 << 0;
    /// `PLX_DMA_REGION_WRITE`.
    pub(crate) const WRITE: u32 = 1 << 1;
}

/// `struct plx_dma_deregister` field offsets.
pub(crate) mod deregister {
    pub(crate) const SIZE: usize = 16;
    pub(crate) const MIN: usize = SIZE;
    pub(crate) const ID: usize = 4;
    pub(crate) const FLAGS: usize = 8;
    pub(crate) const RESERVED: usize = 12;
}

/// The registered regions a copy goes through, by id.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RegionIds {
    pub(crate) src: u32,
    pub(crate) dst: u32,
}

/// A copy request as the caller described it.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CopyReq {
    /// User address, or offset in `regions.src`.
    pub(crate) src: u64,
    /// User address, or offset in `regions.dst`.
    pub(crate) dst: u64,
    pub(crate) len: u64,
    pub(crate) user_data: u64,
    pub(crate) timeout_ms: u32,
    /// `Some` for a copy between registered regions.
    pub(crate) regions: Option<RegionIds>,
}

impl CopyReq {
    /// Decodes and checks the fields that need no other state (`EINVAL`):
    /// no unknown flag, reserved bits zero, region ids only with
    /// `PLX_DMA_COPY_REGISTERED`, which needs the version 2 structure.
    pub(crate) fn parse(arg: &Arg<{ copy::SIZE }>) -> Result<Self> {
        let flags = arg.u32_at(copy::FLAGS);
        if flags & !copy::FLAG_REGISTERED != 0 || arg.u32_at(copy::RESERVED) != 0 {
            return Err(EINVAL);
        }
        let ids = RegionIds {
            src: arg.u32_at(copy::SRC_REGION),
            dst: arg.u32_at(copy::DST_REGION),
        };
        let regions = if flags & copy::FLAG_REGISTERED != 0 {
            // A version 1 caller has no region ids to give.
            if arg.size < copy::SIZE {
                return Err(EINVAL);
            }
            Some(ids)
        } else {
            if ids.src != 0 || ids.dst != 0 {
                return Err(EINVAL);
            }
            None
        };
        Ok(Self {
            src: arg.u64_at(copy::SRC),
            dst: arg.u64_at(copy::DST),
            len: arg.u64_at(copy::LEN),
            user_data: arg.u64_at(copy::USER_DATA),
            timeout_ms: arg.u32_at(copy::TIMEOUT_MS),
            regions,
        })
    }
}

/// Writes one `struct plx_dma_completion` to `addr`.
pub(crate) fn write_completion(addr: usize, user_data: u64, result: i64) -> Result {
    let mut out = Out::<{ completion::SIZE }>([0; completion::SIZE]);
    out.put_u64(0, user_data);
    out.put_u64(8, result as u64);
    out.write(addr, completion::SIZE)
}
