// SPDX-License-Identifier: GPL-2.0

//! The bound on user pages pinned by all open files together, and each
//! file's share of it.
//!
//! A copy reserves the pages it spans before pinning them and gives them
//! back when it is reaped, so a process cannot pin unbounded memory by
//! submitting without reaping. One file may hold at most half of the
//! bound, so a single opener cannot starve the others. A reservation that
//! does not fit fails with `EAGAIN`: retry once earlier copies are reaped.
//! (Each process is also held to its own `RLIMIT_MEMLOCK` by the pinning
//! itself, see `UserDma`.)

use kernel::{
    prelude::*,
    sync::atomic::{Atomic, Relaxed},
};

/// Pages reserved now, all files.
static PINNED: Atomic<u64> = Atomic::new(0);

/// Pages reserved by one copy; returned on drop.
pub(crate) struct PinReservation(u64);

impl PinReservation {
    /// The pages one file may hold of the `max` all files may hold.
    pub(crate) fn file_share(max: u64) -> u64 {
        max.div_ceil(2)
    }

    /// Reserves `pages` of the `max` all files may hold, for a file that
    /// holds `file_held` pages already.
    pub(crate) fn take(pages: u64, file_held: u64, max: u64) -> Result<Self> {
        if file_held.saturating_add(pages) > Self::file_share(max) {
            return Err(EAGAIN);
        }
        let mut cur = PINNED.load(Relaxed);
        loop {
            let new = cur.checked_add(pages).filter(|&n| n <= max).ok_or(EAGAIN)?;
            match PINNED.cmpxchg(cur, new, Relaxed) {
                Ok(_) => return Ok(Self(pages)),
                Err(seen) => cur = seen,
            }
        }
    }
}

impl PinReservation {
    /// The pages this reservation holds.
    pub(crate) fn pages(&self) -> u64 {
        self.0
    }
}

impl Drop for PinReservation {
    fn drop(&mut self) {
        PINNED.fetch_sub(self.0, Relaxed);
    }
}
