// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! What happens to the function from the outside: SET_IRQS, function
//! reset, the client connecting and going away, and the fault plan.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::{Device, EngineState, Regs};
use crate::conn::Conn;
use crate::faults::FaultSpec;
use crate::irq::SetIrqsEffect;
use crate::stats::inc;

impl Device {
    // ---- interrupts ----------------------------------------------------------

    /// Applies VFIO_USER_DEVICE_SET_IRQS. Returns an errno on rejection.
    pub fn set_irqs(
        &self,
        flags: u32,
        index: u32,
        start: u32,
        count: u32,
        data: &[u8],
        fds: Vec<std::os::fd::OwnedFd>,
    ) -> Result<(), i32> {
        let mut guard = self.lock();
        let st = &mut *guard;
        match st.irq.set_irqs(flags, index, start, count, data, fds)? {
            SetIrqsEffect::None => {}
            SetIrqsEffect::IntxUnmasked => st.update_irq(false),
            SetIrqsEffect::Trigger(index, vectors) => {
                for v in vectors {
                    st.irq
                        .fire(index, v, &mut st.faults, &self.stats, &self.name);
                }
            }
        }
        Ok(())
    }

    // ---- lifecycle -------------------------------------------------------------

    /// Function reset (VFIO_USER_DEVICE_RESET): registers, engine and config
    /// space return to power-on state. The client's eventfds are kept, as
    /// the kernel's vfio-pci keeps them; QEMU re-programs interrupts around
    /// a reset anyway.
    pub fn reset(&self, why: &str) {
        let mut st = self.lock();
        st.generation += 1;
        st.regs = Regs::default();
        let kick = st.eng.kick;
        st.eng = EngineState {
            kick,
            ..EngineState::default()
        };
        st.cfg.reset();
        st.bar2.iter_mut().for_each(|b| *b = 0);
        st.irq.reset_mask();
        drop(st);
        self.warn_limit
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reset();
        inc(&self.stats.resets);
        self.info(format_args!("device reset ({why})"));
        self.notify();
    }

    /// The client went away: drop its eventfds and reset the function, so
    /// a reconnecting client finds a clean device.
    pub fn client_gone(&self) {
        self.lock().irq.clear();
        self.reset("client disconnected");
    }

    /// Records the live connection (used by the vanish fault).
    pub fn attach(&self, conn: Arc<Conn>) {
        *self.link.lock().unwrap_or_else(|e| e.into_inner()) = Some(conn);
        self.connected.store(true, Ordering::Release);
        inc(&self.stats.connections);
    }

    /// Forgets the connection.
    pub fn detach(&self) {
        *self.link.lock().unwrap_or_else(|e| e.into_inner()) = None;
        self.connected.store(false, Ordering::Release);
    }

    /// Whether a client is connected.
    pub fn connected(&self) -> bool {
        self.connected.load(Ordering::Acquire)
    }

    /// Surprise removal: close the client connection now. Returns false if
    /// no client was connected.
    pub fn vanish(&self) -> bool {
        let conn = self.link.lock().unwrap_or_else(|e| e.into_inner()).clone();
        match conn {
            Some(c) => {
                self.info(format_args!(
                    "fault: vanish (surprise removal), closing the client socket"
                ));
                inc(&self.stats.faults_injected);
                c.close();
                true
            }
            None => false,
        }
    }

    /// Closes the client connection, if any, without counting a fault
    /// (used at shutdown).
    pub fn disconnect(&self) {
        let conn = self.link.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some(c) = conn {
            c.close();
        }
    }

    /// Arms a fault; `vanish` without a count acts at once.
    pub fn arm_fault(&self, spec: FaultSpec) -> Result<(), String> {
        if spec == FaultSpec::Vanish(0) {
            return if self.vanish() {
                Ok(())
            } else {
                Err("no client connected".into())
            };
        }
        self.lock().faults.arm(spec);
        self.info(format_args!("fault armed: {spec}"));
        self.notify();
        Ok(())
    }

    /// The armed faults, for the control socket.
    pub fn faults(&self) -> Vec<String> {
        self.lock().faults.describe()
    }

    /// Engine summary for `stats`: (enabled, index, in_progress).
    pub fn engine_summary(&self) -> (bool, u32, bool) {
        let st = self.lock();
        (
            st.eng.enabled,
            st.eng.index,
            st.eng.enabled && st.eng.idle_at_kick.is_none(),
        )
    }
}
