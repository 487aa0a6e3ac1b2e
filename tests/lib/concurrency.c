// SPDX-License-Identifier: MIT
/*
 * concurrency.c - 8 threads call vmmx_lookup, vmmx_buf_residency,
 * vmmx_buf_chunks and vmmx_buf_size without locks while the main thread
 * resizes the buffer and creates and destroys others.  Every answer must be
 * self-consistent; under ASan a reader touching a freed table would abort.
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#define READERS 8
#define CAP (64 * MiB)

static struct vmmx_ctx *ctx;
static struct vmmx_buf *buf;
static int stop;

struct reader {
	pthread_t th;
	unsigned seed;
	unsigned long lookups, found, wrong;
};

static void *reader(void *arg)
{
	struct reader *r = arg;
	char *base = vmmx_buf_ptr(buf);

	while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
		size_t off = (size_t)rand_r(&r->seed) % CAP, size, n;
		struct vmmx_chunk_info info, c[64];
		struct vmmx_residency res;
		int err;

		err = vmmx_lookup(ctx, base + off, &info);
		r->lookups++;
		if (!err) {
			r->found++;
			if (info.buf != buf || (char *)info.base > base + off ||
			    (char *)info.base + info.size <= base + off || info.size % (2 * MiB) ||
			    (info.loc.kind != VMMX_LOC_DEVICE && info.loc.kind != VMMX_LOC_HOST))
				r->wrong++;
		} else if (err != -VMMX_EFAULT) {
			r->wrong++;
		}
		size = vmmx_buf_size(buf);
		err = vmmx_buf_residency(buf, 0, size, &res);
		/* The size may shrink between the two calls: ERANGE is then right. */
		if ((!err && res.device + res.host != size) || (err && err != -VMMX_ERANGE))
			r->wrong++;
		if (!vmmx_buf_chunks(buf, c, 64, &n)) {
			size_t end = 0;

			for (size_t i = 0; i < n && i < 64; i++) {
				if ((char *)c[i].base != base + end)
					r->wrong++;
				end += c[i].size;
			}
		} else {
			r->wrong++;
		}
		/* lookups outside any buffer */
		if (vmmx_lookup(ctx, &r->seed, &info) != -VMMX_ENOENT)
			r->wrong++;
	}
	return NULL;
}

int main(void)
{
	static const char *const vars[] = { "VMMX_DEVICE_LIMIT=20MiB", "VMMX_CHUNK_MAX=4MiB", NULL };
	struct reader r[READERS];
	unsigned long lookups = 0, found = 0, wrong = 0;
	int resize_err = 0;
	unsigned seed = 7;

	plan(4);
	ctx = test_ctx(vars);
	if (vmmx_buf_create(ctx, CAP, NULL, &buf))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	for (int i = 0; i < READERS; i++) {
		r[i] = (struct reader){ .seed = (unsigned)i + 1 };
		pthread_create(&r[i].th, NULL, reader, &r[i]);
	}
	for (int i = 0; i < 300; i++) {
		struct vmmx_buf *other;

		if (vmmx_buf_resize(buf, (size_t)(rand_r(&seed) % 33) * 2 * MiB))
			resize_err++;
		/* Buffers coming and going change the context's list under the readers. */
		if (!vmmx_buf_create(ctx, 8 * MiB, "host", &other)) {
			vmmx_buf_resize(other, 2 * MiB);
			vmmx_buf_destroy(other);
		}
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < READERS; i++) {
		pthread_join(r[i].th, NULL);
		lookups += r[i].lookups;
		found += r[i].found;
		wrong += r[i].wrong;
	}
	is_int(0, resize_err, "300 resizes succeeded while %d threads read", READERS);
	ok(lookups > 1000, "readers made %lu lookups", lookups);
	ok(found > 0 && found < lookups, "some hit mapped chunks, some the unmapped tail (%lu of %lu)",
	   found, lookups);
	is_uint(0, wrong, "every lookup, residency and chunk list was self-consistent");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
