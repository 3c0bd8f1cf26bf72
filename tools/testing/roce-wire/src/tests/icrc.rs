// SPDX-License-Identifier: GPL-2.0

//! The CRC-32 and the ICRC: the IBA sample packet, two RoCEv2 packets
//! computed independently with Python's zlib, and the masking rules.

use crate::wire::bth::Bth;
use crate::wire::icrc::{crc32_le, Icrc};
use crate::wire::WireError;

/// The IBA's sample packet, whose ICRC the spec gives as `0x9625B75A`
/// (bytes 52-55 on the wire: `96 25 b7 5a`), with its variant fields
/// already masked: LRH with VL `0xf`, BTH with resv8a `0xff`, then a RETH,
/// 14 bytes of payload and 2 of pad. The bytes are those Eric Biggers
/// quoted on linux-rdma on 2025-01-29 ("Re: [PATCH 1/6] RDMA/rxe: handle
/// ICRC correctly on big endian systems"), where `~crc32_le(~0, ...)`
/// gives `0x5ab72596`; Python's `zlib.crc32` agrees (`vectors.py`).
const IBA_SAMPLE: [u8; 52] = [
    0xf0, 0x12, 0x37, 0x5c, 0x00, 0x0e, 0x17, 0xd2, // LRH (VL masked)
    0x0a, 0x20, 0x24, 0x87, 0xff, 0x87, 0xb1, 0xb3, // BTH: WRITE ONLY, pad 2
    0x00, 0x0d, 0xec, 0x2a, //
    0x01, 0x71, 0x0a, 0x1c, 0x01, 0x5d, 0x40, 0x02, // RETH
    0x38, 0xf2, 0x7a, 0x05, 0x00, 0x00, 0x00, 0x0e, //
    0xbb, 0x88, 0x4d, 0x85, 0xfd, 0x5c, 0xfb, 0xa4, // payload
    0x72, 0x8b, 0xc0, 0x69, 0x0e, 0xd4, //
    0x00, 0x00, // pad
];
const IBA_SAMPLE_ICRC: u32 = 0x5ab7_2596;

/// A RoCEv2 RDMA WRITE ONLY over IPv4 (192.168.122.10 to .11, TOS 2, TTL
/// 64, DF, UDP 0xc0de to 4791, QP 0x11, PSN 0x123456 with AckReq, RETH
/// va 0x1000 rkey 0x2345 len 5, payload "hello", pad 3), IP checksum and
/// ICRC `0xe6ca24f9` computed by `tools/testing/roce-wire/vectors.py`
/// with Python's struct and zlib alone.
pub(super) const ROCE_V4: [u8; 68] = [
    0x45, 0x02, 0x00, 0x44, 0x12, 0x34, 0x40, 0x00, 0x40, 0x11, 0xb3, 0x0c, //
    0xc0, 0xa8, 0x7a, 0x0a, 0xc0, 0xa8, 0x7a, 0x0b, 0xc0, 0xde, 0x12, 0xb7, //
    0x00, 0x30, 0x00, 0x00, 0x0a, 0x30, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, //
    0x80, 0x12, 0x34, 0x56, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, //
    0x00, 0x00, 0x23, 0x45, 0x00, 0x00, 0x00, 0x05, 0x68, 0x65, 0x6c, 0x6c, //
    0x6f, 0x00, 0x00, 0x00, 0xf9, 0x24, 0xca, 0xe6, //
];
pub(super) const ROCE_V4_ICRC: u32 = 0xe6ca_24f9;

/// The same packet over IPv6 (fe80::1 to fe80::2, traffic class 0x12,
/// flow label 0xabcde, hop limit 64), ICRC `0x52e7c341` from
/// `vectors.py`.
pub(super) const ROCE_V6: [u8; 88] = [
    0x61, 0x2a, 0xbc, 0xde, 0x00, 0x30, 0x11, 0x40, 0xfe, 0x80, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, //
    0xfe, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, //
    0x00, 0x00, 0x00, 0x02, 0xc0, 0xde, 0x12, 0xb7, 0x00, 0x30, 0x00, 0x00, //
    0x0a, 0x30, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x12, 0x34, 0x56, //
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x00, 0x00, 0x23, 0x45, //
    0x00, 0x00, 0x00, 0x05, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x00, 0x00, 0x00, //
    0x41, 0xc3, 0xe7, 0x52, //
];
pub(super) const ROCE_V6_ICRC: u32 = 0x52e7_c341;

/// The textbook bit-at-a-time CRC, to check the table-driven one against.
fn crc32_bitwise(mut crc: u32, data: &[u8]) -> u32 {
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    crc
}

fn zlib_crc32(data: &[u8]) -> u32 {
    !crc32_le(!0, data)
}

#[test]
fn crc32_check_value() {
    // The catalogue check value of CRC-32 (zlib, Ethernet).
    assert_eq!(zlib_crc32(b"123456789"), 0xcbf4_3926);
    assert_eq!(zlib_crc32(b""), 0);
}

#[test]
fn slice_by_8_matches_bitwise_at_every_length_and_split() {
    let data: std::vec::Vec<u8> = (0..300u32).map(|i| (i * 7 + i / 3) as u8).collect();
    for len in 0..data.len() {
        let d = &data[..len];
        assert_eq!(crc32_le(!0, d), crc32_bitwise(!0, d), "len {len}");
        // Feeding in two pieces gives the same as one.
        let cut = len / 3;
        let split = crc32_le(crc32_le(!0, &d[..cut]), &d[cut..]);
        assert_eq!(split, crc32_le(!0, d), "len {len} cut {cut}");
    }
}

#[test]
fn roce_seed_is_eight_bytes_of_ones() {
    // rxe_icrc.c starts from this constant instead of hashing the ones.
    assert_eq!(crc32_le(!0, &[0xff; 8]), Icrc::ROCE_SEED);
}

#[test]
fn iba_sample_packet() {
    assert_eq!(zlib_crc32(&IBA_SAMPLE), IBA_SAMPLE_ICRC);
    // Table 29 shows the ICRC's bytes on the wire as 96 25 b7 5a.
    assert_eq!(Icrc::to_wire(IBA_SAMPLE_ICRC), [0x96, 0x25, 0xb7, 0x5a]);
    // Through the codec's steps: the LRH as it is, the BTH with its byte 4
    // masked (whatever FECN/BECN were), then the rest.
    for byte4 in [0x00, 0x40, 0x80, 0xff] {
        let mut bth = [0u8; Bth::LEN];
        bth.copy_from_slice(&IBA_SAMPLE[8..20]);
        bth[4] = byte4;
        let mut icrc = Icrc::new(crc32_le);
        icrc.update(&IBA_SAMPLE[..8]);
        icrc.update_bth(&bth).unwrap();
        icrc.update(&IBA_SAMPLE[20..]);
        assert_eq!(icrc.finish(), IBA_SAMPLE_ICRC);
    }
}

#[test]
fn roce_v4_vector() {
    let (ip_udp, rest) = ROCE_V4.split_at(28);
    let (covered, field) = rest.split_at(rest.len() - 4);
    assert_eq!(Icrc::from_wire(field.try_into().unwrap()), ROCE_V4_ICRC);
    assert_eq!(Icrc::compute(crc32_le, ip_udp, covered), Ok(ROCE_V4_ICRC));
    // The same with the kernel-style bitwise CRC swapped in.
    assert_eq!(
        Icrc::compute(crc32_bitwise, ip_udp, covered),
        Ok(ROCE_V4_ICRC)
    );
    // In pieces, as over an skb's fragments.
    let mut icrc = Icrc::roce(crc32_le, ip_udp).unwrap();
    icrc.update_bth(covered).unwrap();
    for piece in covered[Bth::LEN..].chunks(3) {
        icrc.update(piece);
    }
    assert_eq!(icrc.finish(), ROCE_V4_ICRC);
}

#[test]
fn roce_v6_vector() {
    let (ip_udp, rest) = ROCE_V6.split_at(48);
    let covered = &rest[..rest.len() - 4];
    assert_eq!(Icrc::compute(crc32_le, ip_udp, covered), Ok(ROCE_V6_ICRC));
}

/// Flips every bit of `packet` at `index` and says whether the ICRC
/// changed.
fn icrc_sees(packet: &[u8], ip_len: usize, index: usize) -> bool {
    let mut p = std::vec::Vec::from(packet);
    let covered_end = p.len() - 4;
    let before = Icrc::compute(crc32_le, &p[..ip_len + 8], &p[ip_len + 8..covered_end]);
    p[index] ^= 0xff;
    let after = Icrc::compute(crc32_le, &p[..ip_len + 8], &p[ip_len + 8..covered_end]);
    before != after
}

#[test]
fn masked_fields_do_not_count() {
    // IPv4: TOS, TTL, header checksum, UDP checksum, BTH byte 4.
    let v4_masked = [1, 8, 10, 11, 26, 27, 28 + 4];
    for i in 0..ROCE_V4.len() - 4 {
        assert_eq!(
            icrc_sees(&ROCE_V4, 20, i),
            !v4_masked.contains(&i),
            "IPv4 byte {i}"
        );
    }
    // IPv6: traffic class and flow label (bytes 0-3 but the version),
    // hop limit, UDP checksum, BTH byte 4.
    let v6_masked = [1, 2, 3, 7, 46, 47, 48 + 4];
    for i in 1..ROCE_V6.len() - 4 {
        assert_eq!(
            icrc_sees(&ROCE_V6, 40, i),
            !v6_masked.contains(&i),
            "IPv6 byte {i}"
        );
    }
    // Byte 0 of IPv6: the low nibble is traffic class, the high the
    // version (flipping that makes it not IPv6 at all).
    let mut p = ROCE_V6;
    p[0] ^= 0x0f;
    assert_eq!(
        Icrc::compute(crc32_le, &p[..48], &p[48..84]),
        Ok(ROCE_V6_ICRC)
    );
}

#[test]
fn refuses_what_it_cannot_hash() {
    let body = &ROCE_V4[28..64];
    assert_eq!(
        Icrc::compute(crc32_le, &ROCE_V4[..27], body),
        Err(WireError::Truncated)
    );
    assert_eq!(
        Icrc::compute(crc32_le, &[], body),
        Err(WireError::Truncated)
    );
    let mut options = ROCE_V4;
    options[0] = 0x46;
    assert_eq!(
        Icrc::compute(crc32_le, &options[..28], body),
        Err(WireError::IpOptions)
    );
    let mut v5 = ROCE_V4;
    v5[0] = 0x55;
    assert_eq!(
        Icrc::compute(crc32_le, &v5[..28], body),
        Err(WireError::BadIpVersion(5))
    );
    assert_eq!(
        Icrc::compute(crc32_le, &ROCE_V4[..28], &body[..11]),
        Err(WireError::Truncated)
    );
}
