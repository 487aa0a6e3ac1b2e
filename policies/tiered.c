// SPDX-License-Identifier: MIT
/*
 * tiered - the first part of every buffer on the GPU, the rest in pinned
 * host memory: for data whose head is hot (a KV cache's recent blocks, the
 * first layers of a model) and whose tail is cold.
 *
 * Arguments: hot=SIZE  bytes at the front of each buffer that go on the
 *                      GPU (4GiB), or hot=N% of the buffer's capacity.
 * Default hot=50%.  Each side falls back to the other when full.
 */
#include "policies/args.h"

struct tiered {
	uint64_t hot;       /* bytes, or percent when @pct */
	int pct;
};

static int tiered_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
	struct policy_arg a[4];
	int n = policy_args_parse(host, args, a, 4);
	struct tiered *st;

	if (n < 0)
		return -VMMX_EINVAL;
	st = malloc(sizeof(*st));
	if (!st)
		return -VMMX_ENOMEM;
	*st = (struct tiered){ .hot = 50, .pct = 1 };
	for (int i = 0; i < n; i++) {
		size_t len = strlen(a[i].val);

		if (strcmp(a[i].key, "hot")) {
			free(st);
			return policy_unknown(host, &a[i], "hot");
		}
		st->pct = len > 1 && a[i].val[len - 1] == '%';
		/* N% parsed against 100 gives N itself. */
		if (host->parse_size(a[i].val, st->pct ? 100 : 0, &st->hot)) {
			host->log(host, VMMX_LOG_ERROR, "hot=%s: expected a size (4GiB) or N%% of the buffer",
				  a[i].val);
			free(st);
			return -VMMX_EINVAL;
		}
	}
	*state_p = st;
	return 0;
}

static void tiered_fini(void *state)
{
	free(state);
}

static int tiered_place(void *state, const struct vmmx_policy_request *req,
			struct vmmx_policy_answer *ans)
{
	const struct tiered *st = state;
	uint64_t hot = st->pct ? req->buf_capacity / 100 * st->hot +
					 req->buf_capacity % 100 * st->hot / 100
			       : st->hot;
	struct vmmx_loc dev = { VMMX_LOC_DEVICE, req->device }, host = { VMMX_LOC_HOST, 0 };

	if (req->offset < hot) {
		ans->locs[0] = dev;
		ans->locs[1] = host;
		/* Stop the chunk at the tier boundary (libvmmx rounds to chunk_min). */
		ans->max_len = hot - req->offset < req->chunk_min ? req->chunk_min : hot - req->offset;
	} else {
		ans->locs[0] = host;
		ans->locs[1] = dev;
	}
	ans->nlocs = 2;
	return 0;
}

static const struct vmmx_policy_ops ops = {
	.abi_version = VMMX_POLICY_ABI,
	.size = sizeof(struct vmmx_policy_ops),
	.name = "tiered",
	.description = "the first hot=SIZE|N% of each buffer on the GPU, the rest on host",
	.init = tiered_init,
	.fini = tiered_fini,
	.place = tiered_place,
};

const struct vmmx_policy_ops *VMMX_POLICY_BUILTIN(uint32_t core_abi)
{
	return VMMX_POLICY_ABI_MAJOR_OF(core_abi) == VMMX_POLICY_ABI_MAJOR ? &ops : NULL;
}
