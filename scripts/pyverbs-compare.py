#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Compares the outcomes of rdma-core's test suite on plx_rdma0 and on rxe0
(the "# PYVERBS DEV ..." lines of a pyverbs guest log, see
scripts/suites/pyverbs.guest.sh) and prints unnumbered TAP points, with a
report written to REPORT.

Usage: pyverbs-compare.py GUEST_TAP REPORT

A test may fail on plx_rdma0 only where it fails on rxe0 as well; no
module's process may die on plx_rdma0 (pyverbs closes a context before the
objects made on it when a test stops half-way, and the collector then
destroys them: rxe's processes die of that at exit, plx_rdma's provider
keeps the context for them); what plx_rdma0 does not implement must be a
clean skip."""

import collections
import sys

PLX, RXE = "plx_rdma0", "rxe0"
BAD = ("fail", "error")


def parse(path):
    """{dev: ({test: (outcome, reason)}, {module: rc}, [started tests])}"""
    runs = collections.defaultdict(lambda: ({}, {}, []))
    with open(path, errors="replace") as f:
        for line in f:
            if not line.startswith("# PYVERBS "):
                continue
            words = line.rstrip("\n").split(" ", 6)[2:]
            if len(words) < 2:
                continue
            dev, kind, rest = words[0], words[1], words[2:]
            results, modules, started = runs[dev]
            if kind == "RESULT" and len(rest) >= 2:
                test, outcome = rest[0], rest[1]
                reason = rest[2] if len(rest) > 2 else "-"
                results[test] = (outcome, reason)
            elif kind == "START" and rest:
                started.append(rest[0])
            elif kind == "MODULE" and len(rest) >= 2:
                modules[rest[0]] = int(rest[1])
    return runs


def counts(results):
    c = collections.Counter(o for o, _ in results.values())
    return f"{c['ok']} passed, {c['skip']} skipped, {c['fail'] + c['error']} failed"


def main():
    tap, report = sys.argv[1], sys.argv[2]
    runs = parse(tap)
    failures = 0

    def point(good, desc, detail=()):
        nonlocal failures
        print(f"{'ok' if good else 'not ok'} - {desc}")
        for d in detail:
            print(f"# {d}")
        failures += not good

    if PLX not in runs or RXE not in runs:
        point(False, "rdma-core's suite ran on plx_rdma0 and on rxe0")
        return 1
    (pr, pm, ps), (rr, rm, rs) = runs[PLX], runs[RXE]
    point(sum(o == "ok" for o, _ in rr.values()) > 0,
          f"rdma-core's suite runs on rxe0, the oracle: {counts(rr)}")
    point(len(pr) > 0, f"rdma-core's suite runs on plx_rdma0: {counts(pr)}")
    worse = sorted(t for t, (o, _) in pr.items() if o in BAD and rr.get(t, ("",))[0] not in BAD)
    point(not worse, "no test fails on plx_rdma0 that passes or skips on rxe0",
          [f"{t}: {pr[t][0]}: {pr[t][1][:160]}" for t in worse])
    # Not even where rxe0's do: the provider keeps a closed context alive
    # for the objects still made on it (providers/plx_rdma).
    died = sorted(m for m, rc in pm.items() if rc > 1)
    rxe_died = sorted(m for m, rc in rm.items() if rc > 1)
    point(not died, "no module's process dies on plx_rdma0 "
          f"(on rxe0: {', '.join(rxe_died) or 'none'})",
          [f"{m}: exit status {pm[m]} (rxe0: {rm.get(m)})" for m in died])
    lost = sorted(t for t in set(ps) - set(pr) if t in rr)
    point(not lost, "every test that ends on rxe0 ends on plx_rdma0 (none lost to a crash)", lost)

    # The report: both columns, then what plx_rdma0 skips that rxe0 passes,
    # by the reason the suite gives.
    lines = [f"rdma-core tests: plx_rdma0 {counts(pr)}; rxe0 {counts(rr)}", ""]
    lines.append(f"{'test':90} {'plx_rdma0':9} rxe0")
    for t in sorted(set(pr) | set(rr)):
        lines.append(f"{t:90} {pr.get(t, ('-',))[0]:9} {rr.get(t, ('-',))[0]}")
    gaps = collections.Counter(pr[t][1] for t in pr if pr[t][0] == "skip" and rr.get(t, ("",))[0] == "ok")
    lines += ["", "passed on rxe0, skipped on plx_rdma0, by reason:"]
    lines += [f"{n:4} {why}" for why, n in gaps.most_common()]
    with open(report, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"# {lines[0]}")
    for why, n in gaps.most_common():
        print(f"# skipped on plx_rdma0, passed on rxe0: {n:3} {why}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
