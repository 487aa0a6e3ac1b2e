// SPDX-License-Identifier: MIT
/*
 * cycle.c - the launch cycle: a training or inference step launches the
 * same kernels on much the same memory in the same order, step after step.
 * The watch (launch.c) gives each launch its kernel, the segments it
 * named, each known by the address that named it (its base, or a place
 * inside it when one segment holds many tensors, a model's weights carved
 * out of one allocation), with their sizes, and which of them is its key
 * segment (the largest its kernel's last launch did not name: a layer's
 * weights); below, a segment is a place so named.  This
 * file learns the cycle they repeat and says where in it each launch
 * falls, so that placement can know the next use of every segment (the
 * furthest one is the best victim) and what the next launches will name
 * (to bring it in ahead).
 *
 * Matching: a launch is "the same" as a recorded one when it runs the same
 * kernel and names the key segment that one had (a layer's weights).
 * Everything else may vary between steps without breaking the cycle: a
 * workspace or an activation at another address, a segment more or less.
 * Two launches of one kernel on different weights never match.  One of
 * the same kernel whose key segment is another of the same size is a
 * rotation: a caching allocator hands a kernel's activations out again in
 * another order, and a kernel whose key segments are activations (a
 * ReLU on two equal buffers) then names other memory from step to step.
 *
 * Learning: every launch is recorded in a ring (its kernel, its key
 * segment and the first SEGS - 1 others it named), and the last position
 * of each (kernel, key segment) key is kept in a hash table.  A launch whose key was seen P
 * launches ago would propose a cycle of P launches; the proposal is first
 * verified: each of the last W = min(P, VERIFY) launches is compared with
 * the one P launches before it, and at most W / 8 may differ (7/8 the
 * same: a few launches that vary, a workspace moved, an extra launch
 * near the end of the window, still pass).  A pair counts as the same when the later launch
 * matches the earlier one, or when it is a rotation of an earlier launch
 * whose key segment more than one launch of the earlier window named
 * (an activation passed from kernel to kernel: a layer's weights are named
 * once a step, so the same kernel on another layer's weights is no
 * rotation).  A key that comes round inside a step (an activation named
 * every other layer) would propose a short cycle whose launches of
 * distinct weights differ: it is refused.  Where fewer than W launches
 * precede the key's last one (the first step of a program), there is
 * nothing to compare with: the proposal is taken on its word if no cycle
 * is held.  A proposal taken is used at once (placement may use it from
 * the next launch).  Whether held or proposed, each launch is then
 * compared with the one the cycle expects (the launch at that place in the
 * last pass, so that memory that moves is followed):
 *  - it matches: the cycle moves on;
 *  - it is a rotation of it: it stands in for the expected launch, a
 *    mismatch, and the cycle moves on;
 *  - it matches one of the next LOOKAHEAD expected ones: the launches
 *    between were skipped (a launch of the first steps only, a free), each
 *    a mismatch, and the cycle moves past it;
 *  - neither, but it runs the expected kernel: it stands in for the
 *    expected launch (its memory moved: a workspace, an activation), a
 *    mismatch, and the cycle moves on;
 *  - none of these: an extra launch, a mismatch; the cycle stays.
 * A proposal verified over a window of CONFIRM launches is confirmed at
 * once (the launches already repeat it); a shorter one, or one taken on
 * its word (the first step), is
 * confirmed once min(P, CONFIRM), and at least CONFIRM_MIN,
 * launches in a row matched it or stood in for the expected one as a
 * rotation (a rotation is a mismatch all the same, but it does not break
 * the run: a step whose activations rotate is confirmed as one whose
 * activations stay).  A cycle is dropped when its mismatches exceed
 * 1 + P / 8: since it was proposed, while unconfirmed; in one pass over it
 * once confirmed (the order changed: another phase, a new shape), where
 * rotations do not count (a PyTorch chain's ReLUs rotate a quarter of the
 * step's launches every pass; two models of one shape run in turns still
 * differ in their weights, which are no rotation).  An
 * unconfirmed one also gives way at a mismatch to the launch's own
 * proposal, when that one is verified.  A drop needs no relearning from
 * scratch: the ring and the table keep the recent launches, so the first
 * launch whose key came round and whose window repeats proposes the new
 * cycle.  Cycles longer than MAX_CYCLE launches are not learned.
 *
 * Cost: the verification runs only where a proposal would be made, never
 * while a confirmed cycle holds; it is O(VERIFY * SEGS).  Every launch
 * otherwise costs a table probe, a ring entry and a comparison or two.
 *
 * Locking: one mutex over all of it: the cycle is the process's order of
 * launches, whatever thread made them.  A forked child gets it afresh.
 */
#include "config.h"

#include <pthread.h>
#include <string.h>

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
 * Matches in a row that confirm a proposed cycle: its length, at least
 * CONFIRM_MIN (two launches of one kernel alternating on two buffers match
 * twice by chance) and at most CONFIRM.
 */
#define CONFIRM_MIN 4
#define CONFIRM 16
/*
 * Launches compared to verify a proposal: a layer or two of a model (a
 * transformer layer launches some 10 to 20 kernels), few enough that a
 * verification costs little more than the proposal's copy, and that a
 * step's cycle is verified soon into the second step (the window must lie
 * past the launches before the first step, which do not repeat).
 */
#define VERIFY 16
/*
 * Segments of a launch recorded: a kernel's weights and its activations
 * (a GEMM names three matrices, an optimizer step four).
 */
#define SEGS 4
/* Slots of the window's segment count: a power of two, twice its most. */
#define COUNT_SLOTS (2 * VERIFY * SEGS)

/* What a launch is known by in the cycle. */
struct entry {
	uint64_t kernel;
	uint64_t big;           /* the key segment named, 0 if none */
	uint64_t size;          /* its size */
};

/* A launch recorded: its entry and the first other segments it named. */
struct rec {
	struct entry e;
	uint64_t more[SEGS - 1]; /* 0 past the last */
};

struct key {
	uint64_t kernel, big;
	uint64_t at;            /* 1 + the launch's number (0: an empty slot) */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rec ring[RING];      /* lock: launch n at n % RING */
static struct entry cyc[MAX_CYCLE]; /* lock: the cycle, each launch as last seen at its place */
static struct key keys[KEY_SLOTS]; /* lock: each key's last launch */
static uint64_t n_seen;            /* lock: launches recorded */
static uint64_t cycle_len;         /* lock: 0 while none is known */
static uint64_t pos;               /* lock: the position expected next */
static uint64_t misses;            /* lock: mismatches in this pass (or since proposed) */
static uint64_t run;               /* lock: matches (and rotations) in a row since proposed */
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

		if (k->at && (k->kernel != e->kernel || k->big != e->big))
			continue;
		if (k->at && now - (k->at - 1) <= MAX_CYCLE)
			*prev = k->at;
		*k = (struct key){ e->kernel, e->big, now + 1 };
		return;
	}
	keys[home] = (struct key){ e->kernel, e->big, now + 1 };
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

/*
 * Whether the launch known by @e is a rotation of the recorded @want: the
 * same kernel, its key segment another of the same size.
 */
static int rotation(const struct entry *want, const struct entry *e)
{
	return want->kernel == e->kernel && want->big && e->big && want->big != e->big &&
	       want->size == e->size;
}

/*
 * @r from a launch of @kernel naming the @n segments @segs (of @sizes):
 * its key segment, segs[@key] (the watch's choice, launch.c), or with @key
 * at @n or past it the largest (of equal sizes the first named, as
 * parameter order is the same at every step); then the first others
 * named, each once.  A kernel
 * names few: one that names more than SEGS keeps its first ones, which is
 * enough to compare launches that came round, and costs a launch little.
 */
static void rec_make(struct rec *r, uint64_t kernel, const uint64_t *segs, const size_t *sizes,
		     size_t n, size_t key)
{
	size_t big = key < n && segs[key] ? key : n, m = 0;

	for (size_t i = 0; i < n && key >= n; i++)
		if (segs[i] && (big == n || sizes[i] > sizes[big]))
			big = i;
	r->e = (struct entry){ kernel, big < n ? segs[big] : 0, big < n ? sizes[big] : 0 };
	for (size_t i = 0; i < n && m < SEGS - 1; i++) {
		size_t j = 0;

		while (j < m && r->more[j] != segs[i])
			j++;
		if (segs[i] && segs[i] != r->e.big && j == m)
			r->more[m++] = segs[i];
	}
	while (m < SEGS - 1)
		r->more[m++] = 0;
}

/* Whether the recorded @later matches the recorded @earlier (matches() on what the ring keeps). */
static int rec_matches(const struct rec *earlier, const struct rec *later)
{
	uint64_t segs[SEGS] = { later->e.big };

	for (int j = 1; j < SEGS; j++)
		segs[j] = later->more[j - 1];
	return matches(&earlier->e, later->e.kernel, segs, SEGS);
}

/* The window's segments and how many of its launches named each. */
struct seg_count {
	uint64_t seg;
	unsigned n;
};

static struct seg_count *count_slot(struct seg_count *c, uint64_t seg)
{
	size_t i = (size_t)((seg * 0x9e3779b97f4a7c15ull) >> 40) & (COUNT_SLOTS - 1);

	while (c[i].seg && c[i].seg != seg)
		i = (i + 1) & (COUNT_SLOTS - 1);
	return &c[i];
}

/* lock held: @c counts the segments the @w launches from @first named (at most VERIFY). */
static void count_window(struct seg_count *c, uint64_t first, uint64_t w)
{
	memset(c, 0, COUNT_SLOTS * sizeof(*c));
	for (uint64_t j = first; j < first + w; j++) {
		const struct rec *r = &ring[j % RING];

		for (int k = 0; k < SEGS; k++) {
			uint64_t seg = k ? r->more[k - 1] : r->e.big;
			struct seg_count *s;

			if (!seg)
				break;
			s = count_slot(c, seg);
			s->seg = seg;
			s->n++;
		}
	}
}

/*
 * lock held: whether the cycle of @d launches that launch @now proposes
 * repeats over the last min(@d, VERIFY) launches (see the top comment);
 * a refusal is counted.  Launch @now - @d is recorded: its key came round.
 * @thin_ok: whether one with too few launches before it to compare with
 * passes (none is held), or is refused (it would replace one).  Return: 2
 * when it repeats over a whole window of at least CONFIRM launches (the
 * cycle is then confirmed at once), 1 when it repeats over a shorter one
 * or is taken on its word (@thin_ok), 0 when refused.
 */
static int verify(uint64_t now, uint64_t d, int thin_ok)
{
	struct seg_count count[COUNT_SLOTS];
	uint64_t w = d < VERIFY ? d : VERIFY, bad = 0;
	int counted = 0;

	/*
	 * Nothing before the first launches to compare with: a key that came
	 * round before a window of launches preceded it (the first step of a
	 * program) is taken on its word where no cycle is held, as confirming
	 * it will show whether it holds.  The ring holds the rest
	 * (d + VERIFY <= RING).
	 */
	if (now + 1 - d < w) {
		st.refused += !thin_ok;
		return thin_ok;
	}
	/* 2: verified over a whole window of CONFIRM launches or more (see vmmxp_cycle_note()). */
	for (uint64_t j = now + 1 - w; j <= now; j++) {
		const struct rec *a = &ring[(j - d) % RING], *b = &ring[j % RING];

		if (rec_matches(a, b))
			continue;
		if (rotation(&a->e, &b->e)) {
			if (!counted)
				count_window(count, now + 1 - w - d, w);
			counted = 1;
			if (count_slot(count, a->e.big)->n > 1)
				continue;
		}
		if (++bad > w / 8) {
			st.refused++;
			return 0;
		}
	}
	return w >= CONFIRM ? 2 : 1;
}

static void drop(void)
{
	cycle_len = 0;
	if (confirmed)
		st.dropped++;
	else
		st.rejected++;
}

/*
 * lock held: @k mismatches (@rotated: a rotation, which keeps the run and,
 * the cycle confirmed, is not counted); it goes past 1 + P / 8.
 */
static void mismatch(uint64_t k, int rotated)
{
	/* A confirmed cycle does not count rotations: a step's activations may rotate every pass. */
	if (!(rotated && confirmed))
		misses += k;
	if (!rotated)
		run = 0;
	if (misses > 1 + cycle_len / 8)
		drop();
}

/*
 * lock held: position @p matched (@exact: by kernel and key segment,
 * or a rotation of it); the cycle moves on.
 */
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

long vmmxp_cycle_note(uint64_t kernel, const uint64_t *segs, const size_t *sizes, size_t n,
		      size_t key)
{
	struct rec r;
	uint64_t prev, d = 0;
	int verified = -1; /* this launch's proposal: -1 not verified yet */
	long at = -1;

	rec_make(&r, kernel, segs, sizes, n, key);
	pthread_mutex_lock(&lock);
	key_swap(&r.e, n_seen, &prev);
	ring[n_seen % RING] = r;
	if (prev)
		d = n_seen - (prev - 1);
	if (cycle_len) {
		uint64_t k = 0, p;
		int rotated = 0;

		if (!matches(&cyc[pos], kernel, segs, n)) {
			/* A rotation stands in for the expected launch before any further match is looked for. */
			rotated = rotation(&cyc[pos], &r.e);
			for (k = 1; !rotated && k <= LOOKAHEAD && k < cycle_len; k++)
				if (matches(&cyc[(pos + k) % cycle_len], kernel, segs, n))
					break;
		}
		p = (pos + k) % cycle_len;
		if (k == 0 && !rotated) {
			at = (long)p;
			cyc[p] = r.e;
			advance(p, 1);
			st.in_cycle++;
		} else if (!confirmed && prev && (verified = verify(n_seen, d, 0))) {
			/* A proposal that does not hold gives way to this launch's own, verified. */
			drop();
		} else {
			int found = !rotated && k <= LOOKAHEAD && k < cycle_len;

			/* Not found: the same kernel on other memory stands in for the expected one. */
			if (!found && cyc[pos].kernel == kernel) {
				p = pos;
				found = 1;
				k = 1;
			}
			mismatch(found ? k : 1, rotated);
			if (found && cycle_len) {
				at = (long)p;
				cyc[p] = r.e;
				advance(p, rotated);
				st.in_cycle++;
			}
		}
	}
	if (!cycle_len && prev && verified < 0)
		verified = verify(n_seen, d, 1);
	if (!cycle_len && prev && verified) {
		/* The key came round and the launches before it repeat: they are the cycle. */
		cycle_len = d;
		for (uint64_t i = 0; i < cycle_len; i++)
			cyc[i] = ring[(prev - 1 + i) % RING].e;
		pos = 0;
		misses = 0;
		run = 0;
		confirmed = 0;
		generation++;
		st.proposed++;
		advance(0, 1);
		/* Verified over a whole window: the launches already repeat it, no run is awaited. */
		if (verified == 2 && !confirmed) {
			confirmed = 1;
			st.learned++;
			st.last_len = cycle_len;
		}
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

int vmmxp_cycle_confirmed(uint64_t gen)
{
	int yes;

	pthread_mutex_lock(&lock);
	yes = cycle_len && confirmed && gen == generation;
	pthread_mutex_unlock(&lock);
	return yes;
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
