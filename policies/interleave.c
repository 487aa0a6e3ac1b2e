// SPDX-License-Identifier: MIT
/*
 * interleave - chunks dealt out by weight across the GPUs and host memory,
 * in fixed units, so that bandwidth-bound kernels read from every
 * location at once.
 *
 * Arguments (all optional):
 *   device=W   weight of every GPU (default 1)
 *   deviceN=W  weight of GPU N, overriding device=W
 *   host=W     weight of pinned host memory (default 0)
 *   unit=SIZE  bytes per turn (default: the chunk minimum; rounded down to it)
 * Example: interleave:device=3,host=1 puts 3 units on the GPU, then 1 on
 * host, and so on.  A location that is full passes its turn to the others,
 * heaviest first.
 */
#include "policies/args.h"

#define MAX_DEV 16

struct il {
	unsigned int w[MAX_DEV + 1];    /* weights: devices, then host */
	unsigned int total;
	int ndev;
	uint64_t unit;
};

static struct vmmx_loc loc_of(int i, int ndev)
{
	return i < ndev ? (struct vmmx_loc){ VMMX_LOC_DEVICE, i } : (struct vmmx_loc){ VMMX_LOC_HOST, 0 };
}

static int il_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
	struct policy_arg a[MAX_DEV + 4];
	int n = policy_args_parse(host, args, a, MAX_DEV + 4);
	long dev_w = 1, host_w = 0, w;
	long over[MAX_DEV];
	struct il *st;

	if (n < 0)
		return -VMMX_EINVAL;
	for (int i = 0; i < MAX_DEV; i++)
		over[i] = -1;
	st = calloc(1, sizeof(*st));
	if (!st)
		return -VMMX_ENOMEM;
	st->ndev = host->device_count(host) < MAX_DEV ? host->device_count(host) : MAX_DEV;
	for (int i = 0; i < n; i++) {
		if (!strcmp(a[i].key, "unit")) {
			if (host->parse_size(a[i].val, 0, &st->unit) || !st->unit) {
				host->log(host, VMMX_LOG_ERROR, "unit=%s: expected a nonzero size such as 2MiB",
					  a[i].val);
				goto err;
			}
			continue;
		}
		w = -1;
		if (!strcmp(a[i].key, "device") || !strcmp(a[i].key, "host") ||
		    !strncmp(a[i].key, "device", 6))
			w = policy_arg_long(host, &a[i], 1000);
		else {
			policy_unknown(host, &a[i], "device, deviceN, host, unit");
			goto err;
		}
		if (w < 0)
			goto err;
		if (!strcmp(a[i].key, "device")) {
			dev_w = w;
		} else if (!strcmp(a[i].key, "host")) {
			host_w = w;
		} else {
			char *end;
			long d = strtol(a[i].key + 6, &end, 10);

			if (*end || a[i].key[6] < '0' || a[i].key[6] > '9' || d >= st->ndev) {
				host->log(host, VMMX_LOG_ERROR, "%s: no such device (there are %d)",
					  a[i].key, st->ndev);
				goto err;
			}
			over[d] = w;
		}
	}
	for (int d = 0; d < st->ndev; d++)
		st->total += st->w[d] = (unsigned int)(over[d] >= 0 ? over[d] : dev_w);
	st->total += st->w[st->ndev] = (unsigned int)host_w;
	if (!st->total) {
		host->log(host, VMMX_LOG_ERROR, "every weight is 0");
		goto err;
	}
	*state_p = st;
	return 0;
err:
	free(st);
	return -VMMX_EINVAL;
}

static void il_fini(void *state)
{
	free(state);
}

static int il_place(void *state, const struct vmmx_policy_request *req,
		    struct vmmx_policy_answer *ans)
{
	const struct il *st = state;
	/* Units are whole minimum chunks (the header's promise). */
	uint64_t unit = st->unit / req->chunk_min * req->chunk_min;
	uint64_t turn;

	if (!unit)
		unit = req->chunk_min;
	turn = (req->offset / unit) % st->total;
	int first = 0, order[MAX_DEV + 1], n = 0;

	/* Whose turn: walk the weights. */
	for (int i = 0; i <= st->ndev; i++) {
		if (turn < st->w[i]) {
			first = i;
			break;
		}
		turn -= st->w[i];
	}
	/* Then every other location with a weight, heaviest first. */
	order[n++] = first;
	for (int i = 0; i <= st->ndev; i++)
		if (i != first && st->w[i])
			order[n++] = i;
	for (int i = 2; i < n; i++)
		for (int j = i; j > 1 && st->w[order[j]] > st->w[order[j - 1]]; j--) {
			int t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	for (int i = 0; i < n && i < VMMX_POLICY_MAX_RANK; i++)
		ans->locs[ans->nlocs++] = loc_of(order[i], st->ndev);
	ans->max_len = unit - req->offset % unit;
	return 0;
}

static const struct vmmx_policy_ops ops = {
	.abi_version = VMMX_POLICY_ABI,
	.size = sizeof(struct vmmx_policy_ops),
	.name = "interleave",
	.description = "units dealt out by weight across GPUs and host (device=3,host=1)",
	.init = il_init,
	.fini = il_fini,
	.place = il_place,
};

const struct vmmx_policy_ops *VMMX_POLICY_BUILTIN(uint32_t core_abi)
{
	return VMMX_POLICY_ABI_MAJOR_OF(core_abi) == VMMX_POLICY_ABI_MAJOR ? &ops : NULL;
}
