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
 * through a chunk keeps that chunk: the table's logical size is below its
 * mapped end, and bytes past the size are unreachable through the API.
 */
#include "config.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* Room on a location for this grow: the limit minus what is held, capped by
 * what the driver says is free. */
static uint64_t room(struct vmmx_ctx *ctx, struct vmmx_loc loc)
{
	enum vmmx__kind k = vmmx__kind_of(loc);
	uint64_t held = __atomic_load_n(&ctx->held[k], __ATOMIC_RELAXED);
	uint64_t lim = ctx->limit[k] > held ? ctx->limit[k] - held : 0;
	uint64_t fr, tot;

	if (vmm_mem_info(ctx->vmm, loc, &fr, &tot))
		return lim; /* no figure: let the create call decide */
	return fr < lim ? fr : lim;
}

size_t vmmx__table_find(const struct vmmx__table *t, size_t off)
{
	size_t lo = 0, hi = t->n;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		if (t->c[mid].off <= off)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

int vmmx__chunk_set_access(struct vmmx_ctx *ctx, void *va, size_t size, struct vmmx_loc loc)
{
	struct vmm_access acc[2] = {
		{ .who = { VMMX_LOC_DEVICE, ctx->device }, .flags = VMM_ACCESS_RW },
		{ .who = { VMMX_LOC_HOST, 0 }, .flags = VMM_ACCESS_RW },
	};

	/* Host chunks are also granted to the CPU, so they are plain host memory
	 * at the same address; the driver refuses CPU access to device memory. */
	return vmm_set_access(ctx->vmm, va, size, acc, vmm_loc_is_host(loc) ? 2 : 1);
}

static struct vmmx__table *table_alloc(size_t n)
{
	struct vmmx__table *t = malloc(sizeof(*t) + n * sizeof(t->c[0]));

	if (t)
		t->n = n;
	return t;
}

VMMX_API int vmmx_buf_create(struct vmmx_ctx *ctx, size_t capacity, const char *policy,
			     struct vmmx_buf **buf_p)
{
	const struct vmmx__policy *pol;
	struct vmmx_buf *buf;
	void *va;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !buf_p)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_buf_create: NULL argument");
	if (!capacity || capacity > SIZE_MAX - ctx->chunk_max)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_buf_create: capacity %zu out of range", capacity);
	pol = policy ? vmmx__policy_find(policy, strlen(policy)) : ctx->policy;
	if (!pol)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOENT,
				  "vmmx_buf_create: unknown policy \"%s\" (known: %s)", policy,
				  vmmx__policy_names());
	buf = calloc(1, sizeof(*buf));
	if (!buf)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_create: out of memory");
	buf->ctx = ctx;
	buf->policy = pol;
	buf->capacity = vmmx__round_up(capacity, ctx->chunk_min);
	buf->table = table_alloc(0);
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
	return err;
}

/* Undo chunks [from, n) of a grow that failed, in reverse order. */
static void unwind_chunks(struct vmmx_buf *buf, const struct vmmx__chunk *c, size_t n)
{
	struct vmmx_ctx *ctx = buf->ctx;

	while (n--) {
		vmmx__unmap_or_defer(ctx, (void *)(buf->base + c[n].off), c[n].size);
		vmmx__release_or_defer(ctx, c[n].handle, c[n].loc, c[n].size);
	}
}

/*
 * Make, map and grant one chunk at @off on @loc, trying sizes from @size
 * down to chunk_min while the driver says it is out of memory.  Returns 0
 * with *@out filled; -VMMX_ENOMEM when this location has no room (the caller
 * falls back); another error when a driver step failed for another reason.
 */
static int make_chunk(struct vmmx_buf *buf, size_t off, size_t size, struct vmmx_loc loc,
		      struct vmmx__chunk *out, const char **why)
{
	struct vmmx_ctx *ctx = buf->ctx;
	void *va = (void *)(buf->base + off);
	vmm_handle_t h;
	int err;

	while (size >= ctx->chunk_min) {
		if (vmmx__charge(ctx, loc, size)) {
			*why = "over its limit";
			return -VMMX_ENOMEM;
		}
		err = vmm_create(ctx->vmm, loc, size, &h);
		if (err == -VMMX_ENOMEM) {
			/* Memory may be fragmented or taken by others: try a smaller handle. */
			vmmx__uncharge(ctx, loc, size);
			*why = "out of memory";
			size = vmmx__round_down(size / 2, ctx->chunk_min);
			continue;
		}
		if (err)
			goto err_charge;
		err = vmm_map(ctx->vmm, va, size, h);
		if (err)
			goto err_create;
		err = vmmx__chunk_set_access(ctx, va, size, loc);
		if (err)
			goto err_map;
		*out = (struct vmmx__chunk){ .off = off, .size = size, .loc = loc, .handle = h };
		return 0;
	}
	return -VMMX_ENOMEM;

err_map:
	vmmx__unmap_or_defer(ctx, va, size);
err_create:
	vmmx__release_or_defer(ctx, h, loc, size);
	return err; /* charge returned by the release (or kept until its retry) */
err_charge:
	vmmx__uncharge(ctx, loc, size);
	return err;
}

static int grow(struct vmmx_buf *buf, struct vmmx__table *old, size_t size)
{
	struct vmmx_ctx *ctx = buf->ctx;
	size_t max_new = (size - old->mapped) / ctx->chunk_min, n = 0, off = old->mapped;
	struct vmmx__table *t;
	uint64_t rooms[VMMX__NKINDS];
	char msg[512] = "";
	int err;

	/* Growing within the mapped tail of the last chunk needs no driver call. */
	if (size <= old->mapped) {
		t = table_alloc(old->n);
		if (!t)
			return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_resize: out of memory");
		memcpy(t->c, old->c, old->n * sizeof(old->c[0]));
		t->mapped = old->mapped;
		t->size = size;
		goto publish;
	}
	t = table_alloc(old->n + max_new);
	if (!t)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_resize: out of memory");
	memcpy(t->c, old->c, old->n * sizeof(old->c[0]));
	rooms[VMMX__DEVICE] = room(ctx, (struct vmmx_loc){ VMMX_LOC_DEVICE, ctx->device });
	rooms[VMMX__HOST] = room(ctx, (struct vmmx_loc){ VMMX_LOC_HOST, 0 });

	while (off < size) {
		struct vmmx__place_req req = {
			.off = off, .want = size - off, .device = ctx->device,
			.room_device = rooms[VMMX__DEVICE], .room_host = rooms[VMMX__HOST],
		};
		struct vmmx_loc locs[VMMX__MAX_RANK];
		struct vmmx__chunk *c = &t->c[old->n + n];
		int nloc, i;
		size_t len = 0;

		nloc = buf->policy->rank(buf->policy, &req, locs, VMMX__MAX_RANK);
		if (nloc <= 0) {
			err = vmmx__fail(&ctx->conf.log, nloc ? nloc : -VMMX_EINVAL,
					 "vmmx_buf_resize: policy %s ranked no location for offset %zu",
					 buf->policy->name, off);
			goto err_unwind;
		}
		err = -VMMX_ENOMEM;
		msg[0] = '\0';
		for (i = 0; i < nloc && err == -VMMX_ENOMEM; i++) {
			enum vmmx__kind k = vmmx__kind_of(locs[i]);
			const char *why = "full";
			char name[32];
			size_t want = size - off;

			if (want > ctx->chunk_max)
				want = ctx->chunk_max;
			/* What the location can take now, in whole minimum chunks. */
			if (rooms[k] < want)
				want = vmmx__round_down(rooms[k], ctx->chunk_min);
			if (want < ctx->chunk_min) {
				why = rooms[k] == 0 && ctx->limit[k] != UINT64_MAX &&
						      __atomic_load_n(&ctx->held[k], __ATOMIC_RELAXED) >=
							      ctx->limit[k]
					      ? "at its limit"
					      : "full";
				err = -VMMX_ENOMEM;
			} else {
				err = make_chunk(buf, off, want, locs[i], c, &why);
			}
			if (err == -VMMX_ENOMEM) {
				size_t l = strlen(msg);

				snprintf(msg + l, sizeof(msg) - l, "%s%s %s", l ? "; " : "",
					 vmmx_loc_name(locs[i], name, sizeof(name)), why);
			}
		}
		if (err == -VMMX_ENOMEM) {
			char a[32];

			err = vmmx__fail(&ctx->conf.log, err,
					 "vmmx_buf_resize: no room for %s at offset %zu under policy %s: %s",
					 vmmx__fmt_size(size - off, a, sizeof(a)), off, buf->policy->name,
					 msg);
			goto err_unwind;
		}
		if (err)
			goto err_unwind;
		if (i > 1) {
			char from[32], to[32];

			__atomic_fetch_add(&ctx->ctr.fallbacks, 1, __ATOMIC_RELAXED);
			vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO,
				   "fallback: buffer %p offset %zu (%zu bytes) placed on %s, not %s: %s",
				   (void *)buf->base, off, c->size,
				   vmmx_loc_name(c->loc, to, sizeof(to)),
				   vmmx_loc_name(locs[0], from, sizeof(from)), msg);
		}
		len = c->size;
		rooms[vmmx__kind_of(c->loc)] -= len < rooms[vmmx__kind_of(c->loc)]
							? len
							: rooms[vmmx__kind_of(c->loc)];
		off += len;
		n++;
	}
	for (size_t j = 0; j < n; j++)
		__atomic_fetch_add(&ctx->ctr.placed[vmmx__kind_of(t->c[old->n + j].loc)], 1,
				   __ATOMIC_RELAXED);
	t->n = old->n + n;
	t->mapped = off;
	t->size = size;
publish:
	rcu_assign_pointer(buf->table, t);
	urcu_bp_synchronize_rcu();
	free(old);
	return 0;

err_unwind:
	unwind_chunks(buf, &t->c[old->n], n);
	free(t);
	return err;
}

static int shrink(struct vmmx_buf *buf, struct vmmx__table *old, size_t size)
{
	struct vmmx_ctx *ctx = buf->ctx;
	struct vmmx__table *t;
	size_t keep = old->n, j;
	int err = 0;

	/* Chunks that start at or past the new size go; one cut through stays. */
	while (keep > 0 && old->c[keep - 1].off >= size)
		keep--;
	/* Room for every chunk: a failed restore may keep more than @keep. */
	t = table_alloc(old->n);
	if (!t)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_resize: out of memory");
	memcpy(t->c, old->c, keep * sizeof(old->c[0]));
	t->n = keep;
	t->size = size;
	t->mapped = keep ? old->c[keep - 1].off + old->c[keep - 1].size : 0;

	/* Unmap from the end; on failure map back what was unmapped (reverse
	 * order again) so the buffer is exactly as it was. */
	for (j = old->n; j > keep; j--) {
		const struct vmmx__chunk *c = &old->c[j - 1];

		err = vmm_unmap(ctx->vmm, (void *)(buf->base + c->off), c->size);
		if (err)
			break;
	}
	if (err) {
		size_t failed_at = j;

		for (; j < old->n; j++) {
			const struct vmmx__chunk *c = &old->c[j];
			void *va = (void *)(buf->base + c->off);
			int e = vmm_map(ctx->vmm, va, c->size, c->handle);

			if (!e) {
				e = vmmx__chunk_set_access(ctx, va, c->size, c->loc);
				if (e) /* mapped but unusable: unmap so [j, n) is unmapped */
					vmmx__unmap_or_defer(ctx, va, c->size);
			}
			if (e)
				break;
		}
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
			   failed_at - 1, j, old->c[j].off);
		memcpy(t->c, old->c, j * sizeof(old->c[0]));
		t->n = j;
		t->mapped = old->c[j].off;
		t->size = old->size < t->mapped ? old->size : t->mapped;
		keep = j;
	}
	rcu_assign_pointer(buf->table, t);
	urcu_bp_synchronize_rcu();
	/* Past the point of no return: a failed release is queued, not reported. */
	for (j = old->n; j > keep; j--)
		vmmx__release_or_defer(ctx, old->c[j - 1].handle, old->c[j - 1].loc,
				       old->c[j - 1].size);
	free(old);
	return err;
}

VMMX_API int vmmx_buf_resize(struct vmmx_buf *buf, size_t size)
{
	struct vmmx_ctx *ctx;
	struct vmmx__table *old;
	int err;

	vmmx__clear_last_error();
	if (!buf)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_resize: buf is NULL");
	ctx = buf->ctx;
	if (size > buf->capacity)
		return vmmx__fail(&ctx->conf.log, -VMMX_ERANGE,
				  "vmmx_buf_resize: size %zu exceeds the capacity %zu", size,
				  buf->capacity);
	size = vmmx__round_up(size, ctx->chunk_min);
	vmmx__deferred_retry(ctx);

	pthread_mutex_lock(&buf->lock);
	old = buf->table;
	if (size == old->size)
		err = 0;
	else if (size > old->size)
		err = grow(buf, old, size);
	else
		err = shrink(buf, old, size);
	pthread_mutex_unlock(&buf->lock);
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
	vmmx__ctx_remove_buf(ctx, buf); /* waits for readers */
	t = buf->table;
	for (size_t j = t->n; j > 0; j--) {
		const struct vmmx__chunk *c = &t->c[j - 1];

		deferred |= vmmx__unmap_or_defer(ctx, (void *)(buf->base + c->off), c->size);
		/* Released even if the unmap was deferred: the driver frees the
		 * memory when its last mapping goes. */
		vmmx__release_or_defer(ctx, c->handle, c->loc, c->size);
	}
	/* A range still holding a mapping must not be freed: queue the unreserve
	 * behind the unmap that failed. */
	if (deferred)
		vmmx__defer(ctx, VMMX_OP_UNRESERVE, (void *)buf->base, buf->capacity, 0,
			    (struct vmmx_loc){ 0 });
	else
		vmmx__unreserve_or_defer(ctx, (void *)buf->base, buf->capacity);
	pthread_mutex_destroy(&buf->lock);
	free(t);
	free(buf);
}

VMMX_API void *vmmx_buf_ptr(const struct vmmx_buf *buf)
{
	return buf ? (void *)buf->base : NULL;
}

VMMX_API size_t vmmx_buf_capacity(const struct vmmx_buf *buf)
{
	return buf ? buf->capacity : 0;
}

VMMX_API size_t vmmx_buf_size(const struct vmmx_buf *buf)
{
	size_t size;

	if (!buf)
		return 0;
	urcu_bp_read_lock();
	size = rcu_dereference(buf->table)->size;
	urcu_bp_read_unlock();
	return size;
}

VMMX_API int vmmx_buf_residency(const struct vmmx_buf *buf, size_t off, size_t len,
				struct vmmx_residency *r)
{
	const struct vmmx__table *t;
	struct vmmx_residency out = { 0, 0 };
	int err = 0;

	vmmx__clear_last_error();
	if (!buf || !r)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_residency: NULL argument");
	urcu_bp_read_lock();
	t = rcu_dereference(buf->table);
	if (off > t->size || len > t->size - off) {
		size_t size = t->size;

		urcu_bp_read_unlock();
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_ERANGE,
				  "vmmx_buf_residency: range [%zu, +%zu) goes past the size %zu", off,
				  len, size);
	}
	if (len) {
		for (size_t i = vmmx__table_find(t, off); i < t->n && t->c[i].off < off + len; i++) {
			size_t a = t->c[i].off > off ? t->c[i].off : off;
			size_t e = t->c[i].off + t->c[i].size;

			if (e > off + len)
				e = off + len;
			if (vmm_loc_is_host(t->c[i].loc))
				out.host += e - a;
			else
				out.device += e - a;
		}
	}
	urcu_bp_read_unlock();
	*r = out;
	return err;
}

VMMX_API int vmmx_buf_chunks(const struct vmmx_buf *buf, struct vmmx_chunk_info *chunks,
			     size_t max, size_t *count_p)
{
	const struct vmmx__table *t;
	size_t n;

	vmmx__clear_last_error();
	if (!buf || !count_p || (!chunks && max))
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_chunks: NULL argument");
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
