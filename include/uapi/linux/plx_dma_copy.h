/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * User-buffer copies through a dmaengine memcpy channel: /dev/plx-dma-copy.
 *
 * Every argument structure starts with its own size, set by the caller to
 * sizeof() of the structure it was built with. The kernel accepts a size
 * from the first published version up to its own; a larger one is accepted
 * only if the bytes it does not know are zero (E2BIG otherwise), so the
 * structures can grow at their end without new ioctl numbers. Output
 * fields are written only up to the size the caller gave. The ioctl
 * numbers carry the size of each structure's first version and keep it
 * as the structure grows.
 *
 * See Documentation/userspace-api/plx_dma_copy.rst.
 */
#ifndef _UAPI_LINUX_PLX_DMA_COPY_H
#define _UAPI_LINUX_PLX_DMA_COPY_H

#include <linux/ioctl.h>
#include <linux/types.h>

/*
 * 1: INFO, ATTACH, COPY, SUBMIT, REAP.
 * 2: registered regions (REGISTER, DEREGISTER, PLX_DMA_COPY_REGISTERED,
 *    struct plx_dma_copy and struct plx_dma_info grown at their end).
 */
#define PLX_DMA_COPY_ABI_VERSION 2

/* Longest channel name, with its NUL. */
#define PLX_DMA_CHAN_NAME_LEN 32

/*
 * PLX_DMA_IOC_INFO: the ABI, the limits, the file's channel and counters.
 * Works before a channel is attached (channel[] is then empty).
 */
struct plx_dma_info {
	__u32 size;		/* in */
	__u32 abi_version;	/* PLX_DMA_COPY_ABI_VERSION */
	__u64 max_len;		/* longest copy */
	__u32 max_batch;	/* most copies per PLX_DMA_IOC_SUBMIT */
	__u32 max_in_flight;	/* most submitted, unreaped copies per file */
	__u64 max_pinned_pages;	/* pages all files may pin at once */
	__u64 pinned_pages;	/* pages this file's copies hold pinned now */
	char channel[PLX_DMA_CHAN_NAME_LEN]; /* e.g. "dma0chan0" */
	__u64 copies;		/* this file: copies that succeeded */
	__u64 failed;		/* this file: copies that failed */
	__u64 bytes;		/* this file: bytes copied */
	__u32 in_flight;	/* this file: submitted, not reaped */
	__u32 __reserved;
	/* ABI version 2: */
	__u32 regions;		/* this file: registered regions */
	__u32 max_regions;	/* most registered regions per file */
	__u64 region_pages;	/* pages they span (part of pinned_pages) */
};

#define PLX_DMA_INFO_SIZE_VER1 104

/*
 * PLX_DMA_IOC_ATTACH: take a memcpy channel for this file, by name or
 * (empty name) any. A file uses one channel; COPY and SUBMIT attach to any
 * free channel if none was chosen. Only channels whose driver can terminate
 * them are used, since closing the file, a timeout or an unbind stop the
 * engine before the pages are unpinned. EBUSY: already attached; ENODEV: no
 * such free channel; EOPNOTSUPP: the named channel cannot be terminated
 * (e.g. one of the C plx_dma driver).
 */
struct plx_dma_attach {
	__u32 size;
	__u32 flags;		/* 0 */
	char channel[PLX_DMA_CHAN_NAME_LEN];
};

/*
 * struct plx_dma_copy.flags: src and dst are offsets in the registered
 * regions src_region and dst_region (PLX_DMA_IOC_REGISTER), not user
 * addresses. Needs the version 2 structure (size >= 56, EINVAL otherwise).
 */
#define PLX_DMA_COPY_REGISTERED (1u << 0)

/* One copy: for PLX_DMA_IOC_COPY, or an element of a SUBMIT array. */
struct plx_dma_copy {
	__u32 size;
	__u32 flags;		/* 0 or PLX_DMA_COPY_REGISTERED */
	__u64 src;		/* user address, or offset in src_region */
	__u64 dst;		/* user address (writable), or offset in dst_region */
	__u64 len;		/* 1..max_len, ranges must not overlap */
	__u64 user_data;	/* SUBMIT: returned in the completion */
	__u32 timeout_ms;	/* COPY: 0 is PLX_DMA_DEFAULT_TIMEOUT_MS */
	__u32 __reserved;
	/* ABI version 2; both 0 without PLX_DMA_COPY_REGISTERED: */
	__u32 src_region;	/* region id, PLX_DMA_REGION_READ */
	__u32 dst_region;	/* region id, PLX_DMA_REGION_WRITE */
};

#define PLX_DMA_COPY_SIZE_VER1 48
#define PLX_DMA_COPY_SIZE_VER2 56

#define PLX_DMA_DEFAULT_TIMEOUT_MS 10000

/*
 * PLX_DMA_IOC_SUBMIT: pin, map and queue up to max_batch copies without
 * waiting. Copies are validated and queued in order; `submitted` says how
 * many were queued. The ioctl fails only if the first one could not be
 * (its errno); a later bad copy ends the batch early, and resubmitting
 * from it reports its errno.
 */
struct plx_dma_submit {
	__u32 size;
	__u32 count;		/* entries at `copies` */
	__u64 copies;		/* user address of struct plx_dma_copy[count] */
	__u32 copy_size;	/* sizeof(struct plx_dma_copy) of the array */
	__u32 submitted;	/* out */
};

/* A finished SUBMIT copy. */
struct plx_dma_completion {
	__u64 user_data;
	__s64 result;		/* len when copied, else -errno */
};

/*
 * PLX_DMA_IOC_REAP: wait (interruptibly, up to timeout_ms; 0 does not wait)
 * until `min` copies have finished, then return up to `max` of them, oldest
 * first. Returns with fewer than `min` on timeout (reaped says how many).
 */
struct plx_dma_reap {
	__u32 size;
	__u32 min;
	__u32 max;		/* entries at `completions` */
	__u32 timeout_ms;
	__u64 completions;	/* user address of struct plx_dma_completion[max] */
	__u32 reaped;		/* out */
	__u32 __reserved;	/* must be 0 (EINVAL otherwise) */
};

/* struct plx_dma_region.access: what copies may do with the region. */
#define PLX_DMA_REGION_READ	(1u << 0)	/* a copy's source */
#define PLX_DMA_REGION_WRITE	(1u << 1)	/* a copy's destination */

/*
 * PLX_DMA_IOC_REGISTER: pin [addr, addr + len) for good and map it for the
 * file's channel (attaching to any free one if none was chosen), so that
 * copies with PLX_DMA_COPY_REGISTERED use it without pinning or mapping.
 * The pages count against RLIMIT_MEMLOCK and the pin bound like a copy's.
 * Returns the region's id (1..max_regions), also written to `id`.
 */
struct plx_dma_region {
	__u32 size;
	__u32 access;		/* PLX_DMA_REGION_READ and/or _WRITE */
	__u64 addr;		/* user address */
	__u64 len;		/* bytes, > 0 */
	__u32 id;		/* out */
	__u32 __reserved;	/* must be 0 */
};

/*
 * PLX_DMA_IOC_DEREGISTER: forget region `id` at once (ENOENT for later
 * copies naming it); its pages are unmapped and unpinned when the last
 * copy that uses it has ended.
 */
struct plx_dma_deregister {
	__u32 size;
	__u32 id;
	__u32 flags;		/* 0 */
	__u32 __reserved;	/* must be 0 */
};

#define PLX_DMA_IOC_MAGIC 0xd7
#define PLX_DMA_IOC_INFO	_IOC(_IOC_READ | _IOC_WRITE, PLX_DMA_IOC_MAGIC, 0, \
				     PLX_DMA_INFO_SIZE_VER1)
#define PLX_DMA_IOC_ATTACH	_IOW(PLX_DMA_IOC_MAGIC, 1, struct plx_dma_attach)
#define PLX_DMA_IOC_COPY	_IOC(_IOC_WRITE, PLX_DMA_IOC_MAGIC, 2, \
				     PLX_DMA_COPY_SIZE_VER1)
#define PLX_DMA_IOC_SUBMIT	_IOWR(PLX_DMA_IOC_MAGIC, 3, struct plx_dma_submit)
#define PLX_DMA_IOC_REAP	_IOWR(PLX_DMA_IOC_MAGIC, 4, struct plx_dma_reap)
#define PLX_DMA_IOC_REGISTER	_IOWR(PLX_DMA_IOC_MAGIC, 5, struct plx_dma_region)
#define PLX_DMA_IOC_DEREGISTER	_IOW(PLX_DMA_IOC_MAGIC, 6, struct plx_dma_deregister)

#endif /* _UAPI_LINUX_PLX_DMA_COPY_H */
