// SPDX-License-Identifier: MIT
/*
 * trace.c - VMMX_TRACE: one JSON object per line for every chunk placed,
 * with what the policy preferred, what was chosen, whether it was a
 * fallback and why, and whether the handle came from the cache.  A grow
 * past VMMX_DEVICE_LIMIT under device-first makes fallbacks; the trace,
 * the statistics and the info log must tell the same story.  A trace file
 * that cannot be opened fails vmmx_ctx_create with a message naming the
 * variable.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/vmmx_test.h"

#define MAXLINES 64

static struct json *lines[MAXLINES];
static size_t nlines, nbad;

/* Parse every line of the trace; counts lines that are not JSON objects. */
static void load(const char *path)
{
	static char text[1 << 17];
	char *p, *nl;
	FILE *f = fopen(path, "r");
	size_t n;

	for (size_t i = 0; i < nlines; i++)
		json_free(lines[i]);
	nlines = nbad = 0;
	if (!f)
		bail("cannot read the trace %s", path);
	n = fread(text, 1, sizeof(text) - 1, f);
	fclose(f);
	text[n] = '\0';
	if (n && text[n - 1] != '\n')
		nbad++; /* a record cut short */
	for (p = text; *p; p = nl + 1) {
		const char *err;
		struct json *j;

		nl = strchr(p, '\n');
		if (!nl)
			break;
		*nl = '\0';
		j = json_parse(p, &err);
		if (!j || json_type(j) != JSON_OBJ || nlines == MAXLINES) {
			diag("trace line %zu is not a JSON object (%s): %s", nlines + nbad + 1,
			     j ? "not an object" : err, p);
			json_free(j);
			nbad++;
			continue;
		}
		lines[nlines++] = j;
	}
}

static const char *str(size_t i, const char *key)
{
	return json_str(json_get(lines[i], key));
}

/* What line i should say, for the checks below. */
struct want {
	const char *buf;
	uint64_t buf_id;
	const char *policy;
	size_t chunk, offset, size;
	const char *preferred, *chosen, *reason, *refused;
	int fallback, cache_hit;
};

/* Check lines [from, from + n) field by field: one assertion per field. */
static void check_lines(size_t from, size_t n, const struct want *w, const char *what)
{
	size_t bad[16] = { 0 };
	double now = (double)time(NULL);

	for (size_t k = 0; k < n; k++) {
		size_t i = from + k;
		const struct json *t = json_get(lines[i], "time");
		int f = 0;

		bad[f++] += !(json_type(t) == JSON_NUM && json_num(t) > now - 600 &&
			      json_num(t) < now + 600);
		bad[f++] += json_u64(json_get(lines[i], "pid")) != (uint64_t)getpid();
		bad[f++] += !str(i, "buf") || strcmp(str(i, "buf"), w[k].buf);
		bad[f++] += json_u64(json_get(lines[i], "buf_id")) != w[k].buf_id;
		bad[f++] += !str(i, "policy") || strcmp(str(i, "policy"), w[k].policy);
		bad[f++] += json_u64(json_get(lines[i], "chunk")) != w[k].chunk;
		bad[f++] += json_u64(json_get(lines[i], "offset")) != w[k].offset;
		bad[f++] += json_u64(json_get(lines[i], "size")) != w[k].size;
		bad[f++] += !str(i, "preferred") || strcmp(str(i, "preferred"), w[k].preferred);
		bad[f++] += !str(i, "chosen") || strcmp(str(i, "chosen"), w[k].chosen);
		bad[f++] += json_bool(json_get(lines[i], "fallback")) != w[k].fallback;
		bad[f++] += !str(i, "reason") || strcmp(str(i, "reason"), w[k].reason);
		bad[f++] += json_bool(json_get(lines[i], "cache_hit")) != w[k].cache_hit;
		bad[f++] += !str(i, "refused") || strcmp(str(i, "refused"), w[k].refused);
	}
	{
		static const char *const names[] = {
			"time", "pid", "buf", "buf_id", "policy", "chunk", "offset", "size",
			"preferred", "chosen", "fallback", "reason", "cache_hit", "refused",
		};

		for (size_t f = 0; f < sizeof(names) / sizeof(names[0]); f++)
			is_uint(0, bad[f], "VMMX_TRACE: \"%s\" right on every line (%s)", names[f],
				what);
	}
}

static size_t count_fallback_lines(void)
{
	size_t n = 0;

	for (size_t i = 0; i < nlines; i++)
		n += json_bool(json_get(lines[i], "fallback")) == 1;
	return n;
}

static size_t count(const char *hay, const char *needle)
{
	size_t n = 0;

	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

int main(void)
{
	char path[] = "/tmp/vmmx-trace-XXXXXX", var[64], bufname[32];
	const char *vars[] = { var, "VMMX_DEVICE_LIMIT=8MiB", "VMMX_CHUNK_MAX=2MiB", NULL };
	struct vmmx_stats st = { .size = sizeof(st) };
	struct vmmx_chunk_info c[16];
	struct want w[16];
	struct vmmx_ctx *ctx = NULL;
	struct vmmx_buf *buf, *hb;
	size_t n, match;
	int fd;

	plan(62);
	fd = mkstemp(path);
	if (fd < 0)
		bail("mkstemp failed");
	close(fd);
	snprintf(var, sizeof(var), "VMMX_TRACE=%s", path);
	ctx = test_ctx(vars);
	if (vmmx_buf_create(ctx, 32 * MiB, "device-first", &buf))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	snprintf(bufname, sizeof(bufname), "%p", vmmx_buf_ptr(buf));
	test_log_clear();
	is_err(0, vmmx_buf_resize(buf, 16 * MiB),
	       "vmmx_buf_resize: 16 MiB under device-first with VMMX_DEVICE_LIMIT=8MiB");
	load(path);
	is_uint(0, nbad, "VMMX_TRACE: every line parses as a JSON object");
	vmmx_buf_chunks(buf, c, 16, &n);
	is_uint(n, nlines, "VMMX_TRACE: one line per chunk placed (%zu chunks)", n);
	for (size_t i = 0; i < 8; i++)
		w[i] = (struct want){
			.buf = bufname, .buf_id = 1, .policy = "device-first", .chunk = i,
			.offset = i * 2 * MiB, .size = 2 * MiB, .preferred = "device:0",
			.chosen = i < 4 ? "device:0" : "host", .fallback = i >= 4,
			.reason = i < 4 ? "ok" : "limit", .cache_hit = 0,
			.refused = i < 4 ? "" : "device:0 at its limit",
		};
	if (nlines == 8)
		check_lines(0, 8, w, "first grow");
	else
		for (int i = 0; i < 14; i++)
			skip("the trace does not have 8 lines");
	match = 0;
	for (size_t i = 0; i < nlines && i < n; i++) {
		char name[32];

		match += json_u64(json_get(lines[i], "offset")) ==
				 (uint64_t)((char *)c[i].base - (char *)vmmx_buf_ptr(buf)) &&
			 json_u64(json_get(lines[i], "size")) == c[i].size && str(i, "chosen") &&
			 !strcmp(str(i, "chosen"), vmmx_loc_name(c[i].loc, name, sizeof(name)));
	}
	is_uint(n, match, "VMMX_TRACE agrees with vmmx_buf_chunks on offset, size and location");
	vmmx_stats_get(ctx, &st);
	is_uint(count_fallback_lines(), st.fallbacks,
		"vmmx_stats_get: fallbacks = fallback lines (%zu)", count_fallback_lines());
	is_uint(count_fallback_lines(), st.fallbacks_limit,
		"vmmx_stats_get: fallbacks_limit = fallback lines");
	is_uint(4, count_fallback_lines(), "VMMX_TRACE: 4 fallback lines");
	is_uint(count_fallback_lines(), count(test_log(), "fallback: "),
		"VMMX_LOG=info: one \"fallback:\" line per fallback");
	like(test_log(), "(2097152 bytes) placed on host, not device:0: device:0 at its limit",
	     "VMMX_LOG=info: the fallback line says where, instead of what, and why");

	/* Shrink and grow again: handles come from the cache, and the trace says so. */
	vmmx_buf_resize(buf, 4 * MiB);
	is_err(0, vmmx_buf_resize(buf, 12 * MiB), "vmmx_buf_resize: grow again after a shrink");
	load(path);
	is_uint(0, nbad, "VMMX_TRACE: still every line JSON");
	is_uint(12, nlines, "VMMX_TRACE: 4 more lines for 4 more chunks");
	for (size_t i = 0; i < 4; i++)
		w[i] = (struct want){
			.buf = bufname, .buf_id = 1, .policy = "device-first", .chunk = i + 2,
			.offset = (i + 2) * 2 * MiB, .size = 2 * MiB, .preferred = "device:0",
			.chosen = i < 2 ? "device:0" : "host", .fallback = i >= 2,
			.reason = i < 2 ? "ok" : "limit", .cache_hit = 1,
			.refused = i < 2 ? "" : "device:0 at its limit",
		};
	if (nlines == 12)
		check_lines(8, 4, w, "regrow from the cache");
	else
		for (int i = 0; i < 14; i++)
			skip("the trace does not have 12 lines");

	/* Another buffer, another policy: its own id and spec. */
	if (vmmx_buf_create(ctx, 8 * MiB, "host", &hb))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	snprintf(bufname, sizeof(bufname), "%p", vmmx_buf_ptr(hb));
	vmmx_ctx_trim(ctx, 0);
	is_err(0, vmmx_buf_resize(hb, 2 * MiB), "vmmx_buf_resize of a host buffer");
	load(path);
	w[0] = (struct want){
		.buf = bufname, .buf_id = 2, .policy = "host", .chunk = 0, .offset = 0,
		.size = 2 * MiB, .preferred = "host", .chosen = "host", .fallback = 0,
		.reason = "ok", .cache_hit = 0, .refused = "",
	};
	if (nlines == 13)
		check_lines(12, 1, w, "a second buffer");
	else
		for (int i = 0; i < 14; i++)
			skip("the trace does not have 13 lines");
	vmmx_stats_get(ctx, &st);
	is_uint(count_fallback_lines(), st.fallbacks,
		"vmmx_stats_get: fallbacks still = fallback lines");
	vmmx_buf_destroy(hb);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	load(path);
	is_uint(13, nlines, "VMMX_TRACE: shrinks and destroys place nothing, trace nothing");

	/* A trace file that cannot be opened. */
	ctx = NULL;
	vars[0] = "VMMX_TRACE=/nonexistent-vmmx-dir/trace.json";
	is_err(-VMMX_ECONFIG, test_ctx_try(vars, &ctx),
	       "vmmx_ctx_create with VMMX_TRACE in a missing directory: ECONFIG");
	like(vmmx_last_error(), "VMMX_TRACE=\"/nonexistent-vmmx-dir/trace.json\": cannot open",
	     "vmmx_last_error names the variable and the file");
	ok(ctx == NULL, "vmmx_ctx_create: ctx_p untouched on failure");
	vars[0] = "VMMX_TRACE=/";
	is_err(-VMMX_ECONFIG, test_ctx_try(vars, &ctx),
	       "vmmx_ctx_create with VMMX_TRACE a directory: ECONFIG");
	like(vmmx_last_error(), "VMMX_TRACE", "vmmx_last_error names the variable");

	for (size_t i = 0; i < nlines; i++)
		json_free(lines[i]);
	unlink(path);
	return tap_done();
}
