// SPDX-License-Identifier: MIT
#include "config.h"

#include "internal.h"
#include "tests/tap/basic.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

bool test_no_leaks(struct vmmx_ctx *ctx)
{
	struct vmm *v = vmmx__ctx_vmm(ctx);
	struct vmm_counts c;
	bool clean;

	/* Teardown steps that failed were queued; give them their retry. */
	vmmx_ctx_trim(ctx, 0);
	vmm_counts(v, &c);
	clean = c.reservations == 0 && c.handles == 0 && c.mapped_bytes == 0;
	if (test_on_sim()) {
		struct vmm_sim_counts sc;

		vmm_sim_counts(v, &sc);
		clean = clean && sc.reservations == 0 && sc.handles == 0 && sc.mappings == 0 &&
			sc.device_used[0] == 0 && sc.host_used == 0;
	}
	if (!clean)
		diag("leak: %lld reservations, %lld handles, %lld bytes mapped",
		     (long long)c.reservations, (long long)c.handles, (long long)c.mapped_bytes);
	return clean && ctx->held[0] == 0 && ctx->held[VMMX__HOST_SLOT] == 0;
}

void test_fault_sweep(const char *const *vars, int op, uint64_t n, test_scenario_fn *scenario,
		      void *arg, const char *promise)
{
	const char *name = vmm_op_name((enum vmmx_op)op);
	uint64_t hit = 0, bad = 0, leaks = 0;

	for (uint64_t k = 1; k <= n; k++) {
		struct vmmx_ctx *ctx = test_ctx(vars);
		struct vmm_counts c;

		vmm_fault_arm(vmmx__ctx_vmm(ctx), (enum vmmx_op)op, k, 0);
		if (scenario(ctx, arg)) {
			diag("%s #%llu: broke the promise (%s)", name, (unsigned long long)k, promise);
			bad++;
		}
		vmm_counts(vmmx__ctx_vmm(ctx), &c);
		hit += c.injected;
		if (!test_no_leaks(ctx)) {
			diag("%s #%llu leaked", name, (unsigned long long)k);
			leaks++;
		}
		vmmx_ctx_destroy(ctx);
	}
	is_uint(n, hit, "every one of the %llu %s calls was failed once", (unsigned long long)n,
		name);
	ok(!bad && !leaks, "failing a %s: %s, no leak", name, promise);
}

int test_sweep_run(struct vmmx_ctx *ctx, void *arg)
{
	struct test_sweep *sw = arg;

	return sw->scenario(ctx, sw->orig, sw->want, &sw->errors);
}

void test_fault_sweep_ops(const char *const *vars, const int *ops, size_t nops,
			  const struct vmm_counts *base, test_scenario_fn *scenario, void *arg,
			  const char *promise)
{
	for (size_t i = 0; i < nops; i++)
		test_fault_sweep(vars, ops[i],
				 ops[i] == VMM_OP_CHECKSUM ? base->checksum_calls
				 : ops[i] == VMM_OP_EVENT  ? base->event_calls
							   : base->calls[ops[i]],
				 scenario, arg, promise);
}

void test_finish(struct vmmx_ctx *ctx, struct vmmx_buf *buf, void *want)
{
	if (buf)
		vmmx_buf_destroy(buf);
	free(want);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}
