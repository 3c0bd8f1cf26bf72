// SPDX-License-Identifier: GPL-2.0
/*
 * The client half of the rust_misuse_provider test: it takes the
 * provider's two channels the way in-tree clients do and checks that the
 * provider's misuse of its Rust handles reaches neither freed memory nor a
 * client that has let go:
 *
 * - stale-callback: a copy with a callback is submitted, the channel
 *   released, and taken again, which makes the provider invoke the first
 *   client's kept callback: it must not run;
 * - early-drop: the provider drops its descriptor handles once it has
 *   prepared a descriptor; submitting that descriptor must give an error
 *   cookie (and KASAN must stay quiet).
 *
 * Loading runs both and fails (-EIO) if one does; the KTAP lines in the
 * kernel log say which.  Nothing is copied: no memory is mapped.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dmaengine.h>
#include <linux/module.h>
#include <linux/string.h>

static char *stale_channel;
module_param(stale_channel, charp, 0444);
MODULE_PARM_DESC(stale_channel, "the provider's stale-callback channel (required)");

static char *drop_channel;
module_param(drop_channel, charp, 0444);
MODULE_PARM_DESC(drop_channel, "the provider's early-drop channel (required)");

static bool released;
static atomic_t late_calls = ATOMIC_INIT(0);

static void stale_done(void *param, const struct dmaengine_result *res)
{
	if (READ_ONCE(released))
		atomic_inc(&late_calls);
}

static bool by_name(struct dma_chan *chan, void *name)
{
	return !strcmp(dma_chan_name(chan), name);
}

static struct dma_chan *take(const char *name)
{
	dma_cap_mask_t mask;

	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	return dma_request_channel(mask, by_name, (void *)name);
}

/* A descriptor for a copy that is never made (the provider copies nothing). */
static struct dma_async_tx_descriptor *prep(struct dma_chan *chan)
{
	return dmaengine_prep_dma_memcpy(chan, SZ_4K, SZ_8K, 64,
					 DMA_PREP_INTERRUPT | DMA_CTRL_ACK);
}

static bool stale_callback(void)
{
	struct dma_async_tx_descriptor *txd;
	struct dma_chan *chan = take(stale_channel);
	dma_cookie_t cookie;

	if (!chan) {
		pr_err("no channel %s\n", stale_channel);
		return false;
	}
	txd = prep(chan);
	if (!txd) {
		pr_err("prep on %s failed\n", stale_channel);
		dma_release_channel(chan);
		return false;
	}
	txd->callback_result = stale_done;
	cookie = dmaengine_submit(txd);
	dma_async_issue_pending(chan);
	WRITE_ONCE(released, true);
	dma_release_channel(chan);
	if (cookie < 0) {
		pr_err("submit on %s failed: %d\n", stale_channel, cookie);
		return false;
	}
	/* The next client: the provider invokes the kept callback now. */
	chan = take(stale_channel);
	if (!chan) {
		pr_err("%s could not be taken again\n", stale_channel);
		return false;
	}
	dma_release_channel(chan);
	pr_info("# callbacks after release: %d\n", atomic_read(&late_calls));
	return atomic_read(&late_calls) == 0;
}

static bool early_drop(void)
{
	struct dma_async_tx_descriptor *txd;
	struct dma_chan *chan = take(drop_channel);
	dma_cookie_t cookie;

	if (!chan) {
		pr_err("no channel %s\n", drop_channel);
		return false;
	}
	txd = prep(chan);
	if (!txd) {
		pr_err("prep on %s failed\n", drop_channel);
		dma_release_channel(chan);
		return false;
	}
	cookie = dmaengine_submit(txd);
	dma_release_channel(chan);
	pr_info("# submit after the handles went: %d\n", cookie);
	return cookie < 0;
}

static int __init misuse_client_init(void)
{
	bool ok = true, pass;

	if (!stale_channel || !drop_channel)
		return -EINVAL;
	pr_info("1..2\n");
	pass = stale_callback();
	pr_info("%s 1 - a callback kept past the client's release does not run\n",
		pass ? "ok" : "not ok");
	ok &= pass;
	pass = early_drop();
	pr_info("%s 2 - a descriptor outlives the provider's handles: its submit fails\n",
		pass ? "ok" : "not ok");
	ok &= pass;
	return ok ? 0 : -EIO;
}

static void __exit misuse_client_exit(void)
{
}

module_init(misuse_client_init);
module_exit(misuse_client_exit);
MODULE_DESCRIPTION("Client half of the rust_misuse_provider test");
MODULE_LICENSE("GPL");
