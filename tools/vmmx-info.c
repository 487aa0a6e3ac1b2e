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
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tools/opts.h"
#include "tools/report.h"
#include "tools/ctx.h"

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
		"  --help       this text\n"
		"  --version    the version\n");
}

static const char *yes_no(int v)
{
	return v == 1 ? "yes" : v == 0 ? "no" : "unknown";
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
	err = tool_ctx_create(&cfg, ctx_p);
	if (err && !(backend && *backend) && no_gpu(err)) {
		snprintf(cuda_why, len, "%s", *vmmx_last_error() ? vmmx_last_error() : vmmx_strerror(err));
		cfg.backend = "sim";
		err = tool_ctx_create(&cfg, ctx_p);
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

/* ---- the results: one tree, shown as JSON or as a labelled listing ---- */

/* A yes/no/unknown attribute: a flag in JSON, a word in the listing. */
static void flag(struct rep *o, const char *key, const char *label, int v)
{
	struct rep *r = rep_bool(o, key, v);

	if (label)
		rep_label(r, label, "%s", yes_no(v));
}

static void add_driver(struct rep *doc, const struct facts *f)
{
	const struct vmmx_ctx_info *ci = &f->ci;
	struct rep *d = rep_obj(doc, "driver");

	if (f->sim) {
		rep_label(d, "driver", "none (emulated device, no kernel module)");
		rep_null(d, "cuda_version");
		rep_int(d, "cuda_driver_version", 0);
	} else {
		rep_label(d, "driver", "CUDA %d.%d (%d), kernel module %s%s%s",
			  ci->driver_version / 1000, ci->driver_version % 1000 / 10,
			  ci->driver_version, module_flavour(f), f->module_version[0] ? " " : "",
			  f->module_version);
		rep_strf(d, "cuda_version", "%d.%d", ci->driver_version / 1000,
			 ci->driver_version % 1000 / 10);
		rep_int(d, "cuda_driver_version", ci->driver_version);
	}
	rep_str(d, "kernel_module", module_flavour(f));
	rep_str(d, "kernel_module_version", f->module_version[0] ? f->module_version : NULL);
}

static void add_attributes(struct rep *dev, const struct vmmx_device_info *di)
{
	struct rep *a = rep_obj(dev, "attributes");
	char peers[128] = "none";
	size_t pl = 0;

	flag(a, "vmm", "VMM", di->vmm);
	flag(a, "host_vmm", "HOST VMM", di->host_vmm);
	flag(a, "host_numa_vmm", NULL, di->host_numa_vmm);
	rep_label(rep_int(a, "host_numa_id", di->host_numa_id), "HOST_NUMA VMM",
		  di->host_numa_id >= 0 ? "%s (nearest node %d)" : "%s", yes_no(di->host_numa_vmm),
		  di->host_numa_id);
	rep_label(rep_bool(a, "host_register", di->host_register), "host register",
		  "%s (same pointer on the device: %s)", yes_no(di->host_register),
		  yes_no(di->host_pointer_for_registered));
	flag(a, "host_pointer_for_registered", NULL, di->host_pointer_for_registered);
	flag(a, "pageable_access", "pageable memory access", di->pageable_access);
	flag(a, "pageable_host_page_tables", "uses host page tables", di->pageable_host_page_tables);
	flag(a, "posix_fd", "POSIX-fd handles", di->posix_fd);
	flag(a, "concurrent_managed", "concurrent managed", di->concurrent_managed);
	flag(a, "unified_addressing", "unified addressing", di->unified_addressing);
	flag(a, "gpu_direct_rdma_vmm", "GPUDirect RDMA on VMM", di->gpu_direct_rdma_vmm);
	for (int p = 0; p < di->peer_count && pl < sizeof(peers); p++)
		pl += (size_t)snprintf(peers + pl, sizeof(peers) - pl, "%s%d", p ? ", " : "device ",
				       di->peers[p]);
	a = rep_label(rep_arr(dev, "peers"), "peer access", "%s", peers);
	for (int p = 0; p < di->peer_count; p++)
		rep_int(a, NULL, di->peers[p]);
}

static void add_device(struct rep *devs, const struct facts *f, int d)
{
	const struct vmmx_device_info *di = &f->dev[d];
	struct rep *o = rep_obj(devs, NULL), *x;
	char a[32], b[32];

	snprintf(a, sizeof(a), "device %d", d);
	rep_int(o, "ordinal", d);
	if (f->dev_err[d][0]) {
		rep_label(o, a, "error: %s", f->dev_err[d]);
		rep_str(o, "error", f->dev_err[d]);
		return;
	}
	rep_label(o, a, "%s", di->name[0] ? di->name : "(name not known to this context)");
	rep_str(o, "name", di->name[0] ? di->name : NULL);
	x = rep_label(rep_obj(o, "memory"), "memory", "%s total, %s free",
		      rep_fmt_size(di->total, a, sizeof(a)), rep_fmt_size(di->free, b, sizeof(b)));
	rep_bytes(x, "total", di->total);
	rep_bytes(x, "free", di->free);
	if (di->compute_major >= 0)
		rep_label(rep_strf(o, "compute_capability", "%d.%d", di->compute_major,
				   di->compute_minor),
			  "compute capability", "%d.%d, %d SMs", di->compute_major,
			  di->compute_minor, di->sm_count);
	else
		rep_label(rep_null(o, "compute_capability"), "compute capability", "unknown");
	rep_int(o, "sm_count", di->sm_count);
	add_attributes(o, di);
	x = rep_label(rep_obj(o, "granularity"), "granularity", "device %s, host %s",
		      di->granularity_device ? rep_fmt_size(di->granularity_device, a, sizeof(a))
					     : "unknown",
		      di->granularity_host ? rep_fmt_size(di->granularity_host, b, sizeof(b))
					   : "unknown");
	rep_int(x, "device", (long long)di->granularity_device);
	rep_int(x, "host", (long long)di->granularity_host);
}

static void add_hmm(struct rep *doc, const struct facts *f)
{
	const struct vmmx_hmm_info *h = &f->hmm;
	struct rep *o = rep_obj(doc, "hmm");
	const char *detail, *path;
	char label[32];

	snprintf(label, sizeof(label), "HMM (device %d)", f->ci.device);
	rep_label(o, label, NULL);
	rep_int(o, "device", f->ci.device);
	if (f->hmm_err) {
		rep_label(rep_str(o, "error", f->hmm_errmsg), "error", NULL);
	} else {
		rep_label(rep_str(o, "state", hmm_state_name(h->state)), "state", NULL);
		rep_bool(o, "works", h->state != VMMX_HMM_ABSENT);
		rep_label(rep_str(o, "why", h->why), "why", NULL);
		rep_label(rep_str(o, "kernel", h->kernel[0] ? h->kernel : NULL), "kernel", "%s",
			  h->kernel[0] ? h->kernel : "unknown");
		flag(o, "device_pageable_access", NULL, h->device_pageable_access);
		flag(o, "open_module", "open kernel module", h->open_module);
		flag(o, "uvm_disable_hmm", "uvm_disable_hmm", h->uvm_disable_hmm);
		flag(o, "config_device_private", "CONFIG_DEVICE_PRIVATE", h->config_device_private);
		flag(o, "config_hmm_mirror", "CONFIG_HMM_MIRROR", h->config_hmm_mirror);
	}
	path = host_path(f, &detail);
	o = rep_label(rep_obj(doc, "host_access"), "host access", "%s: %s", path, detail);
	rep_str(o, "path", path);
	rep_str(o, "detail", detail);
}

static void add_policies(struct rep *doc, const struct facts *f)
{
	struct rep *arr = rep_arr(doc, "policies");
	char buf[32];

	for (size_t i = 0; i < f->npol; i++) {
		const struct vmmx_policy_info *p = &f->pol[i];
		struct rep *o = rep_obj(arr, NULL);

		rep_str(o, "name", p->name);
		rep_str(o, "file", p->file);
		policy_abi(p->abi, buf, sizeof(buf));
		rep_str(o, "abi", p->abi ? buf : NULL);
		rep_str(o, "description", p->description[0] ? p->description : NULL);
		rep_bool(o, "usable", p->usable);
		rep_str(o, "status", policy_status(p));
		rep_str(o, "why", p->why[0] ? p->why : NULL);
	}
}

/* A limit: a byte count, null and "none" when there is none. */
static void limit(struct rep *o, const char *key, const char *label, uint64_t v)
{
	char a[32];

	rep_label(rep_bytes(o, key, v), label, "%s",
		  v == UINT64_MAX ? "none" : rep_fmt_size(v, a, sizeof(a)));
}

static void add_config(struct rep *doc, const struct facts *f)
{
	const struct vmmx_ctx_info *ci = &f->ci;
	struct rep *o = rep_label(rep_obj(doc, "config"), "configuration", NULL);
	char a[32], b[32], c[32];

	rep_label(rep_str(o, "backend", ci->backend), "backend", NULL);
	rep_label(rep_int(o, "device", ci->device), "device", "%d of %d: %s", ci->device,
		  ci->device_count, ci->device_name);
	rep_str(o, "device_name", ci->device_name);
	rep_label(rep_str(o, "policy", ci->policy), "policy", "%s (%s)", ci->policy,
		  ci->policy_source);
	rep_str(o, "policy_source", ci->policy_source);
	rep_bytes(o, "granularity", ci->granularity);
	rep_label(rep_bytes(o, "chunk_size", ci->chunk_min), "chunk size",
		  "%s to %s (granularity %s)", rep_fmt_size(ci->chunk_min, a, sizeof(a)),
		  rep_fmt_size(ci->chunk_max, b, sizeof(b)),
		  rep_fmt_size(ci->granularity, c, sizeof(c)));
	rep_bytes(o, "chunk_max", ci->chunk_max);
	rep_label(rep_bytes(o, "device_total", ci->device_total), "device memory",
		  "%s total, %s free", rep_fmt_size(ci->device_total, a, sizeof(a)),
		  rep_fmt_size(ci->device_free, b, sizeof(b)));
	rep_bytes(o, "device_free", ci->device_free);
	rep_label(rep_bytes(o, "host_total", ci->host_total), "host memory", NULL);
	limit(o, "device_limit", "device limit", ci->device_limit);
	limit(o, "host_limit", "host limit", ci->host_limit);
	rep_label(rep_bytes(o, "device_headroom", ci->device_headroom), "device headroom", NULL);
	rep_label(rep_bytes(o, "cache_limit", ci->cache_limit), "cache limit", NULL);
}

static struct rep *build(const struct facts *f)
{
	const struct vmmx_ctx_info *ci = &f->ci;
	struct rep *doc = rep_new(), *devs;
	unsigned v = vmmx_version();

	rep_strf(doc, "version", "%u.%u.%u", v >> 16, (v >> 8) & 0xff, v & 0xff);
	rep_label(rep_str(doc, "backend", ci->backend), "backend", "%s%s", ci->backend,
		  f->sim ? " (emulated device in host memory)" : "");
	rep_label(rep_str(doc, "cuda_unavailable",
			  f->cuda_unavailable[0] ? f->cuda_unavailable : NULL),
		  f->cuda_unavailable[0] ? "cuda backend" : NULL, "unavailable: %s",
		  f->cuda_unavailable);
	add_driver(doc, f);
	rep_label(rep_int(doc, "device_count", ci->device_count), "devices",
		  "%d (the context uses device %d)", ci->device_count, ci->device);
	devs = rep_arr(doc, "devices");
	for (int d = 0; d < f->ndev; d++)
		add_device(devs, f, d);
	add_hmm(doc, f);
	add_policies(doc, f);
	add_config(doc, f);
	return doc;
}

static const struct rep_col policy_cols[] = {
    {.key = "name", .head = "NAME"},
    {.key = "abi", .head = "ABI"},
    {.key = "status", .head = "STATUS"},
    {.key = "file", .head = "FILE"},
};

static void print_listing(const struct rep *doc)
{
	static const struct rep_view pv = {
	    .cols = policy_cols,
	    .ncols = sizeof(policy_cols) / sizeof(policy_cols[0]),
	    .below = {"description", "why"},
	    .indent = 2,
	};
	const struct rep *pol = rep_get(doc, "policies");

	printf("libvmmx %s\n\n", rep_get(doc, "version")->v.s);
	rep_text(stdout, doc, 0, LABEL);
	printf("\npolicies (%zu found; a spec loads the first usable one of its name)\n",
	       rep_count(pol));
	rep_table(stdout, pol, &pv);
}

/* --device: a device ordinal, 0 to 1023, as VMMX_DEVICE takes it. */
static int opt_device(void *dest, const char *s)
{
	char *end;
	long n;

	errno = 0;
	n = strtol(s, &end, 10);
	if (*s < '0' || *s > '9' || *end || errno || n > 1023) {
		fprintf(stderr, PROG ": --device %s: expected a device ordinal (0, 1, ...)\n", s);
		return 2;
	}
	*(int *)dest = (int)n;
	return 0;
}

int main(int argc, char **argv)
{
	struct vmmx_ctx *ctx;
	struct rep *doc;
	struct facts *f;
	int json = 0, device = -1, rc;
	const struct tool_opt tab[] = {
	    tool_opt_json(&json),
	    tool_opt_fn("device", 0, opt_device, &device, NULL),
	    {0},
	};

	rc = tool_opts_parse(PROG, usage, tab, argc, argv);
	if (rc)
		return rc < 0 ? 0 : rc;
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
	doc = build(f);
	if (json)
		rep_json(stdout, doc);
	else
		print_listing(doc);
	rep_free(doc);
	free(f->pol);
	free(f);
	vmmx_ctx_destroy(ctx);
	if (fflush(stdout) || ferror(stdout)) {
		fprintf(stderr, PROG ": writing the output: %s\n", strerror(errno));
		return 1;
	}
	return rc ? 1 : 0;
}
