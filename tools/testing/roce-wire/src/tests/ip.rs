// SPDX-License-Identifier: GPL-2.0

//! IPv4/IPv6/UDP headers and taking a received datagram apart.

use super::icrc::{ROCE_V4, ROCE_V6};
use crate::wire::ip::{
    internet_checksum, write_ipv4_udp, write_ipv6_udp, Datagram, IpHeader, Ipv4Header, Ipv6Header,
    UdpHeader, PROTO_UDP, ROCE_PORT,
};
use crate::wire::WireError;

fn v4_template() -> Ipv4Header {
    Ipv4Header {
        tos: 0x02,
        id: 0x1234,
        ttl: 64,
        src: [192, 168, 122, 10],
        dst: [192, 168, 122, 11],
        ..Ipv4Header::default()
    }
}

#[test]
fn checksum_rfc1071_example() {
    // RFC 1071 section 3's words sum to 0xddf2 (ones' complement).
    assert_eq!(
        internet_checksum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
        !0xddf2
    );
    // An odd length is padded with a zero byte.
    assert_eq!(internet_checksum(&[0x01]), !0x0100);
    assert_eq!(internet_checksum(&[]), 0xffff);
}

#[test]
fn writes_the_vector_headers() {
    let mut out = [0u8; 28];
    assert_eq!(write_ipv4_udp(&mut out, &v4_template(), 0xc0de, 40), Ok(28));
    assert_eq!(out, ROCE_V4[..28]);
    let v6 = Ipv6Header {
        traffic_class: 0x12,
        flow_label: 0xabcde,
        hop_limit: 64,
        src: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
        dst: [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
        ..Ipv6Header::default()
    };
    let mut out = [0u8; 48];
    assert_eq!(write_ipv6_udp(&mut out, &v6, 0xc0de, 40), Ok(48));
    assert_eq!(out, ROCE_V6[..48]);
}

#[test]
fn header_round_trips() {
    let mut out = [0u8; 40];
    let h = Ipv4Header {
        total_len: 100,
        protocol: PROTO_UDP,
        dont_fragment: true,
        ..v4_template()
    };
    h.write(&mut out).unwrap();
    let back = Ipv4Header::parse(&out).unwrap();
    assert_eq!(
        Ipv4Header {
            checksum: 0,
            ..back
        },
        h
    );
    assert_eq!(internet_checksum(&out[..20]), 0);
    let u = UdpHeader {
        src_port: 1,
        dst_port: ROCE_PORT,
        len: 8,
        checksum: 0xabcd,
    };
    u.write(&mut out).unwrap();
    assert_eq!(UdpHeader::parse(&out).unwrap(), u);
    let v6 = Ipv6Header {
        traffic_class: 0xff,
        flow_label: 0xfffff,
        payload_len: 9,
        next_header: PROTO_UDP,
        hop_limit: 1,
        src: [7; 16],
        dst: [9; 16],
    };
    v6.write(&mut out).unwrap();
    assert_eq!(Ipv6Header::parse(&out).unwrap(), v6);
    assert_eq!(v6.write(&mut out[..39]), Err(WireError::NoRoom));
}

#[test]
fn datagram_v4_and_v6() {
    let d = Datagram::parse(&ROCE_V4).unwrap();
    assert!(matches!(d.ip, IpHeader::V4(h) if h.ttl == 64 && h.dont_fragment));
    assert_eq!(d.udp.src_port, 0xc0de);
    assert_eq!(d.ip_udp, &ROCE_V4[..28]);
    assert_eq!(d.payload, &ROCE_V4[28..]);
    let d = Datagram::parse(&ROCE_V6).unwrap();
    assert!(matches!(d.ip, IpHeader::V6(h) if h.flow_label == 0xabcde));
    assert_eq!(d.payload, &ROCE_V6[48..]);
    // Ethernet padding after the IP length is ignored.
    let mut padded = [0u8; 80];
    padded[..68].copy_from_slice(&ROCE_V4);
    assert_eq!(Datagram::parse(&padded).unwrap().payload, &ROCE_V4[28..]);
}

fn refused(bytes: &[u8]) -> WireError {
    Datagram::parse(bytes).unwrap_err()
}

/// `ROCE_V4` with byte `i` set to `v` and the IP checksum fixed.
fn v4_with(i: usize, v: u8) -> [u8; 68] {
    let mut p = ROCE_V4;
    p[i] = v;
    p[10] = 0;
    p[11] = 0;
    let sum = internet_checksum(&p[..20]).to_be_bytes();
    p[10..12].copy_from_slice(&sum);
    p
}

#[test]
fn datagram_refusals() {
    assert_eq!(refused(&[]), WireError::Truncated);
    assert_eq!(refused(&ROCE_V4[..19]), WireError::Truncated);
    assert_eq!(refused(&ROCE_V4[..67]), WireError::BadLength);
    let mut bad_sum = ROCE_V4;
    bad_sum[11] ^= 1;
    assert_eq!(refused(&bad_sum), WireError::BadIpChecksum);
    assert_eq!(refused(&v4_with(0, 0x46)), WireError::IpOptions);
    assert_eq!(refused(&v4_with(0, 0x35)), WireError::BadIpVersion(3));
    assert_eq!(refused(&v4_with(9, 6)), WireError::NotUdp);
    assert_eq!(refused(&v4_with(6, 0x20)), WireError::Fragment);
    assert_eq!(refused(&v4_with(7, 0x01)), WireError::Fragment);
    assert_eq!(refused(&v4_with(23, 0xb8)), WireError::NotRoce);
    assert_eq!(refused(&v4_with(25, 0x2f)), WireError::BadLength);
    assert_eq!(refused(&v4_with(3, 0x45)), WireError::BadLength);
    // A total length shorter than its own headers.
    assert_eq!(refused(&v4_with(3, 0x14)), WireError::Truncated);
    let mut v6 = ROCE_V6;
    v6[6] = 0; // hop-by-hop options header
    assert_eq!(refused(&v6), WireError::NotUdp);
    assert_eq!(refused(&ROCE_V6[..47]), WireError::BadLength);
}

#[test]
fn length_limits() {
    let mut out = [0u8; 28];
    assert_eq!(
        write_ipv4_udp(&mut out, &v4_template(), 1, 65535 - 28),
        Ok(28)
    );
    assert_eq!(
        write_ipv4_udp(&mut out, &v4_template(), 1, 65535 - 27),
        Err(WireError::TooLong)
    );
    assert_eq!(
        write_ipv4_udp(&mut out, &v4_template(), 1, usize::MAX),
        Err(WireError::TooLong)
    );
    assert_eq!(
        write_ipv4_udp(&mut out[..27], &v4_template(), 1, 0),
        Err(WireError::NoRoom)
    );
}
