/* SPDX-License-Identifier: MIT */
/*
 * args.h - argument parsing shared by the shipped policies ("key=val,...").
 * Header-only so that each plugin stays one self-contained shared object.
 */
#ifndef VMMX_POLICIES_ARGS_H
#define VMMX_POLICIES_ARGS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx/policy.h"

struct policy_arg {
	char key[32];
	char val[96];
};

/*
 * Split @args into at most @max key=value pairs.  Returns the count, or -1
 * after logging (through @host) which piece is malformed.
 */
static inline int policy_args_parse(const struct vmmx_policy_host *host, const char *args,
				    struct policy_arg *out, int max)
{
	int n = 0;

	while (*args) {
		const char *comma = strchr(args, ','), *eq = strchr(args, '=');
		size_t len = comma ? (size_t)(comma - args) : strlen(args);

		if (!eq || eq > args + len || eq == args || (size_t)(eq - args) >= sizeof(out->key) ||
		    len - (size_t)(eq - args) - 1 >= sizeof(out->val) || n == max) {
			host->log(host, VMMX_LOG_ERROR, "argument \"%.*s\": expected key=value%s",
				  (int)len, args, n == max ? " (too many arguments)" : "");
			return -1;
		}
		snprintf(out[n].key, sizeof(out[n].key), "%.*s", (int)(eq - args), args);
		snprintf(out[n].val, sizeof(out[n].val), "%.*s", (int)(len - (size_t)(eq - args) - 1),
			 eq + 1);
		n++;
		args += len;
		if (*args == ',' && !*++args) {
			host->log(host, VMMX_LOG_ERROR, "trailing ',' in the arguments");
			return -1;
		}
	}
	return n;
}

/* A non-negative decimal integer up to @max; -1 after logging when it is not. */
static inline long policy_arg_long(const struct vmmx_policy_host *host, const struct policy_arg *a,
				   long max)
{
	char *end;
	long v;

	if (a->val[0] < '0' || a->val[0] > '9' || (v = strtol(a->val, &end, 10), *end) || v > max) {
		host->log(host, VMMX_LOG_ERROR, "%s=%s: expected an integer from 0 to %ld", a->key,
			  a->val, max);
		return -1;
	}
	return v;
}

static inline int policy_unknown(const struct vmmx_policy_host *host, const struct policy_arg *a,
				 const char *known)
{
	host->log(host, VMMX_LOG_ERROR, "unknown argument \"%s\" (known: %s)", a->key, known);
	return -VMMX_EINVAL;
}

/*
 * numa=N names a host NUMA node that exists (the backend answers mem_info
 * for it: the sim has node 0, the cuda backend the nodes the kernel lists
 * with memory).  A node that does not exist used to be accepted, and every
 * grow that reached it then failed.  0, or -VMMX_EINVAL after logging which
 * node and which nodes there are (the first ones, found by asking up to 16
 * past the last one found).
 */
static inline int policy_numa_check(const struct vmmx_policy_host *host, long node)
{
	char ids[64] = "";
	size_t o = 0;
	int count = 0;
	uint64_t total;

	if (!host->mem_info(host, (struct vmmx_loc){ VMMX_LOC_HOST_NUMA, (int)node }, NULL, &total))
		return 0;
	for (int n = 0, miss = 0; n < 1024 && miss < 16; n++) {
		if (host->mem_info(host, (struct vmmx_loc){ VMMX_LOC_HOST_NUMA, n }, NULL, &total)) {
			miss++;
			continue;
		}
		miss = 0;
		count++;
		if (o < sizeof(ids) - 16)
			o += (size_t)snprintf(ids + o, sizeof(ids) - o, "%s%d", o ? ", " : "", n);
		else if (o < sizeof(ids) - 4)
			o += (size_t)snprintf(ids + o, sizeof(ids) - o, ", ...");
	}
	host->log(host, VMMX_LOG_ERROR,
		  "numa=%ld: host NUMA node %ld does not exist: this machine has %d host NUMA node%s%s%s%s",
		  node, node, count, count == 1 ? "" : "s", count ? " (" : "", ids, count ? ")" : "");
	return -VMMX_EINVAL;
}

/*
 * Parse arguments that may only be numa=N (host, device-first): the state
 * is the node plus one, 0 for plain HOST.  0 or -VMMX_EINVAL after logging.
 */
static inline int policy_numa_state(const struct vmmx_policy_host *host, const char *args,
				    void **state_p)
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
	if (numa >= 0 && policy_numa_check(host, numa))
		return -VMMX_EINVAL;
	*state_p = (void *)(intptr_t)(numa + 1);
	return 0;
}

/* The host location a numa state names. */
static inline struct vmmx_loc policy_numa_loc(void *state)
{
	intptr_t node = (intptr_t)state - 1;

	return node < 0 ? (struct vmmx_loc){ VMMX_LOC_HOST, 0 }
			: (struct vmmx_loc){ VMMX_LOC_HOST_NUMA, (int)node };
}

/* The entry point's name: vmmx_policy_entry in a plugin, or a private name
 * when the policy is compiled into libvmmx as a built-in. */
#ifndef VMMX_POLICY_BUILTIN
#define VMMX_POLICY_BUILTIN vmmx_policy_entry
#endif
const struct vmmx_policy_ops *VMMX_POLICY_BUILTIN(uint32_t core_abi);

/* Stateless policies share this fini and hand back a dummy state. */
static inline void policy_fini_nothing(void *state)
{
	(void)state;
}

#endif
