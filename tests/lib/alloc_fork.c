// SPDX-License-Identifier: MIT
/*
 * alloc_fork.c - fork() while threads allocate and free through the
 * framework allocator (a private one and the process-wide one behind
 * vmmx_torch_*): neither process deadlocks, and in the child every call on
 * the parent's allocators fails at once with -VMMX_ENODRIVER naming the
 * parent, hands out no pointer, and makes no driver call (the driver layer's
 * counters, read in the child before and after, say so); vmmx_alloc_destroy
 * frees the child's copy without the driver.  On sim the child then makes a
 * context and an allocator of its own, which work.
 *
 * The reproducer of the hang: FORKS forks while ALLOCATORS threads loop
 * malloc/free (and now and then empty_cache, which releases and remakes
 * segments: driver calls with the allocator's lock held).  Before the
 * allocator's locks were taken around fork(), the children hung in
 * pthread_mutex_lock under vmmx_alloc_malloc (all 50 here; 27 of 50 in the
 * issue's gentler loop), and one that found the lock free was handed a
 * parent's address.  A watchdog turns a hang
 * into a failure: a timed waitpid in the parent (which prints the child's
 * stack, then kills it), alarm() in each child after that, and alarm()
 * for the whole test.  Under ThreadSanitizer a child waiting inside the
 * runtime's own allocator is shown, not counted (test_wait_child()).
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

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#define FORKS		50
#define ALLOCATORS	2   /* threads on the private allocator; one more on vmmx_torch_* */
#define CHILD_TIMEOUT_S 5   /* the parent's wait; a child's alarm() is 2 s later */
#define TEST_TIMEOUT_S	400 /* FORKS hung children at CHILD_TIMEOUT_S each, and more */

static struct vmmx_ctx *ctx;
static struct vmmx_alloc *a, *g; /* a private allocator on ctx; vmmx_alloc_global(0) */
static void *held_a, *held_g;	 /* live in the parent across every fork */
static int stop;		 /* atomic */
static uint64_t ops[ALLOCATORS + 1]; /* atomic: progress of each thread */
static int storm_errors;	     /* atomic: unexpected results in the parent */

static const size_t sizes[] = { 512, 64 * 1024, 3 * MiB, 12 * MiB };

static void *allocator(void *arg)
{
	int id = (int)(intptr_t)arg;
	void *p[4];

	for (unsigned int i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
		for (int k = 0; k < 4; k++) {
			p[k] = NULL;
			if (vmmx_alloc_malloc(a, sizes[(i + k) % 4], NULL, &p[k]))
				__atomic_fetch_add(&storm_errors, 1, __ATOMIC_RELAXED);
		}
		for (int k = 0; k < 4; k++)
			if (vmmx_alloc_free(a, p[k], NULL))
				__atomic_fetch_add(&storm_errors, 1, __ATOMIC_RELAXED);
		/* segments go and are made again: driver calls under the allocator's lock */
		if (i % 16 == (unsigned int)id * 8 && vmmx_alloc_empty_cache(a))
			__atomic_fetch_add(&storm_errors, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&ops[id], 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

/* The process-wide allocator, through PyTorch's entry points. */
static void *torcher(void *arg)
{
	(void)arg;
	for (unsigned int i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
		void *p = vmmx_torch_alloc((ssize_t)sizes[i % 4], 0, NULL);

		if (!p)
			__atomic_fetch_add(&storm_errors, 1, __ATOMIC_RELAXED);
		vmmx_torch_free(p, (ssize_t)sizes[i % 4], 0, NULL);
		if (i % 16 == 4 && vmmx_alloc_empty_cache(g))
			__atomic_fetch_add(&storm_errors, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&ops[ALLOCATORS], 1, __ATOMIC_RELAXED);
	}
	return NULL;
}

static void expect_message(const char *fn, int parent)
{
	char want[96];

	snprintf(want, sizeof(want), "allocator inherited from the parent process %d", parent);
	test_expect(strstr(vmmx_last_error(), want) && strstr(vmmx_last_error(), fn) &&
		       strstr(vmmx_last_error(), "CUDA cannot be used after fork"),
	       want);
}

static void expect_inherited(int err, const char *fn, int parent)
{
	test_expect(err == -VMMX_ENODRIVER, fn);
	expect_message(fn, parent);
}

/* Whether the driver layer saw no call and no object change between @c0 and @c1. */
static bool same_counts(const struct vmm_counts *c0, const struct vmm_counts *c1)
{
	for (int op = 0; op < VMMX_OP_COUNT; op++)
		if (c0->calls[op] != c1->calls[op])
			return false;
	return c0->event_calls == c1->event_calls && c0->events == c1->events &&
	       c0->reservations == c1->reservations && c0->handles == c1->handles &&
	       c0->mapped_bytes == c1->mapped_bytes && c0->streams == c1->streams;
}

static int child_main(int parent)
{
	struct vmmx_alloc_stats st = { .size = sizeof(st) };
	struct vmm *va = vmmx__ctx_vmm(ctx), *vg = vmmx__ctx_vmm(vmmx_alloc_ctx(g));
	struct vmm_counts ca0, cg0, ca1, cg1;
	struct vmmx_alloc *g2 = NULL, *a2;
	void *p = (void *)&test_child_fails;

	alarm(CHILD_TIMEOUT_S + 2); /* should the parent not kill it first (its stack) */
	vmm_counts(va, &ca0);
	vmm_counts(vg, &cg0);

	expect_inherited(vmmx_alloc_malloc(a, 4096, NULL, &p), "vmmx_alloc_malloc", parent);
	test_expect(p == (void *)&test_child_fails, "vmmx_alloc_malloc hands out no pointer");
	expect_inherited(vmmx_alloc_malloc(a, 12 * MiB, NULL, &p), "vmmx_alloc_malloc", parent);
	expect_inherited(vmmx_alloc_free(a, held_a, NULL), "vmmx_alloc_free", parent);
	expect_inherited(vmmx_alloc_empty_cache(a), "vmmx_alloc_empty_cache", parent);
	expect_inherited(vmmx_alloc_stats(a, &st), "vmmx_alloc_stats", parent);
	test_expect(vmmx_alloc_create(ctx, NULL, &a2) == -VMMX_ENODRIVER,
	       "vmmx_alloc_create on the inherited context");

	/* The process-wide allocator: the parent's, and just as unusable. */
	test_expect(!vmmx_alloc_global(0, &g2) && g2 == g,
	       "vmmx_alloc_global answers the parent's allocator");
	test_expect(vmmx_torch_alloc(4096, 0, NULL) == NULL, "vmmx_torch_alloc gives NULL");
	expect_message("vmmx_torch_alloc", parent);
	test_expect(vmmx_cupy_malloc(NULL, 4096, 0) == NULL, "vmmx_cupy_malloc gives NULL");
	expect_message("vmmx_cupy_malloc", parent);
	vmmx_torch_free(held_g, 4096, 0, NULL); /* logged, nothing else */
	expect_message("vmmx_torch_free", parent);
	expect_inherited(vmmx_alloc_malloc(g, 4096, NULL, &p), "vmmx_alloc_malloc", parent);
	expect_inherited(vmmx_alloc_empty_cache(g), "vmmx_alloc_empty_cache", parent);
	/* the process-wide lock came through free */
	test_expect(vmmx_alloc_global_config(NULL) == -VMMX_EBUSY,
	       "vmmx_alloc_global_config: busy (a process-wide allocator exists)");

	/* The destructor: host-side records only. */
	vmmx_alloc_destroy(a);
	vmm_counts(va, &ca1);
	vmm_counts(vg, &cg1);
	test_expect(same_counts(&ca0, &ca1), "no driver call on the private allocator's context");
	test_expect(same_counts(&cg0, &cg1), "no driver call on the process-wide allocator's context");
	vmmx_ctx_destroy(ctx);

	/* An allocator of the child's own works: the locks it needs came through free. */
	if (test_on_sim()) {
		static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", NULL };
		struct vmmx_ctx *c2;
		void *q = NULL;

		test_expect(!test_ctx_try(vars, &c2), "a new context in the child");
		test_expect(!vmmx_alloc_create(c2, NULL, &a2), "an allocator in the child");
		test_expect(!vmmx_alloc_malloc(a2, 3 * MiB, NULL, &q) && q, "its malloc");
		test_expect(!test_fill(c2, q, 0, 3 * MiB, 5), "a copy into it");
		test_expect(test_check(c2, q, 0, 3 * MiB, 5) == SIZE_MAX, "the data reads back");
		test_expect(!vmmx_alloc_free(a2, q, NULL), "its free");
		test_expect(!vmmx_alloc_empty_cache(a2), "its empty_cache");
		vmmx_alloc_destroy(a2);
		vmmx_ctx_destroy(c2);
	}
	return test_child_fails > 100 ? 100 : test_child_fails;
}

/*
 * The watchdog's control: a child stuck on a mutex another thread of the
 * parent held at the fork waits in libc, under the interceptor in a
 * ThreadSanitizer build, so test_wait_child() must call it hung (-1), never
 * the runtime's own wait.
 */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_barrier_t held_bar;

static void *holder(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&held_lock);
	pthread_barrier_wait(&held_bar); /* held: the fork may come */
	pthread_barrier_wait(&held_bar); /* forked */
	pthread_mutex_unlock(&held_lock);
	return NULL;
}

static void watchdog_control(void)
{
	pthread_t t;
	pid_t pid;
	int status;

	pthread_barrier_init(&held_bar, NULL, 2);
	pthread_create(&t, NULL, holder, NULL);
	pthread_barrier_wait(&held_bar);
	pid = fork();
	if (pid < 0)
		bail("fork: %s", strerror(errno));
	if (!pid) {
		alarm(CHILD_TIMEOUT_S + 2); /* after the parent's wait and its stack */
		pthread_mutex_lock(&held_lock); /* its owner is not in this process */
		_exit(0);
	}
	pthread_barrier_wait(&held_bar);
	status = test_wait_child(pid, 1);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&held_bar);
	is_int(-1, status,
	       "control: a child stuck on a mutex held at the fork by another thread is called "
	       "hung (-1), never a wait inside ThreadSanitizer's runtime (its stack above)");
}

static uint64_t progress(int i)
{
	return __atomic_load_n(&ops[i], __ATOMIC_RELAXED);
}

int main(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", NULL };
	const char *gvars[] = { "VMMX_CHUNK_MAX=2MiB", "VMMX_LOG=none", NULL, NULL };
	char backend[64];
	pthread_t t[ALLOCATORS + 1];
	uint64_t o0[ALLOCATORS + 1];
	int parent = (int)getpid(), hung = 0, hung_tsan = 0, failed = 0;
	bool moved;

	alarm(TEST_TIMEOUT_S); /* the last resort: a hung parent dies and fails */
	plan(9);
	ctx = test_ctx(vars);
	/* the process-wide allocator reads the environment: the suite's backend, no log */
	snprintf(backend, sizeof(backend), "VMMX_BACKEND=%s", test_backend());
	gvars[2] = backend;
	if (vmmx_alloc_create(ctx, NULL, &a) || vmmx_alloc_global_config(gvars) ||
	    vmmx_alloc_global(0, &g) || vmmx_alloc_malloc(a, 4096, NULL, &held_a))
		bail("setup: %s", vmmx_last_error());
	held_g = vmmx_torch_alloc(4096, 0, NULL);
	if (!held_g)
		bail("setup: vmmx_torch_alloc: %s", vmmx_last_error());
	for (int i = 0; i < ALLOCATORS; i++)
		pthread_create(&t[i], NULL, allocator, (void *)(intptr_t)i);
	pthread_create(&t[ALLOCATORS], NULL, torcher, NULL);

	for (int i = 0; i < FORKS; i++) {
		struct timespec ts = { 0, (long)(1 + i % 7) * 1000 * 1000 };
		pid_t pid;
		int status;

		nanosleep(&ts, NULL); /* let the threads run between forks */
		pid = fork();
		if (pid < 0)
			bail("fork: %s", strerror(errno));
		if (!pid)
			_exit(child_main(parent));
		status = test_wait_child(pid, CHILD_TIMEOUT_S);
		if (status == TEST_HUNG_IN_TSAN)
			hung_tsan++;
		else if (status == -1 || (status >= 0 && WIFSIGNALED(status)))
			hung++;
		else if (status < 0 || !WIFEXITED(status) || WEXITSTATUS(status))
			failed++;
		if (status != 0)
			diag("fork %d: child status %#x", i, status);
	}
	ok(!hung && hung_tsan <= FORKS / 10,
	   "%d forks: no child hung on a lock of ours or libc's (waited %d s each; %d inside "
	   "ThreadSanitizer's runtime, at most 1 in 10)",
	   FORKS, CHILD_TIMEOUT_S, hung_tsan);
	is_int(0, failed,
	       "%d forks: in every child each call on the parent's allocators failed with "
	       "-VMMX_ENODRIVER, no pointer, no driver call",
	       FORKS);

	/* The parent's threads go on after the forks. */
	for (int i = 0; i <= ALLOCATORS; i++)
		o0[i] = progress(i);
	for (int waited = 0; waited < 1000; waited++) {
		struct timespec ts = { 0, 10 * 1000 * 1000 };

		moved = true;
		for (int i = 0; i <= ALLOCATORS; i++)
			moved = moved && progress(i) > o0[i];
		if (moved)
			break;
		nanosleep(&ts, NULL);
	}
	ok(moved, "the parent's allocating threads still make progress (within 10 s)");
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i <= ALLOCATORS; i++)
		pthread_join(t[i], NULL);
	is_int(0, storm_errors,
	       "no allocation or free failed in the parent (%llu + %llu + %llu rounds)",
	       (unsigned long long)progress(0), (unsigned long long)progress(1),
	       (unsigned long long)progress(2));
	{
		void *p = NULL;

		is_err(0, vmmx_alloc_malloc(a, 3 * MiB, NULL, &p),
		       "the parent's allocator still allocates");
		is_err(0, test_fill(ctx, p, 0, 3 * MiB, 7), "and the memory takes a copy");
		is_uint(SIZE_MAX, test_check(ctx, p, 0, 3 * MiB, 7), "which reads back");
		vmmx_alloc_free(a, p, NULL);
	}
	is_err(0, vmmx_alloc_free(a, held_a, NULL), "the block held across the forks frees");
	vmmx_torch_free(held_g, 4096, 0, NULL);
	vmmx_alloc_destroy(a);
	vmmx_ctx_destroy(ctx);
	watchdog_control();
	return tap_done();
}
