// SPDX-License-Identifier: MIT
/*
 * log.c - the log: one line per message, to the configured sink or to
 * standard error, filtered by level.  Default level: warn (configuration
 * mistakes are shown; errors are returned as codes and logged at debug level
 * where first seen, so a library user's program stays quiet).
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "internal/base.h"

static const char *const level_names[] = {
	[VMMX_LOG_NONE] = "none", [VMMX_LOG_ERROR] = "error", [VMMX_LOG_WARN] = "warn",
	[VMMX_LOG_INFO] = "info", [VMMX_LOG_DEBUG] = "debug",
};

const char *vmmx__log_level_name(enum vmmx_log_level level)
{
	return (unsigned int)level <= VMMX_LOG_DEBUG ? level_names[level] : "?";
}

int vmmx__log_parse(const char *s, enum vmmx_log_level *level)
{
	for (int i = VMMX_LOG_NONE; i <= VMMX_LOG_DEBUG; i++) {
		if (!strcmp(s, level_names[i])) {
			*level = (enum vmmx_log_level)i;
			return 0;
		}
	}
	return -VMMX_EINVAL;
}

void vmmx__logf(const struct vmmx__log *log, enum vmmx_log_level level, const char *fmt, ...)
{
	enum vmmx_log_level max = log ? log->level : VMMX_LOG_WARN;
	char msg[1024];
	va_list ap;

	if (level > max || level == VMMX_LOG_NONE)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (log && log->fn) {
		log->fn(log->arg, level, msg);
		return;
	}
	/* One fprintf per line so lines from several threads do not interleave. */
	fprintf(stderr, "libvmmx: %s: %s\n", level_names[level], msg);
}

/* The JSON escaping of the log, the stats and the trace is lib/json.c's. */
