// SPDX-License-Identifier: GPL-2.0

//! A bounded FIFO of work requests: a send or receive queue.
//!
//! Its storage is allocated when the QP is created, so posting never
//! allocates (post_send and post_recv must not sleep).

use kernel::{alloc::flags::GFP_KERNEL_ACCOUNT, prelude::*};

/// A ring of at most `capacity` entries, plus one slot for an entry taken
/// out and put back ([`WorkQueue::put_back`]).
pub(crate) struct WorkQueue<T> {
    slots: KVVec<Option<T>>,
    head: usize,
    len: usize,
}

impl<T> WorkQueue<T> {
    /// An empty queue of `capacity` entries (at least one).
    pub(crate) fn new(capacity: usize) -> Result<Self> {
        let slots = capacity.max(1).checked_add(1).ok_or(ENOMEM)?;
        // Charged to the creating task's memory cgroup: a user sizes its
        // queues, and must not be able to take the system's memory.
        let mut slots_vec = KVVec::with_capacity(slots, GFP_KERNEL_ACCOUNT)?;
        for _ in 0..slots {
            slots_vec.push(None, GFP_KERNEL_ACCOUNT)?;
        }
        Ok(Self {
            slots: slots_vec,
            head: 0,
            len: 0,
        })
    }

    /// The slot `i` entries after the head (`i` at most the capacity).
    fn slot(&self, i: usize) -> usize {
        wrap(self.head + i, self.slots.len())
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Entries queued.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Entries the queue holds at most.
    pub(crate) fn capacity(&self) -> usize {
        self.slots.len() - 1
    }

    /// Appends `v`; `ENOMEM` when full (what verbs return for a full queue).
    pub(crate) fn push(&mut self, v: T) -> Result {
        if self.len >= self.capacity() {
            return Err(ENOMEM);
        }
        let at = self.slot(self.len);
        self.slots[at] = Some(v);
        self.len += 1;
        Ok(())
    }

    /// Appends `v`, or gives it back when the queue is full.
    pub(crate) fn try_push(&mut self, v: T) -> core::result::Result<(), T> {
        if self.len >= self.capacity() {
            return Err(v);
        }
        let at = self.slot(self.len);
        self.slots[at] = Some(v);
        self.len += 1;
        Ok(())
    }

    /// Keeps only the entries `keep` accepts, in order.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        let cap = self.slots.len();
        let (head, len) = (self.head, self.len);
        self.len = 0;
        for i in 0..len {
            let from = wrap(head + i, cap);
            if let Some(v) = self.slots[from].take() {
                if keep(&v) {
                    let to = wrap(head + self.len, cap);
                    self.slots[to] = Some(v);
                    self.len += 1;
                }
            }
        }
    }

    /// Puts `v`, the entry [`Self::pop`] took last, back at the head. There
    /// is always room: the queue may have filled up since, but only to its
    /// capacity, and the spare slot is `v`'s; `Err(v)` only for an entry
    /// that was not taken out.
    pub(crate) fn put_back(&mut self, v: T) -> core::result::Result<(), T> {
        if self.len == self.slots.len() {
            return Err(v);
        }
        self.head = wrap(self.head + self.slots.len() - 1, self.slots.len());
        self.slots[self.head] = Some(v);
        self.len += 1;
        Ok(())
    }

    /// The oldest entry, left in place.
    pub(crate) fn front(&self) -> Option<&T> {
        match self.len {
            0 => None,
            _ => self.slots[self.head].as_ref(),
        }
    }

    /// Takes the oldest entry.
    pub(crate) fn pop(&mut self) -> Option<T> {
        if self.len == 0 {
            return None;
        }
        let v = self.slots[self.head].take();
        self.head = self.slot(1);
        self.len -= 1;
        v
    }
}

/// `i` (below twice `cap`) brought into `0..cap`, without a remainder:
/// its division-by-zero panic path is a call objtool does not know to end
/// the function, and the module build treats its warning as an error.
fn wrap(i: usize, cap: usize) -> usize {
    if i >= cap {
        i - cap
    } else {
        i
    }
}
