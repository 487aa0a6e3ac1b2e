// SPDX-License-Identifier: MIT
/*
 * report.c - the results model and its emitters (see report.h): building
 * the tree, and writing it as JSON, as aligned tables and CSV through views,
 * and as a labelled listing.  Every tool prints its results through here, so
 * escaping, number formats and column alignment are decided once.
 *
 * Numbers in JSON use %.9g (enough for a double's timing and ratio figures
 * to round-trip as far as they are meaningful); non-finite numbers never
 * reach JSON, they are stored as null.  Strings go through the project's
 * one JSON writer (lib/json.c): bytes that are not UTF-8 become \u00XX,
 * so a file name of any bytes still yields valid JSON, the library's rule.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/json.h"
#include "tools/report.h"

/* ---- building ---- */

static void *must(void *p)
{
	if (!p) {
		fputs("out of memory\n", stderr);
		exit(1);
	}
	return p;
}

static char *dup_or_null(const char *s)
{
	return s ? must(strdup(s)) : NULL;
}

static struct rep *add(struct rep *parent, const char *key, enum rep_type t)
{
	struct rep *r = must(calloc(1, sizeof(*r)));

	r->type = t;
	r->key = dup_or_null(key);
	if (parent->last)
		parent->last->next = r;
	else
		parent->first = r;
	parent->last = r;
	return r;
}

struct rep *rep_new(void)
{
	struct rep *r = must(calloc(1, sizeof(*r)));

	r->type = REP_OBJ;
	return r;
}

void rep_free(struct rep *r)
{
	struct rep *c, *n;

	if (!r)
		return;
	for (c = r->first; c; c = n) {
		n = c->next;
		rep_free(c);
	}
	if (r->type == REP_STR)
		free(r->v.s);
	free(r->key);
	free(r->label);
	free(r->text);
	free(r);
}

struct rep *rep_obj(struct rep *parent, const char *key)
{
	return add(parent, key, REP_OBJ);
}

struct rep *rep_arr(struct rep *parent, const char *key)
{
	return add(parent, key, REP_ARR);
}

struct rep *rep_str(struct rep *parent, const char *key, const char *s)
{
	struct rep *r = add(parent, key, s ? REP_STR : REP_NULL);

	if (s)
		r->v.s = must(strdup(s));
	return r;
}

struct rep *rep_strf(struct rep *parent, const char *key, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return rep_str(parent, key, buf);
}

struct rep *rep_int(struct rep *parent, const char *key, long long v)
{
	struct rep *r = add(parent, key, REP_INT);

	r->v.i = v;
	return r;
}

struct rep *rep_bytes(struct rep *parent, const char *key, uint64_t v)
{
	struct rep *r = add(parent, key, v == UINT64_MAX ? REP_NULL : REP_BYTES);

	r->v.u = v;
	return r;
}

struct rep *rep_num(struct rep *parent, const char *key, double v)
{
	struct rep *r = add(parent, key, isfinite(v) ? REP_NUM : REP_NULL);

	r->v.d = v;
	return r;
}

struct rep *rep_bool(struct rep *parent, const char *key, int v)
{
	struct rep *r = add(parent, key, v == 0 || v == 1 ? REP_BOOL : REP_NULL);

	r->v.i = v;
	return r;
}

struct rep *rep_null(struct rep *parent, const char *key)
{
	return add(parent, key, REP_NULL);
}

struct rep *rep_doc_head(struct rep *doc, const char *prog, const char *backend, int sim,
			 const char *sim_note, int ordinal, const char *device_name)
{
	struct rep *o;

	rep_str(doc, "tool", prog);
	rep_str(doc, "version", PACKAGE_VERSION);
	rep_str(doc, "backend", backend);
	rep_bool(doc, "gpu_figures", !sim);
	if (sim)
		rep_str(doc, "note", sim_note);
	o = rep_obj(doc, "device");
	rep_int(o, "ordinal", ordinal);
	rep_str(o, "name", device_name);
	return o;
}

struct rep *rep_table_only(struct rep *r)
{
	r->table_only = 1;
	return r;
}

const struct rep *rep_get(const struct rep *obj, const char *key)
{
	for (const struct rep *c = obj ? obj->first : NULL; c; c = c->next)
		if (c->key && !strcmp(c->key, key))
			return c;
	return NULL;
}

size_t rep_count(const struct rep *r)
{
	size_t n = 0;

	for (const struct rep *c = r->first; c; c = c->next)
		n++;
	return n;
}

struct rep *rep_label(struct rep *r, const char *label, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	free(r->label);
	r->label = dup_or_null(label);
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(buf, sizeof(buf), fmt, ap);
		va_end(ap);
		free(r->text);
		r->text = must(strdup(buf));
	}
	return r;
}

/* ---- rows described once ---- */

#define MEMBER(row, off, type) (*(const type *)((const char *)(row) + (off)))

static void field_value(struct rep *o, const struct rep_field *f, const void *row,
			const void *arg)
{
	char buf[256];
	const char *s;
	uint64_t u;

	if (f->when && !f->when(row, arg)) {
		rep_null(o, f->key);
		return;
	}
	switch (f->src) {
	case REP_S_STR:
		rep_str(o, f->key, MEMBER(row, f->off, char *));
		return;
	case REP_S_TEXT:
		rep_str(o, f->key, (const char *)row + f->off);
		return;
	case REP_S_BYTES:
		rep_bytes(o, f->key, MEMBER(row, f->off, uint64_t));
		return;
	case REP_S_COUNT:
		u = MEMBER(row, f->off, uint64_t);
		if (u == UINT64_MAX)
			rep_null(o, f->key);
		else
			rep_int(o, f->key, (long long)u);
		return;
	case REP_S_UINT:
		rep_int(o, f->key, MEMBER(row, f->off, unsigned int));
		return;
	case REP_S_SIZE_T:
		rep_int(o, f->key, (long long)MEMBER(row, f->off, size_t));
		return;
	case REP_S_NUM:
		rep_num(o, f->key, MEMBER(row, f->off, double));
		return;
	case REP_S_RATIO:
		rep_num(o, f->key, MEMBER(row, f->off, double) / MEMBER(row, f->off2, double));
		return;
	case REP_S_GBPS:
		rep_num(o, f->key,
			(double)MEMBER(row, f->off2, uint64_t) / MEMBER(row, f->off, double) / 1e9);
		return;
	case REP_S_NUMFN:
		rep_num(o, f->key, f->num(row, arg));
		return;
	case REP_S_BYTESFN:
		rep_bytes(o, f->key, f->bytes(row, arg));
		return;
	case REP_S_STRFN:
		s = f->str(row, arg, buf, sizeof(buf));
		if (s)
			rep_str(o, f->key, s);
		return;
	}
	abort(); /* a source with no case: a broken table */
}

struct rep *rep_row(struct rep *arr, const struct rep_field *f, size_t n, const void *row,
		    const void *arg)
{
	struct rep *o = rep_obj(arr, NULL);

	for (size_t i = 0; i < n; i++) {
		field_value(o, &f[i], row, arg);
		if (f[i].table_only && o->last && o->last->key && !strcmp(o->last->key, f[i].key))
			rep_table_only(o->last);
	}
	return o;
}

struct rep *rep_rows(struct rep *parent, const char *key, const struct rep_field *f, size_t nf,
		     const void *rows, size_t n, size_t size, const void *arg)
{
	struct rep *arr = rep_arr(parent, key);

	for (size_t i = 0; i < n; i++)
		rep_row(arr, f, nf, (const char *)rows + i * size, arg);
	return arr;
}

static struct rep_col field_col(const struct rep_field *f)
{
	return (struct rep_col){.key = f->key, .head = f->head ? f->head : f->key, .fmt = f->fmt,
				.prec = f->prec, .right = f->right, .csv = f->csv};
}

size_t rep_field_cols(const struct rep_field *f, size_t n, int csv, struct rep_col *out)
{
	size_t k = 0;
	int last = 0;

	if (csv) {
		for (size_t i = 0; i < n; i++)
			if (!f[i].table_only && !f[i].nocsv)
				out[k++] = field_col(&f[i]);
		return k;
	}
	for (size_t i = 0; i < n; i++)
		if (f[i].col > last)
			last = f[i].col;
	for (int c = 1; c <= last; c++)
		for (size_t i = 0; i < n; i++)
			if (f[i].col == c)
				out[k++] = field_col(&f[i]);
	return k;
}

void rep_field_table(FILE *out, const struct rep *rows, const struct rep_field *f, size_t n,
		     const struct rep_view *v)
{
	struct rep_col *cols = must(calloc(n ? n : 1, sizeof(*cols)));
	struct rep_view view = *v;

	view.cols = cols;
	view.ncols = rep_field_cols(f, n, 0, cols);
	rep_table(out, rows, &view);
	free(cols);
}

/* ---- cells ---- */

const char *rep_fmt_size(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB"};
	int u = -1;
	double v = (double)b;

	while (v >= 1024 && u < 3) {
		v /= 1024;
		u++;
	}
	if (u < 0)
		snprintf(buf, len, "%llu B", (unsigned long long)b);
	else if (b % (1ull << (10 * (u + 1))) == 0)
		snprintf(buf, len, "%.0f %s", v, unit[u]);
	else
		snprintf(buf, len, "%.2f %s", v, unit[u]);
	return buf;
}

static double as_double(const struct rep *r)
{
	switch (r->type) {
	case REP_INT:
	case REP_BOOL:
		return (double)r->v.i;
	case REP_BYTES:
		return (double)r->v.u;
	case REP_NUM:
		return r->v.d;
	default:
		return NAN;
	}
}

/* The value of a scalar as it stands in CSV and, unformatted, in the table. */
static const char *raw(const struct rep *r, char *buf, size_t len)
{
	switch (r->type) {
	case REP_BOOL:
		return r->v.i ? "true" : "false";
	case REP_INT:
		snprintf(buf, len, "%lld", r->v.i);
		return buf;
	case REP_BYTES:
		snprintf(buf, len, "%llu", (unsigned long long)r->v.u);
		return buf;
	case REP_NUM:
		snprintf(buf, len, "%.9g", r->v.d);
		return buf;
	case REP_STR:
		return r->v.s;
	default:
		return "";
	}
}

const char *rep_cell(const struct rep *row, const struct rep_col *c, char *buf, size_t len)
{
	const struct rep *r = rep_get(row, c->key);
	double d;

	if (!r || r->type == REP_NULL)
		return "-";
	d = as_double(r);
	switch (c->fmt) {
	case REP_F_SIZE:
		return r->type == REP_BYTES ? rep_fmt_size(r->v.u, buf, len) : raw(r, buf, len);
	case REP_F_FIX:
		snprintf(buf, len, "%.*f", c->prec, d);
		return buf;
	case REP_F_US:
		snprintf(buf, len, "%.*f", c->prec, d * 1e6);
		return buf;
	case REP_F_MS:
		snprintf(buf, len, "%.*f", c->prec, d * 1e3);
		return buf;
	case REP_F_PCT:
		snprintf(buf, len, "%.*f", c->prec, d * 100);
		return buf;
	case REP_F_X:
		snprintf(buf, len, "%.*fx", c->prec, d);
		return buf;
	default:
		return raw(r, buf, len);
	}
}

/* ---- table ---- */

static const char *span_of(const struct rep *row, const struct rep_view *v)
{
	const struct rep *s = v->span ? rep_get(row, v->span) : NULL;

	return s && s->type == REP_STR && s->v.s[0] ? s->v.s : NULL;
}

static void table_widths(const struct rep *rows, const struct rep_view *v, int *w)
{
	char buf[128];

	for (size_t k = 0; k < v->ncols; k++)
		w[k] = (int)strlen(v->cols[k].head);
	for (const struct rep *row = rows->first; row; row = row->next) {
		size_t n = span_of(row, v) ? v->nkeys : v->ncols;

		for (size_t k = 0; k < n; k++) {
			int l = (int)strlen(rep_cell(row, &v->cols[k], buf, sizeof(buf)));

			if (l > w[k])
				w[k] = l;
		}
	}
}

static void table_line(FILE *f, const char *const *cells, size_t n, const struct rep_view *v,
		       const int *w, const char *tail)
{
	fprintf(f, "%*s", v->indent, "");
	for (size_t k = 0; k < n; k++) {
		int last = k + 1 == n && !tail;

		if (k)
			fputs("  ", f);
		if (v->cols[k].right)
			fprintf(f, "%*s", w[k], cells[k]);
		else
			fprintf(f, "%-*s", last ? 0 : w[k], cells[k]);
	}
	if (tail)
		fprintf(f, "%s%s", n ? "  " : "", tail);
	fputc('\n', f);
}

void rep_table(FILE *f, const struct rep *rows, const struct rep_view *v)
{
	int *w = must(calloc(v->ncols ? v->ncols : 1, sizeof(*w)));
	const char **cells = must(calloc(v->ncols ? v->ncols : 1, sizeof(*cells)));
	char(*buf)[128] = must(calloc(v->ncols ? v->ncols : 1, sizeof(*buf)));

	table_widths(rows, v, w);
	for (size_t k = 0; k < v->ncols; k++)
		cells[k] = v->cols[k].head;
	table_line(f, cells, v->ncols, v, w, NULL);
	for (const struct rep *row = rows->first; row; row = row->next) {
		const char *span = span_of(row, v);
		size_t n = span ? v->nkeys : v->ncols;

		for (size_t k = 0; k < n; k++)
			cells[k] = rep_cell(row, &v->cols[k], buf[k], sizeof(buf[k]));
		table_line(f, cells, n, v, w, span);
		for (int b = 0; b < 2; b++) {
			const struct rep *x = v->below[b] ? rep_get(row, v->below[b]) : NULL;

			if (x && x->type == REP_STR && x->v.s[0])
				fprintf(f, "%*s%s\n", v->indent + w[0] + 2, "", x->v.s);
		}
	}
	free(buf);
	free(cells);
	free(w);
}

/* ---- CSV ---- */

static void csv_quoted(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', f);
		fputc(*s, f);
	}
	fputc('"', f);
}

void rep_csv(FILE *f, const struct rep *rows, const struct rep_view *v)
{
	char buf[64];

	for (size_t k = 0; k < v->ncols; k++)
		fprintf(f, "%s%s", k ? "," : "", v->cols[k].csv ? v->cols[k].csv : v->cols[k].key);
	fputc('\n', f);
	for (const struct rep *row = rows->first; row; row = row->next) {
		for (size_t k = 0; k < v->ncols; k++) {
			const struct rep *r = rep_get(row, v->cols[k].key);

			if (k)
				fputc(',', f);
			if (v->cols[k].fmt == REP_F_QTEXT)
				csv_quoted(f, r && r->type == REP_STR ? r->v.s : "");
			else if (r)
				fputs(raw(r, buf, sizeof(buf)), f);
		}
		fputc('\n', f);
	}
}

/* ---- JSON ---- */

void rep_json_str(FILE *f, const char *s)
{
	vmmx__json_put_str(f, s);
}

static void json_node(FILE *f, const struct rep *r, int depth)
{
	char buf[64];
	int n = 0;

	if (r->type != REP_OBJ && r->type != REP_ARR) {
		if (r->type == REP_STR)
			rep_json_str(f, r->v.s);
		else
			fputs(r->type == REP_NULL ? "null" : raw(r, buf, sizeof(buf)), f);
		return;
	}
	fputc(r->type == REP_OBJ ? '{' : '[', f);
	for (const struct rep *c = r->first; c; c = c->next) {
		if (c->table_only)
			continue;
		fprintf(f, "%s\n%*s", n++ ? "," : "", 2 * (depth + 1), "");
		if (r->type == REP_OBJ) {
			rep_json_str(f, c->key);
			fputs(": ", f);
		}
		json_node(f, c, depth + 1);
	}
	if (n)
		fprintf(f, "\n%*s", 2 * depth, "");
	fputc(r->type == REP_OBJ ? '}' : ']', f);
}

void rep_json(FILE *f, const struct rep *r)
{
	json_node(f, r, 0);
	fputc('\n', f);
}

/* ---- labelled listing ---- */

/* @text in the value column, wrapped at 80 columns under @width. */
static void text_value(FILE *f, int indent, const char *label, int width, const char *text)
{
	int room = 80 - width > 20 ? 80 - width : 20, first = 1;

	do {
		int n = (int)strlen(text);

		if (n > room) {
			n = room;
			while (n > 0 && text[n] != ' ')
				n--;
			/* A word longer than the column (a path) is not cut. */
			if (!n)
				n = (int)strcspn(text, " ");
		}
		if (first)
			fprintf(f, "%*s%-*s%.*s\n", indent, "", width - indent, label, n, text);
		else
			fprintf(f, "%*s%.*s\n", width, "", n, text);
		first = 0;
		text += n;
		while (*text == ' ')
			text++;
	} while (*text);
}

static int has_labels(const struct rep *r)
{
	for (const struct rep *c = r->first; c; c = c->next)
		if (c->label || (c->first && has_labels(c)))
			return 1;
	return 0;
}

static void text_node(FILE *f, const struct rep *r, int indent, int width)
{
	char buf[64];

	for (const struct rep *c = r->first; c; c = c->next) {
		int container = c->type == REP_OBJ || c->type == REP_ARR;

		if (!c->label) {
			if (container)
				text_node(f, c, indent, width);
			continue;
		}
		if (container && !indent && has_labels(c))
			fputc('\n', f);
		if (c->text)
			text_value(f, indent, c->label, width, c->text);
		else if (container)
			fprintf(f, "%*s%s\n", indent, "", c->label);
		else
			text_value(f, indent, c->label, width,
				   c->type == REP_BYTES ? rep_fmt_size(c->v.u, buf, sizeof(buf))
							: raw(c, buf, sizeof(buf)));
		if (container)
			text_node(f, c, indent + 2, width);
	}
}

void rep_text(FILE *f, const struct rep *r, int indent, int width)
{
	text_node(f, r, indent, width);
}

/* ---- charts ---- */

static struct rep *child(struct rep *r, const char *key)
{
	for (struct rep *c = r->first; c; c = c->next)
		if (c->key && !strcmp(c->key, key))
			return c;
	return NULL;
}

struct rep *rep_chart(struct rep *doc, const char *name, const char *title, const char *xlabel,
		      const char *xunit, int xlog2, const char *ylabel, const char *yunit)
{
	struct rep *charts = child(doc, "charts"), *c, *ax;

	if (!charts)
		charts = rep_arr(doc, "charts");
	c = rep_obj(charts, NULL);
	rep_str(c, "name", name);
	rep_str(c, "title", title);
	ax = rep_obj(c, "x");
	rep_str(ax, "label", xlabel);
	rep_str(ax, "unit", xunit);
	rep_str(ax, "scale", xlog2 ? "log2" : "linear");
	ax = rep_obj(c, "y");
	rep_str(ax, "label", ylabel);
	rep_str(ax, "unit", yunit);
	rep_str(ax, "scale", "linear");
	rep_arr(c, "series");
	return c;
}

struct rep *rep_series(struct rep *chart, const char *name)
{
	struct rep *s = rep_obj(child(chart, "series"), NULL);

	rep_str(s, "name", name);
	rep_arr(s, "x");
	rep_arr(s, "y");
	return s;
}

void rep_point(struct rep *series, double x, double y)
{
	rep_num(child(series, "x"), NULL, x);
	rep_num(child(series, "y"), NULL, y);
}

/* The vmmx-plot to run: beside this program, above it (.libs), installed, or PATH's. */
static const char *find_plotter(char *buf, size_t len)
{
	static const char *const rel[] = {"/vmmx-plot", "/../vmmx-plot"};
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	char *slash;

	if (n > 0) {
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
			snprintf(buf, len, "%s%s", exe, rel[i]);
			if (!access(buf, X_OK))
				return buf;
		}
	}
#ifdef VMMX_BINDIR
	snprintf(buf, len, "%s/vmmx-plot", VMMX_BINDIR);
	if (!access(buf, X_OK))
		return buf;
#endif
	return "vmmx-plot";
}

static int run_plotter(const char *json, const char *path)
{
	char buf[PATH_MAX + 16];
	const char *plotter = find_plotter(buf, sizeof(buf));
	int st;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (!pid) {
		execlp(plotter, "vmmx-plot", json, "-o", path, (char *)NULL);
		fprintf(stderr, "vmmx-plot: cannot run %s: %s\n", plotter, strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	return WIFEXITED(st) && !WEXITSTATUS(st) ? 0 : -1;
}

int rep_plot_check(const char *path, const char *prog)
{
	const char *dot = strrchr(path, '.');
	int fd;

	/* vmmx-plot's own rule (python/vmmx_tools/plot.py): the format is the extension. */
	if (!dot || strchr(dot, '/') ||
	    (strcasecmp(dot, ".png") && strcasecmp(dot, ".svg") && strcasecmp(dot, ".pdf"))) {
		fprintf(stderr,
			"%s: --plot %s: expected a file name ending in .png, .svg or .pdf\n", prog,
			path);
		return -1;
	}
	/* O_NONBLOCK: a FIFO without a reader answers ENXIO instead of hanging here. */
	fd = open(path, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0) {
		fprintf(stderr, "%s: --plot %s: cannot write: %s\n", prog, path, strerror(errno));
		return -1;
	}
	close(fd);
	return 0;
}

int rep_plot(const struct rep *doc, const char *path, const char *prog)
{
	const char *dir = getenv("TMPDIR");
	char tmp[PATH_MAX];
	FILE *f;
	int fd, err;

	snprintf(tmp, sizeof(tmp), "%s/vmmx-plot.XXXXXX.json", dir && *dir ? dir : "/tmp");
	fd = mkstemps(tmp, 5);
	f = fd < 0 ? NULL : fdopen(fd, "w");
	if (!f) {
		fprintf(stderr, "%s: --plot %s: a temporary file: %s\n", prog, path,
			strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	rep_json(f, doc);
	err = fclose(f) ? -1 : run_plotter(tmp, path);
	unlink(tmp);
	if (err)
		fprintf(stderr, "%s: --plot %s: vmmx-plot failed\n", prog, path);
	return err;
}
