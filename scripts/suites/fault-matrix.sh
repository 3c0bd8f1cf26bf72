# SPDX-License-Identifier: GPL-2.0
# Suite: the fault matrix alone (make check runs it inside emu-faults; make soak here, with its cycles and long load) on the debug kernel: read fail, write fail, invalid descriptor, unmapped IOVA, stall past the watchdog, lost, spurious and duplicate IRQ, unbind, hot removal and rmmod, each on an idle channel and under a 256-deep verifying load
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

results=$REPO/build/results
mkdir -p "$results"
# One channel on the emulator's mapped path; faults are armed from the
# guest (host_ctl) right before each cell's run.
EMU_ARGS="--mapped"
# make soak: 100 unbind and 100 rmmod cycles under load (SOAK_CYCLES) and
# 1,000,000 verified copies in one run (SOAK_LOAD_COPIES); make check: 3
# cycles each and no long run.
timeout=900
if [ -n "${PLX_SOAK:-}" ]; then
	export GUEST_PARAMS="CYCLES=${SOAK_CYCLES:-100} SOAK_COPIES=${SOAK_LOAD_COPIES:-1000000}"
	timeout=$((3600 + ${SOAK_LOAD_COPIES:-1000000} / 300))
fi
rc=0
run_emulated_guest fault-matrix 1 "$timeout" "$REPO/scripts/suites/fault-matrix.guest.sh" || rc=$?
guest_points fault-matrix | grep -v '^# MATRIX '
check "fault-matrix guest ran to the end with status 0, no splat" test "$rc" -eq 0
fault_matrix_report fault-matrix
finish
