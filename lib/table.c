// SPDX-License-Identifier: MIT
/*
 * table.c - chunk tables: the immutable, RCU-published array of a buffer's
 * chunks.  Finding the chunk of an offset (lock-free, on the read side),
 * making and copying tables for a writer, and retiring replaced tables:
 * they are freed after a grace period that one writer waits for once every
 * VMMX__RETIRE_BATCH retirements.  Publishing a table as a buffer's is the
 * buffer's (buf.c: vmmx__table_publish).
 *
 * Locking: none.  Readers hold the urcu-bp read side; writers hold their
 * buffer's lock; the retired list is a lock-free stack (ctx->retired).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal/mem.h"

#ifdef VMMX__TSAN
char vmmx__tsan_grace; /* internal/mem.h: RCU's happens-before, told to TSan */
#endif

size_t vmmx__table_find(const struct vmmx__table *t, size_t off)
{
	const size_t *o = vmmx__table_offs(t);
	size_t lo = 0, n = t->n;

	/* Branchless: halve the range each step; the compiler makes the
	 * choice a conditional move, so no step mispredicts.  Both offsets the
	 * next step may read are fetched ahead, so a table a writer has just
	 * replaced (cold in this core's cache) costs overlapped misses rather
	 * than one after another. */
	while (n > 1) {
		size_t half = n / 2;

		__builtin_prefetch(&o[lo + (n - half) / 2]);
		__builtin_prefetch(&o[lo + half + (n - half) / 2]);
		lo = o[lo + half] <= off ? lo + half : lo;
		n -= half;
	}
	return lo;
}

size_t vmmx__table_span(const struct vmmx__table *t, size_t off, size_t len, size_t *first,
			size_t *last)
{
	size_t end;

	if (!len || off >= t->mapped)
		return 0;
	end = len >= t->size - off ? t->mapped : off + len;
	*first = vmmx__table_find(t, off);
	*last = vmmx__table_find(t, end - 1) + 1;
	return end;
}

void vmmx__retire(struct vmmx_ctx *ctx, struct vmmx__table *old)
{
	struct vmmx__table *head = __atomic_load_n(&ctx->retired, __ATOMIC_RELAXED);

	do
		old->retired_next = head;
	while (!__atomic_compare_exchange_n(&ctx->retired, &head, old, true, __ATOMIC_RELEASE,
					    __ATOMIC_RELAXED));
	if (__atomic_add_fetch(&ctx->nretired, 1, __ATOMIC_RELAXED) >= VMMX__RETIRE_BATCH)
		vmmx__reclaim(ctx);
}

void vmmx__reclaim(struct vmmx_ctx *ctx)
{
	struct vmmx__table *list = __atomic_exchange_n(&ctx->retired, NULL, __ATOMIC_ACQUIRE);
	uint64_t n = 0;

	if (!list)
		return;
	/* Every table in @list was unpublished before this grace period starts. */
	urcu_bp_synchronize_rcu();
	while (list) {
		struct vmmx__table *next = list->retired_next;

		free(list);
		list = next;
		n++;
	}
	__atomic_fetch_sub(&ctx->nretired, n, __ATOMIC_RELAXED);
}

struct vmmx__table *vmmx__table_alloc(size_t n)
{
	struct vmmx__table *t = malloc(sizeof(*t) + n * (sizeof(t->c[0]) + sizeof(size_t)));

	if (t) {
		t->retired_next = NULL;
		t->n = n;
	}
	return t;
}

struct vmmx__table *vmmx__table_dup(const struct vmmx__table *t)
{
	struct vmmx__table *nt = vmmx__table_alloc(t->n);

	if (nt) {
		nt->size = t->size;
		nt->mapped = t->mapped;
		memcpy(nt->c, t->c, t->n * sizeof(t->c[0])); /* offsets: at publish */
	}
	return nt;
}

static void free_table_list(struct vmmx__table *t)
{
	while (t) {
		struct vmmx__table *next = t->retired_next;

		free(t);
		t = next;
	}
}

void vmmx__table_abandon(struct vmmx_ctx *ctx)
{
	free_table_list(ctx->retired);
	ctx->retired = NULL;
}
