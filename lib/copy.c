// SPDX-License-Identifier: MIT
/*
 * copy.c - copies and memsets split per run of one location, and lookups.
 *
 * One cuMemcpy whose source spanned a device chunk and a host chunk killed
 * the process inside the driver (PLATFORM.md), so no driver copy here ever
 * crosses a change of location on either side: each side is cut into runs
 * (consecutive chunks of one location, or memory outside every buffer), and
 * one driver call is made per piece where both sides stay in one run.
 *
 * Lock-free: runs are computed inside an RCU read-side section; the driver
 * is called outside it, so a long copy never delays a grace period.
 */
#include "config.h"

#include <string.h>

#include "internal.h"

static bool same_loc(struct vmmx_loc a, struct vmmx_loc b)
{
	return a.kind == b.kind && a.id == b.id;
}

/* Base of the first buffer above @addr, or UINTPTR_MAX.  RCU read side held. */
static uintptr_t next_buf_base(struct vmmx_ctx *ctx, uintptr_t addr)
{
	struct vmmx__buflist *l = rcu_dereference(ctx->bufs);
	size_t i = vmmx__buflist_upper(l, addr);

	return i < l->n ? l->bufs[i]->base : UINTPTR_MAX;
}

/*
 * Length of the run that starts at @addr, at most @max.  Takes the RCU read
 * side itself.  -VMMX_EFAULT when @addr lies in a buffer past its size.
 */
static int run_at(struct vmmx_ctx *ctx, uintptr_t addr, size_t max, size_t *len_p,
		  const char *fn, const char *side)
{
	struct vmmx_buf *buf;
	size_t len;

	urcu_bp_read_lock();
	buf = vmmx__ctx_find_buf(ctx, addr);
	if (!buf) {
		/* Foreign memory, up to the next buffer (which may start inside the range). */
		uintptr_t next = next_buf_base(ctx, addr);

		len = next - addr < max ? next - addr : max;
	} else {
		const struct vmmx__table *t = rcu_dereference(buf->table);
		size_t off = addr - buf->base, i, end;

		if (off >= t->size) {
			size_t size = t->size;

			urcu_bp_read_unlock();
			return vmmx__fail(&ctx->conf.log, -VMMX_EFAULT,
					  "%s: %s %p is in buffer %p at offset %zu, past its size %zu", fn,
					  side, (void *)addr, (void *)buf->base, off, size);
		}
		i = vmmx__table_find(t, off);
		end = t->c[i].off + t->c[i].size;
		while (i + 1 < t->n && same_loc(t->c[i + 1].loc, t->c[i].loc)) {
			i++;
			end = t->c[i].off + t->c[i].size;
		}
		if (end > t->size)
			end = t->size;
		len = end - off < max ? end - off : max;
		/* A range running past the size faults, but only when it gets there. */
	}
	urcu_bp_read_unlock();
	*len_p = len;
	return 0;
}

VMMX_API int vmmx_memcpy(struct vmmx_ctx *ctx, void *dst, const void *src, size_t n)
{
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
	int err;

	vmmx__clear_last_error();
	if (!ctx || ((!dst || !src) && n))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_memcpy: NULL argument");
	if (n && ((d < s && s - d < n) || (s <= d && d - s < n)))
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_memcpy: ranges %p and %p of %zu bytes overlap", dst, src, n);
	while (n) {
		size_t dl, sl, piece;

		err = run_at(ctx, d, n, &dl, "vmmx_memcpy", "destination");
		if (!err)
			err = run_at(ctx, s, n, &sl, "vmmx_memcpy", "source");
		if (err)
			return err;
		piece = dl < sl ? dl : sl;
		err = vmm_copy(ctx->vmm, (void *)d, (const void *)s, piece);
		if (err)
			return err;
		__atomic_fetch_add(&ctx->ctr.copies, 1, __ATOMIC_RELAXED);
		d += piece;
		s += piece;
		n -= piece;
	}
	return 0;
}

VMMX_API int vmmx_memset(struct vmmx_ctx *ctx, void *dst, int c, size_t n)
{
	uintptr_t d = (uintptr_t)dst;
	int err;

	vmmx__clear_last_error();
	if (!ctx || (!dst && n))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_memset: NULL argument");
	while (n) {
		size_t len;

		err = run_at(ctx, d, n, &len, "vmmx_memset", "destination");
		if (err)
			return err;
		err = vmm_memset(ctx->vmm, (void *)d, c, len);
		if (err)
			return err;
		d += len;
		n -= len;
	}
	return 0;
}

VMMX_API int vmmx_sync(struct vmmx_ctx *ctx)
{
	vmmx__clear_last_error();
	if (!ctx)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_sync: ctx is NULL");
	return vmm_sync(ctx->vmm);
}

VMMX_API int vmmx_lookup(struct vmmx_ctx *ctx, const void *addr, struct vmmx_chunk_info *info)
{
	uintptr_t a = (uintptr_t)addr;
	struct vmmx_buf *buf;
	const struct vmmx__table *t;
	size_t off, i;

	vmmx__clear_last_error();
	if (!ctx || !info)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_lookup: NULL argument");
	urcu_bp_read_lock();
	buf = vmmx__ctx_find_buf(ctx, a);
	if (!buf) {
		urcu_bp_read_unlock();
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOENT, "vmmx_lookup: %p is in no buffer",
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
