// SPDX-License-Identifier: MIT
/*
 * migrate.c - moving chunks between locations under the same address, and
 * the streams callers order that work with.
 *
 * One chunk moves like this: a handle at the destination (from the cache
 * when it has one of that size), mapped at a staging address and granted;
 * an asynchronous copy from the chunk's address to the staging address;
 * then, once the copy is done, the old mapping is replaced by the new
 * handle at the chunk's address, access is granted, and the old handle goes
 * to the cache.  Every step that fails undoes that chunk's earlier steps, so
 * a chunk is always either where it was, intact, or moved, intact.
 *
 * A read-mostly chunk (shadow.c) leaving host memory for a device keeps its
 * old handle instead of giving it to the cache; moving back to that host
 * location maps it again (remap_shadow) before any batch is prepared.  With
 * VMMX_HOST_COPIES=verified every chunk does, with a device checksum taken
 * after the promotion and again before the move back: a chunk whose sum
 * changed is copied, its old copy given to the cache.
 *
 * vmmx_park() moves such a chunk back to its copy's location without
 * mapping the copy at the chunk's address: the copy is mapped once at an
 * address of its own (@hva) and the chunk's address left unmapped
 * (park_shadow()); moving it to a device copies from @hva, and to host
 * memory maps it in place again first (unpark_range()).  The mapping at
 * @hva outlives the chunk's use of it (hva.c): a later park of the same
 * handle finds it made and granted.
 *
 * Speed: chunks move in batches (up to MIGRATE_BATCH bytes) through two
 * staging slots.  While batch k's copies run, batch k+1's handles are made
 * and mapped; batch k is switched over while batch k+1 copies.  Access is
 * granted once per staging slot and once per run of adjacent moved chunks,
 * not once per chunk.  The chunk is the unit: a range is widened to whole
 * chunks.
 *
 * Locking: the buffer's mutex for the whole call (resizes and other
 * migrations of that buffer wait); the table is published once at the end.
 * Copies and memsets through libvmmx that use the buffer finish first (the
 * buffer is quiesced, buf.c).  Kernels must not use the range while it
 * moves: that is the caller's race, ordered with vmmx_buf_migrate_on() and a
 * stream.  Moves the library starts itself (evict.c) wait for the whole
 * device first.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "internal/obj.h"

/* Bytes per batch: big enough that the per-batch driver calls are small
 * next to the copy (256 MiB is ~5 ms over PCIe Gen5), small enough to
 * overlap preparation with copying over a 1 GiB range. */
#define MIGRATE_BATCH (256ull << 20)

/* One chunk on its way. */
struct move {
	size_t idx;             /* index in the table */
	vmm_handle_t nh;        /* the new handle */
	size_t soff;            /* offset in the staging slot */
	bool moved;
	bool failed;            /* staged-source mode: switched back, nothing to do */
};

struct batch {
	struct move *m;
	size_t n;
	char *stage;            /* this batch's staging slot */
	size_t staged;          /* bytes mapped in the slot */
	bool copied;            /* copies queued successfully */
};

struct mig {
	struct vmmx_buf *buf;
	struct vmmx_ctx *ctx;
	const struct vmmx__table *t;
	struct vmmx__table *nt;        /* the table being built */
	struct vmmx_loc to;
	vmm_stream_t s;
	size_t next;            /* next table index to look at */
	size_t end;             /* one past the last index in the range */
	size_t slot_bytes;
	size_t moved;
	bool dropped;           /* a verified copy was dropped from @nt */
	bool park;              /* vmmx_park(): chunks with a copy at @to are parked */
	size_t parked;          /* bytes parked */
	int err;                /* first error; stops preparing more */
	/*
	 * Which side goes through the staging address.  Granting access to host
	 * memory costs ~20 us per MiB (device memory: well under 1 us per MiB),
	 * so host memory is mapped once, where it ends up: for a move to host
	 * the *source* (device) handle is mapped at the staging address, the new
	 * host handle goes straight to the chunk's address, and the copy runs
	 * from staging to the chunk; otherwise the new handle is staged.
	 */
	bool stage_src;
	/* Run once the first batch's copies are queued (a swap's send back). */
	void (*during)(void *arg);
	void *during_arg;
};

static void give_back(struct vmmx_ctx *ctx, struct vmmx_loc loc, vmm_handle_t h, size_t size)
{
	vmmx__cache_put(ctx, loc, h, size);
}

/* A handle of @size at the destination (vmmx__handle_get), with the error said. */
static int new_handle(struct mig *g, size_t size, vmm_handle_t *h)
{
	enum vmmx__why why = VMMX__WHY_OK;
	size_t got;
	bool hit;
	int err = vmmx__handle_get(g->ctx, g->to, size, size, 0, h, &got, &hit, &why);

	if (err == -VMMX_ENOMEM) {
		char name[32];

		return vmmx__fail(&g->ctx->conf.log, err,
				  "vmmx_buf_migrate: no room on %s for a %zu-byte chunk",
				  vmmx_loc_name(g->to, name, sizeof(name)), size);
	}
	return err;
}

/* Undo a batch's staging: unmap the slot, give the new handles back. */
static void unstage(struct mig *g, struct batch *b, bool keep_moved)
{
	if (b->staged)
		vmmx__unmap_or_defer(g->ctx, b->stage, b->staged);
	for (size_t i = 0; i < b->n; i++)
		if (!(keep_moved && b->m[i].moved))
			give_back(g->ctx, g->to, b->m[i].nh, g->t->c[b->m[i].idx].size);
	b->staged = 0;
}

/* Put the old handle back at @va after a failed switch; false if that failed too. */
static bool restore(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c)
{
	return !vmmx__chunk_restore(ctx, va, c);
}

/* Take the new handle off @va (tried a few times, as restore() is) and put
 * the old one back; false if either failed every time. */
static bool unmap_restore(struct vmmx_ctx *ctx, void *va, const struct vmmx__chunk *c)
{
	return !vmmx__unmap_tries(ctx, va, c->size) && restore(ctx, va, c);
}

static void lost(struct mig *g, const struct vmmx__chunk *c)
{
	vmmx__logf(&g->ctx->conf.log, VMMX_LOG_ERROR,
		   "vmmx_buf_migrate: chunk at offset %zu could not be restored after a failed move; its address is unmapped",
		   c->off);
}

/*
 * Staged-source mode: undo a switched chunk (new handle at its address, old
 * one at the staging address) back to how it was.
 */
static void switch_back(struct mig *g, struct move *m, char *sp)
{
	const struct vmmx__chunk *c = &g->t->c[m->idx];
	void *va = (void *)(g->buf->base + c->off);

	if (!unmap_restore(g->ctx, va, c))
		lost(g, c);
	vmmx__unmap_or_defer(g->ctx, sp, c->size);
	give_back(g->ctx, g->to, m->nh, c->size);
	m->failed = true;
}

/*
 * Staged-source mode, one chunk: the old handle also at the staging
 * address, then the new handle at the chunk's address (granted later, per
 * run).  0, or the error after undoing this chunk's steps.
 */
static int switch_chunk(struct mig *g, const struct vmmx__chunk *c, vmm_handle_t nh, char *sp)
{
	struct vmmx_ctx *ctx = g->ctx;
	void *va = (void *)(g->buf->base + c->off);
	int err;

	err = vmm_map(ctx->vmm, sp, c->size, c->handle);
	if (err)
		return err;
	/* The staging mapping is only ever read by the copy: the GPU alone. */
	err = vmmx__chunk_set_access(ctx, sp, c->size, c->loc, false);
	if (err)
		goto err_stage;
	err = vmm_unmap(ctx->vmm, va, c->size);
	if (err)
		goto err_stage;
	err = vmm_map(ctx->vmm, va, c->size, nh);
	if (err) {
		if (!restore(ctx, va, c))
			lost(g, c);
		goto err_stage;
	}
	return 0;

err_stage:
	vmmx__unmap_or_defer(ctx, sp, c->size);
	return err;
}

/* Give up a prepared batch that was not copied: every chunk back as it was. */
static void abandon(struct mig *g, struct batch *b)
{
	if (!g->stage_src) {
		unstage(g, b, false);
		return;
	}
	for (size_t i = 0; i < b->n; i++)
		if (!b->m[i].failed)
			switch_back(g, &b->m[i], b->stage + b->m[i].soff);
	b->staged = 0;
}

/* Make, map and grant handles for the next chunks, up to a slot's worth. */
static void prepare(struct mig *g, struct batch *b)
{
	struct vmmx_ctx *ctx = g->ctx;
	size_t used = 0;
	int err;

	b->n = 0;
	b->staged = 0;
	b->copied = false;
	while (!g->err && g->next < g->end) {
		const struct vmmx__chunk *c = &g->t->c[g->next];
		struct move *m;

		/* There already, or moved by remap_shadow(). */
		if (vmmx__same_loc(g->nt->c[g->next].loc, g->to)) {
			g->next++;
			continue;
		}
		if (b->n && used + c->size > g->slot_bytes)
			break;
		m = &b->m[b->n];
		err = new_handle(g, c->size, &m->nh);
		if (!err) {
			if (g->stage_src)
				err = switch_chunk(g, c, m->nh, b->stage + used);
			else
				err = vmm_map(ctx->vmm, b->stage + used, c->size, m->nh);
			if (err)
				give_back(ctx, g->to, m->nh, c->size);
		}
		if (err) {
			g->err = err;
			break;
		}
		m->idx = g->next++;
		m->soff = used;
		m->moved = false;
		m->failed = false;
		used += c->size;
		b->staged = used;
		b->n++;
	}
	if (!b->n)
		return;
	if (!g->stage_src) {
		/* One grant for the whole slot: every handle in it is at g->to. */
		err = vmmx__chunk_set_access(ctx, b->stage, b->staged, g->to, false);
		if (err) {
			g->err = err;
			unstage(g, b, false);
			b->n = 0;
		}
		return;
	}
	/* Staged source: grant the new handles at their addresses, one call per
	 * run of adjacent chunks; a run that fails is switched back. */
	for (size_t i = 0, run; i < b->n; i = run) {
		size_t bytes = g->t->c[b->m[i].idx].size;

		for (run = i + 1; run < b->n && b->m[run].idx == b->m[run - 1].idx + 1; run++)
			bytes += g->t->c[b->m[run].idx].size;
		err = vmmx__chunk_set_access(ctx, (void *)(g->buf->base + g->t->c[b->m[i].idx].off),
					     bytes, g->to, vmmx__cpu_grant(ctx, g->to, true));
		if (!err)
			continue;
		g->err = g->err ? g->err : err;
		for (size_t k = i; k < run; k++)
			switch_back(g, &b->m[k], b->stage + b->m[k].soff);
	}
}

static void launch(struct mig *g, struct batch *b)
{
	const char *base = (const char *)g->buf->base;
	int err = 0;

	/* One copy per chunk: each side is one location, so none crosses a
	 * device/host boundary. */
	for (size_t i = 0; i < b->n && !err; i++) {
		const struct vmmx__chunk *c = &g->t->c[b->m[i].idx];
		char *sp = b->stage + b->m[i].soff;

		if (b->m[i].failed)
			continue;
		if (g->stage_src) /* from the old handle at staging to the new one in place */
			err = vmm_copy_async(g->ctx->vmm, (char *)base + c->off, sp, c->size, g->s);
		else /* a parked chunk's data is at its copy's own address */
			err = vmm_copy_async(g->ctx->vmm, sp, c->parked ? c->hva : base + c->off,
					     c->size, g->s);
	}
	b->copied = !err;
	if (err && !g->err)
		g->err = err;
}


/* Count a chunk moved (@nc: as it is now) and tell the policy. */
static void moved_one(struct mig *g, const struct vmmx__chunk *nc)
{
	vmmx__policy_chunk_event(g->buf, nc, VMMX_POLICY_EV_MOVED);
	g->moved += nc->size;
	__atomic_fetch_add(&g->ctx->ctr.migrations, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&g->ctx->ctr.migrated_bytes, nc->size, __ATOMIC_RELAXED);
}

/* Switch a copied batch over: unmap old, map new, grant per run of chunks. */
static void finish(struct mig *g, struct batch *b)
{
	struct vmmx_ctx *ctx = g->ctx;
	size_t i, run;
	int err;

	if (g->stage_src) {
		for (i = 0; i < b->n; i++) {
			const struct vmmx__chunk *c = &g->t->c[b->m[i].idx];
			char *sp = b->stage + b->m[i].soff;

			if (b->m[i].failed)
				continue;
			if (!b->copied) {
				switch_back(g, &b->m[i], sp);
				continue;
			}
			/* The old handle's last mapping (at staging) goes; it is free. */
			vmmx__unmap_or_defer(ctx, sp, c->size);
			b->m[i].moved = true;
		}
		b->staged = 0;
		goto account;
	}
	if (!b->copied) {
		unstage(g, b, false);
		return;
	}
	for (i = 0; i < b->n; i++) {
		const struct vmmx__chunk *c = &g->t->c[b->m[i].idx];
		void *va = (void *)(g->buf->base + c->off);

		/* A parked chunk's address is unmapped: nothing to take off it,
		 * nothing to put back on failure (its data stays at its copy). */
		err = c->parked ? 0 : vmm_unmap(ctx->vmm, va, c->size);
		if (!err) {
			err = vmm_map(ctx->vmm, va, c->size, b->m[i].nh);
			if (err && !c->parked && !restore(ctx, va, c))
				lost(g, c);
		}
		if (err) {
			g->err = g->err ? g->err : err;
			continue;
		}
		b->m[i].moved = true;
	}
	/* Grant access to runs of adjacent moved chunks in one call each. */
	for (i = 0; i < b->n; i = run) {
		const struct vmmx__chunk *first = &g->t->c[b->m[i].idx];
		size_t bytes = first->size;

		for (run = i + 1; run < b->n && b->m[run - 1].moved && b->m[run].moved &&
				  b->m[run].idx == b->m[run - 1].idx + 1;
		     run++)
			bytes += g->t->c[b->m[run].idx].size;
		if (!b->m[i].moved)
			continue;
		err = vmmx__chunk_set_access(ctx, (void *)(g->buf->base + first->off), bytes, g->to,
					     vmmx__cpu_grant(ctx, g->to, true));
		if (!err)
			continue;
		g->err = g->err ? g->err : err;
		/* Undo the run chunk by chunk: back to the old handles. */
		for (size_t k = i; k < run; k++) {
			const struct vmmx__chunk *c = &g->t->c[b->m[k].idx];
			void *va = (void *)(g->buf->base + c->off);

			if (c->parked ? vmmx__unmap_tries(ctx, va, c->size) != 0
				      : !unmap_restore(ctx, va, c))
				lost(g, c);
			b->m[k].moved = false;
		}
	}
	/* The staging mappings go; moved chunks' handles stay mapped at their address. */
	unstage(g, b, true);
account:
	for (i = 0; i < b->n; i++) {
		const struct vmmx__chunk *c = &g->t->c[b->m[i].idx];
		struct vmmx__chunk *nc = &g->nt->c[b->m[i].idx];

		if (!b->m[i].moved)
			continue;
		nc->loc = g->to;
		nc->handle = b->m[i].nh;
		nc->cpu = vmmx__cpu_grant(ctx, g->to, true);
		nc->parked = false;
		if (c->parked)
			__atomic_fetch_sub(&ctx->parked_bytes, c->size, __ATOMIC_RELAXED);
		/* A read-mostly chunk leaving host memory for a device keeps
		 * its host handle, and so does every chunk under
		 * VMMX_HOST_COPIES=verified whose checksum could be taken; one
		 * arriving in host memory (at another location than its copy)
		 * has no use for its copy any more.  A parked chunk's handle
		 * keeps its own mapping (@hva) as the copy's. */
		if (!vmm_loc_is_host(c->loc) || vmm_loc_is_host(g->to) ||
		    !(c->parked && c->verified
			      ? vmmx__shadow_kept(g->buf, nc, c->loc, c->handle, c->shadow_sum)
			      : vmmx__shadow_promoted(g->buf, nc, c->loc, c->handle))) {
			if (c->parked) {
				nc->hva = NULL;
				if (!vmmx__hva_drop(ctx, c->hva, c->size)) {
					vmmx__release_or_defer(ctx, c->handle, c->loc, c->size);
					moved_one(g, nc);
					continue;
				}
			}
			give_back(ctx, c->loc, c->handle, c->size);
		}
		if (vmm_loc_is_host(g->to))
			vmmx__shadow_drop(ctx, nc, false);
		moved_one(g, nc);
	}
}

/* The entry of chunk @c once its host copy is its memory again, mapped in place. */
static struct vmmx__chunk shadow_entry(const struct vmmx_ctx *ctx, const struct vmmx__chunk *c)
{
	struct vmmx__chunk back = *c;

	back.loc = c->shadow_loc;
	back.handle = c->shadow;
	back.cpu = vmmx__cpu_grant(ctx, back.loc, true);
	back.shadow_loc = (struct vmmx_loc){ VMMX_LOC_NONE, 0 };
	back.shadow = 0;
	back.verified = false;
	back.shadow_sum = 0;
	back.hva = NULL;
	return back;
}

/* Chunk @i (as @c was) is its copy @back again, mapped in place: counted, and
 * its copy's own mapping (a park's) dropped.  Its device handle is the caller's. */
static void shadow_mapped(struct mig *g, size_t i, const struct vmmx__chunk *c,
			  const struct vmmx__chunk *back)
{
	struct vmmx_ctx *ctx = g->ctx;

	if (c->hva)
		(void)vmmx__hva_drop(ctx, c->hva, c->size);
	__atomic_fetch_sub(&ctx->shadow_bytes, c->size, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctx->ctr.copies_saved, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctx->ctr.copy_bytes_saved, c->size, __ATOMIC_RELAXED);
	if (c->verified)
		__atomic_fetch_add(&ctx->ctr.verified_saved, 1, __ATOMIC_RELAXED);
	g->nt->c[i] = *back;
	moved_one(g, &g->nt->c[i]);
}

/*
 * A chunk going back to the host location of its copy (read-mostly, or
 * verified unchanged): the copy is mapped again in place of the device
 * handle, which goes to the cache; no copy, no new handle.  0, or the error
 * after putting the chunk back as it was.
 */
static int remap_shadow(struct mig *g, size_t i)
{
	struct vmmx_ctx *ctx = g->ctx;
	const struct vmmx__chunk *c = &g->t->c[i];
	struct vmmx__chunk back = shadow_entry(ctx, c);
	void *va = (void *)(g->buf->base + c->off);
	int err;

	err = vmm_unmap(ctx->vmm, va, c->size);
	if (err)
		return err;
	err = vmmx__chunk_remap(ctx, va, &back);
	if (err) {
		if (!restore(ctx, va, c))
			lost(g, c);
		return err;
	}
	give_back(ctx, c->loc, c->handle, c->size);
	shadow_mapped(g, i, c, &back);
	return 0;
}

/*
 * vmmx_park(): a chunk going back to the host location of its copy, as
 * remap_shadow() but leaving the chunk's address unmapped; the copy is
 * mapped at an address of its own (once: it stays there while the chunk is
 * on a device again, and serves the next park too) and becomes the chunk's
 * memory.  No host memory is mapped or granted at the chunk's address, in
 * the park nor in the move back to a device, and that is what the driver's
 * time of a round trip went to (docs/PRELOAD.md, "Parked").  0, or the
 * error with the chunk as it was.
 */
static int park_shadow(struct mig *g, size_t i)
{
	struct vmmx_ctx *ctx = g->ctx;
	const struct vmmx__chunk *c = &g->t->c[i];
	struct vmmx__chunk back = *c;
	void *va = (void *)(g->buf->base + c->off);
	void *hva = c->hva;
	int err;

	if (!hva) {
		err = vmmx__hva_make(ctx, c->shadow, c->shadow_loc, c->size, &hva);
		if (err)
			return err;
	}
	err = vmm_unmap(ctx->vmm, va, c->size);
	if (err) {
		if (!c->hva)
			(void)vmmx__hva_drop(ctx, hva, c->size);
		return err;
	}
	give_back(ctx, c->loc, c->handle, c->size);
	back.loc = c->shadow_loc;
	back.handle = c->shadow;
	back.cpu = vmmx__cpu_grant(ctx, back.loc, true); /* when mapped in place again */
	back.shadow_loc = (struct vmmx_loc){ VMMX_LOC_NONE, 0 };
	back.shadow = 0;
	/* @verified and @shadow_sum stay: the sum of what it holds, as just
	 * checked (vmmx__shadow_unchanged()); nothing can write it while it
	 * is parked, so its move back to a device needs no checksum. */
	back.hva = hva;
	back.parked = true;
	__atomic_fetch_sub(&ctx->shadow_bytes, c->size, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctx->parked_bytes, c->size, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctx->ctr.parks, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctx->ctr.copies_saved, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctx->ctr.copy_bytes_saved, c->size, __ATOMIC_RELAXED);
	if (c->verified)
		__atomic_fetch_add(&ctx->ctr.verified_saved, 1, __ATOMIC_RELAXED);
	g->nt->c[i] = back;
	g->parked += c->size;
	moved_one(g, &g->nt->c[i]);
	return 0;
}

/*
 * Map the parked chunks of [first, end) at their addresses again, but those
 * parked at @keep (VMMX_LOC_NONE: none kept): their handle there, granted
 * as a host chunk is, and its own mapping dropped.  A new table is
 * published when one was.  buf->lock held.  0, or the error of the first
 * that failed (logged with @fn): it and those after it stay parked.
 */
static int unpark_range(struct vmmx_buf *buf, size_t first, size_t end, struct vmmx_loc keep,
			const char *fn, size_t *done_p)
{
	struct vmmx_ctx *ctx = buf->ctx;
	const struct vmmx__table *t = buf->table;
	struct vmmx__table *nt = NULL;
	bool any = false;
	int err = 0;

	for (size_t i = first; i < end && !err; i++) {
		const struct vmmx__chunk *c = &t->c[i];
		struct vmmx__chunk *nc;

		if (!c->parked || vmmx__same_loc(c->loc, keep))
			continue;
		if (!nt && !(nt = vmmx__table_dup(t)))
			return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM,
					  "%s: out of memory for a chunk table", fn);
		nc = &nt->c[i];
		err = vmmx__chunk_remap(ctx, (void *)(buf->base + c->off), c);
		if (err) {
			err = vmmx__fail(&ctx->conf.log, err,
					 "%s: the parked chunk at offset %zu could not be mapped at its address again: %s",
					 fn, c->off, vmmx_strerror(err));
			break;
		}
		if (!vmmx__hva_drop(ctx, c->hva, c->size))
			vmmx__logf(&ctx->conf.log, VMMX_LOG_WARN,
				   "%s: the host copy of the chunk at offset %zu stays mapped at its own address until a retry",
				   fn, c->off);
		nc->hva = NULL;
		nc->parked = false;
		nc->verified = false; /* plain host memory now: written as it likes */
		nc->shadow_sum = 0;
		any = true;
		if (done_p)
			*done_p += c->size;
		__atomic_fetch_sub(&ctx->parked_bytes, c->size, __ATOMIC_RELAXED);
		__atomic_fetch_add(&ctx->ctr.unparks, 1, __ATOMIC_RELAXED);
	}
	if (any)
		vmmx__table_publish(buf, nt);
	else
		free(nt);
	return err;
}

int vmmx__unpark_locked(struct vmmx_buf *buf, const char *fn)
{
	if (!__atomic_load_n(&buf->ctx->parked_bytes, __ATOMIC_RELAXED))
		return 0;
	return unpark_range(buf, 0, buf->table->n, (struct vmmx_loc){ VMMX_LOC_NONE, 0 }, fn,
			    NULL);
}

/* The range's chunks: [*first, *end) of @t covering [off, off + len). */
static void chunk_range(const struct vmmx__table *t, size_t off, size_t len, size_t *first,
			size_t *end)
{
	*first = *end = 0;
	if (!len || !t->n)
		return;
	*first = vmmx__table_find(t, off);
	*end = vmmx__table_find(t, off + len - 1) + 1;
}

static int migrate_locked(struct vmmx_buf *buf, size_t off, size_t len, struct vmmx_loc to,
			  vmm_stream_t s, bool park, size_t *moved_p, size_t *parked_p,
			  void (*during)(void *), void *during_arg)
{
	struct vmmx_ctx *ctx = buf->ctx;
	struct vmmx__table *t = buf->table;
	struct batch b[2] = { { 0 }, { 0 } };
	struct mig g = { .buf = buf, .ctx = ctx, .to = to, .s = s, .park = park,
			 .stage_src = vmm_loc_is_host(to), .during = during,
			 .during_arg = during_arg };
	size_t first, maxn = 0;
	void *stage = NULL;
	int err, cur = 0;

	*moved_p = 0;
	chunk_range(t, off, len, &first, &g.end);
	/* To host memory, parked chunks are mapped in place first (a park
	 * keeps those parked where it parks): the move is done for those
	 * parked at @to, and the others move from their address as any host
	 * chunk.  To a device, they move from their copy's own address. */
	if (g.stage_src && __atomic_load_n(&ctx->parked_bytes, __ATOMIC_RELAXED)) {
		err = unpark_range(buf, first, g.end,
				   park ? to : (struct vmmx_loc){ VMMX_LOC_NONE, 0 },
				   park ? "vmmx_park" : "vmmx_buf_migrate", NULL);
		if (err)
			return err;
		t = buf->table;
	}
	g.t = t;
	g.next = first;
	for (size_t i = first; i < g.end; i++)
		if (!vmmx__same_loc(t->c[i].loc, to))
			maxn++;
	if (!maxn)
		return 0;
	g.nt = vmmx__table_dup(t);
	if (!g.nt)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_migrate: out of memory");
	/* Chunks with a copy where they go: mapped back, not copied, unless a
	 * verified copy's checksum shows the chunk written (the copy is
	 * dropped from the new table then, which must be published). */
	for (size_t i = first; i < g.end && !g.err && g.stage_src; i++) {
		if (!VMMX__HAS_SHADOW(&t->c[i]) || !vmmx__same_loc(t->c[i].shadow_loc, to))
			continue;
		if (vmmx__shadow_unchanged(buf, &g.nt->c[i]))
			g.err = park ? park_shadow(&g, i) : remap_shadow(&g, i);
		else
			g.dropped = true;
	}
	/* What is left to copy. */
	maxn = 0;
	for (size_t i = first; i < g.end; i++) {
		if (vmmx__same_loc(g.nt->c[i].loc, to))
			continue;
		maxn++;
		if (t->c[i].size > g.slot_bytes)
			g.slot_bytes = t->c[i].size;
	}
	if (!maxn || g.err) {
		err = g.err;
		goto out_publish;
	}
	g.slot_bytes = g.slot_bytes > MIGRATE_BATCH ? g.slot_bytes : MIGRATE_BATCH;
	b[0].m = calloc(maxn, sizeof(struct move));
	b[1].m = calloc(maxn, sizeof(struct move));
	if (!b[0].m || !b[1].m) {
		err = vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_buf_migrate: out of memory");
		goto out_publish;
	}
	err = vmm_reserve(ctx->vmm, 2 * g.slot_bytes, ctx->gran, &stage);
	if (err)
		goto out_publish;
	b[0].stage = stage;
	b[1].stage = (char *)stage + g.slot_bytes;

	/* prepare(k+1) overlaps copy(k); finish(k) overlaps copy(k+1). */
	prepare(&g, &b[0]);
	launch(&g, &b[0]);
	if (g.during && b[0].n)
		g.during(g.during_arg);
	while (b[cur].n) {
		struct batch *nb = &b[!cur];

		nb->n = 0;
		if (!g.err)
			prepare(&g, nb);
		err = vmm_stream_sync(ctx->vmm, s);
		if (err) {
			/* The wait failed: nothing copied can be trusted, and copies
			 * may still be running.  Wait again, then for the whole
			 * device, before any staging memory is unmapped under them
			 * (unmapping memory a copy is writing ends the context); if
			 * every try fails, the context is lost anyway. */
			(void)vmmx__wait_tries(ctx, s);
			g.err = g.err ? g.err : err;
			b[cur].copied = false;
			nb->copied = false;
			abandon(&g, nb);
			nb->n = 0;
		} else if (nb->n) {
			launch(&g, nb);
		}
		finish(&g, &b[cur]);
		b[cur].n = 0;
		cur = !cur;
	}
	err = g.err;
	vmmx__unreserve_or_defer(ctx, stage, 2 * g.slot_bytes);
out_publish:
	if (g.moved || g.dropped) {
		vmmx__table_publish(buf, g.nt);
		g.nt = NULL;
	}
	*moved_p = g.moved;
	if (parked_p)
		*parked_p += g.parked;
	free(g.nt);
	free(b[0].m);
	free(b[1].m);
	return err;
}

int vmmx__migrate_locked(struct vmmx_buf *buf, size_t off, size_t len, struct vmmx_loc to,
			 vmm_stream_t s, size_t *moved_p)
{
	return migrate_locked(buf, off, len, to, s, false, moved_p, NULL, NULL, NULL);
}

static int migrate(struct vmmx_buf *buf, size_t off, size_t len, struct vmmx_loc to,
		   struct vmmx_stream *st, bool park, size_t *moved_p, size_t *parked_p)
{
	const char *fn = park ? "vmmx_park" : "vmmx_buf_migrate";

	struct vmmx_ctx *ctx;
	size_t moved = 0, size;
	vmm_stream_t s;
	int err;

	vmmx__clear_last_error();
	if (moved_p)
		*moved_p = 0;
	if (!buf)
		return vmmx__fail(NULL, -VMMX_EINVAL, "%s: buf is NULL", fn);
	ctx = buf->ctx;
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, fn);
	/* vmmx_park() refused a @to that is not host memory before this. */
	if (!vmmx__loc_usable(ctx, to)) {
		char name[32];

		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "%s: location %s is not usable by this context", fn,
				  vmmx_loc_name(to, name, sizeof(name)));
	}
	if (st && st->ctx != ctx)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_buf_migrate_on: the stream belongs to another context");
	s = st ? st->s : 0;
	if (to.kind == VMMX_LOC_DEVICE)
		vmmx__dev_activate(ctx, to.id);
	pthread_mutex_lock(&buf->lock);
	size = buf->table->size;
	if (off > size || len > size - off) {
		pthread_mutex_unlock(&buf->lock);
		return vmmx__fail(&ctx->conf.log, -VMMX_ERANGE,
				  "%s: range [%zu, +%zu) goes past the size %zu", fn, off, len, size);
	}
	/* Work queued on the caller's stream comes first. */
	err = st ? vmm_stream_sync(ctx->vmm, s) : 0;
	if (!err) {
		/* and copies and memsets of other threads through libvmmx */
		vmmx__buf_quiesce(buf, true);
		err = migrate_locked(buf, off, len, to, s, park, &moved, parked_p, NULL, NULL);
		vmmx__buf_unquiesce(buf);
	}
	pthread_mutex_unlock(&buf->lock);
	if (moved_p)
		*moved_p = moved;
	return err;
}

VMMX_API int vmmx_buf_migrate(struct vmmx_buf *buf, size_t off, size_t len, struct vmmx_loc to,
			      size_t *moved_p)
{
	return migrate(buf, off, len, to, NULL, false, moved_p, NULL);
}

VMMX_API int vmmx_buf_migrate_on(struct vmmx_buf *buf, size_t off, size_t len,
				 struct vmmx_loc to, struct vmmx_stream *st, size_t *moved_p)
{
	if (moved_p)
		*moved_p = 0;
	if (!st) {
		vmmx__clear_last_error();
		return vmmx__fail(buf ? &buf->ctx->conf.log : NULL, -VMMX_EINVAL,
				  "vmmx_buf_migrate_on: NULL stream");
	}
	return migrate(buf, off, len, to, st, false, moved_p, NULL);
}

int vmmx__park_on(struct vmmx_buf *buf, size_t off, size_t len, struct vmmx_loc to,
		  struct vmmx_stream *st, size_t *parked_p)
{
	return migrate(buf, off, len, to, st, true, NULL, parked_p);
}

int vmmx__unpark(struct vmmx_buf *buf, size_t off, size_t len, size_t *done_p)
{
	size_t first, end;
	int err;

	if (vmmx__inherited(buf->ctx))
		return vmmx__fail_inherited(buf->ctx, "vmmx_unpark");
	pthread_mutex_lock(&buf->lock);
	chunk_range(buf->table, off, len, &first, &end);
	err = unpark_range(buf, first, end, (struct vmmx_loc){ VMMX_LOC_NONE, 0 }, "vmmx_unpark",
			   done_p);
	pthread_mutex_unlock(&buf->lock);
	return err;
}

/*
 * vmmx_swap(): @out's part goes back to host memory and @in's comes to a
 * device in one call.  A send back to the copies the chunks kept in host
 * memory (read-mostly, or verified unchanged) is a remap: the device
 * handle off the chunk's address, the copy mapped there and granted to the
 * GPU.  The grant of host memory is the costly step (about 1 ms a 128 MiB
 * chunk on an H200), and in a send back followed by a bring-in it runs
 * before the bring-in's copy can start.  Here it runs while that copy does:
 *
 *  1. every chunk of @out that moves is checked first: its copy at @to_out
 *     and its checksum unchanged, or the swap is the two moves in turn;
 *  2. each is unmapped from the device, its handle given to the cache,
 *     where @in's first batch finds it (the room it makes);
 *  3. @in's migration prepares and queues its first batch's copies, then
 *     (swap_remap(), its "during" hook) @out's copies are mapped and
 *     granted at their addresses while those copies run.
 *
 * An @out chunk's data is in its copy from step 1 on (checked unchanged),
 * so a failed map in step 3 is tried again (vmmx__chunk_restore()); one
 * that fails every time is logged lost, its address unmapped, as a failed
 * restore is in every move.  Its address is unmapped from step 2 to step
 * 3 (about as long as the grant itself, which a plain send back leaves it
 * unmapped for too): nothing may use @out meanwhile, the caller's promise
 * for any move.  Both buffers locked and quiesced (the caller).
 */
struct swap_out {
	struct mig g;           /* @out's move: buf, ctx, t, nt, to */
	size_t *idx;            /* chunks unmapped, their copies still to map */
	size_t n;
	bool done;
	int err;
};

/* Step 3: @out's copies mapped and granted at their addresses. */
static void swap_remap(void *arg)
{
	struct swap_out *so = arg;
	struct mig *g = &so->g;

	so->done = true;
	for (size_t k = 0; k < so->n; k++) {
		const struct vmmx__chunk *c = &g->t->c[so->idx[k]];
		struct vmmx__chunk back = shadow_entry(g->ctx, c);
		int err = vmmx__chunk_restore(g->ctx, (void *)(g->buf->base + c->off), &back);

		if (err) {
			/* The data is in the copy: the table says so, unmapped. */
			lost(g, c);
			so->err = so->err ? so->err : err;
		}
		shadow_mapped(g, so->idx[k], c, &back);
	}
}

int vmmx__swap_locked(struct vmmx_buf *out, size_t out_off, size_t out_len,
		      struct vmmx_loc to_out, struct vmmx_buf *in, size_t in_off, size_t in_len,
		      struct vmmx_loc to_in, vmm_stream_t s, size_t *out_moved_p, size_t *in_moved_p)
{
	struct vmmx_ctx *ctx = out->ctx;
	const struct vmmx__table *t = out->table;
	struct swap_out so = { .g = { .buf = out, .ctx = ctx, .t = t, .to = to_out } };
	size_t first, end, n = 0;
	bool fast = out != in, dropped = false;
	int err;

	*out_moved_p = *in_moved_p = 0;
	chunk_range(t, out_off, out_len, &first, &end);
	/* 1: what moves, and whether every one has its copy where it goes. */
	for (size_t i = first; i < end; i++) {
		const struct vmmx__chunk *c = &t->c[i];

		if (vmmx__same_loc(c->loc, to_out))
			continue;
		n++;
		if (vmm_loc_is_host(c->loc) || c->parked || !VMMX__HAS_SHADOW(c) ||
		    !vmmx__same_loc(c->shadow_loc, to_out))
			fast = false;
	}
	if (!n)
		return migrate_locked(in, in_off, in_len, to_in, s, false, in_moved_p, NULL, NULL,
				      NULL);
	if (!fast)
		goto plain;
	so.g.nt = vmmx__table_dup(t);
	so.idx = calloc(n, sizeof(*so.idx));
	if (!so.g.nt || !so.idx) {
		free(so.g.nt);
		free(so.idx);
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_swap: out of memory");
	}
	/* Checked before any is unmapped: one written since its promotion
	 * drops its copy (published), and the swap is two plain moves. */
	for (size_t i = first; i < end; i++)
		if (!vmmx__same_loc(t->c[i].loc, to_out) &&
		    !vmmx__shadow_unchanged(out, &so.g.nt->c[i]))
			dropped = true;
	if (dropped) {
		vmmx__table_publish(out, so.g.nt);
		free(so.idx);
		goto plain;
	}
	/* 2: off the device; the handles make the room @in's batch takes. */
	for (size_t i = first; i < end; i++) {
		const struct vmmx__chunk *c = &t->c[i];

		if (vmmx__same_loc(c->loc, to_out))
			continue;
		err = vmm_unmap(ctx->vmm, (void *)(out->base + c->off), c->size);
		if (err) {
			/* This one and those after it stay on the device. */
			so.err = err;
			break;
		}
		give_back(ctx, c->loc, c->handle, c->size);
		so.idx[so.n++] = i;
	}
	/* 3: @in's copies, @out's remaps while they run; an @out that failed
	 * (a sequence of moves stops there) is mapped back alone. */
	err = 0;
	if (!so.err)
		err = migrate_locked(in, in_off, in_len, to_in, s, false, in_moved_p, NULL,
				     swap_remap, &so);
	if (!so.done)
		swap_remap(&so);
	if (so.n)
		vmmx__table_publish(out, so.g.nt);
	else
		free(so.g.nt);
	*out_moved_p = so.g.moved;
	free(so.idx);
	return so.err ? so.err : err;

plain:
	err = migrate_locked(out, out_off, out_len, to_out, s, false, out_moved_p, NULL, NULL, NULL);
	if (!err)
		err = migrate_locked(in, in_off, in_len, to_in, s, false, in_moved_p, NULL, NULL,
				     NULL);
	return err;
}
