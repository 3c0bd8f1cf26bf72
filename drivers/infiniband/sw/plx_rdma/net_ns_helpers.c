// SPDX-License-Identifier: GPL-2.0
/* The network-namespace C glue, built into this module. */
#include "../../../../rust/helpers/net_ns.c"
