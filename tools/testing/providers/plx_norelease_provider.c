// SPDX-License-Identifier: GPL-2.0
/*
 * A memcpy dmaengine provider shaped like ptdma, hisi_dma, dw or sf-pdma:
 * it can terminate, but has no device_release, so its channels are freed
 * when it goes, whether or not a client still holds one.  A client that
 * may release its channel after the provider went (the copy device does,
 * when its file is closed) must never take such a channel; the uapi suite
 * asks /dev/plx-dma-copy for this one by name and expects EOPNOTSUPP.
 *
 * It copies nothing (every prep fails) and sits on a faux device.
 */
#include <linux/device/faux.h>
#include <linux/dmaengine.h>
#include <linux/module.h>

static struct faux_device *fdev;
static struct dma_device dma;
static struct dma_chan chan;

static int norelease_alloc_chan_resources(struct dma_chan *c)
{
	return 0;
}

static void norelease_free_chan_resources(struct dma_chan *c)
{
}

static struct dma_async_tx_descriptor *
norelease_prep_memcpy(struct dma_chan *c, dma_addr_t dst, dma_addr_t src,
		      size_t len, unsigned long flags)
{
	return NULL;
}

static void norelease_issue_pending(struct dma_chan *c)
{
}

static enum dma_status norelease_tx_status(struct dma_chan *c,
					   dma_cookie_t cookie,
					   struct dma_tx_state *state)
{
	return DMA_COMPLETE;
}

static int norelease_terminate_all(struct dma_chan *c)
{
	return 0;
}

static int __init norelease_init(void)
{
	int ret;

	fdev = faux_device_create(KBUILD_MODNAME, NULL, NULL);
	if (!fdev)
		return -ENODEV;
	INIT_LIST_HEAD(&dma.channels);
	dma_cap_set(DMA_MEMCPY, dma.cap_mask);
	dma.dev = &fdev->dev;
	dma.directions = BIT(DMA_MEM_TO_MEM);
	dma.device_alloc_chan_resources = norelease_alloc_chan_resources;
	dma.device_free_chan_resources = norelease_free_chan_resources;
	dma.device_prep_dma_memcpy = norelease_prep_memcpy;
	dma.device_issue_pending = norelease_issue_pending;
	dma.device_tx_status = norelease_tx_status;
	dma.device_terminate_all = norelease_terminate_all;
	/* No device_release: the point of this module. */
	chan.device = &dma;
	list_add_tail(&chan.device_node, &dma.channels);
	ret = dma_async_device_register(&dma);
	if (ret)
		faux_device_destroy(fdev);
	return ret;
}

static void __exit norelease_exit(void)
{
	dma_async_device_unregister(&dma);
	faux_device_destroy(fdev);
}

module_init(norelease_init);
module_exit(norelease_exit);
MODULE_DESCRIPTION("Test dmaengine provider with terminate_all but no device_release");
MODULE_LICENSE("GPL");
