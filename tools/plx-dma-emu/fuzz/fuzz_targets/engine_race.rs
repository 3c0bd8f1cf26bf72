// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Fuzz target: register writes racing a running engine.
//!
//! The engine runs on its own thread, as in the emulator, over in-process
//! memory; this thread plays the guest CPU and the client at once: it
//! programs the ring, stores descriptors, rings the doorbell, pauses,
//! aborts, resets the function, switches bus mastering, (re)programs the
//! interrupt eventfds and arms faults, in whatever order and at whatever
//! moment the input says, while the engine copies.
//!
//! What must hold, whatever the interleaving: no panic and no deadlock
//! (the engine thread is joined at the end); the register file's
//! invariants after every step; the engine writes only the ring and the
//! data window; and once a reset or the clear of bus mastering has been
//! answered, the engine issues at most one more write (the one whose check
//! came before it: "a write already issued") until the guest starts it
//! again.

#![no_main]

#[path = "common/input.rs"]
mod input;

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use input::Input;
use libfuzzer_sys::fuzz_target;
use nix::sys::eventfd::{EfdFlags, EventFd};
use plx_dma_emu::config_space::CMD_MASTER;
use plx_dma_emu::desc::Descriptor;
use plx_dma_emu::device::Device;
use plx_dma_emu::faults::FaultSpec;
use plx_dma_emu::log::{set_level, Level};
use plx_dma_emu::memory::{DmaError, GuestMemory, VecMemory};
use plx_dma_emu::regs::*;
use vfio_bindings::bindings::vfio::{
    VFIO_IRQ_SET_ACTION_TRIGGER, VFIO_IRQ_SET_ACTION_UNMASK, VFIO_IRQ_SET_DATA_EVENTFD,
    VFIO_IRQ_SET_DATA_NONE,
};

const RING: u64 = 0x1000;
const SLOTS: u64 = 32;
const DATA: u64 = 0x10_0000;
const DATA_LEN: u64 = 0x1_0000;

/// The engine's memory: counts its writes and checks where they go.
struct Watched {
    inner: VecMemory,
    writes: AtomicU64,
    chunk: usize,
}

impl GuestMemory for Watched {
    fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.inner.read(iova, buf)
    }
    fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
        let end = iova + data.len() as u64;
        let ring = iova >= RING && end <= RING + SLOTS * DESC_SIZE;
        let window = iova >= DATA && end <= DATA + DATA_LEN;
        assert!(ring || window, "engine wrote {iova:#x}+{:#x}", data.len());
        self.writes.fetch_add(1, Ordering::SeqCst);
        self.inner.write(iova, data)
    }
    fn max_chunk(&self) -> usize {
        self.chunk
    }
}

fn rd32(d: &Device, off: u64) -> u32 {
    let mut b = [0u8; 4];
    assert!(d.bar0_read(off, &mut b));
    u32::from_le_bytes(b)
}

fn wr(d: &Device, off: u64, v: u32, wide: bool) {
    if wide {
        assert!(d.bar0_write(off, &v.to_le_bytes()));
    } else {
        assert!(d.bar0_write(off, &(v as u16).to_le_bytes()));
    }
}

fn check_invariants(d: &Device) {
    let ctrl = rd32(d, CTRL);
    if ctrl & CTRL_IN_PROGRESS != 0 {
        assert_ne!(ctrl & CTRL_START, 0, "IN_PROGRESS without START: {ctrl:#x}");
    }
    let intr = rd32(d, INTR_CTRL);
    assert_eq!((intr >> 16) as u16 & !INTR_STATUS_MASK, 0);
    let st = d.lock();
    if st.eng.enabled {
        assert!(st.eng.index < st.eng.count, "ring index past the ring");
    }
}

fn eventfd() -> OwnedFd {
    let e = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
        .expect("eventfd");
    OwnedFd::from(e)
}

/// Writes issued since a reset or a bus-mastering clear was answered.
struct Quiet {
    since: Option<u64>,
}

impl Quiet {
    fn begin(&mut self, mem: &Watched) {
        self.since.get_or_insert(mem.writes.load(Ordering::SeqCst));
    }
    /// The guest may start the engine again: at most one write (already
    /// issued when the quiet period began) may have landed meanwhile.
    fn end(&mut self, mem: &Watched, why: &str) {
        if let Some(base) = self.since.take() {
            let late = mem.writes.load(Ordering::SeqCst) - base;
            assert!(late <= 1, "{late} engine writes after {why}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    set_level(Level::Error);
    let mut input = Input(data);
    let mem = Arc::new(Watched {
        inner: VecMemory::new(),
        writes: AtomicU64::new(0),
        chunk: 64 << (input.u8() % 8),
    });
    mem.inner.add_region(RING, (SLOTS * DESC_SIZE) as usize);
    mem.inner.add_region(DATA, DATA_LEN as usize);
    let dev = Device::new("fuzz");
    dev.config_write(4, &CMD_MASTER.to_le_bytes());
    let worker = plx_dma_emu::worker::start(&dev, mem.clone()).expect("engine thread");
    let mut quiet = Quiet { since: None };
    let mut ops = 0;
    while !input.is_empty() && ops < 96 {
        ops += 1;
        let op = input.u8();
        match op % 10 {
            // Ring setup and START, as alloc_chan_resources does.
            0 => {
                quiet.end(&mem, "a reset (ring setup)");
                let count = u32::from(input.u8()) % (SLOTS as u32) + 1;
                let next = u32::from(input.u8()) % count;
                wr(
                    &dev,
                    CTRL,
                    CTRL_RESET_VAL | (u32::from(op >> 4) & 0x14),
                    true,
                );
                wr(&dev, DESC_RING_ADDR, RING as u32, true);
                wr(&dev, DESC_RING_ADDR_HI, 0, true);
                wr(
                    &dev,
                    DESC_RING_NEXT_ADDR,
                    RING as u32 + next * DESC_SIZE as u32,
                    true,
                );
                wr(&dev, DESC_RING_COUNT, count, true);
                wr(&dev, PREF_LIMIT, u32::from(op >> 4) & 3, true);
                wr(&dev, CTRL, CTRL_START_VAL, false);
            }
            // A descriptor, as prep_memcpy writes it (the CPU's store,
            // not the engine's).
            1 => {
                let slot = u64::from(input.u8()) % SLOTS;
                let len = u32::from(input.u16()) % 0x2000;
                let src = DATA + u64::from(input.u16()) % (DATA_LEN - u64::from(len));
                let dst = DATA + u64::from(input.u16()) % (DATA_LEN - u64::from(len));
                let raw = Descriptor::encode(src, dst, len, op & 0x10 == 0, op & 0x20 != 0);
                mem.inner.write(RING + slot * DESC_SIZE, &raw).unwrap();
            }
            // The doorbell.
            2 => {
                quiet.end(&mem, "a reset (doorbell)");
                wr(&dev, CTRL, CTRL_START_VAL, false);
            }
            // Any named register, any value.
            3 => {
                const NAMED: [u64; 8] = [
                    DESC_RING_ADDR,
                    DESC_RING_NEXT_ADDR,
                    DESC_RING_COUNT,
                    PREF_LIMIT,
                    CTRL,
                    CTRL2,
                    INTR_CTRL,
                    INTR_STATUS,
                ];
                let reg = NAMED[usize::from(op >> 4) % NAMED.len()];
                if reg == CTRL || reg == CTRL2 {
                    quiet.end(&mem, "a reset (CTRL write)");
                }
                wr(&dev, reg, input.u32(), reg % 4 == 0 && op & 0x80 != 0);
            }
            // Graceful pause or abort, as __plx_dma_stop and terminate.
            4 => {
                let v = if op & 0x10 != 0 {
                    CTRL_ABORT
                } else {
                    CTRL_GRACEFUL_PAUSE
                };
                wr(
                    &dev,
                    CTRL,
                    v | (rd32(&dev, CTRL) & CTRL_RW_BITS & !CTRL_START),
                    true,
                );
            }
            // Bus mastering off (a quiet period begins) or on.
            5 => {
                if op & 0x10 != 0 {
                    dev.config_write(4, &[0, 0]);
                    quiet.begin(&mem);
                } else {
                    quiet.end(&mem, "clearing bus mastering");
                    dev.config_write(4, &CMD_MASTER.to_le_bytes());
                }
            }
            // DEVICE_RESET.
            6 => {
                dev.reset("fuzz");
                quiet.begin(&mem);
                assert_eq!(rd32(&dev, CTRL), 0, "CTRL after a reset");
            }
            // Let the engine run for a moment.
            7 => {
                let until = Instant::now() + Duration::from_micros(u64::from(op >> 4) * 20);
                while Instant::now() < until {
                    std::thread::yield_now();
                }
            }
            // Interrupt eventfds: set (INTx, MSI, MSI-X), unmask INTx.
            8 => {
                let index = u32::from(op >> 4) % 3;
                let r = if op & 0x80 != 0 {
                    let flags = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK;
                    dev.set_irqs(flags, 0, 0, 1, &[], vec![])
                } else {
                    let flags = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;
                    dev.set_irqs(flags, index, 0, 1, &[], vec![eventfd()])
                };
                assert!(r.is_ok(), "a well-formed SET_IRQS refused: {r:?}");
            }
            // Faults that cost no time (stall, busy and hang sleep).
            _ => {
                let n = u64::from(input.u8() % 4) + 1;
                let spec = match (op >> 4) % 6 {
                    0 => FaultSpec::FailRead(n),
                    1 => FaultSpec::FailWrite(n),
                    2 => FaultSpec::InvalidDesc(n),
                    3 => FaultSpec::DropIrq(n),
                    4 => FaultSpec::DupIrq(n),
                    _ => FaultSpec::SpuriousIrq(n),
                };
                dev.arm_fault(spec).expect("arming a fault");
            }
        }
        check_invariants(&dev);
    }
    // Teardown in the server's order, with a last reset racing the engine.
    dev.reset("fuzz: end");
    quiet.begin(&mem);
    worker.stop();
    quiet.end(&mem, "the final reset");
    check_invariants(&dev);
});
