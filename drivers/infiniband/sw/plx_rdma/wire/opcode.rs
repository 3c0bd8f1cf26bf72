// SPDX-License-Identifier: GPL-2.0

//! The IBA opcode table: what each BTH opcode means and which extended
//! headers it carries.
//!
//! An opcode is a transport (top 3 bits: RC, UC, RD, UD) and an operation
//! (low 5 bits). The operations mean the same on every transport that
//! has them; RD adds an RDETH (and a DETH on requests), UD a DETH. So the
//! table is one list of operations and one rule per transport, rather
//! than 256 entries.

use super::bth::Bth;
use super::ext::{Aeth, AtomicAckEth, AtomicEth, Deth, ExtHeader, Feth, Ieth, ImmDt, Rdeth, Reth};

/// Opcode numbers the transport sends and receives.
pub(crate) mod code {
    pub(crate) const RC_SEND_FIRST: u8 = 0x00;
    pub(crate) const RC_SEND_MIDDLE: u8 = 0x01;
    pub(crate) const RC_SEND_LAST: u8 = 0x02;
    pub(crate) const RC_SEND_LAST_WITH_IMMEDIATE: u8 = 0x03;
    pub(crate) const RC_SEND_ONLY: u8 = 0x04;
    pub(crate) const RC_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x05;
    pub(crate) const RC_RDMA_WRITE_FIRST: u8 = 0x06;
    pub(crate) const RC_RDMA_WRITE_MIDDLE: u8 = 0x07;
    pub(crate) const RC_RDMA_WRITE_LAST: u8 = 0x08;
    pub(crate) const RC_RDMA_WRITE_LAST_WITH_IMMEDIATE: u8 = 0x09;
    pub(crate) const RC_RDMA_WRITE_ONLY: u8 = 0x0a;
    pub(crate) const RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE: u8 = 0x0b;
    pub(crate) const RC_RDMA_READ_REQUEST: u8 = 0x0c;
    pub(crate) const RC_RDMA_READ_RESPONSE_FIRST: u8 = 0x0d;
    pub(crate) const RC_RDMA_READ_RESPONSE_MIDDLE: u8 = 0x0e;
    pub(crate) const RC_RDMA_READ_RESPONSE_LAST: u8 = 0x0f;
    pub(crate) const RC_RDMA_READ_RESPONSE_ONLY: u8 = 0x10;
    pub(crate) const RC_ACKNOWLEDGE: u8 = 0x11;
    pub(crate) const RC_ATOMIC_ACKNOWLEDGE: u8 = 0x12;
    pub(crate) const RC_COMPARE_SWAP: u8 = 0x13;
    pub(crate) const RC_FETCH_ADD: u8 = 0x14;
    pub(crate) const RC_SEND_LAST_WITH_INVALIDATE: u8 = 0x16;
    pub(crate) const RC_SEND_ONLY_WITH_INVALIDATE: u8 = 0x17;
    pub(crate) const RC_FLUSH: u8 = 0x1c;
    pub(crate) const RC_ATOMIC_WRITE: u8 = 0x1d;
    pub(crate) const UC_SEND_ONLY: u8 = 0x24;
    pub(crate) const UC_RDMA_WRITE_ONLY: u8 = 0x2a;
    pub(crate) const UD_SEND_ONLY: u8 = 0x64;
    pub(crate) const UD_SEND_ONLY_WITH_IMMEDIATE: u8 = 0x65;
    /// Congestion notification packet (RoCEv2 annex): not a transport
    /// packet, ignored by this codec.
    pub(crate) const CNP: u8 = 0x81;
}

/// The transport service an opcode belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Transport {
    /// Reliable connected.
    Rc,
    /// Unreliable connected.
    Uc,
    /// Reliable datagram (no RoCE peer implements it).
    Rd,
    /// Unreliable datagram.
    Ud,
}

/// The operation an opcode is part of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Operation {
    Send,
    RdmaWrite,
    RdmaReadRequest,
    RdmaReadResponse,
    Acknowledge,
    AtomicAcknowledge,
    CompareSwap,
    FetchAdd,
    Flush,
    AtomicWrite,
}

/// Where a packet sits in its message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Position {
    First,
    Middle,
    Last,
    /// The whole message in one packet.
    Only,
}

/// A set of extended headers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Headers(u16);

impl Headers {
    pub(crate) const NONE: Self = Self(0);
    pub(crate) const RDETH: Self = Self(1 << 0);
    pub(crate) const DETH: Self = Self(1 << 1);
    pub(crate) const FETH: Self = Self(1 << 2);
    pub(crate) const RETH: Self = Self(1 << 3);
    pub(crate) const ATOMIC_ETH: Self = Self(1 << 4);
    pub(crate) const AETH: Self = Self(1 << 5);
    pub(crate) const ATOMIC_ACK_ETH: Self = Self(1 << 6);
    pub(crate) const IMM_DT: Self = Self(1 << 7);
    pub(crate) const IETH: Self = Self(1 << 8);

    /// Every extended header, in the order they follow the BTH on the
    /// wire, with its length.
    pub(crate) const ORDER: [(Self, usize); 9] = [
        (Self::RDETH, Rdeth::LEN),
        (Self::DETH, Deth::LEN),
        (Self::FETH, Feth::LEN),
        (Self::RETH, Reth::LEN),
        (Self::ATOMIC_ETH, AtomicEth::LEN),
        (Self::AETH, Aeth::LEN),
        (Self::ATOMIC_ACK_ETH, AtomicAckEth::LEN),
        (Self::IMM_DT, ImmDt::LEN),
        (Self::IETH, Ieth::LEN),
    ];

    pub(crate) const fn with(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }

    pub(crate) const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    pub(crate) const fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Bytes these headers take together.
    pub(crate) const fn len(self) -> usize {
        let mut total = 0;
        let mut i = 0;
        while i < Self::ORDER.len() {
            let (h, len) = Self::ORDER[i];
            if self.contains(h) {
                total += len;
            }
            i += 1;
        }
        total
    }

    /// Offset of header `h` from the start of the BTH, if this set has
    /// it.
    pub(crate) const fn offset(self, h: Self) -> Option<usize> {
        if h.0 == 0 || !self.contains(h) {
            return None;
        }
        let mut at = Bth::LEN;
        let mut i = 0;
        while i < Self::ORDER.len() {
            let (this, len) = Self::ORDER[i];
            if this.0 == h.0 {
                return Some(at);
            }
            if self.contains(this) {
                at += len;
            }
            i += 1;
        }
        None
    }
}

impl core::ops::BitOr for Headers {
    type Output = Self;

    fn bitor(self, rhs: Self) -> Self {
        self.with(rhs)
    }
}

/// What an opcode means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct OpInfo {
    pub(crate) opcode: u8,
    pub(crate) transport: Transport,
    pub(crate) operation: Operation,
    pub(crate) position: Position,
    /// The extended headers after the BTH.
    pub(crate) headers: Headers,
    /// Whether the packet may carry payload after its headers.
    pub(crate) payload: bool,
}

impl OpInfo {
    /// The meaning of `opcode`, or `None` for an opcode this codec does not
    /// know (reserved, CNP, manufacturer specific, or not defined for its
    /// transport).
    pub(crate) const fn lookup(opcode: u8) -> Option<Self> {
        use Operation::*;
        use Position::*;
        let transport = match opcode >> 5 {
            0 => Transport::Rc,
            1 => Transport::Uc,
            2 => Transport::Rd,
            3 => Transport::Ud,
            _ => return None,
        };
        let low = opcode & 0x1f;
        let (operation, position, headers, payload) = match low {
            0x00 => (Send, First, Headers::NONE, true),
            0x01 => (Send, Middle, Headers::NONE, true),
            0x02 => (Send, Last, Headers::NONE, true),
            0x03 => (Send, Last, Headers::IMM_DT, true),
            0x04 => (Send, Only, Headers::NONE, true),
            0x05 => (Send, Only, Headers::IMM_DT, true),
            0x06 => (RdmaWrite, First, Headers::RETH, true),
            0x07 => (RdmaWrite, Middle, Headers::NONE, true),
            0x08 => (RdmaWrite, Last, Headers::NONE, true),
            0x09 => (RdmaWrite, Last, Headers::IMM_DT, true),
            0x0a => (RdmaWrite, Only, Headers::RETH, true),
            0x0b => (RdmaWrite, Only, Headers::RETH.with(Headers::IMM_DT), true),
            0x0c => (RdmaReadRequest, Only, Headers::RETH, false),
            0x0d => (RdmaReadResponse, First, Headers::AETH, true),
            0x0e => (RdmaReadResponse, Middle, Headers::NONE, true),
            0x0f => (RdmaReadResponse, Last, Headers::AETH, true),
            0x10 => (RdmaReadResponse, Only, Headers::AETH, true),
            0x11 => (Acknowledge, Only, Headers::AETH, false),
            0x12 => (
                AtomicAcknowledge,
                Only,
                Headers::AETH.with(Headers::ATOMIC_ACK_ETH),
                false,
            ),
            0x13 => (CompareSwap, Only, Headers::ATOMIC_ETH, false),
            0x14 => (FetchAdd, Only, Headers::ATOMIC_ETH, false),
            0x16 => (Send, Last, Headers::IETH, true),
            0x17 => (Send, Only, Headers::IETH, true),
            0x1c => (Flush, Only, Headers::FETH.with(Headers::RETH), false),
            0x1d => (AtomicWrite, Only, Headers::RETH, true),
            _ => return None,
        };
        let response = matches!(
            operation,
            RdmaReadResponse | Acknowledge | AtomicAcknowledge
        );
        // Which operations each transport defines, and the datagram
        // headers it adds.
        let (defined, headers) = match transport {
            Transport::Rc => (true, headers),
            Transport::Uc => (low <= 0x0b, headers),
            Transport::Rd => (
                low <= 0x14,
                if response {
                    Headers::RDETH.with(headers)
                } else {
                    Headers::RDETH.with(Headers::DETH).with(headers)
                },
            ),
            Transport::Ud => (low == 0x04 || low == 0x05, Headers::DETH.with(headers)),
        };
        if !defined {
            return None;
        }
        Some(Self {
            opcode,
            transport,
            operation,
            position,
            headers,
            payload,
        })
    }

    /// Bytes from the start of the BTH to the payload.
    pub(crate) const fn header_len(&self) -> usize {
        Bth::LEN + self.headers.len()
    }

    pub(crate) const fn has(&self, h: Headers) -> bool {
        self.headers.contains(h)
    }

    /// Sent by the responder (READ response, ACK, atomic ACK), as opposed
    /// to a request from the requester.
    pub(crate) const fn is_response(&self) -> bool {
        matches!(
            self.operation,
            Operation::RdmaReadResponse | Operation::Acknowledge | Operation::AtomicAcknowledge
        )
    }

    pub(crate) const fn is_request(&self) -> bool {
        !self.is_response()
    }

    /// First or only packet of a message.
    pub(crate) const fn starts_message(&self) -> bool {
        matches!(self.position, Position::First | Position::Only)
    }

    /// Last or only packet of a message.
    pub(crate) const fn ends_message(&self) -> bool {
        matches!(self.position, Position::Last | Position::Only)
    }

    /// A request of a reliable transport: the responder acknowledges it
    /// (explicitly, or by a later coalesced ACK or a READ response).
    pub(crate) const fn needs_ack(&self) -> bool {
        self.is_request() && matches!(self.transport, Transport::Rc | Transport::Rd)
    }

    /// Takes a receive WQE at the responder: the first packet of a SEND,
    /// or the packet of an RDMA WRITE that brings immediate data.
    pub(crate) const fn consumes_recv_wqe(&self) -> bool {
        match self.operation {
            Operation::Send => self.starts_message(),
            Operation::RdmaWrite => self.has(Headers::IMM_DT),
            _ => false,
        }
    }

    /// Ends in a completion on the responder's receive CQ: the last packet
    /// of a SEND, or of an RDMA WRITE with immediate.
    pub(crate) const fn completes_recv(&self) -> bool {
        match self.operation {
            Operation::Send => self.ends_message(),
            Operation::RdmaWrite => self.has(Headers::IMM_DT),
            _ => false,
        }
    }
}
