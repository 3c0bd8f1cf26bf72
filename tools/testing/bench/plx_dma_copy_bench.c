// SPDX-License-Identifier: GPL-2.0
/*
 * User-buffer copy throughput through /dev/plx-dma-copy, for `make bench`:
 * COUNT copies of SIZE bytes one ioctl at a time (COPY), then pipelined in
 * batches (SUBMIT one batch while the previous one runs, REAP it), then by
 * the CPU (memcpy). Prints one line:
 *
 *   BENCH uapi SIZE REP COUNT SYNC_NS BATCH_NS CPU_NS
 *
 * Then registers the source and destination buffers once
 * (PLX_DMA_IOC_REGISTER) and times the same pipelined batches as copies
 * between the registered regions, which pin and map nothing; prints:
 *
 *   BENCH uapi registered SIZE REP COUNT REGISTERED_NS
 *
 *   plx_dma_copy_bench SIZE COUNT REP
 *
 * The environment variable PLX_DMA_CHAN names the channel to use (default:
 * any free one).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <linux/plx_dma_copy.h>

#define DEPTH 32	/* copies per batch; two batches in flight */

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000ull + t.tv_nsec;
}

static int reap_all(int fd, struct plx_dma_completion *done, unsigned int n,
		    size_t len);

/* Registers [p, p + len) with @access: the region id, or -1 with errno. */
static long reg(int fd, void *p, size_t len, unsigned int access)
{
	struct plx_dma_region r = {
		.size = sizeof(r), .access = access, .addr = (uintptr_t)p, .len = len,
	};

	return ioctl(fd, PLX_DMA_IOC_REGISTER, &r);
}

/* SUBMITs @batches batches of DEPTH copies from the two arrays in turn,
 * reaping each while the next runs; 0, or -1 after printing why. */
static int pipelined(int fd, struct plx_dma_copy c[2][DEPTH],
		     unsigned int batches, size_t len)
{
	struct plx_dma_completion done[DEPTH];

	for (unsigned int b = 0; b <= batches; b++) {
		struct plx_dma_submit s = {
			.size = sizeof(s), .count = DEPTH,
			.copies = (uintptr_t)c[b % 2], .copy_size = sizeof(c[0][0]),
		};

		if (b < batches && ioctl(fd, PLX_DMA_IOC_SUBMIT, &s) != DEPTH)
			return fprintf(stderr, "submit: %s\n", strerror(errno)), -1;
		if (b > 0 && reap_all(fd, done, DEPTH, len))
			return fprintf(stderr, "reap: %s\n", strerror(errno)), -1;
	}
	return 0;
}

static int reap_all(int fd, struct plx_dma_completion *done, unsigned int n,
		    size_t len)
{
	struct plx_dma_reap r = {
		.size = sizeof(r), .min = n, .max = n, .timeout_ms = 60000,
		.completions = (uintptr_t)done,
	};

	if (ioctl(fd, PLX_DMA_IOC_REAP, &r) < 0 || r.reaped != n)
		return -1;
	for (unsigned int i = 0; i < n; i++)
		if (done[i].result != (int64_t)len)
			return -1;
	return 0;
}

int main(int argc, char **argv)
{
	size_t len;
	unsigned int count, rep, batches;
	unsigned char *src, *dst;
	struct plx_dma_copy c[2][DEPTH];
	uint64_t t0, sync_ns, batch_ns, cpu_ns, reg_ns;
	long sid, did;
	int fd;

	if (argc != 4)
		return fprintf(stderr, "usage: %s SIZE COUNT REP\n", argv[0]), 2;
	len = strtoul(argv[1], NULL, 0);
	count = strtoul(argv[2], NULL, 0);
	rep = strtoul(argv[3], NULL, 0);
	batches = count / DEPTH;
	if (!len || batches < 2)
		return fprintf(stderr, "SIZE > 0 and COUNT >= %d\n", 2 * DEPTH), 2;
	count = batches * DEPTH;
	src = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	dst = mmap(NULL, 2 * DEPTH * len, PROT_READ | PROT_WRITE,
		   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (src == MAP_FAILED || dst == MAP_FAILED)
		return perror("mmap"), 1;
	memset(src, 0x3c, len);
	memset(dst, 0, 2 * DEPTH * len);
	fd = open("/dev/plx-dma-copy", O_RDWR);
	if (fd < 0)
		return perror("/dev/plx-dma-copy"), 1;
	if (getenv("PLX_DMA_CHAN")) {
		struct plx_dma_attach a = { .size = sizeof(a) };

		snprintf(a.channel, sizeof(a.channel), "%s", getenv("PLX_DMA_CHAN"));
		if (ioctl(fd, PLX_DMA_IOC_ATTACH, &a))
			return fprintf(stderr, "attach %s: %s\n", a.channel, strerror(errno)), 1;
	}
	for (unsigned int b = 0; b < 2; b++)
		for (unsigned int i = 0; i < DEPTH; i++)
			c[b][i] = (struct plx_dma_copy){
				.size = sizeof(c[b][i]), .src = (uintptr_t)src,
				.dst = (uintptr_t)(dst + (b * DEPTH + i) * len),
				.len = len,
			};

	t0 = now_ns();
	for (unsigned int i = 0; i < count; i++)
		if (ioctl(fd, PLX_DMA_IOC_COPY, &c[0][i % DEPTH]) != (long)len)
			return fprintf(stderr, "copy: %s\n", strerror(errno)), 1;
	sync_ns = now_ns() - t0;

	t0 = now_ns();
	if (pipelined(fd, c, batches, len))
		return 1;
	batch_ns = now_ns() - t0;

	t0 = now_ns();
	for (unsigned int i = 0; i < count; i++) {
		memcpy(dst + (i % (2 * DEPTH)) * len, src, len);
		/* Keep the copy from being optimised away. */
		__asm__ volatile("" : : "r"(dst) : "memory");
	}
	cpu_ns = now_ns() - t0;

	printf("BENCH uapi %zu %u %u %llu %llu %llu\n", len, rep, count,
	       (unsigned long long)sync_ns, (unsigned long long)batch_ns,
	       (unsigned long long)cpu_ns);
	fflush(stdout);

	/* Registered once, outside the timing; then the same batches. */
	sid = reg(fd, src, len, PLX_DMA_REGION_READ);
	if (sid < 0)
		return fprintf(stderr, "register source: %s\n", strerror(errno)), 1;
	did = reg(fd, dst, 2 * DEPTH * len, PLX_DMA_REGION_WRITE);
	if (did < 0)
		return fprintf(stderr, "register destination: %s\n", strerror(errno)), 1;
	memset(dst, 0, 2 * DEPTH * len);
	for (unsigned int b = 0; b < 2; b++)
		for (unsigned int i = 0; i < DEPTH; i++)
			c[b][i] = (struct plx_dma_copy){
				.size = sizeof(c[b][i]), .flags = PLX_DMA_COPY_REGISTERED,
				.src_region = sid, .src = 0,
				.dst_region = did, .dst = (uint64_t)(b * DEPTH + i) * len,
				.len = len,
			};
	t0 = now_ns();
	if (pipelined(fd, c, batches, len))
		return 1;
	reg_ns = now_ns() - t0;
	for (unsigned int i = 0; i < 2 * DEPTH; i++)
		if (memcmp(dst + i * len, src, len))
			return fprintf(stderr, "registered copy %u: wrong bytes\n", i), 1;
	printf("BENCH uapi registered %zu %u %u %llu\n", len, rep, count,
	       (unsigned long long)reg_ns);
	close(fd);
	return 0;
}
