// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The default memory path: every access is a VFIO_USER_DMA_READ or
//! VFIO_USER_DMA_WRITE message that the client (QEMU) carries out with
//! `pci_dma_read/write` through the device's IOMMU address space. A bad
//! IOVA therefore produces a real fault in the guest's IOMMU and an error
//! reply here, exactly as real hardware would see a failed TLP.
//!
//! Only the engine thread calls this; it blocks on the reply while the
//! socket thread keeps serving the client (see [`crate::conn`]).

use std::sync::Arc;
use std::time::Duration;

use crate::conn::Conn;
use crate::memory::{bounce_copy, bounce_copy_checked, CopyError, DmaError, GuestMemory};
use crate::protocol::{cmd, request, DmaRw};
use crate::stats::{add, inc, Stats};

/// How long one DMA message may take. QEMU answers from its main loop, so
/// this only trips if the client is wedged; the descriptor then fails.
pub const DMA_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest piece moved by one DMA_READ/DMA_WRITE message. QEMU 11.1 left
/// requests of the full negotiated `max_data_xfer_size` (1 MiB) unanswered
/// in guest runs; smaller messages also let an abort land sooner.
pub const MSG_CHUNK: usize = 64 * 1024;

/// Memory access by messages over the vfio-user socket.
pub struct ClientDma {
    conn: Arc<Conn>,
    stats: Arc<Stats>,
    timeout: Duration,
}

impl ClientDma {
    /// Accesses memory through `conn`.
    pub fn new(conn: Arc<Conn>, stats: Arc<Stats>) -> ClientDma {
        ClientDma {
            conn,
            stats,
            timeout: DMA_TIMEOUT,
        }
    }

    /// As [`ClientDma::new`], waiting at most `timeout` for each reply
    /// (the fuzz target that plays a client that never answers uses a
    /// short one).
    pub fn with_timeout(conn: Arc<Conn>, stats: Arc<Stats>, timeout: Duration) -> ClientDma {
        ClientDma {
            conn,
            stats,
            timeout,
        }
    }

    /// Sends one request and waits for its reply payload.
    fn transact(&self, command: u16, iova: u64, payload: &[u8]) -> Result<Vec<u8>, DmaError> {
        let (id, rx) = self.conn.register().map_err(|_| DmaError::Disconnected)?;
        inc(&self.stats.dma_messages);
        if self.conn.send(&request(id, command, payload)).is_err() {
            self.conn.unregister(id);
            return Err(DmaError::Disconnected);
        }
        let reply = match rx.recv_timeout(self.timeout) {
            Ok(r) => r,
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                self.conn.unregister(id);
                return Err(DmaError::Timeout);
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                return Err(DmaError::Disconnected)
            }
        };
        if reply.hdr.is_error() {
            inc(&self.stats.dma_client_errors);
            return Err(DmaError::Client {
                iova,
                errno: reply.hdr.error as i32,
            });
        }
        if reply.hdr.command != command {
            return Err(DmaError::BadReply(format!(
                "reply to {} carries command {}",
                cmd::name(command),
                reply.hdr.command
            )));
        }
        Ok(reply.payload)
    }
}

impl GuestMemory for ClientDma {
    fn read(&self, iova: u64, buf: &mut [u8]) -> Result<(), DmaError> {
        let max = self.conn.max_xfer().min(MSG_CHUNK);
        let mut at = 0usize;
        for chunk in buf.chunks_mut(max) {
            let a = iova.wrapping_add(at as u64);
            let payload = DmaRw::encode(a, chunk.len() as u64, &[]);
            let reply = self.transact(cmd::DMA_READ, a, &payload)?;
            let r = DmaRw::parse(&reply).map_err(|e| DmaError::BadReply(e.to_string()))?;
            // Short replies are the client's way to report a partial read;
            // for the device that is a failed read.
            if r.address != a || r.count != chunk.len() as u64 || r.data.len() < chunk.len() {
                return Err(DmaError::BadReply(format!(
                    "DMA_READ {a:#x}+{:#x} answered with {:#x}+{:#x} and {} data bytes",
                    chunk.len(),
                    r.address,
                    r.count,
                    r.data.len()
                )));
            }
            chunk.copy_from_slice(&r.data[..chunk.len()]);
            at += chunk.len();
        }
        Ok(())
    }

    fn write(&self, iova: u64, data: &[u8]) -> Result<(), DmaError> {
        let max = self.conn.max_xfer().min(MSG_CHUNK);
        let mut at = 0usize;
        for chunk in data.chunks(max) {
            let a = iova.wrapping_add(at as u64);
            let payload = DmaRw::encode(a, chunk.len() as u64, chunk);
            // QEMU echoes nothing but the header for a successful write;
            // the header alone is the acknowledgement.
            self.transact(cmd::DMA_WRITE, a, &payload)?;
            at += chunk.len();
        }
        Ok(())
    }

    fn copy(&self, src: u64, dst: u64, len: usize, scratch: &mut Vec<u8>) -> Result<(), CopyError> {
        bounce_copy(self, src, dst, len, scratch)?;
        add(&self.stats.bytes_messages, len as u64);
        Ok(())
    }

    fn copy_checked(
        &self,
        src: u64,
        dst: u64,
        len: usize,
        scratch: &mut Vec<u8>,
        proceed: &dyn Fn() -> bool,
    ) -> Result<bool, CopyError> {
        // The read is a round of messages that can take a while: a reset
        // answered meanwhile must stop the write.
        let wrote = bounce_copy_checked(self, src, dst, len, scratch, proceed)?;
        if wrote {
            add(&self.stats.bytes_messages, len as u64);
        }
        Ok(wrote)
    }

    fn max_chunk(&self) -> usize {
        self.conn.max_xfer()
    }
}
