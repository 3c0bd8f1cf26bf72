// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Fault injection plan of one channel.
//!
//! Faults are armed from the command line (`--fault CH:NAME[=N]`) or at run
//! time from the control socket (`fault CH NAME [N]`). Counted faults fire
//! once, on the Nth matching event after they were armed (N = 1 is the very
//! next one), and then disarm themselves. `stall` and `busy` stay in force
//! until set to 0 or the plan is cleared, and `fail-read-all` until cleared: every
//! descriptor's source read fails, for clients that must see device errors
//! however often they run.

use std::fmt;

/// One fault, as parsed from the command line or the control socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultSpec {
    /// Fail the Nth descriptor's source read (RD_FAIL write-back).
    FailRead(u64),
    /// Fail the Nth descriptor's destination write (WR_FAIL write-back).
    FailWrite(u64),
    /// Treat the Nth descriptor as malformed (descriptor-invalid status).
    InvalidDesc(u64),
    /// Fail every descriptor's source read, until cleared.
    FailReadAll,
    /// Delay every descriptor by this many milliseconds (0 disables); a
    /// graceful pause or an abort ends the wait at once.
    Stall(u64),
    /// Keep every descriptor running for this many milliseconds (0
    /// disables), as a very long transfer would: a graceful pause waits
    /// for the descriptor to finish, only an abort cuts it short.
    Busy(u64),
    /// Suppress the Nth interrupt.
    DropIrq(u64),
    /// Send the Nth interrupt twice.
    DupIrq(u64),
    /// Signal an interrupt with no status behind it when the Nth
    /// descriptor starts (MSI and MSI-X only).
    SpuriousIrq(u64),
    /// The Nth descriptor never finishes on its own: only a pause, an
    /// abort or a reset ends it (without a write-back).
    Hang(u64),
    /// Close the client connection: now (0) or after the Nth descriptor.
    Vanish(u64),
    /// Disarm everything.
    Clear,
}

/// Names accepted by [`FaultSpec::parse`], for help texts.
pub const FAULT_NAMES: &str =
    "fail-read N | fail-read-all | fail-write N | invalid-desc N | stall MS | busy MS | hang N | drop-irq N | dup-irq N | spurious-irq N | vanish [N] | clear";

impl FaultSpec {
    /// Parses a fault name and its optional value.
    pub fn parse(name: &str, value: Option<&str>) -> Result<FaultSpec, String> {
        let num = |what: &str| -> Result<u64, String> {
            let v = value.ok_or_else(|| format!("{name} needs a value ({what})"))?;
            v.parse::<u64>()
                .map_err(|_| format!("{name}: '{v}' is not a number"))
        };
        let nth = || -> Result<u64, String> {
            let n = num("N >= 1")?;
            if n == 0 {
                return Err(format!("{name}: N counts from 1 (the next event)"));
            }
            Ok(n)
        };
        let spec = match name {
            "fail-read" => FaultSpec::FailRead(nth()?),
            "fail-read-all" => FaultSpec::FailReadAll,
            "fail-write" => FaultSpec::FailWrite(nth()?),
            "invalid-desc" => FaultSpec::InvalidDesc(nth()?),
            "stall" => FaultSpec::Stall(num("milliseconds")?),
            "busy" => FaultSpec::Busy(num("milliseconds")?),
            "drop-irq" => FaultSpec::DropIrq(nth()?),
            "dup-irq" => FaultSpec::DupIrq(nth()?),
            "spurious-irq" => FaultSpec::SpuriousIrq(nth()?),
            "hang" => FaultSpec::Hang(nth()?),
            "vanish" => match value {
                None => FaultSpec::Vanish(0),
                Some(_) => FaultSpec::Vanish(num("descriptors")?),
            },
            "clear" => FaultSpec::Clear,
            _ => return Err(format!("unknown fault '{name}' (known: {FAULT_NAMES})")),
        };
        Ok(spec)
    }

    /// Parses the command-line form `CHANNEL:NAME[=VALUE]`.
    pub fn parse_cli(s: &str) -> Result<(usize, FaultSpec), String> {
        let (ch, rest) = s
            .split_once(':')
            .ok_or_else(|| format!("fault '{s}': expected CHANNEL:NAME[=VALUE]"))?;
        let ch = ch
            .parse::<usize>()
            .map_err(|_| format!("fault '{s}': '{ch}' is not a channel number"))?;
        let (name, value) = match rest.split_once('=') {
            Some((n, v)) => (n, Some(v)),
            None => (rest, None),
        };
        Ok((ch, FaultSpec::parse(name, value)?))
    }
}

impl fmt::Display for FaultSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FaultSpec::FailRead(n) => write!(f, "fail-read {n}"),
            FaultSpec::FailReadAll => write!(f, "fail-read-all"),
            FaultSpec::FailWrite(n) => write!(f, "fail-write {n}"),
            FaultSpec::InvalidDesc(n) => write!(f, "invalid-desc {n}"),
            FaultSpec::Stall(ms) => write!(f, "stall {ms}"),
            FaultSpec::Busy(ms) => write!(f, "busy {ms}"),
            FaultSpec::DropIrq(n) => write!(f, "drop-irq {n}"),
            FaultSpec::DupIrq(n) => write!(f, "dup-irq {n}"),
            FaultSpec::SpuriousIrq(n) => write!(f, "spurious-irq {n}"),
            FaultSpec::Hang(n) => write!(f, "hang {n}"),
            FaultSpec::Vanish(0) => write!(f, "vanish"),
            FaultSpec::Vanish(n) => write!(f, "vanish {n}"),
            FaultSpec::Clear => write!(f, "clear"),
        }
    }
}

/// The armed faults of one channel.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Faults {
    fail_read: Option<u64>,
    fail_read_all: bool,
    fail_write: Option<u64>,
    invalid_desc: Option<u64>,
    stall_ms: u64,
    busy_ms: u64,
    drop_irq: Option<u64>,
    dup_irq: Option<u64>,
    spurious_irq: Option<u64>,
    hang: Option<u64>,
    vanish_after: Option<u64>,
}

/// Counts one event against a countdown; true when the fault fires.
fn tick(slot: &mut Option<u64>) -> bool {
    match slot {
        Some(n) if *n <= 1 => {
            *slot = None;
            true
        }
        Some(n) => {
            *n -= 1;
            false
        }
        None => false,
    }
}

impl Faults {
    /// Arms a fault. `Vanish(0)` is not stored: the caller acts on it at once.
    pub fn arm(&mut self, spec: FaultSpec) {
        match spec {
            FaultSpec::FailRead(n) => self.fail_read = Some(n),
            FaultSpec::FailReadAll => self.fail_read_all = true,
            FaultSpec::FailWrite(n) => self.fail_write = Some(n),
            FaultSpec::InvalidDesc(n) => self.invalid_desc = Some(n),
            FaultSpec::Stall(ms) => self.stall_ms = ms,
            FaultSpec::Busy(ms) => self.busy_ms = ms,
            FaultSpec::DropIrq(n) => self.drop_irq = Some(n),
            FaultSpec::DupIrq(n) => self.dup_irq = Some(n),
            FaultSpec::SpuriousIrq(n) => self.spurious_irq = Some(n),
            FaultSpec::Hang(n) => self.hang = Some(n),
            FaultSpec::Vanish(0) => {}
            FaultSpec::Vanish(n) => self.vanish_after = Some(n),
            FaultSpec::Clear => *self = Faults::default(),
        }
    }

    /// A descriptor's source read is starting: should it fail?
    pub fn take_fail_read(&mut self) -> bool {
        tick(&mut self.fail_read) || self.fail_read_all
    }

    /// A descriptor's destination write is starting: should it fail?
    pub fn take_fail_write(&mut self) -> bool {
        tick(&mut self.fail_write)
    }

    /// A VALID descriptor is about to execute: treat it as malformed?
    pub fn take_invalid_desc(&mut self) -> bool {
        tick(&mut self.invalid_desc)
    }

    /// An interrupt is about to be sent: drop it?
    pub fn take_drop_irq(&mut self) -> bool {
        tick(&mut self.drop_irq)
    }

    /// An interrupt is about to be sent: send it twice?
    pub fn take_dup_irq(&mut self) -> bool {
        tick(&mut self.dup_irq)
    }

    /// A descriptor is starting: signal a spurious interrupt?
    pub fn take_spurious_irq(&mut self) -> bool {
        tick(&mut self.spurious_irq)
    }

    /// A descriptor is starting: does it hang?
    pub fn take_hang(&mut self) -> bool {
        tick(&mut self.hang)
    }

    /// A descriptor completed: is it time to vanish?
    pub fn take_vanish(&mut self) -> bool {
        tick(&mut self.vanish_after)
    }

    /// Per-descriptor stall in milliseconds (0 = none).
    pub fn stall_ms(&self) -> u64 {
        self.stall_ms
    }

    /// Per-descriptor busy time in milliseconds (0 = none).
    pub fn busy_ms(&self) -> u64 {
        self.busy_ms
    }

    /// The armed faults, one `name=value` per line-ready string; "none"
    /// when nothing is armed.
    pub fn describe(&self) -> Vec<String> {
        let mut v = Vec::new();
        let mut push = |name: &str, slot: Option<u64>| {
            if let Some(n) = slot {
                v.push(format!("{name}={n}"));
            }
        };
        push("fail-read", self.fail_read);
        push("fail-write", self.fail_write);
        push("invalid-desc", self.invalid_desc);
        push("stall", (self.stall_ms != 0).then_some(self.stall_ms));
        push("busy", (self.busy_ms != 0).then_some(self.busy_ms));
        push("drop-irq", self.drop_irq);
        push("dup-irq", self.dup_irq);
        push("spurious-irq", self.spurious_irq);
        push("hang", self.hang);
        push("vanish", self.vanish_after);
        if self.fail_read_all {
            v.push("fail-read-all".to_string());
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_forms() {
        assert_eq!(
            FaultSpec::parse("fail-read", Some("3")),
            Ok(FaultSpec::FailRead(3))
        );
        assert_eq!(FaultSpec::parse("vanish", None), Ok(FaultSpec::Vanish(0)));
        assert_eq!(
            FaultSpec::parse("vanish", Some("5")),
            Ok(FaultSpec::Vanish(5))
        );
        assert_eq!(
            FaultSpec::parse("stall", Some("0")),
            Ok(FaultSpec::Stall(0))
        );
        assert!(FaultSpec::parse("fail-read", Some("0")).is_err());
        assert!(FaultSpec::parse("fail-read", None).is_err());
        assert!(FaultSpec::parse("fail-read", Some("x")).is_err());
        assert!(FaultSpec::parse("explode", None).is_err());
        assert_eq!(
            FaultSpec::parse_cli("1:dup-irq=2"),
            Ok((1, FaultSpec::DupIrq(2)))
        );
        assert_eq!(
            FaultSpec::parse_cli("0:vanish"),
            Ok((0, FaultSpec::Vanish(0)))
        );
        assert!(FaultSpec::parse_cli("fail-read=1").is_err());
        assert!(FaultSpec::parse_cli("a:fail-read=1").is_err());
    }

    #[test]
    fn countdown_fires_once_on_nth() {
        let mut f = Faults::default();
        f.arm(FaultSpec::FailRead(3));
        assert!(!f.take_fail_read());
        assert!(!f.take_fail_read());
        assert!(f.take_fail_read());
        assert!(!f.take_fail_read());
        assert!(f.describe().is_empty());
    }

    #[test]
    fn fail_read_all_persists_until_cleared() {
        let mut f = Faults::default();
        assert_eq!(
            FaultSpec::parse_cli("2:fail-read-all"),
            Ok((2, FaultSpec::FailReadAll))
        );
        f.arm(FaultSpec::FailReadAll);
        for _ in 0..5 {
            assert!(f.take_fail_read());
        }
        assert_eq!(f.describe(), vec!["fail-read-all"]);
        f.arm(FaultSpec::Clear);
        assert!(!f.take_fail_read());
    }

    #[test]
    fn stall_persists_and_clear_disarms() {
        let mut f = Faults::default();
        f.arm(FaultSpec::Stall(20));
        f.arm(FaultSpec::DropIrq(1));
        f.arm(FaultSpec::Busy(30));
        assert_eq!(f.stall_ms(), 20);
        assert_eq!(f.busy_ms(), 30);
        assert_eq!(f.describe(), vec!["stall=20", "busy=30", "drop-irq=1"]);
        f.arm(FaultSpec::Clear);
        assert_eq!(f, Faults::default());
    }

    #[test]
    fn display_roundtrips() {
        for s in [
            FaultSpec::FailWrite(2),
            FaultSpec::Vanish(0),
            FaultSpec::Vanish(4),
            FaultSpec::Stall(7),
            FaultSpec::Busy(9),
            FaultSpec::SpuriousIrq(2),
            FaultSpec::Hang(3),
        ] {
            let text = s.to_string();
            let mut it = text.split_whitespace();
            let name = it.next().unwrap();
            assert_eq!(FaultSpec::parse(name, it.next()), Ok(s));
        }
    }
}
