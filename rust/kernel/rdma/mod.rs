// SPDX-License-Identifier: GPL-2.0

//! RDMA device (`ib_device`) abstractions: a driver's side of ib_core.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A driver implements [`device::Driver`] for its device type, with its own
//! types for protection domains, completion queues, memory regions and
//! queue pairs, and registers it with [`device::Registration`]. ib_core
//! (and through it uverbs, libibverbs and the tools on top) then calls the
//! driver back for every verb; the abstraction keeps each object's Rust
//! value alive from its creation to its destruction. A driver may also
//! create devices at a user's request, `rdma link add NAME type TYPE
//! netdev DEV` as for rxe, through a [`link::LinkType`].
//!
//! The port is RoCEv2 on a netdev, whose addresses ib_core turns into the
//! port's GIDs; kernel consumers (ib_core's MAD layer, on the GSI QP) post
//! kernel memory, which reaches the driver only as [`kernel_sgl`] lists.
//!
//! The kernel's Rust bindings do not cover `<rdma/ib_verbs.h>`, and ib_core
//! allocates the drivers' objects itself, so the C containers and the
//! translation of the verbs structures live in `rust/helpers/ib_device.c`.
//! All `unsafe` code of the project's RDMA support is in this module.

pub mod cq;
pub mod device;
mod ffi;
pub mod kernel_sgl;
pub mod link;
pub mod srq;
pub mod types;
pub mod user_ring;
