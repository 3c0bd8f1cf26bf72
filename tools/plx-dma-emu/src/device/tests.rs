// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Unit tests of one channel: its register file and its lifecycle.

use super::*;
use std::sync::atomic::Ordering;

fn rd32(d: &Device, off: u64) -> u32 {
    let mut b = [0u8; 4];
    assert!(d.bar0_read(off, &mut b));
    u32::from_le_bytes(b)
}

fn rd16(d: &Device, off: u64) -> u16 {
    let mut b = [0u8; 2];
    assert!(d.bar0_read(off, &mut b));
    u16::from_le_bytes(b)
}

fn wr32(d: &Device, off: u64, v: u32) {
    assert!(d.bar0_write(off, &v.to_le_bytes()));
}

fn wr16(d: &Device, off: u64, v: u16) {
    assert!(d.bar0_write(off, &v.to_le_bytes()));
}

#[test]
fn ring_registers_read_back() {
    let d = Device::new("t");
    for (off, v) in [
        (DESC_RING_ADDR, 0x1234_5670),
        (DESC_RING_ADDR_HI, 0xABCD),
        (DESC_RING_NEXT_ADDR, 0x1234_5680),
        (DESC_RING_COUNT, 2048),
        (PREF_LIMIT, PREF_LIMIT_PREF_FOUR),
    ] {
        wr32(&d, off, v);
        assert_eq!(rd32(&d, off), v, "{}", name(off));
    }
    // Byte writes merge into the dword.
    assert!(d.bar0_write(DESC_RING_COUNT + 1, &[0x01]));
    assert_eq!(rd32(&d, DESC_RING_COUNT), 0x100);
    // LAST_* are read-only, unimplemented offsets read 0.
    wr32(&d, DESC_RING_LAST_ADDR, 5);
    wr32(&d, DESC_RING_LAST_SIZE, 5);
    assert_eq!(rd32(&d, DESC_RING_LAST_ADDR), 0);
    assert_eq!(rd32(&d, DESC_RING_LAST_SIZE), 0);
    wr32(&d, 0x100, 0xFFFF_FFFF);
    assert_eq!(rd32(&d, 0x100), 0);
    // Out of the BAR.
    assert!(!d.bar0_read(BAR0_SIZE - 2, &mut [0u8; 4]));
    assert!(!d.bar0_write(u64::MAX, &[0]));
}

#[test]
fn ctrl_w1c_rw_and_ctrl2_alias() {
    let d = Device::new("t");
    // Pause on an idle engine completes at once (immediate).
    wr32(&d, CTRL, CTRL_GRACEFUL_PAUSE);
    let c = rd32(&d, CTRL);
    assert_ne!(c & CTRL_GRACEFUL_PAUSE_DONE, 0);
    assert_ne!(c & CTRL_IMM_PAUSE_DONE, 0);
    // RESET_VAL clears every status bit and the pause request.
    wr32(&d, CTRL, CTRL_RESET_VAL);
    assert_eq!(rd32(&d, CTRL), 0);
    // CTRL2 is the upper half; IN_PROGRESS cannot be written.
    wr16(&d, CTRL2, 0xFFFF);
    assert_eq!(rd16(&d, CTRL2), 0xBFFF);
    assert_eq!(rd32(&d, CTRL) >> 16, 0xBFFF);
    // A 16-bit write to CTRL leaves CTRL2 alone.
    wr16(&d, CTRL, CTRL_WRITE_BACK_EN as u16);
    assert_eq!(rd32(&d, CTRL), 0xBFFF_0000 | CTRL_WRITE_BACK_EN);
    // A 32-bit write replaces both halves.
    wr32(&d, CTRL, 0);
    assert_eq!(rd32(&d, CTRL), 0);
}

#[test]
fn start_validation_sets_error() {
    let d = Device::new("t");
    // Block mode (the reset value of the mode field) is refused.
    wr32(&d, CTRL, CTRL_START);
    assert_eq!(rd16(&d, INTR_STATUS), INTR_STATUS_ERROR);
    assert_eq!(rd32(&d, CTRL) & CTRL_START, 0);
    wr16(&d, INTR_STATUS, 0xFFFF);
    assert_eq!(rd16(&d, INTR_STATUS), 0);
    // Off-chip but count 0.
    wr32(&d, CTRL, CTRL_DESC_MODE_OFF_CHIP | CTRL_START);
    assert_eq!(rd16(&d, INTR_STATUS), INTR_STATUS_ERROR);
    // Absurd count.
    wr16(&d, INTR_STATUS, 0xFFFF);
    wr32(&d, DESC_RING_COUNT, u32::MAX);
    wr32(&d, CTRL, CTRL_DESC_MODE_OFF_CHIP | CTRL_START);
    assert_eq!(rd16(&d, INTR_STATUS), INTR_STATUS_ERROR);
    // NEXT outside the ring.
    wr16(&d, INTR_STATUS, 0xFFFF);
    wr32(&d, DESC_RING_COUNT, 4);
    wr32(&d, DESC_RING_ADDR, 0x1000);
    wr32(&d, DESC_RING_NEXT_ADDR, 0x1040);
    wr32(&d, CTRL, CTRL_DESC_MODE_OFF_CHIP | CTRL_START);
    assert_eq!(rd16(&d, INTR_STATUS), INTR_STATUS_ERROR);
    // Misaligned base.
    wr16(&d, INTR_STATUS, 0xFFFF);
    wr32(&d, DESC_RING_ADDR, 0x1008);
    wr32(&d, DESC_RING_NEXT_ADDR, 0x1008);
    wr32(&d, CTRL, CTRL_DESC_MODE_OFF_CHIP | CTRL_START);
    assert_eq!(rd16(&d, INTR_STATUS), INTR_STATUS_ERROR);
    // A good ring starts; NEXT in the middle selects the index.
    wr16(&d, INTR_STATUS, 0xFFFF);
    wr32(&d, DESC_RING_ADDR, 0x1000);
    wr32(&d, DESC_RING_NEXT_ADDR, 0x1020);
    wr32(&d, CTRL, CTRL_DESC_MODE_OFF_CHIP | CTRL_START);
    assert_eq!(rd16(&d, INTR_STATUS), 0);
    let c = rd32(&d, CTRL);
    assert_ne!(c & CTRL_START, 0);
    assert_ne!(c & CTRL_IN_PROGRESS, 0);
    assert_eq!(d.engine_summary(), (true, 2, true));
}

/// NEXT_ADDR written while the engine runs: reads keep showing the
/// live position (which the engine's advance updates), and the value
/// written is what the next START from STOPPED uses.
#[test]
fn next_addr_written_while_running_takes_effect_at_the_next_start() {
    let d = Device::new("t");
    wr32(&d, DESC_RING_COUNT, 4);
    wr32(&d, DESC_RING_ADDR, 0x1000);
    wr32(&d, DESC_RING_NEXT_ADDR, 0x1000);
    wr32(&d, CTRL, CTRL_DESC_MODE_OFF_CHIP | CTRL_START);
    assert!(d.engine_summary().0);
    wr32(&d, DESC_RING_NEXT_ADDR, 0x1030);
    assert_eq!(rd32(&d, DESC_RING_NEXT_ADDR), 0x1000, "live position");
    // The engine completes the descriptor at 0x1000.
    d.lock()
        .complete(0x1000, false, crate::desc::Completion::Success, 8, true);
    assert_eq!(rd32(&d, DESC_RING_NEXT_ADDR), 0x1010);
    // Pause: the written value is installed, and START uses it.
    wr32(&d, CTRL, CTRL_DESC_MODE_OFF_CHIP | CTRL_GRACEFUL_PAUSE);
    assert!(!d.engine_summary().0);
    assert_eq!(rd32(&d, DESC_RING_NEXT_ADDR), 0x1030);
    wr32(&d, CTRL, CTRL_DESC_MODE_OFF_CHIP | CTRL_START);
    assert_eq!(d.engine_summary(), (true, 3, true));
}

#[test]
fn intr_status_is_w1c_and_intr_ctrl_masks_bits() {
    let d = Device::new("t");
    d.lock()
        .raise(INTR_STATUS_ERROR | INTR_STATUS_DESC_DONE | INTR_STATUS_INV_DESC);
    assert_eq!(rd16(&d, INTR_STATUS), 0b111);
    wr16(&d, INTR_STATUS, INTR_STATUS_DESC_DONE);
    assert_eq!(rd16(&d, INTR_STATUS), 0b011);
    // 32-bit write at INTR_CTRL: low half enables, high half W1C.
    wr32(&d, INTR_CTRL, 0xFFFF | ((INTR_STATUS_ERROR as u32) << 16));
    assert_eq!(rd16(&d, INTR_CTRL), INTR_CTRL_MASK);
    assert_eq!(rd16(&d, INTR_STATUS), INTR_STATUS_INV_DESC);
}

#[test]
fn abort_on_idle_engine_completes_at_once() {
    let d = Device::new("t");
    wr32(&d, CTRL, CTRL_ABORT);
    let c = rd32(&d, CTRL);
    assert_eq!(c & CTRL_ABORT, 0, "ABORT self-clears");
    assert_ne!(c & CTRL_ABORT_DONE, 0);
    assert_ne!(rd16(&d, INTR_STATUS) & INTR_STATUS_ABORT_DONE, 0);
}

#[test]
fn reset_restores_power_on_state() {
    let d = Device::new("t");
    wr32(&d, DESC_RING_COUNT, 16);
    d.config_write(4, &[0x06, 0]);
    d.reset("test");
    assert_eq!(rd32(&d, DESC_RING_COUNT), 0);
    let mut cmd = [0u8; 2];
    d.config_read(4, &mut cmd);
    assert_eq!(cmd, [0, 0]);
    assert_eq!(d.stats.resets.load(Ordering::Relaxed), 1);
}

#[test]
fn warnings_respect_the_log_level() {
    // `--log-level error` silences guest-triggered warnings (the fuzz
    // targets rely on it to stay fast); they do not use up the burst.
    let d = Device::new("t");
    crate::log::set_level(Level::Error);
    d.warn(format_args!("not printed"));
    crate::log::set_level(Level::Info);
    // The silenced warning was not counted: the whole burst is left.
    let mut limit = d.warn_limit.lock().unwrap();
    for _ in 0..RateLimit::BURST {
        assert!(limit.allow());
    }
    assert!(!limit.allow());
}

#[test]
fn bar2_pba_is_read_only() {
    let d = Device::new("t");
    assert!(d.bar2_write(0, &[1, 2, 3, 4]));
    assert!(d.bar2_write(0x800, &[9]));
    let mut b = [0u8; 4];
    d.bar2_read(0, &mut b);
    assert_eq!(b, [1, 2, 3, 4]);
    d.bar2_read(0x800, &mut b);
    assert_eq!(b, [0; 4]);
    assert!(!d.bar2_read(0xFFF, &mut b));
}
