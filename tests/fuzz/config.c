// SPDX-License-Identifier: MIT
/*
 * config.c - fuzz the whole VMMX_* configuration: the input is lines of
 * "VMMX_NAME=value" given as struct vmmx_config vars (the environment's
 * grammar, minus the environment itself), then vmmx_ctx_create on the sim
 * backend; a context that opens gets a buffer grown and shrunk through its
 * default policy.  Errors must be -VMMX_ECONFIG (or what the grammar says)
 * with a message; nothing may crash or leak.  VMMX_TRACE is dropped (it
 * would write files wherever the input says).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/fuzz/fuzz.h"

#define MAX_VARS 32

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_string(data, size), *save = NULL, *line;
	const char *vars[MAX_VARS + 1];
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf;
	int n = 0, err;

	for (line = strtok_r(s, "\n", &save); line && n < MAX_VARS;
	     line = strtok_r(NULL, "\n", &save))
		if (strncmp(line, "VMMX_TRACE=", 11))
			vars[n++] = line;
	vars[n] = NULL;
	fuzz_pin_plugins();
	vmmx_config_init(&cfg);
	cfg.flags = VMMX_CONFIG_NO_ENV;
	cfg.backend = "sim"; /* fields win over vars: never the cuda backend here */
	cfg.vars = vars;
	cfg.log_fn = fuzz_log_sink;
	err = vmmx_ctx_create(&cfg, &ctx);
	if (err) {
		if (!vmmx_last_error()[0])
			abort(); /* every refusal says why */
		free(s);
		return 0;
	}
	if (!vmmx_buf_create(ctx, 64ull << 20, NULL, &buf)) {
		vmmx_buf_resize(buf, 8ull << 20);
		vmmx_buf_resize(buf, 2ull << 20);
		vmmx_buf_destroy(buf);
	}
	vmmx_ctx_destroy(ctx);
	free(s);
	return 0;
}
