#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build every module of the repository out of tree, warnings as errors, and
# print the directory holding the objects.
#
#   scripts/modules-build.sh [test|bench|KDIR] [make arguments ...]
#
# "test" and "bench" use the cached kernels (built on demand) and the trixie
# root's toolchain.  Any other argument is a configured CONFIG_RUST kernel
# build tree, built with the host's toolchain; the compiler family follows
# the tree's own .config.

. "$(dirname "$0")/lib.sh"

# Only the result goes to stdout; every log and tool output to stderr.
exec 3>&1 1>&2

target=${1:-test}
[ $# -gt 0 ] && shift
werror=(KCFLAGS=-Werror KRUSTFLAGS=-Dwarnings)
case "$target" in
test | bench)
	need_root modules
	kdir=$("$REPO/scripts/kernel-build.sh" "$target")
	out=${MODULES_OUT:-$REPO/build/modules/$target}
	mkdir -p "$out"
	# One build at a time in a tree (two guests may boot at once).
	exec 9>"$out/.build.lock"
	flock 9
	in_root make -s -C "$kdir" M="$REPO" MO="$out" LLVM=1 "${werror[@]}" "$@" modules 2>&1 |
		tee "$out/build.log" >&2
	# Warnings from tools past the compilers (objtool, modpost) fail too.
	! grep -q 'warning:' "$out/build.log" || die "the module build printed warnings (see above)"
	;;
*)
	kdir=$(cd "$target" 2>/dev/null && pwd -P) || die "KDIR $target does not exist"
	[ -f "$kdir/.config" ] || die "KDIR $kdir is not a configured kernel build tree (no .config)"
	grep -q '^CONFIG_RUST=y' "$kdir/.config" || die "KDIR $kdir has no CONFIG_RUST=y: the Rust modules cannot be built"
	[ -f "$kdir/rust/libkernel.rmeta" ] || [ -f "$kdir/rust/kernel.o" ] ||
		die "KDIR $kdir has no built rust/ (run 'make' in it first)"
	llvm=()
	grep -q '^CONFIG_CC_IS_CLANG=y' "$kdir/.config" && llvm=(LLVM=1)
	out=${MODULES_OUT:-$REPO/build/modules/$(basename "$kdir")}
	mkdir -p "$out"
	if [ "$(id -u)" -eq 0 ] && [ -x "$ROOTFS/usr/bin/env" ]; then
		# The pinned toolchain: the tree's own source may lie anywhere.
		src=$(readlink -f "$kdir/source" 2>/dev/null || echo "$kdir")
		case "$src" in "$kdir"* | "$PLX_CACHE"* | "$REPO"*) ;; *)
			die "KDIR's source tree $src must lie inside KDIR or $PLX_CACHE to be reached from the toolchain root" ;;
		esac
		ROOT_EXTRA_BIND=$kdir in_root make -s -C "$kdir" M="$REPO" MO="$out" "${llvm[@]}" \
			"${werror[@]}" "$@" modules 2>&1 | tee "$out/build.log" >&2
	else
		make -s -C "$kdir" M="$REPO" MO="$out" "${llvm[@]}" "${werror[@]}" "$@" modules 2>&1 |
			tee "$out/build.log" >&2
	fi
	! grep -q 'warning:' "$out/build.log" || die "the module build printed warnings (see above)"
	;;
esac
echo "$out" >&3
