// SPDX-License-Identifier: MIT
/*
 * stream.c - streams and waits: vmmx_stream_* (a driver stream that
 * migrations and the framework allocator run on) and vmmx_sync (wait for
 * everything queued on the context's device).
 *
 * Locking: none; a stream is used by one caller at a time, as the driver's
 * is.  Calls the driver.
 */
#include "config.h"

#include <stdlib.h>

#include "internal/obj.h"

VMMX_API int vmmx_stream_create(struct vmmx_ctx *ctx, struct vmmx_stream **s_p)
{
	struct vmmx_stream *st;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !s_p)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_stream_create: NULL argument");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_stream_create");
	st = calloc(1, sizeof(*st));
	if (!st)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_stream_create: out of memory");
	err = vmm_stream_create(ctx->vmm, &st->s);
	if (err) {
		free(st);
		return err;
	}
	st->ctx = ctx;
	*s_p = st;
	return 0;
}

VMMX_API void vmmx_stream_destroy(struct vmmx_stream *st)
{
	if (!st)
		return;
	/* In a forked child the stream is the parent's: forget it only. */
	if (!vmmx__inherited(st->ctx) && vmm_stream_destroy(st->ctx->vmm, st->s))
		vmmx__logf(&st->ctx->conf.log, VMMX_LOG_WARN, "vmmx_stream_destroy: %s",
			   vmmx_last_error());
	free(st);
}

VMMX_API void *vmmx_stream_handle(const struct vmmx_stream *st)
{
	if (st && vmmx__inherited(st->ctx)) {
		vmmx__fail_inherited(st->ctx, "vmmx_stream_handle");
		return NULL;
	}
	return st ? (void *)(uintptr_t)st->s : NULL;
}

VMMX_API int vmmx_stream_sync(struct vmmx_stream *st)
{
	vmmx__clear_last_error();
	if (!st)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_stream_sync: NULL stream");
	if (vmmx__inherited(st->ctx))
		return vmmx__fail_inherited(st->ctx, "vmmx_stream_sync");
	return vmm_stream_sync(st->ctx->vmm, st->s);
}

VMMX_API int vmmx_sync(struct vmmx_ctx *ctx)
{
	vmmx__clear_last_error();
	if (!ctx)
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_sync: ctx is NULL");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_sync");
	return vmm_sync(ctx->vmm);
}
