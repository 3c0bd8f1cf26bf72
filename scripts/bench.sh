#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make bench`: boots of the bench kernel with two emulated channels, one
# per emulator DMA path (mapped, messages): dmatest throughput of the C
# plx_dma and rust_plx_dma side by side, engine copies against CPU copies,
# the deep-queue client on both drivers and in rust_plx_dma's completion
# modes, user-buffer copies through /dev/plx-dma-copy, and (mapped path)
# perftest on plx_rdma against rxe; one boot runs perftest across veth
# pairs, plx_rdma and rxe in their four pairings.  Then six short profile boots count
# MMIO exits, DMA messages, interrupts, IOMMU map traffic and the engine's
# time per descriptor, one boot samples where the guest kernel's CPU time
# goes on 64-byte copies (build/bench/kprofile.txt), and one, counting
# guest instructions, the length of each driver's submission path
# (build/bench/submit-cost.txt).  Last, two engine threads on the host
# alone measure the ceiling for two channels.  Writes
# build/bench/results.{csv,json}, PNG plots, and prints a table of medians
# and ratios.

. "$(dirname "$0")/lib.sh"

need_root bench
out=$REPO/build/bench
rm -rf "$out"
mkdir -p "$out"
rc=0
user=$("$REPO/scripts/user-build.sh") || die "the uAPI benchmark did not build"
rdma_userland || die "the RDMA user space did not build"
# The emulator's two DMA paths, each in its own boot: the mapped one
# (guest memory through the fds QEMU hands over with DMA_MAP) with the
# whole bench, the message one (every access a VFIO_USER_DMA_READ/WRITE
# that QEMU carries out through the vIOMMU) without perftest.
# The deep-queue client's sizes, for both drivers' boots (comma-separated:
# GUEST_PARAMS words carry no spaces).
depth_sizes=64,4096,65536,1048576
raws=()
for path in mapped message; do
	args=
	[ "$path" = mapped ] && args=--mapped
	perftest=1
	[ "$path" = message ] && perftest=0
	EMU_ARGS=$args GUEST_PARAMS="BENCH_PATH=$path PERFTEST=$perftest DEPTH_SIZES=$depth_sizes" \
		run_emulated_guest "bench-$path" 2 3600 "$REPO/scripts/bench.guest.sh" -k bench \
		-a "$user/plx_dma_copy_bench:/usr/local/bin/plx_dma_copy_bench" "${extras[@]}" >&2 || rc=$?
	[ "$rc" -eq 0 ] || die "the benchmark guest failed (status $rc); see build/results/bench-$path.console"
	cp "$REPO/build/results/bench-$path.guest.tap" "$out/raw-$path.txt"
	# The C plx_dma's deep-queue runs, in boots of their own: its queue
	# can stall for good on the emulated engine (a completion it lost,
	# bench.rst), and each such run gives up after 3 s without one. The
	# guest freezes once seen here were the client spinning at the end of
	# such a run (it now sleeps), but a release after a stall is plx_dma's
	# code: one boot per size, each well under its timeout (15 to 110 s,
	# and as much again for the same size on rust_plx_dma, the two
	# drivers taking turns in the same boot for the Rust/C ratios), so
	# that a hang would cost that size's remaining runs and 5 minutes,
	# not the rest of the grid.
	# Whatever they measured counts; the stalls and any hung boot are
	# reported.
	stalls=0
	for size in ${depth_sizes//,/ }; do
		name=bench-$path-c-$size
		EMU_ARGS=$args GUEST_PARAMS="BENCH_PATH=$path C_DEPTH_ONLY=1 DEPTH_SIZES=$size" \
			run_emulated_guest "$name" 2 300 "$REPO/scripts/bench.guest.sh" -k bench >&2 ||
			log "the plx_dma deep-queue boot at $size B on the $path path ended with status $? (see build/results/$name.console)"
		cat "$REPO/build/results/$name.guest.tap" >>"$out/raw-$path.txt"
		n=$(grep -c 'no copy completed for' "$REPO/build/results/$name.console" || true)
		stalls=$((stalls + n))
	done
	echo "BENCH stalls plx_dma $path $stalls" >>"$out/raw-$path.txt"
	raws+=("$path=$out/raw-$path.txt")
done
# RoCEv2 on the wire: plx_rdma and rxe in their four pairings across veth
# pairs, one boot (scripts/bench-wire.guest.sh), three channels: one for
# each plx_rdma device.
EMU_ARGS=--mapped GUEST_PARAMS="REPS=3" run_emulated_guest bench-wire 3 2400 \
	"$REPO/scripts/bench-wire.guest.sh" -k bench "${extras[@]}" \
	-a "$REPO/scripts/guest/roce.sh:/guest/roce.sh" >&2 || rc=$?
[ "$rc" -eq 0 ] || die "the wire benchmark guest failed (status $rc); see build/results/bench-wire.console"
cp "$REPO/build/results/bench-wire.guest.tap" "$out/raw-wire.txt"
raws+=("wire=$out/raw-wire.txt")
# Profile boots: one workload each, one channel, so that the emulator's
# final counters (its log) and the driver's count that workload alone.
for path in mapped message; do
	args=
	[ "$path" = mapped ] && args=--mapped
	for workload in dmatest depth16 depth256; do
		name=bench-profile-$path-$workload
		EMU_ARGS=$args GUEST_PARAMS="WORKLOAD=$workload BENCH_PATH=$path" \
			run_emulated_guest "$name" 1 900 "$REPO/scripts/bench-profile.guest.sh" -k bench >&2 || rc=$?
		[ "$rc" -eq 0 ] || die "the profile guest failed (status $rc); see build/results/$name.console"
		{
			grep -E '^PROFILE (driver|run) ' "$REPO/build/results/$name.guest.tap" | sed 's/^PROFILE //'
			grep '^plx-dma-emu stats ch0 ' "$REPO/build/results/$name.emu.log" | tail -n 1
		} | sed "s/^/PROFILE $path $workload /" >>"$out/profile-raw.txt"
	done
done
raws+=("profile=$out/profile-raw.txt")
# Where the guest kernel spends its CPU on 64-byte copies 256 deep, for
# each driver: sampled with plx_kprofile (software cpu-clock, no PMU under
# TCG). Informative, so a C boot that stalls does not fail the bench.
EMU_ARGS=--mapped run_emulated_guest bench-kprofile 2 600 "$REPO/scripts/bench-kprofile.guest.sh" -k bench \
	-a "$user/plx_kprofile:/usr/local/bin/plx_kprofile" >&2 ||
	log "the kernel-profile boot ended with status $? (see build/results/bench-kprofile.console)"
grep '^KPROFILE ' "$REPO/build/results/bench-kprofile.guest.tap" | sed 's/^KPROFILE //' >"$out/kprofile.txt" || true
grep -q "^rust_plx_dma [0-9]" "$out/kprofile.txt" ||
	die "the kernel profile of rust_plx_dma is missing (see build/results/bench-kprofile.console)"
# How many guest instructions each driver's submission and completion
# paths take per copy: plx_submit_cost under instruction counting, where
# the guest's nanoseconds are instructions, so the figures do not move
# with the host.
EMU_ARGS=--mapped run_emulated_guest bench-cost 1 600 "$REPO/scripts/bench-cost.guest.sh" -k bench -I >&2 ||
	log "the submission-cost boot ended with status $? (see build/results/bench-cost.console)"
grep '^COST ' "$REPO/build/results/bench-cost.guest.tap" | sed 's/^COST //' >"$out/submit-cost.txt" || true
grep -q "driver=rust_plx_dma " "$out/submit-cost.txt" ||
	die "the submission cost of rust_plx_dma is missing (see build/results/bench-cost.console)"
raws+=("cost=$out/submit-cost.txt")
# What the host gives two engines copying at once with nothing else
# running: the ceiling the guest's two-channel figures are read against.
emu=$("$REPO/scripts/emu-build.sh") || die "the emulator did not build"
"$emu" bench-engines --seconds 2 >"$out/host-engines.txt" ||
	die "plx-dma-emu bench-engines failed"
raws+=("engines=$out/host-engines.txt")
python3 "$REPO/scripts/bench-report.py" "$out" "${raws[@]}" | tee "$out/table.txt"
{
	echo
	echo "Guest kernel CPU samples, 64 B copies 256 deep (plx_kprofile, top 10 per driver):"
	for drv in rust_plx_dma plx_dma; do
		grep "^$drv total=" "$out/kprofile.txt" || true
		grep "^$drv [0-9]" "$out/kprofile.txt" | head -n 10 |
			awk '{ printf "  %-13s %6d %5.1f%%  %s\n", $1, $2, $3, $4 }'
		grep "^$drv run " "$out/kprofile.txt" || true
	done
} | tee -a "$out/table.txt"
in_root gnuplot -e "out='$out'" "$REPO/scripts/bench-plots.gp" ||
	die "gnuplot failed to draw the plots"
log "results in $out: results.csv results.json table.txt and the plots (*.png)"
