// SPDX-License-Identifier: MIT
/*
 * cuda.c - the tests' calls into the one GPU client (see cuda.h and
 * gpu/client.h): each failure of a load or a launch is also printed with
 * diag(), so that a test's log says which CUDA error stopped it.
 */
#include "config.h"

#include "gpu/client.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"

int tcuda_open(int device)
{
	return gpu_client_open(device, 0);
}

int tcuda_load_kernels(void)
{
	int err = gpu_client_load_kernels();

	if (err)
		diag("tcuda_load_kernels: %s", gpu_client_why());
	return err;
}

int tcuda_launch(const char *kernel, unsigned int grid, unsigned int block, void **args)
{
	int err = gpu_client_launch(kernel, grid, block, args);

	if (err)
		diag("tcuda_launch(%s): %s", kernel, gpu_client_why());
	return err;
}

int tcuda_launch_on(const char *kernel, unsigned int grid, unsigned int block, void **args,
		    void *stream)
{
	int err = gpu_client_launch_on(kernel, grid, block, args, stream);

	if (err)
		diag("tcuda_launch_on(%s): %s", kernel, gpu_client_why());
	return err;
}

int tcuda_mem_alloc(size_t size, void **p)
{
	return gpu_client_mem_alloc(size, p);
}

int tcuda_mem_free(void *p)
{
	int err = gpu_client_mem_free(p);

	if (err)
		diag("tcuda_mem_free: %s", gpu_client_why());
	return err;
}

int tcuda_mem_info(size_t *free_p, size_t *total_p)
{
	int err = gpu_client_mem_info(free_p, total_p);

	if (err)
		diag("tcuda_mem_info: %s", gpu_client_why());
	return err;
}

void tcuda_close(void)
{
	gpu_client_close();
}

const char *tcuda_why(void)
{
	return gpu_client_why();
}
