// SPDX-License-Identifier: MIT
/*
 * sleepclient.c - a program whose memory ctl.sh puts to sleep and wakes
 * from outside (vmmx-run --control, vmmx-run --ctl), linked against the
 * fake runtime (fakecuda.c) and run under vmmx-run on the sim backend.
 *
 * It allocates on device 0 a 64 MiB allocation (a segment of its own), a
 * 6 MiB one (the large pool) and 16 of 64 KiB (the small pool), of which
 * it frees 2 (their segment then has free blocks), and 96 MiB on device 1;
 * writes a pattern of its own into each (vmmx_memcpy on the allocator's
 * context: the sim's device memory is not the CPU's), prints "ready BYTES
 * copies=C0,C1 syncs=S0,S1" (the driver copies and syncs each device's
 * context made so far: a test aims its injected faults past them), then
 * idles, reading commands on standard input, one a line:
 *   check    read every allocation back and compare: "check ok" or
 *            "check bad: ..."
 *   fill     write the patterns again (after a discard)
 *   alloc    cudaMalloc 1 MiB on device 0, write and read it, cudaFree it:
 *            "allocating", then "allocated ok" (or "allocated failed ...")
 *   churn    start CHURN_THREADS threads that allocate and free (64 KiB,
 *            1 MiB, 12 MiB: the three pools) without touching the memory,
 *            on device 0, until "stop": "churning"
 *   stop     stop them: "stopped iterations=N failures=F"
 *   quit     free everything: "bye", exit 0
 * Every answer is one line, flushed.  The pre-sleep frees are stream-
 * ordered (cudaFreeAsync): a cudaFree would wait for the device (a sync)
 * before the test's faults are aimed.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/preload/fakecuda.h"
#include "vmmx.h"

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)
#define CHURN_THREADS 4

struct a {
	int dev;
	size_t size;
	void *p;
	int freed;
};

static struct a all[] = {
	{ 0, 64 * MiB, NULL, 0 }, { 0, 6 * MiB, NULL, 0 },
	{ 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 },
	{ 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 },
	{ 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 },
	{ 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 },
	{ 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 }, { 0, 64 * KiB, NULL, 0 },
	{ 0, 64 * KiB, NULL, 0 }, { 1, 96 * MiB, NULL, 0 },
};
#define NALL (sizeof(all) / sizeof(all[0]))

static unsigned char buf[96 * MiB];

static struct vmmx_ctx *ctx_of(int dev)
{
	struct vmmx_alloc *a;

	return vmmx_alloc_global(dev, &a) ? NULL : vmmx_alloc_ctx(a);
}

/* The pattern of allocation @i: each byte from its index and offset. */
static void pattern(size_t i, unsigned char *b, size_t n)
{
	for (size_t k = 0; k < n; k++)
		b[k] = (unsigned char)(k * 31 + i * 7 + (k >> 12));
}

static int fill(size_t i)
{
	pattern(i, buf, all[i].size);
	return vmmx_memcpy(ctx_of(all[i].dev), all[i].p, buf, all[i].size);
}

/* 0, or a line saying what differs. */
static int check(size_t i, char *why, size_t len)
{
	static unsigned char want[96 * MiB];
	int err;

	pattern(i, want, all[i].size);
	memset(buf, 0, all[i].size);
	err = vmmx_memcpy(ctx_of(all[i].dev), buf, all[i].p, all[i].size);
	if (err) {
		snprintf(why, len, "reading allocation %zu (%p): %s", i, all[i].p,
			 vmmx_last_error());
		return -1;
	}
	for (size_t k = 0; k < all[i].size; k++)
		if (buf[k] != want[k]) {
			snprintf(why, len, "allocation %zu (%p) byte %zu: %u, expected %u", i,
				 all[i].p, k, buf[k], want[k]);
			return -1;
		}
	return 0;
}

static unsigned long long ops(int dev, enum vmmx_op op)
{
	struct vmmx_stats st = { .size = sizeof(st) };

	return vmmx_stats_get(ctx_of(dev), &st) ? 0 : (unsigned long long)st.driver_calls[op];
}

static pthread_t churners[CHURN_THREADS];
static int churn_stop;                  /* atomic */
static unsigned long churn_iters, churn_fails; /* atomic */

/* Allocate and free, never touching the memory: what a sleep allows. */
static void *churn(void *arg)
{
	static const size_t sizes[] = { 64 * KiB, MiB, 12 * MiB };
	size_t k = (size_t)(uintptr_t)arg;

	while (!__atomic_load_n(&churn_stop, __ATOMIC_RELAXED)) {
		void *p = NULL;
		size_t n = sizes[k++ % 3];

		if (cudaMalloc(&p, n) || fake_is_real(p) || cudaFree(p))
			__atomic_fetch_add(&churn_fails, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&churn_iters, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void alloc_one(void)
{
	void *p = NULL;
	int err;

	printf("allocating\n");
	fflush(stdout);
	cudaSetDevice(0);
	err = cudaMalloc(&p, MiB);
	if (!err && !fake_is_real(p)) {
		pattern(99, buf, MiB);
		err = vmmx_memcpy(ctx_of(0), p, buf, MiB);
		if (!err)
			err = vmmx_memcpy(ctx_of(0), buf + MiB, p, MiB) || memcmp(buf, buf + MiB, MiB);
		if (!err)
			err = cudaFree(p);
	}
	printf("allocated %s%s\n", err ? "failed " : "ok", err ? vmmx_last_error() : "");
	fflush(stdout);
}

int main(void)
{
	char line[128], why[256];
	size_t bytes = 0;

	for (size_t i = 0; i < NALL; i++) {
		cudaSetDevice(all[i].dev);
		if (cudaMalloc(&all[i].p, all[i].size) || fake_is_real(all[i].p) ||
		    fill(i)) {
			printf("setup failed: allocation %zu of %zu bytes: %s\n", i, all[i].size,
			       vmmx_last_error());
			return 1;
		}
		bytes += all[i].size;
	}
	/* Two small blocks freed: their segment keeps them as free blocks. */
	for (size_t i = 3; i < 6; i += 2) {
		if (cudaFreeAsync(all[i].p, NULL)) {
			printf("setup failed: freeing allocation %zu\n", i);
			return 1;
		}
		all[i].freed = 1;
		bytes -= all[i].size;
	}
	printf("ready %zu copies=%llu,%llu syncs=%llu,%llu\n", bytes, ops(0, VMMX_OP_COPY),
	       ops(1, VMMX_OP_COPY), ops(0, VMMX_OP_SYNC), ops(1, VMMX_OP_SYNC));
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "check") || !strcmp(line, "fill")) {
			int bad = 0;

			for (size_t i = 0; i < NALL && !bad; i++) {
				if (all[i].freed)
					continue;
				if (line[0] == 'c')
					bad = check(i, why, sizeof(why));
				else if ((bad = fill(i)))
					snprintf(why, sizeof(why), "writing allocation %zu: %s", i,
						 vmmx_last_error());
			}
			printf("%s %s%s\n", line, bad ? "bad: " : "ok", bad ? why : "");
		} else if (!strcmp(line, "alloc")) {
			alloc_one();
		} else if (!strcmp(line, "churn")) {
			/* The fake's current device is the process's: device 0 from here on. */
			cudaSetDevice(0);
			for (size_t i = 0; i < CHURN_THREADS; i++)
				if (pthread_create(&churners[i], NULL, churn, (void *)(uintptr_t)i))
					return 1;
			printf("churning\n");
		} else if (!strcmp(line, "stop")) {
			__atomic_store_n(&churn_stop, 1, __ATOMIC_RELAXED);
			for (size_t i = 0; i < CHURN_THREADS; i++)
				pthread_join(churners[i], NULL);
			printf("stopped iterations=%lu failures=%lu\n", churn_iters, churn_fails);
		} else if (!strcmp(line, "quit")) {
			for (size_t i = 0; i < NALL; i++) {
				cudaSetDevice(all[i].dev);
				if (!all[i].freed && cudaFree(all[i].p))
					printf("free of allocation %zu failed\n", i);
			}
			printf("bye\n");
			return 0;
		} else {
			printf("unknown command '%s'\n", line);
		}
		fflush(stdout);
	}
	return 0;
}
