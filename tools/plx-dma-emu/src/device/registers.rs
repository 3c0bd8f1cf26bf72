// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The register file as the guest sees it: BAR0 accesses split into dword
//! writes with byte enables, CTRL's mix of read/write, write-1-to-clear
//! and self-clearing bits, the START checks, BAR2 and config space.

use std::time::Instant;

use super::{Device, State};
use crate::regs::*;
use crate::stats::inc;

fn expand_byte_mask(m: u8) -> u32 {
    (0..4)
        .filter(|i| m & (1 << i) != 0)
        .fold(0, |acc, i| acc | (0xFF << (8 * i)))
}

impl Device {
    // ---- BAR0 registers -------------------------------------------------

    /// Reads BAR0; false if the range is outside the BAR.
    pub fn bar0_read(&self, off: u64, buf: &mut [u8]) -> bool {
        if !in_bar(off, buf.len(), BAR0_SIZE) {
            return false;
        }
        inc(&self.stats.reg_reads);
        let st = self.lock();
        let mut cached: Option<(u64, u32)> = None;
        for (i, b) in buf.iter_mut().enumerate() {
            let a = off + i as u64;
            let dw = a & !3;
            let v = match cached {
                Some((d, v)) if d == dw => v,
                _ => {
                    let v = st.read32(dw);
                    cached = Some((dw, v));
                    v
                }
            };
            *b = (v >> ((a & 3) * 8)) as u8;
        }
        true
    }

    /// Writes BAR0; false if the range is outside the BAR. Accesses of any
    /// size and alignment are split into dword writes with byte enables,
    /// which is what makes 16-bit CTRL/CTRL2/INTR_* accesses and 32-bit
    /// accesses that span two 16-bit registers behave like hardware.
    pub fn bar0_write(&self, off: u64, data: &[u8]) -> bool {
        if !in_bar(off, data.len(), BAR0_SIZE) || data.is_empty() {
            return data.is_empty();
        }
        inc(&self.stats.reg_writes);
        let mut st = self.lock();
        let mut i = 0usize;
        while i < data.len() {
            let a = off + i as u64;
            let dw = a & !3;
            let mut value = 0u32;
            let mut mask = 0u8;
            while i < data.len() && (off + i as u64) & !3 == dw {
                let lane = ((off + i as u64) & 3) as u32;
                value |= (data[i] as u32) << (8 * lane);
                mask |= 1 << lane;
                i += 1;
            }
            st.write32(self, dw, value, expand_byte_mask(mask));
        }
        // A sleeping engine checks its condition under the lock before it
        // waits, so reading the flag under the same lock loses no wake-up.
        let wake = st.engine_waiting;
        drop(st);
        if wake {
            self.notify();
        }
        true
    }

    // ---- BAR2 (MSI-X table/PBA) ------------------------------------------

    /// Reads BAR2 (stray table accesses and PBA reads).
    pub fn bar2_read(&self, off: u64, buf: &mut [u8]) -> bool {
        if !in_bar(off, buf.len(), BAR2_SIZE) {
            return false;
        }
        let st = self.lock();
        let o = off as usize;
        buf.copy_from_slice(&st.bar2[o..o + buf.len()]);
        true
    }

    /// Writes BAR2; the PBA half is read-only.
    pub fn bar2_write(&self, off: u64, data: &[u8]) -> bool {
        if !in_bar(off, data.len(), BAR2_SIZE) {
            return false;
        }
        let mut st = self.lock();
        let pba = crate::config_space::MSIX_PBA_OFFSET as usize;
        for (i, &b) in data.iter().enumerate() {
            let a = off as usize + i;
            if a < pba {
                st.bar2[a] = b;
            }
        }
        true
    }

    // ---- config space ------------------------------------------------------

    /// Reads config space.
    pub fn config_read(&self, off: u64, buf: &mut [u8]) -> bool {
        self.lock().cfg.read(off, buf)
    }

    /// Writes config space; a change of INTx-disable re-evaluates the line.
    pub fn config_write(&self, off: u64, data: &[u8]) -> bool {
        let mut st = self.lock();
        let ok = st.cfg.write(off, data);
        st.update_irq(false);
        ok
    }
}

fn in_bar(off: u64, len: usize, size: u64) -> bool {
    off.checked_add(len as u64).is_some_and(|end| end <= size)
}

impl State {
    /// Value of the dword register at `dw` (4-byte aligned).
    pub fn read32(&self, dw: u64) -> u32 {
        match dw {
            DESC_RING_ADDR => self.regs.ring_lo,
            DESC_RING_ADDR_HI => self.regs.ring_hi,
            DESC_RING_NEXT_ADDR => self.regs.next_lo,
            DESC_RING_COUNT => self.regs.count,
            DESC_RING_LAST_ADDR => self.regs.last_addr,
            DESC_RING_LAST_SIZE => self.regs.last_size,
            PREF_LIMIT => self.regs.pref,
            CTRL => self.ctrl_value(),
            INTR_CTRL => self.regs.intr_ctrl as u32 | ((self.regs.intr_status as u32) << 16),
            _ => 0,
        }
    }

    /// CTRL as the guest reads it.
    pub fn ctrl_value(&self) -> u32 {
        let mut v = self.regs.ctrl;
        if self.eng.enabled {
            v |= CTRL_START;
            if self.eng.idle_at_kick.is_none() {
                v |= CTRL_IN_PROGRESS;
            }
        }
        if self.eng.abort_req {
            v |= CTRL_ABORT;
        }
        v
    }

    fn write32(&mut self, dev: &Device, dw: u64, value: u32, mask: u32) {
        let merge = |old: u32| (old & !mask) | (value & mask);
        match dw {
            DESC_RING_ADDR | DESC_RING_ADDR_HI | DESC_RING_NEXT_ADDR | DESC_RING_COUNT => {
                if self.eng.enabled {
                    dev.warn(format_args!(
                        "{} written while the engine is running; the running ring keeps \
                         its latched value until the next START",
                        name(dw)
                    ));
                }
                if dw == DESC_RING_NEXT_ADDR && self.eng.enabled {
                    // NEXT_ADDR reads the live position while the engine
                    // runs; the value written waits for the stop.
                    let old = self.eng.next_written.unwrap_or(self.regs.next_lo);
                    self.eng.next_written = Some(merge(old));
                    return;
                }
                let r = match dw {
                    DESC_RING_ADDR => &mut self.regs.ring_lo,
                    DESC_RING_ADDR_HI => &mut self.regs.ring_hi,
                    DESC_RING_NEXT_ADDR => &mut self.regs.next_lo,
                    _ => &mut self.regs.count,
                };
                *r = merge(*r);
            }
            PREF_LIMIT => self.regs.pref = merge(self.regs.pref),
            DESC_RING_LAST_ADDR | DESC_RING_LAST_SIZE => {
                dev.warn(format_args!("write to read-only register {} ignored", name(dw)));
            }
            CTRL => self.write_ctrl(dev, value & mask, mask),
            INTR_CTRL => {
                if mask & 0xFFFF != 0 {
                    self.write_intr_ctrl(value as u16, mask as u16);
                }
                if mask >> 16 != 0 {
                    self.write_intr_status((value >> 16) as u16 & (mask >> 16) as u16);
                }
            }
            _ => dev.warn(format_args!(
                "write of {value:#x} (byte mask {mask:#x}) to unimplemented BAR0 offset {dw:#x} ignored"
            )),
        }
    }

    fn write_ctrl(&mut self, dev: &Device, v: u32, mask: u32) {
        // Status first: a write that clears PAUSE_DONE and requests a pause
        // (what plx_dma.c does) must see the new PAUSE_DONE afterwards.
        self.regs.ctrl &= !(v & CTRL_W1C_BITS);
        let rw = (CTRL_RW_BITS | CTRL2_RW_BITS_IN_CTRL) & mask;
        self.regs.ctrl = (self.regs.ctrl & !rw) | (v & rw);

        if v & CTRL_ABORT != 0 {
            if self.eng.in_flight {
                self.eng.abort_req = true;
            } else {
                self.abort_done();
            }
        }
        if self.pause_requested() {
            // Nothing in flight: the pause is immediate.
            if !self.eng.in_flight {
                self.pause_done(true);
            }
        } else if v & CTRL_START != 0 && !self.eng.abort_req {
            if self.eng.enabled {
                if self.eng.idle_at_kick == Some(self.eng.kick) {
                    self.eng.woken_at.get_or_insert_with(Instant::now);
                }
                self.eng.kick += 1;
                // The doorbell ends IDLE: the engine has work to look at,
                // and IN_PROGRESS reads 1 until it finds the ring dry again.
                self.eng.idle_at_kick = None;
            } else {
                self.try_start(dev);
            }
        }
    }

    fn try_start(&mut self, dev: &Device) {
        let refuse = |st: &mut State, why: String| {
            dev.warn(format_args!("START refused: {why}; INTR_STATUS.ERROR set"));
            st.raise(INTR_STATUS_ERROR);
        };
        let mode = self.regs.ctrl & CTRL_DESC_MODE_MASK;
        if mode != CTRL_DESC_MODE_OFF_CHIP {
            let m = if mode == CTRL_DESC_MODE_BLOCK {
                "block"
            } else if mode == CTRL_DESC_MODE_ON_CHIP {
                "on-chip"
            } else {
                "reserved"
            };
            return refuse(
                self,
                format!("descriptor mode {m} is not supported (only the off-chip ring)"),
            );
        }
        let count = self.regs.count;
        if count == 0 || count > RING_COUNT_MAX {
            return refuse(
                self,
                format!("ring count {count} outside 1..={RING_COUNT_MAX}"),
            );
        }
        let base = ((self.regs.ring_hi as u64) << 32) | self.regs.ring_lo as u64;
        if base % DESC_SIZE != 0 {
            return refuse(self, format!("ring base {base:#x} is not 16-byte aligned"));
        }
        if base.checked_add(count as u64 * DESC_SIZE).is_none() {
            return refuse(
                self,
                format!("ring {base:#x} with {count} descriptors wraps"),
            );
        }
        let next = ((self.regs.ring_hi as u64) << 32) | self.regs.next_lo as u64;
        let off = next.wrapping_sub(base);
        if next < base || off % DESC_SIZE != 0 || off / DESC_SIZE >= count as u64 {
            return refuse(
                self,
                format!("next descriptor {next:#x} is not a slot of the ring at {base:#x} with {count} entries"),
            );
        }
        self.eng.enabled = true;
        self.eng.base = base;
        self.eng.count = count;
        self.eng.index = (off / DESC_SIZE) as u32;
        self.eng.idle_at_kick = None;
        self.eng.kick += 1;
        self.eng.woken_at = Some(Instant::now());
        inc(&self.stats.starts);
        dev.debug(format_args!(
            "engine started: ring {base:#x}, {count} descriptors, next index {}",
            self.eng.index
        ));
    }

    fn write_intr_ctrl(&mut self, v: u16, m: u16) {
        let before = self.irq_enable_mask();
        self.regs.intr_ctrl = ((self.regs.intr_ctrl & !m) | (v & m)) & INTR_CTRL_MASK;
        let newly = self.irq_enable_mask() & !before;
        let edge = self.regs.intr_status & newly != 0;
        self.update_irq(edge);
    }

    fn write_intr_status(&mut self, w1c: u16) {
        self.regs.intr_status &= !w1c;
        self.update_irq(false);
    }
}
