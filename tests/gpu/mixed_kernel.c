// SPDX-License-Identifier: MIT
/*
 * mixed_kernel.c - one buffer half in GPU memory, half in pinned host
 * memory, used by kernels as one array.
 *
 * A device limit makes the device-first policy fall back to host memory in
 * the middle of one grow.  Kernels then write and check a pattern across the
 * whole range; vmmx_memcpy must split its copies at the device/host boundary
 * (a single driver copy across it crashed the driver, docs/DRIVER.md); and the
 * CPU reads the host chunks directly at the addresses the GPU uses.
 *
 * Runs only with VMMX_BACKEND=cuda, GPU kernels built (nvcc), and a device.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"
#include "gpu/pattern.h"
#include "tests/gpu/check.h"

#define MiB ((size_t)1 << 20)

/*
 * The errors counter lives in a small "device" buffer created first, so the
 * limit is the 64 MiB the big buffer may hold on the device plus that one
 * chunk (2 MiB: the granularity on Hopper, and VMMX_CHUNK_SIZE below).
 */
#define ERRS_SIZE (2 * MiB)
#define DEV_PART (64 * MiB)
#define HOST_PART (64 * MiB)
#define BUF_SIZE (DEV_PART + HOST_PART)
#define BUF_CAPACITY (256 * MiB)
/* The straddling window: 2 MiB on each side of the boundary. */
#define WIN_SIZE (4 * MiB)
/* Copies between a device chunk and a host chunk: 4 MiB, in elements. */
#define CP_N (4 * MiB / sizeof(unsigned int))


#define SEED 0x5eed1234u
#define SEED2 0x0badcafeu


int main(void)
{
#ifndef VMMX_HAVE_KERNELS
	skip_without_kernels();
#else
	static const char *const vars[] = { "VMMX_DEVICE_LIMIT=66MiB", "VMMX_CHUNK_SIZE=2MiB",
					    NULL };
	const char *be = getenv("VMMX_BACKEND"), *dev_env = getenv("VMMX_DEVICE");
	struct vmmx_chunk_info *chunks = NULL;
	struct vmmx_buf *errs_buf = NULL, *buf = NULL;
	struct vmmx_residency r = { 0, 0 };
	struct vmmx_ctx *ctx = NULL;
	struct vmmx_config cfg;
	struct vmmx_stats st;
	unsigned long long n = BUF_SIZE / sizeof(unsigned int), win_n, win_first, errors = ~0ull;
	unsigned long long *errs_dev;
	unsigned int *p, *host, *pattern, seed = SEED, seed2 = SEED2;
	size_t nchunks = 0, boundary = 0, ndev = 0, nhost = 0;
	bool ordered = true;
	int device = dev_env ? atoi(dev_env) : 0, err;

	if (!be || strcmp(be, "cuda"))
		skip_all("needs VMMX_BACKEND=cuda (it is %s)", be ? be : "unset");
	err = tcuda_open(device);
	if (err)
		skip_all("no usable CUDA device %d: %s", device, tcuda_why());

	plan(34);

	if (!is_int(0, tcuda_load_kernels(), "tcuda_load_kernels: the kernels"))
		bail("cannot load the test kernels: %s", tcuda_why());

	vmmx_config_init(&cfg);
	cfg.backend = "cuda";
	cfg.device = device;
	cfg.policy = "device-first";
	cfg.vars = vars;
	if (!is_err(0, vmmx_ctx_create(&cfg, &ctx), "vmmx_ctx_create: cuda, device limit 66 MiB"))
		bail("no context: %s", vmmx_last_error());

	/* The counter first: it takes its 2 MiB of the limit before the big buffer. */
	if (!is_err(0, vmmx_buf_create(ctx, ERRS_SIZE, "device", &errs_buf),
		    "vmmx_buf_create: counter buffer, policy device") ||
	    !is_err(0, vmmx_buf_resize(errs_buf, ERRS_SIZE), "vmmx_buf_resize: counter to 2 MiB"))
		bail("no counter buffer: %s", vmmx_last_error());
	errs_dev = vmmx_buf_ptr(errs_buf);
	err = vmmx_buf_residency(errs_buf, 0, ERRS_SIZE, &r);
	is_uint(ERRS_SIZE, err ? 0 : r.device, "vmmx_buf_residency: counter is on the device");

	if (!is_err(0, vmmx_buf_create(ctx, BUF_CAPACITY, "device-first", &buf),
		    "vmmx_buf_create: 256 MiB capacity, device-first") ||
	    !is_err(0, vmmx_buf_resize(buf, BUF_SIZE), "vmmx_buf_resize: grow to 128 MiB"))
		bail("no buffer: %s", vmmx_last_error());
	is_uint(BUF_SIZE, vmmx_buf_size(buf), "vmmx_buf_size: 128 MiB");
	p = vmmx_buf_ptr(buf);

	memset(&r, 0, sizeof(r));
	err = vmmx_buf_residency(buf, 0, BUF_SIZE, &r);
	is_uint(DEV_PART, err ? 0 : r.device, "vmmx_buf_residency: 64 MiB on the device");
	is_uint(HOST_PART, err ? 0 : r.host, "vmmx_buf_residency: 64 MiB in host memory");

	err = vmmx_buf_chunks(buf, NULL, 0, &nchunks);
	if (!err && nchunks && (chunks = calloc(nchunks, sizeof(*chunks))))
		err = vmmx_buf_chunks(buf, chunks, nchunks, &nchunks);
	if (err || !chunks)
		nchunks = 0;
	/* Device chunks first, then host chunks; boundary = where the first host chunk starts. */
	boundary = SIZE_MAX;
	for (size_t i = 0; i < nchunks; i++) {
		size_t off = (size_t)((char *)chunks[i].base - (char *)p);

		if (chunks[i].loc.kind == VMMX_LOC_DEVICE) {
			ndev++;
			if (boundary != SIZE_MAX)
				ordered = false;
		} else if (chunks[i].loc.kind == VMMX_LOC_HOST ||
			   chunks[i].loc.kind == VMMX_LOC_HOST_NUMA) {
			nhost++;
			if (boundary == SIZE_MAX)
				boundary = off;
		}
	}
	diag("%zu chunks: %zu on the device, %zu in host memory", nchunks, ndev, nhost);
	ok(ndev > 0 && nhost > 0, "vmmx_buf_chunks: both device and host chunks");
	ok(ordered && boundary == DEV_PART,
	   "vmmx_buf_chunks: device chunks below 64 MiB, host chunks above");
	free(chunks);
	/* Go on with the expected boundary whatever was found: the data checks still hold. */
	boundary = DEV_PART;

	/* Whole buffer: fill, then check and increment, on the GPU. */
	fill_check_inc(ctx, p, n, seed, errs_dev, "the device and host chunks");

	/* Whole buffer to malloc'd memory: one vmmx_memcpy, split by libvmmx. */
	host = malloc(BUF_SIZE);
	pattern = malloc(WIN_SIZE);
	if (!host || !pattern)
		bail("out of memory");
	memset(host, 0, BUF_SIZE);
	is_err(0, vmmx_memcpy(ctx, host, p, BUF_SIZE),
	       "vmmx_memcpy: whole buffer to host, across the device/host boundary");
	is_uint(0, count_bad(host, 0, n, seed, 1, "copy"),
		"vmmx_memcpy: every element is hash + 1");

	/* Host chunks are CPU memory at the GPU's addresses. */
	is_uint(0, count_bad(p + boundary / 4, boundary / 4, (BUF_SIZE - boundary) / 4, seed, 1,
			     "CPU read"),
		"vmmx_buf_ptr: the CPU reads the host chunks directly");

	/* A host pattern written into a window straddling the boundary. */
	win_first = (boundary - WIN_SIZE / 2) / sizeof(unsigned int);
	win_n = WIN_SIZE / sizeof(unsigned int);
	for (size_t i = 0; i < win_n; i++)
		pattern[i] = gpu_hash32(win_first + i, seed2);
	is_err(0, vmmx_memcpy(ctx, p + win_first, pattern, WIN_SIZE),
	       "vmmx_memcpy: host pattern into a window straddling the boundary");
	{
		unsigned int *win = p + win_first;
		void *args[] = { &win, &win_n, &win_first, &seed2, &errs_dev };

		errors = ~0ull;
		is_err(0, run_counted(ctx, errs_dev, "check_u32", args, &errors),
		       "check_u32 over the straddling window");
		is_uint(0, errors, "check_u32: the GPU sees the pattern on both sides");
	}
	memset(host, 0, WIN_SIZE);
	is_err(0, vmmx_memcpy(ctx, host, p + win_first, WIN_SIZE),
	       "vmmx_memcpy: straddling window back to host");
	is_uint(0, count_bad(host, win_first, win_n, seed2, 0, "window read back"),
		"vmmx_memcpy: window reads back as written");
	is_uint(0, count_bad(p + boundary / 4, boundary / 4, WIN_SIZE / 2 / 4, seed2, 0,
			     "CPU read of the window"),
		"vmmx_buf_ptr: the CPU sees the window's host half");

	/* Nothing outside the window changed. */
	memset(host, 0, BUF_SIZE);
	is_err(0, vmmx_memcpy(ctx, host, p, BUF_SIZE), "vmmx_memcpy: whole buffer again");
	is_uint(0,
		count_bad(host, 0, win_first, seed, 1, "below the window") +
			count_bad(host + win_first + win_n, win_first + win_n,
				  n - win_first - win_n, seed, 1, "above the window") +
			count_bad(host + win_first, win_first, win_n, seed2, 0, "the window"),
		"vmmx_memcpy: the window changed and nothing else");

	/* A copy from a device chunk straight into a host chunk: GPU to GPU addresses. */
	is_err(0, vmmx_memcpy(ctx, p + (boundary + 8 * MiB) / 4, p, 4 * MiB),
	       "vmmx_memcpy: device chunk to host chunk");
	is_uint(0, count_bad(p + (boundary + 8 * MiB) / 4, 0, CP_N, seed, 1, "device to host"),
		"vmmx_buf_ptr: the CPU sees that copy on return");
	is_err(0, vmmx_memcpy(ctx, p, p + (boundary + 16 * MiB) / 4, 4 * MiB),
	       "vmmx_memcpy: host chunk to device chunk");
	memset(host, 0, 4 * MiB);
	is_err(0, vmmx_memcpy(ctx, host, p, 4 * MiB), "vmmx_memcpy: that device range to host");
	is_uint(0, count_bad(host, (boundary + 16 * MiB) / 4, CP_N, seed, 1, "host to device"),
		"vmmx_memcpy: host chunk data arrived on the device");

	/* memset across the boundary, seen from both sides. */
	is_err(0, vmmx_memset(ctx, p + win_first, 0xa5, WIN_SIZE),
	       "vmmx_memset: across the boundary");
	memset(host, 0, WIN_SIZE);
	vmmx_memcpy(ctx, host, p + win_first, WIN_SIZE);
	{
		size_t bad = 0;

		for (size_t i = 0; i < win_n; i++)
			bad += host[i] != 0xa5a5a5a5u ||
			       (i >= win_n / 2 && p[win_first + i] != 0xa5a5a5a5u);
		is_uint(0, bad, "vmmx_memset: both sides set, the CPU sees the host side");
	}

	free(pattern);
	free(host);
	vmmx_buf_destroy(buf);
	vmmx_buf_destroy(errs_buf);
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	err = vmmx_stats_get(ctx, &st);
	ok(!err && st.buffers == 0 && st.device_bytes == 0 && st.host_bytes == 0,
	   "vmmx_stats_get: nothing mapped after vmmx_buf_destroy");
	vmmx_ctx_destroy(ctx);
	tcuda_close();
	return tap_done();
#endif
}
