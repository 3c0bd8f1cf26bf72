// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! The emulator keeps serving, and exits cleanly, when its stderr is gone
//! (the reader of the pipe exited, as when the script that launched it
//! died): a lost log line must not kill a thread or the process.

use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

/// A fresh directory for the sockets of one test.
fn scratch_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("plx-dma-emu-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_closed_stderr_neither_kills_a_channel_nor_the_process() {
    let dir = scratch_dir("stderr");
    let sock = dir.join("ch0.sock");
    let mut child = Command::new(env!("CARGO_BIN_EXE_plx-dma-emu"))
        .arg("--socket")
        .arg(&sock)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Nobody reads stderr from now on: every log line meets EPIPE.
    drop(child.stderr.take());
    let deadline = Instant::now() + Duration::from_secs(10);
    while !sock.exists() {
        assert!(Instant::now() < deadline, "the socket never appeared");
        assert!(child.try_wait().unwrap().is_none(), "the emulator died");
        std::thread::sleep(Duration::from_millis(10));
    }
    // Each connection logs on connect and on disconnect; the channel must
    // survive both to accept the next client.
    for _ in 0..2 {
        let c = UnixStream::connect(&sock).expect("the channel stopped accepting");
        drop(c);
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(child.try_wait().unwrap().is_none(), "the emulator died");
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the emulator did not exit on SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let _ = std::fs::remove_dir_all(&dir);
    assert!(status.success(), "exit status {status}");
}
