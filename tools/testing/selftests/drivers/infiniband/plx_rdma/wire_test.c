// SPDX-License-Identifier: GPL-2.0
/*
 * RoCEv2 packets from outside: a device's receive path against datagrams
 * built here, independently of any device (own BTH, own ICRC), and sent
 * through a raw IPv4 socket to the port's address.
 *
 *   WIRE_DEV=plx_rdma0 ./wire_test      (plx_rdma loaded with wire_local=1)
 *   WIRE_DEV=rxe0 WIRE_NETNS=/proc/1/ns/net ./wire_test   (in rxe0's namespace)
 *
 * Two RC QPs of the device are connected to each other through the port's
 * IPv4 RoCE v2 GID, so that each one's peer is "on the wire" at that
 * address.  A well-formed SEND to QP b, from that address, with the PSN b
 * expects, must be delivered (the positive control: this file and the
 * device agree on the format and the ICRC); every hostile variant must be
 * dropped without a completion, a byte written or the QP disturbed; a
 * request naming memory it may not touch (unknown R_Key, a range past the
 * region, a length its payload does not match, a packet longer than the
 * path MTU) writes nothing and is NAKed, after which b is in ERR, as
 * rxe's responder leaves it.
 *
 * The same cases run on plx_rdma and on rdma_rxe: rxe is the reference for
 * every outcome.  On plx_rdma, each drop and NAK must also be counted under
 * its reason (the port's hw_counters, `rdma statistic`); rxe counts other
 * things, and those checks are left out for a device without the counters.
 * rxe takes packets only from its netdev, never from loopback: WIRE_NETNS
 * names the network namespace to send them from (the packets carry the
 * device's own address as source, so that namespace's end of the link
 * needs accept_local).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

#include "kselftest_harness.h"

#define BUF 4096
#define CANARY 0x5a
#define PSN0 1000
#define ROCE_PORT 4791

/* The device under test: WIRE_DEV, or PLX_RDMA_DEV (the older name). */
static const char *dev_name(void)
{
	const char *name = getenv("WIRE_DEV");

	return name ? name : getenv("PLX_RDMA_DEV");
}

/*
 * A counter of the device's port, as `rdma statistic` shows it; -1 if the
 * device has no counter of that name.  ib_core keeps the values it read
 * for 10 ms (the hw_counters' lifespan): the read waits that out first.
 */
static long long stat_of(const char *name)
{
	char path[256], line[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/1/hw_counters/%s",
		 dev_name(), name);
	usleep(15000);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		v = atoll(line);
	fclose(f);
	return v;
}

/* zlib's CRC-32, bit by bit: slow and obviously the textbook one. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0xedb88320 : crc >> 1;
	}
	return crc;
}

static uint16_t ip_checksum(const uint8_t *h, size_t len)
{
	uint32_t sum = 0;

	for (size_t i = 0; i + 1 < len; i += 2)
		sum += (h[i] << 8) | h[i + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return ~sum;
}

struct pkt {
	uint32_t saddr, daddr;		/* network order */
	uint8_t opcode;
	uint32_t dest_qp, psn;
	int ack_req;
	const uint8_t *ext;		/* extended headers, or NULL */
	size_t ext_len;
	const uint8_t *payload;
	size_t len;
	int bad_icrc;			/* flip one bit of the ICRC */
	int truncate_to;		/* UDP payload bytes, if not 0 */
};

/*
 * The IPv4 datagram of @p into @out (IPv4, UDP to 4791 with checksum 0,
 * BTH, extended headers, payload, pad, ICRC as the IBA computes it for
 * RoCEv2); returns its length.
 */
static size_t build(const struct pkt *p, uint8_t *out)
{
	size_t pad = (4 - p->len % 4) % 4;
	size_t tlen = 12 + p->ext_len + p->len + pad + 4;
	size_t total = 20 + 8 + tlen;
	uint8_t *ip = out, *udp = out + 20, *bth = out + 28, *icrc;
	uint8_t masked[28 + 12];
	uint32_t crc;

	memset(out, 0, total);
	ip[0] = 0x45;
	ip[2] = total >> 8;
	ip[3] = total;
	ip[4] = 0x12;			/* id */
	ip[5] = 0x34;
	ip[6] = 0x40;			/* DF */
	ip[8] = 64;
	ip[9] = IPPROTO_UDP;
	memcpy(ip + 12, &p->saddr, 4);
	memcpy(ip + 16, &p->daddr, 4);
	udp[0] = 0xc0;
	udp[1] = 0x01;
	udp[2] = ROCE_PORT >> 8;
	udp[3] = ROCE_PORT & 0xff;
	udp[4] = (8 + tlen) >> 8;
	udp[5] = 8 + tlen;
	bth[0] = p->opcode;
	bth[1] = pad << 4;
	bth[2] = bth[3] = 0xff;		/* default P_Key */
	bth[5] = p->dest_qp >> 16;
	bth[6] = p->dest_qp >> 8;
	bth[7] = p->dest_qp;
	bth[8] = p->ack_req ? 0x80 : 0;
	bth[9] = p->psn >> 16;
	bth[10] = p->psn >> 8;
	bth[11] = p->psn;
	if (p->ext_len)
		memcpy(bth + 12, p->ext, p->ext_len);
	memcpy(bth + 12 + p->ext_len, p->payload, p->len);
	/* The ICRC: 8 bytes of ones, the headers with the variant fields as ones. */
	memcpy(masked, out, sizeof(masked));
	masked[1] = 0xff;			/* TOS */
	masked[8] = 0xff;			/* TTL */
	masked[10] = masked[11] = 0xff;		/* IP checksum */
	masked[26] = masked[27] = 0xff;		/* UDP checksum */
	masked[28 + 4] = 0xff;			/* BTH F/B/resv6a */
	crc = crc32_update(0xffffffff, (const uint8_t *)"\xff\xff\xff\xff\xff\xff\xff\xff", 8);
	crc = crc32_update(crc, masked, sizeof(masked));
	crc = crc32_update(crc, bth + 12, tlen - 12 - 4);
	crc = ~crc;
	if (p->bad_icrc)
		crc ^= 0x100;
	icrc = out + total - 4;
	icrc[0] = crc;
	icrc[1] = crc >> 8;
	icrc[2] = crc >> 16;
	icrc[3] = crc >> 24;
	if (p->truncate_to) {
		total = 28 + p->truncate_to;
		ip[2] = total >> 8;
		ip[3] = total;
		udp[4] = (8 + p->truncate_to) >> 8;
		udp[5] = 8 + p->truncate_to;
	}
	ip[10] = ip[11] = 0;
	{
		uint16_t c = ip_checksum(ip, 20);

		ip[10] = c >> 8;
		ip[11] = c;
	}
	return total;
}

/*
 * A raw IPv4 socket in the namespace WIRE_NETNS names, or in this one.  A
 * socket stays in the namespace it was made in: the thread goes back.
 */
static int raw_socket(void)
{
	const char *ns = getenv("WIRE_NETNS");
	int here, there, s = -1, err = 0;

	if (!ns)
		return socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
	here = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	there = open(ns, O_RDONLY | O_CLOEXEC);
	if (here >= 0 && there >= 0 && !setns(there, CLONE_NEWNET)) {
		s = socket(AF_INET, SOCK_RAW, IPPROTO_RAW);
		err = errno;
		if (setns(here, CLONE_NEWNET)) {
			err = errno;
			if (s >= 0)
				close(s);
			s = -1;
		}
	} else {
		err = errno;
	}
	if (here >= 0)
		close(here);
	if (there >= 0)
		close(there);
	errno = err;
	return s;
}

static int inject(const struct pkt *p)
{
	uint8_t buf[4096];
	size_t len = build(p, buf);
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = p->daddr };
	int s = raw_socket();
	ssize_t n;

	if (s < 0)
		return -errno;
	n = sendto(s, buf, len, 0, (struct sockaddr *)&to, sizeof(to));
	close(s);
	return n == (ssize_t)len ? 0 : -errno;
}

FIXTURE(wire) {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_qp *a, *b;
	struct ibv_mr *mr;
	uint8_t *buf;
	union ibv_gid gid;
	int gid_index;
	uint32_t addr;		/* the GID's IPv4 address, network order */
};

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

static int connect_qp_with(FIXTURE_DATA(wire) *self, struct ibv_qp *qp, uint32_t dest,
			   int timeout, int retry_cnt)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = dest;
	a.rq_psn = PSN0;
	a.min_rnr_timer = 1;
	a.max_dest_rd_atomic = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = self->gid;
	a.ah_attr.grh.sgid_index = self->gid_index;
	a.ah_attr.grh.hop_limit = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return errno;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = timeout;
	a.retry_cnt = retry_cnt;
	a.rnr_retry = 7;
	a.sq_psn = PSN0;
	a.max_rd_atomic = 1;	/* one READ in flight: rxe sends none with 0 */
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC))
		return errno;
	return 0;
}

static int connect_qp(FIXTURE_DATA(wire) *self, struct ibv_qp *qp, uint32_t dest)
{
	return connect_qp_with(self, qp, dest, 14, 7);
}

FIXTURE_SETUP(wire)
{
	const char *name = dev_name();
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 4, .max_recv_wr = 4,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	struct ibv_port_attr port;
	struct ibv_recv_wr *bad, wr = { .wr_id = 7, .num_sge = 1 };
	struct ibv_sge sge;

	if (!name)
		SKIP(return, "WIRE_DEV names no device");
	self->ctx = open_named(name);
	ASSERT_NE(NULL, self->ctx);
	ASSERT_EQ(0, ibv_query_port(self->ctx, 1, &port));
	self->gid_index = -1;
	for (int i = 0; i < port.gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		static const uint8_t v4map[12] = { [10] = 0xff, [11] = 0xff };

		if (ibv_query_gid_ex(self->ctx, 1, i, &e, 0) ||
		    e.gid_type != IBV_GID_TYPE_ROCE_V2 ||
		    memcmp(e.gid.raw, v4map, sizeof(v4map)))
			continue;
		self->gid = e.gid;
		self->gid_index = i;
		memcpy(&self->addr, e.gid.raw + 12, 4);
		break;
	}
	ASSERT_LE(0, self->gid_index) TH_LOG("no IPv4 RoCE v2 GID on %s", name);
	self->pd = ibv_alloc_pd(self->ctx);
	self->cq = ibv_create_cq(self->ctx, 16, NULL, NULL, 0);
	ASSERT_NE(NULL, self->pd);
	ASSERT_NE(NULL, self->cq);
	ia.send_cq = ia.recv_cq = self->cq;
	self->a = ibv_create_qp(self->pd, &ia);
	self->b = ibv_create_qp(self->pd, &ia);
	ASSERT_NE(NULL, self->a);
	ASSERT_NE(NULL, self->b);
	self->buf = aligned_alloc(4096, BUF);
	ASSERT_NE(NULL, self->buf);
	memset(self->buf, CANARY, BUF);
	self->mr = ibv_reg_mr(self->pd, self->buf, BUF,
			      IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
			      IBV_ACCESS_REMOTE_READ);
	ASSERT_NE(NULL, self->mr);
	ASSERT_EQ(0, connect_qp(self, self->a, self->b->qp_num));
	ASSERT_EQ(0, connect_qp(self, self->b, self->a->qp_num));
	sge = (struct ibv_sge){ .addr = (uintptr_t)self->buf, .length = BUF,
				.lkey = self->mr->lkey };
	wr.sg_list = &sge;
	ASSERT_EQ(0, ibv_post_recv(self->b, &wr, &bad));
}

FIXTURE_TEARDOWN(wire)
{
	if (self->a)
		ibv_destroy_qp(self->a);
	if (self->b)
		ibv_destroy_qp(self->b);
	if (self->mr)
		ibv_dereg_mr(self->mr);
	if (self->cq)
		ibv_destroy_cq(self->cq);
	if (self->pd)
		ibv_dealloc_pd(self->pd);
	if (self->ctx)
		ibv_close_device(self->ctx);
	free(self->buf);
}

static const uint8_t hello[] = "hello over the wire";

/* A SEND ONLY to b from its peer's address with the PSN it expects. */
static struct pkt good_send(FIXTURE_DATA(wire) *self)
{
	return (struct pkt){
		.saddr = self->addr, .daddr = self->addr,
		.opcode = 0x04, .dest_qp = self->b->qp_num, .psn = PSN0,
		.ack_req = 1, .payload = hello, .len = sizeof(hello),
	};
}

/* Waits up to 2 s for a completion; 1 with *wc, 0 without. */
static int wait_wc(struct ibv_cq *cq, struct ibv_wc *wc)
{
	for (int i = 0; i < 200; i++) {
		int n = ibv_poll_cq(cq, 1, wc);

		if (n)
			return n;
		usleep(10000);
	}
	return 0;
}

/* Waits up to 2 s for counter @name to go past @before. */
static long long wait_stat(const char *name, long long before)
{
	long long v = before;

	for (int i = 0; i < 200 && v <= before; i++) {
		usleep(10000);
		v = stat_of(name);
	}
	return v;
}

static int untouched(const uint8_t *buf)
{
	for (int i = 0; i < BUF; i++)
		if (buf[i] != CANARY)
			return 0;
	return 1;
}

TEST_F(wire, injected_send_is_delivered)
{
	struct pkt p = good_send(self);
	struct ibv_wc wc;

	ASSERT_EQ(0, inject(&p));
	ASSERT_EQ(1, wait_wc(self->cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(IBV_WC_RECV, wc.opcode);
	EXPECT_EQ(7, wc.wr_id);
	EXPECT_EQ(sizeof(hello), wc.byte_len);
	EXPECT_EQ(0, memcmp(self->buf, hello, sizeof(hello)));
}

/* The payload of the hostile variants: never what b's receive may hold. */
static const uint8_t evil[] = "EVIL: this must never land";

/* Waits up to 2 s for @qp to be in ERR; whether it is. */
static int wait_err(struct ibv_qp *qp)
{
	struct ibv_qp_attr a;
	struct ibv_qp_init_attr ia;

	for (int i = 0; i < 200; i++) {
		if (!ibv_query_qp(qp, &a, IBV_QP_STATE, &ia) && a.qp_state == IBV_QPS_ERR)
			return 1;
		usleep(10000);
	}
	return 0;
}

/*
 * Packet @p (given the hostile payload) is dropped: b still takes the good
 * SEND sent after it, and that SEND is the only thing b completes or
 * writes.  The good one travels behind the bad one, so its completion
 * also says the bad one was seen.  On plx_rdma, counter @reason grows.
 */
static void dropped(struct __test_metadata *_metadata, FIXTURE_DATA(wire) *self,
		    const struct pkt *p, const char *reason)
{
	long long before = stat_of(reason);
	struct pkt bad = *p, good = good_send(self);
	struct ibv_wc wc;

	bad.payload = evil;
	bad.len = sizeof(evil);
	ASSERT_EQ(0, inject(&bad));
	if (before >= 0)
		EXPECT_LT(before, wait_stat(reason, before)) TH_LOG("%s did not count", reason);
	ASSERT_EQ(0, inject(&good));
	ASSERT_EQ(1, wait_wc(self->cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(sizeof(hello), wc.byte_len);
	EXPECT_EQ(0, memcmp(self->buf, hello, sizeof(hello)));
	for (int i = sizeof(hello); i < BUF; i++)
		if (self->buf[i] != CANARY) {
			EXPECT_EQ(CANARY, self->buf[i]) TH_LOG("byte %d written", i);
			break;
		}
	usleep(50000);
	EXPECT_EQ(0, ibv_poll_cq(self->cq, 1, &wc));
}

TEST_F(wire, bad_icrc_dropped)
{
	struct pkt p = good_send(self);

	p.bad_icrc = 1;
	dropped(_metadata, self, &p, "rx_drop_bad_icrc");
}

TEST_F(wire, unknown_qp_dropped)
{
	struct pkt p = good_send(self);

	p.dest_qp = 0xabcde;
	dropped(_metadata, self, &p, "rx_drop_no_qp");
}

TEST_F(wire, rc_to_qp1_dropped)
{
	struct pkt p = good_send(self);

	p.dest_qp = 1;
	dropped(_metadata, self, &p, "rx_drop_qp_type");
}

TEST_F(wire, wrong_source_dropped)
{
	struct pkt p = good_send(self);

	/* Another host of the subnet: b is connected to its own address. */
	p.saddr = self->addr ^ htonl(0x7f);
	dropped(_metadata, self, &p, "rx_drop_wrong_source");
}

TEST_F(wire, truncated_header_dropped)
{
	struct pkt p = good_send(self);

	p.truncate_to = 8;
	dropped(_metadata, self, &p, "rx_drop_bad_header");
}

TEST_F(wire, truncated_reth_dropped)
{
	uint8_t reth[16] = { 0 };
	struct pkt p = good_send(self);

	/* An RDMA WRITE ONLY cut inside its RETH. */
	p.opcode = 0x0a;
	p.ext = reth;
	p.ext_len = sizeof(reth);
	p.truncate_to = 12 + 8;
	dropped(_metadata, self, &p, "rx_drop_bad_header");
}

TEST_F(wire, unknown_opcode_dropped)
{
	struct pkt p = good_send(self);

	p.opcode = 0x1f;	/* reserved RC opcode */
	dropped(_metadata, self, &p, "rx_drop_bad_header");
}

TEST_F(wire, psn_ahead_dropped_and_naked)
{
	struct pkt p = good_send(self);
	long long naks = stat_of("naks_sent");

	p.psn = PSN0 + 5;
	dropped(_metadata, self, &p, "rx_drop_psn_ahead");
	if (naks >= 0)
		EXPECT_LT(naks, stat_of("naks_sent"));
}

/*
 * A SEND delivered, then the same packet again: answered, not executed (it
 * does not take the second receive); the next PSN takes that receive.
 */
TEST_F(wire, duplicate_not_executed_again)
{
	static const uint8_t next[] = "the next one";
	struct pkt p = good_send(self), q = good_send(self);
	struct ibv_recv_wr *bad, wr = { .wr_id = 8, .num_sge = 1 };
	struct ibv_sge sge = { .addr = (uintptr_t)self->buf + 2048, .length = 64,
			       .lkey = self->mr->lkey };
	long long dups = stat_of("rx_duplicates");
	struct ibv_wc wc;

	wr.sg_list = &sge;
	ASSERT_EQ(0, ibv_post_recv(self->b, &wr, &bad));
	ASSERT_EQ(0, inject(&p));
	ASSERT_EQ(1, wait_wc(self->cq, &wc));
	EXPECT_EQ(7, wc.wr_id);
	ASSERT_EQ(0, inject(&p));
	if (dups >= 0)
		EXPECT_LT(dups, wait_stat("rx_duplicates", dups));
	q.psn = PSN0 + 1;
	q.payload = next;
	q.len = sizeof(next);
	ASSERT_EQ(0, inject(&q));
	ASSERT_EQ(1, wait_wc(self->cq, &wc));
	EXPECT_EQ(8, wc.wr_id);
	EXPECT_EQ(sizeof(next), wc.byte_len);
	EXPECT_EQ(0, memcmp(self->buf + 2048, next, sizeof(next)));
	EXPECT_EQ(0, ibv_poll_cq(self->cq, 1, &wc));
}

/*
 * Request @p must be NAKed: nothing is written, b goes to ERR (the
 * responder's fatal errors, as rxe leaves it), and on plx_rdma the NAK is
 * counted.
 */
static void naked(struct __test_metadata *_metadata, FIXTURE_DATA(wire) *self,
		  const struct pkt *p)
{
	long long naks = stat_of("naks_sent");

	ASSERT_EQ(0, inject(p));
	EXPECT_TRUE(wait_err(self->b));
	if (naks >= 0)
		EXPECT_LT(naks, wait_stat("naks_sent", naks));
	EXPECT_TRUE(untouched(self->buf));
}

/* An RETH of @va, @rkey and DMA length @len into @reth. */
static void put_reth(uint8_t reth[16], uint64_t va, uint32_t rkey, uint32_t len)
{
	for (int i = 0; i < 8; i++)
		reth[i] = va >> (56 - 8 * i);
	for (int i = 0; i < 4; i++) {
		reth[8 + i] = rkey >> (24 - 8 * i);
		reth[12 + i] = len >> (24 - 8 * i);
	}
}

/*
 * An RDMA WRITE ONLY to b from its peer: @len bytes at offset @at of b's
 * region by @rkey, carrying the hostile payload of @paylen bytes.
 */
static struct pkt write_only(FIXTURE_DATA(wire) *self, uint8_t reth[16], uint64_t at,
			     uint32_t rkey, uint32_t len, size_t paylen)
{
	static uint8_t payload[2048];
	struct pkt p = good_send(self);

	memset(payload, 0xee, sizeof(payload));
	put_reth(reth, (uintptr_t)self->buf + at, rkey, len);
	p.opcode = 0x0a;
	p.ext = reth;
	p.ext_len = 16;
	p.payload = payload;
	p.len = paylen;
	return p;
}

TEST_F(wire, write_with_unknown_rkey_naked)
{
	uint8_t reth[16];
	struct pkt p = write_only(self, reth, 0, self->mr->rkey ^ 0x5500, 20, 20);

	naked(_metadata, self, &p);
}

TEST_F(wire, write_past_region_end_naked)
{
	uint8_t reth[16];
	struct pkt p = write_only(self, reth, BUF - 8, self->mr->rkey, 20, 20);

	naked(_metadata, self, &p);
}

TEST_F(wire, write_length_over_region_naked)
{
	uint8_t reth[16];
	struct pkt p = write_only(self, reth, 0, self->mr->rkey, 1 << 20, 20);

	naked(_metadata, self, &p);
}

TEST_F(wire, write_payload_short_of_length_naked)
{
	uint8_t reth[16];
	struct pkt p = write_only(self, reth, 0, self->mr->rkey, 64, 20);

	naked(_metadata, self, &p);
}

TEST_F(wire, write_payload_over_length_naked)
{
	uint8_t reth[16];
	struct pkt p = write_only(self, reth, 0, self->mr->rkey, 20, 64);

	naked(_metadata, self, &p);
}

TEST_F(wire, write_only_over_path_mtu_naked)
{
	uint8_t reth[16];
	struct pkt p = write_only(self, reth, 0, self->mr->rkey, 1280, 1280);

	naked(_metadata, self, &p);
}

TEST_F(wire, send_only_over_path_mtu_naked)
{
	static uint8_t big[1280];
	struct pkt p = good_send(self);

	memset(big, 0xee, sizeof(big));
	p.payload = big;
	p.len = sizeof(big);
	naked(_metadata, self, &p);
}

TEST_F(wire, read_past_region_end_naked)
{
	uint8_t reth[16];
	struct pkt p = good_send(self);

	put_reth(reth, (uintptr_t)self->buf + BUF - 8, self->mr->rkey, 64);
	p.opcode = 0x0c;	/* RDMA READ REQUEST */
	p.ext = reth;
	p.ext_len = sizeof(reth);
	p.len = 0;
	naked(_metadata, self, &p);
}

/*
 * Verbs across the wire, several packets each (the path MTU is 1024): a
 * SEND and an RDMA WRITE with immediate from a to b, both verified.
 */
TEST_F(wire, send_and_write_with_imm_cross_the_wire)
{
	enum { LEN = 3000, AT = 100 };
	uint8_t *src = aligned_alloc(4096, BUF);
	struct ibv_mr *mr;
	struct ibv_sge sge;
	struct ibv_send_wr *bad, wr = { .num_sge = 1, .send_flags = IBV_SEND_SIGNALED };
	struct ibv_recv_wr *rbad, rwr = { .wr_id = 9, .num_sge = 0 };
	long long tx = stat_of("tx_packets");
	struct ibv_wc wc[2];
	int got = 0, send_ok = 0, recv_ok = 0;

	ASSERT_NE(NULL, src);
	for (int i = 0; i < BUF; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	mr = ibv_reg_mr(self->pd, src, BUF, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr);
	sge = (struct ibv_sge){ .addr = (uintptr_t)src, .length = LEN, .lkey = mr->lkey };
	wr.sg_list = &sge;

	/* SEND: into b's receive posted at setup. */
	wr.wr_id = 1;
	wr.opcode = IBV_WR_SEND;
	ASSERT_EQ(0, ibv_post_send(self->a, &wr, &bad));
	while (got < 2 && wait_wc(self->cq, &wc[got]))
		got++;
	ASSERT_EQ(2, got);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
		send_ok += wc[i].opcode == IBV_WC_SEND && wc[i].wr_id == 1;
		recv_ok += wc[i].opcode == IBV_WC_RECV && wc[i].wr_id == 7 &&
			   wc[i].byte_len == LEN;
	}
	EXPECT_EQ(1, send_ok);
	EXPECT_EQ(1, recv_ok);
	EXPECT_EQ(0, memcmp(self->buf, src, LEN));

	/* RDMA WRITE with immediate: at AT in b's region, a receive consumed. */
	memset(self->buf, CANARY, BUF);
	ASSERT_EQ(0, ibv_post_recv(self->b, &rwr, &rbad));
	wr.wr_id = 2;
	wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
	wr.imm_data = htonl(0x1234abcd);
	wr.wr.rdma.remote_addr = (uintptr_t)self->buf + AT;
	wr.wr.rdma.rkey = self->mr->rkey;
	ASSERT_EQ(0, ibv_post_send(self->a, &wr, &bad));
	got = send_ok = recv_ok = 0;
	while (got < 2 && wait_wc(self->cq, &wc[got]))
		got++;
	ASSERT_EQ(2, got);
	for (int i = 0; i < 2; i++) {
		EXPECT_EQ(IBV_WC_SUCCESS, wc[i].status);
		send_ok += wc[i].opcode == IBV_WC_RDMA_WRITE && wc[i].wr_id == 2;
		recv_ok += wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM &&
			   wc[i].wr_id == 9 && wc[i].byte_len == LEN &&
			   (wc[i].wc_flags & IBV_WC_WITH_IMM) &&
			   wc[i].imm_data == htonl(0x1234abcd);
	}
	EXPECT_EQ(1, send_ok);
	EXPECT_EQ(1, recv_ok);
	EXPECT_EQ(0, memcmp(self->buf + AT, src, LEN));
	EXPECT_EQ(CANARY, self->buf[AT - 1]);
	EXPECT_EQ(CANARY, self->buf[AT + LEN]);
	/* Three packets each way at least, and their acknowledges. */
	if (tx >= 0)
		EXPECT_LE(tx + 8, stat_of("tx_packets"));
	ibv_dereg_mr(mr);
	free(src);
}

/* Posts a signalled SEND of @len bytes of @mr on @qp. */
static int post_send(struct ibv_qp *qp, struct ibv_mr *mr, uint32_t len, uint64_t id)
{
	struct ibv_sge sge = { .addr = (uintptr_t)mr->addr, .length = len, .lkey = mr->lkey };
	struct ibv_send_wr *bad, wr = {
		.wr_id = id, .sg_list = &sge, .num_sge = 1,
		.opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED,
	};

	return ibv_post_send(qp, &wr, &bad);
}

/*
 * A SEND that finds no receive is RNR NAKed, retried (rnr_retry 7), and
 * delivered once a receive is posted.
 */
TEST_F(wire, rnr_nak_then_delivered)
{
	long long rnr_sent = stat_of("rnr_naks_sent"), rnr_got = stat_of("rnr_naks_received");
	struct ibv_recv_wr *rbad, rwr = { .wr_id = 11, .num_sge = 0 };
	struct ibv_wc wc[4];
	int got = 0, ok = 0;

	/* The first takes the receive of the setup, the second finds none. */
	ASSERT_EQ(0, post_send(self->a, self->mr, 8, 1));
	ASSERT_EQ(0, post_send(self->a, self->mr, 0, 2));
	usleep(300000);
	if (rnr_sent >= 0) {
		EXPECT_LT(rnr_sent, stat_of("rnr_naks_sent"));
		EXPECT_LT(rnr_got, stat_of("rnr_naks_received"));
	}
	ASSERT_EQ(0, ibv_post_recv(self->b, &rwr, &rbad));
	while (got < 4 && wait_wc(self->cq, &wc[got]))
		got++;
	ASSERT_EQ(4, got);
	for (int i = 0; i < 4; i++)
		ok += wc[i].status == IBV_WC_SUCCESS;
	EXPECT_EQ(4, ok);
}

/*
 * A peer that never answers (no such QP there): the local ACK timeout
 * fires, retry_cnt times, then the request fails with
 * IBV_WC_RETRY_EXC_ERR and the QP is in ERR.
 */
TEST_F(wire, silent_peer_retry_exceeded)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = self->cq, .recv_cq = self->cq, .qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 2, .max_recv_wr = 2,
			 .max_send_sge = 1, .max_recv_sge = 1 },
	};
	long long timeouts = stat_of("ack_timeouts");
	struct ibv_qp *c = ibv_create_qp(self->pd, &ia);
	struct ibv_wc wc;

	ASSERT_NE(NULL, c);
	/* timeout 12: about 17 ms; two retries. */
	ASSERT_EQ(0, connect_qp_with(self, c, 0xfffff0, 12, 2));
	ASSERT_EQ(0, post_send(c, self->mr, 16, 3));
	ASSERT_EQ(1, wait_wc(self->cq, &wc));
	EXPECT_EQ(3, wc.wr_id);
	EXPECT_EQ(IBV_WC_RETRY_EXC_ERR, wc.status);
	if (timeouts >= 0)
		EXPECT_LE(timeouts + 3, stat_of("ack_timeouts"));
	ibv_destroy_qp(c);
}

/*
 * An RDMA READ across the wire: one request, three responses (the path
 * MTU is 1024), placed in order into a's buffer and verified.
 */
TEST_F(wire, read_crosses_the_wire)
{
	enum { LEN = 3000, AT = 50 };
	uint8_t *dst = aligned_alloc(4096, BUF);
	struct ibv_mr *mr;
	struct ibv_sge sge;
	struct ibv_send_wr *bad, wr = {
		.wr_id = 4, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_wc wc;

	ASSERT_NE(NULL, dst);
	memset(dst, CANARY, BUF);
	for (int i = 0; i < BUF; i++)
		self->buf[i] = (uint8_t)(i * 13 + 1);
	mr = ibv_reg_mr(self->pd, dst, BUF, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr);
	sge = (struct ibv_sge){ .addr = (uintptr_t)dst + AT, .length = LEN, .lkey = mr->lkey };
	wr.sg_list = &sge;
	wr.wr.rdma.remote_addr = (uintptr_t)self->buf + 7;
	wr.wr.rdma.rkey = self->mr->rkey;
	ASSERT_EQ(0, ibv_post_send(self->a, &wr, &bad));
	ASSERT_EQ(1, wait_wc(self->cq, &wc));
	EXPECT_EQ(IBV_WC_SUCCESS, wc.status);
	EXPECT_EQ(IBV_WC_RDMA_READ, wc.opcode);
	EXPECT_EQ(4, wc.wr_id);
	EXPECT_EQ(0, memcmp(dst + AT, self->buf + 7, LEN));
	EXPECT_EQ(CANARY, dst[AT - 1]);
	EXPECT_EQ(CANARY, dst[AT + LEN]);
	ibv_dereg_mr(mr);
	free(dst);
}

/* A READ of a region by an R_Key nobody holds: NAKed, nothing read. */
TEST_F(wire, read_with_unknown_rkey_fails)
{
	uint8_t *dst = aligned_alloc(4096, BUF);
	struct ibv_mr *mr;
	struct ibv_sge sge;
	struct ibv_send_wr *bad, wr = {
		.wr_id = 5, .num_sge = 1, .opcode = IBV_WR_RDMA_READ,
		.send_flags = IBV_SEND_SIGNALED,
	};
	struct ibv_wc wc;
	int got = 0, failed = 0;

	ASSERT_NE(NULL, dst);
	memset(dst, CANARY, BUF);
	mr = ibv_reg_mr(self->pd, dst, BUF, IBV_ACCESS_LOCAL_WRITE);
	ASSERT_NE(NULL, mr);
	sge = (struct ibv_sge){ .addr = (uintptr_t)dst, .length = 100, .lkey = mr->lkey };
	wr.sg_list = &sge;
	wr.wr.rdma.remote_addr = (uintptr_t)self->buf;
	wr.wr.rdma.rkey = self->mr->rkey ^ 0x3300;
	ASSERT_EQ(0, ibv_post_send(self->a, &wr, &bad));
	/* a's failed READ; b's receive flushed as b went to ERR. */
	while (got < 2 && wait_wc(self->cq, &wc)) {
		got++;
		if (wc.wr_id == 5) {
			failed++;
			EXPECT_EQ(IBV_WC_REM_ACCESS_ERR, wc.status);
		}
	}
	EXPECT_EQ(1, failed);
	EXPECT_TRUE(untouched(dst));
	ibv_dereg_mr(mr);
	free(dst);
}

TEST_HARNESS_MAIN
