#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Scan a guest console log for kernel splats.  Prints each offending line and
# exits 1 when it finds one, 0 when the log is clean.
#
#   scripts/splat-scan.sh CONSOLE_LOG

set -euo pipefail
log=${1:?usage: splat-scan.sh CONSOLE_LOG}
[ -r "$log" ] || { echo "splat-scan: cannot read $log" >&2; exit 2; }

# One pattern per checker whose report means the kernel saw something wrong.
patterns=(
	'WARNING: '                          # WARN_ON and friends, lockdep headers
	'BUG: '                              # BUG_ON, KASAN, sleeping in atomic, ...
	'Oops'                               # oopses
	'Kernel panic'
	'general protection fault'
	'KASAN'
	'UBSAN'
	'possible circular locking'          # lockdep
	'inconsistent lock state'
	'possible recursive locking'
	'suspicious RCU usage'
	'DMA-API: ([^ ]+ [^ ]+: |device driver)'  # DMA API debug errors
	'kmemleak: .*new suspected memory leak'
	'unreferenced object 0x'             # kmemleak report body
	'ODEBUG: '                           # debug objects
	'rcu: INFO: .*detected stall'        # RCU stalls
	'rcu_.*self-detected stall'
	'blocked for more than [0-9]+ seconds' # hung tasks
	'soft lockup'
	'list_(add|del) corruption'
	'rust_panic'
	'panicked at'
)
regex=$(IFS='|'; echo "${patterns[*]}")
if grep -nE "$regex" "$log" | tr -d '\r' | head -n 40 | sed 's/^/splat: /'; then
	exit 1
fi
exit 0
