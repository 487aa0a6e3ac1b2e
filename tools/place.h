/* SPDX-License-Identifier: MIT */
/*
 * place.h - what vmmx-place's files share: the placements (baselines and
 * their residency), a row of results, the options and the run; the window
 * workload (place-window.c) and the results (place-report.c) work on them;
 * and the replay of a launch trace (place-replay.c), a mode of its own.
 * Single-threaded, like the tool.
 */
#ifndef TOOLS_PLACE_H
#define TOOLS_PLACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "vmmx.h"
#include "tools/ctx.h"
#include "tools/gpu.h"
#include "tools/opts.h"
#include "tools/report.h"

#define PROG	     "vmmx-place"
#define MAX_SIZES    64
#define MAX_POLICIES 32
#define MIN_UNIT     (64u << 10) /* sizes are multiples of this (the sim's gather piece) */

enum base {
	B_DEVICE,   /* cuMemAlloc */
	B_HOST,	    /* cuMemHostAlloc */
	B_REGISTER, /* malloc + cuMemHostRegister */
	B_HMM,	    /* malloc, HMM */
	B_MANAGED,  /* cuMemAllocManaged */
	B_MANAGED_PREFETCH,
	B_COUNT,
};

/* Where a placement's bytes live: its residency, and the window reads' model. */
enum wres {
	WRES_UNKNOWN, /* plain managed memory: pages move on faults */
	WRES_DEVICE,  /* cuMemAlloc; managed memory just prefetched to the device */
	WRES_HOST,    /* pinned or registered host memory */
	WRES_BUF,     /* a libvmmx buffer: asked at every step */
};

struct place_base {
	const char *name;  /* row name and --baselines word */
	const char *alias; /* another accepted word */
	enum gpu_alloc kind;
	enum wres where;   /* where its bytes are when filled (managed+prefetch: run_baseline) */
};
extern const struct place_base bases[B_COUNT];

enum status { ST_OK, ST_UNAVAILABLE, ST_REFUSED, ST_FAILED };
extern const char *const st_names[];

struct row {
	uint64_t size;
	char name[128];
	const char *kind; /* "policy" or "baseline" */
	enum status st;
	char reason[384];
	const char *note; /* sim stand-ins: what stands in */
	uint64_t moved;	  /* bytes per run */
	struct gpu_timing t;
	double setup; /* seconds to allocate (and map) */
	int res_known;
	uint64_t dev_bytes, host_bytes; /* of the range the workload touches */
	double model, frac;		/* model seconds and model/measured; NAN when unknown */
	/* The window workload (the timing fields above are unused there). */
	uint64_t win;			/* window bytes */
	double read_s, pass1_s, advise_s; /* totals: every read, pass 1's reads, advise/prefetch */
	uint64_t read_bytes, pass1_bytes;
	int read_res_known;		/* dev_read and host_read are known */
	uint64_t dev_read, host_read;	/* bytes read from device / host memory */
	int stats_known;		/* a libvmmx placement: the counters below are its own */
	uint64_t migrations, migrated_bytes, evictions, promotions; /* during the steps */
	uint64_t setup_migrated, setup_evictions; /* during the grow */
};

struct opts {
	enum gpu_workload wl; /* the kernel; GPU_WL_READ for the window workload */
	int window;	      /* -w window */
	uint64_t win;	      /* --window; 0: a quarter of the buffer */
	unsigned int steps, passes;
	uint64_t sizes[MAX_SIZES];
	int nsizes;
	char *policies[MAX_POLICIES];
	int npolicies;
	const char *device_limit;
	int base[B_COUNT];
	uint64_t ws;
	unsigned int iters, warmup;
	int csv, json, quiet;
	int policy_none; /* -p none: no libvmmx placement */
	const char *plot;
	uint64_t assume_free; /* 0: none */
};

struct run {
	struct opts o;
	struct vmmx_ctx *ctx, *refctx; /* refctx: sim stand-ins, NULL on cuda */
	struct vmmx_ctx_info info;
	int sim;
	struct gpu_engine eng, refeng;
	struct row *rows;
	size_t nrows, cap;
	unsigned int step, steps;
	int failed;
};

/* ---- vmmx-place.c ---- */

/* A row's status and its reason, as printf. */
void row_status(struct row *r, enum status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- place-window.c: the window workload ---- */

/* One placement under the window loop, and how its window is brought close. */
struct wplace {
	struct gpu_engine *e;
	struct vmmx_buf *buf; /* a libvmmx placement, else NULL */
	int advise;	      /* vmmx_buf_advise(WILL_NEED) the window before its reads */
	int prefetch;	      /* managed+prefetch: prefetch the window to the device */
	enum wres where;
	unsigned char *p;
	uint64_t size;
};

/* Step the window across placement @w for row @r (@ctx: its context's stats, or NULL). */
void window_measure(struct run *R, struct row *r, struct vmmx_ctx *ctx,
		    const struct wplace *w);
/* The window rows' model, from the references among rows [@first, @end). */
void apply_model_window(struct run *R, size_t first, size_t end, double *hbm, double *pcie);

/* ---- place-report.c: the results ---- */

/* The banner of the sim backend's figures. */
extern const char PLACE_SIM_BANNER[];
/* The table's header lines: the workload, the backend, what the columns mean. */
void print_header(struct run *R);
/* The document's head: tool, backend, device, workload, timing. */
void doc_head(struct run *R, struct rep *doc);
/* Rows [@first, @end) into @doc's "results". */
void doc_rows(struct run *R, struct rep *doc, size_t first, size_t end);
/* The results on stdout (and --plot); the exit status. */
int report(struct run *R, struct rep *doc);

/* ---- place-replay.c: --replay TRACE ---- */

/* The whole of vmmx-place --replay, its own options included; the exit status. */
int replay_main(int argc, char **argv);

#endif /* TOOLS_PLACE_H */
