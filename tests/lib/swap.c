// SPDX-License-Identifier: MIT
/*
 * swap.c - vmmx_swap(): one range sent back to host memory, another brought
 * to the device, the first's host copies mapped while the second's copies
 * run.  VMMX_HOST_COPIES=verified, 4 MiB chunks, the device at a 16 MiB
 * limit, so that the range coming in fits only in the room the other leaves.
 * Checked:
 *  - the swap: the chunks going out are mapped back onto the host handles
 *    they had (no copy, no new handle), the ones coming in take their device
 *    memory (no device handle made: at the limit, b fits only in the room a
 *    leaves), data intact both ways, the counters, nothing logged; a part
 *    each; nothing to send back;
 *  - back again (the chunks brought in kept their copies too);
 *  - a chunk written on the device behind libvmmx's back: the two moves in
 *    turn, that chunk copied, nothing lost;
 *  - without host copies, ranges in one buffer, a range over two buffers:
 *    the two moves in turn, right;
 *  - bad arguments by code and message;
 *  - every reserve, create, map, unmap, set_access, copy, sync and
 *    checksum of a swap-write-swap scenario failed in turn, and pairs of
 *    failed map, unmap, set_access, copy and create calls: no byte lost, no
 *    leak.
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
					"VMMX_DEVICE_LIMIT=16MiB", NULL };
static const char *const plain[] = { "VMMX_CHUNK_MAX=4MiB", "VMMX_DEVICE_LIMIT=16MiB", NULL };

static uint64_t calls(struct vmmx_ctx *ctx, enum vmmx_op op)
{
	return test_driver_calls(ctx, op);
}

/* ---- 1. the swap, and back ---- */

static void swap_and_back(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *a = test_host_buf(ctx, 16 * MiB, 1), *b = test_host_buf(ctx, 16 * MiB, 2);
	uint8_t *wa = test_pattern(16 * MiB, 1), *wb = test_pattern(16 * MiB, 2);
	char *pa = vmmx_buf_ptr(a), *pb = vmmx_buf_ptr(b);
	uint64_t copies, creates, saved;
	vmm_handle_t ha[4], hd[4];
	struct vmmx_stats st;

	for (int i = 0; i < 4; i++)
		ha[i] = a->table->c[i].handle;
	test_migrate_all(a, DEV);
	is_string("0000", test_layout(a), "a fills the device (16 MiB at a 16 MiB limit)");
	for (int i = 0; i < 4; i++)
		hd[i] = a->table->c[i].handle;
	is_err(-VMMX_ENOMEM, vmmx_prefetch(ctx, pb, 4 * MiB, DEV, NULL),
	       "b alone finds no room");
	copies = calls(ctx, VMMX_OP_COPY);
	creates = calls(ctx, VMMX_OP_CREATE);
	saved = test_stats(ctx).verified_saved;
	test_log_clear();
	is_err(0, vmmx_swap(ctx, pa, 16 * MiB, HOST, pb, 16 * MiB, DEV, NULL),
	       "vmmx_swap: a back, b in");
	is_string("HHHH", test_layout(a), "a is in host memory");
	is_string("0000", test_layout(b), "b is on the device");
	ok(a->table->c[0].handle == ha[0] && a->table->c[3].handle == ha[3],
	   "a's chunks are the host handles they had before (their kept copies)");
	ok(b->table->c[0].handle == hd[0] || b->table->c[0].handle == hd[1] ||
	   b->table->c[0].handle == hd[2] || b->table->c[0].handle == hd[3],
	   "b's chunks are a's device handles");
	is_uint(copies + 4, calls(ctx, VMMX_OP_COPY), "four copies: b's, none for a");
	is_uint(creates, calls(ctx, VMMX_OP_CREATE), "no handle made");
	st = test_stats(ctx);
	is_uint(saved + 4, st.verified_saved, "a's four chunks found unchanged by their checksums");
	is_uint(16 * MiB, st.shadow_bytes, "b keeps its host copies; a's are its memory again");
	ok(test_holds(ctx, a, wa, 0, 16 * MiB), "a's data intact");
	ok(test_holds(ctx, b, wb, 0, 16 * MiB), "b's data intact");
	is_string("", test_log(), "nothing logged");

	copies = calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_swap(ctx, pb, 16 * MiB, HOST, pa, 16 * MiB, DEV, NULL),
	       "and back: b out, a in");
	is_string("0000", test_layout(a), "a on the device");
	is_string("HHHH", test_layout(b), "b in host memory");
	is_uint(copies + 4, calls(ctx, VMMX_OP_COPY), "four copies: a's, none for b");
	is_uint(creates, calls(ctx, VMMX_OP_CREATE), "still no handle made");
	ok(test_holds(ctx, a, wa, 0, 16 * MiB) && test_holds(ctx, b, wb, 0, 16 * MiB),
	   "both intact");

	/* A part each: one chunk out, one in. */
	is_err(0, vmmx_swap(ctx, pa + 4 * MiB, 4 * MiB, HOST, pb + 8 * MiB, 1, DEV, NULL),
	       "a's second chunk out, b's third in (a range widened to its chunk)");
	is_string("0H00", test_layout(a), "a: the second chunk out");
	is_string("HH0H", test_layout(b), "b: the third chunk in");
	ok(test_holds(ctx, a, wa, 0, 16 * MiB) && test_holds(ctx, b, wb, 0, 16 * MiB),
	   "both intact");
	/* Nothing to send back: a plain bring-in (no room, so ENOMEM). */
	is_err(-VMMX_ENOMEM, vmmx_swap(ctx, pa + 4 * MiB, 4 * MiB, HOST, pb, 4 * MiB, DEV, NULL),
	       "out already in host memory: only the bring-in, which finds no room");
	is_string("0H00", test_layout(a), "a as it was");
	is_string("HH0H", test_layout(b), "b as it was");
	vmmx_buf_destroy(b);
	free(wb);
	test_finish(ctx, a, wa);
}

/* ---- 2. the two moves in turn ---- */

static void in_turn(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *a = test_host_buf(ctx, 16 * MiB, 3), *b = test_host_buf(ctx, 16 * MiB, 4);
	uint8_t *wa = test_pattern(16 * MiB, 3), *wb = test_pattern(16 * MiB, 4);
	char *pa = vmmx_buf_ptr(a), *pb = vmmx_buf_ptr(b);
	uint64_t copies, changed;

	/* Written behind libvmmx's back while on the device. */
	test_migrate_all(a, DEV);
	if (vmm_memset(vmmx__ctx_vmm(ctx), pa + 4 * MiB + 100, 0x5a, 1000))
		bail("vmm_memset: %s", vmmx_last_error());
	memset(wa + 4 * MiB + 100, 0x5a, 1000);
	copies = calls(ctx, VMMX_OP_COPY);
	changed = test_stats(ctx).verified_changed;
	is_err(0, vmmx_swap(ctx, pa, 16 * MiB, HOST, pb, 16 * MiB, DEV, NULL),
	       "a swap with a chunk of a written");
	is_uint(changed + 1, test_stats(ctx).verified_changed, "its checksum found it written");
	is_uint(copies + 5, calls(ctx, VMMX_OP_COPY), "that chunk copied back, and b's four in");
	is_string("HHHH", test_layout(a), "a in host memory");
	is_string("0000", test_layout(b), "b on the device");
	ok(test_holds(ctx, a, wa, 0, 16 * MiB), "a holds what was written");
	ok(test_holds(ctx, b, wb, 0, 16 * MiB), "b intact");

	/* Ranges in one buffer. */
	is_err(0, vmmx_swap(ctx, pb, 8 * MiB, HOST, pb + 8 * MiB, 8 * MiB, DEV, NULL),
	       "two ranges of one buffer (its second half already in)");
	is_string("HH00", test_layout(b), "its first half sent back");
	/* A range running past its buffer: the moves in turn, by parts. */
	is_err(-VMMX_EFAULT, vmmx_swap(ctx, pb + 8 * MiB, 16 * MiB, HOST, pa, 4 * MiB, DEV, NULL),
	       "an out range running past its buffer's size");
	like(vmmx_last_error(), "vmmx_swap: address 0x", "the message names the address");
	like(vmmx_last_error(), "is past its buffer's size", "and what is wrong with it");
	is_string("HHHH", test_layout(b), "what moved stays moved (b's part)");
	is_string("HHHH", test_layout(a), "a not brought in");
	ok(test_holds(ctx, a, wa, 0, 16 * MiB) && test_holds(ctx, b, wb, 0, 16 * MiB),
	   "both intact");
	vmmx_buf_destroy(a);
	vmmx_buf_destroy(b);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);

	/* Without host copies. */
	ctx = test_ctx(plain);
	a = test_host_buf(ctx, 16 * MiB, 3);
	b = test_host_buf(ctx, 16 * MiB, 4);
	free(wa);
	wa = test_pattern(16 * MiB, 3);
	test_migrate_all(a, DEV);
	copies = calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_swap(ctx, vmmx_buf_ptr(a), 16 * MiB, HOST, vmmx_buf_ptr(b), 16 * MiB, DEV,
			    NULL),
	       "a swap without host copies");
	is_uint(copies + 8, calls(ctx, VMMX_OP_COPY), "two moves: eight copies");
	is_string("HHHH", test_layout(a), "a in host memory");
	is_string("0000", test_layout(b), "b on the device");
	ok(test_holds(ctx, a, wa, 0, 16 * MiB) && test_holds(ctx, b, wb, 0, 16 * MiB),
	   "both intact");
	vmmx_buf_destroy(b);
	free(wb);
	test_finish(ctx, a, wa);
}

/* ---- 3. bad arguments ---- */

static void bad_args(void)
{
	struct vmmx_ctx *ctx = test_ctx(verified);
	struct vmmx_buf *a = test_host_buf(ctx, 8 * MiB, 5);
	char *p = vmmx_buf_ptr(a);

	is_err(-VMMX_EINVAL, vmmx_swap(NULL, p, 1, HOST, p, 1, DEV, NULL), "NULL ctx");
	like(vmmx_last_error(), "vmmx_swap: ctx is NULL", "said");
	is_err(-VMMX_EINVAL, vmmx_swap(ctx, NULL, 1, HOST, p, 1, DEV, NULL), "NULL out");
	like(vmmx_last_error(), "vmmx_swap: out is NULL", "said");
	is_err(-VMMX_EINVAL, vmmx_swap(ctx, p, 1, HOST, NULL, 1, DEV, NULL), "NULL in");
	like(vmmx_last_error(), "vmmx_swap: in is NULL", "said");
	is_err(-VMMX_EINVAL, vmmx_swap(ctx, p, 1, DEV, p, 1, DEV, NULL), "to_out a device");
	like(vmmx_last_error(), "vmmx_swap: to_out device:0 is not host memory", "said");
	is_err(-VMMX_EINVAL, vmmx_swap(ctx, p, 1, HOST, p, 1, HOST, NULL), "to_in host memory");
	like(vmmx_last_error(), "vmmx_swap: to_in host is not a device", "said");
	is_err(-VMMX_EINVAL,
	       vmmx_swap(ctx, p, 1, HOST, p, 1, (struct vmmx_loc){ VMMX_LOC_DEVICE, 7 }, NULL),
	       "a device the context cannot use");
	like(vmmx_last_error(), "to_in device:7 is not a device this context can use", "said");
	is_err(-VMMX_EINVAL, vmmx_swap(ctx, p, SIZE_MAX, HOST, p, 1, DEV, NULL), "a wrapping range");
	like(vmmx_last_error(), "vmmx_swap: the out range wraps", "said");
	is_err(0, vmmx_swap(ctx, NULL, 0, HOST, NULL, 0, DEV, NULL), "nothing either way: 0");
	is_string("HH", test_layout(a), "and nothing moved");
	vmmx_buf_destroy(a);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 4. faults ---- */

/*
 * a (12 MiB) to the device, swapped for b, b written behind libvmmx's back,
 * swapped for a again; both read back.  Each call may fail; every chunk must
 * stay where it was or move, intact.
 */
static int scenario(struct vmmx_ctx *ctx, const uint8_t *orig, uint8_t *want, int *errors)
{
	struct vmm *v = vmmx__ctx_vmm(ctx);
	uint8_t *wb = want + 12 * MiB;
	struct vmmx_buf *a = NULL, *b = NULL;
	char *pa, *pb;
	int bad = 0;

	memcpy(want, orig, 24 * MiB);
	if (vmmx_buf_create(ctx, 64 * MiB, "host", &a) || vmmx_buf_create(ctx, 64 * MiB, "host", &b) ||
	    vmmx_buf_resize(a, 12 * MiB) || vmmx_buf_resize(b, 12 * MiB) ||
	    test_fill(ctx, vmmx_buf_ptr(a), 0, 12 * MiB, 7) ||
	    test_fill(ctx, vmmx_buf_ptr(b), 0, 12 * MiB, 8)) {
		(*errors)++;
		goto out;
	}
	pa = vmmx_buf_ptr(a);
	pb = vmmx_buf_ptr(b);
	*errors += vmmx_prefetch(ctx, pa, 12 * MiB, DEV, NULL) != 0;
	*errors += vmmx_swap(ctx, pa, 12 * MiB, HOST, pb, 12 * MiB, DEV, NULL) != 0;
	/* Written only where it lies on the device. */
	if (!vmm_loc_is_host(b->table->c[1].loc)) {
		if (vmm_memset(v, pb + 4 * MiB + 4096, 0x71, 512))
			bail("vmm_memset behind libvmmx's back: %s", vmmx_last_error());
		memset(wb + 4 * MiB + 4096, 0x71, 512);
	}
	*errors += vmmx_swap(ctx, pb, 12 * MiB, HOST, pa, 12 * MiB, DEV, NULL) != 0;
	/* The check may meet the armed fault (a copy): check again. */
	if (!test_holds(ctx, a, want, 0, 12 * MiB) && !test_holds(ctx, a, want, 0, 12 * MiB))
		bad++;
	if (!test_holds(ctx, b, wb, 0, 12 * MiB) && !test_holds(ctx, b, wb, 0, 12 * MiB))
		bad++;
out:
	if (a)
		vmmx_buf_destroy(a);
	if (b)
		vmmx_buf_destroy(b);
	vmmx_ctx_trim(ctx, 0);
	return bad;
}

static const int sweep_ops[] = {
	VMMX_OP_RESERVE, VMMX_OP_CREATE, VMMX_OP_MAP, VMMX_OP_UNMAP, VMMX_OP_SET_ACCESS,
	VMMX_OP_COPY, VMMX_OP_SYNC, VMM_OP_CHECKSUM,
};
#define NSWEEP (sizeof(sweep_ops) / sizeof(sweep_ops[0]))

static uint8_t *two_patterns(void)
{
	uint8_t *p = malloc(24 * MiB), *a = test_pattern(12 * MiB, 7), *b = test_pattern(12 * MiB, 8);

	if (!p)
		bail("out of memory");
	memcpy(p, a, 12 * MiB);
	memcpy(p + 12 * MiB, b, 12 * MiB);
	free(a);
	free(b);
	return p;
}

static void fault_sweep(void)
{
	struct test_sweep sw = { scenario, two_patterns(), malloc(24 * MiB), 0 };
	struct vmm_counts base;
	struct vmmx_ctx *ctx = test_ctx(verified);

	if (!sw.want)
		bail("out of memory");
	is_int(0, test_sweep_run(ctx, &sw), "fault sweep: the scenario runs clean");
	is_int(0, sw.errors, "with no error");
	vmm_counts(vmmx__ctx_vmm(ctx), &base);
	vmmx_ctx_destroy(ctx);
	test_fault_sweep_ops(verified, sweep_ops, NSWEEP, &base, test_sweep_run, &sw, "no byte lost");
	free(sw.orig);
	free(sw.want);
}

/* Two calls failed at once: each pair of these ops, the 1st to 4th call of each. */
static void fault_pairs(void)
{
	static const enum vmmx_op ops[] = { VMMX_OP_CREATE, VMMX_OP_MAP, VMMX_OP_UNMAP,
					    VMMX_OP_SET_ACCESS, VMMX_OP_COPY };
	uint8_t *orig = two_patterns(), *want = malloc(24 * MiB);
	unsigned int runs = 0, bad = 0, leaks = 0;

	if (!want)
		bail("out of memory");
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
		for (size_t j = i + 1; j < sizeof(ops) / sizeof(ops[0]); j++)
			for (int ki = 1; ki <= 4; ki++)
				for (int kj = 1; kj <= 4; kj++) {
					struct vmmx_ctx *ctx = test_ctx(verified);
					struct vmm *v = vmmx__ctx_vmm(ctx);
					int errors = 0, b;

					/* Past the first calls of the setup (the buffers
					 * made and filled): the 9th to 12th of each. */
					vmm_fault_arm(v, ops[i], (uint64_t)ki + 8, 0);
					vmm_fault_arm(v, ops[j], (uint64_t)kj + 8, 0);
					b = scenario(ctx, orig, want, &errors);
					vmm_fault_arm(v, ops[i], 0, 0);
					vmm_fault_arm(v, ops[j], 0, 0);
					if (b && bad++ < 3)
						diag("pair %d#%d %d#%d: %d buffers wrong", ops[i], ki,
						     ops[j], kj, b);
					leaks += !test_no_leaks(ctx);
					vmmx_ctx_destroy(ctx);
					runs++;
				}
	is_uint(160, runs, "160 runs with two calls failed");
	ok(!bad && !leaks, "no byte lost, no leak (%u wrong, %u leaking)", bad, leaks);
	free(orig);
	free(want);
}

int main(void)
{
	plan(28 + 22 + 17 + 2 + 2 * NSWEEP + 2);
	swap_and_back();
	in_turn();
	bad_args();
	fault_sweep();
	fault_pairs();
	return 0;
}
