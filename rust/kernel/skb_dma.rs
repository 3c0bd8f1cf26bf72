// SPDX-License-Identifier: GPL-2.0

//! Bytes of received datagrams mapped for a device to read, a burst of
//! them at a time.
//!
//! C header: [`include/linux/dma-mapping.h`](srctree/include/linux/dma-mapping.h).
//!
//! Behind an IOMMU each mapping and each unmapping ends in an IOTLB
//! invalidation, and behind an emulated IOMMU each of those is a trip
//! through the hypervisor. A [`SkbBurstDma`] maps the parts of many
//! datagrams together: with the IOVA-based DMA API (`dma_iova_try_alloc()`,
//! `dma_iova_link()`) they share one IOVA range, linked page by page and
//! synced once, and one invalidation unmaps them all when the burst goes.
//! A device that is not behind a translating IOMMU (DMA direct, bounce
//! buffers, passthrough) gets one streaming mapping per part instead.
//!
//! The IOVA range is linked in whole pages, as any IOMMU maps: the device
//! may read the rest of a page that holds a payload, as it may with
//! `dma_map_single()`; it may not write (`DMA_TO_DEVICE`).
//!
//! All `unsafe` code of these mappings is in this file.

use crate::udp_tunnel::LinearSkb;
use kernel::{
    bindings,
    device::Device,
    dma::DmaAddress,
    ffi::c_void,
    page::PAGE_SIZE,
    prelude::*,
    sync::{aref::ARef, Arc},
};

mod ffi {
    use kernel::dma::DmaAddress;
    use kernel::ffi::{c_int, c_void};

    extern "C" {
        pub(super) fn rust_virt_to_phys(p: *const u8) -> u64;
        pub(super) fn rust_dma_map_for_read(
            dev: *mut c_void,
            p: *const u8,
            len: u32,
            addr: *mut DmaAddress,
        ) -> c_int;
        pub(super) fn rust_dma_unmap_for_read(dev: *mut c_void, addr: DmaAddress, len: u32);
    }
}

/// Bytes of a received datagram (part of its
/// [`LinearSkb::network_bytes`]), holding the datagram.
pub struct SkbPart {
    skb: Arc<LinearSkb>,
    start: usize,
    len: u32,
}

impl SkbPart {
    /// `part`, bytes of `skb`'s [`LinearSkb::network_bytes`]; `EINVAL` if
    /// it is empty or not such bytes.
    pub fn new(skb: &Arc<LinearSkb>, part: &[u8]) -> Result<Self> {
        let all = skb.network_bytes().as_ptr_range();
        let want = part.as_ptr_range();
        if part.is_empty() || want.start < all.start || want.end > all.end {
            return Err(EINVAL);
        }
        Ok(Self {
            skb: skb.clone(),
            start: want.start as usize - all.start as usize,
            len: u32::try_from(part.len()).map_err(|_| EINVAL)?,
        })
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.skb.network_bytes()[self.start..][..self.len as usize]
    }

    /// Their number (never 0).
    pub fn len(&self) -> u32 {
        self.len
    }

    /// Whether there are none (never: a part is not empty).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// How a burst is mapped.
enum Mapping {
    /// One IOVA range; `linked` bytes of it from its start are linked.
    Iova {
        state: bindings::dma_iova_state,
        linked: usize,
    },
    /// One streaming mapping per part (address, length).
    Single(KVec<(DmaAddress, u32)>),
}

/// Parts of received datagrams mapped for one device to read; unmapped
/// when dropped. It holds the datagrams and the device while it lives.
pub struct SkbBurstDma {
    dev: ARef<Device>,
    mapping: Mapping,
    /// Each part's bus address, in the order given.
    addrs: KVec<DmaAddress>,
    _skbs: KVec<Arc<LinearSkb>>,
}

/// The `struct device` of `dev`, as C takes it (`Device` is
/// `repr(transparent)` over it).
fn raw_device(dev: &Device) -> *mut bindings::device {
    core::ptr::from_ref(dev).cast_mut().cast()
}

/// The first and the end address of the pages that hold `bytes`.
fn page_span(bytes: &[u8]) -> (usize, usize) {
    let range = bytes.as_ptr_range();
    let first = range.start as usize & !(PAGE_SIZE - 1);
    let end = (range.end as usize).next_multiple_of(PAGE_SIZE);
    (first, end)
}

impl SkbBurstDma {
    /// Maps `parts` for `dev` to read. `ENOMEM` if a mapping fails
    /// (nothing stays mapped then).
    pub fn map<'a, I>(dev: &Device, parts: I) -> Result<Self>
    where
        I: Iterator<Item = &'a SkbPart> + Clone,
    {
        let n = parts.clone().count();
        let mut addrs = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut skbs = KVec::with_capacity(n, GFP_KERNEL)?;
        for p in parts.clone() {
            skbs.push(p.skb.clone(), GFP_KERNEL)?;
        }
        let mut this = Self {
            dev: dev.into(),
            mapping: Mapping::Single(KVec::new()),
            addrs: KVec::new(),
            _skbs: skbs,
        };
        // The pages to link, each once: datagrams share pages, and a part
        // whose pages an earlier link covers uses that link. `links` holds
        // (first page, end, offset in the range), `offsets` each part's
        // offset in the range.
        let mut links: KVec<(usize, usize, usize)> = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut offsets = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut total = 0usize;
        for p in parts.clone() {
            let bytes = p.bytes();
            let (first, end) = page_span(bytes);
            let page_at = match links.iter().find(|&&(f, e, _)| f <= first && end <= e) {
                Some(&(f, _, off)) => off + (first - f),
                None => {
                    links.push((first, end, total), GFP_KERNEL)?;
                    total += end - first;
                    total - (end - first)
                }
            };
            offsets.push(page_at + (bytes.as_ptr() as usize - first), GFP_KERNEL)?;
        }
        let mut state = bindings::dma_iova_state { addr: 0, __size: 0 };
        let iova = total > 0 && {
            // SAFETY: `dev` is a live device; `state` is ours to fill.
            unsafe { bindings::dma_iova_try_alloc(raw_device(dev), &mut state, 0, total) }
        };
        if iova {
            this.mapping = Mapping::Iova { state, linked: 0 };
            let Mapping::Iova { state, linked } = &mut this.mapping else {
                unreachable!()
            };
            // The links follow each other from the range's start.
            for &(first, end, _) in links.iter() {
                // SAFETY: `first` is the start of a page of an skb's linear
                // data, which is in the kernel's direct map.
                let phys = unsafe { ffi::rust_virt_to_phys(first as *const u8) };
                // SAFETY: `state` is an IOVA range of `total` bytes for
                // `dev`; `[linked, linked + end - first)` lies in it, page
                // aligned as is `phys`; the pages hold datagrams kept by
                // `this` until the range is destroyed.
                let ret = unsafe {
                    bindings::dma_iova_link(
                        raw_device(dev),
                        state,
                        phys,
                        *linked,
                        end - first,
                        bindings::dma_data_direction::DMA_TO_DEVICE,
                        0,
                    )
                };
                if ret != 0 {
                    return Err(ENOMEM);
                }
                *linked += end - first;
            }
            // SAFETY: `[0, linked)` of the range is linked.
            let ret = unsafe { bindings::dma_iova_sync(raw_device(dev), state, 0, *linked) };
            if ret != 0 {
                return Err(ENOMEM);
            }
            for &off in offsets.iter() {
                addrs.push(state.addr + off as u64, GFP_KERNEL)?;
            }
        } else {
            this.mapping = Mapping::Single(KVec::with_capacity(n, GFP_KERNEL)?);
            let Mapping::Single(single) = &mut this.mapping else {
                unreachable!()
            };
            for p in parts {
                let bytes = p.bytes();
                let mut addr: DmaAddress = 0;
                // SAFETY: `bytes` lie in the skb's linear data, which stays
                // put while `this` holds the skb.
                let ret = unsafe {
                    ffi::rust_dma_map_for_read(
                        raw_device(dev).cast::<c_void>(),
                        bytes.as_ptr(),
                        p.len,
                        &mut addr,
                    )
                };
                if ret != 0 {
                    return Err(ENOMEM);
                }
                // Room for every part was reserved: the mapping is
                // recorded (and so unmapped at drop) whatever comes.
                single
                    .push_within_capacity((addr, p.len))
                    .map_err(|_| ENOMEM)?;
                addrs.push(addr, GFP_KERNEL)?;
            }
        }
        this.addrs = addrs;
        Ok(this)
    }

    /// The device the parts are mapped for.
    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// The bus address of part `i`, in the order [`Self::map`] was given
    /// them; `None` past the last.
    pub fn addr(&self, i: usize) -> Option<DmaAddress> {
        self.addrs.get(i).copied()
    }
}

impl Drop for SkbBurstDma {
    fn drop(&mut self) {
        let dev = raw_device(&self.dev);
        match &mut self.mapping {
            Mapping::Iova { state, linked } => {
                // SAFETY: `state` was allocated for `dev`, `[0, linked)` of
                // it linked, and nothing uses it after this.
                unsafe {
                    bindings::dma_iova_destroy(
                        dev,
                        state,
                        *linked,
                        bindings::dma_data_direction::DMA_TO_DEVICE,
                        0,
                    )
                };
            }
            Mapping::Single(maps) => {
                for &(addr, len) in maps.iter() {
                    // SAFETY: `addr` was mapped by `rust_dma_map_for_read`
                    // for `dev` with `len`, and is unmapped once.
                    unsafe { ffi::rust_dma_unmap_for_read(dev.cast::<c_void>(), addr, len) };
                }
            }
        }
    }
}
