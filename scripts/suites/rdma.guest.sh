# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "rdma": plx_rdma on a rust_plx_dma channel (then on
# the CPU), seen and used through ib_core, uverbs and libibverbs.
. /guest/lib.sh
. /guest/dmatest.sh # pci_of

export PATH=/usr/bin:/usr/sbin:$PATH
STATS=/sys/kernel/debug/plx_rdma/stats
stat() { sed -n "s/^$1: //p" "$STATS"; }

/usr/sbin/ip link set lo up
check "modprobe rust_plx_dma" modprobe rust_plx_dma
check "modprobe plx_rdma" modprobe plx_rdma
check "plx_rdma0 is an ib_core device" test -d /sys/class/infiniband/plx_rdma0
check "plx_rdma0 moves data with a rust_plx_dma channel" sh -c "grep -q '^data_path: dma[0-9]*chan0' $STATS"
out=$(rdma link show 2>&1)
echo "$out" | sed 's/^/# rdma link: /'
check "rdma link shows plx_rdma0/1 ACTIVE" sh -c "echo '$out' | grep -q 'plx_rdma0/1 state ACTIVE'"
out=$(ibv_devinfo -d plx_rdma0 2>&1)
echo "$out" | sed 's/^/# ibv_devinfo: /'
check "ibv_devinfo opens plx_rdma0 through its provider (PORT_ACTIVE)" sh -c "echo '$out' | grep -q 'PORT_ACTIVE'"

# ibv_rc_pingpong: RC SEND/RECV both ways over the loopback fabric, every
# buffer checked (--chk), for several sizes.
pingpong() {
	size=$1 n=$2
	ibv_rc_pingpong -d plx_rdma0 -s "$size" -n "$n" -c >/tmp/pp-server.log 2>&1 &
	srv=$!
	sleep 1
	ibv_rc_pingpong -d plx_rdma0 -s "$size" -n "$n" -c 127.0.0.1 >/tmp/pp-client.log 2>&1
	crc=$?
	wait "$srv"
	src=$?
	sed 's/^/# pingpong server: /' /tmp/pp-server.log
	sed 's/^/# pingpong client: /' /tmp/pp-client.log
	test "$crc" -eq 0 && test "$src" -eq 0 && grep -q "iters in" /tmp/pp-client.log
}
before=$(stat engine_copies)
for s in 1 4096 65536 1048576; do
	check "ibv_rc_pingpong -s $s -c: both sides exchange and verify" pingpong "$s" 20
done
after=$(stat engine_copies)
check "the engine moved the pingpong data (engine_copies $before -> $after)" test "$after" -gt "$before"
sed 's/^/# stats: /' "$STATS"

check "rmmod plx_rdma" rmmod plx_rdma
check "modprobe plx_rdma channel=0 (CPU data path)" modprobe plx_rdma channel=0
check "plx_rdma0 says the CPU moves data" sh -c "grep -q '^data_path: cpu' $STATS"
check "ibv_rc_pingpong -s 65536 -c on the CPU path" pingpong 65536 20
check "the CPU moved the data (cpu_copies $(stat cpu_copies))" test "$(stat cpu_copies)" -gt 0
check "rmmod plx_rdma" rmmod plx_rdma
check "rmmod rust_plx_dma" rmmod rust_plx_dma
finish
