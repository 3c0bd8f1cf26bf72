# SPDX-License-Identifier: GPL-2.0
# Guest half of `make bench`'s wire boot (busybox sh): RoCEv2 across veth
# pairs, plx_rdma and rdma_rxe in the four pairings, same boot, REPS
# rounds taking turns: RDMA WRITE bandwidth at 64 KiB and 1 MiB and SEND
# latency at 64 B, each with the first device of the pair as the client.
#
#   plx-rxe  plx0 (here, 10.90.1.1) -> rxe0 (namespace far, 10.90.1.2)
#   rxe-plx  rxe0 -> plx0
#   plx-plx  plx1 (here, 10.90.2.1) -> plx2 (namespace q2, 10.90.2.2):
#            each namespace has its own UDP port and receive work item,
#            as in the rxe-rxe pair
#   rxe-rxe  rxe1 (namespace r1, 10.90.3.1) -> rxe2 (namespace r2,
#            10.90.3.2): one rxe per namespace, the only way two rxe
#            devices can talk
#
# PAIRS (guest parameter, comma-separated) names the pairs to run (all
# four by default), and CPU_PLACEMENT=0 skips the last rounds
# (rxe-plxcpu: rxe0 -> plx0 with plx_rdma reloaded to write every
# received payload by the CPU).  Prints
# "BENCH wire PAIR TOOL SIZE REP VALUE" lines (MiB/s for the
# bandwidth, typical microseconds for the latency).
. /guest/lib.sh
. /guest/roce.sh

export PATH=/usr/bin:/usr/sbin:$PATH
IP=/usr/sbin/ip
REPS=${REPS:-3}
PAIRS=${PAIRS:-plx-rxe,rxe-plx,plx-plx,rxe-rxe}

# link NEAR NEAR-NS NEAR-IP FAR FAR-NS FAR-IP: a veth pair, each end in
# its namespace ("-": this one) with its address, both up.
link() {
	$IP link add "$1" type veth peer name "$4" || return 1
	for end in "$1 $2 $3" "$4 $5 $6"; do
		# shellcheck disable=SC2086
		set -- $end
		if [ "$2" != - ]; then
			$IP link set "$1" netns "$2" || return 1
		fi
		in_ns "$2" $IP addr add "$3/24" dev "$1" &&
			in_ns "$2" $IP link set "$1" up || return 1
	done
}
# in_ns NS CMD...: CMD in namespace NS ("-": this one).
in_ns() {
	ns=$1
	shift
	if [ "$ns" = - ]; then "$@"; else $IP netns exec "$ns" "$@"; fi
}
# namespace NAME: a network namespace with lo up.
namespace() { $IP netns add "$1" && $IP netns exec "$1" $IP link set lo up; }

setup() {
	mkdir -p /run/netns && $IP link set lo up &&
		modprobe rust_plx_dma && modprobe ib_uverbs && modprobe veth && modprobe rdma_rxe &&
		namespace far && namespace r1 && namespace r2 && namespace q2 &&
		link wvp0 - 10.90.1.1 wvp1 far 10.90.1.2 &&
		link wvq0 - 10.90.2.1 wvq1 q2 10.90.2.2 &&
		link wvr0 r1 10.90.3.1 wvr1 r2 10.90.3.2 &&
		$IP netns exec far rdma link add rxe0 type rxe netdev wvp1 &&
		$IP netns exec r1 rdma link add rxe1 type rxe netdev wvr0 &&
		$IP netns exec r2 rdma link add rxe2 type rxe netdev wvr1 &&
		rdma link add plx0 type plx netdev wvp0 &&
		rdma link add plx1 type plx netdev wvq0 &&
		$IP netns exec q2 rdma link add plx2 type plx netdev wvq1
}
check "wire bench: three veth pairs, plx0-2 and rxe0-2 on them" setup || finish

# The pairs: client device, its namespace and address, then the server's.
pair() {
	case $1 in
	plx-rxe) echo "plx0 - 10.90.1.1 rxe0 far 10.90.1.2" ;;
	rxe-plx) echo "rxe0 far 10.90.1.2 plx0 - 10.90.1.1" ;;
	plx-plx) echo "plx1 - 10.90.2.1 plx2 q2 10.90.2.2" ;;
	rxe-rxe) echo "rxe1 r1 10.90.3.1 rxe2 r2 10.90.3.2" ;;
	rxe-plxcpu) echo "rxe0 far 10.90.1.2 plx0 - 10.90.1.1" ;;
	esac
}
for p in plx-rxe plx-plx rxe-rxe; do
	# shellcheck disable=SC2046
	set -- $(pair "$p")
	has_gid "$1" "$(ipv4_gid "$3")" && has_gid "$4" "$(ipv4_gid "$6")" ||
		not_ok "wire bench: $1 and $4 have their RoCE v2 GIDs"
done

# run PAIR TOOL ARGS...: one perftest server/client exchange of PAIR,
# logs in /tmp/perftest-{server,client}.log.
run() {
	p=$1 tool=$2
	shift 2
	# shellcheck disable=SC2046
	set -- $(pair "$p") "$@"
	cdev=$1 cns=$2 cip=$3 sdev=$4 sns=$5 sip=$6
	shift 6
	in_ns "$sns" timeout 300 "$tool" -d "$sdev" -x "$(wire_gid_index "$sdev" "$sip")" "$@" \
		>/tmp/perftest-server.log 2>&1 &
	srv=$!
	# The client comes once the server listens (TCP port 18515).
	waited=0
	while ! in_ns "$sns" cat /proc/net/tcp | grep -q ':4853 00000000:0000 0A'; do
		if [ "$waited" -ge 120 ]; then
			echo "# $tool server on $sdev: not listening after 60 s"
			break
		fi
		sleep 0.5
		waited=$((waited + 1))
	done
	[ "$waited" -ge 20 ] && echo "# $tool server on $sdev: $((waited / 2)) s before it listened"
	in_ns "$cns" timeout 300 "$tool" -d "$cdev" -x "$(wire_gid_index "$cdev" "$cip")" "$@" "$sip" \
		>/tmp/perftest-client.log 2>&1
	crc=$?
	if [ "$crc" -ne 0 ]; then
		# The client's way to the server, and the server's sockets.
		in_ns "$cns" $IP -o route get "$sip" | sed 's/^/# route: /'
		in_ns "$cns" $IP -o addr show | sed 's/^/# addr: /'
		in_ns "$sns" cat /proc/net/tcp | sed 's/^/# tcp: /'
		# Where a server that never took its client is (the guest has
		# no pgrep: its processes by name from /proc).
		for d in /proc/[0-9]*; do
			[ "$(cat "$d/comm" 2>/dev/null)" = "$tool" ] || continue
			echo "# $tool ${d#/proc/}: $(tr '\0' ' ' <"$d/cmdline")"
			for t in "$d"/task/*; do
				echo "#   thread ${t##*/} ($(cat "$t/wchan" 2>/dev/null)):"
				sed "s/^/#     /" "$t/stack" 2>/dev/null | head -n 12
			done
			kill "${d#/proc/}"
		done
	fi
	wait "$srv"
	if [ "$crc" -ne 0 ]; then
		sed "s/^/# $cdev -> $sdev $tool client: /" /tmp/perftest-client.log | tail -n 5
		sed "s/^/# $cdev -> $sdev $tool server: /" /tmp/perftest-server.log | tail -n 5
	fi
	return "$crc"
}

# rounds PAIRS: REPS rounds of the pairs (comma-separated), taking turns.
rounds() {
	for rep in $(seq "$REPS"); do
		for p in $(echo "$1" | tr , " "); do
			one_pair "$p" "$rep"
		done
	done
}

# one_pair PAIR REP: the three tests of PAIR in round REP.
one_pair() {
	p=$1 rep=$2
	for size in 65536 1048576; do
		n=40
		[ "$size" = 1048576 ] && n=8
		if calibrated run "$p" ib_write_bw -s "$size" -n "$n"; then
			sed -n 's/^ *\('"$size"'\) *[0-9]* *[0-9.]* *\([0-9.]*\) .*/BENCH wire '"$p"' ib_write_bw \1 '"$rep"' \2/p' \
				/tmp/perftest-client.log
		else
			not_ok "wire bench: $p ib_write_bw -s $size (round $rep)"
		fi
	done
	if calibrated run "$p" ib_send_lat -s 64 -n 200; then
		lat=$(awk '$1 == 64 && NF >= 6 { print $6 }' /tmp/perftest-client.log)
		case $lat in
		'' | *inf* | *nan*) echo "# $p ib_send_lat: no latency (\"$lat\")" ;;
		*) echo "BENCH wire $p ib_send_lat 64 $rep $lat" ;;
		esac
	else
		not_ok "wire bench: $p ib_send_lat -s 64 (round $rep)"
	fi
}
rounds "$PAIRS"
for d in plx0 plx1 plx2; do
	sed "s/^/# $d: /" /sys/kernel/debug/plx_rdma/"$d"
done
for d in wvp0 wvq0 lo; do
	echo "# $d: $(cat /sys/class/net/$d/statistics/tx_packets) packets sent, $(cat /sys/class/net/$d/statistics/rx_packets) received"
done

# rxe0 -> plx0 again with every received payload written by the CPU:
# plx_rdma reloaded with wire_engine_min above any payload. Side by side
# with rxe-plx, what the engine's placement costs on this platform (each
# packet's bytes mapped through the vIOMMU for it).
cpu_placement() {
	for d in plx0 plx1 plx2; do
		rdma link delete "$d" || return 1
	done
	rmmod plx_rdma && modprobe plx_rdma wire_engine_min=4294967295 &&
		rdma link add plx0 type plx netdev wvp0 || return 1
	for _ in $(seq 20); do
		has_gid plx0 "$(ipv4_gid 10.90.1.1)" && return 0
		sleep 0.5
	done
	return 1
}
if [ "${CPU_PLACEMENT:-1}" = 1 ]; then
	if check "wire bench: plx_rdma reloaded with CPU placement (wire_engine_min)" cpu_placement; then
		rounds rxe-plxcpu
		sed "s/^/# plx0 (CPU placement): /" /sys/kernel/debug/plx_rdma/plx0
	fi
fi
check "wire bench ran" true
finish
