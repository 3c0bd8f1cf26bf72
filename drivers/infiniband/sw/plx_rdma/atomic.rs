// SPDX-License-Identifier: GPL-2.0

//! Atomic operations on a memory region: COMPARE SWAP and FETCH ADD of
//! eight aligned bytes, executed by the CPU.
//!
//! A memcpy engine moves bytes; it cannot read a value, decide and write
//! back in one step that no other access comes between. So the engine has
//! no part in an atomic, here or in rxe: the responder's CPU reads the
//! target, computes and writes it back while it holds the device's atomic
//! lock. That is what the device reports as `IB_ATOMIC_HCA`: atomic
//! against the other atomics of this device, not against the CPU or the
//! engine writing the same bytes by other means. Both fabrics (the
//! in-host one of `exec.rs`, the wire of `rc.rs`) execute their atomics
//! here, and return the original value to the requester.

use crate::{exec::Piece, rdma::types::wr_opcode, Device};
use kernel::prelude::*;

/// The bytes an atomic reads and writes, at an address aligned to them.
pub(crate) const ATOMIC_LEN: u64 = 8;

/// An atomic operation and its operands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtomicOp {
    /// Writes `swap` if the target holds `compare`.
    CompareSwap { compare: u64, swap: u64 },
    /// Adds `add` (modulo 2^64).
    FetchAdd { add: u64 },
}

impl AtomicOp {
    /// The operation of work request opcode `opcode`, if it is an atomic.
    pub(crate) fn of_wr(opcode: u32, compare_add: u64, swap: u64) -> Option<Self> {
        match opcode {
            wr_opcode::ATOMIC_CMP_AND_SWP => Some(Self::CompareSwap {
                compare: compare_add,
                swap,
            }),
            wr_opcode::ATOMIC_FETCH_AND_ADD => Some(Self::FetchAdd { add: compare_add }),
            _ => None,
        }
    }

    /// The value the target holds after the operation, from `old`.
    fn apply(self, old: u64) -> u64 {
        match self {
            Self::CompareSwap { compare, swap } if old == compare => swap,
            Self::CompareSwap { .. } => old,
            Self::FetchAdd { add } => old.wrapping_add(add),
        }
    }
}

/// Whether `va` may be the target of an atomic (IBA C9-28: aligned to
/// the eight bytes).
pub(crate) fn aligned(va: u64) -> bool {
    va & (ATOMIC_LEN - 1) == 0
}

/// Executes `op` on the eight bytes `target` names (in host byte order,
/// as every RDMA device treats them), under `dev`'s atomic lock; returns
/// the value they held before. The caller checked the rights, the bounds
/// and the alignment of the address; `EFAULT` if the region does not
/// hold the bytes.
pub(crate) fn execute(dev: &Device, target: &Piece, op: AtomicOp) -> Result<u64> {
    if target.len != ATOMIC_LEN {
        return Err(EINVAL);
    }
    let at = usize::try_from(target.offset).map_err(|_| EFAULT)?;
    let _atomics = dev.atomics.lock();
    let mut old = [0u8; ATOMIC_LEN as usize];
    target.mr.mem.read_at(at, &mut old)?;
    let old = u64::from_ne_bytes(old);
    target.mr.mem.write_at(at, &op.apply(old).to_ne_bytes())?;
    Ok(old)
}
