// SPDX-License-Identifier: MIT
/*
 * bench-copy.c - vmmx-bench's copy section: vmmx_memcpy against a plain
 * cuMemcpy of the same bytes (memcpy() on the sim), four cases.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tools/bench.h"

/* Median seconds of @n alternating runs of the vmmx copy and the baseline copy. */
static int time_pair(struct bench *B, struct vmmx_ctx *ctx, void *vd, const void *vs, uint64_t vn,
		     void *bd[2], const void *bs[2], const uint64_t bn[2], double *vmed,
		     double *bmed)
{
	unsigned int n = B->o.reps;
	double *v = calloc(n + 1, sizeof(*v)), *b = calloc(n + 1, sizeof(*b));
	int err = -1;

	if (!v || !b)
		goto out;
	for (unsigned int i = 0; i <= n; i++) { /* i == 0: warm-up */
		double t0 = gpu_now();

		err = vmmx_memcpy(ctx, vd, vs, vn);
		v[i] = gpu_now() - t0;
		if (err) {
			vfail(B, "copy: vmmx_memcpy", err);
			goto out;
		}
		t0 = gpu_now();
		for (int k = 0; k < 2 && bn[k]; k++) {
			if (B->sim) {
				memcpy(bd[k], bs[k], bn[k]);
			} else if (gpu_memcpy(bd[k], bs[k], bn[k])) {
				gfail(B, "copy: cuMemcpy");
				err = -1;
				goto out;
			}
		}
		b[i] = gpu_now() - t0;
	}
	*vmed = gpu_median(v + 1, n);
	*bmed = gpu_median(b + 1, n);
	err = 0;
out:
	free(v);
	free(b);
	return err;
}

/* The copy section's baseline memory: two host buffers and a device one of 2 * S. */
struct copy_base {
	struct gpu_mem hm, hm2, dm;
	unsigned char *h, *h2, *d; /* what the copies address */
};

/* Sim: host memory and memcpy() stand in for pinned memory and cuMemcpy. */
static int copy_base_alloc(struct bench *B, uint64_t S, struct copy_base *cb)
{
	if (B->sim) {
		cb->hm.hptr = malloc(S);
		cb->hm2.hptr = malloc(S);
		cb->dm.hptr = malloc(2 * S);
		if (!cb->hm.hptr || !cb->hm2.hptr || !cb->dm.hptr) {
			fprintf(stderr, PROG ": out of memory\n");
			B->failed = 1;
			return -1;
		}
		memset(cb->dm.hptr, 0x3c, 2 * S);
		cb->h = cb->hm.hptr;
		cb->h2 = cb->hm2.hptr;
		cb->d = cb->dm.hptr;
	} else {
		if (gpu_alloc(GPU_ALLOC_HOST, S, &cb->hm) ||
		    gpu_alloc(GPU_ALLOC_HOST, S, &cb->hm2) ||
		    gpu_alloc(GPU_ALLOC_DEVICE, 2 * S, &cb->dm)) {
			gfail(B, "copy: baseline buffers");
			return -1;
		}
		cb->h = cb->hm.dptr;
		cb->h2 = cb->hm2.dptr;
		cb->d = cb->dm.dptr;
	}
	memset(cb->hm.hptr, 0x5a, S);
	memset(cb->hm2.hptr, 0xa5, S);
	return 0;
}

static void copy_base_free(struct bench *B, struct copy_base *cb)
{
	if (B->sim) {
		free(cb->hm.hptr);
		free(cb->hm2.hptr);
		free(cb->dm.hptr);
	} else {
		/* All three, whatever the first says. */
		int e1 = gpu_free(&cb->hm), e2 = gpu_free(&cb->hm2), e3 = gpu_free(&cb->dm);

		if (e1 || e2 || e3)
			gfail(B, "copy: freeing baselines");
	}
}

/*
 * One copy case: libvmmx copies @vs to @vd; the baseline copies up to two
 * parts (a range split between device and host memory has two).
 */
struct copy_case {
	const char *name, *base;
	void *vd;
	const void *vs;
	void *bd[2];
	const void *bs[2];
	uint64_t bn[2];
};

static int copy_run(struct bench *B, struct vmmx_ctx *ctx, const struct copy_case *c, uint64_t S)
{
	void *bd[2] = {c->bd[0], c->bd[1]};
	const void *bs[2] = {c->bs[0], c->bs[1]};
	uint64_t bn[2] = {c->bn[0], c->bn[1]};
	double vt, bt;

	/* A range all on one side has one part. */
	if (!bn[0]) {
		bd[0] = bd[1];
		bs[0] = bs[1];
		bn[0] = bn[1];
		bn[1] = 0;
	}
	note(B, "copy: %s", c->name);
	if (time_pair(B, ctx, c->vd, c->vs, S, bd, bs, bn, &vt, &bt))
		return -1;
	B->copy.rows[B->copy.n++] =
	    (struct copy_row){c->name, S, vt, bt, B->sim ? "memcpy() (sim stand-in)" : c->base};
	return 0;
}

/* The four cases: @v a buffer of device chunks, @m device-first with @res. */
static void copy_cases(struct bench *B, struct vmmx_ctx *ctx, struct vmmx_ctx *mctx,
		       const struct copy_base *cb, unsigned char *v, unsigned char *m,
		       const struct vmmx_residency *res)
{
	uint64_t S = B->o.copy_size;
	const struct copy_case c[] = {
	    {"host -> device chunks",
	     "cuMemcpy host -> cuMemAlloc",
	     v,
	     cb->h,
	     {cb->d, NULL},
	     {cb->h, NULL},
	     {S, 0}},
	    {"device chunks -> host",
	     "cuMemcpy cuMemAlloc -> host",
	     cb->h,
	     v,
	     {cb->h, NULL},
	     {cb->d, NULL},
	     {S, 0}},
	    {"device chunks -> device chunks",
	     "cuMemcpy cuMemAlloc -> cuMemAlloc",
	     v + S,
	     v,
	     {cb->d + S, NULL},
	     {cb->d, NULL},
	     {S, 0}},
	    {"device-first (device + host chunks) -> host",
	     "cuMemcpy cuMemAlloc part + pinned part -> host",
	     cb->h,
	     m,
	     {cb->h, cb->h + res->device},
	     {cb->d, cb->h2},
	     {res->device, res->host}},
	};

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		if (copy_run(B, i == 3 ? mctx : ctx, &c[i], S))
			return;
}

/* libvmmx's buffers: 2 * S of device chunks, and S device-first past a limit of S / 2. */
static int copy_bufs(struct bench *B, struct vmmx_ctx *ctx, struct vmmx_ctx *mctx, uint64_t S,
		     struct vmmx_buf **vb, struct vmmx_buf **mb, struct vmmx_residency *res)
{
	int err = vmmx_buf_create(ctx, 2 * S, "device", vb);

	if (!err)
		err = vmmx_buf_resize(*vb, 2 * S);
	if (!err)
		err = vmmx_buf_create(mctx, S, "device-first", mb);
	if (!err)
		err = vmmx_buf_resize(*mb, S);
	if (!err)
		err = vmmx_buf_residency(*mb, 0, S, res);
	if (err)
		vfail(B, "copy: buffers", err);
	return err;
}

static void copy_section(struct bench *B)
{
	uint64_t S = B->o.copy_size, half = S / 2 / B->gran * B->gran;
	struct vmmx_ctx *ctx = NULL, *mctx = NULL;
	struct vmmx_buf *vb = NULL, *mb = NULL;
	struct copy_base cb = {0};
	struct vmmx_residency res;
	char a[32];

	note(B, "copy: %s per copy, %u repetitions", tool_fmt_size(S, a, sizeof(a)), B->o.reps);
	if (mkctx(B, 0, 0, -1, 0, &ctx) || mkctx(B, 0, 0, -1, half ? half : B->gran, &mctx))
		goto out;
	if (copy_bufs(B, ctx, mctx, S, &vb, &mb, &res) || copy_base_alloc(B, S, &cb))
		goto out;
	copy_cases(B, ctx, mctx, &cb, vmmx_buf_ptr(vb), vmmx_buf_ptr(mb), &res);
out:
	copy_base_free(B, &cb);
	vmmx_buf_destroy(vb);
	vmmx_buf_destroy(mb);
	vmmx_ctx_destroy(mctx);
	vmmx_ctx_destroy(ctx);
}

static const struct rep_field copy_fields[] = {
    {"copy", REP_S_STR, .off = offsetof(struct copy_row, name), .col = 1},
    {"bytes", REP_S_BYTES, .off = offsetof(struct copy_row, bytes), .col = 2, .head = "size",
     .fmt = REP_F_SIZE},
    {"vmmx_s", REP_S_NUM, .off = offsetof(struct copy_row, vmmx)},
    {"baseline_s", REP_S_NUM, .off = offsetof(struct copy_row, base)},
    {"vmmx_gbps", REP_S_GBPS, .off = offsetof(struct copy_row, vmmx),
     .off2 = offsetof(struct copy_row, bytes), .col = 3, .head = "vmmx",
     .fmt = REP_F_FIX, .prec = 2, .right = 1},
    {"baseline_gbps", REP_S_GBPS, .off = offsetof(struct copy_row, base),
     .off2 = offsetof(struct copy_row, bytes), .col = 4, .head = "baseline",
     .fmt = REP_F_FIX, .prec = 2, .right = 1},
    {"ratio", REP_S_RATIO, .off = offsetof(struct copy_row, base),
     .off2 = offsetof(struct copy_row, vmmx),
     .col = 5, .fmt = REP_F_X, .prec = 2, .right = 1},
    {"baseline", REP_S_STR, .off = offsetof(struct copy_row, base_name), .col = 6},
};

static void copy_doc(struct bench *B, struct rep *doc)
{
	rep_rows(doc, "copy", copy_fields, REP_NFIELDS(copy_fields), B->copy.rows, B->copy.n,
		 sizeof(B->copy.rows[0]), B);
}

static void copy_print(struct bench *B, const struct rep *doc)
{
	static const struct rep_view v = {0};

	printf("\n== copy: vmmx_memcpy against a plain copy of the same bytes, median of %u; "
	       "GB/s; ratio = vmmx / baseline ==\n",
	       B->o.reps);
	bench_table(doc, "copy", copy_fields, REP_NFIELDS(copy_fields), &v);
}

const struct bench_section bench_copy = {
    .name = "copy", .run = copy_section, .doc = copy_doc, .print = copy_print,
};
