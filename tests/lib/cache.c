// SPDX-License-Identifier: MIT
/*
 * cache.c - the physical-chunk cache: handles unmapped by a shrink are
 * mapped again by the next grow without a driver create; VMMX_CACHE_LIMIT
 * bounds (or disables) the cache; vmmx_ctx_trim() gives everything back;
 * cached bytes count against VMMX_DEVICE_LIMIT and are evicted when a grow
 * needs another size; VMMX_DEVICE_PREALLOC fills the cache up front and is
 * capped by what is available; VMMX_DEVICE_HEADROOM keeps device memory
 * free and the fallback it causes is counted and traced as "headroom".
 *
 * Limits make the cache's effects visible on any backend; device capacity
 * (VMMX_SIM_DEVICE_MEM) is used only on the sim, elsewhere those parts skip.
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

struct snap {
	struct vmmx_stats st;
	struct vmm_counts vc;
};

static void take(struct vmmx_ctx *ctx, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	s->st.size = sizeof(s->st);
	if (vmmx_stats_get(ctx, &s->st))
		bail("vmmx_stats_get: %s", vmmx_last_error());
	vmm_counts(vmmx__ctx_vmm(ctx), &s->vc);
}

static uint64_t creates(const struct snap *s)
{
	return s->st.driver_calls[VMMX_OP_CREATE];
}

static uint64_t releases(const struct snap *s)
{
	return s->st.driver_calls[VMMX_OP_RELEASE];
}

/* Field @field of location @loc ("device:0", "host") in vmmx_stats_json. */
static uint64_t loc_stat(struct vmmx_ctx *ctx, const char *loc, const char *field)
{
	struct json *st = test_stats_json(ctx);
	const struct json *locs;
	uint64_t v = UINT64_MAX;

	locs = json_get(st, "locations");
	for (size_t i = 0; i < json_len(locs); i++) {
		const char *name = json_str(json_get(json_index(locs, i), "location"));

		if (name && !strcmp(name, loc))
			v = json_u64(json_get(json_index(locs, i), field));
	}
	json_free(st);
	return v;
}

static struct vmmx_buf *make(struct vmmx_ctx *ctx, size_t cap, const char *policy)
{
	struct vmmx_buf *buf;

	if (vmmx_buf_create(ctx, cap, policy, &buf))
		bail("vmmx_buf_create(%s): %s", policy, vmmx_last_error());
	return buf;
}

/* Read a whole file (the trace) into a static buffer. */
static const char *slurp(const char *path)
{
	static char text[65536];
	FILE *f = fopen(path, "r");
	size_t n;

	if (!f)
		return "";
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = '\0';
	fclose(f);
	return text;
}

int main(void)
{
	struct vmmx_ctx_info info = { .size = sizeof(info) };
	struct vmmx_ctx *ctx;
	struct vmmx_buf *a, *b;
	struct vmmx_residency r;
	struct snap s0, s1;
	char trace[] = "/tmp/vmmx-cache-trace-XXXXXX", tracevar[64];
	int fd;

	plan(76);

	/* ---- shrink, then grow again: the same handle comes back ---- */
	ctx = test_ctx(NULL);
	a = make(ctx, 64 * MiB, "device");
	is_err(0, vmmx_buf_resize(a, 16 * MiB), "vmmx_buf_resize to 16 MiB (one handle)");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(a), 0, 16 * MiB, 1), "pattern written");
	take(ctx, &s0);
	is_err(0, vmmx_buf_resize(a, 0), "vmmx_buf_resize to 0");
	take(ctx, &s1);
	is_uint(16 * MiB, s1.st.cache_bytes, "vmmx_stats_get: the 16 MiB handle is in the cache");
	is_uint(releases(&s0), releases(&s1), "vmmx_buf_resize (shrink): no driver release");
	is_int(1, s1.vc.handles, "vmm_counts: the cached handle is still alive");
	is_uint(16 * MiB, loc_stat(ctx, "device:0", "cached"),
		"vmmx_stats_json: device:0 shows 16 MiB cached");
	is_uint(16 * MiB, loc_stat(ctx, "device:0", "held"),
		"vmmx_stats_json: cached bytes are held");
	take(ctx, &s0);
	is_err(0, vmmx_buf_resize(a, 16 * MiB), "vmmx_buf_resize back to 16 MiB");
	take(ctx, &s1);
	is_uint(s0.st.cache_hits + 1, s1.st.cache_hits, "vmmx_stats_get: one cache hit");
	is_uint(creates(&s0), creates(&s1), "vmmx_buf_resize (grow): no driver create");
	is_uint(0, s1.st.cache_bytes, "vmmx_stats_get: the cache is empty again");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(a), 0, 16 * MiB, 2),
	       "the reused chunk takes new data");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 16 * MiB, 2), "and gives it back");
	vmmx_buf_destroy(a);
	/* Host chunks, the expensive ones to create, are reused the same way. */
	a = make(ctx, 64 * MiB, "host");
	vmmx_buf_resize(a, 8 * MiB);
	vmmx_buf_resize(a, 0);
	take(ctx, &s0);
	is_err(0, vmmx_buf_resize(a, 8 * MiB), "vmmx_buf_resize: host grow after a shrink");
	take(ctx, &s1);
	ok(s1.st.cache_hits == s0.st.cache_hits + 1 && creates(&s1) == creates(&s0),
	   "vmmx_buf_resize: the host handle came from the cache");
	vmmx_buf_destroy(a);
	/* vmmx_buf_destroy caches too; vmmx_ctx_trim(ctx, 0) gives it all back. */
	take(ctx, &s0);
	ok(s0.st.cache_bytes == 24 * MiB && s0.vc.handles == 2,
	   "vmmx_buf_destroy: its chunks went to the cache (%llu bytes, %lld handles)",
	   (unsigned long long)s0.st.cache_bytes, (long long)s0.vc.handles);
	is_err(0, vmmx_ctx_trim(ctx, 0), "vmmx_ctx_trim(ctx, 0)");
	take(ctx, &s1);
	is_uint(0, s1.st.cache_bytes, "vmmx_ctx_trim: cache_bytes is 0");
	is_int(0, s1.vc.handles, "vmmx_ctx_trim: vmm_counts shows no handle left");
	is_uint(s0.st.cache_released + 2, s1.st.cache_released,
		"vmmx_stats_get: cache_released counts both handles");
	is_uint(0, loc_stat(ctx, "device:0", "held"), "vmmx_stats_json: device:0 holds nothing");
	is_err(-VMMX_EINVAL, vmmx_ctx_trim(NULL, 0), "vmmx_ctx_trim(NULL): EINVAL");
	like(vmmx_last_error(), "vmmx_ctx_trim", "vmmx_last_error names vmmx_ctx_trim");
	vmmx_ctx_destroy(ctx);

	/* ---- VMMX_CACHE_LIMIT=0: no cache at all ---- */
	{
		static const char *const v[] = { "VMMX_CACHE_LIMIT=0", NULL };

		ctx = test_ctx(v);
	}
	vmmx_ctx_query(ctx, &info);
	is_uint(0, info.cache_limit, "vmmx_ctx_query: cache_limit 0");
	a = make(ctx, 64 * MiB, "device");
	vmmx_buf_resize(a, 16 * MiB);
	take(ctx, &s0);
	is_err(0, vmmx_buf_resize(a, 0), "vmmx_buf_resize to 0 with VMMX_CACHE_LIMIT=0");
	take(ctx, &s1);
	is_uint(releases(&s0) + 1, releases(&s1),
		"vmmx_buf_resize: the handle was released at once");
	ok(s1.st.cache_bytes == 0 && s1.vc.handles == 0,
	   "vmmx_stats_get: nothing cached, no handle alive");
	is_err(0, vmmx_buf_resize(a, 16 * MiB), "vmmx_buf_resize: grow again");
	take(ctx, &s0);
	ok(creates(&s0) == creates(&s1) + 1 && s0.st.cache_hits == 0,
	   "vmmx_buf_resize: a new handle was created (no hit)");
	vmmx_buf_destroy(a);
	vmmx_ctx_destroy(ctx);

	/* ---- VMMX_CACHE_LIMIT bounds what is kept ---- */
	{
		static const char *const v[] = {
			"VMMX_CACHE_LIMIT=8MiB", "VMMX_CHUNK_MAX=2MiB", NULL,
		};

		ctx = test_ctx(v);
	}
	a = make(ctx, 64 * MiB, "device");
	vmmx_buf_resize(a, 32 * MiB);
	take(ctx, &s0);
	is_err(0, vmmx_buf_resize(a, 4 * MiB),
	       "vmmx_buf_resize: 32 MiB in 2 MiB chunks down to 4 MiB");
	take(ctx, &s1);
	ok(s1.st.cache_bytes <= 8 * MiB, "vmmx_stats_get: cache_bytes %llu <= VMMX_CACHE_LIMIT",
	   (unsigned long long)s1.st.cache_bytes);
	is_uint(8 * MiB, s1.st.cache_bytes, "vmmx_stats_get: the cache is full (8 MiB)");
	is_uint(releases(&s0) + 10, releases(&s1),
		"vmmx_buf_resize: the other 10 chunks were released");
	is_int(2 + 4, s1.vc.handles, "vmm_counts: 2 mapped + 4 cached handles");
	test_fill(ctx, vmmx_buf_ptr(a), 0, 4 * MiB, 4);
	is_err(0, vmmx_ctx_trim(ctx, 4 * MiB), "vmmx_ctx_trim(ctx, 4 MiB)");
	take(ctx, &s1);
	is_uint(4 * MiB, s1.st.cache_bytes, "vmmx_ctx_trim keeps what it was asked to keep");
	is_err(0, vmmx_ctx_trim(ctx, 0), "vmmx_ctx_trim(ctx, 0)");
	take(ctx, &s1);
	ok(s1.st.cache_bytes == 0 && s1.vc.handles == 2,
	   "vmmx_ctx_trim: handles back to what the buffer maps (%lld)", (long long)s1.vc.handles);
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 4 * MiB, 4),
		"vmmx_ctx_trim: the buffer's own data is untouched");
	vmmx_buf_destroy(a);
	vmmx_ctx_destroy(ctx);

	/* ---- cached bytes count against VMMX_DEVICE_LIMIT, and give way ---- */
	{
		static const char *const v[] = { "VMMX_DEVICE_LIMIT=16MiB", NULL };

		ctx = test_ctx(v);
	}
	a = make(ctx, 64 * MiB, "device");
	b = make(ctx, 64 * MiB, "device");
	vmmx_buf_resize(a, 16 * MiB);
	vmmx_buf_resize(a, 0);
	is_uint(16 * MiB, loc_stat(ctx, "device:0", "held"),
		"vmmx_stats_json: the cached 16 MiB handle is held against the limit");
	take(ctx, &s0);
	is_err(0, vmmx_buf_resize(b, 8 * MiB),
	       "vmmx_buf_resize: an 8 MiB grow succeeds although 16 MiB are cached at the limit");
	take(ctx, &s1);
	is_uint(s0.st.cache_released + 1, s1.st.cache_released,
		"vmmx_buf_resize: the 16 MiB handle that did not fit was evicted");
	is_uint(8 * MiB, loc_stat(ctx, "device:0", "held"), "vmmx_stats_json: 8 MiB held now");
	is_err(0, vmmx_buf_resize(b, 16 * MiB), "vmmx_buf_resize up to the limit");
	is_err(-VMMX_ENOMEM, vmmx_buf_resize(a, 2 * MiB),
	       "the limit is reached: ENOMEM for another buffer");
	vmmx_buf_resize(b, 8 * MiB);
	take(ctx, &s0);
	is_err(0, vmmx_buf_resize(a, 8 * MiB),
	       "vmmx_buf_resize: another buffer's released chunk fits under the limit");
	take(ctx, &s1);
	ok(s1.st.cache_hits == s0.st.cache_hits + 1 && creates(&s1) == creates(&s0),
	   "vmmx_buf_resize: ... served from the cache");
	vmmx_buf_destroy(a);
	vmmx_buf_destroy(b);
	vmmx_ctx_destroy(ctx);

	/* ---- VMMX_DEVICE_PREALLOC ---- */
	{
		static const char *const v[] = {
			"VMMX_DEVICE_PREALLOC=32MiB", "VMMX_SIM_DEVICE_MEM=64MiB", NULL,
		};

		test_log_clear();
		ctx = test_ctx(v);
	}
	take(ctx, &s0);
	is_uint(32 * MiB, s0.st.cache_bytes, "VMMX_DEVICE_PREALLOC: 32 MiB in the cache at create");
	ok(s0.vc.handles >= 1 && creates(&s0) == (uint64_t)s0.vc.handles,
	   "vmm_counts: the preallocation made %lld handle(s)", (long long)s0.vc.handles);
	is_uint(32 * MiB, loc_stat(ctx, "device:0", "cached"),
		"vmmx_stats_json: device:0 has 32 MiB cached");
	like(test_log(), "VMMX_DEVICE_PREALLOC: 32 MiB of device 0 cached", "the info log says so");
	vmmx_ctx_query(ctx, &info);
	is_uint(GiB + 32 * MiB, info.cache_limit,
		"vmmx_ctx_query: the preallocation adds to the cache bound");
	a = make(ctx, 64 * MiB, "device-first");
	is_err(0, vmmx_buf_resize(a, 32 * MiB), "vmmx_buf_resize: the first grow");
	take(ctx, &s1);
	ok(s1.st.cache_hits >= 1 && creates(&s1) == creates(&s0),
	   "vmmx_buf_resize: served from the preallocation (%llu hits, no create)",
	   (unsigned long long)s1.st.cache_hits);
	vmmx_buf_destroy(a);
	vmmx_ctx_destroy(ctx);

	{
		static const char *const v[] = {
			"VMMX_DEVICE_PREALLOC=32MiB", "VMMX_DEVICE_LIMIT=16MiB", NULL,
		};

		test_log_clear();
		ctx = test_ctx(v);
	}
	take(ctx, &s0);
	is_uint(16 * MiB, s0.st.cache_bytes,
		"VMMX_DEVICE_PREALLOC over VMMX_DEVICE_LIMIT is capped to the limit");
	like(test_log(),
	     "VMMX_DEVICE_PREALLOC: 32 MiB asked, only 16 MiB available (limit): taking that",
	     "vmmx_ctx_create warns about the cap");
	vmmx_ctx_destroy(ctx);

	if (test_on_sim()) {
		static const char *const v[] = {
			"VMMX_DEVICE_PREALLOC=128MiB", "VMMX_SIM_DEVICE_MEM=64MiB", NULL,
		};
		static const char *const v2[] = {
			"VMMX_DEVICE_PREALLOC=50%", "VMMX_SIM_DEVICE_MEM=64MiB", NULL,
		};

		test_log_clear();
		ctx = test_ctx(v);
		take(ctx, &s0);
		/* The default headroom, 1/16 of a device under 16 GiB, stays free. */
		is_uint(60 * MiB, s0.st.cache_bytes,
			"VMMX_DEVICE_PREALLOC over the device's memory is capped to what is free less the default headroom");
		like(test_log(), "VMMX_DEVICE_PREALLOC: 128 MiB asked, only 60 MiB available (headroom)",
		     "vmmx_ctx_create warns about the cap");
		vmmx_ctx_destroy(ctx);
		ctx = test_ctx(v2);
		take(ctx, &s0);
		is_uint(32 * MiB, s0.st.cache_bytes, "VMMX_DEVICE_PREALLOC=50%% of 64 MiB");
		vmmx_ctx_destroy(ctx);
	} else {
		skip("device capacity is the sim's (VMMX_SIM_DEVICE_MEM)");
		skip("device capacity is the sim's (VMMX_SIM_DEVICE_MEM)");
		skip("device capacity is the sim's (VMMX_SIM_DEVICE_MEM)");
	}

	/* ---- VMMX_DEVICE_HEADROOM ---- */
	fd = mkstemp(trace);
	if (fd < 0)
		bail("mkstemp: cannot make a trace file");
	close(fd);
	snprintf(tracevar, sizeof(tracevar), "VMMX_TRACE=%s", trace);
	{
		const char *v[] = {
			"VMMX_DEVICE_HEADROOM=16MiB", "VMMX_SIM_DEVICE_MEM=64MiB", tracevar, NULL,
		};

		ctx = test_ctx(v);
	}
	vmmx_ctx_query(ctx, &info);
	is_uint(16 * MiB, info.device_headroom, "vmmx_ctx_query: device_headroom 16 MiB");
	is_uint(16 * MiB, loc_stat(ctx, "device:0", "headroom"),
		"vmmx_stats_json: device:0 headroom");
	if (test_on_sim()) {
		a = make(ctx, 128 * MiB, "device-first");
		is_err(0, vmmx_buf_resize(a, 64 * MiB),
		       "vmmx_buf_resize to the sim device's 64 MiB");
		vmmx_buf_residency(a, 0, 64 * MiB, &r);
		ok(r.device == 48 * MiB && r.host == 16 * MiB,
		   "VMMX_DEVICE_HEADROOM=16MiB: 48 MiB on the device, 16 on host (%zu, %zu)",
		   r.device / MiB, r.host / MiB);
		take(ctx, &s1);
		ok(s1.st.fallbacks_headroom == 1 && s1.st.fallbacks == 1,
		   "vmmx_stats_get: one fallback, for headroom (%llu of %llu)",
		   (unsigned long long)s1.st.fallbacks_headroom,
		   (unsigned long long)s1.st.fallbacks);
		like(slurp(trace), "\"chosen\":\"host\",\"fallback\":true,\"reason\":\"headroom\"",
		     "VMMX_TRACE: the host chunk's reason is headroom");
		like(slurp(trace), "device:0 within its headroom",
		     "VMMX_TRACE: the refusal says the device is within its headroom");
		is_err(0, test_fill(ctx, vmmx_buf_ptr(a), 0, 64 * MiB, 3), "pattern written");
		is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 64 * MiB, 3),
			"and read back");
		vmmx_buf_destroy(a);

		/* The same, but one grow asks for more than the device's free memory:
		 * the device still stops at 48 MiB because of the headroom, and
		 * that, not a full device, is why the rest goes to host. */
		vmmx_ctx_trim(ctx, 0);
		take(ctx, &s0);
		a = make(ctx, 128 * MiB, "device-first");
		is_err(0, vmmx_buf_resize(a, 96 * MiB), "vmmx_buf_resize to 96 MiB in one grow");
		vmmx_buf_residency(a, 0, 96 * MiB, &r);
		ok(r.device == 48 * MiB && r.host == 48 * MiB,
		   "VMMX_DEVICE_HEADROOM=16MiB: 48 MiB on the device, 48 on host (%zu, %zu)",
		   r.device / MiB, r.host / MiB);
		take(ctx, &s1);
		if (s1.st.fallbacks_headroom == s0.st.fallbacks_headroom)
			diag("LIBRARY BUG (lib/ctx.c vmmx__room): the reason is headroom only when "
			     "the "
			     "driver's free memory covers the whole remaining grow (drv >= want); "
			     "here "
			     "16 MiB were free, all of it headroom, and the fallback is counted as "
			     "oom "
			     "(the log says \"device:0 full\")");
		ok(s1.st.fallbacks_headroom == s0.st.fallbacks_headroom + 1 &&
		       s1.st.fallbacks_oom == s0.st.fallbacks_oom,
		   "vmmx_stats_get: the fallback is counted as headroom, not oom (headroom +%llu, "
		   "oom +%llu)",
		   (unsigned long long)(s1.st.fallbacks_headroom - s0.st.fallbacks_headroom),
		   (unsigned long long)(s1.st.fallbacks_oom - s0.st.fallbacks_oom));
		vmmx_buf_destroy(a);
	} else {
		for (int i = 0; i < 10; i++)
			skip("placement against headroom needs the sim's fixed device memory");
	}
	vmmx_ctx_destroy(ctx);
	{
		static const char *const v[] = {
			"VMMX_DEVICE_HEADROOM=25%", "VMMX_SIM_DEVICE_MEM=64MiB", NULL,
		};

		ctx = test_ctx(v);
	}
	vmmx_ctx_query(ctx, &info);
	is_uint(info.device_total / 4, info.device_headroom,
		"vmmx_ctx_query: VMMX_DEVICE_HEADROOM=25%% of the device's memory");
	if (test_on_sim()) {
		a = make(ctx, 128 * MiB, "device-first");
		vmmx_buf_resize(a, 64 * MiB);
		vmmx_buf_residency(a, 0, 64 * MiB, &r);
		ok(r.device == 48 * MiB && r.host == 16 * MiB,
		   "VMMX_DEVICE_HEADROOM=25%%: 48 MiB on the device, 16 on host (%zu, %zu)",
		   r.device / MiB, r.host / MiB);
		vmmx_buf_destroy(a);
	} else {
		skip("placement against headroom needs the sim's fixed device memory");
	}
	vmmx_ctx_destroy(ctx);
	unlink(trace);

	/* White box: the driver refusing one large handle (fragmentation, another
	 * process) should make the preallocation try smaller ones, as a grow does. */
	ctx = test_ctx(NULL);
	vmm_fault_arm(vmmx__ctx_vmm(ctx), VMMX_OP_CREATE, 1, -VMMX_ENOMEM);
	is_err(0, vmmx__cache_prealloc(ctx, 32 * MiB),
	       "vmmx__cache_prealloc survives the driver refusing the first 32 MiB handle");
	take(ctx, &s0);
	if (s0.st.cache_bytes != 32 * MiB)
		diag("LIBRARY BUG (lib/cache.c vmmx__cache_prealloc): after an ENOMEM it halves "
		     "size and then breaks out of the loop anyway, so the halving is dead code "
		     "and the preallocation stops at %llu bytes",
		     (unsigned long long)s0.st.cache_bytes);
	is_uint(32 * MiB, s0.st.cache_bytes,
		"vmmx__cache_prealloc: 32 MiB cached in smaller handles after the refusal");
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
