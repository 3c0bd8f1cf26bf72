# SPDX-License-Identifier: GPL-2.0
# Guest half of `make run`: a short, readable tour of the data path.
. /guest/lib.sh
. /guest/dmatest.sh

strip() { sed 's/^\[[^]]*\] /   /'; }

echo "== kernel $(uname -r)"
echo "== IOMMU: every device DMA is translated, interrupts are remapped"
dmesg | grep -E 'DMAR: IOMMU enabled|DMAR-IR: Enabled IRQ remapping' | strip
for g in /sys/kernel/iommu_groups/*; do
	echo "   group ${g##*/}: $(cat "$g/type") $(ls "$g/devices" | tr '\n' ' ')"
done
echo "== emulated PLX-model DMA functions (vfio-user devices)"
for d in /sys/bus/pci/devices/*; do
	grep -q 0x87d0 "$d/device" && echo "   ${d##*/} $(cat "$d/vendor"):$(cat "$d/device") class $(cat "$d/class")"
done
echo "== loading the Rust driver"
check "modprobe rust_plx_dma" modprobe rust_plx_dma
dmesg | grep 'rust_plx_dma' | strip
echo "   channels: $(ls /sys/class/dma | tr '\n' ' ')"
echo "== dmatest on every channel (verification on)"
dmatest_run demo 2000 16384 "$(ls /sys/class/dma | wc -l)"
dmatest_release
echo "== a Rust dmaengine client copies 1 MiB and checks it"
check "rust_dma_memcpy size=1048576" modprobe rust_dma_memcpy size=1048576
dmesg | grep 'rust_dma_memcpy' | tail -n 1 | strip
rmmod rust_dma_memcpy 2>/dev/null
echo "== a user program copies its own buffers (/dev/plx-dma-copy)"
check "modprobe plx_dma_copy" modprobe plx_dma_copy
rc=0
/usr/local/bin/plx_dma_copy_example 1048576 >/tmp/example.out 2>&1 || rc=$?
sed 's/^/   /' /tmp/example.out
check "plx_dma_copy_example: 1 MiB, once and as a batch of 8, verified" test "$rc" -eq 0
check "rmmod plx_dma_copy" rmmod plx_dma_copy
echo "== RDMA on top: plx_rdma registers memory, connects QPs, and one RDMA WRITE"
echo "   moves the bytes on a rust_plx_dma channel (lkey for the source, rkey for the target)"
check "modprobe ib_uverbs" modprobe ib_uverbs
check "modprobe plx_rdma" modprobe plx_rdma
dmesg | grep 'plx_rdma:' | tail -n 1 | strip
rc=0
PATH=/usr/bin:$PATH /usr/local/bin/plx_rdma_write plx_rdma0 1048576 >/tmp/rdma.out 2>&1 || rc=$?
sed 's/^/   /' /tmp/rdma.out
check "plx_rdma_write: one 1 MiB RDMA WRITE, completed and verified" test "$rc" -eq 0
sed 's/^/   plx_rdma: /' /sys/kernel/debug/plx_rdma/stats
check "rmmod plx_rdma" rmmod plx_rdma
echo "== per-channel statistics (debugfs)"
for f in /sys/kernel/debug/rust_plx_dma-*/stats; do
	echo "   ${f%/stats}:" | sed 's|/sys/kernel/debug/||'
	sed 's/^/      /' "$f"
done
check "rmmod rust_plx_dma" rmmod rust_plx_dma
finish
