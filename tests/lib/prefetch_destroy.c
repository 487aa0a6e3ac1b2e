// SPDX-License-Identifier: MIT
/*
 * prefetch_destroy.c - vmmx_prefetch() and vmmx_park() by address while the
 * main thread destroys the buffer under them and makes another, as a
 * framework's allocator frees memory that vmmx-run's placement threads are
 * moving.  Every fourth call moves a buffer that lives to the end instead,
 * which a fourth thread copies out of meanwhile (vmmx_memcpy(), which pins
 * it while a move quiesces it).  The copier keeps off the buffers being
 * destroyed: a copy from memory its caller frees meanwhile is the caller's
 * bug, which no library can catch (vmmx_memcpy() takes foreign memory, and
 * a copy begun as the range goes reads it unmapped: such copies faulted
 * on an H200, SIGSEGV in cuMemcpy or CUDA_ERROR_LAUNCH_FAILED).  Each
 * call returns 0, or -VMMX_ENOENT (the address in no buffer any more) or
 * -VMMX_EFAULT (past the size of a new buffer not grown yet);
 * a destroy waits for a move under way on its buffer, so nothing is used
 * after its free (the sanitizer build aborts on that: CI runs it).  The
 * window it guards is narrow, between the lookup and the per-buffer call:
 * without the hold this test passed in five runs here (ASan too), where
 * vmmx-run's launchclient place-churn crashed in 3 runs of 24.
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#define MOVERS 3
#define ROUNDS 300
#define SIZE (16 * MiB)

static struct vmmx_ctx *ctx;
static void *keep;    /* the buffer that lives to the end */
static uintptr_t cur; /* the newest buffer's address; atomic */
static unsigned gen;  /* buffers made (one may have the address of the one before); atomic */
static int stop;

struct mover {
	pthread_t th;
	int id;
	unsigned long calls, done, gone, wrong, kept;
	char why[256];
};

static void *mover(void *arg)
{
	static const struct vmmx_loc host = { VMMX_LOC_HOST, 0 }, dev = { VMMX_LOC_DEVICE, 0 };
	struct mover *m = arg;

	for (unsigned i = 0; !__atomic_load_n(&stop, __ATOMIC_ACQUIRE); i++) {
		unsigned g = __atomic_load_n(&gen, __ATOMIC_ACQUIRE);
		bool kept = (i + (unsigned)m->id) % 4 == 0;
		void *p = kept ? keep : (void *)__atomic_load_n(&cur, __ATOMIC_ACQUIRE);
		size_t parked;
		int err;

		if (!p) {
			sched_yield();
			continue;
		}
		if ((i + (unsigned)m->id) % 3 == 0)
			err = vmmx_park(ctx, p, SIZE, host, NULL, &parked);
		else
			err = vmmx_prefetch(ctx, p, SIZE, i % 2 ? host : dev, NULL);
		m->calls++;
		if (!err) {
			m->done++;
			m->kept += kept;
		} else if (!kept && (err == -VMMX_ENOENT || err == -VMMX_EFAULT)) {
			/* Gone: wait for the next buffer. */
			m->gone++;
			while (__atomic_load_n(&gen, __ATOMIC_ACQUIRE) == g &&
			       !__atomic_load_n(&stop, __ATOMIC_ACQUIRE))
				sched_yield();
		} else if (!m->wrong++) {
			strncpy(m->why, vmmx_last_error(), sizeof(m->why) - 1);
		}
	}
	return NULL;
}

static unsigned long copies; /* the copier's, read after it ends */

/* Copies out of the buffer that lives, pinning it while the movers may quiesce it. */
static void *copier(void *arg)
{
	static char out[4096];
	unsigned long *wrong = arg;

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		int err = vmmx_memcpy(ctx, out, keep, sizeof(out));

		if (!err)
			copies++;
		else if (err != -VMMX_EFAULT) /* parked: refused by name, right */
			(*wrong)++;
	}
	return NULL;
}

int main(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", "VMMX_HOST_COPIES=verified",
					    "VMMX_DEVICE_LIMIT=64MiB", NULL };
	struct mover m[MOVERS];
	unsigned long calls = 0, done = 0, gone = 0, wrong = 0;
	unsigned seed = 11;
	int made = 0;

	pthread_t cth;
	unsigned long copy_wrong = 0, kept = 0;
	struct vmmx_buf *kbuf;

	plan(6);
	ctx = test_ctx(vars);
	if (vmmx_buf_create(ctx, SIZE, "device", &kbuf) || vmmx_buf_resize(kbuf, SIZE))
		bail("the buffer that lives: %s", vmmx_last_error());
	keep = vmmx_buf_ptr(kbuf);
	pthread_create(&cth, NULL, copier, &copy_wrong);
	for (int i = 0; i < MOVERS; i++) {
		m[i] = (struct mover){ .id = i };
		pthread_create(&m[i].th, NULL, mover, &m[i]);
	}
	for (int r = 0; r < ROUNDS; r++) {
		struct vmmx_buf *buf;

		if (vmmx_buf_create(ctx, SIZE, "device", &buf))
			continue;
		if (vmmx_buf_resize(buf, SIZE)) {
			vmmx_buf_destroy(buf);
			continue;
		}
		made++;
		__atomic_store_n(&cur, (uintptr_t)vmmx_buf_ptr(buf), __ATOMIC_RELEASE);
		__atomic_add_fetch(&gen, 1, __ATOMIC_RELEASE);
		usleep((useconds_t)(rand_r(&seed) % 2000));
		vmmx_buf_destroy(buf); /* the movers may be in the middle of moving it */
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	pthread_join(cth, NULL);
	for (int i = 0; i < MOVERS; i++) {
		pthread_join(m[i].th, NULL);
		calls += m[i].calls;
		done += m[i].done;
		gone += m[i].gone;
		wrong += m[i].wrong;
		kept += m[i].kept;
		if (m[i].wrong)
			diag("mover %d: %lu other errors, the first: %s", i, m[i].wrong, m[i].why);
	}
	is_int(ROUNDS, made, "%d buffers of 16 MiB made, each destroyed while %d threads move it",
	       ROUNDS, MOVERS);
	ok(done > 0, "%lu of %lu moves and parks done", done, calls);
	ok(gone > 0, "%lu found the buffer gone (-VMMX_ENOENT) or not grown (-VMMX_EFAULT)", gone);
	is_uint(0, wrong, "no other error");
	ok(kept > 0, "%lu of the moves and parks done on the buffer that lives", kept);
	ok(copy_wrong == 0 && copies > 0,
	   "%lu copies out of it meanwhile (pins during the moves' quiesce): %lu failed "
	   "otherwise than parked, none hung", copies, copy_wrong);
	vmmx_buf_destroy(kbuf);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
