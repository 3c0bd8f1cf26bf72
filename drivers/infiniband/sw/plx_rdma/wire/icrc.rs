// SPDX-License-Identifier: GPL-2.0

//! The invariant CRC that ends every RoCEv2 packet.
//!
//! The ICRC is the CRC-32 of zlib and Ethernet (reflected polynomial
//! `0xedb88320`, initial value and final XOR all ones) over:
//!
//! 1. 8 bytes of `0xff`, which stand for the InfiniBand LRH that RoCE has
//!    not got;
//! 2. the IP header with the fields routers change masked to ones: for
//!    IPv4 the TOS, TTL and header checksum; for IPv6 the traffic class,
//!    flow label and hop limit;
//! 3. the UDP header with its checksum masked to ones;
//! 4. the BTH with byte 4 (FECN, BECN, resv6a) masked to ones;
//! 5. the extended headers, the payload and the pad, as they are.
//!
//! It is stored after the pad least significant byte first, which is what
//! `rdma_rxe` does on little-endian hosts and what the IBA's sample
//! packet shows (its ICRC `0x9625B75A`, written as the spec writes
//! big-endian numbers, is the CRC `0x5AB72596` stored little-endian).
//!
//! The CRC itself is a [`Crc32Fn`], so that the kernel can pass its own
//! `crc32_le()`; [`crc32_le`] here is a table-driven one in plain `core`.

use super::bth::Bth;
use super::WireError;

/// A CRC-32 (reflected, polynomial `0xedb88320`) update with the
/// convention of the kernel's `crc32_le()`: `crc` is the running value,
/// with no inversion on the way in or out.
pub(crate) type Crc32Fn = fn(crc: u32, data: &[u8]) -> u32;

/// The reflected CRC-32 polynomial of zlib, Ethernet and the IBA.
const POLY: u32 = 0xedb8_8320;

/// Slice-by-8 tables: `TABLES[0]` is the classic byte table, and
/// `TABLES[k][b]` the CRC of byte `b` followed by `k` zero bytes, so that
/// eight bytes are folded in per step.
static TABLES: [[u32; 256]; 8] = make_tables();

const fn make_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut bit = 0;
        while bit < 8 {
            c = if c & 1 != 0 { (c >> 1) ^ POLY } else { c >> 1 };
            bit += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 8 {
            let prev = t[k - 1][i];
            t[k][i] = (prev >> 8) ^ t[0][(prev & 0xff) as usize];
            k += 1;
        }
        i += 1;
    }
    t
}

/// Byte `n` (0 = least significant) of `v`, as a table index.
const fn byte(v: u32, n: u32) -> usize {
    ((v >> (8 * n)) & 0xff) as usize
}

/// CRC-32 update over `data`, slice-by-8, with the kernel's `crc32_le()`
/// convention (see [`Crc32Fn`]).
pub(crate) fn crc32_le(mut crc: u32, data: &[u8]) -> u32 {
    let t = &TABLES;
    let mut rest = data;
    while let Some((block, tail)) = rest.split_first_chunk::<8>() {
        let [b0, b1, b2, b3, b4, b5, b6, b7] = *block;
        let lo = crc ^ u32::from_le_bytes([b0, b1, b2, b3]);
        let hi = u32::from_le_bytes([b4, b5, b6, b7]);
        crc = t[7][byte(lo, 0)]
            ^ t[6][byte(lo, 1)]
            ^ t[5][byte(lo, 2)]
            ^ t[4][byte(lo, 3)]
            ^ t[3][byte(hi, 0)]
            ^ t[2][byte(hi, 1)]
            ^ t[1][byte(hi, 2)]
            ^ t[0][byte(hi, 3)];
        rest = tail;
    }
    for &b in rest {
        crc = (crc >> 8) ^ t[0][byte(crc ^ u32::from(b), 0)];
    }
    crc
}

/// Bytes of the ICRC.
pub(crate) const ICRC_LEN: usize = 4;
/// Bytes of the IPv4 header the ICRC covers (RoCE sends no options).
const IPV4_LEN: usize = 20;
/// Bytes of the fixed IPv6 header.
const IPV6_LEN: usize = 40;
/// Bytes of the UDP header.
const UDP_LEN: usize = 8;

/// A running ICRC computation.
///
/// The usual sequence is [`Icrc::roce`] with the IP and UDP headers, then
/// [`Icrc::update_bth`], then [`Icrc::update`] over the rest of the
/// packet in as many pieces as it is stored in (an skb's fragments, say),
/// then [`Icrc::finish`].
#[derive(Clone, Copy)]
pub(crate) struct Icrc {
    crc32: Crc32Fn,
    state: u32,
}

impl Icrc {
    /// The running CRC after the 8 bytes of ones that stand for the LRH:
    /// what `rdma_rxe` seeds its computation with.
    pub(crate) const ROCE_SEED: u32 = 0xdebb_20e3;

    /// A computation that has hashed nothing yet.
    pub(crate) const fn new(crc32: Crc32Fn) -> Self {
        Self { crc32, state: !0 }
    }

    /// A computation over a RoCEv2 packet, with the masked LRH, IP header
    /// and UDP header hashed. `ip_udp` starts with the IP header (version
    /// 4 without options, or 6) and goes on with the UDP header; what
    /// follows them is ignored.
    pub(crate) fn roce(crc32: Crc32Fn, ip_udp: &[u8]) -> Result<Self, WireError> {
        let mut icrc = Self::new(crc32);
        icrc.update(&[0xff; 8]);
        let version = ip_udp.first().ok_or(WireError::Truncated)? >> 4;
        // One buffer big enough for either IP version, so that the masked
        // copy lives on the stack and is hashed in one call.
        let mut hdr = [0u8; IPV6_LEN + UDP_LEN];
        let len = match version {
            4 => {
                let len = IPV4_LEN + UDP_LEN;
                let src = ip_udp.get(..len).ok_or(WireError::Truncated)?;
                if src.first() != Some(&0x45) {
                    return Err(WireError::IpOptions);
                }
                let dst = hdr.get_mut(..len).ok_or(WireError::NoRoom)?;
                dst.copy_from_slice(src);
                // TOS, TTL, header checksum.
                for i in [1, 8, 10, 11] {
                    if let Some(b) = dst.get_mut(i) {
                        *b = 0xff;
                    }
                }
                len
            }
            6 => {
                let len = IPV6_LEN + UDP_LEN;
                let src = ip_udp.get(..len).ok_or(WireError::Truncated)?;
                hdr.copy_from_slice(src);
                // Traffic class and flow label: all of bytes 0-3 but the
                // version nibble. Hop limit: byte 7.
                if let Some(b) = hdr.first_mut() {
                    *b |= 0x0f;
                }
                for i in [1, 2, 3, 7] {
                    if let Some(b) = hdr.get_mut(i) {
                        *b = 0xff;
                    }
                }
                len
            }
            v => return Err(WireError::BadIpVersion(v)),
        };
        let hdr = hdr.get_mut(..len).ok_or(WireError::NoRoom)?;
        // The UDP checksum: the last two bytes of the UDP header.
        if let Some([a, b]) = hdr.last_chunk_mut::<2>() {
            *a = 0xff;
            *b = 0xff;
        }
        icrc.update(hdr);
        Ok(icrc)
    }

    /// Hashes `bytes` as they are.
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.state = (self.crc32)(self.state, bytes);
    }

    /// Hashes the BTH at the front of `bytes`, with its byte 4 masked.
    pub(crate) fn update_bth(&mut self, bytes: &[u8]) -> Result<(), WireError> {
        let bth = bytes
            .first_chunk::<{ Bth::LEN }>()
            .ok_or(WireError::Truncated)?;
        let mut masked = *bth;
        if let Some(b) = masked.get_mut(Bth::VARIANT_BYTE) {
            *b = 0xff;
        }
        self.update(&masked);
        Ok(())
    }

    /// The ICRC of what was hashed.
    pub(crate) fn finish(&self) -> u32 {
        !self.state
    }

    /// The ICRC of a RoCEv2 packet: `ip_udp` as for [`Icrc::roce`],
    /// `transport` from the BTH to the end of the pad (the ICRC field
    /// excluded).
    pub(crate) fn compute(
        crc32: Crc32Fn,
        ip_udp: &[u8],
        transport: &[u8],
    ) -> Result<u32, WireError> {
        let mut icrc = Self::roce(crc32, ip_udp)?;
        icrc.update_bth(transport)?;
        icrc.update(transport.get(Bth::LEN..).unwrap_or_default());
        Ok(icrc.finish())
    }

    /// The ICRC field's bytes on the wire.
    pub(crate) const fn to_wire(icrc: u32) -> [u8; ICRC_LEN] {
        icrc.to_le_bytes()
    }

    /// The ICRC a received field holds.
    pub(crate) const fn from_wire(field: [u8; ICRC_LEN]) -> u32 {
        u32::from_le_bytes(field)
    }
}
