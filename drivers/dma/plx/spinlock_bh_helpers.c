// SPDX-License-Identifier: GPL-2.0
/* The _bh spinlock C glue, built into this module. */
#include "../../../rust/helpers/spinlock_bh.c"
