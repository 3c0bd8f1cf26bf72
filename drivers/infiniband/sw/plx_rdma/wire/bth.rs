// SPDX-License-Identifier: GPL-2.0

//! The Base Transport Header, first in every transport packet.
//!
//! ```text
//! byte 0      opcode
//! byte 1      SE(7) M(6) PadCnt(5:4) TVer(3:0)
//! bytes 2-3   P_Key
//! byte 4      F(7) B(6) resv6a(5:0)      F/B: FECN/BECN (RoCE: ECN)
//! bytes 5-7   destination QP
//! byte 8      AckReq(7) resv7(6:0)
//! bytes 9-11  PSN
//! ```

use super::bytes::{Reader, Writer};
use super::psn::Psn;
use super::WireError;

/// A parsed BTH. Reserved bits are dropped when parsing and written as
/// zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Bth {
    pub(crate) opcode: u8,
    /// Solicited event: the receiver's CQ is notified.
    pub(crate) solicited: bool,
    /// Migration state (APM); RoCE peers send 1 for a migrated path.
    pub(crate) mig_req: bool,
    /// Pad bytes (0-3) after the payload that make it a multiple of 4.
    pub(crate) pad: u8,
    /// Transport header version; only 0 exists.
    pub(crate) tver: u8,
    pub(crate) pkey: u16,
    pub(crate) fecn: bool,
    pub(crate) becn: bool,
    /// Destination QP number (24 bits).
    pub(crate) dest_qp: u32,
    /// The requester asks for an acknowledge of this packet.
    pub(crate) ack_req: bool,
    pub(crate) psn: Psn,
}

impl Bth {
    /// Bytes on the wire.
    pub(crate) const LEN: usize = 12;
    /// The default partition key, the only one RoCE devices use.
    pub(crate) const DEFAULT_PKEY: u16 = 0xffff;
    /// The QP number field's bits.
    pub(crate) const QPN_MASK: u32 = 0x00ff_ffff;
    /// The destination QP that addresses a multicast group.
    pub(crate) const MULTICAST_QPN: u32 = 0x00ff_ffff;
    /// Offset of the byte holding FECN, BECN and resv6a, which the ICRC
    /// covers as all ones.
    pub(crate) const VARIANT_BYTE: usize = 4;

    /// Reads a BTH from the front of `bytes`.
    pub(crate) fn parse(bytes: &[u8]) -> Result<Self, WireError> {
        let mut r = Reader::new(bytes);
        let opcode = r.u8()?;
        let flags = r.u8()?;
        let pkey = r.u16()?;
        let qpn = r.u32()?;
        let apsn = r.u32()?;
        Ok(Self {
            opcode,
            solicited: flags & 0x80 != 0,
            mig_req: flags & 0x40 != 0,
            pad: (flags >> 4) & 0x3,
            tver: flags & 0x0f,
            pkey,
            fecn: qpn & 0x8000_0000 != 0,
            becn: qpn & 0x4000_0000 != 0,
            dest_qp: qpn & Self::QPN_MASK,
            ack_req: apsn & 0x8000_0000 != 0,
            psn: Psn::new(apsn),
        })
    }

    /// Writes the header into the front of `out`. Fields wider than their
    /// wire width (pad, tver, dest_qp) are truncated to it.
    pub(crate) fn write(&self, out: &mut [u8]) -> Result<(), WireError> {
        let flags = (u8::from(self.solicited) << 7)
            | (u8::from(self.mig_req) << 6)
            | ((self.pad & 0x3) << 4)
            | (self.tver & 0x0f);
        let qpn = (u32::from(self.fecn) << 31)
            | (u32::from(self.becn) << 30)
            | (self.dest_qp & Self::QPN_MASK);
        let apsn = (u32::from(self.ack_req) << 31) | self.psn.value();
        let mut w = Writer::new(out);
        w.u8(self.opcode)?;
        w.u8(flags)?;
        w.u16(self.pkey)?;
        w.u32(qpn)?;
        w.u32(apsn)
    }

    /// The header as bytes.
    pub(crate) fn to_bytes(self) -> [u8; Self::LEN] {
        let mut b = [0; Self::LEN];
        // Cannot fail: the array is exactly one header long.
        let _ = self.write(&mut b);
        b
    }
}
