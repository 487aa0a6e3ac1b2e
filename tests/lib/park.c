// SPDX-License-Identifier: MIT
/*
 * park.c - vmmx_park() and vmmx_unpark(): a chunk on a device whose host
 * copy may serve goes back to it with its own address left unmapped, the
 * copy mapped once at an address of its own; the move back to the device
 * copies from there.  VMMX_HOST_COPIES=verified, 4 MiB chunks.  Checked:
 *  - the round trip: the park copies nothing and makes no handle; the
 *    chunk's address is unmapped (sim: a driver copy from it fails) and a
 *    vmmx_memcpy or vmmx_memset over it is refused by name; the move back
 *    makes no mapping of host memory at the chunk's address; the second
 *    park maps and grants nothing at all (the copy's own mapping is kept);
 *    data intact each way; the counters;
 *  - a chunk written on the device behind libvmmx's back is copied back and
 *    mapped in place, not parked (nothing lost), the others parked;
 *  - vmmx_unpark() and vmmx_prefetch() to host memory map parked chunks in
 *    place again, leaving device chunks where they are (vmmx_unpark, NULL);
 *  - without the setting a park is a plain move back;
 *  - bad arguments by code and message;
 *  - the buffer calls over parked chunks: advice for the CPU, a shrink past
 *    them, a grow into a parked chunk's tail, a trim, a destroy; no leak;
 *  - every reserve, create, map, unmap, set_access, copy and checksum of a
 *    promote-park-promote-write-park-unpark scenario failed in turn: no byte
 *    lost, no leak.
 */
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
static const char *const plain[] = { "VMMX_CHUNK_MAX=4MiB", NULL };



/* The chunks parked now, as a string of P and - (white-box: the published table). */
static const char *parked(struct vmmx_buf *buf)
{
	static char out[65];
	size_t n = buf->table->n < 64 ? buf->table->n : 64;

	for (size_t i = 0; i < n; i++)
		out[i] = buf->table->c[i].parked ? 'P' : '-';
	out[n] = '\0';
	return out;
}

static uint64_t calls(struct vmmx_ctx *ctx, enum vmmx_op op)
{
	return test_driver_calls(ctx, op);
}

/* ---- 1. the round trip ---- */

static void round_trip(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 1);
	uint8_t *want = test_pattern(16 * MiB, 1), *p = vmmx_buf_ptr(buf), w[64];
	uint64_t copies, creates, maps, grants, sums;
	size_t bytes = 1;
	struct vmmx_stats st;
	vmm_handle_t h0[4];
	void *hva0[4];

	for (int i = 0; i < 4; i++)
		h0[i] = buf->table->c[i].handle;
	test_migrate_all(buf, DEV);
	copies = calls(ctx, VMMX_OP_COPY);
	creates = calls(ctx, VMMX_OP_CREATE);
	is_err(0, vmmx_park(ctx, p, 16 * MiB, HOST, NULL, &bytes), "vmmx_park of the four device chunks");
	is_uint(16 * MiB, bytes, "it says 16 MiB parked");
	is_string("HHHH", test_layout(buf), "they are in host memory");
	is_string("PPPP", parked(buf), "parked, every one");
	is_uint(copies, calls(ctx, VMMX_OP_COPY), "the park copied nothing");
	is_uint(creates, calls(ctx, VMMX_OP_CREATE), "and made no handle");
	ok(buf->table->c[0].handle == h0[0] && buf->table->c[3].handle == h0[3],
	   "the host handles they had before the promotion hold them");
	ok(buf->table->c[0].hva && buf->table->c[0].hva != (void *)p,
	   "each is mapped at an address of its own");
	for (int i = 0; i < 4; i++)
		hva0[i] = buf->table->c[i].hva;
	st = test_stats(ctx);
	is_uint(16 * MiB, st.parked_bytes, "parked_bytes counts them");
	is_uint(4, st.parks, "parks counts four");
	is_uint(4, st.verified_saved, "each found unchanged by its checksum");
	is_uint(0, st.shadow_bytes, "no copy kept beside");
	if (test_on_sim())
		ok(vmm_copy(vmmx__ctx_vmm(ctx), w, p + 5 * MiB, 64) != 0,
		   "the chunk's own address is unmapped: a driver copy from it fails");
	else
		skip("a driver copy from an unmapped address: sim only");
	{
		uint64_t sum;

		is_err(-VMMX_EFAULT, vmmx_checksum(ctx, p + 5 * MiB, 64, &sum),
		       "vmmx_checksum over it is refused (its kernel would fault the context)");
		like(vmmx_last_error(), "reaches a parked chunk (vmmx_park) at offset 4194304",
		     "the message names the parked chunk");
	}
	is_err(-VMMX_EFAULT, vmmx_memcpy(ctx, w, p + 5 * MiB, 64), "vmmx_memcpy from it is refused");
	like(vmmx_last_error(), "is in a parked chunk (vmmx_park) at offset 4194304",
	     "the message names the parked chunk");
	is_err(-VMMX_EFAULT, vmmx_memset(ctx, p + 13 * MiB, 0, 64), "so is vmmx_memset into it");
	like(vmmx_last_error(), "bring it back with vmmx_prefetch", "the message says what to do");

	/* Back to the device: copied from the copy's own address. */
	maps = calls(ctx, VMMX_OP_MAP);
	copies = calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_prefetch(ctx, p, 16 * MiB, DEV, NULL), "vmmx_prefetch back to the device");
	is_string("0000", test_layout(buf), "on the device");
	is_string("----", parked(buf), "none parked");
	is_uint(copies + 4, calls(ctx, VMMX_OP_COPY), "one copy a chunk");
	/* staging and the chunk's address, a device handle each: two maps a
	 * chunk; none of host memory (today's move maps its copy again). */
	is_uint(maps + 8, calls(ctx, VMMX_OP_MAP), "two maps a chunk, both of device memory");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact on the device");
	st = test_stats(ctx);
	is_uint(0, st.parked_bytes, "parked_bytes back to 0");
	is_uint(16 * MiB, st.shadow_bytes, "the host handles are the copies again");
	ok(buf->table->c[2].hva == hva0[2] && buf->table->c[2].shadow == h0[2],
	   "each keeps its copy's own mapping");

	/* The second park maps and grants nothing. */
	maps = calls(ctx, VMMX_OP_MAP);
	grants = calls(ctx, VMMX_OP_SET_ACCESS);
	is_err(0, vmmx_park(ctx, p, 16 * MiB, HOST, NULL, NULL), "parked again");
	is_string("PPPP", parked(buf), "every chunk");
	ok(calls(ctx, VMMX_OP_MAP) == maps && calls(ctx, VMMX_OP_SET_ACCESS) == grants,
	   "with no map and no grant: only the device memory's unmap");
	is_err(0, vmmx_park(ctx, p, 16 * MiB, HOST, NULL, &bytes), "a park of parked chunks");
	is_uint(0, bytes, "parks no byte");
	is_uint(8, test_stats(ctx).parks, "does nothing");
	sums = test_stats(ctx).checksums;
	is_err(0, vmmx_prefetch(ctx, p, 16 * MiB, DEV, NULL), "and back to the device");
	is_uint(sums, test_stats(ctx).checksums,
		"with no checksum: the sum taken at the park holds (nothing writes a parked chunk)");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact");
	/* That sum is the one a write is found by. */
	is_err(0, vmm_memset(vmmx__ctx_vmm(ctx), p + 9 * MiB, 0x3c, 512),
	       "chunk 2 written behind libvmmx's back");
	memset(want + 9 * MiB, 0x3c, 512);
	is_err(0, vmmx_park(ctx, p, 16 * MiB, HOST, NULL, &bytes), "parked again");
	is_string("PP-P", parked(buf), "the written chunk found changed: copied back, not parked");
	is_uint(12 * MiB, bytes, "12 MiB parked");
	ok(test_holds(ctx, buf, want, 8 * MiB, 4 * MiB), "its new bytes are what came back");
	is_err(0, vmmx_prefetch(ctx, p, 16 * MiB, DEV, NULL), "and back to the device");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact");
	vmmx_buf_destroy(buf);
	free(want);
	ok(test_no_leaks(ctx), "nothing leaked (the copies' own mappings went with the buffer)");
	vmmx_ctx_destroy(ctx);
}

/* ---- 2. written on the device; unpark ---- */

static void written_unpark(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 2);
	uint8_t *want = test_pattern(16 * MiB, 2), *p = vmmx_buf_ptr(buf);
	struct vmm *v = vmmx__ctx_vmm(ctx);
	uint64_t copies;
	size_t bytes = 1;
	struct vmmx_stats st;

	test_migrate_all(buf, DEV);
	is_err(0, vmm_memset(v, p + 9 * MiB + 8, 0x6b, 4096), "chunk 2 written behind libvmmx's back");
	memset(want + 9 * MiB + 8, 0x6b, 4096);
	copies = calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_park(ctx, p, 16 * MiB, HOST, NULL, NULL), "vmmx_park");
	is_string("PP-P", parked(buf), "the written chunk is not parked");
	is_string("HHHH", test_layout(buf), "but in host memory too");
	is_uint(copies + 1, calls(ctx, VMMX_OP_COPY), "it was copied");
	is_uint(1, test_stats(ctx).verified_changed, "found changed");
	ok(test_holds(ctx, buf, want, 8 * MiB, 4 * MiB), "its new bytes readable in place");

	/* vmmx_unpark: parked chunks mapped in place; device chunks left alone. */
	is_err(0, vmmx_prefetch(ctx, p + 12 * MiB, 4 * MiB, DEV, NULL), "chunk 3 to the device");
	is_string("HHH0", test_layout(buf), "chunk 3 on the device");
	is_err(0, vmmx_unpark(ctx, p + 4 * MiB, 12 * MiB, &bytes), "vmmx_unpark of chunks 1 to 3");
	is_uint(4 * MiB, bytes, "it says 4 MiB mapped in place");
	is_string("P---", parked(buf), "chunk 1 mapped in place, chunk 0 (outside) still parked");
	is_string("HHH0", test_layout(buf), "chunk 3 left on the device");
	st = test_stats(ctx);
	is_uint(1, st.unparks, "unparks counts one");
	is_uint(4 * MiB, st.parked_bytes, "parked_bytes the one left");
	ok(test_holds(ctx, buf, want, 4 * MiB, 12 * MiB), "chunks 1 to 3 readable where they are");
	is_err(0, vmmx_unpark(ctx, p + 4 * MiB, 12 * MiB, NULL), "vmmx_unpark again: nothing to do");
	is_uint(1, test_stats(ctx).unparks, "counts nothing");

	/* vmmx_prefetch to host memory: chunk 0 mapped in place, chunk 3 moved. */
	is_err(0, vmmx_prefetch(ctx, p, 16 * MiB, HOST, NULL), "vmmx_prefetch to host memory");
	is_string("----", parked(buf), "chunk 0 mapped in place");
	is_string("HHHH", test_layout(buf), "chunk 3 back in host memory");
	is_uint(2, test_stats(ctx).unparks, "two unparks in all");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "no byte lost");
	ok(buf->table->c[0].hva == NULL, "its own mapping went");
	test_finish(ctx, buf, want);

	/* Without the setting: no copy to park, a plain move back. */
	ctx = test_ctx(plain);
	buf = test_host_buf(ctx, 16 * MiB, 3);
	want = test_pattern(16 * MiB, 3);
	test_migrate_all(buf, DEV);
	copies = calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_park(ctx, vmmx_buf_ptr(buf), 16 * MiB, HOST, NULL, &bytes),
	       "VMMX_HOST_COPIES unset: vmmx_park");
	is_uint(0, bytes, "it says 0 bytes parked");
	is_string("----", parked(buf), "parks nothing");
	is_uint(copies + 4, calls(ctx, VMMX_OP_COPY), "it copies each chunk back, mapped in place");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact");
	vmmx_buf_destroy(buf);
	free(want);
	vmmx_ctx_destroy(ctx);
}

/* ---- 3. bad arguments ---- */

static void bad_args(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 8 * MiB, 4);
	uint8_t *p = vmmx_buf_ptr(buf), w[8];

	is_err(-VMMX_EINVAL, vmmx_park(NULL, p, 8, HOST, NULL, NULL), "vmmx_park: NULL ctx");
	like(vmmx_last_error(), "vmmx_park: ctx is NULL", "the message names ctx");
	is_err(-VMMX_EINVAL, vmmx_park(ctx, NULL, 8, HOST, NULL, NULL), "vmmx_park: NULL ptr");
	like(vmmx_last_error(), "vmmx_park: ptr is NULL", "the message names ptr");
	is_err(-VMMX_EINVAL, vmmx_park(ctx, p, 8, DEV, NULL, NULL), "vmmx_park to a device");
	like(vmmx_last_error(), "vmmx_park: location device:0 is not host memory",
	     "the message names the location");
	is_err(-VMMX_ENOENT, vmmx_park(ctx, w, 8, HOST, NULL, NULL), "vmmx_park of memory of no buffer");
	like(vmmx_last_error(), "is in no buffer of this context", "the message says so");
	is_err(-VMMX_EINVAL, vmmx_unpark(NULL, p, 8, NULL), "vmmx_unpark: NULL ctx");
	like(vmmx_last_error(), "vmmx_unpark: ctx is NULL", "the message names ctx");
	is_err(-VMMX_EINVAL, vmmx_unpark(ctx, NULL, 8, NULL), "vmmx_unpark: NULL ptr");
	like(vmmx_last_error(), "vmmx_unpark: ptr is NULL", "the message names ptr");
	is_err(-VMMX_EFAULT, vmmx_unpark(ctx, p + 8 * MiB, 8, NULL), "vmmx_unpark past the buffer's size");
	like(vmmx_last_error(), "is past its buffer's size", "the message says so");
	is_err(0, vmmx_park(ctx, p, 0, HOST, NULL, NULL), "vmmx_park of 0 bytes: nothing");
	is_err(0, vmmx_unpark(ctx, p, 0, NULL), "vmmx_unpark of 0 bytes: nothing");
	is_string("HH", test_layout(buf), "nothing moved");
	test_finish(ctx, buf, NULL);
}

/* ---- 4. the buffer calls over parked chunks ---- */

/* A verified buffer of @size from host memory, promoted and parked whole. */
static struct vmmx_buf *parked_buf(struct vmmx_ctx *ctx, size_t size, uint32_t seed)
{
	struct vmmx_buf *buf = test_host_buf(ctx, size, seed);

	test_migrate_all(buf, DEV);
	if (vmmx_park(ctx, vmmx_buf_ptr(buf), size, HOST, NULL, NULL))
		bail("vmmx_park: %s", vmmx_last_error());
	return buf;
}

static void buffer_calls(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = parked_buf(ctx, 16 * MiB, 5);
	uint8_t *want = test_pattern(16 * MiB, 5), *p = vmmx_buf_ptr(buf);

	/* Advice for the CPU: marked, granted when mapped in place. */
	is_err(0, vmmx_buf_advise(buf, 0, 16 * MiB, VMMX_ADVISE_CPU), "VMMX_ADVISE_CPU over parked chunks");
	is_string("PPPP", parked(buf), "they stay parked");
	ok(buf->table->c[1].cpu, "marked for the CPU");
	/* A shrink past two parked chunks releases them; what stays is intact. */
	is_err(0, vmmx_buf_resize(buf, 6 * MiB), "shrink to 6 MiB");
	is_string("PP", parked(buf), "the two chunks past it went");
	is_uint(8 * MiB, test_stats(ctx).parked_bytes, "parked_bytes counts what stays");
	/* A grow into the cut chunk's tail maps it in place first. */
	is_err(0, vmmx_buf_resize(buf, 8 * MiB), "grow into the parked chunk's tail");
	is_string("--", parked(buf), "the buffer's parked chunks are mapped in place first");
	ok(test_holds(ctx, buf, want, 0, 6 * MiB), "the first 6 MiB intact");
	is_err(0, vmmx_memset(ctx, p + 6 * MiB, 0x11, 2 * MiB), "the grown tail is writable");
	/* A trim of a parked cut chunk. */
	is_err(0, vmmx_prefetch(ctx, p, 8 * MiB, DEV, NULL), "to the device");
	is_err(0, vmmx_park(ctx, p, 8 * MiB, HOST, NULL, NULL), "parked again");
	is_err(0, vmmx_buf_resize(buf, 6 * MiB), "shrink into chunk 1");
	is_err(0, vmmx_buf_trim(buf), "vmmx_buf_trim of the parked cut chunk");
	ok(test_holds(ctx, buf, want, 0, 6 * MiB), "the 6 MiB kept are intact");
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "nothing leaked");

	/* Destroyed parked. */
	buf = parked_buf(ctx, 16 * MiB, 5);
	is_string("PPPP", parked(buf), "a buffer parked whole");
	vmmx_buf_destroy(buf);
	is_uint(0, test_stats(ctx).parked_bytes, "destroyed: parked_bytes 0");
	ok(test_no_leaks(ctx), "nothing leaked");
	free(want);
	vmmx_ctx_destroy(ctx);
}

/* ---- 6. the copy's own mapping, kept while its handle lives ---- */

/*
 * Parked, mapped in place, written there, brought in and parked again: the
 * second park finds each copy's own mapping kept (lib/hva.c) and makes no
 * reserve, map or grant; the move back reads the write through it.  The
 * mappings go when their handles are released.
 */
static void kept_mapping(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 7);
	uint8_t *want = test_pattern(16 * MiB, 7), *p = vmmx_buf_ptr(buf);
	struct vmm *v = vmmx__ctx_vmm(ctx);
	uint64_t res, maps, grants, reused;
	struct vmm_counts c;
	size_t bytes = 0;

	is_err(0, vmmx_prefetch(ctx, p, 16 * MiB, DEV, NULL), "kept: promoted");
	res = calls(ctx, VMMX_OP_RESERVE);
	is_err(0, vmmx_park(ctx, p, 16 * MiB, HOST, NULL, &bytes), "parked");
	is_uint(16 * MiB, bytes, "every chunk");
	is_uint(res + 4, calls(ctx, VMMX_OP_RESERVE), "each copy mapped at an address of its own");
	is_err(0, vmmx_unpark(ctx, p, 16 * MiB, &bytes), "mapped in place again");
	is_string("----", parked(buf), "none parked");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact, read in place");
	is_err(0, vmm_memset(v, p + 5 * MiB, 0x11, 4096), "chunk 1 written in place (plain host memory now)");
	memset(want + 5 * MiB, 0x11, 4096);
	is_err(0, vmmx_prefetch(ctx, p, 16 * MiB, DEV, NULL), "brought in again");
	res = calls(ctx, VMMX_OP_RESERVE);
	maps = calls(ctx, VMMX_OP_MAP);
	grants = calls(ctx, VMMX_OP_SET_ACCESS);
	reused = __atomic_load_n(&ctx->ctr.hva_reused, __ATOMIC_RELAXED);
	is_err(0, vmmx_park(ctx, p, 16 * MiB, HOST, NULL, &bytes), "parked again");
	is_uint(16 * MiB, bytes, "every chunk (its copy taken at this promotion)");
	ok(calls(ctx, VMMX_OP_RESERVE) == res && calls(ctx, VMMX_OP_MAP) == maps &&
		   calls(ctx, VMMX_OP_SET_ACCESS) == grants,
	   "with no reserve, map or grant: each copy's own mapping was kept");
	is_uint(reused + 4, __atomic_load_n(&ctx->ctr.hva_reused, __ATOMIC_RELAXED),
		"four kept mappings found again");
	is_err(0, vmmx_prefetch(ctx, p, 16 * MiB, DEV, NULL), "and back to the device, copied from them");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact, the write made in place included");
	vmmx_buf_destroy(buf);
	vmm_counts(v, &c);
	ok(c.reservations > 0, "the buffer gone, its handles cached: their own mappings stay (%zu reservations)",
	   (size_t)c.reservations);
	vmmx_ctx_trim(ctx, 0);
	vmm_counts(v, &c);
	ok(c.reservations == 0 && c.mapped_bytes == 0 && c.handles == 0,
	   "trimmed: every handle released with its own mapping, nothing reserved or mapped");
	free(want);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 7. a trimmed chunk, and a kept mapping's unmap deferred ---- */

/*
 * A chunk back on the device after a park keeps its copy and the copy's
 * own mapping; a trim cuts it into a new, smaller handle, which has no
 * copy and so no such mapping.  Carried over, the old copy's mapping would
 * be taken for the new copy's at the next park, and the move back would
 * read the old copy (found by a review: the bytes rewritten were lost).
 */
static void trimmed_chunk(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 8 * MiB, 3);
	uint8_t *want = test_pattern(8 * MiB, 3), *p = vmmx_buf_ptr(buf);
	struct vmm_counts c;

	is_err(0, vmmx_prefetch(ctx, p, 8 * MiB, DEV, NULL), "trim: promoted");
	is_err(0, vmmx_park(ctx, p, 8 * MiB, HOST, NULL, NULL), "parked");
	is_err(0, vmmx_prefetch(ctx, p, 8 * MiB, DEV, NULL), "back to the device, copies kept");
	is_err(0, vmmx_buf_resize(buf, 6 * MiB), "shrunk into chunk 1");
	is_err(0, vmmx_buf_trim(buf), "trimmed: chunk 1 cut to 2 MiB");
	ok(buf->table->c[1].hva == NULL && buf->table->c[1].shadow == 0 && !buf->table->c[1].verified,
	   "the cut chunk carries no copy, no copy's mapping, no sum");
	is_err(0, vmmx_memset(ctx, p + 4 * MiB, 0x5a, 2 * MiB), "its bytes rewritten");
	memset(want + 4 * MiB, 0x5a, 2 * MiB);
	is_err(0, vmmx_prefetch(ctx, p, 6 * MiB, HOST, NULL), "to host memory");
	is_err(0, vmmx_prefetch(ctx, p, 6 * MiB, DEV, NULL), "promoted again (a new copy)");
	is_err(0, vmmx_park(ctx, p, 6 * MiB, HOST, NULL, NULL), "parked again");
	is_err(0, vmmx_prefetch(ctx, p, 6 * MiB, DEV, NULL), "back to the device");
	ok(test_holds(ctx, buf, want, 0, 6 * MiB), "data intact: the rewritten bytes came back");
	vmmx_buf_destroy(buf);
	vmmx_ctx_trim(ctx, 0);
	vmm_counts(vmmx__ctx_vmm(ctx), &c);
	ok(c.reservations == 0 && c.mapped_bytes == 0 && c.handles == 0,
	   "trimmed: nothing reserved, mapped or held");
	free(want);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* Released with every unmap failing: the kept mappings' teardown deferred, then retried. */
static void forget_deferred(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 8 * MiB, 4);
	uint8_t *p = vmmx_buf_ptr(buf);
	struct vmm *v = vmmx__ctx_vmm(ctx);
	struct vmmx_stats s0 = { .size = sizeof(s0) }, s1 = { .size = sizeof(s1) };
	struct vmm_counts c;

	is_err(0, vmmx_prefetch(ctx, p, 8 * MiB, DEV, NULL), "deferred: promoted");
	is_err(0, vmmx_park(ctx, p, 8 * MiB, HOST, NULL, NULL), "parked");
	is_err(0, vmmx_unpark(ctx, p, 8 * MiB, NULL), "mapped in place (the copies' mappings kept)");
	vmmx_buf_destroy(buf);
	vmm_fault_arm_n(v, VMMX_OP_UNMAP, 1, 100, -VMMX_EBUSY);
	vmmx_ctx_trim(ctx, 0);
	vmm_fault_disarm_all(v);
	ok(__atomic_load_n(&ctx->ndeferred, __ATOMIC_RELAXED) > 0,
	   "a trim with every unmap failing defers the kept mappings' teardown");
	/* Retried while the unmaps still fail: their ranges' unreserves are not tried. */
	is_err(0, vmmx_stats_get(ctx, &s0), "stats before the retry");
	vmm_fault_arm_n(v, VMMX_OP_UNMAP, 1, 100, -VMMX_EBUSY);
	vmmx_ctx_trim(ctx, 0);
	vmm_fault_disarm_all(v);
	is_err(0, vmmx_stats_get(ctx, &s1), "stats after it");
	ok(s1.driver_calls[VMMX_OP_UNMAP] > s0.driver_calls[VMMX_OP_UNMAP] &&
	   s1.driver_calls[VMMX_OP_UNRESERVE] == s0.driver_calls[VMMX_OP_UNRESERVE],
	   "a retry whose unmaps fail again asks for no unreserve of a range still mapped (%llu unmaps, %llu unreserves tried)",
	   (unsigned long long)(s1.driver_calls[VMMX_OP_UNMAP] - s0.driver_calls[VMMX_OP_UNMAP]),
	   (unsigned long long)(s1.driver_calls[VMMX_OP_UNRESERVE] - s0.driver_calls[VMMX_OP_UNRESERVE]));
	ok(__atomic_load_n(&ctx->ndeferred, __ATOMIC_RELAXED) > 0, "both still queued");
	vmmx_ctx_trim(ctx, 0);
	vmm_counts(v, &c);
	ok(c.reservations == 0 && c.mapped_bytes == 0 && c.handles == 0,
	   "the next trim retries it: nothing reserved, mapped or held");
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/*
 * An unreserve asked for (as a migration's staging range is given back)
 * while a failed unmap of its range is queued is queued behind it, not
 * tried: the driver is never asked to free a range still mapped.
 */
static void unreserve_behind_unmap(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmm *v = vmmx__ctx_vmm(ctx);
	struct vmmx_stats s0 = { .size = sizeof(s0) }, s1 = { .size = sizeof(s1) };
	struct vmm_counts c;
	vmm_handle_t h;
	void *va;

	if (vmm_reserve(v, 4 * MiB, 0, &va) || vmm_create(v, DEV, 2 * MiB, &h) ||
	    vmm_map(v, (char *)va + 2 * MiB, 2 * MiB, h))
		bail("reserve, create or map: %s", vmmx_last_error());
	vmm_fault_arm_n(v, VMMX_OP_UNMAP, 1, 100, -VMMX_EBUSY);
	ok(vmmx__unmap_or_defer(ctx, (char *)va + 2 * MiB, 2 * MiB) == 1,
	   "behind: an unmap failing every try is queued");
	vmm_fault_disarm_all(v);
	is_err(0, vmmx_stats_get(ctx, &s0), "stats");
	ok(vmmx__unreserve_or_defer(ctx, va, 4 * MiB) == 1, "the unreserve of its range is queued");
	is_err(0, vmmx_stats_get(ctx, &s1), "stats again");
	is_int(0, (int)(s1.driver_calls[VMMX_OP_UNRESERVE] - s0.driver_calls[VMMX_OP_UNRESERVE]),
	       "and not tried");
	ok(vmmx__deferred_retry(ctx) == 0, "the retry unmaps, then unreserves");
	if (vmm_release(v, h))
		bail("release: %s", vmmx_last_error());
	vmm_counts(v, &c);
	ok(c.reservations == 0 && c.mapped_bytes == 0 && c.handles == 0,
	   "nothing reserved, mapped or held");
	vmmx_ctx_destroy(ctx);
}

/* ---- 5. the fault sweep ---- */

/*
 * Promote, park, promote, write part of chunk 1 behind libvmmx's back,
 * park, unpark; the count of wrong bytes found (0: nothing lost).  Each call
 * may fail; every chunk must stay as it was or move, intact.
 */
static int scenario(struct vmmx_ctx *ctx, const uint8_t *orig, uint8_t *want, int *errors)
{
	struct vmm *v = vmmx__ctx_vmm(ctx);
	struct vmmx_buf *buf;
	uint8_t *p;
	int bad = 0;

	memcpy(want, orig, 12 * MiB);
	if (vmmx_buf_create(ctx, 64 * MiB, "host", &buf))
		return (*errors)++, 0;
	if (vmmx_buf_resize(buf, 12 * MiB) || test_fill(ctx, vmmx_buf_ptr(buf), 0, 12 * MiB, 6)) {
		(*errors)++;
		vmmx_buf_destroy(buf);
		return 0;
	}
	p = vmmx_buf_ptr(buf);
	for (int round = 0; round < 2; round++) {
		*errors += vmmx_prefetch(ctx, p, 12 * MiB, DEV, NULL) != 0;
		/* Written only where it is mapped (a parked chunk is not). */
		if (!buf->table->c[1].parked) {
			if (vmm_memset(v, p + 4 * MiB + 4096 * (size_t)round, 0x70 + round, 512))
				bail("vmm_memset behind libvmmx's back: %s", vmmx_last_error());
			memset(want + 4 * MiB + 4096 * (size_t)round, 0x70 + round, 512);
		}
		*errors += vmmx_park(ctx, p, 12 * MiB, HOST, NULL, NULL) != 0;
	}
	*errors += vmmx_unpark(ctx, p, 12 * MiB, NULL) != 0;
	/* What is still parked (an unpark failed) is brought in to be read. */
	for (size_t i = 0; i < buf->table->n; i++)
		if (buf->table->c[i].parked && vmmx_unpark(ctx, p, 12 * MiB, NULL) &&
		    vmmx_prefetch(ctx, p, 12 * MiB, DEV, NULL))
			bad++;
	/* The check may meet the armed fault (a copy): check again. */
	if (!test_holds(ctx, buf, want, 0, 12 * MiB) && !test_holds(ctx, buf, want, 0, 12 * MiB))
		bad++;
	vmmx_buf_destroy(buf);
	vmmx_ctx_trim(ctx, 0);
	return bad;
}

static const int sweep_ops[] = {
	VMMX_OP_RESERVE, VMMX_OP_CREATE, VMMX_OP_MAP, VMMX_OP_UNMAP, VMMX_OP_SET_ACCESS,
	VMMX_OP_COPY, VMM_OP_CHECKSUM,
};
#define NSWEEP (sizeof(sweep_ops) / sizeof(sweep_ops[0]))

static void fault_sweep(void)
{
	struct test_sweep sw = { scenario, test_pattern(12 * MiB, 6), malloc(12 * MiB), 0 };
	struct vmm_counts base;
	struct vmmx_ctx *ctx = test_ctx(verified);

	if (!sw.want)
		bail("out of memory");
	is_int(0, test_sweep_run(ctx, &sw), "fault sweep: the scenario runs clean");
	is_int(0, sw.errors, "with no error");
	/* Chunks 0 and 2 parked twice, chunk 1 (written) copied back each time. */
	ok(test_stats(ctx).parks == 4 && test_stats(ctx).unparks == 2,
	   "parking the unwritten chunks, copying the written one, unparking what is left");
	vmm_counts(vmmx__ctx_vmm(ctx), &base);
	vmmx_ctx_destroy(ctx);
	test_fault_sweep_ops(verified, sweep_ops, NSWEEP, &base, test_sweep_run, &sw, "no byte lost");
	free(sw.orig);
	free(sw.want);
}

int main(void)
{
	plan(45 + 30 + 18 + 19 + 18 + 14 + 6 + 7 + 7 + 2 * NSWEEP);
	round_trip();
	written_unpark();
	bad_args();
	buffer_calls();
	kept_mapping();
	trimmed_chunk();
	forget_deferred();
	unreserve_behind_unmap();
	fault_sweep();
	return 0;
}
