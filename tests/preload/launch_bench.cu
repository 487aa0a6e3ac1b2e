// SPDX-License-Identifier: MIT
/*
 * launch_bench.cu - the launch rate of empty kernels: natively, under
 * vmmx-run (launches passed straight through) and under vmmx-run
 * --launches (each launch's parameters resolved); the difference is what
 * watching a launch costs (docs/PRELOAD.md, "Kernel launches").
 *
 * Three kernels: no parameter, 4 pointers into one cudaMalloc'd buffer,
 * and a 64-byte by-value struct holding 8 of them; each launched through
 * the runtime (<<<>>>, cudaLaunchKernel) and through the driver
 * (cuLaunchKernel), in batches of BATCH launches (under the driver's
 * queue depth, so the CPU's cost shows, not the GPU's), ITERS batches,
 * the median batch reported.  One line per case:
 * "case launches median_us_per_launch".
 *
 *   nvcc -O2 -cudart shared -o launch_bench launch_bench.cu -lcuda
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_time.h"

#define BATCH 256

struct eight {
	float *p[8];
};

__global__ void k0(void) {}
__global__ void k4(float *a, float *b, float *c, float *d) {}
__global__ void k8(struct eight e) {}

enum which { RT0, RT4, RT8, DRV0, DRV4, DRV8 };

static int launch(enum which w, cudaStream_t s, float *buf, struct eight *e, CUfunction *fn)
{
	float *a = buf, *b = buf + 1024, *c = buf + 2048, *d = buf + 3072;
	void *args4[] = { &a, &b, &c, &d }, *args8[] = { e };

	switch (w) {
	case RT0: k0<<<1, 32, 0, s>>>(); return cudaPeekAtLastError() != cudaSuccess;
	case RT4: k4<<<1, 32, 0, s>>>(a, b, c, d); return cudaPeekAtLastError() != cudaSuccess;
	case RT8: k8<<<1, 32, 0, s>>>(*e); return cudaPeekAtLastError() != cudaSuccess;
	case DRV0: return cuLaunchKernel(fn[0], 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL) != CUDA_SUCCESS;
	case DRV4: return cuLaunchKernel(fn[1], 1, 1, 1, 32, 1, 1, 0, s, args4, NULL) != CUDA_SUCCESS;
	default: return cuLaunchKernel(fn[2], 1, 1, 1, 32, 1, 1, 0, s, args8, NULL) != CUDA_SUCCESS;
	}
}

int main(int argc, char **argv)
{
	static const char *const names[] = { "runtime-0-args", "runtime-4-pointers",
					     "runtime-struct-8-pointers", "driver-0-args",
					     "driver-4-pointers", "driver-struct-8-pointers" };
	int iters = argc > 1 ? atoi(argv[1]) : 200;
	double *t = (double *)malloc(sizeof(double) * iters);
	struct eight e;
	CUfunction fn[3];
	cudaStream_t s;
	float *buf;

	if (cudaMalloc(&buf, 64 << 20) != cudaSuccess || cudaStreamCreate(&s) != cudaSuccess ||
	    cudaGetFuncBySymbol(&fn[0], (const void *)k0) != cudaSuccess ||
	    cudaGetFuncBySymbol(&fn[1], (const void *)k4) != cudaSuccess ||
	    cudaGetFuncBySymbol(&fn[2], (const void *)k8) != cudaSuccess) {
		fprintf(stderr, "setup failed: %s\n", cudaGetErrorString(cudaGetLastError()));
		return 1;
	}
	for (int i = 0; i < 8; i++)
		e.p[i] = buf + i * 4096;
	printf("# case launches median_us_per_launch (%d batches of %d, empty kernels)\n", iters,
	       BATCH);
	for (int w = RT0; w <= DRV8; w++) {
		for (int i = 0; i < BATCH; i++) /* warm-up: the first launch caches the layout */
			if (launch((enum which)w, s, buf, &e, fn))
				return 1;
		cudaStreamSynchronize(s);
		for (int it = 0; it < iters; it++) {
			double t0 = now_us();

			for (int i = 0; i < BATCH; i++)
				if (launch((enum which)w, s, buf, &e, fn))
					return 1;
			t[it] = (now_us() - t0) / BATCH;
			cudaStreamSynchronize(s);
		}
		qsort(t, iters, sizeof(*t), cmp);
		printf("%s %d %.3f\n", names[w], iters * BATCH, t[iters / 2]);
	}
	return cudaStreamSynchronize(s) != cudaSuccess;
}
