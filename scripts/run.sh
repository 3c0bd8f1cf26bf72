#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make run`: set up what is missing, build, boot a guest behind intel-iommu
# with the emulated engine(s), run the demo and print a summary.

. "$(dirname "$0")/lib.sh"

need_root run
t0=$(date +%s)
rc=0
selftests=$("$REPO/scripts/user-build.sh") || die "the uAPI example did not build"
rdma=$("$REPO/scripts/rdma-user-build.sh") || die "the RDMA example did not build"
rdma_userland || die "the RDMA user space did not build"
run_emulated_guest run 2 900 "$REPO/scripts/guest/demo.sh" \
	-a "$selftests/plx_dma_copy_example:/usr/local/bin/plx_dma_copy_example" \
	-a "$rdma/plx_rdma_write:/usr/local/bin/plx_rdma_write" \
	-a "$rdma/roce_capture:/usr/local/bin/roce_capture" \
	-a "$REPO/scripts/guest/roce.sh:/guest/roce.sh" "${extras[@]}" >&2 || rc=$?
tap=$REPO/build/results/run.guest.tap
echo
# The tour the guest printed, then its test points, then one screen that
# sums it up.
grep -vE '^(ok|not ok) |^# summary ' "$tap" || true
# The engine's side of the captured 2 KiB WRITE: the descriptors the
# emulator ran while the demo had its log at level debug (bus addresses
# behind the vIOMMU: the skb's payload as source, the region as target).
echo "== the engine's descriptors while the 2 KiB WRITE was captured (build/results/run.emu.log)"
grep -E ': debug: descriptor 0x' "$REPO/build/results/run.emu.log" | sed 's/^plx-dma-emu: /   /' ||
	echo "   (none logged)"
echo
grep -E '^(ok|not ok) ' "$tap" | sed 's/^/  /' || true
echo
echo "== rust-plx-dma demo: summary"
sed -n 's/^# summary \([^:]*\): /\1\t/p' "$tap" | awk -F '\t' '{ printf "  %-10s %s\n", $1, $2 }'
echo "  checks     $(grep -c '^ok ' "$tap" || true) passed, $(grep -c '^not ok ' "$tap" || true) failed"
echo "  console    build/results/run.console (guest kernel log); the tour: build/results/run.guest.tap"
if [ "$rc" -eq 0 ]; then
	echo "demo passed in $(($(date +%s) - t0)) s"
else
	echo "demo FAILED (status $rc) after $(($(date +%s) - t0)) s"
fi
exit "$rc"
