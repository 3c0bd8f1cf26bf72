// SPDX-License-Identifier: GPL-2.0
/* The received-bytes DMA mapping C glue, built into this module. */
#include "../../../../rust/helpers/skb_dma.c"
