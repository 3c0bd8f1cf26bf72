// SPDX-License-Identifier: GPL-2.0

//! Queue pairs: the verbs state machine, the send and receive queues, and
//! the work item that executes the send queue.
//!
//! User space gets reliable- and unreliable-connected and
//! unreliable-datagram QPs; kernel
//! consumers get the GSI QP (QP1) that ib_core's MAD layer opens on the
//! port, a datagram QP whose requests carry kernel memory (`KernelSgl`).
//! A datagram request carries its address (`UdDest`, from the address
//! handle).
//!
//! Posting only checks the request and queues it (it must not sleep); the
//! QP's work item then executes the send queue in order (see `exec`),
//! because a request may wait for the engine, and for the peer to post a
//! receive. Completions go to the QP's CQs as each request ends.
//!
//! # States
//!
//! Transitions and the attributes each one requires or allows are those
//! of ib_core's `ib_modify_qp_is_ok` (RESET→INIT→RTR→RTS, SQD, SQE, ERR,
//! and back to RESET), as in rxe. Entering ERR flushes every queued
//! request with `IB_WC_WR_FLUSH_ERR`; entering RESET discards them.

use crate::module_queue::{self, QueueKind};
use crate::rdma::{
    device::modify_qp_is_ok,
    types::{
        access, qp_mask, qp_state, qp_type, send_flags, wc_opcode, wc_status, wr_opcode,
        KernelGather, KernelScatter, QpAttr, QpHandle, QpInit, RecvWr, SendWr, Sge, UdDest, Wc,
    },
};
use crate::{
    atomic::{self, AtomicOp, ATOMIC_LEN},
    cq::Cq,
    exec::Runner,
    net::{src_port, Path, Port},
    pd::Pd,
    rc::RcState,
    srq::Srq,
    stats::Stats,
    wq::WorkQueue,
    Device,
};
use kernel::{
    alloc::flags::GFP_KERNEL_ACCOUNT,
    impl_has_work, new_condvar, new_spinlock, new_work,
    prelude::*,
    sync::{Arc, CondVar, SpinLock},
    uaccess::{UserPtr, UserSlice},
    workqueue::{Work, WorkItem},
};

/// Scatter/gather entries per work request.
pub(crate) const MAX_SGE: u32 = 8;
/// Work requests per queue.
pub(crate) const MAX_WR: u32 = 1024;
/// Highest `path_mtu` (`IB_MTU_4096`).
const MAX_MTU: u32 = 5;
/// Outstanding RDMA READs, either side: rxe's figure, since perftest
/// gives a QP the peer's value (a READ is replayed from the region, so
/// the responder keeps no state per outstanding READ). Mirrored by the
/// device attributes in `rust/helpers/ib_device.c`.
const MAX_RD_ATOMIC: u32 = 128;
/// The most inline data a send request may carry (`max_inline_data`).
pub(crate) const MAX_INLINE: u32 = 256;
/// Access bits a QP may grant its peer: every right verbs defines for a
/// QP, as rxe takes them. Those of operations the device does not carry
/// (binding windows, FLUSH) grant nothing, since such requests are refused
/// at post; refusing the bits instead fails applications that set them
/// all by habit (rdma-core's own tests among them) before any traffic.
const QP_ACCESS: u32 = access::LOCAL_WRITE
    | access::REMOTE_WRITE
    | access::REMOTE_READ
    | access::REMOTE_ATOMIC
    | access::MW_BIND
    | access::FLUSH_GLOBAL
    | access::FLUSH_PERSISTENT;

/// A kernel consumer's gather or scatter list.
/// A kernel consumer's send list.
pub(crate) type KernelSendList = KernelGather<{ MAX_SGE as usize }>;
/// A kernel consumer's receive list.
pub(crate) type KernelRecvList = KernelScatter<{ MAX_SGE as usize }>;

/// A queued send work request.
pub(crate) struct SendWqe {
    pub(crate) wr_id: u64,
    pub(crate) opcode: u32,
    pub(crate) flags: u32,
    pub(crate) imm_data: u32,
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    /// An atomic request's operation.
    pub(crate) atomic: Option<AtomicOp>,
    pub(crate) sges: [Sge; MAX_SGE as usize],
    pub(crate) num_sge: usize,
    /// A datagram's destination (GSI QP).
    pub(crate) ud: Option<UdDest>,
    /// The gather list as kernel memory (kernel QP).
    pub(crate) kmem: Option<KernelSendList>,
    /// An inline request's bytes, copied at post time; its gather list
    /// then names no region.
    pub(crate) inline: Option<KVec<u8>>,
}

impl SendWqe {
    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sges[..self.num_sge]
    }

    /// Bytes the request moves.
    pub(crate) fn len(&self) -> u64 {
        match &self.inline {
            Some(b) => b.len() as u64,
            None => self.sges().iter().map(|s| u64::from(s.length)).sum(),
        }
    }

    /// The opcode of its work completion.
    pub(crate) fn wc_opcode(&self) -> u32 {
        match self.opcode {
            wr_opcode::RDMA_WRITE | wr_opcode::RDMA_WRITE_WITH_IMM => wc_opcode::RDMA_WRITE,
            wr_opcode::RDMA_READ => wc_opcode::RDMA_READ,
            wr_opcode::ATOMIC_CMP_AND_SWP => wc_opcode::COMP_SWAP,
            wr_opcode::ATOMIC_FETCH_AND_ADD => wc_opcode::FETCH_ADD,
            _ => wc_opcode::SEND,
        }
    }
}

/// A queued receive work request.
pub(crate) struct RecvWqe {
    pub(crate) wr_id: u64,
    pub(crate) sges: [Sge; MAX_SGE as usize],
    pub(crate) num_sge: usize,
    /// The scatter list as kernel memory (kernel QP).
    pub(crate) kmem: Option<KernelRecvList>,
}

impl RecvWqe {
    pub(crate) fn sges(&self) -> &[Sge] {
        &self.sges[..self.num_sge]
    }
}

pub(crate) struct QpState {
    pub(crate) state: u32,
    pub(crate) attr: QpAttr,
    pub(crate) sq: WorkQueue<SendWqe>,
    pub(crate) rq: WorkQueue<RecvWqe>,
    /// The work item is queued or running.
    worker: bool,
    /// Being destroyed: the work item stops, nothing completes any more.
    dead: bool,
    /// The transport's state on the wire.
    pub(crate) rc: RcState,
    /// Resets so far: what was under way before one is not continued.
    pub(crate) epoch: u32,
    /// The device's UDP port, once the QP is connected over the wire.
    port: Option<Arc<Port>>,
}

impl QpState {
    /// Being destroyed.
    pub(crate) fn dead(&self) -> bool {
        self.dead
    }
}

/// A queue pair: reliable connected (user), or GSI (kernel).
#[pin_data]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    /// `qp_type::RC`, `qp_type::UC`, `qp_type::UD` or `qp_type::GSI`.
    pub(crate) qp_type: u32,
    /// Created by a kernel consumer.
    pub(crate) kernel: bool,
    /// The C glue's handle, for the completions.
    handle: QpHandle,
    pub(crate) pd: Arc<Pd>,
    /// The shared receive queue it takes its receives from, if any.
    pub(crate) srq: Option<Arc<Srq>>,
    pub(crate) scq: Arc<Cq>,
    pub(crate) rcq: Arc<Cq>,
    pub(crate) dev: Arc<Device>,
    sq_sig_all: bool,
    #[pin]
    pub(crate) state: SpinLock<QpState>,
    /// Woken, under `state`, when the work item goes idle: what
    /// [`Self::shut_down`] waits for.
    #[pin]
    worker_idle: CondVar,
    /// Woken, under `state`, when an answer to the outstanding request
    /// came from the wire, or the QP left RTS or is being destroyed.
    #[pin]
    pub(crate) answered: CondVar,
    #[pin]
    work: Work<Qp>,
}

impl_has_work! {
    impl HasWork<Self> for Qp { self.work }
}

/// Lowers a requested capacity to what is granted; `EINVAL` above `max`.
fn grant(want: u32, max: u32) -> Result<u32> {
    if want > max {
        return Err(EINVAL);
    }
    Ok(want)
}

impl Qp {
    /// Creates QP number `qpn`, in RESET.
    pub(crate) fn new(
        dev: Arc<Device>,
        qpn: u32,
        pd: Arc<Pd>,
        scq: Arc<Cq>,
        rcq: Arc<Cq>,
        srq: Option<Arc<Srq>>,
        init: &mut QpInit,
    ) -> Result<Arc<Self>> {
        // User verbs get RC and UD QPs; the kernel side only runs the MAD
        // layer (GSI), which addresses memory by kernel virtual address.
        let kernel = init.kernel != 0;
        let ok = match init.qp_type {
            qp_type::RC | qp_type::UC | qp_type::UD => !kernel,
            qp_type::GSI => kernel,
            _ => false,
        };
        if !ok {
            return Err(EOPNOTSUPP);
        }
        if init.create_flags != 0 || (init.has_srq != 0) != srq.is_some() {
            return Err(EOPNOTSUPP);
        }
        init.max_send_wr = grant(init.max_send_wr, MAX_WR)?.max(1);
        // A QP on an SRQ has no receive queue of its own (verbs ignores
        // the receive capabilities then, and reports none).
        if srq.is_some() {
            init.max_recv_wr = 0;
            init.max_recv_sge = 0;
        }
        init.max_recv_wr = grant(init.max_recv_wr, MAX_WR)?;
        init.max_send_sge = grant(init.max_send_sge, MAX_SGE)?;
        init.max_recv_sge = grant(init.max_recv_sge, MAX_SGE)?;
        // Inline data is copied from the poster's memory at post time
        // (user QPs only: the GSI QP's consumer never asks for it).
        init.max_inline_data = match kernel {
            false => grant(init.max_inline_data, MAX_INLINE)?,
            true if init.max_inline_data == 0 => 0,
            true => return Err(EINVAL),
        };
        let sq = WorkQueue::new(init.max_send_wr as usize)?;
        let rq = WorkQueue::new(init.max_recv_wr as usize)?;
        let attr = QpAttr {
            qp_state: qp_state::RESET,
            port_num: 1,
            path_mtu: MAX_MTU,
            max_send_wr: init.max_send_wr,
            max_recv_wr: init.max_recv_wr,
            max_send_sge: init.max_send_sge,
            max_recv_sge: init.max_recv_sge,
            max_inline_data: init.max_inline_data,
            sq_sig_all: init.sq_sig_all,
            ..QpAttr::default()
        };
        Arc::pin_init(
            try_pin_init!(Self {
                qpn,
                qp_type: init.qp_type,
                kernel,
                handle: init.handle,
                pd,
                srq,
                scq,
                rcq,
                dev,
                sq_sig_all: init.sq_sig_all != 0,
                state <- new_spinlock!(QpState {
                    state: qp_state::RESET,
                    attr,
                    sq,
                    rq,
                    worker: false,
                    dead: false,
                    rc: RcState::new(),
                    epoch: 0,
                    port: None,
                }, "plx_rdma_qp"),
                worker_idle <- new_condvar!("plx_rdma_qp::worker_idle"),
                answered <- new_condvar!("plx_rdma_qp::answered"),
                work <- new_work!("plx_rdma_qp::work"),
            }),
            GFP_KERNEL,
        )
    }

    /// Whether a completed send request produces a work completion.
    pub(crate) fn signaled(&self, wqe: &SendWqe) -> bool {
        self.sq_sig_all || wqe.flags & send_flags::SIGNALED != 0
    }

    /// Applies `attr` as `mask` selects, refusing what ib_core's state
    /// machine or the device's limits forbid (`EINVAL`), as rxe does.
    pub(crate) fn modify(self: &Arc<Self>, attr: &QpAttr, mask: u32) -> Result {
        // An RC QP whose address vector names another host (or, with
        // `wire_local`, any GID) talks over the wire: the device's UDP
        // port is opened first, which may sleep and may fail (another
        // RoCE stack owns it).
        let wire = self.is_connected()
            && mask & qp_mask::AV != 0
            && (attr.dest_local == 0 || self.dev.wire_local);
        if wire {
            self.attach_port()?;
        }
        let mut st = self.state.lock();
        let cur = if mask & qp_mask::CUR_STATE != 0 {
            attr.cur_qp_state
        } else {
            st.state
        };
        let next = if mask & qp_mask::STATE != 0 {
            attr.qp_state
        } else {
            cur
        };
        if !modify_qp_is_ok(cur, next, self.qp_type, mask) {
            return Err(EINVAL);
        }
        if mask & qp_mask::PORT != 0 && attr.port_num != 1 {
            return Err(EINVAL);
        }
        if mask & qp_mask::ACCESS_FLAGS != 0 && attr.qp_access_flags & !QP_ACCESS != 0 {
            return Err(EINVAL);
        }
        if mask & qp_mask::PATH_MTU != 0 && (attr.path_mtu == 0 || attr.path_mtu > MAX_MTU) {
            return Err(EINVAL);
        }
        if mask & qp_mask::TIMEOUT != 0 && attr.timeout > 31 {
            return Err(EINVAL);
        }
        if mask & qp_mask::MAX_QP_RD_ATOMIC != 0 && attr.max_rd_atomic > MAX_RD_ATOMIC {
            return Err(EINVAL);
        }
        if mask & qp_mask::MAX_DEST_RD_ATOMIC != 0 && attr.max_dest_rd_atomic > MAX_RD_ATOMIC {
            return Err(EINVAL);
        }
        if mask & qp_mask::CAP != 0
            && (attr.max_send_wr > st.attr.max_send_wr
                || attr.max_recv_wr > st.attr.max_recv_wr
                || attr.max_send_sge > st.attr.max_send_sge
                || attr.max_recv_sge > st.attr.max_recv_sge
                || attr.max_inline_data > st.attr.max_inline_data)
        {
            return Err(EINVAL);
        }
        let a = &mut st.attr;
        let take = |bit: u32| mask & bit != 0;
        if take(qp_mask::ACCESS_FLAGS) {
            a.qp_access_flags = attr.qp_access_flags;
        }
        if take(qp_mask::PKEY_INDEX) {
            a.pkey_index = attr.pkey_index;
        }
        if take(qp_mask::QKEY) {
            a.qkey = attr.qkey;
        }
        if take(qp_mask::AV) {
            a.dgid = attr.dgid;
            a.sgid = attr.sgid;
            a.sgid_index = attr.sgid_index;
            a.flow_label = attr.flow_label;
            a.hop_limit = attr.hop_limit;
            a.traffic_class = attr.traffic_class;
            a.dest_local = attr.dest_local;
        }
        if take(qp_mask::PATH_MTU) {
            a.path_mtu = attr.path_mtu;
        }
        if take(qp_mask::TIMEOUT) {
            a.timeout = attr.timeout;
        }
        if take(qp_mask::RETRY_CNT) {
            a.retry_cnt = attr.retry_cnt & 7;
        }
        if take(qp_mask::RNR_RETRY) {
            a.rnr_retry = attr.rnr_retry & 7;
        }
        if take(qp_mask::RQ_PSN) {
            a.rq_psn = attr.rq_psn & 0xff_ffff;
        }
        if take(qp_mask::SQ_PSN) {
            a.sq_psn = attr.sq_psn & 0xff_ffff;
        }
        let (rq_psn, sq_psn) = (a.rq_psn, a.sq_psn);
        if take(qp_mask::RQ_PSN) {
            st.rc.epsn = crate::wire::psn::Psn::new(rq_psn);
        }
        if take(qp_mask::SQ_PSN) {
            st.rc.sq_psn = crate::wire::psn::Psn::new(sq_psn);
        }
        let a = &mut st.attr;
        if take(qp_mask::MAX_QP_RD_ATOMIC) {
            a.max_rd_atomic = attr.max_rd_atomic;
        }
        if take(qp_mask::MAX_DEST_RD_ATOMIC) {
            a.max_dest_rd_atomic = attr.max_dest_rd_atomic;
        }
        if take(qp_mask::MIN_RNR_TIMER) {
            a.min_rnr_timer = attr.min_rnr_timer & 0x1f;
        }
        if take(qp_mask::DEST_QPN) {
            a.dest_qp_num = attr.dest_qp_num & 0xff_ffff;
        }
        if take(qp_mask::EN_SQD_ASYNC_NOTIFY) {
            a.sq_draining = attr.sq_draining;
        }
        if mask & qp_mask::STATE == 0 {
            return Ok(());
        }
        st.state = next;
        st.attr.qp_state = next;
        match next {
            qp_state::RESET => {
                while st.sq.pop().is_some() {}
                while st.rq.pop().is_some() {}
                st.rc.reset();
                st.epoch = st.epoch.wrapping_add(1);
            }
            qp_state::ERR => {
                self.answered.notify_all();
                drop(st);
                self.flush_recv();
                self.kick_if_more();
            }
            // Requests queued in SQD go on; with none, the work item stays
            // idle, and the next short request runs in its poster's call.
            qp_state::RTS => {
                drop(st);
                self.kick_if_more();
            }
            _ => {}
        }
        Ok(())
    }

    /// Reports the attributes.
    pub(crate) fn query(&self, out: &mut QpAttr) {
        let st = self.state.lock();
        *out = st.attr;
        out.qp_state = st.state;
        out.sq_draining = u32::from(st.state == qp_state::SQD && !st.sq.is_empty());
    }

    /// The bytes of an inline request, read from the poster's memory now
    /// (its keys are not looked at: verbs lets the buffer be reused as
    /// soon as the post returns). `EINVAL` for a kernel QP, an RDMA READ
    /// or more than [`MAX_INLINE`] bytes, `EFAULT` for memory the poster
    /// cannot read.
    fn read_inline(&self, wr: &SendWr<'_>) -> Result<KVec<u8>> {
        if self.kernel || wr.opcode == wr_opcode::RDMA_READ {
            return Err(EINVAL);
        }
        let total: u64 = wr.sges.iter().map(|s| u64::from(s.length)).sum();
        if total > u64::from(MAX_INLINE) {
            return Err(EINVAL);
        }
        let mut bytes = KVec::with_capacity(total as usize, GFP_KERNEL_ACCOUNT)?;
        for s in wr.sges.iter().filter(|s| s.length != 0) {
            let addr = usize::try_from(s.addr).map_err(|_| EFAULT)?;
            UserSlice::new(UserPtr::from_addr(addr), s.length as usize)
                .read_all(&mut bytes, GFP_KERNEL_ACCOUNT)?;
        }
        Ok(bytes)
    }

    /// Queues a send request; `EINVAL` before RTS or for a request the
    /// device does not take (an unknown opcode or flag among them),
    /// `ENOMEM` when the send queue is full.
    pub(crate) fn post_send(self: &Arc<Self>, wr: &SendWr<'_>) -> Result {
        if wr.send_flags & !send_flags::ALL != 0 {
            return Err(EINVAL);
        }
        // Read before the lock: reading the poster's memory may fault.
        let inline = match wr.send_flags & send_flags::INLINE {
            0 => None,
            _ => Some(self.read_inline(wr)?),
        };
        let mut st = self.state.lock();
        if st.dead {
            return Err(EINVAL);
        }
        // Requests may be queued in RTS and SQD, and in ERR, where they
        // are flushed; before RTS there is no send queue yet.
        if !matches!(st.state, qp_state::RTS | qp_state::SQD | qp_state::ERR) {
            return Err(EINVAL);
        }
        let datagram = self.is_datagram();
        let reliable = self.qp_type == qp_type::RC;
        let atomic = AtomicOp::of_wr(wr.opcode, wr.compare_add, wr.swap);
        match wr.opcode {
            wr_opcode::SEND | wr_opcode::SEND_WITH_IMM => {}
            wr_opcode::RDMA_WRITE | wr_opcode::RDMA_WRITE_WITH_IMM if !datagram => {}
            // READs and atomics need answers: RC only (as rxe refuses
            // them on UC at post).
            wr_opcode::RDMA_READ if reliable => {}
            // Eight bytes come back into the list, from an aligned
            // target; no inline data (rxe's provider refuses the same at
            // post).
            _ if atomic.is_some() && reliable => {
                let len: u64 = wr.sges.iter().map(|s| u64::from(s.length)).sum();
                if len < ATOMIC_LEN || !atomic::aligned(wr.remote_addr) || inline.is_some() {
                    return Err(EINVAL);
                }
            }
            _ => return Err(EINVAL),
        }
        if wr.sges.len() > st.attr.max_send_sge as usize
            || inline
                .as_ref()
                .is_some_and(|b| b.len() > st.attr.max_inline_data as usize)
        {
            return Err(EINVAL);
        }
        let kmem = wr.kernel_sgl();
        // A kernel QP's list is kernel memory, and a datagram has an address.
        if self.kernel != kmem.is_some() || datagram != wr.ud.is_some() {
            return Err(EINVAL);
        }
        let mut wqe = SendWqe {
            wr_id: wr.wr_id,
            opcode: wr.opcode,
            flags: wr.send_flags,
            imm_data: wr.imm_data,
            remote_addr: wr.remote_addr,
            rkey: wr.rkey,
            atomic,
            sges: [Sge::default(); MAX_SGE as usize],
            num_sge: wr.sges.len(),
            ud: wr.ud,
            kmem,
            inline,
        };
        wqe.sges[..wr.sges.len()].copy_from_slice(wr.sges);
        st.sq.push(wqe)?;
        if st.state == qp_state::SQD {
            return Ok(());
        }
        // A user's request on the loopback fabric may run right here, in
        // its system call, if the queue's worker is idle: waking a worker
        // and waiting for its turn costs more than a short request (and a
        // busy-polling user holds the CPU the worker would need). A kernel
        // caller may post in atomic context; datagrams and the wire have
        // their own paths.
        let here = !self.kernel
            && !datagram
            && st.port.is_none()
            && st.state == qp_state::RTS
            && !st.worker;
        if here {
            st.worker = true;
        }
        drop(st);
        if here {
            crate::exec::run_send_queue(self, Runner::Poster);
            self.kick_if_more();
        } else {
            self.kick();
        }
        Ok(())
    }

    /// Whether the thread that posted `wqe` may execute it: its bytes are
    /// few enough for the CPU (inline, or under `copy_engine_min`), so it
    /// never waits for the engine.
    fn runs_on_poster(&self, wqe: &SendWqe) -> bool {
        wqe.inline.is_some() || self.dev.mover.cpu_copies(wqe.len())
    }

    /// Puts back at the head of the queue a request the poster's thread
    /// could not execute without waiting, and leaves it to the work item
    /// ([`Self::kick_if_more`]).
    pub(crate) fn defer_send(self: &Arc<Self>, wqe: SendWqe) {
        let mut st = self.state.lock();
        let lost = st.sq.put_back(wqe).err();
        st.worker = false;
        if st.dead {
            self.worker_idle.notify_all();
        }
        drop(st);
        if let Some(wqe) = lost {
            // Never: the queue keeps a slot for the request taken out. Were
            // it lost, its completion would be too.
            self.complete_send(crate::exec::send_wc(self, &wqe, wc_status::WR_FLUSH_ERR, 0));
            self.enter_error();
        }
    }

    /// Kicks the work item if requests wait: one posted while the queue's
    /// runner was finishing found it still marked busy.
    pub(crate) fn kick_if_more(self: &Arc<Self>) {
        let more = {
            let st = self.state.lock();
            !st.dead && !st.sq.is_empty() && matches!(st.state, qp_state::RTS | qp_state::ERR)
        };
        if more {
            self.kick();
        }
    }

    /// Queues a receive request; `EINVAL` in RESET or for too many
    /// entries, `ENOMEM` when the receive queue is full.
    pub(crate) fn post_recv(self: &Arc<Self>, wr: &RecvWr<'_>) -> Result {
        let mut st = self.state.lock();
        if st.dead || st.state == qp_state::RESET || self.srq.is_some() {
            return Err(EINVAL);
        }
        if wr.sges.len() > st.attr.max_recv_sge as usize {
            return Err(EINVAL);
        }
        let kmem = wr.kernel_sgl();
        if self.kernel != kmem.is_some() {
            return Err(EINVAL);
        }
        let mut wqe = RecvWqe {
            wr_id: wr.wr_id,
            sges: [Sge::default(); MAX_SGE as usize],
            num_sge: wr.sges.len(),
            kmem,
        };
        wqe.sges[..wr.sges.len()].copy_from_slice(wr.sges);
        st.rq.push(wqe)?;
        let flush = st.state == qp_state::ERR;
        drop(st);
        if flush {
            self.flush_recv();
        }
        Ok(())
    }

    /// Completes every queued receive with `IB_WC_WR_FLUSH_ERR` (ERR).
    pub(crate) fn flush_recv(&self) {
        loop {
            let wqe = {
                let mut st = self.state.lock();
                if st.dead || st.state != qp_state::ERR {
                    return;
                }
                // A SEND being received is the oldest receive; those
                // still queued on an SRQ are the SRQ's, for its other QPs.
                match st.rc.recv.take() {
                    Some(r) => Some(r.wqe),
                    None => st.rq.pop(),
                }
            };
            let Some(wqe) = wqe else {
                return;
            };
            self.complete_recv(
                Wc {
                    wr_id: wqe.wr_id,
                    status: wc_status::WR_FLUSH_ERR,
                    opcode: wc_opcode::RECV,
                    qp_num: self.qpn,
                    ..Wc::default()
                },
                false,
            );
        }
    }

    /// Moves the QP to ERR (a failed request), flushing its receives.
    pub(crate) fn enter_error(self: &Arc<Self>) {
        {
            let mut st = self.state.lock();
            if st.dead || st.state == qp_state::ERR {
                return;
            }
            st.state = qp_state::ERR;
            st.attr.qp_state = qp_state::ERR;
            self.answered.notify_all();
        }
        self.flush_recv();
        self.kick();
    }

    /// Takes the oldest receive request, if the QP accepts incoming
    /// requests (RTR or later, not ERR).
    pub(crate) fn take_recv(&self) -> Option<RecvWqe> {
        let mut st = self.state.lock();
        if st.dead || !Self::accepts_requests(st.state) {
            return None;
        }
        self.pop_recv(&mut st)
    }

    /// The next receive, from the SRQ or the QP's own queue; the caller
    /// holds the QP's state (`st`) and checked it.
    pub(crate) fn pop_recv(&self, st: &mut QpState) -> Option<RecvWqe> {
        match &self.srq {
            Some(srq) => srq.take(),
            None => st.rq.pop(),
        }
    }

    /// Whether a receive waits, in the SRQ or the QP's own queue.
    pub(crate) fn recv_waiting(&self, st: &QpState) -> bool {
        match &self.srq {
            Some(srq) => srq.has_recv(),
            None => !st.rq.is_empty(),
        }
    }

    /// The protection domain a receive's list is checked against: the
    /// SRQ's, where it was posted, or the QP's.
    pub(crate) fn recv_pd(&self) -> &Arc<Pd> {
        self.srq.as_ref().map_or(&self.pd, |s| &s.pd)
    }

    /// Whether a receive is posted that [`Self::take_recv`] would take.
    pub(crate) fn has_recv(&self) -> bool {
        let st = self.state.lock();
        !st.dead && Self::accepts_requests(st.state) && self.recv_waiting(&st)
    }

    /// Whether a QP in `state` answers incoming requests.
    pub(crate) fn accepts_requests(state: u32) -> bool {
        matches!(
            state,
            qp_state::RTR | qp_state::RTS | qp_state::SQD | qp_state::SQE
        )
    }

    /// Whether the QP is connected to one peer QP (RC or UC).
    pub(crate) fn is_connected(&self) -> bool {
        matches!(self.qp_type, qp_type::RC | qp_type::UC)
    }

    /// Whether the QP is unreliable connected: nothing it sends is
    /// acknowledged, and what it cannot take it drops.
    pub(crate) fn is_uc(&self) -> bool {
        self.qp_type == qp_type::UC
    }

    /// Whether the QP sends and receives datagrams (GSI or UD).
    pub(crate) fn is_datagram(&self) -> bool {
        matches!(self.qp_type, qp_type::GSI | qp_type::UD)
    }

    /// Whether the QP takes a datagram sent with `qkey`: a datagram QP
    /// that answers requests, with that Q_Key.
    pub(crate) fn accepts_datagram(&self, qkey: u32) -> bool {
        let st = self.state.lock();
        self.is_datagram() && !st.dead && Self::accepts_requests(st.state) && st.attr.qkey == qkey
    }

    /// The Q_Key (datagram QPs).
    pub(crate) fn qkey(&self) -> u32 {
        self.state.lock().attr.qkey
    }

    /// The QP's state, or `None` once it is being destroyed.
    pub(crate) fn current_state(&self) -> Option<u32> {
        let st = self.state.lock();
        (!st.dead).then_some(st.state)
    }

    /// Access rights the QP grants its peer.
    pub(crate) fn peer_access(&self) -> u32 {
        self.state.lock().attr.qp_access_flags
    }

    /// Posts a receive completion.
    pub(crate) fn complete_recv(&self, wc: Wc, solicited: bool) {
        self.rcq.push(self.count(wc), solicited);
    }

    /// Posts a send completion.
    pub(crate) fn complete_send(&self, wc: Wc) {
        self.scq.push(self.count(wc), false);
    }

    /// Removes the QP's completions from its CQs: a kernel consumer's
    /// completions name the QP itself, which is going away.
    pub(crate) fn purge_completions(&self) {
        self.scq.purge(self.handle);
        self.rcq.purge(self.handle);
    }

    /// Counts an error completion, which carries only its identity and
    /// status: verbs leaves the other fields undefined, and rxe reports
    /// them as zero.
    fn count(&self, wc: Wc) -> Wc {
        if wc.status == wc_status::SUCCESS {
            return Wc {
                qp_handle: self.handle,
                ..wc
            };
        }
        Stats::add(&self.dev.stats.error_wcs, 1);
        Wc {
            wr_id: wc.wr_id,
            status: wc.status,
            qp_num: wc.qp_num,
            qp_handle: self.handle,
            ..Wc::default()
        }
    }

    /// Makes sure the work item will look at the send queue.
    pub(crate) fn kick(self: &Arc<Self>) {
        {
            let mut st = self.state.lock();
            if st.dead || st.worker {
                return;
            }
            st.worker = true;
        }
        // Long work: a request may wait for the engine, or for the peer
        // to post a receive (RNR).
        if module_queue::queue(QueueKind::Long)
            .enqueue(self.clone())
            .is_err()
        {
            // Already queued: it will run.
        }
    }

    /// The next request the work item should execute, with the QP's
    /// state; `None` (and the work item's end) when there is nothing to do.
    /// On the poster's thread, only a request it may run
    /// ([`Self::runs_on_poster`]) in RTS.
    pub(crate) fn next_send(&self, runner: Runner) -> Option<(SendWqe, u32)> {
        let mut st = self.state.lock();
        let runnable = match runner {
            Runner::Worker => matches!(st.state, qp_state::RTS | qp_state::ERR),
            Runner::Poster => {
                st.state == qp_state::RTS && st.sq.front().is_some_and(|w| self.runs_on_poster(w))
            }
        } && !st.dead;
        match runnable.then(|| st.sq.pop()).flatten() {
            Some(w) => Some((w, st.state)),
            None => {
                st.worker = false;
                // Only `shut_down` sleeps on it, after setting `dead`
                // under this lock: a running QP pays no wake-up per batch.
                if st.dead {
                    self.worker_idle.notify_all();
                }
                None
            }
        }
    }

    /// The work item gave up on a request because the QP is being
    /// destroyed ([`Self::stopping`]): it is idle from now on.
    pub(crate) fn worker_stopped(&self) {
        self.state.lock().worker = false;
        self.worker_idle.notify_all();
    }

    /// Stops the work item and waits until it is idle; nothing completes
    /// afterwards. For destroy.
    pub(crate) fn shut_down(&self) {
        let mut st = self.state.lock();
        st.dead = true;
        self.answered.notify_all();
        // Checked and put to sleep under the lock the work item clears
        // `worker` under: its wake-up cannot fall in between.
        while st.worker {
            self.worker_idle.wait(&mut st);
        }
    }

    /// How often a request retries after an RNR NAK (7: unbounded).
    pub(crate) fn rnr_retry(&self) -> u32 {
        self.state.lock().attr.rnr_retry
    }

    /// The `min_rnr_timer` code this QP, as a responder, asks requesters to
    /// wait between retries (IBTA table 45).
    pub(crate) fn min_rnr_timer(&self) -> u32 {
        self.state.lock().attr.min_rnr_timer
    }

    /// The peer QP number, if the address vector names this port (the
    /// loopback fabric reaches no other).
    pub(crate) fn dest_qpn(&self) -> Option<u32> {
        let st = self.state.lock();
        (st.attr.dest_local != 0).then_some(st.attr.dest_qp_num)
    }

    /// Whether the QP is connected over the wire.
    pub(crate) fn on_wire(&self) -> bool {
        self.state.lock().port.is_some()
    }

    /// The device's port and where this QP's packets go, if it is
    /// connected over the wire (from and to GIDs of one IP version).
    pub(crate) fn wire_path(&self) -> Option<(Arc<Port>, Path)> {
        let st = self.state.lock();
        let port = st.port.clone()?;
        let a = &st.attr;
        let mtu = (128usize << a.path_mtu.clamp(1, MAX_MTU)).min(self.dev.mtu_cap());
        let (src, dst) = Path::addresses(&a.sgid, &a.dgid)?;
        let path = Path {
            src,
            dst,
            dest_qp: a.dest_qp_num,
            src_port: src_port(self.qpn),
            tos: a.traffic_class as u8,
            ttl: if a.hop_limit == 0 {
                64
            } else {
                a.hop_limit as u8
            },
            local: a.dest_local != 0,
            oif: self.dev.ifindex,
            mtu,
        };
        Some((port, path))
    }

    /// The device's UDP port, taken for this QP if it holds none yet
    /// (paired with the [`Device::wire_put`] at destroy); may sleep, and
    /// fails if another RoCE stack owns the port or the QP is going.
    pub(crate) fn attach_port(self: &Arc<Self>) -> Result<Arc<Port>> {
        if let Some(p) = self.state.lock().port.clone() {
            return Ok(p);
        }
        let port = self.dev.wire_get()?;
        let mut st = self.state.lock();
        let (held, spare) = match &st.port {
            None if !st.dead => {
                st.port = Some(port.clone());
                (Ok(port), None)
            }
            Some(p) => (Ok(p.clone()), Some(port)),
            None => (Err(ENODEV), Some(port)),
        };
        drop(st);
        if let Some(p) = spare {
            drop(p);
            self.dev.wire_put();
        }
        held
    }

    /// Lets the device's port go (destroy, after [`Self::shut_down`]).
    pub(crate) fn release_port(&self) -> bool {
        let port = self.state.lock().port.take();
        port.is_some()
    }

    /// Whether the work item should stop.
    pub(crate) fn stopping(&self) -> bool {
        self.state.lock().dead
    }
}

impl WorkItem for Qp {
    type Pointer = Arc<Qp>;

    fn run(this: Arc<Qp>) {
        crate::exec::run_send_queue(&this, Runner::Worker);
        this.kick_if_more();
    }
}
