/* SPDX-License-Identifier: GPL-2.0 */
/* The C glue under rust/kernel/skb_dma.rs (see skb_dma.c). */
#ifndef RUST_HELPERS_SKB_DMA_H
#define RUST_HELPERS_SKB_DMA_H

#include <linux/types.h>

struct device;

u64 rust_virt_to_phys(const u8 *p);
int rust_dma_map_for_read(struct device *dev, const u8 *p, u32 len,
			  dma_addr_t *addr);
void rust_dma_unmap_for_read(struct device *dev, dma_addr_t addr, u32 len);

#endif /* RUST_HELPERS_SKB_DMA_H */
