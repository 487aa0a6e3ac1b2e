// SPDX-License-Identifier: MIT
/*
 * drivertime.c - where the driver time went (struct vmmx_stats version 7):
 * the wall time of each counted driver call, summed by op.  On sim the
 * fault layer slows one op on purpose (vmm_fault_slow()): a migration
 * whose map calls each sleep 50 ms counts at least that per call in
 * driver_ns[map] and leaves the other ops (but sim's copy, a memcpy) below
 * it, its data intact; slowed checksums and event calls land in
 * checksum_ns and event_ns with their calls, a checksum that ends early (a
 * fault, a bad argument) timed and counted in checksum_calls, not in
 * checksums; an op never called counts no time; vmmx_stats_json gives
 * the same figures; a caller compiled against version 6 (a shorter struct)
 * gets its own fields and nothing written past them; vmm_fault_slow() of
 * an op out of range is refused, and 0 puts an op back to full speed;
 * vmmx_op_name() names the JSON's keys, NULL out of range.
 */
#include "config.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vmm/vmm.h"
#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/vmmx_test.h"

#define MS 1000000ull
/* What a slowed call sleeps: far above what any sim call takes, sanitizers included. */
#define SLOW (50 * MS)

static const struct vmmx_loc DEV = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };

/* Time counted for ops never called: none. */
static void test_uncalled(struct vmmx_ctx *ctx)
{
	struct vmmx_stats st = test_stats(ctx);
	int bad = -1;

	for (int i = 0; i < VMMX_OP_COUNT; i++)
		if (!st.driver_calls[i] && st.driver_ns[i])
			bad = i;
	is_int(-1, bad, "no time counted for an op never called (first wrong: %d)", bad);
	is_uint(7, st.version, "vmmx_stats_get: version 7");
}

/* A migration with each map call slowed: its time lands on map, the data moves intact. */
static void test_slow_map(struct vmmx_ctx *ctx, struct vmm *v)
{
	const size_t size = 16 * MiB;
	struct vmmx_buf *buf = test_host_buf(ctx, size, 11);
	uint8_t *want = test_pattern(size, 11);
	struct vmmx_stats s0 = test_stats(ctx), s1;
	uint64_t maps, map_ns, other = 0;

	is_err(0, vmm_fault_slow(v, VMMX_OP_MAP, SLOW), "vmm_fault_slow(map, 20 ms)");
	test_migrate_all(buf, DEV);
	vmm_fault_slow(v, VMMX_OP_MAP, 0);
	s1 = test_stats(ctx);
	ok(test_holds(ctx, buf, want, 0, size), "the buffer holds its data on the device");
	maps = s1.driver_calls[VMMX_OP_MAP] - s0.driver_calls[VMMX_OP_MAP];
	map_ns = s1.driver_ns[VMMX_OP_MAP] - s0.driver_ns[VMMX_OP_MAP];
	ok(maps >= 2, "the migration mapped (%llu calls: staging and in place)",
	   (unsigned long long)maps);
	ok(map_ns >= maps * SLOW, "driver_ns[map] grew by at least 50 ms a call (%.1f ms for %llu)",
	   (double)map_ns / MS, (unsigned long long)maps);
	/*
	 * Not the copy: sim's moves the bytes on the CPU, tens of ms for 16
	 * MiB.  The rest under the slowed map calls' time (a bound that holds
	 * on a slow machine too: valgrind's unmaps of 16 MiB took 51 ms).
	 */
	for (int i = 0; i < VMMX_OP_COUNT; i++)
		if (i != VMMX_OP_MAP && i != VMMX_OP_COPY)
			other += s1.driver_ns[i] - s0.driver_ns[i];
	ok(other < map_ns, "the other ops but the copy stayed under the slowed maps (%.3f ms)",
	   (double)other / MS);
	ok(s1.driver_ns[VMMX_OP_COPY] > s0.driver_ns[VMMX_OP_COPY] &&
		   s1.driver_calls[VMMX_OP_COPY] > s0.driver_calls[VMMX_OP_COPY],
	   "the copies' calls and time counted too");

	/* Back at full speed: the move back costs far less than 20 ms a map. */
	s0 = s1;
	test_migrate_all(buf, HOST);
	s1 = test_stats(ctx);
	maps = s1.driver_calls[VMMX_OP_MAP] - s0.driver_calls[VMMX_OP_MAP];
	map_ns = s1.driver_ns[VMMX_OP_MAP] - s0.driver_ns[VMMX_OP_MAP];
	ok(maps >= 1 && map_ns < maps * SLOW,
	   "vmm_fault_slow(map, 0): full speed again (%llu calls, %.3f ms)",
	   (unsigned long long)maps, (double)map_ns / MS);
	ok(test_holds(ctx, buf, want, 0, size), "... and the data came back intact");
	free(want);
	vmmx_buf_destroy(buf);
}

/* Checksums and event calls: their own counters, their own time. */
static void test_checksum_events(struct vmmx_ctx *ctx, struct vmm *v)
{
	struct vmmx_buf *buf = test_host_buf(ctx, 4 * MiB, 12);
	struct vmmx_stats s0 = test_stats(ctx), s1;
	struct vmmx_event *ev;
	uint64_t sum = 0;

	vmm_fault_slow(v, VMM_OP_CHECKSUM, SLOW);
	is_err(0, vmmx_checksum(ctx, vmmx_buf_ptr(buf), 4 * MiB, &sum), "vmmx_checksum, slowed");
	vmm_fault_slow(v, VMM_OP_CHECKSUM, 0);
	s1 = test_stats(ctx);
	is_uint(s0.checksums + 1, s1.checksums, "one checksum more");
	ok(s1.checksum_ns - s0.checksum_ns >= SLOW, "checksum_ns grew by at least 50 ms (%.1f)",
	   (double)(s1.checksum_ns - s0.checksum_ns) / MS);
	is_uint(s0.checksum_calls + 1, s1.checksum_calls, "one checksum call more");

	/* Calls that end early are timed too: an injected failure, a bad argument. */
	s0 = s1;
	vmm_fault_slow(v, VMM_OP_CHECKSUM, SLOW);
	vmm_fault_arm(v, VMM_OP_CHECKSUM, 1, -VMMX_EFAULTINJ);
	is_err(-VMMX_EFAULTINJ, vmmx_checksum(ctx, vmmx_buf_ptr(buf), 4 * MiB, &sum),
	       "vmmx_checksum failed by the fault layer");
	is_err(-VMMX_EINVAL, vmm_checksum(v, (char *)vmmx_buf_ptr(buf) + 1, 8, &sum),
	       "vmm_checksum of a misaligned address");
	vmm_fault_slow(v, VMM_OP_CHECKSUM, 0);
	s1 = test_stats(ctx);
	is_uint(s0.checksums, s1.checksums, "checksums: neither was taken");
	is_uint(s0.checksum_calls + 2, s1.checksum_calls, "checksum_calls: both were asked");
	ok(s1.checksum_ns - s0.checksum_ns >= 2 * SLOW,
	   "checksum_ns: both calls' time, their early ends included (%.1f ms)",
	   (double)(s1.checksum_ns - s0.checksum_ns) / MS);
	ok(s1.event_ns == s0.event_ns, "event_ns did not move");

	if (vmmx_event_create(ctx, &ev))
		bail("vmmx_event_create: %s", vmmx_last_error());
	s0 = test_stats(ctx);
	vmm_fault_slow(v, VMM_OP_EVENT, SLOW);
	is_err(0, vmmx_event_record(ev, NULL), "vmmx_event_record, slowed");
	is_err(0, vmmx_event_sync(ev), "vmmx_event_sync, slowed");
	vmm_fault_slow(v, VMM_OP_EVENT, 0);
	s1 = test_stats(ctx);
	is_uint(s0.event_calls + 2, s1.event_calls, "event_calls: the record and the wait");
	ok(s1.event_ns - s0.event_ns >= 2 * SLOW, "event_ns grew by at least 100 ms (%.1f)",
	   (double)(s1.event_ns - s0.event_ns) / MS);
	is_uint(s0.checksum_ns, s1.checksum_ns, "checksum_ns did not move");
	vmmx_event_destroy(ev);
	vmmx_buf_destroy(buf);
}

/* The JSON form carries the same figures (no counted call between the two reads). */
static void test_json(struct vmmx_ctx *ctx)
{
	struct vmmx_stats st = test_stats(ctx);
	struct json *j = test_stats_json(ctx);
	const struct json *ns = json_get(j, "driver_ns");
	int bad = -1;

	ok(ns && json_len(ns) == VMMX_OP_COUNT, "vmmx_stats_json: driver_ns has an entry per op");
	for (int i = 0; ns && i < VMMX_OP_COUNT; i++) {
		const struct json *e = json_get(ns, vmmx_op_name((enum vmmx_op)i));

		if (!e || json_u64(e) != st.driver_ns[i])
			bad = i;
	}
	is_int(-1, bad, "... each equal to vmmx_stats_get's (first wrong: %d)", bad);
	is_uint(st.checksum_ns, json_u64(json_get(j, "checksum_ns")), "... checksum_ns");
	is_uint(st.event_calls, json_u64(json_get(j, "event_calls")), "... event_calls");
	is_uint(st.event_ns, json_u64(json_get(j, "event_ns")), "... event_ns");
	is_uint(st.checksum_calls, json_u64(json_get(j, "checksum_calls")), "... checksum_calls");
	json_free(j);
}

/* A caller built against version 6 passes its smaller size: nothing past it is written. */
static void test_old_caller(struct vmmx_ctx *ctx)
{
	union {
		struct vmmx_stats st;
		unsigned char bytes[sizeof(struct vmmx_stats)];
	} u;
	size_t v6 = offsetof(struct vmmx_stats, driver_ns);
	size_t touched = 0;

	memset(&u, 0xab, sizeof(u));
	u.st.size = v6;
	is_err(0, vmmx_stats_get(ctx, &u.st), "vmmx_stats_get with version 6's size");
	for (size_t i = v6; i < sizeof(u); i++)
		touched += u.bytes[i] != 0xab;
	is_uint(0, touched, "nothing written past version 6's fields");
	is_uint(7, u.st.version, "... and the version says 7");
}

int main(void)
{
	struct vmmx_ctx *ctx;
	struct vmm *v;

	if (!test_on_sim())
		skip_all("slows driver calls through the fault layer: sim only");
	plan(39);
	ctx = test_ctx(NULL);
	v = vmmx__ctx_vmm(ctx);
	test_uncalled(ctx);
	test_slow_map(ctx, v);
	test_checksum_events(ctx, v);
	test_json(ctx);
	test_old_caller(ctx);
	is_err(-VMMX_EINVAL, vmm_fault_slow(v, VMM_OP_COUNT, MS), "vmm_fault_slow of an op out of range");
	is_string("set_access", vmmx_op_name(VMMX_OP_SET_ACCESS), "vmmx_op_name(VMMX_OP_SET_ACCESS)");
	ok(vmmx_op_name(VMMX_OP_COUNT) == NULL && vmmx_op_name((enum vmmx_op)-1) == NULL,
	   "vmmx_op_name: NULL out of range");
	test_uncalled(ctx);
	vmmx_ctx_destroy(ctx);
	return 0;
}
