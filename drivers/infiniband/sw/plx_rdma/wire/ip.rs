// SPDX-License-Identifier: GPL-2.0

//! The IPv4, IPv6 and UDP headers around a RoCEv2 packet.
//!
//! Like `rdma_rxe`, the transport writes these headers itself: IPv4
//! without options and with DF set, UDP to port 4791 with a zero checksum
//! (the ICRC protects the packet end to end). Receiving, [`Datagram`]
//! takes a whole IP datagram apart and checks what the ICRC does not.

use super::bytes::{Reader, Writer};
use super::WireError;

/// The UDP destination port of RoCEv2.
pub(crate) const ROCE_PORT: u16 = 4791;
/// The IP protocol number of UDP.
pub(crate) const PROTO_UDP: u8 = 17;

/// The Internet checksum (RFC 1071) of `bytes`: the ones' complement of
/// the ones' complement sum of its 16-bit big-endian words. Over a header
/// whose checksum field is right, it is 0.
pub(crate) fn internet_checksum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut rest = bytes;
    while let Some((word, tail)) = rest.split_first_chunk::<2>() {
        sum += u32::from(u16::from_be_bytes(*word));
        // Fold as we go so that the sum cannot overflow, however long
        // the input.
        sum = (sum & 0xffff) + (sum >> 16);
        rest = tail;
    }
    if let Some(&last) = rest.first() {
        sum += u32::from(last) << 8;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An IPv4 header without options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ipv4Header {
    /// DSCP and ECN.
    pub(crate) tos: u8,
    /// Length of the datagram, this header included.
    pub(crate) total_len: u16,
    pub(crate) id: u16,
    pub(crate) dont_fragment: bool,
    pub(crate) more_fragments: bool,
    /// Fragment offset in units of 8 bytes.
    pub(crate) frag_offset: u16,
    pub(crate) ttl: u8,
    pub(crate) protocol: u8,
    /// The checksum as received (parse) or computed (write).
    pub(crate) checksum: u16,
    pub(crate) src: [u8; 4],
    pub(crate) dst: [u8; 4],
}

impl Ipv4Header {
    pub(crate) const LEN: usize = 20;

    /// Reads the header at the front of `bytes` and checks its version,
    /// length and checksum.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let raw = bytes
            .first_chunk::<{ Self::LEN }>()
            .ok_or(WireError::Truncated)?;
        let mut r = Reader::new(raw);
        let vihl = r.u8()?;
        if vihl >> 4 != 4 {
            return Err(WireError::BadIpVersion(vihl >> 4));
        }
        if vihl & 0x0f != 5 {
            return Err(WireError::IpOptions);
        }
        let tos = r.u8()?;
        let total_len = r.u16()?;
        let id = r.u16()?;
        let frag = r.u16()?;
        let ttl = r.u8()?;
        let protocol = r.u8()?;
        let checksum = r.u16()?;
        let src = r.array()?;
        let dst = r.array()?;
        if internet_checksum(raw) != 0 {
            return Err(WireError::BadIpChecksum);
        }
        Ok(Self {
            tos,
            total_len,
            id,
            dont_fragment: frag & 0x4000 != 0,
            more_fragments: frag & 0x2000 != 0,
            frag_offset: frag & 0x1fff,
            ttl,
            protocol,
            checksum,
            src,
            dst,
        })
    }

    /// Writes the header into the front of `out` with its checksum
    /// computed (the `checksum` field is ignored).
    pub(crate) fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        let mut raw = [0u8; Self::LEN];
        let frag = (u16::from(self.dont_fragment) << 14)
            | (u16::from(self.more_fragments) << 13)
            | (self.frag_offset & 0x1fff);
        let mut w = Writer::new(&mut raw);
        w.u8(0x45)?;
        w.u8(self.tos)?;
        w.u16(self.total_len)?;
        w.u16(self.id)?;
        w.u16(frag)?;
        w.u8(self.ttl)?;
        w.u8(self.protocol)?;
        w.u16(0)?;
        w.put(&self.src)?;
        w.put(&self.dst)?;
        let sum = internet_checksum(&raw);
        if let Some(field) = raw.get_mut(10..12) {
            field.copy_from_slice(&sum.to_be_bytes());
        }
        Writer::new(out).put(&raw)
    }
}

/// The fixed IPv6 header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Ipv6Header {
    pub(crate) traffic_class: u8,
    /// 20 bits.
    pub(crate) flow_label: u32,
    /// Length after this header.
    pub(crate) payload_len: u16,
    pub(crate) next_header: u8,
    pub(crate) hop_limit: u8,
    pub(crate) src: [u8; 16],
    pub(crate) dst: [u8; 16],
}

impl Ipv6Header {
    pub(crate) const LEN: usize = 40;

    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let first = r.u32()?;
        if first >> 28 != 6 {
            return Err(WireError::BadIpVersion((first >> 28) as u8));
        }
        Ok(Self {
            traffic_class: ((first >> 20) & 0xff) as u8,
            flow_label: first & 0x000f_ffff,
            payload_len: r.u16()?,
            next_header: r.u8()?,
            hop_limit: r.u8()?,
            src: r.array()?,
            dst: r.array()?,
        })
    }

    pub(crate) fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        let first =
            (6 << 28) | (u32::from(self.traffic_class) << 20) | (self.flow_label & 0x000f_ffff);
        let mut w = Writer::new(out.get_mut(..Self::LEN).ok_or(WireError::NoRoom)?);
        w.u32(first)?;
        w.u16(self.payload_len)?;
        w.u8(self.next_header)?;
        w.u8(self.hop_limit)?;
        w.put(&self.src)?;
        w.put(&self.dst)
    }
}

/// A UDP header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct UdpHeader {
    pub(crate) src_port: u16,
    pub(crate) dst_port: u16,
    /// Length of header and payload.
    pub(crate) len: u16,
    /// 0: none. RoCE senders leave it 0.
    pub(crate) checksum: u16,
}

impl UdpHeader {
    pub(crate) const LEN: usize = 8;

    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        Ok(Self {
            src_port: r.u16()?,
            dst_port: r.u16()?,
            len: r.u16()?,
            checksum: r.u16()?,
        })
    }

    pub(crate) fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        let mut w = Writer::new(out);
        w.u16(self.src_port)?;
        w.u16(self.dst_port)?;
        w.u16(self.len)?;
        w.u16(self.checksum)
    }
}

/// The IP header of a datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IpHeader {
    V4(Ipv4Header),
    V6(Ipv6Header),
}

/// A received IP datagram carrying a RoCEv2 packet, taken apart.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Datagram<'a> {
    pub(crate) ip: IpHeader,
    pub(crate) udp: UdpHeader,
    /// The IP and UDP headers as received, which the ICRC covers.
    pub(crate) ip_udp: &'a [u8],
    /// The UDP payload: the transport packet, ICRC included.
    pub(crate) payload: &'a [u8],
}

impl<'a> Datagram<'a> {
    /// Takes apart the IP datagram `bytes` (from the IP header on; bytes
    /// past the IP length, such as Ethernet padding, are ignored).
    ///
    /// Checks the IP version, options, checksum and fragmentation, that
    /// the protocol is UDP to port 4791, and that the IP and UDP lengths
    /// agree with each other and with the bytes there are. IPv6 extension
    /// headers are refused as "not UDP", as RoCE peers send none.
    pub(crate) fn parse(bytes: &'a [u8]) -> Result<Self, WireError> {
        let version = bytes.first().ok_or(WireError::Truncated)? >> 4;
        let (ip, ip_len, datagram_len, protocol) = match version {
            4 => {
                let h = Ipv4Header::parse(bytes)?;
                if h.more_fragments || h.frag_offset != 0 {
                    return Err(WireError::Fragment);
                }
                let total = usize::from(h.total_len);
                (IpHeader::V4(h), Ipv4Header::LEN, total, h.protocol)
            }
            6 => {
                let h = Ipv6Header::parse(bytes)?;
                let total = Ipv6Header::LEN + usize::from(h.payload_len);
                (IpHeader::V6(h), Ipv6Header::LEN, total, h.next_header)
            }
            v => return Err(WireError::BadIpVersion(v)),
        };
        if protocol != PROTO_UDP {
            return Err(WireError::NotUdp);
        }
        let datagram = bytes.get(..datagram_len).ok_or(WireError::BadLength)?;
        let after_ip = datagram.get(ip_len..).ok_or(WireError::BadLength)?;
        let udp = UdpHeader::parse(after_ip)?;
        if udp.dst_port != ROCE_PORT {
            return Err(WireError::NotRoce);
        }
        if usize::from(udp.len) != after_ip.len() {
            return Err(WireError::BadLength);
        }
        let headers = ip_len + UdpHeader::LEN;
        Ok(Self {
            ip,
            udp,
            ip_udp: datagram.get(..headers).ok_or(WireError::Truncated)?,
            payload: datagram.get(headers..).ok_or(WireError::Truncated)?,
        })
    }
}

/// Writes IPv4 and UDP headers for a RoCEv2 packet of `transport_len`
/// bytes (BTH to ICRC) into the front of `out`, as `rdma_rxe` does: DF
/// set, UDP checksum 0. Returns the bytes written.
pub(crate) fn write_ipv4_udp(
    out: &mut [u8],
    ip: &Ipv4Header,
    src_port: u16,
    transport_len: usize,
) -> Result<usize, WireError> {
    let headers = Ipv4Header::LEN + UdpHeader::LEN;
    let total = len16(headers, transport_len)?;
    let udp_len = len16(UdpHeader::LEN, transport_len)?;
    let ip = Ipv4Header {
        total_len: total,
        dont_fragment: true,
        more_fragments: false,
        frag_offset: 0,
        protocol: PROTO_UDP,
        ..*ip
    };
    let out = out.get_mut(..headers).ok_or(WireError::NoRoom)?;
    ip.write(out)?;
    UdpHeader {
        src_port,
        dst_port: ROCE_PORT,
        len: udp_len,
        checksum: 0,
    }
    .write(out.get_mut(Ipv4Header::LEN..).ok_or(WireError::NoRoom)?)?;
    Ok(headers)
}

/// Writes IPv6 and UDP headers for a RoCEv2 packet of `transport_len`
/// bytes into the front of `out` (UDP checksum 0, as `rdma_rxe` sends).
/// Returns the bytes written.
pub(crate) fn write_ipv6_udp(
    out: &mut [u8],
    ip: &Ipv6Header,
    src_port: u16,
    transport_len: usize,
) -> Result<usize, WireError> {
    let headers = Ipv6Header::LEN + UdpHeader::LEN;
    let udp_len = len16(UdpHeader::LEN, transport_len)?;
    let ip = Ipv6Header {
        payload_len: udp_len,
        next_header: PROTO_UDP,
        ..*ip
    };
    let out = out.get_mut(..headers).ok_or(WireError::NoRoom)?;
    ip.write(out)?;
    UdpHeader {
        src_port,
        dst_port: ROCE_PORT,
        len: udp_len,
        checksum: 0,
    }
    .write(out.get_mut(Ipv6Header::LEN..).ok_or(WireError::NoRoom)?)?;
    Ok(headers)
}

/// `a + b` as a 16-bit length field, or [`WireError::TooLong`].
fn len16(a: usize, b: usize) -> Result<u16, WireError> {
    a.checked_add(b)
        .and_then(|n| u16::try_from(n).ok())
        .ok_or(WireError::TooLong)
}
