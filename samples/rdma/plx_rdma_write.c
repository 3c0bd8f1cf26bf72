// SPDX-License-Identifier: GPL-2.0
/*
 * One RDMA WRITE through an RDMA device, spelled out: what RDMA adds on
 * top of a local DMA copy.  Two memory regions are registered (pinned and
 * mapped once, each with its keys), two RC queue pairs are connected to
 * each other, and one WRITE names its source by lkey and its target by
 * rkey and remote address; the completion arrives on a completion queue.
 *
 *   plx_rdma_write [DEVICE [BYTES [GID_INDEX]]]
 *                  (default: plx_rdma0, 1 MiB, GID 0)
 *
 * The GID names the port's address both QPs use: index 0 is the
 * link-local one; the index of an IPv4 address's RoCE v2 GID makes the
 * WRITE a RoCEv2 exchange over UDP where the device sends those (plx_rdma
 * with wire_local=1, rxe).
 *
 * Exit status 0 when the target holds the source's bytes.
 */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <infiniband/verbs.h>

static int die(const char *what)
{
	fprintf(stderr, "plx_rdma_write: %s: %s\n", what, strerror(errno));
	return 1;
}

/*
 * Connects @qp to QP @dest on this port.  The port is RoCE: the address
 * is the GID of index @gid_index, and an InfiniBand port would take the
 * LID instead.
 */
static int connect_qp(struct ibv_qp *qp, uint32_t dest,
		      const struct ibv_port_attr *port, const union ibv_gid *gid,
		      int gid_index)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE,
	};

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
			  IBV_QP_ACCESS_FLAGS))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_4096;
	a.dest_qp_num = dest;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.port_num = 1;
	if (port->link_layer == IBV_LINK_LAYER_ETHERNET) {
		a.ah_attr.is_global = 1;
		a.ah_attr.grh.dgid = *gid;
		a.ah_attr.grh.sgid_index = gid_index;
		a.ah_attr.grh.hop_limit = 1;
	} else {
		a.ah_attr.dlid = port->lid;
	}
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
			  IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		return -1;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	return ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT |
			     IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
			     IBV_QP_MAX_QP_RD_ATOMIC);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "plx_rdma0";
	size_t len = argc > 2 ? strtoul(argv[2], NULL, 0) : 1 << 20;
	int gid_index = argc > 3 ? atoi(argv[3]) : 0;
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx = NULL;
	struct ibv_qp_init_attr ia = {
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = 1, .max_recv_wr = 1, .max_send_sge = 1,
			 .max_recv_sge = 1 },
	};
	struct ibv_port_attr port;
	union ibv_gid gid;
	char gid_text[64];
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_mr *src_mr, *dst_mr;
	struct ibv_qp *a, *b;
	struct ibv_wc wc;
	struct ibv_sge sge;
	struct ibv_send_wr wr = {}, *bad;
	unsigned char *src, *dst;
	int n = 0;

	for (int i = 0; list && list[i]; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		return die(name);
	if (!len || ibv_query_port(ctx, 1, &port) || ibv_query_gid(ctx, 1, gid_index, &gid))
		return die("query_port");
	src = malloc(len);
	dst = calloc(1, len);
	pd = ibv_alloc_pd(ctx);
	cq = ibv_create_cq(ctx, 4, NULL, NULL, 0);
	if (!src || !dst || !pd || !cq)
		return die("allocation");
	for (size_t i = 0; i < len; i++)
		src[i] = (unsigned char)(i * 13 + 1);
	src_mr = ibv_reg_mr(pd, src, len, 0);
	dst_mr = ibv_reg_mr(pd, dst, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!src_mr || !dst_mr)
		return die("ibv_reg_mr");
	ia.send_cq = ia.recv_cq = cq;
	a = ibv_create_qp(pd, &ia);
	b = ibv_create_qp(pd, &ia);
	if (!a || !b)
		return die("ibv_create_qp");
	if (connect_qp(a, b->qp_num, &port, &gid, gid_index) ||
	    connect_qp(b, a->qp_num, &port, &gid, gid_index))
		return die("ibv_modify_qp");
	snprintf(gid_text, sizeof(gid_text), "%016llx:%016llx",
		 (unsigned long long)be64toh(gid.global.subnet_prefix),
		 (unsigned long long)be64toh(gid.global.interface_id));
	printf("device %s, port 1 GID[%d] %s, protection domain %p\n", name, gid_index,
	       gid_text, (void *)pd);
	printf("source MR      %p..+%zu  lkey 0x%08x (no remote access: rkey 0x%08x)\n",
	       (void *)src, len, src_mr->lkey, src_mr->rkey);
	printf("target MR      %p..+%zu  lkey 0x%08x  rkey 0x%08x (remote write)\n",
	       (void *)dst, len, dst_mr->lkey, dst_mr->rkey);
	printf("queue pairs    QP %u -> QP %u (RC, RTS)\n", a->qp_num, b->qp_num);
	sge = (struct ibv_sge){ .addr = (uintptr_t)src, .length = len, .lkey = src_mr->lkey };
	wr.wr_id = 1;
	wr.sg_list = &sge;
	wr.num_sge = 1;
	wr.opcode = IBV_WR_RDMA_WRITE;
	wr.send_flags = IBV_SEND_SIGNALED;
	wr.wr.rdma.remote_addr = (uintptr_t)dst;
	wr.wr.rdma.rkey = dst_mr->rkey;
	printf("RDMA WRITE     %zu bytes: lkey 0x%08x -> remote_addr %p rkey 0x%08x\n",
	       len, src_mr->lkey, (void *)dst, dst_mr->rkey);
	if (ibv_post_send(a, &wr, &bad))
		return die("ibv_post_send");
	for (int tries = 0; !n && tries < 100000; tries++) {
		n = ibv_poll_cq(cq, 1, &wc);
		if (!n)
			usleep(100);
	}
	if (n != 1)
		return die("no completion");
	printf("completion     wr_id %llu status %s opcode %d byte_len %u on QP %u\n",
	       (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), wc.opcode,
	       wc.byte_len, wc.qp_num);
	if (wc.status != IBV_WC_SUCCESS || memcmp(src, dst, len)) {
		fprintf(stderr, "plx_rdma_write: the target does not hold the source\n");
		return 1;
	}
	printf("target verified: %zu bytes equal the source\n", len);
	ibv_destroy_qp(a);
	ibv_destroy_qp(b);
	ibv_dereg_mr(src_mr);
	ibv_dereg_mr(dst_mr);
	ibv_destroy_cq(cq);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}
