# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "driver": rust_plx_dma on two of four emulated
# functions behind intel-iommu; at the end the C plx_dma takes the other two
# and one dmatest run drives all four channels side by side.
. /guest/lib.sh
. /guest/dmatest.sh

# Copies a channel in the long runs (make soak raises both).
ITERS=${ITERS:-5000}
BIG_ITERS=${BIG_ITERS:-100}
DRV=/sys/bus/pci/drivers/rust_plx_dma

bound() { ls "$DRV" 2>/dev/null | grep -c : ; }
set -- $(plx_functions)
check "four PLX-model functions on the PCI bus" test "$#" -eq 4
rust_fns="$1 $2" c_fns="$3 $4"

# rust_plx_dma on the first two functions only.
rust_load() {
	modprobe rust_plx_dma &&
		for f in $c_fns; do echo "$f" >$DRV/unbind; done
}
check "modprobe refuses ring_size=1000 (EINVAL, message, not loaded)" \
	load_refused rust_plx_dma ring_size=1000 "rust_plx_dma: ring_size=1000 is invalid"
for bad in "irq_coalesce=0" "irq_thread=2" "poll_us=5"; do
	check "modprobe refuses $bad (EINVAL, message, not loaded)" \
		load_refused rust_plx_dma "$bad" "rust_plx_dma: $bad is invalid"
done
check "modprobe rust_plx_dma" rust_load
check "rust_plx_dma bound two functions" test "$(bound)" -eq 2
check "two channels in /sys/class/dma" test "$(ls /sys/class/dma | wc -l)" -eq 2

dmatest_run rust_plx_dma-1m "$BIG_ITERS" 1048576 2
dmatest_release

stats=$(cat /sys/kernel/debug/rust_plx_dma-*/stats 2>&1)
printf '%s\n' "$stats" | sed 's/^/# stats: /'
check "debugfs counts completed copies" sh -c "printf '%s\n' '$stats' | grep -q '^completed: [1-9]'"
check "debugfs shows no failed copy" sh -c "! printf '%s\n' '$stats' | grep -q '^failed: [1-9]'"
# On MSI-X a plain completion costs no MMIO read: dmatest keeps one copy in
# flight, so every interrupt completes one and leaves nothing unfinished.
check "MSI-X: the reap read INTR_STATUS for none of those copies" sh -c \
	"printf '%s\n' '$stats' | grep -q '^status_reads: 0$' && ! printf '%s\n' '$stats' | grep -q '^status_reads: [1-9]'"

# Four threads on each channel prepare and submit at once, the lock-free
# prep (an atomic bitmap in the pool) under contention: a descriptor handed
# to two threads shows as a refused submit or a verify failure.  A smoke
# test: dmatest's rate (tens of copies a second a thread, each mapped
# through the vIOMMU) makes a narrow race in the claim unlikely to show.
dmatest_run concurrent-prep 200 4096 2 4
dmatest_release

check "samples/rust client copies 1 MiB and verifies it" modprobe rust_dma_memcpy size=1048576
rmmod rust_dma_memcpy 2>/dev/null
check "samples/rust client refuses size=0" sh -c '! modprobe rust_dma_memcpy size=0'

# Client styles (tools/testing/dma-callbacks/plx_style_client.c): polled
# copies, odd sizes and offsets with guard bytes, a ring flooded before
# issue_pending, terminate_sync with 512 copies in flight, and
# request/copy/release churn.  One test point per case.
style_mark="style-$$-$(date +%s)"
echo "$style_mark" >/dev/kmsg
modprobe plx_style_client channel=dma0chan0 churn="${STYLE_CHURN:-10}"
style_rc=$?
rmmod plx_style_client 2>/dev/null
style_log=$(dmesg | sed -n "/$style_mark/,\$p" | sed -n 's/^\[[^]]*\] plx_style_client: //p')
printf '%s\n' "$style_log" | sed 's/^/# /'
for case in polled guard flood terminate churn; do
	check "client style '$case' on rust_plx_dma" \
		sh -c "printf '%s\n' \"\$1\" | grep -q '^ok [0-9]* $case\$'" _ "$style_log"
done
check "plx_style_client loaded (every case passed)" test "$style_rc" -eq 0
check "plx_style_client refuses churn=0" sh -c '! modprobe plx_style_client churn=0'

# terminate_all with copies in flight: stopping dmatest terminates its
# channels while copies are queued.
dmatest_stop() {
	echo 0 >$DMATEST/run
	rmmod dmatest
}
dmatest_start 1000000 65536
sleep 3
check "rmmod rust_plx_dma while dmatest holds the channels is refused" sh -c '! rmmod rust_plx_dma'
check "stopping dmatest mid-run (terminate_all in flight) returns" dmatest_stop

# Unbind while dmatest holds the channels, then let it go: the dma_device
# outlives the PCI binding until the last client releases its channel.
# (dmatest is idle here: a looping dmatest keeps buffers mapped on the
# device across its 100 ms back-off after a failed prep, which DMA-API debug
# reports at unbind whatever the provider does.)
dmatest_run hold 200 16384 2
first=${rust_fns%% *}
check "unbind $first while dmatest holds its channel" sh -c "echo $first > $DRV/unbind"
check "one function left bound" test "$(bound)" -eq 1
check "the unbound function's channel is gone from /sys/class/dma" test "$(ls /sys/class/dma | wc -l)" -eq 1
check "dmatest lets go of the channels after the unbind" dmatest_release
# pci_ext::set_dma_mask works in probe and is refused in unbind, where
# Core is held too (tools/testing/probe-rules): the test driver gets the
# unbound function through driver_override and says what each call did.
probe_rules() {
	f=/sys/bus/pci/devices/$first
	mark="probe-rules-$$-$(date +%s)"
	echo "$mark" >/dev/kmsg
	echo plx_probe_rules >"$f/driver_override" &&
		modprobe plx_probe_rules &&
		echo "$first" >/sys/bus/pci/drivers/plx_probe_rules/unbind
	rc=$?
	echo >"$f/driver_override"
	rmmod plx_probe_rules 2>/dev/null
	said=$(dmesg | sed -n "/$mark/,\$p" | sed -n "s/^\[[^]]*\] plx_probe_rules $first: //p")
	printf '%s\n' "$said" | sed 's/^/# /'
	test "$rc" -eq 0 &&
		printf '%s\n' "$said" | grep -qx 'probe: set_dma_mask=48' &&
		printf '%s\n' "$said" | grep -qx 'probe, after a registration: set_dma_mask=EBUSY' &&
		printf '%s\n' "$said" | grep -qx 'unbind: set_dma_mask=EBUSY'
}
check "set_dma_mask: 48 bits in probe, EBUSY once something is registered and in unbind (plx_probe_rules on $first)" probe_rules
check "bind $first again" sh -c "echo $first > $DRV/bind"
check "both functions bound again" test "$(bound)" -eq 2
dmatest_run rebound 200 16384 2
dmatest_release

check "rmmod rust_plx_dma" rmmod rust_plx_dma
check "modprobe rust_plx_dma again" rust_load

# The long run: the C driver takes the other two functions and one dmatest
# run covers all four channels.  The boot ends with them held.
check "modprobe plx_dma" modprobe plx_dma
check "plx_dma bound the other two functions" \
	test "$(ls /sys/bus/pci/drivers/plx_dma | grep -c :)" -eq 2
dmatest_run side-by-side-16k "$ITERS" 16384 4
for drv in rust_plx_dma plx_dma; do
	n=$(grep "\[$drv\]" /tmp/dmatest-side-by-side-16k.txt |
		sed -n 's/.*summary \([0-9]*\) tests, 0 failures.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
	check "$drv: $n copies of up to 16 KiB without failure, $((ITERS * 2)) expected" \
		test "$n" -eq $((ITERS * 2))
done
finish
