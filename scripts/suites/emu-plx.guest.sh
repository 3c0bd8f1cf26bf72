# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "emu-plx": the C plx_dma binds both emulated functions
# and dmatest copies through them with verification.  The run ends with the
# channels held: see dmatest.sh for why plx_dma is never torn down here.
. /guest/lib.sh
. /guest/dmatest.sh

check "two PLX-model functions on the PCI bus" sh -c \
	'[ "$(grep -l 0x87d0 /sys/bus/pci/devices/*/device | wc -l)" -eq 2 ]'
check "modprobe plx_dma" modprobe plx_dma
check "plx_dma bound both functions" sh -c '[ "$(ls /sys/bus/pci/drivers/plx_dma | grep -c :)" -eq 2 ]'
check "two channels in /sys/class/dma" sh -c '[ "$(ls /sys/class/dma | wc -l)" -eq 2 ]'
dmatest_run plx_dma 5000 16384 2
finish
