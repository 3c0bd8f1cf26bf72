#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the RDMA programs of the guests against the trixie root's
# libibverbs (dynamically: providers are loaded at run time): the verbs
# kselftests (tools/testing/selftests/drivers/infiniband/plx_rdma, the
# kselftest way), the RDMA WRITE example of `make run`
# (samples/rdma/plx_rdma_write.c) and its RoCEv2 decoder
# (samples/rdma/roce_capture.c). Prints the output directory.
#
#   scripts/rdma-user-build.sh

. "$(dirname "$0")/lib.sh"
exec 3>&1 1>&2

need_root rdma-user-build
"$REPO/scripts/env-setup.sh"
ksrc=$(ls -d "$PLX_CACHE"/src/linux-* | head -1)
[ -f "$ksrc/tools/testing/selftests/lib.mk" ] || die "no kernel source with tools/testing/selftests/lib.mk"
out=$REPO/build/selftests/drivers/infiniband/plx_rdma
mkdir -p "$out"
in_root make -s -C "$REPO/tools/testing/selftests/drivers/infiniband/plx_rdma" \
	KSFT_TOP="$ksrc/tools/testing/selftests" OUTPUT="$out" EXTRA_CFLAGS=-Werror >&2 ||
	die "the verbs kselftests did not build"
in_root gcc -Wall -Wextra -Werror -O2 -o "$out/plx_rdma_write" \
	"$REPO/samples/rdma/plx_rdma_write.c" -libverbs ||
	die "the RDMA WRITE example did not build"
in_root gcc -Wall -Wextra -Werror -O2 -o "$out/roce_capture" "$REPO/samples/rdma/roce_capture.c" ||
	die "the RoCEv2 decoder did not build"
echo "$out" >&3
