// SPDX-License-Identifier: MIT
/*
 * sleep.c - vmmx_sleep() and vmmx_wake(): tagged buffers give their device
 * memory back and take it again at the same addresses.
 *
 * Small chunks (VMMX_CHUNK_MAX=4MiB) and a 32 MiB sim device.  Checked here:
 *  - tags: set, read, cleared, taken from the thread's scope, refused while
 *    asleep, too long;
 *  - offload: the contents go to the buffer's host stash and the range is
 *    unmapped; the device's memory is free (the sim's count, and another
 *    buffer grows into it); the wake places the buffer by its policy
 *    (device-first spills what does not fit) with the data intact at the
 *    same address; a second cycle pins and maps no host memory (the stash
 *    is kept) and vmmx_sleep_release gives it back; under a policy that
 *    does not spill, a wake with no room fails, leaving the tag asleep and
 *    the device as it was;
 *  - a read-mostly chunk with a current host copy is not copied out again;
 *  - discard: the memory goes, the wake brings the size back, writable;
 *  - refusal while work is queued on the stream, with nothing changed;
 *  - bad arguments, each by code and message;
 *  - the framework allocator: a block made in a tagged scope has a segment
 *    of its own with the tag, an idle segment of a sleeping tag is never
 *    handed out, and after the wake the tag's requests reuse it;
 *  - every driver call of a sleep/wake scenario failed in turn (the fault
 *    layer): no byte of an offloaded buffer is lost, a failed sleep leaves
 *    nothing asleep, a failed wake leaves the buffer asleep and a retry
 *    wakes it, and nothing leaks.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

/* Offloads in pieces of 4 MiB: the pipelined copy and unmap run over many. */
static const char *const vars[] = { "VMMX_CHUNK_MAX=4MiB", "VMMX_SIM_DEVICE_MEM=32MiB",
				    "VMMX_SLEEP_PIECE=4MiB", NULL };
static const struct vmmx_loc DEV = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };
static const char *const TRAIN[] = { "train" };
static const char *const KV[] = { "kv" };

static uint64_t dev_free(struct vmmx_ctx *ctx)
{
	uint64_t f = 0;

	if (vmm_mem_info(vmmx__ctx_vmm(ctx), DEV, &f, NULL))
		bail("vmm_mem_info failed");
	return f;
}

static struct vmmx_sleep_stats stats(struct vmmx_ctx *ctx, const char *tag)
{
	struct vmmx_sleep_stats st;

	if (vmmx_sleep_stats(ctx, tag, &st))
		bail("vmmx_sleep_stats: %s", vmmx_last_error());
	return st;
}

static struct vmmx_buf *make_with(struct vmmx_ctx *ctx, const char *policy, const char *tag,
				   size_t size, uint32_t seed)
{
	struct vmmx_buf *buf;

	if (vmmx_buf_create(ctx, 32 * MiB, policy, &buf) || vmmx_buf_set_tag(buf, tag) ||
	    vmmx_buf_resize(buf, size) || test_fill(ctx, vmmx_buf_ptr(buf), 0, size, seed))
		bail("making a %s buffer: %s", tag, vmmx_last_error());
	return buf;
}

static struct vmmx_buf *make(struct vmmx_ctx *ctx, const char *tag, size_t size, uint32_t seed)
{
	return make_with(ctx, "device-first", tag, size, seed);
}

/* ---- 1. tags ---- */

static void tags(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	char long_tag[VMMX_TAG_MAX + 8], out[VMMX_TAG_MAX];
	struct vmmx_buf *a, *b;

	memset(long_tag, 'x', sizeof(long_tag) - 1);
	long_tag[sizeof(long_tag) - 1] = 0;
	if (vmmx_buf_create(ctx, 4 * MiB, NULL, &a))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	ok(!vmmx_buf_tag(a, out, sizeof(out)) && !strcmp(out, ""),
	   "vmmx_buf_tag: a new buffer has no tag");
	ok(!vmmx_buf_set_tag(a, "weights") && !vmmx_buf_tag(a, out, sizeof(out)) &&
	   !strcmp(out, "weights"), "vmmx_buf_set_tag: the tag reads back");
	is_err(-VMMX_ERANGE, vmmx_buf_tag(a, out, 4), "vmmx_buf_tag: a short output is refused");
	ok(strstr(vmmx_last_error(), "4 bytes cannot hold the tag (8 needed)") != NULL,
	   "vmmx_buf_tag: and says how many bytes it needs");
	is_err(-VMMX_EINVAL, vmmx_buf_set_tag(a, long_tag), "vmmx_buf_set_tag: a long tag is refused");
	ok(strstr(vmmx_last_error(), "is longer than 31 bytes") != NULL,
	   "vmmx_buf_set_tag: and the message says the limit");
	ok(!vmmx_buf_tag(a, out, sizeof(out)) && !strcmp(out, "weights"),
	   "vmmx_buf_set_tag: a refused tag changes nothing");
	ok(!vmmx_buf_set_tag(a, NULL) && !vmmx_buf_tag(a, out, sizeof(out)) && !strcmp(out, ""),
	   "vmmx_buf_set_tag: NULL takes the tag away");

	ok(!vmmx_tag_scope("kv"), "vmmx_tag_scope: sets the thread's tag");
	if (vmmx_buf_create(ctx, 4 * MiB, NULL, &b))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	ok(!vmmx_buf_tag(b, out, sizeof(out)) && !strcmp(out, "kv"),
	   "vmmx_tag_scope: a buffer made in the scope carries its tag");
	is_err(-VMMX_EINVAL, vmmx_tag_scope(long_tag), "vmmx_tag_scope: a long tag is refused");
	ok(!vmmx_tag_scope(NULL), "vmmx_tag_scope: NULL ends the scope");
	vmmx_buf_destroy(b);
	if (vmmx_buf_create(ctx, 4 * MiB, NULL, &b))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	ok(!vmmx_buf_tag(b, out, sizeof(out)) && !strcmp(out, ""),
	   "vmmx_tag_scope: after the scope new buffers have no tag");
	is_uint(2, stats(ctx, "").buffers, "vmmx_sleep_stats: both untagged buffers are found");
	vmmx_buf_destroy(a);
	vmmx_buf_destroy(b);
	ok(test_no_leaks(ctx), "tags: nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 2. offload and wake ---- */

static void offload(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *w, *other;
	struct vmmx_sleep_stats st;
	size_t bytes = 0;
	void *p;
	uint64_t creates, maps, total = 32 * MiB;

	w = make(ctx, "train", 20 * MiB, 1);
	p = vmmx_buf_ptr(w);
	/* One chunk in host memory before the sleep. */
	if (vmmx_buf_migrate(w, 16 * MiB, 4 * MiB, HOST, NULL))
		bail("vmmx_buf_migrate: %s", vmmx_last_error());
	is_string("0000H", test_layout(w), "the buffer: 16 MiB on the device, 4 in host memory");

	ok(!vmmx_sleep(ctx, TRAIN, 1, VMMX_SLEEP_OFFLOAD, NULL, &bytes), "vmmx_sleep: offload");
	is_uint(20 * MiB, bytes, "vmmx_sleep: the bytes put to sleep");
	is_string("", test_layout(w), "vmmx_sleep: the range is unmapped while asleep");
	ok(vmmx_buf_ptr(w) == p && vmmx_buf_size(w) == 0,
	   "vmmx_sleep: address kept, size 0 while asleep");
	is_uint(total, dev_free(ctx), "vmmx_sleep: the device's memory is all free (cache included)");
	st = stats(ctx, "train");
	ok(st.buffers == 1 && st.asleep_bytes == 20 * MiB && st.offloaded_bytes == 20 * MiB &&
	   st.device_bytes == 0 && st.host_bytes == 0 && st.stash_bytes == 20 * MiB,
	   "vmmx_sleep_stats: asleep, offloaded, its contents in a 20 MiB stash");
	is_uint(0, stats(ctx, "").buffers, "vmmx_sleep_stats: the stash counts as no untagged buffer");
	is_err(-VMMX_EBUSY, vmmx_buf_resize(w, 4 * MiB), "vmmx_buf_resize: refused while asleep");
	ok(strstr(vmmx_last_error(), "asleep") != NULL, "vmmx_buf_resize: and says why");
	is_err(-VMMX_EBUSY, vmmx_buf_set_tag(w, "x"), "vmmx_buf_set_tag: refused while asleep");
	bytes = 1;
	ok(!vmmx_sleep(ctx, TRAIN, 1, VMMX_SLEEP_OFFLOAD, NULL, &bytes) && bytes == 0,
	   "vmmx_sleep: an asleep tag sleeps no more");

	/* Another user takes most of the device's memory while the tag sleeps:
	 * the wake places the buffer as its policy (device-first) grows it. */
	if (vmmx_buf_create(ctx, 32 * MiB, "device", &other))
		bail("vmmx_buf_create: %s", vmmx_last_error());
	ok(!vmmx_buf_resize(other, 28 * MiB), "the freed device memory serves another buffer");
	vmmx_ctx_trim(ctx, 0); /* the cached device chunks go back */
	is_string("", test_layout(w), "vmmx_sleep: a rebalance leaves the sleeping buffer alone");
	bytes = 0;
	ok(!vmmx_wake(ctx, TRAIN, 1, &bytes) && bytes == 20 * MiB,
	   "vmmx_wake: the tag wakes with the device nearly full");
	st = stats(ctx, "train");
	ok(st.device_bytes <= 4 * MiB && st.device_bytes + st.host_bytes == 20 * MiB,
	   "vmmx_wake: what does not fit on the device is in host memory (policy device-first)");
	ok(vmmx_buf_ptr(w) == p && vmmx_buf_size(w) == 20 * MiB, "vmmx_wake: same address and size");
	is_uint(SIZE_MAX, test_check(ctx, p, 0, 20 * MiB, 1), "vmmx_wake: the data is intact");
	vmmx_buf_destroy(other);

	/* A second cycle finds its host memory kept. */
	if (test_fill(ctx, p, 0, 20 * MiB, 2))
		bail("test_fill: %s", vmmx_last_error());
	creates = test_driver_calls(ctx, VMMX_OP_CREATE);
	maps = test_driver_calls(ctx, VMMX_OP_MAP);
	ok(!vmmx_sleep(ctx, NULL, 0, VMMX_SLEEP_OFFLOAD, NULL, NULL), "vmmx_sleep: every tag, again");
	is_uint(creates, test_driver_calls(ctx, VMMX_OP_CREATE),
		"vmmx_sleep: the second cycle pins no new host memory");
	is_uint(maps, test_driver_calls(ctx, VMMX_OP_MAP),
		"vmmx_sleep: and maps nothing (the stash stays mapped)");
	ok(!vmmx_wake(ctx, NULL, 0, NULL), "vmmx_wake: every tag");
	is_uint(SIZE_MAX, test_check(ctx, p, 0, 20 * MiB, 2), "vmmx_wake: second cycle's data intact");
	is_string("00000", test_layout(w), "vmmx_wake: with room, all of it on the device");
	st = stats(ctx, "train");
	ok(st.asleep_bytes == 0 && st.device_bytes == 20 * MiB && st.bytes == 20 * MiB &&
	   st.stash_bytes == 20 * MiB, "vmmx_sleep_stats: awake again, the stash kept");

	bytes = 0;
	ok(!vmmx_sleep_release(ctx, TRAIN, 1, &bytes) && bytes == 20 * MiB,
	   "vmmx_sleep_release: gives the 20 MiB stash back");
	is_uint(0, stats(ctx, "train").stash_bytes, "vmmx_sleep_release: none is kept");
	vmmx_ctx_trim(ctx, 0);
	ok(test_stats(ctx).cache_bytes == 0, "vmmx_ctx_trim: and nothing of it stays cached");
	ok(!vmmx_sleep(ctx, TRAIN, 1, VMMX_SLEEP_OFFLOAD, NULL, NULL) &&
	   !vmmx_wake(ctx, TRAIN, 1, NULL) &&
	   test_check(ctx, p, 0, 20 * MiB, 2) == SIZE_MAX,
	   "vmmx_sleep: after a release the next offload makes a new stash");
	is_err(-VMMX_EINVAL, vmmx_sleep_release(NULL, NULL, 0, NULL), "vmmx_sleep_release: NULL ctx");
	vmmx_buf_destroy(w); /* its stash goes with it */
	ok(test_no_leaks(ctx), "offload: nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* A wake with no room, under a policy that does not spill: refused, asleep, intact. */
static void offload_no_room(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *w = make_with(ctx, "device", "train", 8 * MiB, 11), *other;
	void *p = vmmx_buf_ptr(w);

	ok(!vmmx_sleep(ctx, TRAIN, 1, VMMX_SLEEP_OFFLOAD, NULL, NULL), "vmmx_sleep: a device buffer");
	if (vmmx_buf_create(ctx, 32 * MiB, "device", &other) || vmmx_buf_resize(other, 28 * MiB))
		bail("the other buffer: %s", vmmx_last_error());
	is_err(-VMMX_ENOMEM, vmmx_wake(ctx, TRAIN, 1, NULL), "vmmx_wake: no room on the device");
	ok(stats(ctx, "train").asleep_bytes == 8 * MiB, "vmmx_wake: a failed wake leaves the tag asleep");
	is_string("", test_layout(w), "vmmx_wake: and unmaps what it had grown");
	is_uint(4 * MiB, dev_free(ctx), "vmmx_wake: so the device holds only the other buffer");
	vmmx_buf_destroy(other);
	ok(!vmmx_wake(ctx, TRAIN, 1, NULL), "vmmx_wake: once there is room");
	is_uint(SIZE_MAX, test_check(ctx, p, 0, 8 * MiB, 11), "vmmx_wake: the data is intact");
	vmmx_buf_destroy(w);
	ok(test_no_leaks(ctx), "offload with no room: nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/*
 * Faults in a row: copies fail from the fifth on.  The sleep queues the
 * copies of four 4 MiB pieces ahead, unmaps the top one and fails to queue
 * the fifth; its undo (copies back from the stash) fails too.  The
 * buffer then stays asleep, intact: the part never unmapped is mapped with
 * its data, the rest is in the stash, and a later wake restores it.
 */
static void offload_double_fault(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *w = make(ctx, "train", 20 * MiB, 12);
	void *p = vmmx_buf_ptr(w);
	struct vmm *v = vmmx__ctx_vmm(ctx);

	vmm_fault_arm_n(v, VMMX_OP_COPY, 5, 1000, 0);
	ok(vmmx_sleep(ctx, TRAIN, 1, VMMX_SLEEP_OFFLOAD, NULL, NULL) < 0,
	   "vmmx_sleep: fails when its copies fail");
	ok(strstr(vmmx_last_error(), "stash") != NULL, "vmmx_sleep: and says the copy to the stash failed");
	ok(stats(ctx, "train").asleep_bytes == 20 * MiB,
	   "vmmx_sleep: an undo that fails too leaves the buffer asleep");
	ok(vmmx_buf_size(w) > 0 && vmmx_buf_size(w) < 20 * MiB,
	   "vmmx_sleep: with the part never unmapped still mapped");
	is_err(-VMMX_EFAULTINJ, vmmx_wake(ctx, TRAIN, 1, NULL), "vmmx_wake: fails while copies fail");
	ok(stats(ctx, "train").asleep_bytes == 20 * MiB, "vmmx_wake: and leaves it asleep");
	vmm_fault_disarm_all(v);
	ok(!vmmx_wake(ctx, TRAIN, 1, NULL), "vmmx_wake: works once copies do");
	is_uint(SIZE_MAX, test_check(ctx, p, 0, 20 * MiB, 12), "vmmx_wake: no byte was lost");
	vmmx_buf_destroy(w);
	ok(test_no_leaks(ctx), "double fault: nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 3. read-mostly chunks ---- */

static void read_mostly(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *w = make(ctx, "train", 8 * MiB, 3);
	uint64_t copies;

	/* Up to host memory and back: the chunks keep their host copies. */
	if (vmmx_buf_advise(w, 0, 8 * MiB, VMMX_ADVISE_READ_MOSTLY) ||
	    vmmx_buf_migrate(w, 0, 8 * MiB, HOST, NULL) || vmmx_buf_migrate(w, 0, 8 * MiB, DEV, NULL))
		bail("read-mostly setup: %s", vmmx_last_error());
	copies = test_driver_calls(ctx, VMMX_OP_COPY);
	ok(!vmmx_sleep(ctx, TRAIN, 1, VMMX_SLEEP_OFFLOAD, NULL, NULL), "vmmx_sleep: read-mostly buffer");
	is_uint(copies, test_driver_calls(ctx, VMMX_OP_COPY),
		"vmmx_sleep: unchanged read-mostly chunks are not copied out again");
	is_string("HH", test_layout(w), "vmmx_sleep: they are in host memory");
	ok(!vmmx_wake(ctx, TRAIN, 1, NULL), "vmmx_wake: read-mostly buffer");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(w), 0, 8 * MiB, 3),
		"vmmx_wake: read-mostly data intact");
	vmmx_buf_destroy(w);
	ok(test_no_leaks(ctx), "read-mostly: nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 4. discard ---- */

static void discard(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *w = make(ctx, "train", 8 * MiB, 4), *kv = make(ctx, "kv", 16 * MiB, 5);
	void *p = vmmx_buf_ptr(kv);
	struct vmmx_sleep_stats st;
	size_t bytes = 0;

	ok(!vmmx_sleep(ctx, KV, 1, VMMX_SLEEP_DISCARD, NULL, &bytes) && bytes == 16 * MiB,
	   "vmmx_sleep: discard");
	is_uint(24 * MiB, dev_free(ctx), "vmmx_sleep: the discarded memory is free on the device");
	st = stats(ctx, "kv");
	ok(st.asleep_bytes == 16 * MiB && st.offloaded_bytes == 0 && st.device_bytes == 0 &&
	   st.host_bytes == 0, "vmmx_sleep_stats: discarded, nothing mapped");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(w), 0, 8 * MiB, 4),
		"vmmx_sleep: another tag is untouched");
	ok(!vmmx_wake(ctx, KV, 1, &bytes) && bytes == 16 * MiB, "vmmx_wake: a discarded tag");
	ok(vmmx_buf_ptr(kv) == p && vmmx_buf_size(kv) == 16 * MiB,
	   "vmmx_wake: same address, same size");
	is_string("0000", test_layout(kv), "vmmx_wake: on the device again");
	ok(!test_fill(ctx, p, 0, 16 * MiB, 6) && test_check(ctx, p, 0, 16 * MiB, 6) == SIZE_MAX,
	   "vmmx_wake: the woken memory takes data");
	vmmx_buf_destroy(w);
	vmmx_buf_destroy(kv);
	ok(test_no_leaks(ctx), "discard: nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 5. refusal while busy, bad arguments ---- */

static void refusals(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *w = make(ctx, "train", 8 * MiB, 7);
	const char *const bad[] = { "train", "" };
	struct vmmx_stream *s;

	if (vmmx_stream_create(ctx, &s))
		bail("vmmx_stream_create: %s", vmmx_last_error());
	vmm_sim_stream_hold(vmmx__ctx_vmm(ctx), 0, true);
	is_err(-VMMX_EBUSY, vmmx_sleep(ctx, TRAIN, 1, VMMX_SLEEP_OFFLOAD, NULL, NULL),
	       "vmmx_sleep: refused while the default stream has work queued");
	ok(strstr(vmmx_last_error(), "has not finished: synchronize it") != NULL,
	   "vmmx_sleep: and says what to do");
	is_string("00", test_layout(w), "vmmx_sleep: a refused sleep moves nothing");
	ok(stats(ctx, "train").asleep_bytes == 0, "vmmx_sleep: and leaves nothing asleep");
	vmm_sim_stream_hold(vmmx__ctx_vmm(ctx), 0, false);
	vmm_sim_stream_hold(vmmx__ctx_vmm(ctx), (vmm_stream_t)(uintptr_t)vmmx_stream_handle(s), true);
	is_err(-VMMX_EBUSY,
	       vmmx_sleep(ctx, TRAIN, 1, VMMX_SLEEP_OFFLOAD, vmmx_stream_handle(s), NULL),
	       "vmmx_sleep: refused while the named stream has work queued");
	/* Releasing the hold completes the stream's work. */
	vmm_sim_stream_hold(vmmx__ctx_vmm(ctx), (vmm_stream_t)(uintptr_t)vmmx_stream_handle(s), false);
	ok(!vmmx_sleep(ctx, TRAIN, 1, VMMX_SLEEP_OFFLOAD, vmmx_stream_handle(s), NULL),
	   "vmmx_sleep: accepted once the stream is idle");

	is_err(-VMMX_EINVAL, vmmx_sleep(ctx, TRAIN, 1, 7, NULL, NULL), "vmmx_sleep: bad mode");
	ok(strstr(vmmx_last_error(), "mode 7 is neither") != NULL, "vmmx_sleep: names the mode");
	is_err(-VMMX_EINVAL, vmmx_sleep(ctx, NULL, 1, 0, NULL, NULL), "vmmx_sleep: NULL tags, ntags 1");
	is_err(-VMMX_EINVAL, vmmx_wake(ctx, bad, 2, NULL), "vmmx_wake: an empty tag");
	ok(strstr(vmmx_last_error(), "tag 1 is NULL or empty") != NULL, "vmmx_wake: names the tag");
	is_err(-VMMX_EINVAL, vmmx_sleep(NULL, NULL, 0, 0, NULL, NULL), "vmmx_sleep: NULL ctx");
	is_err(-VMMX_EINVAL, vmmx_sleep_stats(ctx, NULL, NULL), "vmmx_sleep_stats: NULL args");
	ok(stats(ctx, "train").asleep_bytes == 8 * MiB, "bad arguments woke nothing");
	ok(!vmmx_wake(ctx, TRAIN, 1, NULL), "vmmx_wake: after the refusals");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(w), 0, 8 * MiB, 7), "data intact after all");
	vmmx_stream_destroy(s);
	vmmx_buf_destroy(w);
	ok(test_no_leaks(ctx), "refusals: nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 6. the framework allocator ---- */

static struct vmmx_buf *buf_of(struct vmmx_ctx *ctx, void *p)
{
	struct vmmx_chunk_info ci;

	if (vmmx_lookup(ctx, p, &ci))
		bail("vmmx_lookup: %s", vmmx_last_error());
	return ci.buf;
}

static void allocator(void)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_alloc *a;
	void *kv, *plain, *q, *q1;
	char tag[VMMX_TAG_MAX];

	if (vmmx_alloc_create(ctx, NULL, &a))
		bail("vmmx_alloc_create: %s", vmmx_last_error());
	vmmx_tag_scope("kv");
	ok(!vmmx_alloc_malloc(a, 64 * 1024, NULL, &kv), "vmmx_alloc_malloc: a small block in a tagged scope");
	vmmx_tag_scope(NULL);
	ok(!vmmx_alloc_malloc(a, 64 * 1024, NULL, &plain), "vmmx_alloc_malloc: one outside it");
	ok(buf_of(ctx, kv) != buf_of(ctx, plain), "vmmx_alloc_malloc: the tagged block has a segment of its own");
	ok(!vmmx_buf_tag(buf_of(ctx, kv), tag, sizeof(tag)) && !strcmp(tag, "kv"),
	   "vmmx_alloc_malloc: its segment carries the tag");
	ok(!vmmx_buf_tag(buf_of(ctx, plain), tag, sizeof(tag)) && !strcmp(tag, ""),
	   "vmmx_alloc_malloc: the other's carries none");
	ok(!vmmx_alloc_free(a, kv, NULL), "vmmx_alloc_free: the tagged block");
	ok(!vmmx_sleep(ctx, KV, 1, VMMX_SLEEP_DISCARD, NULL, NULL), "vmmx_sleep: the allocator's tag");
	vmmx_tag_scope("kv");
	ok(!vmmx_alloc_malloc(a, 64 * 1024, NULL, &q1) && q1 != kv,
	   "vmmx_alloc_malloc: a sleeping tag's idle segment is not handed out");
	vmmx_alloc_free(a, q1, NULL);
	vmmx_tag_scope(NULL);
	ok(!vmmx_wake(ctx, KV, 1, NULL), "vmmx_wake: the allocator's tag");
	ok(!vmmx_alloc_malloc(a, 64 * 1024, NULL, &q) && q != kv,
	   "vmmx_alloc_malloc: an untagged request does not take a tagged segment");
	vmmx_alloc_free(a, q, NULL);
	vmmx_tag_scope("kv");
	/* Both idle "kv" segments are awake now: either serves, none is made. */
	ok(!vmmx_alloc_malloc(a, 64 * 1024, NULL, &q) && (q == kv || q == q1),
	   "vmmx_alloc_malloc: after the wake the tag's request reuses a segment of the tag");
	ok(!vmmx_buf_tag(buf_of(ctx, q), tag, sizeof(tag)) && !strcmp(tag, "kv"),
	   "vmmx_alloc_malloc: tagged \"kv\"");
	vmmx_tag_scope(NULL);
	vmmx_alloc_free(a, q, NULL);
	vmmx_alloc_free(a, plain, NULL);
	vmmx_alloc_destroy(a);
	ok(test_no_leaks(ctx), "allocator: nothing leaked");
	vmmx_ctx_destroy(ctx);
}

/* ---- 7. the fault sweep ---- */

struct result {
	int bad;        /* the contract broke */
	int errors;     /* calls that reported an error */
};

static void note(struct result *r, bool cond, const char *what)
{
	if (!cond) {
		if (!r->bad++)
			diag("%s (%s)", what, vmmx_last_error());
	}
}

/* The data of @buf, read again when the read itself met the armed fault. */
static void data_ok(struct vmmx_ctx *ctx, struct vmmx_buf *buf, size_t size, uint32_t seed,
		    struct result *r, const char *when)
{
	size_t bad = test_check(ctx, vmmx_buf_ptr(buf), 0, size, seed);

	if (bad == SIZE_MAX - 1)
		bad = test_check(ctx, vmmx_buf_ptr(buf), 0, size, seed);
	note(r, bad == SIZE_MAX, when);
}

/* Whether the sleep failed (and then left nothing asleep). */
static bool sweep_sleep(struct vmmx_ctx *ctx, const char *const *tags, int mode,
			struct result *r)
{
	if (!vmmx_sleep(ctx, tags, 1, mode, NULL, NULL))
		return false;
	r->errors++;
	note(r, stats(ctx, tags[0]).asleep_bytes == 0, "a failed sleep left a buffer asleep");
	return true;
}

static void sweep_wake(struct vmmx_ctx *ctx, const char *const *tags, struct result *r)
{
	if (!vmmx_wake(ctx, tags, tags ? 1 : 0, NULL))
		return;
	r->errors++;
	note(r, !vmmx_wake(ctx, tags, tags ? 1 : 0, NULL), "a wake failed twice");
}

static void sweep_scenario(struct vmmx_ctx *ctx, struct result *r)
{
	struct vmmx_buf *w = NULL, *w2 = NULL, *kv = NULL;

	/* Two buffers in "train": a failure in the second one's sleep wakes
	 * the first one again. */
	if (vmmx_buf_create(ctx, 16 * MiB, "device-first", &w) ||
	    vmmx_buf_create(ctx, 16 * MiB, "device-first", &w2) ||
	    vmmx_buf_create(ctx, 16 * MiB, "device-first", &kv) || vmmx_buf_set_tag(w, "train") ||
	    vmmx_buf_set_tag(w2, "train") || vmmx_buf_set_tag(kv, "kv") ||
	    vmmx_buf_resize(w, 8 * MiB) || vmmx_buf_resize(w2, 4 * MiB) ||
	    vmmx_buf_resize(kv, 8 * MiB) || test_fill(ctx, vmmx_buf_ptr(w), 0, 8 * MiB, 9) ||
	    test_fill(ctx, vmmx_buf_ptr(w2), 0, 4 * MiB, 10)) {
		r->errors++;
		goto out; /* a fault in the setup: the sleep part is not reached */
	}
	/* A failed sleep leaves the buffers awake: their data must read right. */
	if (sweep_sleep(ctx, TRAIN, VMMX_SLEEP_OFFLOAD, r)) {
		data_ok(ctx, w, 8 * MiB, 9, r, "data lost by a failed sleep");
		data_ok(ctx, w2, 4 * MiB, 10, r, "data lost by a failed sleep");
	}
	sweep_sleep(ctx, KV, VMMX_SLEEP_DISCARD, r);
	sweep_wake(ctx, TRAIN, r);
	data_ok(ctx, w, 8 * MiB, 9, r, "data lost by a wake");
	data_ok(ctx, w2, 4 * MiB, 10, r, "data lost by a wake");
	sweep_wake(ctx, KV, r);
	sweep_sleep(ctx, TRAIN, VMMX_SLEEP_OFFLOAD, r);
	sweep_wake(ctx, NULL, r);
	note(r, stats(ctx, "train").asleep_bytes == 0 && stats(ctx, "kv").asleep_bytes == 0,
	     "asleep after the last wake");
	data_ok(ctx, w, 8 * MiB, 9, r, "data lost by the second cycle");
	data_ok(ctx, w2, 4 * MiB, 10, r, "data lost by the second cycle");
out:
	vmmx_buf_destroy(w);
	vmmx_buf_destroy(w2);
	vmmx_buf_destroy(kv);
	vmmx_ctx_trim(ctx, 0);
}

/* How many calls of @op the driver layer counted. */
static uint64_t calls_of(const struct vmm_counts *c, int op)
{
	return op == VMM_OP_EVENT ? c->event_calls : c->calls[op];
}

static const int sweep_ops[] = {
	VMMX_OP_CREATE, VMMX_OP_MAP,  VMMX_OP_UNMAP,   VMMX_OP_SET_ACCESS, VMMX_OP_COPY,
	VMMX_OP_SYNC,   VMMX_OP_RELEASE, VMM_OP_EVENT,
};
#define NSWEEP (sizeof(sweep_ops) / sizeof(sweep_ops[0]))

static void fault_sweep(void)
{
	struct result r = { 0, 0 };
	struct vmm_counts base;
	struct vmmx_ctx *ctx;

	ctx = test_ctx(vars);
	sweep_scenario(ctx, &r);
	vmm_counts(vmmx__ctx_vmm(ctx), &base);
	ok(r.bad == 0 && r.errors == 0, "fault sweep: the scenario runs clean without faults");
	ok(test_no_leaks(ctx), "fault sweep: and leaks nothing");
	vmmx_ctx_destroy(ctx);

	for (size_t i = 0; i < NSWEEP; i++) {
		uint64_t n = calls_of(&base, sweep_ops[i]), hit = 0, leaks = 0, bad = 0, errors = 0;
		const char *name = vmm_op_name((enum vmmx_op)sweep_ops[i]);

		for (uint64_t k = 1; k <= n; k++) {
			struct vmm_counts c;

			memset(&r, 0, sizeof(r));
			ctx = test_ctx(vars);
			vmm_fault_arm(vmmx__ctx_vmm(ctx), (enum vmmx_op)sweep_ops[i], k, 0);
			sweep_scenario(ctx, &r);
			vmm_counts(vmmx__ctx_vmm(ctx), &c);
			hit += c.injected;
			if (r.bad) {
				diag("%s #%llu: %d broken", name, (unsigned long long)k, r.bad);
				bad++;
			}
			errors += r.errors > 0;
			if (!test_no_leaks(ctx)) {
				diag("%s #%llu leaked", name, (unsigned long long)k);
				leaks++;
			}
			vmmx_ctx_destroy(ctx);
		}
		ok(n > 0, "the scenario makes %llu %s calls", (unsigned long long)n, name);
		is_uint(n, hit, "every one of the %s calls was failed once", name);
		is_uint(0, bad, "failing a %s lost no byte and left no tag half asleep", name);
		is_uint(0, leaks, "failing a %s leaked nothing", name);
		diag("%s: %llu runs, %llu reported an error", name, (unsigned long long)n,
		     (unsigned long long)errors);
	}
}

int main(void)
{
	plan_lazy();
	if (!test_on_sim())
		skip_all("sim only: the sim's device count and stream hold are needed");
	tags();
	offload();
	offload_no_room();
	offload_double_fault();
	read_mostly();
	discard();
	refusals();
	allocator();
	fault_sweep();
	return tap_done();
}
