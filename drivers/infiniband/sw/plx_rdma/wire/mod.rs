// SPDX-License-Identifier: GPL-2.0

//! RoCEv2 on the wire: the packet formats `rdma_rxe` speaks.
//!
//! A RoCEv2 packet is an IPv4 or IPv6 datagram to UDP port 4791 whose
//! payload is an InfiniBand transport packet: the Base Transport Header
//! ([`bth`]), the extended headers its opcode calls for ([`ext`],
//! [`opcode`]), the payload, 0 to 3 pad bytes, and the invariant CRC
//! ([`icrc`]).
//!
//! This module is a codec only: it parses received bytes into validated
//! views and writes headers into buffers the caller owns. It keeps no
//! state, allocates nothing and uses only `core`, so that the same files
//! build in the kernel module and in the host test crate
//! `tools/testing/roce-wire`. Parsing takes any bytes from the network and
//! never panics: every access is checked and a malformed packet is a
//! [`WireError`].

// The transport (`net`, `rc`) uses what RC SEND and RDMA WRITE need; the
// rest (READ responses, datagrams, IPv6, ...) is unused in the module
// until the transport carries it, though the host tests cover all of it.
#![allow(dead_code)]

pub(crate) mod bth;
mod bytes;
pub(crate) mod error;
pub(crate) mod ext;
pub(crate) mod icrc;
pub(crate) mod ip;
pub(crate) mod opcode;
pub(crate) mod packet;
pub(crate) mod psn;

pub(crate) use error::WireError;
