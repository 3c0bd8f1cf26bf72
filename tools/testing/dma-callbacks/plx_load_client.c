// SPDX-License-Identifier: GPL-2.0
/*
 * A verifying deep-queue load for reliability runs: it keeps @depth copies
 * of mixed sizes in flight on one memcpy channel for @copies copies, checks
 * every copy the provider reports done, and carries on past copies that
 * fail, so that a fault injected under load shows what happened to each
 * copy.  The fault matrix and `make soak` use it; the benchmark is
 * plx_depth_bench.
 *
 * Each copy reads a stretch of a random source buffer (its length a power
 * of two from @min_size to @max_size, its offset moving with every copy)
 * into a destination slot poisoned beforehand, so a copy reported done
 * that did not land, landed short or came from the wrong place is a
 * mismatch.  Copy number @bad_copy (from 1; 0 for none) reads from
 * @bad_iova instead, which nothing maps: the IOMMU must fault it and the
 * provider report it failed.
 *
 * It stops early, without error, when the channel stops taking copies
 * (the provider's device went away: prep or submit fails) or when
 * @duration_ms has passed; what was in flight must still settle.  The load fails with -EIO if a copy reported
 * done does not hold its bytes, and with -ETIMEDOUT if nothing settles for
 * @timeout_ms while copies are in flight.  It prints one line:
 *
 *   plx_load_client: chan=dma0chan0 copies=N done=D ok=O read_failed=R
 *     write_failed=W aborted=A stopped=0|1 mismatches=M bytes=B ms=T
 *
 * (one line in the log), where N copies were submitted and D settled.
 * Unload it afterwards.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/dma-mapping.h>
#include <linux/dmaengine.h>
#include <linux/ktime.h>
#include <linux/log2.h>
#include <linux/module.h>
#include <linux/random.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/wait.h>

static char *channel = "";
module_param(channel, charp, 0444);
MODULE_PARM_DESC(channel, "memcpy channel, e.g. dma0chan0 (default: any free one)");

static unsigned int depth = 256;
module_param(depth, uint, 0444);
MODULE_PARM_DESC(depth, "copies kept in flight (1..1024)");

static unsigned int copies = 10000;
module_param(copies, uint, 0444);
MODULE_PARM_DESC(copies, "copies to make (1..100000000)");

static unsigned int min_size = 64;
module_param(min_size, uint, 0444);
MODULE_PARM_DESC(min_size, "smallest copy in bytes, a power of two (1..max_size)");

static unsigned int max_size = SZ_64K;
module_param(max_size, uint, 0444);
MODULE_PARM_DESC(max_size, "largest copy in bytes, a power of two (..1 MiB)");

static unsigned int bad_copy;
module_param(bad_copy, uint, 0444);
MODULE_PARM_DESC(bad_copy, "copy number (from 1) that reads from bad_iova; 0: none");

static unsigned long bad_iova = 0xdead0000;
module_param(bad_iova, ulong, 0444);
MODULE_PARM_DESC(bad_iova, "an IOVA nothing maps, page aligned (default 0xdead0000)");

static unsigned int duration_ms;
module_param(duration_ms, uint, 0444);
MODULE_PARM_DESC(duration_ms, "stop submitting after this long, even short of copies (0: no limit)");

static unsigned int timeout_ms = 15000;
module_param(timeout_ms, uint, 0444);
MODULE_PARM_DESC(timeout_ms, "fail if nothing settles for this long (100..600000)");

#define MAX_DEPTH	1024
#define MAX_SIZE	SZ_1M
#define POISON		0x6b

struct slot {
	dma_cookie_t cookie;
	unsigned int len, src_off;
	bool bad;
	/* Set by the callback, read by the thread after `settled`. */
	enum dmaengine_tx_result result;
	bool settled;
};

struct load {
	struct dma_chan *chan;
	/*
	 * The channel's name, copied at request: dma_chan_name() reads the
	 * channel's device, which the core frees when the provider goes,
	 * while this client still holds the channel.
	 */
	char name[32];
	struct device *dev;
	u8 *src, *dst;
	dma_addr_t src_dma, dst_dma;
	size_t src_len;
	struct slot *slots;
	wait_queue_head_t wq;
	unsigned int submitted, done, ok, read_failed, write_failed, aborted;
	unsigned int mismatches;
	u64 bytes;
	bool stopped;
};

static struct load load;

static bool want_channel(struct dma_chan *chan, void *param)
{
	return !*channel || !strcmp(dma_chan_name(chan), channel);
}

static void settled(void *param, const struct dmaengine_result *res)
{
	struct slot *s = param;

	s->result = res->result;
	/* The result before the flag: the thread reads them in that order. */
	smp_store_release(&s->settled, true);
	wake_up(&load.wq);
}

/* The length of a copy: a power of two in [min_size, max_size]. */
static unsigned int copy_len(void)
{
	unsigned int steps = ilog2(max_size) - ilog2(min_size) + 1;

	return min_size << get_random_u32_below(steps);
}

static size_t slot_off(unsigned int i)
{
	return (size_t)i * max_size;
}

/* Queues copy number load.submitted + 1 in slot @i; false if refused. */
static bool submit_one(unsigned int i)
{
	struct slot *s = &load.slots[i];
	struct dma_async_tx_descriptor *tx;
	unsigned int n = load.submitted + 1;
	dma_addr_t src;

	s->len = copy_len();
	s->src_off = (n * 4099u) % (unsigned int)(load.src_len - s->len + 1);
	s->bad = n == bad_copy;
	s->settled = false;
	memset(load.dst + slot_off(i), POISON, s->len);
	/* The poison must reach memory before the engine writes the slot. */
	dma_sync_single_for_device(load.dev, load.dst_dma + slot_off(i), s->len,
				   DMA_BIDIRECTIONAL);
	src = s->bad ? (dma_addr_t)bad_iova : load.src_dma + s->src_off;
	tx = dmaengine_prep_dma_memcpy(load.chan, load.dst_dma + slot_off(i), src, s->len,
				       DMA_PREP_INTERRUPT | DMA_CTRL_ACK);
	if (!tx)
		return false;
	tx->callback_result = settled;
	tx->callback_param = s;
	s->cookie = dmaengine_submit(tx);
	if (dma_submit_error(s->cookie))
		return false;
	load.submitted = n;
	return true;
}

/* Accounts for the settled copy in slot @i and checks its bytes. */
static void reap_one(unsigned int i)
{
	struct slot *s = &load.slots[i];
	const u8 *dst = load.dst + slot_off(i);

	load.done++;
	switch (s->result) {
	case DMA_TRANS_NOERROR:
		load.ok++;
		load.bytes += s->len;
		dma_sync_single_for_cpu(load.dev, load.dst_dma + slot_off(i), s->len,
					DMA_BIDIRECTIONAL);
		if (s->bad || memcmp(dst, load.src + s->src_off, s->len)) {
			if (load.mismatches++ < 5)
				pr_err("%s: a copy of %u bytes was reported done, but %s\n",
				       load.name, s->len,
				       s->bad ? "its source is an unmapped IOVA" :
						"its destination differs from its source");
		}
		break;
	case DMA_TRANS_READ_FAILED:
		load.read_failed++;
		break;
	case DMA_TRANS_WRITE_FAILED:
		load.write_failed++;
		break;
	default:
		load.aborted++;
		break;
	}
}

static int run(void)
{
	unsigned long timeout = msecs_to_jiffies(timeout_ms);
	unsigned long end = jiffies + msecs_to_jiffies(duration_ms);
	unsigned int head = 0, tail = 0, in_flight = 0, limit = copies;

	for (;;) {
		unsigned int queued = 0;

		if (duration_ms && time_after(jiffies, end))
			limit = min(limit, load.submitted);

		while (!load.stopped && load.submitted < limit && in_flight < depth) {
			if (!submit_one(head)) {
				/*
				 * Refused with nothing in flight: the channel
				 * is gone.  Otherwise it is full for now.
				 */
				load.stopped = in_flight == 0;
				break;
			}
			head = (head + 1) % depth;
			in_flight++;
			queued++;
		}
		if (queued)
			dma_async_issue_pending(load.chan);
		if (!in_flight)
			break;
		if (!wait_event_timeout(load.wq, smp_load_acquire(&load.slots[tail].settled),
					timeout)) {
			pr_err("%s: nothing settled for %u ms (%u in flight, %u submitted)\n",
			       load.name, timeout_ms, in_flight, load.submitted);
			return -ETIMEDOUT;
		}
		/* Every settled copy at the tail, in submission order. */
		while (in_flight && smp_load_acquire(&load.slots[tail].settled)) {
			reap_one(tail);
			tail = (tail + 1) % depth;
			in_flight--;
		}
	}
	return load.mismatches ? -EIO : 0;
}

static int check_params(void)
{
	if (!depth || depth > MAX_DEPTH) {
		pr_err("depth=%u is invalid: use 1..%d\n", depth, MAX_DEPTH);
		return -EINVAL;
	}
	if (!copies || copies > 100000000) {
		pr_err("copies=%u is invalid: use 1..100000000\n", copies);
		return -EINVAL;
	}
	if (!is_power_of_2(max_size) || max_size > MAX_SIZE) {
		pr_err("max_size=%u is invalid: use a power of two up to %d\n", max_size, MAX_SIZE);
		return -EINVAL;
	}
	if (!is_power_of_2(min_size) || min_size > max_size) {
		pr_err("min_size=%u is invalid: use a power of two up to max_size\n", min_size);
		return -EINVAL;
	}
	if (bad_iova & ~PAGE_MASK) {
		pr_err("bad_iova=%#lx is invalid: use a page-aligned address\n", bad_iova);
		return -EINVAL;
	}
	if (timeout_ms < 100 || timeout_ms > 600000) {
		pr_err("timeout_ms=%u is invalid: use 100..600000\n", timeout_ms);
		return -EINVAL;
	}
	return 0;
}

static void free_load(void)
{
	if (load.dst && !dma_mapping_error(load.dev, load.dst_dma))
		dma_unmap_single(load.dev, load.dst_dma, slot_off(depth), DMA_BIDIRECTIONAL);
	if (load.src && !dma_mapping_error(load.dev, load.src_dma))
		dma_unmap_single(load.dev, load.src_dma, load.src_len, DMA_TO_DEVICE);
	kvfree(load.dst);
	kvfree(load.src);
	kfree(load.slots);
}

static int alloc_load(void)
{
	load.src_len = 2 * max_size;
	load.slots = kcalloc(depth, sizeof(*load.slots), GFP_KERNEL);
	load.src = kmalloc(load.src_len, GFP_KERNEL);
	load.dst = kmalloc(slot_off(depth), GFP_KERNEL);
	load.src_dma = DMA_MAPPING_ERROR;
	load.dst_dma = DMA_MAPPING_ERROR;
	if (!load.slots || !load.src || !load.dst)
		return -ENOMEM;
	get_random_bytes(load.src, load.src_len);
	load.src_dma = dma_map_single(load.dev, load.src, load.src_len, DMA_TO_DEVICE);
	if (dma_mapping_error(load.dev, load.src_dma))
		return -ENOMEM;
	load.dst_dma = dma_map_single(load.dev, load.dst, slot_off(depth), DMA_BIDIRECTIONAL);
	if (dma_mapping_error(load.dev, load.dst_dma))
		return -ENOMEM;
	return 0;
}

static int __init load_init(void)
{
	dma_cap_mask_t mask;
	ktime_t start;
	int ret;

	ret = check_params();
	if (ret)
		return ret;
	dma_cap_zero(mask);
	dma_cap_set(DMA_MEMCPY, mask);
	memset(&load, 0, sizeof(load));
	init_waitqueue_head(&load.wq);
	load.chan = dma_request_channel(mask, want_channel, NULL);
	if (!load.chan) {
		pr_err("no free memcpy channel%s%s\n", *channel ? " named " : "", channel);
		return -ENODEV;
	}
	strscpy(load.name, dma_chan_name(load.chan), sizeof(load.name));
	load.dev = dmaengine_get_dma_device(load.chan);
	ret = alloc_load();
	if (ret) {
		pr_err("%s: cannot allocate the buffers: %d\n", load.name, ret);
		goto out;
	}
	start = ktime_get();
	ret = run();
	if (ret == -ETIMEDOUT)
		/* Copies may still be queued: stop them before the buffers go. */
		dmaengine_terminate_sync(load.chan);
	pr_info("chan=%s copies=%u done=%u ok=%u read_failed=%u write_failed=%u aborted=%u stopped=%d mismatches=%u bytes=%llu ms=%lld\n",
		load.name, load.submitted, load.done, load.ok, load.read_failed,
		load.write_failed, load.aborted, load.stopped, load.mismatches, load.bytes,
		ktime_ms_delta(ktime_get(), start));
out:
	/* Releasing the channel stops its engine before the buffers go. */
	dma_release_channel(load.chan);
	free_load();
	return ret;
}
module_init(load_init);

static void __exit load_exit(void)
{
}
module_exit(load_exit);

MODULE_DESCRIPTION("Verifying deep-queue dmaengine load for fault and soak runs");
MODULE_LICENSE("GPL");
