// SPDX-License-Identifier: MIT
/*
 * gpu_fill.cu - a CUDA program that knows nothing of libvmmx: it allocates
 * SIZE bytes in PIECE-sized allocations, alternately with cudaMalloc and
 * cudaMallocAsync (on a stream of its own), sets each allocation with one
 * memset (cudaMemset, cudaMemsetAsync, cuMemsetD32Async and cuMemsetD8 in
 * turn: a spilled allocation straddles device and host memory) and checks it
 * with a kernel, writes every 8-byte word with a kernel, checks every word
 * with another, frees, and says PASS or FAIL.
 * Under vmmx-run past the device's room it passes; natively it fails with
 * out of memory (exit 3).
 *
 *   gpu_fill SIZE_MIB [PIECE_MIB]   the test (exit 0 pass, 1 wrong data, 3 out of memory)
 *   gpu_fill hold FREE_MIB          hold all of the device but FREE_MIB until stdin closes
 *
 * Build both ways (the GPU machine; see docs/PRELOAD.md):
 *   nvcc -O2 -arch=sm_90 -o gpu_fill_static gpu_fill.cu -lcuda      (static runtime)
 *   nvcc -O2 -arch=sm_90 -cudart shared -o gpu_fill_shared gpu_fill.cu -lcuda
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)
#define CK(x)                                                                            \
	do {                                                                             \
		cudaError_t e_ = (x);                                                    \
		if (e_ != cudaSuccess) {                                                 \
			fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));         \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

__device__ __host__ static unsigned long long mix(unsigned long long x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

__global__ void fill(unsigned long long *p, size_t n, unsigned long long seed)
{
	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		p[i] = mix(seed + i);
}

__global__ void check(const unsigned long long *p, size_t n, unsigned long long seed,
		      unsigned long long *bad)
{
	unsigned long long mine = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		mine += p[i] != mix(seed + i);
	if (mine)
		atomicAdd(bad, mine);
}

/* The 8-byte word that memset number @i leaves (see set_piece()). */
static unsigned long long set_word(size_t i)
{
	unsigned long long b = 0x30 + i % 64, u = 0x01020304u + (unsigned)i;

	return i % 4 == 2 ? u | u << 32 : b * 0x0101010101010101ull;
}

/* Set @len bytes at @p with memset number @i, each API in turn. */
static int set_piece(void *p, size_t len, size_t i, cudaStream_t s)
{
	unsigned char b = (unsigned char)(0x30 + i % 64);

	switch (i % 4) {
	case 0:
		return cudaMemset(p, b, len);
	case 1:
		return cudaMemsetAsync(p, b, len, s);
	case 2:
		return cuMemsetD32Async((CUdeviceptr)p, 0x01020304u + (unsigned)i, len / 4,
					(CUstream)s);
	default:
		return cuMemsetD8((CUdeviceptr)p, b, len);
	}
}

__global__ void check_word(const unsigned long long *p, size_t n, unsigned long long w,
			   unsigned long long *bad)
{
	unsigned long long mine = 0;

	for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x)
		mine += p[i] != w;
	if (mine)
		atomicAdd(bad, mine);
}

static int hold(size_t free_mib)
{
	size_t f, t, step = 256 * MiB;
	void *p;
	char c;

	CK(cudaFree(0));
	for (;;) {
		CK(cudaMemGetInfo(&f, &t));
		if (f <= free_mib * MiB + step / 2)
			break;
		if (f - free_mib * MiB < step)
			step = 2 * MiB;
		if (cudaMalloc(&p, step) != cudaSuccess)
			break;
	}
	CK(cudaMemGetInfo(&f, &t));
	printf("holding: %zu MiB of %zu MiB free\n", f / MiB, t / MiB);
	fflush(stdout);
	while (read(0, &c, 1) > 0)
		;
	return 0;
}

int main(int argc, char **argv)
{
	size_t size, piece, n, i;
	unsigned long long **ptr, *bad, nbad = 0;
	cudaStream_t s;
	size_t f, t;

	if (argc > 2 && !strcmp(argv[1], "hold"))
		return hold(strtoull(argv[2], NULL, 0));
	if (argc < 2) {
		fprintf(stderr, "usage: gpu_fill SIZE_MIB [PIECE_MIB] | gpu_fill hold FREE_MIB\n");
		return 2;
	}
	size = strtoull(argv[1], NULL, 0) * MiB;
	piece = (argc > 2 ? strtoull(argv[2], NULL, 0) : 512) * MiB;
	n = (size + piece - 1) / piece;
	ptr = (unsigned long long **)calloc(n, sizeof(*ptr));
	CK(cudaStreamCreate(&s));
	CK(cudaMemGetInfo(&f, &t));
	printf("cudaMemGetInfo: %zu MiB free of %zu MiB; allocating %zu MiB in %zu pieces\n",
	       f / MiB, t / MiB, size / MiB, n);
	CK(cudaMalloc((void **)&bad, sizeof(*bad)));
	CK(cudaMemset(bad, 0, sizeof(*bad)));
	for (i = 0; i < n; i++) {
		size_t len = i + 1 < n ? piece : size - piece * (n - 1);
		cudaError_t e = i % 2 ? cudaMallocAsync((void **)&ptr[i], len, s)
				      : cudaMalloc((void **)&ptr[i], len);

		if (e != cudaSuccess) {
			printf("OOM: %s of piece %zu (%zu MiB allocated): %s\n",
			       i % 2 ? "cudaMallocAsync" : "cudaMalloc", i, i * piece / MiB,
			       cudaGetErrorString(e));
			return 3;
		}
	}
	for (i = 0; i < n; i++) {
		size_t len = i + 1 < n ? piece : size - piece * (n - 1);
		int e = set_piece(ptr[i], len, i, s);

		if (e) {
			printf("FAIL: memset %zu (%s) of %zu MiB: error %d\n", i,
			       i % 4 == 0 ? "cudaMemset" : i % 4 == 1 ? "cudaMemsetAsync" :
			       i % 4 == 2 ? "cuMemsetD32Async" : "cuMemsetD8", len / MiB, e);
			return 1;
		}
		check_word<<<1024, 256, 0, s>>>(ptr[i], len / 8, set_word(i), bad);
	}
	CK(cudaStreamSynchronize(s));
	CK(cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost));
	printf("memsets: %zu allocations set and checked, %llu wrong words\n", n, nbad);
	for (i = 0; i < n; i++) {
		size_t len = (i + 1 < n ? piece : size - piece * (n - 1)) / 8;

		fill<<<1024, 256, 0, s>>>(ptr[i], len, i << 40);
	}
	for (i = 0; i < n; i++) {
		size_t len = (i + 1 < n ? piece : size - piece * (n - 1)) / 8;

		check<<<1024, 256, 0, s>>>(ptr[i], len, i << 40, bad);
	}
	CK(cudaStreamSynchronize(s));
	CK(cudaGetLastError());
	CK(cudaMemcpy(&nbad, bad, sizeof(nbad), cudaMemcpyDeviceToHost));
	for (i = 0; i < n; i++)
		CK(i % 2 ? cudaFreeAsync(ptr[i], s) : cudaFree(ptr[i]));
	CK(cudaStreamSynchronize(s));
	CK(cudaFree(bad));
	printf("%s: %zu MiB written and checked with kernels, %llu wrong words\n",
	       nbad ? "FAIL" : "PASS", size / MiB, nbad);
	return nbad ? 1 : 0;
}
