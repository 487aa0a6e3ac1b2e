// SPDX-License-Identifier: MIT
/*
 * peer_spill.c - two GPUs: a buffer of GPU 0 that outgrows it spills to
 * GPU 1 (device-first:peers=1), mapped for GPU 0 through peer access,
 * before pinned host memory; kernels on GPU 0 across device-0, device-1 and
 * host chunks; how fast GPU 0 reads each kind; and migration from GPU 0 to
 * GPU 1 and back under the same address, against the peer copy.
 *
 *  1. VMMX_DEVICE_LIMIT=SPILL_MIB MiB on each GPU: a 3 x SPILL_MIB MiB grow
 *     is one chunk on GPU 0, one on GPU 1, one in host memory.  fill_u32
 *     on GPU 0 writes the whole buffer, check_inc_u32 checks and increments
 *     it, and the CPU reads every byte back through vmmx_memcpy (one copy
 *     per location) and checks it.
 *  2. Read bandwidth: check_u32 (read-only) over each chunk, best of READS
 *     timed runs, reported in GB/s (diag lines "read device:0", "read
 *     device:1 (peer)", "read host").  Nothing is asserted about speed.
 *  3. Migration: a MIG_MIB MiB device-0 buffer (one handle, the default)
 *     and the same in 64 MiB chunks move to GPU 1 and back, each checked
 *     by a kernel on GPU 0 after the move; the rate is compared with the
 *     peer copy (vmmx_memcpy between a device-0 and a device-1 buffer of
 *     the same size, cuMemcpy over the link).  Target: >= 0.8x; the diag
 *     line says PASS or MISS, the assertion is on data only.
 *
 * Runs with VMMX_BACKEND=cuda, GPU kernels built (nvcc), and two GPUs with
 * peer access; skips cleanly otherwise.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"
#include "tests/tap/vmmx_test.h"
#include "gpu/pattern.h"
#include "tests/gpu/check.h"

#define MiB	  ((size_t)1 << 20)
#define SPILL_MIB 1024
#define MIG_MIB	  1024
#define READS	  5
#define COPIES	  3
#define SEED	  0x0e1e2e3eu
#define SEED2	  0x50a0b0c0u

#ifdef VMMX_HAVE_KERNELS

static struct vmmx_ctx *ctx;
static unsigned long long *errs_dev;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct vmmx_buf *buffer(const char *policy, size_t size)
{
	struct vmmx_buf *b;

	if (vmmx_buf_create(ctx, size, policy, &b) || vmmx_buf_resize(b, size))
		bail("vmmx_buf_create/resize %s, %zu MiB: %s", policy, size / MiB,
		     vmmx_last_error());
	return b;
}

/* Whether every chunk of @buf is on device @d. */
static bool all_on(struct vmmx_buf *buf, int d)
{
	struct vmmx_chunk_info c[64];
	size_t n;

	if (vmmx_buf_chunks(buf, c, 64, &n) || n > 64 || !n)
		return false;
	for (size_t i = 0; i < n; i++)
		if (c[i].loc.kind != VMMX_LOC_DEVICE || c[i].loc.id != d)
			return false;
	return true;
}

/* check_u32 over [p, p + bytes) against the pattern from @first; 0 errors or the count. */
static unsigned long long check(unsigned int *p, size_t bytes, unsigned long long first,
				unsigned int seed)
{
	unsigned long long n = bytes / 4, errors = ~0ull;
	void *args[] = {&p, &n, &first, &seed, &errs_dev};

	if (run_counted(ctx, errs_dev, "check_u32", args, &errors))
		return ~0ull;
	return errors;
}

/* Best GB/s of check_u32 reading @bytes at @p (a kernel, launch and wait included). */
static double read_rate(unsigned int *p, size_t bytes, unsigned long long first, unsigned int seed)
{
	double best = 0;

	for (int i = 0; i < READS; i++) {
		double t = now_s();

		if (check(p, bytes, first, seed))
			return 0;
		t = now_s() - t;
		if (best == 0 || bytes / t / 1e9 > best)
			best = bytes / t / 1e9;
	}
	return best;
}

static void spill_and_read(void)
{
	const size_t part = (size_t)SPILL_MIB * MiB, size = 3 * part;
	static const char *const names[] = {"device:0", "device:1 (peer)", "host"};
	struct vmmx_buf *buf = buffer("device-first:peers=1", size);
	unsigned long long n = size / 4;
	unsigned int *p = vmmx_buf_ptr(buf), seed = SEED, *back;
	struct vmmx_stats st = {.size = sizeof(st)};
	size_t bad = 0;

	if (!is_string("01H", test_layout(buf),
		       "device-first:peers=1: %d MiB on GPU 0, then GPU 1, then host", SPILL_MIB))
		bail("layout %s: the rest depends on it", test_layout(buf));
	ok(!vmmx_stats_get(ctx, &st) && st.dev_bytes[0] == part && st.dev_bytes[1] == part &&
	       st.host_bytes == part,
	   "vmmx_stats: %d MiB on each GPU and in host memory", SPILL_MIB);
	fill_check_inc(ctx, p, n, seed, errs_dev,
		       "device-0, device-1 and host chunks, on GPU 0");
	back = malloc(part);
	if (!back)
		bail("out of memory");
	for (int k = 0; k < 3; k++) {
		if (vmmx_memcpy(ctx, back, (char *)p + k * part, part))
			bail("vmmx_memcpy: %s", vmmx_last_error());
		bad += count_bad(back, k * part / 4, part / 4, seed, 1, names[k]);
	}
	free(back);
	is_uint(0, bad,
		"vmmx_memcpy to the CPU: every element incremented by the kernel, in all three");

	/* Read bandwidth of GPU 0 over each kind of chunk: the pattern again, so
	 * that check_u32 also proves each timed read saw the right data. */
	{
		void *fill[] = {&p, &n, &seed};

		if (tcuda_launch("fill_u32", GRID, BLOCK, fill))
			bail("fill_u32: %s", tcuda_why());
	}
	for (int k = 0; k < 3; k++) {
		double gbs = read_rate(p + k * part / 4, part, k * part / 4, seed);

		ok(gbs > 0, "check_u32 on GPU 0 reads the %s chunk right, %d times", names[k],
		   READS);
		diag("read %s: %.1f GB/s (%d MiB, best of %d)", names[k], gbs, SPILL_MIB, READS);
	}
	vmmx_buf_destroy(buf);
}

/* vmmx_memcpy from a device-0 buffer to a device-1 buffer: the peer copy rate. */
static double peer_copy_rate(size_t size)
{
	struct vmmx_buf *a = buffer("device:id=0", size), *b = buffer("device:id=1", size);
	double best = 0;

	for (int i = 0; i < COPIES; i++) {
		double t = now_s();

		if (vmmx_memcpy(ctx, vmmx_buf_ptr(b), vmmx_buf_ptr(a), size))
			bail("vmmx_memcpy device 0 -> 1: %s", vmmx_last_error());
		t = now_s() - t;
		best = size / t / 1e9 > best ? size / t / 1e9 : best;
	}
	vmmx_buf_destroy(a);
	vmmx_buf_destroy(b);
	return best;
}

static void migrate_between(const char *what, const char *policy, double peer)
{
	const size_t size = (size_t)MIG_MIB * MiB;
	const struct vmmx_loc d0 = {VMMX_LOC_DEVICE, 0}, d1 = {VMMX_LOC_DEVICE, 1};
	struct vmmx_buf *buf = buffer(policy, size);
	unsigned int *p = vmmx_buf_ptr(buf), seed = SEED2;
	unsigned long long n = size / 4;
	void *fill[] = {&p, &n, &seed};
	double best[2] = {0, 0};
	size_t moved = 0;
	bool data = true, where = true;

	if (tcuda_launch("fill_u32", GRID, BLOCK, fill))
		bail("fill_u32: %s", tcuda_why());
	for (int i = 0; i < COPIES; i++) {
		for (int dir = 0; dir < 2; dir++) {
			double t = now_s();
			int err = vmmx_buf_migrate(buf, 0, size, dir ? d0 : d1, &moved);

			t = now_s() - t;
			if (err || moved != size) {
				diag("%s: vmmx_buf_migrate to device %d: %s (moved %zu)", what,
				     !dir, vmmx_strerror(err), moved);
				where = false;
				continue;
			}
			best[dir] = size / t / 1e9 > best[dir] ? size / t / 1e9 : best[dir];
			where = where && vmmx_buf_ptr(buf) == p && all_on(buf, dir ? 0 : 1);
			/* GPU 0 reads the moved data, over the link when it is on GPU 1. */
			data = data && check(p, size, 0, seed) == 0;
		}
	}
	ok(where,
	   "%s: vmmx_buf_migrate GPU 0 -> GPU 1 -> GPU 0, %d times, every chunk moved, "
	   "same address",
	   what, COPIES);
	ok(data, "%s: check_u32 on GPU 0 finds every element after every move", what);
	diag("%s: migrate device 0 -> 1 %.1f GB/s (%.2fx the peer copy), 1 -> 0 %.1f GB/s "
	     "(%.2fx); peer copy %.1f GB/s; target 0.8x: %s",
	     what, best[0], best[0] / peer, best[1], best[1] / peer, peer,
	     best[0] >= 0.8 * peer && best[1] >= 0.8 * peer ? "PASS" : "MISS");
	vmmx_buf_destroy(buf);
}

#endif

int main(void)
{
#ifndef VMMX_HAVE_KERNELS
	skip_without_kernels();
#else
	char limit[64];
	const char *vars[] = {limit, NULL};
	const char *be = getenv("VMMX_BACKEND");
	struct vmmx_device_info d0 = {.size = sizeof(d0)};
	struct vmmx_ctx_info ci = {.size = sizeof(ci)};
	struct vmmx_config cfg;
	bool peer = false;
	double rate;

	if (!be || strcmp(be, "cuda"))
		skip_all("needs VMMX_BACKEND=cuda (it is %s)", be ? be : "unset");
	if (tcuda_open(0))
		skip_all("no usable CUDA device 0: %s", tcuda_why());
	/* Limits keep the spill small on any GPU; headroom stays the default. */
	snprintf(limit, sizeof(limit), "VMMX_DEVICE_LIMIT=%dMiB", SPILL_MIB);
	vmmx_config_init(&cfg);
	cfg.flags = VMMX_CONFIG_NO_ENV;
	cfg.backend = "cuda";
	cfg.device = 0;
	cfg.vars = vars;
	if (vmmx_ctx_create(&cfg, &ctx))
		skip_all("no libvmmx context on device 0: %s", vmmx_last_error());
	if (vmmx_ctx_query(ctx, &ci) || ci.device_count < 2)
		skip_all("needs two GPUs (the driver shows %d)", ci.device_count);
	if (vmmx_device_info(ctx, 0, &d0))
		skip_all("vmmx_device_info(0): %s", vmmx_last_error());
	for (int i = 0; i < d0.peer_count; i++)
		peer = peer || d0.peers[i] == 1;
	if (!peer)
		skip_all("GPU 0 has no peer access to GPU 1");
	plan(2 + 9 + 1 + 2 * 2);
	if (!is_int(0, tcuda_load_kernels(), "tcuda_load_kernels: the kernels"))
		bail("cannot load the test kernels: %s", tcuda_why());
	{
		struct vmmx_buf *errs = buffer("device", 2 * MiB);

		errs_dev = vmmx_buf_ptr(errs);
		ok(errs_dev != NULL, "a device-0 counter buffer");
		diag("GPU 0: %s; GPU 1 reached through peer access", d0.name);
		spill_and_read();
		rate = peer_copy_rate((size_t)MIG_MIB * MiB);
		ok(rate > 0, "the peer copy: vmmx_memcpy device 0 -> 1, %d MiB (%.1f GB/s)",
		   MIG_MIB, rate);
		migrate_between("one handle", "device:id=0", rate);
		{
			/* The same in 64 MiB chunks: batches overlap making handles with copying.
			 */
			struct vmmx_ctx *one = ctx;
			const char *v64[] = {limit, "VMMX_CHUNK_MAX=64MiB", NULL};

			cfg.vars = v64;
			if (vmmx_ctx_create(&cfg, &ctx))
				bail("vmmx_ctx_create, 64 MiB chunks: %s", vmmx_last_error());
			{
				struct vmmx_buf *errs64 = buffer("device", 2 * MiB);

				errs_dev = vmmx_buf_ptr(errs64);
				migrate_between("64 MiB chunks", "device:id=0", rate);
				vmmx_buf_destroy(errs64);
			}
			vmmx_ctx_destroy(ctx);
			ctx = one;
			errs_dev = vmmx_buf_ptr(errs);
		}
		vmmx_buf_destroy(errs);
	}
	vmmx_ctx_destroy(ctx);
	tcuda_close();
	return tap_done();
#endif
}
