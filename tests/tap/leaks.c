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
