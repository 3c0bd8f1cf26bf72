// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Helpers shared by the integration tests: a "driver" that programs the
//! device the way drivers/dma/plx_dma.c does, and eventfd plumbing.

#![allow(dead_code)]

use std::fs::File;
use std::io::Read;
use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::eventfd::{EfdFlags, EventFd};
use plx_dma_emu::config_space::CMD_MASTER;
use plx_dma_emu::desc::Descriptor;
use plx_dma_emu::device::Device;
use plx_dma_emu::engine::run_until_idle;
use plx_dma_emu::memory::{GuestMemory, VecMemory};
use plx_dma_emu::regs::*;

/// IOVA of the test ring.
pub const RING: u64 = 0x10_0000;
/// IOVA of the source buffer region.
pub const SRC: u64 = 0x20_0000;
/// IOVA of the destination buffer region.
pub const DST: u64 = 0x40_0000;
/// Size of each buffer region.
pub const BUF: usize = 0x10_0000;

/// Reads a 32-bit register.
pub fn rd32(d: &Device, off: u64) -> u32 {
    let mut b = [0u8; 4];
    assert!(d.bar0_read(off, &mut b));
    u32::from_le_bytes(b)
}

/// Reads a 16-bit register (readw).
pub fn rd16(d: &Device, off: u64) -> u16 {
    let mut b = [0u8; 2];
    assert!(d.bar0_read(off, &mut b));
    u16::from_le_bytes(b)
}

/// writel.
pub fn wr32(d: &Device, off: u64, v: u32) {
    assert!(d.bar0_write(off, &v.to_le_bytes()));
}

/// writew.
pub fn wr16(d: &Device, off: u64, v: u16) {
    assert!(d.bar0_write(off, &v.to_le_bytes()));
}

/// A device plus in-process guest memory and a driver-side ring cursor.
pub struct Rig {
    pub dev: Arc<Device>,
    pub mem: Arc<VecMemory>,
    pub count: u32,
    pub head: u32,
}

impl Rig {
    /// Device with BME set and memory regions for ring and buffers.
    pub fn new(count: u32) -> Rig {
        let dev = Device::new("test");
        dev.config_write(4, &CMD_MASTER.to_le_bytes());
        let mem = Arc::new(VecMemory::new());
        mem.add_region(RING, count as usize * 16);
        mem.add_region(SRC, BUF);
        mem.add_region(DST, BUF);
        Rig {
            dev,
            mem,
            count,
            head: 0,
        }
    }

    /// plx_dma_alloc_chan_resources.
    pub fn alloc(&mut self) {
        let d = &self.dev;
        wr32(d, CTRL, CTRL_RESET_VAL);
        wr32(d, DESC_RING_ADDR, RING as u32);
        wr32(d, DESC_RING_ADDR_HI, (RING >> 32) as u32);
        wr32(d, DESC_RING_NEXT_ADDR, RING as u32);
        wr32(d, DESC_RING_COUNT, self.count);
        wr32(d, PREF_LIMIT, PREF_LIMIT_PREF_FOUR);
        self.head = 0;
    }

    /// Address of ring slot `i`.
    pub fn slot(&self, i: u32) -> u64 {
        RING + (i % self.count) as u64 * 16
    }

    /// prep_memcpy + tx_submit: writes a VALID descriptor at the head.
    /// Returns its slot.
    pub fn submit(&mut self, src: u64, dst: u64, len: u32, interrupt: bool) -> u32 {
        let i = self.head;
        self.write_desc(i, &Descriptor::encode(src, dst, len, true, interrupt));
        self.head = (self.head + 1) % self.count;
        i
    }

    /// Writes raw descriptor bytes into slot `i`.
    pub fn write_desc(&self, i: u32, raw: &[u8; 16]) {
        self.mem.write(self.slot(i), raw).unwrap();
    }

    /// issue_pending: writew(START_VAL).
    pub fn issue(&self) {
        wr16(&self.dev, CTRL, CTRL_START_VAL as u16);
    }

    /// Runs the engine synchronously until idle.
    pub fn run(&self) -> usize {
        run_until_idle(&self.dev, &*self.mem, 10_000)
    }

    /// First dword of slot `i` (the write-back word).
    pub fn wb(&self, i: u32) -> u32 {
        let mut b = [0u8; 4];
        self.mem.read(self.slot(i), &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    /// Fills `len` bytes at `iova` with a pattern derived from `seed`.
    pub fn fill(&self, iova: u64, len: usize, seed: u8) -> Vec<u8> {
        let v: Vec<u8> = (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect();
        self.mem.write(iova, &v).unwrap();
        v
    }

    /// Reads back `len` bytes.
    pub fn read(&self, iova: u64, len: usize) -> Vec<u8> {
        let mut v = vec![0u8; len];
        self.mem.read(iova, &mut v).unwrap();
        v
    }

    /// __plx_dma_stop, with its 1 s poll for PAUSE_DONE. Returns whether
    /// the pause completed in time.
    pub fn stop(&self) -> bool {
        let d = &self.dev;
        let val = rd32(d, CTRL);
        if val & !CTRL_GRACEFUL_PAUSE == 0 {
            return true;
        }
        wr32(d, CTRL, CTRL_RESET_VAL | CTRL_GRACEFUL_PAUSE);
        let t = Instant::now();
        let mut done = false;
        while t.elapsed() < Duration::from_secs(1) {
            if rd32(d, CTRL) & CTRL_GRACEFUL_PAUSE_DONE != 0 {
                done = true;
                break;
            }
            std::thread::yield_now();
        }
        wr32(d, CTRL, CTRL_RESET_VAL | CTRL_GRACEFUL_PAUSE);
        wr32(d, DESC_RING_COUNT, 0);
        wr32(d, DESC_RING_ADDR, 0);
        wr32(d, DESC_RING_ADDR_HI, 0);
        wr32(d, DESC_RING_NEXT_ADDR, 0);
        done
    }
}

/// A non-blocking eventfd: (descriptor for the device, reader for the test).
pub fn eventfd() -> (OwnedFd, File) {
    let efd =
        EventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC).unwrap();
    let fd = OwnedFd::from(efd);
    let reader = File::from(fd.try_clone().unwrap());
    (fd, reader)
}

/// Reads and resets an eventfd counter (0 if not signalled).
pub fn drain(f: &mut File) -> u64 {
    let mut b = [0u8; 8];
    match f.read(&mut b) {
        Ok(8) => u64::from_ne_bytes(b),
        _ => 0,
    }
}

/// Waits up to `timeout` for an eventfd to be signalled; returns its count.
pub fn wait_signal(f: &mut File, timeout: Duration) -> u64 {
    let t = Instant::now();
    loop {
        let n = drain(f);
        if n > 0 || t.elapsed() > timeout {
            return n;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Polls `cond` for up to `timeout`.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < timeout {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    cond()
}
