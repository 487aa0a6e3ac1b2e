// SPDX-License-Identifier: MIT
/*
 * bench-sleep.c - vmmx-bench's sleep section: vmmx_sleep (offload) and
 * vmmx_wake of one tagged device buffer of --migrate-size, against the
 * pinned copy rate measured in the same run (the migrate section's PCIe
 * baseline: cuMemcpy between cuMemAlloc and cuMemHostAlloc memory).
 *
 * The first sleep pins its host memory (the buffer's stash); the next ones
 * find it kept, so the warm figures are the medians of --reps
 * cycles after that first one, and the handles those cycles made are
 * counted (0 when nothing was pinned anew).  A discard cycle is timed too.
 * The data written before the first sleep is checked after the last wake.
 * On sim the figures are those of the emulated driver and mean nothing.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tools/bench.h"

#define SLEEP_TAG "vmmx-bench"
/* The bar: offload and restore at 0.8x the pinned copy rate or more, that is a
 * time of at most 1.25x the floor (the same bytes at the pinned copy rate). */
#define SLEEP_TARGET_RATIO 1.25

static const char *const bench_tags[] = { SLEEP_TAG };

/* One call timed into *@t; 0 or the error (said). */
static int timed_sleep(struct bench *B, struct vmmx_ctx *ctx, int mode, double *t)
{
	double t0 = gpu_now();
	int err = vmmx_sleep(ctx, bench_tags, 1, mode, NULL, NULL);

	*t = gpu_now() - t0;
	return err ? vfail(B, "sleep: vmmx_sleep", err) : 0;
}

static int timed_wake(struct bench *B, struct vmmx_ctx *ctx, double *t)
{
	double t0 = gpu_now();
	int err = vmmx_wake(ctx, bench_tags, 1, NULL);

	*t = gpu_now() - t0;
	return err ? vfail(B, "sleep: vmmx_wake", err) : 0;
}

/* Fill the buffer, or check it (*@bad: wrong elements or bytes); 0 or -1. */
static int sleep_data(struct bench *B, struct vmmx_ctx *ctx, void *p, uint64_t S, int check,
		      uint64_t *bad)
{
	const unsigned int seed = 0x5eed0005u;
	unsigned char *h;

	if (!B->sim && !B->kwhy)
		return check ? gpu_check(p, S, 0, seed, bad) : gpu_fill(p, S, seed);
	/* No kernels: a byte pattern through vmmx_memcpy. */
	h = malloc(S);
	if (!h)
		return -1;
	if (!check) {
		for (uint64_t i = 0; i < S; i++)
			h[i] = (unsigned char)(i * 131 + seed);
		if (vmmx_memcpy(ctx, p, h, S))
			goto fail;
	} else {
		if (vmmx_memcpy(ctx, h, p, S))
			goto fail;
		*bad = 0;
		for (uint64_t i = 0; i < S; i++)
			*bad += h[i] != (unsigned char)(i * 131 + seed);
	}
	free(h);
	return 0;
fail:
	free(h);
	return -1;
}

static void sleep_run(struct bench *B)
{
	struct sleep_res *r = &B->slp;
	uint64_t S = B->o.migrate_size, bad = 0, c0;
	unsigned int n = B->o.reps;
	double *s = calloc(n, sizeof(*s)), *w = calloc(n, sizeof(*w)), t, *ds = NULL, *dw = NULL;
	struct vmmx_ctx *ctx = NULL;
	struct vmmx_buf *buf = NULL;
	struct vmmx_stats st = { .size = sizeof(st) };
	int err;

	r->sleep = r->wake = r->first_sleep = r->discard = r->dwake = NAN;
	bench_pcie(B);
	ds = calloc(n, sizeof(*ds));
	dw = calloc(n, sizeof(*dw));
	if (!s || !w || !ds || !dw) {
		why_oom(B, WHY(r), "sleep");
		goto out;
	}
	note(B, "sleep: vmmx_sleep/vmmx_wake of %llu bytes, %u cycles", (unsigned long long)S, n);
	if (mkctx(B, 0, 0, -1, 0, &ctx)) {
		why_vmmx(WHY(r));
		goto out;
	}
	err = buf_grown(ctx, S, "device", &buf);
	if (!err)
		err = vmmx_buf_set_tag(buf, SLEEP_TAG);
	if (err) {
		vfail(B, "sleep: the buffer", err);
		why_vmmx(WHY(r));
		goto out;
	}
	if (sleep_data(B, ctx, vmmx_buf_ptr(buf), S, 0, NULL)) {
		snprintf(r->why, sizeof(r->why), "filling the buffer failed");
		B->failed = 1;
		goto out;
	}
	if (timed_sleep(B, ctx, VMMX_SLEEP_OFFLOAD, &r->first_sleep) || timed_wake(B, ctx, &t))
		goto fail;
	for (unsigned int i = 0; i < n; i++) {
		/* Handles the sleeps make: host memory pinned anew (the wakes make
		 * device ones, since each sleep gave the device's back). */
		if (vmmx_stats_get(ctx, &st))
			goto fail;
		c0 = st.driver_calls[VMMX_OP_CREATE];
		if (timed_sleep(B, ctx, VMMX_SLEEP_OFFLOAD, &s[i]) || vmmx_stats_get(ctx, &st))
			goto fail;
		r->creates += st.driver_calls[VMMX_OP_CREATE] - c0;
		if (timed_wake(B, ctx, &w[i]))
			goto fail;
	}
	if (sleep_data(B, ctx, vmmx_buf_ptr(buf), S, 1, &bad))
		goto fail;
	if (bad) {
		snprintf(r->why, sizeof(r->why), "data check: %llu wrong after %u cycles",
			 (unsigned long long)bad, n + 1);
		fprintf(stderr, PROG ": sleep: %s\n", r->why);
		B->failed = 1;
		goto out;
	}
	for (unsigned int i = 0; i < n; i++)
		if (timed_sleep(B, ctx, VMMX_SLEEP_DISCARD, &ds[i]) || timed_wake(B, ctx, &dw[i]))
			goto fail;
	r->sleep = gpu_median(s, n);
	r->wake = gpu_median(w, n);
	r->discard = gpu_median(ds, n);
	r->dwake = gpu_median(dw, n);
	goto out;
fail:
	if (!r->why[0])
		why_vmmx(WHY(r));
out:
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	free(s);
	free(w);
	free(ds);
	free(dw);
}

static double gibps(uint64_t S, double sec)
{
	return isfinite(sec) && sec > 0 ? (double)S / sec / (1 << 30) : NAN;
}

/* Our seconds over the floor's (the pinned copy of the same bytes): lower is better. */
static double over_floor(double floor, double sec)
{
	return isfinite(floor) && floor > 0 && isfinite(sec) && sec > 0 ? sec / floor : NAN;
}

static void sleep_doc(struct bench *B, struct rep *doc)
{
	const struct sleep_res *r = &B->slp;
	uint64_t S = B->o.migrate_size;
	struct rep *m = rep_obj(doc, "sleep");

	rep_bytes(m, "size", S);
	rep_int(m, "reps", B->o.reps);
	rep_bool(m, "sim", B->sim);
	rep_num(m, "target_ratio", SLEEP_TARGET_RATIO);
	rep_str(m, "baseline", B->mig.pcie.name);
	rep_num(m, "pinned_d2h_gibps", gibps(S, B->mig.pcie.d2h));
	rep_num(m, "pinned_h2d_gibps", gibps(S, B->mig.pcie.h2d));
	rep_num(m, "first_sleep_gibps", gibps(S, r->first_sleep));
	rep_num(m, "sleep_gibps", gibps(S, r->sleep));
	rep_num(m, "wake_gibps", gibps(S, r->wake));
	rep_num(m, "sleep_over_floor", over_floor(B->mig.pcie.d2h, r->sleep));
	rep_num(m, "wake_over_floor", over_floor(B->mig.pcie.h2d, r->wake));
	rep_num(m, "discard_s", r->discard);
	rep_num(m, "discard_wake_s", r->dwake);
	rep_int(m, "warm_creates", (long long)r->creates);
	rep_str(m, "why", r->why[0] ? r->why : NULL);
}

static void sleep_print(struct bench *B, const struct rep *doc)
{
	const struct sleep_res *r = &B->slp;
	uint64_t S = B->o.migrate_size;
	char sz[32];

	(void)doc;
	printf("\n== sleep: vmmx_sleep (offload) and vmmx_wake of %s, against the pinned copy "
	       "rate of this run (%s)\n", rep_fmt_size(S, sz, sizeof(sz)),
	       B->mig.pcie.name ? B->mig.pcie.name : "-");
	if (B->sim)
		printf("(sim backend: the emulated driver's times; these figures mean nothing)\n");
	if (r->why[0]) {
		printf("not measured: %s\n", r->why);
		return;
	}
	printf("pinned copy   d->h %8.2f GiB/s, h->d %8.2f GiB/s\n", gibps(S, B->mig.pcie.d2h),
	       gibps(S, B->mig.pcie.h2d));
	printf("first sleep   %8.2f GiB/s  (host memory pinned)\n", gibps(S, r->first_sleep));
	printf("sleep         %8.2f GiB/s  %.2fx the floor (time / the pinned copy's; target "
	       "%.2fx or less)\n", gibps(S, r->sleep), over_floor(B->mig.pcie.d2h, r->sleep),
	       SLEEP_TARGET_RATIO);
	printf("wake          %8.2f GiB/s  %.2fx the floor (target %.2fx or less)\n",
	       gibps(S, r->wake), over_floor(B->mig.pcie.h2d, r->wake), SLEEP_TARGET_RATIO);
	printf("discard       %8.3f ms, its wake %.3f ms\n", r->discard * 1e3, r->dwake * 1e3);
	printf("host handles made by the %u warm sleeps: %llu (0: the host memory was kept)\n",
	       B->o.reps, (unsigned long long)r->creates);
	printf("(published for comparison: torch_memory_saver pause 2.4 GiB/s and resume "
	       "5.3 GiB/s where a pinned copy ran at 24 GiB/s: 10x and 4.5x the floor)\n");
}

const struct bench_section bench_sleep = {
    .name = "sleep", .run = sleep_run, .doc = sleep_doc, .print = sleep_print,
};
