// SPDX-License-Identifier: MIT
/*
 * buf.c - buffers grow and shrink in place: the address is stable, data
 * survives across every chunk and location boundary, residency and chunk
 * lists are right, and the capacity is respected.  Runs on any backend:
 * limits (not device size) push chunks to host memory.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#define DEV_LIMIT (24 * MiB)
#define CAP (64 * MiB)

static const char *const vars[] = {
	"VMMX_DEVICE_LIMIT=24MiB", "VMMX_HOST_LIMIT=40MiB", "VMMX_CHUNK_MAX=8MiB", NULL,
};

/* Chunks tile [0, mapped) in order, each within the chunk bounds; returns the
 * number of location changes, or -1 when the table is wrong. */
static int check_chunks(struct vmmx_buf *buf, size_t size)
{
	struct vmmx_chunk_info c[64];
	size_t n, end = 0;
	int changes = 0;

	if (vmmx_buf_chunks(buf, c, 64, &n) || n > 64)
		return -1;
	for (size_t i = 0; i < n; i++) {
		if ((char *)c[i].base != (char *)vmmx_buf_ptr(buf) + end || c[i].buf != buf ||
		    c[i].size < 2 * MiB || c[i].size > 8 * MiB || c[i].size % (2 * MiB))
			return -1;
		if (i && (c[i].loc.kind != c[i - 1].loc.kind))
			changes++;
		end += c[i].size;
	}
	return end >= size && (n == 0 || end - c[n - 1].size < size) ? changes : -1;
}

int main(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_stats st = { .size = sizeof(st) };
	struct vmmx_residency r;
	struct vmmx_chunk_info c[8];
	struct vmmx_buf *buf, *hb;
	void *ptr;
	size_t size, n, bad;
	unsigned seed = 7;
	int bad_data = 0, bad_res = 0, bad_ptr = 0, bad_chunks = 0, boundaries = 0, max_changes = 0;

	plan(41);
	is_err(0, vmmx_buf_create(ctx, CAP, "device-first", &buf), "vmmx_buf_create");
	ptr = vmmx_buf_ptr(buf);
	ok(ptr != NULL, "vmmx_buf_ptr is set before any memory is mapped");
	is_uint(0, vmmx_buf_size(buf), "vmmx_buf_size starts at 0");
	is_uint(CAP, vmmx_buf_capacity(buf), "vmmx_buf_capacity");

	is_err(0, vmmx_buf_resize(buf, 10 * MiB), "vmmx_buf_resize to 10 MiB");
	is_uint(10 * MiB, vmmx_buf_size(buf), "vmmx_buf_size after the first grow");
	is_err(0, vmmx_buf_residency(buf, 0, 10 * MiB, &r), "vmmx_buf_residency");
	ok(r.device == 10 * MiB && r.host == 0, "all 10 MiB on the device (device %zu, host %zu)",
	   r.device, r.host);
	is_err(0, vmmx_buf_chunks(buf, c, 8, &n), "vmmx_buf_chunks");
	ok(n == 2 && c[0].size == 8 * MiB && c[1].size == 2 * MiB,
	   "one grow makes the largest chunks it can (8 MiB + 2 MiB, got %zu chunks)", n);
	is_err(0, test_fill(ctx, ptr, 0, 10 * MiB, 7), "pattern written through vmmx_memcpy");

	is_err(0, vmmx_buf_resize(buf, 30 * MiB), "vmmx_buf_resize to 30 MiB, past the device limit");
	ok(vmmx_buf_ptr(buf) == ptr, "the address did not move");
	is_err(0, vmmx_buf_residency(buf, 0, 30 * MiB, &r), "vmmx_buf_residency after the fallback");
	ok(r.device == DEV_LIMIT && r.host == 6 * MiB, "24 MiB on the device, 6 MiB on host (device %zu, host %zu)",
	   r.device, r.host);
	is_uint(SIZE_MAX, test_check(ctx, ptr, 0, 10 * MiB, 7), "old data intact after the grow");
	is_err(0, test_fill(ctx, ptr, 10 * MiB, 20 * MiB, 7), "pattern across the device/host boundary");
	is_uint(SIZE_MAX, test_check(ctx, ptr, 0, 30 * MiB, 7), "whole buffer reads back");
	is_err(0, vmmx_buf_residency(buf, 23 * MiB, 2 * MiB, &r), "vmmx_buf_residency of a straddling range");
	ok(r.device == MiB && r.host == MiB, "straddling range is half device, half host");

	is_err(0, vmmx_buf_resize(buf, 20 * MiB), "shrink to 20 MiB");
	vmmx_stats_get(ctx, &st);
	is_uint(0, st.host_bytes, "the host chunk was released by the shrink");
	is_uint(SIZE_MAX, test_check(ctx, ptr, 0, 20 * MiB, 7), "data below the new size kept");
	is_err(0, vmmx_buf_resize(buf, 30 * MiB), "grow back to 30 MiB");
	is_err(0, vmmx_buf_residency(buf, 0, 30 * MiB, &r), "vmmx_buf_residency");
	ok(r.device == DEV_LIMIT && r.host == 6 * MiB, "the cut chunk's tail is reused, the rest falls back again");

	is_err(0, test_fill(ctx, ptr, 20 * MiB, 10 * MiB, 7), "fill the regrown part");

	/* Many random resizes: every invariant after every step. */
	srand(42);
	size = 30 * MiB;
	for (int i = 0; i < 60; i++) {
		size_t next = (size_t)(rand() % 33) * 2 * MiB, keep = next < size ? next : size;
		int ch;

		if (vmmx_buf_resize(buf, next)) {
			diag("resize %d to %zu failed: %s", i, next, vmmx_last_error());
			bad_data++;
			break;
		}
		bad_ptr += vmmx_buf_ptr(buf) != ptr || vmmx_buf_size(buf) != next;
		if (keep && (bad = test_check(ctx, ptr, 0, keep, seed)) != SIZE_MAX) {
			diag("step %d (%zu -> %zu): byte %zu wrong (%s)", i, size, next, bad,
			     vmmx_last_error());
			bad_data++;
		}
		seed++;
		if (next && (test_fill(ctx, ptr, 0, next, seed) ||
			     test_check(ctx, ptr, 0, next, seed) != SIZE_MAX))
			bad_data++;
		if (vmmx_buf_residency(buf, 0, next, &r) || r.device + r.host != next ||
		    r.device > DEV_LIMIT || (next <= DEV_LIMIT && r.host))
			bad_res++;
		ch = check_chunks(buf, next);
		if (ch < 0)
			bad_chunks++;
		if (ch > max_changes)
			max_changes = ch;
		boundaries += ch > 0;
		size = next;
	}
	is_int(0, bad_ptr, "vmmx_buf_ptr stable and vmmx_buf_size right through 60 random resizes");
	is_int(0, bad_data, "data intact across every chunk and location boundary");
	is_int(0, bad_res, "vmmx_buf_residency adds up and respects the device limit");
	is_int(0, bad_chunks, "vmmx_buf_chunks tile the buffer with chunks within bounds");
	ok(boundaries > 0, "some steps had device/host boundaries to cross (%d)", boundaries);

	is_err(-VMMX_ERANGE, vmmx_buf_resize(buf, CAP + 1), "vmmx_buf_resize past the capacity");
	is_uint(size, vmmx_buf_size(buf), "the size is unchanged after ERANGE");
	is_err(0, vmmx_buf_resize(buf, CAP), "vmmx_buf_resize to exactly the capacity");
	is_err(-VMMX_ERANGE, vmmx_buf_residency(buf, CAP - MiB, 2 * MiB, &r),
	       "vmmx_buf_residency past the size");

	/* A host-only buffer is plain CPU memory at the same address. */
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, "host", &hb), "vmmx_buf_create with policy host");
	is_err(-VMMX_ENOMEM, vmmx_buf_resize(hb, 4 * MiB), "host limit reached: ENOMEM");
	vmmx_buf_resize(buf, 0);
	is_err(0, vmmx_buf_resize(hb, 4 * MiB), "room again after the other buffer shrank to 0");
	if (!test_fill(ctx, vmmx_buf_ptr(hb), 0, 4 * MiB, 99)) {
		const unsigned char *p = vmmx_buf_ptr(hb);
		size_t wrong = SIZE_MAX;

		for (size_t i = 0; i < 4 * MiB && wrong == SIZE_MAX; i++)
			if (p[i] != test_pattern_byte(i, 99))
				wrong = i;
		is_uint(SIZE_MAX, wrong, "the CPU reads a host chunk directly through vmmx_buf_ptr");
	} else {
		ok(0, "the CPU reads a host chunk directly through vmmx_buf_ptr");
	}
	vmmx_buf_destroy(hb);
	vmmx_buf_destroy(buf);
	vmmx_buf_destroy(NULL);
	vmmx_stats_get(ctx, &st);
	ok(st.buffers == 0 && st.device_bytes == 0 && st.host_bytes == 0 && st.reserved_bytes == 0,
	   "vmmx_stats_get: nothing held after vmmx_buf_destroy");
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
