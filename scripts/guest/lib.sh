# SPDX-License-Identifier: GPL-2.0
# Guest-side TAP helpers, sourced by the suites' guest scripts.  Test points
# are unnumbered; the host numbers them.  `finish` exits 1 if any failed.

failures=0

# The run's parameters (NAME=VALUE lines from $GUEST_PARAMS on the host).
[ -r /guest/params.sh ] && . /guest/params.sh

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

# depth_load SIZE DEPTH CHANNELS COPIES [TIMEOUT_MS]: one load of the
# deep-queue client plx_depth_bench (unloaded after it); prints the kernel
# log from just before the load, where its result lines are, and returns
# the load's status.
depth_load() {
	local mark="depth-$$-$(date +%s)-$RANDOM" rc=0
	echo "$mark" >/dev/kmsg
	modprobe plx_depth_bench size="$1" depth="$2" channels="$3" copies="$4" \
		timeout_ms="${5:-10000}" || rc=$?
	rmmod plx_depth_bench 2>/dev/null
	dmesg | sed -n "/$mark/,\$p"
	return "$rc"
}

# host_ctl CMD...: has the host run the emulator control command CMD (e.g.
# "fault 0 fail-read 3"; see plx-dma-emu.rst), and gives it time to. The
# request goes straight to the results port, so it works inside `check`;
# the host relays it within a fifth of a second (the second of grace is
# for a busy host), and its reply is logged
# to build/results/NAME.hostctl.log.
host_ctl() {
	echo "HOST-CTL $*" >/dev/ttyS1
	sleep 1
}

# calibrated FUNC ARGS...: FUNC, a perftest run that leaves its logs in
# /tmp/perftest-*.log, again (three times at most) while perftest could
# not calibrate its clock: under TCG its r^2 check can fail, and then it
# prints no figures and exits 1 after the transfer ("Can't produce a
# report"), which says nothing of the device either way.
calibrated() {
	for try in 1 2 3; do
		rm -f /tmp/perftest-*.log
		"$@" && return 0
		grep -q "Can't produce a report" /tmp/perftest-*.log 2>/dev/null || return 1
		echo "# perftest could not calibrate its clock (try $try)"
	done
	return 1
}

# roce_netdev IP: brings up dummy0 with IP/24 and prints its ifindex, for
# `modprobe plx_rdma ifindex=N`.  plx_rdma's port is RoCEv2 on that netdev:
# ib_core turns its addresses into the port's GIDs, and rdma_cm resolves IP
# to it; without one, a QP has no path and cannot reach RTR.
roce_netdev() {
	/usr/sbin/ip link set lo up
	/usr/sbin/ip link show dummy0 >/dev/null 2>&1 || /usr/sbin/ip link add dummy0 type dummy
	/usr/sbin/ip addr replace "$1/24" dev dummy0
	/usr/sbin/ip link set dummy0 up
	cat /sys/class/net/dummy0/ifindex
}

# load_refused MODULE PARAM=VALUE MESSAGE: loading MODULE with PARAM fails
# with EINVAL and logs MESSAGE, and the module stays unloaded. For `check`.
load_refused() {
	local err
	err=$(modprobe "$1" "$2" 2>&1) && rmmod "$1"
	echo "$err"
	echo "$err" | grep -q 'Invalid argument' &&
		dmesg | grep -qF "$3" &&
		! grep -q "^$1 " /proc/modules
}

# kselftest_points TAP: one test point per result of a kselftest run; a
# skipped kselftest is a failure (every suite gives what its tests need).
kselftest_points() {
	while read -r line; do
		case "$line" in
		"ok "*"# SKIP"*) not_ok "kselftest skipped: ${line#ok }" ;;
		"ok "*) ok "kselftest ${line#ok }" ;;
		"not ok "*) not_ok "kselftest ${line#not ok }" ;;
		esac
	done <"$1"
}
