// SPDX-License-Identifier: MIT
/*
 * devices.c - a context on a machine with several GPUs, on the sim backend
 * with two emulated devices (the GPU side is tests/gpu/peer_spill):
 *
 *  - a context leaves the devices it does not use alone: no free-memory
 *    query of device 1 (on cuda each needs a CUDA context there) through
 *    creation, grows, shrinks, lru's eviction and rebalancing, stats;
 *  - VMMX_DEVICE_LIMIT and VMMX_DEVICE_HEADROOM apply to each device, with
 *    a per-device form ("0:8MiB,1:4MiB", "8MiB,1:4MiB") and strict errors;
 *  - residency, statistics and vmmx_lookup per device ordinal;
 *  - device-first:peers=1 spills to the other GPU before host memory, data
 *    intact across the three kinds of chunks; peers=0 never touches it;
 *  - "device" in policy specs: device-first and lru mean the context's
 *    device (VMMX_DEVICE), device:id=N and interleave's deviceN name one;
 *  - migration from one GPU to the other under the same address.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#define SEED 14

static const struct vmmx_loc dev0 = {VMMX_LOC_DEVICE, 0}, dev1 = {VMMX_LOC_DEVICE, 1},
			     host = {VMMX_LOC_HOST, 0};

static uint64_t free_queries(struct vmmx_ctx *ctx, int d)
{
	struct vmm_sim_counts c;

	if (vmm_sim_counts(vmmx__ctx_vmm(ctx), &c))
		bail("vmm_sim_counts failed");
	return c.free_queries[d];
}

static size_t at(struct vmmx_buf *buf, struct vmmx_loc loc)
{
	size_t n = 0;

	if (vmmx_buf_residency_at(buf, 0, vmmx_buf_size(buf), loc, &n))
		bail("vmmx_buf_residency_at: %s", vmmx_last_error());
	return n;
}

/* A context that only uses device 0 never asks device 1's free memory. */
static void unused_device_left_alone(void)
{
	static const char *const vars[] = {"VMMX_SIM_DEVICES=2", "VMMX_DEVICE_LIMIT=8MiB",
					   "VMMX_CHUNK_MAX=2MiB", NULL};
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *a, *b;
	char json[16384];

	if (vmmx_buf_create(ctx, 64 * MiB, NULL, &a) || vmmx_buf_create(ctx, 64 * MiB, "lru", &b))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	is_err(0, vmmx_buf_resize(a, 12 * MiB), "device-first: grow past the device limit");
	is_err(0, vmmx_buf_resize(a, 4 * MiB), "device-first: shrink");
	is_err(0, vmmx_buf_resize(b, 16 * MiB), "lru: grow, evicting");
	is_err(0, vmmx_buf_advise(b, 0, 2 * MiB, VMMX_ADVISE_WILL_NEED),
	       "lru: advice, rebalancing");
	is_err(0, vmmx_buf_resize(b, 2 * MiB), "lru: shrink, rebalancing");
	is_err(0, vmmx_stats_json(ctx, json, sizeof(json), NULL), "vmmx_stats_json");
	vmmx_buf_destroy(a);
	vmmx_buf_destroy(b);
	if (!is_uint(0, free_queries(ctx, 1),
		     "no free-memory query of device 1 by a context that does not use it"))
		diag("on cuda each such query needs a CUDA context on that GPU: lib/ctx.c "
		     "vmmx__dev_active() must keep placement requests and rebalancing to the "
		     "devices in use");
	ok(free_queries(ctx, 0) > 0, "device 0's free memory was asked (%llu times)",
	   (unsigned long long)free_queries(ctx, 0));
	vmmx_ctx_destroy(ctx);
}

static void limit_is(const char *setting, uint64_t want0, uint64_t want1, bool headroom)
{
	const char *vars[] = {"VMMX_SIM_DEVICES=2", setting, NULL};
	struct vmmx_device_info d[2];
	struct vmmx_ctx *ctx;
	int err = test_ctx_try(vars, &ctx);

	if (!is_err(0, err, "vmmx_ctx_create with %s", setting)) {
		diag("%s", vmmx_last_error());
		skip("no context");
		return;
	}
	for (int i = 0; i < 2; i++) {
		memset(&d[i], 0, sizeof(d[i]));
		d[i].size = sizeof(d[i]);
		if (vmmx_device_info(ctx, i, &d[i]))
			bail("vmmx_device_info: %s", vmmx_last_error());
	}
	ok((headroom ? d[0].headroom : d[0].limit) == want0 &&
	       (headroom ? d[1].headroom : d[1].limit) == want1,
	   "%s: device 0 %llu MiB, device 1 %llu MiB (vmmx_device_info)", setting,
	   (unsigned long long)((headroom ? d[0].headroom : d[0].limit) >> 20),
	   (unsigned long long)((headroom ? d[1].headroom : d[1].limit) >> 20));
	vmmx_ctx_destroy(ctx);
}

static void refused(const char *setting, const char *needle)
{
	const char *vars[] = {"VMMX_SIM_DEVICES=2", setting, NULL};
	struct vmmx_ctx *ctx = NULL;

	is_err(-VMMX_ECONFIG, test_ctx_try(vars, &ctx), "vmmx_ctx_create refuses %s", setting);
	like(vmmx_last_error(), needle, "  and says why (%s)", vmmx_last_error());
	vmmx_ctx_destroy(ctx);
}

static void per_device_settings(void)
{
	const uint64_t none = UINT64_MAX;
	static const char *const vars[] = {"VMMX_SIM_DEVICES=2", "VMMX_DEVICE=1",
					   "VMMX_DEVICE_LIMIT=0:8MiB,1:4MiB", NULL};
	struct vmmx_ctx_info ci = {.size = sizeof(ci)};
	struct vmmx_ctx *ctx;

	limit_is("VMMX_DEVICE_LIMIT=8MiB", 8 * MiB, 8 * MiB, false);
	limit_is("VMMX_DEVICE_LIMIT=0:8MiB,1:4MiB", 8 * MiB, 4 * MiB, false);
	limit_is("VMMX_DEVICE_LIMIT=1:4MiB", none, 4 * MiB, false);
	limit_is("VMMX_DEVICE_LIMIT=8MiB,1:4MiB", 8 * MiB, 4 * MiB, false);
	limit_is("VMMX_DEVICE_LIMIT=1:50%,10%", 1024 * MiB / 10, 512 * MiB, false);
	limit_is("VMMX_DEVICE_HEADROOM=1:6MiB", 64 * MiB, 6 * MiB, true);
	limit_is("VMMX_HEADROOM=0:0,1:2MiB", 0, 2 * MiB, true);

	refused("VMMX_DEVICE_LIMIT=0:8MiB,0:4MiB", "device 0 is given twice");
	refused("VMMX_DEVICE_LIMIT=8MiB,4MiB", "two sizes for the devices not named");
	refused("VMMX_DEVICE_LIMIT=x:8MiB", "\"x\" is not a device ordinal from 0 to 15");
	refused("VMMX_DEVICE_LIMIT=16:8MiB", "\"16\" is not a device ordinal");
	refused("VMMX_DEVICE_LIMIT=-1:8MiB", "\"-1\" is not a device ordinal");
	refused("VMMX_DEVICE_LIMIT=0:", "expected a size");
	refused("VMMX_DEVICE_LIMIT=0:8MiB,",
		"VMMX_DEVICE_LIMIT=\"0:8MiB,\" (struct vmmx_config vars)");
	refused("VMMX_DEVICE_LIMIT=0:8 MiB", "per device ordinal, N:SIZE items");
	refused("VMMX_DEVICE_HEADROOM=0:101%", "VMMX_DEVICE_HEADROOM=\"0:101%\"");
	refused("VMMX_DEVICE_LIMIT=2:8MiB",
		"VMMX_DEVICE_LIMIT names device 2, but the sim backend has 2 devices (0 to 1)");

	/* vmmx_ctx_query reports the context's own device. */
	ctx = test_ctx(vars);
	is_err(0, vmmx_ctx_query(ctx, &ci), "vmmx_ctx_query on device 1");
	ok(ci.device == 1 && ci.device_limit == 4 * MiB,
	   "vmmx_ctx_query: device_limit is the context's device's (%llu MiB)",
	   (unsigned long long)(ci.device_limit >> 20));
	vmmx_ctx_destroy(ctx);
}

/* device-first:peers=1: device 0, then device 1, then host; data across all three. */
static void spill_to_peer(void)
{
	static const char *const vars[] = {"VMMX_SIM_DEVICES=2", "VMMX_DEVICE_LIMIT=4MiB",
					   "VMMX_CHUNK_MAX=4MiB", NULL};
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf, *plain;
	struct vmmx_chunk_info ci;
	struct vmmx_residency r;
	struct vmmx_stats st;
	char *p;

	if (vmmx_buf_create(ctx, 64 * MiB, "device-first:peers=1", &buf))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	is_uint(0, free_queries(ctx, 1), "device 1 untouched before it is needed");
	is_err(0, vmmx_buf_resize(buf, 4 * MiB), "device-first:peers=1: 4 MiB");
	is_string("0", test_layout(buf), "the first 4 MiB on device 0");
	is_err(0, vmmx_buf_resize(buf, 12 * MiB), "device-first:peers=1: 12 MiB");
	is_string("01H", test_layout(buf), "then 4 MiB on device 1, then host memory");
	ok(free_queries(ctx, 1) > 0, "device 1's room was asked once device 0 was full");
	p = vmmx_buf_ptr(buf);
	is_err(0, test_fill(ctx, p, 0, 12 * MiB, SEED),
	       "vmmx_memcpy: the pattern across the three");
	is_uint(SIZE_MAX, test_check(ctx, p, 0, 12 * MiB, SEED),
		"vmmx_memcpy: read back right from device 0, device 1 and host chunks");

	ok(at(buf, dev0) == 4 * MiB && at(buf, dev1) == 4 * MiB && at(buf, host) == 4 * MiB,
	   "vmmx_buf_residency_at: 4 MiB on each device and in host memory");
	ok(!vmmx_buf_residency(buf, 0, 12 * MiB, &r) && r.device == 8 * MiB && r.host == 4 * MiB,
	   "vmmx_buf_residency: device sums the GPUs (8 MiB)");
	{
		size_t n = 0;

		is_err(-VMMX_EINVAL,
		       vmmx_buf_residency_at(buf, 0, 1, (struct vmmx_loc){VMMX_LOC_NONE, 0}, &n),
		       "vmmx_buf_residency_at: location NONE refused");
		like(vmmx_last_error(), "none of DEVICE, HOST and HOST_NUMA",
		     "  the message says so");
		is_err(-VMMX_ERANGE, vmmx_buf_residency_at(buf, 0, 13 * MiB, dev0, &n),
		       "vmmx_buf_residency_at: past the size");
		like(vmmx_last_error(), "vmmx_buf_residency_at: range", "  the message names it");
	}
	is_err(0, vmmx_lookup(ctx, p + 5 * MiB, &ci), "vmmx_lookup in the second chunk");
	ok(ci.loc.kind == VMMX_LOC_DEVICE && ci.loc.id == 1 && ci.base == p + 4 * MiB,
	   "vmmx_lookup: the chunk is on device 1 (ordinal in loc.id)");
	st = test_stats(ctx);
	ok(st.version == VMMX_STATS_VERSION && st.device_count == 2,
	   "vmmx_stats: this version, 2 devices");
	ok(st.dev_bytes[0] == 4 * MiB && st.dev_bytes[1] == 4 * MiB && st.device_bytes == 8 * MiB,
	   "vmmx_stats: dev_bytes per device and their sum device_bytes");
	ok(st.dev_chunks[0] == 1 && st.dev_chunks[1] == 1 && st.dev_placed[1] == 1 &&
	       st.dev_held[1] == 4 * MiB,
	   "vmmx_stats: dev_chunks, dev_placed and dev_held of device 1");
	is_uint(2, st.fallbacks_limit, "vmmx_stats: both spills count as fallbacks (limit)");

	/* Shrinking gives device 1 back first (the tail). */
	is_err(0, vmmx_buf_resize(buf, 6 * MiB), "shrink to 6 MiB");
	is_string("01", test_layout(buf), "the host chunk went, device 1 kept its 2 MiB");
	is_uint(SIZE_MAX, test_check(ctx, p, 0, 6 * MiB, SEED), "data intact after the shrink");

	/* peers=0 (the default): never device 1. */
	if (vmmx_buf_create(ctx, 64 * MiB, "device-first:peers=0", &plain))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	is_err(0, vmmx_buf_resize(plain, 4 * MiB), "device-first:peers=0: 4 MiB");
	is_string("H", test_layout(plain), "device 0 full: host, not device 1");
	vmmx_buf_destroy(plain);
	is_err(-VMMX_EINVAL, vmmx_buf_create(ctx, 1 * MiB, "device-first:peers=2", &plain),
	       "device-first:peers=2 refused");
	like(test_log(), "peers=2: expected an integer from 0 to 1", "  the log says why");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

/* What "device" means in policy specs. */
static void device_in_specs(void)
{
	static const char *const vars[] = {"VMMX_SIM_DEVICES=2", "VMMX_DEVICE=1",
					   "VMMX_DEVICE_LIMIT=4MiB", NULL};
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *b;

	if (vmmx_buf_create(ctx, 64 * MiB, "device-first", &b) || vmmx_buf_resize(b, 6 * MiB))
		bail("device-first: %s", vmmx_last_error());
	is_string("1H", test_layout(b),
		  "device-first on a context of VMMX_DEVICE=1: device 1, host");
	vmmx_buf_destroy(b);
	if (vmmx_buf_create(ctx, 64 * MiB, "device-first:peers=1", &b) ||
	    vmmx_buf_resize(b, 10 * MiB))
		bail("device-first:peers=1: %s", vmmx_last_error());
	is_string("10H", test_layout(b), "device-first:peers=1 from device 1: device 1, 0, host");
	vmmx_buf_destroy(b);
	if (vmmx_buf_create(ctx, 64 * MiB, "device:id=0", &b) || vmmx_buf_resize(b, 4 * MiB))
		bail("device:id=0: %s", vmmx_last_error());
	is_string("0", test_layout(b), "device:id=0: device 0 whatever the context's device");
	is_err(-VMMX_ENOMEM, vmmx_buf_resize(b, 6 * MiB), "device:id=0: its limit, no fallback");
	vmmx_buf_destroy(b);
	if (vmmx_buf_create(ctx, 64 * MiB, "interleave:device0=1,device1=0,host=1,unit=2MiB", &b) ||
	    vmmx_buf_resize(b, 8 * MiB))
		bail("interleave: %s", vmmx_last_error());
	is_string("0H0H", test_layout(b),
		  "interleave:device0=1,device1=0,host=1: deviceN by ordinal");
	vmmx_buf_destroy(b);
	vmmx_ctx_destroy(ctx);
}

/* GPU to GPU under the same address. */
static void migrate_between_gpus(void)
{
	static const char *const vars[] = {"VMMX_SIM_DEVICES=2", "VMMX_CHUNK_MAX=2MiB", NULL};
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf;
	size_t moved = 0;
	char *p;

	if (vmmx_buf_create(ctx, 64 * MiB, NULL, &buf) || vmmx_buf_resize(buf, 8 * MiB))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	p = vmmx_buf_ptr(buf);
	if (test_fill(ctx, p, 0, 8 * MiB, SEED))
		bail("test_fill: %s", vmmx_last_error());
	is_err(0, vmmx_buf_migrate(buf, 2 * MiB, 4 * MiB, dev1, &moved),
	       "vmmx_buf_migrate: 4 MiB from device 0 to device 1");
	is_uint(4 * MiB, moved, "  moved 4 MiB");
	is_string("0110", test_layout(buf), "  chunks 1 and 2 on device 1, at the same address");
	ok(vmmx_buf_ptr(buf) == p, "  the address did not change");
	is_uint(SIZE_MAX, test_check(ctx, p, 0, 8 * MiB, SEED), "  data intact");
	is_err(0, vmmx_buf_migrate(buf, 0, 8 * MiB, dev0, &moved), "vmmx_buf_migrate back");
	ok(!strcmp(test_layout(buf), "0000") && moved == 4 * MiB, "  all on device 0 again");
	is_uint(SIZE_MAX, test_check(ctx, p, 0, 8 * MiB, SEED), "  data intact");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

int main(void)
{
	if (!test_on_sim())
		skip_all(
		    "two emulated devices need the sim (the GPU side is tests/gpu/peer_spill)");
	plan_lazy();
	unused_device_left_alone();
	per_device_settings();
	spill_to_peer();
	device_in_specs();
	migrate_between_gpus();
	return tap_done();
}
