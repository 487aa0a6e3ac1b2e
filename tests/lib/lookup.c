// SPDX-License-Identifier: MIT
/* lookup.c - vmmx_lookup maps an address to its buffer and chunk. */
#include "config.h"

#include <stdio.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

int main(void)
{
	static const char *const vars[] = { "VMMX_DEVICE_LIMIT=6MiB", "VMMX_CHUNK_MAX=4MiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_chunk_info info, c[8];
	struct vmmx_buf *a, *b;
	size_t n;
	char *p, want[128];
	int right = 0;

	plan(23);
	vmmx_buf_create(ctx, 16 * MiB, NULL, &a);
	vmmx_buf_create(ctx, 16 * MiB, "host", &b);
	is_err(0, vmmx_buf_resize(a, 10 * MiB), "buffer of 10 MiB: 6 device + 4 host");
	is_err(0, vmmx_buf_resize(b, 2 * MiB), "second buffer of 2 MiB");
	p = vmmx_buf_ptr(a);
	vmmx_buf_chunks(a, c, 8, &n);
	is_uint(3, n, "3 chunks (4 MiB device, 2 MiB device, 4 MiB host)");
	for (size_t i = 0; i < n; i++) {
		char *probe[] = { c[i].base, (char *)c[i].base + c[i].size / 2,
				  (char *)c[i].base + c[i].size - 1 };

		for (int j = 0; j < 3; j++)
			right += !vmmx_lookup(ctx, probe[j], &info) && info.base == c[i].base &&
				 info.size == c[i].size && info.loc.kind == c[i].loc.kind &&
				 info.loc.id == c[i].loc.id && info.buf == a;
	}
	is_int(9, right, "vmmx_lookup of the first, middle and last byte of each chunk");
	is_err(0, vmmx_lookup(ctx, p + 7 * MiB, &info), "vmmx_lookup in the host chunk");
	ok(info.loc.kind == VMMX_LOC_HOST, "vmmx_lookup reports the host location");
	is_err(0, vmmx_lookup(ctx, p, &info), "vmmx_lookup at the buffer's start");
	ok(info.loc.kind == VMMX_LOC_DEVICE && info.loc.id == 0, "vmmx_lookup reports device 0");
	is_err(0, vmmx_lookup(ctx, vmmx_buf_ptr(b), &info), "vmmx_lookup in the second buffer");
	ok(info.buf == b, "vmmx_lookup names the second buffer");
	is_err(-VMMX_EFAULT, vmmx_lookup(ctx, p + 10 * MiB, &info), "vmmx_lookup past the size: EFAULT");
	like(vmmx_last_error(), "past its size", "the message says so");
	is_err(-VMMX_ENOENT, vmmx_lookup(ctx, &info, &info), "vmmx_lookup of a stack address: ENOENT");
	snprintf(want, sizeof(want), "vmmx_lookup: %p is in no buffer", (void *)&info);
	is_string(want, vmmx_last_error(), "the message names the address, written when asked for");
	is_string(want, vmmx_last_error(), "... and the same when asked again");
	vmmx_lookup(ctx, (char *)&info + 8, &info);
	is_err(0, vmmx_lookup(ctx, p, &info), "a lookup that succeeds after a miss");
	is_string("", vmmx_last_error(), "... leaves no message of the miss");
	vmmx_lookup(ctx, (char *)&info + 16, &info);
	is_err(-VMMX_EFAULT, vmmx_lookup(ctx, p + 10 * MiB, &info), "a miss, then another error");
	like(vmmx_last_error(), "past its size", "... the other error's message");
	is_err(-VMMX_EINVAL, vmmx_lookup(ctx, p, NULL), "vmmx_lookup with NULL info");
	vmmx_buf_resize(a, 4 * MiB);
	is_err(-VMMX_EFAULT, vmmx_lookup(ctx, p + 7 * MiB, &info), "vmmx_lookup after a shrink: EFAULT");
	vmmx_buf_destroy(a);
	is_err(-VMMX_ENOENT, vmmx_lookup(ctx, p, &info), "vmmx_lookup after vmmx_buf_destroy: ENOENT");
	is_err(0, vmmx_lookup(ctx, vmmx_buf_ptr(b), &info), "the other buffer is still found");
	vmmx_buf_destroy(b);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
