// SPDX-License-Identifier: GPL-2.0

//! 24-bit PSN arithmetic across the wrap.

use crate::wire::psn::Psn;
use core::cmp::Ordering;

#[test]
fn new_masks_to_24_bits() {
    assert_eq!(Psn::new(0x0123_4567).value(), 0x0023_4567);
    assert_eq!(Psn::new(u32::MAX).value(), 0x00ff_ffff);
}

#[test]
fn next_wraps_to_zero() {
    assert_eq!(Psn::new(0x00ff_ffff).next(), Psn::new(0));
    assert_eq!(Psn::new(0x00ff_fffe).add(5), Psn::new(3));
    assert_eq!(Psn::new(7).add(u32::MAX), Psn::new(6));
}

#[test]
fn diff_is_signed_across_the_wrap() {
    let last = Psn::new(0x00ff_ffff);
    let first = Psn::new(0);
    assert_eq!(first.diff(last), 1);
    assert_eq!(last.diff(first), -1);
    assert_eq!(Psn::new(10).diff(Psn::new(3)), 7);
    assert_eq!(Psn::new(3).diff(Psn::new(10)), -7);
    // Half the space away is the most negative distance.
    assert_eq!(Psn::new(0x0080_0000).diff(first), -0x0080_0000);
    assert_eq!(Psn::new(0x007f_ffff).diff(first), 0x007f_ffff);
}

#[test]
fn serial_order_wraps() {
    let last = Psn::new(0x00ff_ffff);
    let first = Psn::new(0);
    assert!(last.is_before(first));
    assert!(!first.is_before(last));
    assert_eq!(last.serial_cmp(first), Ordering::Less);
    assert_eq!(first.serial_cmp(last), Ordering::Greater);
    assert_eq!(first.serial_cmp(first), Ordering::Equal);
    assert!(Psn::new(0x00ff_fff0).is_before(Psn::new(0x10)));
    assert!(Psn::new(0x10).is_before(Psn::new(0x0080_000f)));
    // Exactly half the space apart, each is before the other (rxe's
    // psn_compare() says the same): the transport never lets that many
    // packets be outstanding.
    assert!(Psn::new(0x10).is_before(Psn::new(0x0080_0010)));
    assert!(Psn::new(0x0080_0010).is_before(Psn::new(0x10)));
    assert!(!Psn::new(0x10).is_before(Psn::new(0x0080_0011)));
}

#[test]
fn every_step_from_a_wrap_neighbourhood() {
    for start in [0x00ff_ff00, 0x00ff_ffff, 0, 0x007f_ffff] {
        let a = Psn::new(start);
        for n in 1..0x200u32 {
            let b = a.add(n);
            assert_eq!(b.diff(a), n as i32, "{a:?} + {n}");
            assert!(a.is_before(b));
            assert!(!b.is_before(a));
        }
    }
}
