// SPDX-License-Identifier: MIT
/*
 * place.c - vmmx-run --placement launch: before a watched launch is passed
 * on, the segments it names that lie in host memory, wholly or partly, are
 * brought to the device under the same address (vmmx_prefetch()); when the
 * device is full, a segment an earlier launch named is sent back to host
 * memory to make room.  With a known launch cycle, the segments the next
 * launches will name are brought in ahead, right after a launch is passed
 * on, so that their copies run while its kernel does.
 *
 * The unit is the segment (the libvmmx buffer a named chunk belongs to),
 * not the chunk: a kernel given a tensor's base reads the whole tensor,
 * which spans many chunks.  An allocation of 10 MiB or more is a segment
 * of its own; smaller ones share the allocator's segments, which then move
 * together.
 *
 * The victim: never a segment this launch names, nor one the launches
 * ahead name when bringing in ahead.  With a known launch cycle (cycle.c)
 * of L launches, a segment last named at launch s is next needed at about
 * s + L (a step later: exact for one named once per step, as a layer's
 * weights are), or at s + g when the gap g between its last two uses is
 * shorter (an activation buffer named by layer after layer), and the one
 * needed furthest in the future goes (Belady); without a cycle, the least
 * recently named.  Only segments some launch named are tracked, so memory
 * no kernel was seen to use is never pushed out by this.
 *
 * When not to move: a segment that is at least two thirds of the bytes its
 * launch names, beside other segments, is taken to be read once by it (a
 * matrix-vector product: batch 1 to a few dozen, decode; a launch naming
 * one segment only is not judged): a copy crosses the link with the same
 * bytes the kernel would read in place, and sending a victim back crosses
 * it again.
 * With a cycle known, such a segment is brought in only into free room or
 * in place of a segment needed later than it; when the device is full of
 * segments needed sooner it is read in place (counted).
 *
 * Ordering: last uses, not the whole device.  After each launch is passed
 * on, an event is recorded on its stream (a ring of EVENTS events, one per
 * launch that named a segment), and every segment it named remembers that
 * event as its last use.  Before a segment moves, either way, its last use
 * is waited for (a query first: the wait is counted only when the kernel
 * was still running).  The moves themselves complete before
 * vmmx_prefetch() returns (libvmmx has no move that returns before its
 * copy is done), so the launch that needs them is passed on after them in
 * program order and no stream wait is needed.  A ring slot is recorded
 * again only after its previous event completed, so a use older than the
 * ring is known complete.  When an event cannot be made or recorded (a
 * launch on another device's context, a driver without events) the moves
 * of a segment it covered wait for the whole device (vmmx_sync()), as
 * before, counted.  Work the watch cannot see (a copy by the runtime, a
 * pointer inside a kernel's own data structure) is not waited for: such
 * memory must be named by the launches that use it, or
 * VMMX_RUN_PLACE_WAIT=device set, which makes every wait one for the whole
 * device, as the first version did.
 *
 * The placement lock is held from the moves until the real launch returns
 * and its event is recorded (vmmxp_place_done()), so another thread's
 * launch cannot slip in between the moves and the launch they were made
 * for.  Moves keep the data: each chunk moves whole or not at all
 * (vmmx_buf_migrate()), and a move that fails leaves it where it was, to be
 * read in place as before.
 *
 * Locking: lock over the table, the plan, the events and the counters;
 * taken by vmmxp_place_launch() and released by vmmxp_place_done(), around
 * the real launch.  A forked child gets it afresh (vmmxp_place_after_fork()).
 */
#include "config.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "preload/preload.h"

/* Segments tracked: past this, new ones are moved but never chosen as victims. */
#define MAX_TRACKED 16384
#define INDEX_SLOTS (2 * MAX_TRACKED)
/* Victims tried for one segment before it is left where it is. */
#define MAX_EVICT 16
/* Last-use events in the ring: far more launches than a GPU's queue holds. */
#define EVENTS 1024
/* Cycle positions whose segments are kept for bringing in ahead. */
#define PLAN_SLOTS 65536
/* Segments kept per position (the launch's first ones). */
#define PLAN_SEGS 8
/* Launches looked ahead for segments to bring in (each a few hash lookups). */
#define AHEAD 32
/* CU_EVENT_DISABLE_TIMING, CUDA_ERROR_NOT_READY (cuda.h) */
#define EVENT_DISABLE_TIMING 0x2
#define CU_NOT_READY 600

struct tracked {
	void *base;
	size_t size;
	struct vmmx_ctx *ctx;
	uint64_t last;          /* the launch (seq) that last named it */
	uint64_t prev;          /* ... the one before, 0 if none */
	uint64_t use;           /* its last use: the event ring's number, 0 if none */
	uint64_t hold;          /* seq of the launch whose lookahead names it */
	int on_device;          /* as last seen or made here; checked before eviction */
};

/* A segment one launch names. */
struct seg {
	void *base;
	size_t size;
	struct vmmx_ctx *ctx;
	int host;               /* some of it lies in host memory */
};

/* What the launch at one position of the cycle named. */
struct plan {
	uint64_t generation;    /* the cycle's; 0: never written */
	uint32_t n;
	uint32_t once;          /* bit i: segment i is read once (see the top) */
	void *base[PLAN_SEGS];
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tracked track[MAX_TRACKED]; /* lock */
static int ntracked;                      /* lock */
static int index_[INDEX_SLOTS];           /* lock: 1 + the segment's slot in track[], 0 empty */
static uint64_t seq;                      /* lock: launches placed */
static struct plan plan[PLAN_SLOTS];      /* lock */
static void *events[EVENTS];              /* lock: CUevent, made on first use */
static int event_ok[EVENTS];              /* lock: the slot's last record succeeded */
static uint64_t uses;                     /* lock: events recorded (uses numbered from 1) */
static struct vmmxp_place_stats st;       /* lock */

/* The launch between vmmxp_place_launch() and vmmxp_place_done(); lock. */
static struct {
	CUstream stream;
	long at;
	uint64_t generation, cycle_len;
	struct tracked *t[VMMXP_PLACE_MAX]; /* the tracked segments it named */
	size_t nt;
} cur;

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

/*
 * The tracked record of the segment at @base; made if new and @make.  NULL
 * when it is not tracked (or the table is full).
 */
static struct tracked *find(void *base, int make)
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
	if (!make || ntracked == MAX_TRACKED)
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

/* Monotonic nanoseconds, for the report's time spent moving and waiting. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* VMMX_RUN_PLACE_WAIT=device: moves wait for the whole device (see the top); read once. */
static int wait_device(void)
{
	static int device = -1;

	if (device < 0) {
		const char *s = getenv("VMMX_RUN_PLACE_WAIT");

		device = s && !strcmp(s, "device");
	}
	return device;
}

/*
 * Wait until the work that last used @t's segment is done: its last-use
 * event, or the whole device when that event could not be recorded.
 * Return: 0, or -VMMX_E* when the wait failed (nothing may move then).
 */
static int wait_for_use(const struct tracked *t)
{
	CUresult (*query)(void *) = VMMXP_REAL(cuEventQuery);
	CUresult (*sync)(void *) = VMMXP_REAL(cuEventSynchronize);
	size_t slot = t->use % EVENTS;
	CUresult r;

	/* A use older than the ring is complete: its slot was recorded again only after it. */
	if (t->use && t->use + EVENTS <= uses && !wait_device())
		return 0;
	if (!t->use || !query || !sync || wait_device()) {
		st.device_syncs++;
		return vmmx_sync(t->ctx);
	}
	r = query(events[slot]);
	if (r == CUDA_OK)
		return 0;
	st.waits++;
	if (r == CU_NOT_READY && sync(events[slot]) == CUDA_OK)
		return 0;
	/* The event failed: the device is waited for instead. */
	st.device_syncs++;
	return vmmx_sync(t->ctx);
}

/* wait_for_use(), its time counted. */
static int wait_last_use(const struct tracked *t)
{
	uint64_t t0 = now_ns();
	int err = wait_for_use(t);

	st.wait_ns += now_ns() - t0;
	return err;
}

/*
 * The next use's event, recorded on @stream after the launch: returns its
 * number, or 0 when it could not be made or recorded (the segments then
 * have no last-use event, and their moves wait for the device).  The
 * slot's previous event is waited for first (see the top).
 */
static uint64_t record_use(CUstream stream)
{
	CUresult (*create)(void **, unsigned int) = VMMXP_REAL(cuEventCreate);
	CUresult (*record)(void *, CUstream) = VMMXP_REAL(cuEventRecord);
	CUresult (*query)(void *) = VMMXP_REAL(cuEventQuery);
	CUresult (*sync)(void *) = VMMXP_REAL(cuEventSynchronize);
	size_t slot = ++uses % EVENTS;

	if (event_ok[slot] && query && query(events[slot]) != CUDA_OK) {
		st.waits++;
		/* Swallowed: a failed event is re-recorded below, or marked not usable. */
		if (sync)
			(void)sync(events[slot]);
	}
	event_ok[slot] = 0;
	if (!events[slot] && (!create || create(&events[slot], EVENT_DISABLE_TIMING) != CUDA_OK))
		events[slot] = NULL;
	if (events[slot] && record && record(events[slot], stream) == CUDA_OK)
		event_ok[slot] = 1;
	return event_ok[slot] ? uses : 0;
}

/*
 * When @t is next needed, a cycle of @cycle_len launches being known: a
 * step after its last use, or sooner by the gap between its last two uses
 * when that is shorter (an activation named by every layer is needed again
 * at once, a layer's weights a step later).  A use so expected that did not
 * come (a step has passed since the last: memory freed, a phase over)
 * means nothing is known to need it: it ranks past every expected use,
 * the longest unused first.
 */
static uint64_t next_use(const struct tracked *t, uint64_t cycle_len)
{
	uint64_t gap = t->prev ? t->last - t->prev : cycle_len;
	uint64_t at = t->last + (gap < cycle_len ? gap : cycle_len);

	if (at <= seq)
		at = t->last + cycle_len;
	return at > seq ? at : UINT64_MAX - t->last;
}

/* The segment of @ctx on the device to send back for room, or NULL. */
static struct tracked *victim(struct vmmx_ctx *ctx, uint64_t cycle_len)
{
	struct tracked *best = NULL;

	for (int i = 0; i < ntracked; i++) {
		struct tracked *t = &track[i];

		if (t->ctx != ctx || !t->on_device || t->last == seq || t->hold == seq)
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

enum how {
	ON_DEMAND,      /* for the launch about to be passed on */
	AHEAD_OF,       /* for a launch ahead in the cycle */
};

/*
 * Bring @t's segment to its context's device, sending victims back as
 * needed.  @once: the launch reads it once (see the top); @t was named by
 * the current launch (ON_DEMAND) or is held for one ahead (AHEAD_OF).  Return: 0 when
 * it is on the device, -VMMX_ENOMEM when no room was made for it, another
 * code when a move or a wait failed.
 */
static int promote(struct tracked *t, enum how how, int once, uint64_t cycle_len, uint64_t bound)
{
	struct vmmx_ctx_info ci = { .size = sizeof(ci) };
	struct vmmx_loc host = { VMMX_LOC_HOST, 0 };
	uint64_t t0;
	int err;

	if (vmmx_ctx_query(t->ctx, &ci)) {
		st.failed++;
		return -VMMX_EINVAL;
	}
	/* Nothing queued may still use what moves: see the top of the file. */
	err = wait_last_use(t);
	if (err) {
		st.failed++;
		return err;
	}
	for (int tries = 0;; tries++) {
		struct vmmx_loc dev = { VMMX_LOC_DEVICE, ci.device };
		struct tracked *v;

		t0 = now_ns();
		err = vmmx_prefetch(t->ctx, t->base, t->size, dev, NULL);
		st.in_ns += now_ns() - t0;
		if (!err) {
			st.promoted++;
			st.promoted_bytes += t->size;
			if (how == AHEAD_OF)
				st.ahead++;
			else
				st.on_demand++;
			t->on_device = 1;
			return 0;
		}
		if (err != -VMMX_ENOMEM) {
			st.failed++;
			return err;
		}
		v = tries < MAX_EVICT ? victim(t->ctx, cycle_len) : NULL;
		if (!v) {
			if (how == ON_DEMAND)
				st.no_room++;
			return -VMMX_ENOMEM;
		}
		/* Ahead: only a victim Belady would also choose once the held ones are used. */
		if (how == AHEAD_OF && next_use(v, cycle_len) <= bound)
			return -VMMX_ENOMEM;
		/*
		 * Read once: never sent for ahead at the cost of another, and on
		 * demand only in place of one needed after it is needed again.
		 */
		if (once && how == AHEAD_OF)
			return -VMMX_ENOMEM;
		if (once && cycle_len && next_use(v, cycle_len) < next_use(t, cycle_len)) {
			if (how == ON_DEMAND)
				st.in_place++;
			return -VMMX_ENOMEM;
		}
		err = wait_last_use(v);
		t0 = now_ns();
		if (!err)
			err = vmmx_prefetch(v->ctx, v->base, v->size, host, NULL);
		st.out_ns += now_ns() - t0;
		if (err) {
			/* What moved stays moved; what did not is still on the device. */
			v->on_device = still_on_device(v);
			st.failed++;
			return err;
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

/*
 * Whether a segment of @size is read once by a launch that names @nseg
 * segments of @total bytes: it is at least two thirds of them, beside
 * others (a launch that names one segment only is not judged).
 */
static int read_once(size_t size, size_t total, size_t nseg)
{
	return nseg > 1 && size >= total - total / 3;
}

int vmmxp_place_launch(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx,
		       size_t n, long at, CUstream stream)
{
	static struct seg seg[VMMXP_PLACE_MAX]; /* lock */
	struct tracked *t[VMMXP_PLACE_MAX];
	size_t nseg, total = 0;
	struct plan *pl = NULL;

	if (n > VMMXP_PLACE_MAX)
		n = VMMXP_PLACE_MAX;
	pthread_mutex_lock(&lock);
	seq++;
	cur.stream = stream;
	cur.at = at;
	cur.cycle_len = vmmxp_cycle_len(&cur.generation);
	nseg = segments_of(chunk, ctx, n, seg);
	cur.nt = 0;
	if (at >= 0 && (uint64_t)at < PLAN_SLOTS && cur.cycle_len) {
		pl = &plan[at];
		*pl = (struct plan){ .generation = cur.generation };
	}
	for (size_t i = 0; i < nseg; i++)
		total += seg[i].size;
	/* First mark them all named now, so that none is a victim for another. */
	for (size_t i = 0; i < nseg; i++) {
		t[i] = find(seg[i].base, 1);
		if (pl && pl->n < PLAN_SEGS) {
			if (read_once(seg[i].size, total, nseg))
				pl->once |= 1u << pl->n;
			pl->base[pl->n++] = seg[i].base;
		}
		if (!t[i])
			continue;
		cur.t[cur.nt++] = t[i];
		t[i]->size = seg[i].size;
		t[i]->ctx = seg[i].ctx;
		if (t[i]->last != seq) {
			t[i]->prev = t[i]->last;
			t[i]->last = seq;
		}
		t[i]->on_device = !seg[i].host;
	}
	for (size_t i = 0; i < nseg; i++) {
		int once = read_once(seg[i].size, total, nseg);

		if (!seg[i].host)
			continue;
		if (t[i]) {
			(void)promote(t[i], ON_DEMAND, once, cur.cycle_len, 0);
		} else {
			struct tracked tmp = { .base = seg[i].base, .size = seg[i].size,
					       .ctx = seg[i].ctx, .last = seq };

			(void)promote(&tmp, ON_DEMAND, once, cur.cycle_len, 0);
		}
	}
	return 1;
}

/*
 * Bring in what the launches after the current one name, the cycle being
 * known: the segments of the launches ahead are held (never victims), and
 * the first launch ahead with segments in host memory has them brought
 * in; one launch's worth per call, so that the copies run beside the
 * kernel just passed on and the program is back to its next launch soon.
 *
 * Do no harm: a victim must be one Belady would also send back when that
 * launch comes, after the held segments have been used, so its next use
 * must come after theirs that follow the window (@bound).  Otherwise
 * bringing in early sends back a segment that waiting would have kept (a
 * cycle of weights would stream through the device, each sent back after
 * its use), and it stops, as it does where no room can be made.
 */
static void bring_in_ahead(void)
{
	uint64_t len = cur.cycle_len, horizon = len - 1 < AHEAD ? len - 1 : AHEAD, bound = 0;

	for (uint64_t d = 1; d <= horizon; d++) {
		uint64_t q = ((uint64_t)cur.at + d) % len;
		const struct plan *pl = q < PLAN_SLOTS ? &plan[q] : NULL;
		uint32_t live = 0;
		int moved = 0;

		if (!pl || pl->generation != cur.generation)
			return;
		for (uint32_t i = 0; i < pl->n; i++) {
			struct tracked *t = find(pl->base[i], 0);
			uint64_t after, period;

			if (!t || !t->ctx)
				continue;
			/*
			 * Its use expected from its period is past: the plan is out of
			 * date there (the workspace of the last step, freed since).
			 */
			period = t->prev && t->last - t->prev < len ? t->last - t->prev : len;
			if (t->last + period <= seq)
				continue;
			live |= 1u << i;
			t->hold = seq;
			/* Its use in the window, then its period again. */
			after = seq + d + period;
			if (after > bound && t->on_device)
				bound = after;
		}
		for (uint32_t i = 0; i < pl->n; i++) {
			struct tracked *t = find(pl->base[i], 0);

			/* As last seen here: one that libvmmx moved meanwhile is left to its launch. */
			if (!(live >> i & 1) || t->on_device)
				continue;
			if (promote(t, AHEAD_OF, (pl->once >> i) & 1, len, bound))
				return;
			moved = 1;
		}
		if (moved)
			return;
	}
}

void vmmxp_place_done(void)
{
	if (cur.nt) {
		uint64_t u = record_use(cur.stream);

		/* Each segment the launch named has this launch as its last use. */
		for (size_t i = 0; i < cur.nt; i++)
			cur.t[i]->use = u;
	}
	if (cur.cycle_len && cur.at >= 0)
		bring_in_ahead();
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
