# SPDX-License-Identifier: GPL-2.0
# Suite: rust_plx_dma on the emulated engine's faults behind intel-iommu: unmapped IOVAs (DMAR fault, RD_FAIL/WR_FAIL), injected fail-read, fail-write, invalid-desc, stall, drop-irq, dup-irq
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

# One emulator, three channels, faults armed at start: channel 0 gets the
# unmapped IOVAs and the injected data faults, channel 1 the interrupt faults
# and invalid-desc, channel 2 a stall on every descriptor.  Which copy each
# count lands on is worked out in emu-faults.guest.sh.
EMU_ARGS="--fault 0:fail-read=5 --fault 0:fail-write=6"
EMU_ARGS+=" --fault 1:invalid-desc=2 --fault 1:dup-irq=4 --fault 1:drop-irq=6"
EMU_ARGS+=" --fault 2:stall=$STALL_MS"
rc=0
run_emulated_guest emu-faults 3 900 "$REPO/scripts/suites/emu-faults.guest.sh" || rc=$?
guest_points emu-faults
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
finish
