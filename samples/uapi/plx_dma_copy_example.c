// SPDX-License-Identifier: GPL-2.0
/*
 * Copy a user buffer with the DMA engine through /dev/plx-dma-copy: one
 * synchronous copy, then a batch submitted at once and reaped together.
 *
 *   plx_dma_copy_example [BYTES]
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <linux/plx_dma_copy.h>

#define BATCH 8

int main(int argc, char **argv)
{
	size_t len = argc > 1 ? strtoul(argv[1], NULL, 0) : 1 << 20;
	struct plx_dma_info info = { .size = sizeof(info) };
	struct plx_dma_copy one = { .size = sizeof(one) };
	struct plx_dma_copy many[BATCH];
	struct plx_dma_completion done[BATCH];
	struct plx_dma_submit submit = {
		.size = sizeof(submit), .count = BATCH,
		.copies = (uintptr_t)many, .copy_size = sizeof(many[0]),
	};
	struct plx_dma_reap reap = {
		.size = sizeof(reap), .min = BATCH, .max = BATCH,
		.timeout_ms = 10000, .completions = (uintptr_t)done,
	};
	unsigned char *src = malloc(len), *dst = malloc(len * BATCH);
	long ret;
	int fd;

	if (!src || !dst || !len)
		return 1;
	fd = open("/dev/plx-dma-copy", O_RDWR);
	if (fd < 0) {
		perror("/dev/plx-dma-copy");
		return 1;
	}
	for (size_t i = 0; i < len; i++)
		src[i] = i * 7 + 1;

	/* One copy: returns when the engine is done (or failed). */
	one.src = (uintptr_t)src;
	one.dst = (uintptr_t)dst;
	one.len = len;
	ret = ioctl(fd, PLX_DMA_IOC_COPY, &one);
	if (ret < 0) {
		fprintf(stderr, "copy: %s\n", strerror(errno));
		return 1;
	}
	if (ioctl(fd, PLX_DMA_IOC_INFO, &info) == 0)
		printf("copied %ld bytes on %s: %s\n", ret, info.channel,
		       memcmp(src, dst, len) ? "MISMATCH" : "verified");

	/* A batch: one system call to queue, one to collect. */
	memset(dst, 0, len * BATCH);
	for (int i = 0; i < BATCH; i++)
		many[i] = (struct plx_dma_copy){
			.size = sizeof(many[i]), .src = (uintptr_t)src,
			.dst = (uintptr_t)(dst + i * len), .len = len,
			.user_data = i,
		};
	if (ioctl(fd, PLX_DMA_IOC_SUBMIT, &submit) < 0 ||
	    ioctl(fd, PLX_DMA_IOC_REAP, &reap) < 0) {
		fprintf(stderr, "batch: %s\n", strerror(errno));
		return 1;
	}
	for (unsigned int i = 0; i < reap.reaped; i++) {
		uint64_t k = done[i].user_data;

		if (done[i].result != (int64_t)len ||
		    memcmp(src, dst + k * len, len)) {
			fprintf(stderr, "batch copy %llu: %lld\n",
				(unsigned long long)k, (long long)done[i].result);
			return 1;
		}
	}
	printf("batch: %u of %d copies of %zu bytes reaped, verified\n",
	       reap.reaped, BATCH, len);
	close(fd);
	return reap.reaped == BATCH ? 0 : 1;
}
