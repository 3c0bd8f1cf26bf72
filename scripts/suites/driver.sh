# SPDX-License-Identifier: GPL-2.0
# Suite: rust_plx_dma under dmatest, terminate, unbind and rmmod, beside the C plx_dma, on the debug kernel
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

# make check: 500 verified 16 KiB dmatest copies a channel and 25 of
# 1 MiB; make soak: 25,000 a channel (100,000 in all) and 1,000 of 1 MiB, or
# SOAK_COPIES and SOAK_BIG_COPIES (the soak's million verified copies come
# from the fault-matrix suite's deep-queue load, 30 times faster than
# dmatest's one copy at a time); plx_style_client churns its channel 10
# times, 200 in soak (SOAK_CHURN).
export GUEST_PARAMS="ITERS=500 BIG_ITERS=25"
timeout=1800
if [ -n "${PLX_SOAK:-}" ]; then
	export GUEST_PARAMS="ITERS=${SOAK_COPIES:-25000} BIG_ITERS=${SOAK_BIG_COPIES:-1000} STYLE_CHURN=${SOAK_CHURN:-200}"
	timeout=$((3600 + ${SOAK_COPIES:-25000} / 30))
fi
rc=0
run_emulated_guest driver 4 "$timeout" "$REPO/scripts/suites/driver.guest.sh" || rc=$?
guest_points driver
check "driver guest ran to the end with status 0, no splat" test "$rc" -eq 0
finish
