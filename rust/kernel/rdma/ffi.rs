// SPDX-License-Identifier: GPL-2.0

//! Raw declarations of the C glue in `rust/helpers/ib_device.c`.
//!
//! The verbs objects (`struct ib_device`, `ib_cq`) are opaque here; the
//! flat argument structures are mirrored field by field in
//! [`super::types`] and checked against the C header's layout below.

use super::types::{Caps, QpAttr, QpInit, RawRecvWr, RawSendWr, Sge, SrqAttr, UdDest, Wc};
use core::mem::{offset_of, size_of};
use kernel::ffi::{c_char, c_int, c_void};

/// `rust_ib_newlink_t`: a link type's context, the device's name, its
/// netdev's namespace (held for the call) and interface index there.
pub(super) type NewLinkFn =
    unsafe extern "C" fn(*const c_void, *const c_char, *mut c_void, c_int) -> c_int;

// The layouts of `rust/helpers/ib_device.h`, which static_asserts the same
// numbers: a field added or moved on one side alone fails the build.
const _: () = {
    assert!(size_of::<Sge>() == 16);
    assert!(size_of::<UdDest>() == 56);
    assert!(size_of::<RawSendWr>() == 128);
    assert!(offset_of!(RawSendWr, ud) == 68);
    assert!(size_of::<RawRecvWr>() == 24);
    assert!(size_of::<Wc>() == 48);
    assert!(offset_of!(Wc, qp_handle) == 40);
    assert!(size_of::<QpInit>() == 48);
    assert!(offset_of!(QpInit, handle) == 40);
    assert!(size_of::<QpAttr>() == 144);
    assert!(size_of::<Caps>() == 80);
    assert!(size_of::<SrqAttr>() == 12);
};

/// Mirror of `struct rust_ib_ops` in the helper file.
#[repr(C)]
pub(super) struct RawOps {
    pub(super) alloc_pd: unsafe extern "C" fn(*const c_void, *mut *mut c_void) -> c_int,
    pub(super) dealloc_pd: unsafe extern "C" fn(*const c_void, *mut c_void),
    pub(super) create_cq: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        u32,
        *mut c_void,
        *mut *mut c_void,
    ) -> c_int,
    pub(super) destroy_cq: unsafe extern "C" fn(*const c_void, *mut c_void),
    pub(super) poll_cq: unsafe extern "C" fn(*mut c_void, *mut Wc, u32) -> c_int,
    pub(super) req_notify_cq: unsafe extern "C" fn(*mut c_void, u32) -> c_int,
    pub(super) resize_cq: unsafe extern "C" fn(*mut c_void, u32, *mut c_void) -> c_int,
    pub(super) reg_user_mr: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        u64,
        u64,
        u64,
        u32,
        *mut *mut c_void,
        *mut u32,
        *mut u32,
    ) -> c_int,
    pub(super) dereg_mr: unsafe extern "C" fn(*const c_void, *mut c_void) -> c_int,
    pub(super) create_qp: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut QpInit,
        *mut *mut c_void,
        *mut u32,
    ) -> c_int,
    pub(super) modify_qp: unsafe extern "C" fn(*mut c_void, *const QpAttr, u32) -> c_int,
    pub(super) query_qp: unsafe extern "C" fn(*mut c_void, *mut QpAttr),
    pub(super) destroy_qp: unsafe extern "C" fn(*const c_void, *mut c_void) -> c_int,
    pub(super) post_send: unsafe extern "C" fn(*mut c_void, *const RawSendWr) -> c_int,
    pub(super) post_recv: unsafe extern "C" fn(*mut c_void, *const RawRecvWr) -> c_int,
    pub(super) create_srq: unsafe extern "C" fn(
        *const c_void,
        *mut c_void,
        *mut c_void,
        *mut SrqAttr,
        *mut *mut c_void,
    ) -> c_int,
    pub(super) modify_srq: unsafe extern "C" fn(*mut c_void, *const SrqAttr, u32) -> c_int,
    pub(super) query_srq: unsafe extern "C" fn(*mut c_void, *mut SrqAttr),
    pub(super) destroy_srq: unsafe extern "C" fn(*const c_void, *mut c_void),
    pub(super) post_srq_recv: unsafe extern "C" fn(*mut c_void, *const RawRecvWr) -> c_int,
    pub(super) hw_stats: unsafe extern "C" fn(*const c_void, *mut u64, u32),
    pub(super) mcast: unsafe extern "C" fn(*mut c_void, *const [u8; 16], bool) -> c_int,
}

extern "C" {
    pub(super) fn rust_ib_device_alloc(
        ops: *const RawOps,
        ctx: *const c_void,
        caps: *const Caps,
    ) -> *mut c_void;
    pub(super) fn rust_ib_device_register(
        ibdev: *mut c_void,
        name: *const c_char,
        net: *mut c_void,
        ifindex: c_int,
    ) -> c_int;
    pub(super) fn rust_ib_device_unregister(ibdev: *mut c_void);
    pub(super) fn rust_ib_device_dealloc(ibdev: *mut c_void);
    pub(super) fn rust_ib_device_put(ibdev: *mut c_void);
    pub(super) fn rust_ib_device_allow_user_unreg(ibdev: *mut c_void);
    pub(super) fn rust_ib_device_is_live(ibdev: *mut c_void) -> bool;
    pub(super) fn rust_ib_link_register(
        kind: *const c_char,
        ctx: *const c_void,
        new_link: NewLinkFn,
        unregistered: unsafe extern "C" fn(*const c_void),
    ) -> c_int;
    pub(super) fn rust_ib_link_unregister();
    pub(super) fn rust_ib_device_set_stats(
        ibdev: *mut c_void,
        names: *const *const c_char,
        n: u32,
    ) -> c_int;
    pub(super) fn rust_ib_device_name(ibdev: *mut c_void) -> *const c_char;
    pub(super) fn rust_ib_cq_event(ibcq: *mut c_void);
    pub(super) fn rust_ib_cq_error(ibcq: *mut c_void);
    pub(super) fn rust_ib_srq_limit_reached(ibsrq: *mut c_void);
    pub(super) fn rust_ib_user_ring_new(
        cmd: *mut c_void,
        size: usize,
        buf: *mut *mut c_void,
        offset: *mut u64,
        err: *mut c_int,
    ) -> *mut c_void;
    pub(super) fn rust_ib_user_ring_retire(map: *mut c_void);
    pub(super) fn rust_ib_user_ring_put(map: *mut c_void);
    pub(super) fn rust_ib_udata_respond(cmd: *mut c_void, src: *const c_void, len: usize) -> c_int;
    pub(super) fn rust_ib_udata_outlen(cmd: *mut c_void) -> usize;
    pub(super) fn rust_ib_modify_qp_is_ok(cur: u32, next: u32, qp_type: u32, mask: u32) -> bool;
}
