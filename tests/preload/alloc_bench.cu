// SPDX-License-Identifier: MIT
/*
 * alloc_bench.cu - the cost of cudaMalloc + cudaFree per size class, 256 B to
 * 1 GiB (x4 steps), median of ITERS pairs after a warm-up pair; run it
 * natively and under vmmx-run and compare (docs/PRELOAD.md).  Prints one
 * line per size: "size_bytes median_us mean_us".
 *
 *   nvcc -O2 -cudart shared -o alloc_bench alloc_bench.cu
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_time.h"

int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 200;
	double *t = (double *)malloc(sizeof(double) * iters);
	void *p;

	cudaFree(0);
	printf("# size_bytes median_us mean_us (cudaMalloc + cudaFree, %d pairs)\n", iters);
	for (size_t size = 256; size <= (1ull << 30); size *= 4) {
		double sum = 0;

		if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess) {
			printf("%zu failed\n", size);
			return 1;
		}
		for (int i = 0; i < iters; i++) {
			double t0 = now_us();

			if (cudaMalloc(&p, size) != cudaSuccess || cudaFree(p) != cudaSuccess)
				return 1;
			t[i] = now_us() - t0;
			sum += t[i];
		}
		qsort(t, iters, sizeof(*t), cmp);
		printf("%zu %.2f %.2f\n", size, t[iters / 2], sum / iters);
	}
	return 0;
}
