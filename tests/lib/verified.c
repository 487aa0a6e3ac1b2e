// SPDX-License-Identifier: MIT
/*
 * verified.c - vmmx_checksum() and VMMX_HOST_COPIES=verified: a chunk
 * promoted from host memory keeps its host handle with the device checksum
 * of its copy, and goes back by mapping that handle again while the
 * checksum is unchanged.  4 MiB chunks (VMMX_CHUNK_MAX), granularity 2 MiB.
 * Checked:
 *  - vmmx_checksum() against a reference written here from the definition
 *    (include/vmmx.h), over device chunks, host chunks and a range across
 *    both; one byte changed and two words swapped change it (a plain sum of
 *    the words would miss the swap); bad arguments, by code and message;
 *  - the round trip of unwritten data: no copy and no new handle on the
 *    way back, the very host handles mapped again, the counters; and the
 *    same without the setting, copied;
 *  - data written on the device behind libvmmx's back (the driver layer
 *    called directly, as a kernel would write) is copied back, not lost; a
 *    write through vmmx_memcpy drops the copy at once;
 *  - a failed checksum at promotion (no copy kept, the move succeeds) and
 *    at the move back (copied, nothing lost), -VMMX_ENOTSUP included;
 *  - every create, map, unmap, set_access, copy and checksum of a
 *    promote-write-demote scenario failed in turn: no byte lost, no leak.
 * It runs on the cuda backend too (the checksum kernel then).
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

/* The checksum as include/vmmx.h defines it, written from the text. */
static uint64_t ref_sum(const uint8_t *p, size_t n)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < n / 8; i++) {
		uint64_t x = 0;

		for (int b = 0; b < 8; b++)
			x |= (uint64_t)p[8 * i + (size_t)b] << (8 * b);
		x ^= (uint64_t)i * 0x9e3779b97f4a7c15ull;
		x ^= x >> 30;
		x *= 0xbf58476d1ce4e5b9ull;
		x ^= x >> 27;
		x *= 0x94d049bb133111ebull;
		x ^= x >> 31;
		sum += x;
	}
	return sum;
}

/* The plain sum of the words: what the index mixing is there to beat. */
static uint64_t plain_sum(const uint8_t *p, size_t n)
{
	uint64_t sum = 0, w;

	for (size_t i = 0; i < n / 8; i++) {
		memcpy(&w, p + 8 * i, 8);
		sum += w;
	}
	return sum;
}



/* The chunks' handles now (white-box: the published table). */
static void handles(struct vmmx_buf *buf, vmm_handle_t *h, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h[i] = buf->table->c[i].handle;
}


/* ---- 1. vmmx_checksum ---- */

static void checksum(void)
{
	struct vmmx_ctx *ctx = test_ctx(plain);
	struct vmmx_buf *buf = test_host_buf(ctx, 8 * MiB, 1);
	uint8_t *want = test_pattern(8 * MiB, 1), *p = vmmx_buf_ptr(buf), w[16];
	uint64_t sum = 0, before, n0;

	is_err(0, vmmx_buf_migrate(buf, 4 * MiB, 4 * MiB, DEV, NULL), "chunk 1 to the device");
	is_string("H0", test_layout(buf), "one host chunk, one device chunk");
	n0 = test_stats(ctx).checksums;
	is_err(0, vmmx_checksum(ctx, p, 8 * MiB, &sum), "vmmx_checksum over both chunks");
	is_uint(ref_sum(want, 8 * MiB), sum, "equals the reference computed from the definition");
	is_err(0, vmmx_checksum(ctx, p + 4 * MiB, 4 * MiB, &sum), "over the device chunk");
	is_uint(ref_sum(want + 4 * MiB, 4 * MiB), sum, "equals the reference (i counts from ptr)");
	is_err(0, vmmx_checksum(ctx, p + 8, 4 * MiB - 16, &sum), "over part of the host chunk");
	is_uint(ref_sum(want + 8, 4 * MiB - 16), sum, "equals the reference");
	is_err(0, vmmx_checksum(ctx, p + 3 * MiB + 24, 2 * MiB, &sum),
	       "over a range from host into device memory");
	is_uint(ref_sum(want + 3 * MiB + 24, 2 * MiB), sum, "equals the reference");
	sum = 1;
	is_err(0, vmmx_checksum(ctx, p + 8 * MiB, 0, &sum), "0 bytes at the end");
	is_uint(0, sum, "sum to 0");
	is_uint(n0 + 5, test_stats(ctx).checksums, "vmmx_stats counts the five checksums");

	/* One byte changed on the device. */
	before = ref_sum(want + 4 * MiB, 4 * MiB);
	is_err(0, vmmx_memset(ctx, p + 6 * MiB + 3, want[6 * MiB + 3] ^ 1, 1),
	       "one byte of the device chunk changed");
	want[6 * MiB + 3] ^= 1;
	is_err(0, vmmx_checksum(ctx, p + 4 * MiB, 4 * MiB, &sum), "checksum again");
	ok(sum != before, "one byte changed changes the sum");
	is_uint(ref_sum(want + 4 * MiB, 4 * MiB), sum, "to the reference of the new bytes");

	/* Two words swapped: a plain sum of words stays, this one does not. */
	before = sum;
	n0 = plain_sum(want + 4 * MiB, 4 * MiB);
	memcpy(w, want + 5 * MiB + 8, 8);
	memcpy(w + 8, want + 5 * MiB, 8);
	ok(memcmp(w, w + 8, 8), "the two words differ");
	is_err(0, vmmx_memcpy(ctx, p + 5 * MiB, w, 16), "two words of the device chunk swapped");
	memcpy(want + 5 * MiB, w, 16);
	is_err(0, vmmx_checksum(ctx, p + 4 * MiB, 4 * MiB, &sum), "checksum again");
	ok(sum != before, "two words swapped change the sum");
	is_uint(ref_sum(want + 4 * MiB, 4 * MiB), sum, "to the reference of the new bytes");
	is_uint(n0, plain_sum(want + 4 * MiB, 4 * MiB), "(where a plain sum of words stays)");

	/* Bad arguments: code and message, nothing written. */
	sum = 42;
	is_err(-VMMX_EINVAL, vmmx_checksum(NULL, p, 8, &sum), "vmmx_checksum: NULL ctx");
	like(vmmx_last_error(), "ctx is NULL", "the message names ctx");
	is_err(-VMMX_EINVAL, vmmx_checksum(ctx, NULL, 8, &sum), "vmmx_checksum: NULL ptr");
	like(vmmx_last_error(), "ptr is NULL", "the message names ptr");
	is_err(-VMMX_EINVAL, vmmx_checksum(ctx, p, 8, NULL), "vmmx_checksum: NULL sum_p");
	like(vmmx_last_error(), "sum_p is NULL", "the message names sum_p");
	is_err(-VMMX_EINVAL, vmmx_checksum(ctx, p + 4, 8, &sum), "vmmx_checksum: misaligned ptr");
	like(vmmx_last_error(), "the address is not a multiple of 8", "the message says so");
	is_err(-VMMX_EINVAL, vmmx_checksum(ctx, p, 12, &sum), "vmmx_checksum: size 12");
	like(vmmx_last_error(), "the size is not a multiple of 8", "the message says so");
	is_err(-VMMX_EINVAL, vmmx_checksum(ctx, w, 8, &sum), "vmmx_checksum: memory of no buffer");
	like(vmmx_last_error(), "is not in a libvmmx buffer of this context", "the message says so");
	is_err(-VMMX_EINVAL, vmmx_checksum(ctx, p + 8 * MiB - 8, 16, &sum),
	       "vmmx_checksum: a range past the buffer's size");
	like(vmmx_last_error(), "goes past the end of its buffer", "the message says so");
	is_uint(42, sum, "no failed call wrote the sum");

	/* The driver layer's own checks. */
	if (test_on_sim()) {
		is_err(-VMMX_EFAULT, vmm_checksum(vmmx__ctx_vmm(ctx), w, 16, &sum),
		       "vmm_checksum: plain host memory refused (a kernel cannot read it)");
	} else {
		skip("vmm_checksum of plain host memory: sim only (a GPU would fault)");
	}
	is_err(-VMMX_EINVAL, vmm_checksum(vmmx__ctx_vmm(ctx), p + 4 * MiB, 7, &sum),
	       "vmm_checksum: a size that is not a multiple of 8");
	test_finish(ctx, buf, want);
}

/* ---- 2. the round trip ---- */

static void round_trip(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 2);
	uint8_t *want = test_pattern(16 * MiB, 2);
	vmm_handle_t h0[4], h1[4];
	uint64_t copies, creates;
	struct vmmx_stats st;

	handles(buf, h0, 4);
	test_migrate_all(buf, DEV);
	st = test_stats(ctx);
	is_string("0000", test_layout(buf), "promoted");
	is_uint(16 * MiB, st.shadow_bytes, "every chunk keeps its host handle (shadow_bytes)");
	is_uint(4, st.checksums, "one checksum per chunk, after the move");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact on the device");

	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	creates = test_driver_calls(ctx, VMMX_OP_CREATE);
	test_migrate_all(buf, HOST);
	is_uint(copies, test_driver_calls(ctx, VMMX_OP_COPY), "back to host memory with no copy");
	is_uint(creates, test_driver_calls(ctx, VMMX_OP_CREATE), "and no new handle");
	handles(buf, h1, 4);
	ok(!memcmp(h0, h1, sizeof(h0)), "the very host handles it had are mapped again");
	st = test_stats(ctx);
	is_uint(8, st.checksums, "a second checksum per chunk, before the move back");
	is_uint(4, st.verified_saved, "verified_saved counts the four chunks");
	is_uint(4, st.copies_saved, "so does copies_saved");
	is_uint(0, st.verified_changed, "none found changed");
	is_uint(0, st.shadow_bytes, "no copy kept beside");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact back in host memory");
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);

	/* The default (none): nothing kept, copied back, no checksum. */
	ctx = test_ctx(plain);
	buf = test_host_buf(ctx, 16 * MiB, 2);
	test_migrate_all(buf, DEV);
	is_uint(0, test_stats(ctx).shadow_bytes, "VMMX_HOST_COPIES unset: no host handle kept");
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	test_migrate_all(buf, HOST);
	is_uint(copies + 4, test_driver_calls(ctx, VMMX_OP_COPY), "and the chunks are copied back");
	st = test_stats(ctx);
	ok(st.checksums == 0 && st.copies_saved == 0, "with no checksum and no copy saved");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact");
	vmmx_buf_destroy(buf);
	free(want);
	vmmx_ctx_destroy(ctx);
}

/* ---- 3. written on the device ---- */

static void written(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 3);
	uint8_t *want = test_pattern(16 * MiB, 3), *p = vmmx_buf_ptr(buf), w[16];
	struct vmm *v = vmmx__ctx_vmm(ctx);
	uint64_t copies;
	struct vmmx_stats st;

	test_migrate_all(buf, DEV);
	/* Behind libvmmx's back, as a kernel writes: chunk 1 set in part, two
	 * words of chunk 2 swapped. */
	is_err(0, vmm_memset(v, p + 4 * MiB + 100, 0x5a, 1000), "chunk 1 written on the device");
	memset(want + 4 * MiB + 100, 0x5a, 1000);
	memcpy(w, want + 9 * MiB + 8, 8);
	memcpy(w + 8, want + 9 * MiB, 8);
	is_err(0, vmm_copy(v, p + 9 * MiB, w, 16), "two words of chunk 2 swapped on the device");
	memcpy(want + 9 * MiB, w, 16);
	is_uint(16 * MiB, test_stats(ctx).shadow_bytes, "libvmmx saw neither: every copy kept");
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	test_migrate_all(buf, HOST);
	is_uint(copies + 2, test_driver_calls(ctx, VMMX_OP_COPY),
		"back to host memory: the two written chunks copied");
	st = test_stats(ctx);
	is_uint(2, st.verified_changed, "verified_changed counts them");
	is_uint(2, st.verified_saved, "the two others mapped back");
	is_uint(0, st.shadow_bytes, "the stale copies went (to the cache)");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "the written bytes are what came back");

	/* A write through the API drops the copy at once. */
	test_migrate_all(buf, DEV);
	is_uint(16 * MiB, test_stats(ctx).shadow_bytes, "promoted again: four copies");
	memset(want + 13 * MiB, 0x33, 64);
	is_err(0, vmmx_memcpy(ctx, p + 13 * MiB, want + 13 * MiB, 64), "vmmx_memcpy into chunk 3");
	is_uint(12 * MiB, test_stats(ctx).shadow_bytes, "its copy is dropped before the write");
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	test_migrate_all(buf, HOST);
	is_uint(copies + 1, test_driver_calls(ctx, VMMX_OP_COPY), "back: chunk 3 copied");
	is_uint(2, test_stats(ctx).verified_changed, "without a checksum to find it changed");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact");
	test_finish(ctx, buf, want);
}

/* ---- 4. a failed checksum ---- */

static void failed(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *buf = test_host_buf(ctx, 16 * MiB, 4);
	uint8_t *want = test_pattern(16 * MiB, 4);
	struct vmm *v = vmmx__ctx_vmm(ctx);
	uint64_t copies;
	struct vmmx_stats st;

	/* At promotion: chunk 1 keeps no copy, the move succeeds. */
	vmm_fault_arm(v, (enum vmmx_op)VMM_OP_CHECKSUM, 2, 0);
	is_err(0, vmmx_buf_migrate(buf, 0, 16 * MiB, DEV, NULL),
	       "promotion with the second checksum failed: the move succeeds");
	is_string("0000", test_layout(buf), "every chunk moved");
	is_uint(12 * MiB, test_stats(ctx).shadow_bytes, "the chunk without a checksum keeps no copy");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact");
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	test_migrate_all(buf, HOST);
	is_uint(copies + 1, test_driver_calls(ctx, VMMX_OP_COPY), "back: that chunk copied");
	is_uint(3, test_stats(ctx).verified_saved, "the other three mapped back");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "data intact");

	/* At the move back: copied, not counted as changed; ENOTSUP the same. */
	test_migrate_all(buf, DEV);
	is_err(0, vmm_fault_arm_n(v, (enum vmmx_op)VMM_OP_CHECKSUM, 1, 2, -VMMX_ENOTSUP),
	       "the next two checksums fail with -VMMX_ENOTSUP");
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_buf_migrate(buf, 0, 16 * MiB, HOST, NULL),
	       "move back with two checksums failed: it succeeds");
	is_uint(copies + 2, test_driver_calls(ctx, VMMX_OP_COPY), "those two chunks copied");
	st = test_stats(ctx);
	is_uint(5, st.verified_saved, "the other two mapped back");
	is_uint(0, st.verified_changed, "a failed checksum is not a change");
	is_uint(0, st.shadow_bytes, "no copy left");
	ok(test_holds(ctx, buf, want, 0, 16 * MiB), "no byte lost");
	is_string("", vmmx_last_error(), "the swallowed failures leave no last error");
	test_finish(ctx, buf, want);
}

/* ---- 5. the fault sweep ---- */

/*
 * Promote, write part of chunk 1 behind libvmmx's back, demote, twice; the
 * count of wrong bytes found (0: nothing lost).  Moves may fail; every
 * chunk must stay where it was or move, intact.
 */
static int scenario(struct vmmx_ctx *ctx, const uint8_t *orig, uint8_t *want, int *errors)
{
	struct vmm *v = vmmx__ctx_vmm(ctx);
	struct vmmx_buf *buf;
	int bad = 0;

	memcpy(want, orig, 12 * MiB);
	if (vmmx_buf_create(ctx, 64 * MiB, "host", &buf))
		return (*errors)++, 0;
	if (vmmx_buf_resize(buf, 12 * MiB) || test_fill(ctx, vmmx_buf_ptr(buf), 0, 12 * MiB, 5)) {
		(*errors)++;
		vmmx_buf_destroy(buf);
		return 0;
	}
	for (int round = 0; round < 2; round++) {
		uint8_t *p = vmmx_buf_ptr(buf);

		*errors += vmmx_buf_migrate(buf, 0, 12 * MiB, DEV, NULL) != 0;
		/* memset is not swept: this write always lands, wherever chunk 1 is */
		if (vmm_memset(v, p + 4 * MiB + 4096 * (size_t)round, 0x70 + round, 512))
			bail("vmm_memset behind libvmmx's back: %s", vmmx_last_error());
		memset(want + 4 * MiB + 4096 * (size_t)round, 0x70 + round, 512);
		*errors += vmmx_buf_migrate(buf, 0, 12 * MiB, HOST, NULL) != 0;
		/* The check may meet the armed fault (a copy): check again. */
		if (!test_holds(ctx, buf, want, 0, 12 * MiB) && !test_holds(ctx, buf, want, 0, 12 * MiB))
			bad++;
	}
	vmmx_buf_destroy(buf);
	vmmx_ctx_trim(ctx, 0);
	return bad;
}

static const int sweep_ops[] = {
	VMMX_OP_CREATE, VMMX_OP_MAP, VMMX_OP_UNMAP, VMMX_OP_SET_ACCESS, VMMX_OP_COPY,
	VMM_OP_CHECKSUM,
};
#define NSWEEP (sizeof(sweep_ops) / sizeof(sweep_ops[0]))

static void fault_sweep(void)
{
	struct test_sweep sw = { scenario, test_pattern(12 * MiB, 5), malloc(12 * MiB), 0 };
	struct vmm_counts base;
	struct vmmx_ctx *ctx = test_ctx(verified);

	if (!sw.want)
		bail("out of memory");
	is_int(0, test_sweep_run(ctx, &sw), "fault sweep: the scenario runs clean");
	is_int(0, sw.errors, "with no error");
	ok(test_stats(ctx).verified_saved >= 4 && test_stats(ctx).verified_changed == 2,
	   "saving the unwritten chunks' copies and copying the written one");
	vmm_counts(vmmx__ctx_vmm(ctx), &base);
	vmmx_ctx_destroy(ctx);
	test_fault_sweep_ops(verified, sweep_ops, NSWEEP, &base, test_sweep_run, &sw, "no byte lost");
	free(sw.orig);
	free(sw.want);
}

int main(void)
{
	plan(41 + 18 + 15 + 16 + 3 + 2 * NSWEEP);
	checksum();
	round_trip();
	written();
	failed();
	fault_sweep();
	return tap_done();
}
