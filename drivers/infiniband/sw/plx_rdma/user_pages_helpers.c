// SPDX-License-Identifier: GPL-2.0
/* The user-page DMA C glue, built into this module. */
#include "../../../../rust/helpers/user_pages.c"
