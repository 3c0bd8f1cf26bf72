// SPDX-License-Identifier: GPL-2.0

//! Where the descriptors of a file's copies report their end.
//!
//! A copy is split into descriptors; each one's callback lands here, in
//! the provider's completion context, and only updates counters under a
//! spinlock: unmapping and unpinning sleep, so they are left to the thread
//! that reaps the copy. A copy is finished when all of its descriptors
//! are; copies submitted for later reaping then join the done queue, and
//! waiters are woken.
//!
//! Each descriptor reports with a [`Tag`]: its slot and the slot's
//! generation when the copy was armed. A callback that arrives after its
//! copy was given up and the slot reused (a terminate that dropped it late,
//! a provider bug) carries an old generation and is ignored, so it can
//! never finish the copy that now holds the slot.

use crate::dmaengine::{client::CopySink, TxResult};
use kernel::{
    new_condvar, new_spinlock_irq,
    prelude::*,
    sync::{ArcBorrow, CondVar, CondVarTimeoutResult, SpinLockIrq},
    time::msecs_to_jiffies,
};

/// How a finished copy ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Every byte copied.
    Copied,
    /// The engine failed to read or write (`EIO`).
    DeviceError,
    /// Aborted: the channel was terminated or recovered, or its device
    /// went away (`ECANCELED`).
    Aborted,
    /// Not all descriptors could be queued (the errno).
    NotQueued(Error),
}

impl Outcome {
    /// Worse of two outcomes: queueing errors, then device errors, then
    /// aborts.
    fn worst(self, other: Self) -> Self {
        let rank = |o: Self| match o {
            Self::Copied => 0,
            Self::Aborted => 1,
            Self::DeviceError => 2,
            Self::NotQueued(_) => 3,
        };
        if rank(other) > rank(self) {
            other
        } else {
            self
        }
    }

    /// The errno a caller sees, or `None` when the copy succeeded.
    pub(crate) fn error(self) -> Option<Error> {
        match self {
            Self::Copied => None,
            Self::DeviceError => Some(EIO),
            Self::Aborted => Some(ECANCELED),
            Self::NotQueued(e) => Some(e),
        }
    }
}

/// A descriptor's report address: slot and generation, packed into the
/// `usize` tag the client abstraction carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Tag {
    slot: u16,
    generation: u16,
}

impl Tag {
    fn unpack(raw: usize) -> Self {
        Self {
            slot: (raw & 0xffff) as u16,
            generation: ((raw >> 16) & 0xffff) as u16,
        }
    }

    /// The packed form, for [`crate::dmaengine::client::MemcpyChannel::submit`].
    pub(crate) fn raw(self) -> usize {
        usize::from(self.slot) | (usize::from(self.generation) << 16)
    }
}

/// One copy slot.
#[derive(Clone, Copy)]
struct Slot {
    /// Bumped each time the slot is armed for a new copy.
    generation: u16,
    /// Descriptors not yet ended.
    remaining: u32,
    outcome: Outcome,
    /// Joins the done queue when finished (submitted, not synchronous).
    queued_for_reap: bool,
}

impl Default for Slot {
    fn default() -> Self {
        Self {
            generation: 0,
            remaining: 0,
            outcome: Outcome::Copied,
            queued_for_reap: false,
        }
    }
}

struct State {
    slots: KVec<Slot>,
    /// Finished slots waiting for a reaper, oldest first, as a ring.
    done: KVec<usize>,
    done_head: usize,
    done_len: usize,
    /// Descriptors ended so far: what waiters for progress watch.
    ended: u64,
}

/// Completion state of one file's copies.
#[pin_data]
pub(crate) struct Tracker {
    #[pin]
    state: SpinLockIrq<State>,
    #[pin]
    cond: CondVar,
}

/// Why a wait ended without what it waited for.
pub(crate) enum WaitEnd {
    TimedOut,
    Interrupted,
}

impl Tracker {
    /// A tracker for up to `slots` copies in flight (at most 65536).
    pub(crate) fn new(slots: usize) -> Result<impl PinInit<Self>> {
        if slots > usize::from(u16::MAX) + 1 {
            return Err(EINVAL);
        }
        let mut s = KVec::with_capacity(slots, GFP_KERNEL)?;
        let mut done = KVec::with_capacity(slots, GFP_KERNEL)?;
        for _ in 0..slots {
            s.push(Slot::default(), GFP_KERNEL)?;
            done.push(0, GFP_KERNEL)?;
        }
        Ok(pin_init!(Self {
            state <- new_spinlock_irq!(State { slots: s, done, done_head: 0, done_len: 0, ended: 0 }, "plx_dma_copy_tracker"),
            cond <- new_condvar!("plx_dma_copy_done"),
        }))
    }

    /// Expects `descriptors` ends for `slot` before it is finished, in a
    /// new generation. Returns the tag its descriptors report with.
    pub(crate) fn arm(&self, slot: usize, descriptors: u32, queued_for_reap: bool) -> Tag {
        let mut st = self.state.lock();
        let mut tag = Tag {
            slot: slot as u16,
            generation: 0,
        };
        if let Some(s) = st.slots.get_mut(slot) {
            tag.generation = s.generation.wrapping_add(1);
            *s = Slot {
                generation: tag.generation,
                remaining: descriptors,
                outcome: Outcome::Copied,
                queued_for_reap,
            };
        }
        tag
    }

    /// Only part of the armed descriptors were queued, because of `err`:
    /// `not_submitted` will never end. Returns whether the slot is
    /// finished now.
    pub(crate) fn cut_short(&self, tag: Tag, not_submitted: u32, err: Error) -> bool {
        self.settle(tag, not_submitted, Outcome::NotQueued(err))
    }

    /// Counts `ended` descriptors of the copy `tag` names as over with
    /// `outcome`; on the last one the slot is finished and waiters are
    /// woken. Returns whether the slot is finished. A stale tag (the slot
    /// has been armed again since) changes nothing.
    fn settle(&self, tag: Tag, ended: u32, outcome: Outcome) -> bool {
        let slot = usize::from(tag.slot);
        let mut st = self.state.lock();
        let Some(s) = st.slots.get_mut(slot) else {
            return true;
        };
        if s.generation != tag.generation || s.remaining == 0 {
            return s.remaining == 0;
        }
        s.remaining = s.remaining.saturating_sub(ended);
        s.outcome = s.outcome.worst(outcome);
        let finished = s.remaining == 0;
        st.ended += u64::from(ended);
        if finished {
            Self::finish(&mut st, slot);
        }
        drop(st);
        if finished {
            self.cond.notify_all();
        }
        finished
    }

    fn finish(st: &mut State, slot: usize) {
        if !st.slots[slot].queued_for_reap {
            return;
        }
        let cap = st.done.len();
        if cap == 0 || st.done_len == cap {
            return;
        }
        let at = (st.done_head + st.done_len) % cap;
        st.done[at] = slot;
        st.done_len += 1;
    }

    /// The outcome of `slot` if it is finished.
    pub(crate) fn finished(&self, slot: usize) -> Option<Outcome> {
        let st = self.state.lock();
        st.slots
            .get(slot)
            .filter(|s| s.remaining == 0)
            .map(|s| s.outcome)
    }

    /// Waits interruptibly, up to `timeout_ms`, until `ready` holds.
    fn wait_until(
        &self,
        timeout_ms: u32,
        ready: impl Fn(&State) -> bool,
    ) -> core::result::Result<(), WaitEnd> {
        let mut left = msecs_to_jiffies(timeout_ms);
        let mut st = self.state.lock();
        while !ready(&st) {
            if left == 0 {
                return Err(WaitEnd::TimedOut);
            }
            match self.cond.wait_interruptible_timeout(&mut st, left) {
                CondVarTimeoutResult::Woken { jiffies } => left = jiffies,
                CondVarTimeoutResult::Timeout => left = 0,
                CondVarTimeoutResult::Signal { .. } => return Err(WaitEnd::Interrupted),
            }
        }
        Ok(())
    }

    /// Waits until `slot` is finished.
    pub(crate) fn wait_slot(
        &self,
        slot: usize,
        timeout_ms: u32,
    ) -> core::result::Result<Outcome, WaitEnd> {
        self.wait_until(timeout_ms, |st| {
            st.slots.get(slot).is_none_or(|s| s.remaining == 0)
        })?;
        self.finished(slot).ok_or(WaitEnd::TimedOut)
    }

    /// Waits until at least `n` finished copies wait for a reaper.
    pub(crate) fn wait_done(&self, n: usize, timeout_ms: u32) -> core::result::Result<(), WaitEnd> {
        self.wait_until(timeout_ms, |st| st.done_len >= n)
    }

    /// Waits up to `timeout_ms` until any descriptor ends.
    pub(crate) fn wait_any_progress(&self, timeout_ms: u32) -> core::result::Result<(), WaitEnd> {
        let before = self.state.lock().ended;
        self.wait_until(timeout_ms, |st| st.ended != before)
    }

    /// The oldest finished copy waiting for a reaper, without taking it.
    pub(crate) fn peek_done(&self) -> Option<(usize, Outcome)> {
        let st = self.state.lock();
        if st.done_len == 0 {
            return None;
        }
        let slot = st.done[st.done_head];
        Some((slot, st.slots[slot].outcome))
    }

    /// Takes the oldest finished copy off the done queue.
    pub(crate) fn pop_done(&self) {
        let mut st = self.state.lock();
        if st.done_len > 0 {
            st.done_head = (st.done_head + 1) % st.done.len();
            st.done_len -= 1;
        }
    }
}

impl CopySink for Tracker {
    fn descriptor_done(this: ArcBorrow<'_, Self>, tag: usize, result: TxResult, residue: u32) {
        let outcome = match result {
            TxResult::NoError if residue == 0 => Outcome::Copied,
            TxResult::NoError | TxResult::ReadFailed | TxResult::WriteFailed => {
                Outcome::DeviceError
            }
            TxResult::Aborted => Outcome::Aborted,
        };
        this.settle(Tag::unpack(tag), 1, outcome);
    }
}
