// SPDX-License-Identifier: GPL-2.0

//! One thread at a time, waited for interruptibly.
//!
//! A [`Turn`] is what a mutex would be for work that touches user memory
//! while it holds it: the holder may wait on a page fault for as long as
//! user space likes (a userfaultfd nobody serves), and the threads waiting
//! behind it must stay killable and interruptible, which a kernel mutex
//! waiter is not.

use kernel::{
    new_condvar, new_mutex,
    prelude::*,
    sync::{CondVar, Mutex},
};

/// A turn that one thread holds at a time.
#[pin_data]
pub(crate) struct Turn {
    /// Whether a thread holds the turn; held only to look and to change.
    #[pin]
    taken: Mutex<bool>,
    /// Woken when the turn is given back.
    #[pin]
    given_back: CondVar,
}

/// The turn, held until dropped.
pub(crate) struct TurnGuard<'a>(&'a Turn);

impl Turn {
    /// A turn nobody holds.
    pub(crate) fn new() -> impl PinInit<Self> {
        pin_init!(Self {
            taken <- new_mutex!(false, "plx_dma_copy_turn"),
            given_back <- new_condvar!("plx_dma_copy_turn_given_back"),
        })
    }

    /// Waits for the turn. `EINTR` if a signal arrives first.
    pub(crate) fn take(&self) -> Result<TurnGuard<'_>> {
        let mut taken = self.taken.lock();
        while *taken {
            if self.given_back.wait_interruptible(&mut taken) {
                return Err(EINTR);
            }
        }
        *taken = true;
        Ok(TurnGuard(self))
    }
}

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        *self.0.taken.lock() = false;
        self.0.given_back.notify_one();
    }
}
