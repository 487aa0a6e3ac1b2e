// SPDX-License-Identifier: MIT
/*
 * vmmx-run - run a program with its CUDA allocations served by libvmmx:
 * GPU memory first, pinned host memory when the GPU is full or at a limit.
 *
 * It validates its options and the VMMX_* environment the program will
 * see, turns the options into the VMMX_* variables the library reads, puts
 * libvmmx-preload.so in front of LD_PRELOAD and execs the program.  The
 * check is libvmmx's own (a context and the policy made on the sim
 * backend, with as many devices as the program's backend has), so what
 * passes here is what the library will accept; of CUDA it only asks the
 * driver how many devices there are (cuInit, cuDeviceGetCount: no context,
 * no memory).  Exit status: the program's; 2 for a bad option or setting;
 * 127 when the program cannot be run (as a shell says).
 *
 * vmmx-run --ctl PID|PATH COMMAND is the other side of --control: it sends
 * one request line to a running program's control socket
 * (preload/control.c) and prints the answer.  Exit status: 0 for an "ok"
 * answer, 1 for an "error" one, 2 when there is nobody to ask.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "preload/ctl.h"
#include "vmmx.h"
#ifdef VMMX_HAVE_CUDA
#include "vmm/cudaload.h"
#endif

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
/* What --placement is when neither it nor VMMX_RUN_PLACEMENT says. */
#define RUN_DEFAULT_PLACEMENT "launch"
/*
 * The largest chunk under launch placement with VMMX_RUN_PLACE_PIECES=1,
 * unless VMMX_CHUNK_MAX or VMMX_CHUNK_SIZE is set: the piece a large
 * segment moves in (a chain's 8192 x 8192 bf16 layer; smaller pieces cost
 * more in driver calls than they save, see docs/PRELOAD.md).
 */
#define RUN_PIECE_CHUNK_MAX "128MiB"
/* --torch-alloc split: PyTorch's cached blocks of more MiB than this are never split. */
#define RUN_TORCH_SPLIT_MB "1024"

/* Devices libvmmx handles (VMMX_STATS_DEVICES: one slot per device ordinal). */
#define RUN_MAX_DEVICES VMMX_STATS_DEVICES
/* The most devices the sim backend takes through VMMX_SIM_DEVICES (lib/config.c). */
#define RUN_SIM_MAX_DEVICES 16

static void usage(FILE *f)
{
	fputs("usage: vmmx-run [OPTIONS] [--] PROGRAM [ARGS...]\n"
	      "Run PROGRAM with its CUDA allocations (cudaMalloc, cudaMallocAsync, cuMemAlloc...)\n"
	      "served by libvmmx: GPU memory first, then pinned host memory.\n"
	      "\n"
	      "  -p, --policy SPEC        placement policy (VMMX_POLICY; default\n"
	      "                           " RUN_DEFAULT_POLICY ")\n"
	      "  -l, --device-limit SIZE  most device memory libvmmx takes, on each device or\n"
	      "                           per device (0:8GiB,1:4GiB) (VMMX_DEVICE_LIMIT)\n"
	      "  -H, --headroom SIZE      device memory left free for the CUDA runtime and\n"
	      "                           libraries (VMMX_DEVICE_HEADROOM; default 1 GiB)\n"
	      "      --host-limit SIZE    most host memory libvmmx pins (VMMX_HOST_LIMIT)\n"
	      "  -m, --meminfo MODE       what cudaMemGetInfo reports: device (default: the\n"
	      "                           device under the limit), device+host (the room to\n"
	      "                           spill too) or device+host:SIZE (at most SIZE of it)\n"
	      "  -r, --report             print a summary to standard error at exit\n"
	      "      --report-file FILE   append it to FILE instead\n"
	      "  -t, --trace FILE         write libvmmx's JSON trace of placements (VMMX_TRACE)\n"
	      "                           and of kernel launches (implies --launches)\n"
	      "      --launches           watch kernel launches: the chunks each one names,\n"
	      "                           counted in --report (VMMX_RUN_LAUNCHES=1)\n"
	      "      --placement MODE     launch (default): bring the spilled segments a\n"
	      "                           launch names to the device first (implies\n"
	      "                           --launches; sets VMMX_HOST_COPIES=verified and\n"
	      "                           VMMX_HOST_CPU_ACCESS=placed unless they are set);\n"
	      "                           alloc: chunks stay where allocation put them, and\n"
	      "                           launches are not watched (VMMX_RUN_PLACEMENT)\n"
	      "      --preset NAME        inference: the settings measured fastest for\n"
	      "                           Hugging Face models (--torch-alloc split,\n"
	      "                           VMMX_RUN_PLACE_PARK=1), each where not set; not\n"
	      "                           for kernels that follow addresses the GPU wrote;\n"
	      "                           none (default) (VMMX_RUN_PRESET)\n"
	      "      --torch-alloc MODE   async: PyTorch allocates each tensor with\n"
	      "                           cudaMallocAsync (backend:cudaMallocAsync added to\n"
	      "                           PYTORCH_ALLOC_CONF, or PYTORCH_CUDA_ALLOC_CONF), so\n"
	      "                           that each is a segment of its own; split: PyTorch\n"
	      "                           never splits a cached block of more than 1 GiB\n"
	      "                           (max_split_size_mb:1024 added), so that tensors\n"
	      "                           do not land in transformers' warm-up block;\n"
	      "                           program (default): left to the program\n"
	      "                           (VMMX_RUN_TORCH_ALLOC)\n"
	      "  -v, --log LEVEL          libvmmx's log: none, error, warn, info, debug (VMMX_LOG)\n"
	      "      --control[=PATH]     listen for sleep and wake requests on a Unix socket,\n"
	      "                           PATH or vmmx-run-PID.sock in $XDG_RUNTIME_DIR (else\n"
	      "                           /tmp), from the first allocation on\n"
	      "  -h, --help               this text\n"
	      "      --version            the version\n"
	      "\n"
	      "SIZE: bytes, K/M/G/T or KiB/MiB/GiB/TiB (powers of 1024), KB/MB/GB/TB (powers of\n"
	      "1000), or N% of the device (of host memory for --host-limit).  The VMMX_*\n"
	      "environment is checked like the options.\n"
	      "\n"
	      "usage: vmmx-run --ctl PID|PATH sleep [offload|discard] | wake | status\n"
	      "Put the device memory of a program run with --control to sleep (offload: to\n"
	      "pinned host memory; discard: dropped), wake it, or show where it is.  The\n"
	      "program must be idle.  See vmmx-run(1).\n",
	      f);
}

__attribute__((noreturn)) static void bad(const char *opt, const char *val, const char *why)
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

/*
 * The variables set from options, with the option that set them: a bad
 * value is reported under the name the user typed.  Anything else came
 * from the environment.
 */
static struct {
	const char *var, *opt;
} from_opt[16];
static int nfrom_opt;

static void set_opt(const char *opt, const char *var, const char *val)
{
	int i;

	for (i = 0; i < nfrom_opt && strcmp(from_opt[i].var, var); i++)
		;
	if (i == nfrom_opt && nfrom_opt < (int)(sizeof(from_opt) / sizeof(from_opt[0])))
		nfrom_opt++;
	from_opt[i].var = var;
	from_opt[i].opt = opt;
	set(var, val);
}

static const char *opt_of(const char *var, size_t len)
{
	for (int i = 0; i < nfrom_opt; i++)
		if (strlen(from_opt[i].var) == len && !strncmp(from_opt[i].var, var, len))
			return from_opt[i].opt;
	return NULL;
}

/* A bad setting, by its option or its variable, with its value and why; exit 2. */
__attribute__((format(printf, 2, 3), noreturn)) static void refuse(const char *var,
								   const char *fmt, ...)
{
	const char *opt = opt_of(var, strlen(var));
	const char *val = getenv(var);
	char why[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (opt)
		bad(opt, val ? val : "", why);
	fprintf(stderr, "vmmx-run: %s=\"%s\" (environment): %s\n", var, val ? val : "", why);
	exit(2);
}

/*
 * libvmmx refused the configuration with @msg.  Its messages about one
 * variable start with the variable's name, most as VMMX_X="value" (where
 * it came from): ... or VMMX_X="value": ...; say them under the option when
 * an option set the variable.
 */
__attribute__((noreturn)) static void refused_by_lib(const char *msg)
{
	size_t len = strspn(msg, "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
	const char *opt, *val, *rest;
	char var[128], prefix[4400];

	if (len <= 5 || strncmp(msg, "VMMX_", 5) || len >= sizeof(var)) {
		fprintf(stderr, "vmmx-run: the configuration is not valid: %s\n", msg);
		exit(2);
	}
	snprintf(var, sizeof(var), "%.*s", (int)len, msg);
	val = getenv(var);
	snprintf(prefix, sizeof(prefix), "%s=\"%s\"", var, val ? val : "");
	if (!strncmp(msg, prefix, strlen(prefix))) {
		rest = msg + strlen(prefix);
		if (!strncmp(rest, ": ", 2))
			refuse(var, "%s", rest + 2);
		if (!strncmp(rest, " (", 2) && (rest = strstr(rest, "): ")))
			refuse(var, "%s", rest + 3);
	}
	opt = opt_of(var, len);
	if (opt)
		bad(opt, val ? val : "", msg);
	fprintf(stderr, "vmmx-run: %s\n", msg);
	exit(2);
}

/*
 * --meminfo MODE: device, device+host, or device+host:SIZE, SIZE the most
 * host memory the figures count (a size, or N% of host memory; libvmmx's
 * grammar, checked here so that a typo is refused by name).
 */
static void meminfo(const char *mode)
{
	static const char dh[] = "device+host";
	uint64_t v;

	if (!strcmp(mode, "device") || !strcmp(mode, dh)) {
		set("VMMX_RUN_MEMINFO", mode);
		unsetenv("VMMX_RUN_MEMINFO_HOST");
		return;
	}
	if (strncmp(mode, dh, sizeof(dh) - 1) || mode[sizeof(dh) - 1] != ':' ||
	    vmmx_parse_size(mode + sizeof(dh), 100, &v))
		bad("--meminfo", mode, "expected device, device+host or device+host:SIZE");
	set("VMMX_RUN_MEMINFO", dh);
	set("VMMX_RUN_MEMINFO_HOST", mode + sizeof(dh));
}

/*
 * --report-file and a file name in VMMX_RUN_REPORT: absolute (the program
 * may change directories before it exits and writes the report), and
 * writable now.  An existing file is opened for appending and left as it
 * is; a new one is created and removed again.  NULL: fine, else why not.
 */
static const char *report_path(const char *name, char *path, size_t len)
{
	char cwd[PATH_MAX];
	int fd;

	if (name[0] == '/') {
		if ((size_t)snprintf(path, len, "%s", name) >= len)
			return strerror(ENAMETOOLONG);
	} else {
		if (!getcwd(cwd, sizeof(cwd)))
			return strerror(errno);
		if ((size_t)snprintf(path, len, "%s/%s", strcmp(cwd, "/") ? cwd : "", name) >= len)
			return strerror(ENAMETOOLONG);
	}
	/* O_NONBLOCK: a FIFO without a reader answers ENXIO instead of hanging here. */
	fd = open(path, O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0)
			unlink(path);
	}
	if (fd < 0)
		return strerror(errno);
	close(fd);
	return NULL;
}

/* Where the report goes: --report-file, else --report, else VMMX_RUN_REPORT as given. */
static void report_opt(int report, const char *file)
{
	const char *env = getenv("VMMX_RUN_REPORT"), *why;
	char path[PATH_MAX];

	if (file) {
		if (!*file)
			bad("--report-file", file, "expected a file name");
		why = report_path(file, path, sizeof(path));
		if (why) {
			char msg[PATH_MAX + 256];

			snprintf(msg, sizeof(msg), "cannot write %s: %s", path, why);
			bad("--report-file", file, msg);
		}
		set("VMMX_RUN_REPORT", path);
	} else if (report) {
		set("VMMX_RUN_REPORT", "1");
	} else if (env && *env && strcmp(env, "0") && strcmp(env, "1") && strcmp(env, "stderr")) {
		/* The interposer's own reading (preload/state.c): anything else is a file. */
		why = report_path(env, path, sizeof(path));
		if (why)
			refuse("VMMX_RUN_REPORT", "cannot write %s: %s", path, why);
		set("VMMX_RUN_REPORT", path);
	}
}

/* The devices the program's backend has, and in words for messages. */
struct devices {
	int n;	       /* 0: unknown (no driver, no device: only the grammar is checked) */
	char what[192]; /* "the sim backend has 2 devices, 0 to 1 (VMMX_SIM_DEVICES=2)" */
};

static void log_none(void *arg, enum vmmx_log_level level, const char *msg)
{
	(void)arg;
	(void)level;
	(void)msg;
}

/* One variable alone through libvmmx's grammar: a sim context of its own, no environment. */
static void check_alone(const char *var)
{
	const char *vars[2] = {NULL, NULL};
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;
	char entry[512];

	snprintf(entry, sizeof(entry), "%s=%s", var, getenv(var));
	vars[0] = entry;
	vmmx_config_init(&cfg);
	cfg.flags = VMMX_CONFIG_NO_ENV;
	cfg.backend = "sim";
	cfg.policy = "host";
	cfg.log_fn = log_none;
	cfg.vars = vars;
	if (vmmx_ctx_create(&cfg, &ctx))
		refused_by_lib(vmmx_last_error());
	vmmx_ctx_destroy(ctx);
}

#ifdef VMMX_HAVE_CUDA
/* The CUDA devices visible to the program (CUDA_VISIBLE_DEVICES applies); 0: unknown. */
static int cuda_count(void)
{
	const struct vmm_cuda_api *api;
	char why[256];
	int n = 0;

	if (vmm_cuda_load(VMM_CUDA_CORE, &api, why, sizeof(why)))
		return 0;
	if (api->cuInit(0) != CUDA_SUCCESS || api->cuDeviceGetCount(&n) != CUDA_SUCCESS)
		return 0;
	return n > 0 ? n : 0;
}
#endif

static void count_devices(const char *backend, struct devices *d)
{
	const char *s;

	d->n = 0;
	d->what[0] = '\0';
	if (!strcmp(backend, "sim")) {
		s = getenv("VMMX_SIM_DEVICES");
		if (s)
			check_alone("VMMX_SIM_DEVICES");
		d->n = s ? atoi(s) : 1;
		snprintf(d->what, sizeof(d->what), "the sim backend has %d device%s, 0 to %d (%s%s)",
			 d->n, d->n == 1 ? "" : "s", d->n - 1, s ? "VMMX_SIM_DEVICES=" : "",
			 s ? s : "VMMX_SIM_DEVICES unset");
		return;
	}
#ifdef VMMX_HAVE_CUDA
	d->n = cuda_count();
	s = getenv("CUDA_VISIBLE_DEVICES");
	snprintf(d->what, sizeof(d->what), "the cuda backend sees %d device%s, 0 to %d%s%s%s",
		 d->n, d->n == 1 ? "" : "s", d->n - 1, s ? " (CUDA_VISIBLE_DEVICES=" : "", s ? s : "",
		 s ? ")" : "");
#endif
}

/* The first "N:SIZE" item of a per-device setting whose ordinal N is @n or more; -1: none. */
static long ordinal_past(const char *val, int n)
{
	const char *p = val;

	while (*p) {
		size_t len = strcspn(p, ",");
		const char *colon = memchr(p, ':', len);

		/* Anything else is the grammar's to judge. */
		if (colon && colon > p && strspn(p, "0123456789") == (size_t)(colon - p)) {
			long d = strtol(p, NULL, 10);

			if (d >= n)
				return d;
		}
		p += len;
		if (*p)
			p++;
	}
	return -1;
}

/*
 * VMMX_DEVICE and the ordinals of the per-device settings, against the
 * devices @d (libvmmx's most when unknown).  VMMX_DEVICE is checked here
 * alone: the interposer replaces it by each allocation's device, and the
 * sim context of the check runs on device 0.
 */
static void check_ordinals(const struct devices *d)
{
	static const char *const per_dev[] = {"VMMX_DEVICE_LIMIT", "VMMX_DEVICE_HEADROOM",
					      "VMMX_HEADROOM"};
	int n = d->n ? d->n : RUN_MAX_DEVICES;
	const char *s = getenv("VMMX_DEVICE");

	if (s && (!*s || strspn(s, "0123456789") != strlen(s)))
		refuse("VMMX_DEVICE", "expected a device ordinal (0, 1, ...)");
	if (s && (strlen(s) > 9 || atoi(s) >= n)) {
		if (d->n)
			refuse("VMMX_DEVICE", "no device %s: %s", s, d->what);
		refuse("VMMX_DEVICE", "libvmmx handles devices 0 to %d", n - 1);
	}
	for (size_t i = 0; i < sizeof(per_dev) / sizeof(per_dev[0]); i++) {
		long o;

		s = getenv(per_dev[i]);
		if (!s || (o = ordinal_past(s, n)) < 0)
			continue;
		if (d->n)
			refuse(per_dev[i], "names device %ld, but %s", o, d->what);
		refuse(per_dev[i], "names device %ld; libvmmx handles devices 0 to %d", o, n - 1);
	}
}

/*
 * The placement: launch unless asked otherwise (measured faster than alloc on
 * every workload of docs/PERFORMANCE.md, and within 2% of native on one that
 * fits).  Launch placement sends segments back and forth: unchanged ones go
 * back uncopied, and granted to the GPU only, a send back several times
 * cheaper (the copy hooks grant the CPU what a copy to or from pageable
 * memory needs: preload/copy.c).  VMMX_RUN_PLACEMENT from the environment is
 * checked like --placement.
 */
static void placement_defaults(void)
{
	const char *pl = getenv("VMMX_RUN_PLACEMENT"), *pieces;

	if (!pl || !*pl) {
		set("VMMX_RUN_PLACEMENT", RUN_DEFAULT_PLACEMENT);
		pl = RUN_DEFAULT_PLACEMENT;
	}
	if (strcmp(pl, "alloc") && strcmp(pl, "launch"))
		refuse("VMMX_RUN_PLACEMENT", "expected alloc or launch");
	if (strcmp(pl, "launch"))
		return;
	if (!getenv("VMMX_HOST_COPIES"))
		set("VMMX_HOST_COPIES", "verified");
	if (!getenv("VMMX_HOST_CPU_ACCESS"))
		set("VMMX_HOST_CPU_ACCESS", "placed");
	/* Large segments in pieces of a chunk (place.c), asked for: the chunks that small. */
	pieces = getenv("VMMX_RUN_PLACE_PIECES");
	if (pieces && !strcmp(pieces, "1") && !getenv("VMMX_CHUNK_MAX") && !getenv("VMMX_CHUNK_SIZE"))
		set("VMMX_CHUNK_MAX", RUN_PIECE_CHUNK_MAX);
}

/*
 * The setting PyTorch's allocator reads: PYTORCH_ALLOC_CONF where the
 * environment has it (PyTorch reads it first), else PYTORCH_CUDA_ALLOC_CONF;
 * its name in *@var_p, its value (NULL if unset) returned.
 */
static const char *torch_conf(const char **var_p)
{
	*var_p = getenv("PYTORCH_ALLOC_CONF") ? "PYTORCH_ALLOC_CONF" : "PYTORCH_CUDA_ALLOC_CONF";
	return getenv(*var_p);
}

/*
 * VMMX_RUN_PRESET=inference (--preset): the launch placement's settings
 * measured fastest for Hugging Face models, each set where the program's
 * environment or an option has not set it (those win): PyTorch's cached
 * blocks of more than 1 GiB never split (--torch-alloc split: each weight
 * a segment, transformers' warm-up block left unused and sent back) and
 * sends back parked (no host mapping at the program's addresses).  On the
 * H200, a 7B prefill at 1.5x the cap took 1.30x-1.35x the floor with them
 * against about 2.4x by default, and a 0.95 B training step 1.70x
 * (docs/PRELOAD.md).  Not the default: a parked segment faults a kernel
 * that reaches it through an address the GPU wrote.  It needs --placement
 * launch; alloc with it is refused.
 */
static void preset_defaults(void)
{
	static const char *const inference[][2] = {
		{ "VMMX_RUN_TORCH_ALLOC", "split" },
		{ "VMMX_RUN_PLACE_PARK", "1" },
	};
	const char *preset = getenv("VMMX_RUN_PRESET"), *pl, *conf, *var;

	if (!preset || !*preset || !strcmp(preset, "none"))
		return;
	if (strcmp(preset, "inference"))
		refuse("VMMX_RUN_PRESET", "expected inference or none");
	/* Any other value is placement_defaults()'s to refuse, by its own name. */
	pl = getenv("VMMX_RUN_PLACEMENT");
	if (pl && !strcmp(pl, "alloc"))
		refuse("VMMX_RUN_PRESET", "its settings are --placement launch's, and %s",
		       opt_of("VMMX_RUN_PLACEMENT", strlen("VMMX_RUN_PLACEMENT")) ?
			       "--placement alloc was given" : "VMMX_RUN_PLACEMENT is \"alloc\"");
	conf = torch_conf(&var);
	for (size_t i = 0; i < sizeof(inference) / sizeof(inference[0]); i++) {
		const char *v = getenv(inference[i][0]);

		if (v && *v)
			continue;
		/* PyTorch's async backend, the program's own, has no blocks to split. */
		if (!strcmp(inference[i][0], "VMMX_RUN_TORCH_ALLOC") && conf &&
		    strstr(conf, "backend:cudaMallocAsync"))
			continue;
		set(inference[i][0], inference[i][1]);
	}
}

/*
 * VMMX_RUN_TORCH_ALLOC (--torch-alloc): a setting for PyTorch's allocator,
 * in PYTORCH_ALLOC_CONF where the program's environment has it (PyTorch
 * reads it first), else PYTORCH_CUDA_ALLOC_CONF.  PyTorch's own caching
 * allocator carves many tensors out of one cudaMalloc (transformers'
 * from_pretrained makes one of the free memory less 1.2 GiB before it
 * loads, and the first layers land in it), which --placement launch can
 * only move whole: kernels name tensors inside it, whose ends are not
 * known.
 *  - async: its cudaMallocAsync backend; each tensor is an allocation of
 *    its own, freed when PyTorch frees it, and each moves on its own
 *    (docs/PRELOAD.md, "Each tensor a segment").  A setting naming another
 *    backend is refused.
 *  - split: max_split_size_mb; a cached block of more than 1 GiB is never
 *    split, so the warm-up block, freed at once, is left unused (the
 *    placement sends it back a cycle later: place.c, idle segments) and
 *    each weight is a cudaMalloc of its own.  A max_split_size_mb of the
 *    program's own is kept.
 * The program's other settings are kept.
 */
static void torch_alloc_defaults(void)
{
	const char *mode = getenv("VMMX_RUN_TORCH_ALLOC"), *var, *conf, *b, *key, *want;
	char *both;

	if (!mode || !*mode || !strcmp(mode, "program"))
		return;
	if (!strcmp(mode, "async")) {
		key = "backend:";
		want = "backend:cudaMallocAsync";
	} else if (!strcmp(mode, "split")) {
		key = "max_split_size_mb:";
		want = "max_split_size_mb:" RUN_TORCH_SPLIT_MB;
	} else {
		refuse("VMMX_RUN_TORCH_ALLOC", "expected async, split or program");
	}
	conf = torch_conf(&var);
	if (!conf || !*conf) {
		set(var, want);
		return;
	}
	b = strstr(conf, key);
	if (b) {
		size_t n = strcspn(b, ",");

		if ((n == strlen(want) && !strncmp(b, want, n)) || !strcmp(mode, "split"))
			return;
		refuse("VMMX_RUN_TORCH_ALLOC", "%s=\"%s\" names another backend", var, conf);
	}
	if (asprintf(&both, "%s,%s", conf, want) < 0) {
		fprintf(stderr, "vmmx-run: %s: out of memory\n", var);
		exit(2);
	}
	set(var, both);
	free(both);
}

/*
 * Check the configuration the program will run with: every VMMX_* setting
 * (the options are in the environment by now) and the policy, on a sim
 * context with the program's number of devices.  The policy is
 * VMMX_POLICY (--policy is there by now), else the default, which is then
 * set.
 */
static void check_config(void)
{
	const char *policy = getenv("VMMX_POLICY");
	const char *backend = getenv("VMMX_BACKEND");
	const char *vars[2] = {NULL, NULL};
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;
	struct vmmx_alloc *a;
	struct devices d;
	char ndev[48];
	int err;

	/* The program's backend: libvmmx's default is cuda. */
	if (!backend)
		backend = "cuda";
	if (strcmp(backend, "cuda") && strcmp(backend, "sim"))
		refuse("VMMX_BACKEND", "expected cuda or sim");
	count_devices(backend, &d);
	check_ordinals(&d);

	vmmx_config_init(&cfg);
	cfg.backend = "sim";
	cfg.device = 0;
	/* The context's own default policy stays out of it: the policy is checked below. */
	cfg.policy = "host";
	/* Messages come once, from here: libvmmx's log is read (VMMX_LOG is checked), not shown. */
	cfg.log_fn = log_none;
	if (strcmp(backend, "sim")) {
		/*
		 * As many simulated devices as the cuda backend has (VMMX_SIM_DEVICES
		 * is still checked alone: libvmmx reads it whatever the backend).
		 * Unknown: as many as the sim takes, so that only the grammar is judged.
		 */
		int n = d.n && d.n < RUN_SIM_MAX_DEVICES ? d.n : RUN_SIM_MAX_DEVICES;

		if (getenv("VMMX_SIM_DEVICES"))
			check_alone("VMMX_SIM_DEVICES");
		snprintf(ndev, sizeof(ndev), "VMMX_SIM_DEVICES=%d", n);
		vars[0] = ndev;
		cfg.vars = vars;
	}
	err = vmmx_ctx_create(&cfg, &ctx);
	if (err)
		refused_by_lib(vmmx_last_error());

	if (!policy) {
		policy = RUN_DEFAULT_POLICY;
		set("VMMX_POLICY", policy);
	}
	err = vmmx_alloc_create(ctx, policy, &a);
	if (err) {
		char why[1024];

		snprintf(why, sizeof(why), "%s", vmmx_last_error());
		vmmx_ctx_destroy(ctx);
		refuse("VMMX_POLICY", "%s", why);
	}
	vmmx_alloc_destroy(a);
	vmmx_ctx_destroy(ctx);
}

/*
 * --control[=PATH]: VMMX_RUN_CONTROL=1 (the interposer names the socket by
 * its pid) or PATH made absolute (the program may change directories before
 * its first allocation), in a directory that exists, short enough for a
 * socket address.
 */
static void control_opt(const char *arg)
{
	char path[PATH_MAX], cwd[PATH_MAX], dir[PATH_MAX];
	char *slash;
	struct stat sb;

	if (!arg) {
		set_opt("--control", "VMMX_RUN_CONTROL", "1");
		return;
	}
	if (!*arg || arg[strlen(arg) - 1] == '/')
		bad("--control", arg, "expected the path of a socket to make");
	if (arg[0] != '/' && !getcwd(cwd, sizeof(cwd)))
		bad("--control", arg, strerror(errno));
	if ((size_t)(arg[0] == '/' ? snprintf(path, sizeof(path), "%s", arg) :
				     snprintf(path, sizeof(path), "%s/%s",
					      strcmp(cwd, "/") ? cwd : "", arg)) >= VMMXP_CTL_PATH_MAX)
		bad("--control", arg, "a socket path has at most " VMMXP_CTL_PATH_MAX_S " bytes");
	snprintf(dir, sizeof(dir), "%s", path);
	slash = strrchr(dir, '/');
	*(slash == dir ? slash + 1 : slash) = '\0';
	if (stat(dir, &sb) || !S_ISDIR(sb.st_mode) || access(dir, W_OK | X_OK)) {
		char why[PATH_MAX + 64];

		snprintf(why, sizeof(why), "cannot make a socket in %s: %s", dir,
			 strerror(errno ? errno : ENOTDIR));
		bad("--control", arg, why);
	}
	set_opt("--control", "VMMX_RUN_CONTROL", path);
}

/* The socket of --ctl's @target: a path, or a pid's default socket; exits 2 when none. */
static void ctl_target(const char *target, char *path, size_t len)
{
	const char *dirs[2] = { vmmxp_ctl_dir(), "/tmp" };
	char tried[2][VMMXP_CTL_PATH_MAX];
	long pid;
	char *end;

	if (!*target || strspn(target, "0123456789") != strlen(target)) {
		if ((size_t)snprintf(path, len, "%s", target) >= len)
			bad("--ctl", target, "a socket path has at most " VMMXP_CTL_PATH_MAX_S " bytes");
		return;
	}
	errno = 0;
	pid = strtol(target, &end, 10);
	if (errno || pid <= 0 || pid > INT_MAX)
		bad("--ctl", target, "expected a process id or the path of a control socket");
	if (kill((pid_t)pid, 0) && errno == ESRCH) {
		fprintf(stderr, "vmmx-run: --ctl %s: no process %ld\n", target, pid);
		exit(2);
	}
	for (int i = 0; i < 2; i++) {
		if (vmmxp_ctl_path(dirs[i], (pid_t)pid, tried[i], sizeof(tried[i])))
			tried[i][0] = '\0';
		if (tried[i][0] && !access(tried[i], F_OK) && strlen(tried[i]) < len) {
			memcpy(path, tried[i], strlen(tried[i]) + 1);
			return;
		}
	}
	fprintf(stderr, "vmmx-run: --ctl %s: process %ld has no control socket (%s%s%s not "
			"there): it was not started with vmmx-run --control, it gave its "
			"socket another path (--control=PATH: give that), or it has not "
			"allocated device memory yet (the socket opens at its first allocation)\n",
		target, pid, tried[0], strcmp(tried[0], tried[1]) ? " nor " : "",
		strcmp(tried[0], tried[1]) ? tried[1] : "");
	exit(2);
}

/*
 * vmmx-run --ctl TARGET WORDS...: send WORDS as one line to the control
 * socket of TARGET and print the answer (errors to standard error).
 */
static int ctl(const char *target, int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	char line[VMMXP_CTL_LINE], reply[VMMXP_CTL_REPLY + 1];
	size_t used = 0, got = 0;
	ssize_t r;
	int fd;

	if (argc < 1) {
		fputs("vmmx-run: --ctl: no command: expected sleep [offload|discard], wake, "
		      "release or status\n", stderr);
		return 2;
	}
	for (int i = 0; i < argc; i++) {
		int n = snprintf(line + used, sizeof(line) - used, "%s%s", i ? " " : "", argv[i]);

		if (n < 0 || (size_t)n >= sizeof(line) - used - 1) {
			fputs("vmmx-run: --ctl: the command is too long\n", stderr);
			return 2;
		}
		used += (size_t)n;
	}
	line[used++] = '\n';
	ctl_target(target, sa.sun_path, sizeof(sa.sun_path));
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		int e = errno;

		fprintf(stderr, "vmmx-run: --ctl %s: cannot reach %s: %s%s\n", target, sa.sun_path,
			strerror(e),
			e == ECONNREFUSED ? " (nothing listens there: the process that made it has "
					    "exited)" : "");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	if (write(fd, line, used) != (ssize_t)used) {
		fprintf(stderr, "vmmx-run: --ctl %s: sending the request: %s\n", target,
			strerror(errno));
		close(fd);
		return 2;
	}
	/* The answer is complete when the server closes; a sleep may take seconds. */
	while (got < sizeof(reply) - 1 && (r = read(fd, reply + got, sizeof(reply) - 1 - got)))
		if (r > 0)
			got += (size_t)r;
		else if (errno != EINTR)
			break;
	close(fd);
	reply[got] = '\0';
	if (!strncmp(reply, "ok", 2)) {
		fputs(reply, stdout);
		return 0;
	}
	if (!got) {
		fprintf(stderr, "vmmx-run: --ctl %s: no answer (the process exited?)\n", target);
		return 2;
	}
	fprintf(stderr, "vmmx-run: --ctl %s: %s", target, reply);
	return 1;
}

/*
 * The build tree's interposer, when this vmmx-run runs from the build tree
 * (not installed): the way libvmmx finds the build tree's policies
 * (lib/policy.c), by where the running program lies.  A libtool wrapper
 * execs .libs/vmmx-run, which is inside the tree too.
 */
static const char *build_tree_preload(void)
{
#ifdef VMMX_BUILD_PRELOAD_LIB
	static const char tree[] = VMMX_ABS_BUILDDIR "/";
	char real[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", real, sizeof(real) - 1);

	if (n > 0) {
		real[n] = '\0';
		if (!strncmp(real, tree, sizeof(tree) - 1))
			return VMMX_BUILD_PRELOAD_LIB;
	}
#endif
	return NULL;
}

/*
 * LD_PRELOAD gets VMMX_RUN_PRELOAD, else the build tree's interposer when
 * running from the build tree, else the installed one.
 */
static void preload(void)
{
	const char *lib = getenv("VMMX_RUN_PRELOAD");
	const char *old = getenv("LD_PRELOAD");
	int given = lib && *lib;
	char *v;

	if (!given && !(lib = build_tree_preload()))
		lib = VMMX_PRELOAD_LIB;
	if (access(lib, R_OK)) {
		fprintf(stderr, "vmmx-run: %s: %s\n", lib, strerror(errno));
		if (given)
			fputs("vmmx-run: hint: VMMX_RUN_PRELOAD names the interposer, "
			      "libvmmx-preload.so; unset it to use the installed one\n",
			      stderr);
		else
			fputs("vmmx-run: hint: run `make install`, or set VMMX_RUN_PRELOAD to "
			      "the path of libvmmx-preload.so (in a build tree: "
			      "preload/.libs/libvmmx-preload.so)\n",
			      stderr);
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
	enum { OPT_HOST_LIMIT = 256, OPT_REPORT_FILE, OPT_VERSION, OPT_LAUNCHES, OPT_PLACEMENT,
	       OPT_CONTROL, OPT_CTL, OPT_TORCH_ALLOC, OPT_PRESET };
	static const struct option opts[] = {
		{ "policy", required_argument, NULL, 'p' },
		{ "device-limit", required_argument, NULL, 'l' },
		{ "headroom", required_argument, NULL, 'H' },
		{ "host-limit", required_argument, NULL, OPT_HOST_LIMIT },
		{ "meminfo", required_argument, NULL, 'm' },
		{ "report", no_argument, NULL, 'r' },
		{ "report-file", required_argument, NULL, OPT_REPORT_FILE },
		{ "trace", required_argument, NULL, 't' },
		{ "launches", no_argument, NULL, OPT_LAUNCHES },
		{ "placement", required_argument, NULL, OPT_PLACEMENT },
		{ "torch-alloc", required_argument, NULL, OPT_TORCH_ALLOC },
		{ "preset", required_argument, NULL, OPT_PRESET },
		{ "log", required_argument, NULL, 'v' },
		{ "control", optional_argument, NULL, OPT_CONTROL },
		{ "ctl", required_argument, NULL, OPT_CTL },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ 0 },
	};
	const char *report_file = NULL, *ctl_to = NULL;
	int c, report = 0;

	/* '+': options end at the program's name, so its own options are left alone. */
	while ((c = getopt_long(argc, argv, "+p:l:H:m:rt:v:h", opts, NULL)) != -1) {
		switch (c) {
		case 'p':
			set_opt("--policy", "VMMX_POLICY", optarg);
			break;
		case 'l':
			set_opt("--device-limit", "VMMX_DEVICE_LIMIT", optarg);
			break;
		case 'H':
			set_opt("--headroom", "VMMX_DEVICE_HEADROOM", optarg);
			break;
		case OPT_HOST_LIMIT:
			set_opt("--host-limit", "VMMX_HOST_LIMIT", optarg);
			break;
		case 'm':
			meminfo(optarg);
			break;
		case 'r':
			report = 1;
			break;
		case OPT_REPORT_FILE:
			report_file = optarg;
			break;
		case 't':
			if (!*optarg)
				bad("--trace", optarg, "expected a file name");
			set_opt("--trace", "VMMX_TRACE", optarg);
			/* Launch records go to the same file, one JSON line each (O_APPEND). */
			set_opt("--trace", "VMMX_RUN_LAUNCH_TRACE", optarg);
			break;
		case OPT_LAUNCHES:
			set_opt("--launches", "VMMX_RUN_LAUNCHES", "1");
			break;
		case OPT_PLACEMENT:
			if (strcmp(optarg, "alloc") && strcmp(optarg, "launch"))
				bad("--placement", optarg, "expected alloc or launch");
			set_opt("--placement", "VMMX_RUN_PLACEMENT", optarg);
			break;
		case OPT_PRESET:
			if (strcmp(optarg, "inference") && strcmp(optarg, "none"))
				bad("--preset", optarg, "expected inference or none");
			set_opt("--preset", "VMMX_RUN_PRESET", optarg);
			break;
		case OPT_TORCH_ALLOC:
			if (strcmp(optarg, "async") && strcmp(optarg, "split") &&
			    strcmp(optarg, "program"))
				bad("--torch-alloc", optarg, "expected async, split or program");
			set_opt("--torch-alloc", "VMMX_RUN_TORCH_ALLOC", optarg);
			break;
		case 'v':
			if (strcmp(optarg, "none") && strcmp(optarg, "error") &&
			    strcmp(optarg, "warn") && strcmp(optarg, "info") &&
			    strcmp(optarg, "debug"))
				bad("--log", optarg, "expected none, error, warn, info or debug");
			set_opt("--log", "VMMX_LOG", optarg);
			break;
		case OPT_CONTROL:
			control_opt(optarg);
			break;
		case OPT_CTL:
			ctl_to = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case OPT_VERSION:
			printf("vmmx-run (libvmmx) %s\n", PACKAGE_VERSION);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (ctl_to)
		return ctl(ctl_to, argc - optind, argv + optind);
	if (optind >= argc) {
		fputs("vmmx-run: no program to run\n", stderr);
		usage(stderr);
		return 2;
	}
	report_opt(report, report_file);
	preset_defaults();
	placement_defaults();
	torch_alloc_defaults();
	check_config();
	preload();
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "vmmx-run: %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
