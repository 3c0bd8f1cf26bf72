// SPDX-License-Identifier: GPL-2.0

//! The reliable-connected transport over the wire: requester, responder
//! and completer, in the shape of rxe's `rxe_req.c`, `rxe_resp.c` and
//! `rxe_comp.c`.
//!
//! # Requester
//!
//! The QP's work item sends one message at a time: SEND (with immediate)
//! and RDMA WRITE (with immediate) are cut into packets of the path MTU
//! (FIRST/MIDDLE/LAST or ONLY), numbered from the QP's next PSN, the last
//! one and every 8th asking for an acknowledge; an RDMA READ is one
//! request whose responses take as many PSNs as the path MTU cuts its
//! length into. It then sleeps until the completer hands it the answer:
//! an ACK covering the last PSN (or the last READ response) completes the
//! work request; an ACK of part of it (or a READ response, placed in
//! order) starts the timer again, as does a stale answer (the peer is
//! busy answering what was asked before); a NAK for a PSN sequence error
//! resends from the PSN the responder expects; an RNR NAK waits the timer the
//! responder names (IBA table 45) and resends, `rnr_retry` times (7: for
//! ever); other NAKs fail the request with the status rxe gives; no answer
//! within the local ACK timeout (4.096 µs · 2^`timeout`) resends from the
//! first packet not acknowledged (a READ: a request for the rest),
//! `retry_cnt` times without progress. The bytes are read from the memory
//! regions by the CPU as each packet is built, with the regions looked up
//! again for each transmission, so that no region is held while waiting.
//!
//! # Responder
//!
//! Requests are executed in PSN order: a PSN before the expected one is a
//! duplicate, not executed again, and answered (if it asks) with an ACK of
//! the last PSN executed, a duplicate READ by reading again; one after it
//! is dropped and NAKed as a sequence error once per gap. A SEND takes the
//! oldest receive at its first packet (an RNR NAK with the QP's
//! `min_rnr_timer` when there is none, the PSN not consumed); an RDMA
//! WRITE checks its R_Key, protection domain, access and bounds at its
//! first packet, a READ before its first response (a remote access NAK
//! otherwise). The receive completes at the last packet; an ACK goes back
//! for every packet that asks for one; READ responses carry the region's
//! bytes, read by the CPU.
//!
//! # Who moves the payload
//!
//! A received payload of `wire_engine_min` bytes or more (a module
//! parameter, 256 by default) is placed by the DMA engine when the device
//! has a channel: the part of the skb that holds it is mapped for the
//! engine's device (an IOVA behind the IOMMU) after every check of the
//! packet, ICRC included, and its copy into the region (mapped at
//! registration) joins the burst of the packets before it
//! ([`crate::landing`]). The receive completes and the ACK goes out only
//! once the burst is copied. Shorter payloads, and all of them without a
//! channel, are written by the CPU. `rx_payload_engine_bytes` and
//! `rx_payload_cpu_bytes` count each. Sent payloads are read from the
//! regions by the CPU while each packet is built.

use crate::{
    atomic::{self, AtomicOp, ATOMIC_LEN},
    exec::{place_inline, resolve, resolve_recv, rnr_delay_us, Outcome, Piece},
    landing::Incoming,
    net::{Path, Port, WireStats},
    qp::{Qp, QpState, RecvWqe, SendWqe, MAX_SGE},
    rdma::types::{
        access, qp_state, send_flags, wc_opcode, wc_status, wr_opcode, Sge, Wc, WC_WITH_IMM,
    },
    replies::Reply,
    skb_dma::SkbPart,
    wire::{
        bth::Bth,
        ext::{Aeth, AtomicAckEth, AtomicEth, ImmDt, NakCode, Reth, Syndrome},
        opcode::{self, Operation, Position},
        packet::{ExtHeaders, Packet},
        psn::Psn,
    },
};
use kernel::{
    prelude::*,
    sync::{atomic::Relaxed, Arc, CondVarTimeoutResult},
    time::{delay::fsleep, msecs_to_jiffies, Delta},
};

/// How an outstanding message was answered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Every packet was acknowledged.
    Acked,
    /// Receiver not ready at this PSN; retry after the timer code's delay.
    Rnr(u8, Psn),
    /// Negative acknowledge at this PSN.
    Nak(NakCode, Psn),
    /// An RDMA READ response could not be placed into the local list.
    LocalProtection,
}

/// The message the requester waits on.
pub(crate) struct Pending {
    first: Psn,
    last: Psn,
    /// Packets acknowledged so far (from `first`).
    acked: u32,
    /// Acknowledges of part of the message came since the requester
    /// looked, or answers to what it asked before ([`peer_alive`]): the
    /// peer is making progress, the timer starts again.
    progress: bool,
    answer: Option<Answer>,
    /// An RDMA READ's local list, where its responses go.
    read: Option<ReadTarget>,
    /// An atomic's local list, where the original value goes.
    atomic: Option<([Sge; MAX_SGE as usize], usize)>,
}

/// How many executed atomics a responder remembers, to answer their
/// duplicates with the value they found instead of executing them again
/// (IBA 9.7.5.1.4; rxe keeps them among its responder resources).
const ATOMIC_REPLIES: usize = 16;

/// The responder's record of its last atomics: PSN and original value.
#[derive(Clone, Copy)]
struct AtomicReplies {
    entries: [Option<(Psn, u64)>; ATOMIC_REPLIES],
    next: usize,
}

impl AtomicReplies {
    const fn new() -> Self {
        Self {
            entries: [None; ATOMIC_REPLIES],
            next: 0,
        }
    }

    fn record(&mut self, psn: Psn, orig: u64) {
        self.entries[self.next] = Some((psn, orig));
        self.next = if self.next + 1 == ATOMIC_REPLIES {
            0
        } else {
            self.next + 1
        };
    }

    fn find(&self, psn: Psn) -> Option<u64> {
        self.entries
            .iter()
            .flatten()
            .find(|(p, _)| *p == psn)
            .map(|&(_, orig)| orig)
    }
}

/// Where the responses of an outstanding RDMA READ are placed.
struct ReadTarget {
    sges: [Sge; MAX_SGE as usize],
    num_sge: usize,
    /// Payload bytes per response packet (the path MTU).
    mtu: u64,
    len: u64,
}

/// A SEND being received: its receive request and the bytes placed so far.
pub(crate) struct InRecv {
    pub(crate) wqe: RecvWqe,
    offset: u64,
}

/// An RDMA WRITE being received.
struct InWrite {
    va: u64,
    rkey: u32,
    len: u64,
    offset: u64,
}

/// A QP's transport state.
pub(crate) struct RcState {
    /// The PSN of the next request packet sent.
    pub(crate) sq_psn: Psn,
    pending: Option<Pending>,
    /// The PSN of the next request expected.
    pub(crate) epsn: Psn,
    /// Messages completed as responder (24 bits).
    msn: u32,
    /// A sequence NAK went out for the current gap.
    nak_sent: bool,
    /// Requests executed since the last acknowledge sent.
    unacked: u32,
    pub(crate) recv: Option<InRecv>,
    write: Option<InWrite>,
    atomics: AtomicReplies,
    /// UC: a message is being dropped, up to the next first packet.
    uc_dropping: bool,
    /// An engine copy of a received payload failed after the packet was
    /// taken (see [`crate::landing`]).
    pub(crate) landing_failed: bool,
}

impl RcState {
    pub(crate) const fn new() -> Self {
        Self {
            sq_psn: Psn::new(0),
            pending: None,
            epsn: Psn::new(0),
            msn: 0,
            nak_sent: false,
            unacked: 0,
            recv: None,
            write: None,
            atomics: AtomicReplies::new(),
            uc_dropping: false,
            landing_failed: false,
        }
    }

    /// Forgets every message in progress (RESET).
    pub(crate) fn reset(&mut self) {
        *self = Self::new();
    }
}

/// Packets between two that ask for an acknowledge (besides each
/// message's last): what a timeout resends at most, and how often the
/// responder says how far it got.
const ACK_EVERY: u32 = 8;

/// Request packets between two acknowledges the responder sends unasked
/// (besides those asked for): each waits for the engine's burst to land,
/// an engine round trip; this many keep bursts long, and still show the
/// requester's timer (tens of milliseconds at the least) progress well
/// within it.
const PROGRESS_EVERY: u32 = 32;

/// The local ACK timeout of `timeout` (4.096 µs · 2^timeout), in
/// milliseconds, at least 10; 0 (no timeout) waits a second at a time.
fn ack_timeout_ms(timeout: u32) -> u32 {
    if timeout == 0 {
        return 1000;
    }
    let us = 4096u64 << timeout.min(31) >> 10;
    u32::try_from(us / 1000).unwrap_or(u32::MAX).max(10)
}

/// Walks `len` bytes of the list `list` from byte `off` on: calls
/// `f(piece, offset in its region, range of the walked bytes)` for each
/// piece they touch. `EFAULT` if the list ends first.
fn walk(
    list: &[Piece],
    mut off: u64,
    len: usize,
    mut f: impl FnMut(&Piece, u64, core::ops::Range<usize>) -> Result,
) -> Result {
    let mut done = 0usize;
    for p in list {
        if done == len {
            break;
        }
        if off >= p.len {
            off -= p.len;
            continue;
        }
        let n = usize::try_from(p.len - off)
            .unwrap_or(usize::MAX)
            .min(len - done);
        f(p, p.offset + off, done..done + n)?;
        done += n;
        off = 0;
    }
    if done == len {
        Ok(())
    } else {
        Err(EFAULT)
    }
}

/// Copies `out.len()` bytes of the list `src` from byte `off` on.
pub(crate) fn gather(src: &[Piece], off: u64, out: &mut [u8]) -> Result {
    walk(src, off, out.len(), |p, at, range| {
        let at = usize::try_from(at).map_err(|_| EFAULT)?;
        p.mr.mem.read_at(at, &mut out[range])
    })
}

/// Places `bytes`, the payload of the received datagram, into the list
/// `dst` from byte `off` on: by the engine straight from the skb, or by
/// the CPU. The engine's copies are only started; with `settle`, every
/// copy in flight is waited for before this returns, and an error of
/// `qp`'s is returned (see [`crate::landing`]).
fn place(
    qp: &Arc<Qp>,
    rx: &Incoming<'_>,
    dst: &[Piece],
    off: u64,
    bytes: &[u8],
    settle: bool,
) -> Result {
    let dev = &qp.dev;
    let engine = dev.mover.payload_engine(bytes.len());
    walk(dst, off, bytes.len(), |p, at, range| {
        let part = &bytes[range];
        if let Some(e) = &engine {
            // A region registered while the engine's device was going has
            // no mapping for it: the CPU's.
            if !p.mr.mem.segments_in(e.guard()).is_empty() {
                if let Ok(src) = SkbPart::new(rx.skb, part) {
                    return rx
                        .landing
                        .start(qp, p.mr.clone(), at, src, e.guard().clone());
                }
            }
        }
        // Not before the copies of the packets ahead of it.
        rx.landing.settle(qp)?;
        let at = usize::try_from(at).map_err(|_| EFAULT)?;
        p.mr.mem.write_at(at, part)?;
        let n = part.len() as u64;
        dev.wire_stats.rx_payload_cpu_bytes.fetch_add(n, Relaxed);
        Ok(())
    })?;
    if settle {
        rx.landing.settle(qp)?;
    }
    Ok(())
}

/// The opcode of packet `i` of `n` of a request of work request opcode
/// `wr`.
fn request_opcode(wr: u32, i: u32, n: u32) -> u8 {
    let pos = match (i, n) {
        (_, 1) => Position::Only,
        (0, _) => Position::First,
        (i, n) if i + 1 == n => Position::Last,
        _ => Position::Middle,
    };
    use opcode::code as op;
    match (wr, pos) {
        (wr_opcode::RDMA_WRITE | wr_opcode::RDMA_WRITE_WITH_IMM, Position::First) => {
            op::RC_RDMA_WRITE_FIRST
        }
        (wr_opcode::RDMA_WRITE | wr_opcode::RDMA_WRITE_WITH_IMM, Position::Middle) => {
            op::RC_RDMA_WRITE_MIDDLE
        }
        (wr_opcode::RDMA_WRITE, Position::Last) => op::RC_RDMA_WRITE_LAST,
        (wr_opcode::RDMA_WRITE, Position::Only) => op::RC_RDMA_WRITE_ONLY,
        (wr_opcode::RDMA_WRITE_WITH_IMM, Position::Last) => op::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE,
        (wr_opcode::RDMA_WRITE_WITH_IMM, Position::Only) => op::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
        (_, Position::First) => op::RC_SEND_FIRST,
        (_, Position::Middle) => op::RC_SEND_MIDDLE,
        (wr_opcode::SEND_WITH_IMM, Position::Last) => op::RC_SEND_LAST_WITH_IMMEDIATE,
        (wr_opcode::SEND_WITH_IMM, Position::Only) => op::RC_SEND_ONLY_WITH_IMMEDIATE,
        (_, Position::Last) => op::RC_SEND_LAST,
        (_, Position::Only) => op::RC_SEND_ONLY,
    }
}

/// Sends packets `from..n` of the message of `wqe` that starts at PSN
/// `first`. `Err` with a completion status if the local list no longer
/// resolves; a packet the network refuses is left to the retries.
fn transmit(
    qp: &Qp,
    port: &Port,
    path: &Path,
    wqe: &SendWqe,
    first: Psn,
    from: u32,
    n: u32,
) -> core::result::Result<(), u32> {
    let stats = &qp.dev.wire_stats;
    let len = wqe.len();
    if let Some(op) = wqe.atomic {
        let (opcode, swap_add, compare) = match op {
            AtomicOp::CompareSwap { compare, swap } => {
                (opcode::code::RC_COMPARE_SWAP, swap, compare)
            }
            AtomicOp::FetchAdd { add } => (opcode::code::RC_FETCH_ADD, add, 0),
        };
        let bth = Bth {
            opcode,
            pkey: Bth::DEFAULT_PKEY,
            dest_qp: path.dest_qp,
            ack_req: true,
            psn: first,
            ..Bth::default()
        };
        let ext = ExtHeaders {
            atomic_eth: Some(AtomicEth {
                va: wqe.remote_addr,
                rkey: wqe.rkey,
                swap_add,
                compare,
            }),
            ..ExtHeaders::default()
        };
        let _ = port.send(stats, path, &bth, &ext, 0, |_| Ok(()));
        return Ok(());
    }
    let local = match &wqe.inline {
        Some(_) => KVec::new(),
        // A READ's list is written by the completer, not read here.
        None if wqe.opcode == wr_opcode::RDMA_READ => KVec::new(),
        None => resolve(qp, wqe.sges(), 0).map_err(|()| wc_status::LOC_PROT_ERR)?,
    };
    let mtu = path.mtu as u64;
    if wqe.opcode == wr_opcode::RDMA_READ {
        // One request for what is not read yet: its responses take the
        // PSNs from `first + from` on.
        let done = (u64::from(from) * mtu).min(len);
        let bth = Bth {
            opcode: opcode::code::RC_RDMA_READ_REQUEST,
            pkey: Bth::DEFAULT_PKEY,
            dest_qp: path.dest_qp,
            ack_req: true,
            psn: first.add(from),
            ..Bth::default()
        };
        let ext = ExtHeaders {
            reth: Some(Reth {
                va: wqe.remote_addr.wrapping_add(done),
                rkey: wqe.rkey,
                len: (len - done) as u32,
            }),
            ..ExtHeaders::default()
        };
        let _ = port.send(stats, path, &bth, &ext, 0, |_| Ok(()));
        return Ok(());
    }
    let uc = qp.is_uc();
    for i in from..n {
        let off = u64::from(i) * mtu;
        let size = (len - off.min(len)).min(mtu) as usize;
        // UC's SEND and WRITE opcodes are RC's in the next transport's
        // range (IBA table 38: 0x20 up).
        let opcode = request_opcode(wqe.opcode, i, n) | if uc { 0x20 } else { 0 };
        let last = i + 1 == n;
        let bth = Bth {
            opcode,
            solicited: last && wqe.flags & send_flags::SOLICITED != 0,
            pkey: Bth::DEFAULT_PKEY,
            dest_qp: path.dest_qp,
            ack_req: !uc && (last || (i + 1) % ACK_EVERY == 0),
            psn: first.add(i),
            ..Bth::default()
        };
        let info = opcode::OpInfo::lookup(opcode).ok_or(wc_status::LOC_QP_OP_ERR)?;
        let ext = ExtHeaders {
            reth: info.has(opcode::Headers::RETH).then_some(Reth {
                va: wqe.remote_addr,
                rkey: wqe.rkey,
                len: len as u32,
            }),
            imm_dt: info
                .has(opcode::Headers::IMM_DT)
                .then_some(ImmDt(u32::from_be(wqe.imm_data))),
            ..ExtHeaders::default()
        };
        let fill = |out: &mut [u8]| match &wqe.inline {
            Some(b) => {
                let at = off as usize;
                out.copy_from_slice(b.get(at..at + out.len()).ok_or(EFAULT)?);
                Ok(())
            }
            None => gather(&local, off, out),
        };
        // A lost packet is what the retries are for.
        let _ = port.send(stats, path, &bth, &ext, size, fill);
    }
    Ok(())
}

/// What waiting for the answer gave.
enum Waited {
    Answer(Answer),
    /// No answer in time; this many packets were acknowledged.
    Timeout(u32),
    /// The QP left RTS/SQD (ERR): the request is flushed.
    Flushed,
    Stopped,
}

/// How many times in a row a requester's timer starts again because
/// answers wait in the receive queue ([`wait_answer`]).
const MAX_TIMER_HOLDS: u32 = 8;

fn wait_answer(qp: &Qp, port: &Port, timeout_ms: u32) -> Waited {
    let mut left = msecs_to_jiffies(timeout_ms);
    let mut held = 0u32;
    let mut st = qp.state.lock();
    loop {
        if st.dead() {
            return Waited::Stopped;
        }
        if !matches!(st.state, qp_state::RTS | qp_state::SQD) {
            return Waited::Flushed;
        }
        if let Some(a) = st.rc.pending.as_mut().and_then(|p| p.answer.take()) {
            return Waited::Answer(a);
        }
        // The transport timer starts again whenever part of the
        // message is acknowledged (IBA 9.7.6.1.3).
        if let Some(p) = st.rc.pending.as_mut().filter(|p| p.progress) {
            p.progress = false;
            left = msecs_to_jiffies(timeout_ms);
        }
        match qp.answered.wait_interruptible_timeout(&mut st, left) {
            CondVarTimeoutResult::Woken { jiffies } | CondVarTimeoutResult::Signal { jiffies } => {
                left = jiffies
            }
            CondVarTimeoutResult::Timeout => {
                let Some(p) = st.rc.pending.as_mut() else {
                    return Waited::Timeout(0);
                };
                if let Some(a) = p.answer.take() {
                    return Waited::Answer(a);
                }
                if p.progress {
                    continue;
                }
                // Answers waiting to be processed may be this request's:
                // resending now would only lengthen that queue. The timer
                // starts again, a bounded number of times (a flood of
                // answers to others must not stop it for good).
                if held < MAX_TIMER_HOLDS && port.answers_waiting() {
                    held += 1;
                    WireStats::inc(&qp.dev.wire_stats.ack_timer_holds);
                    left = msecs_to_jiffies(timeout_ms);
                    continue;
                }
                return Waited::Timeout(p.acked);
            }
        }
    }
}

/// Executes one send work request of a QP connected over the wire.
pub(crate) fn execute(qp: &Arc<Qp>, wqe: &SendWqe) -> Outcome {
    let outcome = run(qp, wqe);
    qp.state.lock().rc.pending = None;
    outcome
}

fn run(qp: &Arc<Qp>, wqe: &SendWqe) -> Outcome {
    let stats = &qp.dev.wire_stats;
    let Some((port, path)) = qp.wire_path() else {
        return Outcome::Failed(wc_status::RETRY_EXC_ERR);
    };
    match wqe.opcode {
        wr_opcode::SEND
        | wr_opcode::SEND_WITH_IMM
        | wr_opcode::RDMA_WRITE
        | wr_opcode::RDMA_WRITE_WITH_IMM
        | wr_opcode::RDMA_READ => {}
        _ if wqe.atomic.is_some() => {}
        _ => return Outcome::Failed(wc_status::LOC_QP_OP_ERR),
    }
    let reads = wqe.opcode == wr_opcode::RDMA_READ;
    let len = wqe.len();
    let Ok(byte_len) = u32::try_from(len) else {
        return Outcome::Failed(wc_status::LOC_LEN_ERR);
    };
    // Checked before the first packet: a bad lkey sends nothing.
    let want = if reads || wqe.atomic.is_some() {
        access::LOCAL_WRITE
    } else {
        0
    };
    if wqe.inline.is_none() && resolve(qp, wqe.sges(), want).is_err() {
        return Outcome::Failed(wc_status::LOC_PROT_ERR);
    }
    let n = u32::try_from(len.div_ceil(path.mtu as u64).max(1)).unwrap_or(u32::MAX);
    if qp.is_uc() {
        // Unreliable: sent once, nothing to wait for.
        let first = {
            let mut st = qp.state.lock();
            let first = st.rc.sq_psn;
            st.rc.sq_psn = first.add(n);
            first
        };
        return match transmit(qp, &port, &path, wqe, first, 0, n) {
            Ok(()) => Outcome::Done(byte_len),
            Err(status) => Outcome::Failed(status),
        };
    }
    let (first, attr) = {
        let mut st = qp.state.lock();
        let first = st.rc.sq_psn;
        st.rc.sq_psn = first.add(n);
        st.rc.pending = Some(Pending {
            first,
            last: first.add(n - 1),
            acked: 0,
            progress: false,
            answer: None,
            read: reads.then_some(ReadTarget {
                sges: wqe.sges,
                num_sge: wqe.num_sge,
                mtu: path.mtu as u64,
                len,
            }),
            atomic: wqe.atomic.map(|_| (wqe.sges, wqe.num_sge)),
        });
        (first, st.attr)
    };
    let timeout_ms = ack_timeout_ms(attr.timeout);
    let (mut retries, mut rnr_tries) = (attr.retry_cnt, 0u32);
    let (mut from, mut last_acked) = (0u32, 0u32);
    loop {
        if let Err(status) = transmit(qp, &port, &path, wqe, first, from, n) {
            return Outcome::Failed(status);
        }
        let resend_from = |psn: Psn| {
            let d = psn.diff(first);
            u32::try_from(d).ok().filter(|&i| i < n)
        };
        match wait_answer(qp, &port, timeout_ms) {
            Waited::Answer(Answer::Acked) => {
                WireStats::inc(&stats.acks_received);
                return Outcome::Done(byte_len);
            }
            Waited::Answer(Answer::Rnr(timer, psn)) => {
                WireStats::inc(&stats.rnr_naks_received);
                if attr.rnr_retry != 7 && rnr_tries >= attr.rnr_retry {
                    return Outcome::Failed(wc_status::RNR_RETRY_EXC_ERR);
                }
                rnr_tries = rnr_tries.saturating_add(1);
                fsleep(Delta::from_micros(rnr_delay_us(u32::from(timer)).max(20)));
                from = resend_from(psn).unwrap_or(0);
            }
            Waited::Answer(Answer::Nak(NakCode::PsnSequenceError, psn)) => {
                WireStats::inc(&stats.naks_received);
                if retries == 0 {
                    return Outcome::Failed(wc_status::RETRY_EXC_ERR);
                }
                retries -= 1;
                from = resend_from(psn).unwrap_or(0);
            }
            Waited::Answer(Answer::LocalProtection) => {
                return Outcome::Failed(wc_status::LOC_PROT_ERR);
            }
            Waited::Answer(Answer::Nak(code, _)) => {
                WireStats::inc(&stats.naks_received);
                return Outcome::Failed(match code {
                    NakCode::InvalidRequest => wc_status::REM_INV_REQ_ERR,
                    NakCode::RemoteAccessError => wc_status::REM_ACCESS_ERR,
                    _ => wc_status::REM_OP_ERR,
                });
            }
            Waited::Timeout(acked) => {
                WireStats::inc(&stats.ack_timeouts);
                // Progress since the last timeout gives the retries back,
                // as rxe's completer does.
                if acked > last_acked {
                    last_acked = acked;
                    retries = attr.retry_cnt;
                }
                if attr.timeout != 0 {
                    if retries == 0 {
                        return Outcome::Failed(wc_status::RETRY_EXC_ERR);
                    }
                    retries -= 1;
                }
                // Go back to the first packet not acknowledged.
                from = acked.min(n - 1);
            }
            Waited::Flushed => return Outcome::Failed(wc_status::WR_FLUSH_ERR),
            Waited::Stopped => return Outcome::Stopped,
        }
        if qp.stopping() {
            return Outcome::Stopped;
        }
        WireStats::inc(&stats.retransmits);
    }
}

/// An acknowledge or a READ response for `qp`: handed to its waiting
/// requester. Returns whether the packet was taken.
pub(crate) fn on_response(qp: &Arc<Qp>, pkt: &Packet<'_>, rx: &Incoming<'_>) -> bool {
    let stats = &qp.dev.wire_stats;
    if pkt.info.operation == Operation::RdmaReadResponse {
        return on_read_response(qp, pkt, rx);
    }
    if pkt.info.operation == Operation::AtomicAcknowledge {
        return on_atomic_ack(qp, pkt);
    }
    let (Some(aeth), Operation::Acknowledge) = (pkt.ext.aeth, pkt.info.operation) else {
        WireStats::inc(&stats.rx_drop_unsupported_op);
        return false;
    };
    let psn = pkt.bth.psn;
    let mut st = qp.state.lock();
    let Some(p) = st.rc.pending.as_mut() else {
        WireStats::inc(&stats.rx_stale_acks);
        return true;
    };
    let within = !psn.is_before(p.first) && !p.last.is_before(psn);
    let answer = match aeth.syndrome {
        // A READ is answered by its responses, an atomic by an atomic
        // acknowledge, not by an ACK.
        Syndrome::Ack { .. } if p.read.is_some() || p.atomic.is_some() => {
            WireStats::inc(&stats.rx_stale_acks);
            p.progress = true;
            None
        }
        Syndrome::Ack { .. } if !psn.is_before(p.last) && psn.diff(p.last) < 1 << 22 => {
            Some(Answer::Acked)
        }
        // An ACK of part of the message: progress.
        Syndrome::Ack { .. } if within => {
            let acked = psn.diff(p.first) as u32 + 1;
            if acked > p.acked {
                p.acked = acked;
                p.progress = true;
                qp.answered.notify_all();
            }
            None
        }
        Syndrome::RnrNak { timer } if within => Some(Answer::Rnr(timer, psn)),
        Syndrome::Nak(code) if within => Some(Answer::Nak(code, psn)),
        // The peer answers what was asked before (a duplicate, or one
        // resent): it is alive, and busy (see `peer_alive`).
        _ => {
            WireStats::inc(&stats.rx_stale_acks);
            p.progress = true;
            None
        }
    };
    if let Some(a) = answer {
        p.answer = Some(a);
        qp.answered.notify_all();
    }
    true
}

/// An RDMA READ response: placed into the outstanding READ's local list
/// if it is the next one expected, else ignored (a resent READ request
/// brings the rest again).
fn on_read_response(qp: &Arc<Qp>, pkt: &Packet<'_>, rx: &Incoming<'_>) -> bool {
    let stats = &qp.dev.wire_stats;
    let psn = pkt.bth.psn;
    let expected = {
        let st = qp.state.lock();
        st.rc.pending.as_ref().and_then(|p| {
            let r = p.read.as_ref()?;
            (psn == p.first.add(p.acked)).then(|| {
                let off = u64::from(p.acked) * r.mtu;
                (p.first, p.acked, r.sges, r.num_sge, off, r.len)
            })
        })
    };
    let Some((first, acked, sges, num_sge, off, len)) = expected else {
        WireStats::inc(&stats.rx_stale_acks);
        peer_alive(qp);
        return true;
    };
    let payload = pkt.payload();
    let end = off + payload.len() as u64;
    // The responder cuts at the path MTU: anything else is not ours.
    let fits = end <= len && (end == len) == pkt.info.ends_message();
    // The burst is copied at the last response, and every `ACK_EVERY`
    // before it: this requester's own timer runs from the last progress,
    // and a longer burst outlasted it on the test kernel (a READ asked
    // again).
    let settle = pkt.info.ends_message() || (acked + 1) % ACK_EVERY == 0;
    let placed = fits
        && resolve(qp, &sges[..num_sge], access::LOCAL_WRITE)
            .map_err(|()| EFAULT)
            .and_then(|dst| place(qp, rx, &dst, off, payload, settle))
            .is_ok();
    let mut st = qp.state.lock();
    let Some(p) = st
        .rc
        .pending
        .as_mut()
        .filter(|p| p.first == first && p.acked == acked)
    else {
        return true;
    };
    if !placed {
        p.answer = Some(if fits {
            Answer::LocalProtection
        } else {
            Answer::Nak(NakCode::InvalidRequest, psn)
        });
    } else {
        p.acked += 1;
        p.progress = true;
        if pkt.info.ends_message() {
            p.answer = Some(Answer::Acked);
        }
    }
    qp.answered.notify_all();
    true
}

/// An answer from `qp`'s peer to what it asked before (a response to a
/// READ it asked again, say) starts the requester's timer again, without
/// giving it back its retries: the peer is alive and works through a
/// backlog that every timeout would only make longer, since each resent
/// READ is answered whole once more. rxe's completer restarts its timer
/// on any answer too.
fn peer_alive(qp: &Qp) {
    if let Some(p) = qp.state.lock().rc.pending.as_mut() {
        p.progress = true;
    }
}

/// An atomic acknowledge: the original value of the outstanding atomic,
/// written into its local list by the CPU (eight bytes), which completes
/// it. One for another PSN is stale.
fn on_atomic_ack(qp: &Qp, pkt: &Packet<'_>) -> bool {
    let stats = &qp.dev.wire_stats;
    let psn = pkt.bth.psn;
    let (Some(aeth), Some(ack)) = (pkt.ext.aeth, pkt.ext.atomic_ack_eth) else {
        WireStats::inc(&stats.rx_drop_bad_header);
        return false;
    };
    let expected = {
        let st = qp.state.lock();
        st.rc
            .pending
            .as_ref()
            .filter(|p| p.first == psn && matches!(aeth.syndrome, Syndrome::Ack { .. }))
            .and_then(|p| p.atomic)
    };
    let Some((sges, num_sge)) = expected else {
        WireStats::inc(&stats.rx_stale_acks);
        peer_alive(qp);
        return true;
    };
    let placed = resolve(qp, &sges[..num_sge], access::LOCAL_WRITE)
        .is_ok_and(|dst| place_inline(&dst, &ack.orig.to_ne_bytes()).is_ok());
    let mut st = qp.state.lock();
    if let Some(p) = st.rc.pending.as_mut().filter(|p| p.first == psn) {
        p.answer = Some(if placed {
            Answer::Acked
        } else {
            Answer::LocalProtection
        });
        qp.answered.notify_all();
    }
    true
}

/// Executes an atomic request whose PSN is the expected one, as rxe's
/// responder checks it (see `exec::execute_atomic`), and answers with
/// the original value, which is also kept for a duplicate of the request.
fn atomic_request(qp: &Arc<Qp>, port: &Port, path: &Path, pkt: &Packet<'_>) -> bool {
    let Some(eth) = pkt.ext.atomic_eth else {
        return false;
    };
    let psn = pkt.bth.psn;
    let op = match pkt.info.operation {
        Operation::CompareSwap => AtomicOp::CompareSwap {
            compare: eth.compare,
            swap: eth.swap_add,
        },
        _ => AtomicOp::FetchAdd { add: eth.swap_add },
    };
    let (msn, valid) = {
        let st = qp.state.lock();
        let valid = st.attr.qp_access_flags & access::REMOTE_ATOMIC != 0
            && st.rc.recv.is_none()
            && st.rc.write.is_none()
            && pkt.payload().is_empty()
            && atomic::aligned(eth.va);
        (st.rc.msn, valid)
    };
    let nak = |code| {
        send_ack(qp, port, path, psn, Syndrome::Nak(code), msn);
        qp.enter_error();
        true
    };
    if !valid {
        return nak(NakCode::InvalidRequest);
    }
    let target = qp.dev.mrs.get(eth.rkey).and_then(|mr| {
        let ok = mr.rkey() == eth.rkey
            && Arc::ptr_eq(&mr.pd, &qp.pd)
            && mr.allows(access::REMOTE_ATOMIC);
        let offset = mr.offset_of(eth.va, ATOMIC_LEN).filter(|_| ok)?;
        Some(Piece {
            mr,
            offset,
            len: ATOMIC_LEN,
        })
    });
    let Some(target) = target else {
        return nak(NakCode::RemoteAccessError);
    };
    let Ok(orig) = atomic::execute(&qp.dev, &target, op) else {
        return nak(NakCode::RemoteOperationalError);
    };
    drop(target);
    let msn = {
        let mut st = qp.state.lock();
        st.rc.epsn = psn.next();
        st.rc.nak_sent = false;
        st.rc.msn = (st.rc.msn + 1) & Psn::MASK;
        st.rc.unacked = 0;
        st.rc.atomics.record(psn, orig);
        st.rc.msn
    };
    send_atomic_ack(qp, port, path, psn, orig, msn);
    true
}

/// Answers an RDMA READ request (`duplicate`: one executed before, read
/// again): checks the QP's rights and the R_Key, then hands the READ to
/// the receive work item's [`crate::replies::Replies`], which sends its responses.
fn read_request(
    qp: &Arc<Qp>,
    port: &Port,
    path: &Path,
    pkt: &Packet<'_>,
    rx: &Incoming<'_>,
    duplicate: bool,
) -> bool {
    let Some(reth) = pkt.ext.reth else {
        return false;
    };
    let psn = pkt.bth.psn;
    let len = u64::from(reth.len);
    let mtu = path.mtu as u64;
    let n = u32::try_from(len.div_ceil(mtu).max(1)).unwrap_or(u32::MAX);
    let (msn, epoch, ok) = {
        let mut st = qp.state.lock();
        let ok = st.attr.qp_access_flags & access::REMOTE_READ != 0
            && (duplicate || (st.rc.recv.is_none() && st.rc.write.is_none()));
        if ok && !duplicate {
            st.rc.epsn = psn.add(n);
            st.rc.nak_sent = false;
            st.rc.msn = (st.rc.msn + 1) & Psn::MASK;
        }
        (st.rc.msn, st.epoch, ok)
    };
    if !ok {
        send_ack(
            qp,
            port,
            path,
            psn,
            Syndrome::Nak(NakCode::InvalidRequest),
            msn,
        );
        qp.enter_error();
        return true;
    }
    if read_source(qp, reth.rkey, reth.va, len).is_err() {
        let nak = Syndrome::Nak(NakCode::RemoteAccessError);
        send_ack(qp, port, path, psn, nak, msn);
        qp.enter_error();
        return true;
    }
    rx.replies.start(Reply {
        qp: qp.clone(),
        epoch,
        first: psn,
        n,
        next: 0,
        msn,
        rkey: reth.rkey,
        va: reth.va,
        len,
        mtu,
    });
    true
}

/// What an RDMA READ of `len` bytes at `va` of the region of R_Key `rkey`
/// reads, if `qp` may read them; zero bytes name no memory, and no R_Key
/// is checked for them (IBA 9.7.4.1.2).
fn read_source(qp: &Qp, rkey: u32, va: u64, len: u64) -> Result<Option<Piece>, ()> {
    if len == 0 {
        return Ok(None);
    }
    let mr = qp.dev.mrs.get(rkey).ok_or(())?;
    let ok = mr.rkey() == rkey && Arc::ptr_eq(&mr.pd, &qp.pd) && mr.allows(access::REMOTE_READ);
    let offset = mr.offset_of(va, len).filter(|_| ok).ok_or(())?;
    Ok(Some(Piece { mr, offset, len }))
}

/// Sends READ responses `reply.next..` of `reply`, `max` at most, their
/// payload read from the region by the CPU. Returns whether some are
/// left; `false` too when the READ ends early: the QP was reset, is going
/// or left the states that answer, or the region went (a remote access
/// NAK then, and ERR, as at the first response).
pub(crate) fn send_read_responses(reply: &mut Reply, max: u32) -> bool {
    let qp = &reply.qp;
    let stats = &qp.dev.wire_stats;
    {
        let st = qp.state.lock();
        if st.dead() || !Qp::accepts_requests(st.state) || st.epoch != reply.epoch {
            return false;
        }
    }
    let Some((port, path)) = qp.wire_path() else {
        return false;
    };
    let Ok(src) = read_source(qp, reply.rkey, reply.va, reply.len) else {
        let nak = Syndrome::Nak(NakCode::RemoteAccessError);
        send_ack(
            qp,
            &port,
            &path,
            reply.first.add(reply.next),
            nak,
            reply.msn,
        );
        qp.enter_error();
        return false;
    };
    use opcode::code as op;
    let (n, len, mtu) = (reply.n, reply.len, reply.mtu);
    let end = n.min(reply.next.saturating_add(max));
    while reply.next < end {
        let i = reply.next;
        let off = u64::from(i) * mtu;
        let size = (len - off.min(len)).min(mtu) as usize;
        let opcode = match (i, n) {
            (_, 1) => op::RC_RDMA_READ_RESPONSE_ONLY,
            (0, _) => op::RC_RDMA_READ_RESPONSE_FIRST,
            (i, n) if i + 1 == n => op::RC_RDMA_READ_RESPONSE_LAST,
            _ => op::RC_RDMA_READ_RESPONSE_MIDDLE,
        };
        let info = opcode::OpInfo::lookup(opcode);
        let bth = Bth {
            opcode,
            pkey: Bth::DEFAULT_PKEY,
            dest_qp: path.dest_qp,
            psn: reply.first.add(i),
            ..Bth::default()
        };
        let ext = ExtHeaders {
            aeth: info.filter(|i| i.has(opcode::Headers::AETH)).map(|_| Aeth {
                syndrome: ACK,
                msn: reply.msn,
            }),
            ..ExtHeaders::default()
        };
        let fill = |out: &mut [u8]| match &src {
            Some(s) => gather(core::slice::from_ref(s), off, out),
            None => Ok(()),
        };
        if port.send(stats, &path, &bth, &ext, size, fill).is_err() {
            // The requester's timer asks again.
            return false;
        }
        reply.next += 1;
    }
    reply.next < n
}

/// Waits until every payload placed before this packet landed (see
/// [`crate::landing`]); if one of `qp`'s did not, the requester gets a
/// remote operational error NAK of `psn`, the QP goes to ERR, and this
/// returns `false`.
fn landed(qp: &Arc<Qp>, rx: &Incoming<'_>, port: &Port, path: &Path, psn: Psn) -> bool {
    if rx.landing.settle(qp).is_ok() {
        return true;
    }
    let msn = qp.state.lock().rc.msn;
    let nak = Syndrome::Nak(NakCode::RemoteOperationalError);
    send_ack(qp, port, path, psn, nak, msn);
    qp.enter_error();
    false
}

/// Sends an acknowledge of `psn` with `syndrome` once every payload
/// placed before it landed ([`landed`]).
fn send_ack_landed(
    qp: &Arc<Qp>,
    rx: &Incoming<'_>,
    port: &Port,
    path: &Path,
    psn: Psn,
    syndrome: Syndrome,
    msn: u32,
) {
    if landed(qp, rx, port, path, psn) {
        send_ack(qp, port, path, psn, syndrome, msn);
    }
}

/// Sends an acknowledge of `psn` with `syndrome`.
fn send_ack(qp: &Qp, port: &Port, path: &Path, psn: Psn, syndrome: Syndrome, msn: u32) {
    send_acknowledge(qp, port, path, psn, syndrome, msn, None);
}

/// Sends the atomic acknowledge of the atomic at `psn`, which found
/// `orig`.
fn send_atomic_ack(qp: &Qp, port: &Port, path: &Path, psn: Psn, orig: u64, msn: u32) {
    send_acknowledge(qp, port, path, psn, ACK, msn, Some(AtomicAckEth { orig }));
}

fn send_acknowledge(
    qp: &Qp,
    port: &Port,
    path: &Path,
    psn: Psn,
    syndrome: Syndrome,
    msn: u32,
    atomic_ack_eth: Option<AtomicAckEth>,
) {
    let stats = &qp.dev.wire_stats;
    WireStats::inc(match syndrome {
        Syndrome::Ack { .. } => &stats.acks_sent,
        Syndrome::RnrNak { .. } => &stats.rnr_naks_sent,
        _ => &stats.naks_sent,
    });
    let bth = Bth {
        opcode: match atomic_ack_eth {
            Some(_) => opcode::code::RC_ATOMIC_ACKNOWLEDGE,
            None => opcode::code::RC_ACKNOWLEDGE,
        },
        pkey: Bth::DEFAULT_PKEY,
        dest_qp: path.dest_qp,
        psn,
        ..Bth::default()
    };
    let ext = ExtHeaders {
        aeth: Some(Aeth { syndrome, msn }),
        atomic_ack_eth,
        ..ExtHeaders::default()
    };
    // A lost acknowledge is resent when the request is.
    let _ = port.send(stats, path, &bth, &ext, 0, |_| Ok(()));
}

const ACK: Syndrome = Syndrome::Ack {
    credits: Syndrome::UNLIMITED_CREDITS,
};

/// What the responder does with a request whose PSN is the expected one.
enum Step {
    /// Executed; complete the receive if this ends it.
    Done,
    /// Answer with this NAK; the QP goes to ERR unless it is an RNR NAK.
    Nak(Syndrome),
}

/// A request for `qp` from its connected peer. Returns whether the packet
/// was taken.
pub(crate) fn on_request(
    qp: &Arc<Qp>,
    port: &Port,
    path: &Path,
    pkt: &Packet<'_>,
    rx: &Incoming<'_>,
) -> bool {
    let stats = &qp.dev.wire_stats;
    let psn = pkt.bth.psn;
    // What the QP sends as a responder leaves in PSN order: the rest of a
    // READ being answered before anything else (a READ asked again takes
    // its place instead, see `crate::replies`).
    if pkt.info.operation != Operation::RdmaReadRequest {
        rx.replies.finish(qp);
    }
    // PSN order, under the lock; the payload is placed outside it.
    let (taken_recv, write) = {
        let mut st = qp.state.lock();
        if st.dead() || !Qp::accepts_requests(st.state) {
            WireStats::inc(&stats.rx_drop_qp_state);
            return false;
        }
        let d = psn.diff(st.rc.epsn);
        if d < 0 && pkt.info.operation == Operation::RdmaReadRequest {
            // A READ whose responses were lost: read again.
            WireStats::inc(&stats.rx_duplicates);
            drop(st);
            return landed(qp, rx, port, path, psn) && read_request(qp, port, path, pkt, rx, true);
        }
        let atomic = matches!(
            pkt.info.operation,
            Operation::CompareSwap | Operation::FetchAdd
        );
        if d < 0 && atomic {
            // An atomic whose acknowledge was lost: answer with the value
            // it found, never execute it again; one too old to be
            // remembered is dropped, as rxe drops it.
            WireStats::inc(&stats.rx_duplicates);
            let (found, msn) = (st.rc.atomics.find(psn), st.rc.msn);
            drop(st);
            if let Some(orig) = found {
                if landed(qp, rx, port, path, psn) {
                    send_atomic_ack(qp, port, path, psn, orig, msn);
                }
            }
            return true;
        }
        if d < 0 {
            // Executed already: say so again where asked, do not execute.
            WireStats::inc(&stats.rx_duplicates);
            let (last, msn) = (st.rc.epsn.add(Psn::MASK), st.rc.msn);
            drop(st);
            if pkt.bth.ack_req {
                send_ack_landed(qp, rx, port, path, last, ACK, msn);
            }
            return true;
        }
        if d > 0 {
            WireStats::inc(&stats.rx_drop_psn_ahead);
            let first_nak = !st.rc.nak_sent;
            st.rc.nak_sent = true;
            let (epsn, msn) = (st.rc.epsn, st.rc.msn);
            drop(st);
            if first_nak {
                let nak = Syndrome::Nak(NakCode::PsnSequenceError);
                send_ack_landed(qp, rx, port, path, epsn, nak, msn);
            }
            return false;
        }
        if pkt.info.operation == Operation::RdmaReadRequest {
            drop(st);
            // The responses of an earlier READ go first.
            rx.replies.finish(qp);
            return landed(qp, rx, port, path, psn) && read_request(qp, port, path, pkt, rx, false);
        }
        if atomic {
            drop(st);
            return landed(qp, rx, port, path, psn) && atomic_request(qp, port, path, pkt);
        }
        let access = st.attr.qp_access_flags;
        let min_rnr = st.attr.min_rnr_timer as u8;
        let info = pkt.info;
        let starts = info.starts_message();
        let (recv, write) = match info.operation {
            Operation::Send => {
                if starts != st.rc.recv.is_none() || st.rc.write.is_some() {
                    (None, Err(NakCode::InvalidRequest))
                } else if starts {
                    match qp.pop_recv(&mut st) {
                        Some(wqe) => (Some(InRecv { wqe, offset: 0 }), Ok(None)),
                        None => {
                            let msn = st.rc.msn;
                            drop(st);
                            let rnr = Syndrome::RnrNak { timer: min_rnr };
                            send_ack_landed(qp, rx, port, path, psn, rnr, msn);
                            return true;
                        }
                    }
                } else {
                    (st.rc.recv.take(), Ok(None))
                }
            }
            Operation::RdmaWrite => {
                if access & access::REMOTE_WRITE == 0
                    || starts != st.rc.write.is_none()
                    || st.rc.recv.is_some()
                {
                    (None, Err(NakCode::InvalidRequest))
                } else if info.completes_recv() && !qp.recv_waiting(&st) {
                    let msn = st.rc.msn;
                    drop(st);
                    let rnr = Syndrome::RnrNak { timer: min_rnr };
                    send_ack_landed(qp, rx, port, path, psn, rnr, msn);
                    return true;
                } else if starts {
                    match pkt.ext.reth {
                        Some(r) => (
                            None,
                            Ok(Some(InWrite {
                                va: r.va,
                                rkey: r.rkey,
                                len: u64::from(r.len),
                                offset: 0,
                            })),
                        ),
                        None => (None, Err(NakCode::InvalidRequest)),
                    }
                } else {
                    (None, Ok(st.rc.write.take()))
                }
            }
            _ => {
                WireStats::inc(&stats.rx_drop_unsupported_op);
                (None, Err(NakCode::InvalidRequest))
            }
        };
        // The length is checked once the receive is known, as rxe does
        // (no receive: RNR NAK first).
        let write = match write {
            Ok(_) if !length_fits(pkt, path.mtu) => {
                WireStats::inc(&stats.rx_nak_length);
                Err(NakCode::InvalidRequest)
            }
            w => w,
        };
        match write {
            Ok(w) => (recv, w),
            Err(code) => {
                // A receive taken stays the QP's, to be flushed with it.
                if recv.is_some() {
                    st.rc.recv = recv;
                }
                let msn = st.rc.msn;
                drop(st);
                send_ack_landed(qp, rx, port, path, psn, Syndrome::Nak(code), msn);
                qp.enter_error();
                return true;
            }
        }
    };
    let step = match (taken_recv, write) {
        (Some(recv), _) => place_send(qp, pkt, rx, recv),
        (None, Some(w)) => place_write(qp, pkt, rx, w),
        (None, None) => Step::Nak(Syndrome::Nak(NakCode::InvalidRequest)),
    };
    match step {
        Step::Done => {
            // Acknowledged where asked, and every `PROGRESS_EVERY`
            // requests besides: a peer that asks only at a long message's
            // end (rxe: and every 64 packets) then sees progress, and its
            // timer does not fire while this side is still placing the
            // message.
            let (msn, ack) = {
                let mut st = qp.state.lock();
                st.rc.epsn = psn.next();
                st.rc.nak_sent = false;
                if pkt.info.ends_message() {
                    st.rc.msn = (st.rc.msn + 1) & Psn::MASK;
                }
                st.rc.unacked += 1;
                let ack = pkt.bth.ack_req || st.rc.unacked >= PROGRESS_EVERY;
                if ack {
                    st.rc.unacked = 0;
                }
                (st.rc.msn, ack)
            };
            if ack {
                send_ack_landed(qp, rx, port, path, psn, ACK, msn);
            }
        }
        Step::Nak(syndrome) => {
            let msn = qp.state.lock().rc.msn;
            send_ack_landed(qp, rx, port, path, psn, syndrome, msn);
            // Not ready is not an error: the request comes again.
            if !matches!(syndrome, Syndrome::RnrNak { .. }) {
                qp.enter_error();
            }
        }
    }
    true
}

/// Whether a SEND or WRITE packet's payload fits its place in the message
/// at path MTU `mtu` (IBA C9-92 and C9-94, the checks rxe makes): a first
/// or middle packet carries exactly `mtu` bytes, a last one 1 to `mtu`, an
/// only one at most `mtu`; a DMA length is at most 2 GiB.
fn length_fits(pkt: &Packet<'_>, mtu: usize) -> bool {
    let n = pkt.payload().len();
    let fits = match (pkt.info.starts_message(), pkt.info.ends_message()) {
        (true, true) => n <= mtu,
        (false, true) => n != 0 && n <= mtu,
        _ => n == mtu,
    };
    fits && pkt.ext.reth.is_none_or(|r| r.len <= 1 << 31)
}

/// Places a SEND packet's payload into its receive; completes the receive
/// at the last packet.
fn place_send(qp: &Arc<Qp>, pkt: &Packet<'_>, rx: &Incoming<'_>, mut recv: InRecv) -> Step {
    let payload = pkt.payload();
    let room: u64 = recv.wqe.sges().iter().map(|s| u64::from(s.length)).sum();
    let end = recv.offset + payload.len() as u64;
    let recv_wc = |wqe: &RecvWqe, status, n| Wc {
        wr_id: wqe.wr_id,
        status,
        opcode: wc_opcode::RECV,
        byte_len: n,
        qp_num: qp.qpn,
        src_qp: pkt_src_qp(qp),
        ..Wc::default()
    };
    if end > room {
        // As the loopback fabric does, after rxe: the receive fails, the
        // requester gets a remote operation error (UC: the receive fails
        // as too short, and the message is dropped).
        let status = if qp.is_uc() {
            wc_status::LOC_LEN_ERR
        } else {
            wc_status::LOC_QP_OP_ERR
        };
        qp.complete_recv(recv_wc(&recv.wqe, status, 0), false);
        return Step::Nak(Syndrome::Nak(NakCode::RemoteOperationalError));
    }
    let Ok(dst) = resolve_recv(qp, recv.wqe.sges()) else {
        qp.complete_recv(recv_wc(&recv.wqe, wc_status::LOC_PROT_ERR, 0), false);
        return Step::Nak(Syndrome::Nak(NakCode::RemoteOperationalError));
    };
    let last = pkt.info.ends_message();
    if place(qp, rx, &dst, recv.offset, payload, last).is_err() {
        qp.complete_recv(recv_wc(&recv.wqe, wc_status::LOC_QP_OP_ERR, 0), false);
        return Step::Nak(Syndrome::Nak(NakCode::RemoteOperationalError));
    }
    recv.offset = end;
    if !pkt.info.ends_message() {
        let mut st = qp.state.lock();
        if st.state != qp_state::ERR && !st.dead() {
            st.rc.recv = Some(recv);
            return Step::Done;
        }
        // The QP went to ERR while the packet was placed, after its
        // receives were flushed: this one is flushed here.
        drop(st);
        qp.complete_recv(recv_wc(&recv.wqe, wc_status::WR_FLUSH_ERR, 0), false);
        return Step::Done;
    }
    let mut wc = recv_wc(&recv.wqe, wc_status::SUCCESS, end as u32);
    if let Some(imm) = pkt.ext.imm_dt {
        wc.imm_data = imm.0.to_be();
        wc.wc_flags = WC_WITH_IMM;
    }
    qp.complete_recv(wc, pkt.bth.solicited);
    Step::Done
}

/// Places an RDMA WRITE packet's payload into the region its first packet
/// named; a WRITE with immediate completes a receive at its end.
fn place_write(qp: &Arc<Qp>, pkt: &Packet<'_>, rx: &Incoming<'_>, mut w: InWrite) -> Step {
    let payload = pkt.payload();
    let end = w.offset + payload.len() as u64;
    let last = pkt.info.ends_message();
    if end > w.len || (last && end != w.len) {
        return Step::Nak(Syndrome::Nak(NakCode::InvalidRequest));
    }
    if !payload.is_empty() {
        let Some(mr) = qp.dev.mrs.get(w.rkey) else {
            return Step::Nak(Syndrome::Nak(NakCode::RemoteAccessError));
        };
        let ok =
            mr.rkey() == w.rkey && Arc::ptr_eq(&mr.pd, &qp.pd) && mr.allows(access::REMOTE_WRITE);
        let Some(offset) = mr.offset_of(w.va, w.len).filter(|_| ok) else {
            return Step::Nak(Syndrome::Nak(NakCode::RemoteAccessError));
        };
        let piece = [Piece {
            mr,
            offset,
            len: w.len,
        }];
        if place(qp, rx, &piece, w.offset, payload, last).is_err() {
            return Step::Nak(Syndrome::Nak(NakCode::RemoteOperationalError));
        }
    }
    w.offset = end;
    if !last {
        qp.state.lock().rc.write = Some(w);
        return Step::Done;
    }
    if let Some(imm) = pkt.ext.imm_dt {
        let Some(wqe) = qp.pop_recv(&mut qp.state.lock()) else {
            return Step::Nak(Syndrome::RnrNak { timer: 0 });
        };
        qp.complete_recv(
            Wc {
                wr_id: wqe.wr_id,
                status: wc_status::SUCCESS,
                opcode: wc_opcode::RECV_RDMA_WITH_IMM,
                byte_len: end as u32,
                imm_data: imm.0.to_be(),
                qp_num: qp.qpn,
                src_qp: pkt_src_qp(qp),
                wc_flags: WC_WITH_IMM,
                ..Wc::default()
            },
            pkt.bth.solicited,
        );
    }
    Step::Done
}

/// The source QP of a connected QP's requests: its destination.
fn pkt_src_qp(qp: &Qp) -> u32 {
    qp.state.lock().attr.dest_qp_num
}

/// A request for a UC QP, in the shape of rxe's responder for UC: no
/// acknowledge, NAK or duplicate. A packet after a gap in the PSNs (a lost
/// one) drops the message in progress and every packet up to the next
/// first one, which starts afresh; a message the QP cannot take (no
/// receive, no right, a bad key, a wrong length) is dropped the same way,
/// the QP staying in RTS. A receive left half-filled by a dropped SEND is
/// used again by the next one. Returns whether the packet was taken.
pub(crate) fn on_uc_request(
    qp: &Arc<Qp>,
    path: &Path,
    pkt: &Packet<'_>,
    rx: &Incoming<'_>,
) -> bool {
    let stats = &qp.dev.wire_stats;
    let psn = pkt.bth.psn;
    let info = pkt.info;
    let starts = info.starts_message();
    // Drops the rest of the message (from the packet after this one).
    let drop_rest = |st: &mut QpState| {
        WireStats::inc(&stats.rx_uc_dropped);
        st.rc.write = None;
        if let Some(r) = st.rc.recv.as_mut() {
            r.offset = 0;
        }
        st.rc.uc_dropping = !info.ends_message();
    };
    let (recv, write) = {
        let mut st = qp.state.lock();
        if st.dead() || !Qp::accepts_requests(st.state) {
            WireStats::inc(&stats.rx_drop_qp_state);
            return false;
        }
        let in_sequence = psn == st.rc.epsn && !st.rc.uc_dropping;
        st.rc.epsn = psn.next();
        if !in_sequence && !starts {
            drop_rest(&mut st);
            st.rc.uc_dropping = true;
            return true;
        }
        if !in_sequence {
            // A first packet after a gap: what was in progress is lost.
            st.rc.write = None;
            if let Some(r) = st.rc.recv.as_mut() {
                r.offset = 0;
            }
        }
        st.rc.uc_dropping = false;
        let access = st.attr.qp_access_flags;
        let taken = match info.operation {
            Operation::Send if starts => {
                st.rc.write = None;
                let reused = st.rc.recv.take().map(|r| r.wqe);
                reused
                    .or_else(|| qp.pop_recv(&mut st))
                    .map(|wqe| (Some(InRecv { wqe, offset: 0 }), None))
            }
            Operation::Send => st.rc.recv.take().map(|r| (Some(r), None)),
            Operation::RdmaWrite if access & access::REMOTE_WRITE == 0 => None,
            Operation::RdmaWrite if starts => pkt.ext.reth.map(|r| {
                (
                    None,
                    Some(InWrite {
                        va: r.va,
                        rkey: r.rkey,
                        len: u64::from(r.len),
                        offset: 0,
                    }),
                )
            }),
            Operation::RdmaWrite => st.rc.write.take().map(|w| (None, Some(w))),
            _ => None,
        };
        match taken {
            Some(t) if length_fits(pkt, path.mtu) => t,
            Some((r, _)) => {
                // Kept for the next message.
                st.rc.recv = r;
                drop_rest(&mut st);
                return true;
            }
            None => {
                drop_rest(&mut st);
                return true;
            }
        }
    };
    let step = match (recv, write) {
        (Some(r), _) => place_send(qp, pkt, rx, r),
        (None, Some(w)) => place_write(qp, pkt, rx, w),
        (None, None) => return true,
    };
    if let Step::Nak(_) = step {
        drop_rest(&mut qp.state.lock());
    }
    true
}
