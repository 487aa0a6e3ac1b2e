// SPDX-License-Identifier: MIT
/*
 * host - every chunk in pinned host memory: the GPU reads it over the
 * interconnect, the CPU through the same address.
 *
 * Arguments: numa=N  put chunks on host NUMA node N (HOST_NUMA location).
 */
#include "policies/args.h"

static int host_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
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
	/* State: the NUMA node plus one (0 means plain HOST). */
	*state_p = (void *)(intptr_t)(numa + 1);
	return 0;
}

static int host_place(void *state, const struct vmmx_policy_request *req,
		      struct vmmx_policy_answer *ans)
{
	intptr_t node = (intptr_t)state - 1;

	ans->locs[0] = node < 0 ? (struct vmmx_loc){ VMMX_LOC_HOST, 0 }
				: (struct vmmx_loc){ VMMX_LOC_HOST_NUMA, (int)node };
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
