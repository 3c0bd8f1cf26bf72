// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Interrupt delivery: the eventfds the client passed with
//! VFIO_USER_DEVICE_SET_IRQS and the INTx mask state.
//!
//! The semantics follow the kernel's vfio-pci, which QEMU's vfio code
//! expects: MSI and MSI-X are edges (one eventfd write per event); INTx is
//! a level that is automatically masked when signalled and re-signalled on
//! UNMASK if still asserted (QEMU unmasks on the guest's end of interrupt).

use std::fs::File;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::Duration;

use nix::fcntl::{fcntl, FcntlArg, OFlag};
use vfio_bindings::bindings::vfio::{
    VFIO_IRQ_INFO_AUTOMASKED, VFIO_IRQ_INFO_EVENTFD, VFIO_IRQ_INFO_MASKABLE,
    VFIO_IRQ_INFO_NORESIZE, VFIO_IRQ_SET_ACTION_MASK, VFIO_IRQ_SET_ACTION_TRIGGER,
    VFIO_IRQ_SET_ACTION_TYPE_MASK, VFIO_IRQ_SET_ACTION_UNMASK, VFIO_IRQ_SET_DATA_BOOL,
    VFIO_IRQ_SET_DATA_EVENTFD, VFIO_IRQ_SET_DATA_NONE, VFIO_IRQ_SET_DATA_TYPE_MASK,
    VFIO_PCI_ERR_IRQ_INDEX, VFIO_PCI_INTX_IRQ_INDEX, VFIO_PCI_MSIX_IRQ_INDEX,
    VFIO_PCI_MSI_IRQ_INDEX, VFIO_PCI_NUM_IRQS, VFIO_PCI_REQ_IRQ_INDEX,
};

use crate::config_space::MSIX_VECTORS;
use crate::faults::Faults;
use crate::stats::{inc, Stats};

/// Delay before the second signal of a duplicated interrupt, so that the
/// client has a chance to consume the first (an eventfd is a counter; two
/// back-to-back writes would read as one event).
const DUP_DELAY: Duration = Duration::from_millis(2);

/// An eventfd the client gave us, switched to non-blocking mode.
///
/// Signalling happens under the device lock, on whichever thread raised
/// the event, so a write that could block would let the client wedge the
/// channel (a pipe nobody reads, a FIFO). Only eventfds are accepted, as
/// the kernel's vfio-pci accepts only eventfds, and the file is made
/// non-blocking: an eventfd write blocks only when its counter is about to
/// overflow, and a counter that high is an interrupt already pending.
#[derive(Debug)]
pub struct EventFd(File);

/// What `readlink` shows for an eventfd under `/proc/self/fd`.
const EVENTFD_LINK: &str = "anon_inode:[eventfd]";

impl EventFd {
    /// Wraps a received descriptor; `EINVAL` if it is not an eventfd.
    ///
    /// O_NONBLOCK is a flag of the open file description, which the client
    /// shares; QEMU creates its eventfds non-blocking already, so this
    /// changes nothing for it.
    pub fn new(fd: OwnedFd) -> Result<EventFd, i32> {
        let link = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))
            .map_err(|_| libc::EINVAL)?;
        if link.as_os_str() != EVENTFD_LINK {
            return Err(libc::EINVAL);
        }
        let flags = fcntl(&fd, FcntlArg::F_GETFL).map_err(|e| e as i32)?;
        let flags = OFlag::from_bits_retain(flags) | OFlag::O_NONBLOCK;
        fcntl(&fd, FcntlArg::F_SETFL(flags)).map_err(|e| e as i32)?;
        Ok(EventFd(File::from(fd)))
    }

    /// Adds 1 to the counter (the vfio way to raise an interrupt). Never
    /// blocks: a full counter (EAGAIN) already reads as an event.
    pub fn signal(&self) -> std::io::Result<()> {
        match (&self.0).write(&1u64.to_ne_bytes()) {
            Ok(8) => Ok(()),
            Ok(n) => Err(std::io::Error::other(format!(
                "short eventfd write ({n} bytes)"
            ))),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => Ok(()),
            Err(e) => Err(e),
        }
    }

    fn try_clone(&self) -> Option<EventFd> {
        self.0.try_clone().ok().map(EventFd)
    }
}

/// Which interrupt mechanism the client enabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Nothing enabled: events only latch in INTR_STATUS.
    None,
    /// Legacy INTx (level, automasked).
    Intx,
    /// MSI (one vector).
    Msi,
    /// MSI-X (vector 0 is used).
    Msix,
}

/// Number of vectors of an IRQ index.
pub fn irq_count(index: u32) -> u32 {
    match index {
        VFIO_PCI_INTX_IRQ_INDEX | VFIO_PCI_MSI_IRQ_INDEX => 1,
        VFIO_PCI_MSIX_IRQ_INDEX => MSIX_VECTORS,
        VFIO_PCI_ERR_IRQ_INDEX | VFIO_PCI_REQ_IRQ_INDEX => 1,
        _ => 0,
    }
}

/// Flags of VFIO_USER_DEVICE_GET_IRQ_INFO for an index, like vfio-pci.
pub fn irq_flags(index: u32) -> u32 {
    match index {
        VFIO_PCI_INTX_IRQ_INDEX => {
            VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_MASKABLE | VFIO_IRQ_INFO_AUTOMASKED
        }
        VFIO_PCI_MSI_IRQ_INDEX | VFIO_PCI_MSIX_IRQ_INDEX => {
            VFIO_IRQ_INFO_EVENTFD | VFIO_IRQ_INFO_NORESIZE
        }
        _ => VFIO_IRQ_INFO_EVENTFD,
    }
}

/// Eventfds and INTx state of one channel.
#[derive(Debug)]
pub struct IrqState {
    /// One slot per vector, per index (INTx, MSI, MSI-X, ERR, REQ).
    fds: Vec<Vec<Option<EventFd>>>,
    intx_masked: bool,
}

impl Default for IrqState {
    fn default() -> Self {
        IrqState::new()
    }
}

/// What a SET_IRQS did, for the device to act on.
#[derive(Debug, PartialEq, Eq)]
pub enum SetIrqsEffect {
    /// Nothing further to do.
    None,
    /// INTx was unmasked: re-evaluate the level.
    IntxUnmasked,
    /// The client asked to trigger these vectors of `index` itself.
    Trigger(u32, Vec<u32>),
}

impl IrqState {
    /// No eventfds yet.
    pub fn new() -> IrqState {
        IrqState {
            fds: (0..VFIO_PCI_NUM_IRQS)
                .map(|i| (0..irq_count(i)).map(|_| None).collect())
                .collect(),
            intx_masked: false,
        }
    }

    /// Drops every eventfd (client gone).
    pub fn clear(&mut self) {
        *self = IrqState::new();
    }

    /// Forgets the INTx mask (function reset keeps the eventfds, like the
    /// kernel's vfio-pci, because QEMU re-programs them around a reset).
    pub fn reset_mask(&mut self) {
        self.intx_masked = false;
    }

    /// The mechanism in use: MSI-X over MSI over INTx, by which has an
    /// eventfd (QEMU enables exactly one at a time).
    pub fn mode(&self) -> Mode {
        let has = |i: u32| self.fds[i as usize].iter().any(Option::is_some);
        if has(VFIO_PCI_MSIX_IRQ_INDEX) {
            Mode::Msix
        } else if has(VFIO_PCI_MSI_IRQ_INDEX) {
            Mode::Msi
        } else if has(VFIO_PCI_INTX_IRQ_INDEX) {
            Mode::Intx
        } else {
            Mode::None
        }
    }

    /// Whether INTx is masked.
    pub fn intx_masked(&self) -> bool {
        self.intx_masked
    }

    /// Applies a SET_IRQS request. Errors are errno values for the reply.
    pub fn set_irqs(
        &mut self,
        flags: u32,
        index: u32,
        start: u32,
        count: u32,
        data: &[u8],
        fds: Vec<OwnedFd>,
    ) -> Result<SetIrqsEffect, i32> {
        let data_type = flags & VFIO_IRQ_SET_DATA_TYPE_MASK;
        let action = flags & VFIO_IRQ_SET_ACTION_TYPE_MASK;
        if index >= VFIO_PCI_NUM_IRQS
            || !data_type.is_power_of_two()
            || !action.is_power_of_two()
            || flags & !(VFIO_IRQ_SET_DATA_TYPE_MASK | VFIO_IRQ_SET_ACTION_TYPE_MASK) != 0
        {
            return Err(libc::EINVAL);
        }
        if data_type != VFIO_IRQ_SET_DATA_EVENTFD && !fds.is_empty() {
            return Err(libc::EINVAL);
        }
        let max = irq_count(index);
        // "count 0 with DATA_NONE|TRIGGER disables all interrupts of the
        // index" (spec and kernel ABI).
        if count == 0 {
            if data_type == VFIO_IRQ_SET_DATA_NONE && action == VFIO_IRQ_SET_ACTION_TRIGGER {
                self.fds[index as usize].iter_mut().for_each(|s| *s = None);
                if index == VFIO_PCI_INTX_IRQ_INDEX {
                    self.intx_masked = false;
                }
                return Ok(SetIrqsEffect::None);
            }
            return Err(libc::EINVAL);
        }
        let end = start.checked_add(count).ok_or(libc::EINVAL)?;
        if end > max {
            return Err(libc::EINVAL);
        }
        let selected: Vec<u32> = match data_type {
            VFIO_IRQ_SET_DATA_BOOL => {
                if data.len() < count as usize {
                    return Err(libc::EINVAL);
                }
                (start..end)
                    .zip(data)
                    .filter(|(_, &b)| b != 0)
                    .map(|(i, _)| i)
                    .collect()
            }
            _ => (start..end).collect(),
        };
        match action {
            VFIO_IRQ_SET_ACTION_TRIGGER if data_type == VFIO_IRQ_SET_DATA_EVENTFD => {
                // QEMU sends `count` descriptors, or none to de-assign.
                if !fds.is_empty() && fds.len() != count as usize {
                    return Err(libc::EINVAL);
                }
                let slots = &mut self.fds[index as usize][start as usize..end as usize];
                if fds.is_empty() {
                    slots.iter_mut().for_each(|s| *s = None);
                } else {
                    // Check every descriptor before installing any, so a
                    // refused request changes nothing.
                    let fds = fds
                        .into_iter()
                        .map(EventFd::new)
                        .collect::<Result<Vec<_>, _>>()?;
                    for (slot, fd) in slots.iter_mut().zip(fds) {
                        *slot = Some(fd);
                    }
                }
                if index == VFIO_PCI_INTX_IRQ_INDEX {
                    self.intx_masked = false;
                    return Ok(SetIrqsEffect::IntxUnmasked);
                }
                Ok(SetIrqsEffect::None)
            }
            VFIO_IRQ_SET_ACTION_TRIGGER => Ok(SetIrqsEffect::Trigger(index, selected)),
            // Only INTx is maskable, as in vfio-pci; an eventfd-driven
            // unmask (KVM's resampler) is not offered.
            VFIO_IRQ_SET_ACTION_MASK | VFIO_IRQ_SET_ACTION_UNMASK
                if index == VFIO_PCI_INTX_IRQ_INDEX && data_type != VFIO_IRQ_SET_DATA_EVENTFD =>
            {
                if selected.is_empty() {
                    return Ok(SetIrqsEffect::None);
                }
                if action == VFIO_IRQ_SET_ACTION_MASK {
                    self.intx_masked = true;
                    Ok(SetIrqsEffect::None)
                } else {
                    self.intx_masked = false;
                    Ok(SetIrqsEffect::IntxUnmasked)
                }
            }
            _ => Err(libc::EINVAL),
        }
    }

    fn fd(&self, index: u32, vector: u32) -> Option<&EventFd> {
        self.fds.get(index as usize)?.get(vector as usize)?.as_ref()
    }

    /// Signals one vector, applying the drop/dup faults. Returns whether
    /// a signal reached the eventfd: INTx is automasked only then.
    pub fn fire(
        &self,
        index: u32,
        vector: u32,
        faults: &mut Faults,
        stats: &Stats,
        who: &str,
    ) -> bool {
        let Some(fd) = self.fd(index, vector) else {
            return false;
        };
        if faults.take_drop_irq() {
            inc(&stats.irqs_dropped);
            inc(&stats.faults_injected);
            crate::log!(crate::log::Level::Info, who, "fault: dropped an interrupt");
            return false;
        }
        match fd.signal() {
            Ok(()) => inc(&stats.interrupts),
            Err(e) => {
                crate::log!(
                    crate::log::Level::Warn,
                    who,
                    "cannot signal interrupt eventfd: {e}"
                );
                return false;
            }
        }
        if faults.take_dup_irq() {
            inc(&stats.faults_injected);
            crate::log!(
                crate::log::Level::Info,
                who,
                "fault: duplicating an interrupt"
            );
            if let Some(dup) = fd.try_clone() {
                // A short-lived thread, so the caller (holding the device
                // lock) does not sleep.
                let _ = std::thread::Builder::new()
                    .name("plx-dup-irq".into())
                    .spawn(move || {
                        std::thread::sleep(DUP_DELAY);
                        let _ = dup.signal();
                    });
                inc(&stats.irqs_duplicated);
                inc(&stats.interrupts);
            }
        }
        true
    }

    /// Signals the interrupt with nothing behind it (the spurious-irq
    /// fault): MSI and MSI-X only, since INTx follows the status.
    pub fn fire_spurious(&self, stats: &Stats, who: &str) {
        let index = match self.mode() {
            Mode::Msix => VFIO_PCI_MSIX_IRQ_INDEX,
            Mode::Msi => VFIO_PCI_MSI_IRQ_INDEX,
            _ => return,
        };
        if let Some(fd) = self.fd(index, 0) {
            if fd.signal().is_ok() {
                inc(&stats.interrupts);
                inc(&stats.faults_injected);
                crate::log!(crate::log::Level::Info, who, "fault: a spurious interrupt");
            }
        }
    }

    /// Delivers the device's interrupt condition.
    ///
    /// `edge` is true when a new enabled event was just raised; `level` is
    /// whether an enabled event is pending in INTR_STATUS (and INTx is not
    /// disabled in PCI_COMMAND).
    pub fn update(
        &mut self,
        edge: bool,
        level: bool,
        faults: &mut Faults,
        stats: &Stats,
        who: &str,
    ) {
        match self.mode() {
            Mode::Msix if edge => {
                self.fire(VFIO_PCI_MSIX_IRQ_INDEX, 0, faults, stats, who);
            }
            Mode::Msi if edge => {
                self.fire(VFIO_PCI_MSI_IRQ_INDEX, 0, faults, stats, who);
            }
            Mode::Intx if level && !self.intx_masked => {
                // The automask stands for "the client saw the assertion and
                // will UNMASK after the guest's EOI". An assertion that
                // never reached the client will never be unmasked, so it
                // must not mask: the line stays armed and the next
                // evaluation with the level still high signals it.
                self.intx_masked = self.fire(VFIO_PCI_INTX_IRQ_INDEX, 0, faults, stats, who);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A real eventfd pair: the OwnedFd goes to the IrqState, the File is
    /// read by the test to count signals.
    pub fn eventfd() -> (OwnedFd, File) {
        use nix::sys::eventfd::{EfdFlags, EventFd as NixEventFd};
        let efd =
            NixEventFd::from_value_and_flags(0, EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC);
        let fd = OwnedFd::from(efd.unwrap());
        let reader = File::from(fd.try_clone().unwrap());
        (fd, reader)
    }

    fn count(f: &mut File) -> u64 {
        let mut b = [0u8; 8];
        match f.read(&mut b) {
            Ok(8) => u64::from_ne_bytes(b),
            _ => 0,
        }
    }

    const TRIGGER_FD: u32 = VFIO_IRQ_SET_DATA_EVENTFD | VFIO_IRQ_SET_ACTION_TRIGGER;

    #[test]
    fn spurious_interrupt_only_with_msi() {
        let mut s = IrqState::new();
        let st = Stats::default();
        s.fire_spurious(&st, "t"); // INTx: nothing
        let (fd, mut rd) = eventfd();
        s.set_irqs(TRIGGER_FD, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1, &[], vec![fd])
            .unwrap();
        s.fire_spurious(&st, "t");
        assert_eq!(count(&mut rd), 1);
    }

    #[test]
    fn msix_edges_and_faults() {
        let mut s = IrqState::new();
        let (fd, mut rd) = eventfd();
        assert_eq!(
            s.set_irqs(TRIGGER_FD, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1, &[], vec![fd]),
            Ok(SetIrqsEffect::None)
        );
        assert_eq!(s.mode(), Mode::Msix);
        let mut f = Faults::default();
        let st = Stats::default();
        s.update(true, true, &mut f, &st, "t");
        s.update(false, true, &mut f, &st, "t"); // no new event: no edge
        assert_eq!(count(&mut rd), 1);
        f.arm(crate::faults::FaultSpec::DropIrq(1));
        s.update(true, true, &mut f, &st, "t");
        assert_eq!(count(&mut rd), 0);
        f.arm(crate::faults::FaultSpec::DupIrq(1));
        s.update(true, true, &mut f, &st, "t");
        let mut seen = 0;
        for _ in 0..2000 {
            seen += count(&mut rd);
            if seen == 2 {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(seen, 2);
        assert_eq!(
            st.irqs_dropped.load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        assert_eq!(
            st.irqs_duplicated
                .load(std::sync::atomic::Ordering::Relaxed),
            1
        );
        // De-assign with no fds; then disable-all form.
        assert!(s
            .set_irqs(TRIGGER_FD, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1, &[], vec![])
            .is_ok());
        assert_eq!(s.mode(), Mode::None);
    }

    #[test]
    fn intx_level_automask_unmask() {
        let mut s = IrqState::new();
        let (fd, mut rd) = eventfd();
        assert_eq!(
            s.set_irqs(TRIGGER_FD, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &[], vec![fd]),
            Ok(SetIrqsEffect::IntxUnmasked)
        );
        let mut f = Faults::default();
        let st = Stats::default();
        s.update(true, true, &mut f, &st, "t");
        assert!(s.intx_masked());
        s.update(true, true, &mut f, &st, "t"); // masked: nothing
        assert_eq!(count(&mut rd), 1);
        let unmask = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_UNMASK;
        assert_eq!(
            s.set_irqs(unmask, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &[], vec![]),
            Ok(SetIrqsEffect::IntxUnmasked)
        );
        s.update(false, false, &mut f, &st, "t"); // level dropped meanwhile
        assert_eq!(count(&mut rd), 0);
        s.update(false, true, &mut f, &st, "t");
        assert_eq!(count(&mut rd), 1);
        let mask = VFIO_IRQ_SET_DATA_BOOL | VFIO_IRQ_SET_ACTION_MASK;
        assert!(s
            .set_irqs(mask, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &[1], vec![])
            .is_ok());
        assert!(s.intx_masked());
        let disable = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_TRIGGER;
        assert!(s
            .set_irqs(disable, VFIO_PCI_INTX_IRQ_INDEX, 0, 0, &[], vec![])
            .is_ok());
        assert_eq!(s.mode(), Mode::None);
    }

    /// An INTx assertion the drop-irq fault swallowed: the client never
    /// saw it, so it will never UNMASK. The line must stay unmasked so
    /// that the next evaluation with the level high signals it.
    #[test]
    fn an_undelivered_intx_assertion_does_not_mask() {
        let mut s = IrqState::new();
        let (fd, mut rd) = eventfd();
        s.set_irqs(TRIGGER_FD, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &[], vec![fd])
            .unwrap();
        let mut f = Faults::default();
        let st = Stats::default();
        f.arm(crate::faults::FaultSpec::DropIrq(1));
        s.update(true, true, &mut f, &st, "t");
        assert_eq!(count(&mut rd), 0, "dropped");
        assert!(!s.intx_masked(), "masked with nothing delivered");
        s.update(true, true, &mut f, &st, "t");
        assert_eq!(count(&mut rd), 1, "the level is signalled next time");
        assert!(s.intx_masked());
    }

    #[test]
    fn hostile_set_irqs() {
        let mut s = IrqState::new();
        let both = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_DATA_BOOL | VFIO_IRQ_SET_ACTION_TRIGGER;
        assert_eq!(s.set_irqs(both, 0, 0, 1, &[], vec![]), Err(libc::EINVAL));
        assert_eq!(
            s.set_irqs(TRIGGER_FD, 9, 0, 1, &[], vec![]),
            Err(libc::EINVAL)
        );
        assert_eq!(
            s.set_irqs(TRIGGER_FD, VFIO_PCI_MSIX_IRQ_INDEX, 0, 99, &[], vec![]),
            Err(libc::EINVAL)
        );
        assert_eq!(
            s.set_irqs(
                TRIGGER_FD,
                VFIO_PCI_MSIX_IRQ_INDEX,
                u32::MAX,
                2,
                &[],
                vec![]
            ),
            Err(libc::EINVAL)
        );
        let (a, _ra) = eventfd();
        let (b, _rb) = eventfd();
        // Two fds for one vector.
        assert_eq!(
            s.set_irqs(TRIGGER_FD, VFIO_PCI_MSI_IRQ_INDEX, 0, 1, &[], vec![a, b]),
            Err(libc::EINVAL)
        );
        // MSI is not maskable.
        let mask = VFIO_IRQ_SET_DATA_NONE | VFIO_IRQ_SET_ACTION_MASK;
        assert_eq!(
            s.set_irqs(mask, VFIO_PCI_MSI_IRQ_INDEX, 0, 1, &[], vec![]),
            Err(libc::EINVAL)
        );
        // BOOL data shorter than count.
        let bool_trig = VFIO_IRQ_SET_DATA_BOOL | VFIO_IRQ_SET_ACTION_TRIGGER;
        assert_eq!(
            s.set_irqs(bool_trig, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &[], vec![]),
            Err(libc::EINVAL)
        );
        assert_eq!(
            s.set_irqs(bool_trig, VFIO_PCI_INTX_IRQ_INDEX, 0, 1, &[1], vec![]),
            Ok(SetIrqsEffect::Trigger(0, vec![0]))
        );
    }

    /// A descriptor that is not an eventfd is refused (vfio-pci does the
    /// same), and the slot keeps its previous eventfd.
    #[test]
    fn only_eventfds_are_accepted() {
        let mut s = IrqState::new();
        let (good, mut rd) = eventfd();
        s.set_irqs(TRIGGER_FD, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1, &[], vec![good])
            .unwrap();
        let (_r, w) = nix::unistd::pipe().unwrap();
        assert_eq!(
            s.set_irqs(TRIGGER_FD, VFIO_PCI_MSIX_IRQ_INDEX, 0, 1, &[], vec![w]),
            Err(libc::EINVAL)
        );
        let null = OwnedFd::from(File::open("/dev/null").unwrap());
        assert_eq!(
            s.set_irqs(TRIGGER_FD, VFIO_PCI_MSI_IRQ_INDEX, 0, 1, &[], vec![null]),
            Err(libc::EINVAL)
        );
        let st = Stats::default();
        s.update(true, true, &mut Faults::default(), &st, "t");
        assert_eq!(count(&mut rd), 1);
    }

    /// An eventfd passed in blocking mode, whose counter the client let
    /// reach its maximum: signalling must return at once (the event is
    /// already pending) instead of blocking under the device lock.
    #[test]
    fn a_full_blocking_eventfd_does_not_block() {
        use nix::sys::eventfd::{EfdFlags, EventFd as NixEventFd};
        let efd = NixEventFd::from_value_and_flags(0, EfdFlags::EFD_CLOEXEC).unwrap();
        let fd = OwnedFd::from(efd);
        // The largest value an eventfd holds is u64::MAX - 1.
        let mut w = File::from(fd.try_clone().unwrap());
        w.write_all(&(u64::MAX - 1).to_ne_bytes()).unwrap();
        let mut s = IrqState::new();
        s.set_irqs(TRIGGER_FD, VFIO_PCI_MSI_IRQ_INDEX, 0, 1, &[], vec![fd])
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let st = Stats::default();
            s.update(true, true, &mut Faults::default(), &st, "t");
            let _ = tx.send(st.interrupts.load(std::sync::atomic::Ordering::Relaxed));
        });
        let n = rx
            .recv_timeout(Duration::from_secs(5))
            .expect("signalling a full eventfd blocked");
        assert_eq!(n, 1, "a full counter counts as a delivered interrupt");
    }

    #[test]
    fn info_flags_like_vfio_pci() {
        assert_eq!(irq_count(VFIO_PCI_MSIX_IRQ_INDEX), MSIX_VECTORS);
        assert_ne!(
            irq_flags(VFIO_PCI_INTX_IRQ_INDEX) & VFIO_IRQ_INFO_AUTOMASKED,
            0
        );
        assert_ne!(
            irq_flags(VFIO_PCI_MSIX_IRQ_INDEX) & VFIO_IRQ_INFO_NORESIZE,
            0
        );
        assert_eq!(irq_count(7), 0);
    }
}
