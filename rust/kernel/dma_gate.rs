// SPDX-License-Identifier: GPL-2.0

//! A gate in front of one device's DMA mappings, so that they can be
//! withdrawn while the memory they map stays in use.
//!
//! A driver that uses a device it does not own (a DMA channel's provider)
//! must unmap everything it mapped for it when that device's driver goes,
//! and its users may still be in the middle of a copy then. Each use of
//! the mappings (making one, handing its bus addresses to the device,
//! waiting for the device) holds a [`GateGuard`]. [`DmaGate::close`]
//! refuses new guards and sleeps until the last one is dropped; the
//! [`ClosedGate`] it returns proves that no guard is left, so that the
//! mappings made under the gate may be torn down
//! (`UserDma::detach`) although the objects that hold them are shared.
//! A gate closes for good.

use kernel::{
    prelude::*,
    sync::{
        atomic::{Atomic, Full, Relaxed, Release},
        Arc, Completion,
    },
};

/// Set in [`DmaGate::users`] once the gate is closed.
const CLOSED: u32 = 1 << 31;

/// The gate of one device's mappings.
#[pin_data]
pub struct DmaGate {
    /// Guards alive, plus [`CLOSED`].
    users: Atomic<u32>,
    /// Completed by the guard whose drop leaves a closed gate without one.
    #[pin]
    drained: Completion,
}

/// A use of the mappings behind a gate: while it lives the gate cannot
/// finish closing, so what was mapped under it stays mapped.
pub struct GateGuard {
    gate: Arc<DmaGate>,
}

/// Proof that a gate is closed and no [`GateGuard`] of it is left, nor
/// will be.
pub struct ClosedGate<'a> {
    gate: &'a DmaGate,
}

impl DmaGate {
    /// An open gate.
    pub fn new() -> Result<Arc<Self>> {
        Arc::pin_init(
            pin_init!(Self {
                users: Atomic::new(0),
                drained <- Completion::new(),
            }),
            GFP_KERNEL,
        )
    }

    /// A guard, unless the gate is closed (or closing).
    pub fn enter(self: &Arc<Self>) -> Option<GateGuard> {
        // Full: the closer's update and this one are ordered, so that one
        // of the two sees the other (see `close`).
        let prev = self.users.fetch_add(1, Full);
        let guard = GateGuard { gate: self.clone() };
        if prev & CLOSED != 0 {
            // Dropping it wakes the closer if it was waiting for this
            // transient count to go.
            drop(guard);
            return None;
        }
        Some(guard)
    }

    /// Whether [`Self::close`] began.
    pub fn is_closed(&self) -> bool {
        self.users.load(Relaxed) & CLOSED != 0
    }

    /// Closes the gate and sleeps until every guard is dropped. The caller
    /// must not hold a guard of this gate.
    pub fn close(&self) -> ClosedGate<'_> {
        let mut cur = self.users.load(Relaxed);
        while cur & CLOSED == 0 {
            match self.users.cmpxchg(cur, cur | CLOSED, Full) {
                Ok(_) => break,
                Err(now) => cur = now,
            }
        }
        // `cur` is the count this close saw; a guard that existed then, or
        // a transient one that came meanwhile, completes `drained` when it
        // takes the last count away.
        if cur & !CLOSED != 0 {
            self.drained.wait_for_completion();
        }
        ClosedGate { gate: self }
    }
}

impl GateGuard {
    /// The gate this guard holds open.
    pub fn gate(&self) -> &Arc<DmaGate> {
        &self.gate
    }

    /// Whether this guard is one of `gate`'s.
    pub fn opens(&self, gate: &DmaGate) -> bool {
        core::ptr::eq(&*self.gate, gate)
    }
}

impl Clone for GateGuard {
    /// One more guard of the same gate: the gate cannot have drained while
    /// `self` lives, so it is given even if the gate is closing.
    fn clone(&self) -> Self {
        self.gate.users.fetch_add(1, Relaxed);
        Self {
            gate: self.gate.clone(),
        }
    }
}

impl Drop for GateGuard {
    fn drop(&mut self) {
        // Release: what the guard's holder did with the mappings comes
        // before the closer's teardown (the completion orders the rest).
        if self.gate.users.fetch_sub(1, Release) == CLOSED | 1 {
            self.gate.drained.complete_all();
        }
    }
}

impl ClosedGate<'_> {
    /// Whether this is `gate`'s proof.
    pub fn is_of(&self, gate: &DmaGate) -> bool {
        core::ptr::eq(self.gate, gate)
    }
}
