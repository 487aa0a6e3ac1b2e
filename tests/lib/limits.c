// SPDX-License-Identifier: MIT
/*
 * limits.c - out-of-memory and limit failures are atomic: the buffer keeps
 * its size, placement and data, and nothing is leaked.
 */
#include "config.h"

#include <string.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

struct snap {
	size_t size;
	struct vmmx_residency r;
	struct vmmx_stats st;
	struct vmm_counts vc;
};

static void take(struct vmmx_ctx *ctx, struct vmmx_buf *buf, struct snap *s)
{
	memset(s, 0, sizeof(*s));
	s->size = vmmx_buf_size(buf);
	vmmx_buf_residency(buf, 0, s->size, &s->r);
	s->st.size = sizeof(s->st);
	vmmx_stats_get(ctx, &s->st);
	vmm_counts(vmmx__ctx_vmm(ctx), &s->vc);
}

static bool same(const struct snap *a, const struct snap *b)
{
	return a->size == b->size && a->r.device == b->r.device && a->r.host == b->r.host &&
	       a->st.device_bytes == b->st.device_bytes && a->st.host_bytes == b->st.host_bytes &&
	       a->vc.handles == b->vc.handles && a->vc.mapped_bytes == b->vc.mapped_bytes &&
	       a->vc.reservations == b->vc.reservations;
}

int main(void)
{
	/* No chunk cache: what a failed grow made must really be released. */
	static const char *const v1[] = { "VMMX_DEVICE_LIMIT=8MiB", "VMMX_HOST_LIMIT=4MiB",
					   "VMMX_CACHE_LIMIT=0", NULL };
	static const char *const v2[] = { "VMMX_SIM_DEVICE_MEM=8MiB", "VMMX_CACHE_LIMIT=0", NULL };
	struct vmmx_ctx *ctx = test_ctx(v1);
	struct vmmx_buf *buf, *other;
	struct snap a, b;

	plan(27);
	/* device only: the device limit is a hard wall */
	is_err(0, vmmx_buf_create(ctx, 64 * MiB, "device", &buf), "vmmx_buf_create (device)");
	is_err(0, vmmx_buf_resize(buf, 6 * MiB), "6 MiB under an 8 MiB device limit");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(buf), 0, 6 * MiB, 3), "pattern written");
	take(ctx, buf, &a);
	is_err(-VMMX_ENOMEM, vmmx_buf_resize(buf, 10 * MiB), "vmmx_buf_resize past the device limit: ENOMEM");
	like(vmmx_last_error(), "device:0 at its limit", "the message says the device is at its limit");
	like(vmmx_last_error(), "policy device", "the message names the policy");
	take(ctx, buf, &b);
	ok(same(&a, &b), "size, residency, stats and driver objects unchanged");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, 6 * MiB, 3), "data unchanged");
	is_err(0, vmmx_buf_resize(buf, 8 * MiB), "exactly the limit still fits");
	vmmx_buf_destroy(buf);

	/* device-first: device, then host, then a clean failure with partial progress unwound */
	is_err(0, vmmx_buf_create(ctx, 64 * MiB, NULL, &buf), "vmmx_buf_create (default policy)");
	take(ctx, buf, &a);
	is_err(-VMMX_ENOMEM, vmmx_buf_resize(buf, 14 * MiB), "14 MiB > 8 MiB device + 4 MiB host: ENOMEM");
	like(vmmx_last_error(), "device:0 at its limit; host at its limit", "the message gives each location's reason");
	take(ctx, buf, &b);
	ok(same(&a, &b), "the chunks made before the failure were unwound");
	is_err(0, vmmx_buf_resize(buf, 12 * MiB), "12 MiB fits exactly (8 device + 4 host)");
	is_err(0, test_fill(ctx, vmmx_buf_ptr(buf), 0, 12 * MiB, 4), "pattern written");
	take(ctx, buf, &a);
	is_err(-VMMX_ENOMEM, vmmx_buf_resize(buf, 14 * MiB), "one more chunk: ENOMEM");
	take(ctx, buf, &b);
	ok(same(&a, &b), "nothing changed");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, 12 * MiB, 4), "data intact");

	/* limits are per context, shared by its buffers */
	is_err(0, vmmx_buf_create(ctx, 8 * MiB, "host", &other), "a second buffer");
	is_err(-VMMX_ENOMEM, vmmx_buf_resize(other, 2 * MiB), "the host limit is shared: ENOMEM");
	is_err(0, vmmx_buf_resize(buf, 8 * MiB), "the first buffer gives its host chunk back");
	is_err(0, vmmx_buf_resize(other, 2 * MiB), "now the second buffer fits");
	vmmx_buf_destroy(other);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);

	/* The driver's own out-of-memory (sim device capacity, no limit) is atomic too. */
	if (test_on_sim()) {
		ctx = test_ctx(v2);
		vmmx_buf_create(ctx, 64 * MiB, "device", &buf);
		vmmx_buf_resize(buf, 4 * MiB);
		take(ctx, buf, &a);
		is_err(-VMMX_ENOMEM, vmmx_buf_resize(buf, 10 * MiB), "device memory exhausted: ENOMEM");
		take(ctx, buf, &b);
		ok(same(&a, &b), "nothing changed after the driver's out-of-memory");
		vmmx_buf_destroy(buf);
		vmmx_ctx_destroy(ctx);
	} else {
		skip("exhausting a real GPU is not done in unit tests");
		skip("exhausting a real GPU is not done in unit tests");
	}

	/* The driver saying out-of-memory for a big handle makes libvmmx try smaller ones. */
	ctx = test_ctx(NULL);
	vmmx_buf_create(ctx, 64 * MiB, "device", &buf);
	vmm_fault_arm(vmmx__ctx_vmm(ctx), VMMX_OP_CREATE, 1, -VMMX_ENOMEM);
	is_err(0, vmmx_buf_resize(buf, 8 * MiB), "an 8 MiB grow survives the driver refusing 8 MiB");
	{
		struct vmmx_chunk_info c[4];
		size_t n = 0;

		vmmx_buf_chunks(buf, c, 4, &n);
		ok(n == 2 && c[0].size == 4 * MiB && c[1].size == 4 * MiB,
		   "it was made of two 4 MiB handles (%zu chunks)", n);
		ok(n >= 1 && c[0].loc.kind == VMMX_LOC_DEVICE, "still on the device");
	}
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
