// SPDX-License-Identifier: GPL-2.0

//! Every header: known bytes, round trips, truncation, reserved bits.

use crate::wire::bth::Bth;
use crate::wire::ext::{
    Aeth, AtomicAckEth, AtomicEth, Deth, ExtHeader, Feth, Ieth, ImmDt, NakCode, Rdeth, Reth,
    Syndrome,
};
use crate::wire::psn::Psn;
use crate::wire::WireError;
use core::fmt::Debug;

/// Writes `h`, checks its bytes, parses them back, and checks that every
/// shorter input and output is refused.
fn round_trip<H: ExtHeader + PartialEq + Debug>(h: H, bytes: &[u8]) {
    assert_eq!(bytes.len(), H::LEN);
    let mut out = [0xaau8; 64];
    h.write(&mut out).unwrap();
    assert_eq!(&out[..H::LEN], bytes, "{h:?}");
    assert_eq!(out[H::LEN], 0xaa, "wrote past its length");
    assert_eq!(H::parse(bytes).unwrap(), h);
    for short in 0..H::LEN {
        assert_eq!(H::parse(&bytes[..short]), Err(WireError::Truncated));
        assert_eq!(h.write(&mut out[..short]), Err(WireError::NoRoom));
    }
}

#[test]
fn bth_fields() {
    let bth = Bth {
        opcode: 0x0a,
        solicited: true,
        mig_req: false,
        pad: 2,
        tver: 0,
        pkey: 0xffff,
        fecn: false,
        becn: true,
        dest_qp: 0x12_3456,
        ack_req: true,
        psn: Psn::new(0xab_cdef),
    };
    let bytes = [
        0x0a, 0xa0, 0xff, 0xff, 0x40, 0x12, 0x34, 0x56, 0x80, 0xab, 0xcd, 0xef,
    ];
    assert_eq!(bth.to_bytes(), bytes);
    assert_eq!(Bth::parse(&bytes).unwrap(), bth);
    for short in 0..Bth::LEN {
        assert_eq!(Bth::parse(&bytes[..short]), Err(WireError::Truncated));
    }
}

#[test]
fn bth_every_flag_round_trips() {
    for bits in 0..64u32 {
        let bth = Bth {
            opcode: bits as u8,
            solicited: bits & 1 != 0,
            mig_req: bits & 2 != 0,
            pad: ((bits >> 2) & 3) as u8,
            tver: (bits & 0xf) as u8,
            pkey: 0x8001,
            fecn: bits & 4 != 0,
            becn: bits & 8 != 0,
            dest_qp: 0xff_ffff - bits,
            ack_req: bits & 16 != 0,
            psn: Psn::new(bits * 0x40_4040),
        };
        assert_eq!(Bth::parse(&bth.to_bytes()).unwrap(), bth);
    }
}

#[test]
fn bth_reserved_bits_are_ignored() {
    // resv6a and resv7 all ones: parsed fields unchanged, written back 0.
    let bytes = [
        0x04, 0x00, 0xff, 0xff, 0x3f, 0x00, 0x00, 0x11, 0x7f, 0x00, 0x00, 0x01,
    ];
    let bth = Bth::parse(&bytes).unwrap();
    assert!(!bth.fecn && !bth.becn && !bth.ack_req);
    assert_eq!(bth.dest_qp, 0x11);
    assert_eq!(bth.psn, Psn::new(1));
    let back = bth.to_bytes();
    assert_eq!(back[4], 0);
    assert_eq!(back[8], 0);
}

#[test]
fn reth() {
    round_trip(
        Reth {
            va: 0x0102_0304_0506_0708,
            rkey: 0x1122_3344,
            len: 0x0001_0000,
        },
        &[1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x22, 0x33, 0x44, 0, 1, 0, 0],
    );
}

#[test]
fn aeth_syndromes() {
    let cases = [
        (Syndrome::Ack { credits: 0x1f }, 0x1f),
        (Syndrome::Ack { credits: 0 }, 0x00),
        (Syndrome::RnrNak { timer: 0 }, 0x20),
        (Syndrome::RnrNak { timer: 14 }, 0x2e),
        (Syndrome::Nak(NakCode::PsnSequenceError), 0x60),
        (Syndrome::Nak(NakCode::InvalidRequest), 0x61),
        (Syndrome::Nak(NakCode::RemoteAccessError), 0x62),
        (Syndrome::Nak(NakCode::RemoteOperationalError), 0x63),
        (Syndrome::Nak(NakCode::InvalidRdRequest), 0x64),
        (Syndrome::Nak(NakCode::Reserved(9)), 0x69),
        (Syndrome::Reserved(0x45), 0x45),
        (Syndrome::Reserved(0x80), 0x80),
    ];
    for (syndrome, byte) in cases {
        round_trip(
            Aeth {
                syndrome,
                msn: 0x00ab_cdef,
            },
            &[byte, 0xab, 0xcd, 0xef],
        );
    }
    // Every byte decodes to something that encodes back to it.
    for b in 0..=255u8 {
        assert_eq!(Syndrome::from_byte(b).to_byte(), b);
    }
}

#[test]
fn immdt_ieth_rdeth() {
    round_trip(ImmDt(0xdead_beef), &[0xde, 0xad, 0xbe, 0xef]);
    round_trip(Ieth { rkey: 0x0102_0304 }, &[1, 2, 3, 4]);
    round_trip(Rdeth { een: 0x00ab_cdef }, &[0, 0xab, 0xcd, 0xef]);
}

#[test]
fn deth() {
    round_trip(
        Deth {
            qkey: Deth::GSI_QKEY,
            src_qp: 1,
        },
        &[0x80, 0x01, 0, 0, 0, 0, 0, 1],
    );
    // The reserved byte before the source QP is ignored.
    let d = Deth::parse(&[0, 0, 0, 7, 0xff, 0, 0, 2]).unwrap();
    assert_eq!(d, Deth { qkey: 7, src_qp: 2 });
}

#[test]
fn atomic_eth_and_ack() {
    round_trip(
        AtomicEth {
            va: 0x1000,
            rkey: 0x55,
            swap_add: 0x0102_0304_0506_0708,
            compare: u64::MAX,
        },
        &[
            0, 0, 0, 0, 0, 0, 0x10, 0, 0, 0, 0, 0x55, 1, 2, 3, 4, 5, 6, 7, 8, 0xff, 0xff, 0xff,
            0xff, 0xff, 0xff, 0xff, 0xff,
        ],
    );
    round_trip(
        AtomicAckEth {
            orig: 0x8000_0000_0000_0001,
        },
        &[0x80, 0, 0, 0, 0, 0, 0, 1],
    );
}

#[test]
fn feth() {
    round_trip(
        Feth {
            selectivity: 1,
            placement: 3,
        },
        &[0, 0, 0, 0x13],
    );
}
