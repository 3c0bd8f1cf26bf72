// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Fuzz target: the BAR0 register file of one channel.
//!
//! The input is a little program of register accesses: reads and writes of
//! 1 to 8 bytes at any offset (inside BAR0 or past it), 16/32-bit writes of
//! the named registers, descriptor stores into an in-process ring, config
//! space writes (bus mastering on and off), function resets and engine
//! steps. Memory is the crate's `VecMemory`, so nothing outside this
//! process is touched. After every operation the invariants the spec page
//! states for the register file are checked.

#![no_main]

use libfuzzer_sys::fuzz_target;
use plx_dma_emu::config_space::CMD_MASTER;
use plx_dma_emu::device::Device;
use plx_dma_emu::engine::run_until_idle;
use plx_dma_emu::log::{set_level, Level};
use plx_dma_emu::memory::{GuestMemory, VecMemory};
use plx_dma_emu::regs::*;

/// IOVA of the 64-slot ring the program can fill.
const RING: u64 = 0x1000;
const SLOTS: u64 = 64;
/// IOVA and size of the data window descriptors can copy within.
const DATA: u64 = 0x4000;
const DATA_LEN: usize = 0x2000;

/// The registers by name, so short programs reach each of them.
const NAMED: [u64; 11] = [
    DESC_RING_ADDR,
    DESC_RING_ADDR_HI,
    DESC_RING_NEXT_ADDR,
    DESC_RING_COUNT,
    DESC_RING_LAST_ADDR,
    DESC_RING_LAST_SIZE,
    PREF_LIMIT,
    CTRL,
    CTRL2,
    INTR_CTRL,
    INTR_STATUS,
];

/// Takes bytes from the front of the input; missing bytes read as 0.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a.to_vec()
    }
    fn u8(&mut self) -> u8 {
        self.bytes(1).first().copied().unwrap_or(0)
    }
    fn u16(&mut self) -> u16 {
        u16::from(self.u8()) | (u16::from(self.u8()) << 8)
    }
    fn u32(&mut self) -> u32 {
        u32::from(self.u16()) | (u32::from(self.u16()) << 16)
    }
}

fn rd32(d: &Device, off: u64) -> u32 {
    let mut b = [0u8; 4];
    assert!(
        d.bar0_read(off, &mut b),
        "in-range read of {off:#x} refused"
    );
    u32::from_le_bytes(b)
}

/// What the spec page promises about the register file at any moment.
fn check_invariants(d: &Device) {
    let ctrl = rd32(d, CTRL);
    if ctrl & CTRL_IN_PROGRESS != 0 {
        assert!(
            ctrl & CTRL_START != 0,
            "IN_PROGRESS without START: {ctrl:#x}"
        );
    }
    let intr = rd32(d, INTR_CTRL);
    let (en, status) = (intr as u16, (intr >> 16) as u16);
    assert_eq!(en & !INTR_CTRL_MASK, 0, "INTR_CTRL holds undefined bits");
    assert_eq!(
        status & !INTR_STATUS_MASK,
        0,
        "INTR_STATUS holds undefined bits"
    );
    // CTRL2 is the upper half of CTRL, whichever way it is read.
    let mut c2 = [0u8; 2];
    assert!(d.bar0_read(CTRL2, &mut c2));
    assert_eq!(u16::from_le_bytes(c2), (ctrl >> 16) as u16);
    // Unimplemented offsets read as zero.
    assert_eq!(rd32(d, 0), 0);
    assert_eq!(rd32(d, BAR0_SIZE - 4), 0);
    // The engine's latched state stays consistent with what it latched.
    let st = d.lock();
    if st.eng.enabled {
        assert!(st.eng.count >= 1 && st.eng.count <= RING_COUNT_MAX);
        assert!(st.eng.index < st.eng.count, "ring index past the ring");
        assert_eq!(st.eng.base % DESC_SIZE, 0);
    }
}

fuzz_target!(|data: &[u8]| {
    set_level(Level::Error);
    let dev = Device::new("fuzz");
    dev.config_write(4, &CMD_MASTER.to_le_bytes());
    let mem = VecMemory::new();
    mem.add_region(RING, (SLOTS * DESC_SIZE) as usize);
    mem.add_region(DATA, DATA_LEN);
    let mut input = Input(data);
    let mut ops = 0;
    while !input.0.is_empty() && ops < 256 {
        ops += 1;
        let op = input.u8();
        let len = usize::from((op >> 3) & 7) + 1;
        match op & 7 {
            // Raw write of 1..=8 bytes anywhere in (or past) BAR0.
            0 => {
                let off = u64::from(input.u16());
                let bytes = input.bytes(len);
                let last = (
                    rd32(&dev, DESC_RING_LAST_ADDR),
                    rd32(&dev, DESC_RING_LAST_SIZE),
                );
                let inside = off + bytes.len() as u64 <= BAR0_SIZE;
                assert_eq!(dev.bar0_write(off, &bytes), inside || bytes.is_empty());
                // Only the engine writes the LAST registers.
                assert_eq!(
                    last,
                    (
                        rd32(&dev, DESC_RING_LAST_ADDR),
                        rd32(&dev, DESC_RING_LAST_SIZE)
                    )
                );
            }
            // Raw read of 1..=8 bytes, checked against dword reads.
            1 => {
                let off = u64::from(input.u16());
                let mut buf = vec![0u8; len];
                let inside = off + len as u64 <= BAR0_SIZE;
                assert_eq!(dev.bar0_read(off, &mut buf), inside);
                if inside {
                    for (i, b) in buf.iter().enumerate() {
                        let a = off + i as u64;
                        let dw = rd32(&dev, a & !3);
                        assert_eq!(*b, (dw >> ((a & 3) * 8)) as u8, "byte {a:#x}");
                    }
                }
            }
            // A named register, written as the driver would (writel/writew).
            2 => {
                let reg = NAMED[usize::from(op >> 3) % NAMED.len()];
                let v = input.u32();
                if op & 0x80 != 0 && reg % 4 == 0 {
                    assert!(dev.bar0_write(reg, &v.to_le_bytes()));
                } else {
                    assert!(dev.bar0_write(reg, &(v as u16).to_le_bytes()));
                }
            }
            // Point the ring registers at the test ring and ring the doorbell.
            3 => {
                let count = u32::from(input.u8()) % (SLOTS as u32 + 1);
                let next = u32::from(input.u8()) % SLOTS as u32;
                for (reg, v) in [
                    (DESC_RING_ADDR, RING as u32),
                    (DESC_RING_ADDR_HI, 0),
                    (DESC_RING_NEXT_ADDR, RING as u32 + next * DESC_SIZE as u32),
                    (DESC_RING_COUNT, count),
                ] {
                    assert!(dev.bar0_write(reg, &v.to_le_bytes()));
                }
                assert!(dev.bar0_write(CTRL, &(CTRL_START_VAL as u16).to_le_bytes()));
            }
            // Store a descriptor into a ring slot.
            4 => {
                let slot = u64::from(input.u8()) % SLOTS;
                let mut raw = input.bytes(16);
                raw.resize(16, 0);
                mem.write(RING + slot * DESC_SIZE, &raw).unwrap();
            }
            // Run the engine synchronously for a few bursts.
            5 => {
                run_until_idle(&dev, &mem, len);
            }
            // Config space: the command register (bus mastering) or any
            // other bytes.
            6 => {
                let off = u64::from(input.u8()) << (op >> 7);
                let bytes = input.bytes(len.min(4));
                dev.config_write(off, &bytes);
            }
            // Function reset, or BAR2 accesses.
            _ => {
                if op & 0x80 != 0 {
                    dev.reset("fuzz");
                    assert_eq!(rd32(&dev, DESC_RING_COUNT), 0);
                } else {
                    let off = u64::from(input.u16());
                    let bytes = input.bytes(len);
                    let inside = off + bytes.len() as u64 <= BAR2_SIZE;
                    assert_eq!(dev.bar2_write(off, &bytes), inside);
                    let mut back = vec![0u8; bytes.len()];
                    assert_eq!(dev.bar2_read(off, &mut back), inside);
                }
            }
        }
        check_invariants(&dev);
    }
});
