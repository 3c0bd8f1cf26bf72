// SPDX-License-Identifier: GPL-2.0

//! Parsing never panics: deterministic pseudo-random inputs, from noise
//! to valid packets with a few bytes changed.

use super::icrc::{ROCE_V4, ROCE_V6};
use crate::wire::icrc::crc32_le;
use crate::wire::ip::Datagram;
use crate::wire::opcode::OpInfo;
use crate::wire::packet::Packet;
use crate::wire::WireError;

/// xorshift64*: a fixed sequence, so that a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Everything a receiver does with untrusted bytes.
fn receive(bytes: &[u8]) -> Result<(), WireError> {
    let d = Datagram::parse(bytes)?;
    let p = Packet::parse(d.payload)?;
    // Touch every part of the view.
    let _ = (p.payload().len(), p.covered().len(), p.ext, p.bth);
    p.check_icrc(crc32_le, d.ip_udp)
}

#[test]
fn random_bytes() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut buf = [0u8; 256];
    let mut parsed = 0;
    for _ in 0..50_000 {
        let len = rng.below(buf.len() + 1);
        for b in &mut buf[..len] {
            *b = rng.next() as u8;
        }
        // Give a known opcode and a QP half the time, so that the parse
        // gets past the BTH.
        if len > 12 && rng.next() & 1 == 0 {
            buf[0] = (rng.next() % 0x80) as u8;
            buf[1] &= 0xf0;
            buf[5] |= 1;
        }
        parsed += usize::from(Packet::parse(&buf[..len]).is_ok());
        let _ = receive(&buf[..len]);
    }
    assert!(parsed > 0, "the loop never reached a whole parse");
}

#[test]
fn mutated_packets() {
    let mut rng = Rng(0x0123_4567_89ab_cdef);
    let mut accepted = 0;
    for seed in [&ROCE_V4[..], &ROCE_V6[..]] {
        for _ in 0..50_000 {
            let mut p = std::vec::Vec::from(seed);
            for _ in 0..1 + rng.below(4) {
                let i = rng.below(p.len());
                p[i] = rng.next() as u8;
            }
            // Sometimes cut or grow it.
            match rng.below(4) {
                0 => p.truncate(rng.below(p.len() + 1)),
                1 => p.extend((0..rng.below(9)).map(|_| rng.next() as u8)),
                _ => {}
            }
            accepted += usize::from(receive(&p).is_ok());
        }
    }
    // Only changes to masked bytes (or none) get through.
    assert!(accepted < 20_000, "{accepted} mutated packets accepted");
}

#[test]
fn every_opcode_every_short_length() {
    // Each opcode with a valid BTH and every length up to past its
    // headers: never a panic, and accepted exactly when long enough.
    let mut buf = [0u8; 80];
    for op in 0..=255u8 {
        buf[..12].copy_from_slice(&[op, 0, 0xff, 0xff, 0, 0, 0, 1, 0, 0, 0, 0]);
        for len in 0..buf.len() {
            let r = Packet::parse(&buf[..len]);
            match OpInfo::lookup(op) {
                None if len >= 12 => assert_eq!(r.unwrap_err(), WireError::UnknownOpcode(op)),
                None => assert_eq!(r.unwrap_err(), WireError::Truncated),
                Some(info) => {
                    let need = info.header_len() + 4;
                    let fits = len >= need && len % 4 == 0 && (info.payload || len == need);
                    assert_eq!(r.is_ok(), fits, "{op:#04x} len {len}");
                }
            }
        }
    }
}
