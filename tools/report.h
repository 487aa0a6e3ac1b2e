/* SPDX-License-Identifier: MIT */
/*
 * report.h - the tools' one results model and its emitters.  A tool builds
 * its results once, as a tree of named values (objects, arrays, numbers
 * with units, byte counts, strings, flags, null); sections put their rows
 * in arrays of objects, one object a row.  The emitters then write that one
 * tree as JSON (rep_json), an array of rows as an aligned table or as CSV
 * through a view that names its columns (rep_table, rep_csv), or a tree of
 * labelled values as an indented "label  value" listing (rep_text).
 *
 * Memory: nodes are malloc'd and freed with the whole tree (rep_free).  The
 * tools are command-line programs: running out of memory while building
 * results prints "out of memory" and exits with status 1.  Not thread-safe:
 * the tools are single-threaded.  Not part of libvmmx: no vmmx_ prefix.
 */
#ifndef TOOLS_REPORT_H
#define TOOLS_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/** enum rep_type - what a node holds. */
enum rep_type {
	REP_NULL,  /* JSON null: not measured, unknown, none */
	REP_BOOL,  /* true or false */
	REP_INT,   /* a signed whole number */
	REP_BYTES, /* a byte count (unit B): "4 MiB" in tables, the number in JSON and CSV */
	REP_NUM,   /* a real number; non-finite values are stored as REP_NULL */
	REP_STR,   /* a string (any bytes: JSON escapes what is not UTF-8) */
	REP_OBJ,   /* named members, in the order they were added */
	REP_ARR,   /* unnamed elements */
};

/** struct rep - a node of the results tree (members private but for type). */
struct rep {
	enum rep_type type;
	char *key;   /* the member's name in its object; NULL in an array */
	char *label; /* rep_text(): shown under this label; NULL: not shown */
	char *text;  /* rep_text(): shown instead of the value or the children */
	int table_only; /* rep_table_only(): left out of JSON */
	union {
		long long i;
		uint64_t u;
		double d;
		char *s;
	} v;
	struct rep *first, *last, *next; /* children of an object or array */
};

/** rep_new() - an empty root object. */
struct rep *rep_new(void);

/** rep_free() - free a tree (NULL: nothing). */
void rep_free(struct rep *r);

/*
 * Adding members: @parent is an object (then @key names the member) or an
 * array (then @key must be NULL).  Each returns the new node, so that the
 * caller may label it for rep_text().
 */
struct rep *rep_obj(struct rep *parent, const char *key);
struct rep *rep_arr(struct rep *parent, const char *key);
struct rep *rep_str(struct rep *parent, const char *key, const char *s); /* NULL s: null */
struct rep *rep_strf(struct rep *parent, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct rep *rep_int(struct rep *parent, const char *key, long long v);
struct rep *rep_bytes(struct rep *parent, const char *key, uint64_t v); /* UINT64_MAX: null */
struct rep *rep_num(struct rep *parent, const char *key, double v);	/* NaN, inf: null */
struct rep *rep_bool(struct rep *parent, const char *key, int v);	/* not 0 or 1: null */
struct rep *rep_null(struct rep *parent, const char *key);

/**
 * rep_doc_head() - the members that open an experiment tool's document:
 * "tool" (@prog), "version", "backend", "gpu_figures" (not @sim), "note"
 * (@sim_note, on the sim only) and a "device" object with "ordinal" and
 * "name".  Returns that object, for the tool to add its own members to.
 */
struct rep *rep_doc_head(struct rep *doc, const char *prog, const char *backend, int sim,
			 const char *sim_note, int ordinal, const char *device_name);

/**
 * rep_table_only() - keep @r out of JSON: a cell made for people (a value
 * as shown, a verdict with its reason) that the JSON says otherwise.
 * Returns @r.
 */
struct rep *rep_table_only(struct rep *r);

/** rep_get() - the member @key of object @obj, or NULL. */
const struct rep *rep_get(const struct rep *obj, const char *key);

/** rep_count() - the number of children of @r. */
size_t rep_count(const struct rep *r);

/**
 * rep_label() - show @r in rep_text() under @label, with @fmt's text as its
 * value (NULL @fmt: the value itself, or, for an object or array, a heading
 * line and its labelled children indented below it).  Returns @r.
 */
struct rep *rep_label(struct rep *r, const char *label, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- views of an array of rows ---- */

/** enum rep_fmt - how a column's cell is shown in a table. */
enum rep_fmt {
	REP_F_TEXT,  /* a string as is; CSV: unquoted (words without commas) */
	REP_F_QTEXT, /* a string as is; CSV: quoted, with "" for a quote */
	REP_F_INT,   /* a whole number */
	REP_F_SIZE,  /* a byte count as "4 MiB", "1.50 GiB" */
	REP_F_FIX,   /* a real number with @prec digits after the point */
	REP_F_US,    /* seconds shown as microseconds, @prec digits after the point */
	REP_F_MS,    /* seconds shown as milliseconds, @prec digits after the point */
	REP_F_PCT,   /* a fraction shown as a percentage, @prec digits after the point */
	REP_F_X,     /* a ratio shown as "1.23x" (@prec digits) */
};

/**
 * struct rep_col - a column of a view.
 * @key: the row member shown; also the CSV header.
 * @head: the table header.
 * @fmt, @prec: how the table shows the cell; null cells show "-".
 * @right: right-align the column in the table.
 * @csv: the CSV header, where it differs from @key.
 */
struct rep_col {
	const char *key;
	const char *head;
	enum rep_fmt fmt;
	int prec;
	int right;
	const char *csv;
};

/**
 * struct rep_view - the columns of a table or CSV over an array of rows.
 * @cols, @ncols: the columns, in order.
 * @span: a row member; where a row has it as a non-empty string, the table
 *        shows that text in place of the columns after the first @nkeys
 *        (an unmeasured row: "unavailable: sim backend").  NULL: none.
 * @nkeys: the columns that identify a row (kept before @span's text).
 * @below: up to two row members shown each on a line of its own under the
 *         row, indented, where they are non-empty strings; NULL: none.
 * @indent: spaces before every line of the table.
 */
struct rep_view {
	const struct rep_col *cols;
	size_t ncols;
	const char *span;
	size_t nkeys;
	const char *below[2];
	int indent;
};

/* ---- rows described once ---- */

/** enum rep_src - where a field's value comes from in a row struct. */
enum rep_src {
	REP_S_STR,     /* a const char * member (NULL: null) */
	REP_S_TEXT,    /* a char array member */
	REP_S_BYTES,   /* a uint64_t member, a byte count (UINT64_MAX: null) */
	REP_S_COUNT,   /* a uint64_t member, a count (UINT64_MAX: null) */
	REP_S_UINT,    /* an unsigned int member */
	REP_S_SIZE_T,  /* a size_t member, a count */
	REP_S_NUM,     /* a double member (not finite: null) */
	REP_S_RATIO,   /* double member @off over double member @off2 */
	REP_S_GBPS,    /* uint64_t member @off2 (bytes) over double member @off (seconds), GB/s */
	REP_S_NUMFN,   /* @num(row, arg): a derived figure */
	REP_S_BYTESFN, /* @bytes(row, arg): a derived byte count (UINT64_MAX: null) */
	REP_S_STRFN,   /* @str(row, arg, buf, len): a string; NULL: the member is left out */
};

/**
 * struct rep_field - one figure of a row: where it is in the row struct,
 * its JSON member, and how a table and CSV show it.  A section lists its
 * rows' figures once, in an array of these; rep_row() builds a row's JSON
 * object from it and rep_field_cols() the table's or the CSV's columns.
 * @key: the JSON member, the column's key and (unless @csv) its CSV header.
 * @src, @off, @off2: where the value is (offsetof in the row struct).
 * @num, @bytes, @str: derived values (@arg is rep_row()'s).
 * @when: where given and false for a row, the value is null (not measured).
 * @col: the table column, 1 first; 0: not in the table.
 * @head, @fmt, @prec, @right: the table's header and cell (struct rep_col).
 * @table_only: a cell made for people, left out of JSON and CSV.
 * @nocsv: left out of CSV.
 * @csv: the CSV header, where it differs from @key.
 */
struct rep_field {
	const char *key;
	enum rep_src src;
	size_t off, off2;
	double (*num)(const void *row, const void *arg);
	uint64_t (*bytes)(const void *row, const void *arg);
	const char *(*str)(const void *row, const void *arg, char *buf, size_t len);
	int (*when)(const void *row, const void *arg);
	int col;
	const char *head;
	enum rep_fmt fmt;
	int prec;
	int right;
	int table_only;
	int nocsv;
	const char *csv;
};

/** REP_NFIELDS() - the number of entries of a field array. */
#define REP_NFIELDS(a) (sizeof(a) / sizeof((a)[0]))

/**
 * rep_row() - add to array @arr an object holding @row's @n fields @f, in
 * that order.  @arg goes to the fields' functions.  Returns the object.
 */
struct rep *rep_row(struct rep *arr, const struct rep_field *f, size_t n, const void *row,
		    const void *arg);

/**
 * rep_rows() - add to @parent an array @key of @n rows (@rows, each @size
 * bytes), each built by rep_row() from @f.  Returns the array.
 */
struct rep *rep_rows(struct rep *parent, const char *key, const struct rep_field *f, size_t nf,
		     const void *rows, size_t n, size_t size, const void *arg);

/**
 * rep_field_cols() - the columns of @n fields @f into @out (room for @n):
 * the table's (@csv 0: the fields with a @col, in @col order) or the CSV's
 * (@csv 1: every field but table-only and @nocsv ones, in field order).
 * Returns how many.
 */
size_t rep_field_cols(const struct rep_field *f, size_t n, int csv, struct rep_col *out);

/**
 * rep_field_table() - @rows (objects made by rep_row() from @f) as a table
 * through the view @v, whose columns are the fields' (rep_field_cols()).
 */
void rep_field_table(FILE *out, const struct rep *rows, const struct rep_field *f, size_t n,
		     const struct rep_view *v);

/** rep_fmt_size() - "2 MiB", "1.50 GiB", "512 B"; returns @buf. */
const char *rep_fmt_size(uint64_t b, char *buf, size_t len);

/**
 * rep_cell() - the table text of @row's cell in column @c ("-" when the
 * member is missing or null); returns @buf.
 */
const char *rep_cell(const struct rep *row, const struct rep_col *c, char *buf, size_t len);

/** rep_table() - @rows (an array of objects) as an aligned table with a header line. */
void rep_table(FILE *f, const struct rep *rows, const struct rep_view *v);

/** rep_csv() - @rows as CSV: a header of the column keys, then one line a row. */
void rep_csv(FILE *f, const struct rep *rows, const struct rep_view *v);

/** rep_json() - the whole tree @r as JSON (UTF-8, invalid bytes as \u00XX), then a newline. */
void rep_json(FILE *f, const struct rep *r);

/**
 * rep_text() - the labelled members of object @r as "label  value" lines,
 * @indent spaces in, labels padded to @width columns.  A labelled object or
 * array shows its text (if any) on its own line, then its labelled members
 * two columns further in; at @indent 0 a blank line goes before it when it
 * has any.  An unlabelled object or array shows its labelled members as if
 * they were its parent's; unlabelled values are not shown.
 */
void rep_text(FILE *f, const struct rep *r, int indent, int width);

/* ---- charts, drawn by vmmx-plot (python/vmmx_tools/plot.py) ---- */

/**
 * rep_chart() - add a chart to @doc's "charts" array (made on first use).
 * @name: the chart's name (vmmx-plot --chart NAME).
 * @xunit, @yunit: units; "B" marks byte counts (ticks read 2 MiB, 1 GiB).
 * @xlog2: nonzero where x doubles from point to point: a log-2 x axis.
 * Return: the chart, for rep_series().
 */
struct rep *rep_chart(struct rep *doc, const char *name, const char *title, const char *xlabel,
		      const char *xunit, int xlog2, const char *ylabel, const char *yunit);

/** rep_series() - add a line named @name to @chart; returns it, for rep_point(). */
struct rep *rep_series(struct rep *chart, const char *name);

/** rep_point() - add the point (@x, @y) to @series; a non-finite one breaks the line. */
void rep_point(struct rep *series, double x, double y);

/**
 * rep_plot() - draw @doc's charts into @path (.png, .svg or .pdf) by
 * writing @doc as JSON to a temporary file and running vmmx-plot on it.
 * vmmx-plot is looked for beside the running program (and above it, for
 * libtool's .libs), then in the installed bindir, then in PATH.
 * Return: 0; -1 after a message on stderr naming @prog and @path (the
 * plotter's own message, for example a missing matplotlib, comes first).
 */
int rep_plot(const struct rep *doc, const char *path, const char *prog);

/**
 * rep_plot_check() - whether rep_plot() could write @path, asked before the
 * measurement that feeds it rather than after: the name ends in .png, .svg
 * or .pdf (any case), and the file can be opened for writing.  An existing
 * file is opened without truncation and left as it is; a new one is created
 * and removed again.
 * Return: 0; -1 after "PROG: --plot PATH: why" on stderr.
 */
int rep_plot_check(const char *path, const char *prog);

/** rep_json_str() - @s as a JSON string literal, quotes included. */
void rep_json_str(FILE *f, const char *s);

#endif /* TOOLS_REPORT_H */
