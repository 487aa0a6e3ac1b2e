// SPDX-License-Identifier: MIT
/*
 * device-first - the Linux "sysmem fallback": chunks on the context's GPU
 * while it has room under its limit minus headroom, then in pinned host
 * memory.  The default policy, also compiled into libvmmx.
 *
 * Arguments:
 *   numa=N   fall back to host NUMA node N instead of any host memory (a
 *            node that does not exist is refused when the policy loads);
 *   peers=1  spill to the other GPUs before host memory: the context's GPU,
 *            then the others in ordinal order after it (N+1, N+2, ...,
 *            wrapping), then host.  Chunks on another GPU are mapped for the
 *            context's GPU through peer access (NVLink or PCIe peer-to-peer:
 *            far faster than host memory over PCIe); a GPU the context's
 *            GPU cannot reach is skipped by libvmmx as "not reachable".
 *            peers=0 (the default) never touches another GPU.
 *   reserve=SIZE  keep SIZE of the device's room for allocations smaller
 *            than large=: once placing a chunk of a buffer of at least
 *            large= (default 64MiB) bytes would leave less than SIZE, that
 *            chunk goes to host memory first (the device stays its
 *            fallback).  Under a framework's allocator a buffer is an
 *            allocation or a segment, so big tensors (weights) spill
 *            before the small, hot ones (activations, a GEMM's workspace)
 *            find the device full.  "Largest allocations to the host
 *            first" in its static form: nothing already placed moves.
 *            reserve=0 (the default) changes nothing.
 * Fallbacks are libvmmx's to count, log (VMMX_LOG=info) and trace.
 *
 * Why an option and not a policy of its own: it is the same decision
 * (nearest memory first, by a fixed order) with one more tier, and keeping
 * it in device-first makes it available in the built-in default, with no
 * plugin directory, as VMMX_POLICY=device-first:peers=1.
 */
#include <stdbool.h>

#include "policies/args.h"

struct df {
	struct vmmx_loc host;   /* the fallback after the GPUs */
	int peers;              /* rank the other GPUs before host */
	int ndev;               /* devices the context sees */
	uint64_t reserve;       /* device room kept for buffers under @large */
	uint64_t large;
};

#define DF_LARGE_DEFAULT ((uint64_t)64 << 20)

/* reserve= or large=: a size; large= must not be 0.  -VMMX_EINVAL after logging. */
static int df_size_arg(const struct vmmx_policy_host *host, const struct policy_arg *a,
		       uint64_t *out)
{
	if (host->parse_size(a->val, 0, out) || (!*out && !strcmp(a->key, "large"))) {
		host->log(host, VMMX_LOG_ERROR, "%s=%s: expected a size such as 512MiB%s", a->key,
			  a->val, strcmp(a->key, "large") ? "" : ", not 0");
		return -VMMX_EINVAL;
	}
	return 0;
}

static int df_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
	struct policy_arg a[4];
	int n = policy_args_parse(host, args, a, 4);
	long numa = -1, peers = 0;
	uint64_t reserve = 0, large = DF_LARGE_DEFAULT;
	struct df *st;

	if (n < 0)
		return -VMMX_EINVAL;
	for (int i = 0; i < n; i++) {
		long *dst;

		if (!strcmp(a[i].key, "reserve") || !strcmp(a[i].key, "large")) {
			if (df_size_arg(host, &a[i], strcmp(a[i].key, "large") ? &reserve : &large))
				return -VMMX_EINVAL;
			continue;
		}
		if (!strcmp(a[i].key, "numa"))
			dst = &numa;
		else if (!strcmp(a[i].key, "peers"))
			dst = &peers;
		else
			return policy_unknown(host, &a[i], "numa, peers, reserve, large");
		*dst = policy_arg_long(host, &a[i], dst == &peers ? 1 : 1023);
		if (*dst < 0)
			return -VMMX_EINVAL;
	}
	if (numa >= 0 && policy_numa_check(host, numa))
		return -VMMX_EINVAL;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -VMMX_ENOMEM;
	st->host = numa < 0 ? (struct vmmx_loc){ VMMX_LOC_HOST, 0 }
			    : (struct vmmx_loc){ VMMX_LOC_HOST_NUMA, (int)numa };
	st->peers = (int)peers;
	st->ndev = host->device_count(host);
	st->reserve = reserve;
	st->large = large;
	*state_p = st;
	return 0;
}

static void df_fini(void *state)
{
	free(state);
}

/* The room the request gives for the context's GPU; 0 if it gives none. */
static uint64_t df_device_room(const struct vmmx_policy_request *req)
{
	for (size_t i = 0; i < req->nroom; i++)
		if (req->room[i].loc.kind == VMMX_LOC_DEVICE && req->room[i].loc.id == req->device)
			return req->room[i].room;
	return 0;
}

/*
 * reserve=: a chunk of a large buffer may take the device's room only down
 * to the reserve.  Returns true when the chunk should go to host memory
 * first; otherwise caps it (@ans->max_len) so that the reserve stays.
 */
static bool df_keep_reserve(const struct df *st, const struct vmmx_policy_request *req,
			    struct vmmx_policy_answer *ans)
{
	uint64_t room;

	if (!st->reserve || req->buf_capacity < st->large)
		return false;
	room = df_device_room(req);
	/* Not room < reserve + chunk_min: a reserve near 2^64 would wrap. */
	if (room <= st->reserve || room - st->reserve < req->chunk_min)
		return true;
	if (req->want > room - st->reserve)
		ans->max_len = (size_t)(room - st->reserve) / req->chunk_min * req->chunk_min;
	return false;
}

static int df_place(void *state, const struct vmmx_policy_request *req,
		    struct vmmx_policy_answer *ans)
{
	const struct df *st = state;
	bool host_first = df_keep_reserve(st, req, ans);
	unsigned int n = 0;

	if (!host_first)
		ans->locs[n++] = (struct vmmx_loc){ VMMX_LOC_DEVICE, req->device };
	/* The neighbours in ordinal order after the context's GPU, leaving a
	 * rank for host memory (and one for the context's GPU after it). */
	for (int k = 1; st->peers && k < st->ndev && n < VMMX_POLICY_MAX_RANK - 1u - host_first;
	     k++)
		ans->locs[n++] = (struct vmmx_loc){ VMMX_LOC_DEVICE, (req->device + k) % st->ndev };
	ans->locs[n++] = st->host;
	/* Kept for the small ones, the reserve is still better than failing. */
	if (host_first)
		ans->locs[n++] = (struct vmmx_loc){ VMMX_LOC_DEVICE, req->device };
	ans->nlocs = n;
	return 0;
}

static const struct vmmx_policy_ops ops = {
	.abi_version = VMMX_POLICY_ABI,
	.size = sizeof(struct vmmx_policy_ops),
	.name = "device-first",
	.description = "the context's GPU while it has room (then the other GPUs with peers=1), "
		       "then pinned host memory",
	.init = df_init,
	.fini = df_fini,
	.place = df_place,
};

const struct vmmx_policy_ops *VMMX_POLICY_BUILTIN(uint32_t core_abi)
{
	return VMMX_POLICY_ABI_MAJOR_OF(core_abi) == VMMX_POLICY_ABI_MAJOR ? &ops : NULL;
}
