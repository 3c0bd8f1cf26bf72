// SPDX-License-Identifier: GPL-2.0

//! One DMA channel: its descriptor ring and the dmaengine operations on it.
//!
//! # Ring protocol
//!
//! The ring lives in coherent DMA memory. Prep takes a descriptor without
//! a lock (see [`Preparer`]); hardware slots are taken at *submit* time, in
//! cookie order, so that a client may prepare several descriptors and
//! submit them in any order. Submit writes the slot's addresses, not its
//! first word. `issue_pending` hands the batch submitted since the last one
//! to the engine in one pass: after one `dma_wmb()`, each first word with
//! its size and VALID, then (after another) the one START doorbell of the
//! batch. Which descriptors ask for a completion interrupt is decided there,
//! for the whole batch (see [`ChannelConfig`]). The engine clears VALID in
//! its write-back, which is what completion reaps, from `tail` up to the
//! first slot the engine still owns, and never past what was issued.
//!
//! # Locking
//!
//! - `state` (spinlock, softirqs off) orders the ring: head, tail, the
//!   slot table, the descriptors waiting for their client's ack, and
//!   cookie assignment (the [`Submitter`]). It is the one lock a copy
//!   takes on its way to the engine, at submit.
//! - `completions` (spinlock, softirqs off) serializes completions and queues
//!   the client callbacks they yield. It is taken before `state` when both
//!   are needed. Callbacks run under no lock at all: one thread at a time
//!   runs the queue in completion order, and a completion found meanwhile
//!   (by another thread, or by a callback polling `tx_status` or
//!   terminating) only queues its callback for that thread. So a callback
//!   may poll, terminate, prepare and submit on its own channel, as
//!   dmaengine allows. A descriptor is recycled only after its callback
//!   ran, and only once the client acked it (`DMA_CTRL_ACK`).
//! - `recovery` (a mutex) serializes recoveries and terminates, which run
//!   in process context only (the IRQ thread, the watchdog's and the
//!   terminator's work items) and sleep while the engine stops. It is
//!   taken before the other two.
//! - The hard IRQ handler touches none: it acknowledges the interrupt and
//!   queues the reap (a BH work item) or wakes the IRQ thread. Every
//!   context that takes `state` or `completions` is a task or a softirq
//!   (the reap, the watchdog's soft hrtimer), so both are `_bh` locks, as
//!   the C `plx_dma`'s is: interrupts stay on, which costs far less than
//!   masking them twice per copy. The C glue refuses clients that call in
//!   with interrupts off (see `rust/helpers/dmaengine.c`).

use crate::{
    dmaengine::{
        provider::{
            Callback, ChannelOps, Completer, DescPool, Finished, IdleDesc, Memcpy, NewChannel,
            Prepared, Preparer, SubmittedDesc, Submitter,
        },
        Cookie, PrepFlags, TxResult,
    },
    hw_desc::{copy_len, issued_word, reachable, HwDesc, WriteBack, FLAG_VALID, MAX_ADDRESS},
    pci_ext::BusMaster,
    regs::{self, BAR0_SIZE},
    spinlock_bh::{new_spinlock_bh, SpinLockBh},
    stats::{CompletionCounters, RingCounters, Snapshot, Stats},
};
use core::fmt;
use kernel::{
    device::{Bound, Device},
    devres::Devres,
    dma::{Coherent, DmaAddress},
    io::{io_project, io_read, io_write, register::Register, Io, IoBase, SysMem},
    new_condvar, new_mutex, new_work,
    pci::{self, DevresBar},
    prelude::*,
    sync::{
        aref::ARef,
        atomic::{AtomicFlag, Relaxed},
        barrier::{dma_mb, Write},
        Arc, ArcBorrow, CondVar, CondVarTimeoutResult, Mutex,
    },
    time::{delay::fsleep, hrtimer::HrTimer, msecs_to_jiffies, Delta, Instant, Monotonic},
    workqueue::Work,
};
use pin_init::Zeroable;
use terminator::{PostedTerminate, TerminateState};
use watchdog::WatchdogState;

mod config;
mod reaper;
mod terminator;
mod watchdog;
pub(crate) use config::ChannelConfig;
pub(crate) use watchdog::Watchdog;

type Ring = Coherent<[HwDesc]>;

/// The ring as the CPU sees it. A projection of a `Coherent` view also
/// computes the DMA address of what it selects, an overflow-checked
/// subtraction and addition per field the CPU reads or writes; the CPU
/// never needs that address.
type RingMem<'a> = SysMem<'a, [HwDesc]>;

/// The CPU's view of `ring`.
#[inline]
fn ring_mem(ring: &Ring) -> RingMem<'_> {
    ring.as_view().as_sys_mem()
}

/// Reads the first word of ring slot `slot`.
#[inline]
fn read_flags(ring: RingMem<'_>, slot: usize) -> Result<u32> {
    Ok(io_read!(ring, [try: slot].flags_and_size))
}

/// Writes the first word of ring slot `slot`.
#[inline]
fn write_flags(ring: RingMem<'_>, slot: usize, flags: u32) -> Result {
    io_write!(ring, [try: slot].flags_and_size, flags);
    Ok(())
}

/// Writes the addresses of descriptor `hw` into ring slot `slot`, leaving
/// its first word (VALID) alone.
#[inline]
fn write_addresses(ring: RingMem<'_>, slot: usize, hw: &HwDesc) -> Result {
    // One bounds check for the four fields.
    let desc = io_project!(ring, [try: slot]);
    io_write!(desc, .dst_lo, hw.dst_lo);
    io_write!(desc, .src_lo, hw.src_lo);
    io_write!(desc, .dst_hi, hw.dst_hi);
    io_write!(desc, .src_hi, hw.src_hi);
    Ok(())
}

/// Completions handled per lock round trip.
const BATCH: usize = 32;
/// Prefetch limit programmed at start ("four descriptors" in the C driver).
const PREFETCH_FOUR: u32 = 8;

/// What the driver keeps of a submitted descriptor, in its ring slot.
struct InRing {
    token: SubmittedDesc,
    len: u32,
    /// The client wants a callback.
    interrupt: bool,
    cookie: i32,
}

/// Ring bookkeeping, under `PlxChannel::state`.
struct RingState {
    /// A client holds the channel and the engine is programmed.
    active: bool,
    /// The engine points at the ring, so the doorbell may ring. Cleared
    /// before the engine is stopped: a doorbell on a detached engine is an
    /// error (START with no ring).
    attached: bool,
    /// The device is gone: every new request fails.
    dead: bool,
    /// Next slot to fill (free-running; slot = head % size).
    head: u32,
    /// End of what `issue_pending` handed to the engine (free-running,
    /// from `tail` to `head`): slots from here to `head` are submitted but
    /// not VALID yet.
    issued: u32,
    /// Oldest slot not yet completed (free-running).
    tail: u32,
    /// Some descriptor submitted since the last `issue_pending` wants a
    /// callback (what coalescing needs).
    unissued_asked: bool,
    /// The descriptor each ring slot holds.
    in_ring: KVec<Option<InRing>>,
    /// Completed descriptors the client has not acked yet (no
    /// `DMA_CTRL_ACK`): not reused until it does.
    unacked: KVec<IdleDesc>,
    /// Present while a client holds the channel.
    submitter: Option<Submitter>,
    /// Progress seen by the stall watchdog.
    watchdog: WatchdogState,
    /// What `terminate_all` asked of the terminator work item.
    terminate: TerminateState,
    /// Submissions, bytes, doorbells and interrupt requests.
    counters: RingCounters,
}

impl RingState {
    /// Descriptors submitted and not completed, issued or not.
    fn in_flight(&self) -> u32 {
        self.head.wrapping_sub(self.tail)
    }

    /// Descriptors handed to the engine and not completed.
    fn issued_in_flight(&self) -> u32 {
        self.issued.wrapping_sub(self.tail)
    }

    /// Makes descriptor `d`, whose callback has run, free to be prepared
    /// again, or keeps it aside until its client acks it. Without a
    /// submitter the client, and its pool, are gone.
    fn recycle(&mut self, d: IdleDesc) {
        match self.submitter.as_ref() {
            Some(sub) if sub.acked(&d) => sub.release(d),
            // Cannot fail: room for every descriptor.
            Some(_) => drop(self.unacked.push_within_capacity(d)),
            None => {}
        }
    }

    /// Frees the descriptors acked since they completed; returns whether
    /// there were any.
    fn release_acked(&mut self) -> bool {
        let Some(sub) = self.submitter.as_ref() else {
            return false;
        };
        let before = self.unacked.len();
        // One pass, swapping the last entry into each hole (the order of
        // the unacked list does not matter).
        let mut i = 0;
        while i < self.unacked.len() {
            if !sub.acked(&self.unacked[i]) {
                i += 1;
                continue;
            }
            let Some(last) = self.unacked.pop() else {
                break;
            };
            let d = match self.unacked.get_mut(i) {
                Some(hole) => core::mem::replace(hole, last),
                None => last,
            };
            sub.release(d);
        }
        self.unacked.len() != before
    }
}

/// A completed descriptor whose client callback has not run yet.
struct Ended {
    desc: IdleDesc,
    /// Taken when it runs.
    callback: Option<Callback>,
}

/// Completion bookkeeping, under `PlxChannel::completions`.
struct Completions {
    /// Present while a client holds the channel.
    completer: Option<Completer>,
    /// Callbacks waiting to run, in completion order. At most one per
    /// descriptor: a descriptor is recycled only after its callback ran.
    queue: KVec<Ended>,
    /// Where the running thread moves `queue` to run it (same capacity,
    /// so nothing is allocated under the lock).
    spare: KVec<Ended>,
    /// A thread is running callbacks; it also runs those queued meanwhile.
    running: bool,
    /// Threads asleep on `PlxChannel::idle`: the callback runner, on the
    /// completion path, wakes the queue only when someone waits.
    sleepers: u32,
    /// Descriptors completed and failed.
    counters: CompletionCounters,
}

/// What one [`PlxChannel::drain`] completed.
#[derive(Clone, Copy, Default)]
struct Reaped {
    /// Descriptors completed, failed ones included.
    done: usize,
    /// Of those, descriptors that failed or were aborted.
    failed: usize,
    /// The free-running index of the oldest descriptor handed to the
    /// engine and still unfinished when it stopped, if any.
    unfinished: Option<u32>,
}

/// How [`PlxChannel::stop_engine`] stops the engine.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// Let the running descriptor finish (pause), abort only if the engine
    /// does not pause within a second: what terminate, recovery and remove
    /// do, since the client may still want that copy.
    Graceful,
    /// Abort at once: the client has let go, nothing in flight is wanted,
    /// and the core waits for this under its global `dma_list_mutex`,
    /// which every channel request and release of the system takes.
    Abort,
}

/// How [`PlxChannel::drain`] treats descriptors the engine has not finished.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Drain {
    /// Stop at the first descriptor the engine still owns.
    Finished,
    /// The engine is stopped: abort everything still queued.
    All,
    /// The engine is stopped: abort what is queued before this
    /// free-running index, keep the rest queued.
    AbortBefore(u32),
}

/// A DMA channel of one PCI function.
#[pin_data]
pub(crate) struct PlxChannel {
    dev: ARef<Device>,
    /// Switched off when the engine would not stop but its descriptors
    /// must end (the device or its client is going).
    master: BusMaster,
    bar: DevresBar<BAR0_SIZE>,
    ring: Devres<Ring>,
    ring_dma: DmaAddress,
    size: u32,
    #[pin]
    state: SpinLockBh<RingState>,
    #[pin]
    completions: SpinLockBh<Completions>,
    /// Woken, under `completions`, when the callbacks stop running and
    /// when a terminate ends: what [`ChannelOps::synchronize`] waits for.
    #[pin]
    idle: CondVar,
    /// Mirrors `RingState::active` for prep, which takes no lock (see
    /// [`Self::set_active`]).
    open: AtomicFlag,
    /// Set by the hard IRQ handler when the engine reported an error.
    error_pending: AtomicFlag,
    /// The interrupt vector is message-signalled (see
    /// [`Self::ack_interrupt`]).
    msi: AtomicFlag,
    /// Serializes recoveries: the IRQ thread and the watchdog's work item
    /// may both decide to recover. Both run in process context, and a
    /// recovery sleeps while the engine stops. Taken before `completions`.
    #[pin]
    recovery: Mutex<()>,
    /// Ticks of the stall watchdog (see [`Watchdog`]).
    #[pin]
    watchdog_timer: HrTimer<Self>,
    /// Recovers from a stall the watchdog found (see [`Watchdog`]).
    #[pin]
    recovery_work: Work<Self>,
    /// Reaps completions in softirq context (see [`reaper`]).
    #[pin]
    reap_work: Work<Self, { reaper::REAP }>,
    /// Stops the engine for `terminate_all` (see [`terminator`]).
    #[pin]
    terminate_work: Work<Self, { terminator::TERMINATE }>,
    /// A terminate called with interrupts off (see [`terminator`]).
    posted_terminate: PostedTerminate,
    /// Completion interrupts, polling and the watchdog timeout.
    config: ChannelConfig,
    pub(crate) stats: Stats,
}

impl PlxChannel {
    /// Creates the channel of a bound function with a ring of `size` slots,
    /// a power of two, completing as `config` says.
    pub(crate) fn new(
        pdev: &pci::Device<Bound>,
        bar: DevresBar<BAR0_SIZE>,
        size: u32,
        config: ChannelConfig,
    ) -> Result<Arc<Self>> {
        if !size.is_power_of_two() {
            return Err(EINVAL);
        }
        let dev: &Device<Bound> = pdev.as_ref();
        let n = size as usize;
        let mem = Coherent::<HwDesc>::zeroed_slice(dev, n, GFP_KERNEL)?;
        let ring_dma = mem.dma_address();
        if ring_dma > MAX_ADDRESS {
            return Err(ERANGE);
        }
        let ring = Devres::new(dev, mem)?;
        let mut in_ring = KVec::with_capacity(n, GFP_KERNEL)?;
        let unacked = KVec::with_capacity(n, GFP_KERNEL)?;
        let queue = KVec::with_capacity(n, GFP_KERNEL)?;
        let spare = KVec::with_capacity(n, GFP_KERNEL)?;
        for _ in 0..n {
            in_ring.push(None, GFP_KERNEL)?;
        }
        Arc::pin_init(
            pin_init!(Self {
                dev: dev.into(),
                master: BusMaster::new(pdev),
                bar,
                ring,
                ring_dma,
                size,
                state <- new_spinlock_bh!(RingState {
                    active: false,
                    attached: false,
                    dead: false,
                    head: 0,
                    issued: 0,
                    tail: 0,
                    unissued_asked: false,
                    in_ring,
                    unacked,
                    submitter: None,
                    watchdog: WatchdogState::default(),
                    terminate: TerminateState::default(),
                    counters: RingCounters::default(),
                }, "plx_dma_ring"),
                completions <- new_spinlock_bh!(
                    Completions {
                        completer: None,
                        queue,
                        spare,
                        running: false,
                        sleepers: 0,
                        counters: CompletionCounters::default(),
                    },
                    "plx_dma_completions"
                ),
                idle <- new_condvar!("plx_dma_idle"),
                open: AtomicFlag::new(false),
                error_pending: AtomicFlag::new(false),
                msi: AtomicFlag::new(false),
                recovery <- new_mutex!((), "plx_dma_recovery"),
                watchdog_timer <- HrTimer::new(),
                recovery_work <- new_work!("plx_dma_recovery_work"),
                reap_work <- new_work!("plx_dma_reap_work"),
                terminate_work <- new_work!("plx_dma_terminate_work"),
                posted_terminate: PostedTerminate::new(),
                config,
                stats: Stats::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// Every counter of the channel.
    pub(crate) fn counters(&self) -> Snapshot {
        // `completions` before `state`, as everywhere.
        let done = self.completions.lock().counters;
        let ring = self.state.lock().counters;
        Snapshot {
            ring,
            done,
            interrupts: Stats::get(&self.stats.interrupts),
            recoveries: Stats::get(&self.stats.recoveries),
            stalls: Stats::get(&self.stats.stalls),
            status_reads: Stats::get(&self.stats.status_reads),
        }
    }

    /// Opens the channel to new work (`on`) or closes it: `active`, under
    /// the ring lock, and its mirror for prep.
    fn set_active(&self, st: &mut RingState, on: bool) {
        st.active = on;
        self.open.store(on, Relaxed);
    }

    /// Ring occupancy: descriptors submitted and not yet completed.
    pub(crate) fn occupancy(&self) -> u32 {
        self.state.lock().in_flight()
    }

    /// Ring size in descriptors.
    pub(crate) fn size(&self) -> u32 {
        self.size
    }

    /// The ring slot of free-running index `index`. The ring size is a
    /// power of two (the module parameter is validated), so a mask does it
    /// without a division.
    fn slot(&self, index: u32) -> usize {
        (index & self.size.wrapping_sub(1)) as usize
    }

    /// Points the engine, idle, at the ring slot of `tail`.
    fn program_ring(&self) -> Result {
        let tail = self.state.lock().tail;
        let next = self.ring_dma + (core::mem::size_of::<HwDesc>() * self.slot(tail)) as u64;
        let bar = self.bar.try_access().ok_or(ENODEV)?;
        let lo = self.ring_dma as u32;
        bar.write_reg(regs::CTRL::clear_status());
        bar.write_reg(regs::RING_ADDR::zeroed().with_value(lo));
        bar.write_reg(regs::RING_ADDR_HI::zeroed().with_value((self.ring_dma >> 32) as u32));
        bar.write_reg(regs::RING_NEXT_ADDR::zeroed().with_value(next as u32));
        bar.write_reg(regs::RING_COUNT::zeroed().with_value(self.size));
        bar.write_reg(regs::PREF_LIMIT::zeroed().with_value(PREFETCH_FOUR as u8));
        bar.write_reg(regs::INTR_CTRL::zeroed().with_error_en(true));
        self.state.lock().attached = true;
        Ok(())
    }

    /// Points the engine at the ring again and rings the doorbell for what
    /// is queued (submitted while the engine was stopped).
    fn restart(&self) -> Result {
        self.program_ring()?;
        let st = self.state.lock();
        if st.active && st.issued_in_flight() != 0 {
            dma_mb(Write);
            self.kick();
        }
        Ok(())
    }

    /// Reads CTRL; `ENODEV` once the device is gone. The BAR is taken anew
    /// for each access, never across a wait: its guard is an RCU
    /// read-side section, where nothing may sleep.
    fn read_ctrl(&self) -> Result<regs::CTRL> {
        self.bar
            .try_access()
            .map(|bar| bar.read(regs::CTRL))
            .ok_or(ENODEV)
    }

    /// Asks the engine to pause at the next descriptor boundary; any
    /// context.
    fn request_pause(&self) {
        if let Some(bar) = self.bar.try_access() {
            bar.write_reg(regs::CTRL::clear_status().with_graceful_pause(true));
        }
    }

    /// Polls CTRL until `done` holds, for `timeout` at most, sleeping
    /// between reads: 10 us at first, doubling up to 1 ms, so that a quick
    /// stop is seen at once and a slow one costs few MMIO reads. Process
    /// context only. `ENODEV`: the device went away meanwhile.
    fn wait_ctrl(&self, done: fn(&regs::CTRL) -> bool, timeout: Delta) -> Result {
        let start = Instant::<Monotonic>::now();
        let mut nap_us = 10;
        loop {
            if done(&self.read_ctrl()?) {
                return Ok(());
            }
            if start.elapsed().as_nanos() >= timeout.as_nanos() {
                return Err(ETIMEDOUT);
            }
            fsleep(Delta::from_micros(nap_us));
            nap_us = (nap_us * 2).min(1000);
        }
    }

    /// Stops the engine (see [`Stop`]) and detaches the ring from it;
    /// process context (it sleeps while it waits).
    ///
    /// When a graceful pause does not complete, the current descriptor is
    /// aborted and ABORT_DONE awaited: only an engine that said it stopped
    /// may have its descriptors reported aborted, since their clients then
    /// free the buffers. Returns `false` for an engine that did neither:
    /// the channel is declared dead and its descriptors stay outstanding.
    ///
    /// Waits up to a second for a pause and 100 ms for an abort.
    #[must_use]
    fn stop_engine(&self, how: Stop) -> bool {
        self.state.lock().attached = false;
        let Ok(ctrl) = self.read_ctrl() else {
            // The device is gone (its bus mastering with it).
            return true;
        };
        if u32::from(ctrl) & !u32::from(regs::CTRL::zeroed().with_graceful_pause(true)) == 0 {
            // Never started since reset.
            return true;
        }
        let pause = regs::CTRL::clear_status().with_graceful_pause(true);
        let mut stopped = Err(ETIMEDOUT);
        if how == Stop::Graceful {
            self.request_pause();
            stopped = self.wait_ctrl(|c| c.graceful_pause_done(), Delta::from_secs(1));
            if stopped.as_ref().is_err_and(|e| *e != ENODEV) {
                dev_err!(
                    self.dev,
                    "timeout waiting for graceful pause: aborting the engine\n"
                );
            }
        }
        if stopped.as_ref().is_err_and(|e| *e != ENODEV) {
            if let Some(bar) = self.bar.try_access() {
                bar.write_reg(pause.with_abort(true));
            }
            stopped = self.wait_ctrl(|c| c.abort_done(), Delta::from_millis(100));
        }
        match stopped {
            Ok(()) => {}
            // The device went away meanwhile (its bus mastering with it).
            Err(e) if e == ENODEV => return true,
            Err(_) => {
                dev_err!(
                    self.dev,
                    "the engine neither paused nor aborted: channel declared dead, its descriptors stay outstanding\n"
                );
                let mut st = self.state.lock();
                st.dead = true;
                self.set_active(&mut st, false);
                self.posted_terminate.mark_dead();
                return false;
            }
        }
        if let Some(bar) = self.bar.try_access() {
            bar.write_reg(pause);
            bar.write_reg(regs::RING_COUNT::zeroed());
            bar.write_reg(regs::RING_ADDR::zeroed());
            bar.write_reg(regs::RING_ADDR_HI::zeroed());
            bar.write_reg(regs::RING_NEXT_ADDR::zeroed());
        }
        true
    }

    /// Rings the doorbell: the engine fetches from its next pointer.
    fn kick(&self) {
        if let Some(bar) = self.bar.try_access() {
            // The 16-bit write leaves CTRL2 (the upper half) untouched.
            bar.write16(
                u32::from(regs::CTRL::start_ring()) as u16,
                regs::CTRL::OFFSET,
            );
        }
    }

    /// Completes finished (or, with [`Drain::All`], all) descriptors, then
    /// runs the client callbacks (see the locking rules above).
    fn drain(&self, mode: Drain) -> Reaped {
        let reaped = self.complete_finished(mode);
        self.run_callbacks();
        reaped
    }

    /// Completes descriptors as [`Self::drain`] does and queues their
    /// callbacks, without running them.
    fn complete_finished(&self, mode: Drain) -> Reaped {
        let mut reaped = Reaped::default();
        let mut done: [Option<Finished>; BATCH] = [const { None }; BATCH];
        loop {
            let mut comp = self.completions.lock();
            let n = self.collect(mode, &mut done, &mut reaped.unfinished);
            if n == 0 {
                break;
            }
            reaped.done += n;
            for fin in done.iter_mut().take(n).filter_map(Option::take) {
                let c = &mut comp.counters;
                match fin.result() {
                    TxResult::NoError => c.completed = c.completed.wrapping_add(1),
                    _ => {
                        c.failed = c.failed.wrapping_add(1);
                        reaped.failed += 1;
                    }
                }
                // No completer: the client and its pool are gone.
                let Some(completer) = comp.completer.as_mut() else {
                    continue;
                };
                let Ok((callback, desc)) = completer.complete(fin) else {
                    continue;
                };
                // Cannot fail: one entry per descriptor at most.
                if let Err(e) = comp.queue.push_within_capacity(Ended {
                    desc,
                    callback: Some(callback),
                }) {
                    self.state.lock().recycle(e.0.desc);
                }
            }
        }
        reaped
    }

    /// Runs the queued client callbacks with no lock held, unless another
    /// thread (or this one, further up the stack) already does: that one
    /// runs them, in order.
    fn run_callbacks(&self) {
        let mut comp = self.completions.lock();
        if comp.running {
            return;
        }
        comp.running = true;
        while !comp.queue.is_empty() {
            let mut batch = core::mem::take(&mut comp.spare);
            core::mem::swap(&mut comp.queue, &mut batch);
            // Without a completer the client has let go: its callbacks
            // are dropped.
            let runner = comp.completer.as_ref().map(Completer::runner);
            drop(comp);
            if let Some(runner) = runner {
                runner.run(|gate| {
                    for ended in batch.iter_mut() {
                        gate.invoke_in_place(&mut ended.callback);
                    }
                });
            }
            // One lock round trip for the whole batch.
            let mut st = self.state.lock();
            for ended in batch.drain_all() {
                st.recycle(ended.desc);
            }
            drop(st);
            comp = self.completions.lock();
            comp.spare = batch;
        }
        comp.running = false;
        if comp.sleepers != 0 {
            self.idle.notify_all();
        }
    }

    /// Wakes the waiters of `idle` after a state change they wait for that
    /// was made under `state` alone: taking `completions` first means a
    /// waiter is either still before its check or already asleep.
    fn notify_idle(&self) {
        let comp = self.completions.lock();
        if comp.sleepers != 0 {
            self.idle.notify_all();
        }
    }

    /// Sleeps until `done` holds, checked under `completions` (taken
    /// before `state`, as everywhere) and rechecked at each wake-up of
    /// `idle`. Process context only.
    fn wait_idle(&self, done: impl Fn(&Completions) -> bool) {
        let mut comp = self.completions.lock();
        while !done(&comp) {
            // Counted under the lock the wakers read it under, before
            // the sleep: none of them can miss this waiter.
            comp.sleepers += 1;
            self.idle.wait(&mut comp);
            comp.sleepers -= 1;
        }
    }

    /// As [`Self::wait_idle`], for at most `timeout`, and no longer once a
    /// signal is pending (so that a killed caller does not spin out the
    /// timeout). Returns whether `done` holds.
    fn wait_idle_timeout(&self, done: impl Fn(&Completions) -> bool, timeout: Delta) -> bool {
        let ms = u32::try_from(timeout.as_millis()).unwrap_or(u32::MAX);
        let mut left = msecs_to_jiffies(ms);
        let mut comp = self.completions.lock();
        while !done(&comp) {
            comp.sleepers += 1;
            let woken = self.idle.wait_interruptible_timeout(&mut comp, left);
            comp.sleepers -= 1;
            match woken {
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Signal { .. } | CondVarTimeoutResult::Timeout => {
                    return done(&comp)
                }
            }
        }
        true
    }

    /// Moves up to [`BATCH`] finished descriptors off the ring into `out`.
    /// `unfinished` tells, once it returns, the free-running index of the
    /// oldest issued descriptor still in flight, if any.
    fn collect(
        &self,
        mode: Drain,
        out: &mut [Option<Finished>; BATCH],
        unfinished: &mut Option<u32>,
    ) -> usize {
        let mut st = self.state.lock();
        let Some(guard) = self.ring.try_access() else {
            return 0;
        };
        let ring = ring_mem(&guard);
        let mut n = 0;
        while n < BATCH && st.in_flight() != 0 {
            let slot = self.slot(st.tail);
            let Ok(word) = read_flags(ring, slot) else {
                break;
            };
            let wb = WriteBack(word);
            let Some(len) = st.in_ring[slot].as_ref().map(|d| d.len) else {
                break;
            };
            let unissued = st.issued_in_flight() == 0;
            let abort =
                mode == Drain::All || matches!(mode, Drain::AbortBefore(bound) if st.tail != bound);
            let (result, residue) = if unissued {
                // Never handed to the engine: nothing to reap, only to
                // take back, whole, from a stopped one.
                if !abort {
                    break;
                }
                (TxResult::Aborted, len)
            } else if !wb.pending() {
                (wb.result(), wb.residue(len))
            } else if abort {
                // Take the descriptor back from the stopped engine.
                let _ = write_flags(ring, slot, word & !FLAG_VALID);
                (TxResult::Aborted, len)
            } else {
                break;
            };
            if result == TxResult::NoError {
                st.counters.bytes = st.counters.bytes.wrapping_add(u64::from(len - residue));
            }
            let Some(mut d) = st.in_ring[slot].take() else {
                break;
            };
            let Some(sub) = st.submitter.as_ref() else {
                st.in_ring[slot] = Some(d);
                break;
            };
            let fin = match sub.finish(d.token, result, residue) {
                Ok(fin) => fin,
                Err(token) => {
                    d.token = token;
                    st.in_ring[slot] = Some(d);
                    break;
                }
            };
            out[n] = Some(fin);
            n += 1;
            st.tail = st.tail.wrapping_add(1);
            if unissued {
                st.issued = st.tail;
            }
        }
        *unfinished = (st.issued_in_flight() != 0).then_some(st.tail);
        n
    }

    /// Stops the engine, completes what finished and aborts the rest.
    ///
    /// `head` and `tail` keep counting: a descriptor submitted by another
    /// thread meanwhile stays queued at `tail`, where
    /// [`Self::program_ring`] points the engine next.
    ///
    /// `EIO` when the engine could not be stopped: nothing is aborted then,
    /// since the engine may still write the buffers.
    fn stop_and_abort(&self, how: Stop) -> Result {
        if !self.stop_engine(how) {
            return Err(EIO);
        }
        self.drain(Drain::All);
        Ok(())
    }

    /// Recovers from an engine error or a stall: complete what the engine
    /// wrote back (failed copies report their own status), abort what was
    /// queued when recovery began, and restart the engine at the first
    /// descriptor submitted since, which stays queued.
    fn recover(&self, why: fmt::Arguments<'_>) {
        let _serial = self.recovery.lock();
        Stats::bump(&self.stats.recoveries);
        // Taken before anything completes: a client woken below may submit
        // at once, and that work is not the failed engine's.
        let bound = self.state.lock().head;
        self.drain(Drain::Finished);
        let tail = self.state.lock().tail;
        dev_err!(
            self.dev,
            "{}: aborting {} unfinished descriptor(s) and restarting the ring\n",
            why,
            bound.wrapping_sub(tail)
        );
        if !self.stop_engine(Stop::Graceful) {
            // Dead: its copies stay outstanding, see `stop_engine`.
            return;
        }
        self.drain(Drain::AbortBefore(bound));
        // Not `self.state.lock().active && ...`: that guard would live
        // through `program_ring`, which takes the lock again.
        let active = self.state.lock().active;
        if active && self.restart().is_err() {
            self.set_active(&mut self.state.lock(), false);
        }
    }

    /// Bottom half of the interrupt in the IRQ thread: recover from an
    /// engine error, then reap.
    pub(crate) fn handle_interrupt(&self) {
        if self.error_pending.xchg(false, Relaxed) {
            self.recover(format_args!("engine error"));
        }
        if self.reap_interrupt() {
            self.recover(format_args!("engine error"));
        }
    }

    /// Whether an acknowledged interrupt needs the IRQ thread: to recover
    /// from an engine error (which sleeps), or to reap when configured so.
    /// Otherwise the caller queues the reap with [`Self::queue_reap`].
    pub(crate) fn needs_thread(&self) -> bool {
        self.config.reap_in_thread || self.error_pending.load(Relaxed)
    }

    /// Records the type of the function's interrupt vector, before it is
    /// requested: `msi` for MSI or MSI-X, `false` for INTx.
    pub(crate) fn set_msi(&self, msi: bool) {
        self.msi.store(msi, Relaxed);
    }

    /// Top half: acknowledges the interrupt and returns whether to reap.
    ///
    /// A message-signalled vector (MSI, MSI-X) is the function's own, and
    /// the engine sends one message per event, whether or not the status
    /// bit was already set (the device model says so): the handler touches
    /// no register, since an MMIO read is a round trip to the device (a
    /// vfio-user message, about 120 us here, a third of a copy's latency
    /// one at a time). The reap reads `INTR_STATUS` afterwards, and only
    /// when the ring says it may hold more than completions (see
    /// [`Self::reap_interrupt`]).
    ///
    /// INTx may be shared, so an empty status means another device's
    /// interrupt, and the line stays up until the status is cleared: the
    /// handler reads and clears it. That clear is a posted write, which may
    /// land after the engine latched `DESC_DONE` for the next descriptor
    /// and clear that too: reading the register back makes the clear land
    /// before the reap reads the ring. A completion whose bit it cleared
    /// wrote back before it landed, and a later one keeps its bit, and the
    /// line, up.
    pub(crate) fn ack_interrupt(&self) -> bool {
        if self.msi.load(Relaxed) {
            Stats::bump(&self.stats.interrupts);
            return true;
        }
        let Some(bar) = self.bar.try_access() else {
            return false;
        };
        let status = bar.read(regs::INTR_STATUS);
        if u16::from(status) == 0 {
            return false;
        }
        bar.write_reg(status);
        let _ = bar.read(regs::INTR_STATUS);
        Stats::bump(&self.stats.interrupts);
        if status.error() {
            self.error_pending.store(true, Relaxed);
        }
        true
    }

    /// Reaps after an interrupt, and returns whether the engine reported an
    /// error, whose recovery the caller runs (in process context).
    ///
    /// On a message-signalled vector nothing read `INTR_STATUS` yet. It is
    /// read (and cleared) here when the interrupt may have been an error: a
    /// copy failed (a data fault raises `ERROR` with its write-back),
    /// nothing completed while issued descriptors are unfinished, or they
    /// are and the engine made no progress on them while the callbacks ran
    /// (a fetch or write-back fault stops the engine with them VALID). A plain
    /// completion, the common case, costs no MMIO read; the `DESC_DONE` it
    /// leaves latched interrupts nobody and is cleared at the next read.
    ///
    /// When a copy failed or nothing completed, the callbacks wait for the
    /// recovery on `ERROR`, which runs them once it noted what was queued:
    /// as with an error seen by the hard handler, a client woken by its
    /// failed copy cannot submit work the recovery then mistakes for the
    /// failed engine's (nor fail again before it). Copies that completed
    /// with more still in flight all succeeded, so their callbacks run
    /// first: that is the interrupt a deep queue raises in the middle of a
    /// batch, or with the next batch already issued, and the read, a round
    /// trip to the device, is then rarely needed and never on their path.
    /// Should the engine have stopped on a fault meanwhile, a client those
    /// callbacks woke may have queued copies before the recovery began,
    /// which it aborts with the failed engine's, as it would copies
    /// submitted then by any other thread.
    pub(crate) fn reap_interrupt(&self) -> bool {
        let reaped = self.complete_finished(Drain::Finished);
        if !self.msi.load(Relaxed) {
            self.run_callbacks();
            return false;
        }
        if reaped.done == 0 && reaped.unfinished.is_none() {
            // Nothing completed, and nothing issued is left: a message for
            // copies an earlier reap completed (a deep queue's interrupts
            // often outrun their reaps). No fault can be pending: a fault
            // stops the engine at an issued descriptor, which then stays
            // VALID, and the reap of a failed copy reads the status itself.
            self.run_callbacks();
            return false;
        }
        if reaped.done == 0 || reaped.failed != 0 {
            let error = self.read_status_error();
            if !error {
                self.run_callbacks();
            }
            return error;
        }
        self.run_callbacks();
        reaped
            .unfinished
            .is_some_and(|oldest| !self.progressed_since(oldest) && self.read_status_error())
    }

    /// Whether the descriptor at free-running index `oldest`, the oldest
    /// one unfinished when last seen, has ended since: written back by the
    /// engine, which then was still running, or completed by another
    /// thread (a poll, a recovery). The engine stops at the descriptor it
    /// failed on, so one written back after an interrupt shows that no
    /// fault had stopped it before; a fault after it sends a message, and
    /// so a reap, of its own.
    fn progressed_since(&self, oldest: u32) -> bool {
        let st = self.state.lock();
        if st.tail != oldest {
            return true;
        }
        let Some(ring) = self.ring.try_access() else {
            return true;
        };
        read_flags(ring_mem(&ring), self.slot(oldest))
            .map_or(true, |word| !WriteBack(word).pending())
    }

    /// Reads and clears `INTR_STATUS`; whether it reports an engine error.
    fn read_status_error(&self) -> bool {
        let Some(bar) = self.bar.try_access() else {
            return false;
        };
        Stats::bump(&self.stats.status_reads);
        let status = bar.read(regs::INTR_STATUS);
        if u16::from(status) != 0 {
            bar.write_reg(status);
        }
        status.error()
    }

    /// The device is going away: fail new work, stop, abort in-flight work.
    pub(crate) fn shutdown(&self) {
        {
            let mut st = self.state.lock();
            st.dead = true;
            self.set_active(&mut st, false);
            self.posted_terminate.mark_dead();
        }
        // A recovery the watchdog queued, or a terminate, would race
        // with this one.
        self.wait_recovery_idle();
        self.wait_terminate_idle();
        if self.stop_and_abort(Stop::Graceful).is_err() {
            // Clients were told at the removal watch, before this. The
            // descriptors end now, and their owners free the buffers: the
            // engine must lose bus mastering first.
            self.master.clear();
            self.drain(Drain::All);
        }
    }
}

impl PlxChannel {
    /// Waits up to `timeout` for the channel's client to release it, after
    /// [`Self::shutdown`]: its copies were aborted and its next prep fails,
    /// which is how a dmaengine client learns that its channel is going. A
    /// client that lets go now unmaps its buffers while the device still
    /// has its IOMMU domain; one that keeps the channel is left to do so
    /// after the device is gone. Returns whether the channel is free.
    pub(crate) fn wait_released(&self, timeout: Delta) -> bool {
        // `free_resources` wakes `idle` once it took the submitter.
        self.wait_idle_timeout(|_| self.state.lock().submitter.is_none(), timeout)
    }
}

impl ChannelOps for PlxChannel {
    fn alloc_resources(&self, chan: NewChannel<'_>) -> Result<u32> {
        let (sub, comp) = DescPool::alloc(chan, self.size as usize)?;
        {
            let mut st = self.state.lock();
            if st.dead {
                return Err(ENODEV);
            }
            if st.submitter.is_some() {
                return Err(EBUSY);
            }
            st.submitter = Some(sub);
            st.head = 0;
            self.posted_terminate.publish_head(0);
            st.issued = 0;
            st.tail = 0;
            st.unacked.clear();
            st.in_ring.iter_mut().for_each(|t| *t = None);
        }
        self.completions.lock().completer = Some(comp);
        if let Err(e) = self.program_ring() {
            self.free_resources();
            return Err(e);
        }
        self.set_active(&mut self.state.lock(), true);
        dev_dbg!(
            self.dev,
            "a client took the ring of {} descriptors\n",
            self.size
        );
        Ok(self.size)
    }

    fn free_resources(&self) {
        self.set_active(&mut self.state.lock(), false);
        // Under the core's `dma_list_mutex`: at most the abort's 100 ms.
        if self.stop_and_abort(Stop::Abort).is_err() {
            // The client is gone; its terminate already failed, so it kept
            // its buffers. The descriptors must end before the pool goes,
            // and the engine that would not stop must not write them (or
            // the ring) afterwards: off the bus first.
            self.master.clear();
            self.drain(Drain::All);
        }
        // Every callback has run before the descriptors go.
        self.synchronize();
        let sub = self.state.lock().submitter.take();
        // A remove may be waiting for this (`wait_released`).
        self.notify_idle();
        let comp = self.completions.lock().completer.take();
        // Freed outside the locks; the descriptors go with the last one.
        drop(sub);
        drop(comp);
    }

    #[inline]
    fn prep_memcpy<'a>(
        &self,
        prep: &Preparer<'a>,
        dst: DmaAddress,
        src: DmaAddress,
        len: usize,
        flags: PrepFlags,
    ) -> Result<Prepared<'a>> {
        // One descriptor per copy: longer copies are refused, and the
        // device's max_seg_size tells clients so up front.
        let len = copy_len(len).ok_or(EINVAL)?;
        if !reachable(dst.max(src), len) {
            return Err(ERANGE);
        }
        // Without the lock: a submit checks again under it.
        if !self.open.load(Relaxed) {
            return Err(ENODEV);
        }
        let copy = Memcpy {
            dst,
            src,
            len,
            interrupt: flags.contains(PrepFlags::INTERRUPT),
        };
        if let Some(prepared) = prep.prepare(copy) {
            return Ok(prepared);
        }
        // Every descriptor is taken; some may have completed without an
        // ack then and been acked since.
        if !self.state.lock().release_acked() {
            return Err(ENOSPC);
        }
        prep.prepare(copy).ok_or(ENOSPC)
    }

    #[inline]
    fn tx_submit(&self, index: usize) -> Cookie {
        let mut st = self.state.lock();
        if !st.active {
            return Cookie::error(ENODEV);
        }
        // The pool holds as many descriptors as the ring has slots.
        if st.in_flight() >= self.size {
            return Cookie::error(ENOSPC);
        }
        // Checked before the descriptor is taken: a refused submit leaves
        // it prepared.
        let Some(guard) = self.ring.try_access() else {
            return Cookie::error(ENODEV);
        };
        let Some(sub) = st.submitter.as_mut() else {
            return Cookie::error(ENODEV);
        };
        // Refuses a descriptor not prepared, or submitted already.
        let (cookie, token, copy) = match sub.submit(index) {
            Ok(taken) => taken,
            Err(e) => return Cookie::error(e),
        };
        // The slot is taken now, in cookie order, and gets its addresses;
        // `issue_pending` makes it VALID.
        let slot = self.slot(st.head);
        let hw = HwDesc::copy(copy.dst, copy.src, copy.len, false);
        let _ = write_addresses(ring_mem(&guard), slot, &hw);
        drop(guard);
        st.unissued_asked |= copy.interrupt;
        if let Some(entry) = st.in_ring.get_mut(slot) {
            *entry = Some(InRing {
                token,
                len: copy.len,
                interrupt: copy.interrupt,
                cookie: cookie.raw(),
            });
        }
        st.head = st.head.wrapping_add(1);
        self.posted_terminate.publish_head(st.head);
        st.counters.submitted = st.counters.submitted.wrapping_add(1);
        cookie
    }

    #[inline]
    fn issue_pending(&self) {
        let mut st = self.state.lock();
        let n = st.head.wrapping_sub(st.issued);
        if !st.active || n == 0 {
            return;
        }
        let Some(guard) = self.ring.try_access() else {
            return;
        };
        let ring = ring_mem(&guard);
        let asked = core::mem::take(&mut st.unissued_asked);
        let mut interrupts = self.config.batch(n, asked);
        // The addresses were written at submit; the engine may fetch these
        // slots before (a prefetch burst, or a running engine reaching
        // them), but must see a descriptor's fields before its VALID bit.
        dma_mb(Write);
        let mut irq_requests = 0u64;
        let (head, mut next) = (st.head, st.issued);
        // Borrowed for the walk, so that the compiler keeps it in a
        // register across the ring writes.
        let in_ring = &st.in_ring[..];
        while next != head {
            let slot = self.slot(next);
            next = next.wrapping_add(1);
            // A slot without a descriptor gets no VALID.
            if let Some(d) = in_ring.get(slot).and_then(Option::as_ref) {
                let interrupt = interrupts.next(d.interrupt);
                irq_requests += u64::from(interrupt);
                let _ = write_flags(ring, slot, issued_word(d.len, interrupt));
            }
        }
        st.counters.irq_requests = st.counters.irq_requests.wrapping_add(irq_requests);
        st.issued = st.head;
        // Issued even while a recovery has the engine detached: its
        // restart rings the doorbell for them. Rung under the lock, so
        // that a recovery cannot detach the engine between the check and
        // the write.
        if st.attached {
            // Every VALID bit must reach memory before the doorbell.
            dma_mb(Write);
            self.kick();
            st.counters.doorbells = st.counters.doorbells.wrapping_add(1);
        }
        drop(st);
    }

    fn poll(&self, cookie: Cookie) -> u32 {
        self.drain(Drain::Finished);
        let st = self.state.lock();
        (0..st.in_flight())
            .filter_map(|i| st.in_ring.get(self.slot(st.tail.wrapping_add(i)))?.as_ref())
            .find(|d| d.cookie == cookie.raw())
            .map_or(0, |d| d.len)
    }

    fn terminate_all(this: ArcBorrow<'_, Self>) -> Result {
        Self::request_terminate(this)
    }

    fn synchronize(&self) {
        // Process context (dmaengine_synchronize may sleep), never from a
        // callback: wait until the engine stopped for the terminates
        // requested so far, and no callback runs or waits to run.
        self.wait_idle(|comp| !comp.running && comp.queue.is_empty() && !self.terminating());
    }
}
