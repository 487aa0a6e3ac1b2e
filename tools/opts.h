/* SPDX-License-Identifier: MIT */
/*
 * opts.h - the command-line options the tools share, parsed from one table
 * per tool.  A tool lists its options as struct tool_opt entries (a long
 * name, an optional short letter, a kind and where the value goes);
 * tool_opts_parse() runs getopt_long over them and owns what every tool
 * does alike: sizes through vmmx_parse_size(), bounded counts, comma lists
 * of names, --json/--csv/--plot/-q flags, -h, and the tail (a missing
 * argument, an unknown option, a stray argument: a message naming it, the
 * usage on stderr, exit status 2).  Checks that tie options together stay
 * with the tool.
 *
 * Messages go to stderr as "PROG: --OPTION VALUE: ..." and always name the
 * long option, whichever spelling was used.  Not thread-safe (getopt):
 * the tools are single-threaded.  Not part of libvmmx: no vmmx_ prefix.
 */
#ifndef TOOLS_OPTS_H
#define TOOLS_OPTS_H

#include <stdint.h>
#include <stdio.h>

/** enum tool_opt_kind - what an option takes and where it puts it. */
enum tool_opt_kind {
	TOOL_OPT_FLAG,	/* no argument; *(int *)dest = 1 */
	TOOL_OPT_STR,	/* *(const char **)dest = the argument */
	TOOL_OPT_COUNT, /* a whole number from min to max into *(unsigned int *)dest */
	TOOL_OPT_SIZE,	/* one nonzero size into *(uint64_t *)dest ("such as 64MiB") */
	TOOL_OPT_SIZES, /* a comma list of up to max nonzero sizes into (uint64_t *)dest,
			 * the count into *n; max 1 and n NULL: one size, list grammar */
	TOOL_OPT_NAMES, /* a comma list of names[0..max); dest is int[max], 1 where named */
	TOOL_OPT_FN,	/* fn(dest, argument) returns 0 or an exit status */
};

/**
 * struct tool_opt - one option of a tool's table; the table ends with an
 * entry whose name is NULL.  Unused members stay zero.
 */
struct tool_opt {
	const char *name;	  /* long name without "--" */
	int letter;		  /* short option letter; 0: none */
	enum tool_opt_kind kind;  /* what it takes */
	void *dest;		  /* where the value goes (see the kinds) */
	int *n;			  /* TOOL_OPT_SIZES: the count of sizes */
	unsigned int min, max;	  /* TOOL_OPT_COUNT: bounds; SIZES, NAMES: most entries */
	const char *const *names; /* TOOL_OPT_NAMES: the accepted words */
	int *given;		  /* set to 1 when the option is met; may be NULL */
	/* TOOL_OPT_FN: takes the argument; 0 or an exit status. */
	int (*fn)(void *dest, const char *arg);
};

/*
 * Table entries, typed so that each destination has its kind's type; the
 * last four are the entries every tool spells alike.
 */
static inline struct tool_opt tool_opt_count(const char *name, int letter, unsigned int *p,
					     unsigned int min, unsigned int max, int *given)
{
	return (struct tool_opt){.name = name,
				 .letter = letter,
				 .kind = TOOL_OPT_COUNT,
				 .dest = p,
				 .min = min,
				 .max = max,
				 .given = given};
}

static inline struct tool_opt tool_opt_size(const char *name, uint64_t *p, int *given)
{
	return (struct tool_opt){.name = name, .kind = TOOL_OPT_SIZE, .dest = p, .given = given};
}

/* @n NULL and @max 1: one size, in the list's grammar and messages. */
static inline struct tool_opt tool_opt_sizes(const char *name, int letter, uint64_t *p, int max,
					     int *n)
{
	return (struct tool_opt){.name = name,
				 .letter = letter,
				 .kind = TOOL_OPT_SIZES,
				 .dest = p,
				 .n = n,
				 .max = (unsigned int)max};
}

static inline struct tool_opt tool_opt_names(const char *name, int *out, const char *const *names,
					     int n)
{
	return (struct tool_opt){.name = name,
				 .kind = TOOL_OPT_NAMES,
				 .dest = out,
				 .names = names,
				 .max = (unsigned int)n};
}

static inline struct tool_opt tool_opt_fn(const char *name, int letter,
					  int (*fn)(void *dest, const char *arg), void *dest,
					  int *given)
{
	return (struct tool_opt){.name = name,
				 .letter = letter,
				 .kind = TOOL_OPT_FN,
				 .fn = fn,
				 .dest = dest,
				 .given = given};
}

static inline struct tool_opt tool_opt_flag(const char *name, int letter, int *p)
{
	return (struct tool_opt){.name = name, .letter = letter, .kind = TOOL_OPT_FLAG, .dest = p};
}

static inline struct tool_opt tool_opt_json(int *p)
{
	return tool_opt_flag("json", 0, p);
}

static inline struct tool_opt tool_opt_csv(int *p)
{
	return tool_opt_flag("csv", 0, p);
}

static inline struct tool_opt tool_opt_quiet(int *p)
{
	return tool_opt_flag("quiet", 'q', p);
}

static inline struct tool_opt tool_opt_plot(const char **p)
{
	return (struct tool_opt){.name = "plot", .kind = TOOL_OPT_STR, .dest = p};
}

/**
 * tool_opts_parse() - parse @argv against @tab; -h/--help and --version
 * are always there.
 * @prog: the tool's name, for messages.
 * @usage: prints the usage to the stream given.
 *
 * Return: 0 parsed; -1 --help printed the usage, or --version the version,
 * on stdout (exit 0); 2 bad
 * usage, after a message on stderr; or the status a TOOL_OPT_FN returned.
 */
int tool_opts_parse(const char *prog, void (*usage)(FILE *f), const struct tool_opt *tab, int argc,
		    char **argv);

/**
 * tool_opts_exclusive() - 2 after "PROG: --A and --B exclude each other"
 * when both flags @a and @b are set; 0 otherwise.
 */
int tool_opts_exclusive(const char *prog, int a, const char *aname, int b, const char *bname);

/**
 * tool_parse_sizes() - a comma-separated list of sizes (vmmx_parse_size()
 * grammar, no percentages, none zero).
 * @what: the option, for the message.
 * @out, @max: up to @max sizes.
 * Return: the count, or -1 after printing "PROG: WHAT VALUE: ..." to stderr.
 */
int tool_parse_sizes(const char *prog, const char *what, const char *s, uint64_t *out, int max);

/**
 * tool_parse_count() - a whole number from @min to @max given to option @opt;
 * 0, or -1 after a message on stderr naming the option and the range.
 */
int tool_parse_count(const char *prog, const char *opt, const char *s, unsigned int min,
		     unsigned int max, unsigned int *out);

/**
 * tool_parse_names() - a comma list of words out of @names[0..@n): @out[i]
 * is 1 where names[i] is listed, else 0.  Return: 0, or -1 after a message
 * naming the unknown word and the expected ones.
 */
int tool_parse_names(const char *prog, const char *opt, const char *s, const char *const *names,
		     int n, int *out);

#include "stdout.h" /* tool_close_stdout_at_exit */

#endif /* TOOLS_OPTS_H */
