#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Turn the BENCH lines of a bench guest run into CSV, JSON, gnuplot data
and a table of medians and ratios.

    bench-report.py GUEST_TAP OUT_DIR
"""
import json
import statistics
import sys
from collections import defaultdict


def main():
    tap, out = sys.argv[1], sys.argv[2]
    dmatest = defaultdict(list)   # (driver, size) -> [KB/s per run, summed over channels]
    per_run = defaultdict(float)  # (driver, size, rep) -> KB/s
    memcpy = defaultdict(list)    # size -> [(dma MB/s, cpu MB/s)]
    uapi = defaultdict(list)      # (driver, size) -> [(sync, batch, cpu MB/s)]
    registered = defaultdict(list)  # (driver, size) -> [MB/s through registered regions]
    rdma = defaultdict(list)      # (device, tool) -> [MB/s, or usec for latency]
    rows = []
    for line in open(tap, encoding="utf-8", errors="replace"):
        f = line.split()
        if len(f) < 2 or f[0] != "BENCH":
            continue
        if f[1] == "dmatest":
            drv, size, rep, chan, tests, fails, iops, kbps = f[2:10]
            per_run[(drv, int(size), int(rep))] += float(kbps)
            rows.append({"kind": "dmatest", "driver": drv, "size": int(size), "rep": int(rep),
                         "channel": chan, "tests": int(tests), "failures": int(fails),
                         "iops": float(iops), "kb_per_s": float(kbps)})
        elif f[1] == "memcpy":
            size, rep, n, dma_ns, cpu_ns = (int(x) for x in f[2:7])
            mb = size * n / 1e6
            dma = mb / (dma_ns / 1e9) if dma_ns else 0.0
            cpu = mb / (cpu_ns / 1e9) if cpu_ns else 0.0
            memcpy[size].append((dma, cpu))
            rows.append({"kind": "memcpy", "size": size, "rep": rep, "copies": n,
                         "dma_mb_per_s": dma, "cpu_mb_per_s": cpu})
        elif f[1] == "uapi" and len(f) > 3 and f[3] == "registered":
            drv = f[2]
            size, rep, n, ns = (int(x) for x in f[4:8])
            rate = size * n / 1e6 / (ns / 1e9) if ns else 0.0
            registered[(drv, size)].append(rate)
            rows.append({"kind": "uapi-registered", "driver": drv, "size": size, "rep": rep,
                         "copies": n, "registered_mb_per_s": rate})
        elif f[1] == "uapi":
            drv = f[2]
            size, rep, n, sync_ns, batch_ns, cpu_ns = (int(x) for x in f[3:9])
            mb = size * n / 1e6
            rate = [mb / (ns / 1e9) if ns else 0.0 for ns in (sync_ns, batch_ns, cpu_ns)]
            uapi[(drv, size)].append(tuple(rate))
            rows.append({"kind": "uapi", "driver": drv, "size": size, "rep": rep, "copies": n,
                         "sync_mb_per_s": rate[0], "batch_mb_per_s": rate[1],
                         "cpu_mb_per_s": rate[2]})
        elif f[1] == "rdma":
            dev, tool, size, rep, value = f[2], f[3], int(f[4]), int(f[5]), float(f[6])
            rdma[(dev, tool)].append(value)
            rows.append({"kind": "rdma", "device": dev, "tool": tool, "size": size,
                         "rep": rep, "value": value,
                         "unit": "usec" if tool.endswith("_lat") else "MB/s"})
    for (drv, size, _), kbps in per_run.items():
        dmatest[(drv, size)].append(kbps / 1024)
    if not rows:
        print("bench-report: no BENCH lines in " + tap, file=sys.stderr)
        return 1

    with open(f"{out}/results.json", "w", encoding="utf-8") as fh:
        json.dump(rows, fh, indent=1)
    with open(f"{out}/results.csv", "w", encoding="utf-8") as fh:
        keys = sorted({k for r in rows for k in r})
        fh.write(",".join(keys) + "\n")
        for r in rows:
            fh.write(",".join(str(r.get(k, "")) for k in keys) + "\n")

    sizes = sorted({s for _, s in dmatest})
    med = {k: statistics.median(v) for k, v in dmatest.items()}
    print("dmatest throughput, MB/s summed over channels (median of %d runs)"
          % max((len(v) for v in dmatest.values()), default=0))
    print(f"{'size':>9} {'C plx_dma':>11} {'rust_plx_dma':>13} {'Rust/C':>8}")
    with open(f"{out}/dmatest.dat", "w", encoding="utf-8") as fh:
        for s in sizes:
            c, r = med.get(("plx_dma", s), 0.0), med.get(("rust_plx_dma", s), 0.0)
            ratio = r / c if c else float("nan")
            print(f"{s:>9} {c:>11.1f} {r:>13.1f} {ratio:>8.2f}")
            fh.write(f"{s} {c} {r}\n")
    if memcpy:
        print("\nengine copy (rust_dma_memcpy, one copy at a time) vs CPU copy, MB/s (median)")
        print(f"{'size':>9} {'engine':>10} {'CPU':>10} {'engine/CPU':>11}")
        with open(f"{out}/memcpy.dat", "w", encoding="utf-8") as fh:
            for s in sorted(memcpy):
                d = statistics.median(x for x, _ in memcpy[s])
                c = statistics.median(y for _, y in memcpy[s])
                print(f"{s:>9} {d:>10.1f} {c:>10.1f} {d / c if c else float('nan'):>11.3f}")
                fh.write(f"{s} {d} {c}\n")
    if uapi:
        def m(drv, s, i):
            v = uapi.get((drv, s))
            return statistics.median(x[i] for x in v) if v else float("nan")
        print("\nuser-buffer copies through /dev/plx-dma-copy, MB/s (median): one COPY"
              " at a time, SUBMIT/REAP batches of 32, CPU memcpy in the same process")
        print(f"{'size':>9} {'C sync':>8} {'C batch':>8} {'Rust sync':>10} {'Rust batch':>11}"
              f" {'CPU':>8} {'Rust/C':>7} {'batch/sync':>11} {'batch/CPU':>10}")
        with open(f"{out}/uapi.dat", "w", encoding="utf-8") as fh:
            for s in sorted({s for _, s in uapi}):
                cs, cb = m("plx_dma", s, 0), m("plx_dma", s, 1)
                rs, rb, cpu = m("rust_plx_dma", s, 0), m("rust_plx_dma", s, 1), m("rust_plx_dma", s, 2)
                print(f"{s:>9} {cs:>8.1f} {cb:>8.1f} {rs:>10.1f} {rb:>11.1f} {cpu:>8.1f}"
                      f" {rb / cb if cb else float('nan'):>7.2f} {rb / rs if rs else float('nan'):>11.2f}"
                      f" {rb / cpu if cpu else float('nan'):>10.3f}")
                fh.write(f"{s} {cs} {cb} {rs} {rb} {cpu}\n")
    if uapi or registered:
        drivers = sorted({d for d, _ in uapi} | {d for d, _ in registered})
        sizes_u = sorted({s for _, s in uapi} | {s for _, s in registered})

        def med_or_nan(v):
            return statistics.median(v) if v else float("nan")
        modes = []
        for drv in drivers:
            modes.append((f"{drv} sync", [med_or_nan([x[0] for x in uapi.get((drv, s), [])])
                                          for s in sizes_u]))
            modes.append((f"{drv} batch", [med_or_nan([x[1] for x in uapi.get((drv, s), [])])
                                           for s in sizes_u]))
            if any((drv, s) in registered for s in sizes_u):
                modes.append((f"{drv} registered", [med_or_nan(registered.get((drv, s), []))
                                                    for s in sizes_u]))
        if memcpy:
            modes.append(("kernel buffer (engine)",
                          [med_or_nan([x for x, _ in memcpy.get(s, [])]) for s in sizes_u]))
        print("\nuser-buffer copies by mode, MB/s (median): registered = SUBMIT/REAP batches"
              " of 32 between regions registered once; kernel buffer = rust_dma_memcpy")
        print(f"{'mode':>24}" + "".join(f" {s:>10}" for s in sizes_u))
        with open(f"{out}/uapi_modes.dat", "w", encoding="utf-8") as fh:
            fh.write("# mode " + " ".join(str(s) for s in sizes_u) + "\n")
            for name, vals in modes:
                print(f"{name:>24}" + "".join(f" {v:>10.1f}" for v in vals))
                fh.write(name.replace(" ", "_") + " " + " ".join(str(v) for v in vals) + "\n")
        mib = 1 << 20
        engine = [x for x, _ in memcpy.get(mib, [])]
        for drv in drivers:
            reg = registered.get((drv, mib))
            if reg and engine:
                r, e = statistics.median(reg), statistics.median(engine)
                print(f"registered user copy / kernel-buffer engine copy at 1 MiB ({drv}):"
                      f" {r:.1f} / {e:.1f} = {r / e if e else float('nan'):.2f}")
    if rdma:
        print("\nperftest, plx_rdma (data moved by rust_plx_dma) vs rxe on lo (median):"
              " bandwidth MB/s at 64 KiB, SEND latency usec at 64 B")
        print(f"{'test':>12} {'plx_rdma':>10} {'rxe':>10} {'plx/rxe':>8}")
        with open(f"{out}/rdma.dat", "w", encoding="utf-8") as fh:
            for tool in ("ib_write_bw", "ib_read_bw", "ib_send_lat"):
                p = rdma.get(("plx_rdma0", tool))
                r = rdma.get(("rxe0", tool))
                pm = statistics.median(p) if p else float("nan")
                rm = statistics.median(r) if r else float("nan")
                print(f"{tool:>12} {pm:>10.2f} {rm:>10.2f} {pm / rm if rm else float('nan'):>8.2f}")
                fh.write(f"{tool} {pm} {rm}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
