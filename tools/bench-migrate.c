// SPDX-License-Identifier: MIT
/*
 * bench-migrate.c - vmmx-bench's migrate section: vmmx_buf_migrate of a
 * whole buffer device -> host and back, per chunk size (VMMX_CHUNK_MAX)
 * with the chunk cache warm and cold (VMMX_CACHE_LIMIT=0), then warm with
 * moved chunks granted to the GPU only and read-mostly, against a plain
 * cuMemcpy of the same bytes between cuMemAlloc and cuMemHostAlloc memory
 * (the PCIe copy rate) and UVM's cuMemPrefetchAsync of cuMemAllocManaged
 * memory both ways; its targets.
 */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tools/bench.h"

/* The PCIe baseline's two ends: on sim a libvmmx device buffer and malloc'd memory. */
struct pcie_ends {
	struct gpu_mem dm, hm;	/* cuMemAlloc, cuMemHostAlloc */
	struct vmmx_ctx *ctx;	/* sim */
	struct vmmx_buf *vb;	/* sim */
	unsigned char *hbuf;	/* sim */
	void *dev, *host;	/* what the copies address */
};

static int pcie_alloc(struct bench *B, uint64_t S, struct pcie_ends *pe)
{
	struct mig_base *b = &B->mig.pcie;
	int err;

	if (!B->sim) {
		if (gpu_alloc(GPU_ALLOC_DEVICE, S, &pe->dm) ||
		    gpu_alloc(GPU_ALLOC_HOST, S, &pe->hm))
			return why_gpu(B, WHY(b), "migrate: PCIe copy baseline buffers");
		memset(pe->hm.hptr, 0x5a, S);
		pe->dev = pe->dm.dptr;
		pe->host = pe->hm.dptr;
		return 0;
	}
	if (mkctx(B, 0, 0, -1, 0, &pe->ctx))
		return why_vmmx(WHY(b));
	err = buf_grown(pe->ctx, S, "device", &pe->vb);
	if (err) {
		vfail(B, "migrate: stand-in buffer", err);
		return why_vmmx(WHY(b));
	}
	pe->hbuf = malloc(S);
	if (!pe->hbuf)
		return why_oom(B, WHY(b), "migrate");
	memset(pe->hbuf, 0x5a, S);
	pe->dev = vmmx_buf_ptr(pe->vb);
	pe->host = pe->hbuf;
	return 0;
}

static void pcie_free(struct bench *B, struct pcie_ends *pe)
{
	/* Both, whatever the first says. */
	if (gpu_free(&pe->hm))
		gfail(B, "migrate: freeing the pinned host buffer");
	if (gpu_free(&pe->dm))
		gfail(B, "migrate: freeing the device buffer");
	free(pe->hbuf);
	vmmx_buf_destroy(pe->vb);
	vmmx_ctx_destroy(pe->ctx);
}

/* One copy each way: device -> host timed into *@d, host -> device into *@h; 0 or -1. */
static int pcie_round_trip(struct bench *B, const struct pcie_ends *pe, uint64_t S, double *d,
			   double *h)
{
	double t0;
	int err;

	if (!B->sim) {
		if (gpu_memcpy_timed(pe->host, pe->dev, S, d) ||
		    gpu_memcpy_timed(pe->dev, pe->host, S, h))
			return why_gpu(B, WHY(&B->mig.pcie), "migrate: PCIe copy baseline");
		return 0;
	}
	t0 = gpu_now();
	err = vmmx_memcpy(pe->ctx, pe->host, pe->dev, S);
	*d = gpu_now() - t0;
	if (!err) {
		t0 = gpu_now();
		err = vmmx_memcpy(pe->ctx, pe->dev, pe->host, S);
		*h = gpu_now() - t0;
	}
	if (err) {
		vfail(B, "migrate: stand-in copy", err);
		return why_vmmx(WHY(&B->mig.pcie));
	}
	return 0;
}

/* --reps round trips after a warm-up one, into @d[1..] and @h[1..]; 0 or -1. */
static int pcie_round_trips(struct bench *B, const struct pcie_ends *pe, double *d, double *h)
{
	for (unsigned int i = 0; i <= B->o.reps; i++) /* i == 0: warm-up */
		if (pcie_round_trip(B, pe, B->o.migrate_size, &d[i], &h[i]))
			return -1;
	return 0;
}

/*
 * The PCIe copy rate: cuMemcpy of the range between cuMemAlloc and
 * cuMemHostAlloc memory each way, timed with device events, median of
 * --reps after one warm-up.  On sim: vmmx_memcpy between a libvmmx device
 * buffer and malloc'd memory, timed with clock_gettime.
 */
static void migrate_pcie(struct bench *B)
{
	struct mig_base *b = &B->mig.pcie;
	unsigned int n = B->o.reps;
	double *d = calloc(n + 1, sizeof(*d)), *h = calloc(n + 1, sizeof(*h));
	struct pcie_ends pe = {0};

	b->name = B->sim ? "vmmx_memcpy device chunks <-> malloc (sim stand-in)"
			 : "cuMemcpy cuMemAlloc <-> cuMemHostAlloc";
	note(B, "migrate: baseline: %s", b->name);
	if (!d || !h) {
		why_oom(B, WHY(b), "migrate");
	} else if (!pcie_alloc(B, B->o.migrate_size, &pe) && !pcie_round_trips(B, &pe, d, h)) {
		b->d2h = gpu_median(d + 1, n);
		b->h2d = gpu_median(h + 1, n);
	}
	pcie_free(B, &pe);
	free(d);
	free(h);
}

void bench_pcie(struct bench *B)
{
	if (!B->mig.pcie.name)
		migrate_pcie(B);
}

/*
 * UVM: cuMemAllocManaged of the range (refused beyond free device memory
 * less the margin), written by the GPU, then cuMemPrefetchAsync to host
 * memory and back to the device, timed with device events, median of
 * --reps after one warm-up round trip; the data is checked at the end.
 */
static void migrate_uvm(struct bench *B)
{
	struct mig_base *b = &B->mig.uvm;
	uint64_t S = B->o.migrate_size, bad = 0;
	unsigned int n = B->o.reps;
	double *d = NULL, *h = NULL;
	struct gpu_mem m = {0};
	const unsigned int seed = 0x5eed0004u;
	int err;

	b->name = "cuMemPrefetchAsync of cuMemAllocManaged";
	if (B->sim) {
		snprintf(b->why, sizeof(b->why), "sim backend: no managed memory");
		return;
	}
	if (B->kwhy) {
		snprintf(b->why, sizeof(b->why), "%s", B->kwhy);
		return;
	}
	note(B, "migrate: baseline: UVM, %s", b->name);
	d = calloc(n + 1, sizeof(*d));
	h = calloc(n + 1, sizeof(*h));
	if (!d || !h) {
		why_oom(B, WHY(b), "migrate");
		goto out;
	}
	err = gpu_alloc(GPU_ALLOC_MANAGED, S, &m);
	if (err) {
		/* Refused by the managed-memory rule, or no managed memory: not a failure. */
		snprintf(b->why, sizeof(b->why), "%s", gpu_why());
		if (err == -VMMX_ERANGE || err == -VMMX_ENOTSUP)
			note(B, "migrate: UVM baseline not run: %s", b->why);
		else
			gfail(B, "migrate: cuMemAllocManaged");
		goto out;
	}
	/* Pages exist once written; the GPU writes them, so they start on the device. */
	if (gpu_fill(m.dptr, S, seed))
		goto fail;
	for (unsigned int i = 0; i <= n; i++) { /* i == 0: warm-up */
		if (gpu_prefetch(m.dptr, S, 1, &d[i]) || gpu_prefetch(m.dptr, S, 0, &h[i]))
			goto fail;
	}
	if (gpu_check(m.dptr, S, 0, seed, &bad))
		goto fail;
	if (bad) {
		snprintf(b->why, sizeof(b->why),
			 "data check: %llu elements wrong after the prefetches",
			 (unsigned long long)bad);
		fprintf(stderr, PROG ": migrate: UVM: %s\n", b->why);
		B->failed = 1;
		goto out;
	}
	b->d2h = gpu_median(d + 1, n);
	b->h2d = gpu_median(h + 1, n);
	goto out;
fail:
	why_gpu(B, WHY(b), "migrate: UVM baseline");
out:
	if (gpu_free(&m))
		gfail(B, "migrate: freeing the managed buffer");
	free(d);
	free(h);
}

/* The buffer of row @r in a context of its own (its chunk size, its cache), filled; 0 or -1. */
static int mig_setup(struct bench *B, struct mig_row *r, struct gpu_engine *e,
		     struct vmmx_ctx **ctx, struct vmmx_buf **buf)
{
	uint64_t S = B->o.migrate_size;
	char c[32];
	int err;

	if (mkctx(B, 0, r->chunk, r->warm ? (int64_t)(2 * S) : 0, 0, ctx))
		return why_vmmx(WHY(r));
	e->ctx = *ctx;
	err = buf_grown(*ctx, S, "device", buf);
	if (!err)
		err = vmmx_buf_chunks(*buf, NULL, 0, &r->nchunks);
	if (err) {
		vfail(B, "migrate: buffer", err);
		return why_vmmx(WHY(r));
	}
	if (r->nchunks != S / r->chunk)
		fprintf(stderr, PROG ": warning: migrate: %zu chunks where %llu of %s were asked\n",
			r->nchunks, (unsigned long long)(S / r->chunk),
			tool_fmt_size(r->chunk, c, sizeof(c)));
	if (gpu_engine_fill(e, vmmx_buf_ptr(*buf), S))
		return why_gpu(B, WHY(r), "migrate");
	return 0;
}

/* A data check found @bad elements wrong; -1. */
static int mig_bad(struct bench *B, struct mig_row *r, uint64_t bad)
{
	snprintf(r->why, sizeof(r->why), "data check: %llu of %llu elements wrong after migrating",
		 (unsigned long long)bad, (unsigned long long)(B->o.migrate_size / 16));
	fprintf(stderr, PROG ": migrate: %s\n", r->why);
	B->failed = 1;
	return -1;
}

/*
 * One vmmx_buf_migrate of the whole range, to the device (@k 1) or to host
 * (@k 0), timed into *@t (NULL: untimed); all of it must have moved and be
 * there.  0 or -1.
 */
static int mig_move(struct bench *B, struct mig_row *r, struct vmmx_buf *buf, int k, double *t)
{
	struct vmmx_loc host = {VMMX_LOC_HOST, 0}, dev = {VMMX_LOC_DEVICE, B->info.device};
	uint64_t S = B->o.migrate_size;
	struct vmmx_residency res;
	size_t moved = 0;
	double t0 = gpu_now();
	int err = vmmx_buf_migrate(buf, 0, S, k ? dev : host, &moved);

	if (t)
		*t = gpu_now() - t0;
	if (err) {
		vfail(B, k ? "migrate: vmmx_buf_migrate to the device"
			   : "migrate: vmmx_buf_migrate to host",
		      err);
		return why_vmmx(WHY(r));
	}
	err = vmmx_buf_residency(buf, 0, S, &res);
	if (err) {
		vfail(B, "migrate: vmmx_buf_residency", err);
		return why_vmmx(WHY(r));
	}
	if (moved != S || (k ? res.device : res.host) != S) {
		snprintf(r->why, sizeof(r->why),
			 "moved %zu of %llu bytes; %zu on the device, %zu in host "
			 "memory afterwards",
			 moved, (unsigned long long)S, res.device, res.host);
		fprintf(stderr, PROG ": migrate: %s\n", r->why);
		B->failed = 1;
		return -1;
	}
	return 0;
}

/*
 * The round trips: an untimed one first, then --reps timed into @d and @h,
 * the statistics taken into @st0 before them.  The data is checked once
 * at the host end, after the first move.  0 or -1.
 */
static int mig_round_trips(struct bench *B, struct mig_row *r, struct vmmx_ctx *ctx,
			   struct vmmx_buf *buf, struct gpu_engine *e, double *d, double *h,
			   struct vmmx_stats *st0)
{
	uint64_t bad = 0;

	for (unsigned int i = 0; i <= B->o.reps; i++) { /* i == 0: untimed, fills the cache */
		if (i == 1)
			vmmx_stats_get(ctx, st0);
		for (int k = 0; k < 2; k++) {
			if (mig_move(B, r, buf, k, i ? &(k ? h : d)[i - 1] : NULL))
				return -1;
			/* Once at the host end: the data survived the first move.  (Not
			 * on sim with GPU-only host chunks: its stand-in for a kernel is
			 * vmmx_memcpy, which refuses them; the end check still runs.) */
			if (!i && !k && !(B->sim && bench_mkctx_gpu_only) &&
			    gpu_engine_verify(e, GPU_WL_READ, vmmx_buf_ptr(buf), B->o.migrate_size,
					      &bad))
				return why_gpu(B, WHY(r), "migrate");
			if (bad)
				return mig_bad(B, r, bad);
		}
	}
	return 0;
}

/* A measured row's figures; warnings where the cache did not serve as set up. */
static void mig_figures(struct bench *B, struct mig_row *r, double *d, double *h,
			const struct vmmx_stats *st0, const struct vmmx_stats *st1)
{
	unsigned int n = B->o.reps;
	char c[32];

	r->d2h = gpu_median(d, n);
	r->h2d = gpu_median(h, n);
	r->cache_hits = st1->cache_hits - st0->cache_hits;
	r->migrations = st1->migrations - st0->migrations;
	r->migrated_bytes = st1->migrated_bytes - st0->migrated_bytes;
	r->copies_saved = st1->copies_saved - st0->copies_saved;
	if (r->read_mostly && r->copies_saved != (uint64_t)n * r->nchunks)
		fprintf(stderr,
			PROG ": warning: migrate: read-mostly: %llu copies saved in %u round trips of "
			     "%zu chunks\n",
			(unsigned long long)r->copies_saved, n, r->nchunks);
	/* Read-mostly: d->h takes no handle (it maps the kept one). */
	if (r->warm && r->cache_hits != (r->read_mostly ? 1ull : 2ull) * n * r->nchunks)
		fprintf(stderr,
			PROG ": warning: migrate: %s chunks, warm: %llu cache hits in %u round "
			     "trips of %zu chunks\n",
			tool_fmt_size(r->chunk, c, sizeof(c)), (unsigned long long)r->cache_hits, n,
			r->nchunks);
	if (!r->warm && r->cache_hits)
		fprintf(stderr, PROG ": warning: migrate: cache hits with the cache off\n");
}

/* A read-mostly row's advice over the whole buffer (its chunks are on the device:
 * the untimed h->d keeps the host copies the timed d->h map back); 0 or -1. */
static int mig_read_mostly(struct bench *B, struct mig_row *r, struct vmmx_buf *buf)
{
	int err;

	if (!r->read_mostly)
		return 0;
	err = vmmx_buf_advise(buf, 0, B->o.migrate_size, VMMX_ADVISE_READ_MOSTLY);
	if (err) {
		vfail(B, "migrate: vmmx_buf_advise", err);
		return why_vmmx(WHY(r));
	}
	return 0;
}

/*
 * vmmx_buf_migrate of a buffer of --migrate-size in chunks of @chunk
 * (VMMX_CHUNK_MAX), device -> host and host -> device.  One untimed round
 * trip first (with @warm it leaves the cache holding a handle for every
 * chunk at both ends: VMMX_CACHE_LIMIT is twice the range; cold runs have
 * VMMX_CACHE_LIMIT=0, so every move creates and releases handles), then
 * --reps timed round trips.  The pattern written before is checked on the
 * host side after the first move and on the device at the end.
 */
static void migrate_vmmx(struct bench *B, uint64_t chunk, int warm, int read_mostly,
			 struct mig_row *r)
{
	uint64_t S = B->o.migrate_size, bad = 0;
	unsigned int n = B->o.reps;
	struct gpu_engine e = {.seed = 0x5eed0005u, .sim = B->sim};
	struct vmmx_stats st0 = {.size = sizeof(st0)}, st1 = {.size = sizeof(st1)};
	struct vmmx_ctx *ctx = NULL;
	struct vmmx_buf *buf = NULL;
	double *d = calloc(n, sizeof(*d)), *h = calloc(n, sizeof(*h));
	char a[32], c[32];

	*r = (struct mig_row){.chunk = chunk, .warm = warm, .read_mostly = read_mostly,
			      .d2h = NAN, .h2d = NAN};
	note(B, "migrate: %s in %s chunks, cache %s%s, %u round trips",
	     tool_fmt_size(S, a, sizeof(a)), tool_fmt_size(chunk, c, sizeof(c)),
	     warm ? "warm" : "cold", read_mostly ? ", read-mostly" : "", n);
	if (B->kwhy) {
		snprintf(r->why, sizeof(r->why), "%s", B->kwhy);
	} else if (!d || !h) {
		why_oom(B, WHY(r), "migrate");
	} else if (!mig_setup(B, r, &e, &ctx, &buf) && !mig_read_mostly(B, r, buf) &&
		   !mig_round_trips(B, r, ctx, buf, &e, d, h, &st0)) {
		vmmx_stats_get(ctx, &st1);
		if (gpu_engine_verify(&e, GPU_WL_READ, vmmx_buf_ptr(buf), S, &bad))
			why_gpu(B, WHY(r), "migrate");
		else if (bad)
			mig_bad(B, r, bad);
		else
			mig_figures(B, r, d, h, &st0, &st1);
	}
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	gpu_engine_fini(&e);
	free(d);
	free(h);
}

static void migrate_run(struct bench *B)
{
	B->mig.pcie = (struct mig_base){.d2h = NAN, .h2d = NAN};
	B->mig.uvm = (struct mig_base){.d2h = NAN, .h2d = NAN};
	/* Baselines first, each freed before the next: the managed-memory rule reads
	 * the free memory with nothing else of ours allocated. */
	migrate_pcie(B);
	migrate_uvm(B);
	B->mig.n = 0;
	for (int c = 0; c < B->o.nmchunks; c++)
		for (int warm = 1; warm >= 0; warm--)
			migrate_vmmx(B, B->o.mchunks[c], warm, 0, &B->mig.rows[B->mig.n++]);
	/* The first chunk size again, warm, with the chunks moved to host granted
	 * to the GPU only (VMMX_HOST_CPU_ACCESS=placed): granting the CPU is most
	 * of the cost of mapping host memory. */
	if (B->o.nmchunks) {
		bench_mkctx_gpu_only = 1;
		migrate_vmmx(B, B->o.mchunks[0], 1, 0, &B->mig.rows[B->mig.n]);
		B->mig.rows[B->mig.n++].gpu_only = 1;
		bench_mkctx_gpu_only = 0;
		/* And warm again with the range advised read-mostly: d->h maps the
		 * host copies kept since h->d, copying nothing. */
		migrate_vmmx(B, B->o.mchunks[0], 1, 1, &B->mig.rows[B->mig.n++]);
	}
}

static const char *mig_label(const struct mig_row *r)
{
	return r->read_mostly ? "read-mostly" : r->gpu_only ? "warm-gpu" : r->warm ? "warm" : "cold";
}

/* A warm row of the default settings: the one the target judges. */
static int mig_plain(const struct mig_row *r)
{
	return r->warm && !r->gpu_only && !r->read_mostly;
}

/* min(d->h, h->d) of migrate / PCIe copy: both directions must reach the target. */
static double mig_ratio(const struct bench *B, const struct mig_row *r)
{
	double a = B->mig.pcie.d2h / r->d2h, b = B->mig.pcie.h2d / r->h2d;

	if (!isfinite(a) || !isfinite(b))
		return NAN;
	return a < b ? a : b;
}

/*
 * Why the migration target is not judged in this run, into @buf; NULL when
 * it is: a range under 64 MiB (the target is about larger ones; the sim is
 * never judged, and shows its tiny ranges' ratios anyway), or no PCIe copy
 * figure to judge against.
 */
static const char *migrate_unjudged(struct bench *B, char *buf, size_t len)
{
	char a[32];

	if (!B->sim && B->o.migrate_size < MIGRATE_TARGET_MIN) {
		snprintf(buf, len, "the range (%s) is under 64 MiB",
			 tool_fmt_size(B->o.migrate_size, a, sizeof(a)));
		return buf;
	}
	if (!isfinite(B->mig.pcie.d2h) || !isfinite(B->mig.pcie.h2d))
		return B->mig.pcie.why[0] ? B->mig.pcie.why : "no PCIe copy baseline";
	return NULL;
}

/* The target, judged on the default settings (the first chunk size, warm), then a line a run. */
static void migrate_targets(struct bench *B)
{
	char text[96], shown[64], a[32], b[32], small[96];
	const char *why = migrate_unjudged(B, small, sizeof(small));
	const struct mig_row *best = NULL;
	double bv = NAN;

	if (!B->mig.n)
		return;

	for (size_t i = 0; i < B->mig.n && !best; i++)
		if (mig_plain(&B->mig.rows[i]) && B->mig.rows[i].chunk == B->o.mchunks[0]) {
			best = &B->mig.rows[i];
			bv = mig_ratio(B, best);
		}
	if (best)
		snprintf(shown, sizeof(shown), "%.2fx (%s chunks, %s, default settings)", bv,
			 tool_fmt_size(best->chunk, a, sizeof(a)), mig_label(best));
	else
		snprintf(shown, sizeof(shown), "-");
	add_target(B, "migration >= 0.8x PCIe copy for ranges >= 64 MiB, default settings",
		   why ? NAN : bv, MIGRATE_TARGET_RATIO, 0, shown,
		   why ? why : best && isfinite(bv) ? NULL : "no configuration measured");
	for (size_t i = 0; i < B->mig.n; i++) {
		const struct mig_row *r = &B->mig.rows[i];
		double v = mig_ratio(B, r);
		char x[24], y[24];

		snprintf(text, sizeof(text), "  ... %s, %s chunks, cache %s",
			 tool_fmt_size(B->o.migrate_size, a, sizeof(a)),
			 tool_fmt_size(r->chunk, b, sizeof(b)), mig_label(r));
		snprintf(shown, sizeof(shown), "d->h %s, h->d %s",
			 ratio(B->mig.pcie.d2h, r->d2h, x, sizeof(x)),
			 ratio(B->mig.pcie.h2d, r->h2d, y, sizeof(y)));
		add_target(B, text, why ? NAN : v, MIGRATE_TARGET_RATIO, 0, shown,
			   why ? why : r->why[0] ? r->why : NULL);
	}
}

static void doc_mig_base(struct rep *m, const char *key, const struct mig_base *bl, uint64_t S)
{
	struct rep *o = rep_obj(m, key);

	rep_str(o, "baseline", bl->name);
	rep_num(o, "d2h_s", bl->d2h);
	rep_num(o, "h2d_s", bl->h2d);
	rep_num(o, "d2h_gbps", tool_gbps(S, bl->d2h));
	rep_num(o, "h2d_gbps", tool_gbps(S, bl->h2d));
	rep_str(o, "why", bl->why);
}

static double mig_gbps(const struct bench *B, double s)
{
	return tool_gbps(B->o.migrate_size, s);
}

static double mig_d2h_gbps(const void *row, const void *arg)
{
	return mig_gbps(arg, ((const struct mig_row *)row)->d2h);
}

static double mig_h2d_gbps(const void *row, const void *arg)
{
	return mig_gbps(arg, ((const struct mig_row *)row)->h2d);
}

static double mig_d2h_vs_pcie(const void *row, const void *arg)
{
	return ((const struct bench *)arg)->mig.pcie.d2h / ((const struct mig_row *)row)->d2h;
}

static double mig_h2d_vs_pcie(const void *row, const void *arg)
{
	return ((const struct bench *)arg)->mig.pcie.h2d / ((const struct mig_row *)row)->h2d;
}

static double mig_d2h_vs_uvm(const void *row, const void *arg)
{
	return ((const struct bench *)arg)->mig.uvm.d2h / ((const struct mig_row *)row)->d2h;
}

static double mig_h2d_vs_uvm(const void *row, const void *arg)
{
	return ((const struct bench *)arg)->mig.uvm.h2d / ((const struct mig_row *)row)->h2d;
}

static double mig_row_ratio(const void *row, const void *arg)
{
	return mig_ratio(arg, row);
}

static const char *mig_cache(const void *row, const void *arg, char *buf, size_t len)
{
	(void)arg;
	(void)buf;
	(void)len;
	return mig_label(row);
}

static const char *mig_status(const void *row, const void *arg, char *buf, size_t len)
{
	const struct mig_row *r = row;

	(void)arg;
	if (isfinite(r->d2h) && isfinite(r->h2d))
		return NULL;
	snprintf(buf, len, "not measured: %s", r->why[0] ? r->why : "failed");
	return buf;
}

static const struct rep_field mig_fields[] = {
    {"chunk", REP_S_BYTES, .off = offsetof(struct mig_row, chunk), .col = 1, .fmt = REP_F_SIZE},
    {"cache", REP_S_STRFN, .str = mig_cache, .col = 2},
    {"chunks", REP_S_SIZE_T, .off = offsetof(struct mig_row, nchunks), .col = 3, .fmt = REP_F_INT,
     .right = 1},
    {"d2h_s", REP_S_NUM, .off = offsetof(struct mig_row, d2h)},
    {"h2d_s", REP_S_NUM, .off = offsetof(struct mig_row, h2d)},
    {"d2h_gbps", REP_S_NUMFN, .num = mig_d2h_gbps, .col = 4, .head = "d->h GB/s",
     .fmt = REP_F_FIX, .prec = 2, .right = 1},
    {"h2d_gbps", REP_S_NUMFN, .num = mig_h2d_gbps, .col = 7, .head = "h->d GB/s",
     .fmt = REP_F_FIX, .prec = 2, .right = 1},
    {"d2h_vs_pcie", REP_S_NUMFN, .num = mig_d2h_vs_pcie, .col = 5, .head = "x PCIe",
     .fmt = REP_F_X, .prec = 2, .right = 1},
    {"h2d_vs_pcie", REP_S_NUMFN, .num = mig_h2d_vs_pcie, .col = 8, .head = "x PCIe",
     .fmt = REP_F_X, .prec = 2, .right = 1},
    {"d2h_vs_uvm", REP_S_NUMFN, .num = mig_d2h_vs_uvm, .col = 6, .head = "x UVM",
     .fmt = REP_F_X, .prec = 2, .right = 1},
    {"h2d_vs_uvm", REP_S_NUMFN, .num = mig_h2d_vs_uvm, .col = 9, .head = "x UVM",
     .fmt = REP_F_X, .prec = 2, .right = 1},
    {"ratio", REP_S_NUMFN, .num = mig_row_ratio},
    {"cache_hits", REP_S_BYTES, .off = offsetof(struct mig_row, cache_hits), .col = 10,
     .head = "cache hits", .fmt = REP_F_INT, .right = 1},
    {"migrations", REP_S_BYTES, .off = offsetof(struct mig_row, migrations)},
    {"migrated_bytes", REP_S_BYTES, .off = offsetof(struct mig_row, migrated_bytes)},
    {"copies_saved", REP_S_BYTES, .off = offsetof(struct mig_row, copies_saved)},
    {"why", REP_S_TEXT, .off = offsetof(struct mig_row, why)},
    {"status", REP_S_STRFN, .str = mig_status, .table_only = 1},
};

static void migrate_doc(struct bench *B, struct rep *doc)
{
	struct rep *m = rep_obj(doc, "migrate"), *arr;
	const struct mig_row *best = NULL;
	double bv = NAN;

	rep_bytes(m, "size", B->o.migrate_size);
	rep_int(m, "reps", B->o.reps);
	rep_num(m, "target_ratio", MIGRATE_TARGET_RATIO);
	arr = rep_arr(m, "chunks");
	for (int i = 0; i < B->o.nmchunks; i++)
		rep_bytes(arr, NULL, B->o.mchunks[i]);
	doc_mig_base(m, "pcie", &B->mig.pcie, B->o.migrate_size);
	doc_mig_base(m, "uvm", &B->mig.uvm, B->o.migrate_size);
	arr = rep_arr(m, "runs");
	for (size_t i = 0; i < B->mig.n; i++) {
		double v = mig_ratio(B, &B->mig.rows[i]);

		/* Read-mostly d->h copies nothing: no measure of a migration's speed. */
		if (isfinite(v) && !B->mig.rows[i].read_mostly && (!best || v > bv)) {
			best = &B->mig.rows[i];
			bv = v;
		}
		rep_row(arr, mig_fields, REP_NFIELDS(mig_fields), &B->mig.rows[i], B);
	}
	if (best) {
		struct rep *o = rep_obj(m, "best");

		rep_bytes(o, "chunk", best->chunk);
		rep_str(o, "cache", mig_label(best));
		rep_num(o, "ratio", bv);
	} else {
		rep_null(m, "best");
	}
}

/*
 * What read-mostly saved: its d->h against the warm and cold rows' of the
 * same chunk size (copied into cached host handles, and into new ones).
 */
static void print_read_mostly(const struct bench *B)
{
	const struct mig_row *rm = NULL, *w = NULL, *c = NULL;
	char a[32], x[24], y[24];

	for (size_t i = 0; i < B->mig.n; i++)
		if (B->mig.rows[i].read_mostly)
			rm = &B->mig.rows[i];
	for (size_t i = 0; rm && i < B->mig.n; i++)
		if (B->mig.rows[i].chunk == rm->chunk && !B->mig.rows[i].warm)
			c = &B->mig.rows[i];
		else if (B->mig.rows[i].chunk == rm->chunk && mig_plain(&B->mig.rows[i]))
			w = &B->mig.rows[i];
	if (!rm || !w || !c || !isfinite(rm->d2h))
		return;
	printf("read-mostly, %s chunks: d->h %.2f ms, no copy (%llu chunk copies saved), "
	       "against %.2f ms copied into cached host handles (%s faster) and %.2f ms into new "
	       "ones (%s faster)\n",
	       tool_fmt_size(rm->chunk, a, sizeof(a)), rm->d2h * 1e3,
	       (unsigned long long)rm->copies_saved, w->d2h * 1e3,
	       ratio(w->d2h, rm->d2h, x, sizeof(x)), c->d2h * 1e3, ratio(c->d2h, rm->d2h, y, sizeof(y)));
}

static void migrate_print(struct bench *B, const struct rep *doc)
{
	static const struct rep_view v = {.span = "status", .nkeys = 2};
	const struct mig_base *bl[2] = {&B->mig.pcie, &B->mig.uvm};
	const char *label[2] = {"PCIe copy", "UVM prefetch"};
	uint64_t S = B->o.migrate_size;
	char a[32];

	printf("\n== migrate: vmmx_buf_migrate of %s, device -> host (d->h) and back "
	       "(h->d), median of %u round trips after an untimed one; GB/s; x = migrate "
	       "/ baseline ==\n",
	       tool_fmt_size(S, a, sizeof(a)), B->o.reps);
	for (int k = 0; k < 2; k++) {
		if (isfinite(bl[k]->d2h) && isfinite(bl[k]->h2d))
			printf("%-13s d->h %8.2f GB/s, h->d %8.2f GB/s  (%s)\n", label[k],
			       tool_gbps(S, bl[k]->d2h), tool_gbps(S, bl[k]->h2d), bl[k]->name);
		else
			printf("%-13s not measured: %s\n", label[k],
			       bl[k]->why[0] ? bl[k]->why : "failed");
	}
	printf("(warm-gpu: warm, with VMMX_HOST_CPU_ACCESS=placed: chunks moved to host granted "
	       "to the GPU\n only; the other rows use the default, all: the CPU is granted every "
	       "host chunk;\n read-mostly: warm, advised VMMX_ADVISE_READ_MOSTLY: h->d keeps the "
	       "host copy, d->h maps it\n again without copying)\n");
	bench_table(rep_get(doc, "migrate"), "runs", mig_fields, REP_NFIELDS(mig_fields), &v);
	print_read_mostly(B);
}

const struct bench_section bench_migrate = {
    .name = "migrate", .run = migrate_run, .doc = migrate_doc, .print = migrate_print,
    .targets = migrate_targets,
};
