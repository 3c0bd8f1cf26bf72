// SPDX-License-Identifier: GPL-2.0

//! Moving the bytes of a work request between two registered regions: by
//! the DMA engine when the device has a channel, else (and for copies
//! shorter than `copy_engine_min`) by the CPU.
//!
//! With a channel, every memory region was mapped for the engine's device
//! once, at registration, so a copy is only descriptors: the regions' bus
//! addresses go straight into them, cut where either region's segments
//! end and at the channel's longest descriptor. No page is pinned or
//! mapped per operation.
//!
//! The channel's device may lose its driver (an unbind, a hot removal)
//! while the device here lives on. Every use of the engine therefore holds
//! an [`Engine`], a guard of the device's [`DmaGate`]: the removal closes
//! the gate, waits for the uses in flight, and unmaps every region
//! ([`Mover::close`]); from then on the CPU moves the data.

use crate::{
    dmaengine::{
        client::{CopySink, MemcpyChannel},
        TxResult,
    },
    stats::Stats,
    user_pages::{Chunks, ClosedGate, DmaGate, GateGuard, Segment, SegmentCursor, UserDma},
};
use kernel::{
    device::Device,
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, ArcBorrow, CondVar, CondVarTimeoutResult, SpinLockIrq,
    },
    time::{delay::fsleep, msecs_to_jiffies, Delta, Instant, Monotonic},
};

/// How long one work request's copies may take before the mover looks at
/// the channel: a base (`base_ms`, the module's `copy_timeout_ms`), waits
/// for ring space included, and a millisecond per 64 KiB.
fn copy_timeout_ms(base_ms: u32, len: u64) -> u32 {
    u32::try_from(u64::from(base_ms) + (len >> 16)).unwrap_or(u32::MAX)
}

/// How a copy failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum CopyError {
    /// The engine reported an error, or the copy timed out and the channel
    /// was stopped: the destination may be partly written.
    Failed,
    /// The channel could not be stopped: the engine may still write the
    /// regions, whose pages must stay pinned for good.
    Stuck,
}

/// The descriptors of one copy in flight, and how they ended.
#[pin_data]
struct Batch {
    #[pin]
    state: SpinLockIrq<BatchState>,
    #[pin]
    done: CondVar,
    /// The mover's count of descriptors ended, every copy's.
    progress: Arc<Atomic<u64>>,
}

struct BatchState {
    left: u32,
    failed: bool,
    /// Bit `i`: a descriptor of copy `i` (its tag) failed.
    failed_tags: u64,
}

impl CopySink for Batch {
    fn descriptor_done(this: ArcBorrow<'_, Self>, tag: usize, result: TxResult, residue: u32) {
        this.progress.fetch_add(1, Relaxed);
        let mut st = this.state.lock();
        if result != TxResult::NoError || residue != 0 {
            st.failed = true;
            st.failed_tags |= 1u64.checked_shl(tag as u32).unwrap_or(0);
        }
        st.left = st.left.saturating_sub(1);
        if st.left == 0 {
            this.done.notify_all();
        }
    }
}

/// The data path of a device.
///
/// Its channel is the device's alone (dmaengine gives a requested channel
/// to one client), shared by every QP. So no copy may stop it for being
/// slow: a copy that outlasts its timeout is waited for as long as the
/// channel ends descriptors (its own or other QPs'), and a stalled engine
/// is its driver's to recover (`rust_plx_dma`'s watchdog aborts what is in
/// flight, and the copy fails with that). Only a channel that ended
/// nothing during a whole timeout (a driver without a watchdog, a dead
/// engine) is stopped, to get the regions back.
pub(crate) struct Mover {
    chan: Option<MemcpyChannel>,
    /// Open while the channel's device has its driver.
    gate: Arc<DmaGate>,
    /// Descriptors the channel ended, for every copy.
    progress: Arc<Atomic<u64>>,
    /// The base of a copy's timeout, in milliseconds.
    timeout_base_ms: u32,
    /// Received payloads from this many bytes on are the engine's.
    payload_engine_min: u32,
    /// Copies between two regions from this many bytes on are the
    /// engine's.
    copy_engine_min: u32,
}

impl Mover {
    pub(crate) fn new(
        chan: Option<MemcpyChannel>,
        timeout_base_ms: u32,
        payload_engine_min: u32,
        copy_engine_min: u32,
    ) -> Result<Self> {
        Ok(Self {
            chan,
            gate: DmaGate::new()?,
            progress: Arc::new(Atomic::new(0), GFP_KERNEL)?,
            timeout_base_ms,
            payload_engine_min,
            copy_engine_min,
        })
    }

    /// Whether a copy of `len` bytes between two regions is the CPU's
    /// ([`Self::copy`]): shorter than `copy_engine_min`, or no engine.
    pub(crate) fn cpu_copies(&self, len: u64) -> bool {
        self.short(len) || self.chan.is_none() || self.gate.is_closed()
    }

    /// Whether `len` bytes are under `copy_engine_min`.
    fn short(&self, len: u64) -> bool {
        u32::try_from(len).is_ok_and(|n| n < self.copy_engine_min)
    }

    /// The engine, held for one use, unless there is no channel or its
    /// device lost its driver.
    pub(crate) fn engine(&self) -> Option<Engine<'_>> {
        let chan = self.chan.as_ref()?;
        let guard = self.gate.enter()?;
        Some(Engine { chan, guard })
    }

    /// The engine again, for a use that kept `guard` (of this mover's
    /// gate) after an earlier [`Self::engine`].
    pub(crate) fn engine_with(&self, guard: GateGuard) -> Option<Engine<'_>> {
        let chan = self.chan.as_ref()?;
        guard.opens(&self.gate).then_some(Engine { chan, guard })
    }

    /// The engine, if it places a received payload of `len` bytes: from
    /// `wire_engine_min` bytes on. Below that a descriptor's round trip
    /// (and, behind an IOMMU, the payload's mapping) costs more than the
    /// CPU's copy.
    pub(crate) fn payload_engine(&self, len: usize) -> Option<Engine<'_>> {
        if u32::try_from(len).is_ok_and(|n| n >= self.payload_engine_min) {
            self.engine()
        } else {
            None
        }
    }

    /// The channel's name, or `cpu` (no channel, or its device is gone).
    pub(crate) fn name(&self) -> &CStr {
        match &self.chan {
            Some(c) if !self.gate.is_closed() => c.name(),
            _ => c"cpu",
        }
    }

    /// The channel's device lost its driver: no new use of the engine
    /// begins, and this sleeps until the uses in flight ended. The proof
    /// returned lets the caller unmap what was mapped for the engine
    /// ([`UserDma::detach`]). `None` without a channel, or when it was
    /// closed before (the function bound again and unbound once more: the
    /// device did not take the channel back).
    pub(crate) fn close(&self) -> Option<ClosedGate<'_>> {
        self.chan.as_ref()?;
        if self.gate.is_closed() {
            return None;
        }
        Some(self.gate.close())
    }

    /// The channel, to watch its device.
    pub(crate) fn channel(&self) -> Option<&MemcpyChannel> {
        self.chan.as_ref()
    }

    /// Copies `len` bytes from offset `src_off` of `src` to offset `dst_off`
    /// of `dst` and waits for them. The caller checked both ranges.
    ///
    /// Copies shorter than `copy_engine_min` are the CPU's: both regions
    /// are mapped for the engine already, but a descriptor's round trip
    /// (the doorbell, the engine's turn, the interrupt, the waiter's
    /// wake-up) costs more than copying a few kilobytes (`make bench`
    /// measures where the two meet).
    pub(crate) fn copy(
        &self,
        stats: &Stats,
        dst: &UserDma,
        dst_off: u64,
        src: &UserDma,
        src_off: u64,
        len: u64,
    ) -> core::result::Result<(), CopyError> {
        if len == 0 {
            return Ok(());
        }
        let engine = if self.short(len) { None } else { self.engine() };
        if let Some(engine) = engine {
            let (d, s) = (
                dst.segments_in(&engine.guard),
                src.segments_in(&engine.guard),
            );
            // A region registered while the engine's device was going is
            // the CPU's.
            if !d.is_empty() && !s.is_empty() {
                let g = &engine.guard;
                src.sync_in(g, src_off, len, true);
                dst.sync_in(g, dst_off, len, true);
                // SAFETY: Both lists are the regions' mappings for the
                // channel's device, valid while `engine` holds the gate
                // (until this returns); the regions are held by the caller
                // for this call, and it checked the ranges.
                let copied =
                    unsafe { self.engine_copy(&engine, stats, d, dst_off, s, src_off, len) };
                // The engine may still write a region it could not be
                // stopped on: nothing of it is read back then.
                if copied != Err(CopyError::Stuck) {
                    dst.sync_in(g, dst_off, len, false);
                }
                return copied;
            }
        }
        let (d, s, n) = (to_usize(dst_off)?, to_usize(src_off)?, to_usize(len)?);
        UserDma::cpu_copy(dst, d, src, s, n).map_err(|_| CopyError::Failed)?;
        Stats::add(&stats.cpu_copies, 1);
        Stats::add(&stats.cpu_bytes, len);
        Ok(())
    }

    /// Copies a burst of `n` spans ([`Span`]) with the engine, and waits
    /// for them: every descriptor handed over, an interrupt asked for
    /// every [`IRQ_EVERY`] copies or [`IRQ_BYTES`] bytes and at the last,
    /// the channel started at each of those (and while waiting for room in
    /// its ring). Returns the copies that failed, bit `i` for span `i` (`n` is
    /// at most 64). If the channel cannot be stopped (`Stuck`), every
    /// span's memory must stay mapped for good.
    ///
    /// # Safety
    ///
    /// Every span's lists are bus addresses of the channel's device,
    /// mapped (`dst` writable) until this returns, and for good if it
    /// returns `CopyError::Stuck`; its ranges lie in them.
    pub(crate) unsafe fn copy_burst<'a>(
        &self,
        engine: &Engine<'_>,
        stats: &Stats,
        n: usize,
        span: impl Fn(usize) -> Span<'a>,
    ) -> core::result::Result<u64, CopyError> {
        let chan = engine.chan;
        if n == 0 || n > 64 {
            return Err(CopyError::Failed);
        }
        let chunks = |s: &Span<'a>| {
            Chunks::new(
                SegmentCursor::new(s.dst, s.dst_off),
                SegmentCursor::new(s.src, s.src_off),
                s.len,
                chan.max_segment(),
            )
        };
        // A span its lists do not cover fails alone, before anything runs.
        let mut failed = 0u64;
        let mut count = 0u32;
        let mut total = 0u64;
        for i in 0..n {
            let s = span(i);
            let (k, covered) =
                chunks(&s).fold((0u32, 0u64), |(k, b), c| (k + 1, b + u64::from(c.len)));
            if covered == s.len && s.len > 0 {
                count += k;
                total += s.len;
            } else {
                failed |= 1 << i;
            }
        }
        if count == 0 {
            return Ok(failed);
        }
        let batch = Arc::pin_init(
            pin_init!(Batch {
                state <- new_spinlock_irq!(BatchState { left: count, failed: false, failed_tags: failed }),
                done <- new_condvar!(),
                progress: self.progress.clone(),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| CopyError::Failed)?;
        let timeout_ms = copy_timeout_ms(self.timeout_base_ms, total);
        // Waiting for room in the ring lasts while the channel ends
        // descriptors (every QP's: a long burst behind others' is slow,
        // not stuck), up to a timeout without any.
        let mut room = (Instant::<Monotonic>::now(), self.progress.load(Relaxed));
        let mut sent = 0u32;
        let last_span = (0..n).rev().find(|i| failed & (1 << i) == 0);
        // Copies and bytes since the last one that asked for an interrupt.
        let (mut quiet, mut quiet_bytes) = (0usize, 0u64);
        'spans: for i in (0..n).filter(|i| failed & (1 << i) == 0) {
            let s = span(i);
            quiet += 1;
            quiet_bytes += s.len;
            // An interrupt every `IRQ_EVERY` copies or `IRQ_BYTES` bytes,
            // and at the last: what ends is reported (and the waiters see
            // progress) at least that often.
            let reports = Some(i) == last_span || quiet >= IRQ_EVERY || quiet_bytes >= IRQ_BYTES;
            if reports {
                (quiet, quiet_bytes) = (0, 0);
            }
            let mut it = chunks(&s).peekable();
            while let Some(c) = it.next() {
                // The engine ends descriptors in order: an interrupt for a
                // copy's last descriptor now and then reports all before
                // it, and one at the end reports the burst.
                let interrupt = reports && it.peek().is_none();
                loop {
                    // SAFETY: The chunk lies in the span's lists, mapped
                    // for `chan`'s device until the copy ended (this
                    // function waits for it), or for good if the channel
                    // cannot be stopped, as this function requires.
                    let submitted =
                        unsafe { chan.submit(c.dst, c.src, c.len as usize, interrupt, &batch, i) };
                    match submitted {
                        Ok(_) => break,
                        // The ring is full (of every QP's descriptors):
                        // start what is queued and wait for room instead
                        // of failing the burst.
                        Err(e) if e == ENOSPC => {
                            let now = self.progress.load(Relaxed);
                            if now != room.1 {
                                room = (Instant::<Monotonic>::now(), now);
                            } else if room.0.elapsed().as_millis() >= i64::from(timeout_ms) {
                                break 'spans;
                            }
                            chan.issue_pending();
                            fsleep(Delta::from_micros(200));
                        }
                        Err(_) => break 'spans,
                    }
                }
                sent += 1;
                // Started at each interrupt: the engine works on the
                // front of a long burst while the rest is submitted, and
                // is never left idle (every waiter on the channel seeing
                // nothing end) for as long as the submission takes.
                if interrupt {
                    chan.issue_pending();
                }
            }
        }
        if sent < count {
            // What was queued runs; the rest never will. Which copies
            // those were is unknown: all fail.
            let mut st = batch.state.lock();
            st.failed = true;
            st.failed_tags = u64::MAX;
            st.left = st.left.saturating_sub(count - sent);
            drop(st);
            chan.issue_pending();
        }
        // Otherwise the last descriptor asked for an interrupt, and
        // started the channel.
        match self.wait(chan, stats, &batch, total, timeout_ms) {
            Ok(()) | Err(CopyError::Failed) => {}
            Err(CopyError::Stuck) => return Err(CopyError::Stuck),
        }
        let mask = if n == 64 { u64::MAX } else { (1u64 << n) - 1 };
        let failed = batch.state.lock().failed_tags & mask;
        for i in (0..n).filter(|i| failed & (1 << i) == 0) {
            Stats::add(&stats.engine_copies, 1);
            Stats::add(&stats.engine_bytes, span(i).len);
        }
        Ok(failed)
    }

    /// The engine's copy of `len` bytes between two segment lists, waited
    /// for.
    ///
    /// # Safety
    ///
    /// Both lists are bus addresses of the channel's device, mapped (`dst`
    /// writable) until this returns, and for good if it returns
    /// `CopyError::Stuck`; the ranges lie in them.
    #[expect(clippy::too_many_arguments)]
    unsafe fn engine_copy(
        &self,
        engine: &Engine<'_>,
        stats: &Stats,
        dst_segs: &[Segment],
        dst_off: u64,
        src_segs: &[Segment],
        src_off: u64,
        len: u64,
    ) -> core::result::Result<(), CopyError> {
        if len == 0 {
            return Ok(());
        }
        let span = |_| Span {
            dst: dst_segs,
            dst_off,
            src: src_segs,
            src_off,
            len,
        };
        // SAFETY: As this function requires.
        match unsafe { self.copy_burst(engine, stats, 1, span)? } {
            0 => Ok(()),
            _ => Err(CopyError::Failed),
        }
    }

    /// Waits until every descriptor of `batch` (copies of `len` bytes in
    /// all) ended. A burst that outlasts its timeout is waited for as long
    /// as the channel ends descriptors; the channel is stopped only when
    /// it ended none during a whole timeout.
    fn wait(
        &self,
        chan: &MemcpyChannel,
        stats: &Stats,
        batch: &Batch,
        len: u64,
        timeout_ms: u32,
    ) -> core::result::Result<(), CopyError> {
        let mut left = msecs_to_jiffies(timeout_ms);
        let mut seen = self.progress.load(Relaxed);
        let mut slow = false;
        let mut st = batch.state.lock();
        while st.left > 0 {
            match batch.done.wait_interruptible_timeout(&mut st, left) {
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                // A signal does not stop a work request (the work item
                // gets none anyway): keep waiting.
                CondVarTimeoutResult::Signal { jiffies } => left = jiffies,
                CondVarTimeoutResult::Timeout => {
                    // Slow, not stuck, while the channel ends descriptors:
                    // another timeout's worth of waiting.
                    let now = self.progress.load(Relaxed);
                    if now == seen {
                        break;
                    }
                    seen = now;
                    left = msecs_to_jiffies(timeout_ms);
                    slow = true;
                }
            }
        }
        let (unfinished, failed) = (st.left > 0, st.failed);
        drop(st);
        if slow {
            Stats::add(&stats.slow_copies, 1);
        }
        if unfinished {
            pr_err!(
                "{}: copy of {} bytes unfinished, and nothing ended on the channel for {} ms: stopping it\n",
                chan.name(),
                len,
                timeout_ms
            );
            Stats::add(&stats.channel_stops, 1);
            // Which copies ended is unknown: all fail.
            batch.state.lock().failed_tags = u64::MAX;
            return Err(match chan.terminate() {
                Ok(()) => CopyError::Failed,
                Err(_) => CopyError::Stuck,
            });
        }
        if failed {
            return Err(CopyError::Failed);
        }
        Ok(())
    }
}

/// The engine for one use: while it lives, the channel's device keeps
/// every mapping made for it under the mover's gate.
pub(crate) struct Engine<'a> {
    chan: &'a MemcpyChannel,
    guard: GateGuard,
}

impl Engine<'_> {
    /// The device to map for.
    pub(crate) fn device(&self) -> &Device {
        self.chan.device()
    }

    /// The gate's guard this use holds, to map under it, to read
    /// mappings, or to keep it past this use.
    pub(crate) fn guard(&self) -> &GateGuard {
        &self.guard
    }

    /// The guard alone, to hold the engine's mappings past this use.
    pub(crate) fn into_guard(self) -> GateGuard {
        self.guard
    }
}

/// Copies of a burst between which the engine is asked for an interrupt.
const IRQ_EVERY: usize = 16;

/// Bytes of a burst after which the engine is asked for an interrupt
/// (sooner than [`IRQ_EVERY`] copies of large requests).
const IRQ_BYTES: u64 = 64 * 1024;

/// One copy of a burst: `len` bytes from byte `src_off` of the segment
/// list `src` to byte `dst_off` of `dst`.
pub(crate) struct Span<'a> {
    pub(crate) dst: &'a [Segment],
    pub(crate) dst_off: u64,
    pub(crate) src: &'a [Segment],
    pub(crate) src_off: u64,
    pub(crate) len: u64,
}

fn to_usize(v: u64) -> core::result::Result<usize, CopyError> {
    usize::try_from(v).map_err(|_| CopyError::Failed)
}
