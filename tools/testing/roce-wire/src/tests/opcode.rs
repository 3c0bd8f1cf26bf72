// SPDX-License-Identifier: GPL-2.0

//! Facts of the IBA opcode table (the same as `rdma_rxe`'s
//! `rxe_opcode[]`).

use crate::wire::bth::Bth;
use crate::wire::opcode::{code, Headers, OpInfo, Operation, Position, Transport};

fn info(op: u8) -> OpInfo {
    OpInfo::lookup(op).unwrap_or_else(|| panic!("opcode {op:#04x} unknown"))
}

#[test]
fn write_first_and_only_carry_reth() {
    let first = info(code::RC_RDMA_WRITE_FIRST);
    assert_eq!(first.headers, Headers::RETH);
    assert_eq!(first.position, Position::First);
    assert_eq!(first.header_len(), 28);
    assert!(first.payload);
    assert_eq!(info(code::RC_RDMA_WRITE_MIDDLE).headers, Headers::NONE);
    assert_eq!(info(code::RC_RDMA_WRITE_LAST).headers, Headers::NONE);
    assert_eq!(info(code::RC_RDMA_WRITE_ONLY).headers, Headers::RETH);
    let imm = info(code::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE);
    assert_eq!(imm.headers, Headers::RETH | Headers::IMM_DT);
    assert_eq!(imm.header_len(), 32);
    // RETH comes before ImmDt.
    assert_eq!(imm.headers.offset(Headers::RETH), Some(12));
    assert_eq!(imm.headers.offset(Headers::IMM_DT), Some(28));
    assert_eq!(
        info(code::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE).headers,
        Headers::IMM_DT
    );
}

#[test]
fn sends() {
    let only_imm = info(code::RC_SEND_ONLY_WITH_IMMEDIATE);
    assert_eq!(only_imm.headers, Headers::IMM_DT);
    assert_eq!(only_imm.operation, Operation::Send);
    assert_eq!(only_imm.position, Position::Only);
    assert_eq!(only_imm.header_len(), 16);
    assert_eq!(info(code::RC_SEND_ONLY).headers, Headers::NONE);
    assert_eq!(info(code::RC_SEND_ONLY).header_len(), 12);
    assert_eq!(
        info(code::RC_SEND_LAST_WITH_IMMEDIATE).headers,
        Headers::IMM_DT
    );
    assert_eq!(
        info(code::RC_SEND_ONLY_WITH_INVALIDATE).headers,
        Headers::IETH
    );
    assert_eq!(
        info(code::RC_SEND_LAST_WITH_INVALIDATE).headers,
        Headers::IETH
    );
    for op in 0x00..=0x05 {
        let i = info(op);
        assert_eq!(i.operation, Operation::Send);
        assert!(i.payload && i.is_request() && i.needs_ack());
    }
}

#[test]
fn read_responses_first_last_only_carry_aeth() {
    for (op, pos, headers) in [
        (
            code::RC_RDMA_READ_RESPONSE_FIRST,
            Position::First,
            Headers::AETH,
        ),
        (
            code::RC_RDMA_READ_RESPONSE_MIDDLE,
            Position::Middle,
            Headers::NONE,
        ),
        (
            code::RC_RDMA_READ_RESPONSE_LAST,
            Position::Last,
            Headers::AETH,
        ),
        (
            code::RC_RDMA_READ_RESPONSE_ONLY,
            Position::Only,
            Headers::AETH,
        ),
    ] {
        let i = info(op);
        assert_eq!(i.operation, Operation::RdmaReadResponse);
        assert_eq!(i.position, pos);
        assert_eq!(i.headers, headers);
        assert!(i.payload && i.is_response() && !i.needs_ack());
    }
    let req = info(code::RC_RDMA_READ_REQUEST);
    assert_eq!(req.headers, Headers::RETH);
    assert!(!req.payload && req.needs_ack());
    assert_eq!(req.position, Position::Only);
}

#[test]
fn acknowledges() {
    let ack = info(code::RC_ACKNOWLEDGE);
    assert_eq!(ack.headers, Headers::AETH);
    assert_eq!(ack.header_len(), 16);
    assert!(!ack.payload && ack.is_response() && !ack.needs_ack());
    let atomic = info(code::RC_ATOMIC_ACKNOWLEDGE);
    assert_eq!(atomic.headers, Headers::AETH | Headers::ATOMIC_ACK_ETH);
    assert_eq!(atomic.headers.offset(Headers::AETH), Some(12));
    assert_eq!(atomic.headers.offset(Headers::ATOMIC_ACK_ETH), Some(16));
    assert_eq!(atomic.header_len(), 24);
}

#[test]
fn atomics_and_flush() {
    for op in [code::RC_COMPARE_SWAP, code::RC_FETCH_ADD] {
        let i = info(op);
        assert_eq!(i.headers, Headers::ATOMIC_ETH);
        assert_eq!(i.header_len(), 40);
        assert!(!i.payload && i.needs_ack());
    }
    let flush = info(code::RC_FLUSH);
    assert_eq!(flush.headers, Headers::FETH | Headers::RETH);
    assert_eq!(flush.headers.offset(Headers::FETH), Some(12));
    assert_eq!(flush.headers.offset(Headers::RETH), Some(16));
    assert_eq!(info(code::RC_ATOMIC_WRITE).headers, Headers::RETH);
    assert!(info(code::RC_ATOMIC_WRITE).payload);
}

#[test]
fn ud_sends_carry_deth() {
    let send = info(code::UD_SEND_ONLY);
    assert_eq!(send.transport, Transport::Ud);
    assert_eq!(send.headers, Headers::DETH);
    assert_eq!(send.header_len(), 20);
    assert!(!send.needs_ack() && send.consumes_recv_wqe() && send.completes_recv());
    let imm = info(code::UD_SEND_ONLY_WITH_IMMEDIATE);
    assert_eq!(imm.headers, Headers::DETH | Headers::IMM_DT);
    assert_eq!(imm.headers.offset(Headers::DETH), Some(12));
    assert_eq!(imm.headers.offset(Headers::IMM_DT), Some(20));
    // UD has nothing but SEND ONLY.
    for low in (0..0x20).filter(|l| *l != 4 && *l != 5) {
        assert_eq!(OpInfo::lookup(0x60 | low), None, "UD {low:#x}");
    }
}

#[test]
fn uc_has_sends_and_writes_only() {
    for low in 0..0x20u8 {
        let known = OpInfo::lookup(0x20 | low).is_some();
        assert_eq!(known, low <= 0x0b, "UC {low:#x}");
    }
    let i = info(code::UC_RDMA_WRITE_ONLY);
    assert_eq!(i.transport, Transport::Uc);
    assert!(!i.needs_ack());
    assert_eq!(info(code::UC_SEND_ONLY).headers, Headers::NONE);
}

#[test]
fn rd_adds_rdeth_and_deth() {
    let send = info(0x40 | code::RC_SEND_ONLY);
    assert_eq!(send.headers, Headers::RDETH | Headers::DETH);
    assert_eq!(send.header_len(), 24);
    let write = info(0x40 | code::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE);
    assert_eq!(write.header_len(), 12 + 4 + 8 + 16 + 4);
    assert_eq!(write.headers.offset(Headers::RETH), Some(24));
    // Responses get the RDETH only.
    let ack = info(0x40 | code::RC_ACKNOWLEDGE);
    assert_eq!(ack.headers, Headers::RDETH | Headers::AETH);
    assert!(OpInfo::lookup(0x40 | code::RC_SEND_ONLY_WITH_INVALIDATE).is_none());
}

#[test]
fn unknown_opcodes() {
    for op in [
        0x15,
        0x18,
        0x1b,
        0x1e,
        0x1f,
        0x80,
        code::CNP,
        0xc0,
        0xe0,
        0xff,
    ] {
        assert_eq!(OpInfo::lookup(op), None, "{op:#04x}");
    }
    // 25 RC, 12 UC, 21 RD and 2 UD opcodes: rxe_opcode[]'s 60 entries.
    let known = (0..=255u8)
        .filter(|op| OpInfo::lookup(*op).is_some())
        .count();
    assert_eq!(known, 60);
}

#[test]
fn positions_and_message_edges() {
    for op in 0..=255u8 {
        let Some(i) = OpInfo::lookup(op) else {
            continue;
        };
        assert_eq!(i.opcode, op);
        assert_eq!(
            i.starts_message(),
            matches!(i.position, Position::First | Position::Only)
        );
        assert_eq!(
            i.ends_message(),
            matches!(i.position, Position::Last | Position::Only)
        );
        // Only the first/only packet of a WRITE says where it goes.
        if i.operation == Operation::RdmaWrite {
            assert_eq!(i.has(Headers::RETH), i.starts_message(), "{op:#04x}");
        }
        // Lengths are whole words, so that pad alone aligns the payload.
        assert_eq!(i.header_len() % 4, 0);
        assert_eq!(i.header_len(), Bth::LEN + i.headers.len());
    }
}

#[test]
fn receive_side_effects() {
    // As rxe's RWR and COMP masks: which packets take a receive WQE and
    // which complete one.
    for (op, takes, completes) in [
        (code::RC_SEND_FIRST, true, false),
        (code::RC_SEND_MIDDLE, false, false),
        (code::RC_SEND_LAST, false, true),
        (code::RC_SEND_ONLY, true, true),
        (code::RC_SEND_ONLY_WITH_INVALIDATE, true, true),
        (code::RC_RDMA_WRITE_FIRST, false, false),
        (code::RC_RDMA_WRITE_ONLY, false, false),
        (code::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, true, true),
        (code::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE, true, true),
        (code::RC_RDMA_READ_REQUEST, false, false),
        (code::RC_ACKNOWLEDGE, false, false),
    ] {
        let i = info(op);
        assert_eq!(i.consumes_recv_wqe(), takes, "{op:#04x}");
        assert_eq!(i.completes_recv(), completes, "{op:#04x}");
    }
}
