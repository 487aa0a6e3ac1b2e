/* SPDX-License-Identifier: MIT */
/*
 * bench.h - what vmmx-bench's files share: the options, each section's
 * rows and its part of the results (struct bench), the section table, and
 * the helpers of vmmx-bench.c.  A section (bench-SECTION.c) measures into
 * its rows, describes their figures once (struct rep_field: the JSON
 * member, the table column), and adds its targets and charts.
 * Single-threaded, like the tool.
 */
#ifndef TOOLS_BENCH_H
#define TOOLS_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vmmx.h"
#include "tools/ctx.h"
#include "tools/gpu.h"
#include "tools/opts.h"
#include "tools/report.h"

#include "tools/ctx.h"

#define PROG	      "vmmx-bench"
#define MAX_CHUNKS    16
#define MAX_STEPS     4096
#define MAX_DOUBLINGS 40

enum section { S_OPS, S_GROW, S_DOUBLING, S_SHRINK, S_COPY, S_STREAM, S_MIGRATE, S_SLEEP,
	       S_COUNT };

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

/* The sleep section: seconds per call for the whole range (medians of --reps). */
struct sleep_res {
	double sleep, wake;		/* offload, after a warm-up cycle (host memory kept) */
	double first_sleep;		/* the first offload: host memory pinned anew */
	double discard, dwake;		/* discard and its wake */
	uint64_t creates;		/* handles made by the warm sleeps (0: no host memory pinned anew) */
	char why[256];			/* "" or why it was not measured */
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

/* Each section's results, written by its run and read by its doc, print and targets. */
struct ops_res {
	struct op_row rows[MAX_CHUNKS * 2 * 9];
	size_t n;
};

struct grow_res {
	struct grow_step steps[MAX_STEPS];
	size_t n;
	double vmmx, realloc;
	uint64_t vmmx_peak, realloc_peak;
	char why[256];
};

struct dbl_res {
	struct dbl_row rows[MAX_DOUBLINGS];
	size_t n;
	double query;           /* seconds of one vmmx_ctx_query (it reads free memory) */
};

struct shrink_res {
	struct shrink_row rows[3];
	size_t n;
};

struct copy_res {
	struct copy_row rows[4];
	size_t n;
	char why[256];
};

struct stream_res {
	struct stream_row rows[3];
	size_t n;
};

struct mig_res {
	struct mig_row rows[MAX_CHUNKS * 2 + 2];
	size_t n;
	struct mig_base pcie, uvm; /* the baselines (the sleep section compares with pcie) */
};

struct bench {
	struct bopts o;
	struct vmmx_ctx_info info;
	int sim, failed;
	const char *kwhy; /* NULL: kernels run */
	size_t gran;
	struct ops_res ops;
	struct grow_res grow;
	struct dbl_res dbl;
	struct shrink_res shr;
	struct copy_res copy;
	struct stream_res stream;
	struct mig_res mig;
	struct sleep_res slp;
	struct target targets[8 + MAX_CHUNKS * 2 + 1];
	size_t ntargets;
	int ran[S_COUNT];
};

/**
 * struct bench_section - one section of vmmx-bench, in the order they run.
 * @name: its --only word and its JSON member.
 * @run: measure into its rows of struct bench.
 * @doc: add its results to the tree (after it ran).
 * @print: its table(s) from that tree.
 * @targets: add its targets (NULL: none); @chart: add its chart (NULL: none).
 */
struct bench_section {
	const char *name;
	void (*run)(struct bench *B);
	void (*doc)(struct bench *B, struct rep *doc);
	void (*print)(struct bench *B, const struct rep *doc);
	void (*targets)(struct bench *B);
	void (*chart)(struct bench *B, struct rep *doc);
};

extern const struct bench_section bench_ops, bench_grow, bench_doubling, bench_shrink,
    bench_copy, bench_stream, bench_migrate, bench_sleep;

/* ---- vmmx-bench.c's helpers for the sections ---- */

/* Progress on stderr, unless --quiet. */
void note(struct bench *B, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A failure, said on stderr and remembered (exit 1); each returns its error or -1. */
int vfail(struct bench *B, const char *what, int err);
int gfail(struct bench *B, const char *what);

/* A row's why and its size, for the why_* helpers. */
#define WHY(r) (r)->why, sizeof((r)->why)
int why_vmmx(char *why, size_t len);
int why_gpu(struct bench *B, char *why, size_t len, const char *what);
int why_oom(struct bench *B, char *why, size_t len, const char *sec);

int buf_grown(struct vmmx_ctx *ctx, uint64_t size, const char *policy, struct vmmx_buf **buf_p);
/* Set by the migrate section for its row that grants moved chunks to the GPU only. */
extern int bench_mkctx_gpu_only;
/* The pinned copy rate into B->pcie (bench-migrate.c), unless measured already. */
void bench_pcie(struct bench *B);
int mkctx(struct bench *B, uint64_t chunk, uint64_t chunk_max, int64_t cache, uint64_t limit,
	  struct vmmx_ctx **ctx_p);
uint64_t dev_used(struct bench *B, struct vmmx_ctx *ctx);
/* Seconds as microseconds, a / b as "1.23x"; "-" where not finite. */
const char *us(double sec, char *buf, size_t len);
const char *ratio(double a, double b, char *buf, size_t len);

/* Add a target: @value against @threshold (<= when @le), shown as @shown, @why when unknown. */
void add_target(struct bench *B, const char *text, double value, double threshold, int le,
		const char *shown, const char *why);

/* The rows under @key of @doc as a table of @f's columns through @v, if there are any. */
void bench_table(const struct rep *doc, const char *key, const struct rep_field *f, size_t n,
		 const struct rep_view *v);

#endif /* TOOLS_BENCH_H */
