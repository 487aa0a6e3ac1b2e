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

struct vmmx_ctx;

/*
 * Trim @ctx (deferred teardown steps get their retry), then whether the
 * driver layer holds no reservation, handle or mapping (on sim also its
 * own registry and memory) and the context no charged bytes.  Logs what is
 * left with diag() when something is.
 */
bool test_no_leaks(struct vmmx_ctx *ctx);

#endif
