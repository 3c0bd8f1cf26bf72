// SPDX-License-Identifier: GPL-2.0

//! The verbs values that cross between ib_core and an RDMA driver: work
//! requests, work completions, QP attributes and device limits, with the
//! numeric constants of `<rdma/ib_verbs.h>` they use.
//!
//! The structures are `#[repr(C)]` mirrors of the flat structures in
//! `rust/helpers/ib_device.h`, which the C glue fills from, or turns into,
//! the real verbs structures.

pub use super::kernel_sgl::{KernelGather, KernelScatter, KernelSgl};

/// One scatter/gather entry of a work request (`struct ib_sge`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sge {
    /// Address in the memory region's address space (its IOVA).
    pub addr: u64,
    /// Bytes.
    pub length: u32,
    /// Local key of the memory region.
    pub lkey: u32,
}

/// Bytes of the network header in front of a datagram's payload.
pub const GRH_BYTES: usize = 40;

/// Where a datagram goes (`struct rust_ib_ud_dest`): resolved by the C
/// glue from the request's address handle when it was posted.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UdDest {
    /// The destination QP.
    pub remote_qpn: u32,
    /// The Q_Key the destination QP must have.
    pub remote_qkey: u32,
    /// Non-zero when the destination GID is one of the port's: the
    /// loopback fabric delivers nothing else.
    pub local: u32,
    /// `enum rdma_network_type` of `header`.
    pub net_type: u32,
    /// The network header the receiver finds before the payload.
    pub header: [u8; GRH_BYTES],
}

/// `struct rust_ib_send_wr`.
#[repr(C)]
pub(super) struct RawSendWr {
    pub(super) wr_id: u64,
    pub(super) sg_list: *const Sge,
    pub(super) num_sge: u32,
    pub(super) opcode: u32,
    pub(super) send_flags: u32,
    pub(super) imm_data: u32,
    pub(super) remote_addr: u64,
    pub(super) compare_add: u64,
    pub(super) swap: u64,
    pub(super) rkey: u32,
    pub(super) kernel: u32,
    pub(super) has_ud: u32,
    pub(super) ud: UdDest,
}

/// `struct rust_ib_recv_wr`.
#[repr(C)]
pub(super) struct RawRecvWr {
    pub(super) wr_id: u64,
    pub(super) sg_list: *const Sge,
    pub(super) num_sge: u32,
    pub(super) kernel: u32,
}

/// A send work request, valid for the `post_send` call that carries it.
pub struct SendWr<'a> {
    /// The consumer's identifier, returned in the completion.
    pub wr_id: u64,
    /// One of the [`wr_opcode`] values.
    pub opcode: u32,
    /// [`send_flags`] bits.
    pub send_flags: u32,
    /// Immediate data, big endian as posted.
    pub imm_data: u32,
    /// Remote address (RDMA opcodes).
    pub remote_addr: u64,
    /// Remote key (RDMA opcodes).
    pub rkey: u32,
    /// Atomics: the value compared (compare and swap) or added.
    pub compare_add: u64,
    /// Compare and swap: the value swapped in.
    pub swap: u64,
    /// The gather list.
    pub sges: &'a [Sge],
    /// The destination of a datagram QP's request.
    pub ud: Option<UdDest>,
    /// Posted by a kernel consumer (see [`SendWr::kernel_sgl`]).
    pub(super) kernel: bool,
}

impl SendWr<'_> {
    /// The gather list as kernel memory, if a kernel consumer posted the
    /// request and it has at most `N` entries.
    pub fn kernel_sgl<const N: usize>(&self) -> Option<KernelGather<N>> {
        if !self.kernel {
            return None;
        }
        // SAFETY: `kernel` is set only for requests a kernel consumer
        // posted, whose entries are kernel virtual addresses with the
        // local DMA lkey (the type's invariant).
        unsafe { KernelSgl::new(self.sges) }
    }
}

/// A receive work request, valid for the `post_recv` call that carries it.
pub struct RecvWr<'a> {
    /// The consumer's identifier, returned in the completion.
    pub wr_id: u64,
    /// The scatter list.
    pub sges: &'a [Sge],
    /// Posted by a kernel consumer (see [`RecvWr::kernel_sgl`]).
    pub(super) kernel: bool,
}

impl RecvWr<'_> {
    /// The scatter list as kernel memory, if a kernel consumer posted the
    /// request and it has at most `N` entries.
    pub fn kernel_sgl<const N: usize>(&self) -> Option<KernelScatter<N>> {
        if !self.kernel {
            return None;
        }
        // SAFETY: As in `SendWr::kernel_sgl`.
        unsafe { KernelSgl::new(self.sges) }
    }
}

/// The C glue's name for a QP: given to the driver in [`QpInit::handle`],
/// handed back in the QP's completions ([`Wc::qp_handle`]), where the glue
/// turns it back into the kernel consumer's `struct ib_qp`.
///
/// Only the glue makes one (a driver cannot build it from a number), so a
/// completion can name only a QP the core created, or none: the default
/// handle, which the glue never turns into a QP. A driver must still drop a
/// QP's completions when it destroys the QP (as ib_core requires of every
/// driver), since a kernel consumer's QP is freed after that.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QpHandle(u64);

/// A work completion (`struct rust_ib_wc`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Wc {
    /// The work request's identifier.
    pub wr_id: u64,
    /// One of the [`wc_status`] values.
    pub status: u32,
    /// One of the [`wc_opcode`] values.
    pub opcode: u32,
    /// Bytes transferred (receive side: bytes received).
    pub byte_len: u32,
    /// Immediate data, big endian, when `wc_flags` has [`WC_WITH_IMM`].
    pub imm_data: u32,
    /// The local QP.
    pub qp_num: u32,
    /// The remote QP (receive completions).
    pub src_qp: u32,
    /// `IB_WC_*` flags.
    pub wc_flags: u32,
    /// `enum rdma_network_type`, with [`WC_WITH_NETWORK_HDR_TYPE`].
    pub network_hdr_type: u32,
    /// The local QP's handle ([`QpInit::handle`]).
    pub qp_handle: QpHandle,
}

/// What `create_qp` asks for; the driver lowers the capabilities to what
/// it grants (`struct rust_ib_qp_init`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct QpInit {
    /// One of the [`qp_type`] values.
    pub qp_type: u32,
    /// Every send work request completes signalled.
    pub sq_sig_all: u32,
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter entries per receive work request.
    pub max_recv_sge: u32,
    /// Inline data per send work request.
    pub max_inline_data: u32,
    /// The QP receives from a shared receive queue.
    pub has_srq: u32,
    /// `IB_QP_CREATE_*` flags.
    pub create_flags: u32,
    /// Non-zero when a kernel consumer creates the QP.
    pub kernel: u32,
    /// The QP's handle, for its work completions ([`Wc::qp_handle`]).
    pub handle: QpHandle,
}

/// QP attributes, the fields an RC or GSI QP uses (`struct rust_ib_qp_attr`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct QpAttr {
    /// One of the [`qp_state`] values.
    pub qp_state: u32,
    /// The state the consumer believes the QP is in (`IB_QP_CUR_STATE`).
    pub cur_qp_state: u32,
    /// `enum ib_mtu`.
    pub path_mtu: u32,
    /// Q_Key (UD).
    pub qkey: u32,
    /// Receive PSN.
    pub rq_psn: u32,
    /// Send PSN.
    pub sq_psn: u32,
    /// The connected QP.
    pub dest_qp_num: u32,
    /// [`access`] bits granted to remote peers.
    pub qp_access_flags: u32,
    /// P_Key index.
    pub pkey_index: u32,
    /// Port.
    pub port_num: u32,
    /// Local ACK timeout (exponent).
    pub timeout: u32,
    /// Transport retries.
    pub retry_cnt: u32,
    /// RNR retries (7: forever).
    pub rnr_retry: u32,
    /// RNR NAK timer code.
    pub min_rnr_timer: u32,
    /// Outstanding RDMA READs as initiator.
    pub max_rd_atomic: u32,
    /// Outstanding RDMA READs as responder.
    pub max_dest_rd_atomic: u32,
    /// Destination GID (RoCE: every address vector has a GRH).
    pub dgid: [u8; 16],
    /// Source GID index.
    pub sgid_index: u32,
    /// GRH flow label.
    pub flow_label: u32,
    /// GRH hop limit.
    pub hop_limit: u32,
    /// GRH traffic class.
    pub traffic_class: u32,
    /// Non-zero when `dgid` is one of the port's GIDs (modify only).
    pub dest_local: u32,
    /// SQD: the send queue is still draining (query); asynchronous drain
    /// notification asked for (modify).
    pub sq_draining: u32,
    /// Send queue depth (`IB_QP_CAP`, query).
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Gather entries per send work request.
    pub max_send_sge: u32,
    /// Scatter entries per receive work request.
    pub max_recv_sge: u32,
    /// Inline data per send work request.
    pub max_inline_data: u32,
    /// Every send work request completes signalled (query only).
    pub sq_sig_all: u32,
    /// The source GID `sgid_index` names (modify, with the AV).
    pub sgid: [u8; 16],
}

/// Device limits reported by `query_device` (`struct rust_ib_caps`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Caps {
    /// Longest memory region.
    pub max_mr_size: u64,
    /// Node GUID (host order).
    pub node_guid: u64,
    /// QPs.
    pub max_qp: u32,
    /// Work requests per queue.
    pub max_qp_wr: u32,
    /// Scatter/gather entries per work request.
    pub max_sge: u32,
    /// CQs.
    pub max_cq: u32,
    /// Entries per CQ.
    pub max_cqe: u32,
    /// Memory regions.
    pub max_mr: u32,
    /// Protection domains.
    pub max_pd: u32,
    /// IEEE OUI.
    pub vendor_id: u32,
    /// Part number.
    pub vendor_part_id: u32,
    /// Hardware version.
    pub hw_ver: u32,
    /// How atomic operations are atomic: one of [`atomic_cap`].
    pub atomic_cap: u32,
    /// Shared receive queues (their entries are a QP's).
    pub max_srq: u32,
    /// Receive requests per shared receive queue.
    pub max_srq_wr: u32,
    /// Multicast groups (0: no multicast).
    pub max_mcast_grp: u32,
    /// QPs attached to one multicast group.
    pub max_mcast_qp_attach: u32,
}

/// The attributes of a shared receive queue (`struct rust_ib_srq_attr`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SrqAttr {
    /// Receive requests it holds.
    pub max_wr: u32,
    /// Scatter entries per receive request.
    pub max_sge: u32,
    /// The armed limit (0: not armed): below it, the SRQ raises
    /// `IB_EVENT_SRQ_LIMIT_REACHED` once.
    pub srq_limit: u32,
}

/// `enum ib_srq_attr_mask`.
pub mod srq_mask {
    /// `max_wr`: resize.
    pub const MAX_WR: u32 = 1 << 0;
    /// `srq_limit`: arm the limit.
    pub const LIMIT: u32 = 1 << 1;
}

/// `enum ib_atomic_cap`.
pub mod atomic_cap {
    /// No atomic operations.
    pub const NONE: u32 = 0;
    /// Atomic with respect to the other atomics of the same device.
    pub const HCA: u32 = 1;
}

/// `enum ib_wr_opcode`.
pub mod wr_opcode {
    /// RDMA WRITE.
    pub const RDMA_WRITE: u32 = 0;
    /// RDMA WRITE with immediate data.
    pub const RDMA_WRITE_WITH_IMM: u32 = 1;
    /// SEND.
    pub const SEND: u32 = 2;
    /// SEND with immediate data.
    pub const SEND_WITH_IMM: u32 = 3;
    /// RDMA READ.
    pub const RDMA_READ: u32 = 4;
    /// Atomic compare and swap of 8 bytes.
    pub const ATOMIC_CMP_AND_SWP: u32 = 5;
    /// Atomic fetch and add of 8 bytes.
    pub const ATOMIC_FETCH_AND_ADD: u32 = 6;
}

/// `enum ib_send_flags`.
pub mod send_flags {
    /// Wait for earlier RDMA READs before this request.
    pub const FENCE: u32 = 1;
    /// Complete with a work completion.
    pub const SIGNALED: u32 = 2;
    /// The receiver's solicited event.
    pub const SOLICITED: u32 = 4;
    /// The data is in the request itself.
    pub const INLINE: u32 = 8;
    /// Every flag a device without checksum offload takes.
    pub const ALL: u32 = FENCE | SIGNALED | SOLICITED | INLINE;
}

/// `enum ib_wc_status`.
pub mod wc_status {
    /// Success.
    pub const SUCCESS: u32 = 0;
    /// Local length error (the receive buffer is too short).
    pub const LOC_LEN_ERR: u32 = 1;
    /// Local QP operation error.
    pub const LOC_QP_OP_ERR: u32 = 2;
    /// Local protection error (bad lkey, PD, bounds or access).
    pub const LOC_PROT_ERR: u32 = 4;
    /// Flushed: the QP was in the error state.
    pub const WR_FLUSH_ERR: u32 = 5;
    /// Local access error.
    pub const LOC_ACCESS_ERR: u32 = 8;
    /// Remote invalid request (the receive buffer is too short).
    pub const REM_INV_REQ_ERR: u32 = 9;
    /// Remote access error (bad rkey, PD, bounds or access).
    pub const REM_ACCESS_ERR: u32 = 10;
    /// Remote operation error.
    pub const REM_OP_ERR: u32 = 11;
    /// Transport retries exhausted.
    pub const RETRY_EXC_ERR: u32 = 12;
    /// RNR retries exhausted (no receive posted at the peer).
    pub const RNR_RETRY_EXC_ERR: u32 = 13;
    /// Fatal error.
    pub const FATAL_ERR: u32 = 19;
    /// General error.
    pub const GENERAL_ERR: u32 = 21;
}

/// `enum ib_wc_opcode`.
pub mod wc_opcode {
    /// SEND.
    pub const SEND: u32 = 0;
    /// RDMA WRITE.
    pub const RDMA_WRITE: u32 = 1;
    /// RDMA READ.
    pub const RDMA_READ: u32 = 2;
    /// Atomic compare and swap.
    pub const COMP_SWAP: u32 = 3;
    /// Atomic fetch and add.
    pub const FETCH_ADD: u32 = 4;
    /// A receive.
    pub const RECV: u32 = 1 << 7;
    /// A receive consumed by an RDMA WRITE with immediate data.
    pub const RECV_RDMA_WITH_IMM: u32 = (1 << 7) + 1;
}

/// `IB_WC_GRH`: a datagram receive starts with its network header.
pub const WC_GRH: u32 = 1 << 0;
/// `IB_WC_WITH_IMM`: the completion carries immediate data.
pub const WC_WITH_IMM: u32 = 1 << 1;
/// `IB_WC_WITH_NETWORK_HDR_TYPE`: `network_hdr_type` is set.
pub const WC_WITH_NETWORK_HDR_TYPE: u32 = 1 << 6;

/// `enum rdma_network_type`: the network header of a RoCE datagram.
pub mod network_type {
    /// RoCEv2 over IPv4: the IPv4 header is in the last 20 bytes of the
    /// 40 in front of the payload.
    pub const IPV4: u32 = 2;
    /// RoCEv2 over IPv6: the 40 bytes are the IPv6 header.
    pub const IPV6: u32 = 3;
}

/// `enum ib_qp_state`.
pub mod qp_state {
    /// Reset.
    pub const RESET: u32 = 0;
    /// Initialized.
    pub const INIT: u32 = 1;
    /// Ready to receive.
    pub const RTR: u32 = 2;
    /// Ready to send.
    pub const RTS: u32 = 3;
    /// Send queue drained.
    pub const SQD: u32 = 4;
    /// Send queue error.
    pub const SQE: u32 = 5;
    /// Error.
    pub const ERR: u32 = 6;
}

/// `enum ib_qp_type`.
pub mod qp_type {
    /// The general services QP (QP1), which carries MADs.
    pub const GSI: u32 = 1;
    /// Reliable connected.
    pub const RC: u32 = 2;
    /// Unreliable connected.
    pub const UC: u32 = 3;
    /// Unreliable datagram.
    pub const UD: u32 = 4;
}

/// The Q_Key of QP1 (`IB_QP1_QKEY`).
pub const QP1_QKEY: u32 = 0x8001_0000;

/// `enum ib_qp_attr_mask`.
pub mod qp_mask {
    /// `qp_state`.
    pub const STATE: u32 = 1 << 0;
    /// `cur_qp_state`.
    pub const CUR_STATE: u32 = 1 << 1;
    /// `en_sqd_async_notify`.
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    /// `qp_access_flags`.
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    /// `pkey_index`.
    pub const PKEY_INDEX: u32 = 1 << 4;
    /// `port_num`.
    pub const PORT: u32 = 1 << 5;
    /// `qkey`.
    pub const QKEY: u32 = 1 << 6;
    /// The address vector (`dgid` and the GRH fields).
    pub const AV: u32 = 1 << 7;
    /// `path_mtu`.
    pub const PATH_MTU: u32 = 1 << 8;
    /// `timeout`.
    pub const TIMEOUT: u32 = 1 << 9;
    /// `retry_cnt`.
    pub const RETRY_CNT: u32 = 1 << 10;
    /// `rnr_retry`.
    pub const RNR_RETRY: u32 = 1 << 11;
    /// `rq_psn`.
    pub const RQ_PSN: u32 = 1 << 12;
    /// `max_rd_atomic`.
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    /// The alternate path.
    pub const ALT_PATH: u32 = 1 << 14;
    /// `min_rnr_timer`.
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    /// `sq_psn`.
    pub const SQ_PSN: u32 = 1 << 16;
    /// `max_dest_rd_atomic`.
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    /// `path_mig_state`.
    pub const PATH_MIG_STATE: u32 = 1 << 18;
    /// The capabilities.
    pub const CAP: u32 = 1 << 19;
    /// `dest_qp_num`.
    pub const DEST_QPN: u32 = 1 << 20;
}

/// `enum ib_access_flags`.
pub mod access {
    /// The local side may write (receive into, RDMA READ into).
    pub const LOCAL_WRITE: u32 = 1 << 0;
    /// Remote peers may RDMA WRITE.
    pub const REMOTE_WRITE: u32 = 1 << 1;
    /// Remote peers may RDMA READ.
    pub const REMOTE_READ: u32 = 1 << 2;
    /// Remote peers may use atomics.
    pub const REMOTE_ATOMIC: u32 = 1 << 3;
    /// Memory windows may be bound.
    pub const MW_BIND: u32 = 1 << 4;
    /// Remote peers may flush the region to global visibility.
    pub const FLUSH_GLOBAL: u32 = 1 << 8;
    /// Remote peers may flush the region to persistence.
    pub const FLUSH_PERSISTENT: u32 = 1 << 9;
    /// `IB_ACCESS_OPTIONAL` (`IB_UVERBS_ACCESS_OPTIONAL_RANGE`, bits 20
    /// to 29): hints a device may ignore, such as relaxed ordering.
    pub const OPTIONAL: u32 = 0x3ff0_0000;
}

/// `enum ib_cq_notify_flags`.
pub mod cq_notify {
    /// Next solicited completion.
    pub const SOLICITED: u32 = 1 << 0;
    /// Next completion.
    pub const NEXT_COMP: u32 = 1 << 1;
    /// The mask of the two above.
    pub const SOLICITED_MASK: u32 = 3;
    /// Return 1 if completions are already waiting.
    pub const REPORT_MISSED_EVENTS: u32 = 1 << 2;
}
