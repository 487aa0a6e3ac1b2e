// SPDX-License-Identifier: MIT
/*
 * kept_range.c - bytes a caller still uses are never unmapped under it.
 *
 *  1. Shrinks: while the main thread shrinks a 64 MiB host buffer from
 *     62 MiB to 6 MiB and grows it back, again and again, one thread
 *     writes and reads the page at 5 MiB with the CPU, one reads [0, 4 MiB) with
 *     vmmx_memcpy and compares, and one writes [4, 5 MiB) with vmmx_memcpy
 *     and reads it back.  Before, the shrink replaced the cut chunk (one
 *     handle for the whole buffer): the CPU thread died with SIGSEGV, copies
 *     failed with -VMMX_EFAULT and a write that returned 0 was lost.
 *  2. Evictions: one thread reads [0, 4 MiB) of an lru buffer with
 *     vmmx_memcpy while another buffer of the same policy grows into the
 *     device and shrinks again, so that lru evicts and promotes the reader's
 *     chunks.  Before, reads failed because lru moved the chunk they read.
 *     Now a move the library starts skips a buffer a copy is using
 *     (vmmx_stats.moves_busy).
 *
 * Each part runs for a bounded number of rounds and a bounded time, under
 * a watchdog (alarm): a hang fails the test instead of stalling the suite.
 */
#include "config.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"
#include "tests/tap/leaks.h"

#define WATCHDOG_S 120
#define ROUNDS 300
#define LRU_ROUNDS 100
#define MIN_ROUNDS 10

static atomic_bool stop;

static void on_segv(int sig)
{
	static const char msg[] = "not ok - a CPU access of the kept range faulted (SIGSEGV)\n";

	(void)sig;
	(void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
	_exit(1);
}

static void on_alarm(int sig)
{
	static const char msg[] = "Bail out! watchdog: the test hung\n";

	(void)sig;
	(void)!write(STDOUT_FILENO, msg, sizeof(msg) - 1);
	_exit(1);
}

struct worker {
	struct vmmx_ctx *ctx;
	unsigned char *p;
	uint32_t seed;
	unsigned long rounds, fails, lost;
	char why[256];
};

/* Whether each of @n workers made MIN_ROUNDS rounds, or @secs passed since @t0. */
static bool started(struct worker **w, int n, time_t t0, int secs)
{
	for (int i = 0; i < n; i++)
		if (__atomic_load_n(&w[i]->rounds, __ATOMIC_RELAXED) < MIN_ROUNDS)
			return time(NULL) - t0 >= secs;
	return true;
}

/* The CPU writes a counter into the page at 5 MiB and reads it back. */
static void *cpu_worker(void *arg)
{
	struct worker *w = arg;
	volatile unsigned char *p = w->p + 5 * MiB;

	for (unsigned long i = 0; !atomic_load(&stop); i++) {
		for (size_t j = 0; j < 4096; j += 64)
			p[j] = (unsigned char)(i + j);
		for (size_t j = 0; j < 4096; j += 64)
			if (p[j] != (unsigned char)(i + j))
				w->lost++;
		__atomic_fetch_add(&w->rounds, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* vmmx_memcpy reads [0, 4 MiB) and compares it with the pattern. */
static void *copy_reader(void *arg)
{
	struct worker *w = arg;

	while (!atomic_load(&stop)) {
		size_t bad = test_check(w->ctx, w->p, 0, 4 * MiB, w->seed);

		if (bad != SIZE_MAX) {
			if (!w->fails++)
				snprintf(w->why, sizeof(w->why), "%s",
					 bad == SIZE_MAX - 1 ? vmmx_last_error() : "wrong data");
		}
		__atomic_fetch_add(&w->rounds, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* vmmx_memcpy writes [4, 5 MiB) with a new seed each time and reads it back. */
static void *copy_writer(void *arg)
{
	struct worker *w = arg;

	for (uint32_t seed = 1; !atomic_load(&stop); seed++) {
		int err = test_fill(w->ctx, w->p, 4 * MiB, MiB, seed);
		size_t bad;

		if (err) {
			if (!w->fails++)
				snprintf(w->why, sizeof(w->why), "%s", vmmx_last_error());
			continue;
		}
		bad = test_check(w->ctx, w->p, 4 * MiB, MiB, seed);
		if (bad == SIZE_MAX - 1) {
			if (!w->fails++)
				snprintf(w->why, sizeof(w->why), "%s", vmmx_last_error());
		} else if (bad != SIZE_MAX) {
			w->lost++;
		}
		__atomic_fetch_add(&w->rounds, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void shrinks(void)
{
	static const char *const v[] = { "VMMX_HOST_CPU_ACCESS=all", NULL };
	struct vmmx_ctx *ctx = test_ctx(v);
	struct vmmx_buf *buf = NULL;
	struct worker cpu, rd, wr;
	pthread_t t[3];
	unsigned long done = 0;
	int err = 0;

	if (vmmx_buf_create(ctx, 64 * MiB, "host", &buf) || vmmx_buf_resize(buf, 62 * MiB) ||
	    test_fill(ctx, vmmx_buf_ptr(buf), 0, 4 * MiB, 7))
		bail("setup: %s", vmmx_last_error());
	cpu = rd = wr = (struct worker){ .ctx = ctx, .p = vmmx_buf_ptr(buf), .seed = 7 };
	atomic_store(&stop, false);
	pthread_create(&t[0], NULL, cpu_worker, &cpu);
	pthread_create(&t[1], NULL, copy_reader, &rd);
	pthread_create(&t[2], NULL, copy_writer, &wr);
	for (time_t t0 = time(NULL);
	     (done < ROUNDS || !started((struct worker *[]){ &cpu, &rd, &wr }, 3, t0, 20)) && !err;
	     done++) {
		err = vmmx_buf_resize(buf, 6 * MiB);
		if (!err)
			err = vmmx_buf_resize(buf, 62 * MiB);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < 3; i++)
		pthread_join(t[i], NULL);
	is_err(0, err, "%lu shrinks to 6 MiB and grows back to 62 MiB", done);
	ok(cpu.rounds > 0 && cpu.lost == 0,
	   "the CPU wrote and read back the first page %lu times, nothing lost (%lu)", cpu.rounds,
	   cpu.lost);
	ok(rd.rounds > 0 && rd.fails == 0, "vmmx_memcpy read [0, 4 MiB) %lu times, %lu failed%s%s",
	   rd.rounds, rd.fails, rd.fails ? ": " : "", rd.why);
	ok(wr.rounds > 0 && wr.fails == 0 && wr.lost == 0,
	   "vmmx_memcpy wrote [4, 5 MiB) %lu times: %lu failed, %lu writes lost%s%s", wr.rounds,
	   wr.fails, wr.lost, wr.fails ? ": " : "", wr.why);
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, 4 * MiB, 7),
		"the kept range still holds its pattern");
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

static void evictions(void)
{
	/* 32 MiB of device; the reader's buffer takes 16 MiB of it in 4 MiB
	 * chunks, the other one grows to 32 MiB: lru must evict to make room,
	 * and promotes again once it shrinks. */
	static const char *const v[] = { "VMMX_DEVICE_LIMIT=32MiB", "VMMX_HEADROOM=0",
					 "VMMX_CACHE_LIMIT=0", NULL };
	struct vmmx_ctx *ctx = test_ctx(v);
	struct vmmx_buf *a = NULL, *b = NULL;
	struct vmmx_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
	struct worker rd;
	pthread_t t;
	unsigned long done = 0;
	int err = 0;

	if (vmmx_buf_create(ctx, 16 * MiB, "lru:chunk=4MiB", &a) || vmmx_buf_resize(a, 16 * MiB) ||
	    test_fill(ctx, vmmx_buf_ptr(a), 0, 16 * MiB, 11) ||
	    vmmx_buf_create(ctx, 32 * MiB, "lru:chunk=4MiB", &b))
		bail("setup: %s", vmmx_last_error());
	vmmx_stats_get(ctx, &st0);
	rd = (struct worker){ .ctx = ctx, .p = vmmx_buf_ptr(a), .seed = 11 };
	atomic_store(&stop, false);
	pthread_create(&t, NULL, copy_reader, &rd);
	/* LRU_ROUNDS, or 30 s under a slow build (TSan); and the reader's MIN_ROUNDS. */
	for (time_t t0 = time(NULL);
	     ((done < LRU_ROUNDS && time(NULL) - t0 < 30) ||
	      !started((struct worker *[]){ &rd }, 1, t0, 20)) && !err;
	     done++) {
		err = vmmx_buf_resize(b, 32 * MiB);
		if (!err)
			err = test_fill(ctx, vmmx_buf_ptr(b), 0, 4 * MiB, (uint32_t)done);
		if (!err)
			err = vmmx_buf_resize(b, 0);
	}
	atomic_store(&stop, true);
	pthread_join(t, NULL);
	vmmx_stats_get(ctx, &st1);
	is_err(0, err, "%lu grows of another lru buffer into the device and shrinks", done);
	ok(st1.evictions > st0.evictions && st1.promotions > st0.promotions,
	   "lru evicted (%llu) and promoted (%llu) chunks meanwhile",
	   (unsigned long long)(st1.evictions - st0.evictions),
	   (unsigned long long)(st1.promotions - st0.promotions));
	ok(rd.rounds > 0 && rd.fails == 0,
	   "vmmx_memcpy read [0, 4 MiB) of the first buffer %lu times, %lu failed%s%s", rd.rounds,
	   rd.fails, rd.fails ? ": " : "", rd.why);
	diag("moves skipped because a copy was using the buffer: %llu",
	     (unsigned long long)(st1.moves_busy - st0.moves_busy));
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 16 * MiB, 11),
		"the first buffer still holds its pattern");
	vmmx_buf_destroy(b);
	vmmx_buf_destroy(a);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

int main(void)
{
	struct sigaction sa = { .sa_handler = on_segv };

	if (!test_on_sim())
		skip_all("CPU access to host chunks and lru's limits are set up for the sim backend");
	sigaction(SIGSEGV, &sa, NULL);
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	alarm(WATCHDOG_S);
	plan(6 + 5);
	shrinks();
	evictions();
	return tap_done();
}
