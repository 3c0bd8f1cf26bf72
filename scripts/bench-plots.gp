# SPDX-License-Identifier: GPL-2.0
# Plots for `make bench`; `out` is the results directory. Each figure
# shows both emulator DMA paths: mapped (solid) and DMA messages (dashed).
set terminal pngcairo size 900,560
set logscale x 2
set logscale y 10
set key top left
set grid
set xlabel "copy size (bytes)"
set ylabel "MB/s"
m(f) = out."/".f."-mapped.dat"
g(f) = out."/".f."-message.dat"

set output out."/dmatest.png"
set title "dmatest throughput, one copy in flight per channel (median)"
plot m("dmatest") using 1:2 with linespoints lt 1 title "C plx\\_dma, mapped", \
     m("dmatest") using 1:3 with linespoints lt 2 title "rust\\_plx\\_dma, mapped", \
     g("dmatest") using 1:2 with linespoints lt 1 dt 2 title "C plx\\_dma, messages", \
     g("dmatest") using 1:3 with linespoints lt 2 dt 2 title "rust\\_plx\\_dma, messages"

set output out."/memcpy.png"
set title "engine copy (one at a time) vs CPU copy (median)"
plot m("memcpy") using 1:2 with linespoints lt 2 title "engine, mapped", \
     g("memcpy") using 1:2 with linespoints lt 2 dt 2 title "engine, messages", \
     m("memcpy") using 1:3 with linespoints lt 7 title "CPU memcpy"

set output out."/depth.png"
set title "deep-queue client, 16 copies in flight (median); where the engine crosses the CPU"
plot m("depth") using 1:2 with linespoints lt 1 title "C plx\\_dma, mapped", \
     m("depth") using 1:3 with linespoints lt 2 title "rust\\_plx\\_dma, mapped", \
     g("depth") using 1:2 with linespoints lt 1 dt 2 title "C plx\\_dma, messages", \
     g("depth") using 1:3 with linespoints lt 2 dt 2 title "rust\\_plx\\_dma, messages", \
     m("depth") using 1:4 with linespoints lt 7 title "CPU memcpy"

set output out."/uapi.png"
set title "user-buffer copies through /dev/plx-dma-copy on rust\\_plx\\_dma (median)"
plot m("uapi") using 1:2 with linespoints lt 2 title "one at a time, mapped", \
     m("uapi") using 1:3 with linespoints lt 3 title "batches, mapped", \
     m("uapi") using 1:5 with linespoints lt 4 title "registered regions, mapped", \
     g("uapi") using 1:3 with linespoints lt 3 dt 2 title "batches, messages", \
     m("uapi") using 1:4 with linespoints lt 7 title "CPU memcpy"
