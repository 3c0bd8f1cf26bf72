// SPDX-License-Identifier: GPL-2.0

//! Why a packet could not be parsed or built.

use core::fmt;

/// A malformed packet, or a buffer that cannot hold what is asked.
///
/// Each variant is one reason, so that the transport can count drops by
/// reason.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WireError {
    /// The bytes end before the header or field being read.
    Truncated,
    /// The output buffer is too small for what is written into it.
    NoRoom,
    /// The BTH opcode is not one this codec knows (reserved, CNP,
    /// manufacturer specific).
    UnknownOpcode(u8),
    /// The BTH transport header version is not 0.
    BadTransportVersion(u8),
    /// The destination QP is 0, which does not exist on RoCE.
    BadQpn,
    /// Fewer bytes than headers, pad and ICRC need.
    TooShort,
    /// A packet length that is not a multiple of 4 (headers are, and pad
    /// makes the payload one).
    Unaligned,
    /// An opcode that carries no payload has payload or pad bytes.
    UnexpectedPayload,
    /// The header set given to the builder does not match the opcode:
    /// one it carries is missing or one it does not carry is present.
    HeaderMismatch,
    /// A payload too long for the length fields that describe it.
    TooLong,
    /// The ICRC in the packet is not the one computed over it.
    BadIcrc,
    /// The IP version nibble is neither 4 nor 6.
    BadIpVersion(u8),
    /// An IPv4 header with options (IHL is not 5): RoCE peers never send
    /// them, and the ICRC of `rdma_rxe` assumes a 20-byte header.
    IpOptions,
    /// The IPv4 header checksum is wrong.
    BadIpChecksum,
    /// The IP next protocol is not UDP.
    NotUdp,
    /// The UDP destination port is not 4791.
    NotRoce,
    /// The IP or UDP length field disagrees with the bytes received.
    BadLength,
    /// A fragment of an IPv4 datagram (RoCE sets DF and never fragments).
    Fragment,
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Truncated => f.write_str("truncated header"),
            Self::NoRoom => f.write_str("output buffer too small"),
            Self::UnknownOpcode(op) => write!(f, "unknown opcode {op:#04x}"),
            Self::BadTransportVersion(v) => write!(f, "transport version {v}"),
            Self::BadQpn => f.write_str("destination QP 0"),
            Self::TooShort => f.write_str("shorter than headers, pad and ICRC"),
            Self::Unaligned => f.write_str("length not a multiple of 4"),
            Self::UnexpectedPayload => f.write_str("payload on an opcode without one"),
            Self::HeaderMismatch => f.write_str("headers do not match the opcode"),
            Self::TooLong => f.write_str("payload too long"),
            Self::BadIcrc => f.write_str("bad ICRC"),
            Self::BadIpVersion(v) => write!(f, "IP version {v}"),
            Self::IpOptions => f.write_str("IPv4 options"),
            Self::BadIpChecksum => f.write_str("bad IPv4 header checksum"),
            Self::NotUdp => f.write_str("not UDP"),
            Self::NotRoce => f.write_str("not UDP port 4791"),
            Self::BadLength => f.write_str("IP or UDP length mismatch"),
            Self::Fragment => f.write_str("IPv4 fragment"),
        }
    }
}
