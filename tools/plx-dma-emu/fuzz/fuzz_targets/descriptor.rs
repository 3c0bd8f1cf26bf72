// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Fuzz target: the descriptor parser and the ring walker that acts on it.
//!
//! Input: one control byte (write-back, ring-stop mode, prefetch limit,
//! interrupt enables), then up to 64 descriptors of 16 bytes each. Every
//! descriptor is decoded on its own and checked against the layout, then
//! the whole ring is handed to the engine, which parses the same bytes from
//! the crate's in-process `VecMemory` and executes them. The write-back
//! words it leaves behind are checked against the descriptor format.

#![no_main]

use libfuzzer_sys::fuzz_target;
use plx_dma_emu::config_space::CMD_MASTER;
use plx_dma_emu::desc::*;
use plx_dma_emu::device::Device;
use plx_dma_emu::engine::run_until_idle;
use plx_dma_emu::log::{set_level, Level};
use plx_dma_emu::memory::{GuestMemory, VecMemory};
use plx_dma_emu::regs::*;

/// IOVA of the ring (64 slots at most).
const RING: u64 = 0x1000;
/// IOVA and size of the data window, filled with a pattern.
const DATA: u64 = 0x2000;
const DATA_LEN: usize = 0x4000;

fn rd32(d: &Device, off: u64) -> u32 {
    let mut b = [0u8; 4];
    assert!(d.bar0_read(off, &mut b));
    u32::from_le_bytes(b)
}

/// Decoding alone: fields land where `struct plx_dma_hw_std_desc` puts
/// them, and `check` agrees with the flags.
fn check_decode(raw: &[u8; 16]) -> Descriptor {
    let d = Descriptor::decode(raw);
    assert!(d.src < ADDR_LIMIT && d.dst < ADDR_LIMIT);
    assert_eq!(d.size(), d.flags_and_size & MAX_SIZE);
    let mut again = Descriptor::encode(d.src, d.dst, d.size(), d.valid(), d.int_when_done());
    // encode() never sets reserved bits; put back the input's.
    again[3] |= raw[3] & (FLAG_RESERVED >> 24) as u8;
    assert_eq!(&again, raw, "decode/encode round trip");
    let expect = if d.flags_and_size & FLAG_RESERVED != 0 {
        Err(Malformed::ReservedBits)
    } else if d.size() == 0 {
        Err(Malformed::ZeroSize)
    } else {
        Ok(())
    };
    assert_eq!(d.check(), expect);
    d
}

fuzz_target!(|data: &[u8]| {
    set_level(Level::Error);
    let Some((&ctl, descs)) = data.split_first() else {
        return;
    };
    let count = (descs.len() / 16).clamp(1, 64);
    let dev = Device::new("fuzz");
    dev.config_write(4, &CMD_MASTER.to_le_bytes());
    let mem = VecMemory::new();
    mem.add_region(RING, count * 16);
    mem.add_region(DATA, DATA_LEN);
    let pattern: Vec<u8> = (0..DATA_LEN).map(|i| (i * 7 + 3) as u8).collect();
    mem.write(DATA, &pattern).unwrap();

    let mut parsed = Vec::with_capacity(count);
    for (i, chunk) in descs.chunks_exact(16).take(count).enumerate() {
        let raw: &[u8; 16] = chunk.try_into().unwrap();
        parsed.push(check_decode(raw));
        mem.write(RING + i as u64 * 16, raw).unwrap();
    }

    // Program the channel as plx_dma.c does, with the control byte's
    // choices, and run the ring synchronously.
    let write_back = ctl & 1 != 0;
    let mut start = CTRL_START_VAL & !CTRL_WRITE_BACK_EN;
    if write_back {
        start |= CTRL_WRITE_BACK_EN;
    }
    if ctl & 2 != 0 {
        start |= CTRL_RING_STOP_MODE;
    }
    let pref = u32::from((ctl >> 2) & 0x3F);
    for (reg, v) in [
        (CTRL, CTRL_RESET_VAL),
        (DESC_RING_ADDR, RING as u32),
        (DESC_RING_ADDR_HI, 0),
        (DESC_RING_NEXT_ADDR, RING as u32),
        (DESC_RING_COUNT, count as u32),
        (PREF_LIMIT, pref),
        (INTR_CTRL, u32::from(INTR_CTRL_MASK)),
    ] {
        assert!(dev.bar0_write(reg, &v.to_le_bytes()));
    }
    assert!(dev.bar0_write(CTRL, &start.to_le_bytes()));
    // One lap of the ring plus one burst: without write-back, VALID
    // descriptors stay VALID and the engine would go round forever.
    let burst = pref.clamp(1, PREF_LIMIT_MAX) as usize;
    run_until_idle(&dev, &mem, count.div_ceil(burst) + 1);

    let ctrl = rd32(&dev, CTRL);
    if ctrl & CTRL_IN_PROGRESS != 0 {
        assert!(ctrl & CTRL_START != 0);
    }
    let last_size = rd32(&dev, DESC_RING_LAST_SIZE);
    assert_eq!(last_size & !SIZE_MASK, 0, "LAST_SIZE beyond the size field");
    // A descriptor may copy onto the ring itself; then the slots no longer
    // hold what the driver wrote and there is nothing to compare with.
    let ring_end = RING + count as u64 * 16;
    let touches_ring = parsed
        .iter()
        .any(|d| d.valid() && d.dst < ring_end && d.dst + u64::from(d.size()) > RING);
    if !write_back || touches_ring {
        return;
    }
    // Every slot either still holds what the driver wrote, or holds a
    // write-back word for it.
    for (i, d) in parsed.iter().enumerate() {
        let mut b = [0u8; 16];
        mem.read(RING + i as u64 * 16, &mut b).unwrap();
        let word = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if word == d.flags_and_size {
            continue;
        }
        // (INT_WHEN_DONE shares bit 30 with the SUCCESS status.)
        assert_eq!(word & FLAG_VALID, 0, "write-back keeps VALID");
        let status = word & (WB_SUCCESS | WB_RD_FAIL | WB_WR_FAIL);
        assert!(status.count_ones() <= 1, "several status bits: {word:#x}");
        let transferred = word & SIZE_MASK;
        if d.valid() && d.check().is_ok() {
            assert!(transferred <= d.size(), "more bytes than described");
            if status == WB_SUCCESS {
                assert_eq!(transferred, d.size());
            }
        } else if d.valid() {
            assert_eq!(word, write_back_word(Completion::Invalid, 0));
        }
    }
});
