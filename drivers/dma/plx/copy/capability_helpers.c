// SPDX-License-Identifier: GPL-2.0
/* The capability C glue, built into this module. */
#include "../../../../rust/helpers/capability.c"
