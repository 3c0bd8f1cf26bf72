// SPDX-License-Identifier: GPL-2.0

//! UDP tunnel sockets: a kernel UDP socket whose datagrams go to a driver,
//! and IPv4 or IPv6 datagrams the driver builds whole.
//!
//! C headers: [`include/net/udp_tunnel.h`](srctree/include/net/udp_tunnel.h),
//! [`include/net/route.h`](srctree/include/net/route.h),
//! [`include/linux/skbuff.h`](srctree/include/linux/skbuff.h).
//!
//! A [`UdpTunnel`] binds a UDP port of a network namespace, on its IPv4
//! or its IPv6 addresses ([`Family`]), and hands every datagram that
//! arrives on it to its [`Receiver`], as an owned [`Skb`], in softirq
//! context (the socket's `encap_rcv` hook, as `rdma_rxe` and VXLAN use
//! it). To send, the caller asks for a routed, empty datagram
//! ([`UdpTunnel::alloc_ipv4`], [`UdpTunnel::alloc_ipv6`]), writes every
//! byte of it from the IP header on, and sends it ([`TxSkb::send`]) with
//! `ip_local_out()` or `ip6_local_out()`, which resolve the neighbour and
//! queue it on the route's netdev.
//!
//! The steps are inline functions and macros in C, so they live in
//! `rust/helpers/udp_tunnel.c`. All `unsafe` code of the UDP tunnel
//! support is in this file.

use crate::net_ns::NetNs;
use core::{cell::Cell, ptr::NonNull};
use kernel::{
    ffi::{c_int, c_void},
    prelude::*,
    sync::{Arc, ArcBorrow},
};

mod ffi {
    use kernel::ffi::{c_int, c_uint, c_void};

    pub(super) type RcvFn = unsafe extern "C" fn(ctx: *const c_void, skb: *mut c_void);

    extern "C" {
        pub(super) fn rust_udp_tunnel_create(
            net: *mut c_void,
            ipv6: bool,
            mc_loop: bool,
            port: u16,
            ctx: *const c_void,
            rcv: RcvFn,
            err: *mut c_int,
        ) -> *mut c_void;
        pub(super) fn rust_udp_tunnel_release(t: *mut c_void);
        pub(super) fn rust_netdev_mtu(net: *mut c_void, ifindex: c_int) -> c_uint;
        pub(super) fn rust_ipv4_ifindex(net: *mut c_void, addr: u32) -> c_int;
        pub(super) fn rust_udp_tunnel_alloc4(
            t: *mut c_void,
            oif: c_int,
            saddr: u32,
            daddr: u32,
            len: u32,
            ip_len: u32,
            data: *mut *mut u8,
            err: *mut c_int,
        ) -> *mut c_void;
        pub(super) fn rust_ipv6_ifindex(net: *mut c_void, addr: *const [u8; 16]) -> c_int;
        pub(super) fn rust_udp_tunnel_alloc6(
            t: *mut c_void,
            oif: c_int,
            saddr: *const [u8; 16],
            daddr: *const [u8; 16],
            len: u32,
            ip_len: u32,
            data: *mut *mut u8,
            err: *mut c_int,
        ) -> *mut c_void;
        pub(super) fn rust_udp_tunnel_xmit(t: *mut c_void, skb: *mut c_void, ipv6: bool) -> c_int;
        pub(super) fn rust_skb_network_bytes(skb: *mut c_void, len: *mut u32) -> *const u8;
        pub(super) fn rust_skb_udp_bytes(
            skb: *const c_void,
            offset: u32,
            to: *mut c_void,
            len: u32,
        ) -> c_int;
        pub(super) fn rust_skb_free(skb: *mut c_void, consumed: bool);
    }
}

/// What a tunnel hands its datagrams to.
pub trait Receiver: Send + Sync {
    /// Takes one received datagram. Called in softirq context: it must
    /// not sleep.
    fn receive(this: ArcBorrow<'_, Self>, skb: Skb);
}

/// A received datagram, owned: dropping it frees it as a drop.
pub struct Skb(NonNull<c_void>);

// SAFETY: An skb the receiver owns alone may be freed or read on any
// thread; nothing else refers to it.
unsafe impl Send for Skb {}

/// A received datagram made linear: its bytes stay where they are.
///
/// It may be shared (an `Arc`) with the copies of its bytes still in
/// flight; whoever lets it go last frees it, as delivered once
/// [`Self::mark_delivered`] was called.
pub struct LinearSkb {
    raw: NonNull<c_void>,
    delivered: Cell<bool>,
}

impl Skb {
    /// Copies the bytes at `offset` from the start of the UDP header into
    /// `out`, wherever the skb keeps them (softirq context too); `false`
    /// if the datagram is shorter.
    pub fn udp_bytes(&self, offset: u32, out: &mut [u8]) -> bool {
        let Ok(len) = u32::try_from(out.len()) else {
            return false;
        };
        // SAFETY: `self` owns the skb; `out` is `len` writable bytes.
        unsafe {
            ffi::rust_skb_udp_bytes(self.0.as_ptr(), offset, out.as_mut_ptr().cast(), len) == 0
        }
    }

    /// Makes the datagram linear (its bytes in one place), for
    /// [`LinearSkb::network_bytes`]; `ENOMEM` if it could not be.
    pub fn linearize(self) -> core::result::Result<LinearSkb, Self> {
        let mut len = 0u32;
        // SAFETY: `self` owns the skb, and no slice of its bytes exists.
        let p = unsafe { ffi::rust_skb_network_bytes(self.0.as_ptr(), &mut len) };
        if p.is_null() {
            return Err(self);
        }
        let raw = self.0;
        core::mem::forget(self);
        Ok(LinearSkb {
            raw,
            delivered: Cell::new(false),
        })
    }
}

impl LinearSkb {
    /// The datagram from its IP header to its end.
    pub fn network_bytes(&self) -> &[u8] {
        let mut len = 0u32;
        // SAFETY: The skb is linear already (the helper does not move its
        // bytes again) and owned by `self`.
        let p = unsafe { ffi::rust_skb_network_bytes(self.raw.as_ptr(), &mut len) };
        if p.is_null() {
            return &[];
        }
        // SAFETY: The helper returned `len` bytes of the skb's linear data,
        // which stay put and unwritten while `self` lives.
        unsafe { core::slice::from_raw_parts(p, len as usize) }
    }

    /// Frees the datagram as delivered (not counted as a drop) when it
    /// goes.
    pub fn mark_delivered(&self) {
        self.delivered.set(true);
    }
}

impl Drop for LinearSkb {
    fn drop(&mut self) {
        // SAFETY: `self` owns the skb.
        unsafe { ffi::rust_skb_free(self.raw.as_ptr(), self.delivered.get()) };
    }
}

impl Drop for Skb {
    fn drop(&mut self) {
        // SAFETY: `self` owns the skb.
        unsafe { ffi::rust_skb_free(self.0.as_ptr(), false) };
    }
}

/// The IP version of a tunnel's socket and datagrams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6 (the socket takes IPv6 datagrams only).
    V6,
}

/// A UDP socket of one network namespace and one [`Family`] whose
/// datagrams go to a `T`.
pub struct UdpTunnel<T: Receiver> {
    raw: NonNull<c_void>,
    family: Family,
    rx: Arc<T>,
    /// Held while the socket is open (a kernel socket holds none); dropped
    /// after it is released.
    net: NetNs,
}

// SAFETY: The C tunnel is used from any thread: sending takes no state of
// the tunnel but its socket, and the receiver is `Send + Sync`.
unsafe impl<T: Receiver> Send for UdpTunnel<T> {}
// SAFETY: As above; every method takes `&self` and the C side serializes.
unsafe impl<T: Receiver> Sync for UdpTunnel<T> {}

/// The C receive hook's callback.
///
/// # Safety
///
/// `ctx` is `Arc::as_ptr` of the receiver of a live tunnel, and `skb` an skb
/// the callee owns from now on.
unsafe extern "C" fn rcv_callback<T: Receiver>(ctx: *const c_void, skb: *mut c_void) {
    // SAFETY: `ctx` is `Arc::as_ptr` of the `Arc<T>` the tunnel holds
    // until after the socket is released and a grace period has passed
    // (no callback runs after that), so the count is not zero meanwhile;
    // the tunnel never makes it a `UniqueArc`.
    let rx = unsafe { ArcBorrow::<T>::from_raw(ctx.cast::<T>()) };
    if let Some(skb) = NonNull::new(skb) {
        T::receive(rx, Skb(skb));
    }
}

impl<T: Receiver> UdpTunnel<T> {
    /// Binds UDP `port` on every address of `family` of namespace `net`;
    /// `EADDRINUSE` when another socket there has it, `EAFNOSUPPORT` for
    /// IPv6 on a kernel without it. With `mc_loop`, a datagram sent to a
    /// multicast group this host is a member of comes back to `rx` too
    /// (a tunnel's socket is otherwise made without multicast loopback).
    pub fn new(net: &NetNs, family: Family, mc_loop: bool, port: u16, rx: Arc<T>) -> Result<Self> {
        let mut err: c_int = 0;
        let ctx = Arc::as_ptr(&rx).cast::<c_void>();
        let net = net.clone();
        // SAFETY: `ctx` stays valid for as long as the returned tunnel
        // lives (it keeps `rx`), and `rcv_callback::<T>` reads it as a `T`;
        // the tunnel holds `net` until after the socket is released.
        let raw = unsafe {
            ffi::rust_udp_tunnel_create(
                net.as_raw(),
                family == Family::V6,
                mc_loop,
                port,
                ctx,
                rcv_callback::<T>,
                &mut err,
            )
        };
        match NonNull::new(raw) {
            Some(raw) => Ok(Self {
                raw,
                family,
                rx,
                net,
            }),
            None => Err(Error::from_errno(err)),
        }
    }

    /// The namespace of the socket.
    pub fn net(&self) -> &NetNs {
        &self.net
    }

    /// The receiver.
    pub fn receiver(&self) -> &Arc<T> {
        &self.rx
    }

    /// A routed IPv4 datagram of `len` bytes from `saddr` to `daddr` out of
    /// the netdev of index `oif` (0: any), to be filled from the IP header
    /// on; the transport header starts `ip_len` bytes in. Process context.
    pub fn alloc_ipv4(
        &self,
        oif: i32,
        saddr: [u8; 4],
        daddr: [u8; 4],
        len: usize,
        ip_len: usize,
    ) -> Result<TxSkb<'_, T>> {
        let (len32, ip_len) = self.lengths(Family::V4, len, ip_len)?;
        self.built(len, |data, err| {
            // SAFETY: The tunnel is live and of IPv4; the addresses are
            // passed in network order as the C side expects.
            unsafe {
                ffi::rust_udp_tunnel_alloc4(
                    self.raw.as_ptr(),
                    oif,
                    u32::from_ne_bytes(saddr),
                    u32::from_ne_bytes(daddr),
                    len32,
                    ip_len,
                    data,
                    err,
                )
            }
        })
    }

    /// As [`Self::alloc_ipv4`], an IPv6 datagram from `saddr` to `daddr`
    /// on a tunnel of [`Family::V6`] (`EAFNOSUPPORT` on another).
    pub fn alloc_ipv6(
        &self,
        oif: i32,
        saddr: &[u8; 16],
        daddr: &[u8; 16],
        len: usize,
        ip_len: usize,
    ) -> Result<TxSkb<'_, T>> {
        let (len32, ip_len) = self.lengths(Family::V6, len, ip_len)?;
        self.built(len, |data, err| {
            // SAFETY: The tunnel is live and of IPv6; the addresses are 16
            // readable bytes each, in network order.
            unsafe {
                ffi::rust_udp_tunnel_alloc6(
                    self.raw.as_ptr(),
                    oif,
                    saddr,
                    daddr,
                    len32,
                    ip_len,
                    data,
                    err,
                )
            }
        })
    }

    /// `len` and `ip_len` for the C side, checked: `EAFNOSUPPORT` if the
    /// tunnel is not of `family`.
    fn lengths(&self, family: Family, len: usize, ip_len: usize) -> Result<(u32, u32)> {
        if self.family != family {
            return Err(EAFNOSUPPORT);
        }
        let len32 = u32::try_from(len).map_err(|_| EMSGSIZE)?;
        let ip_len = u32::try_from(ip_len).map_err(|_| EINVAL)?;
        if ip_len > len32 {
            return Err(EINVAL);
        }
        Ok((len32, ip_len))
    }

    /// The datagram `alloc` made: `alloc` returns the skb and sets its
    /// data pointer, or returns null with an errno set.
    fn built(
        &self,
        len: usize,
        alloc: impl FnOnce(*mut *mut u8, *mut c_int) -> *mut c_void,
    ) -> Result<TxSkb<'_, T>> {
        let mut data: *mut u8 = core::ptr::null_mut();
        let mut err: c_int = 0;
        let skb = alloc(&mut data, &mut err);
        match (NonNull::new(skb), NonNull::new(data)) {
            (Some(skb), Some(data)) => Ok(TxSkb {
                skb,
                data,
                len,
                tunnel: self,
            }),
            _ if err < 0 => Err(Error::from_errno(err)),
            _ => Err(ENOMEM),
        }
    }
}

impl<T: Receiver> Drop for UdpTunnel<T> {
    fn drop(&mut self) {
        // SAFETY: The tunnel is released once; the helper returns when no
        // callback can run, so `rx` may go after it.
        unsafe { ffi::rust_udp_tunnel_release(self.raw.as_ptr()) };
    }
}

/// A datagram being built for sending, its bytes the caller's to write.
pub struct TxSkb<'a, T: Receiver> {
    skb: NonNull<c_void>,
    data: NonNull<u8>,
    len: usize,
    tunnel: &'a UdpTunnel<T>,
}

impl<T: Receiver> TxSkb<'_, T> {
    /// The datagram's bytes, from the IP header on (uninitialised until
    /// written: zeroed by nobody).
    pub fn data(&mut self) -> &mut [u8] {
        // SAFETY: `data` points at `len` bytes of the skb's linear area,
        // owned by `self` alone until it is sent or dropped; `u8` has no
        // invalid values.
        unsafe { core::slice::from_raw_parts_mut(self.data.as_ptr(), self.len) }
    }

    /// Sends the datagram; the route's netdev may still drop it.
    pub fn send(self) -> Result {
        let (skb, t) = (self.skb.as_ptr(), self.tunnel.raw.as_ptr());
        let ipv6 = self.tunnel.family == Family::V6;
        core::mem::forget(self);
        // SAFETY: The skb came from this tunnel's `alloc_ipv4` or
        // `alloc_ipv6` (of its family) and is owned here; the helper
        // consumes it in every case.
        let ret = unsafe { ffi::rust_udp_tunnel_xmit(t, skb, ipv6) };
        match ret {
            // NET_XMIT_CN (2) is a congestion notice, not a failure.
            0 | 2 => Ok(()),
            e if e < 0 => Err(Error::from_errno(e)),
            _ => Err(ENOBUFS),
        }
    }
}

impl<T: Receiver> Drop for TxSkb<'_, T> {
    fn drop(&mut self) {
        // SAFETY: An unsent skb of `alloc_ipv4`, owned here.
        unsafe { ffi::rust_skb_free(self.skb.as_ptr(), false) };
    }
}

/// The interface index of the netdev of `net` that has IPv4 address
/// `addr` (network order bytes), if any.
pub fn ipv4_ifindex(net: &NetNs, addr: [u8; 4]) -> Option<i32> {
    // SAFETY: `net` is held; the helper only reads its address tables
    // under RCU.
    let ifindex = unsafe { ffi::rust_ipv4_ifindex(net.as_raw(), u32::from_ne_bytes(addr)) };
    (ifindex > 0).then_some(ifindex)
}

/// The interface index of the netdev of `net` that has IPv6 address
/// `addr`, if any.
pub fn ipv6_ifindex(net: &NetNs, addr: &[u8; 16]) -> Option<i32> {
    // SAFETY: `net` is held; the helper only reads its address tables
    // under RCU; `addr` is 16 readable bytes.
    let ifindex = unsafe { ffi::rust_ipv6_ifindex(net.as_raw(), addr) };
    (ifindex > 0).then_some(ifindex)
}

/// The MTU of `net`'s netdev of index `ifindex`, if there is one.
pub fn netdev_mtu(net: &NetNs, ifindex: i32) -> Option<u32> {
    // SAFETY: `net` is held; a lookup by number, nothing is kept.
    let mtu = unsafe { ffi::rust_netdev_mtu(net.as_raw(), ifindex) };
    (mtu != 0).then_some(mtu)
}
