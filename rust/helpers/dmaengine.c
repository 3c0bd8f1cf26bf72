// SPDX-License-Identifier: GPL-2.0
/*
 * Thin C glue under the Rust dmaengine abstraction (rust/kernel/dmaengine.rs).
 *
 * Rust cannot see the layout of struct dma_device, dma_chan or
 * dma_async_tx_descriptor (the kernel's Rust bindings do not include
 * <linux/dmaengine.h>), and the cookie and callback helpers are static
 * inlines in the private drivers/dma/dmaengine.h.  This file owns those
 * structures and forwards every dmaengine operation to a table of Rust
 * functions.  It holds no policy: locking, rings and error handling live in
 * Rust.
 */

#include <linux/device.h>
#include <linux/dma-mapping.h>
#include <linux/dmaengine.h>
#include <linux/llist.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/workqueue.h>

#include "dmaengine.h"		/* this glue's own prototypes */
#include <drivers/dma/dmaengine.h>	/* cookies, callbacks (private) */


/* Mirrored by `Ops` in rust/kernel/dmaengine/provider.rs. */
struct rust_dma_ops {
	int (*alloc_chan_resources)(void *chan_ctx, struct dma_chan *chan);
	void (*free_chan_resources)(void *chan_ctx);
	/* Returns a descriptor made by rust_dma_desc_alloc() or NULL. */
	struct dma_async_tx_descriptor *(*prep_memcpy)(void *chan_ctx,
			dma_addr_t dst, dma_addr_t src, size_t len,
			unsigned long flags);
	dma_cookie_t (*tx_submit)(void *chan_ctx, unsigned long desc_idx);
	void (*issue_pending)(void *chan_ctx);
	/*
	 * The status of @cookie, with the channel's cookie counters and the
	 * residue in @state; @atomic: the caller has interrupts off.
	 */
	enum dma_status (*tx_status)(void *chan_ctx, dma_cookie_t cookie,
				     bool atomic, struct dma_tx_state *state);
	int (*terminate_all)(void *chan_ctx);
	void (*synchronize)(void *chan_ctx);
	/* The last reference to the dma_device is gone. */
	void (*release)(void *dev_ctx);
};

struct rust_dma_chan {
	struct dma_chan chan;
	void *ctx;
};

struct rust_dma_device {
	struct dma_device dma;
	struct llist_node released;	/* on rust_dma_released once released */
	struct workqueue_struct *free_wq;	/* runs rust_dma_free_work */
	const struct rust_dma_ops *ops;
	void *ctx;
	unsigned int nr_chans;
	struct rust_dma_chan chans[] __counted_by(nr_chans);
};

struct rust_dma_desc {
	struct dma_async_tx_descriptor txd;
	unsigned long idx;
};

static struct rust_dma_device *to_rdev(struct dma_device *dma)
{
	return container_of(dma, struct rust_dma_device, dma);
}

static struct rust_dma_chan *to_rchan(struct dma_chan *chan)
{
	return container_of(chan, struct rust_dma_chan, chan);
}

static const struct rust_dma_ops *chan_ops(struct dma_chan *chan)
{
	return to_rdev(chan->device)->ops;
}

static int rdma_alloc_chan_resources(struct dma_chan *chan)
{
	return chan_ops(chan)->alloc_chan_resources(to_rchan(chan)->ctx, chan);
}

static void rdma_free_chan_resources(struct dma_chan *chan)
{
	chan_ops(chan)->free_chan_resources(to_rchan(chan)->ctx);
}

/*
 * The Rust channels guard their rings with _bh spinlocks, as the C plx_dma
 * and ioatdma do: a client in hard IRQ context, or with interrupts off,
 * could interrupt a holder on its own CPU.  Such calls are refused (prep,
 * submit, issue) or answered without reaping (tx_status), never taken;
 * terminate, which dmaengine allows there, is posted without the lock
 * (drivers/dma/plx/channel/terminator.rs).
 */
static noinline __cold bool rdma_refuse(struct dma_chan *chan, const char *op)
{
	/*
	 * The provider's device, not the channel's: unregistering frees
	 * chan->dev while clients may still hold the channel, and the
	 * dma_device keeps a reference on its ->dev until it is released.
	 */
	dev_warn_ratelimited(chan->device->dev,
			     "%s with interrupts disabled: refused\n", op);
	return true;
}

static __always_inline bool rdma_atomic_caller(struct dma_chan *chan,
					       const char *op)
{
	return unlikely(irqs_disabled()) && rdma_refuse(chan, op);
}

static struct dma_async_tx_descriptor *
rdma_prep_memcpy(struct dma_chan *chan, dma_addr_t dst, dma_addr_t src,
		 size_t len, unsigned long flags)
{
	struct dma_async_tx_descriptor *txd;

	if (rdma_atomic_caller(chan, "prep_memcpy"))
		return NULL;
	txd = chan_ops(chan)->prep_memcpy(to_rchan(chan)->ctx, dst, src, len,
					  flags);
	/* The caller's now: recorded here rather than by a call from Rust. */
	if (txd)
		txd->flags = flags;
	return txd;
}

static dma_cookie_t rdma_tx_submit(struct dma_async_tx_descriptor *txd)
{
	struct rust_dma_desc *d = container_of(txd, struct rust_dma_desc, txd);

	/* The descriptor stays prepared, and goes back at free_chan_resources. */
	if (rdma_atomic_caller(txd->chan, "tx_submit"))
		return -EINVAL;
	return chan_ops(txd->chan)->tx_submit(to_rchan(txd->chan)->ctx, d->idx);
}

static void rdma_issue_pending(struct dma_chan *chan)
{
	/* What was submitted stays queued for the next issue_pending. */
	if (rdma_atomic_caller(chan, "issue_pending"))
		return;
	chan_ops(chan)->issue_pending(to_rchan(chan)->ctx);
}

/* The cookies are counted in Rust, per client of the channel. */
static enum dma_status rdma_tx_status(struct dma_chan *chan,
				      dma_cookie_t cookie,
				      struct dma_tx_state *state)
{
	struct dma_tx_state ignored;

	return chan_ops(chan)->tx_status(to_rchan(chan)->ctx, cookie,
					 irqs_disabled(),
					 state ? state : &ignored);
}

/* Mirrored by `RawTxState` in rust/kernel/dmaengine/mod.rs. */
static_assert(sizeof(struct dma_tx_state) == 16);
static_assert(offsetof(struct dma_tx_state, residue) == 8);

static int rdma_terminate_all(struct dma_chan *chan)
{
	return chan_ops(chan)->terminate_all(to_rchan(chan)->ctx);
}

static void rdma_synchronize(struct dma_chan *chan)
{
	chan_ops(chan)->synchronize(to_rchan(chan)->ctx);
}

/*
 * Devices the core released, freed by a work item once the core is done
 * with them.  The core calls device_release from dma_release_channel() ->
 * dma_chan_put() when the last client lets go after the device was
 * unregistered, and then still touches the channel and its device (the
 * owner's module_put(), the debugfs client name) before it drops
 * dma_list_mutex; from dma_async_device_unregister() it calls it under that
 * mutex too.  The channels live in the rust_dma_device, so it may only be
 * freed after the mutex was let go: the work item takes the mutex once, by
 * asking for a slave channel of a device that has no capabilities at all,
 * which the core answers under dma_list_mutex and without touching
 * anything.  It runs on the queue Rust gave at allocation, the provider
 * module's own, which the module drains after its driver is gone and before
 * its code goes.
 */
static LLIST_HEAD(rust_dma_released);
static struct dma_device rust_dma_barrier = {
	.channels = LIST_HEAD_INIT(rust_dma_barrier.channels),
};

static void rust_dma_free_released(struct work_struct *work)
{
	struct llist_node *list = llist_del_all(&rust_dma_released);
	struct rust_dma_device *rdev, *next;

	if (!list)
		return;
	/* Returns NULL: the barrier device satisfies no capability mask. */
	WARN_ON_ONCE(dma_get_any_slave_channel(&rust_dma_barrier));
	llist_for_each_entry_safe(rdev, next, list, released)
		kfree(rdev);
}
static DECLARE_WORK(rust_dma_free_work, rust_dma_free_released);

static void rdma_release(struct dma_device *dma)
{
	struct rust_dma_device *rdev = to_rdev(dma);

	rdev->ops->release(rdev->ctx);
	put_device(dma->dev);
	llist_add(&rdev->released, &rust_dma_released);
	queue_work(rdev->free_wq, &rust_dma_free_work);
}

/* Provider side. */

/*
 * Records @size as the longest segment @dev's DMA takes, which clients that
 * split their own scatterlists read; false if @dev has no DMA parameters
 * (dma_set_max_seg_size() would warn).
 */
bool rust_dma_dev_set_max_seg(struct device *dev, u32 size)
{
	if (!dev->dma_parms)
		return false;
	dma_set_max_seg_size(dev, size);
	return true;
}

struct dma_device *rust_dma_device_alloc(struct device *dev,
					 unsigned int nr_chans,
					 const struct rust_dma_ops *ops,
					 void *ctx, void *const *chan_ctx,
					 struct workqueue_struct *free_wq)
{
	struct rust_dma_device *rdev;
	unsigned int i;

	rdev = kzalloc(struct_size(rdev, chans, nr_chans), GFP_KERNEL);
	if (!rdev)
		return NULL;
	rdev->nr_chans = nr_chans;
	rdev->free_wq = free_wq;
	rdev->ops = ops;
	rdev->ctx = ctx;

	INIT_LIST_HEAD(&rdev->dma.channels);
	dma_cap_set(DMA_MEMCPY, rdev->dma.cap_mask);
	/*
	 * Private: handed out by dma_request_channel() only, never to the
	 * async_tx API, whose dependency chains (dma_run_dependencies()) the
	 * Rust channels do not run.
	 */
	dma_cap_set(DMA_PRIVATE, rdev->dma.cap_mask);
	rdev->dma.copy_align = DMAENGINE_ALIGN_1_BYTE;
	rdev->dma.dev = get_device(dev);
	rdev->dma.directions = BIT(DMA_MEM_TO_MEM);
	rdev->dma.residue_granularity = DMA_RESIDUE_GRANULARITY_DESCRIPTOR;
	rdev->dma.device_alloc_chan_resources = rdma_alloc_chan_resources;
	rdev->dma.device_free_chan_resources = rdma_free_chan_resources;
	rdev->dma.device_prep_dma_memcpy = rdma_prep_memcpy;
	rdev->dma.device_issue_pending = rdma_issue_pending;
	rdev->dma.device_tx_status = rdma_tx_status;
	rdev->dma.device_terminate_all = rdma_terminate_all;
	rdev->dma.device_synchronize = rdma_synchronize;
	rdev->dma.device_release = rdma_release;

	for (i = 0; i < nr_chans; i++) {
		struct dma_chan *chan = &rdev->chans[i].chan;

		rdev->chans[i].ctx = chan_ctx[i];
		chan->device = &rdev->dma;
		list_add_tail(&chan->device_node, &rdev->dma.channels);
	}
	return &rdev->dma;
}

/* Frees a device that was never registered. */
void rust_dma_device_free(struct dma_device *dma)
{
	put_device(dma->dev);
	kfree(to_rdev(dma));
}

int rust_dma_device_register(struct dma_device *dma)
{
	return dma_async_device_register(dma);
}

/* Drops the registration's reference; release() follows the last one. */
void rust_dma_device_unregister(struct dma_device *dma)
{
	dma_async_device_unregister(dma);
}

struct dma_chan *rust_dma_device_chan(struct dma_device *dma, unsigned int i)
{
	return &to_rdev(dma)->chans[i].chan;
}

const char *rust_dma_chan_name(struct dma_chan *chan)
{
	return dma_chan_name(chan);
}

/* Descriptors. */

struct dma_async_tx_descriptor *rust_dma_desc_alloc(struct dma_chan *chan,
						    unsigned long idx)
{
	struct rust_dma_desc *d = kzalloc(sizeof(*d), GFP_KERNEL);

	if (!d)
		return NULL;
	d->idx = idx;
	dma_async_tx_descriptor_init(&d->txd, chan);
	d->txd.tx_submit = rdma_tx_submit;
	return &d->txd;
}

void rust_dma_desc_free(struct dma_async_tx_descriptor *txd)
{
	kfree(container_of(txd, struct rust_dma_desc, txd));
}

/*
 * Rust reads and writes a descriptor's cookie and flags in place (the
 * cookie counters are its own): the offsets it relies on.
 */
static_assert(offsetof(struct dma_async_tx_descriptor, cookie) == 0);
static_assert(offsetof(struct dma_async_tx_descriptor, flags) == 4);
static_assert(sizeof(dma_cookie_t) == 4 && sizeof(enum dma_ctrl_flags) == 4);

/*
 * Completes @txd: releases the client's unmap data and moves its callback
 * into @cb, for rust_dma_callback_invoke() once the driver holds no lock
 * that tx_status, terminate, prep or submit take: dmaengine.h lets a
 * callback call all of them.
 */
void rust_dma_desc_complete(struct dma_async_tx_descriptor *txd,
			    struct dmaengine_desc_callback *cb)
{
	dmaengine_desc_get_callback(txd, cb);
	txd->callback = NULL;
	txd->callback_result = NULL;
	dma_descriptor_unmap(txd);
}

/* Calls a callback taken by rust_dma_desc_complete(); never in hard IRQ. */
void rust_dma_callback_invoke(const struct dmaengine_desc_callback *cb,
			      enum dmaengine_tx_result result, u32 residue)
{
	struct dmaengine_result res = { .result = result, .residue = residue };

	dmaengine_desc_callback_invoke((struct dmaengine_desc_callback *)cb,
				       &res);
}

/* The Rust side keeps a callback as three opaque words. */
static_assert(sizeof(struct dmaengine_desc_callback) == 3 * sizeof(void *));

/* Client side: accessors and wrappers; the Rust client decides. */

/*
 * The first free memcpy channel @filter accepts, or NULL
 * (dma_request_channel() is a macro).
 */
struct dma_chan *rust_dma_request_memcpy_chan(dma_filter_fn filter,
					      void *param)
{
	dma_cap_mask_t mask;

	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	return dma_request_channel(mask, filter, param);
}

/* Whether @chan's driver implements device_terminate_all. */
bool rust_dma_chan_has_terminate(struct dma_chan *chan)
{
	return chan->device->device_terminate_all;
}

/* Whether @chan's driver implements device_release. */
bool rust_dma_chan_has_release(struct dma_chan *chan)
{
	return chan->device->device_release;
}

/* The longest transfer one descriptor of @chan may carry. */
u32 rust_dma_chan_max_seg(struct dma_chan *chan)
{
	return dma_get_max_seg_size(chan->device->dev);
}

/*
 * A client's watch on the device behind a channel: @fn(@ctx) runs when the
 * device's driver is about to be unbound, while the channel still works,
 * so the client can stop and unmap its DMA in time.
 */
struct rust_dma_watch {
	struct notifier_block nb;
	struct device *dev;
	const struct bus_type *bus;
	rust_dma_removal_fn fn;
	void *ctx;
	bool holds_module;
	struct list_head scoped;	/* on rust_dma_scoped_watches */
};

/*
 * This module's watches that hold no reference on it: the module ends
 * those still registered at its exit (rust_dma_client_unwatch_scoped()),
 * so that none outlives its code. This file is built into each module, so
 * the list is the module's own.
 */
static LIST_HEAD(rust_dma_scoped_watches);
static DEFINE_MUTEX(rust_dma_scoped_lock);

static int rust_dma_watch_call(struct notifier_block *nb, unsigned long action,
			       void *data)
{
	struct rust_dma_watch *w = container_of(nb, struct rust_dma_watch, nb);

	if (action == BUS_NOTIFY_UNBIND_DRIVER && data == w->dev)
		w->fn(w->ctx);
	return NOTIFY_DONE;
}

struct rust_dma_watch *rust_dma_client_watch(struct dma_chan *chan,
					     rust_dma_removal_fn fn, void *ctx,
					     bool hold_module)
{
	struct device *dev = chan->device->dev;
	struct rust_dma_watch *w;
	int ret;

	if (!dev->bus)
		return ERR_PTR(-EINVAL);
	w = kzalloc(sizeof(*w), GFP_KERNEL);
	if (!w)
		return ERR_PTR(-ENOMEM);
	w->nb.notifier_call = rust_dma_watch_call;
	w->dev = get_device(dev);
	w->bus = dev->bus;
	w->fn = fn;
	w->ctx = ctx;
	w->holds_module = hold_module;
	INIT_LIST_HEAD(&w->scoped);
	if (hold_module)
		__module_get(THIS_MODULE);
	ret = bus_register_notifier(w->bus, &w->nb);
	if (ret) {
		if (hold_module)
			module_put(THIS_MODULE);
		put_device(w->dev);
		kfree(w);
		return ERR_PTR(ret);
	}
	if (!hold_module) {
		mutex_lock(&rust_dma_scoped_lock);
		list_add(&w->scoped, &rust_dma_scoped_watches);
		mutex_unlock(&rust_dma_scoped_lock);
	}
	return w;
}

/*
 * Whether the driver of @chan's device is bound and not being unbound.
 * The driver core marks a device unbinding before it sends
 * BUS_NOTIFY_UNBIND_DRIVER, so a watch registered first and this read
 * after cannot both miss an unbind.
 */
bool rust_dma_chan_dev_bound(struct dma_chan *chan)
{
	return READ_ONCE(chan->device->dev->links.status) == DL_DEV_DRIVER_BOUND;
}

/*
 * Ends a watch; waits for a call in progress.  The module reference it
 * drops is never the last one while the caller runs: the caller is this
 * module's code, running on a reference of its own (an open file's, a
 * device's binding).
 */
void rust_dma_client_unwatch(struct rust_dma_watch *w)
{
	bool holds_module = w->holds_module;

	if (!holds_module) {
		mutex_lock(&rust_dma_scoped_lock);
		list_del(&w->scoped);
		mutex_unlock(&rust_dma_scoped_lock);
	}
	bus_unregister_notifier(w->bus, &w->nb);
	put_device(w->dev);
	kfree(w);
	if (holds_module)
		module_put(THIS_MODULE);
}

/*
 * Ends every watch of rust_dma_scoped_watches still registered (their
 * owners were leaked: their contexts stay allocated); returns how many.
 */
unsigned int rust_dma_client_unwatch_scoped(void)
{
	struct rust_dma_watch *w, *next;
	unsigned int n = 0;

	mutex_lock(&rust_dma_scoped_lock);
	list_for_each_entry_safe(w, next, &rust_dma_scoped_watches, scoped) {
		list_del(&w->scoped);
		bus_unregister_notifier(w->bus, &w->nb);
		put_device(w->dev);
		kfree(w);
		n++;
	}
	mutex_unlock(&rust_dma_scoped_lock);
	return n;
}

void rust_dma_release_chan(struct dma_chan *chan)
{
	dma_release_channel(chan);
}

/* The device that maps buffers for @chan (the engine's PCI function). */
struct device *rust_dma_chan_dev(struct dma_chan *chan)
{
	return chan->device->dev;
}

struct dma_async_tx_descriptor *
rust_dma_client_prep_memcpy(struct dma_chan *chan, dma_addr_t dst,
			    dma_addr_t src, size_t len, unsigned long flags)
{
	return dmaengine_prep_dma_memcpy(chan, dst, src, len, flags);
}

/* Mirrored by `RawResult` in rust/kernel/dmaengine/mod.rs. */
static_assert(sizeof(struct dmaengine_result) == 8);
static_assert(offsetof(struct dmaengine_result, residue) == 4);

/*
 * Submits @txd with the client's @done(@param) as its result callback;
 * returns the cookie.  Nothing is allocated: the Rust client made @param
 * before the prep.
 */
dma_cookie_t rust_dma_client_submit(struct dma_async_tx_descriptor *txd,
				    dma_async_tx_callback_result done,
				    void *param)
{
	txd->callback_result = done;
	txd->callback_param = param;
	return dmaengine_submit(txd);
}

void rust_dma_client_issue_pending(struct dma_chan *chan)
{
	dma_async_issue_pending(chan);
}

/*
 * Asks the driver for @cookie's status, which makes it reap what the engine
 * finished (and run those callbacks).  Returns whether @cookie is complete.
 */
bool rust_dma_client_tx_complete(struct dma_chan *chan, dma_cookie_t cookie)
{
	return dma_async_is_tx_complete(chan, cookie, NULL, NULL) == DMA_COMPLETE;
}

/*
 * dmaengine_synchronize() cannot report an engine that would not stop: the
 * cookies it was working on then stay in progress.  A provider that knows
 * its engine is dead fails the next terminate (rust_plx_dma does); any
 * other has stopped and merely left terminated cookies incomplete, as
 * virt-dma drivers do, and a second terminate costs it nothing.
 */
int rust_dma_client_terminate_sync(struct dma_chan *chan)
{
	int ret = dmaengine_terminate_sync(chan);

	if (ret || dmaengine_tx_status(chan, chan->cookie, NULL) != DMA_IN_PROGRESS)
		return ret;
	return dmaengine_terminate_sync(chan);
}

/*
 * A kmalloc'ed buffer with a bidirectional streaming mapping for @dev.
 * Returns the CPU address, or NULL with nothing left allocated.
 */
void *rust_dma_buf_alloc(struct device *dev, size_t size, dma_addr_t *dma)
{
	void *buf = kzalloc(size, GFP_KERNEL);

	if (!buf)
		return NULL;
	*dma = dma_map_single(dev, buf, size, DMA_BIDIRECTIONAL);
	if (dma_mapping_error(dev, *dma)) {
		kfree(buf);
		return NULL;
	}
	return buf;
}

void rust_dma_buf_free(struct device *dev, void *buf, size_t size,
		       dma_addr_t dma)
{
	dma_unmap_single(dev, dma, size, DMA_BIDIRECTIONAL);
	kfree(buf);
}

/* Ownership hand-over between the CPU and the device. */
void rust_dma_buf_for_cpu(struct device *dev, dma_addr_t dma, size_t size)
{
	dma_sync_single_for_cpu(dev, dma, size, DMA_BIDIRECTIONAL);
}

void rust_dma_buf_for_device(struct device *dev, dma_addr_t dma, size_t size)
{
	dma_sync_single_for_device(dev, dma, size, DMA_BIDIRECTIONAL);
}
