# SPDX-License-Identifier: GPL-2.0
# Suite: the RDMA device plx_rdma through ib_core and libibverbs in the guest, its data moved by rust_plx_dma behind intel-iommu (and by the CPU without a channel): ibv_devinfo, ibv_rc_pingpong with data checks, perftest, the verbs kselftest; RoCEv2 on the wire (pingpong, perftest and rping as UDP datagrams, hostile datagrams), rdma link add, against rdma_rxe in a second namespace (both directions, two devices on one port, under netem), plx to plx across namespaces; then, in a second boot with every streaming mapping bounced (swiotlb=force), verbs_test's WRITE, READ and SEND of 4 KiB to 1 MiB verified on the loopback fabric and from the wire
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

mkdir -p "$REPO/build/results"
suite_rdma_userland
ok "the RDMA user space (provider, tools, libraries) builds: $((${#extras[@]} / 2)) files"
# Which devices libibverbs gives the provider, on a fake sysfs (it needs a
# host without ib_core, whose netlink would be asked instead).
if [ -d /sys/class/infiniband ] || [ -d /sys/module/ib_core ]; then
	echo "# provider-match-check not run (not counted): this host has ib_core loaded"
else
	check "the provider takes plx_rdma* devices of ABI 1 only, never rxe's" \
		"$REPO/scripts/provider-match-check.sh"
fi
# The verbs kselftests and the example, linked against the root's
# libibverbs.
if vout=$("$REPO/scripts/rdma-user-build.sh"); then
	ok "the verbs kselftests build (kselftest_harness.h, lib.mk, libibverbs)"
else
	not_ok "the verbs kselftests build"
	finish
fi
extras+=(-a "$vout/verbs_test:/usr/local/bin/verbs_test")
extras+=(-a "$vout/verbs_fuzz:/usr/local/bin/verbs_fuzz")
extras+=(-a "$vout/plx_rdma_write:/usr/local/bin/plx_rdma_write")
extras+=(-a "$vout/wire_test:/usr/local/bin/wire_test")
extras+=(-a "$vout/cgroup_test:/usr/local/bin/cgroup_test")
extras+=(-a "$REPO/scripts/guest/rdma-wire.sh:/guest/rdma-wire.sh")
extras+=(-a "$REPO/scripts/guest/roce.sh:/guest/roce.sh")
extras+=(-a "$REPO/scripts/guest/verbs_diff.sh:/guest/verbs_diff.sh")
extras+=(-a "$REPO/tools/testing/selftests/drivers/infiniband/plx_rdma/rxe_divergences:/guest/rxe_divergences")
extras+=(-a "$REPO/tools/testing/selftests/drivers/infiniband/plx_rdma/wire_exclusions:/guest/wire_exclusions")
# make soak: ten times the hostile verbs, or SOAK_FUZZ_OPS.
timeout=1200
if [ -n "${PLX_SOAK:-}" ]; then
	export GUEST_PARAMS="PLX_FUZZ_OPS=${SOAK_FUZZ_OPS:-200000}"
	timeout=$((1200 + ${SOAK_FUZZ_OPS:-200000} / 20))
fi
rc=0
run_emulated_guest rdma 2 "$timeout" "$REPO/scripts/suites/rdma.guest.sh" "${extras[@]}" || rc=$?
guest_points rdma
check "rdma guest ran to the end with status 0, no splat" test "$rc" -eq 0
# A second boot with every streaming mapping bounced: the engine's copies
# see the bytes of the moment only if plx_rdma syncs them.
rc=0
run_emulated_guest rdma-bounce 1 600 "$REPO/scripts/suites/rdma-bounce.guest.sh" "${extras[@]}" \
	-A iommu.passthrough=1 -A swiotlb=force || rc=$?
guest_points rdma-bounce
check "rdma-bounce guest ran to the end with status 0, no splat" test "$rc" -eq 0
finish
