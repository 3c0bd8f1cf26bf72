// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Command line of plx-dma-emu.
//!
//! ```text
//! plx-dma-emu --socket PATH [--socket PATH ...] [--control PATH] [--mapped]
//!             [--fault CHANNEL:SPEC ...] [--log-level info]
//! plx-dma-emu ctl --control PATH CMD...
//! plx-dma-emu bench-host [--seconds S]
//! plx-dma-emu bench-engines [--seconds S] [--sizes B,B...]
//! ```
//!
//! Each `--socket` is one channel (one PCI function), numbered in the order
//! given. All sockets exist before the first client is accepted. SIGTERM
//! and SIGINT end the process with status 0 after removing the sockets.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Parser, Subcommand};
use nix::sys::signal::{SigSet, Signal};

use plx_dma_emu::control::{self, Registry};
use plx_dma_emu::device::Device;
use plx_dma_emu::faults::FaultSpec;
use plx_dma_emu::log::{self as elog, Level};
use plx_dma_emu::server::{self, ServerOptions};
use plx_dma_emu::{bench, bench_engines, log};

#[derive(Parser, Debug)]
#[command(
    name = "plx-dma-emu",
    version,
    about = "Emulated PLX-style PCIe memcpy DMA engine, served to QEMU as vfio-user devices",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    cmd: Option<Cmd>,

    /// vfio-user socket of one channel (repeat for more channels).
    #[arg(long = "socket", value_name = "PATH")]
    sockets: Vec<PathBuf>,

    /// Control socket for counters and run-time fault injection.
    #[arg(long, value_name = "PATH")]
    control: Option<PathBuf>,

    /// Access guest memory directly through the shared DMA_MAP windows
    /// (faster); accesses outside them still use DMA_READ/DMA_WRITE
    /// messages, so the guest IOMMU sees and faults them.
    #[arg(long)]
    mapped: bool,

    /// Arm a fault at start: CHANNEL:NAME[=VALUE], e.g. 0:fail-read=3.
    #[arg(long = "fault", value_name = "CHANNEL:SPEC")]
    faults: Vec<String>,

    /// error, warn, info or debug.
    #[arg(long, default_value = "info", value_name = "LEVEL")]
    log_level: String,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Send one command to a running emulator's control socket.
    Ctl {
        /// The control socket.
        #[arg(long, value_name = "PATH")]
        control: PathBuf,
        /// The command, e.g. `stats 0` or `fault 0 fail-read 1`.
        #[arg(required = true, trailing_var_arg = true, allow_hyphen_values = true)]
        command: Vec<String>,
    },
    /// Measure copy bandwidth of the engine on this host against memcpy.
    BenchHost {
        /// Time budget per measurement.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Transfer sizes in bytes.
        #[arg(long, value_delimiter = ',', default_values_t = [4096usize, 1 << 20])]
        sizes: Vec<usize>,
    },
    /// Measure how two engines copying at once scale over one on this host.
    BenchEngines {
        /// Time budget per measurement.
        #[arg(long, default_value_t = 1.0)]
        seconds: f64,
        /// Transfer sizes in bytes.
        #[arg(long, value_delimiter = ',', default_values_t = [65536usize, 1 << 20])]
        sizes: Vec<usize>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.cmd {
        Some(Cmd::Ctl { control, command }) => match control::ctl(&control, &command.join(" ")) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::from(1),
            Err(e) => {
                plx_dma_emu::stderr_line!("plx-dma-emu ctl: {}: {e}", control.display());
                ExitCode::from(2)
            }
        },
        Some(Cmd::BenchHost { seconds, sizes }) => {
            let budget = Duration::from_secs_f64(seconds.max(0.01));
            if !valid_sizes(&sizes) {
                return ExitCode::from(2);
            }
            match bench::run(&sizes, budget) {
                Ok(r) => {
                    print!("{}", bench::table(&r));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    plx_dma_emu::stderr_line!("plx-dma-emu bench-host: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Some(Cmd::BenchEngines { seconds, sizes }) => {
            if !valid_sizes(&sizes) {
                return ExitCode::from(2);
            }
            match bench_engines::run_all(&sizes, Duration::from_secs_f64(seconds.max(0.01))) {
                Ok(r) => {
                    print!("{}", bench_engines::lines(&r));
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    plx_dma_emu::stderr_line!("plx-dma-emu bench-engines: {e}");
                    ExitCode::from(1)
                }
            }
        }
        None => serve(cli),
    }
}

/// Whether every benchmark size is one descriptor can copy; says why not.
fn valid_sizes(sizes: &[usize]) -> bool {
    let max = plx_dma_emu::desc::MAX_SIZE as usize;
    let ok = sizes.iter().all(|&s| s > 0 && s <= max);
    if !ok {
        plx_dma_emu::stderr_line!("plx-dma-emu: sizes must be 1..={max}");
    }
    ok
}

fn serve(cli: Cli) -> ExitCode {
    let Some(level) = Level::parse(&cli.log_level) else {
        plx_dma_emu::stderr_line!("plx-dma-emu: unknown log level '{}'", cli.log_level);
        return ExitCode::from(2);
    };
    elog::set_level(level);
    if cli.sockets.is_empty() {
        plx_dma_emu::stderr_line!(
            "plx-dma-emu: at least one --socket PATH is required (see --help)"
        );
        return ExitCode::from(2);
    }

    let devices: Vec<Arc<Device>> = (0..cli.sockets.len())
        .map(|i| Device::new(&format!("ch{i}")))
        .collect();
    for f in &cli.faults {
        let (ch, spec) = match FaultSpec::parse_cli(f) {
            Ok(x) => x,
            Err(e) => {
                plx_dma_emu::stderr_line!("plx-dma-emu: --fault {e}");
                return ExitCode::from(2);
            }
        };
        let Some(dev) = devices.get(ch) else {
            plx_dma_emu::stderr_line!("plx-dma-emu: --fault {f}: no channel {ch}");
            return ExitCode::from(2);
        };
        if spec == FaultSpec::Vanish(0) {
            plx_dma_emu::stderr_line!(
                "plx-dma-emu: --fault {f}: use vanish=N (after N descriptors) on the command line"
            );
            return ExitCode::from(2);
        }
        if let Err(e) = dev.arm_fault(spec) {
            plx_dma_emu::stderr_line!("plx-dma-emu: --fault {f}: {e}");
            return ExitCode::from(2);
        }
    }

    // Block the termination signals in every thread (they inherit the mask)
    // and take them synchronously in main: no async-signal-safety concerns.
    let mut sigs = SigSet::empty();
    sigs.add(Signal::SIGTERM);
    sigs.add(Signal::SIGINT);
    sigs.add(Signal::SIGHUP);
    if let Err(e) = sigs.thread_block() {
        plx_dma_emu::stderr_line!("plx-dma-emu: cannot block signals: {e}");
        return ExitCode::from(1);
    }

    // Create every socket before serving any: launchers wait for the files.
    let mut listeners = Vec::new();
    for path in &cli.sockets {
        match server::bind(path) {
            Ok(l) => listeners.push(l),
            Err(e) => {
                plx_dma_emu::stderr_line!("plx-dma-emu: cannot listen on {}: {e}", path.display());
                cleanup(&cli.sockets, cli.control.as_ref());
                return ExitCode::from(1);
            }
        }
    }
    let control_listener = match &cli.control {
        Some(p) => match server::bind(p) {
            Ok(l) => Some(l),
            Err(e) => {
                plx_dma_emu::stderr_line!("plx-dma-emu: cannot listen on {}: {e}", p.display());
                cleanup(&cli.sockets, cli.control.as_ref());
                return ExitCode::from(1);
            }
        },
        None => None,
    };

    let opts = ServerOptions { mapped: cli.mapped };
    for (i, (dev, l)) in devices.iter().zip(listeners).enumerate() {
        plx_dma_emu::log!(
            Level::Info,
            dev.name(),
            "listening on {} ({} path)",
            cli.sockets[i].display(),
            opts.path_name()
        );
        let dev = dev.clone();
        let spawned = std::thread::Builder::new()
            .name(format!("plx-ch{i}"))
            .spawn(move || server::run_channel(dev, l, opts));
        if let Err(e) = spawned {
            plx_dma_emu::stderr_line!("plx-dma-emu: cannot start a channel thread: {e}");
            cleanup(&cli.sockets, cli.control.as_ref());
            return ExitCode::from(1);
        }
    }
    if let (Some(l), Some(p)) = (control_listener, &cli.control) {
        log!(Level::Info, "control", "listening on {}", p.display());
        let reg = Arc::new(Registry {
            devices: devices.clone(),
            sockets: cli.sockets.clone(),
        });
        let spawned = std::thread::Builder::new()
            .name("plx-control".into())
            .spawn(move || control::serve(l, reg));
        if let Err(e) = spawned {
            plx_dma_emu::stderr_line!("plx-dma-emu: cannot start the control thread: {e}");
            cleanup(&cli.sockets, cli.control.as_ref());
            return ExitCode::from(1);
        }
    }

    let sig = loop {
        match sigs.wait() {
            Ok(s) => break s,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                log!(Level::Error, "", "sigwait failed: {e}");
                break Signal::SIGTERM;
            }
        }
    };
    log!(Level::Info, "", "{sig:?} received, shutting down");
    for d in &devices {
        // Closing the connections lets QEMU see a clean EOF rather than a
        // socket vanishing with the process.
        d.disconnect();
    }
    // Give each channel thread a moment to stop its engine, so that the
    // summary below holds final counters.
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    while devices.iter().any(|d| d.connected()) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    for d in &devices {
        // Unconditional, whatever the log level: host scripts parse these.
        plx_dma_emu::stderr_line!(
            "{}",
            d.stats.summary_line(d.name(), opts.path_name(), "exit")
        );
    }
    cleanup(&cli.sockets, cli.control.as_ref());
    ExitCode::SUCCESS
}

fn cleanup(sockets: &[PathBuf], control: Option<&PathBuf>) {
    for p in sockets.iter().chain(control) {
        if std::fs::symlink_metadata(p).is_ok_and(|m| {
            use std::os::unix::fs::FileTypeExt;
            m.file_type().is_socket()
        }) {
            let _ = std::fs::remove_file(p);
        }
    }
}
