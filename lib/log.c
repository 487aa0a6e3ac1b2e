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

/*
 * Length of the well-formed UTF-8 sequence at @s (1 to 4 bytes), or 0 when
 * the bytes there are none: a stray continuation byte, an overlong form, a
 * surrogate, a code point past U+10FFFF, or a sequence cut short (by the
 * NUL: the checks stop at the first byte that fails, so nothing past the
 * string is read).
 */
static size_t utf8_len(const unsigned char *s)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		return (s[1] & 0xc0) == 0x80 ? 2 : 0;
	if (c >= 0xe0 && c <= 0xef) {
		if (c == 0xe0)
			lo = 0xa0;      /* overlong below */
		else if (c == 0xed)
			hi = 0x9f;      /* surrogates above */
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 ? 3 : 0;
	}
	if (c >= 0xf0 && c <= 0xf4) {
		if (c == 0xf0)
			lo = 0x90;      /* overlong below */
		else if (c == 0xf4)
			hi = 0x8f;      /* past U+10FFFF above */
		return s[1] >= lo && s[1] <= hi && (s[2] & 0xc0) == 0x80 &&
		       (s[3] & 0xc0) == 0x80 ? 4 : 0;
	}
	return 0;
}

/*
 * JSON text must be valid UTF-8, and policy arguments, plugin paths and
 * counter names are arbitrary bytes: well-formed UTF-8 passes through,
 * each byte of anything else becomes \u00XX (the byte read as Latin-1),
 * so that the output is always valid JSON and valid UTF-8.  Truncation
 * never cuts a sequence or an escape in two.
 */
void vmmx__json_escape(char *out, size_t len, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0;

	if (!len)
		return;
	while (*u) {
		unsigned char c = *u;
		size_t n = utf8_len(u);

		if (c == '"' || c == '\\') {
			if (o + 2 >= len)
				break;
			out[o++] = '\\';
			out[o++] = (char)c;
		} else if (c < 0x20 || c == 0x7f || !n) {
			/* Room for the escape (\u00XX) and the NUL, or stop. */
			if (o + 6 >= len)
				break;
			o += (size_t)snprintf(out + o, len - o, "\\u%04x", c);
		} else {
			if (o + n >= len)
				break;
			memcpy(out + o, u, n);
			o += n;
			u += n;
			continue;
		}
		u++;
	}
	out[o] = '\0';
}
