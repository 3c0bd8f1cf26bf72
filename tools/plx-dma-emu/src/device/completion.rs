// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The engine's state changes as the guest sees them: a descriptor
//! completed, a pause or abort done, a fatal error; the status bits each
//! latches and the interrupt it raises.

use super::State;
use crate::regs::*;
use crate::stats::{add, inc};

impl State {
    /// The engine leaves RUNNING/IDLE for STOPPED. A NEXT_ADDR written
    /// while it ran takes the place of the live position now.
    pub fn stop_engine(&mut self) {
        self.eng.enabled = false;
        self.eng.idle_at_kick = None;
        if let Some(next) = self.eng.next_written.take() {
            self.regs.next_lo = next;
        }
    }

    /// Completes a graceful pause: the engine stops and PAUSE_DONE is set
    /// (plus IMM_PAUSE_DONE when no descriptor had to be finished first).
    pub fn pause_done(&mut self, immediate: bool) {
        if self.eng.enabled {
            inc(&self.stats.pauses);
        }
        self.stop_engine();
        let mut status = INTR_STATUS_PAUSE_DONE;
        self.regs.ctrl |= CTRL_GRACEFUL_PAUSE_DONE;
        if immediate {
            self.regs.ctrl |= CTRL_IMM_PAUSE_DONE;
            status |= INTR_STATUS_IMM_PAUSE_DONE;
        }
        self.raise(status);
    }

    /// Completes an abort: the engine stops, ABORT self-clears, ABORT_DONE.
    pub fn abort_done(&mut self) {
        self.stop_engine();
        self.eng.abort_req = false;
        self.regs.ctrl |= CTRL_ABORT_DONE;
        inc(&self.stats.aborts);
        self.raise(INTR_STATUS_ABORT_DONE);
    }

    /// Stops the engine on a fatal error (fetch or write-back failure).
    pub fn fatal(&mut self) {
        self.stop_engine();
        self.raise(INTR_STATUS_ERROR);
    }

    /// Latches status bits and delivers the interrupt they call for.
    pub fn raise(&mut self, bits: u16) {
        self.regs.intr_status |= bits & INTR_STATUS_MASK;
        let edge = bits & self.irq_enable_mask() != 0;
        self.update_irq(edge);
    }

    /// Signals the interrupt with no status behind it (spurious-irq fault).
    pub fn spurious_irq(&self) {
        self.irq.fire_spurious(&self.stats, &self.name);
    }

    /// Status bits that can interrupt: those enabled in INTR_CTRL, plus
    /// DESC_DONE, which each descriptor enables with INT_WHEN_DONE.
    pub(super) fn irq_enable_mask(&self) -> u16 {
        (self.regs.intr_ctrl & INTR_CTRL_MASK) | INTR_STATUS_DESC_DONE
    }

    pub(super) fn update_irq(&mut self, edge: bool) {
        let pending = self.regs.intr_status & self.irq_enable_mask() != 0;
        let level = pending && !self.cfg.intx_disabled();
        self.cfg.set_intx_status(pending);
        self.irq
            .update(edge, level, &mut self.faults, &self.stats, &self.name);
    }

    /// Records one finished descriptor: advance, status, counters,
    /// interrupt. Returns true when the vanish fault fires.
    pub fn complete(
        &mut self,
        desc_addr: u64,
        int_when_done: bool,
        status: crate::desc::Completion,
        transferred: u32,
        write_back_ok: bool,
    ) -> bool {
        use crate::desc::Completion;
        self.eng.index = (self.eng.index + 1) % self.eng.count.max(1);
        self.regs.next_lo = (self.eng.base + self.eng.index as u64 * DESC_SIZE) as u32;
        self.regs.last_addr = desc_addr as u32;
        self.regs.last_size = transferred;
        let s = &self.stats;
        inc(&s.descriptors);
        add(&s.bytes, transferred as u64);
        let mut bits = 0u16;
        match status {
            Completion::Success => inc(&s.desc_success),
            Completion::ReadFail => {
                inc(&s.read_errors);
                inc(&s.errors);
                bits |= INTR_STATUS_ERROR;
            }
            Completion::WriteFail => {
                inc(&s.write_errors);
                inc(&s.errors);
                bits |= INTR_STATUS_ERROR;
            }
            Completion::Invalid => {
                inc(&s.invalid_descs);
                inc(&s.errors);
                self.regs.ctrl |= CTRL_DESC_INVALID;
                bits |= INTR_STATUS_INV_DESC;
            }
        }
        if !write_back_ok {
            inc(&s.writeback_errors);
            inc(&s.errors);
            self.stop_engine();
            bits |= INTR_STATUS_ERROR;
        } else if int_when_done {
            bits |= INTR_STATUS_DESC_DONE;
        }
        if bits != 0 {
            self.raise(bits);
        }
        self.faults.take_vanish()
    }
}
