// SPDX-License-Identifier: GPL-2.0

//! Memory shared with a user process, and the driver's part of a uverbs
//! command's data.
//!
//! C header: [`include/rdma/ib_verbs.h`](srctree/include/rdma/ib_verbs.h)
//!
//! A [`UserRing`] is zeroed memory that the process of a uverbs context maps
//! with `mmap()` at the offset the driver hands it in a command's response
//! ([`UserData::respond`]), so that it reads (or writes) a queue without a
//! system call. The process may write any byte of it at any time: the
//! kernel reads it only through [`UserRing::word`] (an atomic 32-bit word)
//! and never trusts what it reads, and writes it only through
//! [`UserRing::write`].
//!
//! The offer to map a ring belongs to the uverbs context, which only lives
//! as long as the object the ring was made for: the C glue withdraws it at
//! that object's destroy at the latest, or earlier when the driver retires
//! the ring ([`UserRing::retire`]). The memory itself lives as long as the
//! driver's handle or the offer does, and a page the process mapped as
//! long as its mapping: the driver may keep a [`UserRing`] past the
//! object's destroy without harm.

use super::ffi;
use core::{marker::PhantomData, ptr::NonNull};
use kernel::{error::to_result, ffi::c_void, prelude::*, sync::atomic::Atomic, transmute::AsBytes};

/// The driver's part of a uverbs command's request and response (`struct
/// ib_udata`) on one object, for the command's duration `'a`.
///
/// # Invariants
///
/// `cmd` is the C glue's `struct rust_ib_cmd` of a uverbs command on a live
/// object, valid for `'a`.
pub struct UserData<'a> {
    cmd: NonNull<c_void>,
    _command: PhantomData<&'a mut c_void>,
}

impl UserData<'_> {
    /// # Safety
    ///
    /// `cmd` is null, or the `struct rust_ib_cmd` of a uverbs command that
    /// lasts as long as the value returned.
    pub(super) unsafe fn from_raw(cmd: *mut c_void) -> Option<Self> {
        // INVARIANT: Per the function's contract.
        Some(Self {
            cmd: NonNull::new(cmd)?,
            _command: PhantomData,
        })
    }

    /// Bytes the process left for the driver's response.
    pub fn response_room(&self) -> usize {
        // SAFETY: A live command (type invariant).
        unsafe { ffi::rust_ib_udata_outlen(self.cmd.as_ptr()) }
    }

    /// Copies `v` (as much of it as the process left room for) to the
    /// driver's response.
    pub fn respond<T: AsBytes>(&mut self, v: &T) -> Result {
        let bytes = v.as_bytes();
        // SAFETY: A live command; `bytes` is readable for its length.
        let ret = unsafe {
            ffi::rust_ib_udata_respond(self.cmd.as_ptr(), bytes.as_ptr().cast(), bytes.len())
        };
        to_result(ret)
    }

    /// A ring of `size` bytes (zeroed) that the command's process may map,
    /// until the command's object is destroyed or the ring retired.
    pub fn new_ring(&mut self, size: usize) -> Result<UserRing> {
        if size == 0 {
            return Err(EINVAL);
        }
        let (mut buf, mut offset, mut err) = (core::ptr::null_mut(), 0u64, 0);
        // SAFETY: A live command (it has a context and an object); the
        // out-pointers are valid for writes.
        let map = unsafe {
            ffi::rust_ib_user_ring_new(self.cmd.as_ptr(), size, &mut buf, &mut offset, &mut err)
        };
        let (Some(map), Some(buf)) = (NonNull::new(map), NonNull::new(buf.cast::<u8>())) else {
            return Err(if err < 0 {
                Error::from_errno(err)
            } else {
                ENOMEM
            });
        };
        // INVARIANT: The C glue returned a ring holding a reference for
        // this handle, with a zeroed, page-aligned buffer of at least
        // `size` bytes.
        Ok(UserRing {
            map,
            buf,
            size,
            offset,
        })
    }
}

/// Memory shared with the process of a uverbs context. Dropping it may
/// sleep (the memory may be unmapped from the kernel then).
///
/// # Invariants
///
/// `map` is a C `struct rust_ib_umap` on which this value holds a
/// reference; `buf` is its buffer of at least `size` bytes, 4-byte aligned,
/// which lives as long as that reference.
pub struct UserRing {
    map: NonNull<c_void>,
    buf: NonNull<u8>,
    size: usize,
    offset: u64,
}

// SAFETY: The ring is memory plus a handle the C glue takes from any
// thread; its words are accessed atomically or volatile.
unsafe impl Send for UserRing {}
// SAFETY: See `Send`: every access through `&self` is atomic or volatile.
unsafe impl Sync for UserRing {}

impl UserRing {
    /// The offset the process passes to `mmap()`.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// The ring's size in bytes (the process maps it rounded up to pages).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The 32-bit word at byte `at` (a multiple of 4 inside the ring), as an
    /// atomic: the process may change it at any time.
    pub fn word(&self, at: usize) -> Option<&Atomic<u32>> {
        let p = self.words(at, 1).ok()?;
        // SAFETY: In the ring and aligned (`Self::words`), valid while
        // `self` is; the process's concurrent accesses are to memory
        // outside Rust's model, and every kernel access to the word is
        // atomic.
        Some(unsafe { Atomic::from_ptr(p) })
    }

    /// The first of `n` 32-bit words from byte `at` on (a multiple of 4);
    /// `EINVAL` unless they lie in the ring.
    fn words(&self, at: usize, n: usize) -> Result<*mut u32> {
        let end = n
            .checked_mul(4)
            .and_then(|len| len.checked_add(at))
            .ok_or(EINVAL)?;
        if at % 4 != 0 || end > self.size {
            return Err(EINVAL);
        }
        // SAFETY: `at` is inside the ring (checked), which is valid while
        // `self` is (type invariant).
        Ok(unsafe { self.buf.as_ptr().add(at) }.cast::<u32>())
    }

    /// Writes `words` from byte `at` on (a multiple of 4), each a volatile
    /// store: the process may read them meanwhile. `EINVAL` out of bounds.
    pub fn write(&self, at: usize, words: &[u32]) -> Result {
        let base = self.words(at, words.len())?;
        for (i, w) in words.iter().enumerate() {
            // SAFETY: `words.len()` words from `base` lie in the ring
            // (checked by `Self::words`), aligned.
            unsafe { base.add(i).write_volatile(*w) };
        }
        Ok(())
    }

    /// Reads `out.len()` words from byte `at` on (a multiple of 4), each a
    /// volatile load. `EINVAL` out of bounds.
    pub fn read(&self, at: usize, out: &mut [u32]) -> Result {
        let base = self.words(at, out.len())?;
        for (i, w) in out.iter_mut().enumerate() {
            // SAFETY: As in `write`.
            *w = unsafe { base.add(i).read_volatile() };
        }
        Ok(())
    }
}

impl UserRing {
    /// Withdraws the offer to map the ring (the driver replaced it): the
    /// memory goes once the process unmapped it. May sleep.
    pub fn retire(self) {
        // SAFETY: A ring this value holds a reference on (type invariant);
        // the glue withdraws the offer only if its object still has it.
        unsafe { ffi::rust_ib_user_ring_retire(self.map.as_ptr()) };
    }
}

impl Drop for UserRing {
    fn drop(&mut self) {
        // SAFETY: This value's reference (type invariant), given back once;
        // after this the buffer may be freed, and `self` is gone.
        unsafe { ffi::rust_ib_user_ring_put(self.map.as_ptr()) };
    }
}
