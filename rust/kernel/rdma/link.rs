// SPDX-License-Identifier: GPL-2.0

//! RDMA link types: software RDMA devices created at a user's request on
//! a netdev, `rdma link add NAME type TYPE netdev DEV`, and removed with
//! `rdma link delete NAME`, as rxe's and siw's are.
//!
//! C header: [`include/rdma/rdma_netlink.h`](srctree/include/rdma/rdma_netlink.h)
//!
//! A module registers one [`LinkType`]; ib_core calls its [`NewLink`] for
//! every `rdma link add` of that type, and the driver registers a device
//! there with [`super::device::Registration::new_removable`] and keeps it.
//! `rdma link delete` is ib_core's own business: it unregisters the device
//! at once (every object destroyed) and the link type is told
//! ([`NewLink::unregistered`]), so that the driver drops the registrations
//! that are no longer live and so frees them.

use super::ffi;
use crate::net_ns::NetNs;
use kernel::{
    ffi::{c_char, c_int, c_void},
    prelude::*,
    str::CStr,
    sync::{Arc, ArcBorrow},
};

/// One `rdma link add` request.
pub struct LinkRequest<'a> {
    /// The device's name, exactly as given (no `%d` pattern).
    pub name: &'a CStr,
    /// The netdev's network namespace (the requester's).
    pub net: NetNs,
    /// The interface index of the netdev, in `net`.
    pub ifindex: i32,
}

/// A driver's handler of its link type.
pub trait NewLink: Send + Sync + 'static {
    /// Creates the device `req` asks for; the error is the command's.
    /// Called in process context, possibly for two requests at once.
    fn new_link(&self, req: &LinkRequest<'_>) -> Result;

    /// One of the module's removable devices is being unregistered (or
    /// the link type is going away): drop the registrations that are no
    /// longer live. Called while ib_core unregisters the device, before
    /// it is done: only schedule the work here (dropping the registration
    /// then waits for that unregistration to end).
    fn unregistered(this: ArcBorrow<'_, Self>);
}

/// A registered link type; dropping it unregisters it, after the
/// `rdma link add` calls in flight returned.
///
/// # Invariants
///
/// `handler`'s pointer is the context the C glue hands to the callbacks,
/// from registration until `drop` returns.
pub struct LinkType<T: NewLink> {
    handler: Arc<T>,
}

impl<T: NewLink> LinkType<T> {
    /// Registers link type `kind` (`rdma link add ... type KIND`), served
    /// by `handler`; `EBUSY` if the module has one already.
    pub fn new(kind: &'static CStr, handler: Arc<T>) -> Result<Self> {
        let ctx = Arc::as_ptr(&handler).cast::<c_void>();
        // SAFETY: `kind` is static; `ctx` stays valid until `drop`, which
        // unregisters the type before `handler` is released; the callbacks
        // are this type's.
        let ret = unsafe {
            ffi::rust_ib_link_register(kind.as_char_ptr(), ctx, new_link::<T>, unregistered::<T>)
        };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: Registered with `handler`'s pointer.
        Ok(Self { handler })
    }

    /// The handler.
    pub fn handler(&self) -> &Arc<T> {
        &self.handler
    }
}

impl<T: NewLink> Drop for LinkType<T> {
    fn drop(&mut self) {
        // SAFETY: Registered (type invariant); this waits for the callbacks
        // in flight, and none comes afterwards.
        unsafe { ffi::rust_ib_link_unregister() };
    }
}

/// # Safety
///
/// `ctx` is the pointer of a live `LinkType<T>`'s handler; `name` a C
/// string valid for the call; `net` a namespace held for the call.
unsafe extern "C" fn new_link<T: NewLink>(
    ctx: *const c_void,
    name: *const c_char,
    net: *mut c_void,
    ifindex: c_int,
) -> c_int {
    // SAFETY: Per the function's contract.
    let (handler, name) = unsafe { (&*ctx.cast::<T>(), CStr::from_char_ptr(name)) };
    // SAFETY: ib_core holds the netdev, and so its namespace, for the call.
    let Some(net) = (unsafe { NetNs::from_borrowed(net) }) else {
        return EINVAL.to_errno();
    };
    let req = LinkRequest { name, net, ifindex };
    match handler.new_link(&req) {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// `ctx` is the pointer of a live `LinkType<T>`'s handler.
unsafe extern "C" fn unregistered<T: NewLink>(ctx: *const c_void) {
    // SAFETY: The handler's `Arc` lives while the type is registered (type
    // invariant of `LinkType`), which outlasts this call.
    let this = unsafe { ArcBorrow::from_raw(ctx.cast::<T>()) };
    T::unregistered(this);
}
