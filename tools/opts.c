// SPDX-License-Identifier: MIT
/*
 * opts.c - the tools' shared option parsing (see opts.h): one getopt_long
 * loop driven by each tool's table, the value parsers behind the table's
 * kinds (sizes, counts, comma lists of names), and the usage-error tail
 * that every tool answers alike with exit status 2.  The messages are the
 * ones the tools printed before they shared this code; the tools' tests
 * check them.  State is getopt's: single-threaded, one parse per process.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tools/opts.h"

/* Long options with no letter return this plus their index in the table. */
#define OPT_BASE 256
/* --version: no letter, below every table entry's code. */
#define OPT_VERSION (OPT_BASE - 1)

int tool_parse_sizes(const char *prog, const char *what, const char *s, uint64_t *out, int max)
{
	char *copy = strdup(s), *save = NULL, *tok;
	int n = 0;

	if (!copy) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return -1;
	}
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;

		if (n == max) {
			fprintf(stderr, "%s: %s %s: at most %d sizes\n", prog, what, s, max);
			goto bad;
		}
		if (vmmx_parse_size(tok, 0, &v) || !v) {
			fprintf(
			    stderr,
			    "%s: %s %s: bad size \"%s\": expected a nonzero size such as 512MiB, "
			    "4GiB or 4G (K, M, G, T and KiB..TiB are powers of 1024, KB..TB of "
			    "1000)\n",
			    prog, what, s, tok);
			goto bad;
		}
		out[n++] = v;
	}
	if (!n) {
		fprintf(stderr, "%s: %s: empty list of sizes\n", prog, what);
		goto bad;
	}
	free(copy);
	return n;
bad:
	free(copy);
	return -1;
}

int tool_parse_count(const char *prog, const char *opt, const char *s, unsigned int min,
		     unsigned int max, unsigned int *out)
{
	char *end;
	unsigned long v = strtoul(s, &end, 10);

	if (!*s || *end || *s == '-' || v < min || v > max) {
		fprintf(stderr, "%s: %s %s: expected a whole number from %u to %u\n", prog, opt, s,
			min, max);
		return -1;
	}
	*out = (unsigned int)v;
	return 0;
}

int tool_parse_names(const char *prog, const char *opt, const char *s, const char *const *names,
		     int n, int *out)
{
	char *copy = strdup(s), *save = NULL, *tok;

	if (!copy)
		return -1;
	memset(out, 0, (size_t)n * sizeof(*out));
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		int i;

		for (i = 0; i < n && strcmp(tok, names[i]); i++)
			;
		if (i == n) {
			fprintf(stderr, "%s: %s %s: unknown \"%s\" (expected", prog, opt, s, tok);
			for (i = 0; i < n; i++)
				fprintf(stderr, "%s%s", i ? ", " : " ", names[i]);
			fprintf(stderr, ")\n");
			free(copy);
			return -1;
		}
		out[i] = 1;
	}
	free(copy);
	return 0;
}

int tool_opts_exclusive(const char *prog, int a, const char *aname, int b, const char *bname)
{
	if (!a || !b)
		return 0;
	fprintf(stderr, "%s: %s and %s exclude each other\n", prog, aname, bname);
	return 2;
}

/* One option's argument into its destination: 0 or an exit status. */
static int take(const char *prog, const struct tool_opt *t, const char *arg)
{
	char opt[64];
	int n;

	snprintf(opt, sizeof(opt), "--%s", t->name);
	switch (t->kind) {
	case TOOL_OPT_FLAG:
		*(int *)t->dest = 1;
		return 0;
	case TOOL_OPT_STR:
		*(const char **)t->dest = arg;
		return 0;
	case TOOL_OPT_COUNT:
		return tool_parse_count(prog, opt, arg, t->min, t->max, t->dest) ? 2 : 0;
	case TOOL_OPT_SIZE:
		if (vmmx_parse_size(arg, 0, t->dest) || !*(uint64_t *)t->dest) {
			fprintf(stderr,
				"%s: %s %s: bad size: expected a nonzero size such as 64MiB or "
				"4GiB\n",
				prog, opt, arg);
			return 2;
		}
		return 0;
	case TOOL_OPT_SIZES:
		n = tool_parse_sizes(prog, opt, arg, t->dest, (int)t->max);
		if (n < 0)
			return 2;
		if (t->n)
			*t->n = n;
		return 0;
	case TOOL_OPT_NAMES:
		return tool_parse_names(prog, opt, arg, t->names, (int)t->max, t->dest) ? 2 : 0;
	case TOOL_OPT_FN:
		return t->fn(t->dest, arg);
	}
	abort(); /* a kind with no case: a broken table */
}

/* getopt_long's tables from the tool's: letters first, then "h"; then --version. */
static struct option *build(const struct tool_opt *tab, char *shorts, size_t len)
{
	size_t n = 0, k = 0;
	struct option *lo;

	while (tab[n].name)
		n++;
	lo = calloc(n + 3, sizeof(*lo));
	if (!lo)
		return NULL;
	shorts[k++] = ':';
	for (size_t i = 0; i < n; i++) {
		int arg = tab[i].kind != TOOL_OPT_FLAG;

		lo[i] = (struct option){tab[i].name, arg ? required_argument : no_argument, NULL,
					tab[i].letter ? tab[i].letter : OPT_BASE + (int)i};
		if (tab[i].letter && k + 3 < len) {
			shorts[k++] = (char)tab[i].letter;
			if (arg)
				shorts[k++] = ':';
		}
	}
	lo[n] = (struct option){"help", no_argument, NULL, 'h'};
	lo[n + 1] = (struct option){"version", no_argument, NULL, OPT_VERSION};
	shorts[k++] = 'h';
	shorts[k] = '\0';
	return lo;
}

/* The entry getopt_long answered @c for; NULL: none. */
static const struct tool_opt *find(const struct tool_opt *tab, int c)
{
	for (int i = 0; tab[i].name; i++)
		if (c == (tab[i].letter ? tab[i].letter : OPT_BASE + i))
			return &tab[i];
	return NULL;
}

/* The usage-error tail: the message, the usage on stderr, status 2. */
__attribute__((format(printf, 3, 4))) static int bad_usage(const char *prog, void (*usage)(FILE *f),
							   const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", prog);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	usage(stderr);
	return 2;
}

int tool_opts_parse(const char *prog, void (*usage)(FILE *f), const struct tool_opt *tab, int argc,
		    char **argv)
{
	char shorts[128];
	struct option *lo = build(tab, shorts, sizeof(shorts));
	const struct tool_opt *t;
	int c, rc = 0;

	if (!lo) {
		fprintf(stderr, "%s: out of memory\n", prog);
		return 1;
	}
	opterr = 0;
	while (!rc && (c = getopt_long(argc, argv, shorts, lo, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			rc = -1;
		} else if (c == OPT_VERSION) {
			tool_print_version(prog);
			rc = -1;
		} else if (c == ':') {
			rc = bad_usage(prog, usage, "%s needs an argument", argv[optind - 1]);
		} else if (!(t = find(tab, c))) {
			rc = bad_usage(prog, usage, "unknown option %s", argv[optind - 1]);
		} else {
			rc = take(prog, t, optarg);
			if (!rc && t->given)
				*t->given = 1;
		}
	}
	free(lo);
	if (!rc && optind < argc)
		rc = bad_usage(prog, usage, "unexpected argument \"%s\"", argv[optind]);
	return rc;
}
