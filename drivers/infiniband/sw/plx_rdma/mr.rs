// SPDX-License-Identifier: GPL-2.0

//! Memory regions and their keys.
//!
//! A region is pinned (and, with an engine, mapped for the engine's
//! device) once, at registration, through the same `UserDma` path as the
//! copy device's buffers, and charged to the registering process's
//! `RLIMIT_MEMLOCK`. Its key is `index << 8 | random byte`: the index
//! (never 0) finds the region; slots are taken in turn, so a stale key
//! from an earlier region names a free slot for long, and the random byte
//! makes it fail, most likely, once the slot is taken again. The local and
//! remote keys are equal; a region without remote access has rkey 0, as in
//! rxe.

use crate::rdma::types::access;
use crate::{
    mover::Engine,
    pd::Pd,
    user_pages::{Access, ClosedGate, PinDuration, UserDma},
};
use kernel::{
    new_spinlock,
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed, Release},
        Arc, Completion, SpinLock,
    },
};

/// Access bits a region may be registered with.
///
/// `MW_BIND` is taken as rxe takes it, though the device has no memory
/// windows (allocating one is refused): applications register with it
/// and then find out whether windows exist.
const SUPPORTED: u32 = access::LOCAL_WRITE
    | access::REMOTE_WRITE
    | access::REMOTE_READ
    | access::REMOTE_ATOMIC
    | access::MW_BIND;

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

impl Clone for MrUse {
    /// One more hold on the region, for a copy that outlives the first
    /// holder's use of it.
    fn clone(&self) -> Self {
        // The caller's hold keeps the count above `DYING`'s waiting point,
        // so the deregistration cannot pass between these two steps.
        self.0.busy.fetch_add(1, Relaxed);
        Self(self.0.clone())
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

    /// The remote key: 0 without remote access (write, read or atomics,
    /// `IB_ACCESS_REMOTE`).
    pub(crate) fn rkey(&self) -> u32 {
        if self.access & (access::REMOTE_WRITE | access::REMOTE_READ | access::REMOTE_ATOMIC) != 0 {
            self.key
        } else {
            0
        }
    }
}

/// The table's slots. A key is the slot's index (never 0) over a random
/// byte, as rxe makes them: a deregistered region's key is not handed out
/// again soon (slots are taken in turn, not last freed first), and keys
/// cannot be guessed from the registration count. No key is below 256, so
/// none is 0, the local DMA key.
struct Slots {
    regions: KVec<Slot>,
    /// Where the search for a free slot starts: after the last one taken.
    next: usize,
}

/// One entry of the table.
enum Slot {
    Free,
    /// Taken by a registration still making its region.
    Reserved,
    Used(Arc<Mr>),
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
        // Slot 0 stays empty.
        let n = max as usize + 1;
        let mut regions = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            regions.push(Slot::Free, GFP_KERNEL)?;
        }
        Ok(try_pin_init!(Self {
            slots <- new_spinlock!(Slots { regions, next: 1 }, "plx_rdma_mrs"),
        }))
    }

    /// Pins `length` bytes at `start`, maps them for `engine`'s device (the
    /// CPU alone uses them without one) and enters the region, named
    /// `iova` by work requests, under a new key. `engine` is held until
    /// the region is in the table, so that the engine's removal finds it
    /// there ([`Self::detach_all`]).
    pub(crate) fn register(
        &self,
        engine: Option<&Engine<'_>>,
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
        let pinned = || UserDma::pin(start, len, how, PinDuration::Long);
        let mem = match engine {
            Some(e) => {
                match UserDma::map_gated(e.guard(), e.device(), start, len, how, PinDuration::Long)
                {
                    // The engine's device is losing its driver: the CPU's.
                    Err(err) if err == ENODEV => pinned()?,
                    made => made?,
                }
            }
            None => pinned()?,
        };
        let salt = crate::random::random_u32() & 0xff;
        let mut slots = self.slots.lock();
        let n = slots.regions.len();
        let i = (0..n - 1)
            .map(|k| 1 + (slots.next - 1 + k) % (n - 1))
            .find(|&i| matches!(slots.regions[i], Slot::Free))
            .ok_or(ENOMEM)?;
        slots.next = i % (n - 1) + 1;
        // Held while the region is made without the lock; `get` finds no
        // region under the key until it is in.
        slots.regions[i] = Slot::Reserved;
        let key = ((i as u32) << 8) | salt;
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
        slots.regions[i] = match &mr {
            Ok(mr) => Slot::Used(mr.clone()),
            Err(_) => Slot::Free,
        };
        mr
    }

    /// The live region with key `key`, held for one work request.
    pub(crate) fn get(&self, key: u32) -> Option<MrUse> {
        let slots = self.slots.lock();
        let Some(Slot::Used(mr)) = slots.regions.get((key >> 8) as usize) else {
            return None;
        };
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
                Some(Slot::Used(cur)) if Arc::ptr_eq(cur, mr) => {}
                _ => return Err(EINVAL),
            }
            slots.regions[i] = Slot::Free;
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

    /// Unmaps every region from the engine's device, which is going
    /// (`closed`); they stay registered, pinned, for the CPU. Returns how
    /// many were unmapped.
    pub(crate) fn detach_all(&self, closed: &ClosedGate<'_>) -> u64 {
        let n = self.slots.lock().regions.len();
        let mut unmapped = 0;
        for i in 1..n {
            // One slot at a time: unmapping sleeps.
            let mr = match self.slots.lock().regions.get(i) {
                Some(Slot::Used(mr)) => mr.clone(),
                _ => continue,
            };
            if mr.mem.detach(closed) {
                unmapped += 1;
            }
        }
        unmapped
    }
}
