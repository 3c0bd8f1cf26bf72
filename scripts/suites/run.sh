# SPDX-License-Identifier: GPL-2.0
# Suite: `make run` as a user types it: the demo (IOMMU, dmatest, the Rust client, a user copy, one RDMA WRITE on plx_rdma's RoCEv2 port) passes and ends with its summary
. "$(dirname "$0")/../lib.sh"
. "$REPO/scripts/guest/lib.sh"

# The same script as `make run`, so the demo cannot drift from the drivers
# unnoticed; its guest points are this suite's.
out=$(bash "$REPO/scripts/run.sh" 2>"$REPO/build/results/run.log") && rc=0 || rc=$?
guest_points run
check "make run exits 0 and says \"demo passed\" (status $rc; log build/results/run.log)" \
	sh -c "test $rc -eq 0 && printf '%s\n' \"\$0\" | grep -q '^demo passed in '" "$out"
# The summary names every step with its figures.
for topic in guest engines dmatest client 'user copy' RDMA; do
	check "make run's summary has its $topic line" \
		sh -c 'printf "%s\n" "$0" | sed -n "/^== rust-plx-dma demo: summary/,\$p" | grep -q "^  $1 "' "$out" "$topic"
done
check "make run's summary shows the RDMA WRITE's lkey and rkey" \
	sh -c 'printf "%s\n" "$0" | grep -E "^  RDMA .*lkey 0x[0-9a-f]+ .*rkey 0x[0-9a-f]+"' "$out"
finish
