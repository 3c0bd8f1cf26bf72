// SPDX-License-Identifier: GPL-2.0

//! The extended transport headers that follow the BTH.
//!
//! Which of them a packet carries, and in which order, is a function of
//! its opcode (see [`super::opcode`]). All fields are big-endian.

use super::bytes::{Reader, Writer};
use super::WireError;

/// A fixed-length extended header.
pub(crate) trait ExtHeader: Sized {
    /// Bytes on the wire.
    const LEN: usize;

    /// Reads the header from the front of `bytes`.
    fn parse(bytes: &[u8]) -> Result<Self, WireError>;

    /// Writes the header into the front of `out`.
    fn write(&self, out: &mut [u8]) -> Result<(), WireError>;
}

/// RDMA Extended Transport Header: the remote buffer of an RDMA WRITE
/// (first or only packet), READ request, FLUSH or ATOMIC WRITE.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reth {
    pub(crate) va: u64,
    pub(crate) rkey: u32,
    /// Length of the whole message (DMA length), not of this packet.
    pub(crate) len: u32,
}

impl ExtHeader for Reth {
    const LEN: usize = 16;

    fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        Ok(Self {
            va: r.u64()?,
            rkey: r.u32()?,
            len: r.u32()?,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        let mut w = Writer::new(out);
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u32(self.len)
    }
}

/// Reason codes of a NAK (AETH syndrome `011` followed by these 5 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NakCode {
    /// PSN sequence error: the requester must resend from the AETH's PSN.
    PsnSequenceError,
    /// Invalid request (bad opcode sequence, length, unsupported op).
    InvalidRequest,
    /// Remote access error (bad rkey, bounds, rights).
    RemoteAccessError,
    /// Remote operational error (the responder could not complete).
    RemoteOperationalError,
    /// Invalid RD request (reliable datagram, unused by RoCE peers).
    InvalidRdRequest,
    /// A code the IBA reserves.
    Reserved(u8),
}

impl NakCode {
    const fn from_bits(bits: u8) -> Self {
        match bits & 0x1f {
            0 => Self::PsnSequenceError,
            1 => Self::InvalidRequest,
            2 => Self::RemoteAccessError,
            3 => Self::RemoteOperationalError,
            4 => Self::InvalidRdRequest,
            other => Self::Reserved(other),
        }
    }

    const fn bits(self) -> u8 {
        match self {
            Self::PsnSequenceError => 0,
            Self::InvalidRequest => 1,
            Self::RemoteAccessError => 2,
            Self::RemoteOperationalError => 3,
            Self::InvalidRdRequest => 4,
            Self::Reserved(b) => b & 0x1f,
        }
    }
}

/// What an acknowledge says: the AETH syndrome byte, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Syndrome {
    /// Positive acknowledge with an end-to-end credit count (5 bits;
    /// `0x1f` means unlimited).
    Ack { credits: u8 },
    /// Receiver not ready: retry after the time the 5-bit timer code
    /// names in the IBA's RNR timer table.
    RnrNak { timer: u8 },
    /// Negative acknowledge.
    Nak(NakCode),
    /// A syndrome the IBA reserves (type `010`, or bit 7 set): the whole
    /// byte.
    Reserved(u8),
}

impl Syndrome {
    /// Credits field value meaning "no flow control".
    pub(crate) const UNLIMITED_CREDITS: u8 = 0x1f;

    pub(crate) const fn from_byte(b: u8) -> Self {
        let low = b & 0x1f;
        match b >> 5 {
            0 => Self::Ack { credits: low },
            1 => Self::RnrNak { timer: low },
            3 => Self::Nak(NakCode::from_bits(low)),
            // Type 010, or bit 7 (reserved, 0 on the wire) set: kept
            // whole so that it writes back unchanged.
            _ => Self::Reserved(b),
        }
    }

    pub(crate) const fn to_byte(self) -> u8 {
        match self {
            Self::Ack { credits } => credits & 0x1f,
            Self::RnrNak { timer } => 0x20 | (timer & 0x1f),
            Self::Nak(code) => 0x60 | code.bits(),
            Self::Reserved(b) => b,
        }
    }
}

/// ACK Extended Transport Header: sent by the responder in every
/// acknowledge and in the first, last and only READ response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Aeth {
    pub(crate) syndrome: Syndrome,
    /// Message sequence number: messages completed by the responder
    /// (24 bits).
    pub(crate) msn: u32,
}

impl ExtHeader for Aeth {
    const LEN: usize = 4;

    fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let v = Reader::new(bytes).u32()?;
        Ok(Self {
            syndrome: Syndrome::from_byte((v >> 24) as u8),
            msn: v & 0x00ff_ffff,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        let v = (u32::from(self.syndrome.to_byte()) << 24) | (self.msn & 0x00ff_ffff);
        Writer::new(out).u32(v)
    }
}

/// Immediate data of a SEND or RDMA WRITE with immediate: 4 opaque bytes
/// handed to the receiver's completion. The value is the big-endian field
/// read as a number; `ib_wc` and `ib_send_wr` keep it big-endian.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ImmDt(pub(crate) u32);

impl ExtHeader for ImmDt {
    const LEN: usize = 4;

    fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        Ok(Self(Reader::new(bytes).u32()?))
    }

    fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        Writer::new(out).u32(self.0)
    }
}

/// Invalidate Extended Transport Header: the rkey a SEND with invalidate
/// asks the receiver to invalidate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ieth {
    pub(crate) rkey: u32,
}

impl ExtHeader for Ieth {
    const LEN: usize = 4;

    fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        Ok(Self {
            rkey: Reader::new(bytes).u32()?,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        Writer::new(out).u32(self.rkey)
    }
}

/// Datagram Extended Transport Header, in every UD (and RD request)
/// packet: the Q_Key and the sender's QP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Deth {
    pub(crate) qkey: u32,
    /// Source QP number (24 bits).
    pub(crate) src_qp: u32,
}

impl Deth {
    /// The Q_Key of the general services QP (QP1), which carries the
    /// connection manager's MADs.
    pub(crate) const GSI_QKEY: u32 = 0x8001_0000;
}

impl ExtHeader for Deth {
    const LEN: usize = 8;

    fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        Ok(Self {
            qkey: r.u32()?,
            src_qp: r.u32()? & 0x00ff_ffff,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        let mut w = Writer::new(out);
        w.u32(self.qkey)?;
        w.u32(self.src_qp & 0x00ff_ffff)
    }
}

/// Reliable Datagram Extended Transport Header (the EE context). Only so
/// that RD opcodes have a length; RoCE peers do not use RD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Rdeth {
    pub(crate) een: u32,
}

impl ExtHeader for Rdeth {
    const LEN: usize = 4;

    fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        Ok(Self {
            een: Reader::new(bytes).u32()? & 0x00ff_ffff,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        Writer::new(out).u32(self.een & 0x00ff_ffff)
    }
}

/// Atomic Extended Transport Header of a COMPARE SWAP or FETCH ADD.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AtomicEth {
    pub(crate) va: u64,
    pub(crate) rkey: u32,
    /// The value to swap in (compare swap) or to add (fetch add).
    pub(crate) swap_add: u64,
    /// The value to compare with (compare swap only).
    pub(crate) compare: u64,
}

impl ExtHeader for AtomicEth {
    const LEN: usize = 28;

    fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        Ok(Self {
            va: r.u64()?,
            rkey: r.u32()?,
            swap_add: r.u64()?,
            compare: r.u64()?,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        let mut w = Writer::new(out);
        w.u64(self.va)?;
        w.u32(self.rkey)?;
        w.u64(self.swap_add)?;
        w.u64(self.compare)
    }
}

/// Atomic Acknowledge Extended Transport Header: the value the target
/// held before the atomic operation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AtomicAckEth {
    pub(crate) orig: u64,
}

impl ExtHeader for AtomicAckEth {
    const LEN: usize = 8;

    fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        Ok(Self {
            orig: Reader::new(bytes).u64()?,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        Writer::new(out).u64(self.orig)
    }
}

/// FLUSH Extended Transport Header: what a FLUSH makes persistent or
/// visible.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Feth {
    /// Selectivity level (2 bits): 0 the range, 1 the whole MR.
    pub(crate) selectivity: u8,
    /// Placement type (4 bits): bit 0 global visibility, bit 1
    /// persistence.
    pub(crate) placement: u8,
}

impl ExtHeader for Feth {
    const LEN: usize = 4;

    fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let v = Reader::new(bytes).u32()?;
        Ok(Self {
            selectivity: ((v >> 4) & 0x3) as u8,
            placement: (v & 0xf) as u8,
        })
    }

    fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        let v = (u32::from(self.selectivity & 0x3) << 4) | u32::from(self.placement & 0xf);
        Writer::new(out).u32(v)
    }
}
