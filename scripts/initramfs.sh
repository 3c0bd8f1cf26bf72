#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build a guest initramfs: busybox, the init of scripts/guest/, the kernel's
# own modules (plx_dma, dmatest, ...), the repository's modules built for that
# kernel, and any extra files.
#
#   scripts/initramfs.sh KERNEL_BUILD_DIR MODULE_DIR OUT.cpio.gz SCRIPT [SRC:DST ...]
#
# SCRIPT becomes /guest/run.sh; each SRC:DST copies a file or directory.

. "$(dirname "$0")/lib.sh"

kb=${1:?kernel build dir} mods=${2:?module dir} out=${3:?output} script=${4:?guest script}
shift 4
[ -f "$kb/.built" ] || die "$kb is not a finished kernel build"
kver=$(cat "$kb/include/config/kernel.release")
stage=$(mktemp -d "$PLX_CACHE/initramfs.XXXXXX")
trap 'rm -rf "$stage"' EXIT

mkdir -p "$stage"/{bin,sbin,dev,proc,sys,tmp,etc,guest,lib/modules,usr/local/bin}
cp "$ROOTFS/usr/bin/busybox" "$stage/bin/busybox"
cp "$REPO/scripts/guest/init" "$stage/init"
cp "$script" "$stage/guest/run.sh"
cp "$REPO/scripts/guest/lib.sh" "$stage/guest/lib.sh"
# The root is mktemp's (0700): open it to every user, as a root file
# system is, for the tests that run as an ordinary user.
chmod 755 "$stage" "$stage/init" "$stage/guest/run.sh"
chmod 1777 "$stage/tmp"
cp -a "$kb/modinst/lib/modules/$kver" "$stage/lib/modules/"
rm -f "$stage/lib/modules/$kver/build" "$stage/lib/modules/$kver/source"
mkdir -p "$stage/lib/modules/$kver/extra"
if [ -d "$mods" ]; then
	find "$mods" -name '*.ko' -exec cp {} "$stage/lib/modules/$kver/extra/" \;
fi
for spec in "$@"; do
	src=${spec%%:*} dst=${spec#*:}
	[ -e "$src" ] || die "initramfs: $src does not exist"
	mkdir -p "$stage/$(dirname "$dst")"
	cp -a "$src" "$stage/$dst"
done
echo "root:x:0:0:root:/root:/bin/sh" >"$stage/etc/passwd"
in_root depmod -b "$stage" "$kver"
(cd "$stage" && find . -print0 | in_root cpio --quiet -o -0 -H newc -D "$stage" | gzip -1 >"$out.tmp")
mv "$out.tmp" "$out"
