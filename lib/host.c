// SPDX-License-Identifier: MIT
/*
 * host.c - ordinary (malloc'd) host memory made GPU-visible.
 *
 * Two paths, chosen once per context from the device's attributes:
 *  - pageable access (HMM, or ATS where the GPU walks the host's page
 *    tables): kernels may touch any host address; the pointer is used as
 *    is and nothing is pinned;
 *  - registration: cuMemHostRegister pins the range and maps it for the
 *    device; the device pointer is returned (the same address where the
 *    device can use host pointers for registered memory, as on Hopper).
 * The project's H100/H200 machines have no HMM (kernel without
 * CONFIG_DEVICE_PRIVATE), so registration is the path that runs there.
 *
 * Rules, the same on both paths so programs behave alike everywhere:
 *  - a range may be registered while no registration shares a page with it
 *    (the driver pins whole pages): -VMMX_EEXIST otherwise, naming the
 *    registration in the way; registering exactly the same range again
 *    counts a reference and returns the same device pointer;
 *  - unregister takes the base pointer given to register: an address inside
 *    a registration is -VMMX_EINVAL (partial unregistering does not exist),
 *    an unknown one -VMMX_ENOENT; the last reference unregisters;
 *  - ranges need no alignment; memory inside a libvmmx buffer is refused
 *    (-VMMX_EINVAL: it is GPU-visible already);
 *  - vmmx_ctx_destroy unregisters what is left, with a warning.
 *
 * Locking: ctx->reg_lock protects the list and is held across the driver
 * call, so the overlap check and the registration are one step.
 */
#include "config.h"

#include <stdlib.h>
#include <unistd.h>

#include "internal/obj.h"

struct vmmx__reg {
	struct vmmx__reg *next;
	uintptr_t base;
	size_t len;
	uintptr_t page_lo, page_hi;    /* pages the range touches: [lo, hi) */
	void *dptr;
	unsigned int refs;
};

static size_t page_size(void)
{
	long p = sysconf(_SC_PAGESIZE);

	return p > 0 ? (size_t)p : 4096;
}

void vmmx__host_setup(struct vmmx_ctx *ctx)
{
	int pageable = 0, tables = 0;

	/* No figure means no pageable access: registration always works. */
	if (vmm_attr(ctx->vmm, ctx->device, VMM_ATTR_PAGEABLE_ACCESS, &pageable))
		pageable = 0;
	if (pageable && vmm_attr(ctx->vmm, ctx->device, VMM_ATTR_PAGEABLE_HOST_PAGE_TABLES, &tables))
		tables = 0;
	ctx->host_access = !pageable ? VMMX_HOST_ACCESS_REGISTER
			   : tables  ? VMMX_HOST_ACCESS_ATS
				     : VMMX_HOST_ACCESS_HMM;
}

const char *vmmx__host_access_name(int access)
{
	switch (access) {
	case VMMX_HOST_ACCESS_HMM:
		return "hmm";
	case VMMX_HOST_ACCESS_ATS:
		return "ats";
	default:
		return "register";
	}
}

VMMX_API int vmmx_host_register(struct vmmx_ctx *ctx, void *ptr, size_t len, void **dptr_p)
{
	uintptr_t p = (uintptr_t)ptr, ps = page_size(), lo, hi;
	struct vmmx__reg *r;
	void *dptr;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !ptr || !len || !dptr_p || p + len < p)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL,
				  "vmmx_host_register: NULL argument, zero length or a range that wraps");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_host_register");
	lo = p / ps * ps;
	hi = (p + len + ps - 1) / ps * ps;
	urcu_bp_read_lock();
	for (uintptr_t a = p; a < p + len;) {
		struct vmmx_buf *b = vmmx__ctx_find_buf(ctx, a);
		uintptr_t base = b ? b->base : 0;

		if (b) {
			urcu_bp_read_unlock();
			return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
					  "vmmx_host_register: [%p, +%zu) overlaps libvmmx buffer %p, which is GPU-visible already",
					  ptr, len, (void *)base);
		}
		/* Only the start of each buffer can be inside the range: jump there. */
		{
			struct vmmx__buflist *l = rcu_dereference(ctx->bufs);
			uintptr_t next = UINTPTR_MAX;

			for (size_t i = 0; i < l->n; i++)
				if (l->bufs[i]->base > a && l->bufs[i]->base < next)
					next = l->bufs[i]->base;
			a = next;
		}
	}
	urcu_bp_read_unlock();

	pthread_mutex_lock(&ctx->reg_lock);
	for (r = ctx->regs; r; r = r->next) {
		if (r->base == p && r->len == len) {
			r->refs++;
			*dptr_p = r->dptr;
			pthread_mutex_unlock(&ctx->reg_lock);
			return 0;
		}
		if (lo < r->page_hi && r->page_lo < hi) {
			err = vmmx__fail(&ctx->conf.log, -VMMX_EEXIST,
					 "vmmx_host_register: [%p, +%zu) shares pages with the registration of [%p, +%zu)",
					 ptr, len, (void *)r->base, r->len);
			pthread_mutex_unlock(&ctx->reg_lock);
			return err;
		}
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		pthread_mutex_unlock(&ctx->reg_lock);
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "vmmx_host_register: out of memory");
	}
	if (ctx->host_access == VMMX_HOST_ACCESS_REGISTER) {
		err = vmm_host_register(ctx->vmm, ptr, len, &dptr);
		if (err) {
			pthread_mutex_unlock(&ctx->reg_lock);
			free(r);
			return err;
		}
	} else {
		dptr = ptr; /* the GPU reaches pageable memory as it is */
	}
	*r = (struct vmmx__reg){ .next = ctx->regs, .base = p, .len = len, .page_lo = lo,
				 .page_hi = hi, .dptr = dptr, .refs = 1 };
	ctx->regs = r;
	__atomic_fetch_add(&ctx->reg_count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ctx->reg_bytes, len, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&ctx->reg_lock);
	*dptr_p = dptr;
	return 0;
}

/* Drop one registration from the list and the driver; reg_lock held. */
static int drop(struct vmmx_ctx *ctx, struct vmmx__reg **pp)
{
	struct vmmx__reg *r = *pp;
	int err = 0;

	if (ctx->host_access == VMMX_HOST_ACCESS_REGISTER)
		err = vmm_host_unregister(ctx->vmm, (void *)r->base);
	if (err)
		return err; /* still registered: keep the record */
	*pp = r->next;
	__atomic_fetch_sub(&ctx->reg_count, 1, __ATOMIC_RELAXED);
	__atomic_fetch_sub(&ctx->reg_bytes, r->len, __ATOMIC_RELAXED);
	free(r);
	return 0;
}

VMMX_API int vmmx_host_unregister(struct vmmx_ctx *ctx, void *ptr)
{
	uintptr_t p = (uintptr_t)ptr;
	struct vmmx__reg **pp;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !ptr)
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL, "vmmx_host_unregister: NULL argument");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_host_unregister");
	pthread_mutex_lock(&ctx->reg_lock);
	for (pp = &ctx->regs; *pp; pp = &(*pp)->next) {
		struct vmmx__reg *r = *pp;

		if (r->base == p) {
			err = --r->refs ? 0 : drop(ctx, pp);
			if (err)
				r->refs++;
			pthread_mutex_unlock(&ctx->reg_lock);
			return err;
		}
		if (p > r->base && p < r->base + r->len) {
			err = vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
					 "vmmx_host_unregister: %p is inside the registration of [%p, +%zu): unregister its base (partial unregistering is not supported)",
					 ptr, (void *)r->base, r->len);
			pthread_mutex_unlock(&ctx->reg_lock);
			return err;
		}
	}
	pthread_mutex_unlock(&ctx->reg_lock);
	return vmmx__fail(&ctx->conf.log, -VMMX_ENOENT, "vmmx_host_unregister: %p is not registered",
			  ptr);
}

void vmmx__host_teardown(struct vmmx_ctx *ctx)
{
	pthread_mutex_lock(&ctx->reg_lock);
	while (ctx->regs) {
		struct vmmx__reg *r = ctx->regs;

		vmmx__logf(&ctx->conf.log, VMMX_LOG_WARN,
			   "vmmx_ctx_destroy: host range [%p, +%zu) still registered; unregistering it",
			   (void *)r->base, r->len);
		if (drop(ctx, &ctx->regs)) {
			/* The driver refuses: forget the record, the context is going. */
			ctx->regs = r->next;
			free(r);
		}
	}
	pthread_mutex_unlock(&ctx->reg_lock);
}

void vmmx__host_abandon(struct vmmx_ctx *ctx)
{
	struct vmmx__reg *r;

	/* In a forked child: the registrations are the parent's; forget the records. */
	while ((r = ctx->regs)) {
		ctx->regs = r->next;
		free(r);
	}
}
