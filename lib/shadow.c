// SPDX-License-Identifier: MIT
/*
 * shadow.c - read-mostly chunks keep their host copy.
 *
 * A chunk advised VMMX_ADVISE_READ_MOSTLY that moves from host memory to a
 * device keeps its old host handle, unmapped, as its "shadow": the data as
 * it was when promoted.  Moving it back to that host location then maps the
 * shadow again under the chunk's address, with no copy and no new handle
 * (migrate.c).  libvmmx cannot see writes by kernels or by the CPU, so the
 * advice is the caller's promise that the range is not written that way
 * while on the device; VMMX_ADVISE_NOT_READ_MOSTLY withdraws it and drops
 * the copies.  Writes through libvmmx's own API (vmmx_memcpy, vmmx_memset)
 * are seen: they drop the copies of the chunks they write before any byte
 * moves (vmmx__shadow_written), so that the next move back copies the new
 * bytes.  The chunks stay marked: a later promotion keeps a fresh copy.
 *
 * Verified copies (VMMX_HOST_COPIES=verified): movers that cannot make that
 * promise (the interposer moving an unmodified program's weights, a
 * policy's evictions, vmmx_prefetch) still need not copy a chunk back that
 * was never written.  Every chunk promoted from host memory then keeps its
 * host handle too, with the device checksum (vmm_checksum) of its device
 * copy taken right after the move.  Moving it back to that host location
 * takes the checksum again: equal, the shadow is mapped again as for a
 * read-mostly chunk; different, or a checksum that failed, the shadow goes
 * to the cache and the chunk is copied as before.  A chunk whose checksum
 * failed at promotion keeps no shadow.  Read-mostly chunks keep theirs
 * unverified, as before: the advice is the stronger promise.
 *
 * How likely a missed write is: the checksum is a 64-bit sum of words each
 * put through the splitmix64 finalizer after being mixed with its index, so
 * an arbitrary change of a chunk leaves the sum equal with a probability of
 * about 2^-64 (one in 1.8e19 changed chunks); structured changes that defeat
 * plain sums (two words swapped, a word moved, the same delta added here and
 * taken there) change a word's term through the index mixing and are caught
 * like any other.  A kernel still writing the chunk while it moves is the
 * caller's race, as for every move.
 *
 * Parked chunks (vmmx_park(), migrate.c): a chunk whose copy may serve
 * goes back to it with its own address left unmapped and the copy mapped
 * at an address of its own (@hva, made by vmmx__hva_make() at the first
 * park and kept while the chunk is on a device again); the sum checked at
 * the park stays the chunk's, since nothing can write an unmapped chunk,
 * and serves its next promotion (vmmx__shadow_kept()).  A copy dropped
 * lets go of its @hva first (vmmx__shadow_drop()); the mapping itself stays
 * with the handle until the handle is released (hva.c), so that the
 * handle's next park, after the chunk was mapped in place and brought in
 * again, maps and grants nothing.
 *
 * A shadow is host memory held: charged against VMMX_HOST_LIMIT like a
 * cached handle, counted as room by vmmx__room() like one, and released
 * when host memory is short (vmmx__make_room), on vmmx_ctx_trim(), or when
 * its chunk is shrunk away or destroyed (buf.c).
 *
 * Locking: shadows live in the chunk table, so they change under the
 * buffer's mutex with a new table published.  Reclaiming them for another
 * buffer's grow takes buffer locks with trylock only (the caller holds one).
 */
#include "config.h"

#include <stdlib.h>

#include "internal/obj.h"

int vmmx__checksum(struct vmmx_ctx *ctx, const void *va, size_t size, uint64_t *sum_p)
{
	int err = vmm_checksum(ctx->vmm, va, size, sum_p);

	if (!err)
		__atomic_fetch_add(&ctx->ctr.checksums, 1, __ATOMIC_RELAXED);
	return err;
}

static void keep(struct vmmx_ctx *ctx, struct vmmx__chunk *nc, struct vmmx_loc loc,
		 vmm_handle_t h, bool verified, uint64_t sum)
{
	nc->shadow = h;
	nc->shadow_loc = loc;
	nc->verified = verified;
	nc->shadow_sum = sum;
	__atomic_fetch_add(&ctx->shadow_bytes, nc->size, __ATOMIC_RELAXED);
}

/* The checksum of @c's memory now, through its buffer's address; the error
 * is logged and swallowed here (the caller copies instead). */
static int chunk_sum(struct vmmx_buf *buf, const struct vmmx__chunk *c, const char *when,
		     uint64_t *sum_p)
{
	int err = vmmx__checksum(buf->ctx, (void *)(buf->base + c->off), c->size, sum_p);

	if (err) {
		vmmx__logf(&buf->ctx->conf.log, VMMX_LOG_DEBUG,
			   "verified host copies: no checksum of the chunk at offset %zu %s (%s): %s",
			   c->off, when, vmmx_strerror(err),
			   err == -VMMX_ENOTSUP ? "it is copied as without VMMX_HOST_COPIES"
						: "it is copied");
		vmmx__clear_last_error();
	}
	return err;
}

bool vmmx__shadow_promoted(struct vmmx_buf *buf, struct vmmx__chunk *nc, struct vmmx_loc loc,
			   vmm_handle_t h)
{
	struct vmmx_ctx *ctx = buf->ctx;
	uint64_t sum;

	if (nc->read_mostly) {
		keep(ctx, nc, loc, h, false, 0);
		return true;
	}
	if (ctx->conf.host_copies != VMMX__HOST_COPIES_VERIFIED ||
	    chunk_sum(buf, nc, "after its promotion", &sum))
		return false;
	keep(ctx, nc, loc, h, true, sum);
	/* vmmx_memcpy and vmmx_memset into this buffer now drop copies. */
	if (!__atomic_load_n(&buf->host_copies, __ATOMIC_RELAXED))
		__atomic_store_n(&buf->host_copies, true, __ATOMIC_RELAXED);
	return true;
}

bool vmmx__shadow_kept(struct vmmx_buf *buf, struct vmmx__chunk *nc, struct vmmx_loc loc,
		       vmm_handle_t h, uint64_t sum)
{
	keep(buf->ctx, nc, loc, h, true, sum);
	return true;
}

bool vmmx__shadow_unchanged(struct vmmx_buf *buf, struct vmmx__chunk *c)
{
	uint64_t sum = 0;
	int err;

	if (!c->verified)
		return true;
	err = chunk_sum(buf, c, "before its move back", &sum);
	if (!err && sum == c->shadow_sum)
		return true;
	if (!err)
		__atomic_fetch_add(&buf->ctx->ctr.verified_changed, 1, __ATOMIC_RELAXED);
	vmmx__shadow_drop(buf->ctx, c, false);
	return false;
}

size_t vmmx__shadow_drop(struct vmmx_ctx *ctx, struct vmmx__chunk *c, bool release)
{
	if (!VMMX__HAS_SHADOW(c))
		return 0;
	if (c->hva && !vmmx__hva_drop(ctx, c->hva, c->size))
		release = true;
	c->hva = NULL;
	if (release)
		vmmx__release_or_defer(ctx, c->shadow, c->shadow_loc, c->size);
	else
		vmmx__cache_put(ctx, c->shadow_loc, c->shadow, c->size);
	__atomic_fetch_sub(&ctx->shadow_bytes, c->size, __ATOMIC_RELAXED);
	c->shadow_loc = (struct vmmx_loc){ VMMX_LOC_NONE, 0 };
	c->shadow = 0;
	c->verified = false;
	c->shadow_sum = 0;
	return c->size;
}

enum rm_op {
	RM_SET,         /* flag the chunks wholly inside the range */
	RM_UNSET,       /* unflag the chunks the range touches, copies to the cache */
	RM_RECLAIM,     /* release the copies of the chunks the range touches */
	RM_WRITTEN,     /* the range is written: its chunks' copies to the cache */
};

/* Whether @op changes @c; [off, end) is the range, widened to the mapped end. */
static bool changes(const struct vmmx__chunk *c, size_t off, size_t end, enum rm_op op)
{
	switch (op) {
	case RM_SET:
		return !c->read_mostly && c->off >= off && c->off + c->size <= end;
	case RM_UNSET:
		return c->read_mostly || VMMX__HAS_SHADOW(c);
	default:
		return VMMX__HAS_SHADOW(c);
	}
}

/*
 * Apply @op to the chunks of [off, off+len) (len may run past the end):
 * a new table when any chunk changes.  RM_RECLAIM stops once @want bytes
 * are dropped.  buf->lock held.  0, or -VMMX_ENOMEM (nothing changed).
 * *@freed_p: bytes of copies dropped.
 */
static int rewrite(struct vmmx_buf *buf, size_t off, size_t len, enum rm_op op, uint64_t want,
		   uint64_t *freed_p)
{
	const struct vmmx__table *t = buf->table;
	struct vmmx__table *nt;
	size_t first, last, end, i;

	*freed_p = 0;
	end = vmmx__table_span(t, off, len, &first, &last);
	if (!end)
		return 0;
	for (i = first; i < last && !changes(&t->c[i], off, end, op); i++)
		;
	if (i == last)
		return 0;
	nt = vmmx__table_dup(t);
	if (!nt)
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_ENOMEM,
				  "read-mostly chunks: no memory for a new chunk table");
	for (; i < last && *freed_p < want; i++) {
		struct vmmx__chunk *c = &nt->c[i];

		if (!changes(c, off, end, op))
			continue;
		if (op == RM_SET) {
			c->read_mostly = true;
			continue;
		}
		if (op == RM_UNSET)
			c->read_mostly = false;
		/* Readers never use a shadow, and only migrations (which hold
		 * buf->lock, as this does) use its own mapping: it may go
		 * before the old table is retired. */
		/* RM_WRITTEN keeps the mark: only this copy is stale. */
		*freed_p += vmmx__shadow_drop(buf->ctx, c, op == RM_RECLAIM);
	}
	if (op == RM_SET)
		__atomic_store_n(&buf->read_mostly, true, __ATOMIC_RELAXED);
	vmmx__table_publish(buf, nt);
	return 0;
}

int vmmx__read_mostly_advise(struct vmmx_buf *buf, size_t off, size_t len, bool on)
{
	uint64_t freed;

	return rewrite(buf, off, len, on ? RM_SET : RM_UNSET, UINT64_MAX, &freed);
}

int vmmx__shadow_written(struct vmmx_buf *buf, size_t off, size_t len)
{
	uint64_t freed;
	size_t size;
	int err;

	/* Tried, never waited for: the caller holds pins on this buffer, and
	 * the holder of its mutex may be a writer waiting for them. */
	if (pthread_mutex_trylock(&buf->lock))
		return 1;
	/* The size may have changed since the caller looked: only what is left. */
	size = buf->table->size;
	if (off < size)
		err = rewrite(buf, off, len < size - off ? len : size - off, RM_WRITTEN, UINT64_MAX,
			      &freed);
	else
		err = 0;
	pthread_mutex_unlock(&buf->lock);
	return err;
}

uint64_t vmmx__shadow_reclaim(struct vmmx_ctx *ctx, uint64_t bytes)
{
	uint64_t freed = 0;

	/* Index by index in the live list: buffers made or destroyed meanwhile
	 * may be missed or seen twice, which costs nothing here. */
	for (size_t i = 0; freed < bytes && __atomic_load_n(&ctx->shadow_bytes, __ATOMIC_RELAXED);
	     i++) {
		struct vmmx_buf *buf;
		uint64_t got;

		/* Under ctx->lock the buffer cannot be destroyed; its own lock
		 * is only tried (lock order: buf->lock is outer). */
		pthread_mutex_lock(&ctx->lock);
		if (i >= ctx->bufs->n) {
			pthread_mutex_unlock(&ctx->lock);
			break;
		}
		buf = ctx->bufs->bufs[i];
		if (pthread_mutex_trylock(&buf->lock))
			buf = NULL;
		pthread_mutex_unlock(&ctx->lock);
		if (!buf)
			continue;
		if (!rewrite(buf, 0, SIZE_MAX, RM_RECLAIM, bytes - freed, &got))
			freed += got;
		pthread_mutex_unlock(&buf->lock);
	}
	return freed;
}
