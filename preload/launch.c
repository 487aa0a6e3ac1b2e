// SPDX-License-Identifier: MIT
/*
 * launch.c - the interposed kernel launches: cuLaunchKernel,
 * cuLaunchKernelEx, cuLaunchCooperativeKernel, cudaLaunchKernel and
 * cudaLaunchKernelExC, with their _ptsz forms.
 *
 * Off by default (vmmx-run without --launches or --trace): each hook calls
 * the real entry point at once, and the dlsym and cuGetProcAddress paths
 * hand back the real address itself (resolve.c), so a launch found that way
 * does not pass through this file at all.
 *
 * On, each launch is watched before it is passed on, unchanged:
 *  - the kernel's parameter layout (the offset and size of each parameter)
 *    comes from the driver, cuFuncGetParamInfo() on a CUfunction or
 *    cuKernelGetParamInfo() on a CUkernel (the runtime's cudaLaunchKernel
 *    takes a host stub, which cudaGetFuncBySymbol() turns into the
 *    CUfunction), and is cached per handle: the first launch of a kernel
 *    asks, the others read the cache;
 *  - every 8-byte-aligned word of the parameter block is a candidate
 *    pointer (a pointer inside a by-value struct counts), and so is every
 *    such word of a packed buffer given through "extra"
 *    (CU_LAUNCH_PARAM_BUFFER_POINTER);
 *  - each candidate is resolved with vmmx_lookup() on every device's
 *    context (lock-free); an interior pointer maps to its chunk; the
 *    distinct chunks a launch names are counted, those in host memory
 *    apart, for the report, and written to the trace (--trace) with their
 *    location at launch;
 *  - the launch's kernel and the segments it named go to the cycle
 *    learner (cycle.c), which says where in the step the launch falls.
 * A kernel whose layout the driver cannot give (a driver older than 12.4,
 * a handle it does not know) is counted and passed on unread: without the
 * number of parameters, the kernelParams array cannot be read safely.
 *
 * Graph launches (cuGraphLaunch, cudaGraphLaunch and their _ptsz forms)
 * are watched as one launch each through graph.c, which read the graph's
 * kernel nodes at instantiation with this file's layout cache and word
 * scan (vmmxp_name_params()) and hands the segments back here
 * (vmmxp_launch_named()).
 *
 * A runtime launch reaches the driver's launch inside the runtime: a
 * thread-local mark keeps it from being watched twice.  A thread inside
 * libvmmx (vmmxp_busy()) is never watched.
 *
 * Locking: the layout cache is an open-addressed table whose slots are
 * written under cache_lock, with a release store, and read with acquire
 * loads; entries are never freed (one per kernel, the process's life; an
 * unload empties the table, and a reader may still hold an entry).  Counters are relaxed atomics.  The trace descriptor is opened
 * once (pthread_once); each record is one write() to it (O_APPEND), as in
 * libvmmx's own trace, and a failed write is dropped: tracing never fails
 * a launch.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "preload/preload.h"
#include "vmm/fdwrite.h"

/* Slots of the layout cache: a power of two, more than the kernels of a large program. */
#define CACHE_SLOTS 16384
/* The most parameters asked for: CUDA's parameter space is 32764 bytes (4-byte ones). */
#define MAX_PARAMS 8192
/*
 * Distinct chunks one launch keeps (the same chunk named twice counts once);
 * past them, a chunk may count more than once.  The trace lists the first
 * TRACE_CHUNKS (a record stays under 8 KiB).
 */
#define MAX_NAMED VMMXP_PLACE_MAX
#define TRACE_CHUNKS 64
/* A word whose low half is this close to zero may be two integers (vmmxp_word_kind()). */
#define PAIR_NEAR (64u << 10)
/* ... and this close, may be no pointer (vmmxp_word_kind()). */
#define UNSURE_NEAR (1u << 20)
/*
 * Places of a kernel's recent launches kept for the cycle learner's key
 * (note_cycle()): the first PLACES_PER of each of its last RECENT_LAUNCHES.
 */
#define PLACES_PER 8
#define RECENT_LAUNCHES 4
#define RECENT_PLACES (PLACES_PER * RECENT_LAUNCHES)
/* Values below a page are never addresses: sizes, flags, counts. */
#define MIN_ADDR 4096
/* What a watch returns: the placement lock held (as vmmxp_place_launch() and
 * vmmxp_graph_watch() return 1), or the launch passed unread. */
#define WATCH_HELD 1
#define WATCH_QUIET 2
/* extra's keys (cuda.h) */
#define PARAM_END ((void *)0x00)
#define PARAM_BUFFER_POINTER ((void *)0x01)
#define PARAM_BUFFER_SIZE ((void *)0x02)
#define PARAM_END_AS_INT ((void *)0x03) /* CU_LAUNCH_PARAM_END_AS_INT */

/* Kinds of handle, also told apart in the cycle learner's key (the handle xor its kind). */
enum key_kind {
	KEY_FUNC,       /* a CUfunction (or a CUkernel passed as one) */
	KEY_STUB,       /* a runtime host stub, or a cudaKernel_t */
};

struct layout {
	const void *key;
	enum key_kind kind;
	int nparams;            /* -1: the driver gave none */
	uint32_t *off, *size;   /* nparams each */
	uint64_t recent[RECENT_PLACES]; /* note_cycle(): its recent launches' places; relaxed */
	uint64_t recent_seg[RECENT_PLACES]; /* ... and the bases of their segments */
	uint32_t recent_at;             /* ... the next launch's row; relaxed */
	int indirect;           /* NCCL's: reaches its buffers through work descriptors
				 * in device memory, not its parameters */
	char name[];            /* the kernel's name, "" if unknown */
};

static struct layout *cache[CACHE_SLOTS]; /* written once under cache_lock; acquire loads */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static VMMXP_TLS int in_launch; /* > 0: a runtime launch of this thread is being passed on */

static uint64_t n_launch[VMMXP_NLAUNCH_APIS], n_unread, n_named, n_named_host, n_named_pairs, n_spilled_launch,
	n_uncached, n_captured;

static void count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static size_t slot_of(const void *key, enum key_kind kind)
{
	uint64_t h = (uint64_t)(uintptr_t)key * 0x9e3779b97f4a7c15ull + (uint64_t)kind;

	return (size_t)(h >> 40) & (CACHE_SLOTS - 1);
}

/*
 * The offsets and sizes of @key's parameters, in @off and @size (up to
 * MAX_PARAMS); -1 if the driver cannot say.  The runtime's key is a stub:
 * its CUfunction comes from cudaGetFuncBySymbol(); failing that, the key is
 * taken for a CUkernel (cudaGetKernel()'s handle, which cudaLaunchKernel
 * also takes).
 */
static int ask_layout(const void *key, enum key_kind kind, uint32_t *off, uint32_t *size,
		      const char **name)
{
	CUresult (*fparam)(CUfunction, size_t, size_t *, size_t *) = VMMXP_REAL(cuFuncGetParamInfo);
	CUresult (*kparam)(void *, size_t, size_t *, size_t *) = VMMXP_REAL(cuKernelGetParamInfo);
	CUresult (*fname)(const char **, CUfunction) = VMMXP_REAL(cuFuncGetName);
	CUresult (*kname)(const char **, void *) = VMMXP_REAL(cuKernelGetName);
	CUfunction f = (CUfunction)key;
	size_t o, s;
	int n, is_kernel = 0;

	if (kind == KEY_STUB) {
		cudaError_t (*by_symbol)(CUfunction *, const void *) =
			VMMXP_REAL(cudaGetFuncBySymbol);

		if (!by_symbol || by_symbol(&f, key) != CUDA_OK)
			f = (CUfunction)key;
	}
	*name = NULL;
	/*
	 * Index 0 refused by both calls: a handle the driver cannot describe,
	 * or a kernel without parameters; either way nothing is read, and the
	 * launch counts as one without a layout.
	 */
	if (!fparam || fparam(f, 0, &o, &s) != CUDA_OK) {
		is_kernel = kparam && kparam(f, 0, &o, &s) == CUDA_OK;
		if (!is_kernel) {
			if (!fname || fname(name, f) != CUDA_OK)
				*name = NULL;
			return -1;
		}
	}
	for (n = 0; n < MAX_PARAMS; n++) {
		CUresult r = is_kernel ? kparam(f, (size_t)n, &o, &s) : fparam(f, (size_t)n, &o, &s);

		if (r != CUDA_OK)
			break;
		off[n] = (uint32_t)o;
		size[n] = (uint32_t)s;
	}
	if (is_kernel ? kname && kname(name, f) != CUDA_OK : fname && fname(name, f) != CUDA_OK)
		*name = NULL;
	return n;
}

/* The cached layout of @key, made on its first launch; NULL if there is no room to keep it. */
static struct layout *layout_of(const void *key, enum key_kind kind)
{
	static uint32_t off[MAX_PARAMS], size[MAX_PARAMS]; /* cache_lock */
	size_t i = slot_of(key, kind), probes;
	struct layout *l;
	const char *name = NULL;
	size_t nlen;
	int n;

	for (probes = 0; probes < CACHE_SLOTS; probes++, i = (i + 1) & (CACHE_SLOTS - 1)) {
		l = __atomic_load_n(&cache[i], __ATOMIC_ACQUIRE);
		if (!l)
			break;
		if (l->key == key && l->kind == kind)
			return l;
	}
	if (probes == CACHE_SLOTS)
		return NULL;
	pthread_mutex_lock(&cache_lock);
	/* Another thread may have made it, or taken the free slot, meanwhile. */
	for (; probes < CACHE_SLOTS; probes++, i = (i + 1) & (CACHE_SLOTS - 1)) {
		l = cache[i];
		if (!l)
			break;
		if (l->key == key && l->kind == kind)
			goto out;
	}
	l = NULL;
	if (probes == CACHE_SLOTS)
		goto out;
	n = ask_layout(key, kind, off, size, &name);
	nlen = name ? strlen(name) : 0;
	/* The name, then the two arrays at the next 4-byte boundary (3 bytes of slack). */
	l = malloc(sizeof(*l) + nlen + 1 + 3 + (n > 0 ? (size_t)n * 2 * sizeof(uint32_t) : 0));
	if (!l)
		goto out;
	l->key = key;
	l->kind = kind;
	memset(l->recent, 0, sizeof(l->recent));
	memset(l->recent_seg, 0, sizeof(l->recent_seg));
	l->recent_at = 0;
	l->nparams = n;
	l->off = (uint32_t *)(((uintptr_t)(l->name + nlen + 1) + 3) & ~(uintptr_t)3);
	l->size = l->off + (n > 0 ? n : 0);
	memcpy(l->name, name ? name : "", nlen + 1);
	l->indirect = strstr(l->name, "nccl") != NULL;
	if (n > 0) {
		memcpy(l->off, off, (size_t)n * sizeof(uint32_t));
		memcpy(l->size, size, (size_t)n * sizeof(uint32_t));
	}
	__atomic_store_n(&cache[i], l, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&cache_lock);
	return l;
}

void vmmxp_named_start(struct vmmxp_named *nm)
{
	nm->nctx = vmmxp_ctxs(nm->ctx, VMMXP_MAX_DEVICES);
	nm->n = nm->total = nm->host = nm->pairs = 0;
	nm->shared = 0;
}

/*
 * The chunk @ci of @ctx, named by the word @w (parameter @param, byte @off),
 * added to @nm unless named already.
 */
static void add_named(struct vmmxp_named *nm, const struct vmmx_chunk_info *ci,
		      struct vmmx_ctx *ctx, uint64_t w, int32_t param, int32_t off, unsigned int kind)
{
	for (size_t i = 0; i < nm->n; i++)
		if (nm->chunk[i].base == ci->base) {
			/* A surer word after a pair or an unsure one: it names the chunk. */
			if (nm->kind[i] & ~kind) {
				if ((nm->kind[i] & VMMXP_WORD_PAIR) && !(kind & VMMXP_WORD_PAIR))
					nm->pairs--;
				nm->kind[i] &= kind;
				nm->word[i] = w;
				nm->param[i] = param;
				nm->off[i] = off;
			}
			return;
		}
	nm->total++;
	nm->pairs += (kind & VMMXP_WORD_PAIR) != 0;
	if (ci->loc.kind != VMMX_LOC_DEVICE)
		nm->host++;
	if (nm->n < MAX_NAMED) {
		nm->chunk_ctx[nm->n] = ctx;
		nm->word[nm->n] = w;
		nm->param[nm->n] = param;
		nm->off[nm->n] = off;
		nm->kind[nm->n] = (unsigned char)kind;
		nm->chunk[nm->n++] = *ci;
	}
}

unsigned int vmmxp_word_kind(uint64_t w, const void *seg)
{
	uint32_t lo = (uint32_t)w;

	if (w == (uint64_t)(uintptr_t)seg)
		return 0;
	if (lo < PAIR_NEAR || lo > UINT32_MAX - PAIR_NEAR)
		return VMMXP_WORD_PAIR | VMMXP_WORD_UNSURE;
	return (w & 1) || lo < UNSURE_NEAR || lo > UINT32_MAX - UNSURE_NEAR ? VMMXP_WORD_UNSURE : 0;
}

/* The context of @nm that maps @w, its chunk in @ci; NULL when none does. */
static struct vmmx_ctx *lookup(const struct vmmxp_named *nm, uint64_t w, struct vmmx_chunk_info *ci)
{
	for (int c = 0; c < nm->nctx; c++)
		if (!vmmx_lookup(nm->ctx[c], (const void *)(uintptr_t)w, ci))
			return nm->ctx[c];
	return NULL;
}

/* vmmxp_name_word() for the word @w at byte @off of parameter @param (-1: not a parameter's). */
static void name_at(struct vmmxp_named *nm, uint64_t w, int32_t param, int32_t off)
{
	struct vmmx_chunk_info ci;
	struct vmmx_ctx *ctx;

	if (w < MIN_ADDR || !(ctx = lookup(nm, w, &ci)))
		return;
	/* Only a parameter's word may be a pair or unsure: a copy's are its pointers. */
	add_named(nm, &ci, ctx, w, param, off, off >= 0 ? vmmxp_word_kind(w, vmmx_buf_ptr(ci.buf)) : 0);
}

void vmmxp_name_word(struct vmmxp_named *nm, uint64_t w)
{
	name_at(nm, w, -1, -1);
}

void vmmxp_name_seg(struct vmmxp_named *nm, uint64_t base, unsigned int kind)
{
	struct vmmx_chunk_info ci;
	struct vmmx_ctx *ctx = lookup(nm, base, &ci);

	if (ctx)
		add_named(nm, &ci, ctx, base, -1, -1, kind);
}

void vmmxp_named_merge(struct vmmxp_named *nm, const struct vmmxp_named *from)
{
	for (size_t i = 0; i < from->n; i++)
		add_named(nm, &from->chunk[i], from->chunk_ctx[i], from->word[i],
			  from->param[i], from->off[i], from->kind[i]);
}

/*
 * Each 8-byte-aligned word of [@base_off, @base_off + @len) of the block,
 * parameter @param (-1: a packed buffer); its bytes are at @p.
 */
static void name_words(struct vmmxp_named *nm, const unsigned char *p, int param,
		       size_t base_off, size_t len)
{
	size_t first = (base_off + 7) & ~(size_t)7;

	for (size_t w = first; w + 8 <= base_off + len; w += 8) {
		uint64_t v;

		memcpy(&v, p + (w - base_off), sizeof(v));
		name_at(nm, v, param, (int32_t)w);
	}
}

/* The packed buffer of CU_LAUNCH_PARAM_BUFFER_POINTER, if @extra gives one with its size. */
static void name_extra(struct vmmxp_named *nm, void **extra)
{
	const unsigned char *buf = NULL;
	size_t len = 0;

	for (int i = 0; extra[i] != PARAM_END && extra[i] != PARAM_END_AS_INT && i < 64; i += 2) {
		if (extra[i] == PARAM_BUFFER_POINTER)
			buf = extra[i + 1];
		else if (extra[i] == PARAM_BUFFER_SIZE && extra[i + 1])
			len = *(const size_t *)extra[i + 1];
	}
	if (buf && len)
		name_words(nm, buf, -1, 0, len);
}

static int trace_fd = -1;
static pthread_once_t trace_once = PTHREAD_ONCE_INIT;
static uint64_t seq;

static void trace_open(void)
{
	const char *path = getenv("VMMX_RUN_LAUNCH_TRACE");

	if (path && *path) {
		trace_fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
		if (trace_fd < 0)
			fprintf(stderr, "vmmx-run: cannot open %s for the launch trace: %s; launches "
					"are not traced\n", path, strerror(errno));
	}
}

static const char *const api_names[VMMXP_NLAUNCH_APIS] = {
	"cuLaunchKernel", "cuLaunchKernelEx", "cuLaunchCooperativeKernel", "cudaLaunchKernel",
	"cudaLaunchKernelExC",
};

/* Append @s to @line at *@n, JSON-escaped; stops quietly at the end of the room. */
static void put_escaped(char *line, size_t room, size_t *n, const char *s)
{
	for (; *s && *n + 8 < room; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			*n += (size_t)snprintf(line + *n, room - *n, "\\%c", c);
		else if (c < 0x20)
			*n += (size_t)snprintf(line + *n, room - *n, "\\u%04x", c);
		else
			line[(*n)++] = (char)c;
	}
	line[*n] = '\0';
}

/* Whether records are written (the trace file opened at the first ask). */
static int trace_on(void)
{
	pthread_once(&trace_once, trace_open);
	return trace_fd >= 0;
}

/* One record: @body (the fields after "pid", braces left out) with the time and the pid. */
static void trace_record(const char *body)
{
	char line[320];
	struct timespec ts;
	int n;

	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(line, sizeof(line), "{\"time\":%lld.%06ld,\"pid\":%d,%s}\n",
		     (long long)ts.tv_sec, ts.tv_nsec / 1000, (int)getpid(), body);
	if (n > 0 && (size_t)n < sizeof(line))
		vmm_write_quiet(trace_fd, line, (size_t)n);
}

void vmmxp_trace_move(const void *base, size_t size, int to_device, uint64_t ns, int err,
		      int mover)
{
	char body[240];

	if (!trace_on())
		return;
	snprintf(body, sizeof(body),
		 "\"event\":\"move\",\"to\":\"%s\",\"base\":\"%p\",\"size\":%zu,\"ns\":%llu,"
		 "\"ok\":%s,\"by\":\"%s\"", to_device ? "device" : "host", base, size,
		 (unsigned long long)ns, err ? "false" : "true", mover ? "mover" : "launch");
	trace_record(body);
}

void vmmxp_trace_wait(const char *what, const void *base, uint64_t ns, int mover)
{
	char body[192];

	if (!trace_on())
		return;
	snprintf(body, sizeof(body),
		 "\"event\":\"wait\",\"for\":\"%s\",\"base\":\"%p\",\"ns\":%llu,\"by\":\"%s\"",
		 what, base, (unsigned long long)ns, mover ? "mover" : "launch");
	trace_record(body);
}

void vmmxp_trace_check(int err)
{
	char body[64];

	if (!trace_on())
		return;
	snprintf(body, sizeof(body), "\"event\":\"check\",\"err\":%d", err);
	trace_record(body);
}

/*
 * One JSON line: {"time":..,"pid":..,"event":"launch","seq":N,"api":"...",
 * "kernel":"...","stream":"0x..","params":N,"cycle_pos":N,"shared":N,"chunks_named":N,
 * "chunks_host":N,"chunks":[{"base":"0x..","size":N,"loc":"device:0","at":"0x..",
 * "param":N,"off":N[,"pair":1|,"unsure":1]},...]}: at, the word that named the chunk; param
 * and off, where it lay (-1: not in a parameter); pair, named by words read as two integers
 * only; unsure, by words that may be no pointer only (vmmxp_word_kind()).
 */
static void trace_launch(const char *api, const char *kernel, int nparams, CUstream stream,
			 const struct vmmxp_named *nm, long at)
{
	char line[8192], loc[32];
	size_t n = 0, room = sizeof(line);
	struct timespec ts;
	int w;

	clock_gettime(CLOCK_REALTIME, &ts);
	w = snprintf(line, room,
		     "{\"time\":%lld.%06ld,\"pid\":%d,\"event\":\"launch\",\"seq\":%llu,"
		     "\"api\":\"%s\",\"kernel\":\"",
		     (long long)ts.tv_sec, ts.tv_nsec / 1000, (int)getpid(),
		     (unsigned long long)__atomic_fetch_add(&seq, 1, __ATOMIC_RELAXED),
		     api);
	if (w < 0)
		return;
	n = (size_t)w;
	put_escaped(line, room - 512, &n, kernel && kernel[0] ? kernel : "?");
	n += (size_t)snprintf(line + n, room - n,
			      "\",\"stream\":\"%p\",\"params\":%d,\"cycle_pos\":%ld,\"shared\":%zu,"
			      "\"chunks_named\":%zu,\"chunks_host\":%zu,\"chunks\":[",
			      stream, nparams, at, nm->shared, nm->total, nm->host);
	for (size_t i = 0; i < nm->n && i < TRACE_CHUNKS && n + 128 < room; i++)
		n += (size_t)snprintf(line + n, room - n,
				      "%s{\"base\":\"%p\",\"size\":%zu,\"loc\":\"%s\",\"at\":\"%p\","
				      "\"param\":%d,\"off\":%d%s}",
				      i ? "," : "", nm->chunk[i].base, nm->chunk[i].size,
				      vmmx_loc_name(nm->chunk[i].loc, loc, sizeof(loc)),
				      (void *)(uintptr_t)nm->word[i], nm->param[i], nm->off[i],
				      nm->kind[i] & VMMXP_WORD_PAIR ? ",\"pair\":1" :
				      nm->kind[i] & VMMXP_WORD_UNSURE ? ",\"unsure\":1" : "");
	if (n + 4 > room)
		return;
	n += (size_t)snprintf(line + n, room - n, "]}\n");
	vmm_write_quiet(trace_fd, line, n);
}

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/*
 * A forked child gets every lock of the watch afresh: its launches then
 * fail in the driver, as CUDA after fork does, rather than hang on a lock
 * a vanished thread held.
 */
static void after_fork_child(void)
{
	pthread_mutex_init(&cache_lock, NULL);
	vmmxp_cycle_after_fork();
	vmmxp_place_after_fork();
	vmmxp_graph_after_fork();
}

static void atfork_init(void)
{
	/* Swallowed: without it, only a child that forks during a launch, then launches, could hang. */
	(void)pthread_atfork(NULL, NULL, after_fork_child);
}


/*
 * How many launches of a kernel ago @at was named, in @ring (its recent
 * places or their segments' bases), the current launch being @row: 1 for
 * the last launch, up to RECENT_LAUNCHES; RECENT_LAUNCHES + 1 when none of
 * those named it.
 */
static uint32_t age_of(const uint64_t *ring, uint32_t row, uint64_t at)
{
	for (uint32_t k = 1; k <= RECENT_LAUNCHES; k++) {
		const uint64_t *p = &ring[((row + RECENT_LAUNCHES - k) % RECENT_LAUNCHES) * PLACES_PER];

		for (int j = 0; j < PLACES_PER; j++)
			if (__atomic_load_n(&p[j], __ATOMIC_RELAXED) == at)
				return k;
	}
	return RECENT_LAUNCHES + 1;
}

/*
 * What the cycle learner (cycle.c) knows a launch by: its kernel, the
 * places it named (the address that named each chunk: a segment's base
 * for a tensor with a segment of its own, an address inside the segment
 * for one of the tensors a caching allocator carved out of one, as
 * PyTorch carves a model's weights out of transformers' warm-up segment)
 * with their segments' sizes, and the one of them that identifies it
 * best, its key: the place the kernel named longest ago (not within its
 * last RECENT_LAUNCHES launches counting as longest; a place past the
 * first PLACES_PER a launch names is not kept, and counts as named last);
 * of those, the place in the segment it named longest ago (a tensor new
 * to it before a segment it names every time, at a new place or not: the
 * first step); of those, the place in the largest segment, the first of
 * equal sizes (parameter order is the same at every step).  Where each
 * tensor has a segment of its own, this is the largest segment the
 * kernel's recent launches did not name.  A layer's weights differ from
 * one launch of a GEMM to the next, also when they share a segment; a
 * workspace, a pool segment of activations or a constant input is named
 * launch after launch, at one place or at a few in turn, and when it is
 * the largest (a PyTorch GEMM names its 128 MiB weight beside a larger
 * pool segment) it would make every launch of the kernel look alike.
 * Known limit: a launch naming a weight carved out of a segment the
 * kernel names every time (the warm-up segment) and an output that is
 * both a new place and a new segment is known by the output.  @l, the
 * kernel's cached layout, keeps the places of its recent launches (the
 * first PLACES_PER of each; relaxed: two threads launching one kernel at
 * once may mix them, which costs a mismatch, no more); without one, the
 * largest.  Returns the launch's place in the cycle, -1 if none.
 */
static long note_cycle(struct layout *l, uint64_t key, const struct vmmxp_named *nm)
{
	size_t sizes[MAX_NAMED], pick = nm->n;
	uint64_t kernel = key * 0x100000001b3ull;
	uint64_t segs[MAX_NAMED];
	uint32_t row = 0, best = 0, best_seg = 0;

	if (l)
		row = __atomic_fetch_add(&l->recent_at, 1, __ATOMIC_RELAXED) % RECENT_LAUNCHES;
	for (size_t i = 0; i < nm->n; i++) {
		uint32_t age = 0, age_seg = 0;

		sizes[i] = vmmx_buf_size(nm->chunk[i].buf);
		segs[i] = (uint64_t)(uintptr_t)vmmx_buf_ptr(nm->chunk[i].buf);
		/* Past the first PLACES_PER, not kept: age 0, below any kept place. */
		if (l && i < PLACES_PER) {
			age = age_of(l->recent, row, nm->word[i]);
			age_seg = age_of(l->recent_seg, row, segs[i]);
		}
		/*
		 * Two integers, not a place: not the key while a place is named
		 * (cycle.c matches them all the same, and with none picked keys a
		 * launch by its largest segment, a pair's too).
		 */
		if (nm->kind[i] & VMMXP_WORD_PAIR)
			continue;
		if (pick == nm->n || age > best ||
		    (age == best && (age_seg > best_seg ||
				     (age_seg == best_seg && sizes[i] > sizes[pick])))) {
			pick = i;
			best = age;
			best_seg = age_seg;
		}
	}
	if (l)
		for (size_t j = 0; j < PLACES_PER; j++) {
			__atomic_store_n(&l->recent[row * PLACES_PER + j],
					 j < nm->n ? nm->word[j] : 0, __ATOMIC_RELAXED);
			__atomic_store_n(&l->recent_seg[row * PLACES_PER + j],
					 j < nm->n ? segs[j] : 0, __ATOMIC_RELAXED);
		}
	return vmmxp_cycle_note(kernel, nm->word, sizes, nm->n, pick);
}

/* @params read with the layout @l (may be NULL), or, without @params, @extra's packed buffer. */
static void name_by(struct vmmxp_named *nm, const struct layout *l, void **params, void **extra)
{
	if (params && l && l->nparams > 0) {
		for (int i = 0; i < l->nparams; i++)
			if (params[i])
				name_words(nm, params[i], i, l->off[i], l->size[i]);
	} else if (!params && extra) {
		name_extra(nm, extra);
	}
}

int vmmxp_name_params(struct vmmxp_named *nm, CUfunction f, void **params, void **extra)
{
	const struct layout *l = layout_of(f, KEY_FUNC);

	name_by(nm, l, params, extra);
	return !params && extra ? 0 : l ? l->nparams : -1;
}

/*
 * Whether @stream is capturing into a graph: its launches are recorded, not
 * run, and the moves and waits of placement have no place in a capture (a
 * synchronous call during one invalidates it).  A driver without the call
 * (or refusing it) is taken for no capture.
 */
int vmmxp_capturing(CUstream stream)
{
	__typeof__(&cuStreamIsCapturing) is_capturing = VMMXP_REAL(cuStreamIsCapturing);
	int status = 0;

	return is_capturing && is_capturing(stream, &status) == CUDA_OK && status;
}

/* vmmxp_capturing(), a launch captured counted. */
static int capturing(CUstream stream)
{
	if (!vmmxp_capturing(stream))
		return 0;
	count(&n_captured, 1);
	return 1;
}

/* vmmxp_launch_named(), with the kernel's cached layout @l when there is one (note_cycle()). */
static int launch_named(struct layout *l, const char *api, const char *kernel, int nparams,
			uint64_t key, CUstream stream, const struct vmmxp_named *nm)
{
	long at;

	pthread_once(&atfork_once, atfork_init);
	at = note_cycle(l, key, nm);
	/* An atomic add costs as much as a lookup: none for a count of 0. */
	if (nm->total)
		count(&n_named, nm->total);
	if (nm->pairs)
		count(&n_named_pairs, nm->pairs);
	if (nm->host) {
		count(&n_named_host, nm->host);
		count(&n_spilled_launch, 1);
	}
	if (trace_on())
		trace_launch(api, kernel, nparams, stream, nm, at);
	if (!vmmxp_place_on())
		return 0;
	/* Named past what is kept: the rest must not be parked. */
	if (nm->total > nm->n)
		vmmxp_place_unseen();
	return vmmxp_place_launch(nm->chunk, nm->chunk_ctx, nm->kind, nm->n, at, stream, nm->shared,
				  capturing);
}

int vmmxp_launch_named(const char *api, const char *kernel, int nparams, uint64_t key,
		       CUstream stream, const struct vmmxp_named *nm)
{
	return launch_named(NULL, api, kernel, nparams, key, stream, nm);
}

/*
 * Watch one launch of @key (@kind) on @stream, whose parameters are
 * @params (an array of pointers to each) or @extra; the caller passes it
 * on.  Returns WATCH_HELD when the placement lock is held (--placement
 * launch), WATCH_QUIET when the launch passes unread (vmmxp_place_quiet()),
 * else 0; the caller passes the launch on, then calls watched_done().
 */
static int watch(enum vmmxp_launch_api api, const void *key, enum key_kind kind, CUstream stream,
		 size_t shared, void **params, void **extra)
{
	struct layout *l;
	struct vmmxp_named nm;
	int held;

	vmmxp_depth(1);
	count(&n_launch[api], 1);
	/* Here, not in launch_named() alone: a run that never spills forks too. */
	pthread_once(&atfork_once, atfork_init);
	if (vmmxp_place_quiet()) {
		vmmxp_depth(-1);
		return WATCH_QUIET;
	}
	vmmxp_named_start(&nm);
	nm.shared = shared;
	l = layout_of(key, kind);
	if (!l)
		count(&n_uncached, 1);
	else if (params && l->nparams < 0)
		count(&n_unread, 1);
	/* What it uses is not known: nothing may be parked under it. */
	if (!l || (params && l->nparams < 0) || l->indirect)
		vmmxp_place_unseen();
	name_by(&nm, l, params, extra);
	held = launch_named(l, api_names[api], l ? l->name : NULL, l ? l->nparams : -1,
			    (uint64_t)(uintptr_t)key ^ (uint64_t)kind, stream, &nm);
	vmmxp_depth(-1);
	return held;
}

/* After the real call: what watch() (or a graph's watch) returned asks for. */
static void watched_done(int held)
{
	if (held == WATCH_HELD)
		vmmxp_place_done();
	else if (held == WATCH_QUIET)
		vmmxp_place_quiet_done();
}

static int watching(void)
{
	return vmmxp_launch_on() && !in_launch && !vmmxp_busy();
}

static CUstream drv_stream(CUstream s, int ptsz)
{
	return !s && ptsz ? CU_STREAM_PER_THREAD_ : s;
}

struct vmmxp_launch_stats vmmxp_launch_stats(void)
{
	struct vmmxp_launch_stats st;

	for (int a = 0; a < VMMXP_NLAUNCH_APIS; a++)
		st.launches[a] = __atomic_load_n(&n_launch[a], __ATOMIC_RELAXED);
	st.unread = __atomic_load_n(&n_unread, __ATOMIC_RELAXED);
	st.uncached = __atomic_load_n(&n_uncached, __ATOMIC_RELAXED);
	st.named = __atomic_load_n(&n_named, __ATOMIC_RELAXED);
	st.named_host = __atomic_load_n(&n_named_host, __ATOMIC_RELAXED);
	st.named_pairs = __atomic_load_n(&n_named_pairs, __ATOMIC_RELAXED);
	st.spilled_launches = __atomic_load_n(&n_spilled_launch, __ATOMIC_RELAXED);
	st.captured = __atomic_load_n(&n_captured, __ATOMIC_RELAXED);
	vmmxp_graph_stats(&st);
	return st;
}

const char *vmmxp_launch_api_name(enum vmmxp_launch_api api)
{
	return api_names[api];
}

/*
 * The hooks.  DRV_HOOK: the driver's @name(@params), whose real call is
 * @name@args; when launches are watched, @watched runs first, and what it
 * returns asks watched_done() for what follows the real call.  RT_HOOK: the
 * runtime's, likewise, and the real call then runs with the thread marked,
 * so that the driver's launch inside it is not watched again.
 */
#define DRV_HOOK(name, params, args, watched)                                                   \
	VMMXP_EXPORT CUresult name params                                                       \
	{                                                                                       \
		__typeof__(&name) real = VMMXP_REAL(name);                                      \
		CUresult r;                                                                     \
		int held = 0;                                                                   \
                                                                                                \
		if (!real)                                                                      \
			return CUDA_ENOTFOUND;                                                  \
		if (watching())                                                                 \
			held = (watched);                                                       \
		r = real args;                                                                  \
		watched_done(held);                                                             \
		return r;                                                                       \
	}

#define RT_HOOK(name, params, args, watched)                                                    \
	VMMXP_EXPORT cudaError_t name params                                                    \
	{                                                                                       \
		__typeof__(&name) real = VMMXP_REAL(name);                                      \
		cudaError_t r;                                                                  \
		int held;                                                                       \
                                                                                                \
		if (!real)                                                                      \
			return RT_ENOTFOUND;                                                    \
		if (!watching())                                                                \
			return real args;                                                       \
		held = (watched);                                                               \
		in_launch++;                                                                    \
		r = real args;                                                                  \
		in_launch--;                                                                    \
		watched_done(held);                                                             \
		return r;                                                                       \
	}

#define LAUNCH_PARAMS                                                                           \
	(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,      \
	 unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void **params, \
	 void **extra)
#define LAUNCH_ARGS (f, gx, gy, gz, bx, by, bz, shared, stream, params, extra)
DRV_HOOK(cuLaunchKernel, LAUNCH_PARAMS, LAUNCH_ARGS,
	 watch(VMMXP_LAUNCH_CU, f, KEY_FUNC, drv_stream(stream, 0), shared, params, extra))
DRV_HOOK(cuLaunchKernel_ptsz, LAUNCH_PARAMS, LAUNCH_ARGS,
	 watch(VMMXP_LAUNCH_CU, f, KEY_FUNC, drv_stream(stream, 1), shared, params, extra))

#define EX_PARAMS (const struct vmmxp_cu_config *config, CUfunction f, void **params, void **extra)
#define EX_ARGS (config, f, params, extra)
DRV_HOOK(cuLaunchKernelEx, EX_PARAMS, EX_ARGS,
	 config ? watch(VMMXP_LAUNCH_CU_EX, f, KEY_FUNC, drv_stream(config->stream, 0),
			config->shared, params, extra) : 0)
DRV_HOOK(cuLaunchKernelEx_ptsz, EX_PARAMS, EX_ARGS,
	 config ? watch(VMMXP_LAUNCH_CU_EX, f, KEY_FUNC, drv_stream(config->stream, 1),
			config->shared, params, extra) : 0)

#define COOP_PARAMS                                                                             \
	(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,      \
	 unsigned int by, unsigned int bz, unsigned int shared, CUstream stream, void **params)
#define COOP_ARGS (f, gx, gy, gz, bx, by, bz, shared, stream, params)
DRV_HOOK(cuLaunchCooperativeKernel, COOP_PARAMS, COOP_ARGS,
	 watch(VMMXP_LAUNCH_CU_COOP, f, KEY_FUNC, drv_stream(stream, 0), shared, params, NULL))
DRV_HOOK(cuLaunchCooperativeKernel_ptsz, COOP_PARAMS, COOP_ARGS,
	 watch(VMMXP_LAUNCH_CU_COOP, f, KEY_FUNC, drv_stream(stream, 1), shared, params, NULL))

#define RT_PARAMS                                                                               \
	(const void *func, struct vmmxp_dim3 grid, struct vmmxp_dim3 block, void **args,        \
	 size_t shared, CUstream stream)
#define RT_ARGS (func, grid, block, args, shared, stream)
RT_HOOK(cudaLaunchKernel, RT_PARAMS, RT_ARGS,
	watch(VMMXP_LAUNCH_RT, func, KEY_STUB, drv_stream(stream, 0), shared, args, NULL))
RT_HOOK(cudaLaunchKernel_ptsz, RT_PARAMS, RT_ARGS,
	watch(VMMXP_LAUNCH_RT, func, KEY_STUB, drv_stream(stream, 1), shared, args, NULL))

#define RT_EX_PARAMS (const struct vmmxp_rt_config *config, const void *func, void **args)
#define RT_EX_ARGS (config, func, args)
RT_HOOK(cudaLaunchKernelExC, RT_EX_PARAMS, RT_EX_ARGS,
	config ? watch(VMMXP_LAUNCH_RT_EX, func, KEY_STUB, drv_stream(config->stream, 0),
		       config->shared, args, NULL) : 0)
RT_HOOK(cudaLaunchKernelExC_ptsz, RT_EX_PARAMS, RT_EX_ARGS,
	config ? watch(VMMXP_LAUNCH_RT_EX, func, KEY_STUB, drv_stream(config->stream, 1),
		       config->shared, args, NULL) : 0)

/* Graphs: one launch each, naming what graph.c read at instantiation. */
#define GRAPH_PARAMS (void *exec, CUstream stream)
#define GRAPH_ARGS (exec, stream)
DRV_HOOK(cuGraphLaunch, GRAPH_PARAMS, GRAPH_ARGS,
	 vmmxp_graph_watch("cuGraphLaunch", exec, drv_stream(stream, 0)))
DRV_HOOK(cuGraphLaunch_ptsz, GRAPH_PARAMS, GRAPH_ARGS,
	 vmmxp_graph_watch("cuGraphLaunch", exec, drv_stream(stream, 1)))
RT_HOOK(cudaGraphLaunch, GRAPH_PARAMS, GRAPH_ARGS,
	vmmxp_graph_watch("cudaGraphLaunch", exec, drv_stream(stream, 0)))
RT_HOOK(cudaGraphLaunch_ptsz, GRAPH_PARAMS, GRAPH_ARGS,
	vmmxp_graph_watch("cudaGraphLaunch", exec, drv_stream(stream, 1)))

/*
 * Unloads: the functions of an unloaded module or library are gone, and
 * their addresses may be another's next: the layout cache is emptied (its
 * entries are not freed: a reader may still hold one), so every kernel's
 * layout is asked again at its next launch.
 */
static int forget_layouts(void)
{
	pthread_mutex_lock(&cache_lock);
	for (size_t i = 0; i < CACHE_SLOTS; i++)
		__atomic_store_n(&cache[i], NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&cache_lock);
	return 0;
}

DRV_HOOK(cuModuleUnload, (void *module), (module), forget_layouts())
DRV_HOOK(cuLibraryUnload, (void *library), (library), forget_layouts())
