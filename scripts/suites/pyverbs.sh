# SPDX-License-Identifier: GPL-2.0
# Suite: rdma-core's own test suite (tests/ on pyverbs, the release the provider is built for) on plx_rdma0 and on rxe0 in one guest, outcome by outcome: plx_rdma0 fails no test that rxe0 passes or skips, none of its processes dies, and what it does not implement is a clean skip
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

mkdir -p "$REPO/build/results"
suite_rdma_userland
if mapfile -t py < <("$REPO/scripts/pyverbs-userland.sh") && [ "${#py[@]}" -gt 0 ]; then
	ok "Python, pyverbs and rdma-core's test suite for the guest: ${#py[@]} files"
else
	not_ok "Python, pyverbs and rdma-core's test suite for the guest"
	finish
fi
for f in "${py[@]}"; do extras+=(-a "$f"); done
extras+=(-a "$REPO/scripts/guest/pyverbs_run.py:/guest/pyverbs_run.py")
extras+=(-a "$REPO/scripts/guest/roce.sh:/guest/roce.sh")
rc=0
run_emulated_guest pyverbs 1 1800 "$REPO/scripts/suites/pyverbs.guest.sh" "${extras[@]}" || rc=$?
guest_points pyverbs | grep -v '^# PYVERBS '
python3 "$REPO/scripts/pyverbs-compare.py" "$REPO/build/results/pyverbs.guest.tap" \
	"$REPO/build/results/pyverbs.txt" || failures=$((failures + 1))
check "pyverbs guest ran to the end with status 0, no splat" test "$rc" -eq 0
finish
