#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Check, without a guest or RDMA hardware, which devices libibverbs gives to
# the plx_rdma provider.  The RDMA user space of scripts/rdma-userland.sh is
# staged in a scratch directory laid out as in the guests (so this also
# proves the loader finds everything without an ld.so.cache), with a fake
# sysfs of uverbs devices; ibv_devices runs chrooted there.  The host must
# have no RDMA netlink (no ib_core loaded): libibverbs then enumerates
# devices from sysfs, as it does on kernels without RDMA_NLDEV.
#
#   scripts/provider-match-check.sh      (as root; exit status 0 when right)

. "$(dirname "$0")/lib.sh"

need_root provider-match-check
mapfile -t files < <("$REPO/scripts/rdma-userland.sh")
[ "${#files[@]}" -gt 0 ] || die "rdma-userland.sh listed nothing"
st=$(mktemp -d "$PLX_CACHE/match.XXXXXX")
trap 'rm -rf "$st"' EXIT
for spec in "${files[@]}"; do
	mkdir -p "$st/$(dirname "${spec#*:}")"
	cp -a "${spec%%:*}" "$st/${spec#*:}"
done

# fake_dev N IBDEV ABI: uverbsN for the ib_device IBDEV speaking uverbs
# ABI version ABI.  libibverbs only stats /dev/infiniband/uverbsN.
mkdir -p "$st/sys/class/infiniband_verbs" "$st/dev/infiniband"
echo 6 >"$st/sys/class/infiniband_verbs/abi_version"
fake_dev() {
	local uv=$st/sys/class/infiniband_verbs/uverbs$1 ib=$st/sys/class/infiniband/$2
	mkdir -p "$uv" "$ib"
	echo "$2" >"$uv/ibdev"
	echo "$3" >"$uv/abi_version"
	echo "231:$((192 + $1))" >"$uv/dev"
	echo "1: CA" >"$ib/node_type"
	printf '0000:0000:0000:%04x\n' "$1" >"$ib/node_guid"
	[ -z "${4:-}" ] || echo "$4" >"$ib/node_desc"
	: >"$st/dev/infiniband/uverbs$1"
}
fake_dev 0 plx_rdma0 1    # ours
fake_dev 1 plx_rdma1 2    # ours by name, but an ABI we do not speak
fake_dev 2 myNplx_rdma0 1 # VERBS_NAME_MATCH's pattern takes it; we must not
fake_dev 3 rxe0 1         # rxe's
fake_dev 4 plx0 1 plx_rdma # ours, named by `rdma link add`
fake_dev 5 other0 1 mlx5_0 # nobody's here

devices() {
	{ env -i IBV_SHOW_WARNINGS=1 "$(command -v chroot)" "$st" /usr/bin/ibv_devices 2>&1 || true; } |
		sed 's/^/    /'
}
fail=0
expect() {
	if grep -qE "$2" <<<"$out"; then
		echo "ok - $1"
	else
		echo "not ok - $1"
		fail=1
	fi
}

out=$(devices)
echo "  ibv_devices with the rxe and plx_rdma providers:"
echo "$out"
grep -q 'Function not implemented' <<<"$out" &&
	die "libibverbs found no device: does this host have RDMA netlink (ib_core loaded)?"
expect "plx_rdma0 (ABI 1) is claimed" '^[[:space:]]+plx_rdma0[[:space:]]+0000000000000000$'
expect "plx_rdma1 (ABI 2) is refused for its ABI" \
	'Driver plx_rdma does not support the kernel ABI of 2 .*plx_rdma1'
expect "myNplx_rdma0 is not claimed" 'no userspace device-specific driver found for myNplx_rdma0'
expect "rxe0 is still rxe's" '^[[:space:]]+rxe0[[:space:]]+0000000000000003$'
expect "plx0 (any name, node description plx_rdma) is claimed" '^[[:space:]]+plx0[[:space:]]+0000000000000004$'
expect "other0 (another node description) is not claimed" 'no userspace device-specific driver found for other0'

rm "$st/etc/libibverbs.d/plx_rdma.driver"
out=$(devices)
echo "  without plx_rdma.driver:"
echo "$out"
expect "without the provider, plx_rdma0 has no driver" \
	'no userspace device-specific driver found for plx_rdma0'
exit "$fail"
