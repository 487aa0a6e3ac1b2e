// SPDX-License-Identifier: MIT
/*
 * migrate_kernel.c - kernels on a buffer whose chunks move between GPU
 * memory and pinned host memory, and on malloc'd memory registered with
 * vmmx_host_register().
 *
 * A 256 MiB buffer of 16 MiB chunks (VMMX_CHUNK_MAX) is filled by a kernel,
 * then ranges of it are migrated to host memory and back; after each move a
 * kernel checks every element and vmmx_buf_residency must match the chunk
 * list.  vmmx_buf_migrate_on() must wait for a kernel queued on the
 * stream's handle (vmmx_stream_handle) before it moves the chunks that
 * kernel writes.  Registered malloc'd memory is written and incremented by
 * kernels through the pointer vmmx_host_register() returns, and read by the
 * CPU where malloc put it.
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

#define ERRS_SIZE (2 * MiB)
#define BUF_SIZE (256 * MiB)
#define CHUNK (16 * MiB)
#define REG_SIZE (64 * MiB)


#define SEED 0x600dd00du
#define SEED2 0x5eed5eedu
#define SEED3 0x12345678u

#ifdef VMMX_HAVE_KERNELS

/* Whether vmmx_buf_residency of the whole buffer matches its chunk list, and the host bytes. */
static bool residency_matches(struct vmmx_buf *buf, size_t *host_p)
{
	struct vmmx_chunk_info c[64];
	struct vmmx_residency r;
	size_t n = 0, dev = 0, host = 0;

	if (vmmx_buf_chunks(buf, c, 64, &n) || n > 64 ||
	    vmmx_buf_residency(buf, 0, vmmx_buf_size(buf), &r))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (c[i].loc.kind == VMMX_LOC_DEVICE)
			dev += c[i].size;
		else
			host += c[i].size;
	}
	*host_p = r.host;
	return r.device == dev && r.host == host;
}
#endif

int main(void)
{
#ifndef VMMX_HAVE_KERNELS
	skip_without_kernels();
#else
	static const char *const vars[] = { "VMMX_CHUNK_MAX=16MiB", "VMMX_CHUNK_SIZE=2MiB", NULL };
	/* Ranges moved in turn, and the host bytes expected after each (16 MiB chunks). */
	static const struct {
		size_t off, len;
		enum vmmx_loc_kind to;
		size_t moved, host;
		const char *what;
	} steps[] = {
		{ 0, 64 * MiB, VMMX_LOC_HOST, 64 * MiB, 64 * MiB, "[0, 64) MiB to host" },
		{ 100 * MiB, 50 * MiB, VMMX_LOC_HOST, 64 * MiB, 128 * MiB,
		  "[100, 150) MiB to host (widened to [96, 160))" },
		{ 32 * MiB, 160 * MiB, VMMX_LOC_DEVICE, 96 * MiB, 32 * MiB,
		  "[32, 192) MiB to the device" },
		{ 0, BUF_SIZE, VMMX_LOC_HOST, 224 * MiB, BUF_SIZE, "everything to host" },
		{ 0, BUF_SIZE, VMMX_LOC_DEVICE, BUF_SIZE, 0, "everything to the device" },
	};
	const char *be = getenv("VMMX_BACKEND"), *dev_env = getenv("VMMX_DEVICE");
	struct vmmx_buf *errs_buf = NULL, *buf = NULL;
	struct vmmx_residency r = { 0, 0 };
	struct vmmx_stream *s = NULL;
	struct vmmx_ctx *ctx = NULL;
	struct vmmx_config cfg;
	struct vmmx_stats st;
	unsigned long long n = BUF_SIZE / sizeof(unsigned int), errors = ~0ull, first = 0;
	unsigned long long *errs_dev;
	unsigned int *p, *host, *mem, seed = SEED, seed2 = SEED2, seed3 = SEED3;
	struct vmmx_loc to;
	size_t moved = 0, hostb = 0;
	int device = dev_env ? atoi(dev_env) : 0, err;
	void *dptr = NULL;

	if (!be || strcmp(be, "cuda"))
		skip_all("needs VMMX_BACKEND=cuda (it is %s)", be ? be : "unset");
	err = tcuda_open(device);
	if (err)
		skip_all("no usable CUDA device %d: %s", device, tcuda_why());

	plan(10 + 6 * 5 + 13 + 14 + 1);

	if (!is_int(0, tcuda_load_kernels(), "tcuda_load_kernels: the kernels"))
		bail("cannot load the test kernels: %s", tcuda_why());

	vmmx_config_init(&cfg);
	cfg.backend = "cuda";
	cfg.device = device;
	cfg.policy = "device";
	cfg.vars = vars;
	if (!is_err(0, vmmx_ctx_create(&cfg, &ctx), "vmmx_ctx_create: cuda, 16 MiB chunks"))
		bail("no context: %s", vmmx_last_error());

	if (!is_err(0, vmmx_buf_create(ctx, ERRS_SIZE, "device", &errs_buf),
		    "vmmx_buf_create: counter buffer, policy device") ||
	    !is_err(0, vmmx_buf_resize(errs_buf, ERRS_SIZE), "vmmx_buf_resize: counter to 2 MiB"))
		bail("no counter buffer: %s", vmmx_last_error());
	errs_dev = vmmx_buf_ptr(errs_buf);

	if (!is_err(0, vmmx_buf_create(ctx, BUF_SIZE, "device", &buf),
		    "vmmx_buf_create: 256 MiB, policy device") ||
	    !is_err(0, vmmx_buf_resize(buf, BUF_SIZE), "vmmx_buf_resize: 256 MiB"))
		bail("no buffer: %s", vmmx_last_error());
	p = vmmx_buf_ptr(buf);
	err = vmmx_buf_residency(buf, 0, BUF_SIZE, &r);
	ok(!err && r.device == BUF_SIZE && r.host == 0, "vmmx_buf_residency: all on the device");

	{
		void *fill_args[] = { &p, &n, &seed };
		void *check_args[] = { &p, &n, &first, &seed, &errs_dev };

		is_int(0, tcuda_launch("fill_u32", GRID, BLOCK, fill_args), "fill_u32: 256 MiB");
		is_err(0, run_counted(ctx, errs_dev, "check_u32", check_args, &errors),
		       "check_u32 after the fill");
		is_uint(0, errors, "check_u32: every element as fill_u32 wrote it");

		/* Five migrations (6 assertions each), a kernel check after each. */
		for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
			to = (struct vmmx_loc){steps[i].to,
					       steps[i].to == VMMX_LOC_DEVICE ? device : 0};
			moved = 0;
			is_err(0, vmmx_buf_migrate(buf, steps[i].off, steps[i].len, to, &moved),
			       "vmmx_buf_migrate: %s", steps[i].what);
			is_uint(steps[i].moved, moved, "moved_p after %s", steps[i].what);
			hostb = SIZE_MAX;
			ok(residency_matches(buf, &hostb),
			   "vmmx_buf_residency matches vmmx_buf_chunks after %s", steps[i].what);
			is_uint(steps[i].host, hostb, "%zu MiB in host memory after %s",
				steps[i].host / MiB, steps[i].what);
			errors = ~0ull;
			is_err(0, run_counted(ctx, errs_dev, "check_u32", check_args, &errors),
			       "check_u32 after %s", steps[i].what);
			is_uint(0, errors, "check_u32: every element right after %s",
				steps[i].what);
			if (i == 0)
				diag("CPU read of the host chunks: %zu wrong elements",
				     count_bad(p, 0, 64 * MiB / 4, seed, 0,
					       "CPU read of [0, 64) MiB"));
		}
	}

	/* A kernel queued on the stream, then the move ordered after it: 13 assertions. */
	is_err(0, vmmx_stream_create(ctx, &s), "vmmx_stream_create");
	if (!s)
		bail("no stream: %s", vmmx_last_error());
	ok(vmmx_stream_handle(s) != NULL, "vmmx_stream_handle: a CUstream");
	{
		void *fill_args[] = { &p, &n, &seed2 };
		void *inc_args[] = { &p, &n, &seed2, &errs_dev };
		void *check_args[] = { &p, &n, &first, &seed2, &errs_dev };

		is_int(0,
		       tcuda_launch_on("fill_u32", GRID, BLOCK, fill_args, vmmx_stream_handle(s)),
		       "fill_u32 (new seed) queued on the stream, not waited for");
		to = (struct vmmx_loc){ VMMX_LOC_HOST, 0 };
		is_err(0, vmmx_buf_migrate_on(buf, 0, BUF_SIZE, to, s, &moved),
		       "vmmx_buf_migrate_on: everything to host after that kernel");
		is_uint(BUF_SIZE, moved, "moved_p: 256 MiB");
		is_uint(0, count_bad(p, 0, n, seed2, 0, "CPU read after migrate_on"),
			"the CPU reads the new pattern in the host chunks: the kernel ran first");
		errors = ~0ull;
		is_err(0, run_counted(ctx, errs_dev, "check_u32", check_args, &errors),
		       "check_u32 over the host chunks");
		is_uint(0, errors, "check_u32: the GPU sees it too");

		/* The other way: a kernel rewriting the host chunks, then the move to the device.
		 */
		vmmx_memset(ctx, errs_dev, 0, sizeof(*errs_dev));
		is_int(0, tcuda_launch_on("check_inc_u32", GRID, BLOCK, inc_args,
					  vmmx_stream_handle(s)),
		       "check_inc_u32 queued on the stream");
		to = (struct vmmx_loc){ VMMX_LOC_DEVICE, device };
		is_err(0, vmmx_buf_migrate_on(buf, 0, BUF_SIZE, to, s, &moved),
		       "vmmx_buf_migrate_on: everything to the device after that kernel");
		errors = ~0ull;
		vmmx_memcpy(ctx, &errors, errs_dev, sizeof(errors));
		is_uint(0, errors, "check_inc_u32 found every element right");
		host = malloc(BUF_SIZE);
		if (!host)
			bail("out of memory");
		memset(host, 0, BUF_SIZE);
		vmmx_memcpy(ctx, host, p, BUF_SIZE);
		is_uint(0, count_bad(host, 0, n, seed2, 1, "after migrate_on to the device"),
			"the device chunks hold what the kernel wrote before the move (hash + 1)");
		free(host);
	}
	is_err(0, vmmx_stream_sync(s), "vmmx_stream_sync");
	vmmx_stream_destroy(s);

	/* Registered malloc'd memory used by kernels: 14 assertions. */
	mem = malloc(REG_SIZE);
	if (!mem)
		bail("out of memory");
	memset(mem, 0, REG_SIZE);
	is_err(0, vmmx_host_register(ctx, mem, REG_SIZE, &dptr),
	       "vmmx_host_register: 64 MiB of malloc'd memory");
	ok(dptr != NULL, "vmmx_host_register: a device pointer");
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	err = vmmx_stats_get(ctx, &st);
	is_uint(1, err ? 0 : st.registrations, "vmmx_stats: one registration");
	is_uint(REG_SIZE, err ? 0 : st.registered_bytes, "vmmx_stats: 64 MiB registered");
	diag("host access path: %s; device pointer %s the pointer",
	     st.host_access == VMMX_HOST_ACCESS_REGISTER ? "registration"
	     : st.host_access == VMMX_HOST_ACCESS_HMM    ? "HMM"
							 : "ATS",
	     dptr == (void *)mem ? "equals" : "differs from");
	ok(st.host_access != VMMX_HOST_ACCESS_REGISTER || st.driver_calls[VMMX_OP_REGISTER] >= 1,
	   "the registration path called the driver");
	{
		unsigned long long rn = REG_SIZE / sizeof(unsigned int);
		unsigned int *d = dptr;
		void *fill_args[] = { &d, &rn, &seed3 };
		void *inc_args[] = { &d, &rn, &seed3, &errs_dev };

		is_int(0, tcuda_launch("fill_u32", GRID, BLOCK, fill_args),
		       "fill_u32 through the registered pointer");
		is_uint(0, count_bad(mem, 0, rn, seed3, 0, "CPU read of registered memory"),
			"the CPU sees the kernel's writes in the malloc'd memory");
		errors = ~0ull;
		is_err(0, run_counted(ctx, errs_dev, "check_inc_u32", inc_args, &errors),
		       "check_inc_u32 through the registered pointer");
		is_uint(0, errors, "check_inc_u32: the kernel read what the first one wrote");
		is_uint(0, count_bad(mem, 0, rn, seed3, 1, "CPU read after check_inc_u32"),
			"the CPU sees the increments");
		/* The CPU writes, a kernel checks. */
		for (size_t i = 0; i < rn; i++)
			mem[i] = gpu_hash32(i, seed2);
		errors = ~0ull;
		{
			void *check_args[] = { &d, &rn, &first, &seed2, &errs_dev };

			is_err(0, run_counted(ctx, errs_dev, "check_u32", check_args, &errors),
			       "check_u32 of what the CPU wrote");
			is_uint(0, errors, "check_u32: the GPU sees the CPU's writes");
		}
	}
	is_err(0, vmmx_host_unregister(ctx, mem), "vmmx_host_unregister");
	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	err = vmmx_stats_get(ctx, &st);
	ok(!err && st.registrations == 0 && st.registered_bytes == 0,
	   "vmmx_stats: nothing registered after vmmx_host_unregister");
	free(mem);

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
