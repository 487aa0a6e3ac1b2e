/* SPDX-License-Identifier: MIT */
/* fakecuda.h - the test stand-in for the CUDA runtime and driver (fakecuda.c). */
#ifndef VMMX_TESTS_FAKECUDA_H
#define VMMX_TESTS_FAKECUDA_H

#include <stddef.h>
#include <stdint.h>

enum fake_call {
	FAKE_cudaMalloc, FAKE_cudaFree, FAKE_cudaMallocAsync, FAKE_cudaFreeAsync,
	FAKE_cudaMemGetInfo, FAKE_cudaMallocPitch, FAKE_cudaMalloc3D, FAKE_cudaIpcGetMemHandle,
	FAKE_cudaGetDevice, FAKE_cuMemAlloc_v1, FAKE_cuMemAlloc, FAKE_cuMemFree,
	FAKE_cuMemAllocAsync, FAKE_cuMemFreeAsync, FAKE_cuMemGetInfo, FAKE_cuMemAllocPitch,
	FAKE_cuIpcGetMemHandle, FAKE_cuCtxGetDevice, FAKE_cuGetProcAddress, FAKE_memset,
	FAKE_cuMemAllocFromPoolAsync, FAKE_cuDeviceGetDefaultMemPool, FAKE_cuMemPoolCreate,
	FAKE_cuMemPoolDestroy, FAKE_cuMemPoolTrimTo, FAKE_cuMemPoolGetAttribute, FAKE_cuMemCreate,
	FAKE_cuMemRelease, FAKE_cuMemMap, FAKE_cuLaunchKernelEx, FAKE_launch, FAKE_param_info, FAKE_unload,
	FAKE_event_record, FAKE_event_query, FAKE_event_sync, FAKE_event_elapsed, FAKE_stream_wait,
	FAKE_graph_get_nodes, FAKE_graph_instantiate, FAKE_graph_exec_destroy, FAKE_copy,
	FAKE_NCALLS
};

/* One memset that reached the fake (FAKE_memset counts them all). */
struct fake_set {
	const char *call;       /* the entry point's name */
	void *ptr;
	unsigned int value;
	unsigned int elem;      /* 1, 2 or 4 bytes */
	size_t count;           /* elements */
	void *stream;           /* NULL for the synchronous calls */
};

/*
 * What a memset does: the test's function (the driver's checks, then the
 * write) answers with a CUDA code; without one, memsets succeed and write
 * nothing.  fake_set_log() gives the last FAKE_SET_LOG memsets, oldest first.
 */
#define FAKE_SET_LOG 1024
void fake_set_impl(int (*fn)(const struct fake_set *));
size_t fake_set_log(const struct fake_set **log);
void fake_set_log_clear(void);

/*
 * One copy that reached the fake (FAKE_copy counts them all): its ends as
 * addresses, its bytes (a 2D copy: width x height) and stream (NULL for the
 * synchronous calls).  The fake copies nothing.  fake_copy_log() gives the
 * last FAKE_COPY_LOG, oldest first.
 */
struct fake_copy {
	const char *call;
	uintptr_t dst, src;
	size_t n;
	void *stream;
};

#define FAKE_COPY_LOG 1024
size_t fake_copy_log(const struct fake_copy **log);

/* CUDA_MEMCPY2D */
struct fake_memcpy2d {
	size_t src_x, src_y;
	int src_type;
	const void *src_host;
	unsigned long long src_device;
	void *src_array;
	size_t src_pitch;
	size_t dst_x, dst_y;
	int dst_type;
	void *dst_host;
	unsigned long long dst_device;
	void *dst_array;
	size_t dst_pitch;
	size_t width, height;
};

int cudaMemcpy(void *dst, const void *src, size_t n, int kind);
int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *s);
int cuMemcpyAsync(unsigned long long dst, unsigned long long src, size_t n, void *s);
int cuMemcpyHtoDAsync_v2(unsigned long long dst, const void *src, size_t n, void *s);
int cuMemcpyDtoHAsync_v2(void *dst, unsigned long long src, size_t n, void *s);
int cuMemcpyDtoDAsync_v2(unsigned long long dst, unsigned long long src, size_t n, void *s);
int cuMemcpy2DAsync_v2(const struct fake_memcpy2d *p, void *s);

struct fake_extent {
	size_t width, height, depth;
};

struct fake_pitched {
	void *ptr;
	size_t pitch, xsize, ysize;
};

unsigned long fake_calls(enum fake_call c);
int fake_is_real(const void *p);
void *fake_real_alloc(void);

int cudaGetDevice(int *d);
int cudaSetDevice(int d);
int cuCtxGetDevice(int *d);
int cudaMalloc(void **p, size_t n);
int cudaFree(void *p);
int cudaMallocAsync(void **p, size_t n, void *s);
int cudaFreeAsync(void *p, void *s);
int cudaMallocAsync_ptsz(void **p, size_t n, void *s);
int cudaFreeAsync_ptsz(void *p, void *s);
int cudaMemGetInfo(size_t *f, size_t *t);
int cudaMallocPitch(void **p, size_t *pitch, size_t w, size_t h);
int cudaMalloc3D(void *pp, struct fake_extent e);
int cudaIpcGetMemHandle(void *h, void *p);
int cuMemAlloc(unsigned int *p, unsigned int n);
int cuMemAlloc_v2(unsigned long long *p, size_t n);
int cuMemFree_v2(unsigned long long p);
int cuMemAllocAsync(unsigned long long *p, size_t n, void *s);
int cuMemFreeAsync(unsigned long long p, void *s);
int cuMemAllocAsync_ptsz(unsigned long long *p, size_t n, void *s);
int cuMemFreeAsync_ptsz(unsigned long long p, void *s);
int cuMemGetInfo_v2(size_t *f, size_t *t);
int cuMemAllocPitch_v2(unsigned long long *p, size_t *pitch, size_t w, size_t h, unsigned int e);
int cuIpcGetMemHandle(void *h, unsigned long long p);
int cudaMemset(void *p, int v, size_t n);
int cudaMemset_ptds(void *p, int v, size_t n);
int cudaMemsetAsync(void *p, int v, size_t n, void *s);
int cudaMemsetAsync_ptsz(void *p, int v, size_t n, void *s);
int cuMemsetD8_v2(unsigned long long p, unsigned char v, size_t n);
int cuMemsetD16_v2(unsigned long long p, unsigned short v, size_t n);
int cuMemsetD32_v2(unsigned long long p, unsigned int v, size_t n);
int cuMemsetD8_v2_ptds(unsigned long long p, unsigned char v, size_t n);
int cuMemsetD16_v2_ptds(unsigned long long p, unsigned short v, size_t n);
int cuMemsetD32_v2_ptds(unsigned long long p, unsigned int v, size_t n);
int cuMemsetD8Async(unsigned long long p, unsigned char v, size_t n, void *s);
int cuMemsetD16Async(unsigned long long p, unsigned short v, size_t n, void *s);
int cuMemsetD32Async(unsigned long long p, unsigned int v, size_t n, void *s);
int cuMemsetD8Async_ptsz(unsigned long long p, unsigned char v, size_t n, void *s);
int cuMemsetD16Async_ptsz(unsigned long long p, unsigned short v, size_t n, void *s);
int cuMemsetD32Async_ptsz(unsigned long long p, unsigned int v, size_t n, void *s);
/*
 * Stream-ordered pools: device d's default pool is FAKE_DEFAULT_POOL(d); a
 * pool made with cuMemPoolCreate is FAKE_OWN_POOL; its allocations come from
 * the arena.  The usage attributes of every pool are 0.
 */
#define FAKE_DEFAULT_POOL(d) ((void *)(uintptr_t)(0xd00 + (d)))
#define FAKE_OWN_POOL ((void *)(uintptr_t)0xe00)
int cuMemAllocFromPoolAsync(unsigned long long *p, size_t n, void *pool, void *s);
int cuMemAllocFromPoolAsync_ptsz(unsigned long long *p, size_t n, void *pool, void *s);
int cuDeviceGetDefaultMemPool(void **pool, int dev);
int cuDeviceGetMemPool(void **pool, int dev);
int cuMemPoolCreate(void **pool, const void *props);
int cuMemPoolDestroy(void *pool);
int cuMemPoolTrimTo(void *pool, size_t keep);
int cuMemPoolGetAttribute(void *pool, int attr, void *value);
/* The program's own VMM: handles are counted, nothing is mapped. */
int cuMemCreate(unsigned long long *h, size_t n, const void *prop, unsigned long long flags);
int cuMemRelease(unsigned long long h);
int cuMemMap(unsigned long long p, size_t n, size_t off, unsigned long long h, unsigned long long flags);
/*
 * Kernels: a CUfunction (or a CUkernel) of the fake is a pointer to a
 * struct fake_kernel, whose parameter layout cuFuncGetParamInfo (or, for a
 * CUkernel, cuKernelGetParamInfo) gives; a runtime host stub is a struct
 * fake_stub, which cudaGetFuncBySymbol turns into its kernel.  Every launch
 * is logged (the last FAKE_LAUNCH_LOG, oldest first) with what it was given.
 */
#define FAKE_MAX_PARAMS 16
struct fake_kernel {
	const char *name;
	int is_kernel;          /* a CUkernel: cuFuncGetParamInfo refuses it */
	int no_layout;          /* neither call answers (a driver before 12.4) */
	int nparams;
	size_t off[FAKE_MAX_PARAMS], size[FAKE_MAX_PARAMS];
};

struct fake_stub {
	struct fake_kernel *kernel; /* NULL: cudaGetFuncBySymbol fails */
};

struct fake_launch {
	const char *call;       /* the entry point's name */
	const void *f;          /* the function, kernel or stub given */
	void *stream;
	void **params;
	void **extra;
};

#define FAKE_LAUNCH_LOG 256
size_t fake_launch_log(const struct fake_launch **log);
void fake_launch_log_clear(void);
/*
 * @fn, when set, looks at every launch as it reaches the fake driver (its
 * function and parameters) and returns nonzero for one that is wrong
 * there (a buffer not on the device, say); fake_launch_bad() counts them.
 */
void fake_launch_check(int (*fn)(const void *f, void **params));
unsigned long fake_launch_bad(void);
/*
 * @fn, when set, looks at each range a copy or memset reaching the fake
 * driver reads or writes (each side of a copy apart) and returns nonzero
 * for one that is wrong there; fake_use_bad() counts them.
 */
void fake_use_check(int (*fn)(uintptr_t p, size_t n));
unsigned long fake_use_bad(void);
/* The fake's own address of a launch or copy entry point @name, or NULL. */
void *fake_own(const char *name);

struct fake_dim3 {
	unsigned int x, y, z;
};

/* CUlaunchConfig and cudaLaunchConfig_t, as cuda.h and driver_types.h lay them out */
struct fake_cu_config {
	unsigned int grid[3], block[3], shared;
	void *stream;
	void *attrs;
	unsigned int nattrs;
};

struct fake_rt_config {
	struct fake_dim3 grid, block;
	size_t shared;
	void *stream;
	void *attrs;
	unsigned int nattrs;
};

int cuLaunchKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
		   unsigned int by, unsigned int bz, unsigned int shared, void *s, void **params,
		   void **extra);
int cuLaunchKernel_ptsz(void *f, unsigned int gx, unsigned int gy, unsigned int gz,
			unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared,
			void *s, void **params, void **extra);
int cuLaunchKernelEx(const void *config, void *f, void **params, void **extra);
int cuLaunchKernelEx_ptsz(const void *config, void *f, void **params, void **extra);
int cuLaunchCooperativeKernel(void *f, unsigned int gx, unsigned int gy, unsigned int gz,
			      unsigned int bx, unsigned int by, unsigned int bz,
			      unsigned int shared, void *s, void **params);
int cuLaunchCooperativeKernel_ptsz(void *f, unsigned int gx, unsigned int gy, unsigned int gz,
				   unsigned int bx, unsigned int by, unsigned int bz,
				   unsigned int shared, void *s, void **params);
int cudaLaunchKernel(const void *func, struct fake_dim3 grid, struct fake_dim3 block,
		     void **args, size_t shared, void *s);
int cudaLaunchKernel_ptsz(const void *func, struct fake_dim3 grid, struct fake_dim3 block,
			  void **args, size_t shared, void *s);
int cudaLaunchKernelExC(const void *config, const void *func, void **args);
int cudaLaunchKernelExC_ptsz(const void *config, const void *func, void **args);
/* Graph launches: logged with the executable graph as the function, no parameters. */
int cuGraphLaunch(void *exec, void *s);
int cuGraphLaunch_ptsz(void *exec, void *s);
int cudaGraphLaunch(void *exec, void *s);
int cudaGraphLaunch_ptsz(void *exec, void *s);
/*
 * Events (cuEventCreate, cuEventRecord, cuEventQuery, cuEventSynchronize):
 * complete once recorded, unless fake_event_hold(1): then not ready until
 * synchronised, which first calls the function given to
 * fake_event_sync_impl() with the work seen when the event was recorded
 * (launches, copies and memsets), and the one given to
 * fake_event_sync_stream_impl() with that and the event's stream.
 * cuStreamWaitEvent (FAKE_stream_wait) on an event not complete keeps a
 * join (at most FAKE_JOINS; past them it fails): an event recorded on the
 * waiting stream after it, when synchronised, first has the stream
 * function told of the joined event (and of that one's joins, in turn),
 * which is then complete.
 */
#define FAKE_JOINS 1024
/*
 * Timing: an event made without CU_EVENT_DISABLE_TIMING (0x2) keeps the
 * time @now() gives when it is recorded, and cuEventElapsedTime() gives the
 * difference in milliseconds (CUDA_ERROR_NOT_READY while either is not
 * complete, CUDA_ERROR_INVALID_HANDLE for one made without timing).  Until
 * a clock is given, such an event cannot be made (CUDA_ERROR_INVALID_VALUE):
 * the fake has no timing by default.
 */
void fake_event_clock_impl(double (*now)(void));
void fake_event_hold(int on);
/* While on, cuEventRecord fails (CUDA_ERROR_INVALID_HANDLE). */
void fake_event_fail(int on);
void fake_event_sync_impl(void (*fn)(unsigned long launches));
void fake_event_sync_stream_impl(void (*fn)(void *stream, unsigned long work));
int cuEventCreate(void **e, unsigned int flags);
int cuEventRecord(void *e, void *s);
int cuEventQuery(void *e);
int cuEventSynchronize(void *e);
int cuEventElapsedTime(float *ms, void *start, void *end);
int cuStreamWaitEvent(void *s, void *e, unsigned int flags);
/*
 * Graphs: a CUgraph of the fake is a struct fake_graph the test fills
 * (fake_graph_kernel() copies each parameter's bytes, as the driver does
 * when a kernel node is added), a CUgraphNode a struct fake_node, a
 * CUgraphExec a slot of FAKE_EXECS (the lowest free one: a destroyed
 * handle is the next one made).  The runtime's instantiate and destroy
 * reach the driver's through dlsym(RTLD_DEFAULT), as a runtime's reach the
 * driver by lookup.  fake_graph_fail(1): cuGraphGetNodes refuses
 * (CUDA_ERROR_INVALID_VALUE).
 */
#define FAKE_GRAPH_NODES 8
#define FAKE_PARAM_BYTES 32
#define FAKE_EXECS 8
struct fake_graph;
struct fake_node {
	int type;                       /* CUgraphNodeType: 0 kernel, 1 memcpy, 2 memset, 4 child */
	struct fake_kernel *k;
	unsigned char arg[FAKE_MAX_PARAMS][FAKE_PARAM_BYTES];
	void *argp[FAKE_MAX_PARAMS];
	struct fake_graph *child;
};

struct fake_graph {
	int n;
	struct fake_node node[FAKE_GRAPH_NODES];
};

/* CUDA_KERNEL_NODE_PARAMS_v2 */
struct fake_kernel_node_params {
	void *func;
	unsigned int grid[3], block[3], shared;
	void **params;
	void **extra;
	void *kern;
	void *ctx;
};

struct fake_node *fake_graph_kernel(struct fake_graph *g, struct fake_kernel *k, void **params);
struct fake_node *fake_graph_node(struct fake_graph *g, int type, struct fake_graph *child);
void fake_graph_fail(int on);
/* While on, cuStreamIsCapturing says every stream is capturing (CU_STREAM_CAPTURE_STATUS_ACTIVE). */
void fake_capture(int on);
int cuStreamIsCapturing(void *s, int *status);
/* The thread's capture mode, as the driver's (0 global, 1 thread-local, 2 relaxed). */
int cuThreadExchangeStreamCaptureMode(int *mode);
/* The graph an executable graph of the fake was made from, NULL when destroyed. */
struct fake_graph *fake_exec_graph(void *exec);
int cuGraphGetNodes(void *g, void **nodes, size_t *n);
int cuGraphNodeGetType(void *node, int *type);
int cuGraphKernelNodeGetParams_v2(void *node, struct fake_kernel_node_params *p);
int cuGraphChildGraphNodeGetGraph(void *node, void **g);
int cuGraphInstantiateWithFlags(void **exec, void *g, unsigned long long flags);
int cuGraphInstantiateWithParams(void **exec, void *g, void *params);
int cuGraphExecDestroy(void *exec);
int cuGraphExecUpdate_v2(void *exec, void *g, void *info);
int cuGraphExecKernelNodeSetParams_v2(void *exec, void *node, const void *params);
int cudaGraphInstantiate(void **exec, void *g, unsigned long long flags);
int cudaGraphInstantiateWithFlags(void **exec, void *g, unsigned long long flags);
int cudaGraphExecDestroy(void *exec);
int cuModuleUnload(void *module);
int cuLibraryUnload(void *library);
int cuFuncGetParamInfo(void *f, size_t i, size_t *off, size_t *size);
int cuKernelGetParamInfo(void *k, size_t i, size_t *off, size_t *size);
int cuFuncGetName(const char **name, void *f);
int cuKernelGetName(const char **name, void *k);
int cudaGetFuncBySymbol(void **f, const void *symbol);
int cuGetProcAddress(const char *sym, void **pfn, int ver, unsigned long long flags);
int cuGetProcAddress_v2(const char *sym, void **pfn, int ver, unsigned long long flags, int *status);

#endif
