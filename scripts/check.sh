#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Run the test suites and sum them up.
#
#   scripts/check.sh            every suite, in order
#   scripts/check.sh NAME ...   the named suites
#   scripts/check.sh list       the suites and what each covers
#
# A suite is scripts/suites/NAME.sh.  It prints unnumbered TAP test points
# ("ok - ...", "not ok - ...", "# ...") on stdout; this script numbers them
# into build/results/NAME.tap.  A suite that exits non-zero without a failed
# point gets one.  The last line is "N passed, N failed".

. "$(dirname "$0")/lib.sh"

# Order matters: cheap host checks first, then the guests.
SUITES=(lint build emu run bench emu-faults uapi rdma pyverbs wire driver)
# Run only when named: their behaviour is covered in make check elsewhere
# (emu-plx's C plx_dma under dmatest by driver, the fault matrix inside
# emu-faults' boot); make soak runs fault-matrix for its long counts.
EXTRA_SUITES=(emu-plx fault-matrix)

describe() { sed -n 's/^# Suite: //p' "$REPO/scripts/suites/$1.sh"; }

if [ "${1:-}" = list ]; then
	for s in "${SUITES[@]}"; do printf '%-12s %s\n' "$s" "$(describe "$s")"; done
	for s in "${EXTRA_SUITES[@]}"; do printf '%-12s (by name only) %s\n' "$s" "$(describe "$s")"; done
	exit 0
fi
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${SUITES[@]}")
for s in "${want[@]}"; do
	[[ " ${SUITES[*]} ${EXTRA_SUITES[*]} " == *" $s "* ]] ||
		die "unknown suite '$s'; known suites: ${SUITES[*]} ${EXTRA_SUITES[*]} (make check SUITE=list)"
done
need_root check

results=$REPO/build/results
mkdir -p "$results"
passed=0 failed=0 t_all=$(date +%s) times=() failures=()
for s in "${want[@]}"; do
	log "suite $s: $(describe "$s")"
	t0=$(date +%s) rc=0
	bash "$REPO/scripts/suites/$s.sh" >"$results/$s.points" || rc=$?
	if [ "$rc" -ne 0 ] && ! grep -q '^not ok' "$results/$s.points"; then
		echo "not ok - suite $s exited with status $rc" >>"$results/$s.points"
	elif ! grep -qE '^(ok|not ok)' "$results/$s.points"; then
		echo "not ok - suite $s ran no test" >>"$results/$s.points"
	fi
	awk -v suite="$s" '
		/^(ok|not ok)( |$)/ {
			n++
			sub(/^ok( - )?/, "ok " n " - ") || sub(/^not ok( - )?/, "not ok " n " - ")
		}
		{ lines[NR] = $0 }
		END {
			print "TAP version 13"
			print "1.." n
			for (i = 1; i <= NR; i++) print lines[i]
		}' "$results/$s.points" >"$results/$s.tap"
	rm -f "$results/$s.points"
	p=$(grep -c '^ok ' "$results/$s.tap" || true)
	f=$(grep -c '^not ok ' "$results/$s.tap" || true)
	grep '^not ok ' "$results/$s.tap" | sed "s/^/  $s: /" >&2 || true
	while IFS= read -r line; do
		failures+=("$s: $line")
	done < <(grep '^not ok ' "$results/$s.tap" | cut -c1-240)
	log "suite $s: $p passed, $f failed in $(($(date +%s) - t0)) s"
	times+=("$(printf '%-12s %5d s  %4d passed  %3d failed' "$s" $(($(date +%s) - t0)) "$p" "$f")")
	passed=$((passed + p)) failed=$((failed + f))
done
log "all suites done in $(($(date +%s) - t_all)) s; TAP in $results"
printf '  %s\n' "${times[@]}" >&2
# Again at the very end, where a log's tail shows them.
[ "${#failures[@]}" -eq 0 ] || printf '  failed: %s\n' "${failures[@]}" >&2
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
