// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Fuzz target: the vfio-user message decoder.
//!
//! The input is the byte stream a client sends. It goes through the real
//! path of a connection: `conn::recv_message` frames it (header, size
//! check, payload), and `server::Session::handle` decodes each message and
//! answers it, exactly as the socket thread does for QEMU. The stream runs
//! over an in-process socketpair, as in the crate's server tests; there is
//! no engine thread, no file descriptor passing and no shared memory, so a
//! message can only reach this process's own state. Every reply the server
//! sends back is framed again and checked.

#![no_main]

use std::io::Write;
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, RwLock};

use libfuzzer_sys::fuzz_target;
use plx_dma_emu::conn::{recv_message, Conn};
use plx_dma_emu::device::Device;
use plx_dma_emu::dma_map::DmaMapTable;
use plx_dma_emu::log::{set_level, Level};
use plx_dma_emu::protocol::{HDR_SIZE, TYPE_REPLY};
use plx_dma_emu::server::Session;

/// Reads every reply waiting on the client's end and checks its framing.
fn drain_replies(client: &UnixStream) {
    // The client end is non-blocking: an empty socket ends the loop.
    while let Ok(Some(m)) = recv_message(client) {
        assert_eq!(m.hdr.msg_type(), TYPE_REPLY, "server sent a non-reply");
        assert_eq!(m.hdr.size as usize, HDR_SIZE + m.payload.len());
        if m.hdr.is_error() {
            assert!(m.payload.is_empty(), "error reply with a payload");
            assert_ne!(m.hdr.error, 0, "error reply without an errno");
        }
        assert!(m.fds.is_empty());
    }
}

fuzz_target!(|data: &[u8]| {
    set_level(Level::Error);
    let (mut client, server) = UnixStream::pair().expect("socketpair");
    // Neither side may ever block the fuzzer: a full socket is an error
    // (which ends the connection, as it would in the emulator).
    client.set_nonblocking(true).unwrap();
    server.set_nonblocking(true).unwrap();
    // What does not fit into the socket buffer is simply not sent.
    let _ = client.write_all(data);
    client.shutdown(Shutdown::Write).unwrap();

    let dev = Device::new("fuzz");
    let conn = Arc::new(Conn::new(server.try_clone().unwrap()));
    let table = Arc::new(RwLock::new(DmaMapTable::new()));
    let mut session = Session::new(dev.clone(), conn.clone(), table.clone(), false);
    let mut handled = 0;
    // recv_message ends with Ok(None) at the clean end of the stream and
    // with an error on a bad size or a truncated message.
    while let Ok(Some(msg)) = recv_message(&server) {
        assert!(msg.fds.is_empty());
        handled += 1;
        if session.handle(msg).is_err() || handled > 4096 {
            break;
        }
        drain_replies(&client);
    }
    drain_replies(&client);
    conn.close();
    dev.client_gone();
    table
        .write()
        .unwrap_or_else(|e| e.into_inner())
        .unmap(0, 0, true);
});
