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

/*
 * Whether @dev holds managed resources (devres): none before its driver's
 * probe registers the first (the driver core warns otherwise).
 */
bool rust_device_has_devres(struct device *dev)
{
	unsigned long flags;
	bool any;

	spin_lock_irqsave(&dev->devres_lock, flags);
	any = !list_empty(&dev->devres_head);
	spin_unlock_irqrestore(&dev->devres_lock, flags);
	return any;
}

/* Stops @dev, a PCI function, from mastering the bus. */
void rust_pci_clear_master(struct device *dev)
{
	pci_clear_master(to_pci_dev(dev));
}
