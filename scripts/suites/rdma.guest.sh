# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "rdma": plx_rdma on a rust_plx_dma channel (then on
# the CPU), seen and used through ib_core, uverbs and libibverbs.
. /guest/lib.sh
. /guest/dmatest.sh # pci_of

export PATH=/usr/bin:/usr/sbin:$PATH
STATS=/sys/kernel/debug/plx_rdma/stats
stat() { sed -n "s/^$1: //p" "$STATS"; }

# plx_rdma0's port is RoCEv2 on dummy0 (roce_netdev, guest/lib.sh).
IP=10.77.0.1
IFINDEX=$(roce_netdev "$IP")
. /guest/roce.sh
check "modprobe rust_plx_dma" modprobe rust_plx_dma
# uverbs (/dev/infiniband/uverbsN) is what rdma-core's udev rules load.
check "modprobe ib_uverbs" modprobe ib_uverbs
check "modprobe plx_rdma with no such netdev fails (ENODEV), nothing registered" \
	sh -c '! modprobe plx_rdma ifindex=999 && ! test -e /sys/class/infiniband/plx_rdma0 && ! grep -q "^plx_rdma " /proc/modules'
check "modprobe plx_rdma ifindex=$IFINDEX (dummy0)" modprobe plx_rdma ifindex="$IFINDEX"
check "plx_rdma0 is an ib_core device" test -d /sys/class/infiniband/plx_rdma0
check "plx_rdma0/1 is RoCE on dummy0 (link layer Ethernet)" \
	grep -qx Ethernet /sys/class/infiniband/plx_rdma0/ports/1/link_layer
check "plx_rdma0/1 has the RoCEv2 GID of $IP" has_gid plx_rdma0 "$(ipv4_gid "$IP")"
check "plx_rdma0/1 GID of $IP is RoCE v2" sh -c \
	'for g in /sys/class/infiniband/plx_rdma0/ports/1/gids/*; do grep -qx "$0" "$g" || continue; grep -qx "RoCE v2" /sys/class/infiniband/plx_rdma0/ports/1/gid_attrs/types/${g##*/} && exit 0; done; exit 1' "$(ipv4_gid "$IP")"
check "plx_rdma0 moves data with a rust_plx_dma channel" sh -c "grep -q '^data_path: dma[0-9]*chan0' $STATS"
rdma link show >/tmp/rdma-link.out 2>&1
sed 's/^/# rdma link: /' /tmp/rdma-link.out
check "rdma link shows plx_rdma0/1 ACTIVE" grep -q 'plx_rdma0/1 .*state ACTIVE' /tmp/rdma-link.out
ibv_devinfo -v -d plx_rdma0 >/tmp/devinfo.out 2>&1
sed 's/^/# ibv_devinfo: /' /tmp/devinfo.out
check "ibv_devinfo opens plx_rdma0 through its provider (PORT_ACTIVE)" grep -q 'PORT_ACTIVE' /tmp/devinfo.out

# ibv_rc_pingpong: RC SEND/RECV both ways over the loopback fabric, every
# buffer checked (--chk), for several sizes.
pingpong() { pingpong_pair pp "$1" "$2" 127.0.0.1 - plx_rdma0 0 - plx_rdma0 0; }
before=$(stat engine_copies)
for s in 1 4096 65536 1048576; do
	check "ibv_rc_pingpong -s $s -c: both sides exchange and verify" pingpong "$s" 20
done
after=$(stat engine_copies)
check "the engine moved the pingpong data (engine_copies $before -> $after)" test "$after" -gt "$before"
check "short requests ran in the posting thread, their bytes copied by the CPU (poster_wrs $(stat poster_wrs), cpu_copies $(stat cpu_copies))" \
	sh -c "test $(stat poster_wrs) -gt 0 && test $(stat cpu_copies) -gt 0"
sed 's/^/# stats: /' "$STATS"

# The example of `make run`: one RDMA WRITE, keys shown, target verified.
check "plx_rdma_write: one 1 MiB RDMA WRITE through the shim, verified" plx_rdma_write plx_rdma0 1048576

# perftest on plx_rdma0: server and client over the loopback fabric (the
# out-of-band exchange on 127.0.0.1).
perf_pair() {
	tool=$1
	shift
	"$tool" -d plx_rdma0 -x 0 "$@" >/tmp/perftest-server.log 2>&1 &
	srv=$!
	sleep 2
	"$tool" -d plx_rdma0 -x 0 "$@" 127.0.0.1 >/tmp/perftest-client.log 2>&1
	crc=$?
	wait "$srv"
	src=$?
	sed "s/^/# $tool client: /" /tmp/perftest-client.log
	[ "$crc" -eq 0 ] && [ "$src" -eq 0 ] || sed "s/^/# $tool server: /" /tmp/perftest-server.log
	test "$crc" -eq 0 && test "$src" -eq 0
}
check "ib_write_bw completes on plx_rdma0" calibrated perf_pair ib_write_bw -s 65536 -n 200
check "ib_read_bw completes on plx_rdma0" calibrated perf_pair ib_read_bw -s 65536 -n 200
check "ib_send_lat completes on plx_rdma0" calibrated perf_pair ib_send_lat -s 64 -n 200 -I 0
check "ib_send_lat with its default inline data completes on plx_rdma0" calibrated perf_pair ib_send_lat -s 64 -n 200

# rping: rdma_cm resolves $IP to plx_rdma0, the connection manager's
# messages travel as MADs on the GSI QP, then the client and the server
# exchange SENDs and RDMA READ/WRITEs, checking every buffer (-V).
# rping_pair [ADDR [SERVER-NETNS [CLIENT-NETNS]]]: the server on ADDR
# ($IP), each side in the network namespace named ("-" or none: this one).
rping_pair() {
	addr=${1:-$IP} sx='' cx=''
	[ "${2:--}" = - ] || sx="/usr/sbin/ip netns exec $2"
	[ "${3:--}" = - ] || cx="/usr/sbin/ip netns exec $3"
	timeout 90 $sx rping -s -a "$addr" -C 10 -S 4096 -V >/tmp/rping-server.log 2>&1 &
	srv=$!
	sleep 1
	timeout 60 $cx rping -c -a "$addr" -C 10 -S 4096 -V -v >/tmp/rping-client.log 2>&1
	crc=$?
	wait "$srv"
	src=$?
	cut -c1-100 /tmp/rping-client.log | sed 's/^/# rping client: /' | head -n 3
	cut -c1-100 /tmp/rping-server.log | sed 's/^/# rping server: /' | head -n 5
	test "$crc" -eq 0 && test "$src" -eq 0 &&
		test "$(grep -c '^ping data: ' /tmp/rping-client.log)" -eq 10
}
check "modprobe rdma_ucm (rdma_cm for user space)" modprobe rdma_ucm
dg_before=$(stat datagrams)
check "rping: 10 verified round trips, connected through rdma_cm to $IP" rping_pair
dg_after=$(stat datagrams)
check "the CM's MADs went through plx_rdma0's GSI QP (datagrams $dg_before -> $dg_after)" \
	test "$dg_after" -gt "$dg_before"
check "rping to an address of no RDMA device fails cleanly" \
	sh -c '! timeout 20 rping -c -a 10.99.0.1 -C 1 >/tmp/rping-bad.log 2>&1'

# rdma_cm's own example pair (rdma_create_ep with a little inline space,
# an inline SEND each way), and rsockets (rstream: inline data and RDMA
# WRITE with immediate under a stream socket API).
# cm_pair NAME "SERVER COMMAND" "CLIENT COMMAND" (words split on spaces).
cm_pair() {
	name=$1
	timeout 60 $2 >/tmp/$name-server.log 2>&1 &
	srv=$!
	sleep 1
	timeout 60 $3 >/tmp/$name-client.log 2>&1
	crc=$?
	wait "$srv"
	src=$?
	sed "s/^/# $name client: /" /tmp/$name-client.log | head -n 5
	sed "s/^/# $name server: /" /tmp/$name-server.log | head -n 5
	test "$crc" -eq 0 && test "$src" -eq 0
}
check "rdma_server and rdma_client (rdma_create_ep, inline SENDs) connect and exchange" \
	cm_pair rdma_ex "rdma_server -s $IP" "rdma_client -s $IP"
check "rstream (rsockets) moves 100 messages of 4 KiB both ways" \
	cm_pair rstream "rstream -b $IP -C 100 -S 4096" "rstream -s $IP -C 100 -S 4096"

# The verbs kselftests on plx_rdma: every case checks its own outcome.
PLX_RDMA_DEV=plx_rdma0 verbs_test >/tmp/verbs-plx.tap 2>&1
sed 's/^/# /' /tmp/verbs-plx.tap
kselftest_points /tmp/verbs-plx.tap
check "verbs kselftests on plx_rdma0: no failure, no skip" \
	grep -q '^# Totals: pass:[1-9][0-9]* fail:0 xfail:0 xpass:0 skip:0 error:0' /tmp/verbs-plx.tap
check "a SEND posted before its receive went from the posting thread to the QP's work item, which waited (poster_deferred $(stat poster_deferred))" \
	test "$(stat poster_deferred)" -gt 0
check "WRITEs and READs queued together went to the engine in one burst (burst_wrs $(stat burst_wrs))" \
	test "$(stat burst_wrs)" -gt 0

# Control groups: the rdma controller bounds a group's objects on
# plx_rdma0, and the memory controller is charged with its rings.
PLX_RDMA_DEV=plx_rdma0 cgroup_test >/tmp/cgroup-plx.tap 2>&1
sed 's/^/# /' /tmp/cgroup-plx.tap
kselftest_points /tmp/cgroup-plx.tap

# Hostile verbs: random objects, arguments, requests and states; the
# guard region and unregistered memory must keep their canaries.
PLX_RDMA_DEV=plx_rdma0 PLX_FUZZ_OPS=${PLX_FUZZ_OPS:-5000} verbs_fuzz >/tmp/verbs-fuzz.tap 2>&1
sed 's/^/# /' /tmp/verbs-fuzz.tap
kselftest_points /tmp/verbs-fuzz.tap

# The same kselftests on rdma_rxe, the behavioural oracle (on lo: the
# guest has no other netdev), then the differential comparison.  Both
# stacks listen on UDP port 4791 of their netdev's namespace, so
# plx_rdma0 goes first.
check "rmmod plx_rdma" rmmod plx_rdma
check "modprobe rdma_rxe" modprobe rdma_rxe
check "rdma link add rxe0 type rxe netdev lo" rdma link add rxe0 type rxe netdev lo
DIVERGENCES=/guest/rxe_divergences
skip_args=$(grep -v '^#' "$DIVERGENCES" | grep -v '^$' | sed 's/^/-T /' | tr '\n' ' ')
# shellcheck disable=SC2086
PLX_RDMA_DEV=rxe0 verbs_test $skip_args >/tmp/verbs-rxe.tap 2>&1
sed 's/^/# rxe: /' /tmp/verbs-rxe.tap
# The failing cases' names go into the description, so that a summary
# that shows only the failed points still says which.
rxe_failed=$(sed -n 's/^not ok [0-9]* //p' /tmp/verbs-rxe.tap | tr '\n' ' ')
check "verbs kselftests on rxe0 (the oracle agrees with the expectations)${rxe_failed:+; failed: $rxe_failed}" \
	grep -q '^# Totals: pass:[1-9][0-9]* fail:0 xfail:0 xpass:0 skip:0 error:0' /tmp/verbs-rxe.tap
diffout=$(sh /guest/verbs_diff.sh /tmp/verbs-rxe.tap /tmp/verbs-plx.tap "$DIVERGENCES")
drc=$?
printf '%s\n' "$diffout" | sed 's/^/# /'
check "plx_rdma0 and rxe0 give the same outcomes ($(printf '%s' "$diffout" | head -n 1))" test "$drc" -eq 0
# The rdma controller's limits hold on rxe0 alike (ib_core enforces
# them); rxe's rings are not charged to the memory controller, so that
# case is plx_rdma's only.
PLX_RDMA_DEV=rxe0 cgroup_test -T cq_ring_charged_to_creator >/tmp/cgroup-rxe.tap 2>&1
sed 's/^/# rxe: /' /tmp/cgroup-rxe.tap
check "cgroup kselftests on rxe0 (the oracle agrees)" \
	grep -q '^# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0' /tmp/cgroup-rxe.tap
check "rdma link delete rxe0" rdma link delete rxe0
check "rmmod rdma_rxe" rmmod rdma_rxe
# RoCEv2 on the wire: SEND/RECV and RDMA WRITE as UDP datagrams, hostile
# datagrams from a raw socket, and (kernel permitting) rxe on a veth pair.
. /guest/rdma-wire.sh
# One channel serves every QP: a copy that finds its ring full (two
# descriptors here, four QPs writing at once) waits for room within its
# time instead of failing the request.
check "rust_plx_dma reloaded with ring_size=2" sh -c 'rmmod rust_plx_dma && modprobe rust_plx_dma ring_size=2'
check "modprobe plx_rdma ifindex=$IFINDEX on the 2-descriptor ring" modprobe plx_rdma ifindex="$IFINDEX"
check "ib_write_bw -q 4 completes on a 2-descriptor ring" calibrated perf_pair ib_write_bw -q 4 -s 65536 -n 100
check "ibv_rc_pingpong -s 65536 -c on a 2-descriptor ring" pingpong 65536 20
check "rmmod plx_rdma" rmmod plx_rdma
check "rust_plx_dma reloaded with its default ring" sh -c 'rmmod rust_plx_dma && modprobe rust_plx_dma'
# A slow engine stops no one's copy: with a copy timeout of 50 ms (plus
# 1 ms per 64 KiB) and every descriptor held 25 ms by the emulator (its
# busy fault: slow, still ending descriptors), four QPs writing 64 KiB at
# once each wait behind the others' bursts far past their timeouts, and
# every write completes; the channel is never stopped (which would have
# aborted every QP's copies at the first timeout). The hold leaves the
# interrupt and the waiter's wake-up half the timeout: a QP waits behind
# up to sixty descriptors, and each must be seen ending within it.
check "modprobe plx_rdma copy_timeout_ms=50" modprobe plx_rdma ifindex="$IFINDEX" copy_timeout_ms=50
slow_chan=$(sed -n 's/^data_path: dma\([0-9]*\)chan0$/\1/p' "$STATS")
host_ctl fault "${slow_chan:-0}" busy 25
check "a slow engine: ib_write_bw -q 4, each copy waiting past its timeout, completes" \
	calibrated perf_pair ib_write_bw -q 4 -s 65536 -n 20
host_ctl fault "${slow_chan:-0}" busy 0
sed 's/^/# stats: /' "$STATS"
check "the copies outlasted their timeout (slow_copies $(stat slow_copies)) and the channel was never stopped (channel_stops $(stat channel_stops))" \
	sh -c "test $(stat slow_copies) -ge 1 && test $(stat channel_stops) -eq 0"
check "rmmod plx_rdma (slow engine)" rmmod plx_rdma
# The engine's device loses its driver under a running, verifying
# pingpong: plx_rdma waits for the copies in flight, unmaps every region
# from the departing device (DMA-API debug would report one left mapped at
# the unbind), and the CPU carries on with the same regions. Regions
# registered afterwards are the CPU's from the start.
check "modprobe plx_rdma (the engine's removal)" modprobe plx_rdma ifindex="$IFINDEX"
gone_chan=$(sed -n 's/^data_path: dma\([0-9]*\)chan0$/\1/p' "$STATS")
gone_fn=$(pci_of "${gone_chan:-0}")
engine_gone() {
	ibv_rc_pingpong -d plx_rdma0 -g 0 -s 65536 -n 3000 -c >/tmp/pp-server.log 2>&1 &
	srv=$!
	sleep 1
	ibv_rc_pingpong -d plx_rdma0 -g 0 -s 65536 -n 3000 -c 127.0.0.1 >/tmp/pp-client.log 2>&1 &
	cli=$!
	sleep 2
	echo "# engine copies before the unbind: $(stat engine_copies)"
	echo "$gone_fn" >/sys/bus/pci/drivers/rust_plx_dma/unbind || return 1
	echo "# engine copies at the unbind: $(stat engine_copies)"
	wait "$cli"
	crc=$?
	wait "$srv"
	src=$?
	sed 's/^/# pingpong server: /' /tmp/pp-server.log
	sed 's/^/# pingpong client: /' /tmp/pp-client.log
	test "$crc" -eq 0 && test "$src" -eq 0 && grep -q "iters in" /tmp/pp-client.log
}
check "rust_plx_dma unbinds from $gone_fn (plx_rdma0's engine) during a verifying 64 KiB pingpong, which completes" engine_gone
sed 's/^/# stats: /' "$STATS"
check "plx_rdma0 says the CPU moves data once its engine is gone" sh -c "grep -q '^data_path: cpu' $STATS"
check "the engine moved data before (engine_copies $(stat engine_copies)), the CPU after (cpu_copies $(stat cpu_copies))" \
	sh -c "test $(stat engine_copies) -gt 0 && test $(stat cpu_copies) -gt 0"
check "one engine loss, both pingpong regions unmapped from it (engine_losses $(stat engine_losses), regions_unmapped $(stat regions_unmapped))" \
	sh -c "test $(stat engine_losses) -eq 1 && test $(stat regions_unmapped) -ge 2"
check "ibv_rc_pingpong -s 65536 -c with regions registered after the engine left" pingpong 65536 20
check "rust_plx_dma binds $gone_fn again" sh -c "echo $gone_fn >/sys/bus/pci/drivers/rust_plx_dma/bind"
check "rmmod plx_rdma (engine gone)" rmmod plx_rdma
check "modprobe plx_rdma channel=0 (CPU data path)" modprobe plx_rdma channel=0 ifindex="$IFINDEX"
check "plx_rdma0 says the CPU moves data" sh -c "grep -q '^data_path: cpu' $STATS"
check "ibv_rc_pingpong -s 65536 -c on the CPU path" pingpong 65536 20
check "the CPU moved the data (cpu_copies $(stat cpu_copies))" test "$(stat cpu_copies)" -gt 0
# ib_core holds the port's netdev; deleting it must not wait for the
# device: the port lets it go and goes down.
check "ip link del dummy0 with plx_rdma0 on it completes" timeout 30 /usr/sbin/ip link del dummy0
check "plx_rdma0/1 is down without its netdev" sh -c \
	"rdma link show plx_rdma0/1 | grep -q 'state DOWN'"
check "rmmod plx_rdma" rmmod plx_rdma
check "rmmod rust_plx_dma" rmmod rust_plx_dma
finish
