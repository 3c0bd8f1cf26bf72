// SPDX-License-Identifier: GPL-2.0

//! An open `/dev/plx-dma-copy`: its channel, its copies in flight, its
//! counters, and the ioctls on them.
//!
//! # Locking
//!
//! `state` (a mutex) guards the file's channel, copies and registered
//! regions. Device removal takes it from the bus notifier, so it is never
//! held across an access to user memory or a wait that user space
//! controls: requests are read, and pages pinned (a copy's or a region's),
//! before it is taken (pinning can wait on a userfaultfd or FUSE fault for
//! as long as user space wants), mapping happens under it, waits for ring
//! space drop it, and completions, region ids and counters are written to
//! user space after it is released. Unmapping and unpinning a region
//! happen under it, since removal must find every reference on a region
//! there; they wait on neither user memory nor user space. `reaping`
//! serializes reapers, and is held while completions are written out, so
//! that each completion is reported once; it is a [`Turn`], so a reaper
//! stalled in a fault on its completion buffer leaves the ones behind it
//! interruptible. The [`Tracker`] has its own
//! spinlock for what completion callbacks update.
//!
//! # Device removal
//!
//! Attaching a channel also watches its device. When the device is about
//! to be unbound, the channel is terminated (queued copies end as
//! cancelled) and every copy's memory is unmapped and unpinned while the
//! driver is still there; the copies stay to be reaped, and new ones fail
//! with `ENODEV`. Registered regions are dropped from the table at the same
//! time, and since every reference on a region lives in the file's state
//! and is dropped under `state` (see [`crate::region`]), they are all
//! unmapped and unpinned before the removal returns.

use crate::{
    abi::{self, Arg, Command, CopyReq, Out, CHAN_NAME_LEN},
    dmaengine::client::{MemcpyChannel, RemovalSink, RemovalWatch},
    job::{Job, Limits},
    pins::FilePins,
    region::{Region, Regions, MAX_REGIONS},
    tracker::{Outcome, Tracker, WaitEnd},
    turn::Turn,
    user_pages::PinDuration,
};
use kernel::{
    alloc::flags::GFP_KERNEL_ACCOUNT,
    new_mutex,
    prelude::*,
    str::CStr,
    sync::{Arc, ArcBorrow, Mutex},
};

/// Most copies per `PLX_DMA_IOC_SUBMIT`.
pub(crate) const MAX_BATCH: u32 = 64;
/// Most submitted, unreaped copies per file.
pub(crate) const MAX_IN_FLIGHT: usize = 256;
/// Longest copy (bytes).
pub(crate) const MAX_LEN: u64 = 64 << 20;
/// How long queueing waits for ring space freed by earlier copies.
const RING_WAIT_MS: u32 = 2000;

struct FileState {
    chan: Option<MemcpyChannel>,
    /// The channel's name, kept: the core frees it with the device.
    chan_name: [u8; CHAN_NAME_LEN],
    /// Watches the channel's device while attached.
    watch: Option<RemovalWatch>,
    /// The channel's device went away: nothing more is mapped for it.
    gone: bool,
    /// The mapped copy of each busy slot.
    jobs: KVec<Option<Job>>,
    /// Slots without a copy.
    free: KVec<usize>,
    /// Registered regions by id.
    regions: Regions,
    copies: u64,
    failed: u64,
    bytes: u64,
}

impl FileState {
    fn in_flight(&self) -> usize {
        self.jobs.len() - self.free.len()
    }

    /// Stops the channel so that no queued copy touches its memory any
    /// more. Returns whether that worked; if not, the memory of every copy
    /// stays pinned and mapped for good (the engine may still write it).
    fn stop_channel(&mut self) -> bool {
        let Some(chan) = &self.chan else {
            return true;
        };
        let Err(e) = chan.terminate() else {
            return true;
        };
        let mut kept = 0;
        for job in self.jobs.iter_mut().flatten() {
            job.abandon();
            kept += 1;
        }
        pr_err!(
            "{}: the channel could not be stopped ({:?}): the memory of {} copies stays pinned\n",
            chan.name(),
            e,
            kept
        );
        false
    }

    /// Ends slot `slot`: drops its mapping (unpins) and counts the result.
    /// Returns what the caller reports: bytes copied or an error.
    fn retire(&mut self, slot: usize, outcome: Outcome) -> (u64, core::result::Result<u64, Error>) {
        let job = self.jobs.get_mut(slot).and_then(Option::take);
        let _ = self.free.push_within_capacity(slot);
        let (user_data, len) = job
            .as_ref()
            .map_or((0, 0), |j| (j.req.user_data, j.req.len));
        drop(job);
        match outcome.error() {
            None => {
                self.copies += 1;
                self.bytes += len;
                (user_data, Ok(len))
            }
            Some(e) => {
                self.failed += 1;
                (user_data, Err(e))
            }
        }
    }
}

/// The private data of an open file.
#[pin_data]
pub(crate) struct CopyFile {
    #[pin]
    state: Mutex<FileState>,
    /// Held by the one thread reaping (see the module's locking notes).
    #[pin]
    reaping: Turn,
    tracker: Arc<Tracker>,
    /// The pages this file's copies hold reserved (and pinned).
    pins: Arc<FilePins>,
    limits: Limits,
    /// Opened with `CAP_SYS_RAWIO`: may take a channel.
    may_take_channel: bool,
}

impl CopyFile {
    /// A file with no channel yet; `may_take_channel` says whether its
    /// opener had `CAP_SYS_RAWIO`.
    pub(crate) fn new(limits: Limits, may_take_channel: bool) -> Result<Arc<Self>> {
        let tracker = Arc::pin_init(Tracker::new(MAX_IN_FLIGHT)?, GFP_KERNEL_ACCOUNT)?;
        let mut jobs = KVec::with_capacity(MAX_IN_FLIGHT, GFP_KERNEL_ACCOUNT)?;
        let mut free = KVec::with_capacity(MAX_IN_FLIGHT, GFP_KERNEL_ACCOUNT)?;
        for i in (0..MAX_IN_FLIGHT).rev() {
            jobs.push(None, GFP_KERNEL_ACCOUNT)?;
            free.push(i, GFP_KERNEL_ACCOUNT)?;
        }
        Arc::pin_init(
            try_pin_init!(Self {
                state <- new_mutex!(FileState {
                    chan: None,
                    chan_name: [0; CHAN_NAME_LEN],
                    watch: None,
                    gone: false,
                    jobs,
                    free,
                    regions: Regions::new()?,
                    copies: 0,
                    failed: 0,
                    bytes: 0,
                }, "plx_dma_copy_file"),
                reaping <- Turn::new(),
                tracker,
                pins: FilePins::new()?,
                limits,
                may_take_channel,
            }),
            GFP_KERNEL_ACCOUNT,
        )
    }

    /// Dispatches an ioctl.
    pub(crate) fn ioctl(this: ArcBorrow<'_, Self>, cmd: u32, arg: usize) -> Result<isize> {
        match Command::decode(cmd).ok_or(ENOTTY)? {
            Command::Info => this.info(arg),
            Command::Attach => this.attach(&this.into(), arg),
            Command::Copy => this.copy(&this.into(), arg),
            Command::Submit => this.submit(&this.into(), arg),
            Command::Reap => this.reap(arg),
            Command::Register => this.register(&this.into(), arg),
            Command::Deregister => this.deregister(arg),
        }
    }

    /// Takes channel `name` (any if `None`) for this file and watches its
    /// device. With `any_is_fine`, an attachment made meanwhile by another
    /// thread is not an error.
    ///
    /// The watch is registered without the file's lock: its callback takes
    /// that lock under the bus's notifier lock.
    ///
    /// `EPERM` for a file opened without `CAP_SYS_RAWIO`: a channel is held
    /// exclusively, and an unprivileged opener could take them all.
    fn attach_channel(this: &Arc<Self>, name: Option<&CStr>, any_is_fine: bool) -> Result {
        if !this.may_take_channel {
            return Err(EPERM);
        }
        {
            let st = this.state.lock();
            if st.gone {
                return Err(ENODEV);
            }
            if st.chan.is_some() {
                return if any_is_fine { Ok(()) } else { Err(EBUSY) };
            }
        }
        let chan = match name {
            Some(n) => MemcpyChannel::request_named(n)?,
            None => MemcpyChannel::request()?,
        };
        let watch = chan.watch_removal(this.clone())?;
        let mut st = this.state.lock();
        if st.chan.is_some() || st.gone {
            let gone = st.gone;
            drop(st);
            // Lost a race: give ours back, outside the lock.
            drop(watch);
            drop(chan);
            return match (gone, any_is_fine) {
                (true, _) => Err(ENODEV),
                (false, true) => Ok(()),
                (false, false) => Err(EBUSY),
            };
        }
        let b = chan.name().to_bytes();
        let n = b.len().min(CHAN_NAME_LEN - 1);
        st.chan_name = [0; CHAN_NAME_LEN];
        st.chan_name[..n].copy_from_slice(&b[..n]);
        st.chan = Some(chan);
        st.watch = Some(watch);
        Ok(())
    }

    /// Stops and unmaps everything, for `release`.
    pub(crate) fn close(&self) {
        // Dropped without the lock: a removal call in progress needs it.
        let watch = self.state.lock().watch.take();
        drop(watch);
        let mut st = self.state.lock();
        if st.in_flight() > 0 {
            // Unreaped copies may still run: stop them before unpinning
            // (a channel that cannot stop keeps their memory pinned).
            st.stop_channel();
        }
        for job in st.jobs.iter_mut() {
            drop(job.take());
        }
        st.regions.clear();
        drop(st.chan.take());
    }

    fn info(&self, arg: usize) -> Result<isize> {
        use abi::info as f;
        let a: Arg<{ f::SIZE }> = abi::read_sized(arg, f::MIN)?;
        let mut out = Out::from_arg(&a);
        let st = self.state.lock();
        out.put_u32(f::ABI_VERSION, abi::ABI_VERSION);
        out.put_u64(f::MAX_LEN, self.limits.max_len);
        out.put_u32(f::MAX_BATCH, MAX_BATCH);
        out.put_u32(f::MAX_IN_FLIGHT, MAX_IN_FLIGHT as u32);
        out.put_u64(f::MAX_PINNED, self.limits.max_pinned_pages);
        // This file's pages only: another user's activity is not its to see.
        out.put_u64(f::PINNED, self.pins.pages());
        out.put_bytes(f::CHANNEL, &st.chan_name);
        out.put_u64(f::COPIES, st.copies);
        out.put_u64(f::FAILED, st.failed);
        out.put_u64(f::BYTES, st.bytes);
        out.put_u32(f::IN_FLIGHT, st.in_flight() as u32);
        let (regions, region_pages) = st.regions.usage();
        out.put_u32(f::REGIONS, regions);
        out.put_u32(f::MAX_REGIONS, MAX_REGIONS);
        out.put_u64(f::REGION_PAGES, region_pages);
        drop(st);
        out.write(arg, a.size)?;
        Ok(0)
    }

    fn attach(&self, this: &Arc<Self>, arg: usize) -> Result<isize> {
        use abi::attach as f;
        let a: Arg<{ f::SIZE }> = abi::read_sized(arg, f::MIN)?;
        if a.u32_at(f::FLAGS) != 0 {
            return Err(EINVAL);
        }
        let raw = &a.bytes[f::CHANNEL..f::CHANNEL + CHAN_NAME_LEN];
        let name = CStr::from_bytes_until_nul(raw).map_err(|_| EINVAL)?;
        Self::attach_channel(this, (!name.is_empty()).then_some(name), false)?;
        Ok(0)
    }

    /// Pins, maps and queues one copy in a free slot, which `tracker`
    /// follows. Returns the slot. The caller rings the doorbell.
    ///
    /// The pages are pinned before `state` is taken, and `state` is let go
    /// while waiting for ring space; the copy sits in its slot by then, so
    /// a removal meanwhile unmaps it, and the rest of it is not queued.
    /// A copy between registered regions pins and maps nothing: it looks
    /// its regions up under `state` and takes a reference on each.
    fn queue(&self, req: CopyReq, duration: PinDuration, for_reap: bool) -> Result<usize> {
        let own = match req.regions {
            None => Some(Job::pin(req, self.limits, duration, &self.pins)?),
            Some(_) => None,
        };
        let mut st = self.state.lock();
        if st.gone {
            return Err(ENODEV);
        }
        let chan = st.chan.as_ref().ok_or(ENODEV)?;
        // Declared after `st`, so an early return drops it first, under
        // the lock, as a job holding regions must be.
        let job = match (own, req.regions) {
            (Some(mut job), _) => {
                job.map(chan)?;
                job
            }
            (None, Some(ids)) => {
                let src = st.regions.get(ids.src)?;
                let dst = st.regions.get(ids.dst)?;
                Job::registered(req, self.limits, src, dst)?
            }
            (None, None) => return Err(EINVAL),
        };
        let max_seg = chan.max_segment();
        let (count, bytes) = job
            .chunks(max_seg)
            .fold((0u32, 0u64), |(n, b), c| (n + 1, b + u64::from(c.len)));
        if bytes != req.len {
            // The mappings do not cover the range: never copy part of it.
            return Err(EFAULT);
        }
        let Some(slot) = st.free.pop() else {
            return Err(EAGAIN);
        };
        let tag = self.tracker.arm(slot, count, for_reap);
        st.jobs[slot] = Some(job);
        let mut sent = 0u32;
        let failure = loop {
            // Walks the chunks not sent yet; starts again after each wait,
            // since the walk borrows the job, which lives under the lock.
            let mut ring_full = false;
            {
                // Checked again after every wait: a removal may have come.
                let (Some(job), Some(chan)) = (
                    st.jobs[slot].as_ref(),
                    st.chan.as_ref().filter(|_| !st.gone),
                ) else {
                    break Some(ENODEV);
                };
                let mut err = None;
                for c in job.chunks(max_seg).skip(sent as usize) {
                    let last = sent + 1 == count;
                    // SAFETY: The chunk lies in the job's memory, mapped for
                    // `chan`'s device (`Job::map`) and kept in `st.jobs`
                    // until the tracker reports the copy ended (reap) or
                    // the channel stopped (`stop_channel`); if it could not
                    // be stopped, `stop_channel` abandons the memory, never
                    // unmapped.
                    let submitted = unsafe {
                        chan.submit(c.dst, c.src, c.len as usize, last, &self.tracker, tag.raw())
                    };
                    match submitted {
                        Ok(_) => sent += 1,
                        Err(e) if e == ENOSPC => {
                            // The provider's descriptors are all in use.
                            // This file holds the channel alone: only its
                            // own copies can free them.
                            if st.in_flight() <= 1 && sent == 0 {
                                err = Some(ENODEV);
                            } else {
                                chan.issue_pending();
                                ring_full = true;
                            }
                            break;
                        }
                        Err(e) => {
                            err = Some(e);
                            break;
                        }
                    }
                }
                if err.is_some() || !ring_full {
                    break err;
                }
            }
            drop(st);
            let waited = self.tracker.wait_any_progress(RING_WAIT_MS);
            st = self.state.lock();
            match waited {
                Ok(()) => {}
                Err(WaitEnd::Interrupted) => break Some(EINTR),
                Err(WaitEnd::TimedOut) => break Some(EAGAIN),
            }
        };
        match failure {
            None => Ok(slot),
            Some(e) if sent == 0 => {
                self.tracker.arm(slot, 0, false);
                let job = st.jobs[slot].take();
                let _ = st.free.push_within_capacity(slot);
                // Unmapped (and region references dropped) under the lock,
                // as removal unmaps everything under it: once it has run,
                // no mapping of this file's may be left for the device.
                // Unpinning waits on no user space either.
                drop(job);
                drop(st);
                Err(e)
            }
            Some(e) => {
                // Part of the copy is queued: it runs, and the copy ends
                // with the error once it has.
                self.tracker.cut_short(tag, count - sent, e);
                Ok(slot)
            }
        }
    }

    /// Rings the doorbell of the file's channel, if it has one.
    fn issue_pending(&self) {
        if let Some(c) = &self.state.lock().chan {
            c.issue_pending();
        }
    }

    fn copy(&self, this: &Arc<Self>, arg: usize) -> Result<isize> {
        let a: Arg<{ abi::copy::SIZE }> = abi::read_sized(arg, abi::copy::MIN)?;
        let req = CopyReq::parse(&a)?;
        Self::attach_channel(this, None, true)?;
        let slot = self.queue(req, PinDuration::Short, false)?;
        self.issue_pending();
        let timeout = match req.timeout_ms {
            0 => abi::DEFAULT_TIMEOUT_MS,
            t => t,
        };
        let waited = self.tracker.wait_slot(slot, timeout);
        let mut st = self.state.lock();
        let (outcome, err) = match waited {
            Ok(o) => (o, None),
            Err(end) => {
                // Stop the channel so the copy can no longer touch the
                // pages, then collect what it did.
                st.stop_channel();
                let o = self.tracker.finished(slot).unwrap_or(Outcome::Aborted);
                let e = match end {
                    WaitEnd::Interrupted => EINTR,
                    WaitEnd::TimedOut => ETIMEDOUT,
                };
                (o, Some(e))
            }
        };
        let (_, res) = st.retire(slot, outcome);
        match (res, err) {
            // Finished after all, just as the wait gave up.
            (Ok(n), _) => Ok(n as isize),
            (Err(_), Some(e)) | (Err(e), None) => Err(e),
        }
    }

    fn submit(&self, this: &Arc<Self>, arg: usize) -> Result<isize> {
        use abi::submit as f;
        let a: Arg<{ f::SIZE }> = abi::read_sized(arg, f::MIN)?;
        let count = a.u32_at(f::COUNT);
        let copies = a.u64_at(f::COPIES) as usize;
        let copy_size = a.u32_at(f::COPY_SIZE) as usize;
        if count == 0 || copy_size < abi::copy::MIN {
            return Err(EINVAL);
        }
        if count > MAX_BATCH {
            return Err(E2BIG);
        }
        Self::attach_channel(this, None, true)?;
        // Every request is read before anything is queued, and without
        // the file's lock; the ones before the first bad one are queued.
        let mut reqs = KVec::with_capacity(count as usize, GFP_KERNEL_ACCOUNT)?;
        let mut first_err = None;
        for i in 0..count as usize {
            let read = copies
                .checked_add(i * copy_size)
                .ok_or(EFAULT)
                .and_then(|at| {
                    abi::read_with_size::<{ abi::copy::SIZE }>(at, copy_size, abi::copy::MIN)
                })
                .and_then(|c| CopyReq::parse(&c));
            match read {
                Ok(req) => reqs.push(req, GFP_KERNEL_ACCOUNT)?,
                Err(e) => {
                    first_err = Some(e);
                    break;
                }
            }
        }
        let mut submitted = 0u32;
        for req in reqs.iter() {
            if let Err(e) = self.queue(*req, PinDuration::Long, true) {
                first_err = Some(e);
                break;
            }
            submitted += 1;
        }
        if submitted > 0 {
            self.issue_pending();
        }
        if submitted == 0 {
            return Err(first_err.unwrap_or(EINVAL));
        }
        let mut out = Out::from_arg(&a);
        out.put_u32(f::SUBMITTED, submitted);
        // The copies are queued whatever happens to this write: the count
        // is also the ioctl's return value.
        let _ = out.write(arg, a.size);
        Ok(submitted as isize)
    }

    fn reap(&self, arg: usize) -> Result<isize> {
        use abi::reap as f;
        let a: Arg<{ f::SIZE }> = abi::read_sized(arg, f::MIN)?;
        let min = a.u32_at(f::MIN_COUNT) as usize;
        let max = a.u32_at(f::MAX) as usize;
        let timeout = a.u32_at(f::TIMEOUT_MS);
        let completions = a.u64_at(f::COMPLETIONS) as usize;
        if max == 0 || min > max || a.u32_at(f::RESERVED) != 0 {
            return Err(EINVAL);
        }
        let mut interrupted = false;
        if min > 0 {
            match self.tracker.wait_done(min.min(MAX_IN_FLIGHT), timeout) {
                Ok(()) | Err(WaitEnd::TimedOut) => {}
                Err(WaitEnd::Interrupted) => interrupted = true,
            }
        }
        // EINTR behind a reaper stalled on its completion buffer.
        let reaping = self.reaping.take()?;
        let mut reaped = 0usize;
        while reaped < max {
            let Some((slot, outcome)) = self.tracker.peek_done() else {
                break;
            };
            let req = self
                .state
                .lock()
                .jobs
                .get(slot)
                .and_then(|j| j.as_ref())
                .map(|j| j.req);
            let user_data = req.map_or(0, |r| r.user_data);
            let result = match outcome.error() {
                None => req.map_or(0, |r| r.len as i64),
                Some(e) => i64::from(e.to_errno()),
            };
            let at = completions
                .checked_add(reaped * abi::completion::SIZE)
                .ok_or(EFAULT)?;
            if let Err(e) = abi::write_completion(at, user_data, result) {
                // Not taken: the completion stays queued for the next try.
                if reaped == 0 {
                    return Err(e);
                }
                break;
            }
            self.tracker.pop_done();
            let _ = self.state.lock().retire(slot, outcome);
            reaped += 1;
        }
        drop(reaping);
        if reaped == 0 && interrupted {
            return Err(EINTR);
        }
        let mut out = Out::from_arg(&a);
        out.put_u32(f::REAPED, reaped as u32);
        // The completions are written and taken: the count is also the
        // ioctl's return value.
        let _ = out.write(arg, a.size);
        Ok(reaped as isize)
    }
}

impl CopyFile {
    /// `PLX_DMA_IOC_REGISTER`: pins the range without the lock, maps it
    /// under `state` and gives it an id; returns the id.
    fn register(&self, this: &Arc<Self>, arg: usize) -> Result<isize> {
        use abi::region as f;
        let a: Arg<{ f::SIZE }> = abi::read_sized(arg, f::MIN)?;
        if a.u32_at(f::RESERVED) != 0 {
            return Err(EINVAL);
        }
        Self::attach_channel(this, None, true)?;
        // Checked again when the id is given; this only spares pinning a
        // range that cannot get one.
        if !self.state.lock().regions.has_room() {
            return Err(ENOSPC);
        }
        let mut region = Region::pin(
            a.u64_at(f::ADDR),
            a.u64_at(f::LEN),
            a.u32_at(f::ACCESS),
            self.limits,
            &self.pins,
        )?;
        let (id, serial) = {
            let mut st = self.state.lock();
            if st.gone {
                return Err(ENODEV);
            }
            let chan = st.chan.as_ref().ok_or(ENODEV)?;
            // Not mapped if this fails: then dropped, unpinned, without
            // the lock.
            region.map(chan)?;
            // Mapped: from here on dropped under the lock, by `insert` if
            // it fails.
            st.regions.insert(region)?
        };
        let mut out = Out::from_arg(&a);
        out.put_u32(f::ID, id);
        if let Err(e) = out.write(arg, a.size) {
            // The caller cannot learn the id: the registration is undone
            // (unless a racing thread already deregistered it).
            let mut st = self.state.lock();
            let region = st.regions.remove(id, Some(serial));
            drop(region);
            drop(st);
            return Err(e);
        }
        Ok(id as isize)
    }

    /// `PLX_DMA_IOC_DEREGISTER`: forgets the id now; the region's pages go
    /// when the last copy that uses them has ended.
    fn deregister(&self, arg: usize) -> Result<isize> {
        use abi::deregister as f;
        let a: Arg<{ f::SIZE }> = abi::read_sized(arg, f::MIN)?;
        if a.u32_at(f::FLAGS) != 0 || a.u32_at(f::RESERVED) != 0 {
            return Err(EINVAL);
        }
        let mut st = self.state.lock();
        let region = st.regions.remove(a.u32_at(f::ID), None)?;
        // Under the lock (see `crate::region`); unmaps and unpins if no
        // copy in flight holds the region.
        drop(region);
        drop(st);
        Ok(0)
    }
}

impl RemovalSink for CopyFile {
    fn device_removing(this: ArcBorrow<'_, Self>) {
        let mut st = this.state.lock();
        st.gone = true;
        if st.stop_channel() {
            for job in st.jobs.iter_mut().flatten() {
                job.unmap();
            }
            // The last references: every region is unmapped now.
            st.regions.clear();
        } else {
            st.regions.abandon();
        }
    }
}
