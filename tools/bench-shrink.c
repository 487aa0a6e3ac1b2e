// SPDX-License-Identifier: MIT
/*
 * bench-shrink.c - vmmx-bench's shrink section: a one-chunk device buffer
 * cut through (1/128, 1/8, 1/2 kept): the kept part is copied into a new
 * handle, the rest given back; time, and the device bytes mapped after.
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
 * A device buffer of --shrink-size in one handle (default settings), filled
 * with the pattern, shrunk to a part of it and trimmed, --reps times: the
 * shrink keeps the cut chunk whole, the trim copies the kept part into a
 * new handle on the device and gives the rest back; both are timed.
 * The kept part is checked once per size; the device bytes mapped after the
 * shrink must be the kept size.
 */
static void shrink_one(struct bench *B, uint64_t S, uint64_t kept, struct shrink_row *r)
{
	unsigned int n = B->o.reps;
	struct gpu_engine e = {.seed = 0x5eed0007u, .sim = B->sim};
	struct vmmx_ctx *ctx = NULL;
	struct vmmx_buf *buf = NULL;
	double *t = calloc(n, sizeof(*t));
	uint64_t bad = 0;
	int err;

	*r = (struct shrink_row){.from = S, .kept = kept, .secs = NAN};
	if (!t) {
		snprintf(r->why, sizeof(r->why), "out of memory");
		B->failed = 1;
		goto out;
	}
	if (mkctx(B, 0, 0, -1, 0, &ctx))
		goto fail_v;
	e.ctx = ctx;
	err = vmmx_buf_create(ctx, S, "device", &buf);
	for (unsigned int i = 0; !err && i < n; i++) {
		struct vmmx_stats st = {.size = sizeof(st)};
		double t0;

		err = vmmx_buf_resize(buf, S);
		if (err)
			break;
		if (!i && gpu_engine_fill(&e, vmmx_buf_ptr(buf), S))
			goto fail_g;
		t0 = gpu_now();
		err = vmmx_buf_resize(buf, kept);
		if (!err)
			err = vmmx_buf_trim(buf);
		t[i] = gpu_now() - t0;
		if (err)
			break;
		if (!i && gpu_engine_verify(&e, GPU_WL_READ, vmmx_buf_ptr(buf), kept, &bad))
			goto fail_g;
		if (bad) {
			snprintf(r->why, sizeof(r->why), "data check: %llu elements wrong after the shrink",
				 (unsigned long long)bad);
			fprintf(stderr, PROG ": shrink: %s\n", r->why);
			B->failed = 1;
			goto out;
		}
		vmmx_stats_get(ctx, &st);
		r->dev_after = st.device_bytes;
		if (st.device_bytes != kept) {
			snprintf(r->why, sizeof(r->why), "%llu device bytes mapped after the shrink",
				 (unsigned long long)st.device_bytes);
			fprintf(stderr, PROG ": shrink: %s\n", r->why);
			B->failed = 1;
			goto out;
		}
		err = vmmx_buf_resize(buf, 0);
	}
	if (err) {
		vfail(B, "shrink: vmmx_buf_resize or vmmx_buf_trim", err);
		goto fail_v;
	}
	r->secs = gpu_median(t, n);
	goto out;
fail_g:
	why_gpu(B, WHY(r), "shrink");
	goto out;
fail_v:
	why_vmmx(WHY(r));
out:
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	gpu_engine_fini(&e);
	free(t);
}

static void shrink_run(struct bench *B)
{
	static const unsigned int parts[] = { 128, 8, 2 };
	uint64_t S = B->o.shrink_size / B->gran * B->gran;
	char a[32];

	B->shr.n = 0;
	note(B, "shrink: a %s one-chunk device buffer cut to 1/128, 1/8 and 1/2, %u repetitions",
	     tool_fmt_size(S, a, sizeof(a)), B->o.reps);
	for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
		uint64_t kept = S / parts[k] / B->gran * B->gran;

		if (kept < B->gran || kept >= S)
			continue;
		shrink_one(B, S, kept, &B->shr.rows[B->shr.n++]);
	}
}

static double shrink_us_per_gib(const void *row, const void *arg)
{
	const struct shrink_row *r = row;

	(void)arg;
	return r->secs * 1e6 / ((double)r->kept / (1ull << 30));
}

/* The table's text for a row not measured; NULL (no member) for a measured one. */
static const char *shrink_status(const void *row, const void *arg, char *buf, size_t len)
{
	const struct shrink_row *r = row;

	(void)arg;
	if (isfinite(r->secs))
		return NULL;
	snprintf(buf, len, "not measured: %s", r->why);
	return buf;
}

static const struct rep_field shrink_fields[] = {
    {"from", REP_S_BYTES, .off = offsetof(struct shrink_row, from), .col = 1, .fmt = REP_F_SIZE},
    {"kept", REP_S_BYTES, .off = offsetof(struct shrink_row, kept), .col = 2, .fmt = REP_F_SIZE},
    {"shrink_s", REP_S_NUM, .off = offsetof(struct shrink_row, secs), .col = 3, .head = "shrink us",
     .fmt = REP_F_US, .prec = 1, .right = 1},
    {"us_per_gib_kept", REP_S_NUMFN, .num = shrink_us_per_gib, .col = 4,
     .head = "us per GiB kept", .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {"device_after", REP_S_BYTES, .off = offsetof(struct shrink_row, dev_after), .col = 5,
     .head = "device after", .fmt = REP_F_SIZE, .right = 1},
    {"note", REP_S_TEXT, .off = offsetof(struct shrink_row, why)},
    {"status", REP_S_STRFN, .str = shrink_status, .table_only = 1},
};

static void shrink_doc(struct bench *B, struct rep *doc)
{
	rep_rows(doc, "shrink", shrink_fields, REP_NFIELDS(shrink_fields), B->shr.rows, B->shr.n,
		 sizeof(B->shr.rows[0]), B);
}

static void shrink_print(struct bench *B, const struct rep *doc)
{
	static const struct rep_view v = {.span = "status", .nkeys = 2};

	printf("\n== shrink: a one-chunk device buffer cut through, default settings, median "
	       "of %u; the kept part is copied into a new handle, the rest given back ==\n",
	       B->o.reps);
	bench_table(doc, "shrink", shrink_fields, REP_NFIELDS(shrink_fields), &v);
}

const struct bench_section bench_shrink = {
    .name = "shrink", .run = shrink_run, .doc = shrink_doc, .print = shrink_print,
};
