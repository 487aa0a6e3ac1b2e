// SPDX-License-Identifier: MIT
/*
 * kernels.cu - GPU kernels of the tests, built by nvcc into a fatbin that
 * bin2c embeds in the test binary (tests/local.mk) and tests/tap/cuda.c loads
 * with cuModuleLoadData.  extern "C" keeps the names unmangled for
 * cuModuleGetFunction.
 *
 * Every kernel is a grid-stride loop, so any grid covers any n: the tests
 * pick a modest grid and the buffers may be larger than one launch's threads.
 * Indices are 64-bit: a buffer of more than 4 Gi elements must not wrap.
 */
#include "hash.h"

/* p[i] = test_hash(i, seed) for i < n. */
extern "C" __global__ void fill_u32(unsigned int *p, unsigned long long n, unsigned int seed)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;

	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride)
		p[i] = test_hash(i, seed);
}

/*
 * Check p[i] == test_hash(i, seed) for i < n, add the mismatches to *errors,
 * and write test_hash(i, seed) + 1, so that a second pass (or the CPU) can
 * tell that this kernel saw and rewrote every element.  Mismatches are
 * counted per thread and added once: one atomic per thread, not per element.
 */
extern "C" __global__ void check_inc_u32(unsigned int *p, unsigned long long n, unsigned int seed,
					 unsigned long long *errors)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long bad = 0;

	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride) {
		unsigned int want = test_hash(i, seed);

		if (p[i] != want)
			bad++;
		p[i] = want + 1;
	}
	if (bad)
		atomicAdd(errors, bad);
}

/*
 * Read-only check of a window: p[i] == test_hash(first + i, seed) for i < n,
 * mismatches added to *errors.  @first lets the window start anywhere in a
 * pattern written from the host (a range straddling a device/host boundary).
 */
extern "C" __global__ void check_u32(const unsigned int *p, unsigned long long n,
				     unsigned long long first, unsigned int seed,
				     unsigned long long *errors)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long bad = 0;

	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride)
		if (p[i] != test_hash(first + i, seed))
			bad++;
	if (bad)
		atomicAdd(errors, bad);
}
