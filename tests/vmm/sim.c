// SPDX-License-Identifier: MIT
/*
 * sim.c - the sim backend through the vmm_*() dispatch functions: every rule
 * of the driver it emulates provoked on purpose, data written and read back
 * through its copy engine and, for host chunks, by the CPU.
 *
 * Also the calls for registration, streams and multi-GPU: device attributes
 * (sim_pageable included), peer access, host registration with the driver's
 * rules and data moved from a registered buffer through a device chunk, and
 * streams with asynchronous copies that keep copy's rules.
 *
 * CPU access is probed without faulting: write(2) from an address into a pipe
 * and read(2) from the pipe into it fail with EFAULT when the page is not
 * readable (writable), so a PROT_NONE chunk shows up as a failed probe.
 */
#include "config.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "vmm/vmm.h"
#include "tests/tap/basic.h"

#define MiB ((size_t)1 << 20)
#define GRAN (2 * MiB)

static const struct vmmx_loc DEV0 = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc DEV1 = { VMMX_LOC_DEVICE, 1 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };
static const struct vmmx_loc NUMA0 = { VMMX_LOC_HOST_NUMA, 0 };

/* The report hook keeps the last message; the thread test may report concurrently. */
static pthread_mutex_t last_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	int level, err;
	unsigned long n;
	char msg[512];
} last;

static void hook(void *arg, int level, int err, const char *msg)
{
	pthread_mutex_lock(&last_lock);
	last.level = level;
	last.err = err;
	last.n++;
	snprintf(last.msg, sizeof(last.msg), "%s", msg);
	pthread_mutex_unlock(&last_lock);
}

static int open_sim(int devices, uint64_t dev_mem, uint64_t host_mem, int device, struct vmm **v_p)
{
	struct vmm_params p = {
		.backend = "sim",
		.device = device,
		.sim_device_mem = dev_mem,
		.sim_host_mem = host_mem,
		.sim_devices = devices,
		.report = hook,
	};

	return vmm_open(&p, v_p);
}

static int pipefd[2];

static bool cpu_peek(const void *p, char *c)
{
	if (write(pipefd[1], p, 1) != 1)
		return false;
	return read(pipefd[0], c, 1) == 1;
}

static bool cpu_can_read(const void *p)
{
	char c;

	return cpu_peek(p, &c);
}

/* Writes back the byte already there, so the probe changes no data. */
static bool cpu_can_write(void *p)
{
	char c;

	if (!cpu_peek(p, &c) || write(pipefd[1], &c, 1) != 1)
		return false;
	if (read(pipefd[0], p, 1) == 1)
		return true;
	(void)!read(pipefd[0], &c, 1); /* drain what the failed read left */
	return false;
}

static size_t gran_of(struct vmm *v, struct vmmx_loc loc)
{
	size_t g = 0;

	return vmm_granularity(v, loc, &g) ? 0 : g;
}

static uint64_t free_of(struct vmm *v, struct vmmx_loc loc)
{
	uint64_t f = 0, t = 0;

	return vmm_mem_info(v, loc, &f, &t) ? UINT64_MAX : f;
}

static struct vmm_sim_counts sim_counts(struct vmm *v)
{
	struct vmm_sim_counts c;

	if (vmm_sim_counts(v, &c))
		memset(&c, 0xff, sizeof(c));
	return c;
}

static void fill(unsigned char *p, size_t n, unsigned int seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + seed + (i >> 12));
}

static void test_open(void)
{
	struct vmm_params p = { .backend = "sim" };
	struct vmm *v = NULL;
	struct vmm_info info;
	uint64_t f, t;

	is_err(-VMMX_ENODEV, open_sim(2, 8 * MiB, 8 * MiB, 2, &v),
	       "vmm_open(sim) refuses device 2 of 2");
	like(last.msg, "no device 2", "vmm_open(sim) reports the missing device");
	is_err(-VMMX_ENODEV, open_sim(2, 8 * MiB, 8 * MiB, -1, &v),
	       "vmm_open(sim) refuses device -1");
	is_err(-VMMX_EINVAL, open_sim(-1, 8 * MiB, 8 * MiB, 0, &v),
	       "vmm_open(sim) refuses -1 devices");
	is_err(-VMMX_EINVAL, open_sim(65, 8 * MiB, 8 * MiB, 0, &v),
	       "vmm_open(sim) refuses 65 devices");
	p.backend = "nosuch";
	is_err(-VMMX_ENOBACKEND, vmm_open(&p, &v), "vmm_open refuses an unknown backend");
	ok(v == NULL, "vmm_open writes nothing on failure");

	/* zeros mean lib's defaults: one device, 1 GiB of it, 4 GiB of host memory */
	p.backend = "sim";
	if (!is_err(0, vmm_open(&p, &v), "vmm_open(sim) with zeroed params uses defaults"))
		bail("cannot open the sim backend");
	ok(!vmm_query(v, &info) && info.device_count == 1, "vmm_query: default is 1 device");
	ok(!vmm_mem_info(v, DEV0, &f, &t) && t == 1ull << 30 && f == t,
	   "vmm_mem_info: default device capacity is 1 GiB");
	ok(!vmm_mem_info(v, HOST, &f, &t) && t == 4ull << 30 && f == t,
	   "vmm_mem_info: default host capacity is 4 GiB");
	vmm_close(v);
	vmm_close(NULL);

	if (!is_err(0, open_sim(2, 8 * MiB, 8 * MiB, 1, &v), "vmm_open(sim) opens device 1 of 2"))
		bail("cannot open the sim backend");
	ok(!vmm_query(v, &info) && !strcmp(info.device_name, "libvmmx simulated device 1"),
	   "vmm_query names device 1");
	vmm_close(v);
}

static void test_query(struct vmm *v)
{
	struct vmm_info info;

	is_err(0, vmm_query(v, &info), "vmm_query succeeds");
	is_string("sim", info.backend, "vmm_query: backend is sim");
	is_int(2, info.device_count, "vmm_query: device_count is sim_devices");
	is_int(0, info.driver_version, "vmm_query: driver_version is 0");
	is_string("libvmmx simulated device 0", info.device_name, "vmm_query: device name");
}

static void test_granularity_mem_info(struct vmm *v)
{
	struct vmmx_loc bad[] = {
		{ VMMX_LOC_DEVICE, 2 }, { VMMX_LOC_DEVICE, -1 }, { VMMX_LOC_HOST_NUMA, 1 },
		{ VMMX_LOC_NONE, 0 }, { (enum vmmx_loc_kind)42, 0 },
	};
	uint64_t f = 0, t = 0;
	size_t g;

	is_uint(GRAN, gran_of(v, DEV0), "vmm_granularity(device:0) is 2 MiB");
	is_uint(GRAN, gran_of(v, DEV1), "vmm_granularity(device:1) is 2 MiB");
	is_uint(GRAN, gran_of(v, HOST), "vmm_granularity(host) is 2 MiB");
	is_uint(GRAN, gran_of(v, NUMA0), "vmm_granularity(host-numa:0) is 2 MiB");
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		is_err(-VMMX_EINVAL, vmm_granularity(v, bad[i], &g),
		       "vmm_granularity refuses location kind %d id %d", (int)bad[i].kind,
		       bad[i].id);
	like(last.msg, "sim: granularity(", "vmm_granularity reports the refusal");
	is_err(-VMMX_EINVAL, vmm_granularity(v, DEV0, NULL), "vmm_granularity refuses NULL");

	ok(!vmm_mem_info(v, DEV0, &f, &t) && f == 8 * MiB && t == 8 * MiB,
	   "vmm_mem_info(device:0): 8 MiB free of 8 MiB");
	ok(!vmm_mem_info(v, DEV1, &f, &t) && f == 8 * MiB && t == 8 * MiB,
	   "vmm_mem_info(device:1): 8 MiB free of 8 MiB");
	ok(!vmm_mem_info(v, HOST, &f, &t) && f == 8 * MiB && t == 8 * MiB,
	   "vmm_mem_info(host): 8 MiB free of 8 MiB");
	ok(!vmm_mem_info(v, NUMA0, &f, &t) && f == 8 * MiB && t == 8 * MiB,
	   "vmm_mem_info(host-numa:0): 8 MiB free of 8 MiB");
	is_err(-VMMX_EINVAL, vmm_mem_info(v, bad[0], &f, &t), "vmm_mem_info refuses device 2");
}

static void test_reserve(struct vmm *v)
{
	void *va = NULL, *va2 = NULL, *x = NULL;
	struct vmm_sim_counts c0 = sim_counts(v);

	is_err(-VMMX_EINVAL, vmm_reserve(v, 0, 0, &x), "vmm_reserve refuses size 0");
	is_err(-VMMX_EINVAL, vmm_reserve(v, MiB, 0, &x), "vmm_reserve refuses 1 MiB");
	is_err(-VMMX_EINVAL, vmm_reserve(v, 3 * MiB, 0, &x), "vmm_reserve refuses 3 MiB");
	like(last.msg, "multiple of 2097152", "vmm_reserve reports the granularity");
	is_err(-VMMX_EINVAL, vmm_reserve(v, GRAN, 3 * MiB, &x),
	       "vmm_reserve refuses an alignment that is not a power of 2");
	is_err(-VMMX_EINVAL, vmm_reserve(v, GRAN, 0, NULL), "vmm_reserve refuses a NULL output");
	ok(x == NULL, "vmm_reserve writes nothing on failure");
	is_int(c0.reservations, sim_counts(v).reservations,
	       "vmm_reserve: failed calls leave no reservation");

	is_err(0, vmm_reserve(v, 16 * MiB, 0, &va), "vmm_reserve(16 MiB)");
	ok(va && !((uintptr_t)va % GRAN), "vmm_reserve: address aligned to the granularity");
	ok(!cpu_can_read(va), "vmm_reserve: reserved range is not accessible to the CPU");
	is_err(0, vmm_reserve(v, 8 * MiB, 64 * MiB, &va2), "vmm_reserve(8 MiB, align 64 MiB)");
	ok(va2 && !((uintptr_t)va2 % (64 * MiB)), "vmm_reserve: address aligned to 64 MiB");
	is_int(c0.reservations + 2, sim_counts(v).reservations, "vmm_sim_counts: 2 reservations");

	is_err(-VMMX_EINVAL, vmm_unreserve(v, va, 8 * MiB),
	       "vmm_unreserve refuses part of a reservation");
	like(last.msg, "sim: unreserve(", "vmm_unreserve reports the refusal");
	is_err(-VMMX_EINVAL, vmm_unreserve(v, (char *)va + GRAN, 14 * MiB),
	       "vmm_unreserve refuses a range starting inside a reservation");
	is_err(-VMMX_EINVAL, vmm_unreserve(v, (char *)va2 + 8 * MiB, 8 * MiB),
	       "vmm_unreserve refuses an address outside reservations");
	is_err(0, vmm_unreserve(v, va, 16 * MiB), "vmm_unreserve(16 MiB)");
	is_err(-VMMX_EINVAL, vmm_unreserve(v, va, 16 * MiB), "vmm_unreserve refuses a second free");
	is_err(0, vmm_unreserve(v, va2, 8 * MiB), "vmm_unreserve(8 MiB)");
	is_int(c0.reservations, sim_counts(v).reservations, "vmm_sim_counts: reservations gone");
}

static void test_create(struct vmm *v)
{
	vmm_handle_t h[4] = { 0 }, x = 0;
	struct vmmx_loc numa1 = { VMMX_LOC_HOST_NUMA, 1 }, dev2 = { VMMX_LOC_DEVICE, 2 };
	struct vmm_sim_counts c;

	is_err(-VMMX_EINVAL, vmm_create(v, DEV0, 0, &x), "vmm_create refuses size 0");
	is_err(-VMMX_EINVAL, vmm_create(v, DEV0, MiB, &x), "vmm_create refuses 1 MiB");
	is_err(-VMMX_EINVAL, vmm_create(v, DEV0, 3 * MiB, &x), "vmm_create refuses 3 MiB");
	is_err(-VMMX_EINVAL, vmm_create(v, dev2, GRAN, &x), "vmm_create refuses device 2");
	like(last.msg, "unknown location", "vmm_create reports the unknown location");
	is_err(-VMMX_EINVAL, vmm_create(v, numa1, GRAN, &x), "vmm_create refuses host-numa:1");
	is_err(-VMMX_EINVAL, vmm_create(v, (struct vmmx_loc){ VMMX_LOC_NONE, 0 }, GRAN, &x),
	       "vmm_create refuses VMMX_LOC_NONE");
	is_err(-VMMX_EINVAL, vmm_create(v, DEV0, GRAN, NULL), "vmm_create refuses a NULL output");
	ok(x == 0, "vmm_create writes nothing on failure");

	/* device 0: fill it, then one more chunk is out of memory */
	is_err(0, vmm_create(v, DEV0, 6 * MiB, &h[0]), "vmm_create(device:0, 6 MiB)");
	ok(h[0] != 0, "vmm_create returns a nonzero handle");
	is_uint(2 * MiB, free_of(v, DEV0), "vmm_mem_info(device:0): 2 MiB left");
	is_err(0, vmm_create(v, DEV0, 2 * MiB, &h[1]), "vmm_create(device:0, 2 MiB) fills it");
	ok(h[1] != 0 && h[1] != h[0], "vmm_create returns distinct handles");
	is_err(-VMMX_ENOMEM, vmm_create(v, DEV0, GRAN, &x), "vmm_create beyond capacity: ENOMEM");
	like(last.msg, "out of memory (0 of 8388608 bytes free)",
	     "vmm_create reports what is free");
	is_uint(0, free_of(v, DEV0), "vmm_mem_info(device:0): nothing free");
	is_uint(8 * MiB, free_of(v, DEV1), "vmm_mem_info(device:1): untouched by device 0");
	c = sim_counts(v);
	ok(c.handles == 2 && c.device_used[0] == 8 * MiB && c.device_used[1] == 0,
	   "vmm_sim_counts: 2 handles, 8 MiB on device 0");

	/* HOST and HOST_NUMA share one pool */
	is_err(0, vmm_create(v, HOST, 6 * MiB, &h[2]), "vmm_create(host, 6 MiB)");
	is_err(0, vmm_create(v, NUMA0, 2 * MiB, &h[3]), "vmm_create(host-numa:0, 2 MiB)");
	is_err(-VMMX_ENOMEM, vmm_create(v, HOST, GRAN, &x), "vmm_create(host) beyond capacity");
	is_uint(0, free_of(v, NUMA0), "vmm_mem_info(host-numa:0): host pool is full");
	is_uint(8 * MiB, sim_counts(v).host_used, "vmm_sim_counts: 8 MiB host used");

	is_err(-VMMX_EINVAL, vmm_release(v, 0), "vmm_release refuses handle 0");
	is_err(-VMMX_EINVAL, vmm_release(v, 12345), "vmm_release refuses an unknown handle");
	like(last.msg, "sim: release(0x3039): unknown or released handle",
	     "vmm_release reports the unknown handle");
	is_err(-VMMX_EINVAL, vmm_release(v, h[0] + ((vmm_handle_t)1 << 32)),
	       "vmm_release refuses a forged handle");
	is_err(0, vmm_release(v, h[0]), "vmm_release(device 6 MiB)");
	is_uint(6 * MiB, free_of(v, DEV0), "vmm_release: capacity back on device 0");
	is_err(-VMMX_EINVAL, vmm_release(v, h[0]), "vmm_release refuses a released handle");
	is_err(0, vmm_create(v, DEV0, 6 * MiB, &x), "vmm_create reuses the capacity");
	ok(x != h[0], "vmm_create: a released handle's value is not handed out again");
	is_err(-VMMX_EINVAL, vmm_release(v, h[0]), "vmm_release still refuses the stale value");
	is_err(0, vmm_release(v, x), "vmm_release(new handle)");
	for (int i = 1; i < 4; i++)
		vmm_release(v, h[i]);
	c = sim_counts(v);
	ok(c.handles == 0 && c.device_used[0] == 0 && c.host_used == 0,
	   "vmm_sim_counts: all handles and capacity gone");
	ok(free_of(v, DEV0) == 8 * MiB && free_of(v, HOST) == 8 * MiB,
	   "vmm_mem_info: all capacity back");
}

/*
 * The layout used from here on, in a 16 MiB reservation R:
 *   R+0   d4  device:0, 4 MiB
 *   R+4   d2  device:0, 2 MiB
 *   R+6   h4  host,     4 MiB
 *   R+10  -   unmapped
 *   R+12  n2  host-numa:0, 2 MiB
 *   R+14  -   unmapped
 */
struct layout {
	char *r;
	vmm_handle_t d4, d2, h4, n2;
};

static void test_map(struct vmm *v, struct layout *l)
{
	void *other = NULL;
	vmm_handle_t x = 0;
	struct vmm_counts vc;

	if (vmm_reserve(v, 16 * MiB, 0, (void **)&l->r) || vmm_reserve(v, 4 * MiB, 0, &other) ||
	    vmm_create(v, DEV0, 4 * MiB, &l->d4) || vmm_create(v, DEV0, 2 * MiB, &l->d2) ||
	    vmm_create(v, HOST, 4 * MiB, &l->h4) || vmm_create(v, NUMA0, 2 * MiB, &l->n2) ||
	    vmm_create(v, DEV1, 2 * MiB, &x))
		bail("setup of the map test failed: %s", last.msg);

	is_err(-VMMX_EINVAL, vmm_map(v, l->r, 2 * MiB, l->d4),
	       "vmm_map refuses a size other than the handle's");
	like(last.msg, "handles map whole", "vmm_map reports the size mismatch");
	is_err(-VMMX_EINVAL, vmm_map(v, l->r + MiB, 4 * MiB, l->d4),
	       "vmm_map refuses an unaligned address");
	is_err(-VMMX_EINVAL, vmm_map(v, l->r + 14 * MiB, 4 * MiB, l->d4),
	       "vmm_map refuses a range past the reservation's end");
	like(last.msg, "not inside one reservation", "vmm_map reports the range");
	is_err(-VMMX_EINVAL, vmm_map(v, l->r, 4 * MiB, 0), "vmm_map refuses handle 0");
	is_err(-VMMX_EINVAL, vmm_map(v, l->r, 4 * MiB, 99), "vmm_map refuses an unknown handle");

	is_err(0, vmm_map(v, l->r, 4 * MiB, l->d4), "vmm_map(device 4 MiB)");
	is_err(0, vmm_map(v, l->r + 4 * MiB, 2 * MiB, l->d2), "vmm_map(device 2 MiB)");
	is_err(0, vmm_map(v, l->r + 6 * MiB, 4 * MiB, l->h4), "vmm_map(host 4 MiB)");
	is_err(0, vmm_map(v, l->r + 12 * MiB, 2 * MiB, l->n2), "vmm_map(host-numa 2 MiB)");
	is_err(-VMMX_EINVAL, vmm_map(v, l->r + 2 * MiB, 2 * MiB, x),
	       "vmm_map refuses a range that is already mapped");
	like(last.msg, "overlaps the mapping", "vmm_map reports the overlap");
	is_err(-VMMX_EINVAL, vmm_map(v, l->r + 8 * MiB, 2 * MiB, x),
	       "vmm_map refuses the tail of a mapping");
	is_int(4, sim_counts(v).mappings, "vmm_sim_counts: 4 mappings");
	vmm_counts(v, &vc);
	is_int(12 * MiB, vc.mapped_bytes, "vmm_counts: 12 MiB mapped");
	ok(!cpu_can_read(l->r), "vmm_map: device chunk not accessible to the CPU");
	ok(!cpu_can_read(l->r + 6 * MiB), "vmm_map: host chunk not accessible before set_access");

	is_err(0, vmm_release(v, x), "vmm_release(unmapped device:1 handle)");
	is_err(-VMMX_EINVAL, vmm_map(v, l->r + 10 * MiB, 2 * MiB, x),
	       "vmm_map refuses a released handle");
	vmm_unreserve(v, other, 4 * MiB);
}

static void test_set_access(struct vmm *v, struct layout *l)
{
	struct vmm_access dev0_rw = { DEV0, VMM_ACCESS_RW };
	struct vmm_access both[] = { { DEV0, VMM_ACCESS_RW }, { HOST, VMM_ACCESS_RW } };
	struct vmm_access host_rw = { HOST, VMM_ACCESS_RW };
	struct vmm_access bad_dev = { { VMMX_LOC_DEVICE, 2 }, VMM_ACCESS_RW };
	struct vmm_access bad_flags = { DEV0, (enum vmm_access_flags)2 };
	static char plain[MiB];

	is_err(-VMMX_EFAULT, vmm_copy(v, l->r, plain, MiB),
	       "vmm_copy refuses a mapped range before set_access");
	like(last.msg, "not writable by the device", "vmm_copy reports the missing access");

	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r + 10 * MiB, 2 * MiB, &dev0_rw, 1),
	       "vmm_set_access refuses an unmapped range");
	like(last.msg, "not fully mapped", "vmm_set_access reports the unmapped range");
	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r + 6 * MiB, 6 * MiB, &dev0_rw, 1),
	       "vmm_set_access refuses a partly mapped range");
	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r + 4 * MiB, 4 * MiB, &dev0_rw, 1),
	       "vmm_set_access refuses a range cutting a mapping");
	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r + MiB, 2 * MiB, &dev0_rw, 1),
	       "vmm_set_access refuses an unaligned address");
	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r, 6 * MiB, &bad_dev, 1),
	       "vmm_set_access refuses device 2");
	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r, 6 * MiB, &bad_flags, 1),
	       "vmm_set_access refuses unknown flags");
	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r, 6 * MiB, &dev0_rw, 0),
	       "vmm_set_access refuses n = 0");
	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r, 6 * MiB, NULL, 1),
	       "vmm_set_access refuses a NULL descriptor");
	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r, 6 * MiB, &host_rw, 1),
	       "vmm_set_access refuses CPU access to device memory");
	like(last.msg, "CPU cannot be granted access to device memory",
	     "vmm_set_access reports the CPU/device refusal");
	is_err(-VMMX_EINVAL, vmm_set_access(v, l->r + 4 * MiB, 6 * MiB, both, 2),
	       "vmm_set_access refuses CPU access over a device and a host chunk");
	ok(!cpu_can_read(l->r + 6 * MiB), "vmm_set_access: a refused call changed nothing");

	is_err(0, vmm_set_access(v, l->r, 6 * MiB, &dev0_rw, 1),
	       "vmm_set_access(device:0 RW) over two device chunks");
	is_err(0, vmm_set_access(v, l->r + 6 * MiB, 4 * MiB, both, 2),
	       "vmm_set_access(device:0 RW, host RW) over a host chunk");
	is_err(0, vmm_set_access(v, l->r + 12 * MiB, 2 * MiB, both, 2),
	       "vmm_set_access(device:0 RW, host RW) over a host-numa chunk");
	ok(!cpu_can_read(l->r) && !cpu_can_read(l->r + 4 * MiB),
	   "vmm_set_access: device memory stays out of the CPU's reach");
	ok(cpu_can_read(l->r + 6 * MiB) && cpu_can_write(l->r + 9 * MiB),
	   "vmm_set_access: the CPU reads and writes a host chunk");
	ok(cpu_can_write(l->r + 12 * MiB), "vmm_set_access: the CPU writes a host-numa chunk");
}

static void test_copy(struct vmm *v, struct layout *l)
{
	size_t n = 6 * MiB;
	unsigned char *a = malloc(n), *b = malloc(n), *ref = malloc(n);
	struct vmm_access dev0_ro = { DEV0, VMM_ACCESS_READ };
	struct vmm_access dev0_rw = { DEV0, VMM_ACCESS_RW };
	struct vmm_access dev1_rw = { DEV1, VMM_ACCESS_RW };
	struct vmm_access host_none = { HOST, VMM_ACCESS_NONE };
	char *r = l->r;
	vmm_handle_t x;
	size_t i;
	bool same;

	if (!a || !b || !ref)
		bail("out of memory");
	fill(a, n, 7);

	/* host -> device, one call over two device chunks */
	is_err(0, vmm_copy(v, r, a, n), "vmm_copy host -> device over two device chunks");
	memset(b, 0, n);
	is_err(0, vmm_copy(v, b, r, n), "vmm_copy device -> host");
	ok(!memcmp(a, b, n), "vmm_copy: device data read back intact");

	/* device -> host chunk, then the CPU reads it where the GPU would */
	is_err(0, vmm_copy(v, r + 6 * MiB, r + MiB, 4 * MiB),
	       "vmm_copy device -> host chunk in its own call");
	ok(!memcmp(r + 6 * MiB, a + MiB, 4 * MiB),
	   "vmm_copy: the CPU reads the copied data in the host chunk");
	memset(r + 6 * MiB, 0x5a, 4 * MiB);
	memset(b, 0, n);
	is_err(0, vmm_copy(v, b, r + 6 * MiB, 4 * MiB), "vmm_copy host chunk -> plain memory");
	for (i = 0, same = true; i < 4 * MiB; i++)
		same = same && b[i] == 0x5a;
	ok(same, "vmm_copy: copy engine sees what the CPU stored");

	/* the crash: one call over device and host chunks */
	memset(b, 0xee, n);
	last.level = 0;
	is_err(-VMMX_EINVAL, vmm_copy(v, b, r + 4 * MiB, 4 * MiB),
	       "vmm_copy refuses a source spanning device and host chunks");
	is_int(VMMX_LOG_ERROR, last.level, "vmm_copy reports the crash at error level");
	like(last.msg,
	     "sim: one copy spans device and host memory (this crashes the CUDA driver; split it)",
	     "vmm_copy names the driver crash");
	ok(b[0] == 0xee && b[4 * MiB - 1] == 0xee, "vmm_copy: a refused copy wrote nothing");
	is_err(-VMMX_EINVAL, vmm_copy(v, r + 5 * MiB, a, 2 * MiB),
	       "vmm_copy refuses a destination spanning device and host chunks");
	like(last.msg, "destination side", "vmm_copy names the side that spans");
	is_err(0, vmm_copy(v, b, r + 4 * MiB, 2 * MiB), "vmm_copy: device half of the split copy");
	is_err(0, vmm_copy(v, b + 2 * MiB, r + 6 * MiB, 2 * MiB),
	       "vmm_copy: host half of the split copy");
	ok(!memcmp(b, a + 4 * MiB, 2 * MiB) && b[2 * MiB] == 0x5a && b[4 * MiB - 1] == 0x5a,
	   "vmm_copy: split copy is right");
	is_err(-VMMX_EINVAL, vmm_memset(v, r + 4 * MiB, 0, 4 * MiB),
	       "vmm_memset refuses a range spanning device and host chunks");
	like(last.msg, "one memset spans device and host memory", "vmm_memset names the crash");

	/* memset on device memory, checked through the copy engine */
	is_err(0, vmm_memset(v, r + 2 * MiB, 0xa5, 3 * MiB), "vmm_memset on device chunks");
	memcpy(ref, a, n);
	memset(ref + 2 * MiB, 0xa5, 3 * MiB);
	is_err(0, vmm_copy(v, b, r, n), "vmm_copy device -> host after memset");
	ok(!memcmp(b, ref, n), "vmm_memset set exactly its range");
	is_err(0, vmm_memset(v, r + 6 * MiB, 0x11, 4 * MiB), "vmm_memset on a host chunk");
	ok(((unsigned char *)r)[6 * MiB] == 0x11 && ((unsigned char *)r)[10 * MiB - 1] == 0x11,
	   "vmm_memset: the CPU sees its bytes in the host chunk");

	/* unmapped, out of bounds, overlapping, degenerate */
	is_err(-VMMX_EFAULT, vmm_copy(v, r + 10 * MiB, a, MiB),
	       "vmm_copy refuses an unmapped destination");
	like(last.msg, "not fully mapped", "vmm_copy reports the unmapped range");
	is_err(-VMMX_EFAULT, vmm_copy(v, b, r + 8 * MiB, 4 * MiB),
	       "vmm_copy refuses a source running into an unmapped range");
	is_err(-VMMX_EFAULT, vmm_copy(v, b, r + 14 * MiB, 4 * MiB),
	       "vmm_copy refuses a source running past its reservation");
	is_err(-VMMX_EFAULT, vmm_copy(v, r - MiB, a, 2 * MiB),
	       "vmm_copy refuses plain memory running into a reservation");
	is_err(-VMMX_EFAULT, vmm_memset(v, r + 10 * MiB, 0, GRAN),
	       "vmm_memset refuses an unmapped range");
	is_err(-VMMX_EINVAL, vmm_copy(v, r + MiB, r, 2 * MiB),
	       "vmm_copy refuses overlapping ranges");
	is_err(0, vmm_copy(v, b, r, 0), "vmm_copy of 0 bytes succeeds");
	is_err(-VMMX_EINVAL, vmm_copy(v, NULL, r, 1), "vmm_copy refuses NULL");
	is_err(-VMMX_EINVAL, vmm_memset(v, NULL, 0, 1), "vmm_memset refuses NULL");

	/* access is per right and per device */
	is_err(0, vmm_set_access(v, r, 4 * MiB, &dev0_ro, 1), "vmm_set_access(device:0 READ)");
	is_err(-VMMX_EFAULT, vmm_memset(v, r, 0, MiB),
	       "vmm_memset refuses read-only device memory");
	is_err(-VMMX_EFAULT, vmm_copy(v, r, a, MiB), "vmm_copy refuses a read-only destination");
	is_err(0, vmm_copy(v, b, r, MiB), "vmm_copy reads read-only device memory");
	is_err(0, vmm_set_access(v, r, 4 * MiB, &dev0_rw, 1), "vmm_set_access(device:0 RW) again");

	if (vmm_create(v, DEV1, GRAN, &x) || vmm_map(v, r + 10 * MiB, GRAN, x))
		bail("setup of the device:1 chunk failed: %s", last.msg);
	is_err(0, vmm_set_access(v, r + 10 * MiB, GRAN, &dev1_rw, 1),
	       "vmm_set_access(device:1 RW) on a device:1 chunk");
	is_err(-VMMX_EFAULT, vmm_copy(v, b, r + 10 * MiB, GRAN),
	       "vmm_copy refuses memory device 0 was not granted");
	is_err(0, vmm_set_access(v, r + 10 * MiB, GRAN, &dev0_rw, 1),
	       "vmm_set_access(device:0 RW) on a device:1 chunk (peer access)");
	is_err(0, vmm_copy(v, r + 10 * MiB, a, GRAN), "vmm_copy into the peer device's chunk");
	is_err(-VMMX_EINVAL, vmm_copy(v, b, r + 8 * MiB, 4 * MiB),
	       "vmm_copy refuses a source spanning a host chunk then a device chunk");
	if (vmm_unmap(v, r + 10 * MiB, GRAN) || vmm_release(v, x))
		bail("teardown of the device:1 chunk failed: %s", last.msg);

	is_err(0, vmm_set_access(v, r + 12 * MiB, GRAN, &host_none, 1),
	       "vmm_set_access(host NONE) revokes the CPU");
	ok(!cpu_can_read(r + 12 * MiB), "vmm_set_access: the CPU lost the host-numa chunk");
	free(a);
	free(b);
	free(ref);
}

static void test_unmap(struct vmm *v, struct layout *l)
{
	struct vmm_access dev0_rw = { DEV0, VMM_ACCESS_RW };
	unsigned char *a = malloc(4 * MiB), *b = malloc(4 * MiB);
	struct vmm_sim_counts c;
	char *r = l->r;

	if (!a || !b)
		bail("out of memory");
	is_err(-VMMX_EINVAL, vmm_unmap(v, r, 2 * MiB), "vmm_unmap refuses half a mapping");
	like(last.msg, "cuts through a mapping", "vmm_unmap reports the cut");
	is_err(-VMMX_EINVAL, vmm_unmap(v, r + 2 * MiB, 4 * MiB),
	       "vmm_unmap refuses a range starting inside a mapping");
	is_err(-VMMX_EINVAL, vmm_unmap(v, r + 6 * MiB, 6 * MiB),
	       "vmm_unmap refuses a mapping plus an unmapped range");
	is_err(-VMMX_EINVAL, vmm_unmap(v, r + 10 * MiB, 2 * MiB),
	       "vmm_unmap refuses an unmapped range");
	is_err(-VMMX_EINVAL, vmm_unmap(v, r + MiB, 2 * MiB),
	       "vmm_unmap refuses an unaligned address");
	is_err(-VMMX_EINVAL, vmm_unmap(v, r, 0), "vmm_unmap refuses size 0");
	is_err(-VMMX_EINVAL, vmm_unmap(v, r + 14 * MiB, 4 * MiB),
	       "vmm_unmap refuses a range past the reservation");
	is_err(-VMMX_EBUSY, vmm_unreserve(v, r, 16 * MiB),
	       "vmm_unreserve refuses a reservation with mappings");
	like(last.msg, "4 mapping(s) still inside", "vmm_unreserve reports the mappings");

	if (vmm_copy(v, a, r, 4 * MiB))
		bail("copy failed: %s", last.msg);
	is_err(0, vmm_unmap(v, r, 6 * MiB), "vmm_unmap of two adjacent device mappings");
	c = sim_counts(v);
	ok(c.mappings == 2 && c.handles == 4 && c.device_used[0] == 6 * MiB,
	   "vmm_sim_counts: mappings gone, handles and capacity kept");
	is_err(-VMMX_EFAULT, vmm_copy(v, b, r, MiB), "vmm_copy refuses the unmapped range");
	is_err(0, vmm_unmap(v, r + 6 * MiB, 4 * MiB), "vmm_unmap of a host mapping");
	ok(!cpu_can_read(r + 6 * MiB), "vmm_unmap: the CPU lost the host chunk");

	/* the handle's memory outlives its mapping: remap it elsewhere, data intact */
	is_err(0, vmm_map(v, r + 6 * MiB, 4 * MiB, l->d4), "vmm_map of an unmapped handle again");
	ok(!cpu_can_read(r + 6 * MiB), "vmm_map: a fresh mapping has no access");
	is_err(-VMMX_EFAULT, vmm_copy(v, b, r + 6 * MiB, MiB),
	       "vmm_copy: access went with the old mapping");
	if (vmm_set_access(v, r + 6 * MiB, 4 * MiB, &dev0_rw, 1))
		bail("set_access failed: %s", last.msg);
	memset(b, 0, 4 * MiB);
	is_err(0, vmm_copy(v, b, r + 6 * MiB, 4 * MiB), "vmm_copy from the remapped handle");
	ok(!memcmp(a, b, 4 * MiB), "vmm_unmap: handle data survived unmap and map");
	is_err(0, vmm_unmap(v, r + 6 * MiB, 4 * MiB), "vmm_unmap of the remapped handle");
	is_err(0, vmm_unmap(v, r + 12 * MiB, 2 * MiB), "vmm_unmap of the host-numa mapping");
	is_err(0, vmm_unreserve(v, r, 16 * MiB), "vmm_unreserve once empty");
	is_err(0, vmm_release(v, l->d4), "vmm_release(device 4 MiB)");
	is_err(0, vmm_release(v, l->d2), "vmm_release(device 2 MiB)");
	is_err(0, vmm_release(v, l->h4), "vmm_release(host 4 MiB)");
	is_err(0, vmm_release(v, l->n2), "vmm_release(host-numa 2 MiB)");
	free(a);
	free(b);
}

static void test_release_mapped(struct vmm *v)
{
	struct vmm_access dev0_rw = { DEV0, VMM_ACCESS_RW };
	unsigned char *a = malloc(4 * MiB), *b = malloc(4 * MiB);
	struct vmm_sim_counts c0 = sim_counts(v), c;
	struct vmm_counts vc0, vc;
	vmm_handle_t h;
	char *r;

	if (!a || !b)
		bail("out of memory");
	fill(a, 4 * MiB, 99);
	vmm_counts(v, &vc0);
	if (vmm_reserve(v, 12 * MiB, 0, (void **)&r) || vmm_create(v, DEV1, 4 * MiB, &h))
		bail("setup failed: %s", last.msg);
	is_err(0, vmm_map(v, r, 4 * MiB, h), "vmm_map: a handle's first mapping");
	is_err(0, vmm_map(v, r + 8 * MiB, 4 * MiB, h), "vmm_map: the same handle mapped twice");
	is_err(-VMMX_EINVAL, vmm_set_access(v, r, 12 * MiB, &dev0_rw, 1),
	       "vmm_set_access refuses a range with a hole between two mappings");
	if (vmm_set_access(v, r, 4 * MiB, &dev0_rw, 1) ||
	    vmm_set_access(v, r + 8 * MiB, 4 * MiB, &dev0_rw, 1))
		bail("set_access failed: %s", last.msg);
	is_err(0, vmm_copy(v, r, a, 4 * MiB), "vmm_copy into the first mapping");
	is_err(0, vmm_copy(v, b, r + 8 * MiB, 4 * MiB), "vmm_copy from the second mapping");
	ok(!memcmp(a, b, 4 * MiB), "vmm_map: both mappings show the same physical memory");

	is_err(0, vmm_release(v, h), "vmm_release of a mapped handle succeeds");
	c = sim_counts(v);
	ok(c.handles == c0.handles + 1 && c.device_used[1] == 4 * MiB,
	   "vmm_sim_counts: a released, mapped handle keeps its memory");
	is_uint(4 * MiB, free_of(v, DEV1), "vmm_mem_info: capacity not back while mapped");
	vmm_counts(v, &vc);
	is_int(vc0.handles, vc.handles, "vmm_counts: the caller's handle count drops at release");
	memset(b, 0, 4 * MiB);
	is_err(0, vmm_copy(v, b, r, 4 * MiB), "vmm_copy through a released handle's mapping");
	ok(!memcmp(a, b, 4 * MiB), "vmm_release: data intact while still mapped");
	is_err(-VMMX_EINVAL, vmm_release(v, h), "vmm_release refuses the released value");
	is_err(-VMMX_EINVAL, vmm_map(v, r + 4 * MiB, 4 * MiB, h),
	       "vmm_map refuses a released handle that is still mapped elsewhere");
	is_err(0, vmm_unmap(v, r, 4 * MiB), "vmm_unmap of one of two mappings");
	c = sim_counts(v);
	ok(c.handles == c0.handles + 1 && c.device_used[1] == 4 * MiB,
	   "vmm_sim_counts: handle lives while one mapping is left");
	is_err(0, vmm_unmap(v, r + 8 * MiB, 4 * MiB), "vmm_unmap of the last mapping");
	c = sim_counts(v);
	ok(c.handles == c0.handles && c.device_used[1] == 0,
	   "vmm_sim_counts: the last unmap frees the released handle");
	is_uint(8 * MiB, free_of(v, DEV1), "vmm_mem_info: capacity back after the last unmap");
	vmm_unreserve(v, r, 12 * MiB);
	free(a);
	free(b);
}

/* Thousands of handles: the descriptor limit must not stop them. */
static void test_many(void)
{
	enum { N = 2048 };
	struct vmm_access dev0_rw = { DEV0, VMM_ACCESS_RW };
	static vmm_handle_t h[N];
	struct rlimit rl, saved;
	int fails = 0, i, probe, err;
	struct vmm *v;
	char *r;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_max < N + 256) {
		for (i = 0; i < 11; i++)
			skip("hard RLIMIT_NOFILE below %d", N + 256);
		return;
	}
	/* start from a small soft limit, as on a default desktop */
	rl.rlim_cur = 256;
	setrlimit(RLIMIT_NOFILE, &rl);
	is_err(0, open_sim(1, (uint64_t)N * GRAN, GRAN, 0, &v), "vmm_open(sim, 4 GiB device)");
	getrlimit(RLIMIT_NOFILE, &rl);
	ok(rl.rlim_cur == rl.rlim_max,
	   "vmm_open(sim) raised the soft RLIMIT_NOFILE to the hard one");
	for (i = 0; i < N; i++)
		fails += vmm_create(v, DEV0, GRAN, &h[i]) != 0;
	is_int(0, fails, "vmm_create: %d handles of 2 MiB", N);
	is_int(N, sim_counts(v).handles, "vmm_sim_counts: %d handles", N);
	if (vmm_reserve(v, (size_t)N * GRAN, 0, (void **)&r))
		bail("reserve failed: %s", last.msg);
	for (i = 0, fails = 0; i < N; i++)
		fails += vmm_map(v, r + (size_t)i * GRAN, GRAN, h[i]) != 0;
	is_int(0, fails, "vmm_map: %d adjacent handles", N);
	is_err(0, vmm_set_access(v, r, (size_t)N * GRAN, &dev0_rw, 1),
	       "vmm_set_access over %d mappings in one call", N);
	is_err(0, vmm_unmap(v, r, (size_t)N * GRAN), "vmm_unmap of %d mappings in one call", N);
	for (i = 0, fails = 0; i < N; i++)
		fails += vmm_release(v, h[i]) != 0;
	vmm_unreserve(v, r, (size_t)N * GRAN);
	is_int(0, fails, "vmm_release: %d handles", N);

	/* out of descriptors is out of memory to the caller: lower the limit to see it */
	probe = dup(0);
	close(probe);
	getrlimit(RLIMIT_NOFILE, &rl);
	saved = rl;
	rl.rlim_cur = (rlim_t)probe + 2;
	setrlimit(RLIMIT_NOFILE, &rl);
	for (i = 0, err = 0; i < 64 && !err; i++)
		err = vmm_create(v, DEV0, GRAN, &h[i]);
	setrlimit(RLIMIT_NOFILE, &saved);
	is_err(-VMMX_ENOMEM, err, "vmm_create: EMFILE is -VMMX_ENOMEM");
	like(last.msg, "memfd_create", "vmm_create reports the failed memfd_create");
	while (--i > 0)
		vmm_release(v, h[i - 1]);
	is_int(0, sim_counts(v).handles, "vmm_create: the failed create left no handle");
	vmm_close(v);
}

static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* vmm_close frees what a caller leaked: ASan's leak check and the fd count tell. */
static void test_close_leaks(void)
{
	struct vmm_access dev0_rw = { DEV0, VMM_ACCESS_RW };
	static char leak_reg[256];
	int fds = count_fds();
	vmm_stream_t st;
	vmm_handle_t h[3];
	void *d;
	struct vmm *v;
	char *r;

	if (open_sim(1, 8 * MiB, 8 * MiB, 0, &v) || vmm_reserve(v, 8 * MiB, 0, (void **)&r) ||
	    vmm_create(v, DEV0, GRAN, &h[0]) || vmm_create(v, HOST, GRAN, &h[1]) ||
	    vmm_create(v, DEV0, GRAN, &h[2]) || vmm_map(v, r, GRAN, h[0]) ||
	    vmm_map(v, r + GRAN, GRAN, h[1]) || vmm_set_access(v, r, 2 * GRAN, &dev0_rw, 1) ||
	    vmm_release(v, h[0]) || vmm_host_register(v, leak_reg, sizeof(leak_reg), &d) ||
	    vmm_stream_create(v, &st))
		bail("setup of the leak test failed: %s", last.msg);
	ok(count_fds() == fds + 3, "vmm_create: one descriptor per handle");
	vmm_close(v);
	is_int(fds, count_fds(), "vmm_close closes every descriptor left behind");
}

struct worker {
	struct vmm *v;
	int id, fails;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct vmm_access dev0_rw = { DEV0, VMM_ACCESS_RW };
	struct vmmx_loc dev = { VMMX_LOC_DEVICE, w->id % 2 };
	unsigned char a[4096], b[4096];
	vmm_handle_t hd, hh;
	char *r;

	if (vmm_reserve(w->v, 2 * GRAN, 0, (void **)&r)) {
		w->fails++;
		return NULL;
	}
	for (int i = 0; i < 100; i++) {
		memset(a, w->id * 16 + i, sizeof(a));
		memset(b, 0, sizeof(b));
		if (vmm_create(w->v, dev, GRAN, &hd) || vmm_create(w->v, HOST, GRAN, &hh) ||
		    vmm_map(w->v, r, GRAN, hd) || vmm_map(w->v, r + GRAN, GRAN, hh) ||
		    vmm_set_access(w->v, r, 2 * GRAN, &dev0_rw, 1) ||
		    vmm_copy(w->v, r + 1000, a, sizeof(a)) ||
		    vmm_copy(w->v, r + GRAN + 5, r + 1000, sizeof(a)) ||
		    vmm_copy(w->v, b, r + GRAN + 5, sizeof(b)) || memcmp(a, b, sizeof(a)) ||
		    vmm_release(w->v, hd) || vmm_unmap(w->v, r, 2 * GRAN) ||
		    vmm_release(w->v, hh)) {
			w->fails++;
			break;
		}
	}
	if (vmm_unreserve(w->v, r, 2 * GRAN))
		w->fails++;
	return NULL;
}

static void test_threads(void)
{
	enum { T = 4 };
	struct worker w[T];
	pthread_t t[T];
	struct vmm_sim_counts c;
	struct vmm *v;
	int fails = 0;

	if (open_sim(2, 64 * MiB, 64 * MiB, 0, &v))
		bail("cannot open the sim backend: %s", last.msg);
	for (int i = 0; i < T; i++) {
		w[i] = (struct worker){ .v = v, .id = i };
		if (pthread_create(&t[i], NULL, work, &w[i]))
			bail("pthread_create failed");
	}
	for (int i = 0; i < T; i++) {
		pthread_join(t[i], NULL);
		fails += w[i].fails;
	}
	is_int(0, fails, "vmm_* from %d threads at once: no failure", T);
	c = sim_counts(v);
	ok(!c.reservations && !c.handles && !c.mappings && !c.device_used[0] &&
	   !c.device_used[1] && !c.host_used, "vmm_sim_counts: threads left nothing behind");
	vmm_close(v);
}

static void test_attr(struct vmm *v)
{
	static const int want[VMM_ATTR_COUNT] = {
		[VMM_ATTR_VMM] = 1,
		[VMM_ATTR_HOST_VMM] = 1,
		[VMM_ATTR_HOST_NUMA_VMM] = 1,
		[VMM_ATTR_HOST_NUMA_ID] = 0,
		[VMM_ATTR_HOST_REGISTER] = 1,
		[VMM_ATTR_HOST_POINTER_FOR_REGISTERED] = 1,
		[VMM_ATTR_PAGEABLE_ACCESS] = 0,
		[VMM_ATTR_PAGEABLE_HOST_PAGE_TABLES] = 0,
		[VMM_ATTR_POSIX_FD] = 1,
		[VMM_ATTR_CONCURRENT_MANAGED] = 1,
		[VMM_ATTR_UNIFIED_ADDRESSING] = 1,
		[VMM_ATTR_COMPUTE_MAJOR] = 9,
		[VMM_ATTR_COMPUTE_MINOR] = 0,
		[VMM_ATTR_SM_COUNT] = 132,
		[VMM_ATTR_GPU_DIRECT_RDMA_VMM] = 0,
	};
	struct vmm_params p = {
		.backend = "sim",
		.sim_devices = 1,
		.sim_pageable = 1,
		.report = hook,
	};
	struct vmm_counts c0, c1;
	struct vmm *hmm;
	int x, y, names = 0;

	vmm_counts(v, &c0);
	for (int a = 0; a < VMM_ATTR_COUNT; a++) {
		x = -99;
		is_int(want[a], vmm_attr(v, 0, (enum vmm_attr)a, &x) ? -98 : x,
		       "vmm_attr(device 0, %s) is %d", vmm_attr_name((enum vmm_attr)a), want[a]);
	}
	ok(!vmm_attr(v, 1, VMM_ATTR_SM_COUNT, &x) && x == 132,
	   "vmm_attr(device 1, sm_count): every device answers");
	x = 42;
	is_err(-VMMX_ENODEV, vmm_attr(v, 2, VMM_ATTR_VMM, &x), "vmm_attr refuses device 2 of 2");
	like(last.msg, "sim: attr(device 2, vmm): no such device",
	     "vmm_attr reports the missing device");
	is_err(-VMMX_ENODEV, vmm_attr(v, -1, VMM_ATTR_VMM, &x), "vmm_attr refuses device -1");
	is_err(-VMMX_EINVAL, vmm_attr(v, 0, VMM_ATTR_COUNT, &x), "vmm_attr refuses VMM_ATTR_COUNT");
	like(last.msg, "unknown attribute", "vmm_attr reports the unknown attribute");
	is_err(-VMMX_EINVAL, vmm_attr(v, 0, (enum vmm_attr)-1, &x),
	       "vmm_attr refuses attribute -1");
	is_err(-VMMX_EINVAL, vmm_attr(v, 0, VMM_ATTR_VMM, NULL), "vmm_attr refuses NULL");
	ok(x == 42, "vmm_attr writes nothing on failure");
	vmm_counts(v, &c1);
	ok(!memcmp(c0.calls, c1.calls, sizeof(c0.calls)), "vmm_attr is not counted as a driver op");

	for (int a = 0; a < VMM_ATTR_COUNT; a++) {
		const char *n = vmm_attr_name((enum vmm_attr)a);

		names += n && *n;
		for (int b = 0; n && b < a; b++)
			names -= !strcmp(n, vmm_attr_name((enum vmm_attr)b));
	}
	is_int(VMM_ATTR_COUNT, names, "vmm_attr_name: every attribute has its own name");
	is_string("host_pointer_for_registered",
		  vmm_attr_name(VMM_ATTR_HOST_POINTER_FOR_REGISTERED),
		  "vmm_attr_name(HOST_POINTER_FOR_REGISTERED)");
	ok(vmm_attr_name(VMM_ATTR_COUNT) == NULL && vmm_attr_name((enum vmm_attr)-1) == NULL,
	   "vmm_attr_name of an unknown attribute is NULL");

	/* sim_pageable: the HMM path the project's GPUs lack */
	if (!is_err(0, vmm_open(&p, &hmm), "vmm_open(sim, sim_pageable = 1)"))
		bail("cannot open the sim backend: %s", last.msg);
	x = y = -1;
	ok(!vmm_attr(hmm, 0, VMM_ATTR_PAGEABLE_ACCESS, &x) &&
	   !vmm_attr(hmm, 0, VMM_ATTR_PAGEABLE_HOST_PAGE_TABLES, &y) && x == 1 && y == 1,
	   "vmm_attr: sim_pageable turns on pageable access and host page tables");
	vmm_close(hmm);
}

static void test_peer(struct vmm *v)
{
	int x = 42;

	ok(!vmm_can_access_peer(v, 0, 1, &x) && x == 1, "vmm_can_access_peer(0, 1) is 1");
	ok(!vmm_can_access_peer(v, 1, 0, &x) && x == 1, "vmm_can_access_peer(1, 0) is 1");
	ok(!vmm_can_access_peer(v, 0, 0, &x) && x == 0, "vmm_can_access_peer(0, 0) is 0");
	ok(!vmm_can_access_peer(v, 1, 1, &x) && x == 0, "vmm_can_access_peer(1, 1) is 0");
	x = 42;
	is_err(-VMMX_ENODEV, vmm_can_access_peer(v, 0, 2, &x),
	       "vmm_can_access_peer refuses peer 2 of 2");
	like(last.msg, "no such device", "vmm_can_access_peer reports the missing device");
	is_err(-VMMX_ENODEV, vmm_can_access_peer(v, -1, 0, &x),
	       "vmm_can_access_peer refuses device -1");
	is_err(-VMMX_EINVAL, vmm_can_access_peer(v, 0, 1, NULL),
	       "vmm_can_access_peer refuses NULL");
	ok(x == 42, "vmm_can_access_peer writes nothing on failure");
}

static int64_t registrations(struct vmm *v)
{
	struct vmm_counts c;
	int64_t n = sim_counts(v).registrations;

	vmm_counts(v, &c);
	return c.registrations == n ? n : -1;
}

static void test_register(struct vmm *v)
{
	struct vmm_access dev0_rw = { DEV0, VMM_ACCESS_RW };
	struct vmm_access both[] = { { DEV0, VMM_ACCESS_RW }, { HOST, VMM_ACCESS_RW } };
	size_t n = 8 * MiB, page = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *buf = malloc(n), *small = malloc(8192), *other = malloc(64);
	unsigned char *ref = malloc(GRAN);
	void *d = NULL, *x = NULL, *d2;
	struct vmm_counts c0, c1;
	vmm_handle_t hh, hd;
	char *r, *hole;

	if (!buf || !small || !other || !ref)
		bail("out of memory");
	vmm_counts(v, &c0);

	is_err(-VMMX_EINVAL, vmm_host_register(v, NULL, n, &x), "vmm_host_register refuses NULL");
	is_err(-VMMX_EINVAL, vmm_host_register(v, buf, 0, &x),
	       "vmm_host_register refuses length 0");
	is_err(-VMMX_EINVAL, vmm_host_register(v, buf, n, NULL),
	       "vmm_host_register refuses a NULL output");
	is_err(-VMMX_EINVAL, vmm_host_register(v, (void *)(UINTPTR_MAX - 99), 200, &x),
	       "vmm_host_register refuses a range that wraps");
	ok(x == NULL && registrations(v) == 0, "vmm_host_register: refusals register nothing");

	is_err(0, vmm_host_register(v, buf, n, &d), "vmm_host_register(malloc'd 8 MiB)");
	ok(d == (void *)buf, "vmm_host_register: the device pointer is the host pointer");
	is_int(1, registrations(v), "vmm_counts, vmm_sim_counts: 1 registration");
	vmm_counts(v, &c1);
	is_uint(c0.calls[VMMX_OP_REGISTER] + 5, c1.calls[VMMX_OP_REGISTER],
		"vmm_counts: register calls counted, refused ones included");

	/* overlap, in every shape */
	is_err(-VMMX_EEXIST, vmm_host_register(v, buf, n, &x),
	       "vmm_host_register refuses the same range twice");
	like(last.msg, "overlaps the registration", "vmm_host_register reports the overlap");
	is_err(-VMMX_EEXIST, vmm_host_register(v, buf + 4096, 4096, &x),
	       "vmm_host_register refuses a range inside a registration");
	is_err(-VMMX_EEXIST, vmm_host_register(v, buf - 16, 32, &x),
	       "vmm_host_register refuses a range overlapping a registration's start");
	is_err(-VMMX_EEXIST, vmm_host_register(v, buf + n - 16, 32, &x),
	       "vmm_host_register refuses a range overlapping a registration's end");
	ok(x == NULL && registrations(v) == 1, "vmm_host_register: overlaps register nothing");

	/* byte ranges: two buffers sharing a page register independently */
	is_err(0, vmm_host_register(v, small, 100, &d2), "vmm_host_register(100 bytes)");
	is_err(0, vmm_host_register(v, small + 100, 100, &d2),
	       "vmm_host_register of the next 100 bytes, same page");
	is_int(3, registrations(v), "vmm_counts: 3 registrations");

	/* unregister takes the exact base */
	is_err(-VMMX_ENOENT, vmm_host_unregister(v, buf + 4096),
	       "vmm_host_unregister refuses an address inside a registration");
	like(last.msg, "no registration starts there", "vmm_host_unregister reports the refusal");
	is_err(-VMMX_ENOENT, vmm_host_unregister(v, other),
	       "vmm_host_unregister refuses memory never registered");
	is_err(-VMMX_ENOENT, vmm_host_unregister(v, NULL), "vmm_host_unregister refuses NULL");
	is_int(3, registrations(v), "vmm_host_unregister: refusals unregister nothing");

	/* memory the VMM calls own, and memory that is not there */
	if (vmm_reserve(v, 3 * GRAN, 0, (void **)&r) || vmm_create(v, HOST, GRAN, &hh) ||
	    vmm_create(v, DEV0, GRAN, &hd) || vmm_map(v, r, GRAN, hh) ||
	    vmm_map(v, r + GRAN, GRAN, hd) || vmm_set_access(v, r, GRAN, both, 2) ||
	    vmm_set_access(v, r + GRAN, GRAN, &dev0_rw, 1))
		bail("setup of the register test failed: %s", last.msg);
	is_err(-VMMX_EINVAL, vmm_host_register(v, r, 4096, &x),
	       "vmm_host_register refuses a host chunk (inside a reservation)");
	like(last.msg, "lies in a reservation", "vmm_host_register reports the reservation");
	is_err(-VMMX_EINVAL, vmm_host_register(v, r + 2 * GRAN, GRAN, &x),
	       "vmm_host_register refuses an unmapped part of a reservation");
	is_err(-VMMX_EINVAL, vmm_host_register(v, r - 4096, 8192, &x),
	       "vmm_host_register refuses a range running into a reservation");
	hole = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (hole == MAP_FAILED || munmap(hole + page, page))
		bail("mmap failed");
	is_err(-VMMX_EINVAL, vmm_host_register(v, hole, 2 * page, &x),
	       "vmm_host_register refuses a range with an unmapped page");
	like(last.msg, "not mapped memory", "vmm_host_register reports the hole");
	is_err(0, vmm_host_register(v, hole, page, &d2), "vmm_host_register of the mapped page");
	is_err(0, vmm_host_unregister(v, hole), "vmm_host_unregister of that page");
	munmap(hole, page);
	ok(x == NULL && registrations(v) == 3, "vmm_host_register: refusals register nothing");

	/* data: registered buffer -> device chunk -> registered buffer */
	fill(buf, n, 55);
	is_err(0, vmm_copy(v, r + GRAN, d, GRAN), "vmm_copy registered memory -> device chunk");
	memset(buf, 0, GRAN);
	is_err(0, vmm_copy(v, d, r + GRAN, GRAN), "vmm_copy device chunk -> registered memory");
	fill(ref, GRAN, 55);
	ok(!memcmp(buf, ref, GRAN), "vmm_copy: data made the round trip through the device chunk");
	is_err(-VMMX_EINVAL, vmm_copy(v, d, r + GRAN / 2, GRAN),
	       "vmm_copy into registered memory still refuses a device/host span");

	is_err(0, vmm_host_unregister(v, small + 100), "vmm_host_unregister(second 100 bytes)");
	is_err(0, vmm_host_unregister(v, small), "vmm_host_unregister(first 100 bytes)");
	is_err(0, vmm_host_unregister(v, buf), "vmm_host_unregister(8 MiB)");
	is_err(-VMMX_ENOENT, vmm_host_unregister(v, buf), "vmm_host_unregister refuses it again");
	is_int(0, registrations(v), "vmm_counts, vmm_sim_counts: no registration left");
	vmm_counts(v, &c1);
	ok(c1.calls[VMMX_OP_UNREGISTER] > c0.calls[VMMX_OP_UNREGISTER],
	   "vmm_counts: unregister calls counted");

	if (vmm_unmap(v, r, 2 * GRAN) || vmm_release(v, hh) || vmm_release(v, hd) ||
	    vmm_unreserve(v, r, 3 * GRAN))
		bail("teardown of the register test failed: %s", last.msg);
	free(buf);
	free(small);
	free(other);
	free(ref);
}

static void test_streams(struct vmm *v)
{
	struct vmm_access dev0_rw = { DEV0, VMM_ACCESS_RW };
	struct vmm_access both[] = { { DEV0, VMM_ACCESS_RW }, { HOST, VMM_ACCESS_RW } };
	unsigned char *a = malloc(GRAN), *b = malloc(GRAN);
	vmm_stream_t s1 = 0, s2 = 0, s3 = 0;
	struct vmm_counts c0, c1;
	vmm_handle_t hd, hh;
	char *r;

	if (!a || !b)
		bail("out of memory");
	/* r: device chunk, host chunk (CPU RW), unmapped */
	if (vmm_reserve(v, 3 * GRAN, 0, (void **)&r) || vmm_create(v, DEV0, GRAN, &hd) ||
	    vmm_create(v, HOST, GRAN, &hh) || vmm_map(v, r, GRAN, hd) ||
	    vmm_map(v, r + GRAN, GRAN, hh) || vmm_set_access(v, r, GRAN, &dev0_rw, 1) ||
	    vmm_set_access(v, r + GRAN, GRAN, both, 2))
		bail("setup of the stream test failed: %s", last.msg);

	is_err(0, vmm_stream_create(v, &s1), "vmm_stream_create");
	is_err(0, vmm_stream_create(v, &s2), "vmm_stream_create a second stream");
	ok(s1 && s2 && s1 != s2, "vmm_stream_create: distinct nonzero streams");
	is_err(-VMMX_EINVAL, vmm_stream_create(v, NULL), "vmm_stream_create refuses NULL");
	vmm_counts(v, &c0);
	ok(sim_counts(v).streams == 2 && c0.streams == 2, "vmm_counts, vmm_sim_counts: 2 streams");

	/* plain memory -> device on s1, device -> host chunk on s2, host chunk -> plain on 0 */
	fill(a, GRAN, 77);
	is_err(0, vmm_copy_async(v, r, a, GRAN, s1), "vmm_copy_async plain -> device on s1");
	is_err(0, vmm_stream_sync(v, s1), "vmm_stream_sync(s1)");
	is_err(0, vmm_copy_async(v, r + GRAN, r, GRAN, s2), "vmm_copy_async device -> host chunk");
	is_err(0, vmm_stream_sync(v, s2), "vmm_stream_sync(s2)");
	ok(!memcmp(r + GRAN, a, GRAN), "vmm_copy_async: the CPU reads the data in the host chunk");
	memset(b, 0, GRAN);
	is_err(0, vmm_copy_async(v, b, r + GRAN, GRAN, 0), "vmm_copy_async on the default stream");
	is_err(0, vmm_stream_sync(v, 0), "vmm_stream_sync(0)");
	ok(!memcmp(a, b, GRAN), "vmm_copy_async: data made the round trip");
	vmm_counts(v, &c1);
	ok(c1.calls[VMMX_OP_COPY] == c0.calls[VMMX_OP_COPY] + 3 &&
	   c1.calls[VMMX_OP_SYNC] == c0.calls[VMMX_OP_SYNC] + 3,
	   "vmm_counts: copy_async counts as copy, stream_sync as sync");

	/* copy's rules hold */
	memset(b, 0xee, GRAN);
	last.level = 0;
	is_err(-VMMX_EINVAL, vmm_copy_async(v, b, r + GRAN / 2, GRAN, s1),
	       "vmm_copy_async refuses a source spanning device and host memory");
	is_int(VMMX_LOG_ERROR, last.level, "vmm_copy_async reports the crash at error level");
	like(last.msg, "sim: one copy_async spans device and host memory",
	     "vmm_copy_async names the driver crash");
	ok(b[0] == 0xee && b[GRAN - 1] == 0xee, "vmm_copy_async: a refused copy wrote nothing");
	is_err(-VMMX_EINVAL, vmm_copy_async(v, r + GRAN / 2, a, GRAN, s1),
	       "vmm_copy_async refuses a destination spanning device and host memory");
	is_err(-VMMX_EFAULT, vmm_copy_async(v, b, r + 2 * GRAN, GRAN, s1),
	       "vmm_copy_async refuses an unmapped source");
	is_err(-VMMX_EINVAL, vmm_copy_async(v, r + 4096, r, 8192, s1),
	       "vmm_copy_async refuses overlapping ranges");
	is_err(-VMMX_EINVAL, vmm_copy_async(v, NULL, a, 1, s1), "vmm_copy_async refuses NULL");
	is_err(0, vmm_copy_async(v, b, a, 0, s1), "vmm_copy_async of 0 bytes succeeds");

	/* streams are checked */
	memset(b, 0xee, GRAN);
	is_err(-VMMX_EINVAL, vmm_copy_async(v, b, a, GRAN, s2 + 1000),
	       "vmm_copy_async refuses an unknown stream");
	like(last.msg, "unknown stream", "vmm_copy_async reports the unknown stream");
	ok(b[0] == 0xee, "vmm_copy_async: nothing copied on an unknown stream");
	is_err(-VMMX_EINVAL, vmm_copy_async(v, b, a, 0, s2 + 1000),
	       "vmm_copy_async of 0 bytes still refuses an unknown stream");
	is_err(-VMMX_EINVAL, vmm_stream_sync(v, s2 + 1000),
	       "vmm_stream_sync refuses an unknown stream");
	is_err(-VMMX_EINVAL, vmm_stream_destroy(v, 0), "vmm_stream_destroy refuses stream 0");
	is_err(-VMMX_EINVAL, vmm_stream_destroy(v, s2 + 1000),
	       "vmm_stream_destroy refuses an unknown stream");

	is_err(0, vmm_stream_destroy(v, s1), "vmm_stream_destroy(s1)");
	is_err(-VMMX_EINVAL, vmm_stream_destroy(v, s1), "vmm_stream_destroy refuses s1 again");
	is_err(-VMMX_EINVAL, vmm_stream_sync(v, s1), "vmm_stream_sync refuses a destroyed stream");
	is_err(-VMMX_EINVAL, vmm_copy_async(v, b, a, GRAN, s1),
	       "vmm_copy_async refuses a destroyed stream");
	is_err(0, vmm_stream_create(v, &s3), "vmm_stream_create after a destroy");
	ok(s3 != s1 && s3 != s2, "vmm_stream_create: a destroyed stream's id is not reused");
	is_err(0, vmm_stream_sync(v, s2), "vmm_stream_sync(s2): other streams unaffected");
	is_err(0, vmm_stream_destroy(v, s3), "vmm_stream_destroy(s3)");
	is_err(0, vmm_stream_destroy(v, s2), "vmm_stream_destroy(s2)");
	vmm_counts(v, &c1);
	ok(sim_counts(v).streams == 0 && c1.streams == 0,
	   "vmm_counts, vmm_sim_counts: no stream left");

	if (vmm_unmap(v, r, 2 * GRAN) || vmm_release(v, hd) || vmm_release(v, hh) ||
	    vmm_unreserve(v, r, 3 * GRAN))
		bail("teardown of the stream test failed: %s", last.msg);
	free(a);
	free(b);
}

static void test_end(struct vmm *v)
{
	static const struct vmm_ops other = { .name = "other" };
	struct vmm fake = { .ops = &other };
	struct vmm_sim_counts c;
	struct vmm_counts vc;

	is_err(0, vmm_sync(v), "vmm_sync succeeds");
	is_err(0, vmm_sim_counts(v, &c), "vmm_sim_counts succeeds");
	ok(!c.reservations && !c.handles && !c.mappings && !c.registrations && !c.streams,
	   "vmm_sim_counts: no object left");
	ok(!c.device_used[0] && !c.device_used[1] && !c.host_used,
	   "vmm_sim_counts: no memory held");
	vmm_counts(v, &vc);
	ok(!vc.reservations && !vc.handles && !vc.mapped_bytes && !vc.registrations &&
	   !vc.streams, "vmm_counts: all back to zero");
	is_err(-VMMX_ENOTSUP, vmm_sim_counts(&fake, &c), "vmm_sim_counts refuses another backend");
	is_err(-VMMX_EINVAL, vmm_sim_counts(v, NULL), "vmm_sim_counts refuses NULL");
}

int main(void)
{
	struct layout l;
	struct vmm *v;

	if (pipe(pipefd))
		bail("pipe failed");
	plan(368);
	test_open();
	if (open_sim(2, 8 * MiB, 8 * MiB, 0, &v))
		bail("cannot open the sim backend: %s", last.msg);
	test_query(v);
	test_granularity_mem_info(v);
	test_reserve(v);
	test_create(v);
	test_map(v, &l);
	test_set_access(v, &l);
	test_copy(v, &l);
	test_unmap(v, &l);
	test_release_mapped(v);
	test_attr(v);
	test_peer(v);
	test_register(v);
	test_streams(v);
	test_end(v);
	vmm_close(v);
	test_many();
	test_close_leaks();
	test_threads();
	return tap_done();
}
