// SPDX-License-Identifier: MIT
/*
 * ctx.c - the tools' context opening and log sink (see ctx.h): library
 * messages shown as the library shows them, and a failed
 * vmmx_ctx_create()'s message shown once, by the tool.  State: the messages
 * held back while one tool_ctx_create() runs (one thread opens contexts).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tools/ctx.h"

/* More than vmmx_ctx_create() logs at warn level (one per unknown variable, then the error). */
#define HELD_MAX 16

static struct {
	int holding;
	int n;
	enum vmmx_log_level level[HELD_MAX];
	char msg[HELD_MAX][1024];
} held;

static void put(enum vmmx_log_level level, const char *msg)
{
	static const char *const names[] = {"none", "error", "warn", "info", "debug"};

	/* The default sink's line (lib/log.c), one fprintf so that threads do not interleave. */
	fprintf(stderr, "libvmmx: %s: %s\n", (unsigned int)level <= 4 ? names[level] : "?", msg);
}

void tool_log(void *arg, enum vmmx_log_level level, const char *msg)
{
	(void)arg;
	if (held.holding && held.n < HELD_MAX) {
		held.level[held.n] = level;
		snprintf(held.msg[held.n], sizeof(held.msg[0]), "%s", msg);
		held.n++;
		return;
	}
	put(level, msg);
}

int tool_ctx_create(struct vmmx_config *cfg, struct vmmx_ctx **ctx_p)
{
	struct vmmx_config dflt;
	int err;

	if (!cfg) {
		vmmx_config_init(&dflt);
		cfg = &dflt;
	}
	if (!cfg->log_fn)
		cfg->log_fn = tool_log;
	held.holding = 1;
	held.n = 0;
	err = vmmx_ctx_create(cfg, ctx_p);
	held.holding = 0;
	for (int i = 0; i < held.n; i++)
		if (!err || strcmp(held.msg[i], vmmx_last_error()))
			put(held.level[i], held.msg[i]);
	return err;
}

void tool_ctx_error(const char *prog, int err)
{
	const char *b = getenv("VMMX_BACKEND");

	fprintf(stderr, "%s: cannot open a libvmmx context: %s: %s\n", prog, vmmx_strerror(err),
		vmmx_last_error());
	if (!b || strcmp(b, "sim"))
		fprintf(stderr,
			"%s: with no usable GPU, VMMX_BACKEND=sim runs the same flow on the "
			"simulated backend (not GPU figures)\n",
			prog);
}
