# SPDX-License-Identifier: GPL-2.0
# Guest-side dmatest driver, sourced by suites after lib.sh.
#
#   dmatest_run LABEL ITERATIONS BUF_SIZE [EXPECTED_CHANNELS [THREADS]]
#
# Runs dmatest (verification on) with THREADS threads (default one) on
# every memcpy channel, waits for it, keeps its summary lines as TAP diagnostics and adds test
# points: the expected channels ran, every copy was made, none failed.
# dmatest keeps its channels until `dmatest_release`.  The summary lines,
# each tagged with its channel's driver, are also kept in
# /tmp/dmatest-LABEL.txt.
#
# The upstream C plx_dma cannot give a channel back on the debug kernel
# without a splat, whichever way it is done:
#  - released while bound, plx_dma_free_chan_resources() calls
#    pci_irq_vector(), which takes a mutex, under rcu_read_lock()
#    ("BUG: sleeping function called from invalid context");
#  - unbound while a client holds the channel, the final
#    dma_release_channel() touches the channel plx_dma_release() already
#    freed (KASAN: slab-use-after-free in dma_release_channel).
# So a boot runs dmatest on plx_dma once, last, and ends with the channels
# still held.  rust_plx_dma has neither problem and is torn down every way.

DMATEST=/sys/module/dmatest/parameters

# dmatest_start ITERATIONS BUF_SIZE [VERIFY] [RANDOM] [THREADS]: configures
# dmatest (THREADS threads, default one, per memcpy channel; verification
# and random lengths and offsets unless VERIFY or RANDOM is 0), starts it
# and leaves in $mark the kernel-log line that precedes its output.
dmatest_start() {
	modprobe dmatest || return 1
	echo 0 >$DMATEST/run 2>/dev/null
	echo 5000 >$DMATEST/timeout
	echo "$1" >$DMATEST/iterations
	echo "$2" >$DMATEST/test_buf_size
	echo "${5:-1}" >$DMATEST/threads_per_chan
	echo $((1 - ${3:-1})) >$DMATEST/noverify
	echo $((1 - ${4:-1})) >$DMATEST/norandom
	echo 0 >$DMATEST/max_channels
	echo "" >$DMATEST/channel
	mark="dmatest-$$-$(date +%s)-$RANDOM"
	echo "$mark" >/dev/kmsg
	echo 1 >$DMATEST/run
}

# dmatest_log: the kernel log since the run started last.
dmatest_log() {
	dmesg | sed -n "/$mark/,\$p"
}

# dmatest_summaries: waits for the run started last and prints its summary
# lines.  It polls the log instead of blocking in a read of the `wait`
# parameter, which sleeps uninterruptibly and would trip the hung-task
# detector on long runs; reading `run` is no better: once the run is over
# it makes dmatest release its channels.
dmatest_summaries() {
	while [ "$(dmatest_log | grep -c 'dmatest: .*summary')" -lt \
		"$(dmatest_log | grep -c 'dmatest: Started')" ]; do
		sleep 2
	done
	cat $DMATEST/wait >/dev/null
	dmatest_log | grep 'dmatest: .*summary' | sed 's/^\[[^]]*\] //'
}

dmatest_run() {
	label=$1 iters=$2 bufsize=$3 want=${4:-1} threads=${5:-1}
	dmatest_start "$iters" "$bufsize" 1 1 "$threads" || { not_ok "$label: modprobe dmatest"; return; }
	summary=$(dmatest_summaries)
	printf '%s\n' "$summary" | while read -r line; do
		chan=$(echo "$line" | sed -n 's/.*dmatest: \(dma[0-9]*chan[0-9]*\)-.*/\1/p')
		echo "# $label: [$(chan_driver "$chan")] $line"
	done | tee "/tmp/dmatest-$label.txt"
	chans=$(printf '%s\n' "$summary" | grep -c summary)
	tests=$(printf '%s\n' "$summary" | sed -n 's/.*summary \([0-9]*\) tests.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
	fails=$(printf '%s\n' "$summary" | sed -n 's/.* \([0-9]*\) failures.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
	# One summary line, and ITERATIONS copies, a thread.
	runs=$((want * threads)) on="on $want channel(s)"
	[ "$threads" = 1 ] || on="$threads threads on each of $want channel(s)"
	check "$label: dmatest ran $on (saw $chans)" test "$chans" -eq "$runs"
	check "$label: $tests copies made, $((iters * runs)) expected" test "$tests" -eq $((iters * runs))
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

# The PCI function under DMA channel dma$1chan0.
pci_of() { basename "$(readlink "/sys/class/dma/dma$1chan0/device")"; }
# Counter $2 of rust_plx_dma's debugfs stats of PCI function $1.
stat_of() { sed -n "s/^$2: //p" "/sys/kernel/debug/rust_plx_dma-$1/stats"; }

# The driver bound to DMA channel $1 (e.g. dma0chan0).
chan_driver() {
	basename "$(readlink "/sys/class/dma/$1/device/driver" 2>/dev/null)"
}
