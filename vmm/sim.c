// SPDX-License-Identifier: MIT
/*
 * sim.c - the "sim" backend: an emulated GPU in host memory that keeps the
 * CUDA driver's virtual-memory rules, so that libvmmx and its tests run, and
 * fail the way they would on a GPU, on machines without one.
 *
 * How each driver object is emulated:
 *  - a reservation is an anonymous PROT_NONE, MAP_NORESERVE mapping;
 *  - a handle is a memfd of the handle's size plus a MAP_SHARED "physical
 *    view" of it, private to the sim: the copy engine moves bytes through
 *    that view, so a chunk's bytes are reachable whatever the CPU protection
 *    of its mappings (device memory stays PROT_NONE to the CPU, as a real
 *    GPU's memory is out of the CPU's reach);
 *  - map puts the memfd over the reservation with MAP_FIXED, still PROT_NONE
 *    (cuMemMap grants no access);
 *  - set_access marks mappings usable by a device's copy engine, and
 *    mprotect()s host chunks for the CPU;
 *  - copy and memset translate every byte inside a reservation through the
 *    physical views, and refuse one call over a device/host boundary, which
 *    killed the real driver (docs/DRIVER.md, "Copies and memsets");
 *  - checksum is the cuda backend's kernel done on the CPU through the same
 *    views, with a kernel's reach: mapped and granted memory of one
 *    reservation, device and host chunks alike;
 *  - a host registration is a record of [ptr, ptr + len) and nothing more:
 *    memory outside reservations is plain host memory the copy engine uses
 *    as is, and unified addressing makes the device address the pointer
 *    itself.  The driver's rules are kept, process-wide as the driver's
 *    are (every instance's records count): no overlap with another
 *    registration (byte ranges: two buffers sharing a page register
 *    independently, as on the driver), memory that is mapped, never memory
 *    inside a reservation, and unregister by the exact base (on the
 *    instance that registered it);
 *  - a stream is an id; copy_async copies at submission, through the same
 *    code and rules as copy, so stream_sync has nothing to wait for.  Ids
 *    are never reused, so a destroyed stream's id stays refused;
 *  - an event is an id and a mark: recording it on a stream takes the
 *    stream's next sequence number, and it has completed once the stream's
 *    completed number reaches it.  Work completes at submission, unless a
 *    test holds the stream (vmm_sim_stream_hold): then marks stay pending
 *    until the stream is synced or released, which is how tests show that
 *    the allocator never hands memory to another stream too early;
 *  - device attributes are those of the H100/H200 of docs/DRIVER.md, except
 *    pageable memory access, which vmm_params.sim_pageable turns on so that
 *    tests can take the HMM path the project's GPUs lack.
 *
 * Memory capacity is counted per device and for pinned host memory; it is
 * taken at create and given back when the handle is freed, which for a handle
 * released while still mapped is when its last mapping goes (cuMemRelease).
 *
 * Where the driver's documentation leaves room, the sim takes the strict
 * reading, so that code passing here also passes on a GPU:
 *  - unmap and set_access take ranges made of whole, adjacent mappings of
 *    one reservation;
 *  - copy and memset use the copy engine of the device the instance was
 *    opened on: inside a reservation every byte must be mapped and granted to
 *    that device (READ for a source, RW for a destination);
 *  - memory outside every reservation of this instance is plain host memory,
 *    used as is (a range that runs into a reservation is refused);
 *  - overlapping copies are refused (the driver's result is undefined).
 * Opening raises the process's soft RLIMIT_NOFILE to the hard limit, since
 * each handle holds a descriptor.
 *
 * Locking: one mutex for the whole process, world.lock, protects the list
 * of open instances, every field of struct sim after its read-only head,
 * and every reservation, mapping and handle record.  One lock, not one per
 * instance, because the emulated driver is the process's, as the real one
 * is: a copy may reach another instance's memory (another context's
 * buffer is device memory to every context), and ptr_info classifies an
 * address against every instance.  Every op holds it from its first check
 * to its return, copies and memsets included: that keeps the mappings and
 * handles a copy goes through alive while bytes move, at the price of
 * serialising the sim (it is for correctness, not speed).  The report hook
 * is called with the lock held, so it must not call back into the sim.
 * Nothing here takes another lock.  fork(): vmm_sim_atfork_*() take the
 * lock around it (lib/fork.c calls them).
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "vmm/vmm.h"

/* The allocation granularity the H100/H200 report for DEVICE, HOST and HOST_NUMA. */
#define SIM_GRAN ((size_t)2 << 20)
/* Device access is one bit per ordinal in a uint64_t. */
#define SIM_MAX_DEVICES 64
/* Capacities used when the caller leaves them 0: lib/config.c's defaults. */
#define SIM_DEFAULT_DEVICE_MEM (1ull << 30)
#define SIM_DEFAULT_HOST_MEM (4ull << 30)
/* What the emulated device reports as its compute capability and SM count (an H100 SXM). */
#define SIM_CC_MAJOR 9
#define SIM_CC_MINOR 0
#define SIM_SM_COUNT 132
/* Asked for when the hard RLIMIT_NOFILE is unlimited (fs.nr_open's default). */
#define SIM_NOFILE_FALLBACK ((rlim_t)1 << 20)

#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif

/*
 * One physical allocation.  Lives from create until it is released and has
 * no mapping left; @id is 0 once released (the caller's value is dead then).
 */
struct sim_handle {
	struct sim_handle *prev, *next; /* sim->handles: every handle not yet freed */
	vmm_handle_t id;                /* 0 once released */
	struct vmmx_loc loc;
	size_t size;
	int fd;                         /* the memfd: what map() puts in the VA space */
	void *phys;                     /* MAP_SHARED view of @fd for the copy engine */
	unsigned long maps;             /* live mappings of this handle */
};

/* One handle mapped whole at @va. */
struct sim_map {
	uintptr_t va;
	size_t size;
	struct sim_handle *h;
	uint64_t dev_read;              /* devices granted READ or RW, bit per ordinal */
	uint64_t dev_write;             /* devices granted RW */
};

/* One reservation and its mappings, sorted by address, never overlapping. */
struct sim_resv {
	uintptr_t base;
	size_t size;
	struct sim_map *maps;
	size_t nmaps, cap;
};

/*
 * A handle id is (generation << 32 | slot + 1): lookups are O(1), and a
 * slot's generation moves on when it is freed, so a stale id from a released
 * handle is refused even after its slot is reused.
 */
struct sim_slot {
	struct sim_handle *h;           /* NULL: free */
	uint32_t gen;
	uint32_t next_free;             /* free list; SLOT_NONE ends it */
};
#define SLOT_NONE UINT32_MAX

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* One host registration: [base, base + len) of plain host memory. */
struct sim_reg {
	uintptr_t base;
	size_t len;
};

struct sim {
	struct vmm head;                /* first: the dispatch layer's view */
	/* set at open, read-only after: read without the lock */
	int device;                     /* the device whose copy engine copy() uses */
	int ndev;
	uint64_t dev_cap;               /* capacity of each device */
	uint64_t host_cap;
	int pageable;                   /* VMM_ATTR_PAGEABLE_* report this */
	/* everything below: protected by world.lock */
	struct sim *world_prev, *world_next; /* world.all */
	struct sim_resv **resv;         /* sorted by base */
	size_t nresv, resv_cap;
	struct sim_slot *slots;
	uint32_t nslots, slot_cap, free_slot;
	struct sim_handle *handles;
	int64_t nhandles;               /* handles not yet freed, released ones included */
	int64_t nmappings;
	uint64_t dev_used[SIM_MAX_DEVICES];
	uint64_t host_used;
	uint64_t free_queries[SIM_MAX_DEVICES]; /* mem_info asking a device's free memory */
	struct sim_reg *regs;           /* host registrations, sorted by base, disjoint */
	size_t nregs, regs_cap;
	vmm_stream_t *streams;          /* live stream ids, ascending (ids only grow) */
	size_t nstreams, streams_cap;
	vmm_stream_t next_stream;       /* the id the next stream gets; starts at 1 */
	struct sim_sstate *sstates;     /* per-stream marks, made on first use */
	size_t nsstates, sstates_cap;
	struct sim_event *events;       /* live events, unsorted */
	size_t nevents, events_cap;
	vmm_event_t next_event;         /* the id the next event gets; starts at 1 */
};

/* Marks of one stream (0 included): events recorded, and how far work completed. */
struct sim_sstate {
	vmm_stream_t id;
	uint64_t seq;                   /* marks taken */
	uint64_t done;                  /* marks completed */
	bool held;                      /* vmm_sim_stream_hold: marks stay pending */
};

struct sim_event {
	vmm_event_t id;
	vmm_stream_t stream;            /* where it was last recorded */
	uint64_t seq;                   /* its mark there; 0: never recorded */
};

static const struct vmm_ops sim_ops;

/*
 * The emulated driver of the whole process: every open instance, so that
 * an address one instance mapped is device (or host-chunk) memory to all
 * of them, as one driver serves every context of a process.  Its lock is
 * the only lock of the sim and guards every instance's records.
 */
static struct {
	pthread_mutex_t lock;
	struct sim *all;
} world = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct sim *to_sim(struct vmm *v)
{
	return (struct sim *)v;
}

/* Report an error once, at debug level, and return it. */
static int __attribute__((format(printf, 3, 4))) fail(struct sim *s, int err, const char *fmt,
						       ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	vmm_reportf(&s->head, VMMX_LOG_DEBUG, err, "sim: %s", msg);
	return err;
}

/* What an unexpected failure of the OS means to the caller. */
static int os_err(int e)
{
	switch (e) {
	case ENOMEM:
	case EMFILE: /* out of descriptors: the handle table of a real driver is full */
	case ENFILE:
	case ENOSPC:
	case EFBIG:
	case EAGAIN:
		return -VMMX_ENOMEM;
	default:
		return -VMMX_EDRIVER;
	}
}

static bool gran_ok(uintptr_t x)
{
	return !(x & (SIM_GRAN - 1));
}

/* va and size are granular, size nonzero and the range does not wrap. */
static bool range_ok(uintptr_t va, size_t size)
{
	return size && gran_ok(va) && gran_ok(size) && va + size > va;
}

static const char *kind_name(enum vmmx_loc_kind k)
{
	switch (k) {
	case VMMX_LOC_DEVICE:
		return "device";
	case VMMX_LOC_HOST:
		return "host";
	case VMMX_LOC_HOST_NUMA:
		return "host-numa";
	default:
		return "none";
	}
}

/*
 * The emulated machine has one host NUMA node, node 0, holding all of its
 * pinned host memory: HOST_NUMA with another id is a node that does not
 * exist, refused as the cuda backend refuses one the kernel does not list.
 */
#define SIM_NUMA_NODES 1

/*
 * The capacity counter of a location: a valid device, HOST (id ignored, as
 * vmmx.h says) or HOST_NUMA node 0, the only node the sim has.
 */
static int loc_pool(struct sim *s, struct vmmx_loc loc, uint64_t **used_p, uint64_t *cap_p)
{
	switch (loc.kind) {
	case VMMX_LOC_DEVICE:
		if (loc.id < 0 || loc.id >= s->ndev)
			return -VMMX_EINVAL;
		*used_p = &s->dev_used[loc.id];
		*cap_p = s->dev_cap;
		return 0;
	case VMMX_LOC_HOST_NUMA:
		if (loc.id < 0 || loc.id >= SIM_NUMA_NODES)
			return -VMMX_EINVAL;
		/* fall through */
	case VMMX_LOC_HOST:
		*used_p = &s->host_used;
		*cap_p = s->host_cap;
		return 0;
	default:
		return -VMMX_EINVAL;
	}
}

/* --- handle ids --- */

static struct sim_handle *handle_get(struct sim *s, vmm_handle_t id)
{
	uint32_t idx = (uint32_t)id - 1;

	if (!(uint32_t)id || idx >= s->nslots)
		return NULL;
	if (!s->slots[idx].h || s->slots[idx].gen != (uint32_t)(id >> 32))
		return NULL;
	return s->slots[idx].h;
}

static int slot_alloc(struct sim *s, struct sim_handle *h)
{
	uint32_t idx;

	if (s->free_slot != SLOT_NONE) {
		idx = s->free_slot;
		s->free_slot = s->slots[idx].next_free;
	} else {
		if (s->nslots == s->slot_cap) {
			uint32_t cap = s->slot_cap ? s->slot_cap * 2 : 64;
			struct sim_slot *n;

			/* ids keep 32 bits of slot: beyond that the table is full */
			if (cap <= s->slot_cap || cap >= SLOT_NONE)
				return -VMMX_ENOMEM;
			n = realloc(s->slots, cap * sizeof(*n));
			if (!n)
				return -VMMX_ENOMEM;
			s->slots = n;
			s->slot_cap = cap;
		}
		idx = s->nslots++;
		/* generation 1 first, so that no id looks like a small integer */
		s->slots[idx].gen = 1;
	}
	s->slots[idx].h = h;
	h->id = (vmm_handle_t)s->slots[idx].gen << 32 | (idx + 1);
	return 0;
}

static void slot_free(struct sim *s, vmm_handle_t id)
{
	uint32_t idx = (uint32_t)id - 1;

	s->slots[idx].h = NULL;
	s->slots[idx].gen++;
	s->slots[idx].next_free = s->free_slot;
	s->free_slot = idx;
}

/* Free a handle: released and unmapped.  Its capacity goes back here. */
static void handle_free(struct sim *s, struct sim_handle *h)
{
	uint64_t *used, cap;

	if (!loc_pool(s, h->loc, &used, &cap))
		*used -= h->size;
	munmap(h->phys, h->size);
	close(h->fd);
	if (h->prev)
		h->prev->next = h->next;
	else
		s->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	s->nhandles--;
	free(h);
}

/* --- reservations and mappings --- */

/*
 * The reservation holding @a, or NULL.  *@pos_p (may be NULL) gets the index
 * of the first reservation starting above @a, where a new one would go.
 */
static struct sim_resv *resv_find(struct sim *s, uintptr_t a, size_t *pos_p)
{
	size_t lo = 0, hi = s->nresv;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->resv[mid]->base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (pos_p)
		*pos_p = lo;
	if (lo && a - s->resv[lo - 1]->base < s->resv[lo - 1]->size)
		return s->resv[lo - 1];
	return NULL;
}

/* Index of the first mapping of @r that ends after @a. */
static size_t map_lower(const struct sim_resv *r, uintptr_t a)
{
	size_t lo = 0, hi = r->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (r->maps[mid].va + r->maps[mid].size <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * The reservation holding @a in any instance of the process, or NULL: the
 * copy engine reaches every context's memory, as one driver serves all the
 * contexts of a process.  *@next_p (may be NULL) gets the lowest base above
 * @a over every instance, UINTPTR_MAX if none.  world.lock is held.
 */
static struct sim_resv *world_resv_find(uintptr_t a, uintptr_t *next_p)
{
	uintptr_t next = UINTPTR_MAX;
	struct sim_resv *r;
	size_t pos;

	for (struct sim *o = world.all; o; o = o->world_next) {
		r = resv_find(o, a, &pos);
		if (r)
			return r;
		if (pos < o->nresv && o->resv[pos]->base < next)
			next = o->resv[pos]->base;
	}
	if (next_p)
		*next_p = next;
	return NULL;
}

static bool host_mapped(uintptr_t a, size_t len);

/*
 * Check that [va, va + size) lies in one reservation and is exactly covered
 * by whole, adjacent mappings; on success *@r_p, *@first_p and *@end_p name
 * them.  Returns NULL or why not.
 */
static const char *whole_maps(struct sim *s, uintptr_t va, size_t size, struct sim_resv **r_p,
			      size_t *first_p, size_t *end_p)
{
	struct sim_resv *r = resv_find(s, va, NULL);
	uintptr_t cur = va, end = va + size;
	size_t i, j;

	if (!r)
		return "address not in any reservation";
	if (end - r->base > r->size)
		return "range runs past the end of its reservation";
	i = map_lower(r, va);
	for (j = i; cur < end; j++) {
		if (j == r->nmaps || r->maps[j].va > cur)
			return "range is not fully mapped";
		if (r->maps[j].va < cur || r->maps[j].va + r->maps[j].size > end)
			return "range cuts through a mapping (whole mappings only)";
		cur += r->maps[j].size;
	}
	*r_p = r;
	*first_p = i;
	*end_p = j;
	return NULL;
}

/* Put the reservation's PROT_NONE placeholder back over [va, va + size). */
static int placeholder(uintptr_t va, size_t size)
{
	void *p = mmap((void *)va, size, PROT_NONE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);

	return p == MAP_FAILED ? os_err(errno) : 0;
}

/* --- ops --- */

static int sim_query(struct vmm *v, struct vmm_info *info)
{
	struct sim *s = to_sim(v);

	if (!info)
		return fail(s, -VMMX_EINVAL, "query(NULL): no info to fill");
	info->backend = "sim";
	info->device_count = s->ndev;
	info->driver_version = 0;
	snprintf(info->device_name, sizeof(info->device_name), "libvmmx simulated device %d",
		 s->device);
	return 0;
}

static int sim_device_name(struct vmm *v, int device, char *buf, size_t len)
{
	struct sim *s = to_sim(v);

	if (device < 0 || device >= s->ndev)
		return fail(s, -VMMX_ENODEV, "device_name(%d): no such device (%d simulated)", device,
			    s->ndev);
	snprintf(buf, len, "libvmmx simulated device %d", device);
	return 0;
}

static int sim_granularity(struct vmm *v, struct vmmx_loc loc, size_t *gran_p)
{
	struct sim *s = to_sim(v);
	uint64_t *used, cap;

	/* the pool's lookup only reads constants: no lock */
	if (loc_pool(s, loc, &used, &cap))
		return fail(s, -VMMX_EINVAL, "granularity(%s:%d): unknown location",
			    kind_name(loc.kind), loc.id);
	if (!gran_p)
		return fail(s, -VMMX_EINVAL, "granularity(%s:%d): NULL output",
			    kind_name(loc.kind), loc.id);
	*gran_p = SIM_GRAN;
	return 0;
}

static int sim_mem_info(struct vmm *v, struct vmmx_loc loc, uint64_t *free_p, uint64_t *total_p)
{
	struct sim *s = to_sim(v);
	uint64_t *used, cap;

	pthread_mutex_lock(&world.lock);
	if (loc_pool(s, loc, &used, &cap)) {
		pthread_mutex_unlock(&world.lock);
		if (loc.kind == VMMX_LOC_HOST_NUMA)
			return fail(s, -VMMX_EINVAL,
				    "mem_info(host-numa:%d): no such NUMA node (the sim has %d, 0 to %d)",
				    loc.id, SIM_NUMA_NODES, SIM_NUMA_NODES - 1);
		return fail(s, -VMMX_EINVAL, "mem_info(%s:%d): unknown location",
			    kind_name(loc.kind), loc.id);
	}
	if (free_p)
		*free_p = cap - *used;
	if (free_p && loc.kind == VMMX_LOC_DEVICE)
		s->free_queries[loc.id]++;
	if (total_p)
		*total_p = cap;
	pthread_mutex_unlock(&world.lock);
	return 0;
}

static int sim_reserve(struct vmm *v, size_t size, size_t align, void **va_p)
{
	struct sim *s = to_sim(v);
	size_t a = align > SIM_GRAN ? align : SIM_GRAN, pos, over;
	struct sim_resv *r, **n;
	uintptr_t p, start;
	int err;

	if (!va_p)
		return fail(s, -VMMX_EINVAL, "reserve(%zu, %zu): NULL output", size, align);
	if (!size || !gran_ok(size))
		return fail(s, -VMMX_EINVAL,
			    "reserve(%zu, %zu): size is not a nonzero multiple of %zu", size, align,
			    SIM_GRAN);
	if (align & (align - 1))
		return fail(s, -VMMX_EINVAL, "reserve(%zu, %zu): alignment is not a power of 2",
			    size, align);
	/* over-reserve by the alignment, then trim both ends */
	over = size + a;
	if (over < size)
		return fail(s, -VMMX_ENOMEM, "reserve(%zu, %zu): too large", size, align);

	pthread_mutex_lock(&world.lock);
	r = calloc(1, sizeof(*r));
	if (!r) {
		err = fail(s, -VMMX_ENOMEM, "reserve(%zu, %zu): out of memory", size, align);
		goto err_unlock;
	}
	if (s->nresv == s->resv_cap) {
		size_t cap = s->resv_cap ? s->resv_cap * 2 : 16;

		n = realloc(s->resv, cap * sizeof(*n));
		if (!n) {
			err = fail(s, -VMMX_ENOMEM, "reserve(%zu, %zu): out of memory", size,
				   align);
			goto err_free;
		}
		s->resv = n;
		s->resv_cap = cap;
	}
	p = (uintptr_t)mmap(NULL, over, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			    -1, 0);
	if (p == (uintptr_t)MAP_FAILED) {
		err = fail(s, os_err(errno), "reserve(%zu, %zu): mmap: %s", size, align,
			   strerror(errno));
		goto err_free;
	}
	start = (p + a - 1) & ~(uintptr_t)(a - 1);
	if (start > p)
		munmap((void *)p, start - p);
	if (p + over > start + size)
		munmap((void *)(start + size), p + over - (start + size));

	r->base = start;
	r->size = size;
	resv_find(s, start, &pos);
	memmove(&s->resv[pos + 1], &s->resv[pos], (s->nresv - pos) * sizeof(*s->resv));
	s->resv[pos] = r;
	s->nresv++;
	pthread_mutex_unlock(&world.lock);
	*va_p = (void *)start;
	return 0;

err_free:
	free(r);
err_unlock:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_unreserve(struct vmm *v, void *va, size_t size)
{
	struct sim *s = to_sim(v);
	struct sim_resv *r;
	size_t pos;
	int err;

	pthread_mutex_lock(&world.lock);
	r = resv_find(s, (uintptr_t)va, NULL);
	if (!r || r->base != (uintptr_t)va || r->size != size) {
		err = fail(s, -VMMX_EINVAL,
			   "unreserve(%p, %zu): not a whole reservation (the range must be one "
			   "reserve() exactly)", va, size);
		goto out;
	}
	if (r->nmaps) {
		err = fail(s, -VMMX_EBUSY, "unreserve(%p, %zu): %zu mapping(s) still inside",
			   va, size, r->nmaps);
		goto out;
	}
	if (munmap(va, size)) {
		err = fail(s, os_err(errno), "unreserve(%p, %zu): munmap: %s", va, size,
			   strerror(errno));
		goto out;
	}
	resv_find(s, (uintptr_t)va, &pos);
	pos--; /* resv_find gives the index after the one holding va */
	memmove(&s->resv[pos], &s->resv[pos + 1], (s->nresv - pos - 1) * sizeof(*s->resv));
	s->nresv--;
	free(r->maps);
	free(r);
	err = 0;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_memfd(struct vmmx_loc loc)
{
	char name[32];

	snprintf(name, sizeof(name), "vmmx-sim:%s:%d", kind_name(loc.kind), loc.id);
#ifdef HAVE_MEMFD_CREATE
	return memfd_create(name, MFD_CLOEXEC);
#elif defined(SYS_memfd_create)
	return (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC);
#else
	errno = ENOSYS;
	return -1;
#endif
}

static int sim_create(struct vmm *v, struct vmmx_loc loc, size_t size, vmm_handle_t *h_p)
{
	struct sim *s = to_sim(v);
	struct sim_handle *h;
	uint64_t *used, cap;
	int err;

	if (!h_p)
		return fail(s, -VMMX_EINVAL, "create(%s:%d, %zu): NULL output",
			    kind_name(loc.kind), loc.id, size);
	if (!size || !gran_ok(size))
		return fail(s, -VMMX_EINVAL,
			    "create(%s:%d, %zu): size is not a nonzero multiple of %zu",
			    kind_name(loc.kind), loc.id, size, SIM_GRAN);

	pthread_mutex_lock(&world.lock);
	if (loc_pool(s, loc, &used, &cap)) {
		err = fail(s, -VMMX_EINVAL, "create(%s:%d, %zu): unknown location (%d device(s))",
			   kind_name(loc.kind), loc.id, size, s->ndev);
		goto err_unlock;
	}
	if (size > cap - *used) {
		err = fail(s, -VMMX_ENOMEM,
			   "create(%s:%d, %zu): out of memory (%llu of %llu bytes free)",
			   kind_name(loc.kind), loc.id, size, (unsigned long long)(cap - *used),
			   (unsigned long long)cap);
		goto err_unlock;
	}
	h = calloc(1, sizeof(*h));
	if (!h) {
		err = fail(s, -VMMX_ENOMEM, "create(%s:%d, %zu): out of memory",
			   kind_name(loc.kind), loc.id, size);
		goto err_unlock;
	}
	h->loc = loc;
	h->size = size;
	h->fd = sim_memfd(loc);
	if (h->fd < 0) {
		err = fail(s, os_err(errno), "create(%s:%d, %zu): memfd_create: %s",
			   kind_name(loc.kind), loc.id, size, strerror(errno));
		goto err_free;
	}
	/* sparse: pages are allocated when first written, so capacity costs nothing */
	if (ftruncate(h->fd, (off_t)size)) {
		err = fail(s, os_err(errno), "create(%s:%d, %zu): ftruncate: %s",
			   kind_name(loc.kind), loc.id, size, strerror(errno));
		goto err_close;
	}
	h->phys = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, h->fd, 0);
	if (h->phys == MAP_FAILED) {
		err = fail(s, os_err(errno), "create(%s:%d, %zu): mmap: %s", kind_name(loc.kind),
			   loc.id, size, strerror(errno));
		goto err_close;
	}
	err = slot_alloc(s, h);
	if (err) {
		fail(s, err, "create(%s:%d, %zu): handle table full", kind_name(loc.kind), loc.id,
		     size);
		goto err_unmap;
	}
	*used += size;
	h->next = s->handles;
	if (h->next)
		h->next->prev = h;
	s->handles = h;
	s->nhandles++;
	*h_p = h->id;
	pthread_mutex_unlock(&world.lock);
	return 0;

err_unmap:
	munmap(h->phys, size);
err_close:
	close(h->fd);
err_free:
	free(h);
err_unlock:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_release(struct vmm *v, vmm_handle_t id)
{
	struct sim *s = to_sim(v);
	struct sim_handle *h;

	pthread_mutex_lock(&world.lock);
	h = handle_get(s, id);
	if (!h) {
		pthread_mutex_unlock(&world.lock);
		return fail(s, -VMMX_EINVAL, "release(%#llx): unknown or released handle",
			    (unsigned long long)id);
	}
	slot_free(s, id);
	h->id = 0;
	/* still mapped: the memory lives on until the last unmap, as with cuMemRelease */
	if (!h->maps)
		handle_free(s, h);
	pthread_mutex_unlock(&world.lock);
	return 0;
}

static int sim_map(struct vmm *v, void *va, size_t size, vmm_handle_t id)
{
	struct sim *s = to_sim(v);
	uintptr_t a = (uintptr_t)va;
	struct sim_handle *h;
	struct sim_resv *r;
	struct sim_map *m;
	size_t i;
	int err;

	if (!range_ok(a, size))
		return fail(s, -VMMX_EINVAL,
			    "map(%p, %zu, %#llx): address or size not a nonzero multiple of %zu",
			    va, size, (unsigned long long)id, SIM_GRAN);

	pthread_mutex_lock(&world.lock);
	h = handle_get(s, id);
	if (!h) {
		err = fail(s, -VMMX_EINVAL, "map(%p, %zu, %#llx): unknown or released handle", va,
			   size, (unsigned long long)id);
		goto out;
	}
	if (size != h->size) {
		err = fail(s, -VMMX_EINVAL,
			   "map(%p, %zu, %#llx): size differs from the handle's %zu (handles map "
			   "whole)", va, size, (unsigned long long)id, h->size);
		goto out;
	}
	r = resv_find(s, a, NULL);
	if (!r || a + size - r->base > r->size) {
		err = fail(s, -VMMX_EINVAL,
			   "map(%p, %zu, %#llx): range is not inside one reservation", va, size,
			   (unsigned long long)id);
		goto out;
	}
	i = map_lower(r, a);
	if (i < r->nmaps && r->maps[i].va < a + size) {
		err = fail(s, -VMMX_EINVAL, "map(%p, %zu, %#llx): range overlaps the mapping at %p",
			   va, size, (unsigned long long)id, (void *)r->maps[i].va);
		goto out;
	}
	/* grow the table first: once mmap has replaced the placeholder, nothing may fail */
	if (r->nmaps == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 8;

		m = realloc(r->maps, cap * sizeof(*m));
		if (!m) {
			err = fail(s, -VMMX_ENOMEM, "map(%p, %zu, %#llx): out of memory", va, size,
				   (unsigned long long)id);
			goto out;
		}
		r->maps = m;
		r->cap = cap;
	}
	/* PROT_NONE: cuMemMap grants no access; set_access does */
	if (mmap(va, size, PROT_NONE, MAP_SHARED | MAP_FIXED, h->fd, 0) == MAP_FAILED) {
		int e = errno;

		/* MAP_FIXED may have torn the placeholder down: put it back (best effort) */
		placeholder(a, size);
		err = fail(s, os_err(e), "map(%p, %zu, %#llx): mmap: %s", va, size,
			   (unsigned long long)id, strerror(e));
		goto out;
	}
	memmove(&r->maps[i + 1], &r->maps[i], (r->nmaps - i) * sizeof(*r->maps));
	r->maps[i] = (struct sim_map){ .va = a, .size = size, .h = h };
	r->nmaps++;
	h->maps++;
	s->nmappings++;
	err = 0;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_unmap(struct vmm *v, void *va, size_t size)
{
	struct sim *s = to_sim(v);
	struct sim_resv *r;
	size_t i, first, end;
	const char *why;
	int err;

	if (!range_ok((uintptr_t)va, size))
		return fail(s, -VMMX_EINVAL,
			    "unmap(%p, %zu): address or size not a nonzero multiple of %zu", va,
			    size, SIM_GRAN);

	pthread_mutex_lock(&world.lock);
	why = whole_maps(s, (uintptr_t)va, size, &r, &first, &end);
	if (why) {
		err = fail(s, -VMMX_EINVAL, "unmap(%p, %zu): %s", va, size, why);
		goto out;
	}
	/* one mmap over the whole range: either every mapping goes or none does */
	err = placeholder((uintptr_t)va, size);
	if (err) {
		fail(s, err, "unmap(%p, %zu): mmap: %s", va, size, strerror(errno));
		goto out;
	}
	for (i = first; i < end; i++) {
		struct sim_handle *h = r->maps[i].h;

		if (!--h->maps && !h->id)
			handle_free(s, h);
	}
	memmove(&r->maps[first], &r->maps[end], (r->nmaps - end) * sizeof(*r->maps));
	r->nmaps -= end - first;
	s->nmappings -= (int64_t)(end - first);
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_set_access(struct vmm *v, void *va, size_t size, const struct vmm_access *acc,
			  int n)
{
	struct sim *s = to_sim(v);
	uint64_t set_r = 0, set_w = 0, clear = 0;
	int cpu_prot = -1, err, k;
	struct sim_resv *r;
	size_t i, first, end;
	const char *why;

	if (!range_ok((uintptr_t)va, size))
		return fail(s, -VMMX_EINVAL,
			    "set_access(%p, %zu): address or size not a nonzero multiple of %zu",
			    va, size, SIM_GRAN);
	if (!acc || n < 1)
		return fail(s, -VMMX_EINVAL, "set_access(%p, %zu): no access descriptor", va,
			    size);
	/* check every descriptor before changing anything: the call is all or nothing */
	for (k = 0; k < n; k++) {
		struct vmmx_loc who = acc[k].who;
		int prot;

		switch (acc[k].flags) {
		case VMM_ACCESS_NONE:
			prot = PROT_NONE;
			break;
		case VMM_ACCESS_READ:
			prot = PROT_READ;
			break;
		case VMM_ACCESS_RW:
			prot = PROT_READ | PROT_WRITE;
			break;
		default:
			return fail(s, -VMMX_EINVAL, "set_access(%p, %zu): bad flags %d", va,
				    size, (int)acc[k].flags);
		}
		if (who.kind == VMMX_LOC_DEVICE && who.id >= 0 && who.id < s->ndev) {
			uint64_t bit = (uint64_t)1 << who.id;

			/* a later descriptor for the same device wins */
			set_r &= ~bit;
			set_w &= ~bit;
			clear |= bit;
			if (prot & PROT_READ)
				set_r |= bit;
			if (prot & PROT_WRITE)
				set_w |= bit;
		} else if (who.kind == VMMX_LOC_HOST ||
			   (who.kind == VMMX_LOC_HOST_NUMA && who.id >= 0 &&
			    who.id < SIM_NUMA_NODES)) {
			cpu_prot = prot;
		} else {
			return fail(s, -VMMX_EINVAL, "set_access(%p, %zu): unknown accessor %s:%d",
				    va, size, kind_name(who.kind), who.id);
		}
	}

	pthread_mutex_lock(&world.lock);
	why = whole_maps(s, (uintptr_t)va, size, &r, &first, &end);
	if (why) {
		err = fail(s, -VMMX_EINVAL, "set_access(%p, %zu): %s", va, size, why);
		goto out;
	}
	if (cpu_prot >= 0) {
		for (i = first; i < end; i++) {
			if (!vmm_loc_is_host(r->maps[i].h->loc)) {
				err = fail(s, -VMMX_EINVAL,
					   "set_access(%p, %zu): the CPU cannot be granted access "
					   "to device memory (the chunk at %p is on device %d)",
					   va, size, (void *)r->maps[i].va, r->maps[i].h->loc.id);
				goto out;
			}
		}
		/* first, as the only step that can fail: then nothing has changed yet */
		if (mprotect(va, size, cpu_prot)) {
			err = fail(s, os_err(errno), "set_access(%p, %zu): mprotect: %s", va, size,
				   strerror(errno));
			goto out;
		}
	}
	for (i = first; i < end; i++) {
		r->maps[i].dev_read = (r->maps[i].dev_read & ~clear) | set_r;
		r->maps[i].dev_write = (r->maps[i].dev_write & ~clear) | set_w;
	}
	err = 0;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

/*
 * Check one side of a copy or memset: [a, a + n) is either wholly outside
 * every reservation (plain host memory, used as is) or wholly inside one,
 * mapped and accessible to this instance's device (for writing when @write),
 * and then all of one kind of memory.  Returns 0, -VMMX_EFAULT with *@why
 * set, or -VMMX_EINVAL (*@why NULL) when it spans device and host memory.
 * @host_split (NULL for copies): set when the range runs from one host
 * handle into another, which cuMemsetD8 refuses with CUDA_ERROR_INVALID_VALUE
 * (H100, driver 580) though copies cross such handles.
 * @kernel: the range is read by a kernel (checksum), not the copy engine:
 * it must lie in a reservation (a kernel cannot read plain pageable memory
 * on the project's GPUs) and may run from device into host memory.
 */
static int side_check(struct sim *s, uintptr_t a, size_t n, bool write, const char **why,
		      bool *host_split, bool kernel)
{
	uint64_t bit = (uint64_t)1 << s->device;
	const struct sim_handle *prev = NULL;
	struct sim_resv *r;
	bool dev = false, host = false;
	uintptr_t cur = a, end = a + n, next = UINTPTR_MAX;
	size_t i;

	r = world_resv_find(a, &next);
	if (!r && kernel) {
		*why = "range is not in a reservation: plain host memory, which a kernel cannot read";
		return -VMMX_EFAULT;
	}
	if (!r) {
		if (next < end) {
			*why = "range runs from plain memory into a reservation";
			return -VMMX_EFAULT;
		}
		/* the driver would fault on a hole in pageable memory: refuse it */
		if (!host_mapped(a, n)) {
			*why = "range is not mapped memory";
			return -VMMX_EFAULT;
		}
		return 0;
	}
	if (end - r->base > r->size) {
		*why = "range runs past the end of its reservation";
		return -VMMX_EFAULT;
	}
	for (i = map_lower(r, a); cur < end; i++) {
		const struct sim_map *m = &r->maps[i];

		if (i == r->nmaps || m->va > cur) {
			*why = "range is not fully mapped";
			return -VMMX_EFAULT;
		}
		if (!((write ? m->dev_write : m->dev_read) & bit)) {
			*why = write ? "range is not writable by the device (set_access)"
				     : "range is not readable by the device (set_access)";
			return -VMMX_EFAULT;
		}
		if (vmm_loc_is_host(m->h->loc))
			host = true;
		else
			dev = true;
		if (dev && host && !kernel) {
			*why = NULL;
			return -VMMX_EINVAL;
		}
		if (host_split && prev && m->h != prev && host)
			*host_split = true;
		prev = m->h;
		cur = m->va + m->size;
	}
	return 0;
}

/* Where the byte at @a lives now, and how many bytes follow it contiguously. */
static char *xlate(uintptr_t a, size_t *avail)
{
	struct sim_resv *r = world_resv_find(a, NULL);
	struct sim_map *m;

	if (!r) {
		*avail = SIZE_MAX;
		return (char *)a;
	}
	m = &r->maps[map_lower(r, a)];
	*avail = m->va + m->size - a;
	return (char *)m->h->phys + (a - m->va);
}

/* Report a failed side check of copy or memset; the lock is held. */
static int side_fail(struct sim *s, int err, const char *op, const char *side, const char *why,
		     uintptr_t dst, uintptr_t src, size_t n)
{
	char args[96];

	if (strcmp(op, "memset"))
		snprintf(args, sizeof(args), "dst=%p, src=%p, n=%zu", (void *)dst, (void *)src, n);
	else
		snprintf(args, sizeof(args), "dst=%p, n=%zu", (void *)dst, n);
	if (!why) {
		/* the one error reported above debug level: it names a bug of the caller */
		vmm_reportf(&s->head, VMMX_LOG_ERROR, err,
			    "sim: one %s spans device and host memory (this crashes the CUDA "
			    "driver; split it): %s(%s), %s side", op, op, args, side);
		return err;
	}
	return fail(s, err, "%s(%s): %s: %s", op, args, side, why);
}

/* Index of the first live stream id >= @id; the lock is held. */
static size_t stream_lower(const struct sim *s, vmm_stream_t id)
{
	size_t lo = 0, hi = s->nstreams;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->streams[mid] < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Whether @id names a live stream (0, the default stream, when @zero_ok); lock held. */
static bool stream_ok(const struct sim *s, vmm_stream_t id, bool zero_ok)
{
	size_t i;

	if (!id)
		return zero_ok;
	i = stream_lower(s, id);
	return i < s->nstreams && s->streams[i] == id;
}

/*
 * copy and copy_async: one body, so that both keep exactly the same rules.
 * @op names the call in messages; @stream is NULL for copy, else the stream
 * copy_async was given (checked first: an unknown stream fails even a copy
 * of 0 bytes, as the driver's handle check comes before any work).
 */
static int copy_common(struct sim *s, const char *op, void *dst, const void *src, size_t n,
		       const vmm_stream_t *stream)
{
	uintptr_t d = (uintptr_t)dst, sr = (uintptr_t)src;
	const char *why;
	int err;

	if (!dst || !src)
		return fail(s, -VMMX_EINVAL, "%s(dst=%p, src=%p, n=%zu): NULL address", op, dst,
			    src, n);
	if (n && (d + n < d || sr + n < sr))
		return fail(s, -VMMX_EINVAL, "%s(dst=%p, src=%p, n=%zu): range wraps", op, dst,
			    src, n);
	/* the driver's result is undefined there; refusing catches the caller's bug */
	if (n && d < sr + n && sr < d + n)
		return fail(s, -VMMX_EINVAL, "%s(dst=%p, src=%p, n=%zu): ranges overlap", op, dst,
			    src, n);

	pthread_mutex_lock(&world.lock);
	if (stream && !stream_ok(s, *stream, true)) {
		err = fail(s, -VMMX_EINVAL,
			   "%s(dst=%p, src=%p, n=%zu, stream=%#llx): unknown stream", op, dst,
			   src, n, (unsigned long long)*stream);
		goto out;
	}
	err = 0;
	if (!n)
		goto out;
	err = side_check(s, d, n, true, &why, NULL, false);
	if (err) {
		side_fail(s, err, op, "destination", why, d, sr, n);
		goto out;
	}
	err = side_check(s, sr, n, false, &why, NULL, false);
	if (err) {
		side_fail(s, err, op, "source", why, d, sr, n);
		goto out;
	}
	while (n) {
		size_t ad, as, len;
		char *pd = xlate(d, &ad);
		char *ps = xlate(sr, &as);

		len = n < ad ? n : ad;
		len = len < as ? len : as;
		/* memmove: two mappings of one handle may alias physically */
		memmove(pd, ps, len);
		d += len;
		sr += len;
		n -= len;
	}
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_copy(struct vmm *v, void *dst, const void *src, size_t n)
{
	return copy_common(to_sim(v), "copy", dst, src, n, NULL);
}

/* Copies at submission: the stream orders nothing, stream_sync waits for nothing. */
static int sim_copy_async(struct vmm *v, void *dst, const void *src, size_t n, vmm_stream_t st)
{
	return copy_common(to_sim(v), "copy_async", dst, src, n, &st);
}

static int sim_memset(struct vmm *v, void *dst, int c, size_t n)
{
	struct sim *s = to_sim(v);
	uintptr_t d = (uintptr_t)dst;
	bool split = false;
	const char *why;
	int err;

	if (!dst)
		return fail(s, -VMMX_EINVAL, "memset(dst=%p, n=%zu): NULL address", dst, n);
	if (!n)
		return 0;
	if (d + n < d)
		return fail(s, -VMMX_EINVAL, "memset(dst=%p, n=%zu): range wraps", dst, n);

	pthread_mutex_lock(&world.lock);
	err = side_check(s, d, n, true, &why, &split, false);
	if (err) {
		side_fail(s, err, "memset", "destination", why, d, 0, n);
		goto out;
	}
	if (split) {
		err = fail(s, -VMMX_EINVAL,
			   "memset(dst=%p, n=%zu): range runs from one host allocation into another (the driver refuses it: CUDA_ERROR_INVALID_VALUE)",
			   dst, n);
		goto out;
	}
	while (n) {
		size_t avail, len;
		char *p = xlate(d, &avail);

		len = n < avail ? n : avail;
		memset(p, c, len);
		d += len;
		n -= len;
	}
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

/*
 * The device checksum (vmm.h), on the CPU over the physical views.  The
 * dispatch layer checked alignment: @va and @size are multiples of 8, and
 * mappings start at granularity boundaries, so no word straddles two.
 */
static int sim_checksum(struct vmm *v, const void *va, size_t size, uint64_t *sum_p)
{
	struct sim *s = to_sim(v);
	uintptr_t a = (uintptr_t)va;
	uint64_t sum = 0, i = 0;
	const char *why;
	int err;

	pthread_mutex_lock(&world.lock);
	err = side_check(s, a, size, false, &why, NULL, true);
	if (err) {
		err = fail(s, err, "checksum(%p, %zu): %s", va, size, why);
		goto out;
	}
	while (size) {
		size_t avail, len;
		const unsigned char *p = (const unsigned char *)xlate(a, &avail);

		len = size < avail ? size : avail;
		for (size_t k = 0; k < len; k += 8, i++) {
			uint64_t w = 0;

			for (int b = 7; b >= 0; b--) /* little-endian whatever the host */
				w = w << 8 | p[k + (size_t)b];
			w ^= i * VMM_SUM_GOLDEN;
			w = (w ^ (w >> 30)) * VMM_SUM_MUL1;
			w = (w ^ (w >> 27)) * VMM_SUM_MUL2;
			sum += w ^ (w >> 31);
		}
		a += len;
		size -= len;
	}
	*sum_p = sum;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static void complete_all(struct sim *s);
static struct sim_sstate *sstate(struct sim *s, vmm_stream_t id, bool make);

static int sim_sync(struct vmm *v)
{
	struct sim *s = to_sim(v);

	/* copies and memsets are complete when they return; held marks complete now */
	pthread_mutex_lock(&world.lock);
	complete_all(s);
	pthread_mutex_unlock(&world.lock);
	return 0;
}

/* --- attributes and peers --- */

static int sim_attr(struct vmm *v, int device, enum vmm_attr a, int *val)
{
	struct sim *s = to_sim(v);
	int x;

	/* everything read here is set at open: no lock */
	if (device < 0 || device >= s->ndev)
		return fail(s, -VMMX_ENODEV, "attr(device %d, %s): no such device (%d simulated)",
			    device, vmm_attr_name(a) ? vmm_attr_name(a) : "?", s->ndev);
	switch (a) {
	case VMM_ATTR_VMM:
	case VMM_ATTR_HOST_VMM:
	case VMM_ATTR_HOST_NUMA_VMM:
	case VMM_ATTR_HOST_REGISTER:
	case VMM_ATTR_HOST_POINTER_FOR_REGISTERED:
	case VMM_ATTR_POSIX_FD:
	case VMM_ATTR_CONCURRENT_MANAGED:
	case VMM_ATTR_UNIFIED_ADDRESSING:
		x = 1;
		break;
	case VMM_ATTR_HOST_NUMA_ID:
		x = 0; /* the only node loc_pool() knows */
		break;
	case VMM_ATTR_PAGEABLE_ACCESS:
	case VMM_ATTR_PAGEABLE_HOST_PAGE_TABLES:
		x = s->pageable;
		break;
	case VMM_ATTR_COMPUTE_MAJOR:
		x = SIM_CC_MAJOR;
		break;
	case VMM_ATTR_COMPUTE_MINOR:
		x = SIM_CC_MINOR;
		break;
	case VMM_ATTR_SM_COUNT:
		x = SIM_SM_COUNT;
		break;
	case VMM_ATTR_GPU_DIRECT_RDMA_VMM:
		x = 0; /* the sim has no NIC to talk to */
		break;
	default:
		return fail(s, -VMMX_EINVAL, "attr(device %d): unknown attribute %d", device,
			    (int)a);
	}
	*val = x;
	return 0;
}

static int sim_can_access_peer(struct vmm *v, int dev, int peer, int *val)
{
	struct sim *s = to_sim(v);

	if (dev < 0 || dev >= s->ndev || peer < 0 || peer >= s->ndev)
		return fail(s, -VMMX_ENODEV,
			    "can_access_peer(%d, %d): no such device (%d simulated)", dev, peer,
			    s->ndev);
	/* all emulated devices sit on one switch; a device is not its own peer */
	*val = dev != peer;
	return 0;
}

/* --- host registration --- */

/* Index of the first registration starting above @a; the lock is held. */
static size_t reg_upper(const struct sim *s, uintptr_t a)
{
	size_t lo = 0, hi = s->nregs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (s->regs[mid].base <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Whether every page of [a, a + len) is mapped: msync() fails with ENOMEM on
 * an unmapped page and does nothing else with MS_ASYNC.  The driver pins the
 * pages and fails on a hole, so the sim refuses one too.
 */
static bool host_mapped(uintptr_t a, size_t len)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = a & ~(page - 1);

	return !msync((void *)lo, a + len - lo, MS_ASYNC);
}

/*
 * The registration of any instance that overlaps [a, end), or NULL; its
 * instance in *@owner_p.  The lock is held.
 */
static const struct sim_reg *world_reg_overlap(uintptr_t a, uintptr_t end,
					       const struct sim **owner_p)
{
	for (const struct sim *o = world.all; o; o = o->world_next) {
		size_t pos = reg_upper(o, a);

		*owner_p = o;
		if (pos && o->regs[pos - 1].base + o->regs[pos - 1].len > a)
			return &o->regs[pos - 1];
		if (pos < o->nregs && o->regs[pos].base < end)
			return &o->regs[pos];
	}
	return NULL;
}

static int sim_host_register(struct vmm *v, void *ptr, size_t len, void **dptr_p)
{
	struct sim *s = to_sim(v);
	uintptr_t a = (uintptr_t)ptr, end = a + len, next;
	const struct sim_reg *o;
	const struct sim *owner;
	size_t pos;
	struct sim_reg *n;
	int err;

	if (!ptr || !len || !dptr_p)
		return fail(s, -VMMX_EINVAL, "host_register(%p, %zu): %s", ptr, len,
			    !ptr ? "NULL address" : !len ? "length 0" : "NULL output");
	if (end < a)
		return fail(s, -VMMX_EINVAL, "host_register(%p, %zu): range wraps", ptr, len);

	pthread_mutex_lock(&world.lock);
	/*
	 * The driver refuses memory its own VMM calls mapped: it is
	 * device-side already.  Reservations and registrations are the
	 * process's, as the real driver's are (one driver serves every
	 * context): another instance's reservation or registration is in the
	 * way as much as this one's (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED).
	 */
	if (world_resv_find(a, &next) || next < end) {
		err = fail(s, -VMMX_EINVAL,
			   "host_register(%p, %zu): range lies in a reservation (VMM memory "
			   "cannot be registered)", ptr, len);
		goto out;
	}
	o = world_reg_overlap(a, end, &owner);
	if (o) {
		err = fail(s, -VMMX_EEXIST,
			   "host_register(%p, %zu): overlaps the registration %p (%zu bytes)%s", ptr,
			   len, (void *)o->base, o->len,
			   owner == s ? "" : " of another instance (registrations are the process's)");
		goto out;
	}
	pos = reg_upper(s, a);
	if (!host_mapped(a, len)) {
		err = fail(s, -VMMX_EINVAL, "host_register(%p, %zu): range is not mapped memory",
			   ptr, len);
		goto out;
	}
	if (s->nregs == s->regs_cap) {
		size_t cap = s->regs_cap ? s->regs_cap * 2 : 16;

		n = realloc(s->regs, cap * sizeof(*n));
		if (!n) {
			err = fail(s, -VMMX_ENOMEM, "host_register(%p, %zu): out of memory", ptr,
				   len);
			goto out;
		}
		s->regs = n;
		s->regs_cap = cap;
	}
	memmove(&s->regs[pos + 1], &s->regs[pos], (s->nregs - pos) * sizeof(*s->regs));
	s->regs[pos] = (struct sim_reg){ .base = a, .len = len };
	s->nregs++;
	/* unified addressing: the device sees registered memory at the CPU's address */
	*dptr_p = ptr;
	err = 0;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_host_unregister(struct vmm *v, void *ptr)
{
	struct sim *s = to_sim(v);
	size_t pos;
	int err;

	pthread_mutex_lock(&world.lock);
	pos = reg_upper(s, (uintptr_t)ptr);
	if (!pos || s->regs[pos - 1].base != (uintptr_t)ptr) {
		err = fail(s, -VMMX_ENOENT,
			   "host_unregister(%p): no registration starts there (pass the base "
			   "given to host_register)", ptr);
		goto out;
	}
	pos--;
	memmove(&s->regs[pos], &s->regs[pos + 1], (s->nregs - pos - 1) * sizeof(*s->regs));
	s->nregs--;
	err = 0;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

/* --- streams --- */

static int sim_stream_create(struct vmm *v, vmm_stream_t *s_p)
{
	struct sim *s = to_sim(v);
	vmm_stream_t *n;
	int err = 0;

	pthread_mutex_lock(&world.lock);
	if (s->nstreams == s->streams_cap) {
		size_t cap = s->streams_cap ? s->streams_cap * 2 : 8;

		n = realloc(s->streams, cap * sizeof(*n));
		if (!n) {
			err = fail(s, -VMMX_ENOMEM, "stream_create: out of memory");
			goto out;
		}
		s->streams = n;
		s->streams_cap = cap;
	}
	/* ids grow, so appending keeps the array sorted */
	s->streams[s->nstreams++] = s->next_stream;
	*s_p = s->next_stream++;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_stream_destroy(struct vmm *v, vmm_stream_t id)
{
	struct sim *s = to_sim(v);
	size_t i;
	int err = 0;

	pthread_mutex_lock(&world.lock);
	if (!stream_ok(s, id, false)) {
		err = fail(s, -VMMX_EINVAL, "stream_destroy(%#llx): unknown stream",
			   (unsigned long long)id);
		goto out;
	}
	i = stream_lower(s, id);
	memmove(&s->streams[i], &s->streams[i + 1], (s->nstreams - i - 1) * sizeof(*s->streams));
	s->nstreams--;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_stream_sync(struct vmm *v, vmm_stream_t id)
{
	struct sim *s = to_sim(v);
	int err = 0;

	/* copies were done at submission: the id is checked, held marks complete */
	pthread_mutex_lock(&world.lock);
	if (!stream_ok(s, id, true)) {
		err = fail(s, -VMMX_EINVAL, "stream_sync(%#llx): unknown stream",
			   (unsigned long long)id);
	} else {
		struct sim_sstate *st = sstate(s, id, false);

		if (st)
			st->done = st->seq;
	}
	pthread_mutex_unlock(&world.lock);
	return err;
}

/* --- events --- */

/*
 * Make room for one more element in an array of @n used of *@cap: doubles it
 * (from @first).  false when out of memory (the array is left as it was).
 */
static bool room_for_one(void **arr, size_t *cap, size_t n, size_t elem, size_t first)
{
	size_t c = *cap ? *cap * 2 : first;
	void *p;

	if (n < *cap)
		return true;
	p = realloc(*arr, c * elem);
	if (!p)
		return false;
	*arr = p;
	*cap = c;
	return true;
}

/* The marks of stream @id, made when @make and missing (NULL if out of memory); lock held. */
static struct sim_sstate *sstate(struct sim *s, vmm_stream_t id, bool make)
{
	for (size_t i = 0; i < s->nsstates; i++)
		if (s->sstates[i].id == id)
			return &s->sstates[i];
	if (!make || !room_for_one((void **)&s->sstates, &s->sstates_cap, s->nsstates,
				   sizeof(*s->sstates), 8))
		return NULL;
	s->sstates[s->nsstates] = (struct sim_sstate){ .id = id };
	return &s->sstates[s->nsstates++];
}

static void complete_all(struct sim *s)
{
	for (size_t i = 0; i < s->nsstates; i++)
		s->sstates[i].done = s->sstates[i].seq;
}

static struct sim_event *event_find(struct sim *s, vmm_event_t id)
{
	for (size_t i = 0; i < s->nevents; i++)
		if (s->events[i].id == id)
			return &s->events[i];
	return NULL;
}

static int sim_event_create(struct vmm *v, vmm_event_t *e_p)
{
	struct sim *s = to_sim(v);
	int err = 0;

	pthread_mutex_lock(&world.lock);
	if (room_for_one((void **)&s->events, &s->events_cap, s->nevents, sizeof(*s->events),
			 16)) {
		s->events[s->nevents++] = (struct sim_event){ .id = s->next_event };
		*e_p = s->next_event++;
	} else {
		err = fail(s, -VMMX_ENOMEM, "event_create: out of memory");
	}
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_event_destroy(struct vmm *v, vmm_event_t id)
{
	struct sim *s = to_sim(v);
	struct sim_event *e;
	int err = 0;

	pthread_mutex_lock(&world.lock);
	e = event_find(s, id);
	if (!e)
		err = fail(s, -VMMX_EINVAL, "event_destroy(%#llx): unknown event",
			   (unsigned long long)id);
	else
		*e = s->events[--s->nevents];
	pthread_mutex_unlock(&world.lock);
	return err;
}

static int sim_event_record(struct vmm *v, vmm_event_t id, vmm_stream_t sid)
{
	struct sim *s = to_sim(v);
	struct sim_sstate *st;
	struct sim_event *e;
	int err = 0;

	pthread_mutex_lock(&world.lock);
	e = event_find(s, id);
	if (!e) {
		err = fail(s, -VMMX_EINVAL, "event_record(%#llx): unknown event",
			   (unsigned long long)id);
		goto out;
	}
	if (!stream_ok(s, sid, true)) {
		err = fail(s, -VMMX_EINVAL, "event_record(%#llx, stream %#llx): unknown stream",
			   (unsigned long long)id, (unsigned long long)sid);
		goto out;
	}
	st = sstate(s, sid, true);
	if (!st) {
		err = fail(s, -VMMX_ENOMEM, "event_record: out of memory");
		goto out;
	}
	e->stream = sid;
	e->seq = ++st->seq;
	if (!st->held)
		st->done = st->seq;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

/* 0 completed, -VMMX_EBUSY pending, -VMMX_EINVAL unknown; lock held. */
static int event_state(struct sim *s, vmm_event_t id, const char *op)
{
	struct sim_event *e = event_find(s, id);
	struct sim_sstate *st;

	if (!e)
		return fail(s, -VMMX_EINVAL, "%s(%#llx): unknown event", op,
			    (unsigned long long)id);
	if (!e->seq)
		return 0;
	st = sstate(s, e->stream, false);
	/* a destroyed stream's work still completes: its marks count as done */
	return !st || st->done >= e->seq || !stream_ok(s, e->stream, true) ? 0 : -VMMX_EBUSY;
}

static int sim_event_query(struct vmm *v, vmm_event_t id)
{
	struct sim *s = to_sim(v);
	int err;

	pthread_mutex_lock(&world.lock);
	err = event_state(s, id, "event_query");
	pthread_mutex_unlock(&world.lock);
	return err;
}

/*
 * A held stream's marks complete only when a test says so, and waiting for
 * one would wait forever: the emulation completes the stream instead, as
 * the device would once its work ran.
 */
static int sim_event_sync(struct vmm *v, vmm_event_t id)
{
	struct sim *s = to_sim(v);
	int err;

	pthread_mutex_lock(&world.lock);
	err = event_state(s, id, "event_sync");
	if (err == -VMMX_EBUSY) {
		struct sim_event *e = event_find(s, id);

		sstate(s, e->stream, false)->done = e->seq;
		err = 0;
	}
	pthread_mutex_unlock(&world.lock);
	return err;
}

int vmm_sim_stream_hold(struct vmm *v, vmm_stream_t id, bool hold)
{
	struct sim *s = to_sim(v);
	struct sim_sstate *st;
	int err = 0;

	if (v->ops != &sim_ops)
		return -VMMX_ENOTSUP;
	pthread_mutex_lock(&world.lock);
	if (!stream_ok(s, id, true)) {
		err = fail(s, -VMMX_EINVAL, "stream_hold(%#llx): unknown stream",
			   (unsigned long long)id);
		goto out;
	}
	st = sstate(s, id, true);
	if (!st) {
		err = fail(s, -VMMX_ENOMEM, "stream_hold: out of memory");
		goto out;
	}
	st->held = hold;
	if (!hold)
		st->done = st->seq;
out:
	pthread_mutex_unlock(&world.lock);
	return err;
}

/* --- what an address is --- */

/*
 * Classify @p as the process's one driver would: inside any instance's
 * reservation it is the chunk mapped there (or reserved, unmapped space);
 * inside any instance's registration it is registered host memory; else
 * pageable memory the driver does not know, up to the next range it does.
 */
static int sim_ptr_info(struct vmm *v, const void *p, struct vmm_ptr_info *info)
{
	uintptr_t a = (uintptr_t)p, next = UINTPTR_MAX;
	struct vmm_ptr_info out = { .kind = VMM_MEM_PAGEABLE, .device = -1 };
	struct sim_resv *r;
	size_t i;

	pthread_mutex_lock(&world.lock);
	r = world_resv_find(a, &next);
	if (r) {
		i = map_lower(r, a);
		if (i < r->nmaps && r->maps[i].va <= a) {
			const struct sim_map *m = &r->maps[i];

			out.kind = vmm_loc_is_host(m->h->loc) ? VMM_MEM_HOST_CHUNK : VMM_MEM_DEVICE;
			out.device = out.kind == VMM_MEM_DEVICE ? m->h->loc.id : -1;
			out.len = m->va + m->size - a;
		} else {
			out.kind = VMM_MEM_RESERVED;
			out.len = (i < r->nmaps ? r->maps[i].va : r->base + r->size) - a;
		}
		goto out;
	}
	for (struct sim *o = world.all; o; o = o->world_next) {
		size_t pos = reg_upper(o, a);

		if (pos && a - o->regs[pos - 1].base < o->regs[pos - 1].len) {
			out.kind = VMM_MEM_REGISTERED;
			out.len = o->regs[pos - 1].base + o->regs[pos - 1].len - a;
			goto out;
		}
		if (pos < o->nregs && o->regs[pos].base < next)
			next = o->regs[pos].base;
	}
	out.len = next - a;
out:
	pthread_mutex_unlock(&world.lock);
	*info = out;
	return 0;
}

static void sim_close(struct vmm *v)
{
	struct sim *s = to_sim(v);
	struct sim_handle *h, *next;
	size_t i;

	/*
	 * No other thread may use @v now (vmm.h), but other instances may scan
	 * the world's list: leave it first, under its lock.  Then no lock:
	 * tests leak on purpose: unmapping each reservation drops the mappings
	 * inside it, then every handle still held goes, released or not, and
	 * the records of leftover registrations and streams.  All of it is
	 * this process's own memory, so the same code serves vmm_abandon() in
	 * a forked child: it frees the child's copies and touches nothing of
	 * the parent's (memfd pages stay with the parent's descriptors).
	 */
	pthread_mutex_lock(&world.lock);
	if (s->world_prev)
		s->world_prev->world_next = s->world_next;
	else
		world.all = s->world_next;
	if (s->world_next)
		s->world_next->world_prev = s->world_prev;
	pthread_mutex_unlock(&world.lock);
	for (i = 0; i < s->nresv; i++) {
		munmap((void *)s->resv[i]->base, s->resv[i]->size);
		free(s->resv[i]->maps);
		free(s->resv[i]);
	}
	for (h = s->handles; h; h = next) {
		next = h->next;
		munmap(h->phys, h->size);
		close(h->fd);
		free(h);
	}
	free(s->resv);
	free(s->slots);
	/* registrations and streams hold nothing but their records */
	free(s->regs);
	free(s->streams);
	free(s->sstates);
	free(s->events);
	free(s);
}

static const struct vmm_ops sim_ops = {
	.name = "sim",
	.close = sim_close,
	.query = sim_query,
	.granularity = sim_granularity,
	.mem_info = sim_mem_info,
	.reserve = sim_reserve,
	.unreserve = sim_unreserve,
	.create = sim_create,
	.release = sim_release,
	.map = sim_map,
	.unmap = sim_unmap,
	.set_access = sim_set_access,
	.copy = sim_copy,
	.memset = sim_memset,
	.sync = sim_sync,
	.attr = sim_attr,
	.can_access_peer = sim_can_access_peer,
	.host_register = sim_host_register,
	.host_unregister = sim_host_unregister,
	.stream_create = sim_stream_create,
	.stream_destroy = sim_stream_destroy,
	.copy_async = sim_copy_async,
	.stream_sync = sim_stream_sync,
	.ptr_info = sim_ptr_info,
	.abandon = sim_close,
	.event_create = sim_event_create,
	.event_destroy = sim_event_destroy,
	.event_record = sim_event_record,
	.event_query = sim_event_query,
	.event_sync = sim_event_sync,
	.device_name = sim_device_name,
	.checksum = sim_checksum,
};

/*
 * Each handle holds a descriptor, and libvmmx may hold thousands of chunks:
 * lift the soft limit to the hard one.  This is process-wide and only ever
 * raises the limit; a failure is swallowed on purpose, since create() then
 * reports the EMFILE it leads to as -VMMX_ENOMEM.
 */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur == rl.rlim_max)
		return;
	rl.rlim_cur = rl.rlim_max;
	if (!setrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_max != RLIM_INFINITY)
		return;
	/* an unlimited hard limit is capped by fs.nr_open: ask for its default */
	if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= SIM_NOFILE_FALLBACK)
		return;
	rl.rlim_cur = SIM_NOFILE_FALLBACK;
	setrlimit(RLIMIT_NOFILE, &rl);
}

static int __attribute__((format(printf, 3, 4))) open_fail(const struct vmm_params *p, int err,
							    const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!p->report)
		return err;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	p->report(p->report_arg, VMMX_LOG_DEBUG, err, msg);
	return err;
}

int vmm_sim_open(const struct vmm_params *p, struct vmm **v_p)
{
	int ndev;
	struct sim *s;

	if (!p || !v_p)
		return -VMMX_EINVAL;
	ndev = p->sim_devices ? p->sim_devices : 1;
	if (ndev < 0 || ndev > SIM_MAX_DEVICES)
		return open_fail(p, -VMMX_EINVAL, "sim: open: %d devices (1 to %d)",
				 p->sim_devices, SIM_MAX_DEVICES);
	if (p->device < 0 || p->device >= ndev)
		return open_fail(p, -VMMX_ENODEV, "sim: open: no device %d (%d simulated)",
				 p->device, ndev);
#if !defined(HAVE_MEMFD_CREATE) && !defined(SYS_memfd_create)
	return open_fail(p, -VMMX_ENOTSUP, "sim: open: this system has no memfd_create");
#endif
	s = calloc(1, sizeof(*s));
	if (!s)
		return open_fail(p, -VMMX_ENOMEM, "sim: open: out of memory");
	s->head.ops = &sim_ops;
	s->head.report = p->report;
	s->head.report_arg = p->report_arg;
	s->device = p->device;
	s->ndev = ndev;
	s->dev_cap = p->sim_device_mem ? p->sim_device_mem : SIM_DEFAULT_DEVICE_MEM;
	s->host_cap = p->sim_host_mem ? p->sim_host_mem : SIM_DEFAULT_HOST_MEM;
	s->pageable = p->sim_pageable ? 1 : 0;
	s->free_slot = SLOT_NONE;
	s->next_stream = 1;
	s->next_event = 1;
	raise_nofile();
	pthread_mutex_lock(&world.lock);
	s->world_next = world.all;
	if (world.all)
		world.all->world_prev = s;
	world.all = s;
	pthread_mutex_unlock(&world.lock);
	*v_p = &s->head;
	return 0;
}

/*
 * fork(): the world's lock is the sim's one lock.  Taken before the fork so
 * that the child gets it free and every record consistent; the child's
 * handler runs in the thread that took it, so an unlock is valid there.
 */
void vmm_sim_atfork_prepare(void)
{
	pthread_mutex_lock(&world.lock);
}

void vmm_sim_atfork_parent(void)
{
	pthread_mutex_unlock(&world.lock);
}

void vmm_sim_atfork_child(void)
{
	pthread_mutex_unlock(&world.lock);
}

int vmm_sim_counts(struct vmm *v, struct vmm_sim_counts *c)
{
	struct sim *s = to_sim(v);
	struct vmm_sim_counts out = { 0 };

	if (!v || !c)
		return -VMMX_EINVAL;
	if (v->ops != &sim_ops)
		return -VMMX_ENOTSUP;
	pthread_mutex_lock(&world.lock);
	out.reservations = (int64_t)s->nresv;
	out.handles = s->nhandles;
	out.mappings = s->nmappings;
	out.registrations = (int64_t)s->nregs;
	out.streams = (int64_t)s->nstreams;
	for (int i = 0; i < s->ndev && i < (int)ARRAY_SIZE(out.device_used); i++)
		out.device_used[i] = s->dev_used[i];
	for (int i = 0; i < s->ndev && i < (int)ARRAY_SIZE(out.free_queries); i++)
		out.free_queries[i] = s->free_queries[i];
	out.host_used = s->host_used;
	pthread_mutex_unlock(&world.lock);
	*c = out;
	return 0;
}
