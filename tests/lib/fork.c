// SPDX-License-Identifier: MIT
/*
 * fork.c - fork() during a storm of resizes and lookups: neither parent nor
 * child deadlocks, every call on the inherited context fails at once in the
 * child with -VMMX_ENODRIVER naming the parent, its destructors free it
 * without the driver, and (on sim) the child can open a context of its
 * own.  A watchdog turns a hang into a failure: each child gets
 * CHILD_TIMEOUT_S seconds, the whole test alarm()'s worth.  The same test
 * runs with VMMX_BACKEND=cuda on a GPU (there the child opens no context).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#define FORKS		8
#define LOOKERS		4
#define CHILD_TIMEOUT_S 10
#define TEST_TIMEOUT_S	120

static struct vmmx_ctx *ctx;
static struct vmmx_buf *buf;
static struct vmmx_stream *stream;
static int stop;		  /* atomic */
static uint64_t resizes, lookups; /* atomic: progress of the storm */
static int storm_errors;	  /* atomic: unexpected results in the parent */

static void *resizer(void *arg)
{
	size_t sizes[] = { 2 * MiB, 16 * MiB, 6 * MiB, 32 * MiB, 4 * MiB };

	for (unsigned int i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
		if (vmmx_buf_resize(buf, sizes[i % 5]))
			__atomic_fetch_add(&storm_errors, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&resizes, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void *looker(void *arg)
{
	const char *base = vmmx_buf_ptr(buf);
	struct vmmx_chunk_info ci;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		int err = vmmx_lookup(ctx, base + MiB, &ci);

		/* the first 2 MiB are always mapped */
		if (err || ci.buf != buf)
			__atomic_fetch_add(&storm_errors, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&lookups, 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void expect_inherited(int err, const char *fn, int parent)
{
	char want[96];

	snprintf(want, sizeof(want),
		 "context created in process %d; CUDA cannot be used after fork", parent);
	test_expect(err == -VMMX_ENODRIVER, fn);
	test_expect(strstr(vmmx_last_error(), want) && strstr(vmmx_last_error(), fn), want);
}

static int child_main(int parent)
{
	struct vmmx_chunk_info ci;
	struct vmmx_stats st = { .size = sizeof(st) };
	struct vmmx_buf *b2;
	char host[64] = { 0 };
	void *dptr;

	expect_inherited(vmmx_lookup(ctx, vmmx_buf_ptr(buf), &ci), "vmmx_lookup", parent);
	expect_inherited(vmmx_buf_resize(buf, 8 * MiB), "vmmx_buf_resize", parent);
	expect_inherited(vmmx_memcpy(ctx, host, host + 32, 16), "vmmx_memcpy", parent);
	expect_inherited(vmmx_memset(ctx, host, 0, 16), "vmmx_memset", parent);
	expect_inherited(vmmx_stats_get(ctx, &st), "vmmx_stats_get", parent);
	expect_inherited(vmmx_host_register(ctx, host, sizeof(host), &dptr), "vmmx_host_register",
			 parent);
	expect_inherited(vmmx_buf_create(ctx, 4 * MiB, NULL, &b2), "vmmx_buf_create", parent);
	expect_inherited(vmmx_sync(ctx), "vmmx_sync", parent);
	expect_inherited(vmmx_stream_sync(stream), "vmmx_stream_sync", parent);
	test_expect(vmmx_buf_ptr(buf) == NULL, "vmmx_buf_ptr answers NULL");
	test_expect(vmmx_buf_size(buf) == 0, "vmmx_buf_size answers 0");
	/* The destructors: host-side records only (a driver call would fail or hang here). */
	vmmx_stream_destroy(stream);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);

	/* A context of the child's own works: the locks it needs came through free. */
	if (test_on_sim()) {
		struct vmmx_ctx *c2;
		struct vmmx_buf *nb;

		test_expect(!test_ctx_try(NULL, &c2), "a new context in the child");
		test_expect(!vmmx_buf_create(c2, 8 * MiB, NULL, &nb), "a buffer in the child");
		test_expect(!vmmx_buf_resize(nb, 4 * MiB), "its resize");
		test_expect(!test_fill(c2, vmmx_buf_ptr(nb), 0, 4 * MiB, 9), "a copy into it");
		test_expect(test_check(c2, vmmx_buf_ptr(nb), 0, 4 * MiB, 9) == SIZE_MAX,
		       "the data reads back");
		vmmx_buf_destroy(nb);
		vmmx_ctx_destroy(c2);
	}
	return test_child_fails > 100 ? 100 : test_child_fails;
}

int main(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", NULL };
	pthread_t rt, lt[LOOKERS];
	uint64_t r0, l0;
	int parent = (int)getpid();

	alarm(TEST_TIMEOUT_S); /* the last resort: a hung parent dies and fails */
	plan(FORKS * 2 + 5);
	ctx = test_ctx(vars);
	if (vmmx_buf_create(ctx, 64 * MiB, NULL, &buf) || vmmx_buf_resize(buf, 4 * MiB) ||
	    vmmx_stream_create(ctx, &stream))
		bail("setup: %s", vmmx_last_error());
	pthread_create(&rt, NULL, resizer, NULL);
	for (int i = 0; i < LOOKERS; i++)
		pthread_create(&lt[i], NULL, looker, NULL);

	for (int i = 0; i < FORKS; i++) {
		struct timespec t = { 0, 20 * 1000 * 1000 };
		pid_t pid;
		int status;

		nanosleep(&t, NULL); /* let the storm run between forks */
		pid = fork();
		if (pid < 0)
			bail("fork: %s", strerror(errno));
		if (!pid)
			_exit(child_main(parent));
		status = test_wait_child(pid, CHILD_TIMEOUT_S);
		ok(status != -1, "fork %d: the child finished within %d s (no deadlock)", i,
		   CHILD_TIMEOUT_S);
		ok(status >= 0 && WIFEXITED(status) && !WEXITSTATUS(status),
		   "fork %d: every call on the inherited context failed as it should (status %#x)",
		   i, status);
	}

	/* The parent's threads go on after the forks. */
	r0 = __atomic_load_n(&resizes, __ATOMIC_RELAXED);
	l0 = __atomic_load_n(&lookups, __ATOMIC_RELAXED);
	/* A resize on a busy GPU takes tens of ms: wait for progress, up to 10 s. */
	for (int waited = 0; waited < 1000; waited++) {
		struct timespec t = { 0, 10 * 1000 * 1000 };

		if (__atomic_load_n(&resizes, __ATOMIC_RELAXED) > r0 &&
		    __atomic_load_n(&lookups, __ATOMIC_RELAXED) > l0)
			break;
		nanosleep(&t, NULL);
	}
	ok(__atomic_load_n(&resizes, __ATOMIC_RELAXED) > r0 &&
	       __atomic_load_n(&lookups, __ATOMIC_RELAXED) > l0,
	   "the parent's resizer and lookers still make progress (within 10 s)");
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(rt, NULL);
	for (int i = 0; i < LOOKERS; i++)
		pthread_join(lt[i], NULL);
	is_int(0, storm_errors,
	       "no lookup or resize failed in the parent (%llu resizes, %llu lookups)",
	       (unsigned long long)resizes, (unsigned long long)lookups);
	is_err(0, vmmx_buf_resize(buf, 8 * MiB), "the parent's context still resizes");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(buf), 0, 8 * MiB, 3), "and copies");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, 8 * MiB, 3), "the data reads back");
	vmmx_stream_destroy(stream);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
