// SPDX-License-Identifier: MIT
/*
 * fault.c - the fault layer of vmm.c over the sim backend: vmm_fault_arm()
 * fails exactly the n-th next call of an op, once, with the error asked for,
 * and an injected failure never reaches the backend.  The sim's own counts
 * (vmm_sim_counts) show what the backend saw; vmm_counts() shows what the
 * dispatch layer counted.  Host registration fails as register/unregister,
 * copy_async as copy and stream_sync as sync; queries and stream
 * create/destroy are outside the fault layer.
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "vmm/vmm.h"
#include "tests/tap/basic.h"

#define MiB ((size_t)1 << 20)
#define GRAN (2 * MiB)

static const struct vmmx_loc DEV0 = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };

static struct {
	int level, err;
	char msg[512];
} last;

static void hook(void *arg, int level, int err, const char *msg)
{
	last.level = level;
	last.err = err;
	snprintf(last.msg, sizeof(last.msg), "%s", msg);
}

static struct vmm *v;
static char *R;                 /* 8 MiB reservation; a host chunk mapped at R, RW to all */
static vmm_handle_t host_h;
static int pipefd[2];

static bool cpu_can_read(const void *p)
{
	char c;

	if (write(pipefd[1], p, 1) != 1)
		return false;
	return read(pipefd[0], &c, 1) == 1;
}

static struct vmm_sim_counts sim_counts(void)
{
	struct vmm_sim_counts c;

	if (vmm_sim_counts(v, &c))
		bail("vmm_sim_counts failed");
	return c;
}

/* Backend state and the dispatch layer's live counters, compared whole. */
struct state {
	struct vmm_sim_counts sim;
	int64_t reservations, handles, mapped, registrations, streams;
};

static struct state state(void)
{
	struct state s;
	struct vmm_counts c;

	memset(&s, 0, sizeof(s));
	s.sim = sim_counts();
	vmm_counts(v, &c);
	s.reservations = c.reservations;
	s.handles = c.handles;
	s.mapped = c.mapped_bytes;
	s.registrations = c.registrations;
	s.streams = c.streams;
	return s;
}

static uint64_t calls(enum vmmx_op op)
{
	struct vmm_counts c;

	vmm_counts(v, &c);
	return c.calls[op];
}

static uint64_t injected(void)
{
	struct vmm_counts c;

	vmm_counts(v, &c);
	return c.injected;
}

/*
 * One representative call of each op, with what it needs set up before
 * (prep) and undone after (cleanup), outside the measured window.
 */
static void *tmp_va;
static vmm_handle_t tmp_h;
static unsigned char src[4096];
static char regbuf[8192];      /* plain memory that register/unregister use */
static void *reg_dptr;

static void prep(enum vmmx_op op)
{
	struct vmmx_loc loc = op == VMMX_OP_SET_ACCESS ? HOST : DEV0;
	int err = 0;

	switch (op) {
	case VMMX_OP_UNRESERVE:
		err = vmm_reserve(v, GRAN, 0, &tmp_va);
		break;
	case VMMX_OP_RELEASE:
		err = vmm_create(v, DEV0, GRAN, &tmp_h);
		break;
	case VMMX_OP_UNREGISTER:
		err = vmm_host_register(v, regbuf, sizeof(regbuf), &reg_dptr);
		break;
	case VMMX_OP_MAP:
	case VMMX_OP_UNMAP:
	case VMMX_OP_SET_ACCESS:
		err = vmm_create(v, loc, GRAN, &tmp_h);
		if (!err && op != VMMX_OP_MAP)
			err = vmm_map(v, R + GRAN, GRAN, tmp_h);
		break;
	default:
		break;
	}
	if (err)
		bail("prep of %s failed: %s", vmm_op_name(op), last.msg);
}

static int call(enum vmmx_op op)
{
	struct vmm_access acc[] = { { DEV0, VMM_ACCESS_RW }, { HOST, VMM_ACCESS_RW } };

	switch (op) {
	case VMMX_OP_RESERVE:
		return vmm_reserve(v, GRAN, 0, &tmp_va);
	case VMMX_OP_UNRESERVE:
		return vmm_unreserve(v, tmp_va, GRAN);
	case VMMX_OP_CREATE:
		return vmm_create(v, DEV0, GRAN, &tmp_h);
	case VMMX_OP_RELEASE:
		return vmm_release(v, tmp_h);
	case VMMX_OP_MAP:
		return vmm_map(v, R + GRAN, GRAN, tmp_h);
	case VMMX_OP_UNMAP:
		return vmm_unmap(v, R + GRAN, GRAN);
	case VMMX_OP_SET_ACCESS:
		return vmm_set_access(v, R + GRAN, GRAN, acc, 2);
	case VMMX_OP_COPY:
		return vmm_copy(v, R, src, sizeof(src));
	case VMMX_OP_MEMSET:
		return vmm_memset(v, R + 8192, 0x77, 4096);
	case VMMX_OP_SYNC:
		return vmm_sync(v);
	case VMMX_OP_REGISTER:
		return vmm_host_register(v, regbuf, sizeof(regbuf), &reg_dptr);
	case VMMX_OP_UNREGISTER:
		return vmm_host_unregister(v, regbuf);
	default:
		return -VMMX_EINVAL;
	}
}

static void cleanup(enum vmmx_op op)
{
	int err = 0;

	switch (op) {
	case VMMX_OP_RESERVE:
		err = vmm_unreserve(v, tmp_va, GRAN);
		break;
	case VMMX_OP_CREATE:
		err = vmm_release(v, tmp_h);
		break;
	case VMMX_OP_REGISTER:
		err = vmm_host_unregister(v, regbuf);
		break;
	case VMMX_OP_MAP:
	case VMMX_OP_SET_ACCESS:
		err = vmm_unmap(v, R + GRAN, GRAN);
		/* fall through */
	case VMMX_OP_UNMAP:
		err = err ? err : vmm_release(v, tmp_h);
		break;
	default:
		break;
	}
	if (err)
		bail("cleanup of %s failed: %s", vmm_op_name(op), last.msg);
}

/*
 * Per op: 4 assertions, plus one on the op's effect for set_access, copy,
 * memset, register and unregister.
 */
static void test_each_op(void)
{
	for (int i = 0; i < VMMX_OP_COUNT; i++) {
		enum vmmx_op op = (enum vmmx_op)i;
		const char *name = vmm_op_name(op);
		struct state before, after;
		uint64_t c0, i0;
		int err;

		prep(op);
		memset(src, i + 1, sizeof(src));
		memset(R, 0, 3 * 4096);
		before = state();
		c0 = calls(op);
		i0 = injected();
		if (vmm_fault_arm(v, op, 1, 0))
			bail("vmm_fault_arm(%s) failed", name);
		err = call(op);
		after = state();
		is_err(-VMMX_EFAULTINJ, err, "vmm_%s: injected failure returns -VMMX_EFAULTINJ",
		       name);
		ok(!memcmp(&before, &after, sizeof(before)),
		   "vmm_%s: an injected failure leaves the backend and live counters alone", name);
		ok(calls(op) == c0 + 1 && injected() == i0 + 1,
		   "vmm_counts: the failed %s is counted as a call and an injection", name);
		if (op == VMMX_OP_SET_ACCESS)
			ok(!cpu_can_read(R + GRAN), "vmm_set_access: injected, no access granted");
		if (op == VMMX_OP_COPY)
			ok(R[0] == 0 && R[4095] == 0, "vmm_copy: injected, no byte copied");
		if (op == VMMX_OP_MEMSET)
			ok(R[8192] == 0 && R[3 * 4096 - 1] == 0,
			   "vmm_memset: injected, no byte set");
		if (op == VMMX_OP_REGISTER)
			ok(after.sim.registrations == 0 && after.registrations == 0,
			   "vmm_host_register: injected, no registration recorded");
		if (op == VMMX_OP_UNREGISTER)
			ok(after.sim.registrations == 1 && after.registrations == 1,
			   "vmm_host_unregister: injected, the registration stays");
		is_err(0, call(op), "vmm_%s: the next call reaches the backend", name);
		cleanup(op);
	}
}

static void test_nth(void)
{
	struct vmm_sim_counts s0, s1;
	struct vmm_counts c0, c1;
	vmm_handle_t h[4] = { 0 }, x = 0;

	vmm_counts(v, &c0);
	s0 = sim_counts();
	is_err(0, vmm_fault_arm(v, VMMX_OP_CREATE, 3, 0), "vmm_fault_arm(create, 3)");
	is_err(0, vmm_create(v, DEV0, GRAN, &h[0]), "vmm_create: 1st call after arming succeeds");
	is_err(0, vmm_create(v, DEV0, GRAN, &h[1]), "vmm_create: 2nd call succeeds");
	is_err(-VMMX_EFAULTINJ, vmm_create(v, DEV0, GRAN, &x), "vmm_create: 3rd call fails");
	ok(x == 0, "vmm_create: output untouched by the injected failure");
	is_int(-VMMX_EFAULTINJ, last.err, "vmm_create: the report hook gets the injected error");
	like(last.msg, "fault layer: injected failure of create",
	     "vmm_create: the report hook names the op");
	is_err(0, vmm_create(v, DEV0, GRAN, &h[2]), "vmm_create: 4th call succeeds (once only)");
	is_err(0, vmm_create(v, DEV0, GRAN, &h[3]), "vmm_create: 5th call succeeds");
	s1 = sim_counts();
	vmm_counts(v, &c1);
	ok(s1.handles == s0.handles + 4 && s1.device_used[0] == s0.device_used[0] + 4 * GRAN,
	   "vmm_sim_counts: 4 handles created, not 5");
	is_int(c0.handles + 4, c1.handles, "vmm_counts: live handles count 4");
	is_uint(c0.calls[VMMX_OP_CREATE] + 5, c1.calls[VMMX_OP_CREATE],
		"vmm_counts: 5 create calls, the failed one included");
	is_uint(c0.injected + 1, c1.injected, "vmm_counts: one injection");

	/* a custom error, on the very next call; nothing reached the backend */
	is_err(0, vmm_fault_arm(v, VMMX_OP_RELEASE, 1, -VMMX_EBUSY),
	       "vmm_fault_arm(release, 1, -VMMX_EBUSY)");
	is_err(-VMMX_EBUSY, vmm_release(v, h[0]), "vmm_release: custom error returned as given");
	is_int(s1.handles, sim_counts().handles, "vmm_sim_counts: the handle was not released");
	is_err(0, vmm_release(v, h[0]), "vmm_release: the handle is still valid afterwards");

	/* the countdown counts every call, those the backend fails included */
	is_err(0, vmm_fault_arm(v, VMMX_OP_CREATE, 2, -VMMX_ENOMEM), "vmm_fault_arm(create, 2)");
	is_err(-VMMX_EINVAL, vmm_create(v, DEV0, MiB, &x), "vmm_create: backend refuses 1 MiB");
	is_err(-VMMX_ENOMEM, vmm_create(v, DEV0, GRAN, &x),
	       "vmm_create: the call after a backend failure is the 2nd");
	vmm_counts(v, &c1);
	is_uint(c0.calls[VMMX_OP_CREATE] + 7, c1.calls[VMMX_OP_CREATE],
		"vmm_counts: backend-refused calls are counted too");

	/* arming again replaces the countdown */
	vmm_fault_arm(v, VMMX_OP_SYNC, 5, 0);
	is_err(0, vmm_fault_arm(v, VMMX_OP_SYNC, 1, -VMMX_EDRIVER), "vmm_fault_arm re-arms sync");
	is_err(-VMMX_EDRIVER, vmm_sync(v), "vmm_sync: the newer arming wins");
	is_err(0, vmm_sync(v), "vmm_sync: and fires once");

	/* arming one op leaves the others alone */
	vmm_fault_arm(v, VMMX_OP_MAP, 1, 0);
	is_err(0, vmm_sync(v), "vmm_sync: unaffected by an armed map");
	vmm_fault_arm(v, VMMX_OP_MAP, 0, 0);

	for (int i = 1; i < 4; i++)
		vmm_release(v, h[i]);
}

/* The stream calls: copy_async fails as a copy, stream_sync as a sync. */
static void test_streams(void)
{
	vmm_stream_t s = 0, s2 = 0;
	struct state before, after;
	uint64_t i0;

	if (vmm_stream_create(v, &s))
		bail("vmm_stream_create failed: %s", last.msg);
	memset(src, 0x5c, sizeof(src));
	memset(R, 0, sizeof(src));
	i0 = injected();
	vmm_fault_arm(v, VMMX_OP_COPY, 1, 0);
	is_err(-VMMX_EFAULTINJ, vmm_copy_async(v, R, src, sizeof(src), s),
	       "vmm_copy_async: injected failure of copy");
	ok(R[0] == 0 && R[sizeof(src) - 1] == 0, "vmm_copy_async: injected, no byte copied");
	is_err(0, vmm_copy_async(v, R, src, sizeof(src), s),
	       "vmm_copy_async: the next call reaches the backend");
	ok(R[0] == 0x5c && R[sizeof(src) - 1] == 0x5c, "vmm_copy_async: and copies");
	vmm_fault_arm(v, VMMX_OP_SYNC, 1, -VMMX_EDRIVER);
	is_err(-VMMX_EDRIVER, vmm_stream_sync(v, s), "vmm_stream_sync: injected failure of sync");
	is_err(0, vmm_stream_sync(v, s), "vmm_stream_sync: the next call reaches the backend");
	is_uint(i0 + 2, injected(), "vmm_counts: two injections");

	/* queries and stream create/destroy have no op: arming everything spares them */
	for (int i = 0; i < VMMX_OP_COUNT; i++)
		vmm_fault_arm(v, (enum vmmx_op)i, 1, 0);
	before = state();
	{
		int x = -1, y = -1;

		ok(!vmm_attr(v, 0, VMM_ATTR_VMM, &x) && x == 1 &&
		   !vmm_can_access_peer(v, 0, 1, &y) && y == 1,
		   "vmm_attr, vmm_can_access_peer: outside the fault layer");
	}
	is_err(0, vmm_stream_create(v, &s2), "vmm_stream_create: outside the fault layer");
	is_err(0, vmm_stream_destroy(v, s2), "vmm_stream_destroy: outside the fault layer");
	after = state();
	ok(!memcmp(&before, &after, sizeof(before)) && injected() == i0 + 2,
	   "vmm_counts: nothing injected, nothing left");
	vmm_fault_disarm_all(v);
	is_err(0, vmm_stream_destroy(v, s), "vmm_stream_destroy");
	is_int(0, sim_counts().streams, "vmm_sim_counts: no stream left");
}

static void test_disarm(void)
{
	vmm_handle_t h = 0;
	uint64_t i0 = injected();

	vmm_fault_arm(v, VMMX_OP_CREATE, 1, 0);
	is_err(0, vmm_fault_arm(v, VMMX_OP_CREATE, 0, 0), "vmm_fault_arm(create, 0) disarms");
	is_err(0, vmm_create(v, DEV0, GRAN, &h), "vmm_create: disarmed, succeeds");
	vmm_release(v, h);

	vmm_fault_arm(v, VMMX_OP_CREATE, 1, 0);
	vmm_fault_arm(v, VMMX_OP_SYNC, 1, 0);
	vmm_fault_arm(v, VMMX_OP_RESERVE, 2, 0);
	vmm_fault_disarm_all(v);
	is_err(0, vmm_sync(v), "vmm_fault_disarm_all: sync succeeds");
	is_err(0, vmm_create(v, DEV0, GRAN, &h), "vmm_fault_disarm_all: create succeeds");
	vmm_release(v, h);
	is_uint(i0, injected(), "vmm_counts: nothing injected after disarming");

	is_err(-VMMX_EINVAL, vmm_fault_arm(v, (enum vmmx_op)VMM_OP_COUNT, 1, 0),
	       "vmm_fault_arm refuses VMM_OP_COUNT");
	is_err(-VMMX_EINVAL, vmm_fault_arm(v, (enum vmmx_op)-1, 1, 0),
	       "vmm_fault_arm refuses op -1");
	is_err(-VMMX_EINVAL, vmm_fault_arm(v, VMMX_OP_SYNC, 1, VMMX_ENOMEM),
	       "vmm_fault_arm refuses a positive error");
	is_err(0, vmm_sync(v), "vmm_fault_arm: a refused arming armed nothing");
}

static void test_names(void)
{
	char buf[32];
	int i;

	for (i = 0; i < VMM_OP_COUNT; i++) {
		const char *name = vmm_op_name((enum vmmx_op)i);

		is_int(i, name ? vmm_op_parse(name, strlen(name)) : -2,
		       "vmm_op_parse(vmm_op_name(%d) = \"%s\") round-trips", i, name ? name : "");
	}
	is_string("set_access", vmm_op_name(VMMX_OP_SET_ACCESS), "vmm_op_name(SET_ACCESS)");
	is_string("event", vmm_op_name((enum vmmx_op)VMM_OP_EVENT),
		  "vmm_op_name(VMM_OP_EVENT), the layer's own op past the public ones");
	is_string("checksum", vmm_op_name((enum vmmx_op)VMM_OP_CHECKSUM),
		  "vmm_op_name(VMM_OP_CHECKSUM)");
	ok(vmm_op_name((enum vmmx_op)VMM_OP_COUNT) == NULL, "vmm_op_name(VMM_OP_COUNT) is NULL");
	ok(vmm_op_name((enum vmmx_op)-1) == NULL, "vmm_op_name(-1) is NULL");
	is_int(-1, vmm_op_parse("bogus", 5), "vmm_op_parse refuses an unknown name");
	is_int(-1, vmm_op_parse("creat", 5), "vmm_op_parse refuses a prefix");
	is_int(-1, vmm_op_parse("", 0), "vmm_op_parse refuses the empty name");
	snprintf(buf, sizeof(buf), "create:3");
	is_int(VMMX_OP_CREATE, vmm_op_parse(buf, 6), "vmm_op_parse reads only len bytes");
}

struct worker {
	int fails;
};

static void *work(void *arg)
{
	struct worker *w = arg;

	for (int i = 0; i < 1000; i++)
		if (vmm_sync(v))
			w->fails++;
	return NULL;
}

/* Armed while other threads call in, it hits exactly one call. */
static void test_threads(void)
{
	enum { T = 4 };
	struct worker w[T] = { { 0 } };
	pthread_t t[T];
	int fails = 0;

	vmm_fault_arm(v, VMMX_OP_SYNC, 2000, 0);
	for (int i = 0; i < T; i++)
		if (pthread_create(&t[i], NULL, work, &w[i]))
			bail("pthread_create failed");
	for (int i = 0; i < T; i++) {
		pthread_join(t[i], NULL);
		fails += w[i].fails;
	}
	is_int(1, fails, "vmm_sync: one armed failure among %d concurrent calls", T * 1000);
}

int main(void)
{
	struct vmm_access acc[] = { { DEV0, VMM_ACCESS_RW }, { HOST, VMM_ACCESS_RW } };
	struct vmm_params p = {
		.backend = "sim",
		.device = 0,
		.sim_device_mem = 16 * MiB,
		.sim_host_mem = 16 * MiB,
		.sim_devices = 2,
		.report = hook,
	};
	struct vmm_sim_counts c;
	struct vmm_counts vc;

	if (pipe(pipefd))
		bail("pipe failed");
	plan(127);
	test_names();
	if (!is_err(0, vmm_open(&p, &v), "vmm_open(sim)"))
		bail("cannot open the sim backend: %s", last.msg);
	if (vmm_reserve(v, 8 * MiB, 0, (void **)&R) || vmm_create(v, HOST, GRAN, &host_h) ||
	    vmm_map(v, R, GRAN, host_h) || vmm_set_access(v, R, GRAN, acc, 2))
		bail("setup failed: %s", last.msg);

	test_nth();
	test_each_op();
	test_streams();
	test_disarm();
	test_threads();

	if (vmm_unmap(v, R, GRAN) || vmm_release(v, host_h) || vmm_unreserve(v, R, 8 * MiB))
		bail("teardown failed: %s", last.msg);
	vmm_counts(v, &vc);
	ok(!vc.reservations && !vc.handles && !vc.mapped_bytes && !vc.registrations &&
	   !vc.streams, "vmm_counts: all back to zero");
	ok(!vmm_sim_counts(v, &c) && !c.reservations && !c.handles && !c.mappings &&
	   !c.registrations && !c.streams && !c.device_used[0] && !c.host_used,
	   "vmm_sim_counts: all back to zero");
	vmm_close(v);
	return tap_done();
}
