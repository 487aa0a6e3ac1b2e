// SPDX-License-Identifier: MIT
/*
 * vmmx-run - run a program with its CUDA allocations served by libvmmx:
 * GPU memory first, pinned host memory when the GPU is full or at a limit.
 *
 * It validates its options with libvmmx's own grammar (vmmx_parse_size, the
 * policy loader), turns them into the VMMX_* variables the library reads,
 * puts libvmmx-preload.so in front of LD_PRELOAD and execs the program.  It
 * never touches CUDA itself.  Exit status: the program's; 2 for a bad
 * option; 127 when the program cannot be run (as a shell says).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"

#ifndef VMMX_PRELOAD_LIB
#define VMMX_PRELOAD_LIB "libvmmx-preload.so"
#endif

/*
 * The placement for programs without hooks, measured against device-first,
 * larger reserves and lru (docs/PRELOAD.md): weights fill the device in
 * allocation order, and the last 64 MiB stay for the small, hot allocations
 * that come later (activations, cuBLAS's workspace).
 */
#define RUN_DEFAULT_POLICY "device-first:reserve=64MiB"

static void usage(FILE *f)
{
	fputs("usage: vmmx-run [OPTIONS] [--] PROGRAM [ARGS...]\n"
	      "Run PROGRAM with its CUDA allocations (cudaMalloc, cudaMallocAsync, cuMemAlloc...)\n"
	      "served by libvmmx: GPU memory first, then pinned host memory.\n"
	      "\n"
	      "  -p, --policy SPEC        placement policy (VMMX_POLICY; default\n"
	      "                           " RUN_DEFAULT_POLICY ")\n"
	      "  -l, --device-limit SIZE  most device memory libvmmx takes (VMMX_DEVICE_LIMIT)\n"
	      "  -H, --headroom SIZE      device memory left free for the CUDA runtime and\n"
	      "                           libraries (VMMX_DEVICE_HEADROOM; default 1 GiB)\n"
	      "      --host-limit SIZE    most host memory libvmmx pins (VMMX_HOST_LIMIT)\n"
	      "  -m, --meminfo MODE       what cudaMemGetInfo reports: device (default: the\n"
	      "                           device under the limit) or device+host (the room to\n"
	      "                           spill too)\n"
	      "  -r, --report             print a summary to standard error at exit\n"
	      "      --report-file FILE   append it to FILE instead\n"
	      "  -t, --trace FILE         write libvmmx's JSON trace of placements (VMMX_TRACE)\n"
	      "  -v, --log LEVEL          libvmmx's log: none, error, warn, info, debug (VMMX_LOG)\n"
	      "  -h, --help               this text\n"
	      "\n"
	      "SIZE: bytes, K/M/G/T or KiB/MiB/GiB/TiB (powers of 1024), KB/MB/GB/TB (powers of\n"
	      "1000), or N% of the device (of host memory for --host-limit).  See vmmx-run(1).\n",
	      f);
}

static void bad(const char *opt, const char *val, const char *why)
{
	fprintf(stderr, "vmmx-run: %s '%s': %s\n", opt, val, why);
	fputs("Try 'vmmx-run --help'.\n", stderr);
	exit(2);
}

static void set(const char *name, const char *value)
{
	if (setenv(name, value, 1)) {
		fprintf(stderr, "vmmx-run: setenv %s: %s\n", name, strerror(errno));
		exit(2);
	}
}

static void size_opt(const char *opt, const char *var, const char *val)
{
	uint64_t v;

	/* Only the grammar is checked here: a percentage resolves when the device is known. */
	if (vmmx_parse_size(val, 100, &v))
		bad(opt, val,
		    "not a size: bytes (4096), K/M/G/T or KiB/MiB/GiB/TiB (powers of 1024), "
		    "KB/MB/GB/TB (powers of 1000), or N%");
	set(var, val);
}

/*
 * Load the policy on the sim backend: a bad name or argument fails here, not
 * in the program.  NULL: VMMX_POLICY from the environment, else the default.
 */
static void policy_opt(const char *val)
{
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;
	struct vmmx_alloc *a;
	char *trace = getenv("VMMX_TRACE");
	int err;

	if (!val && getenv("VMMX_POLICY"))
		return;
	if (!val)
		val = RUN_DEFAULT_POLICY;
	/* The check must not write to the program's trace. */
	trace = trace ? strdup(trace) : NULL;
	unsetenv("VMMX_TRACE");
	vmmx_config_init(&cfg);
	cfg.backend = "sim";
	cfg.log = "none";
	err = vmmx_ctx_create(&cfg, &ctx);
	if (err) {
		fprintf(stderr, "vmmx-run: the configuration is not valid: %s\n", vmmx_last_error());
		exit(2);
	}
	err = vmmx_alloc_create(ctx, val, &a);
	if (err) {
		char why[512];

		snprintf(why, sizeof(why), "%s", vmmx_last_error());
		vmmx_ctx_destroy(ctx);
		bad("--policy", val, why);
	}
	vmmx_alloc_destroy(a);
	vmmx_ctx_destroy(ctx);
	if (trace)
		set("VMMX_TRACE", trace);
	free(trace);
	set("VMMX_POLICY", val);
}

static void preload(void)
{
	const char *lib = getenv("VMMX_RUN_PRELOAD");
	const char *old = getenv("LD_PRELOAD");
	char *v;

	if (!lib || !*lib)
		lib = VMMX_PRELOAD_LIB;
	if (access(lib, R_OK)) {
		fprintf(stderr, "vmmx-run: %s: %s\n", lib, strerror(errno));
		exit(2);
	}
	if (old && *old) {
		v = malloc(strlen(lib) + strlen(old) + 2);
		if (!v) {
			fputs("vmmx-run: out of memory\n", stderr);
			exit(2);
		}
		sprintf(v, "%s:%s", lib, old);
		set("LD_PRELOAD", v);
		free(v);
	} else {
		set("LD_PRELOAD", lib);
	}
}

int main(int argc, char **argv)
{
	enum { OPT_HOST_LIMIT = 256, OPT_REPORT_FILE };
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "device-limit", required_argument, NULL, 'l' },
		{ "headroom", required_argument, NULL, 'H' },
		{ "host-limit", required_argument, NULL, OPT_HOST_LIMIT },
		{ "meminfo", required_argument, NULL, 'm' },
		{ "report", no_argument, NULL, 'r' },
		{ "report-file", required_argument, NULL, OPT_REPORT_FILE },
		{ "trace", required_argument, NULL, 't' },
		{ "log", required_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	const char *policy = NULL;
	int c;

	/* '+': options end at the program's name, so its own options are left alone. */
	while ((c = getopt_long(argc, argv, "+p:l:H:m:rt:v:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			policy = optarg;
			break;
		case 'l':
			size_opt("--device-limit", "VMMX_DEVICE_LIMIT", optarg);
			break;
		case 'H':
			size_opt("--headroom", "VMMX_DEVICE_HEADROOM", optarg);
			break;
		case OPT_HOST_LIMIT:
			size_opt("--host-limit", "VMMX_HOST_LIMIT", optarg);
			break;
		case 'm':
			if (strcmp(optarg, "device") && strcmp(optarg, "device+host"))
				bad("--meminfo", optarg, "expected device or device+host");
			set("VMMX_RUN_MEMINFO", optarg);
			break;
		case 'r':
			set("VMMX_RUN_REPORT", "1");
			break;
		case OPT_REPORT_FILE:
			if (!*optarg)
				bad("--report-file", optarg, "expected a file name");
			set("VMMX_RUN_REPORT", optarg);
			break;
		case 't':
			if (!*optarg)
				bad("--trace", optarg, "expected a file name");
			set("VMMX_TRACE", optarg);
			break;
		case 'v':
			if (strcmp(optarg, "none") && strcmp(optarg, "error") &&
			    strcmp(optarg, "warn") && strcmp(optarg, "info") &&
			    strcmp(optarg, "debug"))
				bad("--log", optarg, "expected none, error, warn, info or debug");
			set("VMMX_LOG", optarg);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		fputs("vmmx-run: no program to run\n", stderr);
		usage(stderr);
		return 2;
	}
	/* Checked after the sizes, so that the policy's context sees them. */
	policy_opt(policy);
	preload();
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "vmmx-run: %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
