// SPDX-License-Identifier: GPL-2.0

//! Whole packets: building, parsing, pad, and every refusal.

use super::icrc::{ROCE_V4, ROCE_V4_ICRC, ROCE_V6};
use crate::wire::bth::Bth;
use crate::wire::ext::{Aeth, AtomicAckEth, AtomicEth, Deth, Feth, Ieth, ImmDt, Reth, Syndrome};
use crate::wire::icrc::{crc32_le, Icrc};
use crate::wire::ip::{Datagram, Ipv4Header};
use crate::wire::opcode::{code, OpInfo};
use crate::wire::packet::{
    build, build_ipv4, packet_len, pad_len, write_headers, ExtHeaders, Packet,
};
use crate::wire::psn::Psn;
use crate::wire::WireError;
use std::vec::Vec;

fn bth(opcode: u8) -> Bth {
    Bth {
        opcode,
        pkey: Bth::DEFAULT_PKEY,
        dest_qp: 0x11,
        ack_req: true,
        psn: Psn::new(0x12_3456),
        ..Bth::default()
    }
}

fn reth(len: u32) -> ExtHeaders {
    ExtHeaders {
        reth: Some(Reth {
            va: 0x1000,
            rkey: 0x2345,
            len,
        }),
        ..ExtHeaders::default()
    }
}

fn v4() -> Ipv4Header {
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
fn pad() {
    for (len, pad) in [
        (0, 0),
        (1, 3),
        (2, 2),
        (3, 1),
        (4, 0),
        (5, 3),
        (4096, 0),
        (4097, 3),
    ] {
        assert_eq!(pad_len(len), pad, "{len}");
    }
    assert_eq!(pad_len(usize::MAX), 1);
    let send = OpInfo::lookup(code::RC_SEND_ONLY).unwrap();
    assert_eq!(packet_len(&send, 0), Some(16));
    assert_eq!(packet_len(&send, 1), Some(20));
    assert_eq!(packet_len(&send, 1024), Some(12 + 1024 + 4));
    assert_eq!(packet_len(&send, usize::MAX), None);
}

#[test]
fn builds_the_independent_vector() {
    let mut out = [0u8; 128];
    let n = build_ipv4(
        &mut out,
        &v4(),
        0xc0de,
        &bth(code::RC_RDMA_WRITE_ONLY),
        &reth(5),
        b"hello",
        crc32_le,
    )
    .unwrap();
    assert_eq!(&out[..n], &ROCE_V4[..]);
}

#[test]
fn parses_the_independent_vectors() {
    for bytes in [&ROCE_V4[..], &ROCE_V6[..]] {
        let d = Datagram::parse(bytes).unwrap();
        let p = Packet::parse(d.payload).unwrap();
        assert_eq!(p.bth.opcode, code::RC_RDMA_WRITE_ONLY);
        assert_eq!(p.bth.pad, 3);
        assert_eq!(p.bth.dest_qp, 0x11);
        assert!(p.bth.ack_req);
        assert_eq!(p.bth.psn, Psn::new(0x12_3456));
        assert_eq!(p.ext, reth(5));
        assert_eq!(p.payload(), b"hello");
        assert_eq!(p.check_icrc(crc32_le, d.ip_udp), Ok(()));
    }
    let p = Packet::parse(&ROCE_V4[28..]).unwrap();
    assert_eq!(p.icrc(), ROCE_V4_ICRC);
    assert_eq!(p.covered(), &ROCE_V4[28..64]);
}

#[test]
fn any_flipped_bit_fails_the_icrc_or_the_parse() {
    // Only the UDP checksum (not checked: RoCE sends 0) and BTH byte 4
    // (ECN bits and reserved) may change; a change anywhere else must be
    // caught by the IP checksum, the datagram or packet checks, or the
    // ICRC.
    let masked = [26, 27, 32];
    for i in 0..ROCE_V4.len() {
        for bit in 0..8 {
            let mut p = ROCE_V4;
            p[i] ^= 1 << bit;
            let ok = Datagram::parse(&p).and_then(|d| {
                Packet::parse(d.payload).and_then(|pkt| pkt.check_icrc(crc32_le, d.ip_udp))
            });
            if masked.contains(&i) {
                assert_eq!(ok, Ok(()), "byte {i} bit {bit}");
            } else {
                assert!(ok.is_err(), "byte {i} bit {bit} went through");
            }
        }
    }
}

/// Builds a packet with `payload`, parses it back and checks every field.
fn round_trip(opcode: u8, ext: ExtHeaders, payload: &[u8]) {
    let ip_udp = &ROCE_V4[..28];
    let mut out = std::vec![0u8; 128 + payload.len()];
    let b = Bth {
        solicited: true,
        becn: true,
        ..bth(opcode)
    };
    let n = build(&mut out, ip_udp, &b, &ext, payload, crc32_le).unwrap();
    let info = OpInfo::lookup(opcode).unwrap();
    assert_eq!(Some(n), packet_len(&info, payload.len()));
    let p = Packet::parse(&out[..n]).unwrap();
    assert_eq!(
        p.bth,
        Bth {
            pad: pad_len(payload.len()) as u8,
            ..b
        }
    );
    assert_eq!(p.info, info);
    assert_eq!(p.ext, ext);
    assert_eq!(p.payload(), payload);
    assert_eq!(p.check_icrc(crc32_le, ip_udp), Ok(()));
    // Headers alone, as the transport writes them in front of a payload
    // it gathers by DMA, are the same bytes.
    let mut hdr = [0u8; 64];
    let h = write_headers(&mut hdr, &b, &ext, payload.len()).unwrap();
    assert_eq!(h, info.header_len());
    assert_eq!(hdr[..h], out[..h]);
    // And no shorter output buffer is written past.
    for short in [0, h - 1, n - 1] {
        assert_eq!(
            build(&mut out[..short], ip_udp, &b, &ext, payload, crc32_le),
            Err(WireError::NoRoom),
            "{opcode:#04x} into {short}"
        );
    }
}

#[test]
fn every_rc_and_ud_opcode_round_trips() {
    let aeth = Aeth {
        syndrome: Syndrome::Ack { credits: 0x1f },
        msn: 9,
    };
    let payload: Vec<u8> = (0..37u8).collect();
    let none = ExtHeaders::default();
    let imm = ExtHeaders {
        imm_dt: Some(ImmDt(0xfeed_f00d)),
        ..none
    };
    let with_aeth = ExtHeaders {
        aeth: Some(aeth),
        ..none
    };
    let atomic = ExtHeaders {
        atomic_eth: Some(AtomicEth {
            va: 8,
            rkey: 1,
            swap_add: 2,
            compare: 3,
        }),
        ..none
    };
    let deth = Deth {
        qkey: Deth::GSI_QKEY,
        src_qp: 1,
    };
    let cases = [
        (code::RC_SEND_FIRST, none, &payload[..]),
        (code::RC_SEND_MIDDLE, none, &payload[..]),
        (code::RC_SEND_LAST, none, &payload[..3]),
        (code::RC_SEND_LAST_WITH_IMMEDIATE, imm, &payload[..1]),
        (code::RC_SEND_ONLY, none, &payload[..0]),
        (code::RC_SEND_ONLY_WITH_IMMEDIATE, imm, &payload[..2]),
        (code::RC_RDMA_WRITE_FIRST, reth(4096), &payload[..]),
        (code::RC_RDMA_WRITE_MIDDLE, none, &payload[..]),
        (code::RC_RDMA_WRITE_LAST, none, &payload[..5]),
        (code::RC_RDMA_WRITE_LAST_WITH_IMMEDIATE, imm, &payload[..6]),
        (code::RC_RDMA_WRITE_ONLY, reth(7), &payload[..7]),
        (
            code::RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE,
            ExtHeaders {
                imm_dt: Some(ImmDt(1)),
                ..reth(8)
            },
            &payload[..8],
        ),
        (code::RC_RDMA_READ_REQUEST, reth(1 << 20), &[][..]),
        (code::RC_RDMA_READ_RESPONSE_FIRST, with_aeth, &payload[..]),
        (code::RC_RDMA_READ_RESPONSE_MIDDLE, none, &payload[..]),
        (code::RC_RDMA_READ_RESPONSE_LAST, with_aeth, &payload[..9]),
        (code::RC_RDMA_READ_RESPONSE_ONLY, with_aeth, &payload[..10]),
        (code::RC_ACKNOWLEDGE, with_aeth, &[][..]),
        (
            code::RC_ATOMIC_ACKNOWLEDGE,
            ExtHeaders {
                atomic_ack_eth: Some(AtomicAckEth { orig: 77 }),
                ..with_aeth
            },
            &[][..],
        ),
        (code::RC_COMPARE_SWAP, atomic, &[][..]),
        (code::RC_FETCH_ADD, atomic, &[][..]),
        (
            code::RC_SEND_LAST_WITH_INVALIDATE,
            ExtHeaders {
                ieth: Some(Ieth { rkey: 5 }),
                ..none
            },
            &payload[..11],
        ),
        (
            code::RC_SEND_ONLY_WITH_INVALIDATE,
            ExtHeaders {
                ieth: Some(Ieth { rkey: 6 }),
                ..none
            },
            &payload[..12],
        ),
        (
            code::RC_FLUSH,
            ExtHeaders {
                feth: Some(Feth {
                    selectivity: 0,
                    placement: 1,
                }),
                ..reth(64)
            },
            &[][..],
        ),
        (code::RC_ATOMIC_WRITE, reth(8), &payload[..8]),
        (
            code::UD_SEND_ONLY,
            ExtHeaders {
                deth: Some(deth),
                ..none
            },
            &payload[..],
        ),
        (
            code::UD_SEND_ONLY_WITH_IMMEDIATE,
            ExtHeaders {
                deth: Some(deth),
                ..imm
            },
            &payload[..13],
        ),
    ];
    // Every RC opcode is here.
    let rc = (0..0x20u8)
        .filter(|op| OpInfo::lookup(*op).is_some())
        .count();
    assert_eq!(cases.len(), rc + 2);
    for (opcode, ext, payload) in cases {
        round_trip(opcode, ext, payload);
    }
}

#[test]
fn builder_refuses_wrong_headers() {
    let mut out = [0u8; 128];
    let send = bth(code::RC_SEND_ONLY);
    let write = bth(code::RC_RDMA_WRITE_FIRST);
    let none = ExtHeaders::default();
    // SEND ONLY has no RETH; WRITE FIRST must have one.
    assert_eq!(
        write_headers(&mut out, &send, &reth(1), 1),
        Err(WireError::HeaderMismatch)
    );
    assert_eq!(
        write_headers(&mut out, &write, &none, 1),
        Err(WireError::HeaderMismatch)
    );
    // A READ request or an ACK carries no payload.
    assert_eq!(
        write_headers(&mut out, &bth(code::RC_RDMA_READ_REQUEST), &reth(1), 1),
        Err(WireError::UnexpectedPayload)
    );
    assert_eq!(
        write_headers(&mut out, &bth(0x15), &none, 0),
        Err(WireError::UnknownOpcode(0x15))
    );
}

/// A valid SEND ONLY packet with `payload_len` bytes, ICRC included.
fn send_only(payload_len: usize) -> Vec<u8> {
    let mut out = std::vec![0u8; 64 + payload_len];
    let payload = std::vec![0x5a; payload_len];
    let n = build(
        &mut out,
        &ROCE_V4[..28],
        &bth(code::RC_SEND_ONLY),
        &ExtHeaders::default(),
        &payload,
        crc32_le,
    )
    .unwrap();
    out.truncate(n);
    out
}

#[test]
fn parse_refusals() {
    let good = send_only(5);
    assert!(Packet::parse(&good).is_ok());
    for short in 0..Bth::LEN {
        assert_eq!(
            Packet::parse(&good[..short]).unwrap_err(),
            WireError::Truncated
        );
    }
    let with = |i: usize, v: u8| {
        let mut p = good.clone();
        p[i] = v;
        Packet::parse(&p).map(|_| ())
    };
    assert_eq!(with(0, 0x15), Err(WireError::UnknownOpcode(0x15)));
    assert_eq!(with(0, code::CNP), Err(WireError::UnknownOpcode(code::CNP)));
    assert_eq!(with(1, 0x31), Err(WireError::BadTransportVersion(1)));
    let mut qp0 = good.clone();
    qp0[5..8].fill(0);
    assert_eq!(Packet::parse(&qp0).unwrap_err(), WireError::BadQpn);
    // ACK (16 bytes of headers) in a 16-byte packet: no room for the ICRC.
    let mut ack = std::vec![0u8; 16];
    ack[..12].copy_from_slice(&bth(code::RC_ACKNOWLEDGE).to_bytes());
    assert_eq!(Packet::parse(&ack).unwrap_err(), WireError::TooShort);
    ack.extend_from_slice(&[0; 4]);
    assert!(Packet::parse(&ack).is_ok());
    // An ACK with payload, or with a pad count.
    ack.extend_from_slice(&[0; 4]);
    assert_eq!(
        Packet::parse(&ack).unwrap_err(),
        WireError::UnexpectedPayload
    );
    ack[1] = 0x10;
    assert_eq!(
        Packet::parse(&ack).unwrap_err(),
        WireError::UnexpectedPayload
    );
    // Pad larger than the payload room.
    let empty = send_only(0);
    let mut p = empty.clone();
    p[1] |= 0x30;
    assert_eq!(Packet::parse(&p).unwrap_err(), WireError::TooShort);
    // A length that is not whole words.
    let mut odd = good.clone();
    odd.push(0);
    assert_eq!(Packet::parse(&odd).unwrap_err(), WireError::Unaligned);
}

#[test]
fn payload_excludes_pad_and_icrc() {
    for len in 0..=9 {
        let bytes = send_only(len);
        let p = Packet::parse(&bytes).unwrap();
        assert_eq!(p.payload().len(), len);
        assert_eq!(usize::from(p.bth.pad), pad_len(len));
        assert_eq!(p.check_icrc(crc32_le, &ROCE_V4[..28]), Ok(()));
        assert_eq!(
            p.check_icrc(crc32_le, &ROCE_V6[..48]),
            Err(WireError::BadIcrc)
        );
        assert_eq!(
            Icrc::compute(crc32_le, &ROCE_V4[..28], p.covered()),
            Ok(p.icrc())
        );
    }
}
