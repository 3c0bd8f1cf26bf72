/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C glue under the Rust dmaengine abstraction: the functions Rust calls
 * (declared again, as `extern "C"`, in rust/kernel/dmaengine/mod.rs).
 */
#ifndef RUST_HELPERS_DMAENGINE_H
#define RUST_HELPERS_DMAENGINE_H

#include <linux/dmaengine.h>

struct rust_dma_ops;

typedef void (*rust_dma_removal_fn)(void *ctx);
struct rust_dma_watch;

struct dma_device *rust_dma_device_alloc(struct device *dev,
		unsigned int nr_chans, const struct rust_dma_ops *ops, void *ctx,
		void *const *chan_ctx, struct workqueue_struct *free_wq);
bool rust_dma_dev_set_max_seg(struct device *dev, u32 size);
void rust_dma_device_free(struct dma_device *dma);
int rust_dma_device_register(struct dma_device *dma);
void rust_dma_device_unregister(struct dma_device *dma);
struct dma_chan *rust_dma_device_chan(struct dma_device *dma, unsigned int i);
const char *rust_dma_chan_name(struct dma_chan *chan);
struct dma_async_tx_descriptor *rust_dma_desc_alloc(struct dma_chan *chan,
		unsigned long idx);
void rust_dma_desc_free(struct dma_async_tx_descriptor *txd);
struct dmaengine_desc_callback;
void rust_dma_desc_complete(struct dma_async_tx_descriptor *txd,
			    struct dmaengine_desc_callback *cb);
void rust_dma_callback_invoke(const struct dmaengine_desc_callback *cb,
			      enum dmaengine_tx_result result, u32 residue);
struct dma_chan *rust_dma_request_memcpy_chan(dma_filter_fn filter,
					      void *param);
bool rust_dma_chan_has_terminate(struct dma_chan *chan);
bool rust_dma_chan_has_release(struct dma_chan *chan);
u32 rust_dma_chan_max_seg(struct dma_chan *chan);
struct rust_dma_watch *rust_dma_client_watch(struct dma_chan *chan,
					     rust_dma_removal_fn fn, void *ctx,
					     bool hold_module);
void rust_dma_client_unwatch(struct rust_dma_watch *w);
unsigned int rust_dma_client_unwatch_scoped(void);
bool rust_dma_chan_dev_bound(struct dma_chan *chan);
void rust_dma_release_chan(struct dma_chan *chan);
struct device *rust_dma_chan_dev(struct dma_chan *chan);
struct dma_async_tx_descriptor *rust_dma_client_prep_memcpy(struct dma_chan *chan,
		dma_addr_t dst, dma_addr_t src, size_t len, unsigned long flags);
dma_cookie_t rust_dma_client_submit(struct dma_async_tx_descriptor *txd,
				    dma_async_tx_callback_result done,
				    void *param);
void rust_dma_client_issue_pending(struct dma_chan *chan);
bool rust_dma_client_tx_complete(struct dma_chan *chan, dma_cookie_t cookie);
int rust_dma_client_terminate_sync(struct dma_chan *chan);
void *rust_dma_buf_alloc(struct device *dev, size_t size, dma_addr_t *dma);
void rust_dma_buf_free(struct device *dev, void *buf, size_t size,
                       dma_addr_t dma);
void rust_dma_buf_for_cpu(struct device *dev, dma_addr_t dma, size_t size);
void rust_dma_buf_for_device(struct device *dev, dma_addr_t dma, size_t size);

#endif /* RUST_HELPERS_DMAENGINE_H */
