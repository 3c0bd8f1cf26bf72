// SPDX-License-Identifier: GPL-2.0
/*
 * Verbs kselftests, run on any RDMA device: once on plx_rdma and once on
 * rdma_rxe (the behavioural oracle), after which
 * verbs_diff.sh compares what both runs printed.
 *
 *   PLX_RDMA_DEV=plx_rdma0 ./verbs_test
 *
 * Every test builds two RC QPs on the device, connected to each other
 * (the loopback case both devices support), runs one sequence of verbs
 * and checks the verbs outcome: the work completions' status, opcode,
 * byte_len and immediate data, the posting and modify return values, the
 * QP states, and the memory: a destination is compared with its source, a
 * buffer that must stay untouched carries a canary.  Each observation is
 * also printed as a "# OUTCOME" line, so that two runs can be compared
 * line by line.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"

/*
 * Every test registers two regions and fills one byte by byte; for the
 * tests that need 16 MiB, on an emulated guest with KASAN (rxe on a busy
 * host above all), that alone can take most of the harness's default 30 s,
 * so no test gets less than this.
 */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 180

#define PAGE 4096UL
#define MiB (1UL << 20)
/*
 * Each region: 16 MiB and two pages for the tests that move 16 MiB or
 * place 1 MiB requests side by side, 1 MiB and two pages for the others.
 * Filling, registering and checking the regions is most of a test's time
 * under emulation, so the small tests keep them small.
 */
#define BIG_BUF (16 * MiB + 2 * PAGE)
#define SMALL_BUF (MiB + 2 * PAGE)
#define BUF (self->buf)
#define CANARY 0x5a
#define DEPTH 16

FIXTURE(pair) {
	struct ibv_context *ctx;
	struct ibv_pd *pd, *pd2;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_port_attr port;
	union ibv_gid gid;
	int gid_index;
	unsigned char *src, *dst;
	size_t buf;	/* bytes of each region: BIG_BUF or SMALL_BUF */
	struct ibv_mr *src_mr, *dst_mr;
};

/* Whether test @name needs regions of BIG_BUF. */
static int needs_big_buf(const char *name)
{
	return strstr(name, "16MiB") || !strcmp(name, "dereg_target_while_writing") ||
	       !strcmp(name, "destroy_qp_with_requests_queued");
}

/* One observation, the same on every device that behaves alike. */
#define OUTCOME(fmt, ...) \
	printf("# OUTCOME %s: " fmt "\n", _metadata->name, ##__VA_ARGS__)

static struct ibv_context *open_named(const char *name)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (list)
		ibv_free_device_list(list);
	return ctx;
}

static struct ibv_qp *make_qp(FIXTURE_DATA(pair) *self, struct ibv_pd *pd)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = self->cq,
		.recv_cq = self->cq,
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			.max_send_sge = 4, .max_recv_sge = 4,
		},
	};

	return ibv_create_qp(pd, &ia);
}

static int to_init(struct ibv_qp *qp, int access)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1,
		.qp_access_flags = access,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
			     IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
}

/* The address of this port: by LID on InfiniBand, by GID (RoCE) on Ethernet. */
static struct ibv_ah_attr self_av(FIXTURE_DATA(pair) *self)
{
	struct ibv_ah_attr ah = { .port_num = 1 };

	if (self->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		ah.is_global = 1;
		ah.grh.dgid = self->gid;
		ah.grh.sgid_index = self->gid_index;
		ah.grh.hop_limit = 1;
	} else {
		ah.dlid = self->port.lid;
	}
	return ah;
}

/* RTR toward @dest, on this port. */
static int to_rtr(FIXTURE_DATA(pair) *self, struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest, .rq_psn = 0, .max_dest_rd_atomic = 4,
		.min_rnr_timer = 1,
		.ah_attr = self_av(self),
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			     IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			     IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
}

static int to_rts(struct ibv_qp *qp, int rnr_retry)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 7,
		.rnr_retry = rnr_retry, .sq_psn = 0, .max_rd_atomic = 4,
	};

	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
			     IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Connects a and b to each other; 0 or the first failing step's errno. */
static int connect_pair(FIXTURE_DATA(pair) *self, int access_b, int rnr_retry)
{
	int full = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		   IBV_ACCESS_REMOTE_READ;

	return to_init(self->a, full) ?: to_init(self->b, access_b) ?:
	       to_rtr(self, self->a, self->b->qp_num) ?:
	       to_rtr(self, self->b, self->a->qp_num) ?:
	       to_rts(self->a, rnr_retry) ?: to_rts(self->b, rnr_retry);
}

static int qp_state(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	if (ibv_query_qp(qp, &a, IBV_QP_STATE, &ia))
		return -1;
	return a.qp_state;
}

FIXTURE_SETUP(pair)
{
	const char *name = getenv("PLX_RDMA_DEV");
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		     IBV_ACCESS_REMOTE_READ;

	if (!name)
		SKIP(return, "PLX_RDMA_DEV names no device");
	self->buf = needs_big_buf(_metadata->name) ? BIG_BUF : SMALL_BUF;
	self->ctx = open_named(name);
	ASSERT_NE(NULL, self->ctx) TH_LOG("open %s: %s", name, strerror(errno));
	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &self->port));
	self->gid_index = 0;
	if (self->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		/* An IPv4-mapped GID (RoCEv2): the last one of the table. */
		for (int i = 0; i < self->port.gid_tbl_len; i++) {
			union ibv_gid g;

			if (ibv_query_gid(self->ctx, 1, i, &g) || !g.global.interface_id)
				continue;
			self->gid = g;
			self->gid_index = i;
		}
	}
	self->pd = ibv_alloc_pd(self->ctx);
	self->pd2 = ibv_alloc_pd(self->ctx);
	ASSERT_NE(NULL, self->pd);
	ASSERT_NE(NULL, self->pd2);
	self->cq = ibv_create_cq(self->ctx, 4 * DEPTH, NULL, NULL, 0);
	ASSERT_NE(NULL, self->cq);
	self->a = make_qp(self, self->pd);
	self->b = make_qp(self, self->pd);
	ASSERT_NE(NULL, self->a);
	ASSERT_NE(NULL, self->b);
	self->src = mmap(NULL, BUF, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	self->dst = mmap(NULL, BUF, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, self->src);
	ASSERT_NE(MAP_FAILED, self->dst);
	for (size_t i = 0; i < BUF; i++)
		self->src[i] = (unsigned char)(i * 7 + 3);
	memset(self->dst, CANARY, BUF);
	self->src_mr = ibv_reg_mr(self->pd, self->src, BUF, access);
	self->dst_mr = ibv_reg_mr(self->pd, self->dst, BUF, access);
	ASSERT_NE(NULL, self->src_mr) TH_LOG("reg_mr: %s", strerror(errno));
	ASSERT_NE(NULL, self->dst_mr);
}

FIXTURE_TEARDOWN(pair)
{
	if (self->a)
		ibv_destroy_qp(self->a);
	if (self->b)
		ibv_destroy_qp(self->b);
	if (self->src_mr)
		ibv_dereg_mr(self->src_mr);
	if (self->dst_mr)
		ibv_dereg_mr(self->dst_mr);
	if (self->cq)
		ibv_destroy_cq(self->cq);
	if (self->pd2)
		ibv_dealloc_pd(self->pd2);
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);
	if (self->src && self->src != MAP_FAILED)
		munmap(self->src, BUF);
	if (self->dst && self->dst != MAP_FAILED)
		munmap(self->dst, BUF);
}

/*
 * Polls @n completions (60 s at most: rxe over lo under a debug kernel
 * moves a few MB/s); returns how many arrived.
 */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n)
{
	struct timespec t0, t;
	int got = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < n) {
		int r = ibv_poll_cq(cq, n - got, wc + got);

		if (r < 0)
			return got;
		got += r;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec > 60)
			break;
		if (!r)
			usleep(100);
	}
	return got;
}

/* Nothing more arrives within 200 ms. */
static int poll_none(struct ibv_cq *cq)
{
	struct ibv_wc wc;

	usleep(200000);
	return ibv_poll_cq(cq, 1, &wc);
}

static int post_rdma(struct ibv_qp *qp, enum ibv_wr_opcode op, void *laddr,
		     uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		     uint32_t imm, int flags, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = flags, .imm_data = htonl(imm),
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

static int post_recv(struct ibv_qp *qp, void *addr, uint32_t len, uint32_t lkey,
		     uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)addr, .length = len, .lkey = lkey };
	struct ibv_recv_wr wr = { .wr_id = wr_id, .sg_list = &sge, .num_sge = 1 }, *bad;

	return ibv_post_recv(qp, &wr, &bad);
}

/* Index of the first byte of p[0..len) that is not v, or -1. */
static long first_not(const unsigned char *p, size_t len, unsigned char v)
{
	for (size_t i = 0; i < len; i++)
		if (p[i] != v)
			return i;
	return -1;
}

static void report_wc(struct __test_metadata *_metadata, const char *what,
		      const struct ibv_wc *wc)
{
	OUTCOME("%s status=%s opcode=%d byte_len=%u imm=%s%08x", what,
		ibv_wc_status_str(wc->status), wc->opcode,
		wc->status == IBV_WC_SUCCESS ? wc->byte_len : 0,
		wc->wc_flags & IBV_WC_WITH_IMM ? "" : "none:",
		wc->wc_flags & IBV_WC_WITH_IMM ? ntohl(wc->imm_data) : 0);
}

/*
 * One successful transfer of @len bytes at offsets that cross pages: WRITE
 * and READ from a's view, SEND from a to b.  The destination must equal the
 * source and the bytes around it keep the canary.
 */
static void transfer(struct __test_metadata *_metadata, FIXTURE_DATA(pair) *self,
		     enum ibv_wr_opcode op, uint32_t len, uint32_t imm)
{
	size_t soff = 1 + (len % 3), doff = 2 + (len % 5);
	unsigned char *s = self->src + soff, *d = self->dst + doff;
	struct ibv_wc wc[2];
	int want = 1, recv = op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM ||
			    op == IBV_WR_RDMA_WRITE_WITH_IMM;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE |
				  IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ, 7));
	if (recv) {
		ASSERT_EQ(0, post_recv(self->b, d, len, self->dst_mr->lkey, 77));
		want = 2;
	}
	if (op == IBV_WR_RDMA_READ) {
		/* a reads b's memory (src) into its own (dst). */
		ASSERT_EQ(0, post_rdma(self->a, op, d, len, self->dst_mr->lkey,
				       (uintptr_t)s, self->src_mr->rkey, 0,
				       IBV_SEND_SIGNALED, 1));
	} else {
		ASSERT_EQ(0, post_rdma(self->a, op, s, len, self->src_mr->lkey,
				       (uintptr_t)d, self->dst_mr->rkey, imm,
				       IBV_SEND_SIGNALED, 1));
	}
	ASSERT_EQ(want, poll_n(self->cq, wc, want));
	for (int i = 0; i < want; i++) {
		report_wc(_metadata, wc[i].wr_id == 1 ? "send" : "recv", &wc[i]);
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status)
			TH_LOG("%s", ibv_wc_status_str(wc[i].status));
		if (wc[i].wr_id == 1) {
			EXPECT_EQ(len, wc[i].byte_len);
			EXPECT_EQ(self->a->qp_num, wc[i].qp_num);
		} else {
			EXPECT_EQ(len, wc[i].byte_len);
			EXPECT_EQ(self->b->qp_num, wc[i].qp_num);
			if (op != IBV_WR_SEND) {
				EXPECT_TRUE(wc[i].wc_flags & IBV_WC_WITH_IMM);
				EXPECT_EQ(imm, ntohl(wc[i].imm_data));
			}
			EXPECT_EQ(op == IBV_WR_RDMA_WRITE_WITH_IMM ?
				  IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV, wc[i].opcode);
		}
	}
	EXPECT_EQ(0, memcmp(s, d, len));
	EXPECT_EQ(-1, first_not(self->dst, doff, CANARY));
	EXPECT_EQ(-1, first_not(d + len, 64, CANARY));
	OUTCOME("memory=%s", memcmp(s, d, len) ? "differs" : "copied");
	EXPECT_EQ(0, poll_none(self->cq));
}

#define TRANSFER_TEST(name, op, len, imm) \
	TEST_F(pair, name) { transfer(_metadata, self, op, len, imm); }

TRANSFER_TEST(write_1B, IBV_WR_RDMA_WRITE, 1, 0)
TRANSFER_TEST(write_4095B, IBV_WR_RDMA_WRITE, 4095, 0)
TRANSFER_TEST(write_4KiB, IBV_WR_RDMA_WRITE, 4096, 0)
TRANSFER_TEST(write_64KiB_3, IBV_WR_RDMA_WRITE, 65539, 0)
TRANSFER_TEST(write_1MiB, IBV_WR_RDMA_WRITE, 1 << 20, 0)
TRANSFER_TEST(write_16MiB, IBV_WR_RDMA_WRITE, 16 << 20, 0)
TRANSFER_TEST(read_1B, IBV_WR_RDMA_READ, 1, 0)
TRANSFER_TEST(read_4095B, IBV_WR_RDMA_READ, 4095, 0)
TRANSFER_TEST(read_4KiB, IBV_WR_RDMA_READ, 4096, 0)
TRANSFER_TEST(read_64KiB_3, IBV_WR_RDMA_READ, 65539, 0)
TRANSFER_TEST(read_1MiB, IBV_WR_RDMA_READ, 1 << 20, 0)
TRANSFER_TEST(read_16MiB, IBV_WR_RDMA_READ, 16 << 20, 0)
TRANSFER_TEST(send_1B, IBV_WR_SEND, 1, 0)
TRANSFER_TEST(send_4095B, IBV_WR_SEND, 4095, 0)
TRANSFER_TEST(send_4KiB, IBV_WR_SEND, 4096, 0)
TRANSFER_TEST(send_64KiB_3, IBV_WR_SEND, 65539, 0)
TRANSFER_TEST(send_1MiB, IBV_WR_SEND, 1 << 20, 0)
TRANSFER_TEST(send_16MiB, IBV_WR_SEND, 16 << 20, 0)
TRANSFER_TEST(write_imm_4KiB, IBV_WR_RDMA_WRITE_WITH_IMM, 4096, 0x12345678)
TRANSFER_TEST(write_imm_1MiB, IBV_WR_RDMA_WRITE_WITH_IMM, 1 << 20, 0xcafe)
TRANSFER_TEST(send_imm_100B, IBV_WR_SEND_WITH_IMM, 100, 0xdeadbeef)

/*
 * A request that must fail: a's one completion has @status, nothing of
 * b's memory (dst) changes, and a ends in ERR.  @how says what is wrong.
 */
enum fault {
	BAD_RKEY, STALE_RKEY, RKEY_OTHER_PD, RKEY_NO_REMOTE_WRITE,
	QP_NO_REMOTE_WRITE, REMOTE_OUT_OF_BOUNDS, READ_NO_REMOTE_READ,
	READ_OUT_OF_BOUNDS, BAD_LKEY, LKEY_OUT_OF_BOUNDS, LKEY_OTHER_PD,
	READ_INTO_READ_ONLY,
};

static void faulty(struct __test_metadata *_metadata, FIXTURE_DATA(pair) *self,
		   enum fault how, enum ibv_wc_status status)
{
	uint32_t len = 8192, lkey = self->src_mr->lkey, rkey = self->dst_mr->rkey;
	unsigned char *l = self->src + 16, *r = self->dst + 32;
	enum ibv_wr_opcode op = IBV_WR_RDMA_WRITE;
	int access_b = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
		       IBV_ACCESS_REMOTE_READ;
	struct ibv_mr *extra = NULL;
	struct ibv_wc wc;
	unsigned char *watch = self->dst;

	switch (how) {
	case BAD_RKEY:
		rkey ^= 0x5500;
		break;
	case STALE_RKEY:
		extra = ibv_reg_mr(self->pd, self->dst, BUF, access_b);
		ASSERT_NE(NULL, extra);
		rkey = extra->rkey;
		ASSERT_EQ(0, ibv_dereg_mr(extra));
		extra = NULL;
		break;
	case RKEY_OTHER_PD:
		extra = ibv_reg_mr(self->pd2, self->dst, BUF, access_b);
		ASSERT_NE(NULL, extra);
		rkey = extra->rkey;
		break;
	case RKEY_NO_REMOTE_WRITE:
		extra = ibv_reg_mr(self->pd, self->dst, BUF,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ);
		ASSERT_NE(NULL, extra);
		rkey = extra->rkey;
		break;
	case QP_NO_REMOTE_WRITE:
		access_b = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ;
		break;
	case REMOTE_OUT_OF_BOUNDS:
		r = self->dst + BUF - len / 2;
		break;
	case READ_NO_REMOTE_READ:
		op = IBV_WR_RDMA_READ;
		extra = ibv_reg_mr(self->pd, self->src, BUF,
				   IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		ASSERT_NE(NULL, extra);
		break;
	case READ_OUT_OF_BOUNDS:
		op = IBV_WR_RDMA_READ;
		break;
	case BAD_LKEY:
		lkey ^= 0x5500;
		break;
	case LKEY_OUT_OF_BOUNDS:
		l = self->src + BUF - len / 2;
		break;
	case LKEY_OTHER_PD:
		extra = ibv_reg_mr(self->pd2, self->src, BUF, IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NE(NULL, extra);
		lkey = extra->lkey;
		break;
	case READ_INTO_READ_ONLY:
		op = IBV_WR_RDMA_READ;
		extra = ibv_reg_mr(self->pd, self->dst, BUF, 0);
		ASSERT_NE(NULL, extra);
		break;
	}
	if (op == IBV_WR_RDMA_READ) {
		/* a reads b's src into a's dst: dst is what must not change. */
		l = self->dst + 16;
		lkey = how == READ_INTO_READ_ONLY ? extra->lkey : self->dst_mr->lkey;
		r = how == READ_OUT_OF_BOUNDS ? self->src + BUF - len / 2 : self->src + 32;
		rkey = how == READ_NO_REMOTE_READ ? extra->rkey : self->src_mr->rkey;
	}
	ASSERT_EQ(0, connect_pair(self, access_b, 7));
	ASSERT_EQ(0, post_rdma(self->a, op, l, len, lkey, (uintptr_t)r, rkey, 0,
			       IBV_SEND_SIGNALED, 1));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "send", &wc);
	EXPECT_EQ(status, wc.status) TH_LOG("got %s", ibv_wc_status_str(wc.status));
	EXPECT_EQ(-1, first_not(watch, BUF, CANARY)) TH_LOG("the target changed");
	EXPECT_EQ(IBV_QPS_ERR, qp_state(self->a));
	OUTCOME("memory=%s a=%d", first_not(watch, BUF, CANARY) < 0 ? "untouched" : "changed",
		qp_state(self->a));
	/* A later request is flushed. */
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 8, self->src_mr->lkey,
			       (uintptr_t)self->dst, self->dst_mr->rkey, 0,
			       IBV_SEND_SIGNALED, 2));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "after", &wc);
	EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc.status);
	EXPECT_EQ(-1, first_not(watch, BUF, CANARY));
	if (extra)
		ibv_dereg_mr(extra);
}

#define FAULT_TEST(name, how, status) \
	TEST_F(pair, name) { faulty(_metadata, self, how, status); }

FAULT_TEST(write_bad_rkey, BAD_RKEY, IBV_WC_REM_ACCESS_ERR)
FAULT_TEST(write_stale_rkey, STALE_RKEY, IBV_WC_REM_ACCESS_ERR)
FAULT_TEST(write_rkey_other_pd, RKEY_OTHER_PD, IBV_WC_REM_ACCESS_ERR)
FAULT_TEST(write_mr_without_remote_write, RKEY_NO_REMOTE_WRITE, IBV_WC_REM_ACCESS_ERR)
FAULT_TEST(write_qp_without_remote_write, QP_NO_REMOTE_WRITE, IBV_WC_REM_INV_REQ_ERR)
FAULT_TEST(write_out_of_bounds, REMOTE_OUT_OF_BOUNDS, IBV_WC_REM_ACCESS_ERR)
FAULT_TEST(read_mr_without_remote_read, READ_NO_REMOTE_READ, IBV_WC_REM_ACCESS_ERR)
FAULT_TEST(read_out_of_bounds, READ_OUT_OF_BOUNDS, IBV_WC_REM_ACCESS_ERR)
FAULT_TEST(write_bad_lkey, BAD_LKEY, IBV_WC_LOC_PROT_ERR)
FAULT_TEST(write_lkey_out_of_bounds, LKEY_OUT_OF_BOUNDS, IBV_WC_LOC_PROT_ERR)
FAULT_TEST(write_lkey_other_pd, LKEY_OTHER_PD, IBV_WC_LOC_PROT_ERR)
FAULT_TEST(read_into_read_only_mr, READ_INTO_READ_ONLY, IBV_WC_LOC_PROT_ERR)

/* SEND with no receive posted and rnr_retry 0: RNR retries exhausted. */
TEST_F(pair, send_without_recv_is_rnr)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE, 0));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey,
			       0, 0, 0, IBV_SEND_SIGNALED, 1));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "send", &wc);
	EXPECT_EQ(IBV_WC_RNR_RETRY_EXC_ERR, wc.status);
	EXPECT_EQ(IBV_QPS_ERR, qp_state(self->a));
	OUTCOME("a=%d b=%d", qp_state(self->a), qp_state(self->b));
}

/*
 * SEND longer than the receive: both ends fail (rxe's statuses: a remote
 * operation error for the sender, a local QP operation error for the
 * receive), nothing beyond the receive buffer written.
 */
TEST_F(pair, send_longer_than_recv)
{
	struct ibv_wc wc[2];

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE, 7));
	ASSERT_EQ(0, post_recv(self->b, self->dst, 100, self->dst_mr->lkey, 77));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 200, self->src_mr->lkey,
			       0, 0, 0, IBV_SEND_SIGNALED, 1));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	for (int i = 0; i < 2; i++) {
		report_wc(_metadata, wc[i].wr_id == 1 ? "send" : "recv", &wc[i]);
		EXPECT_EQ(wc[i].wr_id == 1 ? IBV_WC_REM_OP_ERR : IBV_WC_LOC_QP_OP_ERR,
			  wc[i].status);
	}
	EXPECT_EQ(-1, first_not(self->dst + 100, BUF - 100, CANARY));
	OUTCOME("a=%d b=%d", qp_state(self->a), qp_state(self->b));
}

/* Posting before RTS (send) or in RESET (receive) is refused. */
TEST_F(pair, post_before_ready)
{
	int r;

	r = post_recv(self->a, self->dst, 64, self->dst_mr->lkey, 1);
	OUTCOME("recv_in_reset=%d", r);
	EXPECT_NE(0, r);
	ASSERT_EQ(0, to_init(self->a, IBV_ACCESS_LOCAL_WRITE));
	r = post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey, 0, 0, 0,
		      IBV_SEND_SIGNALED, 1);
	OUTCOME("send_in_init=%d", r);
	EXPECT_NE(0, r);
	EXPECT_EQ(0, post_recv(self->a, self->dst, 64, self->dst_mr->lkey, 2));
}

/* Transitions the verbs state machine forbids are refused with EINVAL. */
TEST_F(pair, illegal_transitions)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RTR };
	int r;

	r = ibv_modify_qp(self->a, &a, IBV_QP_STATE);
	OUTCOME("reset_to_rtr=%d", r);
	EXPECT_EQ(EINVAL, r);
	a.qp_state = IBV_QPS_RTS;
	r = ibv_modify_qp(self->a, &a, IBV_QP_STATE);
	OUTCOME("reset_to_rts=%d", r);
	EXPECT_EQ(EINVAL, r);
	ASSERT_EQ(0, to_init(self->a, IBV_ACCESS_LOCAL_WRITE));
	r = ibv_modify_qp(self->a, &a, IBV_QP_STATE);
	OUTCOME("init_to_rts=%d", r);
	EXPECT_EQ(EINVAL, r);
	a.qp_state = IBV_QPS_RTR;
	r = ibv_modify_qp(self->a, &a, IBV_QP_STATE);
	OUTCOME("init_to_rtr_without_path=%d", r);
	EXPECT_EQ(EINVAL, r);
	EXPECT_EQ(IBV_QPS_INIT, qp_state(self->a));
}

/* RESET → INIT → RTR → RTS → SQD → RTS → ERR → RESET → ... works again. */
TEST_F(pair, full_state_cycle)
{
	struct ibv_qp_attr a = {};
	struct ibv_wc wc;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	EXPECT_EQ(IBV_QPS_RTS, qp_state(self->a));
	a.qp_state = IBV_QPS_SQD;
	EXPECT_EQ(0, ibv_modify_qp(self->a, &a, IBV_QP_STATE));
	EXPECT_EQ(IBV_QPS_SQD, qp_state(self->a));
	/* Back to RTS once drained (rxe refuses it while it drains). */
	for (int i = 0; i < 200; i++) {
		struct ibv_qp_attr q;
		struct ibv_qp_init_attr qi;

		if (ibv_query_qp(self->a, &q, IBV_QP_STATE, &qi) || !q.sq_draining)
			break;
		usleep(10000);
	}
	a.qp_state = IBV_QPS_RTS;
	EXPECT_EQ(0, ibv_modify_qp(self->a, &a, IBV_QP_STATE));
	a.qp_state = IBV_QPS_ERR;
	EXPECT_EQ(0, ibv_modify_qp(self->a, &a, IBV_QP_STATE));
	EXPECT_EQ(IBV_QPS_ERR, qp_state(self->a));
	a.qp_state = IBV_QPS_RESET;
	EXPECT_EQ(0, ibv_modify_qp(self->a, &a, IBV_QP_STATE));
	EXPECT_EQ(IBV_QPS_RESET, qp_state(self->a));
	ASSERT_EQ(0, to_init(self->a, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE));
	ASSERT_EQ(0, to_rtr(self, self->a, self->b->qp_num));
	ASSERT_EQ(0, to_rts(self->a, 7));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 4096, self->src_mr->lkey,
			       (uintptr_t)self->dst, self->dst_mr->rkey, 0, IBV_SEND_SIGNALED, 1));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "send", &wc);
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(0, memcmp(self->src, self->dst, 4096));
}

/* Entering ERR flushes the posted receives. */
TEST_F(pair, error_flushes_receives)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	struct ibv_wc wc[3];

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE, 7));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, post_recv(self->b, self->dst + i * 64, 64, self->dst_mr->lkey, 10 + i));
	ASSERT_EQ(0, ibv_modify_qp(self->b, &a, IBV_QP_STATE));
	ASSERT_EQ(3, poll_n(self->cq, wc, 3));
	for (int i = 0; i < 3; i++) {
		report_wc(_metadata, "recv", &wc[i]);
		EXPECT_EQ(IBV_WC_WR_FLUSH_ERR, wc[i].status);
		EXPECT_EQ(10 + i, wc[i].wr_id);
	}
	EXPECT_EQ(-1, first_not(self->dst, BUF, CANARY));
}

/* An unsignalled request completes silently; the signalled one after it
 * reports, and both copied. */
TEST_F(pair, unsignaled_then_signaled)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 4096, self->src_mr->lkey,
			       (uintptr_t)self->dst, self->dst_mr->rkey, 0, 0, 1));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src + 4096, 4096,
			       self->src_mr->lkey, (uintptr_t)self->dst + 4096,
			       self->dst_mr->rkey, 0, IBV_SEND_SIGNALED, 2));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "send", &wc);
	EXPECT_EQ(2, wc.wr_id);
	EXPECT_EQ(0, memcmp(self->src, self->dst, 8192));
	EXPECT_EQ(0, poll_none(self->cq));
}

/* A deregistered region's lkey fails like any bad key. */
TEST_F(pair, deregistered_lkey)
{
	struct ibv_mr *mr = ibv_reg_mr(self->pd, self->src, 4096, IBV_ACCESS_LOCAL_WRITE);
	uint32_t lkey;
	struct ibv_wc wc;

	ASSERT_NE(NULL, mr);
	lkey = mr->lkey;
	ASSERT_EQ(0, ibv_dereg_mr(mr));
	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 4096, lkey,
			       (uintptr_t)self->dst, self->dst_mr->rkey, 0, IBV_SEND_SIGNALED, 1));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "send", &wc);
	EXPECT_EQ(IBV_WC_LOC_PROT_ERR, wc.status);
	EXPECT_EQ(-1, first_not(self->dst, BUF, CANARY));
}

/* Bad arguments are refused at the call, nothing queued. */
TEST_F(pair, bad_arguments)
{
	struct ibv_sge sge[8] = {};
	struct ibv_send_wr wr = { .sg_list = sge, .num_sge = 8, .opcode = IBV_WR_SEND }, *bad;
	struct ibv_qp_init_attr ia = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1u << 30, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	int r;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE, 7));
	r = ibv_post_send(self->a, &wr, &bad);
	OUTCOME("too_many_sge=%d", r);
	EXPECT_NE(0, r);
	EXPECT_EQ(&wr, bad);
	errno = 0;
	EXPECT_EQ(NULL, ibv_create_qp(self->pd, &ia));
	OUTCOME("huge_qp=%s", errno ? "refused" : "accepted");
	EXPECT_EQ(NULL, ibv_reg_mr(self->pd, NULL, 4096, IBV_ACCESS_LOCAL_WRITE));
	EXPECT_EQ(NULL, ibv_reg_mr(self->pd, self->src, BUF, IBV_ACCESS_REMOTE_WRITE));
	OUTCOME("remote_write_without_local_write=refused");
	EXPECT_EQ(0, poll_none(self->cq));
}

/* Posts @n SGEs of 1000 bytes each, 1 byte apart, as one request. */
static int post_sges(struct ibv_qp *qp, enum ibv_wr_opcode op, unsigned char *base,
		     uint32_t lkey, int n, uint64_t raddr, uint32_t rkey)
{
	struct ibv_sge sge[4];
	struct ibv_send_wr wr = {
		.wr_id = 1, .sg_list = sge, .num_sge = n, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.rdma = { .remote_addr = raddr, .rkey = rkey },
	}, *bad;

	for (int i = 0; i < n; i++)
		sge[i] = (struct ibv_sge){ .addr = (uintptr_t)base + i * 1001,
					   .length = 1000, .lkey = lkey };
	return ibv_post_send(qp, &wr, &bad);
}

/* A gather list of 3 pieces lands contiguously (RDMA WRITE). */
TEST_F(pair, write_gathers_3_sges)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	ASSERT_EQ(0, post_sges(self->a, IBV_WR_RDMA_WRITE, self->src + 5, self->src_mr->lkey,
			       3, (uintptr_t)self->dst + 7, self->dst_mr->rkey));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "send", &wc);
	EXPECT_EQ(3000, wc.byte_len);
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(0, memcmp(self->src + 5 + i * 1001, self->dst + 7 + i * 1000, 1000));
	EXPECT_EQ(-1, first_not(self->dst + 3007, 64, CANARY));
	OUTCOME("memory=%s", memcmp(self->src + 5, self->dst + 7, 1000) ? "differs" : "copied");
}

/* An RDMA READ scatters into 3 pieces. */
TEST_F(pair, read_scatters_3_sges)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 7));
	ASSERT_EQ(0, post_sges(self->a, IBV_WR_RDMA_READ, self->dst + 5, self->dst_mr->lkey,
			       3, (uintptr_t)self->src + 7, self->src_mr->rkey));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "send", &wc);
	EXPECT_EQ(3000, wc.byte_len);
	for (int i = 0; i < 3; i++)
		EXPECT_EQ(0, memcmp(self->src + 7 + i * 1000, self->dst + 5 + i * 1001, 1000));
	EXPECT_EQ(CANARY, self->dst[5 + 1000]);
}

/* A SEND gathers 3 pieces into a receive of 2. */
TEST_F(pair, send_gathers_into_2_recv_sges)
{
	struct ibv_sge rs[2] = {
		{ .addr = (uintptr_t)self->dst, .length = 1500, .lkey = self->dst_mr->lkey },
		{ .addr = (uintptr_t)self->dst + 4096, .length = 1500, .lkey = self->dst_mr->lkey },
	};
	struct ibv_recv_wr rwr = { .wr_id = 77, .sg_list = rs, .num_sge = 2 }, *rbad;
	struct ibv_wc wc[2];

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE, 7));
	ASSERT_EQ(0, ibv_post_recv(self->b, &rwr, &rbad));
	ASSERT_EQ(0, post_sges(self->a, IBV_WR_SEND, self->src, self->src_mr->lkey, 3, 0, 0));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	for (int i = 0; i < 2; i++) {
		report_wc(_metadata, wc[i].wr_id == 1 ? "send" : "recv", &wc[i]);
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
		EXPECT_EQ(3000, wc[i].byte_len);
	}
	EXPECT_EQ(0, memcmp(self->src, self->dst, 1000));
	EXPECT_EQ(0, memcmp(self->src + 1001, self->dst + 1000, 500));
	EXPECT_EQ(0, memcmp(self->src + 1501, self->dst + 4096, 500));
	EXPECT_EQ(0, memcmp(self->src + 2002, self->dst + 4596, 1000));
	EXPECT_EQ(CANARY, self->dst[4096 + 1500]);
}

/* A zero-length SEND consumes a receive and reports 0 bytes. */
TEST_F(pair, send_0B)
{
	struct ibv_sge sge = { .addr = (uintptr_t)self->src, .length = 0,
			       .lkey = self->src_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 0,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;
	struct ibv_wc wc[2];

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE, 7));
	ASSERT_EQ(0, post_recv(self->b, self->dst, 64, self->dst_mr->lkey, 77));
	ASSERT_EQ(0, ibv_post_send(self->a, &wr, &bad));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	for (int i = 0; i < 2; i++) {
		report_wc(_metadata, wc[i].wr_id == 1 ? "send" : "recv", &wc[i]);
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
		EXPECT_EQ(0, wc[i].byte_len);
	}
	EXPECT_EQ(-1, first_not(self->dst, 64, CANARY));
}

/*
 * Zero-length RDMA WRITE and READ name no remote memory: they complete
 * without an R_Key check (a key of 0 here), move nothing, and leave both
 * QPs ready for the next request.
 */
TEST_F(pair, write_and_read_0B)
{
	struct ibv_send_wr wr = { .wr_id = 1, .num_sge = 0, .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = (uintptr_t)self->dst, .rkey = 0 } }, *bad;
	struct ibv_wc wc;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ, 7));
	ASSERT_EQ(0, ibv_post_send(self->a, &wr, &bad));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "write_0B", &wc);
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_READ;
	ASSERT_EQ(0, ibv_post_send(self->a, &wr, &bad));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "read_0B", &wc);
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(-1, first_not(self->dst, BUF, CANARY));
	OUTCOME("states a=%d b=%d", qp_state(self->a), qp_state(self->b));
	EXPECT_EQ(IBV_QPS_RTS, qp_state(self->a));
	EXPECT_EQ(IBV_QPS_RTS, qp_state(self->b));
	/* And a real write still goes through. */
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 64, self->src_mr->lkey,
			       (uintptr_t)self->dst, self->dst_mr->rkey, 0, IBV_SEND_SIGNALED, 3));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "write_64B_after", &wc);
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(0, memcmp(self->src, self->dst, 64));
}

/*
 * The access flags applications register with: remote atomics (UCX and
 * MPI register every region with them), relaxed ordering and any other
 * bit of the optional range (hints a device may ignore) are accepted;
 * remote atomics without local write are refused, as verbs requires.
 */
TEST_F(pair, reg_mr_access_flags)
{
	static const struct {
		const char *name;
		int access;
		int ok;
	} cases[] = {
		{ "remote_atomic", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC, 1 },
		{ "ucx_default", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				 IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC, 1 },
		{ "relaxed_ordering", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_RELAXED_ORDERING, 1 },
		{ "optional_bit_29", IBV_ACCESS_LOCAL_WRITE | (1 << 29), 1 },
		{ "remote_atomic_without_local_write", IBV_ACCESS_REMOTE_ATOMIC, 0 },
		{ "mw_bind", IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			     IBV_ACCESS_MW_BIND, 1 },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct ibv_mr *mr;

		errno = 0;
		mr = ibv_reg_mr(self->pd, self->src, PAGE, cases[i].access);
		OUTCOME("%s=%s", cases[i].name, mr ? "accepted" : "refused");
		EXPECT_EQ(cases[i].ok, mr != NULL)
			TH_LOG("%s: %s", cases[i].name, strerror(errno));
		if (mr)
			EXPECT_EQ(0, ibv_dereg_mr(mr));
	}
}

/* A UD QP of the fixture's PD and CQ, brought to RTS with Q_Key @qkey. */
static struct ibv_qp *ud_qp(FIXTURE_DATA(pair) *self, uint32_t qkey)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = IBV_QPT_UD,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .pkey_index = 0,
				 .port_num = 1, .qkey = qkey };
	struct ibv_qp *qp = ibv_create_qp(self->pd, &ia);

	if (!qp)
		return NULL;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_QKEY))
		goto err;
	a.qp_state = IBV_QPS_RTR;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE))
		goto err;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
		goto err;
	return qp;
err:
	ibv_destroy_qp(qp);
	return NULL;
}

static int post_ud(struct ibv_qp *qp, struct ibv_ah *ah, uint32_t qpn, uint32_t qkey,
		   void *buf, uint32_t len, uint32_t lkey, uint32_t imm, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)buf, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1,
		.opcode = imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
		.send_flags = IBV_SEND_SIGNALED, .imm_data = htonl(imm),
		.wr.ud = { .ah = ah, .remote_qpn = qpn, .remote_qkey = qkey },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

/*
 * User UD QPs: a datagram lands behind the 40 bytes of its network header,
 * with its source QP and immediate data; one with the wrong Q_Key and one
 * longer than the port's MTU complete on the sender and reach no receive
 * (IBA C10-93.1.1: no packet, no error).
 */
TEST_F(pair, ud_send_recv)
{
	const uint32_t qkey = 0x11111111;
	struct ibv_ah_attr aa = self_av(self);
	struct ibv_qp *u1, *u2;
	struct ibv_ah *ah;
	struct ibv_wc wc[2];
	int sends = 0, recvs = 0;

	if (self->port.link_layer != IBV_LINK_LAYER_ETHERNET)
		SKIP(return, "RoCE port needed for a GID address handle");
	u1 = ud_qp(self, qkey);
	u2 = ud_qp(self, qkey);
	ASSERT_NE(NULL, u1) TH_LOG("UD QP: %s", strerror(errno));
	ASSERT_NE(NULL, u2);
	ah = ibv_create_ah(self->pd, &aa);
	ASSERT_NE(NULL, ah) TH_LOG("create_ah: %s", strerror(errno));
	ASSERT_EQ(0, post_recv(u2, self->dst, 40 + 4096, self->dst_mr->lkey, 7));
	/* Wrong Q_Key, then too long, then the one that lands. */
	ASSERT_EQ(0, post_ud(u1, ah, u2->qp_num, qkey + 1, self->src, 100,
			     self->src_mr->lkey, 0, 1));
	ASSERT_EQ(0, post_ud(u1, ah, u2->qp_num, qkey, self->src, 4 * 4096,
			     self->src_mr->lkey, 0, 2));
	ASSERT_EQ(0, post_ud(u1, ah, u2->qp_num, qkey, self->src + 1, 100,
			     self->src_mr->lkey, 0xabcd, 3));
	/* Completions in any order: the sends' and the receive's CQ is one. */
	while (sends < 3 || recvs < 1) {
		ASSERT_EQ(1, poll_n(self->cq, wc, 1));
		EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status)
			TH_LOG("wr %llu: %s", (unsigned long long)wc[0].wr_id,
			       ibv_wc_status_str(wc[0].status));
		if (wc[0].opcode == IBV_WC_RECV) {
			recvs++;
			wc[1] = wc[0];
		} else {
			sends++;
		}
	}
	OUTCOME("recv wr=%llu status=%s len=%u src_is_sender=%d grh=%d imm=%x",
		(unsigned long long)wc[1].wr_id, ibv_wc_status_str(wc[1].status),
		wc[1].byte_len, wc[1].src_qp == u1->qp_num, !!(wc[1].wc_flags & IBV_WC_GRH),
		wc[1].wc_flags & IBV_WC_WITH_IMM ? ntohl(wc[1].imm_data) : 0);
	EXPECT_EQ(7, wc[1].wr_id);
	EXPECT_EQ(40 + 100, wc[1].byte_len);
	EXPECT_EQ(u1->qp_num, wc[1].src_qp);
	EXPECT_TRUE(wc[1].wc_flags & IBV_WC_GRH);
	EXPECT_TRUE(wc[1].wc_flags & IBV_WC_WITH_IMM);
	EXPECT_EQ(0xabcd, ntohl(wc[1].imm_data));
	EXPECT_EQ(0, memcmp(self->dst + 40, self->src + 1, 100));
	EXPECT_EQ(-1, first_not(self->dst + 140, BUF - 140, CANARY));
	/* Nothing else arrived. */
	EXPECT_EQ(0, ibv_poll_cq(self->cq, 1, wc));
	EXPECT_EQ(0, ibv_destroy_ah(ah));
	EXPECT_EQ(0, ibv_destroy_qp(u1));
	EXPECT_EQ(0, ibv_destroy_qp(u2));
}

/*
 * Every right verbs defines for a QP is taken at INIT, those of
 * operations a device may not carry (windows, FLUSH) included:
 * applications (rdma-core's own tests among them) set them all.
 */
TEST_F(pair, qp_access_flags_every_right)
{
	int all = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
		  IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_FLUSH_GLOBAL |
		  IBV_ACCESS_FLUSH_PERSISTENT;
	int r = to_init(self->a, all);

	OUTCOME("init=%s", r ? strerror(r) : "ok");
	EXPECT_EQ(0, r);
}

/*
 * A CQ that overflows raises IB_EVENT_CQ_ERR, an async event of the
 * context: its consumer learns that completions were lost instead of
 * waiting for them.  The writes go to a CQ of its own, never polled.
 */
TEST_F(pair, cq_overflow_raises_cq_err)
{
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct pollfd pfd = { .events = POLLIN };
	struct ibv_async_event ev;
	struct ibv_cq *small;
	struct ibv_qp *old_a = self->a;
	int posted = 0, refused = 0, cq_err = 0;

	small = ibv_create_cq(self->ctx, 1, NULL, NULL, 0);
	ASSERT_NE(NULL, small);
	ia.send_cq = small;
	ia.recv_cq = self->cq;
	self->a = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, self->a);
	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	ASSERT_EQ(0, fcntl(self->ctx->async_fd, F_SETFL,
			   fcntl(self->ctx->async_fd, F_GETFL) | O_NONBLOCK));
	/* Twice the CQ's size in signalled writes, a send queue at a time. */
	while (posted < 2 * small->cqe + 2) {
		if (post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 64, self->src_mr->lkey,
			      (uintptr_t)self->dst, self->dst_mr->rkey, 0, IBV_SEND_SIGNALED,
			      posted)) {
			/* The send queue is full: let the writes complete. */
			if (++refused > 500)
				break;
			usleep(10000);
		} else {
			posted++;
		}
	}
	pfd.fd = self->ctx->async_fd;
	while (poll(&pfd, 1, 5000) == 1 && !ibv_get_async_event(self->ctx, &ev)) {
		if (ev.event_type == IBV_EVENT_CQ_ERR && ev.element.cq == small)
			cq_err = 1;
		ibv_ack_async_event(&ev);
		if (cq_err)
			break;
	}
	OUTCOME("cq_err=%s", cq_err ? "raised" : "none");
	EXPECT_TRUE(cq_err) TH_LOG("%d writes on a CQ of %d entries raised no CQ error",
				   posted, small->cqe);
	ibv_destroy_qp(self->a);
	self->a = old_a;
	ibv_destroy_cq(small);
}

/*
 * Inline data: QPs created with max_inline_data get at least that much,
 * and a SEND or RDMA WRITE posted with IBV_SEND_INLINE carries bytes from
 * an unregistered buffer (no key at all), which the poster may reuse as
 * soon as the post returns.
 */
TEST_F(pair, inline_send_and_write)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1,
			 .max_recv_sge = 1, .max_inline_data = 64 },
	};
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	unsigned char msg[64];
	struct ibv_sge sge = { .addr = (uintptr_t)msg, .length = sizeof(msg), .lkey = 0 };
	struct ibv_send_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | IBV_SEND_INLINE }, *bad;
	struct ibv_wc wc[2];

	ibv_destroy_qp(self->a);
	ibv_destroy_qp(self->b);
	self->a = ibv_create_qp(self->pd, &ia);
	self->b = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, self->a) TH_LOG("create_qp with inline data: %s", strerror(errno));
	ASSERT_NE(NULL, self->b);
	EXPECT_LE(64, ia.cap.max_inline_data);
	ASSERT_EQ(0, ibv_query_qp(self->a, &qa, IBV_QP_CAP, &qia));
	OUTCOME("granted_at_least_64=%d", qa.cap.max_inline_data >= 64);
	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));

	ASSERT_EQ(0, post_recv(self->b, self->dst, 64, self->dst_mr->lkey, 2));
	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (unsigned char)(i + 101);
	ASSERT_EQ(0, ibv_post_send(self->a, &wr, &bad));
	memset(msg, 0, sizeof(msg));	/* the post took the bytes */
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	for (int i = 0; i < 2; i++) {
		report_wc(_metadata, wc[i].wr_id == 1 ? "inline_send" : "recv", &wc[i]);
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
	}
	for (size_t i = 0; i < sizeof(msg); i++) {
		ASSERT_EQ((unsigned char)(i + 101), self->dst[i]) TH_LOG("send byte %zu", i);
	}

	for (size_t i = 0; i < sizeof(msg); i++)
		msg[i] = (unsigned char)(i + 7);
	wr.wr_id = 3;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.wr.rdma.remote_addr = (uintptr_t)self->dst + 4096;
	wr.wr.rdma.rkey = self->dst_mr->rkey;
	ASSERT_EQ(0, ibv_post_send(self->a, &wr, &bad));
	memset(msg, 0, sizeof(msg));
	ASSERT_EQ(1, poll_n(self->cq, wc, 1));
	report_wc(_metadata, "inline_write", &wc[0]);
	EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
	for (size_t i = 0; i < sizeof(msg); i++) {
		ASSERT_EQ((unsigned char)(i + 7), self->dst[4096 + i]) TH_LOG("write byte %zu", i);
	}
	EXPECT_EQ(-1, first_not(self->dst + 64, 4096 - 64, CANARY));
	EXPECT_EQ(-1, first_not(self->dst + 4096 + 64, BUF - 4096 - 64, CANARY));
}

static int post_atomic(struct ibv_qp *qp, enum ibv_wr_opcode op, void *laddr,
		       uint32_t len, uint32_t lkey, uint64_t raddr, uint32_t rkey,
		       uint64_t compare_add, uint64_t swap, uint64_t wr_id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)laddr, .length = len, .lkey = lkey };
	struct ibv_send_wr wr = {
		.wr_id = wr_id, .sg_list = &sge, .num_sge = 1, .opcode = op,
		.send_flags = IBV_SEND_SIGNALED,
		.wr.atomic = { .remote_addr = raddr, .rkey = rkey,
			       .compare_add = compare_add, .swap = swap },
	}, *bad;

	return ibv_post_send(qp, &wr, &bad);
}

#define ATOMIC_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | \
		       IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
/* The atomic cases' target (in dst) and where the original value lands. */
#define ATOMIC_TARGET ((uint64_t *)(self->dst + 64))
#define ATOMIC_RESULT ((uint64_t *)(self->src + 128))

/* Skips a case on a device that reports no atomics. */
#define SKIP_WITHOUT_ATOMICS()							\
	do {									\
		struct ibv_device_attr da_;					\
										\
		ASSERT_EQ(0, ibv_query_device(self->ctx, &da_));		\
		if (da_.atomic_cap == IBV_ATOMIC_NONE)				\
			SKIP(return, "the device reports no atomics");		\
	} while (0)

/*
 * COMPARE SWAP that matches, one that does not, and FETCH ADD with a carry
 * across the 32-bit halves: the target changes as verbs says, and the
 * original value comes back into the local list each time (8 bytes, in
 * host order).
 */
TEST_F(pair, atomics_cmp_swap_and_fetch_add)
{
	struct ibv_mr *tmr;
	uint64_t *tgt = ATOMIC_TARGET, *res = ATOMIC_RESULT;
	struct ibv_wc wc;

	SKIP_WITHOUT_ATOMICS();
	/* A region for atomics only: its rkey must still be one. */
	tmr = ibv_reg_mr(self->pd, self->dst, BUF,
			 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC);
	ASSERT_NE(NULL, tmr);
	ASSERT_EQ(0, connect_pair(self, ATOMIC_ACCESS, 7));
	*tgt = 5;
	*res = 0;
	ASSERT_EQ(0, post_atomic(self->a, IBV_WR_ATOMIC_CMP_AND_SWP, res, 8,
				 self->src_mr->lkey, (uintptr_t)tgt, tmr->rkey, 5, 9, 1));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "cmp_swap_match", &wc);
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(IBV_WC_COMP_SWAP, wc.opcode);
	EXPECT_EQ(5, *res);
	EXPECT_EQ(9, *tgt);
	ASSERT_EQ(0, post_atomic(self->a, IBV_WR_ATOMIC_CMP_AND_SWP, res, 8,
				 self->src_mr->lkey, (uintptr_t)tgt, tmr->rkey, 5, 11, 2));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "cmp_swap_mismatch", &wc);
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(9, *res);
	EXPECT_EQ(9, *tgt);
	*tgt = 0xffffffffULL;
	ASSERT_EQ(0, post_atomic(self->a, IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8,
				 self->src_mr->lkey, (uintptr_t)tgt, tmr->rkey, 3, 0, 3));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "fetch_add", &wc);
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(IBV_WC_FETCH_ADD, wc.opcode);
	EXPECT_EQ(0xffffffffULL, *res);
	EXPECT_EQ(0x100000002ULL, *tgt);
	OUTCOME("values res=%#llx tgt=%#llx", (unsigned long long)*res,
		(unsigned long long)*tgt);
	/* Only the target's eight bytes changed. */
	EXPECT_EQ(-1, first_not(self->dst, 64, CANARY));
	EXPECT_EQ(-1, first_not(self->dst + 72, BUF - 72, CANARY));
	EXPECT_EQ(0, ibv_dereg_mr(tmr));
}

/*
 * What a requester refuses at post (a misaligned target, fewer than 8
 * bytes of local list: EINVAL, as rxe), and what the responder refuses:
 * a region without remote atomic rights (remote access error) and, on a
 * second pair, a QP that grants none (invalid request). The target is
 * left as it was.
 */
TEST_F(pair, atomic_refusals)
{
	uint64_t *tgt = ATOMIC_TARGET, *res = ATOMIC_RESULT;
	struct ibv_wc wc;

	SKIP_WITHOUT_ATOMICS();
	ASSERT_EQ(0, connect_pair(self, ATOMIC_ACCESS, 7));
	*tgt = 7;
	EXPECT_EQ(EINVAL, post_atomic(self->a, IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8,
				      self->src_mr->lkey, (uintptr_t)tgt + 4,
				      self->dst_mr->rkey, 1, 0, 1));
	EXPECT_EQ(EINVAL, post_atomic(self->a, IBV_WR_ATOMIC_FETCH_AND_ADD, res, 4,
				      self->src_mr->lkey, (uintptr_t)tgt,
				      self->dst_mr->rkey, 1, 0, 2));
	/* dst_mr grants remote write and read, not atomics. */
	ASSERT_EQ(0, post_atomic(self->a, IBV_WR_ATOMIC_FETCH_AND_ADD, res, 8,
				 self->src_mr->lkey, (uintptr_t)tgt, self->dst_mr->rkey,
				 1, 0, 3));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "region_without_atomics", &wc);
	EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wc.status);
	EXPECT_EQ(7, *tgt);
}

TEST_F(pair, atomic_to_qp_without_atomic_access)
{
	struct ibv_mr *tmr;
	uint64_t *tgt = ATOMIC_TARGET, *res = ATOMIC_RESULT;
	struct ibv_wc wc;

	SKIP_WITHOUT_ATOMICS();
	tmr = ibv_reg_mr(self->pd, self->dst, BUF, ATOMIC_ACCESS);
	ASSERT_NE(NULL, tmr);
	/* b grants remote write and read only. */
	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ, 7));
	*tgt = 7;
	ASSERT_EQ(0, post_atomic(self->a, IBV_WR_ATOMIC_CMP_AND_SWP, res, 8,
				 self->src_mr->lkey, (uintptr_t)tgt, tmr->rkey, 7, 8, 1));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "qp_without_atomics", &wc);
	EXPECT_EQ(IBV_WC_REM_INV_REQ_ERR, wc.status);
	EXPECT_EQ(7, *tgt);
	EXPECT_EQ(0, ibv_dereg_mr(tmr));
}

/*
 * Memory keys: 300 registrations of one page in turn, each deregistered
 * before the next, never get key 0 (the local DMA key) nor the key just
 * freed; 100 registrations held at once (of distinct pages: one mapping
 * each) get 100 distinct keys.
 */
TEST_F(pair, mr_keys_distinct_and_not_reused)
{
	enum { TURNS = 300, HELD = 100 };
	struct ibv_mr *mr[HELD];
	uint32_t last = 0;
	int zero = 0, reused = 0, dup = 0;

	for (int i = 0; i < TURNS; i++) {
		struct ibv_mr *m = ibv_reg_mr(self->pd, self->src, PAGE,
					      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

		ASSERT_NE(NULL, m) TH_LOG("registration %d: %s", i, strerror(errno));
		zero += !m->lkey || !m->rkey;
		reused += i && m->lkey == last;
		last = m->lkey;
		ASSERT_EQ(0, ibv_dereg_mr(m));
	}
	for (int i = 0; i < HELD; i++) {
		mr[i] = ibv_reg_mr(self->pd, self->src + i * PAGE, PAGE, IBV_ACCESS_LOCAL_WRITE);
		ASSERT_NE(NULL, mr[i]) TH_LOG("registration %d: %s", i, strerror(errno));
		for (int j = 0; j < i; j++)
			dup += mr[j]->lkey == mr[i]->lkey;
	}
	OUTCOME("zero_keys=%d freed_key_reused=%d duplicate_keys=%d", zero, reused, dup);
	EXPECT_EQ(0, zero);
	EXPECT_EQ(0, reused);
	EXPECT_EQ(0, dup);
	for (int i = 0; i < HELD; i++)
		EXPECT_EQ(0, ibv_dereg_mr(mr[i]));
}

/*
 * An RC QP talks only to the QP connected back to it.  c names b as its
 * destination while b is connected to a: c's SEND fails (no answer, as
 * from a peer that drops the packets) and b's posted receive stays for
 * a.  A QP naming QP1 fails the same way, and QP1 is not disturbed.
 */
TEST_F(pair, rc_peer_must_be_connected_back)
{
	struct ibv_qp *c = make_qp(self, self->pd);
	struct ibv_wc wc[2];
	int full = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, connect_pair(self, full, 7));
	ASSERT_EQ(0, to_init(c, full));
	ASSERT_EQ(0, to_rtr(self, c, self->b->qp_num));
	ASSERT_EQ(0, to_rts(c, 7));
	ASSERT_EQ(0, post_recv(self->b, self->dst, 64, self->dst_mr->lkey, 20));
	ASSERT_EQ(0, post_rdma(c, IBV_WR_SEND, self->src, 64, self->src_mr->lkey, 0, 0, 0,
			       IBV_SEND_SIGNALED, 21));
	ASSERT_EQ(1, poll_n(self->cq, wc, 1));
	report_wc(_metadata, "send_from_stranger", &wc[0]);
	EXPECT_EQ(21, wc[0].wr_id);
	EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, wc[0].status);
	EXPECT_EQ(-1, first_not(self->dst, 64, CANARY));
	EXPECT_EQ(IBV_QPS_RTS, qp_state(self->b));
	/* The receive is still a's to fill. */
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey, 0, 0, 0,
			       IBV_SEND_SIGNALED, 22));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status) TH_LOG("wr %llu", (unsigned long long)wc[i].wr_id);
	}
	EXPECT_EQ(0, memcmp(self->src, self->dst, 64));
	ibv_destroy_qp(c);

	/* QP1 is the MAD layer's, never an RC peer. */
	c = make_qp(self, self->pd);
	ASSERT_NE(NULL, c);
	ASSERT_EQ(0, to_init(c, full));
	ASSERT_EQ(0, to_rtr(self, c, 1));
	ASSERT_EQ(0, to_rts(c, 7));
	ASSERT_EQ(0, post_rdma(c, IBV_WR_RDMA_WRITE, self->src, 64, self->src_mr->lkey,
			       (uintptr_t)self->dst, 0xbad, 0, IBV_SEND_SIGNALED, 23));
	ASSERT_EQ(1, poll_n(self->cq, wc, 1));
	report_wc(_metadata, "write_to_qp1", &wc[0]);
	EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, wc[0].status);
	ibv_destroy_qp(c);
}

/* Sixteen writes in flight complete in order, every one copied. */
TEST_F(pair, sixteen_writes_in_order)
{
	struct ibv_wc wc[DEPTH];

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	for (int i = 0; i < DEPTH; i++)
		ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src + i * 65536, 65536,
				       self->src_mr->lkey, (uintptr_t)self->dst + i * 65536,
				       self->dst_mr->rkey, 0, IBV_SEND_SIGNALED, 100 + i));
	ASSERT_EQ(DEPTH, poll_n(self->cq, wc, DEPTH));
	for (int i = 0; i < DEPTH; i++) {
		EXPECT_EQ(100 + i, wc[i].wr_id);
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
	}
	OUTCOME("order=%s", wc[0].wr_id == 100 && wc[DEPTH - 1].wr_id == 100 + DEPTH - 1 ?
		"kept" : "changed");
	EXPECT_EQ(0, memcmp(self->src, self->dst, DEPTH * 65536));
}

/*
 * A WRITE, a READ of the bytes it wrote and a WRITE over them, posted in
 * one list (on plx_rdma, one burst of the engine): the READ sees the
 * first WRITE's bytes and not the second's.
 */
TEST_F(pair, write_read_write_in_order)
{
	const uint32_t len = 65536;
	unsigned char *back = self->src + 2 * len;
	uint64_t at = (uintptr_t)self->dst;
	struct ibv_sge sge[3] = {
		{ .addr = (uintptr_t)self->src, .length = len, .lkey = self->src_mr->lkey },
		{ .addr = (uintptr_t)back, .length = len, .lkey = self->src_mr->lkey },
		{ .addr = (uintptr_t)self->src + 1, .length = len, .lkey = self->src_mr->lkey },
	};
	struct ibv_send_wr wr[3], *bad;
	struct ibv_wc wc;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ, 7));
	memset(back, CANARY, len);
	for (int i = 0; i < 3; i++) {
		wr[i] = (struct ibv_send_wr){
			.wr_id = 300 + i, .sg_list = &sge[i], .num_sge = 1,
			.opcode = i == 1 ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE,
			.send_flags = i == 2 ? IBV_SEND_SIGNALED : 0,
			.wr.rdma = { .remote_addr = at, .rkey = self->dst_mr->rkey },
			.next = i < 2 ? &wr[i + 1] : NULL,
		};
	}
	ASSERT_EQ(0, ibv_post_send(self->a, wr, &bad));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	EXPECT_EQ(302, wc.wr_id);
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	OUTCOME("read=%s written=%s", memcmp(back, self->src, len) ? "differs" : "first",
		memcmp(self->dst, self->src + 1, len) ? "differs" : "last");
	EXPECT_EQ(0, memcmp(back, self->src, len));
	EXPECT_EQ(0, memcmp(self->dst, self->src + 1, len));
}

/* What query_qp reports after connecting. */
TEST_F(pair, query_after_connect)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, 7));
	ASSERT_EQ(0, ibv_query_qp(self->b, &a, IBV_QP_STATE | IBV_QP_DEST_QPN |
				  IBV_QP_ACCESS_FLAGS | IBV_QP_CAP | IBV_QP_RNR_RETRY, &ia));
	EXPECT_EQ(IBV_QPS_RTS, a.qp_state);
	EXPECT_EQ(self->a->qp_num, a.dest_qp_num);
	EXPECT_EQ(IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ, a.qp_access_flags);
	EXPECT_LE(DEPTH, a.cap.max_send_wr);
	EXPECT_EQ(IBV_QPT_RC, ia.qp_type);
	OUTCOME("state=%d access=%#x rnr_retry=%d", a.qp_state, a.qp_access_flags, a.rnr_retry);
}

/*
 * Deregistering the target while a 16 MiB WRITE into it runs: the
 * deregistration succeeds (waiting for the request if it must) and the
 * WRITE ends either copied or with a remote access error, never half
 * reported.
 */
TEST_F(pair, dereg_target_while_writing)
{
	struct ibv_wc wc;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 16 << 20,
			       self->src_mr->lkey, (uintptr_t)self->dst, self->dst_mr->rkey, 0,
			       IBV_SEND_SIGNALED, 1));
	EXPECT_EQ(0, ibv_dereg_mr(self->dst_mr));
	self->dst_mr = NULL;
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	EXPECT_TRUE(wc.status == IBV_WC_SUCCESS || wc.status == IBV_WC_REM_ACCESS_ERR)
		TH_LOG("%s", ibv_wc_status_str(wc.status));
	if (wc.status == IBV_WC_SUCCESS)
		EXPECT_EQ(0, memcmp(self->src, self->dst, 16 << 20));
}

/*
 * Destroying a QP whose SEND waits for good for a receive (rnr_retry 7,
 * none posted) returns: the waiting request is dropped with the QP.
 */
TEST_F(pair, destroy_qp_while_send_waits_for_receive)
{
	struct timespec t0, t;
	int ret;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE, 7));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey,
			       0, 0, 0, IBV_SEND_SIGNALED, 1));
	/* Long enough for the request to be retrying. */
	usleep(200000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = ibv_destroy_qp(self->a);
	clock_gettime(CLOCK_MONOTONIC, &t);
	self->a = NULL;
	EXPECT_EQ(0, ret);
	EXPECT_GT(10, t.tv_sec - t0.tv_sec) TH_LOG("destroy took %ld s", (long)(t.tv_sec - t0.tv_sec));
	OUTCOME("destroy=%d", ret);
}

/*
 * Deregistering the source of a SEND that waits for the peer's receive
 * (rnr_retry 7: for good) returns at once, instead of waiting for the
 * receive; the SEND still ends once the receive is posted.
 */
TEST_F(pair, dereg_source_while_send_waits_for_receive)
{
	struct timespec t0, t;
	struct ibv_wc wc[2];
	int ret, got;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE, 7));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey,
			       0, 0, 0, IBV_SEND_SIGNALED, 1));
	/* Long enough for the request to be retrying. */
	usleep(200000);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	ret = ibv_dereg_mr(self->src_mr);
	clock_gettime(CLOCK_MONOTONIC, &t);
	self->src_mr = NULL;
	EXPECT_EQ(0, ret);
	EXPECT_GT(5, t.tv_sec - t0.tv_sec) TH_LOG("dereg took %ld s", (long)(t.tv_sec - t0.tv_sec));
	OUTCOME("dereg=%d", ret);
	ASSERT_EQ(0, post_recv(self->b, self->dst, 64, self->dst_mr->lkey, 2));
	got = poll_n(self->cq, wc, 1);
	EXPECT_EQ(1, got) TH_LOG("the SEND never ended");
}

/*
 * Moving the requester to SQD while its SEND waits for the peer's receive
 * drains it: the SEND completes once the receive is there, the QP stays
 * in SQD, and back in RTS it sends again.
 */
TEST_F(pair, sqd_while_send_waits_for_receive)
{
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_SQD };
	struct ibv_wc wc[2];

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE, 7));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey,
			       0, 0, 0, IBV_SEND_SIGNALED, 1));
	usleep(200000);
	ASSERT_EQ(0, ibv_modify_qp(self->a, &qa, IBV_QP_STATE));
	ASSERT_EQ(0, post_recv(self->b, self->dst, 64, self->dst_mr->lkey, 2));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	for (int i = 0; i < 2; i++) {
		report_wc(_metadata, wc[i].wr_id == 1 ? "send" : "recv", &wc[i]);
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
	}
	OUTCOME("state_after_drain=%d", qp_state(self->a));
	qa.qp_state = IBV_QPS_RTS;
	ASSERT_EQ(0, ibv_modify_qp(self->a, &qa, IBV_QP_STATE));
	ASSERT_EQ(0, post_recv(self->b, self->dst + 64, 64, self->dst_mr->lkey, 4));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey,
			       0, 0, 0, IBV_SEND_SIGNALED, 3));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	for (int i = 0; i < 2; i++)
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
	EXPECT_EQ(0, memcmp(self->src, self->dst + 64, 64));
}

/* Destroying a QP with requests queued and running returns at once and
 * leaves the device usable. */
TEST_F(pair, destroy_qp_with_requests_queued)
{
	struct ibv_wc wc[DEPTH];

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	for (int i = 0; i < 8; i++)
		ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 1 << 20,
				       self->src_mr->lkey, (uintptr_t)self->dst + i * (1 << 20),
				       self->dst_mr->rkey, 0, IBV_SEND_SIGNALED, i));
	EXPECT_EQ(0, ibv_destroy_qp(self->a));
	self->a = make_qp(self, self->pd);
	ASSERT_NE(NULL, self->a);
	/* Whatever completed before the destroy is there to poll. */
	while (ibv_poll_cq(self->cq, DEPTH, wc) > 0)
		;
	/*
	 * And nothing after it: the destroy waits for the request that was
	 * running to end (a 1 MiB copy takes well under this).
	 */
	usleep(100000);
	EXPECT_EQ(0, ibv_poll_cq(self->cq, DEPTH, wc)) TH_LOG("a completion arrived after the destroy");
	ASSERT_EQ(0, to_init(self->a, IBV_ACCESS_LOCAL_WRITE));
}

/*
 * The extended verbs: QPs made with ibv_create_qp_ex() and driven by the
 * work request API (ibv_wr_*), CQs made with ibv_create_cq_ex() and read
 * with ibv_start_poll(), and what a provider must refuse cleanly.
 */
#define QPX_OPS (IBV_QP_EX_WITH_SEND | IBV_QP_EX_WITH_SEND_WITH_IMM | \
		 IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM | \
		 IBV_QP_EX_WITH_RDMA_READ)

static struct ibv_qp *make_qp_ex(FIXTURE_DATA(pair) *self, enum ibv_qp_type type,
				 uint64_t ops, uint32_t max_inline)
{
	struct ibv_qp_init_attr_ex ia = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = type,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 4,
			 .max_recv_sge = 4, .max_inline_data = max_inline },
		.comp_mask = IBV_QP_INIT_ATTR_PD | IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
		.pd = self->pd, .send_ops_flags = ops,
	};

	return ibv_create_qp_ex(self->ctx, &ia);
}

/* Replaces the fixture's QPs by extended RC ones and connects them. */
static void use_qp_ex(struct __test_metadata *_metadata, FIXTURE_DATA(pair) *self)
{
	ibv_destroy_qp(self->a);
	ibv_destroy_qp(self->b);
	self->a = make_qp_ex(self, IBV_QPT_RC, QPX_OPS, 64);
	self->b = make_qp_ex(self, IBV_QPT_RC, QPX_OPS, 64);
	ASSERT_NE(NULL, self->a) TH_LOG("ibv_create_qp_ex: %s", strerror(errno));
	ASSERT_NE(NULL, self->b);
	ASSERT_NE(NULL, ibv_qp_to_qp_ex(self->a));
	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				  IBV_ACCESS_REMOTE_READ, 7));
}

/*
 * One request of each kind through the work request API, one critical
 * region each: its completions and its bytes, as with ibv_post_send().
 * READ reads b's src into a's dst; the others go from a's src to b's dst.
 * @inl sends the bytes inline (from a stack buffer wiped at once).
 */
static void wr_transfer(struct __test_metadata *_metadata, FIXTURE_DATA(pair) *self,
			enum ibv_wr_opcode op, uint32_t len, int inl)
{
	struct ibv_qp_ex *qx;
	unsigned char *s = self->src + 3, *d = self->dst + 5, msg[64];
	struct ibv_wc wc[2];
	uint32_t imm = 0x1234abcd;
	int want = 1;

	use_qp_ex(_metadata, self);
	qx = ibv_qp_to_qp_ex(self->a);
	if (op == IBV_WR_SEND || op == IBV_WR_SEND_WITH_IMM || op == IBV_WR_RDMA_WRITE_WITH_IMM) {
		ASSERT_EQ(0, post_recv(self->b, d, len, self->dst_mr->lkey, 77));
		want = 2;
	}
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	switch (op) {
	case IBV_WR_SEND:
		ibv_wr_send(qx);
		break;
	case IBV_WR_SEND_WITH_IMM:
		ibv_wr_send_imm(qx, htonl(imm));
		break;
	case IBV_WR_RDMA_WRITE:
		ibv_wr_rdma_write(qx, self->dst_mr->rkey, (uintptr_t)d);
		break;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		ibv_wr_rdma_write_imm(qx, self->dst_mr->rkey, (uintptr_t)d, htonl(imm));
		break;
	default:
		ibv_wr_rdma_read(qx, self->src_mr->rkey, (uintptr_t)s);
		break;
	}
	if (op == IBV_WR_RDMA_READ) {
		ibv_wr_set_sge(qx, self->dst_mr->lkey, (uintptr_t)d, len);
	} else if (inl) {
		memcpy(msg, s, len);
		ibv_wr_set_inline_data(qx, msg, len);
		memset(msg, 0, sizeof(msg));	/* the setter took the bytes */
	} else {
		ibv_wr_set_sge(qx, self->src_mr->lkey, (uintptr_t)s, len);
	}
	ASSERT_EQ(0, ibv_wr_complete(qx));
	ASSERT_EQ(want, poll_n(self->cq, wc, want));
	for (int i = 0; i < want; i++) {
		report_wc(_metadata, wc[i].wr_id == 1 ? "send" : "recv", &wc[i]);
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
		EXPECT_EQ(len, wc[i].byte_len);
		if (wc[i].wr_id != 1 && op != IBV_WR_SEND) {
			EXPECT_TRUE(wc[i].wc_flags & IBV_WC_WITH_IMM);
			EXPECT_EQ(imm, ntohl(wc[i].imm_data));
		}
	}
	EXPECT_EQ(0, memcmp(s, d, len));
	EXPECT_EQ(-1, first_not(self->dst, 5, CANARY));
	EXPECT_EQ(-1, first_not(d + len, 64, CANARY));
	OUTCOME("memory=%s", memcmp(s, d, len) ? "differs" : "copied");
	EXPECT_EQ(0, poll_none(self->cq));
}

TEST_F(pair, qp_ex_send) { wr_transfer(_metadata, self, IBV_WR_SEND, 4099, 0); }
TEST_F(pair, qp_ex_send_imm) { wr_transfer(_metadata, self, IBV_WR_SEND_WITH_IMM, 100, 0); }
TEST_F(pair, qp_ex_rdma_write) { wr_transfer(_metadata, self, IBV_WR_RDMA_WRITE, 65539, 0); }
TEST_F(pair, qp_ex_rdma_write_imm) { wr_transfer(_metadata, self, IBV_WR_RDMA_WRITE_WITH_IMM, 4096, 0); }
TEST_F(pair, qp_ex_rdma_read) { wr_transfer(_metadata, self, IBV_WR_RDMA_READ, 65539, 0); }
TEST_F(pair, qp_ex_inline_send) { wr_transfer(_metadata, self, IBV_WR_SEND, 64, 1); }
TEST_F(pair, qp_ex_inline_write) { wr_transfer(_metadata, self, IBV_WR_RDMA_WRITE, 48, 1); }

/*
 * Several requests in one critical region: a WRITE gathered from two SGEs,
 * a SEND_IMM, an unsignalled WRITE and a READ, all posted by one
 * ibv_wr_complete(), the sender's completing in order.
 */
TEST_F(pair, qp_ex_batch)
{
	struct ibv_sge sg[2] = {
		{ .addr = (uintptr_t)self->src, .length = 1000, .lkey = self->src_mr->lkey },
		{ .addr = (uintptr_t)self->src + 2000, .length = 1000, .lkey = self->src_mr->lkey },
	};
	struct ibv_qp_ex *qx;
	struct ibv_wc wc[4];

	use_qp_ex(_metadata, self);
	qx = ibv_qp_to_qp_ex(self->a);
	ASSERT_EQ(0, post_recv(self->b, self->dst + 8192, 64, self->dst_mr->lkey, 77));
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, self->dst_mr->rkey, (uintptr_t)self->dst);
	ibv_wr_set_sge_list(qx, 2, sg);
	qx->wr_id = 2;
	ibv_wr_send_imm(qx, htonl(42));
	ibv_wr_set_sge(qx, self->src_mr->lkey, (uintptr_t)self->src + 6000, 50);
	qx->wr_id = 3;
	qx->wr_flags = 0;
	ibv_wr_rdma_write(qx, self->dst_mr->rkey, (uintptr_t)self->dst + 4096);
	ibv_wr_set_sge(qx, self->src_mr->lkey, (uintptr_t)self->src + 4096, 512);
	qx->wr_id = 4;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_read(qx, self->src_mr->rkey, (uintptr_t)self->src + 12288);
	ibv_wr_set_sge(qx, self->dst_mr->lkey, (uintptr_t)self->dst + 12288, 777);
	ASSERT_EQ(0, ibv_wr_complete(qx));
	ASSERT_EQ(4, poll_n(self->cq, wc, 4));
	/* The sender's signalled requests complete in order: 1, 2, 4. */
	for (int i = 0, n = 0; i < 4; i++) {
		static const uint64_t order[] = { 1, 2, 4 };

		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status)
			TH_LOG("wr %llu: %s", (unsigned long long)wc[i].wr_id,
			       ibv_wc_status_str(wc[i].status));
		if (wc[i].wr_id != 77 && n < 3) {
			EXPECT_EQ(order[n], wc[i].wr_id);
			n++;
		}
	}
	EXPECT_EQ(0, memcmp(self->src, self->dst, 1000));
	EXPECT_EQ(0, memcmp(self->src + 2000, self->dst + 1000, 1000));
	EXPECT_EQ(0, memcmp(self->src + 6000, self->dst + 8192, 50));
	EXPECT_EQ(0, memcmp(self->src + 4096, self->dst + 4096, 512));
	EXPECT_EQ(0, memcmp(self->src + 12288, self->dst + 12288, 777));
	EXPECT_EQ(-1, first_not(self->dst + 2000, 4096 - 2000, CANARY));
	OUTCOME("batch=%s", memcmp(self->src + 12288, self->dst + 12288, 777) ? "differs" : "copied");
	EXPECT_EQ(0, poll_none(self->cq));
}

/* A SEND from two inline buffers, wiped as soon as the setter returns. */
TEST_F(pair, qp_ex_inline_data_list)
{
	unsigned char h[8] = "header:", t[16] = "and the tail..";
	struct ibv_data_buf bufs[2] = { { h, 7 }, { t, 14 } };
	struct ibv_qp_ex *qx;
	struct ibv_wc wc[2];

	use_qp_ex(_metadata, self);
	qx = ibv_qp_to_qp_ex(self->a);
	ASSERT_EQ(0, post_recv(self->b, self->dst, 64, self->dst_mr->lkey, 77));
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_send(qx);
	ibv_wr_set_inline_data_list(qx, 2, bufs);
	memset(h, 0, sizeof(h));
	memset(t, 0, sizeof(t));
	ASSERT_EQ(0, ibv_wr_complete(qx));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
		EXPECT_EQ(21, wc[i].byte_len);
	}
	EXPECT_EQ(0, memcmp("header:and the tail..", self->dst, 21));
	EXPECT_EQ(-1, first_not(self->dst + 21, 64, CANARY));
	OUTCOME("memory=%s", memcmp("header:and the tail..", self->dst, 21) ? "differs" : "copied");
}

/*
 * ibv_wr_abort() discards what the region built: nothing moves, nothing
 * completes, and the next region posts as usual.  A region whose request
 * has more SGEs than the QP was created with fails at ibv_wr_complete()
 * and posts nothing.
 */
TEST_F(pair, qp_ex_abort_and_refused_batch)
{
	struct ibv_sge *sg;
	struct ibv_qp_ex *qx;
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qia;
	struct ibv_wc wc;
	int r;

	use_qp_ex(_metadata, self);
	qx = ibv_qp_to_qp_ex(self->a);
	ibv_wr_start(qx);
	qx->wr_id = 1;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, self->dst_mr->rkey, (uintptr_t)self->dst);
	ibv_wr_set_sge(qx, self->src_mr->lkey, (uintptr_t)self->src, 4096);
	ibv_wr_abort(qx);
	EXPECT_EQ(0, poll_none(self->cq));
	EXPECT_EQ(-1, first_not(self->dst, 4096, CANARY));

	/* One SGE more than the QP was granted. */
	ASSERT_EQ(0, ibv_query_qp(self->a, &qa, IBV_QP_CAP, &qia));
	ASSERT_GT(1024, qa.cap.max_send_sge);
	sg = calloc(qa.cap.max_send_sge + 1, sizeof(*sg));
	ASSERT_NE(NULL, sg);
	for (uint32_t i = 0; i <= qa.cap.max_send_sge; i++)
		sg[i] = (struct ibv_sge){ .addr = (uintptr_t)self->src + i * 64, .length = 64,
					  .lkey = self->src_mr->lkey };
	ibv_wr_start(qx);
	qx->wr_id = 2;
	ibv_wr_rdma_write(qx, self->dst_mr->rkey, (uintptr_t)self->dst);
	ibv_wr_set_sge_list(qx, qa.cap.max_send_sge + 1, sg);
	r = ibv_wr_complete(qx);
	free(sg);
	OUTCOME("abort=nothing_posted too_many_sges=%s", r ? "refused" : "accepted");
	EXPECT_NE(0, r);
	EXPECT_EQ(0, poll_none(self->cq));
	EXPECT_EQ(-1, first_not(self->dst, 65536, CANARY));

	ibv_wr_start(qx);
	qx->wr_id = 3;
	qx->wr_flags = IBV_SEND_SIGNALED;
	ibv_wr_rdma_write(qx, self->dst_mr->rkey, (uintptr_t)self->dst);
	ibv_wr_set_sge(qx, self->src_mr->lkey, (uintptr_t)self->src, 4096);
	ASSERT_EQ(0, ibv_wr_complete(qx));
	ASSERT_EQ(1, poll_n(self->cq, &wc, 1));
	report_wc(_metadata, "send", &wc);
	EXPECT_EQ(3, wc.wr_id);
	EXPECT_EQ(0, memcmp(self->src, self->dst, 4096));
}

/* Device capability bits libibverbs 56.1 has no names for. */
#define DEV_FLUSH_GLOBAL (1ULL << 38)
#define DEV_FLUSH_PERSISTENT (1ULL << 39)
#define DEV_ATOMIC_WRITE (1ULL << 40)

/*
 * ibv_create_qp_ex() with send_ops_flags: a QP is made if and only if the
 * device reports every operation asked for, and then ibv_qp_to_qp_ex()
 * gives its extended ops; otherwise the answer is NULL with EOPNOTSUPP.
 * Operations no RC QP has (TSO), UD QPs with RDMA, unknown bits and raw
 * packet QPs with send operations are refused everywhere.
 */
TEST_F(pair, qp_ex_send_ops_follow_device_caps)
{
	struct ibv_device_attr_ex da;
	struct {
		const char *name;
		enum ibv_qp_type type;
		uint64_t ops;
		int expect;	/* 1 made, 0 refused */
	} c[] = {
		{ "rc_basic", IBV_QPT_RC, QPX_OPS, 1 },
		{ "rc_atomics", IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
		  IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD, -1 },
		{ "rc_bind_mw", IBV_QPT_RC, IBV_QP_EX_WITH_BIND_MW, -1 },
		{ "rc_local_inv", IBV_QPT_RC, IBV_QP_EX_WITH_LOCAL_INV, -1 },
		{ "rc_send_inv", IBV_QPT_RC, IBV_QP_EX_WITH_SEND_WITH_INV, -1 },
		{ "rc_flush", IBV_QPT_RC, IBV_QP_EX_WITH_FLUSH, -1 },
		{ "rc_atomic_write", IBV_QPT_RC, IBV_QP_EX_WITH_ATOMIC_WRITE, -1 },
		{ "rc_tso", IBV_QPT_RC, IBV_QP_EX_WITH_TSO, 0 },
		{ "rc_unknown_bit", IBV_QPT_RC, IBV_QP_EX_WITH_SEND | (1ULL << 40), 0 },
		{ "ud_rdma_write", IBV_QPT_UD, IBV_QP_EX_WITH_RDMA_WRITE, 0 },
		{ "raw_packet_send", IBV_QPT_RAW_PACKET, IBV_QP_EX_WITH_SEND, 0 },
	};

	ASSERT_EQ(0, ibv_query_device_ex(self->ctx, NULL, &da));
	c[1].expect = da.orig_attr.atomic_cap != IBV_ATOMIC_NONE;
	c[2].expect = !!(da.orig_attr.device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B);
	c[3].expect = !!(da.orig_attr.device_cap_flags & IBV_DEVICE_MEM_MGT_EXTENSIONS);
	c[4].expect = c[3].expect;
	c[5].expect = !!(da.device_cap_flags_ex & (DEV_FLUSH_GLOBAL | DEV_FLUSH_PERSISTENT));
	c[6].expect = !!(da.device_cap_flags_ex & DEV_ATOMIC_WRITE);
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct ibv_qp *qp;
		int err;

		errno = 0;
		qp = make_qp_ex(self, c[i].type, c[i].ops, 0);
		err = errno;
		printf("# %s: %s (%s)\n", c[i].name, qp ? "made" : "refused",
		       qp ? "-" : strerror(err));
		OUTCOME("%s=%s", c[i].name, !!qp == c[i].expect &&
			(qp || err == EOPNOTSUPP) ? "as_the_device_reports" : "contrary");
		EXPECT_EQ(c[i].expect, !!qp) TH_LOG("%s", c[i].name);
		if (!qp) {
			EXPECT_EQ(EOPNOTSUPP, err) TH_LOG("%s: %s", c[i].name, strerror(err));
			continue;
		}
		EXPECT_NE(NULL, ibv_qp_to_qp_ex(qp));
		if (ibv_qp_to_qp_ex(qp)) {
			EXPECT_NE(NULL, ibv_qp_to_qp_ex(qp)->wr_start);
			EXPECT_NE(NULL, ibv_qp_to_qp_ex(qp)->wr_complete);
			EXPECT_NE(NULL, ibv_qp_to_qp_ex(qp)->wr_set_sge);
		}
		EXPECT_EQ(0, ibv_destroy_qp(qp));
	}
}

/*
 * A raw packet QP, with and without being brought up (the "with
 * attributes" creation): refused with an errno, or made and then usable
 * and destroyable; never a crash.
 */
TEST_F(pair, raw_packet_qp_refused_or_whole)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = IBV_QPT_RAW_PACKET,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_qp_init_attr_ex iax = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = IBV_QPT_RAW_PACKET,
		.cap = ia.cap, .comp_mask = IBV_QP_INIT_ATTR_PD, .pd = self->pd,
	};
	struct ibv_qp *qp;
	int made = 0;

	for (int ex = 0; ex < 2; ex++) {
		errno = 0;
		qp = ex ? ibv_create_qp_ex(self->ctx, &iax) : ibv_create_qp(self->pd, &ia);
		printf("# raw packet QP%s: %s\n", ex ? " (ex)" : "",
		       qp ? "made" : strerror(errno));
		if (!qp) {
			EXPECT_NE(0, errno);
			continue;
		}
		made++;
		{
			struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1 };

			ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PORT);
			a.qp_state = IBV_QPS_RTR;
			ibv_modify_qp(qp, &a, IBV_QP_STATE);
			a.qp_state = IBV_QPS_RTS;
			ibv_modify_qp(qp, &a, IBV_QP_STATE);
		}
		EXPECT_EQ(0, ibv_destroy_qp(qp));
	}
	OUTCOME("no_crash=1");
	(void)made;
}

/*
 * SRQs: made if and only if the device reports any (max_srq); one that
 * is made takes a resize and a limit (or refuses them with an errno),
 * answers query and is destroyed.  Never a crash.
 */
TEST_F(pair, srq_made_as_reported_and_modify_never_crashes)
{
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 16, .max_sge = 1 } };
	struct ibv_device_attr da;
	struct ibv_srq_attr sa;
	struct ibv_srq *srq;
	int r;

	ASSERT_EQ(0, ibv_query_device(self->ctx, &da));
	errno = 0;
	srq = ibv_create_srq(self->pd, &sia);
	printf("# max_srq=%d create_srq: %s\n", da.max_srq, srq ? "made" : strerror(errno));
	OUTCOME("srq=%s", !!srq == !!da.max_srq ? "as_the_device_reports" : "contrary");
	EXPECT_EQ(!!da.max_srq, !!srq);
	if (!srq) {
		EXPECT_NE(0, errno);
		return;
	}
	sa = (struct ibv_srq_attr){ .max_wr = 32 };
	r = ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR);
	printf("# resize: %d (SRQ_RESIZE %s)\n", r,
	       da.device_cap_flags & IBV_DEVICE_SRQ_RESIZE ? "reported" : "not reported");
	sa = (struct ibv_srq_attr){ .srq_limit = 4 };
	r = ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT);
	printf("# limit: %d\n", r);
	EXPECT_EQ(0, ibv_query_srq(srq, &sa));
	EXPECT_EQ(0, ibv_destroy_srq(srq));
}

/* A UC QP of the fixture's PD and CQ, connected to @dest (RTS). */
static int uc_connect(FIXTURE_DATA(pair) *self, struct ibv_qp *qp, uint32_t dest)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
		.dest_qp_num = dest, .rq_psn = 0,
		.ah_attr = self_av(self),
	};

	if (to_init(qp, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) ||
	    ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN))
		return -1;
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 0;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN);
}

/*
 * UC QPs: SEND and RDMA WRITE (multi-packet) arrive; what the responder
 * cannot take (a SEND without a receive, a WRITE with a bad R_Key) is
 * dropped while the requester completes it, both QPs staying in RTS.
 */
TEST_F(pair, uc_send_write_and_drops)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *u1 = ibv_create_qp(self->pd, &ia), *u2 = ibv_create_qp(self->pd, &ia);
	struct ibv_wc wc[2];
	int got, recvs = 0, sends = 0;

	ASSERT_NE(NULL, u1) TH_LOG("UC QP: %s", strerror(errno));
	ASSERT_NE(NULL, u2);
	ASSERT_EQ(0, uc_connect(self, u1, u2->qp_num));
	ASSERT_EQ(0, uc_connect(self, u2, u1->qp_num));
	/* Dropped: no receive, then a bad R_Key. */
	ASSERT_EQ(0, post_rdma(u1, IBV_WR_SEND, self->src, 100, self->src_mr->lkey, 0, 0, 0,
			       IBV_SEND_SIGNALED, 1));
	ASSERT_EQ(1, poll_n(self->cq, wc, 1));
	report_wc(_metadata, "send_without_recv", &wc[0]);
	EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
	ASSERT_EQ(0, post_rdma(u1, IBV_WR_RDMA_WRITE, self->src, 3000, self->src_mr->lkey,
			       (uintptr_t)self->dst, self->dst_mr->rkey + 1, 0,
			       IBV_SEND_SIGNALED, 2));
	ASSERT_EQ(1, poll_n(self->cq, wc, 1));
	report_wc(_metadata, "write_bad_rkey", &wc[0]);
	EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
	usleep(200000);
	EXPECT_EQ(-1, first_not(self->dst, BUF, CANARY));
	/* Taken: a 3000-byte WRITE (three packets on the wire), then a SEND. */
	ASSERT_EQ(0, post_rdma(u1, IBV_WR_RDMA_WRITE, self->src, 3000, self->src_mr->lkey,
			       (uintptr_t)self->dst, self->dst_mr->rkey, 0,
			       IBV_SEND_SIGNALED, 4));
	ASSERT_EQ(1, poll_n(self->cq, wc, 1));
	report_wc(_metadata, "write", &wc[0]);
	ASSERT_EQ(0, post_recv(u2, self->dst + 8192, 256, self->dst_mr->lkey, 5));
	ASSERT_EQ(0, post_rdma(u1, IBV_WR_SEND, self->src + 4096, 100, self->src_mr->lkey,
			       0, 0, 0, IBV_SEND_SIGNALED, 6));
	while (recvs + sends < 2) {
		got = poll_n(self->cq, wc, 1);
		ASSERT_EQ(1, got);
		EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
		if (wc[0].opcode == IBV_WC_RECV) {
			recvs++;
			EXPECT_EQ(100, wc[0].byte_len);
			EXPECT_EQ(u2->qp_num, wc[0].qp_num);
		} else {
			sends++;
		}
	}
	/* Polls the WRITE's data: on the wire it may land after its completion. */
	for (int i = 0; i < 50 && memcmp(self->dst, self->src, 3000); i++)
		usleep(20000);
	EXPECT_EQ(0, memcmp(self->dst, self->src, 3000));
	EXPECT_EQ(0, memcmp(self->dst + 8192, self->src + 4096, 100));
	OUTCOME("states u1=%d u2=%d recvs=%d", qp_state(u1), qp_state(u2), recvs);
	EXPECT_EQ(IBV_QPS_RTS, qp_state(u1));
	EXPECT_EQ(IBV_QPS_RTS, qp_state(u2));
	EXPECT_EQ(0, ibv_destroy_qp(u1));
	EXPECT_EQ(0, ibv_destroy_qp(u2));
}

/*
 * An RDMA READ or an atomic on a UC QP, which has no responses to carry
 * them, is refused at post with EINVAL, the QP left in RTS (rxe's
 * provider queues it and its requester moves the QP to ERR instead: a
 * documented divergence).
 */
TEST_F(pair, uc_read_refused_at_post)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = IBV_QPT_UC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *u1 = ibv_create_qp(self->pd, &ia), *u2 = ibv_create_qp(self->pd, &ia);

	ASSERT_NE(NULL, u1);
	ASSERT_NE(NULL, u2);
	ASSERT_EQ(0, uc_connect(self, u1, u2->qp_num));
	ASSERT_EQ(0, uc_connect(self, u2, u1->qp_num));
	EXPECT_EQ(EINVAL, post_rdma(u1, IBV_WR_RDMA_READ, self->dst, 64, self->dst_mr->lkey,
				    (uintptr_t)self->src, self->src_mr->rkey, 0,
				    IBV_SEND_SIGNALED, 1));
	EXPECT_EQ(IBV_QPS_RTS, qp_state(u1));
	EXPECT_EQ(0, ibv_destroy_qp(u1));
	EXPECT_EQ(0, ibv_destroy_qp(u2));
}

/* Records one verb's answer: made (0) or refused with an errno, never 0. */
#define ANSWER(name, r)								\
	do {									\
		int r_ = (r);							\
										\
		printf("# %-22s %s\n", name, r_ ? strerror(r_) : "made");	\
		answered++;							\
		if (r_ < 0 || r_ > 4095)					\
			bad++;							\
	} while (0)

/* 0 for an object, else its errno (EIO if the verb set none). */
static int made(const void *obj)
{
	return obj ? 0 : errno ? errno : EIO;
}

/*
 * Every verb of libibverbs' context and extended operations that a
 * provider may not implement, called with ordinary arguments: each is
 * answered, an object (destroyed again) or an errno, and the process and
 * the device live on (the pair still runs a SEND). What each device
 * supports differs (rxe has memory windows, plx_rdma none), so only the
 * answers' shape is compared.
 */
TEST_F(pair, every_verb_answers)
{
	struct ibv_xrcd_init_attr xa = {
		.comp_mask = IBV_XRCD_INIT_ATTR_FD | IBV_XRCD_INIT_ATTR_OFLAGS,
		.fd = -1, .oflags = O_CREAT,
	};
	struct ibv_wq_init_attr wa = { .wq_type = IBV_WQT_RQ, .max_wr = 1, .max_sge = 1,
				       .pd = self->pd, .cq = self->cq };
	struct ibv_alloc_dm_attr da = { .length = 64 };
	struct ibv_td_init_attr ta = {};
	struct ibv_parent_domain_init_attr pa = { .pd = self->pd };
	struct ibv_counters_init_attr ca = {};
	struct ibv_modify_cq_attr ma = { .attr_mask = IBV_CQ_ATTR_MODERATE,
					 .moderate = { .cq_count = 1, .cq_period = 1 } };
	struct ibv_values_ex vx = { .comp_mask = IBV_VALUES_MASK_RAW_CLOCK };
	struct ibv_srq_init_attr_ex sx = {
		.attr = { .max_wr = 1, .max_sge = 1 }, .srq_type = IBV_SRQT_XRC,
		.comp_mask = IBV_SRQ_INIT_ATTR_TYPE | IBV_SRQ_INIT_ATTR_PD,
		.pd = self->pd,
	};
	struct ibv_sge sge = { .addr = (uintptr_t)self->src, .length = 64,
			       .lkey = self->src_mr->lkey };
	struct ibv_ece ece = {};
	union ibv_gid mgid = { .raw = { 0xff, 0x0e } };
	struct ibv_mw *mw;
	struct ibv_xrcd *xrcd;
	struct ibv_wq *wq;
	struct ibv_dm *dm;
	struct ibv_td *td;
	struct ibv_pd *ppd;
	struct ibv_counters *counters;
	struct ibv_srq *srq;
	struct ibv_mr *mr;
	struct ibv_wc wc[2];
	int answered = 0, bad = 0, r;

	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	for (int type = IBV_MW_TYPE_1; type <= IBV_MW_TYPE_2; type++) {
		errno = 0;
		mw = ibv_alloc_mw(self->pd, type);
		ANSWER(type == IBV_MW_TYPE_1 ? "alloc_mw type 1" : "alloc_mw type 2", made(mw));
		if (mw)
			EXPECT_EQ(0, ibv_dealloc_mw(mw));
	}
	errno = 0;
	xrcd = ibv_open_xrcd(self->ctx, &xa);
	ANSWER("open_xrcd", made(xrcd));
	if (xrcd)
		EXPECT_EQ(0, ibv_close_xrcd(xrcd));
	errno = 0;
	wq = ibv_create_wq(self->ctx, &wa);
	ANSWER("create_wq", made(wq));
	if (wq)
		EXPECT_EQ(0, ibv_destroy_wq(wq));
	errno = 0;
	dm = ibv_alloc_dm(self->ctx, &da);
	ANSWER("alloc_dm", made(dm));
	if (dm)
		EXPECT_EQ(0, ibv_free_dm(dm));
	errno = 0;
	td = ibv_alloc_td(self->ctx, &ta);
	ANSWER("alloc_td", made(td));
	if (td)
		EXPECT_EQ(0, ibv_dealloc_td(td));
	errno = 0;
	ppd = ibv_alloc_parent_domain(self->ctx, &pa);
	ANSWER("alloc_parent_domain", made(ppd));
	if (ppd)
		EXPECT_EQ(0, ibv_dealloc_pd(ppd));
	errno = 0;
	counters = ibv_create_counters(self->ctx, &ca);
	ANSWER("create_counters", made(counters));
	if (counters)
		EXPECT_EQ(0, ibv_destroy_counters(counters));
	errno = 0;
	srq = ibv_create_srq_ex(self->ctx, &sx);
	ANSWER("create_srq_ex (XRC)", made(srq));
	if (srq)
		EXPECT_EQ(0, ibv_destroy_srq(srq));
	errno = 0;
	mr = ibv_reg_dmabuf_mr(self->pd, 0, PAGE, 0, -1, IBV_ACCESS_LOCAL_WRITE);
	ANSWER("reg_dmabuf_mr (fd -1)", made(mr));
	if (mr)
		EXPECT_EQ(0, ibv_dereg_mr(mr));
	ANSWER("advise_mr", ibv_advise_mr(self->pd, IBV_ADVISE_MR_ADVICE_PREFETCH, 0, &sge, 1));
	ANSWER("modify_cq", ibv_modify_cq(self->cq, &ma));
	ANSWER("query_rt_values_ex", ibv_query_rt_values_ex(self->ctx, &vx));
	ANSWER("query_ece", ibv_query_ece(self->a, &ece));
	ANSWER("set_ece", ibv_set_ece(self->a, &ece));
	r = ibv_attach_mcast(self->a, &mgid, 0);
	ANSWER("attach_mcast", r);
	if (!r)
		EXPECT_EQ(0, ibv_detach_mcast(self->a, &mgid, 0));
	r = ibv_query_qp_data_in_order(self->a, IBV_WR_SEND, 0);
	printf("# %-22s %d\n", "query_qp_data_in_order", r);
	answered++;
	errno = 0;
	ANSWER("import_pd (bad handle)", made(ibv_import_pd(self->ctx, 0xffffff)));
	OUTCOME("answered=%d bad=%d", answered, bad);
	EXPECT_EQ(0, bad);
	/* The device still works. */
	ASSERT_EQ(0, post_recv(self->b, self->dst, 64, self->dst_mr->lkey, 1));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey, 0, 0,
			       0, IBV_SEND_SIGNALED, 2));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
	EXPECT_EQ(IBV_WC_SUCCESS, wc[1].status);
	EXPECT_EQ(0, memcmp(self->dst, self->src, 64));
}

/* made() of ibv_create_qp_ex() with @attr; a QP made is destroyed again. */
static int qp_ex_made(struct ibv_context *ctx, struct ibv_qp_init_attr_ex *attr)
{
	struct ibv_qp *qp;
	int r;

	errno = 0;
	qp = ibv_create_qp_ex(ctx, attr);
	r = made(qp);
	if (qp)
		ibv_destroy_qp(qp);
	return r;
}

/* made() of ibv_create_cq_ex() with @attr; a CQ made is destroyed again. */
static int cq_ex_made(struct ibv_context *ctx, struct ibv_cq_init_attr_ex *attr)
{
	struct ibv_cq_ex *cq;
	int r;

	errno = 0;
	cq = ibv_create_cq_ex(ctx, attr);
	r = made(cq);
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	return r;
}

/*
 * The extended verbs and the attributes they take, each with a bit that
 * no release of the verbs defines (or a value out of range) among
 * ordinary arguments: each is refused with an errno, no object is made,
 * and the process and the device live on (the pair still runs a SEND).
 * Where libibverbs itself checks the bit, the provider never sees it;
 * either way the caller gets an errno, never a half-made object.
 */
TEST_F(pair, unknown_bits_refused)
{
	struct ibv_qp_init_attr_ex qx = {
		.qp_type = IBV_QPT_RC, .send_cq = self->cq, .recv_cq = self->cq,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.comp_mask = IBV_QP_INIT_ATTR_PD, .pd = self->pd,
	};
	struct ibv_cq_init_attr_ex cx = { .cqe = 4, .wc_flags = IBV_WC_STANDARD_FLAGS };
	struct ibv_srq_init_attr_ex sx = {
		.attr = { .max_wr = 1, .max_sge = 1 },
		.comp_mask = IBV_SRQ_INIT_ATTR_PD, .pd = self->pd,
	};
	struct ibv_query_device_ex_input qin = { .comp_mask = 1u << 31 };
	struct ibv_device_attr_ex dx;
	struct ibv_td_init_attr ta = { .comp_mask = 1u << 31 };
	struct ibv_qp_rate_limit_attr rl = { .rate_limit = 1, .comp_mask = 1u << 31 };
	struct ibv_qp_attr qa = { .qp_state = IBV_QPS_RTS };
	struct ibv_wc wc[2];
	struct ibv_qp_init_attr_ex q;
	struct ibv_cq_init_attr_ex c;
	struct ibv_srq_init_attr_ex sr;
	int answered = 0, bad = 0, made_any = 0, r;
	void *obj;

#define REFUSED(name, obj_or_err)						\
	do {									\
		int e_ = (obj_or_err);						\
		ANSWER(name, e_);						\
		if (!e_)							\
			made_any++;						\
	} while (0)
	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));

	q = qx;
	q.comp_mask |= 1u << 31;
	REFUSED("create_qp_ex comp_mask", qp_ex_made(self->ctx, &q));
	q = qx;
	q.comp_mask |= IBV_QP_INIT_ATTR_CREATE_FLAGS;
	q.create_flags = 1u << 30;
	REFUSED("create_qp_ex create_flags", qp_ex_made(self->ctx, &q));
	q = qx;
	q.comp_mask |= IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	q.send_ops_flags = IBV_QP_EX_WITH_SEND | (1ull << 40);
	REFUSED("create_qp_ex send_ops", qp_ex_made(self->ctx, &q));
	q = qx;
	q.qp_type = 0x7f;
	REFUSED("create_qp_ex qp_type", qp_ex_made(self->ctx, &q));

	c = cx;
	c.comp_mask = 1u << 31;
	REFUSED("create_cq_ex comp_mask", cq_ex_made(self->ctx, &c));
	c = cx;
	c.wc_flags |= 1ull << 40;
	REFUSED("create_cq_ex wc_flags", cq_ex_made(self->ctx, &c));

	sr = sx;
	sr.comp_mask |= 1u << 31;
	errno = 0;
	obj = ibv_create_srq_ex(self->ctx, &sr);
	REFUSED("create_srq_ex comp_mask", made(obj));
	if (obj)
		ibv_destroy_srq(obj);
	REFUSED("query_device_ex comp_mask", ibv_query_device_ex(self->ctx, &qin, &dx));
	errno = 0;
	obj = ibv_alloc_td(self->ctx, &ta);
	REFUSED("alloc_td comp_mask", made(obj));
	if (obj)
		ibv_dealloc_td(obj);
	REFUSED("modify_qp_rate_limit", ibv_modify_qp_rate_limit(self->a, &rl));
	errno = 0;
	obj = ibv_reg_mr(self->pd, self->src, PAGE, IBV_ACCESS_LOCAL_WRITE | (1 << 19));
	REFUSED("reg_mr access bit 19", made(obj));
	if (obj)
		ibv_dereg_mr(obj);
	r = ibv_modify_qp(self->a, &qa, IBV_QP_STATE | (1 << 30));
	REFUSED("modify_qp attr_mask", r);
#undef REFUSED
	OUTCOME("answered=%d bad=%d made=%d", answered, bad, made_any);
	EXPECT_EQ(0, bad);
	EXPECT_EQ(0, made_any);
	/* The device and the pair still work. */
	ASSERT_EQ(0, poll_none(self->cq));
	ASSERT_EQ(0, post_recv(self->b, self->dst, 64, self->dst_mr->lkey, 1));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey, 0, 0,
			       0, IBV_SEND_SIGNALED, 2));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
	EXPECT_EQ(IBV_WC_SUCCESS, wc[1].status);
	EXPECT_EQ(0, memcmp(self->dst, self->src, 64));
}

/*
 * What rxe takes and plx_rdma refuses (see rxe_divergences): a CQ
 * creation flag no release defines (EOPNOTSUPP, no CQ made; rxe ignores
 * it), and a send request with an opcode no release defines or a send
 * flag beyond IBV_SEND_* (EINVAL at post, nothing queued, the QP still in
 * RTS; rxe queues both and then fails the QP).
 */
TEST_F(pair, unknown_opcode_and_flags_refused)
{
	struct ibv_cq_init_attr_ex cx = {
		.cqe = 4, .wc_flags = IBV_WC_STANDARD_FLAGS,
		.comp_mask = IBV_CQ_INIT_ATTR_MASK_FLAGS, .flags = 1u << 30,
	};
	struct ibv_sge sge = { .addr = (uintptr_t)self->src, .length = 64,
			       .lkey = self->src_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 9, .sg_list = &sge, .num_sge = 1,
				  .opcode = 0x7f }, *bad_wr = NULL;
	struct ibv_cq_ex *cq;
	struct ibv_wc wc[2];

	errno = 0;
	cq = ibv_create_cq_ex(self->ctx, &cx);
	EXPECT_EQ(NULL, cq);
	EXPECT_NE(0, errno);
	if (cq)
		ibv_destroy_cq(ibv_cq_ex_to_cq(cq));
	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	EXPECT_EQ(EINVAL, ibv_post_send(self->a, &wr, &bad_wr));
	EXPECT_EQ(&wr, bad_wr);
	wr.opcode = IBV_WR_SEND;
	wr.send_flags = IBV_SEND_SIGNALED | (1 << 20);
	bad_wr = NULL;
	EXPECT_EQ(EINVAL, ibv_post_send(self->a, &wr, &bad_wr));
	EXPECT_EQ(&wr, bad_wr);
	OUTCOME("queued=%d state=%d", poll_none(self->cq), qp_state(self->a));
	EXPECT_EQ(IBV_QPS_RTS, qp_state(self->a));
	ASSERT_EQ(0, post_recv(self->b, self->dst, 64, self->dst_mr->lkey, 1));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src, 64, self->src_mr->lkey, 0, 0,
			       0, IBV_SEND_SIGNALED, 2));
	ASSERT_EQ(2, poll_n(self->cq, wc, 2));
	EXPECT_EQ(IBV_WC_SUCCESS, wc[0].status);
	EXPECT_EQ(IBV_WC_SUCCESS, wc[1].status);
}

/*
 * ibv_resize_cq(): a CQ grows with its completions kept in order, cannot
 * shrink below the completions it holds (EINVAL), and shrinks above them.
 */
TEST_F(pair, cq_resize_keeps_completions)
{
	struct ibv_cq *cq = ibv_create_cq(self->ctx, 4, NULL, NULL, 0);
	struct ibv_qp_init_attr ia = {
		.send_cq = NULL, .recv_cq = self->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_qp *old_a = self->a;
	struct ibv_wc wc[4];
	int r;

	ASSERT_NE(NULL, cq);
	ia.send_cq = cq;
	self->a = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, self->a);
	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	for (int i = 0; i < 3; i++)
		ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 64,
				       self->src_mr->lkey, (uintptr_t)self->dst,
				       self->dst_mr->rkey, 0, IBV_SEND_SIGNALED, 10 + i));
	/* Let the three complete into the CQ before it is resized. */
	usleep(500000);
	r = ibv_resize_cq(cq, 64);
	OUTCOME("grow=%s", r ? strerror(r) : "ok");
	EXPECT_EQ(0, r);
	EXPECT_LE(64, cq->cqe);
	r = ibv_resize_cq(cq, 1);
	OUTCOME("below_held=%s", r == EINVAL ? "EINVAL" : r ? strerror(r) : "ok");
	ASSERT_EQ(3, poll_n(cq, wc, 3));
	for (int i = 0; i < 3; i++) {
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
		EXPECT_EQ(10 + i, wc[i].wr_id);
	}
	r = ibv_resize_cq(cq, 8);
	OUTCOME("shrink_empty=%s", r ? strerror(r) : "ok");
	EXPECT_EQ(0, r);
	EXPECT_EQ(0, ibv_destroy_qp(self->a));
	self->a = old_a;
	EXPECT_EQ(0, ibv_destroy_cq(cq));
}

/*
 * An RC QP that receives from an SRQ: SENDs take the SRQ's receives in
 * order; the armed limit raises IBV_EVENT_SRQ_LIMIT_REACHED once the
 * receives fall below it, and is disarmed then; the SRQ resizes; the
 * QP itself takes no receive (EINVAL).
 */
TEST_F(pair, srq_receives_limit_and_resize)
{
	struct ibv_srq_init_attr sia = { .attr = { .max_wr = 8, .max_sge = 1 } };
	struct ibv_qp_init_attr ia = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = DEPTH, .max_send_sge = 1 },
	};
	struct pollfd pfd = { .events = POLLIN };
	struct ibv_async_event ev;
	struct ibv_device_attr da;
	struct ibv_srq_attr sa;
	struct ibv_recv_wr rwr, *rbad;
	struct ibv_sge sge;
	struct ibv_wc wc[4];
	struct ibv_qp *s1;
	struct ibv_srq *srq;
	int limit = 0, got = 0;

	ASSERT_EQ(0, ibv_query_device(self->ctx, &da));
	if (!da.max_srq)
		SKIP(return, "the device has no SRQ");
	srq = ibv_create_srq(self->pd, &sia);
	ASSERT_NE(NULL, srq) TH_LOG("create_srq: %s", strerror(errno));
	ia.srq = srq;
	s1 = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, s1) TH_LOG("create_qp on the SRQ: %s", strerror(errno));
	ASSERT_EQ(0, to_init(self->a, IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, to_init(s1, IBV_ACCESS_LOCAL_WRITE));
	ASSERT_EQ(0, to_rtr(self, self->a, s1->qp_num));
	ASSERT_EQ(0, to_rtr(self, s1, self->a->qp_num));
	ASSERT_EQ(0, to_rts(self->a, 7));
	ASSERT_EQ(0, to_rts(s1, 7));
	for (int i = 0; i < 3; i++) {
		sge = (struct ibv_sge){ .addr = (uintptr_t)self->dst + i * 256, .length = 256,
					.lkey = self->dst_mr->lkey };
		rwr = (struct ibv_recv_wr){ .wr_id = 100 + i, .sg_list = &sge, .num_sge = 1 };
		ASSERT_EQ(0, ibv_post_srq_recv(srq, &rwr, &rbad));
	}
	EXPECT_NE(0, post_recv(s1, self->dst, 64, self->dst_mr->lkey, 9));
	sa = (struct ibv_srq_attr){ .srq_limit = 2 };
	ASSERT_EQ(0, ibv_modify_srq(srq, &sa, IBV_SRQ_LIMIT));
	ASSERT_EQ(0, fcntl(self->ctx->async_fd, F_SETFL,
			   fcntl(self->ctx->async_fd, F_GETFL) | O_NONBLOCK));
	/* Two SENDs: three receives, then two, then one (below the limit). */
	for (int i = 0; i < 2; i++)
		ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND, self->src + 1000 * i, 100,
				       self->src_mr->lkey, 0, 0, 0, IBV_SEND_SIGNALED, i));
	while (got < 4) {
		ASSERT_EQ(1, poll_n(self->cq, &wc[got], 1));
		EXPECT_EQ(IBV_WC_SUCCESS, wc[got].status);
		got++;
	}
	for (int i = 0; i < 4; i++) {
		if (wc[i].opcode != IBV_WC_RECV)
			continue;
		EXPECT_EQ(s1->qp_num, wc[i].qp_num);
		EXPECT_EQ(100, wc[i].byte_len);
		/* The SRQ's receives in order: 100 takes the first SEND. */
		EXPECT_EQ(0, memcmp(self->dst + (wc[i].wr_id - 100) * 256,
				    self->src + 1000 * (wc[i].wr_id - 100), 100));
	}
	pfd.fd = self->ctx->async_fd;
	while (poll(&pfd, 1, 5000) == 1 && !ibv_get_async_event(self->ctx, &ev)) {
		if (ev.event_type == IBV_EVENT_SRQ_LIMIT_REACHED && ev.element.srq == srq)
			limit = 1;
		ibv_ack_async_event(&ev);
		if (limit)
			break;
	}
	EXPECT_EQ(0, ibv_query_srq(srq, &sa));
	OUTCOME("limit_event=%s limit_after=%u", limit ? "raised" : "none", sa.srq_limit);
	EXPECT_TRUE(limit);
	EXPECT_EQ(0, sa.srq_limit);
	sa = (struct ibv_srq_attr){ .max_wr = 16 };
	EXPECT_EQ(0, ibv_modify_srq(srq, &sa, IBV_SRQ_MAX_WR));
	EXPECT_EQ(0, ibv_query_srq(srq, &sa));
	EXPECT_LE(16, sa.max_wr);
	EXPECT_EQ(0, ibv_destroy_qp(s1));
	EXPECT_EQ(0, ibv_destroy_srq(srq));
}

/*
 * ibv_create_cq_ex(): completions read through ibv_start_poll(),
 * ibv_next_poll() and the accessors its wc_flags ask for, the same as
 * ibv_poll_cq() gives: a SEND_IMM and its receive, then an RDMA WRITE.
 * An empty CQ answers ENOENT.
 */
TEST_F(pair, cq_ex_poll)
{
	struct ibv_cq_init_attr_ex ca = {
		.cqe = 4 * DEPTH,
		.wc_flags = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM | IBV_WC_EX_WITH_QP_NUM |
			    IBV_WC_EX_WITH_SRC_QP | IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
			    IBV_WC_EX_WITH_DLID_PATH_BITS,
	};
	struct ibv_poll_cq_attr pa = {};
	struct ibv_cq_ex *cqx;
	struct timespec t0, t;
	char seen[3][128] = { "none", "none", "none" };
	int got = 0, r, seen_recv = 0;

	cqx = ibv_create_cq_ex(self->ctx, &ca);
	ASSERT_NE(NULL, cqx) TH_LOG("ibv_create_cq_ex: %s", strerror(errno));
	ibv_destroy_qp(self->a);
	ibv_destroy_qp(self->b);
	self->a = self->b = NULL;
	{
		struct ibv_qp_init_attr ia = {
			.send_cq = ibv_cq_ex_to_cq(cqx), .recv_cq = ibv_cq_ex_to_cq(cqx),
			.qp_type = IBV_QPT_RC,
			.cap = { .max_send_wr = DEPTH, .max_recv_wr = DEPTH, .max_send_sge = 1,
				 .max_recv_sge = 1 },
		};

		self->a = ibv_create_qp(self->pd, &ia);
		self->b = ibv_create_qp(self->pd, &ia);
	}
	ASSERT_NE(NULL, self->a);
	ASSERT_NE(NULL, self->b);
	ASSERT_EQ(0, connect_pair(self, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE, 7));
	r = ibv_start_poll(cqx, &pa);
	OUTCOME("empty=%s", r == ENOENT ? "ENOENT" : "other");
	EXPECT_EQ(ENOENT, r);
	if (!r)
		ibv_end_poll(cqx);

	ASSERT_EQ(0, post_recv(self->b, self->dst, 256, self->dst_mr->lkey, 77));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_SEND_WITH_IMM, self->src, 200, self->src_mr->lkey,
			       0, 0, 0xfeed, IBV_SEND_SIGNALED, 1));
	ASSERT_EQ(0, post_rdma(self->a, IBV_WR_RDMA_WRITE, self->src, 4096, self->src_mr->lkey,
			       (uintptr_t)self->dst + 4096, self->dst_mr->rkey, 0,
			       IBV_SEND_SIGNALED, 2));
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (got < 3) {
		r = ibv_start_poll(cqx, &pa);
		if (r == ENOENT) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			ASSERT_GT(60, t.tv_sec - t0.tv_sec) TH_LOG("%d of 3 completions", got);
			usleep(100);
			continue;
		}
		ASSERT_EQ(0, r);
		do {
			uint64_t id = cqx->wr_id;

			got++;
			EXPECT_EQ(IBV_WC_SUCCESS, cqx->status);
			/* By wr_id, whatever order the two QPs' completions came in. */
			snprintf(seen[id == 77 ? 2 : id == 2], sizeof(seen[0]),
				 "wr_id=%llu status=%s opcode=%d byte_len=%u imm=%s%08x",
				 (unsigned long long)id, ibv_wc_status_str(cqx->status),
				 ibv_wc_read_opcode(cqx), ibv_wc_read_byte_len(cqx),
				 ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM ? "" : "none:",
				 ibv_wc_read_wc_flags(cqx) & IBV_WC_WITH_IMM ?
				 ntohl(ibv_wc_read_imm_data(cqx)) : 0);
			if (id == 77) {
				seen_recv = 1;
				EXPECT_EQ(IBV_WC_RECV, ibv_wc_read_opcode(cqx));
				EXPECT_EQ(200, ibv_wc_read_byte_len(cqx));
				EXPECT_EQ(0xfeed, ntohl(ibv_wc_read_imm_data(cqx)));
				EXPECT_EQ(self->b->qp_num, ibv_wc_read_qp_num(cqx));
			} else {
				EXPECT_EQ(self->a->qp_num, ibv_wc_read_qp_num(cqx));
				EXPECT_EQ(id == 1 ? IBV_WC_SEND : IBV_WC_RDMA_WRITE,
					  ibv_wc_read_opcode(cqx));
			}
			(void)ibv_wc_read_src_qp(cqx);
			(void)ibv_wc_read_slid(cqx);
			(void)ibv_wc_read_sl(cqx);
			(void)ibv_wc_read_dlid_path_bits(cqx);
		} while (got < 3 && !(r = ibv_next_poll(cqx)));
		ibv_end_poll(cqx);
	}
	for (int i = 0; i < 3; i++)
		OUTCOME("wc %s", seen[i]);
	EXPECT_TRUE(seen_recv);
	EXPECT_EQ(0, memcmp(self->src, self->dst + 4096, 4096));
	ibv_destroy_qp(self->a);
	ibv_destroy_qp(self->b);
	self->a = self->b = NULL;
	EXPECT_EQ(0, ibv_destroy_cq(ibv_cq_ex_to_cq(cqx)));
}

/*
 * ibv_create_cq_ex() refuses, with EOPNOTSUPP and no CQ, the completion
 * fields a soft device cannot fill in (timestamps, VLAN, flow tag, tag
 * matching) and unknown ones.
 */
TEST_F(pair, cq_ex_refuses_unsupported_wc_flags)
{
	static const struct {
		const char *name;
		uint64_t flags;
	} c[] = {
		{ "completion_timestamp", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP },
		{ "cvlan", IBV_WC_EX_WITH_CVLAN },
		{ "flow_tag", IBV_WC_EX_WITH_FLOW_TAG },
		{ "tm_info", IBV_WC_EX_WITH_TM_INFO },
		{ "wallclock", IBV_WC_EX_WITH_COMPLETION_TIMESTAMP_WALLCLOCK },
		{ "unknown_bit", IBV_WC_EX_WITH_BYTE_LEN | (1ULL << 30) },
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct ibv_cq_init_attr_ex ca = { .cqe = 8, .wc_flags = c[i].flags };
		struct ibv_cq_ex *cqx;
		int err;

		errno = 0;
		cqx = ibv_create_cq_ex(self->ctx, &ca);
		err = errno;
		OUTCOME("%s=%s", c[i].name, cqx ? "made" : strerror(err));
		EXPECT_EQ(NULL, cqx) TH_LOG("%s", c[i].name);
		if (cqx) {
			ibv_destroy_cq(ibv_cq_ex_to_cq(cqx));
		} else {
			EXPECT_EQ(EOPNOTSUPP, err);
		}
	}
}

TEST_HARNESS_MAIN
