// SPDX-License-Identifier: GPL-2.0
/*
 * Pin a user buffer and map it for a device's DMA: the pages charged to
 * the caller's RLIMIT_MEMLOCK, pin_user_pages_fast(), a scatterlist cut at
 * the device's max_seg_size, dma_map_sgtable(). The steps are macros and
 * inlines or need a page array Rust has no type for, so they live here,
 * and rust/kernel/user_pages.rs gives them a safe owner. This is the one
 * pin, map and accounting path of the project's user memory.
 */
#include <linux/capability.h>
#include <linux/dma-mapping.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/scatterlist.h>
#include <linux/slab.h>
#include <linux/uaccess.h>

#include "user_pages.h"

struct rust_user_dma {
	struct device *dev;		/* NULL: pinned only, for CPU access */
	unsigned int offset;		/* of the range in its first page */
	size_t len;			/* of the range, in bytes */
	/* Charged with npages in pinned_vm until unmap (held by mmgrab). */
	struct mm_struct *mm;
	struct page **pages;
	unsigned int npages;
	enum dma_data_direction dir;
	struct sg_table sgt;
};

/*
 * Charges @npages to @mm's pinned_vm, as ib_umem does: beyond
 * RLIMIT_MEMLOCK only with CAP_IPC_LOCK. The charge stays with the mm that
 * pinned, whichever task unmaps.
 */
static int rust_user_dma_charge(struct mm_struct *mm, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	s64 pinned = atomic64_add_return(npages, &mm->pinned_vm);

	if (pinned > limit && !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	return 0;
}

static int rust_user_dma_map_pages(struct rust_user_dma *ud, struct device *dev);

/*
 * Whether @dev's driver is bound and not being unbound: the DMA API maps
 * only for such a device (its IOMMU domain goes with the driver).
 */
bool rust_user_dma_dev_bound(struct device *dev)
{
	return READ_ONCE(dev->links.status) == DL_DEV_DRIVER_BOUND;
}

/*
 * Pins [uaddr, uaddr + len) (writable unless @dir is DMA_TO_DEVICE) and,
 * if @dev is not NULL, maps it for @dev in direction @dir. @longterm pins
 * with FOLL_LONGTERM, for buffers held beyond the system call. The pages
 * are charged to the caller's RLIMIT_MEMLOCK (ENOMEM beyond it without
 * CAP_IPC_LOCK). On failure returns NULL with *err set; nothing stays
 * pinned, mapped or charged.
 */
struct rust_user_dma *rust_user_dma_map(struct device *dev, unsigned long uaddr,
					size_t len, int dir, bool longterm,
					int *err)
{
	unsigned int offset = offset_in_page(uaddr);
	bool writable = dir != DMA_TO_DEVICE;
	unsigned int gup = (writable ? FOLL_WRITE : 0) |
			   (longterm ? FOLL_LONGTERM : 0);
	struct rust_user_dma *ud;
	unsigned long npages;
	int pinned, ret;

	/*
	 * The range, rounded out to whole pages, must not wrap: near 2^64
	 * DIV_ROUND_UP(offset + len) would overflow to a count of 0 pages.
	 */
	if (dir != DMA_TO_DEVICE && dir != DMA_FROM_DEVICE &&
	    dir != DMA_BIDIRECTIONAL) {
		*err = -EINVAL;
		return NULL;
	}
	if (!len || uaddr + len < uaddr || len > SIZE_MAX - PAGE_SIZE - offset) {
		*err = -EINVAL;
		return NULL;
	}
	/* Not a user range at all (e.g. the top of the address space). */
	if (!access_ok((void __user *)uaddr, len)) {
		*err = -EFAULT;
		return NULL;
	}
	npages = DIV_ROUND_UP(offset + len, PAGE_SIZE);
	if (!npages || npages > INT_MAX) {
		*err = -E2BIG;
		return NULL;
	}
	ud = kzalloc(sizeof(*ud), GFP_KERNEL_ACCOUNT);
	if (!ud) {
		*err = -ENOMEM;
		return NULL;
	}
	ud->dir = dir;
	ud->offset = offset;
	ud->pages = kvmalloc_array(npages, sizeof(*ud->pages), GFP_KERNEL_ACCOUNT);
	if (!ud->pages) {
		ret = -ENOMEM;
		goto free_ud;
	}
	ud->mm = current->mm;
	if (!ud->mm) {
		ret = -EFAULT;
		goto free_pages;
	}
	mmgrab(ud->mm);
	ret = rust_user_dma_charge(ud->mm, npages);
	if (ret)
		goto drop_mm;
	pinned = pin_user_pages_fast(uaddr & PAGE_MASK, npages, gup, ud->pages);
	if (pinned < 0) {
		ret = pinned;
		goto uncharge;
	}
	ud->npages = pinned;
	if (pinned != npages) {
		/* Part of the range is not mapped, or not writable. */
		ret = -EFAULT;
		goto unpin;
	}
	ud->len = len;
	if (!dev)
		return ud;
	ret = rust_user_dma_map_pages(ud, dev);
	if (ret)
		goto unpin;
	return ud;

unpin:
	unpin_user_pages(ud->pages, ud->npages);
uncharge:
	atomic64_sub(npages, &ud->mm->pinned_vm);
drop_mm:
	mmdrop(ud->mm);
free_pages:
	kvfree(ud->pages);
free_ud:
	kfree(ud);
	*err = ret;
	return NULL;
}

/*
 * Maps the pinned pages of @ud, which has no mapping yet, for @dev. On
 * failure nothing is mapped and @ud stays pinned for the CPU only.
 */
static int rust_user_dma_map_pages(struct rust_user_dma *ud, struct device *dev)
{
	int ret;

	/*
	 * No segment longer than one mapping may be either (a bounce
	 * buffer's slot run is 256 KiB).
	 */
	ret = sg_alloc_table_from_pages_segment(&ud->sgt, ud->pages, ud->npages,
						ud->offset, ud->len,
						min_t(size_t,
						      dma_get_max_seg_size(dev),
						      dma_max_mapping_size(dev)),
						GFP_KERNEL);
	if (ret)
		return ret;
	ret = dma_map_sgtable(dev, &ud->sgt, ud->dir, 0);
	if (ret) {
		sg_free_table(&ud->sgt);
		return ret;
	}
	/* Held until unmap: the mapping is torn down through this device. */
	ud->dev = get_device(dev);
	return 0;
}

/*
 * Maps a range pinned without a device (rust_user_dma_map() with @dev
 * NULL) for @dev. This touches no user memory, so a caller may pin without
 * its locks (pinning can wait on page faults for as long as user space
 * wants) and map under them. -EBUSY if @ud is mapped already.
 */
int rust_user_dma_attach(struct rust_user_dma *ud, struct device *dev)
{
	if (ud->dev)
		return -EBUSY;
	return rust_user_dma_map_pages(ud, dev);
}

/*
 * Unmaps @ud from its device, if mapped; it stays pinned for the CPU
 * (rust_user_dma_cpu_copy() and friends read only the pages). The caller
 * makes sure that the device no longer uses the mapping.
 */
void rust_user_dma_detach(struct rust_user_dma *ud)
{
	might_sleep();
	if (!ud->dev)
		return;
	dma_unmap_sgtable(ud->dev, &ud->sgt, ud->dir, 0);
	sg_free_table(&ud->sgt);
	put_device(ud->dev);
	ud->dev = NULL;
}

/*
 * Syncs bytes [@off, @off + @len) of @ud's range, through the DMA
 * segments that hold them, for the device (@for_device: what the CPU wrote
 * becomes visible to it) or for the CPU (what it wrote becomes visible to
 * the CPU).  Only those bytes: a bounce buffer copied back whole would
 * overwrite what user space wrote elsewhere in the range meanwhile.
 * Nothing to do where the device's mappings need no sync (coherent,
 * nothing bounced).
 */
void rust_user_dma_sync(struct rust_user_dma *ud, size_t off, size_t len,
			bool for_device)
{
	struct scatterlist *sg;
	size_t at = 0, end = off + len;
	unsigned int i;

	if (!ud->dev || !len || !dma_dev_need_sync(ud->dev))
		return;
	for_each_sgtable_dma_sg(&ud->sgt, sg, i) {
		size_t seg = sg_dma_len(sg), from, to;

		if (at >= end)
			break;
		if (at + seg > off) {
			from = max(off, at) - at;
			to = min(end, at + seg) - at;
			if (for_device)
				dma_sync_single_for_device(ud->dev,
					sg_dma_address(sg) + from, to - from,
					ud->dir);
			else
				dma_sync_single_for_cpu(ud->dev,
					sg_dma_address(sg) + from, to - from,
					ud->dir);
		}
		at += seg;
	}
}

/* DMA segments of the mapping (the IOMMU may have merged pages). */
unsigned int rust_user_dma_nents(const struct rust_user_dma *ud)
{
	return ud->dev ? ud->sgt.nents : 0;
}

/* Copies up to @max DMA segments out; returns how many. */
unsigned int rust_user_dma_segments(const struct rust_user_dma *ud,
				    dma_addr_t *addr, u32 *len,
				    unsigned int max)
{
	struct scatterlist *sg;
	unsigned int i, n = 0;

	if (!ud->dev)
		return 0;
	for_each_sgtable_dma_sg(&ud->sgt, sg, i) {
		if (n == max)
			break;
		addr[n] = sg_dma_address(sg);
		len[n] = sg_dma_len(sg);
		n++;
	}
	return n;
}

/*
 * Unmaps, marks written pages dirty, unpins, gives the charge back and
 * frees. May sleep (the dirtying locks the pages).
 */
void rust_user_dma_unmap(struct rust_user_dma *ud)
{
	might_sleep();
	if (ud->dev) {
		dma_unmap_sgtable(ud->dev, &ud->sgt, ud->dir, 0);
		sg_free_table(&ud->sgt);
	}
	unpin_user_pages_dirty_lock(ud->pages, ud->npages,
				    ud->dir != DMA_TO_DEVICE);
	atomic64_sub(ud->npages, &ud->mm->pinned_vm);
	mmdrop(ud->mm);
	kvfree(ud->pages);
	if (ud->dev)
		put_device(ud->dev);
	kfree(ud);
}

/*
 * CPU copy of @len bytes from offset @src_off of @src's range to offset
 * @dst_off of @dst's, through the pinned pages (for when no engine is
 * there).  The caller checked both ranges and that @dst is writable.
 */
void rust_user_dma_cpu_copy(struct rust_user_dma *dst, size_t dst_off,
			    const struct rust_user_dma *src, size_t src_off,
			    size_t len)
{
	while (len) {
		size_t s = src->offset + src_off, d = dst->offset + dst_off;
		size_t n = min3(len, PAGE_SIZE - offset_in_page(s),
				PAGE_SIZE - offset_in_page(d));
		void *from = kmap_local_page(src->pages[s >> PAGE_SHIFT]);
		void *to = kmap_local_page(dst->pages[d >> PAGE_SHIFT]);

		memcpy(to + offset_in_page(d), from + offset_in_page(s), n);
		kunmap_local(to);
		kunmap_local(from);
		src_off += n;
		dst_off += n;
		len -= n;
	}
}

/*
 * Copies @len bytes at offset @src_off of @src's range to @buf, with the CPU,
 * through the pinned pages.  The caller checked the range.
 */
void rust_user_dma_read(const struct rust_user_dma *src, size_t src_off,
			void *buf, size_t len)
{
	while (len) {
		size_t s = src->offset + src_off;
		size_t n = min(len, PAGE_SIZE - offset_in_page(s));
		const void *from = kmap_local_page(src->pages[s >> PAGE_SHIFT]);

		memcpy(buf, from + offset_in_page(s), n);
		kunmap_local(from);
		buf += n;
		src_off += n;
		len -= n;
	}
}

/*
 * CPU copy of @len bytes from @buf to offset @dst_off of @dst's range,
 * through the pinned pages.  The caller checked the range and that @dst is
 * writable.
 */
void rust_user_dma_write(struct rust_user_dma *dst, size_t dst_off,
			 const void *buf, size_t len)
{
	while (len) {
		size_t d = dst->offset + dst_off;
		size_t n = min(len, PAGE_SIZE - offset_in_page(d));
		void *to = kmap_local_page(dst->pages[d >> PAGE_SHIFT]);

		memcpy(to + offset_in_page(d), buf, n);
		kunmap_local(to);
		buf += n;
		dst_off += n;
		len -= n;
	}
}
