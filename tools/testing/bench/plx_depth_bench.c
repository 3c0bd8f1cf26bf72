// SPDX-License-Identifier: GPL-2.0
/*
 * A deep-queue dmaengine benchmark: each of @channels memcpy channels is
 * kept @depth copies deep for @copies copies of @size bytes, the way a
 * storage or network offload uses an engine, which dmatest (one copy in
 * flight per thread, waiting for each) does not.
 *
 * It is a plain C client on purpose, using the raw dmaengine API the way
 * in-tree clients do, so that it runs the same on the C plx_dma and on
 * rust_plx_dma.  Every copy asks for a callback (DMA_PREP_INTERRUPT); what
 * interrupts the provider asks of its engine is its own business.  One
 * thread per channel refills the queue whenever @batch copies have
 * completed (half its depth unless told), then issues the new copies at
 * once: refilling from the callbacks would deadlock on the C plx_dma,
 * whose prep takes the lock its callbacks run under.
 *
 * The copies read one source buffer and write @depth destinations (fewer
 * for large sizes, reused in turn), all mapped once: no IOMMU traffic per
 * copy.  At the end each destination must hold the source's pattern.  The
 * load fails (-EIO, -ETIMEDOUT, -ENODEV) if a copy failed, the queue
 * stopped moving or no channel was free, and prints per channel and in
 * total:
 *
 *   plx_depth_bench: chan=dma0chan0 size=65536 depth=16 copies=4000 ns=812345678 errors=0 verified=1 submit_ns=4567890 refills=250
 *   plx_depth_bench: total channels=2 size=65536 depth=16 copies=8000 bytes=524288000 ns=... busy_ns=...
 *
 * submit_ns is the time the thread spent preparing, submitting and issuing
 * copies (refills: how many times it did): with ns it shows how much of a
 * provider's time goes to submission.  busy_ns is the CPU time all CPUs
 * spent on anything but idle while the copies ran, buffer set-up and
 * verification left out: the CPU an offload costs.
 *
 * Unload it afterwards.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/completion.h>
#include <linux/dma-mapping.h>
#include <linux/dmaengine.h>
#include <linux/kernel_stat.h>
#include <linux/kthread.h>
#include <linux/ktime.h>
#include <linux/module.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/tick.h>
#include <linux/wait.h>

static char *channel = "";
module_param(channel, charp, 0444);
MODULE_PARM_DESC(channel, "memcpy channel to use, e.g. dma0chan0 (default: any free one)");

static unsigned int channels = 1;
module_param(channels, uint, 0444);
MODULE_PARM_DESC(channels, "channels to drive at once, one thread each (1..4; 1 with channel=)");

static unsigned int size = SZ_64K;
module_param(size, uint, 0444);
MODULE_PARM_DESC(size, "bytes per copy (1..4 MiB)");

static unsigned int depth = 16;
module_param(depth, uint, 0444);
MODULE_PARM_DESC(depth, "copies kept in flight per channel (1..1024)");

static unsigned int batch;
module_param(batch, uint, 0444);
MODULE_PARM_DESC(batch, "copies that must complete before the thread refills (1..depth; default depth/2)");

static unsigned int copies = 1000;
module_param(copies, uint, 0444);
MODULE_PARM_DESC(copies, "copies per channel (1..10000000)");

static unsigned int timeout_ms = 10000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "fail if no copy completes for this long (100..600000)");

#define MAX_CHANNELS	4
#define MAX_DEPTH	1024
#define MAX_SIZE	SZ_4M
/* Destination memory per channel: at most this much, at least one buffer. */
#define DST_BUDGET	SZ_16M

struct worker {
	struct dma_chan *chan;
	struct device *dev;
	void *src, **dst;
	dma_addr_t src_dma, *dst_dma;
	unsigned int ndst;
	unsigned int submitted;
	atomic_t completed;
	atomic_t errors;
	unsigned int low;		/* refill when in flight falls to this */
	/*
	 * The thread sleeps until this many copies completed: enough to
	 * refill, one more if the provider had no room, or all of them.
	 */
	unsigned int want;
	wait_queue_head_t wq;
	u64 ns;
	u64 submit_ns;
	unsigned int refills;
	int ret;
	bool verified;
	struct completion done;
	struct task_struct *task;
};

static struct worker workers[MAX_CHANNELS];

static u8 pattern(size_t i)
{
	return (u8)(i * 131 ^ (i >> 8));
}

static bool want_channel(struct dma_chan *chan, void *param)
{
	return !*channel || !strcmp(dma_chan_name(chan), channel);
}

static void copy_done(void *param, const struct dmaengine_result *res)
{
	struct worker *w = param;
	unsigned int done;

	if (res->result != DMA_TRANS_NOERROR)
		atomic_inc(&w->errors);
	done = atomic_inc_return(&w->completed);
	if (done >= READ_ONCE(w->want))
		wake_up(&w->wq);
}

static void free_buffers(struct worker *w)
{
	unsigned int i;

	for (i = 0; i < w->ndst; i++)
		if (w->dst[i])
			dma_free_coherent(w->dev, size, w->dst[i], w->dst_dma[i]);
	if (w->src)
		dma_free_coherent(w->dev, size, w->src, w->src_dma);
	kfree(w->dst);
	kfree(w->dst_dma);
}

static int alloc_buffers(struct worker *w)
{
	unsigned int i;
	size_t j;

	w->ndst = clamp_t(unsigned int, DST_BUDGET / size, 1, depth);
	w->dst = kcalloc(w->ndst, sizeof(*w->dst), GFP_KERNEL);
	w->dst_dma = kcalloc(w->ndst, sizeof(*w->dst_dma), GFP_KERNEL);
	if (!w->dst || !w->dst_dma)
		return -ENOMEM;
	w->src = dma_alloc_coherent(w->dev, size, &w->src_dma, GFP_KERNEL);
	if (!w->src)
		return -ENOMEM;
	for (j = 0; j < size; j++)
		((u8 *)w->src)[j] = pattern(j);
	for (i = 0; i < w->ndst; i++) {
		w->dst[i] = dma_alloc_coherent(w->dev, size, &w->dst_dma[i], GFP_KERNEL);
		if (!w->dst[i])
			return -ENOMEM;
		memset(w->dst[i], 0xa5, size);
	}
	return 0;
}

/* Queues copies until @depth are in flight or the provider has no room. */
static int refill(struct worker *w)
{
	struct dma_async_tx_descriptor *tx;
	u64 t0 = ktime_get_ns();
	unsigned int queued = 0;
	bool refused = false;
	dma_cookie_t cookie;

	while (w->submitted < copies &&
	       w->submitted - atomic_read(&w->completed) < depth) {
		unsigned int i = w->submitted % w->ndst;

		tx = dmaengine_prep_dma_memcpy(w->chan, w->dst_dma[i], w->src_dma, size,
					       DMA_PREP_INTERRUPT | DMA_CTRL_ACK);
		if (!tx) {
			refused = true;	/* ring full: wait for completions */
			break;
		}
		tx->callback_result = copy_done;
		tx->callback_param = w;
		cookie = dmaengine_submit(tx);
		if (dma_submit_error(cookie)) {
			pr_err("%s: submit failed: %d\n", dma_chan_name(w->chan), cookie);
			return cookie;
		}
		/* Published before the engine can complete it. */
		WRITE_ONCE(w->submitted, w->submitted + 1);
		queued++;
	}
	if (queued) {
		dma_async_issue_pending(w->chan);
		w->refills++;
		w->submit_ns += ktime_get_ns() - t0;
	} else if (w->submitted - atomic_read(&w->completed) == 0 && w->submitted < copies)
		return -ENOSPC;	/* nothing in flight and the provider refuses */
	/*
	 * What to sleep for.  Once every copy is submitted, the last one:
	 * waiting on the refill mark then would return at once, and the
	 * thread would spin (for ever, if a completion never comes).  If
	 * the provider refused a copy, the next completion (or none, if
	 * nothing is in flight: the next refill then finds out).
	 */
	if (w->submitted == copies)
		WRITE_ONCE(w->want, copies);
	else if (refused)
		WRITE_ONCE(w->want, min_t(unsigned int, atomic_read(&w->completed) + 1,
					  w->submitted));
	else
		WRITE_ONCE(w->want, w->submitted - w->low);
	return 0;
}

static int run_copies(struct worker *w)
{
	unsigned long timeout = msecs_to_jiffies(timeout_ms);
	unsigned int seen = 0;
	ktime_t start;
	int ret;

	start = ktime_get();
	while (atomic_read(&w->completed) < copies) {
		ret = refill(w);
		if (ret)
			return ret;
		if (atomic_read(&w->errors))
			return -EIO;
		if (!wait_event_timeout(w->wq, atomic_read(&w->completed) >= w->want,
					timeout)) {
			if (atomic_read(&w->completed) == seen) {
				pr_err("%s: no copy completed for %u ms (%u of %u done)\n",
				       dma_chan_name(w->chan), timeout_ms, seen, copies);
				return -ETIMEDOUT;
			}
			/*
			 * Some copies completed, too few to reach what the
			 * thread waits for: a stall that the refill below may
			 * end.  Said, since it makes this run's figures
			 * meaningless.
			 */
			pr_warn("%s: waited %u ms with %u of %u submitted copies completed\n",
				dma_chan_name(w->chan), timeout_ms,
				atomic_read(&w->completed), w->submitted);
		}
		seen = atomic_read(&w->completed);
	}
	w->ns = ktime_to_ns(ktime_sub(ktime_get(), start));
	return atomic_read(&w->errors) ? -EIO : 0;
}

/*
 * Idle time of all online CPUs so far, in microseconds: what /proc/stat
 * reads, to the microsecond with NOHZ idle accounting (else per tick).
 */
static u64 cpus_idle_us(void)
{
	u64 sum = 0, t;
	int cpu;

	for_each_online_cpu(cpu) {
		t = get_cpu_idle_time_us(cpu, NULL);
		if (t == (u64)-1)
			t = div_u64(kcpustat_cpu(cpu).cpustat[CPUTIME_IDLE], NSEC_PER_USEC);
		sum += t;
		t = get_cpu_iowait_time_us(cpu, NULL);
		if (t == (u64)-1)
			t = div_u64(kcpustat_cpu(cpu).cpustat[CPUTIME_IOWAIT], NSEC_PER_USEC);
		sum += t;
	}
	return sum;
}

static bool verify(struct worker *w)
{
	unsigned int i;

	for (i = 0; i < w->ndst && i < copies; i++)
		if (memcmp(w->dst[i], w->src, size)) {
			pr_err("%s: destination %u does not hold the source\n",
			       dma_chan_name(w->chan), i);
			return false;
		}
	return true;
}

static int worker_fn(void *data)
{
	struct worker *w = data;

	w->ret = run_copies(w);
	/*
	 * Copies may still be queued: stop the channel before the buffers
	 * go.  A provider without terminate (the C plx_dma) stops its engine
	 * when the channel is released, which the caller does before
	 * freeing.  Verification waits until every thread is done, out of
	 * the time measured.
	 */
	if (w->ret)
		dmaengine_terminate_sync(w->chan);
	/* Leaves no instruction of this module to run after the wakeup. */
	kthread_complete_and_exit(&w->done, 0);
}

static int check_params(void)
{
	if (!channels || channels > MAX_CHANNELS || (*channel && channels != 1)) {
		pr_err("channels=%u is invalid: use 1..%d, and 1 with channel=\n",
		       channels, MAX_CHANNELS);
		return -EINVAL;
	}
	if (!size || size > MAX_SIZE) {
		pr_err("size=%u is invalid: use 1..%d\n", size, MAX_SIZE);
		return -EINVAL;
	}
	if (!depth || depth > MAX_DEPTH) {
		pr_err("depth=%u is invalid: use 1..%d\n", depth, MAX_DEPTH);
		return -EINVAL;
	}
	if (batch > depth) {
		pr_err("batch=%u is invalid: use 1..depth (%u), or 0 for depth/2\n", batch, depth);
		return -EINVAL;
	}
	if (!copies || copies > 10000000) {
		pr_err("copies=%u is invalid: use 1..10000000\n", copies);
		return -EINVAL;
	}
	if (timeout_ms < 100 || timeout_ms > 600000) {
		pr_err("timeout_ms=%u is invalid: use 100..600000\n", timeout_ms);
		return -EINVAL;
	}
	return 0;
}

static void release(unsigned int n)
{
	unsigned int i;

	/* Channels first: releasing stops each engine before its buffers go. */
	for (i = 0; i < n; i++)
		dma_release_channel(workers[i].chan);
	for (i = 0; i < n; i++)
		free_buffers(&workers[i]);
}

static int __init depth_bench_init(void)
{
	u64 ns = 0, total = 0, idle_us, wall_ns, cpu_ns;
	dma_cap_mask_t mask;
	unsigned int i, n;
	int ret;

	ret = check_params();
	if (ret)
		return ret;
	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	memset(workers, 0, sizeof(workers));
	for (n = 0; n < channels; n++) {
		struct worker *w = &workers[n];

		w->chan = dma_request_channel(mask, want_channel, NULL);
		if (!w->chan) {
			pr_err("no free memcpy channel%s%s (%u of %u taken)\n",
			       *channel ? " named " : "", channel, n, channels);
			release(n);
			return -ENODEV;
		}
		w->dev = dmaengine_get_dma_device(w->chan);
		w->low = batch ? depth - batch : depth / 2;
		init_waitqueue_head(&w->wq);
		init_completion(&w->done);
		ret = alloc_buffers(w);
		if (ret) {
			pr_err("%s: cannot allocate buffers: %d\n", dma_chan_name(w->chan), ret);
			release(n + 1);
			return ret;
		}
	}
	idle_us = cpus_idle_us();
	wall_ns = ktime_get_ns();
	for (i = 0; i < n; i++) {
		workers[i].task = kthread_run(worker_fn, &workers[i], "plx_depth_bench/%u", i);
		if (IS_ERR(workers[i].task)) {
			workers[i].ret = PTR_ERR(workers[i].task);
			complete(&workers[i].done);
		}
	}
	for (i = 0; i < n; i++)
		wait_for_completion(&workers[i].done);
	wall_ns = ktime_get_ns() - wall_ns;
	idle_us = cpus_idle_us() - idle_us;
	cpu_ns = wall_ns * num_online_cpus();
	ret = 0;
	for (i = 0; i < n; i++) {
		struct worker *w = &workers[i];

		if (!w->ret) {
			w->verified = verify(w);
			if (!w->verified)
				w->ret = -EIO;
		}
		pr_info("chan=%s size=%u depth=%u copies=%u ns=%llu errors=%d verified=%d submit_ns=%llu refills=%u\n",
			dma_chan_name(w->chan), size, depth, atomic_read(&w->completed),
			w->ns, atomic_read(&w->errors), w->verified, w->submit_ns, w->refills);
		if (w->ret && !ret)
			ret = w->ret;
		ns = max(ns, w->ns);
		total += (u64)atomic_read(&w->completed) * size;
	}
	if (!ret)
		pr_info("total channels=%u size=%u depth=%u copies=%u bytes=%llu ns=%llu busy_ns=%llu\n",
			n, size, depth, n * copies, total, ns, cpu_ns - min(cpu_ns, idle_us * NSEC_PER_USEC));
	release(n);
	return ret;
}

static void __exit depth_bench_exit(void)
{
}

module_init(depth_bench_init);
module_exit(depth_bench_exit);
MODULE_DESCRIPTION("Deep-queue memcpy benchmark for dmaengine providers");
MODULE_LICENSE("GPL");
