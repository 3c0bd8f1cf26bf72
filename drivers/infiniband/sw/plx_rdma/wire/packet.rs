// SPDX-License-Identifier: GPL-2.0

//! Whole transport packets: BTH, extended headers, payload, pad, ICRC.
//!
//! [`Packet::parse`] turns the payload of a received UDP datagram into a
//! view whose headers are checked against its opcode; the ICRC is checked
//! apart ([`Packet::check_icrc`]) because it needs the IP and UDP headers
//! too. [`write_headers`] and [`build`] go the other way, into a buffer the
//! caller owns.

use super::bth::Bth;
use super::ext::{Aeth, AtomicAckEth, AtomicEth, Deth, ExtHeader, Feth, Ieth, ImmDt, Rdeth, Reth};
use super::icrc::{Crc32Fn, Icrc, ICRC_LEN};
use super::ip::{write_ipv4_udp, Ipv4Header};
use super::opcode::{Headers, OpInfo};
use super::WireError;

/// The extended headers of one packet; which are present depends on the
/// opcode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct ExtHeaders {
    pub(crate) rdeth: Option<Rdeth>,
    pub(crate) deth: Option<Deth>,
    pub(crate) feth: Option<Feth>,
    pub(crate) reth: Option<Reth>,
    pub(crate) atomic_eth: Option<AtomicEth>,
    pub(crate) aeth: Option<Aeth>,
    pub(crate) atomic_ack_eth: Option<AtomicAckEth>,
    pub(crate) imm_dt: Option<ImmDt>,
    pub(crate) ieth: Option<Ieth>,
}

impl ExtHeaders {
    /// Which headers are present.
    pub(crate) fn set(&self) -> Headers {
        let mut set = Headers::NONE;
        for (present, h) in [
            (self.rdeth.is_some(), Headers::RDETH),
            (self.deth.is_some(), Headers::DETH),
            (self.feth.is_some(), Headers::FETH),
            (self.reth.is_some(), Headers::RETH),
            (self.atomic_eth.is_some(), Headers::ATOMIC_ETH),
            (self.aeth.is_some(), Headers::AETH),
            (self.atomic_ack_eth.is_some(), Headers::ATOMIC_ACK_ETH),
            (self.imm_dt.is_some(), Headers::IMM_DT),
            (self.ieth.is_some(), Headers::IETH),
        ] {
            if present {
                set = set.with(h);
            }
        }
        set
    }

    /// Reads the headers `set` names from the front of `bytes` (just after
    /// the BTH), in wire order.
    fn parse(set: Headers, bytes: &[u8]) -> Result<Self, WireError> {
        let mut at = 0;
        // The order of these calls is the wire order, `Headers::ORDER`.
        Ok(Self {
            rdeth: read(set, Headers::RDETH, bytes, &mut at)?,
            deth: read(set, Headers::DETH, bytes, &mut at)?,
            feth: read(set, Headers::FETH, bytes, &mut at)?,
            reth: read(set, Headers::RETH, bytes, &mut at)?,
            atomic_eth: read(set, Headers::ATOMIC_ETH, bytes, &mut at)?,
            aeth: read(set, Headers::AETH, bytes, &mut at)?,
            atomic_ack_eth: read(set, Headers::ATOMIC_ACK_ETH, bytes, &mut at)?,
            imm_dt: read(set, Headers::IMM_DT, bytes, &mut at)?,
            ieth: read(set, Headers::IETH, bytes, &mut at)?,
        })
    }

    /// Writes the present headers into the front of `out`, in wire order;
    /// returns the bytes written.
    fn write(&self, out: &mut [u8]) -> Result<usize, WireError> {
        let mut at = 0;
        write(&self.rdeth, out, &mut at)?;
        write(&self.deth, out, &mut at)?;
        write(&self.feth, out, &mut at)?;
        write(&self.reth, out, &mut at)?;
        write(&self.atomic_eth, out, &mut at)?;
        write(&self.aeth, out, &mut at)?;
        write(&self.atomic_ack_eth, out, &mut at)?;
        write(&self.imm_dt, out, &mut at)?;
        write(&self.ieth, out, &mut at)?;
        Ok(at)
    }
}

/// Reads header `H` at `*at` if `set` has `which`, and moves `*at` past it.
fn read<H: ExtHeader>(
    set: Headers,
    which: Headers,
    bytes: &[u8],
    at: &mut usize,
) -> Result<Option<H>, WireError> {
    if !set.contains(which) {
        return Ok(None);
    }
    let h = H::parse(bytes.get(*at..).ok_or(WireError::Truncated)?)?;
    *at += H::LEN;
    Ok(Some(h))
}

/// Writes `h` at `*at` if present, and moves `*at` past it.
fn write<H: ExtHeader>(h: &Option<H>, out: &mut [u8], at: &mut usize) -> Result<(), WireError> {
    if let Some(h) = h {
        h.write(out.get_mut(*at..).ok_or(WireError::NoRoom)?)?;
        *at += H::LEN;
    }
    Ok(())
}

/// Pad bytes after a payload of `len` bytes, to a multiple of 4.
pub(crate) const fn pad_len(len: usize) -> usize {
    len.wrapping_neg() & 3
}

/// Bytes of a transport packet (BTH to ICRC) of opcode `info` with
/// `payload` bytes of payload.
pub(crate) fn packet_len(info: &OpInfo, payload: usize) -> Option<usize> {
    info.header_len()
        .checked_add(payload)?
        .checked_add(pad_len(payload))?
        .checked_add(ICRC_LEN)
}

/// A received transport packet whose layout has been checked against its
/// opcode. The ICRC has not been checked yet: see [`Packet::check_icrc`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Packet<'a> {
    pub(crate) bth: Bth,
    pub(crate) info: OpInfo,
    pub(crate) ext: ExtHeaders,
    payload: &'a [u8],
    /// BTH to the end of the pad: what the ICRC covers after the IP and
    /// UDP headers.
    covered: &'a [u8],
    icrc: u32,
}

impl<'a> Packet<'a> {
    /// Parses `bytes`, the payload of a UDP datagram to port 4791.
    ///
    /// Refuses, as `rdma_rxe` does, an unknown opcode, a transport version
    /// other than 0, destination QP 0, and a packet shorter than its
    /// headers, pad and ICRC; and also, stricter than `rdma_rxe`, a
    /// length that is not a multiple of 4 and payload or pad on an opcode
    /// that carries none.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, WireError> {
        let bth = Bth::parse(bytes)?;
        let info = OpInfo::lookup(bth.opcode).ok_or(WireError::UnknownOpcode(bth.opcode))?;
        if bth.tver != 0 {
            return Err(WireError::BadTransportVersion(bth.tver));
        }
        if bth.dest_qp == 0 {
            return Err(WireError::BadQpn);
        }
        let header_len = info.header_len();
        let pad = usize::from(bth.pad);
        // Cannot overflow: all three are small.
        let fixed = header_len + pad + ICRC_LEN;
        let payload_len = bytes.len().checked_sub(fixed).ok_or(WireError::TooShort)?;
        if bytes.len() % 4 != 0 {
            return Err(WireError::Unaligned);
        }
        if !info.payload && (payload_len != 0 || pad != 0) {
            return Err(WireError::UnexpectedPayload);
        }
        let after_bth = bytes.get(Bth::LEN..).ok_or(WireError::Truncated)?;
        let ext = ExtHeaders::parse(info.headers, after_bth)?;
        let covered_len = bytes.len() - ICRC_LEN;
        let icrc = bytes.last_chunk::<ICRC_LEN>().ok_or(WireError::Truncated)?;
        Ok(Self {
            bth,
            info,
            ext,
            payload: bytes
                .get(header_len..header_len + payload_len)
                .ok_or(WireError::Truncated)?,
            covered: bytes.get(..covered_len).ok_or(WireError::Truncated)?,
            icrc: Icrc::from_wire(*icrc),
        })
    }

    /// The payload, without pad.
    pub(crate) fn payload(&self) -> &'a [u8] {
        self.payload
    }

    /// The ICRC the packet carries.
    pub(crate) fn icrc(&self) -> u32 {
        self.icrc
    }

    /// The bytes from the BTH to the end of the pad.
    pub(crate) fn covered(&self) -> &'a [u8] {
        self.covered
    }

    /// Checks the packet's ICRC; `ip_udp` are the IP and UDP headers it
    /// came in (see [`Icrc::roce`]).
    pub(crate) fn check_icrc(&self, crc32: Crc32Fn, ip_udp: &[u8]) -> Result<(), WireError> {
        if Icrc::compute(crc32, ip_udp, self.covered)? == self.icrc {
            Ok(())
        } else {
            Err(WireError::BadIcrc)
        }
    }
}

/// Writes the BTH and extended headers of a packet with `payload_len`
/// bytes of payload into the front of `out`; returns the bytes written.
///
/// The pad count of `bth` is set from `payload_len`. Fails with
/// [`WireError::HeaderMismatch`] if `ext` is not exactly the set of
/// headers the opcode carries, and with [`WireError::UnexpectedPayload`]
/// if the opcode carries no payload and `payload_len` is not 0.
pub(crate) fn write_headers(
    out: &mut [u8],
    bth: &Bth,
    ext: &ExtHeaders,
    payload_len: usize,
) -> Result<usize, WireError> {
    let info = OpInfo::lookup(bth.opcode).ok_or(WireError::UnknownOpcode(bth.opcode))?;
    if ext.set() != info.headers {
        return Err(WireError::HeaderMismatch);
    }
    if !info.payload && payload_len != 0 {
        return Err(WireError::UnexpectedPayload);
    }
    let bth = Bth {
        // At most 3: fits the 2-bit field.
        pad: pad_len(payload_len) as u8,
        ..*bth
    };
    let out = out.get_mut(..info.header_len()).ok_or(WireError::NoRoom)?;
    bth.write(out)?;
    let ext_len = ext.write(out.get_mut(Bth::LEN..).ok_or(WireError::NoRoom)?)?;
    Ok(Bth::LEN + ext_len)
}

/// Builds a whole transport packet into the front of `out`: headers,
/// `payload`, zero pad and the ICRC, computed with `ip_udp` as the IP and
/// UDP headers it will be sent in. Returns the bytes written.
pub(crate) fn build(
    out: &mut [u8],
    ip_udp: &[u8],
    bth: &Bth,
    ext: &ExtHeaders,
    payload: &[u8],
    crc32: Crc32Fn,
) -> Result<usize, WireError> {
    let hdr = write_headers(out, bth, ext, payload.len())?;
    let pad = pad_len(payload.len());
    let covered_len = hdr
        .checked_add(payload.len())
        .and_then(|n| n.checked_add(pad))
        .ok_or(WireError::TooLong)?;
    let total = covered_len
        .checked_add(ICRC_LEN)
        .ok_or(WireError::TooLong)?;
    let out = out.get_mut(..total).ok_or(WireError::NoRoom)?;
    let (covered, icrc_field) = out.split_at_mut(covered_len);
    let (_, body) = covered.split_at_mut(hdr);
    let (data, pad_bytes) = body.split_at_mut(payload.len());
    data.copy_from_slice(payload);
    pad_bytes.fill(0);
    let icrc = Icrc::compute(crc32, ip_udp, covered)?;
    icrc_field.copy_from_slice(&Icrc::to_wire(icrc));
    Ok(total)
}

/// Builds a whole IPv4 datagram into the front of `out`: IPv4 and UDP
/// headers as [`write_ipv4_udp`] writes them, then the packet as [`build`]
/// does. Returns the bytes written.
pub(crate) fn build_ipv4(
    out: &mut [u8],
    ip: &Ipv4Header,
    src_port: u16,
    bth: &Bth,
    ext: &ExtHeaders,
    payload: &[u8],
    crc32: Crc32Fn,
) -> Result<usize, WireError> {
    let info = OpInfo::lookup(bth.opcode).ok_or(WireError::UnknownOpcode(bth.opcode))?;
    let transport_len = packet_len(&info, payload.len()).ok_or(WireError::TooLong)?;
    let hdrs = write_ipv4_udp(out, ip, src_port, transport_len)?;
    let (ip_udp, rest) = out.split_at_mut(hdrs);
    let n = build(rest, ip_udp, bth, ext, payload, crc32)?;
    Ok(hdrs + n)
}
