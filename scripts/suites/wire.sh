# SPDX-License-Identifier: GPL-2.0
# Suite: two computers: two guests, each with its own emulated engine, joined by a QEMU network backend (a pair of unix datagram sockets on the host, no host networking); plx_rdma on one talks RoCEv2 to rxe, then to plx_rdma, on the other: rdma_cm (rping -V) and ib_write_bw in both roles
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

mkdir -p "$REPO/build/results"
suite_rdma_userland
extras+=(-a "$REPO/scripts/guest/roce.sh:/guest/roce.sh")
# Builds first, once: the two guest runs below would otherwise build the
# kernel, the modules and the emulator at the same time.
"$REPO/scripts/kernel-build.sh" test >/dev/null && "$REPO/scripts/modules-build.sh" test >/dev/null &&
	"$REPO/scripts/emu-build.sh" >/dev/null || {
	not_ok "the test kernel, the modules and the emulator build"
	finish
}
# The link: each QEMU binds its own unix datagram socket and sends to the
# other's.  Short paths in the cache, which the root sees at the same place.
link=$(mktemp -d "$PLX_CACHE/wire.XXXXXX")
nic() { # nic OWN PEER MAC
	echo "-q" "-netdev" "-q" "dgram,id=wire,local.type=unix,local.path=$link/$1,remote.type=unix,remote.path=$link/$2"
	echo "-q" "-device" "-q" "virtio-net-pci,netdev=wire,mac=$3"
}
# Guest a is plx_rdma throughout; guest b is rxe, then plx_rdma.
# shellcheck disable=SC2046
GUEST_PARAMS="WIRE_ROLE=a" run_emulated_guest wire-a 1 900 "$REPO/scripts/suites/wire.guest.sh" \
	"${extras[@]}" $(nic a b 52:54:00:79:00:01) >/dev/null 2>&1 &
pa=$!
# shellcheck disable=SC2046
GUEST_PARAMS="WIRE_ROLE=b" run_emulated_guest wire-b 1 900 "$REPO/scripts/suites/wire.guest.sh" \
	"${extras[@]}" $(nic b a 52:54:00:79:00:02) >/dev/null 2>&1 &
pb=$!
ra=0 rb=0
wait "$pa" || ra=$?
wait "$pb" || rb=$?
rm -rf "$link"
guest_points wire-a | sed -e 's/^ok - /ok - a: /' -e 's/^not ok - /not ok - a: /'
guest_points wire-b | sed -e 's/^ok - /ok - b: /' -e 's/^not ok - /not ok - b: /'
check "guest a ran to the end with status 0, no splat" test "$ra" -eq 0
check "guest b ran to the end with status 0, no splat" test "$rb" -eq 0
finish
