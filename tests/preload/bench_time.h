/* SPDX-License-Identifier: MIT */
/* bench_time.h - the clock and the sort of the GPU benchmarks in tests/preload (*.cu). */
#ifndef VMMX_TESTS_BENCH_TIME_H
#define VMMX_TESTS_BENCH_TIME_H

#include <time.h>

/* Microseconds on the monotonic clock. */
static inline double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* qsort() order of doubles, for medians. */
static inline int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

#endif
