// SPDX-License-Identifier: GPL-2.0

//! The provider side: registering a DMA engine with the dmaengine core.
//!
//! A driver implements [`ChannelOps`] for its channel type and registers its
//! channels with [`Registration::new`]. The core then calls the driver back
//! through the trait for every client operation.
//!
//! Transaction descriptors (`struct dma_async_tx_descriptor`) are
//! preallocated per channel when a client takes the channel
//! ([`ChannelOps::alloc_resources`]) through [`DescPool::alloc`], which
//! consumes the [`NewChannel`] the core passed, so a channel gets one pool
//! per client. The abstraction keeps that pool, with the client's cookie
//! counters, until the client lets go of the channel
//! (`free_chan_resources`), whatever the driver does with its handles, and
//! then revokes it: a handle the driver kept works on a pool nobody reads
//! any more, and the client callbacks it holds no longer run. It hands out
//! two unique capabilities:
//!
//! - a [`Submitter`], which submits prepared descriptors (cookies) and
//!   gives completed ones back to be prepared again; the driver keeps it
//!   under the lock that orders its ring, which is what serializes the
//!   channel's cookie counter;
//! - a [`Completer`], which completes them (cookie, unmap) and hands back
//!   each client callback as a [`Callback`], which the driver invokes once
//!   it holds no lock at all: a callback may call `tx_status`, terminate,
//!   prep and submit on the same channel.
//!
//! # Descriptor states
//!
//! Prep takes no lock of the driver's: [`ChannelOps::prep_memcpy`] gets a
//! [`Preparer`] of the current client's pool, which takes a free
//! descriptor with one atomic operation and records the copy in it. A
//! submit then takes the prepared descriptor ([`Submitter::submit`]),
//! once: a descriptor never prepared, or submitted already, is refused. So
//! a copy costs one critical section of the driver's, at submit, and a
//! client may still prepare several descriptors before submitting them, in
//! any order.
//!
//! From submit on, each descriptor is a token that moves, by value,
//! through [`SubmittedDesc`] → [`Finished`] ([`Submitter::finish`]) →
//! [`IdleDesc`] ([`Completer::complete`]) → free again
//! ([`Submitter::release`]). None of them is `Clone`, so safe code cannot
//! complete a descriptor twice (which the core answers with a `BUG_ON`) or
//! free one that is in flight: each would need a token it no longer has. A
//! token of another pool is refused and handed back.
//!
//! ```compile_fail
//! # use kernel::dmaengine::provider::*;
//! fn complete_twice(sub: &Submitter, d: SubmittedDesc) {
//!     let first = sub.finish(d, TxResult::NoError, 0);
//!     let second = sub.finish(d, TxResult::NoError, 0); // `d` was moved
//! }
//! ```
//!
//! # Lifetimes
//!
//! The `struct dma_device` may outlive the driver's binding: clients can
//! still hold a channel after the driver's remove. The channel objects are
//! therefore reference counted ([`Arc`]) and released only from the core's
//! `device_release` callback; a driver must make the hardware access of its
//! channels revocable (e.g. `Devres`) so that late calls do nothing.
//!
//! The released device is freed by a work item, which must not outlive the
//! module's code: [`Registration::new`] refuses a module that does not run
//! in a [`module_queue::WithQueues`], whose queue the work item runs on and
//! which is drained after the module's driver is gone. The module's own
//! work items belong there too ([`module_queue::queue`]).

use super::{ffi, Cookie, PrepFlags, TxResult};
use crate::module_queue::{self, QueueKind};
use core::{cell::UnsafeCell, marker::PhantomData, ptr::NonNull};
use kernel::{
    device::{Bound, Device},
    devres::Devres,
    dma::DmaAddress,
    ffi::{c_int, c_uint, c_ulong, c_void},
    prelude::*,
    str::CStr,
    sync::{
        atomic::{Acquire, Atomic, Full, Relaxed, Release},
        Arc, ArcBorrow,
    },
    time::{delay::fsleep, Delta},
};

/// The operations of one DMA channel, called by the dmaengine core.
///
/// Every method may be called concurrently with the others, except where
/// noted; [`ChannelOps::tx_submit`] follows a successful
/// [`ChannelOps::prep_memcpy`] of the same descriptor.
pub trait ChannelOps: Send + Sync + 'static {
    /// A client took the channel: allocate what transactions need, with
    /// [`DescPool::alloc`], which takes `chan`.
    ///
    /// Returns the number of descriptors available. `ENODEV` reaches the
    /// client as `ENXIO`: the core takes `ENODEV` from this call for its
    /// own "provider module gone" case.
    fn alloc_resources(&self, chan: NewChannel<'_>) -> Result<u32>;

    /// The last client released the channel: stop, abort and free.
    fn free_resources(&self);

    /// Prepares a memory-to-memory copy of `len` bytes with `prep`, the
    /// current client's descriptors ([`Preparer::prepare`]).
    fn prep_memcpy<'a>(
        &self,
        prep: &Preparer<'a>,
        dst: DmaAddress,
        src: DmaAddress,
        len: usize,
        flags: PrepFlags,
    ) -> Result<Prepared<'a>>;

    /// Queues descriptor `index`, which the client prepared
    /// ([`Submitter::submit`] checks that); returns its cookie or an
    /// error cookie.
    fn tx_submit(&self, index: usize) -> Cookie;

    /// Starts the engine on everything queued.
    fn issue_pending(&self);

    /// Reaps finished work now (the client asked for the status of
    /// `cookie`, which the abstraction answers from its cookie counters);
    /// returns the residue of `cookie` if it is still pending.
    fn poll(&self, cookie: Cookie) -> u32;

    /// Aborts every queued and running transaction.
    ///
    /// May be called in atomic context (from a completion callback, with a
    /// client's IRQ-safe spinlock held, even from a hard interrupt handler),
    /// so it must not wait for the hardware nor take a lock that is not
    /// IRQ-safe there: it may leave the stopping to
    /// [`ChannelOps::synchronize`] or to a work item, which is why it gets
    /// the channel's [`Arc`].
    fn terminate_all(this: ArcBorrow<'_, Self>) -> Result;

    /// Waits until the hardware no longer touches the buffers of what was
    /// terminated, and no completion callback of this channel is running.
    /// Process context.
    fn synchronize(&self);
}

/// A borrowed C `struct dma_chan` of a registered device.
///
/// # Invariants
///
/// The channel's device is registered for at least `'a`: the lifetime is
/// that of the [`Registration`] borrow ([`Registration::channel`]) or of
/// the core's call ([`ChannelOps::alloc_resources`]). The name lives in the
/// channel's `struct device`, which unregistering frees.
pub struct Channel<'a>(NonNull<c_void>, PhantomData<&'a ()>);

impl Channel<'_> {
    /// Returns the channel's name in `/sys/class/dma` (e.g. `dma0chan0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: The device is registered for the borrow (type invariant),
        // so the channel's device and its name are alive.
        unsafe { CStr::from_char_ptr(ffi::rust_dma_chan_name(self.0.as_ptr())) }
    }
}

/// The channel a client just took, as [`ChannelOps::alloc_resources`]
/// gets it: only the core's call makes one, and [`DescPool::alloc`]
/// consumes it, so each client of a channel gets one descriptor pool.
pub struct NewChannel<'a> {
    chan: Channel<'a>,
    /// Where the abstraction keeps the pool for the allocation.
    pool: &'a PoolSlot,
}

impl<'a> NewChannel<'a> {
    /// The channel.
    pub fn channel(&self) -> &Channel<'a> {
        &self.chan
    }
}

/// A copy as prep recorded it, handed back to the driver at submit.
#[derive(Clone, Copy, Default)]
pub struct Memcpy {
    /// Where the bytes go.
    pub dst: DmaAddress,
    /// Where they come from.
    pub src: DmaAddress,
    /// How many.
    pub len: u32,
    /// The client wants a completion callback (`DMA_PREP_INTERRUPT`).
    pub interrupt: bool,
}

/// A prepared descriptor, as returned to the core by
/// [`ChannelOps::prep_memcpy`].
///
/// Only a [`Preparer`] makes one, and it lives no longer than the
/// `prep_memcpy` call that [`Preparer`] was given to: the core only gets
/// descriptors of the pool of the channel's current client, by
/// construction, with no check at run time. (Invariant in `'a`, so that it
/// cannot be passed off as one of a longer call either.)
pub struct Prepared<'a> {
    desc: NonNull<c_void>,
    _call: PhantomData<fn(&'a ()) -> &'a ()>,
}

/// One descriptor of a pool.
struct DescSlot {
    /// The C descriptor.
    desc: NonNull<c_void>,
    /// 1 from its prep to its submit (which takes it back to 0, once).
    prepared: Atomic<u64>,
    /// What prep recorded. Written only by the preparer that cleared the
    /// descriptor's free bit, before it sets `prepared` (release); read
    /// only by the submitter that took `prepared` back (acquire). The
    /// descriptor is free again only after that.
    copy: UnsafeCell<Memcpy>,
}

/// Identifies a pool, so that a descriptor token is used with its own.
static NEXT_POOL_ID: Atomic<u64> = Atomic::new(1);

/// What `dma_get_max_seg_size()` reports for a device without DMA
/// parameters.
const DEFAULT_MAX_SEG: u32 = 1 << 16;

/// `DMA_MIN_COOKIE`: the first valid cookie.
const MIN_COOKIE: i32 = 1;
/// `DMA_CTRL_ACK` in a descriptor's flags.
const CTRL_ACK: u32 = PrepFlags::ACK.0 as u32;

/// The descriptors of one client of a channel, and its cookie counters.
struct PoolInner {
    id: u64,
    descs: KVec<DescSlot>,
    /// One bit per descriptor free to be prepared: cleared by the
    /// [`Preparer`] that takes it, set by [`Submitter::release`].
    free: KVec<Atomic<u64>>,
    /// The last cookie assigned (what `chan->cookie` is in C drivers);
    /// written by the unique [`Submitter`]. 64 bits wide, as `completed`
    /// and a descriptor's `prepared`: in a module, the kernel's 32-bit
    /// atomics cost an out-of-line call per operation (bench.rst).
    last_used: Atomic<i64>,
    /// The last cookie completed (`chan->completed_cookie`); written by the
    /// unique [`Completer`].
    completed: Atomic<i64>,
    /// Cleared when the client lets go of the channel: its callbacks no
    /// longer run.
    live: Atomic<bool>,
    /// Client callbacks running now (see [`PoolInner::revoke`]).
    invoking: Atomic<u32>,
}

impl PoolInner {
    /// Whether `cookie` completed, with the counters it was judged by
    /// (`dma_async_is_complete()`: cookies wrap around).
    fn status(&self, cookie: i32) -> (bool, i32, i32) {
        // Only ever stored from `i32` cookies.
        let used = self.last_used.load(Acquire) as i32;
        let last = self.completed.load(Acquire) as i32;
        let done = if last <= used {
            cookie <= last || cookie > used
        } else {
            cookie <= last && cookie > used
        };
        (done, last, used)
    }

    /// Ends the pool's allocation: no client callback of it starts after
    /// this returns, and none is still running.
    ///
    /// A [`CallbackRunner`] counts itself in `invoking` (a full barrier)
    /// before it reads `live`, and this clears `live` (a full barrier)
    /// before it reads `invoking`: one of the two sees the other.
    fn revoke(&self) {
        self.live.xchg(false, Full);
        while self.invoking.load(Acquire) != 0 {
            // A callback is short: the driver runs them without its locks,
            // and dmaengine callbacks may not sleep.
            fsleep(Delta::from_micros(50));
        }
    }
}

/// The pool of the client holding a channel, kept by the abstraction from
/// [`DescPool::alloc`] to `free_chan_resources`.
///
/// # Invariants
///
/// Written only by `alloc_chan_resources` and `free_chan_resources`, which
/// the core serializes (under `dma_list_mutex`) and calls while no client
/// uses the channel; read by the client-driven calls in between.
pub struct PoolSlot(UnsafeCell<Option<Arc<PoolInner>>>);

impl PoolSlot {
    const fn new() -> Self {
        Self(UnsafeCell::new(None))
    }

    /// The current client's pool, for the duration of a client's call.
    fn current(&self) -> Option<&PoolInner> {
        // SAFETY: By the type invariant, no writer runs concurrently with a
        // client's call, which is where this is read; the borrow ends with
        // the call.
        unsafe { (*self.0.get()).as_deref() }
    }

    /// Installs the pool of a new allocation.
    ///
    /// # Safety
    ///
    /// Called from `alloc_chan_resources` (type invariant).
    unsafe fn install(&self, pool: Arc<PoolInner>) {
        // SAFETY: The caller is the serialized writer.
        let old = unsafe { (*self.0.get()).replace(pool) };
        if let Some(old) = old {
            old.revoke();
        }
    }

    /// Revokes and drops the allocation's pool.
    ///
    /// # Safety
    ///
    /// Called from `alloc_chan_resources` or `free_chan_resources` (type
    /// invariant).
    unsafe fn revoke(&self) {
        // SAFETY: The caller is the serialized writer.
        if let Some(pool) = unsafe { (*self.0.get()).take() } {
            pool.revoke();
        }
    }
}

// SAFETY: The cell is written only under the core's serialization (type
// invariant); `Arc<PoolInner>` is `Send + Sync`.
unsafe impl Sync for PoolSlot {}
// SAFETY: See `Sync`.
unsafe impl Send for PoolSlot {}

/// Defines a descriptor token type: a descriptor of one pool, in one
/// state. Not `Clone`: the token is the state.
macro_rules! desc_token {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $name {
            pool: u64,
            index: usize,
        }

        impl $name {
            /// The descriptor's index in its pool (what
            /// [`ChannelOps::tx_submit`] is called with).
            pub fn index(&self) -> usize {
                self.index
            }
        }
    };
}

desc_token!(
    /// A descriptor free to be prepared: not in flight, and its callback
    /// has run.
    IdleDesc
);
desc_token!(
    /// A descriptor with a cookie, queued for the engine.
    SubmittedDesc
);

// SAFETY: The descriptors are plain heap objects owned by the pool; all
// access to their fields is serialized by `Submitter` and `Completer`.
unsafe impl Send for PoolInner {}
// SAFETY: See `Send`; shared references read the pointers, and reach a
// descriptor's copy record only as `DescSlot::copy` says: its writer and
// its reader are ordered by the free bit and the prepared flag.
unsafe impl Sync for PoolInner {}

impl Drop for PoolInner {
    fn drop(&mut self) {
        for d in self.descs.iter() {
            // SAFETY: Each pointer came from `rust_dma_desc_alloc` and is
            // freed once, here, after every user (which holds an `Arc` of the
            // pool) is gone.
            unsafe { ffi::rust_dma_desc_free(d.desc.as_ptr()) };
        }
    }
}

/// Constructor of a channel's descriptors.
pub struct DescPool;

impl DescPool {
    /// Allocates `count` descriptors bound to `chan`, all free to be
    /// prepared.
    ///
    /// On failure, the descriptors allocated so far are freed.
    ///
    /// The abstraction keeps a reference to the pool until the client lets
    /// go of the channel, so dropping the handles early frees nothing the
    /// client may still hold.
    pub fn alloc(new: NewChannel<'_>, count: usize) -> Result<(Submitter, Completer)> {
        let chan = new.chan;
        let id = NEXT_POOL_ID.fetch_add(1, Relaxed);
        let mut free = KVec::with_capacity(count.div_ceil(64), GFP_KERNEL)?;
        for first in (0..count).step_by(64) {
            let n = (count - first).min(64);
            free.push(Atomic::new(u64::MAX >> (64 - n)), GFP_KERNEL)?;
        }
        let mut pool = PoolInner {
            id,
            descs: KVec::with_capacity(count, GFP_KERNEL)?,
            free,
            last_used: Atomic::new(MIN_COOKIE.into()),
            completed: Atomic::new(MIN_COOKIE.into()),
            live: Atomic::new(true),
            invoking: Atomic::new(0),
        };
        for i in 0..count {
            // SAFETY: `chan` is a registered channel; `i` fits `c_ulong`.
            let d = unsafe { ffi::rust_dma_desc_alloc(chan.0.as_ptr(), i as c_ulong) };
            let d = NonNull::new(d).ok_or(ENOMEM)?;
            // Owned by `pool` at once, whose drop frees it on any error
            // below; the capacity was reserved, so this cannot fail.
            let slot = DescSlot {
                desc: d,
                prepared: Atomic::new(0),
                copy: UnsafeCell::new(Memcpy::default()),
            };
            if pool.descs.push_within_capacity(slot).is_err() {
                // SAFETY: `d` is ours and was not stored anywhere.
                unsafe { ffi::rust_dma_desc_free(d.as_ptr()) };
                return Err(ENOMEM);
            }
        }
        let pool = Arc::new(pool, GFP_KERNEL)?;
        // SAFETY: `NewChannel` exists only during `alloc_chan_resources`.
        unsafe { new.pool.install(pool.clone()) };
        Ok((
            Submitter {
                pool: pool.clone(),
                last_used: MIN_COOKIE,
            },
            Completer {
                pool,
                _not_sync: PhantomData,
            },
        ))
    }
}

/// The capability to prepare descriptors and assign cookies on one channel.
///
/// Unique per channel: holding `&mut Submitter` serializes the channel's
/// cookie counter.
pub struct Submitter {
    pool: Arc<PoolInner>,
    /// The last cookie assigned: the submitter is its only writer, so it
    /// keeps its own copy and only publishes to `pool.last_used`.
    last_used: i32,
}

impl Submitter {
    /// Returns the number of descriptors.
    pub fn len(&self) -> usize {
        self.pool.descs.len()
    }

    /// Returns whether the pool is empty.
    pub fn is_empty(&self) -> bool {
        self.pool.descs.is_empty()
    }

    /// The descriptor of a token of this pool.
    fn desc(&self, pool: u64, index: usize) -> Option<NonNull<c_void>> {
        if pool != self.pool.id {
            return None;
        }
        self.pool.descs.get(index).map(|d| d.desc)
    }

    /// Takes descriptor `index`, which the client prepared, assigns it the
    /// channel's next cookie, and returns the cookie, the descriptor's token
    /// and the copy prep recorded in it. `EINVAL` for a descriptor that is
    /// not prepared (never, or submitted already) or not of this pool.
    #[inline]
    pub fn submit(&mut self, index: usize) -> Result<(Cookie, SubmittedDesc, Memcpy)> {
        let pool = &*self.pool;
        let Some(slot) = pool.descs.get(index) else {
            return Err(EINVAL);
        };
        if slot.prepared.xchg(0, Acquire) == 0 {
            return Err(EINVAL);
        }
        // SAFETY: This submit took the prepared flag, which the preparer
        // set (release) after writing the record, and the descriptor is
        // not free again before this submit's descriptor completes: no one
        // writes the record meanwhile (see `DescSlot::copy`).
        let copy = unsafe { *slot.copy.get() };
        // `dma_cookie_assign()`: the counter wraps to the first valid one.
        let mut next = self.last_used.wrapping_add(1);
        if next < MIN_COOKIE {
            next = MIN_COOKIE;
        }
        // SAFETY: `slot.desc` is a live descriptor of this pool, whose
        // cookie is its first field (asserted by the helper); the client
        // reads it only once the submit returns.
        unsafe { slot.desc.as_ptr().cast::<i32>().write_volatile(next) };
        self.last_used = next;
        pool.last_used.store(next.into(), Release);
        let token = SubmittedDesc {
            pool: pool.id,
            index,
        };
        Ok((Cookie(next), token, copy))
    }

    /// Makes descriptor `d`, completed, free to be prepared again. A token
    /// of another pool is dropped: that pool has nothing to take back.
    pub fn release(&self, d: IdleDesc) {
        if d.pool != self.pool.id {
            return;
        }
        let Some(word) = self.pool.free.get(d.index / 64) else {
            return;
        };
        let bit = 1u64 << (d.index % 64);
        let mut cur = word.load(Relaxed);
        // Release: the descriptor's last use happens before its next prep.
        while let Err(now) = word.cmpxchg(cur, cur | bit, Release) {
            cur = now;
        }
    }

    /// Whether the client acked descriptor `d` (`DMA_CTRL_ACK`, at prep
    /// time or later with `async_tx_ack`): only an acked descriptor may be
    /// prepared again. A token of another pool counts as acked: this pool
    /// has nothing to wait for.
    pub fn acked(&self, d: &IdleDesc) -> bool {
        let Some(raw) = self.desc(d.pool, d.index) else {
            return true;
        };
        // SAFETY: `raw` is a live descriptor of this pool, whose flags are
        // the `u32` at offset 4 (asserted by the helper); the read races
        // only with the client setting the ack bit, as in C drivers
        // (`async_tx_test_ack()`).
        let flags = unsafe { raw.as_ptr().cast::<u32>().add(1).read_volatile() };
        flags & CTRL_ACK != 0
    }

    /// Builds the completion record of descriptor `d`, to be handed to
    /// [`Completer::complete`] once the ring lock is dropped. A token of
    /// another pool is handed back.
    pub fn finish(
        &self,
        d: SubmittedDesc,
        result: TxResult,
        residue: u32,
    ) -> core::result::Result<Finished, SubmittedDesc> {
        let Some(raw) = self.desc(d.pool, d.index) else {
            return Err(d);
        };
        Ok(Finished {
            desc: raw,
            token: IdleDesc {
                pool: d.pool,
                index: d.index,
            },
            result,
            residue,
        })
    }
}

/// The descriptors of the client holding a channel, as
/// [`ChannelOps::prep_memcpy`] gets them for one call: prep needs no lock
/// of the driver's.
pub struct Preparer<'a> {
    pool: &'a PoolInner,
}

impl<'a> Preparer<'a> {
    /// Takes a free descriptor and records `copy` in it for its submit;
    /// `None` when every descriptor is prepared, in flight, or given back
    /// to nobody yet (see [`Submitter::release`]).
    #[inline]
    pub fn prepare(&self, copy: Memcpy) -> Option<Prepared<'a>> {
        let slot = self.pool.descs.get(self.take_free()?)?;
        // SAFETY: Clearing the descriptor's free bit made this call its
        // only writer until it sets the prepared flag below, and its only
        // reader is the submit that takes that flag (see `DescSlot::copy`).
        unsafe { *slot.copy.get() = copy };
        slot.prepared.store(1, Release);
        Some(Prepared {
            desc: slot.desc,
            _call: PhantomData,
        })
    }

    /// Clears the lowest free bit and returns its descriptor's index.
    #[inline]
    fn take_free(&self) -> Option<usize> {
        for (w, word) in self.pool.free.iter().enumerate() {
            let mut cur = word.load(Relaxed);
            while cur != 0 {
                let bit = cur.trailing_zeros();
                // Acquire: pairs with the release that freed it.
                match word.cmpxchg(cur, cur & !(1u64 << bit), Acquire) {
                    Ok(_) => return Some(w * 64 + bit as usize),
                    Err(now) => cur = now,
                }
            }
        }
        None
    }
}

/// A finished transaction waiting for its completion.
///
/// It does not keep its pool alive (that would cost two atomic operations
/// per copy): `desc` is dereferenced only by the [`Completer`] of the pool
/// that `token` names, which holds that pool. Pool IDs are never reused.
pub struct Finished {
    desc: NonNull<c_void>,
    /// The descriptor's token once it is completed; names its pool.
    token: IdleDesc,
    result: TxResult,
    residue: u32,
}

// SAFETY: `Finished` only carries a pointer into a pool, dereferenced only
// by that pool's `Completer`, which keeps it alive.
unsafe impl Send for Finished {}

impl Finished {
    /// Returns how the transaction ended.
    pub fn result(&self) -> TxResult {
        self.result
    }
}

/// The capability to complete descriptors of one channel.
///
/// Unique per channel: holding `&mut Completer` serializes the channel's
/// completed-cookie updates.
pub struct Completer {
    pool: Arc<PoolInner>,
    _not_sync: PhantomData<*const ()>,
}

// SAFETY: Moving the completer between threads is fine; it is not `Sync`,
// so only one thread completes at a time.
unsafe impl Send for Completer {}

impl Completer {
    /// Completes `done`: marks its cookie complete and releases the
    /// client's unmap data. Returns the client's callback, which the caller
    /// invokes once it holds no lock of the channel (see [`Callback`]), and
    /// the descriptor's token, idle again.
    ///
    /// A descriptor of another channel is left alone and handed back.
    pub fn complete(
        &mut self,
        done: Finished,
    ) -> core::result::Result<(Callback, IdleDesc), Finished> {
        // Pool IDs are unique, and `self` holds its pool: a descriptor
        // whose token names it is alive.
        if done.token.pool != self.pool.id {
            pr_err!("dmaengine: descriptor completed on a foreign channel\n");
            return Err(done);
        }
        let cookie_ptr = done.desc.as_ptr().cast::<i32>();
        // SAFETY: `done.desc` is alive (its pool is); its cookie is its
        // first field (asserted by the helper).
        let cookie = unsafe { cookie_ptr.read_volatile() };
        // `dma_cookie_complete()`: only a submitted descriptor has one.
        if cookie >= MIN_COOKIE {
            self.pool.completed.store(cookie.into(), Release);
        }
        // SAFETY: As above; `&mut self` serializes completions.
        unsafe { cookie_ptr.write_volatile(0) };
        let mut raw = ffi::RawCallback([0; 3]);
        // SAFETY: `done.desc` is alive (its pool is); `&mut self` serializes
        // completions on this channel; `raw` is a valid out pointer.
        unsafe { ffi::rust_dma_desc_complete(done.desc.as_ptr(), &mut raw) };
        Ok((
            Callback {
                raw,
                pool: self.pool.id,
                result: done.result,
                residue: done.residue,
            },
            done.token,
        ))
    }

    /// What runs this pool's callbacks once the caller dropped its locks
    /// (see [`CallbackRunner::run`]).
    pub fn runner(&self) -> CallbackRunner {
        CallbackRunner {
            pool: self.pool.clone(),
        }
    }
}

/// Runs the client callbacks of one pool, outside the driver's locks.
///
/// Made by [`Completer::runner`] under the lock that holds the completer,
/// used after dropping it: a batch of callbacks costs one reference and
/// one counted section, not one per callback.
pub struct CallbackRunner {
    pool: Arc<PoolInner>,
}

impl CallbackRunner {
    /// Calls `f` with the gate through which callbacks of this pool run.
    ///
    /// While `f` runs, the client cannot finish letting go of the channel
    /// (`free_chan_resources` waits): keep it to the callbacks. Once the
    /// client has let go, the gate runs nothing.
    pub fn run<R>(&self, f: impl FnOnce(&CallbackGate<'_>) -> R) -> R {
        // Counted before `live` is read: see `PoolInner::revoke`.
        self.pool.invoking.fetch_add(1, Full);
        let gate = CallbackGate {
            pool: self.pool.id,
            live: self.pool.live.load(Relaxed),
            _scope: PhantomData,
        };
        let ret = f(&gate);
        self.pool.invoking.fetch_sub(1, Release);
        ret
    }
}

/// The scope of one [`CallbackRunner::run`]: only a reference to it
/// exists, so it cannot outlive the counted section.
pub struct CallbackGate<'a> {
    pool: u64,
    /// The pool's client still holds the channel.
    live: bool,
    _scope: PhantomData<&'a ()>,
}

impl CallbackGate<'_> {
    /// Calls the client's callback, if it set one, the pool is this
    /// gate's and its client still holds the channel.
    pub fn invoke(&self, cb: Callback) {
        self.call(&cb);
    }

    /// Invokes the callback in `slot`, if any, as [`Self::invoke`] does,
    /// where it lies, and leaves `slot` empty: a queue of callbacks runs
    /// without moving each out first.
    pub fn invoke_in_place(&self, slot: &mut Option<Callback>) {
        if let Some(cb) = slot.as_ref() {
            self.call(cb);
        }
        *slot = None;
    }

    fn call(&self, cb: &Callback) {
        if !self.live || cb.pool != self.pool {
            return;
        }
        // SAFETY: `raw` was filled by `rust_dma_desc_complete` for a
        // descriptor of this gate's pool, whose client still held the
        // channel when the counted section began, and
        // `free_chan_resources` waits for the section to end; the caller
        // holds no channel lock (`Callback`'s documentation), and each
        // callback is called once: `invoke` consumes it, `invoke_in_place`
        // empties its slot.
        unsafe { ffi::rust_dma_callback_invoke(&cb.raw, cb.result as c_uint, cb.residue) };
    }
}

/// A client's completion callback, taken from a completed descriptor.
///
/// Invoke it with no lock held that the channel's `tx_status`, terminate,
/// prep or submit paths take, and never in hard-IRQ context: dmaengine
/// lets a callback call all of them, and take `_bh` locks. Invoke the
/// callbacks of one channel in completion order. Dropping it without
/// invoking forgets the callback (a terminated transaction's client was
/// told by the terminate itself). It runs through a [`CallbackGate`] of
/// its pool; once the client has let go of the channel, it does not run
/// at all: the client may be gone.
#[must_use = "the client's callback runs only when invoked"]
pub struct Callback {
    raw: ffi::RawCallback,
    /// The ID of the descriptor's pool.
    pool: u64,
    result: TxResult,
    residue: u32,
}

// SAFETY: The callback and its parameter are the client's; dmaengine calls
// them from whichever context completes (tasklet, IRQ thread, workqueue).
unsafe impl Send for Callback {}

/// The dmaengine registration of one DMA device and its channels.
///
/// Only [`Registration::new`] makes one, inside a [`Devres`] of the
/// device it is registered for: the device is unregistered when that is
/// dropped or, at the latest, when the driver is unbound, so not even a
/// forgotten registration outlives the binding (and the module's code the
/// core would call). The channels are released when the core drops its
/// last reference.
pub struct Registration<T: ChannelOps> {
    dma: NonNull<c_void>,
    count: usize,
    _p: PhantomData<T>,
}

// SAFETY: The registration only holds the device pointer; the dmaengine core
// can be called from any thread.
unsafe impl<T: ChannelOps> Send for Registration<T> {}
// SAFETY: `&Registration` allows no mutation.
unsafe impl<T: ChannelOps> Sync for Registration<T> {}

/// One channel as the C glue sees it: the driver's channel and the pool
/// of the client holding it.
struct Slot<T: ChannelOps> {
    ops: Arc<T>,
    pool: PoolSlot,
}

/// The channels, owned by the C device from registration to release.
struct Channels<T: ChannelOps>(KVec<Slot<T>>);

impl<T: ChannelOps> Registration<T> {
    const OPS: ffi::RawOps = ffi::RawOps {
        alloc_chan_resources: alloc_chan_resources::<T>,
        free_chan_resources: free_chan_resources::<T>,
        prep_memcpy: prep_memcpy::<T>,
        tx_submit: tx_submit::<T>,
        issue_pending: issue_pending::<T>,
        tx_status: tx_status::<T>,
        terminate_all: terminate_all::<T>,
        synchronize: synchronize::<T>,
        release: release::<T>,
    };

    /// Registers a memcpy-capable DMA device for `dev` with `chans` as its
    /// channels; `max_seg_size` is the longest copy one descriptor takes.
    ///
    /// The registration is bound to `dev` (see the type's documentation);
    /// [`Devres::access`] reaches it while the driver is bound.
    pub fn new(
        dev: &Device<Bound>,
        chans: KVec<Arc<T>>,
        max_seg_size: u32,
    ) -> Result<Devres<Self>> {
        // Unregistered again (dropped) if the `Devres` cannot be made.
        Devres::new(dev, Self::register(dev, chans, max_seg_size)?)
    }

    fn register(dev: &Device<Bound>, chans: KVec<Arc<T>>, max_seg_size: u32) -> Result<Self> {
        let n = chans.len();
        if n == 0 {
            return Err(EINVAL);
        }
        // The core may release the device after the driver's remove, and
        // the glue frees it from a work item: only a queue the module
        // drains before its code goes may run it.
        let Some(free_wq) = module_queue::owned_raw(QueueKind::Long) else {
            dev_err!(
                dev,
                "a dmaengine provider module must run in module_queue::WithQueues\n"
            );
            return Err(EINVAL);
        };
        // `Device` is `repr(transparent)` over `struct device`.
        let raw_dev = core::ptr::from_ref(dev).cast_mut().cast::<c_void>();
        // SAFETY: `raw_dev` is a bound device; its DMA parameters belong to
        // its driver, which is calling.
        let recorded = unsafe { ffi::rust_dma_dev_set_max_seg(raw_dev, max_seg_size) };
        // Without DMA parameters the device reports the default 64 KiB
        // (`dma_get_max_seg_size()`), which only an engine taking at least
        // that much may let clients rely on.
        if !recorded && max_seg_size < DEFAULT_MAX_SEG {
            return Err(EINVAL);
        }
        let mut slots = KVec::with_capacity(n, GFP_KERNEL)?;
        for ops in chans {
            slots.push(
                Slot {
                    ops,
                    pool: PoolSlot::new(),
                },
                GFP_KERNEL,
            )?;
        }
        // The slots do not move from here on: the vector is never grown.
        let mut ctxs = KVec::with_capacity(n, GFP_KERNEL)?;
        for slot in slots.iter() {
            ctxs.push(core::ptr::from_ref(slot).cast::<c_void>(), GFP_KERNEL)?;
        }
        let owned = KBox::new(Channels(slots), GFP_KERNEL)?;
        let ctx = KBox::into_raw(owned).cast::<c_void>();
        // SAFETY: `raw_dev` is a bound device; `OPS` is a promoted constant
        // with static lifetime; `ctxs` holds `n` pointers into `ctx`'s
        // channels, which stay alive until `release`; `free_wq` lives until
        // the module's `WithQueues` drains it.
        let dma = unsafe {
            ffi::rust_dma_device_alloc(
                raw_dev,
                n as c_uint,
                &Self::OPS,
                ctx,
                ctxs.as_ptr(),
                free_wq,
            )
        };
        let Some(dma) = NonNull::new(dma) else {
            // SAFETY: `ctx` came from `KBox::into_raw` above and was not
            // handed to C.
            drop(unsafe { KBox::from_raw(ctx.cast::<Channels<T>>()) });
            return Err(ENOMEM);
        };
        // SAFETY: `dma` was allocated above and is not registered yet.
        let ret = unsafe { ffi::rust_dma_device_register(dma.as_ptr()) };
        if ret != 0 {
            // SAFETY: Registration failed, so the core holds no reference;
            // free the device, then the channels it pointed to.
            unsafe {
                ffi::rust_dma_device_free(dma.as_ptr());
                drop(KBox::from_raw(ctx.cast::<Channels<T>>()));
            }
            return Err(Error::from_errno(ret));
        }
        Ok(Self {
            dma,
            count: n,
            _p: PhantomData,
        })
    }

    /// Returns channel `index` of the device, for as long as the device
    /// stays registered (this borrow).
    pub fn channel(&self, index: usize) -> Option<Channel<'_>> {
        if index >= self.count {
            return None;
        }
        // SAFETY: `self.dma` is registered and has `self.count` channels.
        NonNull::new(unsafe { ffi::rust_dma_device_chan(self.dma.as_ptr(), index as c_uint) })
            // INVARIANT: The device stays registered while `self` lives.
            .map(|c| Channel(c, PhantomData))
    }
}

impl<T: ChannelOps> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: `self.dma` is registered; this drops the registration's
        // reference. `release` runs when the last one goes.
        unsafe { ffi::rust_dma_device_unregister(self.dma.as_ptr()) };
    }
}

/// Recovers the channel's slot from a C context pointer.
///
/// # Safety
///
/// `ctx` must be a channel pointer given to `rust_dma_device_alloc` by
/// [`Registration::new`] for a `T`, whose device has not been released.
unsafe fn slot<'a, T: ChannelOps>(ctx: *const c_void) -> &'a Slot<T> {
    // SAFETY: Per the function's safety requirements.
    unsafe { &*ctx.cast::<Slot<T>>() }
}

/// Recovers the channel from a C context pointer.
///
/// # Safety
///
/// As for [`slot`].
unsafe fn chan<'a, T: ChannelOps>(ctx: *const c_void) -> &'a T {
    // SAFETY: Per the function's safety requirements.
    unsafe { &slot::<T>(ctx).ops }
}

/// # Safety
///
/// The C glue calls this with a channel context registered by
/// [`Registration::new`] for a `T`, before the device's release.
unsafe extern "C" fn alloc_chan_resources<T: ChannelOps>(
    ctx: *const c_void,
    raw: *mut c_void,
) -> c_int {
    let Some(raw) = NonNull::new(raw) else {
        return EINVAL.to_errno();
    };
    // SAFETY: Called by the helper with the channel's context while the
    // device is registered.
    let slot = unsafe { slot::<T>(ctx) };
    // INVARIANT: The core calls with a registered device, for this call.
    let new = NewChannel {
        chan: Channel(raw, PhantomData),
        pool: &slot.pool,
    };
    let ret = slot.ops.alloc_resources(new);
    if ret.is_err() {
        // SAFETY: This is `alloc_chan_resources`.
        unsafe { slot.pool.revoke() };
    }
    match ret {
        Ok(n) => n.min(c_int::MAX as u32) as c_int,
        // The core's `find_candidate` reads `-ENODEV` from here as "the
        // provider's module is gone" and unlinks the whole device from
        // its device list, which the device's unregistration then unlinks
        // a second time (list corruption). A channel refusing clients
        // because its device is going away says so with `ENXIO` instead.
        Err(e) if e == ENODEV => ENXIO.to_errno(),
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// The C glue calls this with a channel context registered by
/// [`Registration::new`] for a `T`, before the device's release.
unsafe extern "C" fn free_chan_resources<T: ChannelOps>(ctx: *const c_void) {
    // SAFETY: As in `alloc_chan_resources`.
    let slot = unsafe { slot::<T>(ctx) };
    slot.ops.free_resources();
    // Whatever handles the driver kept: the client's descriptors and
    // callbacks end here.
    // SAFETY: This is `free_chan_resources`.
    unsafe { slot.pool.revoke() };
}

/// # Safety
///
/// The C glue calls this with a channel context registered by
/// [`Registration::new`] for a `T`, before the device's release.
unsafe extern "C" fn prep_memcpy<T: ChannelOps>(
    ctx: *const c_void,
    dst: DmaAddress,
    src: DmaAddress,
    len: usize,
    flags: c_ulong,
) -> *mut c_void {
    // SAFETY: As in `alloc_chan_resources`.
    let slot = unsafe { slot::<T>(ctx) };
    // Only a client holding the channel calls prep.
    let Some(pool) = slot.pool.current() else {
        return core::ptr::null_mut();
    };
    let prep = Preparer { pool };
    match slot
        .ops
        .prep_memcpy(&prep, dst, src, len, PrepFlags::from_raw(flags))
    {
        // Of the current client's pool, which outlives the client's use of
        // the descriptor: `Prepared` cannot outlive `prep` (its type).
        Ok(p) => p.desc.as_ptr(),
        Err(_) => core::ptr::null_mut(),
    }
}

/// # Safety
///
/// The C glue calls this with a channel context registered by
/// [`Registration::new`] for a `T`, before the device's release.
unsafe extern "C" fn tx_submit<T: ChannelOps>(ctx: *const c_void, index: c_ulong) -> i32 {
    // SAFETY: As in `alloc_chan_resources`.
    unsafe { chan::<T>(ctx) }.tx_submit(index).raw()
}

/// # Safety
///
/// The C glue calls this with a channel context registered by
/// [`Registration::new`] for a `T`, before the device's release.
unsafe extern "C" fn issue_pending<T: ChannelOps>(ctx: *const c_void) {
    // SAFETY: As in `alloc_chan_resources`.
    unsafe { chan::<T>(ctx) }.issue_pending()
}

/// `enum dma_status` values.
const DMA_COMPLETE: c_uint = 0;
const DMA_IN_PROGRESS: c_uint = 1;
const DMA_ERROR: c_uint = 3;

/// # Safety
///
/// The C glue calls this with a channel context registered by
/// [`Registration::new`] for a `T`, before the device's release, and a
/// valid `state`.
unsafe extern "C" fn tx_status<T: ChannelOps>(
    ctx: *const c_void,
    cookie: i32,
    irqs_off: bool,
    state: *mut ffi::RawTxState,
) -> c_uint {
    // SAFETY: As in `alloc_chan_resources`.
    let slot = unsafe { slot::<T>(ctx) };
    let report = |last: i32, used: i32, residue: u32| {
        // SAFETY: `state` is valid for writes (function safety).
        unsafe {
            state.write(ffi::RawTxState {
                last,
                used,
                residue,
                in_flight_bytes: 0,
            })
        }
    };
    let Some(pool) = slot.pool.current() else {
        // No client holds the channel: nothing of its is pending.
        report(0, 0, 0);
        return DMA_ERROR;
    };
    let (done, last, used) = pool.status(cookie);
    // With interrupts off the driver cannot reap: the status as of the
    // last reap.
    if done || irqs_off {
        report(last, used, 0);
        return if done { DMA_COMPLETE } else { DMA_IN_PROGRESS };
    }
    let residue = slot.ops.poll(Cookie(cookie));
    let (done, last, used) = pool.status(cookie);
    if done {
        report(last, used, 0);
        DMA_COMPLETE
    } else {
        report(last, used, residue);
        DMA_IN_PROGRESS
    }
}

/// # Safety
///
/// The C glue calls this with a channel context registered by
/// [`Registration::new`] for a `T`, before the device's release.
unsafe extern "C" fn terminate_all<T: ChannelOps>(ctx: *const c_void) -> c_int {
    // SAFETY: As in `alloc_chan_resources`; the slot holds the channel's
    // `Arc` until the device's release.
    let this: ArcBorrow<'_, T> = unsafe { slot::<T>(ctx) }.ops.as_arc_borrow();
    match T::terminate_all(this) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// The C glue calls this with a channel context registered by
/// [`Registration::new`] for a `T`, before the device's release.
unsafe extern "C" fn synchronize<T: ChannelOps>(ctx: *const c_void) {
    // SAFETY: As in `alloc_chan_resources`.
    unsafe { chan::<T>(ctx) }.synchronize()
}

/// # Safety
///
/// `ctx` is the channel set given to the C glue by [`Registration::new`];
/// the core calls this once, after its last use of the channels.
unsafe extern "C" fn release<T: ChannelOps>(ctx: *mut c_void) {
    // SAFETY: `ctx` came from `KBox::into_raw` in `Registration::new`; the
    // core calls `release` once, after its last use of the channels.
    drop(unsafe { KBox::from_raw(ctx.cast::<Channels<T>>()) });
}
