# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "driver": rust_plx_dma against two emulated functions
# behind intel-iommu, next to the C plx_dma in the same boot.
. /guest/lib.sh
. /guest/dmatest.sh

ITERS=${ITERS:-50000}
BIG_ITERS=${BIG_ITERS:-500}
DRV=/sys/bus/pci/drivers/rust_plx_dma

bound() { ls "$DRV" 2>/dev/null | grep -c : ; }

# The C driver first: the yardstick, same dmatest, same boot.
c_plx_dmatest c-plx_dma-16k "$ITERS" 16384 2
c_plx_dmatest c-plx_dma-1m "$BIG_ITERS" 1048576 2
check "rmmod plx_dma" rmmod plx_dma

check "modprobe rust_plx_dma" modprobe rust_plx_dma
check "rust_plx_dma bound both functions" test "$(bound)" -eq 2
check "two channels in /sys/class/dma" test "$(ls /sys/class/dma | wc -l)" -eq 2
dmatest_run rust_plx_dma-16k "$ITERS" 16384 2
dmatest_release
dmatest_run rust_plx_dma-1m "$BIG_ITERS" 1048576 2
dmatest_release

stats=$(cat /sys/kernel/debug/rust_plx_dma-*/stats 2>&1)
printf '%s\n' "$stats" | sed 's/^/# stats: /'
check "debugfs counts completed copies" sh -c "printf '%s\n' '$stats' | grep -q '^completed: [1-9]'"
check "debugfs shows no failed copy" sh -c "! printf '%s\n' '$stats' | grep -q '^failed: [1-9]'"

check "samples/rust client copies 1 MiB and verifies it" modprobe rust_dma_memcpy size=1048576
rmmod rust_dma_memcpy 2>/dev/null
check "samples/rust client refuses size=0 with EINVAL" sh -c '! modprobe rust_dma_memcpy size=0'

# terminate_all with copies in flight: stopping dmatest terminates its
# channels while copies are queued.
dmatest_start() {
	modprobe dmatest
	echo 5000 >$DMATEST/timeout
	echo 1000000 >$DMATEST/iterations
	echo 65536 >$DMATEST/test_buf_size
	echo "" >$DMATEST/channel
	echo 1 >$DMATEST/run
}
dmatest_stop() {
	echo 0 >$DMATEST/run
	rmmod dmatest
}
dmatest_start
sleep 3
check "rmmod rust_plx_dma while dmatest holds the channels is refused" sh -c '! rmmod rust_plx_dma'
check "stopping dmatest mid-run (terminate_all in flight) returns" dmatest_stop

# Unbind with copies in flight, then bind again.
dmatest_start
sleep 3
first=$(plx_functions | head -n 1)
check "unbind $first during dmatest" sh -c "echo $first > $DRV/unbind"
check "one function left bound" test "$(bound)" -eq 1
check "stopping dmatest after the unbind returns" dmatest_stop
check "bind $first again" sh -c "echo $first > $DRV/bind"
check "both functions bound again" test "$(bound)" -eq 2
dmatest_run rust_plx_dma-rebound 2000 16384 2
dmatest_release

check "rmmod rust_plx_dma" rmmod rust_plx_dma
finish
