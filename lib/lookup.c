// SPDX-License-Identifier: MIT
/*
 * lookup.c - vmmx_lookup: the chunk that holds an address, found without a
 * lock (the buffer list, then the buffer's chunk table, both RCU-published).
 *
 * Locking: the urcu-bp read side only.
 */
#include "config.h"

#include "internal/addr.h"

VMMX_API int vmmx_lookup(struct vmmx_ctx *ctx, const void *addr, struct vmmx_chunk_info *info)
{
	uintptr_t a = (uintptr_t)addr;
	struct vmmx_buf *buf;
	const struct vmmx__table *t;
	size_t off, i;

	vmmx__clear_last_error();
	if (!ctx || !info)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_lookup: NULL argument");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_lookup");
	urcu_bp_read_lock();
	buf = vmmx__ctx_find_buf(ctx, a);
	if (!buf) {
		urcu_bp_read_unlock();
		/* The message is written when asked for: most misses are words of a
		 * launch's parameters that are no pointer (vmmx-run). */
		return vmmx__fail_addr(&ctx->conf.log, -VMMX_ENOENT, "vmmx_lookup: %p is in no buffer",
				       addr);
	}
	t = rcu_dereference(buf->table);
	off = a - buf->base;
	if (off >= t->size) {
		size_t size = t->size;

		urcu_bp_read_unlock();
		return vmmx__fail(&ctx->conf.log, -VMMX_EFAULT,
				  "vmmx_lookup: %p is in buffer %p at offset %zu, past its size %zu",
				  addr, (void *)buf->base, off, size);
	}
	i = vmmx__table_find(t, off);
	*info = (struct vmmx_chunk_info){
		.base = (void *)(buf->base + t->c[i].off),
		.size = t->c[i].size,
		.loc = t->c[i].loc,
		.buf = buf,
	};
	urcu_bp_read_unlock();
	return 0;
}
