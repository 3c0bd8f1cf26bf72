// SPDX-License-Identifier: GPL-2.0
/*
 * Thin C glue under rust/kernel/skb_dma.rs: virt_to_phys(),
 * dma_map_single() and dma_mapping_error() are inline functions or macros,
 * which Rust cannot call.  The IOVA-based DMA API is called from Rust
 * directly; what to map, how, and when are all the caller's.
 */

#include <linux/dma-mapping.h>
#include <linux/io.h>

#include "skb_dma.h"

/* The physical address of @p, kernel memory in the direct map. */
u64 rust_virt_to_phys(const u8 *p)
{
	return virt_to_phys((void *)p);
}

/*
 * Maps @len bytes at @p for @dev to read (a DMA engine's source): 0 and
 * *addr, or -ENOMEM.
 */
int rust_dma_map_for_read(struct device *dev, const u8 *p, u32 len,
			  dma_addr_t *addr)
{
	*addr = dma_map_single(dev, (void *)p, len, DMA_TO_DEVICE);
	return dma_mapping_error(dev, *addr) ? -ENOMEM : 0;
}

void rust_dma_unmap_for_read(struct device *dev, dma_addr_t addr, u32 len)
{
	dma_unmap_single(dev, addr, len, DMA_TO_DEVICE);
}
