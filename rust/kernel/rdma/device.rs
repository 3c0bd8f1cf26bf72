// SPDX-License-Identifier: GPL-2.0

//! Registering an RDMA device with ib_core, and the verbs it answers.
//!
//! # Object lifetimes
//!
//! ib_core allocates each object's C container; the abstraction stores in
//! it an [`Arc`] of the driver's value, created by the driver's `alloc_*`,
//! `create_*` or `reg_*` method and given back to the driver's
//! `dealloc_*`, `destroy_*` or `dereg_*` method, after which the C side no
//! longer refers to it. ib_core guarantees the order that verbs need: a PD
//! outlives its MRs and QPs, a CQ its QPs, and no object is used after its
//! destroy returned. Unregistering destroys every user object first, so
//! the driver's value outlives them all.

use super::{
    cq::CqNotifier,
    ffi,
    srq::SrqNotifier,
    types::{Caps, QpAttr, QpInit, RawRecvWr, RawSendWr, RecvWr, SendWr, Sge, SrqAttr, Wc},
    user_ring::UserData,
};
use crate::net_ns::NetNs;
use core::ptr::NonNull;
use kernel::{
    ffi::{c_int, c_void},
    prelude::*,
    str::CStr,
    sync::{Arc, ArcBorrow},
};

/// The verbs of an RDMA device, called by ib_core (through uverbs).
///
/// Every method may run concurrently with the others, in process context,
/// except [`Driver::poll_cq`], [`Driver::req_notify_cq`],
/// [`Driver::post_send`] and [`Driver::post_recv`], which must not sleep.
pub trait Driver: Send + Sync + Sized + 'static {
    /// A protection domain.
    type Pd: Send + Sync;
    /// A completion queue.
    type Cq: Send + Sync;
    /// A memory region.
    type Mr: Send + Sync;
    /// What a deregistration hands back, dropped only after the
    /// abstraction dropped its references to the region (so the region's
    /// own drop, if it is the last, happens while it lives).
    type MrRelease;
    /// A queue pair.
    type Qp: Send + Sync;
    /// A shared receive queue.
    type Srq: Send + Sync;

    /// Allocates a protection domain.
    fn alloc_pd(&self) -> Result<Arc<Self::Pd>>;

    /// Frees a protection domain (it has no MR or QP left).
    fn dealloc_pd(&self, pd: Arc<Self::Pd>);

    /// Creates a CQ of at least `entries` entries; `notifier` raises its
    /// completion event. `udata` is the driver's part of a user's command
    /// (`None` for a kernel consumer): the driver may map the CQ's ring
    /// into the process and say where in its response.
    fn create_cq(
        &self,
        entries: u32,
        notifier: Arc<CqNotifier>,
        udata: Option<UserData<'_>>,
    ) -> Result<Arc<Self::Cq>>;

    /// Destroys a CQ (no QP uses it any more; its notifier is revoked).
    fn destroy_cq(&self, cq: Arc<Self::Cq>);

    /// Moves up to `out.len()` completions out of `cq`; returns how many.
    fn poll_cq(cq: &Self::Cq, out: &mut [Wc]) -> usize;

    /// Arms `cq` for its next (or next solicited) completion. With
    /// `REPORT_MISSED_EVENTS`, returns 1 if completions are waiting.
    fn req_notify_cq(cq: &Self::Cq, flags: u32) -> i32;

    /// Gives `cq` room for `entries` completions, keeping those it holds
    /// (`EINVAL` if they would not fit, or above the device's limit);
    /// `udata` as for [`Self::create_cq`].
    fn resize_cq(cq: &Self::Cq, entries: u32, udata: Option<UserData<'_>>) -> Result;

    /// Registers `length` bytes of the caller's memory at `start`, which
    /// work requests address as `iova`, with `access` rights. Returns the
    /// region and its local and remote keys.
    fn reg_user_mr(
        &self,
        pd: &Arc<Self::Pd>,
        start: u64,
        length: u64,
        iova: u64,
        access: u32,
    ) -> Result<(Arc<Self::Mr>, u32, u32)>;

    /// Deregisters a memory region. On success the abstraction drops its
    /// references, then the returned value; on error the region stays
    /// registered.
    fn dereg_mr(&self, mr: &Arc<Self::Mr>) -> Result<Self::MrRelease>;

    /// Creates a QP on `pd` with its CQs, receiving from `srq` if it has
    /// one; lowers `init`'s capabilities to what it grants. Returns the QP
    /// and its number.
    fn create_qp(
        &self,
        pd: &Arc<Self::Pd>,
        send_cq: &Arc<Self::Cq>,
        recv_cq: &Arc<Self::Cq>,
        srq: Option<&Arc<Self::Srq>>,
        init: &mut QpInit,
    ) -> Result<(Arc<Self::Qp>, u32)>;

    /// Applies the attributes of `attr` that `mask` selects.
    fn modify_qp(qp: ArcBorrow<'_, Self::Qp>, attr: &QpAttr, mask: u32) -> Result;

    /// Reports the QP's attributes.
    fn query_qp(qp: &Self::Qp, out: &mut QpAttr);

    /// Destroys a QP. On success the abstraction drops its reference.
    fn destroy_qp(&self, qp: &Arc<Self::Qp>) -> Result;

    /// Queues one send work request.
    fn post_send(qp: ArcBorrow<'_, Self::Qp>, wr: &SendWr<'_>) -> Result;

    /// Queues one receive work request.
    fn post_recv(qp: ArcBorrow<'_, Self::Qp>, wr: &RecvWr<'_>) -> Result;

    /// Creates a shared receive queue on `pd` (user space's only); lowers
    /// `attr` to what it grants. `notifier` raises its limit event.
    fn create_srq(
        &self,
        pd: &Arc<Self::Pd>,
        attr: &mut SrqAttr,
        notifier: Arc<SrqNotifier>,
    ) -> Result<Arc<Self::Srq>>;

    /// Resizes the SRQ or arms its limit, as `mask` (`srq_mask`) selects.
    fn modify_srq(srq: &Self::Srq, attr: &SrqAttr, mask: u32) -> Result;

    /// Reports the SRQ's attributes.
    fn query_srq(srq: &Self::Srq) -> SrqAttr;

    /// Destroys an SRQ (no QP uses it any more; its notifier is revoked).
    fn destroy_srq(&self, srq: Arc<Self::Srq>);

    /// Queues one receive work request on the SRQ. Must not sleep.
    fn post_srq_recv(srq: &Self::Srq, wr: &RecvWr<'_>) -> Result;

    /// Attaches the UD QP `qp` to the multicast group `mgid` (`attach`),
    /// or detaches it: the datagrams sent to the group reach it. ib_core
    /// checked the QP's type and that `mgid` is a multicast GID; a device
    /// without multicast keeps the default, `EOPNOTSUPP`.
    fn mcast(_qp: ArcBorrow<'_, Self::Qp>, _mgid: &[u8; 16], _attach: bool) -> Result {
        Err(EOPNOTSUPP)
    }

    /// The names of the port's counters that `rdma statistic` shows (none:
    /// no counters).
    const HW_STATS: &'static [&'static CStr] = &[];

    /// Reads the counters [`Self::HW_STATS`] names into `out`, in that
    /// order. Must not sleep.
    fn hw_stats(&self, _out: &mut [u64]) {}
}

/// Whether ib_core would allow `cur` → `next` for a QP of `qp_type` with
/// attribute `mask` (`ib_modify_qp_is_ok`: the verbs state machine and the
/// attributes each transition requires and allows).
pub fn modify_qp_is_ok(cur: u32, next: u32, qp_type: u32, mask: u32) -> bool {
    // SAFETY: Plain values; the helper range-checks them.
    unsafe { ffi::rust_ib_modify_qp_is_ok(cur, next, qp_type, mask) }
}

/// A registered RDMA device.
///
/// Dropping it unregisters the device, which first destroys every object
/// its users still hold, then lets it go.
///
/// ib_core deallocates a device at its first unregistration, which
/// `rdma link delete` may start for a removable one ([`Self::new_removable`]);
/// the registration holds a reference to the device's memory, so that
/// asking and unregistering it stay sound until it is dropped.
///
/// # Invariants
///
/// `raw` is a `struct ib_device` from `rust_ib_device_alloc`, registered by
/// `rust_ib_device_register` (which took the reference this value owns),
/// whose context is `driver`'s pointer; no op is called after its
/// unregistration, which happens in `drop` at the latest, and `driver`'s
/// reference is released only after that.
pub struct Registration<T: Driver> {
    raw: NonNull<c_void>,
    driver: Arc<T>,
}

// SAFETY: The registration is a handle; ib_core may be called from any
// thread.
unsafe impl<T: Driver> Send for Registration<T> {}
// SAFETY: `&Registration` allows no mutation.
unsafe impl<T: Driver> Sync for Registration<T> {}

impl<T: Driver> Registration<T> {
    const OPS: ffi::RawOps = ffi::RawOps {
        alloc_pd: alloc_pd::<T>,
        dealloc_pd: dealloc_pd::<T>,
        create_cq: create_cq::<T>,
        destroy_cq: destroy_cq::<T>,
        poll_cq: poll_cq::<T>,
        req_notify_cq: req_notify_cq::<T>,
        resize_cq: resize_cq::<T>,
        reg_user_mr: reg_user_mr::<T>,
        dereg_mr: dereg_mr::<T>,
        create_qp: create_qp::<T>,
        modify_qp: modify_qp::<T>,
        query_qp: query_qp::<T>,
        destroy_qp: destroy_qp::<T>,
        post_send: post_send::<T>,
        post_recv: post_recv::<T>,
        create_srq: create_srq::<T>,
        modify_srq: modify_srq::<T>,
        query_srq: query_srq::<T>,
        destroy_srq: destroy_srq::<T>,
        post_srq_recv: post_srq_recv::<T>,
        hw_stats: hw_stats::<T>,
        mcast: mcast::<T>,
    };

    /// Registers `driver` as an RDMA device named after `pattern` (e.g.
    /// `c"plx_rdma%d"`) with the limits `caps`, its port on the netdev of
    /// interface index `ifindex` in `net` (`ENODEV` if there is none).
    pub fn new(
        driver: Arc<T>,
        caps: &Caps,
        pattern: &CStr,
        net: &NetNs,
        ifindex: i32,
    ) -> Result<Self> {
        Self::register(driver, caps, pattern, net, ifindex, false)
    }

    /// As [`Self::new`], for a device that `rdma link delete` may
    /// unregister: ib_core then unregisters it at once (destroying every
    /// object), and the [`super::link::NewLink::unregistered`] of the
    /// module's link type is told, so that the driver drops this
    /// registration, which then frees it ([`Self::is_live`] is `false`).
    pub fn new_removable(
        driver: Arc<T>,
        caps: &Caps,
        name: &CStr,
        net: &NetNs,
        ifindex: i32,
    ) -> Result<Self> {
        Self::register(driver, caps, name, net, ifindex, true)
    }

    fn register(
        driver: Arc<T>,
        caps: &Caps,
        pattern: &CStr,
        net: &NetNs,
        ifindex: i32,
        removable: bool,
    ) -> Result<Self> {
        let ctx = Arc::as_ptr(&driver).cast::<c_void>();
        // SAFETY: `OPS` is a promoted constant with static lifetime; `ctx`
        // stays valid while the device exists (kept by `driver` below);
        // `caps` is copied.
        let raw = unsafe { ffi::rust_ib_device_alloc(&Self::OPS, ctx, caps) };
        let raw = NonNull::new(raw).ok_or(ENOMEM)?;
        if let Err(e) = Self::set_stats(raw) {
            // SAFETY: Not registered; the device is ours to free.
            unsafe { ffi::rust_ib_device_dealloc(raw.as_ptr()) };
            return Err(e);
        }
        if removable {
            // SAFETY: `raw` is a new, unregistered device.
            unsafe { ffi::rust_ib_device_allow_user_unreg(raw.as_ptr()) };
        }
        // SAFETY: `raw` is a new, unregistered device; `pattern` is a valid
        // C string for the call; `net` is held.
        let ret = unsafe {
            ffi::rust_ib_device_register(raw.as_ptr(), pattern.as_char_ptr(), net.as_raw(), ifindex)
        };
        if ret != 0 {
            // SAFETY: Registration failed; the device is ours to free.
            unsafe { ffi::rust_ib_device_dealloc(raw.as_ptr()) };
            return Err(Error::from_errno(ret));
        }
        // INVARIANT: Registered, with `driver` as its context.
        Ok(Self { raw, driver })
    }

    /// Gives the unregistered device `raw` the driver's counters.
    fn set_stats(raw: NonNull<c_void>) -> Result {
        if T::HW_STATS.is_empty() {
            return Ok(());
        }
        let mut names = KVec::with_capacity(T::HW_STATS.len(), GFP_KERNEL)?;
        for n in T::HW_STATS {
            names.push(n.as_char_ptr(), GFP_KERNEL)?;
        }
        let n = u32::try_from(names.len()).map_err(|_| EINVAL)?;
        // SAFETY: `raw` is unregistered; `names` holds `n` pointers for the
        // call, to `'static` strings the device may keep.
        let ret = unsafe { ffi::rust_ib_device_set_stats(raw.as_ptr(), names.as_ptr(), n) };
        if ret != 0 {
            return Err(Error::from_errno(ret));
        }
        Ok(())
    }

    /// The device's name (e.g. `plx_rdma0`).
    pub fn name(&self) -> &CStr {
        // SAFETY: The device is registered (type invariant); its name lives
        // as long as it does, which outlives the borrow of `self`.
        unsafe { CStr::from_char_ptr(ffi::rust_ib_device_name(self.raw.as_ptr())) }
    }

    /// The driver.
    pub fn driver(&self) -> &Arc<T> {
        &self.driver
    }

    /// Whether the driver should keep the device: `false` once something
    /// else (`rdma link delete`) began unregistering it, or the module's
    /// link type is going away.
    pub fn is_live(&self) -> bool {
        // SAFETY: The device's memory is held until `drop` (type
        // invariant); an unregistered one may still be asked.
        unsafe { ffi::rust_ib_device_is_live(self.raw.as_ptr()) }
    }
}

impl<T: Driver> Drop for Registration<T> {
    fn drop(&mut self) {
        // SAFETY: The device's memory is held (type invariant).
        // Unregistering destroys every user object through the ops and
        // calls none afterwards (or waits for an unregistration begun
        // elsewhere); then the reference goes, and `driver` is released
        // after this body.
        unsafe {
            ffi::rust_ib_device_unregister(self.raw.as_ptr());
            ffi::rust_ib_device_put(self.raw.as_ptr());
        }
    }
}

/// A driver value held by a C object: `Arc::into_raw` of a `V`.
fn into_priv<V>(v: Arc<V>) -> *mut c_void {
    Arc::into_raw(v).cast_mut().cast::<c_void>()
}

/// # Safety
///
/// `p` came from [`into_priv`] for a `V` and its reference is still held
/// by the C object, which lives for `'a`.
unsafe fn borrow_priv<'a, V>(p: *mut c_void) -> &'a V {
    // SAFETY: Per the function's contract.
    unsafe { &*p.cast::<V>() }
}

/// Borrows the `Arc` a C object holds.
///
/// # Safety
///
/// As for [`borrow_priv`].
unsafe fn arc_priv<'a, V>(p: *mut c_void) -> ArcBorrow<'a, V> {
    // SAFETY: Per the function's contract, `p` is a live `Arc<V>`
    // reference that outlives `'a`.
    unsafe { ArcBorrow::from_raw(p.cast::<V>()) }
}

/// Clones the reference a C object holds, without giving it up.
///
/// # Safety
///
/// As for [`borrow_priv`].
unsafe fn clone_priv<V>(p: *mut c_void) -> Arc<V> {
    // SAFETY: Per the function's contract, `p` is a live `Arc<V>`
    // reference; `ManuallyDrop` keeps the C object's reference.
    let held = core::mem::ManuallyDrop::new(unsafe { Arc::from_raw(p.cast::<V>()) });
    (*held).clone()
}

/// Takes back the reference a C object held.
///
/// # Safety
///
/// `p` came from [`into_priv`] for a `V`; the C object gives it up (this is
/// its destruction) and never uses it again.
unsafe fn take_priv<V>(p: *mut c_void) -> Arc<V> {
    // SAFETY: Per the function's contract.
    unsafe { Arc::from_raw(p.cast::<V>()) }
}

/// # Safety
///
/// `ctx` is the context of a device registered by [`Registration::new`]
/// for a `T`, which is alive for `'a`.
unsafe fn driver<'a, T: Driver>(ctx: *const c_void) -> &'a T {
    // SAFETY: Per the function's contract.
    unsafe { &*ctx.cast::<T>() }
}

fn errno(r: Result) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// `sgl` points to `n` initialized entries valid for `'a` (or `n` is 0).
unsafe fn sges<'a>(sgl: *const Sge, n: u32) -> &'a [Sge] {
    if n == 0 || sgl.is_null() {
        return &[];
    }
    // SAFETY: Per the function's contract.
    unsafe { core::slice::from_raw_parts(sgl, n as usize) }
}

// The trampolines below are called by the C glue only, with the contexts
// and object pointers it was given: a device context from
// `Registration::new`, object pointers from `into_priv` that the C
// containers hold until the matching destroy.

/// # Safety
///
/// See the comment above: called by the C glue with a live device context.
unsafe extern "C" fn alloc_pd<T: Driver>(ctx: *const c_void, out: *mut *mut c_void) -> c_int {
    // SAFETY: A live device context (see above).
    match unsafe { driver::<T>(ctx) }.alloc_pd() {
        Ok(pd) => {
            // SAFETY: `out` is the container's pointer slot.
            unsafe { *out = into_priv(pd) };
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the C glue with a live device context and the PD's pointer,
/// at its destruction.
unsafe extern "C" fn dealloc_pd<T: Driver>(ctx: *const c_void, pd: *mut c_void) {
    // SAFETY: The PD is destroyed: its reference comes back.
    let pd = unsafe { take_priv::<T::Pd>(pd) };
    // SAFETY: A live device context.
    unsafe { driver::<T>(ctx) }.dealloc_pd(pd)
}

/// What a CQ's container holds: the driver's CQ and its event notifier,
/// which is revoked before the CQ is destroyed.
struct CqEntry<T: Driver> {
    cq: Arc<T::Cq>,
    notifier: Arc<CqNotifier>,
}

/// # Safety
///
/// `p` is a CQ container's pointer (a `KBox<CqEntry<T>>`), alive for `'a`.
unsafe fn cq_entry<'a, T: Driver>(p: *mut c_void) -> &'a CqEntry<T> {
    // SAFETY: Per the function's contract.
    unsafe { &*p.cast::<CqEntry<T>>() }
}

/// # Safety
///
/// Called by the C glue with a live device context and the new `ib_cq`.
unsafe extern "C" fn create_cq<T: Driver>(
    ctx: *const c_void,
    ibcq: *mut c_void,
    entries: u32,
    udata: *mut c_void,
    out: *mut *mut c_void,
) -> c_int {
    let Some(ibcq) = NonNull::new(ibcq) else {
        return EINVAL.to_errno();
    };
    let notifier = match CqNotifier::new(ibcq) {
        Ok(n) => n,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: A live device context.
    let drv = unsafe { driver::<T>(ctx) };
    // SAFETY: The glue passes the command's `rust_ib_cmd`, or null, for
    // this call.
    let udata = unsafe { UserData::from_raw(udata) };
    let cq = match drv.create_cq(entries, notifier.clone(), udata) {
        Ok(cq) => cq,
        Err(e) => return e.to_errno(),
    };
    match KBox::new(CqEntry::<T> { cq, notifier }, GFP_KERNEL) {
        Ok(entry) => {
            // SAFETY: `out` is the container's pointer slot.
            unsafe { *out = KBox::into_raw(entry).cast::<c_void>() };
            0
        }
        Err(_) => ENOMEM.to_errno(),
    }
}

/// # Safety
///
/// Called by the C glue with a live device context and the CQ's pointer,
/// at its destruction.
unsafe extern "C" fn destroy_cq<T: Driver>(ctx: *const c_void, cq: *mut c_void) {
    // SAFETY: The CQ is destroyed: its entry comes back.
    let entry = unsafe { KBox::from_raw(cq.cast::<CqEntry<T>>()) };
    entry.notifier.revoke();
    let CqEntry { cq, .. } = KBox::into_inner(entry);
    // SAFETY: A live device context.
    unsafe { driver::<T>(ctx) }.destroy_cq(cq)
}

/// # Safety
///
/// Called by the C glue with a live CQ pointer and room for `n` entries.
unsafe extern "C" fn poll_cq<T: Driver>(cq: *mut c_void, wc: *mut Wc, n: u32) -> c_int {
    if wc.is_null() || n == 0 {
        return 0;
    }
    // SAFETY: The glue's zero-initialised array of `n` entries (zero is a
    // valid `Wc`), ours for the call.
    let out = unsafe { core::slice::from_raw_parts_mut(wc, n as usize) };
    // SAFETY: A live CQ.
    let got = T::poll_cq(&unsafe { cq_entry::<T>(cq) }.cq, out);
    got.min(n as usize) as c_int
}

/// # Safety
///
/// Called by the C glue with a live CQ pointer and the command's
/// `rust_ib_cmd` (or null).
unsafe extern "C" fn resize_cq<T: Driver>(
    cq: *mut c_void,
    entries: u32,
    udata: *mut c_void,
) -> c_int {
    // SAFETY: The command's `rust_ib_cmd`, or null, for this call.
    let udata = unsafe { UserData::from_raw(udata) };
    // SAFETY: A live CQ.
    let entry = unsafe { cq_entry::<T>(cq) };
    errno(T::resize_cq(&entry.cq, entries, udata))
}

/// # Safety
///
/// Called by the C glue with a live CQ pointer.
unsafe extern "C" fn req_notify_cq<T: Driver>(cq: *mut c_void, flags: u32) -> c_int {
    // SAFETY: A live CQ.
    T::req_notify_cq(&unsafe { cq_entry::<T>(cq) }.cq, flags)
}

/// # Safety
///
/// Called by the C glue with a live device context and PD pointer.
#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn reg_user_mr<T: Driver>(
    ctx: *const c_void,
    pd: *mut c_void,
    start: u64,
    length: u64,
    iova: u64,
    access: u32,
    out: *mut *mut c_void,
    lkey: *mut u32,
    rkey: *mut u32,
) -> c_int {
    // SAFETY: A live PD, held by its container during the call.
    let pd = unsafe { clone_priv::<T::Pd>(pd) };
    // SAFETY: A live device context.
    match unsafe { driver::<T>(ctx) }.reg_user_mr(&pd, start, length, iova, access) {
        Ok((mr, l, r)) => {
            // SAFETY: The container's out slots.
            unsafe {
                *out = into_priv(mr);
                *lkey = l;
                *rkey = r;
            }
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the C glue with a live device context and MR pointer; on
/// success the container is freed.
unsafe extern "C" fn dereg_mr<T: Driver>(ctx: *const c_void, mr: *mut c_void) -> c_int {
    // SAFETY: A live MR, held by the container during the call.
    let this = unsafe { clone_priv::<T::Mr>(mr) };
    // SAFETY: A live device context.
    let r = unsafe { driver::<T>(ctx) }.dereg_mr(&this);
    drop(this);
    match r {
        Ok(release) => {
            // SAFETY: Deregistered: the container gives its reference up.
            drop(unsafe { take_priv::<T::Mr>(mr) });
            drop(release);
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the C glue with a live device context, PD and CQ pointers
/// (a CQ pointer may be NULL) and a live SRQ pointer or NULL.
unsafe extern "C" fn create_qp<T: Driver>(
    ctx: *const c_void,
    pd: *mut c_void,
    send_cq: *mut c_void,
    recv_cq: *mut c_void,
    srq: *mut c_void,
    init: *mut QpInit,
    out: *mut *mut c_void,
    qpn: *mut u32,
) -> c_int {
    if send_cq.is_null() || recv_cq.is_null() || init.is_null() {
        return EINVAL.to_errno();
    }
    // SAFETY: Live PD, CQs and SRQ, held by their containers during the
    // call.
    let (pd, scq, rcq, srq) = unsafe {
        (
            clone_priv::<T::Pd>(pd),
            cq_entry::<T>(send_cq).cq.clone(),
            cq_entry::<T>(recv_cq).cq.clone(),
            (!srq.is_null()).then(|| srq_entry::<T>(srq).srq.clone()),
        )
    };
    // SAFETY: The glue's init structure, ours for the call.
    let init = unsafe { &mut *init };
    // SAFETY: A live device context.
    match unsafe { driver::<T>(ctx) }.create_qp(&pd, &scq, &rcq, srq.as_ref(), init) {
        Ok((qp, n)) => {
            // SAFETY: The container's out slots.
            unsafe {
                *out = into_priv(qp);
                *qpn = n;
            }
            0
        }
        Err(e) => e.to_errno(),
    }
}

/// # Safety
///
/// Called by the C glue with a live QP pointer and attributes.
unsafe extern "C" fn modify_qp<T: Driver>(
    qp: *mut c_void,
    attr: *const QpAttr,
    mask: u32,
) -> c_int {
    // SAFETY: A live QP, held by its container during the call.
    let qp = unsafe { arc_priv::<T::Qp>(qp) };
    // SAFETY: The glue's attributes, valid for the call.
    let attr = unsafe { &*attr };
    errno(T::modify_qp(qp, attr, mask))
}

/// # Safety
///
/// Called by the C glue with a live QP pointer and room for the attributes.
unsafe extern "C" fn query_qp<T: Driver>(qp: *mut c_void, attr: *mut QpAttr) {
    // SAFETY: A live QP, held by its container during the call.
    let qp = unsafe { borrow_priv::<T::Qp>(qp) };
    // SAFETY: The glue's out structure, ours for the call.
    let attr = unsafe { &mut *attr };
    T::query_qp(qp, attr)
}

/// # Safety
///
/// Called by the C glue with a live device context and QP pointer; on
/// success the container is freed.
unsafe extern "C" fn destroy_qp<T: Driver>(ctx: *const c_void, qp: *mut c_void) -> c_int {
    // SAFETY: A live QP, held by the container during the call.
    let this = unsafe { clone_priv::<T::Qp>(qp) };
    // SAFETY: A live device context.
    let r = unsafe { driver::<T>(ctx) }.destroy_qp(&this);
    drop(this);
    if r.is_ok() {
        // SAFETY: Destroyed: the container gives its reference up.
        drop(unsafe { take_priv::<T::Qp>(qp) });
    }
    errno(r)
}

/// # Safety
///
/// Called by the C glue with a live QP pointer and a work request whose
/// gather list is valid for the call.
unsafe extern "C" fn post_send<T: Driver>(qp: *mut c_void, wr: *const RawSendWr) -> c_int {
    // SAFETY: The glue's request, valid for the call.
    let w = unsafe { &*wr };
    let wr = SendWr {
        wr_id: w.wr_id,
        opcode: w.opcode,
        send_flags: w.send_flags,
        imm_data: w.imm_data,
        remote_addr: w.remote_addr,
        rkey: w.rkey,
        compare_add: w.compare_add,
        swap: w.swap,
        // SAFETY: `sg_list` holds `num_sge` entries for the call.
        sges: unsafe { sges(w.sg_list, w.num_sge) },
        ud: (w.has_ud != 0).then_some(w.ud),
        kernel: w.kernel != 0,
    };
    // SAFETY: A live QP.
    errno(T::post_send(unsafe { arc_priv::<T::Qp>(qp) }, &wr))
}

/// # Safety
///
/// Called by the C glue with the device context and `n` counters at
/// `values`, valid for the call.
unsafe extern "C" fn hw_stats<T: Driver>(dev: *const c_void, values: *mut u64, n: u32) {
    // SAFETY: `values` holds `n` counters, the glue's, for the call.
    let out = unsafe { core::slice::from_raw_parts_mut(values, n as usize) };
    out.fill(0);
    // SAFETY: A live device context (see above).
    unsafe { driver::<T>(dev) }.hw_stats(out);
}

/// # Safety
///
/// Called by the C glue with a live QP pointer and a GID valid for the
/// call.
unsafe extern "C" fn mcast<T: Driver>(
    qp: *mut c_void,
    mgid: *const [u8; 16],
    attach: bool,
) -> c_int {
    // SAFETY: The glue's GID, valid for the call.
    let mgid = unsafe { &*mgid };
    // SAFETY: A live QP.
    errno(T::mcast(unsafe { arc_priv::<T::Qp>(qp) }, mgid, attach))
}

/// # Safety
///
/// Called by the C glue with a live QP pointer and a work request whose
/// scatter list is valid for the call.
unsafe extern "C" fn post_recv<T: Driver>(qp: *mut c_void, wr: *const RawRecvWr) -> c_int {
    // SAFETY: The glue's request, valid for the call.
    let w = unsafe { &*wr };
    let wr = RecvWr {
        wr_id: w.wr_id,
        // SAFETY: `sg_list` holds `num_sge` entries for the call.
        sges: unsafe { sges(w.sg_list, w.num_sge) },
        kernel: w.kernel != 0,
    };
    // SAFETY: A live QP.
    errno(T::post_recv(unsafe { arc_priv::<T::Qp>(qp) }, &wr))
}

/// What an SRQ's container holds: the driver's SRQ and its event
/// notifier, which is revoked before the SRQ is destroyed.
struct SrqEntry<T: Driver> {
    srq: Arc<T::Srq>,
    notifier: Arc<SrqNotifier>,
}

/// # Safety
///
/// `p` is an SRQ container's pointer (a `KBox<SrqEntry<T>>`), alive for
/// `'a`.
unsafe fn srq_entry<'a, T: Driver>(p: *mut c_void) -> &'a SrqEntry<T> {
    // SAFETY: Per the function's contract.
    unsafe { &*p.cast::<SrqEntry<T>>() }
}

/// # Safety
///
/// Called by the C glue with a live device context and PD, the new
/// `ib_srq` and its attributes, ours for the call.
unsafe extern "C" fn create_srq<T: Driver>(
    ctx: *const c_void,
    pd: *mut c_void,
    ibsrq: *mut c_void,
    attr: *mut SrqAttr,
    out: *mut *mut c_void,
) -> c_int {
    let (Some(ibsrq), false) = (NonNull::new(ibsrq), attr.is_null()) else {
        return EINVAL.to_errno();
    };
    let notifier = match SrqNotifier::new(ibsrq) {
        Ok(n) => n,
        Err(e) => return e.to_errno(),
    };
    // SAFETY: A live PD, held by its container during the call.
    let pd = unsafe { clone_priv::<T::Pd>(pd) };
    // SAFETY: The glue's attributes, ours for the call.
    let attr = unsafe { &mut *attr };
    // SAFETY: A live device context.
    let srq = match unsafe { driver::<T>(ctx) }.create_srq(&pd, attr, notifier.clone()) {
        Ok(s) => s,
        Err(e) => return e.to_errno(),
    };
    match KBox::new(SrqEntry::<T> { srq, notifier }, GFP_KERNEL) {
        Ok(entry) => {
            // SAFETY: `out` is the container's pointer slot.
            unsafe { *out = KBox::into_raw(entry).cast::<c_void>() };
            0
        }
        Err(_) => ENOMEM.to_errno(),
    }
}

/// # Safety
///
/// Called by the C glue with a live SRQ pointer and attributes.
unsafe extern "C" fn modify_srq<T: Driver>(
    srq: *mut c_void,
    attr: *const SrqAttr,
    mask: u32,
) -> c_int {
    // SAFETY: A live SRQ.
    let srq = &unsafe { srq_entry::<T>(srq) }.srq;
    // SAFETY: The glue's attributes, valid for the call.
    let attr = unsafe { &*attr };
    errno(T::modify_srq(srq, attr, mask))
}

/// # Safety
///
/// Called by the C glue with a live SRQ pointer and room for its
/// attributes.
unsafe extern "C" fn query_srq<T: Driver>(srq: *mut c_void, attr: *mut SrqAttr) {
    // SAFETY: A live SRQ.
    let a = T::query_srq(&unsafe { srq_entry::<T>(srq) }.srq);
    // SAFETY: The glue's attributes, ours for the call.
    unsafe { *attr = a };
}

/// # Safety
///
/// Called by the C glue with a live device context and the SRQ's pointer,
/// at its destruction.
unsafe extern "C" fn destroy_srq<T: Driver>(ctx: *const c_void, srq: *mut c_void) {
    // SAFETY: The SRQ is destroyed: its entry comes back.
    let entry = unsafe { KBox::from_raw(srq.cast::<SrqEntry<T>>()) };
    entry.notifier.revoke();
    let SrqEntry { srq, .. } = KBox::into_inner(entry);
    // SAFETY: A live device context.
    unsafe { driver::<T>(ctx) }.destroy_srq(srq)
}

/// # Safety
///
/// Called by the C glue with a live SRQ pointer and a work request whose
/// scatter list is valid for the call.
unsafe extern "C" fn post_srq_recv<T: Driver>(srq: *mut c_void, wr: *const RawRecvWr) -> c_int {
    // SAFETY: The glue's request, valid for the call.
    let w = unsafe { &*wr };
    let wr = RecvWr {
        wr_id: w.wr_id,
        // SAFETY: `sg_list` holds `num_sge` entries for the call.
        sges: unsafe { sges(w.sg_list, w.num_sge) },
        kernel: false,
    };
    // SAFETY: A live SRQ.
    errno(T::post_srq_recv(&unsafe { srq_entry::<T>(srq) }.srq, &wr))
}
