/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C glue under the Rust RDMA device abstraction (rust/kernel/rdma/):
 * flat, fixed-layout copies of the verbs structures that cross the border,
 * and the functions Rust calls.  Every structure here is mirrored by a
 * #[repr(C)] type in rust/kernel/rdma/ffi.rs; keep the two in step.
 */
#ifndef RUST_HELPERS_IB_DEVICE_H
#define RUST_HELPERS_IB_DEVICE_H

#include <linux/types.h>

struct ib_device;
struct net;
struct ib_cq;

/* One scatter/gather entry: the layout of struct ib_sge. */
struct rust_ib_sge {
	u64 addr;
	u32 length;
	u32 lkey;
};

/* Bytes of the network header a datagram receive starts with. */
#define RUST_IB_GRH_BYTES 40

/*
 * Where a datagram goes (struct ib_ud_wr with its address handle): the
 * destination QP and Q_Key, whether the destination GID is one of this
 * port's (the loopback fabric reaches nothing else), and the network
 * header the receiver finds in front of the payload (a GRH, or an IPv4
 * header in its last 20 bytes; enum rdma_network_type says which).
 */
struct rust_ib_ud_dest {
	u32 remote_qpn;
	u32 remote_qkey;
	u32 local;
	u32 net_type;
	u8 header[RUST_IB_GRH_BYTES];
};

/* A send work request (struct ib_send_wr and ib_rdma_wr or ib_ud_wr). */
struct rust_ib_send_wr {
	u64 wr_id;
	const struct rust_ib_sge *sg_list;
	u32 num_sge;
	u32 opcode;		/* enum ib_wr_opcode */
	u32 send_flags;		/* enum ib_send_flags */
	u32 imm_data;		/* big endian, as posted */
	u64 remote_addr;
	u64 compare_add;	/* atomics: the value compared or added */
	u64 swap;		/* compare and swap: the value swapped in */
	u32 rkey;
	u32 kernel;		/* posted by a kernel consumer: virtual addresses */
	u32 has_ud;		/* a datagram QP's request: ud is set */
	struct rust_ib_ud_dest ud;
};

/* A receive work request. */
struct rust_ib_recv_wr {
	u64 wr_id;
	const struct rust_ib_sge *sg_list;
	u32 num_sge;
	u32 kernel;		/* posted by a kernel consumer: virtual addresses */
};

/* A work completion, as the driver keeps it. */
struct rust_ib_wc {
	u64 wr_id;
	u32 status;		/* enum ib_wc_status */
	u32 opcode;		/* enum ib_wc_opcode */
	u32 byte_len;
	u32 imm_data;		/* big endian */
	u32 qp_num;
	u32 src_qp;
	u32 wc_flags;		/* enum ib_wc_flags */
	u32 network_hdr_type;	/* enum rdma_network_type, with IB_WC_WITH_NETWORK_HDR_TYPE */
	u64 qp_handle;		/* the QP's handle from create_qp */
};

/* What create_qp asks for (struct ib_qp_init_attr, flattened). */
struct rust_ib_qp_init {
	u32 qp_type;		/* enum ib_qp_type */
	u32 sq_sig_all;
	u32 max_send_wr;
	u32 max_recv_wr;
	u32 max_send_sge;
	u32 max_recv_sge;
	u32 max_inline_data;
	u32 has_srq;
	u32 create_flags;
	u32 kernel;		/* created by a kernel consumer (no udata) */
	u64 handle;		/* the struct ib_qp, for the QP's completions */
};

/* struct ib_srq_attr. */
struct rust_ib_srq_attr {
	u32 max_wr;
	u32 max_sge;
	u32 srq_limit;
};

/* struct ib_qp_attr, flattened: the fields an RC or GSI QP uses. */
struct rust_ib_qp_attr {
	u32 qp_state;
	u32 cur_qp_state;
	u32 path_mtu;
	u32 qkey;
	u32 rq_psn;
	u32 sq_psn;
	u32 dest_qp_num;
	u32 qp_access_flags;
	u32 pkey_index;
	u32 port_num;
	u32 timeout;
	u32 retry_cnt;
	u32 rnr_retry;
	u32 min_rnr_timer;
	u32 max_rd_atomic;
	u32 max_dest_rd_atomic;
	/* The address vector (RoCE: a GRH; IB_QP_AV). */
	u8 dgid[16];
	u32 sgid_index;
	u32 flow_label;
	u32 hop_limit;
	u32 traffic_class;
	u32 dest_local;		/* dgid is one of this port's GIDs */
	u32 sq_draining;
	/* Capabilities, as created (query) or asked for (IB_QP_CAP). */
	u32 max_send_wr;
	u32 max_recv_wr;
	u32 max_send_sge;
	u32 max_recv_sge;
	u32 max_inline_data;
	u32 sq_sig_all;		/* query only */
	/* The source GID the AV's sgid_index names (modify, IB_QP_AV). */
	u8 sgid[16];
};

/* Limits the device reports in query_device and enforces. */
struct rust_ib_caps {
	u64 max_mr_size;
	u64 node_guid;
	u32 max_qp;
	u32 max_qp_wr;
	u32 max_sge;
	u32 max_cq;
	u32 max_cqe;
	u32 max_mr;
	u32 max_pd;
	u32 vendor_id;
	u32 vendor_part_id;
	u32 hw_ver;
	u32 atomic_cap;		/* enum ib_atomic_cap */
	u32 max_srq;
	u32 max_srq_wr;
	u32 max_mcast_grp;
	u32 max_mcast_qp_attach;	/* per group */
};

struct rust_ib_ops;

struct ib_device *rust_ib_device_alloc(const struct rust_ib_ops *ops,
				       void *ctx,
				       const struct rust_ib_caps *caps);
int rust_ib_device_register(struct ib_device *ibdev, const char *name,
			    struct net *net, int ifindex);
void rust_ib_device_unregister(struct ib_device *ibdev);
void rust_ib_device_dealloc(struct ib_device *ibdev);
void rust_ib_device_put(struct ib_device *ibdev);
void rust_ib_device_allow_user_unreg(struct ib_device *ibdev);
bool rust_ib_device_is_live(struct ib_device *ibdev);

/* `rdma link add`: the device's name, its netdev's index, in init_net. */
typedef int (*rust_ib_newlink_t)(const void *ctx, const char *name,
				 struct net *net, int ifindex);
int rust_ib_link_register(const char *type, const void *ctx,
			  rust_ib_newlink_t fn,
			  void (*unregistered)(const void *ctx));
void rust_ib_link_unregister(void);
int rust_ib_device_set_stats(struct ib_device *ibdev, const char *const *names,
			     u32 n);
const char *rust_ib_device_name(struct ib_device *ibdev);
void rust_ib_cq_event(struct ib_cq *ibcq);
void rust_ib_cq_error(struct ib_cq *ibcq);
void rust_ib_srq_limit_reached(struct ib_srq *ibsrq);
bool rust_ib_modify_qp_is_ok(u32 cur, u32 next, u32 qp_type, u32 mask);

struct rust_ib_cmd;
struct rust_ib_umap;
struct rust_ib_umap *rust_ib_user_ring_new(struct rust_ib_cmd *cmd, size_t size,
					   void **buf, u64 *offset, int *err);
void rust_ib_user_ring_retire(struct rust_ib_umap *m);
void rust_ib_user_ring_put(struct rust_ib_umap *m);
int rust_ib_udata_respond(struct rust_ib_cmd *cmd, const void *src, size_t len);
size_t rust_ib_udata_outlen(struct rust_ib_cmd *cmd);

#endif /* RUST_HELPERS_IB_DEVICE_H */
