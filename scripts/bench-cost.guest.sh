# SPDX-License-Identifier: GPL-2.0
# Guest half of the bench's path-length boot, under instruction counting
# (guest-run.sh -I): plx_submit_cost on each driver in turn, whose timings
# are then guest instruction counts per copy (prep and submit; reap and
# callback) and per batch (issue_pending), with a lock pair and an
# indirect call for scale.  The C plx_dma runs last: its queue may stall (see bench.rst).
. /guest/lib.sh

for drv in rust_plx_dma plx_dma; do
	modprobe "$drv" || { not_ok "modprobe $drv"; continue; }
	check "plx_submit_cost on $drv" modprobe plx_submit_cost
	dmesg | grep 'plx_submit_cost: chan=' | tail -n 1 | sed 's/^.*plx_submit_cost: /COST /'
	rmmod plx_submit_cost 2>/dev/null
	rmmod "$drv"
done
finish
