/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C glue under rust/kernel/capability.rs (which declares it again as
 * `extern "C"`).
 */
#ifndef RUST_HELPERS_CAPABILITY_H
#define RUST_HELPERS_CAPABILITY_H

#include <linux/types.h>

struct file;

bool rust_file_capable(const struct file *file, int cap);

#endif /* RUST_HELPERS_CAPABILITY_H */
