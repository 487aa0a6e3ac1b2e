// SPDX-License-Identifier: MIT
/*
 * undo.c - a call that fails and whose undo fails too must still leave
 * every chunk mapped with its bytes.  Regression tests for holes the
 * torture test found with 1% of driver calls failing:
 *  - a migration: a failed map followed by a failed map of the old handle
 *    back left "chunk ... could not be restored; its address is unmapped"
 *    (each map call of a two-chunk move is failed twice in a row in turn);
 *  - a shrink: a failed unmap followed by a failed map back left "shrink
 *    failed ... and restoring chunk ... failed too; buffer truncated".  A
 *    shrink now unmaps only chunks past the new size and restores nothing:
 *    an unmap that fails every try leaves its chunk mapped as slack (each
 *    unmap of a four-chunk shrink is failed in turn, every try);
 *  - a grant that fails and the unmap after it too: the new handle stayed
 *    mapped (its unmap deferred), so mapping the old one back failed with
 *    "range overlaps the mapping" and the chunk was lost, and a later grow
 *    at that address failed the same way (each grant and each unmap of a
 *    trim that cuts a chunk is failed in turn, in pairs).
 */
#include "config.h"

#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#define TRIES 10
#define SHRINK_TRIES 3
#define PAIRS 4 /* grants and unmaps of a cutting shrink failed, in pairs */

static void shrink_undo(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", NULL };

	for (int nth = 1; nth <= SHRINK_TRIES; nth++) {
		struct vmmx_ctx *ctx = test_ctx(vars);
		struct vmm *v = vmmx__ctx_vmm(ctx);
		struct vmmx_buf *buf;
		int err;

		if (vmmx_buf_create(ctx, 8 * MiB, NULL, &buf) || vmmx_buf_resize(buf, 8 * MiB) ||
		    test_fill(ctx, vmmx_buf_ptr(buf), 0, 8 * MiB, (uint32_t)nth))
			bail("setup: %s", vmmx_last_error());
		test_log_clear();
		/* Every try of the nth unmap (from the end) fails. */
		vmm_fault_arm_n(v, VMMX_OP_UNMAP, (uint64_t)nth, VMMX__TRIES, 0);
		err = vmmx_buf_resize(buf, 2 * MiB);
		vmm_fault_disarm_all(v);
		is_err(0, err, "unmap %d of a shrink failed every try: the shrink still succeeds", nth);
		like(test_log(), "could not be unmapped", "unmap %d: logged", nth);
		is_uint(2 * MiB, vmmx_buf_size(buf), "unmap %d: the size is the new one", nth);
		is_uint((size_t)(4 - nth) * 2 * MiB, test_stats(ctx).slack_bytes,
			"unmap %d: that chunk and those before it stay mapped as slack", nth);
		is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, 2 * MiB, (uint32_t)nth),
			"unmap %d: every byte below the size is right", nth);
		is_err(0, vmmx_buf_trim(buf), "unmap %d: vmmx_buf_trim unmaps them", nth);
		is_uint(0, test_stats(ctx).slack_bytes, "unmap %d: no slack left", nth);
		is_err(0, vmmx_buf_resize(buf, 8 * MiB), "unmap %d: the buffer grows back", nth);
		is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, 2 * MiB, (uint32_t)nth),
			"unmap %d: and keeps its first 2 MiB", nth);
		vmmx_buf_destroy(buf);
		vmmx_ctx_destroy(ctx);
	}
}

/* One pair: the @na-th grant and the @nu-th unmap of a trim that cuts fail. */
static void grant_unmap_pair(int na, int nu)
{
	struct vmmx_ctx *ctx = test_ctx(NULL);
	struct vmm *v = vmmx__ctx_vmm(ctx);
	uint32_t seed = (uint32_t)(na * 16 + nu);
	struct vmmx_buf *buf;
	size_t want;
	int err;

	if (vmmx_buf_create(ctx, 8 * MiB, NULL, &buf) || vmmx_buf_resize(buf, 8 * MiB) ||
	    test_fill(ctx, vmmx_buf_ptr(buf), 0, 8 * MiB, seed))
		bail("setup: %s", vmmx_last_error());
	if (vmmx_buf_resize(buf, 4 * MiB))
		bail("shrink: %s", vmmx_last_error());
	test_log_clear();
	vmm_fault_arm(v, VMMX_OP_SET_ACCESS, (uint64_t)na, 0);
	vmm_fault_arm(v, VMMX_OP_UNMAP, (uint64_t)nu, 0);
	err = vmmx_buf_trim(buf);
	vmm_fault_disarm_all(v);
	want = 4 * MiB;
	ok(err == 0 || err == -VMMX_EFAULTINJ,
	   "grant %d and unmap %d of a cutting trim failed: 0 or the fault (%d)", na, nu, err);
	ok(!strstr(test_log(), "truncated") && !strstr(test_log(), "could not be mapped back") &&
	       !strstr(test_log(), "was lost"),
	   "grant %d, unmap %d: no chunk lost (%s)", na, nu, test_log());
	is_uint(want, vmmx_buf_size(buf), "grant %d, unmap %d: the size is unchanged", na, nu);
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, want, seed),
		"grant %d, unmap %d: every byte kept is right", na, nu);
	/* Nothing left mapped where the buffer has no chunk: growing back works. */
	err = vmmx_buf_resize(buf, 8 * MiB);
	is_err(0, err, "grant %d, unmap %d: the buffer grows back to 8 MiB", na, nu);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

int main(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", NULL };

	plan(TRIES * 4 + SHRINK_TRIES * 9 + PAIRS * PAIRS * 5);
	shrink_undo();
	for (int na = 1; na <= PAIRS; na++)
		for (int nu = 1; nu <= PAIRS; nu++)
			grant_unmap_pair(na, nu);
	for (int nth = 1; nth <= TRIES; nth++) {
		struct vmmx_ctx *ctx = test_ctx(vars);
		struct vmmx_buf *buf;
		struct vmmx_residency r = { 0 };
		struct vmmx_chunk_info ci;
		size_t moved = 0;
		int err;
		bool mapped = true;

		if (vmmx_buf_create(ctx, 8 * MiB, NULL, &buf) || vmmx_buf_resize(buf, 4 * MiB) ||
		    test_fill(ctx, vmmx_buf_ptr(buf), 0, 4 * MiB, (uint32_t)nth))
			bail("setup: %s", vmmx_last_error());
		test_log_clear();
		vmm_fault_arm_n(vmmx__ctx_vmm(ctx), VMMX_OP_MAP, (uint64_t)nth, 2, 0);
		err =
		    vmmx_buf_migrate(buf, 0, 4 * MiB, (struct vmmx_loc){ VMMX_LOC_HOST, 0 }, &moved);
		vmm_fault_disarm_all(vmmx__ctx_vmm(ctx));
		ok(err == 0 || err == -VMMX_EFAULTINJ,
		   "map %d and the next failed: vmmx_buf_migrate returns 0 or the fault (%d, moved "
		   "%zu)",
		   nth, err, moved);
		ok(!strstr(test_log(), "could not be restored"),
		   "map %d: no chunk lost its mapping", nth);
		for (size_t off = 0; off < 4 * MiB; off += 2 * MiB)
			mapped = mapped && !vmmx_lookup(ctx, (char *)vmmx_buf_ptr(buf) + off, &ci);
		ok(mapped && !vmmx_buf_residency(buf, 0, 4 * MiB, &r) &&
		       r.device + r.host == 4 * MiB,
		   "map %d: both chunks are mapped", nth);
		is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, 4 * MiB, (uint32_t)nth),
			"map %d: every byte is right", nth);
		vmmx_buf_destroy(buf);
		vmmx_ctx_destroy(ctx);
	}
	return tap_done();
}
