// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The control socket: a line protocol for counters and fault injection
//! while the emulator runs.
//!
//! One command per line; the answer is zero or more data lines followed by
//! exactly one status line starting with `ok` or `error`. Commands:
//!
//! ```text
//! help                      list the commands
//! channels                  one line per channel: socket, connection state
//! stats [CH]                counters as key=value (keys prefixed chN. without CH)
//! reset-stats [CH]          zero the counters
//! fault CH NAME [N]         arm a fault (see FAULT_NAMES)
//! faults [CH]               show armed faults
//! reset CH                  function reset of a channel
//! log-level LEVEL           error, warn, info or debug (debug logs every descriptor)
//! ```
//!
//! `plx-dma-emu ctl --control PATH CMD...` is the bundled client.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::device::Device;
use crate::faults::{FaultSpec, FAULT_NAMES};
use crate::log::Level;

/// Longest accepted command line.
const MAX_LINE: usize = 4096;

/// The channels the control socket can reach.
pub struct Registry {
    /// Devices, by channel index.
    pub devices: Vec<Arc<Device>>,
    /// Their socket paths.
    pub sockets: Vec<PathBuf>,
}

const HELP: &[&str] = &[
    "help",
    "channels",
    "stats [CH]",
    "reset-stats [CH]",
    "fault CH NAME [N]   NAME: see below",
    "faults [CH]",
    "reset CH",
    "log-level LEVEL     error, warn, info or debug (debug: every descriptor)",
];

impl Registry {
    fn channel(&self, s: Option<&str>) -> Result<Option<usize>, String> {
        match s {
            None => Ok(None),
            Some(s) => {
                let ch: usize = s
                    .parse()
                    .map_err(|_| format!("'{s}' is not a channel number"))?;
                if ch >= self.devices.len() {
                    return Err(format!("no channel {ch} (have {})", self.devices.len()));
                }
                Ok(Some(ch))
            }
        }
    }

    fn selected(&self, ch: Option<usize>) -> Vec<usize> {
        match ch {
            Some(c) => vec![c],
            None => (0..self.devices.len()).collect(),
        }
    }

    /// Executes one command line and returns the full answer (data lines
    /// and the final status line, each ending in a newline).
    pub fn execute(&self, line: &str) -> String {
        match self.run(line) {
            Ok(mut lines) => {
                let status = lines.pop().unwrap_or_else(|| "ok".into());
                let mut out = String::new();
                for l in lines {
                    out.push_str(&l);
                    out.push('\n');
                }
                out.push_str(&status);
                out.push('\n');
                out
            }
            Err(e) => format!("error {e}\n"),
        }
    }

    /// Returns data lines followed by the status line.
    fn run(&self, line: &str) -> Result<Vec<String>, String> {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some((&verb, args)) = words.split_first() else {
            return Err("empty command (try 'help')".into());
        };
        let nargs = |lo: usize, hi: usize| -> Result<(), String> {
            if args.len() < lo || args.len() > hi {
                Err(format!(
                    "wrong number of arguments for '{verb}' (try 'help')"
                ))
            } else {
                Ok(())
            }
        };
        match verb {
            "help" => {
                let mut v: Vec<String> = HELP.iter().map(|s| s.to_string()).collect();
                v.push(format!("fault names: {FAULT_NAMES}"));
                v.push("ok".into());
                Ok(v)
            }
            "channels" => {
                nargs(0, 0)?;
                let mut v: Vec<String> = self
                    .devices
                    .iter()
                    .enumerate()
                    .map(|(i, d)| {
                        format!(
                            "ch{i} socket={} connected={}",
                            self.sockets
                                .get(i)
                                .map(|p| p.display().to_string())
                                .unwrap_or_default(),
                            d.connected() as u8
                        )
                    })
                    .collect();
                v.push(format!("ok {} channels", self.devices.len()));
                Ok(v)
            }
            "stats" => {
                nargs(0, 1)?;
                let ch = self.channel(args.first().copied())?;
                let mut v = Vec::new();
                for i in self.selected(ch) {
                    let prefix = if ch.is_some() {
                        String::new()
                    } else {
                        format!("ch{i}.")
                    };
                    v.extend(
                        stats_lines(&self.devices[i])
                            .into_iter()
                            .map(|l| format!("{prefix}{l}")),
                    );
                }
                v.push("ok".into());
                Ok(v)
            }
            "reset-stats" => {
                nargs(0, 1)?;
                let ch = self.channel(args.first().copied())?;
                for i in self.selected(ch) {
                    self.devices[i].stats.reset();
                }
                Ok(vec!["ok counters zeroed".into()])
            }
            "fault" => {
                nargs(2, 3)?;
                let ch = self.channel(Some(args[0]))?.unwrap_or(0);
                let spec = FaultSpec::parse(args[1], args.get(2).copied())?;
                self.devices[ch].arm_fault(spec)?;
                Ok(vec![format!("ok ch{ch} {spec}")])
            }
            "faults" => {
                nargs(0, 1)?;
                let ch = self.channel(args.first().copied())?;
                let mut v = Vec::new();
                for i in self.selected(ch) {
                    let f = self.devices[i].faults();
                    let text = if f.is_empty() {
                        "none".to_string()
                    } else {
                        f.join(" ")
                    };
                    v.push(format!("ch{i} faults={text}"));
                }
                v.push("ok".into());
                Ok(v)
            }
            "reset" => {
                nargs(1, 1)?;
                let ch = self.channel(Some(args[0]))?.unwrap_or(0);
                self.devices[ch].reset("control socket");
                Ok(vec![format!("ok ch{ch} reset")])
            }
            "log-level" => {
                nargs(1, 1)?;
                let level = crate::log::Level::parse(args[0])
                    .ok_or_else(|| format!("unknown log level '{}'", args[0]))?;
                crate::log::set_level(level);
                Ok(vec![format!("ok log level {}", args[0])])
            }
            _ => Err(format!(
                "unknown command '{verb}' (faults: {FAULT_NAMES}; try 'help')"
            )),
        }
    }
}

/// `key=value` lines for one channel: state first, then every counter.
pub fn stats_lines(d: &Device) -> Vec<String> {
    let (enabled, index, in_progress) = d.engine_summary();
    let mut v = vec![
        format!("connected={}", d.connected() as u8),
        format!("engine_enabled={}", enabled as u8),
        format!("engine_in_progress={}", in_progress as u8),
        format!("ring_index={index}"),
    ];
    v.extend(
        d.stats
            .snapshot()
            .into_iter()
            .map(|(k, n)| format!("{k}={n}")),
    );
    v
}

/// Serves the control socket forever, one thread per client.
pub fn serve(listener: UnixListener, reg: Arc<Registry>) {
    for stream in listener.incoming() {
        match stream {
            Ok(s) => {
                let reg = reg.clone();
                let _ = std::thread::Builder::new()
                    .name("plx-control".into())
                    .spawn(move || {
                        if let Err(e) = client(s, &reg) {
                            crate::log!(Level::Debug, "control", "client ended: {e}");
                        }
                    });
            }
            Err(e) => {
                crate::log!(Level::Warn, "control", "accept failed: {e}");
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
}

fn client(s: UnixStream, reg: &Registry) -> io::Result<()> {
    let mut out = s.try_clone()?;
    let mut input = BufReader::new(s);
    let mut line = String::new();
    loop {
        line.clear();
        let n = (&mut input)
            .take(MAX_LINE as u64 + 1)
            .read_line(&mut line)?;
        if n == 0 {
            return Ok(());
        }
        if line.len() > MAX_LINE {
            out.write_all(b"error line too long\n")?;
            return Ok(());
        }
        if line.trim().is_empty() {
            continue;
        }
        crate::log!(Level::Debug, "control", "command: {}", line.trim());
        out.write_all(reg.execute(line.trim()).as_bytes())?;
        out.flush()?;
    }
}

/// The `ctl` client: sends one command, prints the answer, and returns
/// whether the status line was `ok`.
pub fn ctl(path: &Path, command: &str) -> io::Result<bool> {
    let s = UnixStream::connect(path)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut w = s.try_clone()?;
    writeln!(w, "{command}")?;
    let stdout = io::stdout();
    let mut stdout = stdout.lock();
    for line in BufReader::new(s).lines() {
        let line = line?;
        writeln!(stdout, "{line}")?;
        if line == "ok" || line.starts_with("ok ") {
            return Ok(true);
        }
        // Data lines are key=value ("errors=3"), so match the status word
        // exactly.
        if line == "error" || line.starts_with("error ") {
            return Ok(false);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        "control socket closed without a status line",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(n: usize) -> Registry {
        Registry {
            devices: (0..n).map(|i| Device::new(&format!("ch{i}"))).collect(),
            sockets: (0..n)
                .map(|i| PathBuf::from(format!("/tmp/ch{i}.sock")))
                .collect(),
        }
    }

    #[test]
    fn stats_lines_and_prefixes() {
        let r = reg(2);
        crate::stats::add(&r.devices[1].stats.bytes, 42);
        let one = r.execute("stats 1");
        assert!(one.lines().any(|l| l == "bytes=42"));
        assert!(one.ends_with("ok\n"));
        let all = r.execute("stats");
        assert!(all.lines().any(|l| l == "ch1.bytes=42"));
        assert!(all.lines().any(|l| l == "ch0.bytes=0"));
        assert_eq!(r.execute("reset-stats 1"), "ok counters zeroed\n");
        assert!(r.execute("stats 1").lines().any(|l| l == "bytes=0"));
    }

    #[test]
    fn faults_and_errors() {
        let r = reg(1);
        assert_eq!(r.execute("fault 0 fail-read 2"), "ok ch0 fail-read 2\n");
        assert_eq!(r.execute("fault 0 stall 5"), "ok ch0 stall 5\n");
        assert_eq!(
            r.execute("faults 0"),
            "ch0 faults=fail-read=2 stall=5\nok\n"
        );
        assert_eq!(r.execute("fault 0 clear"), "ok ch0 clear\n");
        assert_eq!(r.execute("faults"), "ch0 faults=none\nok\n");
        assert!(r
            .execute("fault 0 vanish")
            .starts_with("error no client connected"));
        assert!(r
            .execute("fault 5 fail-read 1")
            .starts_with("error no channel 5"));
        assert!(r.execute("fault 0 fail-read 0").starts_with("error"));
        assert!(r
            .execute("fault 0 boom 1")
            .starts_with("error unknown fault"));
        assert!(r.execute("frobnicate").starts_with("error unknown command"));
        assert!(r.execute("").starts_with("error empty"));
        assert!(r.execute("stats 0 1").starts_with("error wrong number"));
        assert!(r.execute("help").ends_with("ok\n"));
        assert!(r
            .execute("channels")
            .contains("ch0 socket=/tmp/ch0.sock connected=0"));
        assert_eq!(r.execute("reset 0"), "ok ch0 reset\n");
        assert!(r
            .execute("log-level loud")
            .starts_with("error unknown log level"));
        assert_eq!(r.execute("log-level info"), "ok log level info\n");
    }

    #[test]
    fn socket_roundtrip() {
        let dir = std::env::temp_dir().join(format!("plx-ctl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ctl.sock");
        let _ = std::fs::remove_file(&path);
        let l = UnixListener::bind(&path).unwrap();
        let r = Arc::new(reg(1));
        std::thread::spawn(move || serve(l, r));
        let s = UnixStream::connect(&path).unwrap();
        let mut w = s.try_clone().unwrap();
        w.write_all(b"\nfault 0 drop-irq 3\nstats 0\n").unwrap();
        let mut lines = BufReader::new(s).lines();
        assert_eq!(lines.next().unwrap().unwrap(), "ok ch0 drop-irq 3");
        let mut saw_ok = false;
        for l in lines.by_ref() {
            let l = l.unwrap();
            if l == "ok" {
                saw_ok = true;
                break;
            }
            assert!(l.contains('='), "{l}");
        }
        assert!(saw_ok);
        assert!(ctl(&path, "faults 0").unwrap());
        assert!(!ctl(&path, "nonsense").unwrap());
        // "errors=..." is a data line, not an error status.
        assert!(ctl(&path, "stats 0").unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
