// SPDX-License-Identifier: GPL-2.0
/*
 * roce_capture: prints the RoCEv2 datagrams a netdev carries, layer by
 * layer (IPv4, UDP, BTH, the extended headers, payload, ICRC checked).
 *
 *   roce_capture IFACE COUNT [SECONDS]
 *
 * Takes the first COUNT IPv4 datagrams to UDP port 4791 that this host
 * receives on IFACE ("any": on every netdev) within SECONDS (10 by default), and decodes each.  A
 * raw IPv4 socket of protocol UDP sees a copy of every UDP datagram
 * delivered locally, IP header included, before UDP hands it to the RoCE
 * stack's socket; it needs no packet socket support in the kernel, and
 * sees what arrives, not what leaves.  (Datagrams between two addresses
 * of this host arrive through the loopback device but are counted as
 * received on the netdev the sender routed them by: use "any" for them.)  Exits 0 if it saw COUNT, each with
 * a valid ICRC; 1 otherwise.  Needs CAP_NET_RAW.
 *
 * The decoder is written from the IBA's tables (volume 1, 9.2 and annex
 * 17), independently of any RDMA device's code.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define ROCE_PORT 4791

/* Extended headers an opcode carries after the BTH. */
enum { RETH = 1, AETH = 2, IMM = 4, DETH = 8 };

struct opcode {
	uint8_t code;
	const char *name;
	int headers;
};

static const struct opcode opcodes[] = {
	{ 0x00, "RC SEND FIRST", 0 },
	{ 0x01, "RC SEND MIDDLE", 0 },
	{ 0x02, "RC SEND LAST", 0 },
	{ 0x03, "RC SEND LAST with immediate", IMM },
	{ 0x04, "RC SEND ONLY", 0 },
	{ 0x05, "RC SEND ONLY with immediate", IMM },
	{ 0x06, "RC RDMA WRITE FIRST", RETH },
	{ 0x07, "RC RDMA WRITE MIDDLE", 0 },
	{ 0x08, "RC RDMA WRITE LAST", 0 },
	{ 0x09, "RC RDMA WRITE LAST with immediate", IMM },
	{ 0x0a, "RC RDMA WRITE ONLY", RETH },
	{ 0x0b, "RC RDMA WRITE ONLY with immediate", RETH | IMM },
	{ 0x0c, "RC RDMA READ REQUEST", RETH },
	{ 0x0d, "RC RDMA READ RESPONSE FIRST", AETH },
	{ 0x0e, "RC RDMA READ RESPONSE MIDDLE", 0 },
	{ 0x0f, "RC RDMA READ RESPONSE LAST", AETH },
	{ 0x10, "RC RDMA READ RESPONSE ONLY", AETH },
	{ 0x11, "RC ACKNOWLEDGE", AETH },
	{ 0x64, "UD SEND ONLY", DETH },
	{ 0x65, "UD SEND ONLY with immediate", DETH | IMM },
};

static const struct opcode *opcode_of(uint8_t code)
{
	for (size_t i = 0; i < sizeof(opcodes) / sizeof(opcodes[0]); i++)
		if (opcodes[i].code == code)
			return &opcodes[i];
	return NULL;
}

static uint32_t be(const uint8_t *p, int n)
{
	uint32_t v = 0;

	while (n--)
		v = v << 8 | *p++;
	return v;
}

/* zlib's CRC-32, bit by bit. */
static uint32_t crc32_update(uint32_t crc, const uint8_t *p, size_t len)
{
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0xedb88320 : crc >> 1;
	}
	return crc;
}

/*
 * The ICRC of a RoCEv2 datagram (IPv4 header of 20 bytes) whose last four
 * bytes hold it: CRC-32 over eight bytes of ones, the IP and UDP headers
 * and the BTH with TOS, TTL, both checksums and BTH byte 4 as ones, then
 * the rest up to the ICRC.
 */
static uint32_t icrc_of(const uint8_t *ip, size_t len)
{
	static const uint8_t ones[8] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	uint8_t masked[20 + 8 + 12];
	uint32_t crc;

	memcpy(masked, ip, sizeof(masked));
	masked[1] = 0xff;
	masked[8] = 0xff;
	masked[10] = masked[11] = 0xff;
	masked[26] = masked[27] = 0xff;
	masked[32] = 0xff;
	crc = crc32_update(0xffffffff, ones, sizeof(ones));
	crc = crc32_update(crc, masked, sizeof(masked));
	crc = crc32_update(crc, ip + sizeof(masked), len - sizeof(masked) - 4);
	return ~crc;
}

/* Decodes one datagram; whether it is RoCEv2 with a valid ICRC. */
static int decode(int n, const uint8_t *ip, size_t len)
{
	char src[INET_ADDRSTRLEN], dst[INET_ADDRSTRLEN];
	const uint8_t *udp = ip + 20, *bth = udp + 8, *p;
	const struct opcode *op;
	size_t pad, payload;
	uint32_t icrc, want;

	if (len < 20 + 8 + 12 + 4) {
		printf("datagram %d: %zu bytes, too short for RoCEv2\n", n, len);
		return 0;
	}
	inet_ntop(AF_INET, ip + 12, src, sizeof(src));
	inet_ntop(AF_INET, ip + 16, dst, sizeof(dst));
	printf("datagram %d: %zu bytes\n", n, len);
	printf("  IPv4  %s -> %s, TOS 0x%02x, TTL %u, id 0x%04x%s, total length %u\n",
	       src, dst, ip[1], ip[8], be(ip + 4, 2), ip[6] & 0x40 ? ", DF" : "", be(ip + 2, 2));
	printf("  UDP   port %u -> %u, length %u, checksum 0x%04x\n",
	       be(udp, 2), be(udp + 2, 2), be(udp + 4, 2), be(udp + 6, 2));
	op = opcode_of(bth[0]);
	pad = (bth[1] >> 4) & 3;
	printf("  BTH   opcode 0x%02x (%s), SE %u, M %u, pad %zu, version %u, P_Key 0x%04x,\n"
	       "        destination QP 0x%06x, AckReq %u, PSN 0x%06x (%u)\n",
	       bth[0], op ? op->name : "unknown", bth[1] >> 7, (bth[1] >> 6) & 1, pad,
	       bth[1] & 15, be(bth + 2, 2), be(bth + 5, 3), bth[8] >> 7, be(bth + 9, 3),
	       be(bth + 9, 3));
	p = bth + 12;
	if (op && op->headers & DETH) {
		printf("  DETH  Q_Key 0x%08x, source QP 0x%06x\n", be(p, 4), be(p + 5, 3));
		p += 8;
	}
	if (op && op->headers & RETH) {
		printf("  RETH  virtual address 0x%016llx, R_Key 0x%08x, DMA length %u\n",
		       (unsigned long long)be(p, 4) << 32 | be(p + 4, 4), be(p + 8, 4),
		       be(p + 12, 4));
		p += 16;
	}
	if (op && op->headers & AETH) {
		printf("  AETH  syndrome 0x%02x, MSN 0x%06x\n", p[0], be(p + 1, 3));
		p += 4;
	}
	if (op && op->headers & IMM) {
		printf("  ImmDt 0x%08x\n", be(p, 4));
		p += 4;
	}
	if ((size_t)(p - ip) + pad + 4 > len) {
		printf("  (headers run past the datagram)\n");
		return 0;
	}
	payload = len - (p - ip) - pad - 4;
	printf("  payload %zu bytes:", payload);
	for (size_t i = 0; i < payload && i < 16; i++)
		printf(" %02x", p[i]);
	printf("%s\n", payload > 16 ? " ..." : "");
	icrc = ip[len - 4] | ip[len - 3] << 8 | ip[len - 2] << 16 | (uint32_t)ip[len - 1] << 24;
	want = icrc_of(ip, len);
	printf("  ICRC  0x%08x, %s\n", icrc, icrc == want ? "valid" : "INVALID");
	return icrc == want;
}

int main(int argc, char **argv)
{
	int count, seconds = 10, seen = 0, valid = 0, s;
	uint8_t buf[65536];
	time_t end;

	if (argc < 3 || (count = atoi(argv[2])) <= 0) {
		fprintf(stderr, "usage: %s IFACE COUNT [SECONDS]\n", argv[0]);
		return 2;
	}
	if (argc > 3)
		seconds = atoi(argv[3]);
	s = socket(AF_INET, SOCK_RAW, IPPROTO_UDP);
	if (s < 0 || (strcmp(argv[1], "any") &&
		      setsockopt(s, SOL_SOCKET, SO_BINDTODEVICE, argv[1], strlen(argv[1]) + 1))) {
		perror(s < 0 ? "raw socket" : argv[1]);
		return 2;
	}
	/* Said once listening, so that a caller can start the traffic. */
	fprintf(stderr, "roce_capture: listening on %s\n", argv[1]);
	end = time(NULL) + seconds;
	while (seen < count && time(NULL) < end) {
		struct pollfd pfd = { .fd = s, .events = POLLIN };
		ssize_t n;

		if (poll(&pfd, 1, 200) <= 0)
			continue;
		n = recv(s, buf, sizeof(buf), 0);
		if (n < 28 || (buf[0] >> 4) != 4 || (buf[0] & 15) != 5 || be(buf + 22, 2) != ROCE_PORT)
			continue;
		seen++;
		valid += decode(seen, buf, (size_t)n);
	}
	close(s);
	printf("%d RoCEv2 datagrams, %d with a valid ICRC\n", seen, valid);
	return seen == count && valid == count ? 0 : 1;
}
