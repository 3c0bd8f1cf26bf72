// SPDX-License-Identifier: GPL-2.0
/*
 * Control groups over the users of one RDMA device (cgroup v2):
 *
 * - the rdma controller's limit on verbs objects (rdma.max,
 *   "hca_object"), which ib_core enforces for every device that creates
 *   its objects through it: the same on plx_rdma and rxe, so that one
 *   user cannot take a device's QPs, CQs, PDs or MRs from all the others.
 *   (Its limit on contexts, "hca_handle", is not tested: on Linux 7.3.4 a
 *   context refused by it leaks the opening task's task_struct, on any
 *   device. The ioctl path's UVERBS_METHOD_GET_CONTEXT frees the
 *   ucontext without rdma_restrack_put(), dropping the task reference
 *   rdma_restrack_set_name() took; kmemleak reports it);
 * - the memory controller, charged with the kernel memory of a user's
 *   queues: plx_rdma allocates its CQ and QP rings with
 *   GFP_KERNEL_ACCOUNT, so a ring of 65536 completions counts against the
 *   group of the process that asked for it. (rxe's rings are not
 *   charged: that test is plx_rdma's only.)
 *
 *   PLX_RDMA_DEV=plx_rdma0 ./cgroup_test
 *
 * Each test makes a group under /sys/fs/cgroup (cgroup2 is mounted there
 * if it is not), moves itself in (the harness runs every test in a
 * process of its own), works, and moves back out before the group goes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"

#define CG_ROOT "/sys/fs/cgroup"
#define CGROUP2_SUPER_MAGIC 0x63677270

static const char *dev_name(void)
{
	const char *d = getenv("PLX_RDMA_DEV");

	return d ? d : "plx_rdma0";
}

static struct ibv_context *open_named(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	int err = ENODEV;

	for (int i = 0; list && list[i]; i++) {
		if (strcmp(ibv_get_device_name(list[i]), name))
			continue;
		ctx = ibv_open_device(list[i]);
		err = errno;
	}
	if (list)
		ibv_free_device_list(list);
	errno = err;
	return ctx;
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, text, strlen(text));
	n = n < 0 ? -errno : 0;
	close(fd);
	return n;
}

static long long read_number(const char *path)
{
	char buf[64] = "";
	int fd = open(path, O_RDONLY);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	return n > 0 ? atoll(buf) : -1;
}

FIXTURE(group) {
	char dir[128];
	char path[192];
};

/* The group's file @name. */
static const char *cg_file(FIXTURE_DATA(group) *self, const char *name)
{
	snprintf(self->path, sizeof(self->path), "%s/%s", self->dir, name);
	return self->path;
}

FIXTURE_SETUP(group)
{
	struct statfs fs;

	if (statfs(CG_ROOT, &fs) || fs.f_type != CGROUP2_SUPER_MAGIC)
		ASSERT_EQ(0, mount("none", CG_ROOT, "cgroup2", 0, NULL))
			TH_LOG("cannot mount cgroup2 on %s: %s", CG_ROOT, strerror(errno));
	ASSERT_EQ(0, write_file(CG_ROOT "/cgroup.subtree_control", "+rdma +memory"))
		TH_LOG("the rdma and memory controllers (CONFIG_CGROUP_RDMA, CONFIG_MEMCG)");
	snprintf(self->dir, sizeof(self->dir), CG_ROOT "/plx_rdma_test.%d", getpid());
	ASSERT_EQ(0, mkdir(self->dir, 0755));
}

FIXTURE_TEARDOWN(group)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", getpid());
	write_file(CG_ROOT "/cgroup.procs", pid);
	rmdir(self->dir);
}

/* Moves this process into the group. */
static int enter(FIXTURE_DATA(group) *self)
{
	char pid[16];

	snprintf(pid, sizeof(pid), "%d", getpid());
	return write_file(cg_file(self, "cgroup.procs"), pid);
}

/* Sets the group's rdma.max for the device to @limits. */
static int rdma_max(FIXTURE_DATA(group) *self, const char *limits)
{
	char line[128];

	snprintf(line, sizeof(line), "%s %s", dev_name(), limits);
	return write_file(cg_file(self, "rdma.max"), line);
}

/*
 * A group allowed 8 verbs objects gets 8 PDs, and the ninth fails with
 * EAGAIN (the rdma controller's answer) until one of them goes.
 */
TEST_F(group, objects_bounded_by_rdma_max)
{
	struct ibv_pd *pds[16];
	struct ibv_context *ctx;
	struct ibv_pd *again;
	int n = 0, err = 0;

	ASSERT_EQ(0, rdma_max(self, "hca_object=8"));
	ASSERT_EQ(0, enter(self));
	ctx = open_named(dev_name());
	ASSERT_NE(NULL, ctx) TH_LOG("open %s: %s", dev_name(), strerror(errno));
	while (n < 16) {
		pds[n] = ibv_alloc_pd(ctx);
		if (!pds[n]) {
			err = errno;
			break;
		}
		n++;
	}
	EXPECT_EQ(8, n);
	EXPECT_EQ(EAGAIN, err);
	/* The limit counts live objects: one freed, one more allowed. */
	ASSERT_EQ(0, ibv_dealloc_pd(pds[--n]));
	again = ibv_alloc_pd(ctx);
	EXPECT_NE(NULL, again);
	if (again)
		ibv_dealloc_pd(again);
	while (n > 0)
		ibv_dealloc_pd(pds[--n]);
	ibv_close_device(ctx);
}

/*
 * A CQ of 65536 completions costs its creator's group the ring's memory:
 * at least 32 bytes a completion (a work request id, a status, an opcode,
 * a length and a QP number), and it is given back when the CQ goes.
 */
TEST_F(group, cq_ring_charged_to_creator)
{
	const int cqe = 65536;
	long long before, with, after;
	struct ibv_context *ctx;
	struct ibv_cq *cq;

	if (strncmp(dev_name(), "plx_rdma", 8))
		SKIP(return, "%s: only plx_rdma charges its rings (rxe's are not)",
		     dev_name());
	ASSERT_EQ(0, enter(self));
	ctx = open_named(dev_name());
	ASSERT_NE(NULL, ctx) TH_LOG("open %s: %s", dev_name(), strerror(errno));
	before = read_number(cg_file(self, "memory.current"));
	cq = ibv_create_cq(ctx, cqe, NULL, NULL, 0);
	ASSERT_NE(NULL, cq) TH_LOG("create a CQ of %d: %s", cqe, strerror(errno));
	with = read_number(cg_file(self, "memory.current"));
	ASSERT_EQ(0, ibv_destroy_cq(cq));
	after = read_number(cg_file(self, "memory.current"));
	TH_LOG("group memory: %lld before, %lld with the CQ, %lld after", before, with,
	       after);
	ASSERT_LE(0, before);
	EXPECT_LE(before + 32LL * cqe, with);
	EXPECT_GT(with - 16LL * cqe, after);
	ibv_close_device(ctx);
}

TEST_HARNESS_MAIN
