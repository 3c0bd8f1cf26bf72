// SPDX-License-Identifier: GPL-2.0
/*
 * Capability checks against the credentials a file was opened with
 * (file_ns_capable() is not reachable from Rust), for
 * rust/kernel/capability.rs. Checking the opener, not the caller, keeps a
 * privileged process that is handed the descriptor from lending its rights.
 */
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/user_namespace.h>

#include "capability.h"

bool rust_file_capable(const struct file *file, int cap)
{
	return file_ns_capable(file, &init_user_ns, cap);
}
