// SPDX-License-Identifier: GPL-2.0

//! Packet sequence numbers: 24-bit serial numbers.
//!
//! A PSN counts modulo 2^24, so "before" and "after" only make sense
//! within half the space: `a` is before `b` when `b - a`, taken modulo
//! 2^24, is in `1..2^23`. This is the order the IBA (and `rdma_rxe`)
//! uses to tell a duplicate from a packet ahead of the expected one.

use core::cmp::Ordering;

/// A 24-bit packet sequence number; the upper byte is always zero.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Psn(u32);

impl Psn {
    /// The bits a PSN has on the wire.
    pub(crate) const MASK: u32 = 0x00ff_ffff;

    /// The PSN `v` modulo 2^24.
    pub(crate) const fn new(v: u32) -> Self {
        Self(v & Self::MASK)
    }

    pub(crate) const fn value(self) -> u32 {
        self.0
    }

    /// The PSN `n` packets after this one.
    pub(crate) const fn add(self, n: u32) -> Self {
        Self::new(self.0.wrapping_add(n))
    }

    /// The PSN after this one.
    pub(crate) const fn next(self) -> Self {
        self.add(1)
    }

    /// `self - other` as a signed distance in `-2^23..2^23`: negative when
    /// `self` is before `other`. Two PSNs exactly 2^23 apart are each
    /// before the other (-2^23 both ways), as in `rdma_rxe`; a transport
    /// keeps far fewer packets outstanding than that.
    pub(crate) const fn diff(self, other: Self) -> i32 {
        // Shift the 24-bit difference into the top of an i32 and back, so
        // that its bit 23 becomes the sign.
        ((self.0.wrapping_sub(other.0) << 8) as i32) >> 8
    }

    /// Serial order. It is not a total order (it is not transitive across
    /// more than half the space), hence no `Ord` implementation.
    pub(crate) const fn serial_cmp(self, other: Self) -> Ordering {
        let d = self.diff(other);
        if d < 0 {
            Ordering::Less
        } else if d > 0 {
            Ordering::Greater
        } else {
            Ordering::Equal
        }
    }

    /// Whether `self` comes before `other` in serial order.
    pub(crate) const fn is_before(self, other: Self) -> bool {
        self.diff(other) < 0
    }
}
