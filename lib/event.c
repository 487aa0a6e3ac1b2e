// SPDX-License-Identifier: MIT
/*
 * event.c - events: vmmx_event_* (a driver event of a context, recorded on
 * any stream of its device and queried without waiting), the public face of
 * the driver layer's vmm_event_*.
 *
 * Locking: none; the driver orders records and queries of one event, and an
 * event is destroyed by one caller when no other uses it.  Calls the driver.
 * fork(): every call on an event of the parent's context fails, as for the
 * context's other objects; destroy frees the child's record only.
 */
#include "config.h"

#include <stdlib.h>

#include "internal/obj.h"

VMMX_API int vmmx_event_create(struct vmmx_ctx *ctx, struct vmmx_event **ev_p)
{
	struct vmmx_event *ev;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !ev_p)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_event_create: %s is NULL",
				  ctx ? "ev_p" : "ctx");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_event_create");
	ev = calloc(1, sizeof(*ev));
	if (!ev)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_event_create: out of memory");
	err = vmm_event_create(ctx->vmm, &ev->e);
	if (err)
		goto err_ev;
	ev->ctx = ctx;
	*ev_p = ev;
	return 0;

err_ev:
	free(ev);
	return err;
}

VMMX_API void vmmx_event_destroy(struct vmmx_event *ev)
{
	if (!ev)
		return;
	/* In a forked child the event is the parent's: forget it only. */
	if (!vmmx__inherited(ev->ctx) && vmm_event_destroy(ev->ctx->vmm, ev->e))
		vmmx__logf(&ev->ctx->conf.log, VMMX_LOG_WARN, "vmmx_event_destroy: %s",
			   vmmx_last_error());
	free(ev);
}

/*
 * The checks every call on an event starts with: a NULL event, then an
 * event of the parent's context in a forked child.  0 or the code to return.
 */
static int event_check(const struct vmmx_event *ev, const char *fn)
{
	vmmx__clear_last_error();
	if (!ev)
		return vmmx__fail(NULL, -VMMX_EINVAL, "%s: the event is NULL", fn);
	if (vmmx__inherited(ev->ctx))
		return vmmx__fail_inherited(ev->ctx, fn);
	return 0;
}

VMMX_API int vmmx_event_record(struct vmmx_event *ev, void *stream)
{
	int err = event_check(ev, "vmmx_event_record");

	return err ? err : vmm_event_record(ev->ctx->vmm, ev->e, (vmm_stream_t)(uintptr_t)stream);
}

VMMX_API int vmmx_event_query(struct vmmx_event *ev)
{
	int err = event_check(ev, "vmmx_event_query");

	/* -VMMX_EBUSY is the answer "not yet": the driver layer sets no message for it. */
	return err ? err : vmm_event_query(ev->ctx->vmm, ev->e);
}

VMMX_API int vmmx_event_sync(struct vmmx_event *ev)
{
	int err = event_check(ev, "vmmx_event_sync");

	return err ? err : vmm_event_sync(ev->ctx->vmm, ev->e);
}
