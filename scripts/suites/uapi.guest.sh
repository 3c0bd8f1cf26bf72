# SPDX-License-Identifier: GPL-2.0
# Guest half of suite "uapi": load rust_plx_dma on five emulated channels
# and plx_dma_copy, name the special channels for the kselftests (2 fails
# reads, 3 stalls, 4 is busy past a graceful pause, 1 is unbound and bound
# again) and run them. Each
# kselftest result becomes a test point; a skipped kselftest is a failure
# here, since every channel it needs is given.
. /guest/lib.sh
. /guest/dmatest.sh # pci_of stat_of

# Small enough that the pin-bound test reaches a file's share (half of it)
# with a few 4 MiB copies; the share is large enough for one 16 MiB copy
# (4096 + 4096 pages, plus two).
MAX_PINNED=20000

check "modprobe rust_plx_dma" modprobe rust_plx_dma
check "plx_dma_copy refuses max_pinned_pages=0 (EINVAL, message, not loaded)" \
	load_refused plx_dma_copy max_pinned_pages=0 "plx_dma_copy: max_pinned_pages=0 is invalid"
check "modprobe plx_dma_copy max_pinned_pages=$MAX_PINNED" modprobe plx_dma_copy max_pinned_pages=$MAX_PINNED
check "/dev/plx-dma-copy exists" test -c /dev/plx-dma-copy

# The emulator's channels are on the bus in order, and rust_plx_dma probes
# and numbers them in bus order: channel N is dmaNchan0.
for n in 0 1 2 3 4; do
	echo "# dma${n}chan0: $(pci_of $n)"
done
c_fn=$(pci_of 1) # later given to the C plx_dma
export PLX_DMA_CHAN=dma0chan0 PLX_DMA_UNBIND_CHAN=dma1chan0
export PLX_DMA_FAULT_CHAN=dma2chan0 PLX_DMA_STALL_CHAN=dma3chan0
export PLX_DMA_BUSY_CHAN=dma4chan0
export PLX_DMA_BAD_CALLS=${BAD_CALLS:-5000}

out=/tmp/plx_dma_copy_test.tap
rc=0
# The one test that needs a refused channel runs further down, once per
# kind of provider the copy device must refuse.
/usr/local/bin/plx_dma_copy_test -T attach_refuses_unsafe_provider >"$out" 2>&1 || rc=$?
sed 's/^/# /' "$out"
kselftest_points "$out"
check "kselftest harness exit status 0 (saw $rc)" test "$rc" -eq 0
check "kselftest totals: no failure, no skip" grep -q '^# Totals: pass:[1-9][0-9]* fail:0 xfail:0 xpass:0 skip:0 error:0' "$out"

# The user-buffer copies really went through the engine: the counters of
# the channels the kselftests used moved.
for n in 0 2 3; do
	f=$(pci_of $n)
	sed "s/^/# dma${n} $f: /" "/sys/kernel/debug/rust_plx_dma-$f/stats"
done
sub=$(stat_of "$(pci_of 0)" submitted)
# The threads test alone makes 320 copies of one descriptor or more.
check "dma0 took the kselftests' descriptors (submitted=$sub)" test "${sub:-0}" -ge 320
# A plain C dmaengine client calls tx_status, terminate_async and prep +
# submit from its own completion callbacks on a rust_plx_dma channel. (On
# the C plx_dma the first and last deadlock: it runs callbacks under the
# ring lock its tx_status and prep take, so that is not run here.)
callbacks_reentrant() {
	mark="callbacks-$(date +%s)"
	echo "$mark" >/dev/kmsg
	loaded=0
	modprobe plx_callback_client channel=dma0chan0 || loaded=$?
	rmmod plx_callback_client 2>/dev/null
	dmesg | sed -n "/$mark/,\$p" | sed -n 's/^\[[^]]*\] plx_callback_client: /# /p'
	test "$loaded" -eq 0 &&
		test "$(dmesg | sed -n "/$mark/,\$p" | grep -c 'plx_callback_client: ok ')" -eq 6
}
check "callbacks on dma0chan0 poll, terminate and resubmit on their own channel; a descriptor submitted twice is refused the second time and completes once; prep and issue_pending with interrupts off are refused; terminate_async with interrupts off and from a hard interrupt stops the copies before it and runs the one after" callbacks_reentrant
# The benchmark tool of `make bench` works (its numbers mean little here).
line=$(/usr/local/bin/plx_dma_copy_bench 65536 64 1 2>&1)
echo "$line" | sed 's/^/# /'
check "plx_dma_copy_bench reports the copies one at a time, batched and by the CPU" sh -c "echo '$line' | grep -qE '^BENCH uapi 65536 1 64 [0-9]+ [0-9]+ [0-9]+\$'"
check "plx_dma_copy_bench reports the batched copies between registered regions" sh -c "echo '$line' | grep -qE '^BENCH uapi registered 65536 1 64 [0-9]+\$'"
# The C plx_dma has no device_terminate_all: the copy device must refuse
# its channel rather than unpin pages that engine may still write.
give_to_c_driver() {
	echo "$c_fn" >/sys/bus/pci/drivers/rust_plx_dma/unbind &&
		modprobe plx_dma &&
		test "$(basename "$(readlink "/sys/bus/pci/devices/$c_fn/driver")")" = plx_dma
}
check "the C plx_dma takes $c_fn" give_to_c_driver
c_chan=$(ls "/sys/bus/pci/devices/$c_fn/dma" 2>/dev/null | head -n 1)
echo "# C plx_dma channel: ${c_chan:-none}"
# refused_chan LABEL CHANNEL: the kselftest that asks for CHANNEL by name
# and expects EOPNOTSUPP, one pass and no skip.
refused_chan() {
	local out=/tmp/plx_dma_copy_test_$1.tap rc=0
	PLX_DMA_REFUSED_CHAN=$2 /usr/local/bin/plx_dma_copy_test \
		-t attach_refuses_unsafe_provider >"$out" 2>&1 || rc=$?
	sed 's/^/# /' "$out"
	kselftest_points "$out"
	check "kselftest on the $1 channel $2: exit status 0 (saw $rc)" test "$rc" -eq 0
	check "kselftest on the $1 channel $2: one pass, nothing skipped" \
		grep -q '^# Totals: pass:1 fail:0 xfail:0 xpass:0 skip:0 error:0' "$out"
}
refused_chan "C plx_dma (no terminate)" "$c_chan"
# A provider that can terminate but has no device_release frees its
# channels when it goes, held or not: the copy device must refuse it too.
check "modprobe plx_norelease_provider" modprobe plx_norelease_provider
nr_chan=$(ls /sys/devices/faux/plx_norelease_provider/dma 2>/dev/null | head -n 1)
echo "# plx_norelease_provider channel: ${nr_chan:-none}"
refused_chan "no-release provider" "$nr_chan"
check "rmmod plx_norelease_provider" rmmod plx_norelease_provider
# A Rust provider that misuses its descriptor handles (a callback kept past
# its client's release, handles dropped under a held descriptor) must reach
# neither freed memory nor a client that let go.
check "modprobe rust_misuse_provider" modprobe rust_misuse_provider
stale_chan=$(ls /sys/devices/faux/rust_misuse_provider/dma 2>/dev/null | sed -n 1p)
drop_chan=$(ls /sys/devices/faux/rust_misuse_provider/dma 2>/dev/null | sed -n 2p)
echo "# rust_misuse_provider channels: ${stale_chan:-none} ${drop_chan:-none}"
mark="misuse-client-$RANDOM"
echo "$mark" >/dev/kmsg
loaded=0
modprobe plx_misuse_client stale_channel="$stale_chan" drop_channel="$drop_chan" || loaded=$?
rmmod plx_misuse_client 2>/dev/null
dmesg | sed -n "/$mark/,\$p" | sed -n 's/^\[[^]]*\] plx_misuse_client: /# /p'
check "misuse client: loads (exit $loaded)" test "$loaded" -eq 0
misuse_log=$(dmesg | sed -n "/$mark/,\$p")
check "misuse client: both cases ok, none not ok" \
	test "$(echo "$misuse_log" | grep -c 'plx_misuse_client: ok [12] ')" -ge 2 -a \
	"$(echo "$misuse_log" | grep -c 'plx_misuse_client: not ok')" -eq 0
check "rmmod rust_misuse_provider" rmmod rust_misuse_provider
check "rmmod plx_dma_copy" rmmod plx_dma_copy
check "rmmod rust_plx_dma" rmmod rust_plx_dma
finish
