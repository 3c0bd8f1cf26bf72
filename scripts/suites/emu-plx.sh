# SPDX-License-Identifier: GPL-2.0
# Suite: the upstream C plx_dma drives the emulated engine behind intel-iommu; dmatest verifies 10,000 copies
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

rc=0
run_emulated_guest emu-plx 2 1200 "$REPO/scripts/suites/emu-plx.guest.sh" || rc=$?
guest_points emu-plx
check "emu-plx guest ran to the end with status 0, no splat" test "$rc" -eq 0
finish
