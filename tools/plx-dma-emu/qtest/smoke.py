#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR Apache-2.0
"""Smoke test of plx-dma-emu against a real QEMU, without a guest kernel.

QEMU runs with the qtest accelerator: this script plays the CPU. It finds
the device on the PCI bus through ports 0xcf8/0xcfc, assigns the BARs,
enables bus mastering and MSI-X, writes descriptors into guest RAM, rings
the doorbell and checks copies, write-backs, the MSI-X message (the table
entry points into RAM, so QEMU's MSI-X write lands where we can read it)
and an error path. Every register access is a real vfio-user REGION_READ/
WRITE, every DMA a real DMA_READ/WRITE (or a mapped access with --mapped).

    qtest/smoke.py --emu target/release/plx-dma-emu [--mapped] [--iommu]
                   [--qemu 'qemu-system-x86_64'] [--dir DIR]

--qemu is split with shlex and may be a wrapper that runs QEMU elsewhere
(e.g. inside a chroot); the socket directory must be visible there at the
same path. Exit status 0 when every check passed.
"""

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time

BAR0 = 0xE000_0000
BAR2 = 0xE000_2000
RING = 0x10_0000
SRC = 0x20_0000
DST = 0x30_0000
MSI_ADDR = 0x40_0000

CTRL = 0x238
INTR_STATUS = 0x23E
CTRL_RESET_VAL = 0x1700
CTRL_START_VAL = 0x174C
VALID = 1 << 31
INT_WHEN_DONE = 1 << 30
WB_SUCCESS = 1 << 30
WB_RD_FAIL = 1 << 29

failures = 0


def check(desc, cond, detail=""):
    global failures
    if cond:
        print(f"ok - {desc}")
    else:
        failures += 1
        print(f"not ok - {desc}" + (f" ({detail})" if detail else ""))


class QTest:
    def __init__(self, argv, log):
        # Own process group: QEMU may run several exec levels down (a
        # chroot wrapper) and does not exit when the qtest stream closes.
        self.p = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
            bufsize=1,
            start_new_session=True,
        )

    def cmd(self, line):
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()
        while True:
            r = self.p.stdout.readline()
            if not r:
                raise RuntimeError(f"QEMU exited during '{line}'")
            r = r.strip()
            if r.startswith("IRQ"):
                continue
            if not r.startswith("OK"):
                raise RuntimeError(f"'{line}' -> {r}")
            return r[2:].strip()

    def outl(self, port, v):
        self.cmd(f"outl {port:#x} {v:#x}")

    def inl(self, port):
        return int(self.cmd(f"inl {port:#x}"), 16)

    def readl(self, a):
        return int(self.cmd(f"readl {a:#x}"), 16)

    def readw(self, a):
        return int(self.cmd(f"readw {a:#x}"), 16)

    def writel(self, a, v):
        self.cmd(f"writel {a:#x} {v:#x}")

    def writew(self, a, v):
        self.cmd(f"writew {a:#x} {v:#x}")

    def write(self, a, data):
        self.cmd(f"write {a:#x} {len(data):#x} 0x{data.hex()}")

    def read(self, a, n):
        return bytes.fromhex(self.cmd(f"read {a:#x} {n:#x}")[2:])

    def close(self):
        try:
            self.p.stdin.close()
        except OSError:
            pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.p.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.p.wait(timeout=10)
                break
            except subprocess.TimeoutExpired:
                continue


def cfg_addr(dev, reg):
    return 0x8000_0000 | (dev << 11) | (reg & 0xFC)


def cfg_read32(q, dev, reg):
    q.outl(0xCF8, cfg_addr(dev, reg))
    return q.inl(0xCFC)


def cfg_write32(q, dev, reg, v):
    q.outl(0xCF8, cfg_addr(dev, reg))
    q.outl(0xCFC, v)


def desc(src, dst, size, irq):
    flags = VALID | size | (INT_WHEN_DONE if irq else 0)
    return (
        flags.to_bytes(4, "little")
        + (dst >> 32).to_bytes(2, "little")
        + (src >> 32).to_bytes(2, "little")
        + (dst & 0xFFFF_FFFF).to_bytes(4, "little")
        + (src & 0xFFFF_FFFF).to_bytes(4, "little")
    )


def wait_wb(q, slot, timeout=20.0):
    t = time.time()
    while time.time() - t < timeout:
        w = q.readl(RING + slot * 16)
        if not w & VALID:
            return w
        time.sleep(0.01)
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--emu", required=True)
    ap.add_argument("--qemu", default="qemu-system-x86_64")
    ap.add_argument("--mapped", action="store_true")
    ap.add_argument("--iommu", action="store_true")
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()

    d = tempfile.mkdtemp(prefix="plx-qtest.", dir=a.dir)
    sock, ctl = os.path.join(d, "ch0.sock"), os.path.join(d, "ctl.sock")
    emu_log = open(os.path.join(d, "emu.log"), "w")
    qemu_log = open(os.path.join(d, "qemu.log"), "w")
    emu_argv = [a.emu, "--socket", sock, "--control", ctl, "--log-level", "debug"]
    if a.mapped:
        emu_argv.append("--mapped")
    emu = subprocess.Popen(emu_argv, stderr=emu_log)
    for _ in range(100):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    check("emulator created its socket", os.path.exists(sock))

    machine = "q35,memory-backend=mem"
    argv = shlex.split(a.qemu) + [
        "-machine", machine, "-accel", "qtest", "-qtest", "stdio",
        "-m", "256M", "-object", "memory-backend-memfd,id=mem,size=256M,share=on",
        "-display", "none", "-nodefaults", "-monitor", "none",
    ]
    if a.iommu:
        argv += ["-device", "intel-iommu,caching-mode=on"]
    argv += ["-device", '{"driver":"vfio-user-pci","socket":{"path":"%s","type":"unix"}}' % sock]
    q = QTest(argv, qemu_log)
    try:
        run(q, a, ctl)
    except Exception as e:  # report, then clean up
        check(f"no exception ({e})", False)
    finally:
        q.close()
        emu.terminate()
        try:
            rc = emu.wait(timeout=10)
        except subprocess.TimeoutExpired:
            emu.kill()
            rc = -9
        check("emulator exits with status 0 on SIGTERM", rc == 0, f"rc {rc}")
        check("emulator removed its sockets", not os.path.exists(sock) and not os.path.exists(ctl))
        print(f"# logs in {d}")
    print(f"{'FAIL' if failures else 'PASS'}: {failures} failed")
    return 1 if failures else 0


def run(q, a, ctl):
    dev = None
    for slot in range(32):
        if cfg_read32(q, slot, 0) == 0x87D0_10B5:
            dev = slot
            break
    check("device 10b5:87d0 found on bus 0", dev is not None)
    if dev is None:
        return
    check("class code 0x088000", cfg_read32(q, dev, 8) >> 8 == 0x088000)
    cfg_write32(q, dev, 0x10, 0xFFFF_FFFF)
    check("BAR0 sizes to 8 KiB", cfg_read32(q, dev, 0x10) & 0xFFFF_FFF0 == 0xFFFF_E000)
    cfg_write32(q, dev, 0x10, BAR0)
    cfg_write32(q, dev, 0x18, BAR2)
    cfg_write32(q, dev, 0x04, 0x0006)  # memory space + bus master
    check("CTRL reads 0 after power-on", q.readl(BAR0 + CTRL) == 0)

    # MSI-X: table entry 0 -> a RAM address, then enable.
    q.writel(BAR2 + 0, MSI_ADDR)
    q.writel(BAR2 + 4, 0)
    q.writel(BAR2 + 8, 0xCAFE)
    q.writel(BAR2 + 12, 0)
    ctrl = cfg_read32(q, dev, 0x50)
    cfg_write32(q, dev, 0x50, ctrl | (1 << 31))  # MSI-X enable (bit 15 of the control word)
    q.writel(MSI_ADDR, 0)

    # alloc_chan_resources
    q.writel(BAR0 + CTRL, CTRL_RESET_VAL)
    q.writel(BAR0 + 0x214, RING)
    q.writel(BAR0 + 0x218, 0)
    q.writel(BAR0 + 0x21C, RING)
    q.writel(BAR0 + 0x220, 64)
    q.writel(BAR0 + 0x234, 8)
    check("ring registers read back", q.readl(BAR0 + 0x220) == 64 and q.readl(BAR0 + 0x214) == RING)

    data = bytes((i * 7 + 3) & 0xFF for i in range(8192))
    q.write(SRC, data)
    q.write(RING, desc(SRC, DST, 8192, True))
    q.writew(BAR0 + CTRL, CTRL_START_VAL)
    w = wait_wb(q, 0)
    check("descriptor written back with SUCCESS | 8192", w == WB_SUCCESS | 8192, f"{w}")
    check("destination matches source", q.read(DST, 8192) == data)
    msi = 0
    t = time.time()
    while time.time() - t < 5 and msi != 0xCAFE:
        msi = q.readl(MSI_ADDR)
    check("MSI-X message delivered (data 0xCAFE at the table address)", msi == 0xCAFE, f"{msi:#x}")
    st = q.readw(BAR0 + INTR_STATUS)
    check("INTR_STATUS shows DESC_DONE", st & 4 != 0, f"{st:#x}")
    q.writew(BAR0 + INTR_STATUS, st)
    check("INTR_STATUS write-1-to-clear", q.readw(BAR0 + INTR_STATUS) == 0)

    # A source outside guest RAM: QEMU refuses the DMA, the engine writes
    # back RD_FAIL (on the mapped path the table misses and the read goes to
    # QEMU as a message all the same).
    q.write(RING + 16, desc(0x7000_0000_0000, DST, 512, True))
    q.write(RING + 32, desc(SRC, DST + 0x10000, 4096, True))
    q.writew(BAR0 + CTRL, CTRL_START_VAL)
    w1, w2 = wait_wb(q, 1), wait_wb(q, 2)
    check("bad source address -> RD_FAIL write-back", w1 == WB_RD_FAIL, f"{w1}")
    check("engine continues after the fault", w2 == WB_SUCCESS | 4096, f"{w2}")

    # Two bursts of small descriptors, the second across the ring end.
    slot, total = 3, 3
    for burst in range(2):
        n = 40
        t = time.time()
        for i in range(n):
            k = burst * n + i
            q.write(RING + slot * 16, desc(SRC + k * 64, DST + 0x20000 + k * 64, 64, i == n - 1))
            slot = (slot + 1) % 64
        q.writew(BAR0 + CTRL, CTRL_START_VAL)
        last = wait_wb(q, (slot + 63) % 64)
        total += n
        check(f"burst {burst}: {n} descriptors complete", last == WB_SUCCESS | 64, f"{last}")
        print(f"# burst {burst}: {n} x 64 B in {time.time() - t:.3f} s (includes qtest writes)")
    check("their data is right", q.read(DST + 0x20000, 80 * 64) == data[: 80 * 64])

    # Teardown handshake of __plx_dma_stop.
    q.writel(BAR0 + CTRL, CTRL_RESET_VAL | 1)
    done = False
    t = time.time()
    while time.time() - t < 1.0:
        if q.readl(BAR0 + CTRL) & (1 << 9):
            done = True
            break
    check("graceful pause completes within the driver's 1 s", done)

    stats = subprocess.run([a.emu, "ctl", "--control", ctl, "stats", "0"], capture_output=True, text=True)
    kv = dict(l.split("=", 1) for l in stats.stdout.splitlines() if "=" in l)
    print("# " + " ".join(f"{k}={kv.get(k)}" for k in ("descriptors", "bytes", "errors", "interrupts", "dma_messages", "dma_client_errors", "mapped_misses")))
    check("ctl stats answers ok", stats.returncode == 0 and kv.get("connected") == "1")
    check(f"{total} descriptors counted", kv.get("descriptors") == str(total), kv.get("descriptors"))
    check("one client error reply (the refused source read)", kv.get("dma_client_errors") == "1")
    if a.mapped:
        check("mapped path: one DMA message, for the missed source", kv.get("dma_messages") == "1", kv.get("dma_messages"))
        check("mapped path: the miss was counted", int(kv.get("mapped_misses", "0")) >= 1, kv.get("mapped_misses"))

    # Surprise removal: the emulator closes the socket; QEMU keeps running
    # and register reads return all-ones, as for a device that fell off the
    # bus. (QEMU 11.1 aborts later, at the next DMA map change for the
    # device, e.g. at reboot: "vfio: DMA mapping failed".)
    v = subprocess.run([a.emu, "ctl", "--control", ctl, "fault", "0", "vanish"], capture_output=True, text=True)
    check("ctl fault 0 vanish answers ok", v.returncode == 0, v.stdout + v.stderr)
    time.sleep(0.5)
    check("registers read all-ones after vanish", q.readl(BAR0 + CTRL) == 0xFFFF_FFFF)


if __name__ == "__main__":
    sys.exit(main())
