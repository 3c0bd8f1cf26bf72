// SPDX-License-Identifier: GPL-2.0
/*
 * Client styles a memcpy provider meets in the wild, each as one case,
 * written against the raw dmaengine API so that it runs unchanged on any
 * provider (rust_plx_dma, the C plx_dma):
 *
 *  polled     copies prepared without DMA_PREP_INTERRUPT and waited for
 *             with dma_sync_wait(), as async_tx users without callbacks do;
 *  guard      odd lengths at odd source and destination offsets, each
 *             destination fenced by guard bytes that must stay untouched;
 *  flood      prep + submit without issue_pending until the provider
 *             refuses a descriptor, then one issue_pending for them all;
 *  terminate  hundreds of copies in flight, then dmaengine_terminate_sync():
 *             every cookie must settle (complete or error, none in
 *             progress), each callback run at most once, and every copy
 *             reported done must hold the right bytes;
 *  churn      request a channel, copy once, release it, many times.
 *
 * Loading runs the cases named by @cases on @channel (or any free memcpy
 * channel) and prints one KTAP line per case; the load fails (-EIO) if one
 * failed, with the reason in the log.  A provider without
 * device_terminate_all skips "terminate" with a reason, which the caller
 * must not count as a pass.  Unload it afterwards.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/dmaengine.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/slab.h>
#include <linux/string.h>

static char *channel = "";
module_param(channel, charp, 0444);
MODULE_PARM_DESC(channel, "memcpy channel, e.g. dma0chan0 (default: any free one)");

static char *cases = "polled,guard,flood,terminate,churn";
module_param(cases, charp, 0444);
MODULE_PARM_DESC(cases, "comma-separated cases: polled, guard, flood, terminate, churn");

static unsigned int churn = 200;
module_param(churn, uint, 0444);
MODULE_PARM_DESC(churn, "request/copy/release rounds of the churn case (1..100000)");

#define BUF_SIZE	SZ_1M
#define GUARD		64
#define GUARD_BYTE	0x5a
#define MAX_COPIES	4096
#define WAIT_MS		10000

struct ctx {
	struct dma_chan *chan;
	struct device *dev;
	u8 *src, *dst;
	dma_addr_t src_dma, dst_dma;
	dma_cookie_t cookie[MAX_COPIES];
	atomic_t called[MAX_COPIES];
	enum dmaengine_tx_result result[MAX_COPIES];
	atomic_t done;
	unsigned int want;
	struct completion all;
};

struct cb_arg {
	struct ctx *c;
	unsigned int idx;
};

static struct cb_arg args[MAX_COPIES];

/* The channel the cases run on, once taken: churn takes it again by name. */
static char taken[32];

static bool want_channel(struct dma_chan *chan, void *param)
{
	const char *name = *taken ? taken : channel;

	return !*name || !strcmp(dma_chan_name(chan), name);
}

static struct dma_chan *request(void)
{
	dma_cap_mask_t mask;

	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	return dma_request_channel(mask, want_channel, NULL);
}

static void callback(void *param, const struct dmaengine_result *res)
{
	struct cb_arg *a = param;
	struct ctx *c = a->c;

	c->result[a->idx] = res->result;
	atomic_inc(&c->called[a->idx]);
	if (atomic_inc_return(&c->done) == c->want)
		complete(&c->all);
}

static void reset(struct ctx *c, unsigned int want)
{
	unsigned int i;

	get_random_bytes(c->src, BUF_SIZE);
	memset(c->dst, GUARD_BYTE, BUF_SIZE);
	for (i = 0; i < MAX_COPIES; i++) {
		atomic_set(&c->called[i], 0);
		c->result[i] = DMA_TRANS_NOERROR;
		c->cookie[i] = -EINVAL;
	}
	atomic_set(&c->done, 0);
	c->want = want;
	reinit_completion(&c->all);
}

/* Prepares and submits copy @idx; NULL-prep gives -ENOSPC. */
static int submit(struct ctx *c, unsigned int idx, size_t dst, size_t src, size_t len,
		  unsigned long flags)
{
	struct dma_async_tx_descriptor *tx;

	tx = dmaengine_prep_dma_memcpy(c->chan, c->dst_dma + dst, c->src_dma + src, len,
				       flags | DMA_CTRL_ACK);
	if (!tx)
		return -ENOSPC;
	if (flags & DMA_PREP_INTERRUPT) {
		args[idx] = (struct cb_arg){ .c = c, .idx = idx };
		tx->callback_result = callback;
		tx->callback_param = &args[idx];
	}
	c->cookie[idx] = dmaengine_submit(tx);
	return dma_submit_error(c->cookie[idx]) ? c->cookie[idx] : 0;
}

/* Whether dst[at, at+len) holds src[from, from+len). */
static bool copied(struct ctx *c, size_t at, size_t from, size_t len)
{
	return !memcmp(c->dst + at, c->src + from, len);
}

static bool guard_intact(struct ctx *c, size_t at, size_t len)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (c->dst[at + i] != GUARD_BYTE)
			return false;
	return true;
}

static int case_polled(struct ctx *c)
{
	const unsigned int n = 64;
	unsigned int i;
	int ret;

	reset(c, n);
	for (i = 0; i < n; i++) {
		ret = submit(c, i, i * 4096, i * 4096, 4096, 0);
		if (ret) {
			pr_err("polled: submit %u: %d\n", i, ret);
			return ret;
		}
		dma_async_issue_pending(c->chan);
		if (dma_sync_wait(c->chan, c->cookie[i]) != DMA_COMPLETE) {
			pr_err("polled: copy %u did not complete\n", i);
			return -EIO;
		}
		if (!copied(c, i * 4096, i * 4096, 4096)) {
			pr_err("polled: copy %u complete but wrong\n", i);
			return -EIO;
		}
	}
	return 0;
}

static int case_guard(struct ctx *c)
{
	static const size_t lens[] = { 1, 2, 3, 7, 17, 255, 511, 4095, 4097, 65537 };
	static const size_t offs[] = { 0, 1, 3, 5, 8, 63, 4095 };
	size_t at = GUARD, len, src_off, dst_off;
	unsigned int i, n = 0;
	int ret;

	reset(c, ARRAY_SIZE(lens) * ARRAY_SIZE(offs));
	for (i = 0; i < c->want; i++) {
		len = lens[i % ARRAY_SIZE(lens)];
		src_off = offs[(i / ARRAY_SIZE(lens)) % ARRAY_SIZE(offs)];
		dst_off = offs[(i + 3) % ARRAY_SIZE(offs)];
		at += dst_off;
		if (at + len + GUARD > BUF_SIZE || src_off + len > BUF_SIZE)
			break;
		ret = submit(c, i, at, src_off, len, DMA_PREP_INTERRUPT);
		if (ret) {
			pr_err("guard: submit %u (len %zu): %d\n", i, len, ret);
			return ret;
		}
		at += len + GUARD;
		n++;
	}
	c->want = n;
	dma_async_issue_pending(c->chan);
	if (!wait_for_completion_timeout(&c->all, msecs_to_jiffies(WAIT_MS))) {
		pr_err("guard: %d of %u copies done in %d ms\n", atomic_read(&c->done), n, WAIT_MS);
		return -ETIMEDOUT;
	}
	/* Walk the same layout again and check each copy and its fences. */
	at = GUARD;
	if (!guard_intact(c, 0, GUARD)) {
		pr_err("guard: leading guard overwritten\n");
		return -EIO;
	}
	for (i = 0; i < n; i++) {
		len = lens[i % ARRAY_SIZE(lens)];
		src_off = offs[(i / ARRAY_SIZE(lens)) % ARRAY_SIZE(offs)];
		dst_off = offs[(i + 3) % ARRAY_SIZE(offs)];
		if (!guard_intact(c, at, dst_off)) {
			pr_err("guard: bytes before copy %u overwritten\n", i);
			return -EIO;
		}
		at += dst_off;
		if (c->result[i] != DMA_TRANS_NOERROR || !copied(c, at, src_off, len)) {
			pr_err("guard: copy %u (len %zu, src +%zu, dst +%zu) result %d, data %s\n",
			       i, len, src_off, at, c->result[i],
			       copied(c, at, src_off, len) ? "right" : "wrong");
			return -EIO;
		}
		if (!guard_intact(c, at + len, GUARD)) {
			pr_err("guard: guard after copy %u (len %zu) overwritten\n", i, len);
			return -EIO;
		}
		at += len + GUARD;
	}
	return 0;
}

static int case_flood(struct ctx *c)
{
	unsigned int i, n = 0;
	int ret = 0;

	reset(c, MAX_COPIES);
	for (i = 0; i < MAX_COPIES; i++) {
		ret = submit(c, i, (i * 256) % BUF_SIZE, (i * 256) % BUF_SIZE, 256,
			     DMA_PREP_INTERRUPT);
		if (ret)
			break;
		n++;
	}
	if (ret != -ENOSPC || !n) {
		pr_err("flood: %u submitted, then %d (expected a refused prep)\n", n, ret);
		if (n) {
			c->want = n;
			dma_async_issue_pending(c->chan);
			wait_for_completion_timeout(&c->all, msecs_to_jiffies(WAIT_MS));
		}
		return ret ? ret : -EIO;
	}
	c->want = n;
	if (atomic_read(&c->done)) {
		pr_err("flood: %d copies completed before issue_pending\n", atomic_read(&c->done));
		return -EIO;
	}
	dma_async_issue_pending(c->chan);
	if (!wait_for_completion_timeout(&c->all, msecs_to_jiffies(WAIT_MS))) {
		pr_err("flood: %d of %u copies done in %d ms\n", atomic_read(&c->done), n, WAIT_MS);
		return -ETIMEDOUT;
	}
	for (i = 0; i < n; i++)
		if (c->result[i] != DMA_TRANS_NOERROR) {
			pr_err("flood: copy %u result %d\n", i, c->result[i]);
			return -EIO;
		}
	if (!copied(c, 0, 0, min_t(size_t, (size_t)n * 256, BUF_SIZE))) {
		pr_err("flood: data wrong\n");
		return -EIO;
	}
	pr_info("flood: the provider took %u descriptors before refusing\n", n);
	return 0;
}

static int case_terminate(struct ctx *c)
{
	const unsigned int n = 512;
	unsigned int i, ok = 0, aborted = 0;
	int ret;

	if (!c->chan->device->device_terminate_all)
		return -EOPNOTSUPP;
	reset(c, n);
	for (i = 0; i < n; i++) {
		ret = submit(c, i, (i * 2048) % BUF_SIZE, (i * 2048) % BUF_SIZE, 2048,
			     DMA_PREP_INTERRUPT);
		if (ret) {
			pr_err("terminate: submit %u: %d\n", i, ret);
			dmaengine_terminate_sync(c->chan);
			return ret;
		}
	}
	dma_async_issue_pending(c->chan);
	ret = dmaengine_terminate_sync(c->chan);
	if (ret) {
		pr_err("terminate: dmaengine_terminate_sync: %d\n", ret);
		return ret;
	}
	for (i = 0; i < n; i++) {
		enum dma_status st = dma_async_is_tx_complete(c->chan, c->cookie[i], NULL, NULL);
		int calls = atomic_read(&c->called[i]);

		if (st == DMA_IN_PROGRESS || calls > 1) {
			pr_err("terminate: copy %u: status %d, callback ran %d times\n", i, st, calls);
			return -EIO;
		}
		if (calls && c->result[i] == DMA_TRANS_NOERROR) {
			if (!copied(c, (i * 2048) % BUF_SIZE, (i * 2048) % BUF_SIZE, 2048)) {
				pr_err("terminate: copy %u reported done but wrong\n", i);
				return -EIO;
			}
			ok++;
		} else {
			aborted++;
		}
	}
	pr_info("terminate: %u copies done before the terminate, %u aborted\n", ok, aborted);
	return 0;
}

static int case_churn(struct ctx *c)
{
	struct dma_chan *chan;
	unsigned int i;
	dma_cookie_t cookie;
	struct dma_async_tx_descriptor *tx;

	/* The context's own channel is given back for the duration. */
	dma_release_channel(c->chan);
	c->chan = NULL;
	for (i = 0; i < churn; i++) {
		chan = request();
		if (!chan) {
			pr_err("churn: round %u: no channel\n", i);
			return -ENODEV;
		}
		tx = dmaengine_prep_dma_memcpy(chan, c->dst_dma, c->src_dma, 512, DMA_CTRL_ACK);
		cookie = tx ? dmaengine_submit(tx) : -ENOSPC;
		if (!dma_submit_error(cookie)) {
			dma_async_issue_pending(chan);
			if (dma_sync_wait(chan, cookie) != DMA_COMPLETE)
				cookie = -EIO;
		}
		dma_release_channel(chan);
		if (dma_submit_error(cookie)) {
			pr_err("churn: round %u: copy failed: %d\n", i, cookie);
			return -EIO;
		}
	}
	c->chan = request();
	return c->chan ? 0 : -ENODEV;
}

static const struct {
	const char *name;
	int (*run)(struct ctx *c);
} all_cases[] = {
	{ "polled", case_polled },
	{ "guard", case_guard },
	{ "flood", case_flood },
	{ "terminate", case_terminate },
	{ "churn", case_churn },
};

static struct ctx ctx;

static int __init style_client_init(void)
{
	struct ctx *c = &ctx;
	unsigned int i, n = 0;
	int failed = 0, ret;

	if (!churn || churn > 100000) {
		pr_err("churn=%u is invalid: use 1..100000\n", churn);
		return -EINVAL;
	}
	for (i = 0; i < ARRAY_SIZE(all_cases); i++)
		n += !!strstr(cases, all_cases[i].name);
	if (!n) {
		pr_err("cases=%s names no case\n", cases);
		return -EINVAL;
	}
	init_completion(&c->all);
	c->chan = request();
	if (!c->chan) {
		pr_err("no free memcpy channel%s%s\n", *channel ? " named " : "", channel);
		return -ENODEV;
	}
	c->dev = dmaengine_get_dma_device(c->chan);
	strscpy(taken, dma_chan_name(c->chan));
	c->src = dma_alloc_coherent(c->dev, BUF_SIZE, &c->src_dma, GFP_KERNEL);
	c->dst = dma_alloc_coherent(c->dev, BUF_SIZE, &c->dst_dma, GFP_KERNEL);
	if (!c->src || !c->dst) {
		ret = -ENOMEM;
		goto out;
	}
	pr_info("KTAP version 1\n");
	pr_info("1..%u\n", n);
	n = 0;
	for (i = 0; i < ARRAY_SIZE(all_cases); i++) {
		if (!strstr(cases, all_cases[i].name))
			continue;
		ret = all_cases[i].run(c);
		n++;
		if (ret == -EOPNOTSUPP) {
			pr_info("ok %u %s # SKIP the provider has no device_terminate_all\n", n,
				all_cases[i].name);
		} else if (ret) {
			pr_info("not ok %u %s (%d)\n", n, all_cases[i].name, ret);
			failed++;
		} else {
			pr_info("ok %u %s\n", n, all_cases[i].name);
		}
		if (!c->chan)
			break;	/* churn could not take the channel back */
	}
	ret = failed ? -EIO : 0;
out:
	/* The channel first: releasing it stops the engine before the buffers go. */
	if (c->chan)
		dma_release_channel(c->chan);
	if (c->dst)
		dma_free_coherent(c->dev, BUF_SIZE, c->dst, c->dst_dma);
	if (c->src)
		dma_free_coherent(c->dev, BUF_SIZE, c->src, c->src_dma);
	return ret;
}

static void __exit style_client_exit(void)
{
}

module_init(style_client_init);
module_exit(style_client_exit);
MODULE_DESCRIPTION("dmaengine client styles: polled, guard bytes, flood, terminate, churn");
MODULE_LICENSE("GPL");
