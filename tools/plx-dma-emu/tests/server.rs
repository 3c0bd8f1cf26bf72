// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The vfio-user server against an in-process fake client over a
//! socketpair: the handshake QEMU performs, region accesses, interrupts,
//! and DMA_READ/DMA_WRITE round trips answered by the client while it is
//! itself waiting for register reads (the deadlock QEMU would expose).

mod common;

use std::io::{IoSlice, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{drain, eventfd, wait_signal, BUF, DST, RING, SRC};
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};
use plx_dma_emu::config_space::{CMD_MASTER, DEVICE_ID, VENDOR_ID};
use plx_dma_emu::conn::recv_message;
use plx_dma_emu::desc::{Descriptor, WB_RD_FAIL, WB_SUCCESS};
use plx_dma_emu::device::Device;
use plx_dma_emu::faults::FaultSpec;
use plx_dma_emu::memory::{GuestMemory, VecMemory};
use plx_dma_emu::protocol::*;
use plx_dma_emu::regs::*;
use plx_dma_emu::server::{serve, ServerOptions};
use vfio_bindings::bindings::vfio::*;

const BAR0: u32 = VFIO_PCI_BAR0_REGION_INDEX;
const CFG: u32 = VFIO_PCI_CONFIG_REGION_INDEX;

/// A minimal single-threaded vfio-user client. While it waits for the
/// reply to its own command it serves the server's DMA requests from its
/// memory, like QEMU's main loop does.
struct Client {
    sock: UnixStream,
    next_id: u16,
    mem: Arc<VecMemory>,
    dma_reads: u64,
    dma_writes: u64,
    /// Addresses at which DMA fails like an IOMMU fault (EFAULT).
    server: Option<JoinHandle<()>>,
}

struct Answer {
    hdr: Header,
    payload: Vec<u8>,
}

impl Client {
    fn start(dev: &Arc<Device>, opts: ServerOptions) -> Client {
        let (a, b) = UnixStream::pair().unwrap();
        let d = dev.clone();
        let server = std::thread::spawn(move || serve(&d, b, opts));
        let mem = Arc::new(VecMemory::new());
        mem.add_region(RING, 4096);
        mem.add_region(SRC, BUF);
        mem.add_region(DST, BUF);
        a.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        Client {
            sock: a,
            next_id: 100,
            mem,
            dma_reads: 0,
            dma_writes: 0,
            server: Some(server),
        }
    }

    fn send_raw(&mut self, command: u16, flags: u32, payload: &[u8], fds: &[&OwnedFd]) -> u16 {
        let id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        let hdr = Header {
            id,
            command,
            size: (HDR_SIZE + payload.len()) as u32,
            flags,
            error: 0,
        };
        let mut msg = hdr.encode().to_vec();
        msg.extend_from_slice(payload);
        let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let cmsgs = if raw.is_empty() {
            vec![]
        } else {
            vec![ControlMessage::ScmRights(&raw)]
        };
        let iov = [IoSlice::new(&msg)];
        let n = sendmsg::<UnixAddr>(self.sock.as_raw_fd(), &iov, &cmsgs, MsgFlags::empty(), None)
            .unwrap();
        assert_eq!(n, msg.len());
        id
    }

    /// Serves one server-to-client message; returns it if it is a reply.
    fn pump(&mut self) -> Option<Answer> {
        let m = recv_message(&self.sock)
            .unwrap()
            .expect("server closed the socket");
        match m.hdr.msg_type() {
            TYPE_REPLY => Some(Answer {
                hdr: m.hdr,
                payload: m.payload,
            }),
            _ => {
                self.serve_dma(&m.hdr, &m.payload);
                None
            }
        }
    }

    fn serve_dma(&mut self, hdr: &Header, p: &[u8]) {
        let rw = DmaRw::parse(p).unwrap();
        let out = match hdr.command {
            cmd::DMA_READ => {
                self.dma_reads += 1;
                let mut data = vec![0u8; rw.count as usize];
                match self.mem.read(rw.address, &mut data) {
                    Ok(()) => reply(hdr, &DmaRw::encode(rw.address, rw.count, &data)),
                    Err(_) => error_reply(hdr, libc::EFAULT),
                }
            }
            cmd::DMA_WRITE => {
                self.dma_writes += 1;
                assert_eq!(rw.data.len() as u64, rw.count);
                match self.mem.write(rw.address, rw.data) {
                    // QEMU answers a DMA_WRITE with the bare header.
                    Ok(()) => reply(hdr, &[]),
                    Err(_) => error_reply(hdr, libc::EFAULT),
                }
            }
            other => panic!("unexpected server command {other}"),
        };
        self.sock.write_all(&out).unwrap();
    }

    fn call_fds(&mut self, command: u16, payload: &[u8], fds: &[&OwnedFd]) -> Answer {
        let id = self.send_raw(command, TYPE_COMMAND, payload, fds);
        loop {
            if let Some(a) = self.pump() {
                assert_eq!(a.hdr.id, id, "reply id");
                assert_eq!(a.hdr.command, command);
                return a;
            }
        }
    }

    fn call(&mut self, command: u16, payload: &[u8]) -> Answer {
        self.call_fds(command, payload, &[])
    }

    fn ok(&mut self, command: u16, payload: &[u8]) -> Vec<u8> {
        let a = self.call(command, payload);
        assert!(
            !a.hdr.is_error(),
            "{} failed: errno {}",
            cmd::name(command),
            a.hdr.error
        );
        a.payload
    }

    fn region_read(&mut self, region: u32, off: u64, n: u32) -> Vec<u8> {
        let p = self.ok(
            cmd::REGION_READ,
            &RegionAccess::encode_head(off, region, n).0,
        );
        let a = RegionAccess::parse(&p).unwrap();
        assert_eq!((a.offset, a.region, a.count), (off, region, n));
        a.data.to_vec()
    }

    fn region_write(&mut self, region: u32, off: u64, data: &[u8]) {
        let p = RegionAccess::encode_head(off, region, data.len() as u32)
            .bytes(data)
            .0;
        let r = self.ok(cmd::REGION_WRITE, &p);
        assert_eq!(r.len(), REGION_RW_SIZE);
    }

    /// A posted write, as QEMU sends for BAR writes: no reply comes.
    fn region_write_posted(&mut self, region: u32, off: u64, data: &[u8]) {
        let p = RegionAccess::encode_head(off, region, data.len() as u32)
            .bytes(data)
            .0;
        self.send_raw(cmd::REGION_WRITE, TYPE_COMMAND | FLAG_NO_REPLY, &p, &[]);
    }

    fn rd32(&mut self, off: u64) -> u32 {
        u32::from_le_bytes(self.region_read(BAR0, off, 4).try_into().unwrap())
    }

    fn rd16(&mut self, off: u64) -> u16 {
        u16::from_le_bytes(self.region_read(BAR0, off, 2).try_into().unwrap())
    }

    fn wr32(&mut self, off: u64, v: u32) {
        self.region_write(BAR0, off, &v.to_le_bytes());
    }

    fn handshake(&mut self) {
        let caps = br#"{"capabilities":{"max_msg_fds":16,"max_data_xfer_size":1048576,"pgsizes":4096,"max_dma_maps":65535,"write_multiple":true,"migration":{"pgsize":4096,"max_bitmap_size":1048576}}}"#;
        let payload = Writer::default().u16(0).u16(0).bytes(caps).bytes(&[0]).0;
        let r = self.ok(cmd::VERSION, &payload);
        // QEMU reads the reply into its request buffer and checks the NUL.
        assert!(r.len() <= payload.len());
        assert_eq!(*r.last().unwrap(), 0);
        let v = VersionReq::parse(&r).unwrap();
        assert_eq!((v.major, v.minor), (0, 0));
        assert_eq!(json_u64(&v.json, "max_data_xfer_size"), Some(1 << 20));
        assert!(
            !v.json.contains("write_multiple"),
            "we must not offer WRITE_MULTI"
        );
    }

    fn program_ring(&mut self, count: u32) {
        self.wr32(CTRL, CTRL_RESET_VAL);
        self.wr32(DESC_RING_ADDR, RING as u32);
        self.wr32(DESC_RING_ADDR_HI, 0);
        self.wr32(DESC_RING_NEXT_ADDR, RING as u32);
        self.wr32(DESC_RING_COUNT, count);
        self.wr32(PREF_LIMIT, PREF_LIMIT_PREF_FOUR);
    }

    fn wb(&self, slot: u64) -> u32 {
        let mut b = [0u8; 4];
        self.mem.read(RING + slot * 16, &mut b).unwrap();
        u32::from_le_bytes(b)
    }

    /// Polls a register until `cond` holds, serving DMA meanwhile.
    fn poll(&mut self, what: &str, mut cond: impl FnMut(&mut Client) -> bool) {
        let t = Instant::now();
        while !cond(self) {
            assert!(
                t.elapsed() < Duration::from_secs(10),
                "timed out waiting for {what}"
            );
        }
    }

    fn finish(mut self) {
        drop(self.sock);
        self.server.take().unwrap().join().unwrap();
    }
}

#[test]
fn qemu_like_session_over_socketpair() {
    let dev = Device::new("ch0");
    let mut c = Client::start(&dev, ServerOptions::default());
    c.handshake();

    // DEVICE_GET_INFO: a resettable PCI device, 9 regions, 5 IRQ types.
    let info = c.ok(
        cmd::DEVICE_GET_INFO,
        &Writer::default().u32(16).u32(0).u32(0).u32(0).0,
    );
    let mut r = Reader::new(&info);
    assert_eq!(r.u32().unwrap(), 16);
    assert_eq!(
        r.u32().unwrap(),
        VFIO_DEVICE_FLAGS_PCI | VFIO_DEVICE_FLAGS_RESET
    );
    assert_eq!(r.u32().unwrap(), VFIO_PCI_NUM_REGIONS);
    assert_eq!(r.u32().unwrap(), VFIO_PCI_NUM_IRQS);

    // Region info for every index QEMU asks about.
    let region = |c: &mut Client, index: u32| {
        let p = Writer::default()
            .u32(32)
            .u32(0)
            .u32(index)
            .u32(0)
            .u64(0)
            .u64(0)
            .0;
        c.call(cmd::DEVICE_GET_REGION_INFO, &p)
    };
    for (index, size) in [(0u32, BAR0_SIZE), (1, 0), (2, BAR2_SIZE), (6, 0), (7, 256)] {
        let a = region(&mut c, index);
        assert!(!a.hdr.is_error());
        let mut r = Reader::new(&a.payload);
        assert_eq!(r.u32().unwrap(), 32);
        let flags = r.u32().unwrap();
        assert_eq!(r.u32().unwrap(), index);
        assert_eq!(r.u32().unwrap(), 0, "no caps");
        assert_eq!(r.u64().unwrap(), size, "region {index}");
        assert_eq!(r.u64().unwrap(), 0);
        assert_eq!(flags & VFIO_REGION_INFO_FLAG_MMAP, 0);
    }
    assert!(region(&mut c, 9).hdr.is_error());

    // IRQ info: MSI-X has vectors, ERR/REQ exist.
    for index in 0..5u32 {
        let p = Writer::default().u32(16).u32(0).u32(index).u32(0).0;
        let a = c.ok(cmd::DEVICE_GET_IRQ_INFO, &p);
        let mut r = Reader::new(&a);
        assert_eq!(r.u32().unwrap(), 16);
        assert_ne!(r.u32().unwrap() & VFIO_IRQ_INFO_EVENTFD, 0);
        assert_eq!(r.u32().unwrap(), index);
        assert!(r.u32().unwrap() >= 1);
    }

    // Config space, read whole like vfio_pci_config_setup does.
    let cfg = c.region_read(CFG, 0, 256);
    assert_eq!(u16::from_le_bytes([cfg[0], cfg[1]]), VENDOR_ID);
    assert_eq!(u16::from_le_bytes([cfg[2], cfg[3]]), DEVICE_ID);
    assert_eq!(&cfg[9..12], &[0x00, 0x80, 0x08]);
    c.region_write(CFG, 4, &(CMD_MASTER | 2).to_le_bytes());

    // MSI-X eventfd via SET_IRQS with SCM_RIGHTS.
    let (fd, mut ev) = eventfd();
    let set = Writer::default()
        .u32(20)
        .u32(VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER)
        .u32(VFIO_PCI_MSIX_IRQ_INDEX)
        .u32(0)
        .u32(1)
        .0;
    let a = c.call_fds(cmd::DEVICE_SET_IRQS, &set, &[&fd]);
    assert!(!a.hdr.is_error());
    drop(fd);

    // DMA_MAP bookkeeping (no fd: message path), and a rejected overlap.
    let map = |iova: u64, size: u64| {
        Writer::default()
            .u32(32)
            .u32(VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE)
            .u64(0)
            .u64(iova)
            .u64(size)
            .0
    };
    c.ok(cmd::DMA_MAP, &map(0, 0x8000_0000));
    let a = c.call(cmd::DMA_MAP, &map(0x1000, 0x1000));
    assert!(a.hdr.is_error());
    assert_eq!(a.hdr.error, libc::EEXIST as u32);

    // Program like plx_dma.c, submit, ring the doorbell with a posted
    // 16-bit write, then poll INTR_STATUS: every poll is a REGION_READ
    // that the server must answer while its engine waits for our DMA
    // replies.
    c.program_ring(64);
    let data: Vec<u8> = (0..3000u32).map(|i| (i * 7) as u8).collect();
    c.mem.write(SRC, &data).unwrap();
    c.mem
        .write(RING, &Descriptor::encode(SRC, DST, 3000, true, true))
        .unwrap();
    c.mem
        .write(
            RING + 16,
            &Descriptor::encode(0x9_0000_0000, DST, 64, true, true),
        )
        .unwrap();
    c.region_write_posted(BAR0, CTRL, &(CTRL_START_VAL as u16).to_le_bytes());
    c.poll("both descriptors", |c| {
        let _ = c.rd16(INTR_STATUS); // a register read, served while DMA is pending
        c.wb(0) & 0x8000_0000 == 0 && c.wb(1) & 0x8000_0000 == 0
    });
    assert_eq!(c.wb(0), WB_SUCCESS | 3000);
    assert_eq!(c.wb(1), WB_RD_FAIL, "client-refused DMA becomes RD_FAIL");
    let mut out = vec![0u8; 3000];
    c.mem.read(DST, &mut out).unwrap();
    assert_eq!(out, data);
    assert!(c.dma_reads >= 2 && c.dma_writes >= 2);
    assert_eq!(dev.stats.dma_client_errors.load(Ordering::Relaxed), 1);
    // Only the successful copy's payload counts, and all of it as message
    // bytes; the descriptor fetches and write-backs do not.
    assert_eq!(dev.stats.bytes_messages.load(Ordering::Relaxed), 3000);
    assert_eq!(dev.stats.bytes_mapped.load(Ordering::Relaxed), 0);
    assert_eq!(dev.stats.dma_maps.load(Ordering::Relaxed), 2);

    // Interrupts: two INT_WHEN_DONE descriptors -> MSI-X signals. The
    // status is latched after the write-back lands (as on hardware), so
    // wait for it rather than assume it.
    assert!(wait_signal(&mut ev, Duration::from_secs(5)) >= 1);
    let want = INTR_STATUS_DESC_DONE | INTR_STATUS_ERROR;
    c.poll("DESC_DONE and ERROR", |c| c.rd16(INTR_STATUS) == want);
    let st = c.rd16(INTR_STATUS);
    assert_eq!(st, want);
    c.region_write(BAR0, INTR_STATUS, &st.to_le_bytes());
    assert_eq!(c.rd16(INTR_STATUS), 0);

    // Hostile messages get error replies, not a dead server.
    let a = c.call(77, &[]);
    assert_eq!(a.hdr.error, libc::ENOSYS as u32);
    let a = c.call(cmd::REGION_READ, &[1, 2, 3]);
    assert_eq!(a.hdr.error, libc::EINVAL as u32);
    let a = c.call(
        cmd::REGION_READ,
        &RegionAccess::encode_head(BAR0_SIZE - 2, BAR0, 4).0,
    );
    assert_eq!(a.hdr.error, libc::EINVAL as u32);
    let a = c.call(cmd::REGION_READ, &RegionAccess::encode_head(0, 4, 4).0);
    assert_eq!(a.hdr.error, libc::EINVAL as u32);
    let a = c.call(cmd::DMA_READ, &DmaRw::encode(0, 4, &[]));
    assert_eq!(a.hdr.error, libc::EINVAL as u32);

    // DMA_UNMAP echoes the request.
    let unmap = Writer::default().u32(24).u32(0).u64(0).u64(0x8000_0000).0;
    assert_eq!(c.ok(cmd::DMA_UNMAP, &unmap), unmap);

    // DEVICE_RESET: registers back to power-on values.
    c.ok(cmd::DEVICE_RESET, &[]);
    assert_eq!(c.rd32(DESC_RING_COUNT), 0);
    assert_eq!(c.rd32(CTRL), 0);

    drain(&mut ev);
    c.finish();
    assert!(!dev.connected());
    assert_eq!(dev.stats.connections.load(Ordering::Relaxed), 1);
}

#[test]
fn mapped_path_uses_shared_memory() {
    use nix::sys::memfd::{memfd_create, MFdFlags};
    use std::os::unix::fs::FileExt;
    let dev = Device::new("ch0");
    let mut c = Client::start(&dev, ServerOptions { mapped: true });
    c.handshake();
    c.region_write(CFG, 4, &CMD_MASTER.to_le_bytes());
    // Guest RAM as a memfd shared with DMA_MAP, like QEMU with share=on.
    // QEMU seals it against shrinking, without which it is not mapped.
    let fd = memfd_create("guest", MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING).unwrap();
    let file = std::fs::File::from(fd.try_clone().unwrap());
    file.set_len(0x80_0000).unwrap();
    {
        use nix::fcntl::{fcntl, FcntlArg, SealFlag};
        fcntl(&file, FcntlArg::F_ADD_SEALS(SealFlag::F_SEAL_SHRINK)).unwrap();
    }
    let map = Writer::default()
        .u32(32)
        .u32(VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE)
        .u64(0)
        .u64(0)
        .u64(0x80_0000)
        .0;
    let a = c.call_fds(cmd::DMA_MAP, &map, &[&fd]);
    assert!(!a.hdr.is_error());
    c.program_ring(16);
    let data: Vec<u8> = (0..8192u32).map(|i| (i ^ 0x5A) as u8).collect();
    file.write_all_at(&data, SRC).unwrap();
    file.write_all_at(&Descriptor::encode(SRC, DST, 8192, true, true), RING)
        .unwrap();
    // A miss on the mapped path becomes a DMA message, which the client
    // refuses (QEMU: a guest DMAR fault): the descriptor fails with RD_FAIL.
    file.write_all_at(
        &Descriptor::encode(0x100_0000, DST, 16, true, true),
        RING + 16,
    )
    .unwrap();
    c.wr32(CTRL, CTRL_START_VAL);
    let wb = |slot: u64| {
        let mut b = [0u8; 4];
        file.read_exact_at(&mut b, RING + slot * 16).unwrap();
        u32::from_le_bytes(b)
    };
    // A register read per round serves the DMA request of the miss while
    // the client waits, as QEMU's main loop would.
    c.poll("mapped copies", |c| {
        c.rd32(CTRL);
        wb(0) & 0x8000_0000 == 0 && wb(1) & 0x8000_0000 == 0
    });
    assert_eq!(wb(0), WB_SUCCESS | 8192);
    assert_eq!(wb(1), WB_RD_FAIL);
    let mut out = vec![0u8; 8192];
    file.read_exact_at(&mut out, DST).unwrap();
    assert_eq!(out, data);
    assert_eq!(
        (c.dma_reads, c.dma_writes),
        (1, 0),
        "one DMA message on the mapped path: the missed source read"
    );
    assert_eq!(dev.stats.dma_messages.load(Ordering::Relaxed), 1);
    assert_eq!(dev.stats.dma_client_errors.load(Ordering::Relaxed), 1);
    assert_eq!(dev.stats.mapped_misses.load(Ordering::Relaxed), 1);
    assert_eq!(dev.stats.read_errors.load(Ordering::Relaxed), 1);
    assert_eq!(dev.stats.bytes_mapped.load(Ordering::Relaxed), 8192);
    assert_eq!(dev.stats.bytes_messages.load(Ordering::Relaxed), 0);
    assert_eq!(dev.stats.dma_maps.load(Ordering::Relaxed), 1);
    // Unmap: the same descriptor now misses.
    let unmap = Writer::default()
        .u32(24)
        .u32(VFIO_DMA_UNMAP_FLAG_ALL)
        .u64(0)
        .u64(0)
        .0;
    c.ok(cmd::DMA_UNMAP, &unmap);
    assert_eq!(dev.stats.dma_unmaps.load(Ordering::Relaxed), 1);
    c.finish();
}

#[test]
fn vanish_closes_the_client_socket_and_the_channel_recovers() {
    let dev = Device::new("ch0");
    let mut c = Client::start(&dev, ServerOptions::default());
    c.handshake();
    c.program_ring(8);
    assert!(dev.connected());
    dev.arm_fault(FaultSpec::Vanish(0)).unwrap();
    // The client sees EOF.
    let t = Instant::now();
    loop {
        match recv_message(&c.sock) {
            Ok(None) | Err(_) => break,
            Ok(Some(_)) => {}
        }
        assert!(t.elapsed() < Duration::from_secs(5));
    }
    c.server.take().unwrap().join().unwrap();
    assert!(!dev.connected());
    // The device was reset for the next client.
    let mut b = [0u8; 4];
    dev.bar0_read(DESC_RING_COUNT, &mut b);
    assert_eq!(u32::from_le_bytes(b), 0);
    // A new client works.
    let mut c2 = Client::start(&dev, ServerOptions::default());
    c2.handshake();
    assert_eq!(c2.rd32(CTRL), 0);
    c2.finish();
}

#[test]
fn disconnect_during_dma_does_not_hang() {
    // The client vanishes while the engine waits for a DMA reply: the
    // engine thread must be released and joined.
    let dev = Device::new("ch0");
    let mut c = Client::start(&dev, ServerOptions::default());
    c.handshake();
    c.region_write(CFG, 4, &CMD_MASTER.to_le_bytes());
    c.program_ring(8);
    c.mem
        .write(RING, &Descriptor::encode(SRC, DST, 4096, true, true))
        .unwrap();
    c.region_write_posted(BAR0, CTRL, &(CTRL_START_VAL as u16).to_le_bytes());
    // Wait for the first DMA request, then hang up without answering.
    let m = recv_message(&c.sock).unwrap().unwrap();
    assert_eq!(m.hdr.command, cmd::DMA_READ);
    let server = c.server.take().unwrap();
    drop(c);
    let t = Instant::now();
    server.join().unwrap();
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(!dev.connected());
}

#[test]
fn garbage_stream_ends_the_connection_cleanly() {
    let dev = Device::new("ch0");
    let (mut a, b) = UnixStream::pair().unwrap();
    let d = dev.clone();
    let server = std::thread::spawn(move || serve(&d, b, ServerOptions::default()));
    // A header claiming an absurd size.
    let h = Header {
        id: 1,
        command: cmd::VERSION,
        size: u32::MAX,
        flags: 0,
        error: 0,
    };
    a.write_all(&h.encode()).unwrap();
    server.join().unwrap();
    assert!(!dev.connected());
}
