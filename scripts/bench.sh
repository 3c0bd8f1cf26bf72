#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: one boot of the bench kernel with two emulated channels;
# dmatest throughput of the C plx_dma and rust_plx_dma side by side, and
# engine copies against CPU copies, user-buffer copies through
# /dev/plx-dma-copy on both drivers, and perftest on plx_rdma against rxe.  Writes build/bench/results.{csv,json},
# PNG plots, and prints a table of medians and ratios.

. "$(dirname "$0")/lib.sh"

need_root bench
out=$REPO/build/bench
mkdir -p "$out"
rc=0
user=$("$REPO/scripts/user-build.sh") || die "the uAPI benchmark did not build"
mapfile -t files < <("$REPO/scripts/rdma-userland.sh")
[ "${#files[@]}" -gt 0 ] || die "the RDMA user space did not build"
extras=()
for f in "${files[@]}"; do extras+=(-a "$f"); done
run_emulated_guest bench-perf 2 3600 "$REPO/scripts/bench.guest.sh" -k bench \
	-a "$user/plx_dma_copy_bench:/usr/local/bin/plx_dma_copy_bench" "${extras[@]}" >&2 || rc=$?
[ "$rc" -eq 0 ] || die "the benchmark guest failed (status $rc); see build/results/bench-perf.console"
cp "$REPO/build/results/bench-perf.guest.tap" "$out/raw.txt"
python3 "$REPO/scripts/bench-report.py" "$out/raw.txt" "$out" | tee "$out/table.txt"
in_root gnuplot -e "out='$out'" "$REPO/scripts/bench-plots.gp" ||
	die "gnuplot failed to draw the plots"
log "results in $out: results.csv results.json table.txt dmatest.png memcpy.png uapi.png"
