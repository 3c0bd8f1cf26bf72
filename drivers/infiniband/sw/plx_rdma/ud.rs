// SPDX-License-Identifier: GPL-2.0

//! Datagrams: the GSI QP (QP1), on which ib_core's MAD layer carries the
//! connection manager's messages (what rdma_cm and `rping` connect with),
//! and the UD QPs of user space.
//!
//! A datagram goes to the QP its request names. To one of the port's own
//! GIDs it takes the loopback fabric (unless `wire_local`); to any other
//! address it goes on the wire as a RoCEv2 UD SEND (BTH, DETH with the
//! Q_Key and the sending QP, ImmDt, ICRC), as rxe sends the MADs of its
//! connection manager, and the device's UDP port takes the datagrams of
//! rxe's in turn. Unreliable transport acknowledges nothing: the send
//! completes once the datagram has left, whether or not a receive took it.
//! The receiver finds the network header (`GRH_BYTES`) in front of the
//! payload and its completion says which kind (`network_hdr_type`), as
//! from rxe, so ib_core can build the reply's address from it: on the
//! wire, the IPv4 or IPv6 header as received.
//!
//! A datagram is one packet, at most the path MTU: the CPU gathers it from
//! the sender's list (kernel memory for QP1, registered regions or inline
//! bytes for a user QP) and writes the header and it into the receive,
//! where a descriptor round trip would cost more than the copy. MADs are
//! 256 bytes.

use crate::rdma::types::{
    network_type, send_flags, wc_opcode, wc_status, wr_opcode, UdDest, Wc, GRH_BYTES, WC_GRH,
    WC_WITH_IMM, WC_WITH_NETWORK_HDR_TYPE,
};
use crate::{
    exec::{place_inline, resolve, resolve_recv, Outcome},
    net::{src_port, IpAddr, Path, WireStats},
    qp::{Qp, RecvWqe, SendWqe},
    rc::gather,
    stats::Stats,
    wire::{
        bth::Bth,
        ext::{Deth, ImmDt},
        ip::{Ipv4Header, Ipv6Header},
        opcode::code as op,
        packet::{ExtHeaders, Packet},
    },
};
use kernel::{prelude::*, sync::Arc};

/// A work request's Q_Key with this bit asks for the QP's own.
const QKEY_USE_QP: u32 = 0x8000_0000;

/// The bytes of the datagram of `wqe`, posted on `qp`; `Err` with the
/// completion status of a request whose list does not resolve.
fn gather_datagram(qp: &Qp, wqe: &SendWqe) -> core::result::Result<KVec<u8>, u32> {
    let len = usize::try_from(wqe.len()).map_err(|_| wc_status::LOC_LEN_ERR)?;
    let mut out = KVec::from_elem(0u8, len, GFP_KERNEL).map_err(|_| wc_status::LOC_QP_OP_ERR)?;
    match (&wqe.inline, &wqe.kmem) {
        (Some(bytes), _) => out.copy_from_slice(bytes),
        (None, Some(k)) => {
            k.read_at(0, &mut out);
        }
        (None, None) => {
            let src = resolve(qp, wqe.sges(), 0).map_err(|()| wc_status::LOC_PROT_ERR)?;
            gather(&src, 0, &mut out).map_err(|_| wc_status::LOC_PROT_ERR)?;
        }
    }
    Ok(out)
}

/// Writes a datagram, its network `header` then its `payload`, into the
/// receive `recv` of `qp`: the total written, or the receive's completion
/// status (too short, or a list that does not resolve).
fn write_datagram(
    qp: &Qp,
    recv: &mut RecvWqe,
    header: &[u8; GRH_BYTES],
    payload: &[u8],
) -> core::result::Result<u32, u32> {
    let need = GRH_BYTES + payload.len();
    let total = u32::try_from(need).map_err(|_| wc_status::LOC_LEN_ERR)?;
    if let Some(dst) = recv.kmem.as_mut() {
        if dst.len() < need as u64 {
            return Err(wc_status::LOC_LEN_ERR);
        }
        dst.write_at(0, header);
        dst.write_at(GRH_BYTES as u64, payload);
        return Ok(total);
    }
    let room: u64 = recv.sges().iter().map(|s| u64::from(s.length)).sum();
    if room < need as u64 {
        return Err(wc_status::LOC_LEN_ERR);
    }
    let dst = resolve_recv(qp, recv.sges()).map_err(|()| wc_status::LOC_PROT_ERR)?;
    let mut bytes = KVec::with_capacity(need, GFP_KERNEL).map_err(|_| wc_status::LOC_QP_OP_ERR)?;
    bytes
        .extend_from_slice(header, GFP_KERNEL)
        .and_then(|()| bytes.extend_from_slice(payload, GFP_KERNEL))
        .map_err(|_| wc_status::LOC_QP_OP_ERR)?;
    place_inline(&dst, &bytes).map_err(|_| wc_status::LOC_PROT_ERR)?;
    Ok(total)
}

/// Sends the datagram of `wqe`, posted on `qp` (GSI or UD).
pub(crate) fn send(qp: &Arc<Qp>, wqe: &SendWqe) -> Outcome {
    let Some(ud) = wqe.ud.as_ref() else {
        // Posting accepts no datagram without an address.
        return Outcome::Failed(wc_status::LOC_QP_OP_ERR);
    };
    let Ok(byte_len) = u32::try_from(wqe.len()) else {
        return Outcome::Failed(wc_status::LOC_LEN_ERR);
    };
    let stats = &qp.dev.stats;
    let dropped = || {
        Stats::add(&stats.datagrams_dropped, 1);
        Outcome::Done(byte_len)
    };
    // A datagram is one packet. One longer than the port's MTU sends
    // nothing and is no error (IBA C10-93.1.1), as in rxe.
    if byte_len as usize > qp.dev.mtu_cap() {
        return dropped();
    }
    let src = match gather_datagram(qp, wqe) {
        Ok(b) => b,
        Err(status) => return Outcome::Failed(status),
    };
    // A Q_Key with its high bit set means the sending QP's own (what
    // ib_mad posts, IB_QP_SET_QKEY).
    let qkey = if ud.remote_qkey & QKEY_USE_QP != 0 {
        qp.qkey()
    } else {
        ud.remote_qkey
    };
    if ud.local == 0 || qp.dev.wire_local {
        return send_wire(qp, wqe, &src, ud, qkey);
    }
    let Some(peer) = qp.dev.find_qp(ud.remote_qpn) else {
        return dropped();
    };
    if !peer.accepts_datagram(qkey) {
        return dropped();
    }
    let Some(mut recv) = peer.take_recv() else {
        return dropped();
    };
    let mut wc = Wc {
        wr_id: recv.wr_id,
        status: wc_status::SUCCESS,
        opcode: wc_opcode::RECV,
        qp_num: peer.qpn,
        src_qp: qp.qpn,
        ..Wc::default()
    };
    wc.byte_len = match write_datagram(&peer, &mut recv, &ud.header, &src) {
        Ok(n) => n,
        Err(status) => {
            // The receive fails (too short, say), the send does not.
            wc.status = status;
            peer.complete_recv(wc, false);
            return Outcome::Done(byte_len);
        }
    };
    Stats::add(&stats.datagrams, 1);
    Stats::add(&stats.cpu_bytes, u64::from(byte_len));
    wc.wc_flags = WC_GRH | WC_WITH_NETWORK_HDR_TYPE;
    wc.network_hdr_type = ud.net_type;
    if wqe.opcode == wr_opcode::SEND_WITH_IMM {
        wc.imm_data = wqe.imm_data;
        wc.wc_flags |= WC_WITH_IMM;
    }
    peer.complete_recv(wc, false);
    Outcome::Done(byte_len)
}

/// Where a datagram addressed by `ud` goes on the wire (the addresses and
/// the header's traffic class and hop limit come from the network header
/// the address handle built).
fn wire_path(qp: &Qp, ud: &UdDest, mtu: usize) -> Option<Path> {
    let (src, dst, tos, ttl) = if ud.net_type == network_type::IPV4 {
        // The IPv4 header sits in the last 20 bytes (`rdma_network_hdr`).
        let ip = ud.header.get(GRH_BYTES - Ipv4Header::LEN..)?;
        let addr = |at: usize| -> Option<[u8; 4]> { ip.get(at..at + 4)?.try_into().ok() };
        let (src, dst) = (addr(12)?, addr(16)?);
        (IpAddr::V4(src), IpAddr::V4(dst), *ip.get(1)?, *ip.get(8)?)
    } else if ud.net_type == network_type::IPV6 {
        // The whole header is the IPv6 one (a GRH).
        let ip = ud.header.get(..Ipv6Header::LEN)?;
        let addr = |at: usize| -> Option<[u8; 16]> { ip.get(at..at + 16)?.try_into().ok() };
        let (src, dst) = (addr(8)?, addr(24)?);
        // The traffic class straddles bytes 0 and 1.
        let tos = (ip.first()? << 4) | (ip.get(1)? >> 4);
        (IpAddr::V6(src), IpAddr::V6(dst), tos, *ip.get(7)?)
    } else {
        return None;
    };
    Some(Path {
        src,
        dst,
        dest_qp: ud.remote_qpn,
        src_port: src_port(qp.qpn),
        tos,
        ttl: match ttl {
            0 => 64,
            t => t,
        },
        local: ud.local != 0,
        oif: qp.dev.ifindex,
        mtu,
    })
}

/// Sends the datagram of `wqe` as one RoCEv2 UD SEND; the device's port
/// is taken now if the QP holds none yet (another stack had it).
fn send_wire(qp: &Arc<Qp>, wqe: &SendWqe, src: &[u8], ud: &UdDest, qkey: u32) -> Outcome {
    let byte_len = src.len() as u64;
    let dropped = || {
        Stats::add(&qp.dev.stats.datagrams_dropped, 1);
        Outcome::Done(byte_len as u32)
    };
    let Ok(port) = qp.attach_port() else {
        return dropped();
    };
    let Some(path) = wire_path(qp, ud, qp.dev.mtu_cap()) else {
        return dropped();
    };
    if byte_len > path.mtu as u64 {
        return dropped();
    }
    let imm = wqe.opcode == wr_opcode::SEND_WITH_IMM;
    let psn = {
        let mut st = qp.state.lock();
        let psn = st.rc.sq_psn;
        st.rc.sq_psn = psn.next();
        psn
    };
    let bth = Bth {
        opcode: if imm {
            op::UD_SEND_ONLY_WITH_IMMEDIATE
        } else {
            op::UD_SEND_ONLY
        },
        solicited: wqe.flags & send_flags::SOLICITED != 0,
        pkey: Bth::DEFAULT_PKEY,
        dest_qp: ud.remote_qpn,
        psn,
        ..Bth::default()
    };
    let ext = ExtHeaders {
        deth: Some(Deth {
            qkey,
            src_qp: qp.qpn,
        }),
        imm_dt: imm.then_some(ImmDt(u32::from_be(wqe.imm_data))),
        ..ExtHeaders::default()
    };
    let fill = |out: &mut [u8]| {
        out.copy_from_slice(src.get(..out.len()).ok_or(EFAULT)?);
        Ok(())
    };
    // Unreliable: a datagram the stack could not send is lost, as one
    // lost on the wire would be (counted in `tx_errors`).
    let _ = port.send(
        &qp.dev.wire_stats,
        &path,
        &bth,
        &ext,
        byte_len as usize,
        fill,
    );
    Stats::add(&qp.dev.stats.datagrams, 1);
    Stats::add(&qp.dev.stats.cpu_bytes, byte_len);
    Outcome::Done(byte_len as u32)
}

/// A UD SEND from the wire for `qp`, a datagram QP; `ip` is the IPv4 or
/// IPv6 header it came with. Returns whether a receive took it.
pub(crate) fn on_datagram(qp: &Qp, ip: &[u8], pkt: &Packet<'_>) -> bool {
    let stats = &qp.dev.wire_stats;
    let Some(deth) = pkt.ext.deth else {
        WireStats::inc(&stats.rx_drop_bad_header);
        return false;
    };
    if !qp.accepts_datagram(deth.qkey) {
        WireStats::inc(&stats.rx_drop_qkey);
        return false;
    }
    // The receiver finds an IPv4 header in the last 20 bytes of the
    // network header, an IPv6 one filling it.
    let (ip_len, net_type) = match ip.first().map(|b| b >> 4) {
        Some(4) => (Ipv4Header::LEN, network_type::IPV4),
        _ => (Ipv6Header::LEN, network_type::IPV6),
    };
    let Some(ip) = ip.get(..ip_len) else {
        WireStats::inc(&stats.rx_drop_bad_header);
        return false;
    };
    let Some(mut recv) = qp.take_recv() else {
        WireStats::inc(&stats.rx_drop_no_recv);
        return false;
    };
    let payload = pkt.payload();
    let mut wc = Wc {
        wr_id: recv.wr_id,
        status: wc_status::SUCCESS,
        opcode: wc_opcode::RECV,
        qp_num: qp.qpn,
        src_qp: deth.src_qp,
        ..Wc::default()
    };
    let mut header = [0u8; GRH_BYTES];
    header[GRH_BYTES - ip_len..].copy_from_slice(ip);
    wc.byte_len = match write_datagram(qp, &mut recv, &header, payload) {
        Ok(n) => n,
        Err(status) => {
            // Too short for the datagram, say: the receive fails.
            wc.status = status;
            qp.complete_recv(wc, false);
            return true;
        }
    };
    WireStats::inc(&stats.rx_datagrams);
    Stats::add(&qp.dev.stats.cpu_bytes, payload.len() as u64);
    wc.wc_flags = WC_GRH | WC_WITH_NETWORK_HDR_TYPE;
    wc.network_hdr_type = net_type;
    if let Some(imm) = pkt.ext.imm_dt {
        wc.imm_data = imm.0.to_be();
        wc.wc_flags |= WC_WITH_IMM;
    }
    qp.complete_recv(wc, pkt.bth.solicited);
    true
}
