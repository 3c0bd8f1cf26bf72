// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Run-time counters of one channel.
//!
//! Plain relaxed atomics: the counters are read by the control socket while
//! the worker and the socket thread update them, and no decision depends on
//! them, so no ordering is needed.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Counters of one channel; see the spec page for their meaning.
        #[derive(Debug, Default)]
        pub struct Stats {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        impl Stats {
            /// All counters as `(name, value)` pairs, in a stable order.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(Ordering::Relaxed)),)*]
            }

            /// One line with every counter, for the log at disconnect and
            /// exit: `plx-dma-emu stats CHANNEL path=PATH at=EVENT`
            /// followed by `key=value` pairs in [`Stats::snapshot`] order.
            pub fn summary_line(&self, channel: &str, path: &str, event: &str) -> String {
                let mut line = format!("plx-dma-emu stats {channel} path={path} at={event}");
                $(
                    line.push_str(concat!(" ", stringify!($name), "="));
                    line.push_str(&self.$name.load(Ordering::Relaxed).to_string());
                )*
                line
            }

            /// Sets every counter to zero.
            pub fn reset(&self) {
                $(self.$name.store(0, Ordering::Relaxed);)*
            }
        }
    };
}

counters! {
    /// Descriptors completed with any status (written back or not).
    descriptors,
    /// Descriptors completed with SUCCESS.
    desc_success,
    /// Payload bytes transferred (sum of per-descriptor transferred counts).
    bytes,
    /// All error events: the five kinds below added up.
    errors,
    /// Descriptors that ended with RD_FAIL.
    read_errors,
    /// Descriptors that ended with WR_FAIL.
    write_errors,
    /// Malformed (or fault-injected invalid) descriptors.
    invalid_descs,
    /// Descriptor fetches that failed (engine stopped with ERROR).
    fetch_errors,
    /// Write-backs that failed (engine stopped with ERROR).
    writeback_errors,
    /// Interrupt signals delivered to the client (eventfd writes).
    interrupts,
    /// Interrupts suppressed by the drop-irq fault.
    irqs_dropped,
    /// Extra interrupts sent by the dup-irq fault.
    irqs_duplicated,
    /// Faults fired from the fault-injection plan.
    faults_injected,
    /// Descriptors delayed by the stall fault.
    stalls,
    /// DMA_READ/DMA_WRITE messages sent to the client.
    dma_messages,
    /// DMA messages the client answered with an error (guest IOMMU faults).
    dma_client_errors,
    /// Accesses that missed the DMA_MAP table on the mapped path (each one
    /// is then carried out with DMA messages).
    mapped_misses,
    /// VFIO_USER_DMA_MAP messages received, refused ones included.
    dma_maps,
    /// DMA_MAPs that continued an adjacent window (same file, next
    /// offset, same rights) and were kept in it: see `DmaMapTable::map`.
    dma_maps_merged,
    /// VFIO_USER_DMA_UNMAP messages received, refused ones included.
    dma_unmaps,
    /// Payload bytes copied directly between mapped DMA windows.
    bytes_mapped,
    /// Payload bytes copied with DMA messages on at least one side.
    bytes_messages,
    /// BAR register reads.
    reg_reads,
    /// BAR register writes.
    reg_writes,
    /// Engine starts (START while stopped).
    starts,
    /// Completed graceful pauses.
    pauses,
    /// Completed aborts.
    aborts,
    /// Device resets (client DEVICE_RESET or disconnect).
    resets,
    /// Client connections accepted.
    connections,
    /// Nanoseconds the engine thread spent in bursts (fetching, copying,
    /// writing back, signalling): over a run's wall time, the engine's
    /// share of it; over its descriptors, its host cost per descriptor.
    engine_busy_ns,
    /// Doorbells (and starts) that found the engine idle and woke it.
    engine_wakeups,
    /// Nanoseconds from each of those doorbells' arrival to the engine's
    /// next fetch, summed: the emulator's own part of a doorbell's way.
    wakeup_ns,
}

/// Adds `n` to a counter.
pub fn add(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// Adds one to a counter.
pub fn inc(c: &AtomicU64) {
    add(c, 1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_and_reset() {
        let s = Stats::default();
        inc(&s.descriptors);
        add(&s.bytes, 4096);
        let snap = s.snapshot();
        assert_eq!(snap[0], ("descriptors", 1));
        assert!(snap.contains(&("bytes", 4096)));
        s.reset();
        assert!(s.snapshot().iter().all(|(_, v)| *v == 0));
    }

    #[test]
    fn summary_line_has_every_counter() {
        let s = Stats::default();
        add(&s.bytes_mapped, 8192);
        inc(&s.mapped_misses);
        let line = s.summary_line("ch3", "mapped", "exit");
        assert!(line.starts_with("plx-dma-emu stats ch3 path=mapped at=exit descriptors=0 "));
        let words: Vec<&str> = line.split(' ').skip(5).collect();
        assert_eq!(words.len(), s.snapshot().len());
        for ((k, v), w) in s.snapshot().iter().zip(&words) {
            assert_eq!(*w, format!("{k}={v}"));
        }
        assert!(words.contains(&"bytes_mapped=8192"));
        assert!(words.contains(&"mapped_misses=1"));
    }
}
