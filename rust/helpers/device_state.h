/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C glue under the probe-time checks of rust/kernel/pci_ext.rs (which
 * declares it again as `extern "C"`).
 */
#ifndef RUST_HELPERS_DEVICE_STATE_H
#define RUST_HELPERS_DEVICE_STATE_H

#include <linux/types.h>

struct device;

bool rust_device_is_probing(const struct device *dev);
bool rust_device_has_devres(struct device *dev);
void rust_pci_clear_master(struct device *dev);

#endif /* RUST_HELPERS_DEVICE_STATE_H */
