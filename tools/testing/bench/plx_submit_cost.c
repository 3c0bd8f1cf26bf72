// SPDX-License-Identifier: GPL-2.0
/*
 * What a dmaengine provider costs its client per copy, each side on its
 * own: @rounds times, it prepares and submits @batch copies of 64 bytes
 * with nothing in flight (so no completion, interrupt or reap runs
 * meanwhile), times that loop and the issue_pending that follows, then
 * times the completion side: from the batch's first callback to its
 * last, the provider reaps the copies and calls back, one after the
 * other.  The same loops run on the C plx_dma and on rust_plx_dma.
 *
 * Two reference loops put the figures in scale: a spin_lock_bh() and
 * spin_unlock_bh() pair, and an indirect call to an empty function, the
 * two things a provider's path is mostly made of.
 *
 * Under QEMU's instruction counting (scripts/guest-run.sh -I) the guest
 * clock advances one nanosecond per guest instruction, so every figure
 * below is an instruction count, the same from run to run: the bench's
 * noise-free measure of how long each driver's path is.  Without it they
 * are nanoseconds of a TCG guest.  Output, medians over the rounds:
 *
 *   plx_submit_cost: chan=dma0chan0 driver=rust_plx_dma batch=256 rounds=32 prep_submit=311 issue=29162 complete=400 lock_bh=39 call=7 nudges=0
 *
 * prep_submit and complete are per copy, issue per batch; nudges counts
 * the copies added to batches whose completion never came.  Unload it afterwards.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/dmaengine.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/spinlock.h>
#include <linux/string.h>

static char *channel = "";
module_param(channel, charp, 0444);
MODULE_PARM_DESC(channel, "memcpy channel to use, e.g. dma0chan0 (default: any free one)");

static unsigned int batch = 256;
module_param(batch, uint, 0444);
MODULE_PARM_DESC(batch, "copies prepared and submitted per round (1..1024)");

static unsigned int rounds = 32;
module_param(rounds, uint, 0444);
MODULE_PARM_DESC(rounds, "rounds, of which the median is reported (1..1000)");

#define COPY_SIZE	64
#define MAX_BATCH	1024
#define MAX_ROUNDS	1000
/* A batch not done after this long gets one more copy, at most so often. */
#define NUDGE_MS	100
#define MAX_NUDGES	50

/*
 * What the callbacks of one round share.  It outlives the round, since
 * the copies of a round that failed may still call back, until the
 * channel is released.
 */
struct round_state {
	unsigned int completed;
	u64 first_ns, last_ns;
	struct completion done;
};

/* Per-round figures, one array per measure. */
struct samples {
	u64 prep_submit[MAX_ROUNDS];
	u64 issue[MAX_ROUNDS];
	u64 complete[MAX_ROUNDS];
	u64 lock_bh[MAX_ROUNDS];
	u64 call[MAX_ROUNDS];
	/* Copies added to batches whose completion did not come. */
	unsigned int nudges;
	struct round_state round;
};

static DEFINE_SPINLOCK(reference_lock);

/* The target of the reference loop's indirect call. */
static noinline void empty(void)
{
	barrier();
}

/*
 * Every copy asks for a callback, as a client that refills its queue
 * does.  The first and the last of the batch are timed: between them the
 * provider reaps the copies and runs their callbacks, and nothing else
 * (the engine has long finished the batch when the reap starts).
 */
static void copy_done(void *param)
{
	struct round_state *rs = param;

	if (!rs->completed++)
		rs->first_ns = ktime_get_ns();
	if (rs->completed == batch) {
		rs->last_ns = ktime_get_ns();
		complete(&rs->done);
	}
}

static bool want_channel(struct dma_chan *chan, void *param)
{
	return !*channel || !strcmp(dma_chan_name(chan), channel);
}

static int cmp_u64(const void *a, const void *b)
{
	u64 x = *(const u64 *)a, y = *(const u64 *)b;

	return x < y ? -1 : x > y;
}

static u64 median(u64 *v)
{
	sort(v, rounds, sizeof(*v), cmp_u64, NULL);
	return v[rounds / 2];
}

/*
 * One round on @chan: @batch copies from @src to @dst, each asking for a
 * callback, the last one signalling @done.  Returns 0 once all completed.
 */
static int one_round(struct dma_chan *chan, dma_addr_t dst, dma_addr_t src,
		     struct samples *s, unsigned int r)
{
	struct round_state *rs = &s->round;
	struct dma_async_tx_descriptor *tx;
	unsigned int i;
	u64 t0, t1, t2;

	rs->completed = 0;
	init_completion(&rs->done);
	t0 = ktime_get_ns();
	for (i = 0; i < batch; i++) {
		tx = dmaengine_prep_dma_memcpy(chan, dst, src, COPY_SIZE,
					       DMA_PREP_INTERRUPT | DMA_CTRL_ACK);
		if (!tx) {
			pr_err("%s: prep %u of %u refused\n", dma_chan_name(chan), i, batch);
			return -ENOSPC;
		}
		tx->callback = copy_done;
		tx->callback_param = rs;
		if (dma_submit_error(dmaengine_submit(tx))) {
			pr_err("%s: submit %u of %u refused\n", dma_chan_name(chan), i, batch);
			return -EIO;
		}
	}
	t1 = ktime_get_ns();
	dma_async_issue_pending(chan);
	t2 = ktime_get_ns();
	s->prep_submit[r] = div_u64(t1 - t0, batch);
	s->issue[r] = t2 - t1;
	/*
	 * The C plx_dma may lose a completion interrupt (bench.rst says how);
	 * the interrupt of one more copy, without a callback (it may
	 * complete after this round returned), then reaps the batch.
	 */
	while (!wait_for_completion_timeout(&rs->done, msecs_to_jiffies(NUDGE_MS))) {
		if (++s->nudges > MAX_NUDGES) {
			pr_err("%s: the batch did not complete in %u ms, %u copies later\n",
			       dma_chan_name(chan), MAX_NUDGES * NUDGE_MS, MAX_NUDGES);
			return -ETIMEDOUT;
		}
		tx = dmaengine_prep_dma_memcpy(chan, dst, src, COPY_SIZE,
					       DMA_PREP_INTERRUPT | DMA_CTRL_ACK);
		if (tx && !dma_submit_error(dmaengine_submit(tx)))
			dma_async_issue_pending(chan);
	}
	s->complete[r] = batch > 1 ? div_u64(rs->last_ns - rs->first_ns, batch - 1) : 0;
	return 0;
}

/* The reference loops of round @r, @batch iterations each. */
static void reference_round(struct samples *s, unsigned int r)
{
	void (*call)(void) = empty;
	unsigned int i;
	u64 t0, t1, t2;

	/* Hidden from the compiler, so that the call stays indirect. */
	OPTIMIZER_HIDE_VAR(call);
	t0 = ktime_get_ns();
	for (i = 0; i < batch; i++) {
		spin_lock_bh(&reference_lock);
		spin_unlock_bh(&reference_lock);
	}
	t1 = ktime_get_ns();
	for (i = 0; i < batch; i++)
		call();
	t2 = ktime_get_ns();
	s->lock_bh[r] = div_u64(t1 - t0, batch);
	s->call[r] = div_u64(t2 - t1, batch);
}

static int __init submit_cost_init(void)
{
	struct samples *s = NULL;
	dma_cap_mask_t mask;
	struct dma_chan *chan;
	struct device *dev;
	dma_addr_t dma;
	unsigned int r;
	void *buf;
	int ret = 0;

	if (!batch || batch > MAX_BATCH || !rounds || rounds > MAX_ROUNDS) {
		pr_err("batch=%u rounds=%u: use batch 1..%d and rounds 1..%d\n",
		       batch, rounds, MAX_BATCH, MAX_ROUNDS);
		return -EINVAL;
	}
	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	chan = dma_request_channel(mask, want_channel, NULL);
	if (!chan) {
		pr_err("no free memcpy channel%s%s\n", *channel ? " named " : "", channel);
		return -ENODEV;
	}
	dev = dmaengine_get_dma_device(chan);
	/* The source in the first half, the destination in the second. */
	buf = dma_alloc_coherent(dev, 2 * COPY_SIZE, &dma, GFP_KERNEL);
	s = kzalloc_obj(*s, GFP_KERNEL);
	if (!buf || !s) {
		ret = -ENOMEM;
		goto out;
	}
	for (r = 0; r < rounds && !ret; r++) {
		ret = one_round(chan, dma + COPY_SIZE, dma, s, r);
		reference_round(s, r);
	}
	if (ret)
		goto out;
	pr_info("chan=%s driver=%s batch=%u rounds=%u prep_submit=%llu issue=%llu complete=%llu lock_bh=%llu call=%llu nudges=%u\n",
		dma_chan_name(chan), dev_driver_string(dev), batch, rounds,
		median(s->prep_submit), median(s->issue), median(s->complete), median(s->lock_bh),
		median(s->call), s->nudges);
out:
	/*
	 * After a failed round copies may still be queued.  A provider stops
	 * its engine when the channel is released (the C plx_dma has no
	 * terminate), so the channel goes before the buffer.
	 */
	dma_release_channel(chan);
	kfree(s);
	if (buf)
		dma_free_coherent(dev, 2 * COPY_SIZE, buf, dma);
	return ret;
}

static void __exit submit_cost_exit(void)
{
}

module_init(submit_cost_init);
module_exit(submit_cost_exit);
MODULE_DESCRIPTION("Per-copy submission cost of a dmaengine memcpy provider");
MODULE_LICENSE("GPL");
