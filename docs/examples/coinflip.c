// SPDX-License-Identifier: MIT
/*
 * coinflip - an example external placement policy for libvmmx.
 *
 * Each unit of a buffer goes to the GPU with probability p, else to host
 * memory, decided by a hash of (buffer, offset, seed) so the same buffer
 * lays out the same way every run.  It shows what a policy needs: one
 * exported entry point, an ops table that starts with abi_version and size,
 * arguments parsed in init, host services for logging and counters, and an
 * optional member (buf_event) guarded by the table's size.
 *
 * Build (outside the libvmmx tree):
 *   cc -shared -fPIC -fvisibility=hidden $(pkg-config --cflags libvmmx) \
 *      -o vmmx_policy_coinflip.so coinflip.c
 * Use:
 *   VMMX_POLICY_PATH=$PWD VMMX_POLICY=coinflip:p=25,seed=7 ./my-program
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vmmx/policy.h>

struct coinflip {
	const struct vmmx_policy_host *host;
	unsigned int p;         /* percent of units on the GPU */
	unsigned long seed;
};

static int parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;

	if (*s < '0' || *s > '9')
		return -1;
	*out = strtoul(s, &end, 10);
	return *end || *out > max ? -1 : 0;
}

static int coinflip_init(const struct vmmx_policy_host *host, const char *args, void **state_p)
{
	struct coinflip *st = calloc(1, sizeof(*st));
	char buf[256], *save = NULL;

	if (!st)
		return -VMMX_ENOMEM;
	st->host = host;
	st->p = 50;
	snprintf(buf, sizeof(buf), "%s", args);
	for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(kv, '=');
		unsigned long v;

		if (eq)
			*eq++ = '\0';
		if (eq && !strcmp(kv, "p") && !parse_uint(eq, 100, &v)) {
			st->p = (unsigned int)v;
		} else if (eq && !strcmp(kv, "seed") && !parse_uint(eq, ~0ul, &v)) {
			st->seed = v;
		} else {
			host->log(host, VMMX_LOG_ERROR,
				  "bad argument \"%s\": expected p=0..100 or seed=N", kv);
			free(st);
			return -VMMX_EINVAL;
		}
	}
	*state_p = st;
	return 0;
}

static void coinflip_fini(void *state)
{
	free(state);
}

static uint64_t mix(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}

static int coinflip_place(void *state, const struct vmmx_policy_request *req,
			  struct vmmx_policy_answer *ans)
{
	struct coinflip *st = state;
	uint64_t unit = req->offset / req->chunk_min;
	int gpu = mix(req->buf_id * 1000003u ^ unit ^ mix(st->seed)) % 100 < st->p;
	struct vmmx_loc dev = { VMMX_LOC_DEVICE, req->device }, host = { VMMX_LOC_HOST, 0 };

	ans->locs[0] = gpu ? dev : host;
	ans->locs[1] = gpu ? host : dev;
	ans->nlocs = 2;
	ans->max_len = req->chunk_min;      /* one coin per unit */
	st->host->counter_add(st->host, gpu ? "gpu_picks" : "host_picks", 1);
	return 0;
}

static void coinflip_buf_event(void *state, uint64_t buf_id, size_t capacity, int created)
{
	struct coinflip *st = state;

	st->host->counter_add(st->host, created ? "buffers_created" : "buffers_destroyed", 1);
}

static const struct vmmx_policy_ops ops = {
	.abi_version = VMMX_POLICY_ABI,
	.size = sizeof(struct vmmx_policy_ops),
	.name = "coinflip",
	.description = "each unit on the GPU with probability p (example policy)",
	.init = coinflip_init,
	.fini = coinflip_fini,
	.place = coinflip_place,
	.buf_event = coinflip_buf_event,
};

const struct vmmx_policy_ops *vmmx_policy_entry(uint32_t core_abi)
{
	return VMMX_POLICY_ABI_MAJOR_OF(core_abi) == VMMX_POLICY_ABI_MAJOR ? &ops : NULL;
}
