// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Fuzz target: message framing with real file descriptors.
//!
//! Each input is a short conversation. Every message goes out with
//! `sendmsg` and 0 to 253 (SCM_MAX_FD) real descriptors in SCM_RIGHTS: the
//! write end of a pipe, an eventfd, a sealed or an unsealed memfd. The
//! descriptors ride on the header or on a later part of the message (where
//! the kernel drops them), and the header is either built for a command
//! that takes descriptors (SET_IRQS with eventfds, DMA_MAP with a file on
//! the `--mapped` path) or left to the fuzzer. The server side is the real
//! one: `conn::recv_message` frames it and `server::Session::handle`
//! answers, as the socket thread does.
//!
//! What must hold: more than MAX_MSG_FDS descriptors are refused with
//! `TooManyFds`; an accepted message carries at most MAX_MSG_FDS; replies
//! never carry descriptors; and once the connection is torn down, this
//! process holds exactly the descriptors it held before (none leaked, none
//! closed twice).

#![no_main]

#[path = "common/input.rs"]
mod input;

use std::io::IoSlice;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, RwLock};

use input::Input;
use libfuzzer_sys::fuzz_target;
use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::eventfd::{EfdFlags, EventFd};
use nix::sys::memfd::{memfd_create, MFdFlags};
use nix::sys::socket::{sendmsg, ControlMessage, MsgFlags, UnixAddr};
use plx_dma_emu::conn::{recv_message, Conn, TransportError};
use plx_dma_emu::device::Device;
use plx_dma_emu::dma_map::DmaMapTable;
use plx_dma_emu::log::{set_level, Level};
use plx_dma_emu::protocol::{cmd, Header, HDR_SIZE, MAX_MSG_FDS, TYPE_REPLY};
use plx_dma_emu::server::Session;
use vfio_bindings::bindings::vfio::{
    VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE, VFIO_IRQ_SET_ACTION_TRIGGER,
    VFIO_IRQ_SET_DATA_EVENTFD,
};

/// The most descriptors one SCM_RIGHTS message carries on Linux.
const SCM_MAX_FD: usize = 253;
/// Messages per input: enough for a SET_IRQS after a DMA_MAP after a
/// refused message, few enough to keep an execution short.
const MAX_MESSAGES: usize = 8;

/// Descriptors currently open in this process.
fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count())
}

fn memfd(sealed: bool) -> OwnedFd {
    let fd = memfd_create(
        "plx-fuzz",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )
    .expect("memfd_create");
    nix::unistd::ftruncate(&fd, 0x4000).expect("ftruncate");
    if sealed {
        let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW;
        fcntl(&fd, FcntlArg::F_ADD_SEALS(seals)).expect("seal");
    }
    fd
}

/// One descriptor of each kind the program can send.
struct Kinds {
    pipe_w: OwnedFd,
    _pipe_r: OwnedFd,
    eventfd: OwnedFd,
    sealed: OwnedFd,
    unsealed: OwnedFd,
}

impl Kinds {
    fn new() -> Kinds {
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).expect("pipe");
        let efd = EventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)
            .expect("eventfd");
        Kinds {
            pipe_w: w,
            _pipe_r: r,
            eventfd: OwnedFd::from(efd),
            sealed: memfd(true),
            unsealed: memfd(false),
        }
    }
    fn pick(&self, k: u8) -> RawFd {
        match k % 4 {
            0 => self.pipe_w.as_raw_fd(),
            1 => self.eventfd.as_raw_fd(),
            2 => self.sealed.as_raw_fd(),
            _ => self.unsealed.as_raw_fd(),
        }
    }
}

/// Builds one message from the input: a header for a command that takes
/// descriptors, or one the fuzzer wrote.
fn build(input: &mut Input<'_>, shape: u8, nfds: usize) -> Vec<u8> {
    let id = input.u16();
    let payload = match shape % 4 {
        // SET_IRQS TRIGGER with one eventfd per vector.
        0 => {
            let index = u32::from(input.u8() % 6);
            let mut p = Vec::new();
            for v in [
                20,
                VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER,
                index,
                0,
                nfds as u32,
            ] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            (cmd::DEVICE_SET_IRQS, p)
        }
        // DMA_MAP of a window of the 16 KiB file.
        1 => {
            let flags = VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE;
            let offset = u64::from(input.u8()) << 8;
            let iova = u64::from(input.u16()) << 12;
            let size = (u64::from(input.u8()) + 1) << 8;
            let mut p = Vec::new();
            p.extend_from_slice(&32u32.to_le_bytes());
            p.extend_from_slice(&flags.to_le_bytes());
            for v in [offset, iova, size] {
                p.extend_from_slice(&v.to_le_bytes());
            }
            (cmd::DMA_MAP, p)
        }
        // DMA_UNMAP, all or a range.
        2 => {
            let flags = u32::from(input.u8() & 2);
            let mut p = Vec::new();
            p.extend_from_slice(&24u32.to_le_bytes());
            p.extend_from_slice(&flags.to_le_bytes());
            p.extend_from_slice(&(u64::from(input.u16()) << 12).to_le_bytes());
            p.extend_from_slice(&(u64::from(input.u16()) << 12).to_le_bytes());
            (cmd::DMA_UNMAP, p)
        }
        // Anything: the fuzzer's command, flags and payload.
        _ => {
            let command = u16::from(input.u8() % 20);
            let len = usize::from(input.u8());
            (command, input.bytes(len))
        }
    };
    let (command, payload) = payload;
    let mut hdr = Header {
        id,
        command,
        size: (HDR_SIZE + payload.len()) as u32,
        flags: 0,
        error: 0,
    };
    if shape & 0x40 != 0 {
        // A lying size field (the payload then frames wrongly, or the
        // read waits for bytes that never come).
        hdr.size = u32::from(input.u16());
        hdr.flags = u32::from(input.u8());
    }
    let mut bytes = hdr.encode().to_vec();
    bytes.extend_from_slice(&payload);
    bytes
}

/// Sends `bytes` with `fds` attached to the part starting at `at` (0: on
/// the header, where the server collects descriptors). False if the
/// kernel refused (a full socket, too many descriptors in flight).
fn send(to: &UnixStream, bytes: &[u8], fds: &[RawFd], at: usize) -> bool {
    let at = at.min(bytes.len());
    let parts: [(&[u8], &[RawFd]); 2] = [(&bytes[..at], &[]), (&bytes[at..], fds)];
    for (part, fds) in parts {
        if part.is_empty() {
            continue;
        }
        let cmsg = [ControlMessage::ScmRights(fds)];
        let cmsgs: &[ControlMessage<'_>] = if fds.is_empty() { &[] } else { &cmsg };
        let iov = [IoSlice::new(part)];
        match sendmsg::<UnixAddr>(to.as_raw_fd(), &iov, cmsgs, MsgFlags::MSG_DONTWAIT, None) {
            Ok(n) if n == part.len() => {}
            _ => return false,
        }
    }
    true
}

/// Reads the replies waiting on the client's end and checks their framing.
fn drain_replies(client: &UnixStream) {
    while let Ok(Some(m)) = recv_message(client) {
        assert_eq!(m.hdr.msg_type(), TYPE_REPLY, "server sent a non-reply");
        assert!(m.fds.is_empty(), "a reply carried descriptors");
    }
}

/// One conversation; returns when the connection ends or the input does.
fn converse(input: &mut Input<'_>, kinds: &Kinds) {
    let (client, server) = UnixStream::pair().expect("socketpair");
    client.set_nonblocking(true).unwrap();
    server.set_nonblocking(true).unwrap();
    let dev = Device::new("fuzz");
    let conn = Arc::new(Conn::new(server.try_clone().unwrap()));
    let table = Arc::new(RwLock::new(DmaMapTable::new()));
    let mut session = Session::new(dev.clone(), conn.clone(), table.clone(), true);
    // Once a message lied about its size, the stream is out of step and
    // only the leak check still applies.
    let mut framed = true;
    for _ in 0..MAX_MESSAGES {
        if input.is_empty() {
            break;
        }
        let shape = input.u8();
        let nfds = usize::from(input.u8()) % (SCM_MAX_FD + 1);
        let kind = input.u8();
        // Mostly on the header; sometimes on the payload (or past the end
        // of a short message, which is the same as on its last part).
        let at = if shape & 0x80 != 0 {
            usize::from(input.u8())
        } else {
            0
        };
        let bytes = build(input, shape, nfds);
        let exact = framed;
        framed &= shape & 0x40 == 0;
        let fds: Vec<RawFd> = (0..nfds)
            .map(|i| kinds.pick(kind.wrapping_add((i as u8) & (kind >> 6))))
            .collect();
        if !send(&client, &bytes, &fds, at) {
            break;
        }
        match recv_message(&server) {
            Ok(Some(msg)) => {
                assert!(
                    msg.fds.len() <= MAX_MSG_FDS,
                    "{} fds accepted",
                    msg.fds.len()
                );
                if exact && at == 0 && nfds <= MAX_MSG_FDS {
                    assert_eq!(msg.fds.len(), nfds, "descriptors lost on the header");
                }
                if session.handle(msg).is_err() {
                    break;
                }
            }
            Ok(None) => unreachable!("the client end is still open"),
            Err(TransportError::TooManyFds) => {
                assert!(!exact || nfds > MAX_MSG_FDS, "refused {nfds} descriptors");
                break;
            }
            // A lying size: the rest of the message never comes, or the
            // size is impossible. The connection ends, as in the server.
            Err(_) => {
                assert!(!framed, "a well-framed message failed to frame");
                break;
            }
        }
        drain_replies(&client);
    }
    drain_replies(&client);
    // The server's teardown, in its order.
    conn.close();
    table
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .unmap(0, 0, true);
    dev.client_gone();
}

fuzz_target!(|data: &[u8]| {
    set_level(Level::Error);
    let before = open_fds();
    {
        let kinds = Kinds::new();
        let mut input = Input(data);
        converse(&mut input, &kinds);
    }
    assert_eq!(open_fds(), before, "descriptors leaked (or closed twice)");
});
