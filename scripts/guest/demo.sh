# SPDX-License-Identifier: GPL-2.0
# Guest half of `make run`: a short, readable tour of what the bench shows.
. /guest/lib.sh

echo "== kernel: $(uname -r)"
echo "== IOMMU"
dmesg | grep -E 'DMAR: IOMMU enabled|DMAR-IR: Enabled IRQ remapping' | sed 's/^\[[^]]*\] /   /'
for g in /sys/kernel/iommu_groups/*; do
	echo "   group ${g##*/}: $(cat "$g/type") $(ls "$g/devices" | tr '\n' ' ')"
done
echo "== PLX-model DMA functions on the PCI bus"
found=0
for d in /sys/bus/pci/devices/*; do
	if [ "$(cat "$d/vendor"):$(cat "$d/device")" = 0x10b5:0x87d0 ]; then
		echo "   ${d##*/}"
		found=$((found + 1))
	fi
done
[ "$found" -gt 0 ] || echo "   (none attached)"
echo "== loading the Rust driver"
check "modprobe rust_plx_dma" modprobe rust_plx_dma
dmesg | grep rust_plx_dma | sed 's/^\[[^]]*\] /   /'
check "rmmod rust_plx_dma" rmmod rust_plx_dma
finish
