// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * libibverbs provider for plx_rdma, the soft RDMA device of rust-plx-dma.
 *
 * The kernel driver (drivers/infiniband/sw/plx_rdma) keeps every queue in
 * the kernel: it maps nothing into user space and its uverbs commands carry
 * no driver-specific data in either direction.  So this provider is a pure
 * "kernel command path" provider: each verb is the matching ibv_cmd_*()
 * call with the core request and response structures and nothing else,
 * including the data path (post_send, post_recv and poll_cq are system
 * calls).  That is slow, but it is exactly what the kernel side implements,
 * and it means the provider holds no state of its own beyond the objects
 * libibverbs asks it to allocate.
 *
 * Matching: the device is out of tree, so it has no driver_id of its own
 * and reports RDMA_DRIVER_UNKNOWN over netlink.  libibverbs then tries, for
 * each provider, a driver_id match (never true for UNKNOWN), a match on the
 * ib_device name and a match on the parent's device/modalias.  We claim
 * devices by name: an ib_device called plx_rdma<N>, with driver_id UNKNOWN
 * and uverbs ABI version 1, and nothing else.
 *
 * Built by scripts/provider-build.sh against the private headers of the
 * rdma-core release the installed libibverbs comes from; see README.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/driver.h>

/* The ib_device name prefix the kernel driver registers (plx_rdma%d). */
#define PLX_RDMA_NAME_PREFIX	"plx_rdma"
/* ib_device_ops.uverbs_abi_ver of the kernel driver. */
#define PLX_RDMA_ABI_VERSION	1

struct plx_rdma_device {
	struct verbs_device vdev;
};

struct plx_rdma_context {
	struct verbs_context vctx;
};

/*
 * A QP is allocated as a verbs_qp even though nothing here uses the
 * extension: ibv_qp_to_qp_ex() reads verbs_qp.comp_mask of any QP, and
 * calloc() leaves it clear (no ibv_qp_ex support).
 */
struct plx_rdma_qp {
	struct verbs_qp vqp;
};

static int plx_rdma_query_device(struct ibv_context *ibctx,
				 const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr,
				 size_t attr_size)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	uint64_t fw;
	int ret;

	ret = ibv_cmd_query_device_any(ibctx, input, attr, attr_size, &resp,
				       &resp_size);
	if (ret)
		return ret;

	/*
	 * The kernel only passes a 64-bit number; the string ibv_devinfo
	 * shows is the provider's business.  Read it the way most soft
	 * devices encode it: major, minor and sub-minor in 16-bit fields.
	 */
	fw = resp.base.fw_ver;
	snprintf(attr->orig_attr.fw_ver, sizeof(attr->orig_attr.fw_ver),
		 "%" PRIu64 ".%" PRIu64 ".%" PRIu64, (fw >> 32) & 0xffff,
		 (fw >> 16) & 0xffff, fw & 0xffff);
	return 0;
}

static int plx_rdma_query_port(struct ibv_context *ibctx, uint8_t port,
			       struct ibv_port_attr *attr)
{
	struct ibv_query_port cmd;

	return ibv_cmd_query_port(ibctx, port, attr, &cmd, sizeof(cmd));
}

static struct ibv_pd *plx_rdma_alloc_pd(struct ibv_context *ibctx)
{
	struct ib_uverbs_alloc_pd_resp resp;
	struct ibv_alloc_pd cmd;
	struct ibv_pd *pd;
	int ret;

	pd = calloc(1, sizeof(*pd));
	if (!pd)
		return NULL;

	ret = ibv_cmd_alloc_pd(ibctx, pd, &cmd, sizeof(cmd), &resp,
			       sizeof(resp));
	if (ret) {
		free(pd);
		errno = ret;
		return NULL;
	}
	return pd;
}

/*
 * Destroy paths free the user-space object only once the kernel has let
 * go of its own: on failure the handle is still live and the caller may
 * retry (e.g. after destroying the QPs that still use a PD).
 */
static int plx_rdma_dealloc_pd(struct ibv_pd *pd)
{
	int ret;

	ret = ibv_cmd_dealloc_pd(pd);
	if (ret)
		return ret;
	free(pd);
	return 0;
}

static struct ibv_mr *plx_rdma_reg_mr(struct ibv_pd *pd, void *addr,
				      size_t length, uint64_t hca_va,
				      int access)
{
	struct ib_uverbs_reg_mr_resp resp;
	struct ibv_reg_mr cmd;
	struct verbs_mr *vmr;
	int ret;

	vmr = calloc(1, sizeof(*vmr));
	if (!vmr)
		return NULL;

	/* The kernel pins and maps the pages (ib_umem); nothing else to do. */
	ret = ibv_cmd_reg_mr(pd, addr, length, hca_va, access, vmr, &cmd,
			     sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(vmr);
		errno = ret;
		return NULL;
	}
	return &vmr->ibv_mr;
}

static int plx_rdma_dereg_mr(struct verbs_mr *vmr)
{
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;
	free(vmr);
	return 0;
}

static struct ibv_cq *plx_rdma_create_cq(struct ibv_context *ibctx, int cqe,
					 struct ibv_comp_channel *channel,
					 int comp_vector)
{
	struct ib_uverbs_create_cq_resp resp;
	struct ibv_create_cq cmd;
	struct ibv_cq *cq;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;

	ret = ibv_cmd_create_cq(ibctx, cqe, channel, comp_vector, cq, &cmd,
				sizeof(cmd), &resp, sizeof(resp));
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	return cq;
}

static int plx_rdma_resize_cq(struct ibv_cq *cq, int cqe)
{
	struct ib_uverbs_resize_cq_resp resp;
	struct ibv_resize_cq cmd;

	/* The CQ lives in the kernel; it updates cq->cqe from the answer. */
	return ibv_cmd_resize_cq(cq, cqe, &cmd, sizeof(cmd), &resp,
				 sizeof(resp));
}

static int plx_rdma_destroy_cq(struct ibv_cq *cq)
{
	int ret;

	ret = ibv_cmd_destroy_cq(cq);
	if (ret)
		return ret;
	free(cq);
	return 0;
}

static struct ibv_srq *plx_rdma_create_srq(struct ibv_pd *pd,
					   struct ibv_srq_init_attr *attr)
{
	struct ib_uverbs_create_srq_resp resp;
	struct ibv_create_srq cmd;
	struct ibv_srq *srq;
	int ret;

	srq = calloc(1, sizeof(*srq));
	if (!srq)
		return NULL;

	ret = ibv_cmd_create_srq(pd, srq, attr, &cmd, sizeof(cmd), &resp,
				 sizeof(resp));
	if (ret) {
		free(srq);
		errno = ret;
		return NULL;
	}
	return srq;
}

static int plx_rdma_modify_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr,
			       int attr_mask)
{
	struct ibv_modify_srq cmd;

	return ibv_cmd_modify_srq(srq, attr, attr_mask, &cmd, sizeof(cmd));
}

static int plx_rdma_query_srq(struct ibv_srq *srq, struct ibv_srq_attr *attr)
{
	struct ibv_query_srq cmd;

	return ibv_cmd_query_srq(srq, attr, &cmd, sizeof(cmd));
}

static int plx_rdma_destroy_srq(struct ibv_srq *srq)
{
	int ret;

	ret = ibv_cmd_destroy_srq(srq);
	if (ret)
		return ret;
	free(srq);
	return 0;
}

static struct ibv_qp *plx_rdma_create_qp(struct ibv_pd *pd,
					 struct ibv_qp_init_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_create_qp cmd;
	struct plx_rdma_qp *qp;
	int ret;

	qp = calloc(1, sizeof(*qp));
	if (!qp)
		return NULL;

	/* attr->cap comes back with what the kernel actually granted. */
	ret = ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd, sizeof(cmd),
				&resp, sizeof(resp));
	if (ret) {
		free(qp);
		errno = ret;
		return NULL;
	}
	return &qp->vqp.qp;
}

static int plx_rdma_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			     int attr_mask, struct ibv_qp_init_attr *init_attr)
{
	struct ibv_query_qp cmd;

	return ibv_cmd_query_qp(qp, attr, attr_mask, init_attr, &cmd,
				sizeof(cmd));
}

static int plx_rdma_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr,
			      int attr_mask)
{
	struct ibv_modify_qp cmd;

	return ibv_cmd_modify_qp(qp, attr, attr_mask, &cmd, sizeof(cmd));
}

static int plx_rdma_destroy_qp(struct ibv_qp *ibqp)
{
	struct plx_rdma_qp *qp = container_of(ibqp, struct plx_rdma_qp, vqp.qp);
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	free(qp);
	return 0;
}

/*
 * Address handles matter once the device speaks RoCE (UD QPs need them
 * on any link layer); the kernel resolves the destination MAC itself.
 */
static struct ibv_ah *plx_rdma_create_ah(struct ibv_pd *pd,
					 struct ibv_ah_attr *attr)
{
	struct ib_uverbs_create_ah_resp resp;
	struct ibv_ah *ah;
	int ret;

	ah = calloc(1, sizeof(*ah));
	if (!ah)
		return NULL;

	ret = ibv_cmd_create_ah(pd, ah, attr, &resp, sizeof(resp));
	if (ret) {
		free(ah);
		errno = ret;
		return NULL;
	}
	return ah;
}

static int plx_rdma_destroy_ah(struct ibv_ah *ah)
{
	int ret;

	ret = ibv_cmd_destroy_ah(ah);
	if (ret)
		return ret;
	free(ah);
	return 0;
}

static void plx_rdma_free_context(struct ibv_context *ibctx)
{
	struct plx_rdma_context *ctx =
		container_of(ibctx, struct plx_rdma_context, vctx.context);

	verbs_uninit_context(&ctx->vctx);
	free(ctx);
}

/*
 * Verbs not listed stay libibverbs' defaults, which fail with EOPNOTSUPP
 * (e.g. create_cq_ex: perftest then falls back to ibv_create_cq).
 */
static const struct verbs_context_ops plx_rdma_ctx_ops = {
	.query_device_ex = plx_rdma_query_device,
	.query_port = plx_rdma_query_port,
	.alloc_pd = plx_rdma_alloc_pd,
	.dealloc_pd = plx_rdma_dealloc_pd,
	.reg_mr = plx_rdma_reg_mr,
	.dereg_mr = plx_rdma_dereg_mr,
	.create_cq = plx_rdma_create_cq,
	.poll_cq = ibv_cmd_poll_cq,
	.req_notify_cq = ibv_cmd_req_notify_cq,
	.resize_cq = plx_rdma_resize_cq,
	.destroy_cq = plx_rdma_destroy_cq,
	.create_srq = plx_rdma_create_srq,
	.modify_srq = plx_rdma_modify_srq,
	.query_srq = plx_rdma_query_srq,
	.destroy_srq = plx_rdma_destroy_srq,
	.post_srq_recv = ibv_cmd_post_srq_recv,
	.create_qp = plx_rdma_create_qp,
	.query_qp = plx_rdma_query_qp,
	.modify_qp = plx_rdma_modify_qp,
	.destroy_qp = plx_rdma_destroy_qp,
	.post_send = ibv_cmd_post_send,
	.post_recv = ibv_cmd_post_recv,
	.create_ah = plx_rdma_create_ah,
	.destroy_ah = plx_rdma_destroy_ah,
	.free_context = plx_rdma_free_context,
};

static struct verbs_context *plx_rdma_alloc_context(struct ibv_device *ibdev,
						    int cmd_fd,
						    void *private_data)
{
	struct ib_uverbs_get_context_resp resp;
	struct plx_rdma_context *ctx;
	struct ibv_get_context cmd;

	ctx = verbs_init_and_alloc_context(ibdev, cmd_fd, ctx, vctx,
					   RDMA_DRIVER_UNKNOWN);
	if (!ctx)
		return NULL;

	if (ibv_cmd_get_context(&ctx->vctx, &cmd, sizeof(cmd), &resp,
				sizeof(resp)))
		goto err;

	verbs_set_ops(&ctx->vctx, &plx_rdma_ctx_ops);
	return &ctx->vctx;

err:
	verbs_uninit_context(&ctx->vctx);
	free(ctx);
	return NULL;
}

static struct verbs_device *
plx_rdma_alloc_device(struct verbs_sysfs_dev *sysfs_dev)
{
	struct plx_rdma_device *dev;

	dev = calloc(1, sizeof(*dev));
	if (!dev)
		return NULL;
	return &dev->vdev;
}

static void plx_rdma_uninit_device(struct verbs_device *vdev)
{
	free(container_of(vdev, struct plx_rdma_device, vdev));
}

/*
 * VERBS_NAME_MATCH is the only table entry that can match a device
 * without a driver_id; libibverbs tries it against "rdma_device:N<name>".
 * Its pattern is "rdma_device:*Nplx_rdma*", which would also take a name
 * merely containing "Nplx_rdma", so plx_rdma_match_device() anchors it.
 */
static const struct verbs_match_ent plx_rdma_match_table[] = {
	VERBS_NAME_MATCH(PLX_RDMA_NAME_PREFIX, NULL),
	{}
};

/*
 * Called after the table match, whatever its result.  Also refuse any
 * device that has a driver_id: an rxe (or other) device someone named
 * plx_rdma0 expects its own provider's udata and mmap'ed queues, and this
 * provider would only confuse its kernel driver.
 */
static bool plx_rdma_match_device(struct verbs_sysfs_dev *sysfs_dev)
{
	return sysfs_dev->match &&
	       sysfs_dev->driver_id == RDMA_DRIVER_UNKNOWN &&
	       !strncmp(sysfs_dev->ibdev_name, PLX_RDMA_NAME_PREFIX,
			strlen(PLX_RDMA_NAME_PREFIX));
}

static const struct verbs_device_ops plx_rdma_dev_ops = {
	.name = "plx_rdma",
	.match_min_abi_version = PLX_RDMA_ABI_VERSION,
	.match_max_abi_version = PLX_RDMA_ABI_VERSION,
	.match_table = plx_rdma_match_table,
	.match_device = plx_rdma_match_device,
	.alloc_device = plx_rdma_alloc_device,
	.uninit_device = plx_rdma_uninit_device,
	.alloc_context = plx_rdma_alloc_context,
};
PROVIDER_DRIVER(plx_rdma, plx_rdma_dev_ops);
