// SPDX-License-Identifier: MIT
/*
 * json.c - the one JSON writer (see json.h): the UTF-8 check, the escape
 * of one character, and the two ways out, into a bounded buffer (the log,
 * the stats, the trace) and onto a stream (the tools).  Both go through
 * escape_one(), so that the rule is written once.  No locks, no state.
 */
#include "config.h"

#include <string.h>

#include "lib/json.h"

size_t vmmx__json_utf8_len(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
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

size_t vmmx__json_utf8_put(char *o, unsigned int cp)
{
	if (cp < 0x80) {
		o[0] = (char)cp;
		return 1;
	}
	if (cp < 0x800) {
		o[0] = (char)(0xc0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3f));
		return 2;
	}
	if (cp < 0x10000) {
		o[0] = (char)(0xe0 | cp >> 12);
		o[1] = (char)(0x80 | (cp >> 6 & 0x3f));
		o[2] = (char)(0x80 | (cp & 0x3f));
		return 3;
	}
	o[0] = (char)(0xf0 | cp >> 18);
	o[1] = (char)(0x80 | (cp >> 12 & 0x3f));
	o[2] = (char)(0x80 | (cp >> 6 & 0x3f));
	o[3] = (char)(0x80 | (cp & 0x3f));
	return 4;
}

/*
 * The escaped form of the character at @s (not its NUL) into @out, no NUL:
 * 2 bytes for a quote or backslash, 6 for \u00XX, else the 1 to 4 bytes of
 * the UTF-8 sequence.  Sets *@used to the bytes of @s it stands for.
 */
static size_t escape_one(const unsigned char *s, char out[6], size_t *used)
{
	static const char hex[] = "0123456789abcdef";
	unsigned char c = *s;
	size_t n = vmmx__json_utf8_len((const char *)s);

	*used = n ? n : 1;
	if (c == '"' || c == '\\') {
		out[0] = '\\';
		out[1] = (char)c;
		return 2;
	}
	if (c < 0x20 || c == 0x7f || !n) {
		memcpy(out, "\\u00", 4);
		out[4] = hex[c >> 4];
		out[5] = hex[c & 0xf];
		return 6;
	}
	memcpy(out, s, n);
	return n;
}

void vmmx__json_escape(char *out, size_t len, const char *s)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t o = 0, used, n;
	char e[6];

	if (!len)
		return;
	for (; *u; u += used) {
		n = escape_one(u, e, &used);
		/* Room for the whole escape and the NUL, or stop. */
		if (o + n >= len)
			break;
		memcpy(out + o, e, n);
		o += n;
	}
	out[o] = '\0';
}

void vmmx__json_put_str(FILE *f, const char *s)
{
	const unsigned char *u = (const unsigned char *)(s ? s : "");
	size_t used, n;
	char e[6];

	fputc('"', f);
	for (; *u; u += used) {
		n = escape_one(u, e, &used);
		fwrite(e, 1, n, f);
	}
	fputc('"', f);
}
