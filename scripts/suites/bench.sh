# SPDX-License-Identifier: GPL-2.0
# Suite: the bench itself: IOMMU on, modules load, splat detector and bad invocations fail loudly
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

results=$REPO/build/results
guest_tap() { grep -E '^(ok|not ok|#)' "$results/$1.guest.tap" || true; }
tmp=$(mktemp -d)
trap 'umount "$tmp/full" 2>/dev/null || true; rm -rf "$tmp"' EXIT

# 1. The guest proper.
rc=0
"$REPO/scripts/guest-run.sh" -n bench -t 600 "$REPO/scripts/suites/bench.guest.sh" || rc=$?
guest_tap bench
check "bench guest ran to the end with status 0, no splat" test "$rc" -eq 0

# 2. The splat detector is real: a provoked WARN_ON must fail the run, and
# a block leaked just before the guest's closing kmemleak scans must be
# reported by them.
echo 'modprobe splat_trigger fire=1 leak=1; rmmod splat_trigger' >"$tmp/splat.sh"
rc=0
"$REPO/scripts/guest-run.sh" -n bench-splat -t 300 "$tmp/splat.sh" || rc=$?
check "a provoked WARN_ON fails the guest run (status 126)" test "$rc" -eq 126
check "the provoked WARNING is in the console log" \
	grep -q 'WARNING: .*splat_trigger' "$results/bench-splat.console"
# kmemleak's own count is a kernel message; the report bodies are printed
# by the init just before it reboots, and the console may lose the last of
# them, so one body showing the fill 0x5a is enough.
check "the closing kmemleak scans report the 8 leaked blocks" \
	test "$(sed -n 's/.*kmemleak: \([0-9]*\) new suspected memory leaks.*/\1/p' \
		"$results/bench-splat.console" | tail -n 1)" -ge 8
check "a kmemleak report shows a leaked block (1 KiB of 0x5a)" sh -c \
	"grep -A3 'unreferenced object 0x.* (size 1024)' '$results/bench-splat.console' |
		grep -q '^ *5a 5a 5a 5a 5a 5a 5a 5a 5a 5a 5a 5a 5a 5a 5a 5a'"

# 3. A run that overstays its timeout is stopped and fails.
echo 'sleep 600' >"$tmp/sleep.sh"
rc=0
"$REPO/scripts/guest-run.sh" -n bench-timeout -t 3 "$tmp/sleep.sh" 2>"$tmp/timeout.err" || rc=$?
check "a guest past its timeout fails with status 124" test "$rc" -eq 124
check "the timeout is reported" grep -q 'timed out after 3 s' "$tmp/timeout.err"

# 4. QEMU killed mid-run (once the kernel is booting) fails the run with a
# clear message.
echo 'sleep 600' >"$tmp/up.sh"
rc=0
# The console of an earlier run must not count as this guest being up.
rm -f "$results/bench-kill.console"
"$REPO/scripts/guest-run.sh" -n bench-kill -t 300 "$tmp/up.sh" 2>"$tmp/kill.err" &
runner=$!
for _ in $(seq 600); do
	grep -qs 'Linux version' "$results/bench-kill.console" && break
	sleep 0.5
done
pkill -KILL -f -- "file:$results/bench-kill.console" || true
wait "$runner" || rc=$?
check "QEMU killed mid-run fails the run (status 125)" test "$rc" -eq 125
check "the early QEMU exit is reported" grep -q 'QEMU ended .* before the guest finished' "$tmp/kill.err"

# 5. Bad invocations end with a clear message and a non-zero status.
expect_fail() {
	local desc=$1 pattern=$2 rc=0
	shift 2
	"$@" >"$tmp/out" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ] && grep -q -- "$pattern" "$tmp/out"; then
		ok "$desc"
	else
		not_ok "$desc (status $rc)"
		sed 's/^/# /' "$tmp/out"
	fi
}
expect_fail "make check SUITE=<unknown> is refused" "unknown suite 'no-such-suite'" \
	make -s -C "$REPO" check SUITE=no-such-suite
cp -r "$REPO/scripts" "$tmp/scripts"
chmod -R a+rX "$tmp"
expect_fail "not root: the environment setup refuses with a reason" "needs root" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$tmp/scripts/env-setup.sh"
expect_fail "no network to the package archive: a clear message" "cannot reach the package archive" \
	env PLX_CACHE="$tmp/nocache" PLX_MIRROR=http://127.0.0.1:9/debian "$REPO/scripts/env-setup.sh"
mkdir -p "$tmp/full"
mount -t tmpfs -o size=4m tmpfs "$tmp/full"
expect_fail "a full cache disk: a clear message before any download" "MB free under" \
	env PLX_CACHE="$tmp/full" "$REPO/scripts/env-setup.sh"
expect_fail "an unknown kernel flavour is refused" "unknown kernel flavour" \
	"$REPO/scripts/kernel-build.sh" nosuch
finish
