// SPDX-License-Identifier: GPL-2.0 OR Linux-OpenIB
/*
 * libibverbs provider for plx_rdma, the soft RDMA device of rust-plx-dma.
 *
 * The kernel driver (drivers/infiniband/sw/plx_rdma) keeps the work
 * queues in the kernel, so each verb is the matching ibv_cmd_*() call,
 * post_send and post_recv included: a short request is executed in its
 * post_send system call.  CQs are the exception: the kernel writes their
 * completions into a ring mapped into the process (the driver's part of
 * the create and resize responses says where), and ibv_poll_cq(),
 * ibv_start_poll() and ibv_next_poll() read them with loads, no system
 * call.
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
#include <stdatomic.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <infiniband/driver.h>

/* The ib_device name prefix the kernel driver registers (plx_rdma%d). */
#define PLX_RDMA_NAME_PREFIX	"plx_rdma"
/* The node description it gives every device, whatever its name. */
#define PLX_RDMA_NODE_DESC	"plx_rdma"
/* ib_device_ops.uverbs_abi_ver of the kernel driver. */
#define PLX_RDMA_ABI_VERSION	1

struct plx_rdma_device {
	struct verbs_device vdev;
};

/*
 * A context outlives ibv_close_device() while objects made on it are
 * alive: one reference for the open device and one per PD, MR, CQ, SRQ,
 * QP and AH, the memory and the command file freed with the last. Closing
 * a device before destroying its objects is a caller's mistake, but a
 * common one at exit (Python's collector, pyverbs' tests): their destroy
 * calls then still find the context and the kernel's handles, instead of
 * reading freed memory, which is how rxe's processes die in the same
 * place.
 */
struct plx_rdma_context {
	struct verbs_context vctx;
	atomic_uint refs;
};

/*
 * One work request of an ibv_wr_start() batch.  Its scatter/gather
 * entries and inline bytes live in the batch's arrays (which may move as
 * they grow), so the pointers of wr are filled in at ibv_wr_complete().
 */
struct plx_rdma_wr {
	struct ibv_send_wr wr;
	size_t first_sge;	/* index in plx_rdma_batch.sge */
	size_t inline_at;	/* offset in plx_rdma_batch.bytes */
	size_t inline_len;
	bool is_inline;
};

/* What the extended send API has gathered since ibv_wr_start(). */
struct plx_rdma_batch {
	struct plx_rdma_wr *wr;
	size_t nwr, wr_room;
	struct ibv_sge *sge;
	size_t nsge, sge_room;
	unsigned char *bytes;
	size_t nbytes, bytes_room;
	/* The first error of the batch: ibv_wr_complete() returns it. */
	int err;
};

/*
 * Every QP is a verbs_qp: ibv_qp_to_qp_ex() reads verbs_qp.comp_mask of
 * any QP.  Only a QP created with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS sets
 * VERBS_QP_EX there, and then every ibv_qp_ex function pointer is set: the
 * operations it did not ask for fail its ibv_wr_complete() with
 * EOPNOTSUPP rather than calling through NULL.
 */
struct plx_rdma_qp {
	struct verbs_qp vqp;
	uint64_t send_ops;	/* IBV_QP_EX_WITH_* granted at creation */
	uint32_t max_send_wr, max_send_sge, max_inline;
	pthread_spinlock_t wr_lock;	/* held from ibv_wr_start() to the end */
	struct plx_rdma_batch batch;
};

/*
 * Every CQ is a verbs_cq.  For ibv_start_poll() and its accessors the CQ
 * keeps the one completion being read, taken from the ring (or the kernel)
 * one at a time, so that nothing polled is ever held back from
 * ibv_poll_cq().
 */
struct plx_rdma_cq {
	struct verbs_cq vcq;
	struct ibv_wc wc;
	bool locking;
	pthread_spinlock_t lock;	/* held from a successful start_poll to end_poll */
	/* Made with a ring (for good: pollers read it without the lock). */
	bool mapped;
	/* Its ring, under ring_lock (NULL if remapping it failed). */
	void *ring;
	size_t ring_len;		/* mapped bytes */
	uint64_t ring_offset;
	uint32_t capacity;
	uint32_t cons;			/* the consumer index, ours */
	pthread_spinlock_t ring_lock;	/* pollers, and resize */
};

/*
 * The driver's part of the create and resize responses of a mapped CQ,
 * and the ring's layout (drivers/infiniband/sw/plx_rdma/cq_ring.rs; keep
 * both in step).  Indexes run over 0..2*capacity; the kernel publishes
 * completions with a release store of the producer index, we hand slots
 * back with one of the consumer index.
 */
struct plx_rdma_cq_resp {
	__u64 offset;
	__u32 size;
	__u32 capacity;
};

#define PLX_RDMA_RING_PRODUCER	0
#define PLX_RDMA_RING_CONSUMER	64
#define PLX_RDMA_RING_ENTRIES	128

struct plx_rdma_cqe {
	uint64_t wr_id;
	uint32_t status;
	uint32_t opcode;
	uint32_t byte_len;
	uint32_t imm_data;	/* big endian, as posted */
	uint32_t qp_num;
	uint32_t src_qp;
	uint32_t wc_flags;
	uint32_t network_hdr_type;
	uint32_t reserved[2];
};

_Static_assert(sizeof(struct plx_rdma_cqe) == 48, "the kernel's ENTRY_WORDS");

struct plx_rdma_create_cq_resp {
	struct ib_uverbs_create_cq_resp ibv_resp;
	struct plx_rdma_cq_resp drv;
};

struct plx_rdma_create_cq_ex_resp {
	struct ib_uverbs_ex_create_cq_resp ibv_resp;
	struct plx_rdma_cq_resp drv;
};

struct plx_rdma_resize_cq_resp {
	struct ib_uverbs_resize_cq_resp ibv_resp;
	struct plx_rdma_cq_resp drv;
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

static struct plx_rdma_context *to_plx_ctx(struct ibv_context *ibctx)
{
	return container_of(ibctx, struct plx_rdma_context, vctx.context);
}

/* An object was made on @ibctx. */
static void plx_rdma_ctx_get(struct ibv_context *ibctx)
{
	atomic_fetch_add(&to_plx_ctx(ibctx)->refs, 1);
}

/* An object of @ibctx is gone, or the device was closed: the last frees it. */
static void plx_rdma_ctx_put(struct ibv_context *ibctx)
{
	struct plx_rdma_context *ctx = to_plx_ctx(ibctx);

	if (atomic_fetch_sub(&ctx->refs, 1) == 1) {
		verbs_uninit_context(&ctx->vctx);
		free(ctx);
	}
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
	plx_rdma_ctx_get(ibctx);
	return pd;
}

/*
 * Destroy paths free the user-space object only once the kernel has let
 * go of its own: on failure the handle is still live and the caller may
 * retry (e.g. after destroying the QPs that still use a PD).
 */
static int plx_rdma_dealloc_pd(struct ibv_pd *pd)
{
	struct ibv_context *ibctx = pd->context;
	int ret;

	ret = ibv_cmd_dealloc_pd(pd);
	if (ret)
		return ret;
	free(pd);
	plx_rdma_ctx_put(ibctx);
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
	plx_rdma_ctx_get(pd->context);
	return &vmr->ibv_mr;
}

static int plx_rdma_dereg_mr(struct verbs_mr *vmr)
{
	struct ibv_context *ibctx = vmr->ibv_mr.context;
	int ret;

	ret = ibv_cmd_dereg_mr(vmr);
	if (ret)
		return ret;
	free(vmr);
	plx_rdma_ctx_put(ibctx);
	return 0;
}

/* Maps the ring @drv describes into cq; 0 or an errno. */
static int plx_rdma_map_ring(struct plx_rdma_cq *cq,
			     const struct plx_rdma_cq_resp *drv)
{
	long page = sysconf(_SC_PAGESIZE);
	size_t len = ((size_t)drv->size + page - 1) & ~((size_t)page - 1);
	void *ring;

	if (!drv->capacity || drv->size < PLX_RDMA_RING_ENTRIES +
	    (size_t)drv->capacity * sizeof(struct plx_rdma_cqe))
		return EINVAL;
	ring = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED,
		    cq->vcq.cq.context->cmd_fd, drv->offset);
	if (ring == MAP_FAILED)
		return errno;
	cq->ring = ring;
	cq->ring_len = len;
	cq->ring_offset = drv->offset;
	cq->capacity = drv->capacity;
	cq->cons = 0;
	return 0;
}

static struct ibv_cq *plx_rdma_create_cq(struct ibv_context *ibctx, int cqe,
					 struct ibv_comp_channel *channel,
					 int comp_vector)
{
	struct plx_rdma_create_cq_resp resp = {};
	struct ibv_create_cq cmd;
	struct plx_rdma_cq *cq;
	int ret;

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	ret = pthread_spin_init(&cq->ring_lock, PTHREAD_PROCESS_PRIVATE);
	if (ret) {
		free(cq);
		errno = ret;
		return NULL;
	}
	ret = ibv_cmd_create_cq(ibctx, cqe, channel, comp_vector, &cq->vcq.cq,
				&cmd, sizeof(cmd), &resp.ibv_resp, sizeof(resp));
	if (ret) {
		pthread_spin_destroy(&cq->ring_lock);
		free(cq);
		errno = ret;
		return NULL;
	}
	/* A kernel that answered without a ring: polled through it. */
	if (resp.drv.size) {
		cq->mapped = true;
		ret = plx_rdma_map_ring(cq, &resp.drv);
		if (ret) {
			ibv_cmd_destroy_cq(&cq->vcq.cq);
			pthread_spin_destroy(&cq->ring_lock);
			free(cq);
			errno = ret;
			return NULL;
		}
	}
	plx_rdma_ctx_get(ibctx);
	return &cq->vcq.cq;
}

static void plx_rdma_read_cqe(const struct plx_rdma_cqe *e, struct ibv_wc *wc)
{
	memset(wc, 0, sizeof(*wc));
	wc->wr_id = e->wr_id;
	wc->status = e->status;
	wc->opcode = e->opcode;
	wc->byte_len = e->byte_len;
	wc->imm_data = e->imm_data;
	wc->qp_num = e->qp_num;
	wc->src_qp = e->src_qp;
	wc->wc_flags = e->wc_flags;
}

/*
 * ibv_poll_cq(): a mapped CQ's completions are read from its ring, with
 * no system call; any other CQ's through the kernel.
 */
static int plx_rdma_poll_cq(struct ibv_cq *ibcq, int ne, struct ibv_wc *wc)
{
	struct plx_rdma_cq *cq = container_of(ibcq, struct plx_rdma_cq, vcq.cq);
	_Atomic uint32_t *prod_p, *cons_p;
	const struct plx_rdma_cqe *entries;
	uint32_t prod, cons, slot;
	int n = 0;

	if (!cq->mapped)
		return ibv_cmd_poll_cq(ibcq, ne, wc);
	pthread_spin_lock(&cq->ring_lock);
	if (!cq->ring) {
		/* A resize could not map the new ring: the kernel reads it. */
		n = ibv_cmd_poll_cq(ibcq, ne, wc);
		pthread_spin_unlock(&cq->ring_lock);
		return n;
	}
	prod_p = (_Atomic uint32_t *)((char *)cq->ring + PLX_RDMA_RING_PRODUCER);
	cons_p = (_Atomic uint32_t *)((char *)cq->ring + PLX_RDMA_RING_CONSUMER);
	entries = (const struct plx_rdma_cqe *)((char *)cq->ring +
						PLX_RDMA_RING_ENTRIES);
	prod = atomic_load_explicit(prod_p, memory_order_acquire);
	/*
	 * Only the process itself can have put an index out of range there;
	 * the kernel writes a good one with its next completion.
	 */
	if (prod >= 2 * cq->capacity)
		prod = cq->cons;
	cons = cq->cons;
	while (n < ne && cons != prod) {
		slot = cons >= cq->capacity ? cons - cq->capacity : cons;
		plx_rdma_read_cqe(&entries[slot], &wc[n++]);
		cons = cons + 1 == 2 * cq->capacity ? 0 : cons + 1;
	}
	if (n) {
		cq->cons = cons;
		atomic_store_explicit(cons_p, cons, memory_order_release);
	}
	pthread_spin_unlock(&cq->ring_lock);
	return n;
}

static struct plx_rdma_cq *to_plx_cq(struct ibv_cq_ex *cq_ex)
{
	return container_of(cq_ex, struct plx_rdma_cq, vcq.cq_ex);
}

/*
 * The extended CQ: ibv_start_poll() and ibv_next_poll() each take one
 * completion (from the ring, as ibv_poll_cq() does) and the read_*
 * accessors read it.  Everything ibv_wc carries can be read; what it does
 * not (timestamps, VLAN, flow tag, tag matching) is refused at creation.
 */
enum {
	PLX_RDMA_WC_FLAGS = IBV_WC_EX_WITH_BYTE_LEN | IBV_WC_EX_WITH_IMM |
			    IBV_WC_EX_WITH_QP_NUM | IBV_WC_EX_WITH_SRC_QP |
			    IBV_WC_EX_WITH_SLID | IBV_WC_EX_WITH_SL |
			    IBV_WC_EX_WITH_DLID_PATH_BITS,
	PLX_RDMA_CQ_COMP_MASK = IBV_CQ_INIT_ATTR_MASK_FLAGS |
				IBV_CQ_INIT_ATTR_MASK_PD,
	PLX_RDMA_CQ_FLAGS = IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
};

/* Polls one completion into cq->wc: 0, ENOENT when none, or an errno. */
static int plx_rdma_cq_take(struct plx_rdma_cq *cq)
{
	int n = plx_rdma_poll_cq(&cq->vcq.cq, 1, &cq->wc);

	if (n < 0)
		return errno ? errno : EIO;
	if (!n)
		return ENOENT;
	cq->vcq.cq_ex.wr_id = cq->wc.wr_id;
	cq->vcq.cq_ex.status = cq->wc.status;
	return 0;
}

static int plx_rdma_start_poll(struct ibv_cq_ex *cq_ex,
			       struct ibv_poll_cq_attr *attr)
{
	struct plx_rdma_cq *cq = to_plx_cq(cq_ex);
	int ret;

	if (attr->comp_mask)
		return EINVAL;
	if (cq->locking)
		pthread_spin_lock(&cq->lock);
	ret = plx_rdma_cq_take(cq);
	/* Without a completion the caller does not call end_poll. */
	if (ret && cq->locking)
		pthread_spin_unlock(&cq->lock);
	return ret;
}

static int plx_rdma_next_poll(struct ibv_cq_ex *cq_ex)
{
	return plx_rdma_cq_take(to_plx_cq(cq_ex));
}

static void plx_rdma_end_poll(struct ibv_cq_ex *cq_ex)
{
	struct plx_rdma_cq *cq = to_plx_cq(cq_ex);

	if (cq->locking)
		pthread_spin_unlock(&cq->lock);
}

/* An ibv_cq_ex accessor: @field of the completion start_poll/next_poll took. */
#define PLX_RDMA_WC_READER(type, field)					\
	static type plx_rdma_read_##field(struct ibv_cq_ex *cq_ex)	\
	{								\
		return to_plx_cq(cq_ex)->wc.field;			\
	}

PLX_RDMA_WC_READER(enum ibv_wc_opcode, opcode)
PLX_RDMA_WC_READER(uint32_t, vendor_err)
PLX_RDMA_WC_READER(uint32_t, byte_len)
PLX_RDMA_WC_READER(__be32, imm_data)
PLX_RDMA_WC_READER(uint32_t, qp_num)
PLX_RDMA_WC_READER(uint32_t, src_qp)
PLX_RDMA_WC_READER(unsigned int, wc_flags)
PLX_RDMA_WC_READER(uint32_t, slid)
PLX_RDMA_WC_READER(uint8_t, sl)
PLX_RDMA_WC_READER(uint8_t, dlid_path_bits)

/*
 * The accessors of fields this CQ never has: creation refuses the
 * wc_flags that would make them meaningful, so only a caller that did not
 * ask for them calls these, and it reads 0 rather than jumping to NULL.
 */
static uint64_t plx_rdma_read_none_u64(struct ibv_cq_ex *cq_ex)
{
	return 0;
}

static uint16_t plx_rdma_read_none_u16(struct ibv_cq_ex *cq_ex)
{
	return 0;
}

static uint32_t plx_rdma_read_none_u32(struct ibv_cq_ex *cq_ex)
{
	return 0;
}

static void plx_rdma_read_no_tm_info(struct ibv_cq_ex *cq_ex,
				     struct ibv_wc_tm_info *tm_info)
{
	memset(tm_info, 0, sizeof(*tm_info));
}

static struct ibv_cq_ex *plx_rdma_create_cq_ex(struct ibv_context *ibctx,
					       struct ibv_cq_init_attr_ex *attr)
{
	struct plx_rdma_create_cq_ex_resp resp = {};
	struct ibv_create_cq_ex cmd;
	struct ibv_cq_ex *cq_ex;
	struct plx_rdma_cq *cq;
	int ret;

	if ((attr->wc_flags & ~(uint64_t)PLX_RDMA_WC_FLAGS) ||
	    (attr->comp_mask & ~PLX_RDMA_CQ_COMP_MASK) ||
	    ((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
	     (attr->flags & ~PLX_RDMA_CQ_FLAGS))) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	cq = calloc(1, sizeof(*cq));
	if (!cq)
		return NULL;
	cq->locking = !((attr->comp_mask & IBV_CQ_INIT_ATTR_MASK_FLAGS) &&
			(attr->flags & IBV_CREATE_CQ_ATTR_SINGLE_THREADED));
	if (pthread_spin_init(&cq->lock, PTHREAD_PROCESS_PRIVATE)) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	if (pthread_spin_init(&cq->ring_lock, PTHREAD_PROCESS_PRIVATE)) {
		pthread_spin_destroy(&cq->lock);
		free(cq);
		errno = ENOMEM;
		return NULL;
	}

	ret = ibv_cmd_create_cq_ex(ibctx, attr, &cq->vcq, &cmd, sizeof(cmd),
				   &resp.ibv_resp, sizeof(resp), 0);
	if (!ret && resp.drv.size) {
		cq->mapped = true;
		ret = plx_rdma_map_ring(cq, &resp.drv);
		if (ret)
			ibv_cmd_destroy_cq(&cq->vcq.cq);
	}
	if (ret) {
		pthread_spin_destroy(&cq->ring_lock);
		pthread_spin_destroy(&cq->lock);
		free(cq);
		errno = ret;
		return NULL;
	}

	cq_ex = &cq->vcq.cq_ex;
	cq_ex->start_poll = plx_rdma_start_poll;
	cq_ex->next_poll = plx_rdma_next_poll;
	cq_ex->end_poll = plx_rdma_end_poll;
	cq_ex->read_opcode = plx_rdma_read_opcode;
	cq_ex->read_vendor_err = plx_rdma_read_vendor_err;
	cq_ex->read_byte_len = plx_rdma_read_byte_len;
	cq_ex->read_imm_data = plx_rdma_read_imm_data;
	cq_ex->read_qp_num = plx_rdma_read_qp_num;
	cq_ex->read_src_qp = plx_rdma_read_src_qp;
	cq_ex->read_wc_flags = plx_rdma_read_wc_flags;
	cq_ex->read_slid = plx_rdma_read_slid;
	cq_ex->read_sl = plx_rdma_read_sl;
	cq_ex->read_dlid_path_bits = plx_rdma_read_dlid_path_bits;
	cq_ex->read_completion_ts = plx_rdma_read_none_u64;
	cq_ex->read_cvlan = plx_rdma_read_none_u16;
	cq_ex->read_flow_tag = plx_rdma_read_none_u32;
	cq_ex->read_tm_info = plx_rdma_read_no_tm_info;
	cq_ex->read_completion_wallclock_ns = plx_rdma_read_none_u64;
	plx_rdma_ctx_get(ibctx);
	return cq_ex;
}

/*
 * The kernel moves a mapped CQ's completions into a new ring when it
 * grows, and says where: the old one is unmapped, the new one mapped.
 * Pollers wait meanwhile.  ibv_cmd_resize_cq() updates cq->cqe.
 */
static int plx_rdma_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct plx_rdma_cq *cq = container_of(ibcq, struct plx_rdma_cq, vcq.cq);
	struct plx_rdma_resize_cq_resp resp = {};
	struct ibv_resize_cq cmd;
	void *old;
	size_t old_len;
	int ret;

	pthread_spin_lock(&cq->ring_lock);
	ret = ibv_cmd_resize_cq(ibcq, cqe, &cmd, sizeof(cmd), &resp.ibv_resp,
				sizeof(resp));
	if (!ret && cq->ring && resp.drv.size &&
	    resp.drv.offset != cq->ring_offset) {
		old = cq->ring;
		old_len = cq->ring_len;
		/* Left unmapped, the CQ is polled through the kernel. */
		cq->ring = NULL;
		ret = plx_rdma_map_ring(cq, &resp.drv);
		munmap(old, old_len);
	}
	pthread_spin_unlock(&cq->ring_lock);
	return ret;
}

static int plx_rdma_destroy_cq(struct ibv_cq *ibcq)
{
	struct plx_rdma_cq *cq = container_of(ibcq, struct plx_rdma_cq, vcq.cq);
	struct ibv_context *ibctx = ibcq->context;
	int ret;

	ret = ibv_cmd_destroy_cq(ibcq);
	if (ret)
		return ret;
	if (cq->ring)
		munmap(cq->ring, cq->ring_len);
	/* Only an extended CQ initialised its lock (and set start_poll). */
	if (cq->vcq.cq_ex.start_poll)
		pthread_spin_destroy(&cq->lock);
	pthread_spin_destroy(&cq->ring_lock);
	free(cq);
	plx_rdma_ctx_put(ibctx);
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
	plx_rdma_ctx_get(pd->context);
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
	struct ibv_context *ibctx = srq->context;
	int ret;

	ret = ibv_cmd_destroy_srq(srq);
	if (ret)
		return ret;
	free(srq);
	plx_rdma_ctx_put(ibctx);
	return 0;
}

/* A zeroed QP with its work request lock; NULL with errno set. */
static struct plx_rdma_qp *plx_rdma_qp_alloc(void)
{
	struct plx_rdma_qp *qp = calloc(1, sizeof(*qp));

	if (!qp)
		return NULL;
	if (pthread_spin_init(&qp->wr_lock, PTHREAD_PROCESS_PRIVATE)) {
		free(qp);
		errno = ENOMEM;
		return NULL;
	}
	return qp;
}

static struct ibv_qp *plx_rdma_create_qp(struct ibv_pd *pd,
					 struct ibv_qp_init_attr *attr)
{
	struct ib_uverbs_create_qp_resp resp;
	struct ibv_create_qp cmd;
	struct plx_rdma_qp *qp;
	int ret;

	qp = plx_rdma_qp_alloc();
	if (!qp)
		return NULL;

	/* attr->cap comes back with what the kernel actually granted. */
	ret = ibv_cmd_create_qp(pd, &qp->vqp.qp, attr, &cmd, sizeof(cmd),
				&resp, sizeof(resp));
	if (ret) {
		pthread_spin_destroy(&qp->wr_lock);
		free(qp);
		errno = ret;
		return NULL;
	}
	plx_rdma_ctx_get(pd->context);
	return &qp->vqp.qp;
}

/*
 * The kernel's post command, after the one check libibverbs' marshalling
 * needs: it reads the address handle of every UD request, so a UD
 * request without one is refused here (EINVAL, *bad_wr naming it) instead
 * of crashing there; the requests before it are posted, as usual.
 */
static int plx_rdma_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr,
			      struct ibv_send_wr **bad_wr)
{
	struct ibv_send_wr *prev = NULL, *w;
	int ret;

	if (qp->qp_type != IBV_QPT_UD)
		return ibv_cmd_post_send(qp, wr, bad_wr);
	for (w = wr; w && w->wr.ud.ah; w = w->next)
		prev = w;
	if (!w)
		return ibv_cmd_post_send(qp, wr, bad_wr);
	if (prev) {
		/* Post the good prefix alone; the caller's list is restored. */
		prev->next = NULL;
		ret = ibv_cmd_post_send(qp, wr, bad_wr);
		prev->next = w;
		if (ret)
			return ret;
	}
	*bad_wr = w;
	return EINVAL;
}

/*
 * The extended send API (ibv_wr_*).  Every WR builder opens a work
 * request with the QP's wr_id and wr_flags of the moment, the setters fill
 * in the open request, and ibv_wr_complete() posts the batch as a list of
 * ibv_send_wr with the kernel's post command, the same one ibv_post_send()
 * uses.  The builders cannot return an error: the first one is kept and
 * ibv_wr_complete() returns it and posts nothing.  Everything the kernel
 * would refuse for a reason known here (an operation the QP was not
 * created for, too many requests or SGEs, inline data too long or on a
 * READ, a UD request without an address) is refused here, before
 * anything is posted, so a batch is posted whole or not at all unless the
 * kernel itself fails it (a QP in the wrong state, a full send queue): then
 * the requests before the failing one are posted, as with ibv_post_send().
 */
enum {
	PLX_RDMA_QP_COMP_MASK = IBV_QP_INIT_ATTR_PD |
				IBV_QP_INIT_ATTR_CREATE_FLAGS |
				IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
	PLX_RDMA_RC_SEND_OPS = IBV_QP_EX_WITH_SEND |
			       IBV_QP_EX_WITH_SEND_WITH_IMM |
			       IBV_QP_EX_WITH_RDMA_WRITE |
			       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM |
			       IBV_QP_EX_WITH_RDMA_READ,
	PLX_RDMA_ATOMIC_SEND_OPS = IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP |
				   IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
	PLX_RDMA_UC_SEND_OPS = IBV_QP_EX_WITH_SEND |
			       IBV_QP_EX_WITH_SEND_WITH_IMM |
			       IBV_QP_EX_WITH_RDMA_WRITE |
			       IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
	PLX_RDMA_UD_SEND_OPS = IBV_QP_EX_WITH_SEND |
			       IBV_QP_EX_WITH_SEND_WITH_IMM,
};

static struct plx_rdma_qp *to_plx_qp_ex(struct ibv_qp_ex *qp_ex)
{
	return container_of(qp_ex, struct plx_rdma_qp, vqp.qp_ex);
}

static void wr_fail(struct plx_rdma_qp *qp, int err)
{
	if (!qp->batch.err)
		qp->batch.err = err;
}

/* Makes room for @more elements of @size in *@arr of *@room; false if not. */
static bool grow(void **arr, size_t *room, size_t used, size_t more,
		 size_t size)
{
	size_t want = *room ? *room : 8;
	void *p;

	if (used + more <= *room)
		return true;
	while (want < used + more)
		want *= 2;
	p = reallocarray(*arr, want, size);
	if (!p)
		return false;
	*arr = p;
	*room = want;
	return true;
}

/* The request the setters fill in, or NULL (the batch then fails). */
static struct plx_rdma_wr *open_wr(struct plx_rdma_qp *qp)
{
	if (!qp->batch.nwr) {
		wr_fail(qp, EINVAL);
		return NULL;
	}
	return &qp->batch.wr[qp->batch.nwr - 1];
}

/* Opens a new request of @opcode, if the QP was created for @op. */
static struct plx_rdma_wr *new_wr(struct ibv_qp_ex *qp_ex, uint64_t op,
				  enum ibv_wr_opcode opcode)
{
	struct plx_rdma_qp *qp = to_plx_qp_ex(qp_ex);
	struct plx_rdma_batch *b = &qp->batch;
	struct plx_rdma_wr *w;

	if (!(qp->send_ops & op)) {
		wr_fail(qp, EOPNOTSUPP);
		return NULL;
	}
	if (b->nwr >= qp->max_send_wr) {
		wr_fail(qp, ENOMEM);
		return NULL;
	}
	if (!grow((void **)&b->wr, &b->wr_room, b->nwr, 1, sizeof(*b->wr))) {
		wr_fail(qp, ENOMEM);
		return NULL;
	}
	w = &b->wr[b->nwr++];
	*w = (struct plx_rdma_wr){
		.wr = {
			.wr_id = qp_ex->wr_id,
			.opcode = opcode,
			.send_flags = qp_ex->wr_flags,
		},
		.first_sge = b->nsge,
	};
	return w;
}

static void plx_wr_send(struct ibv_qp_ex *qp_ex)
{
	new_wr(qp_ex, IBV_QP_EX_WITH_SEND, IBV_WR_SEND);
}

static void plx_wr_send_imm(struct ibv_qp_ex *qp_ex, __be32 imm_data)
{
	struct plx_rdma_wr *w = new_wr(qp_ex, IBV_QP_EX_WITH_SEND_WITH_IMM,
				       IBV_WR_SEND_WITH_IMM);

	if (w)
		w->wr.imm_data = imm_data;
}

static void set_rdma(struct plx_rdma_wr *w, uint32_t rkey,
		     uint64_t remote_addr)
{
	if (w) {
		w->wr.wr.rdma.rkey = rkey;
		w->wr.wr.rdma.remote_addr = remote_addr;
	}
}

static void plx_wr_rdma_write(struct ibv_qp_ex *qp_ex, uint32_t rkey,
			      uint64_t remote_addr)
{
	set_rdma(new_wr(qp_ex, IBV_QP_EX_WITH_RDMA_WRITE, IBV_WR_RDMA_WRITE),
		 rkey, remote_addr);
}

static void plx_wr_rdma_write_imm(struct ibv_qp_ex *qp_ex, uint32_t rkey,
				  uint64_t remote_addr, __be32 imm_data)
{
	struct plx_rdma_wr *w = new_wr(qp_ex, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
				       IBV_WR_RDMA_WRITE_WITH_IMM);

	set_rdma(w, rkey, remote_addr);
	if (w)
		w->wr.imm_data = imm_data;
}

static void plx_wr_rdma_read(struct ibv_qp_ex *qp_ex, uint32_t rkey,
			     uint64_t remote_addr)
{
	set_rdma(new_wr(qp_ex, IBV_QP_EX_WITH_RDMA_READ, IBV_WR_RDMA_READ),
		 rkey, remote_addr);
}

static void plx_wr_atomic_cmp_swp(struct ibv_qp_ex *qp_ex, uint32_t rkey,
				  uint64_t remote_addr, uint64_t compare,
				  uint64_t swap)
{
	struct plx_rdma_wr *w = new_wr(qp_ex, IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
				       IBV_WR_ATOMIC_CMP_AND_SWP);

	if (w)
		w->wr.wr.atomic = (typeof(w->wr.wr.atomic)){
			.remote_addr = remote_addr, .compare_add = compare,
			.swap = swap, .rkey = rkey,
		};
}

static void plx_wr_atomic_fetch_add(struct ibv_qp_ex *qp_ex, uint32_t rkey,
				    uint64_t remote_addr, uint64_t add)
{
	struct plx_rdma_wr *w = new_wr(qp_ex, IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
				       IBV_WR_ATOMIC_FETCH_AND_ADD);

	if (w)
		w->wr.wr.atomic = (typeof(w->wr.wr.atomic)){
			.remote_addr = remote_addr, .compare_add = add,
			.rkey = rkey,
		};
}

/*
 * The builders and setters of what the device does not do (memory
 * windows, invalidation, TSO, XRC, FLUSH, ATOMIC WRITE): creation refuses
 * their send_ops_flags, so only a caller that never asked for them gets
 * here, and its batch fails with EOPNOTSUPP.
 */
static void plx_wr_unsupported(struct ibv_qp_ex *qp_ex)
{
	wr_fail(to_plx_qp_ex(qp_ex), EOPNOTSUPP);
}

static void plx_wr_bind_mw(struct ibv_qp_ex *qp_ex, struct ibv_mw *mw,
			   uint32_t rkey,
			   const struct ibv_mw_bind_info *bind_info)
{
	plx_wr_unsupported(qp_ex);
}

static void plx_wr_local_inv(struct ibv_qp_ex *qp_ex, uint32_t rkey)
{
	plx_wr_unsupported(qp_ex);
}

static void plx_wr_send_inv(struct ibv_qp_ex *qp_ex, uint32_t rkey)
{
	plx_wr_unsupported(qp_ex);
}

static void plx_wr_send_tso(struct ibv_qp_ex *qp_ex, void *hdr,
			    uint16_t hdr_sz, uint16_t mss)
{
	plx_wr_unsupported(qp_ex);
}

static void plx_wr_set_xrc_srqn(struct ibv_qp_ex *qp_ex, uint32_t srqn)
{
	plx_wr_unsupported(qp_ex);
}

static void plx_wr_atomic_write(struct ibv_qp_ex *qp_ex, uint32_t rkey,
				uint64_t remote_addr, const void *atomic_wr)
{
	plx_wr_unsupported(qp_ex);
}

static void plx_wr_flush(struct ibv_qp_ex *qp_ex, uint32_t rkey,
			 uint64_t remote_addr, size_t len, uint8_t type,
			 uint8_t level)
{
	plx_wr_unsupported(qp_ex);
}

static void plx_wr_set_ud_addr(struct ibv_qp_ex *qp_ex, struct ibv_ah *ah,
			       uint32_t remote_qpn, uint32_t remote_qkey)
{
	struct plx_rdma_qp *qp = to_plx_qp_ex(qp_ex);
	struct plx_rdma_wr *w = open_wr(qp);

	if (!w)
		return;
	if (qp->vqp.qp.qp_type != IBV_QPT_UD || !ah) {
		wr_fail(qp, EINVAL);
		return;
	}
	w->wr.wr.ud.ah = ah;
	w->wr.wr.ud.remote_qpn = remote_qpn;
	w->wr.wr.ud.remote_qkey = remote_qkey;
}

/* A request's data is set once: by SGEs or inline, not both, not twice. */
static struct plx_rdma_wr *data_wr(struct plx_rdma_qp *qp)
{
	struct plx_rdma_wr *w = open_wr(qp);

	if (w && (w->wr.num_sge || w->is_inline)) {
		wr_fail(qp, EINVAL);
		return NULL;
	}
	return w;
}

static void plx_wr_set_sge_list(struct ibv_qp_ex *qp_ex, size_t num_sge,
				const struct ibv_sge *sg_list)
{
	struct plx_rdma_qp *qp = to_plx_qp_ex(qp_ex);
	struct plx_rdma_batch *b = &qp->batch;
	struct plx_rdma_wr *w = data_wr(qp);

	if (!w)
		return;
	if (num_sge > qp->max_send_sge || (num_sge && !sg_list)) {
		wr_fail(qp, EINVAL);
		return;
	}
	if (!grow((void **)&b->sge, &b->sge_room, b->nsge, num_sge,
		  sizeof(*b->sge))) {
		wr_fail(qp, ENOMEM);
		return;
	}
	if (num_sge)
		memcpy(&b->sge[b->nsge], sg_list, num_sge * sizeof(*sg_list));
	w->first_sge = b->nsge;
	w->wr.num_sge = num_sge;
	b->nsge += num_sge;
}

static void plx_wr_set_sge(struct ibv_qp_ex *qp_ex, uint32_t lkey,
			   uint64_t addr, uint32_t length)
{
	struct ibv_sge sge = { .addr = addr, .length = length, .lkey = lkey };

	plx_wr_set_sge_list(qp_ex, 1, &sge);
}

/*
 * Inline data is copied here, as the API promises (the caller may reuse
 * its buffers at once), into the batch; the kernel copies it from there
 * at ibv_wr_complete(), as for ibv_post_send() with IBV_SEND_INLINE.
 */
static void plx_wr_set_inline_data_list(struct ibv_qp_ex *qp_ex,
					size_t num_buf,
					const struct ibv_data_buf *buf_list)
{
	struct plx_rdma_qp *qp = to_plx_qp_ex(qp_ex);
	struct plx_rdma_batch *b = &qp->batch;
	struct plx_rdma_wr *w = data_wr(qp);
	size_t total = 0;

	if (!w)
		return;
	if (w->wr.opcode != IBV_WR_SEND && w->wr.opcode != IBV_WR_SEND_WITH_IMM &&
	    w->wr.opcode != IBV_WR_RDMA_WRITE &&
	    w->wr.opcode != IBV_WR_RDMA_WRITE_WITH_IMM) {
		wr_fail(qp, EINVAL);
		return;
	}
	for (size_t i = 0; i < num_buf; i++) {
		if (buf_list[i].length > qp->max_inline - total) {
			wr_fail(qp, EINVAL);
			return;
		}
		total += buf_list[i].length;
	}
	if (!grow((void **)&b->bytes, &b->bytes_room, b->nbytes, total, 1)) {
		wr_fail(qp, ENOMEM);
		return;
	}
	w->inline_at = b->nbytes;
	for (size_t i = 0; i < num_buf; i++) {
		if (buf_list[i].length)
			memcpy(&b->bytes[b->nbytes], buf_list[i].addr,
			       buf_list[i].length);
		b->nbytes += buf_list[i].length;
	}
	w->inline_len = total;
	w->is_inline = true;
}

static void plx_wr_set_inline_data(struct ibv_qp_ex *qp_ex, void *addr,
				   size_t length)
{
	struct ibv_data_buf buf = { .addr = addr, .length = length };

	plx_wr_set_inline_data_list(qp_ex, 1, &buf);
}

static void batch_reset(struct plx_rdma_batch *b)
{
	b->nwr = b->nsge = b->nbytes = 0;
	b->err = 0;
}

static void plx_wr_start(struct ibv_qp_ex *qp_ex)
{
	struct plx_rdma_qp *qp = to_plx_qp_ex(qp_ex);

	pthread_spin_lock(&qp->wr_lock);
	batch_reset(&qp->batch);
}

static void plx_wr_abort(struct ibv_qp_ex *qp_ex)
{
	struct plx_rdma_qp *qp = to_plx_qp_ex(qp_ex);

	batch_reset(&qp->batch);
	pthread_spin_unlock(&qp->wr_lock);
}

static int plx_wr_complete(struct ibv_qp_ex *qp_ex)
{
	struct plx_rdma_qp *qp = to_plx_qp_ex(qp_ex);
	struct plx_rdma_batch *b = &qp->batch;
	struct ibv_sge *inl = NULL;
	struct ibv_send_wr *bad;
	int ret = b->err;

	if (ret || !b->nwr)
		goto out;
	/* One SGE for each inline request, over its bytes in the batch. */
	inl = calloc(b->nwr, sizeof(*inl));
	if (!inl) {
		ret = ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < b->nwr; i++) {
		struct plx_rdma_wr *w = &b->wr[i];

		if (qp->vqp.qp.qp_type == IBV_QPT_UD && !w->wr.wr.ud.ah) {
			ret = EINVAL;
			goto out;
		}
		if (w->is_inline) {
			inl[i] = (struct ibv_sge){
				.addr = (uintptr_t)&b->bytes[w->inline_at],
				.length = w->inline_len,
			};
			w->wr.sg_list = &inl[i];
			w->wr.num_sge = 1;
			w->wr.send_flags |= IBV_SEND_INLINE;
		} else {
			w->wr.sg_list = w->wr.num_sge ? &b->sge[w->first_sge] : NULL;
			w->wr.send_flags &= ~IBV_SEND_INLINE;
		}
		w->wr.next = i + 1 < b->nwr ? &b->wr[i + 1].wr : NULL;
	}
	ret = ibv_cmd_post_send(&qp->vqp.qp, &b->wr[0].wr, &bad);
out:
	free(inl);
	batch_reset(b);
	pthread_spin_unlock(&qp->wr_lock);
	return ret;
}

static void plx_rdma_set_send_ops(struct plx_rdma_qp *qp)
{
	struct ibv_qp_ex *q = &qp->vqp.qp_ex;

	q->wr_send = plx_wr_send;
	q->wr_send_imm = plx_wr_send_imm;
	q->wr_rdma_write = plx_wr_rdma_write;
	q->wr_rdma_write_imm = plx_wr_rdma_write_imm;
	q->wr_rdma_read = plx_wr_rdma_read;
	q->wr_atomic_cmp_swp = plx_wr_atomic_cmp_swp;
	q->wr_atomic_fetch_add = plx_wr_atomic_fetch_add;
	q->wr_bind_mw = plx_wr_bind_mw;
	q->wr_local_inv = plx_wr_local_inv;
	q->wr_send_inv = plx_wr_send_inv;
	q->wr_send_tso = plx_wr_send_tso;
	q->wr_set_ud_addr = plx_wr_set_ud_addr;
	q->wr_set_xrc_srqn = plx_wr_set_xrc_srqn;
	q->wr_set_inline_data = plx_wr_set_inline_data;
	q->wr_set_inline_data_list = plx_wr_set_inline_data_list;
	q->wr_set_sge = plx_wr_set_sge;
	q->wr_set_sge_list = plx_wr_set_sge_list;
	q->wr_start = plx_wr_start;
	q->wr_complete = plx_wr_complete;
	q->wr_abort = plx_wr_abort;
	q->wr_atomic_write = plx_wr_atomic_write;
	q->wr_flush = plx_wr_flush;
}

/* Whether the device says it does atomics (its atomic_cap). */
static bool plx_rdma_has_atomics(struct ibv_context *ibctx)
{
	struct ib_uverbs_ex_query_device_resp resp;
	size_t resp_size = sizeof(resp);
	struct ibv_device_attr_ex attr = {};

	if (ibv_cmd_query_device_any(ibctx, NULL, &attr, sizeof(attr), &resp,
				     &resp_size))
		return false;
	return attr.orig_attr.atomic_cap != IBV_ATOMIC_NONE;
}

/*
 * Whether a QP of @type can do every operation of @ops: what the kernel
 * executes for that type, atomics only if the device reports them.
 */
static bool plx_rdma_send_ops_ok(struct ibv_context *ibctx,
				 enum ibv_qp_type type, uint64_t ops)
{
	switch (type) {
	case IBV_QPT_RC:
		if (!(ops & ~(uint64_t)PLX_RDMA_RC_SEND_OPS))
			return true;
		return !(ops & ~(uint64_t)(PLX_RDMA_RC_SEND_OPS |
					   PLX_RDMA_ATOMIC_SEND_OPS)) &&
		       plx_rdma_has_atomics(ibctx);
	case IBV_QPT_UC:
		return !(ops & ~(uint64_t)PLX_RDMA_UC_SEND_OPS);
	case IBV_QPT_UD:
		return !(ops & ~(uint64_t)PLX_RDMA_UD_SEND_OPS);
	default:
		return false;
	}
}

static struct ibv_qp *plx_rdma_create_qp_ex(struct ibv_context *ibctx,
					    struct ibv_qp_init_attr_ex *attr)
{
	struct ib_uverbs_ex_create_qp_resp resp;
	struct ibv_create_qp_ex cmd;
	struct plx_rdma_qp *qp;
	bool ex = attr->comp_mask & IBV_QP_INIT_ATTR_SEND_OPS_FLAGS;
	int ret;

	/*
	 * Refused before the kernel sees anything: what this device has no
	 * use for (XRC domains, RSS, TSO, indirection tables, create flags),
	 * and send operations it does not do on that QP type.
	 */
	if ((attr->comp_mask & ~(uint32_t)PLX_RDMA_QP_COMP_MASK) ||
	    ((attr->comp_mask & IBV_QP_INIT_ATTR_CREATE_FLAGS) &&
	     attr->create_flags) ||
	    (ex && !plx_rdma_send_ops_ok(ibctx, attr->qp_type,
					 attr->send_ops_flags))) {
		errno = EOPNOTSUPP;
		return NULL;
	}

	qp = plx_rdma_qp_alloc();
	if (!qp)
		return NULL;

	/* attr->cap comes back with what the kernel actually granted. */
	ret = ibv_cmd_create_qp_ex2(ibctx, &qp->vqp, attr, &cmd, sizeof(cmd),
				    &resp, sizeof(resp));
	if (ret) {
		pthread_spin_destroy(&qp->wr_lock);
		free(qp);
		errno = ret;
		return NULL;
	}
	if (ex) {
		qp->send_ops = attr->send_ops_flags;
		qp->max_send_wr = attr->cap.max_send_wr;
		qp->max_send_sge = attr->cap.max_send_sge;
		qp->max_inline = attr->cap.max_inline_data;
		plx_rdma_set_send_ops(qp);
		qp->vqp.comp_mask |= VERBS_QP_EX;
	}
	plx_rdma_ctx_get(ibctx);
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
	struct ibv_context *ibctx = ibqp->context;
	int ret;

	ret = ibv_cmd_destroy_qp(ibqp);
	if (ret)
		return ret;
	pthread_spin_destroy(&qp->wr_lock);
	free(qp->batch.wr);
	free(qp->batch.sge);
	free(qp->batch.bytes);
	free(qp);
	plx_rdma_ctx_put(ibctx);
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
	plx_rdma_ctx_get(pd->context);
	return ah;
}

static int plx_rdma_destroy_ah(struct ibv_ah *ah)
{
	struct ibv_context *ibctx = ah->context;
	int ret;

	ret = ibv_cmd_destroy_ah(ah);
	if (ret)
		return ret;
	free(ah);
	plx_rdma_ctx_put(ibctx);
	return 0;
}

/* ibv_close_device(): the device's own reference (see plx_rdma_context). */
static void plx_rdma_free_context(struct ibv_context *ibctx)
{
	plx_rdma_ctx_put(ibctx);
}

/*
 * Verbs not listed stay libibverbs' defaults, which fail with EOPNOTSUPP
 * (memory windows, XRC, flows, work queues, parent domains, ...).
 */
static const struct verbs_context_ops plx_rdma_ctx_ops = {
	.query_device_ex = plx_rdma_query_device,
	.query_port = plx_rdma_query_port,
	.alloc_pd = plx_rdma_alloc_pd,
	.dealloc_pd = plx_rdma_dealloc_pd,
	.reg_mr = plx_rdma_reg_mr,
	.dereg_mr = plx_rdma_dereg_mr,
	.create_cq = plx_rdma_create_cq,
	.create_cq_ex = plx_rdma_create_cq_ex,
	.poll_cq = plx_rdma_poll_cq,
	.req_notify_cq = ibv_cmd_req_notify_cq,
	.resize_cq = plx_rdma_resize_cq,
	.destroy_cq = plx_rdma_destroy_cq,
	.create_srq = plx_rdma_create_srq,
	.modify_srq = plx_rdma_modify_srq,
	.query_srq = plx_rdma_query_srq,
	.destroy_srq = plx_rdma_destroy_srq,
	.post_srq_recv = ibv_cmd_post_srq_recv,
	.create_qp = plx_rdma_create_qp,
	.create_qp_ex = plx_rdma_create_qp_ex,
	.query_qp = plx_rdma_query_qp,
	.modify_qp = plx_rdma_modify_qp,
	.destroy_qp = plx_rdma_destroy_qp,
	.post_send = plx_rdma_post_send,
	.post_recv = ibv_cmd_post_recv,
	.create_ah = plx_rdma_create_ah,
	.destroy_ah = plx_rdma_destroy_ah,
	/* The kernel keeps the groups; nothing of them is the provider's. */
	.attach_mcast = ibv_cmd_attach_mcast,
	.detach_mcast = ibv_cmd_detach_mcast,
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
	atomic_init(&ctx->refs, 1);
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
 * Called after the table match, whatever its result.  A device made with
 * `rdma link add NAME type plx` has the name its user gave it, so the
 * node description the kernel driver sets ("plx_rdma") claims it too.
 * Any device that has a driver_id is refused: an rxe (or other) device
 * someone named plx_rdma0 expects its own provider's udata and mmap'ed
 * queues, and this provider would only confuse its kernel driver.
 */
static bool plx_rdma_match_device(struct verbs_sysfs_dev *sysfs_dev)
{
	char desc[64];

	if (sysfs_dev->driver_id != RDMA_DRIVER_UNKNOWN)
		return false;
	if (sysfs_dev->match &&
	    !strncmp(sysfs_dev->ibdev_name, PLX_RDMA_NAME_PREFIX,
		     strlen(PLX_RDMA_NAME_PREFIX)))
		return true;
	return ibv_read_ibdev_sysfs_file(desc, sizeof(desc), sysfs_dev,
					 "node_desc") > 0 &&
	       !strcmp(desc, PLX_RDMA_NODE_DESC);
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
