# SPDX-License-Identifier: GPL-2.0
# Suite: rust_plx_dma on the emulated engine's faults behind intel-iommu, emulator on its mapped path: unmapped IOVAs (DMAR fault, RD_FAIL/WR_FAIL through the miss fallback), injected fail-read, fail-write, invalid-desc, stall, drop-irq, dup-irq; then the fault matrix (every fault idle and under a 256-deep load, unbind, hot removal, rmmod, cycles) on a fourth channel
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

STALL_MS=1500
# Never mapped by the guest's IOMMU: its IOVA allocator works down from 4 GiB
# and this bench maps a few MiB at most.
BAD_IOVA=0xdead0000
results=$REPO/build/results
mkdir -p "$results"
# The guest reads them from /guest/params.sh.
export GUEST_PARAMS="STALL_MS=$STALL_MS BAD_IOVA=$BAD_IOVA"

# One emulator, four channels, faults armed at start: channel 0 gets the
# unmapped IOVAs and the injected data faults, channel 1 the interrupt faults
# and invalid-desc, channel 2 a stall on every descriptor; channel 3 none,
# for the fault matrix at the end of the boot, whose faults the guest arms
# as it goes.  Which copy each
# count lands on is worked out in emu-faults.guest.sh.  The emulator runs
# its mapped path, the bench's fast path: the unmapped IOVAs miss its table
# and must still reach the guest IOMMU through DMA messages.
EMU_ARGS="--mapped --fault 0:fail-read=5 --fault 0:fail-write=6"
# The duplicate (sent 2 ms after its original, from a thread) comes five
# copies before the dropped interrupt: were it late enough to land after
# copy 6, it would reap the copy whose interrupt was dropped.
EMU_ARGS+=" --fault 1:invalid-desc=2 --fault 1:dup-irq=1 --fault 1:drop-irq=6"
EMU_ARGS+=" --fault 2:stall=$STALL_MS"
rc=0
run_emulated_guest emu-faults 4 900 "$REPO/scripts/suites/emu-faults.guest.sh" \
	-a "$REPO/scripts/suites/fault-matrix.guest.sh:/guest/fault-matrix.sh" || rc=$?
guest_points emu-faults | grep -v '^# MATRIX ' 
check "emu-faults guest ran to the end with status 0, no splat" test "$rc" -eq 0

# The emulator's side: each fault fired exactly once, on its own channel.
log=$results/emu-faults.emu.log
# emu_saw COUNT CHANNEL TEXT: the emulator logged TEXT for CHANNEL COUNT times.
emu_saw() {
	local n
	n=$(grep -F "plx-dma-emu: $2: " "$log" 2>/dev/null | grep -cF -- "$3" || true)
	check "emulator $2 logged '$3' $1 time(s) (saw $n)" test "$n" -eq "$1"
}
emu_saw 1 ch0 "source read at +0x0 (IOVA $BAD_IOVA) failed"
emu_saw 1 ch0 "destination write at +0x0 (IOVA $BAD_IOVA) failed"
emu_saw 1 ch0 "source read failed (injected)"
emu_saw 1 ch0 "destination write failed (injected)"
emu_saw 2 ch0 "fault: "
emu_saw 1 ch1 "treated as invalid"
emu_saw 1 ch1 "fault: duplicating an interrupt"
emu_saw 1 ch1 "fault: dropped an interrupt"
emu_saw 3 ch1 "fault: "
emu_saw 0 ch2 "fault: "
emu_saw 0 ch2 " failed"

# The mapped path really ran, and the misses went the message way.
n=$(grep -cE '^plx-dma-emu: ch[0-3]: info: listening on .* \(mapped path\)$' "$log" 2>/dev/null || true)
check "emulator started all four channels on the mapped path (saw $n)" test "$n" -eq 4
# stat_of_emu CHANNEL KEY: KEY from the channel's last counter line (the
# emulator prints one at each disconnect and at exit).
stat_of_emu() {
	grep "^plx-dma-emu stats $1 " "$log" 2>/dev/null | tail -n 1 | tr ' ' '\n' | sed -n "s/^$2=//p"
}
for ch in ch0 ch1 ch2; do
	check "emulator $ch counters say path=mapped" test "$(stat_of_emu $ch path)" = mapped
	grep "^plx-dma-emu stats $ch " "$log" 2>/dev/null | tail -n 1 | sed 's/^/# /'
done
misses=$(stat_of_emu ch0 mapped_misses)
check "emulator ch0: the unmapped IOVAs missed the DMA windows (mapped_misses=${misses:-?})" \
	test "${misses:-0}" -gt 0
msgs=$(stat_of_emu ch0 dma_messages) cerr=$(stat_of_emu ch0 dma_client_errors)
check "emulator ch0: the misses went to QEMU as DMA messages, refused (dma_messages=${msgs:-?} dma_client_errors=${cerr:-?})" \
	test "${msgs:-0}" -ge 2 -a "${cerr:-0}" -eq 2
# The vIOMMU maps page by page; pages that continue a window join it.
merged=0 maps=0
for ch in ch0 ch1 ch2; do
	merged=$((merged + $(stat_of_emu $ch dma_maps_merged || true) + 0))
	maps=$((maps + $(stat_of_emu $ch dma_maps || true) + 0))
done
check "emulator: page-by-page DMA_MAPs joined adjacent windows (dma_maps_merged=$merged of dma_maps=$maps)" \
	test "$merged" -gt 0 -a "$merged" -lt "$maps"
fault_matrix_report emu-faults
for ch in ch0 ch1 ch2; do
	bm=$(stat_of_emu $ch bytes_mapped) bmsg=$(stat_of_emu $ch bytes_messages)
	check "emulator $ch: payload mostly through mapped windows (bytes_mapped=${bm:-?} > bytes_messages=${bmsg:-?})" \
		test "${bm:-0}" -gt "${bmsg:-0}"
done
finish
