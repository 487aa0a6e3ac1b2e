// SPDX-License-Identifier: MIT
/*
 * alloc.c - the framework allocator: a caching allocator over libvmmx
 * buffers (the process-wide instances behind PyTorch's and CuPy's entry
 * points are in alloc_frameworks.c).
 *
 * Why caching: a buffer per tensor pays a reservation, a handle, a map and a
 * grant (tens of microseconds on the GPU), and frameworks allocate thousands
 * of tensors a step.  So memory comes in segments, each a buffer made once
 * and placed by the policy chunk by chunk, carved into blocks:
 *  - small pool: requests up to SMALL_MAX, in SMALL_SEG segments, split down
 *    to MIN_BLOCK;
 *  - large pool: requests up to LARGE_MAX, in LARGE_SEG segments, split when
 *    more than SMALL_MAX would be left over;
 *  - huge: bigger requests get a segment of their own, never split, reused
 *    whole by a request that wastes at most HUGE_WASTE of it.  A tensor that
 *    big then owns its chunks, so prefetch and eviction can move them
 *    without touching anything else.
 * The sizes are PyTorch's (kSmallSize, kSmallBuffer, kMinLargeAlloc,
 * kLargeBuffer), so fragmentation behaves as users know it.  Free blocks sit
 * in segregated best-fit bins (4 per power of two, a bitmap of non-empty
 * bins); live blocks in a hash table by address; address neighbours in a
 * segment merge when both are free.
 *
 * Streams: every segment belongs to one stream, as in PyTorch.  A block freed
 * on its segment's stream is reusable at once by that stream (its queued
 * work keeps its order).  A block freed on another stream waits, pending,
 * for an event recorded on that stream at the free.  An idle segment (one
 * free block covering it) moves to another stream only after an event
 * recorded on its own stream, after it went idle, has completed; the event
 * is recorded when another stream first wants the segment and checked
 * without waiting, so a busy stream's segment is passed over (stream_waits)
 * and a new segment is made instead.  Events come from a small pool.
 *
 * Giving memory back: idle segments are destroyed by empty_cache(), and
 * when a new segment would not fit on the device (its room, after limits
 * and headroom) or creating it failed: the device is synchronised (nothing
 * queued may still use what goes) and idle segments are released, then the
 * segment is made.
 *
 * Locking: one mutex per allocator, a->lock, protects everything in struct
 * vmmx_alloc after it and every segment and block.  It is held across
 * segment creation and destruction (driver calls), as PyTorch holds its own.
 * Buffers have their own locks, inner to a->lock.  The process-wide table
 * (alloc_frameworks.c) is written under vmmx__alloc_global_lock and read
 * with acquire loads.  Every allocator is
 * on a list (alloc_list_lock) so that the atfork handlers can take them all:
 * global_lock, then alloc_list_lock, then each a->lock, all outer to the
 * context list's lock and every context lock (internal.h).
 *
 * Layer: the top of lib/ (docs/DESIGN.md, "Inside lib/"); its public part is
 * include/vmmx/alloc.h, and the process-wide instances and the PyTorch and
 * CuPy entry points are in alloc_frameworks.c.  It uses buffers through the
 * public API (vmmx_buf_create, _resize, _residency, _destroy, vmmx_prefetch),
 * orders reuse across streams with vmmx_event_* on the framework's own
 * streams, waits for the device with vmmx_sync(), and asks vmmx_ctx_room()
 * whether a new segment fits on the device before it releases idle ones.
 * What it still takes from under the public API, and why each has no
 * public equivalent:
 *  - the policy: one reference to the instance (vmmx__policy_get/put, the
 *    context's default spec from ctx->policy) for the allocator's life.
 *    Segments come and go with empty_cache() and reclaims; the instance
 *    lives while a buffer or a reference holds it, so without ours its
 *    state (lru's recency, for one) would be finalised and the plugin
 *    unloaded whenever the last segment went, and loaded again with the
 *    next.  It also checks a spec at vmmx_alloc_create() without creating
 *    a buffer (a reservation, a driver call).  The API has no policy handle
 *    to hold;
 *  - vmmx__read_mostly_advise() under buf->lock, after an unlocked look at
 *    buf->read_mostly: a freed block's read-mostly marks go (unmark()).
 *    vmmx_buf_advise(VMMX_ADVISE_NOT_READ_MOSTLY) clears the same marks but
 *    then tells the policy and lets it rebalance, which may move chunks of
 *    the segment's other blocks while kernels use them; and segments never
 *    advised would pay its lock on every free;
 *  - tags and sleep: the thread's tag scope (vmmx__tag_cur), a segment
 *    buffer's tag (buf->tag) and sleep state (buf->sleep), read lock-free
 *    on every huge-segment lookup (seg_serves_tag()).  vmmx_buf_tag()
 *    copies the tag under an RCU read lock, and no call reads the scope or
 *    one buffer's sleep state;
 *  - ctx->chunk_min and ctx->device: read-only facts of the context.
 *    vmmx_ctx_query() gives both but reads the driver's free memory, and
 *    vmmx_alloc_create() calls no driver; vmmx__round_up(), a size helper;
 *  - fork and errors: vmmx__inherited()/ctx->pid/vmmx__pid for the fork
 *    rule, vmmx__atfork_install_outer() to take the allocators' locks
 *    around a fork, and the context's log with vmmx__fail()/vmmx__logf()
 *    and the last-error calls: the library's one error and log path.
 *
 * fork(): an allocator belongs to its context's process.  In a forked child
 * every entry point on the parent's allocators fails at once with
 * -VMMX_ENODRIVER (alloc_inherited(), checked before any lock or driver
 * call): a cache hit would hand out memory the parent owns, and anything
 * else calls the driver.  vmmx_alloc_destroy() frees the child's copy of the
 * records only.  The atfork handlers (fork.c, with this file's
 * atfork_prepare/atfork_release run first) hold every lock named above
 * across the fork, so the child's copies are free and consistent.
 */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/alloc.h"

/* Requests are rounded up to this: the alignment of every block (PyTorch's kMinBlockSize). */
#define MIN_BLOCK ((size_t)512)
/* Largest request of the small pool, and its segments (kSmallSize, kSmallBuffer). */
#define SMALL_MAX ((size_t)1 << 20)
#define SMALL_SEG ((size_t)2 << 20)
/* Largest request of the large pool (below kMinLargeAlloc), and its segments (kLargeBuffer). */
#define LARGE_MAX (((size_t)10 << 20) - 1)
#define LARGE_SEG ((size_t)20 << 20)
/* A huge segment serves a request that leaves at most 1/HUGE_WASTE of it unused, or 2 MiB. */
#define HUGE_WASTE 8
#define HUGE_SLACK ((size_t)2 << 20)
/* Bins: 4 per power of two from 512 B; the last takes everything from 24 MiB up. */
#define NBINS 64
/* Blocks a best-fit scan of one bin looks at before it settles. */
#define BIN_SCAN 16
/* Events kept for reuse; more are destroyed. */
#define EVENT_POOL 64

enum seg_kind { SEG_SMALL, SEG_LARGE, SEG_HUGE };
enum blk_state { BLK_FREE, BLK_LIVE, BLK_PENDING };

struct seg;

struct blk {
	uintptr_t ptr;
	size_t size;
	size_t req;                     /* live: bytes asked for */
	struct seg *seg;
	struct blk *prev, *next;        /* address neighbours in the segment */
	struct blk *fprev, *fnext;      /* free: its bin or huge list; pending: the list */
	struct blk *hnext;              /* live: hash chain */
	struct vmmx_event *ev;          /* pending: the event it waits for */
	uint8_t state;                  /* enum blk_state */
	uint8_t bin;                    /* free, small or large: its bin */
};

struct bins {
	uint64_t map;                   /* bit i: head[i] is not empty */
	struct blk *head[NBINS];
};

/* The free memory of one stream. */
struct spool {
	void *stream;                   /* a CUstream (NULL: the default stream) */
	struct bins small, large;
	struct blk *huge;               /* idle huge segments' blocks, ascending size */
};

struct seg {
	struct seg *prev, *next;        /* a->segs */
	struct vmmx_buf *buf;
	uintptr_t base;
	size_t size;
	enum seg_kind kind;
	struct spool *sp;               /* the stream it belongs to */
	struct blk *head;               /* lowest block; never changes (merges keep the lower) */
	struct vmmx_event *idle_ev;     /* recorded on sp's stream while idle; NULL none */
};

struct vmmx_alloc {
	struct vmmx_ctx *ctx;           /* read-only */
	struct vmmx__policy *policy;    /* read-only: a reference, keeps the spec loaded */
	int device;                     /* read-only */
	struct vmmx_alloc *list_prev, *list_next; /* every allocator: alloc_list_lock */
	pthread_mutex_t lock;
	struct seg *segs;
	struct spool **sps;             /* one per stream seen */
	size_t nsp, sp_cap;
	struct spool *last_sp;          /* the last one used: streams repeat */
	struct blk **ht;                /* live blocks by address */
	size_t ht_cap, ht_n;            /* ht_cap: a power of two */
	struct blk *pending;            /* blocks freed on another stream */
	struct blk *spare;              /* unused block records */
	struct vmmx_event *ev_pool[EVENT_POOL];
	size_t nev;
	struct vmmx_alloc_stats st;     /* counters; per-location bytes filled by stats() */
};

/* ---- every allocator, for the atfork handlers ---- */

static pthread_mutex_t alloc_list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vmmx_alloc *alloc_list; /* alloc_list_lock */

static void alloc_list_add(struct vmmx_alloc *a)
{
	pthread_mutex_lock(&alloc_list_lock);
	a->list_prev = NULL;
	a->list_next = alloc_list;
	if (alloc_list)
		alloc_list->list_prev = a;
	alloc_list = a;
	pthread_mutex_unlock(&alloc_list_lock);
}

static void alloc_list_del(struct vmmx_alloc *a)
{
	pthread_mutex_lock(&alloc_list_lock);
	if (a->list_prev)
		a->list_prev->list_next = a->list_next;
	else
		alloc_list = a->list_next;
	if (a->list_next)
		a->list_next->list_prev = a->list_prev;
	pthread_mutex_unlock(&alloc_list_lock);
}

/* Whether @a is the parent's (this is a forked child): see the top of the file. */
static bool alloc_inherited(const struct vmmx_alloc *a)
{
	return vmmx__inherited(a->ctx);
}

/* Fail @fn on an inherited allocator: -VMMX_ENODRIVER naming both processes. */
static int fail_inherited(const struct vmmx_alloc *a, const char *fn)
{
	return vmmx__fail(&a->ctx->conf.log, -VMMX_ENODRIVER,
			  "%s: allocator inherited from the parent process %d; CUDA cannot be "
			  "used after fork (this is process %d): only vmmx_alloc_destroy may be "
			  "called on it here",
			  fn, a->ctx->pid, __atomic_load_n(&vmmx__pid, __ATOMIC_RELAXED));
}

/* ---- events ---- */

static int ev_get(struct vmmx_alloc *a, struct vmmx_event **e)
{
	if (a->nev) {
		*e = a->ev_pool[--a->nev];
		return 0;
	}
	return vmmx_event_create(a->ctx, e);
}

static void ev_put(struct vmmx_alloc *a, struct vmmx_event *e)
{
	if (!e)
		return;
	if (a->nev < EVENT_POOL) {
		a->ev_pool[a->nev++] = e;
		return;
	}
	/* A failed destroy of an idle event leaks one driver object: logged there. */
	vmmx_event_destroy(e);
}

/* ---- blocks, bins, hash ---- */

static struct blk *blk_new(struct vmmx_alloc *a)
{
	struct blk *b = a->spare;

	if (b) {
		a->spare = b->fnext;
		memset(b, 0, sizeof(*b));
		return b;
	}
	return calloc(1, sizeof(*b));
}

static void blk_drop(struct vmmx_alloc *a, struct blk *b)
{
	b->fnext = a->spare;
	a->spare = b;
}

static unsigned int bin_of(size_t size)
{
	unsigned int fl = 63 - (unsigned int)__builtin_clzll(size);
	unsigned int idx;

	if (fl < 9)
		return 0;
	idx = (fl - 9) * 4 + (unsigned int)((size >> (fl - 2)) & 3);
	return idx < NBINS ? idx : NBINS - 1;
}

static struct bins *bins_of(struct spool *sp, const struct seg *s)
{
	return s->kind == SEG_SMALL ? &sp->small : &sp->large;
}

/* Put a free block where allocations look for it. */
static void free_insert(struct blk *b)
{
	struct seg *s = b->seg;

	b->state = BLK_FREE;
	b->fprev = NULL;
	if (s->kind == SEG_HUGE) {
		struct blk *p = NULL, *n = s->sp->huge;

		while (n && n->size < b->size) {
			p = n;
			n = n->fnext;
		}
		b->fprev = p;
		b->fnext = n;
		if (n)
			n->fprev = b;
		if (p)
			p->fnext = b;
		else
			s->sp->huge = b;
		return;
	}
	struct bins *bn = bins_of(s->sp, s);

	b->bin = (uint8_t)bin_of(b->size);
	b->fnext = bn->head[b->bin];
	if (b->fnext)
		b->fnext->fprev = b;
	bn->head[b->bin] = b;
	bn->map |= 1ull << b->bin;
}

static void free_remove(struct blk *b)
{
	struct seg *s = b->seg;

	if (b->fnext)
		b->fnext->fprev = b->fprev;
	if (b->fprev) {
		b->fprev->fnext = b->fnext;
		return;
	}
	if (s->kind == SEG_HUGE) {
		s->sp->huge = b->fnext;
		return;
	}
	struct bins *bn = bins_of(s->sp, s);

	bn->head[b->bin] = b->fnext;
	if (!b->fnext)
		bn->map &= ~(1ull << b->bin);
}

/* The smallest block of at least @size among the first BIN_SCAN of a bin. */
static struct blk *bin_best(struct blk *b, size_t size)
{
	struct blk *best = NULL;

	for (int n = 0; b && n < BIN_SCAN; b = b->fnext, n++)
		if (b->size >= size && (!best || b->size < best->size))
			best = b;
	return best;
}

static struct blk *bins_find(struct bins *bn, size_t size)
{
	unsigned int i = bin_of(size);
	struct blk *b = bn->map & (1ull << i) ? bin_best(bn->head[i], size) : NULL;
	uint64_t m;

	if (b || i == NBINS - 1)
		return b;
	/* every block of a higher bin is big enough: the smallest of the first one */
	m = bn->map & (~0ull << (i + 1));
	return m ? bin_best(bn->head[__builtin_ctzll(m)], size) : NULL;
}

/* Whether a huge segment of @have bytes may serve a request of @want. */
static bool huge_fits(size_t have, size_t want)
{
	size_t slack = want / HUGE_WASTE > HUGE_SLACK ? want / HUGE_WASTE : HUGE_SLACK;

	return have >= want && have - want <= slack;
}

/* ---- sleep and wake: tagged segments (vmmx_tag_scope, sleep.c) ----
 *
 * A request made while the thread has a tag gets a huge segment (a buffer
 * of its own, which carries the tag from vmmx_buf_create), and a huge
 * segment serves again only requests of its own tag while it is awake: so
 * a tag's memory never shares a buffer with another tag's, and an idle
 * segment whose tag sleeps is never handed out.  Frameworks already ask
 * for segment-sized blocks in a tagged scope (PyTorch's caching allocator
 * over a memory pool per tag, python/vmmx/_torch_sleep.py).
 */
static bool seg_serves_tag(const struct seg *s)
{
	const char *t = __atomic_load_n(&s->buf->tag, __ATOMIC_ACQUIRE);

	if (__atomic_load_n(&s->buf->sleep, __ATOMIC_ACQUIRE) != VMMX__AWAKE)
		return false;
	return !strcmp(t ? t : "", vmmx__tag_cur);
}

static struct blk *huge_find(struct spool *sp, size_t size)
{
	for (struct blk *b = sp->huge; b; b = b->fnext)
		if (b->size >= size && seg_serves_tag(b->seg))
			return huge_fits(b->size, size) ? b : NULL;
	return NULL;
}

static size_t ht_slot(const struct vmmx_alloc *a, uintptr_t p)
{
	return (size_t)(((p >> 9) * 0x9E3779B97F4A7C15ull) >> 32) & (a->ht_cap - 1);
}

static int ht_grow(struct vmmx_alloc *a)
{
	size_t cap = a->ht_cap ? a->ht_cap * 2 : 1024;
	struct blk **n = calloc(cap, sizeof(*n)), **old = a->ht;
	size_t oldcap = a->ht_cap;

	if (!n)
		return -VMMX_ENOMEM;
	a->ht = n;
	a->ht_cap = cap;
	for (size_t i = 0; i < oldcap; i++) {
		struct blk *b = old[i], *next;

		for (; b; b = next) {
			size_t k = ht_slot(a, b->ptr);

			next = b->hnext;
			b->hnext = n[k];
			n[k] = b;
		}
	}
	free(old);
	return 0;
}

static void ht_insert(struct vmmx_alloc *a, struct blk *b)
{
	size_t k = ht_slot(a, b->ptr);

	b->hnext = a->ht[k];
	a->ht[k] = b;
	a->ht_n++;
}

/* The link that holds the live block at @p (so that it can be unlinked), or NULL. */
static struct blk **ht_link(struct vmmx_alloc *a, uintptr_t p)
{
	struct blk **pp;

	if (!a->ht_cap)
		return NULL;
	for (pp = &a->ht[ht_slot(a, p)]; *pp; pp = &(*pp)->hnext)
		if ((*pp)->ptr == p)
			return pp;
	return NULL;
}

/* Unlink the block that @pp (from ht_link()) holds, and return it. */
static struct blk *ht_unlink(struct vmmx_alloc *a, struct blk **pp)
{
	struct blk *b = *pp;

	*pp = b->hnext;
	a->ht_n--;
	return b;
}

/* ---- streams ---- */

static struct spool *spool_find(struct vmmx_alloc *a, void *s)
{
	if (a->last_sp && a->last_sp->stream == s)
		return a->last_sp;
	for (size_t i = 0; i < a->nsp; i++)
		if (a->sps[i]->stream == s)
			return a->last_sp = a->sps[i];
	return NULL;
}

static struct spool *spool_get(struct vmmx_alloc *a, void *s)
{
	struct spool *sp = spool_find(a, s), **n;

	if (sp)
		return sp;
	if (a->nsp == a->sp_cap) {
		size_t cap = a->sp_cap ? a->sp_cap * 2 : 4;

		n = realloc(a->sps, cap * sizeof(*n));
		if (!n)
			return NULL;
		a->sps = n;
		a->sp_cap = cap;
	}
	sp = calloc(1, sizeof(*sp));
	if (!sp)
		return NULL;
	sp->stream = s;
	a->sps[a->nsp++] = sp;
	return a->last_sp = sp;
}

/* ---- segments ---- */

static bool seg_idle(const struct seg *s)
{
	return s->head->state == BLK_FREE && s->head->size == s->size;
}

static void seg_location_bytes(const struct seg *s, uint64_t *dev, uint64_t *host)
{
	struct vmmx_residency r;

	if (vmmx_buf_residency(s->buf, 0, s->size, &r))
		return;
	*dev += r.device;
	*host += r.host;
}

/* Destroy an idle segment: its block leaves the free lists, its buffer goes. */
static void seg_release(struct vmmx_alloc *a, struct seg *s)
{
	free_remove(s->head);
	blk_drop(a, s->head);
	if (s->prev)
		s->prev->next = s->next;
	else
		a->segs = s->next;
	if (s->next)
		s->next->prev = s->prev;
	ev_put(a, s->idle_ev);
	vmmx_buf_destroy(s->buf);
	a->st.reserved_bytes -= s->size;
	a->st.segments--;
	a->st.segment_frees++;
	free(s);
}

/*
 * Release idle segments that hold device memory until @want bytes of them
 * went (all of them for UINT64_MAX).  The device is synchronised first:
 * work queued before the frees may still use the memory.  Returns bytes
 * released.
 */
static uint64_t release_idle(struct vmmx_alloc *a, uint64_t want, bool device_only)
{
	uint64_t got = 0;
	struct seg *s, *next;

	for (s = a->segs; s; s = s->next) {
		uint64_t dev = 0, host = 0;

		if (!seg_idle(s))
			continue;
		seg_location_bytes(s, &dev, &host);
		if (dev || !device_only)
			break;
	}
	if (!s)
		return 0;
	if (vmmx_sync(a->ctx))
		return 0; /* a device that cannot finish its work keeps its memory */
	for (s = a->segs; s && got < want; s = next) {
		uint64_t dev = 0, host = 0;

		next = s->next;
		if (!seg_idle(s))
			continue;
		seg_location_bytes(s, &dev, &host);
		if (device_only && !dev)
			continue;
		got += s->size;
		seg_release(a, s);
	}
	return got;
}

static size_t seg_size_for(const struct vmmx_alloc *a, enum seg_kind kind, size_t req)
{
	size_t sz = kind == SEG_SMALL ? SMALL_SEG : kind == SEG_LARGE ? LARGE_SEG : req;

	return vmmx__round_up(sz, a->ctx->chunk_min);
}

static int seg_make(struct vmmx_alloc *a, struct spool *sp, enum seg_kind kind, size_t size,
		    struct seg **s_p)
{
	struct vmmx_ctx *ctx = a->ctx;
	struct vmmx_loc dev = { VMMX_LOC_DEVICE, a->device };
	struct vmmx_residency r;
	struct vmmx_buf *buf = NULL;
	struct seg *s;
	struct blk *b;
	size_t room;
	int err;

	s = calloc(1, sizeof(*s));
	b = blk_new(a);
	if (!s || !b) {
		err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_alloc: out of memory");
		goto err_mem;
	}
	/*
	 * Idle cached segments on the device would push the new one to host
	 * memory (or out of room): give them back first.
	 */
	if (!vmmx_ctx_room(ctx, dev, size, &room) && room < size && release_idle(a, size, true))
		a->st.reclaims++;
	err = vmmx_buf_create(ctx, size, a->policy->spec, &buf);
	if (err)
		goto err_mem;
	err = vmmx_buf_resize(buf, size);
	if (err == -VMMX_ENOMEM) {
		char msg[768];

		/* the walk over idle segments reads residency, which clears the message */
		snprintf(msg, sizeof(msg), "%s", vmmx_last_error());
		if (release_idle(a, UINT64_MAX, false)) {
			a->st.reclaims++;
			err = vmmx_buf_resize(buf, size);
		} else {
			vmmx__set_last_error(msg);
		}
	}
	if (err)
		goto err_buf;
	/*
	 * One location per segment.  Frameworks copy tensors with plain
	 * cudaMemcpy, and the driver crashes on a copy whose range runs from
	 * device chunks into host chunks (docs/DRIVER.md; PyTorch's model.cuda()
	 * past a device limit did on the H100): a segment the policy placed
	 * partly on the device goes wholly to host memory.  If that fails (host
	 * limit) it stays as placed, which is still correct for kernels.
	 */
	if (vmmx_buf_residency(buf, 0, size, &r))
		r.host = 0; /* not counted as a fallback */
	else if (r.host && r.device &&
		 !vmmx_prefetch(ctx, vmmx_buf_ptr(buf), size,
				(struct vmmx_loc){ VMMX_LOC_HOST, 0 }, NULL))
		r.host = size; /* moved whole */
	s->buf = buf;
	s->base = (uintptr_t)vmmx_buf_ptr(buf);
	s->size = size;
	s->kind = kind;
	s->sp = sp;
	s->head = b;
	b->ptr = s->base;
	b->size = size;
	b->seg = s;
	s->next = a->segs;
	if (a->segs)
		a->segs->prev = s;
	a->segs = s;
	a->st.segments++;
	a->st.segment_allocs++;
	a->st.reserved_bytes += size;
	if (a->st.reserved_bytes > a->st.reserved_peak)
		a->st.reserved_peak = a->st.reserved_bytes;
	if (r.host) {
		a->st.fallback_segments++;
		a->st.fallback_bytes += r.host;
	}
	free_insert(b);
	*s_p = s;
	return 0;

err_buf:
	vmmx_buf_destroy(buf);
err_mem:
	if (b)
		blk_drop(a, b);
	free(s);
	return err;
}

/*
 * Hand an idle segment of another stream to @sp once its stream's work up
 * to now has completed: an event is recorded the first time and checked
 * without waiting.  True when it moved.
 */
static bool seg_adopt(struct vmmx_alloc *a, struct seg *s, struct spool *sp)
{
	int err;

	if (!s->idle_ev) {
		if (ev_get(a, &s->idle_ev))
			return false;
		err = vmmx_event_record(s->idle_ev, s->sp->stream);
		if (err) {
			ev_put(a, s->idle_ev);
			s->idle_ev = NULL;
			return false;
		}
	}
	err = vmmx_event_query(s->idle_ev);
	if (err) {
		/* -VMMX_EBUSY: still running.  A driver error: treat it as busy too. */
		a->st.stream_waits++;
		return false;
	}
	ev_put(a, s->idle_ev);
	s->idle_ev = NULL;
	free_remove(s->head);
	s->sp = sp;
	free_insert(s->head);
	a->st.stream_reuses++;
	return true;
}

/* Pending frees whose event completed become free blocks. */
static void poll_pending(struct vmmx_alloc *a);

/* ---- allocation ---- */

static struct blk *find_block(struct spool *sp, enum seg_kind kind, size_t size)
{
	if (kind == SEG_HUGE)
		return huge_find(sp, size);
	return bins_find(kind == SEG_SMALL ? &sp->small : &sp->large, size);
}

/* An idle segment of another stream that can serve the request, adopted; NULL if none. */
static struct blk *adopt_block(struct vmmx_alloc *a, struct spool *sp, enum seg_kind kind,
			       size_t size)
{
	for (struct seg *s = a->segs; s; s = s->next) {
		if (s->sp == sp || s->kind != kind || !seg_idle(s) || s->size < size)
			continue;
		if (kind == SEG_HUGE && (!huge_fits(s->size, size) || !seg_serves_tag(s)))
			continue;
		if (seg_adopt(a, s, sp))
			return s->head;
	}
	return NULL;
}

/* Take @size bytes from the front of free block @b; the rest stays free if big enough. */
static int take(struct vmmx_alloc *a, struct blk *b, size_t size)
{
	struct seg *s = b->seg;
	size_t rest = b->size - size;
	bool split = s->kind == SEG_SMALL ? rest >= MIN_BLOCK
					  : s->kind == SEG_LARGE && rest > SMALL_MAX;

	free_remove(b);
	if (split) {
		struct blk *r = blk_new(a);

		/* without a record for the rest, the block is used whole */
		if (r) {
			r->ptr = b->ptr + size;
			r->size = rest;
			r->seg = s;
			r->prev = b;
			r->next = b->next;
			if (b->next)
				b->next->prev = r;
			b->next = r;
			b->size = size;
			free_insert(r);
		}
	}
	/* the segment is in use again: an event marking it idle means nothing now */
	if (s->idle_ev) {
		ev_put(a, s->idle_ev);
		s->idle_ev = NULL;
	}
	b->state = BLK_LIVE;
	return 0;
}

static enum seg_kind kind_of(size_t size)
{
	return size <= SMALL_MAX ? SEG_SMALL : size <= LARGE_MAX ? SEG_LARGE : SEG_HUGE;
}

VMMX_API int vmmx_alloc_malloc(struct vmmx_alloc *a, size_t size, void *stream, void **ptr_p)
{
	enum seg_kind kind;
	struct spool *sp;
	struct blk *b;
	size_t want;
	int err;

	vmmx__clear_last_error();
	if (!a || !ptr_p)
		return vmmx__fail(a ? &a->ctx->conf.log : NULL, -VMMX_EINVAL,
				  "vmmx_alloc_malloc: %s is NULL", a ? "ptr_p" : "the allocator");
	if (alloc_inherited(a))
		return fail_inherited(a, "vmmx_alloc_malloc");
	if (!size) {
		*ptr_p = NULL;
		return 0;
	}
	if (size > SIZE_MAX / 2)
		return vmmx__fail(&a->ctx->conf.log, -VMMX_ENOMEM,
				  "vmmx_alloc_malloc: %zu bytes is more than any device holds", size);
	want = vmmx__round_up(size, MIN_BLOCK);
	kind = vmmx__tag_cur[0] ? SEG_HUGE : kind_of(want); /* a tag: a segment of its own */
	if (kind == SEG_HUGE)
		want = vmmx__round_up(want, a->ctx->chunk_min);

	pthread_mutex_lock(&a->lock);
	sp = spool_get(a, stream);
	if (!sp || (a->ht_n >= a->ht_cap && ht_grow(a))) {
		pthread_mutex_unlock(&a->lock);
		return vmmx__fail(&a->ctx->conf.log, -VMMX_ENOMEM,
				  "vmmx_alloc_malloc: out of memory");
	}
	/* frees on other streams are rare (PyTorch frees on the allocation stream) */
	if (a->pending)
		poll_pending(a);
	b = find_block(sp, kind, want);
	if (!b)
		b = adopt_block(a, sp, kind, want);
	if (b) {
		a->st.cache_hits++;
	} else {
		struct seg *s = NULL;

		err = seg_make(a, sp, kind, seg_size_for(a, kind, want), &s);
		if (err) {
			a->st.failures++;
			pthread_mutex_unlock(&a->lock);
			return err;
		}
		b = s->head;
	}
	take(a, b, want);
	b->req = size;
	ht_insert(a, b);
	a->st.allocs++;
	a->st.active_blocks++;
	a->st.allocated_bytes += b->size;
	a->st.requested_bytes += size;
	if (a->st.allocated_bytes > a->st.allocated_peak)
		a->st.allocated_peak = a->st.allocated_bytes;
	pthread_mutex_unlock(&a->lock);
	*ptr_p = (void *)b->ptr;
	return 0;
}

/* A free block joins its free neighbours (the lower record survives) and the free lists. */
static void make_free(struct vmmx_alloc *a, struct blk *b)
{
	struct blk *p = b->prev, *n = b->next;

	if (p && p->state == BLK_FREE) {
		free_remove(p);
		p->size += b->size;
		p->next = n;
		if (n)
			n->prev = p;
		blk_drop(a, b);
		b = p;
	}
	n = b->next;
	if (n && n->state == BLK_FREE) {
		free_remove(n);
		b->size += n->size;
		b->next = n->next;
		if (n->next)
			n->next->prev = b;
		blk_drop(a, n);
	}
	free_insert(b);
}

static void pending_unlink(struct vmmx_alloc *a, struct blk *b)
{
	if (b->fprev)
		b->fprev->fnext = b->fnext;
	else
		a->pending = b->fnext;
	if (b->fnext)
		b->fnext->fprev = b->fprev;
}

static void poll_pending(struct vmmx_alloc *a)
{
	struct blk *b, *next;

	for (b = a->pending; b; b = next) {
		next = b->fnext;
		/* -VMMX_EBUSY: not yet; a driver error: keep it until empty_cache() */
		if (vmmx_event_query(b->ev))
			continue;
		pending_unlink(a, b);
		ev_put(a, b->ev);
		b->ev = NULL;
		make_free(a, b);
	}
}

/*
 * A freed block's memory is no longer its tensor's: the read-mostly promise
 * made for it (vmmx_advise) ends, or a later tensor's writes would be lost
 * when its chunks move back to host memory.  Costs nothing for segments
 * never advised.
 */
static void unmark(struct vmmx_alloc *a, const struct blk *b)
{
	struct vmmx_buf *buf = b->seg->buf;

	if (!__atomic_load_n(&buf->read_mostly, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&buf->lock);
	if (vmmx__read_mostly_advise(buf, b->ptr - b->seg->base, b->size, false))
		vmmx__logf(&a->ctx->conf.log, VMMX_LOG_ERROR,
			   "vmmx_alloc_free(%p): the block stays marked read-mostly: %s",
			   (void *)b->ptr, vmmx_last_error());
	pthread_mutex_unlock(&buf->lock);
}

VMMX_API int vmmx_alloc_free(struct vmmx_alloc *a, void *ptr, void *stream)
{
	struct vmmx_event *ev = NULL;
	struct blk **pp, *b;
	int err = 0;

	vmmx__clear_last_error();
	if (!a)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_alloc_free: the allocator is NULL");
	if (alloc_inherited(a))
		return fail_inherited(a, "vmmx_alloc_free");
	if (!ptr)
		return 0;
	pthread_mutex_lock(&a->lock);
	pp = ht_link(a, (uintptr_t)ptr);
	if (!pp) {
		pthread_mutex_unlock(&a->lock);
		return vmmx__fail(&a->ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_alloc_free(%p): not an address this allocator returned, "
				  "or freed already", ptr);
	}
	b = *pp;
	/*
	 * Freed on another stream: usable once that stream's work up to here
	 * is done.  The event is recorded before the block is taken, so that a
	 * stream the driver refuses (-VMMX_EINVAL: the caller's mistake, not
	 * the device's) fails the call with the block still allocated and
	 * valid.  Any other failure takes the block anyway, as the header
	 * says: the caller will not free it again.
	 */
	if (stream != b->seg->sp->stream) {
		err = ev_get(a, &ev);
		if (!err) {
			err = vmmx_event_record(ev, stream);
			if (err) {
				ev_put(a, ev);
				ev = NULL;
			}
		}
		if (err == -VMMX_EINVAL) {
			char why[512];

			snprintf(why, sizeof(why), "%s", vmmx_last_error());
			pthread_mutex_unlock(&a->lock);
			return vmmx__fail(&a->ctx->conf.log, -VMMX_EINVAL,
					  "vmmx_alloc_free(%p, stream %p): the driver refuses the "
					  "stream (%s); the memory stays allocated",
					  ptr, stream, why);
		}
	}
	ht_unlink(a, pp); /* the chain is as ht_link() found it: a->lock is held */
	unmark(a, b);
	a->st.frees++;
	a->st.active_blocks--;
	a->st.allocated_bytes -= b->size;
	a->st.requested_bytes -= b->req;
	if (stream == b->seg->sp->stream) {
		make_free(a, b);
		goto out;
	}
	a->st.cross_stream_frees++;
	/*
	 * Without an event the block waits, pending, for empty_cache(), which
	 * synchronises the device: never reused early, only late.
	 */
	b->ev = ev;
	b->state = BLK_PENDING;
	b->fprev = NULL;
	b->fnext = a->pending;
	if (a->pending)
		a->pending->fprev = b;
	a->pending = b;
out:
	pthread_mutex_unlock(&a->lock);
	return err;
}

VMMX_API int vmmx_alloc_empty_cache(struct vmmx_alloc *a)
{
	struct blk *b, *next;
	int err;

	vmmx__clear_last_error();
	if (!a)
		return vmmx__fail(NULL, -VMMX_EINVAL,
				  "vmmx_alloc_empty_cache: the allocator is NULL");
	if (alloc_inherited(a))
		return fail_inherited(a, "vmmx_alloc_empty_cache");
	pthread_mutex_lock(&a->lock);
	err = vmmx_sync(a->ctx);
	if (err) {
		pthread_mutex_unlock(&a->lock);
		return err;
	}
	/* After the sync every pending free is complete, whatever its event says. */
	for (b = a->pending; b; b = next) {
		next = b->fnext;
		pending_unlink(a, b);
		ev_put(a, b->ev);
		b->ev = NULL;
		make_free(a, b);
	}
	release_idle(a, UINT64_MAX, false);
	pthread_mutex_unlock(&a->lock);
	return 0;
}

/* ---- life ---- */

/*
 * Free what an allocator holds - its segments' buffers, its events, its
 * records - and the allocator.  In a forked child vmmx_buf_destroy() and
 * vmmx_event_destroy() free this process's copies of the records only, with
 * no driver call: the buffers and events are the parent's.  The policy
 * reference is the caller's to drop.
 */
static void alloc_free_all(struct vmmx_alloc *a)
{
	struct seg *s, *next;
	struct blk *b, *bn;

	for (s = a->segs; s; s = next) {
		next = s->next;
		for (b = s->head; b; b = bn) {
			bn = b->next;
			vmmx_event_destroy(b->ev);
			free(b);
		}
		vmmx_event_destroy(s->idle_ev);
		vmmx_buf_destroy(s->buf);
		free(s);
	}
	for (b = a->spare; b; b = bn) {
		bn = b->fnext;
		free(b);
	}
	/* Destroying an idle event fails only with a lost context: logged there. */
	for (size_t i = 0; i < a->nev; i++)
		vmmx_event_destroy(a->ev_pool[i]);
	for (size_t i = 0; i < a->nsp; i++)
		free(a->sps[i]);
	free(a->sps);
	free(a->ht);
	pthread_mutex_destroy(&a->lock);
	free(a);
}

VMMX_API int vmmx_alloc_create(struct vmmx_ctx *ctx, const char *policy, struct vmmx_alloc **a_p)
{
	struct vmmx_alloc *a;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !a_p)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_alloc_create: %s is NULL",
				  ctx ? "a_p" : "ctx");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_alloc_create");
	a = calloc(1, sizeof(*a));
	if (!a)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_alloc_create: out of memory");
	a->ctx = ctx;
	a->device = ctx->device;
	if (policy) {
		err = vmmx__policy_get(ctx, policy, &a->policy);
		if (err)
			goto err_alloc;
	} else {
		/* the context's default: share its instance, with a reference of our own */
		err = vmmx__policy_get(ctx, ctx->policy->spec, &a->policy);
		if (err)
			goto err_alloc;
	}
	err = pthread_mutex_init(&a->lock, NULL);
	if (err) {
		err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_alloc_create: mutex: %s",
				 strerror(err));
		goto err_policy;
	}
	a->st.device = a->device;
	/* Before the list's lock is first taken: the atfork handlers take it. */
	err = vmmx__alloc_atfork_install();
	if (err) {
		err = vmmx__fail(&ctx->conf.log, err, "vmmx_alloc_create: pthread_atfork failed");
		goto err_mutex;
	}
	alloc_list_add(a);
	*a_p = a;
	return 0;

err_mutex:
	pthread_mutex_destroy(&a->lock);
err_policy:
	vmmx__policy_put(ctx, a->policy);
err_alloc:
	free(a);
	return err;
}

VMMX_API void vmmx_alloc_destroy(struct vmmx_alloc *a)
{
	struct vmmx__policy *pol;
	struct vmmx_ctx *ctx;

	if (!a)
		return;
	alloc_list_del(a);
	/*
	 * A forked child: this process's copy of the records goes, with no
	 * driver call, wait or warning.  The policy reference is left to the
	 * context, whose destructor frees inherited policies whole without
	 * their fini.
	 */
	if (alloc_inherited(a)) {
		alloc_free_all(a);
		return;
	}
	if (a->st.active_blocks)
		vmmx__logf(&a->ctx->conf.log, VMMX_LOG_WARN,
			   "vmmx_alloc_destroy: %llu allocations still live (%llu bytes): released",
			   (unsigned long long)a->st.active_blocks,
			   (unsigned long long)a->st.allocated_bytes);
	/* Swallowed: a device that fails to sync is lost anyway; release regardless. */
	(void)vmmx_sync(a->ctx);
	ctx = a->ctx;
	pol = a->policy;
	alloc_free_all(a);
	vmmx__policy_put(ctx, pol);
}

VMMX_API int vmmx_alloc_stats(struct vmmx_alloc *a, struct vmmx_alloc_stats *st)
{
	struct vmmx_alloc_stats out;

	vmmx__clear_last_error();
	if (!a || !st)
		return vmmx__fail(a ? &a->ctx->conf.log : NULL, -VMMX_EINVAL,
				  "vmmx_alloc_stats: NULL argument");
	if (alloc_inherited(a))
		return fail_inherited(a, "vmmx_alloc_stats");
	if (st->size < offsetof(struct vmmx_alloc_stats, version) + sizeof(st->version))
		return vmmx__fail(&a->ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_alloc_stats: size %zu is too small", st->size);
	pthread_mutex_lock(&a->lock);
	out = a->st;
	out.device_reserved = out.host_reserved = 0;
	out.device_allocated = out.host_allocated = 0;
	for (struct seg *s = a->segs; s; s = s->next) {
		seg_location_bytes(s, &out.device_reserved, &out.host_reserved);
		for (struct blk *b = s->head; b; b = b->next) {
			struct vmmx_residency r;

			if (b->state != BLK_LIVE ||
			    vmmx_buf_residency(s->buf, b->ptr - s->base, b->size, &r))
				continue;
			out.device_allocated += r.device;
			out.host_allocated += r.host;
		}
	}
	pthread_mutex_unlock(&a->lock);
	out.size = st->size < sizeof(out) ? st->size : sizeof(out);
	out.version = VMMX_ALLOC_STATS_VERSION;
	memcpy(st, &out, out.size);
	return 0;
}

VMMX_API struct vmmx_ctx *vmmx_alloc_ctx(const struct vmmx_alloc *a)
{
	return a ? a->ctx : NULL;
}

/* ---- fork ---- */

pthread_mutex_t vmmx__alloc_global_lock = PTHREAD_MUTEX_INITIALIZER;

/* Take every allocator lock before a fork (the process-wide allocators'
 * lock, the list's, each a->lock)... */
static void atfork_prepare(void)
{
	pthread_mutex_lock(&vmmx__alloc_global_lock);
	pthread_mutex_lock(&alloc_list_lock);
	for (struct vmmx_alloc *a = alloc_list; a; a = a->list_next)
		pthread_mutex_lock(&a->lock);
}

/* ...and release them after it, in the parent and in the child. */
static void atfork_release(void)
{
	for (struct vmmx_alloc *a = alloc_list; a; a = a->list_next)
		pthread_mutex_unlock(&a->lock);
	pthread_mutex_unlock(&alloc_list_lock);
	pthread_mutex_unlock(&vmmx__alloc_global_lock);
}

int vmmx__alloc_atfork_install(void)
{
	return vmmx__atfork_install_outer(atfork_prepare, atfork_release);
}

bool vmmx__alloc_inherited(const struct vmmx_alloc *a, const char *fn)
{
	if (!alloc_inherited(a))
		return false;
	vmmx__clear_last_error();
	fail_inherited(a, fn);
	return true;
}
