#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (or reuse) the pinned guest kernel of one flavour inside the trixie
# root and print its build directory.
#
#   scripts/kernel-build.sh test|bench
#
# The build lives in $PLX_CACHE/kernels/<flavour>-<key>, where the key hashes
# the source package version, the fragments and the toolchain, and
# $PLX_CACHE/kernels/<flavour> points at the newest one.  Each flavour is
# tinyconfig + common.config + bench.config or test.config, with clang/LLVM.

. "$(dirname "$0")/lib.sh"

# Only the result goes to stdout; every log and tool output to stderr.
exec 3>&1 1>&2

flavour=${1:-test}
case "$flavour" in
test) frags="$REPO/scripts/kernel/common.config $REPO/scripts/kernel/test.config" ;;
bench) frags="$REPO/scripts/kernel/common.config $REPO/scripts/kernel/bench.config" ;;
*) die "unknown kernel flavour '$flavour' (expected test or bench)" ;;
esac

need_root kernel
"$REPO/scripts/env-setup.sh"

srcver=$(in_root dpkg-query -W -f '${Version}' "$KSRC_PKG")
toolver=$(in_root sh -c 'rustc --version; clang --version | head -n 1; bindgen --version')
key=$( (echo "$srcver"; echo "$toolver"; cat $frags) | sha256sum | cut -c1-12)
B=$PLX_CACHE/kernels/$flavour-$key
SRC=$PLX_CACHE/src/linux-$srcver

if [ -f "$B/.built" ]; then
	log "kernel $flavour reused: $B"
else
	need_space 8000
	if [ ! -f "$SRC/.extracted" ]; then
		rm -rf "$SRC"
		mkdir -p "$SRC"
		step "extracting $KSRC_PKG $srcver" in_root sh -c \
			"tar -C '$SRC' --strip-components=1 -xf /usr/src/$KSRC_PKG.tar.*"
		touch "$SRC/.extracted"
	fi
	mkdir -p "$B"
	mk() { in_root make -C "$SRC" O="$B" LLVM=1 "$@"; }
	configure() {
		mk -s tinyconfig &&
			in_root "$SRC/scripts/kconfig/merge_config.sh" -m -O "$B" "$B/.config" $frags >/dev/null &&
			mk -s olddefconfig
	}
	step "configuring $flavour kernel" configure
	# A fragment line that did not survive olddefconfig is a broken promise
	# (a missing dependency): refuse to build a kernel that lacks it.
	missing=$(cat $frags | grep -E '^CONFIG_' | while IFS= read -r line; do
		opt=${line%%=*} val=${line#*=}
		if [ "$val" = n ]; then
			grep -qE "^$opt=" "$B/.config" && echo "$line"
		else
			grep -qxF "$line" "$B/.config" || echo "$line"
		fi
	done || true)
	[ -z "$missing" ] || die "the $flavour config lost fragment options (unmet dependencies?): $(echo $missing)"
	step "building $flavour kernel ($(nproc) jobs)" mk -s -j"$(nproc)" bzImage modules
	rm -rf "$B/modinst"
	step "installing $flavour kernel modules" mk -s INSTALL_MOD_PATH="$B/modinst" modules_install
	touch "$B/.built"
fi
ln -sfn "$B" "$PLX_CACHE/kernels/$flavour"
echo "$B" >&3
