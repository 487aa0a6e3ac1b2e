// SPDX-License-Identifier: MIT
/*
 * host - every chunk in pinned host memory: the GPU reads it over the
 * interconnect, the CPU through the same address.
 *
 * Arguments: numa=N  put chunks on host NUMA node N (HOST_NUMA location);
 *            a node that does not exist is refused when the policy loads.
 */
#include "policies/args.h"

static int host_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
	return policy_numa_state(host, args, state_p);
}

static int host_place(void *state, const struct vmmx_policy_request *req,
		      struct vmmx_policy_answer *ans)
{
	ans->locs[0] = policy_numa_loc(state);
	ans->nlocs = 1;
	return 0;
}

static const struct vmmx_policy_ops ops = {
	.abi_version = VMMX_POLICY_ABI,
	.size = sizeof(struct vmmx_policy_ops),
	.name = "host",
	.description = "every chunk in pinned host memory (numa=N for one node)",
	.init = host_init,
	.fini = policy_fini_nothing,
	.place = host_place,
};

const struct vmmx_policy_ops *VMMX_POLICY_BUILTIN(uint32_t core_abi)
{
	return VMMX_POLICY_ABI_MAJOR_OF(core_abi) == VMMX_POLICY_ABI_MAJOR ? &ops : NULL;
}
