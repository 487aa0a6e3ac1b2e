// SPDX-License-Identifier: MIT
/*
 * bench-ops.c - vmmx-bench's ops section: per location and chunk size, a
 * grow of one chunk on a fresh buffer (cache miss: create + map + set
 * access), the shrink back (unmap + release), the same with the chunk cache
 * on (hit: map + set access; shrink into the cache: unmap), against the raw
 * cuMemCreate/cuMemMap/cuMemSetAccess/cuMemUnmap/cuMemRelease calls.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tools/bench.h"

static void add_op(struct bench *B, const char *loc, uint64_t size, const char *op, double v,
		   double r)
{
	if (B->ops.n < sizeof(B->ops.rows) / sizeof(B->ops.rows[0]))
		B->ops.rows[B->ops.n++] = (struct op_row){loc, size, op, v, r};
}

/* vmmx: grow one chunk of @S on an empty buffer and shrink back, @reps times. */
static int ops_vmmx(struct bench *B, int host, uint64_t S, int cache, double *grow, double *shrink)
{
	unsigned int n = B->o.reps;
	double *g = calloc(n, sizeof(*g)), *s = calloc(n, sizeof(*s)), t;
	struct vmmx_stats st0 = {.size = sizeof(st0)}, st1 = {.size = sizeof(st1)};
	struct vmmx_ctx *ctx = NULL;
	struct vmmx_buf *buf = NULL;
	int err = -1;

	if (!g || !s) {
		fprintf(stderr, PROG ": out of memory\n");
		goto out;
	}
	/* chunk size = chunk max = S: one chunk per grow; the cache holds it or nothing. */
	if (mkctx(B, S, S, cache ? (int64_t)S : 0, 0, &ctx))
		goto out;
	err = vmmx_buf_create(ctx, S, host ? "host" : "device", &buf);
	if (err) {
		vfail(B, "vmmx_buf_create", err);
		goto out;
	}
	/* Warm-up: the first grow also pays for first-touch costs in the driver. */
	err = vmmx_buf_resize(buf, S);
	if (!err)
		err = vmmx_buf_resize(buf, 0);
	if (err) {
		vfail(B, "vmmx_buf_resize (warm-up)", err);
		goto out;
	}
	vmmx_stats_get(ctx, &st0);
	for (unsigned int i = 0; i < n; i++) {
		t = gpu_now();
		err = vmmx_buf_resize(buf, S);
		g[i] = gpu_now() - t;
		if (err) {
			vfail(B, "vmmx_buf_resize (grow)", err);
			goto out;
		}
		t = gpu_now();
		err = vmmx_buf_resize(buf, 0);
		s[i] = gpu_now() - t;
		if (err) {
			vfail(B, "vmmx_buf_resize (shrink)", err);
			goto out;
		}
	}
	vmmx_stats_get(ctx, &st1);
	if (cache && st1.cache_hits - st0.cache_hits != n)
		fprintf(stderr,
			PROG ": warning: %s %llu-byte chunks: %llu cache hits in %u grows\n",
			host ? "host" : "device", (unsigned long long)S,
			(unsigned long long)(st1.cache_hits - st0.cache_hits), n);
	if (!cache && st1.cache_hits != st0.cache_hits)
		fprintf(stderr, PROG ": warning: cache hits with the cache off\n");
	*grow = gpu_median(g, n);
	*shrink = gpu_median(s, n);
	err = 0;
out:
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	free(g);
	free(s);
	return err;
}

/* raw: create, map, set access, unmap, release of one handle of @S, @reps times. */
static int ops_raw(struct bench *B, int host, uint64_t S, double med[5])
{
	unsigned int n = B->o.reps;
	double *v = calloc(5 * (size_t)(n + 1), sizeof(*v));
	void *va = NULL;
	uint64_t h = 0;
	int err = -1, created = 0, mapped = 0;

	if (!v) {
		fprintf(stderr, PROG ": out of memory\n");
		return -1;
	}
	if (gpu_va_reserve(S, &va)) {
		gfail(B, "raw ops");
		free(v);
		return -1;
	}
	/* Rep 0 is the warm-up, as for libvmmx. */
	for (unsigned int i = 0; i <= n; i++) {
		double t[6];

		t[0] = gpu_now();
		if (gpu_vmm_create(host, S, &h))
			goto fail;
		created = 1;
		t[1] = gpu_now();
		if (gpu_vmm_map(va, S, h))
			goto fail;
		mapped = 1;
		t[2] = gpu_now();
		if (gpu_vmm_set_access(va, S, host))
			goto fail;
		t[3] = gpu_now();
		if (gpu_vmm_unmap(va, S))
			goto fail;
		mapped = 0;
		t[4] = gpu_now();
		if (gpu_vmm_release(h))
			goto fail;
		created = 0;
		t[5] = gpu_now();
		if (i)
			for (int k = 0; k < 5; k++)
				v[k * n + i - 1] = t[k + 1] - t[k];
	}
	for (int k = 0; k < 5; k++)
		med[k] = gpu_median(v + k * n, n);
	err = 0;
	goto out;
fail:
	gfail(B, "raw ops");
	/* Undo in reverse order; failures here leave nothing more to undo. */
	if (mapped)
		gpu_vmm_unmap(va, S);
	if (created)
		gpu_vmm_release(h);
out:
	if (gpu_va_free(va, S))
		gfail(B, "raw ops");
	free(v);
	return err;
}

static void ops_run(struct bench *B)
{
	for (int l = 0; l < 2; l++) {
		const char *loc = l ? "host" : "device";

		if ((l == 0 && !B->o.loc_device) || (l == 1 && !B->o.loc_host))
			continue;
		for (int c = 0; c < B->o.nchunks; c++) {
			uint64_t S = B->o.chunks[c];
			double mg = NAN, ms = NAN, hg = NAN, hs = NAN,
			       raw[5] = {NAN, NAN, NAN, NAN, NAN};
			char a[32];

			note(B, "ops: %s chunks of %s, %u repetitions", loc,
			     tool_fmt_size(S, a, sizeof(a)), B->o.reps);
			ops_vmmx(B, l, S, 0, &mg, &ms);
			ops_vmmx(B, l, S, 1, &hg, &hs);
			if (!B->sim)
				ops_raw(B, l, S, raw);
			if (!B->sim) { /* the raw calls one by one; sim has none */
				add_op(B, loc, S, "create", NAN, raw[0]);
				add_op(B, loc, S, "map", NAN, raw[1]);
				add_op(B, loc, S, "set access", NAN, raw[2]);
				add_op(B, loc, S, "unmap", NAN, raw[3]);
				add_op(B, loc, S, "release", NAN, raw[4]);
			}
			add_op(B, loc, S, "grow, cache miss (create+map+access)", mg,
			       raw[0] + raw[1] + raw[2]);
			add_op(B, loc, S, "shrink, no cache (unmap+release)", ms, raw[3] + raw[4]);
			add_op(B, loc, S, "grow, cache hit (map+access)", hg, raw[1] + raw[2]);
			add_op(B, loc, S, "shrink into the cache (unmap)", hs, raw[3]);
		}
	}
}

/* Each figure once: the row, its JSON and its table column. */
static const struct rep_field ops_fields[] = {
    {"location", REP_S_STR, .off = offsetof(struct op_row, loc), .col = 1, .head = "loc"},
    {"chunk", REP_S_BYTES, .off = offsetof(struct op_row, size), .col = 2, .fmt = REP_F_SIZE},
    {"op", REP_S_STR, .off = offsetof(struct op_row, op), .col = 3, .head = "operation"},
    {"vmmx_s", REP_S_NUM, .off = offsetof(struct op_row, vmmx), .col = 4, .head = "vmmx",
     .fmt = REP_F_US, .prec = 1, .right = 1},
    {"raw_s", REP_S_NUM, .off = offsetof(struct op_row, raw), .col = 5, .head = "raw", .fmt = REP_F_US,
     .prec = 1, .right = 1},
    {"ratio", REP_S_RATIO, .off = offsetof(struct op_row, vmmx),
     .off2 = offsetof(struct op_row, raw), .col = 6,
     .fmt = REP_F_X, .prec = 2, .right = 1},
};

static void ops_doc(struct bench *B, struct rep *doc)
{
	rep_rows(doc, "ops", ops_fields, REP_NFIELDS(ops_fields), B->ops.rows, B->ops.n, sizeof(B->ops.rows[0]),
		 B);
}

static void ops_print(struct bench *B, const struct rep *doc)
{
	static const struct rep_view v = {0};

	printf("\n== ops: cost of one operation, median of %u, microseconds; ratio = "
	       "vmmx / raw ==\n",
	       B->o.reps);
	bench_table(doc, "ops", ops_fields, REP_NFIELDS(ops_fields), &v);
}

const struct bench_section bench_ops = {
    .name = "ops", .run = ops_run, .doc = ops_doc, .print = ops_print,
};
