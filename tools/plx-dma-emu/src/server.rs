// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The vfio-user server side of one channel: accepts a client on the
//! channel's socket and answers its commands.
//!
//! Threads per connection: this one (the socket thread) reads every
//! message, answers commands and routes replies to our DMA requests; the
//! engine thread runs the ring and blocks on those replies. See
//! [`crate::conn`] for why the split matters.

use std::fmt::Write;
use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use vfio_bindings::bindings::vfio::{
    VFIO_DEVICE_FLAGS_PCI, VFIO_DEVICE_FLAGS_RESET, VFIO_DMA_UNMAP_FLAG_ALL,
    VFIO_PCI_BAR0_REGION_INDEX, VFIO_PCI_BAR2_REGION_INDEX, VFIO_PCI_CONFIG_REGION_INDEX,
    VFIO_PCI_NUM_IRQS, VFIO_PCI_NUM_REGIONS, VFIO_REGION_INFO_FLAG_READ,
    VFIO_REGION_INFO_FLAG_WRITE,
};

use crate::config_space::CONFIG_SIZE;
use crate::conn::{recv_message, Conn, Message, Reply};
use crate::device::Device;
use crate::dma_client::ClientDma;
use crate::dma_map::{DmaMapTable, MappedMemory};
use crate::irq::{irq_count, irq_flags};
use crate::log::Level;
use crate::memory::GuestMemory;
use crate::protocol::*;
use crate::regs::{BAR0_SIZE, BAR2_SIZE};
use crate::stats::inc;

/// Options shared by all channels.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServerOptions {
    /// Use the mmapped DMA windows instead of DMA messages.
    pub mapped: bool,
}

impl ServerOptions {
    /// The memory path's name in logs and the counter summary lines.
    pub fn path_name(&self) -> &'static str {
        if self.mapped {
            "mapped"
        } else {
            "message"
        }
    }
}

/// DMA_MAP flag bits 2 and 3 (access mode: mmap / file I/O).
const DMA_MAP_ACCESS_MMAP: u32 = 1 << 2;
const DMA_MAP_ACCESS_FILEIO: u32 = 1 << 3;

/// Creates the listening socket, replacing a stale socket file left by an
/// earlier run (but never any other kind of file).
pub fn bind(path: &Path) -> io::Result<UnixListener> {
    if let Ok(md) = fs::symlink_metadata(path) {
        if md.file_type().is_socket() {
            fs::remove_file(path)?;
        } else {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ));
        }
    }
    UnixListener::bind(path)
}

/// Accepts clients on `listener` one after the other, forever.
pub fn run_channel(dev: Arc<Device>, listener: UnixListener, opts: ServerOptions) {
    loop {
        match listener.accept() {
            Ok((stream, _)) => {
                dev.info(format_args!("client connected"));
                serve(&dev, stream, opts);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                crate::log!(Level::Error, dev.name(), "accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

/// Serves one connected client until it goes away, then resets the device.
pub fn serve(dev: &Arc<Device>, stream: UnixStream, opts: ServerOptions) {
    let writer = match stream.try_clone() {
        Ok(w) => w,
        Err(e) => {
            crate::log!(
                Level::Error,
                dev.name(),
                "cannot clone the client socket: {e}"
            );
            return;
        }
    };
    let conn = Arc::new(Conn::new(writer));
    let table = Arc::new(RwLock::new(DmaMapTable::new()));
    let messages: Arc<dyn GuestMemory> = Arc::new(ClientDma::new(conn.clone(), dev.stats.clone()));
    let mem: Arc<dyn GuestMemory> = if opts.mapped {
        Arc::new(MappedMemory::new(
            table.clone(),
            messages,
            dev.stats.clone(),
        ))
    } else {
        messages
    };
    let worker = match crate::worker::start(dev, mem) {
        Ok(w) => w,
        Err(e) => {
            // Without an engine the device cannot work: the client sees
            // the connection close at once (a device that failed to come
            // up), and the channel waits for the next one.
            crate::log!(
                Level::Error,
                dev.name(),
                "cannot start the engine thread: {e}; closing the connection"
            );
            conn.close();
            return;
        }
    };
    dev.attach(conn.clone());
    let mut session = Session::new(dev.clone(), conn.clone(), table.clone(), opts.mapped);
    let why = loop {
        match recv_message(&stream) {
            Ok(Some(msg)) => {
                if let Err(e) = session.handle(msg) {
                    break e;
                }
            }
            Ok(None) => break "client closed the connection".to_string(),
            Err(e) => break e.to_string(),
        }
    };
    dev.info(format_args!("client gone: {why}"));
    // Order matters: closing the connection fails any DMA the engine waits
    // for, so the engine thread can be joined without help from the client.
    conn.close();
    worker.stop();
    dev.detach();
    table
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .unmap(0, 0, true);
    dev.client_gone();
    // The engine is stopped: these are the connection's final counters.
    crate::stderr_line!(
        "{}",
        dev.stats
            .summary_line(dev.name(), opts.path_name(), "disconnect")
    );
}

/// Per-connection command handling.
pub struct Session {
    dev: Arc<Device>,
    conn: Arc<Conn>,
    table: Arc<RwLock<DmaMapTable>>,
    mapped: bool,
    negotiated: bool,
}

type Answer = Result<Vec<u8>, i32>;

impl Session {
    /// The command handler of a fresh connection: `conn` carries the
    /// replies, `table` holds the client's DMA windows, `mapped` selects
    /// the `--mapped` path. [`serve`] builds one per client; the fuzz
    /// targets in `fuzz/` build one to feed it decoded messages directly,
    /// without an engine thread.
    pub fn new(
        dev: Arc<Device>,
        conn: Arc<Conn>,
        table: Arc<RwLock<DmaMapTable>>,
        mapped: bool,
    ) -> Session {
        Session {
            dev,
            conn,
            table,
            mapped,
            negotiated: false,
        }
    }

    /// Handles one message. An `Err` ends the connection.
    pub fn handle(&mut self, msg: Message) -> Result<(), String> {
        let Message { hdr, payload, fds } = msg;
        match hdr.msg_type() {
            TYPE_REPLY => {
                if !fds.is_empty() {
                    self.dev.warn(format_args!(
                        "reply {} carried file descriptors; closed them",
                        hdr.id
                    ));
                }
                if !self.conn.route_reply(Reply { hdr, payload }) {
                    self.dev.warn(format_args!(
                        "reply with id {} ({}) matches no request of ours; ignored",
                        hdr.id,
                        cmd::name(hdr.command)
                    ));
                }
                return Ok(());
            }
            TYPE_COMMAND => {}
            t => return Err(format!("message with invalid type {t}")),
        }
        if !self.negotiated && hdr.command != cmd::VERSION {
            self.dev.warn(format_args!(
                "{} before VERSION; handling it anyway",
                cmd::name(hdr.command)
            ));
        }
        crate::log!(
            Level::Debug,
            self.dev.name(),
            "<- {} id {} size {}{}",
            cmd::name(hdr.command),
            hdr.id,
            hdr.size,
            if fds.is_empty() {
                String::new()
            } else {
                format!(" with {} fds", fds.len())
            }
        );
        let answer = self.dispatch(&hdr, &payload, fds);
        if hdr.no_reply() {
            if let Err(errno) = answer {
                self.dev.warn(format_args!(
                    "{} (no reply requested) failed: {}",
                    cmd::name(hdr.command),
                    io::Error::from_raw_os_error(errno)
                ));
            }
            return Ok(());
        }
        let bytes = match answer {
            Ok(p) => reply(&hdr, &p),
            Err(errno) => error_reply(&hdr, errno),
        };
        self.conn
            .send(&bytes)
            .map_err(|e| format!("cannot send the reply to {}: {e}", cmd::name(hdr.command)))
    }

    fn dispatch(&mut self, hdr: &Header, p: &[u8], mut fds: Vec<OwnedFd>) -> Answer {
        let takes_fds = matches!(hdr.command, cmd::DMA_MAP | cmd::DEVICE_SET_IRQS);
        if !takes_fds && !fds.is_empty() {
            self.dev.warn(format_args!(
                "{} carried {} unexpected file descriptors; closed them",
                cmd::name(hdr.command),
                fds.len()
            ));
            fds.clear();
        }
        let short = |e: Short| {
            self.dev
                .warn(format_args!("malformed {}: {e}", cmd::name(hdr.command)));
            libc::EINVAL
        };
        match hdr.command {
            cmd::VERSION => self.version(VersionReq::parse(p).map_err(short)?, p.len()),
            cmd::DMA_MAP => {
                inc(&self.dev.stats.dma_maps);
                self.dma_map(DmaMap::parse(p).map_err(short)?, fds)
            }
            cmd::DMA_UNMAP => {
                inc(&self.dev.stats.dma_unmaps);
                self.dma_unmap(DmaUnmap::parse(p).map_err(short)?)
            }
            cmd::DEVICE_GET_INFO => {
                let argsz = Reader::new(p).u32().map_err(short)?;
                if (argsz as usize) < DEVICE_INFO_SIZE {
                    return Err(libc::EINVAL);
                }
                Ok(Writer::default()
                    .u32(DEVICE_INFO_SIZE as u32)
                    .u32(VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET)
                    .u32(VFIO_PCI_NUM_REGIONS)
                    .u32(VFIO_PCI_NUM_IRQS)
                    .0)
            }
            cmd::DEVICE_GET_REGION_INFO => {
                let mut r = Reader::new(p);
                let argsz = r.u32().map_err(short)?;
                let _flags = r.u32().map_err(short)?;
                let index = r.u32().map_err(short)?;
                if (argsz as usize) < REGION_INFO_SIZE || index >= VFIO_PCI_NUM_REGIONS {
                    return Err(libc::EINVAL);
                }
                let (flags, size) = region_info(index);
                Ok(Writer::default()
                    .u32(REGION_INFO_SIZE as u32)
                    .u32(flags)
                    .u32(index)
                    .u32(0) // cap_offset: no capabilities
                    .u64(size)
                    .u64(0) // offset: nothing is mmappable
                    .0)
            }
            cmd::DEVICE_GET_IRQ_INFO => {
                let mut r = Reader::new(p);
                let argsz = r.u32().map_err(short)?;
                let _flags = r.u32().map_err(short)?;
                let index = r.u32().map_err(short)?;
                if (argsz as usize) < IRQ_INFO_SIZE || index >= VFIO_PCI_NUM_IRQS {
                    return Err(libc::EINVAL);
                }
                Ok(Writer::default()
                    .u32(IRQ_INFO_SIZE as u32)
                    .u32(irq_flags(index))
                    .u32(index)
                    .u32(irq_count(index))
                    .0)
            }
            cmd::DEVICE_SET_IRQS => {
                let s = IrqSet::parse(p).map_err(short)?;
                let r = self
                    .dev
                    .set_irqs(s.flags, s.index, s.start, s.count, s.data, fds);
                if let Err(errno) = r {
                    self.dev.warn(format_args!(
                        "SET_IRQS flags {:#x} index {} start {} count {} rejected: {}",
                        s.flags,
                        s.index,
                        s.start,
                        s.count,
                        io::Error::from_raw_os_error(errno)
                    ));
                }
                r.map(|()| Vec::new())
            }
            cmd::REGION_READ => {
                let a = RegionAccess::parse(p).map_err(short)?;
                let n = a.count as usize;
                if n > self.conn.max_xfer() {
                    return Err(libc::EINVAL);
                }
                let mut data = vec![0u8; n];
                if !self.region_read(a.region, a.offset, &mut data) {
                    self.dev.warn(format_args!(
                        "REGION_READ region {} offset {:#x} count {n} is out of range",
                        a.region, a.offset
                    ));
                    return Err(libc::EINVAL);
                }
                crate::log!(
                    Level::Debug,
                    self.dev.name(),
                    "read region {} {:#x}/{n} = {}",
                    a.region,
                    a.offset,
                    hex(&data)
                );
                Ok(RegionAccess::encode_head(a.offset, a.region, a.count)
                    .bytes(&data)
                    .0)
            }
            cmd::REGION_WRITE => {
                let a = RegionAccess::parse(p).map_err(short)?;
                let n = a.count as usize;
                if a.data.len() < n {
                    self.dev.warn(format_args!(
                        "REGION_WRITE announces {n} bytes but carries {}",
                        a.data.len()
                    ));
                    return Err(libc::EINVAL);
                }
                crate::log!(
                    Level::Debug,
                    self.dev.name(),
                    "write region {} {:#x}/{n} = {}",
                    a.region,
                    a.offset,
                    hex(&a.data[..n])
                );
                if !self.region_write(a.region, a.offset, &a.data[..n]) {
                    self.dev.warn(format_args!(
                        "REGION_WRITE region {} offset {:#x} count {n} is out of range",
                        a.region, a.offset
                    ));
                    return Err(libc::EINVAL);
                }
                Ok(RegionAccess::encode_head(a.offset, a.region, a.count).0)
            }
            cmd::REGION_WRITE_MULTI => self.write_multi(p),
            cmd::DEVICE_RESET => {
                self.dev.reset("client DEVICE_RESET");
                Ok(Vec::new())
            }
            cmd::DEVICE_GET_REGION_IO_FDS | cmd::DEVICE_FEATURE => Err(libc::ENOTSUP),
            cmd::DMA_READ | cmd::DMA_WRITE => {
                self.dev.warn(format_args!(
                    "client sent {}, a server-to-client command",
                    cmd::name(hdr.command)
                ));
                Err(libc::EINVAL)
            }
            other => {
                self.dev.warn(format_args!("unknown command {other}"));
                Err(libc::ENOSYS)
            }
        }
    }

    fn version(&mut self, v: VersionReq, req_len: usize) -> Answer {
        if v.major != VERSION_MAJOR {
            self.dev.warn(format_args!(
                "client proposes protocol {}.{}, we speak {VERSION_MAJOR}.{VERSION_MINOR}",
                v.major, v.minor
            ));
            return Err(libc::ENOTSUP);
        }
        let theirs = json_u64(&v.json, "max_data_xfer_size").unwrap_or(DEFAULT_MAX_XFER as u64);
        self.conn
            .set_max_xfer(usize::try_from(theirs).unwrap_or(DEFAULT_MAX_XFER));
        self.negotiated = true;
        // The reply's minor must not exceed the client's; ours is 0, the
        // lowest there is.
        let minor = VERSION_MINOR;
        let mut payload = version_reply_payload(v.major, minor, MAX_MSG_FDS, DEFAULT_MAX_XFER);
        // QEMU receives the reply into the buffer of its request; a reply
        // longer than the request would be rejected. Fall back to an empty
        // capability object (all defaults) for a terse client.
        if payload.len() > req_len {
            payload = Writer::default().u16(v.major).u16(minor).bytes(b"{}\0").0;
        }
        self.dev.info(format_args!(
            "protocol {}.{minor} negotiated, max transfer {} bytes, {} path",
            v.major,
            self.conn.max_xfer(),
            if self.mapped { "mapped" } else { "message" }
        ));
        Ok(payload)
    }

    fn dma_map(&mut self, m: DmaMap, mut fds: Vec<OwnedFd>) -> Answer {
        if fds.len() > 1 {
            self.dev
                .warn(format_args!("DMA_MAP with {} file descriptors", fds.len()));
            return Err(libc::EINVAL);
        }
        let fd = fds.pop();
        if m.flags & (DMA_MAP_ACCESS_MMAP | DMA_MAP_ACCESS_FILEIO) != 0 && fd.is_none() {
            return Err(libc::EINVAL);
        }
        let has_fd = fd.is_some();
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        let windows = t.len();
        match t.map(m.iova, m.size, m.offset, m.flags, fd, self.mapped) {
            Ok(note) => {
                if let Some(why) = note {
                    self.dev.warn(format_args!(
                        "DMA_MAP {:#x}+{:#x}: not mapping the file ({why}); \
                         the window is served by DMA messages",
                        m.iova, m.size
                    ));
                }
                if t.len() <= windows {
                    inc(&self.dev.stats.dma_maps_merged);
                }
                crate::log!(
                    Level::Debug,
                    self.dev.name(),
                    "DMA_MAP {:#x}+{:#x} offset {:#x} flags {:#x}{} ({} windows)",
                    m.iova,
                    m.size,
                    m.offset,
                    m.flags,
                    if has_fd { " with fd" } else { "" },
                    t.len()
                );
                Ok(Vec::new())
            }
            Err(e) => {
                drop(t);
                self.dev.warn(format_args!(
                    "DMA_MAP {:#x}+{:#x} refused: {e}",
                    m.iova, m.size
                ));
                Err(e.errno())
            }
        }
    }

    fn dma_unmap(&mut self, u: DmaUnmap) -> Answer {
        let all = u.flags & VFIO_DMA_UNMAP_FLAG_ALL != 0;
        if u.flags & !VFIO_DMA_UNMAP_FLAG_ALL != 0 {
            self.dev.warn(format_args!(
                "DMA_UNMAP with unsupported flags {:#x}",
                u.flags
            ));
            return Err(libc::EINVAL);
        }
        // Taking the write lock waits for a mapped-path copy in progress:
        // the spec requires every reference to be gone before we reply.
        let mut t = self.table.write().unwrap_or_else(|e| e.into_inner());
        let n = t.unmap(u.iova, u.size, all);
        crate::log!(
            Level::Debug,
            self.dev.name(),
            "DMA_UNMAP {:#x}+{:#x}{}: {n:#x} bytes ({} windows left)",
            u.iova,
            u.size,
            if all { " all" } else { "" },
            t.len()
        );
        Ok(u.encode())
    }

    fn region_read(&self, region: u32, off: u64, buf: &mut [u8]) -> bool {
        match region {
            VFIO_PCI_BAR0_REGION_INDEX => self.dev.bar0_read(off, buf),
            VFIO_PCI_BAR2_REGION_INDEX => self.dev.bar2_read(off, buf),
            VFIO_PCI_CONFIG_REGION_INDEX => self.dev.config_read(off, buf),
            _ => false,
        }
    }

    fn region_write(&self, region: u32, off: u64, data: &[u8]) -> bool {
        match region {
            VFIO_PCI_BAR0_REGION_INDEX => self.dev.bar0_write(off, data),
            VFIO_PCI_BAR2_REGION_INDEX => self.dev.bar2_write(off, data),
            VFIO_PCI_CONFIG_REGION_INDEX => self.dev.config_write(off, data),
            _ => false,
        }
    }

    fn write_multi(&self, p: &[u8]) -> Answer {
        let mut r = Reader::new(p);
        let n = r.u64().map_err(|_| libc::EINVAL)?;
        if n > 4096 {
            return Err(libc::EINVAL);
        }
        for _ in 0..n {
            let off = r.u64().map_err(|_| libc::EINVAL)?;
            let region = r.u32().map_err(|_| libc::EINVAL)?;
            let count = r.u32().map_err(|_| libc::EINVAL)? as usize;
            let data = r.u64().map_err(|_| libc::EINVAL)?.to_le_bytes();
            if count > 8 || !self.region_write(region, off, &data[..count]) {
                self.dev.warn(format_args!(
                    "REGION_WRITE_MULTI entry region {region} offset {off:#x} count {count} rejected"
                ));
                return Err(libc::EINVAL);
            }
        }
        Ok(Vec::new())
    }
}

/// Size and flags of each region: BAR0 registers, BAR2 for the MSI-X
/// structures, config space; everything else absent.
pub fn region_info(index: u32) -> (u32, u64) {
    let rw = VFIO_REGION_INFO_FLAG_READ | VFIO_REGION_INFO_FLAG_WRITE;
    match index {
        VFIO_PCI_BAR0_REGION_INDEX => (rw, BAR0_SIZE),
        VFIO_PCI_BAR2_REGION_INDEX => (rw, BAR2_SIZE),
        VFIO_PCI_CONFIG_REGION_INDEX => (rw, CONFIG_SIZE as u64),
        _ => (0, 0),
    }
}

fn hex(b: &[u8]) -> String {
    if b.len() > 16 {
        return format!("<{} bytes>", b.len());
    }
    b.iter()
        .fold(String::with_capacity(2 * b.len()), |mut out, x| {
            // Writing into a `String` cannot fail.
            let _ = write!(out, "{x:02x}");
            out
        })
}
