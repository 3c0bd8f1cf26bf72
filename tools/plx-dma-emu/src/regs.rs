// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The BAR0 register map of the emulated engine.
//!
//! Offsets and bit positions are those used by Linux's
//! `drivers/dma/plx_dma.c`; that driver must work unchanged against the
//! emulator, so every name here mirrors a `PLX_REG_*` macro there. Bits the
//! driver does not name (the pause/abort-done interrupt status bits, the
//! limits) are this emulator's own choices and are documented in
//! `Documentation/devices/plx-dma-emu.rst`.

/// Size of BAR0 (registers). 8 KiB like a small real function window.
pub const BAR0_SIZE: u64 = 0x2000;
/// Size of BAR2 (MSI-X table and PBA, emulated by QEMU).
pub const BAR2_SIZE: u64 = 0x1000;

/// Descriptor ring base address, low 32 bits.
pub const DESC_RING_ADDR: u64 = 0x214;
/// Descriptor ring base address, high 32 bits.
pub const DESC_RING_ADDR_HI: u64 = 0x218;
/// Low 32 bits of the address of the next descriptor to fetch.
pub const DESC_RING_NEXT_ADDR: u64 = 0x21C;
/// Number of descriptors in the ring.
pub const DESC_RING_COUNT: u64 = 0x220;
/// Low 32 bits of the address of the last completed descriptor (read-only).
pub const DESC_RING_LAST_ADDR: u64 = 0x224;
/// Byte count transferred by the last completed descriptor (read-only).
pub const DESC_RING_LAST_SIZE: u64 = 0x228;
/// Descriptor prefetch limit (descriptors fetched per burst).
pub const PREF_LIMIT: u64 = 0x234;
/// Control and status (32 bits; its upper half is CTRL2).
pub const CTRL: u64 = 0x238;
/// Control 2 (16 bits, aliases CTRL bits 31:16).
pub const CTRL2: u64 = 0x23A;
/// Interrupt enables (16 bits).
pub const INTR_CTRL: u64 = 0x23C;
/// Interrupt status (16 bits, write 1 to clear).
pub const INTR_STATUS: u64 = 0x23E;

/// Value the driver writes to [`PREF_LIMIT`] (`PLX_REG_PREF_LIMIT_PREF_FOUR`).
pub const PREF_LIMIT_PREF_FOUR: u32 = 8;
/// Largest prefetch burst the engine performs; larger values are clamped.
pub const PREF_LIMIT_MAX: u32 = 64;

/// CTRL: request a graceful pause (finish the current descriptor, then stop).
pub const CTRL_GRACEFUL_PAUSE: u32 = 1 << 0;
/// CTRL: abort (stop at once, in-flight descriptor is not written back).
pub const CTRL_ABORT: u32 = 1 << 1;
/// CTRL: write completion status back into each descriptor.
pub const CTRL_WRITE_BACK_EN: u32 = 1 << 2;
/// CTRL: start / doorbell. Reads 1 while the engine is enabled.
pub const CTRL_START: u32 = 1 << 3;
/// CTRL: stop (instead of waiting) when a descriptor without VALID is met.
pub const CTRL_RING_STOP_MODE: u32 = 1 << 4;
/// CTRL: descriptor mode field (bits 6:5).
pub const CTRL_DESC_MODE_MASK: u32 = 3 << 5;
/// CTRL: block mode (not supported by the emulator).
pub const CTRL_DESC_MODE_BLOCK: u32 = 0 << 5;
/// CTRL: on-chip descriptor mode (not supported by the emulator).
pub const CTRL_DESC_MODE_ON_CHIP: u32 = 1 << 5;
/// CTRL: off-chip descriptor ring in host memory (the mode the driver uses).
pub const CTRL_DESC_MODE_OFF_CHIP: u32 = 2 << 5;
/// CTRL status (W1C): a descriptor was invalid (malformed, or ring end in
/// ring-stop mode).
pub const CTRL_DESC_INVALID: u32 = 1 << 8;
/// CTRL status (W1C): a graceful pause has completed.
pub const CTRL_GRACEFUL_PAUSE_DONE: u32 = 1 << 9;
/// CTRL status (W1C): an abort has completed.
pub const CTRL_ABORT_DONE: u32 = 1 << 10;
/// CTRL status (W1C): a pause completed with no descriptor in flight.
pub const CTRL_IMM_PAUSE_DONE: u32 = 1 << 12;
/// CTRL (read-only): the engine is enabled and working on the ring.
pub const CTRL_IN_PROGRESS: u32 = 1 << 30;

/// The driver's "clear all status" value (`PLX_REG_CTRL_RESET_VAL`).
pub const CTRL_RESET_VAL: u32 =
    CTRL_DESC_INVALID | CTRL_GRACEFUL_PAUSE_DONE | CTRL_ABORT_DONE | CTRL_IMM_PAUSE_DONE;
/// The driver's doorbell value (`PLX_REG_CTRL_START_VAL`).
pub const CTRL_START_VAL: u32 =
    CTRL_WRITE_BACK_EN | CTRL_DESC_MODE_OFF_CHIP | CTRL_START | CTRL_RESET_VAL;

/// CTRL bits that are plain read/write storage.
pub const CTRL_RW_BITS: u32 =
    CTRL_GRACEFUL_PAUSE | CTRL_WRITE_BACK_EN | CTRL_RING_STOP_MODE | CTRL_DESC_MODE_MASK;
/// CTRL bits that are write-1-to-clear status.
pub const CTRL_W1C_BITS: u32 = CTRL_RESET_VAL;
/// CTRL2 occupies CTRL bits 31:16 except IN_PROGRESS (bit 30), which is
/// read-only. These are the bits of the 32-bit view that store CTRL2.
pub const CTRL2_RW_BITS_IN_CTRL: u32 = 0xFFFF_0000 & !CTRL_IN_PROGRESS;

/// CTRL2 max-transfer-size field (bits 2:0), stored but has no effect.
pub const CTRL2_MAX_TXFR_SIZE_MASK: u32 = 7;

/// INTR_CTRL: interrupt on error.
pub const INTR_CTRL_ERROR_EN: u16 = 1 << 0;
/// INTR_CTRL: interrupt on invalid descriptor.
pub const INTR_CTRL_INV_DESC_EN: u16 = 1 << 1;
/// INTR_CTRL: interrupt on abort done.
pub const INTR_CTRL_ABORT_DONE_EN: u16 = 1 << 3;
/// INTR_CTRL: interrupt on graceful pause done.
pub const INTR_CTRL_PAUSE_DONE_EN: u16 = 1 << 4;
/// INTR_CTRL: interrupt on immediate pause done.
pub const INTR_CTRL_IMM_PAUSE_DONE_EN: u16 = 1 << 5;
/// INTR_CTRL bits that exist (others read as 0).
pub const INTR_CTRL_MASK: u16 = INTR_CTRL_ERROR_EN
    | INTR_CTRL_INV_DESC_EN
    | INTR_CTRL_ABORT_DONE_EN
    | INTR_CTRL_PAUSE_DONE_EN
    | INTR_CTRL_IMM_PAUSE_DONE_EN;

/// INTR_STATUS: a DMA error (fetch, data or write-back failure).
pub const INTR_STATUS_ERROR: u16 = 1 << 0;
/// INTR_STATUS: an invalid descriptor was met.
pub const INTR_STATUS_INV_DESC: u16 = 1 << 1;
/// INTR_STATUS: a descriptor with INT_WHEN_DONE completed.
pub const INTR_STATUS_DESC_DONE: u16 = 1 << 2;
/// INTR_STATUS: an abort completed.
pub const INTR_STATUS_ABORT_DONE: u16 = 1 << 3;
/// INTR_STATUS: a graceful pause completed.
pub const INTR_STATUS_PAUSE_DONE: u16 = 1 << 4;
/// INTR_STATUS: an immediate pause completed.
pub const INTR_STATUS_IMM_PAUSE_DONE: u16 = 1 << 5;
/// INTR_STATUS bits that exist.
pub const INTR_STATUS_MASK: u16 = 0x3F;

/// Largest descriptor ring the engine accepts (START with more fails).
pub const RING_COUNT_MAX: u32 = 1 << 16;

/// Size of one descriptor in bytes.
pub const DESC_SIZE: u64 = 16;

/// Returns the short name of a register for log lines.
pub fn name(offset: u64) -> &'static str {
    match offset {
        DESC_RING_ADDR => "DESC_RING_ADDR",
        DESC_RING_ADDR_HI => "DESC_RING_ADDR_HI",
        DESC_RING_NEXT_ADDR => "DESC_RING_NEXT_ADDR",
        DESC_RING_COUNT => "DESC_RING_COUNT",
        DESC_RING_LAST_ADDR => "DESC_RING_LAST_ADDR",
        DESC_RING_LAST_SIZE => "DESC_RING_LAST_SIZE",
        PREF_LIMIT => "PREF_LIMIT",
        CTRL => "CTRL",
        CTRL2 => "CTRL2",
        INTR_CTRL => "INTR_CTRL",
        INTR_STATUS => "INTR_STATUS",
        _ => "unimplemented",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn driver_values_match_upstream() {
        // Values as computed from the macros in drivers/dma/plx_dma.c.
        assert_eq!(CTRL_RESET_VAL, 0x1700);
        assert_eq!(CTRL_START_VAL, 0x174C);
        assert_eq!(CTRL2 - CTRL, 2);
        assert_eq!(INTR_STATUS - INTR_CTRL, 2);
    }

    #[test]
    fn bit_classes_do_not_overlap() {
        assert_eq!(CTRL_RW_BITS & CTRL_W1C_BITS, 0);
        assert_eq!(CTRL_RW_BITS & CTRL2_RW_BITS_IN_CTRL, 0);
        assert_eq!(CTRL_W1C_BITS & CTRL2_RW_BITS_IN_CTRL, 0);
        assert_eq!(CTRL2_RW_BITS_IN_CTRL & CTRL_IN_PROGRESS, 0);
    }
}
