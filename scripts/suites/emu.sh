# SPDX-License-Identifier: GPL-2.0
# Suite: host-side Rust without QEMU: the emulated engine's unit tests, clippy, rustfmt and a short fuzz run; the RoCEv2 wire codec's tests
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PLX_CACHE/cargo-target}

# cargo_points NAME MANIFEST: the package's unit tests, one test point
# each (prefixed NAME), one for the run as a whole, then clippy and
# rustfmt.
cargo_points() {
	local name=$1 manifest=$2 out rc passed errs
	# The test names from stdout alone: what the code under test writes to
	# stderr would otherwise land between a test's name and its result.
	errs=$(mktemp)
	out=$(root_cargo test --locked --manifest-path "$manifest" 2>"$errs") && rc=0 || rc=$?
	[ "$rc" -eq 0 ] || sed 's/^/# /' "$errs" | tail -n 40
	rm -f "$errs"
	printf '%s\n' "$out" | sed -n "s/^test \(.*\) \.\.\. ok\$/ok - $name: \1/p; s/^test \(.*\) \.\.\. FAILED\$/not ok - $name: \1/p"
	printf '%s\n' "$out" | grep -E '^test result:' | sed 's/^/# /'
	passed=$(printf '%s\n' "$out" | sed -n 's/^test result: .* \([0-9]*\) passed.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
	check "$name: cargo test: $passed unit tests pass" test "$rc" -eq 0 -a "$passed" -gt 0
	check "$name: cargo clippy --all-targets -D warnings" \
		root_cargo clippy -q --locked --all-targets --manifest-path "$manifest" -- -D warnings
	check "$name: cargo fmt --check" root_cargo fmt --check --manifest-path "$manifest"
}

cargo_points emu "$REPO/tools/plx-dma-emu/Cargo.toml"
# plx_rdma's RoCEv2 codec (drivers/infiniband/sw/plx_rdma/wire), whose
# files the host crate includes: headers, opcode table, ICRC vectors,
# parse never panicking.
cargo_points roce-wire "$REPO/tools/testing/roce-wire/Cargo.toml"

# The two-channel ceiling `make bench` reads: one line per size, and a size
# no descriptor can copy refused.
emu=$("$REPO/scripts/emu-build.sh")
check "bench-engines measures one and two engines per size" sh -c \
	"'$emu' bench-engines --seconds 0.05 --sizes 4096,65536 |
		grep -cE '^engines size=(4096|65536) one=[0-9.]+ two=[0-9.]+ ratio=' | grep -qx 2"
check "bench-engines refuses a size of 0 (status 2)" sh -c \
	"'$emu' bench-engines --sizes 0 2>/dev/null; test \$? -eq 2"

# The fuzz targets (a package of their own): lints, then a short
# coverage-guided run of each (one point per target, with its execs and
# coverage), or a long one under `make soak` (SOAK_FUZZ_SECONDS a target,
# 600 by default).
fuzz_manifest=$REPO/tools/plx-dma-emu/fuzz/Cargo.toml
check "fuzz: cargo clippy --all-targets -D warnings" \
	root_cargo clippy -q --locked --all-targets --manifest-path "$fuzz_manifest" -- -D warnings
check "fuzz: cargo fmt --check" root_cargo fmt --check --manifest-path "$fuzz_manifest"
if [ -n "${PLX_SOAK:-}" ]; then
	fuzz_seconds=${SOAK_FUZZ_SECONDS:-600}
else
	# Seven targets: 5 s each keeps the suite's fuzzing near a minute.
	fuzz_seconds=5
fi
fuzz_out=$(bash "$REPO/scripts/fuzz.sh" "$fuzz_seconds") && rc=0 || rc=$?
printf '%s\n' "$fuzz_out"
fuzz_failed=$(printf '%s\n' "$fuzz_out" | grep -c '^not ok' || true)
failures=$((failures + fuzz_failed))
if [ "$rc" -ne 0 ] && [ "$fuzz_failed" -eq 0 ]; then
	not_ok "fuzz: scripts/fuzz.sh $fuzz_seconds exited with status $rc"
fi
finish
