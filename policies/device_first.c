// SPDX-License-Identifier: MIT
/*
 * device-first - the Linux "sysmem fallback": chunks on the context's GPU
 * while it has room under its limit minus headroom, then in pinned host
 * memory.  The default policy, also compiled into libvmmx.
 *
 * Arguments:
 *   numa=N   fall back to host NUMA node N instead of any host memory;
 *   peers=1  spill to the other GPUs before host memory: the context's GPU,
 *            then the others in ordinal order after it (N+1, N+2, ...,
 *            wrapping), then host.  Chunks on another GPU are mapped for the
 *            context's GPU through peer access (NVLink or PCIe peer-to-peer:
 *            far faster than host memory over PCIe); a GPU the context's
 *            GPU cannot reach is skipped by libvmmx as "not reachable".
 *            peers=0 (the default) never touches another GPU.
 * Fallbacks are libvmmx's to count, log (VMMX_LOG=info) and trace.
 *
 * Why an option and not a policy of its own: it is the same decision
 * (nearest memory first, by a fixed order) with one more tier, and keeping
 * it in device-first makes it available in the built-in default, with no
 * plugin directory, as VMMX_POLICY=device-first:peers=1.
 */
#include "policies/args.h"

struct df {
	struct vmmx_loc host;   /* the fallback after the GPUs */
	int peers;              /* rank the other GPUs before host */
	int ndev;               /* devices the context sees */
};

static int df_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
	struct policy_arg a[4];
	int n = policy_args_parse(host, args, a, 4);
	long numa = -1, peers = 0;
	struct df *st;

	if (n < 0)
		return -VMMX_EINVAL;
	for (int i = 0; i < n; i++) {
		long *dst;

		if (!strcmp(a[i].key, "numa"))
			dst = &numa;
		else if (!strcmp(a[i].key, "peers"))
			dst = &peers;
		else
			return policy_unknown(host, &a[i], "numa, peers");
		*dst = policy_arg_long(host, &a[i], dst == &peers ? 1 : 1023);
		if (*dst < 0)
			return -VMMX_EINVAL;
	}
	st = calloc(1, sizeof(*st));
	if (!st)
		return -VMMX_ENOMEM;
	st->host = numa < 0 ? (struct vmmx_loc){ VMMX_LOC_HOST, 0 }
			    : (struct vmmx_loc){ VMMX_LOC_HOST_NUMA, (int)numa };
	st->peers = (int)peers;
	st->ndev = host->device_count(host);
	*state_p = st;
	return 0;
}

static void df_fini(void *state)
{
	free(state);
}

static int df_place(void *state, const struct vmmx_policy_request *req,
		    struct vmmx_policy_answer *ans)
{
	const struct df *st = state;
	unsigned int n = 0;

	ans->locs[n++] = (struct vmmx_loc){ VMMX_LOC_DEVICE, req->device };
	/* The neighbours in ordinal order after the context's GPU, leaving a
	 * rank for host memory. */
	for (int k = 1; st->peers && k < st->ndev && n < VMMX_POLICY_MAX_RANK - 1; k++)
		ans->locs[n++] = (struct vmmx_loc){ VMMX_LOC_DEVICE, (req->device + k) % st->ndev };
	ans->locs[n++] = st->host;
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
