// SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
//! Fuzz target: the `--mapped` path against a model of memory.
//!
//! The input is a program of DMA_MAP, DMA_UNMAP, reads, writes and copies
//! over a 128 KiB IOVA space. Windows are backed by two sealed memfds
//! (really mapped, through `sys.rs`), by an unsealed memfd (never mapped;
//! the program may shrink it under the window to try for a SIGBUS) or by
//! nothing. Whatever no window serves directly goes to the fallback, the
//! message path, played here by a `VecMemory` covering the whole space.
//!
//! The model keeps, for every 128-byte unit of IOVA space, the window the
//! client mapped there (file, file offset, rights), and the contents of
//! both sealed files and of the fallback. Every read must return what the
//! model says; every write and copy must land exactly where the model
//! says, which the end of each run checks byte for byte against the real
//! files. Copies whose source and destination share memory (overlapping
//! IOVAs, or two windows over the same file bytes) have no defined result
//! (see "Overlapping copies" on the spec page): the model then takes the
//! destination from memory, and only the rest is checked.

#![no_main]

#[path = "common/input.rs"]
mod input;

use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::fs::FileExt;
use std::sync::{Arc, RwLock};

use input::Input;
use libfuzzer_sys::fuzz_target;
use nix::fcntl::{fcntl, FcntlArg, SealFlag};
use nix::sys::memfd::{memfd_create, MFdFlags};
use plx_dma_emu::dma_map::{DmaMapTable, MapError, MappedMemory};
use plx_dma_emu::log::{set_level, Level};
use plx_dma_emu::memory::{GuestMemory, VecMemory};
use plx_dma_emu::stats::Stats;
use vfio_bindings::bindings::vfio::{VFIO_DMA_MAP_FLAG_READ, VFIO_DMA_MAP_FLAG_WRITE};

/// IOVA space of the program (twice the streaming-copy threshold, so a
/// copy can take the streaming path).
const SPACE: u64 = 0x2_0000;
/// Granule of windows and file offsets in the model.
const UNIT: u64 = 0x80;
const UNITS: usize = (SPACE / UNIT) as usize;
/// Size of every backing file.
const FILE_LEN: u64 = 0x2_0000;

/// Where a byte of IOVA space lives.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
enum Loc {
    /// Sealed file `0` or `1`, at this offset.
    File(usize, u64),
    /// The fallback (message path), at this IOVA.
    Fallback(u64),
}

/// The window over one unit, as the model sees it.
#[derive(Clone, Copy, Debug)]
struct Win {
    /// Sealed file served directly, or `None` (no descriptor, or one the
    /// emulator must not map): then the fallback serves it.
    file: Option<usize>,
    /// File offset of the unit's first byte.
    off: u64,
    read: bool,
    write: bool,
}

struct Model {
    units: Vec<Option<Win>>,
    files: [Vec<u8>; 2],
    fallback: Vec<u8>,
}

impl Model {
    fn loc(&self, iova: u64, write: bool) -> Loc {
        match self.units[(iova / UNIT) as usize] {
            Some(Win {
                file: Some(f),
                off,
                read,
                write: w,
            }) if (write && w) || (!write && read) => Loc::File(f, off + iova % UNIT),
            _ => Loc::Fallback(iova),
        }
    }
    fn get(&self, l: Loc) -> u8 {
        match l {
            Loc::File(f, o) => self.files[f][o as usize],
            Loc::Fallback(a) => self.fallback[a as usize],
        }
    }
    fn set(&mut self, l: Loc, v: u8) {
        match l {
            Loc::File(f, o) => self.files[f][o as usize] = v,
            Loc::Fallback(a) => self.fallback[a as usize] = v,
        }
    }
}

fn memfd(sealed: bool, seed: u8) -> File {
    let fd = memfd_create(
        "plx-fuzz",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )
    .expect("memfd_create");
    let f = File::from(fd);
    let bytes: Vec<u8> = (0..FILE_LEN)
        .map(|i| (i as u8).wrapping_mul(seed))
        .collect();
    f.write_all_at(&bytes, 0).expect("fill");
    if sealed {
        let seals = SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW;
        fcntl(&f, FcntlArg::F_ADD_SEALS(seals)).expect("seal");
    }
    f
}

fn dup(f: &File) -> OwnedFd {
    OwnedFd::from(f.try_clone().expect("dup"))
}

/// An access inside the space: start and length (possibly 0).
fn range(input: &mut Input<'_>) -> (u64, usize) {
    let at = u64::from(input.u32()) % SPACE;
    let sel = input.u8();
    let max = SPACE - at;
    let len = match sel % 4 {
        0 => u64::from(sel >> 2),
        1 | 2 => u64::from(input.u16()),
        _ => u64::from(input.u32()),
    } % (max + 1);
    (at, len as usize)
}

fn snapshot(files: &[File; 2], fallback: &VecMemory) -> ([Vec<u8>; 2], Vec<u8>) {
    let read = |f: &File| {
        let mut v = vec![0u8; FILE_LEN as usize];
        f.read_exact_at(&mut v, 0).expect("read back");
        v
    };
    let mut fb = vec![0u8; SPACE as usize];
    fallback
        .read(0, &mut fb)
        .expect("fallback covers the space");
    ([read(&files[0]), read(&files[1])], fb)
}

fuzz_target!(|data: &[u8]| {
    set_level(Level::Error);
    let files = [memfd(true, 7), memfd(true, 13)];
    let unsealed = memfd(false, 3);
    let fallback = Arc::new(VecMemory::new());
    fallback.add_region(0, SPACE as usize);
    let init: Vec<u8> = (0..SPACE)
        .map(|i| (i as u8).wrapping_mul(5) ^ 0x5A)
        .collect();
    fallback.write(0, &init).unwrap();
    let (contents, fb) = snapshot(&files, &fallback);
    let mut model = Model {
        units: vec![None; UNITS],
        files: contents,
        fallback: fb,
    };
    let table = Arc::new(RwLock::new(DmaMapTable::new()));
    let mem = MappedMemory::new(table.clone(), fallback.clone(), Arc::new(Stats::default()));
    let mut scratch = Vec::new();
    let mut input = Input(data);
    let mut ops = 0;
    while !input.is_empty() && ops < 64 {
        ops += 1;
        let op = input.u8();
        match op % 7 {
            // DMA_MAP.
            0 => {
                let first = usize::from(input.u16()) % UNITS;
                let n = (usize::from(input.u8()) + 1).min(UNITS - first);
                let off = u64::from(input.u16()) % (FILE_LEN / UNIT + 8) * UNIT;
                let flags = u32::from(op >> 3) & (VFIO_DMA_MAP_FLAG_READ | VFIO_DMA_MAP_FLAG_WRITE);
                let (fd, file, sealed) = match (op >> 5) % 5 {
                    0 => (None, None, false),
                    1 => (Some(dup(&files[0])), Some(0), true),
                    2 => (Some(dup(&files[1])), Some(1), true),
                    3 => (Some(dup(&unsealed)), None, false),
                    _ => (Some(dup(&files[0])), Some(0), true),
                };
                let size = n as u64 * UNIT;
                let r = table
                    .write()
                    .unwrap()
                    .map(first as u64 * UNIT, size, off, flags, fd, true);
                let busy = model.units[first..first + n].iter().any(Option::is_some);
                if busy {
                    assert_eq!(r, Err(MapError::Exists));
                } else if sealed && off + size > FILE_LEN {
                    assert!(matches!(r, Err(MapError::Invalid(_))), "{r:?}");
                } else {
                    let note = r.expect("a free range maps");
                    // A descriptor the emulator must not map says why.
                    assert_eq!(note.is_some(), op >> 5 == 3);
                    for (i, u) in model.units[first..first + n].iter_mut().enumerate() {
                        *u = Some(Win {
                            file: if sealed { file } else { None },
                            off: off + i as u64 * UNIT,
                            read: flags & VFIO_DMA_MAP_FLAG_READ != 0,
                            write: flags & VFIO_DMA_MAP_FLAG_WRITE != 0,
                        });
                    }
                }
            }
            // DMA_UNMAP of a range, or of everything.
            1 => {
                let first = usize::from(input.u16()) % UNITS;
                let n = usize::from(input.u8()).min(UNITS - first);
                let all = op & 0x80 != 0;
                let (lo, hi) = if all { (0, UNITS) } else { (first, first + n) };
                let expect =
                    model.units[lo..hi].iter().filter(|u| u.is_some()).count() as u64 * UNIT;
                let got = table
                    .write()
                    .unwrap()
                    .unmap(first as u64 * UNIT, n as u64 * UNIT, all);
                assert_eq!(got, expect, "bytes unmapped");
                model.units[lo..hi].iter_mut().for_each(|u| *u = None);
            }
            // Read.
            2 => {
                let (at, len) = range(&mut input);
                let mut buf = vec![0u8; len];
                mem.read(at, &mut buf).expect("every byte is served");
                for (i, b) in buf.iter().enumerate() {
                    let a = at + i as u64;
                    let l = model.loc(a, false);
                    assert_eq!(*b, model.get(l), "read of {a:#x} ({l:?})");
                }
            }
            // Write.
            3 => {
                let (at, len) = range(&mut input);
                let seed = input.u8() | 1;
                let data: Vec<u8> = (0..len)
                    .map(|i| (i as u8).wrapping_mul(seed) ^ op)
                    .collect();
                mem.write(at, &data).expect("every byte is served");
                for (i, &b) in data.iter().enumerate() {
                    let l = model.loc(at + i as u64, true);
                    model.set(l, b);
                }
            }
            // Copy, directly or through the engine's checked form.
            4 | 5 => {
                let (src, len) = range(&mut input);
                let dst = u64::from(input.u32()) % (SPACE - len as u64 + 1);
                let from: Vec<Loc> = (0..len as u64).map(|i| model.loc(src + i, false)).collect();
                let to: Vec<Loc> = (0..len as u64).map(|i| model.loc(dst + i, true)).collect();
                let refuse = op % 7 == 5 && op & 0x80 != 0;
                if op % 7 == 4 {
                    mem.copy(src, dst, len, &mut scratch)
                        .expect("every byte is served");
                } else {
                    let wrote = mem
                        .copy_checked(src, dst, len, &mut scratch, &|| !refuse)
                        .expect("every byte is served");
                    assert_eq!(wrote, !refuse);
                }
                if refuse {
                    continue;
                }
                let shared = {
                    let mut read = std::collections::HashSet::with_capacity(from.len());
                    read.extend(from.iter().copied());
                    to.iter().any(|l| read.contains(l))
                };
                if shared {
                    // No defined result: take the destination as it is.
                    let (f, fb) = snapshot(&files, &fallback);
                    for l in to {
                        let v = match l {
                            Loc::File(i, o) => f[i][o as usize],
                            Loc::Fallback(a) => fb[a as usize],
                        };
                        model.set(l, v);
                    }
                } else {
                    let bytes: Vec<u8> = from.iter().map(|&l| model.get(l)).collect();
                    for (l, b) in to.into_iter().zip(bytes) {
                        model.set(l, b);
                    }
                }
            }
            // The client shrinks the unsealed file under its window (and
            // grows it back): never mapped, so never a SIGBUS.
            _ => {
                unsealed.set_len(u64::from(input.u16()) % FILE_LEN).unwrap();
                unsealed.set_len(FILE_LEN).unwrap();
            }
        }
    }
    let (f, fb) = snapshot(&files, &fallback);
    for (i, (real, want)) in f.iter().zip(&model.files).enumerate() {
        if let Some(at) = (0..real.len()).find(|&o| real[o] != want[o]) {
            panic!("file {i} differs from the model at offset {at:#x}");
        }
    }
    if let Some(at) = (0..fb.len()).find(|&a| fb[a] != model.fallback[a]) {
        panic!("fallback differs from the model at IOVA {at:#x}");
    }
});
