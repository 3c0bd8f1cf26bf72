// SPDX-License-Identifier: GPL-2.0

//! The gather/scatter lists of kernel consumers.
//!
//! A device without a DMA device of its own (`ib_register_device` with no
//! `dma_device`) gets virtual DMA: `ib_dma_map_*` hands kernel consumers
//! kernel virtual addresses, which they post with the device's local DMA
//! lkey. ib_core's MAD layer does so on the GSI QP. The memory is the
//! consumer's, and verbs lets the device use it until the request's work
//! completion is polled or the QP is destroyed; the device copies with the
//! CPU. This type is the only way the abstraction hands such addresses to
//! a driver, and it is built only from requests a kernel consumer posted.

use super::types::Sge;
use core::marker::PhantomData;

/// Which way a list moves data: what the consumer lets the device do with
/// its memory.
pub trait Direction: private::Sealed {}

/// A send request's gather list: the device only reads it.
pub struct Gather;
/// A receive request's scatter list: the device writes it.
pub struct Scatter;

impl Direction for Gather {}
impl Direction for Scatter {}

mod private {
    pub trait Sealed {}
    impl Sealed for super::Gather {}
    impl Sealed for super::Scatter {}
}

/// A kernel consumer's gather ([`Gather`]) or scatter ([`Scatter`]) list
/// of at most `N` entries.
///
/// Only a scatter list can be written, and only through `&mut`, so that
/// a send list is never overwritten and one write is in progress at a
/// time.
///
/// # Invariants
///
/// Each of the first `n` entries names `length` bytes at kernel virtual
/// address `addr` that the posting kernel consumer lets the device read
/// (and, for a scatter list, write) until the request completes (see the
/// module documentation). The value is neither `Clone` nor `Copy`: it
/// lives in the driver's queued request and goes away with it.
pub struct KernelSgl<D: Direction, const N: usize> {
    sges: [Sge; N],
    n: usize,
    _dir: PhantomData<D>,
}

/// A send request's list.
pub type KernelGather<const N: usize> = KernelSgl<Gather, N>;
/// A receive request's list.
pub type KernelScatter<const N: usize> = KernelSgl<Scatter, N>;

impl<D: Direction, const N: usize> KernelSgl<D, N> {
    /// Copies `sges`; `None` if there are more than `N`.
    ///
    /// # Safety
    ///
    /// `sges` was posted by a kernel consumer on this device, and meets the
    /// type invariant.
    pub(super) unsafe fn new(sges: &[Sge]) -> Option<Self> {
        if sges.len() > N {
            return None;
        }
        let mut out = [Sge::default(); N];
        out[..sges.len()].copy_from_slice(sges);
        // INVARIANT: Per the function's contract.
        Some(Self {
            sges: out,
            n: sges.len(),
            _dir: PhantomData,
        })
    }

    /// The entries.
    pub fn sges(&self) -> &[Sge] {
        &self.sges[..self.n]
    }

    /// Total bytes.
    pub fn len(&self) -> u64 {
        self.sges().iter().map(|s| u64::from(s.length)).sum()
    }

    /// Whether the list holds no byte.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Calls `f(address, bytes)` for the pieces of `[offset, offset + len)`
    /// of the list, in order, clipped to its end; returns the bytes covered.
    fn pieces(&self, mut offset: u64, mut len: u64, mut f: impl FnMut(usize, usize)) -> u64 {
        let mut done = 0;
        for s in self.sges() {
            let l = u64::from(s.length);
            if offset >= l {
                offset -= l;
                continue;
            }
            let n = (l - offset).min(len);
            if n == 0 {
                break;
            }
            // Kernel addresses and lengths of at most 4 GiB fit `usize`.
            f((s.addr + offset) as usize, n as usize);
            done += n;
            len -= n;
            offset = 0;
        }
        done
    }
}

impl<const N: usize> KernelScatter<N> {
    /// Writes `bytes` at `offset` into the list (as far as it reaches);
    /// returns how many were written.
    pub fn write_at(&mut self, offset: u64, bytes: &[u8]) -> usize {
        let mut from = 0usize;
        self.pieces(offset, bytes.len() as u64, |addr, n| {
            // SAFETY: `addr` is `n` writable bytes of the consumer's
            // memory (type invariant); `bytes[from..from + n]` lies inside
            // `bytes`, since the pieces cover at most `bytes.len()` bytes.
            unsafe {
                core::ptr::copy(bytes.as_ptr().add(from), addr as *mut u8, n);
            }
            from += n;
        });
        from
    }
}

impl<const N: usize> KernelGather<N> {
    /// Reads the list from `offset` into `out` (as far as the list
    /// reaches); returns how many bytes were read.
    pub fn read_at(&self, offset: u64, out: &mut [u8]) -> usize {
        let mut to = 0usize;
        self.pieces(offset, out.len() as u64, |addr, n| {
            // SAFETY: `addr` is `n` readable bytes of the consumer's memory
            // (type invariant); `out[to..to + n]` lies inside `out`, since
            // the pieces cover at most `out.len()` bytes.
            unsafe {
                core::ptr::copy(addr as *const u8, out.as_mut_ptr().add(to), n);
            }
            to += n;
        });
        to
    }

    /// Copies the whole list into `dst` at `dst_offset` (as far as `dst`
    /// reaches); returns how many bytes were copied.
    pub fn copy_to<const M: usize>(&self, dst: &mut KernelScatter<M>, dst_offset: u64) -> u64 {
        let mut at = dst_offset;
        let mut copied = 0;
        self.pieces(0, self.len(), |src, n| {
            let mut from = src;
            let got = dst.pieces(at, n as u64, |to, m| {
                // SAFETY: Both are consumer memory of at least `m` bytes
                // (type invariant of both lists), `to` writable (a scatter
                // list); `copy` allows overlap.
                unsafe { core::ptr::copy(from as *const u8, to as *mut u8, m) };
                from += m;
            });
            at += got;
            copied += got;
        });
        copied
    }
}
