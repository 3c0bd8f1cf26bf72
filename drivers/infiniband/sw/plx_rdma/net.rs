// SPDX-License-Identifier: GPL-2.0

//! The device on the wire: RoCEv2 datagrams to and from UDP port 4791.
//!
//! While one of its RC QPs is connected over the wire, the device holds a
//! [`Port`]: two UDP tunnel sockets bound to port 4791, one on every IPv4
//! address and one on every IPv6 address of the namespace its netdev is
//! in, as `rdma_rxe` binds them per namespace (the IPv6 one only where
//! the kernel has IPv6). The first such QP opens it, the
//! last one destroyed closes it, so that the device does not hold the
//! port while nothing uses it (only one RoCE stack may own it per
//! namespace).
//!
//! A GID is an IPv6 address; an IPv4-mapped one (`::ffff:a.b.c.d`) stands
//! for the IPv4 address ([`IpAddr`]), and a QP's packets are of the
//! family of its GIDs. Sending builds the whole datagram with the codec
//! (`wire`): IPv4 header (DF, the address vector's traffic class and hop
//! limit) or IPv6 header (traffic class and hop limit, flow label 0), UDP
//! header
//! (checksum 0, a source port per QP), BTH, extended headers, payload,
//! pad and ICRC, into an skb routed to the destination;
//! `ip_local_out()` or `ip6_local_out()` resolves the neighbour. Receiving takes each datagram in softirq
//! context only as far as a bounded queue; a work item takes them apart in
//! process context, where QPs and memory regions can be looked up. A
//! datagram that is not a well-formed RoCEv2 packet for an RC QP
//! connected to its sender is dropped without an answer and counted by
//! reason ([`WireStats`]).

use crate::{
    landing::{Incoming, Landing},
    mcast::MCAST_QPN,
    module_queue::{self, QueueKind},
    net_ns::NetNs,
    rc,
    rdma::types::qp_type,
    replies::Replies,
    ud,
    udp_tunnel::{Family, Receiver, Skb, UdpTunnel},
    wire::{
        bth::Bth,
        icrc::{crc32_le, Icrc, ICRC_LEN},
        ip::{
            write_ipv4_udp, write_ipv6_udp, Datagram, IpHeader, Ipv4Header, Ipv6Header, UdpHeader,
            ROCE_PORT,
        },
        opcode::{OpInfo, Transport},
        packet::{packet_len, pad_len, write_headers, ExtHeaders, Packet},
        WireError,
    },
    wq::WorkQueue,
    Device,
};
use core::fmt;
use kernel::{
    impl_has_work, new_condvar, new_mutex, new_spinlock_irq, new_work,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc, ArcBorrow, CondVar, Mutex, SpinLockIrq,
    },
    workqueue::{Work, WorkItem},
};

/// Datagrams waiting for the receive work item; more are dropped.
const RX_QUEUE: usize = 4096;

macro_rules! wire_stats {
    ($($(#[$doc:meta])* $name:ident,)*) => {
        /// Wire counters since the device was registered.
        pub(crate) struct WireStats {
            $($(#[$doc])* pub(crate) $name: Atomic<u64>,)*
        }

        impl WireStats {
            pub(crate) const fn new() -> Self {
                Self { $($name: Atomic::new(0),)* }
            }

            /// The counters' names, in the order of [`Self::values`].
            pub(crate) const NAMES: &'static [&'static CStr] =
                &[$(kernel::c_str!(stringify!($name)),)*];

            /// Reads the counters into `out`, in the order of
            /// [`Self::NAMES`].
            pub(crate) fn values(&self, out: &mut [u64]) {
                for (o, v) in out.iter_mut().zip([$(self.$name.load(Relaxed),)*]) {
                    *o = v;
                }
            }

            /// Writes every counter, one `name: value` line each.
            pub(crate) fn show(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                $(writeln!(f, "{}: {}", stringify!($name), self.$name.load(Relaxed))?;)*
                Ok(())
            }
        }
    };
}

wire_stats! {
    /// Datagrams sent.
    tx_packets,
    /// Bytes sent, IP header on.
    tx_bytes,
    /// Datagrams that could not be sent (no route, no memory, the
    /// netdev refused them); the transport's retries cover them.
    tx_errors,
    /// Datagrams received and taken (well formed, for a connected QP).
    rx_packets,
    /// Payload bytes the CPU placed into receive buffers and regions.
    rx_payload_cpu_bytes,
    /// Payload bytes the DMA engine placed, straight from the skb.
    rx_payload_engine_bytes,
    /// Dropped: the receive queue was full.
    rx_drop_queue_full,
    /// Dropped: not a well-formed IPv4 or IPv6 UDP datagram to port 4791.
    rx_drop_bad_ip_udp,
    /// Dropped: to an address of no device's netdev.
    rx_drop_no_device,
    /// Dropped: the BTH or an extended header is malformed, or the
    /// opcode unknown.
    rx_drop_bad_header,
    /// Dropped: the ICRC is wrong.
    rx_drop_bad_icrc,
    /// Dropped: neither a reliable-connected nor a datagram opcode.
    rx_drop_transport,
    /// Dropped: no QP of that number.
    rx_drop_no_qp,
    /// Dropped: the QP is not of the packet's transport (RC traffic to
    /// QP1 included).
    rx_drop_qp_type,
    /// Datagrams (UD SEND) a receive took.
    rx_datagrams,
    /// Dropped: a datagram to a multicast address that is not a UD SEND
    /// to QP 0xFFFFFF, or for a group no QP of the device is attached to.
    rx_drop_mcast,
    /// Dropped: a datagram whose Q_Key is not its QP's, or for a QP that
    /// takes none in its state.
    rx_drop_qkey,
    /// Dropped: a datagram for a QP with no receive posted.
    rx_drop_no_recv,
    /// Dropped: the QP is not connected over the wire to the sender's
    /// address.
    rx_drop_wrong_source,
    /// Dropped: the QP does not take packets in its state.
    rx_drop_qp_state,
    /// Dropped: an opcode this version does not implement (atomics,
    /// ...), NAKed as an invalid request.
    rx_drop_unsupported_op,
    /// NAKed as invalid requests: a SEND or WRITE packet whose payload
    /// does not fit its place in the message (the path MTU, the DMA
    /// length).
    rx_nak_length,
    /// Requests whose PSN was already executed: answered, not executed.
    rx_duplicates,
    /// UC packets dropped: after a gap in the PSNs, or of a message the
    /// QP could not take (no receive, no right, a bad key), up to the
    /// next first packet.
    rx_uc_dropped,
    /// Requests ahead of the expected PSN: dropped (one NAK each gap).
    rx_drop_psn_ahead,
    /// Acknowledges matching no outstanding request.
    rx_stale_acks,
    /// ACKs sent.
    acks_sent,
    /// NAKs sent (sequence, invalid request, access, operation).
    naks_sent,
    /// RNR NAKs sent (no receive posted).
    rnr_naks_sent,
    /// ACKs received covering a whole outstanding message.
    acks_received,
    /// NAKs received.
    naks_received,
    /// RNR NAKs received.
    rnr_naks_received,
    /// Local ACK timeouts.
    ack_timeouts,
    /// Local ACK timers started again because answers waited in the
    /// receive queue (not counted as timeouts).
    ack_timer_holds,
    /// Requests sent again (after a timeout, NAK or RNR NAK).
    retransmits,
}

impl WireStats {
    pub(crate) fn inc(counter: &Atomic<u64>) {
        counter.fetch_add(1, Relaxed);
    }
}

/// The IP address a RoCEv2 GID stands for.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum IpAddr {
    /// An IPv4-mapped GID's address.
    V4([u8; 4]),
    /// Any other GID, which is an IPv6 address.
    V6([u8; 16]),
}

impl IpAddr {
    /// The address `gid` stands for.
    pub(crate) fn of_gid(gid: &[u8; 16]) -> Self {
        match gid_ipv4(gid) {
            Some(v4) => Self::V4(v4),
            None => Self::V6(*gid),
        }
    }

    /// The GID of the address (IPv4-mapped for an IPv4 one).
    pub(crate) fn gid(&self) -> [u8; 16] {
        match self {
            Self::V4(a) => {
                let mut gid = [0u8; 16];
                gid[10] = 0xff;
                gid[11] = 0xff;
                gid[12..].copy_from_slice(a);
                gid
            }
            Self::V6(a) => *a,
        }
    }

    /// Whether it is a multicast address (224.0.0.0/4, ff00::/8).
    pub(crate) fn is_multicast(&self) -> bool {
        match self {
            Self::V4(a) => a[0] & 0xf0 == 0xe0,
            Self::V6(a) => a[0] == 0xff,
        }
    }

    /// The family of the address.
    pub(crate) fn family(&self) -> Family {
        match self {
            Self::V4(_) => Family::V4,
            Self::V6(_) => Family::V6,
        }
    }
}

/// Where the packets of a connected QP go, read from its attributes.
#[derive(Clone, Copy)]
pub(crate) struct Path {
    /// Of the same family as `dst` (see [`Path::addresses`]).
    pub(crate) src: IpAddr,
    pub(crate) dst: IpAddr,
    pub(crate) dest_qp: u32,
    pub(crate) src_port: u16,
    pub(crate) tos: u8,
    pub(crate) ttl: u8,
    /// The destination is one of the port's own addresses.
    pub(crate) local: bool,
    /// The device's netdev, which remote destinations are reached through.
    pub(crate) oif: i32,
    /// Payload bytes per packet: the path MTU, at most what the netdev
    /// carries.
    pub(crate) mtu: usize,
}

impl Path {
    /// The source and destination addresses of the GIDs `sgid` and
    /// `dgid`, if they are of one family.
    pub(crate) fn addresses(sgid: &[u8; 16], dgid: &[u8; 16]) -> Option<(IpAddr, IpAddr)> {
        let (src, dst) = (IpAddr::of_gid(sgid), IpAddr::of_gid(dgid));
        (src.family() == dst.family()).then_some((src, dst))
    }
}

/// The IPv4 address of an IPv4-mapped GID (`::ffff:a.b.c.d`), as RoCEv2
/// GIDs of IPv4 addresses are.
pub(crate) fn gid_ipv4(gid: &[u8; 16]) -> Option<[u8; 4]> {
    let (prefix, addr) = gid.split_at(12);
    if prefix[..10].iter().any(|&b| b != 0) || prefix[10..] != [0xff, 0xff] {
        return None;
    }
    addr.try_into().ok()
}

/// The UDP source port of a QP's packets: fixed per QP, as rxe's, so that
/// a flow stays on one path.
pub(crate) fn src_port(qpn: u32) -> u16 {
    0xc000 | (qpn & 0x3fff) as u16
}

/// The largest IB MTU (bytes) a packet fits in on a netdev of MTU
/// `netdev_mtu` with the most headers (IPv6, UDP, BTH, RETH, ImmDt, ICRC),
/// whichever IP version the path is of.
pub(crate) fn mtu_cap(netdev_mtu: u32) -> usize {
    let room = (netdev_mtu as usize)
        .saturating_sub(Ipv6Header::LEN + UdpHeader::LEN + 12 + 16 + 4 + ICRC_LEN);
    [4096, 2048, 1024, 512]
        .into_iter()
        .find(|&m| m <= room)
        .unwrap_or(256)
}

/// The module's UDP ports 4791, one per network namespace its devices'
/// netdevs are in, shared by the devices of a namespace as rxe's devices
/// share theirs: open while one of them uses the wire, each datagram
/// handed to the device whose netdev has its destination address.
#[pin_data]
pub(crate) struct PortHub {
    #[pin]
    ports: Mutex<KVec<Arc<Port>>>,
}

impl PortHub {
    pub(crate) fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                ports <- new_mutex!(KVec::new(), "plx_rdma_port_hub"),
            }),
            GFP_KERNEL,
        )
    }

    /// The port of `dev`'s namespace, opened for the first user there;
    /// `dev` gets its datagrams until as many [`Self::put`]s.
    /// `EADDRINUSE` if another stack owns the port in that namespace.
    pub(crate) fn get(&self, dev: &Arc<Device>) -> Result<Arc<Port>> {
        let mut ports = self.ports.lock();
        let found = ports.iter().position(|p| p.tunnel.net().same(&dev.net));
        let port = match found {
            Some(i) => ports[i].clone(),
            None => {
                ports.reserve(1, GFP_KERNEL)?;
                Port::new(&dev.net)?
            }
        };
        port.tunnel.receiver().attach(dev)?;
        if found.is_none() {
            // Room was reserved above.
            let _ = ports.push_within_capacity(port.clone());
        }
        Ok(port)
    }

    /// `dev` lets its namespace's port go (its own reference dropped
    /// first); the last user closes it.
    pub(crate) fn put(&self, dev: &Device) {
        let closing = {
            let mut ports = self.ports.lock();
            let at = ports.iter().position(|p| p.tunnel.net().same(&dev.net));
            match at {
                Some(i) if ports[i].tunnel.receiver().detach(dev) => ports.remove(i).ok(),
                _ => None,
            }
        };
        if let Some(p) = closing {
            // The receive work item is idle before the socket goes, and
            // holds no device any more.
            p.shut_down();
            drop(p);
        }
    }
}

/// UDP port 4791, open while a device uses the wire.
pub(crate) struct Port {
    tunnel: UdpTunnel<Rx>,
    /// The IPv6 socket; `None` on a kernel without IPv6 (or with it
    /// disabled), where IPv6 paths fail to send.
    tunnel6: Option<UdpTunnel<Rx>>,
    ip_id: Atomic<u32>,
}

impl Port {
    /// Whether answers to this namespace's requesters (acknowledges, READ
    /// responses) wait in the receive queue: a requester's timer that
    /// fires then is no sign of loss, only of a receive side behind.
    pub(crate) fn answers_waiting(&self) -> bool {
        self.tunnel.receiver().answers_waiting()
    }

    /// Opens UDP port 4791 in `net`; `EADDRINUSE` if another stack owns
    /// it there.
    fn new(net: &NetNs) -> Result<Arc<Self>> {
        let rx = Arc::pin_init(
            try_pin_init!(Rx {
                devices <- new_mutex!(KVec::new(), "plx_rdma_rx_devices"),
                queue_full: Atomic::new(0),
                q <- new_spinlock_irq!(RxQueue {
                    answers: WorkQueue::new(RX_QUEUE)?,
                    requests: WorkQueue::new(RX_QUEUE)?,
                    running: false,
                    dead: false,
                }, "plx_rdma_rx"),
                idle <- new_condvar!("plx_rdma_rx::idle"),
                work <- new_work!("plx_rdma_rx::work"),
            }),
            GFP_KERNEL,
        )?;
        let bind = |family| {
            // Multicast looped back: a group's members on this host (its
            // other QPs, other devices) take what a QP sends to it, as
            // with rxe, whose sends go out on sockets that loop.
            UdpTunnel::new(net, family, true, ROCE_PORT, rx.clone()).inspect_err(|e| {
                if *e != EAFNOSUPPORT {
                    pr_warn!(
                        "cannot bind UDP port {} ({:?}, {:?}): is another RoCE device (rxe) on this namespace?\n",
                        ROCE_PORT,
                        family,
                        e
                    )
                }
            })
        };
        let tunnel = bind(Family::V4)?;
        let tunnel6 = match bind(Family::V6) {
            Ok(t) => Some(t),
            // As rxe: a kernel without IPv6 carries IPv4 alone.
            Err(e) if e == EAFNOSUPPORT => None,
            Err(e) => return Err(e),
        };
        Ok(Arc::new(
            Self {
                tunnel,
                tunnel6,
                ip_id: Atomic::new(0),
            },
            GFP_KERNEL,
        )?)
    }

    /// Stops receiving: queued datagrams are dropped, and the work item
    /// is idle when this returns. Before the last reference goes.
    pub(crate) fn shut_down(&self) {
        self.tunnel.receiver().shut_down();
    }

    /// Sends one transport packet to `path`: `bth` and `ext`, then
    /// `payload_len` bytes that `fill` writes, pad and ICRC.
    pub(crate) fn send(
        &self,
        stats: &WireStats,
        path: &Path,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result,
    ) -> Result {
        let sent = self.try_send(path, bth, ext, payload_len, fill);
        match sent {
            Ok(n) => {
                WireStats::inc(&stats.tx_packets);
                stats.tx_bytes.fetch_add(n as u64, Relaxed);
                Ok(())
            }
            Err(e) => {
                WireStats::inc(&stats.tx_errors);
                Err(e)
            }
        }
    }

    fn try_send(
        &self,
        path: &Path,
        bth: &Bth,
        ext: &ExtHeaders,
        payload_len: usize,
        fill: impl FnOnce(&mut [u8]) -> Result,
    ) -> Result<usize> {
        let info = OpInfo::lookup(bth.opcode).ok_or(EINVAL)?;
        let transport_len = packet_len(&info, payload_len).ok_or(EMSGSIZE)?;
        let ip_len = match path.dst {
            IpAddr::V4(_) => Ipv4Header::LEN,
            IpAddr::V6(_) => Ipv6Header::LEN,
        };
        let hdrs = ip_len + UdpHeader::LEN;
        let total = hdrs.checked_add(transport_len).ok_or(EMSGSIZE)?;
        // A peer on one of the port's own addresses is reached through
        // the local route, whatever netdev that is on.
        let oif = if path.local { 0 } else { path.oif };
        let wire = |_: WireError| EINVAL;
        let mut skb = match (path.src, path.dst) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                let mut skb = self.tunnel.alloc_ipv4(oif, src, dst, total, ip_len)?;
                let ip = Ipv4Header {
                    tos: path.tos,
                    id: self.ip_id.fetch_add(1, Relaxed) as u16,
                    ttl: path.ttl,
                    src,
                    dst,
                    ..Ipv4Header::default()
                };
                write_ipv4_udp(skb.data(), &ip, path.src_port, transport_len).map_err(wire)?;
                skb
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                let tunnel = self.tunnel6.as_ref().ok_or(EAFNOSUPPORT)?;
                let mut skb = tunnel.alloc_ipv6(oif, &src, &dst, total, ip_len)?;
                let ip = Ipv6Header {
                    traffic_class: path.tos,
                    hop_limit: path.ttl,
                    src,
                    dst,
                    ..Ipv6Header::default()
                };
                write_ipv6_udp(skb.data(), &ip, path.src_port, transport_len).map_err(wire)?;
                skb
            }
            _ => return Err(EAFNOSUPPORT),
        };
        let data = skb.data();
        let (ip_udp, transport) = data.split_at_mut(hdrs);
        let hdr = write_headers(transport, bth, ext, payload_len).map_err(wire)?;
        let covered = hdr + payload_len + pad_len(payload_len);
        let (covered_bytes, icrc) = transport.split_at_mut(covered);
        let (_, body) = covered_bytes.split_at_mut(hdr);
        let (payload, pad) = body.split_at_mut(payload_len);
        fill(payload)?;
        pad.fill(0);
        let crc = Icrc::compute(crc32_le, ip_udp, covered_bytes).map_err(wire)?;
        icrc.get_mut(..ICRC_LEN)
            .ok_or(EINVAL)?
            .copy_from_slice(&Icrc::to_wire(crc));
        skb.send()?;
        Ok(total)
    }
}

struct RxQueue {
    /// Acknowledges and READ responses: taken first, so that a backlog of
    /// requests this device answers (each placed by the engine) does not
    /// hold up the answers its own requesters wait for, and their timers
    /// do not fire while the peer is merely busy.
    answers: WorkQueue<Skb>,
    /// Everything else: requests, datagrams, and what does not parse.
    requests: WorkQueue<Skb>,
    /// The work item is queued or running.
    running: bool,
    /// Shut down: nothing is queued any more.
    dead: bool,
}

/// The receive side of a [`Port`].
#[pin_data]
pub(crate) struct Rx {
    /// The devices using the port, each with its number of users.
    #[pin]
    devices: Mutex<KVec<(Arc<Device>, usize)>>,
    /// Datagrams dropped in softirq context for a full queue, not yet
    /// added to the devices' counters (the work item does).
    queue_full: Atomic<u64>,
    #[pin]
    q: SpinLockIrq<RxQueue>,
    /// Woken, under `q`, when the work item goes idle.
    #[pin]
    idle: CondVar,
    #[pin]
    work: Work<Rx>,
}

impl_has_work! {
    impl HasWork<Self> for Rx { self.work }
}

impl Receiver for Rx {
    fn receive(this: ArcBorrow<'_, Self>, skb: Skb) {
        // The BTH's opcode follows the 8 bytes of the UDP header.
        let mut opcode = [0u8; 1];
        let answer = skb.udp_bytes(UdpHeader::LEN as u32, &mut opcode)
            && OpInfo::lookup(opcode[0]).is_some_and(|i| !i.is_request());
        // (refused skb, whether the work item must be queued)
        let (refused, kick) = {
            let mut guard = this.q.lock();
            let q = &mut *guard;
            let ring = if answer {
                &mut q.answers
            } else {
                &mut q.requests
            };
            if q.dead {
                (Some(skb), false)
            } else {
                match ring.try_push(skb) {
                    // Not queued yet (`running` was clear): it is, below.
                    Ok(()) => (None, !core::mem::replace(&mut q.running, true)),
                    Err(skb) => {
                        this.queue_full.fetch_add(1, Relaxed);
                        (Some(skb), false)
                    }
                }
            }
        };
        if kick {
            // High priority: packets are taken in softirq by rxe, and a
            // busy-polling verbs user must not starve the ACKs its peer
            // waits for.
            let _ = module_queue::queue(QueueKind::HighPri).enqueue(Arc::from(this));
        }
        // Freed outside the lock.
        drop(refused);
    }
}

impl Rx {
    /// `dev` gets the datagrams to its netdev's addresses (once more).
    fn attach(&self, dev: &Arc<Device>) -> Result {
        let mut devices = self.devices.lock();
        match devices.iter_mut().find(|(d, _)| Arc::ptr_eq(d, dev)) {
            Some((_, users)) => *users += 1,
            None => devices.push((dev.clone(), 1), GFP_KERNEL)?,
        }
        Ok(())
    }

    /// `dev` lets go once; returns whether no device is left.
    fn detach(&self, dev: &Device) -> bool {
        let mut devices = self.devices.lock();
        if let Some(i) = devices.iter().position(|(d, _)| core::ptr::eq(&**d, dev)) {
            devices[i].1 -= 1;
            if devices[i].1 == 0 {
                let _ = devices.remove(i);
            }
        }
        devices.is_empty()
    }

    /// Calls `f` with each device using the port.
    fn each_device(&self, f: impl Fn(&Device)) {
        for (d, _) in self.devices.lock().iter() {
            f(d);
        }
    }

    /// The device whose netdev has address `addr` (the devices of a port
    /// are all in its namespace).
    fn device_of(&self, addr: &IpAddr) -> Option<Arc<Device>> {
        let devices = self.devices.lock();
        let (first, _) = devices.first()?;
        let ifindex = match addr {
            IpAddr::V4(a) => crate::udp_tunnel::ipv4_ifindex(&first.net, *a)?,
            IpAddr::V6(a) => crate::udp_tunnel::ipv6_ifindex(&first.net, a)?,
        };
        devices
            .iter()
            .find(|(d, _)| d.ifindex == ifindex)
            .map(|(d, _)| d.clone())
    }

    /// Whether acknowledges or READ responses wait to be processed.
    fn answers_waiting(&self) -> bool {
        !self.q.lock().answers.is_empty()
    }

    /// Drops what is queued and waits until the work item is idle; from
    /// then on datagrams are dropped as they come.
    fn shut_down(&self) {
        loop {
            let skb = {
                let mut q = self.q.lock();
                q.dead = true;
                q.answers.pop().or_else(|| q.requests.pop())
            };
            if skb.is_none() {
                break;
            }
        }
        let mut q = self.q.lock();
        while q.running {
            self.idle.wait(&mut q);
        }
    }

    /// The next datagram to process, of those in `take`; `None` when
    /// none is left, and then idle if [`Take::AnyOrIdle`].
    fn next(&self, take: Take) -> Option<Skb> {
        let mut q = self.q.lock();
        if !q.dead {
            let skb = match take {
                Take::Answer => q.answers.pop(),
                Take::Any | Take::AnyOrIdle => q.answers.pop().or_else(|| q.requests.pop()),
            };
            if skb.is_some() {
                return skb;
            }
        }
        if take != Take::AnyOrIdle {
            return None;
        }
        q.running = false;
        self.idle.notify_all();
        None
    }

    /// Whether the port shut down.
    fn dead(&self) -> bool {
        self.q.lock().dead
    }

    /// Takes one datagram apart and hands it to its QP; the engine's
    /// copies of its payload join `landing`.
    fn process(&self, skb: Skb, landing: &Landing, replies: &Replies) {
        let full = self.queue_full.xchg(0, Relaxed);
        if full > 0 {
            self.each_device(|d| {
                d.wire_stats.rx_drop_queue_full.fetch_add(full, Relaxed);
            });
        }
        let Ok(skb) = skb.linearize() else {
            self.each_device(|d| WireStats::inc(&d.wire_stats.rx_drop_bad_ip_udp));
            return;
        };
        let Ok(skb) = Arc::new(skb, GFP_KERNEL) else {
            self.each_device(|d| WireStats::inc(&d.wire_stats.rx_drop_bad_ip_udp));
            return;
        };
        let rx = Incoming {
            skb: &skb,
            landing,
            replies,
        };
        if self.take(&rx) {
            // Freed when the last copy of its bytes ends.
            skb.mark_delivered();
        }
    }

    /// Whether the QP the datagram is for took it. What is dropped before
    /// its device is known counts on every device of the port.
    fn take(&self, rx: &Incoming<'_>) -> bool {
        let bytes = rx.skb.network_bytes();
        let Ok(dg) = Datagram::parse(bytes) else {
            self.each_device(|d| WireStats::inc(&d.wire_stats.rx_drop_bad_ip_udp));
            return false;
        };
        let (src, dst) = match &dg.ip {
            IpHeader::V4(ip) => (IpAddr::V4(ip.src), IpAddr::V4(ip.dst)),
            IpHeader::V6(ip) => (IpAddr::V6(ip.src), IpAddr::V6(ip.dst)),
        };
        if dst.is_multicast() {
            // Each device of the port has its own groups. The list is
            // copied: delivering sleeps (it allocates), and takes QP locks.
            let mut devices = KVec::new();
            for (d, _) in self.devices.lock().iter() {
                if devices.push(d.clone(), GFP_KERNEL).is_err() {
                    break;
                }
            }
            let mut taken = false;
            for dev in devices.iter() {
                if Self::deliver_mcast(dev, &dg, &dst) {
                    WireStats::inc(&dev.wire_stats.rx_packets);
                    taken = true;
                }
            }
            return taken;
        }
        let Some(dev) = self.device_of(&dst) else {
            self.each_device(|d| WireStats::inc(&d.wire_stats.rx_drop_no_device));
            return false;
        };
        let taken = Self::deliver(&dev, &dg, src, rx);
        if taken {
            WireStats::inc(&dev.wire_stats.rx_packets);
        }
        taken
    }

    /// Hands a datagram to multicast group `group` to each QP of `dev`
    /// attached to it; whether one took it.
    fn deliver_mcast(dev: &Device, dg: &Datagram<'_>, group: &IpAddr) -> bool {
        let stats = &dev.wire_stats;
        let Some(pkt) = Self::checked_packet(stats, dg) else {
            return false;
        };
        let members = if pkt.info.transport == Transport::Ud && pkt.bth.dest_qp == MCAST_QPN {
            dev.mcast.members(&group.gid())
        } else {
            KVec::new()
        };
        if members.is_empty() {
            WireStats::inc(&stats.rx_drop_mcast);
            return false;
        }
        let mut taken = false;
        for qpn in members.iter() {
            if let Some(qp) = dev.find_qp(*qpn) {
                // Each QP takes its own copy, with its own receive.
                taken |= qp.is_datagram() && ud::on_datagram(&qp, dg.ip_udp, &pkt);
            }
        }
        taken
    }

    /// The transport packet of `dg`, if its headers parse and its ICRC
    /// is right; a drop is counted in `stats` otherwise.
    fn checked_packet<'a>(stats: &WireStats, dg: &Datagram<'a>) -> Option<Packet<'a>> {
        let Ok(pkt) = Packet::parse(dg.payload) else {
            WireStats::inc(&stats.rx_drop_bad_header);
            return None;
        };
        if pkt.check_icrc(crc32_le, dg.ip_udp).is_err() {
            WireStats::inc(&stats.rx_drop_bad_icrc);
            return None;
        }
        Some(pkt)
    }

    /// Hands a datagram for `dev` to its QP; whether it was taken.
    fn deliver(dev: &Arc<Device>, dg: &Datagram<'_>, src: IpAddr, rx: &Incoming<'_>) -> bool {
        let stats = &dev.wire_stats;
        let Some(pkt) = Self::checked_packet(stats, dg) else {
            return false;
        };
        let datagram = match pkt.info.transport {
            Transport::Rc | Transport::Uc => false,
            Transport::Ud => true,
            _ => {
                WireStats::inc(&stats.rx_drop_transport);
                return false;
            }
        };
        let Some(qp) = dev.find_qp(pkt.bth.dest_qp) else {
            WireStats::inc(&stats.rx_drop_no_qp);
            return false;
        };
        if datagram {
            // Datagrams are not connected: any source may send one.
            if !qp.is_datagram() {
                WireStats::inc(&stats.rx_drop_qp_type);
                return false;
            }
            return ud::on_datagram(&qp, dg.ip_udp, &pkt);
        }
        let uc = pkt.info.transport == Transport::Uc;
        let wanted = if uc { qp_type::UC } else { qp_type::RC };
        if qp.qp_type != wanted {
            WireStats::inc(&stats.rx_drop_qp_type);
            return false;
        }
        let Some((port, path)) = qp.wire_path() else {
            WireStats::inc(&stats.rx_drop_wrong_source);
            return false;
        };
        if path.dst != src {
            WireStats::inc(&stats.rx_drop_wrong_source);
            return false;
        }
        if uc {
            rc::on_uc_request(&qp, &path, &pkt, rx)
        } else if pkt.info.is_request() {
            rc::on_request(&qp, &port, &path, &pkt, rx)
        } else {
            rc::on_response(&qp, &pkt, rx)
        }
    }
}

/// Which datagrams [`Rx::next`] takes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Take {
    /// Acknowledges and READ responses only.
    Answer,
    /// Any.
    Any,
    /// Any; if none is left, the work item goes idle.
    AnyOrIdle,
}

impl WorkItem for Rx {
    type Pointer = Arc<Rx>;

    fn run(this: Arc<Rx>) {
        let landing = Landing::new();
        let replies = Replies::new();
        loop {
            // Answers first; then, while READs are being answered, a
            // batch of their responses and one other datagram in turn.
            if let Some(skb) = this.next(Take::Answer) {
                this.process(skb, &landing, &replies);
                continue;
            }
            if !replies.is_empty() {
                if this.dead() {
                    replies.clear();
                } else {
                    replies.send_batch();
                }
            }
            // Every copy ends, and every READ is answered, before the
            // work item may go idle.
            let skb = match this.next(Take::Any) {
                Some(skb) => skb,
                None if !replies.is_empty() => continue,
                None => {
                    landing.settle_all();
                    match this.next(Take::AnyOrIdle) {
                        Some(skb) => skb,
                        None => break,
                    }
                }
            };
            this.process(skb, &landing, &replies);
        }
    }
}
