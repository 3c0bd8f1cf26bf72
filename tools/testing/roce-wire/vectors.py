#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Independent RoCEv2 ICRC vectors for src/tests/icrc.rs.

Builds two RoCEv2 datagrams (IPv4 and IPv6, an RDMA WRITE ONLY with 5
bytes of payload) with struct, and computes their IP checksum and ICRC
with zlib.crc32 over the masked bytes, as the IBA annex 17 and rdma_rxe's
rxe_icrc.c describe. Prints them as Rust arrays; the Rust tests check that
the codec builds the same bytes. Nothing here shares code with the codec.
"""
import struct
import zlib


def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    while s > 0xFFFF:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def transport(becn):
    payload = b"hello"
    pad = (-len(payload)) % 4
    # BTH: RC RDMA WRITE ONLY, pad, P_Key ffff, BECN, QP 0x11, AckReq, PSN.
    bth = struct.pack("!BBHII", 0x0A, pad << 4, 0xFFFF,
                      (0x40000000 if becn else 0) | 0x11, 0x80000000 | 0x123456)
    reth = struct.pack("!QII", 0x1000, 0x2345, len(payload))
    return bth + reth + payload + b"\0" * pad


def icrc(ip_udp_masked, body):
    masked_bth = body[:4] + b"\xff" + body[5:12]
    return zlib.crc32(b"\xff" * 8 + ip_udp_masked + masked_bth + body[12:])


def v4(becn):
    body = transport(becn)
    udp_len = 8 + len(body) + 4
    total = 20 + udp_len
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0x02, total, 0x1234, 0x4000, 64, 17, 0,
                     bytes([192, 168, 122, 10]), bytes([192, 168, 122, 11]))
    ip = ip[:10] + struct.pack("!H", csum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", 0xC0DE, 4791, udp_len, 0)
    masked = bytearray(ip + udp)
    for i in (1, 8, 10, 11, 26, 27):
        masked[i] = 0xFF
    crc = icrc(bytes(masked), body)
    return ip + udp + body + struct.pack("<I", crc), crc


def v6():
    body = transport(False)
    udp_len = 8 + len(body) + 4
    first = (6 << 28) | (0x12 << 20) | 0xABCDE
    src = bytes([0xFE, 0x80] + [0] * 13 + [1])
    dst = bytes([0xFE, 0x80] + [0] * 13 + [2])
    ip = struct.pack("!IHBB16s16s", first, udp_len, 17, 64, src, dst)
    udp = struct.pack("!HHHH", 0xC0DE, 4791, udp_len, 0)
    masked = bytearray(ip + udp)
    masked[0] |= 0x0F
    for i in (1, 2, 3, 7, 46, 47):
        masked[i] = 0xFF
    crc = icrc(bytes(masked), body)
    return ip + udp + body + struct.pack("<I", crc), crc


def show(name, pkt, crc):
    print("/// ICRC %#010x" % crc)
    print("const %s: [u8; %d] = [" % (name, len(pkt)))
    for i in range(0, len(pkt), 12):
        print("    " + " ".join("0x%02x," % b for b in pkt[i:i + 12]))
    print("];")


if __name__ == "__main__":
    p4, c4 = v4(False)
    p4b, c4b = v4(True)
    assert c4 == c4b, "BECN must not change the ICRC"
    show("ROCE_V4", p4, c4)
    show("ROCE_V6", *v6())
    # The IBA sample packet (LRH, BTH, RETH, 14 bytes of payload, pad)
    # with its variant fields already masked, as quoted on linux-rdma.
    sample = bytes.fromhex(
        "f012375c000e17d20a202487ff87b1b3000dec2a01710a1c015d400238f27a05"
        "0000000ebb884d85fd5cfba4728bc0690ed40000")
    print("// IBA sample: %#010x" % zlib.crc32(sample))
