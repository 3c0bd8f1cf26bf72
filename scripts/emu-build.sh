#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the emulated engine (tools/plx-dma-emu) with the host's cargo and
# print the binary's path.  The target directory lives in the cache, outside
# the clone, so a fresh clone reuses earlier builds.

. "$(dirname "$0")/lib.sh"

command -v cargo >/dev/null || die "cargo is not installed: the emulator needs a Rust toolchain on the host (rustup or Debian's cargo)"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PLX_CACHE/cargo-target}
mkdir -p "$CARGO_TARGET_DIR"
cargo build -q --release --locked --manifest-path "$REPO/tools/plx-dma-emu/Cargo.toml" >&2 ||
	die "building tools/plx-dma-emu failed"
echo "$CARGO_TARGET_DIR/release/plx-dma-emu"
