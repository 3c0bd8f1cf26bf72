# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "emu-faults": rust_plx_dma drives three emulated
# channels whose faults were armed when the emulator started (see
# emu-faults.sh); the test-only client plx_fault_client makes numbered copies
# through one channel per load and prints one line per copy, which this
# script holds against the device's documented behaviour.
#
# Counted faults count events of their channel since the emulator started,
# and nothing but these copies runs on a channel, so each count lands on a
# known copy:
#
#   dma0 (emulator ch0)  fail-read=5 fail-write=6, 8 copies:
#     1 ok, 2 source unmapped, 3 destination unmapped, 4 ok,
#     5 injected fail-read (5th descriptor reaching its data phase), 6 ok,
#     7 injected fail-write (6th descriptor whose read was not failed by
#       injection: 1-4 and 6 came before it), 8 ok.
#   dma1 (ch1)  invalid-desc=2 dup-irq=1 drop-irq=6, 7 copies, one
#     interrupt each: 1 ok, 2 invalid, 3 ok, 4 interrupt sent twice, 5 ok,
#     6 interrupt dropped, 7 ok.
#   dma2 (ch2)  stall=$STALL_MS on every descriptor: one copy that gives up
#     before the stall ends, then two that wait it out.
#   dma3 (ch3)  nothing armed: the fault matrix runs on it at the end.
#
# The driver's stall watchdog is off (watchdog_ms=0) for these, so that the
# client's own polling is what finds a copy whose interrupt was dropped. Then
# the driver is reloaded with a watchdog shorter than the stall and two more
# copies on ch2 must be aborted by it.
. /guest/lib.sh
. /guest/dmatest.sh # plx_functions pci_of stat_of
# STALL_MS and BAD_IOVA come from /guest/params.sh (lib.sh reads it).

SIZE=16384
# dma1's wait per copy: a copy whose interrupt is dropped takes this long.
IRQ_TIMEOUT_MS=3000
DRV=/sys/bus/pci/drivers/rust_plx_dma


# client LABEL PARAM...: loads plx_fault_client once with PARAMs and unloads
# it; its lines, without the prefix, are left in $OUT and kept as TAP
# diagnostics.
client() {
	label=$1
	shift
	mark="emu-faults-$label-$(date +%s)"
	echo "$mark" >/dev/kmsg
	loaded=0
	modprobe plx_fault_client "$@" || loaded=$?
	rmmod plx_fault_client 2>/dev/null
	OUT=$(dmesg | sed -n "/$mark/,\$p" | sed -n 's/^\[[^]]*\] plx_fault_client: //p')
	printf '%s\n' "$OUT" | sed "s/^/# $label: /"
	check "$label: plx_fault_client $* ran" test "$loaded" -eq 0
}

# copy_has LABEL N KEY=VALUE...: copy N's line carries every KEY=VALUE.
copy_has() {
	label=$1 n=$2
	shift 2
	line=$(printf '%s\n' "$OUT" | grep "^copy=$n ")
	for kv in "$@"; do
		case " $line " in
		*" $kv "*) ;;
		*)
			not_ok "$label: copy $n: $*"
			echo "# got: ${line:-no line for copy $n}"
			return
			;;
		esac
	done
	ok "$label: copy $n: $*"
}

# ms_of N: how long copy N took, in ms.
ms_of() { printf '%s\n' "$OUT" | sed -n "s/^copy=$1 .* ms=\([0-9]*\) .*/\1/p"; }

# copy_ms LABEL N OP MS WHY: copy N took OP (-ge, -lt) MS milliseconds.
copy_ms() {
	ms=$(ms_of "$2")
	check "$1: copy $2 took ${ms:-?} ms, $3 $4 ($5)" test "${ms:--1}" "$3" "$4"
}

# summary_is LABEL TEXT: the client's summary line ends with TEXT.
summary_is() {
	line=$(printf '%s\n' "$OUT" | grep '^done ')
	case "$line" in
	*" $2") ok "$1: summary $2" ;;
	*)
		not_ok "$1: summary $2"
		echo "# got: ${line:-no summary line}"
		;;
	esac
}

# stats_are LABEL FUNCTION KEY=VALUE...: the driver's debugfs counters.
stats_are() {
	label=$1 f=$2
	shift 2
	got=
	bad=0
	for kv in "$@"; do
		v=$(stat_of "$f" "${kv%%=*}")
		got="$got ${kv%%=*}=$v"
		[ "$v" = "${kv#*=}" ] || bad=1
	done
	if [ "$bad" -eq 0 ]; then
		ok "$label: rust_plx_dma counters$got"
	else
		not_ok "$label: rust_plx_dma counters $*"
		echo "# got:$got"
	fi
}

# dmar_faults KIND FUNCTION ADDR: DMAR fault reports of KIND (Read, Write)
# for FUNCTION at ADDR since boot.  The report comes from the IOMMU's fault
# interrupt, independently of the copy's completion: give it a few seconds.
dmar_faults() {
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		n=$(dmesg | grep -c "DMAR: \[DMA $1 [^]]*\] Request device \[$2\] fault addr $3 " || true)
		[ "$n" -gt 0 ] && break
		sleep 0.5
	done
	echo "$n"
}

check "four PLX-model functions on the PCI bus" test "$(plx_functions | wc -l)" -eq 4
check "modprobe rust_plx_dma watchdog_ms=0" modprobe rust_plx_dma watchdog_ms=0
check "rust_plx_dma bound all four" test "$(ls $DRV | grep -c :)" -eq 4
F0=$(pci_of 0) F1=$(pci_of 1) F2=$(pci_of 2) F3=$(pci_of 3)
echo "# dma0chan0=$F0 dma1chan0=$F1 dma2chan0=$F2 dma3chan0=$F3"
# The emulator's channels are QEMU's devices in the order given, so in bus
# order; the driver probes, and numbers the DMA devices, in bus order too.
check "dma0..dma3 are the emulator's channels 0..3 (bus order)" \
	test "$F0 $F1 $F2 $F3" = "$(plx_functions | sort | tr '\n' ' ' | sed 's/ $//')"

# --- dma0: unmapped IOVAs, injected fail-read and fail-write -------------
client dma0 chan=0 copies=8 size=$SIZE bad_src=2 bad_dst=3 bad_iova="$BAD_IOVA"
copy_has dma0 1 result=NoError residue=0 data=verified
copy_has dma0 2 src=bad result=ReadFailed residue=$SIZE data=untouched
copy_has dma0 3 dst=bad result=WriteFailed residue=$SIZE
copy_has dma0 4 result=NoError residue=0 data=verified
copy_has dma0 5 src=buf result=ReadFailed residue=$SIZE data=untouched
copy_has dma0 6 result=NoError residue=0 data=verified
copy_has dma0 7 dst=buf result=WriteFailed residue=$SIZE data=untouched
copy_has dma0 8 result=NoError residue=0 data=verified
summary_is dma0 "NoError=4 ReadFailed=2 WriteFailed=2 Aborted=0 errors=0 bad_data=0"
dmesg | grep 'DMAR: \[DMA' | sed 's/^/# /'
rd=$(dmar_faults Read "$F0" "$BAD_IOVA")
wr=$(dmar_faults Write "$F0" "$BAD_IOVA")
all=$(dmesg | grep -c 'DMAR: \[DMA .* fault addr ' || true)
check "dma0: the unmapped source gave one DMAR read fault at $BAD_IOVA (saw $rd)" test "$rd" -eq 1
check "dma0: the unmapped destination gave one DMAR write fault at $BAD_IOVA (saw $wr)" test "$wr" -eq 1
check "dma0: no other DMAR fault (injected faults never reach the IOMMU; saw $all in all)" test "$all" -eq 2
# One interrupt per copy; every failed descriptor raised INTR_STATUS.ERROR
# with it, and the driver recovered each time (pause, complete, reprogram):
# the next copy worked.
stats_are dma0 "$F0" submitted=8 completed=4 failed=4 interrupts=8 recoveries=4 ring_occupancy=0

# --- dma1: invalid-desc, dup-irq, drop-irq ------------------------------
client dma1 chan=1 copies=7 size=$SIZE timeout_ms=$IRQ_TIMEOUT_MS
copy_has dma1 1 result=NoError residue=0 data=verified
# An invalid descriptor is written back without a status bit: the driver
# reports it aborted, nothing copied.
copy_has dma1 2 result=Aborted residue=$SIZE data=untouched
copy_has dma1 3 result=NoError residue=0 data=verified
copy_has dma1 4 result=NoError residue=0 data=verified
copy_has dma1 5 result=NoError residue=0 data=verified
# The dropped interrupt: the copy is done, but no one hears of it until the
# client's wait runs out and it polls the status, which reaps it.
copy_has dma1 6 result=NoError residue=0 data=verified
copy_ms dma1 6 -ge $IRQ_TIMEOUT_MS "its interrupt was dropped: found by polling"
polled=$(dmesg | grep -c "rust_plx_dma $F1: dma1chan0: copy done after $IRQ_TIMEOUT_MS ms without a completion interrupt" || true)
check "dma1: one copy reaped by polling (saw $polled)" test "$polled" -eq 1
copy_has dma1 7 result=NoError residue=0 data=verified
for n in 1 2 3 4 5 7; do
	copy_ms dma1 $n -lt $IRQ_TIMEOUT_MS "completed by its interrupt"
done
summary_is dma1 "NoError=6 ReadFailed=0 WriteFailed=0 Aborted=1 errors=0 bad_data=0"
# Seven descriptors, one interrupt each: the dropped one is never seen and
# the duplicate is taken like any other (on MSI-X the handler reads no
# status: the reap that follows finds nothing new), so seven interrupts,
# or six when the duplicate merges with its original in the eventfd before
# QEMU reads it; one completion per copy, nothing to recover.
stats_are dma1 "$F1" submitted=7 completed=6 failed=1 recoveries=0 ring_occupancy=0
irqs=$(stat_of "$F1" interrupts)
check "dma1: 6 or 7 interrupts (the duplicate taken or merged; saw $irqs)" test "$irqs" -ge 6 -a "$irqs" -le 7
grep rust_plx_dma /proc/interrupts | sed 's/  */ /g; s/^/# /'

# --- dma2: stall ---------------------------------------------------------
# A wait shorter than the stall: the client times out and terminates the
# channel, which pauses the engine before the copy starts.
short=$((STALL_MS / 5))
client dma2-timeout chan=2 copies=1 size=$SIZE timeout_ms=$short
copy_has dma2-timeout 1 error=ETIMEDOUT data=untouched
copy_ms dma2-timeout 1 -ge $short "the client waited its full timeout"
# The same channel again, waiting long enough: each copy is held up by the
# stall and then succeeds.
client dma2 chan=2 copies=2 size=$SIZE timeout_ms=$((STALL_MS * 4))
copy_has dma2 1 result=NoError residue=0 data=verified
copy_has dma2 2 result=NoError residue=0 data=verified
copy_ms dma2 1 -ge "$STALL_MS" "stalled"
copy_ms dma2 2 -ge "$STALL_MS" "stalled"
summary_is dma2 "NoError=2 ReadFailed=0 WriteFailed=0 Aborted=0 errors=0 bad_data=0"
# The terminated copy counts as failed (aborted); terminate is no recovery.
stats_are dma2 "$F2" submitted=3 completed=2 failed=1 interrupts=2 recoveries=0 ring_occupancy=0

for f in $F0 $F1 $F2; do
	sed "s/^/# $f: /" "/sys/kernel/debug/rust_plx_dma-$f/stats"
done

# --- dma1: a client lets go with a copy in flight on a busy engine --------
# The provider stops the engine under the core's global dma_list_mutex: it
# must abort at once, not wait out a graceful pause the busy engine would
# only grant after 3 s (or time out after 1 s).
host_ctl fault 1 busy 3000
mark="release-busy-$RANDOM"
echo "$mark" >/dev/kmsg
loaded=0
modprobe plx_callback_client channel=dma1chan0 cases=release-busy || loaded=$?
rmmod plx_callback_client 2>/dev/null
host_ctl fault 1 busy 0
since=$(dmesg | sed -n "/$mark/,\$p")
echo "$since" | sed -n 's/^\[[^]]*\] plx_callback_client: /# /p'
check "release-busy: dma1 released with a copy in flight within 0.5 s, the copy aborted (exit $loaded)" \
	test "$loaded" -eq 0
paused=$(echo "$since" | grep -c 'timeout waiting for graceful pause')
check "release-busy: no graceful pause was waited for (saw $paused)" test "$paused" -eq 0

# --- the stall watchdog, on dma2's stalled engine ------------------------
WATCHDOG_MS=400
check "rmmod rust_plx_dma (watchdog off)" rmmod rust_plx_dma
check "modprobe rust_plx_dma refuses watchdog_ms=5 (EINVAL, message, not loaded)" \
	load_refused rust_plx_dma watchdog_ms=5 "rust_plx_dma: watchdog_ms=5 is invalid"
check "modprobe rust_plx_dma watchdog_ms=$WATCHDOG_MS" modprobe rust_plx_dma watchdog_ms=$WATCHDOG_MS
# dma_number FUNCTION: the DMA device number of FUNCTION's channel (the
# numbers may change on reload).
dma_number() {
	for c in /sys/class/dma/dma*chan0; do
		[ "$(basename "$(readlink "$c/device")")" = "$1" ] &&
			{ c=${c#/sys/class/dma/dma}; echo "${c%chan0}"; }
	done
}
W=$(dma_number "$F2")
check "$F2 is a DMA device again (dma${W:-?})" test -n "$W"
# Each copy sits in the stalled engine; the watchdog sees no progress for
# between WATCHDOG_MS and 1.5 times that, aborts it and restarts the ring.
client watchdog chan="${W:-0}" copies=2 size=$SIZE timeout_ms=$((STALL_MS * 4))
for n in 1 2; do
	copy_has watchdog $n result=Aborted residue=$SIZE data=untouched
	copy_ms watchdog $n -ge $WATCHDOG_MS "no progress for the watchdog's timeout"
	copy_ms watchdog $n -lt "$STALL_MS" "aborted before the stall would have ended"
done
summary_is watchdog "NoError=0 ReadFailed=0 WriteFailed=0 Aborted=2 errors=0 bad_data=0"
said=$(dmesg | grep -c "rust_plx_dma $F2: no progress for $WATCHDOG_MS ms: aborting 1 unfinished descriptor(s)" || true)
check "watchdog: one message per stall (saw $said)" test "$said" -eq 2
stats_are watchdog "$F2" submitted=2 completed=0 failed=2 stalls=2 recoveries=2 ring_occupancy=0
sed "s/^/# $F2: /" "/sys/kernel/debug/rust_plx_dma-$F2/stats"
check "plx_fault_client refuses copies=0 (EINVAL, message)" \
	load_refused plx_fault_client copies=0 "plx_fault_client: copies=0 is invalid"
check "plx_fault_client refuses bad_src beyond copies (EINVAL, message)" \
	load_refused plx_fault_client bad_src=2 "plx_fault_client: bad_src=2 bad_dst=0 are invalid"
check "plx_fault_client refuses an unaligned bad_iova (EINVAL, message)" \
	load_refused plx_fault_client bad_iova=0xdead0001 "plx_fault_client: bad_iova=0xdead0001 is invalid"
check "rmmod rust_plx_dma" rmmod rust_plx_dma

# --- per-descriptor interrupts on dma3, no fault armed -------------------
# The handler's clear of INTR_STATUS is a posted write: it may land after
# the engine finished the next copy and latched DESC_DONE again, and clear
# that too, so that the copy's own interrupt finds no status.  An MSI-X
# vector is the function's own: the handler must reap anyway, or the copy
# waits for the next interrupt (with the watchdog off, for good).  Large
# copies 16 deep on the mapped path hit that window about once a thousand.
check "modprobe rust_plx_dma irq_coalesce=1 watchdog_ms=0" modprobe rust_plx_dma irq_coalesce=1 watchdog_ms=0
W=$(dma_number "$F3")
mark="emu-faults-irq-each-$(date +%s)"
echo "$mark" >/dev/kmsg
check "per-descriptor interrupts: 1000 copies of 1 MiB, 16 deep, on dma${W:-?}chan0" \
	modprobe plx_depth_bench channel="dma${W:-?}chan0" size=1048576 depth=16 copies=1000 timeout_ms=1000
rmmod plx_depth_bench 2>/dev/null
waits=$(dmesg | sed -n "/$mark/,\$p" | grep -c 'plx_depth_bench: .*waited\|no copy completed' || true)
check "per-descriptor interrupts: no copy waited a second for its completion (saw $waits)" test "$waits" -eq 0
check "rmmod rust_plx_dma (per-descriptor interrupts)" rmmod rust_plx_dma

# --- INTx on dma3 ---------------------------------------------------------
# intx=1 takes the legacy line, whose handler reads and clears INTR_STATUS
# and reads it back (the line may be shared, and a clear that lands late
# would swallow the next completion): the same load must lose nothing, and
# an engine error (a failed read, armed on the emulator) must be recovered
# through the IRQ thread.
check "modprobe rust_plx_dma refuses intx=2 (EINVAL, message, not loaded)" \
	load_refused rust_plx_dma intx=2 "rust_plx_dma: intx=2 is invalid"
mark="emu-faults-intx-$(date +%s)"
echo "$mark" >/dev/kmsg
check "modprobe rust_plx_dma intx=1 irq_coalesce=1 watchdog_ms=0" modprobe rust_plx_dma intx=1 irq_coalesce=1 watchdog_ms=0
W=$(dma_number "$F3")
check "intx=1: dma${W:-?}chan0 uses its INTx line" sh -c \
	"dmesg | sed -n '/$mark/,\$p' | grep -q 'rust_plx_dma $F3: dma${W:-?}chan0: ring of .* Intx interrupt'"
check "INTx, per-descriptor interrupts: 1000 copies of 1 MiB, 16 deep, on dma${W:-?}chan0" \
	modprobe plx_depth_bench channel="dma${W:-?}chan0" size=1048576 depth=16 copies=1000 timeout_ms=1000
rmmod plx_depth_bench 2>/dev/null
waits=$(dmesg | sed -n "/$mark/,\$p" | grep -c 'plx_depth_bench: .*waited\|no copy completed' || true)
check "INTx: no copy waited a second for its completion (saw $waits)" test "$waits" -eq 0
host_ctl fault 3 fail-read 2
client intx chan="${W:-0}" copies=3 size=$SIZE timeout_ms=$IRQ_TIMEOUT_MS
copy_has intx 1 result=NoError residue=0 data=verified
copy_has intx 2 result=ReadFailed residue=$SIZE data=untouched
copy_has intx 3 result=NoError residue=0 data=verified
stats_are intx "$F3" submitted=1003 completed=1002 failed=1 recoveries=1 ring_occupancy=0
check "rmmod rust_plx_dma (INTx)" rmmod rust_plx_dma

# The fault matrix, in the same boot, on the fourth channel (no faults armed
# at start): see fault-matrix.guest.sh.
MATRIX_FN=$F3 MATRIX_EMU_CH=3
. /guest/fault-matrix.sh
