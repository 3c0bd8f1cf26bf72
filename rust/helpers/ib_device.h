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
struct ib_cq;

/* One scatter/gather entry: the layout of struct ib_sge. */
struct rust_ib_sge {
	u64 addr;
	u32 length;
	u32 lkey;
};

/* A send work request (struct ib_send_wr and, for RDMA, ib_rdma_wr). */
struct rust_ib_send_wr {
	u64 wr_id;
	const struct rust_ib_sge *sg_list;
	u32 num_sge;
	u32 opcode;		/* enum ib_wr_opcode */
	u32 send_flags;		/* enum ib_send_flags */
	u32 imm_data;		/* big endian, as posted */
	u64 remote_addr;
	u32 rkey;
	u32 reserved;
};

/* A receive work request. */
struct rust_ib_recv_wr {
	u64 wr_id;
	const struct rust_ib_sge *sg_list;
	u32 num_sge;
	u32 reserved;
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
	u32 reserved;
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
	u32 reserved;
};

/* struct ib_qp_attr, flattened: the fields an RC QP uses. */
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
	u32 dlid;
	u32 sq_draining;
	/* Capabilities, as created (query) or asked for (IB_QP_CAP). */
	u32 max_send_wr;
	u32 max_recv_wr;
	u32 max_send_sge;
	u32 max_recv_sge;
	u32 max_inline_data;
	u32 sq_sig_all;		/* query only */
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
};

struct rust_ib_ops;

struct ib_device *rust_ib_device_alloc(const struct rust_ib_ops *ops,
				       void *ctx,
				       const struct rust_ib_caps *caps);
int rust_ib_device_register(struct ib_device *ibdev, const char *name);
void rust_ib_device_unregister(struct ib_device *ibdev);
void rust_ib_device_dealloc(struct ib_device *ibdev);
const char *rust_ib_device_name(struct ib_device *ibdev);
void rust_ib_cq_event(struct ib_cq *ibcq);
bool rust_ib_modify_qp_is_ok(u32 cur, u32 next, u32 qp_type, u32 mask);

#endif /* RUST_HELPERS_IB_DEVICE_H */
