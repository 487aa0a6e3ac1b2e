// SPDX-License-Identifier: MIT
/*
 * fault_sweep.c - fail every driver call of a scenario in turn (create,
 * resize up and down, memcpy, memset, destroy) and check each time that the
 * failing call left its buffer as it was, the data survived, and once
 * everything is destroyed no reservation, handle or mapping is left, neither
 * in the dispatch layer's counts nor (on sim) in the emulated driver.
 */
#include "config.h"

#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

static const char *const vars[] = { "VMMX_DEVICE_LIMIT=8MiB", "VMMX_CHUNK_MAX=4MiB", NULL };

struct result {
	int inconsistent;       /* a failed call changed its buffer, or data was lost */
	int failed_calls;       /* public calls that returned an error */
};

/* Resize, and check the outcome is all or nothing, with data below min(old,new) kept. */
static void step_resize(struct vmmx_ctx *ctx, struct vmmx_buf *buf, size_t to, size_t *valid,
			struct result *res)
{
	size_t before = vmmx_buf_size(buf);
	int err = vmmx_buf_resize(buf, to);

	if (err) {
		res->failed_calls++;
		if (vmmx_buf_size(buf) != before)
			res->inconsistent++;
	} else if (vmmx_buf_size(buf) != to) {
		res->inconsistent++;
	}
	if (*valid > vmmx_buf_size(buf))
		*valid = vmmx_buf_size(buf);
	/* The check itself may meet the armed fault (a copy): then check again. */
	if (*valid) {
		size_t bad = test_check(ctx, vmmx_buf_ptr(buf), 0, *valid, 5);

		if (bad == SIZE_MAX - 1) {
			res->failed_calls++;
			bad = test_check(ctx, vmmx_buf_ptr(buf), 0, *valid, 5);
		}
		if (bad != SIZE_MAX) {
			diag("data lost at byte %zu after resize to %zu (%s)", bad, to,
			     err ? vmmx_last_error() : "succeeded");
			res->inconsistent++;
		}
	}
}

static void fill(struct vmmx_ctx *ctx, struct vmmx_buf *buf, size_t *valid, struct result *res)
{
	size_t size = vmmx_buf_size(buf);

	if (test_fill(ctx, vmmx_buf_ptr(buf), 0, size, 5)) {
		res->failed_calls++;
		if (test_fill(ctx, vmmx_buf_ptr(buf), 0, size, 5)) {
			res->inconsistent++;
			return;
		}
	}
	*valid = size;
}

static void scenario(struct vmmx_ctx *ctx, struct result *res)
{
	struct vmmx_buf *buf = NULL;
	size_t valid = 0;

	if (vmmx_buf_create(ctx, 64 * MiB, NULL, &buf)) {
		res->failed_calls++;
		if (vmmx_buf_create(ctx, 64 * MiB, NULL, &buf)) {
			res->inconsistent++;
			return;
		}
	}
	step_resize(ctx, buf, 12 * MiB, &valid, res);   /* 8 MiB device + host */
	fill(ctx, buf, &valid, res);
	step_resize(ctx, buf, 20 * MiB, &valid, res);   /* more host chunks */
	fill(ctx, buf, &valid, res);
	if (vmmx_memset(ctx, (char *)vmmx_buf_ptr(buf) + 6 * MiB, 0x5a, 4 * MiB))
		res->failed_calls++;
	fill(ctx, buf, &valid, res);
	step_resize(ctx, buf, 6 * MiB, &valid, res);    /* shrink across the boundary */
	step_resize(ctx, buf, 10 * MiB, &valid, res);
	vmmx_buf_destroy(buf);
	/* Cached chunks go back to the driver: the release calls are swept too. */
	vmmx_ctx_trim(ctx, 0);
}

int main(void)
{
	static const enum vmmx_op ops[] = {
		VMMX_OP_RESERVE, VMMX_OP_UNRESERVE, VMMX_OP_CREATE, VMMX_OP_RELEASE, VMMX_OP_MAP,
		VMMX_OP_UNMAP,   VMMX_OP_SET_ACCESS, VMMX_OP_COPY,  VMMX_OP_MEMSET,
	};
	struct vmmx_ctx *ctx;
	struct vmm_counts base;
	struct result res = { 0, 0 };

	plan(2 + 4 * (sizeof(ops) / sizeof(ops[0])));
	/* A clean run counts the calls to sweep over. */
	ctx = test_ctx(vars);
	scenario(ctx, &res);
	vmm_counts(vmmx__ctx_vmm(ctx), &base);
	ok(res.failed_calls == 0 && res.inconsistent == 0, "the scenario runs clean without faults");
	ok(test_no_leaks(ctx), "and leaks nothing");
	vmmx_ctx_destroy(ctx);

	for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++) {
		uint64_t n = base.calls[ops[i]], hit = 0, leaks = 0, bad = 0, errors = 0;

		for (uint64_t k = 1; k <= n; k++) {
			struct vmm_counts c;

			memset(&res, 0, sizeof(res));
			ctx = test_ctx(vars);
			vmm_fault_arm(vmmx__ctx_vmm(ctx), ops[i], k, 0);
			scenario(ctx, &res);
			vmm_counts(vmmx__ctx_vmm(ctx), &c);
			hit += c.injected;
			bad += (uint64_t)res.inconsistent;
			errors += res.failed_calls > 0;
			if (!test_no_leaks(ctx)) {
				diag("%s #%llu leaked", vmm_op_name(ops[i]), (unsigned long long)k);
				leaks++;
			}
			vmmx_ctx_destroy(ctx);
		}
		ok(n > 0, "the scenario makes %llu %s calls", (unsigned long long)n, vmm_op_name(ops[i]));
		is_uint(n, hit, "every one of the %s calls was failed once", vmm_op_name(ops[i]));
		is_uint(0, bad, "failing a %s never changed a buffer or lost data", vmm_op_name(ops[i]));
		is_uint(0, leaks, "failing a %s never leaked a reservation, handle or mapping",
			vmm_op_name(ops[i]));
		diag("%s: %llu runs, %llu reported an error to the caller", vmm_op_name(ops[i]),
		     (unsigned long long)n, (unsigned long long)errors);
	}
	return tap_done();
}
