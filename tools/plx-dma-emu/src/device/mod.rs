// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! One emulated DMA channel (one PCI function): its registers, config
//! space, interrupt state and fault plan, behind one lock.
//!
//! The state and the lock live here, with the waits the engine thread
//! makes on them; the rest is split by concern: `registers` (what the
//! guest reads and writes in BAR0, BAR2 and config space), `lifecycle`
//! (reset, the client's connection, the interrupts and faults it sets
//! up) and `completion` (the engine's state changes and the status and
//! interrupts they raise). The engine thread itself is started and
//! stopped by [`crate::worker`], so this module does not depend on the
//! engine.
//!
//! Two kinds of thread touch a device. The socket thread calls the region
//! accessors and SET_IRQS handling on behalf of the client; the engine
//! thread (see [`crate::engine`]) walks the descriptor ring. The lock is
//! only ever held for short, non-blocking work: never across a DMA access,
//! because a DMA message waits for the client, and the client may at that
//! moment be waiting for the socket thread to answer a register read.

use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::config_space::ConfigSpace;
use crate::conn::Conn;
use crate::faults::Faults;
use crate::irq::IrqState;
use crate::log::{Level, RateLimit};
use crate::memory::DmaError;
use crate::regs::*;
use crate::stats::Stats;

/// Register storage. Values are exactly what the guest reads back, except
/// CTRL, whose START/ABORT/IN_PROGRESS bits are computed from the engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Regs {
    /// DESC_RING_ADDR.
    pub ring_lo: u32,
    /// DESC_RING_ADDR_HI.
    pub ring_hi: u32,
    /// DESC_RING_NEXT_ADDR (updated by the engine as it advances).
    pub next_lo: u32,
    /// DESC_RING_COUNT.
    pub count: u32,
    /// DESC_RING_LAST_ADDR.
    pub last_addr: u32,
    /// DESC_RING_LAST_SIZE.
    pub last_size: u32,
    /// PREF_LIMIT.
    pub pref: u32,
    /// CTRL storage: read/write bits, W1C status bits and the CTRL2 half.
    pub ctrl: u32,
    /// INTR_CTRL.
    pub intr_ctrl: u16,
    /// INTR_STATUS.
    pub intr_status: u16,
}

/// Engine bookkeeping that is not a register.
#[derive(Clone, Debug, Default)]
pub struct EngineState {
    /// START reads 1: the engine owns the ring.
    pub enabled: bool,
    /// Ring base latched at START.
    pub base: u64,
    /// Ring size latched at START.
    pub count: u32,
    /// Index of the next descriptor to fetch.
    pub index: u32,
    /// The engine thread is inside a step (between snapshot and commit).
    pub in_flight: bool,
    /// An abort waits for the engine thread.
    pub abort_req: bool,
    /// Doorbell generation: bumped by every START write.
    pub kick: u64,
    /// Set when the ring ran dry: the engine sleeps until `kick` changes.
    pub idle_at_kick: Option<u64>,
    /// When a doorbell (or a start) found the engine idle; taken by the
    /// engine's next fetch, which counts the wake-up (`wakeup_ns`).
    pub woken_at: Option<Instant>,
    /// DESC_RING_NEXT_ADDR as written while the engine ran: held apart so
    /// that the engine's advance does not overwrite it, and installed when
    /// the engine stops, for the next START (the spec's "takes effect at
    /// the next START").
    pub next_written: Option<u32>,
}

/// Everything behind the device lock.
pub struct State {
    /// Registers.
    pub regs: Regs,
    /// Engine bookkeeping.
    pub eng: EngineState,
    /// PCI config space.
    pub cfg: ConfigSpace,
    /// BAR2 backing (MSI-X table and PBA; QEMU emulates the table, so this
    /// only ever answers stray accesses and PBA reads, which are 0).
    pub bar2: Vec<u8>,
    /// Interrupt eventfds.
    pub irq: IrqState,
    /// Fault plan.
    pub faults: Faults,
    /// Bumped by every reset; an engine step that started before a reset
    /// discards its results.
    pub generation: u64,
    /// The engine thread must exit.
    pub worker_stop: bool,
    /// The engine thread sleeps on the condition variable. Register
    /// writes wake it only then: a wake-up is a futex system call even
    /// with no one waiting, and the driver writes a doorbell per
    /// submission and INTR_STATUS per interrupt while the engine is busy.
    engine_waiting: bool,
    stats: Arc<Stats>,
    name: Arc<str>,
}

/// One channel.
pub struct Device {
    name: Arc<str>,
    state: Mutex<State>,
    wake: Condvar,
    /// Counters, shared with the memory paths.
    pub stats: Arc<Stats>,
    warn_limit: Mutex<RateLimit>,
    link: Mutex<Option<Arc<Conn>>>,
    connected: AtomicBool,
}

mod completion;
mod lifecycle;
mod registers;
#[cfg(test)]
mod tests;

impl Device {
    /// A powered-on, unconnected channel named e.g. `ch0` in logs.
    pub fn new(name: &str) -> Arc<Device> {
        let stats = Arc::new(Stats::default());
        let name: Arc<str> = Arc::from(name);
        Arc::new(Device {
            name: name.clone(),
            state: Mutex::new(State {
                regs: Regs::default(),
                eng: EngineState::default(),
                cfg: ConfigSpace::new(),
                bar2: vec![0; BAR2_SIZE as usize],
                irq: IrqState::new(),
                faults: Faults::default(),
                generation: 0,
                worker_stop: false,
                engine_waiting: false,
                stats: stats.clone(),
                name: name.clone(),
            }),
            wake: Condvar::new(),
            stats,
            warn_limit: Mutex::new(RateLimit::default()),
            link: Mutex::new(None),
            connected: AtomicBool::new(false),
        })
    }

    /// Name used in log lines.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Locks the state. A panic elsewhere must not wedge the channel, so a
    /// poisoned lock is simply taken over.
    pub fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wakes the engine thread.
    pub fn notify(&self) {
        self.wake.notify_all();
    }

    /// Logs a warning about guest or client behaviour, rate-limited so a
    /// hostile guest cannot flood the log. Nothing is printed (or counted)
    /// when the log level is below `warn`.
    pub fn warn(&self, args: std::fmt::Arguments<'_>) {
        if !crate::log::enabled(Level::Warn) {
            return;
        }
        let allow = self
            .warn_limit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .allow();
        if allow {
            crate::log::write_line(Level::Warn, &self.name, args);
        }
    }

    /// Logs an informational line.
    pub fn info(&self, args: std::fmt::Arguments<'_>) {
        if crate::log::enabled(Level::Info) {
            crate::log::write_line(Level::Info, &self.name, args);
        }
    }

    /// Logs a debug line.
    pub fn debug(&self, args: std::fmt::Arguments<'_>) {
        if crate::log::enabled(Level::Debug) {
            crate::log::write_line(Level::Debug, &self.name, args);
        }
    }

    // ---- engine thread support --------------------------------------------

    /// Blocks until the engine has work or must stop. True if it must stop.
    pub fn wait_for_work(&self) -> bool {
        let mut st = self.lock();
        while !st.worker_stop && !st.runnable() {
            st.engine_waiting = true;
            st = self.wake.wait(st).unwrap_or_else(|e| e.into_inner());
            st.engine_waiting = false;
        }
        st.worker_stop
    }

    /// Sleeps up to `ms`, returning early (true) if the step started at
    /// `generation` should stop: reset, abort, shutdown, or (`Wake::OnPause`)
    /// a graceful pause.
    pub fn sleep_unless_stopped(&self, ms: u64, generation: u64, wake: Wake) -> bool {
        let deadline = Instant::now() + Duration::from_millis(ms);
        let mut st = self.lock();
        loop {
            let stop = match wake {
                Wake::OnPause => st.should_stop(generation),
                Wake::OnAbort => st.must_abort(generation),
            };
            if stop {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            st.engine_waiting = true;
            st = self
                .wake
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
            st.engine_waiting = false;
        }
    }

    /// Counts a failed DMA against the engine for logs.
    pub fn log_dma_failure(&self, what: &str, desc_addr: u64, err: &DmaError) {
        self.warn(format_args!(
            "descriptor at IOVA {desc_addr:#x}: {what} failed: {err}"
        ));
    }
}

/// What ends a [`Device::sleep_unless_stopped`] early, besides a reset,
/// an abort or shutdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// A graceful pause too: the descriptor has not started.
    OnPause,
    /// Not a graceful pause: the descriptor is running, and a pause waits
    /// for its end.
    OnAbort,
}

impl State {
    /// The engine may run a step now.
    pub fn runnable(&self) -> bool {
        self.eng.enabled
            && !self.pause_requested()
            && !self.eng.abort_req
            && self.eng.idle_at_kick.is_none_or(|k| k != self.eng.kick)
    }

    /// GRACEFUL_PAUSE is set.
    pub fn pause_requested(&self) -> bool {
        self.regs.ctrl & CTRL_GRACEFUL_PAUSE != 0
    }

    /// A step started at `generation` must stop at the next boundary.
    pub fn should_stop(&self, generation: u64) -> bool {
        self.must_abort(generation) || self.pause_requested()
    }

    /// A step started at `generation` must stop even mid-descriptor:
    /// reset, abort or shutdown (a graceful pause waits for the boundary).
    pub fn must_abort(&self, generation: u64) -> bool {
        self.generation != generation || self.worker_stop || self.eng.abort_req
    }
}
