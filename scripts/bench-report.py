#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn the BENCH and PROFILE lines of the bench's guest runs into CSV,
JSON, gnuplot data and a table of medians and ratios.

    bench-report.py OUT_DIR PATH=GUEST_TAP... [profile=PROFILE_FILE]
                    [engines=ENGINES_FILE] [cost=COST_FILE]

PATH names the emulator DMA path the run used (mapped, message); every
figure carries it.
"""
import json
import math
import statistics
import sys
from collections import defaultdict

NAN = float("nan")
GIB = 1 << 30


def med(values):
    values = list(values)
    return statistics.median(values) if values else NAN


def best(values):
    values = list(values)
    return max(values) if values else NAN


def ratio(a, b):
    return a / b if b and b == b and a == a else NAN


def parse_run(path, tap, rows):
    """Rows of one bench boot, each tagged with its emulator path."""
    per_run = defaultdict(float)  # (driver, size, rep) -> KB/s summed over channels
    for line in open(tap, encoding="utf-8", errors="replace"):
        f = line.split()
        if len(f) < 2 or f[0] != "BENCH":
            continue
        row = {"path": path}
        if f[1] == "dmatest":
            drv, size, rep, chan, tests, fails, iops, kbps = f[2:10]
            per_run[(drv, int(size), int(rep))] += float(kbps)
            row.update(kind="dmatest", driver=drv, size=int(size), rep=int(rep), channel=chan,
                       tests=int(tests), failures=int(fails), iops=float(iops),
                       kb_per_s=float(kbps))
        elif f[1] == "memcpy":
            size, rep, n, dma_ns, cpu_ns = (int(x) for x in f[2:7])
            mb = size * n / 1e6
            row.update(kind="memcpy", size=size, rep=rep, copies=n,
                       dma_mb_per_s=mb / (dma_ns / 1e9) if dma_ns else 0.0,
                       cpu_mb_per_s=mb / (cpu_ns / 1e9) if cpu_ns else 0.0)
        elif f[1] == "uapi" and len(f) > 3 and f[3] == "registered":
            drv = f[2]
            size, rep, n, ns = (int(x) for x in f[4:8])
            row.update(kind="uapi_registered", driver=drv, size=size, rep=rep, copies=n,
                       registered_mb_per_s=size * n / 1e6 / (ns / 1e9) if ns else 0.0)
        elif f[1] == "uapi":
            drv = f[2]
            size, rep, n, sync_ns, batch_ns, cpu_ns = (int(x) for x in f[3:9])
            mb = size * n / 1e6
            rate = [mb / (ns / 1e9) if ns else 0.0 for ns in (sync_ns, batch_ns, cpu_ns)]
            row.update(kind="uapi", driver=drv, size=size, rep=rep, copies=n,
                       sync_mb_per_s=rate[0], batch_mb_per_s=rate[1], cpu_mb_per_s=rate[2])
        elif f[1] == "depth":
            drv, mode = f[2], f[3]
            size, depth, chans, rep, n, nbytes, ns, busy, per_s = (int(x) for x in f[4:13])
            secs = ns / 1e9
            row.update(kind="depth", driver=drv, mode=mode, size=size, depth=depth,
                       channels=chans, rep=rep, copies=n, bytes=nbytes, ns=ns,
                       mb_per_s=nbytes / 1e6 / secs if secs else 0.0,
                       iops=n / secs if secs else 0.0,
                       cpu_ms_per_gib=busy * 1000 / per_s / (nbytes / GIB) if nbytes else NAN,
                       cpu_us_per_copy=busy * 1e6 / per_s / n if n else NAN,
                       submit_us_per_copy=int(f[13]) / 1e3 / n if len(f) > 13 and n else NAN)
        elif f[1] == "stalls":
            row.update(kind="stalls", driver=f[2], count=int(f[4]))
        elif f[1] == "rdma":
            dev, tool, size, rep, value = f[2], f[3], int(f[4]), int(f[5]), float(f[6])
            if not math.isfinite(value):
                # perftest without a calibrated clock: no figure (the
                # guest script runs such a latency test again).
                continue
            row.update(kind="rdma", device=dev, tool=tool, size=size, rep=rep, value=value,
                       unit="usec" if tool.endswith("_lat") else "MB/s")
        else:
            continue
        rows.append(row)
    for (drv, size, rep), kbps in per_run.items():
        rows.append({"path": path, "kind": "dmatest_total", "driver": drv, "size": size,
                     "rep": rep, "mb_per_s": kbps / 1024})


def parse_wire(fname, rows):
    """BENCH wire PAIR TOOL SIZE REP VALUE (scripts/bench-wire.guest.sh)."""
    for line in open(fname, encoding="utf-8", errors="replace"):
        f = line.split()
        if len(f) != 7 or f[:2] != ["BENCH", "wire"]:
            continue
        value = float(f[6])
        if math.isfinite(value):
            rows.append({"kind": "wire", "pair": f[2], "tool": f[3], "size": int(f[4]),
                         "rep": int(f[5]), "value": value,
                         "unit": "usec" if f[3].endswith("_lat") else "MB/s"})


def parse_profile(fname, rows):
    """PROFILE PATH WORKLOAD driver k=v... / PROFILE PATH WORKLOAD plx-dma-emu stats ch0 ..."""
    prof = defaultdict(dict)
    for line in open(fname, encoding="utf-8", errors="replace"):
        f = line.split()
        if len(f) < 4 or f[0] != "PROFILE":
            continue
        key = (f[1], f[2])
        side = f[3] if f[3] in ("driver", "run") else "emu"
        for kv in f[4:]:
            if "=" in kv:
                k, v = kv.split("=", 1)
                try:
                    prof[key][f"{side}.{k}"] = float(v)
                except ValueError:
                    pass
    for (path, workload), counters in prof.items():
        rows.append({"path": path, "kind": "profile", "workload": workload, **counters})


def parse_engines(fname, rows):
    """The host's ceiling for two channels: `plx-dma-emu bench-engines` lines."""
    for line in open(fname, encoding="utf-8", errors="replace"):
        f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        if line.startswith("engines ") and {"size", "one", "two"} <= f.keys():
            rows.append({"kind": "engines", "size": int(f["size"]),
                         "one_gb_per_s": float(f["one"]), "two_gb_per_s": float(f["two"])})


def parse_cost(fname, rows):
    """Path lengths: plx_submit_cost lines of the icount boot."""
    keys = ("prep_submit", "issue", "complete", "lock_bh", "call", "batch")
    for line in open(fname, encoding="utf-8", errors="replace"):
        f = dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
        if "driver" in f and all(k in f for k in keys):
            rows.append({"kind": "cost", "driver": f["driver"], **{k: int(f[k]) for k in keys}})


def engines_ceiling(rows, size):
    """(one engine, two engines) GB/s on this host alone, or None."""
    e = select(rows, kind="engines", size=size)
    return (e[0]["one_gb_per_s"], e[0]["two_gb_per_s"]) if e else None


def select(rows, **kw):
    return [r for r in rows if all(r.get(k) == v for k, v in kw.items())]


def write_data(rows, out):
    with open(f"{out}/results.json", "w", encoding="utf-8") as fh:
        json.dump(rows, fh, indent=1)
    with open(f"{out}/results.csv", "w", encoding="utf-8") as fh:
        keys = sorted({k for r in rows for k in r})
        fh.write(",".join(keys) + "\n")
        for r in rows:
            fh.write(",".join(str(r.get(k, "")) for k in keys) + "\n")


def report_dmatest(rows, paths, out):
    print("dmatest throughput, MB/s summed over channels (median of runs)")
    print(f"{'path':>8} {'size':>9} {'C plx_dma':>11} {'rust_plx_dma':>13} {'Rust/C':>8}")
    for path in paths:
        tot = select(rows, kind="dmatest_total", path=path)
        with open(f"{out}/dmatest-{path}.dat", "w", encoding="utf-8") as fh:
            for s in sorted({r["size"] for r in tot}):
                c = med(r["mb_per_s"] for r in tot if r["driver"] == "plx_dma" and r["size"] == s)
                r_ = med(r["mb_per_s"] for r in tot if r["driver"] == "rust_plx_dma" and r["size"] == s)
                print(f"{path:>8} {s:>9} {c:>11.1f} {r_:>13.1f} {ratio(r_, c):>8.2f}")
                fh.write(f"{s} {c} {r_}\n")


def report_memcpy(rows, paths, out):
    # The CPU copy is the baseline the engine must beat: its best run, the
    # least disturbed one, keeps a slowed run from flattering the engine.
    print("\nengine copy (rust_dma_memcpy, one copy at a time, buffers mapped once) vs CPU copy,"
          " MB/s (engine: median; CPU: best run)")
    print(f"{'path':>8} {'size':>9} {'engine':>10} {'CPU':>10} {'engine/CPU':>11}")
    for path in paths:
        mc = select(rows, kind="memcpy", path=path)
        with open(f"{out}/memcpy-{path}.dat", "w", encoding="utf-8") as fh:
            for s in sorted({r["size"] for r in mc}):
                d = med(r["dma_mb_per_s"] for r in mc if r["size"] == s)
                c = best(r["cpu_mb_per_s"] for r in mc if r["size"] == s)
                print(f"{path:>8} {s:>9} {d:>10.1f} {c:>10.1f} {ratio(d, c):>11.3f}")
                fh.write(f"{s} {d} {c}\n")


def depth_med(rows, path, drv, mode, size, depth, chans, key):
    return med(r[key] for r in select(rows, kind="depth", path=path, driver=drv, mode=mode,
                                      size=size, depth=depth, channels=chans))


def depth_best(rows, path, drv, size, depth, key):
    """A driver's best single-channel run in its default mode: the C plx_dma's
    runs that lost a completion wait out the client's timeout, so its median
    may measure its stalls rather than its speed."""
    return best(r[key] for r in select(rows, kind="depth", path=path, driver=drv,
                                       mode="default", size=size, depth=depth, channels=1))


def cpu_mb(rows, path, size):
    return best(r["cpu_mb_per_s"] for r in select(rows, kind="memcpy", path=path, size=size))


def crossover(rows, path, drv, depth):
    """Smallest measured size from which the engine beats a CPU copy."""
    sizes = sorted({r["size"] for r in select(rows, kind="depth", path=path, driver=drv,
                                              mode="default", depth=depth, channels=1)})
    wins = [s for s in sizes
            if depth_med(rows, path, drv, "default", s, depth, 1, "mb_per_s") > cpu_mb(rows, path, s)]
    # From that size on, every larger one must win too.
    for s in wins:
        if all(x in wins for x in sizes if x >= s):
            return s
    return None


def report_depth(rows, paths, out):
    print("\ndeep-queue client plx_depth_bench, one channel, default modes (median):"
          " MB/s, copies/s and guest CPU ms per GiB copied")
    print("(Rust/Cbest: against the C driver's best run, since its median may count its stalls)")
    print("(same boot: rust_plx_dma's runs in the C driver's boots, the drivers taking turns;"
          " Rust/C compares those, Rust MB/s and the rest are its runs in the main boot)")
    print(f"{'path':>8} {'size':>8} {'depth':>5} {'C MB/s':>9} {'Rust MB/s':>10} {'same boot':>10}"
          f" {'Rust/C':>7} {'Rust/Cbest':>10} {'C iops':>8} {'Rust iops':>10} {'C cpu':>8}"
          f" {'Rust cpu':>9} {'CPU copy':>9}")
    for path in paths:
        d = select(rows, kind="depth", path=path, channels=1, mode="default")
        with open(f"{out}/depth-{path}.dat", "w", encoding="utf-8") as fh:
            for s in sorted({r["size"] for r in d}):
                for q in sorted({r["depth"] for r in d if r["size"] == s}):
                    c = depth_med(rows, path, "plx_dma", "default", s, q, 1, "mb_per_s")
                    r_ = depth_med(rows, path, "rust_plx_dma", "default", s, q, 1, "mb_per_s")
                    ci = depth_med(rows, path, "plx_dma", "default", s, q, 1, "iops")
                    ri = depth_med(rows, path, "rust_plx_dma", "default", s, q, 1, "iops")
                    cc = depth_med(rows, path, "plx_dma", "default", s, q, 1, "cpu_ms_per_gib")
                    rc = depth_med(rows, path, "rust_plx_dma", "default", s, q, 1, "cpu_ms_per_gib")
                    cb = depth_best(rows, path, "plx_dma", s, q, "mb_per_s")
                    sb = depth_med(rows, path, "rust_plx_dma", "same-boot", s, q, 1, "mb_per_s")
                    cpu = cpu_mb(rows, path, s)
                    print(f"{path:>8} {s:>8} {q:>5} {c:>9.1f} {r_:>10.1f} {sb:>10.1f}"
                          f" {ratio(sb, c):>7.2f} {ratio(sb, cb):>10.2f} {ci:>8.0f} {ri:>10.0f}"
                          f" {cc:>8.0f} {rc:>9.0f} {cpu:>9.1f}")
                    if q == 16:
                        fh.write(f"{s} {c} {r_} {cpu}\n")
    print("\nrust_plx_dma completion modes at 64 B (copies/s, median): default = one interrupt"
          " per 32 copies and per batch, reaped in softirq; irq_coalesce=1,irq_thread=1 = one per copy, IRQ thread;"
          " poll_us=50 = polled")
    modes = ["default", "irq_coalesce=1,irq_thread=1", "poll_us=50"]
    print(f"{'path':>8} {'depth':>5} {'C':>8} " + " ".join(f"{m:>28}" for m in modes))
    for path in paths:
        for q in (1, 16, 256):
            c = depth_med(rows, path, "plx_dma", "default", 64, q, 1, "iops")
            vals = [depth_med(rows, path, "rust_plx_dma", m, 64, q, 1, "iops") for m in modes]
            print(f"{path:>8} {q:>5} {c:>8.0f} " + " ".join(f"{v:>28.0f}" for v in vals))
    print("\nthe client's thread preparing, submitting and issuing, microseconds per copy, one channel"
          " at depth 256, default modes, in the C driver's boots (median)")
    print(f"{'path':>8} {'size':>8} {'C':>8} {'Rust':>8} {'Rust/C':>7}")
    for path in paths:
        for s in (64, 4096):
            c = depth_med(rows, path, "plx_dma", "default", s, 256, 1, "submit_us_per_copy")
            r_ = depth_med(rows, path, "rust_plx_dma", "same-boot", s, 256, 1, "submit_us_per_copy")
            print(f"{path:>8} {s:>8} {c:>8.2f} {r_:>8.2f} {ratio(r_, c):>7.2f}")
    print("\ntwo channels vs one, aggregate MB/s (median)")
    print(f"{'path':>8} {'driver':>13} {'size':>8} {'depth':>5} {'1 chan':>8} {'2 chans':>8}"
          f" {'2/1':>6}")
    for path in paths:
        for drv in ("plx_dma", "rust_plx_dma"):
            for s in (65536, 1048576):
                for q in (16, 256):
                    one = depth_med(rows, path, drv, "default", s, q, 1, "mb_per_s")
                    two = depth_med(rows, path, drv, "default", s, q, 2, "mb_per_s")
                    print(f"{path:>8} {drv:>13} {s:>8} {q:>5} {one:>8.1f} {two:>8.1f}"
                          f" {ratio(two, one):>6.2f}")
    ceilings = [(s, engines_ceiling(rows, s)) for s in (65536, 1048576)]
    if any(c for _, c in ceilings):
        print("the host alone (plx-dma-emu bench-engines: engine threads copying with nothing"
              " else running, same buffer layout), MB/s")
        print(f"{'size':>8} {'1 engine':>9} {'2 engines':>10} {'2/1':>6}")
        for s, c in ceilings:
            if c:
                print(f"{s:>8} {c[0] * 1000:>9.0f} {c[1] * 1000:>10.0f} {ratio(c[1], c[0]):>6.2f}")


def report_uapi(rows, paths, out):
    print("\nuser-buffer copies through /dev/plx-dma-copy on rust_plx_dma, MB/s (median):"
          " one COPY at a time, SUBMIT/REAP batches of 32, batches between regions"
          " registered once, CPU memcpy in the same process, and the engine's copy between"
          " kernel buffers (rust_dma_memcpy)")
    print(f"{'path':>8} {'size':>9} {'sync':>8} {'batch':>8} {'regist.':>8} {'CPU':>8}"
          f" {'kernel':>8} {'reg/kernel':>11}")
    for path in paths:
        u = select(rows, kind="uapi", path=path, driver="rust_plx_dma")
        g = select(rows, kind="uapi_registered", path=path, driver="rust_plx_dma")
        with open(f"{out}/uapi-{path}.dat", "w", encoding="utf-8") as fh:
            for s in sorted({r["size"] for r in u + g}):
                rs = med(r["sync_mb_per_s"] for r in u if r["size"] == s)
                rb = med(r["batch_mb_per_s"] for r in u if r["size"] == s)
                rg = med(r["registered_mb_per_s"] for r in g if r["size"] == s)
                cpu = med(r["cpu_mb_per_s"] for r in u if r["size"] == s)
                k = med(r["dma_mb_per_s"] for r in select(rows, kind="memcpy", path=path, size=s))
                print(f"{path:>8} {s:>9} {rs:>8.1f} {rb:>8.1f} {rg:>8.1f} {cpu:>8.1f} {k:>8.1f}"
                      f" {ratio(rg, k):>11.2f}")
                fh.write(f"{s} {rs} {rb} {cpu} {rg}\n")


def rdma_median(rd, path, dev, tool, size):
    """Median perftest figure of one device, tool and size on one path."""
    return med(r["value"] for r in rd if r["path"] == path and r["device"] == dev
               and r["tool"] == tool and r["size"] == size)


def report_rdma(rows, out):
    rd = select(rows, kind="rdma")
    if not rd:
        return
    print("\nperftest, plx_rdma (data moved by rust_plx_dma, short copies by the CPU) vs rxe"
          " on lo (median): bandwidth MB/s, latency usec")
    print(f"{'path':>8} {'test':>12} {'size':>8} {'plx_rdma':>10} {'rxe':>10} {'plx/rxe':>8}")
    tests = (("ib_write_bw", 65536), ("ib_write_bw", 1048576), ("ib_read_bw", 65536),
             ("ib_read_bw", 1048576), ("ib_send_lat", 64), ("ib_write_lat", 64),
             ("ib_read_lat", 64))

    for path in sorted({r["path"] for r in rd}):
        for tool, size in tests:
            p = rdma_median(rd, path, "plx_rdma0", tool, size)
            x = rdma_median(rd, path, "rxe0", tool, size)
            print(f"{path:>8} {tool:>12} {size:>8} {p:>10.2f} {x:>10.2f} {ratio(p, x):>8.2f}")
        sizes = sorted({r["size"] for r in rd if r["device"] == "plx_rdma0/cpu"})
        if sizes:
            print(f"\n{path}: ib_write_lat on plx_rdma0, every copy by the engine against every"
                  " copy by the CPU (copy_engine_min), usec (median)")
            print(f"{'size':>8} {'engine':>10} {'cpu':>10} {'cpu/engine':>10}")
            for size in sizes:
                e = rdma_median(rd, path, "plx_rdma0/engine", "ib_write_lat", size)
                c = rdma_median(rd, path, "plx_rdma0/cpu", "ib_write_lat", size)
                print(f"{size:>8} {e:>10.2f} {c:>10.2f} {ratio(c, e):>10.2f}")


def report_wire(rows):
    wire = select(rows, kind="wire")
    if not wire:
        return
    # rxe-plxcpu: rxe-plx again, plx_rdma writing every received payload
    # by the CPU (the engine's placement priced on this platform).
    pairs = ("plx-rxe", "rxe-plx", "plx-plx", "rxe-rxe", "rxe-plxcpu")
    tests = (("ib_write_bw", 65536), ("ib_write_bw", 1048576), ("ib_send_lat", 64))
    print("\nRoCEv2 across veth pairs (median; client-server: the client writes and"
          " sends): ib_write_bw MiB/s, ib_send_lat usec")
    print(f"{'test':>12} {'size':>8} " + " ".join(f"{p:>10}" for p in pairs)
          + f" {'plx-plx/rxe-rxe':>16}")
    for tool, size in tests:
        m = {p: med(r["value"] for r in wire if r["pair"] == p and r["tool"] == tool
                    and r["size"] == size) for p in pairs}
        print(f"{tool:>12} {size:>8} " + " ".join(f"{m[p]:>10.2f}" for p in pairs)
              + f" {ratio(m['plx-plx'], m['rxe-rxe']):>16.2f}")


def report_profile(rows):
    prof = select(rows, kind="profile")
    if not prof:
        return
    print("\nprofile: per descriptor, on rust_plx_dma (one channel; dmatest and depth16: 4 KiB"
          " copies, depth256: 64 B; the counts include the boot's own probe and teardown)")
    print("(engine ns: the engine thread's host time per descriptor; busy: its share of the"
          " run's wall time; wake us: from a doorbell that finds it idle to its fetch)")
    cols = [("MMIO rd", "emu.reg_reads"), ("MMIO wr", "emu.reg_writes"),
            ("DMA msgs", "emu.dma_messages"), ("IRQs", "emu.interrupts"),
            ("DMA_MAP", "emu.dma_maps"), ("DMA_UNMAP", "emu.dma_unmaps"),
            ("doorbells", "driver.doorbells")]
    print(f"{'path':>8} {'workload':>9} {'descs':>6} " + " ".join(f"{c:>9}" for c, _ in cols)
          + f" {'mapped bytes':>13} {'engine ns':>9} {'busy':>5} {'wake us':>7}")
    for r in sorted(prof, key=lambda r: (r["path"], r["workload"])):
        n = r.get("emu.descriptors", 0)
        vals = [r.get(k, NAN) / n if n else NAN for _, k in cols]
        mapped = r.get("emu.bytes_mapped", 0)
        total = mapped + r.get("emu.bytes_messages", 0)
        busy_ns = r.get("emu.engine_busy_ns", NAN)
        engine = busy_ns / n if n else NAN
        # Only the deep-queue workloads time their run.
        busy = ratio(busy_ns, r.get("run.ns", NAN)) * 100
        wake = ratio(r.get("emu.wakeup_ns", NAN), r.get("emu.engine_wakeups", NAN)) / 1000
        busy_col = f"{busy:>4.0f}%" if busy == busy else f"{'-':>5}"
        print(f"{r['path']:>8} {r['workload']:>9} {n:>6.0f} " + " ".join(f"{v:>9.2f}" for v in vals)
              + f" {ratio(mapped, total) * 100:>12.0f}% {engine:>9.0f} {busy_col} {wake:>7.1f}")


def report_cost(rows):
    cost = {r["driver"]: r for r in select(rows, kind="cost")}
    if not cost:
        return
    print("\nper-copy path, guest instructions (icount boot, batches of 64 B copies;"
          " a _bh lock pair and an indirect call for scale)")
    print(f"{'driver':>14} {'prep+submit':>12} {'issue/copy':>11} {'submission':>11}"
          f" {'completion':>11} {'lock_bh':>8} {'call':>5}")
    total = {}
    for drv in ("plx_dma", "rust_plx_dma"):
        r = cost.get(drv)
        if not r:
            continue
        issue = r["issue"] / r["batch"]
        total[drv] = r["prep_submit"] + issue
        print(f"{drv:>14} {r['prep_submit']:>12} {issue:>11.1f} {total[drv]:>11.1f}"
              f" {r['complete']:>11} {r['lock_bh']:>8} {r['call']:>5}")
    if len(total) == 2:
        rust, c = cost["rust_plx_dma"], cost["plx_dma"]
        print(f"{'Rust/C':>14} {ratio(rust['prep_submit'], c['prep_submit']):>12.2f}"
              f" {'':>11} {ratio(total['rust_plx_dma'], total['plx_dma']):>11.2f}"
              f" {ratio(rust['complete'], c['complete']):>11.2f}")


def report_targets(rows, paths):
    for r in select(rows, kind="stalls"):
        if r["count"]:
            print(f"\n{r['driver']} on the {r['path']} path: {r['count']} deep-queue run(s) gave up"
                  " after a queue stall (no completion for 3 s); their figures are missing")
    print("\ntargets")
    p = "mapped" if "mapped" in paths else paths[0]
    e1 = med(r["dma_mb_per_s"] for r in select(rows, kind="memcpy", path=p, size=1 << 20))
    c1 = cpu_mb(rows, p, 1 << 20)
    d1 = depth_med(rows, p, "rust_plx_dma", "default", 1 << 20, 16, 1, "mb_per_s")
    print(f"  engine/CPU at 1 MiB ({p}): one at a time {ratio(e1, c1):.2f},"
          f" depth 16 {ratio(d1, c1):.2f} (target >= 3)")
    for drv in ("plx_dma", "rust_plx_dma"):
        for q in (1, 16, 256):
            x = crossover(rows, p, drv, q)
            print(f"  crossover ({p}, {drv}, depth {q}): "
                  + (f"the engine beats a CPU copy from {x} B on" if x else "none measured"))
    for s in (65536, 1 << 20):
        for q in (1, 16, 256):
            rust = depth_med(rows, p, "rust_plx_dma", "same-boot", s, q, 1, "mb_per_s")
            apart = depth_med(rows, p, "rust_plx_dma", "default", s, q, 1, "mb_per_s")
            c = depth_med(rows, p, "plx_dma", "default", s, q, 1, "mb_per_s")
            cb = depth_best(rows, p, "plx_dma", s, q, "mb_per_s")
            print(f"  Rust/C MB/s at {s} B, depth {q} ({p}): {ratio(rust, c):.2f} in one boot"
                  f" (against C's best run {ratio(rust, cb):.2f}; across boots {ratio(apart, c):.2f};"
                  " target >= 1.10)")
    ri = depth_med(rows, p, "rust_plx_dma", "same-boot", 64, 256, 1, "iops")
    ra = depth_med(rows, p, "rust_plx_dma", "default", 64, 256, 1, "iops")
    ci = depth_med(rows, p, "plx_dma", "default", 64, 256, 1, "iops")
    cib = depth_best(rows, p, "plx_dma", 64, 256, "iops")
    print(f"  Rust/C iops at 64 B, depth 256 ({p}): {ratio(ri, ci):.2f} in one boot"
          f" (against C's best run {ratio(ri, cib):.2f}; across boots {ratio(ra, ci):.2f};"
          " target >= 1.5)")
    for s in (65536, 1 << 20):
        for q in (16, 256):
            one = depth_med(rows, p, "rust_plx_dma", "default", s, q, 1, "mb_per_s")
            two = depth_med(rows, p, "rust_plx_dma", "default", s, q, 2, "mb_per_s")
            c = engines_ceiling(rows, s)
            host = (f"; 2 channels reached {ratio(two / 1000, c[1]) * 100:.0f} % of two engines"
                    f" alone on this host, which give {ratio(c[1], c[0]):.2f} times one") if c else ""
            print(f"  2 channels / 1 at {s} B, depth {q} ({p}): {ratio(two, one):.2f}"
                  f" (target >= 1.5{host})")
    rg = med(r["registered_mb_per_s"]
             for r in select(rows, kind="uapi_registered", path=p, size=1 << 20))
    print(f"  registered user copy / kernel-buffer engine copy at 1 MiB ({p}):"
          f" {ratio(rg, e1):.2f} (target >= 0.8)")
    rd = select(rows, kind="rdma")
    for path in sorted({r["path"] for r in rd}):
        def of(dev, tool, size):
            return rdma_median(rd, path, dev, tool, size)
        for tool in ("ib_send_lat", "ib_write_lat", "ib_read_lat"):
            print(f"  plx_rdma0/rxe0 {tool} at 64 B ({path}):"
                  f" {ratio(of('plx_rdma0', tool, 64), of('rxe0', tool, 64)):.2f} (target <= 0.5)")
        for tool in ("ib_write_bw", "ib_read_bw"):
            print(f"  plx_rdma0/rxe0 {tool} at 64 KiB ({path}):"
                  f" {ratio(of('plx_rdma0', tool, 65536), of('rxe0', tool, 65536)):.2f}"
                  " (target >= 7)")


def main():
    if len(sys.argv) < 3:
        print("usage: bench-report.py OUT_DIR PATH=GUEST_TAP... [profile=FILE] [engines=FILE]"
              " [cost=FILE] [wire=FILE]",
              file=sys.stderr)
        return 2
    out = sys.argv[1]
    rows, paths = [], []
    for arg in sys.argv[2:]:
        name, _, fname = arg.partition("=")
        if name == "profile":
            parse_profile(fname, rows)
        elif name == "engines":
            parse_engines(fname, rows)
        elif name == "cost":
            parse_cost(fname, rows)
        elif name == "wire":
            parse_wire(fname, rows)
        else:
            paths.append(name)
            parse_run(name, fname, rows)
    if not [r for r in rows if r["kind"] not in ("profile", "engines", "cost", "wire")]:
        print("bench-report: no BENCH lines in " + " ".join(sys.argv[2:]), file=sys.stderr)
        return 1
    write_data(rows, out)
    report_dmatest(rows, paths, out)
    report_memcpy(rows, paths, out)
    report_depth(rows, paths, out)
    report_uapi(rows, paths, out)
    report_rdma(rows, out)
    report_wire(rows)
    report_profile(rows)
    report_cost(rows)
    report_targets(rows, paths)
    return 0


if __name__ == "__main__":
    sys.exit(main())
