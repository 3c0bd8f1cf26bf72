/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C glue under the Rust user-page DMA abstraction
 * (rust/kernel/user_pages.rs, which declares these again as `extern "C"`).
 */
#ifndef RUST_HELPERS_USER_PAGES_H
#define RUST_HELPERS_USER_PAGES_H

#include <linux/types.h>

struct device;
struct rust_user_dma;

struct rust_user_dma *rust_user_dma_map(struct device *dev, unsigned long uaddr,
					size_t len, int dir, bool longterm,
					int *err);
int rust_user_dma_attach(struct rust_user_dma *ud, struct device *dev);
void rust_user_dma_detach(struct rust_user_dma *ud);
void rust_user_dma_sync(struct rust_user_dma *ud, size_t off, size_t len,
			bool for_device);
bool rust_user_dma_dev_bound(struct device *dev);
unsigned int rust_user_dma_nents(const struct rust_user_dma *ud);
unsigned int rust_user_dma_segments(const struct rust_user_dma *ud,
				    dma_addr_t *addr, u32 *len,
				    unsigned int max);
void rust_user_dma_unmap(struct rust_user_dma *ud);
void rust_user_dma_read(const struct rust_user_dma *src, size_t src_off,
			void *buf, size_t len);
void rust_user_dma_write(struct rust_user_dma *dst, size_t dst_off,
			 const void *buf, size_t len);
void rust_user_dma_cpu_copy(struct rust_user_dma *dst, size_t dst_off,
			    const struct rust_user_dma *src, size_t src_off,
			    size_t len);

#endif /* RUST_HELPERS_USER_PAGES_H */
