// SPDX-License-Identifier: MIT
/*
 * bench-doubling.c - vmmx-bench's doubling section: NVIDIA's growable-vector
 * pattern, one grow per doubling, vmmx_buf_resize against one raw handle
 * per grow (cuMemCreate, cuMemMap, cuMemSetAccess into a reserved range);
 * its target and its chart.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tools/bench.h"

/*
 * One raw run: one handle per doubling, created, mapped and granted into
 * the reserved @va (timed into @rv), then torn down untimed in reverse
 * order.  0, or -1 after the failure is noted.
 */
static int dbl_raw_run(struct bench *B, void *va, unsigned int r, double *rv)
{
	unsigned int reps = B->o.reps;
	uint64_t h[MAX_DOUBLINGS];
	size_t made = 0, mapped = 0, k, n = B->dbl.n;

	for (k = 0; k < n; k++) {
		uint64_t off = k ? B->dbl.rows[k - 1].size : 0, add = B->dbl.rows[k].size - off;
		double t0 = gpu_now();

		if (gpu_vmm_create(0, add, &h[k]))
			break;
		made++;
		if (gpu_vmm_map((char *)va + off, add, h[k]))
			break;
		mapped++;
		if (gpu_vmm_set_access((char *)va + off, add, 0))
			break;
		rv[k * reps + r] = gpu_now() - t0;
	}
	if (k < n)
		gfail(B, "doubling: raw grow");
	for (size_t j = mapped; j-- > 0;) {
		uint64_t off = j ? B->dbl.rows[j - 1].size : 0;

		if (gpu_vmm_unmap((char *)va + off, B->dbl.rows[j].size - off))
			gfail(B, "doubling: cuMemUnmap");
	}
	for (size_t j = made; j-- > 0;)
		if (gpu_vmm_release(h[j]))
			gfail(B, "doubling: cuMemRelease");
	return k < n ? -1 : 0;
}

/* One libvmmx run: one buffer grown through the doublings, timed into @vv. */
static int dbl_vmmx_run(struct bench *B, struct vmmx_ctx *ctx, uint64_t max, unsigned int r,
			double *vv)
{
	struct vmmx_stats st = {.size = sizeof(st)};
	unsigned int reps = B->o.reps;
	struct vmmx_buf *buf = NULL;
	uint64_t chunks = 0;
	int err = vmmx_buf_create(ctx, max, "device", &buf);

	if (err) {
		vfail(B, "doubling: vmmx_buf_create", err);
		return -1;
	}
	for (size_t k = 0; k < B->dbl.n; k++) {
		double t0 = gpu_now();

		err = vmmx_buf_resize(buf, B->dbl.rows[k].size);
		vv[k * reps + r] = gpu_now() - t0;
		if (err) {
			vfail(B, "doubling: vmmx_buf_resize", err);
			break;
		}
		if (!vmmx_stats_get(ctx, &st)) {
			B->dbl.rows[k].handles = (unsigned int)(st.device_chunks - chunks);
			chunks = st.device_chunks;
		}
	}
	vmmx_buf_destroy(buf);
	return err ? -1 : 0;
}

/*
 * What reading the free memory costs: the part of a grow that a raw
 * one-handle grow does not do.  @tmp holds --reps figures.
 */
static void dbl_query(struct bench *B, struct vmmx_ctx *ctx, double *tmp)
{
	unsigned int reps = B->o.reps;

	B->dbl.query = NAN;
	if (!reps)
		return;
	for (unsigned int r = 0; r < reps; r++) {
		struct vmmx_ctx_info ci = {.size = sizeof(ci)};
		double t0 = gpu_now();

		vmmx_ctx_query(ctx, &ci);
		tmp[r] = gpu_now() - t0;
	}
	B->dbl.query = gpu_median(tmp, reps);
}

/* The runs, alternating raw and libvmmx; 0, or -1 after a failure. */
static int dbl_runs(struct bench *B, struct vmmx_ctx *ctx, void *va, uint64_t max, double *vv,
		    double *rv)
{
	for (unsigned int r = 0; r < B->o.reps; r++) {
		/* As NVIDIA's benchmark does: runs 2 s apart, so that the driver's
		 * work after a large release (scrubbing, page tables) is not billed
		 * to the next run. */
		if (!B->sim)
			sleep(2);
		if (va) {
			if (dbl_raw_run(B, va, r, rv))
				return -1;
			sleep(2);
		}
		if (dbl_vmmx_run(B, ctx, max, r, vv))
			return -1;
	}
	return 0;
}

static void doubling_run(struct bench *B)
{
	uint64_t max = B->gran;
	unsigned int reps = B->o.reps;
	size_t n = 0;
	double *vv = NULL, *rv = NULL;
	struct vmmx_ctx *ctx = NULL;
	void *va = NULL;
	char a[32], b[32];

	while (max * 2 <= B->o.double_max && n + 1 < MAX_DOUBLINGS)
		max *= 2;
	for (uint64_t s = B->gran; s <= max; s *= 2)
		B->dbl.rows[n++] = (struct dbl_row){.size = s, .vmmx = NAN, .raw = NAN};
	B->dbl.n = n;
	vv = calloc(n * reps, sizeof(*vv));
	rv = calloc(n * reps, sizeof(*rv));
	if (!vv || !rv) {
		fprintf(stderr, PROG ": out of memory\n");
		B->failed = 1;
		goto out;
	}
	note(B, "doubling: %s -> %s, one grow per doubling, %u repetitions",
	     tool_fmt_size(B->gran, a, sizeof(a)), tool_fmt_size(max, b, sizeof(b)), reps);
	/* The default context: no VMMX_CHUNK_MAX, the default cache and headroom.
	 * (A context whose chunk bound is the largest grow was the tuned row;
	 * the default has no bound below the location's size, so the two agree.) */
	if (mkctx(B, 0, 0, -1, 0, &ctx))
		goto out;
	if (!B->sim && gpu_va_reserve(max, &va)) {
		gfail(B, "doubling");
		goto out;
	}
	if (dbl_runs(B, ctx, va, max, vv, rv))
		goto out;
	for (size_t k = 0; k < n; k++) {
		B->dbl.rows[k].vmmx = gpu_median(vv + k * reps, reps);
		if (va)
			B->dbl.rows[k].raw = gpu_median(rv + k * reps, reps);
	}
	dbl_query(B, ctx, rv);
out:
	vmmx_ctx_destroy(ctx);
	if (va && gpu_va_free(va, max))
		gfail(B, "doubling: cuMemAddressFree");
	free(vv);
	free(rv);
}

/* One grow per doubling: sizes double, so the x axis is log 2. */
static void doubling_chart(struct bench *B, struct rep *doc)
{
	struct rep *c, *sv, *sr;
	char title[192];

	if (!B->dbl.n)
		return;

	snprintf(title, sizeof(title), "vmmx-bench: one grow per doubling on %s%s",
		 B->info.device_name, B->sim ? " (SIMULATED)" : "");
	c = rep_chart(doc, "doubling", title, "buffer size after the grow", "B", 1,
		      "time of the grow", "us");
	sv = rep_series(c, "vmmx_buf_resize");
	sr = rep_series(c, "cuMemCreate + cuMemMap + cuMemSetAccess");
	for (size_t k = 0; k < B->dbl.n; k++) {
		rep_point(sv, (double)B->dbl.rows[k].size, B->dbl.rows[k].vmmx * 1e6);
		rep_point(sr, (double)B->dbl.rows[k].size, B->dbl.rows[k].raw * 1e6);
	}
}

static void doubling_targets(struct bench *B)
{
	char text[96], shown[64], a[32], b[32], c[32];
	double worst = -1;
	uint64_t at = 0;

	if (!B->dbl.n)
		return;

	for (size_t k = 0; k < B->dbl.n; k++) {
		double r = B->dbl.rows[k].vmmx / B->dbl.rows[k].raw;

		if (!isfinite(r)) {
			worst = NAN;
			break;
		}
		if (r > worst) {
			worst = r;
			at = B->dbl.rows[k].size;
		}
	}
	snprintf(text, sizeof(text),
		 "doubling %s -> %s, default settings: every grow <= 1.1x raw one-handle",
		 tool_fmt_size(B->dbl.rows[0].size, a, sizeof(a)),
		 tool_fmt_size(B->dbl.rows[B->dbl.n - 1].size, b, sizeof(b)));
	snprintf(shown, sizeof(shown), "worst %.2fx (at %s)", worst,
		 tool_fmt_size(at, c, sizeof(c)));
	add_target(B, text, worst, 1.1, 1, shown, B->sim ? "sim: no raw driver calls" : NULL);
}

static const struct rep_field dbl_fields[] = {
    {"size", REP_S_BYTES, .off = offsetof(struct dbl_row, size), .col = 1, .fmt = REP_F_SIZE},
    {"vmmx_s", REP_S_NUM, .off = offsetof(struct dbl_row, vmmx), .col = 2, .head = "vmmx us",
     .fmt = REP_F_US, .prec = 1, .right = 1},
    {"raw_s", REP_S_NUM, .off = offsetof(struct dbl_row, raw), .col = 3, .head = "raw us",
     .fmt = REP_F_US, .prec = 1, .right = 1},
    {"ratio", REP_S_RATIO, .off = offsetof(struct dbl_row, vmmx),
     .off2 = offsetof(struct dbl_row, raw),
     .col = 4, .fmt = REP_F_X, .prec = 2, .right = 1},
    {"handles", REP_S_UINT, .off = offsetof(struct dbl_row, handles), .col = 5, .fmt = REP_F_INT,
     .right = 1},
};

static void doubling_doc(struct bench *B, struct rep *doc)
{
	rep_rows(doc, "doubling", dbl_fields, REP_NFIELDS(dbl_fields), B->dbl.rows, B->dbl.n,
		 sizeof(B->dbl.rows[0]), B);
}

static void doubling_print(struct bench *B, const struct rep *doc)
{
	static const struct rep_view v = {0};
	char a[32];

	printf("\n== doubling: one grow per doubling, default settings, median of %u; "
	       "microseconds; ratio = vmmx / raw (cuMemCreate + cuMemMap + cuMemSetAccess "
	       "of one handle) ==\n",
	       B->o.reps);
	bench_table(doc, "doubling", dbl_fields, REP_NFIELDS(dbl_fields), &v);
	printf("(one vmmx_ctx_query, which reads the device's free memory as a grow may: "
	       "%s us)\n",
	       us(B->dbl.query, a, sizeof(a)));
}

const struct bench_section bench_doubling = {
    .name = "doubling", .run = doubling_run, .doc = doubling_doc, .print = doubling_print,
    .targets = doubling_targets, .chart = doubling_chart,
};
