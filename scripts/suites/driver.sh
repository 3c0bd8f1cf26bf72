# SPDX-License-Identifier: GPL-2.0
# Suite: rust_plx_dma under dmatest, terminate, unbind and rmmod, beside the C plx_dma, on the debug kernel
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

rc=0
run_emulated_guest driver 4 3600 "$REPO/scripts/suites/driver.guest.sh" || rc=$?
guest_points driver
check "driver guest ran to the end with status 0, no splat" test "$rc" -eq 0
finish
