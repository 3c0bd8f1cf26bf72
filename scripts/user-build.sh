#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the user-space programs of the guests, statically linked for their
# busybox userland: the kselftests of tools/testing/selftests/drivers/dma/plx
# the kselftest way (their Makefile includes the kernel's lib.mk), the uAPI
# example program, the uAPI benchmark and the kernel sampler. Prints the output directory.
#
#   scripts/user-build.sh

. "$(dirname "$0")/lib.sh"
exec 3>&1 1>&2

need_root selftests
kdir=$("$REPO/scripts/kernel-build.sh" test)
src=$(readlink -f "$kdir/source" 2>/dev/null || true)
[ -f "$src/tools/testing/selftests/lib.mk" ] || src=$(ls -d "$PLX_CACHE"/src/linux-* | head -1)
[ -f "$src/tools/testing/selftests/lib.mk" ] || die "no kernel source with tools/testing/selftests/lib.mk"
out=$REPO/build/selftests/drivers/dma/plx
mkdir -p "$out"
in_root make -s -C "$REPO/tools/testing/selftests/drivers/dma/plx" \
	KSFT_TOP="$src/tools/testing/selftests" \
	UAPI_INCLUDE="$REPO/include/uapi" \
	OUTPUT="$out" EXTRA_CFLAGS="-static -Werror" >&2 ||
	die "the kselftests did not build"
# The uAPI example program of Documentation/userspace-api/plx_dma_copy.rst.
in_root gcc -Wall -Wextra -Werror -O2 -static -I"$REPO/include/uapi" \
	-o "$out/plx_dma_copy_example" "$REPO/samples/uapi/plx_dma_copy_example.c" ||
	die "the uAPI example did not build"
in_root gcc -Wall -Wextra -Werror -O2 -static -I"$REPO/include/uapi" \
	-o "$out/plx_dma_copy_bench" "$REPO/tools/testing/bench/plx_dma_copy_bench.c" ||
	die "the uAPI benchmark did not build"
# The kernel sampler of the bench's profile boot.
in_root gcc -Wall -Wextra -Werror -O2 -static \
	-o "$out/plx_kprofile" "$REPO/tools/testing/bench/plx_kprofile.c" ||
	die "plx_kprofile did not build"
echo "$out" >&3
