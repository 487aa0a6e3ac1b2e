// SPDX-License-Identifier: MIT
/*
 * event.c - the public events (lib/event.c): create, record on the default
 * stream and on a vmmx_stream, query, sync and destroy; on sim, an event on
 * a held stream is pending (-VMMX_EBUSY, with no message) until the stream
 * is released or synced or the event waited for, and a record again moves
 * the mark; every bad argument with its code and message; each driver
 * event call (record, query, sync: VMM_OP_EVENT) failed by the fault layer
 * returns the injected code, leaves the event usable and leaks nothing; in
 * a forked child every call fails naming the parent, and destroy frees the
 * child's record without touching the parent's event.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "vmm/vmm.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

static struct vmm_counts counts(struct vmmx_ctx *ctx)
{
	struct vmm_counts c;

	vmm_counts(vmmx__ctx_vmm(ctx), &c);
	return c;
}

static struct vmmx_event *xevent(struct vmmx_ctx *ctx)
{
	struct vmmx_event *ev;

	if (vmmx_event_create(ctx, &ev))
		bail("vmmx_event_create: %s", vmmx_last_error());
	return ev;
}

static void test_basic(struct vmmx_ctx *ctx, struct vmmx_stream *st)
{
	struct vmm_counts c0 = counts(ctx), c;
	struct vmmx_event *ev = NULL;

	is_err(0, vmmx_event_create(ctx, &ev), "vmmx_event_create");
	ok(ev != NULL, "vmmx_event_create: the event is written");
	is_int(c0.events + 1, counts(ctx).events, "vmmx_event_create: one driver event more");
	is_err(0, vmmx_event_query(ev), "vmmx_event_query: an event never recorded is complete");
	is_err(0, vmmx_event_sync(ev), "vmmx_event_sync: ... and waiting for it returns at once");
	is_err(0, vmmx_event_record(ev, NULL), "vmmx_event_record on the default stream");
	is_err(0, vmmx_event_sync(ev), "vmmx_event_sync on the default stream's mark");
	is_err(0, vmmx_event_record(ev, vmmx_stream_handle(st)),
	       "vmmx_event_record on a vmmx_stream's handle");
	is_err(0, vmmx_event_sync(ev), "vmmx_event_sync on that stream's mark");
	is_err(0, vmmx_event_query(ev), "vmmx_event_query after the wait: complete");
	c = counts(ctx);
	is_uint(c0.event_calls + 7, c.event_calls,
		"every record, query and sync is one driver event call");
	vmmx_event_destroy(ev);
	is_int(c0.events, counts(ctx).events, "vmmx_event_destroy: the driver event is gone");
	vmmx_event_destroy(NULL);
	is_int(c0.events, counts(ctx).events, "vmmx_event_destroy(NULL) does nothing");
}

/* sim: a held stream's work stays queued, so an event on it is really pending. */
static void test_pending(struct vmmx_ctx *ctx, struct vmmx_stream *s1, struct vmmx_stream *s2)
{
	struct vmm *v = vmmx__ctx_vmm(ctx);
	void *h1 = vmmx_stream_handle(s1), *h2 = vmmx_stream_handle(s2);
	struct vmmx_event *ev = xevent(ctx);

	if (vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h1, true))
		bail("vmm_sim_stream_hold: %s", vmmx_last_error());
	is_err(0, vmmx_event_record(ev, h1), "vmmx_event_record on a held stream");
	is_err(-VMMX_EBUSY, vmmx_event_query(ev), "vmmx_event_query: its work is pending");
	is_string("", vmmx_last_error(), "vmmx_event_query: -VMMX_EBUSY sets no message");
	is_err(-VMMX_EBUSY, vmmx_event_query(ev), "vmmx_event_query: still pending, asked again");
	vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h1, false);
	is_err(0, vmmx_event_query(ev), "vmmx_event_query: done once the stream's work ran");

	vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h1, true);
	vmmx_event_record(ev, h1);
	is_err(-VMMX_EBUSY, vmmx_event_query(ev), "recorded again on the held stream: pending");
	is_err(0, vmmx_stream_sync(s1), "vmmx_stream_sync on the held stream");
	is_err(0, vmmx_event_query(ev), "vmmx_event_query: done after the stream's sync");

	vmmx_event_record(ev, h1);
	is_err(-VMMX_EBUSY, vmmx_event_query(ev), "pending again");
	is_err(0, vmmx_event_sync(ev), "vmmx_event_sync waits for the held stream's work");
	is_err(0, vmmx_event_query(ev), "vmmx_event_query: done after vmmx_event_sync");

	vmmx_event_record(ev, h1);
	is_err(-VMMX_EBUSY, vmmx_event_query(ev), "pending on S1 once more");
	is_err(0, vmmx_event_record(ev, h2), "vmmx_event_record on S2, which is not held");
	is_err(0, vmmx_event_query(ev), "recording again moves the mark: S1's work is forgotten");

	vmm_sim_stream_hold(v, 0, true);
	vmmx_event_record(ev, NULL);
	is_err(-VMMX_EBUSY, vmmx_event_query(ev), "the default stream held: pending too");
	vmm_sim_stream_hold(v, 0, false);
	is_err(0, vmmx_event_query(ev), "... and done once released");
	vmm_sim_stream_hold(v, (vmm_stream_t)(uintptr_t)h1, false);
	vmmx_event_destroy(ev);
}

static void test_errors(struct vmmx_ctx *ctx)
{
	struct vmmx_event *ev = (struct vmmx_event *)1;
	struct vmm_counts c0 = counts(ctx);

	is_err(-VMMX_EINVAL, vmmx_event_create(NULL, &ev), "vmmx_event_create(NULL ctx)");
	is_string("vmmx_event_create: ctx is NULL", vmmx_last_error(), "... says which argument");
	is_err(-VMMX_EINVAL, vmmx_event_create(ctx, NULL), "vmmx_event_create(NULL ev_p)");
	is_string("vmmx_event_create: ev_p is NULL", vmmx_last_error(), "... says which argument");
	ok(ev == (struct vmmx_event *)1, "vmmx_event_create: the output is left alone on failure");
	is_int(c0.events, counts(ctx).events, "vmmx_event_create: no driver event on failure");
	is_err(-VMMX_EINVAL, vmmx_event_record(NULL, NULL), "vmmx_event_record(NULL)");
	is_string("vmmx_event_record: the event is NULL", vmmx_last_error(),
		  "... with its message");
	is_err(-VMMX_EINVAL, vmmx_event_query(NULL), "vmmx_event_query(NULL)");
	is_string("vmmx_event_query: the event is NULL", vmmx_last_error(), "... with its message");
	is_err(-VMMX_EINVAL, vmmx_event_sync(NULL), "vmmx_event_sync(NULL)");
	is_string("vmmx_event_sync: the event is NULL", vmmx_last_error(), "... with its message");
	ev = xevent(ctx);
	if (test_on_sim()) {
		is_err(-VMMX_EINVAL, vmmx_event_record(ev, (void *)(uintptr_t)777777),
		       "vmmx_event_record on a stream the driver does not know");
		like(vmmx_last_error(), "unknown stream", "... says the stream is unknown");
		is_err(0, vmmx_event_query(ev), "... and the event stays as it was (unrecorded)");
	} else {
		for (int i = 0; i < 3; i++)
			skip("a bad CUstream is undefined behaviour on the driver");
	}
	vmmx_event_destroy(ev);
	is_int(c0.events, counts(ctx).events, "errors: no driver event left");
}

/* Each driver call behind the event API fails once: the code comes back, nothing leaks. */
static void test_faults(struct vmmx_ctx *ctx, struct vmmx_stream *st)
{
	static const char *const fns[] = { "vmmx_event_record", "vmmx_event_query",
					   "vmmx_event_sync" };
	struct vmm *v = vmmx__ctx_vmm(ctx);
	struct vmm_counts c0 = counts(ctx);

	for (int i = 0; i < 3; i++) {
		struct vmmx_event *ev = xevent(ctx);
		uint64_t injected = counts(ctx).injected;
		int err;

		vmm_fault_arm(v, (enum vmmx_op)VMM_OP_EVENT, 1, 0);
		if (i == 0)
			err = vmmx_event_record(ev, vmmx_stream_handle(st));
		else if (i == 1)
			err = vmmx_event_query(ev);
		else
			err = vmmx_event_sync(ev);
		vmm_fault_disarm_all(v);
		is_err(-VMMX_EFAULTINJ, err, "%s fails when the driver's event call fails", fns[i]);
		like(vmmx_last_error(), "injected failure of event",
		     "... with the driver's message");
		is_uint(injected + 1, counts(ctx).injected, "... one failure injected");
		is_err(0, vmmx_event_record(ev, vmmx_stream_handle(st)), "... then a record works");
		is_err(0, vmmx_event_sync(ev), "... and a wait for it");
		vmmx_event_destroy(ev);
		is_int(c0.events, counts(ctx).events, "... and destroy leaves no driver event");
	}
	/* An error the driver reports (a failed kernel) comes back from a query as it is. */
	{
		struct vmmx_event *ev = xevent(ctx);

		vmm_fault_arm(v, (enum vmmx_op)VMM_OP_EVENT, 1, -VMMX_EDRIVER);
		is_err(-VMMX_EDRIVER, vmmx_event_query(ev),
		       "vmmx_event_query passes -VMMX_EDRIVER on");
		vmm_fault_disarm_all(v);
		vmmx_event_destroy(ev);
	}
	is_int(c0.events, counts(ctx).events, "faults: live driver events back where they were");
}

static void expect_inherited(int err, const char *fn, int parent)
{
	char want[96];

	snprintf(want, sizeof(want), "context created in process %d", parent);
	test_expect(err == -VMMX_ENODRIVER, fn);
	test_expect(strstr(vmmx_last_error(), want) && strstr(vmmx_last_error(), fn), want);
	test_expect(strstr(vmmx_last_error(), "vmmx_event_destroy") != NULL,
		    "the message names vmmx_event_destroy among what works");
}

/* fork(): the child may only destroy the parent's event, which stays the parent's. */
static void test_fork(struct vmmx_ctx *ctx)
{
	struct vmmx_event *ev = xevent(ctx), *e2 = NULL;
	int parent = (int)getpid();
	int64_t live;
	int status;
	pid_t pid;

	vmmx_event_record(ev, NULL);
	live = counts(ctx).events;
	pid = fork();
	if (pid < 0)
		bail("fork failed");
	if (!pid) {
		expect_inherited(vmmx_event_create(ctx, &e2), "vmmx_event_create", parent);
		test_expect(e2 == NULL, "vmmx_event_create writes nothing in the child");
		expect_inherited(vmmx_event_record(ev, NULL), "vmmx_event_record", parent);
		expect_inherited(vmmx_event_query(ev), "vmmx_event_query", parent);
		expect_inherited(vmmx_event_sync(ev), "vmmx_event_sync", parent);
		vmmx_event_destroy(ev); /* the child's copy of the record only */
		_exit(test_child_fails > 100 ? 100 : test_child_fails);
	}
	status = test_wait_child(pid, 30);
	ok(status >= 0 && WIFEXITED(status) && !WEXITSTATUS(status),
	   "fork: in the child every event call fails naming the parent, destroy works "
	   "(status %#x)",
	   status);
	is_int(live, counts(ctx).events, "fork: the child's destroy left the parent's event alone");
	is_err(0, vmmx_event_record(ev, NULL), "fork: the parent's event still records");
	is_err(0, vmmx_event_sync(ev), "... and waits");
	vmmx_event_destroy(ev);
}

int main(void)
{
	struct vmmx_stream *s1, *s2;
	struct vmmx_ctx *ctx;
	struct vmm_counts c0;

	plan_lazy();
	ctx = test_ctx(NULL);
	c0 = counts(ctx);
	if (vmmx_stream_create(ctx, &s1) || vmmx_stream_create(ctx, &s2))
		bail("vmmx_stream_create: %s", vmmx_last_error());
	test_basic(ctx, s1);
	if (test_on_sim())
		test_pending(ctx, s1, s2);
	else
		skip("pending events need a held stream, a sim hook");
	test_errors(ctx);
	test_faults(ctx, s1);
	test_fork(ctx);
	vmmx_stream_destroy(s1);
	vmmx_stream_destroy(s2);
	is_int(c0.events, counts(ctx).events, "every driver event destroyed");
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
