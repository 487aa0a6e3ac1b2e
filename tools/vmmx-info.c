// SPDX-License-Identifier: MIT
/*
 * vmmx-info - what this machine offers libvmmx, and how libvmmx is set up
 * here: the backend and driver, each GPU's memory and the attributes that
 * matter for placement, allocation granularities, whether HMM works (and
 * why not), which path vmmx_host_register takes, every policy that could
 * load (and why a refused file is refused), and the effective configuration
 * and limits.  A readable table, or JSON for scripts (--json).
 *
 * It creates its context from the environment (VMMX_*), like any program.
 * With VMMX_BACKEND unset and no usable GPU it says why the cuda backend is
 * unavailable and reports the sim backend instead: libvmmx itself never
 * falls back, this program does so on purpose (as vmmx-demo does).
 *
 * Exit status: 0 success, 1 failure (the message on stderr), 2 bad usage.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"

#define PROG "vmmx-info"
#define MAX_DEVICES 16
#define LABEL 26 /* width of the label column of the table */

static void usage(FILE *f)
{
	fprintf(f,
		"usage: " PROG " [--json] [--device N]\n"
		"Prints the backend, the driver, each GPU's memory and attributes, allocation\n"
		"granularities, whether HMM works (and why not), the host-access path of\n"
		"vmmx_host_register, every policy found (and why a file is refused), and the\n"
		"effective configuration and limits.  The VMMX_* environment applies.\n"
		"\n"
		"  --json       one JSON object instead of the table\n"
		"  --device N   open the context on device N (as VMMX_DEVICE=N)\n"
		"  --help       this text\n");
}

/* ---- formatting ---- */

static const char *fmt_size(uint64_t b, char *buf, size_t len)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	int u = 0;

	while (u < 5 && b >= (1ull << (10 * (u + 1))))
		u++;
	if (!u || b % (1ull << (10 * u)) == 0)
		snprintf(buf, len, "%llu %s", (unsigned long long)(b >> (10 * u)), unit[u]);
	else
		snprintf(buf, len, "%.2f %s", (double)b / (double)(1ull << (10 * u)), unit[u]);
	return buf;
}

static const char *yes_no(int v)
{
	return v == 1 ? "yes" : v == 0 ? "no" : "unknown";
}

static void row(const char *indent, const char *label, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void row(const char *indent, const char *label, const char *fmt, ...)
{
	int w = LABEL - (int)strlen(indent);
	va_list ap;

	printf("%s%-*s", indent, w > 0 ? w : 0, label);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

/* A long text in the value column, wrapped at 80 columns. */
static void row_wrapped(const char *indent, const char *label, const char *text)
{
	const int width = 80 - LABEL;
	bool first = true;

	while (*text || first) {
		int n = (int)strlen(text);

		if (n > width) {
			n = width;
			while (n > 0 && text[n] != ' ')
				n--;
			if (!n)
				n = width;
		}
		if (first)
			printf("%s%-*s%.*s\n", indent, LABEL - (int)strlen(indent), label, n, text);
		else
			printf("%*s%.*s\n", LABEL, "", n, text);
		first = false;
		text += n;
		while (*text == ' ')
			text++;
	}
}

/* ---- JSON output ---- */

struct json {
	int depth;
	bool first[16];
};

static void j_sep(struct json *j, const char *key)
{
	if (j->depth) {
		printf("%s\n", j->first[j->depth] ? "" : ",");
		j->first[j->depth] = false;
	}
	printf("%*s", 2 * j->depth, "");
	if (key)
		printf("\"%s\": ", key); /* keys are ours: plain ASCII */
}

/* A string as JSON: quotes, backslashes and control bytes escaped, bytes
 * that are not UTF-8 replaced by U+FFFD, so that any file name prints valid
 * JSON. */
static void j_quote(const char *s)
{
	const unsigned char *p = (const unsigned char *)s;

	putchar('"');
	while (*p) {
		unsigned char c = *p;
		int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2
			: (c & 0xf8) == 0xf0 ? 3 : -1;
		int k;

		if (c == '"' || c == '\\') {
			printf("\\%c", c);
		} else if (c == '\n') {
			fputs("\\n", stdout);
		} else if (c == '\t') {
			fputs("\\t", stdout);
		} else if (c < 0x20 || c == 0x7f) {
			printf("\\u%04x", c);
		} else if (!n) {
			putchar(c);
		} else {
			for (k = 1; n > 0 && k <= n; k++)
				if ((p[k] & 0xc0) != 0x80)
					break;
			/* Reject overlong two-byte forms; longer ones are rare enough. */
			if (n < 0 || k <= n || (n == 1 && c < 0xc2)) {
				fputs("\\ufffd", stdout);
			} else {
				fwrite(p, 1, (size_t)n + 1, stdout);
				p += n;
			}
		}
		p++;
	}
	putchar('"');
}

static void j_open(struct json *j, const char *key, char brace)
{
	j_sep(j, key);
	putchar(brace);
	j->first[++j->depth] = true;
}

static void j_close(struct json *j, char brace)
{
	bool empty = j->first[j->depth];

	j->depth--;
	if (empty)
		putchar(brace);
	else
		printf("\n%*s%c", 2 * j->depth, "", brace);
	if (!j->depth)
		putchar('\n');
}

static void j_str(struct json *j, const char *key, const char *val)
{
	j_sep(j, key);
	if (val)
		j_quote(val);
	else
		fputs("null", stdout);
}

static void j_int(struct json *j, const char *key, long long val)
{
	j_sep(j, key);
	printf("%lld", val);
}

/* A byte count; UINT64_MAX ("none") is null. */
static void j_bytes(struct json *j, const char *key, uint64_t val)
{
	j_sep(j, key);
	if (val == UINT64_MAX)
		fputs("null", stdout);
	else
		printf("%llu", (unsigned long long)val);
}

/* A flag: 1 true, 0 false, anything else (unknown) null. */
static void j_flag(struct json *j, const char *key, int val)
{
	j_sep(j, key);
	fputs(val == 1 ? "true" : val == 0 ? "false" : "null", stdout);
}

/* ---- facts gathered before printing ---- */

struct facts {
	char cuda_unavailable[512];       /* why the cuda backend could not open; "" if it did */
	struct vmmx_ctx_info ci;
	int ndev;
	struct vmmx_device_info dev[MAX_DEVICES];
	char dev_err[MAX_DEVICES][256];   /* "" when dev[i] is valid */
	struct vmmx_hmm_info hmm;
	int hmm_err;
	char hmm_errmsg[256];
	struct vmmx_policy_info *pol;
	size_t npol;
	char module_version[64];          /* NVRM version, "" if unknown */
	bool sim;
};

/* The NVIDIA kernel module's version (580.159.04) from /proc/driver/nvidia/version. */
static void module_version(char *out, size_t len)
{
	FILE *f = fopen("/proc/driver/nvidia/version", "re");
	char line[512], *tok, *save;

	out[0] = '\0';
	if (!f)
		return;
	if (fgets(line, sizeof(line), f)) {
		for (tok = strtok_r(line, " \t\n", &save); tok; tok = strtok_r(NULL, " \t\n", &save)) {
			unsigned a, b;
			char c;

			if (sscanf(tok, "%u.%u%c", &a, &b, &c) >= 2) {
				snprintf(out, len, "%s", tok);
				break;
			}
		}
	}
	fclose(f);
}

/* Errors worth trying the sim for: no driver, no device, no VMM, cuda not built. */
static bool no_gpu(int err)
{
	return err == -VMMX_ENODRIVER || err == -VMMX_ENODEV || err == -VMMX_ENOTSUP ||
	       err == -VMMX_ENOBACKEND || err == -VMMX_EDRIVER;
}

static int open_ctx(int device, struct vmmx_ctx **ctx_p, char *cuda_why, size_t len)
{
	const char *backend = getenv("VMMX_BACKEND");
	struct vmmx_config cfg;
	int err;

	vmmx_config_init(&cfg);
	cfg.device = device;
	err = vmmx_ctx_create(&cfg, ctx_p);
	if (err && !(backend && *backend) && no_gpu(err)) {
		snprintf(cuda_why, len, "%s", *vmmx_last_error() ? vmmx_last_error() : vmmx_strerror(err));
		cfg.backend = "sim";
		err = vmmx_ctx_create(&cfg, ctx_p);
	}
	if (err)
		fprintf(stderr, PROG ": %s: %s\n", vmmx_strerror(err), vmmx_last_error());
	return err;
}

static int gather(struct vmmx_ctx *ctx, struct facts *f)
{
	size_t n = 0;
	int err, rc = 0;

	f->ci.size = sizeof(f->ci);
	err = vmmx_ctx_query(ctx, &f->ci);
	if (err) {
		fprintf(stderr, PROG ": vmmx_ctx_query: %s: %s\n", vmmx_strerror(err),
			vmmx_last_error());
		return err;
	}
	f->sim = !strcmp(f->ci.backend, "sim");
	f->ndev = f->ci.device_count < MAX_DEVICES ? f->ci.device_count : MAX_DEVICES;
	for (int d = 0; d < f->ndev; d++) {
		f->dev[d].size = sizeof(f->dev[d]);
		err = vmmx_device_info(ctx, d, &f->dev[d]);
		if (err) {
			snprintf(f->dev_err[d], sizeof(f->dev_err[d]), "%s: %s", vmmx_strerror(err),
				 vmmx_last_error());
			fprintf(stderr, PROG ": device %d: %s\n", d, f->dev_err[d]);
			rc = err;
		}
	}
	f->hmm.size = sizeof(f->hmm);
	f->hmm_err = vmmx_hmm_probe(ctx, &f->hmm);
	if (f->hmm_err) {
		snprintf(f->hmm_errmsg, sizeof(f->hmm_errmsg), "%s: %s", vmmx_strerror(f->hmm_err),
			 vmmx_last_error());
		fprintf(stderr, PROG ": vmmx_hmm_probe: %s\n", f->hmm_errmsg);
		rc = f->hmm_err;
	}
	err = vmmx_policy_list(ctx, NULL, 0, &n);
	if (!err && n) {
		f->pol = calloc(n, sizeof(*f->pol));
		if (!f->pol)
			err = -VMMX_ENOMEM;
		else
			err = vmmx_policy_list(ctx, f->pol, n, &f->npol);
		if (f->npol > n) /* a file appeared in between */
			f->npol = n;
	}
	if (err) {
		fprintf(stderr, PROG ": vmmx_policy_list: %s: %s\n", vmmx_strerror(err),
			vmmx_last_error());
		rc = err;
	}
	if (!f->sim)
		module_version(f->module_version, sizeof(f->module_version));
	return rc;
}

static const char *hmm_state_name(enum vmmx_hmm_state s)
{
	return s == VMMX_HMM_HMM ? "hmm" : s == VMMX_HMM_ATS ? "ats" : "absent";
}

/* The path vmmx_host_register takes, from the HMM state. */
static const char *host_path(const struct facts *f, const char **detail)
{
	if (!f->hmm_err && f->hmm.state != VMMX_HMM_ABSENT) {
		*detail = "malloc'd pointers used as is";
		return f->hmm.state == VMMX_HMM_ATS ? "ats" : "hmm";
	}
	*detail = "cuMemHostRegister";
	return "registration";
}

static const char *module_flavour(const struct facts *f)
{
	if (f->sim)
		return "none";
	return f->hmm.open_module == 1 ? "open" : f->hmm.open_module == 0 ? "proprietary" : "unknown";
}

static void policy_abi(unsigned abi, char *buf, size_t len)
{
	if (abi)
		snprintf(buf, len, "%u.%u", abi >> 16, abi & 0xffff);
	else
		snprintf(buf, len, "-");
}

static const char *policy_status(const struct vmmx_policy_info *p)
{
	return !p->usable ? "refused" : p->why[0] ? "hidden" : "usable";
}

/* ---- the table ---- */

static void print_table(const struct facts *f)
{
	const struct vmmx_ctx_info *ci = &f->ci;
	unsigned v = vmmx_version();
	const char *detail, *path;
	char a[32], b[32], c[64];
	int namew = 4;

	printf("libvmmx %u.%u.%u\n\n", v >> 16, (v >> 8) & 0xff, v & 0xff);
	if (f->cuda_unavailable[0]) {
		char why[600];

		snprintf(why, sizeof(why), "unavailable: %s", f->cuda_unavailable);
		row_wrapped("", "cuda backend", why);
	}
	row("", "backend", "%s%s", ci->backend,
	    f->sim ? " (emulated device in host memory)" : "");
	if (f->sim) {
		row("", "driver", "none");
		row("", "kernel module", "none");
	} else {
		row("", "driver", "CUDA %d.%d (%d)", ci->driver_version / 1000,
		    ci->driver_version % 1000 / 10, ci->driver_version);
		row("", "kernel module", "%s%s%s", module_flavour(f), f->module_version[0] ? " " : "",
		    f->module_version);
	}
	row("", "devices", "%d (the context uses device %d)", ci->device_count, ci->device);

	for (int d = 0; d < f->ndev; d++) {
		const struct vmmx_device_info *di = &f->dev[d];
		char peers[128] = "none";
		size_t pl = 0;

		printf("\n");
		snprintf(c, sizeof(c), "device %d", d);
		if (f->dev_err[d][0]) {
			row("", c, "error: %s", f->dev_err[d]);
			continue;
		}
		row("", c, "%s", di->name[0] ? di->name : "(name not known to this context)");
		row("  ", "memory", "%s total, %s free", fmt_size(di->total, a, sizeof(a)),
		    fmt_size(di->free, b, sizeof(b)));
		if (di->compute_major >= 0)
			row("  ", "compute capability", "%d.%d, %d SMs", di->compute_major,
			    di->compute_minor, di->sm_count);
		else
			row("  ", "compute capability", "unknown");
		row("  ", "VMM", "%s", yes_no(di->vmm));
		row("  ", "HOST VMM", "%s", yes_no(di->host_vmm));
		if (di->host_numa_id >= 0)
			row("  ", "HOST_NUMA VMM", "%s (nearest node %d)", yes_no(di->host_numa_vmm),
			    di->host_numa_id);
		else
			row("  ", "HOST_NUMA VMM", "%s", yes_no(di->host_numa_vmm));
		row("  ", "host register", "%s (same pointer on the device: %s)",
		    yes_no(di->host_register), yes_no(di->host_pointer_for_registered));
		row("  ", "pageable memory access", "%s", yes_no(di->pageable_access));
		row("  ", "uses host page tables", "%s", yes_no(di->pageable_host_page_tables));
		row("  ", "POSIX-fd handles", "%s", yes_no(di->posix_fd));
		row("  ", "concurrent managed", "%s", yes_no(di->concurrent_managed));
		row("  ", "unified addressing", "%s", yes_no(di->unified_addressing));
		row("  ", "GPUDirect RDMA on VMM", "%s", yes_no(di->gpu_direct_rdma_vmm));
		for (int p = 0; p < di->peer_count && pl < sizeof(peers); p++)
			pl += (size_t)snprintf(peers + pl, sizeof(peers) - pl, "%s%d",
					       p ? ", " : "device ", di->peers[p]);
		row("  ", "peer access", "%s", peers);
		row("  ", "granularity", "device %s, host %s",
		    di->granularity_device ? fmt_size(di->granularity_device, a, sizeof(a)) : "unknown",
		    di->granularity_host ? fmt_size(di->granularity_host, b, sizeof(b)) : "unknown");
	}

	printf("\nHMM (device %d)\n", ci->device);
	if (f->hmm_err) {
		row("  ", "error", "%s", f->hmm_errmsg);
	} else {
		row("  ", "state", "%s", hmm_state_name(f->hmm.state));
		row_wrapped("  ", "why", f->hmm.why);
		row("  ", "kernel", "%s", f->hmm.kernel[0] ? f->hmm.kernel : "unknown");
		row("  ", "open kernel module", "%s", yes_no(f->hmm.open_module));
		row("  ", "uvm_disable_hmm", "%s", yes_no(f->hmm.uvm_disable_hmm));
		row("  ", "CONFIG_DEVICE_PRIVATE", "%s", yes_no(f->hmm.config_device_private));
		row("  ", "CONFIG_HMM_MIRROR", "%s", yes_no(f->hmm.config_hmm_mirror));
	}
	path = host_path(f, &detail);
	row("", "host access", "%s: %s", path, detail);

	printf("\npolicies (%zu found; a spec loads the first usable one of its name)\n", f->npol);
	for (size_t i = 0; i < f->npol; i++)
		if ((int)strlen(f->pol[i].name) > namew)
			namew = (int)strlen(f->pol[i].name);
	printf("  %-*s  %-5s  %-7s  %s\n", namew, "NAME", "ABI", "STATUS", "FILE");
	for (size_t i = 0; i < f->npol; i++) {
		const struct vmmx_policy_info *p = &f->pol[i];
		int ind = 2 + namew + 2 + 5 + 2 + 7 + 2;

		policy_abi(p->abi, a, sizeof(a));
		printf("  %-*s  %-5s  %-7s  %s\n", namew, p->name, a, policy_status(p), p->file);
		if (p->description[0])
			printf("%*s%s\n", ind, "", p->description);
		if (p->why[0])
			printf("%*s%s%s\n", ind, "", p->usable ? "" : "why: ", p->why);
	}

	printf("\nconfiguration\n");
	row("  ", "backend", "%s", ci->backend);
	row("  ", "device", "%d of %d: %s", ci->device, ci->device_count, ci->device_name);
	row("  ", "policy", "%s (%s)", ci->policy, ci->policy_source);
	row("  ", "chunk size", "%s to %s (granularity %s)", fmt_size(ci->chunk_min, a, sizeof(a)),
	    fmt_size(ci->chunk_max, b, sizeof(b)), fmt_size(ci->granularity, c, sizeof(c)));
	row("  ", "device memory", "%s total, %s free", fmt_size(ci->device_total, a, sizeof(a)),
	    fmt_size(ci->device_free, b, sizeof(b)));
	row("  ", "host memory", "%s", fmt_size(ci->host_total, a, sizeof(a)));
	row("  ", "device limit", "%s",
	    ci->device_limit == UINT64_MAX ? "none" : fmt_size(ci->device_limit, a, sizeof(a)));
	row("  ", "host limit", "%s",
	    ci->host_limit == UINT64_MAX ? "none" : fmt_size(ci->host_limit, a, sizeof(a)));
	row("  ", "device headroom", "%s", fmt_size(ci->device_headroom, a, sizeof(a)));
	row("  ", "cache limit", "%s", fmt_size(ci->cache_limit, a, sizeof(a)));
}

/* ---- JSON ---- */

static void print_json(const struct facts *f)
{
	const struct vmmx_ctx_info *ci = &f->ci;
	struct json j = { 0 };
	unsigned v = vmmx_version();
	const char *detail, *path;
	char buf[64];

	j_open(&j, NULL, '{');
	snprintf(buf, sizeof(buf), "%u.%u.%u", v >> 16, (v >> 8) & 0xff, v & 0xff);
	j_str(&j, "version", buf);
	j_str(&j, "backend", ci->backend);
	j_str(&j, "cuda_unavailable", f->cuda_unavailable[0] ? f->cuda_unavailable : NULL);

	j_open(&j, "driver", '{');
	if (f->sim) {
		j_str(&j, "cuda_version", NULL);
		j_int(&j, "cuda_driver_version", 0);
	} else {
		snprintf(buf, sizeof(buf), "%d.%d", ci->driver_version / 1000,
			 ci->driver_version % 1000 / 10);
		j_str(&j, "cuda_version", buf);
		j_int(&j, "cuda_driver_version", ci->driver_version);
	}
	j_str(&j, "kernel_module", module_flavour(f));
	j_str(&j, "kernel_module_version", f->module_version[0] ? f->module_version : NULL);
	j_close(&j, '}');

	j_int(&j, "device_count", ci->device_count);
	j_open(&j, "devices", '[');
	for (int d = 0; d < f->ndev; d++) {
		const struct vmmx_device_info *di = &f->dev[d];

		j_open(&j, NULL, '{');
		j_int(&j, "ordinal", d);
		if (f->dev_err[d][0]) {
			j_str(&j, "error", f->dev_err[d]);
			j_close(&j, '}');
			continue;
		}
		j_str(&j, "name", di->name[0] ? di->name : NULL);
		j_open(&j, "memory", '{');
		j_bytes(&j, "total", di->total);
		j_bytes(&j, "free", di->free);
		j_close(&j, '}');
		if (di->compute_major >= 0) {
			snprintf(buf, sizeof(buf), "%d.%d", di->compute_major, di->compute_minor);
			j_str(&j, "compute_capability", buf);
		} else {
			j_str(&j, "compute_capability", NULL);
		}
		j_int(&j, "sm_count", di->sm_count);
		j_open(&j, "attributes", '{');
		j_flag(&j, "vmm", di->vmm);
		j_flag(&j, "host_vmm", di->host_vmm);
		j_flag(&j, "host_numa_vmm", di->host_numa_vmm);
		j_int(&j, "host_numa_id", di->host_numa_id);
		j_flag(&j, "host_register", di->host_register);
		j_flag(&j, "host_pointer_for_registered", di->host_pointer_for_registered);
		j_flag(&j, "pageable_access", di->pageable_access);
		j_flag(&j, "pageable_host_page_tables", di->pageable_host_page_tables);
		j_flag(&j, "posix_fd", di->posix_fd);
		j_flag(&j, "concurrent_managed", di->concurrent_managed);
		j_flag(&j, "unified_addressing", di->unified_addressing);
		j_flag(&j, "gpu_direct_rdma_vmm", di->gpu_direct_rdma_vmm);
		j_close(&j, '}');
		j_open(&j, "granularity", '{');
		j_int(&j, "device", (long long)di->granularity_device);
		j_int(&j, "host", (long long)di->granularity_host);
		j_close(&j, '}');
		j_open(&j, "peers", '[');
		for (int p = 0; p < di->peer_count; p++)
			j_int(&j, NULL, di->peers[p]);
		j_close(&j, ']');
		j_close(&j, '}');
	}
	j_close(&j, ']');

	j_open(&j, "hmm", '{');
	j_int(&j, "device", ci->device);
	if (f->hmm_err) {
		j_str(&j, "error", f->hmm_errmsg);
	} else {
		j_str(&j, "state", hmm_state_name(f->hmm.state));
		j_flag(&j, "works", f->hmm.state != VMMX_HMM_ABSENT);
		j_str(&j, "why", f->hmm.why);
		j_str(&j, "kernel", f->hmm.kernel[0] ? f->hmm.kernel : NULL);
		j_flag(&j, "device_pageable_access", f->hmm.device_pageable_access);
		j_flag(&j, "open_module", f->hmm.open_module);
		j_flag(&j, "uvm_disable_hmm", f->hmm.uvm_disable_hmm);
		j_flag(&j, "config_device_private", f->hmm.config_device_private);
		j_flag(&j, "config_hmm_mirror", f->hmm.config_hmm_mirror);
	}
	j_close(&j, '}');

	path = host_path(f, &detail);
	j_open(&j, "host_access", '{');
	j_str(&j, "path", path);
	j_str(&j, "detail", detail);
	j_close(&j, '}');

	j_open(&j, "policies", '[');
	for (size_t i = 0; i < f->npol; i++) {
		const struct vmmx_policy_info *p = &f->pol[i];

		j_open(&j, NULL, '{');
		j_str(&j, "name", p->name);
		j_str(&j, "file", p->file);
		policy_abi(p->abi, buf, sizeof(buf));
		j_str(&j, "abi", p->abi ? buf : NULL);
		j_str(&j, "description", p->description[0] ? p->description : NULL);
		j_flag(&j, "usable", p->usable);
		j_str(&j, "status", policy_status(p));
		j_str(&j, "why", p->why[0] ? p->why : NULL);
		j_close(&j, '}');
	}
	j_close(&j, ']');

	j_open(&j, "config", '{');
	j_str(&j, "backend", ci->backend);
	j_int(&j, "device", ci->device);
	j_str(&j, "device_name", ci->device_name);
	j_str(&j, "policy", ci->policy);
	j_str(&j, "policy_source", ci->policy_source);
	j_bytes(&j, "granularity", ci->granularity);
	j_bytes(&j, "chunk_size", ci->chunk_min);
	j_bytes(&j, "chunk_max", ci->chunk_max);
	j_bytes(&j, "device_total", ci->device_total);
	j_bytes(&j, "device_free", ci->device_free);
	j_bytes(&j, "host_total", ci->host_total);
	j_bytes(&j, "device_limit", ci->device_limit);
	j_bytes(&j, "host_limit", ci->host_limit);
	j_bytes(&j, "device_headroom", ci->device_headroom);
	j_bytes(&j, "cache_limit", ci->cache_limit);
	j_close(&j, '}');
	j_close(&j, '}');
}

int main(int argc, char **argv)
{
	struct vmmx_ctx *ctx;
	struct facts *f;
	bool json = false;
	int device = -1, rc;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
			usage(stdout);
			return 0;
		} else if (!strcmp(argv[i], "--json")) {
			json = true;
		} else if (!strcmp(argv[i], "--device") && i + 1 < argc) {
			const char *s = argv[++i];
			char *end;
			long n;

			errno = 0;
			n = strtol(s, &end, 10);
			if (*s < '0' || *s > '9' || *end || errno || n > 1023) {
				fprintf(stderr, PROG ": --device %s: expected a device ordinal (0, 1, ...)\n", s);
				return 2;
			}
			device = (int)n;
		} else {
			if (!strcmp(argv[i], "--device"))
				fprintf(stderr, PROG ": --device needs a device ordinal\n");
			else
				fprintf(stderr, PROG ": %s: unknown option\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		fprintf(stderr, PROG ": out of memory\n");
		return 1;
	}
	if (open_ctx(device, &ctx, f->cuda_unavailable, sizeof(f->cuda_unavailable))) {
		free(f);
		return 1;
	}
	rc = gather(ctx, f);
	if (!f->ci.backend) { /* vmmx_ctx_query failed: nothing to show */
		vmmx_ctx_destroy(ctx);
		free(f);
		return 1;
	}
	if (json)
		print_json(f);
	else
		print_table(f);
	free(f->pol);
	free(f);
	vmmx_ctx_destroy(ctx);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, PROG ": writing the output: %s\n", strerror(errno));
		return 1;
	}
	return rc ? 1 : 0;
}
