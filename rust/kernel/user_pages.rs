// SPDX-License-Identifier: GPL-2.0

//! User memory pinned and mapped for a device's DMA.
//!
//! C header: [`include/linux/mm.h`](srctree/include/linux/mm.h) (the
//! `pin_user_pages` family),
//! [`include/linux/dma-mapping.h`](srctree/include/linux/dma-mapping.h).
//!
//! A [`UserDma`] owns one user range for as long as a device may access it:
//! the pages are charged to the caller's `RLIMIT_MEMLOCK` (the mm's
//! `pinned_vm`, as `ib_umem` counts them), pinned (with `FOLL_WRITE` when the device writes them), a
//! scatterlist is built no longer per segment than the device's
//! `max_seg_size`, and the list is mapped through the DMA API, so behind an
//! IOMMU the device sees IOVAs. Dropping it unmaps, marks written pages
//! dirty, unpins and returns the charge, in that order; the drop may sleep.
//! It is the one pin, map and accounting path for user memory: the copy
//! device's buffers and registered memory regions both use it.
//!
//! The steps are C macros and inlines, so they live in
//! `rust/helpers/user_pages.c`. All `unsafe` code of the user-page support
//! is in this file.

use core::{ffi::c_void, ptr::NonNull};
use kernel::{device::Device, dma::DmaAddress, prelude::*};

mod ffi {
    use core::ffi::{c_int, c_uint, c_ulong, c_void};
    use kernel::dma::DmaAddress;

    extern "C" {
        pub(super) fn rust_user_dma_map(
            dev: *mut c_void,
            uaddr: c_ulong,
            len: usize,
            to_device: bool,
            longterm: bool,
            err: *mut c_int,
        ) -> *mut c_void;
        pub(super) fn rust_user_dma_nents(ud: *const c_void) -> c_uint;
        pub(super) fn rust_user_dma_segments(
            ud: *const c_void,
            addr: *mut DmaAddress,
            len: *mut u32,
            max: c_uint,
        ) -> c_uint;
        pub(super) fn rust_user_dma_unmap(ud: *mut c_void);
    }
}

/// Which way the device moves data through a [`UserDma`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The device reads the user memory (a copy's source).
    DeviceReads,
    /// The device writes the user memory (a copy's destination).
    DeviceWrites,
}

/// How long the pages stay pinned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PinDuration {
    /// Unpinned before the system call that pinned them returns.
    Short,
    /// May outlive the system call (`FOLL_LONGTERM`): the pages are first
    /// migrated out of movable zones and CMA, and file-backed mappings that
    /// cannot be pinned for long are refused.
    Long,
}

/// One DMA segment of a [`UserDma`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Segment {
    /// Bus address (an IOVA behind an IOMMU).
    pub addr: DmaAddress,
    /// Length in bytes.
    pub len: u32,
}

/// A user range, pinned and mapped for a device.
///
/// # Invariants
///
/// `raw` is a live `struct rust_user_dma` from `rust_user_dma_map`, owned
/// by this value and released exactly once, in `drop`. It holds a reference
/// on the device it was mapped for (`get_device`), so the `struct device`
/// the unmap goes through outlives the value, wherever it is dropped.
pub struct UserDma {
    raw: NonNull<c_void>,
    segments: KVec<Segment>,
}

// SAFETY: The C object is only read after creation and freed once; the
// pinned pages and the mapping are not tied to the creating thread, and the
// device is kept alive by the object's own reference.
unsafe impl Send for UserDma {}
// SAFETY: `&self` methods only read.
unsafe impl Sync for UserDma {}

impl UserDma {
    /// Pins `len` bytes of the current process's memory at `uaddr` and maps
    /// them for `dev`.
    ///
    /// Errors: `EINVAL` for an empty or wrapping range, `EFAULT` when part
    /// of the range is unmapped (or read-only and `access` is
    /// [`Access::DeviceWrites`]) or outside user space, `ENOMEM` when the
    /// pages would take the process beyond `RLIMIT_MEMLOCK` (and it lacks
    /// `CAP_IPC_LOCK`) or memory is short, or the error of the DMA API.
    pub fn map(
        dev: &Device,
        uaddr: usize,
        len: usize,
        access: Access,
        duration: PinDuration,
    ) -> Result<Self> {
        let mut err: core::ffi::c_int = 0;
        // `Device` is `repr(transparent)` over `struct device`.
        let dev_ptr = core::ptr::from_ref(dev).cast_mut().cast::<c_void>();
        // SAFETY: `dev_ptr` is a valid device for the duration of the call;
        // `err` is a valid out pointer. The helper pins memory of the
        // current task only.
        let raw = unsafe {
            ffi::rust_user_dma_map(
                dev_ptr,
                uaddr as core::ffi::c_ulong,
                len,
                access == Access::DeviceReads,
                duration == PinDuration::Long,
                &mut err,
            )
        };
        let Some(raw) = NonNull::new(raw) else {
            return Err(if err < 0 {
                Error::from_errno(err)
            } else {
                EINVAL
            });
        };
        // INVARIANT: `raw` came from `rust_user_dma_map` and is owned here;
        // if collecting the segments fails, `drop` releases it.
        let mut this = Self {
            raw,
            segments: KVec::new(),
        };
        // SAFETY: `raw` is live (type invariant).
        let n = unsafe { ffi::rust_user_dma_nents(raw.as_ptr()) } as usize;
        let mut addrs = KVec::<DmaAddress>::with_capacity(n, GFP_KERNEL)?;
        let mut lens = KVec::<u32>::with_capacity(n, GFP_KERNEL)?;
        // SAFETY: `raw` is live and both arrays have room for `n` entries.
        let got = unsafe {
            ffi::rust_user_dma_segments(
                raw.as_ptr(),
                addrs.as_mut_ptr(),
                lens.as_mut_ptr(),
                n as core::ffi::c_uint,
            )
        } as usize;
        // SAFETY: The helper initialised the first `got <= n` entries.
        unsafe {
            addrs.inc_len(got.min(n));
            lens.inc_len(got.min(n));
        }
        this.segments = KVec::with_capacity(addrs.len(), GFP_KERNEL)?;
        for (&addr, &len) in addrs.iter().zip(lens.iter()) {
            this.segments.push(Segment { addr, len }, GFP_KERNEL)?;
        }
        Ok(this)
    }

    /// The DMA segments, in address order of the user range.
    pub fn segments(&self) -> &[Segment] {
        &self.segments
    }

    /// Pages the range `[uaddr, uaddr + len)` spans, as [`Self::map`] would
    /// pin them; `None` if the range wraps.
    pub fn pages_spanned(uaddr: usize, len: usize) -> Option<usize> {
        let end = uaddr.checked_add(len)?;
        let first = uaddr / kernel::page::PAGE_SIZE;
        let last = end.div_ceil(kernel::page::PAGE_SIZE);
        Some(last - first)
    }
}

impl Drop for UserDma {
    fn drop(&mut self) {
        // SAFETY: `raw` is live and owned (type invariant); this is its
        // only release.
        unsafe { ffi::rust_user_dma_unmap(self.raw.as_ptr()) };
    }
}
