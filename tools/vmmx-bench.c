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
 *            cuMemPrefetchAsync of cuMemAllocManaged memory both ways;
 *  sleep     vmmx_sleep (offload) and vmmx_wake of a tagged buffer of
 *            --migrate-size, the first cycle and warm ones, and a discard
 *            cycle, in GiB/s and against the pinned copy rate of the same
 *            run (the migrate section's baseline).
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
 *
 * This file holds the options, the helpers the sections share, the
 * targets and the output; each section is a file of its own
 * (bench-SECTION.c, through struct bench_section in bench.h) that
 * describes its figures once, as struct rep_field tables from which the
 * JSON rows and the table columns both come.
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
#include "tools/bench.h"

/* The --only words, the sections' names in enum section's order. */
static const char *sec_names[S_COUNT];

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: " PROG " [OPTIONS]\n"
	    "Costs of libvmmx operations beside same-run baselines, and the performance "
	    "targets.\n\n"
	    "      --only LIST        sections: ops, grow, doubling, shrink, copy, stream, migrate,\n"
	    "                         sleep\n"
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

void note(struct bench *B, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void note(struct bench *B, const char *fmt, ...)
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

int vfail(struct bench *B, const char *what, int err)
{
	fprintf(stderr, PROG ": %s: %s: %s\n", what, vmmx_strerror(err), vmmx_last_error());
	B->failed = 1;
	return err;
}

int gfail(struct bench *B, const char *what)
{
	fprintf(stderr, PROG ": %s: %s\n", what, gpu_why());
	B->failed = 1;
	return -1;
}

/*
 * Why a row was not measured, into its @why of @len bytes; each returns -1.
 * why_vmmx: libvmmx's last error (vfail or mkctx reported it already);
 * why_gpu: the GPU side's, reported here as @what failing;
 * why_oom: out of memory, reported as in section @sec.
 */
int why_vmmx(char *why, size_t len)
{
	snprintf(why, len, "%s", vmmx_last_error());
	return -1;
}

int why_gpu(struct bench *B, char *why, size_t len, const char *what)
{
	snprintf(why, len, "%s", gpu_why());
	return gfail(B, what);
}

int why_oom(struct bench *B, char *why, size_t len, const char *sec)
{
	snprintf(why, len, "out of memory");
	fprintf(stderr, PROG ": %s: out of memory\n", sec);
	B->failed = 1;
	return -1;
}

/* A buffer of @size under @policy in @ctx, grown to its size; *@buf_p is set once created. */
int buf_grown(struct vmmx_ctx *ctx, uint64_t size, const char *policy,
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
int bench_mkctx_gpu_only;

int mkctx(struct bench *B, uint64_t chunk, uint64_t chunk_max, int64_t cache, uint64_t limit,
		 struct vmmx_ctx **ctx_p)
{
	static const char *const gpu_only[] = { "VMMX_HOST_CPU_ACCESS=placed", NULL };
	char cs[32], cm[32], cl[32], dl[32];
	struct vmmx_config cfg;
	int err;

	vmmx_config_init(&cfg);
	if (bench_mkctx_gpu_only)
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
uint64_t dev_used(struct bench *B, struct vmmx_ctx *ctx)
{
	struct vmmx_ctx_info i = {.size = sizeof(i)};
	uint64_t fr, tot;

	if (!B->sim && !gpu_mem_info(&fr, &tot))
		return tot - fr;
	if (ctx && !vmmx_ctx_query(ctx, &i))
		return i.device_total - i.device_free;
	return 0;
}

const char *us(double sec, char *buf, size_t len)
{
	if (isfinite(sec))
		snprintf(buf, len, "%.1f", sec * 1e6);
	else
		snprintf(buf, len, "-");
	return buf;
}

const char *ratio(double a, double b, char *buf, size_t len)
{
	if (isfinite(a) && isfinite(b) && b > 0)
		snprintf(buf, len, "%.2fx", a / b);
	else
		snprintf(buf, len, "-");
	return buf;
}

/* ---- the sections ---- */

/* In the order they run, indexed like enum section. */
static const struct bench_section *const sections[S_COUNT] = {
    [S_OPS] = &bench_ops,	    [S_GROW] = &bench_grow,	[S_DOUBLING] = &bench_doubling,
    [S_SHRINK] = &bench_shrink,	    [S_COPY] = &bench_copy,	[S_STREAM] = &bench_stream,
    [S_MIGRATE] = &bench_migrate, [S_SLEEP] = &bench_sleep,
};

/* The order the targets are listed in (the stream read targets first). */
static const enum section target_order[] = {S_STREAM, S_GROW, S_DOUBLING, S_MIGRATE};

/* ---- targets ---- */

void add_target(struct bench *B, const char *text, double value, double threshold, int le,
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

static const char *verdict(const struct bench *B, const struct target *t)
{
	if (!t->known)
		return "n/a";
	if (B->sim)
		return "n/a (sim)";
	return (t->le ? t->value <= t->threshold : t->value >= t->threshold) ? "PASS" : "MISS";
}

static void make_targets(struct bench *B)
{
	for (size_t i = 0; i < sizeof(target_order) / sizeof(target_order[0]); i++) {
		const struct bench_section *s = sections[target_order[i]];

		if (B->ran[target_order[i]] && s->targets)
			s->targets(B);
	}
}

/* Each figure once: the target's row, its JSON and its table column. */
static const char *target_compare(const void *row, const void *arg, char *buf, size_t len)
{
	(void)arg;
	(void)buf;
	(void)len;
	return ((const struct target *)row)->le ? "<=" : ">=";
}

static const char *target_verdict(const void *row, const void *arg, char *buf, size_t len)
{
	const struct bench *B = arg;
	const char *v = verdict(B, row);

	(void)buf;
	(void)len;
	return !strcmp(v, "PASS") ? "PASS" : !strcmp(v, "MISS") ? "MISS" : B->sim ? "sim" : "n/a";
}

/* The table's cells: the ratio as shown, the verdict as read. */
static const char *target_shown(const void *row, const void *arg, char *buf, size_t len)
{
	const struct target *t = row;

	(void)arg;
	(void)buf;
	(void)len;
	return t->known ? t->shown : "-";
}

static const char *target_judged(const void *row, const void *arg, char *buf, size_t len)
{
	const struct target *t = row;
	int why = !t->known && t->why[0];

	snprintf(buf, len, "%s%s%s%s", verdict(arg, t), why ? "  (" : "", why ? t->why : "",
		 why ? ")" : "");
	return buf;
}

static const struct rep_field target_fields[] = {
    {"target", REP_S_TEXT, .off = offsetof(struct target, text), .col = 1},
    {"value", REP_S_NUM, .off = offsetof(struct target, value)},
    {"threshold", REP_S_NUM, .off = offsetof(struct target, threshold)},
    {"compare", REP_S_STRFN, .str = target_compare},
    {"verdict", REP_S_STRFN, .str = target_verdict},
    {"why", REP_S_TEXT, .off = offsetof(struct target, why)},
    {"shown", REP_S_STRFN, .str = target_shown, .col = 2, .head = "this run", .table_only = 1},
    {"judged", REP_S_STRFN, .str = target_judged, .col = 3, .head = "verdict",
     .table_only = 1},
};

/* ---- output ---- */

static const char SIM_BANNER[] = "==============================================================\n"
				 " SIMULATED backend: these are NOT GPU figures, and targets are\n"
				 " not judged.  Kernels are stood in for by vmmx_memcpy copies\n"
				 " timed with clock_gettime, cuMemAlloc by libvmmx buffers, and\n"
				 " cuMemcpy by memcpy(); there are no raw driver calls.\n"
				 "==============================================================\n";

void bench_table(const struct rep *doc, const char *key, const struct rep_field *f, size_t n,
		 const struct rep_view *v)
{
	const struct rep *rows = rep_get(doc, key);

	if (rows)
		rep_field_table(stdout, rows, f, n, v);
}

/* The results: one tree for --json, --plot and the tables. */
static struct rep *build_doc(struct bench *B)
{
	struct rep *doc = rep_new(), *o;

	o = rep_doc_head(doc, PROG, B->info.backend, B->sim,
			 "simulated backend: not GPU figures; targets not judged", B->info.device,
			 B->info.device_name);
	rep_bytes(o, "granularity", B->gran);
	o = rep_obj(doc, "timing");
	rep_str(o, "figure", "median");
	rep_int(o, "reps", B->o.reps);
	rep_int(o, "iters", B->o.iters);
	rep_int(o, "warmup", B->o.warmup);
	for (int i = 0; i < S_COUNT; i++)
		if (B->ran[i])
			sections[i]->doc(B, doc);
	rep_rows(doc, "targets", target_fields, REP_NFIELDS(target_fields), B->targets, B->ntargets,
		 sizeof(B->targets[0]), B);
	for (int i = 0; i < S_COUNT; i++)
		if (B->ran[i] && sections[i]->chart)
			sections[i]->chart(B, doc);
	return doc;
}

static void print_tables(struct bench *B, const struct rep *doc)
{
	static const struct rep_view tgt = {0};
	char a[32];

	if (B->sim)
		fputs(SIM_BANNER, stdout);
	printf("backend %s, device %d: %s, granularity %s\n", B->info.backend, B->info.device,
	       B->info.device_name, tool_fmt_size(B->gran, a, sizeof(a)));
	for (int i = 0; i < S_COUNT; i++)
		if (B->ran[i])
			sections[i]->print(B, doc);
	if (B->ntargets) {
		printf("\n== targets (ratios from this run) ==\n");
		bench_table(doc, "targets", target_fields, REP_NFIELDS(target_fields), &tgt);
	}
	if (B->sim)
		printf("\n(simulated backend: not GPU figures)\n");
}

static int plot_bench(struct bench *B, const struct rep *doc)
{
	if ((!B->ran[S_GROW] || !B->grow.n) && (!B->ran[S_DOUBLING] || !B->dbl.n)) {
		fprintf(stderr, PROG ": --plot %s: neither the grow nor the doubling section ran\n",
			B->o.plot);
		return -1;
	}
	return rep_plot(doc, B->o.plot, PROG);
}

/* ---- main ---- */

int main(int argc, char **argv)
{
	static struct bench bench;
	struct bench *B = &bench;
	struct vmmx_ctx *ctx = NULL;
	struct rep *doc;
	int rc, err;

	/* The results are the tool's point: an unwritable stdout is a failure (exit 1). */
	tool_close_stdout_at_exit(PROG);
	for (int i = 0; i < S_COUNT; i++)
		sec_names[i] = sections[i]->name;
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
			sections[i]->run(B);
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
