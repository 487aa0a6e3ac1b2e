/* SPDX-License-Identifier: MIT */
/*
 * check.h - host-side helpers the GPU tests share: the launch shape, counting
 * elements that differ from the hash pattern, and running a checking kernel
 * whose last argument is an error counter in a libvmmx buffer.
 * Static inline functions: each test includes it once.
 */
#ifndef TESTS_GPU_CHECK_H
#define TESTS_GPU_CHECK_H

#include <stddef.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"
#include "tests/gpu/hash.h"

#define GRID 1024u
#define BLOCK 256u

/* Number of elements of p[0, n) that are not test_hash(first + i) + add; the first is described. */
static inline size_t count_bad(const unsigned int *p, size_t first, size_t n, unsigned int seed,
			unsigned int add, const char *what)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned int want = test_hash(first + i, seed) + add;

		if (p[i] != want && !bad++)
			diag("%s: first wrong element %zu (byte offset %zu): %#x, wanted %#x", what,
			     first + i, (first + i) * sizeof(*p), p[i], want);
	}
	return bad;
}

/* Zero the counter, run a kernel whose last argument is it, read it back. */
static inline int run_counted(struct vmmx_ctx *ctx, unsigned long long *errs_dev, const char *kernel,
		       void **args, unsigned long long *errs_p)
{
	int err = vmmx_memset(ctx, errs_dev, 0, sizeof(*errs_dev));

	if (err)
		return err;
	if (tcuda_launch(kernel, GRID, BLOCK, args))
		return -VMMX_EDRIVER;
	return vmmx_memcpy(ctx, errs_p, errs_dev, sizeof(*errs_p));
}

#endif
