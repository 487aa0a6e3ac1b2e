// SPDX-License-Identifier: MIT
/*
 * cuda.c - the cuda backend through the vmm_*() dispatch functions, on a
 * GPU: device attributes and peer access of every device, host registration
 * of malloc'd memory with data moved through a device chunk and back, and
 * streams with asynchronous copies between a device chunk and a host chunk,
 * two streams in flight at once.  Every live count is back to zero at the
 * end.
 *
 * Runs only with VMMX_BACKEND=cuda and a device vmm_open() can open
 * (VMMX_DEVICE, default 0); anywhere else it skips as a whole.  Nothing here
 * can provoke a sticky CUDA error: bad streams and bad devices are refused
 * before they reach the driver, and every copy stays inside memory that is
 * mapped and granted.
 *
 * Sizes: 64 MiB of registered memory, 256 MiB device plus 256 MiB host
 * chunks; the data checks read every byte on the CPU (about a second).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmm/vmm.h"
#include "tests/tap/basic.h"

#define MiB ((size_t)1 << 20)
#define GRAN (2 * MiB)
#define REG_SIZE (64 * MiB)
#define STREAM_SIZE (256 * MiB)
/* Never a stream: CUstreams are heap pointers, and this is not one. */
#define BOGUS_STREAM ((vmm_stream_t)0xfffffffffff0ull)

static struct {
	int level, err;
	char msg[512];
} last;

static void hook(void *arg, int level, int err, const char *msg)
{
	(void)arg;
	last.level = level;
	last.err = err;
	snprintf(last.msg, sizeof(last.msg), "%s", msg);
}

static int device;

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + seed + (i >> 12));
}

/* Offset of the first byte that differs from fill(@seed), or SIZE_MAX. */
static size_t check(const unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 131 + seed + (i >> 12)))
			return i;
	return SIZE_MAX;
}

static bool checked(const unsigned char *p, size_t n, unsigned int seed)
{
	size_t at = check(p, n, seed);

	if (at != SIZE_MAX)
		diag("first wrong byte at offset %zu: %#x", at, p[at]);
	return at == SIZE_MAX;
}

/* 24 assertions. */
static void test_attrs(struct vmm *v, int count)
{
	struct vmmx_loc dev = { VMMX_LOC_DEVICE, device }, host = { VMMX_LOC_HOST, 0 };
	int x, fails = 0, val[VMM_ATTR_COUNT] = { 0 };
	size_t g;

	for (int d = 0; d < count; d++) {
		for (int a = 0; a < VMM_ATTR_COUNT; a++) {
			int err = vmm_attr(v, d, (enum vmm_attr)a, &x);

			if (err) {
				fails++;
				diag("device %d: %s: error %d (%s)", d, vmm_attr_name(a), err,
				     last.msg);
				continue;
			}
			diag("device %d: %s = %d", d, vmm_attr_name(a), x);
			if (d == device)
				val[a] = x;
		}
	}
	is_int(0, fails, "vmm_attr: every attribute of all %d device(s) reads", count);
	is_int(1, val[VMM_ATTR_VMM], "vmm_attr(vmm) is 1");
	is_int(1, val[VMM_ATTR_UNIFIED_ADDRESSING], "vmm_attr(unified_addressing) is 1");
	is_int(1, val[VMM_ATTR_HOST_REGISTER], "vmm_attr(host_register) is 1");
	is_int(1, val[VMM_ATTR_HOST_VMM], "vmm_attr(host_vmm) is 1");
	ok(val[VMM_ATTR_COMPUTE_MAJOR] >= 7 && val[VMM_ATTR_COMPUTE_MAJOR] < 100,
	   "vmm_attr(compute_major) is plausible (%d)", val[VMM_ATTR_COMPUTE_MAJOR]);
	ok(val[VMM_ATTR_COMPUTE_MINOR] >= 0 && val[VMM_ATTR_COMPUTE_MINOR] < 10,
	   "vmm_attr(compute_minor) is plausible (%d)", val[VMM_ATTR_COMPUTE_MINOR]);
	ok(val[VMM_ATTR_SM_COUNT] > 0, "vmm_attr(sm_count) is positive (%d)",
	   val[VMM_ATTR_SM_COUNT]);
	ok(val[VMM_ATTR_PAGEABLE_ACCESS] == 0 || val[VMM_ATTR_PAGEABLE_ACCESS] == 1,
	   "vmm_attr(pageable_access) is a flag");
	ok(val[VMM_ATTR_HOST_NUMA_ID] >= -1, "vmm_attr(host_numa_id) is a node or -1");

	g = 0;
	is_err(0, vmm_granularity(v, dev, &g), "vmm_granularity(device)");
	is_uint(GRAN, g, "vmm_granularity(device) is 2 MiB");
	g = 0;
	is_err(0, vmm_granularity(v, host, &g), "vmm_granularity(host)");
	is_uint(GRAN, g, "vmm_granularity(host) is 2 MiB");

	x = 42;
	is_err(-VMMX_ENODEV, vmm_attr(v, count, VMM_ATTR_VMM, &x),
	       "vmm_attr refuses device %d of %d", count, count);
	like(last.msg, "no device", "vmm_attr names the missing device");
	is_err(-VMMX_ENODEV, vmm_attr(v, -1, VMM_ATTR_VMM, &x), "vmm_attr refuses device -1");
	is_err(-VMMX_EINVAL, vmm_attr(v, device, VMM_ATTR_COUNT, &x),
	       "vmm_attr refuses VMM_ATTR_COUNT");
	is_err(-VMMX_EINVAL, vmm_attr(v, device, VMM_ATTR_VMM, NULL), "vmm_attr refuses NULL");
	ok(x == 42, "vmm_attr writes nothing on failure");
	is_string("sm_count", vmm_attr_name(VMM_ATTR_SM_COUNT), "vmm_attr_name(SM_COUNT)");
	ok(vmm_attr_name(VMM_ATTR_COUNT) == NULL, "vmm_attr_name(VMM_ATTR_COUNT) is NULL");
	{
		struct vmm_info info;

		is_err(0, vmm_query(v, &info), "vmm_query");
		is_string("cuda", info.backend, "vmm_query: backend is cuda");
	}
}

/* 4 assertions. */
static void test_peers(struct vmm *v, int count)
{
	int fails = 0, self = -1, x;

	for (int d = 0; d < count; d++) {
		for (int p = 0; p < count; p++) {
			if (vmm_can_access_peer(v, d, p, &x)) {
				fails++;
				diag("can_access_peer(%d, %d): %s", d, p, last.msg);
				continue;
			}
			if (d == p)
				self = x;
			else
				diag("device %d can access peer %d: %d", d, p, x);
		}
	}
	is_int(0, fails, "vmm_can_access_peer: every pair of %d device(s) answers", count);
	is_int(0, self, "vmm_can_access_peer: a device is not its own peer");
	is_err(-VMMX_ENODEV, vmm_can_access_peer(v, device, count, &x),
	       "vmm_can_access_peer refuses peer %d of %d", count, count);
	is_err(-VMMX_EINVAL, vmm_can_access_peer(v, device, device, NULL),
	       "vmm_can_access_peer refuses NULL");
}

/* 14 assertions. */
static void test_register(struct vmm *v)
{
	struct vmm_access dev_rw = { { VMMX_LOC_DEVICE, device }, VMM_ACCESS_RW };
	struct vmmx_loc dev = { VMMX_LOC_DEVICE, device };
	unsigned char *buf = malloc(REG_SIZE), *other = malloc(4096);
	void *dptr = NULL, *x = NULL;
	struct vmm_counts c;
	vmm_handle_t h;
	int same = 0;
	char *r;

	if (!buf || !other)
		bail("out of memory");
	fill(buf, REG_SIZE, 11);
	is_err(0, vmm_host_register(v, buf, REG_SIZE, &dptr),
	       "vmm_host_register of a malloc'd 64 MiB buffer");
	ok(dptr != NULL, "vmm_host_register returns a device pointer");
	if (vmm_attr(v, device, VMM_ATTR_HOST_POINTER_FOR_REGISTERED, &same) || !same)
		skip("the device does not use host pointers for registered memory");
	else
		ok(dptr == (void *)buf,
		   "vmm_host_register: the device pointer is the host pointer");
	vmm_counts(v, &c);
	is_int(1, c.registrations, "vmm_counts: 1 registration");
	if (!dptr)
		bail("no device pointer for the registered buffer");

	if (vmm_reserve(v, REG_SIZE, 0, (void **)&r) || vmm_create(v, dev, REG_SIZE, &h) ||
	    vmm_map(v, r, REG_SIZE, h) || vmm_set_access(v, r, REG_SIZE, &dev_rw, 1))
		bail("setup of the device chunk failed: %s", last.msg);
	is_err(0, vmm_copy(v, r, dptr, REG_SIZE), "vmm_copy registered memory -> device chunk");
	memset(buf, 0, REG_SIZE);
	is_err(0, vmm_copy(v, dptr, r, REG_SIZE), "vmm_copy device chunk -> registered memory");
	ok(checked(buf, REG_SIZE, 11), "vmm_copy: registered data came back intact");

	is_err(-VMMX_EEXIST, vmm_host_register(v, buf, REG_SIZE, &x),
	       "vmm_host_register refuses a second registration");
	like(last.msg, "cuMemHostRegister", "vmm_host_register names the driver call");
	ok(x == NULL, "vmm_host_register writes nothing on failure");
	is_err(-VMMX_ENOENT, vmm_host_unregister(v, other),
	       "vmm_host_unregister refuses memory never registered");
	is_err(0, vmm_host_unregister(v, buf), "vmm_host_unregister");
	vmm_counts(v, &c);
	is_int(0, c.registrations, "vmm_counts: no registration left");
	is_err(-VMMX_ENOENT, vmm_host_unregister(v, buf),
	       "vmm_host_unregister refuses a second unregister");

	if (vmm_unmap(v, r, REG_SIZE) || vmm_release(v, h) || vmm_unreserve(v, r, REG_SIZE))
		bail("teardown of the device chunk failed: %s", last.msg);
	free(buf);
	free(other);
}

/* 34 assertions. */
static void test_streams(struct vmm *v)
{
	struct vmm_access dev_rw = { { VMMX_LOC_DEVICE, device }, VMM_ACCESS_RW };
	struct vmm_access both[] = { { { VMMX_LOC_DEVICE, device }, VMM_ACCESS_RW },
				     { { VMMX_LOC_HOST, 0 }, VMM_ACCESS_RW } };
	struct vmmx_loc dev = { VMMX_LOC_DEVICE, device }, host = { VMMX_LOC_HOST, 0 };
	const size_t n = STREAM_SIZE, half = STREAM_SIZE / 2;
	vmm_stream_t s1 = 0, s2 = 0;
	vmm_handle_t hd, hh;
	unsigned char *hc;
	struct vmm_counts c;
	char *r;

	if (vmm_reserve(v, 2 * n, 0, (void **)&r) || vmm_create(v, dev, n, &hd) ||
	    vmm_create(v, host, n, &hh) || vmm_map(v, r, n, hd) || vmm_map(v, r + n, n, hh) ||
	    vmm_set_access(v, r, n, &dev_rw, 1) || vmm_set_access(v, r + n, n, both, 2))
		bail("setup of the stream test failed: %s", last.msg);
	hc = (unsigned char *)r + n; /* the host chunk, CPU-accessible */

	is_err(0, vmm_stream_create(v, &s1), "vmm_stream_create");
	is_err(0, vmm_stream_create(v, &s2), "vmm_stream_create a second stream");
	ok(s1 && s2 && s1 != s2, "vmm_stream_create: distinct nonzero streams");
	vmm_counts(v, &c);
	is_int(2, c.streams, "vmm_counts: 2 streams");

	/* one stream, 256 MiB each way */
	fill(hc, n, 21);
	is_err(0, vmm_copy_async(v, r, hc, n, s1), "vmm_copy_async host chunk -> device, 256 MiB");
	is_err(0, vmm_stream_sync(v, s1), "vmm_stream_sync after the upload");
	memset(hc, 0, n);
	is_err(0, vmm_copy_async(v, hc, r, n, s1), "vmm_copy_async device -> host chunk, 256 MiB");
	is_err(0, vmm_stream_sync(v, s1), "vmm_stream_sync after the download");
	ok(checked(hc, n, 21), "vmm_copy_async: 256 MiB came back intact");

	/* two streams in flight at once, each way */
	fill(hc, n, 33);
	is_err(0, vmm_copy_async(v, r, hc, half, s1), "vmm_copy_async upload, first half on s1");
	is_err(0, vmm_copy_async(v, r + half, hc + half, half, s2),
	       "vmm_copy_async upload, second half on s2");
	is_err(0, vmm_stream_sync(v, s1), "vmm_stream_sync(s1)");
	is_err(0, vmm_stream_sync(v, s2), "vmm_stream_sync(s2)");
	memset(hc, 0, n);
	is_err(0, vmm_copy(v, hc, r, n), "vmm_copy device -> host chunk");
	ok(checked(hc, n, 33), "vmm_copy_async: two concurrent uploads landed");
	fill(hc, n, 44);
	is_err(0, vmm_copy(v, r, hc, n), "vmm_copy host chunk -> device");
	memset(hc, 0, n);
	is_err(0, vmm_copy_async(v, hc + half, r + half, half, s2),
	       "vmm_copy_async download, second half on s2");
	is_err(0, vmm_copy_async(v, hc, r, half, s1), "vmm_copy_async download, first half on s1");
	is_err(0, vmm_stream_sync(v, s2), "vmm_stream_sync(s2) after the download");
	is_err(0, vmm_stream_sync(v, s1), "vmm_stream_sync(s1) after the download");
	ok(checked(hc, n, 44), "vmm_copy_async: two concurrent downloads landed");

	/* the default stream */
	memset(hc, 0, GRAN);
	is_err(0, vmm_copy_async(v, hc, r, GRAN, 0), "vmm_copy_async on the default stream");
	is_err(0, vmm_stream_sync(v, 0), "vmm_stream_sync(0)");
	ok(checked(hc, GRAN, 44), "vmm_copy_async: the default stream's copy landed");

	/* refused before the driver sees them */
	is_err(-VMMX_EINVAL, vmm_copy_async(v, hc, r, GRAN, BOGUS_STREAM),
	       "vmm_copy_async refuses an unknown stream");
	like(last.msg, "unknown stream", "vmm_copy_async names the unknown stream");
	is_err(-VMMX_EINVAL, vmm_stream_sync(v, BOGUS_STREAM),
	       "vmm_stream_sync refuses an unknown stream");
	is_err(-VMMX_EINVAL, vmm_stream_destroy(v, 0), "vmm_stream_destroy refuses stream 0");
	is_err(-VMMX_EINVAL, vmm_stream_create(v, NULL), "vmm_stream_create refuses NULL");

	is_err(0, vmm_stream_destroy(v, s1), "vmm_stream_destroy(s1)");
	is_err(-VMMX_EINVAL, vmm_stream_destroy(v, s1), "vmm_stream_destroy refuses s1 again");
	is_err(-VMMX_EINVAL, vmm_stream_sync(v, s1), "vmm_stream_sync refuses a destroyed stream");
	is_err(0, vmm_stream_destroy(v, s2), "vmm_stream_destroy(s2)");
	vmm_counts(v, &c);
	is_int(0, c.streams, "vmm_counts: no stream left");

	if (vmm_unmap(v, r, 2 * n) || vmm_release(v, hd) || vmm_release(v, hh) ||
	    vmm_unreserve(v, r, 2 * n))
		bail("teardown of the stream test failed: %s", last.msg);
}

int main(void)
{
	const char *be = getenv("VMMX_BACKEND"), *dv = getenv("VMMX_DEVICE");
	struct vmm_params p = { .backend = "cuda", .report = hook };
	struct vmm_info info;
	struct vmm_counts c;
	struct vmm *v;
	int err;

	if (!be || strcmp(be, "cuda"))
		skip_all("the cuda backend's own test: needs VMMX_BACKEND=cuda (now %s)",
			 be ? be : "unset");
	device = dv && *dv ? atoi(dv) : 0;
	p.device = device;
	err = vmm_open(&p, &v);
	if (err)
		skip_all("cannot open the cuda backend on device %d: %s", device,
			 last.msg[0] ? last.msg : "no reason given");
	if (vmm_query(v, &info))
		bail("vmm_query failed: %s", last.msg);
	plan(24 + 4 + 14 + 34 + 1);
	diag("%s, device %d of %d, driver %d.%d", info.device_name, device, info.device_count,
	     info.driver_version / 1000, info.driver_version % 1000 / 10);

	test_attrs(v, info.device_count);
	test_peers(v, info.device_count);
	test_register(v);
	test_streams(v);

	vmm_counts(v, &c);
	ok(!c.reservations && !c.handles && !c.mapped_bytes && !c.registrations && !c.streams,
	   "vmm_counts: all back to zero");
	vmm_close(v);
	return tap_done();
}
