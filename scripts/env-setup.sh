#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Create (or reuse) the pinned Debian trixie root that holds the toolchain:
# QEMU 11.1 with vfio-user-pci, linux-source-7.3, rustc with its exact
# rust-src, bindgen, clang/lld/llvm 19, busybox-static and the kernel's build
# dependencies; for the RDMA half, libibverbs/librdmacm with their tools,
# perftest, iproute2's rdma, rxe's provider (the oracle) and the rdma-core
# source of exactly the installed libibverbs in $PLX_CACHE/src (its private
# infiniband/driver.h is what a provider is built against).  Idempotent: a
# stamp records the package set it was made for.
#
# Usage: scripts/env-setup.sh        (as root; PLX_CACHE moves the cache)

. "$(dirname "$0")/lib.sh"

# Packages from trixie proper: the compiler family the kernel is built with,
# and cargo (with g++ for libFuzzer's C++) for the emulator and its fuzz
# targets, so the host needs no Rust toolchain of its own.
ROOT_PKGS="ca-certificates make bc bison flex cpio kmod xz-utils zstd gzip \
 python3 perl libelf-dev libssl-dev libc6-dev gcc clang lld llvm libclang-dev \
 rustc rust-src rustfmt rust-clippy bindgen busybox-static rsync file gnuplot-nox \
 cargo g++"
# Packages that only trixie-backports has at the pinned versions.
BPO_PKGS="qemu-system-x86 $KSRC_PKG"
# The user-space side of plx_rdma: the verbs and CM libraries with their
# headers, the programs the guests run, rxe's provider, pyverbs (which runs
# rdma-core's own test suite, suite pyverbs), and dpkg-dev for
# dpkg-source (unpacking the rdma-core source).
RDMA_PKGS="libibverbs-dev librdmacm-dev ibverbs-utils rdmacm-utils perftest python3-pyverbs \
 iproute2 ibverbs-providers dpkg-dev"
STAMP=$ROOTFS/.rust-plx-dma-stamp
WANT=$(printf '%s\n%s\n%s\n' "$ROOT_PKGS" "$BPO_PKGS" "$RDMA_PKGS" | sha256sum | cut -c1-16)

main() {
	need_root env-setup
	if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANT" ] && rdma_core_ready; then
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
	# deb-src: only for `apt-get source rdma-core` (the provider's headers).
	cat >"$ROOTFS/etc/apt/sources.list" <<-EOF
		deb $mirror trixie main
		deb $mirror trixie-backports main
		deb-src $mirror trixie main
	EOF
	step "apt-get update (root)" in_root apt-get -q update
	step "installing toolchain packages" in_root env DEBIAN_FRONTEND=noninteractive \
		apt-get -q -y --no-install-recommends install $ROOT_PKGS
	step "installing QEMU and kernel source from trixie-backports" \
		in_root env DEBIAN_FRONTEND=noninteractive \
		apt-get -q -y --no-install-recommends install -t trixie-backports $BPO_PKGS
	step "installing the RDMA user space" in_root env DEBIAN_FRONTEND=noninteractive \
		apt-get -q -y --no-install-recommends install $RDMA_PKGS
	rdma_core_ready || step "unpacking the rdma-core source" rdma_core_source
	in_root apt-get clean
	verify_root
	echo "$WANT" >"$STAMP"
	log "trixie root ready at $ROOTFS in $(($(date +%s) - t0)) s"
}

# The rdma-core source package libibverbs1 was built from, at its exact
# version (a provider's private ABI is per release).
rdma_core_version() {
	in_root dpkg-query -W -f '${source:Version}' libibverbs1 2>/dev/null
}

rdma_core_ready() {
	local v
	v=$(rdma_core_version) && [ -n "$v" ] && [ -f "$PLX_CACHE/src/rdma-core-$v/.unpacked" ]
}

# apt-get source --download-only, then dpkg-source -x (Debian's patches
# applied): $PLX_CACHE/src/rdma-core-VERSION, outside the repository.
rdma_core_source() {
	local v dl dst dsc
	v=$(rdma_core_version)
	[ -n "$v" ] || die "libibverbs1 is not installed in the trixie root"
	dl=$PLX_CACHE/src/rdma-core-$v.dl dst=$PLX_CACHE/src/rdma-core-$v
	dsc=$dl/rdma-core_${v#*:}.dsc
	rm -rf "$dl" "$dst"
	mkdir -p "$dl"
	# A mirror may lack the .dsc while serving the tarballs (seen for
	# rdma-core 56.1-1): apt then fails after fetching them.
	in_root sh -c 'cd "$1" && apt-get -q source --download-only "rdma-core=$2"' \
		sh "$dl" "$v" || [ -f "$dsc" ] || rdma_core_dsc "$v" >"$dsc"
	in_root dpkg-source --no-copy -x "$dsc" "$dst" ||
		die "dpkg-source could not unpack rdma-core $v"
	[ -f "$dst/libibverbs/driver.h" ] || die "rdma-core $v has no libibverbs/driver.h"
	rm -rf "$dl"
	touch "$dst/.unpacked"
}

# The .dsc's fields that dpkg-source -x needs, from the Sources index entry
# of rdma-core VERSION (signed through the Release file apt verified);
# dpkg-source then checks every tarball against these checksums.
rdma_core_dsc() {
	in_root apt-cache showsrc --only-source rdma-core | awk -v v="$1" '
		BEGIN { RS = ""; FS = "\n" }
		{
			hit = 0
			for (i = 1; i <= NF; i++) if ($i == "Version: " v) hit = 1
			if (!hit) next
			for (i = 1; i <= NF; i++) {
				l = $i
				if (l ~ /^[^ ]/) {
					keep = l ~ /^(Format|Version|Files|Checksums-Sha256):/
					if (sub(/^Package:/, "Source:", l)) keep = 1
				} else if (l ~ /\.dsc$/) {
					continue
				}
				if (keep) print l
			}
			found = 1
			exit
		}
		END { if (!found) exit 1 }' || die "no Sources entry for rdma-core $1"
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
