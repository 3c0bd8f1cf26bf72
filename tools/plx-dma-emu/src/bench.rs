// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! `plx-dma-emu bench-host`: how fast the emulator copies on this host,
//! compared with a plain memcpy of the same size.
//!
//! Two memory paths are measured with the real engine code (descriptor
//! fetch, copy, write-back, status update), driven synchronously so the
//! numbers do not include thread wake-ups:
//!
//! * `mapped`: guest memory is a shared memfd mapped through the DMA_MAP
//!   table, exactly as with `--mapped` (the copy is a direct memmove
//!   between two mapped windows);
//! * `paged`: the same memfd, but mapped one 4 KiB window per page, the
//!   way QEMU's vIOMMU notifier sends a guest's DMA mappings (one DMA_MAP
//!   per page-table entry);
//! * `in-memory`: the [`VecMemory`] test backend (bounce buffer, lock per
//!   access), an upper bound for what a message-free path costs.
//!
//! The DMA-message path needs a real client and is measured in a guest.

use std::hint::black_box;
use std::os::fd::OwnedFd;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use nix::sys::memfd::{memfd_create, MFdFlags};
use vfio_bindings::bindings::vfio::{VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE};

use crate::config_space::CMD_MASTER;
use crate::desc::{Descriptor, WB_SUCCESS};
use crate::device::Device;
use crate::dma_map::{DmaMapTable, MappedMemory};
use crate::engine::run_until_idle;
use crate::memory::{GuestMemory, VecMemory};
use crate::regs::*;

/// Descriptors in the benchmark ring.
pub(crate) const RING: u32 = 256;
/// Descriptors submitted per doorbell.
pub(crate) const BATCH: u32 = 64;
const RING_IOVA: u64 = 0x1_0000;
pub(crate) const SRC_IOVA: u64 = 0x100_0000;
/// The page size of the vIOMMU's mappings.
const PAGE: u64 = 4096;

/// Throughput of one size, in GB/s (10^9 bytes per second).
#[derive(Clone, Debug)]
pub struct BenchResult {
    /// Transfer size per copy / descriptor.
    pub size: usize,
    /// Plain `copy_from_slice`.
    pub memcpy: f64,
    /// Engine over the mapped path.
    pub mapped: f64,
    /// Engine over in-process memory.
    pub in_memory: f64,
    /// Descriptors per second on the mapped path.
    pub mapped_desc_per_s: f64,
    /// Engine over the mapped path, the memory mapped page by page.
    pub paged: f64,
}

fn gbs(bytes: u64, t: Duration) -> f64 {
    bytes as f64 / t.as_secs_f64() / 1e9
}

/// Measures plain memcpy of `size` bytes for about `budget`.
pub fn memcpy_gbs(size: usize, budget: Duration) -> f64 {
    let src = vec![0x5Au8; size];
    let mut dst = vec![0u8; size];
    // Warm up (page faults, caches).
    dst.copy_from_slice(&src);
    let start = Instant::now();
    let mut bytes = 0u64;
    let mut iters = 0u64;
    while iters % 64 != 0 || start.elapsed() < budget {
        dst.copy_from_slice(black_box(&src));
        black_box(&mut dst);
        bytes += size as u64;
        iters += 1;
    }
    gbs(bytes, start.elapsed())
}

fn dst_iova(size: usize) -> u64 {
    SRC_IOVA + (size as u64).next_multiple_of(1 << 20)
}

/// A device programmed like plx_dma.c does in alloc_chan_resources and
/// issue_pending, with the ring at [`RING_IOVA`].
pub(crate) fn programmed_device() -> Arc<Device> {
    let d = Device::new("bench");
    d.config_write(4, &CMD_MASTER.to_le_bytes());
    let w = |off: u64, v: u32| {
        d.bar0_write(off, &v.to_le_bytes());
    };
    w(CTRL, CTRL_RESET_VAL);
    w(DESC_RING_ADDR, RING_IOVA as u32);
    w(DESC_RING_ADDR_HI, 0);
    w(DESC_RING_NEXT_ADDR, RING_IOVA as u32);
    w(DESC_RING_COUNT, RING);
    w(PREF_LIMIT, PREF_LIMIT_PREF_FOUR);
    d
}

/// Queues [`BATCH`] copies of `size` bytes from [`SRC_IOVA`] to the
/// destinations `dst` gives, from ring slot `*slot` on, rings the doorbell
/// and runs the engine until it is idle; returns how long the engine took.
/// The last copy must be written back as a success, or the figures would
/// measure a failure path.
pub(crate) fn run_batch(
    dev: &Device,
    mem: &dyn GuestMemory,
    slot: &mut u32,
    size: usize,
    mut dst: impl FnMut() -> u64,
) -> Duration {
    for _ in 0..BATCH {
        let desc = Descriptor::encode(SRC_IOVA, dst(), size as u32, true, true);
        mem.write(RING_IOVA + u64::from(*slot) * DESC_SIZE, &desc)
            .expect("benchmark ring is mapped");
        *slot = (*slot + 1) % RING;
    }
    let t = Instant::now();
    dev.bar0_write(CTRL, &(CTRL_START_VAL as u16).to_le_bytes());
    run_until_idle(dev, mem, 10_000);
    let dt = t.elapsed();
    let last = RING_IOVA + u64::from((*slot + RING - 1) % RING) * DESC_SIZE;
    let mut wb = [0u8; 4];
    mem.read(last, &mut wb).expect("benchmark ring is mapped");
    assert_eq!(
        u32::from_le_bytes(wb),
        WB_SUCCESS | size as u32,
        "benchmark copy failed"
    );
    dt
}

/// Runs the engine over `mem` for about `budget`; returns (GB/s, desc/s).
pub fn engine_gbs(mem: &dyn GuestMemory, size: usize, budget: Duration) -> (f64, f64) {
    let dev = programmed_device();
    let dst = dst_iova(size);
    let mut slot = 0u32;
    // Warm-up round, not counted.
    run_batch(&dev, mem, &mut slot, size, || dst);
    let mut total = Duration::ZERO;
    let mut descs = 0u64;
    while total < budget {
        total += run_batch(&dev, mem, &mut slot, size, || dst);
        descs += BATCH as u64;
    }
    (
        gbs(descs * size as u64, total),
        descs as f64 / total.as_secs_f64(),
    )
}

/// A memfd sealed like QEMU's guest RAM (the mapped path maps nothing
/// else).
fn memfd(len: u64) -> std::io::Result<OwnedFd> {
    use nix::fcntl::{fcntl, FcntlArg, SealFlag};
    let fd = memfd_create(
        "plx-bench",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )?;
    let f = std::fs::File::from(fd);
    f.set_len(len)?;
    let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
    fcntl(&f, FcntlArg::F_ADD_SEALS(seals))?;
    Ok(f.into())
}

/// Builds the mapped path over one memfd that holds ring, source and
/// destination, mapped 1:1 like guest RAM without a vIOMMU (`window` =
/// the whole file) or, as a vIOMMU maps it, in `window`-byte DMA_MAPs.
pub fn mapped_memory(size: usize, window: Option<u64>) -> std::io::Result<MappedMemory> {
    mapped_file(
        dst_iova(size) + (size as u64).next_multiple_of(4096),
        window,
    )
}

/// The mapped path over a fresh memfd of `len` bytes, mapped from IOVA 0
/// in one window or in `window`-byte DMA_MAPs.
pub(crate) fn mapped_file(len: u64, window: Option<u64>) -> std::io::Result<MappedMemory> {
    let fd = memfd(len)?;
    let step = window.unwrap_or(len);
    let mut t = DmaMapTable::new();
    for at in (0..len).step_by(step as usize) {
        t.map(
            at,
            step.min(len - at),
            at,
            VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE,
            Some(fd.try_clone()?),
            true,
        )
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    }
    let dev_stats = Arc::new(crate::stats::Stats::default());
    Ok(MappedMemory::new(
        Arc::new(RwLock::new(t)),
        Arc::new(VecMemory::new()),
        dev_stats,
    ))
}

/// In-process memory with the same layout.
pub fn vec_memory(size: usize) -> VecMemory {
    let m = VecMemory::new();
    m.add_region(RING_IOVA, (RING as u64 * DESC_SIZE) as usize);
    m.add_region(SRC_IOVA, size);
    m.add_region(dst_iova(size), size);
    m
}

/// Runs the whole benchmark.
pub fn run(sizes: &[usize], budget: Duration) -> std::io::Result<Vec<BenchResult>> {
    let mut out = Vec::new();
    for &size in sizes {
        assert!(size > 0 && size <= crate::desc::MAX_SIZE as usize);
        let memcpy = memcpy_gbs(size, budget);
        let mm = mapped_memory(size, None)?;
        let (mapped, mapped_desc_per_s) = engine_gbs(&mm, size, budget);
        let pm = mapped_memory(size, Some(PAGE))?;
        let (paged, _) = engine_gbs(&pm, size, budget);
        let vm = vec_memory(size);
        let (in_memory, _) = engine_gbs(&vm, size, budget);
        out.push(BenchResult {
            size,
            memcpy,
            mapped,
            in_memory,
            mapped_desc_per_s,
            paged,
        });
    }
    Ok(out)
}

/// Formats results as a table.
pub fn table(results: &[BenchResult]) -> String {
    let mut s = String::from(
        "size       memcpy GB/s  mapped GB/s  (% of memcpy)  mapped desc/s  paged GB/s  in-memory GB/s\n",
    );
    for r in results {
        let size = if r.size >= 1 << 20 {
            format!("{} MiB", r.size >> 20)
        } else {
            format!("{} KiB", r.size >> 10)
        };
        s.push_str(&format!(
            "{size:<10} {:>11.2}  {:>11.2}  {:>12.0}%  {:>13.0}  {:>10.2}  {:>14.2}\n",
            r.memcpy,
            r.mapped,
            100.0 * r.mapped / r.memcpy,
            r.mapped_desc_per_s,
            r.paged,
            r.in_memory
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bench_paths_copy_correctly() {
        // Tiny budget: this checks the harness, not the speed.
        let r = run(&[4096], Duration::from_millis(5)).unwrap();
        assert_eq!(r.len(), 1);
        assert!(r[0].mapped > 0.0 && r[0].paged > 0.0 && r[0].in_memory > 0.0 && r[0].memcpy > 0.0);
        assert!(table(&r).contains("4 KiB"));
    }
}
