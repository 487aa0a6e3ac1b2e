/* SPDX-License-Identifier: MIT */
/*
 * check.h - host-side helpers the GPU tests share: the launch shape, counting
 * elements that differ from the hash pattern, and running a checking kernel
 * whose last argument is an error counter in a libvmmx buffer; and the
 * skip of a build without the kernels.  Static inline functions: each test includes it once.
 */
#ifndef TESTS_GPU_CHECK_H
#define TESTS_GPU_CHECK_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"
#include "gpu/pattern.h"

#ifndef VMMX_HAVE_KERNELS
/* Nothing to run without the kernels (configure found no nvcc): skip_all, saying why. */
__attribute__((noreturn)) static inline void skip_without_kernels(void)
{
	const char *be = getenv("VMMX_BACKEND");

	if (!be || strcmp(be, "cuda"))
		skip_all("needs VMMX_BACKEND=cuda (it is %s)", be ? be : "unset");
	skip_all("GPU kernels not built: configure found no nvcc");
}
#endif

#define GRID 1024u
#define BLOCK 256u

/* Number of elements of p[0, n) that are not gpu_hash32(first + i) + add; the first is described. */
static inline size_t count_bad(const unsigned int *p, size_t first, size_t n, unsigned int seed,
			unsigned int add, const char *what)
{
	size_t bad = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned int want = gpu_hash32(first + i, seed) + add;

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

/*
 * fill_u32 over p[0, n), then check_inc_u32: three assertions named after
 * @what (the kernel ran; every element was as written, and is now +1).
 */
static inline void fill_check_inc(struct vmmx_ctx *ctx, unsigned int *p, unsigned long long n,
				  unsigned int seed, unsigned long long *errs_dev, const char *what)
{
	unsigned long long errors = ~0ull;
	void *fill_args[] = { &p, &n, &seed };
	void *check_args[] = { &p, &n, &seed, &errs_dev };

	is_int(0, tcuda_launch("fill_u32", GRID, BLOCK, fill_args), "fill_u32 over %s", what);
	is_err(0, run_counted(ctx, errs_dev, "check_inc_u32", check_args, &errors),
	       "check_inc_u32 over %s", what);
	is_uint(0, errors, "check_inc_u32: every element as fill_u32 wrote it");
}

#endif
