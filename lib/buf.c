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
 * Handles map whole (cuMemMap takes offset 0 only), and replacing a handle
 * unmaps its whole range for a moment.  So a shrink never replaces the
 * chunk its new size cuts through: that chunk stays whole, its tail past the
 * size is slack (table->mapped > table->size), and no byte below the new
 * size is ever unmapped by a resize.  vmmx_buf_trim(), which the caller
 * calls when nothing uses the kept bytes, replaces the cut chunk by a
 * handle of its kept part.
 *
 * Writers that unmap chunks below the size wait for libvmmx calls that use
 * the buffer's memory (vmmx__buf_pin(), pin.c); moves the library starts
 * itself skip a buffer in use instead (evict.c).
 *
 * Also here: vmmx_buf_advise (read-mostly marks, then the policy's advice
 * and rebalance) and the destructor of an inherited buffer in a forked
 * child.  The chunk tables' primitives are table.c's; mapping one chunk is
 * map.c's; its handle comes from the one door, vmmx__handle_get (cache.c).
 */
#include "config.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "internal/obj.h"

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
	if (vmmx__tag_cur[0]) {
		buf->tag = strdup(vmmx__tag_cur);
		if (!buf->tag) {
			err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM,
					 "vmmx_buf_create: out of memory");
			goto err_reserve;
		}
	}
	err = vmmx__ctx_add_buf(ctx, buf);
	if (err)
		goto err_tag;
	vmmx__policy_buf_event(pol, buf->id, buf->capacity, 1);
	*buf_p = buf;
	return 0;

err_tag:
	free(buf->tag);
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
 * chunk_min (the handle door, vmmx__handle_get, says how).  Returns 0 with
 * *@out filled; -VMMX_ENOMEM when this location cannot take even chunk_min
 * (the caller falls back, *@why says why); another error when a driver step
 * failed for another reason (the caller unwinds).
 */
static int make_chunk(struct vmmx_buf *buf, size_t off, size_t size, struct vmmx_loc loc,
		      struct vmmx__chunk *out, enum vmmx__why *why, bool *hit)
{
	struct vmmx_ctx *ctx = buf->ctx;
	bool cpu = vmmx__cpu_grant(ctx, loc, false);
	vmm_handle_t h;
	int err;

	err = vmmx__handle_get(ctx, loc, size, ctx->chunk_min, 0, &h, &size, hit, why);
	if (err)
		return err;
	err = vmmx__chunk_map_new(ctx, (void *)(buf->base + off), size, loc, h, cpu);
	if (err)
		return err;
	*out = (struct vmmx__chunk){ .off = off, .size = size, .loc = loc, .handle = h,
				     .cpu = cpu };
	return 0;
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

/*
 * The chunk a trim cuts through gives back what lies past the size: handles
 * map whole (cuMemMap's offset must be 0) and cannot be cut, so a handle of
 * just the kept part @nc->size is made at @nc->loc and the kept bytes are
 * copied into it through a staging address.  Nothing the buffer shows
 * changes here; swap_handle() then puts the new handle in place.  0 with
 * @nc->handle set; -VMMX_ENOMEM, unlogged, when @nc->loc has no room for the
 * kept part beside the old handle; or another error after undoing this step.
 */
static int cut_prepare(struct vmmx_buf *buf, const struct vmmx__chunk *c, struct vmmx__chunk *nc)
{
	struct vmmx_ctx *ctx = buf->ctx;
	void *stage;
	enum vmmx__why why = VMMX__WHY_OK;
	size_t got;
	bool hit;
	int err;

	err = vmmx__handle_get(ctx, nc->loc, nc->size, nc->size, 0, &nc->handle, &got, &hit, &why);
	if (err)
		return err;
	err = vmm_reserve(ctx->vmm, nc->size, ctx->gran, &stage);
	if (err)
		goto err_handle;
	err = vmm_map(ctx->vmm, stage, nc->size, nc->handle);
	if (err)
		goto err_reserve;
	/* The staging side lies in one location and the source in another at
	 * most: the copy never spans a change of location on either side. */
	err = vmmx__chunk_set_access(ctx, stage, nc->size, nc->loc, false);
	if (!err)
		err = vmm_copy(ctx->vmm, stage, (void *)(buf->base + c->off), nc->size);
	/* The handle keeps its memory (and now the data) without this mapping. */
	if (vmmx__unmap_unreserve_or_defer(ctx, stage, nc->size)) {
		if (err)
			vmmx__release_or_defer(ctx, nc->handle, nc->loc, nc->size);
		return err;
	}
	if (!err)
		return 0;
	goto err_handle;

err_reserve:
	vmmx__unreserve_or_defer(ctx, stage, nc->size);
err_handle:
	vmmx__cache_put(ctx, nc->loc, nc->handle, nc->size);
	return err;
}

/*
 * Put @to at @from's address in its place.  Both handles hold the kept
 * bytes, so until one of them is mapped there again nothing is lost: on
 * failure @from is mapped back, and if that fails too, @to is tried again.
 * 0 when @to is in place; an error when @from is back in place; *@lost when
 * neither could be mapped (the address is unmapped, logged).
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
	if (!vmmx__chunk_restore(ctx, va, from))
		return err;
	if (!vmmx__chunk_restore(ctx, va, to))
		return 0;
	*lost = true;
	vmmx__logf(&ctx->conf.log, VMMX_LOG_ERROR,
		   "vmmx_buf_trim: neither the old nor the new handle of the chunk at offset %zu could be mapped again (%s); its address is unmapped",
		   from->off, vmmx_strerror(err));
	return err;
}

/*
 * A chunk unmapped from its address (or parked: never mapped there) gives
 * its handle to the cache; a parked one is unmapped from its copy's own
 * address first, and released instead when that unmap had to wait.
 */
static void release_chunk(struct vmmx_ctx *ctx, const struct vmmx__chunk *c)
{
	if (c->parked) {
		__atomic_fetch_sub(&ctx->parked_bytes, c->size, __ATOMIC_RELAXED);
		if (!vmmx__hva_drop(ctx, c->hva, c->size)) {
			vmmx__release_or_defer(ctx, c->handle, c->loc, c->size);
			return;
		}
	}
	vmmx__cache_put(ctx, c->loc, c->handle, c->size);
}

/* A chunk of a table about to be retired gives its host copy to the cache. */
static void drop_shadow(struct vmmx_ctx *ctx, const struct vmmx__chunk *c)
{
	struct vmmx__chunk tmp = *c;

	vmmx__shadow_drop(ctx, &tmp, false);
}

/*
 * Unmap the chunks of @old that lie wholly at or past @size, from the end,
 * and write into @t (room for old->n chunks) the table that stays: @size,
 * and every chunk still mapped.  No byte below @size is touched.  An unmap
 * that fails (after VMMX__TRIES tries) stops the walk: that chunk and those
 * before it stay mapped past the size, as slack that a later trim, grow or
 * destroy deals with; nothing is lost, so it is no error (logged).  The
 * unmapped chunks' handles go to the cache.
 */
static void drop_past(struct vmmx_buf *buf, const struct vmmx__table *old, size_t size,
		      struct vmmx__table *t, const char *fn)
{
	struct vmmx_ctx *ctx = buf->ctx;
	size_t keep = old->n, j;

	while (keep > 0 && old->c[keep - 1].off >= size)
		keep--;
	for (j = old->n; j > keep; j--) {
		const struct vmmx__chunk *c = &old->c[j - 1];
		int err = c->parked ? 0 : vmmx__unmap_tries(ctx, (void *)(buf->base + c->off), c->size);

		if (err) {
			vmmx__logf(&ctx->conf.log, VMMX_LOG_WARN,
				   "%s: the chunk at offset %zu could not be unmapped (%s); it stays mapped past the size %zu",
				   fn, c->off, vmmx_strerror(err), size);
			vmmx__clear_last_error();
			break;
		}
	}
	memcpy(t->c, old->c, j * sizeof(old->c[0]));
	t->n = j;
	t->size = size;
	t->mapped = j ? old->c[j - 1].off + old->c[j - 1].size : 0;
	/* Past the point of no return: the handles go to the cache, or are
	 * released (a failed release is queued, not reported).  Done before
	 * the old table is retired: it may be freed any time after that. */
	for (size_t k = old->n; k > j; k--) {
		const struct vmmx__chunk *c = &old->c[k - 1];

		vmmx__policy_chunk_event(buf, c, VMMX_POLICY_EV_RELEASED);
		drop_shadow(ctx, c);
		release_chunk(ctx, c);
	}
}

/*
 * Shrink: the chunks that lie wholly past the new size are unmapped and go
 * to the cache; the chunk the new size cuts through stays whole and mapped,
 * so no byte below the new size is ever unmapped, even for a moment (a
 * kernel or a copy may be reading it).  Its tail past the size is slack:
 * still mapped and charged, used again by a grow, given back by
 * vmmx_buf_trim() (which the caller calls when nothing uses the kept bytes)
 * or by the destroy.  Nothing here can lose data: past the table's memory,
 * the only driver calls are unmaps of chunks past the size.
 */
static int shrink(struct vmmx_buf *buf, struct vmmx__table *old, size_t size)
{
	struct vmmx__table *t = vmmx__table_alloc(old->n);

	if (!t)
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_ENOMEM,
				  "vmmx_buf_resize: out of memory");
	drop_past(buf, old, size, t, "vmmx_buf_resize");
	vmmx__table_publish(buf, t);
	return 0;
}

/*
 * Trim: what shrink kept past the size goes.  Chunks wholly past it are
 * unmapped; the cut chunk is replaced by a handle of its kept part, on its
 * own location when that has room for both handles at once, else in host
 * memory, from where a migration takes it home once the old handle is gone.  The old handle is given
 * back only once the new one is mapped in its place: at every step one
 * handle holding the kept bytes is mapped or can be mapped again, so a
 * failure leaves the cut chunk as it was.
 */
static int trim(struct vmmx_buf *buf, struct vmmx__table *old, bool *moved_host)
{
	struct vmmx_ctx *ctx = buf->ctx;
	struct vmmx__table *t = vmmx__table_alloc(old->n);
	struct vmmx__chunk nc;
	const struct vmmx__chunk *c;
	struct vmmx_loc home;
	size_t moved = 0;
	bool lost = false;
	int err;

	if (!t)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_trim: out of memory");
	drop_past(buf, old, old->size, t, "vmmx_buf_trim");
	if (t->mapped == t->size) {
		vmmx__table_publish(buf, t);
		return 0;
	}
	if (t->mapped != old->mapped) {
		/* Publish what was dropped before the cut can fail. */
		vmmx__table_publish(buf, t);
		old = t;
		t = vmmx__table_alloc(old->n);
		if (!t)
			return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM,
					  "vmmx_buf_trim: out of memory");
	}
	c = &old->c[old->n - 1];
	nc = *c;
	nc.size = old->size - c->off;
	/* A copy of the whole chunk is no copy of the kept part: neither
	 * are its own mapping (hva.c) and its sum. */
	nc.shadow_loc = (struct vmmx_loc){ VMMX_LOC_NONE, 0 };
	nc.shadow = 0;
	nc.hva = NULL;
	nc.verified = false;
	nc.shadow_sum = 0;
	err = cut_prepare(buf, c, &nc);
	if (err == -VMMX_ENOMEM && !vmm_loc_is_host(c->loc)) {
		char a[32];

		vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO,
			   "vmmx_buf_trim: no room for a second %s handle beside the chunk at offset %zu; its kept part goes to host memory",
			   vmmx__fmt_size(nc.size, a, sizeof(a)), nc.off);
		vmmx__clear_last_error();
		nc.loc = (struct vmmx_loc){ VMMX_LOC_HOST, 0 };
		nc.cpu = vmmx__cpu_grant(ctx, nc.loc, true);
		err = cut_prepare(buf, c, &nc);
	}
	if (err == -VMMX_ENOMEM)
		err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM,
				 "vmmx_buf_trim: no room anywhere for the %zu kept bytes of the chunk at offset %zu; it stays whole",
				 nc.size, c->off);
	if (!err) {
		err = swap_handle(buf, c, &nc, &lost);
		if (err && !lost)
			vmmx__cache_put(ctx, nc.loc, nc.handle, nc.size);
	}
	if (err && !lost) {
		free(t);
		return err;
	}
	memcpy(t->c, old->c, old->n * sizeof(old->c[0]));
	t->n = old->n;
	t->size = old->size;
	if (lost) {
		/* Neither handle could be mapped: keep the table true to what
		 * is mapped, and keep both handles' memory off the books. */
		vmmx__release_or_defer(ctx, nc.handle, nc.loc, nc.size);
		t->n--;
		t->size = t->mapped = c->off;
	} else {
		t->c[t->n - 1] = nc;
		t->mapped = old->size;
		*moved_host = !vmmx__same_loc(nc.loc, c->loc);
	}
	vmmx__policy_chunk_event(buf, c, VMMX_POLICY_EV_RELEASED);
	drop_shadow(ctx, c);
	home = c->loc;
	vmmx__cache_put(ctx, c->loc, c->handle, c->size);
	if (!lost)
		vmmx__policy_chunk_event(buf, &nc, VMMX_POLICY_EV_PLACED);
	vmmx__table_publish(buf, t);
	if (lost || !*moved_host)
		return err;
	/* The old handle is gone, so its location has room for the kept part
	 * now: it goes home by an ordinary migration, which never loses a
	 * chunk.  If another thread took the room meanwhile, it stays in host
	 * memory, intact (a fallback, as a grow would make). */
	err = vmmx__migrate_locked(buf, nc.off, nc.size, home, 0, &moved);
	if (err || !moved) {
		vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO,
			   "vmmx_buf_trim: the kept part of the chunk at offset %zu stays in host memory%s%s",
			   nc.off, err ? ": " : "", err ? vmmx_last_error() : "");
		vmmx__clear_last_error();
		return 0;
	}
	*moved_host = false;
	return 0;
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
	/* Sleep and wake: an asleep buffer keeps its size until it wakes. */
	if (__atomic_load_n(&buf->sleep, __ATOMIC_ACQUIRE) != VMMX__AWAKE)
		return vmmx__fail(&ctx->conf.log, -VMMX_EBUSY,
				  "vmmx_buf_resize: the buffer is asleep (vmmx_wake() it first)");
	size = vmmx__round_up(size, ctx->chunk_min);
	vmmx__deferred_retry(ctx);

	pthread_mutex_lock(&buf->lock);
	old = buf->table;
	old_size = old->size;
	if (size == old->size) {
		err = 0;
	} else if (size > old->size) {
		/* A grow may hand out the slack of a parked last chunk: mapped
		 * in place first. */
		err = old->n && old->c[old->n - 1].parked
			      ? vmmx__unpark_locked(buf, "vmmx_buf_resize") : 0;
		if (!err)
			err = grow(buf, buf->table, size);
	} else if (old->n && old->c[old->n - 1].off >= size) {
		/* Chunks go: copies still running past the new size finish first. */
		vmmx__buf_quiesce(buf, true);
		err = shrink(buf, old, size);
		vmmx__buf_unquiesce(buf);
	} else {
		err = shrink(buf, old, size); /* nothing is unmapped */
	}
	pthread_mutex_unlock(&buf->lock);
	/* Room freed: a policy may want to promote chunks (no lock held now). */
	if (!err && size < old_size)
		vmmx__policy_rebalance(ctx, buf->policy);
	__atomic_fetch_add(err ? &ctx->ctr.resize_failures : &ctx->ctr.resizes, 1, __ATOMIC_RELAXED);
	return err;
}

VMMX_API int vmmx_buf_trim(struct vmmx_buf *buf)
{
	struct vmmx_ctx *ctx;
	size_t before, after;
	bool moved_host = false;
	int err;

	vmmx__clear_last_error();
	if (!buf)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_trim: buf is NULL");
	if (vmmx__inherited(buf->ctx))
		return vmmx__fail_inherited(buf->ctx, "vmmx_buf_trim");
	ctx = buf->ctx;
	vmmx__deferred_retry(ctx);
	pthread_mutex_lock(&buf->lock);
	before = buf->table->mapped;
	if (before == buf->table->size) {
		pthread_mutex_unlock(&buf->lock);
		return 0;
	}
	vmmx__buf_quiesce(buf, true);
	/* The cut chunk is copied from its address. */
	err = vmmx__unpark_locked(buf, "vmmx_buf_trim");
	if (!err)
		err = trim(buf, buf->table, &moved_host);
	after = buf->table->mapped;
	vmmx__buf_unquiesce(buf);
	pthread_mutex_unlock(&buf->lock);
	/* Room freed, or a kept part landed in host memory: the policy may
	 * want to move chunks (no lock held now). */
	if (moved_host || after < before)
		vmmx__policy_rebalance(ctx, buf->policy);
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
	/* No call can find the buffer now; one that pinned or held it before finishes. */
	vmmx__buf_wait_released(buf);
	/* A policy move or a host-copy reclaim found the buffer in the list
	 * and took its lock (trylock under ctx->lock) before it was unlisted:
	 * wait for it to finish with the table. */
	pthread_mutex_lock(&buf->lock);
	pthread_mutex_unlock(&buf->lock);
	t = buf->table;
	for (size_t j = t->n; j > 0; j--) {
		const struct vmmx__chunk *c = &t->c[j - 1];

		vmmx__policy_chunk_event(buf, c, VMMX_POLICY_EV_RELEASED);
		drop_shadow(ctx, c);
		if (c->parked) {
			release_chunk(ctx, c);
			continue;
		}
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
	vmmx__buf_sleep_free(buf, false);
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

__thread char vmmx__tag_cur[VMMX_TAG_MAX];

void vmmx__buf_sleep_free(struct vmmx_buf *buf, bool abandon)
{
	free(buf->tag);
	free(buf->sleep_runs);
	if (buf->stash && !abandon)
		vmmx_buf_destroy(buf->stash);
	if (buf->stash_of)
		buf->stash_of->stash = NULL;
}

/* In a forked child: host-side records only, no driver, no plugin (fork.c). */
void vmmx__buf_abandon(struct vmmx_buf *buf)
{
	vmmx__buflist_abandon(buf->ctx, buf);
	/* The policy keeps its reference: vmmx__ctx_abandon() frees policies whole. */
	vmmx__buf_sleep_free(buf, true);
	free(buf->table);
	free(buf);
}

/*
 * VMMX_ADVISE_CPU: grant the CPU the host chunks of [off, off + len) that
 * are granted to the GPU only, and mark them in a new table.  A grant adds
 * the CPU to a mapping in place: nothing is unmapped, so kernels and copies
 * using the chunk meanwhile are not disturbed.  buf->lock held.  0;
 * -VMMX_ENOMEM (nothing changed); or the driver's error of the grant that
 * failed, those made before it kept and marked.
 */
static int grant_cpu(struct vmmx_buf *buf, size_t off, size_t len)
{
	const struct vmmx__table *t = buf->table;
	struct vmmx__table *nt;
	size_t first, last, i;
	int err = 0, granted = 0;

	if (!vmmx__table_span(t, off, len, &first, &last))
		return 0;
	for (i = first; i < last && (t->c[i].cpu || !vmm_loc_is_host(t->c[i].loc)); i++)
		;
	if (i == last)
		return 0;
	nt = vmmx__table_dup(t);
	if (!nt)
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_ENOMEM,
				  "vmmx_buf_advise: no memory for a new chunk table");
	for (; i < last && !err; i++) {
		struct vmmx__chunk *c = &nt->c[i];

		if (c->cpu || !vmm_loc_is_host(c->loc))
			continue;
		if (c->parked) { /* granted when it is mapped in place again */
			c->cpu = true;
			granted++;
			continue;
		}
		err = vmmx__chunk_set_access(buf->ctx, (void *)(buf->base + c->off), c->size,
					     c->loc, true);
		if (!err) {
			c->cpu = true;
			granted++;
		} else {
			err = vmmx__fail(&buf->ctx->conf.log, err,
					 "vmmx_buf_advise: granting the CPU the host chunk at %p "
					 "(%zu bytes) failed: %s", (void *)(buf->base + c->off),
					 c->size, vmmx_strerror(err));
		}
	}
	if (granted)
		vmmx__table_publish(buf, nt);
	else
		free(nt);
	return err;
}

VMMX_API int vmmx_buf_advise(struct vmmx_buf *buf, size_t off, size_t len, int advice)
{
	struct vmmx__policy *pol;
	size_t size;

	vmmx__clear_last_error();
	if (!buf)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_advise: buf is NULL");
	if (vmmx__inherited(buf->ctx))
		return vmmx__fail_inherited(buf->ctx, "vmmx_buf_advise");
	if (advice < VMMX_ADVISE_HOT || advice > VMMX_ADVISE_CPU)
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_buf_advise: advice %d is none of enum vmmx_advice", advice);
	pol = buf->policy;
	pthread_mutex_lock(&buf->lock);
	size = buf->table->size;
	if (off > size || len > size - off) {
		pthread_mutex_unlock(&buf->lock);
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_ERANGE,
				  "vmmx_buf_advise: range [%zu, +%zu) goes past the size %zu", off, len,
				  size);
	}
	if (advice == VMMX_ADVISE_CPU) {
		/* Where memory may be used, not when: nothing for the policy. */
		int err = grant_cpu(buf, off, len);

		pthread_mutex_unlock(&buf->lock);
		return err;
	}
	if (advice == VMMX_ADVISE_READ_MOSTLY || advice == VMMX_ADVISE_NOT_READ_MOSTLY) {
		int err = vmmx__read_mostly_advise(buf, off, len, advice == VMMX_ADVISE_READ_MOSTLY);

		if (err) {
			pthread_mutex_unlock(&buf->lock);
			return err;
		}
	}
	vmmx__policy_advise(pol, buf->id, off, len, advice);
	pthread_mutex_unlock(&buf->lock);
	/* No lock held: moves may wait for the buffers they touch. */
	return vmmx__policy_rebalance(buf->ctx, pol);
}
