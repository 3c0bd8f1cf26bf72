// SPDX-License-Identifier: GPL-2.0
/*
 * plx_kprofile PERIOD_NS TOP COMMAND [ARG...]: where the guest kernel spends
 * its CPU time while COMMAND runs.
 *
 * TCG has no PMU, so this samples the software cpu-clock event (an hrtimer)
 * on every online CPU, kernel side only, every PERIOD_NS of busy time, and
 * prints the TOP kernel functions by sample count, symbolized with
 * /proc/kallsyms once COMMAND has ended (so that a module COMMAND loaded is
 * named too).  A sample that falls while interrupts are masked is taken
 * when they come back on: time spent under an IRQ-disabling lock shows on
 * the unlock.
 *
 * Output, one line per function, after a total:
 *   PROFILE total=<samples> lost=<samples>
 *   PROFILE <samples> <percent> <function>
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_CPUS	64
#define RING_PAGES	64		/* per CPU, a power of two */
#define MAX_SAMPLES	(1u << 22)

struct sym {
	uint64_t addr;
	uint64_t hits;
	char name[128];
};

static uint64_t *ips;
static size_t nips;
static uint64_t lost;

/* Moves the samples the kernel wrote into @ring out of it. */
static void drain(struct perf_event_mmap_page *ring, size_t page)
{
	const char *data = (const char *)ring + page;
	size_t size = RING_PAGES * page;
	uint64_t head = __atomic_load_n(&ring->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = ring->data_tail;

	while (tail < head) {
		struct perf_event_header h;
		uint64_t ip;

		memcpy(&h, data + tail % size, sizeof(h));
		if (h.type == PERF_RECORD_SAMPLE) {
			/* Records are 8-aligned: no 8-byte word wraps. */
			memcpy(&ip, data + (tail + sizeof(h)) % size, sizeof(ip));
			if (nips < MAX_SAMPLES)
				ips[nips++] = ip;
			else
				lost++;
		} else if (h.type == PERF_RECORD_LOST) {
			uint64_t n;

			/* The body is { id, lost }: the second word. */
			memcpy(&n, data + (tail + sizeof(h) + 8) % size, sizeof(n));
			lost += n;
		}
		tail += h.size;
	}
	__atomic_store_n(&ring->data_tail, tail, __ATOMIC_RELEASE);
}

static int by_addr(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static int by_hits(const void *a, const void *b)
{
	const struct sym *x = a, *y = b;

	return x->hits < y->hits ? 1 : x->hits > y->hits ? -1 : 0;
}

/* The kernel's text symbols, sorted by address; NULL if unreadable. */
static struct sym *read_kallsyms(size_t *n)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	struct sym *syms = NULL;
	size_t cap = 0;
	char line[512];

	*n = 0;
	if (!f)
		return NULL;
	while (fgets(line, sizeof(line), f)) {
		unsigned long long addr;
		char type, name[256];

		if (sscanf(line, "%llx %c %255s", &addr, &type, name) != 3 ||
		    (type != 't' && type != 'T') || !addr)
			continue;
		if (*n == cap) {
			cap = cap ? 2 * cap : 65536;
			syms = realloc(syms, cap * sizeof(*syms));
			if (!syms)
				break;
		}
		syms[*n].addr = addr;
		syms[*n].hits = 0;
		snprintf(syms[*n].name, sizeof(syms[*n].name), "%.127s", name);
		(*n)++;
	}
	fclose(f);
	if (syms)
		qsort(syms, *n, sizeof(*syms), by_addr);
	return syms;
}

int main(int argc, char **argv)
{
	struct perf_event_attr attr = {
		.type = PERF_TYPE_SOFTWARE,
		.size = sizeof(attr),
		.config = PERF_COUNT_SW_CPU_CLOCK,
		.sample_type = PERF_SAMPLE_IP,
		.exclude_user = 1,
		.exclude_idle = 1,
	};
	struct perf_event_mmap_page *rings[MAX_CPUS];
	size_t page = sysconf(_SC_PAGESIZE), nsyms, i, unknown = 0;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned long top;
	struct sym *syms;
	int ncpu = 0, status;
	pid_t pid;

	if (argc < 4) {
		fprintf(stderr, "usage: %s PERIOD_NS TOP COMMAND [ARG...]\n", argv[0]);
		return 2;
	}
	attr.sample_period = strtoull(argv[1], NULL, 0);
	top = strtoul(argv[2], NULL, 0);
	if (!attr.sample_period || !top) {
		fprintf(stderr, "%s: PERIOD_NS and TOP must be positive\n", argv[0]);
		return 2;
	}
	ips = malloc(MAX_SAMPLES * sizeof(*ips));
	if (!ips)
		return 1;
	for (; ncpu < cpus && ncpu < MAX_CPUS; ncpu++) {
		int fd = syscall(SYS_perf_event_open, &attr, -1, ncpu, -1, 0);

		if (fd < 0) {
			fprintf(stderr, "perf_event_open on CPU %d: %s\n", ncpu, strerror(errno));
			return 1;
		}
		rings[ncpu] = mmap(NULL, (RING_PAGES + 1) * page, PROT_READ | PROT_WRITE,
				   MAP_SHARED, fd, 0);
		if (rings[ncpu] == MAP_FAILED) {
			fprintf(stderr, "mmap of the sample ring: %s\n", strerror(errno));
			return 1;
		}
	}
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid) {
		execvp(argv[3], argv + 3);
		_exit(127);
	}
	/* Drained often enough that a ring never fills at 50k samples/s. */
	for (;;) {
		for (i = 0; i < (size_t)ncpu; i++)
			drain(rings[i], page);
		if (waitpid(pid, &status, WNOHANG) == pid)
			break;
		usleep(2000);
	}
	for (i = 0; i < (size_t)ncpu; i++)
		drain(rings[i], page);
	syms = read_kallsyms(&nsyms);
	if (!syms || !nsyms) {
		fprintf(stderr, "no symbols in /proc/kallsyms (kptr_restrict?)\n");
		return 1;
	}
	for (i = 0; i < nips; i++) {
		size_t lo = 0, hi = nsyms;

		if (ips[i] < syms[0].addr) {
			unknown++;
			continue;
		}
		while (hi - lo > 1) {
			size_t mid = lo + (hi - lo) / 2;

			if (syms[mid].addr <= ips[i])
				lo = mid;
			else
				hi = mid;
		}
		syms[lo].hits++;
	}
	qsort(syms, nsyms, sizeof(*syms), by_hits);
	printf("PROFILE total=%zu lost=%llu unknown=%zu\n", nips,
	       (unsigned long long)lost, unknown);
	for (i = 0; i < top && i < nsyms && syms[i].hits; i++)
		printf("PROFILE %llu %.1f %s\n", (unsigned long long)syms[i].hits,
		       100.0 * syms[i].hits / (nips ? nips : 1), syms[i].name);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 1;
}
