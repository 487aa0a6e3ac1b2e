// SPDX-License-Identifier: MIT
/*
 * fakecuda.c - a stand-in for libcudart and libcuda in the interposer's
 * tests: it exports every call libvmmx-preload takes over (and the helpers it
 * calls), counts each call, and makes "real" allocations from a sentinel
 * arena, so a test can tell memory that reached the real driver from memory
 * libvmmx served.  cuGetProcAddress answers from a table like the driver's
 * (cuMemAlloc at 3020 and later is cuMemAlloc_v2).  Device: a thread's
 * current one (cudaSetDevice), shared by both APIs.  Memsets are logged and
 * handed to the test's function (fake_set_impl()), which plays the driver.
 * Stream-ordered pools and the VMM calls are counted stand-ins.  Every
 * symbol has the version VMMXFAKE_1 (fakecuda.map), so that dlvsym finds
 * them by it.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "tests/preload/fakecuda.h"

#define ARENA_SLOTS 64
#define ARENA_SLOT 4096

static unsigned char arena[ARENA_SLOTS][ARENA_SLOT] __attribute__((aligned(4096)));
static int used[ARENA_SLOTS];
static __thread int cur_dev;
static unsigned long calls[FAKE_NCALLS];

#define CALL(c) __atomic_fetch_add(&calls[c], 1, __ATOMIC_RELAXED)

unsigned long fake_calls(enum fake_call c)
{
	return __atomic_load_n(&calls[c], __ATOMIC_RELAXED);
}

int fake_is_real(const void *p)
{
	return (const unsigned char *)p >= &arena[0][0] &&
	       (const unsigned char *)p < &arena[0][0] + sizeof(arena);
}

void *fake_real_alloc(void)
{
	for (int i = 0; i < ARENA_SLOTS; i++)
		if (!__atomic_exchange_n(&used[i], 1, __ATOMIC_ACQ_REL))
			return arena[i];
	return NULL;
}

static int real_free(const void *p)
{
	if (!fake_is_real(p))
		return 1;
	__atomic_store_n(&used[((const unsigned char *)p - &arena[0][0]) / ARENA_SLOT], 0,
			 __ATOMIC_RELEASE);
	return 0;
}

int cudaGetDevice(int *d) { CALL(FAKE_cudaGetDevice); *d = cur_dev; return 0; }
int cudaSetDevice(int d) { cur_dev = d; return 0; }
int cuCtxGetDevice(int *d) { CALL(FAKE_cuCtxGetDevice); *d = cur_dev; return 0; }

int cudaMalloc(void **p, size_t n) { CALL(FAKE_cudaMalloc); (void)n; *p = fake_real_alloc(); return *p ? 0 : 2; }
int cudaFree(void *p) { CALL(FAKE_cudaFree); return p ? real_free(p) : 0; }
int cudaMallocAsync(void **p, size_t n, void *s) { CALL(FAKE_cudaMallocAsync); (void)s; return cudaMalloc(p, n); }
int cudaFreeAsync(void *p, void *s) { CALL(FAKE_cudaFreeAsync); (void)s; return real_free(p); }
int cudaMallocAsync_ptsz(void **p, size_t n, void *s) { return cudaMallocAsync(p, n, s); }
int cudaFreeAsync_ptsz(void *p, void *s) { return cudaFreeAsync(p, s); }
int cudaMemGetInfo(size_t *f, size_t *t) { CALL(FAKE_cudaMemGetInfo); *f = 1; *t = 2; return 0; }
int cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h) { CALL(FAKE_cudaMallocPitch); *pitch = w; (void)h; *p = fake_real_alloc(); return 0; }
int cudaMalloc3D(void *pp, struct fake_extent e) { CALL(FAKE_cudaMalloc3D); (void)pp; (void)e; return 2; }
int cudaIpcGetMemHandle(void *h, void *p) { CALL(FAKE_cudaIpcGetMemHandle); memset(h, 7, 64); (void)p; return 0; }

int cuMemAlloc(unsigned int *p, unsigned int n) { CALL(FAKE_cuMemAlloc_v1); (void)n; *p = 0; return 2; }
int cuMemAlloc_v2(unsigned long long *p, size_t n) { CALL(FAKE_cuMemAlloc); (void)n; *p = (uintptr_t)fake_real_alloc(); return *p ? 0 : 2; }
int cuMemFree_v2(unsigned long long p) { CALL(FAKE_cuMemFree); return real_free((void *)(uintptr_t)p); }
int cuMemAllocAsync(unsigned long long *p, size_t n, void *s) { CALL(FAKE_cuMemAllocAsync); (void)s; (void)n; *p = (uintptr_t)fake_real_alloc(); return 0; }
int cuMemFreeAsync(unsigned long long p, void *s) { CALL(FAKE_cuMemFreeAsync); (void)s; return real_free((void *)(uintptr_t)p); }
int cuMemAllocAsync_ptsz(unsigned long long *p, size_t n, void *s) { return cuMemAllocAsync(p, n, s); }
int cuMemFreeAsync_ptsz(unsigned long long p, void *s) { return cuMemFreeAsync(p, s); }
int cuMemGetInfo_v2(size_t *f, size_t *t) { CALL(FAKE_cuMemGetInfo); *f = 1; *t = 2; return 0; }
int cuMemAllocPitch_v2(unsigned long long *p, size_t *pitch, size_t w, size_t h, unsigned int e) { CALL(FAKE_cuMemAllocPitch); (void)h; (void)e; *pitch = w; *p = (uintptr_t)fake_real_alloc(); return 0; }
int cuIpcGetMemHandle(void *h, unsigned long long p) { CALL(FAKE_cuIpcGetMemHandle); memset(h, 7, 64); (void)p; return 0; }

int cuMemAllocFromPoolAsync(unsigned long long *p, size_t n, void *pool, void *s)
{
	CALL(FAKE_cuMemAllocFromPoolAsync);
	(void)n; (void)pool; (void)s;
	*p = (uintptr_t)fake_real_alloc();
	return *p ? 0 : 2;
}
int cuMemAllocFromPoolAsync_ptsz(unsigned long long *p, size_t n, void *pool, void *s) { return cuMemAllocFromPoolAsync(p, n, pool, s); }
int cuDeviceGetDefaultMemPool(void **pool, int dev) { CALL(FAKE_cuDeviceGetDefaultMemPool); *pool = FAKE_DEFAULT_POOL(dev); return 0; }
int cuDeviceGetMemPool(void **pool, int dev) { *pool = FAKE_DEFAULT_POOL(dev); return 0; }
int cuMemPoolCreate(void **pool, const void *props) { CALL(FAKE_cuMemPoolCreate); (void)props; *pool = FAKE_OWN_POOL; return 0; }
int cuMemPoolDestroy(void *pool) { CALL(FAKE_cuMemPoolDestroy); (void)pool; return 0; }
int cuMemPoolTrimTo(void *pool, size_t keep) { CALL(FAKE_cuMemPoolTrimTo); (void)pool; (void)keep; return 0; }
int cuMemPoolGetAttribute(void *pool, int attr, void *value) { CALL(FAKE_cuMemPoolGetAttribute); (void)pool; (void)attr; *(unsigned long long *)value = 0; return 0; }
int cuMemCreate(unsigned long long *h, size_t n, const void *prop, unsigned long long flags) { CALL(FAKE_cuMemCreate); (void)n; (void)prop; (void)flags; *h = 0x4a11; return 0; }
int cuMemRelease(unsigned long long h) { CALL(FAKE_cuMemRelease); (void)h; return 0; }
int cuMemMap(unsigned long long p, size_t n, size_t off, unsigned long long h, unsigned long long flags) { CALL(FAKE_cuMemMap); (void)p; (void)n; (void)off; (void)h; (void)flags; return 0; }

static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_set set_log[FAKE_SET_LOG]; /* set_lock */
static size_t set_n;                          /* set_lock */
static int (*set_fn)(const struct fake_set *);

void fake_set_impl(int (*fn)(const struct fake_set *)) { set_fn = fn; }
void fake_set_log_clear(void) { pthread_mutex_lock(&set_lock); set_n = 0; pthread_mutex_unlock(&set_lock); }

size_t fake_set_log(const struct fake_set **log)
{
	*log = set_log;
	return set_n < FAKE_SET_LOG ? set_n : FAKE_SET_LOG;
}

static unsigned long use_bad;

unsigned long fake_use_bad(void) { return __atomic_load_n(&use_bad, __ATOMIC_RELAXED); }

static int (*use_check)(uintptr_t p, size_t n);

void fake_use_check(int (*fn)(uintptr_t p, size_t n)) { use_check = fn; }

/* The check of fake_use_check() on a copy's or memset's range, where set. */
static void check_use(uintptr_t p, size_t n)
{
	int (*fn)(uintptr_t, size_t) = use_check;

	if (fn && fn(p, n))
		__atomic_fetch_add(&use_bad, 1, __ATOMIC_RELAXED);
}

static int fake_set(const char *call, void *p, unsigned int v, unsigned int elem, size_t n, void *s)
{
	struct fake_set e = { call, p, v, elem, n, s };

	CALL(FAKE_memset);
	check_use((uintptr_t)p, n * elem);
	pthread_mutex_lock(&set_lock);
	if (set_n < FAKE_SET_LOG)
		set_log[set_n++] = e;
	pthread_mutex_unlock(&set_lock);
	return set_fn ? set_fn(&e) : 0;
}

#define PTR(d) ((void *)(uintptr_t)(d))
int cudaMemset(void *p, int v, size_t n) { return fake_set(__func__, p, (unsigned char)v, 1, n, NULL); }
int cudaMemset_ptds(void *p, int v, size_t n) { return fake_set(__func__, p, (unsigned char)v, 1, n, NULL); }
int cudaMemsetAsync(void *p, int v, size_t n, void *s) { return fake_set(__func__, p, (unsigned char)v, 1, n, s); }
int cudaMemsetAsync_ptsz(void *p, int v, size_t n, void *s) { return fake_set(__func__, p, (unsigned char)v, 1, n, s); }
int cuMemsetD8_v2(unsigned long long p, unsigned char v, size_t n) { return fake_set(__func__, PTR(p), v, 1, n, NULL); }
int cuMemsetD16_v2(unsigned long long p, unsigned short v, size_t n) { return fake_set(__func__, PTR(p), v, 2, n, NULL); }
int cuMemsetD32_v2(unsigned long long p, unsigned int v, size_t n) { return fake_set(__func__, PTR(p), v, 4, n, NULL); }
int cuMemsetD8_v2_ptds(unsigned long long p, unsigned char v, size_t n) { return fake_set(__func__, PTR(p), v, 1, n, NULL); }
int cuMemsetD16_v2_ptds(unsigned long long p, unsigned short v, size_t n) { return fake_set(__func__, PTR(p), v, 2, n, NULL); }
int cuMemsetD32_v2_ptds(unsigned long long p, unsigned int v, size_t n) { return fake_set(__func__, PTR(p), v, 4, n, NULL); }
int cuMemsetD8Async(unsigned long long p, unsigned char v, size_t n, void *s) { return fake_set(__func__, PTR(p), v, 1, n, s); }
int cuMemsetD16Async(unsigned long long p, unsigned short v, size_t n, void *s) { return fake_set(__func__, PTR(p), v, 2, n, s); }
int cuMemsetD32Async(unsigned long long p, unsigned int v, size_t n, void *s) { return fake_set(__func__, PTR(p), v, 4, n, s); }
int cuMemsetD8Async_ptsz(unsigned long long p, unsigned char v, size_t n, void *s) { return fake_set(__func__, PTR(p), v, 1, n, s); }
int cuMemsetD16Async_ptsz(unsigned long long p, unsigned short v, size_t n, void *s) { return fake_set(__func__, PTR(p), v, 2, n, s); }
int cuMemsetD32Async_ptsz(unsigned long long p, unsigned int v, size_t n, void *s) { return fake_set(__func__, PTR(p), v, 4, n, s); }
#undef PTR

static pthread_mutex_t copy_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_copy copy_log[FAKE_COPY_LOG]; /* copy_lock */
static size_t copy_n;                            /* copy_lock */

size_t fake_copy_log(const struct fake_copy **log)
{
	*log = copy_log;
	return copy_n < FAKE_COPY_LOG ? copy_n : FAKE_COPY_LOG;
}

static int fake_copy(const char *call, uintptr_t dst, uintptr_t src, size_t n, void *s)
{
	struct fake_copy e = { call, dst, src, n, s };

	CALL(FAKE_copy);
	check_use(dst, n);
	check_use(src, n);
	pthread_mutex_lock(&copy_lock);
	if (copy_n < FAKE_COPY_LOG)
		copy_log[copy_n++] = e;
	pthread_mutex_unlock(&copy_lock);
	return 0;
}

int cudaMemcpy(void *dst, const void *src, size_t n, int kind) { (void)kind; return fake_copy(__func__, (uintptr_t)dst, (uintptr_t)src, n, NULL); }
int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *s) { (void)kind; return fake_copy(__func__, (uintptr_t)dst, (uintptr_t)src, n, s); }
int cuMemcpyAsync(unsigned long long dst, unsigned long long src, size_t n, void *s) { return fake_copy(__func__, dst, src, n, s); }
int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t n, void *s) { return fake_copy(__func__, dst, (uintptr_t)src, n, s); }
int cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t n, void *s) { return fake_copy(__func__, (uintptr_t)dst, src, n, s); }
int cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t n, void *s) { return fake_copy(__func__, dst, src, n, s); }
int cuMemcpy2DAsync_v2(const struct fake_memcpy2d *p, void *s)
{
	return fake_copy(__func__, p->dst_device + p->dst_y * p->dst_pitch + p->dst_x,
			 (uintptr_t)p->src_host, p->width * p->height, s);
}

static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_launch launch_log[FAKE_LAUNCH_LOG]; /* launch_lock */
static size_t launch_n;                                /* launch_lock */

size_t fake_launch_log(const struct fake_launch **log)
{
	*log = launch_log;
	return launch_n < FAKE_LAUNCH_LOG ? launch_n : FAKE_LAUNCH_LOG;
}

void fake_launch_log_clear(void) { pthread_mutex_lock(&launch_lock); launch_n = 0; pthread_mutex_unlock(&launch_lock); }

static int (*launch_check)(const void *f, void **params);
static unsigned long launch_bad;

void fake_launch_check(int (*fn)(const void *f, void **params)) { launch_check = fn; }
unsigned long fake_launch_bad(void) { return __atomic_load_n(&launch_bad, __ATOMIC_RELAXED); }

static int fake_launch(const char *call, const void *f, void *s, void **params, void **extra)
{
	struct fake_launch e = { call, f, s, params, extra };

	CALL(FAKE_launch);
	if (launch_check && params && launch_check(f, params))
		__atomic_fetch_add(&launch_bad, 1, __ATOMIC_RELAXED);
	pthread_mutex_lock(&launch_lock);
	if (launch_n < FAKE_LAUNCH_LOG)
		launch_log[launch_n++] = e;
	pthread_mutex_unlock(&launch_lock);
	return f ? 0 : 1;
}

#define DIMS unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared
#define UNUSED_DIMS (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shared
int cuLaunchKernel(void *f, DIMS, void *s, void **params, void **extra) { UNUSED_DIMS; return fake_launch(__func__, f, s, params, extra); }
int cuLaunchKernel_ptsz(void *f, DIMS, void *s, void **params, void **extra) { UNUSED_DIMS; return fake_launch(__func__, f, s, params, extra); }
int cuLaunchCooperativeKernel(void *f, DIMS, void *s, void **params) { UNUSED_DIMS; return fake_launch(__func__, f, s, params, NULL); }
int cuLaunchCooperativeKernel_ptsz(void *f, DIMS, void *s, void **params) { UNUSED_DIMS; return fake_launch(__func__, f, s, params, NULL); }
#undef DIMS
#undef UNUSED_DIMS
int cuLaunchKernelEx(const void *config, void *f, void **params, void **extra)
{
	CALL(FAKE_cuLaunchKernelEx);
	return fake_launch(__func__, f, config ? ((const struct fake_cu_config *)config)->stream : NULL, params, extra);
}
int cuLaunchKernelEx_ptsz(const void *config, void *f, void **params, void **extra)
{
	return fake_launch(__func__, f, config ? ((const struct fake_cu_config *)config)->stream : NULL, params, extra);
}
int cudaLaunchKernel(const void *func, struct fake_dim3 grid, struct fake_dim3 block, void **args, size_t shared, void *s) { (void)grid; (void)block; (void)shared; return fake_launch(__func__, func, s, args, NULL); }
int cudaLaunchKernel_ptsz(const void *func, struct fake_dim3 grid, struct fake_dim3 block, void **args, size_t shared, void *s) { (void)grid; (void)block; (void)shared; return fake_launch(__func__, func, s, args, NULL); }
int cudaLaunchKernelExC(const void *config, const void *func, void **args) { return fake_launch(__func__, func, ((const struct fake_rt_config *)config)->stream, args, NULL); }
int cudaLaunchKernelExC_ptsz(const void *config, const void *func, void **args) { return fake_launch(__func__, func, ((const struct fake_rt_config *)config)->stream, args, NULL); }

struct fake_node *fake_graph_kernel(struct fake_graph *g, struct fake_kernel *k, void **params)
{
	struct fake_node *nd = fake_graph_node(g, 0, NULL);

	nd->k = k;
	for (int i = 0; i < k->nparams && i < FAKE_MAX_PARAMS; i++) {
		memcpy(nd->arg[i], params[i], k->size[i] < FAKE_PARAM_BYTES ? k->size[i] : FAKE_PARAM_BYTES);
		nd->argp[i] = nd->arg[i];
	}
	return nd;
}

struct fake_node *fake_graph_node(struct fake_graph *g, int type, struct fake_graph *child)
{
	struct fake_node *nd = &g->node[g->n++];

	memset(nd, 0, sizeof(*nd));
	nd->type = type;
	nd->child = child;
	return nd;
}

static int graph_fail, capture;
void fake_graph_fail(int on) { __atomic_store_n(&graph_fail, on, __ATOMIC_RELAXED); }
void fake_capture(int on) { __atomic_store_n(&capture, on, __ATOMIC_RELAXED); }
int cuStreamIsCapturing(void *s, int *status) { (void)s; *status = __atomic_load_n(&capture, __ATOMIC_RELAXED); return 0; }

static __thread int capture_mode; /* CU_STREAM_CAPTURE_MODE_GLOBAL (0) until exchanged */
int cuThreadExchangeStreamCaptureMode(int *mode)
{
	int was = capture_mode;

	capture_mode = *mode;
	*mode = was;
	return 0;
}

int cuGraphGetNodes(void *graph, void **nodes, size_t *n)
{
	struct fake_graph *g = graph;

	CALL(FAKE_graph_get_nodes);
	if (!g || !n || __atomic_load_n(&graph_fail, __ATOMIC_RELAXED))
		return 1;
	for (size_t i = 0; nodes && i < *n && i < (size_t)g->n; i++)
		nodes[i] = &g->node[i];
	*n = (size_t)g->n;
	return 0;
}
int cuGraphNodeGetType(void *node, int *type) { *type = ((struct fake_node *)node)->type; return 0; }
int cuGraphKernelNodeGetParams_v2(void *node, struct fake_kernel_node_params *p)
{
	struct fake_node *nd = node;

	if (nd->type != 0)
		return 1;
	memset(p, 0, sizeof(*p));
	/* A CUkernel is given as kern, func NULL. */
	if (nd->k->is_kernel)
		p->kern = nd->k;
	else
		p->func = nd->k;
	p->params = nd->argp;
	return 0;
}
int cuGraphChildGraphNodeGetGraph(void *node, void **g)
{
	struct fake_node *nd = node;

	if (nd->type != 4)
		return 1;
	*g = nd->child;
	return 0;
}

static struct fake_graph *execs[FAKE_EXECS];
static pthread_mutex_t exec_lock = PTHREAD_MUTEX_INITIALIZER;

struct fake_graph *fake_exec_graph(void *exec)
{
	struct fake_graph **e = exec;

	return e >= execs && e < execs + FAKE_EXECS ? *e : NULL;
}

int cuGraphInstantiateWithFlags(void **exec, void *g, unsigned long long flags)
{
	int r = 2;

	(void)flags;
	CALL(FAKE_graph_instantiate);
	pthread_mutex_lock(&exec_lock);
	for (int i = 0; i < FAKE_EXECS; i++)
		if (!execs[i]) {
			execs[i] = g;
			*exec = &execs[i];
			r = 0;
			break;
		}
	pthread_mutex_unlock(&exec_lock);
	return r;
}
int cuGraphInstantiateWithParams(void **exec, void *g, void *params) { (void)params; return cuGraphInstantiateWithFlags(exec, g, 0); }
int cuGraphExecDestroy(void *exec)
{
	CALL(FAKE_graph_exec_destroy);
	if (!fake_exec_graph(exec))
		return 400; /* CUDA_ERROR_INVALID_HANDLE */
	*(struct fake_graph **)exec = NULL;
	return 0;
}
int cuGraphExecUpdate_v2(void *exec, void *g, void *info)
{
	(void)info;
	if (!fake_exec_graph(exec))
		return 400;
	*(struct fake_graph **)exec = g;
	return 0;
}
int cuGraphExecKernelNodeSetParams_v2(void *exec, void *node, const void *params) { (void)node; (void)params; return fake_exec_graph(exec) ? 0 : 400; }
/* The runtime's: through the driver's entry point found by lookup, as a runtime's are. */
int cudaGraphInstantiate(void **exec, void *g, unsigned long long flags)
{
	int (*drv)(void **, void *, unsigned long long) =
		(int (*)(void **, void *, unsigned long long))dlsym(RTLD_DEFAULT, "cuGraphInstantiateWithFlags");

	return drv ? drv(exec, g, flags) : 500;
}
int cudaGraphInstantiateWithFlags(void **exec, void *g, unsigned long long flags) { return cudaGraphInstantiate(exec, g, flags); }
int cudaGraphExecDestroy(void *exec)
{
	int (*drv)(void *) = (int (*)(void *))dlsym(RTLD_DEFAULT, "cuGraphExecDestroy");

	return drv ? drv(exec) : 500;
}

int cuGraphLaunch(void *exec, void *s) { return fake_launch(__func__, exec, s, NULL, NULL); }
int cuGraphLaunch_ptsz(void *exec, void *s) { return fake_launch(__func__, exec, s, NULL, NULL); }
int cudaGraphLaunch(void *exec, void *s) { return fake_launch(__func__, exec, s, NULL, NULL); }
int cudaGraphLaunch_ptsz(void *exec, void *s) { return fake_launch(__func__, exec, s, NULL, NULL); }

/*
 * Events: a pool of FAKE_EVENTS.  A recorded event is complete at once,
 * unless fake_event_hold(1) is in force: then it stays not ready
 * (CUDA_ERROR_NOT_READY, 600) until cuEventSynchronize(), which first calls
 * the test's functions with the work the fake had seen when the event was
 * recorded (launches, copies and memsets: the work it waits for), and its
 * stream.  fake_event_fail(1) makes every cuEventRecord fail, as one on
 * another context's stream does.
 *
 * Joins: cuStreamWaitEvent(s, e) with e not complete keeps (s, e's stream
 * and work); an event recorded on s after it completes only after e, so
 * its synchronisation first tells the stream function of e's work (and of
 * e's own joins before it, in turn), and marks e complete if it was not
 * recorded again since.  Order between records and joins is the fake's
 * own count of them (seq), not the work: a join and a record can see the
 * same work.
 */
#define FAKE_EVENTS 4096
struct fake_event {
	int used, done;
	int timed;              /* made without CU_EVENT_DISABLE_TIMING */
	double at;              /* the clock when recorded (timed) */
	void *stream;
	unsigned long launches;
	unsigned long seq;      /* when it was recorded, among records and joins */
};

struct fake_join {
	void *stream;           /* the stream made to wait */
	unsigned long seq;      /* when, among records and joins */
	struct fake_event *ev;  /* the event it waits for ... */
	void *ev_stream;        /* ... its stream, work and seq at the time */
	unsigned long ev_launches, ev_seq;
	int told;               /* already told to the stream function */
};

static struct fake_event events[FAKE_EVENTS];
static pthread_mutex_t join_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fake_join joins[FAKE_JOINS]; /* join_lock */
static size_t njoins;                      /* join_lock */
static unsigned long seq;
static int event_hold, event_fail;
static void (*event_sync_fn)(unsigned long launches);
static void (*event_sync_stream_fn)(void *stream, unsigned long work);
static double (*event_clock_fn)(void);

void fake_event_hold(int on) { __atomic_store_n(&event_hold, on, __ATOMIC_RELAXED); }
void fake_event_fail(int on) { __atomic_store_n(&event_fail, on, __ATOMIC_RELAXED); }
void fake_event_sync_impl(void (*fn)(unsigned long launches)) { event_sync_fn = fn; }
void fake_event_sync_stream_impl(void (*fn)(void *stream, unsigned long work)) { event_sync_stream_fn = fn; }
void fake_event_clock_impl(double (*now)(void)) { event_clock_fn = now; }

int cuEventCreate(void **e, unsigned int flags)
{
	int timed = !(flags & 0x2); /* CU_EVENT_DISABLE_TIMING */

	if (timed && !event_clock_fn)
		return 1; /* CUDA_ERROR_INVALID_VALUE: no timing here */
	for (int i = 0; i < FAKE_EVENTS; i++)
		if (!__atomic_exchange_n(&events[i].used, 1, __ATOMIC_ACQ_REL)) {
			events[i].done = 1;
			events[i].timed = timed;
			*e = &events[i];
			return 0;
		}
	return 2; /* CUDA_ERROR_OUT_OF_MEMORY */
}

int cuEventRecord(void *e, void *s)
{
	struct fake_event *ev = e;

	CALL(FAKE_event_record);
	if (!ev || __atomic_load_n(&event_fail, __ATOMIC_RELAXED))
		return 400; /* CUDA_ERROR_INVALID_HANDLE (a stream of another context) */
	ev->stream = s;
	ev->launches = fake_calls(FAKE_launch) + fake_calls(FAKE_copy) + fake_calls(FAKE_memset);
	ev->seq = __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED);
	if (ev->timed && event_clock_fn)
		ev->at = event_clock_fn();
	ev->done = !__atomic_load_n(&event_hold, __ATOMIC_RELAXED);
	return 0;
}

int cuEventElapsedTime(float *ms, void *start, void *end)
{
	struct fake_event *a = start, *b = end;

	CALL(FAKE_event_elapsed);
	if (!ms || !a || !b || !a->timed || !b->timed)
		return 400; /* CUDA_ERROR_INVALID_HANDLE */
	if (!a->done || !b->done)
		return 600; /* CUDA_ERROR_NOT_READY */
	*ms = (float)(b->at - a->at);
	return 0;
}

int cuEventQuery(void *e)
{
	CALL(FAKE_event_query);
	return !e ? 400 : ((struct fake_event *)e)->done ? 0 : 600;
}

int cuStreamWaitEvent(void *s, void *e, unsigned int flags)
{
	struct fake_event *ev = e;
	int r = 2; /* CUDA_ERROR_OUT_OF_MEMORY: the table is full */

	CALL(FAKE_stream_wait);
	if (!ev || flags)
		return 400;
	if (ev->done)
		return 0;
	pthread_mutex_lock(&join_lock);
	if (njoins < FAKE_JOINS) {
		joins[njoins++] = (struct fake_join){ s, __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED),
						      ev, ev->stream, ev->launches, ev->seq, 0 };
		r = 0;
	}
	pthread_mutex_unlock(&join_lock);
	return r;
}

/*
 * The work of @stream up to its point @at (a seq) is done: the joins it
 * waited for before, told.  join_lock held.
 */
static void joins_done(void *stream, unsigned long at)
{
	for (size_t i = 0; i < njoins; i++) {
		struct fake_join *j = &joins[i];

		if (j->told || j->stream != stream || j->seq > at)
			continue;
		j->told = 1;
		joins_done(j->ev_stream, j->ev_seq);
		if (event_sync_stream_fn)
			event_sync_stream_fn(j->ev_stream, j->ev_launches);
		if (j->ev->seq == j->ev_seq)
			j->ev->done = 1;
	}
}

int cuEventSynchronize(void *e)
{
	struct fake_event *ev = e;

	CALL(FAKE_event_sync);
	if (!ev)
		return 400;
	if (!ev->done) {
		pthread_mutex_lock(&join_lock);
		joins_done(ev->stream, ev->seq);
		pthread_mutex_unlock(&join_lock);
		if (event_sync_fn)
			event_sync_fn(ev->launches);
		if (event_sync_stream_fn)
			event_sync_stream_fn(ev->stream, ev->launches);
	}
	ev->done = 1;
	return 0;
}

int cuModuleUnload(void *module) { CALL(FAKE_unload); (void)module; return 0; }
int cuLibraryUnload(void *library) { CALL(FAKE_unload); (void)library; return 0; }

/* CUDA_ERROR_INVALID_VALUE past the last parameter, and for a handle of the other kind. */
static int param_info(const struct fake_kernel *k, int want_kernel, size_t i, size_t *off, size_t *size)
{
	CALL(FAKE_param_info);
	if (!k || k->no_layout || k->is_kernel != want_kernel || i >= (size_t)k->nparams)
		return 1;
	*off = k->off[i];
	*size = k->size[i];
	return 0;
}

int cuFuncGetParamInfo(void *f, size_t i, size_t *off, size_t *size) { return param_info(f, 0, i, off, size); }
int cuKernelGetParamInfo(void *k, size_t i, size_t *off, size_t *size) { return param_info(k, 1, i, off, size); }
int cuFuncGetName(const char **name, void *f)
{
	const struct fake_kernel *k = f;

	if (!k || k->is_kernel)
		return 1;
	*name = k->name;
	return 0;
}
int cuKernelGetName(const char **name, void *f)
{
	const struct fake_kernel *k = f;

	if (!k || !k->is_kernel)
		return 1;
	*name = k->name;
	return 0;
}
int cudaGetFuncBySymbol(void **f, const void *symbol)
{
	const struct fake_stub *st = symbol;

	if (!st || !st->kernel)
		return 98; /* cudaErrorInvalidDeviceFunction */
	*f = st->kernel;
	return 0;
}

struct proc {
	const char *name;
	int v2_from;            /* cudaVersion from which the _v2 entry is returned, 0: none */
	void *fn, *fn_v2, *fn_ptsz;
};

static const struct proc procs[] = {
	{ "cuMemAlloc", 3020, (void *)cuMemAlloc, (void *)cuMemAlloc_v2, NULL },
	{ "cuMemFree", 3020, NULL, (void *)cuMemFree_v2, NULL },
	{ "cuMemGetInfo", 3020, NULL, (void *)cuMemGetInfo_v2, NULL },
	{ "cuMemAllocPitch", 3020, NULL, (void *)cuMemAllocPitch_v2, NULL },
	{ "cuMemAllocAsync", 0, (void *)cuMemAllocAsync, NULL, (void *)cuMemAllocAsync_ptsz },
	{ "cuMemFreeAsync", 0, (void *)cuMemFreeAsync, NULL, (void *)cuMemFreeAsync_ptsz },
	{ "cuMemsetD8", 3020, NULL, (void *)cuMemsetD8_v2, (void *)cuMemsetD8_v2_ptds },
	{ "cuMemsetD16", 3020, NULL, (void *)cuMemsetD16_v2, (void *)cuMemsetD16_v2_ptds },
	{ "cuMemsetD32", 3020, NULL, (void *)cuMemsetD32_v2, (void *)cuMemsetD32_v2_ptds },
	{ "cuMemcpyAsync", 0, (void *)cuMemcpyAsync, NULL, NULL },
	{ "cuMemcpyHtoDAsync", 3020, NULL, (void *)cuMemcpyHtoDAsync_v2, NULL },
	{ "cuMemcpyDtoHAsync", 3020, NULL, (void *)cuMemcpyDtoHAsync_v2, NULL },
	{ "cuMemcpyDtoDAsync", 3020, NULL, (void *)cuMemcpyDtoDAsync_v2, NULL },
	{ "cuMemcpy2DAsync", 3020, NULL, (void *)cuMemcpy2DAsync_v2, NULL },
	{ "cuMemsetD8Async", 0, (void *)cuMemsetD8Async, NULL, (void *)cuMemsetD8Async_ptsz },
	{ "cuMemsetD16Async", 0, (void *)cuMemsetD16Async, NULL, (void *)cuMemsetD16Async_ptsz },
	{ "cuMemsetD32Async", 0, (void *)cuMemsetD32Async, NULL, (void *)cuMemsetD32Async_ptsz },
	{ "cuIpcGetMemHandle", 0, (void *)cuIpcGetMemHandle, NULL, NULL },
	{ "cuCtxGetDevice", 0, (void *)cuCtxGetDevice, NULL, NULL },
	{ "cuGetProcAddress", 12000, (void *)cuGetProcAddress, (void *)cuGetProcAddress_v2, NULL },
	{ "cuMemAllocFromPoolAsync", 0, (void *)cuMemAllocFromPoolAsync, NULL,
	  (void *)cuMemAllocFromPoolAsync_ptsz },
	{ "cuDeviceGetDefaultMemPool", 0, (void *)cuDeviceGetDefaultMemPool, NULL, NULL },
	{ "cuDeviceGetMemPool", 0, (void *)cuDeviceGetMemPool, NULL, NULL },
	{ "cuMemPoolCreate", 0, (void *)cuMemPoolCreate, NULL, NULL },
	{ "cuMemPoolDestroy", 0, (void *)cuMemPoolDestroy, NULL, NULL },
	{ "cuMemPoolTrimTo", 0, (void *)cuMemPoolTrimTo, NULL, NULL },
	{ "cuMemPoolGetAttribute", 0, (void *)cuMemPoolGetAttribute, NULL, NULL },
	{ "cuMemCreate", 0, (void *)cuMemCreate, NULL, NULL },
	{ "cuMemRelease", 0, (void *)cuMemRelease, NULL, NULL },
	{ "cuMemMap", 0, (void *)cuMemMap, NULL, NULL },
	{ "cuLaunchKernelEx", 0, (void *)cuLaunchKernelEx, NULL, (void *)cuLaunchKernelEx_ptsz },
	{ "cuLaunchKernel", 0, (void *)cuLaunchKernel, NULL, (void *)cuLaunchKernel_ptsz },
	{ "cuLaunchCooperativeKernel", 0, (void *)cuLaunchCooperativeKernel, NULL,
	  (void *)cuLaunchCooperativeKernel_ptsz },
	{ "cuModuleUnload", 0, (void *)cuModuleUnload, NULL, NULL },
	{ "cuLibraryUnload", 0, (void *)cuLibraryUnload, NULL, NULL },
	{ "cuGraphLaunch", 0, (void *)cuGraphLaunch, NULL, (void *)cuGraphLaunch_ptsz },
	{ "cuGraphInstantiateWithFlags", 0, (void *)cuGraphInstantiateWithFlags, NULL, NULL },
	{ "cuGraphInstantiateWithParams", 0, (void *)cuGraphInstantiateWithParams, NULL, NULL },
	{ "cuGraphExecDestroy", 0, (void *)cuGraphExecDestroy, NULL, NULL },
	{ "cuGraphExecUpdate", 12000, NULL, (void *)cuGraphExecUpdate_v2, NULL },
	{ "cuGraphExecKernelNodeSetParams", 12000, NULL, (void *)cuGraphExecKernelNodeSetParams_v2, NULL },
	{ "cuGraphGetNodes", 0, (void *)cuGraphGetNodes, NULL, NULL },
	{ "cuGraphNodeGetType", 0, (void *)cuGraphNodeGetType, NULL, NULL },
	{ "cuGraphKernelNodeGetParams", 12000, NULL, (void *)cuGraphKernelNodeGetParams_v2, NULL },
	{ "cuGraphChildGraphNodeGetGraph", 0, (void *)cuGraphChildGraphNodeGetGraph, NULL, NULL },
	{ "cuStreamIsCapturing", 0, (void *)cuStreamIsCapturing, NULL, NULL },
	{ "cuThreadExchangeStreamCaptureMode", 0, (void *)cuThreadExchangeStreamCaptureMode, NULL, NULL },
	{ "cuFuncGetParamInfo", 0, (void *)cuFuncGetParamInfo, NULL, NULL },
	{ "cuKernelGetParamInfo", 0, (void *)cuKernelGetParamInfo, NULL, NULL },
	{ "cuFuncGetName", 0, (void *)cuFuncGetName, NULL, NULL },
	{ "cuKernelGetName", 0, (void *)cuKernelGetName, NULL, NULL },
};

void *fake_own(const char *name)
{
	static const struct { const char *name; void *fn; } own[] = {
		{ "cuLaunchKernel", (void *)cuLaunchKernel },
		{ "cuLaunchKernel_ptsz", (void *)cuLaunchKernel_ptsz },
		{ "cuLaunchKernelEx", (void *)cuLaunchKernelEx },
		{ "cuLaunchKernelEx_ptsz", (void *)cuLaunchKernelEx_ptsz },
		{ "cuLaunchCooperativeKernel", (void *)cuLaunchCooperativeKernel },
		{ "cudaLaunchKernel", (void *)cudaLaunchKernel },
		{ "cuGraphInstantiateWithFlags", (void *)cuGraphInstantiateWithFlags },
		{ "cuGraphExecDestroy", (void *)cuGraphExecDestroy },
		{ "cuGraphExecUpdate_v2", (void *)cuGraphExecUpdate_v2 },
		{ "cuGraphExecKernelNodeSetParams_v2", (void *)cuGraphExecKernelNodeSetParams_v2 },
		{ "cuMemcpyAsync", (void *)cuMemcpyAsync },
		{ "cuMemcpyDtoHAsync_v2", (void *)cuMemcpyDtoHAsync_v2 },
	};

	for (size_t i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!strcmp(own[i].name, name))
			return own[i].fn;
	return NULL;
}

int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status)
{
	CALL(FAKE_cuGetProcAddress);
	for (size_t i = 0; i < sizeof(procs) / sizeof(procs[0]); i++) {
		const struct proc *p = &procs[i];

		if (strcmp(sym, p->name))
			continue;
		*pfn = (flags & 2) && p->fn_ptsz    ? p->fn_ptsz :
		       p->v2_from && ver >= p->v2_from ? p->fn_v2 :
						      p->fn;
		if (status)
			*status = *pfn ? 0 : 1;
		return *pfn ? 0 : 500;
	}
	*pfn = NULL;
	if (status)
		*status = 1;
	return 500;
}

int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags)
{
	return cuGetProcAddress_v2(sym, pfn, ver, flags, NULL);
}
