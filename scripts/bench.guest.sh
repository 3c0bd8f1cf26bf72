# SPDX-License-Identifier: GPL-2.0
# Guest half of `make bench`: dmatest throughput of the C plx_dma and of
# rust_plx_dma on the same emulated channels in one boot, and engine copies
# against CPU copies through the Rust client, and user-buffer copies through
# /dev/plx-dma-copy (one at a time, batched, and by the CPU) on each driver,
# and perftest on plx_rdma (data on a rust_plx_dma channel) against rxe (on
# lo) in the same boot.  Then the deep-queue client plx_depth_bench on both
# drivers (rust_plx_dma in its completion modes), with the guest's busy CPU
# time while each run copies.  Emits "BENCH ..." lines; $BENCH_PATH (from
# /guest/params.sh) names the emulator's DMA path, and PERFTEST=0 leaves
# perftest out.
. /guest/lib.sh
. /guest/dmatest.sh

REPS=${REPS:-3}
# The deep-queue runs are short (tens of milliseconds on the mapped path,
# which plx_dma's lost completions keep from being made longer): more of
# them steady their medians.
DEPTH_REPS=${DEPTH_REPS:-5}
SIZES="4096 65536 1048576"
MEMCPY_SIZES="64 4096 65536 1048576"
# The deep-queue client's sizes, comma-separated in /guest/params.sh
# (bench.sh: the C driver's boots take one each).
DEPTH_SIZES=$(echo "${DEPTH_SIZES:?bench.sh passes DEPTH_SIZES}" | tr , ' ')
BENCH_PATH=${BENCH_PATH:-message}
echo "BENCH path $BENCH_PATH"

iters_for() { case $1 in 64 | 4096) echo 4000 ;; 65536) echo 2000 ;; *) echo 300 ;; esac; }
# Deep-queue copies per run and channel.  The message path moves every
# byte through QEMU, the mapped one at memory speed, so each has its own
# counts.  At depth 16 the small sizes take about half a second a run,
# 64 KiB and 1 MiB a tenth or less: longer mapped runs would lose more of
# plx_dma's completions (see DEPTH_REPS above and bench.rst).
depth_copies_for() {
	if [ "$BENCH_PATH" = mapped ]; then
		case $1 in 64) echo 40000 ;; 4096) echo 20000 ;; 65536) echo 4000 ;; *) echo 400 ;; esac
	else
		case $1 in 64) echo 3000 ;; 4096) echo 2000 ;; 65536) echo 150 ;; *) echo 20 ;; esac
	fi
}

# depth_run DRIVER MODE REP SIZE DEPTH CHANNELS: one plx_depth_bench load:
#   BENCH depth DRIVER MODE SIZE DEPTH CHANNELS REP COPIES BYTES NS BUSY UNITS SUBMIT_NS
# (BUSY: the non-idle CPU time of all CPUs while the copies ran, in 1/UNITS
# s, from the client's busy_ns; SUBMIT_NS: the time the client's threads
# spent preparing, submitting and issuing, summed over the channels)
depth_run() {
	local drv=$1 mode=$2 rep=$3 size=$4 depth=$5 chans=$6 line log submit
	if ! log=$(depth_load "$size" "$depth" "$chans" "$(depth_copies_for "$size")" \
		"${DEPTH_TIMEOUT_MS:-10000}"); then
		not_ok "plx_depth_bench on $drv ($mode) size=$size depth=$depth channels=$chans"
		echo "$log" | sed 's/^/# /'
		return
	fi
	line=$(echo "$log" | grep 'plx_depth_bench: total' | tail -n 1)
	submit=$(echo "$log" | sed -n 's/.*plx_depth_bench: chan=.* submit_ns=\([0-9]*\).*/\1/p' |
		awk '{ s += $1 } END { print s + 0 }')
	echo "$line" | sed -n 's/.* copies=\([0-9]*\) bytes=\([0-9]*\) ns=\([0-9]*\) busy_ns=\([0-9]*\).*/BENCH depth '"$drv $mode $size $depth $chans $rep"' \1 \2 \3 \4 1000000000 '"$submit"'/p'
}

# depth_grid DRIVER MODE REP FULL: the size x depth grid on one channel
# (FULL=0: 64 B at every depth and 64 KiB at depth 16 only).
depth_grid() {
	local drv=$1 mode=$2 rep=$3 full=$4 size depth
	for size in $DEPTH_SIZES; do
		for depth in 1 16 256; do
			if [ "$full" = 1 ] || [ "$size" = 64 ] || { [ "$size" = 65536 ] && [ "$depth" = 16 ]; }; then
				depth_run "$drv" "$mode" "$rep" "$size" "$depth" 1
			fi
		done
	done
}

# depth_bench DRIVER MODE REP FULL: depth_grid, then (FULL=1) two
# channels at depths 16 and 256 for 64 KiB and 1 MiB (those of
# DEPTH_SIZES): 16 deep a channel waits on each round trip through QEMU,
# 256 deep it keeps its engine busy, so the aggregate shows what a second
# engine adds on this host.
depth_bench() {
	local drv=$1 mode=$2 rep=$3 full=$4 size
	depth_grid "$drv" "$mode" "$rep" "$full"
	[ "$full" = 1 ] || return 0
	for size in $DEPTH_SIZES; do
		case $size in
		65536 | 1048576)
			depth_run "$drv" "$mode" "$rep" "$size" 16 2
			depth_run "$drv" "$mode" "$rep" "$size" 256 2
			;;
		esac
	done
}

# User copies per measurement: a multiple of the tool's batch depth (32).
uapi_iters_for() { case $1 in 4096) echo 2048 ;; 65536) echo 1024 ;; *) echo 128 ;; esac; }

uapi_bench() {
	drv=$1 rep=$2
	modprobe plx_dma_copy || { not_ok "modprobe plx_dma_copy"; return; }
	for size in $SIZES; do
		/usr/local/bin/plx_dma_copy_bench "$size" "$(uapi_iters_for "$size")" "$rep" |
			sed -n "s/^BENCH uapi /BENCH uapi $drv /p"
	done
	rmmod plx_dma_copy
}

dmatest_bench() {
	drv=$1 size=$2 rep=$3
	dmatest_start "$(iters_for "$size")" "$size" 0 0
	dmatest_summaries |
		sed -n 's/.*dmatest: \([^:]*\): summary \([0-9]*\) tests, \([0-9]*\) failures \([0-9.]*\) iops \([0-9]*\) KB\/s.*/BENCH dmatest '"$drv $size $rep"' \1 \2 \3 \4 \5/p'
	dmatest_release
}

if [ "${C_DEPTH_ONLY:-0}" = 1 ]; then
	# Each run waits at most 3 s for a completion; a stalled queue fails
	# its run (and would end the boot if the release then hung).
	DEPTH_TIMEOUT_MS=3000
	# The two drivers take turns, a repetition each: rust_plx_dma on one
	# channel at this boot's sizes (mode "same-boot"), then plx_dma's
	# grid, each loaded for its runs and unloaded after them.  So each
	# Rust/C pair of runs is seconds apart in one boot, not minutes or
	# boots apart on a host whose speed drifts.  If plx_dma cannot be
	# removed (its code, after a stall), its remaining turns are lost,
	# and said.
	for rep in $(seq "$DEPTH_REPS"); do
		if modprobe rust_plx_dma; then
			depth_grid rust_plx_dma same-boot "$rep" 1
			rmmod rust_plx_dma
		else
			not_ok "modprobe rust_plx_dma"
		fi
		modprobe plx_dma || { not_ok "modprobe plx_dma"; break; }
		depth_bench plx_dma default "$rep" 1
		rmmod plx_dma || { not_ok "rmmod plx_dma after repetition $rep"; break; }
	done
	check "benchmarks ran" true
	finish
fi
for rep in $(seq "$REPS"); do
	for drv in plx_dma rust_plx_dma; do
		modprobe "$drv" || { not_ok "modprobe $drv"; continue; }
		for size in $SIZES; do dmatest_bench "$drv" "$size" "$rep"; done
		# The copy device refuses channels that cannot be terminated,
		# which the C plx_dma's are (no device_terminate_all).
		if [ "$drv" = rust_plx_dma ]; then
			uapi_bench "$drv" "$rep"
		fi
		if [ "$drv" = rust_plx_dma ]; then
			for size in $MEMCPY_SIZES; do
				mark="bench-memcpy-$size-$rep-$(date +%s)"
				echo "$mark" >/dev/kmsg
				modprobe rust_dma_memcpy size="$size" repeat="$(iters_for "$size")" &&
					rmmod rust_dma_memcpy
				dmesg | sed -n "/$mark/,\$p" |
					sed -n 's/.*bench size=\([0-9]*\) repeat=\([0-9]*\) dma_ns=\([0-9]*\) cpu_ns=\([0-9]*\).*/BENCH memcpy \1 '"$rep"' \2 \3 \4/p'
			done
		fi
		rmmod "$drv"
	done
done
# The deep-queue client on rust_plx_dma in each of its completion modes:
# the default (one interrupt per issued batch, reaped in softirq),
# per-descriptor interrupts reaped by the IRQ thread (what the C driver
# does, but with a thread), and polled. plx_dma's deep-queue runs have a
# boot of their own (C_DEPTH_ONLY=1, see bench.sh): its queue can stop
# moving for good on the emulated engine, and its channel release after
# such a stall is its own code.
for rep in $(seq "$DEPTH_REPS"); do
	for mode in default "irq_coalesce=1 irq_thread=1" "poll_us=50"; do
		full=0
		[ "$mode" = default ] && full=1
		modparams=
		[ "$mode" = default ] || modparams=$mode
		# shellcheck disable=SC2086
		modprobe rust_plx_dma $modparams || { not_ok "modprobe rust_plx_dma $modparams"; continue; }
		depth_bench rust_plx_dma "$(echo "$mode" | tr ' ' ',')" "$rep" "$full"
		sed 's/^/# rust_plx_dma '"$(echo "$mode" | tr ' ' ',')"' /' /sys/kernel/debug/rust_plx_dma-*/stats | tr '\n' ' '
		echo
		rmmod rust_plx_dma
	done
done
if [ "${PERFTEST:-1}" = 0 ]; then
	check "benchmarks ran" true
	finish
fi
# perftest: bandwidth of RDMA WRITE and READ (64 KiB, 1 MiB) and the
# latency of SEND, WRITE and READ (64 B), plx_rdma (its data moved by the
# engine, short copies by the CPU) against rxe, alternating, REPS times.
export PATH=/usr/bin:/usr/sbin:$PATH
/usr/sbin/ip link set lo up
perf_run() { # DEV TOOL ARGS...: one server/client pair on 127.0.0.1
	dev=$1 tool=$2
	shift 2
	"$tool" -d "$dev" "$@" >/tmp/perf-s.log 2>&1 &
	srv=$!
	sleep 2
	"$tool" -d "$dev" "$@" 127.0.0.1 >/tmp/perf-c.log 2>&1
	crc=$?
	wait "$srv"
	[ "$crc" -eq 0 ] || sed "s/^/# $dev $tool: /" /tmp/perf-c.log
	return "$crc"
}
# rxe first: it needs UDP port 4791 here, which plx_rdma takes when free
# (the loopback benchmarks never use it).
if modprobe rust_plx_dma && modprobe ib_uverbs && modprobe rdma_rxe &&
	rdma link add rxe0 type rxe netdev lo && modprobe plx_rdma ifindex=1; then
	# Both ports are RoCE on lo: each uses its IPv4-mapped GID of
	# 127.0.0.1, or else its first (link-local) one.
	gid_index() {
		i=$(grep -l 'ffff:7f00:0001' /sys/class/infiniband/"$1"/ports/1/gids/* 2>/dev/null |
			head -n 1 | sed 's|.*/||')
		echo "${i:-0}"
	}
	# perftest converts its cycle counts with a clock rate it calibrates
	# at start; when the calibration fails (its regression's r^2 below
	# 0.9, which a busy TCG host can cause) it divides by zero and prints
	# inf.  Such a run measured nothing: it is run again, up to three
	# times.  lat_run DEV LABEL TOOL SIZE REP
	lat_run() {
		# No inline data (READ has none): the payload crosses as a copy.
		inl="-I 0"
		[ "$3" = ib_read_lat ] && inl=
		for try in 1 2 3; do
			# shellcheck disable=SC2086
			perf_run "$1" "$3" $g -s "$4" -n 400 $inl || return 1
			lat=$(awk -v s="$4" '$1 == s && NF >= 6 { print $6 }' /tmp/perf-c.log)
			case $lat in
			'' | *inf* | *nan*)
				echo "# $1 $3: no latency (\"${lat}\", try $try):" \
					"$(grep -m 1 -i 'correlation\|conflicting' /tmp/perf-c.log)"
				;;
			*)
				echo "BENCH rdma $2 $3 $4 $5 $lat"
				return 0
				;;
			esac
		done
	}
	for rep in $(seq "$REPS"); do
		for dev in plx_rdma0 rxe0; do
			g="-x $(gid_index "$dev")"
			for t in ib_write_bw ib_read_bw; do
				for s in 65536 1048576; do
					n=400
					[ "$s" = 1048576 ] && n=50
					# shellcheck disable=SC2086
					perf_run "$dev" "$t" $g -s "$s" -n "$n" || continue
					# Columns: bytes, iterations, peak, average (MB/s).
					bw=$(awk -v s="$s" '$1 == s && NF >= 4 { print $4 }' /tmp/perf-c.log)
					case $bw in
					'' | *[!0-9.]*)
						echo "# $dev $t $s: no bandwidth in \"$(grep -m 1 "^ *$s " /tmp/perf-c.log)\""
						;;
					*) echo "BENCH rdma $dev $t $s $rep $bw" ;;
					esac
				done
			done
			for t in ib_send_lat ib_write_lat ib_read_lat; do
				lat_run "$dev" "$dev" "$t" 64 "$rep"
			done
		done
	done
	sed 's/^/# plx_rdma /' /sys/kernel/debug/plx_rdma/stats
	# Where the CPU should stop copying between regions and the engine
	# take over (copy_engine_min): ib_write_lat with every copy on the
	# engine, then every copy on the CPU, from 64 B to 64 KiB.
	g="-x $(gid_index plx_rdma0)"
	for mode in engine:0 cpu:4294967295; do
		rmmod plx_rdma && modprobe plx_rdma ifindex=1 copy_engine_min="${mode#*:}" || break
		for rep in $(seq "$REPS"); do
			for s in 64 1024 4096 16384 65536; do
				lat_run plx_rdma0 "plx_rdma0/${mode%%:*}" ib_write_lat "$s" "$rep"
			done
		done
	done
	rdma link delete rxe0
	rmmod rdma_rxe plx_rdma
	rmmod rust_plx_dma
else
	not_ok "plx_rdma and rxe0 for the RDMA benchmarks"
fi
check "benchmarks ran" true
finish
