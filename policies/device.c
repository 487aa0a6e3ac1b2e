// SPDX-License-Identifier: MIT
/*
 * device - every chunk on one GPU, no fallback.
 *
 * Arguments: id=N  the device (default: the context's device).
 * A grow that does not fit fails with -VMMX_ENOMEM.
 */
#include "policies/args.h"

static int dev_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
	struct policy_arg a[4];
	int n = policy_args_parse(host, args, a, 4);
	long id = host->device;

	if (n < 0)
		return -VMMX_EINVAL;
	for (int i = 0; i < n; i++) {
		if (strcmp(a[i].key, "id"))
			return policy_unknown(host, &a[i], "id");
		id = policy_arg_long(host, &a[i], host->device_count(host) - 1);
		if (id < 0)
			return -VMMX_EINVAL;
	}
	/* The state is the device ordinal itself: nothing to allocate. */
	*state_p = (void *)(intptr_t)id;
	return 0;
}

static int dev_place(void *state, const struct vmmx_policy_request *req,
		     struct vmmx_policy_answer *ans)
{
	ans->locs[0] = (struct vmmx_loc){ VMMX_LOC_DEVICE, (int)(intptr_t)state };
	ans->nlocs = 1;
	return 0;
}

static const struct vmmx_policy_ops ops = {
	.abi_version = VMMX_POLICY_ABI,
	.size = sizeof(struct vmmx_policy_ops),
	.name = "device",
	.description = "every chunk on one GPU (id=N), no fallback",
	.init = dev_init,
	.fini = policy_fini_nothing,
	.place = dev_place,
};

const struct vmmx_policy_ops *VMMX_POLICY_BUILTIN(uint32_t core_abi)
{
	return VMMX_POLICY_ABI_MAJOR_OF(core_abi) == VMMX_POLICY_ABI_MAJOR ? &ops : NULL;
}
