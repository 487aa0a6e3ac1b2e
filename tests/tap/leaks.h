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
#include <stddef.h>
#include <stdint.h>

struct vmmx_ctx;

/*
 * Trim @ctx (deferred teardown steps get their retry), then whether the
 * driver layer holds no reservation, handle or mapping (on sim also its
 * own registry and memory) and the context no charged bytes.  Logs what is
 * left with diag() when something is.
 */
bool test_no_leaks(struct vmmx_ctx *ctx);

/* The end of a test's part: @buf destroyed and @want freed (either may be
 * NULL), then one assertion that nothing leaked, then @ctx destroyed. */
struct vmmx_buf;
void test_finish(struct vmmx_ctx *ctx, struct vmmx_buf *buf, void *want);

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

/*
 * A sweep over a scenario that fills a buffer, moves it about and reads it
 * back: @scenario gets the bytes first written (@orig), the bytes it must
 * find (@want, its own to fill), and adds its failed calls to @errors.
 */
struct test_sweep {
	int (*scenario)(struct vmmx_ctx *ctx, const uint8_t *orig, uint8_t *want, int *errors);
	uint8_t *orig, *want;
	int errors;
};

/* A test_scenario_fn running a struct test_sweep (@arg). */
int test_sweep_run(struct vmmx_ctx *ctx, void *arg);

struct vmm_counts;

/*
 * test_fault_sweep() for each of the @nops ops of @ops (enum vmmx_op or
 * VMM_OP_*), over the calls of it that @base, the driver layer's counts of
 * a clean run, says were made.
 */
void test_fault_sweep_ops(const char *const *vars, const int *ops, size_t nops,
			  const struct vmm_counts *base, test_scenario_fn *scenario, void *arg,
			  const char *promise);

#endif
