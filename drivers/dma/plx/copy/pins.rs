// SPDX-License-Identifier: GPL-2.0

//! The bound on user pages pinned by all open files together, and each
//! file's share of it.
//!
//! A copy reserves the pages it spans before pinning them and gives them
//! back when it is reaped, so a process cannot pin unbounded memory by
//! submitting without reaping. One file may hold at most half of the
//! bound, so a single file cannot take it all (a process with several
//! files can: taking a channel needs `CAP_SYS_RAWIO`, and the pinning
//! process's `RLIMIT_MEMLOCK` applies too). A reservation that
//! does not fit fails with `EAGAIN`: retry once earlier copies are reaped.
//! (Each process is also held to its own `RLIMIT_MEMLOCK` by the pinning
//! itself, see `UserDma`.)

use kernel::{
    alloc::flags::GFP_KERNEL_ACCOUNT,
    prelude::*,
    sync::{
        atomic::{Atomic, Relaxed},
        Arc,
    },
};

/// Pages reserved now, all files.
static PINNED: Atomic<u64> = Atomic::new(0);

/// Adds `pages` to `counter` unless that takes it beyond `max`.
fn reserve(counter: &Atomic<u64>, pages: u64, max: u64) -> Result {
    let mut cur = counter.load(Relaxed);
    loop {
        let new = cur.checked_add(pages).filter(|&n| n <= max).ok_or(EAGAIN)?;
        match counter.cmpxchg(cur, new, Relaxed) {
            Ok(_) => return Ok(()),
            Err(seen) => cur = seen,
        }
    }
}

/// The pages one file holds reserved. Counted apart from the file's lock,
/// so that reserving and pinning need no lock of the file's.
pub(crate) struct FilePins(Atomic<u64>);

impl FilePins {
    /// A file's count, at zero.
    pub(crate) fn new() -> Result<Arc<Self>> {
        Ok(Arc::new(Self(Atomic::new(0)), GFP_KERNEL_ACCOUNT)?)
    }

    /// The pages the file holds reserved now.
    pub(crate) fn pages(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// Pages reserved by one copy, in its file's count and in the bound of all
/// files; given back to both on drop.
pub(crate) struct PinReservation {
    pages: u64,
    file: Arc<FilePins>,
}

impl PinReservation {
    /// The pages one file may hold of the `max` all files may hold.
    pub(crate) fn file_share(max: u64) -> u64 {
        max.div_ceil(2)
    }

    /// Reserves `pages` of the `max` all files may hold for `file`, which
    /// may hold at most its share of them.
    pub(crate) fn take(pages: u64, file: &Arc<FilePins>, max: u64) -> Result<Self> {
        reserve(&file.0, pages, Self::file_share(max))?;
        if let Err(e) = reserve(&PINNED, pages, max) {
            file.0.fetch_sub(pages, Relaxed);
            return Err(e);
        }
        Ok(Self {
            pages,
            file: file.clone(),
        })
    }
}

impl Drop for PinReservation {
    fn drop(&mut self) {
        PINNED.fetch_sub(self.pages, Relaxed);
        self.file.0.fetch_sub(self.pages, Relaxed);
    }
}
