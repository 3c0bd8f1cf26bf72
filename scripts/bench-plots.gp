# SPDX-License-Identifier: GPL-2.0
# Plots for `make bench`; `out` is the results directory.
set terminal pngcairo size 800,500
set logscale x 2
set key top left
set grid
set xlabel "copy size (bytes)"
set ylabel "MB/s"

set output out."/dmatest.png"
set title "dmatest throughput on the emulated engine (median)"
plot out."/dmatest.dat" using 1:2 with linespoints title "C plx\\_dma", \
     out."/dmatest.dat" using 1:3 with linespoints title "rust\\_plx\\_dma"

set output out."/memcpy.png"
set title "engine copy vs CPU copy (median)"
set logscale y 10
plot out."/memcpy.dat" using 1:2 with linespoints title "engine (rust\\_plx\\_dma)", \
     out."/memcpy.dat" using 1:3 with linespoints title "CPU memcpy"

set output out."/uapi.png"
set title "user-buffer copies through /dev/plx-dma-copy (median)"
plot out."/uapi.dat" using 1:2 with linespoints title "C plx\\_dma, one at a time", \
     out."/uapi.dat" using 1:3 with linespoints title "C plx\\_dma, batches", \
     out."/uapi.dat" using 1:4 with linespoints title "rust\\_plx\\_dma, one at a time", \
     out."/uapi.dat" using 1:5 with linespoints title "rust\\_plx\\_dma, batches", \
     out."/uapi.dat" using 1:6 with linespoints title "CPU memcpy"
