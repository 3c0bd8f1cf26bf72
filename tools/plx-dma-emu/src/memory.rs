// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The engine's view of memory: every descriptor fetch, data access and
//! write-back goes through a [`GuestMemory`].
//!
//! Three implementations exist:
//!
//! * [`crate::dma_client::ClientDma`] sends VFIO_USER_DMA_READ/WRITE to the
//!   client, so QEMU performs the access through the guest IOMMU (default);
//! * [`crate::dma_map::MappedMemory`] uses the memory QEMU shared with
//!   VFIO_USER_DMA_MAP (the `--mapped` fast path);
//! * [`VecMemory`] below, plain in-process buffers for unit tests and the
//!   host benchmark.

use std::sync::Mutex;

/// Why a DMA access failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DmaError {
    /// No mapping covers the range (mapped path or test memory).
    #[error("IOVA {iova:#x}+{len:#x} is not mapped")]
    Unmapped {
        /// First address that missed.
        iova: u64,
        /// Bytes requested from there.
        len: u64,
    },
    /// A mapping exists but lacks the needed permission.
    #[error("IOVA {iova:#x} is mapped without {} permission", if *.write { "write" } else { "read" })]
    Permission {
        /// Address of the access.
        iova: u64,
        /// True for a write.
        write: bool,
    },
    /// The client answered the DMA message with an error (for QEMU: the
    /// guest IOMMU refused the access, and the guest logged a DMAR fault).
    #[error("client refused the access at IOVA {iova:#x}: {}", std::io::Error::from_raw_os_error(*.errno))]
    Client {
        /// Address of the access.
        iova: u64,
        /// errno from the reply header.
        errno: i32,
    },
    /// The client sent a reply that does not match the request.
    #[error("malformed DMA reply from client: {0}")]
    BadReply(String),
    /// The client did not answer in time.
    #[error("client did not answer the DMA request in time")]
    Timeout,
    /// The connection is gone.
    #[error("client disconnected")]
    Disconnected,
    /// The range wraps around the address space or exceeds 48 bits.
    #[error("range {iova:#x}+{len:#x} exceeds the 48-bit address space")]
    OutOfRange {
        /// Start of the range.
        iova: u64,
        /// Its length.
        len: u64,
    },
    /// PCI bus mastering is disabled in the command register.
    #[error("bus mastering is disabled (PCI_COMMAND.MASTER clear)")]
    BusMasterOff,
}

/// Failure of a [`GuestMemory::copy`]: which side failed and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CopyError {
    /// Reading the source failed.
    Read(DmaError),
    /// Writing the destination failed.
    Write(DmaError),
}

/// Memory as the device sees it: IOVAs, not host addresses.
pub trait GuestMemory: Send + Sync {
    /// Reads `buf.len()` bytes at `iova`.
    fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError>;

    /// Writes `data` at `iova`.
    fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError>;

    /// Copies `len` bytes from `src` to `dst`. The default bounces through
    /// `scratch`; implementations with direct access override it.
    fn copy(&self, src: u64, dst: u64, len: usize, scratch: &mut Vec<u8>) -> Result<(), CopyError> {
        bounce_copy(self, src, dst, len, scratch)
    }

    /// As [`GuestMemory::copy`], but calls `proceed` right before anything
    /// is written and writes nothing if it says no (`Ok(false)`): the
    /// engine's check that no reset or abort came while the source was
    /// being read, so that a chunk read before a reset does not land after
    /// it. The default bounces through `scratch` with the check between the
    /// read and the write.
    fn copy_checked(
        &self,
        src: u64,
        dst: u64,
        len: usize,
        scratch: &mut Vec<u8>,
        proceed: &dyn Fn() -> bool,
    ) -> Result<bool, CopyError> {
        bounce_copy_checked(self, src, dst, len, scratch, proceed)
    }

    /// Largest piece the engine should move in one call; the engine checks
    /// for aborts between pieces.
    fn max_chunk(&self) -> usize {
        1 << 20
    }
}

/// Copies by reading the source into `scratch` and writing it out again.
///
/// `scratch` belongs to the engine thread and only ever grows, so after the
/// first copy of the largest chunk size there is no allocation per copy.
pub fn bounce_copy<M: GuestMemory + ?Sized>(
    mem: &M,
    src: u64,
    dst: u64,
    len: usize,
    scratch: &mut Vec<u8>,
) -> Result<(), CopyError> {
    bounce_copy_checked(mem, src, dst, len, scratch, &|| true).map(|_| ())
}

/// [`bounce_copy`] with a last check between the read and the write (see
/// [`GuestMemory::copy_checked`]).
pub fn bounce_copy_checked<M: GuestMemory + ?Sized>(
    mem: &M,
    src: u64,
    dst: u64,
    len: usize,
    scratch: &mut Vec<u8>,
    proceed: &dyn Fn() -> bool,
) -> Result<bool, CopyError> {
    if scratch.len() < len {
        scratch.resize(len, 0);
    }
    let buf = &mut scratch[..len];
    mem.read(src, buf).map_err(CopyError::Read)?;
    if !proceed() {
        return Ok(false);
    }
    mem.write(dst, buf).map_err(CopyError::Write)?;
    Ok(true)
}

/// Checks that `[iova, iova + len)` neither wraps nor leaves 64 bits.
pub fn range_end(iova: u64, len: u64) -> Option<u64> {
    iova.checked_add(len)
}

#[derive(Debug)]
struct Region {
    base: u64,
    bytes: Vec<u8>,
}

/// Sparse in-process memory: a set of disjoint regions at chosen IOVAs.
/// An access must fall inside one region; anything else is `Unmapped`,
/// which lets tests model IOMMU faults.
#[derive(Debug, Default)]
pub struct VecMemory {
    regions: Mutex<Vec<Region>>,
}

impl VecMemory {
    /// Empty memory: every access faults.
    pub fn new() -> VecMemory {
        VecMemory::default()
    }

    /// Adds a zero-filled region. Overlapping an existing region is a test
    /// bug and panics.
    pub fn add_region(&self, base: u64, len: usize) {
        let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        let end = base + len as u64;
        assert!(
            regions
                .iter()
                .all(|r| end <= r.base || base >= r.base + r.bytes.len() as u64),
            "overlapping test region"
        );
        regions.push(Region {
            base,
            bytes: vec![0; len],
        });
    }

    /// Removes the region starting at `base` (simulates an IOMMU unmap).
    pub fn remove_region(&self, base: u64) {
        let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        regions.retain(|r| r.base != base);
    }

    fn with_region<R>(
        &self,
        iova: u64,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> Result<R, DmaError> {
        let end = range_end(iova, len as u64).ok_or(DmaError::OutOfRange {
            iova,
            len: len as u64,
        })?;
        let mut regions = self.regions.lock().unwrap_or_else(|e| e.into_inner());
        for r in regions.iter_mut() {
            let r_end = r.base + r.bytes.len() as u64;
            if iova >= r.base && end <= r_end {
                let off = (iova - r.base) as usize;
                return Ok(f(&mut r.bytes[off..off + len]));
            }
        }
        Err(DmaError::Unmapped {
            iova,
            len: len as u64,
        })
    }
}

impl GuestMemory for VecMemory {
    fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        self.with_region(iova, buf.len(), |m| buf.copy_from_slice(m))
    }

    fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
        self.with_region(iova, data.len(), |m| m.copy_from_slice(data))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vec_memory_regions() {
        let m = VecMemory::new();
        m.add_region(0x1000, 0x100);
        m.write(0x1010, &[1, 2, 3]).unwrap();
        let mut b = [0u8; 3];
        m.read(0x1010, &mut b).unwrap();
        assert_eq!(b, [1, 2, 3]);
        // Straddling the end of the region faults.
        assert_eq!(
            m.read(0x10FF, &mut [0u8; 2]),
            Err(DmaError::Unmapped {
                iova: 0x10FF,
                len: 2
            })
        );
        assert!(matches!(
            m.read(u64::MAX, &mut [0u8; 2]),
            Err(DmaError::OutOfRange { .. })
        ));
        m.remove_region(0x1000);
        assert!(m.read(0x1010, &mut b).is_err());
    }

    #[test]
    fn default_copy_reports_side() {
        let m = VecMemory::new();
        m.add_region(0, 64);
        let mut scratch = Vec::new();
        m.write(0, b"abcd").unwrap();
        m.copy(0, 32, 4, &mut scratch).unwrap();
        let mut b = [0u8; 4];
        m.read(32, &mut b).unwrap();
        assert_eq!(&b, b"abcd");
        assert!(matches!(
            m.copy(1000, 0, 4, &mut scratch),
            Err(CopyError::Read(_))
        ));
        assert!(matches!(
            m.copy(0, 1000, 4, &mut scratch),
            Err(CopyError::Write(_))
        ));
    }
}
