# SPDX-License-Identifier: GPL-2.0
# RoCE addressing helpers for the guest scripts (busybox sh): GIDs of IPv4
# addresses as sysfs shows them, and where a device's port has them.

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
	for g in /sys/class/infiniband/"$1"/ports/1/gids/*; do
		grep -qx "$(ipv4_gid "$2")" "$g" || continue
		i=${g##*/}
		grep -qx "RoCE v2" /sys/class/infiniband/"$1"/ports/1/gid_attrs/types/"$i" &&
			echo "$i" && return 0
	done
	return 1
}
