/* SPDX-License-Identifier: MIT */
/*
 * leaks.h - white-box check that a context holds nothing after its buffers
 * are gone: for the tests that link the core statically (TEST_LDADD) and
 * sweep failures through teardown paths.  In an object of its own so that
 * tests linking the shared library never pull in the internal symbols.
 */
#ifndef TESTS_TAP_LEAKS_H
#define TESTS_TAP_LEAKS_H

#include <stdbool.h>
#include <stdint.h>

struct vmmx_ctx;

/*
 * Trim @ctx (deferred teardown steps get their retry), then whether the
 * driver layer holds no reservation, handle or mapping (on sim also its
 * own registry and memory) and the context no charged bytes.  Logs what is
 * left with diag() when something is.
 */
bool test_no_leaks(struct vmmx_ctx *ctx);

/* A scenario of a fault sweep: the count of broken promises (0: none). */
typedef int test_scenario_fn(struct vmmx_ctx *ctx, void *arg);

/*
 * Fail each of the @n calls of @op (an enum vmmx_op or the driver layer's
 * VMM_OP_*) that a clean run of @scenario made, one per run, each in a
 * fresh context made with @vars.  Two assertions: every call was failed
 * once, and no run broke a promise or leaked (test_no_leaks), described as
 * "failing a <op>: @promise, no leak".  What went wrong is logged with diag().
 */
void test_fault_sweep(const char *const *vars, int op, uint64_t n, test_scenario_fn *scenario,
		      void *arg, const char *promise);

#endif
