// SPDX-License-Identifier: MIT
/*
 * prefetch.c - prefetch and advice by address: frameworks know tensors'
 * addresses, not buffers and offsets.  A range is cut into its buffers' parts
 * with the lock-free lookup (vmmx__ctx_find_buf under the RCU read side) and
 * each part goes to the per-buffer call: vmmx_buf_migrate_on() for a
 * prefetch, vmmx_buf_advise() for advice.
 *
 * Ordering: the caller's stream may be any stream of the context (a
 * framework's own), which the driver layer refuses to synchronise, so the
 * wait for its queued work is an event recorded on it.  The moves then run
 * on a stream of their own, made for the call, so kernels on other streams
 * keep running while the copies do.
 *
 * Lifetime: a buffer found by the lookup is used after the read side ends,
 * so it is held (buf->holds) before the read side ends, until its part is
 * done: a vmmx_buf_destroy() meanwhile (another thread freeing the memory,
 * as a framework's allocator may while a placement thread moves it) waits
 * for the part to finish, after unlisting the buffer, so that no later
 * lookup finds it.  A range freed in part is the caller's to know: its
 * later parts are then in no buffer (-VMMX_ENOENT).
 *
 * vmmx_swap() sends one range back and brings another in (migrate.c does
 * both at once, vmmx__swap_locked()) when each lies in one buffer, and the
 * two are not the same buffer; otherwise it makes the two moves in turn.
 *
 * Locking: none of its own; each part takes its buffer's mutex in turn (in
 * the per-buffer calls); a swap takes its two buffers' mutexes in address
 * order.
 */
#include "config.h"

#include "internal/addr.h"

typedef int part_fn(void *arg, struct vmmx_buf *buf, size_t off, size_t len);

/* Call @fn on each buffer's part of [ptr, ptr + len), in address order. */
static int walk(struct vmmx_ctx *ctx, const char *who, const void *ptr, size_t len, part_fn *fn,
		void *arg)
{
	uintptr_t a = (uintptr_t)ptr, end = a + len;
	int err;

	if (end < a)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL, "%s(%p, %zu): the range wraps", who,
				  ptr, len);
	while (a < end) {
		struct vmmx_buf *buf;
		size_t off, size, n;

		urcu_bp_read_lock();
		buf = vmmx__ctx_find_buf(ctx, a);
		size = buf ? rcu_dereference(buf->table)->size : 0;
		/* Held inside the read side: a destroy's unlisting waits for it to end. */
		if (buf)
			__atomic_fetch_add(&buf->holds, 1, __ATOMIC_SEQ_CST);
		urcu_bp_read_unlock();
		if (!buf)
			return vmmx__fail(&ctx->conf.log, -VMMX_ENOENT,
					  "%s: address %p is in no buffer of this context", who,
					  (void *)a);
		off = a - buf->base;
		if (off >= size) {
			err = vmmx__fail(&ctx->conf.log, -VMMX_EFAULT,
					 "%s: address %p is past its buffer's size (%zu bytes at %p)",
					 who, (void *)a, size, (void *)buf->base);
			__atomic_fetch_sub(&buf->holds, 1, __ATOMIC_RELEASE);
			return err;
		}
		n = end - a < size - off ? end - a : size - off;
		err = fn(arg, buf, off, n);
		__atomic_fetch_sub(&buf->holds, 1, __ATOMIC_RELEASE);
		if (err)
			return err;
		a += n;
	}
	return 0;
}

struct prefetch {
	struct vmmx_loc loc;
	struct vmmx_stream *st;
	bool park;
	size_t bytes;           /* parked, or mapped in place (vmmx_unpark) */
};

static int prefetch_part(void *arg, struct vmmx_buf *buf, size_t off, size_t len)
{
	struct prefetch *p = arg;

	if (p->park)
		return vmmx__park_on(buf, off, len, p->loc, p->st, &p->bytes);
	return vmmx_buf_migrate_on(buf, off, len, p->loc, p->st, NULL);
}

/* Wait for the work queued on a caller's stream so far (any stream of the context). */
static int wait_stream(struct vmmx_ctx *ctx, vmm_stream_t s)
{
	vmm_event_t ev;
	int err;

	err = vmm_event_create(ctx->vmm, &ev);
	if (err)
		return err;
	err = vmm_event_record(ctx->vmm, ev, s);
	if (!err)
		err = vmm_event_sync(ctx->vmm, ev);
	/*
	 * Swallowed: the wait's result is the answer, and destroying an idle
	 * event fails only with a lost context.
	 */
	(void)vmm_event_destroy(ctx->vmm, ev);
	return err;
}

/* vmmx_prefetch(), or vmmx_park() with @park (*@parked_p: the bytes parked). */
static int prefetch(struct vmmx_ctx *ctx, const void *ptr, size_t len, struct vmmx_loc loc,
		    void *stream, bool park, size_t *parked_p)
{
	const char *fn = park ? "vmmx_park" : "vmmx_prefetch";
	struct prefetch p = { .loc = loc, .park = park };
	char name[32];
	int err;

	if (parked_p)
		*parked_p = 0;
	vmmx__clear_last_error();
	if (!ctx || !ptr)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "%s: %s is NULL", fn,
				  ctx ? "ptr" : "ctx");
	if (!vmmx__loc_usable(ctx, loc))
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "%s: location %s is not usable by this context", fn,
				  vmmx_loc_name(loc, name, sizeof(name)));
	if (park && !vmm_loc_is_host(loc))
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_park: location %s is not host memory",
				  vmmx_loc_name(loc, name, sizeof(name)));
	if (!len)
		return 0;
	if (stream) {
		err = wait_stream(ctx, (vmm_stream_t)(uintptr_t)stream);
		if (err)
			return err;
	}
	err = vmmx_stream_create(ctx, &p.st);
	if (err)
		return err;
	err = walk(ctx, fn, ptr, len, prefetch_part, &p);
	vmmx_stream_destroy(p.st);
	if (parked_p)
		*parked_p = p.bytes;
	return err;
}

VMMX_API int vmmx_prefetch(struct vmmx_ctx *ctx, const void *ptr, size_t len, struct vmmx_loc loc,
			   void *stream)
{
	return prefetch(ctx, ptr, len, loc, stream, false, NULL);
}

VMMX_API int vmmx_park(struct vmmx_ctx *ctx, const void *ptr, size_t len, struct vmmx_loc loc,
		       void *stream, size_t *parked_p)
{
	return prefetch(ctx, ptr, len, loc, stream, true, parked_p);
}

/*
 * The buffer that holds all of [ptr, ptr + len), held (as walk() holds
 * one), with the range's offset in it; NULL when the range is in none or
 * runs past one (the swap then moves by parts, as vmmx_prefetch() does).
 */
static struct vmmx_buf *whole_in_one(struct vmmx_ctx *ctx, const void *ptr, size_t len,
				     size_t *off_p)
{
	uintptr_t a = (uintptr_t)ptr;
	struct vmmx_buf *buf;

	urcu_bp_read_lock();
	buf = vmmx__ctx_find_buf(ctx, a);
	if (buf) {
		size_t size = rcu_dereference(buf->table)->size;

		*off_p = a - buf->base;
		if (*off_p < size && len <= size - *off_p)
			__atomic_fetch_add(&buf->holds, 1, __ATOMIC_SEQ_CST);
		else
			buf = NULL;
	}
	urcu_bp_read_unlock();
	return buf;
}

/* vmmx_swap() of two buffers' parts: both locked and quiesced, in address order. */
static int swap_bufs(struct vmmx_buf *out, size_t out_off, size_t out_len, struct vmmx_loc to_out,
		     struct vmmx_buf *in, size_t in_off, size_t in_len, struct vmmx_loc to_in,
		     struct vmmx_stream *st)
{
	struct vmmx_buf *lo = out < in ? out : in, *hi = out < in ? in : out;
	size_t om, im;
	int err;

	pthread_mutex_lock(&lo->lock);
	pthread_mutex_lock(&hi->lock);
	/* A copy pinning one buffer and finding the other busy drops its
	 * pins and tries again (copy.c): waiting for both here cannot stall it. */
	vmmx__buf_quiesce(lo, true);
	vmmx__buf_quiesce(hi, true);
	/* Sizes may have changed since the lookup: a shrink meanwhile. */
	if (out_off + out_len > out->table->size || in_off + in_len > in->table->size)
		err = vmmx__fail(&out->ctx->conf.log, -VMMX_ERANGE,
				 "vmmx_swap: a range goes past its buffer's size (shrunk meanwhile)");
	else
		err = vmmx__swap_locked(out, out_off, out_len, to_out, in, in_off, in_len, to_in,
					st->s, &om, &im);
	vmmx__buf_unquiesce(hi);
	vmmx__buf_unquiesce(lo);
	pthread_mutex_unlock(&hi->lock);
	pthread_mutex_unlock(&lo->lock);
	return err;
}

VMMX_API int vmmx_swap(struct vmmx_ctx *ctx, const void *out, size_t out_len,
		       struct vmmx_loc to_out, const void *in, size_t in_len, struct vmmx_loc to_in,
		       void *stream)
{
	struct prefetch p = { .loc = to_out };
	struct vmmx_buf *ob = NULL, *ib = NULL;
	size_t ooff = 0, ioff = 0;
	char name[32];
	int err;

	vmmx__clear_last_error();
	if (!ctx || (!out && out_len) || (!in && in_len))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_swap: %s is NULL",
				  !ctx ? "ctx" : !out && out_len ? "out" : "in");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_swap");
	if (!vmmx__loc_usable(ctx, to_out) || !vmm_loc_is_host(to_out))
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_swap: to_out %s is not host memory this context can use",
				  vmmx_loc_name(to_out, name, sizeof(name)));
	if (!vmmx__loc_usable(ctx, to_in) || to_in.kind != VMMX_LOC_DEVICE)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_swap: to_in %s is not a device this context can use",
				  vmmx_loc_name(to_in, name, sizeof(name)));
	if ((uintptr_t)out + out_len < (uintptr_t)out || (uintptr_t)in + in_len < (uintptr_t)in)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL, "vmmx_swap: the %s range wraps",
				  (uintptr_t)out + out_len < (uintptr_t)out ? "out" : "in");
	if (stream) {
		err = wait_stream(ctx, (vmm_stream_t)(uintptr_t)stream);
		if (err)
			return err;
	}
	vmmx__dev_activate(ctx, to_in.id);
	err = vmmx_stream_create(ctx, &p.st);
	if (err)
		return err;
	if (out_len && in_len) {
		ob = whole_in_one(ctx, out, out_len, &ooff);
		ib = ob ? whole_in_one(ctx, in, in_len, &ioff) : NULL;
	}
	if (ob && ib && ob != ib) {
		err = swap_bufs(ob, ooff, out_len, to_out, ib, ioff, in_len, to_in, p.st);
	} else {
		/* Two moves in turn: ranges over several buffers, or in one. */
		err = out_len ? walk(ctx, "vmmx_swap", out, out_len, prefetch_part, &p) : 0;
		p.loc = to_in;
		if (!err && in_len)
			err = walk(ctx, "vmmx_swap", in, in_len, prefetch_part, &p);
	}
	if (ob)
		__atomic_fetch_sub(&ob->holds, 1, __ATOMIC_RELEASE);
	if (ib)
		__atomic_fetch_sub(&ib->holds, 1, __ATOMIC_RELEASE);
	vmmx_stream_destroy(p.st);
	return err;
}

static int unpark_part(void *arg, struct vmmx_buf *buf, size_t off, size_t len)
{
	return vmmx__unpark(buf, off, len, arg);
}

VMMX_API int vmmx_unpark(struct vmmx_ctx *ctx, const void *ptr, size_t len, size_t *unparked_p)
{
	size_t done = 0;
	int err;

	if (unparked_p)
		*unparked_p = 0;
	vmmx__clear_last_error();
	if (!ctx || !ptr)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_unpark: %s is NULL",
				  ctx ? "ptr" : "ctx");
	if (!len)
		return 0;
	err = walk(ctx, "vmmx_unpark", ptr, len, unpark_part, &done);
	if (unparked_p)
		*unparked_p = done;
	return err;
}

static int advise_part(void *arg, struct vmmx_buf *buf, size_t off, size_t len)
{
	return vmmx_buf_advise(buf, off, len, *(int *)arg);
}

VMMX_API int vmmx_advise(struct vmmx_ctx *ctx, const void *ptr, size_t len, int advice)
{
	vmmx__clear_last_error();
	if (!ctx || !ptr)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_advise: %s is NULL",
				  ctx ? "ptr" : "ctx");
	if (advice < VMMX_ADVISE_HOT || advice > VMMX_ADVISE_CPU)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_advise: advice %d is none of enum vmmx_advice", advice);
	return walk(ctx, "vmmx_advise", ptr, len, advise_part, &advice);
}
