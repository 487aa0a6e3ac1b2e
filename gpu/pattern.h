/* SPDX-License-Identifier: MIT */
/*
 * pattern.h - the data patterns of the one kernel set (gpu/kernels.cu),
 * shared by the kernels (nvcc) and the host code that writes or checks the
 * same data (the tools' sim stand-ins, the GPU tests): one definition on
 * both sides, so that a pattern written by a kernel is verified by the CPU
 * and the other way round.  Plain C and CUDA C++; no CUDA header.
 */
#ifndef GPU_PATTERN_H
#define GPU_PATTERN_H

#ifdef __CUDACC__
#define GPU_HD __host__ __device__
#else
#define GPU_HD
#endif

/*
 * gpu_pattern() - the 16 bytes of element @i of the data pattern under @seed.
 *
 * Every element holds its own index, so a chunk mapped at the wrong offset
 * cannot pass a check by accident, and no element is zero for seed != 0
 * (timing on zeros can flatter).  Cheap on purpose: the write workload
 * computes it per 16 bytes at HBM speed.
 */
static inline GPU_HD void gpu_pattern(unsigned long long i, unsigned int seed, unsigned int v[4])
{
	unsigned int lo = (unsigned int)i, hi = (unsigned int)(i >> 32);

	v[0] = lo ^ seed;
	v[1] = hi + seed;
	v[2] = lo * 0x9e3779b9u + seed;
	v[3] = ~lo ^ (seed << 7);
}

/*
 * gpu_mix64() - splitmix64's finaliser: every output bit depends on every
 * input bit.  The gather workload hashes its load indices with it, on the
 * GPU and in the sim's stand-in alike.
 */
static inline GPU_HD unsigned long long gpu_mix64(unsigned long long x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/*
 * gpu_hash32() - the tests' 32-bit pattern value of element @i under @seed:
 * gpu_mix64() over i and seed, so that a chunk mapped at the wrong offset,
 * or two chunks swapped, cannot hold the expected data by accident.
 */
static inline GPU_HD unsigned int gpu_hash32(unsigned long long i, unsigned int seed)
{
	return (unsigned int)gpu_mix64(i * 0x9e3779b97f4a7c15ull +
				       ((unsigned long long)seed << 32 | seed));
}

#endif /* GPU_PATTERN_H */
