// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The only module with `unsafe`: shared mappings of client memory and
//! adoption of file descriptors received with SCM_RIGHTS.
//!
//! Everything else in the crate is safe Rust. The rules kept here:
//!
//! * A [`Mmap`] is never exposed as a Rust slice. Guest memory is shared
//!   with a running guest that may change it at any time, so forming `&[u8]`
//!   or `&mut [u8]` over it would break Rust's aliasing rules. All access
//!   goes through bounds-checked raw copies into or out of our own buffers,
//!   which behave like a device's DMA: the bytes seen are whatever the
//!   memory held at that moment.
//! * A mapping lives exactly as long as its [`Mmap`] value; `Drop` unmaps.

#![expect(
    unsafe_code,
    reason = "this module is the crate's single, audited home of unsafe code"
)]

use std::io;
use std::num::NonZeroUsize;
use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;

use nix::sys::mman::{mmap, munmap, MapFlags, ProtFlags};

/// A `MAP_SHARED` mapping of a whole client-provided file.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
    writable: bool,
}

// SAFETY: `Mmap` owns a process-wide mapping; the raw pointer is only used
// for bounds-checked copies (see the module comment), which are as valid
// from any thread as from the creating one. Concurrent copies to the same
// bytes race only in the sense that DMA from two engines races: the result
// is some interleaving of bytes, never memory unsafety in our own data.
unsafe impl Send for Mmap {}
// SAFETY: as above; `&Mmap` only offers copies through raw pointers.
unsafe impl Sync for Mmap {}

impl Mmap {
    /// Maps `len` bytes of `fd` from offset 0, shared, read-write if the
    /// file allows it and read-only otherwise.
    pub fn map_shared(fd: impl AsFd, len: usize) -> io::Result<Mmap> {
        let nz = NonZeroUsize::new(len)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"))?;
        let rw = ProtFlags::PROT_READ | ProtFlags::PROT_WRITE;
        // SAFETY: we ask the kernel for a fresh mapping (no fixed address),
        // so no existing Rust object is affected; the result is checked and
        // owned by the returned value, which unmaps it exactly once in Drop.
        let res = unsafe { mmap(None, nz, rw, MapFlags::MAP_SHARED, fd.as_fd(), 0) };
        let (addr, writable) = match res {
            Ok(p) => (p, true),
            Err(nix::errno::Errno::EACCES) => {
                // SAFETY: same as above, read-only this time.
                let p = unsafe {
                    mmap(
                        None,
                        nz,
                        ProtFlags::PROT_READ,
                        MapFlags::MAP_SHARED,
                        fd.as_fd(),
                        0,
                    )
                }
                .map_err(io::Error::from)?;
                (p, false)
            }
            Err(e) => return Err(io::Error::from(e)),
        };
        Ok(Mmap {
            ptr: addr.cast::<u8>(),
            len,
            writable,
        })
    }

    /// Length of the mapping in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length mapping (never constructed, kept for clippy).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether stores are possible.
    pub fn writable(&self) -> bool {
        self.writable
    }

    fn in_bounds(&self, off: usize, len: usize) -> bool {
        off.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// Copies `buf.len()` bytes at `off` into `buf`; false if out of bounds.
    pub fn read(&self, off: usize, buf: &mut [u8]) -> bool {
        if !self.in_bounds(off, buf.len()) {
            return false;
        }
        // SAFETY: `off + buf.len() <= self.len` was checked, the mapping is
        // alive for `&self`, and `buf` is our own memory, distinct from the
        // mapping, so the ranges cannot overlap.
        unsafe {
            std::ptr::copy_nonoverlapping(self.ptr.as_ptr().add(off), buf.as_mut_ptr(), buf.len());
        }
        true
    }

    /// Copies `data` to `off`; false if out of bounds or read-only.
    pub fn write(&self, off: usize, data: &[u8]) -> bool {
        if !self.writable || !self.in_bounds(off, data.len()) {
            return false;
        }
        // SAFETY: bounds checked, mapping alive and writable, and `data` is
        // our own memory, distinct from the mapping.
        unsafe {
            std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(off), data.len());
        }
        true
    }

    /// Copies `len` bytes from `src` at `src_off` to `dst` at `dst_off`
    /// (which may be the same mapping, with overlapping ranges, like a
    /// memmove). False if out of bounds or `dst` is read-only.
    pub fn copy(src: &Mmap, src_off: usize, dst: &Mmap, dst_off: usize, len: usize) -> bool {
        if !dst.writable || !src.in_bounds(src_off, len) || !dst.in_bounds(dst_off, len) {
            return false;
        }
        // SAFETY: both ranges are in bounds of live mappings and `dst` is
        // writable; `ptr::copy` allows the ranges to overlap.
        unsafe {
            std::ptr::copy(
                src.ptr.as_ptr().add(src_off),
                dst.ptr.as_ptr().add(dst_off),
                len,
            );
        }
        true
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: `ptr`/`len` describe a mapping created by `map_shared`
        // and owned by this value alone; it is unmapped exactly once, here.
        if let Err(e) = unsafe { munmap(self.ptr.cast(), self.len) } {
            crate::log!(crate::log::Level::Error, "", "munmap failed: {e}");
        }
    }
}

/// Takes ownership of descriptors that `recvmsg` just returned in an
/// SCM_RIGHTS control message.
pub fn adopt_received_fds(fds: Vec<RawFd>) -> Vec<OwnedFd> {
    fds.into_iter()
        // SAFETY: the kernel installed these descriptors in our table for
        // this recvmsg call; nothing else in the process knows them, so we
        // are their sole owner and may close them on drop.
        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::sys::memfd::{memfd_create, MFdFlags};

    fn memfd(len: usize) -> OwnedFd {
        let fd = memfd_create("plx-test", MFdFlags::MFD_CLOEXEC).unwrap();
        let f = std::fs::File::from(fd);
        f.set_len(len as u64).unwrap();
        f.into()
    }

    #[test]
    fn map_read_write_copy() {
        let fd = memfd(8192);
        let m = Mmap::map_shared(&fd, 8192).unwrap();
        assert!(m.writable());
        assert!(m.write(100, b"hello"));
        let mut b = [0u8; 5];
        assert!(m.read(100, &mut b));
        assert_eq!(&b, b"hello");
        assert!(Mmap::copy(&m, 100, &m, 102, 5)); // overlapping, memmove-like
        let mut c = [0u8; 7];
        assert!(m.read(100, &mut c));
        assert_eq!(&c, b"hehello");
        assert!(!m.read(8190, &mut [0u8; 4]));
        assert!(!m.write(usize::MAX, b"x"));
        assert!(!Mmap::copy(&m, 0, &m, 8190, 4));
    }
}
