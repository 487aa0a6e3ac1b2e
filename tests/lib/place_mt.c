// SPDX-License-Identifier: MIT
/*
 * place_mt.c - placement from several threads at once.  8 threads create
 * buffers under three policies (device-first, host, and the interleave
 * plugin), grow and shrink them at random and now and then destroy and
 * recreate them, all under one VMMX_DEVICE_LIMIT and VMMX_HOST_LIMIT, while
 * the main thread watches the held bytes.  Afterwards: every resize either
 * succeeded or failed with -VMMX_ENOMEM, no device ever held more than its
 * limit (the limit applies to each device: with VMMX_SIM_DEVICES=2, or two
 * GPUs, interleave places chunks on both), each buffer's data pattern is intact, the statistics and the
 * trace add up, and after destroy + vmmx_ctx_trim(ctx, 0) the driver holds
 * nothing.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/vmmx_test.h"

#define THREADS 8
#define ITERS 120
#define CAP (12 * MiB)
#define UNIT (2 * MiB)
#define PROBE 4096 /* bytes checked at each end of every unit */
#define DEV_LIMIT (24 * MiB) /* on each device */
#define NDEV 16             /* devices watched (libvmmx handles 16) */
#define HOST_LIMIT (48 * MiB)

static const char *const specs[] = { "device-first", "host", "interleave:device=1,host=1" };

static struct vmmx_ctx *ctx;

struct worker {
	pthread_t th;
	int id;
	unsigned int seed;
	struct vmmx_buf *buf;
	size_t size;
	unsigned long ok, enomem, other, bad_data, recreated, bad_res;
	int first_err;
	char first_msg[256];
};

/* Write the pattern at both ends of units [from, to) of the buffer. */
static int fill_units(struct worker *w, size_t from, size_t to)
{
	for (size_t u = from; u < to; u += UNIT)
		if (test_fill(ctx, vmmx_buf_ptr(w->buf), u, PROBE, (uint32_t)w->id) ||
		    test_fill(ctx, vmmx_buf_ptr(w->buf), u + UNIT - PROBE, PROBE, (uint32_t)w->id))
			return -1;
	return 0;
}

static bool check_units(struct worker *w, size_t to)
{
	for (size_t u = 0; u < to; u += UNIT)
		if (test_check(ctx, vmmx_buf_ptr(w->buf), u, PROBE, (uint32_t)w->id) != SIZE_MAX ||
		    test_check(ctx, vmmx_buf_ptr(w->buf), u + UNIT - PROBE, PROBE,
			       (uint32_t)w->id) != SIZE_MAX)
			return false;
	return true;
}

static void note(struct worker *w, int err)
{
	if (!w->first_err) {
		w->first_err = err;
		snprintf(w->first_msg, sizeof(w->first_msg), "%s", vmmx_last_error());
	}
	w->other++;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	const char *spec = specs[w->id % 3];
	int err;

	for (int i = 0; i < ITERS; i++) {
		size_t size = (size_t)(rand_r(&w->seed) % (CAP / UNIT + 1)) * UNIT;
		struct vmmx_residency r;

		if (!w->buf || i % 40 == 39) {
			/* Buffers of one spec share a policy instance; the last one
			 * to go unloads it while other threads load it again. */
			vmmx_buf_destroy(w->buf);
			w->buf = NULL;
			w->size = 0;
			err = vmmx_buf_create(ctx, CAP, spec, &w->buf);
			if (err) {
				note(w, err);
				w->buf = NULL;
				continue;
			}
			w->recreated++;
		}
		err = vmmx_buf_resize(w->buf, size);
		if (err == -VMMX_ENOMEM) {
			w->enomem++;
		} else if (err) {
			note(w, err);
		} else {
			size_t keep = size < w->size ? size : w->size;

			w->ok++;
			if (!check_units(w, keep))
				w->bad_data++;
			if (size > w->size && fill_units(w, w->size, size))
				w->bad_data++;
			w->size = size;
		}
		if (vmmx_buf_size(w->buf) != w->size)
			w->bad_data++;
		if (vmmx_buf_residency(w->buf, 0, w->size, &r) || r.device + r.host != w->size ||
		    (w->id % 3 == 1 && r.device))
			w->bad_res++;
	}
	return NULL;
}

static struct json *stats_json(void)
{
	static char text[65536];
	struct json *j;
	const char *err;

	if (vmmx_stats_json(ctx, text, sizeof(text), NULL))
		return NULL;
	j = json_parse(text, &err);
	return j;
}

static uint64_t held(const struct json *st, const char *loc)
{
	/* UINT64_MAX when @loc is not listed (a device the context does not see). */
	const struct json *locs = json_get(st, "locations");

	for (size_t i = 0; i < json_len(locs); i++)
		if (json_str(json_get(json_index(locs, i), "location")) &&
		    !strcmp(json_str(json_get(json_index(locs, i), "location")), loc))
			return json_u64(json_get(json_index(locs, i), "held"));
	return UINT64_MAX;
}

int main(void)
{
	char pathvar[2200], tracevar[64], trace[] = "/tmp/vmmx-place-mt-XXXXXX";
	const char *vars[] = {
		pathvar, tracevar, "VMMX_DEVICE_LIMIT=24MiB", "VMMX_HOST_LIMIT=48MiB",
		"VMMX_CHUNK_MAX=4MiB", NULL,
	};
	struct worker w[THREADS];
	struct vmmx_stats st = { .size = sizeof(st) };
	struct vmm_counts vc;
	struct vmmx_residency r;
	unsigned long ok_n = 0, enomem = 0, other = 0, bad_data = 0, bad_res = 0, samples = 0,
		      bad_json = 0;
	uint64_t max_dev = 0, max_host = 0, dev_sum = 0, lines = 0, bad_lines = 0;
	uint64_t dev_at[NDEV] = { 0 };
	int ndev = 1, over = -1;
	int fd, first = -1;

	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s/policies/.libs", test_build_tree());
	fd = mkstemp(trace);
	if (fd < 0)
		bail("mkstemp failed");
	close(fd);
	snprintf(tracevar, sizeof(tracevar), "VMMX_TRACE=%s", trace);

	plan(16);
	ctx = test_ctx(vars);
	{
		struct vmmx_ctx_info ci = { .size = sizeof(ci) };

		if (vmmx_ctx_query(ctx, &ci))
			bail("vmmx_ctx_query: %s", vmmx_last_error());
		ndev = ci.device_count < NDEV ? ci.device_count : NDEV;
		diag("%d device(s)", ndev);
	}
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){ .id = i, .seed = (unsigned int)(i * 7919 + 1) };
		if (pthread_create(&w[i].th, NULL, work, &w[i]))
			bail("pthread_create failed");
	}
	/* Watch the held bytes while the workers run (lock-free readers). */
	bool joined[THREADS] = { false };

	for (int done = 0; !done;) {
		struct json *sj = stats_json();

		if (!sj) {
			bad_json++;
		} else {
			uint64_t h = held(sj, "host");

			for (int d = 0; d < ndev; d++) {
				char name[32];
				uint64_t v;

				snprintf(name, sizeof(name), "device:%d", d);
				v = held(sj, name);
				max_dev = v > max_dev ? v : max_dev;
			}
			max_host = h > max_host ? h : max_host;
			json_free(sj);
		}
		samples++;
		done = 1;
		for (int i = 0; i < THREADS; i++) {
			if (!joined[i] && pthread_tryjoin_np(w[i].th, NULL) == EBUSY)
				done = 0;
			else
				joined[i] = true;
		}
		if (!done)
			usleep(200);
	}
	for (int i = 0; i < THREADS; i++) {
		ok_n += w[i].ok;
		enomem += w[i].enomem;
		other += w[i].other;
		bad_data += w[i].bad_data;
		bad_res += w[i].bad_res;
		if (w[i].first_err && first < 0)
			first = i;
	}
	diag("%lu resizes succeeded, %lu ENOMEM, %lu samples of the held bytes", ok_n, enomem,
	     samples);
	if (first >= 0)
		diag("thread %d: %s: %s", first, vmmx_strerror(w[first].first_err),
		     w[first].first_msg);
	is_uint(0, other, "vmmx_buf_resize/vmmx_buf_create from %d threads: only 0 or -VMMX_ENOMEM",
		THREADS);
	ok(ok_n > THREADS * ITERS / 2, "vmmx_buf_resize: most resizes succeeded (%lu)", ok_n);
	is_uint(0, bad_json, "vmmx_stats_json parsed on every sample during the run");
	ok(max_dev <= DEV_LIMIT,
	   "vmmx_stats_json: no device's held bytes ever above VMMX_DEVICE_LIMIT (max %llu MiB)",
	   (unsigned long long)(max_dev / MiB));
	ok(max_host <= HOST_LIMIT,
	   "vmmx_stats_json: host held never above VMMX_HOST_LIMIT (max %llu MiB)",
	   (unsigned long long)(max_host / MiB));
	for (int i = 0; i < THREADS; i++) {
		if (w[i].buf && !vmmx_buf_residency(w[i].buf, 0, vmmx_buf_size(w[i].buf), &r))
			dev_sum += r.device;
		for (int d = 0; d < ndev && w[i].buf; d++) {
			size_t at = 0;

			if (vmmx_buf_residency_at(w[i].buf, 0, vmmx_buf_size(w[i].buf),
						  (struct vmmx_loc){ VMMX_LOC_DEVICE, d }, &at))
				bail("vmmx_buf_residency_at: %s", vmmx_last_error());
			dev_at[d] += at;
		}
		if (w[i].buf && !check_units(&w[i], w[i].size))
			bad_data++;
	}
	is_uint(0, bad_data, "vmmx_memcpy: every buffer's data pattern intact through its resizes");
	is_uint(0, bad_res,
		"vmmx_buf_residency adds up to the size (and host buffers have no device bytes)");
	vmmx_stats_get(ctx, &st);
	{
		uint64_t at_sum = 0;

		for (int d = 0; d < ndev; d++) {
			at_sum += dev_at[d];
			if (over < 0 && (dev_at[d] > DEV_LIMIT || dev_at[d] != st.dev_bytes[d]))
				over = d;
		}
		if (over >= 0)
			diag("device %d: %llu MiB in the buffers, %llu MiB in vmmx_stats_get", over,
			     (unsigned long long)(dev_at[over] / MiB),
			     (unsigned long long)(st.dev_bytes[over] / MiB));
		ok(over < 0 && at_sum == dev_sum && dev_sum == st.device_bytes,
		   "vmmx_buf_residency_at: each device's bytes (%llu MiB in all on %d device(s)) are "
		   "within its limit and match vmmx_stats_get's dev_bytes and device_bytes",
		   (unsigned long long)(dev_sum / MiB), ndev);
	}
	ok(st.placed_device + st.placed_host >= st.device_chunks + st.host_chunks,
	   "vmmx_stats_get: chunks ever placed (%llu) >= chunks alive (%llu)",
	   (unsigned long long)(st.placed_device + st.placed_host),
	   (unsigned long long)(st.device_chunks + st.host_chunks));
	is_uint(ok_n, st.resizes, "vmmx_stats_get: resizes = the successful resizes");
	is_uint(enomem, st.resize_failures, "vmmx_stats_get: resize_failures = the ENOMEM answers");

	{
		static char text[1 << 22];
		FILE *f = fopen(trace, "r");
		size_t n = f ? fread(text, 1, sizeof(text) - 1, f) : 0;
		bool whole = n == 0 || text[n - 1] == '\n';

		if (f)
			fclose(f);
		text[n] = '\0';
		for (char *p = text, *nl; (nl = strchr(p, '\n')); p = nl + 1) {
			struct json *j;

			*nl = '\0';
			j = json_parse(p, NULL);
			bad_lines += !j;
			lines++;
			json_free(j);
		}
		ok(lines > 0 && bad_lines == 0 && whole,
		   "VMMX_TRACE: %llu lines from %d threads, none torn or interleaved",
		   (unsigned long long)lines, THREADS);
		ok(lines >= st.placed_device + st.placed_host,
		   "VMMX_TRACE: a line for every chunk placed (%llu >= %llu)",
		   (unsigned long long)lines,
		   (unsigned long long)(st.placed_device + st.placed_host));
	}

	for (int i = 0; i < THREADS; i++)
		vmmx_buf_destroy(w[i].buf);
	vmmx_ctx_trim(ctx, 0);
	vmm_counts(vmmx__ctx_vmm(ctx), &vc);
	ok(vc.handles == 0 && vc.reservations == 0 && vc.mapped_bytes == 0,
	   "vmm_counts after destroy and vmmx_ctx_trim: %lld handles, %lld reservations, %lld "
	   "bytes mapped",
	   (long long)vc.handles, (long long)vc.reservations, (long long)vc.mapped_bytes);
	{
		struct json *sj = stats_json();

		uint64_t left = held(sj, "host");

		for (int d = 0; d < ndev; d++) {
			char name[32];

			snprintf(name, sizeof(name), "device:%d", d);
			left += held(sj, name);
		}
		ok(left == 0, "vmmx_stats_json: nothing held on any device or host");
		is_uint(1, json_len(json_get(sj, "policies")),
			"vmmx_stats_json: only the default policy is still loaded");
		json_free(sj);
	}
	vmmx_ctx_destroy(ctx);
	unlink(trace);
	return tap_done();
}
