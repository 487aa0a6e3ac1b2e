// SPDX-License-Identifier: MIT
/*
 * fallback_kernel.c - the Linux sysmem fallback on a real GPU: with
 * VMMX_DEVICE_LIMIT=4GiB a 6 GiB device-first buffer lands 4 GiB on the
 * device and 2 GiB in pinned host memory, a kernel writes and checks data
 * across all of it, and the trace (VMMX_TRACE) shows every fallback.
 *
 * Runs only with VMMX_BACKEND=cuda, GPU kernels built (nvcc), and a device.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"

#define GiB ((size_t)1 << 30)

int main(void)
{
	const char *be = getenv("VMMX_BACKEND");

	if (!be || strcmp(be, "cuda"))
		skip_all("needs VMMX_BACKEND=cuda (it is %s)", be ? be : "unset");
#ifndef VMMX_HAVE_KERNELS
	skip_all("GPU kernels not built: configure found no nvcc");
#else
	const char *dev_env = getenv("VMMX_DEVICE");
	int device = dev_env ? atoi(dev_env) : 0;
	char trace[] = "/tmp/vmmx-fallback-trace-XXXXXX", line[2048], *tvar;
	const char *vars[3] = { "VMMX_DEVICE_LIMIT=4GiB", NULL, NULL };
	struct vmmx_stats st = { .size = sizeof(st) };
	struct vmmx_chunk_info c[64];
	struct vmmx_residency r;
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf, *errs_buf;
	unsigned long long n = 6 * GiB / sizeof(unsigned int), *errs, nerr = ~0ull;
	unsigned int seed = 0xfa11bacc, *p;
	size_t nchunks = 0, host_chunks = 0, lines = 0, fb_lines = 0, fb_limit = 0;
	void *args[4];
	FILE *f;
	int fd;

	if (tcuda_open(device))
		skip_all("no usable CUDA device %d: %s", device, tcuda_why());
	plan(16);
	if (!is_int(0, tcuda_load_kernels(), "tcuda_load_kernels: the kernels"))
		bail("cannot load the test kernels: %s", tcuda_why());
	fd = mkstemp(trace);
	if (fd < 0)
		bail("mkstemp failed");
	close(fd);
	tvar = malloc(strlen(trace) + 16);
	sprintf(tvar, "VMMX_TRACE=%s", trace);
	vars[1] = tvar;
	vmmx_config_init(&cfg);
	cfg.backend = "cuda";
	cfg.vars = vars;
	cfg.flags = VMMX_CONFIG_NO_ENV;
	if (vmmx_ctx_create(&cfg, &ctx))
		bail("vmmx_ctx_create: %s", vmmx_last_error());

	is_err(0, vmmx_buf_create(ctx, 8 * GiB, "device-first", &buf), "vmmx_buf_create: 8 GiB of addresses");
	is_err(0, vmmx_buf_resize(buf, 6 * GiB), "vmmx_buf_resize: 6 GiB under a 4 GiB device limit");
	is_err(0, vmmx_buf_residency(buf, 0, 6 * GiB, &r), "vmmx_buf_residency");
	ok(r.device == 4 * GiB && r.host == 2 * GiB, "4 GiB on the device, 2 GiB on host (device %zu, host %zu)",
	   r.device, r.host);
	vmmx_buf_chunks(buf, c, 64, &nchunks);
	for (size_t i = 0; i < nchunks && i < 64; i++)
		host_chunks += c[i].loc.kind == VMMX_LOC_HOST;
	diag("%zu chunks, %zu on host", nchunks, host_chunks);

	/* The error counter in host memory: it must not take device room. */
	is_err(0, vmmx_buf_create(ctx, 2 << 20, "host", &errs_buf), "vmmx_buf_create: error counter");
	is_err(0, vmmx_buf_resize(errs_buf, 2 << 20), "vmmx_buf_resize: error counter");
	errs = vmmx_buf_ptr(errs_buf);
	*errs = 0;
	p = vmmx_buf_ptr(buf);
	args[0] = &p;
	args[1] = &n;
	args[2] = &seed;
	args[3] = &errs;
	is_int(0, tcuda_launch("fill_u32", 2048, 256, args), "fill_u32 over 6 GiB of device and host chunks");
	is_int(0, tcuda_launch("check_inc_u32", 2048, 256, args), "check_inc_u32 over the same 6 GiB");
	nerr = *errs; /* a host chunk: the CPU reads it directly */
	is_uint(0, nerr, "check_inc_u32: every element right on both sides of the boundary");

	vmmx_stats_get(ctx, &st);
	is_uint(host_chunks, st.fallbacks, "vmmx_stats_get: one fallback per host chunk");
	is_uint(host_chunks, st.fallbacks_limit, "vmmx_stats_get: every fallback for the limit");

	f = fopen(trace, "r");
	while (f && fgets(line, sizeof(line), f)) {
		lines++;
		if (strstr(line, "\"fallback\":true")) {
			fb_lines++;
			fb_limit += strstr(line, "\"preferred\":\"device:") && strstr(line, "\"chosen\":\"host\"") &&
				    strstr(line, "\"reason\":\"limit\"") != NULL;
		}
	}
	if (f)
		fclose(f);
	is_uint(nchunks + 1, lines, "VMMX_TRACE: one line per chunk placed (and the counter's)");
	is_uint(host_chunks, fb_lines, "VMMX_TRACE: one fallback line per host chunk");
	is_uint(host_chunks, fb_limit, "VMMX_TRACE: preferred device, chosen host, reason limit");
	diag("trace in %s (kept for reading)", trace);

	vmmx_buf_destroy(errs_buf);
	vmmx_buf_destroy(buf);
	vmmx_stats_get(ctx, &st);
	ok(st.device_bytes == 0 && st.host_bytes == 0, "vmmx_buf_destroy: nothing mapped after");
	vmmx_ctx_destroy(ctx);
	tcuda_close();
	free(tvar);
	return tap_done();
#endif
}
