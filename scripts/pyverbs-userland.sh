#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# rdma-core's own test suite for a guest, as SRC:DST pairs for the initramfs
# (like scripts/rdma-userland.sh, whose files it needs beside it): Python 3
# with its standard library, pyverbs (the Python binding of libibverbs and
# librdmacm, trixie's python3-pyverbs, built from the same rdma-core as the
# installed libibverbs) and the suite itself, rdma-core's tests/ directory of
# that exact release, unpacked in $PLX_CACHE/src by scripts/env-setup.sh.
# These are the tests a provider is held to by rdma-core's maintainers; the
# guest runs them as /opt/rdma-core-tests/run_tests.py --dev DEV.

. "$(dirname "$0")/lib.sh"
exec 3>&1 1>&2

need_root pyverbs-userland
v=$(in_root dpkg-query -W -f '${source:Version}' libibverbs1) || die "no libibverbs1 in the trixie root"
tests=$PLX_CACHE/src/rdma-core-$v/tests
[ -f "$tests/run_tests.py" ] || die "no rdma-core $v test suite in $tests (run scripts/env-setup.sh)"

# shellcheck disable=SC2016
list=$(in_root bash -c '
	set -euo pipefail
	py=$(readlink -f /usr/bin/python3)
	pv=/usr/lib/python3/dist-packages/pyverbs
	[ -d "$pv" ] || { echo "python3-pyverbs is not installed" >&2; exit 1; }
	stdlib=$(python3 -c "import sysconfig; print(sysconfig.get_path(\"stdlib\"))")
	libdir=/usr/lib/$(gcc -print-multiarch)
	echo "$py /usr/bin/python3"
	echo "$stdlib $stdlib"
	echo "$pv $pv"
	{
		ldd "$py" $(find "$pv" "$stdlib/lib-dynload" -name "*.so") |
			awk "\$2 == \"=>\" && \$3 ~ /^\// { print \$3 }"
	} | sort -u | while read -r lib; do
		echo "$(readlink -f "$lib") $libdir/$(basename "$lib")"
	done
') || die "could not list Python and pyverbs"

while read -r path dst; do
	echo "$ROOTFS$path:$dst"
done <<<"$list" >&3
echo "$tests:/opt/rdma-core-tests" >&3
