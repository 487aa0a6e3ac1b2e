// SPDX-License-Identifier: MIT
/*
 * readmostly.c - VMMX_ADVISE_READ_MOSTLY: a marked chunk promoted from host
 * memory keeps its host handle, and moving it back maps that handle again
 * with no copy.  4 MiB chunks (VMMX_CHUNK_MAX), granularity 2 MiB.  Checked:
 *  - the round trip: data intact, no driver copy and no new handle on the
 *    way back, the counters (shadow_bytes, copies_saved) in the struct and
 *    the JSON, the host memory still held while the copy is kept;
 *  - which chunks the advice marks (wholly inside the range only, not the
 *    ones a later grow adds), VMMX_ADVISE_NOT_READ_MOSTLY dropping copies
 *    so that written data is not lost, and what a broken promise (a write
 *    libvmmx does not see) does;
 *  - vmmx_prefetch() and vmmx_advise() by address take the same path;
 *  - the copies go with a shrink, a destroy and vmmx_ctx_trim(), and are
 *    released for another buffer's grow when VMMX_HOST_LIMIT is reached;
 *  - the framework allocator ends the promise when a block is freed;
 *  - bad advice;
 *  - every driver call of a scenario failed in turn: each chunk where it
 *    was or moved, data intact, nothing leaked.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

static const struct vmmx_loc DEV = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };
static const char *const vars[] = { "VMMX_CHUNK_MAX=4MiB", NULL };

static bool intact(struct vmmx_ctx *ctx, struct vmmx_buf *buf, size_t len, uint32_t seed)
{
	return test_check(ctx, vmmx_buf_ptr(buf), 0, len, seed) == SIZE_MAX;
}

/* Host bytes the context holds, cache and copies included (the JSON's "held"). */
static uint64_t host_held(struct vmmx_ctx *ctx)
{
	struct json *j = test_stats_json(ctx);
	const struct json *locs = json_get(j, "locations");
	uint64_t held = UINT64_MAX;

	for (size_t i = 0; json_index(locs, i); i++)
		if (!strcmp(json_str(json_get(json_index(locs, i), "location")), "host"))
			held = (uint64_t)json_num(json_get(json_index(locs, i), "held"));
	json_free(j);
	return held;
}

/* ---- 1. the round trip ---- */

static void round_trip(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 1);
	uint64_t copies, creates, held;
	struct vmmx_stats st;
	struct json *j;

	is_err(0, vmmx_buf_advise(buf, 0, 16 * MiB, VMMX_ADVISE_READ_MOSTLY),
	       "vmmx_buf_advise: READ_MOSTLY over the whole buffer");
	held = host_held(ctx);
	test_migrate_all(buf, DEV);
	st = test_stats(ctx);
	is_uint(16 * MiB, st.shadow_bytes, "promoted: the four host handles are kept (shadow_bytes)");
	is_uint(16 * MiB, st.device_bytes, "and the chunks are on the device");
	is_uint(held, host_held(ctx), "the host memory is still held, charged as before");
	ok(intact(ctx, buf, 16 * MiB, 1), "data intact on the device");

	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	creates = test_driver_calls(ctx, VMMX_OP_CREATE);
	test_migrate_all(buf, HOST);
	is_uint(copies, test_driver_calls(ctx, VMMX_OP_COPY), "back to host memory with no copy");
	is_uint(creates, test_driver_calls(ctx, VMMX_OP_CREATE), "and no new handle");
	st = test_stats(ctx);
	is_uint(4, st.copies_saved, "copies_saved counts the four chunks");
	is_uint(16 * MiB, st.copy_bytes_saved, "copy_bytes_saved their bytes");
	is_uint(0, st.shadow_bytes, "the copies are mapped again, not kept beside");
	is_uint(16 * MiB, st.host_bytes, "all in host memory");
	ok(intact(ctx, buf, 16 * MiB, 1), "data intact back in host memory");
	j = test_stats_json(ctx);
	is_uint(4, (uint64_t)json_num(json_get(j, "copies_saved")), "the JSON has copies_saved");
	ok(json_get(j, "shadow_bytes") && json_get(j, "copy_bytes_saved"),
	   "and shadow_bytes, copy_bytes_saved");
	json_free(j);

	/* The mark stays: a second round trip saves again. */
	test_migrate_all(buf, DEV);
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	test_migrate_all(buf, HOST);
	is_uint(copies, test_driver_calls(ctx, VMMX_OP_COPY), "a second round trip: no copy back");
	is_uint(8, test_stats(ctx).copies_saved, "eight chunks saved in all");
	ok(intact(ctx, buf, 16 * MiB, 1), "data intact after two round trips");

	/* Device to device is not a move here; a partial range moves whole chunks. */
	test_migrate_all(buf, DEV);
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_buf_migrate(buf, 5 * MiB, 1, HOST, NULL), "one byte of chunk 1 back");
	is_uint(copies, test_driver_calls(ctx, VMMX_OP_COPY), "its chunk came back uncopied");
	is_uint(12 * MiB, test_stats(ctx).shadow_bytes, "the other three keep their copies");
	is_string("0H00", test_layout(buf), "layout");
	ok(intact(ctx, buf, 16 * MiB, 1), "data intact");
	vmmx_buf_destroy(buf);
	is_uint(0, test_stats(ctx).shadow_bytes, "vmmx_buf_destroy gives the copies up");
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 2. what the advice marks, and withdrawing it ---- */

static void marking(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 2);
	uint64_t copies;

	/* [1, 9) MiB covers chunk 1 ([4, 8)) wholly, chunks 0 and 2 in part. */
	is_err(0, vmmx_buf_advise(buf, 1 * MiB, 8 * MiB, VMMX_ADVISE_READ_MOSTLY),
	       "READ_MOSTLY over [1, 9) MiB");
	test_migrate_all(buf, DEV);
	is_uint(4 * MiB, test_stats(ctx).shadow_bytes,
		"only the chunk wholly inside the range keeps a copy");

	/* Withdrawn by one byte of the chunk: its copy goes (to the cache). */
	is_err(0, vmmx_buf_advise(buf, 5 * MiB, 1, VMMX_ADVISE_NOT_READ_MOSTLY),
	       "NOT_READ_MOSTLY on one byte of chunk 1");
	is_uint(0, test_stats(ctx).shadow_bytes, "the copy is dropped");
	/* Written on the device, then moved back: the new data, copied. */
	is_err(0, test_fill(ctx, vmmx_buf_ptr(buf), 0, 16 * MiB, 3), "written on the device");
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	test_migrate_all(buf, HOST);
	ok(test_driver_calls(ctx, VMMX_OP_COPY) > copies, "back to host memory by copies");
	is_uint(0, test_stats(ctx).copies_saved, "none saved");
	ok(intact(ctx, buf, 16 * MiB, 3), "the written data is what came back");

	/*
	 * The advice is a promise: a write libvmmx does not see (a kernel's,
	 * here the driver's copy engine called directly) is lost on the way
	 * back.  vmmx_memcpy() and vmmx_memset() are seen (tests/lib/copy_range).
	 */
	is_err(0, vmmx_buf_advise(buf, 0, 16 * MiB, VMMX_ADVISE_READ_MOSTLY), "READ_MOSTLY again");
	test_migrate_all(buf, DEV);
	is_err(0, vmm_memset(vmmx__ctx_vmm(ctx), vmmx_buf_ptr(buf), 0x44, 4 * MiB),
	       "chunk 0 written anyway, behind libvmmx's back");
	test_migrate_all(buf, HOST);
	ok(intact(ctx, buf, 4 * MiB, 3), "it comes back as it was when promoted (the promise broken)");

	/* Chunks a later grow adds are not marked. */
	is_err(0, vmmx_buf_resize(buf, 24 * MiB), "grown to 24 MiB");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(buf), 0, 24 * MiB, 5), "filled");
	test_migrate_all(buf, DEV);
	is_uint(16 * MiB, test_stats(ctx).shadow_bytes, "the grown chunks keep no copy");
	test_migrate_all(buf, HOST);
	ok(intact(ctx, buf, 24 * MiB, 5), "data intact, the new chunks copied back");

	/* vmmx_advise and vmmx_prefetch by address. */
	is_err(0, vmmx_advise(ctx, vmmx_buf_ptr(buf), 24 * MiB, VMMX_ADVISE_READ_MOSTLY),
	       "vmmx_advise: READ_MOSTLY by address");
	is_err(0, vmmx_prefetch(ctx, vmmx_buf_ptr(buf), 24 * MiB, DEV, NULL),
	       "vmmx_prefetch to the device");
	is_uint(24 * MiB, test_stats(ctx).shadow_bytes, "every chunk keeps its copy");
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_prefetch(ctx, vmmx_buf_ptr(buf), 24 * MiB, HOST, NULL),
	       "vmmx_prefetch back to host memory");
	is_uint(copies, test_driver_calls(ctx, VMMX_OP_COPY), "with no copy");
	ok(intact(ctx, buf, 24 * MiB, 5), "data intact");
	is_err(0, vmmx_advise(ctx, vmmx_buf_ptr(buf), 24 * MiB, VMMX_ADVISE_NOT_READ_MOSTLY),
	       "vmmx_advise: NOT_READ_MOSTLY by address");
	test_migrate_all(buf, DEV);
	is_uint(0, test_stats(ctx).shadow_bytes, "unmarked chunks keep no copy");

	/* Bad advice. */
	is_err(-VMMX_EINVAL, vmmx_buf_advise(buf, 0, MiB, VMMX_ADVISE_CPU + 1),
	       "vmmx_buf_advise: advice 7 refused");
	like(vmmx_last_error(), "advice 7 is none of enum vmmx_advice", "the message names it");
	is_err(-VMMX_EINVAL, vmmx_advise(ctx, vmmx_buf_ptr(buf), MiB, 0), "vmmx_advise: advice 0");
	like(vmmx_last_error(), "vmmx_advise: advice 0", "the message names it");
	is_err(-VMMX_ERANGE, vmmx_buf_advise(buf, 20 * MiB, 8 * MiB, VMMX_ADVISE_READ_MOSTLY),
	       "READ_MOSTLY past the size refused");
	like(vmmx_last_error(), "goes past the size", "the message says why");
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 3. where the copies go: shrink, trim, another buffer's grow ---- */

static void release(void)
{
	static const char *const lim[] = { "VMMX_CHUNK_MAX=4MiB", "VMMX_HOST_LIMIT=24MiB",
					   "VMMX_CACHE_LIMIT=0", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 6), *b2;
	uint64_t copies;
	struct vmmx_stats st;

	vmmx_buf_advise(buf, 0, 16 * MiB, VMMX_ADVISE_READ_MOSTLY);
	test_migrate_all(buf, DEV);
	/* A cut through chunk 1, trimmed: chunk 0 keeps its copy, the rest have none. */
	is_err(0, vmmx_buf_resize(buf, 6 * MiB), "shrunk to 6 MiB through chunk 1");
	is_uint(8 * MiB, test_stats(ctx).shadow_bytes, "the cut chunk stays whole, with its copy");
	is_err(0, vmmx_buf_trim(buf), "vmmx_buf_trim replaces the cut chunk");
	is_uint(4 * MiB, test_stats(ctx).shadow_bytes, "only chunk 0's copy is left");
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	test_migrate_all(buf, HOST);
	is_uint(copies + 1, test_driver_calls(ctx, VMMX_OP_COPY),
		"back to host memory: one copy, for the cut chunk");
	ok(intact(ctx, buf, 6 * MiB, 6), "data intact");
	test_migrate_all(buf, DEV);
	is_uint(6 * MiB, test_stats(ctx).shadow_bytes,
		"promoted again: chunk 0 and the cut chunk, still marked, keep copies");
	is_err(0, vmmx_ctx_trim(ctx, 64 * MiB), "vmmx_ctx_trim keeping 64 MiB");
	is_uint(6 * MiB, test_stats(ctx).shadow_bytes, "keeps the copies");
	is_err(0, vmmx_ctx_trim(ctx, 0), "vmmx_ctx_trim(0)");
	is_uint(0, test_stats(ctx).shadow_bytes, "releases it");
	test_migrate_all(buf, HOST);
	ok(intact(ctx, buf, 6 * MiB, 6), "data intact, copied back");
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);

	/* 16 of 24 MiB of host memory kept as copies; another buffer wants 16. */
	ctx = test_ctx(lim);
	buf = test_host_buf(ctx, 16 * MiB, 7);
	vmmx_buf_advise(buf, 0, 16 * MiB, VMMX_ADVISE_READ_MOSTLY);
	test_migrate_all(buf, DEV);
	is_uint(16 * MiB, test_stats(ctx).shadow_bytes, "16 MiB kept as copies, at a 24 MiB limit");
	if (vmmx_buf_create(ctx, 64 * MiB, "host", &b2))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	is_err(0, vmmx_buf_resize(b2, 16 * MiB), "another buffer grows 16 MiB in host memory");
	st = test_stats(ctx);
	is_uint(8 * MiB, st.shadow_bytes, "the two copies it needed were released, two are kept");
	is_uint(16 * MiB, st.host_bytes, "the grow is in host memory");
	ok(intact(ctx, buf, 16 * MiB, 7), "the first buffer is intact on the device");
	vmmx_buf_destroy(b2);
	test_migrate_all(buf, HOST);
	is_uint(2, test_stats(ctx).copies_saved,
		"and comes back: two chunks mapped back, two copied where their copies went");
	ok(intact(ctx, buf, 16 * MiB, 7), "intact");
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 4. the framework allocator: a freed block's promise ends ---- */

static void allocator(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_alloc *a;
	void *p, *q;

	if (vmmx_alloc_create(ctx, "host", &a) || vmmx_alloc_malloc(a, 32 * MiB, NULL, &p))
		bail("vmmx_alloc: %s", vmmx_last_error());
	is_err(0, test_fill(ctx, p, 0, 32 * MiB, 9), "a 32 MiB block filled in host memory");
	is_err(0, vmmx_advise(ctx, p, 32 * MiB, VMMX_ADVISE_READ_MOSTLY), "advised read-mostly");
	is_err(0, vmmx_prefetch(ctx, p, 32 * MiB, DEV, NULL), "prefetched to the device");
	is_uint(32 * MiB, test_stats(ctx).shadow_bytes, "its host copies are kept");
	is_err(0, vmmx_alloc_free(a, p, NULL), "freed");
	is_uint(0, test_stats(ctx).shadow_bytes, "freeing drops them");
	/* The same memory, reused by a tensor that is written. */
	if (vmmx_alloc_malloc(a, 32 * MiB, NULL, &q))
		bail("vmmx_alloc_malloc: %s", vmmx_last_error());
	ok(q == p, "the next block reuses the memory");
	is_err(0, test_fill(ctx, q, 0, 32 * MiB, 10), "written by its new owner");
	is_err(0, vmmx_prefetch(ctx, q, 32 * MiB, HOST, NULL), "moved back to host memory");
	ok(test_check(ctx, q, 0, 32 * MiB, 10) == SIZE_MAX, "the new owner's data, not the old copy");
	vmmx_alloc_free(a, q, NULL);
	vmmx_alloc_destroy(a);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 5. the fault sweep ---- */

/* Each chunk of @buf on @a or @b. */
static bool placed(struct vmmx_buf *buf, char a, char b)
{
	for (const char *l = test_layout(buf); *l; l++)
		if (*l != a && *l != b)
			return false;
	return true;
}

/* One run; the count of broken promises (0: each chunk where it was or moved, data intact). */
static int scenario(struct vmmx_ctx *ctx, int *errors)
{
	struct vmmx_buf *buf;
	int bad = 0;

	if (vmmx_buf_create(ctx, 64 * MiB, "host", &buf))
		return (*errors)++, 0;
	if (vmmx_buf_resize(buf, 12 * MiB) || test_fill(ctx, vmmx_buf_ptr(buf), 0, 12 * MiB, 8)) {
		(*errors)++;
		vmmx_buf_destroy(buf);
		return 0;
	}
	*errors += vmmx_buf_advise(buf, 0, 12 * MiB, VMMX_ADVISE_READ_MOSTLY) != 0;
	for (int i = 0; i < 4; i++) {
		int err = vmmx_buf_migrate(buf, 0, 12 * MiB, i & 1 ? HOST : DEV, NULL);

		*errors += err != 0;
		bad += !placed(buf, '0', 'H');
		if (test_check(ctx, vmmx_buf_ptr(buf), 0, 12 * MiB, 8) == SIZE_MAX)
			continue;
		/* The check may meet the armed fault: check again. */
		bad += test_check(ctx, vmmx_buf_ptr(buf), 0, 12 * MiB, 8) != SIZE_MAX;
	}
	*errors += vmmx_buf_migrate(buf, 0, 12 * MiB, DEV, NULL) != 0;
	*errors += vmmx_buf_resize(buf, 6 * MiB) != 0;
	bad += test_check(ctx, vmmx_buf_ptr(buf), 0, 6 * MiB, 8) != SIZE_MAX &&
	       test_check(ctx, vmmx_buf_ptr(buf), 0, 6 * MiB, 8) != SIZE_MAX;
	vmmx_buf_destroy(buf);
	vmmx_ctx_trim(ctx, 0);
	return bad;
}

static int sweep_run(struct vmmx_ctx *ctx, void *errors)
{
	return scenario(ctx, errors);
}

static const enum vmmx_op sweep_ops[] = {
	VMMX_OP_CREATE, VMMX_OP_MAP, VMMX_OP_UNMAP, VMMX_OP_SET_ACCESS, VMMX_OP_COPY,
	VMMX_OP_RELEASE,
};
#define NSWEEP (sizeof(sweep_ops) / sizeof(sweep_ops[0]))

static void fault_sweep(void)
{
	struct vmm_counts base;
	struct vmmx_ctx *ctx = test_ctx(vars);
	int errors = 0;

	is_int(0, scenario(ctx, &errors), "fault sweep: the scenario runs clean without faults");
	is_int(0, errors, "with no error");
	ok(test_stats(ctx).copies_saved >= 3, "and saves copies");
	vmm_counts(vmmx__ctx_vmm(ctx), &base);
	vmmx_ctx_destroy(ctx);
	for (size_t i = 0; i < NSWEEP; i++)
		test_fault_sweep(vars, sweep_ops[i], base.calls[sweep_ops[i]], sweep_run, &errors,
				 "chunks where they were or moved, intact");
}

int main(void)
{
	plan(24 + 30 + 21 + 11 + 3 + 2 * NSWEEP);
	round_trip();
	marking();
	release();
	allocator();
	fault_sweep();
	return tap_done();
}
