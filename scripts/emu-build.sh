#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# Build the emulated engine (tools/plx-dma-emu) with the trixie root's cargo
# and print the binary's path.  The binary is linked statically
# (crt-static), so the host runs it whatever its own C library; the target
# directory lives in the cache, outside the clone, so a fresh clone reuses
# earlier builds.

. "$(dirname "$0")/lib.sh"

export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PLX_CACHE/cargo-target}
# --target keeps RUSTFLAGS off the build scripts and proc macros (clap's
# derive must stay a shared object).
RUSTFLAGS="-C target-feature=+crt-static" root_cargo build -q --release --locked \
	--target x86_64-unknown-linux-gnu --manifest-path "$REPO/tools/plx-dma-emu/Cargo.toml" >&2 ||
	die "building tools/plx-dma-emu failed"
echo "$CARGO_TARGET_DIR/x86_64-unknown-linux-gnu/release/plx-dma-emu"
