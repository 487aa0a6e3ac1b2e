// SPDX-License-Identifier: MIT
/*
 * example.c - the documentation's example policy, docs/examples/coinflip.c,
 * built by the test suite as tests/policies/.libs/vmmx_policy_coinflip.so
 * and loaded from there: p=0 puts every unit on host, p=100 every unit on
 * the device, p=50 a mix that is the same in every run; the counters it
 * keeps through host->counter_add agree with the chunk list; bad arguments
 * are refused.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/vmmx_test.h"

#define UNIT (2 * MiB)
#define SIZE (32 * MiB)
#define UNITS (SIZE / UNIT)

static char pathvar[2304], sofile[2304];

static void find_build_tree(void)
{
	const char *top = test_build_tree();

	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s/tests/policies/.libs", top);
	snprintf(sofile, sizeof(sofile), "%s/tests/policies/.libs/vmmx_policy_coinflip.so", top);
}

/* A counter of @spec's instance; 0 when the policy never named it. */
static uint64_t counter(struct vmmx_ctx *ctx, const char *spec, const char *name)
{
	struct json *st = test_stats_json(ctx);
	const struct json *c = json_get(json_get(test_find_policy(st, spec), "counters"), name);
	uint64_t v = c ? json_u64(c) : 0;

	json_free(st);
	return v;
}

/* One letter per unit: 'D' device, 'H' host; counts each. */
static const char *layout(struct vmmx_buf *buf, size_t *dev, size_t *host)
{
	static char out[256];
	struct vmmx_chunk_info c[64];
	size_t n, o = 0;

	*dev = *host = 0;
	if (vmmx_buf_chunks(buf, c, 64, &n) || n > 64)
		return "?";
	for (size_t i = 0; i < n; i++) {
		bool d = c[i].loc.kind == VMMX_LOC_DEVICE;

		for (size_t u = 0; u < c[i].size / UNIT && o < sizeof(out) - 1; u++)
			out[o++] = d ? 'D' : 'H';
		*(d ? dev : host) += c[i].size / UNIT;
	}
	out[o] = '\0';
	return out;
}

static struct vmmx_buf *make(struct vmmx_ctx *ctx, const char *spec)
{
	struct vmmx_buf *buf;
	int err = vmmx_buf_create(ctx, SIZE, spec, &buf);

	if (!err)
		err = vmmx_buf_resize(buf, SIZE);
	if (err)
		bail("%s: %s: %s", spec, vmmx_strerror(err), vmmx_last_error());
	return buf;
}

int main(void)
{
	const char *vars[] = { pathvar, NULL };
	struct vmmx_ctx *ctx, *ctx2;
	struct vmmx_buf *buf, *buf2;
	char first[256];
	size_t dev, host, dev2, host2;
	struct json *st;
	int err;

	find_build_tree();
	if (access(sofile, R_OK))
		bail("%s is missing: build the check libraries first (make check)", sofile);
	plan(27);

	/* p=50, first: buffer ids start at 1 in a new context, so two new
	 * contexts must lay the first buffer out the same way. */
	ctx = test_ctx(vars);
	test_log_clear();
	is_err(0, vmmx_buf_create(ctx, SIZE, "coinflip:p=50,seed=7", &buf),
	       "vmmx_buf_create loads coinflip from the test build tree");
	like(test_log(), sofile, "vmmx_buf_create: the info log names the example's file");
	st = test_stats_json(ctx);
	is_string(sofile, json_str(json_get(test_find_policy(st, "coinflip:p=50,seed=7"), "source")),
		  "vmmx_stats_json: the source is the example built by the tests");
	json_free(st);
	is_err(0, vmmx_buf_resize(buf, SIZE), "vmmx_buf_resize under coinflip:p=50");
	snprintf(first, sizeof(first), "%s", layout(buf, &dev, &host));
	ok(dev > 0 && host > 0, "p=50: a mix of device and host units (%s)", first);
	is_uint(UNITS, dev + host, "p=50: one chunk per 2 MiB unit");
	is_uint(dev, counter(ctx, "coinflip:p=50,seed=7", "gpu_picks"),
		"vmmx_stats_json: gpu_picks equals the device chunks");
	is_uint(host, counter(ctx, "coinflip:p=50,seed=7", "host_picks"),
		"vmmx_stats_json: host_picks equals the host chunks");
	is_uint(1, counter(ctx, "coinflip:p=50,seed=7", "buffers_created"),
		"vmmx_stats_json: buffers_created counts buf_event(created)");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(buf), 0, SIZE, 21), "data written across the mix");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, SIZE, 21), "data read back");

	ctx2 = test_ctx(vars);
	buf2 = make(ctx2, "coinflip:p=50,seed=7");
	is_string(first, layout(buf2, &dev2, &host2),
		  "coinflip: the same spec lays the same buffer out the same way");
	vmmx_buf_destroy(buf2);
	buf2 = make(ctx2, "coinflip:p=50,seed=8");
	ok(strcmp(first, layout(buf2, &dev2, &host2)) != 0,
	   "coinflip: another seed, another layout");
	vmmx_buf_destroy(buf2);
	vmmx_ctx_destroy(ctx2);

	/* A second buffer of the same spec shares the instance and its counters. */
	buf2 = make(ctx, "coinflip:p=50,seed=7");
	layout(buf2, &dev2, &host2);
	is_uint(dev + dev2, counter(ctx, "coinflip:p=50,seed=7", "gpu_picks"),
		"vmmx_stats_json: gpu_picks sums both buffers' device chunks");
	is_uint(2, counter(ctx, "coinflip:p=50,seed=7", "buffers_created"),
		"vmmx_stats_json: buffers_created 2");
	vmmx_buf_destroy(buf2);
	is_uint(1, counter(ctx, "coinflip:p=50,seed=7", "buffers_destroyed"),
		"vmmx_stats_json: buffers_destroyed counts buf_event(destroyed)");
	vmmx_buf_destroy(buf);

	/* p=0 and p=100 */
	buf = make(ctx, "coinflip:p=0");
	layout(buf, &dev, &host);
	is_uint(UNITS, host, "coinflip:p=0 puts every unit on host");
	is_uint(UNITS, counter(ctx, "coinflip:p=0", "host_picks"),
		"vmmx_stats_json: host_picks for p=0");
	is_uint(0, counter(ctx, "coinflip:p=0", "gpu_picks"),
		"vmmx_stats_json: no gpu_picks for p=0");
	vmmx_buf_destroy(buf);
	buf = make(ctx, "coinflip:p=100");
	layout(buf, &dev, &host);
	is_uint(UNITS, dev, "coinflip:p=100 puts every unit on the device");
	is_uint(UNITS, counter(ctx, "coinflip:p=100", "gpu_picks"),
		"vmmx_stats_json: gpu_picks for p=100");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(buf), 0, SIZE, 22), "data written on the device");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, SIZE, 22), "data read back");
	vmmx_buf_destroy(buf);

	/* bad arguments */
	buf = NULL;
	err = vmmx_buf_create(ctx, SIZE, "coinflip:p=101", &buf);
	is_err(-VMMX_EINVAL, err, "vmmx_buf_create refuses coinflip:p=101");
	like(vmmx_last_error(), "bad argument \"p\": expected p=0..100 or seed=N",
	     "vmmx_last_error gives the example's message");
	is_err(-VMMX_EINVAL, vmmx_buf_create(ctx, SIZE, "coinflip:color=red", &buf),
	       "vmmx_buf_create refuses coinflip:color=red");
	is_err(-VMMX_EINVAL, vmmx_buf_create(ctx, SIZE, "coinflip:seed=x", &buf),
	       "vmmx_buf_create refuses coinflip:seed=x");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
