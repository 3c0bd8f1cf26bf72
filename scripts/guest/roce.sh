# SPDX-License-Identifier: GPL-2.0
# RoCE helpers for the guest scripts (busybox sh): GIDs of IPv4 addresses
# as sysfs shows them, where a device's port has them, and a verified
# ibv_rc_pingpong between two devices.

# ipv4_gid A.B.C.D: the GID of an IPv4 address (::ffff:a.b.c.d).
ipv4_gid() {
	printf '0000:0000:0000:0000:0000:ffff:%02x%02x:%02x%02x\n' $(echo "$1" | tr . ' ')
}

# has_gid DEV GID: the port's table holds GID (ib_core adds it from a work
# item, so allow it a moment).
has_gid() {
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		cat /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null | grep -qx "$2" && return 0
		sleep 0.5
	done
	return 1
}

# wire_gid_index DEV IP: the index of IP's RoCE v2 GID on DEV's port.
wire_gid_index() {
	roce2_gid_index "$1" "$(ipv4_gid "$2")"
}

# roce2_gid_index DEV PATTERN: the index of the first RoCE v2 GID on DEV's
# port that matches the extended regular expression PATTERN whole.
roce2_gid_index() {
	for g in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		grep -Eqx "$2" "$g" || continue
		i=${g##*/}
		grep -qx "RoCE v2" /sys/class/infiniband/"$1"/ports/1/gid_attrs/types/"$i" &&
			echo "$i" && return 0
	done
	return 1
}

# pingpong_pair LABEL SIZE N ADDR SRV-NS SRV-DEV SRV-GIDX CLI-NS CLI-DEV CLI-GIDX:
# ibv_rc_pingpong -c, N iterations of SIZE bytes each way: the server on
# SRV-DEV (GID index SRV-GIDX) in namespace SRV-NS ("-": this one), the
# client on CLI-DEV in CLI-NS connecting to it at ADDR.  The client gives
# up after ${PP_TIMEOUT:-120} s, and a server it leaves waiting is killed.
# The logs are /tmp/LABEL-server.log and /tmp/LABEL-client.log, shown as
# TAP comments; crc and src are the two exit statuses.  Succeeds when both
# ended well and the client finished its iterations.
pingpong_pair() {
	label=$1 size=$2 n=$3 addr=$4 sx='' cx=''
	[ "$5" = - ] || sx="/usr/sbin/ip netns exec $5"
	[ "$8" = - ] || cx="/usr/sbin/ip netns exec $8"
	# shellcheck disable=SC2086
	$sx ibv_rc_pingpong -d "$6" -g "$7" -s "$size" -n "$n" -c >/tmp/"$label"-server.log 2>&1 &
	srv=$!
	sleep 1
	# shellcheck disable=SC2086
	timeout "${PP_TIMEOUT:-120}" $cx ibv_rc_pingpong -d "$9" -g "${10}" -s "$size" -n "$n" -c "$addr" \
		>/tmp/"$label"-client.log 2>&1
	crc=$?
	[ "$crc" -eq 124 ] && kill "$srv" 2>/dev/null
	wait "$srv"
	src=$?
	sed "s/^/# $label server ($6): /" /tmp/"$label"-server.log
	sed "s/^/# $label client ($9): /" /tmp/"$label"-client.log
	test "$crc" -eq 0 && test "$src" -eq 0 && grep -q "iters in" /tmp/"$label"-client.log
}
