// SPDX-License-Identifier: MIT
/*
 * vmmx_buf_destroy() racing the library's own reclaim of host copies
 * (vmmx_ctx_trim(), as a grow short of host memory makes): the reclaim
 * finds the buffer in the context's list and takes its lock, then drops
 * its host copies; a destroy that did not wait for that lock released the
 * same handles again and freed the buffer under it (a double free, found
 * by a review).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

static const struct vmmx_loc DEV = { VMMX_LOC_DEVICE, 0 };
static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", "VMMX_CACHE_LIMIT=0", NULL };
static int stop;
static struct vmmx_ctx *ctx;

static void *trimmer(void *arg)
{
	(void)arg;
	while (!__atomic_load_n(&stop, __ATOMIC_RELAXED))
		vmmx_ctx_trim(ctx, 0);
	return NULL;
}

int main(void)
{
	pthread_t th;
	int bad = 0;

	plan(2);
	ctx = test_ctx(vars);
	if (pthread_create(&th, NULL, trimmer, NULL))
		bail("pthread_create failed");
	for (int i = 0; i < 300 && !bad; i++) {
		struct vmmx_buf *buf;

		if (vmmx_buf_create(ctx, 16 * MiB, "host", &buf) || vmmx_buf_resize(buf, 16 * MiB))
			bail("create: %s", vmmx_last_error());
		/* Read-mostly: the move to the device keeps the host copy the trim drops. */
		if (vmmx_buf_advise(buf, 0, 16 * MiB, VMMX_ADVISE_READ_MOSTLY) ||
		    vmmx_buf_migrate(buf, 0, 16 * MiB, DEV, NULL))
			bail("advise or migrate: %s", vmmx_last_error());
		vmmx_buf_destroy(buf);
		if (strstr(test_log(), "unknown or released handle"))
			bad = 1;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
	pthread_join(th, NULL);
	ok(!bad, "no handle released twice");
	if (bad)
		diag("%s", test_log());
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
	return 0;
}
