// SPDX-License-Identifier: MIT
/*
 * evict.c - the library side of eviction and promotion: asking policies
 * for moves (evict() when a grow finds
 * its first choice full, rebalance() after advice or freed room), and
 * making those moves with the migration machinery.
 *
 * Moves started here are the library's, not the caller's, so they must not
 * pull memory from under work the caller still has running: before the
 * first move of a batch the whole device is synchronised (vmm_sync: every
 * kernel and copy queued so far has finished; a move whose wait failed is
 * skipped, and the next move waits again), and a buffer that a libvmmx copy or memset is using right now
 * (pinned, buf.c) is skipped rather than waited for.  Work another thread
 * launches while the move runs is not seen (docs/DESIGN.md, "Pins").
 *
 * Locking: a move needs its buffer's mutex.  The buffer the caller already
 * holds (a grow evicting its own chunks) is used as is; any other buffer is
 * taken with trylock when the caller holds a buffer lock (two growing
 * buffers evicting each other must not deadlock: a busy buffer's move is
 * skipped), and with a blocking lock when it holds none.  Buffers are found
 * by id in the RCU list and kept alive by the context lock while looked up.
 */
#include "config.h"

#include <stdlib.h>
#include <unistd.h>

#include "internal/obj.h"

/* A move waits up to this long for a busy buffer (a resize or migration in
 * another thread), then is skipped: 2000 x 500 us = 1 s. */
#define MOVE_WAIT_TRIES 2000
#define MOVE_WAIT_US 500

/* Most moves asked for at once: enough to make room for a 1 GiB chunk out of 2 MiB ones. */
#define MAX_MOVES 512

/* Make one move; @held is the buffer whose lock the caller holds (or NULL). */
static int do_move(struct vmmx_ctx *ctx, struct vmmx__policy *pol, struct vmmx_buf *held,
		   const struct vmmx_policy_move *mv, bool may_block, bool *synced, size_t *moved)
{
	struct vmmx__buflist *l;
	struct vmmx_buf *buf = NULL;
	const struct vmmx__table *t;
	size_t i;
	int err;

	*moved = 0;
	if (vmmx__slot(ctx, mv->to) < 0)
		return 0;
	/*
	 * Under ctx->lock the buffer cannot be destroyed (destroy takes it to
	 * unlink the buffer), so it stays valid until we hold its own lock.
	 * Never block on a buffer lock while holding ctx->lock: its holder may
	 * be a grow that needs ctx->lock.  A caller that may wait retries the
	 * trylock with ctx->lock dropped in between, for a bounded time.
	 */
	for (int tries = 0;; tries++) {
		bool busy = false;

		buf = NULL;
		pthread_mutex_lock(&ctx->lock);
		l = ctx->bufs;
		for (i = 0; i < l->n; i++)
			if (l->bufs[i]->id == mv->buf_id && l->bufs[i]->policy == pol)
				buf = l->bufs[i];
		if (buf && buf != held && pthread_mutex_trylock(&buf->lock)) {
			buf = NULL;
			busy = true;
		}
		pthread_mutex_unlock(&ctx->lock);
		if (!busy || !may_block || tries == MOVE_WAIT_TRIES)
			break;
		usleep(MOVE_WAIT_US);
	}
	if (!buf)
		return 0; /* gone, or busy too long: skip this move */
	t = buf->table;
	err = 0;
	/* An asleep buffer (sleep.c) stays where its sleep put it until its wake. */
	if (t->n && mv->offset < t->mapped &&
	    __atomic_load_n(&buf->sleep, __ATOMIC_ACQUIRE) == VMMX__AWAKE) {
		i = vmmx__table_find(t, mv->offset);
		if (t->c[i].off == mv->offset &&
		    (t->c[i].loc.kind != mv->to.kind || t->c[i].loc.id != mv->to.id)) {
			/* Queued work first (once per batch); then only a
			 * buffer no libvmmx call is using. */
			if (!*synced) {
				err = vmm_sync(ctx->vmm);
				*synced = !err;
			}
			if (*synced && vmmx__buf_quiesce(buf, false)) {
				err = vmmx__migrate_locked(buf, t->c[i].off, t->c[i].size, mv->to,
							   0, moved);
				vmmx__buf_unquiesce(buf);
			} else if (*synced) {
				__atomic_fetch_add(&ctx->ctr.moves_busy, 1, __ATOMIC_RELAXED);
			}
		}
	}
	if (buf != held)
		pthread_mutex_unlock(&buf->lock);
	return err;
}

/* Make the moves in order; returns bytes moved to @into (any location if NONE). */
static uint64_t do_moves(struct vmmx_ctx *ctx, struct vmmx__policy *pol, struct vmmx_buf *held,
			 const struct vmmx_policy_move *mv, size_t n, bool may_block, bool promote,
			 int *err_p)
{
	uint64_t total = 0;
	bool synced = false;

	for (size_t i = 0; i < n; i++) {
		size_t moved;
		int err = do_move(ctx, pol, held, &mv[i], may_block, &synced, &moved);

		/* Moves are the policy's optimisations: room taken meanwhile by
		 * another thread (-VMMX_ENOMEM) is no error of the caller's. */
		if (err == -VMMX_ENOMEM)
			vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO, "policy %s: move skipped: %s",
				   pol->spec, vmmx_last_error());
		else if (err && !*err_p)
			*err_p = err;
		if (!moved)
			continue;
		total += moved;
		if (promote && mv[i].to.kind == VMMX_LOC_DEVICE)
			__atomic_fetch_add(&ctx->ctr.promotions, 1, __ATOMIC_RELAXED);
		else if (!promote)
			__atomic_fetch_add(&ctx->ctr.evictions, 1, __ATOMIC_RELAXED);
	}
	return total;
}

uint64_t vmmx__policy_evict(struct vmmx_buf *buf, const struct vmmx_policy_request *req,
			    struct vmmx_loc want, uint64_t need)
{
	struct vmmx__policy *pol = buf->policy;
	struct vmmx_policy_move *mv;
	uint64_t moved;
	size_t n;
	int err = 0;

	if (!VMMX__POLICY_HAS(pol, evict))
		return 0;
	mv = calloc(MAX_MOVES, sizeof(*mv));
	if (!mv)
		return 0; /* no eviction without memory: the grow falls back as usual */
	n = pol->ops->evict(pol->state, req, want, need, mv, MAX_MOVES);
	moved = do_moves(buf->ctx, pol, buf, mv, n < MAX_MOVES ? n : MAX_MOVES, false, false, &err);
	free(mv);
	/* A failed eviction leaves its chunk in place: the grow falls back. */
	return moved;
}

int vmmx__policy_rebalance(struct vmmx_ctx *ctx, struct vmmx__policy *pol)
{
	struct vmmx_policy_room room[VMMX_POLICY_MAX_ROOM];
	struct vmmx_policy_move *mv;
	size_t n, nroom = 0;
	int err = 0;

	if (!VMMX__POLICY_HAS(pol, rebalance))
		return 0;
	for (int d = 0; d < ctx->ndev && nroom < VMMX_POLICY_MAX_ROOM - 1; d++) {
		struct vmmx_loc loc = { VMMX_LOC_DEVICE, d };
		enum vmmx__why why;

		/* Devices the context does not use stay unasked (vmmx__dev_active). */
		if (ctx->peer[d] && vmmx__dev_active(ctx, d))
			room[nroom++] = (struct vmmx_policy_room){
				.loc = loc, .room = vmmx__room(ctx, loc, 0, &why, NULL),
				.held = __atomic_load_n(&ctx->held[d], __ATOMIC_RELAXED),
				.limit = ctx->limit[d],
			};
	}
	{
		struct vmmx_loc loc = { VMMX_LOC_HOST, 0 };
		enum vmmx__why why;

		room[nroom++] = (struct vmmx_policy_room){
			.loc = loc, .room = vmmx__room(ctx, loc, 0, &why, NULL),
			.held = __atomic_load_n(&ctx->held[VMMX__HOST_SLOT], __ATOMIC_RELAXED),
			.limit = ctx->limit[VMMX__HOST_SLOT],
		};
	}
	mv = calloc(MAX_MOVES, sizeof(*mv));
	if (!mv)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "rebalance: out of memory");
	n = pol->ops->rebalance(pol->state, room, nroom, mv, MAX_MOVES);
	do_moves(ctx, pol, NULL, mv, n < MAX_MOVES ? n : MAX_MOVES, true, true, &err);
	free(mv);
	return err;
}

