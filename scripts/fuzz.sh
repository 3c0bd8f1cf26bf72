#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Coverage-guided fuzzing of the emulated engine (tools/plx-dma-emu/fuzz).
#
#   scripts/fuzz.sh SECONDS [TARGET ...]
#
# Installs the pinned cargo-fuzz and builds the fuzz targets with libFuzzer
# on the trixie root's stable toolchain, where they also run (no
# sanitizer: the emulator has no unsafe code outside sys.rs, and stable has
# no -Zsanitizer), then runs each target
# (all of them by default) for SECONDS seconds, one after the other, on a
# copy of its committed corpus, so a run never changes the clone. Prints
# one TAP line per target:
#
#   ok - fuzz TARGET: N execs, cov C, ft F in S s
#   not ok - fuzz TARGET: crash (ARTIFACT)
#
# The crashing input is kept under $PLX_CACHE/cargo-fuzz/artifacts; replay
# it with the target binary named in the diagnostics. Everything built or
# installed lives in $PLX_CACHE/cargo-fuzz, never in the clone.

. "$(dirname "$0")/lib.sh"

CARGO_FUZZ_VERSION=0.13.1
TARGETS=(register_file descriptor vfio_user_message fd_framing mapped_memory engine_race dma_replies)

secs=${1:-}
[[ $secs =~ ^[1-9][0-9]*$ ]] || die "usage: scripts/fuzz.sh SECONDS [TARGET ...]"
shift
want=("$@")
[ ${#want[@]} -gt 0 ] || want=("${TARGETS[@]}")
for t in "${want[@]}"; do
	[[ " ${TARGETS[*]} " == *" $t "* ]] || die "unknown fuzz target '$t'; known: ${TARGETS[*]}"
done

fuzz_dir=$REPO/tools/plx-dma-emu/fuzz
cache=$PLX_CACHE/cargo-fuzz
mkdir -p "$cache" || die "cannot create $cache (set PLX_CACHE to a writable place)"
export CARGO_TARGET_DIR=$cache/target

# cargo-fuzz itself, from crates.io, pinned and with its own lock file.
if ! in_root "$cache/bin/cargo-fuzz" --version 2>/dev/null | grep -qx "cargo-fuzz $CARGO_FUZZ_VERSION"; then
	log "installing cargo-fuzz $CARGO_FUZZ_VERSION into $cache"
	root_cargo install -q --locked --version "$CARGO_FUZZ_VERSION" --root "$cache" cargo-fuzz >&2 ||
		die "installing cargo-fuzz $CARGO_FUZZ_VERSION failed"
fi

# cargo-fuzz has no --locked: make sure the committed Cargo.lock is
# complete first, so the build can never rewrite it.
root_cargo fetch -q --locked --manifest-path "$fuzz_dir/Cargo.toml" >&2 ||
	die "tools/plx-dma-emu/fuzz/Cargo.lock is out of date with its Cargo.toml"

# All targets in one cargo run (one lock, one dependency build). -s none:
# libFuzzer's coverage instrumentation only, which stable rustc supports.
(cd "$fuzz_dir/.." && root_rust "$cache/bin/cargo-fuzz" build -O -a -s none --target-dir "$CARGO_TARGET_DIR") >"$cache/build.log" 2>&1 || {
	sed 's/^/# /' "$cache/build.log" | tail -n 40
	die "building the fuzz targets failed (log: $cache/build.log)"
}
bindir=$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release

failed=0
for t in "${want[@]}"; do
	run=$(mktemp -d "$cache/run.$t.XXXXXX")
	cp -r "$fuzz_dir/corpus/$t" "$run/corpus"
	mkdir -p "$cache/artifacts/$t"
	t0=$(date +%s) rc=0
	# One process, no forking: -timeout and -rss_limit_mb turn a hang or a
	# runaway allocation into a reported artifact instead of a stuck suite.
	in_root "$bindir/$t" -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=2048 \
		-print_final_stats=1 -artifact_prefix="$cache/artifacts/$t/" \
		"$run/corpus" >"$run/log" 2>&1 || rc=$?
	took=$(($(date +%s) - t0))
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$run/log" | tail -n 1)
	last=$(grep -E '^#[0-9]+.* cov: ' "$run/log" | tail -n 1 || true)
	cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
	ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
	artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$run/log" | tail -n 1)
	if [ "$rc" -eq 0 ] && [ -n "$execs" ] && [ -n "$cov" ]; then
		echo "ok - fuzz $t: $execs execs, cov $cov, ft $ft in $took s"
		rm -rf "$run"
	else
		failed=$((failed + 1))
		if [ -n "$artifact" ]; then
			echo "not ok - fuzz $t: crash ($artifact)"
		else
			echo "not ok - fuzz $t: libFuzzer exited with status $rc and no artifact"
		fi
		echo "# replay (in the trixie root): $bindir/$t ${artifact:-<input>}; full log: $run/log"
		grep -vE '^(#[0-9]+|INFO:|MS:|base unit:|0x|\\)' "$run/log" | tail -n 30 | sed 's/^/# /'
	fi
done
[ "$failed" -eq 0 ]
