# SPDX-License-Identifier: GPL-2.0
# Suite: rust_plx_dma under dmatest, unbind and rmmod, beside the C plx_dma, on the debug kernel
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

emu=$("$REPO/scripts/emu-build.sh")
rc=0
"$REPO/scripts/guest-run.sh" -n driver -t 3600 \
	-d "emu*4=exec $emu \$(printf -- '--socket %s ' \$SOCKETS)" \
	-a "$REPO/scripts/guest/dmatest.sh:/guest/dmatest.sh" \
	"$REPO/scripts/suites/driver.guest.sh" || rc=$?
grep -E '^(ok|not ok|#)' "$REPO/build/results/driver.guest.tap" || true
check "driver guest ran to the end with status 0, no splat" test "$rc" -eq 0
finish
