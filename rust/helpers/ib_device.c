// SPDX-License-Identifier: GPL-2.0
/*
 * Thin C glue under the Rust RDMA device abstraction (rust/kernel/rdma/).
 *
 * The kernel's Rust bindings do not cover <rdma/ib_verbs.h>, and ib_core
 * allocates the driver's objects itself (INIT_RDMA_OBJ_SIZE), so this file
 * owns the containers of struct ib_device, ib_pd, ib_cq, ib_qp and ib_mr,
 * fills the verbs attribute structures the core asks for, and forwards
 * every object and work-request operation to a table of Rust functions
 * with flat, fixed-layout arguments (ib_device.h).  It holds no policy:
 * keys, protection, queues and the QP state machine live in Rust.
 *
 * The port is RoCEv2 on a netdev: ib_core fills its GID table from the
 * netdev's addresses, which is what rdma_cm resolves IP addresses to.
 * Kernel consumers get objects too, because ib_core's MAD layer runs the
 * GSI QP (QP1) that the connection manager talks through; they address
 * memory by kernel virtual address with the local DMA lkey (the device
 * uses virtual DMA: it has no DMA device of its own).
 */

#include <linux/netdevice.h>
#include <linux/rtnetlink.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <net/ip.h>
#include <rdma/ib_cache.h>
#include <rdma/ib_verbs.h>
#include <rdma/ib_mad.h>
#include <rdma/rdma_netlink.h>
#include <rdma/uverbs_ioctl.h>

#include "ib_device.h"

/* Mirrored by `RawOps` in rust/kernel/rdma/ffi.rs. */
struct rust_ib_ops {
	int (*alloc_pd)(void *dev, void **pd);
	void (*dealloc_pd)(void *dev, void *pd);
	int (*create_cq)(void *dev, struct ib_cq *ibcq, u32 entries,
			 struct rust_ib_cmd *cmd, void **cq);
	void (*destroy_cq)(void *dev, void *cq);
	int (*poll_cq)(void *cq, struct rust_ib_wc *wc, u32 n);
	int (*req_notify_cq)(void *cq, u32 flags);
	int (*resize_cq)(void *cq, u32 entries, struct rust_ib_cmd *cmd);
	int (*reg_user_mr)(void *dev, void *pd, u64 start, u64 length, u64 iova,
			   u32 access, void **mr, u32 *lkey, u32 *rkey);
	int (*dereg_mr)(void *dev, void *mr);
	int (*create_qp)(void *dev, void *pd, void *send_cq, void *recv_cq,
			 void *srq, struct rust_ib_qp_init *init, void **qp,
			 u32 *qpn);
	int (*modify_qp)(void *qp, const struct rust_ib_qp_attr *attr, u32 mask);
	void (*query_qp)(void *qp, struct rust_ib_qp_attr *attr);
	int (*destroy_qp)(void *dev, void *qp);
	int (*post_send)(void *qp, const struct rust_ib_send_wr *wr);
	int (*post_recv)(void *qp, const struct rust_ib_recv_wr *wr);
	int (*create_srq)(void *dev, void *pd, struct ib_srq *ibsrq,
			  struct rust_ib_srq_attr *attr, void **srq);
	int (*modify_srq)(void *srq, const struct rust_ib_srq_attr *attr,
			  u32 mask);
	void (*query_srq)(void *srq, struct rust_ib_srq_attr *attr);
	void (*destroy_srq)(void *dev, void *srq);
	int (*post_srq_recv)(void *srq, const struct rust_ib_recv_wr *wr);
	void (*hw_stats)(void *dev, u64 *values, u32 n);
	int (*mcast)(void *qp, const u8 *mgid, bool attach);
};

static_assert(sizeof(struct rust_ib_sge) == sizeof(struct ib_sge));
static_assert(sizeof(union rdma_network_hdr) == RUST_IB_GRH_BYTES);

/*
 * The layouts Rust mirrors (rust/kernel/rdma/ffi.rs asserts the same
 * numbers): a field added or moved on one side alone fails the build.
 */
static_assert(sizeof(struct rust_ib_sge) == 16);
static_assert(sizeof(struct rust_ib_ud_dest) == 56);
static_assert(sizeof(struct rust_ib_send_wr) == 128);
static_assert(offsetof(struct rust_ib_send_wr, ud) == 68);
static_assert(sizeof(struct rust_ib_recv_wr) == 24);
static_assert(sizeof(struct rust_ib_wc) == 48);
static_assert(offsetof(struct rust_ib_wc, qp_handle) == 40);
static_assert(sizeof(struct rust_ib_qp_init) == 48);
static_assert(offsetof(struct rust_ib_qp_init, handle) == 40);
static_assert(sizeof(struct rust_ib_qp_attr) == 144);
static_assert(sizeof(struct rust_ib_caps) == 80);
static_assert(sizeof(struct rust_ib_srq_attr) == 12);

/* GIDs per port: the netdev's addresses, each as a RoCEv2 GID. */
#define RUST_IB_GID_TBL_LEN 16
/* The key kernel consumers' SGEs carry (their addresses are virtual). */
#define RUST_IB_LOCAL_DMA_LKEY 0
static_assert(offsetof(struct rust_ib_sge, lkey) == offsetof(struct ib_sge, lkey));

/* Completions handed out per poll_cq call, each with its own QP stub. */
#define RUST_IB_WC_STUBS 8

struct rust_ib_dev {
	struct ib_device ibdev;
	const struct rust_ib_ops *ops;
	void *ctx;
	struct rust_ib_caps caps;
	/*
	 * The port's netdev, compared only (ib_core holds the reference);
	 * cleared, and detached from the port, when it unregisters.  Both
	 * under RTNL.
	 */
	struct net_device *ndev;
	struct notifier_block nb;
	/* The port's counters for `rdma statistic` (names owned by the driver). */
	struct rdma_stat_desc *stat_descs;
	u32 num_stats;
	/* `rdma link delete` may unregister it (IBK_ALLOW_USER_UNREG). */
	bool user_unreg;
	/*
	 * ib_core removed the link type's client from it: it is being
	 * unregistered (or the link type is going), and the driver should
	 * let it go.  Set before the driver is told.
	 */
	bool let_go;
};

struct rust_ib_ucontext {
	struct ib_ucontext ibuc;
};

struct rust_ib_pd {
	struct ib_pd ibpd;
	void *priv;
};

/*
 * uverbs reads wc->qp->qp_num after poll_cq returns, without holding the
 * QP: a pointer to the live ib_qp could be freed by a racing destroy.  So a
 * completion points at one of the CQ's own stubs, which carry only the
 * device and the QP number and live as long as the CQ (which uverbs holds
 * across the poll).  The stubs are used in turn; one is reused only after
 * RUST_IB_WC_STUBS later completions.
 */
struct rust_ib_cq {
	struct ib_cq ibcq;
	void *priv;
	spinlock_t stub_lock;
	unsigned int stub_next;
	struct ib_qp stub[RUST_IB_WC_STUBS];
	/* Rings mapped into the CQ's process (rust_ib_umap), until destroy. */
	struct list_head rings;
};

/*
 * What the driver gets for a user's command on an object: the command's
 * driver data, and the object's list of rings, where a ring made during
 * the command goes (rust_ib_user_ring_new).
 */
struct rust_ib_cmd {
	struct ib_udata *udata;
	struct list_head *rings;
};

struct rust_ib_qp {
	struct ib_qp ibqp;
	void *priv;
};

struct rust_ib_mr {
	struct ib_mr ibmr;
	void *priv;
};

/* An address handle: where a datagram goes, resolved when it is created. */
struct rust_ib_ah {
	struct ib_ah ibah;
	union ib_gid sgid;
	union ib_gid dgid;
	u32 flow_label;
	u8 hop_limit;
	u8 traffic_class;
	u32 net_type;		/* enum rdma_network_type of the source GID */
	bool local;		/* dgid is a GID of this port */
};

static struct rust_ib_dev *to_rdev(struct ib_device *ibdev)
{
	return container_of(ibdev, struct rust_ib_dev, ibdev);
}

static const struct rust_ib_ops *ops_of(struct ib_device *ibdev)
{
	return to_rdev(ibdev)->ops;
}

static void *ctx_of(struct ib_device *ibdev)
{
	return to_rdev(ibdev)->ctx;
}

static int rib_query_device(struct ib_device *ibdev, struct ib_device_attr *a,
			    struct ib_udata *udata)
{
	const struct rust_ib_caps *c = &to_rdev(ibdev)->caps;

	/* ib_core itself asks at registration, without udata. */
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	memset(a, 0, sizeof(*a));
	a->fw_ver = 1;
	a->sys_image_guid = c->node_guid;
	a->max_mr_size = c->max_mr_size;
	a->page_size_cap = PAGE_SIZE;
	a->vendor_id = c->vendor_id;
	a->vendor_part_id = c->vendor_part_id;
	a->hw_ver = c->hw_ver;
	a->max_qp = c->max_qp;
	a->max_qp_wr = c->max_qp_wr;
	a->max_send_sge = c->max_sge;
	a->max_recv_sge = c->max_sge;
	a->max_sge_rd = c->max_sge;
	a->max_cq = c->max_cq;
	a->max_cqe = c->max_cqe;
	a->max_mr = c->max_mr;
	a->max_pd = c->max_pd;
	/*
	 * Outstanding RDMA READs per QP, as plx_rdma's qp.rs allows (rxe's
	 * figure: perftest gives a QP the peer's value).
	 */
	a->max_qp_rd_atom = 128;
	a->max_qp_init_rd_atom = 128;
	a->max_res_rd_atom = 128 * c->max_qp;
	a->atomic_cap = c->atomic_cap;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->max_ah = c->max_qp * 64;
	a->max_mcast_grp = c->max_mcast_grp;
	a->max_mcast_qp_attach = c->max_mcast_qp_attach;
	a->max_total_mcast_qp_attach = c->max_mcast_grp * c->max_mcast_qp_attach;
	a->max_srq = c->max_srq;
	if (c->max_srq)
		a->device_cap_flags |= IB_DEVICE_SRQ_RESIZE;
	a->max_srq_wr = c->max_srq_wr;
	a->max_srq_sge = c->max_sge;
	a->kernel_cap_flags = IBK_LOCAL_DMA_LKEY;
	if (to_rdev(ibdev)->user_unreg)
		a->kernel_cap_flags |= IBK_ALLOW_USER_UNREG;
	return 0;
}

static int rib_query_port(struct ib_device *ibdev, u32 port,
			  struct ib_port_attr *a)
{
	struct net_device *ndev;
	bool up;

	if (port != 1)
		return -EINVAL;
	/* The port is up while its netdev is (it carries the GIDs). */
	ndev = ib_device_get_netdev(ibdev, port);
	up = ndev && netif_running(ndev) && netif_carrier_ok(ndev);
	dev_put(ndev);
	/* ib_query_port() cleared *a. */
	a->state = up ? IB_PORT_ACTIVE : IB_PORT_DOWN;
	a->phys_state = up ? IB_PORT_PHYS_STATE_LINK_UP :
			     IB_PORT_PHYS_STATE_DISABLED;
	a->max_mtu = IB_MTU_4096;
	a->active_mtu = IB_MTU_4096;
	a->gid_tbl_len = RUST_IB_GID_TBL_LEN;
	a->pkey_tbl_len = 1;
	a->max_msg_sz = 1U << 31;
	a->port_cap_flags = IB_PORT_CM_SUP;
	a->max_vl_num = 1;
	a->active_width = IB_WIDTH_4X;
	a->active_speed = IB_SPEED_EDR;
	return 0;
}

static int rib_get_port_immutable(struct ib_device *ibdev, u32 port,
				  struct ib_port_immutable *im)
{
	if (port != 1)
		return -EINVAL;
	im->pkey_tbl_len = 1;
	im->gid_tbl_len = RUST_IB_GID_TBL_LEN;
	/* RoCEv2: GIDs from the netdev, MADs on QP1 for the CM. */
	im->core_cap_flags = RDMA_CORE_PORT_IBA_ROCE_UDP_ENCAP;
	im->max_mad_size = IB_MGMT_MAD_SIZE;
	return 0;
}

static enum rdma_link_layer rib_get_link_layer(struct ib_device *ibdev, u32 port)
{
	return IB_LINK_LAYER_ETHERNET;
}

static int rib_query_pkey(struct ib_device *ibdev, u32 port, u16 index, u16 *pkey)
{
	if (port != 1 || index)
		return -EINVAL;
	*pkey = 0xffff;
	return 0;
}

/* Whether @gid is one of the port's GIDs (of the type of @like). */
static bool rib_gid_is_local(struct ib_device *ibdev, const union ib_gid *gid,
			     const struct ib_gid_attr *like)
{
	const struct ib_gid_attr *found;

	if (!like)
		return false;
	found = rdma_find_gid_by_port(ibdev, gid, like->gid_type, 1, NULL);
	if (IS_ERR(found))
		return false;
	rdma_put_gid_attr(found);
	return true;
}

static int rib_alloc_ucontext(struct ib_ucontext *uc, struct ib_udata *udata)
{
	/* The context carries no state of the driver's. */
	return 0;
}

static void rib_dealloc_ucontext(struct ib_ucontext *uc)
{
}

static void rib_disassociate_ucontext(struct ib_ucontext *uc)
{
	/*
	 * ib_core destroys the objects.  A ring still mapped keeps its pages
	 * (remap_vmalloc_range took a reference on each), so nothing needs
	 * revoking.
	 */
}

/*
 * A ring shared with user space: zeroed pages, charged to the creating
 * task's memory cgroup, mapped contiguously in the kernel (vmap, marked
 * for remap_vmalloc_range) and offered to the process through an mmap
 * entry of its context.  Two references keep the memory: the driver's
 * handle (rust_ib_user_ring_put) and the mmap entry (rib_mmap_free).  A
 * process's mapping keeps a reference on each page it maps.
 *
 * The entry belongs to the context, which only lives as long as the
 * object the ring is on the list of: so the entry is removed while that
 * object is (rust_ib_user_ring_retire, during a command) or at the
 * object's destroy at the latest (rib_rings_remove), both under
 * rib_rings_lock, never from the driver's handle going away.
 */
struct rust_ib_umap {
	struct rdma_user_mmap_entry rdma;
	struct kref ref;
	struct list_head node;	/* on its object's list while listed */
	bool listed;
	void *buf;
	struct page **pages;
	unsigned int npages;
};

static DEFINE_MUTEX(rib_rings_lock);

static void rib_umap_free(struct rust_ib_umap *m)
{
	unsigned int i;

	if (m->buf)
		vunmap(m->buf);
	for (i = 0; i < m->npages; i++)
		__free_page(m->pages[i]);
	kvfree(m->pages);
	kfree(m);
}

static void rib_umap_release(struct kref *ref)
{
	rib_umap_free(container_of(ref, struct rust_ib_umap, ref));
}

/* Removes @m's mmap entry if it is still listed.  Under rib_rings_lock. */
static void rib_ring_unlist(struct rust_ib_umap *m)
{
	lockdep_assert_held(&rib_rings_lock);
	if (!m->listed)
		return;
	list_del(&m->node);
	m->listed = false;
	rdma_user_mmap_entry_remove(&m->rdma);
}

/* Every ring still on @rings: at the object's destroy. */
static void rib_rings_remove(struct list_head *rings)
{
	struct rust_ib_umap *m, *next;

	mutex_lock(&rib_rings_lock);
	list_for_each_entry_safe(m, next, rings, node)
		rib_ring_unlist(m);
	mutex_unlock(&rib_rings_lock);
}

/*
 * A ring of @size bytes for the context of the command @cmd, on the list
 * of the command's object: its memory in @buf, the offset user space
 * passes to mmap() in @offset.  NULL with *@err set on failure.
 */
struct rust_ib_umap *rust_ib_user_ring_new(struct rust_ib_cmd *cmd, size_t size,
					   void **buf, u64 *offset, int *err)
{
	struct ib_ucontext *uc = container_of(cmd->udata,
					      struct uverbs_attr_bundle,
					      driver_udata)->context;
	size_t n = PAGE_ALIGN(size) >> PAGE_SHIFT;
	struct rust_ib_umap *m;

	*err = -ENOMEM;
	if (!n || n > UINT_MAX)
		return NULL;
	m = kzalloc(sizeof(*m), GFP_KERNEL_ACCOUNT);
	if (!m)
		return NULL;
	kref_init(&m->ref);
	m->pages = kvcalloc(n, sizeof(*m->pages), GFP_KERNEL_ACCOUNT);
	if (!m->pages)
		goto fail;
	for (; m->npages < n; m->npages++) {
		m->pages[m->npages] = alloc_page(GFP_KERNEL_ACCOUNT | __GFP_ZERO);
		if (!m->pages[m->npages])
			goto fail;
	}
	m->buf = vmap(m->pages, n, VM_MAP | VM_USERMAP, PAGE_KERNEL);
	if (!m->buf)
		goto fail;
	*err = rdma_user_mmap_entry_insert(uc, &m->rdma, n << PAGE_SHIFT);
	if (*err)
		goto fail;
	/* The entry's reference, given back by rib_mmap_free. */
	kref_get(&m->ref);
	mutex_lock(&rib_rings_lock);
	list_add(&m->node, cmd->rings);
	m->listed = true;
	mutex_unlock(&rib_rings_lock);
	*buf = m->buf;
	*offset = rdma_user_mmap_get_offset(&m->rdma);
	return m;
fail:
	rib_umap_free(m);
	return NULL;
}

/* No new mmap() of the ring: the driver replaced it. */
void rust_ib_user_ring_retire(struct rust_ib_umap *m)
{
	mutex_lock(&rib_rings_lock);
	rib_ring_unlist(m);
	mutex_unlock(&rib_rings_lock);
}

/* The driver's handle goes. */
void rust_ib_user_ring_put(struct rust_ib_umap *m)
{
	kref_put(&m->ref, rib_umap_release);
}

/* ib_copy_to_udata() of at most @len bytes (what the response has room for). */
int rust_ib_udata_respond(struct rust_ib_cmd *cmd, const void *src, size_t len)
{
	return copy_to_user(cmd->udata->outbuf, src,
			    min(len, cmd->udata->outlen)) ? -EFAULT : 0;
}

size_t rust_ib_udata_outlen(struct rust_ib_cmd *cmd)
{
	return cmd->udata->outlen;
}

static int rib_mmap(struct ib_ucontext *uc, struct vm_area_struct *vma)
{
	/* NULL unless the entry exists and the mapping has its exact size. */
	struct rdma_user_mmap_entry *e = rdma_user_mmap_entry_get(uc, vma);
	int ret;

	if (!e)
		return -EINVAL;
	ret = remap_vmalloc_range(vma,
				  container_of(e, struct rust_ib_umap, rdma)->buf,
				  0);
	rdma_user_mmap_entry_put(e);
	return ret;
}

static void rib_mmap_free(struct rdma_user_mmap_entry *e)
{
	kref_put(&container_of(e, struct rust_ib_umap, rdma)->ref,
		 rib_umap_release);
}

static int rib_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct rust_ib_pd *pd = container_of(ibpd, struct rust_ib_pd, ibpd);

	return ops_of(ibpd->device)->alloc_pd(ctx_of(ibpd->device), &pd->priv);
}

static int rib_dealloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	struct rust_ib_pd *pd = container_of(ibpd, struct rust_ib_pd, ibpd);

	ops_of(ibpd->device)->dealloc_pd(ctx_of(ibpd->device), pd->priv);
	return 0;
}

static int rib_create_cq(struct ib_cq *ibcq, const struct ib_cq_init_attr *attr,
			 struct uverbs_attr_bundle *attrs)
{
	struct rust_ib_cq *cq = container_of(ibcq, struct rust_ib_cq, ibcq);
	struct rust_ib_cmd cmd = {
		.udata = attrs ? &attrs->driver_udata : NULL,
		.rings = &cq->rings,
	};
	int i, ret;

	if (attr->flags)
		return -EOPNOTSUPP;
	spin_lock_init(&cq->stub_lock);
	INIT_LIST_HEAD(&cq->rings);
	for (i = 0; i < RUST_IB_WC_STUBS; i++)
		cq->stub[i].device = ibcq->device;
	ret = ops_of(ibcq->device)->create_cq(ctx_of(ibcq->device), ibcq,
					      attr->cqe,
					      cmd.udata ? &cmd : NULL,
					      &cq->priv);
	if (ret) {
		/* ib_core frees the container without a destroy. */
		rib_rings_remove(&cq->rings);
		return ret;
	}
	ibcq->cqe = attr->cqe;
	return 0;
}

static int rib_destroy_cq(struct ib_cq *ibcq, struct ib_udata *udata)
{
	struct rust_ib_cq *cq = container_of(ibcq, struct rust_ib_cq, ibcq);

	ops_of(ibcq->device)->destroy_cq(ctx_of(ibcq->device), cq->priv);
	/* The context outlives its objects, not their rings' handles. */
	rib_rings_remove(&cq->rings);
	return 0;
}

static int rib_poll_cq(struct ib_cq *ibcq, int num, struct ib_wc *wc)
{
	struct rust_ib_cq *cq = container_of(ibcq, struct rust_ib_cq, ibcq);
	/* Initialised: Rust sees it as a slice of Wc. */
	struct rust_ib_wc w[RUST_IB_WC_STUBS] = {};
	int i, got;

	if (num <= 0)
		return 0;
	got = ops_of(ibcq->device)->poll_cq(cq->priv, w,
					    min(num, RUST_IB_WC_STUBS));
	for (i = 0; i < got; i++) {
		struct ib_qp *stub;

		spin_lock(&cq->stub_lock);
		stub = &cq->stub[cq->stub_next++ % RUST_IB_WC_STUBS];
		stub->qp_num = w[i].qp_num;
		spin_unlock(&cq->stub_lock);

		memset(&wc[i], 0, sizeof(wc[i]));
		wc[i].wr_id = w[i].wr_id;
		wc[i].status = w[i].status;
		wc[i].opcode = w[i].opcode;
		wc[i].byte_len = w[i].byte_len;
		/*
		 * A kernel consumer (the MAD layer) owns its QPs and destroys
		 * them only after its last poll: it gets the QP itself.
		 */
		wc[i].qp = rdma_is_kernel_res(&ibcq->res) && w[i].qp_handle ?
			(struct ib_qp *)(uintptr_t)w[i].qp_handle : stub;
		wc[i].ex.imm_data = (__force __be32)w[i].imm_data;
		wc[i].src_qp = w[i].src_qp;
		wc[i].wc_flags = w[i].wc_flags;
		wc[i].network_hdr_type = w[i].network_hdr_type;
		wc[i].port_num = 1;
	}
	return got;
}

static int rib_req_notify_cq(struct ib_cq *ibcq, enum ib_cq_notify_flags flags)
{
	struct rust_ib_cq *cq = container_of(ibcq, struct rust_ib_cq, ibcq);

	return ops_of(ibcq->device)->req_notify_cq(cq->priv, flags);
}

static int rib_resize_user_cq(struct ib_cq *ibcq, unsigned int cqe,
			      struct ib_udata *udata)
{
	struct rust_ib_cq *cq = container_of(ibcq, struct rust_ib_cq, ibcq);
	struct rust_ib_cmd cmd = { .udata = udata, .rings = &cq->rings };
	int ret;

	if (!cqe || cqe > INT_MAX)
		return -EINVAL;
	ret = ops_of(ibcq->device)->resize_cq(cq->priv, cqe,
					      udata ? &cmd : NULL);
	if (!ret)
		ibcq->cqe = cqe;
	return ret;
}

static struct ib_mr *rib_reg_user_mr(struct ib_pd *ibpd, u64 start, u64 length,
				     u64 iova, int access, struct ib_dmah *dmah,
				     struct ib_udata *udata)
{
	struct rust_ib_pd *pd = container_of(ibpd, struct rust_ib_pd, ibpd);
	struct rust_ib_mr *mr;
	int ret;

	if (!udata)
		return ERR_PTR(-EOPNOTSUPP);
	if (dmah)
		return ERR_PTR(-EOPNOTSUPP);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL_ACCOUNT);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	ret = ops_of(ibpd->device)->reg_user_mr(ctx_of(ibpd->device), pd->priv,
						start, length, iova, access,
						&mr->priv, &mr->ibmr.lkey,
						&mr->ibmr.rkey);
	if (ret) {
		kfree(mr);
		return ERR_PTR(ret);
	}
	mr->ibmr.iova = iova;
	mr->ibmr.length = length;
	return &mr->ibmr;
}

/*
 * The DMA MR of a kernel PD: the local DMA lkey, with which kernel
 * consumers name their (virtual) addresses.  ib_core wants the verb from
 * every device kernel clients (MAD, CM, rdma_cm) may use.  No remote
 * access: a global rkey would open all of kernel memory.
 */
static struct ib_mr *rib_get_dma_mr(struct ib_pd *ibpd, int access)
{
	struct rust_ib_mr *mr;

	if (access & ~IB_ACCESS_LOCAL_WRITE)
		return ERR_PTR(-EOPNOTSUPP);
	mr = kzalloc(sizeof(*mr), GFP_KERNEL);
	if (!mr)
		return ERR_PTR(-ENOMEM);
	mr->ibmr.lkey = RUST_IB_LOCAL_DMA_LKEY;
	return &mr->ibmr;
}

static int rib_dereg_mr(struct ib_mr *ibmr, struct ib_udata *udata)
{
	struct rust_ib_mr *mr = container_of(ibmr, struct rust_ib_mr, ibmr);
	int ret;

	/* A DMA MR has no driver state. */
	if (!mr->priv) {
		kfree(mr);
		return 0;
	}
	ret = ops_of(ibmr->device)->dereg_mr(ctx_of(ibmr->device), mr->priv);
	if (ret)
		return ret;
	kfree(mr);
	return 0;
}

static void *cq_priv(struct ib_cq *ibcq)
{
	return ibcq ? container_of(ibcq, struct rust_ib_cq, ibcq)->priv : NULL;
}

/* A shared receive queue: the driver's in priv. */
struct rust_ib_srq {
	struct ib_srq ibsrq;
	void *priv;
};

static struct rust_ib_srq *to_rsrq(struct ib_srq *ibsrq)
{
	return container_of(ibsrq, struct rust_ib_srq, ibsrq);
}

static int rib_create_srq(struct ib_srq *ibsrq, struct ib_srq_init_attr *init,
			  struct ib_udata *udata)
{
	struct rust_ib_pd *pd = container_of(ibsrq->pd, struct rust_ib_pd, ibpd);
	struct rust_ib_srq_attr a = {
		.max_wr = init->attr.max_wr,
		.max_sge = init->attr.max_sge,
		.srq_limit = init->attr.srq_limit,
	};
	int ret;

	/* User space's only: no kernel consumer of this device uses one. */
	if (init->srq_type != IB_SRQT_BASIC || !udata)
		return -EOPNOTSUPP;
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	ret = ops_of(ibsrq->device)->create_srq(ctx_of(ibsrq->device), pd->priv,
						ibsrq, &a, &to_rsrq(ibsrq)->priv);
	if (ret)
		return ret;
	init->attr.max_wr = a.max_wr;
	init->attr.max_sge = a.max_sge;
	return 0;
}

static int rib_modify_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr,
			  enum ib_srq_attr_mask mask, struct ib_udata *udata)
{
	struct rust_ib_srq_attr a = {
		.max_wr = attr->max_wr,
		.max_sge = attr->max_sge,
		.srq_limit = attr->srq_limit,
	};

	return ops_of(ibsrq->device)->modify_srq(to_rsrq(ibsrq)->priv, &a, mask);
}

static int rib_query_srq(struct ib_srq *ibsrq, struct ib_srq_attr *attr)
{
	struct rust_ib_srq_attr a = {};

	ops_of(ibsrq->device)->query_srq(to_rsrq(ibsrq)->priv, &a);
	attr->max_wr = a.max_wr;
	attr->max_sge = a.max_sge;
	attr->srq_limit = a.srq_limit;
	return 0;
}

static int rib_destroy_srq(struct ib_srq *ibsrq, struct ib_udata *udata)
{
	ops_of(ibsrq->device)->destroy_srq(ctx_of(ibsrq->device),
					   to_rsrq(ibsrq)->priv);
	return 0;
}

static int rib_post_srq_recv(struct ib_srq *ibsrq, const struct ib_recv_wr *wr,
			     const struct ib_recv_wr **bad)
{
	const struct rust_ib_ops *ops = ops_of(ibsrq->device);
	int ret = 0;

	for (; wr; wr = wr->next) {
		struct rust_ib_recv_wr w = {
			.wr_id = wr->wr_id,
			.sg_list = (const struct rust_ib_sge *)wr->sg_list,
			.num_sge = wr->num_sge < 0 ? 0 : wr->num_sge,
		};

		ret = wr->num_sge < 0 ? -EINVAL :
					ops->post_srq_recv(to_rsrq(ibsrq)->priv, &w);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	return ret;
}

/* The SRQ's limit was armed and its receives fell below it. */
void rust_ib_srq_limit_reached(struct ib_srq *ibsrq)
{
	struct ib_event ev = {
		.device = ibsrq->device,
		.element.srq = ibsrq,
		.event = IB_EVENT_SRQ_LIMIT_REACHED,
	};

	if (ibsrq->event_handler)
		ibsrq->event_handler(&ev, ibsrq->srq_context);
}

static int rib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *ia,
			 struct ib_udata *udata)
{
	struct rust_ib_qp *qp = container_of(ibqp, struct rust_ib_qp, ibqp);
	struct rust_ib_pd *pd = container_of(ibqp->pd, struct rust_ib_pd, ibpd);
	struct rust_ib_qp_init init = {
		.qp_type = ia->qp_type,
		.sq_sig_all = ia->sq_sig_type == IB_SIGNAL_ALL_WR,
		.max_send_wr = ia->cap.max_send_wr,
		.max_recv_wr = ia->cap.max_recv_wr,
		.max_send_sge = ia->cap.max_send_sge,
		.max_recv_sge = ia->cap.max_recv_sge,
		.max_inline_data = ia->cap.max_inline_data,
		.has_srq = !!ia->srq,
		.create_flags = ia->create_flags,
		.kernel = !udata,
		.handle = (uintptr_t)ibqp,
	};
	u32 qpn = 0;
	int ret;

	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	ret = ops_of(ibqp->device)->create_qp(ctx_of(ibqp->device), pd->priv,
					      cq_priv(ia->send_cq),
					      cq_priv(ia->recv_cq),
					      ia->srq ? to_rsrq(ia->srq)->priv : NULL,
					      &init, &qp->priv, &qpn);
	if (ret)
		return ret;
	ibqp->qp_num = qpn;
	/* What was granted, for the caller (as rxe reports it). */
	ia->cap.max_send_wr = init.max_send_wr;
	ia->cap.max_recv_wr = init.max_recv_wr;
	ia->cap.max_send_sge = init.max_send_sge;
	ia->cap.max_recv_sge = init.max_recv_sge;
	ia->cap.max_inline_data = init.max_inline_data;
	return 0;
}

static int rib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			 struct ib_udata *udata)
{
	struct rust_ib_qp *qp = container_of(ibqp, struct rust_ib_qp, ibqp);
	struct rust_ib_qp_attr a = {};

	if (mask & ~IB_QP_ATTR_STANDARD_BITS)
		return -EOPNOTSUPP;
	if (udata && (udata->inlen || udata->outlen))
		return -EINVAL;
	a.qp_state = attr->qp_state;
	a.cur_qp_state = attr->cur_qp_state;
	a.path_mtu = attr->path_mtu;
	a.qkey = attr->qkey;
	a.rq_psn = attr->rq_psn;
	a.sq_psn = attr->sq_psn;
	a.dest_qp_num = attr->dest_qp_num;
	a.qp_access_flags = attr->qp_access_flags;
	a.pkey_index = attr->pkey_index;
	a.port_num = attr->port_num;
	a.timeout = attr->timeout;
	a.retry_cnt = attr->retry_cnt;
	a.rnr_retry = attr->rnr_retry;
	a.min_rnr_timer = attr->min_rnr_timer;
	a.max_rd_atomic = attr->max_rd_atomic;
	a.max_dest_rd_atomic = attr->max_dest_rd_atomic;
	a.sq_draining = attr->en_sqd_async_notify;
	a.max_send_wr = attr->cap.max_send_wr;
	a.max_recv_wr = attr->cap.max_recv_wr;
	a.max_send_sge = attr->cap.max_send_sge;
	a.max_recv_sge = attr->cap.max_recv_sge;
	a.max_inline_data = attr->cap.max_inline_data;
	if (mask & IB_QP_AV) {
		const struct ib_global_route *grh;

		/* ib_core checked the AV against the port (RoCE: a GRH). */
		if (!(rdma_ah_get_ah_flags(&attr->ah_attr) & IB_AH_GRH))
			return -EINVAL;
		grh = rdma_ah_read_grh(&attr->ah_attr);
		memcpy(a.dgid, grh->dgid.raw, sizeof(a.dgid));
		a.sgid_index = grh->sgid_index;
		a.flow_label = grh->flow_label;
		a.hop_limit = grh->hop_limit;
		a.traffic_class = grh->traffic_class;
		a.dest_local = rib_gid_is_local(ibqp->device, &grh->dgid,
						grh->sgid_attr);
		/* ib_core resolved the source GID (rdma_fill_sgid_attr()). */
		if (grh->sgid_attr)
			memcpy(a.sgid, grh->sgid_attr->gid.raw, sizeof(a.sgid));
	}
	return ops_of(ibqp->device)->modify_qp(qp->priv, &a, mask);
}

/* ib_core checked that @gid is a multicast GID and @ibqp a UD QP. */
static int rib_attach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct rust_ib_qp *qp = container_of(ibqp, struct rust_ib_qp, ibqp);

	return ops_of(ibqp->device)->mcast(qp->priv, gid->raw, true);
}

static int rib_detach_mcast(struct ib_qp *ibqp, union ib_gid *gid, u16 lid)
{
	struct rust_ib_qp *qp = container_of(ibqp, struct rust_ib_qp, ibqp);

	return ops_of(ibqp->device)->mcast(qp->priv, gid->raw, false);
}

static int rib_query_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr, int mask,
			struct ib_qp_init_attr *init)
{
	struct rust_ib_qp *qp = container_of(ibqp, struct rust_ib_qp, ibqp);
	struct rust_ib_qp_attr a = {};

	ops_of(ibqp->device)->query_qp(qp->priv, &a);
	memset(attr, 0, sizeof(*attr));
	memset(init, 0, sizeof(*init));
	attr->qp_state = a.qp_state;
	attr->cur_qp_state = a.qp_state;
	attr->path_mtu = a.path_mtu;
	attr->qkey = a.qkey;
	attr->rq_psn = a.rq_psn;
	attr->sq_psn = a.sq_psn;
	attr->dest_qp_num = a.dest_qp_num;
	attr->qp_access_flags = a.qp_access_flags;
	attr->pkey_index = a.pkey_index;
	attr->port_num = a.port_num;
	attr->timeout = a.timeout;
	attr->retry_cnt = a.retry_cnt;
	attr->rnr_retry = a.rnr_retry;
	attr->min_rnr_timer = a.min_rnr_timer;
	attr->max_rd_atomic = a.max_rd_atomic;
	attr->max_dest_rd_atomic = a.max_dest_rd_atomic;
	attr->sq_draining = a.sq_draining;
	attr->cap.max_send_wr = a.max_send_wr;
	attr->cap.max_recv_wr = a.max_recv_wr;
	attr->cap.max_send_sge = a.max_send_sge;
	attr->cap.max_recv_sge = a.max_recv_sge;
	attr->cap.max_inline_data = a.max_inline_data;
	attr->ah_attr.type = RDMA_AH_ATTR_TYPE_ROCE;
	rdma_ah_set_port_num(&attr->ah_attr, 1);
	rdma_ah_set_grh(&attr->ah_attr, (union ib_gid *)a.dgid, a.flow_label,
			a.sgid_index, a.hop_limit, a.traffic_class);
	init->qp_type = ibqp->qp_type;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = attr->cap;
	init->sq_sig_type = a.sq_sig_all ? IB_SIGNAL_ALL_WR : IB_SIGNAL_REQ_WR;
	return 0;
}

static int rib_destroy_qp(struct ib_qp *ibqp, struct ib_udata *udata)
{
	struct rust_ib_qp *qp = container_of(ibqp, struct rust_ib_qp, ibqp);

	return ops_of(ibqp->device)->destroy_qp(ctx_of(ibqp->device), qp->priv);
}

static int rib_create_ah(struct ib_ah *ibah, struct rdma_ah_init_attr *init,
			 struct ib_udata *udata)
{
	struct rust_ib_ah *ah = container_of(ibah, struct rust_ib_ah, ibah);
	const struct rdma_ah_attr *attr = init->ah_attr;
	const struct ib_global_route *grh;

	/* RoCE addresses by GID: rdma_fill_sgid_attr() resolved the source. */
	if (attr->type != RDMA_AH_ATTR_TYPE_ROCE ||
	    !(rdma_ah_get_ah_flags(attr) & IB_AH_GRH))
		return -EINVAL;
	grh = rdma_ah_read_grh(attr);
	if (!grh->sgid_attr)
		return -EINVAL;
	ah->sgid = grh->sgid_attr->gid;
	ah->dgid = grh->dgid;
	ah->flow_label = grh->flow_label;
	ah->hop_limit = grh->hop_limit;
	ah->traffic_class = grh->traffic_class;
	ah->net_type = rdma_gid_attr_network_type(grh->sgid_attr);
	ah->local = rib_gid_is_local(ibah->device, &grh->dgid, grh->sgid_attr);
	return 0;
}

static int rib_destroy_ah(struct ib_ah *ibah, u32 flags)
{
	return 0;
}

/*
 * The network header of a RoCEv2 datagram of @len payload bytes from @ah's
 * source to its destination, as the receiver finds it in front of the
 * payload: an IPv4 header in the last 20 bytes, or an IPv6 one (a GRH).
 * The lengths count what the wire would carry: UDP, BTH, DETH and ICRC.
 */
static void rib_ud_header(const struct rust_ib_ah *ah, u32 len,
			  struct rust_ib_ud_dest *d)
{
	union rdma_network_hdr *h = (union rdma_network_hdr *)d->header;
	u32 transport = sizeof(struct udphdr) + 12 + 8 + len + 4;

	memset(h, 0, sizeof(*h));
	d->net_type = ah->net_type;
	if (ah->net_type == RDMA_NETWORK_IPV4) {
		struct iphdr *ip = &h->roce4grh;

		ip->version = 4;
		ip->ihl = 5;
		ip->tos = ah->traffic_class;
		ip->tot_len = htons(sizeof(*ip) + transport);
		ip->ttl = ah->hop_limit;
		ip->protocol = IPPROTO_UDP;
		memcpy(&ip->saddr, &ah->sgid.raw[12], sizeof(ip->saddr));
		memcpy(&ip->daddr, &ah->dgid.raw[12], sizeof(ip->daddr));
		ip->check = ip_fast_csum((u8 *)ip, ip->ihl);
	} else {
		struct ib_grh *g = &h->ibgrh;

		g->version_tclass_flow = cpu_to_be32(6U << 28 |
			(u32)ah->traffic_class << 20 | (ah->flow_label & 0xfffff));
		g->paylen = cpu_to_be16(transport);
		g->next_hdr = IPPROTO_UDP;
		g->hop_limit = ah->hop_limit;
		g->sgid = ah->sgid;
		g->dgid = ah->dgid;
	}
}

static int rib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad)
{
	struct rust_ib_qp *qp = container_of(ibqp, struct rust_ib_qp, ibqp);
	const struct rust_ib_ops *ops = ops_of(ibqp->device);
	bool datagram = ibqp->qp_type == IB_QPT_GSI ||
			ibqp->qp_type == IB_QPT_UD;
	int ret = 0;

	for (; wr; wr = wr->next) {
		struct rust_ib_send_wr w = {
			.wr_id = wr->wr_id,
			.sg_list = (const struct rust_ib_sge *)wr->sg_list,
			.num_sge = wr->num_sge < 0 ? 0 : wr->num_sge,
			.opcode = wr->opcode,
			.send_flags = wr->send_flags,
			.imm_data = (__force u32)wr->ex.imm_data,
			.kernel = rdma_is_kernel_res(&ibqp->res),
		};

		if (wr->num_sge < 0) {
			ret = -EINVAL;
		} else if (datagram) {
			const struct ib_ud_wr *ud = ud_wr(wr);
			u32 len = 0;
			int i;

			if (!ud->ah) {
				ret = -EINVAL;
			} else {
				for (i = 0; i < wr->num_sge; i++)
					len += wr->sg_list[i].length;
				w.has_ud = 1;
				w.ud.remote_qpn = ud->remote_qpn;
				w.ud.remote_qkey = ud->remote_qkey;
				w.ud.local = container_of(ud->ah, struct rust_ib_ah,
							  ibah)->local;
				rib_ud_header(container_of(ud->ah,
							   struct rust_ib_ah,
							   ibah), len, &w.ud);
				ret = ops->post_send(qp->priv, &w);
			}
		} else {
			/*
			 * Only RDMA opcodes come in an ib_rdma_wr, only atomics
			 * in an ib_atomic_wr.
			 */
			switch (wr->opcode) {
			case IB_WR_RDMA_WRITE:
			case IB_WR_RDMA_WRITE_WITH_IMM:
			case IB_WR_RDMA_READ:
				w.remote_addr = rdma_wr(wr)->remote_addr;
				w.rkey = rdma_wr(wr)->rkey;
				break;
			case IB_WR_ATOMIC_CMP_AND_SWP:
			case IB_WR_ATOMIC_FETCH_AND_ADD:
				w.remote_addr = atomic_wr(wr)->remote_addr;
				w.rkey = atomic_wr(wr)->rkey;
				w.compare_add = atomic_wr(wr)->compare_add;
				w.swap = atomic_wr(wr)->swap;
				break;
			default:
				break;
			}
			ret = ops->post_send(qp->priv, &w);
		}
		if (ret) {
			*bad = wr;
			break;
		}
	}
	return ret;
}

static int rib_post_recv(struct ib_qp *ibqp, const struct ib_recv_wr *wr,
			 const struct ib_recv_wr **bad)
{
	struct rust_ib_qp *qp = container_of(ibqp, struct rust_ib_qp, ibqp);
	const struct rust_ib_ops *ops = ops_of(ibqp->device);
	int ret = 0;

	for (; wr; wr = wr->next) {
		struct rust_ib_recv_wr w = {
			.wr_id = wr->wr_id,
			.sg_list = (const struct rust_ib_sge *)wr->sg_list,
			.num_sge = wr->num_sge < 0 ? 0 : wr->num_sge,
			.kernel = rdma_is_kernel_res(&ibqp->res),
		};

		ret = wr->num_sge < 0 ? -EINVAL : ops->post_recv(qp->priv, &w);
		if (ret) {
			*bad = wr;
			break;
		}
	}
	return ret;
}

static struct rdma_hw_stats *rib_alloc_hw_port_stats(struct ib_device *ibdev,
						     u32 port)
{
	struct rust_ib_dev *rdev = to_rdev(ibdev);

	return rdma_alloc_hw_stats_struct(rdev->stat_descs, rdev->num_stats,
					  RDMA_HW_STATS_DEFAULT_LIFESPAN);
}

static int rib_get_hw_stats(struct ib_device *ibdev, struct rdma_hw_stats *stats,
			    u32 port, int index)
{
	struct rust_ib_dev *rdev = to_rdev(ibdev);

	if (!port || !stats || stats->num_counters != rdev->num_stats)
		return -EINVAL;
	rdev->ops->hw_stats(rdev->ctx, stats->value, rdev->num_stats);
	return rdev->num_stats;
}

/* Added by rust_ib_device_set_stats(): only a device with counters has them. */
static const struct ib_device_ops rust_ib_stats_ops = {
	.alloc_hw_port_stats = rib_alloc_hw_port_stats,
	.get_hw_stats = rib_get_hw_stats,
};

/*
 * ib_core's last call on a registered device, from whichever
 * unregistration came first (the driver's or `rdma link delete`); ib_core
 * frees the device once its last reference goes.
 */
static void rib_dealloc_driver(struct ib_device *ibdev)
{
	kfree(to_rdev(ibdev)->stat_descs);
}

static const struct ib_device_ops rust_ib_dev_ops = {
	.owner = THIS_MODULE,
	.dealloc_driver = rib_dealloc_driver,
	.driver_id = RDMA_DRIVER_UNKNOWN,
	.uverbs_abi_ver = 1,

	.alloc_pd = rib_alloc_pd,
	.alloc_ucontext = rib_alloc_ucontext,
	.attach_mcast = rib_attach_mcast,
	.create_ah = rib_create_ah,
	.create_user_ah = rib_create_ah,
	.create_cq = rib_create_cq,
	.create_qp = rib_create_qp,
	.create_srq = rib_create_srq,
	.dealloc_pd = rib_dealloc_pd,
	.dealloc_ucontext = rib_dealloc_ucontext,
	.dereg_mr = rib_dereg_mr,
	.destroy_ah = rib_destroy_ah,
	.destroy_cq = rib_destroy_cq,
	.destroy_qp = rib_destroy_qp,
	.destroy_srq = rib_destroy_srq,
	.detach_mcast = rib_detach_mcast,
	.disassociate_ucontext = rib_disassociate_ucontext,
	.get_dma_mr = rib_get_dma_mr,
	.get_link_layer = rib_get_link_layer,
	.get_port_immutable = rib_get_port_immutable,
	.mmap = rib_mmap,
	.mmap_free = rib_mmap_free,
	.modify_qp = rib_modify_qp,
	.modify_srq = rib_modify_srq,
	.poll_cq = rib_poll_cq,
	.post_recv = rib_post_recv,
	.post_send = rib_post_send,
	.post_srq_recv = rib_post_srq_recv,
	.query_device = rib_query_device,
	.query_pkey = rib_query_pkey,
	.query_port = rib_query_port,
	.query_qp = rib_query_qp,
	.query_srq = rib_query_srq,
	.reg_user_mr = rib_reg_user_mr,
	.req_notify_cq = rib_req_notify_cq,
	.resize_user_cq = rib_resize_user_cq,

	INIT_RDMA_OBJ_SIZE(ib_ah, rust_ib_ah, ibah),
	INIT_RDMA_OBJ_SIZE(ib_cq, rust_ib_cq, ibcq),
	INIT_RDMA_OBJ_SIZE(ib_pd, rust_ib_pd, ibpd),
	INIT_RDMA_OBJ_SIZE(ib_qp, rust_ib_qp, ibqp),
	INIT_RDMA_OBJ_SIZE(ib_srq, rust_ib_srq, ibsrq),
	INIT_RDMA_OBJ_SIZE(ib_ucontext, rust_ib_ucontext, ibuc),
};

/*
 * A new, unregistered device forwarding to @ops with @ctx; NULL if out of
 * memory.  Freed with rust_ib_device_dealloc() until it is registered;
 * then ib_core frees it (rib_dealloc_driver) once unregistered and let go.
 */
struct ib_device *rust_ib_device_alloc(const struct rust_ib_ops *ops,
				       void *ctx,
				       const struct rust_ib_caps *caps)
{
	struct rust_ib_dev *rdev = ib_alloc_device(rust_ib_dev, ibdev);
	struct ib_device *ibdev;

	if (!rdev)
		return NULL;
	ibdev = &rdev->ibdev;
	rdev->ops = ops;
	rdev->ctx = ctx;
	rdev->caps = *caps;
	strscpy(ibdev->node_desc, "plx_rdma", sizeof(ibdev->node_desc));
	ibdev->node_type = RDMA_NODE_IB_CA;
	ibdev->phys_port_cnt = 1;
	ibdev->num_comp_vectors = 1;
	ibdev->node_guid = cpu_to_be64(caps->node_guid);
	ibdev->local_dma_lkey = RUST_IB_LOCAL_DMA_LKEY;
	/*
	 * Posting goes through the kernel; polling too, for a CQ not mapped
	 * into its process.
	 */
	ibdev->uverbs_cmd_mask |= BIT_ULL(IB_USER_VERBS_CMD_POLL_CQ) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_SEND) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_RECV) |
				  BIT_ULL(IB_USER_VERBS_CMD_POST_SRQ_RECV) |
				  BIT_ULL(IB_USER_VERBS_CMD_REQ_NOTIFY_CQ);
	ib_set_device_ops(ibdev, &rust_ib_dev_ops);
	return ibdev;
}

/*
 * Gives the unregistered @ibdev @n port counters named @names (strings that
 * outlive the device), read with ops->hw_stats; -ENOMEM.
 */
int rust_ib_device_set_stats(struct ib_device *ibdev, const char *const *names,
			     u32 n)
{
	struct rust_ib_dev *rdev = to_rdev(ibdev);
	u32 i;

	if (!n || rdev->stat_descs)
		return -EINVAL;
	rdev->stat_descs = kcalloc(n, sizeof(*rdev->stat_descs), GFP_KERNEL);
	if (!rdev->stat_descs)
		return -ENOMEM;
	for (i = 0; i < n; i++)
		rdev->stat_descs[i].name = names[i];
	rdev->num_stats = n;
	ib_set_device_ops(ibdev, &rust_ib_stats_ops);
	return 0;
}

/*
 * ib_core holds the port's netdev and must let it go when it unregisters
 * (ib_device_set_netdev()); the port then has no GIDs and is down.
 */
static int rib_netdev_event(struct notifier_block *nb, unsigned long event,
			    void *ptr)
{
	struct rust_ib_dev *rdev = container_of(nb, struct rust_ib_dev, nb);
	struct net_device *ndev = netdev_notifier_info_to_dev(ptr);

	ASSERT_RTNL();
	if (event != NETDEV_UNREGISTER || ndev != rdev->ndev)
		return NOTIFY_DONE;
	ib_device_set_netdev(&rdev->ibdev, NULL, 1);
	rdev->ndev = NULL;
	dev_info(&rdev->ibdev.dev, "netdev %s unregistered: port 1 is down\n",
		 ndev->name);
	return NOTIFY_DONE;
}

/*
 * Registers @ibdev as @name (a printf pattern such as "plx_rdma%d"), its
 * port on the netdev of index @ifindex in namespace @net (held by the
 * caller): -ENODEV if there is none.
 */
int rust_ib_device_register(struct ib_device *ibdev, const char *name,
			    struct net *net, int ifindex)
{
	struct rust_ib_dev *rdev = to_rdev(ibdev);
	struct net_device *ndev;
	int ret;

	/* First the notifier, so that no unregistration goes unseen. */
	rdev->nb.notifier_call = rib_netdev_event;
	ret = register_netdevice_notifier(&rdev->nb);
	if (ret)
		return ret;
	rtnl_lock();
	ndev = __dev_get_by_index(net, ifindex);
	ret = ndev ? ib_device_set_netdev(ibdev, ndev, 1) : -ENODEV;
	if (!ret)
		rdev->ndev = ndev;
	rtnl_unlock();
	/* Software device: ib_core uses virtual DMA for kernel consumers. */
	if (!ret)
		ret = ib_register_device(ibdev, name, NULL);
	if (ret) {
		unregister_netdevice_notifier(&rdev->nb);
		return ret;
	}
	/*
	 * The caller's reference: ib_core deallocates the device at its
	 * first unregistration, which `rdma link delete` may start, and the
	 * memory must stay until the caller lets it go (rust_ib_device_put).
	 */
	get_device(&ibdev->dev);
	return 0;
}

/*
 * Unregisters @ibdev: every object is destroyed (through the ops) before
 * this returns, and no op is called afterwards.  Unregistered already
 * (`rdma link delete`), it only waits for that to end.
 */
void rust_ib_device_unregister(struct ib_device *ibdev)
{
	ib_unregister_device(ibdev);
	unregister_netdevice_notifier(&to_rdev(ibdev)->nb);
}

/* Drops the reference rust_ib_device_register() took. */
void rust_ib_device_put(struct ib_device *ibdev)
{
	put_device(&ibdev->dev);
}

/* Lets `rdma link delete` unregister @ibdev (before it is registered). */
void rust_ib_device_allow_user_unreg(struct ib_device *ibdev)
{
	to_rdev(ibdev)->user_unreg = true;
}

/*
 * Whether the driver should keep @ibdev: no unregistration has begun.
 * (Its refcount would still count ib_core's own while the clients are
 * removed, so the client's mark says it.)
 */
bool rust_ib_device_is_live(struct ib_device *ibdev)
{
	return !READ_ONCE(to_rdev(ibdev)->let_go);
}

/*
 * `rdma link add NAME type TYPE netdev DEV`.  ib_core's link ops carry no
 * context, so a module has one link type, whose handler is kept here; an
 * ib_client tells the handler when one of the module's user-removable
 * devices is unregistered (`rdma link delete` among others), so that the
 * driver frees it.
 */
static rust_ib_newlink_t rib_newlink_fn;
static void (*rib_unregistered_fn)(const void *ctx);
static const void *rib_newlink_ctx;
static struct rdma_link_ops rib_link_ops;

/* ib_core holds @ndev, and so its namespace, for the call. */
static int rib_newlink(const char *ibdev_name, struct net_device *ndev)
{
	return rib_newlink_fn(rib_newlink_ctx, ibdev_name, dev_net(ndev),
			      ndev->ifindex);
}

static int rib_client_add(struct ib_device *ibdev)
{
	/* Only this module's devices, and of those the removable ones. */
	if (ibdev->ops.query_device != rib_query_device ||
	    !to_rdev(ibdev)->user_unreg)
		return -EOPNOTSUPP;
	return 0;
}

static void rib_client_remove(struct ib_device *ibdev, void *client_data)
{
	WRITE_ONCE(to_rdev(ibdev)->let_go, true);
	rib_unregistered_fn(rib_newlink_ctx);
}

static struct ib_client rib_client = {
	.name = "rust_ib_link",
	.add = rib_client_add,
	.remove = rib_client_remove,
};

/* -EBUSY if the module has a link type already. */
int rust_ib_link_register(const char *type, const void *ctx,
			  rust_ib_newlink_t fn,
			  void (*unregistered)(const void *ctx))
{
	int ret;

	if (rib_newlink_fn)
		return -EBUSY;
	rib_newlink_fn = fn;
	rib_unregistered_fn = unregistered;
	rib_newlink_ctx = ctx;
	ret = ib_register_client(&rib_client);
	if (ret) {
		rib_newlink_fn = NULL;
		return ret;
	}
	rib_link_ops.type = type;
	rib_link_ops.newlink = rib_newlink;
	rdma_link_register(&rib_link_ops);
	return 0;
}

/* Waits for newlink calls in flight; none comes afterwards. */
void rust_ib_link_unregister(void)
{
	rdma_link_unregister(&rib_link_ops);
	ib_unregister_client(&rib_client);
	rib_newlink_fn = NULL;
	rib_newlink_ctx = NULL;
}

/* Frees @ibdev after rust_ib_device_register() failed, or before it. */
void rust_ib_device_dealloc(struct ib_device *ibdev)
{
	ib_dealloc_device(ibdev);
}

const char *rust_ib_device_name(struct ib_device *ibdev)
{
	return dev_name(&ibdev->dev);
}

/* Calls the CQ's completion handler (a user CQ's: uverbs wakes its channel). */
void rust_ib_cq_event(struct ib_cq *ibcq)
{
	if (ibcq->comp_handler)
		ibcq->comp_handler(ibcq, ibcq->cq_context);
}

/* Raises IB_EVENT_CQ_ERR on the CQ (a user CQ's: uverbs queues it as an async event). */
void rust_ib_cq_error(struct ib_cq *ibcq)
{
	struct ib_event ev = {
		.device = ibcq->device,
		.element.cq = ibcq,
		.event = IB_EVENT_CQ_ERR,
	};

	if (ibcq->event_handler)
		ibcq->event_handler(&ev, ibcq->cq_context);
}

bool rust_ib_modify_qp_is_ok(u32 cur, u32 next, u32 qp_type, u32 mask)
{
	if (cur > IB_QPS_ERR || next > IB_QPS_ERR || qp_type >= IB_QPT_MAX)
		return false;
	return ib_modify_qp_is_ok(cur, next, qp_type, mask);
}
