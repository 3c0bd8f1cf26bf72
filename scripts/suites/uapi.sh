# SPDX-License-Identifier: GPL-2.0
# Suite: /dev/plx-dma-copy kselftests in the guest behind intel-iommu: sizes, alignments, threads, bad inputs, batches, pin bound, munmap races, signals, timeouts, device faults (EIO), unbind mid-copy, registered regions
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

results=$REPO/build/results
mkdir -p "$results"
selftests=$("$REPO/scripts/user-build.sh") || {
	not_ok "the kselftests build"
	finish
}
ok "the kselftests build (kselftest_harness.h, lib.mk, static)"

# Five channels: 0 and 1 work, 2 fails every source read, 3 holds each
# descriptor for STALL_MS before it starts, 4 runs each for BUSY_MS, past
# the driver's one-second graceful pause (both below its 5 s watchdog).
STALL_MS=3000
BUSY_MS=4000
EMU_ARGS="--fault 2:fail-read-all --fault 3:stall=$STALL_MS --fault 4:busy=$BUSY_MS"
# make soak: 100,000 random bad calls (SOAK_BAD_CALLS); make check: 5,000.
timeout=1200
if [ -n "${PLX_SOAK:-}" ]; then
	export GUEST_PARAMS="BAD_CALLS=${SOAK_BAD_CALLS:-100000}"
	timeout=3600
fi
rc=0
run_emulated_guest uapi 5 "$timeout" "$REPO/scripts/suites/uapi.guest.sh" \
	-a "$selftests/plx_dma_copy_test:/usr/local/bin/plx_dma_copy_test" \
	-a "$selftests/plx_dma_copy_bench:/usr/local/bin/plx_dma_copy_bench" || rc=$?
guest_points uapi
check "uapi guest ran to the end with status 0, no splat" test "$rc" -eq 0
finish
