#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Create (or reuse) the pinned Debian trixie root that holds the toolchain:
# QEMU 11.1 with vfio-user-pci, linux-source-7.3, rustc with its exact
# rust-src, bindgen, clang/lld/llvm 19, busybox-static and the kernel's build
# dependencies.  Idempotent: a stamp records the package set it was made for.
#
# Usage: scripts/env-setup.sh        (as root; PLX_CACHE moves the cache)

. "$(dirname "$0")/lib.sh"

# Packages from trixie proper: the compiler family the kernel is built with.
ROOT_PKGS="ca-certificates make bc bison flex cpio kmod xz-utils zstd gzip \
 python3 perl libelf-dev libssl-dev libc6-dev gcc clang lld llvm libclang-dev \
 rustc rust-src rustfmt rust-clippy bindgen busybox-static rsync file gnuplot-nox"
# Packages that only trixie-backports has at the pinned versions.
BPO_PKGS="qemu-system-x86 $KSRC_PKG"
STAMP=$ROOTFS/.rust-plx-dma-stamp
WANT=$(printf '%s\n%s\n' "$ROOT_PKGS" "$BPO_PKGS" | sha256sum | cut -c1-16)

main() {
	need_root env-setup
	if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ]; then
		log "trixie root ready at $ROOTFS (reused)"
		return 0
	fi
	need_space 6000
	local t0 mirror
	t0=$(date +%s)
	mirror=$(debian_mirror)
	check_network "$mirror"
	if [ ! -x "$ROOTFS/usr/bin/apt-get" ]; then
		command -v debootstrap >/dev/null || step "installing debootstrap on the host" \
			apt_host debootstrap
		rm -rf "$ROOTFS.partial"
		step "debootstrap trixie (minbase)" \
			debootstrap --variant=minbase trixie "$ROOTFS.partial" "$mirror"
		mv "$ROOTFS.partial" "$ROOTFS"
	fi
	cat >"$ROOTFS/etc/apt/sources.list" <<-EOF
		deb $mirror trixie main
		deb $mirror trixie-backports main
	EOF
	step "apt-get update (root)" in_root apt-get -q update
	step "installing toolchain packages" in_root env DEBIAN_FRONTEND=noninteractive \
		apt-get -q -y --no-install-recommends install $ROOT_PKGS
	step "installing QEMU and kernel source from trixie-backports" \
		in_root env DEBIAN_FRONTEND=noninteractive \
		apt-get -q -y --no-install-recommends install -t trixie-backports $BPO_PKGS
	in_root apt-get clean
	verify_root
	echo "$WANT" >"$STAMP"
	log "trixie root ready at $ROOTFS in $(($(date +%s) - t0)) s"
}

apt_host() {
	apt-get -q update && DEBIAN_FRONTEND=noninteractive apt-get -q -y install "$@"
}

check_network() {
	local url=$1
	if command -v curl >/dev/null; then
		curl -fsS -m 20 -o /dev/null "$url/dists/trixie/Release" ||
			die "cannot reach the package archive at $url (no network?); the trixie root cannot be built"
	elif command -v wget >/dev/null; then
		wget -q -T 20 -O /dev/null "$url/dists/trixie/Release" ||
			die "cannot reach the package archive at $url (no network?); the trixie root cannot be built"
	fi
}

# The versions the kernel and the guests depend on, checked once.
verify_root() {
	local qv rv sv
	qv=$(in_root qemu-system-x86_64 --version | sed -n 's/.*version \([0-9.]*\).*/\1/p')
	log "QEMU $qv"
	printf '%s\n%s\n' "$QEMU_MIN" "$qv" | sort -V -C || die "QEMU $qv is older than $QEMU_MIN"
	in_root qemu-system-x86_64 -device help | grep -q vfio-user-pci ||
		die "QEMU $qv has no vfio-user-pci device"
	rv=$(in_root rustc --version | awk '{ print $2 }')
	sv=$(in_root dpkg-query -W -f '${Version}' rust-src)
	log "rustc $rv, rust-src $sv"
	case "$sv" in "$rv"*) ;; *) die "rust-src $sv does not match rustc $rv" ;; esac
	ls "$ROOTFS"/usr/src/linux-source-*.tar.* >/dev/null 2>&1 || die "no kernel source tarball"
}

main "$@" >&2
