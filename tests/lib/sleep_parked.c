// SPDX-License-Identifier: MIT
/* A parked buffer put to sleep (VMMX_SLEEP_OFFLOAD through a stash). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

static const struct vmmx_loc DEV = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };
static const char *const verified[] = { "VMMX_CHUNK_MAX=4MiB", "VMMX_HOST_COPIES=verified",
					NULL };

/* A parked buffer put to sleep (offload, not read-mostly: the stash path). */
static void sleep_parked(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 1);
	uint8_t *want = test_pattern(16 * MiB, 1), *p = vmmx_buf_ptr(buf);
	const char *tags[] = { "t" };
	int err;

	is_err(0, vmmx_buf_set_tag(buf, "t"), "tagged");
	is_err(0, vmmx_prefetch(ctx, p, 16 * MiB, DEV, NULL), "promoted");
	is_err(0, vmmx_park(ctx, p, 16 * MiB, HOST, NULL, NULL), "parked");
	err = vmmx_sleep(ctx, tags, 1, VMMX_SLEEP_OFFLOAD, NULL, NULL);
	is_err(0, err, "vmmx_sleep of a parked buffer");
	if (err)
		diag("error: %s", vmmx_last_error());
	(void)vmmx_wake(ctx, tags, 1, NULL);
	(void)vmmx_unpark(ctx, p, 16 * MiB, NULL);
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact after the wake");
	vmmx_buf_destroy(buf);
	free(want);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

int main(void)
{
	plan(6);
	sleep_parked();
	return 0;
}
