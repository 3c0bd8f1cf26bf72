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
    /// as [`Mmap::copy`] does, but with non-temporal stores where it can:
    /// the destination goes to memory without first being read into the
    /// host's caches, and without evicting what the vCPUs and the other
    /// engines have there, as a device's writes would. On a memory-bound
    /// host that is a third less memory traffic per byte (no read for
    /// ownership), for copies large enough not to be read back from the
    /// cache anyway. Overlapping ranges (of the same mapping) take the
    /// memmove of [`Mmap::copy`]. Every store is globally visible when it
    /// returns, before the caller's write-back says the copy is done.
    pub fn copy_streaming(
        src: &Mmap,
        src_off: usize,
        dst: &Mmap,
        dst_off: usize,
        len: usize,
    ) -> bool {
        if !dst.writable || !src.in_bounds(src_off, len) || !dst.in_bounds(dst_off, len) {
            return false;
        }
        let s = src.ptr.as_ptr().wrapping_add(src_off);
        let d = dst.ptr.as_ptr().wrapping_add(dst_off);
        let (s_end, d_end) = (s.wrapping_add(len), d.wrapping_add(len));
        if s < d_end && d < s_end {
            return Mmap::copy(src, src_off, dst, dst_off, len);
        }
        // SAFETY: both ranges are in bounds of live mappings, `dst` is
        // writable, and they do not overlap (checked just above).
        unsafe { stream_copy(s, d, len) };
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

/// Copies `len` bytes from `src` to `dst` with non-temporal (streaming)
/// stores, then fences them, so that they are visible before any later
/// store.
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and
/// the two ranges must not overlap.
#[cfg(target_arch = "x86_64")]
unsafe fn stream_copy(src: *const u8, dst: *mut u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    /// Bytes per loop iteration: one cache line, four 16-byte stores.
    const LINE: usize = 64;
    // Streaming stores need a 16-byte aligned destination: the bytes up to
    // that alignment, and the tail shorter than a line, are plain copies.
    let head = dst.align_offset(16).min(len);
    let body = (len - head) / LINE * LINE;
    let tail = len - head - body;
    // SAFETY: `head + body + tail == len`, so every access below stays in
    // the ranges the caller vouched for, which do not overlap. SSE2, which
    // the intrinsics need, is part of the x86_64 baseline, and each
    // `_mm_stream_si128` store is 16-byte aligned: `dst + head` is, and the
    // loop advances by multiples of 16.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, head);
        let (mut s, mut d) = (src.add(head), dst.add(head));
        for _ in 0..body / LINE {
            for k in 0..LINE / 16 {
                let v = _mm_loadu_si128(s.add(16 * k).cast::<__m128i>());
                _mm_stream_si128(d.add(16 * k).cast::<__m128i>(), v);
            }
            s = s.add(LINE);
            d = d.add(LINE);
        }
        std::ptr::copy_nonoverlapping(s, d, tail);
        // Streaming stores are weakly ordered: the fence makes them visible
        // before the write-back that reports the copy done.
        _mm_sfence();
    }
}

/// Copies `len` bytes from `src` to `dst`: a plain copy where streaming
/// stores are not available.
///
/// # Safety
///
/// `src` must be valid for reads and `dst` for writes of `len` bytes, and
/// the two ranges must not overlap.
#[cfg(not(target_arch = "x86_64"))]
unsafe fn stream_copy(src: *const u8, dst: *mut u8, len: usize) {
    // SAFETY: as the caller vouched.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
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

    #[test]
    fn streaming_copy_matches_a_plain_copy() {
        let len = 3 * 4096;
        let (sfd, dfd) = (memfd(len), memfd(len));
        let (src, dst) = (
            Mmap::map_shared(&sfd, len).unwrap(),
            Mmap::map_shared(&dfd, len).unwrap(),
        );
        let pattern: Vec<u8> = (0..len).map(|i| ((i * 131) ^ (i >> 8)) as u8).collect();
        assert!(src.write(0, &pattern));
        // Unaligned heads, tails shorter than a line, lengths below one
        // aligned store, and whole lines.
        for (so, d_off, n) in [
            (0, 0, 4096),
            (3, 17, 5000),
            (1, 0, 15),
            (64, 9, 200),
            (5, 4095, 2 * 4096),
            (0, 1, 0),
        ] {
            assert!(dst.write(0, &vec![0xa5; len]));
            assert!(Mmap::copy_streaming(&src, so, &dst, d_off, n));
            let mut got = vec![0u8; len];
            assert!(dst.read(0, &mut got));
            assert_eq!(
                &got[d_off..d_off + n],
                &pattern[so..so + n],
                "{so} {d_off} {n}"
            );
            assert!(got[..d_off].iter().all(|&b| b == 0xa5), "{so} {d_off} {n}");
            assert!(
                got[d_off + n..].iter().all(|&b| b == 0xa5),
                "{so} {d_off} {n}"
            );
        }
        // Overlapping ranges of one mapping behave like a memmove.
        assert!(src.write(0, &pattern));
        assert!(Mmap::copy_streaming(&src, 0, &src, 100, 4096));
        let mut got = vec![0u8; 4096];
        assert!(src.read(100, &mut got));
        assert_eq!(&got[..], &pattern[..4096]);
        // Bounds and permissions as for the plain copy.
        assert!(!Mmap::copy_streaming(&src, len - 4, &dst, 0, 8));
        assert!(!Mmap::copy_streaming(&src, 0, &dst, usize::MAX, 8));
    }
}
