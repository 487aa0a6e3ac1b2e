// SPDX-License-Identifier: MIT
/*
 * buf.c - buffers: one reserved virtual range and the chunks mapped at its
 * front.
 *
 * The chunk table is an immutable array published with RCU.  Writers
 * (resize, destroy) hold buf->lock, do every driver step first, publish a
 * new table only when all steps succeeded, and free the old table after a
 * grace period.  Readers never lock.  So a failed resize has nothing to
 * undo in the table: it only unwinds its driver steps, in exact reverse
 * order (set access -> map -> create -> charge).
 *
 * Chunk sizes vary: a grow asks the policy for the next chunk's ranking and
 * makes the largest chunk that location can take, up to chunk_max, down to
 * chunk_min.  The driver's cost is per handle, so few large handles make
 * growth cheap; chunk_min is the resolution of placement.
 *
 * Handles map whole (cuMemMap takes offset 0 only), so a shrink that cuts
 * through a chunk replaces it by a handle of the kept part (a copy within
 * the chunk's location): after a shrink the buffer maps nothing past its
 * size.  The table's @mapped can exceed @size only after a shrink that
 * failed twice over (see shrink()).
 */
#include "config.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

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

int vmmx__chunk_set_access(struct vmmx_ctx *ctx, void *va, size_t size, struct vmmx_loc loc,
			   bool cpu)
{
	struct vmm_access acc[3] = {
		{ .who = { VMMX_LOC_DEVICE, ctx->device }, .flags = VMM_ACCESS_RW },
	};
	int n = 1;

	/* A chunk on another GPU is granted to that GPU too; host chunks may be
	 * granted to the CPU, so they are plain host memory at the same address
	 * (the driver refuses CPU access to device memory).  The CPU grant is
	 * what makes host mappings expensive: on the H200 cuMemSetAccess of host
	 * memory took 20.8 ms per GiB with it and 7.5 ms without, and unmapping
	 * 13.9 ms against 2.3 ms; and only a GPU-only grant overlaps a running
	 * copy.  Yet the driver's own copy of a GPU-only host chunk to pageable
	 * memory (cuMemcpy) died with SIGSEGV (H100, driver 580), so the CPU is
	 * granted every host chunk unless VMMX_HOST_CPU_ACCESS says otherwise. */
	if (loc.kind == VMMX_LOC_DEVICE && loc.id != ctx->device)
		acc[n++] = (struct vmm_access){ .who = loc, .flags = VMM_ACCESS_RW };
	else if (cpu && vmm_loc_is_host(loc))
		acc[n++] = (struct vmm_access){ .who = { VMMX_LOC_HOST, 0 }, .flags = VMM_ACCESS_RW };
	return vmm_set_access(ctx->vmm, va, size, acc, n);
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

void vmmx__table_publish(struct vmmx_buf *buf, struct vmmx__table *t)
{
	struct vmmx__table *old = buf->table;
	size_t *offs = vmmx__table_offs(t);

	for (size_t i = 0; i < t->n; i++)
		offs[i] = t->c[i].off;
	rcu_assign_pointer(buf->table, t);
	vmmx__retire(buf->ctx, old);
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

VMMX_API int vmmx_buf_create(struct vmmx_ctx *ctx, size_t capacity, const char *policy,
			     struct vmmx_buf **buf_p)
{
	struct vmmx__policy *pol;
	struct vmmx_buf *buf;
	void *va;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !buf_p)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_buf_create: NULL argument");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_buf_create");
	if (!capacity || capacity > SIZE_MAX - ctx->chunk_max)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_buf_create: capacity %zu out of range", capacity);
	err = vmmx__policy_get(ctx, policy ? policy : ctx->policy->spec, &pol);
	if (err)
		return err;
	buf = calloc(1, sizeof(*buf));
	if (!buf) {
		err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_create: out of memory");
		goto err_policy;
	}
	buf->ctx = ctx;
	buf->id = __atomic_add_fetch(&ctx->next_buf_id, 1, __ATOMIC_RELAXED);
	buf->policy = pol;
	buf->capacity = vmmx__round_up(capacity, ctx->chunk_min);
	buf->table = vmmx__table_alloc(0);
	if (!buf->table) {
		err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_create: out of memory");
		goto err_buf;
	}
	buf->table->size = buf->table->mapped = 0;
	if (pthread_mutex_init(&buf->lock, NULL)) {
		err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_create: pthread_mutex_init failed");
		goto err_table;
	}
	/* Aligned to the largest chunk so big handles can use large pages. */
	err = vmm_reserve(ctx->vmm, buf->capacity, ctx->gran, &va);
	if (err)
		goto err_mutex;
	buf->base = (uintptr_t)va;
	err = vmmx__ctx_add_buf(ctx, buf);
	if (err)
		goto err_reserve;
	vmmx__policy_buf_event(pol, buf->id, buf->capacity, 1);
	*buf_p = buf;
	return 0;

err_reserve:
	vmmx__unreserve_or_defer(ctx, va, buf->capacity);
err_mutex:
	pthread_mutex_destroy(&buf->lock);
err_table:
	free(buf->table);
err_buf:
	free(buf);
err_policy:
	vmmx__policy_put(ctx, pol);
	return err;
}

/* Undo chunks [from, n) of a grow that failed, in reverse order. */
static void unwind_chunks(struct vmmx_buf *buf, const struct vmmx__chunk *c, size_t n)
{
	struct vmmx_ctx *ctx = buf->ctx;

	while (n--) {
		if (vmmx__unmap_or_defer(ctx, (void *)(buf->base + c[n].off), c[n].size))
			vmmx__release_or_defer(ctx, c[n].handle, c[n].loc, c[n].size);
		else
			vmmx__cache_put(ctx, c[n].loc, c[n].handle, c[n].size);
	}
}

/*
 * Make, map and grant one chunk at @off on @loc, from @size down to
 * chunk_min: a cached handle first, else a new one; a driver out-of-memory
 * gives back cached handles of that location, then tries half the size.
 * Returns 0 with *@out filled; -VMMX_ENOMEM when this location cannot take
 * even chunk_min (the caller falls back, *@why says why); another error
 * when a driver step failed for another reason (the caller unwinds).
 */
static int make_chunk(struct vmmx_buf *buf, size_t off, size_t size, struct vmmx_loc loc,
		      struct vmmx__chunk *out, enum vmmx__why *why, bool *hit)
{
	struct vmmx_ctx *ctx = buf->ctx;
	void *va = (void *)(buf->base + off);
	bool evicted = false;
	vmm_handle_t h;
	size_t got;
	int err;

	while (size >= ctx->chunk_min) {
		/* A cached handle of at least half the size, or a new one: many
		 * small cached handles must not turn a big grow into many chunks. */
		size_t min_take = vmmx__round_down(size / 2, ctx->chunk_min);

		if (min_take < ctx->chunk_min)
			min_take = ctx->chunk_min;
		if (vmmx__cache_take(ctx, loc, size, min_take, &h, &got)) {
			*hit = true;
			size = got;
		} else {
			*hit = false;
			if (vmmx__charge(ctx, loc, size)) {
				/* Cached handles too big to reuse still count: free them. */
				if (!evicted && vmmx__make_room(ctx, loc, size)) {
					evicted = true;
					continue;
				}
				*why = VMMX__WHY_LIMIT;
				return -VMMX_ENOMEM;
			}
			err = vmm_create(ctx->vmm, loc, size, &h);
			if (err == -VMMX_ENOMEM) {
				vmmx__uncharge(ctx, loc, size);
				*why = VMMX__WHY_OOM;
				if (!evicted && vmmx__make_room(ctx, loc, size)) {
					evicted = true;
					continue;
				}
				/* Memory may be fragmented or taken by others: try a smaller handle. */
				size = vmmx__round_down(size / 2, ctx->chunk_min);
				continue;
			}
			if (err) {
				vmmx__uncharge(ctx, loc, size);
				return err;
			}
		}
		__atomic_fetch_add(*hit ? &ctx->ctr.cache_hits : &ctx->ctr.cache_misses, 1,
				   __ATOMIC_RELAXED);
		err = vmm_map(ctx->vmm, va, size, h);
		if (err)
			goto err_handle;
		err = vmmx__chunk_set_access(ctx, va, size, loc, vmmx__cpu_grant(ctx, loc, false));
		if (err)
			goto err_map;
		*out = (struct vmmx__chunk){ .off = off, .size = size, .loc = loc, .handle = h,
					     .cpu = vmmx__cpu_grant(ctx, loc, false) };
		return 0;

err_map:
		if (vmmx__unmap_or_defer(ctx, va, size)) {
			vmmx__release_or_defer(ctx, h, loc, size);
			return err;
		}
err_handle:
		/* The handle is fine, only its mapping failed: keep it. */
		vmmx__cache_put(ctx, loc, h, size);
		return err;
	}
	if (*why == VMMX__WHY_OK)
		*why = VMMX__WHY_OOM;
	return -VMMX_ENOMEM;
}

/* Build the policy's request: every location the context can use, with its room. */
static void fill_request(struct vmmx_buf *buf, size_t idx, size_t off, size_t want,
			 struct vmmx_policy_room *room, struct vmmx_policy_request *req,
			 struct vmmx__roomsnap *snap)
{
	struct vmmx_ctx *ctx = buf->ctx;
	size_t n = 0;

	for (int d = 0; d < ctx->ndev && n < VMMX_POLICY_MAX_ROOM - 1; d++) {
		struct vmmx_loc loc = { VMMX_LOC_DEVICE, d };
		enum vmmx__why why;

		if (!ctx->peer[d] || !vmmx__dev_active(ctx, d))
			continue;
		room[n] = (struct vmmx_policy_room){
			.loc = loc, .room = vmmx__room(ctx, loc, 0, &why, snap),
			.held = __atomic_load_n(&ctx->held[d], __ATOMIC_RELAXED), .limit = ctx->limit[d],
		};
		n++;
	}
	{
		struct vmmx_loc loc = { VMMX_LOC_HOST, 0 };
		enum vmmx__why why;

		room[n] = (struct vmmx_policy_room){
			.loc = loc, .room = vmmx__room(ctx, loc, 0, &why, snap),
			.held = __atomic_load_n(&ctx->held[VMMX__HOST_SLOT], __ATOMIC_RELAXED),
			.limit = ctx->limit[VMMX__HOST_SLOT],
		};
		n++;
	}
	*req = (struct vmmx_policy_request){
		.size = sizeof(*req), .buf_id = buf->id, .buf_capacity = buf->capacity,
		.offset = off, .chunk_index = idx, .want = want, .chunk_min = ctx->chunk_min,
		.chunk_max = ctx->chunk_max, .device = ctx->device, .device_count = ctx->ndev,
		.nroom = n, .room = room,
	};
}

/*
 * Place one chunk at @off: ask the policy, try its locations in order.
 * Returns 0 with *@c filled, or the error (the caller unwinds).
 */
static int place_chunk(struct vmmx_buf *buf, size_t idx, size_t off, size_t want,
		       struct vmmx__chunk *c, struct vmmx__roomsnap *snap)
{
	struct vmmx_ctx *ctx = buf->ctx;
	struct vmmx__policy *pol = buf->policy;
	struct vmmx_policy_room room[VMMX_POLICY_MAX_ROOM];
	struct vmmx_policy_request req;
	struct vmmx_policy_answer ans;
	enum vmmx__why first_why = VMMX__WHY_OK;
	char tried[512] = "";
	bool hit = false;
	unsigned int i;
	size_t len;
	int err;

	fill_request(buf, idx, off, want, room, &req, snap);
	memset(&ans, 0, sizeof(ans));
	err = pol->ops->place(pol->state, &req, &ans);
	if (err || ans.nlocs == 0 || ans.nlocs > VMMX_POLICY_MAX_RANK)
		return vmmx__fail(&ctx->conf.log, err < 0 ? err : -VMMX_EPOLICY,
				  "vmmx_buf_resize: policy %s ranked no location for offset %zu (%s)",
				  pol->spec, off, err ? vmmx_strerror(err) : "empty answer");
	len = want < ctx->chunk_max ? want : ctx->chunk_max;
	if (ans.max_len) {
		size_t m = vmmx__round_down(ans.max_len, ctx->chunk_min);

		m = m < ctx->chunk_min ? ctx->chunk_min : m;
		len = len < m ? len : m;
	}
	/* A policy that evicts makes room at its first choice before falling back. */
	if (vmmx__policy_can_evict(pol) && vmmx__slot(ctx, ans.locs[0]) >= 0) {
		enum vmmx__why why;
		uint64_t r = vmmx__room(ctx, ans.locs[0], len, &why, snap);

		if (r < len && vmmx__policy_evict(buf, &req, ans.locs[0], len - r))
			vmmx__roomsnap_forget(snap); /* memory moved */
	}
	err = -VMMX_ENOMEM;
	for (i = 0; i < ans.nlocs && err == -VMMX_ENOMEM; i++) {
		struct vmmx_loc loc = ans.locs[i];
		enum vmmx__why why = VMMX__WHY_OK;
		uint64_t r;
		size_t l = len, k = strlen(tried);
		char name[32];

		if (vmmx__slot(ctx, loc) < 0 ||
		    (loc.kind == VMMX_LOC_DEVICE && !ctx->peer[vmmx__slot(ctx, loc)])) {
			snprintf(tried + k, sizeof(tried) - k, "%s%s %s", k ? "; " : "",
				 vmmx_loc_name(loc, name, sizeof(name)),
				 vmmx__slot(ctx, loc) < 0 ? "not usable"
							  : "not reachable (no peer access)");
			if (!i)
				first_why = VMMX__WHY_OOM;
			continue;
		}
		/* What the location can take now, in whole minimum chunks. */
		r = vmmx__room(ctx, loc, l, &why, snap);
		if (r < l)
			l = vmmx__round_down(r, ctx->chunk_min);
		if (l < ctx->chunk_min)
			err = -VMMX_ENOMEM;
		else
			err = make_chunk(buf, off, l, loc, c, &why, &hit);
		if (!err && !hit && snap->have[vmmx__slot(ctx, loc)]) {
			uint64_t *fr = &snap->fr[vmmx__slot(ctx, loc)];

			*fr = *fr > c->size ? *fr - c->size : 0;
		}
		if (err == -VMMX_ENOMEM) {
			snprintf(tried + k, sizeof(tried) - k, "%s%s %s", k ? "; " : "",
				 vmmx_loc_name(loc, name, sizeof(name)),
				 why == VMMX__WHY_LIMIT	   ? "at its limit"
				 : why == VMMX__WHY_HEADROOM ? "within its headroom"
							     : "full");
			if (!i)
				first_why = why;
		}
	}
	if (err == -VMMX_ENOMEM) {
		char a[32];

		return vmmx__fail(&ctx->conf.log, err,
				  "vmmx_buf_resize: no room for %s at offset %zu under policy %s: %s",
				  vmmx__fmt_size(want, a, sizeof(a)), off, pol->spec, tried);
	}
	if (err)
		return err;
	if (i > 1) {
		char from[32], to[32];

		__atomic_fetch_add(&ctx->ctr.fallbacks[first_why], 1, __ATOMIC_RELAXED);
		vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO,
			   "fallback: buffer %p offset %zu (%zu bytes) placed on %s, not %s: %s",
			   (void *)buf->base, off, c->size, vmmx_loc_name(c->loc, to, sizeof(to)),
			   vmmx_loc_name(ans.locs[0], from, sizeof(from)), tried);
	}
	if (ctx->trace_fd >= 0) {
		struct vmmx__trace_rec rec = {
			.buf = buf, .chunk = idx, .off = off, .size = c->size,
			.preferred = ans.locs[0], .chosen = c->loc,
			.why = i > 1 ? first_why : VMMX__WHY_OK, .cache_hit = hit, .tried = tried,
		};

		vmmx__trace_place(ctx, &rec);
	}
	return 0;
}

static int grow(struct vmmx_buf *buf, struct vmmx__table *old, size_t size)
{
	struct vmmx_ctx *ctx = buf->ctx;
	size_t max_new = (size - old->mapped) / ctx->chunk_min, n = 0, off = old->mapped, cap;
	size_t first = old->n;
	struct vmmx__roomsnap snap = { 0 };
	struct vmmx__chunk *nc;
	struct vmmx__table *t, *cur;
	int err;

	/* Growing within the mapped tail of the last chunk needs no driver call. */
	if (size <= old->mapped) {
		t = vmmx__table_alloc(old->n);
		if (!t)
			return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_resize: out of memory");
		memcpy(t->c, old->c, old->n * sizeof(old->c[0]));
		t->mapped = old->mapped;
		t->size = size;
		vmmx__table_publish(buf, t);
		return 0;
	}
	/* New chunks are kept apart: an eviction during this grow may migrate
	 * this buffer's own chunks and publish a new table (freeing @old). */
	/* Few big chunks is the rule: start small and grow the array as needed
	 * (sizing it for the worst case, all minimum chunks, costs page faults
	 * on big grows). */
	cap = max_new < 16 ? max_new : 16;
	nc = malloc(cap * sizeof(*nc));
	if (!nc)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_resize: out of memory");
	while (off < size) {
		if (n == cap) {
			struct vmmx__chunk *more;

			cap = cap * 2 < max_new ? cap * 2 : max_new;
			more = realloc(nc, cap * sizeof(*nc));
			if (!more) {
				err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM,
						 "vmmx_buf_resize: out of memory");
				goto err_unwind;
			}
			nc = more;
		}
		err = place_chunk(buf, first + n, off, size - off, &nc[n], &snap);
		if (err)
			goto err_unwind;
		off += nc[n].size;
		n++;
	}
	cur = buf->table;
	t = vmmx__table_alloc(cur->n + n);
	if (!t) {
		err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_resize: out of memory");
		goto err_unwind;
	}
	memcpy(t->c, cur->c, cur->n * sizeof(cur->c[0]));
	memcpy(t->c + cur->n, nc, n * sizeof(nc[0]));
	t->n = cur->n + n;
	t->mapped = off;
	t->size = size;
	vmmx__table_publish(buf, t);
	vmmx__roomsnap_save(ctx, &snap);
	for (size_t j = 0; j < n; j++) {
		__atomic_fetch_add(&ctx->ctr.placed[vmmx__slot(ctx, nc[j].loc)], 1, __ATOMIC_RELAXED);
		vmmx__policy_chunk_event(buf, &nc[j], VMMX_POLICY_EV_PLACED);
	}
	free(nc);
	return 0;

err_unwind:
	unwind_chunks(buf, nc, n);
	free(nc);
	/* The unwound chunks went to the cache or back to the driver: the
	 * figures this grow kept are no longer right. */
	for (int k = 0; k < VMMX__NSLOTS; k++)
		if (snap.have[k])
			__atomic_store_n(&ctx->fcache[k].ns, 0, __ATOMIC_RELEASE);
	return err;
}

int vmmx__chunk_remap(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c)
{
	int err = vmm_map(ctx->vmm, va, c->size, c->handle);

	if (err)
		return err;
	err = vmmx__chunk_set_access(ctx, va, c->size, c->loc, c->cpu);
	if (err)
		vmmx__unmap_or_defer(ctx, va, c->size); /* mapped but unusable */
	return err;
}

/*
 * Map and grant, each step tried VMMX__TRIES times; a mapping that worked is
 * kept while the grant is tried again (mapping over it would fail).
 */
int vmmx__chunk_restore(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c)
{
	bool mapped = false;
	int err = 0;

	for (int i = 0; i < VMMX__TRIES; i++) {
		if (!mapped) {
			err = vmm_map(ctx->vmm, va, c->size, c->handle);
			if (err)
				continue;
			mapped = true;
		}
		err = vmmx__chunk_set_access(ctx, va, c->size, c->loc, c->cpu);
		if (!err)
			return 0;
	}
	if (mapped)
		vmmx__unmap_or_defer(ctx, va, c->size);
	return err;
}

/*
 * The chunk a shrink cuts through gives back what lies past the new size:
 * handles map whole (cuMemMap's offset must be 0) and cannot be cut, so a
 * handle of just the kept part @nc->size is made at the chunk's location and
 * the kept bytes are copied into it (a copy within one location) through a
 * staging address.  Nothing the buffer shows changes here; swap_handle()
 * then puts the new handle in place.  0 with @nc->handle set; -VMMX_ENOMEM,
 * unlogged, when the location cannot hold both handles at once (its limit,
 * or the driver's memory: cut_bounce() is for that); or another error after
 * undoing this step.
 */
static int cut_prepare(struct vmmx_buf *buf, const struct vmmx__chunk *c, struct vmmx__chunk *nc)
{
	struct vmmx_ctx *ctx = buf->ctx;
	void *stage;
	int err;

	err = vmmx__handle_get(ctx, c->loc, nc->size, &nc->handle);
	if (err)
		return err;
	err = vmm_reserve(ctx->vmm, nc->size, ctx->gran, &stage);
	if (err)
		goto err_handle;
	err = vmm_map(ctx->vmm, stage, nc->size, nc->handle);
	if (err)
		goto err_reserve;
	err = vmmx__chunk_set_access(ctx, stage, nc->size, c->loc, false);
	if (!err)
		err = vmm_copy(ctx->vmm, stage, (void *)(buf->base + c->off), nc->size);
	/* The handle keeps its memory (and now the data) without this mapping. */
	if (vmmx__unmap_or_defer(ctx, stage, nc->size)) {
		/* A range still holding a mapping must not be freed yet. */
		vmmx__defer(ctx, VMMX_OP_UNRESERVE, stage, nc->size, 0, (struct vmmx_loc){ 0 });
		if (err)
			vmmx__release_or_defer(ctx, nc->handle, c->loc, nc->size);
		return err;
	}
	vmmx__unreserve_or_defer(ctx, stage, nc->size);
	if (!err)
		return 0;
	goto err_handle;

err_reserve:
	vmmx__unreserve_or_defer(ctx, stage, nc->size);
err_handle:
	vmmx__cache_put(ctx, c->loc, nc->handle, nc->size);
	return err;
}

/*
 * Put @to at @from's address in its place.  On failure @from is mapped back;
 * *@lost says that failed too and the address is unmapped (logged).
 */
static int swap_handle(struct vmmx_buf *buf, const struct vmmx__chunk *from,
		       const struct vmmx__chunk *to, bool *lost)
{
	struct vmmx_ctx *ctx = buf->ctx;
	void *va = (void *)(buf->base + from->off);
	int err;

	*lost = false;
	err = vmm_unmap(ctx->vmm, va, from->size);
	if (err)
		return err;
	err = vmmx__chunk_remap(ctx, va, to);
	if (!err)
		return 0;
	if (vmmx__chunk_restore(ctx, va, from)) {
		*lost = true;
		vmmx__logf(&ctx->conf.log, VMMX_LOG_ERROR,
			   "vmmx_buf_resize: the chunk at offset %zu could not be mapped back after a failed shrink; its address is unmapped",
			   from->off);
	}
	return err;
}

/*
 * The cut chunk's kept part when its location cannot hold the old and the
 * new handle at once (a full device, a buffer at VMMX_DEVICE_LIMIT): the
 * kept bytes wait in ordinary host memory while the old handle is given
 * back, then go into the new handle.  Once the old handle is gone there is
 * no way back: if the new handle fails (another thread or process took the
 * memory, a driver call failed), the kept part goes to a host chunk
 * instead, as a fallback would; *@lost is set only if that fails too.
 * 0 with @nc filled in (its location may have changed); -VMMX_ENOMEM when
 * not even the host bounce could be had (nothing changed).
 */
static int cut_bounce(struct vmmx_buf *buf, const struct vmmx__chunk *c, struct vmmx__chunk *nc,
		      bool *lost)
{
	struct vmmx_ctx *ctx = buf->ctx;
	void *va = (void *)(buf->base + c->off);
	void *tmp = malloc(nc->size);
	int err;

	*lost = false;
	/* The bounce is a driver copy to ordinary host memory, which must not
	 * read a host chunk granted to the GPU only (see lib/copy.c). */
	if (vmm_loc_is_host(c->loc) && !c->cpu) {
		free(tmp);
		return -VMMX_ENOMEM;
	}
	if (!tmp)
		return -VMMX_ENOMEM;
	err = vmm_copy(ctx->vmm, tmp, va, nc->size);
	if (!err)
		err = vmm_unmap(ctx->vmm, va, c->size);
	if (err) {
		free(tmp);
		return err;
	}
	/* Released, not cached: a cached handle would stay charged. */
	vmmx__release_or_defer(ctx, c->handle, c->loc, c->size);
	/* Two tries on the location, then two in host memory: the old handle
	 * is gone, so a transient failure (an injected one, a driver resource)
	 * must not lose the kept bytes. */
	for (int tries = 0; tries < 4; tries++) {
		char name[32];

		if (tries == 2) {
			vmmx__logf(&ctx->conf.log, VMMX_LOG_WARN,
				   "vmmx_buf_resize: %s failed to take back the kept part of the chunk at offset %zu (%s); it goes to host memory",
				   vmmx_loc_name(nc->loc, name, sizeof(name)), c->off,
				   vmmx_strerror(err));
			nc->loc = (struct vmmx_loc){ VMMX_LOC_HOST, 0 };
			nc->cpu = vmmx__cpu_grant(ctx, nc->loc, true);
		}
		err = vmmx__handle_get(ctx, nc->loc, nc->size, &nc->handle);
		if (err)
			continue;
		err = vmmx__chunk_remap(ctx, va, nc);
		if (err) { /* nothing stays mapped */
			vmmx__cache_put(ctx, nc->loc, nc->handle, nc->size);
			continue;
		}
		err = vmm_copy(ctx->vmm, va, tmp, nc->size);
		if (!err)
			break;
		if (vmmx__unmap_or_defer(ctx, va, nc->size))
			vmmx__release_or_defer(ctx, nc->handle, nc->loc, nc->size);
		else
			vmmx__cache_put(ctx, nc->loc, nc->handle, nc->size);
	}
	free(tmp);
	if (err) {
		*lost = true;
		vmmx__logf(&ctx->conf.log, VMMX_LOG_ERROR,
			   "vmmx_buf_resize: the kept part of the chunk at offset %zu was lost after its old handle was given back (%s)",
			   c->off, vmmx_strerror(err));
	}
	return err;
}

/* A chunk of a table about to be retired gives its host copy to the cache. */
static void drop_shadow(struct vmmx_ctx *ctx, const struct vmmx__chunk *c)
{
	struct vmmx__chunk tmp = *c;

	vmmx__shadow_drop(ctx, &tmp, false);
}

/*
 * Shrink: chunks that start at or past the new size are unmapped; the one
 * the size cuts through is replaced by a handle of its kept part, so the
 * buffer holds no memory past round_up(size, chunk_min).  Steps, each undone
 * in reverse when a later one fails: unmap the chunks past the size, from
 * the end; copy the cut chunk's kept part into its new handle; swap the cut
 * chunk's handle.  When the driver has no memory even for the kept part, the
 * cut chunk stays whole (logged at info level) and the shrink succeeds: the
 * caller asked to give memory back, which failing would not do.
 */
static int shrink(struct vmmx_buf *buf, struct vmmx__table *old, size_t size)
{
	struct vmmx_ctx *ctx = buf->ctx;
	struct vmmx__chunk nc = { 0 };
	struct vmmx__table *t;
	size_t keep = old->n, j, cut_idx;
	bool cut, lost = false, bounced = false;
	int err = 0;

	while (keep > 0 && old->c[keep - 1].off >= size)
		keep--;
	cut = keep && old->c[keep - 1].off + old->c[keep - 1].size > size;
	cut_idx = keep - 1;
	/* Room for every chunk: a failed restore may keep more than @keep. */
	t = vmmx__table_alloc(old->n);
	if (!t)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_resize: out of memory");
	memcpy(t->c, old->c, keep * sizeof(old->c[0]));
	t->n = keep;
	t->size = size;
	t->mapped = keep ? old->c[keep - 1].off + old->c[keep - 1].size : 0;

	for (j = old->n; j > keep; j--) {
		const struct vmmx__chunk *c = &old->c[j - 1];

		err = vmm_unmap(ctx->vmm, (void *)(buf->base + c->off), c->size);
		if (err)
			break;
	}
	if (!err && cut) {
		char a[32];

		nc = old->c[keep - 1];
		nc.size = size - nc.off;
		/* A copy of the whole chunk is no copy of the kept part. */
		nc.shadow_loc = (struct vmmx_loc){ VMMX_LOC_NONE, 0 };
		err = cut_prepare(buf, &old->c[keep - 1], &nc);
		if (err == -VMMX_ENOMEM) {
			vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO,
				   "vmmx_buf_resize: no room for a second %s handle beside the chunk at offset %zu; its kept part goes through host memory",
				   vmmx__fmt_size(nc.size, a, sizeof(a)), nc.off);
			vmmx__clear_last_error();
			err = cut_bounce(buf, &old->c[keep - 1], &nc, &lost);
			bounced = !err || lost; /* the old handle is gone */
			if (err == -VMMX_ENOMEM && !lost) {
				/* Not even the bounce: keep the chunk whole. */
				vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO,
					   "vmmx_buf_resize: no host memory to bounce %s through; the chunk at offset %zu stays whole",
					   vmmx__fmt_size(nc.size, a, sizeof(a)), nc.off);
				vmmx__clear_last_error();
				cut = false;
				err = 0;
			} else if (!err) {
				t->c[keep - 1] = nc;
			}
		} else if (!err) {
			err = swap_handle(buf, &old->c[keep - 1], &nc, &lost);
			if (err)
				vmmx__cache_put(ctx, nc.loc, nc.handle, nc.size);
			else
				t->c[keep - 1] = nc;
		}
		if (!err && cut)
			t->mapped = size;
	}
	if (err) {
		size_t failed_at = j;

		/* Map back what was unmapped, in reverse order again, so the
		 * buffer is exactly as it was. */
		if (lost)
			j = keep - 1;
		else
			for (; j < old->n; j++)
				if (vmmx__chunk_restore(ctx, (void *)(buf->base + old->c[j].off),
							&old->c[j]))
					break;
		if (j == old->n) {
			free(t);
			return err;
		}
		/* The driver failed again while restoring: chunks [j, n) are no
		 * longer mapped.  Keep the table true to what is mapped, release
		 * the rest, and say so loudly; this is the one case where a failed
		 * resize cannot leave the buffer as it was. */
		vmmx__logf(&ctx->conf.log, VMMX_LOG_ERROR,
			   "vmmx_buf_resize: shrink failed at chunk %zu and restoring chunk %zu failed too; buffer truncated to %zu bytes",
			   failed_at ? failed_at - 1 : 0, j, old->c[j].off);
		memcpy(t->c, old->c, j * sizeof(old->c[0]));
		t->n = j;
		t->mapped = old->c[j].off;
		t->size = old->size < t->mapped ? old->size : t->mapped;
		keep = j;
		cut = false;
	}
	/* Past the point of no return: the handles go to the cache, or are
	 * released (a failed release is queued, not reported).  Done before
	 * the old table is retired: it may be freed any time after that. */
	for (j = old->n; j > keep; j--) {
		vmmx__policy_chunk_event(buf, &old->c[j - 1], VMMX_POLICY_EV_RELEASED);
		drop_shadow(ctx, &old->c[j - 1]);
		if (bounced && j == cut_idx + 1)
			continue; /* cut_bounce() gave it back */
		vmmx__cache_put(ctx, old->c[j - 1].loc, old->c[j - 1].handle, old->c[j - 1].size);
	}
	if (cut) {
		const struct vmmx__chunk *c = &old->c[keep - 1];

		vmmx__policy_chunk_event(buf, c, VMMX_POLICY_EV_RELEASED);
		drop_shadow(ctx, c);
		if (!bounced)
			vmmx__cache_put(ctx, c->loc, c->handle, c->size);
		vmmx__policy_chunk_event(buf, &nc, VMMX_POLICY_EV_PLACED);
	}
	vmmx__table_publish(buf, t);
	return err;
}

VMMX_API int vmmx_buf_resize(struct vmmx_buf *buf, size_t size)
{
	struct vmmx_ctx *ctx;
	struct vmmx__table *old;
	size_t old_size;
	int err;

	vmmx__clear_last_error();
	if (!buf)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_resize: buf is NULL");
	if (vmmx__inherited(buf->ctx))
		return vmmx__fail_inherited(buf->ctx, "vmmx_buf_resize");
	ctx = buf->ctx;
	if (size > buf->capacity)
		return vmmx__fail(&ctx->conf.log, -VMMX_ERANGE,
				  "vmmx_buf_resize: size %zu exceeds the capacity %zu", size,
				  buf->capacity);
	size = vmmx__round_up(size, ctx->chunk_min);
	vmmx__deferred_retry(ctx);

	pthread_mutex_lock(&buf->lock);
	old = buf->table;
	old_size = old->size;
	if (size == old->size)
		err = 0;
	else if (size > old->size)
		err = grow(buf, old, size);
	else
		err = shrink(buf, old, size);
	pthread_mutex_unlock(&buf->lock);
	/* Room freed: a policy may want to promote chunks (no lock held now). */
	if (!err && size < old_size)
		vmmx__policy_rebalance(ctx, buf->policy);
	__atomic_fetch_add(err ? &ctx->ctr.resize_failures : &ctx->ctr.resizes, 1, __ATOMIC_RELAXED);
	return err;
}

VMMX_API void vmmx_buf_destroy(struct vmmx_buf *buf)
{
	struct vmmx_ctx *ctx;
	struct vmmx__table *t;
	bool deferred = false;

	if (!buf)
		return;
	ctx = buf->ctx;
	if (vmmx__inherited(ctx)) {
		vmmx__buf_abandon(buf);
		return;
	}
	vmmx__ctx_remove_buf(ctx, buf); /* waits for readers */
	t = buf->table;
	for (size_t j = t->n; j > 0; j--) {
		const struct vmmx__chunk *c = &t->c[j - 1];

		vmmx__policy_chunk_event(buf, c, VMMX_POLICY_EV_RELEASED);
		drop_shadow(ctx, c);
		if (vmmx__unmap_or_defer(ctx, (void *)(buf->base + c->off), c->size)) {
			/* Released even though the unmap was deferred: the driver
			 * frees the memory when its last mapping goes. */
			deferred = true;
			vmmx__release_or_defer(ctx, c->handle, c->loc, c->size);
		} else {
			vmmx__cache_put(ctx, c->loc, c->handle, c->size);
		}
	}
	/* A range still holding a mapping must not be freed: queue the unreserve
	 * behind the unmap that failed. */
	if (deferred)
		vmmx__defer(ctx, VMMX_OP_UNRESERVE, (void *)buf->base, buf->capacity, 0,
			    (struct vmmx_loc){ 0 });
	else
		vmmx__unreserve_or_defer(ctx, (void *)buf->base, buf->capacity);
	vmmx__policy_buf_event(buf->policy, buf->id, buf->capacity, 0);
	if (t->n)
		vmmx__policy_rebalance(ctx, buf->policy);
	vmmx__policy_put(ctx, buf->policy);
	pthread_mutex_destroy(&buf->lock);
	free(t);
	free(buf);
}

/* The answer of a getter that cannot return an error code: NULL or 0 then. */
static bool getter_ok(const struct vmmx_buf *buf, const char *fn)
{
	if (!buf)
		return false;
	if (vmmx__inherited(buf->ctx)) {
		vmmx__fail_inherited(buf->ctx, fn);
		return false;
	}
	return true;
}

VMMX_API void *vmmx_buf_ptr(const struct vmmx_buf *buf)
{
	return getter_ok(buf, "vmmx_buf_ptr") ? (void *)buf->base : NULL;
}

VMMX_API size_t vmmx_buf_capacity(const struct vmmx_buf *buf)
{
	return getter_ok(buf, "vmmx_buf_capacity") ? buf->capacity : 0;
}

VMMX_API size_t vmmx_buf_size(const struct vmmx_buf *buf)
{
	size_t size;

	if (!getter_ok(buf, "vmmx_buf_size"))
		return 0;
	urcu_bp_read_lock();
	size = rcu_dereference(buf->table)->size;
	urcu_bp_read_unlock();
	return size;
}

/* Whether a chunk at @c counts for @want (HOST: any host memory). */
static bool loc_matches(struct vmmx_loc c, struct vmmx_loc want)
{
	if (want.kind == VMMX_LOC_HOST)
		return vmm_loc_is_host(c);
	return c.kind == want.kind && c.id == want.id;
}

/*
 * Bytes of [off, off + len) on the device side and the host side (@want
 * NONE), or at @want alone (in *@dev_p).  -VMMX_ERANGE past the size, named
 * after @fn.  Lock-free: one RCU-published table.
 */
static int residency(const struct vmmx_buf *buf, const char *fn, size_t off, size_t len,
		     struct vmmx_loc want, size_t *dev_p, size_t *host_p)
{
	const struct vmmx__table *t;
	size_t dev = 0, host = 0;

	urcu_bp_read_lock();
	t = rcu_dereference(buf->table);
	if (off > t->size || len > t->size - off) {
		size_t size = t->size;

		urcu_bp_read_unlock();
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_ERANGE,
				  "%s: range [%zu, +%zu) goes past the size %zu", fn, off, len, size);
	}
	if (len) {
		for (size_t i = vmmx__table_find(t, off); i < t->n && t->c[i].off < off + len; i++) {
			size_t a = t->c[i].off > off ? t->c[i].off : off;
			size_t e = t->c[i].off + t->c[i].size;

			if (e > off + len)
				e = off + len;
			if (want.kind != VMMX_LOC_NONE)
				dev += loc_matches(t->c[i].loc, want) ? e - a : 0;
			else if (vmm_loc_is_host(t->c[i].loc))
				host += e - a;
			else
				dev += e - a;
		}
	}
	urcu_bp_read_unlock();
	*dev_p = dev;
	*host_p = host;
	return 0;
}

VMMX_API int vmmx_buf_residency(const struct vmmx_buf *buf, size_t off, size_t len,
				struct vmmx_residency *r)
{
	size_t dev, host;
	int err;

	vmmx__clear_last_error();
	if (!buf || !r)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_residency: NULL argument");
	if (vmmx__inherited(buf->ctx))
		return vmmx__fail_inherited(buf->ctx, "vmmx_buf_residency");
	err = residency(buf, "vmmx_buf_residency", off, len, (struct vmmx_loc){ VMMX_LOC_NONE, 0 },
			&dev, &host);
	if (err)
		return err;
	r->device = dev;
	r->host = host;
	return 0;
}

VMMX_API int vmmx_buf_residency_at(const struct vmmx_buf *buf, size_t off, size_t len,
				   struct vmmx_loc loc, size_t *bytes_p)
{
	size_t bytes, unused;
	int err;

	vmmx__clear_last_error();
	if (!buf || !bytes_p)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_residency_at: NULL argument");
	if (vmmx__inherited(buf->ctx))
		return vmmx__fail_inherited(buf->ctx, "vmmx_buf_residency_at");
	if (loc.kind != VMMX_LOC_DEVICE && loc.kind != VMMX_LOC_HOST &&
	    loc.kind != VMMX_LOC_HOST_NUMA)
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_buf_residency_at: location kind %d is none of DEVICE, HOST and HOST_NUMA",
				  (int)loc.kind);
	err = residency(buf, "vmmx_buf_residency_at", off, len, loc, &bytes, &unused);
	if (err)
		return err;
	*bytes_p = bytes;
	return 0;
}

VMMX_API int vmmx_buf_chunks(const struct vmmx_buf *buf, struct vmmx_chunk_info *chunks,
			     size_t max, size_t *count_p)
{
	const struct vmmx__table *t;
	size_t n;

	vmmx__clear_last_error();
	if (!buf || !count_p || (!chunks && max))
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_chunks: NULL argument");
	if (vmmx__inherited(buf->ctx))
		return vmmx__fail_inherited(buf->ctx, "vmmx_buf_chunks");
	urcu_bp_read_lock();
	t = rcu_dereference(buf->table);
	/* Chunks entirely past the size are not part of the buffer (none exist
	 * today, as shrink releases them, but the rule is what readers see). */
	for (n = 0; n < t->n && t->c[n].off < t->size; n++) {
		if (n < max)
			chunks[n] = (struct vmmx_chunk_info){
				.base = (void *)(buf->base + t->c[n].off),
				.size = t->c[n].size,
				.loc = t->c[n].loc,
				.buf = (struct vmmx_buf *)buf,
			};
	}
	urcu_bp_read_unlock();
	*count_p = n;
	return 0;
}

VMMX_API const char *vmmx_loc_name(struct vmmx_loc loc, char *b, size_t len)
{
	switch (loc.kind) {
	case VMMX_LOC_DEVICE:
		snprintf(b, len, "device:%d", loc.id);
		break;
	case VMMX_LOC_HOST:
		snprintf(b, len, "host");
		break;
	case VMMX_LOC_HOST_NUMA:
		snprintf(b, len, "host-numa:%d", loc.id);
		break;
	default:
		snprintf(b, len, "none");
		break;
	}
	return b;
}
