// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The client's DMA windows (VFIO_USER_DMA_MAP / DMA_UNMAP) and the mapped
//! fast path that accesses them directly.
//!
//! With a vIOMMU QEMU sends one DMA_MAP per guest IOMMU mapping, often a
//! single 4 KiB page, all backed by the same guest-RAM memfd. Mapping each
//! window separately would cost one mmap per page, so each distinct backing
//! file (same device and inode) is mapped once, whole, and windows point
//! into it. The table stays exact: an access goes directly to the file
//! mapping only where a window with the right permission says so, whatever
//! else the file mapping would reach.
//!
//! Everything else is a *miss* and is carried out with DMA messages, like
//! on the default path: the client (QEMU) then performs the access through
//! the guest IOMMU, so an IOVA the guest did not map gives a real guest
//! DMAR fault and an error reply, which the engine turns into RD_FAIL or
//! WR_FAIL. The table is only a cache of what the client told us; the
//! guest IOMMU stays the authority.
//!
//! Only files sealed against shrinking (F_SEAL_SHRINK, which QEMU's
//! `memory-backend-memfd` applies by default) are mapped. A file the client
//! could truncate under our mapping would turn the next access into a
//! SIGBUS that kills every channel of the process; and only memfds
//! (tmpfs, hugetlbfs) can carry seals, so a file on FUSE or NFS, whose page
//! faults can block the engine for as long as the server likes, is never
//! mapped either. A window over any other file is kept in the table but
//! served by DMA messages, like a window without a file.

use std::collections::BTreeMap;
use std::os::fd::OwnedFd;

use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use std::sync::{Arc, RwLock, Weak};

use vfio_bindings::bindings::vfio::{VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE};

use crate::memory::{CopyError, DmaError, GuestMemory};
use crate::stats::{add, inc, Stats};
use crate::sys::Mmap;

/// Descriptors copying at least this many bytes between two mappings use
/// streaming stores ([`Mmap::copy_streaming`]). Smaller copies go through
/// the cache: their destination may well be read soon, and a plain copy of
/// a few lines costs less than the fence that ends a streaming one. From
/// 64 KiB up, a client's buffers rarely stay in the host's caches between
/// copies (the bench's occupy 16 MiB), and streaming copies ran 25 to 45 %
/// faster than `memmove` on a memory-bound host.
pub const STREAM_MIN: usize = 64 * 1024;

/// Most windows one connection may hold: the default `dma_entry_limit` of
/// the kernel's vfio type1 IOMMU, which QEMU already lives with. Without a
/// cap a client could grow the table (and every lookup) without bound.
pub const MAX_WINDOWS: usize = 65535;

/// A whole backing file mapped once.
#[derive(Debug)]
struct FileMap {
    dev: u64,
    ino: u64,
    map: Mmap,
}

/// One DMA window.
#[derive(Debug, Clone)]
struct Window {
    size: u64,
    readable: bool,
    writable: bool,
    /// The mapped file and the file offset of the window's first byte;
    /// `None` when the client sent no descriptor (then the mapped path
    /// falls back to DMA messages for this window).
    backing: Option<(Arc<FileMap>, u64)>,
}

impl Window {
    /// Whether `next`, starting right after this window's last IOVA, maps
    /// the same kind of memory with the same rights, continuing where this
    /// one ends: then the two behave as one window in every lookup.
    fn continued_by(&self, next: &Window) -> bool {
        self.readable == next.readable
            && self.writable == next.writable
            && match (&self.backing, &next.backing) {
                (None, None) => true,
                (Some((f, off)), Some((g, next_off))) => {
                    Arc::ptr_eq(f, g) && off + self.size == *next_off
                }
                _ => false,
            }
    }
}

/// Errors of DMA_MAP/DMA_UNMAP, carried back to the client as an errno.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum MapError {
    /// The window overlaps an existing one (spec: EEXIST).
    #[error("window overlaps an existing mapping")]
    Exists,
    /// Size 0, overflow, or a file range beyond the file.
    #[error("invalid window: {0}")]
    Invalid(String),
    /// mmap or fstat failed.
    #[error("cannot map the client's file: {0}")]
    Os(String),
    /// The table holds [`MAX_WINDOWS`] windows already.
    #[error("too many DMA windows (at most {MAX_WINDOWS})")]
    TooMany,
}

impl MapError {
    /// The errno to send in the error reply.
    pub fn errno(&self) -> i32 {
        match self {
            MapError::Exists => libc::EEXIST,
            MapError::Invalid(_) => libc::EINVAL,
            MapError::Os(_) => libc::ENOMEM,
            // What vfio type1 answers at its dma_entry_limit.
            MapError::TooMany => libc::ENOSPC,
        }
    }
}

/// The table of DMA windows of one connection.
#[derive(Debug, Default)]
pub struct DmaMapTable {
    windows: BTreeMap<u64, Window>,
    files: Vec<Weak<FileMap>>,
    /// Windows looked at by `unmap`, so tests can check it stays local.
    #[cfg(test)]
    scanned: usize,
}

/// What a lookup found for the start of an access.
///
/// The mapping is borrowed from the table: it can only be used while the
/// table's read lock is held, which is what keeps DMA_UNMAP from removing
/// it in the middle of a copy.
enum Piece<'a> {
    /// Direct access: mapping, offset in it, bytes available from there.
    Mapped(&'a Mmap, usize, u64),
    /// A window the emulator cannot access itself (no file descriptor, or
    /// a read-only file under a writable window): use messages for this
    /// many bytes.
    Unbacked(u64),
    /// No window, or a window without the needed permission: use messages
    /// for this many bytes, so that the client's IOMMU decides (and, for
    /// QEMU, the guest sees the fault).
    Miss(u64),
}

impl Piece<'_> {
    /// Bytes the piece covers.
    fn len(&self) -> u64 {
        match *self {
            Piece::Mapped(_, _, n) | Piece::Unbacked(n) | Piece::Miss(n) => n,
        }
    }
}

impl DmaMapTable {
    /// An empty table.
    pub fn new() -> DmaMapTable {
        DmaMapTable::default()
    }

    /// Number of windows.
    pub fn len(&self) -> usize {
        self.windows.len()
    }

    /// True when no window is mapped.
    pub fn is_empty(&self) -> bool {
        self.windows.is_empty()
    }

    fn overlaps(&self, iova: u64, end: u64) -> bool {
        // The only candidates are the last window starting before `end`.
        self.windows
            .range(..end)
            .next_back()
            .is_some_and(|(&b, w)| b + w.size > iova)
    }

    fn file_map(&mut self, fd: &OwnedFd) -> Result<Arc<FileMap>, MapError> {
        let st = nix::sys::stat::fstat(fd).map_err(|e| MapError::Os(format!("fstat: {e}")))?;
        let (dev, ino) = (st.st_dev, st.st_ino);
        self.files.retain(|w| w.strong_count() > 0);
        if let Some(f) = self
            .files
            .iter()
            .filter_map(Weak::upgrade)
            .find(|f| f.dev == dev && f.ino == ino)
        {
            return Ok(f);
        }
        let len = usize::try_from(st.st_size)
            .map_err(|_| MapError::Invalid(format!("file size {}", st.st_size)))?;
        let map = Mmap::map_shared(fd, len).map_err(|e| MapError::Os(format!("mmap: {e}")))?;
        let f = Arc::new(FileMap { dev, ino, map });
        self.files.push(Arc::downgrade(&f));
        Ok(f)
    }

    /// Adds a window. With `direct` false (the default message path) the
    /// file descriptor is closed at once: only the bookkeeping is kept.
    ///
    /// With `direct`, a file that cannot be mapped safely (see the module
    /// comment) still gets its window, served by DMA messages; the returned
    /// `Some(reason)` says why, for the log.
    pub fn map(
        &mut self,
        iova: u64,
        size: u64,
        offset: u64,
        flags: u32,
        fd: Option<OwnedFd>,
        direct: bool,
    ) -> Result<Option<String>, MapError> {
        if size == 0 {
            return Err(MapError::Invalid("size 0".into()));
        }
        let end = iova
            .checked_add(size)
            .ok_or_else(|| MapError::Invalid("IOVA range wraps".into()))?;
        if self.overlaps(iova, end) {
            return Err(MapError::Exists);
        }
        let mut note = None;
        let backing = match fd {
            Some(fd) if direct => match unsafe_to_map(&fd) {
                Some(why) => {
                    note = Some(why);
                    None
                }
                None => {
                    let f = self.file_map(&fd)?;
                    let fits = offset
                        .checked_add(size)
                        .is_some_and(|e| e <= f.map.len() as u64);
                    if !fits {
                        return Err(MapError::Invalid(format!(
                            "file range {offset:#x}+{size:#x} beyond file size {:#x}",
                            f.map.len()
                        )));
                    }
                    Some((f, offset))
                }
            },
            _ => None,
        };
        let mut base = iova;
        let mut w = Window {
            size,
            readable: flags & VFIO_DMA_MAP_FLAG_READ != 0,
            writable: flags & VFIO_DMA_MAP_FLAG_WRITE != 0,
            backing,
        };
        // A vIOMMU maps page by page, so a guest buffer arrives as a run
        // of adjacent windows over adjacent file pages. Kept as one window,
        // a copy is one lookup and one memmove instead of one per page
        // (half the mapped path's speed, see bench-host). `unmap` trims a
        // window partly covered, so each page can still go on its own.
        if let Some((&b, prev)) = self.windows.range(..iova).next_back() {
            if b + prev.size == iova && prev.continued_by(&w) {
                let prev = self.windows.remove(&b).expect("found above");
                w = Window {
                    size: prev.size + w.size,
                    ..prev
                };
                base = b;
            }
        }
        if let Some(next) = self.windows.get(&end) {
            if w.continued_by(next) {
                let next = self.windows.remove(&end).expect("found above");
                w.size += next.size;
            }
        }
        // A merge removed its neighbour above, so the table is full here
        // only when the window is a new one: refusing it loses nothing.
        if self.windows.len() >= MAX_WINDOWS {
            return Err(MapError::TooMany);
        }
        self.windows.insert(base, w);
        Ok(note)
    }

    /// Removes windows. `all` empties the table. Otherwise every window
    /// inside `[iova, iova + size)` goes, and a window only partly inside
    /// is trimmed to what lies outside. The spec asks for an exact match,
    /// but QEMU's vIOMMU notifier may unmap a range covering several
    /// windows at once, as the kernel's type1 IOMMU allows; accepting that
    /// is what keeps the table exact. Returns the bytes unmapped.
    pub fn unmap(&mut self, iova: u64, size: u64, all: bool) -> u64 {
        if all {
            let n = self.windows.values().map(|w| w.size).sum();
            self.windows.clear();
            return n;
        }
        let end = iova.saturating_add(size);
        // Windows are disjoint, so only the last one starting below `iova`
        // can reach into the range, and the others start inside it: two
        // ordered lookups, not a scan of the table (a vIOMMU unmaps page
        // by page, so a scan would make a teardown quadratic).
        let straddling = self
            .windows
            .range(..iova)
            .next_back()
            .filter(|(&b, w)| b + w.size > iova)
            .map(|(&b, _)| b);
        let hits: Vec<u64> = straddling
            .into_iter()
            .chain(self.windows.range(iova..end).map(|(&b, _)| b))
            .collect();
        #[cfg(test)]
        {
            self.scanned += hits.len();
        }
        let mut removed = 0;
        for base in hits {
            let Some(w) = self.windows.remove(&base) else {
                continue;
            };
            let w_end = base + w.size;
            if base < iova {
                let mut head = w.clone();
                head.size = iova - base;
                self.windows.insert(base, head);
            }
            // Trimming a window in the middle leaves two. At the cap the
            // tail is dropped instead: the table is only a cache, and its
            // bytes are then reached through DMA messages.
            if w_end > end && self.windows.len() < MAX_WINDOWS {
                let mut tail = w.clone();
                tail.size = w_end - end;
                if let Some((f, off)) = tail.backing.take() {
                    tail.backing = Some((f, off + (end - base)));
                }
                self.windows.insert(end, tail);
            }
            removed += w_end.min(end) - base.max(iova);
        }
        removed
    }

    /// Resolves the first piece of an access of `len` (at least 1) bytes
    /// at `iova`; `iova + len` must not wrap.
    fn piece(&self, iova: u64, len: u64, write: bool) -> Piece<'_> {
        let hit = self
            .windows
            .range(..=iova)
            .next_back()
            .filter(|(&b, w)| iova < b + w.size);
        let Some((&base, w)) = hit else {
            // No window holds `iova`, so none starts there either: the
            // miss runs up to the next window, or to the end of the access.
            let next = self
                .windows
                .range(iova..)
                .next()
                .map_or(u64::MAX, |(&b, _)| b);
            return Piece::Miss((next - iova).min(len));
        };
        let avail = (base + w.size - iova).min(len);
        if (write && !w.writable) || (!write && !w.readable) {
            return Piece::Miss(avail);
        }
        match &w.backing {
            Some((f, off)) if !write || f.map.writable() => {
                // `map()` checked that the window lies inside the mapping,
                // whose length is a `usize`.
                match usize::try_from(off + (iova - base)) {
                    Ok(o) => Piece::Mapped(&f.map, o, avail),
                    Err(_) => Piece::Unbacked(avail),
                }
            }
            _ => Piece::Unbacked(avail),
        }
    }
}

/// Why the file behind `fd` must not be mapped, or `None` if it may be:
/// it must be sealed against shrinking, so that no access through the
/// mapping can ever fall beyond the end of the file.
fn unsafe_to_map(fd: &OwnedFd) -> Option<String> {
    match fcntl(fd, FcntlArg::F_GET_SEALS) {
        Ok(seals) if SealFlag::from_bits_retain(seals).contains(SealFlag::F_SEAL_SHRINK) => None,
        Ok(_) => Some("the file is not sealed against shrinking (F_SEAL_SHRINK)".into()),
        Err(e) => Some(format!(
            "the file cannot carry seals ({e}): not a memfd, so F_SEAL_SHRINK is impossible"
        )),
    }
}

/// The `--mapped` fast path: direct access to shared client memory, with
/// DMA messages for misses and for windows that came without a file
/// descriptor.
pub struct MappedMemory {
    table: Arc<RwLock<DmaMapTable>>,
    fallback: Arc<dyn GuestMemory>,
    stats: Arc<Stats>,
}

impl MappedMemory {
    /// Builds the fast path over `table`, falling back to `fallback`.
    pub fn new(
        table: Arc<RwLock<DmaMapTable>>,
        fallback: Arc<dyn GuestMemory>,
        stats: Arc<Stats>,
    ) -> MappedMemory {
        MappedMemory {
            table,
            fallback,
            stats,
        }
    }

    /// Walks an access of `len` bytes at `iova` piece by piece, handing
    /// each piece to `f`.
    ///
    /// The table's read lock is held from the lookup of a mapped piece to
    /// the end of its copy, so that a concurrent DMA_UNMAP (which takes the
    /// write lock) cannot pull the mapping away in between. It is never
    /// held across a DMA message: DMA_UNMAP runs on the socket thread,
    /// which must stay free to route the message's reply.
    fn access(
        &self,
        iova: u64,
        len: usize,
        write: bool,
        mut f: impl FnMut(Access<'_>) -> Result<(), DmaError>,
    ) -> Result<(), DmaError> {
        let end = iova.checked_add(len as u64).ok_or(DmaError::OutOfRange {
            iova,
            len: len as u64,
        })?;
        let mut at = iova;
        while at < end {
            let done = (at - iova) as usize;
            let t = self.table.read().unwrap_or_else(|e| e.into_inner());
            let piece = t.piece(at, end - at, write);
            let n = piece.len();
            match piece {
                Piece::Mapped(m, off, n) => f(Access::Mapped(m, off, done, n as usize))?,
                Piece::Unbacked(n) => {
                    drop(t);
                    f(Access::Message(at, done, n as usize))?;
                }
                Piece::Miss(n) => {
                    drop(t);
                    inc(&self.stats.mapped_misses);
                    f(Access::Message(at, done, n as usize))?;
                }
            }
            at += n;
        }
        Ok(())
    }
}

/// One piece of an access handed to the per-direction closure.
enum Access<'a> {
    /// Mapped: mapping, offset in it, offset in the caller's buffer, length.
    Mapped(&'a Mmap, usize, usize, usize),
    /// Use messages: IOVA, offset in the caller's buffer, length.
    Message(u64, usize, usize),
}

impl GuestMemory for MappedMemory {
    fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let len = buf.len() as u64;
        self.access(iova, buf.len(), false, |a| match a {
            Access::Mapped(m, off, at, n) => {
                if m.read(off, &mut buf[at..at + n]) {
                    Ok(())
                } else {
                    // `piece()` only hands out ranges inside the mapping.
                    Err(DmaError::Unmapped { iova, len })
                }
            }
            Access::Message(io, at, n) => self.fallback.read(io, &mut buf[at..at + n]),
        })
    }

    fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
        self.access(iova, data.len(), true, |a| match a {
            Access::Mapped(m, off, at, n) => {
                if m.write(off, &data[at..at + n]) {
                    Ok(())
                } else {
                    // `piece()` only hands out writable mappings, in range.
                    Err(DmaError::Permission { iova, write: true })
                }
            }
            Access::Message(io, at, n) => self.fallback.write(io, &data[at..at + n]),
        })
    }

    fn copy_checked(
        &self,
        src: u64,
        dst: u64,
        len: usize,
        scratch: &mut Vec<u8>,
        proceed: &dyn Fn() -> bool,
    ) -> Result<bool, CopyError> {
        // A direct copy has no phase between reading and writing, so the
        // check comes first. (Pieces bounced through messages read before
        // they write, as on the message path, without a check in between:
        // they are the rare mixed case.)
        if !proceed() {
            return Ok(false);
        }
        self.copy(src, dst, len, scratch)?;
        Ok(true)
    }

    fn copy(&self, src: u64, dst: u64, len: usize, scratch: &mut Vec<u8>) -> Result<(), CopyError> {
        let mut done = 0usize;
        while done < len {
            let want = (len - done) as u64;
            let (s, d) = (src.wrapping_add(done as u64), dst.wrapping_add(done as u64));
            if s.checked_add(want).is_none() {
                return Err(CopyError::Read(DmaError::OutOfRange { iova: s, len: want }));
            }
            if d.checked_add(want).is_none() {
                return Err(CopyError::Write(DmaError::OutOfRange {
                    iova: d,
                    len: want,
                }));
            }
            let bounce = {
                let t = self.table.read().unwrap_or_else(|e| e.into_inner());
                match (t.piece(s, want, false), t.piece(d, want, true)) {
                    (Piece::Mapped(sm, so, sn), Piece::Mapped(dm, doff, dn)) => {
                        // The common case: one copy from mapping to mapping,
                        // no bounce buffer.
                        let n = sn.min(dn) as usize;
                        let copied = if len >= STREAM_MIN {
                            Mmap::copy_streaming(sm, so, dm, doff, n)
                        } else {
                            Mmap::copy(sm, so, dm, doff, n)
                        };
                        if !copied {
                            // `piece()` only hands out writable mappings,
                            // in range.
                            return Err(CopyError::Write(DmaError::Permission {
                                iova: d,
                                write: true,
                            }));
                        }
                        add(&self.stats.bytes_mapped, n as u64);
                        done += n;
                        None
                    }
                    (sp, dp) => Some(sp.len().min(dp.len()) as usize),
                }
            };
            if let Some(n) = bounce {
                // A side needs messages (a miss or an unbacked window).
                // With the table lock released, bounce the piece through
                // the piecewise read and write: they take messages where
                // needed, so the source is read (and may fault) before the
                // destination is written, as on the message path, and the
                // failing side is reported.
                if scratch.len() < n {
                    scratch.resize(n, 0);
                }
                self.read(s, &mut scratch[..n]).map_err(CopyError::Read)?;
                self.write(d, &scratch[..n]).map_err(CopyError::Write)?;
                add(&self.stats.bytes_messages, n as u64);
                done += n;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::VecMemory;
    use nix::sys::memfd::{memfd_create, MFdFlags};
    use std::sync::atomic::{AtomicU64, Ordering};

    const RW: u32 = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;

    /// Guest RAM as QEMU's memory-backend-memfd makes it: sealed against
    /// shrinking and growing.
    fn memfd(len: u64) -> OwnedFd {
        let fd = unsealed_memfd(len);
        let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL;
        fcntl(&fd, FcntlArg::F_ADD_SEALS(seals)).unwrap();
        fd
    }

    fn unsealed_memfd(len: u64) -> OwnedFd {
        let flags = MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING;
        let fd = memfd_create("plx-test", flags).unwrap();
        let f = std::fs::File::from(fd);
        f.set_len(len).unwrap();
        f.into()
    }

    /// A file the client may shrink after DMA_MAP is not mapped: its
    /// window goes through messages, and shrinking the file afterwards
    /// cannot raise SIGBUS in the emulator.
    #[test]
    fn an_unsealed_file_is_served_by_messages() {
        let fd = unsealed_memfd(0x4000);
        let mut t = DmaMapTable::new();
        let note = t.map(0x1000, 0x4000, 0, RW, Some(dup(&fd)), true).unwrap();
        assert!(note.unwrap().contains("F_SEAL_SHRINK"));
        // Neither is a file that cannot carry seals at all.
        let dir = std::env::temp_dir().join(format!("plx-dma-emu-map-{}", std::process::id()));
        let plain = std::fs::File::options()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&dir)
            .unwrap();
        let _ = std::fs::remove_file(&dir);
        plain.set_len(0x1000).unwrap();
        let note = t
            .map(0x10_0000, 0x1000, 0, RW, Some(plain.into()), true)
            .unwrap();
        assert!(note.is_some());
        let (m, fb) = mapped(t);
        std::fs::File::from(dup(&fd)).set_len(0).unwrap();
        // Served by the fallback (which has no memory here): an error, not
        // a SIGBUS.
        assert!(m.read(0x1000, &mut [0u8; 16]).is_err());
        assert!(m.write(0x3000, &[1u8; 16]).is_err());
        fb.add_region(0x1000, 0x100);
        m.write(0x1000, b"messages").unwrap();
        assert_eq!(count(&m.stats.bytes_mapped), 0);
        // A sealed file is mapped, and cannot be shrunk under us.
        let sealed = memfd(0x1000);
        let mut t = DmaMapTable::new();
        assert_eq!(t.map(0, 0x1000, 0, RW, Some(dup(&sealed)), true), Ok(None));
        assert!(std::fs::File::from(sealed).set_len(0).is_err());
    }

    fn dup(fd: &OwnedFd) -> OwnedFd {
        fd.try_clone().unwrap()
    }

    fn mapped(table: DmaMapTable) -> (MappedMemory, Arc<VecMemory>) {
        let fallback = Arc::new(VecMemory::new());
        let m = MappedMemory::new(
            Arc::new(RwLock::new(table)),
            fallback.clone(),
            Arc::new(Stats::default()),
        );
        (m, fallback)
    }

    #[test]
    fn map_rejects_overlap_and_garbage() {
        let mut t = DmaMapTable::new();
        t.map(0x1000, 0x1000, 0, RW, None, false).unwrap();
        assert_eq!(
            t.map(0x1800, 0x1000, 0, RW, None, false),
            Err(MapError::Exists)
        );
        assert_eq!(
            t.map(0x0800, 0x1000, 0, RW, None, false),
            Err(MapError::Exists)
        );
        assert!(matches!(
            t.map(0x9000, 0, 0, RW, None, false),
            Err(MapError::Invalid(_))
        ));
        assert!(matches!(
            t.map(u64::MAX, 2, 0, RW, None, false),
            Err(MapError::Invalid(_))
        ));
        t.map(0x2000, 0x1000, 0, RW, None, false).unwrap(); // adjacent is fine
        assert_eq!(t.len(), 1, "adjacent alike windows are kept as one");
        let fd = memfd(0x1000);
        assert!(matches!(
            t.map(0x10000, 0x2000, 0, RW, Some(fd), true),
            Err(MapError::Invalid(_))
        ));
    }

    /// Windows that do not merge: every other page.
    fn scattered(t: &mut DmaMapTable, n: u64) {
        for i in 0..n {
            t.map(i * 0x2000, 0x1000, 0, RW, None, false).unwrap();
        }
    }

    /// DMA_UNMAP looks only at the windows it touches, not at every window
    /// below the range.
    #[test]
    fn unmap_does_not_scan_the_table() {
        let mut t = DmaMapTable::new();
        scattered(&mut t, 1000);
        assert_eq!(t.len(), 1000);
        // From the top down, one page at a time, as a vIOMMU tears down.
        for i in (0..1000u64).rev() {
            assert_eq!(t.unmap(i * 0x2000, 0x1000, false), 0x1000);
        }
        assert!(t.is_empty());
        assert_eq!(t.scanned, 1000);
        // A range straddling windows on both sides finds exactly those.
        scattered(&mut t, 8);
        t.scanned = 0;
        assert_eq!(t.unmap(0x2800, 0x4000, false), 0x800 + 0x1000 + 0x800);
        assert_eq!(t.scanned, 3);
    }

    /// The table has a cap; a map beyond it is refused (ENOSPC, like vfio
    /// type1), and an unmap that would split a window at the cap drops the
    /// tail from the cache instead of growing the table.
    #[test]
    fn the_window_table_is_capped() {
        let mut t = DmaMapTable::new();
        scattered(&mut t, MAX_WINDOWS as u64);
        let top = MAX_WINDOWS as u64 * 0x2000;
        let e = t.map(top, 0x1000, 0, RW, None, false).unwrap_err();
        assert_eq!(e, MapError::TooMany);
        assert_eq!(e.errno(), libc::ENOSPC);
        assert_eq!(t.len(), MAX_WINDOWS);
        // Extending a window is still possible (no new entry): this one
        // joins the first two windows into one.
        t.map(0x1000, 0x1000, 0, RW, None, false).unwrap();
        assert_eq!(t.len(), MAX_WINDOWS - 1);
        t.map(top, 0x800, 0, RW, None, false).unwrap();
        assert_eq!(t.len(), MAX_WINDOWS);
        // A hole in the middle of a window at the cap: no growth, and the
        // head stays.
        assert_eq!(t.unmap(0x400, 0x100, false), 0x100);
        assert_eq!(t.len(), MAX_WINDOWS);
        let mut r = t.windows.range(..0x2000);
        assert_eq!(r.next().map(|(&b, w)| (b, w.size)), Some((0, 0x400)));
        assert!(r.next().is_none());
    }

    #[test]
    fn unmap_exact_superset_partial_and_all() {
        let mut t = DmaMapTable::new();
        for i in 0..4u64 {
            t.map(0x1000 * (i + 1), 0x1000, 0, RW, None, false).unwrap();
        }
        assert_eq!(t.unmap(0x1000, 0x1000, false), 0x1000);
        assert_eq!(t.unmap(0x2000, 0x2000, false), 0x2000); // covers two
        assert_eq!(t.unmap(0x4800, 0x100, false), 0x100); // splits one
        assert_eq!(t.len(), 2);
        assert_eq!(t.unmap(0x9000, 0x1000, false), 0); // nothing there
        assert_eq!(t.unmap(0, 0, true), 0x700 + 0x800);
        assert!(t.is_empty());
    }

    #[test]
    fn mapped_path_reads_writes_and_copies_across_windows() {
        let fd = memfd(0x10000);
        let mut t = DmaMapTable::new();
        // Two adjacent IOVA pages backed by non-adjacent file pages, as a
        // vIOMMU produces them.
        t.map(0x10_0000, 0x1000, 0x3000, RW, Some(dup(&fd)), true)
            .unwrap();
        t.map(0x10_1000, 0x1000, 0x1000, RW, Some(dup(&fd)), true)
            .unwrap();
        t.map(0x20_0000, 0x2000, 0x8000, RW, Some(dup(&fd)), true)
            .unwrap();
        assert_eq!(t.files.iter().filter(|w| w.strong_count() > 0).count(), 1);
        let (m, _) = mapped(t);
        let data: Vec<u8> = (0..0x1800u32).map(|i| i as u8).collect();
        m.write(0x10_0400, &data).unwrap();
        let mut back = vec![0u8; data.len()];
        m.read(0x10_0400, &mut back).unwrap();
        assert_eq!(back, data);
        let mut scratch = Vec::new();
        m.copy(0x10_0400, 0x20_0000, data.len(), &mut scratch)
            .unwrap();
        let mut out = vec![0u8; data.len()];
        m.read(0x20_0000, &mut out).unwrap();
        assert_eq!(out, data);
        // The file itself shows the split placement.
        let f = std::fs::File::from(dup(&fd));
        let mut page = vec![0u8; 0x10];
        use std::os::unix::fs::FileExt;
        f.read_exact_at(&mut page, 0x1000).unwrap();
        assert_eq!(page, data[0xC00..0xC10]);
    }

    /// The message path as the mapped path sees it: counts every call and
    /// checks the lock rule (no table lock held across a message).
    struct Messages {
        mem: VecMemory,
        table: Arc<RwLock<DmaMapTable>>,
        calls: AtomicU64,
    }

    impl Messages {
        fn called(&self) {
            self.calls.fetch_add(1, Ordering::Relaxed);
            // DMA_UNMAP takes the write lock on the socket thread while a
            // message waits for its reply: it must not find the table
            // locked by us.
            assert!(
                self.table.try_write().is_ok(),
                "table lock held across a DMA message"
            );
        }
    }

    impl GuestMemory for Messages {
        fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
            self.called();
            self.mem.read(iova, buf)
        }

        fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
            self.called();
            self.mem.write(iova, data)
        }
    }

    /// A mapped path over `table` whose fallback counts its messages.
    fn with_messages(table: DmaMapTable) -> (MappedMemory, Arc<Messages>) {
        let table = Arc::new(RwLock::new(table));
        let msgs = Arc::new(Messages {
            mem: VecMemory::new(),
            table: table.clone(),
            calls: AtomicU64::new(0),
        });
        let m = MappedMemory::new(table, msgs.clone(), Arc::new(Stats::default()));
        (m, msgs)
    }

    fn count(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }

    #[test]
    fn hits_send_no_message() {
        let fd = memfd(0x4000);
        let mut t = DmaMapTable::new();
        t.map(0x1000, 0x3000, 0, RW, Some(dup(&fd)), true).unwrap();
        let (m, msgs) = with_messages(t);
        let mut scratch = Vec::new();
        m.write(0x1000, b"descriptor").unwrap();
        let mut b = [0u8; 10];
        m.read(0x1000, &mut b).unwrap();
        assert_eq!(&b, b"descriptor");
        m.copy(0x1000, 0x3000, 10, &mut scratch).unwrap();
        m.read(0x3000, &mut b).unwrap();
        assert_eq!(&b, b"descriptor");
        assert_eq!(count(&msgs.calls), 0);
        assert_eq!(count(&m.stats.mapped_misses), 0);
        assert_eq!(count(&m.stats.bytes_mapped), 10);
        assert_eq!(count(&m.stats.bytes_messages), 0);
        // A direct copy needs no bounce buffer.
        assert!(scratch.is_empty());
    }

    #[test]
    fn a_large_copy_streams_across_page_windows_with_no_message() {
        // Two buffers of STREAM_MIN + 100 bytes, each mapped one page per
        // window (as the vIOMMU sends them), in reverse file order so that
        // no two windows merge: the copy goes piece by piece.
        let len = STREAM_MIN + 100;
        let pages = len.div_ceil(0x1000) as u64;
        let fd = memfd(2 * pages * 0x1000);
        let mut t = DmaMapTable::new();
        for p in 0..2 * pages {
            let file_off = (2 * pages - 1 - p) * 0x1000;
            t.map(
                0x10_0000 + p * 0x1000,
                0x1000,
                file_off,
                RW,
                Some(dup(&fd)),
                true,
            )
            .unwrap();
        }
        let (m, msgs) = with_messages(t);
        let (src, dst) = (0x10_0000 + 7, 0x10_0000 + pages * 0x1000 + 3);
        let pattern: Vec<u8> = (0..len).map(|i| ((i * 7) ^ (i >> 9)) as u8).collect();
        m.write(src, &pattern).unwrap();
        let mut scratch = Vec::new();
        m.copy(src, dst, len - 10, &mut scratch).unwrap();
        let mut got = vec![0u8; len - 10];
        m.read(dst, &mut got).unwrap();
        assert_eq!(got, pattern[..len - 10]);
        assert_eq!(count(&msgs.calls), 0);
        assert_eq!(count(&m.stats.bytes_mapped), (len - 10) as u64);
        assert!(scratch.is_empty());
    }

    #[test]
    fn a_miss_reaches_the_message_path() {
        let fd = memfd(0x4000);
        let mut t = DmaMapTable::new();
        t.map(0x2000, 0x1000, 0x1000, RW, Some(dup(&fd)), true)
            .unwrap();
        let (m, msgs) = with_messages(t);
        // The client's IOMMU knows memory the table does not (a mapping
        // whose DMA_MAP has not been seen): the access succeeds there.
        msgs.mem.add_region(0x3000, 0x1000);
        msgs.mem.write(0x3000, b"from the client").unwrap();
        let mut b = [0u8; 15];
        m.read(0x3000, &mut b).unwrap();
        assert_eq!(&b, b"from the client");
        assert_eq!(count(&msgs.calls), 1);
        assert_eq!(count(&m.stats.mapped_misses), 1);
        // Where the client's IOMMU refuses too, its error is the result:
        // this is how a guest DMAR fault turns into RD_FAIL/WR_FAIL.
        assert_eq!(
            m.read(0x9000, &mut [0u8; 4]),
            Err(DmaError::Unmapped {
                iova: 0x9000,
                len: 4
            })
        );
        assert!(matches!(
            m.write(0x9000, b"x"),
            Err(DmaError::Unmapped { iova: 0x9000, .. })
        ));
        assert_eq!(count(&msgs.calls), 3);
        // An access running off the end of a window: the mapped part is
        // direct, the rest one message for exactly the missing bytes.
        let mut b = [0u8; 0x20];
        m.read(0x2FF0, &mut b).unwrap();
        assert_eq!(count(&msgs.calls), 4);
        assert!(m.read(0x3FF0, &mut [0u8; 0x20]).is_err());
        // The gap below a window misses up to the window, not beyond it
        // (the client only knows the 8 bytes below 0x2000).
        msgs.mem.add_region(0x1FF0, 0x10);
        m.read(0x1FF8, &mut [0u8; 0x10]).unwrap();
        assert_eq!(count(&msgs.calls), 6);
        assert_eq!(count(&m.stats.mapped_misses), 6);
    }

    #[test]
    fn a_permission_miss_reaches_the_message_path() {
        let fd = memfd(0x4000);
        let mut t = DmaMapTable::new();
        t.map(
            0x1000,
            0x1000,
            0,
            VFIO_DMA_MAP_FLAG_READ,
            Some(dup(&fd)),
            true,
        )
        .unwrap();
        t.map(
            0x2000,
            0x1000,
            0x1000,
            VFIO_DMA_MAP_FLAG_WRITE,
            Some(dup(&fd)),
            true,
        )
        .unwrap();
        let (m, msgs) = with_messages(t);
        // Refused by the client as well: the write fails, the file is
        // untouched.
        assert!(m.write(0x1000, b"x").is_err());
        assert!(m.read(0x2000, &mut [0u8; 1]).is_err());
        assert_eq!(count(&msgs.calls), 2);
        assert_eq!(count(&m.stats.mapped_misses), 2);
        let f = std::fs::File::from(dup(&fd));
        let mut b = [0xFFu8; 1];
        use std::os::unix::fs::FileExt;
        f.read_exact_at(&mut b, 0).unwrap();
        assert_eq!(b, [0]);
        // The client decides: where it allows the write, it happens there.
        msgs.mem.add_region(0x1000, 0x10);
        m.write(0x1000, b"y").unwrap();
        assert_eq!(count(&msgs.calls), 3);
    }

    #[test]
    fn copy_misses_fail_on_the_right_side() {
        let fd = memfd(0x4000);
        let mut t = DmaMapTable::new();
        t.map(
            0x1000,
            0x1000,
            0,
            VFIO_DMA_MAP_FLAG_READ,
            Some(dup(&fd)),
            true,
        )
        .unwrap();
        t.map(0x2000, 0x1000, 0x1000, RW, Some(dup(&fd)), true)
            .unwrap();
        let (m, msgs) = with_messages(t);
        let mut scratch = Vec::new();
        // Unmapped source: one message (the read), no write attempted.
        assert_eq!(
            m.copy(0x9000, 0x2000, 8, &mut scratch),
            Err(CopyError::Read(DmaError::Unmapped {
                iova: 0x9000,
                len: 8
            }))
        );
        assert_eq!(count(&msgs.calls), 1);
        // Read-only destination: the source is read directly, the write is
        // one message, refused.
        assert!(matches!(
            m.copy(0x2000, 0x1000, 8, &mut scratch),
            Err(CopyError::Write(DmaError::Unmapped { iova: 0x1000, .. }))
        ));
        assert_eq!(count(&msgs.calls), 2);
        assert_eq!(count(&m.stats.mapped_misses), 2);
        // A copy whose destination the client maps: bounced, and counted
        // as message bytes.
        msgs.mem.add_region(0x8000, 0x100);
        m.write(0x2000, b"bounced").unwrap();
        m.copy(0x2000, 0x8000, 7, &mut scratch).unwrap();
        let mut b = [0u8; 7];
        msgs.mem.read(0x8000, &mut b).unwrap();
        assert_eq!(&b, b"bounced");
        assert_eq!(count(&m.stats.bytes_messages), 7);
        assert_eq!(count(&m.stats.bytes_mapped), 0);
    }

    #[test]
    fn page_by_page_maps_become_one_window_and_unmap_page_by_page() {
        let fd = memfd(0x10000);
        let mut t = DmaMapTable::new();
        // Pages 1, 3 and 2 of a buffer, out of order, over adjacent file
        // pages; then a page over a file page elsewhere, one read-only and
        // one without a file: none of those three continues the run.
        for page in [1u64, 3, 2] {
            t.map(
                0x4_0000 + page * 0x1000,
                0x1000,
                page * 0x1000,
                RW,
                Some(dup(&fd)),
                true,
            )
            .unwrap();
        }
        assert_eq!(t.len(), 1);
        t.map(0x4_4000, 0x1000, 0x8000, RW, Some(dup(&fd)), true)
            .unwrap();
        t.map(
            0x4_0000,
            0x1000,
            0,
            VFIO_DMA_MAP_FLAG_READ,
            Some(dup(&fd)),
            true,
        )
        .unwrap();
        t.map(0x4_5000, 0x1000, 0x5000, RW, None, true).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(
            t.map(0x4_2800, 0x100, 0x2800, RW, Some(dup(&fd)), true),
            Err(MapError::Exists)
        );
        // A copy out of the merged pages is direct: no message.
        let (m, msgs) = with_messages(t);
        let data: Vec<u8> = (0..0x2000u32).map(|i| (i * 7) as u8).collect();
        m.write(0x4_1800, &data).unwrap();
        let mut scratch = Vec::new();
        m.copy(0x4_1800, 0x4_4000, 0x800, &mut scratch).unwrap();
        assert_eq!(count(&msgs.calls), 0);
        // Unmapping the middle page leaves a hole that misses (a fault for
        // the guest), with both neighbours still mapped at their pages.
        assert_eq!(
            msgs.table.write().unwrap().unmap(0x4_2000, 0x1000, false),
            0x1000
        );
        let mut b = [0u8; 0x10];
        assert!(m.read(0x4_2000, &mut b).is_err());
        assert_eq!(count(&msgs.calls), 1);
        m.read(0x4_1800, &mut b).unwrap();
        assert_eq!(b, data[..0x10]);
        m.read(0x4_3000, &mut b).unwrap();
        assert_eq!(b, data[0x1800..0x1810]);
    }

    #[test]
    fn unbacked_windows_use_the_fallback() {
        let mut t = DmaMapTable::new();
        t.map(0x5000, 0x1000, 0, RW, None, true).unwrap();
        let (m, fb) = mapped(t);
        fb.add_region(0x5000, 0x1000);
        m.write(0x5010, b"via messages").unwrap();
        let mut b = [0u8; 12];
        fb.read(0x5010, &mut b).unwrap();
        assert_eq!(&b, b"via messages");
        let mut scratch = Vec::new();
        m.copy(0x5010, 0x5100, 12, &mut scratch).unwrap();
        fb.read(0x5100, &mut b).unwrap();
        assert_eq!(&b, b"via messages");
    }

    #[test]
    fn unmap_keeps_the_file_offset_of_a_tail() {
        let fd = memfd(0x4000);
        let mut t = DmaMapTable::new();
        t.map(0x10000, 0x3000, 0x1000, RW, Some(dup(&fd)), true)
            .unwrap();
        t.unmap(0x10000, 0x1000, false);
        let (m, _) = mapped(t);
        m.write(0x11000, b"tail").unwrap();
        let f = std::fs::File::from(dup(&fd));
        let mut b = [0u8; 4];
        use std::os::unix::fs::FileExt;
        f.read_exact_at(&mut b, 0x2000).unwrap();
        assert_eq!(&b, b"tail");
    }
}
