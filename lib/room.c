// SPDX-License-Identifier: MIT
/*
 * room.c - room and charge: what each location may still take.  A charge
 * counts a handle's bytes against its location's limit (held[], cache
 * included); vmmx__room() answers how many bytes a location can take for
 * new chunks now and, if fewer than asked, why (limit, headroom or full),
 * reading the driver's free memory at most once per location per grow
 * (struct vmmx__roomsnap) and sharing a fresh figure between grows
 * (ctx->fcache).
 *
 * Locking: none; held[], fcache[] and the counters are atomics.
 */
#include "config.h"

#include <time.h>

#include "internal/mem.h"

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void vmmx__roomsnap_save(struct vmmx_ctx *ctx, const struct vmmx__roomsnap *snap)
{
	for (int k = 0; k < VMMX__NSLOTS; k++) {
		if (!snap->have[k] || !snap->ns[k])
			continue;
		__atomic_store_n(&ctx->fcache[k].fr, snap->fr[k], __ATOMIC_RELAXED);
		__atomic_store_n(&ctx->fcache[k].ns, snap->ns[k], __ATOMIC_RELEASE);
	}
}

void vmmx__freecache_forget(struct vmmx_ctx *ctx, struct vmmx_loc loc)
{
	int k = vmmx__slot(ctx, loc);

	if (k >= 0)
		__atomic_store_n(&ctx->fcache[k].ns, 0, __ATOMIC_RELEASE);
}

const char *vmmx__why_name(enum vmmx__why why)
{
	static const char *const names[] = {
		[VMMX__WHY_OK] = "ok", [VMMX__WHY_LIMIT] = "limit",
		[VMMX__WHY_HEADROOM] = "headroom", [VMMX__WHY_OOM] = "oom",
	};

	return (unsigned int)why < VMMX__WHY_NCODES ? names[why] : "?";
}

int vmmx__charge(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes)
{
	int k = vmmx__slot(ctx, loc);
	uint64_t cur;

	if (k < 0)
		return -VMMX_EINVAL;
	cur = __atomic_load_n(&ctx->held[k], __ATOMIC_RELAXED);
	do {
		if (bytes > ctx->limit[k] || cur > ctx->limit[k] - bytes)
			return -VMMX_ENOMEM;
	} while (!__atomic_compare_exchange_n(&ctx->held[k], &cur, cur + bytes, true,
					      __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return 0;
}

void vmmx__uncharge(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t bytes)
{
	int k = vmmx__slot(ctx, loc);

	if (k >= 0)
		__atomic_fetch_sub(&ctx->held[k], bytes, __ATOMIC_RELAXED);
}

uint64_t vmmx__room(struct vmmx_ctx *ctx, struct vmmx_loc loc, uint64_t want,
		    enum vmmx__why *why, struct vmmx__roomsnap *snap)
{
	int k = vmmx__slot(ctx, loc);
	uint64_t held, cached, lim, fr, tot, drv, room;

	*why = VMMX__WHY_OOM;
	if (k < 0 || (loc.kind == VMMX_LOC_DEVICE && !ctx->peer[k]))
		return 0;
	/* Asked about another device: the context uses it from now on. */
	if (loc.kind == VMMX_LOC_DEVICE)
		vmmx__dev_activate(ctx, k);
	held = __atomic_load_n(&ctx->held[k], __ATOMIC_RELAXED);
	/* Cached handles are held (and charged) already: reusing them needs
	 * neither limit nor free memory. */
	cached = __atomic_load_n(&ctx->cache_bytes[k], __ATOMIC_RELAXED);
	/* So are the host copies of read-mostly chunks, which vmmx__make_room()
	 * releases for a new handle. */
	if (k == VMMX__HOST_SLOT)
		cached += __atomic_load_n(&ctx->shadow_bytes, __ATOMIC_RELAXED);
	lim = ctx->limit[k] > held ? ctx->limit[k] - held : 0;
	lim = lim > UINT64_MAX - cached ? UINT64_MAX : lim + cached;
	if (snap && snap->have[k]) {
		fr = snap->fr[k];
	} else {
		uint64_t now = snap ? now_ns() : 0;
		uint64_t then = snap ? __atomic_load_n(&ctx->fcache[k].ns, __ATOMIC_ACQUIRE) : 0;

		fr = then ? __atomic_load_n(&ctx->fcache[k].fr, __ATOMIC_RELAXED) : 0;
		if (then && (now - then < VMMX__FREE_TTL_NS ||
			     (now - then < VMMX__FREE_TTL_AMPLE_NS &&
			      fr > want + ctx->headroom[k] + VMMX__FREE_MARGIN))) {
			/* fresh enough: no driver call */
		} else {
			then = now;
			if (vmm_mem_info(ctx->vmm, loc, &fr, &tot))
				fr = UINT64_MAX - cached; /* no figure: let the driver decide */
		}
		if (snap) {
			snap->fr[k] = fr;
			snap->ns[k] = then;
			snap->have[k] = true;
		}
	}
	drv = fr + cached;
	room = drv > ctx->headroom[k] ? drv - ctx->headroom[k] : 0;
	if (lim < room) {
		if (lim < want)
			*why = VMMX__WHY_LIMIT;
		return lim;
	}
	/* Headroom is the reason when the memory itself had a chunk's worth. */
	if (room < want)
		*why = ctx->headroom[k] && drv >= ctx->chunk_min ? VMMX__WHY_HEADROOM : VMMX__WHY_OOM;
	return room;
}
