// SPDX-License-Identifier: GPL-2.0
/* The RDMA device C glue, built into this module. */
#include "../../../../rust/helpers/ib_device.c"
