// SPDX-License-Identifier: MIT
/*
 * foreign.c - vmmx_memcpy and vmmx_memset on memory that is not the
 * context's own: another context's buffer (device and host chunks), raw
 * device memory no context knows (the driver's VMM calls; cuMemAlloc on a
 * GPU), registered host memory, plain host memory, and memory no copy may
 * touch (unmapped, PROT_NONE, read-only as a destination, reserved address
 * space with nothing mapped).  Every readable kind is copied both ways and
 * memset, and the bytes are checked through the memory's owner; every
 * refusal is checked by code and message.  On sim, device memory is
 * PROT_NONE to the CPU, so a CPU load from it would kill this test: passing
 * shows the CPU never touched it.  The same test runs with
 * VMMX_BACKEND=cuda on a GPU.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/cuda.h"
#include "tests/tap/vmmx_test.h"

#define N (64 * 1024)

/* A region and the way its owner (not the context under test) reads and writes it. */
struct region {
	const char *name;
	unsigned char *p;
	struct vmmx_ctx *owner_ctx; /* a libvmmx context's buffer */
	struct vmm *owner_vmm;	    /* raw driver memory */
				    /* neither: host memory the CPU reads and writes */
};

static struct vmm *raw; /* a driver instance outside every context */

static int owner_put(const struct region *r, const void *src, size_t n)
{
	if (r->owner_ctx)
		return vmmx_memcpy(r->owner_ctx, r->p, src, n);
	if (r->owner_vmm)
		return vmm_copy(r->owner_vmm, r->p, src, n);
	memcpy(r->p, src, n);
	return 0;
}

static int owner_get(const struct region *r, void *dst, size_t n)
{
	if (r->owner_ctx)
		return vmmx_memcpy(r->owner_ctx, dst, r->p, n);
	if (r->owner_vmm)
		return vmm_copy(r->owner_vmm, dst, r->p, n);
	memcpy(dst, r->p, n);
	return 0;
}

static void fill(unsigned char *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = test_pattern_byte(i, seed);
}

static bool same(const unsigned char *b, size_t n, uint32_t seed)
{
	for (size_t i = 0; i < n; i++)
		if (b[i] != test_pattern_byte(i, seed))
			return false;
	return true;
}

/* 10 assertions: source, destination, buffer to region, memset; each by code and bytes. */
static void readable_writable(struct vmmx_ctx *ctx, const struct region *r, unsigned char *own,
			      uint32_t seed)
{
	unsigned char *a = malloc(N), *b = malloc(N);
	bool good;

	if (!a || !b)
		bail("out of memory");
	fill(a, N, seed);
	if (owner_put(r, a, N))
		bail("%s: the owner cannot write it: %s", r->name, vmmx_last_error());
	memset(b, 0, N);
	is_err(0, vmmx_memcpy(ctx, b, r->p, N), "vmmx_memcpy from %s", r->name);
	ok(same(b, N, seed), "%s: the bytes read are the owner's", r->name);

	fill(a, N, seed + 1);
	is_err(0, vmmx_memcpy(ctx, r->p, a, N), "vmmx_memcpy to %s", r->name);
	memset(b, 0, N);
	good = !owner_get(r, b, N) && same(b, N, seed + 1);
	ok(good, "%s: the owner reads what was written", r->name);

	/* own buffer (a device chunk) -> region: the driver on both sides */
	is_err(0, test_fill(ctx, own, 0, N, seed + 2), "fill the context's own buffer");
	is_err(0, vmmx_memcpy(ctx, r->p, own, N), "vmmx_memcpy from its own buffer to %s", r->name);
	memset(b, 0, N);
	good = !owner_get(r, b, N) && same(b, N, seed + 2);
	ok(good, "%s: holds the buffer's bytes", r->name);

	is_err(0, vmmx_memset(ctx, r->p + 1, 0x3c, N - 2), "vmmx_memset of %s", r->name);
	memset(b, 0, N);
	good = !owner_get(r, b, N) && b[0] == test_pattern_byte(0, seed + 2) &&
	       b[N - 1] == test_pattern_byte(N - 1, seed + 2);
	for (size_t i = 1; i < N - 1 && good; i++)
		good = b[i] == 0x3c;
	ok(good, "%s: memset wrote exactly its range", r->name);
	is_err(0, vmmx_memcpy(ctx, own + N, r->p, N), "vmmx_memcpy from %s into its own buffer",
	       r->name);
	free(a);
	free(b);
}

/*
 * 6 assertions (4 without @src_why: a source it may be): as source, as
 * destination, memset; each code and message.
 */
static void refused(struct vmmx_ctx *ctx, const char *name, void *p, const char *src_why,
		    const char *dst_why)
{
	unsigned char host[64];

	if (src_why) {
		is_err(-VMMX_EFAULT, vmmx_memcpy(ctx, host, p, sizeof(host)), "vmmx_memcpy from %s",
		       name);
		like(vmmx_last_error(), src_why, "the message says the source %s", src_why);
	}
	is_err(-VMMX_EFAULT, vmmx_memcpy(ctx, p, host, sizeof(host)), "vmmx_memcpy to %s", name);
	like(vmmx_last_error(), dst_why, "the message says the destination %s", dst_why);
	is_err(-VMMX_EFAULT, vmmx_memset(ctx, p, 0, sizeof(host)), "vmmx_memset of %s", name);
	like(vmmx_last_error(), dst_why, "the message says the destination %s", dst_why);
}

/* The raw instances report to the thread's last error, as a context's do. */
static void raw_report(void *arg, int level, int err, const char *msg)
{
	if (err)
		vmmx__set_last_error(msg);
}

static struct vmm *raw_open(void)
{
	struct vmm_params p = { .backend = test_backend(), .device = 0, .report = raw_report };
	struct vmm *v;

	if (vmm_open(&p, &v))
		bail("raw %s instance: cannot open", test_backend());
	return v;
}

/* Raw device memory: the VMM sequence by hand, as another library would. */
static void *raw_device(struct vmm *v, size_t size, vmm_handle_t *h_p)
{
	struct vmm_access acc = { .who = { VMMX_LOC_DEVICE, 0 }, .flags = VMM_ACCESS_RW };
	void *va;

	if (vmm_reserve(v, size, 0, &va) ||
	    vmm_create(v, (struct vmmx_loc){ VMMX_LOC_DEVICE, 0 }, size, h_p) ||
	    vmm_map(v, va, size, *h_p) || vmm_set_access(v, va, size, &acc, 1))
		bail("raw device memory: %s", vmmx_last_error());
	return va;
}

int main(void)
{
	static const char *const vars[] = { "VMMX_DEVICE_LIMIT=4MiB", "VMMX_CHUNK_MAX=2MiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars), *other = test_ctx(vars);
	struct vmmx_buf *own, *ob;
	size_t page = (size_t)sysconf(_SC_PAGESIZE), raw_size = 2 * MiB;
	unsigned char *op, *hole, *none, *ro, *plain, *reg, *cumem = NULL, host[N];
	struct region r;
	vmm_handle_t rh;
	void *rawp, *dptr;
	uint64_t before;
	int err;

	plan(10 * 6 + 4 + 6 + 6 + 4 + 2 + 4 + 2);
	if (vmmx_buf_create(ctx, 16 * MiB, NULL, &own) || vmmx_buf_resize(own, 4 * MiB) ||
	    vmmx_buf_create(other, 16 * MiB, NULL, &ob) || vmmx_buf_resize(ob, 8 * MiB))
		bail("buffers: %s", vmmx_last_error());
	op = vmmx_buf_ptr(ob);
	raw = raw_open();
	rawp = raw_device(raw, raw_size, &rh);

	r = (struct region){ .name = "another context's device chunk", .p = op, .owner_ctx = other };
	readable_writable(ctx, &r, vmmx_buf_ptr(own), 10);
	r = (struct region){
	    .name = "another context's host chunk", .p = op + 6 * MiB, .owner_ctx = other };
	readable_writable(ctx, &r, vmmx_buf_ptr(own), 20);
	r = (struct region){
	    .name = "raw device memory (VMM calls outside libvmmx)", .p = rawp, .owner_vmm = raw };
	readable_writable(ctx, &r, vmmx_buf_ptr(own), 30);

	plain = aligned_alloc(page, 2 * N);
	reg = aligned_alloc(page, 2 * N);
	if (!plain || !reg)
		bail("out of memory");
	if (vmmx_host_register(other, reg, 2 * N, &dptr))
		bail("vmmx_host_register: %s", vmmx_last_error());
	r = (struct region){ .name = "host memory registered by another context", .p = reg };
	readable_writable(ctx, &r, vmmx_buf_ptr(own), 40);
	r = (struct region){ .name = "plain host memory", .p = plain };
	readable_writable(ctx, &r, vmmx_buf_ptr(own), 50);

	/* cuMemAlloc memory exists on a GPU only; on sim another raw instance stands in. */
	if (!test_on_sim() && !tcuda_open(0) && !tcuda_mem_alloc(2 * MiB, (void **)&cumem)) {
		r = (struct region){ .name = "cuMemAlloc memory", .p = cumem, .owner_vmm = raw };
		readable_writable(ctx, &r, vmmx_buf_ptr(own), 60);
	} else {
		struct vmm *raw2 = raw_open();
		vmm_handle_t h2;

		r = (struct region){ .name = "device memory of a second raw instance",
				    .p = raw_device(raw2, raw_size, &h2),
				    .owner_vmm = raw2 };
		readable_writable(ctx, &r, vmmx_buf_ptr(own), 60);
		vmm_unmap(raw2, r.p, raw_size);
		vmm_release(raw2, h2);
		vmm_unreserve(raw2, r.p, raw_size);
		vmm_close(raw2);
	}

	/* Across another context's device/host boundary: split, one driver copy per side. */
	if (test_fill(other, op, 4 * MiB - N / 2, N, 70))
		bail("fill: %s", vmmx_last_error());
	before = test_driver_calls(ctx, VMMX_OP_COPY);
	is_err(0, vmmx_memcpy(ctx, host, op + 4 * MiB - N / 2, N),
	       "vmmx_memcpy across another context's device/host chunk boundary");
	is_uint(2, test_driver_calls(ctx, VMMX_OP_COPY) - before, "split into 2 driver copies at the change of memory");
	{
		bool good = true;

		for (size_t i = 0; i < N && good; i++)
			good = host[i] == test_pattern_byte(4 * MiB - N / 2 + i, 70);
		ok(good, "the bytes on both sides of the boundary are right");
	}
	is_err(0, vmmx_memcpy(ctx, op + 4 * MiB - N / 2, host, N),
	       "vmmx_memcpy to another context's buffer across its boundary");

	/* What no copy may touch. */
	hole = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	none = mmap(NULL, page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ro = mmap(NULL, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hole == MAP_FAILED || none == MAP_FAILED || ro == MAP_FAILED)
		bail("mmap failed");
	munmap(hole, 2 * page);
	refused(ctx, "unmapped memory", hole, "is not mapped", "is not mapped");
	refused(ctx, "a PROT_NONE mapping", none, "is not readable", "is not readable");
	refused(ctx, "a read-only mapping", ro, NULL, "is not writable");
	is_err(0, vmmx_memcpy(ctx, host, ro, 64), "vmmx_memcpy from a read-only mapping");
	ok(host[0] == 0 && host[63] == 0, "reads its zeros");

	/* Another context's reservation past its mapped size: nothing there to copy. */
	err = vmmx_memcpy(ctx, host, op + 12 * MiB, 64);
	if (test_on_sim()) {
		is_err(-VMMX_EFAULT, err, "vmmx_memcpy from reserved, unmapped address space");
		like(vmmx_last_error(), "reserved device address space", "the message says why");
		err = vmmx_memset(ctx, op + 12 * MiB, 0, 64);
		is_err(-VMMX_EFAULT, err, "vmmx_memset of reserved, unmapped address space");
		like(vmmx_last_error(), "nothing mapped", "the message says why");
	} else {
		ok(err < 0, "vmmx_memcpy from reserved, unmapped address space fails: %s",
		   vmmx_last_error());
		ok(vmmx_last_error()[0], "with a message");
		err = vmmx_memset(ctx, op + 12 * MiB, 0, 64);
		ok(err < 0, "vmmx_memset of reserved, unmapped address space fails: %s",
		   vmmx_last_error());
		ok(vmmx_last_error()[0], "with a message");
	}
	/* The sim itself refuses plain memory that is not mapped (the lib checks first). */
	if (test_on_sim()) {
		is_err(-VMMX_EFAULT, vmm_copy(raw, host, hole, 64),
		       "sim: a driver copy from a hole");
		like(vmmx_last_error(), "not mapped", "the sim says it is not mapped");
	} else {
		skip("the real driver's behaviour on a hole is its own");
		skip("the real driver's behaviour on a hole is its own");
	}

	vmmx_host_unregister(other, reg);
	if (cumem)
		tcuda_mem_free(cumem);
	tcuda_close();
	munmap(none, page);
	munmap(ro, page);
	free(plain);
	free(reg);
	vmm_unmap(raw, rawp, raw_size);
	vmm_release(raw, rh);
	vmm_unreserve(raw, rawp, raw_size);
	vmm_close(raw);
	vmmx_buf_destroy(own);
	vmmx_buf_destroy(ob);
	vmmx_ctx_destroy(other);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
