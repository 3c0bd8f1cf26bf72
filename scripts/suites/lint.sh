# SPDX-License-Identifier: GPL-2.0
# Suite: rustfmt and clippy on the repository's kernel Rust, warnings as errors
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

rs=$(cd "$REPO" && git ls-files -co --exclude-standard '*.rs' | grep -v '^tools/plx-dma-emu/' || true)
[ -n "$rs" ] || { not_ok "no Rust sources found"; finish; }
# shellcheck disable=SC2086
check "rustfmt --check on $(echo "$rs" | wc -l) kernel Rust files" \
	in_root sh -c "cd '$REPO' && rustfmt --check --color never --config-path .rustfmt.toml $(echo $rs)"
check "clippy finds nothing in the modules (CLIPPY=1, -Dwarnings)" env MODULES_OUT="$REPO/build/modules/clippy" \
	"$REPO/scripts/modules-build.sh" test CLIPPY=1
finish
