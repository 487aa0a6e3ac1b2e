// SPDX-License-Identifier: MIT
/*
 * device-first - the Linux "sysmem fallback": chunks on the context's GPU
 * while it has room under its limit minus headroom, then in pinned host
 * memory.  The default policy, also compiled into libvmmx.
 *
 * Arguments: numa=N  fall back to host NUMA node N instead of any host memory.
 * Fallbacks are libvmmx's to count, log (VMMX_LOG=info) and trace.
 */
#include "policies/args.h"

static int df_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
	struct policy_arg a[4];
	int n = policy_args_parse(host, args, a, 4);
	long numa = -1;

	if (n < 0)
		return -VMMX_EINVAL;
	for (int i = 0; i < n; i++) {
		if (strcmp(a[i].key, "numa"))
			return policy_unknown(host, &a[i], "numa");
		numa = policy_arg_long(host, &a[i], 1023);
		if (numa < 0)
			return -VMMX_EINVAL;
	}
	*state_p = (void *)(intptr_t)(numa + 1);
	return 0;
}

static int df_place(void *state, const struct vmmx_policy_request *req,
		    struct vmmx_policy_answer *ans)
{
	intptr_t node = (intptr_t)state - 1;

	ans->locs[0] = (struct vmmx_loc){ VMMX_LOC_DEVICE, req->device };
	ans->locs[1] = node < 0 ? (struct vmmx_loc){ VMMX_LOC_HOST, 0 }
				: (struct vmmx_loc){ VMMX_LOC_HOST_NUMA, (int)node };
	ans->nlocs = 2;
	return 0;
}

static const struct vmmx_policy_ops ops = {
	.abi_version = VMMX_POLICY_ABI,
	.size = sizeof(struct vmmx_policy_ops),
	.name = "device-first",
	.description = "the context's GPU while it has room, then pinned host memory",
	.init = df_init,
	.fini = policy_fini_nothing,
	.place = df_place,
};

const struct vmmx_policy_ops *VMMX_POLICY_BUILTIN(uint32_t core_abi)
{
	return VMMX_POLICY_ABI_MAJOR_OF(core_abi) == VMMX_POLICY_ABI_MAJOR ? &ops : NULL;
}
