// SPDX-License-Identifier: MIT
/*
 * shipped.c - the shipped policy plugins (the sources in policies/, loaded
 * from the build tree's policies/.libs) through their arguments and placements:
 * device, host, device-first, interleave and tiered.  Limits
 * (VMMX_DEVICE_LIMIT) force the fallbacks, so the same checks hold on a
 * GPU; what needs two devices runs on the sim with VMMX_SIM_DEVICES=2 (or
 * on a machine with two GPUs) and is skipped elsewhere.  Every layout is
 * written and read back.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#define UNIT (2 * MiB)

static char pathvar[2200];

static void find_policy_dir(void)
{
	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s/policies/.libs", test_build_tree());
}

/*
 * The buffer's layout, one letter per 2 MiB unit: the device ordinal for a
 * device chunk, 'H' for host, 'N' for a host NUMA node; "?" when the chunk
 * list cannot be read.
 */
static const char *layout(struct vmmx_buf *buf)
{
	static char out[512];
	struct vmmx_chunk_info c[128];
	size_t n, o = 0;

	if (vmmx_buf_chunks(buf, c, 128, &n) || n > 128)
		return "?";
	for (size_t i = 0; i < n; i++) {
		char ch = c[i].loc.kind == VMMX_LOC_DEVICE ? (char)('0' + c[i].loc.id)
			  : c[i].loc.kind == VMMX_LOC_HOST ? 'H'
			  : c[i].loc.kind == VMMX_LOC_HOST_NUMA ? 'N'
								 : '?';

		for (size_t u = 0; u < c[i].size / UNIT && o < sizeof(out) - 1; u++)
			out[o++] = ch;
	}
	out[o] = '\0';
	return out;
}

static size_t nchunks(struct vmmx_buf *buf)
{
	size_t n = 0;

	vmmx_buf_chunks(buf, NULL, 0, &n);
	return n;
}

/* Whether every chunk is @size bytes. */
static bool chunks_all(struct vmmx_buf *buf, size_t size)
{
	struct vmmx_chunk_info c[128];
	size_t n;

	if (vmmx_buf_chunks(buf, c, 128, &n) || n > 128)
		return false;
	for (size_t i = 0; i < n; i++)
		if (c[i].size != size)
			return false;
	return true;
}

/* Write and read back the whole buffer; one assertion. */
static void data_ok(struct vmmx_ctx *ctx, struct vmmx_buf *buf, uint32_t seed, const char *what)
{
	size_t size = vmmx_buf_size(buf);
	int err = test_fill(ctx, vmmx_buf_ptr(buf), 0, size, seed);

	ok(!err && test_check(ctx, vmmx_buf_ptr(buf), 0, size, seed) == SIZE_MAX,
	   "vmmx_memcpy: %zu MiB written and read back under %s", size / MiB, what);
}

/* A policy spec whose init must refuse: -VMMX_EINVAL with @why in the message; 2 assertions. */
static void refused(struct vmmx_ctx *ctx, const char *spec, const char *why)
{
	struct vmmx_buf *buf = NULL;

	is_err(-VMMX_EINVAL, vmmx_buf_create(ctx, 8 * MiB, spec, &buf),
	       "vmmx_buf_create refuses \"%s\"", spec);
	like(vmmx_last_error(), why, "vmmx_last_error explains \"%s\"", spec);
	vmmx_buf_destroy(buf);
}

/* Create a buffer and grow it; bails when that fails (the assertions follow). */
static struct vmmx_buf *make(struct vmmx_ctx *ctx, size_t cap, const char *spec, size_t size)
{
	struct vmmx_buf *buf;
	int err = vmmx_buf_create(ctx, cap, spec, &buf);

	if (err)
		bail("vmmx_buf_create(%s): %s: %s", spec, vmmx_strerror(err), vmmx_last_error());
	err = vmmx_buf_resize(buf, size);
	if (err)
		bail("vmmx_buf_resize(%s, %zu MiB): %s: %s", spec, size / MiB, vmmx_strerror(err),
		     vmmx_last_error());
	return buf;
}

static void residency(struct vmmx_buf *buf, size_t off, size_t len, size_t *dev, size_t *host)
{
	struct vmmx_residency r = { 0, 0 };

	vmmx_buf_residency(buf, off, len, &r);
	*dev = r.device;
	*host = r.host;
}

/*
 * What interleave should do with weight @wdev on each of @ndev devices and
 * @whost on host: @turns turns of @per letters (units) each.
 */
static void interleave_want(char *out, int turns, int per, int wdev, int whost, int ndev)
{
	int total = wdev * ndev + whost, o = 0;

	for (int u = 0; u < turns; u++) {
		int t = u % total;

		for (int k = 0; k < per; k++)
			out[o++] = t < wdev * ndev ? (char)('0' + t / wdev) : 'H';
	}
	out[o] = '\0';
}

static size_t letters(const char *s, char c)
{
	size_t n = 0;

	for (; *s; s++)
		n += *s == c;
	return n;
}

static uint64_t fallbacks(struct vmmx_ctx *ctx)
{
	struct vmmx_stats st = { .size = sizeof(st) };

	vmmx_stats_get(ctx, &st);
	return st.fallbacks;
}

int main(void)
{
	const char *one[] = { pathvar, NULL };
	const char *two[] = { pathvar, "VMMX_SIM_DEVICES=2", NULL };
	const char *lim[] = { pathvar, "VMMX_DEVICE_LIMIT=8MiB", "VMMX_CHUNK_MAX=4MiB", NULL };
	struct vmmx_ctx_info info = { .size = sizeof(info) };
	struct vmmx_ctx *ctx, *ctx2, *ctxl;
	struct vmmx_buf *buf;
	char spec[64], want[128], why[128];
	size_t dev, host;
	uint64_t fb;
	int ndev, err;

	find_policy_dir();
	plan(73 + 6 + 6);
	ctx = test_ctx(one);
	ctx2 = test_ctx(two);
	ctxl = test_ctx(lim);
	if (vmmx_ctx_query(ctx2, &info))
		bail("vmmx_ctx_query: %s", vmmx_last_error());
	ndev = info.device_count;
	if (vmmx_ctx_query(ctx, &info) || info.device != 0)
		bail("these tests expect the context on device 0");

	/* ---- device ---- */
	buf = make(ctx, 32 * MiB, "device", 8 * MiB);
	is_string("0000", layout(buf), "device: every chunk on the context's device");
	data_ok(ctx, buf, 1, "device");
	vmmx_buf_destroy(buf);
	if (ndev >= 2) {
		buf = make(ctx2, 32 * MiB, "device:id=1", 8 * MiB);
		is_string("1111", layout(buf), "device:id=1: every chunk on device 1");
		data_ok(ctx2, buf, 2, "device:id=1");
		vmmx_buf_destroy(buf);
	} else {
		skip("device:id=1 needs two devices (VMMX_SIM_DEVICES=2 on sim)");
		skip("device:id=1 needs two devices");
	}
	snprintf(spec, sizeof(spec), "device:id=%d", ndev);
	snprintf(why, sizeof(why), "id=%d: expected an integer from 0 to %d", ndev, ndev - 1);
	refused(ctx2, spec, why);
	refused(ctx2, "device:id=-1", "id=-1: expected an integer");
	refused(ctx2, "device:gpu=0", "unknown argument \"gpu\" (known: id)");
	refused(ctx2, "device:id", "argument \"id\": expected key=value");

	/* ---- host ---- */
	buf = make(ctx, 32 * MiB, "host", 6 * MiB);
	is_string("HHH", layout(buf), "host: every chunk in host memory");
	data_ok(ctx, buf, 3, "host");
	vmmx_buf_destroy(buf);
	err = vmmx_buf_create(ctx, 32 * MiB, "host:numa=0", &buf);
	is_err(0, err, "vmmx_buf_create with host:numa=0");
	if (!err && (err = vmmx_buf_resize(buf, 6 * MiB)) && !test_on_sim()) {
		diag("HOST_NUMA chunks not available here: %s", vmmx_last_error());
		skip("host:numa=0: this GPU or driver does not create HOST_NUMA chunks");
		skip("host:numa=0: no HOST_NUMA chunks");
	} else {
		is_string("NNN", layout(buf), "host:numa=0: every chunk on host NUMA node 0");
		data_ok(ctx, buf, 4, "host:numa=0");
	}
	vmmx_buf_destroy(buf);
	refused(ctx, "host:numa=zero", "numa=zero: expected an integer from 0 to 1023");
	refused(ctx, "host:node=0", "unknown argument \"node\" (known: numa)");

	/* ---- device-first: the device up to its limit, then host ---- */
	fb = fallbacks(ctxl);
	buf = make(ctxl, 32 * MiB, "device-first", 16 * MiB);
	is_string("0000HHHH", layout(buf),
		  "device-first: 8 MiB on the device (its limit), then host");
	is_uint(2, fallbacks(ctxl) - fb, "vmmx_stats_get: each host chunk counts as a fallback");
	data_ok(ctxl, buf, 5, "device-first");
	vmmx_buf_destroy(buf);
	if (vmmx_buf_create(ctxl, 32 * MiB, "device-first:numa=0", &buf))
		bail("vmmx_buf_create(device-first:numa=0): %s", vmmx_last_error());
	if (vmmx_buf_resize(buf, 12 * MiB) && !test_on_sim()) {
		diag("HOST_NUMA chunks not available here: %s", vmmx_last_error());
		skip("device-first:numa=0: this GPU or driver does not create HOST_NUMA chunks");
		skip("device-first:numa=0: no HOST_NUMA chunks");
	} else {
		is_string("0000NN", layout(buf),
			  "device-first:numa=0 falls back to host NUMA node 0");
		data_ok(ctxl, buf, 6, "device-first:numa=0");
	}
	vmmx_buf_destroy(buf);
	refused(ctxl, "device-first:numa=", "numa=: expected an integer");

	/* ---- device-first:reserve=: big buffers leave room for small ones ---- */
	{
		static const char rs[] = "device-first:reserve=4MiB,large=16MiB";
		struct vmmx_buf *small, *small2;

		vmmx_ctx_trim(ctxl, 0);
		buf = make(ctxl, 32 * MiB, rs, 12 * MiB);
		is_string("00HHHH", layout(buf),
			  "reserve=4MiB: a buffer of large= or more stops 4 MiB short of the limit");
		small = make(ctxl, 8 * MiB, rs, 4 * MiB);
		is_string("00", layout(small), "reserve=4MiB: a smaller buffer gets the reserve");
		small2 = make(ctxl, 8 * MiB, rs, 4 * MiB);
		is_string("HH", layout(small2), "reserve=4MiB: once it is used, host memory");
		data_ok(ctxl, buf, 10, rs);
		vmmx_buf_destroy(small2);
		vmmx_buf_destroy(small);
		vmmx_buf_destroy(buf);
		vmmx_ctx_trim(ctxl, 0);
		buf = make(ctxl, 32 * MiB,
			   "device-first:reserve=18446744073709551615,large=16MiB", 8 * MiB);
		is_string("HHHH", layout(buf),
			  "reserve=2^64-1: more than any room, so host first (no wrap-around)");
		vmmx_buf_destroy(buf);
		buf = make(ctxl, 32 * MiB, "device-first:reserve=4MiB", 8 * MiB);
		is_string("0000", layout(buf),
			  "reserve=4MiB: a buffer under the default large= (64MiB) is not held back");
		vmmx_buf_destroy(buf);
	}
	refused(ctxl, "device-first:reserve=lots", "reserve=lots: expected a size such as 512MiB");
	refused(ctxl, "device-first:large=0", "large=0: expected a size such as 512MiB, not 0");
	refused(ctxl, "device-first:spare=1", "unknown argument \"spare\" (known: numa, peers, reserve, large)");

	/* ---- interleave ---- */
	/* On the sim this context has one device; on a GPU machine, as many as it has. */
	if (vmmx_ctx_query(ctx, &info))
		bail("vmmx_ctx_query: %s", vmmx_last_error());
	buf = make(ctx, 64 * MiB, "interleave:device=3,host=1", 32 * MiB);
	interleave_want(want, 16, 1, 3, 1, info.device_count);
	is_string(want, layout(buf),
		  "interleave:device=3,host=1: 3 units on each device, then 1 on host");
	ok(chunks_all(buf, 2 * MiB) && nchunks(buf) == 16,
	   "interleave: one 2 MiB chunk per unit (%zu chunks)", nchunks(buf));
	residency(buf, 0, 32 * MiB, &dev, &host);
	ok(dev == (16 - letters(want, 'H')) * UNIT && host == letters(want, 'H') * UNIT,
	   "vmmx_buf_residency agrees with the pattern (%zu MiB device, %zu MiB host)", dev / MiB,
	   host / MiB);
	if (info.device_count == 1)
		ok(dev == 3 * host, "interleave:device=3,host=1: device:host is 3:1");
	else
		skip("the 3:1 ratio holds with one device (%d here)", info.device_count);
	data_ok(ctx, buf, 7, "interleave:device=3,host=1");
	vmmx_buf_destroy(buf);

	/* Cached 2 MiB handles would be reused as 2 MiB chunks: start without. */
	vmmx_ctx_trim(ctx, 0);
	buf = make(ctx, 64 * MiB, "interleave:device=1,host=1,unit=4MiB", 32 * MiB);
	interleave_want(want, 8, 2, 1, 1, info.device_count);
	is_string(want, layout(buf), "interleave:unit=4MiB: turns of 4 MiB");
	ok(chunks_all(buf, 4 * MiB) && nchunks(buf) == 8,
	   "interleave:unit=4MiB: one 4 MiB chunk per turn (%zu chunks)", nchunks(buf));
	data_ok(ctx, buf, 8, "interleave:unit=4MiB");
	vmmx_buf_destroy(buf);

	/* "unit=SIZE ... rounded down to" the chunk minimum (policies/interleave.c):
	 * 1 MiB and 3 MiB both mean 2 MiB turns. */
	vmmx_ctx_trim(ctx, 0);
	interleave_want(want, 6, 1, 1, 1, info.device_count);
	buf = make(ctx, 64 * MiB, "interleave:device=1,host=1,unit=1MiB", 12 * MiB);
	if (strcmp(want, layout(buf)))
		diag("LIBRARY BUG (policies/interleave.c il_place): unit is not rounded down to "
		     "chunk_min; with unit=1MiB every 2 MiB chunk starts on an even turn, so "
		     "every chunk goes to the first location (%s)", layout(buf));
	is_string(want, layout(buf), "interleave:unit=1MiB is rounded to 2 MiB turns");
	vmmx_buf_destroy(buf);
	buf = make(ctx, 64 * MiB, "interleave:device=1,host=1,unit=3MiB", 12 * MiB);
	if (strcmp(want, layout(buf)))
		diag("LIBRARY BUG (policies/interleave.c il_place): with unit=3MiB the turns are "
		     "3 MiB wide but chunks 2 MiB, so weights 1:1 give %s (2:1)", layout(buf));
	is_string(want, layout(buf), "interleave:unit=3MiB is rounded down to 2 MiB turns");
	vmmx_buf_destroy(buf);

	if (ndev == 2) {
		buf = make(ctx2, 64 * MiB, "interleave:device=1", 16 * MiB);
		is_string("01010101", layout(buf),
			  "interleave:device=1 across two GPUs alternates them");
		data_ok(ctx2, buf, 9, "interleave across two devices");
		vmmx_buf_destroy(buf);
		buf = make(ctx2, 64 * MiB, "interleave:device=0,device1=2,host=1", 12 * MiB);
		is_string("11H11H", layout(buf), "interleave:deviceN=W overrides device=W");
		vmmx_buf_destroy(buf);
	} else {
		skip("interleave across GPUs: needs exactly two devices (%d here)", ndev);
		skip("interleave across GPUs: needs exactly two devices");
		skip("interleave:deviceN: needs exactly two devices");
	}

	/* A location at its limit passes its turn: device 8 MiB, the rest host.
	 * Only device 0 takes turns, however many GPUs the machine has (the
	 * limit applies to each of them). */
	fb = fallbacks(ctxl);
	buf = make(ctxl, 64 * MiB, "interleave:device=0,device0=1,host=1", 32 * MiB);
	residency(buf, 0, 32 * MiB, &dev, &host);
	ok(dev == 8 * MiB && host == 24 * MiB,
	   "interleave under VMMX_DEVICE_LIMIT=8MiB: 8 MiB on the device, 24 on host (%zu, %zu)",
	   dev / MiB, host / MiB);
	is_uint(4, fallbacks(ctxl) - fb,
		"vmmx_stats_get: the 4 device turns given to host are fallbacks");
	data_ok(ctxl, buf, 10, "interleave under a device limit");
	vmmx_buf_destroy(buf);

	refused(ctx2, "interleave:color=1",
		"unknown argument \"color\" (known: device, deviceN, host, unit)");
	refused(ctx2, "interleave:device=x", "device=x: expected an integer from 0 to 1000");
	refused(ctx2, "interleave:host=one", "host=one: expected an integer");
	refused(ctx2, "interleave:device=0,host=0", "every weight is 0");
	/* device5 as long as there are at most 5 devices, else the first missing one. */
	snprintf(spec, sizeof(spec), "interleave:device%d=1", ndev > 5 ? ndev : 5);
	snprintf(why, sizeof(why), "device%d: no such device (there are %d)", ndev > 5 ? ndev : 5,
		 ndev);
	refused(ctx2, spec, why);
	refused(ctx2, "interleave:unit=0", "unit=0: expected a nonzero size");
	refused(ctx2, "interleave:device=1,", "trailing ','");

	/* ---- tiered ---- */
	buf = make(ctx, 32 * MiB, "tiered:hot=8MiB", 24 * MiB);
	residency(buf, 0, 8 * MiB, &dev, &host);
	ok(dev == 8 * MiB, "tiered:hot=8MiB: the first 8 MiB on the device (%zu MiB)", dev / MiB);
	residency(buf, 8 * MiB, 16 * MiB, &dev, &host);
	ok(host == 16 * MiB, "tiered:hot=8MiB: the other 16 MiB on host (%zu MiB)", host / MiB);
	is_string("0000HHHHHHHH", layout(buf), "tiered: the tier boundary is a chunk boundary");
	data_ok(ctx, buf, 11, "tiered:hot=8MiB");
	vmmx_buf_destroy(buf);

	buf = make(ctx, 64 * MiB, "tiered:hot=25%", 32 * MiB);
	is_string("00000000HHHHHHHH", layout(buf),
		  "tiered:hot=25%%: 16 MiB of a 64 MiB capacity hot");
	data_ok(ctx, buf, 12, "tiered:hot=25%");
	vmmx_buf_destroy(buf);

	buf = make(ctx, 16 * MiB, "tiered", 16 * MiB);
	is_string("0000HHHH", layout(buf), "tiered with no argument: half the capacity hot");
	vmmx_buf_destroy(buf);

	/* The hot part falls back to host when the device is at its limit. */
	buf = make(ctxl, 32 * MiB, "tiered:hot=16MiB", 24 * MiB);
	is_string("0000HHHHHHHH", layout(buf),
		  "tiered under VMMX_DEVICE_LIMIT=8MiB: the hot overflow goes to host");
	data_ok(ctxl, buf, 13, "tiered under a device limit");
	vmmx_buf_destroy(buf);

	refused(ctx, "tiered:hot=lots", "hot=lots: expected a size (4GiB) or N% of the buffer");
	refused(ctx, "tiered:hot=150%", "hot=150%: expected a size");
	refused(ctx, "tiered:cold=1MiB", "unknown argument \"cold\" (known: hot)");

	vmmx_ctx_destroy(ctxl);
	vmmx_ctx_destroy(ctx2);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
