# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "fault-matrix": every fault the bench can cause, once
# on an idle channel and once under a deep-queue load, on the debug kernel.
#
# The load is plx_load_client (tools/testing/dma-callbacks/): $LOAD_DEPTH
# copies of 64 B to 16 KiB in flight, each checked when reported done. An
# idle cell makes $IDLE_COPIES copies one at a time. Device faults are armed
# on the emulator through host_ctl just before the run, counted so that they
# fire in the middle of it. Every cell must end with: each affected copy
# reporting an error (never a success whose bytes are wrong: mismatches=0),
# every copy settled (nothing hangs past the watchdog), and the channel
# copying again afterwards (a short clean run). The whole boot must leave no
# splat and a clean kmemleak scan.
#
# Each cell prints "# MATRIX fault|column|outcome|reproduction", which the
# host half collects into build/results/fault-matrix.txt.
# Sourced at the end of emu-faults.guest.sh (make check), with MATRIX_FN the
# function to use and MATRIX_EMU_CH its emulator channel; run on its own by
# suite "fault-matrix" (make soak), on the only function.
command -v check >/dev/null || . /guest/lib.sh
. /guest/dmatest.sh # plx_functions stat_of

LOAD_DEPTH=${LOAD_DEPTH:-256}
LOAD_COPIES=${LOAD_COPIES:-2000}
# Unbind/bind and rmmod/modprobe cycles under load (make soak: 100 each).
CYCLES=${CYCLES:-2}
# make soak: one long verifying run of this many copies (0: none).
SOAK_COPIES=${SOAK_COPIES:-0}
IDLE_COPIES=6
WATCHDOG_MS=1000
DRV=/sys/bus/pci/drivers/rust_plx_dma
# Never mapped by the guest's IOMMU (see emu-faults.sh).
BAD_IOVA=0xdead0000

EMU_CH=${MATRIX_EMU_CH:-0}
if [ -n "${MATRIX_FN:-}" ]; then
	FN=$MATRIX_FN
else
	set -- $(plx_functions)
	check "one PLX-model function on the PCI bus" test "$#" -eq 1
	FN=$1
fi
check "modprobe rust_plx_dma watchdog_ms=$WATCHDOG_MS" modprobe rust_plx_dma watchdog_ms=$WATCHDOG_MS

# The channel of the function (its number changes when it comes back).
chan() { ls "/sys/bus/pci/devices/$FN/dma" 2>/dev/null | head -n 1; }

# load LABEL PARAM...: runs plx_load_client on the channel and leaves its
# status in $L_rc and its summary fields in $L_<field> (copies, done, ok,
# read_failed, write_failed, aborted, stopped, mismatches).
load() {
	label=$1
	shift
	mark="fault-matrix-$label-$$-$(date +%s%N)"
	echo "$mark" >/dev/kmsg
	L_rc=0
	modprobe plx_load_client channel="$(chan)" "$@" || L_rc=$?
	rmmod plx_load_client 2>/dev/null
	parse_load "$mark" "$label"
}

# parse_load MARK LABEL: the summary line logged after MARK, into $L_*.
parse_load() {
	line=$(dmesg | sed -n "/$1/,\$p" | sed -n 's/^\[[^]]*\] plx_load_client: //p' | tail -n 1)
	echo "# $2: ${line:-no summary} (status $L_rc)"
	L_copies=-1 L_done=-1 L_ok=-1 L_read_failed=-1 L_write_failed=-1 L_aborted=-1 L_stopped=-1 L_mismatches=-1
	eval "$(printf '%s\n' "$line" | tr ' ' '\n' |
		sed -nE 's/^(copies|done|ok|read_failed|write_failed|aborted|stopped|mismatches)=([0-9]+)$/L_\1=\2/p')"
}

# load_start PARAM...: starts a long plx_load_client (256 deep, up to 16 KiB)
# in the background, waits until it has submitted copies (at most 20 s:
# loading its module alone can take over a second on a slow guest, and a
# cell must not take the device away before the load holds the channel),
# then gives it a second to fill its queue.  The channel's submission count
# says so, not its occupancy: the client verifies every copy with the CPU,
# so its engine's ring sits empty most of the time, and a poll of the
# occupancy every 100 ms could miss a whole short load.
load_start() {
	mark="fault-matrix-bg-$$-$(date +%s%N)"
	echo "$mark" >/dev/kmsg
	before=$(stat_of "$FN" submitted 2>/dev/null)
	modprobe plx_load_client channel="$(chan)" depth=$LOAD_DEPTH copies=10000000 max_size=16384 "$@" &
	bg=$!
	i=0
	while [ "$i" -lt 200 ] && kill -0 "$bg" 2>/dev/null &&
		! [ "$(stat_of "$FN" submitted 2>/dev/null)" -gt "${before:-0}" ] 2>/dev/null; do
		sleep 0.1
		i=$((i + 1))
	done
	sleep 1
}

# load_wait LABEL: waits for the load load_start began; its status and
# summary in $L_*.
load_wait() {
	L_rc=0
	wait "$bg" || L_rc=$?
	rmmod plx_load_client 2>/dev/null
	parse_load "$mark" "$1"
}

# no_load: the $L_* of a cell that ran no load.
no_load() {
	L_copies=0 L_done=0 L_ok=0 L_read_failed=0 L_write_failed=0 L_aborted=0 L_mismatches=0 L_stopped=0 L_rc=0
}

# clean_run: the channel copies again, every copy right.
clean_run() {
	load clean depth=32 copies=64 max_size=16384
	test "$L_rc" -eq 0 -a "$L_ok" -eq 64 -a "$L_mismatches" -eq 0
}

# settled: the last run ended by itself, all it submitted settled, and no
# copy reported done was wrong.
settled() {
	test "$L_rc" -eq 0 -a "$L_copies" -ge 0 -a "$L_done" -eq "$L_copies" -a "$L_mismatches" -eq 0
}

summary() {
	errors=$((L_read_failed + L_write_failed + L_aborted))
	echo "$L_done settled: $L_ok ok, $L_read_failed read failed, $L_write_failed write failed, $L_aborted aborted; $L_mismatches wrong"
}

# cell FAULT COLUMN REPRO VERDICT...: one matrix cell. VERDICT is a command
# that holds when the outcome is right; the channel must copy again after.
cell() {
	fault=$1 column=$2 repro=$3
	shift 3
	verdict=ok
	"$@" || verdict=fail
	outcome=$(summary)
	if [ "$verdict" = ok ] && ! clean_run; then
		verdict=fail outcome="$outcome; the channel did not copy again"
	else
		outcome="$outcome; channel copies again"
	fi
	echo "# MATRIX $fault|$column|$outcome|$repro"
	if [ "$verdict" = ok ]; then
		ok "$fault, $column: $outcome"
	else
		not_ok "$fault, $column: $outcome"
	fi
}

# run_params COLUMN: plx_load_client parameters of a column.
run_params() {
	case "$1" in
	idle) echo "depth=1 copies=$IDLE_COPIES max_size=16384" ;;
	load) echo "depth=$LOAD_DEPTH copies=$LOAD_COPIES max_size=16384" ;;
	esac
}

# at COLUMN IDLE LOAD: the fault's count for the column (an idle run fires
# it on copy IDLE, a loaded one on event LOAD, mid-run).
at() { if [ "$1" = idle ]; then echo "$2"; else echo "$3"; fi; }

# --- device faults, armed on the emulator -------------------------------
# device_fault NAME COLUMN N EXPECT: arms NAME with count N, runs the
# column's load; EXPECT (errors, none) says whether copies must fail.
device_fault() {
	name=$1 column=$2 n=$3 expect=$4
	host_ctl fault "$EMU_CH" "$name" "$n"
	load "$name-$column" $(run_params "$column")
	settled || return 1
	case "$expect" in
	read) test "$L_read_failed" -ge 1 ;;
	write) test "$L_write_failed" -ge 1 ;;
	errors) test $((L_read_failed + L_write_failed + L_aborted)) -ge 1 ;;
	none) test "$L_ok" -eq "$L_copies" -a "$L_copies" -eq "$(copies_of "$column")" ;;
	esac
}
copies_of() { if [ "$1" = idle ]; then echo "$IDLE_COPIES"; else echo "$LOAD_COPIES"; fi; }

for column in idle load; do
	p=$(run_params "$column")
	for spec in "read fail:fail-read:3:1000:read" "write fail:fail-write:3:1000:write" \
		"invalid descriptor:invalid-desc:3:1000:errors" \
		"lost IRQ:drop-irq:3:10:none" "spurious IRQ:spurious-irq:3:1000:none" \
		"duplicate IRQ:dup-irq:3:10:none"; do
		old_ifs=$IFS IFS=:
		set -- $spec
		IFS=$old_ifs title=$1 name=$2 idle_n=$3 load_n=$4 expect=$5
		n=$(at "$column" "$idle_n" "$load_n")
		cell "$title" "$column" "host_ctl fault $EMU_CH $name $n; modprobe plx_load_client $p" \
			device_fault "$name" "$column" "$n" "$expect"
	done
done

# --- an unmapped IOVA: a real DMAR fault --------------------------------
unmapped() {
	column=$1 n=$2
	before=$(dmesg | grep -c "DMAR: \[DMA Read [^]]*\] Request device \[$FN\] fault addr $BAD_IOVA " || true)
	load "unmapped-$column" $(run_params "$column") bad_copy="$n" bad_iova=$BAD_IOVA
	after=$(dmesg | grep -c "DMAR: \[DMA Read [^]]*\] Request device \[$FN\] fault addr $BAD_IOVA " || true)
	echo "# DMAR read faults at $BAD_IOVA: $before before, $after after"
	settled && test "$L_read_failed" -ge 1 -a "$after" -gt "$before"
}
for column in idle load; do
	n=$(at "$column" 3 1000)
	cell "unmapped IOVA" "$column" "modprobe plx_load_client $(run_params "$column") bad_copy=$n bad_iova=$BAD_IOVA" \
		unmapped "$column" "$n"
done

# --- a descriptor that never finishes: the stall watchdog ---------------
stalled() {
	column=$1 n=$2
	before=$(stat_of "$FN" stalls)
	host_ctl fault "$EMU_CH" hang "$n"
	load "hang-$column" $(run_params "$column")
	after=$(stat_of "$FN" stalls)
	echo "# watchdog stalls: $before before, $after after"
	settled && test "$L_aborted" -ge 1 -a "$after" -eq $((before + 1))
}
for column in idle load; do
	n=$(at "$column" 3 1000)
	cell "stall past the watchdog" "$column" "host_ctl fault $EMU_CH hang $n; modprobe plx_load_client $(run_params "$column")" \
		stalled "$column" "$n"
done

# --- the device goes away: unbind, hot removal --------------------------
# gone COLUMN HOW: takes the function away (unbind, or the PCI core's
# removal) and brings it back; under load, while copies are in flight.
gone() {
	column=$1 how=$2
	[ "$column" = load ] && load_start
	case "$how" in
	unbind) echo "$FN" >$DRV/unbind ;;
	remove) echo 1 >"/sys/bus/pci/devices/$FN/remove" ;;
	esac
	if [ "$column" = load ]; then
		load_wait "$how-load"
	else
		no_load
	fi
	case "$how" in
	unbind) echo "$FN" >$DRV/bind ;;
	remove) echo 1 >/sys/bus/pci/rescan ;;
	esac
	test -n "$(chan)" || return 1
	[ "$column" = idle ] && return 0
	# The load stopped when the channel went, and what it had in flight
	# settled (aborted), none of it reported done with wrong bytes.
	settled && test "$L_stopped" -eq 1
}
for column in idle load; do
	cell "unbind" "$column" "echo $FN >$DRV/unbind; echo $FN >$DRV/bind" gone "$column" unbind
	cell "hot removal (PCI core)" "$column" "echo 1 >/sys/bus/pci/devices/$FN/remove; echo 1 >/sys/bus/pci/rescan" \
		gone "$column" remove
done

# --- rmmod ---------------------------------------------------------------
# rmmod_cell COLUMN [MS]: idle, the driver goes and comes back; under load
# (for MS milliseconds, 3000 by default), rmmod is refused while the load
# holds the channel, which it does not disturb, and succeeds after.
rmmod_cell() {
	column=$1 ms=${2:-3000}
	if [ "$column" = load ]; then
		load_start duration_ms="$ms"
		refused=0
		rmmod rust_plx_dma 2>/dev/null || refused=1
		load_wait rmmod-load
		echo "# rmmod during the load refused: $refused"
		settled && test "$refused" -eq 1 -a "$L_ok" -eq "$L_copies" || return 1
	else
		no_load
	fi
	rmmod rust_plx_dma && modprobe rust_plx_dma watchdog_ms=$WATCHDOG_MS
}
for column in idle load; do
	cell "rmmod" "$column" "rmmod rust_plx_dma; modprobe rust_plx_dma (under load: while plx_load_client duration_ms=3000 runs)" rmmod_cell "$column"
done

# --- cycles under load ---------------------------------------------------
# Each unbind cycle takes the function away from a running load and binds
# it again; each rmmod cycle has rmmod refused while a load runs, then
# removes and reloads the driver. Every load must settle with no wrong copy.
cycles() {
	i=0
	while [ "$i" -lt "$CYCLES" ]; do
		gone load unbind >/dev/null || { echo "unbind cycle $i failed"; return 1; }
		rmmod_quick || { echo "rmmod cycle $i failed"; return 1; }
		i=$((i + 1))
	done
	clean_run
}
# rmmod_quick: rmmod_cell with a load of two seconds.
rmmod_quick() {
	rmmod_cell load 2000 >/dev/null
}
check "$CYCLES unbind/bind and $CYCLES rmmod/modprobe cycles, each under a 256-deep load" cycles

# --- make soak: one long verifying run -----------------------------------
if [ "$SOAK_COPIES" -gt 0 ]; then
	soak_run() {
		load soak depth=$LOAD_DEPTH copies="$SOAK_COPIES" max_size=4096 timeout_ms=60000
		test "$L_rc" -eq 0 -a "$L_ok" -eq "$SOAK_COPIES" -a "$L_mismatches" -eq 0
	}
	check "$SOAK_COPIES verified copies of 64 B to 4 KiB, 256 deep, none wrong" soak_run
fi

finish
