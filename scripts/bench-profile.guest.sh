# SPDX-License-Identifier: GPL-2.0
# Guest half of the bench's profile boots: one workload on rust_plx_dma's
# first channel, so that the emulator's final counters (its log) and the
# driver's (printed here) divide by that workload's descriptors alone.
#   WORKLOAD=dmatest  dmatest, one 4 KiB copy in flight, buffers mapped
#                     and unmapped by the client for every copy
#   WORKLOAD=depth16  plx_depth_bench, 16 copies of 4 KiB in flight,
#                     buffers mapped once
#   WORKLOAD=depth256 plx_depth_bench, 256 copies of 64 B in flight,
#                     where the guest, not the engine, sets the pace
# The deep-queue workloads also print the run's wall time ("PROFILE run"),
# against which the emulator's engine_busy_ns gives the engine's share.
. /guest/lib.sh
. /guest/dmatest.sh

# profile_depth_run SIZE DEPTH COPIES: one plx_depth_bench load, and its
# wall time as "PROFILE run ns=... copies=...".
profile_depth_run() {
	local log
	if log=$(depth_load "$1" "$2" 1 "$3"); then
		ok "plx_depth_bench $1 B, depth $2"
	else
		not_ok "plx_depth_bench $1 B, depth $2"
		echo "$log" | sed 's/^/# /'
	fi
	echo "$log" | sed -n 's/.*plx_depth_bench: total .* copies=\([0-9]*\) .* ns=\([0-9]*\) .*/PROFILE run ns=\2 copies=\1/p'
}

modprobe rust_plx_dma || { not_ok "modprobe rust_plx_dma"; finish; }
case "${WORKLOAD:-}" in
dmatest)
	dmatest_start 2000 4096 0 0
	dmatest_summaries | sed 's/^/# /'
	dmatest_release
	;;
depth16)
	profile_depth_run 4096 16 2000
	;;
depth256)
	# As many copies as the path moves in a fraction of a second.
	copies=3000
	[ "${BENCH_PATH:-}" = mapped ] && copies=40000
	profile_depth_run 64 256 "$copies"
	;;
*) not_ok "unknown WORKLOAD '${WORKLOAD:-}'" ;;
esac
for f in /sys/kernel/debug/rust_plx_dma-*/stats; do
	echo "PROFILE driver $(tr '\n' ' ' <"$f" | sed 's/: /=/g')"
done
rmmod rust_plx_dma
check "profile workload ran" true
finish
