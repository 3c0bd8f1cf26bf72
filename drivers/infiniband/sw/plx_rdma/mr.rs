// SPDX-License-Identifier: GPL-2.0

//! Memory regions and their keys.
//!
//! A region is pinned (and, with an engine, mapped for the engine's
//! device) once, at registration, through the same `UserDma` path as the
//! copy device's buffers, and charged to the registering process's
//! `RLIMIT_MEMLOCK`. Its key is `index << 8 | generation`: the index
//! finds the region, and the generation, bumped each time a slot is
//! reused, makes a stale key from an earlier region fail instead of
//! reaching its successor. The local and remote keys are equal; a region
//! without remote access has rkey 0, as in rxe.

use crate::rdma::types::access;
use crate::{
    pd::Pd,
    user_pages::{Access, PinDuration, UserDma},
};
use kernel::{
    device::Device,
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed, Release},
        Arc, Completion, SpinLock,
    },
};

/// Access bits a region may be registered with.
///
/// `REMOTE_ATOMIC` is granted, as rxe grants it, though no peer can use it:
/// the device reports no atomic capability (`atomic_cap` none) and refuses
/// atomic work requests at post. UCX and MPI register every region with
/// it by default, and a registration that fails stops them before any
/// atomic is asked for.
const SUPPORTED: u32 =
    access::LOCAL_WRITE | access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC;

/// Set in [`Mr::busy`] once the region is deregistered: the work request
/// that then drops the count to this value wakes the deregistration.
const DYING: u32 = 1 << 31;

/// A registered memory region.
#[pin_data]
pub(crate) struct Mr {
    pub(crate) pd: Arc<Pd>,
    /// Address of byte 0 as work requests name it.
    iova: u64,
    length: u64,
    pub(crate) access: u32,
    pub(crate) key: u32,
    pub(crate) mem: UserDma,
    /// Work requests using the region now, plus [`DYING`] once it is
    /// deregistered.
    busy: Atomic<u32>,
    /// Completed by the last work request to let go of a deregistered
    /// region.
    #[pin]
    released: Completion,
}

/// A work request's hold on a region: deregistration waits until it is
/// dropped.
pub(crate) struct MrUse(Arc<Mr>);

impl Drop for MrUse {
    fn drop(&mut self) {
        // Release: whatever the request did to the region's pages comes
        // before the deregistration that sees the count drop and unpins
        // them (its full-barrier update, or the completion, pairs with
        // this). Only the last holder of a deregistered region sees
        // `DYING + 1`: no new holder can appear once it left the table.
        if self.0.busy.fetch_sub(1, Release) == DYING + 1 {
            self.0.released.complete_all();
        }
    }
}

impl MrUse {
    /// Keeps the region's pages pinned for good: the engine may still
    /// write them (a channel that could not be stopped).
    pub(crate) fn leak(&self) {
        core::mem::forget(self.0.clone());
    }
}

impl core::ops::Deref for MrUse {
    type Target = Mr;
    fn deref(&self) -> &Mr {
        &self.0
    }
}

impl Mr {
    /// The offset of `[addr, addr + len)` in the region, if it lies
    /// inside.
    pub(crate) fn offset_of(&self, addr: u64, len: u64) -> Option<u64> {
        let end = addr.checked_add(len)?;
        let region_end = self.iova.checked_add(self.length)?;
        (addr >= self.iova && end <= region_end).then(|| addr - self.iova)
    }

    /// Whether the region grants every bit of `want`.
    pub(crate) fn allows(&self, want: u32) -> bool {
        self.access & want == want
    }

    /// The local key.
    pub(crate) fn lkey(&self) -> u32 {
        self.key
    }

    /// The remote key: 0 without remote access.
    pub(crate) fn rkey(&self) -> u32 {
        if self.access & (access::REMOTE_WRITE | access::REMOTE_READ) != 0 {
            self.key
        } else {
            0
        }
    }
}

struct Slots {
    regions: KVec<Option<Arc<Mr>>>,
    generation: KVec<u8>,
    free: KVec<u32>,
}

/// The regions of one device, by key.
#[pin_data]
pub(crate) struct MrTable {
    #[pin]
    slots: SpinLock<Slots>,
}

impl MrTable {
    /// A table of `max` regions.
    pub(crate) fn new(max: u32) -> Result<impl PinInit<Self, Error>> {
        let n = max as usize;
        let mut regions = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut generation = KVec::with_capacity(n, GFP_KERNEL)?;
        let mut free = KVec::with_capacity(n, GFP_KERNEL)?;
        for i in (0..max).rev() {
            regions.push(None, GFP_KERNEL)?;
            generation.push(0u8, GFP_KERNEL)?;
            free.push(i, GFP_KERNEL)?;
        }
        Ok(try_pin_init!(Self {
            slots <- new_spinlock!(Slots { regions, generation, free }, "plx_rdma_mrs"),
        }))
    }

    /// Pins `length` bytes at `start` for `dev` (the CPU if `None`) and
    /// enters the region, named `iova` by work requests, under a new key.
    pub(crate) fn register(
        &self,
        dev: Option<&Device>,
        pd: &Arc<Pd>,
        start: u64,
        length: u64,
        iova: u64,
        rights: u32,
    ) -> Result<Arc<Mr>> {
        let rights = rights & !access::OPTIONAL;
        if rights & !SUPPORTED != 0 {
            return Err(EOPNOTSUPP);
        }
        // Remote write and remote atomics need local write, as verbs
        // requires.
        if rights & (access::REMOTE_WRITE | access::REMOTE_ATOMIC) != 0
            && rights & access::LOCAL_WRITE == 0
        {
            return Err(EINVAL);
        }
        if length == 0 || iova.checked_add(length).is_none() {
            return Err(EINVAL);
        }
        let start = usize::try_from(start).map_err(|_| EFAULT)?;
        let len = usize::try_from(length).map_err(|_| EINVAL)?;
        let how = if rights & (access::LOCAL_WRITE | access::REMOTE_WRITE) != 0 {
            Access::Bidirectional
        } else {
            Access::ToDevice
        };
        let mem = match dev {
            Some(d) => UserDma::map(d, start, len, how, PinDuration::Long)?,
            None => UserDma::pin(start, len, how, PinDuration::Long)?,
        };
        let mut slots = self.slots.lock();
        let index = slots.free.pop().ok_or(ENOMEM)?;
        let i = index as usize;
        slots.generation[i] = slots.generation[i].wrapping_add(1);
        let key = (index << 8) | u32::from(slots.generation[i]);
        drop(slots);
        let mr = Arc::pin_init(
            try_pin_init!(Mr {
                pd: pd.clone(),
                iova,
                length,
                access: rights,
                key,
                mem,
                busy: Atomic::new(0),
                released <- Completion::new(),
            }),
            GFP_KERNEL,
        );
        let mut slots = self.slots.lock();
        match mr {
            Ok(mr) => {
                slots.regions[i] = Some(mr.clone());
                Ok(mr)
            }
            Err(e) => {
                let _ = slots.free.push_within_capacity(index);
                Err(e)
            }
        }
    }

    /// The live region with key `key`, held for one work request.
    pub(crate) fn get(&self, key: u32) -> Option<MrUse> {
        let slots = self.slots.lock();
        let mr = slots.regions.get((key >> 8) as usize)?.as_ref()?;
        if mr.key != key {
            return None;
        }
        mr.busy.fetch_add(1, Relaxed);
        Some(MrUse(mr.clone()))
    }

    /// Removes `mr`: its key fails from now on. Then sleeps until no work
    /// request uses it, so that the caller may unpin it.
    pub(crate) fn deregister(&self, mr: &Arc<Mr>) -> Result {
        {
            let mut slots = self.slots.lock();
            let i = (mr.key >> 8) as usize;
            match slots.regions.get(i) {
                Some(Some(cur)) if Arc::ptr_eq(cur, mr) => {}
                _ => return Err(EINVAL),
            }
            slots.regions[i] = None;
            let _ = slots.free.push_within_capacity(i as u32);
        }
        // Work requests take the region only through the table (`get`,
        // under the same lock), so the count only falls from here on.
        // Full: if it is already 0, what the last request did comes
        // before this, as its Release pairs with this read.
        if mr.busy.fetch_add(DYING, Full) != 0 {
            mr.released.wait_for_completion();
        }
        Ok(())
    }
}
