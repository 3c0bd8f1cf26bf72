// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The DMA engine: walks the descriptor ring, copies, writes back and
//! raises interrupts.
//!
//! One step fetches a burst of up to PREF_LIMIT descriptors and executes
//! the VALID ones in order. The device lock is taken only between memory
//! accesses (to check for pause/abort/reset and to commit results), never
//! across one, so the socket thread keeps answering the client while this
//! thread waits for DMA replies.
//!
//! State machine (see the spec page for the full table):
//!
//! ```text
//!            START (valid ring)            ring runs dry (continuous mode)
//!  STOPPED ----------------------> RUNNING --------------------------------> IDLE
//!     ^  ^                          |  |  ^                                   |
//!     |  +--- pause done / abort ---+  |  +---------- START (doorbell) -------+
//!     +------ fetch or write-back error, ring-stop mode at ring end
//! ```

use crate::desc::{write_back_word, Completion, Descriptor, ADDR_LIMIT};
use crate::device::{Device, Wake};
use crate::memory::{CopyError, DmaError, GuestMemory};
use crate::regs::{
    CTRL_RING_STOP_MODE, CTRL_WRITE_BACK_EN, DESC_SIZE, INTR_STATUS_INV_DESC, PREF_LIMIT_MAX,
};
use crate::stats::{add, inc};
use std::time::Instant;

/// Bytes of the largest descriptor burst.
const BURST_BYTES: usize = PREF_LIMIT_MAX as usize * DESC_SIZE as usize;

/// Result of one engine step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Nothing to do until the guest writes a register.
    Idle,
    /// Some work was done (or a state change happened); step again.
    Progress,
}

struct Snapshot {
    generation: u64,
    base: u64,
    index: u32,
    batch: u32,
    kick: u64,
}

/// What to do with one VALID descriptor, decided under the lock.
struct Plan {
    write_back: bool,
    malformed: Option<crate::desc::Malformed>,
    injected_invalid: bool,
    fail_read: bool,
    fail_write: bool,
    stall_ms: u64,
    busy_ms: u64,
    hang: bool,
}

/// The engine thread's loop: sleep until there is work, step, repeat.
pub fn run(dev: &Device, mem: &dyn GuestMemory) {
    let mut scratch = Vec::new();
    while !dev.wait_for_work() {
        step(dev, mem, &mut scratch);
    }
}

/// Nanoseconds since `start`, saturated.
fn elapsed_ns(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX)
}

/// Runs steps until the engine is idle, at most `max_steps` times (tests
/// and the benchmark drive the engine synchronously with this).
pub fn run_until_idle(dev: &Device, mem: &dyn GuestMemory, max_steps: usize) -> usize {
    let mut scratch = Vec::new();
    for n in 0..max_steps {
        if step(dev, mem, &mut scratch) == Step::Idle {
            return n;
        }
    }
    max_steps
}

/// One burst: fetch, execute, commit; its time counts as the engine's.
pub fn step(dev: &Device, mem: &dyn GuestMemory, scratch: &mut Vec<u8>) -> Step {
    let start = Instant::now();
    let outcome = burst(dev, mem, scratch);
    add(&dev.stats.engine_busy_ns, elapsed_ns(start));
    outcome
}

fn burst(dev: &Device, mem: &dyn GuestMemory, scratch: &mut Vec<u8>) -> Step {
    let snap = {
        let mut st = dev.lock();
        if !st.runnable() {
            return Step::Idle;
        }
        if !st.cfg.bus_master() {
            dev.warn(format_args!(
                "engine started with bus mastering disabled (PCI_COMMAND.MASTER clear); \
                 stopping with INTR_STATUS.ERROR"
            ));
            st.fatal();
            return Step::Progress;
        }
        st.eng.in_flight = true;
        if let Some(woken) = st.eng.woken_at.take() {
            inc(&dev.stats.engine_wakeups);
            add(&dev.stats.wakeup_ns, elapsed_ns(woken));
        }
        let pref = st.regs.pref.clamp(1, PREF_LIMIT_MAX);
        Snapshot {
            generation: st.generation,
            base: st.eng.base,
            index: st.eng.index,
            batch: pref.min(st.eng.count - st.eng.index),
            kick: st.eng.kick,
        }
    };

    let outcome = run_batch(dev, mem, scratch, &snap);

    // Epilogue: a pause or abort that arrived while we were busy is
    // completed here, at a descriptor boundary.
    let mut st = dev.lock();
    if st.generation == snap.generation {
        st.eng.in_flight = false;
        if st.eng.abort_req {
            st.abort_done();
            dev.debug(format_args!("abort done"));
        } else if st.pause_requested() {
            st.pause_done(false);
            dev.debug(format_args!("graceful pause done"));
        }
    }
    drop(st);
    outcome
}

fn run_batch(dev: &Device, mem: &dyn GuestMemory, scratch: &mut Vec<u8>, snap: &Snapshot) -> Step {
    let fetch_addr = snap.base + snap.index as u64 * DESC_SIZE;
    // A burst is at most PREF_LIMIT_MAX descriptors (1 KiB): fetch it into
    // the stack rather than allocate per step.
    let mut burst = [0u8; BURST_BYTES];
    let mut n = (snap.batch as usize).min(PREF_LIMIT_MAX as usize);
    let mut fetched = mem.read(fetch_addr, &mut burst[..n * DESC_SIZE as usize]);
    if fetched.is_err() && n > 1 {
        // The burst may run into memory the ring does not really own (a
        // ring count larger than the allocation); only the first slot
        // decides whether this is a real fault.
        n = 1;
        fetched = mem.read(fetch_addr, &mut burst[..DESC_SIZE as usize]);
    }
    let raw = &burst[..n * DESC_SIZE as usize];
    if let Err(e) = fetched {
        let mut st = dev.lock();
        if st.generation == snap.generation {
            inc(&dev.stats.fetch_errors);
            inc(&dev.stats.errors);
            st.fatal();
            drop(st);
            dev.warn(format_args!(
                "descriptor fetch at IOVA {fetch_addr:#x} failed: {e}; engine stopped with INTR_STATUS.ERROR"
            ));
        }
        return Step::Progress;
    }

    for i in 0..n {
        let desc_addr = fetch_addr + i as u64 * DESC_SIZE;
        let mut b = [0u8; 16];
        b.copy_from_slice(&raw[i * 16..i * 16 + 16]);
        let d = Descriptor::decode(&b);

        let plan = {
            let mut st = dev.lock();
            if st.should_stop(snap.generation) {
                return Step::Progress;
            }
            if !st.cfg.bus_master() {
                // Cleared while the previous descriptor ran: the next one
                // would start with a DMA read.
                bus_master_lost(dev, st, desc_addr);
                return Step::Progress;
            }
            if !d.valid() {
                // The ring ran dry. A doorbell since our snapshot means the
                // driver may have just set VALID: fetch again.
                if st.eng.kick != snap.kick {
                    return Step::Progress;
                }
                if st.regs.ctrl & CTRL_RING_STOP_MODE != 0 {
                    st.stop_engine();
                    st.regs.ctrl |= crate::regs::CTRL_DESC_INVALID;
                    st.raise(INTR_STATUS_INV_DESC);
                    dev.debug(format_args!(
                        "ring-stop mode: stopped at descriptor {desc_addr:#x}"
                    ));
                } else {
                    st.eng.idle_at_kick = Some(snap.kick);
                }
                return Step::Idle;
            }
            let malformed = d.check().err();
            let ok = malformed.is_none();
            let injected_invalid = ok && st.faults.take_invalid_desc();
            let fail_read = ok && !injected_invalid && st.faults.take_fail_read();
            let fail_write = ok && !injected_invalid && !fail_read && st.faults.take_fail_write();
            if st.faults.take_spurious_irq() {
                st.spurious_irq();
            }
            Plan {
                write_back: st.regs.ctrl & CTRL_WRITE_BACK_EN != 0,
                malformed,
                injected_invalid,
                fail_read,
                fail_write,
                stall_ms: st.faults.stall_ms(),
                busy_ms: st.faults.busy_ms(),
                hang: ok && st.faults.take_hang(),
            }
        };

        if plan.stall_ms > 0 {
            inc(&dev.stats.stalls);
            if dev.sleep_unless_stopped(plan.stall_ms, snap.generation, Wake::OnPause) {
                // Nothing of this descriptor happened yet: no write-back.
                return Step::Progress;
            }
        }
        if plan.hang {
            inc(&dev.stats.faults_injected);
            dev.info(format_args!("fault: descriptor at {desc_addr:#x} hangs"));
            while !dev.sleep_unless_stopped(1000, snap.generation, Wake::OnPause) {}
            return Step::Progress;
        }
        if plan.busy_ms > 0 {
            inc(&dev.stats.stalls);
            if dev.sleep_unless_stopped(plan.busy_ms, snap.generation, Wake::OnAbort) {
                // Aborted mid-transfer: no write-back.
                return Step::Progress;
            }
        }

        let Some((status, transferred)) =
            execute(dev, mem, scratch, &d, &plan, desc_addr, snap.generation)
        else {
            return Step::Progress; // aborted mid-transfer: no write-back
        };

        // A reset (or abort) during the copy, or bus mastering cleared:
        // the descriptor is not written back. Checked right before the
        // write so that a ring rebuilt at the same IOVA after the reset
        // never gets a stale completion. (A write already issued when the
        // reset arrives still lands, like a posted write already on the
        // link.)
        if !may_write(dev, snap.generation, desc_addr) {
            return Step::Progress;
        }
        let write_back_ok = if plan.write_back {
            let word = write_back_word(status, transferred);
            // On the mapped path the data went out as plain stores to
            // memory the guest reads; on a weakly ordered host they could
            // become visible after the write-back that says they are done.
            // A release fence orders them first (free on x86, where
            // stores are not reordered with each other).
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            match mem.write(desc_addr, &word.to_le_bytes()) {
                Ok(()) => true,
                Err(e) => {
                    dev.warn(format_args!(
                        "write-back to descriptor at IOVA {desc_addr:#x} failed: {e}; \
                         engine stopped with INTR_STATUS.ERROR"
                    ));
                    false
                }
            }
        } else {
            true
        };

        let vanish = {
            let mut st = dev.lock();
            if st.generation != snap.generation {
                return Step::Progress;
            }
            let v = st.complete(
                desc_addr,
                d.int_when_done(),
                status,
                transferred,
                write_back_ok,
            );
            if !write_back_ok {
                drop(st);
                if v {
                    dev.vanish();
                }
                return Step::Progress;
            }
            v
        };
        dev.debug(format_args!(
            "descriptor {desc_addr:#x}: {:#x} -> {:#x}, {} bytes, {status:?}",
            d.src, d.dst, transferred
        ));
        if vanish {
            dev.vanish();
        }
    }
    Step::Progress
}

/// Whether the step started at `generation` may issue a write for the
/// descriptor at `desc_addr` now: no reset, abort or shutdown since, and
/// bus mastering still enabled.
///
/// Checked under the device lock, which a config-space write also takes:
/// once the socket thread has answered the write that clears
/// `PCI_COMMAND.MASTER`, no further write of the engine is issued. Finding
/// it clear stops the engine with ERROR there and then (the descriptor is
/// neither finished nor written back), as at the start of a step: a guest
/// that sets the bit again must not see the engine carry on with the next
/// descriptor as if this one had completed.
fn may_write(dev: &Device, generation: u64, desc_addr: u64) -> bool {
    let st = dev.lock();
    if st.must_abort(generation) {
        return false;
    }
    if !st.cfg.bus_master() {
        bus_master_lost(dev, st, desc_addr);
        return false;
    }
    true
}

/// Stops the engine with INTR_STATUS.ERROR because bus mastering was
/// cleared while it ran (the caller holds the lock as `st`).
fn bus_master_lost(
    dev: &Device,
    mut st: std::sync::MutexGuard<'_, crate::device::State>,
    desc_addr: u64,
) {
    st.fatal();
    drop(st);
    dev.warn(format_args!(
        "bus mastering disabled (PCI_COMMAND.MASTER cleared) while the engine ran, at descriptor \
         {desc_addr:#x}; stopped with INTR_STATUS.ERROR, nothing more written"
    ));
}

/// Executes one VALID descriptor. `None` means it was aborted part-way.
fn execute(
    dev: &Device,
    mem: &dyn GuestMemory,
    scratch: &mut Vec<u8>,
    d: &Descriptor,
    plan: &Plan,
    desc_addr: u64,
    generation: u64,
) -> Option<(Completion, u32)> {
    if let Some(m) = plan.malformed {
        dev.warn(format_args!(
            "descriptor at IOVA {desc_addr:#x} is malformed ({m}, flags_and_size {:#010x}); \
             written back as invalid",
            d.flags_and_size
        ));
        return Some((Completion::Invalid, 0));
    }
    let injected = |what: &str| {
        inc(&dev.stats.faults_injected);
        dev.info(format_args!(
            "fault: descriptor at IOVA {desc_addr:#x} {what}"
        ));
    };
    if plan.injected_invalid {
        injected("treated as invalid");
        return Some((Completion::Invalid, 0));
    }
    if plan.fail_read {
        injected("source read failed (injected)");
        return Some((Completion::ReadFail, 0));
    }
    if plan.fail_write {
        injected("destination write failed (injected)");
        return Some((Completion::WriteFail, 0));
    }
    let size = d.size() as u64;
    if d.src + size > ADDR_LIMIT {
        let e = DmaError::OutOfRange {
            iova: d.src,
            len: size,
        };
        dev.log_dma_failure("source read", desc_addr, &e);
        return Some((Completion::ReadFail, 0));
    }
    if d.dst + size > ADDR_LIMIT {
        let e = DmaError::OutOfRange {
            iova: d.dst,
            len: size,
        };
        dev.log_dma_failure("destination write", desc_addr, &e);
        return Some((Completion::WriteFail, 0));
    }
    let chunk = mem.max_chunk().max(1) as u64;
    let mut done = 0u64;
    // Checked before every write, the first one included: nothing of this
    // descriptor may land after a reset, an abort, shutdown or the clear
    // of bus mastering.
    let proceed = || may_write(dev, generation, desc_addr);
    while done < size {
        let n = chunk.min(size - done);
        match mem.copy_checked(d.src + done, d.dst + done, n as usize, scratch, &proceed) {
            Ok(true) => done += n,
            Ok(false) => return None,
            Err(CopyError::Read(e)) => {
                dev.log_dma_failure(
                    &format!("source read at +{done:#x} (IOVA {:#x})", d.src + done),
                    desc_addr,
                    &e,
                );
                return Some((Completion::ReadFail, done as u32));
            }
            Err(CopyError::Write(e)) => {
                dev.log_dma_failure(
                    &format!("destination write at +{done:#x} (IOVA {:#x})", d.dst + done),
                    desc_addr,
                    &e,
                );
                return Some((Completion::WriteFail, done as u32));
            }
        }
    }
    Some((Completion::Success, size as u32))
}
