// SPDX-License-Identifier: GPL-2.0

//! BAR0 register map of the PLX/PEX87xx DMA function.
//!
//! Offsets and bits follow the programming model shared with the C
//! `plx_dma` driver; `Documentation/devices/plx-dma-emu.rst` describes
//! their behaviour.

use kernel::io::register;
use pin_init::Zeroable;

/// Size of the register window the driver maps.
pub(crate) const BAR0_SIZE: usize = 0x1000;

register! {
    /// Ring base address, low 32 bits.
    pub(crate) RING_ADDR(u32) @ 0x214 {
        31:0 value;
    }

    /// Ring base address, high 32 bits.
    pub(crate) RING_ADDR_HI(u32) @ 0x218 {
        31:0 value;
    }

    /// Address of the next descriptor the engine fetches (low 32 bits).
    pub(crate) RING_NEXT_ADDR(u32) @ 0x21c {
        31:0 value;
    }

    /// Number of descriptors in the ring.
    pub(crate) RING_COUNT(u32) @ 0x220 {
        31:0 value;
    }

    /// Descriptor prefetch limit.
    pub(crate) PREF_LIMIT(u32) @ 0x234 {
        7:0 value;
    }

    /// Channel control and status.
    pub(crate) CTRL(u32) @ 0x238 {
        /// Request a graceful pause (finish the current descriptor).
        0:0 graceful_pause => bool;
        /// Abort the current descriptor.
        1:1 abort => bool;
        /// Write descriptors back with their status.
        2:2 write_back_en => bool;
        /// Start (or resume) fetching descriptors.
        3:3 start => bool;
        /// Stop at the end of the ring instead of wrapping.
        4:4 ring_stop_mode => bool;
        /// Descriptor mode: 2 = descriptors in host memory (off chip).
        6:5 desc_mode;
        /// Status: the engine met a descriptor without VALID (write 1 to clear).
        8:8 desc_invalid => bool;
        /// Status: graceful pause done (write 1 to clear).
        9:9 graceful_pause_done => bool;
        /// Status: abort done (write 1 to clear).
        10:10 abort_done => bool;
        /// Status: immediate pause done (write 1 to clear).
        12:12 imm_pause_done => bool;
        /// Status: the engine is processing descriptors.
        30:30 in_progress => bool;
    }

    /// Interrupt enables.
    pub(crate) INTR_CTRL(u16) @ 0x23c {
        0:0 error_en => bool;
        1:1 inv_desc_en => bool;
        3:3 abort_done_en => bool;
        4:4 pause_done_en => bool;
        5:5 imm_pause_done_en => bool;
    }

    /// Interrupt status (write 1 to clear).
    pub(crate) INTR_STATUS(u16) @ 0x23e {
        0:0 error => bool;
        1:1 inv_desc => bool;
        2:2 desc_done => bool;
        3:3 abort_done => bool;
    }
}

impl CTRL {
    /// Clears every write-1-to-clear status bit of the channel.
    pub(crate) fn clear_status() -> Self {
        Self::zeroed()
            .with_desc_invalid(true)
            .with_graceful_pause_done(true)
            .with_abort_done(true)
            .with_imm_pause_done(true)
    }

    /// Starts the engine on the ring in host memory, with write-back.
    pub(crate) fn start_ring() -> Self {
        Self::clear_status()
            .with_write_back_en(true)
            .with_const_desc_mode::<2>()
            .with_start(true)
    }
}
