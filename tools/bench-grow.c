// SPDX-License-Identifier: MIT
/*
 * bench-grow.c - vmmx-bench's grow section: one buffer grown 0 -> N in
 * steps, vmmx_buf_resize against cuMemAlloc + copy + cuMemFree (realloc),
 * time and peak device memory per step; its targets and its chart.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tools/bench.h"

/* libvmmx's steps: one buffer resized 0 -> N; 0, or -1 after the failure is noted. */
static int grow_vmmx(struct bench *B, struct vmmx_ctx *ctx, size_t n, uint64_t step)
{
	struct vmmx_stats st = {.size = sizeof(st)};
	uint64_t used0 = dev_used(B, ctx);
	struct vmmx_buf *buf = NULL;
	int err = vmmx_buf_create(ctx, n * step, "device", &buf);

	if (err) {
		vfail(B, "grow: vmmx_buf_create", err);
		return -1;
	}
	for (size_t k = 0; k < n; k++) {
		double t0 = gpu_now();

		err = vmmx_buf_resize(buf, (k + 1) * step);
		B->grow.steps[k].vmmx = gpu_now() - t0;
		if (err) {
			B->grow.steps[k].vmmx = NAN;
			vfail(B, "grow: vmmx_buf_resize", err);
			break;
		}
		B->grow.steps[k].vmmx_used = dev_used(B, ctx) - used0;
		if (!vmmx_stats_get(ctx, &st))
			B->grow.steps[k].vmmx_chunks = (unsigned int)st.device_chunks;
	}
	vmmx_buf_destroy(buf);
	return err ? -1 : 0;
}

/* Sim stand-in for realloc: a new libvmmx device buffer per step, vmmx_memcpy, destroy the old. */
static void grow_realloc_sim(struct bench *B, size_t n, uint64_t step)
{
	struct vmmx_buf *old = NULL, *nb = NULL;
	struct vmmx_ctx *rctx = NULL;
	uint64_t used0;
	double t0, t1, t2;
	int err;

	if (mkctx(B, 0, 0, 0, 0, &rctx))
		return;
	used0 = dev_used(B, rctx);
	for (size_t k = 0; k < n; k++) {
		uint64_t size = (k + 1) * step;

		t0 = gpu_now();
		err = vmmx_buf_create(rctx, size, "device", &nb);
		if (!err)
			err = vmmx_buf_resize(nb, size);
		if (!err && old)
			err = vmmx_memcpy(rctx, vmmx_buf_ptr(nb), vmmx_buf_ptr(old), size - step);
		t1 = gpu_now();
		if (err) {
			vfail(B, "grow: realloc stand-in", err);
			break;
		}
		B->grow.steps[k].realloc_used = dev_used(B, rctx) - used0;
		t2 = gpu_now();
		vmmx_buf_destroy(old);
		old = nb;
		nb = NULL;
		B->grow.steps[k].realloc = (t1 - t0) + (gpu_now() - t2);
	}
	vmmx_buf_destroy(nb);
	vmmx_buf_destroy(old);
	vmmx_ctx_destroy(rctx);
}

/* Realloc on the GPU: cuMemAlloc of the new size, cuMemcpy, cuMemFree of the old. */
static void grow_realloc_gpu(struct bench *B, size_t n, uint64_t step)
{
	uint64_t N = n * step, used0, fr, tot;
	struct gpu_mem om = {0}, nm = {0};
	char a[32], b[32];
	double t0, t1, t2;

	if (gpu_mem_info(&fr, &tot)) {
		gfail(B, "grow");
		return;
	}
	/* Realloc holds the old and the new buffer at once: 2N - step at the last step. */
	if (2 * N - step + GPU_MANAGED_MARGIN > fr) {
		snprintf(B->grow.why, sizeof(B->grow.why),
			 "realloc not run: its last step holds %s and only %s is free "
			 "(use a smaller --grow-max)",
			 tool_fmt_size(2 * N - step, a, sizeof(a)),
			 tool_fmt_size(fr, b, sizeof(b)));
		note(B, "grow: %s", B->grow.why);
		return;
	}
	used0 = tot - fr;
	for (size_t k = 0; k < n; k++) {
		uint64_t size = (k + 1) * step;

		t0 = gpu_now();
		if (gpu_alloc(GPU_ALLOC_DEVICE, size, &nm)) {
			gfail(B, "grow: cuMemAlloc");
			break;
		}
		if (om.dptr && gpu_memcpy(nm.dptr, om.dptr, size - step)) {
			gfail(B, "grow: cuMemcpy");
			break;
		}
		t1 = gpu_now();
		B->grow.steps[k].realloc_used = dev_used(B, NULL) - used0;
		t2 = gpu_now();
		if (gpu_free(&om)) {
			gfail(B, "grow: cuMemFree");
			break;
		}
		B->grow.steps[k].realloc = (t1 - t0) + (gpu_now() - t2);
		om = nm;
		memset(&nm, 0, sizeof(nm));
	}
	if (gpu_free(&nm) || gpu_free(&om))
		gfail(B, "grow: cuMemFree");
}

static void grow_totals(struct bench *B)
{
	B->grow.vmmx = B->grow.realloc = 0;
	B->grow.vmmx_peak = B->grow.realloc_peak = 0;
	for (size_t k = 0; k < B->grow.n; k++) {
		B->grow.vmmx += B->grow.steps[k].vmmx;
		B->grow.realloc += B->grow.steps[k].realloc;
		if (B->grow.steps[k].vmmx_used > B->grow.vmmx_peak)
			B->grow.vmmx_peak = B->grow.steps[k].vmmx_used;
		if (B->grow.steps[k].realloc_used > B->grow.realloc_peak)
			B->grow.realloc_peak = B->grow.steps[k].realloc_used;
	}
}

static void grow_run(struct bench *B)
{
	uint64_t step = B->o.grow_step, N = B->o.grow_max / step * step;
	size_t n = (size_t)(N / step);
	struct vmmx_ctx *ctx = NULL;
	char a[32], b[32];

	B->grow.n = n;
	for (size_t k = 0; k < n; k++) {
		B->grow.steps[k] =
		    (struct grow_step){.size = (k + 1) * step, .vmmx = NAN, .realloc = NAN};
	}
	note(B, "grow: 0 -> %s in steps of %s through libvmmx", tool_fmt_size(N, a, sizeof(a)),
	     tool_fmt_size(step, b, sizeof(b)));
	/* No cache: a grow must create its handle, as cuMemAlloc must. */
	if (mkctx(B, 0, 0, 0, 0, &ctx))
		return;
	if (!grow_vmmx(B, ctx, n, step)) {
		note(B, "grow: the same steps by allocate + copy + free (realloc)");
		if (B->sim)
			grow_realloc_sim(B, n, step);
		else
			grow_realloc_gpu(B, n, step);
	}
	vmmx_ctx_destroy(ctx);
	grow_totals(B);
}

/* The grow curve (when steps ran): cumulative time against size, libvmmx beside realloc. */
static void grow_chart(struct bench *B, struct rep *doc)
{
	struct rep *c, *sv, *sr;
	double cv = 0, cr = 0;
	char title[192];

	if (!B->grow.n)
		return;

	snprintf(title, sizeof(title), "vmmx-bench: growing a buffer on %s%s",
		 B->info.device_name, B->sim ? " (SIMULATED)" : "");
	c = rep_chart(doc, "grow", title, "buffer size", "B", 0, "cumulative time", "ms");
	sv = rep_series(c, "vmmx_buf_resize");
	sr = rep_series(c, "cuMemAlloc + copy + cuMemFree");
	rep_point(sv, 0, 0);
	rep_point(sr, 0, 0);
	for (size_t k = 0; k < B->grow.n; k++) {
		cv += B->grow.steps[k].vmmx;
		cr += B->grow.steps[k].realloc;
		rep_point(sv, (double)B->grow.steps[k].size, cv * 1e3);
		rep_point(sr, (double)B->grow.steps[k].size, cr * 1e3);
	}
}

static void grow_targets(struct bench *B)
{
	double sp = B->grow.realloc / B->grow.vmmx;
	uint64_t N = B->grow.steps[B->grow.n - 1].size, step = B->o.grow_step;
	char text[96], shown[64], a[32], b[32], c[32];

	if (!B->grow.n)
		return;

	snprintf(text, sizeof(text), "grow %s -> %s in %s steps >= 50x faster than realloc",
		 tool_fmt_size(step, a, sizeof(a)), tool_fmt_size(N, b, sizeof(b)),
		 tool_fmt_size(step, c, sizeof(c)));
	snprintf(shown, sizeof(shown), "%.1fx", sp);
	add_target(B, text, sp, 50, 0, shown, B->grow.why[0] ? B->grow.why : NULL);
	snprintf(text, sizeof(text), "grow peak device memory <= N + step (%s)",
		 tool_fmt_size(N + step, a, sizeof(a)));
	add_target(B, text, isfinite(B->grow.vmmx) ? (double)B->grow.vmmx_peak : NAN,
		   (double)(N + step), 1, tool_fmt_size(B->grow.vmmx_peak, b, sizeof(b)), NULL);
}

/* realloc's peak is not known where realloc was not measured. */
static uint64_t grow_realloc_used(const void *row, const void *arg)
{
	const struct grow_step *s = row;

	(void)arg;
	return isfinite(s->realloc) ? s->realloc_used : UINT64_MAX;
}

static const struct rep_field grow_fields[] = {
    {"size", REP_S_BYTES, .off = offsetof(struct grow_step, size), .col = 1, .fmt = REP_F_SIZE},
    {"vmmx_s", REP_S_NUM, .off = offsetof(struct grow_step, vmmx), .col = 2, .head = "vmmx us",
     .fmt = REP_F_US, .prec = 1, .right = 1},
    {"realloc_s", REP_S_NUM, .off = offsetof(struct grow_step, realloc), .col = 3,
     .head = "realloc us", .fmt = REP_F_US, .prec = 1, .right = 1},
    {"speedup", REP_S_RATIO, .off = offsetof(struct grow_step, realloc),
     .off2 = offsetof(struct grow_step, vmmx), .col = 4, .fmt = REP_F_X, .prec = 2, .right = 1},
    {"vmmx_used", REP_S_BYTES, .off = offsetof(struct grow_step, vmmx_used), .col = 5,
     .head = "vmmx peak", .fmt = REP_F_SIZE, .right = 1},
    {"realloc_used", REP_S_BYTESFN, .bytes = grow_realloc_used, .col = 6,
     .head = "realloc peak", .fmt = REP_F_SIZE, .right = 1},
    {"vmmx_chunks", REP_S_UINT, .off = offsetof(struct grow_step, vmmx_chunks), .col = 7,
     .head = "chunks", .fmt = REP_F_INT, .right = 1},
};

static void grow_doc(struct bench *B, struct rep *doc)
{
	struct rep *g = rep_obj(doc, "grow");

	rep_bytes(g, "step", B->o.grow_step);
	rep_rows(g, "steps", grow_fields, REP_NFIELDS(grow_fields), B->grow.steps, B->grow.n,
		 sizeof(B->grow.steps[0]), B);
	rep_num(g, "vmmx_s", B->grow.vmmx);
	rep_num(g, "realloc_s", B->grow.realloc);
	rep_num(g, "speedup", B->grow.realloc / B->grow.vmmx);
	rep_bytes(g, "vmmx_peak", B->grow.vmmx_peak);
	rep_bytes(g, "realloc_peak", isfinite(B->grow.realloc) ? B->grow.realloc_peak : UINT64_MAX);
	rep_str(g, "note", B->grow.why);
}

static void grow_print(struct bench *B, const struct rep *doc)
{
	static const struct rep_view v = {0};
	char a[32], b[32], c[32], d[32], e[32];

	printf("\n== grow: 0 -> %s in %s steps; vmmx_buf_resize against cuMemAlloc + copy "
	       "+ cuMemFree (realloc); microseconds; speedup = realloc / vmmx ==\n",
	       tool_fmt_size(B->o.grow_max / B->o.grow_step * B->o.grow_step, a, sizeof(a)),
	       tool_fmt_size(B->o.grow_step, b, sizeof(b)));
	if (B->grow.why[0])
		printf("(%s)\n", B->grow.why);
	bench_table(rep_get(doc, "grow"), "steps", grow_fields, REP_NFIELDS(grow_fields), &v);
	printf("total: vmmx %s us, realloc %s us, speedup %s; peak device memory: vmmx %s, "
	       "realloc %s\n",
	       us(B->grow.vmmx, a, sizeof(a)), us(B->grow.realloc, b, sizeof(b)),
	       ratio(B->grow.realloc, B->grow.vmmx, c, sizeof(c)),
	       tool_fmt_size(B->grow.vmmx_peak, d, sizeof(d)),
	       isfinite(B->grow.realloc) ? tool_fmt_size(B->grow.realloc_peak, e, sizeof(e)) : "-");
}

const struct bench_section bench_grow = {
    .name = "grow", .run = grow_run, .doc = grow_doc, .print = grow_print,
    .targets = grow_targets, .chart = grow_chart,
};
