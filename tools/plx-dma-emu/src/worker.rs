// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The engine thread of one connection: started when a client connects,
//! stopped and joined when it goes.
//!
//! This sits above both [`crate::device`] and [`crate::engine`] so that
//! the device (registers, state, waits) never has to know the engine that
//! runs on it, and the engine only knows the device.

use std::io;
use std::sync::Arc;
use std::thread::JoinHandle;

use crate::device::Device;
use crate::log::Level;
use crate::memory::GuestMemory;

/// A running engine thread. Dropping it without [`Worker::stop`] leaves
/// the thread running until the device is told to stop.
#[must_use = "an engine thread must be stopped with Worker::stop"]
pub struct Worker {
    dev: Arc<Device>,
    handle: JoinHandle<()>,
}

/// Starts the engine thread of `dev` on `mem` (one per connection). Fails
/// when the system refuses a thread (EAGAIN under a thread limit): the
/// caller turns the connection away instead of the process dying.
pub fn start(dev: &Arc<Device>, mem: Arc<dyn GuestMemory>) -> io::Result<Worker> {
    dev.lock().worker_stop = false;
    let on_thread = dev.clone();
    let handle = std::thread::Builder::new()
        .name(format!("plx-{}-engine", dev.name()))
        .spawn(move || crate::engine::run(&on_thread, mem.as_ref()))?;
    Ok(Worker {
        dev: dev.clone(),
        handle,
    })
}

impl Worker {
    /// Stops the engine thread and waits for it. The step in progress
    /// ends at its next check (see [`crate::device::State::must_abort`]);
    /// a DMA it waits for must be failed first (the server closes the
    /// connection before this).
    pub fn stop(self) {
        self.dev.lock().worker_stop = true;
        self.dev.notify();
        if self.handle.join().is_err() {
            crate::log!(Level::Error, self.dev.name(), "engine thread panicked");
        }
    }
}
