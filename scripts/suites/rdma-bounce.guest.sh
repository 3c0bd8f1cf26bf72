# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "rdma", second boot: every streaming DMA mapping
# bounced (swiotlb=force, the IOMMU in passthrough), so that a mapping
# made once at registration shows stale bytes to the engine, and the CPU
# stale bytes from it, unless plx_rdma syncs the bytes of each copy. The
# engine moves the bytes of verbs_test's transfers, on the loopback fabric
# and from the wire, and each is compared with its source.
. /guest/lib.sh

export PATH=/usr/bin:/usr/sbin:$PATH
STATS=/sys/kernel/debug/plx_rdma/stats
stat() { sed -n "s/^$1: //p" "$STATS"; }
IP=10.77.0.1
IFINDEX=$(roce_netdev "$IP")
. /guest/roce.sh

check "the kernel bounces every streaming mapping (swiotlb=force)" \
	grep -qw swiotlb=force /proc/cmdline
check "modprobe rust_plx_dma, ib_uverbs" sh -c 'modprobe rust_plx_dma && modprobe ib_uverbs'
# bounced_transfers CASES: verbs_test's cases CASES on plx_rdma0, each
# destination compared with its source (the buffers are filled before
# they are registered, so a destination whose bytes stay in the bounce
# buffer keeps its canary).
bounced_transfers() {
	args= n=0
	for c in $1; do args="$args -t $c" n=$((n + 1)); done
	# shellcheck disable=SC2086
	PLX_RDMA_DEV=plx_rdma0 timeout 300 verbs_test $args >/tmp/bounce-verbs.tap 2>&1
	rc=$?
	grep -E '^(not )?ok |^# (PASSED|FAILED|Totals)' /tmp/bounce-verbs.tap | sed 's/^/# verbs_test: /'
	grep -E '^# .*(Expected|memory=)' /tmp/bounce-verbs.tap | sed 's/^/# verbs_test: /' | head -n 20
	test "$rc" -eq 0 && grep -q "^# PASSED: $n / $n tests passed" /tmp/bounce-verbs.tap
}
# WRITE, READ and SEND from 4 KiB to 1 MiB, on the fabric and from the
# wire.
CASES="write_4KiB write_64KiB_3 write_1MiB read_4KiB read_64KiB_3 read_1MiB send_4KiB send_64KiB_3 send_1MiB"
# copy_engine_min=0: every copy between regions is the engine's, the
# shortest too, so that each case's bytes cross the bounce buffers.
for mode in ${BOUNCE_MODES:-fabric wire}; do
	if [ "$mode" = wire ]; then
		check "modprobe plx_rdma wire_local=1 (received payloads placed by the engine)" \
			modprobe plx_rdma ifindex="$IFINDEX" wire_local=1 copy_engine_min=0
	else
		check "modprobe plx_rdma copy_engine_min=0 (the loopback fabric, every copy on the engine)" \
			modprobe plx_rdma ifindex="$IFINDEX" copy_engine_min=0
	fi
	has_gid plx_rdma0 "$(ipv4_gid "$IP")"
	check "$mode: plx_rdma0 moves data with a rust_plx_dma channel" \
		sh -c "grep -q '^data_path: dma[0-9]*chan0' $STATS"
	check "$mode: verbs_test WRITE, READ and SEND of 4 KiB to 1 MiB through bounce buffers, each verified ($(echo "$CASES" | wc -w) cases)" \
		bounced_transfers "$CASES"
	sed 's/^/# stats: /' "$STATS" | grep -E 'engine|cpu|rx_payload'
	if [ "$mode" = wire ]; then
		check "wire: the engine placed the received payloads ($(stat rx_payload_engine_bytes) bytes)" \
			test "$(stat rx_payload_engine_bytes)" -gt 0
	else
		check "fabric: the engine moved the data (engine_copies $(stat engine_copies))" \
			test "$(stat engine_copies)" -gt 0
	fi
	check "rmmod plx_rdma ($mode)" rmmod plx_rdma
done
check "rmmod rust_plx_dma" rmmod rust_plx_dma
finish
