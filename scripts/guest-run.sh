#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Boot one bench guest: q35 under TCG, intel-iommu (caching-mode, interrupt
# remapping, split irqchip), memfd-shared RAM, vfio-user devices served by
# host processes, a serial console and a second serial port for results.
#
#   scripts/guest-run.sh [options] GUEST_SCRIPT
#     -n NAME        run name: build/results/NAME.{console,tap} (default: guest)
#     -k FLAVOUR     kernel flavour, test or bench (default: test)
#     -t SECONDS     timeout for the whole run (default: 900)
#     -d NAME[*N]=CMD
#                    start CMD on the host before boot; it must serve N
#                    (default 1) vfio-user sockets, at the paths listed in
#                    $SOCKETS ($SOCK is the first); each becomes a PCI device
#                    of the guest, in the order given.  $CONTROL is a path
#                    for its control socket.  Repeatable.
#     -c CTL         relay the guest's requests to the devices: a line
#                    "HOST-CTL ARGS..." on the results port runs
#                    "CTL --control $CONTROL ARGS..." on the host (the
#                    emulator's ctl command), logged to
#                    build/results/NAME.hostctl.log.
#     -a SRC:DST     copy SRC into the initramfs at DST (repeatable)
#     -q ARG         one more argument for QEMU (repeatable; e.g. a NIC and
#                    its network backend)
#     -A ARG         one more kernel command-line argument, after the
#                    usual ones (repeatable; e.g. swiotlb=force)
#     -i             interactive: the console is this terminal (make shell)
#     -I             count instructions: QEMU's icount with shift 0, under
#                    which the guest clock advances one nanosecond per guest
#                    instruction (one TCG thread for both vCPUs), so that a
#                    guest timing is an instruction count, free of the
#                    host's noise
#
# Exit status: the guest script's status; 124 on timeout; 125 when QEMU ended
# without the guest finishing; 126 when the console shows a kernel splat.

. "$(dirname "$0")/lib.sh"

name=guest flavour=test timeout=900 interactive=0 ctl= icount=()
devices=() extras=() qemu_extra=() kernel_extra=()
while getopts "n:k:t:d:a:c:q:A:iI" opt; do
	case "$opt" in
	n) name=$OPTARG ;;
	k) flavour=$OPTARG ;;
	t) timeout=$OPTARG ;;
	d) devices+=("$OPTARG") ;;
	a) extras+=("$OPTARG") ;;
	c) ctl=$OPTARG ;;
	q) qemu_extra+=("$OPTARG") ;;
	A) kernel_extra+=("$OPTARG") ;;
	i) interactive=1 ;;
	I) icount=(-icount shift=0,sleep=off) ;;
	*) die "usage: guest-run.sh [-n NAME] [-k FLAVOUR] [-t S] [-d NAME=CMD] [-a SRC:DST] [-q ARG] [-A ARG] [-i] [-I] SCRIPT" ;;
	esac
done
shift $((OPTIND - 1))
script=${1:-}
[ "$interactive" = 1 ] && script=${script:-/dev/null}
[ -n "$script" ] && [ -r "$script" ] || die "guest-run: no readable guest script given"
need_root guest

results=$REPO/build/results
mkdir -p "$results"
console=$results/$name.console tap=$results/$name.guest.tap
# Nothing of an earlier run of the same name may be mistaken for this one,
# not even when the builds below fail.
rm -f "$console" "$tap" "$results/$name".*.log
kb=$("$REPO/scripts/kernel-build.sh" "$flavour")
"$REPO/scripts/modules-build.sh" "$flavour" >/dev/null
# Sockets live in the cache: short paths (sun_path is 108 bytes) that the
# trixie root sees at the same place.
run=$(mktemp -d "$PLX_CACHE/run.XXXXXX")
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill_tree TERM "$p"; done
	wait 2>/dev/null || true
	rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step "initramfs for $name" "$REPO/scripts/initramfs.sh" "$kb" "$REPO/build/modules/$flavour" \
	"$run/initrd.gz" "$script" "${extras[@]}" >&2

qemu_dev=()
for spec in "${devices[@]}"; do
	dname=${spec%%=*} cmd=${spec#*=} count=1
	case "$dname" in *\**) count=${dname#*\*} dname=${dname%%\**} ;; esac
	socks=()
	for i in $(seq 0 $((count - 1))); do socks+=("$run/$dname$i.sock"); done
	SOCKETS="${socks[*]}" SOCK=${socks[0]} CONTROL=$run/$dname.ctl bash -c "$cmd" >"$results/$name.$dname.log" 2>&1 &
	pids+=($!)
	for sock in "${socks[@]}"; do
		for _ in $(seq 300); do [ -S "$sock" ] && break; sleep 0.1; done
		[ -S "$sock" ] || die "device $dname did not create $sock (see $results/$name.$dname.log)"
		qemu_dev+=(-device "{\"driver\":\"vfio-user-pci\",\"socket\":{\"path\":\"$sock\",\"type\":\"unix\"}}")
	done
done

append="console=ttyS0 panic=-1 oops=panic intel_iommu=on iommu.strict=1 loglevel=7"
append+=" kmemleak=on hung_task_panic=0"
# The test kernel's kmemleak would miss kmalloc leaks without this: a cache
# with per-CPU sheaves keeps the pointers it hands out in its sheaf arrays,
# themselves kmalloc'ed and scanned, so every fresh object looks referenced.
# A debug flag (red zones) takes the kmalloc caches off sheaves; the bench
# suite leaks blocks on purpose to prove they are reported.
[ "$flavour" = test ] && append+=" slab_debug=Z,kmalloc-*"
# 4-level paging.  With -cpu max the guest has LA57, and identify_cpu()
# rereads the boot CPU's feature bits: while LA57 reads as clear,
# pgtable_l5_enabled() is false, and an interrupt taken in that window makes
# KASAN report the 5-level direct map as a wild access (seen once in a dozen
# boots, in handle_edge_irq under identify_cpu).  Nothing here needs LA57.
append+=" no5lvl"
[ "${#kernel_extra[@]}" -gt 0 ] && append+=" ${kernel_extra[*]}"
qemu=(qemu-system-x86_64 -machine q35,memory-backend=mem,kernel-irqchip=split -accel tcg "${icount[@]}"
	-cpu max -smp 2 -m 1G -object memory-backend-memfd,id=mem,size=1G,share=on
	-device intel-iommu,caching-mode=on,intremap=on
	"${qemu_dev[@]}" "${qemu_extra[@]}"
	-display none -no-reboot -kernel "$kb/arch/x86/boot/bzImage" -initrd "$run/initrd.gz")

if [ "$interactive" = 1 ]; then
	in_root "${qemu[@]}" -serial mon:stdio -serial null -append "$append plx.shell"
	exit 0
fi

: >"$tap"
t0=$(date +%s)
in_root "${qemu[@]}" -serial "file:$console" -serial "file:$run/results" \
	-monitor none -append "$append" </dev/null >"$run/qemu.out" 2>&1 &
qpid=$!
pids+=($qpid)
status=
# Relays the HOST-CTL lines the guest wrote since the last call (the
# first device's control socket).
relayed=0
relay() {
	local line n=0
	[ -n "$ctl" ] && [ -e "$run/results" ] || return 0
	while IFS= read -r line; do
		n=$((n + 1))
		[ "$n" -gt "$relayed" ] || continue
		relayed=$n
		case "$line" in
		"HOST-CTL "*)
			# shellcheck disable=SC2086
			{ echo "> ${line#HOST-CTL }"; $ctl --control "$run/${first_device}.ctl" ${line#HOST-CTL } 2>&1; } \
				>>"$results/$name.hostctl.log"
			;;
		esac
	done < <(tr -d '\r' <"$run/results" 2>/dev/null)
}
first_device=
if [ ${#devices[@]} -gt 0 ]; then
	first_device=${devices[0]%%=*} first_device=${first_device%%\**}
fi
while kill -0 "$qpid" 2>/dev/null; do
	relay
	if [ $(($(date +%s) - t0)) -ge "$timeout" ]; then
		kill_tree TERM "$qpid"
		status=124
		break
	fi
	sleep 0.2
done
wait "$qpid" 2>/dev/null && qrc=0 || qrc=$?
tr -d '\r' <"$run/results" | grep -v -e '^GUEST-EXIT ' -e '^HOST-CTL ' >"$tap" || true
tr -d '\r' <"$console" >"$console.tmp" && mv "$console.tmp" "$console"
cat "$run/qemu.out" >>"$console"
elapsed=$(($(date +%s) - t0))

if [ -z "$status" ]; then
	status=$(tr -d '\r' <"$run/results" | sed -n 's/^GUEST-EXIT \([0-9]*\)$/\1/p' | tail -n 1)
	if [ -z "$status" ]; then
		log "$name: QEMU ended (status $qrc) before the guest finished; see $console"
		status=125
	fi
else
	log "$name: timed out after $timeout s; see $console"
fi
if ! "$REPO/scripts/splat-scan.sh" "$console" >&2; then
	log "$name: kernel splat in the console: the run FAILS ($console)"
	status=126
fi
log "$name: guest status $status after $elapsed s"
exit "$status"
