# SPDX-License-Identifier: GPL-2.0
# Guest half of the bench's profile boots: one workload on rust_plx_dma's
# first channel, so that the emulator's final counters (its log) and the
# driver's (printed here) divide by that workload's descriptors alone.
#   WORKLOAD=dmatest  dmatest, one 4 KiB copy in flight, buffers mapped
#                     and unmapped by the client for every copy
#   WORKLOAD=depth16  plx_depth_bench, 16 copies of 4 KiB in flight,
#                     buffers mapped once
. /guest/lib.sh
. /guest/dmatest.sh

modprobe rust_plx_dma || { not_ok "modprobe rust_plx_dma"; finish; }
case "${WORKLOAD:-}" in
dmatest)
	dmatest_start 2000 4096 0 0
	dmatest_summaries | sed 's/^/# /'
	dmatest_release
	;;
depth16)
	check "plx_depth_bench 4 KiB, depth 16" modprobe plx_depth_bench size=4096 depth=16 copies=2000
	rmmod plx_depth_bench
	;;
*) not_ok "unknown WORKLOAD '${WORKLOAD:-}'" ;;
esac
for f in /sys/kernel/debug/rust_plx_dma-*/stats; do
	echo "PROFILE driver $(tr '\n' ' ' <"$f" | sed 's/: /=/g')"
done
rmmod rust_plx_dma
check "profile workload ran" true
finish
