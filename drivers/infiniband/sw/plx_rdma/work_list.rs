// SPDX-License-Identifier: GPL-2.0

//! A list that one work item keeps for itself.
//!
//! The receive work item keeps lists of what it has yet to do (the
//! copies of a burst, the READs it answers) from one datagram to the
//! next. Only it uses them, from one thread, so no lock is needed: a
//! `Cell` holds the list, and it is taken out while it is worked on (no
//! `RefCell`, whose borrow checks could panic). Nothing done with a list
//! taken out may come back to it.

use core::cell::Cell;
use kernel::prelude::*;

/// A list only its owner's thread uses (see the module's text).
pub(crate) struct WorkList<T> {
    list: Cell<KVec<T>>,
}

impl<T> WorkList<T> {
    pub(crate) const fn new() -> Self {
        Self {
            list: Cell::new(KVec::new()),
        }
    }

    /// Calls `f` with the list.
    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut KVec<T>) -> R) -> R {
        let mut list = self.list.replace(KVec::new());
        let r = f(&mut list);
        self.list.set(list);
        r
    }

    /// Takes the whole list out, leaving an empty one.
    pub(crate) fn take_all(&self) -> KVec<T> {
        self.list.replace(KVec::new())
    }

    /// Puts `list` back (after [`Self::take_all`]).
    pub(crate) fn put_back(&self, list: KVec<T>) {
        self.list.set(list);
    }
}
