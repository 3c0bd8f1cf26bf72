# SPDX-License-Identifier: GPL-2.0
# Guest-side TAP helpers, sourced by the suites' guest scripts.  Test points
# are unnumbered; the host numbers them.  `finish` exits 1 if any failed.

failures=0

ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; failures=$((failures + 1)); }

# check DESCRIPTION COMMAND...: one test point from a command's status; its
# output is kept as TAP diagnostics.
check() {
	local desc=$1 out
	shift
	if out=$("$@" 2>&1); then
		ok "$desc"
	else
		not_ok "$desc"
		printf '%s\n' "$out" | sed 's/^/# /'
	fi
}

finish() { [ "$failures" -eq 0 ]; exit $?; }
