// SPDX-License-Identifier: MIT
/*
 * stats.c - statistics: counters kept by the other files, plus what the
 * chunk tables say now (read lock-free, one buffer at a time).
 */
#include "config.h"

#include <string.h>

#include "internal.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

VMMX_API int vmmx_stats_get(struct vmmx_ctx *ctx, struct vmmx_stats *st)
{
	struct vmmx_stats out;
	struct vmmx__buflist *l;
	struct vmm_counts vc;
	size_t n;

	vmmx__clear_last_error();
	if (!ctx || !st || st->size < offsetof(struct vmmx_stats, buffers))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL,
				  "vmmx_stats_get: NULL argument or st->size not set");
	memset(&out, 0, sizeof(out));
	out.version = VMMX_STATS_VERSION;

	urcu_bp_read_lock();
	l = rcu_dereference(ctx->bufs);
	out.buffers = (unsigned int)l->n;
	for (size_t i = 0; i < l->n; i++) {
		const struct vmmx__table *t = rcu_dereference(l->bufs[i]->table);

		out.reserved_bytes += l->bufs[i]->capacity;
		for (size_t j = 0; j < t->n; j++) {
			if (vmm_loc_is_host(t->c[j].loc)) {
				out.host_bytes += t->c[j].size;
				out.host_chunks++;
			} else {
				out.device_bytes += t->c[j].size;
				out.device_chunks++;
			}
		}
	}
	urcu_bp_read_unlock();

	out.placed_device = LOAD(ctx->ctr.placed[VMMX__DEVICE]);
	out.placed_host = LOAD(ctx->ctr.placed[VMMX__HOST]);
	out.fallbacks = LOAD(ctx->ctr.fallbacks);
	out.resizes = LOAD(ctx->ctr.resizes);
	out.resize_failures = LOAD(ctx->ctr.resize_failures);
	out.copies = LOAD(ctx->ctr.copies);
	out.deferred = LOAD(ctx->ndeferred);
	vmm_counts(ctx->vmm, &vc);
	memcpy(out.driver_calls, vc.calls, sizeof(out.driver_calls));

	n = st->size < sizeof(out) ? st->size : sizeof(out);
	out.size = st->size;
	memcpy(st, &out, n);
	return 0;
}
