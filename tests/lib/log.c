// SPDX-License-Identifier: MIT
/*
 * log.c - the JSON writer's escaping (lib/json.c, vmmx__json_escape) keeps
 * the stats JSON and the trace valid UTF-8 whatever bytes a policy spec
 * holds: well-formed UTF-8 passes through, every byte of anything else
 * (stray continuation bytes, overlong forms, surrogates, code points past
 * U+10FFFF, sequences cut short) becomes \u00XX, and truncation never cuts
 * a sequence.  Raw bytes >= 0x80 in a policy's arguments used to reach
 * both outputs as they were.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/vmmx_test.h"

/*
 * Whether @s is well-formed UTF-8 (RFC 3629), written independently of
 * lib/json.c: by code point ranges rather than by lead-byte cases.
 */
static bool valid_utf8(const char *str)
{
	const unsigned char *s = (const unsigned char *)str;

	while (*s) {
		unsigned int cp, min;
		int k;

		if (*s < 0x80) {
			s++;
			continue;
		}
		if ((*s & 0xe0) == 0xc0) {
			cp = *s & 0x1f;
			k = 1;
			min = 0x80;
		} else if ((*s & 0xf0) == 0xe0) {
			cp = *s & 0x0f;
			k = 2;
			min = 0x800;
		} else if ((*s & 0xf8) == 0xf0) {
			cp = *s & 0x07;
			k = 3;
			min = 0x10000;
		} else {
			return false;
		}
		for (int i = 1; i <= k; i++) {
			if ((s[i] & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (s[i] & 0x3f);
		}
		if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		s += k + 1;
	}
	return true;
}

static void esc_is(const char *in, const char *want, size_t len, const char *what)
{
	char out[256];

	vmmx__json_escape(out, len, in);
	is_string(want, out, "vmmx__json_escape: %s", what);
}

static void unit(void)
{
	esc_is("plain \"q\" \\", "plain \\\"q\\\" \\\\", 256, "ASCII, quotes and backslashes");
	esc_is("a\nb\x7f", "a\\u000ab\\u007f", 256, "control bytes");
	esc_is("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	       256, "2-, 3- and 4-byte UTF-8 pass through");
	esc_is("x\xffy\xfe", "x\\u00ffy\\u00fe", 256, "bytes that start nothing");
	esc_is("\x80\xbf", "\\u0080\\u00bf", 256, "stray continuation bytes");
	esc_is("\xc0\xaf\xe0\x80\xaf", "\\u00c0\\u00af\\u00e0\\u0080\\u00af", 256,
	       "overlong forms");
	esc_is("\xed\xa0\x80", "\\u00ed\\u00a0\\u0080", 256, "a surrogate (U+D800)");
	esc_is("\xf4\x90\x80\x80", "\\u00f4\\u0090\\u0080\\u0080", 256, "past U+10FFFF");
	esc_is("ok\xc3", "ok\\u00c3", 256, "a sequence cut short by the end");
	esc_is("\xe2\x82z", "\\u00e2\\u0082z", 256, "a sequence cut short by an ASCII byte");
	esc_is("a\xc3\xa9", "a", 3, "truncation does not cut a sequence in two");
	esc_is("a\xff", "a", 7, "nor an escape");
	esc_is("a\xff", "a\\u00ff", 8, "an escape that fits");
}

static char text[1 << 16];

int main(void)
{
	static const char spec[] = "fake_ok:k=\xff\xfe\x80,e=caf\xc3\xa9,s=\xed\xa0\x80";
	char path[] = "/tmp/vmmx-log-XXXXXX", tvar[64], pvar[4200];
	const char *vars[] = { tvar, pvar, NULL };
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf;
	const char *err;
	struct json *j;
	bool found = false;
	FILE *f;
	size_t n;
	int fd;

	plan(13 + 8);
	unit();

	fd = mkstemp(path);
	if (fd < 0)
		bail("mkstemp failed");
	close(fd);
	snprintf(tvar, sizeof(tvar), "VMMX_TRACE=%s", path);
	snprintf(pvar, sizeof(pvar), "VMMX_POLICY_PATH=%s/tests/policies/.libs", test_build_tree());
	ctx = test_ctx(vars);
	if (vmmx_buf_create(ctx, 8 * MiB, spec, &buf))
		bail("vmmx_buf_create(%s): %s", spec, vmmx_last_error());
	is_err(0, vmmx_buf_resize(buf, 4 * MiB), "a grow under a policy whose arguments are not UTF-8");

	is_err(0, vmmx_stats_json(ctx, text, sizeof(text), NULL), "vmmx_stats_json");
	ok(valid_utf8(text), "the stats JSON is valid UTF-8");
	j = json_parse(text, &err);
	ok(j != NULL, "and valid JSON (%s)", j ? "parsed" : err);
	for (size_t i = 0; j && json_index(json_get(j, "policies"), i); i++) {
		const char *s = json_str(json_get(json_index(json_get(j, "policies"), i), "spec"));

		/* the parser decodes \u00ff to U+00FF, written back as UTF-8 */
		if (s && !strcmp(s, "fake_ok:k=\xc3\xbf\xc3\xbe\xc2\x80,e=caf\xc3\xa9,s=\xc3\xad\xc2\xa0\xc2\x80"))
			found = true;
	}
	ok(found, "the spec reads back: each invalid byte as U+00XX, the valid 'caf\xc3\xa9' as it was");
	json_free(j);

	f = fopen(path, "r");
	if (!f)
		bail("cannot read the trace %s", path);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	ok(n > 0 && strstr(text, "\"policy\":\"fake_ok:k=\\u00ff\\u00fe\\u0080,e=caf\xc3\xa9,s=\\u00ed\\u00a0\\u0080\""),
	   "the trace names the policy, invalid bytes escaped");
	ok(valid_utf8(text), "the trace is valid UTF-8");
	if (strchr(text, '\n'))
		*strchr(text, '\n') = '\0';
	j = json_parse(text, &err);
	ok(j != NULL, "and its first line valid JSON (%s)", j ? "parsed" : err);
	json_free(j);
	unlink(path);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
