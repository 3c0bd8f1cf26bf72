// SPDX-License-Identifier: GPL-2.0

//! Probe-time PCI helpers that Linux 7.3 leaves `unsafe` or awkward.
//!
//! - [`set_dma_mask`]: the DMA mask, set from `probe()` before any mapping,
//!   and refused anywhere else.
//! - [`BusMaster`]: a PCI function's bus mastering, which a driver can
//!   switch off when its engine would not stop.
//! - [`ThreadedIrq`]: one threaded interrupt handler on vector 0 of a PCI
//!   function, owning the vector allocation it borrows from, registered as
//!   a device-managed resource ([`DevresIrq`]). In 7.3 an
//!   `irq::ThreadedRegistration` borrows the `IrqVectorRegistration` it was
//!   made from, so a driver cannot keep both in its data without a
//!   self-reference; this type keeps the vectors in a heap allocation of
//!   stable address and drops the handler first.

use core::ptr::NonNull;
use kernel::{
    device::{Bound, Core},
    devres::DevresLt,
    dma::{Device as _, DmaMask},
    irq::{Flags, ThreadedHandler, ThreadedRegistration},
    pci::{self, IrqType, IrqTypes, IrqVectorRegistration},
    prelude::*,
    sync::aref::ARef,
    types::ForLt,
};

mod ffi {
    use core::ffi::c_void;

    extern "C" {
        pub(super) fn rust_device_is_probing(dev: *const c_void) -> bool;
        pub(super) fn rust_device_has_devres(dev: *mut c_void) -> bool;
        pub(super) fn rust_pci_clear_master(dev: *mut c_void);
    }
}

/// Sets the streaming and coherent DMA masks of `pdev` to `bits`, falling
/// back to 32 bits. Returns the bits set.
///
/// Changing the mask is sound only while nothing of the driver maps: in
/// `probe()`, before the driver registers anything (a registered DMA
/// engine's clients map at any time, an interrupt handler may map). `Core`
/// alone does not say so (it is also held in remove), so two facts are
/// checked: the device is probing, and it holds no managed resource yet
/// (every registration that could run concurrently, an interrupt, a
/// subsystem's registration, an I/O mapping's `Devres`, is one; the driver
/// core starts probe with none). Otherwise the call fails with `EBUSY` and
/// the mask stays as it is. A driver calls it first thing in probe.
pub fn set_dma_mask(pdev: &pci::Device<Core<'_>>, bits: DmaMask) -> Result<u32> {
    let dev: &kernel::device::Device = pdev.as_ref();
    // `Device` is `repr(transparent)` over `struct device`.
    let raw = core::ptr::from_ref(dev).cast::<core::ffi::c_void>();
    // SAFETY: `raw` is a valid `struct device` for the call (`dev` is
    // borrowed); the helper only reads its link state.
    if !unsafe { ffi::rust_device_is_probing(raw) } {
        return Err(EBUSY);
    }
    // SAFETY: As above; the helper takes the device's devres lock.
    if unsafe { ffi::rust_device_has_devres(raw.cast_mut()) } {
        dev_err!(dev, "set_dma_mask: refused, the driver has registered resources already (set the mask first)\n");
        return Err(EBUSY);
    }
    // SAFETY: We are in probe and the driver registered nothing (checked
    // above), so no DMA allocation or mapping of its can run concurrently.
    if unsafe { pdev.dma_set_mask_and_coherent(bits) }.is_ok() {
        return Ok(bits.value().count_ones());
    }
    // SAFETY: As above.
    unsafe { pdev.dma_set_mask_and_coherent(DmaMask::new::<32>()) }?;
    Ok(32)
}

/// The bus mastering of one PCI function, kept by a driver that may have to
/// stop its engine's DMA the hard way.
///
/// An engine that ignores its stop and abort requests may still read and
/// write memory; until bus mastering is off, descriptors it holds cannot be
/// reported ended, since their owners would free buffers the engine writes.
/// Made from a bound function, so it names a PCI function whose driver
/// enabled it; it keeps a reference on the function, and switching
/// mastering off after the driver went does nothing harmful (a removed
/// function ignores the configuration write).
pub struct BusMaster(ARef<pci::Device>);

impl BusMaster {
    /// The bus mastering of `pdev`.
    pub fn new(pdev: &pci::Device<Bound>) -> Self {
        Self(pdev.into())
    }

    /// Stops the function from mastering the bus: it starts no DMA once
    /// this returns (a PCIe configuration write is not posted).
    pub fn clear(&self) {
        let dev: &kernel::device::Device = self.0.as_ref();
        // `Device` is `repr(transparent)` over `struct device`.
        let raw = core::ptr::from_ref(dev)
            .cast_mut()
            .cast::<core::ffi::c_void>();
        // SAFETY: `raw` is the `struct device` of a PCI function we hold a
        // reference on, valid for the call.
        unsafe { ffi::rust_pci_clear_master(raw) };
    }
}

/// Owns the heap-allocated vector registration a [`ThreadedIrq`] borrows.
struct Vectors<'bound>(NonNull<IrqVectorRegistration<'bound>>);

impl Drop for Vectors<'_> {
    fn drop(&mut self) {
        // SAFETY: `self.0` came from `KBox::leak` in `ThreadedIrq::new`; the
        // handler registration borrowing it is declared, and so dropped,
        // before this field.
        drop(unsafe { KBox::from_raw(self.0.as_ptr()) });
    }
}

/// A threaded interrupt handler on vector 0 of a PCI function.
///
/// Only [`ThreadedIrq::register`] makes one, inside a [`DevresIrq`]: the
/// handler is freed when that is dropped or, at the latest, when the driver
/// is unbound. That is the promise `ThreadedRegistration::new` asks its
/// caller for (its drop must run), kept even if the driver forgets the
/// handle.
#[pin_data]
pub struct ThreadedIrq<'bound, H: ThreadedHandler + 'bound> {
    // Declared first: freed before the vectors it borrows.
    #[pin]
    reg: ThreadedRegistration<'bound, H>,
    vectors: Vectors<'bound>,
    kind: IrqType,
}

// SAFETY: `vectors` is owned by `Self` and only read; the registration is
// `Send` when its handler is.
unsafe impl<'bound, H: ThreadedHandler + Send + 'bound> Send for ThreadedIrq<'bound, H> {}
// SAFETY: Shared access only reads.
unsafe impl<'bound, H: ThreadedHandler + 'bound> Sync for ThreadedIrq<'bound, H> {}

/// A [`ThreadedIrq`] bound to its device: the handle a driver keeps.
pub type DevresIrq<H> = DevresLt<ThreadedIrq<'static, H>>;

impl<H: ThreadedHandler + 'static> ForLt for ThreadedIrq<'static, H> {
    type Of<'a> = ThreadedIrq<'a, H>;
}

impl<'bound, H: ThreadedHandler + 'bound> ThreadedIrq<'bound, H> {
    /// Allocates one vector of the first of `types` the function offers
    /// (MSI-X, then MSI, then INTx) and installs the handler `handler`
    /// makes for it. The handler learns the vector's
    /// type: a message-signalled vector is the function's own, an INTx
    /// line may be shared, and what an interrupt with no status behind it
    /// means differs.
    ///
    /// The handler is registered as a resource of `pdev` (see the type's
    /// documentation); [`DevresLt::try_access_with`] reaches it.
    pub fn register<I: PinInit<H, Error> + 'bound>(
        pdev: &'bound pci::Device<Bound>,
        name: &'static CStr,
        types: IrqTypes,
        handler: impl FnOnce(IrqType) -> I + 'bound,
    ) -> Result<DevresIrq<H>>
    where
        H: Send + 'static,
    {
        // SAFETY: A `ThreadedIrq` borrows only the device, its vectors
        // (owned by itself) and the handler: all stay valid for the
        // device's whole bound scope, not just for `'bound`.
        unsafe { DevresLt::new(pdev.as_ref(), Self::new(pdev, name, types, handler)) }
    }

    fn new<I: PinInit<H, Error> + 'bound>(
        pdev: &'bound pci::Device<Bound>,
        name: &'static CStr,
        types: IrqTypes,
        handler: impl FnOnce(IrqType) -> I + 'bound,
    ) -> impl PinInit<Self, Error> + 'bound {
        pin_init::pin_init_scope(move || {
            let boxed = KBox::new(pdev.alloc_irq_vectors(1, 1, types)?, GFP_KERNEL)?;
            let kind = boxed.irq_type();
            let vectors = Vectors(NonNull::from(KBox::leak(boxed)));
            // SAFETY: `vectors` owns a live heap allocation that stays put
            // until `Vectors::drop`, which runs after the registration made
            // from this borrow is gone (field order of `Self`), or right
            // away on error, before anything borrowed it.
            let vref: &'bound IrqVectorRegistration<'bound> = unsafe { vectors.0.as_ref() };
            let request = vref.index(0)?;
            // SAFETY: The registration is stored in `Self`, which only
            // `register` makes, inside a `Devres`: its drop runs, when the
            // handle is dropped or at the latest when the driver unbinds.
            let reg = unsafe {
                ThreadedRegistration::new(request.into(), Flags::SHARED, name, handler(kind))
            };
            Ok(try_pin_init!(Self {
                reg <- reg,
                vectors,
                kind,
            }? Error))
        })
    }

    /// Returns the interrupt type the PCI core chose.
    pub fn kind(&self) -> IrqType {
        self.kind
    }

    /// Returns the handler.
    pub fn handler(&self) -> &H {
        self.reg.handler()
    }

    /// Waits for running handlers (hard and threaded) to finish.
    pub fn synchronize(&self) {
        self.reg.synchronize()
    }
}
