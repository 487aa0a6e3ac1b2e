// SPDX-License-Identifier: MIT
/*
 * host.c - vmmx_host_register() and vmmx_host_unregister(): ordinary host
 * memory made GPU-visible, on both paths.
 *
 * The default sim device, like the project's H100/H200, has no pageable
 * memory access, so registration (cuMemHostRegister) is the path; with
 * VMMX_SIM_PAGEABLE=1 the sim reports HMM and the pointer is used as is,
 * with no driver call.  The rules of include/vmmx.h hold on both paths and
 * are checked on both, each by its code and its message: ranges sharing a
 * page are refused naming the other registration, the exact same range
 * counts a reference, partial and unknown unregisters are refused, memory
 * inside a libvmmx buffer is refused, vmmx_ctx_destroy unregisters what is
 * left.  Data goes through a registered range into a buffer and back, and
 * the fault layer fails the driver's registration and unregistration.
 *
 * On the cuda backend the registration path runs against the real driver
 * (and the HMM part is skipped unless the device has pageable access).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

/* Assertions of rules(): both paths run it, so the plan counts it twice. */
#define RULES_TESTS 63

static size_t ps;

static struct vmm_counts counts(struct vmmx_ctx *ctx)
{
	struct vmm_counts c;

	vmm_counts(vmmx__ctx_vmm(ctx), &c);
	return c;
}

/* "%p" of @p, as libvmmx prints addresses in its messages. */
static const char *addr(const void *p)
{
	static char s[4][32];
	static int i;

	i = (i + 1) % 4;
	snprintf(s[i], sizeof(s[i]), "%p", p);
	return s[i];
}

/* Occurrences of @needle in @hay. */
static int occurrences(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
		n++;
	return n;
}

/*
 * The documented rules on one context; @hmm says which path it takes.
 * RULES_TESTS assertions.
 */
static void rules(struct vmmx_ctx *ctx, bool hmm, const char *path)
{
	enum vmmx_host_access want = hmm ? VMMX_HOST_ACCESS_HMM : VMMX_HOST_ACCESS_REGISTER;
	struct vmmx_ctx_info info;
	struct vmmx_stats st0, st;
	struct vmm_counts vc0, vc;
	struct vmmx_buf *buf = NULL;
	char *page, *a, *mem, *b;
	void *d = NULL, *d2 = NULL, *d3 = NULL, *dm = NULL, *nothing = (void *)0x1;
	size_t alen = 1000, mlen = 6 * MiB + 123;
	bool hit;
	int err;

	/*
	 * The pageable path is HMM or ATS as the device's attributes say
	 * (the sim's VMMX_SIM_PAGEABLE reports host page tables too: ATS);
	 * vmmx_hmm_probe reads the same attributes.
	 */
	{
		struct vmmx_hmm_info h;

		memset(&h, 0, sizeof(h));
		h.size = sizeof(h);
		err = vmmx_hmm_probe(ctx, &h);
		if (hmm) {
			want = !err && h.state == VMMX_HMM_HMM ? VMMX_HOST_ACCESS_HMM
							       : VMMX_HOST_ACCESS_ATS;
			ok(!err && h.state != VMMX_HMM_ABSENT,
			   "%s: vmmx_hmm_probe: pageable access (%s)", path,
			   err ? "?" : h.state == VMMX_HMM_HMM ? "HMM" : "ATS");
		} else {
			ok(!err && h.state == VMMX_HMM_ABSENT,
			   "%s: vmmx_hmm_probe: no pageable access", path);
		}
	}
	memset(&info, 0, sizeof(info));
	info.size = sizeof(info);
	err = vmmx_ctx_query(ctx, &info);
	is_int(want, err ? -1 : (int)info.host_access,
	       "%s: vmmx_ctx_query says host_access %s", path,
	       want == VMMX_HOST_ACCESS_REGISTER ? "REGISTER"
	       : want == VMMX_HOST_ACCESS_HMM    ? "HMM"
						 : "ATS");
	st0 = test_stats(ctx);
	vc0 = counts(ctx);
	is_int(want, (int)st0.host_access, "%s: vmmx_stats_get says the same", path);
	{
		char json[16384], needle[64];

		snprintf(needle, sizeof(needle), "\"host_access\":\"%s\"",
			 want == VMMX_HOST_ACCESS_REGISTER ? "register"
			 : want == VMMX_HOST_ACCESS_HMM    ? "hmm"
							   : "ats");
		if (vmmx_stats_json(ctx, json, sizeof(json), NULL))
			json[0] = '\0';
		like(json, needle, "%s: vmmx_stats_json says the same", path);
	}

	/* Four pages; a is unaligned and short, inside the first page. */
	page = aligned_alloc(ps, 4 * ps);
	if (!page)
		bail("out of memory");
	memset(page, 0, 4 * ps);
	a = page + 3;
	is_err(0, vmmx_host_register(ctx, a, alen, &d),
	       "%s: vmmx_host_register accepts an unaligned range (+3, 1000 bytes)", path);
	if (hmm)
		ok(d == a, "%s: vmmx_host_register: the device pointer is the pointer itself",
		   path);
	else
		ok(d != NULL, "%s: vmmx_host_register: a device pointer", path);
	st = test_stats(ctx);
	is_uint(1, st.registrations, "%s: vmmx_stats_get: one registration", path);
	is_uint(alen, st.registered_bytes, "%s: vmmx_stats_get: registered_bytes is its length",
		path);
	vc = counts(ctx);
	is_uint(hmm ? 0 : 1, st.driver_calls[VMMX_OP_REGISTER] - st0.driver_calls[VMMX_OP_REGISTER],
		"%s: vmmx_host_register: %s driver registration call", path, hmm ? "no" : "one");
	is_int(vc0.registrations + (hmm ? 0 : 1), vc.registrations,
	       "%s: vmm_counts: %s live driver registration", path, hmm ? "no" : "one");

	/* The exact same range: a reference, the same pointer, no driver call. */
	is_err(0, vmmx_host_register(ctx, a, alen, &d2),
	       "%s: vmmx_host_register: the same range again", path);
	ok(d2 == d, "%s: vmmx_host_register: the same range gets the same device pointer", path);
	st = test_stats(ctx);
	is_uint(1, st.registrations, "%s: vmmx_stats_get: still one registration", path);
	is_uint(hmm ? 0 : 1, st.driver_calls[VMMX_OP_REGISTER] - st0.driver_calls[VMMX_OP_REGISTER],
		"%s: the second reference made no driver call", path);

	/* Sharing a page without sharing a byte, then sharing bytes. */
	d3 = nothing;
	is_err(-VMMX_EEXIST, vmmx_host_register(ctx, page + 2000, 16, &d3),
	       "%s: vmmx_host_register refuses a range sharing a page with another", path);
	like(vmmx_last_error(), addr(a), "%s: the message names the other registration (%p)", path,
	     (void *)a);
	ok(d3 == nothing, "%s: vmmx_host_register: *dptr_p untouched on failure", path);
	is_err(-VMMX_EEXIST, vmmx_host_register(ctx, page, 2 * ps, &d3),
	       "%s: vmmx_host_register refuses a range overlapping another", path);
	like(vmmx_last_error(), addr(a), "%s: that message names the other registration too", path);
	is_err(-VMMX_EEXIST, vmmx_host_register(ctx, a, alen + 1, &d3),
	       "%s: vmmx_host_register refuses the same base with another length", path);
	st = test_stats(ctx);
	is_uint(1, st.registrations, "%s: refused ranges recorded nothing", path);
	is_uint(hmm ? 0 : 1, st.driver_calls[VMMX_OP_REGISTER] - st0.driver_calls[VMMX_OP_REGISTER],
		"%s: refused ranges made no driver call", path);

	/* The next page is free: adjacent ranges do not share pages. */
	b = page + ps;
	is_err(0, vmmx_host_register(ctx, b, 2 * ps, &d3),
	       "%s: vmmx_host_register: a range starting on the next page", path);
	is_uint(2, test_stats(ctx).registrations, "%s: vmmx_stats_get: two registrations", path);

	/* Unregister: base only, known only, one reference at a time. */
	is_err(-VMMX_EINVAL, vmmx_host_unregister(ctx, a + 10),
	       "%s: vmmx_host_unregister refuses an address inside a registration", path);
	like(vmmx_last_error(), "partial unregistering is not supported",
	     "%s: the message says partial unregistering is not supported", path);
	like(vmmx_last_error(), addr(a), "%s: and names the registration", path);
	is_err(-VMMX_ENOENT, vmmx_host_unregister(ctx, page + 3 * ps + 8),
	       "%s: vmmx_host_unregister: an unknown pointer", path);
	like(vmmx_last_error(), "is not registered", "%s: the message says it is not registered",
	     path);
	is_err(-VMMX_EINVAL, vmmx_host_unregister(ctx, NULL), "%s: vmmx_host_unregister(NULL)",
	       path);
	is_err(-VMMX_EINVAL, vmmx_host_unregister(NULL, a), "%s: vmmx_host_unregister(NULL ctx)",
	       path);

	is_err(0, vmmx_host_unregister(ctx, a), "%s: vmmx_host_unregister: first reference", path);
	st = test_stats(ctx);
	vc = counts(ctx);
	ok(st.registrations == 2 && st.registered_bytes == alen + 2 * ps,
	   "%s: the range is still registered after the first of two unregisters", path);
	ok(st.driver_calls[VMMX_OP_UNREGISTER] == st0.driver_calls[VMMX_OP_UNREGISTER] &&
		   vc.registrations == vc0.registrations + (hmm ? 0 : 2),
	   "%s: the first unregister made no driver call", path);
	is_err(0, vmmx_host_unregister(ctx, a), "%s: vmmx_host_unregister: last reference", path);
	st = test_stats(ctx);
	vc = counts(ctx);
	ok(st.registrations == 1 && st.registered_bytes == 2 * ps,
	   "%s: the last unregister drops the registration", path);
	is_uint(hmm ? 0 : 1,
		st.driver_calls[VMMX_OP_UNREGISTER] - st0.driver_calls[VMMX_OP_UNREGISTER],
		"%s: the driver's registration goes only at the last unregister", path);
	is_int(vc0.registrations + (hmm ? 0 : 1), vc.registrations,
	       "%s: vmm_counts: one live driver registration left", path);
	is_err(-VMMX_ENOENT, vmmx_host_unregister(ctx, a),
	       "%s: vmmx_host_unregister: a third time is unknown", path);
	/* The page is free again: a range sharing it with the old one is fine now. */
	is_err(0, vmmx_host_register(ctx, page + 2000, 16, &d3),
	       "%s: vmmx_host_register: the freed page can be registered again", path);
	is_err(0, vmmx_host_unregister(ctx, page + 2000), "%s: and unregistered", path);
	is_err(0, vmmx_host_unregister(ctx, b), "%s: vmmx_host_unregister: the second range",
	       path);

	/* Arguments. */
	d3 = nothing;
	is_err(-VMMX_EINVAL, vmmx_host_register(ctx, NULL, 16, &d3),
	       "%s: vmmx_host_register(NULL pointer)", path);
	is_err(-VMMX_EINVAL, vmmx_host_register(ctx, a, 0, &d3),
	       "%s: vmmx_host_register(zero length)", path);
	is_err(-VMMX_EINVAL, vmmx_host_register(ctx, a, 16, NULL),
	       "%s: vmmx_host_register(NULL dptr_p)", path);
	is_err(-VMMX_EINVAL, vmmx_host_register(ctx, a, SIZE_MAX, &d3),
	       "%s: vmmx_host_register: a range that wraps", path);

	/* Memory of a libvmmx buffer is GPU-visible already. */
	if (vmmx_buf_create(ctx, 16 * MiB, "device-first", &buf) || vmmx_buf_resize(buf, 8 * MiB))
		bail("no buffer: %s", vmmx_last_error());
	{
		char *p = vmmx_buf_ptr(buf);
		bool all;

		is_err(-VMMX_EINVAL, vmmx_host_register(ctx, p + 100, 1000, &d3),
		       "%s: vmmx_host_register refuses a range inside a libvmmx buffer", path);
		like(vmmx_last_error(), "libvmmx buffer", "%s: the message says why", path);
		all = vmmx_host_register(ctx, p + 12 * MiB, MiB, &d3) == -VMMX_EINVAL;
		all = all && vmmx_host_register(ctx, p - ps, 2 * ps, &d3) == -VMMX_EINVAL;
		ok(all, "%s: ... and one in its unmapped tail, and one running into it", path);
		ok(d3 == nothing && test_stats(ctx).registrations == 0,
		   "%s: refused arguments recorded nothing", path);
	}

	/* Data: registered malloc'd memory into a buffer and back. */
	mem = malloc(mlen);
	if (!mem)
		bail("out of memory");
	for (size_t i = 0; i < mlen; i++)
		mem[i] = (char)test_pattern_byte(i, 77);
	err = vmmx_host_register(ctx, mem + 1, mlen - 1, &dm);
	is_err(0, err, "%s: vmmx_host_register: a malloc'd 6 MiB range", path);
	if (err)
		dm = mem + 1;
	is_err(0, vmmx_memcpy(ctx, vmmx_buf_ptr(buf), dm, mlen - 1),
	       "%s: vmmx_memcpy: registered memory into a device-first buffer", path);
	/* test_check reads from src + off: src is one byte before the buffer. */
	ok(test_check(ctx, (char *)vmmx_buf_ptr(buf) - 1, 1, mlen - 1, 77) == SIZE_MAX,
	   "%s: the buffer holds the registered memory's bytes", path);
	memset(mem, 0, mlen);
	is_err(0, vmmx_memcpy(ctx, dm, vmmx_buf_ptr(buf), mlen - 1),
	       "%s: vmmx_memcpy: the buffer back into registered memory", path);
	{
		size_t bad = 0;

		for (size_t i = 1; i < mlen; i++)
			bad += (uint8_t)mem[i] != test_pattern_byte(i, 77);
		is_uint(0, bad, "%s: the CPU reads them in the malloc'd memory", path);
	}
	is_err(0, vmmx_host_unregister(ctx, mem + 1), "%s: vmmx_host_unregister: the 6 MiB", path);

	/* The fault layer: a failed driver registration records nothing. */
	vmm_fault_arm(vmmx__ctx_vmm(ctx), VMMX_OP_REGISTER, 1, 0);
	err = vmmx_host_register(ctx, a, alen, &d3);
	hit = counts(ctx).injected > vc0.injected;
	vmm_fault_disarm_all(vmmx__ctx_vmm(ctx));
	if (hmm) {
		ok(!err && !hit, "%s: vmmx_host_register makes no driver call to fail", path);
		ok(test_stats(ctx).registrations == 1, "%s: and records the range", path);
		vmmx_host_unregister(ctx, a);
	} else {
		is_err(-VMMX_EFAULTINJ, err, "%s: vmmx_host_register: the driver call fails", path);
		ok(test_stats(ctx).registrations == 0 && counts(ctx).registrations == vc0.registrations,
		   "%s: the failed registration recorded nothing", path);
	}
	is_err(0, vmmx_host_register(ctx, a, alen, &d3), "%s: vmmx_host_register: a retry", path);
	vmm_fault_arm(vmmx__ctx_vmm(ctx), VMMX_OP_UNREGISTER, 1, 0);
	err = vmmx_host_unregister(ctx, a);
	vmm_fault_disarm_all(vmmx__ctx_vmm(ctx));
	if (hmm) {
		is_err(0, err, "%s: vmmx_host_unregister makes no driver call to fail", path);
		ok(test_stats(ctx).registrations == 0, "%s: and drops the range", path);
		is_err(-VMMX_ENOENT, vmmx_host_unregister(ctx, a), "%s: it is gone", path);
	} else {
		is_err(-VMMX_EFAULTINJ, err, "%s: vmmx_host_unregister: the driver call fails",
		       path);
		ok(test_stats(ctx).registrations == 1 &&
		       counts(ctx).registrations == vc0.registrations + 1,
		   "%s: the failed unregistration keeps the record", path);
		is_err(0, vmmx_host_unregister(ctx, a), "%s: vmmx_host_unregister: a retry", path);
	}
	vc = counts(ctx);
	ok(test_stats(ctx).registrations == 0 && test_stats(ctx).registered_bytes == 0 &&
		   vc.registrations == vc0.registrations,
	   "%s: nothing registered at the end", path);

	vmmx_buf_destroy(buf);
	free(mem);
	free(page);
}

/*
 * vmmx_ctx_destroy with registrations left: a warning each, and the
 * driver's registrations go (a fresh context can register the memory
 * again: on cuda both contexts share the device's primary context, where a
 * registration left behind would refuse it).
 */
static void destroy_left(const char *const *vars, const char *path)
{
	struct vmmx_ctx *ctx = test_ctx(vars);
	/* Page-aligned: two malloc'd blocks may share a page, which is refused. */
	char *m1 = aligned_alloc(ps, 3 * MiB), *m2 = aligned_alloc(ps, MiB);
	void *d;
	int err;

	if (!m1 || !m2)
		bail("out of memory");
	err = vmmx_host_register(ctx, m1, 3 * MiB, &d);
	err = err ? err : vmmx_host_register(ctx, m1, 3 * MiB, &d);
	err = err ? err : vmmx_host_register(ctx, m2 + 5, MiB - 5, &d);
	is_err(0, err, "%s: two ranges registered, one of them twice", path);

	/* White box: the teardown alone leaves no driver registration. */
	vmmx__host_teardown(ctx);
	ok(counts(ctx).registrations == 0 && test_stats(ctx).registrations == 0 &&
		   test_stats(ctx).registered_bytes == 0,
	   "%s: vmmx__host_teardown: no registration left, in the stats or the driver", path);
	like(test_log(), "still registered; unregistering it",
	     "%s: vmmx__host_teardown warns about what was left", path);

	err = vmmx_host_register(ctx, m1, 3 * MiB, &d);
	err = err ? err : vmmx_host_register(ctx, m2 + 5, MiB - 5, &d);
	is_err(0, err, "%s: the same ranges register again", path);
	test_log_clear();
	vmmx_ctx_destroy(ctx);
	is_int(2, occurrences(test_log(), "still registered; unregistering it"),
	       "%s: vmmx_ctx_destroy warns once per registration left", path);
	ok(strstr(test_log(), addr(m1)) && strstr(test_log(), addr(m2 + 5)),
	   "%s: the warnings name the ranges", path);

	ctx = test_ctx(vars);
	err = vmmx_host_register(ctx, m1, 3 * MiB, &d);
	is_err(0, err, "%s: a fresh context registers the same memory", path);
	is_err(0, vmmx_host_unregister(ctx, m1), "%s: and unregisters it", path);
	test_log_clear();

	/*
	 * A driver that refuses the unregistration at destroy: the record still
	 * goes (ASan sees it freed).  Only on the sim: on a GPU the range would
	 * stay registered in the primary context after the memory is freed.
	 */
	if (test_on_sim()) {
		if (vmmx_host_register(ctx, m2, MiB, &d))
			bail("vmmx_host_register: %s", vmmx_last_error());
		vmm_fault_arm(vmmx__ctx_vmm(ctx), VMMX_OP_UNREGISTER, 1, 0);
		vmmx_ctx_destroy(ctx);
		is_int(1, occurrences(test_log(), "still registered; unregistering it"),
		       "%s: vmmx_ctx_destroy with a failing unregistration warns and returns",
		       path);
	} else {
		vmmx_ctx_destroy(ctx);
		skip("a failing unregistration at destroy: sim only");
	}
	test_log_clear();
	free(m1);
	free(m2);
}

int main(void)
{
	static const char *const reg_vars[] = { NULL };
	static const char *const hmm_vars[] = { "VMMX_SIM_PAGEABLE=1", NULL };
	struct vmmx_ctx *ctx;
	long p = sysconf(_SC_PAGESIZE);

	ps = p > 0 ? (size_t)p : 4096;
	plan(2 * RULES_TESTS + 2 * 9);

	ctx = test_ctx(reg_vars);
	if (test_stats(ctx).host_access != VMMX_HOST_ACCESS_REGISTER) {
		/* A GPU with HMM or ATS: the registration path cannot be forced. */
		diag("the device has pageable access: the registration path is not taken");
		for (int i = 0; i < RULES_TESTS + 9; i++)
			skip("registration path: the device has pageable memory access");
	} else {
		rules(ctx, false, "register");
		destroy_left(reg_vars, "register");
	}
	vmmx_ctx_destroy(ctx);

	if (!test_on_sim()) {
		for (int i = 0; i < RULES_TESTS + 9; i++)
			skip("pageable path: VMMX_SIM_PAGEABLE needs the sim backend");
	} else {
		ctx = test_ctx(hmm_vars);
		rules(ctx, true, "pageable");
		vmmx_ctx_destroy(ctx);
		destroy_left(hmm_vars, "pageable");
	}
	return tap_done();
}
