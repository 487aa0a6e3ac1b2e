// SPDX-License-Identifier: MIT
/*
 * lru - device first; when the device is full, spill its least recently
 * used chunks to pinned host memory to make room, and promote them back
 * when room frees or when they are needed again.
 *
 * Recency comes from what libvmmx tells the policy: chunks placed now are
 * hot, vmmx_buf_advise() marks ranges hot (an explicit touch), cold, read
 * mostly or will-need.  libvmmx sees no hardware access counters, so a
 * chunk a kernel reads without advice does not get warmer.
 *
 *  - evict(): the device lacks room for a new chunk: the coldest device
 *    chunks (of buffers using this instance) go to host, coldest first;
 *  - rebalance(), after advice or freed room: chunks advised will-need come
 *    to the device, hottest first, each swapping out device chunks colder
 *    than itself when there is no room; then chunks this policy spilled
 *    earlier come back while room lasts (no swapping for those).
 *
 * Arguments: none.  Counters: evicted, promoted.
 * State: one entry per chunk, in an array searched linearly under a mutex
 * (placement is not a hot path; thousands of chunks are fine).
 */
#include <pthread.h>

#include "policies/args.h"

struct ent {
	uint64_t buf_id;
	size_t off, size;
	struct vmmx_loc loc;
	uint64_t stamp;         /* larger is more recent; 0 is coldest */
	int want;               /* advised will-need and not on the device yet */
	int spilled;            /* moved to host as a victim */
	int spill_pending;      /* named as a victim; spilled once the move happens */
	int mark;               /* named in the answer being built (rebalance only) */
};

struct lru {
	pthread_mutex_t lock;
	const struct vmmx_policy_host *host;
	struct ent *e;
	size_t n, cap;
	uint64_t clock;
	uint64_t chunk;         /* bound on placed chunks (chunk=SIZE); read-only */
};

/*
 * Default bound on the chunks this policy places: the unit it spills and
 * promotes.  libvmmx's own default has no bound below the location's size
 * (a grow is one handle); an LRU needs victims smaller than the working set.
 */
#define LRU_CHUNK_DEFAULT (1ull << 30)

static int lru_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
	struct policy_arg a[1];
	uint64_t chunk = LRU_CHUNK_DEFAULT;
	struct lru *st;
	int n = policy_args_parse(host, args, a, 1);

	if (n < 0)
		return -VMMX_EINVAL;
	if (n && (strcmp(a[0].key, "chunk") || host->parse_size(a[0].val, 0, &chunk) || !chunk)) {
		host->log(host, VMMX_LOG_ERROR,
			  "lru takes chunk=SIZE (the unit it spills and promotes), got \"%s=%s\"",
			  a[0].key, a[0].val);
		return -VMMX_EINVAL;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return -VMMX_ENOMEM;
	st->chunk = chunk;
	pthread_mutex_init(&st->lock, NULL);
	st->host = host;
	*state_p = st;
	return 0;
}

static void lru_fini(void *state)
{
	struct lru *st = state;

	pthread_mutex_destroy(&st->lock);
	free(st->e);
	free(st);
}

static int lru_place(void *state, const struct vmmx_policy_request *req,
		     struct vmmx_policy_answer *ans)
{
	const struct lru *st = state;

	ans->locs[0] = (struct vmmx_loc){ VMMX_LOC_DEVICE, req->device };
	ans->locs[1] = (struct vmmx_loc){ VMMX_LOC_HOST, 0 };
	ans->nlocs = 2;
	ans->max_len = st->chunk;
	return 0;
}

static struct ent *find(struct lru *st, uint64_t buf_id, size_t off)
{
	for (size_t i = 0; i < st->n; i++)
		if (st->e[i].buf_id == buf_id && st->e[i].off == off)
			return &st->e[i];
	return NULL;
}

static void lru_chunk_event(void *state, const struct vmmx_policy_chunk *c, int event)
{
	struct lru *st = state;
	struct ent *e;

	pthread_mutex_lock(&st->lock);
	e = find(st, c->buf_id, c->offset);
	switch (event) {
	case VMMX_POLICY_EV_PLACED:
		if (!e && st->n == st->cap) {
			size_t cap = st->cap ? st->cap * 2 : 64;
			struct ent *n = realloc(st->e, cap * sizeof(*n));

			/* Out of memory: the chunk goes untracked (never a victim). */
			if (!n)
				break;
			st->e = n;
			st->cap = cap;
		}
		if (!e)
			e = &st->e[st->n++];
		*e = (struct ent){ .buf_id = c->buf_id, .off = c->offset, .size = c->size,
				   .loc = c->loc, .stamp = ++st->clock };
		break;
	case VMMX_POLICY_EV_RELEASED:
		if (e)
			*e = st->e[--st->n];
		break;
	case VMMX_POLICY_EV_MOVED:
		/* Locations change only here, when libvmmx has really moved the
		 * chunk: a named move may be skipped (a busy buffer, no room). */
		if (e) {
			e->loc = c->loc;
			if (c->loc.kind == VMMX_LOC_DEVICE)
				e->want = e->spilled = 0;
			else
				e->spilled = e->spill_pending;
			e->spill_pending = 0;
		}
		break;
	}
	pthread_mutex_unlock(&st->lock);
}

static void lru_advise(void *state, uint64_t buf_id, size_t off, size_t len, int advice)
{
	struct lru *st = state;

	pthread_mutex_lock(&st->lock);
	for (size_t i = 0; i < st->n; i++) {
		struct ent *e = &st->e[i];

		if (e->buf_id != buf_id || e->off >= off + len || e->off + e->size <= off)
			continue;
		if (advice == VMMX_ADVISE_NOT_READ_MOSTLY)
			continue; /* how it is written, not when it is used */
		if (advice == VMMX_ADVISE_COLD) {
			e->stamp = 0;
			e->want = 0;
		} else {
			e->stamp = ++st->clock;
			if (advice == VMMX_ADVISE_WILL_NEED && e->loc.kind != VMMX_LOC_DEVICE)
				e->want = 1;
		}
	}
	pthread_mutex_unlock(&st->lock);
}

/* Indexes of entries on @dev, coldest first, colder than @below; returns the count. */
static size_t coldest(struct lru *st, int dev, uint64_t below, size_t *idx)
{
	size_t n = 0;

	for (size_t i = 0; i < st->n; i++)
		if (st->e[i].loc.kind == VMMX_LOC_DEVICE && st->e[i].loc.id == dev &&
		    st->e[i].stamp < below && !st->e[i].want && !st->e[i].mark)
			idx[n++] = i;
	for (size_t i = 1; i < n; i++)
		for (size_t j = i; j > 0 && st->e[idx[j]].stamp < st->e[idx[j - 1]].stamp; j--) {
			size_t t = idx[j];

			idx[j] = idx[j - 1];
			idx[j - 1] = t;
		}
	return n;
}

static size_t lru_evict(void *state, const struct vmmx_policy_request *req, struct vmmx_loc want,
			uint64_t need, struct vmmx_policy_move *moves, size_t max)
{
	struct lru *st = state;
	uint64_t got = 0;
	size_t n = 0, nv, *idx;

	if (want.kind != VMMX_LOC_DEVICE)
		return 0;
	pthread_mutex_lock(&st->lock);
	idx = malloc((st->n ? st->n : 1) * sizeof(*idx));
	nv = idx ? coldest(st, want.id, UINT64_MAX, idx) : 0;
	for (size_t i = 0; i < nv && got < need && n < max; i++) {
		struct ent *e = &st->e[idx[i]];

		moves[n++] = (struct vmmx_policy_move){ e->buf_id, e->off, { VMMX_LOC_HOST, 0 } };
		e->spill_pending = 1;
		got += e->size;
	}
	free(idx);
	pthread_mutex_unlock(&st->lock);
	if (n)
		st->host->counter_add(st->host, "evicted", n);
	return n;
}

static size_t lru_rebalance(void *state, const struct vmmx_policy_room *room, size_t nroom,
			    struct vmmx_policy_move *moves, size_t max)
{
	struct lru *st = state;
	struct vmmx_loc dev = { VMMX_LOC_DEVICE, st->host->device }, host = { VMMX_LOC_HOST, 0 };
	uint64_t free_dev = 0;
	size_t n = 0, promoted = 0, *idx, *vic;

	for (size_t i = 0; i < nroom; i++)
		if (room[i].loc.kind == dev.kind && room[i].loc.id == dev.id)
			free_dev = room[i].room;
	pthread_mutex_lock(&st->lock);
	idx = malloc((st->n ? st->n : 1) * sizeof(*idx));
	vic = malloc((st->n ? st->n : 1) * sizeof(*vic));
	if (!idx || !vic)
		goto out;
	/* Entries named in this answer are marked, not moved: their locations
	 * change when libvmmx reports the moves (chunk_event). */
	for (size_t i = 0; i < st->n; i++)
		st->e[i].mark = 0;
	/* 1. will-need chunks, hottest first, swapping colder ones out. */
	for (;;) {
		struct ent *best = NULL;
		uint64_t sum = 0;
		size_t nv, k;

		for (size_t i = 0; i < st->n; i++)
			if (st->e[i].want && !st->e[i].mark && st->e[i].loc.kind != VMMX_LOC_DEVICE &&
			    (!best || st->e[i].stamp > best->stamp))
				best = &st->e[i];
		if (!best || n >= max)
			break;
		best->mark = 1;
		if (free_dev < best->size) {
			nv = coldest(st, dev.id, best->stamp, vic);
			for (k = 0; k < nv && free_dev + sum < best->size; k++)
				sum += st->e[vic[k]].size;
			if (free_dev + sum < best->size || n + k + 1 > max)
				continue; /* cannot make room without evicting hotter data */
			for (size_t j = 0; j < k; j++) {
				struct ent *v = &st->e[vic[j]];

				moves[n++] = (struct vmmx_policy_move){ v->buf_id, v->off, host };
				v->mark = 1;
				v->spill_pending = 1;
			}
			free_dev += sum;
		}
		moves[n++] = (struct vmmx_policy_move){ best->buf_id, best->off, dev };
		free_dev -= best->size;
		promoted++;
	}
	/* 2. spilled chunks come back while room lasts, hottest first. */
	for (;;) {
		struct ent *best = NULL;

		for (size_t i = 0; i < st->n; i++)
			if (st->e[i].spilled && !st->e[i].mark && st->e[i].loc.kind != VMMX_LOC_DEVICE &&
			    st->e[i].size <= free_dev && (!best || st->e[i].stamp > best->stamp))
				best = &st->e[i];
		if (!best || n >= max)
			break;
		moves[n++] = (struct vmmx_policy_move){ best->buf_id, best->off, dev };
		best->mark = 1;
		free_dev -= best->size;
		promoted++;
	}
	for (size_t i = 0; i < st->n; i++)
		st->e[i].mark = 0;
out:
	free(idx);
	free(vic);
	pthread_mutex_unlock(&st->lock);
	if (promoted)
		st->host->counter_add(st->host, "promoted", promoted);
	return n;
}

static const struct vmmx_policy_ops ops = {
	.abi_version = VMMX_POLICY_ABI,
	.size = sizeof(struct vmmx_policy_ops),
	.name = "lru",
	.description = "device first; spills least recently used chunks to host, promotes them back",
	.init = lru_init,
	.fini = lru_fini,
	.place = lru_place,
	.chunk_event = lru_chunk_event,
	.advise = lru_advise,
	.evict = lru_evict,
	.rebalance = lru_rebalance,
};

const struct vmmx_policy_ops *VMMX_POLICY_BUILTIN(uint32_t core_abi)
{
	return VMMX_POLICY_ABI_MAJOR_OF(core_abi) == VMMX_POLICY_ABI_MAJOR ? &ops : NULL;
}
