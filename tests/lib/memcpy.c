// SPDX-License-Identifier: MIT
/*
 * memcpy.c - vmmx_memcpy and vmmx_memset split at every change of location
 * (one driver copy across a device/host boundary crashed the CUDA driver;
 * the sim backend refuses such a copy, so an unsplit copy fails here).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

int main(void)
{
	static const char *const vars[] = { "VMMX_DEVICE_LIMIT=8MiB", "VMMX_CHUNK_MAX=4MiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *a, *b;
	unsigned char *host = malloc(16 * MiB), *p;
	uint64_t before;
	size_t bad;

	plan(29);
	if (!host)
		bail("out of memory");
	vmmx_buf_create(ctx, 32 * MiB, NULL, &a);
	vmmx_buf_create(ctx, 32 * MiB, "host", &b);
	is_err(0, vmmx_buf_resize(a, 16 * MiB), "buffer a: 8 MiB device + 8 MiB host");
	is_err(0, vmmx_buf_resize(b, 16 * MiB), "buffer b: 16 MiB host");
	p = vmmx_buf_ptr(a);

	/* host memory -> buffer, across the boundary at 8 MiB */
	for (size_t i = 0; i < 4 * MiB; i++)
		host[i] = test_pattern_byte(6 * MiB + i, 1);
	before = test_driver_calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_memcpy(ctx, p + 6 * MiB, host, 4 * MiB), "vmmx_memcpy host -> device/host straddle");
	is_uint(2, test_driver_calls(ctx, VMMX_OP_COPY) - before, "split into 2 driver copies (device run, host run)");
	is_uint(SIZE_MAX, test_check(ctx, p, 6 * MiB, 4 * MiB, 1), "the straddling range reads back");

	/* whole buffer both ways: 4 MiB chunks coalesce into one run per location */
	is_err(0, test_fill(ctx, p, 0, 16 * MiB, 2), "vmmx_memcpy into the whole buffer");
	before = test_driver_calls(ctx, VMMX_OP_COPY);
	memset(host, 0, 16 * MiB);
	is_err(0, vmmx_memcpy(ctx, host, p, 16 * MiB), "vmmx_memcpy of the whole buffer to host memory");
	is_uint(2, test_driver_calls(ctx, VMMX_OP_COPY) - before, "chunks of one location coalesce: 2 driver copies for 4 chunks");
	bad = SIZE_MAX;
	for (size_t i = 0; i < 16 * MiB && bad == SIZE_MAX; i++)
		if (host[i] != test_pattern_byte(i, 2))
			bad = i;
	is_uint(SIZE_MAX, bad, "every byte right");

	/* buffer -> buffer with different layouts: a [6, 10) -> b [5, 9) */
	before = test_driver_calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_memcpy(ctx, (char *)vmmx_buf_ptr(b) + 5 * MiB, p + 6 * MiB, 4 * MiB),
	       "vmmx_memcpy between two buffers");
	is_uint(2, test_driver_calls(ctx, VMMX_OP_COPY) - before, "split where the source changes location");
	memset(host, 0, 4 * MiB);
	vmmx_memcpy(ctx, host, (char *)vmmx_buf_ptr(b) + 5 * MiB, 4 * MiB);
	bad = SIZE_MAX;
	for (size_t i = 0; i < 4 * MiB && bad == SIZE_MAX; i++)
		if (host[i] != test_pattern_byte(6 * MiB + i, 2))
			bad = i;
	is_uint(SIZE_MAX, bad, "the copy between buffers is right");

	/* memset across the boundary */
	before = test_driver_calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_memset(ctx, p + 7 * MiB, 0xa5, 2 * MiB), "vmmx_memset across the boundary");
	memset(host, 0, 4 * MiB);
	vmmx_memcpy(ctx, host, p + 6 * MiB, 4 * MiB);
	ok(host[MiB - 1] == test_pattern_byte(7 * MiB - 1, 2) && host[MiB] == 0xa5 &&
	   host[3 * MiB - 1] == 0xa5 && host[3 * MiB] == test_pattern_byte(9 * MiB, 2),
	   "vmmx_memset wrote exactly its range");

	/* memset of host chunks: one driver memset per chunk, since the driver
	 * refuses one that runs from one host allocation into another */
	before = test_driver_calls(ctx, VMMX_OP_MEMSET);
	is_err(0, vmmx_memset(ctx, vmmx_buf_ptr(b), 0x3c, 16 * MiB), "vmmx_memset of 4 host chunks");
	is_uint(4, test_driver_calls(ctx, VMMX_OP_MEMSET) - before, "one driver memset per host chunk");
	memset(host, 0, 16 * MiB);
	vmmx_memcpy(ctx, host, vmmx_buf_ptr(b), 16 * MiB);
	bad = SIZE_MAX;
	for (size_t i = 0; i < 16 * MiB && bad == SIZE_MAX; i++)
		if (host[i] != 0x3c)
			bad = i;
	is_uint(SIZE_MAX, bad, "every byte of the 4 host chunks set");
	before = test_driver_calls(ctx, VMMX_OP_MEMSET);
	is_err(0, vmmx_memset(ctx, p, 0x5d, 16 * MiB), "vmmx_memset of buffer a: 2 device + 2 host chunks");
	is_uint(3, test_driver_calls(ctx, VMMX_OP_MEMSET) - before,
		"device chunks join into one driver memset, host chunks do not");
	/* What the sim models, the H100's driver does (CUDA_ERROR_INVALID_VALUE). */
	is_err(-VMMX_EINVAL, vmm_memset(vmmx__ctx_vmm(ctx), (char *)vmmx_buf_ptr(b) + 4 * MiB - 4096, 0, 8192),
	       "one driver memset from one host allocation into another is refused");

	/* errors */
	is_err(-VMMX_EFAULT, vmmx_memcpy(ctx, host, p + 15 * MiB, 2 * MiB),
	       "vmmx_memcpy running past the buffer's size");
	like(vmmx_last_error(), "past its size", "the message says the range runs past the size");
	is_err(-VMMX_EFAULT, vmmx_memset(ctx, p + 20 * MiB, 0, 1), "vmmx_memset in the unmapped tail");
	is_err(-VMMX_EINVAL, vmmx_memcpy(ctx, p, p + MiB, 2 * MiB), "overlapping ranges refused");
	is_err(-VMMX_EINVAL, vmmx_memcpy(ctx, NULL, host, 1), "NULL destination refused");
	is_err(0, vmmx_memcpy(ctx, NULL, NULL, 0), "a zero-length copy is a no-op");
	is_err(0, vmmx_sync(ctx), "vmmx_sync");

	/* The sim backend refuses an unsplit copy, so the splitting above is real. */
	if (test_on_sim()) {
		is_err(-VMMX_EINVAL, vmm_copy(vmmx__ctx_vmm(ctx), host, p + 6 * MiB, 4 * MiB),
		       "sim: one driver copy across the device/host boundary is refused");
		like(vmmx_last_error(), "crashes the CUDA driver", "and the message says why");
	} else {
		skip("an unsplit copy crashes the real driver");
		skip("an unsplit copy crashes the real driver");
	}
	free(host);
	vmmx_buf_destroy(a);
	vmmx_buf_destroy(b);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
