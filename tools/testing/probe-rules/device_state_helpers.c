// SPDX-License-Identifier: GPL-2.0
/* The device-state C glue, built into this module. */
#include "../../../rust/helpers/device_state.c"
