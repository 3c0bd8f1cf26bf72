// SPDX-License-Identifier: GPL-2.0

//! Rust driver for PCIe memcpy-offload engines with the PLX/PEX87xx DMA
//! programming model (PCI `10b5:87d0`).
//!
//! This first step binds the device and reports probe and removal; the
//! dmaengine provider is built on top of it.

use kernel::{device::Core, pci, prelude::*};

/// PCI device ID of the PEX87xx DMA function, shared with the C `plx_dma`.
const PLX_DMA_DEVICE_ID: u32 = 0x87d0;

/// Per-device state, alive while the driver is bound.
struct PlxDma<'bound> {
    pdev: &'bound pci::Device,
}

struct PlxDmaDriver;

kernel::pci_device_table!(
    PCI_TABLE,
    <PlxDmaDriver as pci::Driver>::IdInfo,
    [(
        pci::DeviceId::from_id(pci::Vendor::PLX, PLX_DMA_DEVICE_ID),
        ()
    )]
);

impl pci::Driver for PlxDmaDriver {
    type IdInfo = ();
    type Data<'bound> = PlxDma<'bound>;

    const ID_TABLE: pci::IdTable<Self::IdInfo> = &PCI_TABLE;

    fn probe<'bound>(
        pdev: &'bound pci::Device<Core<'_>>,
        _info: Option<&'bound Self::IdInfo>,
    ) -> impl PinInit<Self::Data<'bound>, Error> + 'bound {
        dev_info!(
            pdev,
            "probe: PCI {} {:04x}\n",
            pdev.vendor_id(),
            pdev.device_id()
        );
        Ok(PlxDma { pdev })
    }
}

impl Drop for PlxDma<'_> {
    fn drop(&mut self) {
        dev_info!(self.pdev, "remove\n");
    }
}

kernel::module_pci_driver! {
    type: PlxDmaDriver,
    name: "rust_plx_dma",
    authors: ["rust-plx-dma developers"],
    description: "Rust dmaengine driver for PLX/PEX87xx-style DMA engines",
    license: "GPL v2",
}
