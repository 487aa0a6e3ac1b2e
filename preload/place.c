// SPDX-License-Identifier: MIT
/*
 * place.c - vmmx-run --placement launch: before a watched launch is passed
 * on, the segments it names that lie in host memory, wholly or partly, are
 * brought to the device under the same address (vmmx_prefetch()); when the
 * device is full, a segment an earlier launch named is sent back to host
 * memory to make room.
 *
 * The unit is the segment (the libvmmx buffer a named chunk belongs to),
 * not the chunk: a kernel given a tensor's base reads the whole tensor,
 * which spans many chunks.  An allocation of 10 MiB or more is a segment
 * of its own; smaller ones share the allocator's segments, which then move
 * together.
 *
 * The victim: never a segment this launch names.  With a known launch
 * cycle (cycle.c) of L launches, a segment last named at launch s is next
 * needed at about s + L (a step later: exact for one named once per step,
 * as a layer's weights are), or at s + g when the gap g between its last
 * two uses is shorter (an activation buffer named by layer after layer),
 * and the one needed furthest in the future goes (Belady); without a
 * cycle, the least recently named.  Only segments
 * some launch named are tracked, so memory no kernel was seen to use is
 * never pushed out by this.
 *
 * Ordering, in this first version: before the first move of a launch the
 * device is synchronised (vmmx_sync()), so no work queued on any stream,
 * including work that reaches memory through a pointer the watch cannot
 * see, still reads or writes what moves; the moves then complete before
 * the launch is passed on.  The placement lock is held from the moves
 * until the real launch returns (vmmxp_place_done()), so another thread's
 * launch cannot slip in between the wait and the moves, nor between the
 * moves and the launch they were made for.  Moves keep the data: each
 * chunk moves whole or not at all (vmmx_buf_migrate()), and a move that
 * fails leaves it where it was, to be read in place as before.
 *
 * Locking: lock over the table and counters; taken by vmmxp_place_launch()
 * and released by vmmxp_place_done(), around the real launch.  A forked
 * child gets it afresh (vmmxp_place_after_fork()).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"

/* Segments tracked: past this, new ones are moved but never chosen as victims. */
#define MAX_TRACKED 16384
#define INDEX_SLOTS (2 * MAX_TRACKED)
/* Victims tried for one segment before it is left where it is. */
#define MAX_EVICT 16

struct tracked {
	void *base;
	size_t size;
	struct vmmx_ctx *ctx;
	uint64_t last;          /* the launch (seq) that last named it */
	uint64_t prev;          /* ... the one before, 0 if none */
	int on_device;          /* as last seen or made here; checked before eviction */
};

/* A segment one launch names. */
struct seg {
	void *base;
	size_t size;
	struct vmmx_ctx *ctx;
	int host;               /* some of it lies in host memory */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tracked track[MAX_TRACKED]; /* lock */
static int ntracked;                      /* lock */
static int index_[INDEX_SLOTS];           /* lock: 1 + the segment's slot in track[], 0 empty */
static uint64_t seq;                      /* lock: launches placed */
static struct vmmxp_place_stats st;       /* lock */

/* A forked child's lock afresh (launch.c's fork handler). */
void vmmxp_place_after_fork(void)
{
	pthread_mutex_init(&lock, NULL);
}

int vmmxp_place_on(void)
{
	static int on = -1;
	int v = __atomic_load_n(&on, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *s = getenv("VMMX_RUN_PLACEMENT");

		v = s && !strcmp(s, "launch");
		__atomic_store_n(&on, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* The tracked record of the segment at @base, made if new; NULL when the table is full. */
static struct tracked *find(void *base)
{
	size_t i = (size_t)(((uint64_t)(uintptr_t)base * 0x9e3779b97f4a7c15ull) >> 40) &
		   (INDEX_SLOTS - 1);

	for (;; i = (i + 1) & (INDEX_SLOTS - 1)) {
		int t = index_[i];

		if (t && track[t - 1].base == base)
			return &track[t - 1];
		if (!t)
			break;
	}
	if (ntracked == MAX_TRACKED)
		return NULL;
	track[ntracked] = (struct tracked){ .base = base };
	index_[i] = ++ntracked;
	return &track[ntracked - 1];
}

/* Whether @t's segment is still a buffer of its context, at its base, with device memory. */
static int still_on_device(const struct tracked *t)
{
	struct vmmx_residency r = { 0, 0 };
	struct vmmx_chunk_info ci;

	return !vmmx_lookup(t->ctx, t->base, &ci) && vmmx_buf_ptr(ci.buf) == t->base &&
	       !vmmx_buf_residency(ci.buf, 0, vmmx_buf_size(ci.buf), &r) && r.device;
}

/*
 * When @t is next needed, a cycle of @cycle_len launches being known: a
 * step after its last use, or sooner by the gap between its last two uses
 * when that is shorter (an activation named by every layer is needed again
 * at once, a layer's weights a step later).
 */
static uint64_t next_use(const struct tracked *t, uint64_t cycle_len)
{
	uint64_t gap = t->prev ? t->last - t->prev : cycle_len;

	return t->last + (gap < cycle_len ? gap : cycle_len);
}

/* The segment of @ctx on the device to send back for room, or NULL. */
static struct tracked *victim(struct vmmx_ctx *ctx, uint64_t cycle_len)
{
	struct tracked *best = NULL;

	for (int i = 0; i < ntracked; i++) {
		struct tracked *t = &track[i];

		if (t->ctx != ctx || !t->on_device || t->last == seq)
			continue;
		if (!still_on_device(t)) {
			t->on_device = 0;
			continue;
		}
		/* Next use about a cycle after the last: the furthest is the latest named. */
		if (!best || (cycle_len ? next_use(t, cycle_len) > next_use(best, cycle_len) :
					  t->last < best->last))
			best = t;
	}
	return best;
}

/* Bring @t's segment to its context's device, sending victims back as needed. */
static void promote(struct tracked *t, int *synced)
{
	struct vmmx_ctx_info ci = { .size = sizeof(ci) };
	struct vmmx_loc host = { VMMX_LOC_HOST, 0 };
	uint64_t cycle_len = vmmxp_cycle_len(NULL);
	int err;

	if (vmmx_ctx_query(t->ctx, &ci)) {
		st.failed++;
		return;
	}
	if (!*synced) {
		/* Nothing queued may still use what moves: see the top of the file. */
		if (vmmx_sync(t->ctx)) {
			st.failed++;
			return;
		}
		*synced = 1;
	}
	for (int tries = 0;; tries++) {
		struct vmmx_loc dev = { VMMX_LOC_DEVICE, ci.device };
		struct tracked *v;

		err = vmmx_prefetch(t->ctx, t->base, t->size, dev, NULL);
		if (!err) {
			st.promoted++;
			st.promoted_bytes += t->size;
			t->on_device = 1;
			return;
		}
		if (err != -VMMX_ENOMEM) {
			st.failed++;
			return;
		}
		v = tries < MAX_EVICT ? victim(t->ctx, cycle_len) : NULL;
		if (!v) {
			st.no_room++;
			return;
		}
		err = vmmx_prefetch(v->ctx, v->base, v->size, host, NULL);
		if (err) {
			/* What moved stays moved; what did not is still on the device. */
			v->on_device = still_on_device(v);
			st.failed++;
			return;
		}
		v->on_device = 0;
		st.evicted++;
		st.evicted_bytes += v->size;
		if (cycle_len)
			st.evicted_next_use++;
		else
			st.evicted_lru++;
	}
}

/* The buffer (allocator segment) of each named chunk, once each: the unit that moves. */
static size_t segments_of(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx,
			  size_t n, struct seg *seg)
{
	size_t nseg = 0;

	for (size_t i = 0; i < n; i++) {
		struct vmmx_residency r = { 0, 0 };
		void *base = vmmx_buf_ptr(chunk[i].buf);
		size_t j, size = vmmx_buf_size(chunk[i].buf);

		for (j = 0; j < nseg && seg[j].base != base; j++)
			;
		if (j < nseg)
			continue;
		/* Any part in host memory is a reason to move it (a segment may straddle). */
		if (vmmx_buf_residency(chunk[i].buf, 0, size, &r))
			r.host = chunk[i].loc.kind != VMMX_LOC_DEVICE;
		seg[nseg++] = (struct seg){ base, size, ctx[i], r.host != 0 };
	}
	return nseg;
}

int vmmxp_place_launch(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx,
		       size_t n, long at, CUstream stream)
{
	static struct seg seg[VMMXP_PLACE_MAX]; /* lock */
	struct tracked *t[VMMXP_PLACE_MAX];
	int synced = 0;
	size_t nseg;

	if (n > VMMXP_PLACE_MAX)
		n = VMMXP_PLACE_MAX;
	pthread_mutex_lock(&lock);
	seq++;
	nseg = segments_of(chunk, ctx, n, seg);
	/* First mark them all named now, so that none is a victim for another. */
	for (size_t i = 0; i < nseg; i++) {
		t[i] = find(seg[i].base);
		if (!t[i])
			continue;
		t[i]->size = seg[i].size;
		t[i]->ctx = seg[i].ctx;
		if (t[i]->last != seq) {
			t[i]->prev = t[i]->last;
			t[i]->last = seq;
		}
		t[i]->on_device = !seg[i].host;
	}
	for (size_t i = 0; i < nseg; i++) {
		if (!seg[i].host)
			continue;
		if (t[i]) {
			promote(t[i], &synced);
		} else {
			struct tracked tmp = { seg[i].base, seg[i].size, seg[i].ctx, seq, 0, 0 };

			promote(&tmp, &synced);
		}
	}
	return 1;
}

void vmmxp_place_done(void)
{
	pthread_mutex_unlock(&lock);
}

struct vmmxp_place_stats vmmxp_place_stats(void)
{
	struct vmmxp_place_stats s;

	pthread_mutex_lock(&lock);
	s = st;
	pthread_mutex_unlock(&lock);
	return s;
}
