// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! One vfio-user connection: framing, file descriptor passing, and the
//! routing of replies to the requests we sent.
//!
//! The socket is read by exactly one thread (the channel's socket thread).
//! Commands from the client are handled there; replies to our own
//! DMA_READ/DMA_WRITE requests are handed to the waiting engine thread by
//! message ID. Writes come from both threads and are serialised by a mutex
//! so that messages never interleave.
//!
//! A client that stops reading must not hang us: every send has a deadline
//! ([`SEND_TIMEOUT`]), after which the connection is closed (a message
//! may have gone out in part, so the stream cannot be trusted any more),
//! and [`Conn::close`] never waits for the write mutex: shutting the socket
//! down wakes a sender blocked inside the kernel.
//!
//! This split is what avoids the deadlock described in the vfio-user spec
//! ("it is still illegal for implementations to stall command or reply
//! processing indefinitely while waiting for replies on the other
//! channel"): QEMU serves our DMA requests from its main loop, and its vCPU
//! may be waiting for our answer to a register read at the same moment.

use std::collections::HashMap;
use std::io::{self, IoSliceMut, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Mutex;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{recvmsg, ControlMessageOwned, MsgFlags, UnixAddr};

use crate::protocol::{Header, DEFAULT_MAX_XFER, HDR_SIZE, MAX_MSG_FDS, MAX_MSG_SIZE};
use crate::sys::adopt_received_fds;

/// The most descriptors Linux passes in one SCM_RIGHTS message.
const SCM_MAX_FD: usize = 253;

/// How long one message may take to go out. QEMU reads its socket from its
/// main loop, so a send only waits this long if the client stopped reading;
/// then the connection is closed rather than left to wedge the channel.
pub const SEND_TIMEOUT: Duration = Duration::from_secs(5);

/// A received message.
#[derive(Debug)]
pub struct Message {
    /// The header.
    pub hdr: Header,
    /// Everything after the header.
    pub payload: Vec<u8>,
    /// Descriptors that came with it (SCM_RIGHTS).
    pub fds: Vec<OwnedFd>,
}

/// Transport failures; each one ends the connection.
#[derive(Debug, thiserror::Error)]
pub enum TransportError {
    /// Socket error.
    #[error("socket error: {0}")]
    Io(#[from] io::Error),
    /// The peer closed the socket in the middle of a message.
    #[error("peer closed the socket in the middle of a message")]
    Truncated,
    /// The header's size field is impossible.
    #[error("bad message size {0}")]
    BadSize(u32),
    /// The kernel dropped descriptors because too many were sent.
    #[error("more than {MAX_MSG_FDS} file descriptors in one message")]
    TooManyFds,
}

/// A reply routed to a waiting requester.
#[derive(Debug)]
pub struct Reply {
    /// Its header.
    pub hdr: Header,
    /// Its payload.
    pub payload: Vec<u8>,
}

/// Reads one message. `Ok(None)` means the peer closed the socket cleanly
/// between messages.
pub fn recv_message(stream: &UnixStream) -> Result<Option<Message>, TransportError> {
    let mut hdr = [0u8; HDR_SIZE];
    let mut got = 0usize;
    let mut fds = Vec::new();
    // Room for as many descriptors as the kernel passes in one message
    // (SCM_MAX_FD), not just the ones a message may carry: a truncated
    // control message leaves its descriptors installed in this process
    // where nothing can reach them to close them. Those beyond
    // MAX_MSG_FDS are adopted, then closed with the error.
    let mut cmsg = nix::cmsg_space!([std::os::fd::RawFd; SCM_MAX_FD]);
    while got < HDR_SIZE {
        let mut iov = [IoSliceMut::new(&mut hdr[got..])];
        let r = recvmsg::<UnixAddr>(
            stream.as_raw_fd(),
            &mut iov,
            Some(&mut cmsg),
            MsgFlags::MSG_CMSG_CLOEXEC,
        );
        let msg = match r {
            Ok(m) => m,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(TransportError::Io(io::Error::from(e))),
        };
        let ctrunc = msg.flags.contains(MsgFlags::MSG_CTRUNC);
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmRights(raw) = c {
                    fds.extend(adopt_received_fds(raw));
                }
            }
        }
        let n = msg.bytes;
        // Dropping `fds` closes every descriptor received so far.
        if ctrunc || fds.len() > MAX_MSG_FDS {
            return Err(TransportError::TooManyFds);
        }
        if n == 0 {
            return if got == 0 {
                Ok(None)
            } else {
                Err(TransportError::Truncated)
            };
        }
        got += n;
    }
    let hdr = Header::decode(&hdr);
    let size = hdr.size as usize;
    if !(HDR_SIZE..=MAX_MSG_SIZE).contains(&size) {
        return Err(TransportError::BadSize(hdr.size));
    }
    let mut payload = vec![0u8; size - HDR_SIZE];
    let mut r = stream;
    r.read_exact(&mut payload).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            TransportError::Truncated
        } else {
            TransportError::Io(e)
        }
    })?;
    Ok(Some(Message { hdr, payload, fds }))
}

/// The shared half of a connection: the write side and the table of
/// requests waiting for replies.
#[derive(Debug)]
pub struct Conn {
    /// The socket. `&UnixStream` writes, so the stream itself needs no
    /// lock: [`Conn::close`] shuts it down while a sender is blocked.
    stream: UnixStream,
    /// Held for a whole message so that messages never interleave.
    write_lock: Mutex<()>,
    pending: Mutex<HashMap<u16, SyncSender<Reply>>>,
    next_id: AtomicU16,
    closed: AtomicBool,
    max_xfer: AtomicUsize,
}

impl Conn {
    /// Wraps the write side of a connected socket, with sends bounded by
    /// [`SEND_TIMEOUT`].
    pub fn new(writer: UnixStream) -> Conn {
        Conn::with_send_timeout(writer, SEND_TIMEOUT)
    }

    /// As [`Conn::new`], with another send deadline (tests use a short one).
    ///
    /// The deadline is the socket's SO_SNDTIMEO, which bounds each blocking
    /// write without touching the read side (O_NONBLOCK would, since the
    /// reader shares the open file description).
    pub fn with_send_timeout(writer: UnixStream, timeout: Duration) -> Conn {
        if let Err(e) = writer.set_write_timeout(Some(timeout)) {
            crate::log!(
                crate::log::Level::Warn,
                "",
                "cannot set a send timeout on the client socket: {e}"
            );
        }
        Conn {
            stream: writer,
            write_lock: Mutex::new(()),
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU16::new(0),
            closed: AtomicBool::new(false),
            max_xfer: AtomicUsize::new(DEFAULT_MAX_XFER),
        }
    }

    /// Sends one complete message.
    pub fn send(&self, bytes: &[u8]) -> io::Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "connection closed",
            ));
        }
        let _guard = self.write_lock.lock().unwrap_or_else(|e| e.into_inner());
        let r = (&self.stream).write_all(bytes);
        if let Err(e) = &r {
            // Part of the message may be out: the stream is no longer
            // framed, so nothing more can be sent on it. A timeout means
            // the client stopped reading. Either way the connection ends;
            // the socket thread then sees EOF and tears the channel down.
            if e.kind() != io::ErrorKind::Interrupted {
                self.close();
            }
        }
        r
    }

    /// Largest DMA transfer per message, as negotiated.
    pub fn max_xfer(&self) -> usize {
        self.max_xfer.load(Ordering::Relaxed)
    }

    /// Records the negotiated transfer limit.
    pub fn set_max_xfer(&self, n: usize) {
        // Never above the client's limit (QEMU answers E2BIG), never 0.
        self.max_xfer
            .store(n.clamp(1, DEFAULT_MAX_XFER), Ordering::Relaxed);
    }

    /// Reserves a message ID for a request and returns where its reply
    /// will arrive.
    pub fn register(&self) -> Result<(u16, Receiver<Reply>), io::Error> {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        if self.closed.load(Ordering::Acquire) {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "connection closed",
            ));
        }
        // IDs are ours to choose; skip any still waiting after a wrap.
        loop {
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            if let std::collections::hash_map::Entry::Vacant(e) = pending.entry(id) {
                let (tx, rx) = sync_channel(1);
                e.insert(tx);
                return Ok((id, rx));
            }
        }
    }

    /// Forgets a request (after a timeout or a failed send).
    pub fn unregister(&self, id: u16) {
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.remove(&id);
    }

    /// Routes a reply to its requester; false if nobody waits for this ID.
    pub fn route_reply(&self, reply: Reply) -> bool {
        let tx = {
            let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            pending.remove(&reply.hdr.id)
        };
        match tx {
            Some(tx) => tx.send(reply).is_ok(),
            None => false,
        }
    }

    /// Marks the connection closed and wakes every waiting requester with a
    /// disconnect (their channel's sender is dropped).
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let mut pending = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        pending.clear();
        drop(pending);
        // Not under the write lock: a sender blocked in the kernel holds
        // it, and the shutdown is what wakes that sender (with EPIPE).
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }

    /// True once [`Conn::close`] ran.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{cmd, request};
    use nix::sys::socket::{sendmsg, ControlMessage};
    use std::io::IoSlice;
    use std::sync::Arc;

    /// Sends `msg` with `fds` attached.
    fn send_with_fds(to: &UnixStream, msg: &[u8], fds: &[std::os::fd::RawFd]) {
        let iov = [IoSlice::new(msg)];
        sendmsg::<UnixAddr>(
            to.as_raw_fd(),
            &iov,
            &[ControlMessage::ScmRights(fds)],
            MsgFlags::empty(),
            None,
        )
        .unwrap();
    }

    /// More descriptors than a message may carry: refused, and every one
    /// received is closed (the write end of the pipe, sent 17 times, is
    /// then closed everywhere: the read end sees EOF).
    #[test]
    fn too_many_fds_are_refused_and_closed() {
        let (a, b) = UnixStream::pair().unwrap();
        // Non-blocking: a descriptor left open fails the read (EAGAIN)
        // instead of hanging the test.
        let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_NONBLOCK).unwrap();
        let msg = request(9, cmd::DEVICE_SET_IRQS, &[0u8; 20]);
        send_with_fds(&a, &msg, &[w.as_raw_fd(); MAX_MSG_FDS + 1]);
        drop(w);
        assert!(matches!(recv_message(&b), Err(TransportError::TooManyFds)));
        let mut byte = [0u8; 1];
        assert_eq!(nix::unistd::read(&r, &mut byte).unwrap(), 0);
    }

    #[test]
    fn framing_with_fds() {
        let (a, b) = UnixStream::pair().unwrap();
        let msg = request(7, cmd::DEVICE_SET_IRQS, &[0u8; 20]);
        let f1 = std::fs::File::open("/dev/null").unwrap();
        send_with_fds(&a, &msg, &[f1.as_raw_fd(), f1.as_raw_fd()]);
        let m = recv_message(&b).unwrap().unwrap();
        assert_eq!(m.hdr.id, 7);
        assert_eq!(m.payload.len(), 20);
        assert_eq!(m.fds.len(), 2);
        drop(a);
        assert!(recv_message(&b).unwrap().is_none());
    }

    #[test]
    fn bad_sizes_and_truncation() {
        let (mut a, b) = UnixStream::pair().unwrap();
        let mut h = Header {
            size: 8,
            ..Default::default()
        }
        .encode();
        a.write_all(&h).unwrap();
        assert!(matches!(recv_message(&b), Err(TransportError::BadSize(8))));
        h = Header {
            size: 100,
            ..Default::default()
        }
        .encode();
        a.write_all(&h).unwrap();
        a.write_all(&[0u8; 10]).unwrap();
        drop(a);
        assert!(matches!(recv_message(&b), Err(TransportError::Truncated)));
    }

    /// Fills the socket's send buffer until a send blocks, from another
    /// thread; returns once that thread is stuck (holding the write lock)
    /// and a receiver for the result of its send.
    fn wedge_sender(c: &Arc<Conn>) -> Receiver<io::Result<()>> {
        let (tx, rx) = sync_channel(1);
        let sender = c.clone();
        std::thread::spawn(move || {
            let big = vec![0u8; 1 << 16];
            loop {
                if let Err(e) = sender.send(&big) {
                    let _ = tx.send(Err(e));
                    return;
                }
            }
        });
        // Wait until the sender is blocked: the lock stays held.
        for _ in 0..500 {
            std::thread::sleep(std::time::Duration::from_millis(2));
            if c.write_lock.try_lock().is_err() {
                std::thread::sleep(std::time::Duration::from_millis(20));
                if c.write_lock.try_lock().is_err() {
                    break;
                }
            }
        }
        rx
    }

    /// A client that stops reading: closing the connection (teardown, the
    /// vanish fault, SIGTERM) must not wait for the blocked sender, and the
    /// sender is woken with an error.
    #[test]
    fn close_does_not_wait_for_a_blocked_sender() {
        let (a, _b) = UnixStream::pair().unwrap();
        let c = Arc::new(Conn::with_send_timeout(a, Duration::from_secs(600)));
        let sent = wedge_sender(&c);
        let (tx, rx) = sync_channel(1);
        let c2 = c.clone();
        std::thread::spawn(move || {
            c2.close();
            let _ = tx.send(());
        });
        rx.recv_timeout(Duration::from_secs(5))
            .expect("close() hung behind a blocked sender");
        assert!(sent.recv_timeout(Duration::from_secs(5)).unwrap().is_err());
        assert!(c.is_closed());
    }

    /// Nobody closes: the blocked send gives up at its deadline and the
    /// connection is closed, so the socket thread sees the end.
    #[test]
    fn a_send_to_a_client_that_stops_reading_times_out() {
        let (a, b) = UnixStream::pair().unwrap();
        let c = Arc::new(Conn::with_send_timeout(a, Duration::from_millis(200)));
        let sent = wedge_sender(&c);
        let r = sent
            .recv_timeout(Duration::from_secs(5))
            .expect("send blocked past its deadline");
        assert!(r.is_err());
        assert!(c.is_closed());
        assert!(c.send(b"x").is_err());
        // The peer reads what was sent, then EOF.
        let mut sink = Vec::new();
        let mut b = b;
        b.read_to_end(&mut sink).unwrap();
    }

    #[test]
    fn replies_are_routed_by_id() {
        let (a, _b) = UnixStream::pair().unwrap();
        let c = Conn::new(a);
        let (id1, rx1) = c.register().unwrap();
        let (id2, rx2) = c.register().unwrap();
        assert_ne!(id1, id2);
        let r = |id| Reply {
            hdr: Header {
                id,
                ..Default::default()
            },
            payload: vec![],
        };
        assert!(c.route_reply(r(id2)));
        assert!(!c.route_reply(r(id2))); // already delivered
        assert_eq!(rx2.recv().unwrap().hdr.id, id2);
        c.close();
        assert!(rx1.recv().is_err()); // woken by the close
        assert!(c.register().is_err());
    }
}
