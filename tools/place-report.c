// SPDX-License-Identifier: MIT
/*
 * place-report.c - vmmx-place's results: the header lines, the document
 * (each row's figures described once, in place_fields and window_fields,
 * from which its JSON, its CSV and its table columns come), the chart and
 * --plot.
 */
#include "config.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tools/place.h"

/* ---- output ---- */

/* What each workload does and what its GB/s counts. */
static const char *const wl_descs[GPU_WL_COUNT] = {
    [GPU_WL_READ] = "stream read, 16-byte loads; GB/s = bytes read / time",
    [GPU_WL_WRITE] = "stream write, 16-byte stores; GB/s = bytes written / time",
    [GPU_WL_COPY] = "copy of the first half onto the second; GB/s = (bytes read + written) / "
		    "time",
    [GPU_WL_GATHER] = "random 16-byte loads over the working set; GB/s = bytes loaded / time",
};

static const char *wl_desc(enum gpu_workload w)
{
	return (unsigned int)w < GPU_WL_COUNT && wl_descs[w] ? wl_descs[w] : "?";
}

const char PLACE_SIM_BANNER[] = "==============================================================\n"
				 " SIMULATED backend: these are NOT GPU figures.  The workloads\n"
				 " are the sim's own copies (vmmx_memcpy) timed with\n"
				 " clock_gettime; cudaMalloc and cudaHostAlloc are stood in for\n"
				 " by libvmmx buffers under the device and host policies.\n"
				 "==============================================================\n";

void print_header(struct run *R)
{
	char a[32];

	if (R->sim)
		fputs(PLACE_SIM_BANNER, stdout);
	if (R->o.window)
		printf("workload window (a hot window shifting across the buffer in %u steps, "
		       "wrapping, %u passes; per step vmmx_buf_advise WILL_NEED for libvmmx "
		       "placements or cuMemPrefetchAsync for managed+prefetch, then %u stream "
		       "reads of the window)\n",
		       R->o.steps, R->o.passes, R->o.iters);
	else
		printf("workload %s (%s)\n", gpu_workload_name(R->o.wl), wl_desc(R->o.wl));
	printf("backend %s, device %d: %s; device limit %s\n", R->info.backend, R->info.device,
	       R->info.device_name,
	       R->info.device_limit == UINT64_MAX
		   ? "none"
		   : tool_fmt_size(R->info.device_limit, a, sizeof(a)));
	if (R->o.window) {
		printf("GB/s = window bytes read / read time, over every read of every pass "
		       "(pass1: the first pass only; +advise: advise or prefetch time included); "
		       "advise ms: "
		       "total time in vmmx_buf_advise (its migrations) or cuMemPrefetchAsync; "
		       "migrated, migr, evict, promo: vmmx_stats over the steps; dev%%: share of "
		       "the bytes read that were in device memory; model = (device bytes read / "
		       "cudaMalloc rate + host bytes read / cudaHostAlloc rate) / read time\n\n");
		return;
	}
	printf("GB/s from the median of %u timed runs after %u warm-up runs (best and first run "
	       "also shown); model = (device bytes / cudaMalloc rate + host bytes / cudaHostAlloc "
	       "rate) / measured time\n\n",
	       R->o.iters, R->o.warmup);
}

/* ---- the results: one tree for --json, --csv and the table ---- */

/* Each figure once, for both kinds of row: its JSON member, CSV column and table column. */
#define ROW(m) .off = offsetof(struct row, m)
#define RUN(r) ((const struct run *)(r))

static int row_ok(const void *row, const void *arg)
{
	(void)arg;
	return ((const struct row *)row)->st == ST_OK;
}

static int row_res(const void *row, const void *arg)
{
	const struct row *r = row;

	(void)arg;
	return r->st == ST_OK && r->res_known;
}

/* The window reads' residency is known, and something was read. */
static int row_read(const void *row, const void *arg)
{
	const struct row *r = row;

	(void)arg;
	return r->st == ST_OK && r->read_res_known && r->dev_read + r->host_read;
}

/* The vmmx_stats counters are the placement's own. */
static int row_stats(const void *row, const void *arg)
{
	const struct row *r = row;

	(void)arg;
	return r->st == ST_OK && r->stats_known;
}

static const char *row_status_name(const void *row, const void *arg, char *buf, size_t len)
{
	(void)arg;
	(void)buf;
	(void)len;
	return st_names[((const struct row *)row)->st];
}

/* The table's text for a row not measured; NULL (no member) for a measured one. */
static const char *row_status_text(const void *row, const void *arg, char *buf, size_t len)
{
	const struct row *r = row;

	(void)arg;
	if (r->st == ST_OK)
		return NULL;
	snprintf(buf, len, "%s: %s", st_names[r->st], r->reason);
	return buf;
}

/* Sim stand-ins: what stands in; NULL (no member) elsewhere. */
static const char *row_note(const void *row, const void *arg, char *buf, size_t len)
{
	(void)arg;
	(void)buf;
	(void)len;
	return ((const struct row *)row)->note;
}

static double host_fraction(const void *row, const void *arg)
{
	const struct row *r = row;

	(void)arg;
	return (double)r->host_bytes / (double)(r->dev_bytes + r->host_bytes);
}

static double win_steps(const void *row, const void *arg)
{
	(void)row;
	return RUN(arg)->o.steps;
}

static double win_passes(const void *row, const void *arg)
{
	(void)row;
	return RUN(arg)->o.passes;
}

static double win_reads(const void *row, const void *arg)
{
	(void)row;
	return RUN(arg)->o.iters;
}

/* Bytes read: 0 for a row that did not run. */
static uint64_t win_bytes_read(const void *row, const void *arg)
{
	const struct row *r = row;

	(void)arg;
	return r->st == ST_OK ? r->read_bytes : 0;
}

static double win_gbps_advise(const void *row, const void *arg)
{
	const struct row *r = row;

	(void)arg;
	return tool_gbps(r->read_bytes, r->read_s + r->advise_s);
}

static double win_dev_fraction(const void *row, const void *arg)
{
	const struct row *r = row;

	(void)arg;
	return (double)r->dev_read / (double)(r->dev_read + r->host_read);
}

/* The members every row has, measured or not, first in both kinds. */
#define ROW_HEAD                                                                                \
	{"size", REP_S_BYTES, ROW(size), .col = 1, .fmt = REP_F_SIZE, .csv = "size_bytes"},      \
	    {"placement", REP_S_TEXT, ROW(name), .col = 2, .fmt = REP_F_QTEXT},                  \
	    {"kind", REP_S_STR, ROW(kind)},                                                      \
	    {"status", REP_S_STRFN, .str = row_status_name},                                     \
	    {"reason", REP_S_TEXT, ROW(reason), .fmt = REP_F_QTEXT},                             \
	{                                                                                        \
		"status_text", REP_S_STRFN, .str = row_status_text, .table_only = 1              \
	}

/* And last. */
#define ROW_TAIL(c)                                                                             \
	{"model_time_s", REP_S_NUM, ROW(model), .head = "model ms", .fmt = REP_F_MS, .prec = 3, \
	 .right = 1},                                                                           \
	    {"model_fraction", REP_S_NUM, ROW(frac), .col = (c), .head = "model",              \
	     .fmt = REP_F_FIX, .prec = 2, .right = 1},                                          \
	{                                                                                       \
		"note", REP_S_STRFN, .str = row_note, .fmt = REP_F_QTEXT                        \
	}

static const struct rep_field place_fields[] = {
    ROW_HEAD,
    {"bytes_moved", REP_S_BYTES, ROW(moved), .head = "moved", .fmt = REP_F_SIZE},
    {"gbps", REP_S_GBPS, ROW(t.median), .off2 = offsetof(struct row, moved), .when = row_ok, .col = 3, .head = "GB/s",
     .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {"gbps_best", REP_S_GBPS, ROW(t.best), .off2 = offsetof(struct row, moved), .when = row_ok, .col = 4, .head = "best",
     .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {"gbps_cold", REP_S_GBPS, ROW(t.cold), .off2 = offsetof(struct row, moved), .when = row_ok, .col = 5, .head = "cold",
     .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {"time_s", REP_S_NUM, ROW(t.median), .when = row_ok, .col = 6, .head = "time ms",
     .fmt = REP_F_MS, .prec = 3, .right = 1},
    {"time_best_s", REP_S_NUM, ROW(t.best), .when = row_ok, .head = "best ms",
     .fmt = REP_F_MS, .prec = 3, .right = 1},
    {"time_cold_s", REP_S_NUM, ROW(t.cold), .when = row_ok, .head = "cold ms",
     .fmt = REP_F_MS, .prec = 3, .right = 1},
    {"setup_s", REP_S_NUM, ROW(setup), .when = row_ok, .col = 7, .head = "setup ms",
     .fmt = REP_F_MS, .prec = 2, .right = 1},
    {"device_bytes", REP_S_BYTES, ROW(dev_bytes), .when = row_res, .col = 8, .head = "device",
     .fmt = REP_F_SIZE, .right = 1},
    {"host_bytes", REP_S_BYTES, ROW(host_bytes), .when = row_res, .col = 9, .head = "host",
     .fmt = REP_F_SIZE, .right = 1},
    {"host_fraction", REP_S_NUMFN, .num = host_fraction, .when = row_res, .col = 10,
     .head = "host%", .fmt = REP_F_PCT, .prec = 1, .right = 1},
    ROW_TAIL(11),
};

static const struct rep_field window_fields[] = {
    ROW_HEAD,
    {"window_bytes", REP_S_BYTES, ROW(win), .col = 3, .head = "window", .fmt = REP_F_SIZE},
    {"steps", REP_S_NUMFN, .num = win_steps, .fmt = REP_F_INT},
    {"passes", REP_S_NUMFN, .num = win_passes, .fmt = REP_F_INT},
    {"reads_per_step", REP_S_NUMFN, .num = win_reads, .head = "reads", .fmt = REP_F_INT},
    {"bytes_read", REP_S_BYTESFN, .bytes = win_bytes_read, .head = "read", .fmt = REP_F_SIZE},
    {"read_s", REP_S_NUM, ROW(read_s), .when = row_ok, .head = "read ms", .fmt = REP_F_MS,
     .prec = 2, .right = 1},
    {"gbps", REP_S_GBPS, ROW(read_s), .off2 = offsetof(struct row, read_bytes), .when = row_ok, .col = 4, .head = "GB/s",
     .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {"gbps_pass1", REP_S_GBPS, ROW(pass1_s), .off2 = offsetof(struct row, pass1_bytes), .when = row_ok, .col = 5,
     .head = "pass1", .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {"advise_s", REP_S_NUM, ROW(advise_s), .when = row_ok, .col = 7, .head = "advise ms",
     .fmt = REP_F_MS, .prec = 2, .right = 1},
    {"gbps_with_advise", REP_S_NUMFN, .num = win_gbps_advise, .when = row_ok, .col = 6,
     .head = "+advise", .fmt = REP_F_FIX, .prec = 1, .right = 1},
    {"setup_s", REP_S_NUM, ROW(setup), .when = row_ok, .col = 8, .head = "setup ms",
     .fmt = REP_F_MS, .prec = 2, .right = 1},
    {"device_bytes", REP_S_BYTES, ROW(dev_bytes), .when = row_res, .nocsv = 1},
    {"host_bytes", REP_S_BYTES, ROW(host_bytes), .when = row_res, .nocsv = 1},
    {"device_read_bytes", REP_S_BYTES, ROW(dev_read), .when = row_read, .head = "dev read",
     .fmt = REP_F_SIZE, .right = 1},
    {"host_read_bytes", REP_S_BYTES, ROW(host_read), .when = row_read, .head = "host read",
     .fmt = REP_F_SIZE, .right = 1},
    {"device_read_fraction", REP_S_NUMFN, .num = win_dev_fraction, .when = row_read,
     .col = 13, .head = "dev%", .fmt = REP_F_PCT, .prec = 1, .right = 1},
    {"migrations", REP_S_BYTES, ROW(migrations), .when = row_stats, .col = 10, .head = "migr",
     .fmt = REP_F_INT, .right = 1},
    {"migrated_bytes", REP_S_BYTES, ROW(migrated_bytes), .when = row_stats, .col = 9,
     .head = "migrated", .fmt = REP_F_SIZE, .right = 1},
    {"evictions", REP_S_BYTES, ROW(evictions), .when = row_stats, .col = 11, .head = "evict",
     .fmt = REP_F_INT, .right = 1},
    {"promotions", REP_S_BYTES, ROW(promotions), .when = row_stats, .col = 12,
     .head = "promo", .fmt = REP_F_INT, .right = 1},
    {"setup_migrated_bytes", REP_S_BYTES, ROW(setup_migrated), .when = row_stats,
     .head = "setup migrated", .fmt = REP_F_SIZE},
    {"setup_evictions", REP_S_BYTES, ROW(setup_evictions), .when = row_stats,
     .head = "setup evict", .fmt = REP_F_INT},
    ROW_TAIL(14),
};

void doc_head(struct run *R, struct rep *doc)
{
	struct rep *o;

	o = rep_doc_head(doc, PROG, R->info.backend, R->sim,
			 "simulated backend: not GPU figures; workloads are vmmx_memcpy copies "
			 "timed with clock_gettime",
			 R->info.device, R->info.device_name);
	rep_bytes(o, "total_bytes", R->info.device_total);
	rep_bytes(doc, "device_limit", R->info.device_limit);
	rep_str(doc, "workload", R->o.window ? "window" : gpu_workload_name(R->o.wl));
	if (R->o.window) {
		o = rep_obj(doc, "window");
		rep_bytes(o, "bytes", R->o.win ? R->o.win : UINT64_MAX);
		rep_int(o, "steps", R->o.steps);
		rep_int(o, "passes", R->o.passes);
		rep_int(o, "reads_per_step", R->o.iters);
	}
	rep_bytes(doc, "working_set", R->o.ws ? R->o.ws : UINT64_MAX);
	/* window: every read counts (bytes over time, pass 1 included); no warm-up. */
	o = rep_obj(doc, "timing");
	rep_str(o, "figure", R->o.window ? "mean" : "median");
	rep_int(o, "warmup", R->o.window ? 0 : R->o.warmup);
	rep_int(o, "runs", R->o.iters);
}

/* Rows are added as they are measured: after each size, once its model is known. */
void doc_rows(struct run *R, struct rep *doc, size_t first, size_t end)
{
	const struct rep_field *f = R->o.window ? window_fields : place_fields;
	size_t n = R->o.window ? REP_NFIELDS(window_fields) : REP_NFIELDS(place_fields);
	struct rep *arr = (struct rep *)rep_get(doc, "results");

	if (!arr)
		arr = rep_arr(doc, "results");
	for (size_t i = first; i < end; i++)
		rep_row(arr, f, n, &R->rows[i], R);
}

static void print_results(struct run *R, const struct rep *doc)
{
	const struct rep_field *f = R->o.window ? window_fields : place_fields;
	size_t n = R->o.window ? REP_NFIELDS(window_fields) : REP_NFIELDS(place_fields);
	struct rep_col cols[REP_NFIELDS(window_fields)];
	struct rep_view v = {.span = "status_text", .nkeys = 2};
	const struct rep *rows = rep_get(doc, "results");
	struct rep *none = rep_new();

	if (!rows)
		rows = rep_arr(none, "results");
	if (R->o.json) {
		rep_json(stdout, doc);
	} else if (R->o.csv) {
		v.cols = cols;
		v.ncols = rep_field_cols(f, n, 1, cols);
		rep_csv(stdout, rows, &v);
	} else {
		rep_field_table(stdout, rows, f, n, &v);
	}
	rep_free(none);
}

/* ---- plot ---- */

struct pt {
	double x, y;
};

static int cmp_pt(const void *a, const void *b)
{
	const struct pt *p = a, *q = b;

	return p->x < q->x ? -1 : p->x > q->x;
}

/* One series per placement name, in order of first appearance; points by host share. */
static size_t plot_series(struct run *R, struct rep *chart, struct pt *pts)
{
	size_t npts = 0;

	for (size_t i = 0; i < R->nrows; i++) {
		const char *name = R->rows[i].name;
		struct rep *s;
		size_t n = 0, j;

		for (j = 0; j < i && strcmp(R->rows[j].name, name); j++)
			;
		if (j < i)
			continue;
		for (j = i; j < R->nrows; j++) {
			const struct row *r = &R->rows[j];

			if (strcmp(r->name, name) || r->st != ST_OK || !r->res_known)
				continue;
			pts[n].x = (double)r->host_bytes / (double)(r->dev_bytes + r->host_bytes);
			pts[n].y = tool_gbps(r->moved, r->t.median);
			n++;
		}
		if (!n)
			continue;
		qsort(pts, n, sizeof(*pts), cmp_pt);
		s = rep_series(chart, name);
		for (j = 0; j < n; j++)
			rep_point(s, pts[j].x, pts[j].y);
		npts += n;
	}
	return npts;
}

/* The chart of the results (not for the window workload): points by host share. */
static size_t chart_place(struct run *R, struct rep *doc)
{
	struct pt *pts = calloc(R->nrows ? R->nrows : 1, sizeof(*pts));
	char title[160];
	size_t n;

	if (!pts || R->o.window) {
		free(pts);
		return 0;
	}
	snprintf(title, sizeof(title), "vmmx-place: %s on %s%s", gpu_workload_name(R->o.wl),
		 R->info.device_name, R->sim ? " (SIMULATED, not GPU figures)" : "");
	n = plot_series(R,
			rep_chart(doc, "place", title, "share of the buffer in host memory", NULL,
				  0, "bandwidth (median)", "GB/s"),
			pts);
	free(pts);
	return n;
}

static int write_plot(struct run *R, const struct rep *doc, size_t npts)
{
	if (!npts) {
		fprintf(stderr,
			PROG ": --plot %s: no measured placement with a known residency to "
			     "plot\n",
			R->o.plot);
		return -1;
	}
	return rep_plot(doc, R->o.plot, PROG);
}

/* The results on stdout (and --plot); the exit status. */
int report(struct run *R, struct rep *doc)
{
	size_t npts = chart_place(R, doc);
	int rc = R->failed ? 1 : 0;

	print_results(R, doc);
	if (!R->o.json && !R->o.csv && R->sim)
		printf("\n(simulated backend: not GPU figures)\n");
	if (R->o.plot && write_plot(R, doc, npts))
		rc = 1;
	return rc;
}
