# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "bench": the IOMMU translates DMA and remaps
# interrupts, and the modules load and unload cleanly.
. /guest/lib.sh

in_dmesg() { dmesg | grep -q "$1"; }

check "DMAR: the Intel IOMMU is enabled" in_dmesg 'DMAR: IOMMU enabled'
check "DMAR-IR: interrupt remapping is enabled" in_dmesg 'DMAR-IR: Enabled IRQ remapping'
check "/sys/kernel/iommu_groups is populated" sh -c '[ "$(ls /sys/kernel/iommu_groups | wc -l)" -gt 0 ]'
# "DMA" is a translating domain; "identity" would mean passthrough.
check "every IOMMU group translates DMA (strict)" sh -c '
	for t in /sys/kernel/iommu_groups/*/type; do
		echo "$t: $(cat "$t")"
		[ "$(cat "$t")" = DMA ] || exit 1
	done'
for m in rust_plx_dma plx_dma dmatest; do
	check "modprobe $m" modprobe "$m"
	check "$m is listed in /proc/modules" grep -q "^$m " /proc/modules
	check "rmmod $m" rmmod "$m"
	check "$m is gone from /proc/modules" sh -c "! grep -q '^$m ' /proc/modules"
done
check "rust_plx_dma registered its PCI driver while loaded" sh -c '
	modprobe rust_plx_dma && [ -d /sys/bus/pci/drivers/rust_plx_dma ]; rc=$?; rmmod rust_plx_dma; exit $rc'
# The deep-queue client checks its parameters before it takes a channel
# (this guest has none).
check "plx_depth_bench refuses depth=0 (EINVAL, message, not loaded)" \
	load_refused plx_depth_bench depth=0 "plx_depth_bench: depth=0 is invalid"
check "plx_depth_bench refuses a batch deeper than its queue" \
	load_refused plx_depth_bench batch=17 "plx_depth_bench: batch=17 is invalid"
check "splat_trigger without fire=1 loads quietly" sh -c 'modprobe splat_trigger && rmmod splat_trigger'
finish
