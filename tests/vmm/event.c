// SPDX-License-Identifier: MIT
/*
 * event.c - events of the driver layer: create, record on the default
 * stream and on a stream of ours, query, wait, destroy; unknown events
 * refused; records, queries and waits counted and failed as VMM_OP_EVENT;
 * live events counted.  On sim, a held stream keeps its marks pending until
 * it is synced, released, or an event on it is waited for.
 */
#include "config.h"

#include "internal.h"
#include "vmm/vmm.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

int main(void)
{
	struct vmmx_ctx *ctx;
	struct vmm *v;
	struct vmm_counts c0, c;
	vmm_stream_t s;
	vmm_event_t e, f;

	plan(22);
	ctx = test_ctx(NULL);
	v = vmmx__ctx_vmm(ctx);
	vmm_counts(v, &c0);
	if (vmm_stream_create(v, &s))
		bail("vmm_stream_create: %s", vmmx_last_error());

	is_err(0, vmm_event_create(v, &e), "vmm_event_create");
	ok(e != 0, "vmm_event_create: the event is never 0");
	is_err(-VMMX_EINVAL, vmm_event_create(v, NULL), "vmm_event_create(NULL)");
	is_err(0, vmm_event_query(v, e), "vmm_event_query: an event never recorded is complete");
	is_err(0, vmm_event_record(v, e, 0), "vmm_event_record on the default stream");
	is_err(0, vmm_event_sync(v, e), "vmm_event_sync on the default stream");
	is_err(0, vmm_event_record(v, e, s), "vmm_event_record on a stream of ours");
	is_err(0, vmm_event_sync(v, e), "vmm_event_sync");
	is_err(0, vmm_event_query(v, e), "vmm_event_query after the wait: complete");
	vmm_counts(v, &c);
	is_uint(c0.event_calls + 6, c.event_calls, "vmm_counts: records, queries, waits counted");
	is_int(c0.events + 1, c.events, "vmm_counts: one live event");

	vmm_fault_arm(v, (enum vmmx_op)VMM_OP_EVENT, 1, 0);
	is_err(-VMMX_EFAULTINJ, vmm_event_record(v, e, s), "the fault layer fails an event record");
	is_err(0, vmm_event_record(v, e, s), "... once");

	if (test_on_sim()) {
		is_err(0, vmm_sim_stream_hold(v, s, true), "vmm_sim_stream_hold");
		vmm_event_record(v, e, s);
		is_err(-VMMX_EBUSY, vmm_event_query(v, e),
		       "sim: an event on a held stream is pending");
		vmm_stream_sync(v, s);
		is_err(0, vmm_event_query(v, e), "sim: vmm_stream_sync completes it");
		vmm_event_record(v, e, s);
		vmm_sim_stream_hold(v, s, false);
		is_err(0, vmm_event_query(v, e), "sim: releasing the hold completes it");
		is_err(-VMMX_EINVAL, vmm_event_record(v, e, 777777),
		       "sim: vmm_event_record refuses an unknown stream");
	} else {
		for (int i = 0; i < 5; i++)
			skip("stream holds are a sim hook");
	}
	is_err(0, vmm_event_destroy(v, e), "vmm_event_destroy");
	is_err(-VMMX_EINVAL, vmm_event_destroy(v, 0), "vmm_event_destroy(0)");
	if (test_on_sim()) {
		f = e;
		is_err(-VMMX_EINVAL, vmm_event_query(v, f), "sim: a destroyed event is refused");
	} else {
		skip("a destroyed CUevent is undefined behaviour on the driver");
	}
	vmm_counts(v, &c);
	is_int(c0.events, c.events, "vmm_counts: live events back to zero");
	vmm_stream_destroy(v, s);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
