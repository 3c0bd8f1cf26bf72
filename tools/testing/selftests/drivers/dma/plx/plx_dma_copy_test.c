// SPDX-License-Identifier: GPL-2.0
/*
 * kselftests of /dev/plx-dma-copy (include/uapi/linux/plx_dma_copy.h).
 *
 * Needs the plx_dma_copy module and a memcpy channel: without the device
 * node the program skips (exit status 4), without a free channel each test
 * does.
 * The environment names channels with special behaviour, each test that
 * needs one skipping when it is not given:
 *
 *   PLX_DMA_CHAN         channel for the ordinary tests (default: any)
 *   PLX_DMA_FAULT_CHAN   a channel whose engine fails every source read
 *   PLX_DMA_STALL_CHAN   a channel whose engine holds each descriptor for
 *                        a second or more
 *   PLX_DMA_BUSY_CHAN    a channel whose engine runs each descriptor for
 *                        longer than the driver's one-second graceful
 *                        pause, so that only an abort stops it
 *   PLX_DMA_UNBIND_CHAN  a channel whose PCI function may be unbound and
 *                        bound again (the unbind test does that)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/plx_dma_copy.h>
#include <linux/userfaultfd.h>
#include <poll.h>

#include "kselftest_harness.h"

#define DEV_PATH "/dev/plx-dma-copy"
#define PAGE 4096UL
#define MiB (1UL << 20)

/* The published layout: growing a structure must not move these. */
_Static_assert(sizeof(struct plx_dma_info) == 120, "plx_dma_info v2 size");
_Static_assert(offsetof(struct plx_dma_info, regions) == PLX_DMA_INFO_SIZE_VER1,
	       "plx_dma_info v1 size");
_Static_assert(sizeof(struct plx_dma_attach) == 40, "plx_dma_attach v1 size");
_Static_assert(sizeof(struct plx_dma_copy) == PLX_DMA_COPY_SIZE_VER2, "plx_dma_copy v2 size");
_Static_assert(offsetof(struct plx_dma_copy, src_region) == PLX_DMA_COPY_SIZE_VER1,
	       "plx_dma_copy v1 size");
_Static_assert(sizeof(struct plx_dma_region) == 32, "plx_dma_region v1 size");
_Static_assert(sizeof(struct plx_dma_deregister) == 16, "plx_dma_deregister v1 size");
/* The ioctl numbers keep the first version's size. */
_Static_assert(PLX_DMA_IOC_INFO == 0xc068d700, "INFO number");
_Static_assert(PLX_DMA_IOC_COPY == 0x4030d702, "COPY number");
_Static_assert(sizeof(struct plx_dma_submit) == 24, "plx_dma_submit v1 size");
_Static_assert(sizeof(struct plx_dma_completion) == 16, "completion size");
_Static_assert(sizeof(struct plx_dma_reap) == 32, "plx_dma_reap v1 size");

/* Opens the device, or returns -1 with errno (ENOENT: not loaded). */
static int open_dev(void)
{
	return open(DEV_PATH, O_RDWR | O_CLOEXEC);
}

static int attach(int fd, const char *name)
{
	struct plx_dma_attach a = { .size = sizeof(a) };

	if (name)
		snprintf(a.channel, sizeof(a.channel), "%s", name);
	return ioctl(fd, PLX_DMA_IOC_ATTACH, &a);
}

static int info(int fd, struct plx_dma_info *i)
{
	memset(i, 0, sizeof(*i));
	i->size = sizeof(*i);
	return ioctl(fd, PLX_DMA_IOC_INFO, i);
}

/* One synchronous copy: the ioctl's return value, errno on -1. */
static long copy(int fd, const void *src, void *dst, size_t len,
		 unsigned int timeout_ms)
{
	struct plx_dma_copy c = {
		.size = sizeof(c),
		.src = (uintptr_t)src,
		.dst = (uintptr_t)dst,
		.len = len,
		.timeout_ms = timeout_ms,
	};

	return ioctl(fd, PLX_DMA_IOC_COPY, &c);
}

static long copy_arg(int fd, struct plx_dma_copy *c)
{
	return ioctl(fd, PLX_DMA_IOC_COPY, c);
}

static void *map_pages(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void fill(unsigned char *p, size_t len, unsigned int seed)
{
	for (size_t i = 0; i < len; i++) {
		seed = seed * 1103515245u + 12345u;
		p[i] = seed >> 16;
	}
}

/* Index of the first byte of p[0..len) that is not v, or -1. */
static long first_not(const unsigned char *p, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return i;
	return -1;
}

static uint64_t pinned_pages(int fd)
{
	struct plx_dma_info i;

	return info(fd, &i) ? UINT64_MAX : i.pinned_pages;
}

/* Nothing of the file's is left in flight, and no page pinned. */
static void expect_idle(struct __test_metadata *_metadata, int fd)
{
	struct plx_dma_info i;

	ASSERT_EQ(0, info(fd, &i));
	EXPECT_EQ(0, i.in_flight);
	EXPECT_EQ(0, i.pinned_pages);
}

FIXTURE(dev) {
	int fd;
	struct plx_dma_info info;
};

FIXTURE_SETUP(dev)
{
	const char *chan = getenv("PLX_DMA_CHAN");

	self->fd = open_dev();
	if (self->fd < 0 && (errno == ENOENT || errno == ENODEV || errno == ENXIO))
		SKIP(return, "%s: %s (plx_dma_copy not loaded?)", DEV_PATH,
		     strerror(errno));
	ASSERT_LE(0, self->fd) TH_LOG("open %s: %s", DEV_PATH, strerror(errno));
	if (attach(self->fd, chan)) {
		if (errno == ENODEV)
			SKIP(return, "no memcpy channel %s", chan ? chan : "free");
		ASSERT_EQ(0, errno) TH_LOG("attach %s", chan ? chan : "(any)");
	}
	ASSERT_EQ(0, info(self->fd, &self->info));
}

FIXTURE_TEARDOWN(dev)
{
	if (self->fd >= 0)
		close(self->fd);
}

TEST_F(dev, info)
{
	struct plx_dma_info i;

	ASSERT_EQ(0, info(self->fd, &i));
	EXPECT_EQ(PLX_DMA_COPY_ABI_VERSION, i.abi_version);
	EXPECT_LE(16 * MiB, i.max_len);
	EXPECT_LE(1, i.max_batch);
	EXPECT_LE(1, i.max_in_flight);
	EXPECT_LT(0, i.max_pinned_pages);
	EXPECT_EQ(0, strncmp(i.channel, "dma", 3)) TH_LOG("channel '%s'", i.channel);
	EXPECT_EQ(0, i.in_flight);
}

/* The kernel writes no more than the caller's size says. */
TEST_F(dev, info_writes_within_size)
{
	unsigned char buf[sizeof(struct plx_dma_info) + 16];

	memset(buf, 0xa5, sizeof(buf));
	((struct plx_dma_info *)buf)->size = sizeof(struct plx_dma_info);
	ASSERT_EQ(0, ioctl(self->fd, PLX_DMA_IOC_INFO, buf));
	EXPECT_EQ(-1, first_not(buf + sizeof(struct plx_dma_info), 16, 0xa5));
}

/* Copies len bytes at the given offsets into fresh buffers and checks
 * the destination, and that the bytes around it are untouched. */
static int copy_and_check(struct __test_metadata *_metadata, int fd,
			  size_t len, size_t src_off, size_t dst_off)
{
	size_t guard = 64;
	size_t sbytes = (src_off + len + PAGE - 1) / PAGE * PAGE;
	size_t dbytes = (dst_off + len + guard + PAGE - 1) / PAGE * PAGE + PAGE;
	unsigned char *s = map_pages(sbytes), *d = map_pages(dbytes);
	long r, bad;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	fill(s + src_off, len, len ^ (src_off << 8) ^ dst_off);
	memset(d, 0x5a, dbytes);
	r = copy(fd, s + src_off, d + dst_off, len, 0);
	EXPECT_EQ((long)len, r) TH_LOG("len %zu src+%zu dst+%zu: %s", len,
				       src_off, dst_off, strerror(errno));
	EXPECT_EQ(0, memcmp(s + src_off, d + dst_off, len))
		TH_LOG("len %zu src+%zu dst+%zu: data differs", len, src_off,
		       dst_off);
	bad = first_not(d, dst_off, 0x5a);
	EXPECT_EQ(-1, bad) TH_LOG("byte %ld before the destination written", bad);
	bad = first_not(d + dst_off + len, guard, 0x5a);
	EXPECT_EQ(-1, bad) TH_LOG("byte %ld after the destination written", bad);
	munmap(s, sbytes);
	munmap(d, dbytes);
	return r == (long)len ? 0 : -1;
}

TEST_F(dev, sizes_1B_to_16MiB)
{
	static const size_t sizes[] = {
		1, 2, 3, 7, 8, 63, 64, 511, 4095, 4096, 4097, 8191, 65535,
		65536, 65537, 1 << 20, (1 << 20) + 3, 4 << 20, 16 << 20,
	};

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		copy_and_check(_metadata, self->fd, sizes[i], 0, 0);
	EXPECT_EQ(0, pinned_pages(self->fd));
}

TEST_F(dev, alignment_classes)
{
	/* Every pair of source and destination alignment mod 8, plus
	 * cache-line and page-end offsets. */
	static const size_t offs[] = { 0, 1, 2, 3, 4, 5, 6, 7, 8, 63, 64, 4095 };
	const size_t n = sizeof(offs) / sizeof(offs[0]);

	for (size_t a = 0; a < n; a++)
		for (size_t b = 0; b < n; b++)
			copy_and_check(_metadata, self->fd, 1000 + a + b,
				       offs[a], offs[b]);
}

TEST_F(dev, page_crossings)
{
	/* Ranges that start just before a page end and span 2..5 pages, on
	 * one side or both. */
	for (size_t pages = 1; pages <= 4; pages++) {
		copy_and_check(_metadata, self->fd, pages * PAGE + 2, PAGE - 1, 0);
		copy_and_check(_metadata, self->fd, pages * PAGE + 2, 0, PAGE - 1);
		copy_and_check(_metadata, self->fd, pages * PAGE, PAGE - 3, PAGE - 5);
		copy_and_check(_metadata, self->fd, 2, PAGE - 1, PAGE - 1);
	}
}

struct worker {
	int fd;
	unsigned int id;
	int errors;
};

#define THREADS 8
#define THREAD_COPIES 40

static void *copy_worker(void *arg)
{
	struct worker *w = arg;
	size_t len = 3 * PAGE + 100 + w->id;
	unsigned char *s = map_pages(len + PAGE), *d = map_pages(len + PAGE);

	if (!s || !d) {
		w->errors++;
		return NULL;
	}
	for (unsigned int i = 0; i < THREAD_COPIES; i++) {
		fill(s + w->id, len, w->id * 1000 + i);
		memset(d, 0, len + PAGE);
		if (copy(w->fd, s + w->id, d + i % 64, len, 0) != (long)len ||
		    memcmp(s + w->id, d + i % 64, len))
			w->errors++;
	}
	munmap(s, len + PAGE);
	munmap(d, len + PAGE);
	return NULL;
}

TEST_F(dev, many_threads_one_file)
{
	pthread_t t[THREADS];
	struct worker w[THREADS];
	struct plx_dma_info i;

	for (unsigned int k = 0; k < THREADS; k++) {
		w[k] = (struct worker){ .fd = self->fd, .id = k };
		ASSERT_EQ(0, pthread_create(&t[k], NULL, copy_worker, &w[k]));
	}
	for (unsigned int k = 0; k < THREADS; k++) {
		pthread_join(t[k], NULL);
		EXPECT_EQ(0, w[k].errors) TH_LOG("thread %u", k);
	}
	ASSERT_EQ(0, info(self->fd, &i));
	EXPECT_EQ(THREADS * THREAD_COPIES, i.copies);
	EXPECT_EQ(0, i.failed);
	EXPECT_EQ(0, i.pinned_pages);
}

/* Expects COPY with @c to fail with @err, then a good copy to work and no
 * page to stay pinned: a rejected request loses nothing. */
static void expect_rejected(struct __test_metadata *_metadata, int fd,
			    struct plx_dma_copy *c, int err, const char *what)
{
	unsigned char s[256], d[256];

	errno = 0;
	EXPECT_EQ(-1, ioctl(fd, PLX_DMA_IOC_COPY, c)) TH_LOG("%s accepted", what);
	EXPECT_EQ(err, errno) TH_LOG("%s: errno %d (%s), want %d", what, errno,
				     strerror(errno), err);
	fill(s, sizeof(s), err);
	memset(d, 0, sizeof(d));
	EXPECT_EQ((long)sizeof(s), copy(fd, s, d, sizeof(s), 0))
		TH_LOG("good copy after %s: %s", what, strerror(errno));
	EXPECT_EQ(0, memcmp(s, d, sizeof(s))) TH_LOG("after %s", what);
	EXPECT_EQ(0, pinned_pages(fd)) TH_LOG("pages left pinned after %s", what);
}

TEST_F(dev, bad_inputs)
{
	unsigned char *buf = map_pages(4 * PAGE);
	unsigned char *ro = mmap(NULL, PAGE, PROT_READ,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *gone = map_pages(PAGE), *edge = map_pages(3 * PAGE);
	struct plx_dma_copy c, good = {
		.size = sizeof(good),
		.src = (uintptr_t)buf,
		.dst = (uintptr_t)(buf + 2 * PAGE),
		.len = 100,
	};
	unsigned char big[sizeof(struct plx_dma_copy) + 16];

	ASSERT_NE(NULL, buf);
	ASSERT_NE(MAP_FAILED, ro);
	ASSERT_NE(NULL, gone);
	ASSERT_EQ(0, munmap(gone, PAGE));
	ASSERT_NE(NULL, edge);
	ASSERT_EQ(0, munmap(edge + 2 * PAGE, PAGE));

	c = good, c.src = 0;
	expect_rejected(_metadata, self->fd, &c, EFAULT, "NULL source");
	c = good, c.dst = 0;
	expect_rejected(_metadata, self->fd, &c, EFAULT, "NULL destination");
	c = good, c.dst = (uintptr_t)gone;
	expect_rejected(_metadata, self->fd, &c, EFAULT, "unmapped destination");
	c = good, c.src = (uintptr_t)gone;
	expect_rejected(_metadata, self->fd, &c, EFAULT, "unmapped source");
	c = good, c.dst = (uintptr_t)ro;
	expect_rejected(_metadata, self->fd, &c, EFAULT, "read-only destination");
	c = good, c.dst = (uintptr_t)edge, c.len = 3 * PAGE;
	expect_rejected(_metadata, self->fd, &c, EFAULT, "destination running off the mapping");
	c = good, c.len = 0;
	expect_rejected(_metadata, self->fd, &c, EINVAL, "zero length");
	c = good, c.len = self->info.max_len + 1;
	expect_rejected(_metadata, self->fd, &c, E2BIG, "length over max_len");
	c = good, c.len = UINT64_MAX;
	expect_rejected(_metadata, self->fd, &c, E2BIG, "length 2^64-1");
	c = good, c.dst = c.src + 50;
	expect_rejected(_metadata, self->fd, &c, EINVAL, "overlapping ranges");
	c = good, c.dst = c.src;
	expect_rejected(_metadata, self->fd, &c, EINVAL, "identical ranges");
	c = good, c.flags = 1u << 31;
	expect_rejected(_metadata, self->fd, &c, EINVAL, "unknown flag");
	c = good, c.src_region = 1;
	expect_rejected(_metadata, self->fd, &c, EINVAL, "region id without the flag");
	c = good, c.__reserved = 1;
	expect_rejected(_metadata, self->fd, &c, EINVAL, "reserved field set");
	c = good, c.src = (uint64_t)-PAGE;
	expect_rejected(_metadata, self->fd, &c, EFAULT, "source wrapping past 2^64");
	c = good, c.dst = (uint64_t)-PAGE, c.len = PAGE;
	expect_rejected(_metadata, self->fd, &c, EFAULT, "destination ending at 2^64");
	c = good, c.src = UINT64_MAX - 100;
	expect_rejected(_metadata, self->fd, &c, EFAULT, "source in the last bytes below 2^64");
	c = good, c.size = 8;
	expect_rejected(_metadata, self->fd, &c, EINVAL, "struct size too small");
	c = good, c.size = 0;
	expect_rejected(_metadata, self->fd, &c, EINVAL, "struct size 0");
	c = good, c.size = 1 << 20;
	expect_rejected(_metadata, self->fd, &c, E2BIG, "struct size 1 MiB");

	/* A later, larger version of the structure: accepted when the bytes
	 * this kernel does not know are zero, refused otherwise. */
	memset(big, 0, sizeof(big));
	c = good, c.size = sizeof(big);
	memcpy(big, &c, sizeof(c));
	EXPECT_EQ(100, ioctl(self->fd, PLX_DMA_IOC_COPY, big));
	big[sizeof(c) + 3] = 1;
	expect_rejected(_metadata, self->fd, (struct plx_dma_copy *)big, E2BIG,
			"unknown trailing field set");

	EXPECT_EQ(-1, ioctl(self->fd, PLX_DMA_IOC_COPY, NULL));
	EXPECT_EQ(EFAULT, errno) TH_LOG("NULL argument");
	EXPECT_EQ(-1, ioctl(self->fd, _IO(PLX_DMA_IOC_MAGIC, 99), &c));
	EXPECT_EQ(ENOTTY, errno) TH_LOG("unknown ioctl");
	/* The right number with the wrong direction or size bits is not ours. */
	c = good;
	EXPECT_EQ(-1, ioctl(self->fd, _IOWR(PLX_DMA_IOC_MAGIC, 2, struct plx_dma_copy), &c));
	EXPECT_EQ(ENOTTY, errno) TH_LOG("COPY with read-write direction bits");
	EXPECT_EQ(-1, ioctl(self->fd, _IOW(PLX_DMA_IOC_MAGIC, 2, __u64), &c));
	EXPECT_EQ(ENOTTY, errno) TH_LOG("COPY with 8 as size bits");
	EXPECT_EQ(-1, ioctl(self->fd, _IO(PLX_DMA_IOC_MAGIC, 2), &c));
	EXPECT_EQ(ENOTTY, errno) TH_LOG("COPY without direction or size bits");
	EXPECT_EQ(-1, attach(self->fd, NULL));
	EXPECT_EQ(EBUSY, errno) TH_LOG("second attach");
	EXPECT_EQ(0, pinned_pages(self->fd));
	munmap(buf, 4 * PAGE);
	munmap(ro, PAGE);
	munmap(edge, 2 * PAGE);
}

TEST(attach_errors)
{
	struct plx_dma_attach a = { .size = sizeof(a) };
	int fd = open_dev();

	if (fd < 0)
		SKIP(return, "%s: %s", DEV_PATH, strerror(errno));
	snprintf(a.channel, sizeof(a.channel), "dma999chan9");
	EXPECT_EQ(-1, ioctl(fd, PLX_DMA_IOC_ATTACH, &a));
	EXPECT_EQ(ENODEV, errno);
	a.flags = 1;
	EXPECT_EQ(-1, ioctl(fd, PLX_DMA_IOC_ATTACH, &a));
	EXPECT_EQ(EINVAL, errno);
	a.flags = 0;
	memset(a.channel, 'x', sizeof(a.channel));
	EXPECT_EQ(-1, ioctl(fd, PLX_DMA_IOC_ATTACH, &a));
	EXPECT_EQ(EINVAL, errno) TH_LOG("name without NUL");
	close(fd);
}

static long submit(int fd, struct plx_dma_copy *c, unsigned int n)
{
	struct plx_dma_submit s = {
		.size = sizeof(s),
		.count = n,
		.copies = (uintptr_t)c,
		.copy_size = sizeof(*c),
	};

	return ioctl(fd, PLX_DMA_IOC_SUBMIT, &s);
}

static long reap(int fd, struct plx_dma_completion *out, unsigned int min,
		 unsigned int max, unsigned int timeout_ms)
{
	struct plx_dma_reap r = {
		.size = sizeof(r),
		.min = min,
		.max = max,
		.timeout_ms = timeout_ms,
		.completions = (uintptr_t)out,
	};

	return ioctl(fd, PLX_DMA_IOC_REAP, &r);
}

TEST_F(dev, batch_submit_and_reap)
{
	unsigned int n = self->info.max_batch < 64 ? self->info.max_batch : 64;
	size_t len = 2 * PAGE + 17;
	unsigned char *s = map_pages(n * 3 * PAGE), *d = map_pages(n * 3 * PAGE);
	struct plx_dma_copy c[64];
	struct plx_dma_completion done[64];
	unsigned int got = 0, seen[64] = { 0 };

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	fill(s, n * 3 * PAGE, 7);
	memset(d, 0, n * 3 * PAGE);
	for (unsigned int k = 0; k < n; k++)
		c[k] = (struct plx_dma_copy){
			.size = sizeof(c[k]),
			.src = (uintptr_t)(s + k * 3 * PAGE + k),
			.dst = (uintptr_t)(d + k * 3 * PAGE),
			.len = len,
			.user_data = 1000 + k,
		};
	ASSERT_EQ(n, submit(self->fd, c, n)) TH_LOG("%s", strerror(errno));
	while (got < n) {
		long r = reap(self->fd, done, 1, 64, 10000);

		ASSERT_LT(0, r) TH_LOG("reap: %s", strerror(errno));
		for (long k = 0; k < r; k++) {
			uint64_t id = done[k].user_data - 1000;

			ASSERT_LT(id, n);
			EXPECT_EQ((int64_t)len, done[k].result) TH_LOG("copy %llu", (unsigned long long)id);
			seen[id]++;
		}
		got += r;
	}
	for (unsigned int k = 0; k < n; k++) {
		EXPECT_EQ(1, seen[k]);
		EXPECT_EQ(0, memcmp(s + k * 3 * PAGE + k, d + k * 3 * PAGE, len))
			TH_LOG("copy %u", k);
	}
	EXPECT_EQ(0, reap(self->fd, done, 0, 64, 0)) TH_LOG("nothing left to reap");
	EXPECT_EQ(0, pinned_pages(self->fd));
}

struct stalled_reap {
	int fd;
	struct plx_dma_completion *out;
	unsigned int min;
	long ret;
	int err;
	volatile int done;
};

static void *reap_thread(void *arg)
{
	struct stalled_reap *r = arg;

	r->ret = reap(r->fd, r->out, r->min, 1, 10000);
	r->err = errno;
	r->done = 1;
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
}

/*
 * A REAP writing into a completion buffer that faults into a userfaultfd
 * nobody serves waits for as long as user space likes; another REAP of
 * the same file waits behind it, and a signal must still end that wait
 * (EINTR) instead of leaving the thread in uninterruptible sleep.  Once
 * the fault is served, the first REAP reports its completion.
 */
TEST_F(dev, reap_behind_stalled_reaper_is_interruptible)
{
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	struct uffdio_zeropage zp = { .mode = 0 };
	struct sigaction sa = { .sa_handler = on_usr1 };	/* no SA_RESTART */
	struct pollfd pfd = { .events = POLLIN };
	struct plx_dma_completion other;
	struct stalled_reap a = { 0 }, b = { 0 };
	unsigned char s[256], d[256];
	struct uffd_msg msg;
	pthread_t ta, tb;
	unsigned char *area;
	int uffd, waited_ms = 0;
	struct plx_dma_copy c = {
		.size = sizeof(c), .src = (uintptr_t)s, .dst = (uintptr_t)d,
		.len = sizeof(s), .user_data = 77,
	};

	uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	ASSERT_LE(0, uffd) TH_LOG("userfaultfd: %s (CONFIG_USERFAULTFD?)", strerror(errno));
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_API, &api));
	area = map_pages(PAGE);
	ASSERT_NE(NULL, area);
	reg.range.start = (uintptr_t)area;
	reg.range.len = PAGE;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_REGISTER, &reg)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, sigaction(SIGUSR1, &sa, NULL));
	fill(s, sizeof(s), 5);
	ASSERT_EQ(1, submit(self->fd, &c, 1)) TH_LOG("%s", strerror(errno));

	/* A waits for the copy, then stalls writing its completion. */
	a = (struct stalled_reap){ .fd = self->fd, .out = (void *)area, .min = 1 };
	ASSERT_EQ(0, pthread_create(&ta, NULL, reap_thread, &a));
	pfd.fd = uffd;
	ASSERT_EQ(1, poll(&pfd, 1, 10000)) TH_LOG("no userfault from REAP");
	ASSERT_EQ((ssize_t)sizeof(msg), read(uffd, &msg, sizeof(msg)));
	ASSERT_EQ(UFFD_EVENT_PAGEFAULT, msg.event);

	/* B asks for nothing it must wait for: it waits only behind A. */
	b = (struct stalled_reap){ .fd = self->fd, .out = &other, .min = 0 };
	ASSERT_EQ(0, pthread_create(&tb, NULL, reap_thread, &b));
	usleep(200000);
	EXPECT_FALSE(b.done) TH_LOG("REAP did not wait behind the stalled one");
	pthread_kill(tb, SIGUSR1);
	while (!b.done && waited_ms < 3000) {
		usleep(10000);
		waited_ms += 10;
	}
	EXPECT_TRUE(b.done) TH_LOG("a signal did not end the REAP waiting behind a stalled one");

	/* Serve the fault: A ends with the completion, B either way. */
	zp.range.start = (uintptr_t)area;
	zp.range.len = PAGE;
	EXPECT_EQ(0, ioctl(uffd, UFFDIO_ZEROPAGE, &zp)) TH_LOG("%s", strerror(errno));
	pthread_join(ta, NULL);
	pthread_join(tb, NULL);
	EXPECT_EQ(-1, b.ret);
	EXPECT_EQ(EINTR, b.err) TH_LOG("REAP behind a stalled one: %s", strerror(b.err));
	EXPECT_EQ(1, a.ret) TH_LOG("%s", strerror(a.err));
	EXPECT_EQ(77, ((struct plx_dma_completion *)area)[0].user_data);
	EXPECT_EQ(0, memcmp(s, d, sizeof(s)));
	close(uffd);
	munmap(area, PAGE);
}

/* A refused REAP takes nothing: the completion waits for the next one. */
TEST_F(dev, reap_keeps_completions_when_refused)
{
	unsigned char s[512], d[512];
	struct plx_dma_copy c = {
		.size = sizeof(c), .src = (uintptr_t)s, .dst = (uintptr_t)d,
		.len = sizeof(s), .user_data = 42,
	};
	struct plx_dma_completion done[4];
	struct plx_dma_reap r = {
		.size = sizeof(r), .min = 1, .max = 4, .timeout_ms = 10000,
		.completions = (uintptr_t)done, .__reserved = 1,
	};

	fill(s, sizeof(s), 3);
	ASSERT_EQ(1, submit(self->fd, &c, 1));
	EXPECT_EQ(-1, ioctl(self->fd, PLX_DMA_IOC_REAP, &r));
	EXPECT_EQ(EINVAL, errno) TH_LOG("reserved field set");
	EXPECT_EQ(-1, reap(self->fd, (void *)8, 1, 4, 10000));
	EXPECT_EQ(EFAULT, errno);
	ASSERT_EQ(1, reap(self->fd, done, 1, 4, 10000));
	EXPECT_EQ(42, done[0].user_data);
	EXPECT_EQ((int64_t)sizeof(s), done[0].result);
	EXPECT_EQ(0, memcmp(s, d, sizeof(s)));
}

/* INFO's pinned_pages counts the caller's own pages, not another file's. */
TEST_F(dev, pinned_pages_are_per_file)
{
	unsigned char *s = map_pages(4 * PAGE), *d = map_pages(4 * PAGE);
	struct plx_dma_copy c = {
		.size = sizeof(c), .len = 3 * PAGE,
	};
	struct plx_dma_completion done[1];
	int other = open_dev();

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	ASSERT_LE(0, other);
	c.src = (uintptr_t)s, c.dst = (uintptr_t)d;
	fill(s, 3 * PAGE, 5);
	ASSERT_EQ(1, submit(self->fd, &c, 1));
	/* Submitted and not reaped: its pages stay pinned until REAP. */
	EXPECT_EQ(6, pinned_pages(self->fd));
	EXPECT_EQ(0, pinned_pages(other));
	ASSERT_EQ(1, reap(self->fd, done, 1, 1, 10000));
	EXPECT_EQ(0, pinned_pages(self->fd));
	EXPECT_EQ(0, memcmp(s, d, 3 * PAGE));
	close(other);
	munmap(s, 4 * PAGE);
	munmap(d, 4 * PAGE);
}

/*
 * Completions belong to the open file: a dup()ed descriptor reaps them,
 * another open file sees none, and each is reported once.
 */
TEST_F(dev, reap_through_dup_not_other_file)
{
	unsigned char s[4096], d[4096];
	struct plx_dma_copy c = {
		.size = sizeof(c), .src = (uintptr_t)s, .dst = (uintptr_t)d,
		.len = sizeof(s), .user_data = 7,
	};
	struct plx_dma_completion done[2];
	int dupfd = dup(self->fd), other = open_dev();

	ASSERT_LE(0, dupfd);
	ASSERT_LE(0, other);
	fill(s, sizeof(s), 17);
	memset(d, 0, sizeof(d));
	ASSERT_EQ(1, submit(self->fd, &c, 1)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(0, reap(other, done, 0, 2, 0)) TH_LOG("another file's completion");
	ASSERT_EQ(1, reap(dupfd, done, 1, 2, 10000)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(7, done[0].user_data);
	EXPECT_EQ((int64_t)sizeof(s), done[0].result);
	EXPECT_EQ(0, memcmp(s, d, sizeof(s)));
	EXPECT_EQ(0, reap(self->fd, done, 0, 2, 0)) TH_LOG("reported twice");
	close(other);
	close(dupfd);
	expect_idle(_metadata, self->fd);
}

/* Submits @n copies of @len bytes from a fresh buffer; 0 on success. */
static int submit_fresh(int fd, unsigned int n, size_t len, uint64_t first_id)
{
	unsigned char *s = map_pages(len), *d = map_pages(n * len);
	struct plx_dma_copy c[8];

	if (!s || !d || n > 8)
		return -1;
	fill(s, len, 21);
	for (unsigned int k = 0; k < n; k++)
		c[k] = (struct plx_dma_copy){
			.size = sizeof(c[k]), .src = (uintptr_t)s,
			.dst = (uintptr_t)(d + k * len), .len = len,
			.user_data = first_id + k,
		};
	return submit(fd, c, n) == n ? 0 : -1;
}

/*
 * Processes that exit with copies in flight: a child's copies on the
 * parent's file (the file outlives the child; the copies land in the
 * child's orphaned pages and the parent reaps them, which unpins them and
 * gives the dead process's RLIMIT_MEMLOCK charge back), and a child's own
 * file closed by its exit with copies queued (stopped, then unpinned).
 */
TEST_F(dev, fork_and_exit_with_copies_in_flight)
{
	struct plx_dma_completion done[8];
	unsigned int got = 0;
	int status;
	pid_t pid;

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0)
		_exit(submit_fresh(self->fd, 4, MiB, 0) ? 1 : 0);
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	ASSERT_EQ(0, WEXITSTATUS(status)) TH_LOG("child's SUBMIT failed");
	while (got < 4) {
		long r = reap(self->fd, done, 1, 8, 20000);

		ASSERT_LT(0, r) TH_LOG("reap: %s", strerror(errno));
		for (long k = 0; k < r; k++)
			EXPECT_EQ((int64_t)MiB, done[k].result);
		got += r;
	}
	expect_idle(_metadata, self->fd);

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd = open_dev();

		/* Any free channel; the exit closes the file. */
		_exit(fd < 0 || attach(fd, NULL) || submit_fresh(fd, 8, MiB, 0) ? 1 : 0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status)) TH_LOG("child's own file: SUBMIT failed");
}

/*
 * Buffers in a shared file mapping (memfd, MAP_SHARED) copy like
 * anonymous ones, pinned briefly by COPY and for long by SUBMIT; what the
 * engine wrote is what the file holds.
 */
TEST_F(dev, memfd_shared_buffers)
{
	size_t len = 64 * 1024;
	int mfd = memfd_create("plx_dma_copy_test", MFD_CLOEXEC);
	unsigned char *m, *s = map_pages(len), *back = map_pages(len);
	struct plx_dma_completion done;
	struct plx_dma_copy c;

	ASSERT_LE(0, mfd) TH_LOG("memfd_create: %s", strerror(errno));
	ASSERT_EQ(0, ftruncate(mfd, 2 * len));
	m = mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
	ASSERT_NE(MAP_FAILED, m);
	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, back);
	fill(s, len, 31);
	ASSERT_EQ((long)len, copy(self->fd, s, m, len, 0)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ((ssize_t)len, pread(mfd, back, len, 0));
	EXPECT_EQ(0, memcmp(s, back, len)) TH_LOG("COPY into the memfd");
	c = (struct plx_dma_copy){
		.size = sizeof(c), .src = (uintptr_t)m, .dst = (uintptr_t)(m + len),
		.len = len, .user_data = 5,
	};
	ASSERT_EQ(1, submit(self->fd, &c, 1)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(1, reap(self->fd, &done, 1, 1, 10000));
	EXPECT_EQ((int64_t)len, done.result);
	ASSERT_EQ((ssize_t)len, pread(mfd, back, len, len));
	EXPECT_EQ(0, memcmp(s, back, len)) TH_LOG("SUBMIT within the memfd");
	expect_idle(_metadata, self->fd);
	munmap(m, 2 * len);
	munmap(s, len);
	munmap(back, len);
	close(mfd);
}

/* A read-only destination is EFAULT for COPY and SUBMIT; it stays intact. */
TEST_F(dev, read_only_destination_is_efault)
{
	unsigned char *s = map_pages(PAGE), *d = map_pages(PAGE);
	struct plx_dma_copy c;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	fill(s, PAGE, 41);
	memset(d, 0x33, PAGE);
	ASSERT_EQ(0, mprotect(d, PAGE, PROT_READ));
	EXPECT_EQ(-1, copy(self->fd, s, d, PAGE, 0));
	EXPECT_EQ(EFAULT, errno) TH_LOG("COPY: %s", strerror(errno));
	c = (struct plx_dma_copy){
		.size = sizeof(c), .src = (uintptr_t)s, .dst = (uintptr_t)d, .len = PAGE,
	};
	EXPECT_EQ(-1, submit(self->fd, &c, 1));
	EXPECT_EQ(EFAULT, errno) TH_LOG("SUBMIT: %s", strerror(errno));
	EXPECT_EQ(-1, first_not(d, PAGE, 0x33));
	expect_idle(_metadata, self->fd);
	munmap(s, PAGE);
	munmap(d, PAGE);
}

/*
 * The trust model: a file holds its channel exclusively, so only an opener
 * with CAP_SYS_RAWIO may take one. An ordinary user the node is opened to
 * gets EPERM from every call that would take a channel, and so cannot take
 * them all; INFO works, and the channels stay free for others.
 */
TEST(unprivileged_opener_takes_no_channel)
{
	const char *chan = getenv("PLX_DMA_CHAN");
	struct stat st;
	int status, fd;
	pid_t pid;

	ASSERT_EQ(0, stat(DEV_PATH, &st));
	ASSERT_EQ(0, chmod(DEV_PATH, 0666));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		unsigned char s[64] = { 1 }, d[64];
		struct plx_dma_copy c = {
			.size = sizeof(c), .src = (uintptr_t)s, .dst = (uintptr_t)d,
			.len = sizeof(s),
		};
		struct plx_dma_info i;

		/* nobody: no capability left. */
		if (setgid(65534) || setuid(65534))
			_exit(10);
		fd = open_dev();
		if (fd < 0) {
			fprintf(stderr, "# open as nobody: %s\n", strerror(errno));
			_exit(11);
		}
		if (info(fd, &i))
			_exit(12);
		if (attach(fd, chan) != -1 || errno != EPERM)
			_exit(13);
		if (attach(fd, NULL) != -1 || errno != EPERM)
			_exit(14);
		if (copy(fd, s, d, sizeof(s), 0) != -1 || errno != EPERM)
			_exit(15);
		if (submit(fd, &c, 1) != -1 || errno != EPERM)
			_exit(16);
		{
			struct plx_dma_region r = {
				.size = sizeof(r), .access = PLX_DMA_REGION_READ,
				.addr = (uintptr_t)s, .len = sizeof(s),
			};

			if (ioctl(fd, PLX_DMA_IOC_REGISTER, &r) != -1 || errno != EPERM)
				_exit(17);
		}
		c.flags = PLX_DMA_COPY_REGISTERED, c.src = 0, c.dst = 0;
		c.src_region = 1, c.dst_region = 2;
		if (copy_arg(fd, &c) != -1 || errno != EPERM)
			_exit(18);
		_exit(0);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	chmod(DEV_PATH, st.st_mode & 07777);
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("step %d (10 setuid, 11 open, 12 INFO, 13-18 not EPERM)",
		       WEXITSTATUS(status));
	/* The channel is still there for a privileged opener. */
	fd = open_dev();
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, attach(fd, chan)) TH_LOG("%s", strerror(errno));
	close(fd);
}

/*
 * A channel whose driver cannot honour a client's lifetime rules is
 * refused with EOPNOTSUPP.  Without device_terminate_all (the C plx_dma),
 * closing, a timeout or an unbind would unpin pages its engine may still
 * write; without device_release (plx_norelease_provider, shaped like
 * ptdma or hisi_dma), a file closed after the driver went would release a
 * channel already freed.  Run with PLX_DMA_REFUSED_CHAN naming such a
 * channel.
 */
TEST(attach_refuses_unsafe_provider)
{
	const char *name = getenv("PLX_DMA_REFUSED_CHAN");
	struct plx_dma_info i;
	int fd;

	if (!name)
		SKIP(return, "PLX_DMA_REFUSED_CHAN not set");
	fd = open_dev();
	if (fd < 0)
		SKIP(return, "%s: %s", DEV_PATH, strerror(errno));
	EXPECT_EQ(-1, attach(fd, name));
	EXPECT_EQ(EOPNOTSUPP, errno) TH_LOG("attach %s", name);
	ASSERT_EQ(0, info(fd, &i));
	EXPECT_EQ('\0', i.channel[0]) TH_LOG("attached to %s", i.channel);
	/* Attaching to any channel never picks it either. */
	if (attach(fd, NULL) == 0) {
		ASSERT_EQ(0, info(fd, &i));
		EXPECT_STRNE(name, i.channel);
	}
	close(fd);
}

TEST_F(dev, submit_errors)
{
	unsigned char s[64], d[64];
	struct plx_dma_copy c[2] = {
		{ .size = sizeof(c[0]), .src = (uintptr_t)s, .dst = (uintptr_t)d, .len = 64, .user_data = 1 },
		{ .size = sizeof(c[0]), .src = 0, .dst = (uintptr_t)d, .len = 64, .user_data = 2 },
	};
	struct plx_dma_completion done[2];
	struct plx_dma_submit sub = { .size = sizeof(sub), .count = 1, .copies = (uintptr_t)c, .copy_size = 8 };

	EXPECT_EQ(-1, ioctl(self->fd, PLX_DMA_IOC_SUBMIT, &sub));
	EXPECT_EQ(EINVAL, errno) TH_LOG("copy_size too small");
	sub.copy_size = sizeof(c[0]);
	sub.count = 0;
	EXPECT_EQ(-1, ioctl(self->fd, PLX_DMA_IOC_SUBMIT, &sub));
	EXPECT_EQ(EINVAL, errno) TH_LOG("count 0");
	sub.count = self->info.max_batch + 1;
	EXPECT_EQ(-1, ioctl(self->fd, PLX_DMA_IOC_SUBMIT, &sub));
	EXPECT_EQ(E2BIG, errno) TH_LOG("count over max_batch");
	/* The bad second copy ends the batch; the first is queued. */
	EXPECT_EQ(1, submit(self->fd, c, 2));
	EXPECT_EQ(-1, submit(self->fd, &c[1], 1));
	EXPECT_EQ(EFAULT, errno);
	ASSERT_EQ(1, reap(self->fd, done, 1, 2, 10000));
	EXPECT_EQ(1, done[0].user_data);
	EXPECT_EQ(-1, reap(self->fd, done, 2, 1, 0));
	EXPECT_EQ(EINVAL, errno) TH_LOG("min > max");
	EXPECT_EQ(0, pinned_pages(self->fd));
}

/*
 * Copies are queued until the file's share of the pinned-page bound (half
 * of it) is used; the file gets EAGAIN, and another file can still pin.
 */
TEST_F(dev, too_many_pins)
{
	size_t len = 4 * MiB;
	unsigned char *s = map_pages(len), *d = map_pages(len);
	uint64_t per_copy = 2 * len / PAGE, max = self->info.max_pinned_pages;
	uint64_t share = (max + 1) / 2;
	unsigned int limit = max / per_copy + 2, queued = 0;
	struct plx_dma_copy c = {
		.size = sizeof(c), .src = (uintptr_t)s, .dst = (uintptr_t)d, .len = len,
	};
	struct plx_dma_completion done[8];
	int other = -1;
	long r = 0;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	if (limit > self->info.max_in_flight || limit > 64 || share < 2 * per_copy)
		SKIP(goto out, "max_pinned_pages=%llu: not a bound to reach with %llu-page copies",
		     (unsigned long long)max, (unsigned long long)per_copy);
	for (unsigned int k = 0; k < limit; k++) {
		r = submit(self->fd, &c, 1);
		if (r != 1)
			break;
		queued++;
	}
	EXPECT_EQ(-1, r) TH_LOG("%u copies of %zu pages queued under a bound of %llu",
				queued, (size_t)per_copy, (unsigned long long)max);
	EXPECT_EQ(EAGAIN, errno);
	EXPECT_GE(share, queued * per_copy) TH_LOG("one file holds more than half the bound");
	EXPECT_LT(share, (queued + 1) * per_copy) TH_LOG("refused below the file's share");
	/* Half the bound is left for everyone else. */
	other = open_dev();
	ASSERT_LE(0, other);
	ASSERT_EQ(0, attach(other, NULL)) TH_LOG("attach: %s", strerror(errno));
	EXPECT_EQ(1, submit(other, &c, 1)) TH_LOG("second file: %s", strerror(errno));
	EXPECT_EQ(1, reap(other, done, 1, 1, 20000));
	while (queued) {
		long n = reap(self->fd, done, 1, 8, 20000);

		ASSERT_LT(0, n) TH_LOG("reap: %s", strerror(errno));
		for (long k = 0; k < n; k++)
			EXPECT_EQ((int64_t)len, done[k].result);
		queued -= n;
	}
	EXPECT_EQ(0, pinned_pages(self->fd));
	/* The bound is free again. */
	EXPECT_EQ(1, submit(self->fd, &c, 1));
	EXPECT_EQ(1, reap(self->fd, done, 1, 1, 20000));
out:
	if (other >= 0)
		close(other);
	munmap(s, len);
	munmap(d, len);
}

/* The process's VmPin from /proc/self/status, in pages; -1 if unknown. */
static long vm_pin_pages(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &kb) == 1)
			break;
	fclose(f);
	return kb < 0 ? -1 : kb / (PAGE / 1024);
}

/*
 * A file holds at most max_in_flight unreaped copies: the next SUBMIT gets
 * EAGAIN and queues nothing. Closing the file with all of them queued stops
 * the channel first, then unpins: close returns, and the process's VmPin is
 * back to what it was.
 */
TEST_F(dev, in_flight_limit_then_close_with_copies_queued)
{
	unsigned int max = self->info.max_in_flight, batch = self->info.max_batch;
	unsigned char *s = map_pages(PAGE), *d = map_pages((size_t)(max + 1) * PAGE);
	struct plx_dma_copy c[64];
	long pinned_before = vm_pin_pages();
	unsigned int queued = 0;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	ASSERT_LE(batch, 64);
	ASSERT_LE(0, pinned_before);
	fill(s, PAGE, 51);
	while (queued < max) {
		unsigned int n = max - queued < batch ? max - queued : batch;

		for (unsigned int k = 0; k < n; k++)
			c[k] = (struct plx_dma_copy){
				.size = sizeof(c[k]), .src = (uintptr_t)s,
				.dst = (uintptr_t)(d + (size_t)(queued + k) * PAGE),
				.len = PAGE, .user_data = queued + k,
			};
		ASSERT_EQ(n, submit(self->fd, c, n)) TH_LOG("after %u: %s", queued, strerror(errno));
		queued += n;
	}
	c[0].dst = (uintptr_t)(d + (size_t)max * PAGE);
	EXPECT_EQ(-1, submit(self->fd, c, 1));
	EXPECT_EQ(EAGAIN, errno) TH_LOG("copy %u: %s", max + 1, strerror(errno));
	EXPECT_LT(pinned_before, vm_pin_pages());
	EXPECT_EQ(0, close(self->fd));
	self->fd = -1;
	EXPECT_EQ(pinned_before, vm_pin_pages());
	munmap(s, PAGE);
	munmap(d, (size_t)(max + 1) * PAGE);
}

/* Drops CAP_IPC_LOCK, which lets a process pin beyond RLIMIT_MEMLOCK. */
static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
	d[CAP_IPC_LOCK / 32].permitted &= ~(1u << (CAP_IPC_LOCK % 32));
	return syscall(SYS_capset, &h, d);
}

/*
 * Pinned pages are charged to RLIMIT_MEMLOCK like ib_umem's: the charge
 * shows as VmPin while a copy is unreaped, a copy beyond the limit gets
 * ENOMEM and pins nothing, and reaping gives the charge back. The harness
 * runs each test in its own process, so the limit and the dropped
 * capability end with it.
 */
TEST_F(dev, memlock_limit_is_enforced)
{
	const size_t limit_pages = 16, len = 8 * PAGE;
	struct rlimit rl = { limit_pages * PAGE, limit_pages * PAGE };
	unsigned char *s = map_pages(8 * len), *d = map_pages(8 * len);
	struct plx_dma_copy c = {
		.size = sizeof(c), .src = (uintptr_t)s, .dst = (uintptr_t)d, .len = len,
	};
	struct plx_dma_completion done[1];

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &rl));
	ASSERT_EQ(0, drop_ipc_lock()) TH_LOG("capset: %s", strerror(errno));
	ASSERT_EQ(0, vm_pin_pages());
	fill(s, len, 11);
	/* 8 source and 8 destination pages: exactly the limit. */
	ASSERT_EQ(1, submit(self->fd, &c, 1)) TH_LOG("within the limit: %s", strerror(errno));
	EXPECT_EQ(16, vm_pin_pages());
	/* One page more is beyond it. */
	c.src += len, c.dst += len, c.len = 1;
	EXPECT_EQ(-1, submit(self->fd, &c, 1));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(16, vm_pin_pages());
	EXPECT_EQ(16, pinned_pages(self->fd));
	/* A synchronous copy is charged the same way. */
	EXPECT_EQ(-1, copy(self->fd, s + 2 * len, d + 2 * len, 4 * len, 10000));
	EXPECT_EQ(ENOMEM, errno);
	ASSERT_EQ(1, reap(self->fd, done, 1, 1, 10000));
	EXPECT_EQ((int64_t)len, done[0].result);
	EXPECT_EQ(0, memcmp(s, d, len));
	EXPECT_EQ(0, vm_pin_pages());
	/* The limit is free again. */
	EXPECT_EQ((long)len, copy(self->fd, s, d + len, len, 10000));
	EXPECT_EQ(0, vm_pin_pages());
	expect_idle(_metadata, self->fd);
	munmap(s, 8 * len);
	munmap(d, 8 * len);
}

/*
 * Random bad calls: random command numbers, direction and size bits,
 * argument sizes and contents, with every address-sized field pointing
 * somewhere no copy may go (NULL, an unmapped or PROT_NONE page, a kernel
 * address, the top of the address space).  None may crash or hang, and
 * afterwards the file still copies and holds no pins.  PLX_DMA_BAD_CALLS
 * sets the count (default 5000; make soak: 100,000).
 */
TEST_F(dev, random_bad_calls)
{
	const char *env = getenv("PLX_DMA_BAD_CALLS");
	unsigned long n = env ? strtoul(env, NULL, 0) : 5000, ok = 0, fails = 0;
	unsigned char *none = mmap(NULL, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	unsigned char *gone = map_pages(PAGE), *buf = map_pages(2 * PAGE);
	uint64_t bad[] = {
		0, 1, (uintptr_t)none, 0, 0xffff888000000000ull, ~0ull - 4095, ~0ull,
	};
	union {
		uint64_t q[64];
		uint32_t w[128];
	} arg;
	long vm0 = vm_pin_pages();

	ASSERT_NE(MAP_FAILED, none);
	ASSERT_NE(NULL, gone);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, munmap(gone, PAGE));
	bad[3] = (uintptr_t)gone;
	srandom(n);
	for (unsigned long k = 0; k < n; k++) {
		unsigned int nr = random() % 9, dir = random() % 4;
		unsigned int sz = random() % 160;
		unsigned long cmd = _IOC(dir, PLX_DMA_IOC_MAGIC, nr, sz);
		/* Half of the calls use a real command, to reach its checks. */
		const unsigned long real[] = {
			PLX_DMA_IOC_INFO, PLX_DMA_IOC_ATTACH, PLX_DMA_IOC_COPY,
			PLX_DMA_IOC_SUBMIT, PLX_DMA_IOC_REAP, PLX_DMA_IOC_REGISTER,
			PLX_DMA_IOC_DEREGISTER,
		};
		void *p = &arg;
		int r;

		for (unsigned int i = 0; i < 64; i++)
			arg.q[i] = ((uint64_t)random() << 32) | random();
		if (random() % 2) {
			cmd = real[random() % (sizeof(real) / sizeof(real[0]))];
			nr = _IOC_NR(cmd);
			sz = _IOC_SIZE(cmd);
		}
		/* Often a plausible size, so that decoding goes further. */
		if (random() % 2)
			arg.w[0] = sz;
		/* Every address-sized field points nowhere usable. */
		for (unsigned int i = 1; i < 64; i++)
			if (random() % 2)
				arg.q[i] = bad[random() % (sizeof(bad) / sizeof(bad[0]))];
		/* REAP (nr 4) and COPY (nr 2) must not wait for long. */
		if (nr == 4)
			arg.w[3] = 0;
		if (nr == 2)
			arg.w[10] = 1 + random() % 20;
		if (random() % 8 == 0)
			p = (void *)(uintptr_t)bad[random() % (sizeof(bad) / sizeof(bad[0]))];
		r = ioctl(self->fd, cmd, p);
		if (r == 0)
			ok++;
		else
			fails++;
		ASSERT_TRUE(r == 0 || (errno > 0 && errno < 4096))
			TH_LOG("call %lu: cmd %#lx returned %d", k, cmd, r);
	}
	TH_LOG("%lu random calls: %lu succeeded, %lu failed", n, ok, fails);
	/* The file still works. */
	fill(buf, PAGE, 9);
	memset(buf + PAGE, 0, PAGE);
	ASSERT_EQ((long)PAGE, copy(self->fd, buf, buf + PAGE, PAGE, 0)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(0, memcmp(buf, buf + PAGE, PAGE));
	close(self->fd);
	self->fd = -1;
	EXPECT_EQ(vm0, vm_pin_pages());
}

TEST_F(dev, munmap_while_queued)
{
	size_t len = 1 * MiB;
	unsigned char *s = map_pages(len), *d = map_pages(len);
	struct plx_dma_copy c = {
		.size = sizeof(c), .src = (uintptr_t)s, .dst = (uintptr_t)d,
		.len = len, .user_data = 5,
	};
	struct plx_dma_completion done;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	fill(s, len, 11);
	ASSERT_EQ(1, submit(self->fd, &c, 1));
	/* The pinned pages outlive the mappings; the copy finishes into
	 * pages nobody maps any more, and they are freed at reap. */
	ASSERT_EQ(0, munmap(s, len));
	ASSERT_EQ(0, munmap(d, len));
	ASSERT_EQ(1, reap(self->fd, &done, 1, 1, 20000));
	EXPECT_EQ((int64_t)len, done.result);
	EXPECT_EQ(0, pinned_pages(self->fd));
}

struct racer {
	unsigned char *volatile target;
	size_t len;
	volatile int stop;
	unsigned long unmaps;
};

static void *unmap_racer(void *arg)
{
	struct racer *r = arg;

	while (!r->stop) {
		unsigned char *p = r->target;

		if (p && munmap(p, r->len) == 0) {
			mmap(p, r->len, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
			r->unmaps++;
		}
	}
	return NULL;
}

TEST_F(dev, copy_racing_munmap)
{
	struct racer r = { .len = 64 * 1024 };
	unsigned char *s = map_pages(r.len);
	pthread_t t;
	unsigned int ok = 0, efault = 0;

	ASSERT_NE(NULL, s);
	r.target = map_pages(r.len);
	ASSERT_NE(NULL, r.target);
	fill(s, r.len, 1);
	ASSERT_EQ(0, pthread_create(&t, NULL, unmap_racer, &r));
	for (int k = 0; k < 200; k++) {
		long n = copy(self->fd, s, r.target, r.len, 0);

		if (n == (long)r.len)
			ok++;
		else if (n == -1 && errno == EFAULT)
			efault++;
		else
			EXPECT_EQ((long)r.len, n) TH_LOG("copy %d: %s", k, strerror(errno));
	}
	r.stop = 1;
	pthread_join(t, NULL);
	TH_LOG("200 copies: %u done, %u EFAULT, %lu unmaps raced", ok, efault, r.unmaps);
	EXPECT_EQ(200, ok + efault);
	EXPECT_EQ(0, pinned_pages(self->fd));
}

/* Opens a file on the channel named by environment variable @var. */
static int open_special(struct __test_metadata *_metadata, const char *var)
{
	const char *chan = getenv(var);
	int fd;

	if (!chan)
		return -2;
	fd = open_dev();
	if (fd < 0)
		return -1;
	if (attach(fd, chan)) {
		TH_LOG("attach %s: %s", chan, strerror(errno));
		close(fd);
		return -1;
	}
	return fd;
}

TEST(device_fault_is_eio)
{
	unsigned char s[4096], d[4096];
	struct plx_dma_info i;
	int fd = open_special(_metadata, "PLX_DMA_FAULT_CHAN");

	if (fd == -2)
		SKIP(return, "PLX_DMA_FAULT_CHAN not set");
	ASSERT_LE(0, fd);
	memset(d, 0x11, sizeof(d));
	fill(s, sizeof(s), 9);
	EXPECT_EQ(-1, copy(fd, s, d, sizeof(s), 0));
	EXPECT_EQ(EIO, errno) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, info(fd, &i));
	EXPECT_EQ(1, i.failed);
	EXPECT_EQ(0, i.copies);
	EXPECT_EQ(0, i.pinned_pages);
	close(fd);
}

static void on_alarm(int sig)
{
	(void)sig;
}

TEST(signal_interrupts_wait)
{
	unsigned char s[4096], d[4096];
	struct sigaction sa = { .sa_handler = on_alarm };	/* no SA_RESTART */
	struct itimerval it = { .it_value = { .tv_usec = 200000 } };
	struct timespec t0, t1;
	int fd = open_special(_metadata, "PLX_DMA_STALL_CHAN");
	long ms;

	if (fd == -2)
		SKIP(return, "PLX_DMA_STALL_CHAN not set");
	ASSERT_LE(0, fd);
	ASSERT_EQ(0, sigaction(SIGALRM, &sa, NULL));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &it, NULL));
	EXPECT_EQ(-1, copy(fd, s, d, sizeof(s), 30000));
	EXPECT_EQ(EINTR, errno) TH_LOG("%s", strerror(errno));
	clock_gettime(CLOCK_MONOTONIC, &t1);
	ms = (t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000;
	EXPECT_GT(1000, ms) TH_LOG("returned after %ld ms", ms);
	expect_idle(_metadata, fd);
	close(fd);
}

TEST(timeout_is_etimedout)
{
	unsigned char s[4096], d[4096];
	int fd = open_special(_metadata, "PLX_DMA_STALL_CHAN");

	if (fd == -2)
		SKIP(return, "PLX_DMA_STALL_CHAN not set");
	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, copy(fd, s, d, sizeof(s), 200));
	EXPECT_EQ(ETIMEDOUT, errno) TH_LOG("%s", strerror(errno));
	expect_idle(_metadata, fd);
	close(fd);
}

static long ms_between(const struct timeval *a, const struct timeval *b)
{
	return (b->tv_sec - a->tv_sec) * 1000 + (b->tv_usec - a->tv_usec) / 1000;
}

/*
 * A copy that times out on an engine still running its descriptor: the
 * driver's graceful pause gives up after a second, the abort stops the
 * engine, and only then may the pages go. All that waiting must sleep:
 * the thread's system time stays a small part of the call's duration.
 */
TEST(timeout_on_busy_engine_sleeps_until_it_stops)
{
	unsigned char s[4096], d[4096];
	struct rusage r0, r1;
	struct timeval t0, t1;
	long wall, sys;
	int fd = open_special(_metadata, "PLX_DMA_BUSY_CHAN");

	if (fd == -2)
		SKIP(return, "PLX_DMA_BUSY_CHAN not set");
	ASSERT_LE(0, fd);
	fill(s, sizeof(s), 5);
	memset(d, 0x33, sizeof(d));
	ASSERT_EQ(0, getrusage(RUSAGE_THREAD, &r0));
	gettimeofday(&t0, NULL);
	EXPECT_EQ(-1, copy(fd, s, d, sizeof(s), 100));
	EXPECT_EQ(ETIMEDOUT, errno) TH_LOG("%s", strerror(errno));
	gettimeofday(&t1, NULL);
	ASSERT_EQ(0, getrusage(RUSAGE_THREAD, &r1));
	wall = ms_between(&t0, &t1);
	sys = ms_between(&r0.ru_stime, &r1.ru_stime);
	TH_LOG("%ld ms, of which %ld ms system time", wall, sys);
	/* The 100 ms wait, then the pause's second: the abort path ran. */
	EXPECT_LE(1000, wall);
	EXPECT_GT(wall / 4, sys);
	/* Aborted before the engine copied anything. */
	EXPECT_EQ(0x33, d[0]);
	expect_idle(_metadata, fd);
	close(fd);
}

/* Writes @s to sysfs file @path; 0 or -1 with errno. */
static int sysfs_write(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC), ret = 0;

	if (fd < 0)
		return -1;
	if (write(fd, s, strlen(s)) != (ssize_t)strlen(s))
		ret = -1;
	close(fd);
	return ret;
}

/*
 * The PCI function of channel @chan and the sysfs directory of its driver,
 * so that a test can unbind it and bind it again. 0, or -1 with errno.
 */
static int chan_function(const char *chan, char *pci, size_t pci_len,
			 char *drv, size_t drv_len)
{
	char link[PATH_MAX], path[PATH_MAX];
	ssize_t n;

	snprintf(path, sizeof(path), "/sys/class/dma/%s/device", chan);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -1;
	link[n] = 0;
	snprintf(pci, pci_len, "%s", strrchr(link, '/') + 1);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/driver", pci);
	n = readlink(path, link, sizeof(link) - 1);
	if (n < 0)
		return -1;
	link[n] = 0;
	snprintf(drv, drv_len, "/sys/bus/pci/drivers/%s", strrchr(link, '/') + 1);
	return 0;
}

/* Writes @pci to @drv/@what ("bind" or "unbind"); 0 or -1 with errno. */
static int drv_write(const char *drv, const char *what, const char *pci)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/%s", drv, what);
	return sysfs_write(path, pci);
}

struct stalled_submit {
	int fd;
	struct plx_dma_copy c;
	long ret;
	int err;
};

static void *submit_thread(void *arg)
{
	struct stalled_submit *st = arg;

	st->ret = submit(st->fd, &st->c, 1);
	st->err = errno;
	return NULL;
}

struct unbind_call {
	const char *drv, *pci;
	volatile int done;
	int ret;
};

static void *unbind_thread(void *arg)
{
	struct unbind_call *u = arg;

	u->ret = drv_write(u->drv, "unbind", u->pci);
	u->done = 1;
	return NULL;
}

/*
 * A SUBMIT whose source faults into a userfaultfd nobody serves waits in
 * the kernel for as long as user space likes. Unbinding the channel's
 * function meanwhile must complete: the copy device may not hold a lock
 * that removal needs while it touches user memory. Once the fault is
 * served, the submission fails with ENODEV and nothing stays pinned.
 */
TEST(unbind_while_submit_waits_on_userfaultfd)
{
	const char *chan = getenv("PLX_DMA_UNBIND_CHAN");
	struct uffdio_api api = { .api = UFFD_API };
	struct uffdio_register reg = { .mode = UFFDIO_REGISTER_MODE_MISSING };
	struct uffdio_copy uc = { 0 };
	struct pollfd pfd = { .events = POLLIN };
	struct stalled_submit st = { 0 };
	struct unbind_call u = { 0 };
	char drv[256], pci[64];
	struct uffd_msg msg;
	pthread_t sub, unb;
	size_t len = 16 * PAGE;
	unsigned char *area, *d, *fill_buf;
	int uffd, waited_ms = 0, unbound_in_time;

	if (!chan)
		SKIP(return, "PLX_DMA_UNBIND_CHAN not set");
	ASSERT_EQ(0, chan_function(chan, pci, sizeof(pci), drv, sizeof(drv)))
		TH_LOG("%s: %s", chan, strerror(errno));
	uffd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	ASSERT_LE(0, uffd) TH_LOG("userfaultfd: %s (CONFIG_USERFAULTFD?)", strerror(errno));
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_API, &api));
	area = map_pages(len);
	d = map_pages(len);
	fill_buf = map_pages(len);
	ASSERT_NE(NULL, area);
	ASSERT_NE(NULL, d);
	ASSERT_NE(NULL, fill_buf);
	reg.range.start = (uintptr_t)area;
	reg.range.len = len;
	ASSERT_EQ(0, ioctl(uffd, UFFDIO_REGISTER, &reg)) TH_LOG("%s", strerror(errno));

	st.fd = open_special(_metadata, "PLX_DMA_UNBIND_CHAN");
	ASSERT_LE(0, st.fd);
	st.c = (struct plx_dma_copy){
		.size = sizeof(st.c), .src = (uintptr_t)area, .dst = (uintptr_t)d,
		.len = len,
	};
	ASSERT_EQ(0, pthread_create(&sub, NULL, submit_thread, &st));
	/* The submission is inside the kernel, waiting on its first fault. */
	pfd.fd = uffd;
	ASSERT_EQ(1, poll(&pfd, 1, 10000)) TH_LOG("no userfault from SUBMIT");
	ASSERT_EQ((ssize_t)sizeof(msg), read(uffd, &msg, sizeof(msg)));
	ASSERT_EQ(UFFD_EVENT_PAGEFAULT, msg.event);

	u.drv = drv;
	u.pci = pci;
	ASSERT_EQ(0, pthread_create(&unb, NULL, unbind_thread, &u));
	while (!u.done && waited_ms < 10000) {
		usleep(10000);
		waited_ms += 10;
	}
	unbound_in_time = u.done;
	/* Serve the faults, so that both threads can end either way. */
	fill(fill_buf, len, 11);
	uc.dst = (uintptr_t)area;
	uc.src = (uintptr_t)fill_buf;
	uc.len = len;
	EXPECT_EQ(0, ioctl(uffd, UFFDIO_COPY, &uc)) TH_LOG("%s", strerror(errno));
	pthread_join(unb, NULL);
	pthread_join(sub, NULL);
	EXPECT_TRUE(unbound_in_time) TH_LOG("unbind waited for the stalled SUBMIT");
	EXPECT_EQ(0, u.ret) TH_LOG("unbind %s: %s", pci, strerror(errno));
	EXPECT_EQ(-1, st.ret);
	EXPECT_EQ(ENODEV, st.err) TH_LOG("SUBMIT after the unbind: %s", strerror(st.err));
	EXPECT_EQ(0, pinned_pages(st.fd));
	close(st.fd);
	close(uffd);
	ASSERT_EQ(0, drv_write(drv, "bind", pci)) TH_LOG("bind %s again: %s", pci, strerror(errno));
	munmap(area, len);
	munmap(d, len);
	munmap(fill_buf, len);
}

TEST(copies_during_unbind)
{
	const char *chan = getenv("PLX_DMA_UNBIND_CHAN");
	char drv[256], pci[64];
	size_t len = 4 * MiB;
	unsigned char *s, *d;
	struct plx_dma_copy c[8];
	struct plx_dma_completion done[8];
	unsigned int queued, got = 0, ok = 0, gone = 0;
	int fd;

	if (!chan)
		SKIP(return, "PLX_DMA_UNBIND_CHAN not set");
	ASSERT_EQ(0, chan_function(chan, pci, sizeof(pci), drv, sizeof(drv)))
		TH_LOG("%s: %s", chan, strerror(errno));

	fd = open_special(_metadata, "PLX_DMA_UNBIND_CHAN");
	ASSERT_LE(0, fd);
	s = map_pages(len);
	d = map_pages(8 * len);
	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	fill(s, len, 5);
	for (unsigned int k = 0; k < 8; k++)
		c[k] = (struct plx_dma_copy){
			.size = sizeof(c[k]), .src = (uintptr_t)s,
			.dst = (uintptr_t)(d + k * len), .len = len, .user_data = k,
		};
	queued = submit(fd, c, 8);
	ASSERT_LT(0, (int)queued) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, drv_write(drv, "unbind", pci)) TH_LOG("unbind %s: %s", pci, strerror(errno));

	/* Each queued copy ends: done before the unbind, or cancelled. */
	while (got < queued) {
		long r = reap(fd, done, 1, 8, 20000);

		ASSERT_LT(0, r) TH_LOG("reap after unbind: %s", strerror(errno));
		for (long k = 0; k < r; k++) {
			if (done[k].result == (int64_t)len) {
				ok++;
				EXPECT_EQ(0, memcmp(s, d + done[k].user_data * len, len));
			} else {
				EXPECT_EQ(-ECANCELED, done[k].result);
				gone++;
			}
		}
		got += r;
	}
	TH_LOG("%u queued: %u copied before the unbind, %u cancelled", queued, ok, gone);
	EXPECT_EQ(-1, copy(fd, s, d, 4096, 0));
	EXPECT_EQ(ENODEV, errno) TH_LOG("copy on the unbound channel: %s", strerror(errno));
	EXPECT_EQ(0, pinned_pages(fd));
	close(fd);

	ASSERT_EQ(0, drv_write(drv, "bind", pci)) TH_LOG("bind %s again: %s", pci, strerror(errno));
	munmap(s, len);
	munmap(d, 8 * len);
}

/*
 * Registered regions (PLX_DMA_IOC_REGISTER): ranges pinned and mapped once,
 * which copies with PLX_DMA_COPY_REGISTERED address by id and offset.
 */

#define RD PLX_DMA_REGION_READ
#define WR PLX_DMA_REGION_WRITE

/* Registers [p, p + len) with @access: the id, or -1 with errno. */
static long reg(int fd, const void *p, size_t len, unsigned int access)
{
	struct plx_dma_region r = {
		.size = sizeof(r), .access = access, .addr = (uintptr_t)p, .len = len,
	};
	long ret = ioctl(fd, PLX_DMA_IOC_REGISTER, &r);

	if (ret > 0 && r.id != ret) {
		errno = EPROTO;
		return -1;
	}
	return ret;
}

static int dereg(int fd, unsigned int id)
{
	struct plx_dma_deregister d = { .size = sizeof(d), .id = id };

	return ioctl(fd, PLX_DMA_IOC_DEREGISTER, &d);
}

static struct plx_dma_copy rdesc(unsigned int sid, uint64_t soff,
				 unsigned int did, uint64_t doff, uint64_t len)
{
	return (struct plx_dma_copy){
		.size = sizeof(struct plx_dma_copy),
		.flags = PLX_DMA_COPY_REGISTERED,
		.src_region = sid, .src = soff,
		.dst_region = did, .dst = doff,
		.len = len,
	};
}

/* One registered COPY: its return value, errno on -1. */
static long rcopy(int fd, unsigned int sid, uint64_t soff, unsigned int did,
		  uint64_t doff, uint64_t len)
{
	struct plx_dma_copy c = rdesc(sid, soff, did, doff, len);

	return copy_arg(fd, &c);
}

static void expect_regions(struct __test_metadata *_metadata, int fd,
			   unsigned int regions, uint64_t pages)
{
	struct plx_dma_info i;

	ASSERT_EQ(0, info(fd, &i));
	EXPECT_EQ(regions, i.regions);
	EXPECT_EQ(pages, i.region_pages);
	EXPECT_LE(1, i.max_regions);
}

/* COPY and SUBMIT/REAP through two regions, at offsets, verified. */
TEST_F(dev, registered_copy_and_submit)
{
	const size_t slen = 1 * MiB, dlen = 2 * MiB;
	unsigned char *s = map_pages(slen), *d = map_pages(dlen);
	struct plx_dma_copy c[16];
	struct plx_dma_completion done[16];
	long vm0 = vm_pin_pages(), sid, did, bad;
	struct plx_dma_info i;
	unsigned int got = 0;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	ASSERT_LE(0, vm0);
	fill(s, slen, 77);
	memset(d, 0x5a, dlen);
	sid = reg(self->fd, s, slen, RD);
	ASSERT_LT(0, sid) TH_LOG("register source: %s", strerror(errno));
	did = reg(self->fd, d, dlen, WR);
	ASSERT_LT(0, did) TH_LOG("register destination: %s", strerror(errno));
	EXPECT_NE(sid, did);
	expect_regions(_metadata, self->fd, 2, (slen + dlen) / PAGE);
	EXPECT_EQ((slen + dlen) / PAGE, pinned_pages(self->fd));
	EXPECT_EQ(vm0 + (long)((slen + dlen) / PAGE), vm_pin_pages());

	/* The whole source, then an odd range at odd offsets. */
	EXPECT_EQ((long)slen, rcopy(self->fd, sid, 0, did, 0, slen))
		TH_LOG("%s", strerror(errno));
	EXPECT_EQ(0, memcmp(s, d, slen));
	EXPECT_EQ(12345, rcopy(self->fd, sid, 17, did, slen + 4099, 12345))
		TH_LOG("%s", strerror(errno));
	EXPECT_EQ(0, memcmp(s + 17, d + slen + 4099, 12345));
	bad = first_not(d + slen, 4099, 0x5a);
	EXPECT_EQ(-1, bad) TH_LOG("byte %ld before the destination written", bad);
	bad = first_not(d + slen + 4099 + 12345, dlen - slen - 4099 - 12345, 0x5a);
	EXPECT_EQ(-1, bad) TH_LOG("byte %ld after the destination written", bad);
	/* Nothing more was pinned for them. */
	EXPECT_EQ(vm0 + (long)((slen + dlen) / PAGE), vm_pin_pages());

	/* A batch: 16 copies of 64 KiB from different source offsets. */
	memset(d, 0, dlen);
	for (unsigned int k = 0; k < 16; k++) {
		c[k] = rdesc(sid, k * 4096 + k, did, k * 65536 * 2, 65536);
		c[k].user_data = k;
	}
	ASSERT_EQ(16, submit(self->fd, c, 16)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ((slen + dlen) / PAGE, pinned_pages(self->fd));
	while (got < 16) {
		long r = reap(self->fd, done, 1, 16, 10000);

		ASSERT_LT(0, r) TH_LOG("reap: %s", strerror(errno));
		for (long k = 0; k < r; k++) {
			uint64_t u = done[k].user_data;

			ASSERT_GT(16, u);
			EXPECT_EQ(65536, done[k].result);
			EXPECT_EQ(0, memcmp(s + u * 4096 + u, d + u * 65536 * 2, 65536))
				TH_LOG("copy %llu", (unsigned long long)u);
		}
		got += r;
	}
	ASSERT_EQ(0, info(self->fd, &i));
	EXPECT_EQ(18, i.copies);
	EXPECT_EQ(0, i.failed);
	EXPECT_EQ(0, i.in_flight);

	EXPECT_EQ(0, dereg(self->fd, sid));
	EXPECT_EQ(0, dereg(self->fd, did));
	expect_regions(_metadata, self->fd, 0, 0);
	expect_idle(_metadata, self->fd);
	EXPECT_EQ(vm0, vm_pin_pages());
	munmap(s, slen);
	munmap(d, dlen);
}

/* Expects a registered COPY and a one-entry SUBMIT of @c to fail with @err,
 * and nothing to change: no copy in flight, the pins those of the regions. */
static void expect_refused(struct __test_metadata *_metadata, int fd,
			   struct plx_dma_copy *c, int err, uint64_t pages,
			   const char *what)
{
	errno = 0;
	EXPECT_EQ(-1, copy_arg(fd, c)) TH_LOG("COPY %s accepted", what);
	EXPECT_EQ(err, errno) TH_LOG("COPY %s: errno %d (%s), want %d", what,
				     errno, strerror(errno), err);
	errno = 0;
	EXPECT_EQ(-1, submit(fd, c, 1)) TH_LOG("SUBMIT %s accepted", what);
	EXPECT_EQ(err, errno) TH_LOG("SUBMIT %s: errno %d (%s), want %d", what,
				     errno, strerror(errno), err);
	EXPECT_EQ(pages, pinned_pages(fd)) TH_LOG("after %s", what);
}

/* Bounds, overflow, unknown ids, access and struct size: clear errnos,
 * nothing queued, and good copies work after each. */
TEST_F(dev, registered_errors)
{
	unsigned char *s = map_pages(4 * PAGE), *d = map_pages(4 * PAGE);
	unsigned char *ro = map_pages(PAGE), *gone = map_pages(PAGE);
	const uint64_t pages = 8;
	struct plx_dma_region r;
	struct plx_dma_deregister dr;
	struct plx_dma_copy c, two[2];
	struct plx_dma_completion done[1];
	long sid, did, rw, roid;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	ASSERT_NE(NULL, ro);
	ASSERT_NE(NULL, gone);
	ASSERT_EQ(0, munmap(gone, PAGE));
	fill(s, 4 * PAGE, 3);
	fill(ro, PAGE, 13);
	ASSERT_EQ(0, mprotect(ro, PAGE, PROT_READ));

	/* REGISTER's own errors. */
	EXPECT_EQ(-1, reg(self->fd, s, PAGE, 0));
	EXPECT_EQ(EINVAL, errno) TH_LOG("no access bit");
	EXPECT_EQ(-1, reg(self->fd, s, PAGE, 4));
	EXPECT_EQ(EINVAL, errno) TH_LOG("unknown access bit");
	EXPECT_EQ(-1, reg(self->fd, s, 0, RD));
	EXPECT_EQ(EINVAL, errno) TH_LOG("zero length");
	EXPECT_EQ(-1, reg(self->fd, gone, PAGE, RD));
	EXPECT_EQ(EFAULT, errno) TH_LOG("unmapped range");
	EXPECT_EQ(-1, reg(self->fd, NULL, PAGE, RD));
	EXPECT_EQ(EFAULT, errno) TH_LOG("NULL");
	EXPECT_EQ(-1, reg(self->fd, (void *)(uintptr_t)-PAGE, 2 * PAGE, RD));
	EXPECT_EQ(EFAULT, errno) TH_LOG("range wrapping past 2^64");
	EXPECT_EQ(-1, reg(self->fd, ro, PAGE, WR));
	EXPECT_EQ(EFAULT, errno) TH_LOG("read-only memory registered writable");
	EXPECT_EQ(-1, reg(self->fd, s, (self->info.max_pinned_pages + 2) * PAGE, RD));
	EXPECT_EQ(E2BIG, errno) TH_LOG("larger than the file's share of the pin bound");
	r = (struct plx_dma_region){ .size = sizeof(r), .access = RD,
				     .addr = (uintptr_t)s, .len = PAGE, .__reserved = 1 };
	EXPECT_EQ(-1, ioctl(self->fd, PLX_DMA_IOC_REGISTER, &r));
	EXPECT_EQ(EINVAL, errno) TH_LOG("reserved field set");
	r.__reserved = 0, r.size = 8;
	EXPECT_EQ(-1, ioctl(self->fd, PLX_DMA_IOC_REGISTER, &r));
	EXPECT_EQ(EINVAL, errno) TH_LOG("struct size too small");
	EXPECT_EQ(0, pinned_pages(self->fd));
	expect_regions(_metadata, self->fd, 0, 0);

	sid = reg(self->fd, s, 4 * PAGE, RD);
	ASSERT_LT(0, sid) TH_LOG("%s", strerror(errno));
	did = reg(self->fd, d, 4 * PAGE, WR);
	ASSERT_LT(0, did) TH_LOG("%s", strerror(errno));

	c = rdesc(sid, 0, did, 0, 4 * PAGE + 1);
	expect_refused(_metadata, self->fd, &c, EINVAL, pages, "length beyond the regions");
	c = rdesc(sid, 1, did, 0, 4 * PAGE);
	expect_refused(_metadata, self->fd, &c, EINVAL, pages, "source running off its region");
	c = rdesc(sid, 0, did, 3 * PAGE + 1, PAGE);
	expect_refused(_metadata, self->fd, &c, EINVAL, pages, "destination running off its region");
	c = rdesc(sid, 4 * PAGE, did, 0, 1);
	expect_refused(_metadata, self->fd, &c, EINVAL, pages, "source offset at the end");
	c = rdesc(sid, UINT64_MAX, did, 0, 2);
	expect_refused(_metadata, self->fd, &c, EINVAL, pages, "source offset + length overflowing");
	c = rdesc(sid, 0, did, UINT64_MAX - 1, 4);
	expect_refused(_metadata, self->fd, &c, EINVAL, pages, "destination offset + length overflowing");
	c = rdesc(sid, 0, did, 0, 0);
	expect_refused(_metadata, self->fd, &c, EINVAL, pages, "zero length");
	c = rdesc(sid, 0, did, 0, self->info.max_len + 1);
	expect_refused(_metadata, self->fd, &c, E2BIG, pages, "length over max_len");
	c = rdesc(sid + did + 7, 0, did, 0, 100);
	expect_refused(_metadata, self->fd, &c, ENOENT, pages, "unknown source id");
	c = rdesc(sid, 0, 0, 0, 100);
	expect_refused(_metadata, self->fd, &c, ENOENT, pages, "destination id 0");
	c = rdesc(sid, 0, 100000, 0, 100);
	expect_refused(_metadata, self->fd, &c, ENOENT, pages, "destination id out of range");
	c = rdesc(sid, 0, sid, 2 * PAGE, 100);
	expect_refused(_metadata, self->fd, &c, EACCES, pages, "destination registered read-only");
	c = rdesc(did, 0, did, 2 * PAGE, 100);
	expect_refused(_metadata, self->fd, &c, EACCES, pages, "source registered write-only");
	/* (SUBMIT takes the entries' size from copy_size: see
	 * version1_copy_structures.) */
	c = rdesc(sid, 0, did, 0, 100);
	c.size = PLX_DMA_COPY_SIZE_VER1;
	EXPECT_EQ(-1, copy_arg(self->fd, &c));
	EXPECT_EQ(EINVAL, errno) TH_LOG("flag in a version 1 structure");
	c = rdesc(sid, 0, did, 0, 100), c.__reserved = 1;
	expect_refused(_metadata, self->fd, &c, EINVAL, pages, "reserved field set");
	c = rdesc(sid, 0, did, 0, 100), c.flags |= 2;
	expect_refused(_metadata, self->fd, &c, EINVAL, pages, "unknown flag");
	EXPECT_EQ(-1, first_not(d, 4 * PAGE, 0)) TH_LOG("refused copies wrote");

	/* A region both readable and writable, copied within itself. */
	rw = reg(self->fd, d, 4 * PAGE, RD | WR);
	ASSERT_LT(0, rw) TH_LOG("%s", strerror(errno));
	c = rdesc(rw, 0, rw, 100, 200);
	expect_refused(_metadata, self->fd, &c, EINVAL, pages + 4, "overlapping ranges in one region");
	/* The same pages registered twice overlap as well. */
	c = rdesc(rw, 0, did, 100, 200);
	expect_refused(_metadata, self->fd, &c, EINVAL, pages + 4, "overlapping ranges in two regions");
	EXPECT_EQ(2 * PAGE, rcopy(self->fd, sid, PAGE, did, 0, 2 * PAGE));
	EXPECT_EQ(2 * PAGE, rcopy(self->fd, rw, 0, rw, 2 * PAGE, 2 * PAGE));
	EXPECT_EQ(0, memcmp(s + PAGE, d + 2 * PAGE, 2 * PAGE));
	EXPECT_EQ(0, dereg(self->fd, rw));

	/* Read-only memory registered as a source. */
	roid = reg(self->fd, ro, PAGE, RD);
	ASSERT_LT(0, roid) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(PAGE, rcopy(self->fd, roid, 0, did, 0, PAGE));
	EXPECT_EQ(0, memcmp(ro, d, PAGE));
	c = rdesc(sid, 0, roid, 0, 100);
	expect_refused(_metadata, self->fd, &c, EACCES, pages + 1, "read-only region as destination");
	EXPECT_EQ(0, dereg(self->fd, roid));

	/* In a batch, the first bad copy ends it. */
	two[0] = rdesc(sid, 0, did, 0, 100);
	two[1] = rdesc(sid, 0, 9999, 0, 100);
	EXPECT_EQ(1, submit(self->fd, two, 2));
	EXPECT_EQ(-1, submit(self->fd, &two[1], 1));
	EXPECT_EQ(ENOENT, errno);
	ASSERT_EQ(1, reap(self->fd, done, 1, 1, 10000));
	EXPECT_EQ(100, done[0].result);

	/* DEREGISTER's errors. */
	EXPECT_EQ(-1, dereg(self->fd, 0));
	EXPECT_EQ(ENOENT, errno);
	EXPECT_EQ(-1, dereg(self->fd, 9999));
	EXPECT_EQ(ENOENT, errno);
	dr = (struct plx_dma_deregister){ .size = sizeof(dr), .id = sid, .flags = 1 };
	EXPECT_EQ(-1, ioctl(self->fd, PLX_DMA_IOC_DEREGISTER, &dr));
	EXPECT_EQ(EINVAL, errno);
	expect_regions(_metadata, self->fd, 2, pages);
	EXPECT_EQ(0, dereg(self->fd, sid));
	EXPECT_EQ(-1, dereg(self->fd, sid));
	EXPECT_EQ(ENOENT, errno) TH_LOG("deregistered twice");
	c = rdesc(sid, 0, did, 0, 100);
	expect_refused(_metadata, self->fd, &c, ENOENT, 4, "deregistered source");
	EXPECT_EQ(0, dereg(self->fd, did));
	expect_idle(_metadata, self->fd);
	munmap(s, 4 * PAGE);
	munmap(d, 4 * PAGE);
	munmap(ro, PAGE);
}

/* Version 1 callers: a 48-byte structure without the flag copies as ever,
 * alone and in a SUBMIT array of 48-byte entries. */
TEST_F(dev, version1_copy_structures)
{
	unsigned char s[3 * 100], d[3 * 100];
	unsigned char arr[3 * PLX_DMA_COPY_SIZE_VER1];
	struct plx_dma_submit sub = {
		.size = sizeof(sub), .count = 3, .copies = (uintptr_t)arr,
		.copy_size = PLX_DMA_COPY_SIZE_VER1,
	};
	struct plx_dma_completion done[3];
	struct plx_dma_copy c;

	fill(s, sizeof(s), 8);
	memset(d, 0, sizeof(d));
	c = (struct plx_dma_copy){ .size = PLX_DMA_COPY_SIZE_VER1, .src = (uintptr_t)s,
				   .dst = (uintptr_t)d, .len = 100 };
	EXPECT_EQ(100, copy_arg(self->fd, &c)) TH_LOG("%s", strerror(errno));
	for (int k = 0; k < 3; k++) {
		c.src = (uintptr_t)(s + 100 * k), c.dst = (uintptr_t)(d + 100 * k);
		c.user_data = k;
		memcpy(arr + k * PLX_DMA_COPY_SIZE_VER1, &c, PLX_DMA_COPY_SIZE_VER1);
	}
	ASSERT_EQ(3, ioctl(self->fd, PLX_DMA_IOC_SUBMIT, &sub)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(3, reap(self->fd, done, 3, 3, 10000));
	for (int k = 0; k < 3; k++)
		EXPECT_EQ(100, done[k].result);
	EXPECT_EQ(0, memcmp(s, d, sizeof(s)));
	/* The flag in 48-byte entries: there are no region ids to read. */
	((struct plx_dma_copy *)arr)->flags = PLX_DMA_COPY_REGISTERED;
	EXPECT_EQ(-1, ioctl(self->fd, PLX_DMA_IOC_SUBMIT, &sub));
	EXPECT_EQ(EINVAL, errno);
	expect_idle(_metadata, self->fd);
}

/* Ids run out at max_regions (ENOSPC); a deregistered one is free again. */
TEST_F(dev, region_table_full)
{
	unsigned char *p = map_pages(PAGE);
	struct plx_dma_info i;
	unsigned int n;
	long id = 0;

	ASSERT_NE(NULL, p);
	ASSERT_EQ(0, info(self->fd, &i));
	for (n = 0; n < i.max_regions; n++) {
		id = reg(self->fd, p, PAGE, RD);
		ASSERT_LT(0, id) TH_LOG("region %u: %s", n, strerror(errno));
		ASSERT_GE(i.max_regions, id);
	}
	EXPECT_EQ(-1, reg(self->fd, p, PAGE, RD));
	EXPECT_EQ(ENOSPC, errno) TH_LOG("%s", strerror(errno));
	expect_regions(_metadata, self->fd, i.max_regions, i.max_regions);
	EXPECT_EQ(0, dereg(self->fd, id));
	EXPECT_EQ(id, reg(self->fd, p, PAGE, RD)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(i.max_regions, pinned_pages(self->fd));
	munmap(p, PAGE);
}

/*
 * Registrations are charged to RLIMIT_MEMLOCK through the same path as
 * copies: one beyond the limit gets ENOMEM and pins nothing, and copies
 * between registered regions pin nothing more, so they work at the limit.
 */
TEST_F(dev, registered_memlock_limit_is_enforced)
{
	const size_t limit_pages = 16;
	struct rlimit rl = { limit_pages * PAGE, limit_pages * PAGE };
	unsigned char *s = map_pages(8 * PAGE), *d = map_pages(9 * PAGE);
	long sid, did;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	ASSERT_EQ(0, setrlimit(RLIMIT_MEMLOCK, &rl));
	ASSERT_EQ(0, drop_ipc_lock()) TH_LOG("capset: %s", strerror(errno));
	ASSERT_EQ(0, vm_pin_pages());
	fill(s, 8 * PAGE, 21);
	sid = reg(self->fd, s, 8 * PAGE, RD);
	ASSERT_LT(0, sid) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(8, vm_pin_pages());
	EXPECT_EQ(-1, reg(self->fd, d, 9 * PAGE, WR));
	EXPECT_EQ(ENOMEM, errno) TH_LOG("beyond the limit: %s", strerror(errno));
	EXPECT_EQ(8, vm_pin_pages());
	EXPECT_EQ(8, pinned_pages(self->fd));
	did = reg(self->fd, d, 8 * PAGE, WR);
	ASSERT_LT(0, did) TH_LOG("up to the limit: %s", strerror(errno));
	EXPECT_EQ(16, vm_pin_pages());
	/* At the limit: an unregistered copy cannot pin, a registered one
	 * needs nothing. */
	EXPECT_EQ(-1, copy(self->fd, s, d, PAGE, 0));
	EXPECT_EQ(ENOMEM, errno);
	EXPECT_EQ(8 * PAGE, rcopy(self->fd, sid, 0, did, 0, 8 * PAGE)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(0, memcmp(s, d, 8 * PAGE));
	EXPECT_EQ(16, vm_pin_pages());
	EXPECT_EQ(0, dereg(self->fd, did));
	EXPECT_EQ(8, vm_pin_pages());
	EXPECT_EQ(0, dereg(self->fd, sid));
	EXPECT_EQ(0, vm_pin_pages());
	expect_idle(_metadata, self->fd);
	munmap(s, 8 * PAGE);
	munmap(d, 9 * PAGE);
}

/* Reaps @n completions of copies of @len from @s into @d + user_data * len:
 * each ends copied (and the bytes match) or with an error, never with
 * wrong bytes reported as copied. Returns how many were copied. */
static unsigned int reap_checked(struct __test_metadata *_metadata, int fd,
				 unsigned int n, const unsigned char *s,
				 const unsigned char *d, size_t len)
{
	struct plx_dma_completion done[64];
	unsigned int got = 0, ok = 0;

	while (got < n) {
		long r = reap(fd, done, 1, 64, 30000);

		if (r <= 0) {
			EXPECT_LT(0, r) TH_LOG("reap: %s", strerror(errno));
			break;
		}
		for (long k = 0; k < r; k++) {
			if (done[k].result == (int64_t)len) {
				ok++;
				EXPECT_EQ(0, memcmp(s, d + done[k].user_data * len, len))
					TH_LOG("copy %llu reported copied, bytes differ",
					       (unsigned long long)done[k].user_data);
			} else {
				EXPECT_GT(0, done[k].result);
			}
		}
		got += r;
	}
	return ok;
}

/*
 * Deregistering regions that copies in flight use: the ids go at once
 * (ENOENT), the pages stay pinned and mapped until the last copy ends,
 * every copy completes with the right bytes, and then the pages come back.
 */
TEST_F(dev, deregister_with_copies_in_flight)
{
	const size_t len = 1 * MiB, n = 16;
	unsigned char *s = map_pages(len), *d = map_pages(n * len);
	struct plx_dma_copy c[16];
	long vm0 = vm_pin_pages(), sid, did;
	unsigned int ok;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	fill(s, len, 99);
	sid = reg(self->fd, s, len, RD);
	ASSERT_LT(0, sid) TH_LOG("%s", strerror(errno));
	did = reg(self->fd, d, n * len, WR);
	ASSERT_LT(0, did) TH_LOG("%s", strerror(errno));
	for (unsigned int k = 0; k < n; k++) {
		c[k] = rdesc(sid, 0, did, k * len, len);
		c[k].user_data = k;
	}
	ASSERT_EQ((long)n, submit(self->fd, c, n)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(0, dereg(self->fd, sid));
	EXPECT_EQ(0, dereg(self->fd, did));
	expect_regions(_metadata, self->fd, 0, 0);
	EXPECT_EQ(-1, rcopy(self->fd, sid, 0, did, 0, 100));
	EXPECT_EQ(ENOENT, errno);
	ok = reap_checked(_metadata, self->fd, n, s, d, len);
	EXPECT_EQ(n, ok);
	expect_idle(_metadata, self->fd);
	EXPECT_EQ(vm0, vm_pin_pages());
	munmap(s, len);
	munmap(d, n * len);
}

/* The same on an engine that holds each descriptor for seconds, so the
 * copy is surely in flight while its regions are deregistered. */
TEST(deregister_while_engine_stalls)
{
	unsigned char *s = map_pages(PAGE), *d = map_pages(PAGE);
	struct plx_dma_copy c;
	struct plx_dma_info i;
	long vm0 = vm_pin_pages(), sid, did;
	int fd = open_special(_metadata, "PLX_DMA_STALL_CHAN");

	if (fd == -2)
		SKIP(return, "PLX_DMA_STALL_CHAN not set");
	ASSERT_LE(0, fd);
	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	fill(s, PAGE, 7);
	sid = reg(fd, s, PAGE, RD);
	ASSERT_LT(0, sid) TH_LOG("%s", strerror(errno));
	did = reg(fd, d, PAGE, WR);
	ASSERT_LT(0, did) TH_LOG("%s", strerror(errno));
	c = rdesc(sid, 0, did, 0, PAGE);
	ASSERT_EQ(1, submit(fd, &c, 1)) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(0, dereg(fd, sid));
	EXPECT_EQ(0, dereg(fd, did));
	/* The ids are gone, the pages are not: the engine holds the copy. */
	ASSERT_EQ(0, info(fd, &i));
	EXPECT_EQ(1, i.in_flight);
	EXPECT_EQ(0, i.regions);
	EXPECT_EQ(2, i.pinned_pages);
	EXPECT_EQ(vm0 + 2, vm_pin_pages());
	EXPECT_EQ(1, reap_checked(_metadata, fd, 1, s, d, PAGE));
	expect_idle(_metadata, fd);
	EXPECT_EQ(vm0, vm_pin_pages());
	close(fd);
	munmap(s, PAGE);
	munmap(d, PAGE);
}

/* Closing a file with regions, some used by copies in flight, gives every
 * page back. */
TEST_F(dev, close_with_registered_regions)
{
	const size_t len = 256 * 1024;
	unsigned char *s = map_pages(len), *d = map_pages(8 * len);
	struct plx_dma_copy c[8];
	long vm0 = vm_pin_pages(), sid, did;

	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	fill(s, len, 4);
	sid = reg(self->fd, s, len, RD);
	ASSERT_LT(0, sid);
	did = reg(self->fd, d, 8 * len, WR);
	ASSERT_LT(0, did);
	ASSERT_LT(0, reg(self->fd, d, len, RD | WR));
	for (unsigned int k = 0; k < 8; k++)
		c[k] = rdesc(sid, 0, did, k * len, len);
	ASSERT_EQ(8, submit(self->fd, c, 8)) TH_LOG("%s", strerror(errno));
	EXPECT_LT(vm0, vm_pin_pages());
	EXPECT_EQ(0, close(self->fd));
	self->fd = -1;
	EXPECT_EQ(vm0, vm_pin_pages());
	munmap(s, len);
	munmap(d, 8 * len);
}

/* Unbinding the channel's device unmaps and unpins every region, the one
 * copies in flight use as well; the ids go, and registered copies then
 * fail with ENODEV. */
TEST(unbind_with_registered_regions)
{
	const char *chan = getenv("PLX_DMA_UNBIND_CHAN");
	char drv[256], pci[64];
	const size_t len = 4 * MiB;
	unsigned char *s, *d;
	struct plx_dma_copy c[4];
	struct plx_dma_info i;
	long vm0 = vm_pin_pages(), sid, did;
	unsigned int ok;
	int fd;

	if (!chan)
		SKIP(return, "PLX_DMA_UNBIND_CHAN not set");
	ASSERT_EQ(0, chan_function(chan, pci, sizeof(pci), drv, sizeof(drv)))
		TH_LOG("%s: %s", chan, strerror(errno));
	fd = open_special(_metadata, "PLX_DMA_UNBIND_CHAN");
	ASSERT_LE(0, fd);
	s = map_pages(len);
	d = map_pages(4 * len);
	ASSERT_NE(NULL, s);
	ASSERT_NE(NULL, d);
	fill(s, len, 6);
	sid = reg(fd, s, len, RD);
	ASSERT_LT(0, sid) TH_LOG("%s", strerror(errno));
	did = reg(fd, d, 4 * len, WR);
	ASSERT_LT(0, did) TH_LOG("%s", strerror(errno));
	for (unsigned int k = 0; k < 4; k++) {
		c[k] = rdesc(sid, 0, did, k * len, len);
		c[k].user_data = k;
	}
	ASSERT_EQ(4, submit(fd, c, 4)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, drv_write(drv, "unbind", pci)) TH_LOG("unbind %s: %s", pci, strerror(errno));
	ASSERT_EQ(0, info(fd, &i));
	EXPECT_EQ(0, i.regions);
	EXPECT_EQ(0, i.pinned_pages);
	EXPECT_EQ(vm0, vm_pin_pages());
	ok = reap_checked(_metadata, fd, 4, s, d, len);
	TH_LOG("4 queued: %u copied before the unbind", ok);
	EXPECT_EQ(-1, rcopy(fd, sid, 0, did, 0, 100));
	EXPECT_EQ(ENODEV, errno) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(-1, reg(fd, s, PAGE, RD));
	EXPECT_EQ(ENODEV, errno) TH_LOG("%s", strerror(errno));
	EXPECT_EQ(-1, dereg(fd, sid));
	EXPECT_EQ(ENOENT, errno);
	close(fd);
	ASSERT_EQ(0, drv_write(drv, "bind", pci)) TH_LOG("bind %s again: %s", pci, strerror(errno));
	munmap(s, len);
	munmap(d, 4 * len);
}

/* Without the device, the whole program is skipped (exit status 4). */
int main(int argc, char **argv)
{
	if (access(DEV_PATH, F_OK)) {
		ksft_print_header();
		ksft_exit_skip("%s: %s (is plx_dma_copy loaded?)\n", DEV_PATH,
			       strerror(errno));
	}
	return test_harness_run(argc, argv);
}
