// SPDX-License-Identifier: MIT
/*
 * cycle.c - the launch cycle: a training or inference step launches the
 * same kernels on much the same memory in the same order, step after step.
 * The watch (launch.c) gives each launch its kernel, the segments it named
 * and the largest of them; this file learns the cycle they repeat and says
 * where in it each launch falls, so that placement can know the next use
 * of every segment (the furthest one is the best victim) and what the next
 * launches will name (to bring it in ahead).
 *
 * Matching: a launch is "the same" as a recorded one when it runs the same
 * kernel and names the largest segment that one named (a layer's weights).
 * Everything else may vary between steps without breaking the cycle: a
 * workspace or an activation at another address, a segment more or less.
 * Two launches of one kernel on different weights never match.
 *
 * Learning: every launch is recorded in a ring, and the last position of
 * each (kernel, largest segment) key is kept in a hash table.  A launch
 * whose key was seen P launches ago proposes a cycle of P launches, taken
 * at once (placement may use it from the next launch).  Whether held or
 * proposed, each launch is then compared with the one the cycle expects:
 *  - it matches: the cycle moves on;
 *  - it matches one of the next LOOKAHEAD expected ones: the launches
 *    between were skipped (a launch of the first steps only, a free), each
 *    a mismatch, and the cycle moves past it;
 *  - neither, but it runs the expected kernel: it stands in for the
 *    expected launch (its memory moved: a workspace, an activation), a
 *    mismatch, and the cycle moves on;
 *  - none of these: an extra launch, a mismatch; the cycle stays.
 * A cycle is confirmed once min(P, CONFIRM), and at least CONFIRM_MIN,
 * launches matched it exactly in a row.  An unconfirmed cycle is dropped
 * at its second mismatch, or at its first when the launch that does not
 * match could propose a cycle of its own, which replaces it (a repeat
 * inside a step, an activation named by every other layer, proposes
 * short, wrong cycles: they go quickly); a
 * confirmed one when the mismatches of one pass over it exceed 1 + P / 8
 * (the order changed: another phase, a new shape).  A drop needs no
 * relearning from scratch: the ring and the table keep the recent
 * launches, so the next launch whose key came round proposes the new
 * cycle at once.  Cycles longer than MAX_CYCLE launches are not learned.
 *
 * Locking: one mutex over all of it: the cycle is the process's order of
 * launches, whatever thread made them.  A forked child gets it afresh.
 */
#include "config.h"

#include <pthread.h>

#include "preload/preload.h"

/* The longest step learned, in launches (a 7B model's training step is a few thousand). */
#define MAX_CYCLE 65536
/* The ring of recent launches: a cycle of MAX_CYCLE must still be in it when it comes round. */
#define RING (2 * MAX_CYCLE)
/* Slots of the key table: a power of two, twice the ring (probes stay short). */
#define KEY_SLOTS (2 * RING)
/* Expected launches a launch may skip over (the first steps' extras, a free). */
#define LOOKAHEAD 4
/*
 * Exact matches in a row that confirm a proposed cycle: its length, at
 * least CONFIRM_MIN (two launches of one kernel alternating on two buffers
 * match twice by chance) and at most CONFIRM.
 */
#define CONFIRM_MIN 4
#define CONFIRM 16

struct entry {
	uint64_t kernel;
	uint64_t big;           /* the largest segment named, 0 if none */
};

struct key {
	struct entry e;
	uint64_t at;            /* 1 + the launch's number (0: an empty slot) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct entry ring[RING];    /* lock: launch n at n % RING */
static struct entry cyc[MAX_CYCLE]; /* lock: the cycle, as proposed */
static struct key keys[KEY_SLOTS]; /* lock: each key's last launch */
static uint64_t n_seen;            /* lock: launches recorded */
static uint64_t cycle_len;         /* lock: 0 while none is known */
static uint64_t pos;               /* lock: the position expected next */
static uint64_t misses;            /* lock: mismatches in this pass (or since proposed) */
static uint64_t run;               /* lock: matches in a row since proposed */
static int confirmed;              /* lock */
static uint64_t generation;        /* lock: bumped at each cycle proposed */
static struct vmmxp_cycle_stats st; /* lock */

/* A forked child's lock afresh (launch.c's fork handler). */
void vmmxp_cycle_after_fork(void)
{
	pthread_mutex_init(&lock, NULL);
}

static size_t key_slot(const struct entry *e)
{
	uint64_t h = (e->kernel * 0x9e3779b97f4a7c15ull) ^ (e->big * 0xc2b2ae3d27d4eb4full);

	return (size_t)(h >> 32) & (KEY_SLOTS - 1);
}

/*
 * lock held: the key of @e; its last launch number comes back in *@prev
 * (0 if unseen or gone from the ring), and it is set to @now.  A full
 * probe sequence overwrites the home slot (an old key is forgotten).
 */
static void key_swap(const struct entry *e, uint64_t now, uint64_t *prev)
{
	size_t home = key_slot(e), i = home;

	*prev = 0;
	for (int probes = 0; probes < 64; probes++, i = (i + 1) & (KEY_SLOTS - 1)) {
		struct key *k = &keys[i];

		if (k->at && (k->e.kernel != e->kernel || k->e.big != e->big))
			continue;
		if (k->at && now - (k->at - 1) <= MAX_CYCLE)
			*prev = k->at;
		*k = (struct key){ *e, now + 1 };
		return;
	}
	keys[home] = (struct key){ *e, now + 1 };
}

/* Whether a launch of @kernel naming @segs matches the recorded @e. */
static int matches(const struct entry *e, uint64_t kernel, const uint64_t *segs, size_t n)
{
	if (e->kernel != kernel)
		return 0;
	if (!e->big)
		return 1;
	for (size_t i = 0; i < n; i++)
		if (segs[i] == e->big)
			return 1;
	return 0;
}

static void drop(void)
{
	cycle_len = 0;
	if (confirmed)
		st.dropped++;
	else
		st.rejected++;
}

/* lock held: one mismatch; the cycle goes when there are too many. */
static void mismatch(uint64_t k)
{
	misses += k;
	run = 0;
	if (confirmed ? misses > 1 + cycle_len / 8 : misses > 1)
		drop();
}

/* lock held: position @p matched (@exact: by kernel and largest segment); the cycle moves on. */
static void advance(uint64_t p, int exact)
{
	pos = p + 1;
	if (pos == cycle_len) {
		pos = 0;
		if (confirmed)
			misses = 0;
	}
	if (!confirmed && exact &&
	    ++run >= (cycle_len < CONFIRM_MIN ? CONFIRM_MIN : cycle_len < CONFIRM ? cycle_len : CONFIRM)) {
		confirmed = 1;
		misses = 0;
		st.learned++;
		st.last_len = cycle_len;
	}
}

long vmmxp_cycle_note(uint64_t kernel, const uint64_t *segs, size_t n, uint64_t big)
{
	struct entry e = { kernel, big };
	uint64_t prev;
	long at = -1;

	pthread_mutex_lock(&lock);
	key_swap(&e, n_seen, &prev);
	if (cycle_len) {
		uint64_t k, p;

		for (k = 0; k <= LOOKAHEAD && k < cycle_len; k++)
			if (matches(&cyc[(pos + k) % cycle_len], kernel, segs, n))
				break;
		p = (pos + k) % cycle_len;
		if (k == 0) {
			at = (long)p;
			advance(p, 1);
			st.in_cycle++;
		} else if (!confirmed && prev) {
			/* A proposal that does not hold gives way to this launch's own. */
			drop();
		} else {
			int found = k <= LOOKAHEAD && k < cycle_len;

			/* Not found: the same kernel on other memory stands in for the expected one. */
			if (!found && cyc[pos].kernel == kernel) {
				p = pos;
				found = 1;
				k = 1;
			}
			mismatch(found ? k : 1);
			if (found && cycle_len) {
				at = (long)p;
				advance(p, 0);
				st.in_cycle++;
			}
		}
	}
	ring[n_seen % RING] = e;
	if (!cycle_len && prev) {
		/* The key came round: the launches since its last one are the cycle. */
		cycle_len = n_seen - (prev - 1);
		for (uint64_t i = 0; i < cycle_len; i++)
			cyc[i] = ring[(prev - 1 + i) % RING];
		pos = 0;
		misses = 0;
		run = 0;
		confirmed = 0;
		generation++;
		st.proposed++;
		advance(0, 1);
		at = 0;
	}
	n_seen++;
	pthread_mutex_unlock(&lock);
	return at;
}

struct vmmxp_cycle_stats vmmxp_cycle_stats(void)
{
	struct vmmxp_cycle_stats s;

	pthread_mutex_lock(&lock);
	s = st;
	pthread_mutex_unlock(&lock);
	return s;
}

uint64_t vmmxp_cycle_len(uint64_t *generation_p)
{
	uint64_t n;

	pthread_mutex_lock(&lock);
	n = cycle_len;
	if (generation_p)
		*generation_p = generation;
	pthread_mutex_unlock(&lock);
	return n;
}
