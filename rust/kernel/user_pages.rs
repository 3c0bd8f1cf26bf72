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
//! A range mapped under a [`DmaGate`] ([`UserDma::map_gated`]) gives its
//! segments only to a holder of the gate's guard, and can be unmapped
//! ([`UserDma::detach`]) once the gate is closed, while it stays pinned
//! and in use by the CPU: for a device that may go before the memory does.
//!
//! The steps are C macros and inlines, so they live in
//! `rust/helpers/user_pages.c`. All `unsafe` code of the user-page support
//! is in this file.

use core::{cell::UnsafeCell, ffi::c_void, ptr::NonNull};
use kernel::{
    device::Device,
    dma::DmaAddress,
    prelude::*,
    sync::{
        atomic::{Atomic, Full},
        Arc,
    },
};

#[path = "dma_gate.rs"]
mod dma_gate;
pub use dma_gate::{ClosedGate, DmaGate, GateGuard};

mod ffi {
    use core::ffi::{c_int, c_uint, c_ulong, c_void};
    use kernel::dma::DmaAddress;

    extern "C" {
        pub(super) fn rust_user_dma_map(
            dev: *mut c_void,
            uaddr: c_ulong,
            len: usize,
            dir: c_int,
            longterm: bool,
            err: *mut c_int,
        ) -> *mut c_void;
        pub(super) fn rust_user_dma_attach(ud: *mut c_void, dev: *mut c_void) -> c_int;
        pub(super) fn rust_user_dma_detach(ud: *mut c_void);
        pub(super) fn rust_user_dma_sync(ud: *mut c_void, off: usize, len: usize, for_device: bool);
        pub(super) fn rust_user_dma_dev_bound(dev: *mut c_void) -> bool;
        pub(super) fn rust_user_dma_nents(ud: *const c_void) -> c_uint;
        pub(super) fn rust_user_dma_segments(
            ud: *const c_void,
            addr: *mut DmaAddress,
            len: *mut u32,
            max: c_uint,
        ) -> c_uint;
        pub(super) fn rust_user_dma_unmap(ud: *mut c_void);
        pub(super) fn rust_user_dma_read(
            src: *const c_void,
            src_off: usize,
            buf: *mut c_void,
            len: usize,
        );
        pub(super) fn rust_user_dma_write(
            dst: *mut c_void,
            dst_off: usize,
            buf: *const c_void,
            len: usize,
        );
        pub(super) fn rust_user_dma_cpu_copy(
            dst: *mut c_void,
            dst_off: usize,
            src: *const c_void,
            src_off: usize,
            len: usize,
        );
    }
}

/// Which way the device moves data through a [`UserDma`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The device reads the user memory (a copy's source).
    ToDevice,
    /// The device writes the user memory (a copy's destination).
    FromDevice,
    /// Both (a registered memory region that may be read and written).
    Bidirectional,
}

impl Access {
    /// The `enum dma_data_direction` value.
    fn dma_direction(self) -> core::ffi::c_int {
        match self {
            Access::Bidirectional => 0,
            Access::ToDevice => 1,
            Access::FromDevice => 2,
        }
    }

    /// Whether the pages are written (pinned `FOLL_WRITE`, dirtied).
    pub fn writes(self) -> bool {
        self != Access::ToDevice
    }
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
///
/// Without a `gate`, `segments` changes only through `&mut self`. With one,
/// it is read only by [`Self::segments_in`], for no longer than a guard of
/// that gate lives, and changed only by [`Self::detach`], once, when the
/// gate is closed and no guard is left (`attached` makes it once).
pub struct UserDma {
    raw: NonNull<c_void>,
    segments: UnsafeCell<KVec<Segment>>,
    /// The gate the mapping was made under, if it may be withdrawn.
    gate: Option<Arc<DmaGate>>,
    /// Whether a gated mapping is still there.
    attached: Atomic<bool>,
    len: usize,
    access: Access,
}

// SAFETY: The C object is only read after creation and freed once; the
// pinned pages and the mapping are not tied to the creating thread, and the
// device is kept alive by the object's own reference.
unsafe impl Send for UserDma {}
// SAFETY: The `&self` methods read the C object's pages and the segments
// without changing them, except `detach`, which changes the C object's
// mapping (no other `&self` method reads it) and the segments only when no
// reader can exist (type invariant). `cpu_copy` and `write_at` write the
// pinned pages through `&self`, but those are user memory, which no Rust
// reference covers: user space and devices write it concurrently in any
// case, so two copies into one range race only as user space's own stores
// would.
unsafe impl Sync for UserDma {}

/// `ENODEV` unless the driver of `dev` is bound and not being unbound.
///
/// The caller maps for a device whose driver it is not (a DMA channel's
/// provider), so no `Device<Bound>` proves the binding: it is checked
/// here, and a caller that also watches for the unbind (the dmaengine
/// client's removal watch) and maps under the lock its watch takes cannot
/// map after the unbind began.
fn check_bound(dev: *mut c_void) -> Result {
    // SAFETY: `dev` is a valid device for the call; the helper reads its
    // link state only.
    if unsafe { ffi::rust_user_dma_dev_bound(dev) } {
        Ok(())
    } else {
        Err(ENODEV)
    }
}

impl UserDma {
    /// Pins `len` bytes of the current process's memory at `uaddr` for the
    /// CPU only ([`Self::cpu_copy`]): no device mapping, no segments;
    /// [`Self::attach`] maps them later.
    ///
    /// Errors: `EINVAL` for an empty or wrapping range, `EFAULT` when part
    /// of the range is unmapped (or read-only and `access` is
    /// [`Access::FromDevice`]) or outside user space, `ENOMEM` when the
    /// pages would take the process beyond `RLIMIT_MEMLOCK` (and it lacks
    /// `CAP_IPC_LOCK`) or memory is short.
    pub fn pin(uaddr: usize, len: usize, access: Access, duration: PinDuration) -> Result<Self> {
        Self::pin_and_map(None, uaddr, len, access, duration)
    }

    fn pin_and_map(
        dev: Option<&Device>,
        uaddr: usize,
        len: usize,
        access: Access,
        duration: PinDuration,
    ) -> Result<Self> {
        let mut err: core::ffi::c_int = 0;
        // `Device` is `repr(transparent)` over `struct device`.
        let dev_ptr = dev.map_or(core::ptr::null_mut(), |d| {
            core::ptr::from_ref(d).cast_mut().cast::<c_void>()
        });
        if dev.is_some() {
            check_bound(dev_ptr)?;
        }
        // SAFETY: `dev_ptr` is NULL or a valid device for the duration of
        // the call; `err` is a valid out pointer. The helper pins memory of
        // the current task only.
        let raw = unsafe {
            ffi::rust_user_dma_map(
                dev_ptr,
                uaddr as core::ffi::c_ulong,
                len,
                access.dma_direction(),
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
        // if collecting the segments fails, `drop` releases it. No gate yet.
        let mut this = Self {
            raw,
            segments: UnsafeCell::new(KVec::new()),
            gate: None,
            attached: Atomic::new(false),
            len,
            access,
        };
        this.load_segments()?;
        Ok(this)
    }

    /// Pins `len` bytes of the current process's memory at `uaddr` and maps
    /// them for `dev`, under `guard`'s gate: the segments are given only to
    /// holders of the gate's guards ([`Self::segments_in`]), and
    /// [`Self::detach`] unmaps the range once the gate is closed, while it
    /// stays pinned.
    ///
    /// Errors as for [`Self::pin`], and `ENODEV` when `dev`'s driver is
    /// not bound (or is being unbound), or the error of the DMA API.
    pub fn map_gated(
        guard: &GateGuard,
        dev: &Device,
        uaddr: usize,
        len: usize,
        access: Access,
        duration: PinDuration,
    ) -> Result<Self> {
        let mut this = Self::pin_and_map(Some(dev), uaddr, len, access, duration)?;
        // INVARIANT: Made under `guard`, which is alive: the gate has not
        // drained, so it cannot have been detached before.
        this.gate = Some(guard.gate().clone());
        this.attached = Atomic::new(true);
        Ok(this)
    }

    /// Makes bytes `[off, off + len)` of a range mapped under `guard`'s
    /// gate what the device sees (`for_device`: before it reads or writes
    /// them) or what the CPU sees (after it wrote them). A no-op where the
    /// mapping needs no sync (coherent, nothing bounced), for a range not
    /// mapped under that gate, and for bytes outside the range.
    pub fn sync_in(&self, guard: &GateGuard, off: u64, len: u64, for_device: bool) {
        if !self.gate.as_deref().is_some_and(|g| guard.opens(g)) {
            return;
        }
        let Ok(off) = usize::try_from(off) else {
            return;
        };
        let len = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(self.len.saturating_sub(off));
        // SAFETY: `raw` is live (type invariant); the guard keeps the
        // gate from draining, so `detach` cannot change the mapping
        // meanwhile; the helper reads the mapping and syncs within it.
        unsafe { ffi::rust_user_dma_sync(self.raw.as_ptr(), off, len, for_device) };
    }

    /// Unmaps a range mapped under `closed`'s gate from its device and
    /// returns `true`; it stays pinned for the CPU. `false`, and nothing
    /// done, for a range mapped under no or another gate, or already
    /// detached.
    pub fn detach(&self, closed: &ClosedGate<'_>) -> bool {
        if !self.gate.as_deref().is_some_and(|g| closed.is_of(g)) {
            return false;
        }
        if !self.attached.xchg(false, Full) {
            return false;
        }
        // SAFETY: `raw` is live (type invariant). The gate is closed and no
        // guard of it is left (`closed`), so no slice from `segments_in` is
        // alive, and `attached` lets only this call through.
        unsafe {
            ffi::rust_user_dma_detach(self.raw.as_ptr());
            *self.segments.get() = KVec::new();
        }
        true
    }

    /// Maps a range pinned for the CPU only ([`Self::pin`]) for `dev`,
    /// which gives it its DMA segments.
    ///
    /// Pinning may wait on page faults for as long as user space wants
    /// (userfaultfd, FUSE); mapping touches no user memory. So a caller can
    /// pin without holding its locks and map under them.
    ///
    /// Errors: `EBUSY` if the range is mapped already, `ENODEV` when
    /// `dev`'s driver is not bound (or is being unbound), or the error of
    /// the DMA API (the range then stays pinned, unmapped).
    pub fn attach(&mut self, dev: &Device) -> Result {
        if self.gate.is_some() || !self.segments.get_mut().is_empty() {
            return Err(EBUSY);
        }
        let dev_ptr = core::ptr::from_ref(dev).cast_mut().cast::<c_void>();
        check_bound(dev_ptr)?;
        // SAFETY: `raw` is live and owned (type invariant); `dev_ptr` is a
        // valid device for the call, and the helper takes its own reference
        // for as long as the mapping lives.
        let ret = unsafe { ffi::rust_user_dma_attach(self.raw.as_ptr(), dev_ptr) };
        if ret < 0 {
            return Err(Error::from_errno(ret));
        }
        self.load_segments()
    }

    /// Reads the DMA segments of the mapping into `self.segments`.
    fn load_segments(&mut self) -> Result {
        let raw = self.raw;
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
        let mut segments = KVec::with_capacity(addrs.len(), GFP_KERNEL)?;
        for (&addr, &len) in addrs.iter().zip(lens.iter()) {
            segments.push(Segment { addr, len }, GFP_KERNEL)?;
        }
        *self.segments.get_mut() = segments;
        Ok(())
    }

    /// The DMA segments, in address order of the user range (none when
    /// pinned for the CPU only, or mapped under a gate: see
    /// [`Self::segments_in`]).
    pub fn segments(&self) -> &[Segment] {
        if self.gate.is_some() {
            return &[];
        }
        // SAFETY: Without a gate the segments change only through
        // `&mut self` (type invariant).
        unsafe { &*self.segments.get() }
    }

    /// The DMA segments of a range mapped under `guard`'s gate, valid for
    /// as long as the guard lives; none if it was mapped under no or
    /// another gate.
    pub fn segments_in<'a>(&'a self, guard: &'a GateGuard) -> &'a [Segment] {
        if !self.gate.as_deref().is_some_and(|g| guard.opens(g)) {
            return &[];
        }
        // SAFETY: A guard of the gate is alive for `'a`, so the gate cannot
        // drain and `detach` cannot change the segments meanwhile (type
        // invariant).
        unsafe { &*self.segments.get() }
    }

    /// Length of the user range in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the range is empty (never: `map` refuses that).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How the pages were pinned and mapped.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Copies `len` bytes with the CPU from offset `src_off` of `src`'s
    /// range to offset `dst_off` of `dst`'s.
    ///
    /// `EFAULT` if a range does not hold the bytes or `dst` was not pinned
    /// writable; nothing is copied then.
    pub fn cpu_copy(
        dst: &UserDma,
        dst_off: usize,
        src: &UserDma,
        src_off: usize,
        len: usize,
    ) -> Result {
        let fits = |ud: &UserDma, off: usize| off.checked_add(len).is_some_and(|e| e <= ud.len);
        if !fits(dst, dst_off) || !fits(src, src_off) || !dst.access.writes() {
            return Err(EFAULT);
        }
        // SAFETY: Both objects are live (borrowed) and own their pinned
        // pages; the ranges were checked above and `dst` is writable.
        unsafe {
            ffi::rust_user_dma_cpu_copy(dst.raw.as_ptr(), dst_off, src.raw.as_ptr(), src_off, len)
        };
        Ok(())
    }

    /// Copies `bytes` with the CPU to offset `off` of the range.
    ///
    /// `EFAULT` if the range does not hold them or was not pinned
    /// writable; nothing is copied then.
    pub fn write_at(&self, off: usize, bytes: &[u8]) -> Result {
        let fits = off.checked_add(bytes.len()).is_some_and(|e| e <= self.len);
        if !fits || !self.access.writes() {
            return Err(EFAULT);
        }
        // SAFETY: The object is live (borrowed) and owns its pinned pages;
        // the range was checked above and is writable; `bytes` is readable
        // for its length.
        unsafe {
            ffi::rust_user_dma_write(self.raw.as_ptr(), off, bytes.as_ptr().cast(), bytes.len())
        };
        Ok(())
    }

    /// Copies bytes at offset `off` of the range to `buf`, with the CPU,
    /// filling it.
    ///
    /// `EFAULT` if the range does not hold them; nothing is copied then.
    pub fn read_at(&self, off: usize, buf: &mut [u8]) -> Result {
        let fits = off.checked_add(buf.len()).is_some_and(|e| e <= self.len);
        if !fits {
            return Err(EFAULT);
        }
        // SAFETY: The object is live (borrowed) and owns its pinned pages;
        // the range was checked above; `buf` is writable for its length.
        unsafe {
            ffi::rust_user_dma_read(self.raw.as_ptr(), off, buf.as_mut_ptr().cast(), buf.len())
        };
        Ok(())
    }

    /// Pages the range `[uaddr, uaddr + len)` spans, as [`Self::pin`] would
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

/// A position in a list of DMA [`Segment`]s.
pub struct SegmentCursor<'a> {
    segs: &'a [Segment],
    index: usize,
    offset: u32,
}

impl<'a> SegmentCursor<'a> {
    /// A cursor at byte `offset` of `segs`; at the end if they are shorter.
    pub fn new(segs: &'a [Segment], offset: u64) -> Self {
        let mut this = Self {
            segs,
            index: 0,
            offset: 0,
        };
        let mut left = offset;
        while let Some(s) = this.segs.get(this.index) {
            if left < u64::from(s.len) {
                // Fits: `left` is below a `u32`.
                this.offset = left as u32;
                break;
            }
            left -= u64::from(s.len);
            this.index += 1;
        }
        this
    }

    /// Address and bytes left in the current segment.
    fn current(&self) -> Option<(DmaAddress, u32)> {
        let s = self.segs.get(self.index)?;
        Some((s.addr + u64::from(self.offset), s.len - self.offset))
    }

    fn advance(&mut self, n: u32) {
        if let Some(s) = self.segs.get(self.index) {
            self.offset += n;
            if self.offset >= s.len {
                self.index += 1;
                self.offset = 0;
            }
        }
    }
}

/// One piece of a copy between two segment lists: contiguous on both sides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    /// Destination bus address.
    pub dst: DmaAddress,
    /// Source bus address.
    pub src: DmaAddress,
    /// Length in bytes.
    pub len: u32,
}

/// The [`Chunk`]s that copy `len` bytes from one segment list to another,
/// none longer than `max_seg`; fewer bytes if a list ends first.
pub struct Chunks<'a> {
    src: SegmentCursor<'a>,
    dst: SegmentCursor<'a>,
    left: u64,
    max_seg: u32,
}

impl<'a> Chunks<'a> {
    /// Chunks from `src` to `dst` for `len` bytes.
    pub fn new(dst: SegmentCursor<'a>, src: SegmentCursor<'a>, len: u64, max_seg: u32) -> Self {
        Self {
            src,
            dst,
            left: len,
            max_seg: max_seg.max(1),
        }
    }
}

impl Iterator for Chunks<'_> {
    type Item = Chunk;

    fn next(&mut self) -> Option<Chunk> {
        let (src, src_left) = self.src.current()?;
        let (dst, dst_left) = self.dst.current()?;
        let cap = u32::try_from(self.left).unwrap_or(u32::MAX);
        let len = src_left.min(dst_left).min(self.max_seg).min(cap);
        if len == 0 {
            return None;
        }
        self.src.advance(len);
        self.dst.advance(len);
        self.left -= u64::from(len);
        Some(Chunk { dst, src, len })
    }
}
