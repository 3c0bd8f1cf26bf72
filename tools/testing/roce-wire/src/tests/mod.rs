// SPDX-License-Identifier: GPL-2.0

//! The tests, one file per part of the codec.

mod fuzz;
mod headers;
mod icrc;
mod ip;
mod opcode;
mod packet;
mod psn;
