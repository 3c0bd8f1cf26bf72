// SPDX-License-Identifier: GPL-2.0

//! Executing send work requests on the loopback fabric.
//!
//! Every QP of the device is reachable from every other by its number: a
//! request's peer is the QP its `dest_qp_num` names. Each request is
//! checked in full before a byte moves, in the order a responder would
//! meet the problems: the local gather/scatter list (lkey, PD, access,
//! bounds), then the peer (present and able to answer), then the remote
//! region (rkey, PD, access, bounds, the peer QP's access flags) or the
//! peer's receive. The first failure decides the work completion status,
//! the one rxe gives for it, and the QPs that verbs moves to ERR go there;
//! nothing is written then.
//!
//! A QP connected over the wire (a peer on another host, or any peer with
//! `wire_local`) does not come here: its requests become RoCEv2 packets
//! (`rc`, `net`).

use crate::rdma::types::{
    access, qp_state, send_flags, wc_opcode, wc_status, wr_opcode, Sge, Wc, WC_WITH_IMM,
};
use crate::{
    atomic::{self, AtomicOp, ATOMIC_LEN},
    mover::CopyError,
    mr::MrUse,
    pd::Pd,
    qp::{Qp, RecvWqe, SendWqe},
    send_burst::SendBurst,
    stats::Stats,
};
use kernel::{
    prelude::*,
    sync::Arc,
    time::{delay::fsleep, Delta},
};

/// One contiguous piece of a region that a request reads or writes.
pub(crate) struct Piece {
    pub(crate) mr: MrUse,
    pub(crate) offset: u64,
    pub(crate) len: u64,
}

/// How a request ended.
#[derive(Clone, Copy)]
pub(crate) enum Outcome {
    /// Done; the completion reports `byte_len` bytes.
    Done(u32),
    /// Failed with this work completion status; the QP goes to ERR.
    Failed(u32),
    /// The QP is being destroyed: nothing completes.
    Stopped,
    /// The request must wait (for the peer to post a receive), which only
    /// the work item does: it goes back to the head of the queue, nothing
    /// of it done.
    Deferred,
    /// Its copy is queued in the work item's burst, which completes it
    /// ([`SendBurst`]).
    Queued,
}

/// Which thread runs a send queue.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Runner {
    /// The QP's work item, which may sleep as long as a request needs.
    Worker,
    /// The thread that posted the request, in its system call, so that a
    /// short request completes without waking a worker: it runs only the
    /// requests whose bytes the CPU moves ([`Qp::runs_on_poster`]) and
    /// defers one that would wait.
    Poster,
}

/// Executes the QP's send queue until it is empty, the QP leaves RTS, or
/// it is being destroyed; on the poster's thread, until a request there
/// is not for it.
pub(crate) fn run_send_queue(qp: &Arc<Qp>, runner: Runner) {
    let mut burst = SendBurst::new();
    while let Some((wqe, state)) = qp.next_send(runner) {
        if state == qp_state::ERR {
            burst.flush(qp);
            qp.complete_send(send_wc(qp, &wqe, wc_status::WR_FLUSH_ERR, 0));
            continue;
        }
        let outcome = if qp.is_datagram() {
            crate::ud::send(qp, &wqe)
        } else if qp.on_wire() {
            crate::rc::execute(qp, &wqe)
        } else {
            let joins = runner == Runner::Worker && joins_burst(qp, &wqe);
            if !joins {
                burst.flush(qp);
            }
            execute(qp, &wqe, runner, joins.then_some(&mut burst))
        };
        if !matches!(outcome, Outcome::Queued) {
            burst.flush(qp);
        }
        if let Outcome::Deferred = outcome {
            Stats::add(&qp.dev.stats.poster_deferred, 1);
            qp.defer_send(wqe);
            return;
        }
        Stats::add(&qp.dev.stats.send_wrs, 1);
        if runner == Runner::Poster {
            Stats::add(&qp.dev.stats.poster_wrs, 1);
        }
        match outcome {
            Outcome::Done(n) => {
                if qp.signaled(&wqe) {
                    qp.complete_send(send_wc(qp, &wqe, wc_status::SUCCESS, n));
                }
            }
            Outcome::Failed(status) => {
                // An error completes whether or not it was signalled.
                qp.complete_send(send_wc(qp, &wqe, status, 0));
                qp.enter_error();
            }
            Outcome::Stopped => {
                // The QP is being destroyed, and its destroy waits for
                // the worker to be idle.
                qp.worker_stopped();
                return;
            }
            // Handled above, and by the burst.
            Outcome::Deferred | Outcome::Queued => {}
        }
    }
    burst.flush(qp);
}

/// Whether the work item may queue `wqe`'s copy in its burst: an RDMA
/// WRITE or READ (without immediate data) whose bytes are in regions, and
/// that the engine would copy.
fn joins_burst(qp: &Qp, wqe: &SendWqe) -> bool {
    matches!(wqe.opcode, wr_opcode::RDMA_WRITE | wr_opcode::RDMA_READ)
        && wqe.inline.is_none()
        && wqe.atomic.is_none()
        && !qp.dev.mover.cpu_copies(wqe.len())
}

/// Queues the copy of an RDMA WRITE or READ between its local list and
/// `remote` in `burst`. If the engine cannot take it, gives back the local
/// list and the remote piece (`None` only if there was no memory to queue
/// it with).
fn queue_rdma(
    qp: &Arc<Qp>,
    wqe: &SendWqe,
    burst: &mut SendBurst,
    local: KVec<Piece>,
    remote: Piece,
    byte_len: u32,
) -> core::result::Result<(), (KVec<Piece>, Option<Piece>)> {
    let mut one = match KVec::with_capacity(1, GFP_KERNEL) {
        Ok(v) => v,
        Err(_) => return Err((local, Some(remote))),
    };
    // Room for one was made above.
    let _ = one.push_within_capacity(remote);
    let wc = send_wc(qp, wqe, wc_status::SUCCESS, byte_len);
    let reads = wqe.opcode == wr_opcode::RDMA_READ;
    let (dst, src) = if reads { (local, one) } else { (one, local) };
    burst
        .queue(qp, dst, src, wc, qp.signaled(wqe))
        .map_err(|(dst, src)| {
            let (local, mut one) = if reads { (dst, src) } else { (src, dst) };
            (local, one.pop())
        })
}

pub(crate) fn send_wc(qp: &Qp, wqe: &SendWqe, status: u32, byte_len: u32) -> Wc {
    // rxe flags the requester's completion of a request with immediate
    // data too (with the data itself left 0).
    let with_imm = matches!(
        wqe.opcode,
        wr_opcode::SEND_WITH_IMM | wr_opcode::RDMA_WRITE_WITH_IMM
    );
    Wc {
        wr_id: wqe.wr_id,
        status,
        opcode: wqe.wc_opcode(),
        byte_len,
        qp_num: qp.qpn,
        wc_flags: if with_imm { WC_WITH_IMM } else { 0 },
        ..Wc::default()
    }
}

/// Resolves a gather or scatter list of `qp`'s against its PD; `want` are
/// the access bits each region must grant. `Err(())` is a local
/// protection error.
pub(crate) fn resolve(qp: &Qp, sges: &[Sge], want: u32) -> core::result::Result<KVec<Piece>, ()> {
    resolve_in(qp, &qp.pd, sges, want)
}

/// Resolves a receive request's scatter list of `qp`'s, which must grant
/// local write, against the PD it was posted under (the SRQ's, if the QP
/// has one).
pub(crate) fn resolve_recv(qp: &Qp, sges: &[Sge]) -> core::result::Result<KVec<Piece>, ()> {
    resolve_in(qp, qp.recv_pd(), sges, access::LOCAL_WRITE)
}

fn resolve_in(
    qp: &Qp,
    pd: &Arc<Pd>,
    sges: &[Sge],
    want: u32,
) -> core::result::Result<KVec<Piece>, ()> {
    let mut out = KVec::with_capacity(sges.len(), GFP_KERNEL).map_err(|_| ())?;
    for s in sges.iter().filter(|s| s.length != 0) {
        let mr = qp.dev.mrs.get(s.lkey).ok_or(())?;
        if !Arc::ptr_eq(&mr.pd, pd) || !mr.allows(want) {
            return Err(());
        }
        let len = u64::from(s.length);
        let offset = mr.offset_of(s.addr, len).ok_or(())?;
        out.push(Piece { mr, offset, len }, GFP_KERNEL)
            .map_err(|_| ())?;
    }
    Ok(out)
}

/// The remote region of an RDMA request, checked against the peer QP.
fn resolve_remote(peer: &Qp, wqe: &SendWqe, want: u32, len: u64) -> Option<Piece> {
    if wqe.rkey == 0 {
        return None;
    }
    let mr = peer.dev.mrs.get(wqe.rkey)?;
    if mr.rkey() != wqe.rkey || !Arc::ptr_eq(&mr.pd, &peer.pd) || !mr.allows(want) {
        return None;
    }
    let offset = mr.offset_of(wqe.remote_addr, len)?;
    Some(Piece { mr, offset, len })
}

/// Walks the pairs of pieces of `dst` and `src`, in list order, up to the
/// shorter list, handing `f` each stretch: the destination piece's index
/// and the offset in it, the source piece's and its offset, the length.
/// Stops at the first error `f` returns.
pub(crate) fn piece_pairs<E>(
    dst: &[Piece],
    src: &[Piece],
    mut f: impl FnMut(usize, u64, usize, u64, u64) -> core::result::Result<(), E>,
) -> core::result::Result<(), E> {
    let (mut di, mut doff, mut si, mut soff) = (0, 0u64, 0, 0u64);
    while di < dst.len() && si < src.len() {
        let n = (dst[di].len - doff).min(src[si].len - soff);
        f(di, doff, si, soff, n)?;
        doff += n;
        soff += n;
        if doff == dst[di].len {
            di += 1;
            doff = 0;
        }
        if soff == src[si].len {
            si += 1;
            soff = 0;
        }
    }
    Ok(())
}

/// Copies the bytes of `src` into `dst`, both in list order, up to the
/// shorter one.
fn copy_pieces(qp: &Qp, dst: &[Piece], src: &[Piece]) -> core::result::Result<(), CopyError> {
    piece_pairs(dst, src, |di, doff, si, soff, n| {
        let (d, s) = (&dst[di], &src[si]);
        qp.dev.mover.copy(
            &qp.dev.stats,
            &d.mr.mem,
            d.offset + doff,
            &s.mr.mem,
            s.offset + soff,
            n,
        )
    })
}

/// Writes an inline request's `bytes` into `dst`, in list order, with the
/// CPU: they are in the kernel already, and few.
pub(crate) fn place_inline(dst: &[Piece], bytes: &[u8]) -> core::result::Result<(), CopyError> {
    let mut from = 0usize;
    for d in dst {
        if from == bytes.len() {
            break;
        }
        let n = (bytes.len() - from).min(usize::try_from(d.len).unwrap_or(usize::MAX));
        let off = usize::try_from(d.offset).map_err(|_| CopyError::Failed)?;
        d.mr.mem
            .write_at(off, &bytes[from..from + n])
            .map_err(|_| CopyError::Failed)?;
        from += n;
    }
    Ok(())
}

/// The work completion status of a failed copy; a stuck channel keeps
/// every region involved pinned for good.
fn copy_failed(e: CopyError, regions: &[&[Piece]]) -> Outcome {
    if e == CopyError::Stuck {
        for p in regions.iter().flat_map(|r| r.iter()) {
            p.mr.leak();
        }
        return Outcome::Failed(wc_status::FATAL_ERR);
    }
    Outcome::Failed(wc_status::LOC_QP_OP_ERR)
}

/// The peer QP, if it exists, is an RC QP connected back to `qp` and
/// answers requests.
///
/// Connected back: its own destination is `qp`. That is the connection
/// state an RC responder keeps, and what stops any local QP from naming
/// another user's QP as its destination and sending into its receive
/// buffers, writing its regions or moving it to ERR. The GSI QP is never
/// an RC peer (rxe drops RC packets to QP1).
fn peer_of(qp: &Qp) -> Option<Arc<Qp>> {
    let peer = qp.dev.find_qp(qp.dest_qpn()?)?;
    if peer.qp_type != qp.qp_type || !peer.is_connected() || peer.dest_qpn()? != qp.qpn {
        return None;
    }
    let state = peer.current_state()?;
    Qp::accepts_requests(state).then_some(peer)
}

/// The RNR NAK delay of `min_rnr_timer` code `code`, in microseconds
/// (IBTA table 45: 0 is the longest, 655.36 ms).
pub(crate) fn rnr_delay_us(code: u32) -> i64 {
    const US: [i64; 32] = [
        655_360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1_280, 1_920, 2_560,
        3_840, 5_120, 7_680, 10_240, 15_360, 20_480, 30_720, 40_960, 61_440, 81_920, 122_880,
        163_840, 245_760, 327_680, 491_520,
    ];
    US[(code & 0x1f) as usize]
}

/// Waits until the peer has a receive posted, as RNR NAKs and retries
/// would: `rnr_retry` 7 waits for good, fewer give up with
/// `RNR_RETRY_EXC_ERR`. Only `qp` takes the peer's receives (its one
/// connected QP, unless they share an SRQ), so the receive is still there
/// for [`take_recv`].
///
/// Each retry waits the delay the responder (the peer) asks for in its
/// RNR NAK, its `min_rnr_timer`, sleeping: at least 20 us, so that the
/// work item always gives the CPU up. A peer that stops taking requests
/// (moved to ERR, RESET or INIT) answers no more: `RETRY_EXC_ERR`.
///
/// On the poster's thread a wait is `Deferred` instead.
fn wait_recv(qp: &Qp, peer: &Qp, runner: Runner) -> core::result::Result<(), Outcome> {
    let retries = qp.rnr_retry();
    let mut tries = 0u32;
    loop {
        if peer.has_recv() {
            return Ok(());
        }
        if qp.stopping() {
            return Err(Outcome::Stopped);
        }
        // SQD drains: the request in progress goes on, only the next
        // ones wait for RTS again.
        if !matches!(qp.current_state(), Some(qp_state::RTS | qp_state::SQD)) {
            return Err(Outcome::Failed(wc_status::WR_FLUSH_ERR));
        }
        match peer.current_state() {
            Some(s) if Qp::accepts_requests(s) => {}
            _ => return Err(Outcome::Failed(wc_status::RETRY_EXC_ERR)),
        }
        if retries != 7 && tries >= retries {
            return Err(Outcome::Failed(wc_status::RNR_RETRY_EXC_ERR));
        }
        if runner == Runner::Poster {
            return Err(Outcome::Deferred);
        }
        tries = tries.saturating_add(1);
        fsleep(Delta::from_micros(
            rnr_delay_us(peer.min_rnr_timer()).max(20),
        ));
    }
}

/// [`wait_recv`] on RC; on UC (no RNR NAK to wait on) `Err(dropped)`
/// unless a receive is there now.
fn await_recv(
    qp: &Qp,
    peer: &Qp,
    dropped: Outcome,
    runner: Runner,
) -> core::result::Result<(), Outcome> {
    if !qp.is_uc() {
        return wait_recv(qp, peer, runner);
    }
    if peer.has_recv() {
        Ok(())
    } else {
        Err(dropped)
    }
}

/// The receive [`wait_recv`] found. On an SRQ another of its QPs may have
/// taken it meanwhile: then the wait goes on for the next one. Otherwise
/// it is gone only if the peer flushed it (it went to ERR), which the
/// requester sees as no answer.
fn take_recv(qp: &Qp, peer: &Qp, runner: Runner) -> core::result::Result<RecvWqe, Outcome> {
    loop {
        if let Some(r) = peer.take_recv() {
            return Ok(r);
        }
        if peer.srq.is_none() {
            return Err(Outcome::Failed(wc_status::RETRY_EXC_ERR));
        }
        wait_recv(qp, peer, runner)?;
    }
}

fn execute(qp: &Arc<Qp>, wqe: &SendWqe, runner: Runner, burst: Option<&mut SendBurst>) -> Outcome {
    let len = wqe.len();
    let Ok(byte_len) = u32::try_from(len) else {
        return Outcome::Failed(wc_status::LOC_LEN_ERR);
    };
    let reads = wqe.opcode == wr_opcode::RDMA_READ;
    // An RDMA READ and an atomic write the local list; everything else
    // reads it. An inline request's bytes were copied at post: its list
    // names no region.
    let writes_local = reads || wqe.atomic.is_some();
    let lookup_local = || match &wqe.inline {
        Some(_) => Ok(KVec::new()),
        None => resolve(
            qp,
            wqe.sges(),
            if writes_local { access::LOCAL_WRITE } else { 0 },
        )
        .map_err(|()| Outcome::Failed(wc_status::LOC_PROT_ERR)),
    };
    let local = match lookup_local() {
        Ok(l) => l,
        Err(o) => return o,
    };
    // What a UC responder cannot take (no receive, no right, a bad key,
    // no peer at all) it drops, and the requester, never told, completes
    // the request (IBA 9.7.5.1.3's class D and E errors; rxe alike).
    let uc = qp.is_uc();
    let dropped = Outcome::Done(byte_len);
    let Some(peer) = peer_of(qp) else {
        return if uc {
            dropped
        } else {
            Outcome::Failed(wc_status::RETRY_EXC_ERR)
        };
    };
    if let Some(op) = wqe.atomic {
        return execute_atomic(&peer, wqe, op, &local);
    }
    match wqe.opcode {
        wr_opcode::RDMA_WRITE | wr_opcode::RDMA_WRITE_WITH_IMM | wr_opcode::RDMA_READ => {
            let want = if reads {
                access::REMOTE_READ
            } else {
                access::REMOTE_WRITE
            };
            if peer.peer_access() & want != want {
                if uc {
                    return dropped;
                }
                // The peer QP does not take this operation at all: an
                // invalid request, as rxe's responder NAKs it.
                peer.enter_error();
                return Outcome::Failed(wc_status::REM_INV_REQ_ERR);
            }
            // Zero bytes name no remote memory: the responder checks no
            // R_Key then (IBTA 9.7.4.1.2; rxe does the same).
            let lookup_remote = || match len {
                0 => Ok(None),
                _ => match resolve_remote(&peer, wqe, want, len) {
                    Some(r) => Ok(Some(r)),
                    None if uc => Err(dropped),
                    None => {
                        // The responder NAKs the access; both ends go to ERR.
                        peer.enter_error();
                        Err(Outcome::Failed(wc_status::REM_ACCESS_ERR))
                    }
                },
            };
            let mut remote = match lookup_remote() {
                Ok(r) => r,
                Err(o) => return o,
            };
            let mut local = local;
            let recv = if wqe.opcode == wr_opcode::RDMA_WRITE_WITH_IMM {
                // The regions are let go across the wait and looked up
                // again after it (see the SEND case below).
                drop((remote, local));
                if let Err(o) = await_recv(qp, &peer, dropped, runner) {
                    return o;
                }
                (local, remote) = match (lookup_local(), lookup_remote()) {
                    (Ok(l), Ok(m)) => (l, m),
                    (Err(o), _) | (_, Err(o)) => return o,
                };
                match take_recv(qp, &peer, runner) {
                    Ok(r) => Some(r),
                    Err(_) if uc => return dropped,
                    Err(o) => return o,
                }
            } else {
                None
            };
            if let Some(remote) = remote {
                let remote = match burst {
                    Some(b) if recv.is_none() && wqe.inline.is_none() => {
                        match queue_rdma(qp, wqe, b, local, remote, byte_len) {
                            Ok(()) => return Outcome::Queued,
                            Err((l, Some(r))) => {
                                local = l;
                                r
                            }
                            Err((_, None)) => return Outcome::Failed(wc_status::LOC_QP_OP_ERR),
                        }
                    }
                    _ => remote,
                };
                let remote = [remote];
                let copied = match &wqe.inline {
                    Some(bytes) => place_inline(&remote, bytes),
                    None if reads => copy_pieces(qp, &local, &remote),
                    None => copy_pieces(qp, &remote, &local),
                };
                if let Err(e) = copied {
                    return copy_failed(e, &[&local, &remote]);
                }
            }
            if let Some(r) = recv {
                peer.complete_recv(
                    Wc {
                        wr_id: r.wr_id,
                        status: wc_status::SUCCESS,
                        opcode: wc_opcode::RECV_RDMA_WITH_IMM,
                        byte_len,
                        imm_data: wqe.imm_data,
                        qp_num: peer.qpn,
                        src_qp: qp.qpn,
                        wc_flags: WC_WITH_IMM,
                        ..Wc::default()
                    },
                    wqe.flags & send_flags::SOLICITED != 0,
                );
            }
            Outcome::Done(byte_len)
        }
        _ => {
            // Checked above, then let go while the peer has no receive:
            // a region held across that wait (for good with rnr_retry 7)
            // would make its deregistration wait as long.
            drop(local);
            if let Err(o) = await_recv(qp, &peer, dropped, runner) {
                return o;
            }
            let local = match lookup_local() {
                Ok(l) => l,
                Err(o) => return o,
            };
            let recv = match take_recv(qp, &peer, runner) {
                Ok(r) => r,
                Err(_) if uc => return dropped,
                Err(o) => return o,
            };
            let recv_wc = |status, n| Wc {
                wr_id: recv.wr_id,
                status,
                opcode: wc_opcode::RECV,
                byte_len: n,
                qp_num: peer.qpn,
                src_qp: qp.qpn,
                ..Wc::default()
            };
            let room: u64 = recv.sges().iter().map(|s| u64::from(s.length)).sum();
            if len > room {
                // rxe's responder fails the receive as a local QP
                // operation error and NAKs the requester with a remote
                // operation error. UC: the receive fails as too short,
                // the requester hears nothing.
                if uc {
                    peer.complete_recv(recv_wc(wc_status::LOC_LEN_ERR, 0), false);
                    return dropped;
                }
                peer.complete_recv(recv_wc(wc_status::LOC_QP_OP_ERR, 0), false);
                peer.enter_error();
                return Outcome::Failed(wc_status::REM_OP_ERR);
            }
            let Ok(dst) = resolve_recv(&peer, recv.sges()) else {
                peer.complete_recv(recv_wc(wc_status::LOC_PROT_ERR, 0), false);
                if uc {
                    return dropped;
                }
                peer.enter_error();
                return Outcome::Failed(wc_status::REM_OP_ERR);
            };
            let copied = match &wqe.inline {
                Some(bytes) => place_inline(&dst, bytes),
                None => copy_pieces(qp, &dst, &local),
            };
            if let Err(e) = copied {
                peer.complete_recv(recv_wc(wc_status::LOC_QP_OP_ERR, 0), false);
                return copy_failed(e, &[&local, &dst]);
            }
            let mut wc = recv_wc(wc_status::SUCCESS, byte_len);
            if wqe.opcode == wr_opcode::SEND_WITH_IMM {
                wc.imm_data = wqe.imm_data;
                wc.wc_flags = WC_WITH_IMM;
            }
            peer.complete_recv(wc, wqe.flags & send_flags::SOLICITED != 0);
            Outcome::Done(byte_len)
        }
    }
}

/// An atomic on the peer's region, as rxe's responder checks it: a QP
/// that grants no atomics or a misaligned target is an invalid request,
/// a key, protection domain, right or bound that does not hold a remote
/// access error. The original value goes to the local list.
fn execute_atomic(peer: &Arc<Qp>, wqe: &SendWqe, op: AtomicOp, local: &[Piece]) -> Outcome {
    if peer.peer_access() & access::REMOTE_ATOMIC == 0 || !atomic::aligned(wqe.remote_addr) {
        peer.enter_error();
        return Outcome::Failed(wc_status::REM_INV_REQ_ERR);
    }
    let Some(target) = resolve_remote(peer, wqe, access::REMOTE_ATOMIC, ATOMIC_LEN) else {
        peer.enter_error();
        return Outcome::Failed(wc_status::REM_ACCESS_ERR);
    };
    let Ok(old) = atomic::execute(&peer.dev, &target, op) else {
        peer.enter_error();
        return Outcome::Failed(wc_status::REM_OP_ERR);
    };
    drop(target);
    match place_inline(local, &old.to_ne_bytes()) {
        Ok(()) => Outcome::Done(u32::try_from(wqe.len()).unwrap_or(u32::MAX)),
        Err(_) => Outcome::Failed(wc_status::LOC_PROT_ERR),
    }
}
