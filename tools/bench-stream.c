// SPDX-License-Identifier: MIT
/*
 * bench-stream.c - vmmx-bench's stream section: a stream-read kernel over
 * device chunks against cuMemAlloc, over host chunks against
 * cuMemHostAlloc, and over a device-first buffer 1.5 times a device limit
 * against the model (device bytes at the cuMemAlloc rate plus host bytes
 * at the cuMemHostAlloc rate); its targets.
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
 * Fill both buffers, then alternate read runs over them (warm-up first),
 * check both, and give each one's median.  @bp NULL: only @vp.
 */
static int stream_pair(struct bench *B, struct gpu_engine *ve, void *vp, struct gpu_engine *be,
		       void *bp, uint64_t size, double *vmed, double *bmed, char *why, size_t wl)
{
	unsigned int n = B->o.iters;
	double *v = calloc(n, sizeof(*v)), *b = calloc(n, sizeof(*b)), s;
	uint64_t bad = 0, bad2 = 0;
	int err = -1;

	if (!v || !b) {
		snprintf(why, wl, "out of memory");
		goto out;
	}
	if (gpu_engine_fill(ve, vp, size) || (bp && gpu_engine_fill(be, bp, size)))
		goto gpu;
	for (unsigned int i = 0; i < B->o.warmup; i++) {
		if (gpu_engine_run(ve, GPU_WL_READ, vp, size, 0, &s) ||
		    (bp && gpu_engine_run(be, GPU_WL_READ, bp, size, 0, &s)))
			goto gpu;
	}
	for (unsigned int i = 0; i < n; i++) {
		if (gpu_engine_run(ve, GPU_WL_READ, vp, size, 0, &v[i]) ||
		    (bp && gpu_engine_run(be, GPU_WL_READ, bp, size, 0, &b[i])))
			goto gpu;
	}
	if (gpu_engine_verify(ve, GPU_WL_READ, vp, size, &bad) ||
	    (bp && gpu_engine_verify(be, GPU_WL_READ, bp, size, &bad2)))
		goto gpu;
	if (bad || bad2) {
		snprintf(why, wl, "data check: %llu + %llu elements wrong", (unsigned long long)bad,
			 (unsigned long long)bad2);
		B->failed = 1;
		goto out;
	}
	*vmed = gpu_median(v, n);
	*bmed = bp ? gpu_median(b, n) : NAN;
	err = 0;
	goto out;
gpu:
	snprintf(why, wl, "%s", gpu_why());
	fprintf(stderr, PROG ": stream: %s\n", why);
	B->failed = 1;
out:
	free(v);
	free(b);
	return err;
}

/* The three rows, not measured yet; each says why where the kernels cannot run. */
static void stream_rows(struct bench *B, uint64_t big)
{
	B->stream.rows[0] = (struct stream_row){.name = "device chunks (policy device)",
					    .base_name = "cudaMalloc",
					    .size = B->o.stream_size};
	B->stream.rows[1] = (struct stream_row){.name = "host chunks (policy host)",
					    .base_name = "cudaHostAlloc",
					    .size = B->o.host_size};
	B->stream.rows[2] = (struct stream_row){
	    .name = "device-first, 1.5x the device limit", .base_name = "model", .size = big};
	B->stream.n = 3;
	for (int i = 0; i < 3; i++) {
		B->stream.rows[i].vmmx = B->stream.rows[i].base = B->stream.rows[i].model = NAN;
		if (B->kwhy)
			snprintf(B->stream.rows[i].why, sizeof(B->stream.rows[i].why), "%s", B->kwhy);
	}
}

/* What stream row @i runs against; released by stream_base_free(). */
struct stream_base {
	struct vmmx_buf *sb; /* sim: a libvmmx buffer of the same kind stands in */
	struct gpu_mem m;    /* cuda: cuMemAlloc or cuMemHostAlloc */
};

/* Row @i's baseline memory, its address into *@bp; 0 or -1. */
static int stream_base_alloc(struct bench *B, struct vmmx_ctx *ctx, int i,
			     struct stream_base *sbase, void **bp)
{
	struct stream_row *r = &B->stream.rows[i];
	int err;

	if (B->sim) {
		err = buf_grown(ctx, r->size, i ? "host" : "device", &sbase->sb);
		if (err) {
			snprintf(r->why, sizeof(r->why), "%s", vmmx_last_error());
			vfail(B, "stream: stand-in buffer", err);
			return -1;
		}
		*bp = vmmx_buf_ptr(sbase->sb);
		return 0;
	}
	if (gpu_alloc(i ? GPU_ALLOC_HOST : GPU_ALLOC_DEVICE, r->size, &sbase->m))
		return why_gpu(B, WHY(r), "stream: baseline");
	*bp = sbase->m.dptr;
	return 0;
}

static void stream_base_free(struct bench *B, struct stream_base *sbase)
{
	if (gpu_free(&sbase->m))
		gfail(B, "stream: freeing the baseline");
	vmmx_buf_destroy(sbase->sb);
}

/* Row @i (0: device chunks, 1: host chunks) against its baseline, in @ctx. */
static void stream_against_base(struct bench *B, struct vmmx_ctx *ctx, struct gpu_engine *ve,
				struct gpu_engine *be, int i)
{
	struct stream_row *r = &B->stream.rows[i];
	struct stream_base sbase = {0};
	struct vmmx_buf *vb = NULL;
	char a[32];
	void *bp = NULL;
	int err;

	note(B, "stream: %s, %s, against %s", r->name, tool_fmt_size(r->size, a, sizeof(a)),
	     r->base_name);
	err = buf_grown(ctx, r->size, i ? "host" : "device", &vb);
	if (err) {
		snprintf(r->why, sizeof(r->why), "%s", vmmx_last_error());
		vfail(B, "stream: vmmx buffer", err);
	} else if (!stream_base_alloc(B, ctx, i, &sbase, &bp)) {
		stream_pair(B, ve, vmmx_buf_ptr(vb), be, bp, r->size, &r->vmmx, &r->base, r->why,
			    sizeof(r->why));
		if (i)
			r->host_bytes = r->size;
		else
			r->dev_bytes = r->size;
	}
	stream_base_free(B, &sbase);
	vmmx_buf_destroy(vb);
	vmmx_ctx_trim(ctx, 0);
}

/*
 * The model row: a device-first buffer of @big past the limit @L of @lctx,
 * against device bytes at the cudaMalloc rate plus host bytes at the
 * cudaHostAlloc rate, both from the rows above.
 */
static void stream_model(struct bench *B, struct vmmx_ctx *lctx, struct gpu_engine *ve,
			 uint64_t big, uint64_t L)
{
	struct stream_row *r = &B->stream.rows[2];
	struct vmmx_residency res;
	struct vmmx_buf *vb = NULL;
	double hbm = (double)B->stream.rows[0].size / B->stream.rows[0].base;
	double pcie = (double)B->stream.rows[1].size / B->stream.rows[1].base;
	char a[32], b[32];
	int err;

	note(B, "stream: %s: %s under a %s limit", r->name, tool_fmt_size(big, a, sizeof(a)),
	     tool_fmt_size(L, b, sizeof(b)));
	ve->ctx = lctx;
	err = buf_grown(lctx, big, "device-first", &vb);
	if (!err)
		err = vmmx_buf_residency(vb, 0, big, &res);
	if (err) {
		snprintf(r->why, sizeof(r->why), "%s", vmmx_last_error());
		vfail(B, "stream: device-first buffer", err);
	} else {
		r->dev_bytes = res.device;
		r->host_bytes = res.host;
		if (!stream_pair(B, ve, vmmx_buf_ptr(vb), NULL, NULL, big, &r->vmmx, &r->base,
				 r->why, sizeof(r->why)) &&
		    isfinite(hbm) && isfinite(pcie))
			r->model = (double)res.device / hbm + (double)res.host / pcie;
	}
	vmmx_buf_destroy(vb);
}

static void stream_run(struct bench *B)
{
	struct gpu_engine ve = {.seed = 0x5eed0001u}, be = {.seed = 0x5eed0002u};
	uint64_t L = B->o.limit, big = (L + L / 2 + B->gran - 1) / B->gran * B->gran;
	struct vmmx_ctx *ctx = NULL, *lctx = NULL;

	stream_rows(B, big);
	if (B->kwhy)
		return;
	if (mkctx(B, 0, 0, -1, 0, &ctx) || mkctx(B, 0, 0, -1, L, &lctx))
		goto out;
	ve.ctx = be.ctx = ctx;
	ve.sim = be.sim = B->sim;
	for (int i = 0; i < 2; i++)
		stream_against_base(B, ctx, &ve, &be, i);
	stream_model(B, lctx, &ve, big, L);
out:
	gpu_engine_fini(&ve);
	gpu_engine_fini(&be);
	vmmx_ctx_destroy(lctx);
	vmmx_ctx_destroy(ctx);
}

/* What stream row @i is judged against: its baseline, or for row 2 the model. */
static double stream_ref(const struct stream_row *r, size_t i)
{
	return i == 2 ? r->model : r->base;
}

static void stream_targets(struct bench *B)
{
	static const struct {
		const char *text;
		double threshold;
	} t[3] = {
	    {"device-chunk stream read >= 0.98x cudaMalloc", 0.98},
	    {"host-chunk stream read >= 0.97x cudaHostAlloc", 0.97},
	    {"device-first, 1.5x a device limit, >= 0.95x the model", 0.95},
	};
	char shown[64];

	for (size_t i = 0; i < 3; i++) {
		const struct stream_row *s = &B->stream.rows[i];
		double v = stream_ref(s, i) / s->vmmx;

		snprintf(shown, sizeof(shown), "%.3fx", v);
		add_target(B, t[i].text, v, t[i].threshold, 0, shown, s->why);
	}
}

/* The figure row @row is judged against (stream_ref), found by its index. */
static double stream_base_s(const void *row, const void *arg)
{
	const struct bench *B = arg;
	const struct stream_row *r = row;

	return stream_ref(r, (size_t)(r - B->stream.rows));
}

static double stream_base_gbps(const void *row, const void *arg)
{
	const struct stream_row *r = row;

	return tool_gbps(r->size, stream_base_s(row, arg));
}

static double stream_ratio(const void *row, const void *arg)
{
	const struct stream_row *r = row;

	return stream_base_s(row, arg) / r->vmmx;
}

static const char *stream_status(const void *row, const void *arg, char *buf, size_t len)
{
	const struct stream_row *r = row;

	(void)arg;
	if (isfinite(r->vmmx))
		return NULL;
	snprintf(buf, len, "not measured: %s", r->why[0] ? r->why : "failed");
	return buf;
}

static const struct rep_field stream_fields[] = {
    {"buffer", REP_S_STR, .off = offsetof(struct stream_row, name), .col = 1},
    {"size", REP_S_BYTES, .off = offsetof(struct stream_row, size), .col = 2, .fmt = REP_F_SIZE},
    {"baseline", REP_S_STR, .off = offsetof(struct stream_row, base_name), .col = 4},
    {"vmmx_s", REP_S_NUM, .off = offsetof(struct stream_row, vmmx)},
    {"baseline_s", REP_S_NUMFN, .num = stream_base_s},
    {"vmmx_gbps", REP_S_GBPS, .off = offsetof(struct stream_row, vmmx),
     .off2 = offsetof(struct stream_row, size), .col = 3, .head = "vmmx",
     .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {"baseline_gbps", REP_S_NUMFN, .num = stream_base_gbps, .col = 5, .head = "GB/s",
     .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {"ratio", REP_S_NUMFN, .num = stream_ratio, .col = 6, .fmt = REP_F_X, .prec = 2,
     .right = 1},
    {"device_bytes", REP_S_BYTES, .off = offsetof(struct stream_row, dev_bytes), .col = 7,
     .head = "device", .fmt = REP_F_SIZE, .right = 1},
    {"host_bytes", REP_S_BYTES, .off = offsetof(struct stream_row, host_bytes), .col = 8,
     .head = "host", .fmt = REP_F_SIZE, .right = 1},
    {"why", REP_S_TEXT, .off = offsetof(struct stream_row, why)},
    {"status", REP_S_STRFN, .str = stream_status, .table_only = 1},
};

static void stream_doc(struct bench *B, struct rep *doc)
{
	rep_rows(doc, "stream", stream_fields, REP_NFIELDS(stream_fields), B->stream.rows, B->stream.n,
		 sizeof(B->stream.rows[0]), B);
}

static void stream_print(struct bench *B, const struct rep *doc)
{
	static const struct rep_view v = {.span = "status", .nkeys = 2};

	printf("\n== stream read: median of %u runs after %u warm-up runs; GB/s; ratio = "
	       "vmmx / baseline ==\n",
	       B->o.iters, B->o.warmup);
	bench_table(doc, "stream", stream_fields, REP_NFIELDS(stream_fields), &v);
}

const struct bench_section bench_stream = {
    .name = "stream", .run = stream_run, .doc = stream_doc, .print = stream_print,
    .targets = stream_targets,
};
