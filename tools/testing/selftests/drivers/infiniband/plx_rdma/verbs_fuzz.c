// SPDX-License-Identifier: GPL-2.0
/*
 * Randomized hostile verbs on one RDMA device: objects created, used and
 * destroyed in random order with random (mostly wrong) arguments, work
 * requests with random opcodes, keys, addresses, lengths and flags, QPs
 * moved through random states with random attribute masks.
 *
 *   PLX_RDMA_DEV=plx_rdma0 [PLX_FUZZ_OPS=20000] [PLX_FUZZ_SEED=n] ./verbs_fuzz
 *
 * The process also scribbles on what the device maps into it (a CQ's ring,
 * mapped from the uverbs file): random values in the indexes the kernel
 * reads or the provider does.
 *
 * What must hold: every verb returns (a value or an errno), every work
 * completion carries a status verbs defines, the process survives, and a
 * region nothing may write (registered without any write right, in every
 * PD) keeps its canary, as does memory never registered.  The kernel's
 * side (no splat, no leak) is checked by the suite around it.  The seed is
 * printed: a failure is reproduced with PLX_FUZZ_SEED.
 */
#define _GNU_SOURCE
#include <errno.h>
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
 * The run's length is PLX_FUZZ_OPS, not a time: make soak runs ten times
 * the default, which the harness's 30 s would cut short.
 */
#undef TEST_TIMEOUT_DEFAULT
#define TEST_TIMEOUT_DEFAULT 3600

#define NPD 3
#define NCQ 4
#define NMR 24
#define NQP 8
#define NBUF 4
#define BUFLEN (64 * 1024)
#define CANARY 0xa5

struct fuzz {
	struct ibv_context *ctx;
	struct ibv_port_attr port;
	struct ibv_pd *pd[NPD];
	struct ibv_cq *cq[NCQ];
	struct ibv_mr *mr[NMR];
	struct ibv_qp *qp[NQP];
	struct ibv_mr *guard_mr[NPD];
	/*
	 * The address handle a UD request names (or none): a pointer there is
	 * dereferenced by libibverbs itself before any provider sees the
	 * request, so a garbage one would be the caller's undefined behaviour
	 * on every device, not a test of this one.
	 */
	struct ibv_pd *ah_pd;
	struct ibv_ah *ah;
	unsigned char *buf[NBUF];
	unsigned char *guard, *unregistered;
	uint64_t rng;
	unsigned long calls, errors, wcs, wc_errors, scribbles;
};

static uint64_t rnd(struct fuzz *f)
{
	/* xorshift64*: reproducible from the seed. */
	f->rng ^= f->rng >> 12;
	f->rng ^= f->rng << 25;
	f->rng ^= f->rng >> 27;
	return f->rng * 2685821657736338717ULL;
}

static uint64_t below(struct fuzz *f, uint64_t n)
{
	return n ? rnd(f) % n : 0;
}

/* A value that is often plausible and sometimes absurd. */
static uint32_t any32(struct fuzz *f, uint32_t plausible)
{
	switch (below(f, 6)) {
	case 0: return 0;
	case 1: return ~0U;
	case 2: return (uint32_t)rnd(f);
	case 3: return plausible + 1;
	default: return plausible ? below(f, plausible + 1) : 0;
	}
}

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

/* Counts a verb's result: 0 or an errno, never anything else. */
static int result(struct fuzz *f, int ret)
{
	f->calls++;
	if (ret)
		f->errors++;
	return ret;
}

static void *some(struct fuzz *f, void **arr, int n)
{
	return arr[below(f, n)];
}

/* An address: inside a buffer, at its edge, or somewhere else entirely. */
static uint64_t any_addr(struct fuzz *f)
{
	unsigned char *b = f->buf[below(f, NBUF)];

	switch (below(f, 8)) {
	case 0: return 0;
	case 1: return (uintptr_t)f->guard + below(f, BUFLEN);
	case 2: return (uintptr_t)f->unregistered + below(f, BUFLEN);
	case 3: return rnd(f);
	case 4: return (uintptr_t)b + BUFLEN - below(f, 64);
	default: return (uintptr_t)b + below(f, BUFLEN);
	}
}

static uint32_t any_key(struct fuzz *f)
{
	struct ibv_mr *mr = some(f, (void **)f->mr, NMR);

	if (!mr || below(f, 5) == 0)
		return any32(f, 0x1000);
	return below(f, 2) ? mr->lkey : mr->rkey;
}

static int any_access(struct fuzz *f)
{
	int a = below(f, 16);

	if (below(f, 10) == 0)
		a |= 1 << below(f, 31);
	return a;
}

static void op_pd(struct fuzz *f)
{
	int i = below(f, NPD);

	/* Keep PDs mostly alive: everything else needs one. */
	if (f->pd[i] && below(f, 4))
		return;
	if (f->pd[i]) {
		/* In use: ibv_dealloc_pd must refuse, not free. */
		if (!result(f, ibv_dealloc_pd(f->pd[i])))
			f->pd[i] = NULL;
	} else {
		f->pd[i] = ibv_alloc_pd(f->ctx);
		result(f, f->pd[i] ? 0 : errno);
	}
}

static void op_cq(struct fuzz *f)
{
	int i = below(f, NCQ);

	if (f->cq[i] && below(f, 3))
		return;
	if (f->cq[i]) {
		if (!result(f, ibv_destroy_cq(f->cq[i])))
			f->cq[i] = NULL;
	} else {
		f->cq[i] = ibv_create_cq(f->ctx, below(f, 4) ? 256 : any32(f, 256), NULL, NULL, 0);
		result(f, f->cq[i] ? 0 : errno);
	}
}

static void op_mr(struct fuzz *f)
{
	int i = below(f, NMR);
	struct ibv_pd *pd = some(f, (void **)f->pd, NPD);
	uint64_t addr;
	size_t len;

	if (f->mr[i]) {
		if (!result(f, ibv_dereg_mr(f->mr[i])))
			f->mr[i] = NULL;
		return;
	}
	if (!pd)
		return;
	addr = below(f, 4) ? (uintptr_t)f->buf[below(f, NBUF)] + below(f, BUFLEN / 2)
			   : any_addr(f);
	len = below(f, 6) ? below(f, BUFLEN / 2) + 1 : any32(f, BUFLEN);
	/* Never the guard or unregistered memory with a write right. */
	if (addr >= (uintptr_t)f->guard && addr < (uintptr_t)f->guard + 2 * BUFLEN)
		addr = (uintptr_t)f->buf[0];
	if (addr + len >= (uintptr_t)f->guard && addr < (uintptr_t)f->guard + 2 * BUFLEN)
		len = 1;
	f->mr[i] = ibv_reg_mr(pd, (void *)(uintptr_t)addr, len, any_access(f));
	result(f, f->mr[i] ? 0 : errno);
}

static void op_qp(struct fuzz *f)
{
	int i = below(f, NQP);
	struct ibv_qp_init_attr ia = {};
	struct ibv_pd *pd = some(f, (void **)f->pd, NPD);

	if (f->qp[i] && below(f, 2))
		return;
	if (f->qp[i]) {
		if (!result(f, ibv_destroy_qp(f->qp[i])))
			f->qp[i] = NULL;
		return;
	}
	if (!pd)
		return;
	ia.send_cq = some(f, (void **)f->cq, NCQ);
	ia.recv_cq = some(f, (void **)f->cq, NCQ);
	if (!ia.send_cq || !ia.recv_cq)
		return;
	ia.qp_type = below(f, 5) ? IBV_QPT_RC : (enum ibv_qp_type)below(f, 12);
	ia.sq_sig_all = below(f, 2);
	/* Mostly valid capabilities: a QP must exist to be abused. */
	if (below(f, 4)) {
		ia.cap.max_send_wr = 1 + below(f, 32);
		ia.cap.max_recv_wr = 1 + below(f, 32);
		ia.cap.max_send_sge = 1 + below(f, 8);
		ia.cap.max_recv_sge = 1 + below(f, 8);
	} else {
		ia.cap.max_send_wr = any32(f, 64);
		ia.cap.max_recv_wr = any32(f, 64);
		ia.cap.max_send_sge = any32(f, 8);
		ia.cap.max_recv_sge = any32(f, 8);
		ia.cap.max_inline_data = below(f, 2) ? 0 : any32(f, 64);
	}
	f->qp[i] = ibv_create_qp(pd, &ia);
	result(f, f->qp[i] ? 0 : errno);
}

static void op_modify(struct fuzz *f)
{
	struct ibv_qp *qp = some(f, (void **)f->qp, NQP);
	struct ibv_qp *peer = some(f, (void **)f->qp, NQP);
	struct ibv_qp_attr a = {};
	int mask;

	if (!qp)
		return;
	a.qp_state = below(f, 8);
	a.cur_qp_state = below(f, 8);
	a.qp_access_flags = any_access(f);
	a.pkey_index = below(f, 3);
	a.port_num = below(f, 3);
	a.path_mtu = below(f, 7);
	a.dest_qp_num = peer && below(f, 4) ? peer->qp_num : any32(f, 64);
	a.rq_psn = rnd(f);
	a.sq_psn = rnd(f);
	a.timeout = below(f, 40);
	a.retry_cnt = below(f, 8);
	a.rnr_retry = below(f, 8);
	a.min_rnr_timer = below(f, 32);
	a.max_rd_atomic = below(f, 20);
	a.max_dest_rd_atomic = below(f, 20);
	a.ah_attr.port_num = below(f, 3);
	a.ah_attr.is_global = below(f, 4) != 0;
	a.ah_attr.dlid = below(f, 3);
	a.ah_attr.grh.sgid_index = below(f, 4) ? 0 : below(f, 64);
	a.ah_attr.grh.hop_limit = 1;
	if (below(f, 4))
		ibv_query_gid(f->ctx, 1, 0, &a.ah_attr.grh.dgid);
	else
		for (int i = 0; i < 16; i++)
			a.ah_attr.grh.dgid.raw[i] = rnd(f);
	a.cap.max_send_wr = any32(f, 64);
	a.cap.max_recv_wr = any32(f, 64);
	mask = below(f, 3) ? (int)(rnd(f) & 0x1fffff) | IBV_QP_STATE : (int)rnd(f);
	result(f, ibv_modify_qp(qp, &a, mask));
}

/*
 * Connects @qp to @peer the right way (RESET, INIT, RTR, RTS), so that
 * requests reach the data path and not only the argument checks.
 */
static void op_connect(struct fuzz *f)
{
	struct ibv_qp *qp = some(f, (void **)f->qp, NQP);
	struct ibv_qp *peer = some(f, (void **)f->qp, NQP);
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_RESET };

	if (!qp || !peer)
		return;
	result(f, ibv_modify_qp(qp, &a, IBV_QP_STATE));
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_INIT, .port_num = 1,
				  .qp_access_flags = below(f, 8) << 1 | 1 };
	if (result(f, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX |
					    IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)))
		return;
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTR, .path_mtu = IBV_MTU_1024,
				  .dest_qp_num = peer->qp_num, .max_dest_rd_atomic = 4,
				  .min_rnr_timer = 1 };
	a.ah_attr.port_num = 1;
	if (f->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.hop_limit = 1;
		ibv_query_gid(f->ctx, 1, 0, &a.ah_attr.grh.dgid);
	} else {
		a.ah_attr.dlid = f->port.lid;
	}
	if (result(f, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
					    IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
					    IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)))
		return;
	/* rnr_retry below 7: a SEND nobody receives gives up. */
	a = (struct ibv_qp_attr){ .qp_state = IBV_QPS_RTS, .timeout = 14, .retry_cnt = 1,
				  .rnr_retry = below(f, 3), .max_rd_atomic = 4 };
	result(f, ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
					IBV_QP_MAX_QP_RD_ATOMIC));
}

/* A range of a registered region: often right, sometimes just over. */
static void in_region(struct fuzz *f, uint64_t *addr, uint32_t *len)
{
	struct ibv_mr *mr = some(f, (void **)f->mr, NMR);
	uint64_t off;

	if (!mr || !mr->length)
		return;
	off = below(f, mr->length);
	*addr = (uintptr_t)mr->addr + off;
	*len = below(f, mr->length - off + (below(f, 8) == 0 ? 2 : 1));
}

static void fill_sges(struct fuzz *f, struct ibv_sge *sge, int n)
{
	for (int i = 0; i < n; i++) {
		sge[i].addr = any_addr(f);
		sge[i].length = below(f, 4) ? below(f, 8192) : any32(f, BUFLEN);
		sge[i].lkey = any_key(f);
		if (below(f, 2)) {
			struct ibv_mr *mr = some(f, (void **)f->mr, NMR);

			in_region(f, &sge[i].addr, &sge[i].length);
			if (mr)
				sge[i].lkey = mr->lkey;
		}
		/* The guard's own key: readable, never writable. */
		if (below(f, 8) == 0) {
			struct ibv_mr *g = some(f, (void **)f->guard_mr, NPD);

			if (g) {
				sge[i].addr = (uintptr_t)g->addr + below(f, BUFLEN / 2);
				sge[i].length = below(f, BUFLEN / 2);
				sge[i].lkey = g->lkey;
			}
		}
	}
}

static void op_send(struct fuzz *f)
{
	struct ibv_qp *qp = some(f, (void **)f->qp, NQP);
	struct ibv_sge sge[10];
	struct ibv_send_wr wr = {}, *bad = NULL;

	if (!qp)
		return;
	wr.num_sge = below(f, 3) ? below(f, 3) + 1 : below(f, 11);
	wr.sg_list = sge;
	fill_sges(f, sge, wr.num_sge);
	wr.wr_id = rnd(f);
	wr.opcode = below(f, 4) ? (enum ibv_wr_opcode)below(f, 5) :
				  (enum ibv_wr_opcode)below(f, 16);
	wr.send_flags = below(f, 3) ? IBV_SEND_SIGNALED : (unsigned int)below(f, 64);
	wr.imm_data = rnd(f);
	wr.wr.rdma.remote_addr = any_addr(f);
	wr.wr.rdma.rkey = any_key(f);
	if (below(f, 2)) {
		struct ibv_mr *mr = some(f, (void **)f->mr, NMR);
		uint32_t len;

		in_region(f, &wr.wr.rdma.remote_addr, &len);
		if (mr)
			wr.wr.rdma.rkey = mr->rkey;
	}
	if (qp->qp_type == IBV_QPT_UD) {
		wr.wr.ud.ah = below(f, 4) ? f->ah : NULL;
		wr.wr.ud.remote_qpn = below(f, 2) ? rnd(f) & 0xffffff : 1 + below(f, 300);
		wr.wr.ud.remote_qkey = below(f, 2) ? (uint32_t)rnd(f) : 0x11111111;
	}
	result(f, ibv_post_send(qp, &wr, &bad));
}

static void op_recv(struct fuzz *f)
{
	struct ibv_qp *qp = some(f, (void **)f->qp, NQP);
	struct ibv_sge sge[10];
	struct ibv_recv_wr wr = {}, *bad = NULL;

	if (!qp)
		return;
	wr.num_sge = below(f, 11);
	wr.sg_list = sge;
	fill_sges(f, sge, wr.num_sge);
	wr.wr_id = rnd(f);
	result(f, ibv_post_recv(qp, &wr, &bad));
}

/* Polls every CQ dry; returns 0 if every completion is well formed. */
/*
 * Writes a random value into the producer or consumer index (bytes 0 and
 * 64) of a ring the device mapped into this process, if there is one.
 * The completions the provider then reads are either ones the kernel wrote
 * or zeroes, so they stay well formed; the kernel must not write past the
 * ring whatever it reads there.
 */
static void op_scribble(struct fuzz *f)
{
	unsigned long start[16], end;
	char line[512];
	int n = 0;
	FILE *maps = fopen("/proc/self/maps", "r");

	if (!maps)
		return;
	while (n < 16 && fgets(line, sizeof(line), maps))
		if (strstr(line, "/dev/infiniband/uverbs") &&
		    sscanf(line, "%lx-%lx", &start[n], &end) == 2)
			n++;
	fclose(maps);
	if (!n)
		return;
	f->scribbles++;
	*(volatile uint32_t *)(start[below(f, n)] + 64 * below(f, 2)) = any32(f, below(f, 600));
}

static int poll_all(struct fuzz *f)
{
	struct ibv_wc wc[16];

	for (int i = 0; i < NCQ; i++) {
		int n;

		if (!f->cq[i])
			continue;
		while ((n = ibv_poll_cq(f->cq[i], 16, wc)) > 0) {
			for (int k = 0; k < n; k++) {
				f->wcs++;
				if (wc[k].status > IBV_WC_TM_RNDV_INCOMPLETE)
					return -1;
				if (wc[k].status)
					f->wc_errors++;
			}
		}
		if (n < 0)
			return -1;
	}
	return 0;
}

static int untouched(const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != CANARY)
			return 0;
	return 1;
}

TEST(hostile_verbs_leave_guarded_memory_alone)
{
	const char *name = getenv("PLX_RDMA_DEV") ?: "plx_rdma0";
	const char *ops_env = getenv("PLX_FUZZ_OPS");
	const char *seed_env = getenv("PLX_FUZZ_SEED");
	unsigned long ops = ops_env ? strtoul(ops_env, NULL, 0) : 20000;
	uint64_t seed = seed_env ? strtoull(seed_env, NULL, 0) :
				   (uint64_t)time(NULL) * 2654435761ULL;
	struct fuzz *f = calloc(1, sizeof(*f));
	unsigned char *pages;

	ASSERT_NE(NULL, f);
	f->rng = seed | 1;
	printf("# seed %llu, %lu operations on %s\n", (unsigned long long)seed, ops, name);
	f->ctx = open_named(name);
	ASSERT_NE(NULL, f->ctx) TH_LOG("no device %s", name);
	ASSERT_EQ(0, ibv_query_port(f->ctx, 1, &f->port));
	f->ah_pd = ibv_alloc_pd(f->ctx);
	ASSERT_NE(NULL, f->ah_pd);
	if (f->port.link_layer == IBV_LINK_LAYER_ETHERNET) {
		struct ibv_ah_attr aa = { .is_global = 1, .port_num = 1,
					  .grh = { .hop_limit = 1 } };

		/* The port's last GID, a RoCEv2 one where there are several. */
		for (int i = 0; i < f->port.gid_tbl_len; i++) {
			union ibv_gid g;

			if (!ibv_query_gid(f->ctx, 1, i, &g) && g.global.interface_id) {
				aa.grh.dgid = g;
				aa.grh.sgid_index = i;
			}
		}
		f->ah = ibv_create_ah(f->ah_pd, &aa);
	}
	/* Buffers, then the guard and never-registered memory after them. */
	pages = mmap(NULL, (NBUF + 2) * BUFLEN, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT_NE(MAP_FAILED, pages);
	for (int i = 0; i < NBUF; i++) {
		f->buf[i] = pages + i * BUFLEN;
		memset(f->buf[i], i + 1, BUFLEN);
	}
	f->guard = pages + NBUF * BUFLEN;
	f->unregistered = f->guard + BUFLEN;
	memset(f->guard, CANARY, 2 * BUFLEN);

	for (unsigned long n = 0; n < ops; n++) {
		switch (below(f, 27)) {
		case 26: op_scribble(f); break;
		case 24: case 25: op_connect(f); break;
		case 0: op_pd(f); break;
		case 1: op_cq(f); break;
		case 2: case 3: op_mr(f); break;
		case 4: case 5: op_qp(f); break;
		case 6: case 7: case 8: case 9: op_modify(f); break;
		case 10: case 11: case 12: case 13: case 14: op_send(f); break;
		case 15: case 16: case 17: op_recv(f); break;
		case 18: {
			struct ibv_cq *cq = some(f, (void **)f->cq, NCQ);

			if (cq)
				result(f, ibv_req_notify_cq(cq, below(f, 2)));
			break;
		}
		case 19: {
			/* The guard, readable but never writable, in a PD. */
			int i = below(f, NPD);

			if (f->pd[i] && !f->guard_mr[i]) {
				f->guard_mr[i] = ibv_reg_mr(f->pd[i], f->guard, BUFLEN, 0);
				result(f, f->guard_mr[i] ? 0 : errno);
			} else if (f->guard_mr[i] && !below(f, 4)) {
				if (!result(f, ibv_dereg_mr(f->guard_mr[i])))
					f->guard_mr[i] = NULL;
			}
			break;
		}
		default:
			ASSERT_EQ(0, poll_all(f)) TH_LOG("malformed completion");
			break;
		}
	}
	/* Give queued requests a moment, then tear down in any order. */
	usleep(100 * 1000);
	ASSERT_EQ(0, poll_all(f));
	for (int i = 0; i < NQP; i++)
		if (f->qp[i])
			ASSERT_EQ(0, ibv_destroy_qp(f->qp[i]));
	ASSERT_EQ(0, poll_all(f));
	for (int i = 0; i < NMR; i++)
		if (f->mr[i])
			ASSERT_EQ(0, ibv_dereg_mr(f->mr[i]));
	for (int i = 0; i < NPD; i++)
		if (f->guard_mr[i])
			ASSERT_EQ(0, ibv_dereg_mr(f->guard_mr[i]));
	for (int i = 0; i < NCQ; i++)
		if (f->cq[i])
			ASSERT_EQ(0, ibv_destroy_cq(f->cq[i]));
	for (int i = 0; i < NPD; i++)
		if (f->pd[i])
			ASSERT_EQ(0, ibv_dealloc_pd(f->pd[i]));
	if (f->ah)
		ASSERT_EQ(0, ibv_destroy_ah(f->ah));
	ASSERT_EQ(0, ibv_dealloc_pd(f->ah_pd));
	printf("# %lu verbs called, %lu refused; %lu completions, %lu with an error status;"
	       " %lu ring indexes scribbled on\n",
	       f->calls, f->errors, f->wcs, f->wc_errors, f->scribbles);
	EXPECT_TRUE(untouched(f->guard, BUFLEN)) TH_LOG("the guard region was written");
	EXPECT_TRUE(untouched(f->unregistered, BUFLEN)) TH_LOG("unregistered memory was written");
	/* The fuzzer reached the device, not only argument checks. */
	EXPECT_GT(f->wcs, 0);
	/* And the device's rings: a CQ was mapped when it scribbled. */
	EXPECT_GT(f->scribbles, 0);
	EXPECT_EQ(0, ibv_close_device(f->ctx));
	munmap(pages, (NBUF + 2) * BUFLEN);
	free(f);
}

TEST_HARNESS_MAIN
