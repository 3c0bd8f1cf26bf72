// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The engine and its registers, driven without QEMU: in-process guest
//! memory behind the `GuestMemory` trait and register accesses exactly as
//! drivers/dma/plx_dma.c makes them.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::*;
use plx_dma_emu::desc::{self, Descriptor, WB_RD_FAIL, WB_SUCCESS, WB_WR_FAIL};
use plx_dma_emu::device::Device;
use plx_dma_emu::engine::run_until_idle;
use plx_dma_emu::faults::FaultSpec;
use plx_dma_emu::memory::{DmaError, GuestMemory, VecMemory};
use plx_dma_emu::regs::*;
use vfio_bindings::bindings::vfio::{
    VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_ACTION_UNMASK, VFIO_IRQ_SET_DATA_EVENTFD,
    VFIO_IRQ_SET_DATA_NONE, VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX,
    VFIO_PCI_MSI_IRQ_INDEX,
};

fn load(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

#[test]
fn copies_and_writes_back_like_plx_dma_expects() {
    let mut r = Rig::new(16);
    r.alloc();
    let a = r.fill(SRC, 4096, 1);
    let b = r.fill(SRC + 0x1000, 100, 2);
    let s0 = r.submit(SRC, DST, 4096, true);
    let s1 = r.submit(SRC + 0x1000, DST + 0x2000, 100, false);
    r.issue();
    r.run();
    assert_eq!(r.read(DST, 4096), a);
    assert_eq!(r.read(DST + 0x2000, 100), b);
    // VALID and INT_WHEN_DONE cleared, SUCCESS set, size = transferred:
    // plx_dma.c computes residue = orig_size - size = 0.
    assert_eq!(r.wb(s0), WB_SUCCESS | 4096);
    assert_eq!(r.wb(s1), WB_SUCCESS | 100);
    // Only the INT_WHEN_DONE descriptor raised DESC_DONE.
    assert_eq!(rd16(&r.dev, INTR_STATUS), INTR_STATUS_DESC_DONE);
    wr16(&r.dev, INTR_STATUS, INTR_STATUS_DESC_DONE);
    assert_eq!(rd16(&r.dev, INTR_STATUS), 0);
    // NEXT points after the last completed descriptor; LAST_* describe it.
    assert_eq!(rd32(&r.dev, DESC_RING_NEXT_ADDR), (RING + 32) as u32);
    assert_eq!(rd32(&r.dev, DESC_RING_LAST_ADDR), (RING + 16) as u32);
    assert_eq!(rd32(&r.dev, DESC_RING_LAST_SIZE), 100);
    // Running, ring empty: START stays 1, IN_PROGRESS drops.
    let c = rd32(&r.dev, CTRL);
    assert_ne!(c & CTRL_START, 0);
    assert_eq!(c & CTRL_IN_PROGRESS, 0);
    assert_eq!(load(&r.dev.stats.descriptors), 2);
    assert_eq!(load(&r.dev.stats.bytes), 4196);
    assert_eq!(load(&r.dev.stats.desc_success), 2);
}

#[test]
fn ring_wraps_and_doorbell_wakes_idle_engine() {
    let mut r = Rig::new(4);
    r.alloc();
    r.fill(SRC, 64, 7);
    for round in 0..5u64 {
        let mut slots = Vec::new();
        for i in 0..3u64 {
            slots.push(r.submit(SRC, DST + (round * 3 + i) * 64, 64, true));
        }
        // Without the doorbell an idle engine does not look at the ring.
        if round > 0 {
            assert_eq!(r.run(), 0);
            assert_ne!(r.wb(slots[0]) & desc::FLAG_VALID, 0);
        }
        r.issue();
        r.run();
        for s in slots {
            assert_eq!(r.wb(s), WB_SUCCESS | 64, "round {round} slot {s}");
        }
    }
    assert_eq!(load(&r.dev.stats.descriptors), 15);
    assert_eq!(
        rd32(&r.dev, DESC_RING_NEXT_ADDR),
        (RING + (15 % 4) * 16) as u32
    );
}

/// IN_PROGRESS reads 0 while the engine waits on a dry ring and 1 again
/// from the doorbell that wakes it (the spec's IDLE -> RUNNING), not only
/// until the ring first ran dry.
#[test]
fn in_progress_reads_1_again_after_a_doorbell_wakes_the_engine() {
    let mut r = Rig::new(8);
    r.alloc();
    r.fill(SRC, 64, 5);
    let in_progress = |r: &Rig| rd32(&r.dev, CTRL) & CTRL_IN_PROGRESS != 0;
    r.submit(SRC, DST, 64, false);
    r.issue();
    assert!(in_progress(&r));
    r.run();
    assert!(!in_progress(&r), "idle on a dry ring");
    assert_ne!(rd32(&r.dev, CTRL) & CTRL_START, 0);
    r.submit(SRC, DST + 64, 64, false);
    r.issue();
    assert!(in_progress(&r), "the doorbell wakes the engine");
    assert!(r.dev.engine_summary().2);
    r.run();
    assert!(!in_progress(&r));
    assert_eq!(load(&r.dev.stats.descriptors), 2);
}

/// A DEVICE_RESET answered while the engine reads a descriptor's source
/// (a DMA_READ in flight): neither the destination write nor the
/// write-back may land after the reset, where the driver may already have
/// rebuilt its ring at the same IOVA.
#[test]
fn nothing_lands_after_a_reset_during_the_source_read() {
    struct ResetOnRead {
        inner: Arc<VecMemory>,
        dev: Arc<Device>,
        armed: AtomicBool,
    }
    impl GuestMemory for ResetOnRead {
        fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
            let r = self.inner.read(iova, buf);
            if iova >= SRC && iova < SRC + BUF as u64 && self.armed.swap(false, Ordering::SeqCst) {
                self.dev.reset("test: reset while the source is read");
            }
            r
        }
        fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
            self.inner.write(iova, data)
        }
    }
    let mut r = Rig::new(8);
    r.alloc();
    wr32(&r.dev, CTRL, CTRL_RESET_VAL | CTRL_WRITE_BACK_EN);
    r.fill(SRC, 256, 9);
    let s = r.submit(SRC, DST, 256, true);
    r.issue();
    let mem = ResetOnRead {
        inner: r.mem.clone(),
        dev: r.dev.clone(),
        armed: AtomicBool::new(true),
    };
    run_until_idle(&r.dev, &mem, 100);
    assert_eq!(
        r.read(DST, 256),
        vec![0u8; 256],
        "data landed after the reset"
    );
    assert_ne!(
        r.wb(s) & desc::FLAG_VALID,
        0,
        "written back after the reset"
    );
    assert_eq!(load(&r.dev.stats.descriptors), 0);
    assert_eq!(rd32(&r.dev, DESC_RING_NEXT_ADDR), 0);
}

/// A reset while the last destination write is in flight: that write
/// lands (it was issued), but the write-back, after it, does not.
#[test]
fn no_write_back_after_a_reset_during_the_last_write() {
    struct ResetOnWrite {
        inner: Arc<VecMemory>,
        dev: Arc<Device>,
        armed: AtomicBool,
    }
    impl GuestMemory for ResetOnWrite {
        fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
            self.inner.read(iova, buf)
        }
        fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
            let r = self.inner.write(iova, data);
            if iova >= DST && self.armed.swap(false, Ordering::SeqCst) {
                self.dev.reset("test: reset during the destination write");
            }
            r
        }
    }
    let mut r = Rig::new(8);
    r.alloc();
    let data = r.fill(SRC, 256, 4);
    let s = r.submit(SRC, DST, 256, true);
    r.issue();
    let mem = ResetOnWrite {
        inner: r.mem.clone(),
        dev: r.dev.clone(),
        armed: AtomicBool::new(true),
    };
    run_until_idle(&r.dev, &mem, 100);
    assert_eq!(r.read(DST, 256), data);
    assert_ne!(
        r.wb(s) & desc::FLAG_VALID,
        0,
        "written back after the reset"
    );
}

#[test]
fn wakeups_count_the_doorbells_that_find_the_engine_idle() {
    let mut r = Rig::new(8);
    r.alloc();
    r.fill(SRC, 64, 3);
    let wakeups = |r: &Rig| load(&r.dev.stats.engine_wakeups);
    r.submit(SRC, DST, 64, true);
    r.issue();
    r.run();
    assert_eq!(wakeups(&r), 1, "the start");
    // Two doorbells before the engine looks: one wake-up.
    r.submit(SRC, DST + 64, 64, true);
    r.issue();
    r.issue();
    r.run();
    assert_eq!(wakeups(&r), 2);
    // A doorbell with nothing new still wakes the engine to look.
    r.issue();
    r.run();
    assert_eq!(wakeups(&r), 3);
    assert!(load(&r.dev.stats.wakeup_ns) > 0);
    assert!(load(&r.dev.stats.engine_busy_ns) > 0);
    assert_eq!(load(&r.dev.stats.descriptors), 2);
}

#[test]
fn prefetch_limit_bounds_the_burst() {
    // Count descriptor fetch sizes through a recording memory.
    struct Rec {
        inner: Arc<VecMemory>,
        ring: u64,
        fetches: Mutex<Vec<usize>>,
    }
    impl GuestMemory for Rec {
        fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
            if iova >= self.ring && iova < self.ring + 0x1000 {
                self.fetches.lock().unwrap().push(buf.len());
            }
            self.inner.read(iova, buf)
        }
        fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
            self.inner.write(iova, data)
        }
    }
    for (pref, expect_first) in [(0u32, 16usize), (1, 16), (8, 128), (1000, 1024)] {
        let mut r = Rig::new(256);
        r.alloc();
        wr32(&r.dev, PREF_LIMIT, pref);
        assert_eq!(rd32(&r.dev, PREF_LIMIT), pref);
        for _ in 0..100 {
            r.submit(SRC, DST, 8, false);
        }
        r.issue();
        let rec = Rec {
            inner: r.mem.clone(),
            ring: RING,
            fetches: Mutex::new(Vec::new()),
        };
        run_until_idle(&r.dev, &rec, 10_000);
        let f = rec.fetches.into_inner().unwrap();
        assert_eq!(f[0], expect_first, "PREF_LIMIT {pref}");
        assert_eq!(load(&r.dev.stats.descriptors), 100);
    }
}

#[test]
fn write_back_disabled_leaves_descriptors_alone() {
    let mut r = Rig::new(8);
    r.alloc();
    let data = r.fill(SRC, 32, 3);
    let s = r.submit(SRC, DST, 32, true);
    // plx_dma.c always sets WRITE_BACK_EN; a driver that does not gets
    // copies but no completion words.
    wr16(&r.dev, CTRL, (CTRL_DESC_MODE_OFF_CHIP | CTRL_START) as u16);
    // Run one step only: without write-back VALID never clears, so the
    // engine would go round the ring for ever, as hardware would.
    run_until_idle(&r.dev, &*r.mem, 1);
    assert_eq!(r.read(DST, 32), data);
    assert_eq!(r.wb(s), desc::FLAG_VALID | desc::FLAG_INT_WHEN_DONE | 32);
    assert_ne!(rd16(&r.dev, INTR_STATUS) & INTR_STATUS_DESC_DONE, 0);
}

#[test]
fn ring_stop_mode_stops_at_an_invalid_descriptor() {
    let mut r = Rig::new(8);
    r.alloc();
    r.submit(SRC, DST, 16, false);
    wr16(&r.dev, CTRL, (CTRL_START_VAL | CTRL_RING_STOP_MODE) as u16);
    r.run();
    let c = rd32(&r.dev, CTRL);
    assert_eq!(c & CTRL_START, 0, "engine stopped");
    assert_ne!(c & CTRL_DESC_INVALID, 0);
    assert_ne!(rd16(&r.dev, INTR_STATUS) & INTR_STATUS_INV_DESC, 0);
    // W1C of the CTRL status bit.
    wr32(&r.dev, CTRL, CTRL_DESC_INVALID);
    assert_eq!(rd32(&r.dev, CTRL) & CTRL_DESC_INVALID, 0);
    // Restart picks up where it stopped.
    let s = r.submit(SRC, DST, 16, false);
    r.issue();
    r.run();
    assert_eq!(r.wb(s), WB_SUCCESS | 16);
}

#[test]
fn malformed_descriptors_are_consumed_as_invalid() {
    let mut r = Rig::new(8);
    r.alloc();
    let zero = r.submit(SRC, DST, 0, true);
    let mut raw = Descriptor::encode(SRC, DST, 64, true, true);
    raw[3] |= 0x10; // reserved bit 28
    r.write_desc(r.head, &raw);
    let reserved = r.head;
    r.head += 1;
    let good = r.submit(SRC, DST, 64, true);
    r.issue();
    r.run();
    // No status bit: plx_dma.c reports DMA_TRANS_READ_FAILED, residue = len.
    assert_eq!(r.wb(zero), 0);
    assert_eq!(r.wb(reserved), 0);
    assert_eq!(r.wb(good), WB_SUCCESS | 64);
    assert_ne!(rd32(&r.dev, CTRL) & CTRL_DESC_INVALID, 0);
    let st = rd16(&r.dev, INTR_STATUS);
    assert_eq!(st, INTR_STATUS_INV_DESC | INTR_STATUS_DESC_DONE);
    assert_eq!(load(&r.dev.stats.invalid_descs), 2);
    assert_eq!(load(&r.dev.stats.errors), 2);
}

/// Accepts every access in a window without storing data: lets the tests
/// move the largest transfer a descriptor allows without 256 MiB of RAM.
struct Sink {
    ring: Arc<VecMemory>,
    bytes_read: AtomicU64,
    bytes_written: AtomicU64,
}

impl GuestMemory for Sink {
    fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        if iova < 0x1_0000_0000 {
            return self.ring.read(iova, buf);
        }
        self.bytes_read
            .fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }
    fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
        if iova < 0x1_0000_0000 {
            return self.ring.write(iova, data);
        }
        self.bytes_written
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

#[test]
fn largest_size_and_48_bit_addresses() {
    let mut r = Rig::new(8);
    r.alloc();
    let src = 0xFFFF_0000_0000u64;
    let dst = 0xFFF8_0000_0000u64;
    let s = r.submit(src, dst, desc::MAX_SIZE, true);
    r.issue();
    let sink = Sink {
        ring: r.mem.clone(),
        bytes_read: AtomicU64::new(0),
        bytes_written: AtomicU64::new(0),
    };
    run_until_idle(&r.dev, &sink, 10_000);
    assert_eq!(r.wb(s), WB_SUCCESS | desc::MAX_SIZE);
    assert_eq!(
        sink.bytes_read.load(Ordering::Relaxed),
        desc::MAX_SIZE as u64
    );
    assert_eq!(
        sink.bytes_written.load(Ordering::Relaxed),
        desc::MAX_SIZE as u64
    );
    // 48-bit fields decode into real 48-bit addresses.
    let mut raw = [0u8; 16];
    r.mem.read(r.slot(s), &mut raw).unwrap();
    let d = Descriptor::decode(&raw);
    assert_eq!((d.src, d.dst), (src, dst));
}

#[test]
fn ranges_beyond_48_bits_fail() {
    let mut r = Rig::new(8);
    r.alloc();
    let s1 = r.submit(0xFFFF_FFFF_FF00, DST, 0x200, true);
    let s2 = r.submit(SRC, 0xFFFF_FFFF_FF00, 0x200, true);
    r.issue();
    r.run();
    assert_eq!(r.wb(s1), WB_RD_FAIL);
    assert_eq!(r.wb(s2), WB_WR_FAIL);
}

#[test]
fn dma_faults_write_back_rd_fail_and_wr_fail() {
    let mut r = Rig::new(8);
    r.alloc();
    let s_rd = r.submit(0x9000_0000, DST, 512, true); // unmapped source
    let s_wr = r.submit(SRC, 0x9000_0000, 512, true); // unmapped destination
    let s_ok = r.submit(SRC, DST, 512, true);
    r.issue();
    r.run();
    assert_eq!(r.wb(s_rd), WB_RD_FAIL);
    assert_eq!(r.wb(s_wr), WB_WR_FAIL);
    assert_eq!(
        r.wb(s_ok),
        WB_SUCCESS | 512,
        "the engine goes on after a data fault"
    );
    assert_eq!(
        rd16(&r.dev, INTR_STATUS),
        INTR_STATUS_ERROR | INTR_STATUS_DESC_DONE
    );
    assert_eq!(load(&r.dev.stats.read_errors), 1);
    assert_eq!(load(&r.dev.stats.write_errors), 1);
    // The engine is still running.
    assert_ne!(rd32(&r.dev, CTRL) & CTRL_START, 0);
}

#[test]
fn partial_transfer_reports_bytes_done() {
    // 2 MiB source of which only the first MiB is mapped: the first chunk
    // is copied, the second faults; the write-back says how far it got.
    let mut r = Rig::new(8);
    r.alloc();
    r.mem.add_region(0x1000_0000, 1 << 20);
    r.mem.add_region(0x2000_0000, 2 << 20);
    let s = r.submit(0x1000_0000, 0x2000_0000, 2 << 20, true);
    r.issue();
    r.run();
    assert_eq!(r.wb(s), WB_RD_FAIL | (1 << 20));
    assert_eq!(rd32(&r.dev, DESC_RING_LAST_SIZE), 1 << 20);
    assert_eq!(load(&r.dev.stats.bytes), 1 << 20);
}

#[test]
fn ring_outside_memory_stops_with_error() {
    // Ring count 8 but only two slots are backed: the burst fetch fails,
    // the engine retries slot by slot, runs the two, then stops.
    let dev = Device::new("t");
    dev.config_write(4, &plx_dma_emu::config_space::CMD_MASTER.to_le_bytes());
    let mem = VecMemory::new();
    mem.add_region(RING, 32);
    mem.add_region(SRC, 4096);
    mem.add_region(DST, 4096);
    for i in 0..2u64 {
        mem.write(
            RING + i * 16,
            &Descriptor::encode(SRC, DST, 16, true, false),
        )
        .unwrap();
    }
    wr32(&dev, CTRL, CTRL_RESET_VAL);
    wr32(&dev, DESC_RING_ADDR, RING as u32);
    wr32(&dev, DESC_RING_NEXT_ADDR, RING as u32);
    wr32(&dev, DESC_RING_COUNT, 8);
    wr32(&dev, PREF_LIMIT, 8);
    wr16(&dev, CTRL, CTRL_START_VAL as u16);
    run_until_idle(&dev, &mem, 100);
    assert_eq!(load(&dev.stats.descriptors), 2);
    assert_eq!(load(&dev.stats.fetch_errors), 1);
    assert_eq!(rd32(&dev, CTRL) & CTRL_START, 0, "stopped");
    assert_ne!(rd16(&dev, INTR_STATUS) & INTR_STATUS_ERROR, 0);
    // Ring entirely unmapped: the first fetch stops the engine.
    wr16(&dev, INTR_STATUS, 0xFFFF);
    wr32(&dev, DESC_RING_ADDR, 0x7000_0000);
    wr32(&dev, DESC_RING_NEXT_ADDR, 0x7000_0000);
    wr16(&dev, CTRL, CTRL_START_VAL as u16);
    run_until_idle(&dev, &mem, 100);
    assert_eq!(load(&dev.stats.fetch_errors), 2);
    assert_eq!(rd16(&dev, INTR_STATUS), INTR_STATUS_ERROR);
}

#[test]
fn write_back_failure_stops_the_engine() {
    struct RoRing(Arc<VecMemory>);
    impl GuestMemory for RoRing {
        fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
            self.0.read(iova, buf)
        }
        fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
            if (RING..RING + 0x1000).contains(&iova) {
                return Err(DmaError::Permission { iova, write: true });
            }
            self.0.write(iova, data)
        }
    }
    let mut r = Rig::new(8);
    r.alloc();
    let s = r.submit(SRC, DST, 8, true);
    r.submit(SRC, DST, 8, true);
    r.issue();
    run_until_idle(&r.dev, &RoRing(r.mem.clone()), 100);
    assert_eq!(load(&r.dev.stats.writeback_errors), 1);
    assert_eq!(load(&r.dev.stats.descriptors), 1, "stopped after the first");
    assert_ne!(r.wb(s) & desc::FLAG_VALID, 0);
    assert_eq!(rd32(&r.dev, CTRL) & CTRL_START, 0);
    assert_eq!(rd16(&r.dev, INTR_STATUS), INTR_STATUS_ERROR);
}

/// Memory that runs a hook on the first data write (a register write
/// arriving from the "CPU" while the engine is mid-transfer).
struct Hooked {
    inner: Arc<VecMemory>,
    hook: Mutex<Option<Box<dyn FnOnce() + Send>>>,
    chunk: usize,
}

impl Hooked {
    /// Memory of `r` that runs `hook` once, on the first data write, and
    /// moves data in pieces of `chunk` bytes.
    fn new(r: &Rig, chunk: usize, hook: impl FnOnce() + Send + 'static) -> Self {
        Self {
            inner: r.mem.clone(),
            hook: Mutex::new(Some(Box::new(hook))),
            chunk,
        }
    }
}

impl GuestMemory for Hooked {
    fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.inner.read(iova, buf)
    }
    fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
        if !(RING..RING + 0x1000).contains(&iova) {
            if let Some(h) = self.hook.lock().unwrap().take() {
                h();
            }
        }
        self.inner.write(iova, data)
    }
    fn max_chunk(&self) -> usize {
        self.chunk
    }
}

#[test]
fn graceful_pause_finishes_the_current_descriptor() {
    let mut r = Rig::new(8);
    r.alloc();
    let s0 = r.submit(SRC, DST, 256, true);
    let s1 = r.submit(SRC, DST, 256, true);
    r.issue();
    let dev = r.dev.clone();
    let mem = Hooked::new(&r, 64, move || {
        wr32(&dev, CTRL, CTRL_RESET_VAL | CTRL_GRACEFUL_PAUSE);
        // In flight: not done yet.
        assert_eq!(rd32(&dev, CTRL) & CTRL_GRACEFUL_PAUSE_DONE, 0);
    });
    run_until_idle(&r.dev, &mem, 100);
    assert_eq!(r.wb(s0), WB_SUCCESS | 256, "current descriptor completed");
    assert_ne!(r.wb(s1) & desc::FLAG_VALID, 0, "next one left alone");
    let c = rd32(&r.dev, CTRL);
    assert_ne!(c & CTRL_GRACEFUL_PAUSE_DONE, 0);
    assert_eq!(c & CTRL_IMM_PAUSE_DONE, 0, "not immediate: it waited");
    assert_eq!(c & (CTRL_START | CTRL_IN_PROGRESS), 0);
    assert_ne!(rd16(&r.dev, INTR_STATUS) & INTR_STATUS_PAUSE_DONE, 0);
    // Resume: clear pause, START continues from NEXT.
    wr32(&r.dev, CTRL, CTRL_RESET_VAL);
    r.issue();
    r.run();
    assert_eq!(r.wb(s1), WB_SUCCESS | 256);
    assert_eq!(load(&r.dev.stats.pauses), 1);
}

#[test]
fn abort_stops_mid_descriptor_without_write_back() {
    let mut r = Rig::new(8);
    r.alloc();
    let s = r.submit(SRC, DST, 4096, true);
    r.issue();
    let dev = r.dev.clone();
    let mem = Hooked::new(&r, 1024, move || {
        wr32(&dev, CTRL, CTRL_ABORT);
        assert_ne!(
            rd32(&dev, CTRL) & CTRL_ABORT,
            0,
            "ABORT reads 1 while pending"
        );
    });
    run_until_idle(&r.dev, &mem, 100);
    assert_ne!(
        r.wb(s) & desc::FLAG_VALID,
        0,
        "aborted descriptor not written back"
    );
    let c = rd32(&r.dev, CTRL);
    assert_eq!(c & (CTRL_ABORT | CTRL_START), 0);
    assert_ne!(c & CTRL_ABORT_DONE, 0);
    assert_ne!(rd16(&r.dev, INTR_STATUS) & INTR_STATUS_ABORT_DONE, 0);
    assert_eq!(load(&r.dev.stats.descriptors), 0);
    assert_eq!(load(&r.dev.stats.aborts), 1);
}

#[test]
fn plx_dma_teardown_and_realloc() {
    let mut r = Rig::new(16);
    r.alloc();
    r.submit(SRC, DST, 8, true);
    r.issue();
    r.run();
    // free_chan_resources -> __plx_dma_stop on an idle running engine.
    assert!(r.stop(), "pause handshake completes");
    let c = rd32(&r.dev, CTRL);
    assert_eq!(c & CTRL_START, 0);
    assert_eq!(rd32(&r.dev, DESC_RING_COUNT), 0);
    // alloc_chan_resources again, and it works from slot 0.
    r.alloc();
    assert_eq!(rd32(&r.dev, CTRL), 0, "RESET_VAL clears every status");
    let s = r.submit(SRC, DST + 8, 8, true);
    r.issue();
    r.run();
    assert_eq!(s, 0);
    assert_eq!(r.wb(s), WB_SUCCESS | 8);
    // A never-started engine: stop returns early (CTRL reads 0).
    let fresh = Rig::new(4);
    assert_eq!(rd32(&fresh.dev, CTRL), 0);
    assert!(fresh.stop());
}

#[test]
fn registers_in_the_wrong_order() {
    let mut r = Rig::new(8);
    // START before anything is programmed: refused with ERROR.
    r.issue();
    assert_eq!(rd32(&r.dev, CTRL) & CTRL_START, 0);
    assert_eq!(rd16(&r.dev, INTR_STATUS), INTR_STATUS_ERROR);
    wr16(&r.dev, INTR_STATUS, INTR_STATUS_ERROR);
    // Program, start, then scribble over the ring registers while running:
    // the latched ring keeps working.
    r.alloc();
    r.issue();
    wr32(&r.dev, DESC_RING_ADDR, 0xDEAD_0000);
    wr32(&r.dev, DESC_RING_COUNT, 0);
    let s = r.submit(SRC, DST, 8, true);
    r.issue();
    r.run();
    assert_eq!(r.wb(s), WB_SUCCESS | 8);
    // Bus mastering off: the engine refuses to touch memory.
    r.dev.config_write(4, &[0, 0]);
    r.submit(SRC, DST, 8, true);
    r.issue();
    r.run();
    assert_eq!(rd32(&r.dev, CTRL) & CTRL_START, 0);
    assert_ne!(rd16(&r.dev, INTR_STATUS) & INTR_STATUS_ERROR, 0);
}

#[test]
fn reset_in_the_middle_discards_the_step() {
    let mut r = Rig::new(8);
    r.alloc();
    let s = r.submit(SRC, DST, 4096, true);
    r.issue();
    let dev = r.dev.clone();
    let mem = Hooked::new(&r, 512, move || dev.reset("test"));
    run_until_idle(&r.dev, &mem, 100);
    assert_ne!(r.wb(s) & desc::FLAG_VALID, 0);
    assert_eq!(rd32(&r.dev, CTRL), 0);
    assert_eq!(rd32(&r.dev, DESC_RING_COUNT), 0);
    assert_eq!(load(&r.dev.stats.descriptors), 0);
}

/// The guest clears PCI_COMMAND.MASTER while a descriptor is being
/// copied: the chunk whose write was already issued lands, nothing after
/// it does (no further chunk, no write-back), and the engine stops with
/// ERROR instead of finishing the burst.
#[test]
fn clearing_bus_mastering_stops_a_burst_in_flight() {
    let mut r = Rig::new(8);
    r.alloc();
    let data = r.fill(SRC, 4096, 3);
    let s = r.submit(SRC, DST, 4096, true);
    let s2 = r.submit(SRC, DST + 4096, 8, true);
    r.issue();
    let dev = r.dev.clone();
    let mem = Hooked::new(&r, 512, move || {
        dev.config_write(4, &[0, 0]);
    });
    run_until_idle(&r.dev, &mem, 100);
    assert_eq!(r.read(DST, 512), data[..512], "the issued write landed");
    let late = r.read(DST + 512, 4096 - 512);
    assert_eq!(
        late.iter().filter(|&&b| b != 0).count(),
        0,
        "chunks written after bus mastering was cleared"
    );
    assert_ne!(
        r.wb(s) & desc::FLAG_VALID,
        0,
        "written back after the clear"
    );
    assert_ne!(r.wb(s2) & desc::FLAG_VALID, 0, "next descriptor ran");
    assert_eq!(rd32(&r.dev, CTRL) & CTRL_START, 0, "engine stopped");
    assert_ne!(rd16(&r.dev, INTR_STATUS) & INTR_STATUS_ERROR, 0);
    assert_eq!(load(&r.dev.stats.descriptors), 0);
    // Setting the bit again does not resume the engine by itself.
    r.dev
        .config_write(4, &plx_dma_emu::config_space::CMD_MASTER.to_le_bytes());
    run_until_idle(&r.dev, &mem, 100);
    assert_ne!(r.wb(s2) & desc::FLAG_VALID, 0);
}

#[test]
fn injected_faults_fire_on_the_nth_event() {
    let mut r = Rig::new(16);
    r.alloc();
    r.dev.arm_fault(FaultSpec::FailRead(2)).unwrap();
    r.dev.arm_fault(FaultSpec::FailWrite(3)).unwrap();
    r.dev.arm_fault(FaultSpec::InvalidDesc(5)).unwrap();
    let slots: Vec<u32> = (0..6).map(|_| r.submit(SRC, DST, 32, true)).collect();
    r.issue();
    r.run();
    let wbs: Vec<u32> = slots.iter().map(|&s| r.wb(s)).collect();
    // Read fault fired on #2; the write countdown skips descriptors whose
    // read failed, so it fires on the third write, i.e. descriptor #4.
    assert_eq!(
        wbs,
        vec![
            WB_SUCCESS | 32,
            WB_RD_FAIL,
            WB_SUCCESS | 32,
            WB_WR_FAIL,
            0,
            WB_SUCCESS | 32
        ]
    );
    assert_eq!(load(&r.dev.stats.faults_injected), 3);
    assert!(r.dev.faults().is_empty(), "one-shot faults disarmed");
}

#[test]
fn stall_fault_delays_each_descriptor() {
    let mut r = Rig::new(8);
    r.alloc();
    r.dev.arm_fault(FaultSpec::Stall(30)).unwrap();
    r.submit(SRC, DST, 8, true);
    r.submit(SRC, DST, 8, true);
    r.issue();
    let t = Instant::now();
    r.run();
    assert!(t.elapsed() >= Duration::from_millis(60));
    assert_eq!(load(&r.dev.stats.stalls), 2);
    r.dev.arm_fault(FaultSpec::Stall(0)).unwrap();
    assert!(r.dev.faults().is_empty());
}

#[test]
fn busy_fault_outlasts_a_pause_but_not_an_abort() {
    let mut r = Rig::new(8);
    r.alloc();
    let worker = plx_dma_emu::worker::start(&r.dev, r.mem.clone()).unwrap();
    r.dev.arm_fault(FaultSpec::Busy(300)).unwrap();
    let s = r.submit(SRC, DST, 64, true);
    r.issue();
    assert!(wait_until(Duration::from_secs(1), || load(
        &r.dev.stats.stalls
    ) == 1));
    // A graceful pause waits for the running descriptor...
    let t = Instant::now();
    wr32(&r.dev, CTRL, CTRL_GRACEFUL_PAUSE);
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(rd32(&r.dev, CTRL) & CTRL_GRACEFUL_PAUSE_DONE, 0);
    // ...an abort ends it at once, without a write-back.
    wr32(&r.dev, CTRL, CTRL_GRACEFUL_PAUSE | CTRL_ABORT);
    assert!(wait_until(Duration::from_secs(1), || rd32(&r.dev, CTRL)
        & CTRL_ABORT_DONE
        != 0));
    assert!(t.elapsed() < Duration::from_millis(300));
    assert_ne!(r.wb(s) & desc::FLAG_VALID, 0);
    worker.stop();
    r.dev.arm_fault(FaultSpec::Busy(0)).unwrap();
    assert!(r.dev.faults().is_empty());
}

#[test]
fn hang_fault_holds_one_descriptor_until_paused() {
    let mut r = Rig::new(8);
    r.alloc();
    let worker = plx_dma_emu::worker::start(&r.dev, r.mem.clone()).unwrap();
    r.dev.arm_fault(FaultSpec::Hang(2)).unwrap();
    let s1 = r.submit(SRC, DST, 64, true);
    let s2 = r.submit(SRC, DST, 64, true);
    r.issue();
    assert!(wait_until(Duration::from_secs(1), || r.wb(s1)
        & desc::FLAG_VALID
        == 0));
    std::thread::sleep(Duration::from_millis(100));
    assert_ne!(r.wb(s2) & desc::FLAG_VALID, 0, "the second one hangs");
    wr32(&r.dev, CTRL, CTRL_GRACEFUL_PAUSE);
    assert!(wait_until(Duration::from_secs(1), || rd32(&r.dev, CTRL)
        & CTRL_GRACEFUL_PAUSE_DONE
        != 0));
    assert_ne!(r.wb(s2) & desc::FLAG_VALID, 0, "no write-back");
    assert!(r.dev.faults().is_empty(), "one-shot");
    worker.stop();
}

#[test]
fn msix_interrupt_per_int_when_done_with_drop_and_dup() {
    let mut r = Rig::new(16);
    r.alloc();
    let (fd, mut ev) = eventfd();
    let trig = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
    r.dev
        .set_irqs(trig, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1, &[], vec![fd])
        .unwrap();
    r.submit(SRC, DST, 8, true);
    r.submit(SRC, DST, 8, false);
    r.submit(SRC, DST, 8, true);
    r.issue();
    r.run();
    assert_eq!(drain(&mut ev), 2, "one per INT_WHEN_DONE");
    r.dev.arm_fault(FaultSpec::DropIrq(1)).unwrap();
    r.submit(SRC, DST, 8, true);
    r.issue();
    r.run();
    assert_eq!(drain(&mut ev), 0, "dropped");
    r.dev.arm_fault(FaultSpec::DupIrq(1)).unwrap();
    r.submit(SRC, DST, 8, true);
    r.issue();
    r.run();
    // The duplicate arrives a little later, from a helper thread.
    let mut seen = 0;
    assert!(wait_until(Duration::from_secs(2), || {
        seen += drain(&mut ev);
        seen == 2
    }));
    assert_eq!(load(&r.dev.stats.irqs_dropped), 1);
    assert_eq!(load(&r.dev.stats.irqs_duplicated), 1);
    // Errors interrupt only when enabled in INTR_CTRL.
    r.submit(0x9000_0000, DST, 8, false);
    r.issue();
    r.run();
    assert_eq!(drain(&mut ev), 0);
    wr16(&r.dev, INTR_STATUS, 0xFFFF);
    wr16(&r.dev, INTR_CTRL, INTR_CTRL_ERROR_EN);
    r.submit(0x9000_0000, DST, 8, false);
    r.issue();
    r.run();
    assert_eq!(drain(&mut ev), 1);
}

#[test]
fn msi_and_intx_delivery() {
    let mut r = Rig::new(16);
    r.alloc();
    let trig = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
    // MSI.
    let (fd, mut msi) = eventfd();
    r.dev
        .set_irqs(trig, VFIO_PCI_MSI_IRQ_INDEX, 0, 1, &[], vec![fd])
        .unwrap();
    r.submit(SRC, DST, 8, true);
    r.issue();
    r.run();
    assert_eq!(drain(&mut msi), 1);
    let off = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
    r.dev
        .set_irqs(off, VFIO_PCI_MSI_IRQ_INDEX, 0, 0, &[], vec![])
        .unwrap();
    wr16(&r.dev, INTR_STATUS, 0xFFFF);
    // INTx: level, automasked, re-signalled on unmask while still pending.
    let (fd, mut intx) = eventfd();
    r.dev
        .set_irqs(trig, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &[], vec![fd])
        .unwrap();
    r.submit(SRC, DST, 8, true);
    r.submit(SRC, DST, 8, true);
    r.issue();
    r.run();
    assert_eq!(drain(&mut intx), 1, "automasked after the first");
    let mut status = [0u8; 2];
    r.dev.config_read(6, &mut status);
    assert_ne!(
        u16::from_le_bytes(status) & (1 << 3),
        0,
        "PCI_STATUS.INTERRUPT"
    );
    let unmask = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK;
    r.dev
        .set_irqs(unmask, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &[], vec![])
        .unwrap();
    assert_eq!(drain(&mut intx), 1, "still asserted: fires again");
    wr16(&r.dev, INTR_STATUS, INTR_STATUS_DESC_DONE); // ISR acks
    r.dev
        .set_irqs(unmask, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &[], vec![])
        .unwrap();
    assert_eq!(drain(&mut intx), 0, "line low after the W1C");
    // INTx disable in PCI_COMMAND keeps the line low.
    r.dev.config_write(
        4,
        &(plx_dma_emu::config_space::CMD_MASTER | (1 << 10)).to_le_bytes(),
    );
    r.submit(SRC, DST, 8, true);
    r.issue();
    r.run();
    assert_eq!(drain(&mut intx), 0);
}

#[test]
fn engine_thread_with_plx_dma_polling() {
    // The real arrangement: engine on its own thread, "CPU" polling
    // registers, like dmatest + plx_dma.c with MSI-X.
    let mut r = Rig::new(64);
    r.alloc();
    let (fd, mut ev) = eventfd();
    let trig = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
    r.dev
        .set_irqs(trig, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1, &[], vec![fd])
        .unwrap();
    let worker = plx_dma_emu::worker::start(&r.dev, r.mem.clone()).unwrap();
    let data = r.fill(SRC, 8192, 9);
    let mut slots = Vec::new();
    for i in 0..40u64 {
        slots.push(r.submit(SRC + i * 64, DST + i * 64, 64, i % 8 == 7));
        if i % 10 == 9 {
            r.issue();
        }
    }
    assert!(wait_until(Duration::from_secs(5), || {
        slots.iter().all(|&s| r.wb(s) & desc::FLAG_VALID == 0)
    }));
    assert_eq!(r.read(DST, 40 * 64), data[..40 * 64].to_vec());
    assert!(wait_signal(&mut ev, Duration::from_secs(1)) >= 1);
    // ISR: read status, W1C it.
    let st = rd16(&r.dev, INTR_STATUS);
    assert_ne!(st & INTR_STATUS_DESC_DONE, 0);
    wr16(&r.dev, INTR_STATUS, st);
    // A long stalled descriptor in flight, then teardown: the 1 s pause
    // poll of __plx_dma_stop must succeed once the descriptor finishes.
    r.dev.arm_fault(FaultSpec::Stall(200)).unwrap();
    let s = r.submit(SRC, DST, 64, true);
    r.issue();
    assert!(wait_until(Duration::from_secs(1), || load(
        &r.dev.stats.stalls
    ) == 1));
    let t = Instant::now();
    assert!(r.stop());
    assert!(t.elapsed() < Duration::from_secs(1));
    // The stall was cut short by the pause: the descriptor did not start.
    assert_ne!(r.wb(s) & desc::FLAG_VALID, 0);
    worker.stop();
}

#[test]
fn garbage_rings_never_panic() {
    // A small deterministic generator; every ring is random bytes, run with
    // a bounded number of steps, with random register pokes in between.
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for _ in 0..200 {
        let mut r = Rig::new(16);
        r.alloc();
        for i in 0..16 {
            let mut raw = [0u8; 16];
            raw[..8].copy_from_slice(&next().to_le_bytes());
            raw[8..].copy_from_slice(&next().to_le_bytes());
            // Keep some descriptors pointing into mapped memory.
            if next() % 2 == 0 {
                let size = (next() % 4096) as u32;
                raw = Descriptor::encode(
                    SRC + next() % 4096,
                    DST + next() % 4096,
                    size,
                    true,
                    next() % 2 == 0,
                );
                if next() % 4 == 0 {
                    raw[3] ^= (next() % 8) as u8;
                }
            }
            r.write_desc(i, &raw);
        }
        let v = next();
        wr32(&r.dev, PREF_LIMIT, (v % 70) as u32);
        let ctrl = CTRL_START_VAL | if v & 1 != 0 { CTRL_RING_STOP_MODE } else { 0 };
        wr16(&r.dev, CTRL, ctrl as u16);
        run_until_idle(&r.dev, &*r.mem, 64);
        let off = (0x200 + (next() % 0x40)) & !1;
        let _ = r.dev.bar0_write(off, &(next() as u16).to_le_bytes());
        run_until_idle(&r.dev, &*r.mem, 64);
    }
}

#[test]
fn concurrent_register_traffic_while_engine_runs() {
    // Hammer registers from one thread while the engine thread copies:
    // exercises the lock discipline (no deadlock, no panic).
    let mut r = Rig::new(256);
    r.alloc();
    let worker = plx_dma_emu::worker::start(&r.dev, r.mem.clone()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let dev = r.dev.clone();
    let stop2 = stop.clone();
    let reads = Arc::new(AtomicUsize::new(0));
    let reads2 = reads.clone();
    let poker = std::thread::spawn(move || {
        while !stop2.load(Ordering::Relaxed) {
            let _ = rd32(&dev, CTRL);
            let st = rd16(&dev, INTR_STATUS);
            wr16(&dev, INTR_STATUS, st);
            reads2.fetch_add(1, Ordering::Relaxed);
        }
    });
    for round in 0..20 {
        let slots: Vec<u32> = (0..10).map(|_| r.submit(SRC, DST, 4096, true)).collect();
        r.issue();
        assert!(
            wait_until(Duration::from_secs(5), || slots
                .iter()
                .all(|&s| r.wb(s) & desc::FLAG_VALID == 0)),
            "round {round}"
        );
    }
    stop.store(true, Ordering::Relaxed);
    poker.join().unwrap();
    assert!(reads.load(Ordering::Relaxed) > 0);
    assert_eq!(load(&r.dev.stats.descriptors), 200);
    worker.stop();
}
