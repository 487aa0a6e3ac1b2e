// SPDX-License-Identifier: MIT
/*
 * vmmx-place - run one workload over one buffer per placement and report
 * bandwidth, residency and the fraction of a model limit.
 *
 * Placements are libvmmx buffers under any policy ("name:args") and, in the
 * same run, the baselines: cuMemAlloc, cuMemHostAlloc, malloc +
 * cuMemHostRegister, malloc under HMM, managed memory plain and advised +
 * prefetched.  Each placement gets its own buffer, filled with a pattern,
 * run (warm-up runs, then timed runs; the median is the figure), checked,
 * and freed before the next one, so placements never compete for memory.
 *
 * The model: a run that moves B bytes, of which a share d lives in device
 * memory and h in host memory, cannot beat B*d/hbm + B*h/pcie, where hbm is
 * the same workload's rate on cuMemAlloc memory and pcie its rate on
 * cuMemHostAlloc memory, both measured in this run at the same size.  The
 * "model" column is that time over the measured one (1.0: at the limit).
 *
 * The window workload (-w window) reads a hot window that shifts across
 * the buffer: --steps positions, wrapping, for --passes passes.  At each
 * step a libvmmx placement is told vmmx_buf_advise(WILL_NEED) for the
 * window (lru then migrates it to the device, evicting colder chunks), the
 * managed+prefetch baseline prefetches the window to the device, and then
 * the read kernel runs over the window -n times.  Per placement: the mean
 * GB/s of the window reads, the time spent in advise (migrations) or
 * prefetch, and from vmmx_stats the chunks and bytes migrated, evictions
 * and promotions.  The model is the same, per read, from the residency of
 * the window at each step.
 *
 * On the sim backend the same flow runs with the sim's own copies (gpu.c:
 * the engine), libvmmx buffers under the "device" and "host" policies stand
 * in for cuMemAlloc and cuMemHostAlloc, and a banner says that the figures
 * are not GPU figures.
 *
 * Output goes to stdout (a table, --csv or --json); progress goes to stderr.
 * Single-threaded.
 *
 * This file holds the options, the rows' measurement and the baselines;
 * the window workload is place-window.c, the results (each figure of a row
 * described once, for the JSON, the CSV and the table) place-report.c.
 * --replay TRACE, which measures nothing (it replays a launch trace under
 * placement policies with a cost model), is place-replay.c, options and all.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "vmmx.h"
#include "tools/place.h"

const struct place_base bases[B_COUNT] = {
    [B_DEVICE] = {"cudaMalloc", "device", GPU_ALLOC_DEVICE, WRES_DEVICE},
    [B_HOST] = {"cudaHostAlloc", "host", GPU_ALLOC_HOST, WRES_HOST},
    [B_REGISTER] = {"malloc+register", "register", GPU_ALLOC_REGISTERED, WRES_HOST},
    [B_HMM] = {"hmm-malloc", "hmm", GPU_ALLOC_PAGEABLE, WRES_HOST},
    [B_MANAGED] = {"managed", "managed", GPU_ALLOC_MANAGED, WRES_UNKNOWN},
    [B_MANAGED_PREFETCH] = {"managed+prefetch", "managed-prefetch", GPU_ALLOC_MANAGED_PREFETCH,
			    WRES_DEVICE},
};

const char *const st_names[] = {"ok", "unavailable", "refused", "failed"};

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: " PROG " [OPTIONS]\n"
	    "Runs one workload over one buffer per placement and reports GB/s, time,\n"
	    "residency and the fraction of the model limit.\n\n"
	    "  -w, --workload W       read, write, copy, gather or window (default read)\n"
	    "  -s, --size LIST        buffer sizes, comma-separated (default 1GiB; 8MiB on sim)\n"
	    "  -p, --policy LIST      libvmmx policies, e.g. "
	    "device-first,interleave:device=3,host=1\n"
	    "                         (repeatable; default device-first, for window\n"
	    "                         lru,device-first; none: no policy)\n"
	    "  -L, --device-limit SIZE  VMMX_DEVICE_LIMIT of the policies' context\n"
	    "  -b, --baselines LIST   cudaMalloc,cudaHostAlloc,register,hmm,managed,\n"
	    "                         managed-prefetch, all or none (default "
	    "cudaMalloc,cudaHostAlloc;\n"
	    "                         window: also managed-prefetch)\n"
	    "      --working-set SIZE gather: random loads over the first SIZE bytes (default "
	    "all)\n"
	    "      --window SIZE      window: the hot window (default a quarter of the buffer)\n"
	    "      --steps N          window: positions across the buffer (default 8)\n"
	    "      --passes N         window: passes over them (default 2)\n"
	    "  -n, --iters N          timed runs per placement (default 10); window: reads\n"
	    "                         of the window per step (default 4)\n"
	    "      --warmup N         warm-up runs before them (default 2)\n"
	    "      --csv, --json      output format (default: a table)\n"
	    "      --plot FILE        GB/s against the share of the buffer in host memory,\n"
	    "                         drawn by vmmx-plot: FILE.png, .svg or .pdf\n"
	    "      --assume-free SIZE treat the device's free memory as at most SIZE in the\n"
	    "                         managed-memory rule (to see the refusal)\n"
	    "  -q, --quiet            no progress on stderr\n"
	    "      --replay TRACE     no measurement: replay a vmmx-run --trace file under\n"
	    "                         placement policies (" PROG " --replay TRACE --help)\n"
	    "  -h, --help\n"
	    "      --version\n"
	    "Sizes: 4096, 512MiB, 4GiB, 4G (powers of 1024), 4GB (powers of 1000).\n"
	    "Exit status: 0 done, 1 a measurement or the setup failed, 2 bad usage.\n");
}

/* ---- options ---- */

/*
 * Split a policy list on commas, gluing "key=value" words back onto the
 * policy before them: "device-first,interleave:device=3,host=1" is two
 * policies.  A policy name has no '=', an argument always has one.
 */
static int add_policies(struct opts *o, const char *s)
{
	char *copy = strdup(s), *save = NULL, *tok;

	if (!copy)
		return -1;
	for (tok = strtok_r(copy, ",;", &save); tok; tok = strtok_r(NULL, ",;", &save)) {
		int arg =
		    strchr(tok, '=') && (!strchr(tok, ':') || strchr(tok, ':') > strchr(tok, '='));

		if (arg && o->npolicies > 0 && strchr(o->policies[o->npolicies - 1], ':')) {
			char **last = &o->policies[o->npolicies - 1];
			size_t n = strlen(*last) + strlen(tok) + 2;
			char *j = malloc(n);

			if (!j)
				goto oom;
			snprintf(j, n, "%s,%s", *last, tok);
			free(*last);
			*last = j;
			continue;
		}
		if (arg) {
			fprintf(stderr,
				PROG ": --policy %s: \"%s\" is an argument with no policy "
				     "before it (write name:key=value)\n",
				s, tok);
			free(copy);
			return -2;
		}
		if (o->npolicies == MAX_POLICIES) {
			fprintf(stderr, PROG ": --policy: at most %d policies\n", MAX_POLICIES);
			free(copy);
			return -2;
		}
		o->policies[o->npolicies] = strdup(tok);
		if (!o->policies[o->npolicies])
			goto oom;
		o->npolicies++;
	}
	free(copy);
	return 0;
oom:
	free(copy);
	fprintf(stderr, PROG ": out of memory\n");
	return -1;
}

static int set_baselines(struct opts *o, const char *s)
{
	char *copy = strdup(s), *save = NULL, *tok;

	if (!copy)
		return -1;
	memset(o->base, 0, sizeof(o->base));
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int found = 0;

		if (!strcasecmp(tok, "none"))
			continue;
		for (int b = 0; b < B_COUNT; b++) {
			if (!strcasecmp(tok, "all") || !strcasecmp(tok, bases[b].name) ||
			    !strcasecmp(tok, bases[b].alias)) {
				o->base[b] = 1;
				found = 1;
			}
		}
		if (!found) {
			fprintf(stderr,
				PROG ": --baselines %s: unknown baseline \"%s\" (expected "
				     "cudaMalloc, cudaHostAlloc, register, hmm, managed, "
				     "managed-prefetch, all or none)\n",
				s, tok);
			free(copy);
			return -1;
		}
	}
	free(copy);
	return 0;
}

/* -w: window is a pattern of read kernels, not a kernel of its own. */
static int opt_workload(void *dest, const char *s)
{
	struct opts *o = dest;

	o->window = !strcmp(s, "window");
	if (o->window) {
		o->wl = GPU_WL_READ;
	} else if (gpu_workload_parse(s, &o->wl)) {
		fprintf(stderr,
			PROG ": --workload %s: unknown workload (expected read, write, copy, "
			     "gather or window)\n",
			s);
		return 2;
	}
	return 0;
}

static int opt_policy(void *dest, const char *s)
{
	struct opts *o = dest;
	int rc;

	if (!strcmp(s, "none")) {
		o->policy_none = 1;
		return 0;
	}
	rc = add_policies(o, s);
	return rc == -1 ? 1 : rc ? 2 : 0;
}

/* -L: checked here, passed on as given (the context reads it, a share too). */
static int opt_limit(void *dest, const char *s)
{
	uint64_t lim;

	if (vmmx_parse_size(s, 100, &lim)) {
		fprintf(stderr,
			PROG ": --device-limit %s: bad size: expected a size such as 4GiB or a "
			     "share such as 50%%\n",
			s);
		return 2;
	}
	*(const char **)dest = s;
	return 0;
}

static int opt_baselines(void *dest, const char *s)
{
	return set_baselines(dest, s) ? 2 : 0;
}

/* What the options leave to be checked together, and the window's defaults. */
static int check_opts(struct opts *o, int iters_set, int base_set, int win_opt)
{
	if (tool_opts_exclusive(PROG, o->csv, "--csv", o->json, "--json"))
		return 2;
	if (win_opt && !o->window) {
		fprintf(stderr, PROG ": --window, --steps and --passes apply to the window "
				     "workload only\n");
		return 2;
	}
	if (o->window && o->plot) {
		fprintf(stderr, PROG ": --plot does not apply to the window workload\n");
		return 2;
	}
	/* Now, not after minutes of measurement. */
	if (o->plot && rep_plot_check(o->plot, PROG))
		return 2;
	if (o->window) {
		if (!iters_set)
			o->iters = 4;
		if (!base_set)
			o->base[B_MANAGED_PREFETCH] = 1;
	}
	if (!o->npolicies && !o->policy_none) {
		/* window: the policy that migrates against the one that does not. */
		int n = o->window ? 2 : 1;

		for (int i = 0; i < n; i++) {
			o->policies[i] = strdup(o->window && !i ? "lru" : "device-first");
			if (!o->policies[i])
				return 1;
			o->npolicies++;
		}
	}
	return 0;
}

/* Counts are bounded so a typo cannot ask for days of runs. */
#define COUNT_MAX 10000

static int parse_opts(int argc, char **argv, struct opts *o)
{
	int iters_set = 0, base_set = 0, win_opt = 0, rc;
	const struct tool_opt tab[] = {
	    tool_opt_fn("workload", 'w', opt_workload, o, NULL),
	    tool_opt_sizes("size", 's', o->sizes, MAX_SIZES, &o->nsizes),
	    tool_opt_fn("policy", 'p', opt_policy, o, NULL),
	    tool_opt_fn("device-limit", 'L', opt_limit, &o->device_limit, NULL),
	    tool_opt_fn("baselines", 'b', opt_baselines, o, &base_set),
	    tool_opt_size("working-set", &o->ws, NULL),
	    tool_opt_size("window", &o->win, &win_opt),
	    tool_opt_count("steps", 0, &o->steps, 1, COUNT_MAX, &win_opt),
	    tool_opt_count("passes", 0, &o->passes, 1, COUNT_MAX, &win_opt),
	    tool_opt_count("iters", 'n', &o->iters, 1, COUNT_MAX, &iters_set),
	    tool_opt_count("warmup", 0, &o->warmup, 0, COUNT_MAX, NULL),
	    tool_opt_csv(&o->csv),
	    tool_opt_json(&o->json),
	    tool_opt_plot(&o->plot),
	    tool_opt_size("assume-free", &o->assume_free, NULL),
	    tool_opt_quiet(&o->quiet),
	    {0},
	};

	o->wl = GPU_WL_READ;
	o->iters = 10;
	o->warmup = 2;
	o->steps = 8;
	o->passes = 2;
	o->base[B_DEVICE] = o->base[B_HOST] = 1;
	rc = tool_opts_parse(PROG, usage, tab, argc, argv);
	return rc ? rc : check_opts(o, iters_set, base_set, win_opt);
}

/* ---- rows ---- */

/* The window workload's default window: a quarter of the buffer, in whole 64 KiB units. */
static uint64_t window_default(uint64_t size)
{
	uint64_t w = size / 4 / MIN_UNIT * MIN_UNIT;

	return w ? w : MIN_UNIT;
}

static struct row *new_row(struct run *R, uint64_t size, const char *name, const char *kind)
{
	struct row *r;

	if (R->nrows == R->cap) {
		size_t n = R->cap ? 2 * R->cap : 32;
		struct row *g = realloc(R->rows, n * sizeof(*g));

		if (!g)
			return NULL;
		R->rows = g;
		R->cap = n;
	}
	r = &R->rows[R->nrows++];
	memset(r, 0, sizeof(*r));
	r->size = size;
	snprintf(r->name, sizeof(r->name), "%s", name);
	r->kind = kind;
	r->moved = gpu_workload_bytes(R->o.wl, size);
	r->t.cold = r->t.best = r->t.median = NAN;
	r->setup = r->model = r->frac = NAN;
	if (R->o.window)
		r->win = R->o.win ? R->o.win : window_default(size);
	return r;
}

void row_status(struct row *r, enum status st, const char *fmt, ...)
{
	va_list ap;

	r->st = st;
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
}

static void progress(struct run *R, const struct row *r)
{
	char a[32], w[32];

	R->step++;
	if (R->o.quiet)
		return;
	if (R->o.window)
		fprintf(stderr,
			PROG ": [%u/%u] %s %s: window of %s, %u steps x %u passes, %u reads per "
			     "step\n",
			R->step, R->steps, tool_fmt_size(r->size, a, sizeof(a)), r->name,
			tool_fmt_size(r->win, w, sizeof(w)), R->o.steps, R->o.passes, R->o.iters);
	else
		fprintf(stderr, PROG ": [%u/%u] %s %s: %s, %u warm-up + %u timed runs\n", R->step,
			R->steps, tool_fmt_size(r->size, a, sizeof(a)), r->name,
			gpu_workload_name(R->o.wl), R->o.warmup, R->o.iters);
}

static void progress_done(struct run *R, const struct row *r)
{
	char a[32];

	if (R->o.quiet)
		return;
	if (r->st != ST_OK)
		fprintf(stderr, PROG ":        %s: %s\n", st_names[r->st], r->reason);
	else if (R->o.window)
		fprintf(stderr, PROG ":        %.1f GB/s (mean of the window reads), %.1f ms in "
				     "advise/prefetch, %s migrated\n",
			(double)r->read_bytes / r->read_s / 1e9, r->advise_s * 1e3,
			r->stats_known ? tool_fmt_size(r->migrated_bytes, a, sizeof(a)) : "-");
	else
		fprintf(stderr, PROG ":        %.1f GB/s (median)\n",
			(double)r->moved / r->t.median / 1e9);
}

/*
 * Fill, run and check one placement.  Warm-up runs first (the first one's
 * time is the "cold" figure: faults, migrations, TLB misses), then the
 * timed runs; the median is the figure, the best is kept too.
 */
static void measure(struct run *R, struct gpu_engine *e, struct row *r, void *p, uint64_t size)
{
	double *v = calloc(R->o.iters, sizeof(*v)), sec = 0;
	uint64_t bad = 0;
	int err;

	if (!v) {
		row_status(r, ST_FAILED, "out of memory");
		return;
	}
	for (unsigned int i = 0; i < R->o.warmup; i++) {
		err = gpu_engine_run(e, R->o.wl, p, size, R->o.ws, &sec);
		if (err)
			goto fail;
		if (!i)
			r->t.cold = sec;
	}
	for (unsigned int i = 0; i < R->o.iters; i++) {
		err = gpu_engine_run(e, R->o.wl, p, size, R->o.ws, &v[i]);
		if (err)
			goto fail;
		if (i == 0 || v[i] < r->t.best)
			r->t.best = v[i];
	}
	r->t.median = gpu_median(v, R->o.iters);
	r->t.runs = R->o.iters;
	err = gpu_engine_verify(e, R->o.wl, p, size, &bad);
	if (err)
		goto fail;
	if (bad) {
		row_status(r, ST_FAILED,
			   "data check: %llu of %llu 16-byte elements wrong after the runs",
			   (unsigned long long)bad, (unsigned long long)(size / 16));
		R->failed = 1;
	}
	free(v);
	return;
fail:
	row_status(r, ST_FAILED, "%s", gpu_why());
	R->failed = 1;
	free(v);
}


/* A libvmmx buffer under @spec in @ctx: create, grow, fill, measure, destroy, trim. */
static void run_policy(struct run *R, struct vmmx_ctx *ctx, struct gpu_engine *e, struct row *r,
		       const char *spec, uint64_t size)
{
	uint64_t touched = R->o.wl == GPU_WL_GATHER && R->o.ws ? R->o.ws : size;
	struct vmmx_stats s0 = {.size = sizeof(s0)}, s1 = {.size = sizeof(s1)};
	int policy = !strcmp(r->kind, "policy"), stats = !vmmx_stats_get(ctx, &s0);
	struct vmmx_residency res;
	struct vmmx_buf *buf = NULL;
	double t0 = gpu_now();
	int err;

	err = vmmx_buf_create(ctx, size, spec, &buf);
	if (!err)
		err = vmmx_buf_resize(buf, size);
	if (err) {
		row_status(r, ST_FAILED, "%s: %s", vmmx_strerror(err), vmmx_last_error());
		R->failed = 1;
		goto out;
	}
	r->setup = gpu_now() - t0;
	/* What the grow itself moved: a policy that evicts (lru) spills as it grows. */
	if (stats && !vmmx_stats_get(ctx, &s1)) {
		r->setup_migrated = s1.migrated_bytes - s0.migrated_bytes;
		r->setup_evictions = s1.evictions - s0.evictions;
	}
	err = vmmx_buf_residency(buf, 0, touched, &res);
	if (err) {
		row_status(r, ST_FAILED, "vmmx_buf_residency: %s", vmmx_last_error());
		R->failed = 1;
		goto out;
	}
	r->res_known = 1;
	r->dev_bytes = res.device;
	r->host_bytes = res.host;
	err = gpu_engine_fill(e, vmmx_buf_ptr(buf), size);
	if (err) {
		row_status(r, ST_FAILED, "filling the buffer: %s", gpu_why());
		R->failed = 1;
		goto out;
	}
	if (R->o.window) {
		const struct wplace w = {.e = e, .buf = buf, .advise = policy, .where = WRES_BUF,
					 .p = vmmx_buf_ptr(buf), .size = size};

		window_measure(R, r, policy ? ctx : NULL, &w);
	} else {
		measure(R, e, r, vmmx_buf_ptr(buf), size);
	}
out:
	vmmx_buf_destroy(buf);
	/* Cached chunks would count against the next placement's room. */
	vmmx_ctx_trim(ctx, 0);
}

static uint64_t device_free(struct run *R)
{
	struct vmmx_ctx_info i = {.size = sizeof(i)};
	uint64_t fr = 0, tot;

	if (R->sim) {
		if (!vmmx_ctx_query(R->ctx, &i))
			fr = i.device_free;
	} else if (gpu_mem_info(&fr, &tot)) {
		fr = 0;
	}
	if (R->o.assume_free && R->o.assume_free < fr)
		fr = R->o.assume_free;
	return fr;
}

/*
 * What decides a baseline's row before anything is allocated: the
 * managed-memory rule, the sim's stand-ins (then run here) and the rows it
 * cannot have, a cudaMalloc that would not fit.  1 when the row is done.
 */
static int baseline_decided(struct run *R, struct row *r, enum base b, uint64_t size)
{
	char a[32], f[32], msg[256];
	uint64_t fr;

	/* The rule first: it holds on every backend, so it can be seen on sim too. */
	if (b == B_MANAGED || b == B_MANAGED_PREFETCH) {
		fr = device_free(R);
		if (gpu_managed_refusal(size, fr, msg, sizeof(msg))) {
			row_status(r, ST_REFUSED, "%s", msg);
			return 1;
		}
	}
	if (R->sim) {
		if (b == B_DEVICE || b == B_HOST) {
			r->note = b == B_DEVICE ? "sim stand-in: libvmmx buffer, policy device"
						: "sim stand-in: libvmmx buffer, policy host";
			run_policy(R, R->refctx, &R->refeng, r, b == B_DEVICE ? "device" : "host",
				   size);
			return 1;
		}
		row_status(r, ST_UNAVAILABLE, "sim backend: no CUDA driver allocations");
		return 1;
	}
	if (b == B_DEVICE) {
		fr = device_free(R);
		if (fr < GPU_MANAGED_MARGIN || size > fr - GPU_MANAGED_MARGIN) {
			row_status(
			    r, ST_UNAVAILABLE, "%s does not fit in the device's free memory (%s)",
			    tool_fmt_size(size, a, sizeof(a)), tool_fmt_size(fr, f, sizeof(f)));
			return 1;
		}
	}
	return 0;
}

/* Fill the baseline's memory @m, put it where its runs start, and measure. */
static void baseline_measure(struct run *R, struct row *r, enum base b, struct gpu_mem *m,
			     uint64_t size)
{
	int err = gpu_engine_fill(&R->eng, m->dptr, size);

	/* The window starts with managed memory in host memory, as after a CPU
	 * initialisation: each step's prefetch (or faults) must bring it over. */
	if (!err)
		err = R->o.window && b == B_MANAGED_PREFETCH ? gpu_prefetch(m->dptr, size, 1, NULL)
							     : gpu_mem_settle(m);
	if (err) {
		row_status(r, ST_FAILED, "preparing the buffer: %s", gpu_why());
		R->failed = 1;
	} else if (R->o.window) {
		const struct wplace w = {.e = &R->eng,
					 .prefetch = m->kind == GPU_ALLOC_MANAGED_PREFETCH,
					 .where = bases[b].where,
					 .p = m->dptr,
					 .size = size};

		window_measure(R, r, NULL, &w);
	} else {
		measure(R, &R->eng, r, m->dptr, size);
	}
}

static void run_baseline(struct run *R, struct row *r, enum base b, uint64_t size)
{
	uint64_t touched = R->o.wl == GPU_WL_GATHER && R->o.ws ? R->o.ws : size;
	struct gpu_mem m = {0};
	double t0;
	int err;

	if (baseline_decided(R, r, b, size))
		return;
	t0 = gpu_now();
	err = gpu_alloc(bases[b].kind, size, &m);
	if (err) {
		row_status(r,
			   err == -VMMX_ENOTSUP	 ? ST_UNAVAILABLE
			   : err == -VMMX_ERANGE ? ST_REFUSED
						 : ST_FAILED,
			   "%s", gpu_why());
		if (r->st == ST_FAILED)
			R->failed = 1;
		return;
	}
	r->setup = gpu_now() - t0;
	/* Where the touched bytes are before the runs; plain managed memory: pages
	 * move on faults, unknown.  Managed+prefetch is prefetched to the device,
	 * which it fits by the rule, but under the window it starts in host memory
	 * and comes over a window at a time. */
	if (bases[b].where != WRES_UNKNOWN && !(R->o.window && b == B_MANAGED_PREFETCH)) {
		r->res_known = 1;
		if (bases[b].where == WRES_DEVICE)
			r->dev_bytes = touched;
		else
			r->host_bytes = touched;
	}
	baseline_measure(R, r, b, &m, size);
	if (gpu_free(&m)) {
		fprintf(stderr, PROG ": warning: %s\n", gpu_why());
		R->failed = 1;
	}
}

/*
 * The model for every row of one size, from that size's reference rows;
 * a size whose reference is missing takes the rate from an earlier size.
 */
static void apply_model(struct run *R, size_t first, size_t end, double *hbm, double *pcie)
{
	for (size_t i = first; i < end; i++) {
		const struct row *r = &R->rows[i];

		if (r->st != ST_OK || strcmp(r->kind, "baseline"))
			continue;
		if (!strcmp(r->name, bases[B_DEVICE].name))
			*hbm = (double)r->moved / r->t.median;
		else if (!strcmp(r->name, bases[B_HOST].name))
			*pcie = (double)r->moved / r->t.median;
	}
	for (size_t i = first; i < end; i++) {
		struct row *r = &R->rows[i];
		double tot, d, h;

		if (r->st != ST_OK || !r->res_known)
			continue;
		tot = (double)(r->dev_bytes + r->host_bytes);
		if (tot <= 0)
			continue;
		d = (double)r->dev_bytes / tot;
		h = (double)r->host_bytes / tot;
		if ((d > 0 && !(*hbm > 0)) || (h > 0 && !(*pcie > 0)))
			continue;
		r->model = (d > 0 ? (double)r->moved * d / *hbm : 0) +
			   (h > 0 ? (double)r->moved * h / *pcie : 0);
		r->frac = r->model / r->t.median;
	}
}


/* ---- main ---- */

static int open_ctx(struct run *R)
{
	struct vmmx_config cfg;
	int err;

	vmmx_config_init(&cfg);
	cfg.device_limit = R->o.device_limit;
	err = tool_ctx_create(&cfg, &R->ctx);
	if (err) {
		tool_ctx_error(PROG, err);
		return -1;
	}
	R->info.size = sizeof(R->info);
	err = vmmx_ctx_query(R->ctx, &R->info);
	if (err) {
		fprintf(stderr, PROG ": vmmx_ctx_query: %s\n", vmmx_last_error());
		return -1;
	}
	R->sim = !strcmp(R->info.backend, "sim");
	R->eng.ctx = R->ctx;
	R->eng.sim = R->sim;
	R->eng.seed = 0x5eed1234u;
	if (R->sim) {
		/* Stand-ins for cuMemAlloc/cuMemHostAlloc: no device limit applies to them. */
		vmmx_config_init(&cfg);
		cfg.device_limit = "100%";
		err = tool_ctx_create(&cfg, &R->refctx);
		if (err) {
			fprintf(stderr, PROG ": cannot open the reference context: %s\n",
				vmmx_last_error());
			return -1;
		}
		R->refeng = R->eng;
		R->refeng.ctx = R->refctx;
		return 0;
	}
	err = gpu_open(R->info.device);
	if (err) {
		fprintf(stderr, PROG ": %s: %s\n", vmmx_strerror(err), gpu_why());
		return -1;
	}
	if (gpu_kernels_why()) {
		fprintf(stderr, PROG ": GPU workloads unavailable: %s\n", gpu_kernels_why());
		return -1;
	}
	return 0;
}

/* Every policy must load before anything is measured: a typo is a usage error. */
static int check_policies(struct run *R)
{
	for (int i = 0; i < R->o.npolicies; i++) {
		struct vmmx_buf *b;
		int err = vmmx_buf_create(R->ctx, R->info.chunk_min, R->o.policies[i], &b);

		if (err) {
			fprintf(stderr, PROG ": --policy %s: %s: %s\n", R->o.policies[i],
				vmmx_strerror(err), vmmx_last_error());
			return -1;
		}
		vmmx_buf_destroy(b);
	}
	return 0;
}

static int check_sizes(struct run *R)
{
	char a[32], b[32];

	for (int i = 0; i < R->o.nsizes; i++) {
		if (R->o.sizes[i] % MIN_UNIT) {
			fprintf(stderr, PROG ": --size %s: not a multiple of 64 KiB\n",
				tool_fmt_size(R->o.sizes[i], a, sizeof(a)));
			return -1;
		}
		if (R->o.ws && R->o.ws > R->o.sizes[i]) {
			fprintf(stderr, PROG ": --working-set %s is larger than the buffer (%s)\n",
				tool_fmt_size(R->o.ws, a, sizeof(a)),
				tool_fmt_size(R->o.sizes[i], b, sizeof(b)));
			return -1;
		}
	}
	if (R->o.ws % MIN_UNIT) {
		fprintf(stderr, PROG ": --working-set: not a multiple of 64 KiB\n");
		return -1;
	}
	if (R->o.ws && (R->o.wl != GPU_WL_GATHER || R->o.window)) {
		fprintf(stderr, PROG ": --working-set applies to the gather workload only\n");
		return -1;
	}
	if (!R->o.window)
		return 0;
	if (R->o.win % MIN_UNIT) {
		fprintf(stderr, PROG ": --window: not a multiple of 64 KiB\n");
		return -1;
	}
	for (int i = 0; i < R->o.nsizes; i++) {
		uint64_t size = R->o.sizes[i];

		if (R->o.win > size) {
			fprintf(stderr, PROG ": --window %s is larger than the buffer (%s)\n",
				tool_fmt_size(R->o.win, a, sizeof(a)),
				tool_fmt_size(size, b, sizeof(b)));
			return -1;
		}
		if (size / MIN_UNIT < R->o.steps) {
			fprintf(stderr,
				PROG ": --steps %u: more positions than 64 KiB units in the buffer "
				     "(%s)\n",
				R->o.steps, tool_fmt_size(size, a, sizeof(a)));
			return -1;
		}
	}
	return 0;
}

/* Open the contexts, settle the sizes, check the options against them; 0 or an exit status. */
static int setup(struct run *R)
{
	int nb = 0;

	if (open_ctx(R))
		return 1;
	if (!R->o.nsizes) {
		R->o.sizes[0] = R->sim ? 8ull << 20 : 1ull << 30;
		R->o.nsizes = 1;
	}
	if (check_sizes(R) || check_policies(R))
		return 2;
	for (int b = 0; b < B_COUNT; b++)
		nb += R->o.base[b];
	R->steps = (unsigned int)(R->o.nsizes * (R->o.npolicies + nb));
	if (!R->steps) {
		fprintf(stderr, PROG ": nothing to measure (--policy none and --baselines none)\n");
		return 2;
	}
	return 0;
}

/* The window over a buffer the device limit holds whole never moves: say so. */
static void window_note(struct run *R, uint64_t size)
{
	char a[32], l[32];

	if (!R->o.window || R->o.quiet ||
	    (R->info.device_limit != UINT64_MAX && size > R->info.device_limit))
		return;
	fprintf(stderr,
		PROG ": note: window: the %s buffer is not larger than the device limit (%s): "
		     "nothing needs to move\n",
		tool_fmt_size(size, a, sizeof(a)),
		R->info.device_limit == UINT64_MAX
		    ? "none; set one with --device-limit"
		    : tool_fmt_size(R->info.device_limit, l, sizeof(l)));
}

/* One row: baseline @b, or @policy where not NULL, with its progress lines; -1: no memory. */
static int place_one(struct run *R, uint64_t size, enum base b, const char *policy)
{
	struct row *r = new_row(R, size, policy ? policy : bases[b].name,
				policy ? "policy" : "baseline");

	if (!r)
		return -1;
	progress(R, r);
	if (policy)
		run_policy(R, R->ctx, &R->eng, r, policy, size);
	else
		run_baseline(R, r, b, size);
	progress_done(R, r);
	return 0;
}

/*
 * Every placement at one size, then their model and their rows in @doc.
 * @hbm, @pcie: the reference rates, kept from size to size.  -1: no memory.
 */
static int run_size(struct run *R, struct rep *doc, uint64_t size, double *hbm, double *pcie)
{
	static const enum base refs[] = {B_DEVICE, B_HOST};
	static const enum base rest[] = {B_REGISTER, B_HMM, B_MANAGED, B_MANAGED_PREFETCH};
	size_t first = R->nrows;

	window_note(R, size);
	/* References first, so the model is known for the rest. */
	for (size_t k = 0; k < sizeof(refs) / sizeof(refs[0]); k++)
		if (R->o.base[refs[k]] && place_one(R, size, refs[k], NULL))
			return -1;
	for (int p = 0; p < R->o.npolicies; p++)
		if (place_one(R, size, B_COUNT, R->o.policies[p]))
			return -1;
	for (size_t k = 0; k < sizeof(rest) / sizeof(rest[0]); k++)
		if (R->o.base[rest[k]] && place_one(R, size, rest[k], NULL))
			return -1;
	if (R->o.window)
		apply_model_window(R, first, R->nrows, hbm, pcie);
	else
		apply_model(R, first, R->nrows, hbm, pcie);
	doc_rows(R, doc, first, R->nrows);
	return 0;
}


int main(int argc, char **argv)
{
	static struct run run;
	struct run *R = &run;
	struct rep *doc = rep_new();
	double hbm = NAN, pcie = NAN;
	int rc;

	/* --replay is a mode of its own, with its own options. */
	for (int i = 1; i < argc; i++)
		if (!strcmp(argv[i], "--replay") || !strncmp(argv[i], "--replay=", 9)) {
			rep_free(doc);
			return replay_main(argc, argv);
		}
	/* The results are the tool's point: an unwritable stdout is a failure (exit 1). */
	tool_close_stdout_at_exit(PROG);
	rc = parse_opts(argc, argv, &R->o);
	if (rc) {
		rep_free(doc);
		return rc < 0 ? 0 : rc;
	}
	rc = setup(R);
	if (rc)
		goto out;
	if (R->sim && (R->o.csv || R->o.json) && !R->o.quiet)
		fputs(PLACE_SIM_BANNER, stderr);
	if (!R->o.csv && !R->o.json)
		print_header(R);
	doc_head(R, doc);
	for (int si = 0; si < R->o.nsizes && !rc; si++) {
		if (run_size(R, doc, R->o.sizes[si], &hbm, &pcie)) {
			fprintf(stderr, PROG ": out of memory\n");
			rc = 1;
		}
	}
	if (!rc)
		rc = report(R, doc);
out:
	gpu_engine_fini(&R->eng);
	gpu_engine_fini(&R->refeng);
	gpu_close();
	vmmx_ctx_destroy(R->refctx);
	vmmx_ctx_destroy(R->ctx);
	for (int i = 0; i < R->o.npolicies; i++)
		free(R->o.policies[i]);
	free(R->rows);
	rep_free(doc);
	return rc;
}
