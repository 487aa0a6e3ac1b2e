// SPDX-License-Identifier: MIT
/*
 * state.c - what the interposer holds: the process-wide allocators it has
 * used (one per device, vmmx_alloc_global()), its counters, the
 * cudaMemGetInfo answer, refusals, and the --report summary at exit.
 *
 * No allocation logic lives here: an allocation is vmmx_alloc_malloc() on the
 * calling thread's device's process-wide allocator, a free is
 * vmmx_alloc_free() on the allocator whose context maps the address
 * (vmmx_lookup(), lock-free), and anything no allocator maps is not ours and
 * goes to the real driver.
 *
 * Nothing runs before the first hooked call: no constructor.  The first
 * allocation on a device makes its context (configuration from VMMX_*, which
 * vmmx-run sets; under --control the first of all also starts the control
 * socket's thread, control.c); if that fails, the reason is printed once
 * and every call from then on goes to the real runtime or driver, as if the
 * interposer were not there.
 *
 * Locking: allocs[] is written once per device (release) under make_lock and
 * read with acquire loads; counters are atomic; the table of the largest
 * spilled allocations (report only) is under top_lock.  A thread inside
 * libvmmx or the report marks itself (depth, thread-local), so that the
 * substitutions in resolve.c step aside for libvmmx's own driver lookups.
 *
 * fork(): a forked child keeps allocs[], the parent's allocators, on which
 * libvmmx fails every call at once (-VMMX_ENODRIVER: CUDA cannot be used
 * after fork); the hooks answer the driver's code for that, never a
 * parent's address, and the first such failure is printed once.  libvmmx's
 * own atfork handlers keep its locks from being inherited held; ours are
 * reset in the child (after_fork_child()) rather than taken before the
 * fork: make_lock is held across vmmx_alloc_global(), which waits for
 * libvmmx's lock, and pthread_atfork() runs prepare handlers in reverse
 * order of installation, which we do not control (libvmmx installs its
 * handlers when its first context is made), so taking make_lock in a
 * prepare handler could deadlock the fork.  The child has one thread; what
 * make_lock guards is consistent at every instant (allocs[] is published
 * with one atomic store; the rest are flags).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "preload/preload.h"

#define MAX_DEVICES VMMXP_MAX_DEVICES
/* Allocations smaller than a 2 MiB chunk are not looked at for the report's spill table. */
#define SPILL_MIN ((size_t)2 << 20)
#define TOP_SPILLED 8

static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vmmx_alloc *allocs[MAX_DEVICES]; /* acquire loads; set under make_lock */
/* 1 + the highest device of allocs[] set (acquire loads; set under make_lock, after it). */
static int devices_hi;
static int disabled;                           /* make_lock; atomic reads */
static int atexit_done;                        /* set under make_lock; atomic reads */
static pid_t owner_pid;                        /* make_lock: the process that set up */

static uint64_t n_passed[VMMXP_NCOUNTERS];
static uint64_t n_alloc[VMMXP_NKINDS], n_alloc_bytes, n_fail, n_free, n_free_async,
	n_foreign_free, n_ipc_refused;

struct spilled {
	size_t size, host;
	uintptr_t ptr;
	int device;
	enum vmmxp_kind kind;
};

static pthread_mutex_t top_lock = PTHREAD_MUTEX_INITIALIZER;
static struct spilled top[TOP_SPILLED];        /* top_lock; descending host bytes */
static uint64_t peak_device[MAX_DEVICES], peak_host[MAX_DEVICES]; /* top_lock */

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int fork_said;                          /* atomic: the forked child's failure printed */

static int report_on = -1;                     /* -1 unread; 0/1 after the first read */
static int cache_first_on = -1;                /* VMMX_RUN_CACHE_FIRST, as report_on */
static int cache_first_done;                   /* atomic: refusals stopped (refuse_first()) */
static VMMXP_TLS size_t refused_size;           /* the request refused on this thread; 0: none */
static uint64_t n_refused, n_again_device, n_again_spilled, n_not_again;
static int meminfo_total = -1;                 /* VMMX_RUN_MEMINFO=device+host */

static void enter(void)
{
	vmmxp_depth(1);
}

static void leave(void)
{
	vmmxp_depth(-1);
}

static void count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static int env_flag(int *cache, const char *name, const char *yes)
{
	int v = __atomic_load_n(cache, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *s = getenv(name);

		v = s && *s && (yes ? !strcmp(s, yes) : strcmp(s, "0") != 0);
		__atomic_store_n(cache, v, __ATOMIC_RELAXED);
	}
	return v;
}

static void report(void);
static void atfork_init(void);

/* make_lock held: the report at exit, armed once, in this process. */
static void arm_report(void)
{
	if (atexit_done)
		return;
	__atomic_store_n(&atexit_done, 1, __ATOMIC_RELAXED);
	owner_pid = getpid();
	if (env_flag(&report_on, "VMMX_RUN_REPORT", NULL))
		atexit(report);
}

/* A program that only passes through (its own VMM, its own pools) gets its report too. */
void vmmxp_count(enum vmmxp_counter c, uint64_t n)
{
	count(&n_passed[c], n);
	if (!__atomic_load_n(&atexit_done, __ATOMIC_RELAXED)) {
		pthread_once(&atfork_once, atfork_init);
		pthread_mutex_lock(&make_lock);
		arm_report();
		pthread_mutex_unlock(&make_lock);
	}
}

/* The child's copies of our locks may be held by threads that did not survive the fork. */
static void after_fork_child(void)
{
	pthread_mutex_init(&make_lock, NULL);
	pthread_mutex_init(&top_lock, NULL);
	vmmxp_control_after_fork();
	/* Allocations and frees take the placement's lock (vmmxp_place_hold()). */
	vmmxp_place_after_fork();
}

static void atfork_init(void)
{
	/* Without the handler a fork during a first allocation could hang the child. */
	if (pthread_atfork(NULL, NULL, after_fork_child))
		fprintf(stderr, "vmmx-run: pthread_atfork failed; a program that forks while "
				"it allocates may hang in the child\n");
}

/* The allocator of @device, made on first use; NULL: pass through (disabled or failed). */
static struct vmmx_alloc *alloc_of(int device)
{
	struct vmmx_alloc *a;
	int err;

	if (device < 0 || device >= MAX_DEVICES)
		return NULL;
	a = __atomic_load_n(&allocs[device], __ATOMIC_ACQUIRE);
	if (a || __atomic_load_n(&disabled, __ATOMIC_RELAXED))
		return a;
	pthread_once(&atfork_once, atfork_init); /* before make_lock is first taken */
	pthread_mutex_lock(&make_lock);
	if (!disabled && !allocs[device]) {
		enter();
		err = vmmx_alloc_global(device, &a);
		leave();
		if (err) {
			/* Once: a driver or configuration that fails now fails every time. */
			fprintf(stderr,
				"vmmx-run: libvmmx cannot serve device %d: %s (%s); allocations "
				"go to the CUDA driver unchanged\n",
				device, vmmx_strerror(err), vmmx_last_error());
			disabled = 1;
		} else {
			__atomic_store_n(&allocs[device], a, __ATOMIC_RELEASE);
			if (device >= devices_hi)
				__atomic_store_n(&devices_hi, device + 1, __ATOMIC_RELEASE);
			vmmxp_control_start();
		}
		arm_report();
	}
	a = allocs[device];
	pthread_mutex_unlock(&make_lock);
	return a;
}

/* The allocator whose context maps @ptr, or NULL. */
static struct vmmx_alloc *owner_of(const void *ptr, struct vmmx_chunk_info *ci)
{
	int hi = __atomic_load_n(&devices_hi, __ATOMIC_ACQUIRE);

	for (int d = 0; d < hi; d++) {
		struct vmmx_alloc *a = __atomic_load_n(&allocs[d], __ATOMIC_ACQUIRE);

		if (a && !vmmx_lookup(vmmx_alloc_ctx(a), ptr, ci))
			return a;
	}
	return NULL;
}

int vmmxp_ctxs(struct vmmx_ctx **ctx, int max)
{
	int n = 0, hi = __atomic_load_n(&devices_hi, __ATOMIC_ACQUIRE);

	/* Each launch asks (vmmxp_named_start()): the devices up to the highest used. */
	for (int d = 0; d < hi && n < max; d++) {
		struct vmmx_alloc *a = __atomic_load_n(&allocs[d], __ATOMIC_ACQUIRE);

		if (a)
			ctx[n++] = vmmx_alloc_ctx(a);
	}
	return n;
}

int vmmxp_allocs(struct vmmx_alloc **a, int *dev, int max)
{
	int n = 0;

	for (int d = 0; d < MAX_DEVICES && n < max; d++) {
		struct vmmx_alloc *x = __atomic_load_n(&allocs[d], __ATOMIC_ACQUIRE);

		if (x) {
			a[n] = x;
			dev[n++] = d;
		}
	}
	return n;
}

int vmmxp_owned(const void *ptr)
{
	struct vmmx_chunk_info ci;
	int r;

	if (!ptr)
		return 0;
	enter();
	r = owner_of(ptr, &ci) != NULL;
	leave();
	return r;
}

/*
 * The end of the stretch that starts at @p, in chunk @ci (of allocator @a's
 * context), which one driver memset takes: a host chunk alone (a memset
 * must not leave one host allocation), or chunks of one GPU up to @end.
 */
static uintptr_t stretch_end(struct vmmx_alloc *a, const struct vmmx_chunk_info *ci, uintptr_t end)
{
	uintptr_t hi = (uintptr_t)ci->base + ci->size;
	struct vmmx_chunk_info next;

	if (ci->loc.kind != VMMX_LOC_DEVICE)
		return hi;
	while (hi < end && !vmmx_lookup(vmmx_alloc_ctx(a), (const void *)hi, &next) &&
	       next.loc.kind == VMMX_LOC_DEVICE && next.loc.id == ci->loc.id)
		hi = (uintptr_t)next.base + next.size;
	return hi;
}

int vmmxp_split(const void *ptr, size_t len, size_t align, vmmxp_piece_fn *fn, void *arg)
{
	uintptr_t p = (uintptr_t)ptr, end = p + len, hi;
	struct vmmx_chunk_info ci;
	struct vmmx_alloc *a;
	int err;

	if (!ptr || !len || vmmxp_busy() || p % align || end < p)
		return fn(arg, p, len);
	/*
	 * Lookups only while marked as inside libvmmx: the pieces run the real
	 * runtime, which may initialise and look the driver up, and those
	 * lookups must still be answered with the hooks.
	 */
	while (p < end) {
		enter();
		a = owner_of((const void *)p, &ci);
		hi = a ? stretch_end(a, &ci, end) : end;
		leave();
		if (hi > end)
			hi = end;
		err = fn(arg, p, (size_t)(hi - p));
		if (err)
			return err;
		p = hi;
	}
	return 0;
}

/* Where [p, p + size), an allocation of @a, lies, in @r; nonzero when that cannot be read. */
static int residency_of(struct vmmx_alloc *a, void *p, size_t size, struct vmmx_residency *r)
{
	struct vmmx_chunk_info ci;

	return vmmx_lookup(vmmx_alloc_ctx(a), p, &ci) ||
	       vmmx_buf_residency(ci.buf, (size_t)((char *)p - (char *)vmmx_buf_ptr(ci.buf)), size, r);
}

/* Report only: peaks per location, and the allocation if it spilled. */
static void note_placement(struct vmmx_alloc *a, int device, void *p, size_t size,
			   enum vmmxp_kind kind)
{
	struct vmmx_stats st = { .size = sizeof(st) };
	struct vmmx_residency r = { 0, 0 };
	struct vmmx_ctx *ctx = vmmx_alloc_ctx(a);

	if (size >= SPILL_MIN)
		(void)residency_of(a, p, size, &r);
	if (vmmx_stats_get(ctx, &st))
		st.device_bytes = st.host_bytes = 0;
	pthread_mutex_lock(&top_lock);
	if (st.device_bytes > peak_device[device])
		peak_device[device] = st.device_bytes;
	if (st.host_bytes > peak_host[device])
		peak_host[device] = st.host_bytes;
	if (r.host && r.host > top[TOP_SPILLED - 1].host) {
		int i = TOP_SPILLED - 1;

		for (; i > 0 && top[i - 1].host < r.host; i--)
			top[i] = top[i - 1];
		top[i] = (struct spilled){ size, r.host, (uintptr_t)p, device, kind };
	}
	pthread_mutex_unlock(&top_lock);
}

/*
 * The allocator that answers a hooked call on @device, with the thread marked
 * as inside libvmmx (the caller calls leave()); NULL: the call passes through
 * (the thread is inside libvmmx already, or the interposer is disabled).
 */
static struct vmmx_alloc *serve(int device)
{
	struct vmmx_alloc *a;

	if (vmmxp_busy())
		return NULL;
	a = alloc_of(device);
	if (a)
		enter();
	return a;
}

/*
 * --control: count allocation @p of @a in its segment, the memory a sleep
 * puts to sleep; one that cannot be counted is undone (out of memory), so
 * that no allocation of the program stays awake through a sleep.
 */
static int track(struct vmmx_alloc *a, void *p, void *stream)
{
	struct vmmx_chunk_info ci;
	int err;

	err = vmmx_lookup(vmmx_alloc_ctx(a), p, &ci);
	if (!err)
		err = vmmxp_control_track(ci.buf, 1);
	if (err) {
		/* Swallowed: the block was never handed out; a failed free keeps it cached. */
		(void)vmmx_alloc_free(a, p, stream);
		return -VMMX_ENOMEM;
	}
	return 0;
}

/* Whether bytes of [p, p + size), an allocation of @a, lie in host memory. */
static int spilled(struct vmmx_alloc *a, void *p, size_t size)
{
	struct vmmx_residency r = { 0, 0 };

	return !residency_of(a, p, size, &r) && r.host != 0;
}

/*
 * Whether the thread's stream capture mode is other than global: PyTorch
 * relaxes it around the cudaMalloc of a capture.  Read by exchanging it
 * and back.  A driver without the call counts as capturing.
 */
static int capture_mode_changed(void)
{
	__typeof__(&cuThreadExchangeStreamCaptureMode) xchg =
		VMMXP_REAL(cuThreadExchangeStreamCaptureMode);
	int mode = 0, was; /* CU_STREAM_CAPTURE_MODE_GLOBAL */

	if (!xchg || xchg(&mode) != CUDA_OK)
		return 1;
	was = mode;
	(void)xchg(&mode);
	return was != 0;
}

/*
 * Whether @size bytes from @a would spill now: the device's room and the
 * allocator's cached free bytes there fall short together.  The cached
 * bytes count whole, fragments too: short of a refusal, never of a spill.
 */
static int would_spill(struct vmmx_alloc *a, size_t size)
{
	struct vmmx_alloc_stats as = { .size = sizeof(as) };
	size_t room = 0;

	if (vmmx_alloc_stats(a, &as) ||
	    vmmx_ctx_room(vmmx_alloc_ctx(a), (struct vmmx_loc){ VMMX_LOC_DEVICE, as.device }, size,
			  &room))
		return 0;
	if (as.device_reserved > as.device_allocated)
		room += (size_t)(as.device_reserved - as.device_allocated);
	return room < size;
}

/*
 * Whether the program has used CUDA graphs: a launch seen captured, a graph
 * instantiated or launched.  PyTorch frees no cache while a capture of its
 * own is under way on any thread; a refusal then is its out of memory.
 */
static int graphs_seen(void)
{
	struct vmmxp_launch_stats ls = vmmxp_launch_stats();

	return ls.captured || ls.graphs || ls.graphs_read || ls.graphs_failed;
}

/*
 * VMMX_RUN_CACHE_FIRST: whether to refuse, before it is served, a request
 * for @size bytes the program's allocator asks again (a call of
 * VMMXP_ASKS_AGAIN, a plain cudaMalloc or cuMemAlloc).  A caching
 * allocator that holds free blocks on the device (PyTorch's:
 * release_cached_blocks(); CuPy's pool: free_all_blocks()) gives them back
 * when the driver is out of memory, and asks again with the same size on
 * the same thread; only then.  Spilled at once, the program's cached blocks
 * would keep the device while its new memory lies in host memory (the
 * warm-up block transformers leaves in PyTorch's cache, unsplit under
 * --torch-alloc split).  So a request is refused once when it would spill
 * and a segment the program took and no launch, copy or memset named since
 * holds as much on the device (vmmxp_place_idle_held()).  The next request
 * on the thread, when of the same size, is the one asked again (*@again_p
 * set) and is served as any.  Refusals stop for good at the first request
 * asked again that spills all the same (the program freed too little) and
 * at the first request after a refusal of another size (the program does
 * not ask again).  Never while the thread's capture mode is not global:
 * PyTorch raises out of memory in a capture rather than free its cache;
 * and no more once the program has used graphs (graphs_seen()), as its
 * captures on other threads leave this one's mode alone.  Called with the
 * placement held, for a request cache_first_asks() let through (not of 0
 * bytes), the thread's capture mode read before the lock (@capturing).
 */
static int refuse_first(struct vmmx_alloc *a, size_t size, int capturing, int *again_p)
{
	size_t asked = refused_size;

	refused_size = 0;
	if (asked == size) {
		*again_p = 1;
		return 0;
	}
	if (asked) {
		count(&n_not_again, 1);
		__atomic_store_n(&cache_first_done, 1, __ATOMIC_RELAXED);
		return 0;
	}
	/* The cheap questions first: the placement lock is held. */
	if (capturing || !vmmxp_place_idle_held(vmmx_alloc_ctx(a), size) || !would_spill(a, size))
		return 0;
	if (graphs_seen()) {
		__atomic_store_n(&cache_first_done, 1, __ATOMIC_RELAXED);
		return 0;
	}
	refused_size = size;
	count(&n_refused, 1);
	return 1;
}

/* Whether VMMX_RUN_CACHE_FIRST may refuse a request of @size with @flags (refuse_first()). */
static int cache_first_asks(unsigned int flags, size_t size)
{
	return (flags & VMMXP_ASKS_AGAIN) && size &&
	       env_flag(&cache_first_on, "VMMX_RUN_CACHE_FIRST", NULL) &&
	       !__atomic_load_n(&cache_first_done, __ATOMIC_RELAXED);
}

/* VMMX_RUN_CACHE_FIRST: the request asked again served (@p) or not; a spill stops refusals. */
static void asked_again(struct vmmx_alloc *a, size_t size, void *p)
{
	if (p && !spilled(a, p, size)) {
		count(&n_again_device, 1);
		return;
	}
	count(&n_again_spilled, 1);
	__atomic_store_n(&cache_first_done, 1, __ATOMIC_RELAXED);
}

int vmmxp_malloc(int device, size_t size, void *stream, enum vmmxp_kind kind, unsigned int flags,
		 void **ptr_p)
{
	struct vmmx_alloc *a;
	void *p = NULL;
	int err, asks, capturing, refused, again = 0;

	a = serve(device);
	if (!a)
		return VMMXP_PASS;
	vmmxp_gate_enter();
	asks = cache_first_asks(flags, size);
	/* Before the lock: the first call looks the driver's function up. */
	capturing = asks && capture_mode_changed();
	/* The allocator may let a segment go: the placement looks none up meanwhile. */
	vmmxp_place_hold();
	refused = asks && refuse_first(a, size, capturing, &again);
	err = refused ? -VMMX_ENOMEM : vmmx_alloc_malloc(a, size, stream, &p);
	if (again)
		asked_again(a, size, err ? NULL : p);
	if (!err && p && vmmxp_control_on())
		err = track(a, p, stream);
	if (!err && p)
		vmmxp_place_allocated(vmmx_alloc_ctx(a), p);
	vmmxp_place_hold_done();
	if (err == -VMMX_ENODRIVER && !__atomic_exchange_n(&fork_said, 1, __ATOMIC_RELAXED))
		fprintf(stderr,
			"vmmx-run: process %d: allocations fail here with CUDA's initialization "
			"error: %s\n",
			(int)getpid(), vmmx_last_error());
	if (refused) {
		if (getenv("VMMX_LOG"))
			fprintf(stderr, "vmmx-run: allocation of %zu bytes on device %d refused "
					"once, so the program may free its cache (VMMX_RUN_CACHE_FIRST)\n",
				size, device);
	} else if (err) {
		count(&n_fail, 1);
		if (getenv("VMMX_LOG"))
			fprintf(stderr, "vmmx-run: allocation of %zu bytes on device %d failed: %s\n",
				size, device, vmmx_last_error());
	} else {
		count(&n_alloc[kind], 1);
		count(&n_alloc_bytes, size);
		if (env_flag(&report_on, "VMMX_RUN_REPORT", NULL) && p)
			note_placement(a, device, p, size, kind);
		*ptr_p = p;
	}
	vmmxp_gate_leave();
	leave();
	return err;
}

int vmmxp_free(const void *ptr, void *stream, int sync)
{
	struct vmmx_chunk_info ci;
	struct vmmx_alloc *a;
	int err;

	if (!ptr || vmmxp_busy())
		return VMMXP_PASS;
	enter();
	/* Before the lookup: a discarded segment maps nothing until the wake. */
	vmmxp_gate_enter();
	a = owner_of(ptr, &ci);
	if (!a) {
		vmmxp_gate_leave();
		leave();
		count(&n_foreign_free, 1);
		return VMMXP_PASS;
	}
	/*
	 * cudaFree and cuMemFree wait for the device: a program may free memory
	 * that work queued on any stream still uses.  The stream-ordered frees
	 * do not; the allocator keeps the block from other streams until that
	 * stream's event completes.
	 */
	err = sync ? vmmx_sync(vmmx_alloc_ctx(a)) : 0;
	if (!err) {
		vmmxp_place_hold();
		err = vmmx_alloc_free(a, (void *)ptr, stream);
		vmmxp_place_hold_done();
	}
	if (err)
		fprintf(stderr, "vmmx-run: free of %p: %s\n", ptr, vmmx_last_error());
	else
		count(sync ? &n_free : &n_free_async, 1);
	if (!err)
		(void)vmmxp_control_track(ci.buf, -1); /* a decrement takes no memory */
	vmmxp_gate_leave();
	leave();
	return err;
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/*
 * VMMX_RUN_MEMINFO_HOST (vmmx-run --meminfo device+host:SIZE): the most host
 * memory the device+host figures count, of @host_total; no cap when unset.
 * vmmx-run checked the value; one it did not (set by hand) and cannot be
 * read counts as no cap.
 */
static uint64_t host_cap(uint64_t host_total)
{
	const char *s = getenv("VMMX_RUN_MEMINFO_HOST");
	uint64_t v;

	if (!s || !*s || vmmx_parse_size(s, host_total, &v))
		return UINT64_MAX;
	return v;
}

int vmmxp_meminfo(int device, size_t *free_p, size_t *total_p)
{
	struct vmmx_ctx_info ci = { .size = sizeof(ci) };
	struct vmmx_stats st = { .size = sizeof(st) };
	struct vmmx_alloc_stats as = { .size = sizeof(as) };
	uint64_t total, room, held, idle, f;
	struct vmmx_alloc *a;
	struct vmmx_ctx *ctx;
	int err;

	a = serve(device);
	if (!a)
		return VMMXP_PASS;
	ctx = vmmx_alloc_ctx(a);
	err = vmmx_ctx_query(ctx, &ci);
	if (!err)
		err = vmmx_stats_get(ctx, &st);
	if (!err)
		err = vmmx_alloc_stats(a, &as);
	leave();
	if (err)
		return err;
	/*
	 * Device: the room under the limit and outside the headroom, plus what
	 * the allocator holds mapped but the program does not use (it is handed
	 * out again before anything new is made).
	 */
	total = min64(ci.device_total, ci.device_limit);
	held = st.device_bytes;
	idle = held > as.device_allocated ? held - as.device_allocated : 0;
	f = ci.device_free > ci.device_headroom ? ci.device_free - ci.device_headroom : 0;
	room = min64(f, total > held ? total - held : 0);
	f = min64(room + idle, total);
	if (env_flag(&meminfo_total, "VMMX_RUN_MEMINFO", "device+host")) {
		uint64_t htotal = min64(min64(ci.host_total, ci.host_limit), host_cap(ci.host_total));
		uint64_t hheld = st.host_bytes;
		uint64_t hidle = hheld > as.host_allocated ? hheld - as.host_allocated : 0;

		f += min64((htotal > hheld ? htotal - hheld : 0) + hidle, htotal);
		total += htotal;
	}
	*free_p = (size_t)f;
	*total_p = (size_t)total;
	return 0;
}

int vmmxp_pool_usage(int device, int attr, uint64_t *value)
{
	struct vmmx_alloc_stats as = { .size = sizeof(as) };
	struct vmmx_alloc *a;
	int err;

	if (device < 0 || device >= MAX_DEVICES)
		return VMMXP_PASS;
	a = __atomic_load_n(&allocs[device], __ATOMIC_ACQUIRE);
	if (!a)
		return VMMXP_PASS;
	enter();
	err = vmmx_alloc_stats(a, &as);
	leave();
	if (err)
		return err;
	switch (attr) {
	case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
		*value = as.reserved_bytes;
		break;
	case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
		*value = as.reserved_peak;
		break;
	case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
		*value = as.allocated_bytes;
		break;
	default:
		*value = as.allocated_peak;
		break;
	}
	return 0;
}

void vmmxp_trim(int device)
{
	struct vmmx_alloc *a;

	if (device < 0 || device >= MAX_DEVICES)
		return;
	a = __atomic_load_n(&allocs[device], __ATOMIC_ACQUIRE);
	if (!a)
		return;
	enter();
	vmmxp_place_hold();
	vmmx_alloc_empty_cache(a);
	vmmxp_place_hold_done();
	leave();
}

void vmmxp_refuse(const char *call, const void *ptr, const char *why)
{
	count(&n_ipc_refused, 1);
	fprintf(stderr,
		"vmmx-run: %s(%p) refused: %s. Way out: run this program without vmmx-run, or "
		"keep memory to be shared out of libvmmx (allocate it before the program's "
		"first allocation, or share by copying).\n",
		call, ptr, why);
}

/* ---- the report ---- */

static void human(char *buf, size_t len, uint64_t b)
{
	static const char *const unit[] = { "B", "KiB", "MiB", "GiB", "TiB" };
	double v = (double)b;
	int u = 0;

	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, len, u ? "%.1f %s" : "%.0f %s", v, unit[u]);
}

static const char *kind_name(enum vmmxp_kind k)
{
	static const char *const names[] = { "cudaMalloc", "cudaMallocAsync", "cuMemAlloc",
					     "cuMemAllocAsync", "cuMemAllocFromPoolAsync" };
	return names[k];
}

/* The launches line: watched launches per entry point, what they named. */
static void report_launches(FILE *out)
{
	struct vmmxp_launch_stats ls = vmmxp_launch_stats();
	struct vmmxp_cycle_stats cs = vmmxp_cycle_stats();
	uint64_t total = 0;

	if (!vmmxp_launch_on()) {
		fprintf(out, "  launches         not watched (vmmx-run --launches or --trace watches them)\n");
		return;
	}
	for (int a = 0; a < VMMXP_NLAUNCH_APIS; a++)
		total += ls.launches[a];
	fprintf(out, "  launches         %llu watched:", (unsigned long long)total);
	for (int a = 0; a < VMMXP_NLAUNCH_APIS; a++)
		fprintf(out, "%s %s %llu", a ? "," : "", vmmxp_launch_api_name(a),
			(unsigned long long)ls.launches[a]);
	fprintf(out, "; without a parameter layout %llu; passed unread before memory was seen spilled %llu\n",
		(unsigned long long)(ls.unread + ls.uncached),
		(unsigned long long)vmmxp_place_quiet_count());
	fprintf(out, "    graphs         %llu launches watched, %llu not read; %llu graphs read at "
		     "instantiation (%llu kernel nodes, %llu without a parameter layout; %llu "
		     "memcpy/memset nodes not read; %llu segments past the %d kept), %llu not read, "
		     "%llu forgotten when changed in place; %llu launches captured, not placed\n",
		(unsigned long long)ls.graphs, (unsigned long long)ls.graphs_unread,
		(unsigned long long)ls.graphs_read, (unsigned long long)ls.kernel_nodes,
		(unsigned long long)ls.kernel_nodes_unread, (unsigned long long)ls.copy_nodes,
		(unsigned long long)ls.segs_dropped, VMMXP_PLACE_MAX,
		(unsigned long long)ls.graphs_failed, (unsigned long long)ls.graphs_forgotten,
		(unsigned long long)ls.captured);
	fprintf(out, "    chunks named   %llu, %llu of them in host memory; %llu launches read spilled "
		     "memory\n",
		(unsigned long long)ls.named, (unsigned long long)ls.named_host,
		(unsigned long long)ls.spilled_launches);
	fprintf(out, "    int pairs      %llu of the chunks named only by words that read as two "
		     "32-bit integers: held, not placed\n",
		(unsigned long long)ls.named_pairs);
	fprintf(out, "    cycle          learned %llu times (the last %llu launches long), dropped %llu "
		     "times when the order changed; %llu launches where a known cycle expected them; "
		     "%llu proposed, %llu of them rejected unconfirmed; %llu refused by verification\n",
		(unsigned long long)cs.learned, (unsigned long long)cs.last_len,
		(unsigned long long)cs.dropped, (unsigned long long)cs.in_cycle,
		(unsigned long long)cs.proposed, (unsigned long long)cs.rejected,
		(unsigned long long)cs.refused);
	if (vmmxp_place_on()) {
		struct vmmxp_place_stats ps = vmmxp_place_stats();
		char b1[32], b2[32];

		human(b1, sizeof(b1), ps.promoted_bytes);
		human(b2, sizeof(b2), ps.evicted_bytes);
		fprintf(out, "  placement        launch: %llu segments brought to the device (%s: ahead %llu, "
			     "on demand %llu), %llu sent back (%s: by next use %llu, least recently "
			     "named %llu); left in host memory: no room %llu, read in place %llu, too "
			     "large %llu, failed moves %llu; waits for last uses %llu, device syncs %llu; time moving in "
			     "%.1f ms (%llu swaps: a send back with the bring-in it made room for, one call timed here), sending back %.1f ms, waiting %.1f ms; mover: %llu queued, %llu "
			     "of them cancelled, %llu threads, at most %llu moves under way at once, "
			     "launches waited for it %llu times, %.1f ms; copies "
			     "and memsets held %llu; streams joined %llu; too large to move, tracked from "
			     "their allocation %llu, named since %llu, unnamed two whole cycles since %llu, "
			     "sent back unnamed %llu, named by unsure words only %llu times\n",
			(unsigned long long)ps.promoted, b1, (unsigned long long)ps.ahead,
			(unsigned long long)ps.on_demand, (unsigned long long)ps.evicted, b2,
			(unsigned long long)ps.evicted_next_use, (unsigned long long)ps.evicted_lru,
			(unsigned long long)ps.no_room, (unsigned long long)ps.in_place,
			(unsigned long long)ps.too_large, (unsigned long long)ps.failed, (unsigned long long)ps.waits,
			(unsigned long long)ps.device_syncs, (double)ps.in_ns / 1e6,
			(unsigned long long)ps.swaps,
			(double)ps.out_ns / 1e6, (double)ps.wait_ns / 1e6,
			(unsigned long long)ps.queued, (unsigned long long)ps.cancelled,
			(unsigned long long)ps.movers, (unsigned long long)ps.busy_most,
			(unsigned long long)ps.mover_waits,
			(double)ps.mover_wait_ns / 1e6, (unsigned long long)ps.copies,
			(unsigned long long)ps.joins, (unsigned long long)ps.idle_tracked,
			(unsigned long long)ps.idle_named, (unsigned long long)ps.idle_again,
			(unsigned long long)ps.idle_sent, (unsigned long long)ps.idle_unsure);
		if (ps.spread_chosen) {
			char b3[32], b4[32];

			human(b3, sizeof(b3), ps.spread_kept_bytes);
			human(b4, sizeof(b4), ps.spread_bytes);
			fprintf(out, "  spread           %llu segments kept (%s) of the cycle's %llu (%s), "
				     "chosen %llu times",
				(unsigned long long)ps.spread_kept, b3,
				(unsigned long long)ps.spread_segments, b4,
				(unsigned long long)ps.spread_chosen);
			if (ps.spread_gaps)
				fprintf(out, "; %llu of its places passed over",
					(unsigned long long)ps.spread_gaps);
			fputc('\n', out);
		} else if (ps.spread_refused) {
			fprintf(out, "  spread           not chosen, %llu passes; the last: %s\n",
				(unsigned long long)ps.spread_refused, ps.spread_why);
		}
		fprintf(out, "  trial            %llu decided (reading in place chosen %llu), %llu cut short "
			     "by a cycle change, %llu not timed; now %s",
			(unsigned long long)ps.trials, (unsigned long long)ps.trial_in_place,
			(unsigned long long)ps.trial_cut, (unsigned long long)ps.trial_unmeasured,
			ps.trial_in_place_now ? "reading in place" : "moving");
		if (ps.trial_settled)
			fprintf(out, "; %llu passes more: host memory was made",
				(unsigned long long)ps.trial_settled);
		if (ps.trials)
			fprintf(out, "; the last decided: a cycle of %llu launches, %.1f ms moving, "
				     "%.1f ms reading in place",
				(unsigned long long)ps.trial_len, (double)ps.trial_moving_ns / 1e6,
				(double)ps.trial_in_place_ns / 1e6);
		fprintf(out, "; launches taken for tiled %llu\n", (unsigned long long)ps.tiled);
		fprintf(out, "  settled          %llu launches passed on as before a spill: a whole pass "
			     "of their cycle moved nothing\n", (unsigned long long)ps.settled);
		fprintf(out, "  parking          %llu sends back parked, %llu parked segments mapped in "
			     "place (%.1f ms)",
			(unsigned long long)ps.parked, (unsigned long long)ps.unparked,
			(double)ps.unpark_ns / 1e6);
		if (ps.pointed)
			fprintf(out, "; %llu never moved (data copied to the device points into "
				     "them)", (unsigned long long)ps.pointed);
		fprintf(out, "%s%s\n",
			ps.park_stopped == 1 ? "; stopped: a launch the watch could not read whole" : "",
			ps.frozen ? "; every move stopped: data copied to the device points into a "
				    "segment moved in pieces or past those tracked" : "");
		fprintf(out, "  copies           %llu with host memory at both ends, the CPU granted "
			     "both first\n", (unsigned long long)vmmxp_copy_both_host());
	}
}

/*
 * The driver time line: each op's calls and the time spent in them, summed
 * over the program's threads and the movers (a call that waits, for the
 * GPU or for the lock the driver holds across mapping calls, counts it).
 */
static void report_driver_time(FILE *out, const struct vmmx_stats *st)
{
	const char *sep = "";

	fprintf(out, "    driver time    ");
	for (int i = 0; i < VMMX_OP_COUNT; i++) {
		if (!st->driver_calls[i])
			continue;
		fprintf(out, "%s%s %.1f ms (%llu)", sep, vmmx_op_name((enum vmmx_op)i),
			(double)st->driver_ns[i] / 1e6, (unsigned long long)st->driver_calls[i]);
		sep = ", ";
	}
	fprintf(out, "%schecksums %.1f ms (%llu), events %.1f ms (%llu)\n", sep,
		(double)st->checksum_ns / 1e6, (unsigned long long)st->checksum_calls,
		(double)st->event_ns / 1e6, (unsigned long long)st->event_calls);
}

static void report(void)
{
	FILE *out = stderr;
	const char *path = getenv("VMMX_RUN_REPORT");
	char b1[32], b2[32], b3[32];
	uint64_t total = 0;
	int any = 0;

	if (getpid() != owner_pid)
		return;         /* a forked child's exit: the parent reports */
	enter();
	if (path && strcmp(path, "1") && strcmp(path, "stderr")) {
		out = fopen(path, "a");
		if (!out) {
			/* vmmx-run checked it could write there; say so rather than move quietly. */
			fprintf(stderr, "vmmx-run: cannot append the report to %s: %s; it goes to "
					"standard error instead\n", path, strerror(errno));
			out = stderr;
		}
	}
	for (int k = 0; k < VMMXP_NKINDS; k++)
		total += __atomic_load_n(&n_alloc[k], __ATOMIC_RELAXED);
	fprintf(out, "vmmx-run report (pid %d)\n", (int)getpid());
	human(b1, sizeof(b1), n_alloc_bytes);
	fprintf(out, "  allocations      %llu (%s asked for): cudaMalloc %llu, cudaMallocAsync %llu, "
		     "cuMemAlloc %llu, cuMemAllocAsync %llu, cuMemAllocFromPoolAsync %llu; "
		     "failed %llu\n",
		(unsigned long long)total, b1, (unsigned long long)n_alloc[0],
		(unsigned long long)n_alloc[1], (unsigned long long)n_alloc[2],
		(unsigned long long)n_alloc[3], (unsigned long long)n_alloc[4],
		(unsigned long long)n_fail);
	fprintf(out, "  frees            %llu, stream-ordered %llu; foreign frees passed to the driver %llu\n",
		(unsigned long long)n_free, (unsigned long long)n_free_async,
		(unsigned long long)n_foreign_free);
	fprintf(out, "  lookups          answered with the interposer's: dlsym %llu, dlvsym %llu, "
		     "cuGetProcAddress %llu\n",
		(unsigned long long)vmmxp_lookups(VMMXP_PATH_DLSYM),
		(unsigned long long)vmmxp_lookups(VMMXP_PATH_DLVSYM),
		(unsigned long long)vmmxp_lookups(VMMXP_PATH_PROC));
	human(b1, sizeof(b1), n_passed[VMMXP_N_VMM_CREATE_BYTES]);
	human(b2, sizeof(b2), n_passed[VMMXP_N_VMM_MAP_BYTES]);
	fprintf(out, "  passed through   the program's own VMM: cuMemCreate %llu (%s), cuMemMap %llu "
		     "(%s), cuMemRelease %llu\n",
		(unsigned long long)n_passed[VMMXP_N_VMM_CREATE], b1,
		(unsigned long long)n_passed[VMMXP_N_VMM_MAP], b2,
		(unsigned long long)n_passed[VMMXP_N_VMM_RELEASE]);
	human(b1, sizeof(b1), n_passed[VMMXP_N_POOL_ALLOC_BYTES]);
	fprintf(out, "                   its own pools: cuMemPoolCreate %llu, cuMemAllocFromPoolAsync "
		     "%llu (%s)\n",
		(unsigned long long)n_passed[VMMXP_N_POOL_CREATE],
		(unsigned long long)n_passed[VMMXP_N_POOL_ALLOC], b1);
	if (n_ipc_refused)
		fprintf(out, "  IPC refused      %llu\n", (unsigned long long)n_ipc_refused);
	if (env_flag(&cache_first_on, "VMMX_RUN_CACHE_FIRST", NULL))
		fprintf(out, "  cache first      %llu requests refused once; asked again, %llu landed "
			     "on the device, %llu spilled; %llu followed by another request "
			     "(refusals %s)\n",
			(unsigned long long)n_refused, (unsigned long long)n_again_device,
			(unsigned long long)n_again_spilled, (unsigned long long)n_not_again,
			__atomic_load_n(&cache_first_done, __ATOMIC_RELAXED) ? "stopped there" : "go on");
	report_launches(out);
	for (int d = 0; d < MAX_DEVICES; d++) {
		struct vmmx_alloc *a = __atomic_load_n(&allocs[d], __ATOMIC_ACQUIRE);
		struct vmmx_ctx_info ci = { .size = sizeof(ci) };
		struct vmmx_stats st = { .size = sizeof(st) };
		struct vmmx_alloc_stats as = { .size = sizeof(as) };

		if (!a || vmmx_ctx_query(vmmx_alloc_ctx(a), &ci) ||
		    vmmx_stats_get(vmmx_alloc_ctx(a), &st) || vmmx_alloc_stats(a, &as))
			continue;
		any = 1;
		fprintf(out, "  device %d         %s, policy %s\n", d, ci.backend, ci.policy);
		human(b1, sizeof(b1), peak_device[d]);
		human(b2, sizeof(b2), peak_host[d]);
		human(b3, sizeof(b3), as.allocated_peak);
		fprintf(out, "    peak           device %s, host %s (mapped); live allocations %s\n",
			b1, b2, b3);
		fprintf(out, "    allocator      %llu allocations, %llu from cache, %llu segments made, "
			     "%llu placed partly in host memory\n",
			(unsigned long long)as.allocs, (unsigned long long)as.cache_hits,
			(unsigned long long)as.segment_allocs,
			(unsigned long long)as.fallback_segments);
		fprintf(out, "    fallbacks      %llu chunks: limit %llu, headroom %llu, out of memory %llu\n",
			(unsigned long long)st.fallbacks, (unsigned long long)st.fallbacks_limit,
			(unsigned long long)st.fallbacks_headroom,
			(unsigned long long)st.fallbacks_oom);
		human(b1, sizeof(b1), st.copy_bytes_saved);
		human(b2, sizeof(b2), st.shadow_bytes);
		fprintf(out, "    host copies    %llu moves to host memory mapped a kept copy (%s not "
			     "copied), %llu of them verified unchanged, %llu found changed (copied); "
			     "%llu checksums; %s kept now\n",
			(unsigned long long)st.copies_saved, b1,
			(unsigned long long)st.verified_saved,
			(unsigned long long)st.verified_changed,
			(unsigned long long)st.checksums, b2);
		report_driver_time(out, &st);
	}
	if (!any)
		fprintf(out, "  no allocation went through libvmmx\n");
	pthread_mutex_lock(&top_lock);
	if (top[0].host)
		fprintf(out, "  largest spilled allocations\n");
	for (int i = 0; i < TOP_SPILLED && top[i].host; i++) {
		human(b1, sizeof(b1), top[i].size);
		human(b2, sizeof(b2), top[i].host);
		fprintf(out, "    %s at %#llx on device %d (%s): %s in host memory\n", b1,
			(unsigned long long)top[i].ptr, top[i].device, kind_name(top[i].kind), b2);
	}
	pthread_mutex_unlock(&top_lock);
	if (out != stderr) {
		int failed = ferror(out), closed = fclose(out);

		/* A full disk shows at the flush: the report is lost, say so. */
		if (closed || failed)
			fprintf(stderr, "vmmx-run: writing the report to %s failed: %s\n", path,
				closed ? strerror(errno) : "write error");
	}
	leave();
}
