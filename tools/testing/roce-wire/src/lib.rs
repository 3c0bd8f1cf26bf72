// SPDX-License-Identifier: GPL-2.0

//! Host tests of `plx_rdma`'s RoCEv2 codec.
//!
//! The codec is the kernel module's `wire` module, included here from its
//! source so that what is tested is what the module builds. It uses only
//! `core`, so it needs nothing else.

#![no_std]
// The lints the kernel builds Rust with, so that a host run catches what
// `make modules` would warn about.
#![warn(unreachable_pub, clippy::cast_lossless, clippy::ignored_unit_patterns)]

#[cfg(test)]
extern crate std;

#[path = "../../../../drivers/infiniband/sw/plx_rdma/wire/mod.rs"]
mod wire;

#[cfg(test)]
mod tests;
