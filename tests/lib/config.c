// SPDX-License-Identifier: MIT
/* config.c - configuration from the environment and struct vmmx_config. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

static char backend[16];

/* Create a context from the environment (plus the suite's backend); return the error. */
static int env_ctx(struct vmmx_ctx **ctx_p)
{
	struct vmmx_config cfg;

	vmmx_config_init(&cfg);
	cfg.log_fn = test_log_sink;
	return vmmx_ctx_create(&cfg, ctx_p);
}

/* One bad value: the error is ECONFIG and the message names variable, value and form. */
static void bad_env(const char *name, const char *value, const char *form)
{
	struct vmmx_ctx *ctx = NULL;
	char want[256];

	setenv(name, value, 1);
	is_err(-VMMX_ECONFIG, env_ctx(&ctx), "vmmx_ctx_create refuses %s=%s", name, value);
	snprintf(want, sizeof(want), "%s=\"%s\" (environment)", name, value);
	like(vmmx_last_error(), want, "vmmx_last_error names %s and its value", name);
	like(vmmx_last_error(), form, "vmmx_last_error gives the expected form for %s", name);
	if (!strcmp(name, "VMMX_BACKEND"))
		setenv(name, backend, 1);
	else
		unsetenv(name);
	if (ctx)
		vmmx_ctx_destroy(ctx);
}

static uint64_t query_limit(struct vmmx_ctx *ctx, int host)
{
	struct vmmx_ctx_info info = { .size = sizeof(info) };

	if (vmmx_ctx_query(ctx, &info))
		return 0;
	return host ? info.host_limit : info.device_limit;
}

int main(void)
{
	struct vmmx_ctx_info info = { .size = sizeof(info) };
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf;

	plan(106);
	/* Start clean whatever the caller's environment holds, but the backend. */
	snprintf(backend, sizeof(backend), "%s", test_backend());
	for (char **e = environ; *e;) {
		if (!strncmp(*e, "VMMX_", 5)) {
			char name[128];

			snprintf(name, sizeof(name), "%.*s", (int)(strchr(*e, '=') - *e), *e);
			unsetenv(name);
		} else {
			e++;
		}
	}
	setenv("VMMX_BACKEND", backend, 1);

	bad_env("VMMX_DEVICE_LIMIT", "4XB", "KiB/MiB/GiB/TiB");
	bad_env("VMMX_HOST_LIMIT", "lots", "N% of host memory");
	bad_env("VMMX_DEVICE_LIMIT", "101%", "N% of device memory");
	bad_env("VMMX_CHUNK_SIZE", "2 MiB", "a size");
	bad_env("VMMX_CHUNK_SIZE", "50%", "a size");
	bad_env("VMMX_SIM_DEVICE_MEM", "0", "a nonzero size");
	bad_env("VMMX_BACKEND", "opencl", "cuda or sim");
	bad_env("VMMX_LOG", "loud", "none, error, warn, info or debug");
	bad_env("VMMX_DEVICE", "-1", "a device ordinal");
	bad_env("VMMX_SIM_DEVICES", "17", "from 1 to 16");
	bad_env("VMMX_HOST_CPU_ACCESS", "yes", "placed, all or none");
	bad_env("VMMX_HOST_COPIES", "all", "none (only chunks advised read-mostly");
	bad_env("VMMX_FAULT", "checksum:1,checksum:2", "checksum is given twice");
	bad_env("VMMX_FAULT", "create:0", "op:N");
	bad_env("VMMX_FAULT", "explode:1", "op:N");
	/* One countdown per op: a second count silently replaced the first. */
	bad_env("VMMX_FAULT", "create:1,map:2,create:5", "create is given twice");
	/* strtoull saturated an overflowing count silently. */
	bad_env("VMMX_FAULT", "map:99999999999999999999", "is larger than 18446744073709551615");
	/* Every grow failed with a smallest chunk no location holds. */
	bad_env("VMMX_CHUNK_SIZE", "4TiB", "larger than 1 TiB");

	setenv("VMMX_POLICY", "nope", 1);
	is_err(-VMMX_ENOENT, env_ctx(&ctx), "vmmx_ctx_create: a VMMX_POLICY found nowhere");
	like(vmmx_last_error(), "built-in: device-first, device, host", "the message lists the built-in policies");
	setenv("VMMX_POLICY", "device:x=1", 1);
	is_err(-VMMX_EINVAL, env_ctx(&ctx), "vmmx_ctx_create: an argument the policy does not know");
	like(vmmx_last_error(), "unknown argument \"x\" (known: id)", "the message comes from the policy");
	setenv("VMMX_POLICY", "Device First", 1);
	is_err(-VMMX_ECONFIG, env_ctx(&ctx), "vmmx_ctx_create: a malformed VMMX_POLICY");
	like(vmmx_last_error(), "name[:key=value,...]", "the message gives the form");
	unsetenv("VMMX_POLICY");

	/* Values checked against the device: granularity multiples. */
	setenv("VMMX_CHUNK_SIZE", "3MiB", 1);
	is_err(-VMMX_ECONFIG, env_ctx(&ctx), "VMMX_CHUNK_SIZE=3MiB is not a multiple of the granularity");
	like(vmmx_last_error(), "multiple of the allocation granularity", "the message says why");
	setenv("VMMX_CHUNK_SIZE", "4MiB", 1);
	setenv("VMMX_CHUNK_MAX", "6MiB", 1);
	is_err(-VMMX_ECONFIG, env_ctx(&ctx), "VMMX_CHUNK_MAX must be a multiple of VMMX_CHUNK_SIZE");
	like(vmmx_last_error(), "VMMX_CHUNK_MAX", "the message names VMMX_CHUNK_MAX");
	setenv("VMMX_CHUNK_MAX", "8MiB", 1);
	is_err(0, env_ctx(&ctx), "VMMX_CHUNK_SIZE=4MiB VMMX_CHUNK_MAX=8MiB accepted");
	if (!vmmx_ctx_query(ctx, &info)) {
		is_uint(4 * MiB, info.chunk_min, "vmmx_ctx_query: chunk_min from VMMX_CHUNK_SIZE");
		is_uint(8 * MiB, info.chunk_max, "vmmx_ctx_query: chunk_max from VMMX_CHUNK_MAX");
	} else {
		ok(0, "vmmx_ctx_query");
		ok(0, "vmmx_ctx_query");
	}
	vmmx_ctx_destroy(ctx);
	unsetenv("VMMX_CHUNK_SIZE");
	unsetenv("VMMX_CHUNK_MAX");

	/* Percentages resolve against the location's total. */
	setenv("VMMX_DEVICE_LIMIT", "25%", 1);
	is_err(0, env_ctx(&ctx), "VMMX_DEVICE_LIMIT=25%% accepted");
	vmmx_ctx_query(ctx, &info);
	is_uint(info.device_total / 100 * 25 + info.device_total % 100 * 25 / 100, info.device_limit,
		"VMMX_DEVICE_LIMIT=25%% is a quarter of device memory");
	ok(info.device_total > 0, "vmmx_ctx_query reports device memory");
	vmmx_ctx_destroy(ctx);

	/* Precedence: config field > config vars > environment. */
	setenv("VMMX_DEVICE_LIMIT", "this is not parsed", 1);
	vmmx_config_init(&cfg);
	cfg.backend = test_backend();
	cfg.device_limit = "8MiB";
	is_err(0, vmmx_ctx_create(&cfg, &ctx), "a config field overrides the environment (which is bad)");
	is_uint(8 * MiB, query_limit(ctx, 0), "device limit from the config field");
	vmmx_ctx_destroy(ctx);
	{
		static const char *const vars[] = { "VMMX_DEVICE_LIMIT=6MiB", "VMMX_HOST_LIMIT=10MiB",
						    NULL };

		cfg.device_limit = NULL;
		cfg.vars = vars;
		is_err(0, vmmx_ctx_create(&cfg, &ctx), "config vars override the environment");
		is_uint(6 * MiB, query_limit(ctx, 0), "device limit from config vars");
		is_uint(10 * MiB, query_limit(ctx, 1), "host limit from config vars");
		vmmx_ctx_destroy(ctx);
		cfg.device_limit = "12MiB";
		is_err(0, vmmx_ctx_create(&cfg, &ctx), "config field and vars together");
		is_uint(12 * MiB, query_limit(ctx, 0), "the field wins over vars");
		vmmx_ctx_destroy(ctx);
	}
	cfg.vars = NULL;
	cfg.device_limit = NULL;
	cfg.flags = VMMX_CONFIG_NO_ENV;
	is_err(0, vmmx_ctx_create(&cfg, &ctx), "VMMX_CONFIG_NO_ENV ignores the bad environment value");
	is_uint(UINT64_MAX, query_limit(ctx, 0), "no device limit without the environment");
	vmmx_ctx_destroy(ctx);
	unsetenv("VMMX_DEVICE_LIMIT");
	{
		static const char *const bad1[] = { "VMMX_NOPE=1", NULL };
		static const char *const bad2[] = { "VMMX_DEVICE_LIMIT", NULL };
		static const char *const bad3[] = { "VMMX_HOST_LIMIT=1.5GiB", NULL };

		cfg.vars = bad1;
		is_err(-VMMX_ECONFIG, vmmx_ctx_create(&cfg, &ctx), "unknown name in config vars refused");
		like(vmmx_last_error(), "unknown variable \"VMMX_NOPE\"", "the message names it");
		cfg.vars = bad2;
		is_err(-VMMX_ECONFIG, vmmx_ctx_create(&cfg, &ctx), "config vars entry without '='");
		like(vmmx_last_error(), "expected NAME=value", "the message gives the form");
		cfg.vars = bad3;
		is_err(-VMMX_ECONFIG, vmmx_ctx_create(&cfg, &ctx), "bad size in config vars");
		like(vmmx_last_error(), "VMMX_HOST_LIMIT=\"1.5GiB\" (struct vmmx_config vars)",
		     "the message names the variable, the value and where it came from");
		cfg.vars = NULL;
		cfg.host_limit = "1.5GiB";
		is_err(-VMMX_ECONFIG, vmmx_ctx_create(&cfg, &ctx), "bad size in a config field");
		like(vmmx_last_error(), "(struct vmmx_config field)", "the message says it came from a field");
		cfg.host_limit = NULL;
	}

	/* Unknown VMMX_* names in the environment are warned about, not fatal. */
	setenv("VMMX_DEVICE_LIMT", "1GiB", 1);
	test_log_clear();
	is_err(0, env_ctx(&ctx), "an unknown VMMX_ variable does not fail vmmx_ctx_create");
	like(test_log(), "VMMX_DEVICE_LIMT is not a libvmmx variable", "it is warned about by name");
	vmmx_ctx_destroy(ctx);
	unsetenv("VMMX_DEVICE_LIMT");
	/* VMMX_LIBRARY is the Python package's, not the library's: no warning. */
	setenv("VMMX_LIBRARY", "/nowhere/libvmmx.so", 1);
	test_log_clear();
	if (env_ctx(&ctx))
		bail("vmmx_ctx_create: %s", vmmx_last_error());
	ok(!strstr(test_log(), "VMMX_LIBRARY"), "VMMX_LIBRARY (the Python package's) is not warned about");
	vmmx_ctx_destroy(ctx);
	unsetenv("VMMX_LIBRARY");

	/* VMMX_LOG=none silences even warnings. */
	setenv("VMMX_LOG", "none", 1);
	setenv("VMMX_TYPO", "1", 1);
	test_log_clear();
	is_err(0, env_ctx(&ctx), "VMMX_LOG=none accepted");
	is_string("", test_log(), "VMMX_LOG=none prints nothing");
	vmmx_ctx_destroy(ctx);
	unsetenv("VMMX_LOG");
	unsetenv("VMMX_TYPO");

	/* VMMX_FAULT arms the fault layer. */
	setenv("VMMX_FAULT", "create:1", 1);
	is_err(0, env_ctx(&ctx), "VMMX_FAULT=create:1 accepted");
	is_err(0, vmmx_buf_create(ctx, 8 * MiB, NULL, &buf), "vmmx_buf_create (no create call)");
	is_err(-VMMX_EFAULTINJ, vmmx_buf_resize(buf, 2 * MiB), "the first create fails as VMMX_FAULT asked");
	is_err(0, vmmx_buf_resize(buf, 2 * MiB), "the next one succeeds");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	/* The driver layer's own ops too. */
	setenv("VMMX_FAULT", "checksum:1,event:3", 1);
	is_err(0, env_ctx(&ctx), "VMMX_FAULT=checksum:1,event:3 accepted");
	if (vmmx_buf_create(ctx, 8 * MiB, NULL, &buf) || vmmx_buf_resize(buf, 2 * MiB))
		bail("vmmx_buf: %s", vmmx_last_error());
	{
		uint64_t sum;

		is_err(-VMMX_EFAULTINJ, vmmx_checksum(ctx, vmmx_buf_ptr(buf), 64, &sum),
		       "the first checksum fails as VMMX_FAULT asked");
		is_err(0, vmmx_checksum(ctx, vmmx_buf_ptr(buf), 64, &sum), "the next one succeeds");
	}
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
		setenv("VMMX_FAULT", "create:1,map:18446744073709551615", 1);
	is_err(0, env_ctx(&ctx), "VMMX_FAULT: two ops, the largest count, accepted");
	vmmx_ctx_destroy(ctx);
	unsetenv("VMMX_FAULT");

	/* Devices and backends. */
	setenv("VMMX_DEVICE", "99", 1);
	is_err(-VMMX_ENODEV, env_ctx(&ctx), "VMMX_DEVICE=99: no such device");
	like(vmmx_last_error(), "99", "the message names the device");
	unsetenv("VMMX_DEVICE");

	/* API misuse. */
	is_err(-VMMX_EINVAL, vmmx_ctx_create(NULL, NULL), "vmmx_ctx_create(NULL, NULL)");
	memset(&cfg, 0, sizeof(cfg));
	is_err(-VMMX_EINVAL, vmmx_ctx_create(&cfg, &ctx), "vmmx_ctx_create with an uninitialised config");
	like(vmmx_last_error(), "vmmx_config_init", "the message says to use vmmx_config_init");
	vmmx_ctx_destroy(NULL);
	ok(1, "vmmx_ctx_destroy(NULL) is a no-op");
	return tap_done();
}
