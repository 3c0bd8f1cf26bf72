// SPDX-License-Identifier: GPL-2.0

//! Rust dmaengine driver for PCIe memcpy-offload engines with the
//! PLX/PEX87xx DMA programming model (PCI `10b5:87d0`).
//!
//! Each PCI function is one DMA channel. The driver keeps a descriptor ring
//! in coherent DMA memory, registers a memcpy-capable `dma_device` with the
//! dmaengine core and completes transactions from a threaded interrupt.
//! See `Documentation/driver-api/dmaengine/rust_plx_dma.rst`.

// The abstractions are shared source, written with the visibility they
// would have in `rust/kernel`; this driver uses part of them.
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../rust/kernel/dmaengine/mod.rs"]
mod dmaengine;
#[allow(dead_code, unreachable_pub)]
#[path = "../../../rust/kernel/module_queue.rs"]
mod module_queue;
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../rust/kernel/pci_ext.rs"]
mod pci_ext;
#[path = "../../../rust/kernel/plain_data.rs"]
mod plain_data;
#[path = "../../../rust/kernel/spinlock_bh.rs"]
mod spinlock_bh;

mod channel;
mod hw_desc;
mod regs;
mod stats;

use channel::{ChannelConfig, PlxChannel, Watchdog};
use core::fmt;
use dmaengine::provider::Registration;
use kernel::{
    debugfs,
    device::{Bound, Core},
    devres::Devres,
    dma::DmaMask,
    irq::{IrqReturn, ThreadedHandler, ThreadedIrqReturn},
    pci,
    prelude::*,
    str::CString,
    sync::Arc,
    time::Delta,
};
use module_queue::WithQueues;
use pci_ext::{DevresIrq, ThreadedIrq};

/// PCI device ID of the PEX87xx DMA function, shared with the C `plx_dma`.
const PLX_DMA_DEVICE_ID: u32 = 0x87d0;
/// Ring sizes the driver accepts (descriptors).
const RING_MIN: u32 = 2;
const RING_MAX: u32 = 1 << 16;

module! {
    type: PlxDmaModule,
    name: "rust_plx_dma",
    authors: ["rust-plx-dma developers"],
    description: "Rust dmaengine driver for PLX/PEX87xx-style DMA engines",
    license: "GPL v2",
    params: {
        ring_size: u32 {
            default: 2048,
            description: "Descriptors per channel ring (power of two, 2..65536)",
        },
        watchdog_ms: u32 {
            default: 5000,
            description: "Abort a channel's copies after this long without progress (ms, 20..600000; 0: off)",
        },
        irq_thread: u32 {
            default: 0,
            description: "1: reap completions in the IRQ thread; 0: in softirq context, no context switch",
        },
        irq_coalesce: u32 {
            default: 32,
            description: "Descriptors per completion interrupt at most, and one on each issued batch's last (1..65536; 1: one per descriptor prepared with DMA_PREP_INTERRUPT)",
        },
        poll_us: u32 {
            default: 0,
            description: "Polled mode: no completion interrupts, reap every this many us while copies are in flight (10..100000; 0: off)",
        },
        intx: u32 {
            default: 0,
            description: "1: use the legacy INTx line even where MSI-X or MSI is available (its handler path differs); 0: MSI-X, else MSI, else INTx",
        },
    },
}

/// The module: the PCI driver's registration, made only once the module
/// parameters are valid, so that bad ones fail the load itself, inside the
/// module's own workqueues (drained once the driver is gone).
#[pin_data]
struct PlxDmaModule {
    #[pin]
    _driver: WithQueues<kernel::driver::Registration<pci::Adapter<PlxDmaDriver>>>,
}

impl kernel::InPlaceModule for PlxDmaModule {
    fn init(module: &'static ThisModule) -> impl PinInit<Self, Error> {
        let name = <Self as kernel::ModuleMetadata>::NAME;
        try_pin_init!(Self {
            _driver <- {
                ring_size()?;
                channel_config()?;
                intx()?;
                WithQueues::new(name, || kernel::driver::Registration::new(name, module))
            },
        })
    }
}

/// Validates the `ring_size` module parameter.
fn ring_size() -> Result<u32> {
    let n = module_parameters::ring_size.value();
    if !(RING_MIN..=RING_MAX).contains(&n) || !n.is_power_of_two() {
        pr_err!(
            "ring_size={} is invalid: use a power of two from {} to {}\n",
            n,
            RING_MIN,
            RING_MAX
        );
        return Err(EINVAL);
    }
    Ok(n)
}

/// Watchdog timeouts the driver accepts (ms), besides 0 (off).
const WATCHDOG_MIN_MS: u32 = 20;
const WATCHDOG_MAX_MS: u32 = 600_000;

/// Polling periods the driver accepts (us), besides 0 (interrupts).
const POLL_MIN_US: u32 = 10;
const POLL_MAX_US: u32 = 100_000;

/// Checks that module parameter `name`, of value `value`, lies in
/// `range` or, when `zero` names what 0 means, is 0; otherwise logs what
/// is accepted and fails the load.
fn param_in(
    name: &str,
    value: u32,
    range: core::ops::RangeInclusive<u32>,
    zero: Option<&str>,
) -> Result<u32> {
    if range.contains(&value) || (value == 0 && zero.is_some()) {
        return Ok(value);
    }
    match zero {
        Some(z) => pr_err!(
            "{}={} is invalid: use 0 ({}) or {} to {}\n",
            name,
            value,
            z,
            range.start(),
            range.end()
        ),
        None => pr_err!(
            "{}={} is invalid: use {} to {}\n",
            name,
            value,
            range.start(),
            range.end()
        ),
    }
    Err(EINVAL)
}

/// Validates the `watchdog_ms` module parameter.
fn watchdog_ms() -> Result<u32> {
    param_in(
        "watchdog_ms",
        module_parameters::watchdog_ms.value(),
        WATCHDOG_MIN_MS..=WATCHDOG_MAX_MS,
        Some("off"),
    )
}

/// Validates `intx`: whether to use the INTx line only.
fn intx() -> Result<bool> {
    Ok(param_in("intx", module_parameters::intx.value(), 0..=1, None)? == 1)
}

/// Validates the completion parameters (`irq_thread`, `irq_coalesce`,
/// `poll_us`, `watchdog_ms`) into a channel configuration.
fn channel_config() -> Result<ChannelConfig> {
    let watchdog = watchdog_ms()?;
    let coalesce = param_in(
        "irq_coalesce",
        module_parameters::irq_coalesce.value(),
        1..=RING_MAX,
        None,
    )?;
    let thread = param_in(
        "irq_thread",
        module_parameters::irq_thread.value(),
        0..=1,
        None,
    )?;
    let us = param_in(
        "poll_us",
        module_parameters::poll_us.value(),
        POLL_MIN_US..=POLL_MAX_US,
        Some("interrupts"),
    )?;
    Ok(ChannelConfig {
        coalesce,
        poll: (us != 0).then(|| Delta::from_micros(i64::from(us))),
        watchdog: (watchdog != 0).then(|| Delta::from_millis(i64::from(watchdog))),
        reap_in_thread: thread == 1,
    })
}

/// Interrupt handler of one function: the hard half acknowledges and
/// queues the reap in softirq context; the thread recovers from engine
/// errors (and reaps, with `irq_thread=1`).
struct IrqHandler {
    chan: Arc<PlxChannel>,
}

impl ThreadedHandler for IrqHandler {
    fn handle(&self) -> ThreadedIrqReturn {
        if !self.chan.ack_interrupt() {
            ThreadedIrqReturn::None
        } else if self.chan.needs_thread() {
            ThreadedIrqReturn::WakeThread
        } else {
            PlxChannel::queue_reap(self.chan.as_arc_borrow());
            ThreadedIrqReturn::Handled
        }
    }

    fn handle_threaded(&self) -> IrqReturn {
        self.chan.handle_interrupt();
        IrqReturn::Handled
    }
}

/// Renders the channel's counters for debugfs.
fn show_stats(chan: &Arc<PlxChannel>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let s = chan.counters();
    writeln!(f, "submitted: {}", s.ring.submitted)?;
    writeln!(f, "completed: {}", s.done.completed)?;
    writeln!(f, "failed: {}", s.done.failed)?;
    writeln!(f, "bytes: {}", s.ring.bytes)?;
    writeln!(f, "interrupts: {}", s.interrupts)?;
    writeln!(f, "doorbells: {}", s.ring.doorbells)?;
    writeln!(f, "irq_requests: {}", s.ring.irq_requests)?;
    writeln!(f, "recoveries: {}", s.recoveries)?;
    writeln!(f, "stalls: {}", s.stalls)?;
    writeln!(f, "status_reads: {}", s.status_reads)?;
    writeln!(f, "ring_size: {}", chan.size())?;
    writeln!(f, "ring_occupancy: {}", chan.occupancy())
}

/// Per-function state, alive while the driver is bound.
#[pin_data(PinnedDrop)]
struct PlxDma<'bound> {
    /// Dropped first: no tick runs once teardown starts.
    watchdog: Option<Watchdog>,
    /// Bound until the data is dropped: the driver core drops it before
    /// it releases the device's resources.
    pdev: &'bound pci::Device<Bound>,
    chan: Arc<PlxChannel>,
    // Field order is teardown order: unregister from dmaengine, then free
    // the interrupt. `drop` stops the channel before either.
    dma: Devres<Registration<PlxChannel>>,
    irq: DevresIrq<IrqHandler>,
    /// `/sys/kernel/debug/rust_plx_dma-<pci name>/stats`.
    #[pin]
    stats_file: debugfs::File<Arc<PlxChannel>>,
    debugfs_dir: debugfs::Dir,
}

struct PlxDmaDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <PlxDmaDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_id(pci::Vendor::PLX, PLX_DMA_DEVICE_ID),
        ()
    )]
);

impl pci::Driver for PlxDmaDriver {
    type IdInfo = ();
    type Data<'bound> = PlxDma<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        pin_init::pin_init_scope(move || {
            let size = ring_size()?;
            let config = channel_config()?;
            pdev.enable_device_mem()?;
            pdev.set_master();
            let bits = pci_ext::set_dma_mask(pdev, DmaMask::new::<48>())?;
            let bar = pdev
                .iomap_region_sized::<{ regs::BAR0_SIZE }>(0, c"rust_plx_dma")?
                .into_devres()?;
            let chan = PlxChannel::new(pdev, bar, size, config)?;
            let mut chans = KVec::with_capacity(1, GFP_KERNEL)?;
            chans.push(chan.clone(), GFP_KERNEL)?;
            let irq_chan = chan.clone();
            let types = if intx()? {
                pci::IrqTypes::default().with(pci::IrqType::Intx)
            } else {
                pci::IrqTypes::default()
                    .with(pci::IrqType::MsiX)
                    .with(pci::IrqType::Msi)
                    .with(pci::IrqType::Intx)
            };
            let irq = ThreadedIrq::register(pdev, c"rust_plx_dma", types, move |kind| {
                irq_chan.set_msi(matches!(kind, pci::IrqType::MsiX | pci::IrqType::Msi));
                Ok::<_, Error>(IrqHandler { chan: irq_chan })
            })?;
            let irq_kind = irq.try_access_with(|i| i.kind()).ok_or(ENODEV)?;
            // Inside the initializer below, `pdev` names the field.
            let bound = pdev.as_ref();
            let dir_name = CString::try_from_fmt(fmt!("rust_plx_dma-{}", bound.name()))?;
            let debugfs_dir = debugfs::Dir::new(&dir_name);
            let stats_chan = chan.clone();
            Ok(try_pin_init!(PlxDma {
                watchdog: Watchdog::start(&chan),
                pdev,
                chan: chan.clone(),
                irq,
                dma: {
                    let reg = Registration::new(bound, chans, hw_desc::MAX_COPY)?;
                    if let Some(c) = reg.access(bound)?.channel(0) {
                        dev_info!(
                            pdev,
                            "{}: ring of {} descriptors, {}-bit DMA, {:?} interrupt\n",
                            c.name(),
                            size,
                            bits,
                            irq_kind
                        );
                    }
                    reg
                },
                stats_file <- debugfs_dir.read_callback_file(c"stats", stats_chan, &show_stats),
                debugfs_dir,
            }? Error))
        })
    }
}

#[pinned_drop]
impl PinnedDrop for PlxDma<'_> {
    fn drop(self: Pin<&mut Self>) {
        // Clients may still hold the channel: fail their new requests,
        // stop the engine and abort what is in flight while the ring and
        // the registers are still mapped.
        self.chan.shutdown();
        // Sleeps: reached through the bound device, not under RCU.
        let _ = self
            .irq
            .access_with(self.pdev.as_ref(), |i| i.synchronize());
        // A client told of the end (its copies aborted, its next prep
        // refused) gets a moment to release the channel and unmap its
        // buffers before the device goes; even an idle one may be about to
        // prep.
        if !self.chan.wait_released(Delta::from_secs(1)) {
            dev_info!(
                self.pdev,
                "remove: a client still holds the channel; unregistering anyway\n"
            );
        }
        let s = self.chan.counters();
        dev_info!(
            self.pdev,
            "remove: {} submitted, {} completed, {} failed\n",
            s.ring.submitted,
            s.done.completed,
            s.done.failed
        );
    }
}
