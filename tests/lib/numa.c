// SPDX-License-Identifier: MIT
/*
 * numa.c - a host NUMA node that does not exist is refused when the policy
 * naming it loads (policies/args.h, policy_numa_check), at
 * vmmx_buf_create and at vmmx_ctx_create (VMMX_POLICY), with a message
 * naming the node and the nodes there are.  host:numa=3 on a one-node
 * machine used to load, and every grow then failed with -VMMX_EINVAL and
 * no fallback.  The sim has one node, node 0.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

static void refused(struct vmmx_ctx *ctx, const char *spec, const char *arg)
{
	struct vmmx_buf *buf = NULL;

	is_err(-VMMX_EINVAL, vmmx_buf_create(ctx, 8 * MiB, spec, &buf),
	       "vmmx_buf_create(%s) refused", spec);
	like(vmmx_last_error(), arg, "the message names the argument (%s)", spec);
	like(vmmx_last_error(), "host NUMA node 3 does not exist: this machine has 1 host NUMA node (0)",
	     "and the nodes there are (%s)", spec);
	if (buf)
		vmmx_buf_destroy(buf);
}

int main(void)
{
	static const char *const bad[] = { "VMMX_POLICY=host:numa=3", NULL };
	struct vmmx_ctx *ctx, *c2 = NULL;
	struct vmmx_chunk_info ci;
	struct vmmx_buf *buf;
	uint64_t total;

	if (!test_on_sim())
		skip_all("the sim models one NUMA node; a GPU machine has its own");
	plan(3 * 3 + 5 + 2 + 4);
	ctx = test_ctx(NULL);
	refused(ctx, "host:numa=3", "numa=3");
	refused(ctx, "device-first:numa=3", "numa=3");
	refused(ctx, "device-first:peers=1,numa=3", "numa=3");

	/* node 0 exists: accepted, and chunks land there */
	is_err(0, vmmx_buf_create(ctx, 8 * MiB, "host:numa=0", &buf), "host:numa=0 is accepted");
	is_err(0, vmmx_buf_resize(buf, 4 * MiB), "and grows");
	is_err(0, vmmx_lookup(ctx, vmmx_buf_ptr(buf), &ci), "vmmx_lookup");
	ok(ci.loc.kind == VMMX_LOC_HOST_NUMA && ci.loc.id == 0, "the chunk is on host-numa:0");
	vmmx_buf_destroy(buf);
	is_err(0, vmmx_buf_create(ctx, 8 * MiB, "device-first:numa=0", &buf),
	       "device-first:numa=0 is accepted");
	vmmx_buf_destroy(buf);

	/* the sim's own answer */
	is_err(-VMMX_EINVAL,
	       vmm_mem_info(vmmx__ctx_vmm(ctx), (struct vmmx_loc){ VMMX_LOC_HOST_NUMA, 1 }, NULL, &total),
	       "sim: mem_info of host-numa:1 refused");
	like(vmmx_last_error(), "no such NUMA node (the sim has 1, 0 to 0)", "the sim says why");

	/* the context's own policy */
	is_err(-VMMX_EINVAL, test_ctx_try(bad, &c2), "vmmx_ctx_create with VMMX_POLICY=host:numa=3");
	like(vmmx_last_error(), "numa=3: host NUMA node 3 does not exist",
	     "the message names the node");
	like(vmmx_last_error(), "policy host", "and the policy");
	ok(c2 == NULL, "no context");
	if (c2)
		vmmx_ctx_destroy(c2);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
