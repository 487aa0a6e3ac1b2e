// SPDX-License-Identifier: MIT
/*
 * workload.c - the workloads of the experiment tools (see gpu.h): their
 * names, the bytes one run moves, and the managed-memory rule; and the
 * engine that runs them: the kernels on cuda (gpu.c), and on the sim the
 * stand-ins, vmmx_memcpy copies over the same pattern timed with
 * clock_gettime.  The engine's scratch is per engine; nothing else is kept.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmmx.h"
#include "tools/gpu.h"

/* ---- workloads ---- */

static const char *const wl_names[GPU_WL_COUNT] = {
    [GPU_WL_READ] = "read",
    [GPU_WL_WRITE] = "write",
    [GPU_WL_COPY] = "copy",
    [GPU_WL_GATHER] = "gather",
};

const char *gpu_workload_name(enum gpu_workload w)
{
	return (unsigned)w < GPU_WL_COUNT ? wl_names[w] : "?";
}

int gpu_workload_parse(const char *s, enum gpu_workload *w)
{
	for (int i = 0; i < GPU_WL_COUNT; i++) {
		if (s && !strcmp(s, wl_names[i])) {
			*w = (enum gpu_workload)i;
			return 0;
		}
	}
	return -VMMX_EINVAL;
}

uint64_t gpu_workload_bytes(enum gpu_workload w, uint64_t size)
{
	switch (w) {
	case GPU_WL_COPY:
		return 2 * gpu_copy_half(size);
	default:
		return size / 16 * 16;
	}
}

int gpu_managed_refusal(uint64_t size, uint64_t free_bytes, char *buf, size_t len)
{
	char a[32], b[32], c[32];

	if (free_bytes >= GPU_MANAGED_MARGIN && size <= free_bytes - GPU_MANAGED_MARGIN)
		return 0;
	snprintf(buf, len,
		 "managed memory of %s is more than the device's free memory (%s) less "
		 "a margin of %s; oversubscribed managed memory can hang the GPU",
		 tool_fmt_size(size, a, sizeof(a)), tool_fmt_size(free_bytes, b, sizeof(b)),
		 tool_fmt_size(GPU_MANAGED_MARGIN, c, sizeof(c)));
	return 1;
}

/* ---- the sim's stand-in workloads ---- */

#define SIM_PIECE (64u << 10) /* gather's unit on sim: one driver copy each */

static int grow_scratch(unsigned char **p, size_t *len, size_t want)
{
	unsigned char *n;

	if (*len >= want)
		return 0;
	n = realloc(*p, want);
	if (!n) {
		gpu_set_why("out of memory for %zu bytes of scratch", want);
		return -VMMX_ENOMEM;
	}
	*p = n;
	*len = want;
	return 0;
}

static void pattern_bytes(unsigned char *dst, uint64_t first, size_t n_elems, unsigned int seed)
{
	for (size_t i = 0; i < n_elems; i++) {
		unsigned int v[4];

		gpu_pattern(first + i, seed, v);
		memcpy(dst + 16 * i, v, 16);
	}
}

static int sim_pattern(struct gpu_engine *e, size_t size)
{
	size_t have = e->pattern_len;
	int err = grow_scratch(&e->pattern, &e->pattern_len, size);

	if (err)
		return err;
	if (have < size || !have)
		pattern_bytes(e->pattern, 0, e->pattern_len / 16, e->seed);
	return 0;
}

static int vfail(const char *what, int err)
{
	gpu_set_why("%s: %s: %s", what, vmmx_strerror(err), vmmx_last_error());
	return err;
}

static int sim_run(struct gpu_engine *e, enum gpu_workload w, void *p, size_t size, size_t ws,
		   double *sec)
{
	unsigned char *b = p;
	double t0;
	int err = 0;

	if (size % SIM_PIECE || ws % SIM_PIECE) {
		gpu_set_why("sim workloads need sizes in multiples of 64 KiB");
		return -VMMX_EINVAL;
	}
	if (w == GPU_WL_WRITE)
		err = sim_pattern(e, size);
	else if (w != GPU_WL_COPY)
		err = grow_scratch(&e->scratch, &e->scratch_len, size);
	if (err)
		return err;
	t0 = gpu_now();
	switch (w) {
	case GPU_WL_READ:
		err = vmmx_memcpy(e->ctx, e->scratch, b, size);
		break;
	case GPU_WL_WRITE:
		err = vmmx_memcpy(e->ctx, b, e->pattern, size);
		break;
	case GPU_WL_COPY:
		err = vmmx_memcpy(e->ctx, b + gpu_copy_half(size), b, gpu_copy_half(size));
		break;
	case GPU_WL_GATHER: {
		uint64_t pieces = ws / SIM_PIECE;

		for (size_t k = 0; k < size / SIM_PIECE && !err; k++) {
			uint64_t j =
			    (uint64_t)(((unsigned __int128)gpu_mix64(k ^ e->seed) * pieces) >> 64);

			err = vmmx_memcpy(e->ctx, e->scratch + k * SIM_PIECE, b + j * SIM_PIECE,
					  SIM_PIECE);
		}
		break;
	}
	default:
		gpu_set_why("unknown workload %d", (int)w);
		return -VMMX_EINVAL;
	}
	*sec = gpu_now() - t0;
	return err ? vfail("vmmx_memcpy", err) : 0;
}

static int sim_check(struct gpu_engine *e, const void *p, size_t size, uint64_t first,
		     uint64_t *bad)
{
	unsigned char want[16];
	uint64_t nbad = 0;
	int err = grow_scratch(&e->scratch, &e->scratch_len, size);

	if (err)
		return err;
	err = vmmx_memcpy(e->ctx, e->scratch, p, size);
	if (err)
		return vfail("vmmx_memcpy", err);
	for (size_t i = 0; i < size / 16; i++) {
		pattern_bytes(want, first + i, 1, e->seed);
		nbad += memcmp(e->scratch + 16 * i, want, 16) != 0;
	}
	*bad = nbad;
	return 0;
}

/* ---- the engine: kernels on cuda, copies on sim ---- */

int gpu_engine_fill(struct gpu_engine *e, void *p, size_t size)
{
	int err;

	if (!e->sim)
		return gpu_fill(p, size, e->seed);
	err = sim_pattern(e, size);
	if (!err) {
		err = vmmx_memcpy(e->ctx, p, e->pattern, size);
		if (err)
			return vfail("vmmx_memcpy", err);
	}
	return err;
}

int gpu_engine_run(struct gpu_engine *e, enum gpu_workload w, void *p, size_t size, size_t ws,
		   double *sec)
{
	if (!ws || ws > size)
		ws = size;
	if (e->sim)
		return sim_run(e, w, p, size, ws, sec);
	return gpu_run(w, p, size, ws, e->seed, sec);
}

int gpu_engine_verify(struct gpu_engine *e, enum gpu_workload w, void *p, size_t size,
		      uint64_t *bad)
{
	unsigned char *b = p;

	/* After a copy the second half holds what the first half held. */
	if (w == GPU_WL_COPY) {
		b += gpu_copy_half(size);
		size = gpu_copy_half(size);
	}
	if (e->sim)
		return sim_check(e, b, size, 0, bad);
	return gpu_check(b, size, 0, e->seed, bad);
}

void gpu_engine_fini(struct gpu_engine *e)
{
	free(e->scratch);
	free(e->pattern);
	e->scratch = e->pattern = NULL;
	e->scratch_len = e->pattern_len = 0;
}
