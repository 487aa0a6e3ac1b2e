/* SPDX-License-Identifier: MIT */
/*
 * hash.h - the data pattern of the GPU tests, shared by the kernels
 * (kernels.cu, compiled by nvcc) and the C tests that check their work on
 * the CPU.  One definition on both sides is the point: a pattern written by
 * a kernel is verified by the CPU and the other way round.
 *
 * The value of element i is a hash of (i, seed) rather than i itself so
 * that a chunk mapped at the wrong offset, or two chunks swapped, cannot
 * hold the expected data by accident.
 */
#ifndef TESTS_GPU_HASH_H
#define TESTS_GPU_HASH_H

#ifdef __CUDACC__
#define TEST_HD __host__ __device__
#else
#define TEST_HD
#endif

/*
 * test_hash() - 32-bit pattern value of element @i under @seed.
 *
 * The splitmix64 finaliser over i and seed: every output bit depends on
 * every input bit, and it is cheap enough for a kernel that streams memory.
 */
static inline TEST_HD unsigned int test_hash(unsigned long long i, unsigned int seed)
{
	unsigned long long x = i * 0x9e3779b97f4a7c15ull + ((unsigned long long)seed << 32 | seed);

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return (unsigned int)x;
}

#endif /* TESTS_GPU_HASH_H */
