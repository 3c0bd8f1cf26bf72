// SPDX-License-Identifier: GPL-2.0
/*
 * Where a device is in its driver's life, for rust/kernel/pci_ext.rs:
 * struct device's link state is not reachable from Rust, nor is
 * pci_clear_master() (7.3's pci::Device has set_master only).
 */
#include <linux/device.h>
#include <linux/pci.h>

#include "device_state.h"

/* The driver core is calling the device's probe() right now. */
bool rust_device_is_probing(const struct device *dev)
{
	return READ_ONCE(dev->links.status) == DL_DEV_PROBING;
}

/* Stops @dev, a PCI function, from mastering the bus. */
void rust_pci_clear_master(struct device *dev)
{
	pci_clear_master(to_pci_dev(dev));
}
