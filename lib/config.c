// SPDX-License-Identifier: MIT
/*
 * config.c - the effective configuration of a context.
 *
 * Every setting is a VMMX_* variable with one parser.  A value comes from,
 * in order: the matching field of struct vmmx_config, an entry of its vars
 * list, the environment (read with secure_getenv, skipped with
 * VMMX_CONFIG_NO_ENV), the default.  A bad value is an error that names the
 * variable, where the value came from, the value and the expected form.  An
 * unknown VMMX_* name in the environment is warned about; in the config's
 * vars list it is an error (the program can be fixed).
 *
 * No locks: runs once per vmmx_ctx_create on the caller's thread.
 */
#include "config.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/base.h"

extern char **environ;

#define SIZE_FORM                                                                         \
	"bytes (4096), K/M/G/T or KiB/MiB/GiB/TiB (powers of 1024), KB/MB/GB/TB (powers " \
	"of 1000)"

struct var;
typedef int parse_fn(const struct var *v, const char *val, struct vmmx__conf *conf);

struct var {
	const char *name;
	ptrdiff_t field;        /* offset of a const char * in struct vmmx_config, -1: none */
	parse_fn *parse;
	const char *form;       /* the expected form, for error messages */
	ptrdiff_t dest;         /* offset in struct vmmx__conf, for the generic parsers */
};

static int bad(const struct var *v, const char *src, const char *val)
{
	return vmmx__fail(NULL, -VMMX_ECONFIG, "%s=\"%s\" (%s): expected %s", v->name, val, src,
			  v->form);
}

/* The source being parsed, for messages; set by vmmx__conf_load around each parse. */
static __thread const char *cur_src;

static int parse_backend(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	if (strcmp(val, "cuda") && strcmp(val, "sim"))
		return bad(v, cur_src, val);
	snprintf(conf->backend, sizeof(conf->backend), "%s", val);
	return 0;
}

static int parse_int_range(const struct var *v, const char *val, int lo, int hi, int *out)
{
	char *end;
	long n;

	if (*val < '0' || *val > '9')
		return bad(v, cur_src, val);
	n = strtol(val, &end, 10);
	if (*end || n < lo || n > hi)
		return bad(v, cur_src, val);
	*out = (int)n;
	return 0;
}

static int parse_device(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	return parse_int_range(v, val, 0, 1023, &conf->device);
}

static int parse_sim_devices(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	return parse_int_range(v, val, 1, VMMX__MAX_DEVICES, &conf->sim_devices);
}

/* Syntax only: whether the policy exists and likes its arguments is known when it loads. */
static int parse_bool(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	int *out = (void *)((char *)conf + v->dest);

	if (strcmp(val, "0") && strcmp(val, "1"))
		return bad(v, cur_src, val);
	*out = val[0] == '1';
	return 0;
}

static int parse_policy(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	size_t len;

	if (vmmx__policy_spec_check(val, &len))
		return bad(v, cur_src, val);
	snprintf(conf->policy, sizeof(conf->policy), "%s", val);
	return 0;
}

static int parse_string(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	char *dst = (char *)conf + v->dest;

	/* Every string setting is a 4096-byte field (PATH_MAX). */
	if (strlen(val) >= 4096)
		return bad(v, cur_src, val);
	snprintf(dst, 4096, "%s", val);
	return 0;
}

/* One size into @out: bytes, or a percentage (when @pct_ok) resolved later. */
static int size_item(const char *val, bool pct_ok, struct vmmx__size_setting *out)
{
	size_t len = strlen(val);
	uint64_t n;

	if (pct_ok && len > 1 && val[len - 1] == '%') {
		/* Percentages resolve once the backend says what 100% is. */
		if (vmmx_parse_size(val, 100, &n))
			return -1;
		*out = (struct vmmx__size_setting){ .set = true, .pct = true, .value = n };
		return 0;
	}
	if (vmmx_parse_size(val, 0, &n))
		return -1;
	*out = (struct vmmx__size_setting){ .set = true, .pct = false, .value = n };
	return 0;
}

static int parse_size_common(const struct var *v, const char *val, struct vmmx__conf *conf,
			     bool pct_ok)
{
	struct vmmx__size_setting *s = (void *)((char *)conf + v->dest);

	if (size_item(val, pct_ok, s))
		return bad(v, cur_src, val);
	return 0;
}

static int parse_size(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	return parse_size_common(v, val, conf, false);
}

static int parse_size_pct(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	return parse_size_common(v, val, conf, true);
}

/*
 * VMMX_CHUNK_SIZE: every chunk is at least this large, so a value no
 * location can hold makes every grow fail (4TiB was accepted, and then
 * every vmmx_buf_resize failed).  Refused above VMMX__CHUNK_SIZE_MAX,
 * beyond any GPU's memory and a large share of any host's.
 */
#define VMMX__CHUNK_SIZE_MAX ((uint64_t)1 << 40)

static int parse_chunk_size(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	struct vmmx__size_setting *s = (void *)((char *)conf + v->dest);
	char max[32];
	int err;

	err = parse_size(v, val, conf);
	if (err)
		return err;
	if (s->value > VMMX__CHUNK_SIZE_MAX)
		return vmmx__fail(NULL, -VMMX_ECONFIG,
				  "%s=\"%s\" (%s): larger than %s, the largest smallest chunk libvmmx takes (no location holds such a chunk: every grow would fail)",
				  v->name, val, cur_src,
				  vmmx__fmt_size(VMMX__CHUNK_SIZE_MAX, max, sizeof(max)));
	return 0;
}

/*
 * A per-device size: items separated by ',', each "SIZE" (every device not
 * named) or "N:SIZE" (device ordinal N), SIZE a size or N% of that device's
 * memory.  At most one plain item, each ordinal once, no empty item.  The
 * value replaces what an earlier source set: it is one setting.
 */
static int parse_dev_size(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	struct vmmx__dev_setting *ds = (void *)((char *)conf + v->dest), out;
	const char *p = val;

	memset(&out, 0, sizeof(out));
	for (;;) {
		size_t len = strcspn(p, ",");
		const char *colon = memchr(p, ':', len);
		struct vmmx__size_setting *slot = &out.all;
		char item[64];
		int d = -1;

		if (colon) {
			char *end = NULL;
			long n = -1;

			if (p[0] >= '0' && p[0] <= '9')
				n = strtol(p, &end, 10);
			if (n < 0 || end != colon || n >= VMMX__MAX_DEVICES)
				return vmmx__fail(NULL, -VMMX_ECONFIG,
						  "%s=\"%s\" (%s): \"%.*s\" is not a device ordinal from 0 to %d; expected %s",
						  v->name, val, cur_src, (int)(colon - p), p,
						  VMMX__MAX_DEVICES - 1, v->form);
			d = (int)n;
			slot = &out.dev[d];
			len -= (size_t)(colon + 1 - p);
			p = colon + 1;
		}
		if (slot->set)
			return d < 0 ? vmmx__fail(NULL, -VMMX_ECONFIG,
						  "%s=\"%s\" (%s): two sizes for the devices not named; expected %s",
						  v->name, val, cur_src, v->form)
				     : vmmx__fail(NULL, -VMMX_ECONFIG,
						  "%s=\"%s\" (%s): device %d is given twice; expected %s",
						  v->name, val, cur_src, d, v->form);
		if (!len || len >= sizeof(item))
			return bad(v, cur_src, val);
		snprintf(item, sizeof(item), "%.*s", (int)len, p);
		if (size_item(item, true, slot))
			return bad(v, cur_src, val);
		p += len;
		if (!*p)
			break;
		p++; /* the ',' */
		if (!*p)
			return bad(v, cur_src, val);
	}
	*ds = out;
	return 0;
}

static int parse_bytes(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	uint64_t *out = (void *)((char *)conf + v->dest);

	if (vmmx_parse_size(val, 0, out) || !*out)
		return bad(v, cur_src, val);
	return 0;
}

static int parse_log(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	if (vmmx__log_parse(val, &conf->log.level))
		return bad(v, cur_src, val);
	return 0;
}

static int parse_cpu_access(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	int *out = (void *)((char *)conf + v->dest);

	if (!strcmp(val, "placed"))
		*out = VMMX__CPU_PLACED;
	else if (!strcmp(val, "all") || !strcmp(val, "1"))
		*out = VMMX__CPU_ALL;
	else if (!strcmp(val, "none") || !strcmp(val, "0"))
		*out = VMMX__CPU_NONE;
	else
		return bad(v, cur_src, val);
	return 0;
}

static int parse_host_copies(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	int *out = (void *)((char *)conf + v->dest);

	if (!strcmp(val, "none"))
		*out = VMMX__HOST_COPIES_NONE;
	else if (!strcmp(val, "verified"))
		*out = VMMX__HOST_COPIES_VERIFIED;
	else
		return bad(v, cur_src, val);
	return 0;
}

/*
 * VMMX_FAULT=op:N[,op:N...]: fail the N-th call of op (tests and experiments).
 * The fault layer keeps one countdown per op, so an op given twice would
 * keep only its last count: refused, as is a count past 2^64 - 1 (strtoull
 * would saturate it silently).
 */
static int parse_fault(const struct var *v, const char *val, struct vmmx__conf *conf)
{
	const char *p = val;
	int n = 0;

	while (*p) {
		const char *colon = strchr(p, ':');
		char *end;
		int op;
		unsigned long long nth;

		if (!colon || n == VMM_OP_COUNT)
			return bad(v, cur_src, val);
		op = vmm_op_parse(p, (size_t)(colon - p));
		if (op < 0 || colon[1] < '1' || colon[1] > '9')
			return bad(v, cur_src, val);
		errno = 0;
		nth = strtoull(colon + 1, &end, 10);
		if (*end && *end != ',')
			return bad(v, cur_src, val);
		if (errno == ERANGE)
			return vmmx__fail(NULL, -VMMX_ECONFIG,
					  "%s=\"%s\" (%s): the count of %s, \"%.*s\", is larger than %llu",
					  v->name, val, cur_src, vmm_op_name((enum vmmx_op)op),
					  (int)(end - colon - 1), colon + 1,
					  (unsigned long long)UINT64_MAX);
		for (int i = 0; i < n; i++)
			if (conf->faults[i].op == op)
				return vmmx__fail(NULL, -VMMX_ECONFIG,
						  "%s=\"%s\" (%s): %s is given twice; the fault layer fails one call per op (give each op once)",
						  v->name, val, cur_src,
						  vmm_op_name((enum vmmx_op)op));
		conf->faults[n].op = op;
		conf->faults[n].nth = nth;
		n++;
		p = *end ? end + 1 : end;
		if (*end && !*p)
			return bad(v, cur_src, val);
	}
	return 0;
}

/* Per-device settings: one size for every device, and/or N:SIZE items. */
#define DEV_FORM                                                                     \
	"a size: " SIZE_FORM ", or N% of device memory, for every device; or per device " \
	"ordinal, N:SIZE items separated by ',' (0:8GiB,1:4GiB), with at most one plain " \
	"SIZE for the devices not named (8GiB,1:4GiB)"

#define CFG(f) offsetof(struct vmmx_config, f)
#define CONF(f) offsetof(struct vmmx__conf, f)

/* VMMX_LOG first: the other settings' warnings obey it. */
static const struct var vars[] = {
	{ "VMMX_LOG", CFG(log), parse_log, "none, error, warn, info or debug", 0 },
	{ "VMMX_BACKEND", CFG(backend), parse_backend, "cuda or sim", 0 },
	{ "VMMX_DEVICE", -1, parse_device, "a device ordinal (0, 1, ...)", 0 },
	{ "VMMX_POLICY", CFG(policy), parse_policy,
	  "name[:key=value,...] with a name of a-z, 0-9, '-' and '_' (up to 63)", 0 },
	{ "VMMX_POLICY_PATH", CFG(policy_path), parse_string, "a path shorter than 4096 bytes",
	  CONF(policy_path) },
	{ "VMMX_CHUNK_SIZE", CFG(chunk_size), parse_chunk_size, "a size up to 1TiB: " SIZE_FORM,
	  CONF(chunk_size) },
	{ "VMMX_CHUNK_MAX", CFG(chunk_max), parse_size, "a size: " SIZE_FORM, CONF(chunk_max) },
	{ "VMMX_DEVICE_LIMIT", CFG(device_limit), parse_dev_size, DEV_FORM, CONF(device_limit) },
	{ "VMMX_HOST_LIMIT", CFG(host_limit), parse_size_pct,
	  "a size: " SIZE_FORM ", or N% of host memory", CONF(host_limit) },
	/* The short name first, so that VMMX_DEVICE_HEADROOM wins when both are set. */
	{ "VMMX_HEADROOM", -1, parse_dev_size, DEV_FORM, CONF(device_headroom) },
	{ "VMMX_DEVICE_HEADROOM", CFG(device_headroom), parse_dev_size, DEV_FORM,
	  CONF(device_headroom) },
	{ "VMMX_CACHE_LIMIT", CFG(cache_limit), parse_size, "a size: " SIZE_FORM,
	  CONF(cache_limit) },
	{ "VMMX_DEVICE_PREALLOC", CFG(device_prealloc), parse_size_pct,
	  "a size: " SIZE_FORM ", or N% of device memory", CONF(device_prealloc) },
	{ "VMMX_SLEEP_PIECE", -1, parse_size, "a size: " SIZE_FORM, CONF(sleep_piece) },
	{ "VMMX_TRACE", CFG(trace), parse_string, "a path shorter than 4096 bytes", CONF(trace) },
	{ "VMMX_SIM_DEVICE_MEM", -1, parse_bytes, "a nonzero size: " SIZE_FORM,
	  CONF(sim_device_mem) },
	{ "VMMX_SIM_HOST_MEM", -1, parse_bytes, "a nonzero size: " SIZE_FORM, CONF(sim_host_mem) },
	{ "VMMX_SIM_DEVICES", -1, parse_sim_devices, "a number of devices from 1 to 16", 0 },
	{ "VMMX_SIM_PAGEABLE", -1, parse_bool, "0 or 1", CONF(sim_pageable) },
	{ "VMMX_HOST_CPU_ACCESS", -1, parse_cpu_access, "placed, all or none (1 = all, 0 = none)",
	  CONF(host_cpu_access) },
	{ "VMMX_FAULT", -1, parse_fault,
	  "op:N[,op:N...] with op one of reserve, unreserve, create, release, map, unmap, "
	  "set_access, copy, memset, sync, register, unregister, event, checksum, each op once, "
	  "and N from 1 to 2^64 - 1",
	  0 },
	{ "VMMX_HOST_COPIES", -1, parse_host_copies,
	  "none (only chunks advised read-mostly keep their host memory when promoted) or "
	  "verified (every chunk does, and moving back maps it again when a device checksum "
	  "shows the chunk unchanged)",
	  CONF(host_copies) },
};

#define NVARS (sizeof(vars) / sizeof(vars[0]))

static const struct var *var_find(const char *name, size_t len)
{
	for (size_t i = 0; i < NVARS; i++)
		if (strlen(vars[i].name) == len && !memcmp(vars[i].name, name, len))
			return &vars[i];
	return NULL;
}

static void defaults(struct vmmx__conf *conf)
{
	memset(conf, 0, sizeof(*conf));
	snprintf(conf->backend, sizeof(conf->backend), "cuda");
	snprintf(conf->policy, sizeof(conf->policy), "device-first");
	conf->device = 0;
	conf->sim_device_mem = 1ull << 30;
	conf->sim_host_mem = 4ull << 30;
	conf->sim_devices = 1;
	conf->host_cpu_access = VMMX__CPU_ALL;
	conf->log.level = VMMX_LOG_WARN;
	for (int i = 0; i < VMM_OP_COUNT; i++)
		conf->faults[i].op = -1;
}

/* Whether a caller's struct, compiled at cfg->size bytes, has a member. */
static bool has(const struct vmmx_config *cfg, size_t off, size_t len)
{
	return off + len <= cfg->size;
}

/* Check the vars list: each entry NAME=value with a known NAME. */
static int check_cfg_vars(const struct vmmx_config *cfg)
{
	if (!cfg || !has(cfg, offsetof(struct vmmx_config, vars), sizeof(void *)) || !cfg->vars)
		return 0;
	for (size_t i = 0; cfg->vars[i]; i++) {
		const char *eq = strchr(cfg->vars[i], '=');

		if (!eq)
			return vmmx__fail(NULL, -VMMX_ECONFIG,
					  "struct vmmx_config.vars[%zu]=\"%s\": expected NAME=value", i,
					  cfg->vars[i]);
		if (!var_find(cfg->vars[i], (size_t)(eq - cfg->vars[i])))
			return vmmx__fail(NULL, -VMMX_ECONFIG,
					  "struct vmmx_config.vars[%zu]: unknown variable \"%.*s\"", i,
					  (int)(eq - cfg->vars[i]), cfg->vars[i]);
	}
	return 0;
}

static const char *from_cfg_vars(const struct vmmx_config *cfg, const char *name)
{
	size_t len = strlen(name);
	const char *found = NULL;

	if (!cfg || !has(cfg, offsetof(struct vmmx_config, vars), sizeof(void *)) || !cfg->vars)
		return NULL;
	/* The last entry wins, as in an environment built by appending. */
	for (size_t i = 0; cfg->vars[i]; i++)
		if (!strncmp(cfg->vars[i], name, len) && cfg->vars[i][len] == '=')
			found = cfg->vars[i] + len + 1;
	return found;
}

static const char *getenv_secure(const char *name)
{
#ifdef HAVE_SECURE_GETENV
	return secure_getenv(name);
#else
	return getenv(name);
#endif
}

/* VMMX_* names the library does not read but other parts of the project do
 * (vmmx(7) lists every one). */
static bool var_foreign(const char *name, size_t len)
{
	static const char *const exact[] = {
		"VMMX_LIBRARY",         /* the Python package's path to libvmmx */
		"VMMX_BENCH_PROFILE",   /* the Python benchmark's decode profile */
		"VMMX_PLOT_REEXEC",     /* vmmx-plot's re-exec guard */
	};
	/* vmmx-run's and its interposer's own settings (preload/, tools/vmmx-run.c) */
	static const char run[] = "VMMX_RUN_";

	if (len > sizeof(run) - 1 && !memcmp(name, run, sizeof(run) - 1))
		return true;
	for (size_t i = 0; i < sizeof(exact) / sizeof(exact[0]); i++)
		if (strlen(exact[i]) == len && !memcmp(name, exact[i], len))
			return true;
	return false;
}

static void warn_unknown_env(const struct vmmx__log *log)
{
	for (char **e = environ; e && *e; e++) {
		const char *eq;

		if (strncmp(*e, "VMMX_", 5))
			continue;
		eq = strchr(*e, '=');
		if (eq && !var_find(*e, (size_t)(eq - *e)) && !var_foreign(*e, (size_t)(eq - *e)))
			vmmx__logf(log, VMMX_LOG_WARN,
				   "%.*s is not a libvmmx variable; ignored (vmmx(7) lists the variables)",
				   (int)(eq - *e), *e);
	}
}

int vmmx__conf_load(const struct vmmx_config *cfg, struct vmmx__conf *conf)
{
	bool use_env = !cfg || !(cfg->flags & VMMX_CONFIG_NO_ENV);
	int err;

	defaults(conf);
	if (cfg && cfg->size < offsetof(struct vmmx_config, vars))
		return vmmx__fail(NULL, -VMMX_EINVAL,
				  "struct vmmx_config.size is %zu: initialise it with vmmx_config_init()",
				  cfg->size);
	if (cfg && has(cfg, offsetof(struct vmmx_config, log_arg), sizeof(void *)) && cfg->log_fn) {
		conf->log.fn = cfg->log_fn;
		conf->log.arg = cfg->log_arg;
	}
	err = check_cfg_vars(cfg);
	if (err)
		return err;
	for (size_t i = 0; i < NVARS; i++) {
		const struct var *v = &vars[i];
		const char *val = NULL;
		char num[16];

		if (cfg && v->field >= 0 && has(cfg, (size_t)v->field, sizeof(char *))) {
			val = *(const char *const *)((const char *)cfg + v->field);
			cur_src = "struct vmmx_config field";
		}
		if (cfg && !val && !strcmp(v->name, "VMMX_DEVICE") && cfg->device >= 0) {
			snprintf(num, sizeof(num), "%d", cfg->device);
			val = num;
			cur_src = "struct vmmx_config field";
		}
		if (!val && (val = from_cfg_vars(cfg, v->name)))
			cur_src = "struct vmmx_config vars";
		if (!val && use_env && (val = getenv_secure(v->name)))
			cur_src = "environment";
		if (!val)
			continue;
		err = v->parse(v, val, conf);
		if (err) {
			vmmx__logf(&conf->log, VMMX_LOG_WARN, "%s", vmmx_last_error());
			return err;
		}
	}
	if (use_env)
		warn_unknown_env(&conf->log);
	return 0;
}

uint64_t vmmx__size_resolve(const struct vmmx__size_setting *s, uint64_t total, uint64_t dflt)
{
	if (!s->set)
		return dflt;
	if (s->pct)
		return total / 100 * s->value + total % 100 * s->value / 100;
	return s->value;
}

uint64_t vmmx__dev_resolve(const struct vmmx__dev_setting *s, int d, uint64_t total,
			   uint64_t dflt)
{
	if (d >= 0 && d < VMMX__MAX_DEVICES && s->dev[d].set)
		return vmmx__size_resolve(&s->dev[d], total, dflt);
	return vmmx__size_resolve(&s->all, total, dflt);
}

int vmmx__dev_setting_max(const struct vmmx__dev_setting *s)
{
	for (int d = VMMX__MAX_DEVICES - 1; d >= 0; d--)
		if (s->dev[d].set)
			return d;
	return -1;
}

VMMX_API void vmmx_config_init(struct vmmx_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->device = -1;
}

int vmmx__policy_spec_check(const char *spec, size_t *name_len)
{
	const char *colon = strchr(spec, ':');
	size_t len = colon ? (size_t)(colon - spec) : strlen(spec);

	if (!len || len > VMMX__POLICY_NAME_MAX || strlen(spec) >= VMMX__POLICY_SPEC_MAX)
		return -VMMX_EINVAL;
	for (size_t i = 0; i < len; i++) {
		char c = spec[i];

		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_'))
			return -VMMX_EINVAL;
	}
	*name_len = len;
	return 0;
}
