// SPDX-License-Identifier: MIT
/*
 * vmmx-bench - what libvmmx's operations cost, each figure beside a
 * baseline measured in the same run, and the project's performance targets
 * judged from those ratios.
 *
 * Sections (--only picks some):
 *  ops       per location and chunk size: a grow of one chunk on a fresh
 *            buffer (cache miss: create + map + set access), the shrink
 *            back (unmap + release), the same with the chunk cache on (hit:
 *            map + set access; shrink to the cache: unmap), against raw
 *            cuMemCreate/cuMemMap/cuMemSetAccess/cuMemUnmap/cuMemRelease;
 *  grow      0 -> N in steps: vmmx_buf_resize against cuMemAlloc + copy +
 *            cuMemFree (realloc), time and peak device memory per step;
 *  doubling  NVIDIA's growable-vector pattern, 2 MiB -> 64 GiB, one grow
 *            per doubling: vmmx_buf_resize against one raw handle per grow
 *            (cuMemCreate, cuMemMap, cuMemSetAccess into a reserved range);
 *  copy      vmmx_memcpy against a plain cuMemcpy of the same bytes;
 *  stream    a stream-read kernel over device chunks against cuMemAlloc,
 *            over host chunks against cuMemHostAlloc, and over a
 *            device-first buffer 1.5 times a device limit against the
 *            model (device bytes at the cuMemAlloc rate plus host bytes at
 *            the cuMemHostAlloc rate);
 *  migrate   vmmx_buf_migrate of a whole buffer (default 1 GiB) device ->
 *            host and back, per chunk size (VMMX_CHUNK_MAX) with the chunk
 *            cache warm and cold (VMMX_CACHE_LIMIT=0), against a plain
 *            cuMemcpy of the same bytes between cuMemAlloc and
 *            cuMemHostAlloc memory (the PCIe copy rate) and UVM's
 *            cuMemPrefetchAsync of cuMemAllocManaged memory both ways.
 *
 * Times of operations are medians of --reps repetitions, taken with
 * clock_gettime around each call (migrations too: vmmx_buf_migrate returns
 * when the data has moved); kernel, copy-baseline and prefetch times come
 * from device events, kernels the median of --iters runs after --warmup
 * runs.  Baseline and libvmmx
 * runs alternate so that drift hits both alike.
 *
 * On the sim backend the same flow runs with stand-ins (libvmmx buffers and
 * vmmx_memcpy for the GPU's allocations and kernels, memcpy() for cuMemcpy;
 * no raw driver calls) under a banner: not GPU figures, and the targets are
 * not judged.  Output: tables on stdout, or --json; progress on stderr.
 * Single-threaded.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tools/gpu.h"
#include "tools/opts.h"
#include "tools/report.h"
#include "tools/ctx.h"

#define PROG	      "vmmx-bench"
#define MAX_CHUNKS    16
#define MAX_STEPS     4096
#define MAX_DOUBLINGS 40

enum section { S_OPS, S_GROW, S_DOUBLING, S_SHRINK, S_COPY, S_STREAM, S_MIGRATE, S_COUNT };
static const char *const sec_names[S_COUNT] = {
    "ops", "grow", "doubling", "shrink", "copy", "stream", "migrate",
};

/* The migration target: ranges of at least this many bytes move at >= 0.8x PCIe copy. */
#define MIGRATE_TARGET_MIN   (64ull << 20)
#define MIGRATE_TARGET_RATIO 0.8

struct bopts {
	int only[S_COUNT];
	uint64_t chunks[MAX_CHUNKS];
	int nchunks;
	int loc_device, loc_host;
	unsigned int reps, iters, warmup;
	int warmup_set; /* --warmup given (0 is a valid count) */
	uint64_t grow_max, grow_step, double_max, shrink_size, copy_size, stream_size, host_size,
		limit;
	uint64_t migrate_size, mchunks[MAX_CHUNKS];
	int nmchunks;
	int json, quiet;
	const char *plot;
};

/* ---- results ---- */

struct op_row {
	const char *loc;
	uint64_t size;
	const char *op;
	double vmmx, raw; /* seconds (median); NAN: not measured */
};

struct grow_step {
	uint64_t size;
	double vmmx, realloc;		  /* seconds for this step */
	uint64_t vmmx_used, realloc_used; /* device bytes in use at the step's peak */
	unsigned int vmmx_chunks;
};

struct dbl_row {
	uint64_t size;
	double vmmx, raw;
	unsigned int handles; /* chunks libvmmx added in this grow */
};

/* A shrink that cuts through a chunk: the kept part is copied into a new handle. */
struct shrink_row {
	uint64_t from, kept;
	double secs;          /* median of vmmx_buf_resize(from -> kept) */
	uint64_t dev_after;   /* device bytes the buffer maps afterwards */
	char why[128];        /* "" or why it was not measured */
};

struct copy_row {
	const char *name;
	uint64_t bytes;
	double vmmx, base; /* seconds (median) */
	const char *base_name;
};

struct stream_row {
	const char *name;
	const char *base_name;
	uint64_t size;
	double vmmx, base; /* seconds (median); base NAN for the model row */
	uint64_t dev_bytes, host_bytes;
	double model;  /* seconds; NAN unless the model row */
	char why[256]; /* "" or why it was not measured */
};

/* One migration configuration: chunk size and cache state; seconds are medians. */
struct mig_row {
	uint64_t chunk;
	int warm;		/* the cache holds the chunks (an untimed round trip filled it) */
	int gpu_only;		/* VMMX_HOST_CPU_ACCESS=placed: moved chunks granted to the GPU only */
	int read_mostly;	/* advised VMMX_ADVISE_READ_MOSTLY: d->h maps the kept host copy */
	uint64_t copies_saved;	/* during the timed round trips, from vmmx_stats */
	size_t nchunks;		/* chunks in the buffer */
	double d2h, h2d;	/* seconds per vmmx_buf_migrate of the whole range */
	uint64_t cache_hits;	/* during the timed round trips */
	uint64_t migrations, migrated_bytes; /* likewise, from vmmx_stats */
	char why[256];		/* "" or why it was not measured */
};

/* A baseline of the migrate section: one figure each way. */
struct mig_base {
	const char *name;
	double d2h, h2d; /* seconds (median); NAN: not measured */
	char why[256];
};

struct target {
	char text[96];
	char shown[64];
	double value, threshold;
	int le;	   /* value must be <= threshold (else >=) */
	int known; /* measured */
	char why[128];
};

struct bench {
	struct bopts o;
	struct vmmx_ctx_info info;
	int sim, failed;
	const char *kwhy; /* NULL: kernels run */
	size_t gran;
	struct op_row ops[MAX_CHUNKS * 2 * 9];
	size_t nops;
	struct grow_step grow[MAX_STEPS];
	size_t ngrow;
	double grow_vmmx, grow_realloc;
	uint64_t grow_vmmx_peak, grow_realloc_peak;
	char grow_why[256];
	struct dbl_row dbl[MAX_DOUBLINGS];
	size_t ndbl;
	double dbl_query;   /* seconds of one vmmx_ctx_query (it reads free memory) */
	struct shrink_row shr[3];
	size_t nshr;
	struct copy_row copies[4];
	size_t ncopies;
	char copy_why[256];
	struct stream_row streams[3];
	size_t nstreams;
	struct mig_row mig[MAX_CHUNKS * 2 + 2];
	size_t nmig;
	struct mig_base pcie, uvm;
	struct target targets[8 + MAX_CHUNKS * 2 + 1];
	size_t ntargets;
	int ran[S_COUNT];
};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: " PROG " [OPTIONS]\n"
	    "Costs of libvmmx operations beside same-run baselines, and the performance "
	    "targets.\n\n"
	    "      --only LIST        sections: ops, grow, doubling, shrink, copy, stream, migrate\n"
	    "                         (default all)\n"
	    "      --chunk-sizes LIST ops: chunk sizes (default 2MiB,64MiB,1GiB; sim 2MiB,8MiB)\n"
	    "      --locations LIST   ops: device, host (default both)\n"
	    "      --reps N           ops, doubling, copy, migrate: repetitions, median reported\n"
	    "                         (default 10; sim 5)\n"
	    "      --grow-max SIZE    grow: final size (default 64GiB; sim 32MiB)\n"
	    "      --grow-step SIZE   grow: step (default 1GiB; sim 4MiB)\n"
	    "      --double-max SIZE  doubling: final size (default 64GiB; sim 64MiB)\n"
	    "      --shrink-size SIZE shrink: one-chunk buffer cut to 1/128, 1/8 and 1/2 of it\n"
	    "                         (default 8GiB; sim 16MiB)\n"
	    "      --copy-size SIZE   copy: bytes per copy (default 1GiB; sim 16MiB)\n"
	    "      --stream-size SIZE stream: device-chunk buffer (default 4GiB; sim 16MiB)\n"
	    "      --host-size SIZE   stream: host-chunk buffer (default 2GiB; sim 8MiB)\n"
	    "      --device-limit SIZE  stream: limit for the device-first buffer of 1.5x it\n"
	    "                         (default 4GiB; sim 8MiB)\n"
	    "      --migrate-size SIZE  migrate: bytes moved each way (default 1GiB; sim 16MiB)\n"
	    "      --migrate-chunk LIST migrate: chunk sizes, VMMX_CHUNK_MAX of the buffer's\n"
	    "                         context (default 64MiB,2MiB; sim 8MiB,2MiB)\n"
	    "  -n, --iters N          stream: timed kernel runs (default 20; sim 5)\n"
	    "      --warmup N         stream: warm-up runs (default 3; sim 1)\n"
	    "      --json             JSON instead of tables\n"
	    "      --plot FILE        the grow and doubling curves, drawn by vmmx-plot:\n"
	    "                         FILE.png, .svg or .pdf\n"
	    "  -q, --quiet            no progress on stderr\n"
	    "  -h, --help\n"
	    "      --version\n"
	    "Exit status: 0 done (targets may MISS), 1 a measurement failed, 2 bad usage.\n");
}

/* Counts are bounded so a typo cannot ask for days of runs. */
#define COUNT_MAX 100000

/*
 * The options that take one size: where each goes and its defaults, on the
 * sim and on a GPU, in the order check_sizes() checks them.
 */
#define SIZE_OPT(name, field, sim, gpu) {name, offsetof(struct bopts, field), sim, gpu}
static const struct {
	const char *name; /* without "--" */
	size_t off;	  /* of its uint64_t in struct bopts */
	uint64_t sim, gpu;
} size_opts[] = {
    SIZE_OPT("grow-max", grow_max, 32ull << 20, 64ull << 30),
    SIZE_OPT("grow-step", grow_step, 4ull << 20, 1ull << 30),
    SIZE_OPT("double-max", double_max, 64ull << 20, 64ull << 30),
    SIZE_OPT("copy-size", copy_size, 16ull << 20, 1ull << 30),
    SIZE_OPT("shrink-size", shrink_size, 16ull << 20, 8ull << 30),
    SIZE_OPT("stream-size", stream_size, 16ull << 20, 4ull << 30),
    SIZE_OPT("host-size", host_size, 8ull << 20, 2ull << 30),
    SIZE_OPT("device-limit", limit, 8ull << 20, 4ull << 30),
    SIZE_OPT("migrate-size", migrate_size, 16ull << 20, 1ull << 30),
};
#undef SIZE_OPT
#define N_SIZE_OPTS (sizeof(size_opts) / sizeof(size_opts[0]))

static uint64_t *size_opt(struct bopts *o, size_t i)
{
	return (uint64_t *)((char *)o + size_opts[i].off);
}

static int parse_opts(int argc, char **argv, struct bopts *o)
{
	static const char *const locs[] = {"device", "host"};
	int l[2] = {1, 1}, rc;
	const struct tool_opt opts[] = {
	    tool_opt_names("only", o->only, sec_names, S_COUNT),
	    tool_opt_sizes("chunk-sizes", 0, o->chunks, MAX_CHUNKS, &o->nchunks),
	    tool_opt_names("locations", l, locs, 2),
	    tool_opt_count("reps", 0, &o->reps, 1, COUNT_MAX, NULL),
	    tool_opt_sizes("migrate-chunk", 0, o->mchunks, MAX_CHUNKS, &o->nmchunks),
	    tool_opt_count("iters", 'n', &o->iters, 1, COUNT_MAX, NULL),
	    tool_opt_count("warmup", 0, &o->warmup, 0, COUNT_MAX, &o->warmup_set),
	    tool_opt_json(&o->json),
	    tool_opt_plot(&o->plot),
	    tool_opt_quiet(&o->quiet),
	};
	struct tool_opt tab[sizeof(opts) / sizeof(opts[0]) + N_SIZE_OPTS + 1] = {{0}}, *t = tab;

	/* The table: the options above, one a size (in the list's grammar), the end. */
	for (size_t i = 0; i < sizeof(opts) / sizeof(opts[0]); i++)
		*t++ = opts[i];
	for (size_t i = 0; i < N_SIZE_OPTS; i++)
		*t++ = tool_opt_sizes(size_opts[i].name, 0, size_opt(o, i), 1, NULL);
	for (int s = 0; s < S_COUNT; s++)
		o->only[s] = 1;
	rc = tool_opts_parse(PROG, usage, tab, argc, argv);
	o->loc_device = l[0];
	o->loc_host = l[1];
	return rc;
}

/* Defaults by backend: GPU-sized on cuda, tiny on sim. */
static void defaults(struct bench *B)
{
	struct bopts *o = &B->o;
	int sim = B->sim;

	if (!o->nchunks) {
		o->chunks[0] = 2ull << 20;
		o->chunks[1] = sim ? 8ull << 20 : 64ull << 20;
		o->nchunks = 2;
		if (!sim)
			o->chunks[o->nchunks++] = 1ull << 30;
	}
	if (!o->reps)
		o->reps = sim ? 5 : 10;
	if (!o->iters)
		o->iters = sim ? 5 : 20;
	if (!o->warmup_set)
		o->warmup = sim ? 1 : 3;
	for (size_t i = 0; i < N_SIZE_OPTS; i++)
		if (!*size_opt(o, i))
			*size_opt(o, i) = sim ? size_opts[i].sim : size_opts[i].gpu;
	if (!o->nmchunks) {
		o->mchunks[0] = sim ? 8ull << 20 : 64ull << 20;
		o->mchunks[1] = 2ull << 20;
		o->nmchunks = 2;
	}
}

/* 0, or -1 after "PROG: OPT: SIZE is not a multiple of the granularity (G)". */
static int check_gran(const struct bench *B, const char *opt, uint64_t v)
{
	char a[32], g[32];

	if (!(v % B->gran))
		return 0;
	fprintf(stderr, PROG ": %s: %s is not a multiple of the granularity (%s)\n", opt,
		tool_fmt_size(v, a, sizeof(a)), tool_fmt_size(B->gran, g, sizeof(g)));
	return -1;
}

static int check_sizes(struct bench *B)
{
	struct bopts *o = &B->o;
	char a[32], c[32], g[32];

	tool_fmt_size(B->gran, g, sizeof(g));
	for (int i = 0; i < o->nchunks; i++)
		if (check_gran(B, "--chunk-sizes", o->chunks[i]))
			return -1;
	for (size_t i = 0; i < N_SIZE_OPTS; i++) {
		if (*size_opt(o, i) % B->gran) {
			fprintf(stderr, PROG ": --%s %s: not a multiple of the granularity (%s)\n",
				size_opts[i].name, tool_fmt_size(*size_opt(o, i), a, sizeof(a)), g);
			return -1;
		}
	}
	for (int i = 0; i < o->nmchunks; i++) {
		if (check_gran(B, "--migrate-chunk", o->mchunks[i]))
			return -1;
		/* Whole chunks of that size, so every chunk moved is as big as asked. */
		if (o->migrate_size % o->mchunks[i]) {
			fprintf(stderr,
				PROG
				": --migrate-size %s is not a multiple of --migrate-chunk %s\n",
				tool_fmt_size(o->migrate_size, c, sizeof(c)),
				tool_fmt_size(o->mchunks[i], a, sizeof(a)));
			return -1;
		}
	}
	if (o->grow_step > o->grow_max || o->grow_max / o->grow_step > MAX_STEPS) {
		fprintf(stderr, PROG ": --grow-max/--grow-step: 1 to %d steps\n", MAX_STEPS);
		return -1;
	}
	if (o->double_max < B->gran) {
		fprintf(stderr, PROG ": --double-max: at least the granularity (%s)\n", g);
		return -1;
	}
	return 0;
}

/* ---- small helpers ---- */

static void note(struct bench *B, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct bench *B, const char *fmt, ...)
{
	va_list ap;

	if (B->o.quiet)
		return;
	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

static int vfail(struct bench *B, const char *what, int err)
{
	fprintf(stderr, PROG ": %s: %s: %s\n", what, vmmx_strerror(err), vmmx_last_error());
	B->failed = 1;
	return err;
}

static int gfail(struct bench *B, const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, gpu_why());
	B->failed = 1;
	return -1;
}

/* A row's why and its size, for the why_* helpers. */
#define WHY(r) (r)->why, sizeof((r)->why)

/*
 * Why a row was not measured, into its @why of @len bytes; each returns -1.
 * why_vmmx: libvmmx's last error (vfail or mkctx reported it already);
 * why_gpu: the GPU side's, reported here as @what failing;
 * why_oom: out of memory, reported as in section @sec.
 */
static int why_vmmx(char *why, size_t len)
{
	snprintf(why, len, "%s", vmmx_last_error());
	return -1;
}

static int why_gpu(struct bench *B, char *why, size_t len, const char *what)
{
	snprintf(why, len, "%s", gpu_why());
	return gfail(B, what);
}

static int why_oom(struct bench *B, char *why, size_t len, const char *sec)
{
	snprintf(why, len, "out of memory");
	fprintf(stderr, PROG ": %s: out of memory\n", sec);
	B->failed = 1;
	return -1;
}

/* A buffer of @size under @policy in @ctx, grown to its size; *@buf_p is set once created. */
static int buf_grown(struct vmmx_ctx *ctx, uint64_t size, const char *policy,
		     struct vmmx_buf **buf_p)
{
	int err = vmmx_buf_create(ctx, size, policy, buf_p);

	return err ? err : vmmx_buf_resize(*buf_p, size);
}

/*
 * A context for one measurement.  Sizes are given as byte counts; NULL
 * leaves a setting to the environment or the default.  The device limit is
 * 100% unless given, so a VMMX_DEVICE_LIMIT in the environment does not
 * skew the figures.
 */
/* Set by the migrate section for its row that grants moved chunks to the GPU only. */
static int mkctx_gpu_only;

static int mkctx(struct bench *B, uint64_t chunk, uint64_t chunk_max, int64_t cache, uint64_t limit,
		 struct vmmx_ctx **ctx_p)
{
	static const char *const gpu_only[] = { "VMMX_HOST_CPU_ACCESS=placed", NULL };
	char cs[32], cm[32], cl[32], dl[32];
	struct vmmx_config cfg;
	int err;

	vmmx_config_init(&cfg);
	if (mkctx_gpu_only)
		cfg.vars = gpu_only;
	if (chunk) {
		snprintf(cs, sizeof(cs), "%llu", (unsigned long long)chunk);
		cfg.chunk_size = cs;
	}
	if (chunk_max) {
		snprintf(cm, sizeof(cm), "%llu", (unsigned long long)chunk_max);
		cfg.chunk_max = cm;
	}
	if (cache >= 0) {
		snprintf(cl, sizeof(cl), "%lld", (long long)cache);
		cfg.cache_limit = cl;
	}
	if (limit)
		snprintf(dl, sizeof(dl), "%llu", (unsigned long long)limit);
	else
		snprintf(dl, sizeof(dl), "100%%");
	cfg.device_limit = dl;
	err = tool_ctx_create(&cfg, ctx_p);
	return err ? vfail(B, "vmmx_ctx_create", err) : 0;
}

/* Device bytes in use now: the driver's figure on cuda, the sim's on sim. */
static uint64_t dev_used(struct bench *B, struct vmmx_ctx *ctx)
{
	struct vmmx_ctx_info i = {.size = sizeof(i)};
	uint64_t fr, tot;

	if (!B->sim && !gpu_mem_info(&fr, &tot))
		return tot - fr;
	if (ctx && !vmmx_ctx_query(ctx, &i))
		return i.device_total - i.device_free;
	return 0;
}

static const char *us(double sec, char *buf, size_t len)
{
	if (isfinite(sec))
		snprintf(buf, len, "%.1f", sec * 1e6);
	else
		snprintf(buf, len, "-");
	return buf;
}

static const char *ratio(double a, double b, char *buf, size_t len)
{
	if (isfinite(a) && isfinite(b) && b > 0)
		snprintf(buf, len, "%.2fx", a / b);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* ---- ops ---- */

static void add_op(struct bench *B, const char *loc, uint64_t size, const char *op, double v,
		   double r)
{
	if (B->nops < sizeof(B->ops) / sizeof(B->ops[0]))
		B->ops[B->nops++] = (struct op_row){loc, size, op, v, r};
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

static void section_ops(struct bench *B)
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

/* ---- grow ---- */

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
		B->grow[k].vmmx = gpu_now() - t0;
		if (err) {
			B->grow[k].vmmx = NAN;
			vfail(B, "grow: vmmx_buf_resize", err);
			break;
		}
		B->grow[k].vmmx_used = dev_used(B, ctx) - used0;
		if (!vmmx_stats_get(ctx, &st))
			B->grow[k].vmmx_chunks = (unsigned int)st.device_chunks;
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
		B->grow[k].realloc_used = dev_used(B, rctx) - used0;
		t2 = gpu_now();
		vmmx_buf_destroy(old);
		old = nb;
		nb = NULL;
		B->grow[k].realloc = (t1 - t0) + (gpu_now() - t2);
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
		snprintf(B->grow_why, sizeof(B->grow_why),
			 "realloc not run: its last step holds %s and only %s is free "
			 "(use a smaller --grow-max)",
			 tool_fmt_size(2 * N - step, a, sizeof(a)),
			 tool_fmt_size(fr, b, sizeof(b)));
		note(B, "grow: %s", B->grow_why);
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
		B->grow[k].realloc_used = dev_used(B, NULL) - used0;
		t2 = gpu_now();
		if (gpu_free(&om)) {
			gfail(B, "grow: cuMemFree");
			break;
		}
		B->grow[k].realloc = (t1 - t0) + (gpu_now() - t2);
		om = nm;
		memset(&nm, 0, sizeof(nm));
	}
	if (gpu_free(&nm) || gpu_free(&om))
		gfail(B, "grow: cuMemFree");
}

static void grow_totals(struct bench *B)
{
	B->grow_vmmx = B->grow_realloc = 0;
	B->grow_vmmx_peak = B->grow_realloc_peak = 0;
	for (size_t k = 0; k < B->ngrow; k++) {
		B->grow_vmmx += B->grow[k].vmmx;
		B->grow_realloc += B->grow[k].realloc;
		if (B->grow[k].vmmx_used > B->grow_vmmx_peak)
			B->grow_vmmx_peak = B->grow[k].vmmx_used;
		if (B->grow[k].realloc_used > B->grow_realloc_peak)
			B->grow_realloc_peak = B->grow[k].realloc_used;
	}
}

static void section_grow(struct bench *B)
{
	uint64_t step = B->o.grow_step, N = B->o.grow_max / step * step;
	size_t n = (size_t)(N / step);
	struct vmmx_ctx *ctx = NULL;
	char a[32], b[32];

	B->ngrow = n;
	for (size_t k = 0; k < n; k++) {
		B->grow[k] =
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

/* ---- doubling ---- */

/*
 * One raw run: one handle per doubling, created, mapped and granted into
 * the reserved @va (timed into @rv), then torn down untimed in reverse
 * order.  0, or -1 after the failure is noted.
 */
static int dbl_raw_run(struct bench *B, void *va, unsigned int r, double *rv)
{
	unsigned int reps = B->o.reps;
	uint64_t h[MAX_DOUBLINGS];
	size_t made = 0, mapped = 0, k, n = B->ndbl;

	for (k = 0; k < n; k++) {
		uint64_t off = k ? B->dbl[k - 1].size : 0, add = B->dbl[k].size - off;
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
		uint64_t off = j ? B->dbl[j - 1].size : 0;

		if (gpu_vmm_unmap((char *)va + off, B->dbl[j].size - off))
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
	for (size_t k = 0; k < B->ndbl; k++) {
		double t0 = gpu_now();

		err = vmmx_buf_resize(buf, B->dbl[k].size);
		vv[k * reps + r] = gpu_now() - t0;
		if (err) {
			vfail(B, "doubling: vmmx_buf_resize", err);
			break;
		}
		if (!vmmx_stats_get(ctx, &st)) {
			B->dbl[k].handles = (unsigned int)(st.device_chunks - chunks);
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

	B->dbl_query = NAN;
	if (!reps)
		return;
	for (unsigned int r = 0; r < reps; r++) {
		struct vmmx_ctx_info ci = {.size = sizeof(ci)};
		double t0 = gpu_now();

		vmmx_ctx_query(ctx, &ci);
		tmp[r] = gpu_now() - t0;
	}
	B->dbl_query = gpu_median(tmp, reps);
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

static void section_doubling(struct bench *B)
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
		B->dbl[n++] = (struct dbl_row){.size = s, .vmmx = NAN, .raw = NAN};
	B->ndbl = n;
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
		B->dbl[k].vmmx = gpu_median(vv + k * reps, reps);
		if (va)
			B->dbl[k].raw = gpu_median(rv + k * reps, reps);
	}
	dbl_query(B, ctx, rv);
out:
	vmmx_ctx_destroy(ctx);
	if (va && gpu_va_free(va, max))
		gfail(B, "doubling: cuMemAddressFree");
	free(vv);
	free(rv);
}

/* ---- shrink ---- */

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

static void section_shrink(struct bench *B)
{
	static const unsigned int parts[] = { 128, 8, 2 };
	uint64_t S = B->o.shrink_size / B->gran * B->gran;
	char a[32];

	B->nshr = 0;
	note(B, "shrink: a %s one-chunk device buffer cut to 1/128, 1/8 and 1/2, %u repetitions",
	     tool_fmt_size(S, a, sizeof(a)), B->o.reps);
	for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++) {
		uint64_t kept = S / parts[k] / B->gran * B->gran;

		if (kept < B->gran || kept >= S)
			continue;
		shrink_one(B, S, kept, &B->shr[B->nshr++]);
	}
}

/* ---- copy ---- */

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
	B->copies[B->ncopies++] =
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

static void section_copy(struct bench *B)
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

/* ---- stream ---- */

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
	B->streams[0] = (struct stream_row){.name = "device chunks (policy device)",
					    .base_name = "cudaMalloc",
					    .size = B->o.stream_size};
	B->streams[1] = (struct stream_row){.name = "host chunks (policy host)",
					    .base_name = "cudaHostAlloc",
					    .size = B->o.host_size};
	B->streams[2] = (struct stream_row){
	    .name = "device-first, 1.5x the device limit", .base_name = "model", .size = big};
	B->nstreams = 3;
	for (int i = 0; i < 3; i++) {
		B->streams[i].vmmx = B->streams[i].base = B->streams[i].model = NAN;
		if (B->kwhy)
			snprintf(B->streams[i].why, sizeof(B->streams[i].why), "%s", B->kwhy);
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
	struct stream_row *r = &B->streams[i];
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
	struct stream_row *r = &B->streams[i];
	struct stream_base sbase = {0};
	struct vmmx_buf *vb = NULL;
	char a[32];
	void *bp;
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
	struct stream_row *r = &B->streams[2];
	struct vmmx_residency res;
	struct vmmx_buf *vb = NULL;
	double hbm = (double)B->streams[0].size / B->streams[0].base;
	double pcie = (double)B->streams[1].size / B->streams[1].base;
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

static void section_stream(struct bench *B)
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

/* ---- migrate ---- */

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
	struct mig_base *b = &B->pcie;
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
			return why_gpu(B, WHY(&B->pcie), "migrate: PCIe copy baseline");
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
		return why_vmmx(WHY(&B->pcie));
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
	struct mig_base *b = &B->pcie;
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

/*
 * UVM: cuMemAllocManaged of the range (refused beyond free device memory
 * less the margin), written by the GPU, then cuMemPrefetchAsync to host
 * memory and back to the device, timed with device events, median of
 * --reps after one warm-up round trip; the data is checked at the end.
 */
static void migrate_uvm(struct bench *B)
{
	struct mig_base *b = &B->uvm;
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
			if (!i && !k && !(B->sim && mkctx_gpu_only) &&
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

static void section_migrate(struct bench *B)
{
	B->pcie = (struct mig_base){.d2h = NAN, .h2d = NAN};
	B->uvm = (struct mig_base){.d2h = NAN, .h2d = NAN};
	/* Baselines first, each freed before the next: the managed-memory rule reads
	 * the free memory with nothing else of ours allocated. */
	migrate_pcie(B);
	migrate_uvm(B);
	B->nmig = 0;
	for (int c = 0; c < B->o.nmchunks; c++)
		for (int warm = 1; warm >= 0; warm--)
			migrate_vmmx(B, B->o.mchunks[c], warm, 0, &B->mig[B->nmig++]);
	/* The first chunk size again, warm, with the chunks moved to host granted
	 * to the GPU only (VMMX_HOST_CPU_ACCESS=placed): granting the CPU is most
	 * of the cost of mapping host memory. */
	if (B->o.nmchunks) {
		mkctx_gpu_only = 1;
		migrate_vmmx(B, B->o.mchunks[0], 1, 0, &B->mig[B->nmig]);
		B->mig[B->nmig++].gpu_only = 1;
		mkctx_gpu_only = 0;
		/* And warm again with the range advised read-mostly: d->h maps the
		 * host copies kept since h->d, copying nothing. */
		migrate_vmmx(B, B->o.mchunks[0], 1, 1, &B->mig[B->nmig++]);
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
	double a = B->pcie.d2h / r->d2h, b = B->pcie.h2d / r->h2d;

	if (!isfinite(a) || !isfinite(b))
		return NAN;
	return a < b ? a : b;
}

/* ---- targets ---- */

static void add_target(struct bench *B, const char *text, double value, double threshold, int le,
		       const char *shown, const char *why)
{
	struct target *t = &B->targets[B->ntargets++];

	snprintf(t->text, sizeof(t->text), "%s", text);
	snprintf(t->shown, sizeof(t->shown), "%s", shown ? shown : "-");
	snprintf(t->why, sizeof(t->why), "%s", why ? why : "");
	t->value = value;
	t->threshold = threshold;
	t->le = le;
	t->known = isfinite(value);
}

/* What stream row @i is judged against: its baseline, or for row 2 the model. */
static double stream_ref(const struct stream_row *r, size_t i)
{
	return i == 2 ? r->model : r->base;
}

static void targets_stream(struct bench *B)
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
		const struct stream_row *s = &B->streams[i];
		double v = stream_ref(s, i) / s->vmmx;

		snprintf(shown, sizeof(shown), "%.3fx", v);
		add_target(B, t[i].text, v, t[i].threshold, 0, shown, s->why);
	}
}

static void targets_grow(struct bench *B)
{
	double sp = B->grow_realloc / B->grow_vmmx;
	uint64_t N = B->grow[B->ngrow - 1].size, step = B->o.grow_step;
	char text[96], shown[64], a[32], b[32], c[32];

	snprintf(text, sizeof(text), "grow %s -> %s in %s steps >= 50x faster than realloc",
		 tool_fmt_size(step, a, sizeof(a)), tool_fmt_size(N, b, sizeof(b)),
		 tool_fmt_size(step, c, sizeof(c)));
	snprintf(shown, sizeof(shown), "%.1fx", sp);
	add_target(B, text, sp, 50, 0, shown, B->grow_why[0] ? B->grow_why : NULL);
	snprintf(text, sizeof(text), "grow peak device memory <= N + step (%s)",
		 tool_fmt_size(N + step, a, sizeof(a)));
	add_target(B, text, isfinite(B->grow_vmmx) ? (double)B->grow_vmmx_peak : NAN,
		   (double)(N + step), 1, tool_fmt_size(B->grow_vmmx_peak, b, sizeof(b)), NULL);
}

static void targets_doubling(struct bench *B)
{
	char text[96], shown[64], a[32], b[32], c[32];
	double worst = -1;
	uint64_t at = 0;

	for (size_t k = 0; k < B->ndbl; k++) {
		double r = B->dbl[k].vmmx / B->dbl[k].raw;

		if (!isfinite(r)) {
			worst = NAN;
			break;
		}
		if (r > worst) {
			worst = r;
			at = B->dbl[k].size;
		}
	}
	snprintf(text, sizeof(text),
		 "doubling %s -> %s, default settings: every grow <= 1.1x raw one-handle",
		 tool_fmt_size(B->dbl[0].size, a, sizeof(a)),
		 tool_fmt_size(B->dbl[B->ndbl - 1].size, b, sizeof(b)));
	snprintf(shown, sizeof(shown), "worst %.2fx (at %s)", worst,
		 tool_fmt_size(at, c, sizeof(c)));
	add_target(B, text, worst, 1.1, 1, shown, B->sim ? "sim: no raw driver calls" : NULL);
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
	if (!isfinite(B->pcie.d2h) || !isfinite(B->pcie.h2d))
		return B->pcie.why[0] ? B->pcie.why : "no PCIe copy baseline";
	return NULL;
}

/* The target, judged on the default settings (the first chunk size, warm), then a line a run. */
static void targets_migrate(struct bench *B)
{
	char text[96], shown[64], a[32], b[32], small[96];
	const char *why = migrate_unjudged(B, small, sizeof(small));
	const struct mig_row *best = NULL;
	double bv = NAN;

	for (size_t i = 0; i < B->nmig && !best; i++)
		if (mig_plain(&B->mig[i]) && B->mig[i].chunk == B->o.mchunks[0]) {
			best = &B->mig[i];
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
	for (size_t i = 0; i < B->nmig; i++) {
		const struct mig_row *r = &B->mig[i];
		double v = mig_ratio(B, r);
		char x[24], y[24];

		snprintf(text, sizeof(text), "  ... %s, %s chunks, cache %s",
			 tool_fmt_size(B->o.migrate_size, a, sizeof(a)),
			 tool_fmt_size(r->chunk, b, sizeof(b)), mig_label(r));
		snprintf(shown, sizeof(shown), "d->h %s, h->d %s",
			 ratio(B->pcie.d2h, r->d2h, x, sizeof(x)),
			 ratio(B->pcie.h2d, r->h2d, y, sizeof(y)));
		add_target(B, text, why ? NAN : v, MIGRATE_TARGET_RATIO, 0, shown,
			   why ? why : r->why[0] ? r->why : NULL);
	}
}

static void make_targets(struct bench *B)
{
	if (B->ran[S_STREAM])
		targets_stream(B);
	if (B->ran[S_GROW] && B->ngrow)
		targets_grow(B);
	if (B->ran[S_DOUBLING] && B->ndbl)
		targets_doubling(B);
	if (B->ran[S_MIGRATE] && B->nmig)
		targets_migrate(B);
}

static const char *verdict(const struct bench *B, const struct target *t)
{
	if (!t->known)
		return "n/a";
	if (B->sim)
		return "n/a (sim)";
	return (t->le ? t->value <= t->threshold : t->value >= t->threshold) ? "PASS" : "MISS";
}

/* ---- output ---- */

static const char SIM_BANNER[] = "==============================================================\n"
				 " SIMULATED backend: these are NOT GPU figures, and targets are\n"
				 " not judged.  Kernels are stood in for by vmmx_memcpy copies\n"
				 " timed with clock_gettime, cuMemAlloc by libvmmx buffers, and\n"
				 " cuMemcpy by memcpy(); there are no raw driver calls.\n"
				 "==============================================================\n";

/* The grow curve: cumulative time against size, libvmmx beside realloc. */
static void chart_grow(struct bench *B, struct rep *doc)
{
	struct rep *c, *sv, *sr;
	double cv = 0, cr = 0;
	char title[192];

	snprintf(title, sizeof(title), "vmmx-bench: growing a buffer on %s%s",
		 B->info.device_name, B->sim ? " (SIMULATED)" : "");
	c = rep_chart(doc, "grow", title, "buffer size", "B", 0, "cumulative time", "ms");
	sv = rep_series(c, "vmmx_buf_resize");
	sr = rep_series(c, "cuMemAlloc + copy + cuMemFree");
	rep_point(sv, 0, 0);
	rep_point(sr, 0, 0);
	for (size_t k = 0; k < B->ngrow; k++) {
		cv += B->grow[k].vmmx;
		cr += B->grow[k].realloc;
		rep_point(sv, (double)B->grow[k].size, cv * 1e3);
		rep_point(sr, (double)B->grow[k].size, cr * 1e3);
	}
}

/* One grow per doubling: sizes double, so the x axis is log 2. */
static void chart_doubling(struct bench *B, struct rep *doc)
{
	struct rep *c, *sv, *sr;
	char title[192];

	snprintf(title, sizeof(title), "vmmx-bench: one grow per doubling on %s%s",
		 B->info.device_name, B->sim ? " (SIMULATED)" : "");
	c = rep_chart(doc, "doubling", title, "buffer size after the grow", "B", 1,
		      "time of the grow", "us");
	sv = rep_series(c, "vmmx_buf_resize");
	sr = rep_series(c, "cuMemCreate + cuMemMap + cuMemSetAccess");
	for (size_t k = 0; k < B->ndbl; k++) {
		rep_point(sv, (double)B->dbl[k].size, B->dbl[k].vmmx * 1e6);
		rep_point(sr, (double)B->dbl[k].size, B->dbl[k].raw * 1e6);
	}
}

/* ---- the results: one tree for --json, --plot and the tables ---- */

static void doc_head(struct bench *B, struct rep *doc)
{
	struct rep *o;

	o = rep_doc_head(doc, PROG, B->info.backend, B->sim,
			 "simulated backend: not GPU figures; targets not judged", B->info.device,
			 B->info.device_name);
	rep_bytes(o, "granularity", B->gran);
	o = rep_obj(doc, "timing");
	rep_str(o, "figure", "median");
	rep_int(o, "reps", B->o.reps);
	rep_int(o, "iters", B->o.iters);
	rep_int(o, "warmup", B->o.warmup);
}

static void doc_ops(struct bench *B, struct rep *doc)
{
	struct rep *arr = rep_arr(doc, "ops");

	for (size_t i = 0; i < B->nops; i++) {
		const struct op_row *r = &B->ops[i];
		struct rep *o = rep_obj(arr, NULL);

		rep_str(o, "location", r->loc);
		rep_bytes(o, "chunk", r->size);
		rep_str(o, "op", r->op);
		rep_num(o, "vmmx_s", r->vmmx);
		rep_num(o, "raw_s", r->raw);
		rep_num(o, "ratio", r->vmmx / r->raw);
	}
}

static void doc_grow(struct bench *B, struct rep *doc)
{
	struct rep *g = rep_obj(doc, "grow"), *arr;

	rep_bytes(g, "step", B->o.grow_step);
	arr = rep_arr(g, "steps");
	for (size_t k = 0; k < B->ngrow; k++) {
		const struct grow_step *s = &B->grow[k];
		struct rep *o = rep_obj(arr, NULL);

		rep_bytes(o, "size", s->size);
		rep_num(o, "vmmx_s", s->vmmx);
		rep_num(o, "realloc_s", s->realloc);
		rep_num(o, "speedup", s->realloc / s->vmmx);
		rep_bytes(o, "vmmx_used", s->vmmx_used);
		rep_bytes(o, "realloc_used", isfinite(s->realloc) ? s->realloc_used : UINT64_MAX);
		rep_int(o, "vmmx_chunks", s->vmmx_chunks);
	}
	rep_num(g, "vmmx_s", B->grow_vmmx);
	rep_num(g, "realloc_s", B->grow_realloc);
	rep_num(g, "speedup", B->grow_realloc / B->grow_vmmx);
	rep_bytes(g, "vmmx_peak", B->grow_vmmx_peak);
	rep_bytes(g, "realloc_peak", isfinite(B->grow_realloc) ? B->grow_realloc_peak : UINT64_MAX);
	rep_str(g, "note", B->grow_why);
}

static void doc_doubling(struct bench *B, struct rep *doc)
{
	struct rep *arr = rep_arr(doc, "doubling");

	for (size_t k = 0; k < B->ndbl; k++) {
		const struct dbl_row *r = &B->dbl[k];
		struct rep *o = rep_obj(arr, NULL);

		rep_bytes(o, "size", r->size);
		rep_num(o, "vmmx_s", r->vmmx);
		rep_num(o, "raw_s", r->raw);
		rep_num(o, "ratio", r->vmmx / r->raw);
		rep_int(o, "handles", r->handles);
	}
}

static void doc_shrink(struct bench *B, struct rep *doc)
{
	struct rep *arr = rep_arr(doc, "shrink");

	for (size_t k = 0; k < B->nshr; k++) {
		const struct shrink_row *r = &B->shr[k];
		struct rep *o = rep_obj(arr, NULL);

		rep_bytes(o, "from", r->from);
		rep_bytes(o, "kept", r->kept);
		rep_num(o, "shrink_s", r->secs);
		rep_num(o, "us_per_gib_kept", r->secs * 1e6 / ((double)r->kept / (1ull << 30)));
		rep_bytes(o, "device_after", r->dev_after);
		rep_str(o, "note", r->why);
		if (!isfinite(r->secs))
			rep_table_only(rep_strf(o, "status", "not measured: %s", r->why));
	}
}

static void doc_copy(struct bench *B, struct rep *doc)
{
	struct rep *arr = rep_arr(doc, "copy");

	for (size_t i = 0; i < B->ncopies; i++) {
		const struct copy_row *r = &B->copies[i];
		struct rep *o = rep_obj(arr, NULL);

		rep_str(o, "copy", r->name);
		rep_bytes(o, "bytes", r->bytes);
		rep_num(o, "vmmx_s", r->vmmx);
		rep_num(o, "baseline_s", r->base);
		rep_num(o, "vmmx_gbps", tool_gbps(r->bytes, r->vmmx));
		rep_num(o, "baseline_gbps", tool_gbps(r->bytes, r->base));
		rep_num(o, "ratio", r->base / r->vmmx);
		rep_str(o, "baseline", r->base_name);
	}
}

static void doc_stream(struct bench *B, struct rep *doc)
{
	struct rep *arr = rep_arr(doc, "stream");

	for (size_t i = 0; i < B->nstreams; i++) {
		const struct stream_row *r = &B->streams[i];
		double bt = stream_ref(r, i);
		struct rep *o = rep_obj(arr, NULL);

		rep_str(o, "buffer", r->name);
		rep_bytes(o, "size", r->size);
		rep_str(o, "baseline", r->base_name);
		rep_num(o, "vmmx_s", r->vmmx);
		rep_num(o, "baseline_s", bt);
		rep_num(o, "vmmx_gbps", tool_gbps(r->size, r->vmmx));
		rep_num(o, "baseline_gbps", tool_gbps(r->size, bt));
		rep_num(o, "ratio", bt / r->vmmx);
		rep_bytes(o, "device_bytes", r->dev_bytes);
		rep_bytes(o, "host_bytes", r->host_bytes);
		rep_str(o, "why", r->why);
		if (!isfinite(r->vmmx))
			rep_table_only(rep_strf(o, "status", "not measured: %s",
						r->why[0] ? r->why : "failed"));
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

static void doc_mig_run(struct bench *B, struct rep *arr, const struct mig_row *r)
{
	uint64_t S = B->o.migrate_size;
	struct rep *o = rep_obj(arr, NULL);

	rep_bytes(o, "chunk", r->chunk);
	rep_str(o, "cache", mig_label(r));
	rep_int(o, "chunks", (long long)r->nchunks);
	rep_num(o, "d2h_s", r->d2h);
	rep_num(o, "h2d_s", r->h2d);
	rep_num(o, "d2h_gbps", tool_gbps(S, r->d2h));
	rep_num(o, "h2d_gbps", tool_gbps(S, r->h2d));
	rep_num(o, "d2h_vs_pcie", B->pcie.d2h / r->d2h);
	rep_num(o, "h2d_vs_pcie", B->pcie.h2d / r->h2d);
	rep_num(o, "d2h_vs_uvm", B->uvm.d2h / r->d2h);
	rep_num(o, "h2d_vs_uvm", B->uvm.h2d / r->h2d);
	rep_num(o, "ratio", mig_ratio(B, r));
	rep_bytes(o, "cache_hits", r->cache_hits);
	rep_bytes(o, "migrations", r->migrations);
	rep_bytes(o, "migrated_bytes", r->migrated_bytes);
	rep_bytes(o, "copies_saved", r->copies_saved);
	rep_str(o, "why", r->why);
	if (!isfinite(r->d2h) || !isfinite(r->h2d))
		rep_table_only(rep_strf(o, "status", "not measured: %s", r->why[0] ? r->why : "failed"));
}

static void doc_migrate(struct bench *B, struct rep *doc)
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
	doc_mig_base(m, "pcie", &B->pcie, B->o.migrate_size);
	doc_mig_base(m, "uvm", &B->uvm, B->o.migrate_size);
	arr = rep_arr(m, "runs");
	for (size_t i = 0; i < B->nmig; i++) {
		double v = mig_ratio(B, &B->mig[i]);

		/* Read-mostly d->h copies nothing: no measure of a migration's speed. */
		if (isfinite(v) && !B->mig[i].read_mostly && (!best || v > bv)) {
			best = &B->mig[i];
			bv = v;
		}
		doc_mig_run(B, arr, &B->mig[i]);
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

static void doc_targets(struct bench *B, struct rep *doc)
{
	struct rep *arr = rep_arr(doc, "targets");

	for (size_t i = 0; i < B->ntargets; i++) {
		const struct target *t = &B->targets[i];
		const char *v = verdict(B, t);
		struct rep *o = rep_obj(arr, NULL);

		rep_str(o, "target", t->text);
		rep_num(o, "value", t->value);
		rep_num(o, "threshold", t->threshold);
		rep_str(o, "compare", t->le ? "<=" : ">=");
		rep_str(o, "verdict", !strcmp(v, "PASS")   ? "PASS"
				      : !strcmp(v, "MISS") ? "MISS"
				      : B->sim		   ? "sim"
							   : "n/a");
		rep_str(o, "why", t->why);
		/* The table's cells: the ratio as shown, the verdict as read. */
		rep_table_only(rep_str(o, "shown", t->known ? t->shown : "-"));
		rep_table_only(rep_strf(o, "judged", "%s%s%s%s", v, !t->known && t->why[0] ? "  (" : "",
			 !t->known && t->why[0] ? t->why : "", !t->known && t->why[0] ? ")" : ""));
	}
}

static struct rep *build_doc(struct bench *B)
{
	struct rep *doc = rep_new();

	doc_head(B, doc);
	if (B->ran[S_OPS])
		doc_ops(B, doc);
	if (B->ran[S_GROW])
		doc_grow(B, doc);
	if (B->ran[S_DOUBLING])
		doc_doubling(B, doc);
	if (B->ran[S_SHRINK])
		doc_shrink(B, doc);
	if (B->ran[S_COPY])
		doc_copy(B, doc);
	if (B->ran[S_STREAM])
		doc_stream(B, doc);
	if (B->ran[S_MIGRATE])
		doc_migrate(B, doc);
	doc_targets(B, doc);
	if (B->ran[S_GROW] && B->ngrow)
		chart_grow(B, doc);
	if (B->ran[S_DOUBLING] && B->ndbl)
		chart_doubling(B, doc);
	return doc;
}

/* The tables: views of the rows in the results tree, one per section. */
#define COLS(c) .cols = c, .ncols = sizeof(c) / sizeof(c[0])

static const struct rep_col ops_cols[] = {
    {.key = "location", .head = "loc"},
    {.key = "chunk", .head = "chunk", .fmt = REP_F_SIZE},
    {.key = "op", .head = "operation"},
    {.key = "vmmx_s", .head = "vmmx", .fmt = REP_F_US, .prec = 1, .right = 1},
    {.key = "raw_s", .head = "raw", .fmt = REP_F_US, .prec = 1, .right = 1},
    {.key = "ratio", .head = "ratio", .fmt = REP_F_X, .prec = 2, .right = 1},
};
static const struct rep_col grow_cols[] = {
    {.key = "size", .head = "size", .fmt = REP_F_SIZE},
    {.key = "vmmx_s", .head = "vmmx us", .fmt = REP_F_US, .prec = 1, .right = 1},
    {.key = "realloc_s", .head = "realloc us", .fmt = REP_F_US, .prec = 1, .right = 1},
    {.key = "speedup", .head = "speedup", .fmt = REP_F_X, .prec = 2, .right = 1},
    {.key = "vmmx_used", .head = "vmmx peak", .fmt = REP_F_SIZE, .right = 1},
    {.key = "realloc_used", .head = "realloc peak", .fmt = REP_F_SIZE, .right = 1},
    {.key = "vmmx_chunks", .head = "chunks", .fmt = REP_F_INT, .right = 1},
};
static const struct rep_col dbl_cols[] = {
    {.key = "size", .head = "size", .fmt = REP_F_SIZE},
    {.key = "vmmx_s", .head = "vmmx us", .fmt = REP_F_US, .prec = 1, .right = 1},
    {.key = "raw_s", .head = "raw us", .fmt = REP_F_US, .prec = 1, .right = 1},
    {.key = "ratio", .head = "ratio", .fmt = REP_F_X, .prec = 2, .right = 1},
    {.key = "handles", .head = "handles", .fmt = REP_F_INT, .right = 1},
};
static const struct rep_col shrink_cols[] = {
    {.key = "from", .head = "from", .fmt = REP_F_SIZE},
    {.key = "kept", .head = "kept", .fmt = REP_F_SIZE},
    {.key = "shrink_s", .head = "shrink us", .fmt = REP_F_US, .prec = 1, .right = 1},
    {.key = "us_per_gib_kept", .head = "us per GiB kept", .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {.key = "device_after", .head = "device after", .fmt = REP_F_SIZE, .right = 1},
};
static const struct rep_col copy_cols[] = {
    {.key = "copy", .head = "copy"},
    {.key = "bytes", .head = "size", .fmt = REP_F_SIZE},
    {.key = "vmmx_gbps", .head = "vmmx", .fmt = REP_F_FIX, .prec = 2, .right = 1},
    {.key = "baseline_gbps", .head = "baseline", .fmt = REP_F_FIX, .prec = 2, .right = 1},
    {.key = "ratio", .head = "ratio", .fmt = REP_F_X, .prec = 2, .right = 1},
    {.key = "baseline", .head = "baseline"},
};
static const struct rep_col stream_cols[] = {
    {.key = "buffer", .head = "buffer"},
    {.key = "size", .head = "size", .fmt = REP_F_SIZE},
    {.key = "vmmx_gbps", .head = "vmmx", .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {.key = "baseline", .head = "baseline"},
    {.key = "baseline_gbps", .head = "GB/s", .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {.key = "ratio", .head = "ratio", .fmt = REP_F_X, .prec = 2, .right = 1},
    {.key = "device_bytes", .head = "device", .fmt = REP_F_SIZE, .right = 1},
    {.key = "host_bytes", .head = "host", .fmt = REP_F_SIZE, .right = 1},
};
static const struct rep_col mig_cols[] = {
    {.key = "chunk", .head = "chunk", .fmt = REP_F_SIZE},
    {.key = "cache", .head = "cache"},
    {.key = "chunks", .head = "chunks", .fmt = REP_F_INT, .right = 1},
    {.key = "d2h_gbps", .head = "d->h GB/s", .fmt = REP_F_FIX, .prec = 2, .right = 1},
    {.key = "d2h_vs_pcie", .head = "x PCIe", .fmt = REP_F_X, .prec = 2, .right = 1},
    {.key = "d2h_vs_uvm", .head = "x UVM", .fmt = REP_F_X, .prec = 2, .right = 1},
    {.key = "h2d_gbps", .head = "h->d GB/s", .fmt = REP_F_FIX, .prec = 2, .right = 1},
    {.key = "h2d_vs_pcie", .head = "x PCIe", .fmt = REP_F_X, .prec = 2, .right = 1},
    {.key = "h2d_vs_uvm", .head = "x UVM", .fmt = REP_F_X, .prec = 2, .right = 1},
    {.key = "cache_hits", .head = "cache hits", .fmt = REP_F_INT, .right = 1},
};
static const struct rep_col target_cols[] = {
    {.key = "target", .head = "target"},
    {.key = "shown", .head = "this run"},
    {.key = "judged", .head = "verdict"},
};

static void table(const struct rep *doc, const char *key, const struct rep_view *v)
{
	const struct rep *rows = rep_get(doc, key);

	if (rows)
		rep_table(stdout, rows, v);
}

static void print_grow(struct bench *B, const struct rep *doc)
{
	static const struct rep_view v = {COLS(grow_cols)};
	char a[32], b[32], c[32], d[32], e[32];

	printf("\n== grow: 0 -> %s in %s steps; vmmx_buf_resize against cuMemAlloc + copy "
	       "+ cuMemFree (realloc); microseconds; speedup = realloc / vmmx ==\n",
	       tool_fmt_size(B->o.grow_max / B->o.grow_step * B->o.grow_step, a, sizeof(a)),
	       tool_fmt_size(B->o.grow_step, b, sizeof(b)));
	if (B->grow_why[0])
		printf("(%s)\n", B->grow_why);
	table(rep_get(doc, "grow"), "steps", &v);
	printf("total: vmmx %s us, realloc %s us, speedup %s; peak device memory: vmmx %s, "
	       "realloc %s\n",
	       us(B->grow_vmmx, a, sizeof(a)), us(B->grow_realloc, b, sizeof(b)),
	       ratio(B->grow_realloc, B->grow_vmmx, c, sizeof(c)),
	       tool_fmt_size(B->grow_vmmx_peak, d, sizeof(d)),
	       isfinite(B->grow_realloc) ? tool_fmt_size(B->grow_realloc_peak, e, sizeof(e)) : "-");
}

/*
 * What read-mostly saved: its d->h against the warm and cold rows' of the
 * same chunk size (copied into cached host handles, and into new ones).
 */
static void print_read_mostly(const struct bench *B)
{
	const struct mig_row *rm = NULL, *w = NULL, *c = NULL;
	char a[32], x[24], y[24];

	for (size_t i = 0; i < B->nmig; i++)
		if (B->mig[i].read_mostly)
			rm = &B->mig[i];
	for (size_t i = 0; rm && i < B->nmig; i++)
		if (B->mig[i].chunk == rm->chunk && !B->mig[i].warm)
			c = &B->mig[i];
		else if (B->mig[i].chunk == rm->chunk && mig_plain(&B->mig[i]))
			w = &B->mig[i];
	if (!rm || !w || !c || !isfinite(rm->d2h))
		return;
	printf("read-mostly, %s chunks: d->h %.2f ms, no copy (%llu chunk copies saved), "
	       "against %.2f ms copied into cached host handles (%s faster) and %.2f ms into new "
	       "ones (%s faster)\n",
	       tool_fmt_size(rm->chunk, a, sizeof(a)), rm->d2h * 1e3,
	       (unsigned long long)rm->copies_saved, w->d2h * 1e3,
	       ratio(w->d2h, rm->d2h, x, sizeof(x)), c->d2h * 1e3, ratio(c->d2h, rm->d2h, y, sizeof(y)));
}

static void print_migrate(struct bench *B, const struct rep *doc)
{
	static const struct rep_view v = {COLS(mig_cols), .span = "status", .nkeys = 2};
	const struct mig_base *bl[2] = {&B->pcie, &B->uvm};
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
	table(rep_get(doc, "migrate"), "runs", &v);
	print_read_mostly(B);
}

static void print_tables(struct bench *B, const struct rep *doc)
{
	static const struct rep_view ops = {COLS(ops_cols)}, dbl = {COLS(dbl_cols)},
				     shr = {COLS(shrink_cols), .span = "status", .nkeys = 2},
				     cpy = {COLS(copy_cols)},
				     str = {COLS(stream_cols), .span = "status", .nkeys = 2},
				     tgt = {COLS(target_cols)};
	char a[32];

	if (B->sim)
		fputs(SIM_BANNER, stdout);
	printf("backend %s, device %d: %s, granularity %s\n", B->info.backend, B->info.device,
	       B->info.device_name, tool_fmt_size(B->gran, a, sizeof(a)));
	if (B->ran[S_OPS]) {
		printf("\n== ops: cost of one operation, median of %u, microseconds; ratio = "
		       "vmmx / raw ==\n",
		       B->o.reps);
		table(doc, "ops", &ops);
	}
	if (B->ran[S_GROW])
		print_grow(B, doc);
	if (B->ran[S_DOUBLING]) {
		printf("\n== doubling: one grow per doubling, default settings, median of %u; "
		       "microseconds; ratio = vmmx / raw (cuMemCreate + cuMemMap + cuMemSetAccess "
		       "of one handle) ==\n",
		       B->o.reps);
		table(doc, "doubling", &dbl);
		printf("(one vmmx_ctx_query, which reads the device's free memory as a grow may: "
		       "%s us)\n",
		       us(B->dbl_query, a, sizeof(a)));
	}
	if (B->ran[S_SHRINK]) {
		printf("\n== shrink: a one-chunk device buffer cut through, default settings, median "
		       "of %u; the kept part is copied into a new handle, the rest given back ==\n",
		       B->o.reps);
		table(doc, "shrink", &shr);
	}
	if (B->ran[S_COPY]) {
		printf("\n== copy: vmmx_memcpy against a plain copy of the same bytes, median of %u; "
		       "GB/s; ratio = vmmx / baseline ==\n",
		       B->o.reps);
		table(doc, "copy", &cpy);
	}
	if (B->ran[S_STREAM]) {
		printf("\n== stream read: median of %u runs after %u warm-up runs; GB/s; ratio = "
		       "vmmx / baseline ==\n",
		       B->o.iters, B->o.warmup);
		table(doc, "stream", &str);
	}
	if (B->ran[S_MIGRATE])
		print_migrate(B, doc);
	if (B->ntargets) {
		printf("\n== targets (ratios from this run) ==\n");
		table(doc, "targets", &tgt);
	}
	if (B->sim)
		printf("\n(simulated backend: not GPU figures)\n");
}

static int plot_bench(struct bench *B, const struct rep *doc)
{
	if ((!B->ran[S_GROW] || !B->ngrow) && (!B->ran[S_DOUBLING] || !B->ndbl)) {
		fprintf(stderr, PROG ": --plot %s: neither the grow nor the doubling section ran\n",
			B->o.plot);
		return -1;
	}
	return rep_plot(doc, B->o.plot, PROG);
}

/* ---- main ---- */

/* The sections in the order they run, indexed like sec_names. */
static void (*const sections[S_COUNT])(struct bench *B) = {
    [S_OPS] = section_ops,	   [S_GROW] = section_grow, [S_DOUBLING] = section_doubling,
    [S_SHRINK] = section_shrink,   [S_COPY] = section_copy, [S_STREAM] = section_stream,
    [S_MIGRATE] = section_migrate,
};

int main(int argc, char **argv)
{
	static struct bench bench;
	struct bench *B = &bench;
	struct vmmx_ctx *ctx = NULL;
	struct rep *doc;
	int rc, err;

	/* The results are the tool's point: an unwritable stdout is a failure (exit 1). */
	tool_close_stdout_at_exit(PROG);
	rc = parse_opts(argc, argv, &B->o);
	if (rc)
		return rc < 0 ? 0 : rc;
	err = tool_ctx_create(NULL, &ctx);
	if (err) {
		tool_ctx_error(PROG, err);
		return 1;
	}
	B->info.size = sizeof(B->info);
	err = vmmx_ctx_query(ctx, &B->info);
	if (err) {
		fprintf(stderr, PROG ": vmmx_ctx_query: %s\n", vmmx_last_error());
		vmmx_ctx_destroy(ctx);
		return 1;
	}
	/* Only the description is needed; each section opens its own contexts. */
	vmmx_ctx_destroy(ctx);
	B->sim = !strcmp(B->info.backend, "sim");
	B->gran = B->info.granularity;
	rc = 1;
	if (!B->sim) {
		err = gpu_open(B->info.device);
		if (err) {
			fprintf(stderr, PROG ": %s: %s\n", vmmx_strerror(err), gpu_why());
			goto out;
		}
		B->kwhy = gpu_kernels_why();
	}
	defaults(B);
	if (check_sizes(B)) {
		rc = 2;
		goto out;
	}
	if (B->sim && B->o.json && !B->o.quiet)
		fputs(SIM_BANNER, stderr);
	for (int i = 0; i < S_COUNT; i++) {
		if (B->o.only[i]) {
			sections[i](B);
			B->ran[i] = 1;
		}
	}
	make_targets(B);
	doc = build_doc(B);
	if (B->o.json)
		rep_json(stdout, doc);
	else
		print_tables(B, doc);
	rc = B->failed ? 1 : 0;
	if (B->o.plot && plot_bench(B, doc))
		rc = 1;
	rep_free(doc);
out:
	gpu_close();
	return rc;
}
