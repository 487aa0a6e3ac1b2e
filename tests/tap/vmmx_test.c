// SPDX-License-Identifier: MIT
/* vmmx_test.c - helpers shared by the libvmmx tests (see vmmx_test.h). */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

static char logbuf[16384];
static size_t loglen;

void test_log_sink(void *arg, enum vmmx_log_level level, const char *msg)
{
	int n = snprintf(logbuf + loglen, sizeof(logbuf) - loglen, "%s%s", loglen ? "\n" : "", msg);

	if (n > 0 && (size_t)n < sizeof(logbuf) - loglen)
		loglen += (size_t)n;
	if (getenv("TEST_VERBOSE"))
		diag("log: %s", msg);
}

const char *test_log(void)
{
	return logbuf;
}

void test_log_clear(void)
{
	loglen = 0;
	logbuf[0] = '\0';
}

const char *test_backend(void)
{
	const char *b = getenv("VMMX_BACKEND");

	return b && *b ? b : "sim";
}

bool test_on_sim(void)
{
	return !strcmp(test_backend(), "sim");
}

int test_ctx_try(const char *const *vars, struct vmmx_ctx **ctx_p)
{
	struct vmmx_config cfg;

	vmmx_config_init(&cfg);
	cfg.flags = VMMX_CONFIG_NO_ENV;
	cfg.backend = test_backend();
	cfg.log = getenv("TEST_VERBOSE") ? "debug" : "info";
	cfg.vars = vars;
	cfg.log_fn = test_log_sink;
	return vmmx_ctx_create(&cfg, ctx_p);
}

struct vmmx_ctx *test_ctx(const char *const *vars)
{
	struct vmmx_ctx *ctx;
	int err = test_ctx_try(vars, &ctx);

	if (err)
		bail("vmmx_ctx_create on %s failed: %s: %s", test_backend(), vmmx_strerror(err),
		     vmmx_last_error());
	return ctx;
}

void require_gpu(void)
{
	struct vmmx_ctx *ctx;
	int err;

	if (strcmp(test_backend(), "cuda"))
		skip_all("needs VMMX_BACKEND=cuda and a GPU (running on %s)", test_backend());
	err = test_ctx_try(NULL, &ctx);
	if (err)
		skip_all("no usable GPU: %s", vmmx_last_error());
	vmmx_ctx_destroy(ctx);
}

int test_fill(struct vmmx_ctx *ctx, void *dst, size_t off, size_t len, uint32_t seed)
{
	uint8_t *tmp = malloc(len ? len : 1);
	int err;

	if (!tmp)
		bail("out of memory");
	for (size_t i = 0; i < len; i++)
		tmp[i] = test_pattern_byte(off + i, seed);
	err = vmmx_memcpy(ctx, (uint8_t *)dst + off, tmp, len);
	free(tmp);
	return err;
}

size_t test_check(struct vmmx_ctx *ctx, const void *src, size_t off, size_t len, uint32_t seed)
{
	uint8_t *tmp = malloc(len ? len : 1);
	size_t bad = SIZE_MAX;

	if (!tmp)
		bail("out of memory");
	if (vmmx_memcpy(ctx, tmp, (const uint8_t *)src + off, len)) {
		free(tmp);
		return SIZE_MAX - 1;
	}
	for (size_t i = 0; i < len; i++) {
		if (tmp[i] != test_pattern_byte(off + i, seed)) {
			bad = off + i;
			break;
		}
	}
	free(tmp);
	return bad;
}
