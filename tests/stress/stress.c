// SPDX-License-Identifier: MIT
/*
 * stress.c - the torture test (liburcu's torture tests and mimalloc's stress
 * test are the models): N threads run random operations on shared and
 * private buffers for a bounded time while the fault layer fails a seeded
 * share of driver calls, and a data pattern is checked after every step.
 *
 * Buffers and their invariants:
 *  - shared buffers: [0, SHARED_MIN) always mapped and always holding the
 *    pattern of the buffer's seed; any thread resizes them between
 *    SHARED_MIN and their capacity, looks up, asks residency and chunks,
 *    checks and rewrites (the same bytes) under the buffer's read lock, and
 *    migrates and advises under its write lock (moving a range others copy
 *    is the caller's race, vmmx.h says; the test does not provoke it);
 *  - private buffers (PRIVATE per thread): one thread's, [0, size) holds
 *    the pattern of the thread's seed; resized, migrated, advised, memset
 *    and restored, copied to and from host memory and between the thread's
 *    buffers, destroyed and created again, and host memory registered,
 *    copied from and unregistered;
 *  - the framework allocator (lib/alloc.c), one for all threads: each
 *    thread keeps up to ALLOC_SLOTS blocks of random sizes (small, large
 *    and huge pools), allocated on a random stream (three streams and the
 *    default), each holding a pattern of its own, checked whole before it
 *    is freed, sometimes on another stream than its own (a stream-ordered
 *    free).  A block handed to two threads at once shows as a pattern
 *    error.
 * An operation failed by the fault layer (or refused for room) must leave
 * its object as it was: a failed resize keeps its size, every failed step
 * keeps the bytes; the pattern check after it says so.
 *
 * fork(): every FORK_EVERY seconds the main thread forks while the workers
 * run, so forks land in the middle of every kind of operation, the
 * allocator's included (each worker publishes the kind it is in; the child
 * reads its copy of that, which is the state at the instant of the fork).
 * The child, bounded by a timed wait in the parent (which then prints its
 * stack and kills it) and an alarm() after that, calls the parent's
 * context, buffers, streams and allocator: each call must fail at once
 * with -VMMX_ENODRIVER and make no driver call (the driver layer's
 * counters, read in the child), and the destructors must free the child's
 * copies; it reports through a shared page.  A child that hangs on a lock
 * inherited held is a failure (under ThreadSanitizer, one waiting inside
 * the runtime's own allocator is shown, not counted: test_wait_child()),
 * and so is a parent whose
 * workers deadlock around the atfork handlers (the run never ends: CI's
 * timeout, and the worker checks).  At the end, with
 * faults off: every buffer is checked whole, everything is destroyed, and
 * the driver layer's live reservations, handles, mappings, registrations
 * and streams must all be back to zero.
 *
 * Output is TAP (so `make check` can run a short smoke) with the figures as
 * diagnostics: operations per second per kind, failures per kind, faults
 * injected, pattern errors, unexpected errors.
 *
 * Modes: torture (default) and lookup (-m lookup): vmmx_lookup throughput
 * per thread for 1 to -T threads while a writer resizes the buffer, in
 * millions of lookups per second per thread.  Runs on VMMX_BACKEND (sim
 * when unset); on a GPU set VMMX_BACKEND=cuda.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#define SHARED	      4
#define SHARED_MIN    (8 * MiB)
#define SHARED_CAP    (32 * MiB)
#define PRIVATE	      2
#define PRIVATE_CAP   (16 * MiB)
#define WINDOW	      (256 * 1024) /* bytes one step checks: the step's own range */
#define REG_LEN	      (1 * MiB)	   /* host memory a thread registers */
#define RETRIES	      100	   /* a 1% fault rate makes 100 failures in a row impossible */
#define MAX_THREADS   256
#define REPORT_ERRORS 10 /* errors described in full; the rest only counted */
#define ALLOC_SLOTS   3	 /* framework-allocator blocks a thread keeps */
#define ALLOC_STREAMS 3	 /* streams blocks are allocated and freed on, besides the default */
#define FORK_EVERY    0.1 /* seconds between forks while the workers run */
#define CHILD_TIMEOUT_S 10 /* the parent's wait; a child's alarm() is 5 s later */

enum op {
	OP_RESIZE,
	OP_MIGRATE,
	OP_ADVISE,
	OP_LOOKUP,
	OP_RESIDENCY,
	OP_CHUNKS,
	OP_MEMCPY,
	OP_MEMSET,
	OP_REGISTER,
	OP_RECREATE,
	OP_ALLOC,
	OP_CHECK,
	NOPS
};

static const char *const op_names[NOPS] = {
    "resize", "migrate",  "advise",   "lookup", "residency", "chunks",
    "memcpy", "memset",	  "register", "recreate", "alloc",   "check",
};

struct shared {
	struct vmmx_buf *buf;
	pthread_rwlock_t rw;
	uint32_t seed;
};

struct priv {
	struct vmmx_buf *buf;
	size_t size; /* what this thread made it */
};

/* A framework-allocator block a thread holds. */
struct held {
	char *p;     /* NULL: the slot is empty */
	size_t size;
	uint32_t seed;
	int stream;  /* index in streams[], or ALLOC_STREAMS for the default */
};

struct worker {
	pthread_t tid;
	int id;
	uint64_t rng;
	uint32_t seed; /* pattern of its private buffers */
	struct priv p[PRIVATE];
	unsigned char *host; /* staging: WINDOW bytes */
	unsigned char *reg;  /* REG_LEN bytes to register */
	struct held blk[ALLOC_SLOTS];
	uint32_t nalloc;     /* blocks allocated: seeds their patterns */
	uint64_t done[NOPS], failed[NOPS];
	uint64_t pattern_errors, unexpected;
	int cur;	     /* atomic: the operation in progress + 1, 0 between them */
};

/* What a forked child reports through a shared page. */
struct fork_report {
	unsigned int inflight; /* bit k: a worker was in operation k at the fork */
	int fails;
	char why[512];         /* the first failure */
};

static struct vmmx_ctx *ctx;
static struct vmmx_alloc *alloc;
static struct vmmx_stream *streams[ALLOC_STREAMS];
static struct shared shared[SHARED];
static struct worker *workers;
static int nworkers;
static int stop;     /* atomic */
static int reported; /* atomic: errors described so far */

static uint64_t rnd(struct worker *w)
{
	/* xorshift64*: per thread, seeded, so one thread's choices repeat */
	w->rng ^= w->rng >> 12;
	w->rng ^= w->rng << 25;
	w->rng ^= w->rng >> 27;
	return w->rng * 0x2545F4914F6CDD1Dull;
}

static size_t below(struct worker *w, size_t n)
{
	return n ? rnd(w) % n : 0;
}

static void report(struct worker *w, const char *what, int err)
{
	if (__atomic_fetch_add(&reported, 1, __ATOMIC_RELAXED) < REPORT_ERRORS)
		diag("thread %d: %s: %s: %s", w->id, what, vmmx_strerror(err), vmmx_last_error());
}

/* An error an injected fault or a full location explains; anything else is a bug. */
static bool expected(struct worker *w, enum op op, int err, const char *what)
{
	if (!err)
		return true;
	w->failed[op]++;
	if (err == -VMMX_EFAULTINJ || err == -VMMX_ENOMEM)
		return true;
	w->unexpected++;
	report(w, what, err);
	return false;
}

/* Write the pattern of @seed to [off, off + len) of @base, retrying injected faults. */
static void put(struct worker *w, void *base, size_t off, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		w->host[i] = test_pattern_byte(off + i, seed);
	for (int t = 0; t < RETRIES; t++) {
		int err = vmmx_memcpy(ctx, (char *)base + off, w->host, len);

		if (!err)
			return;
		if (!expected(w, OP_MEMCPY, err, "writing the pattern"))
			return;
	}
	w->unexpected++;
	report(w, "writing the pattern: too many failures", -VMMX_EFAULTINJ);
}

/* Check [off, off + len) of @base (len <= WINDOW) against the pattern of @seed. */
static void check(struct worker *w, const void *base, size_t off, size_t len, uint32_t seed,
		  const char *after)
{
	int err = -VMMX_EFAULTINJ;

	for (int t = 0; t < RETRIES && err; t++) {
		err = vmmx_memcpy(ctx, w->host, (const char *)base + off, len);
		if (err && !expected(w, OP_CHECK, err, "reading for a check"))
			return;
	}
	w->done[OP_CHECK]++;
	if (err) {
		w->unexpected++;
		report(w, "reading for a check: too many failures", err);
		return;
	}
	for (size_t i = 0; i < len; i++) {
		if (w->host[i] != test_pattern_byte(off + i, seed)) {
			w->pattern_errors++;
			if (__atomic_fetch_add(&reported, 1, __ATOMIC_RELAXED) < REPORT_ERRORS)
				diag("thread %d: pattern error at offset %zu of %p after %s", w->id,
				     off + i, base, after);
			return;
		}
	}
}

/* A random window [off, off + len) inside [0, size), granular to 4 KiB. */
static void window(struct worker *w, size_t size, size_t *off, size_t *len)
{
	size_t l = (1 + below(w, WINDOW / 4096)) * 4096;

	if (l > size)
		l = size;
	*len = l;
	*off = size > l ? below(w, (size - l) / 4096 + 1) * 4096 : 0;
}

static struct vmmx_loc random_loc(struct worker *w)
{
	return below(w, 2) ? (struct vmmx_loc){ VMMX_LOC_DEVICE, 0 }
			   : (struct vmmx_loc){ VMMX_LOC_HOST, 0 };
}

/* vmmx_lookup of @base + @off must answer a chunk of @buf that holds the address. */
static void lookup_op(struct worker *w, struct vmmx_buf *buf, char *base, size_t off)
{
	struct vmmx_chunk_info ci;
	int err = vmmx_lookup(ctx, base + off, &ci);

	if (expected(w, OP_LOOKUP, err, "lookup") && !err &&
	    (ci.buf != buf || (char *)ci.base > base + off ||
	     (char *)ci.base + ci.size <= base + off)) {
		w->unexpected++;
		report(w, "lookup answered another chunk", 0);
	}
}

/* vmmx_buf_residency of a mapped range must account for every byte. */
static void residency_op(struct worker *w, struct vmmx_buf *buf, size_t off, size_t len)
{
	struct vmmx_residency r;
	int err = vmmx_buf_residency(buf, off, len, &r);

	if (expected(w, OP_RESIDENCY, err, "residency") && !err && r.device + r.host != len) {
		w->unexpected++;
		report(w, "residency does not add up", 0);
	}
}

static void *stream_of(int i)
{
	return i < ALLOC_STREAMS ? vmmx_stream_handle(streams[i]) : NULL;
}

/* The whole block against its pattern, a window at a time. */
static void check_block(struct worker *w, const struct held *h, const char *after)
{
	for (size_t o = 0; o < h->size; o += WINDOW)
		check(w, h->p, o, h->size - o < WINDOW ? h->size - o : WINDOW, h->seed, after);
}

/*
 * Check a held block whole, then free it on its stream or another one.  A
 * free is never retried: one that fails (an event it could not record) has
 * still taken the block, kept out of use until the cache is emptied, as
 * vmmx.h says; a second free of it would be refused.
 */
static void alloc_release(struct worker *w, struct held *h)
{
	int s = below(w, 4) ? h->stream : (int)below(w, ALLOC_STREAMS + 1);

	check_block(w, h, "holding an allocator block");
	expected(w, OP_ALLOC, vmmx_alloc_free(alloc, h->p, stream_of(s)), "vmmx_alloc_free");
	h->p = NULL;
}

/* A size of the small pool mostly, of the large one often, huge at times. */
static size_t alloc_size(struct worker *w)
{
	size_t r = below(w, 20);

	if (r < 14)
		return 1 + below(w, 1 * MiB);
	if (r < 19)
		return 1 * MiB + 1 + below(w, 9 * MiB);
	return 10 * MiB + below(w, 4 * MiB);
}

/*
 * The framework allocator: free a held block (checked whole first) or
 * allocate into an empty slot, write the block's own pattern and check it.
 */
static void alloc_op(struct worker *w)
{
	struct held *h = &w->blk[below(w, ALLOC_SLOTS)];
	int err;

	if (h->p) {
		alloc_release(w, h);
		return;
	}
	h->size = alloc_size(w);
	h->stream = (int)below(w, ALLOC_STREAMS + 1);
	h->seed = w->seed * 7919u + ++w->nalloc;
	err = vmmx_alloc_malloc(alloc, h->size, stream_of(h->stream), (void **)&h->p);
	if (!expected(w, OP_ALLOC, err, "vmmx_alloc_malloc") || err) {
		h->p = NULL;
		return;
	}
	for (size_t o = 0; o < h->size; o += WINDOW)
		put(w, h->p, o, h->size - o < WINDOW ? h->size - o : WINDOW, h->seed);
	check_block(w, h, "vmmx_alloc_malloc");
}

static void private_op(struct worker *w, struct priv *p)
{
	char *base = vmmx_buf_ptr(p->buf);
	size_t off, len, moved;
	enum op op = (enum op)below(w, OP_CHECK);
	int err;

	window(w, p->size, &off, &len);
	__atomic_store_n(&w->cur, op + 1, __ATOMIC_RELAXED);
	switch (op) {
	case OP_RESIZE: {
		size_t want = below(w, PRIVATE_CAP / (2 * MiB) + 1) * 2 * MiB;

		err = vmmx_buf_resize(p->buf, want);
		if (!expected(w, op, err, "resize"))
			break;
		if (err) {
			if (vmmx_buf_size(p->buf) != p->size) {
				w->pattern_errors++;
				diag("thread %d: a failed resize changed the size", w->id);
			}
		} else {
			for (size_t o = p->size; o < want; o += WINDOW)
				put(w, base, o, want - o < WINDOW ? want - o : WINDOW, w->seed);
			p->size = want;
		}
		window(w, p->size, &off, &len);
		break;
	}
	case OP_MIGRATE:
		if (!p->size)
			break;
		err = vmmx_buf_migrate(p->buf, off, len, random_loc(w), &moved);
		expected(w, op, err, "migrate");
		break;
	case OP_ADVISE:
		if (!p->size)
			break;
		err = vmmx_buf_advise(p->buf, off, len, (int)(1 + below(w, 4)));
		expected(w, op, err, "advise");
		break;
	case OP_LOOKUP:
		if (p->size)
			lookup_op(w, p->buf, base, off);
		break;
	case OP_RESIDENCY:
		residency_op(w, p->buf, off, len);
		break;
	case OP_CHUNKS: {
		struct vmmx_chunk_info cs[16];
		size_t n = 0, sum = 0;

		err = vmmx_buf_chunks(p->buf, cs, 16, &n);
		if (expected(w, op, err, "chunks") && !err) {
			for (size_t i = 0; i < n && i < 16; i++)
				sum += cs[i].size;
			if (n <= 16 && sum < p->size) {
				w->unexpected++;
				report(w, "chunks do not cover the size", 0);
			}
		}
		break;
	}
	case OP_MEMCPY: {
		/* between the thread's buffers: both hold the same pattern */
		struct priv *q = &w->p[(p - w->p + 1) % PRIVATE];
		size_t common = p->size < q->size ? p->size : q->size;

		if (!common)
			break;
		window(w, common, &off, &len);
		err = vmmx_memcpy(ctx, base + off, (char *)vmmx_buf_ptr(q->buf) + off, len);
		expected(w, op, err, "memcpy between buffers");
		break;
	}
	case OP_MEMSET: {
		int c = (int)below(w, 256);
		bool good = true;

		if (!p->size)
			break;
		err = vmmx_memset(ctx, base + off, c, len);
		if (!expected(w, op, err, "memset"))
			break;
		if (!err && !vmmx_memcpy(ctx, w->host, base + off, len)) {
			for (size_t i = 0; i < len && good; i++)
				good = w->host[i] == (unsigned char)c;
			if (!good) {
				w->pattern_errors++;
				report(w, "memset did not write its byte", 0);
			}
		}
		put(w, base, off, len,
		    w->seed); /* back to the pattern (a failed memset may have written part) */
		break;
	}
	case OP_REGISTER: {
		void *dptr;

		err = vmmx_host_register(ctx, w->reg, REG_LEN, &dptr);
		if (!expected(w, op, err, "host_register") || err)
			break;
		if (p->size) {
			size_t l = len < REG_LEN ? len : REG_LEN;

			for (size_t i = 0; i < l; i++)
				w->reg[i] = test_pattern_byte(off + i, w->seed);
			err = vmmx_memcpy(ctx, base + off, w->reg, l);
			expected(w, OP_MEMCPY, err, "memcpy from registered memory");
		}
		for (int t = 0; t < RETRIES; t++) {
			err = vmmx_host_unregister(ctx, w->reg);
			if (!err || !expected(w, op, err, "host_unregister"))
				break;
		}
		break;
	}
	case OP_RECREATE:
		if (below(w, 8))
			break; /* rarer than the others: it throws the buffer's history away */
		vmmx_buf_destroy(p->buf);
		p->size = 0;
		for (int t = 0; t < RETRIES; t++) {
			err = vmmx_buf_create(ctx, PRIVATE_CAP, NULL, &p->buf);
			if (!err || !expected(w, op, err, "buf_create"))
				break;
		}
		if (err) {
			w->unexpected++;
			report(w, "buf_create: too many failures", err);
			__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
			__atomic_store_n(&w->cur, 0, __ATOMIC_RELAXED);
			return;
		}
		base = vmmx_buf_ptr(p->buf);
		len = 0;
		break;
	case OP_ALLOC:
		alloc_op(w);
		len = 0;
		break;
	default:
		break;
	}
	w->done[op]++;
	if (len && p->size)
		check(w, base, off, len < p->size - off ? len : p->size - off, w->seed,
		      op_names[op]);
	__atomic_store_n(&w->cur, 0, __ATOMIC_RELAXED);
}

static void shared_op(struct worker *w, struct shared *s)
{
	char *base = vmmx_buf_ptr(s->buf);
	enum op pick[] = { OP_RESIZE, OP_MIGRATE, OP_ADVISE, OP_LOOKUP, OP_RESIDENCY, OP_MEMCPY };
	enum op op = pick[below(w, sizeof(pick) / sizeof(pick[0]))];
	size_t off, len, moved;
	int err;

	window(w, SHARED_MIN, &off, &len);
	__atomic_store_n(&w->cur, op + 1, __ATOMIC_RELAXED);
	switch (op) {
	case OP_RESIZE:
		err = vmmx_buf_resize(
		    s->buf,
		    SHARED_MIN + below(w, (SHARED_CAP - SHARED_MIN) / (2 * MiB) + 1) * 2 * MiB);
		expected(w, op, err, "shared resize");
		break;
	case OP_MIGRATE:
	case OP_ADVISE:
		pthread_rwlock_wrlock(&s->rw);
		if (op == OP_MIGRATE)
			err = vmmx_buf_migrate(s->buf, off, len, random_loc(w), &moved);
		else
			err = vmmx_buf_advise(s->buf, off, len, (int)(1 + below(w, 4)));
		expected(w, op, err, op == OP_MIGRATE ? "shared migrate" : "shared advise");
		check(w, base, off, len, s->seed, op_names[op]);
		pthread_rwlock_unlock(&s->rw);
		break;
	case OP_LOOKUP:
		lookup_op(w, s->buf, base, off);
		break;
	case OP_RESIDENCY:
		residency_op(w, s->buf, off, len);
		break;
	default: /* OP_MEMCPY: rewrite the same bytes, then check */
		pthread_rwlock_rdlock(&s->rw);
		put(w, base, off, len, s->seed);
		check(w, base, off, len, s->seed, "shared memcpy");
		pthread_rwlock_unlock(&s->rw);
		break;
	}
	w->done[op]++;
	__atomic_store_n(&w->cur, 0, __ATOMIC_RELAXED);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		if (below(w, 4))
			private_op(w, &w->p[below(w, PRIVATE)]);
		else
			shared_op(w, &shared[below(w, SHARED)]);
	}
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_s(double s)
{
	struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* ---- fork while the workers run ---- */

static struct fork_report *freport; /* MAP_SHARED: written by the child */

static void child_expect(bool cond, const char *what)
{
	if (cond)
		return;
	if (!freport->fails++)
		snprintf(freport->why, sizeof(freport->why), "%s (last error: %s)", what,
			 vmmx_last_error());
}

/* -VMMX_ENODRIVER, and a message that says why. */
static void child_inherited(int err, const char *fn)
{
	char what[128];

	snprintf(what, sizeof(what), "%s: %s, not -VMMX_ENODRIVER", fn, vmmx_strerror(err));
	child_expect(err == -VMMX_ENODRIVER && strstr(vmmx_last_error(), fn) &&
			     strstr(vmmx_last_error(), "CUDA cannot be used after fork"),
		     what);
}

static bool same_counts(const struct vmm_counts *a, const struct vmm_counts *b)
{
	for (int op = 0; op < VMMX_OP_COUNT; op++)
		if (a->calls[op] != b->calls[op])
			return false;
	return a->event_calls == b->event_calls && a->events == b->events &&
	       a->reservations == b->reservations && a->handles == b->handles &&
	       a->mapped_bytes == b->mapped_bytes && a->registrations == b->registrations &&
	       a->streams == b->streams;
}

/*
 * The forked child: what the workers were doing (this copy of memory is the
 * instant of the fork), then every kind of call on the parent's objects,
 * then the destructors.  Exits with the number of failures (capped).
 */
static void child_main(void)
{
	struct vmm *v = vmmx__ctx_vmm(ctx);
	struct vmmx_alloc_stats as = { .size = sizeof(as) };
	struct vmmx_residency r;
	struct vmmx_chunk_info ci;
	struct vmm_counts c0, c1;
	char host[64] = { 0 };
	void *p = host, *dptr;
	size_t moved;

	alarm(CHILD_TIMEOUT_S + 5); /* should the parent not kill it first (its stack) */
	for (int i = 0; i < nworkers; i++) {
		int cur = __atomic_load_n(&workers[i].cur, __ATOMIC_RELAXED);

		if (cur)
			freport->inflight |= 1u << (cur - 1);
	}
	vmm_counts(v, &c0);
	child_inherited(vmmx_alloc_malloc(alloc, 4096, NULL, &p), "vmmx_alloc_malloc");
	child_expect(p == host, "vmmx_alloc_malloc handed out an address");
	child_inherited(vmmx_alloc_free(alloc, host, NULL), "vmmx_alloc_free");
	child_inherited(vmmx_alloc_empty_cache(alloc), "vmmx_alloc_empty_cache");
	child_inherited(vmmx_alloc_stats(alloc, &as), "vmmx_alloc_stats");
	child_inherited(vmmx_buf_resize(shared[0].buf, SHARED_MIN), "vmmx_buf_resize");
	child_inherited(vmmx_buf_migrate(shared[1].buf, 0, WINDOW,
					 (struct vmmx_loc){ VMMX_LOC_HOST, 0 }, &moved),
			"vmmx_buf_migrate");
	child_inherited(vmmx_buf_residency(shared[2].buf, 0, WINDOW, &r), "vmmx_buf_residency");
	child_inherited(vmmx_lookup(ctx, (char *)shared[3].buf->base, &ci), "vmmx_lookup");
	child_inherited(vmmx_memcpy(ctx, host, host + 32, 16), "vmmx_memcpy");
	child_inherited(vmmx_memset(ctx, host, 0, 16), "vmmx_memset");
	child_inherited(vmmx_host_register(ctx, host, sizeof(host), &dptr), "vmmx_host_register");
	child_inherited(vmmx_stream_sync(streams[0]), "vmmx_stream_sync");
	vmm_counts(v, &c1);
	child_expect(same_counts(&c0, &c1), "a driver call in the child");
	/* The destructors free the child's copies without the driver. */
	vmmx_alloc_destroy(alloc);
	vmmx_stream_destroy(streams[0]);
	vmmx_ctx_destroy(ctx);
	_exit(freport->fails > 100 ? 100 : freport->fails);
}

struct fork_stats {
	unsigned int forks, hung, hung_tsan, failed;
	uint64_t inflight[NOPS]; /* forks that landed during each kind */
};

/* Fork once; wait for the child at most CHILD_TIMEOUT_S, then take its stack and kill it. */
static void fork_once(struct fork_stats *fs)
{
	int status;
	pid_t pid;

	memset(freport, 0, sizeof(*freport));
	pid = fork();
	if (pid < 0)
		bail("fork: %s", strerror(errno));
	if (!pid)
		child_main();
	fs->forks++;
	status = test_wait_child(pid, CHILD_TIMEOUT_S);
	if (status == TEST_HUNG_IN_TSAN) {
		if (!fs->hung_tsan++)
			diag("fork %u: the child hung inside ThreadSanitizer's runtime (its stack "
			     "above)",
			     fs->forks);
		return;
	}
	if (status == -1 || status == -2 || WIFSIGNALED(status)) {
		if (!fs->hung++)
			diag("fork %u: the child hung (status %#x)", fs->forks, status);
		return;
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status)) {
		if (!fs->failed++)
			diag("fork %u: the child failed %d times; first: %s", fs->forks,
			     freport->fails, freport->why);
		return;
	}
	for (int k = 0; k < NOPS; k++)
		if (freport->inflight & (1u << k))
			fs->inflight[k]++;
}

/*
 * A context on the suite's backend.  Not test_ctx(): its log sink is for the
 * main thread only, and here every thread logs; errors go to standard error.
 */
static struct vmmx_ctx *open_ctx(const char *const *vars)
{
	struct vmmx_config cfg;
	struct vmmx_ctx *c;

	vmmx_config_init(&cfg);
	cfg.flags = VMMX_CONFIG_NO_ENV;
	cfg.backend = test_backend();
	cfg.log = "error";
	cfg.vars = vars;
	if (vmmx_ctx_create(&cfg, &c))
		bail("vmmx_ctx_create on %s: %s", test_backend(), vmmx_last_error());
	return c;
}

static int torture(int nthreads, double seconds, uint64_t seed, uint32_t ppm, bool verified)
{
	/* -V: promoted chunks keep verified host copies, taken and dropped
	 * while other threads copy into the same buffers. */
	const char *const vars[] = { "VMMX_DEVICE_LIMIT=96MiB", "VMMX_CHUNK_MAX=4MiB",
				     "VMMX_CACHE_LIMIT=32MiB",
				     verified ? "VMMX_HOST_COPIES=verified" : NULL, NULL };
	static struct worker w[MAX_THREADS];
	uint64_t total[NOPS] = { 0 }, failed[NOPS] = { 0 }, perr = 0, unexp = 0, all = 0;
	struct fork_stats fs = { 0 };
	struct vmm_counts vc;
	struct vmm *v;
	double t0, el, next_fork;
	int kinds = 0;

	plan(12);
	freport = mmap(NULL, sizeof(*freport), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);
	if (freport == MAP_FAILED)
		bail("mmap: %s", strerror(errno));
	workers = w;
	nworkers = nthreads;
	ctx = open_ctx(vars);
	v = vmmx__ctx_vmm(ctx);
	if (vmmx_alloc_create(ctx, NULL, &alloc))
		bail("vmmx_alloc_create: %s", vmmx_last_error());
	for (int i = 0; i < ALLOC_STREAMS; i++)
		if (vmmx_stream_create(ctx, &streams[i]))
			bail("vmmx_stream_create: %s", vmmx_last_error());
	for (int i = 0; i < SHARED; i++) {
		shared[i].seed = (uint32_t)(seed + 1000 + (uint64_t)i);
		pthread_rwlock_init(&shared[i].rw, NULL);
		if (vmmx_buf_create(ctx, SHARED_CAP, NULL, &shared[i].buf) ||
		    vmmx_buf_resize(shared[i].buf, SHARED_MIN))
			bail("shared buffer: %s", vmmx_last_error());
	}
	for (int i = 0; i < nthreads; i++) {
		w[i].id = i;
		w[i].rng = seed * 0x9E3779B97F4A7C15ull + (uint64_t)i + 1;
		w[i].seed = (uint32_t)(seed + (uint64_t)i);
		w[i].host = malloc(WINDOW);
		w[i].reg = aligned_alloc(4096, REG_LEN);
		if (!w[i].host || !w[i].reg)
			bail("out of memory");
		for (int k = 0; k < PRIVATE; k++)
			if (vmmx_buf_create(ctx, PRIVATE_CAP, NULL, &w[i].p[k].buf))
				bail("private buffer: %s", vmmx_last_error());
	}
	for (int i = 0; i < SHARED; i++)
		for (size_t o = 0; o < SHARED_MIN; o += WINDOW)
			put(&w[0], vmmx_buf_ptr(shared[i].buf), o, WINDOW, shared[i].seed);

	vmm_fault_random(v, ppm, seed);
	t0 = now();
	for (int i = 0; i < nthreads; i++)
		pthread_create(&w[i].tid, NULL, worker_main, &w[i]);
	next_fork = t0 + FORK_EVERY;
	while (now() - t0 < seconds && !__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		sleep_s(0.01);
		if (now() >= next_fork) {
			fork_once(&fs);
			next_fork = now() + FORK_EVERY;
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < nthreads; i++)
		pthread_join(w[i].tid, NULL);
	el = now() - t0;
	vmm_fault_disarm_all(v);
	vmm_counts(v, &vc);

	/* Faults off: every buffer whole, then everything goes. */
	for (int i = 0; i < SHARED; i++)
		for (size_t o = 0; o < SHARED_MIN; o += WINDOW)
			check(&w[0], vmmx_buf_ptr(shared[i].buf), o, WINDOW, shared[i].seed,
			      "the run (final)");
	for (int i = 0; i < nthreads; i++)
		for (int k = 0; k < PRIVATE; k++)
			for (size_t o = 0; o < w[i].p[k].size; o += WINDOW)
				check(&w[i], vmmx_buf_ptr(w[i].p[k].buf), o, WINDOW, w[i].seed,
				      "the run (final)");
	for (int i = 0; i < nthreads; i++)
		for (int k = 0; k < ALLOC_SLOTS; k++)
			if (w[i].blk[k].p)
				alloc_release(&w[i], &w[i].blk[k]);
	for (int i = 0; i < nthreads; i++) {
		for (int k = 0; k < NOPS; k++) {
			total[k] += w[i].done[k];
			failed[k] += w[i].failed[k];
		}
		perr += w[i].pattern_errors;
		unexp += w[i].unexpected;
	}
	diag("%d threads, %.1f s, seed %llu, %u ppm of driver calls failed on purpose (%s backend)",
	     nthreads, el, (unsigned long long)seed, ppm, test_backend());
	diag("%-10s %12s %10s %12s", "operation", "done", "failed", "per second");
	for (int k = 0; k < NOPS; k++) {
		all += total[k];
		diag("%-10s %12llu %10llu %12.0f", op_names[k], (unsigned long long)total[k],
		     (unsigned long long)failed[k], (double)total[k] / el);
	}
	diag("%-10s %12llu %10s %12.0f", "all", (unsigned long long)all, "", (double)all / el);
	diag("driver calls failed by the fault layer: %llu", (unsigned long long)vc.injected);
	if (verified) {
		struct vmmx_stats st = test_stats(ctx);

		diag("verified host copies: %llu checksums, %llu copies saved, %llu found written",
		     (unsigned long long)st.checksums, (unsigned long long)st.verified_saved,
		     (unsigned long long)st.verified_changed);
	}
	diag("%u forks; operations in progress at the forks (per kind, summed over threads):",
	     fs.forks);
	for (int k = 0; k < OP_CHECK; k++) {
		kinds += fs.inflight[k] > 0;
		diag("  %-10s %6llu", op_names[k], (unsigned long long)fs.inflight[k]);
	}

	ok(all > 0 && total[OP_RESIZE] && total[OP_CHECK],
	   "the threads ran operations of every main kind");
	ok(ppm == 0 || vc.injected > 0, "the fault layer failed %llu driver calls",
	   (unsigned long long)vc.injected);
	/*
	 * A child that waits inside ThreadSanitizer's own runtime (a TSan
	 * build only; test_wait_child()) is not a lock of ours: a few are
	 * allowed, shown with their stacks, and none of ours or libc's.
	 */
	if (fs.hung_tsan)
		diag("%u children hung inside ThreadSanitizer's runtime, on a lock of its "
		     "allocator another thread held at the fork: not counted (this runtime does "
		     "not take those locks around fork())",
		     fs.hung_tsan);
	ok(fs.forks > 0 && !fs.hung && fs.hung_tsan <= fs.forks / 20,
	   "%u forks while the threads ran: no child hung on a lock of ours or libc's (waited "
	   "%d s each; %u inside ThreadSanitizer's runtime, at most 1 in 20)",
	   fs.forks, CHILD_TIMEOUT_S, fs.hung_tsan);
	is_uint(0, fs.failed,
		"in every child each call on the parent's context, buffers, stream and allocator "
		"failed at once with -VMMX_ENODRIVER, without a driver call");
	ok(fs.forks < 10 || (fs.inflight[OP_ALLOC] > 0 && kinds >= OP_CHECK / 2),
	   "the forks landed in the middle of operations: %d kinds of %d, the allocator's %llu "
	   "times",
	   kinds, OP_CHECK, (unsigned long long)fs.inflight[OP_ALLOC]);
	is_uint(0, perr, "zero pattern errors");
	is_uint(0, unexp, "zero unexpected errors");
	{
		struct vmmx_alloc_stats as = { .size = sizeof(as) };

		ok(!vmmx_alloc_stats(alloc, &as) && as.allocated_bytes == 0 &&
			   total[OP_ALLOC] > 0,
		   "the framework allocator ran %llu operations and holds no live block after "
		   "the last free (%llu bytes)",
		   (unsigned long long)total[OP_ALLOC], (unsigned long long)as.allocated_bytes);
	}
	vmmx_alloc_destroy(alloc);
	for (int i = 0; i < ALLOC_STREAMS; i++)
		vmmx_stream_destroy(streams[i]);

	for (int i = 0; i < nthreads; i++) {
		for (int k = 0; k < PRIVATE; k++)
			vmmx_buf_destroy(w[i].p[k].buf);
		free(w[i].host);
		free(w[i].reg);
	}
	for (int i = 0; i < SHARED; i++) {
		vmmx_buf_destroy(shared[i].buf);
		pthread_rwlock_destroy(&shared[i].rw);
	}
	vmmx_ctx_trim(ctx, 0);
	vmm_counts(v, &vc);
	is_int(0, vc.reservations, "live reservations back to zero");
	is_int(0, vc.handles, "live handles back to zero");
	is_int(0, vc.mapped_bytes, "mapped bytes back to zero");
	ok(vc.registrations == 0 && vc.streams == 0, "registrations and streams back to zero");
	vmmx_ctx_destroy(ctx);
	munmap(freport, sizeof(*freport));
	return tap_done();
}

/* ---- lookup throughput ---- */

#define LOOKUP_SIZE (256 * MiB)

struct looker {
	pthread_t tid;
	struct vmmx_buf *buf;
	uint64_t n, errors;
};

static void *looker_main(void *arg)
{
	struct looker *l = arg;
	const char *base = vmmx_buf_ptr(l->buf);
	struct vmmx_chunk_info ci;
	uint64_t x = (uint64_t)(uintptr_t)l | 1, n = 0, errors = 0;

	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED)) {
		for (int i = 0; i < 1024; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			if (vmmx_lookup(ctx, base + x % LOOKUP_SIZE, &ci) || ci.buf != l->buf)
				errors++;
		}
		n += 1024;
	}
	l->n = n;
	l->errors = errors;
	return NULL;
}

static void *resizer_main(void *arg)
{
	struct vmmx_buf *b = arg;

	for (unsigned int i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++)
		vmmx_buf_resize(b, LOOKUP_SIZE + (i % 64) * 2 * MiB);
	return NULL;
}

static int lookup_bench(int maxthreads, double seconds)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", NULL };
	static struct looker l[MAX_THREADS];
	struct vmmx_buf *b;
	pthread_t rt;
	int steps = 0;

	for (int t = 1; t <= maxthreads; t *= 2)
		steps++;
	plan((unsigned long)steps);
	ctx = open_ctx(vars);
	if (vmmx_buf_create(ctx, 2 * LOOKUP_SIZE, NULL, &b) || vmmx_buf_resize(b, LOOKUP_SIZE))
		bail("buffer: %s", vmmx_last_error());
	diag("vmmx_lookup over %zu chunks of 2 MiB while a writer resizes the tail (%s backend)",
	     LOOKUP_SIZE / (2 * MiB), test_backend());
	for (int t = 1; t <= maxthreads; t *= 2) {
		uint64_t n = 0, errors = 0;
		double t0, el;

		__atomic_store_n(&stop, 0, __ATOMIC_RELAXED);
		pthread_create(&rt, NULL, resizer_main, b);
		t0 = now();
		for (int i = 0; i < t; i++) {
			l[i].buf = b;
			pthread_create(&l[i].tid, NULL, looker_main, &l[i]);
		}
		sleep_s(seconds);
		__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
		for (int i = 0; i < t; i++) {
			pthread_join(l[i].tid, NULL);
			n += l[i].n;
			errors += l[i].errors;
		}
		el = now() - t0;
		pthread_join(rt, NULL);
		ok(!errors, "%2d thread%s: %6.2f M lookups/s/thread, %7.2f M/s in all, %llu wrong",
		   t, t == 1 ? " " : "s", (double)n / t / el / 1e6, (double)n / el / 1e6,
		   (unsigned long long)errors);
	}
	vmmx_buf_destroy(b);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}

static void usage(void)
{
	fprintf(
	    stderr,
	    "usage: stress [-m torture|lookup] [-t THREADS] [-d SECONDS] [-s SEED] [-f PPM] [-V] "
	    "[-T MAXTHREADS]\n"
	    "  torture: THREADS (default: the cores, at least 8) run random operations for\n"
	    "           SECONDS (default $STRESS_DURATION or 60) with PPM millionths of driver\n"
	    "           calls failed (default 10000 = 1%%), seeded by SEED (default 1); -V:\n"
	    "           with VMMX_HOST_COPIES=verified\n"
	    "  lookup:  vmmx_lookup per thread for 1, 2, 4 ... MAXTHREADS (default 16) threads,\n"
	    "           SECONDS each (default 2)\n");
	exit(2);
}

int main(int argc, char **argv)
{
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	int threads = cores > 8 ? (int)cores : 8, maxthreads = 16, opt;
	const char *mode = "torture", *env = getenv("STRESS_DURATION");
	double seconds = -1;
	uint64_t seed = 1;
	uint32_t ppm = 10000;
	bool verified = false;

	while ((opt = getopt(argc, argv, "m:t:d:s:f:T:Vh")) != -1) {
		switch (opt) {
		case 'm':
			mode = optarg;
			break;
		case 't':
			threads = atoi(optarg);
			break;
		case 'd':
			seconds = atof(optarg);
			break;
		case 's':
			seed = strtoull(optarg, NULL, 0);
			break;
		case 'f':
			ppm = (uint32_t)strtoul(optarg, NULL, 0);
			break;
		case 'T':
			maxthreads = atoi(optarg);
			break;
		case 'V':
			verified = true;
			break;
		default:
			usage();
		}
	}
	if (threads < 1 || threads > MAX_THREADS || maxthreads < 1 || maxthreads > MAX_THREADS)
		usage();
	if (!strcmp(mode, "lookup"))
		return lookup_bench(maxthreads, seconds > 0 ? seconds : 2);
	if (strcmp(mode, "torture"))
		usage();
	if (seconds < 0)
		seconds = env ? atof(env) : 60;
	return torture(threads, seconds, seed, ppm, verified);
}
