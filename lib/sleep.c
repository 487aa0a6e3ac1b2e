// SPDX-License-Identifier: MIT
/*
 * sleep.c - sleep and wake: the device memory of tagged buffers given back
 * to the driver, and taken again at the same addresses.
 *
 * A buffer carries a tag (vmmx_buf_set_tag, or the creating thread's
 * current tag, vmmx_tag_scope).  Sleep is built on what the layers below
 * already do, so it inherits their guarantees:
 *  - offload: the buffer's device chunks migrate to pinned host memory under
 *    the same address (migrate.c: batched asynchronous copies through two
 *    staging slots, one per run of one location; a read-mostly chunk with a
 *    current host copy is remapped, not copied).  Each chunk moves whole or
 *    not at all, so a failure at any step loses no byte.  Where each run of
 *    device chunks was is recorded, and the wake migrates each run back.
 *  - discard: the buffer shrinks to nothing (its chunks are unmapped), and
 *    the wake grows it back to its old size, placed by its policy.
 * After a sleep the chunks the context keeps cached on the devices involved
 * go back to the driver, so the memory is free for other processes; the
 * host chunks a wake frees go to the cache, where the next sleep finds them
 * (no pinning anew each cycle; vmmx_ctx_trim gives them back).
 *
 * Why sleeping chunks stay mapped to host memory rather than unmapped: a
 * kernel that touches an offloaded buffer by mistake then reads correct
 * data slowly instead of faulting the context, and the migration path
 * (already proven against every failure by the fault layer) needs nothing
 * new.  A discarded buffer has no contents to protect, so it is unmapped.
 *
 * Locking: sleep_lock serialises sleep, wake and tag changes, and guards
 * each buffer's sleep fields (written under it, read atomically by the
 * stats); it is outer to buf->lock, which the migrations and resizes take.
 * A tag string is replaced under sleep_lock and freed after a grace period,
 * so readers (the stats, the buffer pick) read it inside RCU read sections.
 * Destroying a buffer while it is being put to sleep or woken is the
 * caller's race, as for a migration.
 *
 * Layer: addr (docs/DESIGN.md, "Inside lib/"): it walks the buffer list and
 * tables like lookup.c and uses buffers through the public API.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal/addr.h"

static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;

/*
 * Where a sleep's or a wake's time goes, for the info-level line each one
 * logs (VMMX_LOG=info): seconds growing or shrinking buffers, queuing
 * copies, and waiting for them.  Written under sleep_lock.
 */
static struct {
	double resize, copy, wait;
} spent;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The info line of a sleep or wake (@fn) that began at @t0; @resize names
 * what its resizes did (unmapping, growing). */
static void log_spent(struct vmmx_ctx *ctx, const char *fn, const char *resize, size_t n,
		      size_t bytes, double t0)
{
	vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO,
		   "%s: %zu buffers, %zu bytes in %.1f ms: %s %.1f ms, queuing copies %.1f ms, "
		   "waiting for them %.1f ms", fn, n, bytes, (now_s() - t0) * 1e3, resize,
		   spent.resize * 1e3, spent.copy * 1e3, spent.wait * 1e3);
}

static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };

static int check_tag(const char *tag, const char *fn)
{
	if (tag && strnlen(tag, VMMX_TAG_MAX) >= VMMX_TAG_MAX)
		return vmmx__fail(NULL, -VMMX_EINVAL, "%s: tag \"%.*s...\" is longer than %d bytes",
				  fn, 16, tag, VMMX_TAG_MAX - 1);
	return 0;
}

VMMX_API int vmmx_tag_scope(const char *tag)
{
	int err;

	vmmx__clear_last_error();
	err = check_tag(tag, "vmmx_tag_scope");
	if (err)
		return err;
	snprintf(vmmx__tag_cur, sizeof(vmmx__tag_cur), "%s", tag ? tag : "");
	return 0;
}

VMMX_API int vmmx_buf_set_tag(struct vmmx_buf *buf, const char *tag)
{
	char *nt = NULL, *old;
	int err;

	vmmx__clear_last_error();
	if (!buf)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_set_tag: buf is NULL");
	if (vmmx__inherited(buf->ctx))
		return vmmx__fail_inherited(buf->ctx, "vmmx_buf_set_tag");
	err = check_tag(tag, "vmmx_buf_set_tag");
	if (err)
		return err;
	if (tag && *tag) {
		nt = strdup(tag);
		if (!nt)
			return vmmx__fail(&buf->ctx->conf.log, -VMMX_ENOMEM,
					  "vmmx_buf_set_tag: out of memory");
	}
	pthread_mutex_lock(&sleep_lock);
	if (__atomic_load_n(&buf->sleep, __ATOMIC_RELAXED) != VMMX__AWAKE) {
		pthread_mutex_unlock(&sleep_lock);
		free(nt);
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_EBUSY,
				  "vmmx_buf_set_tag: the buffer is asleep (vmmx_wake() it first)");
	}
	old = buf->tag;
	rcu_assign_pointer(buf->tag, nt);
	pthread_mutex_unlock(&sleep_lock);
	if (old) {
		urcu_bp_synchronize_rcu();
		free(old);
	}
	return 0;
}

VMMX_API int vmmx_buf_tag(struct vmmx_buf *buf, char *out, size_t len)
{
	const char *t;
	int err = 0;

	vmmx__clear_last_error();
	if (!buf || !out)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_tag: NULL argument");
	urcu_bp_read_lock();
	t = rcu_dereference(buf->tag);
	if (!t)
		t = "";
	if (strlen(t) >= len)
		err = vmmx__fail(&buf->ctx->conf.log, -VMMX_ERANGE,
				 "vmmx_buf_tag: %zu bytes cannot hold the tag (%zu needed)", len,
				 strlen(t) + 1);
	else
		memcpy(out, t, strlen(t) + 1);
	urcu_bp_read_unlock();
	return err;
}

static bool tag_in(const char *tag, const char *const *tags, size_t ntags)
{
	if (!tag)
		return false;
	if (!tags)
		return true;
	for (size_t i = 0; i < ntags; i++)
		if (tags[i] && !strcmp(tags[i], tag))
			return true;
	return false;
}

/* The buffers of @ctx with one of @tags that are asleep (@asleep) or awake;
 * sleep_lock held, so neither their tags nor their states change. */
static int pick(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags, bool asleep,
		const char *fn, struct vmmx_buf ***v_p, size_t *n_p)
{
	const struct vmmx__buflist *l;
	struct vmmx_buf **v;
	size_t n = 0;

	urcu_bp_read_lock();
	l = rcu_dereference(ctx->bufs);
	v = malloc(((l ? l->n : 0) + 1) * sizeof(*v));
	if (!v) {
		urcu_bp_read_unlock();
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "%s: out of memory", fn);
	}
	for (size_t i = 0; l && i < l->n; i++) {
		struct vmmx_buf *b = l->bufs[i];
		int st = __atomic_load_n(&b->sleep, __ATOMIC_RELAXED);

		if (tag_in(rcu_dereference(b->tag), tags, ntags) && (st != VMMX__AWAKE) == asleep)
			v[n++] = b;
	}
	urcu_bp_read_unlock();
	*v_p = v;
	*n_p = n;
	return 0;
}

/* Record where @buf's device chunks are (runs of one device): the migrated
 * offload moves each run back at the wake. */
static int record_runs(struct vmmx_buf *buf)
{
	const struct vmmx__table *t;
	struct vmmx__sleep_run *r;
	size_t n = 0;

	urcu_bp_read_lock();
	t = rcu_dereference(buf->table);
	r = malloc((t->n + 1) * sizeof(*r));
	if (!r) {
		urcu_bp_read_unlock();
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_ENOMEM, "vmmx_sleep: out of memory");
	}
	for (size_t i = 0; i < t->n && t->c[i].off < t->size; i++) {
		const struct vmmx__chunk *c = &t->c[i];

		if (c->loc.kind != VMMX_LOC_DEVICE)
			continue;
		if (n && r[n - 1].loc.id == c->loc.id && r[n - 1].off + r[n - 1].len == c->off)
			r[n - 1].len += c->size;
		else
			r[n++] = (struct vmmx__sleep_run){ c->off, c->size, c->loc };
	}
	urcu_bp_read_unlock();
	free(buf->sleep_runs);
	buf->sleep_runs = r;
	buf->sleep_nruns = n;
	return 0;
}

static void forget_runs(struct vmmx_buf *buf)
{
	free(buf->sleep_runs);
	buf->sleep_runs = NULL;
	buf->sleep_nruns = 0;
}

/* Move each recorded run back to its device; the first error (each chunk
 * is where it was or moved, intact, whatever happens). */
static int restore_runs(struct vmmx_buf *buf)
{
	int err = 0, e;

	for (size_t i = 0; i < buf->sleep_nruns; i++) {
		const struct vmmx__sleep_run *r = &buf->sleep_runs[i];

		e = vmmx_buf_migrate(buf, r->off, r->len, r->loc, NULL);
		if (e && !err)
			err = e;
	}
	return err;
}

/*
 * ---- offload through a stash ----
 *
 * A buffer with no read-mostly chunk is offloaded into its stash: a buffer
 * of the context placed in pinned host memory (policy "host"), made at the
 * first sleep and kept, mapped and granted, across cycles until
 * vmmx_sleep_release() or the buffer's destruction.  Sleeping copies the
 * contents there and shrinks the buffer to nothing; waking grows it back
 * (placed by its policy, as any grow) and copies the contents in.  So a
 * warm cycle makes no host handle and grants no host mapping: what is left
 * is the copy and the device handles' map and unmap, which overlap: the
 * range moves in pieces of STASH_PIECE bytes on a stream of its own, and
 * while one piece copies the previous one is unmapped (sleep, top down) or
 * the next one mapped (wake, bottom up).
 *
 * The invariant that makes every failure safe: while a buffer is offloaded,
 * [0, its size) is mapped with its data and the stash holds
 * [stash_from, sleep_size) with stash_from <= its size; a piece is unmapped
 * only after its copy into the stash completed, and the stash is only read
 * while the buffer is awake again.  So a failed sleep wakes what it
 * unmapped, and a failed wake shrinks back to stash_from: either way no
 * byte is lost.
 */

/* Bytes per piece: the map or unmap of one overlaps the copy of the other
 * (256 MiB is ~5 ms over PCIe Gen5, ~130 chunk unmaps).  VMMX_SLEEP_PIECE
 * sets it (the tests make it small to have many pieces). */
#define STASH_PIECE (256ull << 20)

static size_t piece_bytes(const struct vmmx_ctx *ctx)
{
	uint64_t p = vmmx__size_resolve(&ctx->conf.sleep_piece, 0, STASH_PIECE);

	p = vmmx__round_up(p ? p : 1, ctx->chunk_min);
	return p > SIZE_MAX ? SIZE_MAX : (size_t)p;
}

/*
 * Queue copies of [off, end) of @buf to its stash (@out) or back, split
 * where the buffer's chunks change between device and host memory: a copy
 * must not straddle the two (docs/DRIVER.md).  The stash is all host memory.
 */
static int stash_copy(struct vmmx_buf *buf, size_t off, size_t end, bool out, vmm_stream_t s)
{
	struct vmmx_ctx *ctx = buf->ctx;
	char *b = (char *)buf->base, *h = (char *)buf->stash->base;
	const struct vmmx__table *t;
	size_t i;
	int err = 0;

	urcu_bp_read_lock();
	t = rcu_dereference(buf->table);
	for (i = vmmx__table_find(t, off); !err && off < end && i < t->n; i++) {
		size_t stop = t->c[i].off + t->c[i].size;
		bool host = vmm_loc_is_host(t->c[i].loc);

		while (stop < end && i + 1 < t->n && vmm_loc_is_host(t->c[i + 1].loc) == host)
		{
			i++;
			stop = t->c[i].off + t->c[i].size;
		}
		if (stop > end)
			stop = end;
		err = out ? vmm_copy_async(ctx->vmm, h + off, b + off, stop - off, s)
			  : vmm_copy_async(ctx->vmm, b + off, h + off, stop - off, s);
		off = stop;
	}
	urcu_bp_read_unlock();
	if (err)
		return vmmx__fail(&ctx->conf.log, err, "vmmx_%s: copying %s the host stash: %s",
				  out ? "sleep" : "wake", out ? "to" : "from",
				  *vmmx_last_error() ? vmmx_last_error() : vmmx_strerror(err));
	return 0;
}

/* A stash of @size bytes for @buf: the kept one, resized, or a new one. */
static int stash_get(struct vmmx_buf *buf, size_t size)
{
	char scope[VMMX_TAG_MAX];
	struct vmmx_buf *st;
	int err;

	if (!buf->stash) {
		/* The stash carries no tag, whatever the thread's scope. */
		memcpy(scope, vmmx__tag_cur, sizeof(scope));
		vmmx__tag_cur[0] = 0;
		err = vmmx_buf_create(buf->ctx, buf->capacity, "host", &st);
		memcpy(vmmx__tag_cur, scope, sizeof(scope));
		if (err)
			return err;
		st->stash_of = buf;
		rcu_assign_pointer(buf->stash, st);
	}
	err = vmmx_buf_resize(buf->stash, size);
	if (err == -VMMX_ENOMEM)
		vmmx__fail(&buf->ctx->conf.log, err,
			   "vmmx_sleep: no host memory for the %zu bytes to offload (%s)", size,
			   vmmx_last_error());
	return err;
}

/* Where the next piece below @size starts: at a chunk boundary, about
 * STASH_PIECE bytes down. */
static size_t piece_below(struct vmmx_buf *buf, size_t size)
{
	const struct vmmx__table *t = buf->table; /* sleep_lock: nobody resizes */
	size_t i = vmmx__table_find(t, size - 1), piece = piece_bytes(buf->ctx);

	while (i > 0 && size - t->c[i].off < piece)
		i--;
	return t->c[i].off;
}

/*
 * Shrink a buffer whose wake failed back to what the stash does not hold,
 * once the copies queued into it are done.  Swallowed failures: when both
 * waits fail the context is lost (the stash still holds the data, and
 * nothing is unmapped under a copy of ours); a shrink fails only when out of
 * memory, keeping the chunks as slack.
 */
static void stash_back(struct vmmx_buf *buf, vmm_stream_t s)
{
	if (!vmmx__wait_tries(buf->ctx, s)) {
		(void)vmmx_buf_resize(buf, buf->stash_from);
		(void)vmmx_buf_trim(buf);
	}
}

/*
 * Bring [size now, sleep_size) back from the stash: grow a piece, queue its
 * copy, grow the next while it runs.  With @wait, wait for the copies; else
 * the caller waits (undo_wakes() when that fails).  On failure the buffer
 * shrinks back to stash_from once the queued copies are done (its error is
 * the answer); the caller keeps it asleep.  The buffer must be marked awake
 * (resize refuses a sleeping one).
 */
static int stash_in(struct vmmx_buf *buf, vmm_stream_t s, bool wait)
{
	struct vmmx_ctx *ctx = buf->ctx;
	size_t off = vmmx_buf_size(buf), end, piece = piece_bytes(ctx);
	int err = 0;

	while (!err && off < buf->sleep_size) {
		double t0 = now_s(), t1;

		end = buf->sleep_size - off > piece ? off + piece : buf->sleep_size;
		err = vmmx_buf_resize(buf, end);
		t1 = now_s();
		spent.resize += t1 - t0;
		if (!err)
			err = stash_copy(buf, off, end, false, s);
		spent.copy += now_s() - t1;
		off = end;
	}
	if (!err && wait)
		err = vmmx__wait_tries(ctx, s);
	if (err) {
		char why[256];

		snprintf(why, sizeof(why), "%s", vmmx_last_error());
		stash_back(buf, s);
		return vmmx__fail(&ctx->conf.log, err, "%s", why);
	}
	return 0;
}

/* Copies queued ahead of the unmapping: while one piece is unmapped the next
 * ones copy, across buffers too (a model is many buffers). */
#define AHEAD 4

struct piece {
	struct vmmx_buf *b;
	size_t lo;              /* the piece is [lo, what b's size was) */
	vmm_event_t ev;         /* recorded after its copy */
};

/*
 * Offload the @n buffers of @v (awake, trimmed, sleep_size set) into their
 * stashes: each top down in pieces, the copies of up to AHEAD pieces queued
 * on @s ahead of the one being unmapped, whose copy is done.  A buffer whose
 * last piece is unmapped is asleep (*@bytes counts it).  On failure the
 * caller wakes them all (undo).
 */
static int offload_all(struct vmmx_ctx *ctx, struct vmmx_buf **v, size_t n, vmm_stream_t s,
		       size_t *bytes)
{
	struct piece u[AHEAD] = { 0 };
	size_t qb = 0, qhi = n ? v[0]->sleep_size : 0, head = 0, tail = 0;
	int err = 0, k;

	for (k = 0; !err && k < AHEAD; k++)
		err = vmm_event_create(ctx->vmm, &u[k].ev);
	for (size_t i = 0; !err && i < n; i++) {
		v[i]->stash_from = v[i]->sleep_size;
		err = stash_get(v[i], v[i]->sleep_size);
	}
	while (!err) {
		/* Queue the copies of the pieces ahead. */
		while (!err && tail - head < AHEAD && qb < n) {
			struct piece *q = &u[tail % AHEAD];

			if (!qhi) {
				if (++qb < n)
					qhi = v[qb]->sleep_size;
				continue;
			}
			double t0 = now_s();

			q->b = v[qb];
			q->lo = piece_below(q->b, qhi);
			err = stash_copy(q->b, q->lo, qhi, true, s);
			if (!err)
				err = vmm_event_record(ctx->vmm, q->ev, s);
			spent.copy += now_s() - t0;
			if (!err) {
				qhi = q->lo;
				tail++;
			}
		}
		if (err || head == tail)
			break;
		/* Unmap the oldest piece once its copy is done. */
		struct piece *h = &u[head % AHEAD];
		double t0 = now_s(), t1;

		err = vmm_event_sync(ctx->vmm, h->ev);
		t1 = now_s();
		spent.wait += t1 - t0;
		if (err)
			break;
		h->b->stash_from = h->lo;
		err = vmmx_buf_resize(h->b, h->lo);
		if (!err && !h->lo)
			err = vmmx_buf_trim(h->b);
		spent.resize += now_s() - t1;
		if (err)
			break;
		if (!h->lo) {
			__atomic_store_n(&h->b->sleep, VMMX__OFFLOADED, __ATOMIC_RELEASE);
			*bytes += h->b->sleep_size;
		}
		head++;
	}
	for (k = 0; k < AHEAD; k++)
		if (u[k].ev)
			(void)vmm_event_destroy(ctx->vmm, u[k].ev); /* fails only with a lost context */
	return err;
}

/* Whether @buf goes to sleep by migration (read-mostly chunks keep their
 * host copies that way) rather than through a stash. */
static bool by_migration(struct vmmx_buf *buf)
{
	return __atomic_load_n(&buf->read_mostly, __ATOMIC_RELAXED);
}

/*
 * Put one buffer to sleep, or (*@stash) prepare it for offload_all():
 * trimmed, its size recorded, still awake.
 */
static int sleep_one(struct vmmx_buf *buf, int mode, size_t *bytes, bool *stash)
{
	size_t size;
	int err;

	*stash = false;
	/* Chunks kept past the size hold device memory too. */
	err = vmmx_buf_trim(buf);
	if (err)
		return err;
	size = vmmx_buf_size(buf);
	__atomic_store_n(&buf->sleep_size, size, __ATOMIC_RELAXED);
	if (mode == VMMX_SLEEP_OFFLOAD && by_migration(buf)) {
		err = record_runs(buf);
		if (!err && size)
			err = vmmx_buf_migrate(buf, 0, size, HOST, NULL);
		if (err) {
			/* Swallowed: the buffer stays awake with its data intact
			 * wherever each chunk is; the migration's error is the answer. */
			(void)restore_runs(buf);
			forget_runs(buf);
			return err;
		}
	} else if (mode == VMMX_SLEEP_OFFLOAD) {
		/* The stash is copied from the buffer's addresses: parked
		 * chunks (vmmx_park) are mapped in place first. */
		err = size ? vmmx__unpark(buf, 0, size, NULL) : 0;
		if (err)
			return err;
		*stash = size > 0;
		if (*stash)
			return 0;
	} else {
		err = vmmx_buf_resize(buf, 0);
		if (!err)
			err = vmmx_buf_trim(buf);
		if (err)
			return err;
	}
	__atomic_store_n(&buf->sleep, mode == VMMX_SLEEP_OFFLOAD ? VMMX__OFFLOADED : VMMX__DISCARDED,
			 __ATOMIC_RELEASE);
	*bytes += size;
	return 0;
}

/* Keep the failing step's message: the undo below clears it. */
static void keep_why(char *why, size_t len)
{
	if (why)
		snprintf(why, len, "%s", vmmx_last_error());
}

/*
 * Wake one buffer.  A wake that fails puts back what it took, so an asleep
 * buffer never holds device memory: a discarded one shrinks to nothing
 * again, an offloaded one moves what it restored back to host memory (each
 * chunk intact wherever it is).  @why gets the failure's message.
 */
static int wake_one(struct vmmx_buf *buf, vmm_stream_t s, bool wait, size_t *bytes, char *why,
		    size_t len)
{
	int st = __atomic_load_n(&buf->sleep, __ATOMIC_RELAXED);
	int err;

	/* Awake first: vmmx_buf_resize refuses a sleeping buffer. */
	if (st == VMMX__DISCARDED) {
		__atomic_store_n(&buf->sleep, VMMX__AWAKE, __ATOMIC_RELEASE);
		err = vmmx_buf_resize(buf, buf->sleep_size);
		if (err) {
			keep_why(why, len);
			/* Swallowed: a shrink to nothing fails only when out of
			 * memory, and then keeps its chunks mapped as slack. */
			(void)vmmx_buf_resize(buf, 0);
			(void)vmmx_buf_trim(buf);
			__atomic_store_n(&buf->sleep, VMMX__DISCARDED, __ATOMIC_RELEASE);
			return err;
		}
	} else if (!buf->sleep_runs && buf->stash) {
		__atomic_store_n(&buf->sleep, VMMX__AWAKE, __ATOMIC_RELEASE);
		err = stash_in(buf, s, wait);
		if (err) {
			keep_why(why, len);
			__atomic_store_n(&buf->sleep, VMMX__OFFLOADED, __ATOMIC_RELEASE);
			return err; /* still asleep, intact: a later wake tries again */
		}
	} else {
		err = restore_runs(buf);
		if (err) {
			keep_why(why, len);
			/* Swallowed: each chunk is intact where it is; the
			 * restore's error is the answer. */
			if (buf->sleep_size)
				(void)vmmx_buf_migrate(buf, 0, buf->sleep_size, HOST, NULL);
			return err; /* still asleep: a later wake tries again */
		}
		__atomic_store_n(&buf->sleep, VMMX__AWAKE, __ATOMIC_RELEASE);
	}
	*bytes += buf->sleep_size;
	forget_runs(buf);
	return 0;
}

/*
 * Undo a failed sleep on @b, one the call had prepared or put to sleep:
 * wake it if it went wholly or partly to sleep (a partial offload is awake
 * with its top pieces unmapped).  One that cannot be woken stays asleep,
 * intact: vmmx_wake() finishes.
 */
static void undo_one(struct vmmx_buf *b, vmm_stream_t s)
{
	size_t undone = 0;

	if (__atomic_load_n(&b->sleep, __ATOMIC_RELAXED) != VMMX__AWAKE) {
		(void)wake_one(b, s, true, &undone, NULL, 0);
	} else if (b->stash && vmmx_buf_size(b) < b->sleep_size) {
		if (stash_in(b, s, true))
			__atomic_store_n(&b->sleep, VMMX__OFFLOADED, __ATOMIC_RELEASE);
	}
}

/*
 * The wait that ends a wake's copies from the stashes failed: each buffer
 * woken from a stash (@from[i]) goes back to sleep, its stash intact.
 */
static void undo_wakes(struct vmmx_buf **v, const bool *from, size_t n, vmm_stream_t s,
		       size_t *bytes)
{
	for (size_t i = 0; i < n; i++) {
		if (!from[i])
			continue;
		stash_back(v[i], s);
		__atomic_store_n(&v[i]->sleep, VMMX__OFFLOADED, __ATOMIC_RELEASE);
		*bytes -= v[i]->sleep_size;
	}
}

/* Give the chunks cached on the devices back to the driver, so the memory
 * the sleep freed is free for other processes too. */
static void release_devices(struct vmmx_ctx *ctx)
{
	for (int d = 0; d < VMMX__MAX_DEVICES; d++)
		if (vmmx__dev_active(ctx, d))
			vmmx__cache_evict(ctx, (struct vmmx_loc){ VMMX_LOC_DEVICE, d }, UINT64_MAX);
}

/* -VMMX_EBUSY when work queued on @stream so far has not finished. */
static int check_idle(struct vmmx_ctx *ctx, void *stream)
{
	vmm_event_t ev;
	int err;

	err = vmm_event_create(ctx->vmm, &ev);
	if (err)
		return err;
	err = vmm_event_record(ctx->vmm, ev, (vmm_stream_t)(uintptr_t)stream);
	if (!err)
		err = vmm_event_query(ctx->vmm, ev);
	/* Swallowed: destroying an event fails only with a lost context. */
	(void)vmm_event_destroy(ctx->vmm, ev);
	if (err == -VMMX_EBUSY)
		return vmmx__fail(&ctx->conf.log, -VMMX_EBUSY,
				  "vmmx_sleep: work queued on stream %p has not finished: "
				  "synchronize it before the sleep", stream);
	return err;
}

static int check_args(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags,
		      const char *fn)
{
	int err;

	if (!ctx)
		return vmmx__fail(NULL, -VMMX_EINVAL, "%s: ctx is NULL", fn);
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, fn);
	if (!tags && ntags)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL, "%s: tags is NULL, ntags %zu",
				  fn, ntags);
	for (size_t i = 0; i < ntags; i++) {
		if (!tags[i] || !*tags[i])
			return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
					  "%s: tag %zu is NULL or empty", fn, i);
		err = check_tag(tags[i], fn);
		if (err)
			return err;
	}
	return 0;
}

VMMX_API int vmmx_sleep(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags, int mode,
			void *stream, size_t *bytes_p)
{
	struct vmmx_buf **v, **st = NULL;
	size_t n, i, ns = 0, bytes = 0;
	vmm_stream_t s = 0;
	double t_start;
	char why[256];
	int err;

	vmmx__clear_last_error();
	err = check_args(ctx, tags, ntags, "vmmx_sleep");
	if (err)
		return err;
	if (mode != VMMX_SLEEP_OFFLOAD && mode != VMMX_SLEEP_DISCARD)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_sleep: mode %d is neither VMMX_SLEEP_OFFLOAD nor "
				  "VMMX_SLEEP_DISCARD", mode);
	pthread_mutex_lock(&sleep_lock);
	err = pick(ctx, tags, ntags, false, "vmmx_sleep", &v, &n);
	if (err)
		goto out_unlock;
	err = check_idle(ctx, stream);
	if (err)
		goto out_free;
	st = malloc((n + 1) * sizeof(*st));
	if (!st) {
		err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_sleep: out of memory");
		goto out_free;
	}
	err = n ? vmm_stream_create(ctx->vmm, &s) : 0;
	if (err) {
		vmmx__fail(&ctx->conf.log, err, "vmmx_sleep: no stream for the copies");
		goto out_free;
	}
	memset(&spent, 0, sizeof(spent));
	t_start = now_s();
	for (i = 0; i < n; i++) {
		bool stashed;

		err = sleep_one(v[i], mode, &bytes, &stashed);
		if (err)
			break;
		if (stashed)
			st[ns++] = v[i];
	}
	if (!err && ns)
		err = offload_all(ctx, st, ns, s, &bytes);
	if (err) {
		/* The undo below clears the error message: keep it. */
		snprintf(why, sizeof(why), "%s", vmmx_last_error());
		while (i--)
			undo_one(v[i], s);
		vmmx__fail(&ctx->conf.log, err, "%s", why);
	} else {
		release_devices(ctx);
		if (bytes_p)
			*bytes_p = bytes;
		log_spent(ctx, "vmmx_sleep", "unmapping", n, bytes, t_start);
	}
	if (n)
		(void)vmm_stream_destroy(ctx->vmm, s); /* fails only with a lost context */
out_free:
	free(st);
	free(v);
out_unlock:
	pthread_mutex_unlock(&sleep_lock);
	return err;
}

VMMX_API int vmmx_wake(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags,
		       size_t *bytes_p)
{
	struct vmmx_buf **v;
	size_t n, bytes = 0;
	vmm_stream_t s = 0;
	bool *from, any = false;
	double t_start, t_wait;
	char why[256] = "";
	int err, first = 0;

	vmmx__clear_last_error();
	err = check_args(ctx, tags, ntags, "vmmx_wake");
	if (err)
		return err;
	pthread_mutex_lock(&sleep_lock);
	err = pick(ctx, tags, ntags, true, "vmmx_wake", &v, &n);
	if (err)
		goto out_unlock;
	from = calloc(n + 1, sizeof(*from));
	err = from ? 0 : vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_wake: out of memory");
	if (!err && n) {
		err = vmm_stream_create(ctx->vmm, &s);
		if (err)
			vmmx__fail(&ctx->conf.log, err, "vmmx_wake: no stream for the copies");
	}
	if (err)
		goto out_free;
	memset(&spent, 0, sizeof(spent));
	t_start = now_s();
	for (size_t i = 0; i < n; i++) {
		from[i] = __atomic_load_n(&v[i]->sleep, __ATOMIC_RELAXED) == VMMX__OFFLOADED &&
			  !v[i]->sleep_runs && v[i]->stash;
		/* The copies from the stashes are waited for once, below. */
		err = wake_one(v[i], s, false, &bytes, first ? NULL : why, sizeof(why));
		if (err) {
			from[i] = false;
			if (!first)
				first = err;
		}
		any |= from[i];
	}
	t_wait = now_s();
	err = any ? vmmx__wait_tries(ctx, s) : 0;
	spent.wait = now_s() - t_wait;
	if (err) {
		if (!first)
			snprintf(why, sizeof(why), "vmmx_wake: the copies from the host stash failed: %s",
				 vmmx_last_error());
		first = first ? first : err;
		undo_wakes(v, from, n, s, &bytes);
	}
	if (n)
		(void)vmm_stream_destroy(ctx->vmm, s); /* fails only with a lost context */
	/* What failed wakes took back from the devices goes back to the driver. */
	if (first)
		release_devices(ctx);
	err = first;
	if (err)
		vmmx__fail(&ctx->conf.log, err, "%s", why);
	else
		log_spent(ctx, "vmmx_wake", "growing", n, bytes, t_start);
	if (bytes_p)
		*bytes_p = bytes;
out_free:
	free(from);
	free(v);
out_unlock:
	pthread_mutex_unlock(&sleep_lock);
	return err;
}

VMMX_API int vmmx_sleep_release(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags,
			       size_t *bytes_p)
{
	struct vmmx_buf **v;
	size_t n, bytes = 0;
	int err;

	vmmx__clear_last_error();
	err = check_args(ctx, tags, ntags, "vmmx_sleep_release");
	if (err)
		return err;
	pthread_mutex_lock(&sleep_lock);
	err = pick(ctx, tags, ntags, false, "vmmx_sleep_release", &v, &n);
	if (!err) {
		for (size_t i = 0; i < n; i++) {
			struct vmmx_buf *st = v[i]->stash;

			if (!st)
				continue;
			bytes += vmmx_buf_size(st);
			/* Readers of the owner's pointer (the stats) finish before
			 * the destroy frees it: it waits for a grace period. */
			rcu_assign_pointer(v[i]->stash, NULL);
			st->stash_of = NULL;
			vmmx_buf_destroy(st);
		}
		free(v);
		if (bytes_p)
			*bytes_p = bytes;
	}
	pthread_mutex_unlock(&sleep_lock);
	return err;
}

VMMX_API int vmmx_sleep_stats(struct vmmx_ctx *ctx, const char *tag,
			      struct vmmx_sleep_stats *st)
{
	const struct vmmx__buflist *l;
	struct vmmx_sleep_stats s = { 0 };

	vmmx__clear_last_error();
	if (!ctx || !tag || !st)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_sleep_stats: NULL argument");
	urcu_bp_read_lock();
	l = rcu_dereference(ctx->bufs);
	for (size_t i = 0; l && i < l->n; i++) {
		struct vmmx_buf *b = l->bufs[i];
		const char *bt = rcu_dereference(b->tag);
		const struct vmmx__table *t;
		struct vmmx_buf *st_buf;
		int state = __atomic_load_n(&b->sleep, __ATOMIC_ACQUIRE);

		if (b->stash_of || strcmp(bt ? bt : "", tag))
			continue;
		t = rcu_dereference(b->table);
		s.buffers++;
		if (state == VMMX__AWAKE) {
			s.bytes += t->size;
		} else {
			size_t z = __atomic_load_n(&b->sleep_size, __ATOMIC_RELAXED);

			s.bytes += z;
			s.asleep_bytes += z;
			if (state == VMMX__OFFLOADED)
				s.offloaded_bytes += z;
		}
		st_buf = rcu_dereference(b->stash);
		if (st_buf)
			s.stash_bytes += rcu_dereference(st_buf->table)->mapped;
		for (size_t k = 0; k < t->n; k++) {
			if (t->c[k].loc.kind == VMMX_LOC_DEVICE)
				s.device_bytes += t->c[k].size;
			else if (t->c[k].loc.kind != VMMX_LOC_NONE)
				s.host_bytes += t->c[k].size;
		}
	}
	urcu_bp_read_unlock();
	*st = s;
	return 0;
}
