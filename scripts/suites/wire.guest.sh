# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "wire" (busybox sh): one of two guests on one link,
# each with its own emulated engine.  Guest a (10.79.0.1) is plx_rdma
# throughout; guest b (10.79.0.2) is rxe, then plx_rdma.  The two take
# turns serving: a server says it listens by taking address 10.79.1.N on
# the link, and the other guest's client starts once that address
# answers; the client then says how it went with 10.79.2.N (done) or
# 10.79.3.N (again: perftest could not calibrate its clock), so the
# scripts keep in step through the link alone.
. /guest/lib.sh
. /guest/roce.sh

export PATH=/usr/bin:/usr/sbin:$PATH
A=10.79.0.1 B=10.79.0.2
case "${WIRE_ROLE:-}" in
a) ME=$A PEER=$B ;;
b) ME=$B PEER=$A ;;
*)
	not_ok "the guest has a role (WIRE_ROLE a or b)"
	finish
	;;
esac
stat() { sed -n "s/^$1: //p" /sys/kernel/debug/plx_rdma/plx0; }

link_up() {
	ip link set eth0 up && ip addr add "$ME/24" dev eth0 &&
		ip route add 10.79.0.0/16 dev eth0
}
check "eth0 (virtio-net) up as $ME" link_up
reach() {
	for _ in $(seq 120); do ping -c 1 -W 1 "$PEER" >/dev/null 2>&1 && return 0; done
	return 1
}
check "the other guest ($PEER) answers over the QEMU link" reach
check "modprobe rust_plx_dma, ib_uverbs, rdma_ucm" \
	sh -c 'modprobe rust_plx_dma && modprobe ib_uverbs && modprobe rdma_ucm'

# The round N of exchange STEP (three rounds at most).
round_n() { echo $(($1 * 4 + $2)); }
# pinged ADDR: ADDR answers on the link (a minute at most).
pinged() {
	for _ in $(seq 60); do ping -c 1 -W 1 "$1" >/dev/null 2>&1 && return 0; done
	return 1
}
# flag ADDR: takes ADDR for a few seconds, for the other guest to see.
flag() { ip addr add "$1"/32 dev eth0 && (sleep 8 && ip addr del "$1"/32 dev eth0) & }
# serve STEP CMD...: runs the server CMD for as many rounds as the other
# guest's client asks, saying each time that it listens; returns the last
# round's status.
serve() {
	step=$1
	shift
	for r in 1 2 3; do
		n=$(round_n "$step" "$r")
		"$@" &
		srv=$!
		sleep 2
		ip addr add 10.79.1."$n"/32 dev eth0
		wait "$srv"
		rc=$?
		ip addr del 10.79.1."$n"/32 dev eth0
		# Done, or asked again; neither within a minute: done.
		for _ in $(seq 60); do
			ping -c 1 -W 1 10.79.2."$n" >/dev/null 2>&1 && return "$rc"
			ping -c 1 -W 1 10.79.3."$n" >/dev/null 2>&1 && continue 2
		done
		return "$rc"
	done
	return "$rc"
}
# await STEP CMD...: for each round, waits for the other guest's server,
# runs the client CMD, and says done or again.
await() {
	step=$1
	shift
	for r in 1 2 3; do
		n=$(round_n "$step" "$r")
		pinged 10.79.1."$n" || pinged 10.79.1."$n" || return 1
		rm -f /tmp/perftest-*.log
		"$@" && {
			flag 10.79.2."$n"
			return 0
		}
		if [ "$r" -lt 3 ] && grep -q "Can't produce a report" /tmp/perftest-*.log 2>/dev/null; then
			echo "# perftest could not calibrate its clock (round $r): again"
			flag 10.79.3."$n"
			continue
		fi
		flag 10.79.2."$n"
		return 1
	done
	return 1
}
# The exchanges, DEV the local device: rping's 10 verified round trips
# through rdma_cm (SENDs, RDMA READs and WRITEs), and 20 RDMA WRITEs of
# 64 KiB with perftest.
rping_server() { timeout 240 rping -s -a "$ME" -C 10 -S 4096 -V >/tmp/rping-s.log 2>&1; }
rping_client() {
	timeout 120 rping -c -a "$PEER" -C 10 -S 4096 -V -v >/tmp/rping-c.log 2>&1
	rc=$?
	cut -c1-100 /tmp/rping-c.log | head -n 3
	[ "$rc" -eq 0 ] && test "$(grep -c '^ping data: ' /tmp/rping-c.log)" -eq 10
}
bw_server() {
	timeout 240 ib_write_bw -d "$1" -x "$(wire_gid_index "$1" "$ME")" -s 65536 -n 20 >/tmp/perftest-server.log 2>&1
}
bw_client() {
	timeout 120 ib_write_bw -d "$1" -x "$(wire_gid_index "$1" "$ME")" -s 65536 -n 20 "$PEER" >/tmp/perftest-client.log 2>&1
	rc=$?
	grep -A1 '#bytes' /tmp/perftest-client.log
	[ "$rc" -eq 0 ] || cat /tmp/perftest-client.log
	return "$rc"
}
# exchange STEP SERVER-ROLE DEV KIND WHAT: one exchange of KIND (rping or
# bw) on this guest's DEV, served by the guest SERVER-ROLE.
exchange() {
	step=$1 server=$2 dev=$3 kind=$4 what=$5
	if [ "$WIRE_ROLE" = "$server" ]; then
		check "$what: $dev serves (step $step)" serve "$step" "${kind}_server" "$dev"
	else
		check "$what: $dev as client, completed and verified (step $step)" \
			await "$step" "${kind}_client" "$dev"
	fi
}

check "rdma link add plx0 type plx netdev eth0 (a) / rxe0 (b)" sh -c \
	"if [ $WIRE_ROLE = a ]; then rdma link add plx0 type plx netdev eth0; else modprobe rdma_rxe && rdma link add rxe0 type rxe netdev eth0; fi"
if [ "$WIRE_ROLE" = a ]; then DEV=plx0; else DEV=rxe0; fi
has_gid "$DEV" "$(ipv4_gid "$ME")"
exchange 1 b "$DEV" rping "rping, rxe0 on b serving plx0 on a"
exchange 2 a "$DEV" rping "rping, plx0 on a serving rxe0 on b"
exchange 3 b "$DEV" bw "ib_write_bw, plx0 on a writing into rxe0 on b"
exchange 4 a "$DEV" bw "ib_write_bw, rxe0 on b writing into plx0 on a"
if [ "$WIRE_ROLE" = b ]; then
	check "b: rxe0 deleted, plx0 on eth0 instead" sh -c \
		'rdma link delete rxe0 && rmmod rdma_rxe && rdma link add plx0 type plx netdev eth0'
	DEV=plx0
	has_gid plx0 "$(ipv4_gid "$ME")"
fi
exchange 5 b plx0 rping "rping, plx0 on b serving plx0 on a"
exchange 6 a plx0 rping "rping, plx0 on a serving plx0 on b"
exchange 7 b plx0 bw "ib_write_bw, plx0 on a writing into plx0 on b"
exchange 8 a plx0 bw "ib_write_bw, plx0 on b writing into plx0 on a"

sed 's/^/# plx0: /' /sys/kernel/debug/plx_rdma/plx0
check "the connection manager's MADs crossed the link (rx_datagrams $(stat rx_datagrams))" \
	test "$(stat rx_datagrams)" -gt 0
check "the engine placed received payloads ($(stat rx_payload_engine_bytes) bytes)" \
	test "$(stat rx_payload_engine_bytes)" -gt $((20 * 65536))
check "no packet refused for its ICRC or headers" \
	sh -c "test $(stat rx_drop_bad_icrc) -eq 0 -a $(stat rx_drop_bad_header) -eq 0"
check "rdma link delete plx0" rdma link delete plx0
check "rmmod plx_rdma" sh -c 'sleep 1; rmmod plx_rdma'
finish
