// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! plx-dma-emu: a PCIe memcpy DMA engine with the programming model of
//! Linux's `drivers/dma/plx_dma.c`, served to QEMU as a vfio-user device.
//!
//! The register-level behaviour is specified in
//! `Documentation/devices/plx-dma-emu.rst`; this crate is the reference
//! implementation of that page. Module map, one idea each:
//!
//! * [`regs`], [`desc`]: the register map and the descriptor format;
//! * [`device`]: one channel's registers, config space and interrupts;
//! * [`engine`]: the ring walker that copies, writes back and interrupts;
//!   [`worker`]: the thread it runs on, one per connection;
//! * [`memory`], [`dma_client`], [`dma_map`]: how the engine reaches memory
//!   (DMA messages through the guest IOMMU, the mapped fast path, tests);
//! * [`irq`], [`config_space`]: interrupt eventfds, PCI config space;
//! * [`protocol`], [`conn`], [`server`]: vfio-user messages, framing and
//!   the per-connection server;
//! * [`faults`], [`stats`], [`control`]: fault injection, counters and the
//!   control socket;
//! * [`bench`]: the host copy benchmark; [`sys`]: the only `unsafe` code.

#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod log;

pub mod bench;
pub mod bench_engines;
pub mod config_space;
pub mod conn;
pub mod control;
pub mod desc;
pub mod device;
pub mod dma_client;
pub mod dma_map;
pub mod engine;
pub mod faults;
pub mod irq;
pub mod memory;
pub mod protocol;
pub mod regs;
pub mod server;
pub mod stats;
pub mod sys;
pub mod worker;
