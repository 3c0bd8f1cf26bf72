// SPDX-License-Identifier: GPL-2.0

//! Datagrams: the GSI QP (QP1), on which ib_core's MAD layer carries the
//! connection manager's messages (what rdma_cm and `rping` connect with).
//!
//! A datagram goes to the QP its request names, on the port whose GID its
//! address handle names; the loopback fabric reaches only this port's
//! GIDs. Unreliable transport acknowledges nothing: the send completes
//! once the datagram has left, whether or not a receive took it. The
//! receiver finds the network header (`GRH_BYTES`) in front of the
//! payload and its completion says which kind (`network_hdr_type`), as
//! from rxe, so ib_core can build the reply's address from it.
//!
//! Both ends are kernel consumers' QPs: the data is kernel memory
//! (`KernelSgl`), copied by the CPU; MADs are 256 bytes.

use crate::rdma::types::{
    wc_opcode, wc_status, wr_opcode, Wc, GRH_BYTES, WC_GRH, WC_WITH_IMM, WC_WITH_NETWORK_HDR_TYPE,
};
use crate::{
    exec::Outcome,
    qp::{Qp, SendWqe},
    stats::Stats,
};
use kernel::sync::Arc;

/// A work request's Q_Key with this bit asks for the QP's own.
const QKEY_USE_QP: u32 = 0x8000_0000;

/// Sends the datagram of `wqe`, posted on `qp` (a GSI QP).
pub(crate) fn send(qp: &Arc<Qp>, wqe: &SendWqe) -> Outcome {
    let (Some(src), Some(ud)) = (wqe.kmem.as_ref(), wqe.ud.as_ref()) else {
        // Posting accepts no datagram without both.
        return Outcome::Failed(wc_status::LOC_QP_OP_ERR);
    };
    let Ok(byte_len) = u32::try_from(src.len()) else {
        return Outcome::Failed(wc_status::LOC_LEN_ERR);
    };
    let stats = &qp.dev.stats;
    let dropped = || {
        Stats::add(&stats.datagrams_dropped, 1);
        Outcome::Done(byte_len)
    };
    if ud.local == 0 {
        return dropped();
    }
    let Some(peer) = qp.dev.find_qp(ud.remote_qpn) else {
        return dropped();
    };
    // A Q_Key with its high bit set means the sending QP's own (what
    // ib_mad posts, IB_QP_SET_QKEY).
    let qkey = if ud.remote_qkey & QKEY_USE_QP != 0 {
        qp.qkey()
    } else {
        ud.remote_qkey
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
    let room = recv.kmem.as_ref().map_or(0, |d| d.len());
    let (Some(dst), true) = (
        recv.kmem.as_mut(),
        room >= GRH_BYTES as u64 + u64::from(byte_len),
    ) else {
        // Too short for the datagram: the receive fails, the send does not.
        wc.status = wc_status::LOC_LEN_ERR;
        peer.complete_recv(wc, false);
        return Outcome::Done(byte_len);
    };
    dst.write_at(0, &ud.header);
    src.copy_to(dst, GRH_BYTES as u64);
    Stats::add(&stats.datagrams, 1);
    Stats::add(&stats.cpu_bytes, u64::from(byte_len));
    wc.byte_len = GRH_BYTES as u32 + byte_len;
    wc.wc_flags = WC_GRH | WC_WITH_NETWORK_HDR_TYPE;
    wc.network_hdr_type = ud.net_type;
    if wqe.opcode == wr_opcode::SEND_WITH_IMM {
        wc.imm_data = wqe.imm_data;
        wc.wc_flags |= WC_WITH_IMM;
    }
    peer.complete_recv(wc, false);
    Outcome::Done(byte_len)
}
