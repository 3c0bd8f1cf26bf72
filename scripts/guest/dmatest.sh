# SPDX-License-Identifier: GPL-2.0
# Guest-side dmatest driver, sourced by suites after lib.sh.
#
#   dmatest_run LABEL ITERATIONS BUF_SIZE [EXPECTED_CHANNELS]
#
# Runs dmatest (verification on) with one thread on every memcpy channel,
# waits for it, keeps its summary lines as TAP diagnostics and adds test
# points: the expected channels ran, every copy was made, none failed.

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
	rmmod dmatest
}
