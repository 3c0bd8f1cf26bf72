// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! PCI configuration space of one channel (region index 7).
//!
//! A conventional 256-byte header: QEMU drops its own PCIe assumptions for
//! a device whose config region is 256 bytes, and the driver needs nothing
//! from a PCIe capability. QEMU emulates the BAR address registers and the
//! MSI/MSI-X capabilities itself, but it also writes every config access
//! through to us ("let it filter out what we can't write"), so the writable
//! bits are modelled with a per-byte write mask, like real hardware.
//!
//! Layout:
//!
//! ```text
//! 0x00 vendor 0x10b5, device 0x87d0     0x2c subsystem 0x10b5:0x87d0
//! 0x04 command / status (cap list)      0x34 capability pointer -> 0x40
//! 0x08 revision 0x01, class 0x088000    0x3c interrupt line, pin INTA
//! 0x10 BAR0 32-bit memory, 8 KiB        0x40 MSI (64-bit, 1 vector) -> 0x50
//! 0x18 BAR2 32-bit memory, 4 KiB        0x50 MSI-X (table BAR2+0, PBA BAR2+0x800)
//! ```

use crate::regs::{BAR0_SIZE, BAR2_SIZE};

/// Size of the config region.
pub const CONFIG_SIZE: usize = 256;
/// PCI vendor ID (PLX Technology).
pub const VENDOR_ID: u16 = 0x10b5;
/// PCI device ID matched by plx_dma.c.
pub const DEVICE_ID: u16 = 0x87d0;
/// Class code: system peripheral, other (0x0880), prog-if 0.
pub const CLASS_CODE: u32 = 0x08_80_00;
/// Revision ID.
pub const REVISION: u8 = 0x01;
/// Number of MSI-X vectors.
pub const MSIX_VECTORS: u32 = 1;
/// Offset of the MSI capability.
pub const MSI_CAP: usize = 0x40;
/// Offset of the MSI-X capability.
pub const MSIX_CAP: usize = 0x50;
/// Offset of the MSI-X table in BAR2.
pub const MSIX_TABLE_OFFSET: u32 = 0x0;
/// Offset of the MSI-X PBA in BAR2.
pub const MSIX_PBA_OFFSET: u32 = 0x800;

/// PCI_COMMAND bits.
pub const CMD_MEMORY: u16 = 1 << 1;
/// Bus master enable: without it the engine does no DMA.
pub const CMD_MASTER: u16 = 1 << 2;
/// Parity error response.
pub const CMD_PARITY: u16 = 1 << 6;
/// SERR# enable.
pub const CMD_SERR: u16 = 1 << 8;
/// INTx disable.
pub const CMD_INTX_DISABLE: u16 = 1 << 10;
/// PCI_STATUS: INTx pending.
pub const STATUS_INTERRUPT: u16 = 1 << 3;
/// PCI_STATUS: capability list present.
pub const STATUS_CAP_LIST: u16 = 1 << 4;

/// Configuration space with its write masks.
#[derive(Clone, Debug)]
pub struct ConfigSpace {
    data: [u8; CONFIG_SIZE],
    wmask: [u8; CONFIG_SIZE],
}

fn put16(a: &mut [u8; CONFIG_SIZE], off: usize, v: u16) {
    a[off..off + 2].copy_from_slice(&v.to_le_bytes());
}

fn put32(a: &mut [u8; CONFIG_SIZE], off: usize, v: u32) {
    a[off..off + 4].copy_from_slice(&v.to_le_bytes());
}

impl Default for ConfigSpace {
    fn default() -> Self {
        ConfigSpace::new()
    }
}

impl ConfigSpace {
    /// Power-on state.
    pub fn new() -> ConfigSpace {
        let mut d = [0u8; CONFIG_SIZE];
        let mut w = [0u8; CONFIG_SIZE];

        put16(&mut d, 0x00, VENDOR_ID);
        put16(&mut d, 0x02, DEVICE_ID);
        put16(
            &mut w,
            0x04,
            CMD_MEMORY | CMD_MASTER | CMD_PARITY | CMD_SERR | CMD_INTX_DISABLE,
        );
        put16(&mut d, 0x06, STATUS_CAP_LIST);
        d[0x08] = REVISION;
        d[0x09] = CLASS_CODE as u8;
        d[0x0a] = (CLASS_CODE >> 8) as u8;
        d[0x0b] = (CLASS_CODE >> 16) as u8;
        w[0x0c] = 0xff; // cache line size
        w[0x0d] = 0xff; // latency timer
                        // BARs: 32-bit non-prefetchable memory; the mask makes sizing work
                        // (write all-ones, read back the size mask).
        put32(&mut w, 0x10, !(BAR0_SIZE as u32 - 1));
        put32(&mut w, 0x18, !(BAR2_SIZE as u32 - 1));
        put16(&mut d, 0x2c, VENDOR_ID);
        put16(&mut d, 0x2e, DEVICE_ID);
        d[0x34] = MSI_CAP as u8;
        w[0x3c] = 0xff; // interrupt line
        d[0x3d] = 1; // INTA#

        // MSI: 64-bit address, one vector, no per-vector masking.
        d[MSI_CAP] = 0x05;
        d[MSI_CAP + 1] = MSIX_CAP as u8;
        put16(&mut d, MSI_CAP + 2, 1 << 7);
        put16(&mut w, MSI_CAP + 2, 0x0071); // enable, multiple message enable
        put32(&mut w, MSI_CAP + 4, 0xFFFF_FFFC);
        put32(&mut w, MSI_CAP + 8, 0xFFFF_FFFF);
        put16(&mut w, MSI_CAP + 12, 0xFFFF);

        // MSI-X: table and PBA in BAR2.
        d[MSIX_CAP] = 0x11;
        d[MSIX_CAP + 1] = 0;
        put16(&mut d, MSIX_CAP + 2, (MSIX_VECTORS - 1) as u16);
        put16(&mut w, MSIX_CAP + 2, 0xC000); // enable, function mask
        put32(&mut d, MSIX_CAP + 4, MSIX_TABLE_OFFSET | 2);
        put32(&mut d, MSIX_CAP + 8, MSIX_PBA_OFFSET | 2);

        ConfigSpace { data: d, wmask: w }
    }

    /// Function reset: back to the power-on state.
    pub fn reset(&mut self) {
        *self = ConfigSpace::new();
    }

    /// Reads `buf.len()` bytes at `off`; false if outside the 256 bytes.
    pub fn read(&self, off: u64, buf: &mut [u8]) -> bool {
        match range(off, buf.len()) {
            Some(r) => {
                buf.copy_from_slice(&self.data[r]);
                true
            }
            None => false,
        }
    }

    /// Writes `data` at `off` through the write mask; false if outside.
    pub fn write(&mut self, off: u64, data: &[u8]) -> bool {
        let Some(r) = range(off, data.len()) else {
            return false;
        };
        for (i, &b) in r.zip(data) {
            self.data[i] = (self.data[i] & !self.wmask[i]) | (b & self.wmask[i]);
        }
        true
    }

    fn command(&self) -> u16 {
        u16::from_le_bytes([self.data[0x04], self.data[0x05]])
    }

    /// Bus mastering enabled (the engine may issue DMA).
    pub fn bus_master(&self) -> bool {
        self.command() & CMD_MASTER != 0
    }

    /// INTx disabled by the command register.
    pub fn intx_disabled(&self) -> bool {
        self.command() & CMD_INTX_DISABLE != 0
    }

    /// Reflects the INTx line in PCI_STATUS.INTERRUPT.
    pub fn set_intx_status(&mut self, pending: bool) {
        if pending {
            self.data[0x06] |= STATUS_INTERRUPT as u8;
        } else {
            self.data[0x06] &= !(STATUS_INTERRUPT as u8);
        }
    }
}

fn range(off: u64, len: usize) -> Option<std::ops::Range<usize>> {
    let off = usize::try_from(off).ok()?;
    let end = off.checked_add(len)?;
    (end <= CONFIG_SIZE).then_some(off..end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r32(c: &ConfigSpace, off: u64) -> u32 {
        let mut b = [0u8; 4];
        assert!(c.read(off, &mut b));
        u32::from_le_bytes(b)
    }

    #[test]
    fn identity() {
        let c = ConfigSpace::new();
        assert_eq!(r32(&c, 0), 0x87d0_10b5);
        assert_eq!(r32(&c, 8) >> 8, CLASS_CODE);
        assert_eq!(r32(&c, 0x2c), 0x87d0_10b5);
    }

    #[test]
    fn bar_sizing() {
        let mut c = ConfigSpace::new();
        assert!(c.write(0x10, &0xFFFF_FFFFu32.to_le_bytes()));
        assert_eq!(r32(&c, 0x10), 0xFFFF_E000); // 8 KiB, mem32
        c.write(0x18, &0xFFFF_FFFFu32.to_le_bytes());
        assert_eq!(r32(&c, 0x18), 0xFFFF_F000);
        c.write(0x14, &0xFFFF_FFFFu32.to_le_bytes());
        assert_eq!(r32(&c, 0x14), 0); // unimplemented BAR1
        c.write(0x10, &0xFEB0_1234u32.to_le_bytes());
        assert_eq!(r32(&c, 0x10), 0xFEB0_0000);
    }

    #[test]
    fn command_and_read_only_fields() {
        let mut c = ConfigSpace::new();
        assert!(!c.bus_master());
        c.write(4, &0xFFFFu16.to_le_bytes());
        assert!(c.bus_master());
        assert!(c.intx_disabled());
        // Vendor, class and capability pointers are read-only.
        c.write(0, &[0; 4]);
        c.write(0x34, &[0]);
        assert_eq!(r32(&c, 0), 0x87d0_10b5);
        assert_eq!(r32(&c, 0x34) & 0xff, MSI_CAP as u32);
        c.set_intx_status(true);
        assert_ne!((r32(&c, 4) >> 16) & STATUS_INTERRUPT as u32, 0);
        c.reset();
        assert!(!c.bus_master());
    }

    #[test]
    fn capability_chain() {
        let c = ConfigSpace::new();
        let mut ptr = r32(&c, 0x34) as u8 as u64;
        let mut ids = Vec::new();
        while ptr != 0 {
            let head = r32(&c, ptr);
            ids.push(head as u8);
            ptr = (head >> 8) as u8 as u64;
        }
        assert_eq!(ids, vec![0x05, 0x11]);
        // MSI-X table in BAR2 at 0, PBA at 0x800, one vector.
        assert_eq!(r32(&c, MSIX_CAP as u64 + 4), 2);
        assert_eq!(r32(&c, MSIX_CAP as u64 + 8), 0x802);
        assert_eq!((r32(&c, MSIX_CAP as u64) >> 16) & 0x7ff, MSIX_VECTORS - 1);
    }

    #[test]
    fn out_of_range_access() {
        let mut c = ConfigSpace::new();
        assert!(!c.read(255, &mut [0u8; 2]));
        assert!(!c.write(256, &[0]));
        assert!(!c.read(u64::MAX, &mut [0u8; 1]));
    }
}
