# SPDX-License-Identifier: GPL-2.0
# Suite: the RDMA device plx_rdma through ib_core and libibverbs in the guest, its data moved by rust_plx_dma behind intel-iommu (and by the CPU without a channel): ibv_devinfo, ibv_rc_pingpong with data checks, perftest, the verbs kselftest
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

results=$REPO/build/results
mkdir -p "$results"
if ! mapfile -t files < <("$REPO/scripts/rdma-userland.sh") || [ "${#files[@]}" -eq 0 ]; then
	not_ok "the RDMA user space (provider, tools, libraries) builds"
	finish
fi
ok "the RDMA user space (provider, tools, libraries) builds: ${#files[@]} files"
extras=()
for f in "${files[@]}"; do extras+=(-a "$f"); done
rc=0
run_emulated_guest rdma 2 1200 "$REPO/scripts/suites/rdma.guest.sh" "${extras[@]}" || rc=$?
guest_points rdma
check "rdma guest ran to the end with status 0, no splat" test "$rc" -eq 0
finish
