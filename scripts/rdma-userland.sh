#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The RDMA user space of a guest, as SRC:DST pairs for the initramfs (one a
# line; give each to scripts/guest-run.sh -a): the verbs and CM tools of the
# trixie root (ibv_devinfo, ibv_devices, the ibv_*_pingpong examples, rping,
# mckey, ucmatose, udaddy, perftest's bandwidth and latency tests, iproute2's
# rdma and ip), every shared
# library they load, the dynamic loader, the providers of rxe (the oracle)
# and plx_rdma (scripts/provider-build.sh), and their libibverbs.d entries.
#
#   mapfile -t files < <(scripts/rdma-userland.sh)
#   scripts/guest-run.sh $(printf -- '-a %s ' "${files[@]}") ... SCRIPT
#
# Layout in the guest, which has busybox in /bin and no ld.so.cache:
#   /lib64/ld-linux-x86-64.so.2      the loader, as a real file (PT_INTERP)
#   /usr/lib/<multiarch>/            the libraries, under their sonames: a
#                                    system directory the loader searches
#                                    without a cache
#   /usr/lib/<multiarch>/libibverbs/ the providers (libibverbs' compiled-in
#                                    VERBS_PROVIDER_DIR)
#   /etc/libibverbs.d/{rxe,plx_rdma}.driver
#   /usr/bin/<tool>, /usr/sbin/{ip,tc} (busybox's come first in PATH;
#                                    call iproute2's by their paths)

. "$(dirname "$0")/lib.sh"
exec 3>&1 1>&2

need_root rdma-userland
prov=$("$REPO/scripts/provider-build.sh")
provdir=$(cat "$prov/provider-dir")
plx_so=$(ls "$prov"/lib/libibverbs/libplx_rdma-rdmav*.so)
rxe_so=$(ls "$ROOTFS$provdir"/librxe-rdmav*.so) || die "no rxe provider in $provdir"
rxe_so=${rxe_so#"$ROOTFS"}

# Inside the root: "PATH_IN_ROOT DST" lines.  Symlinks are resolved, since
# the initramfs copies with cp -a; each file lands under the name it is
# looked up by.
# shellcheck disable=SC2016
list=$(in_root bash -c '
	set -euo pipefail
	plx=$1 rxe=$2 provdir=$3
	libdir=/usr/lib/$(gcc -print-multiarch)
	bins=()
	for t in ibv_devinfo ibv_devices ibv_rc_pingpong ibv_uc_pingpong ibv_ud_pingpong ibv_srq_pingpong \
		rping rstream rdma_server rdma_client mckey ucmatose udaddy ib_write_bw ib_read_bw ib_send_bw \
		ib_send_lat ib_write_lat ib_read_lat ib_atomic_bw ib_atomic_lat rdma ip tc; do
		f=$(command -v "$t") || { echo "missing tool $t" >&2; exit 1; }
		bins+=("$f")
		case $t in ip | tc) echo "$(readlink -f "$f") /usr/sbin/$t" ;;
		*) echo "$(readlink -f "$f") /usr/bin/$t" ;; esac
	done
	echo "$(readlink -f "$rxe") $provdir/$(basename "$rxe")"
	# The loader every program names as its interpreter.
	interp=$(readelf -l "${bins[0]}" | sed -n "s/.*interpreter: \(.*\)\]/\1/p")
	[ -n "$interp" ] || { echo "no PT_INTERP in ${bins[0]}" >&2; exit 1; }
	echo "$(readlink -f "$interp") $interp"
	# ldd does not see dlopen(): the providers are added above and their
	# needs below; glibc dlopens libgcc_s for pthread_cancel and unwinding.
	{
		ldd "${bins[@]}" "$rxe" "$plx" | awk "\$2 == \"=>\" && \$3 ~ /^\// { print \$3 }"
		echo "$libdir/libgcc_s.so.1"
	} | sort -u | while read -r lib; do
		echo "$(readlink -f "$lib") $libdir/$(basename "$lib")"
	done
' rdma-userland "$plx_so" "$rxe_so" "$provdir") || die "could not list the RDMA user space"

while read -r path dst; do
	echo "$ROOTFS$path:$dst"
done <<<"$list" >&3
{
	echo "$plx_so:$provdir/$(basename "$plx_so")"
	echo "$ROOTFS/etc/libibverbs.d/rxe.driver:/etc/libibverbs.d/rxe.driver"
	echo "$prov/etc/libibverbs.d/plx_rdma.driver:/etc/libibverbs.d/plx_rdma.driver"
} >&3
