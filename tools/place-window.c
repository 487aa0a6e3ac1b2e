// SPDX-License-Identifier: MIT
/*
 * place-window.c - vmmx-place's window workload: a hot window shifting
 * across the buffer, each step advised (libvmmx: vmmx_buf_advise
 * WILL_NEED, which migrates it in) or prefetched (managed+prefetch), then
 * read -n times; the residency of every read, and the model from it.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tools/place.h"

/* ---- the window workload ---- */

/* The window at one step: one part, or two where it wraps past the end. */
struct wparts {
	uint64_t off[2], len[2];
	int n;
};

/*
 * The window at step @k of a buffer of @size bytes: [off, off + win),
 * wrapping past the end.  Positions are @size / steps apart, in whole
 * 64 KiB units.
 */
static void window_parts(const struct run *R, uint64_t size, uint64_t win, unsigned int k,
			 struct wparts *wp)
{
	uint64_t shift = size / R->o.steps / MIN_UNIT * MIN_UNIT, o = (uint64_t)k * shift;

	wp->off[0] = o;
	if (o + win <= size) {
		wp->len[0] = win;
		wp->n = 1;
		return;
	}
	wp->len[0] = size - o;
	wp->off[1] = 0;
	wp->len[1] = win - wp->len[0];
	wp->n = 2;
}

/* A failure on the GPU side: the row says what gpu_why() says; -1. */
static int row_gpu_failed(struct row *r)
{
	row_status(r, ST_FAILED, "%s", gpu_why());
	return -1;
}


/* Bring the window close: advise or prefetch, timed into advise_s; 0 or -1. */
static int window_bring(struct row *r, const struct wplace *w, const struct wparts *wp)
{
	for (int j = 0; j < wp->n; j++) {
		double sec = 0;

		if (w->advise) {
			double t0 = gpu_now();
			int err = vmmx_buf_advise(w->buf, wp->off[j], wp->len[j],
						  VMMX_ADVISE_WILL_NEED);

			r->advise_s += gpu_now() - t0;
			if (err) {
				row_status(r, ST_FAILED, "vmmx_buf_advise: %s: %s",
					   vmmx_strerror(err), vmmx_last_error());
				return -1;
			}
		} else if (w->prefetch) {
			if (gpu_prefetch(w->p + wp->off[j], wp->len[j], 0, &sec))
				return row_gpu_failed(r);
			r->advise_s += sec;
		}
	}
	return 0;
}

/* Where this step's reads find the window: *@dev and *@host bytes; 0 or -1. */
static int window_where(struct row *r, const struct wplace *w, const struct wparts *wp,
			uint64_t *dev, uint64_t *host)
{
	for (int j = 0; j < wp->n; j++) {
		struct vmmx_residency res;

		switch (w->where) {
		case WRES_BUF:
			if (vmmx_buf_residency(w->buf, wp->off[j], wp->len[j], &res)) {
				row_status(r, ST_FAILED, "vmmx_buf_residency: %s",
					   vmmx_last_error());
				return -1;
			}
			*dev += res.device;
			*host += res.host;
			break;
		case WRES_DEVICE:
			*dev += wp->len[j];
			break;
		case WRES_HOST:
			*host += wp->len[j];
			break;
		default:
			break;
		}
	}
	return 0;
}

/* The -n reads of the window, their time summed into *@t; 0 or -1. */
static int window_reads(const struct run *R, struct row *r, const struct wplace *w,
			const struct wparts *wp, double *t)
{
	for (unsigned int i = 0; i < R->o.iters; i++) {
		for (int j = 0; j < wp->n; j++) {
			double sec = 0;

			if (gpu_engine_run(w->e, GPU_WL_READ, w->p + wp->off[j], wp->len[j], 0,
					   &sec))
				return row_gpu_failed(r);
			*t += sec;
		}
	}
	return 0;
}

/* Step @k of pass @pass: bring the window close, read it, count; 0 or -1. */
static int window_step(const struct run *R, struct row *r, const struct wplace *w,
		       unsigned int pass, unsigned int k)
{
	uint64_t dev = 0, host = 0;
	struct wparts wp;
	double t = 0;

	window_parts(R, w->size, r->win, k, &wp);
	if (window_bring(r, w, &wp) || window_where(r, w, &wp, &dev, &host) ||
	    window_reads(R, r, w, &wp, &t))
		return -1;
	r->read_s += t;
	r->read_bytes += r->win * R->o.iters;
	r->dev_read += dev * R->o.iters;
	r->host_read += host * R->o.iters;
	if (!pass) {
		r->pass1_s += t;
		r->pass1_bytes += r->win * R->o.iters;
	}
	return 0;
}

/*
 * The window loop over @w: for every pass and step, bring the window close
 * (vmmx_buf_advise WILL_NEED for a libvmmx placement that advises; a
 * prefetch to the device for managed+prefetch; nothing for the others),
 * then read it -n times.  @ctx (NULL but for libvmmx placements): whose
 * statistics count the migrations.  The whole buffer is checked at the end:
 * migrations must keep the data.
 */
void window_measure(struct run *R, struct row *r, struct vmmx_ctx *ctx,
			   const struct wplace *w)
{
	struct vmmx_stats s0 = {.size = sizeof(s0)}, s1 = {.size = sizeof(s1)};
	uint64_t bad = 0;

	if (ctx && vmmx_stats_get(ctx, &s0))
		ctx = NULL;
	r->read_res_known = w->where != WRES_UNKNOWN;
	for (unsigned int pass = 0; pass < R->o.passes; pass++)
		for (unsigned int k = 0; k < R->o.steps; k++)
			if (window_step(R, r, w, pass, k))
				goto failed;
	if (ctx && !vmmx_stats_get(ctx, &s1)) {
		r->stats_known = 1;
		r->migrations = s1.migrations - s0.migrations;
		r->migrated_bytes = s1.migrated_bytes - s0.migrated_bytes;
		r->evictions = s1.evictions - s0.evictions;
		r->promotions = s1.promotions - s0.promotions;
	}
	if (gpu_engine_verify(w->e, GPU_WL_READ, w->p, w->size, &bad)) {
		row_gpu_failed(r);
		goto failed;
	}
	if (bad) {
		row_status(r, ST_FAILED,
			   "data check: %llu of %llu 16-byte elements wrong after the steps",
			   (unsigned long long)bad, (unsigned long long)(w->size / 16));
		R->failed = 1;
	}
	return;
failed:
	R->failed = 1;
}

/*
 * The window workload's model: per read, the window's device bytes at the
 * cudaMalloc rate plus its host bytes at the cudaHostAlloc rate, both the
 * window reads' own mean rates in this run; fraction = model / read time.
 */
void apply_model_window(struct run *R, size_t first, size_t end, double *hbm, double *pcie)
{
	for (size_t i = first; i < end; i++) {
		const struct row *r = &R->rows[i];

		if (r->st != ST_OK || strcmp(r->kind, "baseline") || !(r->read_s > 0))
			continue;
		if (!strcmp(r->name, bases[B_DEVICE].name))
			*hbm = (double)r->read_bytes / r->read_s;
		else if (!strcmp(r->name, bases[B_HOST].name))
			*pcie = (double)r->read_bytes / r->read_s;
	}
	for (size_t i = first; i < end; i++) {
		struct row *r = &R->rows[i];

		if (r->st != ST_OK || !r->read_res_known || !(r->read_s > 0))
			continue;
		if ((r->dev_read && !(*hbm > 0)) || (r->host_read && !(*pcie > 0)))
			continue;
		r->model = (r->dev_read ? (double)r->dev_read / *hbm : 0) +
			   (r->host_read ? (double)r->host_read / *pcie : 0);
		r->frac = r->model / r->read_s;
	}
}
