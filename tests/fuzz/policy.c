// SPDX-License-Identifier: MIT
/*
 * policy.c - fuzz policy specs and each shipped policy's arguments.  The
 * first byte chooses: below 0x80 the rest of the input is a whole spec
 * ("name:key=value,..."); otherwise it picks a shipped policy and the rest
 * is its argument list, so that every plugin's parser is reached even when
 * the fuzzer has not found its name.  A buffer is created with the spec on
 * a sim context and grown past the device's limit (the policy places every
 * chunk), then shrunk and destroyed.  Refusals must be -VMMX_EINVAL,
 * -VMMX_ENOENT (no such policy) or -VMMX_EPOLICY, with a message.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/fuzz/fuzz.h"

static const char *const shipped[] = {
    "device-first", "device", "host", "interleave", "tiered", "lru",
};

static struct vmmx_ctx *ctx;

static void open_ctx(void)
{
	static const char *const vars[] = { "VMMX_DEVICE_LIMIT=8MiB", "VMMX_CHUNK_MAX=4MiB",
					   "VMMX_SIM_DEVICES=2", NULL };
	struct vmmx_config cfg;

	fuzz_pin_plugins();
	vmmx_config_init(&cfg);
	cfg.flags = VMMX_CONFIG_NO_ENV;
	cfg.backend = "sim";
	cfg.vars = vars;
	cfg.log_fn = fuzz_log_sink;
	if (vmmx_ctx_create(&cfg, &ctx))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct vmmx_buf *buf;
	char *spec;
	int err;

	if (!ctx)
		open_ctx(); /* one context for the run: the loader caches nothing across buffers */
	if (!size)
		return 0;
	if (data[0] < 0x80) {
		spec = fuzz_string(data + 1, size - 1);
	} else {
		const char *name = shipped[data[0] % (sizeof(shipped) / sizeof(shipped[0]))];

		spec = malloc(strlen(name) + size + 1);
		if (!spec)
			abort();
		sprintf(spec, "%s:", name);
		memcpy(spec + strlen(name) + 1, data + 1, size - 1);
		spec[strlen(name) + size] = '\0';
	}
	err = vmmx_buf_create(ctx, 32ull << 20, spec, &buf);
	if (err) {
		if ((err != -VMMX_EINVAL && err != -VMMX_EPOLICY && err != -VMMX_ENOMEM &&
		     err != -VMMX_ENOENT) ||
		    !vmmx_last_error()[0])
			abort();
	} else {
		vmmx_buf_resize(buf, 24ull << 20);
		vmmx_buf_resize(buf, 2ull << 20);
		vmmx_buf_destroy(buf);
	}
	free(spec);
	return 0;
}
