# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "pyverbs": rdma-core's own test suite on plx_rdma0,
# then on rxe0 (the oracle) on the same netdev, each module in a process of
# its own so that one that dies takes no other down. Every test's outcome
# goes to /tmp/pyverbs-DEV.out ("RESULT id outcome reason" lines, see
# pyverbs_run.py) and is printed for the host half, which compares them.
. /guest/lib.sh

export PATH=/usr/bin:/usr/sbin:$PATH
TESTS=/opt/rdma-core-tests
IP=10.77.0.1
IFINDEX=$(roce_netdev "$IP")
check "modprobe rust_plx_dma" modprobe rust_plx_dma
check "modprobe ib_uverbs, rdma_ucm" sh -c 'modprobe ib_uverbs && modprobe rdma_ucm'
check "modprobe plx_rdma ifindex=$IFINDEX (dummy0)" modprobe plx_rdma ifindex="$IFINDEX"

# The suite's modules, less those of other vendors' devices (mlx5, efa)
# and of GPUs, which skip every test elsewhere; PYVERBS_MODULES narrows it.
modules=${PYVERBS_MODULES:-$(cd "$TESTS" && ls test_*.py | grep -v -e mlx5 -e efa -e cuda | sed 's/\.py$//')}

# run_suite DEV: every module on DEV; "MODULE m rc" lines after each one's
# results (rc 139: the process died of SIGSEGV).
run_suite() {
	dev=$1 out=/tmp/pyverbs-$1.out
	: >"$out"
	for m in $modules; do
		PYTHONFAULTHANDLER=1 timeout 600 python3 /guest/pyverbs_run.py "$TESTS" --dev "$dev" "$m" \
			>>"$out" 2>"/tmp/pyverbs-$dev-$m.err"
		rc=$?
		echo "MODULE $m $rc" >>"$out"
		if [ "$rc" -gt 1 ]; then
			# Where it died, for the log.
			tail -n 15 "/tmp/pyverbs-$dev-$m.err" | sed "s/^/# $dev $m: /"
		fi
	done
	sed "s/^/# PYVERBS $dev /" "$out"
}

t0=$(date +%s)
run_suite plx_rdma0
echo "# plx_rdma0: the suite took $(($(date +%s) - t0)) s"
check "rmmod plx_rdma" rmmod plx_rdma
check "modprobe rdma_rxe" modprobe rdma_rxe
check "rdma link add rxe0 type rxe netdev dummy0" rdma link add rxe0 type rxe netdev dummy0
. /guest/roce.sh
check "rxe0/1 has the RoCEv2 GID of $IP" has_gid rxe0 "$(ipv4_gid "$IP")"
t0=$(date +%s)
run_suite rxe0
echo "# rxe0: the suite took $(($(date +%s) - t0)) s"
check "rdma link delete rxe0" rdma link delete rxe0
check "rmmod rdma_rxe" rmmod rdma_rxe
finish
