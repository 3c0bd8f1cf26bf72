// SPDX-License-Identifier: GPL-2.0

//! Registered regions: user ranges pinned and mapped once for the file's
//! channel, which copies then address by id and offset.
//!
//! A region is pinned through the same path as a copy's buffers
//! ([`UserDma`], charged to `RLIMIT_MEMLOCK`) and reserves its pages in
//! the file's share of the pin bound ([`PinReservation`]) for as long as
//! it lives. It is shared, by [`Arc`], between the file's table of ids and
//! every copy in flight that uses it; dropping the last reference unmaps
//! and unpins it. So deregistering only forgets the id: the pages stay
//! until the last copy through them has ended.
//!
//! # References under the file's lock
//!
//! Every reference to a region lives in the file's state (its table or a
//! copy's slot) and is taken and dropped with the file's lock held. Device
//! removal holds that lock while it empties the table and unmaps the
//! copies, so once it is done no reference is left anywhere and every
//! region has been unmapped while the device was still bound.

use crate::{
    abi::region as f,
    dmaengine::client::MemcpyChannel,
    job::Limits,
    pins::{FilePins, PinReservation},
    user_pages::{Access, PinDuration, Segment, UserDma},
};
use kernel::{alloc::flags::GFP_KERNEL_ACCOUNT, prelude::*, sync::Arc};

/// Most regions a file may hold registered at once.
pub(crate) const MAX_REGIONS: u32 = 256;

/// One registered user range.
pub(crate) struct Region {
    /// User address of the range's first byte.
    addr: usize,
    len: u64,
    pages: u64,
    /// May be a copy's source.
    readable: bool,
    /// May be a copy's destination.
    writable: bool,
    /// Tells a region from a later one given the same id.
    serial: u64,
    dma: UserDma,
    /// Held for its `Drop`: gives the pages back to the file's count.
    _pins: PinReservation,
}

impl Region {
    /// Checks the request, reserves the range's pages in `file`'s share
    /// and pins them for good (`FOLL_LONGTERM`), for the CPU only as yet:
    /// [`Self::map`] maps them.
    ///
    /// This touches user memory and so may wait on page faults as long as
    /// user space wants: callers hold no lock.
    ///
    /// Errors: `EINVAL` for a zero length or an `access` without a known
    /// bit or with an unknown one, `EFAULT` for a range that wraps, is not
    /// mapped, or is not writable while `access` asks for writes, `E2BIG`
    /// for a range larger than a file's share of the pin bound, `EAGAIN`
    /// when the bound or the file's share is used up, `ENOMEM` beyond the
    /// caller's `RLIMIT_MEMLOCK`.
    pub(crate) fn pin(
        addr: u64,
        len: u64,
        access: u32,
        limits: Limits,
        file: &Arc<FilePins>,
    ) -> Result<Self> {
        let readable = access & f::READ != 0;
        let writable = access & f::WRITE != 0;
        if access & !(f::READ | f::WRITE) != 0 || !(readable || writable) || len == 0 {
            return Err(EINVAL);
        }
        let ulen = usize::try_from(len).map_err(|_| E2BIG)?;
        let uaddr = usize::try_from(addr).map_err(|_| EFAULT)?;
        let pages = UserDma::pages_spanned(uaddr, ulen).ok_or(EFAULT)? as u64;
        if pages > PinReservation::file_share(limits.max_pinned_pages) {
            return Err(E2BIG);
        }
        let pins = PinReservation::take(pages, file, limits.max_pinned_pages)?;
        let dir = match (readable, writable) {
            (true, true) => Access::Bidirectional,
            (true, false) => Access::ToDevice,
            (false, _) => Access::FromDevice,
        };
        let dma = UserDma::pin(uaddr, ulen, dir, PinDuration::Long)?;
        Ok(Self {
            addr: uaddr,
            len,
            pages,
            readable,
            writable,
            serial: 0,
            dma,
            _pins: pins,
        })
    }

    /// Maps the pinned range for `chan`'s device; touches no user memory.
    pub(crate) fn map(&mut self, chan: &MemcpyChannel) -> Result {
        self.dma.attach(chan.device())
    }

    /// Pages the range spans.
    pub(crate) fn pages(&self) -> u64 {
        self.pages
    }

    /// The DMA segments of the range, from its first byte.
    pub(crate) fn segments(&self) -> &[Segment] {
        self.dma.segments()
    }

    /// The user address of byte `off` if `[off, off + len)` lies inside
    /// the region; `EINVAL` otherwise (also when the sum overflows).
    pub(crate) fn span(&self, off: u64, len: u64) -> Result<usize> {
        let end = off.checked_add(len).ok_or(EINVAL)?;
        if end > self.len {
            return Err(EINVAL);
        }
        // Inside the range, whose address and length fit a `usize`.
        Ok(self.addr + off as usize)
    }

    /// Whether copies may read the region.
    pub(crate) fn readable(&self) -> bool {
        self.readable
    }

    /// Whether copies may write the region.
    pub(crate) fn writable(&self) -> bool {
        self.writable
    }
}

/// A file's regions by id: id `n` is entry `n - 1`.
pub(crate) struct Regions {
    slots: KVec<Option<Arc<Region>>>,
    /// Where the search for a free id starts: ids are handed out in turn,
    /// so one just given up is not at once given to the next region.
    next: usize,
    /// Serial of the last region inserted.
    serial: u64,
}

impl Regions {
    /// An empty table of [`MAX_REGIONS`] ids.
    pub(crate) fn new() -> Result<Self> {
        let mut slots = KVec::with_capacity(MAX_REGIONS as usize, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..MAX_REGIONS {
            slots.push(None, GFP_KERNEL_ACCOUNT)?;
        }
        Ok(Self {
            slots,
            next: 0,
            serial: 0,
        })
    }

    /// Whether an id is free.
    pub(crate) fn has_room(&self) -> bool {
        self.slots.iter().any(Option::is_none)
    }

    /// Gives `region`, mapped, an id. Returns the id and the region's
    /// serial. `ENOSPC` when every id is taken (the region is dropped).
    pub(crate) fn insert(&mut self, mut region: Region) -> Result<(u32, u64)> {
        let n = self.slots.len();
        let at = (0..n)
            .map(|i| (self.next + i) % n)
            .find(|&i| self.slots[i].is_none())
            .ok_or(ENOSPC)?;
        self.serial += 1;
        region.serial = self.serial;
        self.slots[at] = Some(Arc::new(region, GFP_KERNEL_ACCOUNT)?);
        self.next = (at + 1) % n;
        // `at` is below `MAX_REGIONS`.
        Ok((at as u32 + 1, self.serial))
    }

    fn index(&self, id: u32) -> Option<usize> {
        let i = (id as usize).checked_sub(1)?;
        (i < self.slots.len()).then_some(i)
    }

    /// The region with id `id`; `ENOENT` if there is none.
    pub(crate) fn get(&self, id: u32) -> Result<&Arc<Region>> {
        self.index(id)
            .and_then(|i| self.slots[i].as_ref())
            .ok_or(ENOENT)
    }

    /// Takes region `id` out of the table (with `serial`, only that very
    /// region). The caller drops it with the file's lock held.
    pub(crate) fn remove(&mut self, id: u32, serial: Option<u64>) -> Result<Arc<Region>> {
        let i = self.index(id).ok_or(ENOENT)?;
        match &self.slots[i] {
            Some(r) if serial.is_none_or(|s| s == r.serial) => {}
            _ => return Err(ENOENT),
        }
        self.slots[i].take().ok_or(ENOENT)
    }

    /// Regions registered and the pages they span.
    pub(crate) fn usage(&self) -> (u32, u64) {
        self.slots
            .iter()
            .flatten()
            .fold((0, 0), |(n, p), r| (n + 1, p + r.pages()))
    }

    /// Drops every id; a region whose last reference this was is unmapped
    /// and unpinned now.
    pub(crate) fn clear(&mut self) {
        for slot in self.slots.iter_mut() {
            drop(slot.take());
        }
    }

    /// Drops every id without ever unmapping or unpinning the regions: for
    /// a channel that could not be stopped, whose engine may still access
    /// them. They stay pinned (and charged) until reboot.
    pub(crate) fn abandon(&mut self) {
        for slot in self.slots.iter_mut() {
            if let Some(r) = slot.take() {
                core::mem::forget(r);
            }
        }
    }
}
