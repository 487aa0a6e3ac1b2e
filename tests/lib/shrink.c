// SPDX-License-Identifier: MIT
/*
 * shrink.c - the defaults a user meets first: a shrink gives back the
 * chunks past the new size and keeps the chunk it cuts through whole (no
 * byte below the size is unmapped), vmmx_buf_trim() then replaces that
 * chunk by a handle of the kept part (on the same location, or through host
 * memory and back at a limit), the device keeps
 * a headroom free for the CUDA runtime, a grow is one handle, and chunks
 * moved to host are granted to the GPU only unless asked, and
 * VMMX_ADVISE_CPU grants them the CPU.
 *
 * The sim parts fill the sim's device; on a GPU the same behaviour is
 * checked under limits, with small buffers.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

static const struct vmmx_loc DEV = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };

/* The buffer's chunks, or -1; *@dev and *@host get the bytes per kind. */
static long chunks(struct vmmx_buf *buf, size_t *dev, size_t *host)
{
	struct vmmx_chunk_info c[64];
	size_t n;

	*dev = *host = 0;
	if (vmmx_buf_chunks(buf, c, 64, &n) || n > 64)
		return -1;
	for (size_t i = 0; i < n; i++)
		*(c[i].loc.kind == VMMX_LOC_DEVICE ? dev : host) += c[i].size;
	return (long)n;
}

/*
 * A device-first buffer fills the sim device in one chunk; a shrink to
 * 2 MiB keeps that chunk whole (slack, still charged: a device buffer
 * cannot grow yet), and a trim hands the memory back, so that the device
 * buffer can grow by 16 MiB afterwards.
 */
static void fill_then_shrink(void)
{
	static const char *const v[] = { "VMMX_SIM_DEVICE_MEM=64MiB", "VMMX_HEADROOM=0", NULL };
	struct vmmx_ctx *ctx = test_ctx(v);
	struct vmmx_buf *a = NULL, *b = NULL;
	struct vmmx_stats st = { .size = sizeof(st) };
	size_t dev, host;

	is_err(0, vmmx_buf_create(ctx, 256 * MiB, "device-first", &a), "vmmx_buf_create device-first");
	is_err(0, vmmx_buf_resize(a, 64 * MiB), "vmmx_buf_resize fills the 64 MiB device");
	is_int(1, chunks(a, &dev, &host), "vmmx_buf_chunks: one chunk");
	is_uint(64 * MiB, dev, "vmmx_buf_chunks: all of it on the device");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(a), 0, 64 * MiB, 9), "test_fill");

	is_err(0, vmmx_buf_resize(a, 2 * MiB), "vmmx_buf_resize shrinks to 2 MiB");
	is_uint(2 * MiB, vmmx_buf_size(a), "vmmx_buf_size: 2 MiB");
	is_int(1, chunks(a, &dev, &host), "vmmx_buf_chunks: one chunk after the shrink");
	is_uint(64 * MiB, dev, "vmmx_buf_chunks: the cut chunk stays whole");
	vmmx_stats_get(ctx, &st);
	is_uint(62 * MiB, st.slack_bytes, "vmmx_stats_get: 62 MiB of slack past the size");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 2 * MiB, 9),
		"vmmx_buf_resize: the kept 2 MiB are intact");
	is_err(0, vmmx_buf_create(ctx, 16 * MiB, "device", &b), "vmmx_buf_create device");
	is_err(-VMMX_ENOMEM, vmmx_buf_resize(b, 16 * MiB),
	       "vmmx_buf_resize: the slack is still charged: no room for a device buffer");

	is_err(0, vmmx_buf_trim(a), "vmmx_buf_trim");
	is_int(1, chunks(a, &dev, &host), "vmmx_buf_chunks: one chunk after the trim");
	is_uint(2 * MiB, dev, "vmmx_buf_chunks: the cut chunk was replaced by a 2 MiB handle");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 2 * MiB, 9),
		"vmmx_buf_trim: the kept 2 MiB are intact");
	vmmx_stats_get(ctx, &st);
	is_uint(2 * MiB, st.device_bytes, "vmmx_stats_get: 2 MiB mapped on the device");
	is_uint(0, st.slack_bytes, "vmmx_stats_get: no slack left");
	is_err(0, vmmx_buf_trim(a), "vmmx_buf_trim again: nothing to do");

	is_err(0, vmmx_buf_resize(b, 16 * MiB),
	       "vmmx_buf_resize: a device buffer grows by 16 MiB into what the shrink gave back");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 2 * MiB, 9),
		"the first buffer's data is still intact");
	vmmx_buf_destroy(b);
	vmmx_buf_destroy(a);
	vmmx_ctx_destroy(ctx);
}

/*
 * At VMMX_DEVICE_LIMIT the device cannot hold the old and the new handle at
 * once: a trim takes the kept part through a host chunk and migrates it
 * home, and the limit holds.  Runs on any backend.
 */
static void shrink_at_limit(void)
{
	static const char *const v[] = { "VMMX_DEVICE_LIMIT=32MiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(v);
	struct vmmx_ctx_info ci = { .size = sizeof(ci) };
	struct vmmx_buf *a = NULL;
	struct vmmx_stats st = { .size = sizeof(st) };
	size_t dev, host;

	is_err(0, vmmx_buf_create(ctx, 64 * MiB, "device", &a), "vmmx_buf_create device");
	is_err(0, vmmx_buf_resize(a, 32 * MiB), "vmmx_buf_resize to the 32 MiB limit");
	is_int(1, chunks(a, &dev, &host), "one 32 MiB chunk");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(a), 0, 32 * MiB, 3), "test_fill");
	is_err(0, vmmx_buf_resize(a, 6 * MiB), "vmmx_buf_resize to 6 MiB at the limit");
	is_int(1, chunks(a, &dev, &host), "vmmx_buf_chunks: one chunk after the shrink");
	is_uint(32 * MiB, dev, "vmmx_buf_chunks: the cut chunk stays whole");
	is_err(0, vmmx_buf_trim(a), "vmmx_buf_trim at the limit");
	is_int(1, chunks(a, &dev, &host), "vmmx_buf_chunks: one chunk after the trim");
	is_uint(6 * MiB, dev, "vmmx_buf_chunks: 6 MiB on the device, the rest given back");
	is_uint(0, host, "vmmx_buf_chunks: none left in host memory");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 6 * MiB, 3),
		"the kept 6 MiB are intact after going through host memory");
	vmmx_stats_get(ctx, &st);
	vmmx_ctx_query(ctx, &ci);
	ok(st.device_bytes == 6 * MiB && st.host_bytes == 0 && ci.device_limit == 32 * MiB,
	   "vmmx_stats_get: 6 MiB mapped on the device (%llu)", (unsigned long long)st.device_bytes);
	is_err(0, vmmx_buf_resize(a, 32 * MiB), "vmmx_buf_resize grows back to the limit");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 6 * MiB, 3), "data intact");
	vmmx_buf_destroy(a);
	vmmx_ctx_destroy(ctx);
}

/* A shrink through a chunk that holds several grows' worth, on both kinds
 * of location; then shrinks that end on chunk boundaries. */
static void cut_each_location(void)
{
	static const char *const v[] = { "VMMX_CACHE_LIMIT=0", NULL };
	static const char *const pol[] = { "device", "host" };
	struct vmmx_ctx *ctx = test_ctx(v);

	for (int p = 0; p < 2; p++) {
		struct vmmx_buf *a = NULL;
		struct vmmx_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
		size_t dev, host;

		if (vmmx_buf_create(ctx, 64 * MiB, pol[p], &a)) {
			bail("vmmx_buf_create %s: %s", pol[p], vmmx_last_error());
		}
		is_err(0, vmmx_buf_resize(a, 24 * MiB), "%s: vmmx_buf_resize to 24 MiB", pol[p]);
		is_err(0, vmmx_buf_resize(a, 40 * MiB), "%s: vmmx_buf_resize to 40 MiB", pol[p]);
		is_int(2, chunks(a, &dev, &host), "%s: two chunks, one per grow", pol[p]);
		is_err(0, test_fill(ctx, vmmx_buf_ptr(a), 0, 40 * MiB, 5), "%s: test_fill", pol[p]);
		vmmx_stats_get(ctx, &st0);
		is_err(0, vmmx_buf_resize(a, 30 * MiB), "%s: vmmx_buf_resize to 30 MiB cuts the second chunk",
		       pol[p]);
		vmmx_stats_get(ctx, &st1);
		is_int(2, chunks(a, &dev, &host), "%s: still two chunks", pol[p]);
		is_uint(40 * MiB, dev + host, "%s: the cut chunk stays whole", pol[p]);
		is_uint(st0.driver_calls[VMMX_OP_COPY], st1.driver_calls[VMMX_OP_COPY],
			"%s: the shrink copied nothing", pol[p]);
		is_uint(st0.driver_calls[VMMX_OP_UNMAP], st1.driver_calls[VMMX_OP_UNMAP],
			"%s: the shrink unmapped nothing", pol[p]);
		is_uint(10 * MiB, st1.slack_bytes, "%s: 10 MiB of slack", pol[p]);
		is_err(0, vmmx_buf_trim(a), "%s: vmmx_buf_trim", pol[p]);
		vmmx_stats_get(ctx, &st0);
		is_int(2, chunks(a, &dev, &host), "%s: two chunks after the trim", pol[p]);
		is_uint(30 * MiB, dev + host, "%s: 30 MiB mapped, none past the size", pol[p]);
		is_uint(30 * MiB, p ? st0.host_bytes : st0.device_bytes,
			"%s: vmmx_stats_get agrees", pol[p]);
		ok(st0.driver_calls[VMMX_OP_COPY] > st1.driver_calls[VMMX_OP_COPY],
		   "%s: the kept part was copied by the driver, within its location", pol[p]);
		is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(a), 0, 30 * MiB, 5),
			"%s: data below the new size intact", pol[p]);
		is_err(0, vmmx_buf_resize(a, 24 * MiB), "%s: vmmx_buf_resize to a chunk boundary", pol[p]);
		is_int(1, chunks(a, &dev, &host), "%s: one chunk left", pol[p]);
		is_err(0, vmmx_buf_resize(a, 0), "%s: vmmx_buf_resize to 0", pol[p]);
		is_int(0, chunks(a, &dev, &host), "%s: no chunk left", pol[p]);
		vmmx_buf_destroy(a);
	}
	vmmx_ctx_destroy(ctx);
}

/* The default headroom leaves 1/16 of a small device free; VMMX_HEADROOM=0
 * gives it all; VMMX_DEVICE_HEADROOM wins over the short name. */
static void headroom_defaults(void)
{
	static const char *const dflt[] = { "VMMX_SIM_DEVICE_MEM=64MiB", NULL };
	static const char *const zero[] = { "VMMX_SIM_DEVICE_MEM=64MiB", "VMMX_HEADROOM=0", NULL };
	static const char *const both[] = { "VMMX_SIM_DEVICE_MEM=64MiB", "VMMX_HEADROOM=0",
					    "VMMX_DEVICE_HEADROOM=8MiB", NULL };
	static const char *const *const sets[] = { dflt, zero, both };
	static const uint64_t want[] = { 4 * MiB, 0, 8 * MiB };

	for (int k = 0; k < 3; k++) {
		struct vmmx_ctx *ctx = test_ctx(sets[k]);
		struct vmmx_ctx_info ci = { .size = sizeof(ci) };
		struct vmmx_buf *a = NULL;
		size_t dev, host;

		vmmx_ctx_query(ctx, &ci);
		is_uint(want[k], ci.device_headroom, "vmmx_ctx_query: headroom %s", sets[k][1] ? sets[k][1] : "by default");
		is_err(0, vmmx_buf_create(ctx, 96 * MiB, "device-first", &a), "vmmx_buf_create");
		is_err(0, vmmx_buf_resize(a, 96 * MiB), "vmmx_buf_resize past the device");
		chunks(a, &dev, &host);
		is_uint(64 * MiB - want[k], dev, "device-first stops at the headroom (%llu MiB left free)",
			(unsigned long long)(want[k] / MiB));
		is_uint(96 * MiB - dev, host, "the rest falls back to host memory");
		vmmx_ctx_query(ctx, &ci);
		is_uint(want[k], ci.device_free, "the device's free memory is the headroom");
		vmmx_buf_destroy(a);
		vmmx_ctx_destroy(ctx);
	}
}

/* With no VMMX_CHUNK_MAX a grow is one handle, however large. */
static void one_handle_per_grow(void)
{
	static const char *const v[] = { "VMMX_SIM_HOST_MEM=2GiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(v);
	struct vmmx_ctx_info ci = { .size = sizeof(ci) };
	struct vmmx_buf *a = NULL;
	size_t dev, host;

	vmmx_ctx_query(ctx, &ci);
	is_uint(2048 * MiB, ci.chunk_max,
		"vmmx_ctx_query: chunk_max defaults to the largest location (sim host: 2 GiB)");
	is_err(0, vmmx_buf_create(ctx, 2048 * MiB, "host", &a), "vmmx_buf_create host, 2 GiB");
	is_err(0, vmmx_buf_resize(a, 1536 * MiB), "vmmx_buf_resize to 1.5 GiB");
	is_int(1, chunks(a, &dev, &host), "one handle for a 1.5 GiB grow");
	vmmx_buf_destroy(a);
	vmmx_ctx_destroy(ctx);
}

/* Whether the CPU may touch [p, p + len): the sim grants it with mprotect,
 * which /proc/self/maps shows. */
static int cpu_can_write(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int rw = -1;

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		unsigned long a, b;
		char perm[8];

		if (sscanf(line, "%lx-%lx %7s", &a, &b, perm) == 3 && (uintptr_t)p >= a &&
		    (uintptr_t)p < b) {
			rw = perm[0] == 'r' && perm[1] == 'w';
			break;
		}
	}
	fclose(f);
	return rw;
}

/* VMMX_HOST_CPU_ACCESS: all (default) grants the CPU every host chunk;
 * placed grants chunks a grow put on host, not those a migration moved there. */
static void cpu_access_modes(void)
{
	static const char *const dflt[] = { NULL };
	static const char *const placed[] = { "VMMX_HOST_CPU_ACCESS=placed", NULL };
	static const char *const *const sets[] = { dflt, placed };

	for (int k = 0; k < 2; k++) {
		struct vmmx_ctx *ctx = test_ctx(sets[k]);
		struct vmmx_buf *h = NULL, *d = NULL;
		const char *mode = k ? "placed" : "all (default)";
		char *p;

		is_err(0, vmmx_buf_create(ctx, 4 * MiB, "host", &h), "%s: host buffer", mode);
		is_err(0, vmmx_buf_resize(h, 4 * MiB), "%s: vmmx_buf_resize", mode);
		is_int(1, cpu_can_write(vmmx_buf_ptr(h)), "%s: a host chunk a grow placed is CPU-writable",
		       mode);
		p = vmmx_buf_ptr(h);
		p[0] = 42;
		is_int(42, p[0], "%s: the CPU wrote it through the buffer's address", mode);

		is_err(0, vmmx_buf_create(ctx, 4 * MiB, "device", &d), "%s: device buffer", mode);
		is_err(0, vmmx_buf_resize(d, 4 * MiB), "%s: vmmx_buf_resize", mode);
		is_err(0, test_fill(ctx, vmmx_buf_ptr(d), 0, 4 * MiB, 7), "%s: test_fill", mode);
		is_err(0, vmmx_buf_migrate(d, 0, 4 * MiB, HOST, NULL), "%s: vmmx_buf_migrate to host",
		       mode);
		is_int(!k, cpu_can_write(vmmx_buf_ptr(d)),
		       "%s: a chunk migrated to host is %sCPU-writable", mode, k ? "not " : "");
		if (k) {
			char *tmp = malloc(4 * MiB);

			is_err(-VMMX_EFAULT, vmmx_memcpy(ctx, tmp, vmmx_buf_ptr(d), 4 * MiB),
			       "%s: vmmx_memcpy of a GPU-only host chunk to host memory is refused", mode);
			like(vmmx_last_error(), "granted to the GPU only", "%s: and the message says why",
			     mode);
			free(tmp);
		} else {
			is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(d), 0, 4 * MiB, 7),
				"%s: vmmx_memcpy reads it back", mode);
			ok(true, "%s: (nothing refused)", mode);
		}
		is_err(0, vmmx_buf_migrate(d, 0, 4 * MiB, DEV, NULL), "%s: and back", mode);
		is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(d), 0, 4 * MiB, 7),
			"%s: the data survived the round trip", mode);
		vmmx_buf_destroy(d);
		vmmx_buf_destroy(h);
		vmmx_ctx_destroy(ctx);
	}
}

/*
 * A chunk moved to host granted to the GPU only, then VMMX_ADVISE_CPU; in
 * @ctx (VMMX_HOST_CPU_ACCESS=placed).  *@calls: the set_access calls made
 * before the advice.  Return: the advice's result.
 */
static int grant_after_move(struct vmmx_ctx *ctx, struct vmmx_buf **d, uint64_t *calls)
{
	struct vmmx_stats st = { .size = sizeof(st) };

	if (vmmx_buf_create(ctx, 4 * MiB, "device", d) || vmmx_buf_resize(*d, 4 * MiB) ||
	    test_fill(ctx, vmmx_buf_ptr(*d), 0, 4 * MiB, 9) ||
	    vmmx_buf_migrate(*d, 0, 4 * MiB, HOST, NULL) || vmmx_stats_get(ctx, &st))
		bail("grant: setup: %s", vmmx_last_error());
	*calls = st.driver_calls[VMMX_OP_SET_ACCESS];
	return vmmx_buf_advise(*d, 4096, 1, VMMX_ADVISE_CPU);
}

/* VMMX_ADVISE_CPU grants the CPU a GPU-only host chunk, until it moves; a failed grant. */
static void cpu_advice(void)
{
	static const char *const placed[] = { "VMMX_HOST_CPU_ACCESS=placed", NULL };
	struct vmmx_ctx *ctx = test_ctx(placed);
	struct vmmx_buf *d = NULL;
	char *tmp = malloc(4 * MiB), fault[64];
	const char *faulty[] = { "VMMX_HOST_CPU_ACCESS=placed", fault, NULL };
	uint64_t calls, after;
	struct vmmx_stats st = { .size = sizeof(st) };

	is_err(0, grant_after_move(ctx, &d, &calls), "VMMX_ADVISE_CPU on a GPU-only host chunk");
	is_int(1, cpu_can_write(vmmx_buf_ptr(d)), "... the chunk is now CPU-writable");
	is_err(0, vmmx_memcpy(ctx, tmp, vmmx_buf_ptr(d), 4 * MiB),
	       "... vmmx_memcpy to host memory is no longer refused");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(d), 0, 4 * MiB, 9), "... the data is intact");
	vmmx_stats_get(ctx, &st);
	after = st.driver_calls[VMMX_OP_SET_ACCESS];
	is_err(0, vmmx_buf_advise(d, 0, 4 * MiB, VMMX_ADVISE_CPU), "the same advice again");
	vmmx_stats_get(ctx, &st);
	is_uint(after, st.driver_calls[VMMX_OP_SET_ACCESS], "... grants nothing twice");
	is_err(0, vmmx_buf_migrate(d, 0, 4 * MiB, DEV, NULL), "to the device");
	is_err(0, vmmx_buf_advise(d, 0, 4 * MiB, VMMX_ADVISE_CPU),
	       "VMMX_ADVISE_CPU on device memory: nothing to grant, no error");
	is_err(0, vmmx_buf_migrate(d, 0, 4 * MiB, HOST, NULL), "and to host memory again");
	is_int(0, cpu_can_write(vmmx_buf_ptr(d)), "... the grant went with the move: GPU only again");
	is_err(-VMMX_EINVAL, vmmx_buf_advise(d, 0, 4 * MiB, VMMX_ADVISE_CPU + 1), "advice 7 refused");
	like(vmmx_last_error(), "advice 7 is none of enum vmmx_advice", "... and named");
	is_err(-VMMX_ERANGE, vmmx_buf_advise(d, 4 * MiB, 1, VMMX_ADVISE_CPU),
	       "VMMX_ADVISE_CPU past the size refused");
	vmmx_buf_destroy(d);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);

	/* The same steps again, the grant's set_access failing. */
	snprintf(fault, sizeof(fault), "VMMX_FAULT=set_access:%llu", (unsigned long long)calls + 1);
	ctx = test_ctx(faulty);
	is_err(-VMMX_EFAULTINJ, grant_after_move(ctx, &d, &calls), "a grant that fails (%s)", fault);
	like(vmmx_last_error(), "granting the CPU the host chunk at 0x", "... says what failed");
	is_int(0, cpu_can_write(vmmx_buf_ptr(d)), "... the chunk stays GPU only");
	is_err(-VMMX_EFAULT, vmmx_memcpy(ctx, tmp, vmmx_buf_ptr(d), 4 * MiB),
	       "... and vmmx_memcpy to host memory is still refused");
	is_err(0, vmmx_buf_advise(d, 0, 4 * MiB, VMMX_ADVISE_CPU), "the advice again succeeds");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(d), 0, 4 * MiB, 9),
		"... and the data reads back intact");
	vmmx_buf_destroy(d);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
	free(tmp);
}

int main(void)
{
	if (test_on_sim()) {
		plan(146);
		fill_then_shrink();
		headroom_defaults();
		one_handle_per_grow();
		cpu_access_modes();
		cpu_advice();
	} else {
		plan(55);
	}
	shrink_at_limit();
	cut_each_location();
	return tap_done();
}
