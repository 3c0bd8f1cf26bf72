// SPDX-License-Identifier: GPL-2.0
/* The shared dmaengine C glue, built into this module. */
#include "../../../rust/helpers/dmaengine.c"
