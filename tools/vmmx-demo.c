// SPDX-License-Identifier: MIT
/*
 * vmmx-demo - grow one buffer past the device's memory (or past a device
 * limit) and show where every part landed.
 *
 * On a machine with a GPU it runs on the cuda backend with a 1 GiB device
 * limit unless VMMX_DEVICE_LIMIT says otherwise, so it stays small.  With no
 * GPU it says why and runs on the simulated backend, with a banner: libvmmx
 * itself never falls back silently, this program does so on purpose.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "stdout.h"
#include "tools/ctx.h"

#define MiB (1ull << 20)

static void usage(FILE *f)
{
	fprintf(f, "usage: vmmx-demo [--size SIZE] [--steps N] [--version]\n"
		   "Grows one buffer in N steps (default 4) to SIZE (default: 1.5 times the\n"
		   "device limit or, on the simulated backend, the device's memory) and prints\n"
		   "where every chunk landed.  The VMMX_* environment applies (see docs/REFERENCE.md).\n");
}

static const char *fmt(uint64_t b, char *buf, size_t len)
{
	if (b >= (1ull << 30) && b % (1ull << 30) == 0)
		snprintf(buf, len, "%llu GiB", (unsigned long long)(b >> 30));
	else if (b >= (1ull << 30))
		snprintf(buf, len, "%.2f GiB", (double)b / (1ull << 30));
	else
		snprintf(buf, len, "%llu MiB", (unsigned long long)(b / MiB));
	return buf;
}

static int open_ctx(struct vmmx_ctx **ctx_p, int *sim_p)
{
	const char *backend = getenv("VMMX_BACKEND");
	struct vmmx_config cfg;
	int err;

	vmmx_config_init(&cfg);
	/* Keep the demo small on a real GPU: cap device use unless told otherwise. */
	if (!getenv("VMMX_DEVICE_LIMIT"))
		cfg.device_limit = "1GiB";
	err = tool_ctx_create(&cfg, ctx_p);
	if (!err || (backend && *backend)) {
		if (err)
			fprintf(stderr, "vmmx-demo: %s: %s\n", vmmx_strerror(err), vmmx_last_error());
		*sim_p = backend && !strcmp(backend, "sim");
		return err;
	}
	printf("==============================================================\n"
	       " No usable GPU: %s\n"
	       " Running on the SIMULATED backend (VMMX_BACKEND=sim): the\n"
	       " placement is real libvmmx behaviour, the memory is emulated.\n"
	       "==============================================================\n",
	       vmmx_last_error());
	vmmx_config_init(&cfg);
	cfg.backend = "sim";
	{
		static const char *const vars[] = { "VMMX_SIM_DEVICE_MEM=256MiB", NULL };

		if (!getenv("VMMX_SIM_DEVICE_MEM"))
			cfg.vars = vars;
	}
	*sim_p = 1;
	err = tool_ctx_create(&cfg, ctx_p);
	if (err)
		fprintf(stderr, "vmmx-demo: %s: %s\n", vmmx_strerror(err), vmmx_last_error());
	return err;
}

/* A usage error, named as tools/opts.c names the other tools': the usage on stderr, status 2. */
static int usage_error(const char *what, const char *arg, const char *after)
{
	fprintf(stderr, "vmmx-demo: %s%s%s\n", what, arg, after);
	usage(stderr);
	return 2;
}

/* The options: 0, -1 after --help or --version, 2 after a usage error (the option named). */
static int parse_args(int argc, char **argv, uint64_t *target, unsigned long *steps)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		char *end;

		if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			return -1;
		}
		if (!strcmp(a, "--version")) {
			tool_print_version("vmmx-demo");
			return -1;
		}
		if (strcmp(a, "--size") && strcmp(a, "--steps"))
			return a[0] == '-' ? usage_error("unknown option ", a, "")
					   : usage_error("unexpected argument \"", a, "\"");
		if (i + 1 == argc)
			return usage_error("", a, " needs an argument");
		if (!strcmp(a, "--size")) {
			if (vmmx_parse_size(argv[++i], 0, target) || !*target) {
				fprintf(stderr, "vmmx-demo: --size %s: expected a size such as 512MiB or 2GiB\n", argv[i]);
				return 2;
			}
		} else {
			*steps = strtoul(argv[++i], &end, 10);
			if (!*argv[i] || *end || *steps < 1 || *steps > 64) {
				fprintf(stderr, "vmmx-demo: --steps %s: expected a whole number from 1 to 64\n",
					argv[i]);
				return 2;
			}
		}
	}
	return 0;
}

static void print_setup(const struct vmmx_ctx_info *info, uint64_t target, unsigned long steps)
{
	char a[32], b[32], c[32], d[32], e[32];

	printf("backend %s, device %d: %s\n", info->backend, info->device, info->device_name);
	printf("device memory %s (%s free), device limit %s, chunks %s..%s, policy %s\n",
	       fmt(info->device_total, a, sizeof(a)), fmt(info->device_free, b, sizeof(b)),
	       info->device_limit == UINT64_MAX ? "none" : fmt(info->device_limit, c, sizeof(c)),
	       fmt(info->chunk_min, d, sizeof(d)), fmt(info->chunk_max, e, sizeof(e)), info->policy);
	printf("growing one buffer to %s in %lu steps; its address never changes\n\n",
	       fmt(target, a, sizeof(a)), steps);
}

/* Grow @buf to @target in @steps, a line per step: where its bytes are. */
static int grow(struct vmmx_buf *buf, uint64_t target, unsigned long steps)
{
	char a[32], b[32], c[32];

	printf("%-6s %-12s %-12s %-12s %s\n", "step", "size", "on device", "on host", "address");
	for (unsigned long s = 1; s <= steps; s++) {
		struct vmmx_residency r;
		size_t size = (size_t)(target * s / steps);
		int err = vmmx_buf_resize(buf, size);

		if (!err)
			err = vmmx_buf_residency(buf, 0, vmmx_buf_size(buf), &r);
		if (err) {
			fprintf(stderr, "vmmx-demo: growing to %s: %s\n", fmt(size, a, sizeof(a)),
				vmmx_last_error());
			return err;
		}
		printf("%-6lu %-12s %-12s %-12s %p\n", s, fmt(vmmx_buf_size(buf), a, sizeof(a)),
		       fmt(r.device, b, sizeof(b)), fmt(r.host, c, sizeof(c)), vmmx_buf_ptr(buf));
	}
	return 0;
}

static uint8_t pattern(size_t i)
{
	return (uint8_t)(i * 131 + (i >> 20));
}

/* Data goes in and comes back out across every chunk boundary. */
static int check_data(struct vmmx_ctx *ctx, struct vmmx_buf *buf)
{
	size_t n = vmmx_buf_size(buf);
	uint8_t *host = malloc(n);
	int err;

	if (!host) {
		fprintf(stderr, "vmmx-demo: out of memory\n");
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		host[i] = pattern(i);
	err = vmmx_memcpy(ctx, vmmx_buf_ptr(buf), host, n);
	memset(host, 0, n);
	if (!err)
		err = vmmx_memcpy(ctx, host, vmmx_buf_ptr(buf), n);
	if (!err) {
		for (size_t i = 0; i < n; i++) {
			if (host[i] != pattern(i)) {
				fprintf(stderr, "vmmx-demo: data check failed at byte %zu\n", i);
				err = -1;
				break;
			}
		}
	} else {
		fprintf(stderr, "vmmx-demo: vmmx_memcpy: %s\n", vmmx_last_error());
	}
	free(host);
	return err;
}

static int print_chunks(struct vmmx_buf *buf)
{
	struct vmmx_chunk_info *chunks;
	char a[32], b[32];
	size_t n;

	vmmx_buf_chunks(buf, NULL, 0, &n);
	chunks = calloc(n ? n : 1, sizeof(*chunks));
	if (!chunks || vmmx_buf_chunks(buf, chunks, n, &n)) {
		free(chunks);
		return -1;
	}
	printf("\nwhere every part landed (%zu chunks):\n", n);
	printf("  %-14s %-12s %s\n", "offset", "size", "location");
	for (size_t i = 0; i < n; i++) {
		char loc[32];

		printf("  %-14s %-12s %s\n",
		       fmt((uint64_t)((char *)chunks[i].base - (char *)vmmx_buf_ptr(buf)), a, sizeof(a)),
		       fmt(chunks[i].size, b, sizeof(b)), vmmx_loc_name(chunks[i].loc, loc, sizeof(loc)));
	}
	free(chunks);
	return 0;
}

static void print_summary(struct vmmx_ctx *ctx, struct vmmx_buf *buf, int sim)
{
	struct vmmx_stats st = { .size = sizeof(st) };
	char a[32];

	vmmx_stats_get(ctx, &st);
	printf("\nfallbacks to host memory: %llu; driver calls: create %llu, map %llu, set access %llu, copy %llu\n",
	       (unsigned long long)st.fallbacks, (unsigned long long)st.driver_calls[VMMX_OP_CREATE],
	       (unsigned long long)st.driver_calls[VMMX_OP_MAP],
	       (unsigned long long)st.driver_calls[VMMX_OP_SET_ACCESS],
	       (unsigned long long)st.driver_calls[VMMX_OP_COPY]);
	printf("data written and read back across all %s: OK%s\n", fmt(vmmx_buf_size(buf), a, sizeof(a)),
	       sim ? " (simulated backend)" : "");
}

int main(int argc, char **argv)
{
	struct vmmx_ctx_info info = { .size = sizeof(info) };
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf;
	uint64_t target = 0, cap;
	unsigned long steps = 4;
	int sim, rc;

	/* First, so that it runs last: after everything printed. */
	tool_close_stdout_at_exit("vmmx-demo");
	rc = parse_args(argc, argv, &target, &steps);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (open_ctx(&ctx, &sim))
		return 1;
	rc = 1;
	if (vmmx_ctx_query(ctx, &info)) {
		fprintf(stderr, "vmmx-demo: %s\n", vmmx_last_error());
		goto out_ctx;
	}
	cap = info.device_limit < info.device_total ? info.device_limit : info.device_total;
	if (!target)
		target = cap + cap / 2;
	print_setup(&info, target, steps);
	if (vmmx_buf_create(ctx, target, NULL, &buf)) {
		fprintf(stderr, "vmmx-demo: vmmx_buf_create: %s\n", vmmx_last_error());
		goto out_ctx;
	}
	if (grow(buf, target, steps) || check_data(ctx, buf) || print_chunks(buf))
		goto out_buf;
	print_summary(ctx, buf, sim);
	rc = 0;
out_buf:
	vmmx_buf_destroy(buf);
out_ctx:
	vmmx_ctx_destroy(ctx);
	return rc;
}
