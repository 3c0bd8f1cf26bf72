// SPDX-License-Identifier: GPL-2.0
/*
 * A dmaengine client that calls back into its channel from its own
 * completion callbacks, as <linux/dmaengine.h> allows: dmaengine_tx_status()
 * on a cookie that has not completed, dmaengine_terminate_async(), and
 * prep + submit + issue_pending of a new copy.  A provider that runs
 * callbacks under a lock those paths take deadlocks here (lockdep reports
 * the recursion first).  One case does what dmaengine forbids, and checks
 * that the provider survives it: submitting the same descriptor twice must
 * give an error cookie the second time, and the copy must complete once (a
 * provider that queues it twice completes it twice, which the core's
 * dma_cookie_complete() answers with a BUG).  Another calls in with
 * interrupts disabled, which rust_plx_dma's _bh ring locks cannot take:
 * prep and issue_pending must refuse, tx_status answer without reaping,
 * and the copy queued meanwhile run at the next issue_pending.  The last
 * calls dmaengine_terminate_async() with interrupts off and from a hard
 * interrupt, where dmaengine allows it too.  And release-busy lets go of
 * the channel with a copy in flight on an engine armed to stay busy (the
 * emulator's "busy" fault): the provider stops it under the core's global
 * dma_list_mutex, so it must abort at once rather than wait for a pause
 * (it takes 0.5 s at most, and the channel can be taken again).
 *
 * It is a plain C client on purpose: it uses the raw dmaengine API the way
 * in-tree clients do, with nothing of the project's Rust client.  Loading
 * runs the cases named by @cases on channel @channel and fails (-EIO) if
 * one does; the KTAP lines in the kernel log say which.  A load that
 * succeeded leaves nothing behind but the module: unload it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/delay.h>
#include <linux/dma-mapping.h>
#include <linux/dmaengine.h>
#include <linux/hrtimer.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>

static char *channel;
module_param(channel, charp, 0444);
MODULE_PARM_DESC(channel, "memcpy channel to use, e.g. dma0chan0 (required)");

static char *cases = "poll,terminate,resubmit,double-submit,irqs-off,atomic-stop";
module_param(cases, charp, 0444);
MODULE_PARM_DESC(cases, "comma-separated cases: poll, terminate, resubmit, double-submit, irqs-off, atomic-stop, release-busy (not by default: arm the engine's busy fault first)");

#define CHUNK	SZ_64K
#define COPIES	4
#define WAIT_MS	5000

struct ctx {
	struct dma_chan *chan;
	struct device *dev;
	u8 *src, *dst;
	dma_addr_t src_dma, dst_dma;
	dma_cookie_t cookie[COPIES + 1];
	enum dma_status seen;		/* what the callback's tx_status said */
	int terminate_ret;		/* what the callback's terminate said */
	int resubmitted;		/* the callback's prep + submit worked */
	atomic_t called[COPIES + 1];
	enum dmaengine_tx_result result[COPIES + 1];
	struct completion last;
	const char *mode;
	struct hrtimer timer;		/* atomic-stop: a hard interrupt */
	struct completion fired;	/* ... which has run */
};

struct cb_arg {
	struct ctx *c;
	int idx;
};

static struct cb_arg args[COPIES + 1];

static int submit_one(struct ctx *c, int idx, bool interrupt);

static void callback(void *param, const struct dmaengine_result *res)
{
	struct cb_arg *a = param;
	struct ctx *c = a->c;

	c->result[a->idx] = res->result;
	atomic_inc(&c->called[a->idx]);
	if (a->idx == 0) {
		if (!strcmp(c->mode, "poll")) {
			c->seen = dmaengine_tx_status(c->chan, c->cookie[COPIES - 1], NULL);
		} else if (!strcmp(c->mode, "terminate")) {
			c->terminate_ret = dmaengine_terminate_async(c->chan);
			complete(&c->last);
		} else if (!strcmp(c->mode, "resubmit")) {
			c->resubmitted = submit_one(c, COPIES, true) == 0;
			dma_async_issue_pending(c->chan);
		}
	}
	if (a->idx == COPIES || (a->idx == COPIES - 1 && strcmp(c->mode, "resubmit")))
		complete(&c->last);
}

/* Copy @idx moves chunk @idx of the source to the same place in dst. */
static int submit_one(struct ctx *c, int idx, bool interrupt)
{
	struct dma_async_tx_descriptor *tx;
	unsigned long flags = DMA_CTRL_ACK | (interrupt ? DMA_PREP_INTERRUPT : 0);

	tx = dmaengine_prep_dma_memcpy(c->chan, c->dst_dma + idx * CHUNK,
				       c->src_dma + idx * CHUNK, CHUNK, flags);
	if (!tx)
		return -ENOMEM;
	args[idx] = (struct cb_arg){ .c = c, .idx = idx };
	tx->callback_result = callback;
	tx->callback_param = &args[idx];
	c->cookie[idx] = dmaengine_submit(tx);
	return dma_submit_error(c->cookie[idx]) ? c->cookie[idx] : 0;
}

static bool chunk_copied(struct ctx *c, int idx)
{
	return !memcmp(c->src + idx * CHUNK, c->dst + idx * CHUNK, CHUNK);
}

/*
 * Prepares the one copy of a single-copy case (chunk 0), whose callback
 * ends the case: it is counted as copy COPIES - 1 (see callback()).
 */
static struct dma_async_tx_descriptor *prep_single(struct ctx *c)
{
	struct dma_async_tx_descriptor *tx;

	tx = dmaengine_prep_dma_memcpy(c->chan, c->dst_dma, c->src_dma, CHUNK,
				       DMA_CTRL_ACK | DMA_PREP_INTERRUPT);
	if (!tx) {
		pr_err("%s: prep failed\n", c->mode);
		return NULL;
	}
	args[COPIES - 1] = (struct cb_arg){ .c = c, .idx = COPIES - 1 };
	tx->callback_result = callback;
	tx->callback_param = &args[COPIES - 1];
	return tx;
}

/* Waits for the copy of prep_single(): its callback ran once, data right. */
static bool single_done(struct ctx *c)
{
	if (!wait_for_completion_timeout(&c->last, msecs_to_jiffies(WAIT_MS))) {
		pr_err("%s: no completion within %d ms\n", c->mode, WAIT_MS);
		dmaengine_terminate_sync(c->chan);
		return false;
	}
	dmaengine_synchronize(c->chan);
	if (atomic_read(&c->called[COPIES - 1]) != 1 || !chunk_copied(c, 0)) {
		pr_err("%s: callback ran %d times, data %s\n", c->mode,
		       atomic_read(&c->called[COPIES - 1]),
		       chunk_copied(c, 0) ? "right" : "wrong");
		return false;
	}
	return true;
}

/*
 * One copy submitted twice: the second dmaengine_submit() must fail, and
 * the copy complete once, correctly.
 */
static bool double_submit(struct ctx *c)
{
	struct dma_async_tx_descriptor *tx = prep_single(c);
	dma_cookie_t again;
	bool ok = true;

	if (!tx)
		return false;
	c->cookie[0] = dmaengine_submit(tx);
	again = dmaengine_submit(tx);
	dma_async_issue_pending(c->chan);
	if (dma_submit_error(c->cookie[0])) {
		pr_err("%s: first submit: %d\n", c->mode, c->cookie[0]);
		ok = false;
	}
	if (!dma_submit_error(again)) {
		pr_err("%s: second submit of one descriptor gave cookie %d\n", c->mode, again);
		ok = false;
	}
	return single_done(c) && ok;
}

/*
 * A client with interrupts off: issue_pending and prep are refused, so the
 * copy submitted before stays queued (no callback, status in progress),
 * and the next issue_pending with interrupts on runs it.
 */
static bool irqs_off(struct ctx *c)
{
	struct dma_async_tx_descriptor *tx = prep_single(c), *refused;
	enum dma_status st;
	unsigned long flags;
	bool ok = true;

	if (!tx)
		return false;
	c->cookie[0] = dmaengine_submit(tx);
	if (dma_submit_error(c->cookie[0])) {
		pr_err("%s: submit: %d\n", c->mode, c->cookie[0]);
		return false;
	}
	local_irq_save(flags);
	dma_async_issue_pending(c->chan);
	st = dmaengine_tx_status(c->chan, c->cookie[0], NULL);
	refused = dmaengine_prep_dma_memcpy(c->chan, c->dst_dma + CHUNK,
					    c->src_dma + CHUNK, CHUNK, DMA_CTRL_ACK);
	local_irq_restore(flags);
	if (refused) {
		pr_err("%s: prep with interrupts off gave a descriptor\n", c->mode);
		ok = false;
	}
	if (st != DMA_IN_PROGRESS) {
		pr_err("%s: tx_status with interrupts off said %d\n", c->mode, st);
		ok = false;
	}
	/* Refused, the issue started nothing: the copy is still queued. */
	msleep(50);
	if (atomic_read(&c->called[COPIES - 1]) ||
	    dma_async_is_tx_complete(c->chan, c->cookie[0], NULL, NULL) != DMA_IN_PROGRESS) {
		pr_err("%s: the copy ran without an issue_pending that was taken\n", c->mode);
		ok = false;
	}
	dma_async_issue_pending(c->chan);
	return single_done(c) && ok;
}

static enum hrtimer_restart stop_from_hardirq(struct hrtimer *t)
{
	struct ctx *c = container_of(t, struct ctx, timer);

	c->terminate_ret = dmaengine_terminate_async(c->chan);
	complete(&c->fired);
	return HRTIMER_NORESTART;
}

/*
 * dmaengine_terminate_async() in atomic context, with interrupts off (as
 * under a client's irqsave lock) or from a hard interrupt handler (an
 * hrtimer in hard mode): it returns 0 without taking a lock that is not
 * IRQ-safe there (lockdep and the _bh code would report that); after
 * dmaengine_synchronize() no copy submitted before it is pending and none
 * reported done is wrong; a copy submitted after it runs.
 */
static bool atomic_stop(struct ctx *c, bool hardirq)
{
	const char *how = hardirq ? "from a hard interrupt" : "with interrupts off";
	unsigned long flags;
	bool ok = true;
	int i, ret;

	for (i = 0; i <= COPIES; i++)
		atomic_set(&c->called[i], 0);
	memset(c->dst, 0, (COPIES + 1) * CHUNK);
	for (i = 0; i < COPIES; i++) {
		ret = submit_one(c, i, true);
		if (ret) {
			pr_err("%s: submit %d: %d\n", c->mode, i, ret);
			dmaengine_terminate_sync(c->chan);
			return false;
		}
	}
	dma_async_issue_pending(c->chan);
	c->terminate_ret = 1;
	if (hardirq) {
		reinit_completion(&c->fired);
		hrtimer_start(&c->timer, ns_to_ktime(1000), HRTIMER_MODE_REL_HARD);
		wait_for_completion(&c->fired);
	} else {
		local_irq_save(flags);
		c->terminate_ret = dmaengine_terminate_async(c->chan);
		local_irq_restore(flags);
	}
	if (c->terminate_ret) {
		pr_err("%s: terminate_async %s: %d\n", c->mode, how, c->terminate_ret);
		ok = false;
	}
	ret = submit_one(c, COPIES, true);
	if (ret) {
		pr_err("%s: submit after the terminate: %d\n", c->mode, ret);
		dmaengine_terminate_sync(c->chan);
		return false;
	}
	dmaengine_synchronize(c->chan);
	for (i = 0; i < COPIES; i++) {
		if (dma_async_is_tx_complete(c->chan, c->cookie[i], NULL, NULL) == DMA_IN_PROGRESS ||
		    atomic_read(&c->called[i]) > 1) {
			pr_err("%s: copy %d %s: callback ran %d times, status pending\n", c->mode,
			       i, how, atomic_read(&c->called[i]));
			ok = false;
		} else if (atomic_read(&c->called[i]) && c->result[i] == DMA_TRANS_NOERROR &&
			   !chunk_copied(c, i)) {
			pr_err("%s: copy %d reported done but wrong\n", c->mode, i);
			ok = false;
		}
	}
	/* dma_sync_wait() issues and polls, for up to 5 s. */
	if (dma_sync_wait(c->chan, c->cookie[COPIES]) != DMA_COMPLETE ||
	    c->result[COPIES] != DMA_TRANS_NOERROR || !chunk_copied(c, COPIES)) {
		pr_err("%s: the copy submitted after the terminate %s did not run right\n",
		       c->mode, how);
		ok = false;
	}
	dmaengine_synchronize(c->chan);
	return ok;
}

static bool chan_named(struct dma_chan *chan, void *name)
{
	return !strcmp(dma_chan_name(chan), name);
}

static struct dma_chan *request_named(const char *name)
{
	dma_cap_mask_t mask;

	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	return dma_request_channel(mask, chan_named, (void *)name);
}

#define RELEASE_MAX_MS	500

/*
 * Releases the channel with a copy in flight (no terminate first), times
 * the release and takes the channel again.
 */
static bool release_busy(struct ctx *c)
{
	ktime_t start;
	s64 ms;
	int ret;

	ret = submit_one(c, 0, true);
	if (ret) {
		pr_err("release-busy: submit: %d\n", ret);
		return false;
	}
	dma_async_issue_pending(c->chan);
	start = ktime_get();
	dma_release_channel(c->chan);
	ms = ktime_ms_delta(ktime_get(), start);
	c->chan = request_named(channel);
	pr_info("# release-busy: the release took %lld ms\n", ms);
	if (!c->chan) {
		pr_err("release-busy: %s could not be taken again\n", channel);
		return false;
	}
	if (ms > RELEASE_MAX_MS) {
		pr_err("release-busy: the release took %lld ms (at most %d)\n",
		       ms, RELEASE_MAX_MS);
		return false;
	}
	/* The copy ended (aborted) before the release returned. */
	if (atomic_read(&c->called[0]) != 1) {
		pr_err("release-busy: the copy's callback ran %d times\n",
		       atomic_read(&c->called[0]));
		return false;
	}
	return true;
}

/* Runs one case; returns whether it passed, reasons in the log. */
static bool run_case(struct ctx *c, const char *mode)
{
	bool ok = true;
	int i, ret;

	c->mode = mode;
	c->seen = DMA_ERROR;
	c->terminate_ret = 1;
	c->resubmitted = 0;
	reinit_completion(&c->last);
	for (i = 0; i <= COPIES; i++) {
		atomic_set(&c->called[i], 0);
		c->result[i] = DMA_TRANS_NOERROR;
	}
	get_random_bytes(c->src, (COPIES + 1) * CHUNK);
	memset(c->dst, 0, (COPIES + 1) * CHUNK);
	if (!strcmp(mode, "double-submit"))
		return double_submit(c);
	if (!strcmp(mode, "irqs-off"))
		return irqs_off(c);
	if (!strcmp(mode, "release-busy"))
		return release_busy(c);
	if (!strcmp(mode, "atomic-stop")) {
		bool irqs = atomic_stop(c, false);

		return atomic_stop(c, true) && irqs;
	}
	for (i = 0; i < COPIES; i++) {
		ret = submit_one(c, i, true);
		if (ret) {
			pr_err("%s: submit %d: %d\n", mode, i, ret);
			dmaengine_terminate_sync(c->chan);
			return false;
		}
	}
	dma_async_issue_pending(c->chan);
	if (!wait_for_completion_timeout(&c->last, msecs_to_jiffies(WAIT_MS))) {
		pr_err("%s: no completion within %d ms\n", mode, WAIT_MS);
		dmaengine_terminate_sync(c->chan);
		return false;
	}
	if (!strcmp(mode, "terminate")) {
		/* Settles every copy; afterwards no callback runs. */
		dmaengine_synchronize(c->chan);
		if (c->terminate_ret) {
			pr_err("%s: terminate_async from the callback: %d\n", mode,
			       c->terminate_ret);
			ok = false;
		}
		for (i = 0; i < COPIES; i++) {
			enum dma_status st = dma_async_is_tx_complete(c->chan, c->cookie[i], NULL, NULL);

			if (st == DMA_IN_PROGRESS) {
				pr_err("%s: copy %d still in progress after synchronize\n", mode, i);
				ok = false;
			}
			/* A copy reported done must be correct. */
			if (atomic_read(&c->called[i]) &&
			    c->result[i] == DMA_TRANS_NOERROR && !chunk_copied(c, i)) {
				pr_err("%s: copy %d reported done but wrong\n", mode, i);
				ok = false;
			}
		}
		return ok;
	}
	dmaengine_synchronize(c->chan);
	for (i = 0; i < COPIES + !strcmp(mode, "resubmit"); i++) {
		if (atomic_read(&c->called[i]) != 1 || c->result[i] != DMA_TRANS_NOERROR) {
			pr_err("%s: copy %d: callback ran %d times, result %d\n", mode, i,
			       atomic_read(&c->called[i]), c->result[i]);
			ok = false;
		} else if (!chunk_copied(c, i)) {
			pr_err("%s: copy %d: data differ\n", mode, i);
			ok = false;
		}
	}
	if (!strcmp(mode, "poll") && c->seen == DMA_ERROR) {
		pr_err("%s: tx_status from the callback said DMA_ERROR\n", mode);
		ok = false;
	}
	if (!strcmp(mode, "resubmit") && !c->resubmitted) {
		pr_err("%s: prep + submit from the callback failed\n", mode);
		ok = false;
	}
	return ok;
}


static int __init plx_callback_client_init(void)
{
	static const char *const known[] = {
		"poll", "terminate", "resubmit", "double-submit", "irqs-off",
		"atomic-stop", "release-busy",
	};
	struct ctx *c;
	size_t bytes = (COPIES + 1) * CHUNK;
	int i, n = 0, failed = 0;

	if (!channel || !*channel) {
		pr_err("channel= is required\n");
		return -EINVAL;
	}
	c = kzalloc(sizeof(*c), GFP_KERNEL);
	if (!c)
		return -ENOMEM;
	init_completion(&c->last);
	init_completion(&c->fired);
	hrtimer_setup(&c->timer, stop_from_hardirq, CLOCK_MONOTONIC, HRTIMER_MODE_REL_HARD);
	c->chan = request_named(channel);
	if (!c->chan) {
		pr_err("%s: no such free memcpy channel\n", channel);
		kfree(c);
		return -ENODEV;
	}
	c->dev = c->chan->device->dev;
	c->src = dma_alloc_coherent(c->dev, bytes, &c->src_dma, GFP_KERNEL);
	c->dst = dma_alloc_coherent(c->dev, bytes, &c->dst_dma, GFP_KERNEL);
	if (!c->src || !c->dst) {
		failed = -ENOMEM;
		goto out;
	}
	pr_info("KTAP version 1\n");
	for (i = 0; i < ARRAY_SIZE(known); i++) {
		if (!strstr(cases, known[i]))
			continue;
		n++;
		if (run_case(c, known[i])) {
			pr_info("ok %d %s on %s\n", n, known[i], channel);
		} else {
			pr_info("not ok %d %s on %s\n", n, known[i], channel);
			failed = -EIO;
		}
	}
	pr_info("1..%d\n", n);
	if (!n) {
		pr_err("cases=%s names no case\n", cases);
		failed = -EINVAL;
	}
out:
	hrtimer_cancel(&c->timer);
	if (!c->chan) {
		/* release-busy could not take it back: nothing is mapped for it. */
		dma_free_coherent(c->dev, bytes, c->src, c->src_dma);
		dma_free_coherent(c->dev, bytes, c->dst, c->dst_dma);
		kfree(c);
		return failed;
	}
	dmaengine_terminate_sync(c->chan);
	if (c->src)
		dma_free_coherent(c->dev, bytes, c->src, c->src_dma);
	if (c->dst)
		dma_free_coherent(c->dev, bytes, c->dst, c->dst_dma);
	dma_release_channel(c->chan);
	kfree(c);
	return failed;
}
module_init(plx_callback_client_init);

/* Everything was released at load. */
static void __exit plx_callback_client_exit(void)
{
}
module_exit(plx_callback_client_exit);

MODULE_DESCRIPTION("dmaengine client that re-enters its channel from its callbacks");
MODULE_LICENSE("GPL");
