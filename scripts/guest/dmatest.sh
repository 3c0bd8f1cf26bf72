# SPDX-License-Identifier: GPL-2.0
# Guest-side dmatest driver, sourced by suites after lib.sh.
#
#   dmatest_run LABEL ITERATIONS BUF_SIZE [EXPECTED_CHANNELS]
#
# Runs dmatest (verification on) with one thread on every memcpy channel,
# waits for it, keeps its summary lines as TAP diagnostics and adds test
# points: the expected channels ran, every copy was made, none failed.
# dmatest keeps its channels until `dmatest_release`.
#
#   c_plx_dmatest LABEL ITERATIONS BUF_SIZE [EXPECTED_CHANNELS]
#
# The same on the upstream C plx_dma, bound afresh to every PLX function
# and unbound before dmatest lets go of the channels.  That order matters:
# plx_dma_free_chan_resources() calls pci_irq_vector(), which may sleep,
# under rcu_read_lock() while the device is bound, and the debug kernel
# reports it ("sleeping function called from invalid context").  Once the
# device is unbound the C driver skips that call.

DMATEST=/sys/module/dmatest/parameters

dmatest_run() {
	label=$1 iters=$2 bufsize=$3 want=${4:-1}
	modprobe dmatest || { not_ok "$label: modprobe dmatest"; return; }
	echo 0 >$DMATEST/run 2>/dev/null
	echo 5000 >$DMATEST/timeout
	echo "$iters" >$DMATEST/iterations
	echo "$bufsize" >$DMATEST/test_buf_size
	echo 1 >$DMATEST/threads_per_chan
	echo 0 >$DMATEST/noverify
	echo 0 >$DMATEST/norandom
	echo 0 >$DMATEST/max_channels
	echo "" >$DMATEST/channel
	mark="dmatest-$label-$(date +%s)"
	echo "$mark" >/dev/kmsg
	echo 1 >$DMATEST/run
	cat $DMATEST/wait >/dev/null
	summary=$(dmesg | sed -n "/$mark/,\$p" | grep 'dmatest: .*summary' | sed 's/^\[[^]]*\] //')
	printf '%s\n' "$summary" | sed "s/^/# $label: /"
	chans=$(printf '%s\n' "$summary" | grep -c summary)
	tests=$(printf '%s\n' "$summary" | sed -n 's/.*summary \([0-9]*\) tests.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
	fails=$(printf '%s\n' "$summary" | sed -n 's/.* \([0-9]*\) failures.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
	check "$label: dmatest ran on $want channel(s) (saw $chans)" test "$chans" -eq "$want"
	check "$label: $tests copies made, $((iters * want)) expected" test "$tests" -eq $((iters * want))
	check "$label: 0 failures (saw $fails)" test "$fails" -eq 0
}

dmatest_release() {
	rmmod dmatest 2>/dev/null || true
}

plx_functions() {
	for d in /sys/bus/pci/devices/*; do
		grep -q 0x87d0 "$d/device" && echo "${d##*/}"
	done
}

c_plx_dmatest() {
	modprobe plx_dma
	for f in $(plx_functions); do
		[ -e "/sys/bus/pci/drivers/plx_dma/$f" ] || echo "$f" >/sys/bus/pci/drivers/plx_dma/bind
	done
	dmatest_run "$@"
	for f in $(plx_functions); do
		echo "$f" >/sys/bus/pci/drivers/plx_dma/unbind
	done
	dmatest_release
}
