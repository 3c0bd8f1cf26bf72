# SPDX-License-Identifier: GPL-2.0
# Shared shell helpers for the bench scripts: logging, timing, the cache
# layout and the trixie root.  Sourced, never executed.

set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Every build artefact that outlives a clone lives here (trixie root, kernels).
PLX_CACHE=${PLX_CACHE:-/var/cache/rust-plx-dma}
ROOTFS=${ROOTFS:-$PLX_CACHE/trixie-root}
# Pinned versions: change them together.
KVER=7.3.4
KSRC_PKG=linux-source-7.3
QEMU_MIN=11.1

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Run "$@" as one named step, printing how long it took.
step() {
	local name=$1 t0 rc=0
	shift
	t0=$(date +%s)
	log "$name ..."
	"$@" || rc=$?
	if [ "$rc" -ne 0 ]; then
		log "$name FAILED (status $rc) after $(($(date +%s) - t0)) s"
		return "$rc"
	fi
	log "$name done in $(($(date +%s) - t0)) s"
}

need_root() {
	[ "$(id -u)" -eq 0 ] || die "this step needs root (it uses debootstrap, chroot and mounts); run it as root, e.g. sudo make $*"
}

# Fail early with a clear message when the cache disk is nearly full.
need_space() {
	local want_mb=$1 dir=$PLX_CACHE avail
	mkdir -p "$dir" 2>/dev/null || die "cannot create cache directory $dir (set PLX_CACHE to a writable place)"
	avail=$(df -Pm "$dir" | awk 'NR == 2 { print $4 }')
	[ "$avail" -ge "$want_mb" ] ||
		die "only ${avail} MB free under $dir, ${want_mb} MB needed (free space or set PLX_CACHE elsewhere)"
}

# The Debian mirror this host already uses (never hard-coded in the project).
debian_mirror() {
	local m
	m=$(grep -rhoE '(URIs:|deb)[[:space:]]+https?://[^[:space:]]+/debian/?([[:space:]]|$)' \
		/etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null |
		awk '{ print $2 }' | grep -v -- '-security' | head -n 1 || true)
	[ -n "$m" ] || die "no Debian mirror found in /etc/apt/sources.list*; set PLX_MIRROR"
	echo "${PLX_MIRROR:-$m}"
}

# Run a command inside the trixie root, in a private mount namespace so that
# nothing stays mounted when it ends.  The repository, the cache and
# $ROOT_EXTRA_BIND (if set) are bound at the same paths inside, so paths mean
# the same on both sides.
in_root() {
	[ -x "$ROOTFS/usr/bin/env" ] || die "the trixie root is missing: run scripts/env-setup.sh"
	unshare --mount --propagation private -- /bin/bash -c '
		set -e
		r=$1 repo=$2 cache=$3 extra=$4
		shift 4
		mount -t proc proc "$r/proc"
		mount -t sysfs sys "$r/sys"
		mount --rbind /dev "$r/dev"
		mkdir -p "$r$repo" "$r$cache"
		mount --bind "$repo" "$r$repo"
		mount --bind "$cache" "$r$cache"
		if [ -n "$extra" ]; then
			mkdir -p "$r$extra"
			mount --bind "$extra" "$r$extra"
		fi
		[ -e /etc/resolv.conf ] && cp -L /etc/resolv.conf "$r/etc/resolv.conf" 2>/dev/null || true
		exec chroot "$r" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root \
			LANG=C.UTF-8 TERM="${TERM:-dumb}" "$@"
	' in_root "$ROOTFS" "$REPO" "$PLX_CACHE" "${ROOT_EXTRA_BIND:-}" "$@"
}

# root_cargo ARGS...: the trixie root's cargo (the pinned rustc), so the host
# needs no Rust toolchain; root_rust PROGRAM ARGS... runs another program
# (an installed cargo subcommand) the same way.  Either runs in the caller's directory (the clone and
# the cache are at the same paths inside), keeps its registry in
# $PLX_CACHE/cargo-home and builds into $CARGO_TARGET_DIR (default
# $PLX_CACHE/cargo-target).  Crates are fetched trusting the host's CA
# bundle, since a host behind a TLS-inspecting proxy has its CA there and not
# in the root.  $RUSTFLAGS passes through.
root_cargo() { root_rust cargo "$@"; }
root_rust() {
	local envs=(CARGO_HOME="$PLX_CACHE/cargo-home"
		CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PLX_CACHE/cargo-target}")
	mkdir -p "$PLX_CACHE/cargo-home"
	if [ -r /etc/ssl/certs/ca-certificates.crt ] &&
		cp -L /etc/ssl/certs/ca-certificates.crt "$PLX_CACHE/host-ca.crt" 2>/dev/null; then
		envs+=(CARGO_HTTP_CAINFO="$PLX_CACHE/host-ca.crt")
	fi
	[ -z "${RUSTFLAGS:-}" ] || envs+=(RUSTFLAGS="$RUSTFLAGS")
	in_root sh -c 'cd "$0" 2>/dev/null || cd /; exec "$@"' "$PWD" env "${envs[@]}" "$@"
}

# Signal a process and all of its descendants (a chroot'ed QEMU runs a few
# exec levels below the shell's background job).
kill_tree() {
	local sig=$1 pid=$2 child
	for child in $(pgrep -P "$pid" 2>/dev/null); do kill_tree "$sig" "$child"; done
	kill "-$sig" "$pid" 2>/dev/null || true
}

# rdma_userland: sets the array `extras` to the -a options that put the
# RDMA user space (provider, tools, libraries) into a guest; false if it
# did not build.
rdma_userland() {
	local files f
	mapfile -t files < <("$REPO/scripts/rdma-userland.sh") && [ "${#files[@]}" -gt 0 ] || return 1
	extras=()
	for f in "${files[@]}"; do extras+=(-a "$f"); done
}

# suite_rdma_userland: rdma_userland for a suite, which ends with a failed
# point if it did not build (not_ok and finish: scripts/guest/lib.sh).
suite_rdma_userland() {
	rdma_userland && return 0
	not_ok "the RDMA user space (provider, tools, libraries) builds"
	finish
}

# run_emulated_guest NAME CHANNELS TIMEOUT GUEST_SCRIPT [guest-run options]
# Boots the guest NAME with one emulator process serving CHANNELS PLX
# functions (extra emulator arguments in $EMU_ARGS) and the guest dmatest
# helpers; returns guest-run.sh's status.  $GUEST_PARAMS, a list of
# NAME=VALUE words, becomes /guest/params.sh, which the guest's lib.sh
# sources: that is how `make soak` gives the same guest scripts longer runs.
# The guest may drive the emulator's control socket with host_ctl (see
# scripts/guest/lib.sh), e.g. to arm a fault while a load runs.
run_emulated_guest() {
	local name=$1 n=$2 timeout=$3 script=$4 emu params rc=0
	shift 4
	emu=$("$REPO/scripts/emu-build.sh") || return 1
	params=$(mktemp "$PLX_CACHE/params.XXXXXX")
	printf '%s\n' ${GUEST_PARAMS:-} >"$params"
	"$REPO/scripts/guest-run.sh" -n "$name" -t "$timeout" -c "$emu ctl" \
		-d "emu*$n=exec $emu \$(printf -- '--socket %s ' \$SOCKETS) --control \$CONTROL ${EMU_ARGS:-}" \
		-a "$REPO/scripts/guest/dmatest.sh:/guest/dmatest.sh" \
		-a "$params:/guest/params.sh" "$@" "$script" || rc=$?
	rm -f "$params"
	return "$rc"
}

# fault_matrix_report NAME: the fault matrix that guest run NAME printed
# ("# MATRIX ..." lines, see scripts/suites/fault-matrix.guest.sh), written
# to build/results/fault-matrix.txt and shown as TAP diagnostics, with a
# test point that every cell reported.
fault_matrix_report() {
	local table=$REPO/build/results/fault-matrix.txt n
	{
		echo "fault | column | outcome | reproduction (guest, after modprobe rust_plx_dma watchdog_ms=1000)"
		sed -n 's/^# MATRIX //p' "$REPO/build/results/$1.guest.tap" 2>/dev/null
	} >"$table"
	n=$(($(wc -l <"$table") - 1))
	check "fault matrix: 22 cells reported (saw $n; table in $table)" test "$n" -eq 22
	sed 's/^/# /' "$table"
}

# guest_points NAME: the TAP lines a guest run reported.
guest_points() {
	grep -E '^(ok|not ok|#)' "$REPO/build/results/$1.guest.tap" 2>/dev/null || true
}
