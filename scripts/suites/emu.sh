# SPDX-License-Identifier: GPL-2.0
# Suite: the emulated engine's own unit tests, clippy and rustfmt (no QEMU)
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PLX_CACHE/cargo-target}
manifest=$REPO/tools/plx-dma-emu/Cargo.toml
out=$(cargo test --locked --manifest-path "$manifest" 2>&1) && rc=0 || rc=$?
# One test point per unit test, then one for the run as a whole.
printf '%s\n' "$out" | sed -n 's/^test \(.*\) \.\.\. ok$/ok - emu: \1/p; s/^test \(.*\) \.\.\. FAILED$/not ok - emu: \1/p'
printf '%s\n' "$out" | grep -E '^test result:' | sed 's/^/# /'
passed=$(printf '%s\n' "$out" | sed -n 's/^test result: .* \([0-9]*\) passed.*/\1/p' | awk '{ s += $1 } END { print s + 0 }')
check "cargo test: $passed unit tests pass" test "$rc" -eq 0 -a "$passed" -gt 0
check "cargo clippy --all-targets -D warnings" \
	cargo clippy -q --locked --all-targets --manifest-path "$manifest" -- -D warnings
check "cargo fmt --check" cargo fmt --check --manifest-path "$manifest"
finish
