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
	return policy_numa_state(host, args, state_p);
}

static int df_place(void *state, const struct vmmx_policy_request *req,
		    struct vmmx_policy_answer *ans)
{
	ans->locs[0] = (struct vmmx_loc){ VMMX_LOC_DEVICE, req->device };
	ans->locs[1] = policy_numa_loc(state);
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
