// SPDX-License-Identifier: MIT
/*
 * kernels.cu - the one kernel set of the tools and the tests, built by nvcc
 * into a fatbin that bin2c embeds in the GPU client (gpu/local.mk), which
 * loads it with cuModuleLoadData (gpu_client_load_kernels).  extern "C"
 * keeps the names unmangled for cuModuleGetFunction.
 *
 * The tools' workloads (vmmx_tool_*), then the tests' pattern kernels.
 *
 * Every kernel is a grid-stride loop over 16-byte elements (uint4), so one
 * launch of (multiprocessors x resident blocks) covers any size; indices are
 * 64-bit.  Streaming loops are unrolled four deep so each thread has four
 * independent 16-byte accesses in flight: memory over PCIe needs many
 * outstanding requests to reach the link's rate.  Reads fold what they load
 * into one word per block, written out, so the compiler cannot drop them.
 */
#include "gpu/pattern.h"

static __device__ __forceinline__ unsigned int fold(uint4 v)
{
	return v.x ^ v.y ^ v.z ^ v.w;
}

static __device__ __forceinline__ uint4 pattern(unsigned long long i, unsigned int seed)
{
	unsigned int v[4];

	gpu_pattern(i, seed, v);
	return make_uint4(v[0], v[1], v[2], v[3]);
}

/* One word per block: warp shuffles, then one shared atomic per warp. */
static __device__ __forceinline__ void block_result(unsigned int acc, unsigned int *out)
{
	__shared__ unsigned int s;

	for (int o = 16; o > 0; o >>= 1)
		acc ^= __shfl_xor_sync(0xffffffffu, acc, o);
	if (threadIdx.x == 0)
		s = 0;
	__syncthreads();
	if ((threadIdx.x & 31) == 0)
		atomicXor(&s, acc);
	__syncthreads();
	if (threadIdx.x == 0)
		out[blockIdx.x] = s;
}

/* Stream read of n elements; out[blockIdx.x] gets the block's fold. */
extern "C" __global__ void vmmx_tool_read(const uint4 *__restrict__ p, unsigned long long n,
					  unsigned int *out)
{
	const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned int acc = 0;

	for (; i + 3 * stride < n; i += 4 * stride) {
		uint4 a = p[i], b = p[i + stride], c = p[i + 2 * stride], d = p[i + 3 * stride];

		acc ^= fold(a) ^ fold(b) ^ fold(c) ^ fold(d);
	}
	for (; i < n; i += stride)
		acc ^= fold(p[i]);
	block_result(acc, out);
}

/* Stream write of the pattern: p[i] = pattern(i, seed). */
extern "C" __global__ void vmmx_tool_write(uint4 *__restrict__ p, unsigned long long n,
					   unsigned int seed)
{
	const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;

	for (; i + 3 * stride < n; i += 4 * stride) {
		p[i] = pattern(i, seed);
		p[i + stride] = pattern(i + stride, seed);
		p[i + 2 * stride] = pattern(i + 2 * stride, seed);
		p[i + 3 * stride] = pattern(i + 3 * stride, seed);
	}
	for (; i < n; i += stride)
		p[i] = pattern(i, seed);
}

/* dst[i] = src[i] for n elements; the ranges do not overlap. */
extern "C" __global__ void vmmx_tool_copy(uint4 *__restrict__ dst, const uint4 *__restrict__ src,
					  unsigned long long n)
{
	const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;

	for (; i + 3 * stride < n; i += 4 * stride) {
		uint4 a = src[i], b = src[i + stride], c = src[i + 2 * stride], d = src[i + 3 * stride];

		dst[i] = a;
		dst[i + stride] = b;
		dst[i + 2 * stride] = c;
		dst[i + 3 * stride] = d;
	}
	for (; i < n; i += stride)
		dst[i] = src[i];
}

/*
 * m random loads over the first ws elements: load k reads element
 * floor(gpu_mix64(k, seed) * ws / 2^64), uniform over the working set with
 * no division.  The indices come from a hash, not from memory, so the
 * loads are independent and many stay in flight.
 */
extern "C" __global__ void vmmx_tool_gather(const uint4 *__restrict__ p, unsigned long long ws,
					    unsigned long long m, unsigned int seed,
					    unsigned int *out)
{
	const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	const unsigned long long salt = (unsigned long long)seed << 32 | seed;
	unsigned long long k = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned int acc = 0;

	for (; k + 3 * stride < m; k += 4 * stride) {
		uint4 a = p[__umul64hi(gpu_mix64(k ^ salt), ws)];
		uint4 b = p[__umul64hi(gpu_mix64((k + stride) ^ salt), ws)];
		uint4 c = p[__umul64hi(gpu_mix64((k + 2 * stride) ^ salt), ws)];
		uint4 d = p[__umul64hi(gpu_mix64((k + 3 * stride) ^ salt), ws)];

		acc ^= fold(a) ^ fold(b) ^ fold(c) ^ fold(d);
	}
	for (; k < m; k += stride)
		acc ^= fold(p[__umul64hi(gpu_mix64(k ^ salt), ws)]);
	block_result(acc, out);
}

/*
 * Count elements with p[i] != pattern(first + i, seed), i < n, into *bad:
 * one atomic per thread that saw a mismatch, not one per element.
 */
extern "C" __global__ void vmmx_tool_check(const uint4 *__restrict__ p, unsigned long long n,
					   unsigned long long first, unsigned int seed,
					   unsigned long long *bad)
{
	const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	unsigned long long nbad = 0;

	for (; i < n; i += stride) {
		uint4 v = p[i], w = pattern(first + i, seed);

		nbad += v.x != w.x || v.y != w.y || v.z != w.z || v.w != w.w;
	}
	if (nbad)
		atomicAdd(bad, nbad);
}

/* ---- the tests' kernels (tests/gpu): 32-bit words of gpu_hash32() ---- */

/*
 * Every one a grid-stride loop, so any grid covers any n: the tests pick a
 * modest grid and the buffers may be larger than one launch's threads.
 */

/* p[i] = gpu_hash32(i, seed) for i < n. */
extern "C" __global__ void fill_u32(unsigned int *p, unsigned long long n, unsigned int seed)
{
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;

	for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
	     i < n; i += stride)
		p[i] = gpu_hash32(i, seed);
}

/*
 * Check p[i] == gpu_hash32(i, seed) for i < n, add the mismatches to *errors,
 * and write gpu_hash32(i, seed) + 1, so that a second pass (or the CPU) can
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
		unsigned int want = gpu_hash32(i, seed);

		if (p[i] != want)
			bad++;
		p[i] = want + 1;
	}
	if (bad)
		atomicAdd(errors, bad);
}

/*
 * Read-only check of a window: p[i] == gpu_hash32(first + i, seed) for i < n,
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
		if (p[i] != gpu_hash32(first + i, seed))
			bad++;
	if (bad)
		atomicAdd(errors, bad);
}
