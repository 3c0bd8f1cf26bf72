# SPDX-License-Identifier: GPL-2.0
# Suite: every module builds out of tree against the test kernel, warnings as errors
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

check "modules build against the test kernel with -Werror/-Dwarnings" \
	"$REPO/scripts/modules-build.sh" test
for ko in rust_plx_dma splat_trigger plx_fault_client; do
	check "$ko.ko was produced" test -f "$(find "$REPO/build/modules/test" -name "$ko.ko" | head -n 1)"
done
finish
