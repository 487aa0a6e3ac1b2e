// SPDX-License-Identifier: MIT
/*
 * vmm.c - dispatch layer over the backends: argument checks that need no
 * backend knowledge, call counters, live-object counters and the fault layer.
 *
 * The fault layer lives here rather than as a third backend so that it wraps
 * either backend the same way: vmm_fault_arm(v, op, n, err) makes the n-th
 * next call of op return err without reaching the driver.  Counters and
 * countdowns are updated with atomic builtins; no lock is taken, so a fault
 * armed while other threads call in hits whichever call is n-th.
 *
 * What is counted: every call of an enum vmmx_op kind (host registration as
 * register/unregister, copy_async as copy, stream_sync as sync), failed
 * ones included.  Queries (query, granularity, mem_info, attr,
 * can_access_peer, ptr_info) and stream create/destroy are neither counted nor
 * faultable: they have no op, and failing them teaches nothing a test of
 * the calls that change state does not.  Event create/destroy are not
 * counted either; event record, query and wait are, as VMM_OP_EVENT, an op
 * of this layer only (struct vmmx_stats keeps the public enum vmmx_op), as
 * checksums are, as VMM_OP_CHECKSUM.  Live counts (reservations,
 * handles, mapped bytes, registrations, streams) move on success only.
 *
 * The time in each counted call is summed per op too (ns[]: the calling
 * thread's wall time from entry to return, clock_gettime(CLOCK_MONOTONIC)
 * around the backend), so that a run can say where its driver time went:
 * a call that waits, for the GPU or for a lock the driver holds across
 * threads, counts its wait.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "vmm/vmm.h"

static const char *const op_names[VMM_OP_COUNT] = {
	[VMMX_OP_RESERVE] = "reserve",       [VMMX_OP_UNRESERVE] = "unreserve",
	[VMMX_OP_CREATE] = "create",         [VMMX_OP_RELEASE] = "release",
	[VMMX_OP_MAP] = "map",               [VMMX_OP_UNMAP] = "unmap",
	[VMMX_OP_SET_ACCESS] = "set_access", [VMMX_OP_COPY] = "copy",
	[VMMX_OP_MEMSET] = "memset",         [VMMX_OP_SYNC] = "sync",
	[VMMX_OP_REGISTER] = "register",     [VMMX_OP_UNREGISTER] = "unregister",
	[VMM_OP_EVENT] = "event",           [VMM_OP_CHECKSUM] = "checksum",
};

static const char *const attr_names[VMM_ATTR_COUNT] = {
	[VMM_ATTR_VMM] = "vmm",
	[VMM_ATTR_HOST_VMM] = "host_vmm",
	[VMM_ATTR_HOST_NUMA_VMM] = "host_numa_vmm",
	[VMM_ATTR_HOST_NUMA_ID] = "host_numa_id",
	[VMM_ATTR_HOST_REGISTER] = "host_register",
	[VMM_ATTR_HOST_POINTER_FOR_REGISTERED] = "host_pointer_for_registered",
	[VMM_ATTR_PAGEABLE_ACCESS] = "pageable_access",
	[VMM_ATTR_PAGEABLE_HOST_PAGE_TABLES] = "pageable_host_page_tables",
	[VMM_ATTR_POSIX_FD] = "posix_fd",
	[VMM_ATTR_CONCURRENT_MANAGED] = "concurrent_managed",
	[VMM_ATTR_UNIFIED_ADDRESSING] = "unified_addressing",
	[VMM_ATTR_COMPUTE_MAJOR] = "compute_major",
	[VMM_ATTR_COMPUTE_MINOR] = "compute_minor",
	[VMM_ATTR_SM_COUNT] = "sm_count",
	[VMM_ATTR_GPU_DIRECT_RDMA_VMM] = "gpu_direct_rdma_vmm",
};

const char *vmm_attr_name(enum vmm_attr a)
{
	return (unsigned int)a < VMM_ATTR_COUNT ? attr_names[a] : NULL;
}

const char *vmm_op_name(enum vmmx_op op)
{
	return (unsigned int)op < VMM_OP_COUNT ? op_names[op] : NULL;
}

int vmm_op_parse(const char *name, size_t len)
{
	for (int i = 0; i < VMM_OP_COUNT; i++)
		if (strlen(op_names[i]) == len && !memcmp(op_names[i], name, len))
			return i;
	return -1;
}

void vmm_reportf(struct vmm *v, int level, int err, const char *fmt, ...)
{
	char msg[512];
	va_list ap;

	if (!v || !v->report)
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	v->report(v->report_arg, level, err, msg);
}

bool vmm_backend_built(const char *name)
{
	if (!strcmp(name, "sim"))
		return true;
#ifdef VMMX_HAVE_CUDA
	if (!strcmp(name, "cuda"))
		return true;
#endif
	return false;
}

int vmm_open(const struct vmm_params *p, struct vmm **v_p)
{
	struct vmm *v = NULL;
	int err;

	if (!p || !p->backend || !v_p)
		return -VMMX_EINVAL;
	if (!strcmp(p->backend, "sim")) {
		err = vmm_sim_open(p, &v);
#ifdef VMMX_HAVE_CUDA
	} else if (!strcmp(p->backend, "cuda")) {
		err = vmm_cuda_open(p, &v);
#endif
	} else {
		err = -VMMX_ENOBACKEND;
		if (p->report) {
			char msg[160];

			snprintf(msg, sizeof(msg), "backend \"%s\" is %s (built: sim%s)", p->backend,
				 !strcmp(p->backend, "cuda") ? "not built in: configure found no CUDA headers"
							      : "unknown",
				 vmm_backend_built("cuda") ? ", cuda" : "");
			p->report(p->report_arg, VMMX_LOG_DEBUG, err, msg);
		}
	}
	if (err)
		return err;
	*v_p = v;
	return 0;
}

void vmm_close(struct vmm *v)
{
	if (v)
		v->ops->close(v);
}

/*
 * Count a call and decide whether the fault layer fails it.  Returns 0 to go
 * on to the backend, or the injected error.
 */
static int injected(struct vmm *v, int op, int err)
{
	__atomic_fetch_add(&v->injected, 1, __ATOMIC_RELAXED);
	vmm_reportf(v, VMMX_LOG_DEBUG, err, "fault layer: injected failure of %s", op_names[op]);
	return err;
}

/* splitmix64: a good hash of (seed, call number) for one decision each. */
static uint64_t mix64(uint64_t x)
{
	x += 0x9E3779B97F4A7C15ull;
	x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
	x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
	return x ^ (x >> 31);
}

static int enter(struct vmm *v, int op)
{
	uint32_t rate = __atomic_load_n(&v->fault_rate, __ATOMIC_RELAXED);
	uint64_t slow = __atomic_load_n(&v->slow_ns[op], __ATOMIC_RELAXED);
	uint64_t armed;

	__atomic_fetch_add(&v->calls[op], 1, __ATOMIC_RELAXED);
	if (slow) {
		struct timespec ts = { (time_t)(slow / 1000000000u), (long)(slow % 1000000000u) };

		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	if (rate) {
		uint64_t n = __atomic_fetch_add(&v->fault_seq, 1, __ATOMIC_RELAXED);

		if (mix64(v->fault_seed ^ mix64(n)) % 1000000 < rate)
			return injected(v, op, -VMMX_EFAULTINJ);
	}
	armed = __atomic_load_n(&v->fault_at[op], __ATOMIC_RELAXED);
	while (armed) {
		uint64_t next = armed - 1;

		/* the last countdown step: stay at 1 while more failures are due */
		if (armed == 1 && __atomic_load_n(&v->fault_more[op], __ATOMIC_RELAXED))
			next = 1;
		if (__atomic_compare_exchange_n(&v->fault_at[op], &armed, next, false,
						__ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			if (armed != 1)
				return 0;
			if (next)
				__atomic_fetch_sub(&v->fault_more[op], 1, __ATOMIC_RELAXED);
			return injected(v, op,
					v->fault_err[op] ? v->fault_err[op] : -VMMX_EFAULTINJ);
		}
	}
	return 0;
}

static void add(int64_t *ctr, int64_t d)
{
	__atomic_fetch_add(ctr, d, __ATOMIC_RELAXED);
}

/* Now, for the time counted per op (a vDSO call, tens of ns). */
static uint64_t clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Count the calling thread's time in a call of @op since @t0 (clock_ns()); returns @err. */
static int spent(struct vmm *v, int op, uint64_t t0, int err)
{
	__atomic_fetch_add(&v->ns[op], clock_ns() - t0, __ATOMIC_RELAXED);
	return err;
}

int vmm_query(struct vmm *v, struct vmm_info *info)
{
	memset(info, 0, sizeof(*info));
	return v->ops->query(v, info);
}

int vmm_granularity(struct vmm *v, struct vmmx_loc loc, size_t *gran_p)
{
	return v->ops->granularity(v, loc, gran_p);
}

int vmm_mem_info(struct vmm *v, struct vmmx_loc loc, uint64_t *free_p, uint64_t *total_p)
{
	return v->ops->mem_info(v, loc, free_p, total_p);
}

int vmm_device_name(struct vmm *v, int device, char *buf, size_t len)
{
	if (!buf || !len) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL, "device_name(%d): no buffer", device);
		return -VMMX_EINVAL;
	}
	buf[0] = '\0';
	return v->ops->device_name(v, device, buf, len);
}

int vmm_reserve(struct vmm *v, size_t size, size_t align, void **va_p)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_RESERVE);

	if (!err)
		err = v->ops->reserve(v, size, align, va_p);
	if (!err)
		add(&v->live_reservations, 1);
	return spent(v, VMMX_OP_RESERVE, t0, err);
}

int vmm_unreserve(struct vmm *v, void *va, size_t size)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_UNRESERVE);

	if (!err)
		err = v->ops->unreserve(v, va, size);
	if (!err)
		add(&v->live_reservations, -1);
	return spent(v, VMMX_OP_UNRESERVE, t0, err);
}

int vmm_create(struct vmm *v, struct vmmx_loc loc, size_t size, vmm_handle_t *h_p)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_CREATE);

	if (!err)
		err = v->ops->create(v, loc, size, h_p);
	if (!err)
		add(&v->live_handles, 1);
	return spent(v, VMMX_OP_CREATE, t0, err);
}

int vmm_release(struct vmm *v, vmm_handle_t h)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_RELEASE);

	if (!err)
		err = v->ops->release(v, h);
	if (!err)
		add(&v->live_handles, -1);
	return spent(v, VMMX_OP_RELEASE, t0, err);
}

int vmm_map(struct vmm *v, void *va, size_t size, vmm_handle_t h)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_MAP);

	if (!err)
		err = v->ops->map(v, va, size, h);
	if (!err)
		add(&v->live_mapped, (int64_t)size);
	return spent(v, VMMX_OP_MAP, t0, err);
}

int vmm_unmap(struct vmm *v, void *va, size_t size)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_UNMAP);

	if (!err)
		err = v->ops->unmap(v, va, size);
	if (!err)
		add(&v->live_mapped, -(int64_t)size);
	return spent(v, VMMX_OP_UNMAP, t0, err);
}

int vmm_set_access(struct vmm *v, void *va, size_t size, const struct vmm_access *acc, int n)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_SET_ACCESS);

	return spent(v, VMMX_OP_SET_ACCESS, t0, err ? err : v->ops->set_access(v, va, size, acc, n));
}

int vmm_copy(struct vmm *v, void *dst, const void *src, size_t n)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_COPY);

	return spent(v, VMMX_OP_COPY, t0, err ? err : v->ops->copy(v, dst, src, n));
}

int vmm_memset(struct vmm *v, void *dst, int c, size_t n)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_MEMSET);

	return spent(v, VMMX_OP_MEMSET, t0, err ? err : v->ops->memset(v, dst, c, n));
}

int vmm_sync(struct vmm *v)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_SYNC);

	return spent(v, VMMX_OP_SYNC, t0, err ? err : v->ops->sync(v));
}

/* Queries: argument checks here, the device's existence in the backend. */
int vmm_attr(struct vmm *v, int device, enum vmm_attr a, int *val)
{
	if ((unsigned int)a >= VMM_ATTR_COUNT) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL,
			    "attr(device %d): unknown attribute %d", device, (int)a);
		return -VMMX_EINVAL;
	}
	if (!val) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL, "attr(device %d, %s): NULL output",
			    device, attr_names[a]);
		return -VMMX_EINVAL;
	}
	return v->ops->attr(v, device, a, val);
}

int vmm_can_access_peer(struct vmm *v, int dev, int peer, int *val)
{
	if (!val) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL,
			    "can_access_peer(%d, %d): NULL output", dev, peer);
		return -VMMX_EINVAL;
	}
	return v->ops->can_access_peer(v, dev, peer, val);
}

int vmm_host_register(struct vmm *v, void *ptr, size_t len, void **dptr_p)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_REGISTER);

	if (!err)
		err = v->ops->host_register(v, ptr, len, dptr_p);
	if (!err)
		add(&v->live_registrations, 1);
	return spent(v, VMMX_OP_REGISTER, t0, err);
}

int vmm_host_unregister(struct vmm *v, void *ptr)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_UNREGISTER);

	if (!err)
		err = v->ops->host_unregister(v, ptr);
	if (!err)
		add(&v->live_registrations, -1);
	return spent(v, VMMX_OP_UNREGISTER, t0, err);
}

int vmm_stream_create(struct vmm *v, vmm_stream_t *s_p)
{
	int err;

	if (!s_p) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL, "stream_create: NULL output");
		return -VMMX_EINVAL;
	}
	err = v->ops->stream_create(v, s_p);
	if (!err)
		add(&v->live_streams, 1);
	return err;
}

int vmm_stream_destroy(struct vmm *v, vmm_stream_t s)
{
	int err;

	if (!s) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL,
			    "stream_destroy(0): the default stream cannot be destroyed");
		return -VMMX_EINVAL;
	}
	err = v->ops->stream_destroy(v, s);
	if (!err)
		add(&v->live_streams, -1);
	return err;
}

int vmm_copy_async(struct vmm *v, void *dst, const void *src, size_t n, vmm_stream_t s)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_COPY);

	return spent(v, VMMX_OP_COPY, t0, err ? err : v->ops->copy_async(v, dst, src, n, s));
}

int vmm_stream_sync(struct vmm *v, vmm_stream_t s)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMMX_OP_SYNC);

	return spent(v, VMMX_OP_SYNC, t0, err ? err : v->ops->stream_sync(v, s));
}

int vmm_event_create(struct vmm *v, vmm_event_t *e_p)
{
	int err;

	if (!e_p) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL, "event_create: NULL output");
		return -VMMX_EINVAL;
	}
	err = v->ops->event_create(v, e_p);
	if (!err)
		add(&v->live_events, 1);
	return err;
}

int vmm_event_destroy(struct vmm *v, vmm_event_t e)
{
	int err;

	if (!e) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL, "event_destroy(0): no such event");
		return -VMMX_EINVAL;
	}
	err = v->ops->event_destroy(v, e);
	if (!err)
		add(&v->live_events, -1);
	return err;
}

int vmm_event_record(struct vmm *v, vmm_event_t e, vmm_stream_t s)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMM_OP_EVENT);

	return spent(v, VMM_OP_EVENT, t0, err ? err : v->ops->event_record(v, e, s));
}

int vmm_event_query(struct vmm *v, vmm_event_t e)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMM_OP_EVENT);

	return spent(v, VMM_OP_EVENT, t0, err ? err : v->ops->event_query(v, e));
}

int vmm_event_sync(struct vmm *v, vmm_event_t e)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMM_OP_EVENT);

	return spent(v, VMM_OP_EVENT, t0, err ? err : v->ops->event_sync(v, e));
}

/* vmm_checksum()'s arguments: 0, or -VMMX_EINVAL with the reason reported. */
static int checksum_args(struct vmm *v, const void *va, size_t size, const uint64_t *sum_p)
{
	if (!va || !sum_p) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL, "checksum(%p, %zu): NULL %s", va, size,
			    va ? "output" : "address");
		return -VMMX_EINVAL;
	}
	if ((uintptr_t)va % 8 || size % 8) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL,
			    "checksum(%p, %zu): the %s is not a multiple of 8 (the sum is over 64-bit words)",
			    va, size, (uintptr_t)va % 8 ? "address" : "size");
		return -VMMX_EINVAL;
	}
	if (size > UINTPTR_MAX - (uintptr_t)va) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL,
			    "checksum(%p, %zu): the range wraps around the address space", va, size);
		return -VMMX_EINVAL;
	}
	return 0;
}

int vmm_checksum(struct vmm *v, const void *va, size_t size, uint64_t *sum_p)
{
	uint64_t t0 = clock_ns();
	int err = enter(v, VMM_OP_CHECKSUM);

	if (!err)
		err = checksum_args(v, va, size, sum_p);
	if (!err && size)
		err = v->ops->checksum(v, va, size, sum_p);
	else if (!err)
		*sum_p = 0;
	/* Every exit timed, as every counted call's is. */
	return spent(v, VMM_OP_CHECKSUM, t0, err);
}

void vmm_counts(struct vmm *v, struct vmm_counts *c)
{
	c->reservations = __atomic_load_n(&v->live_reservations, __ATOMIC_RELAXED);
	c->handles = __atomic_load_n(&v->live_handles, __ATOMIC_RELAXED);
	c->mapped_bytes = __atomic_load_n(&v->live_mapped, __ATOMIC_RELAXED);
	c->registrations = __atomic_load_n(&v->live_registrations, __ATOMIC_RELAXED);
	c->streams = __atomic_load_n(&v->live_streams, __ATOMIC_RELAXED);
	for (int i = 0; i < VMMX_OP_COUNT; i++)
		c->calls[i] = __atomic_load_n(&v->calls[i], __ATOMIC_RELAXED);
	c->injected = __atomic_load_n(&v->injected, __ATOMIC_RELAXED);
	c->events = __atomic_load_n(&v->live_events, __ATOMIC_RELAXED);
	c->event_calls = __atomic_load_n(&v->calls[VMM_OP_EVENT], __ATOMIC_RELAXED);
	c->checksum_calls = __atomic_load_n(&v->calls[VMM_OP_CHECKSUM], __ATOMIC_RELAXED);
	for (int i = 0; i < VMM_OP_COUNT; i++)
		c->ns[i] = __atomic_load_n(&v->ns[i], __ATOMIC_RELAXED);
}

int vmm_fault_arm(struct vmm *v, enum vmmx_op op, uint64_t nth, int err)
{
	return vmm_fault_arm_n(v, op, nth, 1, err);
}

int vmm_fault_arm_n(struct vmm *v, enum vmmx_op op, uint64_t nth, uint64_t count, int err)
{
	if ((unsigned int)op >= VMM_OP_COUNT || err > 0 || !count)
		return -VMMX_EINVAL;
	v->fault_err[op] = err;
	__atomic_store_n(&v->fault_more[op], nth ? count - 1 : 0, __ATOMIC_RELAXED);
	__atomic_store_n(&v->fault_at[op], nth, __ATOMIC_RELAXED);
	return 0;
}

int vmm_fault_slow(struct vmm *v, enum vmmx_op op, uint64_t ns)
{
	if ((unsigned int)op >= VMM_OP_COUNT)
		return -VMMX_EINVAL;
	__atomic_store_n(&v->slow_ns[op], ns, __ATOMIC_RELAXED);
	return 0;
}

void vmm_fault_random(struct vmm *v, uint32_t ppm, uint64_t seed)
{
	__atomic_store_n(&v->fault_rate, 0, __ATOMIC_RELAXED);
	v->fault_seed = seed;
	__atomic_store_n(&v->fault_seq, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&v->fault_rate, ppm > 1000000 ? 1000000 : ppm, __ATOMIC_RELAXED);
}

void vmm_fault_disarm_all(struct vmm *v)
{
	for (int i = 0; i < VMM_OP_COUNT; i++) {
		__atomic_store_n(&v->fault_at[i], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&v->fault_more[i], 0, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&v->fault_rate, 0, __ATOMIC_RELAXED);
}

/* ---- foreign pointers and fork() ---- */

int vmm_ptr_info(struct vmm *v, const void *p, struct vmm_ptr_info *info)
{
	if (!info) {
		vmm_reportf(v, VMMX_LOG_DEBUG, -VMMX_EINVAL, "ptr_info(%p): NULL output", p);
		return -VMMX_EINVAL;
	}
	return v->ops->ptr_info(v, p, info);
}

/*
 * Without /proc: msync() fails with ENOMEM on an unmapped page and does
 * nothing else with MS_ASYNC, so mapped-ness at least is known.
 */
static int range_mapped(uintptr_t a, size_t n, const char **why)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), lo = a & ~(page - 1);

	if (msync((void *)lo, a + n - lo, MS_ASYNC)) {
		*why = "is not mapped";
		return -VMMX_EFAULT;
	}
	return 0;
}

int vmm_host_range_check(const void *p, size_t n, bool write, const char **why)
{
	uintptr_t cur = (uintptr_t)p, end = cur + n;
	unsigned long lo, hi;
	char perms[8];
	FILE *f;
	int err = -VMMX_EFAULT;

	if (!n)
		return 0;
	if (end < cur) {
		*why = "wraps around the address space";
		return -VMMX_EFAULT;
	}
	f = fopen("/proc/self/maps", "re");
	if (!f)
		return range_mapped(cur, n, why);
	*why = "is not mapped";
	/* Lines are sorted by address: walk them, the range must be covered without a gap. */
	while (fscanf(f, "%lx-%lx %7s%*[^\n]", &lo, &hi, perms) == 3) {
		if (hi <= cur)
			continue;
		if (lo > cur)
			break; /* a hole */
		if (perms[0] != 'r') {
			*why = "is not readable";
			break;
		}
		if (write && perms[1] != 'w') {
			*why = "is not writable";
			break;
		}
		cur = hi;
		if (cur >= end) {
			err = 0;
			break;
		}
	}
	fclose(f);
	return err;
}

void vmm_abandon(struct vmm *v)
{
	if (v)
		v->ops->abandon(v);
}

void vmm_atfork_prepare(void)
{
	vmm_sim_atfork_prepare();
}

void vmm_atfork_parent(void)
{
	vmm_sim_atfork_parent();
}

void vmm_atfork_child(void)
{
	vmm_sim_atfork_child();
}
