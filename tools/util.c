// SPDX-License-Identifier: MIT
/*
 * util.c - the small things the experiment tools share (see gpu.h): the
 * error slot behind gpu_why() that every GPU-side failure fills, the clock
 * and the median of the timings, and the size and rate formats.  State: the
 * error slot, process-wide and unlocked (the tools are single-threaded).
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
#include "tools/report.h"

/* ---- the error slot ---- */

static char why[320];

void gpu_set_why(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
}

const char *gpu_why(void)
{
	return why;
}

/* ---- timing and formats ---- */
double gpu_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

double gpu_median(double *v, size_t n)
{
	if (!n)
		return NAN;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const char *tool_fmt_size(uint64_t b, char *buf, size_t len)
{
	return rep_fmt_size(b, buf, len);
}


double tool_gbps(uint64_t bytes, double sec)
{
	return (double)bytes / sec / 1e9;
}
