# SPDX-License-Identifier: GPL-2.0
# Guest half of `make run`: a short, readable tour of the data path.
. /guest/lib.sh
. /guest/dmatest.sh

strip() { sed 's/^\[[^]]*\] /   /'; }
# summary TOPIC TEXT: one line of the summary `make run` ends with.
summary() { printf '# summary %s: %s\n' "$1" "$2"; }

echo "== kernel $(uname -r)"
echo "== IOMMU: every device DMA is translated, interrupts are remapped"
dmesg | grep -E 'DMAR: IOMMU enabled|DMAR-IR: Enabled IRQ remapping' | strip
for g in /sys/kernel/iommu_groups/*; do
	echo "   group ${g##*/}: $(cat "$g/type") $(ls "$g/devices" | tr '\n' ' ')"
done
on_off() { dmesg | grep -q "$1" && echo on || echo OFF; }
summary guest "Linux $(uname -r) under QEMU; intel-iommu DMA translation $(on_off 'DMAR: IOMMU enabled'), IRQ remapping $(on_off 'DMAR-IR: Enabled IRQ remapping'), $(ls /sys/kernel/iommu_groups | wc -l) IOMMU groups"
echo "== emulated PLX-model DMA functions (vfio-user devices)"
for d in /sys/bus/pci/devices/*; do
	grep -q 0x87d0 "$d/device" && echo "   ${d##*/} $(cat "$d/vendor"):$(cat "$d/device") class $(cat "$d/class")"
done
echo "== loading the Rust driver"
check "modprobe rust_plx_dma" modprobe rust_plx_dma
dmesg | grep 'rust_plx_dma' | strip
echo "   channels: $(ls /sys/class/dma | tr '\n' ' ')"
summary engines "$(plx_functions | wc -l) emulated PLX functions 10b5:87d0 ($(plx_functions | tr '\n' ' ' | sed 's/ $//')), rust_plx_dma channels $(ls /sys/class/dma | tr '\n' ' ' | sed 's/ $//')"
echo "== dmatest on every channel (verification on)"
dmatest_run demo 2000 16384 "$(ls /sys/class/dma | wc -l)"
dmatest_release
summary dmatest "$(awk '{ for (i = 1; i < NF; i++) { if ($i == "summary") n += $(i + 1); if ($i == "failures") f += $(i - 1); if ($(i + 1) == "KB/s") k = k " " $i / 1000 } }
	END { printf "%d verified 16 KiB copies, %d failures; MB/s per channel:%s", n, f, k }' /tmp/dmatest-demo.txt)"
echo "== a Rust dmaengine client copies 1 MiB and checks it"
check "rust_dma_memcpy size=1048576" modprobe rust_dma_memcpy size=1048576
dmesg | grep 'rust_dma_memcpy' | tail -n 1 | strip
summary client "$(dmesg | grep 'rust_dma_memcpy' | tail -n 1 | sed 's/^\[[^]]*\] //')"
rmmod rust_dma_memcpy 2>/dev/null
echo "== a user program copies its own buffers (/dev/plx-dma-copy)"
check "modprobe plx_dma_copy" modprobe plx_dma_copy
rc=0
/usr/local/bin/plx_dma_copy_example 1048576 >/tmp/example.out 2>&1 || rc=$?
sed 's/^/   /' /tmp/example.out
summary "user copy" "/dev/plx-dma-copy: $(head -n 1 /tmp/example.out); $(tail -n 1 /tmp/example.out)"
check "plx_dma_copy_example: 1 MiB, once and as a batch of 8, verified" test "$rc" -eq 0
check "rmmod plx_dma_copy" rmmod plx_dma_copy
echo "== RDMA on top: plx_rdma registers memory, connects QPs, and one RDMA WRITE"
echo "   crosses the wire as RoCEv2 datagrams (UDP 4791) and lands on a rust_plx_dma channel"
echo "   (lkey for the source, rkey for the target)"
. /guest/roce.sh
check "modprobe ib_uverbs" modprobe ib_uverbs
# Its port is RoCEv2 on a netdev, as rxe's is: a dummy one with an address
# here (the port's GIDs come from it).  With wire_local=1 the device sends
# even to its own GIDs through UDP port 4791 and the IP stack, so that the
# one host shows the packets a second one would get.
roce_netdev 10.77.0.1 >/dev/null
echo "   port 1 on dummy0 (10.77.0.1/24)"
check "modprobe plx_rdma wire_local=1" modprobe plx_rdma wire_local=1
check "rdma link add plx0 type plx netdev dummy0" rdma link add plx0 type plx netdev dummy0
dmesg | grep 'plx_rdma:' | tail -n 1 | strip
STATS=/sys/kernel/debug/plx_rdma/plx0
stat() { sed -n "s/^$1: //p" "$STATS"; }
has_gid plx0 "$(ipv4_gid 10.77.0.1)"
gidx=$(wire_gid_index plx0 10.77.0.1)
tx0=$(stat tx_packets)
rc=0
PATH=/usr/bin:$PATH /usr/local/bin/plx_rdma_write plx0 1048576 "${gidx:-0}" >/tmp/rdma.out 2>&1 || rc=$?
sed 's/^/   /' /tmp/rdma.out
sent=$(($(stat tx_packets) - tx0))
summary RDMA "plx0 (RoCEv2 on dummy0): $(sed -n 's/^RDMA WRITE *//p' /tmp/rdma.out); $(sed -n 's/^completion *//p' /tmp/rdma.out | cut -d' ' -f1-4); $sent datagrams on UDP 4791, $(stat rx_payload_engine_bytes) bytes placed by the engine"
check "plx_rdma_write: one 1 MiB RDMA WRITE, completed and verified" test "$rc" -eq 0
check "the WRITE crossed the wire: $sent RoCEv2 datagrams (1024 of 1 KiB at least, and the ACKs)" \
	test "$sent" -ge 1024
check "the engine placed the received payload ($(stat rx_payload_engine_bytes) bytes)" \
	test "$(stat rx_payload_engine_bytes)" -ge 1048576
sed 's/^/   plx0: /' "$STATS"
echo "== the layers of one RDMA WRITE of 2 KiB: its datagrams as they arrive (by the"
echo "   local route: both QPs are plx0's), then the engine's descriptors that placed"
echo "   the same payload (from the emulator's log, after this tour)"
# The emulator logs each descriptor it runs at level debug, for this WRITE
# only.
host_ctl log-level debug
/usr/local/bin/roce_capture any 3 30 >/tmp/capture.out 2>/tmp/capture.err &
cap=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do
	grep -q listening /tmp/capture.err && break
	sleep 0.5
done
rc=0
PATH=/usr/bin:$PATH /usr/local/bin/plx_rdma_write plx0 2048 "${gidx:-0}" >/tmp/rdma2k.out 2>&1 || rc=$?
crc=0
wait "$cap" || crc=$?
host_ctl log-level info
sed 's/^/   /' /tmp/capture.out
[ "$crc" -eq 0 ] || sed 's/^/   roce_capture: /' /tmp/capture.err
check "plx_rdma_write: one 2 KiB RDMA WRITE, verified" test "$rc" -eq 0
check "roce_capture: WRITE FIRST (with its RETH), WRITE LAST and the ACK, each ICRC valid" sh -c \
	"test $crc -eq 0 && grep -q 'RC RDMA WRITE FIRST' /tmp/capture.out && grep -q 'RETH' /tmp/capture.out &&
		grep -q 'RC RDMA WRITE LAST' /tmp/capture.out && grep -q 'RC ACKNOWLEDGE' /tmp/capture.out"
summary wire "$(sed -n 's/.*(\(RC [A-Z ]*\)).*/\1/p' /tmp/capture.out | tr '\n' ',' | sed 's/,$//; s/,/, /g'); $(tail -n 1 /tmp/capture.out)"
check "rdma link delete plx0" rdma link delete plx0
check "rmmod plx_rdma" rmmod plx_rdma
echo "== per-channel statistics (debugfs)"
for f in /sys/kernel/debug/rust_plx_dma-*/stats; do
	echo "   ${f%/stats}:" | sed 's|/sys/kernel/debug/||'
	sed 's/^/      /' "$f"
done
check "rmmod rust_plx_dma" rmmod rust_plx_dma
finish
