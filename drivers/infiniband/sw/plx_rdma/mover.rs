// SPDX-License-Identifier: GPL-2.0

//! Moving the bytes of a work request between two registered regions: by
//! the DMA engine when the device has a channel, else by the CPU.
//!
//! With a channel, every memory region was mapped for the engine's device
//! once, at registration, so a copy is only descriptors: the regions' bus
//! addresses go straight into them, cut where either region's segments
//! end and at the channel's longest descriptor. No page is pinned or
//! mapped per operation.

use crate::{
    dmaengine::{
        client::{CopySink, MemcpyChannel},
        TxResult,
    },
    stats::Stats,
    udp_tunnel::SkbDma,
    user_pages::{Chunks, Segment, SegmentCursor, UserDma},
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
}

impl CopySink for Batch {
    fn descriptor_done(this: ArcBorrow<'_, Self>, _tag: usize, result: TxResult, residue: u32) {
        this.progress.fetch_add(1, Relaxed);
        let mut st = this.state.lock();
        if result != TxResult::NoError || residue != 0 {
            st.failed = true;
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
    /// Descriptors the channel ended, for every copy.
    progress: Arc<Atomic<u64>>,
    /// The base of a copy's timeout, in milliseconds.
    timeout_base_ms: u32,
}

impl Mover {
    pub(crate) fn new(chan: Option<MemcpyChannel>, timeout_base_ms: u32) -> Result<Self> {
        Ok(Self {
            chan,
            progress: Arc::new(Atomic::new(0), GFP_KERNEL)?,
            timeout_base_ms,
        })
    }

    /// The device regions are mapped for, if the engine moves the data.
    pub(crate) fn device(&self) -> Option<&Device> {
        self.chan.as_ref().map(MemcpyChannel::device)
    }

    /// The channel's name, or `cpu`.
    pub(crate) fn name(&self) -> &CStr {
        self.chan.as_ref().map_or(c"cpu", MemcpyChannel::name)
    }

    /// Copies `len` bytes from offset `src_off` of `src` to offset `dst_off`
    /// of `dst` and waits for them. The caller checked both ranges.
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
        if self.chan.is_none() {
            let (d, s, n) = (to_usize(dst_off)?, to_usize(src_off)?, to_usize(len)?);
            UserDma::cpu_copy(dst, d, src, s, n).map_err(|_| CopyError::Failed)?;
            Stats::add(&stats.cpu_copies, 1);
            Stats::add(&stats.cpu_bytes, len);
            return Ok(());
        }
        // SAFETY: Both regions are mapped for the channel's device (regions are
        // mapped at registration when there is a channel) and held by the
        // caller for this call; the ranges were checked by the caller.
        unsafe { self.engine_copy(stats, dst.segments(), dst_off, src.segments(), src_off, len) }
    }

    /// Copies received bytes, mapped for the channel's device, to offset
    /// `dst_off` of `dst` with the engine, and waits for them.
    /// `Err(Failed)` without a channel or for a mapping of another device.
    /// If the channel cannot be stopped (`Stuck`), the mapping is kept for
    /// good.
    pub(crate) fn copy_from_skb(
        &self,
        stats: &Stats,
        dst: &UserDma,
        dst_off: u64,
        src: SkbDma<'_>,
    ) -> core::result::Result<(), CopyError> {
        let Some(chan) = &self.chan else {
            return Err(CopyError::Failed);
        };
        let len = src.len();
        if !core::ptr::eq(src.device(), chan.device())
            || dst_off
                .checked_add(u64::from(len))
                .is_none_or(|e| e > dst.len() as u64)
        {
            return Err(CopyError::Failed);
        }
        let segs = [Segment {
            addr: src.addr(),
            len,
        }];
        // SAFETY: `dst` is a region mapped for `chan`'s device (at
        // registration), held by the caller, the range checked above;
        // `src` is mapped for the same device while it lives, and is kept
        // for good below when the copy may still run.
        let copied =
            unsafe { self.engine_copy(stats, dst.segments(), dst_off, &segs, 0, u64::from(len)) };
        if copied == Err(CopyError::Stuck) {
            core::mem::forget(src);
        }
        copied
    }

    /// The engine's copy of `len` bytes between two segment lists.
    ///
    /// # Safety
    ///
    /// Both lists are bus addresses of the channel's device, mapped (`dst`
    /// writable) until this returns, and for good if it returns
    /// `CopyError::Stuck`; the ranges lie in them.
    unsafe fn engine_copy(
        &self,
        stats: &Stats,
        dst_segs: &[Segment],
        dst_off: u64,
        src_segs: &[Segment],
        src_off: u64,
        len: u64,
    ) -> core::result::Result<(), CopyError> {
        let Some(chan) = &self.chan else {
            return Err(CopyError::Failed);
        };
        if len == 0 {
            return Ok(());
        }
        let chunks = || {
            Chunks::new(
                SegmentCursor::new(dst_segs, dst_off),
                SegmentCursor::new(src_segs, src_off),
                len,
                chan.max_segment(),
            )
        };
        let (count, covered) =
            chunks().fold((0u32, 0u64), |(n, b), c| (n + 1, b + u64::from(c.len)));
        if covered != len {
            return Err(CopyError::Failed);
        }
        let batch = Arc::pin_init(
            pin_init!(Batch {
                state <- new_spinlock_irq!(BatchState { left: count, failed: false }),
                done <- new_condvar!(),
                progress: self.progress.clone(),
            }),
            GFP_KERNEL,
        )
        .map_err(|_| CopyError::Failed)?;
        let timeout_ms = copy_timeout_ms(self.timeout_base_ms, len);
        let start = Instant::<Monotonic>::now();
        let mut sent = 0u32;
        'submit: for (i, c) in chunks().enumerate() {
            let last = i + 1 == count as usize;
            loop {
                // SAFETY: The chunk lies in `dst_segs` and `src_segs`,
                // mapped for `chan`'s device as this function requires;
                // it returns only once every chunk ended or the channel
                // stopped, and when it cannot be stopped
                // (`CopyError::Stuck`) the caller keeps them mapped for
                // good.
                let submitted =
                    unsafe { chan.submit(c.dst, c.src, c.len as usize, last, &batch, 0) };
                match submitted {
                    Ok(_) => break,
                    // The ring is full (of every QP's descriptors): start
                    // what is queued and wait for room, within the copy's
                    // time, instead of failing the request.
                    Err(e)
                        if e == ENOSPC && start.elapsed().as_millis() < i64::from(timeout_ms) =>
                    {
                        chan.issue_pending();
                        fsleep(Delta::from_micros(200));
                    }
                    Err(_) => break 'submit,
                }
            }
            sent += 1;
        }
        if sent < count {
            // What was queued runs; the rest never will.
            let mut st = batch.state.lock();
            st.failed = true;
            st.left = st.left.saturating_sub(count - sent);
        }
        chan.issue_pending();
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
            return Err(match chan.terminate() {
                Ok(()) => CopyError::Failed,
                Err(_) => CopyError::Stuck,
            });
        }
        if failed {
            return Err(CopyError::Failed);
        }
        Stats::add(&stats.engine_copies, 1);
        Stats::add(&stats.engine_bytes, len);
        Ok(())
    }
}

fn to_usize(v: u64) -> core::result::Result<usize, CopyError> {
    usize::try_from(v).map_err(|_| CopyError::Failed)
}
