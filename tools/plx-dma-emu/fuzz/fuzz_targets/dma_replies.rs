// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Fuzz target: a client that answers the emulator's DMA requests badly.
//!
//! The engine walks a ring through `ClientDma`, so every descriptor fetch,
//! data access and write-back is a VFIO_USER_DMA_READ or DMA_WRITE sent
//! over a real socketpair; the socket thread of the real server
//! (`Session::handle`) routes the replies back. A fake client on the
//! other end holds the guest's memory and answers each request as the
//! input says: correctly, with an error, with the wrong ID, command,
//! address, count or amount of data, twice, after an unsolicited reply,
//! not at all (the request times out), or by hanging up.
//!
//! What must hold: no panic and no hang (every thread is joined); every
//! request the emulator sends is well formed (a command, DMA_READ with a
//! count and no data, DMA_WRITE with exactly its data, at most 64 KiB, an
//! ID no other outstanding request has); and the register file stays
//! consistent whatever the replies were.

#![no_main]

#[path = "common/input.rs"]
mod input;

use std::collections::HashSet;
use std::io::Write;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use input::Input;
use libfuzzer_sys::fuzz_target;
use nix::sys::signal::{signal, SigHandler, Signal};
use plx_dma_emu::config_space::CMD_MASTER;
use plx_dma_emu::conn::{recv_message, Conn};
use plx_dma_emu::desc::Descriptor;
use plx_dma_emu::device::Device;
use plx_dma_emu::dma_client::{ClientDma, MSG_CHUNK};
use plx_dma_emu::dma_map::DmaMapTable;
use plx_dma_emu::engine::run_until_idle;
use plx_dma_emu::log::{set_level, Level};
use plx_dma_emu::memory::{GuestMemory, VecMemory};
use plx_dma_emu::protocol::{
    cmd, error_reply, reply, DmaRw, Header, FLAG_ERROR, HDR_SIZE, TYPE_COMMAND, TYPE_REPLY,
};
use plx_dma_emu::regs::*;
use plx_dma_emu::server::Session;

const RING: u64 = 0x1000;
const SLOTS: u32 = 16;
const DATA: u64 = 0x10_0000;
const DATA_LEN: u64 = 0x4_0000;
/// How long the engine waits for a reply that does not come.
const REPLY_TIMEOUT: Duration = Duration::from_millis(10);
/// Requests left unanswered per run (each costs REPLY_TIMEOUT).
const MAX_SILENT: usize = 3;

/// Checks one request from the emulator and returns its decoded fields.
fn check_request(hdr: &Header, payload: &[u8]) -> (u64, u64) {
    assert_eq!(hdr.msg_type(), TYPE_COMMAND, "the emulator sent a reply");
    assert_eq!(hdr.size as usize, HDR_SIZE + payload.len());
    let rw = DmaRw::parse(payload).expect("a DMA request with its fixed part");
    assert!(
        rw.count as usize <= MSG_CHUNK,
        "request of {:#x} bytes",
        rw.count
    );
    match hdr.command {
        cmd::DMA_READ => assert!(rw.data.is_empty(), "DMA_READ with data"),
        cmd::DMA_WRITE => assert_eq!(rw.data.len() as u64, rw.count, "DMA_WRITE data"),
        c => panic!("the emulator sent command {c}"),
    }
    (rw.address, rw.count)
}

/// The fake client: answers requests from `plan` until the socket closes.
fn client(mut sock: UnixStream, mem: Arc<VecMemory>, plan: Vec<u8>) {
    let mut plan = Input(&plan);
    let mut silent = 0;
    let mut outstanding: HashSet<u16> = HashSet::new();
    while let Ok(Some(m)) = recv_message(&sock) {
        if m.hdr.msg_type() == TYPE_REPLY {
            // The server's answer to a reply we mangled into a command.
            continue;
        }
        let (addr, count) = check_request(&m.hdr, &m.payload);
        // IDs of requests still waiting must be unique (an answered or
        // abandoned one may come back after the 16-bit wrap).
        assert!(
            outstanding.insert(m.hdr.id),
            "ID {} reused while outstanding",
            m.hdr.id
        );
        let read = m.hdr.command == cmd::DMA_READ;
        // The honest answer: data for a read, the write applied.
        let honest = || -> Vec<u8> {
            if read {
                let mut data = vec![0u8; count as usize];
                match mem.read(addr, &mut data) {
                    Ok(()) => reply(&m.hdr, &DmaRw::encode(addr, count, &data)),
                    Err(_) => error_reply(&m.hdr, libc::EFAULT),
                }
            } else {
                let rw = DmaRw::parse(&m.payload).unwrap();
                match mem.write(addr, rw.data) {
                    Ok(()) => reply(&m.hdr, &[]),
                    Err(_) => error_reply(&m.hdr, libc::EFAULT),
                }
            }
        };
        let action = if plan.is_empty() { 0 } else { plan.u8() };
        let mut out: Vec<Vec<u8>> = Vec::new();
        match action % 12 {
            0..=3 => out.push(honest()),
            4 => out.push(error_reply(&m.hdr, i32::from(plan.u8()))),
            // An error flag with errno 0, or with a payload.
            5 => {
                let mut r = honest();
                let mut h = Header::decode(r[..HDR_SIZE].try_into().unwrap());
                h.flags |= FLAG_ERROR;
                h.error = u32::from(plan.u8() & 1);
                r[..HDR_SIZE].copy_from_slice(&h.encode());
                out.push(r);
            }
            // Wrong ID, command or type.
            6 => {
                let mut r = honest();
                let mut h = Header::decode(r[..HDR_SIZE].try_into().unwrap());
                match plan.u8() % 3 {
                    0 => h.id ^= u16::from(plan.u8()) | 1,
                    1 => h.command = u16::from(plan.u8()),
                    _ => h.flags = u32::from(plan.u8()) & 0x3F,
                }
                r[..HDR_SIZE].copy_from_slice(&h.encode());
                out.push(r);
            }
            // A read reply with the wrong address, count or data length.
            7 => {
                let mut data = vec![0u8; count as usize];
                let _ = mem.read(addr, &mut data);
                let delta = u64::from(plan.u8());
                let p = match plan.u8() % 4 {
                    0 => DmaRw::encode(addr ^ delta.max(1), count, &data),
                    1 => DmaRw::encode(addr, count.wrapping_add(delta), &data),
                    2 => DmaRw::encode(addr, count, &data[..data.len() / 2]),
                    _ => {
                        data.extend(std::iter::repeat_n(0xAA, delta as usize));
                        DmaRw::encode(addr, count, &data)
                    }
                };
                // A payload cut anywhere, down to nothing.
                let cut = if plan.u8() & 1 != 0 {
                    p.len() / 3
                } else {
                    p.len()
                };
                out.push(reply(&m.hdr, &p[..cut]));
            }
            // Twice, or after an unsolicited reply.
            8 => {
                let r = honest();
                if plan.u8() & 1 != 0 {
                    let mut h = Header::decode(r[..HDR_SIZE].try_into().unwrap());
                    h.id = h.id.wrapping_add(u16::from(plan.u8()));
                    h.flags = TYPE_REPLY;
                    out.push(h.encode()[..].to_vec());
                }
                out.push(r.clone());
                out.push(r);
            }
            // No answer at all: the request times out.
            9 | 10 if silent < MAX_SILENT => {
                silent += 1;
                outstanding.remove(&m.hdr.id);
                continue;
            }
            9 | 10 => out.push(honest()),
            // Hang up.
            _ => {
                let _ = sock.shutdown(Shutdown::Both);
                return;
            }
        }
        outstanding.remove(&m.hdr.id);
        for r in out {
            if sock.write_all(&r).is_err() {
                return;
            }
        }
    }
}

/// Ignores SIGPIPE, as the emulator's Rust `main` does: both ends write
/// to sockets the other may have shut down, which must be an EPIPE error
/// and not the end of the process. libFuzzer's `main` is C's and leaves
/// the default action (terminate) in place.
fn ignore_sigpipe() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: SIG_IGN runs no handler code, so nothing can be called
        // in signal context; the previous disposition is not needed.
        let r = unsafe { signal(Signal::SIGPIPE, SigHandler::SigIgn) };
        r.expect("ignoring SIGPIPE");
    });
}

fuzz_target!(|data: &[u8]| {
    set_level(Level::Error);
    ignore_sigpipe();
    let mut input = Input(data);
    // The guest's memory, which only the fake client touches.
    let mem = Arc::new(VecMemory::new());
    mem.add_region(RING, (u64::from(SLOTS) * DESC_SIZE) as usize);
    mem.add_region(DATA, DATA_LEN as usize);
    let fill: Vec<u8> = (0..DATA_LEN).map(|i| (i as u8) ^ 0x3C).collect();
    mem.write(DATA, &fill).unwrap();
    let count = u32::from(input.u8()) % SLOTS + 1;
    for slot in 0..count {
        let sel = input.u8();
        let len = match sel % 4 {
            0 => u32::from(input.u8()),
            1 | 2 => u32::from(input.u16()),
            _ => (u32::from(input.u16()) << 2) % (DATA_LEN as u32 / 2),
        };
        let span = DATA_LEN - u64::from(len);
        let src = DATA + u64::from(input.u16()) * 8 % span;
        // Sometimes an address the client has no memory for.
        let dst = if sel & 0x80 != 0 {
            u64::from(input.u32()) << 8
        } else {
            DATA + u64::from(input.u16()) * 8 % span
        };
        let raw = Descriptor::encode(src, dst, len, sel & 0x40 == 0, true);
        mem.write(RING + u64::from(slot) * DESC_SIZE, &raw).unwrap();
    }
    let plan = input.0.to_vec();

    let (client_end, server_end) = UnixStream::pair().expect("socketpair");
    let dev = Device::new("fuzz");
    dev.config_write(4, &CMD_MASTER.to_le_bytes());
    let conn = Arc::new(Conn::with_send_timeout(
        server_end.try_clone().unwrap(),
        Duration::from_secs(2),
    ));
    let table = Arc::new(RwLock::new(DmaMapTable::new()));
    let mut session = Session::new(dev.clone(), conn.clone(), table, false);
    let server_conn = conn.clone();
    let socket_thread = std::thread::spawn(move || {
        while let Ok(Some(msg)) = recv_message(&server_end) {
            if session.handle(msg).is_err() {
                break;
            }
        }
        // As `server::serve` does: the end of the socket fails every DMA
        // the engine waits for, and the client's writes.
        server_conn.close();
    });
    let guest = mem.clone();
    let client_thread = std::thread::spawn(move || client(client_end, guest, plan));

    // The driver: program the ring with write-back and start; the engine
    // runs on this thread.
    let dma = ClientDma::with_timeout(conn.clone(), dev.stats.clone(), REPLY_TIMEOUT);
    for (reg, v) in [
        (CTRL, CTRL_RESET_VAL | CTRL_WRITE_BACK_EN),
        (DESC_RING_ADDR, RING as u32),
        (DESC_RING_ADDR_HI, 0),
        (DESC_RING_NEXT_ADDR, RING as u32),
        (DESC_RING_COUNT, count),
        (
            PREF_LIMIT,
            u32::from(data.first().copied().unwrap_or(0) >> 6),
        ),
    ] {
        assert!(dev.bar0_write(reg, &v.to_le_bytes()));
    }
    assert!(dev.bar0_write(CTRL, &(CTRL_START_VAL as u16).to_le_bytes()));
    run_until_idle(&dev, &dma, 2 * SLOTS as usize);

    // The server's teardown: closing the connection ends both threads.
    conn.close();
    socket_thread.join().expect("socket thread");
    client_thread.join().expect("fake client");
    let mut b = [0u8; 4];
    assert!(dev.bar0_read(CTRL, &mut b));
    let ctrl = u32::from_le_bytes(b);
    if ctrl & CTRL_IN_PROGRESS != 0 {
        assert_ne!(ctrl & CTRL_START, 0);
    }
    dev.client_gone();
});
