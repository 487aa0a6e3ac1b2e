// SPDX-License-Identifier: MIT
/*
 * buflist.c - the context's buffer list: an RCU-published array of its buffers
 * sorted by base address, which buffers join and leave (buf.c), eviction
 * and reclaim walk (evict.c, shadow.c), and lookups by address search
 * without a lock (lookup.c, copy.c, prefetch.c, host.c).
 *
 * Locking: ctx->lock serialises the writers; readers hold the urcu-bp read
 * side; a removed array is freed after a grace period.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal/obj.h"

int vmmx__ctx_add_buf(struct vmmx_ctx *ctx, struct vmmx_buf *buf)
{
	struct vmmx__buflist *old, *nl;
	size_t i, j;

	pthread_mutex_lock(&ctx->lock);
	old = ctx->bufs;
	nl = malloc(sizeof(*nl) + (old->n + 1) * sizeof(nl->bufs[0]));
	if (!nl) {
		pthread_mutex_unlock(&ctx->lock);
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_create: out of memory");
	}
	for (i = 0, j = 0; i < old->n; i++) {
		if (j == i && old->bufs[i]->base > buf->base)
			nl->bufs[j++] = buf;
		nl->bufs[j++] = old->bufs[i];
	}
	if (j == i)
		nl->bufs[j++] = buf;
	nl->n = j;
	rcu_assign_pointer(ctx->bufs, nl);
	pthread_mutex_unlock(&ctx->lock);
	urcu_bp_synchronize_rcu();
	free(old);
	return 0;
}

void vmmx__ctx_remove_buf(struct vmmx_ctx *ctx, struct vmmx_buf *buf)
{
	struct vmmx__buflist *old, *nl;
	size_t j = 0;

	pthread_mutex_lock(&ctx->lock);
	old = ctx->bufs;
	/* Shrinking: the old array is big enough, but readers may be in it, so
	 * build a new one.  If that allocation fails, fall back to waiting for
	 * readers and editing in place (rare; costs one extra grace period). */
	nl = malloc(sizeof(*nl) + old->n * sizeof(nl->bufs[0]));
	if (!nl) {
		struct vmmx__buflist empty = { 0 };

		rcu_assign_pointer(ctx->bufs, &empty);
		urcu_bp_synchronize_rcu();
		for (size_t i = 0; i < old->n; i++)
			if (old->bufs[i] != buf)
				old->bufs[j++] = old->bufs[i];
		old->n = j;
		rcu_assign_pointer(ctx->bufs, old);
		pthread_mutex_unlock(&ctx->lock);
		urcu_bp_synchronize_rcu();
		return;
	}
	for (size_t i = 0; i < old->n; i++)
		if (old->bufs[i] != buf)
			nl->bufs[j++] = old->bufs[i];
	nl->n = j;
	rcu_assign_pointer(ctx->bufs, nl);
	pthread_mutex_unlock(&ctx->lock);
	urcu_bp_synchronize_rcu();
	free(old);
}

size_t vmmx__buflist_upper(const struct vmmx__buflist *l, uintptr_t addr)
{
	size_t lo = 0, hi = l->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (l->bufs[mid]->base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct vmmx_buf *vmmx__ctx_find_buf(struct vmmx_ctx *ctx, uintptr_t addr)
{
	struct vmmx__buflist *l = rcu_dereference(ctx->bufs);
	size_t i = vmmx__buflist_upper(l, addr);
	struct vmmx_buf *b;

	/* The last buffer whose base is <= addr, if its reservation holds addr. */
	if (!i)
		return NULL;
	b = l->bufs[i - 1];
	return addr - b->base < b->capacity ? b : NULL;
}

void vmmx__buflist_abandon(struct vmmx_ctx *ctx, struct vmmx_buf *buf)
{
	struct vmmx__buflist *l = ctx->bufs;
	size_t j = 0;

	/*
	 * No thread of this process can be reading the list: every reader
	 * checks vmmx__inherited() first.  So edit it in place, without a
	 * grace period and without allocating: a forked child frees what it
	 * inherited, and should not need memory to do so (an allocator whose
	 * lock another thread of the parent held at the fork can hang it).
	 */
	for (size_t i = 0; i < l->n; i++)
		if (l->bufs[i] != buf)
			l->bufs[j++] = l->bufs[i];
	l->n = j;
}
