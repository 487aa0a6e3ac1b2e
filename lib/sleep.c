// SPDX-License-Identifier: MIT
/*
 * sleep.c - sleep and wake: the device memory of tagged buffers given back
 * to the driver, and taken again at the same addresses.
 *
 * A buffer carries a tag (vmmx_buf_set_tag, or the creating thread's
 * current tag, vmmx_tag_scope).  Sleep is built on what the layers below
 * already do, so it inherits their guarantees:
 *  - offload: the buffer's device chunks migrate to pinned host memory under
 *    the same address (migrate.c: batched asynchronous copies through two
 *    staging slots, one per run of one location; a read-mostly chunk with a
 *    current host copy is remapped, not copied).  Each chunk moves whole or
 *    not at all, so a failure at any step loses no byte.  Where each run of
 *    device chunks was is recorded, and the wake migrates each run back.
 *  - discard: the buffer shrinks to nothing (its chunks are unmapped), and
 *    the wake grows it back to its old size, placed by its policy.
 * After a sleep the chunks the context keeps cached on the devices involved
 * go back to the driver, so the memory is free for other processes; the
 * host chunks a wake frees go to the cache, where the next sleep finds them
 * (no pinning anew each cycle; vmmx_ctx_trim gives them back).
 *
 * Why sleeping chunks stay mapped to host memory rather than unmapped: a
 * kernel that touches an offloaded buffer by mistake then reads correct
 * data slowly instead of faulting the context, and the migration path
 * (already proven against every failure by the fault layer) needs nothing
 * new.  A discarded buffer has no contents to protect, so it is unmapped.
 *
 * Locking: sleep_lock serialises sleep, wake and tag changes, and guards
 * each buffer's sleep fields (written under it, read atomically by the
 * stats); it is outer to buf->lock, which the migrations and resizes take.
 * A tag string is replaced under sleep_lock and freed after a grace period,
 * so readers (the stats, the buffer pick) read it inside RCU read sections.
 * Destroying a buffer while it is being put to sleep or woken is the
 * caller's race, as for a migration.
 *
 * Layer: addr (docs/DESIGN.md, "Inside lib/"): it walks the buffer list and
 * tables like lookup.c and uses buffers through the public API.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/addr.h"

static pthread_mutex_t sleep_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };

static int check_tag(const char *tag, const char *fn)
{
	if (tag && strnlen(tag, VMMX_TAG_MAX) >= VMMX_TAG_MAX)
		return vmmx__fail(NULL, -VMMX_EINVAL, "%s: tag \"%.*s...\" is longer than %d bytes",
				  fn, 16, tag, VMMX_TAG_MAX - 1);
	return 0;
}

VMMX_API int vmmx_tag_scope(const char *tag)
{
	int err;

	vmmx__clear_last_error();
	err = check_tag(tag, "vmmx_tag_scope");
	if (err)
		return err;
	snprintf(vmmx__tag_cur, sizeof(vmmx__tag_cur), "%s", tag ? tag : "");
	return 0;
}

VMMX_API int vmmx_buf_set_tag(struct vmmx_buf *buf, const char *tag)
{
	char *nt = NULL, *old;
	int err;

	vmmx__clear_last_error();
	if (!buf)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_set_tag: buf is NULL");
	if (vmmx__inherited(buf->ctx))
		return vmmx__fail_inherited(buf->ctx, "vmmx_buf_set_tag");
	err = check_tag(tag, "vmmx_buf_set_tag");
	if (err)
		return err;
	if (tag && *tag) {
		nt = strdup(tag);
		if (!nt)
			return vmmx__fail(&buf->ctx->conf.log, -VMMX_ENOMEM,
					  "vmmx_buf_set_tag: out of memory");
	}
	pthread_mutex_lock(&sleep_lock);
	if (__atomic_load_n(&buf->sleep, __ATOMIC_RELAXED) != VMMX__AWAKE) {
		pthread_mutex_unlock(&sleep_lock);
		free(nt);
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_EBUSY,
				  "vmmx_buf_set_tag: the buffer is asleep (vmmx_wake() it first)");
	}
	old = buf->tag;
	rcu_assign_pointer(buf->tag, nt);
	pthread_mutex_unlock(&sleep_lock);
	if (old) {
		urcu_bp_synchronize_rcu();
		free(old);
	}
	return 0;
}

VMMX_API int vmmx_buf_tag(struct vmmx_buf *buf, char *out, size_t len)
{
	const char *t;
	int err = 0;

	vmmx__clear_last_error();
	if (!buf || !out)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_buf_tag: NULL argument");
	urcu_bp_read_lock();
	t = rcu_dereference(buf->tag);
	if (!t)
		t = "";
	if (strlen(t) >= len)
		err = vmmx__fail(&buf->ctx->conf.log, -VMMX_ERANGE,
				 "vmmx_buf_tag: %zu bytes cannot hold the tag (%zu needed)", len,
				 strlen(t) + 1);
	else
		memcpy(out, t, strlen(t) + 1);
	urcu_bp_read_unlock();
	return err;
}

static bool tag_in(const char *tag, const char *const *tags, size_t ntags)
{
	if (!tag)
		return false;
	if (!tags)
		return true;
	for (size_t i = 0; i < ntags; i++)
		if (tags[i] && !strcmp(tags[i], tag))
			return true;
	return false;
}

/* The buffers of @ctx with one of @tags that are asleep (@asleep) or awake;
 * sleep_lock held, so neither their tags nor their states change. */
static int pick(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags, bool asleep,
		const char *fn, struct vmmx_buf ***v_p, size_t *n_p)
{
	const struct vmmx__buflist *l;
	struct vmmx_buf **v;
	size_t n = 0;

	urcu_bp_read_lock();
	l = rcu_dereference(ctx->bufs);
	v = malloc(((l ? l->n : 0) + 1) * sizeof(*v));
	if (!v) {
		urcu_bp_read_unlock();
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "%s: out of memory", fn);
	}
	for (size_t i = 0; l && i < l->n; i++) {
		struct vmmx_buf *b = l->bufs[i];
		int st = __atomic_load_n(&b->sleep, __ATOMIC_RELAXED);

		if (tag_in(rcu_dereference(b->tag), tags, ntags) && (st != VMMX__AWAKE) == asleep)
			v[n++] = b;
	}
	urcu_bp_read_unlock();
	*v_p = v;
	*n_p = n;
	return 0;
}

/* Record where @buf's device chunks are (runs of one device) and its size. */
static int record_runs(struct vmmx_buf *buf)
{
	const struct vmmx__table *t;
	struct vmmx__sleep_run *r;
	size_t n = 0;

	urcu_bp_read_lock();
	t = rcu_dereference(buf->table);
	r = malloc((t->n + 1) * sizeof(*r));
	if (!r) {
		urcu_bp_read_unlock();
		return vmmx__fail(&buf->ctx->conf.log, -VMMX_ENOMEM, "vmmx_sleep: out of memory");
	}
	for (size_t i = 0; i < t->n && t->c[i].off < t->size; i++) {
		const struct vmmx__chunk *c = &t->c[i];

		if (c->loc.kind != VMMX_LOC_DEVICE)
			continue;
		if (n && r[n - 1].loc.id == c->loc.id && r[n - 1].off + r[n - 1].len == c->off)
			r[n - 1].len += c->size;
		else
			r[n++] = (struct vmmx__sleep_run){ c->off, c->size, c->loc };
	}
	__atomic_store_n(&buf->sleep_size, t->size, __ATOMIC_RELAXED);
	urcu_bp_read_unlock();
	free(buf->sleep_runs);
	buf->sleep_runs = r;
	buf->sleep_nruns = n;
	return 0;
}

static void forget_runs(struct vmmx_buf *buf)
{
	free(buf->sleep_runs);
	buf->sleep_runs = NULL;
	buf->sleep_nruns = 0;
}

/* Move each recorded run back to its device; the first error (each chunk
 * is where it was or moved, intact, whatever happens). */
static int restore_runs(struct vmmx_buf *buf)
{
	int err = 0, e;

	for (size_t i = 0; i < buf->sleep_nruns; i++) {
		const struct vmmx__sleep_run *r = &buf->sleep_runs[i];

		e = vmmx_buf_migrate(buf, r->off, r->len, r->loc, NULL);
		if (e && !err)
			err = e;
	}
	return err;
}

static int sleep_one(struct vmmx_buf *buf, int mode, size_t *bytes)
{
	size_t size;
	int err;

	/* Chunks kept past the size hold device memory too. */
	err = vmmx_buf_trim(buf);
	if (err)
		return err;
	err = record_runs(buf);
	if (err)
		return err;
	size = buf->sleep_size;
	if (mode == VMMX_SLEEP_OFFLOAD) {
		err = size ? vmmx_buf_migrate(buf, 0, size, HOST, NULL) : 0;
		if (err) {
			/* Swallowed: the buffer stays awake with its data intact
			 * wherever each chunk is; the migration's error is the answer. */
			(void)restore_runs(buf);
			forget_runs(buf);
			return err;
		}
	} else {
		err = vmmx_buf_resize(buf, 0);
		if (!err)
			err = vmmx_buf_trim(buf);
		if (err) {
			forget_runs(buf);
			return err;
		}
	}
	__atomic_store_n(&buf->sleep, mode == VMMX_SLEEP_OFFLOAD ? VMMX__OFFLOADED : VMMX__DISCARDED,
			 __ATOMIC_RELEASE);
	*bytes += size;
	return 0;
}

/* Keep the failing step's message: the undo below clears it. */
static void keep_why(char *why, size_t len)
{
	if (why)
		snprintf(why, len, "%s", vmmx_last_error());
}

/*
 * Wake one buffer.  A wake that fails puts back what it took, so an asleep
 * buffer never holds device memory: a discarded one shrinks to nothing
 * again, an offloaded one moves what it restored back to host memory (each
 * chunk intact wherever it is).  @why gets the failure's message.
 */
static int wake_one(struct vmmx_buf *buf, size_t *bytes, char *why, size_t len)
{
	int st = __atomic_load_n(&buf->sleep, __ATOMIC_RELAXED);
	int err;

	if (st == VMMX__DISCARDED) {
		/* Awake first: vmmx_buf_resize refuses a sleeping buffer. */
		__atomic_store_n(&buf->sleep, VMMX__AWAKE, __ATOMIC_RELEASE);
		err = vmmx_buf_resize(buf, buf->sleep_size);
		if (err) {
			keep_why(why, len);
			/* Swallowed: a shrink to nothing fails only when out of
			 * memory, and then keeps its chunks mapped as slack. */
			(void)vmmx_buf_resize(buf, 0);
			(void)vmmx_buf_trim(buf);
			__atomic_store_n(&buf->sleep, VMMX__DISCARDED, __ATOMIC_RELEASE);
			return err;
		}
	} else {
		err = restore_runs(buf);
		if (err) {
			keep_why(why, len);
			/* Swallowed: each chunk is intact where it is; the
			 * restore's error is the answer. */
			if (buf->sleep_size)
				(void)vmmx_buf_migrate(buf, 0, buf->sleep_size, HOST, NULL);
			return err; /* still asleep: a later wake tries again */
		}
		__atomic_store_n(&buf->sleep, VMMX__AWAKE, __ATOMIC_RELEASE);
	}
	*bytes += buf->sleep_size;
	forget_runs(buf);
	return 0;
}

/* Give the chunks cached on the sleeping buffers' devices back to the driver. */
static void release_devices(struct vmmx_ctx *ctx, struct vmmx_buf **v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < v[i]->sleep_nruns; j++)
			vmmx__cache_evict(ctx, v[i]->sleep_runs[j].loc, UINT64_MAX);
}

/* -VMMX_EBUSY when work queued on @stream so far has not finished. */
static int check_idle(struct vmmx_ctx *ctx, void *stream)
{
	vmm_event_t ev;
	int err;

	err = vmm_event_create(ctx->vmm, &ev);
	if (err)
		return err;
	err = vmm_event_record(ctx->vmm, ev, (vmm_stream_t)(uintptr_t)stream);
	if (!err)
		err = vmm_event_query(ctx->vmm, ev);
	/* Swallowed: destroying an event fails only with a lost context. */
	(void)vmm_event_destroy(ctx->vmm, ev);
	if (err == -VMMX_EBUSY)
		return vmmx__fail(&ctx->conf.log, -VMMX_EBUSY,
				  "vmmx_sleep: work queued on stream %p has not finished: "
				  "synchronize it before the sleep", stream);
	return err;
}

static int check_args(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags,
		      const char *fn)
{
	int err;

	if (!ctx)
		return vmmx__fail(NULL, -VMMX_EINVAL, "%s: ctx is NULL", fn);
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, fn);
	if (!tags && ntags)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL, "%s: tags is NULL, ntags %zu",
				  fn, ntags);
	for (size_t i = 0; i < ntags; i++) {
		if (!tags[i] || !*tags[i])
			return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
					  "%s: tag %zu is NULL or empty", fn, i);
		err = check_tag(tags[i], fn);
		if (err)
			return err;
	}
	return 0;
}

VMMX_API int vmmx_sleep(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags, int mode,
			void *stream, size_t *bytes_p)
{
	struct vmmx_buf **v;
	size_t n, i, bytes = 0, undone = 0;
	char why[256];
	int err;

	vmmx__clear_last_error();
	err = check_args(ctx, tags, ntags, "vmmx_sleep");
	if (err)
		return err;
	if (mode != VMMX_SLEEP_OFFLOAD && mode != VMMX_SLEEP_DISCARD)
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "vmmx_sleep: mode %d is neither VMMX_SLEEP_OFFLOAD nor "
				  "VMMX_SLEEP_DISCARD", mode);
	pthread_mutex_lock(&sleep_lock);
	err = pick(ctx, tags, ntags, false, "vmmx_sleep", &v, &n);
	if (err)
		goto out_unlock;
	err = check_idle(ctx, stream);
	if (err)
		goto out_free;
	for (i = 0; i < n; i++) {
		err = sleep_one(v[i], mode, &bytes);
		if (err)
			break;
	}
	if (err) {
		/* The wakes below clear the error message: keep it. */
		snprintf(why, sizeof(why), "%s", vmmx_last_error());
		while (i--)
			if (wake_one(v[i], &undone, NULL, 0))
				break; /* stays asleep, intact: vmmx_wake() finishes */
		vmmx__fail(&ctx->conf.log, err, "%s", why);
		goto out_free;
	}
	release_devices(ctx, v, n);
	if (bytes_p)
		*bytes_p = bytes;
out_free:
	free(v);
out_unlock:
	pthread_mutex_unlock(&sleep_lock);
	return err;
}

VMMX_API int vmmx_wake(struct vmmx_ctx *ctx, const char *const *tags, size_t ntags,
		       size_t *bytes_p)
{
	struct vmmx_buf **v;
	size_t n, bytes = 0;
	char why[256] = "";
	int err, first = 0;

	vmmx__clear_last_error();
	err = check_args(ctx, tags, ntags, "vmmx_wake");
	if (err)
		return err;
	pthread_mutex_lock(&sleep_lock);
	err = pick(ctx, tags, ntags, true, "vmmx_wake", &v, &n);
	if (err)
		goto out_unlock;
	for (size_t i = 0; i < n; i++) {
		err = wake_one(v[i], &bytes, first ? NULL : why, sizeof(why));
		if (err && !first)
			first = err;
	}
	/* What failed wakes took back from the devices goes back to the driver. */
	release_devices(ctx, v, n);
	free(v);
	err = first;
	if (err)
		vmmx__fail(&ctx->conf.log, err, "%s", why);
	if (bytes_p)
		*bytes_p = bytes;
out_unlock:
	pthread_mutex_unlock(&sleep_lock);
	return err;
}

VMMX_API int vmmx_sleep_stats(struct vmmx_ctx *ctx, const char *tag,
			      struct vmmx_sleep_stats *st)
{
	const struct vmmx__buflist *l;
	struct vmmx_sleep_stats s = { 0 };

	vmmx__clear_last_error();
	if (!ctx || !tag || !st)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_sleep_stats: NULL argument");
	urcu_bp_read_lock();
	l = rcu_dereference(ctx->bufs);
	for (size_t i = 0; l && i < l->n; i++) {
		struct vmmx_buf *b = l->bufs[i];
		const char *bt = rcu_dereference(b->tag);
		const struct vmmx__table *t;
		int state = __atomic_load_n(&b->sleep, __ATOMIC_ACQUIRE);

		if (strcmp(bt ? bt : "", tag))
			continue;
		t = rcu_dereference(b->table);
		s.buffers++;
		if (state == VMMX__AWAKE) {
			s.bytes += t->size;
		} else {
			size_t z = __atomic_load_n(&b->sleep_size, __ATOMIC_RELAXED);

			s.bytes += z;
			s.asleep_bytes += z;
			if (state == VMMX__OFFLOADED)
				s.offloaded_bytes += z;
		}
		for (size_t k = 0; k < t->n; k++) {
			if (t->c[k].loc.kind == VMMX_LOC_DEVICE)
				s.device_bytes += t->c[k].size;
			else if (t->c[k].loc.kind != VMMX_LOC_NONE)
				s.host_bytes += t->c[k].size;
		}
	}
	urcu_bp_read_unlock();
	*st = s;
	return 0;
}
