# SPDX-License-Identifier: GPL-2.0
# RoCEv2 on the wire, sourced by the rdma suite's guest half (busybox sh).
#
# plx_rdma0 with wire_local=1: its RC QPs reach peers on its own GIDs over
# UDP port 4791 like remote ones, so every request, ACK and NAK is a real
# RoCEv2 datagram built and parsed by the device, through the kernel's IP
# stack (the local route), instead of the in-host loopback fabric.  Needs
# from the caller: IP (on the port's netdev), IFINDEX, STATS, stat(),
# roce.sh's helpers; rust_plx_dma and ib_uverbs loaded, plx_rdma not.

# wire_pingpong SIZE N: ibv_rc_pingpong server and client on plx_rdma0,
# connected through IP's RoCE v2 GID, every buffer checked.
wire_pingpong() { pingpong_pair wpp "$1" "$2" "$IP" - plx_rdma0 "$GIDX" - plx_rdma0 "$GIDX"; }

# trace_wire WHAT: the requester's and responder's troubles so far, after
# WHAT (a run that fails under load says where its retries went).
trace_wire() {
	echo "# wire counters after $1: ack_timeouts $(stat ack_timeouts), ack_timer_holds $(stat ack_timer_holds), retransmits $(stat retransmits)," \
		"rx_duplicates $(stat rx_duplicates), naks_sent $(stat naks_sent), naks_received $(stat naks_received)," \
		"rnr_naks_sent $(stat rnr_naks_sent), rx_drop_queue_full $(stat rx_drop_queue_full)"
}

check "modprobe plx_rdma ifindex=$IFINDEX wire_local=1" modprobe plx_rdma ifindex="$IFINDEX" wire_local=1
has_gid plx_rdma0 "$(ipv4_gid "$IP")"
GIDX=$(wire_gid_index plx_rdma0 "$IP")
check "plx_rdma0 has a RoCE v2 GID of $IP (index ${GIDX:-none})" test -n "$GIDX"
# placed SUM: payload bytes placed from received datagrams, by both paths.
placed() { echo $(($(stat rx_payload_cpu_bytes) + $(stat rx_payload_engine_bytes))); }
engine0=$(stat engine_bytes)
tx0=$(stat tx_packets)
total=0
for s in 1 4096 65536; do
	check "RoCEv2: ibv_rc_pingpong -s $s -c, SEND/RECV both ways, verified" wire_pingpong "$s" 20
	trace_wire "RoCEv2: ibv_rc_pingpong -s $s -c"
	total=$((total + 2 * 20 * s))
done
# perftest's RDMA WRITE and READ bandwidth tests over the wire (not
# verified: wire_test's WRITE and READ are).
wire_bw() {
	tool=$1
	"$tool" -d plx_rdma0 -x "$GIDX" -s 65536 -n 50 >/tmp/perftest-server.log 2>&1 &
	srv=$!
	sleep 2
	timeout 120 "$tool" -d plx_rdma0 -x "$GIDX" -s 65536 -n 50 "$IP" >/tmp/perftest-client.log 2>&1
	crc=$?
	wait "$srv"
	src=$?
	sed "s/^/# $tool client: /" /tmp/perftest-client.log
	[ "$crc" -eq 0 ] && [ "$src" -eq 0 ] || sed "s/^/# $tool server: /" /tmp/perftest-server.log
	test "$crc" -eq 0 && test "$src" -eq 0
}
# rdma_cm over the wire: the connection manager's MADs leave QP1 as
# RoCEv2 UD SENDs (Q_Key 0x80010000) and come back through the port.
dg0=$(stat rx_datagrams)
check "RoCEv2: rping through rdma_cm to $IP, 10 verified round trips" rping_pair "$IP"
trace_wire "RoCEv2: rping through rdma_cm to $IP"
check "the CM's MADs crossed the wire as UD SENDs (rx_datagrams $dg0 -> $(stat rx_datagrams))" \
	test "$(stat rx_datagrams)" -ge $((dg0 + 3))
for tool in ib_write_bw ib_read_bw; do
	rx0=$(placed)
	check "RoCEv2: $tool -s 65536 -n 50 completes" calibrated wire_bw "$tool"
	trace_wire "RoCEv2: $tool -s 65536 -n 50 completes"
	check "the $tool payload was placed ($rx0 -> $(placed) bytes, 3276800 more at least)" \
		test "$(placed)" -ge $((rx0 + 50 * 65536))
done
sed 's/^/# stats: /' "$STATS"
check "the pingpongs crossed the wire: $(stat tx_packets) datagrams sent, $(stat rx_packets) taken" \
	test "$(stat tx_packets)" -gt $((tx0 + 2 * 20 * (1 + 1 + 4 + 64))) -a "$(stat rx_packets)" -gt 0
check "every message was acknowledged: $(stat acks_sent) ACKs sent, $(stat acks_received) taken" \
	test "$(stat acks_sent)" -ge 120 -a "$(stat acks_received)" -ge 120
check "received payloads placed: $(placed) bytes, $total expected at least" \
	test "$(placed)" -ge "$total"
check "the engine placed received payloads straight from the skbs ($(stat rx_payload_engine_bytes) bytes; the CPU $(stat rx_payload_cpu_bytes), under 256 bytes each)" \
	test "$(stat rx_payload_engine_bytes)" -gt "$total" -a "$(stat rx_payload_cpu_bytes)" -lt 4096
# (rx_drop_no_qp may count retransmissions that arrive after a test
# destroyed its QPs.)
check "no packet of the device's own was refused (ICRC, header, source)" sh -c \
	"test $(stat rx_drop_bad_icrc) -eq 0 -a $(stat rx_drop_bad_header) -eq 0 -a $(stat rx_drop_wrong_source) -eq 0"
check "the engine moved nothing but wire payloads: nothing went through the loopback fabric (engine_bytes +$(($(stat engine_bytes) - engine0)), rx_payload_engine_bytes $(stat rx_payload_engine_bytes))" \
	test "$(($(stat engine_bytes) - engine0))" -eq "$(stat rx_payload_engine_bytes)"
# Datagrams from outside (wire_test builds its own, ICRC included, and
# sends them with a raw socket): a well-formed SEND is delivered, every
# hostile one dropped and counted, nothing written.
WIRE_DEV=plx_rdma0 wire_test >/tmp/wire-test.tap 2>&1
sed 's/^/# wire_test: /' /tmp/wire-test.tap
kselftest_points /tmp/wire-test.tap
check "wire_test: no failure, no skip" \
	grep -q '^# Totals: pass:[1-9][0-9]* fail:0 xfail:0 xpass:0 skip:0 error:0' /tmp/wire-test.tap
sed 's/^/# stats after wire_test: /' "$STATS"
# The verbs kselftests with every QP pair on the wire (wire_local: the
# device's own QPs talk RoCEv2 through the IP stack), outcome by outcome
# against rxe's run above, the same documented divergences left out.
# (/guest/wire_exclusions: the cases left out, and why.)
grep -hv '^#' /guest/wire_exclusions "$DIVERGENCES" | grep -v '^$' >/tmp/wire-skip
wire_skip_args=$(grep -v '^#' /guest/wire_exclusions | grep -v '^$' | sed 's/^/-T /' | tr '\n' ' ')
tx0=$(stat tx_packets)
# shellcheck disable=SC2086
PLX_RDMA_DEV=plx_rdma0 verbs_test $wire_skip_args >/tmp/verbs-wire.tap 2>&1
wire_failed=$(sed -n 's/^not ok [0-9]* //p' /tmp/verbs-wire.tap | tr '\n' ' ')
check "verbs kselftests over the wire ($(($(stat tx_packets) - tx0)) datagrams): no failure, no skip${wire_failed:+; failed: $wire_failed}" \
	grep -q '^# Totals: pass:[1-9][0-9]* fail:0 xfail:0 xpass:0 skip:0 error:0' /tmp/verbs-wire.tap
grep -v '^# OUTCOME' /tmp/verbs-wire.tap | grep -i 'not ok\|# Totals' | sed 's/^/# wire verbs: /'
diffout=$(sh /guest/verbs_diff.sh /tmp/verbs-rxe.tap /tmp/verbs-wire.tap /tmp/wire-skip)
drc=$?
printf '%s\n' "$diffout" | sed 's/^/# /'
check "over the wire, plx_rdma0 gives rxe0's outcomes ($(printf '%s' "$diffout" | head -n 1))" test "$drc" -eq 0
rdma statistic show link plx_rdma0/1 >/tmp/wire-rdma-stat.out 2>&1
sed 's/^/# rdma statistic: /' /tmp/wire-rdma-stat.out
check "rdma statistic shows the wire counters (rx_drop_bad_icrc $(stat rx_drop_bad_icrc))" \
	grep -q "rx_drop_bad_icrc $(stat rx_drop_bad_icrc) " /tmp/wire-rdma-stat.out
check "plx_rdma0 listens on UDP port 4791 while it exists (its GSI QP takes the CM's datagrams)" \
	grep -q ':12B7 ' /proc/net/udp
check "rmmod plx_rdma (wire_local)" rmmod plx_rdma
check "UDP port 4791 is closed with the device" sh -c "! grep -q ':12B7 ' /proc/net/udp"

# plx_rdma against rdma_rxe, the reference RoCEv2 stack: plx0 (made with
# `rdma link add`) on one end of a veth pair in this namespace, rxe0 on the other end in a second
# one (two stacks cannot share UDP port 4791 in one namespace), and
# ibv_rc_pingpong with plx as server and as client.  The test kernel has
# network namespaces and veth for it (scripts/kernel/common.config).
interop_pingpong() {
	# interop_pingpong SERVER-SIDE: "plx" or "rxe"; the client is the other.
	if [ "$1" = plx ]; then
		pingpong_pair ipp 4096 20 10.78.0.1 - "$PDEV" "$PGIDX" plxpeer rxe0 "$RGIDX"
	else
		pingpong_pair ipp 4096 20 10.78.0.2 plxpeer rxe0 "$RGIDX" - "$PDEV" "$PGIDX"
	fi
}
# lossy_pingpong SERVER-SIDE: interop_pingpong on a lossy link, once more
# if the only failure is the one a lossy link makes of ibv_rc_pingpong
# itself: the server took every message and left, the acknowledge of the
# client's last one was lost, and the client's retries found no QP to
# answer them. The client then ends with "transport retry counter
# exceeded", or, an rxe0 client, may stall for good instead (its requester
# can stop retrying without ending the request once its peer is gone):
# a client still waiting after 45 s counts as that too. Any other
# failure, or that one twice, fails.
lossy_pingpong() {
	PP_TIMEOUT=45
	lossy_pingpong_once "$1"
	ret=$?
	unset PP_TIMEOUT
	return "$ret"
}
lossy_pingpong_once() {
	interop_pingpong "$1" && return 0
	grep -q "iters in" /tmp/ipp-server.log || return 1
	if [ "$crc" -eq 124 ]; then
		echo "# the server finished and left; the client still waited after 45 s"
	else
		grep -q "transport retry counter exceeded" /tmp/ipp-client.log || return 1
		echo "# the server finished and left, the last acknowledge was lost"
	fi
	echo "# once more"
	interop_pingpong "$1"
}
# veth_pair NEAR FAR NEAR-IP FAR-IP: a veth pair, NEAR here with NEAR-IP/24
# and FAR in namespace plxpeer with FAR-IP/24, both up.
veth_pair() {
	/usr/sbin/ip link add "$1" type veth peer name "$2" &&
		/usr/sbin/ip link set "$2" netns plxpeer &&
		/usr/sbin/ip addr add "$3/24" dev "$1" &&
		/usr/sbin/ip link set "$1" up &&
		/usr/sbin/ip netns exec plxpeer /usr/sbin/ip addr add "$4/24" dev "$2" &&
		/usr/sbin/ip netns exec plxpeer /usr/sbin/ip link set "$2" up
}
# The namespace and the pair; `ip netns` keeps its names under /run/netns.
interop_setup() {
	mkdir -p /run/netns &&
		modprobe veth &&
		/usr/sbin/ip netns add plxpeer &&
		/usr/sbin/ip netns exec plxpeer /usr/sbin/ip link set lo up &&
		veth_pair plxveth0 plxveth1 10.78.0.1 10.78.0.2
}
check "interop: namespace plxpeer joined by a veth pair (10.78.0.1 - 10.78.0.2)" interop_setup
check "modprobe rdma_rxe (interop)" modprobe rdma_rxe
check "rxe0 on plxveth1 in namespace plxpeer" \
	/usr/sbin/ip netns exec plxpeer rdma link add rxe0 type rxe netdev plxveth1
# The device the way users make rxe's: `rdma link add`, which loads the
# module by its alias (rdma-link-plx) too.
check "interop: plx_rdma unloaded" sh -c '! grep -q "^plx_rdma " /proc/modules'
check "rdma link add plx0 type plx netdev plxveth0 (loads plx_rdma)" \
	sh -c 'rdma link add plx0 type plx netdev plxveth0 && grep -q "^plx_rdma " /proc/modules'
check "rdma link shows plx0/1 on plxveth0, ACTIVE" sh -c \
	'rdma link show plx0/1 | grep "state ACTIVE" | grep -q "netdev plxveth0"'
check "rdma link add with a name already taken fails, nothing added" sh -c \
	'! rdma link add plx0 type plx netdev plxveth0 2>/dev/null && test "$(ls /sys/class/infiniband | grep -c "^plx")" -eq 1'
check "rdma link add on no such netdev fails" sh -c '! rdma link add plx9 type plx netdev nosuchdev 2>/dev/null && ! test -e /sys/class/infiniband/plx9'
# The link device's counters are its own debugfs file.
STATS=/sys/kernel/debug/plx_rdma/plx0 PDEV=plx0
# rxe_stat NAME: one of rxe0's counters.
rxe_stat() { /usr/sbin/ip netns exec plxpeer rdma statistic show link rxe0/1 | tr ' ' '\n' | grep -A1 -x "$1" | tail -n 1; }
check "plx0's counters are in debugfs as plx_rdma/plx0" test -r "$STATS"
has_gid plx0 "$(ipv4_gid 10.78.0.1)"
has_gid rxe0 "$(ipv4_gid 10.78.0.2)"
PGIDX=$(wire_gid_index plx0 10.78.0.1)
RGIDX=$(wire_gid_index rxe0 10.78.0.2)
check "interop: ibv_rc_pingpong, plx0 server, rxe0 client" interop_pingpong plx
trace_wire "interop: ibv_rc_pingpong"
check "interop: ibv_rc_pingpong, rxe0 server, plx0 client" interop_pingpong rxe
trace_wire "interop: ibv_rc_pingpong"
# RDMA WRITE and READ across: perftest's bandwidth tests, each device in
# turn the server (the target of the WRITEs, the source of the READs).
interop_bw() {
	# interop_bw TOOL SERVER-SIDE [SIZE ITERATIONS]: 64 KiB 20 times unless told
	size=${3:-65536} iters=${4:-20}
	if [ "$2" = plx ]; then
		"$1" -d plx0 -x "$PGIDX" -s "$size" -n "$iters" >/tmp/perftest-server.log 2>&1 &
		srv=$!
		sleep 2
		timeout 120 /usr/sbin/ip netns exec plxpeer "$1" -d rxe0 -x "$RGIDX" -s "$size" -n "$iters" 10.78.0.1 >/tmp/perftest-client.log 2>&1
	else
		/usr/sbin/ip netns exec plxpeer "$1" -d rxe0 -x "$RGIDX" -s "$size" -n "$iters" >/tmp/perftest-server.log 2>&1 &
		srv=$!
		sleep 2
		timeout 120 "$1" -d plx0 -x "$PGIDX" -s "$size" -n "$iters" 10.78.0.2 >/tmp/perftest-client.log 2>&1
	fi
	crc=$?
	wait "$srv"
	src=$?
	sed "s/^/# $1 client: /" /tmp/perftest-client.log
	[ "$crc" -eq 0 ] && [ "$src" -eq 0 ] || sed "s/^/# $1 server: /" /tmp/perftest-server.log
	test "$crc" -eq 0 && test "$src" -eq 0
}
check "interop: ib_write_bw -s 65536 -n 20, rxe0 server, plx0 client" calibrated interop_bw ib_write_bw rxe
trace_wire "interop: ib_write_bw -s 65536 -n 20"
check "interop: ib_read_bw -s 65536 -n 20, plx0 server, rxe0 client" calibrated interop_bw ib_read_bw plx
trace_wire "interop: ib_read_bw -s 65536 -n 20"
check "interop: ib_read_bw -s 65536 -n 20, rxe0 server, plx0 client" calibrated interop_bw ib_read_bw rxe
trace_wire "interop: ib_read_bw -s 65536 -n 20"
# interop_both TOOL SIZE ITERATIONS: TOOL with each device in turn the server.
interop_both() {
	check "interop: $1 -s $2 -n $3, plx0 server, rxe0 client" calibrated interop_bw "$1" plx "$2" "$3"
	trace_wire "interop: $1 -s $2 -n $3"
	check "interop: $1 -s $2 -n $3, rxe0 server, plx0 client" calibrated interop_bw "$1" rxe "$2" "$3"
	trace_wire "interop: $1 -s $2 -n $3"
}
# SEND: bandwidth at 64 KiB, latency at 64 B.
interop_both ib_send_bw 65536 20
interop_both ib_send_lat 64 100
# rdma_cm across the two stacks: REQ, REP and RTU as datagrams between
# the GSI QPs, then rping's SENDs, READs and WRITEs on the RC QPs.
check "interop: rping through rdma_cm, plx0 server, rxe0 client, verified" \
	rping_pair 10.78.0.1 - plxpeer
trace_wire "interop: rping through rdma_cm"
check "interop: rping through rdma_cm, rxe0 server, plx0 client, verified" \
	rping_pair 10.78.0.2 plxpeer -
trace_wire "interop: rping through rdma_cm"
# IPv6: the same pair on IPv6 GIDs, a unique local address each and the
# link-local GIDs ib_core makes from the MACs (what GID index 1 of a RoCE
# port is, and what tools that pick no GID take): RC over the wire and
# rdma_cm's datagrams with an IPv6 header, as rxe sends them.
ipv6_setup() {
	/usr/sbin/ip -6 addr add fd00:78::1/64 dev plxveth0 nodad &&
		/usr/sbin/ip netns exec plxpeer /usr/sbin/ip -6 addr add fd00:78::2/64 dev plxveth1 nodad
}
check "interop: IPv6 addresses fd00:78::1 and fd00:78::2 on the veth pair" ipv6_setup
ULA1=fd00:0078:0000:0000:0000:0000:0000:0001 ULA2=fd00:0078:0000:0000:0000:0000:0000:0002
has_gid plx0 "$ULA1"
has_gid rxe0 "$ULA2"
PGIDX6=$(roce2_gid_index plx0 "$ULA1") RGIDX6=$(roce2_gid_index rxe0 "$ULA2")
PGIDXLL=$(roce2_gid_index plx0 'fe80:.*') RGIDXLL=$(roce2_gid_index rxe0 'fe80:.*')
echo "# IPv6 GID indexes: plx0 ${PGIDX6:-none} (link-local ${PGIDXLL:-none}), rxe0 ${RGIDX6:-none} (link-local ${RGIDXLL:-none})"
v6_before=$(stat rx_packets)
check "interop IPv6: ibv_rc_pingpong, plx0 server, rxe0 client" \
	pingpong_pair ipp6 4096 20 10.78.0.1 - plx0 "$PGIDX6" plxpeer rxe0 "$RGIDX6"
check "interop IPv6: ibv_rc_pingpong, rxe0 server, plx0 client" \
	pingpong_pair ipp6 4096 20 10.78.0.2 plxpeer rxe0 "$RGIDX6" - plx0 "$PGIDX6"
check "interop IPv6: ibv_rc_pingpong of 64 KiB on the link-local GIDs, rxe0 server, plx0 client" \
	pingpong_pair ipp6ll 65536 20 10.78.0.2 plxpeer rxe0 "$RGIDXLL" - plx0 "$PGIDXLL"
check "interop IPv6: plx0 took the packets (rx_packets $v6_before -> $(stat rx_packets))" \
	test "$(stat rx_packets)" -gt "$v6_before"
check "interop IPv6: rping through rdma_cm, plx0 server, rxe0 client, verified" \
	rping_pair fd00:78::1 - plxpeer
check "interop IPv6: rping through rdma_cm, rxe0 server, plx0 client, verified" \
	rping_pair fd00:78::2 plxpeer -
trace_wire "interop IPv6"
# Multicast: rdma_cm joins a group (IGMP through the netdev), librdmacm
# attaches the UD QP to it, and mckey's sender's datagrams to QP 0xFFFFFF
# reach the receiver's QP through IP multicast, each side in turn the
# sender.  mckey's sender destroys its QP as soon as it has posted its
# sends, so that only the first few leave (with rxe as with plx_rdma, one
# to three of ten here): the receiver waits for one.
mcast_setup() {
	/usr/sbin/ip route add 224.0.0.0/4 dev plxveth0 &&
		/usr/sbin/ip netns exec plxpeer /usr/sbin/ip route add 224.0.0.0/4 dev plxveth1
}
check "interop multicast: a route for 224.0.0.0/4 on each end" mcast_setup
# mckey_pair RECEIVER-SIDE: "plx" or "rxe"; the sender is the other.
mckey_pair() {
	if [ "$1" = plx ]; then rx='' rb=10.78.0.1 tx='/usr/sbin/ip netns exec plxpeer' tb=10.78.0.2
	else rx='/usr/sbin/ip netns exec plxpeer' rb=10.78.0.2 tx='' tb=10.78.0.1; fi
	# shellcheck disable=SC2086
	timeout 40 $rx mckey -m 239.1.2.3 -b "$rb" -C 1 -S 256 >/tmp/mckey-rx.log 2>&1 &
	rcv=$!
	sleep 1
	# shellcheck disable=SC2086
	timeout 40 $tx mckey -m 239.1.2.3 -b "$tb" -s -C 10 -S 256 >/tmp/mckey-tx.log 2>&1
	trc=$?
	wait "$rcv"
	rrc=$?
	sed 's/^/# mckey receiver: /' /tmp/mckey-rx.log
	sed 's/^/# mckey sender: /' /tmp/mckey-tx.log
	test "$trc" -eq 0 && test "$rrc" -eq 0 && grep -q "data transfers complete" /tmp/mckey-rx.log
}
mc_before=$(stat rx_datagrams)
check "interop multicast: mckey, plx0 receives, rxe0 sends" mckey_pair plx
mc_after=$(stat rx_datagrams)
check "interop multicast: plx0's attached QP took the datagram (rx_datagrams $mc_before -> $mc_after)" \
	test "$mc_after" -gt "$mc_before"
check "interop multicast: mckey, rxe0 receives, plx0 sends" mckey_pair rxe
echo "# plx0 rx_drop_mcast $(stat rx_drop_mcast)"
# rxe writing into plx0: rxe asks for an acknowledge only at a message's
# end, and plx0 places each packet with its own engine copy; plx0
# acknowledges every 8 packets besides, so that rxe sees progress before
# its timer fires.
check "interop: ib_write_bw -s 65536 -n 20, plx0 server, rxe0 client" calibrated interop_bw ib_write_bw plx
trace_wire "interop: ib_write_bw into plx0"
echo "# rxe0: $(/usr/sbin/ip netns exec plxpeer rdma statistic show link rxe0/1)"
check "rxe0 saw no request twice and no sequence NAK in the clean runs (duplicate_request $(rxe_stat duplicate_request), rcvd_seq_err $(rxe_stat rcvd_seq_err))" \
	test "$(rxe_stat duplicate_request)" = 0 -a "$(rxe_stat rcvd_seq_err)" = 0
# The hostile datagrams again, now against rxe0, the reference (after the
# clean runs: its counters count them): the same
# cases must end the same way (wire_test checks each outcome; the counter
# checks are plx_rdma's alone).  rxe takes packets only from its netdev, so
# they come over the veth from this namespace, carrying rxe0's own address
# as source: the far end accepts that (accept_local).
check "accept_local on plxveth1 (datagrams from outside with rxe0's own source)" \
	/usr/sbin/ip netns exec plxpeer sh -c 'echo 1 >/proc/sys/net/ipv4/conf/plxveth1/accept_local'
/usr/sbin/ip netns exec plxpeer env WIRE_DEV=rxe0 WIRE_NETNS=/proc/1/ns/net wire_test >/tmp/wire-test-rxe.tap 2>&1
sed 's/^/# wire_test on rxe0: /' /tmp/wire-test-rxe.tap
check "wire_test on rxe0: no failure, no skip" \
	grep -q '^# Totals: pass:[1-9][0-9]* fail:0 xfail:0 xpass:0 skip:0 error:0' /tmp/wire-test-rxe.tap
# outcomes TAP: "case ok|failed" for each case of a kselftest's TAP.
outcomes() { sed -n 's/^ok [0-9]* \([^ ]*\).*/\1 ok/p; s/^not ok [0-9]* \([^ ]*\).*/\1 failed/p' "$1" | sort; }
outcomes /tmp/wire-test.tap >/tmp/wire-outcomes-plx
outcomes /tmp/wire-test-rxe.tap >/tmp/wire-outcomes-rxe
echo "# hostile datagrams: case | plx_rdma0 | rxe0"
awk 'NR == FNR { plx[$1] = $2; next } { print "# " $1 " | " plx[$1] " | " $2 }' \
	/tmp/wire-outcomes-plx /tmp/wire-outcomes-rxe
check "wire_test: plx_rdma0 and rxe0 end each of the $(wc -l </tmp/wire-outcomes-rxe) cases the same way" \
	sh -c 'test -s /tmp/wire-outcomes-rxe && cmp -s /tmp/wire-outcomes-plx /tmp/wire-outcomes-rxe'

# Two devices of the module at once, each on its own netdev, sharing the
# module's UDP port 4791: plx1 on a second veth pair (10.80.0.1, its peer
# end in plxpeer with rxe1), beside plx0, and rping between plx1 and rxe1
# (the port hands each datagram to the device its destination address
# belongs to).
pair2() {
	veth_pair plxveth2 plxveth3 10.80.0.1 10.80.0.2 &&
		/usr/sbin/ip netns exec plxpeer rdma link add rxe1 type rxe netdev plxveth3
}
check "a second veth pair (10.80.0.1 - 10.80.0.2), rxe1 on its far end" pair2
check "rdma link add plx1 type plx netdev plxveth2 beside plx0" rdma link add plx1 type plx netdev plxveth2
check "rdma link add on a netdev that has a device already fails (EEXIST)" sh -c \
	'! rdma link add plx2 type plx netdev plxveth2 2>/tmp/plx2.err && grep -q "File exists" /tmp/plx2.err && ! test -e /sys/class/infiniband/plx2'
has_gid plx1 "$(ipv4_gid 10.80.0.1)"
p1=/sys/kernel/debug/plx_rdma/plx1
x0=$(stat rx_packets)
y0=$(sed -n 's/^rx_datagrams: //p' "$p1")
check "two devices, one port: rping through rdma_cm, plx1 server, rxe1 client, verified" \
	rping_pair 10.80.0.1 - plxpeer
check "the datagrams went to plx1 (rx_datagrams $y0 -> $(sed -n 's/^rx_datagrams: //p' "$p1")), none to plx0 (rx_packets $x0 -> $(stat rx_packets))" \
	test "$(sed -n 's/^rx_datagrams: //p' "$p1")" -gt "$y0" -a "$(stat rx_packets)" -eq "$x0"
# The netdev goes first, as when a link disappears: the port lets it go
# and goes down without waiting for the device (the far end's rxe1 goes
# with its own netdev), and the device can still be deleted.
check "ip link del plxveth2 with plx1 on it completes" timeout 30 /usr/sbin/ip link del plxveth2
check "plx1/1 is down without its netdev" sh -c "rdma link show plx1/1 | grep -q 'state DOWN'"
check "rdma link delete plx1 (its netdev gone)" rdma link delete plx1
/usr/sbin/ip netns exec plxpeer rdma link delete rxe1 2>/dev/null

# plx to plx across namespaces: plx4 on plxveth4 here (10.82.0.1), plx5
# made from inside namespace plxpeer2 on the far end (10.82.0.2). Each
# namespace has its own UDP port 4791, opened by its first QP on the wire.
pair_ns() {
	/usr/sbin/ip netns add plxpeer2 &&
		/usr/sbin/ip netns exec plxpeer2 /usr/sbin/ip link set lo up &&
		/usr/sbin/ip link add plxveth4 type veth peer name plxveth5 &&
		/usr/sbin/ip link set plxveth5 netns plxpeer2 &&
		/usr/sbin/ip addr add 10.82.0.1/24 dev plxveth4 &&
		/usr/sbin/ip link set plxveth4 up &&
		/usr/sbin/ip netns exec plxpeer2 /usr/sbin/ip addr add 10.82.0.2/24 dev plxveth5 &&
		/usr/sbin/ip netns exec plxpeer2 /usr/sbin/ip link set plxveth5 up
}
check "namespace plxpeer2 joined by a veth pair (10.82.0.1 - 10.82.0.2)" pair_ns
check "rdma link add plx4 type plx netdev plxveth4" rdma link add plx4 type plx netdev plxveth4
check "rdma link add plx5 from inside plxpeer2, on plxveth5 there" \
	/usr/sbin/ip netns exec plxpeer2 rdma link add plx5 type plx netdev plxveth5
check "rdma link shows plx5/1 ACTIVE on plxveth5" sh -c \
	'/usr/sbin/ip netns exec plxpeer2 rdma link show plx5/1 | grep "state ACTIVE" | grep -q "netdev plxveth5"'
check "a second device on plxveth5 fails (EEXIST), in its namespace too" sh -c \
	'! /usr/sbin/ip netns exec plxpeer2 rdma link add plx6 type plx netdev plxveth5 2>/dev/null && ! test -e /sys/class/infiniband/plx6'
has_gid plx4 "$(ipv4_gid 10.82.0.1)"
has_gid plx5 "$(ipv4_gid 10.82.0.2)"
# ns_pingpong: ibv_rc_pingpong -c, the plx4 server here, the plx5 client in
# plxpeer2.
ns_pingpong() {
	pingpong_pair nspp 65536 20 10.82.0.1 - plx4 "$(wire_gid_index plx4 10.82.0.1)" \
		plxpeer2 plx5 "$(wire_gid_index plx5 10.82.0.2)"
}
p4=/sys/kernel/debug/plx_rdma/plx4 p5=/sys/kernel/debug/plx_rdma/plx5
check "plx4 <-> plx5 across namespaces: ibv_rc_pingpong -s 65536 -c, verified" ns_pingpong
check "plx4 <-> plx5: rping through rdma_cm, plx4 server, plx5 client in plxpeer2, verified" \
	rping_pair 10.82.0.1 - plxpeer2
check "each device received on its own namespace's port (plx4 rx_packets $(sed -n 's/^rx_packets: //p' $p4), plx5 $(sed -n 's/^rx_packets: //p' $p5))" \
	test "$(sed -n 's/^rx_packets: //p' $p4)" -gt 0 -a "$(sed -n 's/^rx_packets: //p' $p5)" -gt 0
# The namespace goes before its device: the device holds it (as a socket
# would), so plx5 stays usable until deleted; then the namespace and its
# veth end go, and plx4 loses its netdev's peer.
check "ip netns del plxpeer2 with plx5 in it completes" timeout 30 /usr/sbin/ip netns del plxpeer2
check "rdma link delete plx5 (its namespace deleted)" timeout 30 rdma link delete plx5
ns_gone() {
	for _ in $(seq 1 40); do
		/usr/sbin/ip link show plxveth4 >/dev/null 2>&1 || return 0
		sleep 0.5
	done
	return 1
}
check "then plxpeer2 is torn down: its veth pair goes (plxveth4 gone)" ns_gone
check "rdma link delete plx4" rdma link delete plx4

# A bad link: netem on both ends loses, duplicates, delays and reorders,
# and corrupts packets.  Every transfer still completes and verifies, and
# the counters show the retransmissions and the drops.
netem="delay 1ms reorder 10% 50% loss 1% duplicate 1% corrupt 0.5%"
netem_on() {
	/usr/sbin/tc qdisc add dev plxveth0 root netem $netem &&
		/usr/sbin/ip netns exec plxpeer /usr/sbin/tc qdisc add dev plxveth1 root netem $netem
}
check "netem on both ends of the veth pair ($netem)" netem_on
re0=$(($(stat retransmits) + $(stat rx_duplicates) + $(stat rx_drop_psn_ahead)))
check "netem: ibv_rc_pingpong, plx0 server, rxe0 client, verified" lossy_pingpong plx
trace_wire "netem: ibv_rc_pingpong"
check "netem: ibv_rc_pingpong, rxe0 server, plx0 client, verified" lossy_pingpong rxe
trace_wire "netem: ibv_rc_pingpong"
check "netem: ib_write_bw, rxe0 server, plx0 client" calibrated interop_bw ib_write_bw rxe
trace_wire "netem: ib_write_bw into rxe0"
check "netem: ib_read_bw, rxe0 server, plx0 client" calibrated interop_bw ib_read_bw rxe
trace_wire "netem: ib_read_bw from rxe0"
check "netem: rping through rdma_cm, rxe0 server, plx0 client, verified" \
	rping_pair 10.78.0.2 plxpeer -
trace_wire "netem: rping"
re1=$(($(stat retransmits) + $(stat rx_duplicates) + $(stat rx_drop_psn_ahead)))
check "netem: plx0 recovered from what the link did (retransmits, duplicates and gaps $re0 -> $re1; ICRC drops $(stat rx_drop_bad_icrc))" \
	test "$re1" -gt "$re0"
/usr/sbin/tc qdisc del dev plxveth0 root 2>/dev/null
/usr/sbin/ip netns exec plxpeer /usr/sbin/tc qdisc del dev plxveth1 root 2>/dev/null
sed 's/^/# stats after interop: /' "$STATS"
check "rdma link delete plx0" rdma link delete plx0
# ib_core unregisters it at once; the module frees it from a work item.
link_gone() {
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		! test -e /sys/class/infiniband/plx0 && ! test -e "$STATS" && return 0
		sleep 0.5
	done
	return 1
}
check "plx0 is gone, and its counters with it" link_gone
check "the name is free again: rdma link add plx0 on plxveth0" \
	rdma link add plx0 type plx netdev plxveth0
check "rmmod plx_rdma with plx0 still there removes it" \
	sh -c 'rmmod plx_rdma && ! test -e /sys/class/infiniband/plx0'
check "rdma link delete rxe0 (interop)" /usr/sbin/ip netns exec plxpeer rdma link delete rxe0
check "rmmod rdma_rxe (interop)" rmmod rdma_rxe
/usr/sbin/ip link del plxveth0 2>/dev/null
/usr/sbin/ip netns del plxpeer 2>/dev/null
STATS=/sys/kernel/debug/plx_rdma/stats
