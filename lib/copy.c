// SPDX-License-Identifier: MIT
/*
 * copy.c - copies and memsets split per run of one location, and checksums.
 *
 * One cuMemcpy whose source spanned a device chunk and a host chunk killed
 * the process inside the driver (docs/DRIVER.md), so no driver copy here ever
 * crosses a change of location on either side: each side is cut into runs
 * (consecutive chunks of one location, or memory outside every buffer), and
 * one driver call is made per piece where both sides stay in one run.
 *
 * Memory outside this context's buffers is classified before it is touched
 * (foreign_run): another context's buffer and raw device memory go to the
 * driver's copy engine, host memory must be mapped with the access the copy
 * needs, anything else is -VMMX_EFAULT with the reason.
 *
 * Check first, then write: a call splits its whole range into pieces and
 * checks every one (past a buffer's size, foreign memory the CPU may not
 * write, ...) before the first byte moves, so a refused call writes
 * nothing; a wrapping range is refused outright.  Writing a range used to
 * go piece by piece and fail at the first bad one, after writing the
 * pieces before it.
 *
 * Lock-free: runs are computed inside an RCU read-side section; the driver
 * is called outside it, so a long copy never delays a grace period.  Each
 * buffer a run lies in is pinned (buf.c) from before its table is read
 * until the call's last driver call returned: a migration, trim or shrink
 * of it waits for the pin (or, started by a policy, skips the buffer), so
 * no chunk a copy uses is unmapped under it.  A buffer being moved makes
 * the call drop every pin, wait, and plan again.  Only a
 * write into a buffer with read-mostly chunks or verified host copies takes
 * that buffer's mutex, once, to drop the host copies it makes stale
 * (shadow.c).
 *
 * vmmx_checksum() is here too: it reads a buffer's range the way a copy's
 * source is read, pinned, with the device's checksum instead of a copy.
 */
#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal/addr.h"

/*
 * What a run is, for one rule: a host chunk granted to the GPU only
 * (VMMX_HOST_CPU_ACCESS=placed or none) may be copied only to or from
 * device memory.  On the H100 (driver 580) a cuMemcpy between such a chunk
 * and pageable memory died with SIGSEGV inside the driver, which reaches
 * host memory through the CPU's mapping.
 */
enum run_kind {
	RUN_DEVICE,             /* device memory: a device chunk, cuMemAlloc, managed */
	RUN_HOST,               /* host memory the driver knows (a host chunk, registered) */
	RUN_PAGEABLE,           /* ordinary host memory the driver does not know */
	RUN_GPU_ONLY,           /* a host chunk granted to the GPU only */
};

static bool same_run(const struct vmmx__chunk *a, const struct vmmx__chunk *b)
{
	return vmmx__same_loc(a->loc, b->loc) && a->cpu == b->cpu && !a->parked && !b->parked;
}

/*
 * The refusal of a use of the parked chunk at @coff of @buf (vmmx_park()):
 * its address is unmapped, and a GPU that reached it would end the context.
 * @what says whose use (it ends where " a parked chunk" follows).  Lets go
 * the RCU read side and @buf's pin, as the callers hold them.
 */
static int parked_fail(struct vmmx_ctx *ctx, struct vmmx_buf *buf, size_t coff, const char *what)
{
	urcu_bp_read_unlock();
	vmmx__buf_unpin(buf);
	return vmmx__fail(&ctx->conf.log, -VMMX_EFAULT,
			  "%s a parked chunk (vmmx_park) at offset %zu of buffer %p: bring it back with vmmx_prefetch() first",
			  what, coff, (void *)buf->base);
}

static int gpu_only_fail(struct vmmx_ctx *ctx, const char *fn, const char *side, uintptr_t addr)
{
	return vmmx__fail(&ctx->conf.log, -VMMX_EFAULT,
			  "%s: %s %p is a host chunk granted to the GPU only (VMMX_HOST_CPU_ACCESS): the driver copies it only to or from device memory (a copy to host memory crashed the driver); migrate it to the device first, or use VMMX_HOST_CPU_ACCESS=all",
			  fn, side, (void *)addr);
}

/* Base of the first buffer above @addr, or UINTPTR_MAX.  RCU read side held. */
static uintptr_t next_buf_base(struct vmmx_ctx *ctx, uintptr_t addr)
{
	struct vmmx__buflist *l = rcu_dereference(ctx->bufs);
	size_t i = vmmx__buflist_upper(l, addr);

	return i < l->n ? l->bufs[i]->base : UINTPTR_MAX;
}

/*
 * A run of @len bytes at @addr outside this context's buffers: ask the
 * driver what it is before anything touches it (the CPU must never load
 * from GPU memory).  Memory the driver knows (another context's buffer,
 * cuMemAlloc or managed memory, registered host memory) is the driver's
 * to copy, one allocation per piece, so that no piece changes kind; memory
 * it does not know must be host memory the CPU may read, or write for a
 * destination; reserved address space with nothing mapped is refused.
 */
static int foreign_run(struct vmmx_ctx *ctx, uintptr_t addr, size_t len, bool write,
		       size_t *len_p, enum run_kind *kind, const char *fn, const char *side)
{
	struct vmm_ptr_info pi;
	const char *why;
	int err;

	err = vmm_ptr_info(ctx->vmm, (const void *)addr, &pi);
	if (err)
		return err;
	if (pi.len && pi.len < len)
		len = pi.len;
	if (!pi.len && pi.kind != VMM_MEM_PAGEABLE && ctx->gran - addr % ctx->gran < len)
		/* Extent unknown: no chunk crosses a granule boundary, so no piece may. */
		len = ctx->gran - addr % ctx->gran;
	switch (pi.kind) {
	case VMM_MEM_RESERVED:
		return vmmx__fail(&ctx->conf.log, -VMMX_EFAULT,
				  "%s: %s %p is not memory of this context: it is reserved device address space with nothing mapped there",
				  fn, side, (void *)addr);
	case VMM_MEM_PAGEABLE:
		err = vmm_host_range_check((const void *)addr, len, write, &why);
		if (err)
			return vmmx__fail(&ctx->conf.log, err,
					  "%s: %s [%p, +%zu) is not memory of this context nor known to the driver, and %s",
					  fn, side, (void *)addr, len, why);
		break;
	default:
		break; /* the driver's memory: only its copy engine touches it */
	}
	*kind = pi.kind == VMM_MEM_DEVICE || pi.kind == VMM_MEM_MANAGED ? RUN_DEVICE
		: pi.kind == VMM_MEM_PAGEABLE			       ? RUN_PAGEABLE
								       : RUN_HOST;
	*len_p = len;
	return 0;
}

/* What a run is found for: a copy's source or destination, or a memset. */
enum run_use { USE_READ, USE_WRITE, USE_SET };

/* run_at()'s answer for a buffer being moved: not an error, a wait. */
#define RUN_BUSY 1

/*
 * Length of the run that starts at @addr, at most @max, for @use.  Takes the
 * RCU read side itself and calls the driver (to classify foreign memory)
 * outside it.  -VMMX_EFAULT when @addr lies in a buffer past its size, or is
 * foreign memory no copy may touch; RUN_BUSY, with nothing pinned, when
 * @addr lies in a buffer that a writer is about to unmap chunks of (the
 * caller drops its pins, waits and looks again).  *@pin_p: the buffer of
 * @addr, pinned (buf.c) until the caller unpins it after its driver call,
 * so that no migration or trim unmaps the run meanwhile; NULL for memory
 * outside every buffer.  *@buf_p: that buffer again when it has read-mostly
 * chunks or verified host copies and @use writes (its host copies must go),
 * else NULL.
 */
static int run_at(struct vmmx_ctx *ctx, uintptr_t addr, size_t max, enum run_use use,
		  size_t *len_p, enum run_kind *kind, struct vmmx_buf **pin_p,
		  struct vmmx_buf **buf_p, const char *fn, const char *side)
{
	bool write = use != USE_READ;
	struct vmmx_buf *buf;
	size_t len;

	*buf_p = *pin_p = NULL;
	urcu_bp_read_lock();
	buf = vmmx__ctx_find_buf(ctx, addr);
	if (!buf) {
		/* Foreign memory, up to the next buffer (which may start inside the range). */
		uintptr_t next = next_buf_base(ctx, addr);

		len = next - addr < max ? next - addr : max;
		urcu_bp_read_unlock();
		return foreign_run(ctx, addr, len, write, len_p, kind, fn, side);
	} else {
		const struct vmmx__table *t;
		size_t off = addr - buf->base, i, end;

		/* Pinned before the table is read: a writer that marks the
		 * buffer moving later waits for this pin, one that did so
		 * earlier is seen here. */
		if (!vmmx__buf_pin(buf)) {
			urcu_bp_read_unlock();
			return RUN_BUSY;
		}
		t = rcu_dereference(buf->table);
		if (off >= t->size) {
			size_t size = t->size;

			urcu_bp_read_unlock();
			vmmx__buf_unpin(buf);
			return vmmx__fail(&ctx->conf.log, -VMMX_EFAULT,
					  "%s: %s %p is in buffer %p at offset %zu, past its size %zu", fn,
					  side, (void *)addr, (void *)buf->base, off, size);
		}
		i = vmmx__table_find(t, off);
		if (t->c[i].parked) {
			char what[128];

			snprintf(what, sizeof(what), "%s: %s %p is in", fn, side, (void *)addr);
			return parked_fail(ctx, buf, t->c[i].off, what);
		}
		end = t->c[i].off + t->c[i].size;
		*kind = !vmm_loc_is_host(t->c[i].loc) ? RUN_DEVICE
			: t->c[i].cpu		      ? RUN_HOST
						      : RUN_GPU_ONLY;
		/* Adjacent chunks of one location join into one run, except
		 * host chunks under a memset: cuMemsetD8 refuses a range that
		 * runs from one host allocation into another with
		 * CUDA_ERROR_INVALID_VALUE (H100, driver 580; device chunks
		 * and copies are fine), and a chunk is never more than one
		 * allocation. */
		while (i + 1 < t->n && same_run(&t->c[i + 1], &t->c[i]) &&
		       (use != USE_SET || *kind == RUN_DEVICE)) {
			i++;
			end = t->c[i].off + t->c[i].size;
		}
		if (end > t->size)
			end = t->size;
		len = end - off < max ? end - off : max;
		if (write && (__atomic_load_n(&buf->read_mostly, __ATOMIC_RELAXED) ||
			      __atomic_load_n(&buf->host_copies, __ATOMIC_RELAXED)))
			*buf_p = buf;
		*pin_p = buf;
	}
	urcu_bp_read_unlock();
	*len_p = len;
	return 0;
}

/*
 * A call's pieces, found and checked before any byte is written, so that a
 * call that fails a check writes nothing: one driver call (or, for pageable
 * memory under a memset, one memset()) per piece.  The first few live on
 * the stack; a range of many runs grows an array.
 */
struct piece {
	uintptr_t d, s;
	size_t len;
	bool cpu;                       /* memset: pageable memory the CPU sets */
	struct vmmx_buf *rm;            /* the buffer written, if it has read-mostly chunks */
	struct vmmx_buf *pin[2];        /* the buffers pinned for it (destination, source) */
};

#define PLAN_INLINE 8

struct plan {
	struct piece *p;
	size_t n, cap;
	struct piece inl[PLAN_INLINE];
};

static void plan_init(struct plan *pl)
{
	pl->p = pl->inl;
	pl->n = 0;
	pl->cap = PLAN_INLINE;
}

/* Unpin every buffer the plan's pieces pinned, and forget the pieces. */
static void plan_unpin(struct plan *pl)
{
	for (size_t i = 0; i < pl->n; i++)
		for (int k = 0; k < 2; k++)
			if (pl->p[i].pin[k])
				vmmx__buf_unpin(pl->p[i].pin[k]);
	pl->n = 0;
}

static void plan_fini(struct plan *pl)
{
	plan_unpin(pl);
	if (pl->p != pl->inl)
		free(pl->p);
}

/*
 * A buffer of the range is being moved: drop every pin, so that its writer
 * can go on, and wait a moment before the caller plans again.
 */
/* Wait a moment for a buffer being moved: yield at first, then sleep. */
static void busy_wait(unsigned int *round)
{
	if ((*round)++ < 64)
		sched_yield();
	else
		usleep(50);
}

static void plan_wait(struct plan *pl, unsigned int *round)
{
	plan_unpin(pl);
	busy_wait(round);
}

/* Add @pc; on failure its pins are dropped. */
static int plan_add(struct vmmx_ctx *ctx, struct plan *pl, struct piece pc, const char *fn)
{
	if (pl->n == pl->cap) {
		size_t cap = pl->cap * 2;
		struct piece *p = pl->p == pl->inl ? malloc(cap * sizeof(*p))
						   : realloc(pl->p, cap * sizeof(*p));

		if (!p) {
			for (int k = 0; k < 2; k++)
				if (pc.pin[k])
					vmmx__buf_unpin(pc.pin[k]);
			return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM,
					  "%s: out of memory for the list of %zu pieces", fn,
					  pl->n + 1);
		}
		if (pl->p == pl->inl)
			memcpy(p, pl->inl, sizeof(pl->inl));
		pl->p = p;
		pl->cap = cap;
	}
	pl->p[pl->n++] = pc;
	return 0;
}

/*
 * Drop the host copies of the read-mostly chunks that @pl's pieces write
 * (shadow.c), once every piece is checked and before any byte moves: a
 * write through libvmmx's own API withdraws the promise for the chunks it
 * writes, so that moving them back to host memory copies the new bytes
 * instead of mapping the old copy again.  Consecutive pieces of one buffer
 * are one call.  RUN_BUSY when a buffer's mutex is held: its holder may be
 * waiting for the pins this call holds, so the caller drops them and plans
 * again.
 */
static int plan_drop_copies(struct plan *pl)
{
	for (size_t i = 0; i < pl->n; i++) {
		struct vmmx_buf *buf = pl->p[i].rm;
		uintptr_t from = pl->p[i].d, to = from + pl->p[i].len;
		int err;

		if (!buf)
			continue;
		while (i + 1 < pl->n && pl->p[i + 1].rm == buf && pl->p[i + 1].d == to) {
			i++;
			to += pl->p[i].len;
		}
		err = vmmx__shadow_written(buf, from - buf->base, to - from);
		if (err)
			return err;
	}
	return 0;
}

VMMX_API int vmmx_memcpy(struct vmmx_ctx *ctx, void *dst, const void *src, size_t n)
{
	uintptr_t d = (uintptr_t)dst, s = (uintptr_t)src;
	unsigned int round = 0;
	struct plan pl;
	size_t left;
	int err = 0;

	vmmx__clear_last_error();
	if (!ctx || ((!dst || !src) && n))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_memcpy: NULL argument");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_memcpy");
	if (n > UINTPTR_MAX - d || n > UINTPTR_MAX - s)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_memcpy(%p, %p, %zu): the %s range wraps around the address space",
				  dst, src, n, n > UINTPTR_MAX - d ? "destination" : "source");
	if (n && ((d < s && s - d < n) || (s <= d && d - s < n)))
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_memcpy: ranges %p and %p of %zu bytes overlap", dst, src, n);
	/* Every piece found and checked first: a call refused writes nothing.
	 * The buffers stay pinned from the plan to the last write, so the
	 * runs found stay where they were found. */
	plan_init(&pl);
again:
	d = (uintptr_t)dst;
	s = (uintptr_t)src;
	left = n;
	while (left) {
		enum run_kind dk, sk;
		struct vmmx_buf *db, *sb, *dpin, *spin;
		size_t dl, sl, piece;

		err = run_at(ctx, d, left, USE_WRITE, &dl, &dk, &dpin, &db, "vmmx_memcpy",
			     "destination");
		if (err == RUN_BUSY) {
			plan_wait(&pl, &round);
			goto again;
		}
		if (err)
			goto out;
		err = run_at(ctx, s, left, USE_READ, &sl, &sk, &spin, &sb, "vmmx_memcpy", "source");
		if (err) {
			if (dpin)
				vmmx__buf_unpin(dpin);
			if (err == RUN_BUSY) {
				plan_wait(&pl, &round);
				goto again;
			}
			goto out;
		}
		piece = dl < sl ? dl : sl;
		err = plan_add(ctx, &pl,
			       (struct piece){ .d = d, .s = s, .len = piece, .rm = db,
					       .pin = { dpin, spin } },
			       "vmmx_memcpy");
		if (err)
			goto out;
		if (dk == RUN_GPU_ONLY && sk != RUN_DEVICE) {
			err = gpu_only_fail(ctx, "vmmx_memcpy", "destination", d);
			goto out;
		}
		if (sk == RUN_GPU_ONLY && dk != RUN_DEVICE) {
			err = gpu_only_fail(ctx, "vmmx_memcpy", "source", s);
			goto out;
		}
		d += piece;
		s += piece;
		left -= piece;
	}
	err = plan_drop_copies(&pl);
	if (err == RUN_BUSY) {
		plan_wait(&pl, &round);
		goto again;
	}
	for (size_t i = 0; i < pl.n && !err; i++) {
		err = vmm_copy(ctx->vmm, (void *)pl.p[i].d, (const void *)pl.p[i].s, pl.p[i].len);
		if (!err)
			__atomic_fetch_add(&ctx->ctr.copies, 1, __ATOMIC_RELAXED);
	}
out:
	plan_fini(&pl);
	return err;
}

VMMX_API int vmmx_memset(struct vmmx_ctx *ctx, void *dst, int c, size_t n)
{
	uintptr_t d = (uintptr_t)dst;
	unsigned int round = 0;
	struct plan pl;
	size_t left;
	int err = 0;

	vmmx__clear_last_error();
	if (!ctx || (!dst && n))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_memset: NULL argument");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_memset");
	if (n > UINTPTR_MAX - d)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_memset(%p, %zu): the range wraps around the address space",
				  dst, n);
	/* Every piece found and checked first, its buffer pinned to the last
	 * write: a call refused writes nothing. */
	plan_init(&pl);
again:
	d = (uintptr_t)dst;
	left = n;
	while (left) {
		struct vmmx_buf *db, *dpin;
		enum run_kind k;
		size_t len;

		err = run_at(ctx, d, left, USE_SET, &len, &k, &dpin, &db, "vmmx_memset",
			     "destination");
		if (err == RUN_BUSY) {
			plan_wait(&pl, &round);
			goto again;
		}
		if (err)
			goto out;
		/* cuMemsetD8 refuses memory it does not know (CUDA_ERROR_INVALID_VALUE
		 * on the H100); foreign_run checked that the CPU may write it. */
		err = plan_add(ctx, &pl,
			       (struct piece){ .d = d, .len = len, .cpu = k == RUN_PAGEABLE, .rm = db,
					       .pin = { dpin, NULL } },
			       "vmmx_memset");
		if (err)
			goto out;
		/* Whether the driver's memset reaches such a chunk through the CPU is
		 * not known: refused like a copy from host memory. */
		if (k == RUN_GPU_ONLY) {
			err = gpu_only_fail(ctx, "vmmx_memset", "destination", d);
			goto out;
		}
		d += len;
		left -= len;
	}
	err = plan_drop_copies(&pl);
	if (err == RUN_BUSY) {
		plan_wait(&pl, &round);
		goto again;
	}
	for (size_t i = 0; i < pl.n && !err; i++) {
		if (pl.p[i].cpu)
			memset((void *)pl.p[i].d, c, pl.p[i].len);
		else
			err = vmm_memset(ctx->vmm, (void *)pl.p[i].d, c, pl.p[i].len);
	}
out:
	plan_fini(&pl);
	return err;
}

VMMX_API int vmmx_checksum(struct vmmx_ctx *ctx, const void *ptr, size_t size, uint64_t *sum_p)
{
	uintptr_t a = (uintptr_t)ptr;
	unsigned int round = 0;
	const struct vmmx__table *t;
	struct vmmx_buf *buf;
	size_t off, bsize;
	uint64_t sum;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !ptr || !sum_p)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_checksum: %s is NULL",
				  !ctx ? "ctx" : !ptr ? "ptr" : "sum_p");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_checksum");
	if (a % 8 || size % 8)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_checksum(%p, %zu): the %s is not a multiple of 8 (the sum is over 64-bit words)",
				  ptr, size, a % 8 ? "address" : "size");
	/* Pinned before its table is read, as a copy's buffer is: no
	 * migration, trim or shrink unmaps the range while the device reads it. */
	for (;;) {
		urcu_bp_read_lock();
		buf = vmmx__ctx_find_buf(ctx, a);
		if (!buf || vmmx__buf_pin(buf))
			break;
		urcu_bp_read_unlock();
		busy_wait(&round);
	}
	if (!buf) {
		urcu_bp_read_unlock();
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_checksum: %p is not in a libvmmx buffer of this context", ptr);
	}
	t = rcu_dereference(buf->table);
	off = a - buf->base;
	bsize = t->size;
	if (off > bsize || size > bsize - off) {
		urcu_bp_read_unlock();
		vmmx__buf_unpin(buf);
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_checksum: [%p, +%zu) goes past the end of its buffer (base %p, size %zu)",
				  ptr, size, (void *)buf->base, bsize);
	}
	/* A kernel that read a parked chunk's unmapped address would end the
	 * context (CUDA_ERROR_ILLEGAL_ADDRESS): refused instead. */
	for (size_t i = size ? vmmx__table_find(t, off) : t->n; i < t->n && t->c[i].off < off + size;
	     i++) {
		if (t->c[i].parked) {
			char what[128];

			snprintf(what, sizeof(what), "vmmx_checksum: [%p, +%zu) reaches", ptr, size);
			return parked_fail(ctx, buf, t->c[i].off, what);
		}
	}
	urcu_bp_read_unlock();
	err = vmmx__checksum(ctx, ptr, size, &sum);
	vmmx__buf_unpin(buf);
	if (!err)
		*sum_p = sum;
	return err;
}
