// SPDX-License-Identifier: GPL-2.0

//! Rust dmaengine client sample: copies a buffer through any memcpy channel
//! and checks the copy.
//!
//! Loading the module runs one copy of `size` bytes and fails the load with
//! a clear error if there is no channel, the engine reports a failure or
//! the destination does not match the source.

// Shared source written with `rust/kernel` visibility; the sample uses
// only the client side.
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../rust/kernel/dmaengine/mod.rs"]
mod dmaengine;
#[allow(dead_code, unreachable_pub)]
#[path = "../../rust/kernel/module_queue.rs"]
mod module_queue;

use dmaengine::{
    client::{DmaBuffer, MemcpyChannel},
    TxResult,
};
use kernel::{
    prelude::*,
    time::{Instant, Monotonic},
};

module! {
    type: DmaMemcpySample,
    name: "rust_dma_memcpy",
    authors: ["rust-plx-dma developers"],
    description: "Copies a buffer through a dmaengine memcpy channel",
    license: "GPL",
    params: {
        size: u32 {
            default: 65536,
            description: "Bytes to copy (1..16777216)",
        },
        repeat: u32 {
            default: 0,
            description: "After the check, time this many engine copies and CPU copies",
        },
    },
}

/// Largest copy the sample makes.
const MAX_SIZE: u32 = 16 << 20;
/// Bytes compared per step, so the stack stays small.
const CHUNK: usize = 256;

struct DmaMemcpySample;

/// The byte the source holds at `i`: varies with position, never constant.
fn pattern(i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 8)) as u8
}

/// Times `repeat` synchronous engine copies and `repeat` CPU copies of
/// `src` into `dst` and reports both, in nanoseconds.
fn time_copies(
    chan: &MemcpyChannel,
    dst: &mut DmaBuffer<'_>,
    src: &DmaBuffer<'_>,
    repeat: u32,
) -> Result {
    let t = Instant::<Monotonic>::now();
    for _ in 0..repeat {
        let (result, _) = chan.copy_buffers(dst, src, src.len(), 5000)?;
        if result != TxResult::NoError {
            return Err(EIO);
        }
    }
    let dma_ns = t.elapsed().as_nanos();
    let t = Instant::<Monotonic>::now();
    for _ in 0..repeat {
        dst.cpu_copy_from(src)?;
    }
    let cpu_ns = t.elapsed().as_nanos();
    pr_info!(
        "{}: bench size={} repeat={} dma_ns={} cpu_ns={}\n",
        chan.name(),
        src.len(),
        repeat,
        dma_ns,
        cpu_ns
    );
    Ok(())
}

fn run(size: usize, repeat: u32) -> Result {
    let chan = MemcpyChannel::request().inspect_err(|e| {
        pr_err!("no memcpy channel available ({:?})\n", e);
    })?;
    let mut src = DmaBuffer::new(&chan, size)?;
    let mut dst = DmaBuffer::new(&chan, size)?;
    let mut chunk = [0u8; CHUNK];
    for off in (0..size).step_by(CHUNK) {
        let n = CHUNK.min(size - off);
        for (i, b) in chunk.iter_mut().take(n).enumerate() {
            *b = pattern(off + i);
        }
        src.write(off, &chunk[..n])?;
    }
    let (result, residue) = chan.copy_buffers(&mut dst, &src, size, 5000)?;
    if result != TxResult::NoError {
        pr_err!(
            "{}: copy failed: {:?}, residue {}\n",
            chan.name(),
            result,
            residue
        );
        return Err(EIO);
    }
    for off in (0..size).step_by(CHUNK) {
        let n = CHUNK.min(size - off);
        dst.read(off, &mut chunk[..n])?;
        if let Some(i) = (0..n).find(|&i| chunk[i] != pattern(off + i)) {
            pr_err!(
                "{}: mismatch at byte {}: {:#04x} != {:#04x}\n",
                chan.name(),
                off + i,
                chunk[i],
                pattern(off + i)
            );
            return Err(EIO);
        }
    }
    pr_info!("{}: copied and verified {} bytes\n", chan.name(), size);
    if repeat > 0 {
        time_copies(&chan, &mut dst, &src, repeat)?;
    }
    Ok(())
}

impl kernel::Module for DmaMemcpySample {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let size = module_parameters::size.value();
        if size == 0 || size > MAX_SIZE {
            pr_err!("size={} is invalid: use 1..{}\n", size, MAX_SIZE);
            return Err(EINVAL);
        }
        run(size as usize, module_parameters::repeat.value())?;
        Ok(DmaMemcpySample)
    }
}
