// SPDX-License-Identifier: MIT
/*
 * migrate.c - vmmx_buf_migrate() and vmmx_buf_migrate_on(): chunks moving
 * between device and host memory under the same address.
 *
 * Small chunks (VMMX_CHUNK_MAX=4MiB, the granularity 2 MiB) and device
 * limits make a buffer of a few chunks of two sizes.  Checked here:
 *  - data survives hundreds of random migrations of random ranges, and
 *    after each the chunk list, the residency and the bytes moved agree;
 *  - a range widens to whole chunks; chunks already there do not move and
 *    cost no driver call; a handle cached by one leg is reused by the next;
 *  - a migration into a full device stops with -VMMX_ENOMEM, says how far
 *    it got, and leaves every chunk where it was or moved, data intact;
 *  - bad locations and ranges; streams;
 *  - every driver call of a migration scenario failed in turn (the fault
 *    layer): each failure leaves each chunk where it was or moved, intact,
 *    and nothing leaks once the buffer is destroyed and the cache trimmed;
 *  - readers (vmmx_lookup, vmmx_buf_residency, vmmx_buf_chunks) in four
 *    threads get self-consistent answers while chunks move.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

#define MAXC 64
#define SEED 11

static const struct vmmx_loc DEV = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };

/* The pattern of the whole test, SEED at absolute offsets: fills and checks by memcmp. */
static uint8_t *image;
#define IMAGE_SIZE (64 * MiB)

struct snap {
	size_t n;
	struct vmmx_chunk_info c[MAXC];
};

static bool loc_eq(struct vmmx_loc a, struct vmmx_loc b)
{
	return a.kind == b.kind && a.id == b.id;
}

static bool is_host(struct vmmx_loc l)
{
	return l.kind == VMMX_LOC_HOST || l.kind == VMMX_LOC_HOST_NUMA;
}

static void take(struct vmmx_buf *buf, struct snap *s)
{
	if (vmmx_buf_chunks(buf, s->c, MAXC, &s->n) || s->n > MAXC)
		bail("vmmx_buf_chunks: %s", vmmx_last_error());
}

static size_t off_of(struct vmmx_buf *buf, const struct vmmx_chunk_info *c)
{
	return (size_t)((char *)c->base - (char *)vmmx_buf_ptr(buf));
}

/* The buffer's layout, one letter per chunk ('D' device, 'H' host, 'N' host NUMA) and its MiB. */
static const char *layout(struct vmmx_buf *buf)
{
	static char out[MAXC * 8];
	struct snap s;
	size_t o = 0;

	take(buf, &s);
	for (size_t i = 0; i < s.n && o < sizeof(out) - 8; i++)
		o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%c%zu", i ? " " : "",
				      s.c[i].loc.kind == VMMX_LOC_DEVICE ? 'D'
				      : s.c[i].loc.kind == VMMX_LOC_HOST ? 'H'
									 : 'N',
				      s.c[i].size / MiB);
	out[o] = '\0';
	return out;
}

/* Residency of [off, off + len) computed from a chunk list. */
static void expect_residency(struct vmmx_buf *buf, const struct snap *s, size_t off, size_t len,
			     struct vmmx_residency *r)
{
	r->device = r->host = 0;
	for (size_t i = 0; i < s->n; i++) {
		size_t lo = off_of(buf, &s->c[i]), hi = lo + s->c[i].size;

		lo = lo > off ? lo : off;
		hi = hi < off + len ? hi : off + len;
		if (lo >= hi)
			continue;
		if (is_host(s->c[i].loc))
			r->host += hi - lo;
		else
			r->device += hi - lo;
	}
}

/*
 * Whether a migration of [off, off + len) to @to that returned @err and
 * said @moved left the buffer as the contract says: the same chunks (bases
 * and sizes); chunks outside the widened range where they were; chunks in
 * it where they were or at @to (all at @to on success); @moved the bytes of
 * those that changed; and vmmx_buf_residency agreeing with the chunk list,
 * over the whole buffer and over the range.  NULL, or what is wrong.
 */
static const char *consistent(struct vmmx_buf *buf, const struct snap *a, const struct snap *b,
			      size_t off, size_t len, struct vmmx_loc to, int err, size_t moved)
{
	struct vmmx_residency want, got;
	size_t changed = 0, size = vmmx_buf_size(buf);

	if (a->n != b->n)
		return "the number of chunks changed";
	for (size_t i = 0; i < a->n; i++) {
		size_t lo = off_of(buf, &a->c[i]), hi = lo + a->c[i].size;
		bool in = len && lo < off + len && hi > off;

		if (a->c[i].base != b->c[i].base || a->c[i].size != b->c[i].size)
			return "a chunk changed its base or size";
		if (b->c[i].buf != buf)
			return "a chunk names another buffer";
		if (loc_eq(a->c[i].loc, b->c[i].loc)) {
			if (in && !err && !loc_eq(b->c[i].loc, to))
				return "a chunk in the range is not at the destination after "
				       "success";
			continue;
		}
		if (!in)
			return "a chunk outside the range moved";
		if (!loc_eq(b->c[i].loc, to))
			return "a chunk moved somewhere else than the destination";
		changed += a->c[i].size;
	}
	if (changed != moved)
		return "moved_p is not the bytes of the chunks that changed location";
	expect_residency(buf, b, 0, size, &want);
	if (vmmx_buf_residency(buf, 0, size, &got) || got.device != want.device ||
	    got.host != want.host)
		return "vmmx_buf_residency of the buffer disagrees with the chunk list";
	if (len) {
		expect_residency(buf, b, off, len, &want);
		if (vmmx_buf_residency(buf, off, len, &got) || got.device != want.device ||
		    got.host != want.host)
			return "vmmx_buf_residency of the range disagrees with the chunk list";
	}
	return NULL;
}

/* Write the image's [0, size) into the buffer; 0 or the error. */
static int fill_img(struct vmmx_ctx *ctx, struct vmmx_buf *buf, size_t size)
{
	return vmmx_memcpy(ctx, vmmx_buf_ptr(buf), image, size);
}

/*
 * Compare [0, size) of the buffer with the image: SIZE_MAX when right, the
 * first wrong offset, or SIZE_MAX - 1 when the copy failed (as test_check).
 */
static size_t check_img(struct vmmx_ctx *ctx, struct vmmx_buf *buf, size_t size)
{
	static uint8_t *tmp;

	if (!tmp && !(tmp = malloc(IMAGE_SIZE)))
		bail("out of memory");
	if (vmmx_memcpy(ctx, tmp, vmmx_buf_ptr(buf), size))
		return SIZE_MAX - 1;
	if (!memcmp(tmp, image, size))
		return SIZE_MAX;
	for (size_t i = 0; i < size; i++)
		if (tmp[i] != image[i])
			return i;
	return SIZE_MAX;
}

/* A buffer grown in steps, so that chunks of 4 and 2 MiB alternate; bails on failure. */
static struct vmmx_buf *mixed_buf(struct vmmx_ctx *ctx, const char *policy, size_t size)
{
	static const size_t steps[] = { 4, 6, 10, 12, 16, 20, 22, 26, 30, 32, 36, 38, 42, 46, 48 };
	struct vmmx_buf *buf;

	if (vmmx_buf_create(ctx, 64 * MiB, policy, &buf))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]) && steps[i] * MiB <= size; i++)
		if (vmmx_buf_resize(buf, steps[i] * MiB))
			bail("vmmx_buf_resize(%zu MiB): %s", steps[i], vmmx_last_error());
	if (vmmx_buf_size(buf) != size)
		bail("mixed_buf: %zu MiB is not a step size", size / MiB);
	return buf;
}

static uint64_t rng = 0x243f6a8885a308d3ull;

static uint64_t rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* A random range of a buffer of @size: mostly a few MiB, now and then all of it. */
static void rnd_range(size_t size, size_t *off, size_t *len)
{
	uint64_t r = rnd();

	if (r % 32 == 0) {
		*off = 0;
		*len = size;
		return;
	}
	*off = (size_t)(rnd() % size);
	*len = 1 + (size_t)(rnd() % (6 * MiB));
	if (*len > size - *off)
		*len = size - *off;
}

/* The widened range of [off, off + len): whole chunks. */
static void widen(struct vmmx_buf *buf, const struct snap *s, size_t off, size_t len, size_t *lo,
		  size_t *hi)
{
	*lo = SIZE_MAX;
	*hi = 0;
	for (size_t i = 0; i < s->n; i++) {
		size_t a = off_of(buf, &s->c[i]), b = a + s->c[i].size;

		if (len && a < off + len && b > off) {
			*lo = a < *lo ? a : *lo;
			*hi = b > *hi ? b : *hi;
		}
	}
	if (*lo == SIZE_MAX)
		*lo = *hi = 0;
}

/* ---- 1. random migrations ---- */

static void random_migrations(void)
{
	static const char *const vars[] = {"VMMX_CHUNK_MAX=4MiB", "VMMX_DEVICE_LIMIT=20MiB", NULL};
	const size_t size = 32 * MiB;
	const int rounds = 200;
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf = mixed_buf(ctx, "device-first", size);
	struct vmmx_stats st0 = test_stats(ctx), st;
	size_t moved_total = 0, nmoved = 0, bad_data = 0, bad_check = 0, bad_list = 0, bad_err = 0;
	int ok_calls = 0, nomem = 0;
	struct snap a, b;

	diag("random migrations over %s", layout(buf));
	take(buf, &a);
	ok(a.n == 10, "mixed buffer: 10 chunks of 4 and 2 MiB (%zu)", a.n);
	is_err(0, test_fill(ctx, vmmx_buf_ptr(buf), 0, size, SEED), "test_fill: 32 MiB, once");
	for (int i = 0; i < rounds; i++) {
		struct vmmx_loc to = rnd() & 1 ? DEV : HOST;
		size_t off, len, moved = 12345, lo, hi, bad;
		const char *why;
		int err;

		rnd_range(size, &off, &len);
		take(buf, &a);
		err = vmmx_buf_migrate(buf, off, len, to, &moved);
		take(buf, &b);
		if (err == 0)
			ok_calls++;
		else if (err == -VMMX_ENOMEM && to.kind == VMMX_LOC_DEVICE)
			nomem++;
		else if (!bad_err++)
			diag("round %d: vmmx_buf_migrate(%zu, %zu, %s): %s: %s", i, off, len,
			     to.kind == VMMX_LOC_DEVICE ? "device" : "host", vmmx_strerror(err),
			     vmmx_last_error());
		why = consistent(buf, &a, &b, off, len, to, err, moved);
		if (why && !bad_list++)
			diag("round %d: migrate [%zu, +%zu) to %s (%s, moved %zu): %s; now %s", i,
			     off, len, to.kind == VMMX_LOC_DEVICE ? "device" : "host",
			     vmmx_strerror(err), moved, why, layout(buf));
		moved_total += moved;
		for (size_t k = 0; k < a.n; k++)
			nmoved += !loc_eq(a.c[k].loc, b.c[k].loc);
		/* The chunks that were moved, with test_check; everything, by memcmp. */
		widen(buf, &a, off, len, &lo, &hi);
		bad = hi > lo ? test_check(ctx, vmmx_buf_ptr(buf), lo, hi - lo, SEED) : SIZE_MAX;
		if (bad != SIZE_MAX && !bad_check++)
			diag("round %d: test_check: byte %zu wrong after migrating [%zu, +%zu) to "
			     "%s",
			     i, bad, off, len, to.kind == VMMX_LOC_DEVICE ? "device" : "host");
		bad = check_img(ctx, buf, size);
		if (bad != SIZE_MAX && !bad_data++)
			diag("round %d: byte %zu of the buffer wrong after migrating [%zu, +%zu)",
			     i, bad, off, len);
	}
	diag("%d migrations: %d succeeded, %d stopped at the device limit; %zu chunk moves",
	     rounds, ok_calls, nomem, nmoved);
	is_uint(0, bad_err, "vmmx_buf_migrate: only 0 or -VMMX_ENOMEM (device limit) in %d calls",
		rounds);
	ok(ok_calls > rounds / 2 && nomem > 0, "both outcomes were met (%d and %d)", ok_calls,
	   nomem);
	is_uint(0, bad_list,
		"chunk list, moved_p and vmmx_buf_residency agree after each of %d migrations",
		rounds);
	is_uint(0, bad_check, "test_check: the moved chunks hold the pattern after each migration");
	is_uint(0, bad_data, "the whole buffer holds the pattern after each migration");
	ok(test_check(ctx, vmmx_buf_ptr(buf), 0, size, SEED) == SIZE_MAX,
	   "test_check: the whole buffer at the end");
	st = test_stats(ctx);
	is_uint(nmoved, st.migrations - st0.migrations, "vmmx_stats: migrations counts %zu moves",
		nmoved);
	is_uint(moved_total, st.migrated_bytes - st0.migrated_bytes,
		"vmmx_stats: migrated_bytes is the sum of moved_p");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

/* ---- 2. widening, no-ops, stats, cache, locations, ranges, streams ---- */

static void basics(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=4MiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars), *other = test_ctx(vars);
	struct vmmx_buf *buf = mixed_buf(ctx, "device-first", 10 * MiB); /* 4 2 4 */
	struct vmmx_stats st0, st1, st;
	struct vmmx_residency r;
	struct vmmx_stream *s = NULL, *os = NULL;
	size_t moved;
	struct snap a;
	int err;

	is_string("D4 D2 D4", layout(buf), "three device chunks: 4, 2 and 4 MiB");
	is_err(0, fill_img(ctx, buf, 10 * MiB), "pattern written");
	st0 = test_stats(ctx);

	/* One byte of the middle chunk moves the chunk. */
	moved = 0;
	is_err(0, vmmx_buf_migrate(buf, 4 * MiB + 1, 1, HOST, &moved),
	       "vmmx_buf_migrate: one byte inside the 2 MiB chunk to host");
	is_uint(2 * MiB, moved, "moved_p: the whole chunk, 2 MiB");
	is_string("D4 H2 D4", layout(buf), "vmmx_buf_chunks: that chunk is on host");
	ok(!vmmx_buf_residency(buf, 4 * MiB, 2 * MiB, &r) && r.host == 2 * MiB && r.device == 0,
	   "vmmx_buf_residency: [4, 6) MiB in host memory");

	/* A range over two chunks, one of them there already. */
	st1 = test_stats(ctx);
	is_err(0, vmmx_buf_migrate(buf, 3 * MiB, 2 * MiB, HOST, &moved),
	       "vmmx_buf_migrate: [3, 5) MiB, over the first chunk and the host one");
	is_uint(4 * MiB, moved, "moved_p: only the first chunk moved (4 MiB)");
	st = test_stats(ctx);
	is_uint(1, st.driver_calls[VMMX_OP_CREATE] - st1.driver_calls[VMMX_OP_CREATE],
		"one handle created, for the one chunk that moved");
	is_string("H4 H2 D4", layout(buf), "vmmx_buf_chunks: both on host");

	/* Everything there already: nothing moves, no driver call at all. */
	st1 = test_stats(ctx);
	moved = 12345;
	is_err(0, vmmx_buf_migrate(buf, 0, 6 * MiB, HOST, &moved),
	       "vmmx_buf_migrate: chunks already on host");
	is_uint(0, moved, "moved_p: 0");
	st = test_stats(ctx);
	ok(!memcmp(st.driver_calls, st1.driver_calls, sizeof(st.driver_calls)),
	   "no driver call (no create, no reservation)");
	is_uint(st1.migrations, st.migrations, "vmmx_stats: no migration counted");
	moved = 12345;
	is_err(0, vmmx_buf_migrate(buf, 2 * MiB, 0, DEV, &moved), "vmmx_buf_migrate: length 0");
	is_uint(0, moved, "moved_p: 0 for length 0");
	is_err(0, vmmx_buf_migrate(buf, 0, 10 * MiB, HOST, NULL),
	       "vmmx_buf_migrate: whole buffer to host, moved_p NULL");
	is_string("H4 H2 H4", layout(buf), "vmmx_buf_chunks: all on host");
	ok(check_img(ctx, buf, 10 * MiB) == SIZE_MAX, "data intact on host");
	st = test_stats(ctx);
	is_uint(3, st.migrations - st0.migrations, "vmmx_stats: 3 migrations");
	is_uint(10 * MiB, st.migrated_bytes - st0.migrated_bytes, "vmmx_stats: 10 MiB migrated");
	ok(st.device_bytes == 0 && st.host_bytes == 10 * MiB,
	   "vmmx_stats: device_bytes 0, host_bytes 10 MiB");

	/* The way back takes the handles the way out left in the cache. */
	st1 = test_stats(ctx);
	is_err(0, vmmx_buf_migrate(buf, 0, 10 * MiB, DEV, &moved),
	       "vmmx_buf_migrate: whole buffer back to the device");
	st = test_stats(ctx);
	is_uint(10 * MiB, moved, "moved_p: 10 MiB");
	is_uint(3, st.cache_hits - st1.cache_hits, "vmmx_stats: 3 cache hits on the way back");
	is_uint(0, st.driver_calls[VMMX_OP_CREATE] - st1.driver_calls[VMMX_OP_CREATE],
		"no handle created on the way back");
	is_err(0, vmmx_buf_migrate(buf, 0, 10 * MiB, HOST, &moved), "and out again");
	st1 = test_stats(ctx);
	ok(st1.driver_calls[VMMX_OP_CREATE] == st.driver_calls[VMMX_OP_CREATE] &&
		   st1.cache_hits - st.cache_hits == 3,
	   "the second trip out reuses the host handles too");
	ok(check_img(ctx, buf, 10 * MiB) == SIZE_MAX, "data intact after the round trips");

	/* Host NUMA node 0: another location kind, a move too. */
	err = vmmx_buf_migrate(buf, 0, 4 * MiB, (struct vmmx_loc){ VMMX_LOC_HOST_NUMA, 0 },
			       &moved);
	if (err == -VMMX_EINVAL || err == -VMMX_ENOTSUP) {
		skip("no HOST_NUMA location here: %s", vmmx_last_error());
		skip("no HOST_NUMA location here");
	} else {
		is_err(0, err, "vmmx_buf_migrate: host to host-numa:0");
		ok(!strcmp(layout(buf), "N4 H2 H4") && moved == 4 * MiB &&
			   check_img(ctx, buf, 10 * MiB) == SIZE_MAX,
		   "the chunk is a host-numa chunk, data intact (%s)", layout(buf));
	}
	vmmx_buf_migrate(buf, 0, 10 * MiB, DEV, NULL);

	/* Locations the context cannot use, ranges past the size. */
	take(buf, &a);
	moved = 12345;
	is_err(-VMMX_EINVAL,
	       vmmx_buf_migrate(buf, 0, MiB, (struct vmmx_loc){ VMMX_LOC_DEVICE, 5 }, &moved),
	       "vmmx_buf_migrate: device 5 (one device here)");
	like(vmmx_last_error(), "device:5", "the message names the location");
	is_uint(0, moved, "moved_p: 0 on failure");
	is_err(-VMMX_EINVAL,
	       vmmx_buf_migrate(buf, 0, MiB, (struct vmmx_loc){ VMMX_LOC_NONE, 0 }, NULL),
	       "vmmx_buf_migrate: kind NONE");
	is_err(-VMMX_EINVAL,
	       vmmx_buf_migrate(buf, 0, MiB, (struct vmmx_loc){ VMMX_LOC_DEVICE, -1 }, NULL),
	       "vmmx_buf_migrate: device -1");
	is_err(-VMMX_EINVAL,
	       vmmx_buf_migrate(buf, 0, MiB, (struct vmmx_loc){ (enum vmmx_loc_kind)9, 0 }, NULL),
	       "vmmx_buf_migrate: an unknown kind");
	is_err(-VMMX_EINVAL, vmmx_buf_migrate(NULL, 0, MiB, HOST, NULL),
	       "vmmx_buf_migrate: NULL buffer");
	moved = 12345;
	is_err(-VMMX_ERANGE, vmmx_buf_migrate(buf, 10 * MiB + 1, 0, HOST, &moved),
	       "vmmx_buf_migrate: offset past the size");
	like(vmmx_last_error(), "past the size", "the message says the range goes past the size");
	is_uint(0, moved, "moved_p: 0");
	is_err(-VMMX_ERANGE, vmmx_buf_migrate(buf, 8 * MiB, 2 * MiB + 1, HOST, NULL),
	       "vmmx_buf_migrate: a range one byte past the size");
	is_err(-VMMX_ERANGE, vmmx_buf_migrate(buf, 4 * MiB, SIZE_MAX, HOST, NULL),
	       "vmmx_buf_migrate: a length that wraps");
	is_err(0, vmmx_buf_migrate(buf, 10 * MiB, 0, HOST, NULL),
	       "vmmx_buf_migrate: the empty range at the end");
	{
		struct snap b;

		take(buf, &b);
		ok(!consistent(buf, &a, &b, 0, 0, HOST, 0, 0),
		   "refused calls moved nothing (%s)", layout(buf));
	}

	/* Streams. */
	is_err(0, vmmx_stream_create(ctx, &s), "vmmx_stream_create");
	ok(vmmx_stream_handle(s) != NULL, "vmmx_stream_handle: not NULL");
	ok(vmmx_stream_handle(NULL) == NULL, "vmmx_stream_handle(NULL): NULL");
	is_err(-VMMX_EINVAL, vmmx_stream_create(ctx, NULL), "vmmx_stream_create(NULL)");
	st1 = test_stats(ctx);
	moved = 0;
	is_err(0, vmmx_buf_migrate_on(buf, 0, 6 * MiB, HOST, s, &moved),
	       "vmmx_buf_migrate_on: [0, 6) MiB to host on a stream");
	is_uint(6 * MiB, moved, "moved_p: 6 MiB");
	st = test_stats(ctx);
	ok(st.driver_calls[VMMX_OP_SYNC] > st1.driver_calls[VMMX_OP_SYNC],
	   "vmmx_buf_migrate_on waited on the stream");
	is_string("H4 H2 D4", layout(buf), "vmmx_buf_chunks: moved");
	ok(check_img(ctx, buf, 10 * MiB) == SIZE_MAX, "data intact after vmmx_buf_migrate_on");
	is_err(0, vmmx_stream_sync(s), "vmmx_stream_sync");
	is_err(-VMMX_EINVAL, vmmx_stream_sync(NULL), "vmmx_stream_sync(NULL)");
	moved = 12345;
	is_err(-VMMX_EINVAL, vmmx_buf_migrate_on(buf, 0, 6 * MiB, DEV, NULL, &moved),
	       "vmmx_buf_migrate_on: NULL stream");
	like(vmmx_last_error(), "NULL stream", "the message says so");
	if (!is_uint(0, moved, "vmmx_buf_migrate_on: moved_p 0 on failure (NULL stream)"))
		diag("lib/migrate.c vmmx_buf_migrate_on(): include/vmmx.h says moved_p is written "
		     "on failure too, the NULL-stream refusal included");
	if (vmmx_stream_create(other, &os))
		bail("vmmx_stream_create: %s", vmmx_last_error());
	is_err(-VMMX_EINVAL, vmmx_buf_migrate_on(buf, 0, 6 * MiB, DEV, os, NULL),
	       "vmmx_buf_migrate_on: a stream of another context");
	like(vmmx_last_error(), "another context", "the message says so");
	is_string("H4 H2 D4", layout(buf), "refused calls moved nothing");
	vmmx_stream_destroy(os);
	vmmx_stream_destroy(s);
	vmmx_stream_destroy(NULL);
	ok(1, "vmmx_stream_destroy(NULL) is a no-op");

	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(other);
	vmmx_ctx_destroy(ctx);
}

/* ---- 3. a full device ---- */

static void full_device(void)
{
	static const char *const vars[] = {"VMMX_CHUNK_MAX=4MiB", "VMMX_DEVICE_LIMIT=10MiB", NULL};
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf = mixed_buf(ctx, "host", 16 * MiB); /* H4 H2 H4 H2 H4 */
	struct vmmx_stats st;
	size_t moved = 0;
	struct snap a, b;

	is_string("H4 H2 H4 H2 H4", layout(buf), "a host buffer of 16 MiB");
	is_err(0, fill_img(ctx, buf, 16 * MiB), "pattern written");
	take(buf, &a);
	is_err(-VMMX_ENOMEM, vmmx_buf_migrate(buf, 0, 16 * MiB, DEV, &moved),
	       "vmmx_buf_migrate: 16 MiB into a device limited to 10 MiB");
	like(vmmx_last_error(), "no room on device:0", "the message says there is no room");
	is_uint(10 * MiB, moved, "moved_p: 10 MiB, as far as it got");
	is_string("D4 D2 D4 H2 H4", layout(buf), "vmmx_buf_chunks: the first 10 MiB moved");
	take(buf, &b);
	ok(!consistent(buf, &a, &b, 0, 16 * MiB, DEV, -VMMX_ENOMEM, moved),
	   "chunk list, residency and moved_p agree");
	ok(check_img(ctx, buf, 16 * MiB) == SIZE_MAX, "data intact");
	st = test_stats(ctx);
	ok(st.device_bytes == 10 * MiB && st.host_bytes == 6 * MiB,
	   "vmmx_stats: 10 MiB on the device, 6 in host memory");
	moved = 12345;
	is_err(-VMMX_ENOMEM, vmmx_buf_migrate(buf, 10 * MiB, 2 * MiB, DEV, &moved),
	       "vmmx_buf_migrate: the next chunk does not fit either");
	is_uint(0, moved, "moved_p: 0");
	is_string("D4 D2 D4 H2 H4", layout(buf), "nothing moved");
	ok(check_img(ctx, buf, 16 * MiB) == SIZE_MAX, "data intact");
	/* Room made by moving a chunk out: the next one fits. */
	is_err(0, vmmx_buf_migrate(buf, 4 * MiB, 2 * MiB, HOST, &moved),
	       "vmmx_buf_migrate: one 2 MiB chunk out");
	is_err(0, vmmx_buf_migrate(buf, 10 * MiB, 2 * MiB, DEV, &moved),
	       "vmmx_buf_migrate: now a 2 MiB chunk fits");
	is_string("D4 H2 D4 D2 H4", layout(buf), "vmmx_buf_chunks: swapped");
	ok(check_img(ctx, buf, 16 * MiB) == SIZE_MAX, "data intact");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

/* ---- 4. the fault sweep ---- */

static const char *const sweep_vars[] = { "VMMX_CHUNK_MAX=4MiB", "VMMX_DEVICE_LIMIT=12MiB",
					   NULL };

struct result {
	int inconsistent;       /* a failed call broke the contract, or data was lost */
	int failed_calls;       /* public calls that returned an unexpected error */
	int first_diag;
};

static void data_ok(struct vmmx_ctx *ctx, struct vmmx_buf *buf, struct result *res,
		    const char *when)
{
	size_t bad = check_img(ctx, buf, vmmx_buf_size(buf));

	/* The check may meet the armed fault (a copy): then check again. */
	if (bad == SIZE_MAX - 1) {
		res->failed_calls++;
		bad = check_img(ctx, buf, vmmx_buf_size(buf));
	}
	if (bad != SIZE_MAX) {
		if (!res->first_diag++)
			diag("data lost at byte %zu %s", bad, when);
		res->inconsistent++;
	}
}

static void step_migrate(struct vmmx_ctx *ctx, struct vmmx_buf *buf, size_t off, size_t len,
			 struct vmmx_loc to, struct vmmx_stream *s, struct result *res)
{
	size_t moved = 12345;
	const char *why;
	struct snap a, b;
	int err;

	take(buf, &a);
	err = s ? vmmx_buf_migrate_on(buf, off, len, to, s, &moved)
		: vmmx_buf_migrate(buf, off, len, to, &moved);
	take(buf, &b);
	/* -VMMX_ENOMEM at the device limit is the scenario's own, not a fault. */
	if (err && !(err == -VMMX_ENOMEM && !strstr(vmmx_last_error(), "injected")))
		res->failed_calls++;
	why = consistent(buf, &a, &b, off, len, to, err, moved);
	if (why) {
		if (!res->first_diag++)
			diag("migrate [%zu, +%zu) to %s: %s: %s (%s)", off, len,
			     to.kind == VMMX_LOC_DEVICE ? "device" : "host", vmmx_strerror(err),
			     why, layout(buf));
		res->inconsistent++;
	}
	data_ok(ctx, buf, res, "after a migration");
}

static void sweep_scenario(struct vmmx_ctx *ctx, struct result *res)
{
	struct vmmx_buf *buf = NULL;
	struct vmmx_stream *s = NULL;
	size_t size;

	if (vmmx_buf_create(ctx, 32 * MiB, "device-first", &buf)) {
		res->failed_calls++;
		if (vmmx_buf_create(ctx, 32 * MiB, "device-first", &buf)) {
			res->inconsistent++;
			return;
		}
	}
	/* 12 MiB on the device, 4 in host memory; retried if a fault hits the grow. */
	if (vmmx_buf_resize(buf, 16 * MiB)) {
		res->failed_calls++;
		if (vmmx_buf_size(buf) != 0)
			res->inconsistent++;
		if (vmmx_buf_resize(buf, 16 * MiB)) {
			res->inconsistent++;
			vmmx_buf_destroy(buf);
			return;
		}
	}
	size = vmmx_buf_size(buf);
	if (fill_img(ctx, buf, size)) {
		res->failed_calls++;
		if (fill_img(ctx, buf, size))
			res->inconsistent++;
	}
	step_migrate(ctx, buf, 0, 6 * MiB, HOST, NULL, res);          /* two chunks out */
	step_migrate(ctx, buf, 10 * MiB, 6 * MiB, DEV, NULL, res);    /* the host one in */
	step_migrate(ctx, buf, 0, size, HOST, NULL, res);             /* all out */
	step_migrate(ctx, buf, 0, size, DEV, NULL, res);              /* 12 of 16 MiB fit */
	if (vmmx_stream_create(ctx, &s))
		res->failed_calls++;
	else
		step_migrate(ctx, buf, 2 * MiB, 8 * MiB, HOST, s, res);
	vmmx_stream_destroy(s);
	if (vmmx_buf_resize(buf, 6 * MiB))
		res->failed_calls++;
	data_ok(ctx, buf, res, "after a shrink");
	vmmx_buf_destroy(buf);
	/* Cached chunks go back to the driver: the release calls are swept too. */
	vmmx_ctx_trim(ctx, 0);
}

static const enum vmmx_op sweep_ops[] = {
	VMMX_OP_CREATE, VMMX_OP_MAP,  VMMX_OP_UNMAP,   VMMX_OP_SET_ACCESS, VMMX_OP_COPY,
	VMMX_OP_SYNC,   VMMX_OP_RELEASE, VMMX_OP_RESERVE, VMMX_OP_UNRESERVE,
};
#define NSWEEP (sizeof(sweep_ops) / sizeof(sweep_ops[0]))

static void fault_sweep(void)
{
	struct result res = { 0, 0, 0 };
	struct vmm_counts base;
	struct vmmx_ctx *ctx;

	/* A clean run counts the calls to sweep over. */
	ctx = test_ctx(sweep_vars);
	sweep_scenario(ctx, &res);
	vmm_counts(vmmx__ctx_vmm(ctx), &base);
	ok(res.failed_calls == 0 && res.inconsistent == 0,
	   "fault sweep: the migration scenario runs clean without faults");
	ok(test_no_leaks(ctx), "fault sweep: and leaks nothing");
	vmmx_ctx_destroy(ctx);

	for (size_t i = 0; i < NSWEEP; i++) {
		uint64_t n = base.calls[sweep_ops[i]], hit = 0, leaks = 0, bad = 0, errors = 0;
		const char *name = vmm_op_name(sweep_ops[i]);

		for (uint64_t k = 1; k <= n; k++) {
			struct vmm_counts c;

			memset(&res, 0, sizeof(res));
			ctx = test_ctx(sweep_vars);
			vmm_fault_arm(vmmx__ctx_vmm(ctx), sweep_ops[i], k, 0);
			sweep_scenario(ctx, &res);
			vmm_counts(vmmx__ctx_vmm(ctx), &c);
			hit += c.injected;
			if (res.inconsistent) {
				diag("%s #%llu: %d inconsistencies", name, (unsigned long long)k,
				     res.inconsistent);
				bad++;
			}
			errors += res.failed_calls > 0;
			if (!test_no_leaks(ctx)) {
				diag("%s #%llu leaked", name, (unsigned long long)k);
				leaks++;
			}
			vmmx_ctx_destroy(ctx);
		}
		ok(n > 0, "the scenario makes %llu %s calls", (unsigned long long)n, name);
		is_uint(n, hit, "every one of the %s calls was failed once", name);
		is_uint(0, bad, "failing a %s left every chunk where it was or moved, data intact",
			name);
		is_uint(0, leaks, "failing a %s never leaked a reservation, handle or mapping",
			name);
		diag("%s: %llu runs, %llu reported an error to the caller", name,
		     (unsigned long long)n, (unsigned long long)errors);
	}
}

/* ---- 5. the pipeline: a migration of several batches, failed at chosen calls ---- */

#define BIG_CHUNK (64 * MiB)
#define BIG_SIZE (6 * BIG_CHUNK) /* two batches of at most 256 MiB: 4 chunks, then 2 */

/* A marker at the start of every MiB: its own offset and a tag. */
static int big_mark(struct vmmx_ctx *ctx, struct vmmx_buf *buf)
{
	for (size_t off = 0; off < BIG_SIZE; off += MiB) {
		uint64_t m[2] = { off, 0x6d61726b65722121ull ^ off };
		int err = vmmx_memcpy(ctx, (char *)vmmx_buf_ptr(buf) + off, m, sizeof(m));

		if (err)
			return err;
	}
	return 0;
}

static bool big_marks_ok(struct vmmx_ctx *ctx, struct vmmx_buf *buf)
{
	for (size_t off = 0; off < BIG_SIZE; off += MiB) {
		uint64_t m[2] = { 0, 0 };

		if (vmmx_memcpy(ctx, m, (char *)vmmx_buf_ptr(buf) + off, sizeof(m)) ||
		    m[0] != off || m[1] != (0x6d61726b65722121ull ^ off)) {
			diag("marker of MiB %zu wrong", off / MiB);
			return false;
		}
	}
	return true;
}

static void pipeline(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=64MiB", NULL };
	static const enum vmmx_op ops[] = { VMMX_OP_CREATE, VMMX_OP_MAP,  VMMX_OP_SET_ACCESS,
					    VMMX_OP_COPY,   VMMX_OP_SYNC, VMMX_OP_UNMAP };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf;
	struct vmm_counts c0, c1;
	uint64_t calls[VMMX_OP_COUNT];
	size_t moved = 0;
	int runs = 0, bad = 0, failed = 0, hits = 0;
	struct snap a, b;

	if (vmmx_buf_create(ctx, BIG_SIZE, "device", &buf) || vmmx_buf_resize(buf, BIG_SIZE))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	take(buf, &a);
	ok(a.n == 6, "a 384 MiB buffer of 64 MiB chunks (%s)", layout(buf));
	is_err(0, big_mark(ctx, buf), "markers written");
	vmmx_ctx_trim(ctx, 0);
	vmm_counts(vmmx__ctx_vmm(ctx), &c0);
	is_err(0, vmmx_buf_migrate(buf, 0, BIG_SIZE, HOST, &moved),
	       "vmmx_buf_migrate: 384 MiB to host, in two batches");
	vmm_counts(vmmx__ctx_vmm(ctx), &c1);
	ok(moved == BIG_SIZE && !strcmp(layout(buf), "H64 H64 H64 H64 H64 H64") &&
		   big_marks_ok(ctx, buf),
	   "all moved, markers intact");
	if (vmmx_buf_migrate(buf, 0, BIG_SIZE, DEV, NULL))
		bail("vmmx_buf_migrate back: %s", vmmx_last_error());

	memcpy(calls, c1.calls, sizeof(calls));
	for (size_t i = 0; i < VMMX_OP_COUNT; i++)
		calls[i] -= c0.calls[i];
	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		uint64_t n = calls[ops[i]];
		uint64_t ks[3] = { 1, n / 2 + 1, n };

		for (int j = 0; j < 3; j++) {
			const char *why;
			int err;

			if (!n || (j && ks[j] == ks[j - 1]) || ks[j] > n)
				continue;
			runs++;
			/* No cached handles: every run makes the calls the clean one made. */
			vmmx_ctx_trim(ctx, 0);
			take(buf, &a);
			vmm_counts(vmmx__ctx_vmm(ctx), &c0);
			vmm_fault_arm(vmmx__ctx_vmm(ctx), ops[i], ks[j], 0);
			moved = 12345;
			err = vmmx_buf_migrate(buf, 0, BIG_SIZE, HOST, &moved);
			vmm_fault_disarm_all(vmmx__ctx_vmm(ctx));
			vmm_counts(vmmx__ctx_vmm(ctx), &c1);
			hits += c1.injected > c0.injected;
			take(buf, &b);
			failed += err != 0;
			why = consistent(buf, &a, &b, 0, BIG_SIZE, HOST, err, moved);
			if (why || !big_marks_ok(ctx, buf)) {
				diag("%s #%llu of %llu: %s: %s (%s)", vmm_op_name(ops[i]),
				     (unsigned long long)ks[j], (unsigned long long)n,
				     vmmx_strerror(err), why ? why : "markers wrong", layout(buf));
				bad++;
			}
			/* Back to the device, no fault, for the next run. */
			if (vmmx_buf_migrate(buf, 0, BIG_SIZE, DEV, NULL))
				bail("vmmx_buf_migrate back: %s", vmmx_last_error());
		}
	}
	/* Some failures are teardown steps that are deferred, not reported. */
	diag("pipeline: %d runs with a failed call, %d reported it", runs, failed);
	ok(runs >= 12 && hits == runs,
	   "calls failed in the first, middle and last position of each kind (%d of %d hit)",
	   hits, runs);
	is_int(0, bad, "each failure left every chunk where it was or moved, markers intact");
	ok(big_marks_ok(ctx, buf), "markers intact at the end");

	/* A failed wait for the copies: the GPU may still be copying, so the
	 * staging memory is unmapped only after a wait that worked (on the
	 * H100 an unmap under a running copy ended the context). */
	vmmx_ctx_trim(ctx, 0);
	take(buf, &a);
	vmm_counts(vmmx__ctx_vmm(ctx), &c0);
	vmm_fault_arm_n(vmmx__ctx_vmm(ctx), VMMX_OP_SYNC, 1, 2, 0);
	{
		int err = vmmx_buf_migrate(buf, 0, BIG_SIZE, HOST, &moved);

		vmm_fault_disarm_all(vmmx__ctx_vmm(ctx));
		vmm_counts(vmmx__ctx_vmm(ctx), &c1);
		take(buf, &b);
		ok(err == -VMMX_EFAULTINJ && !consistent(buf, &a, &b, 0, BIG_SIZE, HOST, err, moved) &&
			   big_marks_ok(ctx, buf),
		   "a migration whose wait failed twice fails cleanly, markers intact");
		ok(c1.calls[VMMX_OP_SYNC] - c0.calls[VMMX_OP_SYNC] >= 3,
		   "and it waited again until a wait worked (%llu waits)",
		   (unsigned long long)(c1.calls[VMMX_OP_SYNC] - c0.calls[VMMX_OP_SYNC]));
	}
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "and nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 6. readers while chunks move ---- */

struct reader {
	pthread_t t;
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf;
	size_t size;
	int *stop;
	uint64_t seed;
	unsigned long calls, bad;
	char first[160];
};

static void reader_bad(struct reader *r, const char *what)
{
	if (!r->bad++)
		snprintf(r->first, sizeof(r->first), "%s", what);
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	char *base = vmmx_buf_ptr(r->buf);

	while (!__atomic_load_n(r->stop, __ATOMIC_ACQUIRE)) {
		struct vmmx_chunk_info c[MAXC], info;
		struct vmmx_residency res;
		size_t n = 0, at, sum = 0;

		r->seed ^= r->seed << 13;
		r->seed ^= r->seed >> 7;
		r->seed ^= r->seed << 17;
		at = (size_t)(r->seed % r->size);

		if (vmmx_buf_chunks(r->buf, c, MAXC, &n) || n == 0 || n > MAXC) {
			reader_bad(r, "vmmx_buf_chunks failed");
		} else {
			for (size_t i = 0; i < n; i++) {
				if ((char *)c[i].base != base + sum || c[i].buf != r->buf ||
				    (c[i].loc.kind != VMMX_LOC_DEVICE &&
				     c[i].loc.kind != VMMX_LOC_HOST))
					reader_bad(r, "vmmx_buf_chunks: chunks not contiguous, or "
						      "a bad location");
				sum += c[i].size;
			}
			if (sum < r->size)
				reader_bad(r, "vmmx_buf_chunks: chunks do not cover the size");
		}
		if (vmmx_buf_residency(r->buf, 0, r->size, &res) ||
		    res.device + res.host != r->size)
			reader_bad(r, "vmmx_buf_residency: device + host is not the size");
		if (vmmx_lookup(r->ctx, base + at, &info) || info.buf != r->buf ||
		    (char *)info.base > base + at || (char *)info.base + info.size <= base + at ||
		    (info.loc.kind != VMMX_LOC_DEVICE && info.loc.kind != VMMX_LOC_HOST))
			reader_bad(r, "vmmx_lookup: a chunk that does not hold the address");
		r->calls += 3;
	}
	return NULL;
}

static void readers(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=4MiB", NULL };
	const size_t size = 32 * MiB;
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf = mixed_buf(ctx, "device-first", size);
	struct reader r[4];
	int stop = 0, errs = 0, moves = 0;
	unsigned long calls = 0, bad = 0;

	if (fill_img(ctx, buf, size))
		bail("fill: %s", vmmx_last_error());
	for (int i = 0; i < 4; i++) {
		r[i] = (struct reader){ .ctx = ctx, .buf = buf, .size = size, .stop = &stop,
					.seed = 0x9e3779b97f4a7c15ull * (unsigned)(i + 1) };
		if (pthread_create(&r[i].t, NULL, reader_main, &r[i]))
			bail("pthread_create failed");
	}
	for (int i = 0; i < 200; i++) {
		size_t off, len, moved;

		rnd_range(size, &off, &len);
		if (vmmx_buf_migrate(buf, off, len, rnd() & 1 ? DEV : HOST, &moved))
			errs++;
		moves += moved > 0;
	}
	__atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
	for (int i = 0; i < 4; i++) {
		pthread_join(r[i].t, NULL);
		calls += r[i].calls;
		bad += r[i].bad;
		if (r[i].bad)
			diag("reader %d: %lu bad answers, first: %s", i, r[i].bad, r[i].first);
	}
	diag("4 readers made %lu calls during 200 migrations (%d moved something)", calls, moves);
	is_int(0, errs, "vmmx_buf_migrate: 200 migrations beside 4 readers succeeded");
	ok(calls > 0 && moves > 50, "the readers ran while chunks moved");
	is_uint(0, bad,
		"vmmx_lookup, vmmx_buf_residency and vmmx_buf_chunks: self-consistent answers");
	ok(check_img(ctx, buf, size) == SIZE_MAX, "data intact after the concurrent run");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

int main(void)
{
	image = malloc(IMAGE_SIZE);
	if (!image)
		bail("out of memory");
	for (size_t i = 0; i < IMAGE_SIZE; i++)
		image[i] = test_pattern_byte(i, SEED);

	plan(10 + 63 + 17 + 2 + 4 * NSWEEP + 10 + 4);
	random_migrations();
	basics();
	full_device();
	fault_sweep();
	pipeline();
	readers();
	free(image);
	return tap_done();
}
