// SPDX-License-Identifier: MIT
/*
 * shrink_pairs.c - a shrink and then a trim with two driver calls failed at
 * once, every pair of operations and positions in turn, with the device at
 * its limit and host memory either free or at VMMX_HOST_LIMIT=0.
 *
 * Regression test: with VMMX_DEVICE_LIMIT=64MiB VMMX_HOST_LIMIT=0
 * VMMX_FAULT=create:2,map:2 (or create:2,set_access:2), a filled 64 MiB
 * device buffer resized to 8 MiB + 4 KiB returned -ENOMEM with size 0 and no
 * chunk: the kept bytes were in a malloc'd bounce buffer when it was freed.
 * Now a shrink makes no driver call but unmaps of chunks past the new size,
 * and a trim gives the old handle back only once the new one is mapped in
 * its place.  For every pair (on a 16 MiB buffer at a 16 MiB limit, cut
 * to 2 MiB + 4 KiB) this checks:
 *  - the shrink succeeds with the new size and every byte below it intact;
 *  - the trim returns 0, the injected fault, or -VMMX_ENOMEM (no room for
 *    the kept part anywhere), and when it fails the chunks are exactly as
 *    before it; the bytes are intact either way; no "lost" or "truncated"
 *    in the log;
 *  - with the faults gone, a trim and a grow back to the full size work (the trim
 *    may still find no room with the host at 0), and after the destroy
 *    nothing is left.
 */
#include "config.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

static const enum vmmx_op ops[] = {
	VMMX_OP_RESERVE, VMMX_OP_UNRESERVE, VMMX_OP_CREATE, VMMX_OP_RELEASE, VMMX_OP_MAP,
	VMMX_OP_UNMAP, VMMX_OP_SET_ACCESS, VMMX_OP_COPY, VMMX_OP_SYNC,
};
#define NOPS (sizeof(ops) / sizeof(ops[0]))
#define NTH 2                     /* each operation's 1st and 2nd call */
#define KEEP (8 * MiB + 4096)     /* the reproducer's: rounded up to 10 MiB (2 MiB chunks) */
#define SWEEP_SIZE (16 * MiB)      /* the sweep's buffer and device limit */
#define SWEEP_KEEP (2 * MiB + 4096) /* rounded up to 4 MiB */

struct tally {
	unsigned int runs;
	unsigned int shrink_bad;  /* the shrink failed, or the size is wrong */
	unsigned int data_bad;    /* a byte below the new size changed */
	unsigned int trim_code;   /* the trim returned something else */
	unsigned int trim_moved;  /* a failed trim changed the chunks */
	unsigned int lost_log;    /* "lost" or "truncated" in the log */
	unsigned int after_bad;   /* without faults: trim, grow back, or the destroy leaked */
	unsigned int trims_ok;    /* trims that succeeded under faults */
	char first[512];
};

static void note(struct tally *t, unsigned int *ctr, const char *fmt, ...) VMMX__FMT(3, 4);

static void note(struct tally *t, unsigned int *ctr, const char *fmt, ...)
{
	va_list ap;

	if (!(*ctr)++ && !t->first[0]) {
		va_start(ap, fmt);
		vsnprintf(t->first, sizeof(t->first), fmt, ap);
		va_end(ap);
	}
}

/* The chunk list as text, to compare before and after a failed trim. */
static void layout(struct vmmx_buf *buf, char *out, size_t len)
{
	struct vmmx_chunk_info c[16];
	size_t n = 0, pos = 0;

	out[0] = 0;
	if (vmmx_buf_chunks(buf, c, 16, &n) || n > 16) {
		snprintf(out, len, "?");
		return;
	}
	for (size_t i = 0; i < n && pos < len; i++)
		pos += (size_t)snprintf(out + pos, len - pos, "%zu@%d:%d ", c[i].size,
					(int)c[i].loc.kind, c[i].loc.id);
}

static void one(bool host_free, int a, uint64_t na, int b, uint64_t nb, struct tally *t)
{
	static const char *const lim0[] = { "VMMX_DEVICE_LIMIT=16MiB", "VMMX_HOST_LIMIT=0",
					    "VMMX_HEADROOM=0", NULL };
	static const char *const lim[] = { "VMMX_DEVICE_LIMIT=16MiB", "VMMX_HEADROOM=0", NULL };
	struct vmmx_ctx *ctx = test_ctx(host_free ? lim : lim0);
	struct vmm *v = vmmx__ctx_vmm(ctx);
	const char *an = vmm_op_name(ops[a]), *bn = vmm_op_name(ops[b]);
	char before[256], after[256];
	struct vmmx_buf *buf;
	size_t bad;
	int err;

	t->runs++;
	if (vmmx_buf_create(ctx, SWEEP_SIZE, "device", &buf) || vmmx_buf_resize(buf, SWEEP_SIZE) ||
	    test_fill(ctx, vmmx_buf_ptr(buf), 0, SWEEP_SIZE, 21))
		bail("setup: %s", vmmx_last_error());
	test_log_clear();
	vmm_fault_arm(v, ops[a], na, 0);
	vmm_fault_arm(v, ops[b], nb, 0);
	err = vmmx_buf_resize(buf, SWEEP_KEEP);
	if (err || vmmx_buf_size(buf) != 4 * MiB)
		note(t, &t->shrink_bad, "%s:%llu,%s:%llu: shrink returned %d, size %zu (%s)", an,
		     (unsigned long long)na, bn, (unsigned long long)nb, err, vmmx_buf_size(buf),
		     vmmx_last_error());
	layout(buf, before, sizeof(before));
	err = vmmx_buf_trim(buf);
	layout(buf, after, sizeof(after));
	vmm_fault_disarm_all(v);
	if (err == 0)
		t->trims_ok++;
	else if (err != -VMMX_EFAULTINJ && err != -VMMX_ENOMEM)
		note(t, &t->trim_code, "%s:%llu,%s:%llu: trim returned %d (%s)", an,
		     (unsigned long long)na, bn, (unsigned long long)nb, err, vmmx_last_error());
	else if (strcmp(before, after))
		note(t, &t->trim_moved, "%s:%llu,%s:%llu: failed trim changed [%s] to [%s]", an,
		     (unsigned long long)na, bn, (unsigned long long)nb, before, after);
	bad = test_check(ctx, vmmx_buf_ptr(buf), 0, SWEEP_KEEP, 21);
	if (bad != SIZE_MAX)
		note(t, &t->data_bad, "%s:%llu,%s:%llu: byte %zu below the size is wrong", an,
		     (unsigned long long)na, bn, (unsigned long long)nb, bad);
	if (strstr(test_log(), "lost") || strstr(test_log(), "truncated"))
		note(t, &t->lost_log, "%s:%llu,%s:%llu: %s", an, (unsigned long long)na, bn,
		     (unsigned long long)nb, test_log());
	err = vmmx_buf_trim(buf);
	if ((err && !(err == -VMMX_ENOMEM && !host_free)) || vmmx_buf_resize(buf, SWEEP_SIZE) ||
	    test_check(ctx, vmmx_buf_ptr(buf), 0, SWEEP_KEEP, 21) != SIZE_MAX)
		note(t, &t->after_bad, "%s:%llu,%s:%llu: without faults: %s", an,
		     (unsigned long long)na, bn, (unsigned long long)nb, vmmx_last_error());
	vmmx_buf_destroy(buf);
	if (!test_no_leaks(ctx))
		note(t, &t->after_bad, "%s:%llu,%s:%llu: leaked", an, (unsigned long long)na, bn,
		     (unsigned long long)nb);
	vmmx_ctx_destroy(ctx);
}

static void sweep(bool host_free)
{
	const char *m = host_free ? "host free" : "VMMX_HOST_LIMIT=0";
	struct tally t = { 0 };

	for (int a = 0; a < (int)NOPS; a++)
		for (int b = a + 1; b < (int)NOPS; b++)
			for (uint64_t na = 1; na <= NTH; na++)
				for (uint64_t nb = 1; nb <= NTH; nb++)
					one(host_free, a, na, b, nb, &t);
	if (t.first[0])
		diag("%s: first problem: %s", m, t.first);
	is_uint(0, t.shrink_bad, "%s: %u pairs: every shrink succeeded with the new size", m,
		t.runs);
	is_uint(0, t.data_bad, "%s: every byte below the new size intact", m);
	is_uint(0, t.trim_code, "%s: every trim returned 0, the fault or -VMMX_ENOMEM", m);
	is_uint(0, t.trim_moved, "%s: every failed trim left the chunks as they were", m);
	is_uint(0, t.lost_log, "%s: no chunk lost or buffer truncated", m);
	is_uint(0, t.after_bad, "%s: without faults, trim and grow back work; nothing leaked", m);
	ok(host_free ? t.trims_ok > 0 : true, "%s: %u trims succeeded under faults", m, t.trims_ok);
}

/* The issue's own reproducer, by name. */
static void reproducer(void)
{
	static const char *const v[] = { "VMMX_DEVICE_LIMIT=64MiB", "VMMX_HOST_LIMIT=0",
					 "VMMX_HEADROOM=0", NULL };
	struct vmmx_ctx *ctx = test_ctx(v);
	struct vmm *v_ = vmmx__ctx_vmm(ctx);
	struct vmmx_buf *buf;
	size_t n = 0;

	if (vmmx_buf_create(ctx, 64 * MiB, "device", &buf) || vmmx_buf_resize(buf, 64 * MiB) ||
	    test_fill(ctx, vmmx_buf_ptr(buf), 0, 64 * MiB, 3))
		bail("setup: %s", vmmx_last_error());
	vmm_fault_arm(v_, VMMX_OP_CREATE, 2, 0);
	vmm_fault_arm(v_, VMMX_OP_MAP, 2, 0);
	is_err(0, vmmx_buf_resize(buf, KEEP), "create:2,map:2, host at 0: the shrink succeeds");
	is_err(-VMMX_ENOMEM, vmmx_buf_trim(buf), "the trim finds no room for the kept part");
	like(vmmx_last_error(), "no room anywhere for the", "and says so");
	vmm_fault_disarm_all(v_);
	is_uint(10 * MiB, vmmx_buf_size(buf), "the size is the new one");
	ok(!vmmx_buf_chunks(buf, NULL, 0, &n) && n == 1, "one chunk, still whole");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, KEEP, 3), "every kept byte intact");
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

int main(void)
{
	if (!test_on_sim())
		skip_all("the device limit and the fault pairs are set up for the sim backend");
	plan(7 + 2 * 7);
	reproducer();
	sweep(true);
	sweep(false);
	return tap_done();
}
