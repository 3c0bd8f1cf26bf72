# SPDX-License-Identifier: GPL-2.0
# Guest half of the bench's kernel-profile boot: 64-byte copies 256 deep
# (plx_depth_bench, where the guest CPU, not the engine, is the limit) on
# each driver in turn, under plx_kprofile, which prints the kernel
# functions that took the most CPU samples.  rust_plx_dma runs first: the
# C plx_dma's queue may stall on the emulated engine (see bench.rst).
. /guest/lib.sh

echo 0 >/proc/sys/kernel/kptr_restrict
echo -1 >/proc/sys/kernel/perf_event_paranoid
for drv in rust_plx_dma plx_dma; do
	modprobe "$drv" || { not_ok "modprobe $drv"; continue; }
	check "plx_kprofile around 200,000 copies of 64 B, 256 deep, on $drv" sh -c \
		"/usr/local/bin/plx_kprofile 20000 ${KPROFILE_TOP:-20} modprobe plx_depth_bench size=64 depth=256 copies=200000 timeout_ms=3000 >/tmp/kprofile 2>&1"
	sed "s/^PROFILE /KPROFILE $drv /" /tmp/kprofile
	rmmod plx_depth_bench 2>/dev/null
	dmesg | grep 'plx_depth_bench: chan=' | tail -n 1 | sed "s/^.*plx_depth_bench: /KPROFILE $drv run /"
	rmmod "$drv"
done
finish
