// SPDX-License-Identifier: GPL-2.0

//! Test-only dmaengine client of the `emu-faults` suite.
//!
//! Loading the module takes one memcpy channel (any, or `dma<chan>chan0`),
//! makes `copies` synchronous copies of `size` bytes through it, prints one
//! line per copy and a summary, and releases the channel before `init`
//! returns, so the module holds nothing and can be removed at once. Copy
//! number `bad_src` reads from the unmapped IOVA `bad_iova` and copy
//! `bad_dst` writes to it; every other copy goes between two mapped buffers.
//! Before each copy the source gets a pattern unique to that copy and the
//! destination a fill byte, so a copy is judged by what the destination
//! holds afterwards, not only by the result the engine reported:
//!
//! ```text
//! plx_fault_client: copy=N chan=C src=buf|bad dst=buf|bad result=R residue=B ms=T data=D
//! plx_fault_client: copy=N chan=C src=buf|bad dst=buf|bad error=E ms=T data=D
//! plx_fault_client: done chan=C copies=N NoError=n ReadFailed=n WriteFailed=n Aborted=n errors=n bad_data=n
//! ```
//!
//! `R` is the dmaengine result (`NoError`, `ReadFailed`, `WriteFailed`,
//! `Aborted`) and `B` its residue; `E` an errno name when no result came
//! (`ETIMEDOUT`: nothing completed within `timeout_ms`). `D` is `verified`
//! (a successful copy left the source's bytes), `untouched` (a failed copy
//! left the fill), `n/a` (the destination was the unmapped IOVA), or
//! `MISMATCH@OFFSET` / `CHANGED@OFFSET` at the first wrong byte; the last
//! two count as `bad_data`. Only bad parameters or setup failures (no such
//! channel, no memory) fail the load.

// Shared source written with `rust/kernel` visibility; this module uses
// only the client side.
#[expect(unreachable_pub)]
#[allow(dead_code)]
#[path = "../../../rust/kernel/dmaengine/mod.rs"]
mod dmaengine;
#[allow(dead_code, unreachable_pub)]
#[path = "../../../rust/kernel/module_queue.rs"]
mod module_queue;

use dmaengine::{
    client::{CopyError, DmaBuffer, MemcpyChannel},
    TxResult,
};
use kernel::{
    fmt,
    prelude::*,
    str::CString,
    time::{Instant, Monotonic},
};

module! {
    type: PlxFaultClient,
    name: "plx_fault_client",
    authors: ["rust-plx-dma developers"],
    description: "Test-only dmaengine client: copies with unmapped addresses, one line per copy",
    license: "GPL",
    params: {
        chan: i32 {
            default: -1,
            description: "Use channel dma<chan>chan0 (-1: any memcpy channel)",
        },
        copies: u32 {
            default: 1,
            description: "Copies to make (1..64)",
        },
        size: u32 {
            default: 16384,
            description: "Bytes per copy (1..1048576)",
        },
        bad_src: u32 {
            default: 0,
            description: "Copy number (1-based) whose source is bad_iova (0: none)",
        },
        bad_dst: u32 {
            default: 0,
            description: "Copy number (1-based) whose destination is bad_iova (0: none)",
        },
        bad_iova: u64 {
            default: 0xdead0000,
            description: "An IOVA the IOMMU never maps (48-bit, page-aligned)",
        },
        timeout_ms: u32 {
            default: 5000,
            description: "Wait per copy, in milliseconds (1..60000)",
        },
    },
}

const MAX_COPIES: u32 = 64;
const MAX_SIZE: u32 = 1 << 20;
const MAX_TIMEOUT_MS: u32 = 60_000;
/// The engine's address space (48 bits).
const IOVA_LIMIT: u64 = 1 << 48;
const PAGE: u64 = 4096;
/// What the destination holds before each copy.
const FILL: u8 = 0xa5;
/// Bytes written or compared per step, so the stack stays small.
const CHUNK: usize = 256;

/// The validated parameters.
struct Plan {
    chan: Option<u32>,
    copies: u32,
    size: usize,
    bad_src: u32,
    bad_dst: u32,
    bad_iova: u64,
    timeout_ms: u32,
}

impl Plan {
    fn from_params() -> Result<Self> {
        let chan = module_parameters::chan.value();
        let copies = module_parameters::copies.value();
        let size = module_parameters::size.value();
        let bad_src = module_parameters::bad_src.value();
        let bad_dst = module_parameters::bad_dst.value();
        let bad_iova = module_parameters::bad_iova.value();
        let timeout_ms = module_parameters::timeout_ms.value();
        if chan < -1 {
            pr_err!(
                "chan={} is invalid: use -1 (any) or a dma device number\n",
                chan
            );
            return Err(EINVAL);
        }
        if copies == 0 || copies > MAX_COPIES {
            pr_err!("copies={} is invalid: use 1..{}\n", copies, MAX_COPIES);
            return Err(EINVAL);
        }
        if size == 0 || size > MAX_SIZE {
            pr_err!("size={} is invalid: use 1..{}\n", size, MAX_SIZE);
            return Err(EINVAL);
        }
        if bad_src > copies || bad_dst > copies {
            pr_err!(
                "bad_src={} bad_dst={} are invalid: use 0 (none) or a copy number up to copies={}\n",
                bad_src,
                bad_dst,
                copies
            );
            return Err(EINVAL);
        }
        if bad_iova % PAGE != 0
            || bad_iova
                .checked_add(u64::from(size))
                .is_none_or(|end| end > IOVA_LIMIT)
        {
            pr_err!(
                "bad_iova={:#x} is invalid: use a page-aligned IOVA with room for size={} below 2^48\n",
                bad_iova,
                size
            );
            return Err(EINVAL);
        }
        if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
            pr_err!(
                "timeout_ms={} is invalid: use 1..{}\n",
                timeout_ms,
                MAX_TIMEOUT_MS
            );
            return Err(EINVAL);
        }
        Ok(Self {
            chan: u32::try_from(chan).ok(),
            copies,
            size: size as usize,
            bad_src,
            bad_dst,
            bad_iova,
            timeout_ms,
        })
    }
}

/// The byte the source of copy `n` holds at `i`: differs between copies
/// and is never the fill byte throughout.
fn pattern(n: u32, i: usize) -> u8 {
    (i.wrapping_mul(131) ^ (i >> 8) ^ (n as usize).wrapping_mul(29)) as u8
}

/// Takes channel `dma<want>chan0`, or any memcpy channel.
///
/// The core hands out the first free channel, so channels that are not the
/// wanted one are held until it turns up and then released.
fn take_channel(want: Option<u32>) -> Result<MemcpyChannel> {
    let Some(n) = want else {
        return MemcpyChannel::request().inspect_err(|e| {
            pr_err!("no memcpy channel available ({})\n", ErrName(*e));
        });
    };
    let name = CString::try_from_fmt(fmt!("dma{}chan0", n))?;
    let mut others = KVec::new();
    loop {
        let c = MemcpyChannel::request().inspect_err(|e| {
            pr_err!(
                "channel dma{}chan0 not found among the free memcpy channels ({})\n",
                n,
                ErrName(*e)
            );
        })?;
        if c.name().to_bytes() == name.to_bytes() {
            return Ok(c);
        }
        others.push(c, GFP_KERNEL)?;
    }
}

/// Fills `buf` with `f(offset)`.
fn fill(buf: &mut DmaBuffer<'_>, f: impl Fn(usize) -> u8) -> Result {
    let mut chunk = [0u8; CHUNK];
    for off in (0..buf.len()).step_by(CHUNK) {
        let n = CHUNK.min(buf.len() - off);
        for (i, b) in chunk.iter_mut().take(n).enumerate() {
            *b = f(off + i);
        }
        buf.write(off, &chunk[..n])?;
    }
    Ok(())
}

/// The first offset where `buf` differs from `f(offset)`.
fn first_difference(buf: &DmaBuffer<'_>, f: impl Fn(usize) -> u8) -> Result<Option<usize>> {
    let mut chunk = [0u8; CHUNK];
    for off in (0..buf.len()).step_by(CHUNK) {
        let n = CHUNK.min(buf.len() - off);
        buf.read(off, &mut chunk[..n])?;
        if let Some(i) = (0..n).find(|&i| chunk[i] != f(off + i)) {
            return Ok(Some(off + i));
        }
    }
    Ok(None)
}

/// What the destination held after a copy.
enum Data {
    Verified,
    Untouched,
    NotApplicable,
    Mismatch(usize),
    Changed(usize),
}

impl Data {
    fn is_bad(&self) -> bool {
        matches!(self, Data::Mismatch(_) | Data::Changed(_))
    }
}

impl fmt::Display for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Data::Verified => f.write_str("verified"),
            Data::Untouched => f.write_str("untouched"),
            Data::NotApplicable => f.write_str("n/a"),
            Data::Mismatch(off) => write!(f, "MISMATCH@{}", off),
            Data::Changed(off) => write!(f, "CHANGED@{}", off),
        }
    }
}

/// An error as its `E...` name (the kernel's own names need
/// `CONFIG_SYMBOLIC_ERRNAME`, which the bench kernels do not have).
struct ErrName(Error);

impl fmt::Display for ErrName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const NAMES: [(Error, &str); 9] = [
            (ETIMEDOUT, "ETIMEDOUT"),
            (EINTR, "EINTR"),
            (EIO, "EIO"),
            (ENOMEM, "ENOMEM"),
            (ENOSPC, "ENOSPC"),
            (ENODEV, "ENODEV"),
            (EINVAL, "EINVAL"),
            (ERANGE, "ERANGE"),
            (EBUSY, "EBUSY"),
        ];
        match NAMES.iter().find(|(e, _)| *e == self.0) {
            Some((_, name)) => f.write_str(name),
            None => write!(f, "errno{}", self.0.to_errno()),
        }
    }
}

/// Per-outcome counts for the summary line.
#[derive(Default)]
struct Tally {
    no_error: u32,
    read_failed: u32,
    write_failed: u32,
    aborted: u32,
    errors: u32,
    bad_data: u32,
}

fn run(plan: &Plan) -> Result {
    let chan = take_channel(plan.chan)?;
    let name = chan.name();
    let mut src = DmaBuffer::new(&chan, plan.size)?;
    let mut dst = DmaBuffer::new(&chan, plan.size)?;
    let mut tally = Tally::default();
    for n in 1..=plan.copies {
        let bad_src = n == plan.bad_src;
        let bad_dst = n == plan.bad_dst;
        fill(&mut src, |i| pattern(n, i))?;
        fill(&mut dst, |_| FILL)?;
        let s = if bad_src {
            plan.bad_iova
        } else {
            src.dma_address()
        };
        let d = if bad_dst {
            plan.bad_iova
        } else {
            dst.dma_address()
        };
        let t = Instant::<Monotonic>::now();
        // SAFETY: `d` and `s` are our buffers' addresses, `plan.size`
        // bytes each, mapped for the channel until `run` returns; or the
        // IOVA that the test left unmapped on purpose, which the IOMMU
        // faults without touching memory. Buffers a copy that could not be
        // stopped may still write are abandoned below, never unmapped.
        let outcome = unsafe { chan.copy_sync(d, s, plan.size, plan.timeout_ms) };
        if let Err(CopyError::Unstopped(_)) = outcome {
            src.abandon();
            dst.abandon();
        }
        let outcome = outcome.map_err(Error::from);
        let ms = t.elapsed().as_millis();
        let ok = matches!(outcome, Ok((TxResult::NoError, _)));
        let data = if bad_dst {
            Data::NotApplicable
        } else if ok {
            match first_difference(&dst, |i| pattern(n, i))? {
                None => Data::Verified,
                Some(off) => Data::Mismatch(off),
            }
        } else {
            match first_difference(&dst, |_| FILL)? {
                None => Data::Untouched,
                Some(off) => Data::Changed(off),
            }
        };
        if data.is_bad() {
            tally.bad_data += 1;
        }
        let src_kind = if bad_src { "bad" } else { "buf" };
        let dst_kind = if bad_dst { "bad" } else { "buf" };
        match outcome {
            Ok((result, residue)) => {
                match result {
                    TxResult::NoError => tally.no_error += 1,
                    TxResult::ReadFailed => tally.read_failed += 1,
                    TxResult::WriteFailed => tally.write_failed += 1,
                    TxResult::Aborted => tally.aborted += 1,
                }
                pr_info!(
                    "copy={} chan={} src={} dst={} result={:?} residue={} ms={} data={}\n",
                    n,
                    name,
                    src_kind,
                    dst_kind,
                    result,
                    residue,
                    ms,
                    data
                );
            }
            Err(e) => {
                tally.errors += 1;
                pr_info!(
                    "copy={} chan={} src={} dst={} error={} ms={} data={}\n",
                    n,
                    name,
                    src_kind,
                    dst_kind,
                    ErrName(e),
                    ms,
                    data
                );
            }
        }
    }
    pr_info!(
        "done chan={} copies={} NoError={} ReadFailed={} WriteFailed={} Aborted={} errors={} bad_data={}\n",
        name,
        plan.copies,
        tally.no_error,
        tally.read_failed,
        tally.write_failed,
        tally.aborted,
        tally.errors,
        tally.bad_data
    );
    Ok(())
}

struct PlxFaultClient;

impl kernel::Module for PlxFaultClient {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        let plan = Plan::from_params()?;
        run(&plan)?;
        Ok(PlxFaultClient)
    }
}
