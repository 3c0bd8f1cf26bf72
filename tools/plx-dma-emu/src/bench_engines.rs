// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! `plx-dma-emu bench-engines`: how much two engines copying at once get
//! from this host, against one.
//!
//! Two channels in a guest cannot scale better than two engine threads do
//! with nothing else running, so the bench prints this ceiling beside the
//! guest's two-channel figures. Each engine runs the real engine code over
//! mapped memory of its own, the way the deep-queue client lays out its
//! buffers: one source and up to 16 MiB of destinations used in turn, so
//! that the copies reach memory rather than stay in the caches.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Barrier;
use std::time::{Duration, Instant};

use crate::bench::{mapped_file, programmed_device, run_batch, BATCH, RING, SRC_IOVA};
use crate::dma_map::MappedMemory;

/// Destination bytes per engine, at most (the deep-queue client's budget).
const DST_BUDGET: u64 = 16 << 20;

/// Aggregate throughput of one and of two engines at one size, in GB/s.
#[derive(Clone, Debug)]
pub struct Scaling {
    /// Bytes per copy.
    pub size: usize,
    /// One engine alone.
    pub one: f64,
    /// Two engines at once, summed.
    pub two: f64,
}

/// One engine's memory: a ring, a source and `ndst` destinations.
struct Layout {
    mem: MappedMemory,
    dst_base: u64,
    stride: u64,
    ndst: u64,
}

fn layout(size: usize) -> std::io::Result<Layout> {
    let stride = (size as u64).next_multiple_of(4096);
    let ndst = (DST_BUDGET / stride).clamp(1, u64::from(RING));
    let dst_base = SRC_IOVA + stride.next_multiple_of(1 << 20);
    Ok(Layout {
        mem: mapped_file(dst_base + ndst * stride, None)?,
        dst_base,
        stride,
        ndst,
    })
}

/// Runs one engine over `l` until `stop`, after `start`; returns the bytes
/// copied and the time it took.
fn run(l: &Layout, size: usize, start: &Barrier, stop: &AtomicBool) -> (u64, Duration) {
    let dev = programmed_device();
    let (mut slot, mut next_dst, mut bytes) = (0u32, 0u64, 0u64);
    let mut dst = || {
        let d = l.dst_base + next_dst * l.stride;
        next_dst = (next_dst + 1) % l.ndst;
        d
    };
    // Warm-up: every destination page is touched (allocated) once.
    for _ in 0..l.ndst.div_ceil(u64::from(BATCH)) {
        run_batch(&dev, &l.mem, &mut slot, size, &mut dst);
    }
    start.wait();
    let t = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        run_batch(&dev, &l.mem, &mut slot, size, &mut dst);
        bytes += u64::from(BATCH) * size as u64;
    }
    (bytes, t.elapsed())
}

/// Aggregate GB/s of `engines` engines copying `size` bytes at once for
/// about `budget`.
pub fn engines_gbs(size: usize, engines: usize, budget: Duration) -> std::io::Result<f64> {
    let layouts = (0..engines)
        .map(|_| layout(size))
        .collect::<std::io::Result<Vec<_>>>()?;
    let start = Barrier::new(engines + 1);
    let stop = AtomicBool::new(false);
    let results = std::thread::scope(|s| {
        let threads: Vec<_> = layouts
            .iter()
            .map(|l| s.spawn(|| run(l, size, &start, &stop)))
            .collect();
        start.wait();
        std::thread::sleep(budget);
        stop.store(true, Ordering::Relaxed);
        threads
            .into_iter()
            .map(|t| t.join().expect("an engine thread panicked"))
            .collect::<Vec<_>>()
    });
    Ok(results
        .iter()
        .map(|&(bytes, t)| bytes as f64 / t.as_secs_f64() / 1e9)
        .sum())
}

/// One and two engines at each size.
pub fn run_all(sizes: &[usize], budget: Duration) -> std::io::Result<Vec<Scaling>> {
    sizes
        .iter()
        .map(|&size| {
            Ok(Scaling {
                size,
                one: engines_gbs(size, 1, budget)?,
                two: engines_gbs(size, 2, budget)?,
            })
        })
        .collect()
}

/// One line per size: `engines size=S one=GB/s two=GB/s ratio=R`.
pub fn lines(results: &[Scaling]) -> String {
    results.iter().fold(String::new(), |mut out, r| {
        // Writing into a `String` cannot fail.
        let _ = writeln!(
            out,
            "engines size={} one={:.2} two={:.2} ratio={:.2}",
            r.size,
            r.one,
            r.two,
            r.two / r.one
        );
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_engines_copy_and_are_counted() {
        let r = run_all(&[65536], Duration::from_millis(20)).unwrap();
        assert_eq!(r.len(), 1);
        assert!(r[0].one > 0.0 && r[0].two > 0.0, "{r:?}");
        assert!(lines(&r).starts_with("engines size=65536 one="));
    }
}
