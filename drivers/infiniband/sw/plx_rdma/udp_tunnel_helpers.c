// SPDX-License-Identifier: GPL-2.0
/* The UDP tunnel C glue, built into this module. */
#include "../../../../rust/helpers/udp_tunnel.c"
