// SPDX-License-Identifier: GPL-2.0

//! `plx_rdma`: an RDMA device whose data moves on a DMA engine.
//!
//! A soft RDMA device in the manner of rxe: it registers an `ib_device`
//! with ib_core, so uverbs, libibverbs and the standard tools work on it,
//! and implements protection domains, memory regions with keys,
//! completion queues and reliable-connected queue pairs. An RC QP whose
//! peer is on another host talks RoCEv2 over UDP port 4791 as rxe does
//! (`net`, `rc`); between QPs of this port, requests are executed on a
//! loopback fabric (`exec`), and the bytes are moved by a dmaengine memcpy
//! channel (`rust_plx_dma`'s):
//! memory regions are pinned and mapped for the engine once, at
//! registration, and a work request is only descriptors. Without a
//! channel the CPU copies, and the debugfs counters say so.
//!
//! See `Documentation/infiniband/plx_rdma.rst`.

// The abstractions are shared source, written with the visibility they
// would have in `rust/kernel`; this module uses part of them.
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../../rust/kernel/dmaengine/mod.rs"]
mod dmaengine;
#[allow(dead_code, unreachable_pub)]
#[path = "../../../../rust/kernel/module_queue.rs"]
mod module_queue;
#[expect(unreachable_pub)]
#[path = "../../../../rust/kernel/net_ns.rs"]
mod net_ns;
#[path = "../../../../rust/kernel/plain_data.rs"]
mod plain_data;
#[path = "../../../../rust/kernel/random.rs"]
mod random;
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../../rust/kernel/rdma/mod.rs"]
mod rdma;
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../../rust/kernel/skb_dma.rs"]
mod skb_dma;
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../../rust/kernel/udp_tunnel.rs"]
mod udp_tunnel;
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../../rust/kernel/user_pages.rs"]
mod user_pages;

mod atomic;
mod cq;
mod cq_ring;
mod exec;
mod landing;
mod links;
mod mcast;
mod mover;
mod mr;
mod net;
mod pd;
mod qp;
mod rc;
mod replies;
mod send_burst;
mod srq;
mod stats;
mod ud;
mod wire;
mod work_list;
mod wq;

use core::fmt;
use cq::Cq;
use dmaengine::client::{MemcpyChannel, RemovalSink, RemovalWatch, WatchScope};
use kernel::{
    debugfs, new_mutex,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, ArcBorrow, Mutex,
    },
};
use links::Links;
use module_queue::WithQueues;
use mover::{Engine, Mover};
use mr::{Mr, MrTable};
use net::{Port, PortHub, WireStats};
use net_ns::NetNs;
use pd::Pd;
use qp::Qp;
use rdma::{
    cq::CqNotifier,
    device::{Driver, Registration},
    link::LinkType,
    srq::SrqNotifier,
    types::{Caps, QpAttr, QpInit, RecvWr, SendWr, SrqAttr, Wc},
    user_ring::UserData,
};
use srq::Srq;
use stats::Stats;
use user_pages::GateGuard;

module! {
    type: PlxRdmaModule,
    name: "plx_rdma",
    authors: ["rust-plx-dma developers"],
    description: "RDMA device whose data moves on a dmaengine memcpy channel",
    license: "GPL v2",
    // `rdma link add ... type plx` loads the module.
    alias: ["rdma-link-plx"],
    params: {
        channel: bool {
            default: true,
            description: "Move data with a dmaengine memcpy channel (false: the CPU copies)",
        },
        ifindex: i32 {
            default: 0,
            description: "Interface index of a netdev to create plx_rdma0 on at load, whose addresses are its port's RoCE GIDs (0: none; `rdma link add NAME type plx netdev DEV` creates devices too)",
        },
        wire_local: bool {
            default: false,
            description: "RC QPs reach peers on this port's own GIDs over RoCEv2 (UDP 4791) too, not only remote ones",
        },
        copy_timeout_ms: u32 {
            default: 10000,
            description: "Base of an engine copy's timeout (plus 1 ms per 64 KiB); past it the channel is stopped only if it ended no descriptor meanwhile",
        },
        wire_engine_min: u32 {
            default: 256,
            description: "Received RoCEv2 payloads from this many bytes on are placed by the engine, shorter ones by the CPU (make bench measures both)",
        },
        copy_engine_min: u32 {
            default: 16384,
            description: "Copies between two memory regions (the loopback fabric) from this many bytes on are made by the engine, shorter ones by the CPU (make bench measures both)",
        },
    },
}

/// Memory regions per device.
const MAX_MR: u32 = 4096;
/// QPs per device.
const MAX_QP: u32 = 256;
/// The first RC QP number (0 and 1 are the special QPs of IB).
const FIRST_QPN: u32 = 16;
/// The GSI QP's number.
const GSI_QPN: u32 = 1;
/// CQs and PDs per device.
const MAX_CQ: u32 = 1024;
const MAX_PD: u32 = 1024;
/// Shared receive queues per device.
const MAX_SRQ: u32 = 256;
/// Entries per CQ.
const MAX_CQE: u32 = 65536;

/// The device's shared state: what every QP reaches.
#[pin_data]
pub(crate) struct Device {
    #[pin]
    pub(crate) mrs: MrTable,
    /// The RC QPs by number; only process context looks them up.
    #[pin]
    qps: Mutex<KVec<Option<Arc<Qp>>>>,
    /// QP1, the MAD layer's.
    #[pin]
    gsi: Mutex<Option<Arc<Qp>>>,
    pub(crate) mover: Mover,
    pub(crate) stats: Stats,
    pub(crate) wire_stats: WireStats,
    /// The module's UDP ports, one per namespace, shared with its other
    /// devices.
    hub: Arc<PortHub>,
    /// The namespace of the port's netdev: held, as a socket holds its
    /// namespace, until the device goes.
    pub(crate) net: NetNs,
    /// The port's netdev, in `net`.
    pub(crate) ifindex: i32,
    /// Peers on the port's own GIDs are reached over the wire too.
    pub(crate) wire_local: bool,
    pds: Atomic<u32>,
    cqs: Atomic<u32>,
    srqs: Atomic<u32>,
    /// Where the search for a free QP number starts (under `qps`).
    next_qp: Atomic<u32>,
    /// Held while an atomic operation reads and writes its target, so
    /// that the device's atomics are atomic against each other.
    #[pin]
    pub(crate) atomics: Mutex<()>,
    /// The multicast groups its UD QPs are attached to.
    #[pin]
    pub(crate) mcast: mcast::Groups,
}

impl Device {
    fn new(
        mover: Mover,
        net: NetNs,
        ifindex: i32,
        wire_local: bool,
        hub: Arc<PortHub>,
    ) -> Result<Arc<Self>> {
        let mut qps = KVec::with_capacity(MAX_QP as usize, GFP_KERNEL)?;
        for _ in 0..MAX_QP {
            qps.push(None, GFP_KERNEL)?;
        }
        Arc::pin_init(
            try_pin_init!(Self {
                mrs <- MrTable::new(MAX_MR)?,
                qps <- new_mutex!(qps, "plx_rdma_qps"),
                gsi <- new_mutex!(None, "plx_rdma_gsi"),
                mover,
                stats: Stats::new(),
                wire_stats: WireStats::new(),
                hub,
                net,
                ifindex,
                wire_local,
                pds: Atomic::new(0),
                cqs: Atomic::new(0),
                srqs: Atomic::new(0),
                next_qp: Atomic::new(0),
                atomics <- new_mutex!((), "plx_rdma_atomics"),
                mcast <- mcast::Groups::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// The UDP port, opened for the first QP of the module's devices that
    /// uses the wire; each call is paired with a [`Self::wire_put`].
    pub(crate) fn wire_get(self: &Arc<Self>) -> Result<Arc<Port>> {
        self.hub.get(self)
    }

    /// A QP lets the port go (its own reference dropped first); the last
    /// one closes it.
    pub(crate) fn wire_put(&self) {
        self.hub.put(self)
    }

    /// Payload bytes a packet may carry on the port's netdev at most.
    pub(crate) fn mtu_cap(&self) -> usize {
        net::mtu_cap(udp_tunnel::netdev_mtu(&self.net, self.ifindex).unwrap_or(1500))
    }

    /// The live QP numbered `qpn`.
    pub(crate) fn find_qp(&self, qpn: u32) -> Option<Arc<Qp>> {
        if qpn == GSI_QPN {
            return self.gsi.lock().clone();
        }
        let i = qpn.checked_sub(FIRST_QPN)? as usize;
        self.qps.lock().get(i)?.clone()
    }
}

/// Takes one unit of `counter` below `max`; `ENOMEM` when none is left.
fn take_unit(counter: &Atomic<u32>, max: u32) -> Result {
    let mut cur = counter.load(Relaxed);
    loop {
        if cur >= max {
            return Err(ENOMEM);
        }
        match counter.cmpxchg(cur, cur + 1, Relaxed) {
            Ok(_) => return Ok(()),
            Err(seen) => cur = seen,
        }
    }
}

/// The driver ib_core calls: the device, as `Arc` for the QPs to share.
pub(crate) struct PlxRdma(Arc<Device>);

impl Driver for PlxRdma {
    type Pd = Pd;
    type Cq = Cq;
    type Mr = Mr;
    type MrRelease = Option<GateGuard>;
    type Qp = Qp;
    type Srq = Srq;

    fn alloc_pd(&self) -> Result<Arc<Pd>> {
        take_unit(&self.0.pds, MAX_PD)?;
        Arc::new(Pd::new(), GFP_KERNEL)
            .inspect_err(|_| {
                self.0.pds.fetch_sub(1, Relaxed);
            })
            .map_err(Into::into)
    }

    fn dealloc_pd(&self, _pd: Arc<Pd>) {
        self.0.pds.fetch_sub(1, Relaxed);
    }

    fn create_cq(
        &self,
        entries: u32,
        notifier: Arc<CqNotifier>,
        udata: Option<UserData<'_>>,
    ) -> Result<Arc<Cq>> {
        if entries == 0 || entries > MAX_CQE {
            return Err(EINVAL);
        }
        take_unit(&self.0.cqs, MAX_CQ)?;
        Cq::new(entries, notifier, udata).inspect_err(|_| {
            self.0.cqs.fetch_sub(1, Relaxed);
        })
    }

    fn destroy_cq(&self, cq: Arc<Cq>) {
        cq.close();
        self.0.cqs.fetch_sub(1, Relaxed);
    }

    fn poll_cq(cq: &Cq, out: &mut [Wc]) -> usize {
        cq.poll(out)
    }

    fn req_notify_cq(cq: &Cq, flags: u32) -> i32 {
        cq.arm(flags)
    }

    fn resize_cq(cq: &Cq, entries: u32, udata: Option<UserData<'_>>) -> Result {
        if entries == 0 || entries > MAX_CQE {
            return Err(EINVAL);
        }
        cq.resize(entries, udata)
    }

    fn reg_user_mr(
        &self,
        pd: &Arc<Pd>,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
    ) -> Result<(Arc<Mr>, u32, u32)> {
        // Held until the region is in the table (see `register`).
        let engine = self.0.mover.engine();
        let mr = self
            .0
            .mrs
            .register(engine.as_ref(), pd, start, length, iova, access)?;
        let (l, r) = (mr.lkey(), mr.rkey());
        Ok((mr, l, r))
    }

    fn dereg_mr(&self, mr: &Arc<Mr>) -> Result<Option<GateGuard>> {
        // Held until the region's last reference is gone, which unmaps it:
        // the engine's removal, which sweeps only the table, waits for
        // that too.
        let engine = self.0.mover.engine().map(Engine::into_guard);
        self.0.mrs.deregister(mr)?;
        Ok(engine)
    }

    fn create_qp(
        &self,
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        srq: Option<&Arc<Srq>>,
        init: &mut QpInit,
    ) -> Result<(Arc<Qp>, u32)> {
        let gsi = init.qp_type == rdma::types::qp_type::GSI;
        let mut new = |qpn| {
            Qp::new(
                self.0.clone(),
                qpn,
                pd.clone(),
                send_cq.clone(),
                recv_cq.clone(),
                srq.cloned(),
                init,
            )
        };
        if gsi {
            let mut slot = self.0.gsi.lock();
            if slot.is_some() {
                return Err(EBUSY);
            }
            let qp = new(GSI_QPN)?;
            *slot = Some(qp.clone());
            drop(slot);
            // The connection manager's peers send to UDP port 4791 at
            // any time: the device listens from the start, as rxe does.
            // Where another stack has the port, MADs stay on this host
            // until the port is free when one is sent.
            if let Err(e) = qp.attach_port() {
                pr_info!(
                    "UDP port {} not taken ({:?}): connection management over the wire waits for it\n",
                    crate::wire::ip::ROCE_PORT,
                    e
                );
            }
            return Ok((qp, GSI_QPN));
        }
        // A mutex: the QP is built (allocating) with its number taken.
        // Numbers are taken in turn, as rxe's are, not the lowest free one:
        // a destroyed QP's number does not go at once to the next QP, which
        // would then receive what was meant for the old one's peer.
        let mut qps = self.0.qps.lock();
        let n = qps.len();
        // (No `%` by `n`: its division-by-zero panic path is one objtool
        // does not know as a dead end, and the bench kernel's build
        // fails on the warning.)
        let start = (self.0.next_qp.load(Relaxed) as usize).min(n);
        let i = Iterator::chain(start..n, 0..start)
            .find(|&i| qps[i].is_none())
            .ok_or(ENOMEM)?;
        let qpn = FIRST_QPN + i as u32;
        let qp = new(qpn)?;
        qps[i] = Some(qp.clone());
        let next = if i + 1 < n { i + 1 } else { 0 };
        self.0.next_qp.store(next as u32, Relaxed);
        Ok((qp, qpn))
    }

    fn modify_qp(qp: ArcBorrow<'_, Qp>, attr: &QpAttr, mask: u32) -> Result {
        Arc::from(qp).modify(attr, mask)
    }

    fn query_qp(qp: &Qp, out: &mut QpAttr) {
        qp.query(out)
    }

    fn destroy_qp(&self, qp: &Arc<Qp>) -> Result {
        // First out of the table: no peer finds it any more.
        if qp.qpn == GSI_QPN {
            *self.0.gsi.lock() = None;
        } else if let Some(i) = qp.qpn.checked_sub(FIRST_QPN) {
            if let Some(slot) = self.0.qps.lock().get_mut(i as usize) {
                *slot = None;
            }
        }
        self.0.mcast.detach_all(qp.qpn);
        qp.shut_down();
        if qp.release_port() {
            self.0.wire_put();
        }
        if qp.kernel {
            qp.purge_completions();
        }
        Ok(())
    }

    fn post_send(qp: ArcBorrow<'_, Qp>, wr: &SendWr<'_>) -> Result {
        Arc::from(qp).post_send(wr)
    }

    fn post_recv(qp: ArcBorrow<'_, Qp>, wr: &RecvWr<'_>) -> Result {
        Arc::from(qp).post_recv(wr)
    }

    fn create_srq(
        &self,
        pd: &Arc<Pd>,
        attr: &mut SrqAttr,
        notifier: Arc<SrqNotifier>,
    ) -> Result<Arc<Srq>> {
        take_unit(&self.0.srqs, MAX_SRQ)?;
        Srq::new(pd.clone(), attr, notifier).inspect_err(|_| {
            self.0.srqs.fetch_sub(1, Relaxed);
        })
    }

    fn modify_srq(srq: &Srq, attr: &SrqAttr, mask: u32) -> Result {
        srq.modify(attr, mask)
    }

    fn query_srq(srq: &Srq) -> SrqAttr {
        srq.query()
    }

    fn destroy_srq(&self, _srq: Arc<Srq>) {
        self.0.srqs.fetch_sub(1, Relaxed);
    }

    fn post_srq_recv(srq: &Srq, wr: &RecvWr<'_>) -> Result {
        srq.post_recv(wr)
    }

    fn mcast(qp: ArcBorrow<'_, Qp>, mgid: &[u8; 16], attach: bool) -> Result {
        // User UD QPs only (ib_core checked; QP1 is UD to it).
        if qp.qp_type != rdma::types::qp_type::UD {
            return Err(EINVAL);
        }
        if attach {
            qp.dev.mcast.attach(mgid, qp.qpn)
        } else {
            qp.dev.mcast.detach(mgid, qp.qpn)
        }
    }

    // The wire's counters, for `rdma statistic show link plx_rdma0/1`.
    const HW_STATS: &'static [&'static CStr] = WireStats::NAMES;

    fn hw_stats(&self, out: &mut [u64]) {
        self.0.wire_stats.values(out);
    }
}

pub(crate) fn show_stats(dev: &Arc<Device>, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    writeln!(f, "data_path: {}", dev.mover.name().to_str().unwrap_or("?"))?;
    dev.stats.show(f)?;
    dev.wire_stats.show(f)
}

/// A device the module registered, with its counters in debugfs, and the
/// watch on its engine's device.
pub(crate) struct CountedDevice {
    // Removed first, so that no reader finds a device going away.
    _stats: Pin<KBox<debugfs::File<Arc<Device>>>>,
    pub(crate) reg: Registration<PlxRdma>,
    /// Dropped last: the engine's removal is heard while the registration
    /// goes (it holds the device, not the other way round, so no cycle).
    _engine_watch: Option<RemovalWatch>,
}

impl CountedDevice {
    /// Keeps `reg`, its counters in `dir` as `file`, and watches its
    /// channel's device.
    pub(crate) fn new(dir: &debugfs::Dir, file: &CStr, reg: Registration<PlxRdma>) -> Result<Self> {
        let dev = reg.driver().0.clone();
        let stats = KBox::pin_init(
            dir.read_callback_file(file, dev.clone(), &show_stats),
            GFP_KERNEL,
        )?;
        let watch = match dev.mover.channel().map(|c| c.watch_removal(dev.clone())) {
            None => None,
            Some(Ok(w)) => Some(w),
            // The unbind began before the watch: nobody will call it.
            Some(Err(e)) if e == ENODEV => {
                dev.engine_lost();
                None
            }
            Some(Err(e)) => return Err(e),
        };
        Ok(Self {
            _stats: stats,
            reg,
            _engine_watch: watch,
        })
    }
}

impl Device {
    /// The channel's device is losing its driver: waits for the engine's
    /// uses in flight, then unmaps every region from it. The regions stay
    /// registered and the CPU moves the data from now on.
    fn engine_lost(&self) {
        let name = self.mover.name();
        let Some(closed) = self.mover.close() else {
            return;
        };
        let n = self.mrs.detach_all(&closed);
        Stats::add(&self.stats.engine_losses, 1);
        Stats::add(&self.stats.regions_unmapped, n);
        pr_warn!(
            "{} is going away: {} memory regions unmapped from it, the CPU moves the data from now on\n",
            name,
            n
        );
    }
}

impl RemovalSink for Device {
    fn device_removing(this: ArcBorrow<'_, Self>) {
        this.engine_lost();
    }
}

/// Every device of the module.
struct Devices {
    /// `rdma link add NAME type plx netdev DEV`; `None` only while
    /// dropped.
    links: Option<LinkType<Links>>,
    /// The device on the netdev `ifindex=` named at load, if any; its
    /// counters are `plx_rdma/stats`.
    _param: Option<CountedDevice>,
}

impl Devices {
    fn new() -> Result<Self> {
        let dir = debugfs::Dir::new(c"plx_rdma");
        let hub = PortHub::new()?;
        let ifindex = module_parameters::ifindex.value();
        let param = match ifindex {
            0 => None,
            i => Some(CountedDevice::new(
                &dir,
                c"stats",
                new_device(c"plx_rdma%d", &NetNs::init(), i, false, &hub)?,
            )?),
        };
        let links = LinkType::new(c"plx", Links::new(dir, hub, ifindex)?)?;
        Ok(Self {
            links: Some(links),
            _param: param,
        })
    }
}

impl Drop for Devices {
    fn drop(&mut self) {
        // First no new device, then the users' ones go, here rather than
        // whenever the last reference to their list does.
        if let Some(links) = self.links.take() {
            let handler = links.handler().clone();
            drop(links);
            handler.clear();
        }
    }
}

#[pin_data]
struct PlxRdmaModule {
    /// The devices, inside the module's own workqueues (their QP workers
    /// run there, drained once the devices are gone).
    #[pin]
    devices: WithQueues<Devices>,
    /// Dropped after the devices, which own the watches on their engines.
    _watches: WatchScope,
}

/// A node GUID for each device: two devices that talk through one
/// connection manager must not look like one.
fn node_guid() -> u64 {
    0x0250_5800_0000_0000 | u64::from(random::random_u32()) << 8 | 0x01
}

/// Takes a channel (unless told not to) and registers a device named
/// `name` (a `%d` pattern for the parameters' device), its port on the
/// netdev of index `ifindex` in `net`; `removable`: for `rdma link delete`.
pub(crate) fn new_device(
    name: &CStr,
    net: &NetNs,
    ifindex: i32,
    removable: bool,
    hub: &Arc<PortHub>,
) -> Result<Registration<PlxRdma>> {
    let chan = if module_parameters::channel.value() {
        match MemcpyChannel::request() {
            Ok(c) => Some(c),
            Err(e) => {
                pr_warn!(
                    "{}: no memcpy channel ({:?}): the CPU moves the data\n",
                    name,
                    e
                );
                None
            }
        }
    } else {
        None
    };
    let dev = Device::new(
        Mover::new(
            chan,
            module_parameters::copy_timeout_ms.value().max(1),
            module_parameters::wire_engine_min.value(),
            module_parameters::copy_engine_min.value(),
        )?,
        net.clone(),
        ifindex,
        module_parameters::wire_local.value(),
        hub.clone(),
    )?;
    let caps = Caps {
        max_mr_size: 1 << 32,
        node_guid: node_guid(),
        max_qp: MAX_QP,
        max_qp_wr: qp::MAX_WR,
        max_sge: qp::MAX_SGE,
        max_cq: MAX_CQ,
        max_cqe: MAX_CQE,
        max_mr: MAX_MR,
        max_pd: MAX_PD,
        vendor_id: 0x10b5,
        vendor_part_id: 0x87d0,
        hw_ver: 1,
        // Executed by the CPU under one lock per device (atomic.rs).
        atomic_cap: rdma::types::atomic_cap::HCA,
        max_srq: MAX_SRQ,
        max_srq_wr: srq::MAX_SRQ_WR,
        max_mcast_grp: mcast::MAX_GROUPS,
        max_mcast_qp_attach: mcast::MAX_QPS_PER_GROUP,
    };
    let driver = Arc::new(PlxRdma(dev), GFP_KERNEL)?;
    let reg = if removable {
        Registration::new_removable(driver, &caps, name, net, ifindex)
    } else {
        Registration::new(driver, &caps, name, net, ifindex)
    }
    .inspect_err(|e| {
        pr_err!(
            "{}: registration on the netdev of ifindex {} failed: {:?}\n",
            name,
            ifindex,
            e
        )
    })?;
    pr_info!(
        "{}: registered, data moved by {}\n",
        reg.name(),
        reg.driver().0.mover.name()
    );
    Ok(reg)
}

impl kernel::InPlaceModule for PlxRdmaModule {
    fn init(_module: &'static ThisModule) -> impl PinInit<Self, Error> {
        try_pin_init!(Self {
            _watches: WatchScope::new()?,
            devices <- WithQueues::new(<Self as kernel::ModuleMetadata>::NAME, Devices::new),
        })
    }
}
