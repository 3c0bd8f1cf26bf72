// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! vfio-user message formats (QEMU `docs/interop/vfio-user.rst`).
//!
//! Written by hand rather than taken from the rust-vmm `vfio-user` crate:
//! that crate's server is single-threaded and blocking, cannot send
//! DMA_READ/DMA_WRITE and uses the wrong bit for "unmap all". The layouts
//! below are checked against `vfio-bindings` where the protocol reuses a
//! kernel structure. All fields are little endian (host order on x86).

use std::mem::size_of;

use vfio_bindings::bindings::vfio::{
    vfio_iommu_type1_dma_map, vfio_iommu_type1_dma_unmap, vfio_irq_info, vfio_irq_set,
    vfio_region_info,
};

/// Size of the common header.
pub const HDR_SIZE: usize = 16;

/// Command numbers.
pub mod cmd {
    /// Version and capability negotiation.
    pub const VERSION: u16 = 1;
    /// Client memory window added.
    pub const DMA_MAP: u16 = 2;
    /// Client memory window removed.
    pub const DMA_UNMAP: u16 = 3;
    /// Device flags and counts.
    pub const DEVICE_GET_INFO: u16 = 4;
    /// One region's flags and size.
    pub const DEVICE_GET_REGION_INFO: u16 = 5;
    /// ioeventfd/ioregionfd sub-regions (not offered).
    pub const DEVICE_GET_REGION_IO_FDS: u16 = 6;
    /// One interrupt type's flags and count.
    pub const DEVICE_GET_IRQ_INFO: u16 = 7;
    /// Interrupt eventfds and mask/unmask/trigger actions.
    pub const DEVICE_SET_IRQS: u16 = 8;
    /// Region (BAR/config) read.
    pub const REGION_READ: u16 = 9;
    /// Region (BAR/config) write.
    pub const REGION_WRITE: u16 = 10;
    /// Server reads client memory.
    pub const DMA_READ: u16 = 11;
    /// Server writes client memory.
    pub const DMA_WRITE: u16 = 12;
    /// Device (function) reset.
    pub const DEVICE_RESET: u16 = 13;
    /// Several small posted writes in one message.
    pub const REGION_WRITE_MULTI: u16 = 15;
    /// Device features (migration, ...), not offered.
    pub const DEVICE_FEATURE: u16 = 16;

    /// Name for log lines.
    pub fn name(c: u16) -> &'static str {
        match c {
            VERSION => "VERSION",
            DMA_MAP => "DMA_MAP",
            DMA_UNMAP => "DMA_UNMAP",
            DEVICE_GET_INFO => "DEVICE_GET_INFO",
            DEVICE_GET_REGION_INFO => "DEVICE_GET_REGION_INFO",
            DEVICE_GET_REGION_IO_FDS => "DEVICE_GET_REGION_IO_FDS",
            DEVICE_GET_IRQ_INFO => "DEVICE_GET_IRQ_INFO",
            DEVICE_SET_IRQS => "DEVICE_SET_IRQS",
            REGION_READ => "REGION_READ",
            REGION_WRITE => "REGION_WRITE",
            DMA_READ => "DMA_READ",
            DMA_WRITE => "DMA_WRITE",
            DEVICE_RESET => "DEVICE_RESET",
            REGION_WRITE_MULTI => "REGION_WRITE_MULTI",
            DEVICE_FEATURE => "DEVICE_FEATURE",
            _ => "unknown",
        }
    }
}

/// Header flags: message type field.
pub const FLAG_TYPE_MASK: u32 = 0xF;
/// Type value of a command.
pub const TYPE_COMMAND: u32 = 0;
/// Type value of a reply.
pub const TYPE_REPLY: u32 = 1;
/// The sender wants no reply.
pub const FLAG_NO_REPLY: u32 = 1 << 4;
/// The reply reports an error (errno in the error field).
pub const FLAG_ERROR: u32 = 1 << 5;

/// Protocol version we speak (QEMU's VFIO_USER_MAJOR_VER/MINOR_VER).
pub const VERSION_MAJOR: u16 = 0;
/// Minor version.
pub const VERSION_MINOR: u16 = 0;
/// The spec's default and our maximum for one data transfer.
pub const DEFAULT_MAX_XFER: usize = 1 << 20;
/// File descriptors we accept in one message.
pub const MAX_MSG_FDS: usize = 16;
/// Largest message we accept (a REGION_WRITE of max_xfer plus headers).
pub const MAX_MSG_SIZE: usize = DEFAULT_MAX_XFER + 64;

/// Payload size of DEVICE_GET_INFO (argsz, flags, num_regions, num_irqs).
/// The protocol's structure, shorter than today's kernel struct.
pub const DEVICE_INFO_SIZE: usize = 16;
/// Payload size of DEVICE_GET_REGION_INFO (`struct vfio_region_info`).
pub const REGION_INFO_SIZE: usize = 32;
/// Payload size of DEVICE_GET_IRQ_INFO (`struct vfio_irq_info`).
pub const IRQ_INFO_SIZE: usize = 16;
/// Fixed part of DEVICE_SET_IRQS (`struct vfio_irq_set`).
pub const IRQ_SET_SIZE: usize = 20;
/// Payload of DMA_MAP (`struct vfio_iommu_type1_dma_map`, vaddr = offset).
pub const DMA_MAP_SIZE: usize = 32;
/// Payload of DMA_UNMAP (`struct vfio_iommu_type1_dma_unmap`).
pub const DMA_UNMAP_SIZE: usize = 24;
/// Fixed part of REGION_READ/WRITE (offset, region, count).
pub const REGION_RW_SIZE: usize = 16;
/// Fixed part of DMA_READ/WRITE (address, 64-bit count).
pub const DMA_RW_SIZE: usize = 16;

// The protocol reuses these kernel structures byte for byte; if a future
// vfio-bindings changed them the build fails here instead of on the wire.
const _: () = assert!(size_of::<vfio_region_info>() == REGION_INFO_SIZE);
const _: () = assert!(size_of::<vfio_irq_info>() == IRQ_INFO_SIZE);
const _: () = assert!(size_of::<vfio_irq_set>() == IRQ_SET_SIZE);
const _: () = assert!(size_of::<vfio_iommu_type1_dma_map>() == DMA_MAP_SIZE);
const _: () = assert!(size_of::<vfio_iommu_type1_dma_unmap>() == DMA_UNMAP_SIZE);

/// The 16-byte header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// Message ID chosen by the sender of a command, echoed in the reply.
    pub id: u16,
    /// Command number.
    pub command: u16,
    /// Whole message size including the header.
    pub size: u32,
    /// Type and flag bits.
    pub flags: u32,
    /// errno of an error reply.
    pub error: u32,
}

impl Header {
    /// Decodes a header.
    pub fn decode(b: &[u8; HDR_SIZE]) -> Header {
        Header {
            id: u16::from_le_bytes([b[0], b[1]]),
            command: u16::from_le_bytes([b[2], b[3]]),
            size: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            flags: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            error: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    /// Encodes a header.
    pub fn encode(&self) -> [u8; HDR_SIZE] {
        let mut b = [0u8; HDR_SIZE];
        b[0..2].copy_from_slice(&self.id.to_le_bytes());
        b[2..4].copy_from_slice(&self.command.to_le_bytes());
        b[4..8].copy_from_slice(&self.size.to_le_bytes());
        b[8..12].copy_from_slice(&self.flags.to_le_bytes());
        b[12..16].copy_from_slice(&self.error.to_le_bytes());
        b
    }

    /// Message type (command, reply or an invalid value).
    pub fn msg_type(&self) -> u32 {
        self.flags & FLAG_TYPE_MASK
    }

    /// The sender asked for no reply.
    pub fn no_reply(&self) -> bool {
        self.flags & FLAG_NO_REPLY != 0
    }

    /// An error reply.
    pub fn is_error(&self) -> bool {
        self.flags & FLAG_ERROR != 0
    }
}

/// Builds a complete message.
fn message(id: u16, command: u16, flags: u32, error: u32, payload: &[u8]) -> Vec<u8> {
    let hdr = Header {
        id,
        command,
        size: (HDR_SIZE + payload.len()) as u32,
        flags,
        error,
    };
    let mut v = Vec::with_capacity(HDR_SIZE + payload.len());
    v.extend_from_slice(&hdr.encode());
    v.extend_from_slice(payload);
    v
}

/// A successful reply to `req` carrying `payload`.
pub fn reply(req: &Header, payload: &[u8]) -> Vec<u8> {
    message(req.id, req.command, TYPE_REPLY, 0, payload)
}

/// An error reply to `req`: header only, as the spec requires.
pub fn error_reply(req: &Header, errno: i32) -> Vec<u8> {
    message(
        req.id,
        req.command,
        TYPE_REPLY | FLAG_ERROR,
        errno as u32,
        &[],
    )
}

/// A command from us (DMA_READ/DMA_WRITE).
pub fn request(id: u16, command: u16, payload: &[u8]) -> Vec<u8> {
    message(id, command, TYPE_COMMAND, 0, payload)
}

/// A payload that is too short for its command.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("payload too short: need {need} bytes at offset {at}, have {have}")]
pub struct Short {
    need: usize,
    at: usize,
    have: usize,
}

/// Little-endian field reader with bounds checks.
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Reads from the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], Short> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let s = &self.buf[self.pos..end];
                self.pos = end;
                Ok(s)
            }
            None => Err(Short {
                need: n,
                at: self.pos,
                have: self.buf.len(),
            }),
        }
    }

    /// Next u16.
    pub fn u16(&mut self) -> Result<u16, Short> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    /// Next u32.
    pub fn u32(&mut self) -> Result<u32, Short> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Next u64.
    pub fn u64(&mut self) -> Result<u64, Short> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// The unread rest.
    pub fn rest(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }
}

/// Little-endian field writer.
#[derive(Default)]
pub struct Writer(pub Vec<u8>);

impl Writer {
    /// Appends a u16.
    pub fn u16(mut self, v: u16) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a u32.
    pub fn u32(mut self, v: u32) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends a u64.
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }

    /// Appends raw bytes.
    pub fn bytes(mut self, b: &[u8]) -> Self {
        self.0.extend_from_slice(b);
        self
    }
}

/// VFIO_USER_VERSION request.
#[derive(Debug, PartialEq, Eq)]
pub struct VersionReq {
    /// Proposed major version.
    pub major: u16,
    /// Proposed minor version.
    pub minor: u16,
    /// The client's capability JSON (without the trailing NUL).
    pub json: String,
}

impl VersionReq {
    /// Parses the payload.
    pub fn parse(p: &[u8]) -> Result<VersionReq, Short> {
        let mut r = Reader::new(p);
        let major = r.u16()?;
        let minor = r.u16()?;
        let rest = r.rest();
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        Ok(VersionReq {
            major,
            minor,
            json: String::from_utf8_lossy(&rest[..end]).into_owned(),
        })
    }
}

/// Finds `"key": <unsigned number>` anywhere in a JSON text. The client's
/// capability object is small and flat enough that a full JSON parser would
/// add a dependency for nothing; anything unparsable means "not given".
pub fn json_u64(json: &str, key: &str) -> Option<u64> {
    let pat = format!("\"{key}\"");
    let at = json.find(&pat)? + pat.len();
    let rest = json[at..].trim_start().strip_prefix(':')?.trim_start();
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse().ok()
}

/// Builds our VERSION reply payload: the negotiated version and our
/// capabilities, NUL-terminated as QEMU checks.
pub fn version_reply_payload(major: u16, minor: u16, max_fds: usize, max_xfer: usize) -> Vec<u8> {
    let json = format!(
        "{{\"capabilities\":{{\"max_msg_fds\":{max_fds},\"max_data_xfer_size\":{max_xfer}}}}}"
    );
    Writer::default()
        .u16(major)
        .u16(minor)
        .bytes(json.as_bytes())
        .bytes(&[0])
        .0
}

/// DMA_MAP request.
#[derive(Debug, PartialEq, Eq)]
pub struct DmaMap {
    /// Size of this structure.
    pub argsz: u32,
    /// READ/WRITE permission and access-mode bits.
    pub flags: u32,
    /// File offset of the window in the passed descriptor.
    pub offset: u64,
    /// First IOVA.
    pub iova: u64,
    /// Window size.
    pub size: u64,
}

impl DmaMap {
    /// Parses the payload.
    pub fn parse(p: &[u8]) -> Result<DmaMap, Short> {
        let mut r = Reader::new(p);
        Ok(DmaMap {
            argsz: r.u32()?,
            flags: r.u32()?,
            offset: r.u64()?,
            iova: r.u64()?,
            size: r.u64()?,
        })
    }
}

/// DMA_UNMAP request (and reply: the spec echoes it).
#[derive(Debug, PartialEq, Eq)]
pub struct DmaUnmap {
    /// Size of the structure / maximum reply size.
    pub argsz: u32,
    /// `VFIO_DMA_UNMAP_FLAG_ALL` (bit 1) unmaps everything.
    pub flags: u32,
    /// First IOVA.
    pub iova: u64,
    /// Range size.
    pub size: u64,
}

impl DmaUnmap {
    /// Parses the payload.
    pub fn parse(p: &[u8]) -> Result<DmaUnmap, Short> {
        let mut r = Reader::new(p);
        Ok(DmaUnmap {
            argsz: r.u32()?,
            flags: r.u32()?,
            iova: r.u64()?,
            size: r.u64()?,
        })
    }

    /// Encodes for the reply.
    pub fn encode(&self) -> Vec<u8> {
        Writer::default()
            .u32(self.argsz)
            .u32(self.flags)
            .u64(self.iova)
            .u64(self.size)
            .0
    }
}

/// DEVICE_SET_IRQS request (fixed part plus BOOL data if any).
#[derive(Debug, PartialEq, Eq)]
pub struct IrqSet<'a> {
    /// Size including data.
    pub argsz: u32,
    /// DATA_* and ACTION_* bits.
    pub flags: u32,
    /// IRQ type (INTx, MSI, MSI-X, ERR, REQ).
    pub index: u32,
    /// First sub-index.
    pub start: u32,
    /// Number of sub-indexes.
    pub count: u32,
    /// Trailing data (booleans for DATA_BOOL).
    pub data: &'a [u8],
}

impl<'a> IrqSet<'a> {
    /// Parses the payload.
    pub fn parse(p: &'a [u8]) -> Result<IrqSet<'a>, Short> {
        let mut r = Reader::new(p);
        Ok(IrqSet {
            argsz: r.u32()?,
            flags: r.u32()?,
            index: r.u32()?,
            start: r.u32()?,
            count: r.u32()?,
            data: r.rest(),
        })
    }
}

/// REGION_READ / REGION_WRITE request.
#[derive(Debug, PartialEq, Eq)]
pub struct RegionAccess<'a> {
    /// Offset in the region.
    pub offset: u64,
    /// Region index.
    pub region: u32,
    /// Bytes to transfer.
    pub count: u32,
    /// Data of a write (empty for a read).
    pub data: &'a [u8],
}

impl<'a> RegionAccess<'a> {
    /// Parses the payload.
    pub fn parse(p: &'a [u8]) -> Result<RegionAccess<'a>, Short> {
        let mut r = Reader::new(p);
        Ok(RegionAccess {
            offset: r.u64()?,
            region: r.u32()?,
            count: r.u32()?,
            data: r.rest(),
        })
    }

    /// Encodes the fixed part (for replies and tests).
    pub fn encode_head(offset: u64, region: u32, count: u32) -> Writer {
        Writer::default().u64(offset).u32(region).u32(count)
    }
}

/// DMA_READ/DMA_WRITE fixed part (address, 64-bit count).
#[derive(Debug, PartialEq, Eq)]
pub struct DmaRw<'a> {
    /// Client DMA address (IOVA).
    pub address: u64,
    /// Bytes.
    pub count: u64,
    /// Data (read reply or write request).
    pub data: &'a [u8],
}

impl<'a> DmaRw<'a> {
    /// Parses a payload.
    pub fn parse(p: &'a [u8]) -> Result<DmaRw<'a>, Short> {
        let mut r = Reader::new(p);
        Ok(DmaRw {
            address: r.u64()?,
            count: r.u64()?,
            data: r.rest(),
        })
    }

    /// Encodes a payload.
    pub fn encode(address: u64, count: u64, data: &[u8]) -> Vec<u8> {
        Writer::default().u64(address).u64(count).bytes(data).0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_roundtrip_and_flags() {
        let h = Header {
            id: 0x1234,
            command: cmd::REGION_WRITE,
            size: 40,
            flags: TYPE_COMMAND | FLAG_NO_REPLY,
            error: 0,
        };
        let b = h.encode();
        assert_eq!(&b[0..2], &[0x34, 0x12]);
        assert_eq!(Header::decode(&b), h);
        assert!(h.no_reply());
        assert_eq!(h.msg_type(), TYPE_COMMAND);
        let r = reply(&h, &[1, 2, 3]);
        let rh = Header::decode(r[..16].try_into().unwrap());
        assert_eq!(rh.size, 19);
        assert_eq!(rh.msg_type(), TYPE_REPLY);
        assert_eq!(rh.id, 0x1234);
        let e = error_reply(&h, libc::EINVAL);
        let eh = Header::decode(e[..16].try_into().unwrap());
        assert!(eh.is_error());
        assert_eq!(eh.error, libc::EINVAL as u32);
        assert_eq!(e.len(), HDR_SIZE);
    }

    #[test]
    fn short_payloads_are_errors() {
        assert!(DmaMap::parse(&[0u8; 31]).is_err());
        assert!(DmaMap::parse(&[0u8; 32]).is_ok());
        assert!(IrqSet::parse(&[0u8; 19]).is_err());
        assert!(RegionAccess::parse(&[0u8; 15]).is_err());
        assert!(VersionReq::parse(&[0u8; 3]).is_err());
    }

    #[test]
    fn version_json() {
        let qemu = r#"{"capabilities":{"migration":{"pgsize":4096,"max_bitmap_size":1048576},"max_msg_fds":16,"max_data_xfer_size":1048576,"pgsizes":4096,"max_dma_maps":65535,"write_multiple":true}}"#;
        assert_eq!(json_u64(qemu, "max_data_xfer_size"), Some(1 << 20));
        assert_eq!(json_u64(qemu, "max_msg_fds"), Some(16));
        assert_eq!(json_u64(qemu, "absent"), None);
        assert_eq!(json_u64("{\"max_msg_fds\" : \"x\"}", "max_msg_fds"), None);
        let p = version_reply_payload(0, 0, 16, 1 << 20);
        assert_eq!(*p.last().unwrap(), 0);
        let v = VersionReq::parse(&p).unwrap();
        assert_eq!(json_u64(&v.json, "max_data_xfer_size"), Some(1 << 20));
    }

    #[test]
    fn dma_rw_layout_has_64_bit_count() {
        let p = DmaRw::encode(0x1000, 4, b"abcd");
        assert_eq!(p.len(), DMA_RW_SIZE + 4);
        assert_eq!(&p[8..16], &4u64.to_le_bytes());
        let d = DmaRw::parse(&p).unwrap();
        assert_eq!((d.address, d.count, d.data), (0x1000, 4, &b"abcd"[..]));
    }
}
