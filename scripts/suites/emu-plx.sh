# SPDX-License-Identifier: GPL-2.0
# Suite: the upstream C plx_dma drives the emulated engine behind intel-iommu; dmatest verifies 10,000 copies
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

emu=$("$REPO/scripts/emu-build.sh")
rc=0
"$REPO/scripts/guest-run.sh" -n emu-plx -t 1200 \
	-d "emu*2=exec $emu \$(printf -- '--socket %s ' \$SOCKETS)" \
	-a "$REPO/scripts/guest/dmatest.sh:/guest/dmatest.sh" \
	"$REPO/scripts/suites/emu-plx.guest.sh" || rc=$?
grep -E '^(ok|not ok|#)' "$REPO/build/results/emu-plx.guest.tap" || true
check "emu-plx guest ran to the end with status 0, no splat" test "$rc" -eq 0
finish
