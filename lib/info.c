// SPDX-License-Identifier: MIT
/*
 * info.c - what a machine offers, for vmmx-info and experiments: each
 * device's memory, attributes, granularities and peers (vmmx_device_info),
 * and every policy a context could load, refused files included with the
 * loader's reason (vmmx_policy_list, over policy.c's vmmx__policy_scan so
 * that listing and loading can never disagree).
 *
 * Locking: none.  Everything read is either read-only after the context's
 * creation or a driver query; the answers are snapshots.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal/addr.h"

/* An attribute, or -1 when the driver does not answer (an old driver may
 * not know a newer attribute: that is not worth failing the whole call). */
static int attr_or_unknown(struct vmmx_ctx *ctx, int device, enum vmm_attr a)
{
	int val;

	return vmm_attr(ctx->vmm, device, a, &val) ? -1 : val;
}

VMMX_API int vmmx_device_info(struct vmmx_ctx *ctx, int device, struct vmmx_device_info *info)
{
	struct vmmx_device_info out;
	struct vmm_info vi;
	size_t n;
	int err;

	vmmx__clear_last_error();
	if (!ctx || !info || info->size < offsetof(struct vmmx_device_info, name))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL,
				  "vmmx_device_info: NULL argument or info->size not set");
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_device_info");
	err = vmm_query(ctx->vmm, &vi);
	if (err)
		return err;
	if (device < 0 || device >= vi.device_count || device >= VMMX__MAX_DEVICES)
		return vmmx__fail(&ctx->conf.log, -VMMX_ENODEV,
				  "vmmx_device_info: no device %d (the %s backend has %d%s)", device,
				  vi.backend, vi.device_count,
				  vi.device_count > VMMX__MAX_DEVICES ? ", libvmmx handles 16" : "");

	memset(&out, 0, sizeof(out));
	out.ordinal = device;
	/* Any device is named (no context needed); a name is not worth failing for. */
	if (vmm_device_name(ctx->vmm, device, out.name, sizeof(out.name)))
		out.name[0] = '\0';
	err = vmm_mem_info(ctx->vmm, (struct vmmx_loc){ VMMX_LOC_DEVICE, device }, &out.free,
			   &out.total);
	if (err)
		return err;
	out.compute_major = attr_or_unknown(ctx, device, VMM_ATTR_COMPUTE_MAJOR);
	out.compute_minor = attr_or_unknown(ctx, device, VMM_ATTR_COMPUTE_MINOR);
	out.sm_count = attr_or_unknown(ctx, device, VMM_ATTR_SM_COUNT);
	out.vmm = attr_or_unknown(ctx, device, VMM_ATTR_VMM);
	out.host_vmm = attr_or_unknown(ctx, device, VMM_ATTR_HOST_VMM);
	out.host_numa_vmm = attr_or_unknown(ctx, device, VMM_ATTR_HOST_NUMA_VMM);
	out.host_numa_id = attr_or_unknown(ctx, device, VMM_ATTR_HOST_NUMA_ID);
	out.host_register = attr_or_unknown(ctx, device, VMM_ATTR_HOST_REGISTER);
	out.host_pointer_for_registered =
		attr_or_unknown(ctx, device, VMM_ATTR_HOST_POINTER_FOR_REGISTERED);
	out.pageable_access = attr_or_unknown(ctx, device, VMM_ATTR_PAGEABLE_ACCESS);
	out.pageable_host_page_tables =
		attr_or_unknown(ctx, device, VMM_ATTR_PAGEABLE_HOST_PAGE_TABLES);
	out.posix_fd = attr_or_unknown(ctx, device, VMM_ATTR_POSIX_FD);
	out.concurrent_managed = attr_or_unknown(ctx, device, VMM_ATTR_CONCURRENT_MANAGED);
	out.unified_addressing = attr_or_unknown(ctx, device, VMM_ATTR_UNIFIED_ADDRESSING);
	out.gpu_direct_rdma_vmm = attr_or_unknown(ctx, device, VMM_ATTR_GPU_DIRECT_RDMA_VMM);
	/* Unknown granularities stay 0: a device without VMM has none. */
	if (vmm_granularity(ctx->vmm, (struct vmmx_loc){ VMMX_LOC_DEVICE, device },
			    &out.granularity_device))
		out.granularity_device = 0;
	if (vmm_granularity(ctx->vmm, (struct vmmx_loc){ VMMX_LOC_HOST, 0 }, &out.granularity_host))
		out.granularity_host = 0;
	for (int p = 0; p < vi.device_count && p < VMMX__MAX_DEVICES; p++) {
		int can = 0;

		/* An unanswered peer query means no peer access we could rely on. */
		if (p != device && !vmm_can_access_peer(ctx->vmm, device, p, &can) && can)
			out.peers[out.peer_count++] = p;
	}
	/* The context's own view of the device. */
	out.usable = device < ctx->ndev && ctx->peer[device];
	out.limit = device < ctx->ndev ? ctx->limit[device] : UINT64_MAX;
	out.headroom = device < ctx->ndev ? ctx->headroom[device] : 0;
	out.held = device < ctx->ndev ? __atomic_load_n(&ctx->held[device], __ATOMIC_RELAXED) : 0;
	/* Attributes the driver did not answer set the last error on the way. */
	vmmx__clear_last_error();
	n = info->size < sizeof(out) ? info->size : sizeof(out);
	out.size = info->size;
	memcpy(info, &out, n);
	return 0;
}

/* ---- policies ---- */

struct list_state {
	struct vmmx_policy_info *v;
	size_t n, cap;
};

/* Copy @s into @dst of @len bytes; a longer text keeps its head and ends in "...". */
static void copy_head(char *dst, size_t len, const char *s)
{
	if ((size_t)snprintf(dst, len, "%s", s) >= len && len > 4)
		memcpy(dst + len - 4, "...", 4);
}

/* A path too long for @dst is shown by its end, which names the file. */
static void copy_tail(char *dst, size_t len, const char *s)
{
	size_t n = strlen(s);

	if (n < len)
		memcpy(dst, s, n + 1);
	else
		snprintf(dst, len, "...%s", s + n - (len - 4));
}

static int list_one(void *arg, const struct vmmx__policy_file *f)
{
	struct list_state *st = arg;
	struct vmmx_policy_info *e;

	if (st->n == st->cap) {
		size_t cap = st->cap ? 2 * st->cap : 16;
		struct vmmx_policy_info *v = realloc(st->v, cap * sizeof(*v));

		if (!v)
			return -VMMX_ENOMEM;
		st->v = v;
		st->cap = cap;
	}
	e = &st->v[st->n++];
	memset(e, 0, sizeof(*e));
	snprintf(e->name, sizeof(e->name), "%s", f->name);
	copy_tail(e->file, sizeof(e->file), f->path);
	e->usable = !f->why;
	if (f->why)
		copy_head(e->why, sizeof(e->why), f->why);
	if (f->ops) {
		e->abi = f->ops->abi_version;
		/* Read past the header only when the table has this layout. */
		if (VMMX_POLICY_ABI_MAJOR_OF(f->ops->abi_version) == VMMX_POLICY_ABI_MAJOR &&
		    f->ops->size >= VMMX_POLICY_SIZE_THROUGH(struct vmmx_policy_ops, description) &&
		    f->ops->description)
			copy_head(e->description, sizeof(e->description), f->ops->description);
	}
	if (e->usable) {
		/* The loader takes the first usable one of a name: say so of later ones. */
		for (size_t i = 0; i + 1 < st->n; i++) {
			if (st->v[i].usable && !strcmp(st->v[i].name, e->name)) {
				char why[sizeof(e->file) + 16];

				snprintf(why, sizeof(why), "hidden by %s", st->v[i].file);
				copy_head(e->why, sizeof(e->why), why);
				break;
			}
		}
	}
	return 0;
}

VMMX_API int vmmx_policy_list(struct vmmx_ctx *ctx, struct vmmx_policy_info *out, size_t max,
			      size_t *count_p)
{
	struct list_state st = { NULL, 0, 0 };
	int err;

	vmmx__clear_last_error();
	if (!ctx || !count_p || (!out && max))
		return vmmx__fail(vmmx__ctx_log(ctx), -VMMX_EINVAL,
				  "vmmx_policy_list: NULL ctx or count_p, or NULL out with max %zu",
				  max);
	if (vmmx__inherited(ctx))
		return vmmx__fail_inherited(ctx, "vmmx_policy_list");
	err = vmmx__policy_scan(ctx, list_one, &st);
	if (err) {
		free(st.v);
		if (err == -VMMX_ENOMEM)
			return vmmx__fail(&ctx->conf.log, err, "vmmx_policy_list: out of memory");
		return err;
	}
	/* Written only now, so that a failure leaves @out as it was. */
	if (st.n && max)
		memcpy(out, st.v, (st.n < max ? st.n : max) * sizeof(*out));
	*count_p = st.n;
	free(st.v);
	return 0;
}
