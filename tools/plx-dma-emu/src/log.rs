// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! A tiny stderr logger: one line per notable event.
//!
//! Lines look like `plx-dma-emu: ch0: warn: descriptor 5 ...`. The level is a
//! process-wide atomic so that every thread can check it without locking.
//! A hand-written logger keeps the dependency list short; the emulator only
//! ever needs "print one line to stderr if the level allows it".

use std::fmt;
use std::io::Write;
use std::sync::atomic::{AtomicU8, Ordering};

/// Severity of a log line; lower is more severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Something failed that the operator must know about.
    Error = 0,
    /// Hostile or unexpected guest/client behaviour, handled.
    Warn = 1,
    /// Lifecycle events: connections, resets, faults armed.
    Info = 2,
    /// Per-message and per-descriptor tracing.
    Debug = 3,
}

impl Level {
    /// Parses `error`, `warn`, `info` or `debug` (also `trace` as debug).
    pub fn parse(s: &str) -> Option<Level> {
        match s.to_ascii_lowercase().as_str() {
            "error" => Some(Level::Error),
            "warn" | "warning" => Some(Level::Warn),
            "info" => Some(Level::Info),
            "debug" | "trace" => Some(Level::Debug),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        }
    }
}

static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Sets the process-wide log level.
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

/// Returns true if a line at `level` would be printed.
pub fn enabled(level: Level) -> bool {
    level as u8 <= LEVEL.load(Ordering::Relaxed)
}

/// Prints one line. Use the [`log!`](crate::log!) macro rather than calling
/// this directly so that formatting is skipped when the level is off.
pub fn write_line(level: Level, who: &str, args: fmt::Arguments<'_>) {
    if who.is_empty() {
        print_line(format_args!("plx-dma-emu: {}: {}", level.name(), args));
    } else {
        print_line(format_args!(
            "plx-dma-emu: {}: {}: {}",
            who,
            level.name(),
            args
        ));
    }
}

/// Writes one line to stderr, whatever the level, and ignores failure.
///
/// `eprintln!` panics when stderr is gone (EPIPE once the reader of a
/// pipe exited, as when the launching script died): the panic would take
/// down the thread that merely wanted to log, in the middle of its work.
/// A lost log line is the lesser harm. The line is formatted first and
/// written with one call under the stderr lock, so lines from different
/// threads never interleave.
pub fn print_line(args: fmt::Arguments<'_>) {
    let line = format!("{args}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `stderr_line!("text {}", x)`: one line on stderr, never panicking (see
/// [`print_line`]).
#[macro_export]
macro_rules! stderr_line {
    ($($arg:tt)*) => {
        $crate::log::print_line(format_args!($($arg)*))
    };
}

/// `log!(Level::Info, "ch0", "text {}", x)` prints one line if enabled.
#[macro_export]
macro_rules! log {
    ($lvl:expr, $who:expr, $($arg:tt)*) => {
        if $crate::log::enabled($lvl) {
            $crate::log::write_line($lvl, $who, format_args!($($arg)*));
        }
    };
}

/// Limits how often a class of guest-triggered warning is printed.
///
/// A hostile guest can hit the same error path millions of times per
/// second; the first few occurrences are logged in full, then only every
/// 1000th, so the log stays readable and the emulator stays fast.
#[derive(Debug, Default)]
pub struct RateLimit {
    count: u64,
}

impl RateLimit {
    /// Number of occurrences logged before thinning starts.
    pub const BURST: u64 = 50;

    /// Counts one occurrence and says whether it should be logged.
    pub fn allow(&mut self) -> bool {
        self.count += 1;
        self.count <= Self::BURST || self.count % 1000 == 0
    }

    /// Resets the counter (e.g. on device reset).
    pub fn reset(&mut self) {
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_levels() {
        assert_eq!(Level::parse("INFO"), Some(Level::Info));
        assert_eq!(Level::parse("trace"), Some(Level::Debug));
        assert_eq!(Level::parse("loud"), None);
    }

    #[test]
    fn rate_limit_thins_after_burst() {
        let mut r = RateLimit::default();
        let allowed = (0..5000).filter(|_| r.allow()).count() as u64;
        // 50 in the burst, then 1000, 2000, 3000, 4000, 5000.
        assert_eq!(allowed, RateLimit::BURST + 5);
    }
}
