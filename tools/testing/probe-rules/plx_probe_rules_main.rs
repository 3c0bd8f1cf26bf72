// SPDX-License-Identifier: GPL-2.0

//! Test-only PCI driver of the `driver` suite: checks that
//! `pci_ext::set_dma_mask` works in probe, and is refused in unbind and in
//! probe once the driver has registered a managed resource.
//!
//! A DMA mask may change only while nothing of the driver maps. `Core`, the
//! device context `set_dma_mask` takes, is held in probe but also in
//! unbind, when a registered DMA engine's clients may still be mapping: the
//! function must tell the two apart itself. The driver matches no device
//! on its own (its ID table names a device that does not exist); the suite
//! hands it an emulated function through `driver_override`, and each call
//! prints one line:
//!
//! ```text
//! plx_probe_rules 0000:00:03.0: probe: set_dma_mask=48
//! plx_probe_rules 0000:00:03.0: probe, after a registration: set_dma_mask=EBUSY
//! plx_probe_rules 0000:00:03.0: unbind: set_dma_mask=EBUSY
//! ```

#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../rust/kernel/pci_ext.rs"]
mod pci_ext;

use kernel::{device::Core, devres::Devres, dma::DmaMask, pci, prelude::*};

/// A device ID no function has: the driver binds only by override.
const NO_SUCH_DEVICE: u32 = 0xffff;

/// The outcome of a `set_dma_mask` call, as the suite greps it.
struct Outcome(Result<u32>);

impl kernel::fmt::Display for Outcome {
    fn fmt(&self, f: &mut kernel::fmt::Formatter<'_>) -> kernel::fmt::Result {
        match self.0 {
            Ok(bits) => write!(f, "{bits}"),
            Err(e) if e == EBUSY => f.write_str("EBUSY"),
            Err(e) => write!(f, "error {}", e.to_errno()),
        }
    }
}

struct ProbeRules;

kernel::pci_device_table!(
    PCI_TABLE,
    <ProbeRules as pci::Driver>::IdInfo,
    [(pci::DeviceId::from_id(pci::Vendor::PLX, NO_SUCH_DEVICE), ())]
);

impl pci::Driver for ProbeRules {
    type IdInfo = ();
    type Data<'bound> = ();

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        let r = pci_ext::set_dma_mask(pdev, DmaMask::new::<48>());
        dev_info!(pdev, "probe: set_dma_mask={}\n", Outcome(r));
        // Anything registered may run (and map) concurrently from here on.
        let registered = Devres::new(pdev.as_ref(), ());
        let r = pci_ext::set_dma_mask(pdev, DmaMask::new::<32>());
        dev_info!(
            pdev,
            "probe, after a registration: set_dma_mask={}\n",
            Outcome(r)
        );
        drop(registered);
        Ok(())
    }

    fn unbind<'bound>(pdev: &'bound pci::Device<Core<'_>>, _this: Pin<&Self::Data<'bound>>) {
        let r = pci_ext::set_dma_mask(pdev, DmaMask::new::<32>());
        dev_info!(pdev, "unbind: set_dma_mask={}\n", Outcome(r));
    }
}

kernel::module_pci_driver! {
    type: ProbeRules,
    name: "plx_probe_rules",
    authors: ["rust-plx-dma developers"],
    description: "Test-only: where pci_ext::set_dma_mask may be called",
    license: "GPL v2",
}
