// SPDX-License-Identifier: MIT
/*
 * launchclient.c - kernel launches through vmmx-run on the sim backend,
 * over the fake driver and runtime (fakecuda.c), run by launches.sh.
 *
 * Two 128 MiB allocations fill the 256 MiB device limit (device-first, no
 * headroom); a third lies in host memory, in 64 MiB chunks.  Then nine
 * launches, one through each entry point (and _ptsz form), with pointers
 * passed plainly, interior pointers, pointers inside a by-value struct, a
 * packed "extra" buffer, a kernel handed as a CUkernel, a kernel whose
 * layout the driver does not give, an address libvmmx does not map, and
 * two graph launches.
 * This program checks that every launch reaches the fake driver unchanged
 * (function, stream, parameter array); launches.sh checks what the
 * interposer counted (--report) and recorded (--trace).
 *
 * Mode "cycle": a step of three launches repeated, then in another order.
 * Mode "cycle-rotate": a chain of layers whose activations rotate among
 * three buffers, so that some kernels name other memory at every step.
 * Mode "place-act": the same with an activation named every other launch;
 * "place-burst", named in bursts.
 * Mode "place-churn": a training step's activations and gradients
 * allocated and freed stream-ordered among the launches, the movers
 * moving.  "place-far": weights 41 launches apart, brought in as the one
 * before each is launched under VMMX_RUN_PLACE_SPREAD's look.
 * "place-idle": a segment too large to move that no launch names is sent
 * back, mapped, a cycle after its allocation; "place-idle-named": named
 * once, it goes back two whole cycles later; "place-idle-used": named
 * every step, it stays; "place-idle-pair": named only by words that read as two
 * integers, it goes; "place-idle-unsure": named only by words that may be
 * no pointer (an odd address, a low half under 1 MiB), it goes.  "place-pair": such a word names a spilled buffer
 * without bringing it in (each placed across a 4 GiB boundary through a
 * hole made in the address space: malloc_across_4g()).
 * Mode "place-jitter": a step whose workspace moves and whose first steps
 * have extra launches; the cycle is learned all the same.  "place-once":
 * weights read once, read in place.  "place-wait": moves wait for the
 * last use of what moves (the fake's events held until waited for);
 * "place-copy": copies and memsets between the kernels are last uses too;
 * "place-grant": a copy between pageable or host memory and a segment sent
 * back (granted to the GPU only) has the CPU granted it first;
 * "place-streams" and "place-streams2": each weight used on three streams
 * or two, each stream's work done in its own order only.
 * "place-noevent": "place" with every event record failing.
 * Mode "unload": a function's layout asked again after cuModuleUnload.
 * Mode "place-model", "place-decode", "place-model-late": a model loaded
 * as transformers does (see place_model()); "torture-model", its steps
 * under injected driver failures.  "place-plan": victims that cannot make
 * the room needed are not sent back.  "place-pieces": a buffer that moves
 * a chunk at a time, and the victims a kernel named inside it allows.
 * Mode "place": --placement launch over six buffers, four of which fit;
 * "torture", the same under an injected driver failure (VMMX_FAULT).
 * Mode "threads": 4 threads launch 32 kernels new to the layout cache at
 * once, 2000 launches each.  Mode "bench N" (not a test): nanoseconds per
 * launch, to compare with and without vmmx-run --launches.
 *
 * Mode "lookups": the launch entry points found through cuGetProcAddress and
 * dlsym are the interposer's when launches are watched (VMMX_RUN_LAUNCHES
 * set) and the driver's own when not.
 */
#include "config.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "tests/preload/fakecuda.h"
#include "tests/tap/basic.h"
#include "vmmx.h"

#define MiB ((size_t)1 << 20)
#define STREAM ((void *)0x5eed)

static struct vmmx_ctx *ctx_of(int dev)
{
	struct vmmx_alloc *a;

	return vmmx_alloc_global(dev, &a) ? NULL : vmmx_alloc_ctx(a);
}

/*
 * VMMX_RUN_PLACE_PARK=1: a segment sent back may be parked, its addresses
 * unmapped, and a GPU that reached one would fault.  So every launch, copy
 * and memset is looked at in the fake driver, as the GPU would run it:
 * each libvmmx address it names must be mapped and granted there (a
 * device checksum of a word at it, which the sim takes only through such
 * mappings).  done() and the tortures count the misses.
 */
static int (*scenario_check)(const void *f, void **params);

static int park_on(void)
{
	const char *s = getenv("VMMX_RUN_PLACE_PARK");

	return s && !strcmp(s, "1");
}

/* Whether @p, if libvmmx memory, is unreachable by a kernel now. */
static int unmapped(uintptr_t p)
{
	struct vmmx_chunk_info ci;
	uint64_t sum;

	if (vmmx_lookup(ctx_of(0), (const void *)p, &ci))
		return 0;
	/* Tried twice: the torture's fault may fail one checksum. */
	return vmmx_checksum(ctx_of(0), (const void *)(p & ~(uintptr_t)7), 8, &sum) != 0 &&
	       vmmx_checksum(ctx_of(0), (const void *)(p & ~(uintptr_t)7), 8, &sum) != 0;
}

static int use_unmapped(uintptr_t p, size_t n)
{
	return n && unmapped(p);
}

/* Every 8-byte parameter of a launch of @f, a struct fake_kernel, that is libvmmx memory. */
static int launch_unmapped(const void *f, void **params)
{
	const struct fake_kernel *k = f;
	int bad = 0;

	for (int i = 0; k && i < k->nparams && i < FAKE_MAX_PARAMS; i++) {
		uintptr_t p;

		if (k->size[i] != sizeof(p))
			continue;
		memcpy(&p, params[i], sizeof(p));
		bad |= unmapped(p);
	}
	return bad;
}

static unsigned long park_misses;

static int launch_checks(const void *f, void **params)
{
	int bad = 0;

	if (park_on() && launch_unmapped(f, params)) {
		__atomic_fetch_add(&park_misses, 1, __ATOMIC_RELAXED);
		bad = 1;
	}
	return (scenario_check && scenario_check(f, params)) || bad;
}

/* fake_launch_check(@fn) for a scenario, beside the park check. */
static void set_check(int (*fn)(const void *f, void **params))
{
	scenario_check = fn;
	fake_launch_check(fn || park_on() ? launch_checks : NULL);
}

/* Launches, copies and memsets that met parked memory in the fake driver. */
static unsigned long parked_met(void)
{
	return __atomic_load_n(&park_misses, __ATOMIC_RELAXED) + fake_use_bad();
}

/* tap_done(), with the park check's count asserted under VMMX_RUN_PLACE_PARK=1. */
static int finish_tap(void)
{
	if (park_on())
		is_int(0, (int)parked_met(),
		       "VMMX_RUN_PLACE_PARK=1: every launch, copy and memset found the memory it names mapped at the driver");
	return tap_done();
}


static enum vmmx_loc_kind where(const void *p)
{
	struct vmmx_chunk_info ci;

	return vmmx_lookup(ctx_of(0), p, &ci) ? VMMX_LOC_NONE : ci.loc.kind;
}

/* The last launch the fake driver saw was @call of @f on @stream with @params and @extra. */
static void reached(const char *call, const void *f, void *stream, void **params, void **extra)
{
	const struct fake_launch *log;
	size_t n = fake_launch_log(&log);

	if (!n) {
		ok(0, "%s reaches the driver", call);
		return;
	}
	ok(!strcmp(log[n - 1].call, call) && log[n - 1].f == f && log[n - 1].stream == stream &&
		   log[n - 1].params == params && log[n - 1].extra == extra,
	   "%s reaches the driver's %s with its function, stream and parameters unchanged", call,
	   log[n - 1].call);
}

/* K1(float *a, int n, float *b) */
static struct fake_kernel k1 = { "k1_two_pointers", 0, 0, 3, { 0, 8, 16 }, { 8, 4, 8 } };

/* K2(struct { int n; int pad; float *p; float *q; } s, float f) */
struct k2_arg {
	int n, pad;
	void *p, *q;
};

static struct fake_kernel k2 = { "k2_struct", 0, 0, 2, { 0, 24 }, { 24, 4 } };
/* K3(float *a) */
static struct fake_kernel k3 = { "k3_one_pointer", 0, 0, 1, { 0 }, { 8 } };
/* K4(float *a), a CUkernel */
static struct fake_kernel k4 = { "k4_cukernel", 1, 0, 1, { 0 }, { 8 } };
/* K5(float *a), on a driver that gives no layout */
static struct fake_kernel k5 = { "k5_no_layout", 0, 1, 1, { 0 }, { 8 } };
static struct fake_stub stub1 = { &k1 };
static struct fake_stub stub4 = { &k4 };

static int launches(void)
{
	void *a = NULL, *a2 = NULL, *b = NULL, *ai, *bi, *bfar, *foreign;
	int n = 7;
	float f = 1.5f;
	struct fake_dim3 one = { 1, 1, 1 };

	plan_lazy();
	is_int(0, cudaMalloc(&a, 128 * MiB), "cudaMalloc a, 128 MiB");
	is_int(0, cudaMalloc(&a2, 128 * MiB), "cudaMalloc a2, 128 MiB (the device limit reached)");
	is_int(0, cudaMalloc(&b, 128 * MiB), "cudaMalloc b, 128 MiB (past the limit)");
	ok(where(a) == VMMX_LOC_DEVICE && where(b) == VMMX_LOC_HOST,
	   "a lies on the device, b in host memory");
	ai = (char *)a + 4096 + 3;
	bi = (char *)b + 12345;
	bfar = (char *)b + 100 * MiB;
	foreign = fake_real_alloc();

	/* 1: two plain pointers, one spilled (named 2, host 1) */
	{
		void *params[] = { &a, &n, &b };

		is_int(0, cuLaunchKernel(&k1, 1, 1, 1, 32, 1, 1, 0, STREAM, params, NULL),
		       "cuLaunchKernel(k1, a, n, b)");
		reached("cuLaunchKernel", &k1, STREAM, params, NULL);
	}
	/* 2: interior pointers into a and into b's second chunk, per-thread stream (2, 1) */
	{
		void *params[] = { &ai, &n, &bfar };

		is_int(0, cuLaunchKernel_ptsz(&k1, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL),
		       "cuLaunchKernel_ptsz(k1, a + 4099, n, b + 100 MiB)");
		reached("cuLaunchKernel_ptsz", &k1, NULL, params, NULL);
	}
	/* 3: pointers inside a by-value struct (2, 1); 48 KiB of dynamic shared memory */
	{
		struct k2_arg s = { 3, 0, (char *)a + 8, bi };
		void *params[] = { &s, &f };
		struct fake_cu_config cfg = { { 1, 1, 1 }, { 32, 1, 1 }, 48 << 10, STREAM, NULL, 0 };

		is_int(0, cuLaunchKernelEx(&cfg, &k2, params, NULL),
		       "cuLaunchKernelEx(k2, { n, a + 8, b + 12345 }, f)");
		reached("cuLaunchKernelEx", &k2, STREAM, params, NULL);
	}
	/* 4: cooperative, one device pointer (1, 0); 1 KiB of dynamic shared memory */
	{
		void *params[] = { &a2 };

		is_int(0, cuLaunchCooperativeKernel(&k3, 1, 1, 1, 32, 1, 1, 1024, STREAM, params),
		       "cuLaunchCooperativeKernel(k3, a2)");
		reached("cuLaunchCooperativeKernel", &k3, STREAM, params, NULL);
	}
	/* 5: a packed buffer through extra (2, 1) */
	{
		struct {
			void *a;
			int n, pad;
			void *b;
		} buf = { a, 7, 0, b };
		size_t len = sizeof(buf);
		void *extra[] = { (void *)1, &buf, (void *)2, &len, (void *)0 };

		is_int(0, cuLaunchKernel(&k1, 1, 1, 1, 32, 1, 1, 0, STREAM, NULL, extra),
		       "cuLaunchKernel(k1) with the parameters packed in extra");
		reached("cuLaunchKernel", &k1, STREAM, NULL, extra);
	}
	/* 6: the runtime, a stub; the same chunk named three times counts once (1, 0) */
	{
		void *a8 = (char *)a + 8;
		void *params[] = { &a, &n, &a8 };

		is_int(0, cudaLaunchKernel(&stub1, one, one, params, 0, STREAM),
		       "cudaLaunchKernel(stub of k1, a, n, a + 8)");
		reached("cudaLaunchKernel", &stub1, STREAM, params, NULL);
	}
	/* 7: the runtime's Ex form with a CUkernel: cuKernelGetParamInfo gives the layout (1, 1) */
	{
		void *params[] = { &bi };
		struct fake_rt_config cfg = { one, one, 64 << 10, STREAM, NULL, 0 };

		is_int(0, cudaLaunchKernelExC_ptsz(&cfg, &stub4, params),
		       "cudaLaunchKernelExC_ptsz(stub of the CUkernel k4, b + 12345)");
		reached("cudaLaunchKernelExC_ptsz", &stub4, STREAM, params, NULL);
	}
	/* 8: no layout from the driver: passed on unread (0, 0) */
	{
		void *params[] = { &b };

		is_int(0, cuLaunchKernel(&k5, 1, 1, 1, 32, 1, 1, 0, STREAM, params, NULL),
		       "cuLaunchKernel(k5, whose layout the driver does not give)");
		reached("cuLaunchKernel", &k5, STREAM, params, NULL);
	}
	/* 9: memory libvmmx does not map, and a small integer (0, 0) */
	{
		unsigned long long small = 7;
		void *params[] = { &foreign };
		void *params2[] = { &small, &n, &small };

		is_int(0, cuLaunchKernel(&k3, 1, 1, 1, 32, 1, 1, 0, STREAM, params, NULL),
		       "cuLaunchKernel(k3, an address of the driver's own)");
		reached("cuLaunchKernel", &k3, STREAM, params, NULL);
		is_int(0, cuLaunchKernel_ptsz(&k1, 1, 1, 1, 32, 1, 1, 0, STREAM, params2, NULL),
		       "cuLaunchKernel_ptsz(k1, 7, n, 7): no pointer at all");
	}
	/* 10: graph launches: passed on, counted, not read */
	{
		static int exec;

		is_int(0, cuGraphLaunch(&exec, STREAM), "cuGraphLaunch");
		reached("cuGraphLaunch", &exec, STREAM, NULL, NULL);
		is_int(0, cudaGraphLaunch_ptsz(&exec, STREAM), "cudaGraphLaunch_ptsz");
		reached("cudaGraphLaunch_ptsz", &exec, STREAM, NULL, NULL);
	}
	/* A launch's error is the driver's own. */
	is_int(1, cuLaunchKernel(NULL, 1, 1, 1, 32, 1, 1, 0, STREAM, NULL, NULL),
	       "cuLaunchKernel(NULL): the driver's error comes back");
	cudaFree(a);
	cudaFree(a2);
	cudaFree(b);
	return finish_tap();
}

/* A step of three launches, three times; then the order changes (B and C swap), three times. */
static int cycle(void)
{
	static struct fake_kernel ka = { "ka", 0, 0, 1, { 0 }, { 8 } }, kb = { "kb", 0, 0, 1, { 0 }, { 8 } },
				  kc = { "kc", 0, 0, 1, { 0 }, { 8 } };
	void *a = NULL, *a2 = NULL, *b = NULL;
	void *pa[] = { &a }, *pb[] = { &b }, *pc[] = { &a2 };
	struct fake_kernel *k[2][3] = { { &ka, &kb, &kc }, { &ka, &kc, &kb } };
	void **p[2][3] = { { pa, pb, pc }, { pa, pc, pb } };
	int bad = 0;

	plan_lazy();
	is_int(0, cudaMalloc(&a, 128 * MiB), "cudaMalloc a");
	is_int(0, cudaMalloc(&a2, 128 * MiB), "cudaMalloc a2");
	is_int(0, cudaMalloc(&b, 128 * MiB), "cudaMalloc b");
	for (int order = 0; order < 2; order++)
		for (int step = 0; step < 3; step++)
			for (int i = 0; i < 3; i++)
				bad += cuLaunchKernel(k[order][i], 1, 1, 1, 32, 1, 1, 0, NULL,
						      p[order][i], NULL) != 0;
	is_int(0, bad, "18 launches: 3 steps of (ka, kb, kc), then 3 of (ka, kc, kb)");
	cudaFree(a);
	cudaFree(a2);
	cudaFree(b);
	return finish_tap();
}

/*
 * A GEMM's largest segment is shared: each launch of kg names its layer's
 * weight (16 MiB, one of 6), one shared 64 MiB segment (a workspace, a
 * pool segment) and two activations, which alternate; a ReLU (kr) names
 * one activation.  The step is 12 launches; keyed by its largest segment,
 * every GEMM would look alike and a cycle of 2 be learned.  launches.sh
 * reads the report.  @m: the GEMMs name the shared segment at @m places in
 * turn, 8 MiB apart (a workspace carved out of a pool segment at another
 * offset from one launch to the next).
 */
static int cycle_shared(int m)
{
	static struct fake_kernel kg = { "kg", 0, 0, 4, { 0, 8, 16, 24 }, { 8, 8, 8, 8 } },
				  kr = { "kr", 0, 0, 1, { 0 }, { 8 } };
	void *w[6] = { 0 }, *shared = NULL, *act[2] = { 0 };
	int bad = 0;

	plan_lazy();
	for (int i = 0; i < 6; i++)
		bad += cudaMalloc(&w[i], 16 * MiB) != 0;
	bad += cudaMalloc(&shared, 64 * MiB) != 0;
	bad += cudaMalloc(&act[0], 12 * MiB) != 0;
	bad += cudaMalloc(&act[1], 12 * MiB) != 0;
	is_int(0, bad, "6 weights, a shared segment larger than each, 2 activations");
	for (int step = 0; step < 4; step++)
		for (int i = 0; i < 6; i++) {
			void *ws = (char *)shared + (size_t)((step * 6 + i) % m) * 8 * MiB;
			void *pg[] = { &w[i], &ws, &act[i % 2], &act[(i + 1) % 2] };
			void *pr[] = { &act[(i + 1) % 2] };

			bad += cuLaunchKernel(&kg, 1, 1, 1, 32, 1, 1, 0, NULL, pg, NULL) != 0;
			bad += cuLaunchKernel(&kr, 1, 1, 1, 32, 1, 1, 0, NULL, pr, NULL) != 0;
		}
	is_int(0, bad, "48 launches: 4 steps of 6 (GEMM, ReLU) pairs");
	for (int i = 0; i < 6; i++)
		cudaFree(w[i]);
	cudaFree(shared);
	cudaFree(act[0]);
	cudaFree(act[1]);
	return finish_tap();
}

/*
 * A chain of ROT_LAYERS layers, each a GEMM on its own 12 MiB weights and
 * two 10 MiB activations (in, out) then a ReLU on (out, next): a step of
 * 2 * ROT_LAYERS launches, ROT_STEPS times.  The three activation buffers
 * take their roles in turn, the turn passing on every ROT_EVERY layers
 * counted across steps, as a caching allocator hands its free blocks out
 * again in another order: ROT_LAYERS not being a multiple of ROT_EVERY,
 * the ReLU of some layers (two a step here) names at the next step neither
 * buffer it named before, and every ReLU's largest segment (the first of
 * its two equal ones) comes round after a few launches, inside a step.
 * launches.sh reads the cycle learned from the report: 2 * ROT_LAYERS.
 */
#define ROT_LAYERS 11
#define ROT_EVERY 6
#define ROT_STEPS 6

static int cycle_rotate(void)
{
	static struct fake_kernel kgemm = { "gemm", 0, 0, 3, { 0, 8, 16 }, { 8, 8, 8 } },
				  krelu = { "relu", 0, 0, 2, { 0, 8 }, { 8, 8 } };
	void *w[ROT_LAYERS] = { 0 }, *act[3] = { 0 };
	int bad = 0;

	plan_lazy();
	for (int i = 0; i < ROT_LAYERS; i++)
		bad += cudaMalloc(&w[i], 12 * MiB) != 0;
	for (int i = 0; i < 3; i++)
		bad += cudaMalloc(&act[i], 10 * MiB) != 0;
	is_int(0, bad, "cudaMalloc %d weights of 12 MiB and 3 activations of 10 MiB", ROT_LAYERS);
	for (int step = 0; step < ROT_STEPS; step++)
		for (int i = 0; i < ROT_LAYERS; i++) {
			int r = (step * ROT_LAYERS + i) / ROT_EVERY % 3;
			void *in = act[r], *out = act[(r + 1) % 3], *next = act[(r + 2) % 3];
			void *pg[] = { &w[i], &in, &out }, *pr[] = { &out, &next };

			bad += cuLaunchKernel(&kgemm, 1, 1, 1, 32, 1, 1, 0, NULL, pg, NULL) != 0;
			/* A GEMM's time: the mover's chance to bring the next weights in ahead. */
			usleep(2000);
			bad += cuLaunchKernel(&krelu, 1, 1, 1, 32, 1, 1, 0, NULL, pr, NULL) != 0;
		}
	is_int(0, bad, "%d steps of %d launches (gemm, relu per layer) succeed", ROT_STEPS,
	       2 * ROT_LAYERS);
	for (int i = 0; i < ROT_LAYERS; i++)
		cudaFree(w[i]);
	for (int i = 0; i < 3; i++)
		cudaFree(act[i]);
	return finish_tap();
}

/*
 * A function unloaded and another at its address: the layout cached for the
 * first (one pointer) serves until the unload, then the new one's (two) is
 * asked.  launches.sh reads the trace: 1, 1 and 2 chunks named.
 */
static int unload(void)
{
	static struct fake_kernel kx = { "kx", 0, 0, 1, { 0, 8 }, { 8, 8 } };
	void *a = NULL, *b = NULL;
	void *params[] = { &a, &b };

	plan_lazy();
	is_int(0, cudaMalloc(&a, 128 * MiB), "cudaMalloc a");
	is_int(0, cudaMalloc(&b, 128 * MiB), "cudaMalloc b");
	is_int(0, cuLaunchKernel(&kx, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), "kx(a) launched");
	kx.nparams = 2;
	is_int(0, cuLaunchKernel(&kx, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL),
	       "kx, now with two parameters at the same address, launched before the unload");
	is_int(0, cuModuleUnload(&kx), "cuModuleUnload");
	is_int(1, (int)fake_calls(FAKE_unload), "cuModuleUnload reaches the driver");
	is_int(0, cuLaunchKernel(&kx, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL), "kx(a, b) launched after it");
	cudaFree(a);
	cudaFree(b);
	return finish_tap();
}

#define NW 6
#define WSIZE (64 * MiB)

/* Whether all of the 64 MiB at @p, whatever its chunks, lies on the device. */
static int all_on_device(const void *p)
{
	struct vmmx_residency r = { 0, 0 };
	struct vmmx_chunk_info ci;

	return !vmmx_lookup(ctx_of(0), p, &ci) &&
	       !vmmx_buf_residency(ci.buf, (size_t)((const char *)p - (char *)vmmx_buf_ptr(ci.buf)),
				   WSIZE, &r) &&
	       r.device == WSIZE;
}

/* Which of the NW buffers lie wholly on the device, as a bit set. */
static unsigned resident(void *const *w)
{
	unsigned set = 0;

	for (int i = 0; i < NW; i++)
		if (all_on_device(w[i]))
			set |= 1u << i;
	return set;
}

/*
 * Fill (@check 0) or compare (@check 1) @p with the byte @v, 1 MiB at a
 * time, through libvmmx's copies.  A read that fails is tried once more (a
 * fault the torture injected fails one call, not the data).
 */
/*
 * vmmx_memcpy of @n bytes between @mem, libvmmx memory, and the test's own
 * (pageable) memory, @to_mem saying which way.  A segment placement sent
 * back is granted to the GPU only (VMMX_HOST_CPU_ACCESS=placed, vmmx-run's
 * default under --placement launch), and vmmx_memcpy refuses such a copy:
 * the CPU is granted first, as the copy hooks do for a program's copies.
 */
static int test_copy(void *mem, void *own, size_t n, int to_mem)
{
	/* Parked (VMMX_RUN_PLACE_PARK=1), it is mapped in place to be read. */
	if (vmmx_unpark(ctx_of(0), mem, n, NULL) || vmmx_advise(ctx_of(0), mem, n, VMMX_ADVISE_CPU))
		return -1;
	return to_mem ? vmmx_memcpy(ctx_of(0), mem, own, n) : vmmx_memcpy(ctx_of(0), own, mem, n);
}

static int pattern(void *p, unsigned char v, int check)
{
	static unsigned char buf[MiB], want[MiB];

	memset(want, v, sizeof(want));
	for (size_t off = 0; off < WSIZE; off += MiB) {
		if (!check) {
			if (test_copy((char *)p + off, want, MiB, 1))
				return 0;
		} else if ((test_copy((char *)p + off, buf, MiB, 0) &&
			    test_copy((char *)p + off, buf, MiB, 0)) ||
			   memcmp(buf, want, MiB)) {
			return 0;
		}
	}
	return 1;
}

/*
 * The default placement's unread launches (launches.sh checks the report's
 * device syncs): four weights fill the device and are used on one stream
 * while nothing has spilled, so their launches pass unread; a fifth spills,
 * seen at the 64th launch (60 that name nothing come first); that one names
 * w0 on another stream, the next brings w4 in, w0 sent back for room.  The
 * work that read w0 unseen, on the first stream, may still be queued: its
 * first move must wait for the device.
 */
static int place_late_spill(void)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	void *w[NW] = { 0 };
	int ok_data = 1;

	long none = 7;
	void *junk[] = { &none };

	plan_lazy();
	for (int i = 0; i < 5; i++) {
		if (i == 4)
			for (int k = 0; k < 4; k++) {
				void *params[] = { &w[k] };

				cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, (void *)0x2222, params, NULL);
			}
		if (cudaMalloc(&w[i], WSIZE) || !pattern(w[i], (unsigned char)(0x30 + i), 0))
			bail("place-late-spill: setup: %s", vmmx_last_error());
	}
	is_int(0xf, (int)resident(w), "w0-w3 on the device, w4 spilled");
	for (int k = 0; k < 60; k++)
		cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, (void *)0x2222, junk, NULL);
	for (int i = 0; i < 2; i++) {
		void *params[] = { i ? &w[4] : &w[0] };

		is_int(0, cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, (void *)0x1111, params, NULL),
		       "the launch naming w%d, on another stream, succeeds", i ? 4 : 0);
	}
	ok(all_on_device(w[4]) && !all_on_device(w[0]),
	   "w4 brought in, w0 sent back for it (resident 0x%x)", resident(w));
	for (int i = 0; i < 5; i++)
		ok_data &= pattern(w[i], (unsigned char)(0x30 + i), 1);
	ok(ok_data, "every weight's data intact");
	for (int i = 0; i < 5; i++)
		cudaFree(w[i]);
	return finish_tap();
}

/* quiet-fork: the launch of kblock stays in the fake driver until released. */
static struct fake_kernel kblock = { "kblock", 0, 0, 1, { 0 }, { 8 } };
static int qf_ready[2], qf_go[2];

static int qf_check(const void *f, void **params)
{
	char c = 0;

	(void)params;
	if (f == &kblock && write(qf_ready[1], &c, 1) == 1)
		(void)!read(qf_go[0], &c, 1);
	return 0;
}

static void *qf_launcher(void *arg)
{
	long none = 7;
	void *junk[] = { &none };

	(void)arg;
	return (void *)(long)cuLaunchKernel(&kblock, 1, 1, 1, 32, 1, 1, 0, NULL, junk, NULL);
}

/*
 * The default placement, nothing spilled: a thread's launch passed unread is
 * still in the driver when the program forks.  The child (where CUDA is
 * not usable: its contexts read as holding host memory) sees a spill at
 * its 64th launch and must not wait for the parent's launch in flight,
 * which is not in the child.
 */
static int quiet_fork(void)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	long none = 7;
	void *junk[] = { &none };
	pthread_t t;
	int st = -1;
	char c = 0;
	void *r, *a = NULL;
	pid_t pid;

	plan_lazy();
	if (pipe(qf_ready) || pipe(qf_go) || cudaMalloc(&a, WSIZE))
		bail("quiet-fork: setup");
	set_check(qf_check);
	is_int(0, cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, junk, NULL),
	       "a launch passed unread in the parent");
	pthread_create(&t, NULL, qf_launcher, NULL);
	ok(read(qf_ready[0], &c, 1) == 1, "another thread's launch is in the driver");
	pid = fork();
	if (pid == 0) {
		alarm(10);
		for (int i = 0; i < 70; i++)
			cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, junk, NULL);
		_exit(0);
	}
	ok(pid > 0, "fork");
	if (pid > 0)
		waitpid(pid, &st, 0);
	ok(pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
	   "the child's 70 launches return, the spill it sees not waiting for the parent's launch "
	   "(status %#x%s)", st, WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? ": hung" : "");
	(void)!write(qf_go[1], &c, 1);
	pthread_join(t, &r);
	is_int(0, (int)(long)r, "the parent's blocked launch returns once let go");
	set_check(NULL);
	cudaFree(a);
	return finish_tap();
}

/*
 * The torture (VMMX_FAULT set by launches.sh): the same three steps with
 * one driver call failed somewhere; where it lands in a move, the move
 * fails and the chunk stays where it was.  Setup the fault hit is not
 * what is tested: "skip".  Prints "data intact" or "DATA LOST".
 */
static int torture(void)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	void *w[NW] = { 0 };
	int bad = 0;

	for (int i = 0; i < NW; i++)
		if (cudaMalloc(&w[i], WSIZE) || !pattern(w[i], (unsigned char)(0x10 + i), 0)) {
			printf("skip: the fault hit the setup\n");
			return 0;
		}
	for (int step = 0; step < 3; step++)
		for (int i = 0; i < NW; i++) {
			void *params[] = { &w[i] };

			bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
		}
	for (int i = 0; i < NW; i++)
		if (!pattern(w[i], (unsigned char)(0x10 + i), 1)) {
			printf("DATA LOST in w%d\n", i);
			return 1;
		}
	if (parked_met()) {
		printf("DATA LOST: %lu launches, copies or memsets met parked memory\n", parked_met());
		return 1;
	}
	printf("data intact, %d launches failed\n", bad);
	return bad != 0;
}

/*
 * The placement scenarios' start: NW buffers of 64 MiB, each filled with
 * its own byte; under the 256 MiB limit w0-w3 land on the device, w4 and
 * w5 in host memory.
 */
static void six_weights(void **w)
{
	int ok_fill = 1;

	plan_lazy();
	for (int i = 0; i < NW; i++) {
		is_int(0, cudaMalloc(&w[i], WSIZE), "cudaMalloc w%d, 64 MiB", i);
		ok_fill &= pattern(w[i], (unsigned char)(0x10 + i), 0);
	}
	ok(ok_fill, "each buffer filled with its own byte");
	is_int(0x0f, (int)resident(w), "w0-w3 on the device, w4 and w5 in host memory");
}

/*
 * --placement launch: six 64 MiB buffers, four of which fit under the
 * device limit, each named by one launch, for three steps.  The first step
 * (no cycle yet) makes room by the least recently named; from the second,
 * the cycle known, by the next use (the latest named goes first).
 */
static int place(void)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	void *w[NW] = { 0 };
	int ok_data = 1, bad = 0;

	six_weights(w);
	for (int step = 0; step < 3; step++) {
		for (int i = 0; i < NW; i++) {
			void *params[] = { &w[i] };

			bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
			if (!all_on_device(w[i]))
				diag("step %d: w%d not wholly on the device at its launch", step, i), bad++;
			if (step == 0 && i == NW - 1)
				is_int(0x3c, (int)resident(w),
				       "after the first step: w4 and w5 brought in, w0 and w1 (least recently named) sent back");
			if (step == 1 && i == 0)
				is_int(0x1d, (int)resident(w),
				       "w0 named again (the cycle now known): w5, needed furthest ahead, made room; w2, needed next, stayed");
		}
	}
	is_int(0, bad, "18 launches succeed, each with its buffer on the device when passed on");
	/* The cycle known, w0 of the next step is brought in ahead of it, after w5's launch. */
	is_int(0x39, (int)resident(w), "after the third step: w0, w3, w4 and w5 on the device");
	for (int i = 0; i < NW; i++)
		ok_data &= pattern(w[i], (unsigned char)(0x10 + i), 1);
	ok(ok_data, "every buffer still holds its byte after 8 moves in and 8 out");
	for (int i = 0; i < NW; i++)
		cudaFree(w[i]);
	return finish_tap();
}

/*
 * Words that read as two 32-bit integers (vmmxp_word_pair()): a buffer p
 * of 64 MiB across a 4 GiB boundary B (a hole is made there for it in the
 * address space), spilled behind four buffers that fill the device and
 * were each named once.  A launch whose by-value struct holds { 3, B >> 32 }
 * (the address B + 3, inside p) names p without bringing it in; one
 * holding { 128 KiB, B >> 32 }, an ordinary interior pointer, brings it in
 * (the least recently named buffer sent back).  Skipped when p does not
 * land across B (another mapping took the hole).
 */
/*
 * cudaMalloc() of @size (64 MiB or more) placed across a 4 GiB boundary,
 * which goes to *@b: a hole from @size below it to 64 MiB above is made in
 * 12 GiB of address space held meanwhile, so that the next reservation's
 * highest fit is there.  NULL when the allocation failed or
 * landed elsewhere (another mapping took the hole).
 */
static void *malloc_across_4g(size_t size, uintptr_t *b)
{
	const uintptr_t G4 = (uintptr_t)4 << 30, span = (uintptr_t)12 << 30;
	uintptr_t r;
	void *p = NULL;

	r = (uintptr_t)mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (r == (uintptr_t)MAP_FAILED)
		return NULL;
	*b = (r + span - G4) & ~(G4 - 1);
	/* The reservation takes the top of the hole: its alignment's worth and more below B. */
	munmap((void *)(*b - size), size + 64 * MiB);
	if (cudaMalloc(&p, size))
		p = NULL;
	munmap((void *)r, *b - size - r);
	munmap((void *)(*b + 64 * MiB), r + span - (*b + 64 * MiB));
	if (p && !((uintptr_t)p < *b && *b + (128u << 10) < (uintptr_t)p + size)) {
		diag("%p, not across %#lx: another mapping took the hole", p, (unsigned long)*b);
		cudaFree(p);
		p = NULL;
	}
	return p;
}

static struct fake_kernel pair_k = { "kpair", 0, 0, 1, { 0 }, { 16 } };

/* fake_launch_check(): the word that a launch of pair_k holds is not mapped at the driver. */
static int pair_unmapped(const void *f, void **params)
{
	uint64_t w;

	if (f != &pair_k)
		return 0;
	memcpy(&w, params[0], sizeof(w));
	return unmapped((uintptr_t)w);
}

static int place_pair(void)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } }, kz = { "kz", 0, 0, 1, { 0 }, { 8 } };
	struct fake_kernel *kp = &pair_k;
	void *w[4] = { 0 }, *p = NULL;
	uintptr_t b;
	int ok_data = 1, bad = 0;

	plan_lazy();
	for (int i = 0; i < 4; i++) {
		is_int(0, cudaMalloc(&w[i], WSIZE), "cudaMalloc w%d, 64 MiB", i);
		ok_data &= pattern(w[i], (unsigned char)(0x10 + i), 0);
	}
	p = malloc_across_4g(WSIZE, &b);
	if (!p)
		skip_all("p, 64 MiB, did not land across a 4 GiB boundary");
	ok(1, "cudaMalloc p, 64 MiB (past the limit), across the boundary");
	ok_data &= pattern(p, 0x77, 0);
	ok(ok_data, "each buffer filled with its own byte");
	for (int i = 0; i < 4; i++) {
		void *params[] = { &w[i] };

		bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
	}
	is_int(VMMX_LOC_HOST, where(p), "p, across the 4 GiB boundary %#lx, lies in host memory",
	       (unsigned long)b);
	{
		struct { int32_t lo, hi; uint64_t n; } pr = { 3, (int32_t)(b >> 32), 5 };
		void *params[] = { &pr };

		bad += cuLaunchKernel(kp, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
		is_int(VMMX_LOC_HOST, where(p),
		       "a struct holding { 3, %d } (the word %#lx, inside p) leaves p in host memory",
		       (int)(b >> 32), (unsigned long)(b + 3));
		pr.lo = 128 << 10;
		bad += cuLaunchKernel(kp, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
		is_int(VMMX_LOC_DEVICE, where(p),
		       "holding { 128 KiB, %d } (a pointer 128 KiB into the boundary) brings p in",
		       (int)(b >> 32));
	}
	is_int(0x0e, (int)(where(w[0]) == VMMX_LOC_DEVICE) | (where(w[1]) == VMMX_LOC_DEVICE) << 1 |
			     (where(w[2]) == VMMX_LOC_DEVICE) << 2 | (where(w[3]) == VMMX_LOC_DEVICE) << 3,
	       "w0, named longest ago, sent back to make room; w1-w3 stay");
	/*
	 * w1-w3 named again, then w0, by another kernel (kw again would make a
	 * cycle of the four): p, named longest ago now, goes back for w0
	 * (parked, with PARK=1).
	 */
	for (int i = 1; i <= 4; i++) {
		void *params[] = { &w[i % 4] };

		bad += cuLaunchKernel(&kz, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
	}
	is_int(VMMX_LOC_HOST, where(p), "w0 named again: p sent back for it");
	{
		struct { int32_t lo, hi; uint64_t n; } pr = { 3, (int32_t)(b >> 32), 5 };
		void *params[] = { &pr };

		set_check(pair_unmapped);
		bad += cuLaunchKernel(kp, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
		set_check(NULL);
		is_int(0, (int)fake_launch_bad(),
		       "a launch holding { 3, %d } again finds p's memory mapped at the driver (held as "
		       "the launch's: mapped in place if parked)", (int)(b >> 32));
		is_int(VMMX_LOC_HOST, where(p), "... and p is left in host memory");
	}
	/* The same words in a graph's kernel node: read at instantiation, kept as pairs. */
	{
		static struct { int32_t lo, hi; uint64_t n; } gp, gq;
		static struct fake_graph g1, g2;
		void *e1 = NULL, *e2 = NULL;

		gp = (__typeof__(gp)){ 3, (int32_t)(b >> 32), 5 };
		gq = (__typeof__(gq)){ 128 << 10, (int32_t)(b >> 32), 5 };
		fake_graph_kernel(&g1, kp, (void *[]){ &gp });
		fake_graph_kernel(&g2, kp, (void *[]){ &gq });
		bad += cuGraphInstantiateWithFlags(&e1, &g1, 0) != 0;
		bad += cuGraphInstantiateWithFlags(&e2, &g2, 0) != 0;
		bad += cuGraphLaunch(e1, NULL) != 0;
		is_int(VMMX_LOC_HOST, where(p), "a graph whose kernel node holds { 3, %d }: p left in host memory",
		       (int)(b >> 32));
		bad += cuGraphLaunch(e2, NULL) != 0;
		is_int(VMMX_LOC_DEVICE, where(p), "one holding { 128 KiB, %d }: p brought in", (int)(b >> 32));
		bad += cuGraphExecDestroy(e1) != 0;
		bad += cuGraphExecDestroy(e2) != 0;
	}
	is_int(0, bad, "the 11 launches, 2 graph launches and their instantiations succeed");
	ok_data = pattern(p, 0x77, 1);
	for (int i = 0; i < 4; i++)
		ok_data &= pattern(w[i], (unsigned char)(0x10 + i), 1);
	ok(ok_data, "every buffer still holds its byte");
	for (int i = 0; i < 4; i++)
		cudaFree(w[i]);
	cudaFree(p);
	return finish_tap();
}

/* The mover scenario: MW buffers of MSIZE, MW / 2.5 of which fit under the 256 MiB limit. */
#define MW 40
#define MSIZE (16 * MiB)

/* Whether [@p, @p + @size) lies wholly on the device. */
static int on_device_range(const void *p, size_t size)
{
	struct vmmx_residency r = { 0, 0 };
	struct vmmx_chunk_info ci;

	return !vmmx_lookup(ctx_of(0), p, &ci) &&
	       !vmmx_buf_residency(ci.buf, (size_t)((const char *)p - (char *)vmmx_buf_ptr(ci.buf)),
				   size, &r) &&
	       r.device == size;
}

/* fake_launch_check(): the one pointer parameter of a launch is wholly on the device. */
static int buffer_off_device(const void *f, void **params)
{
	(void)f;
	return !on_device_range(*(void **)params[0], MSIZE);
}

/* Fill (@check 0) or compare (@check 1) the first and last MiB of @p with @v. */
static int ends(void *p, unsigned char v, int check)
{
	static unsigned char buf[MiB], want[MiB];

	memset(want, v, sizeof(want));
	for (size_t off = 0; off < MSIZE; off += MSIZE - MiB) {
		if (!check ? test_copy((char *)p + off, want, MiB, 1) != 0 :
			     test_copy((char *)p + off, buf, MiB, 0) != 0 ||
				     memcmp(buf, want, MiB) != 0)
			return 0;
	}
	return 1;
}

/*
 * Whether the buffer at @p moves in pieces under --placement launch:
 * VMMX_RUN_PLACE_PIECES=1, more than a quarter of the device limit
 * (vmmx_ctx_query()), in several chunks.
 */
static int in_pieces(const void *p)
{
	struct vmmx_ctx_info info = { .size = sizeof(info) };
	struct vmmx_chunk_info ci;
	const char *want = getenv("VMMX_RUN_PLACE_PIECES");
	size_t n = 0;

	if (!want || strcmp(want, "1") || vmmx_lookup(ctx_of(0), p, &ci) ||
	    vmmx_ctx_query(ctx_of(0), &info) ||
	    vmmx_buf_chunks(ci.buf, NULL, 0, &n))
		return 0;
	return vmmx_buf_size(ci.buf) > info.device_limit / 4 && n > 1;
}

/* The model scenario (see place_model()). */
#define MODEL_W 40
#define MODEL_IN 22
#define MODEL_WSIZE (16 * MiB)
#define MODEL_STEPS 6

/*
 * The model scenario's torture (VMMX_FAULT set by launches.sh): its steps,
 * prefill, with driver calls failed; where they land in a move (a copy, a
 * checksum of a verified host copy, a map), that move fails and the
 * segment stays where it was.  Prints "data intact" or "DATA LOST", as
 * torture() does; exits 1 when a launch failed too.
 */
static int model_torture(void **w, void **act)
{
	static struct fake_kernel kg = { "kg", 0, 0, 3, { 0, 8, 16 }, { 8, 8, 8 } };
	int bad = 0;

	for (int step = 0; step < 4; step++)
		for (int i = 0; i < MODEL_W; i++) {
			void *pg[] = { &act[i % 2], &w[i], &act[(i + 1) % 2] };

			bad += cuLaunchKernel(&kg, 1, 1, 1, 32, 1, 1, 0, NULL, pg, NULL) != 0;
		}
	for (int i = 0; i < MODEL_W; i++)
		if (!ends(w[i], (unsigned char)(0x40 + i), 1) && !ends(w[i], (unsigned char)(0x40 + i), 1)) {
			printf("DATA LOST in w%d\n", i);
			return 1;
		}
	if (parked_met()) {
		printf("DATA LOST: %lu launches, copies or memsets met parked memory\n", parked_met());
		return 1;
	}
	printf("data intact, %d launches failed\n", bad);
	return bad != 0;
}

/*
 * The model scenario: a model loaded as transformers' from_pretrained does
 * under a device limit.  Its warm-up tensor (most of the limit) is one
 * segment that PyTorch's pool carves the first weights out of; the weights
 * past it get segments of their own, the first few on the device, the rest
 * in host memory, and so do the two activations, made last.  MODEL_W
 * weights of MODEL_WSIZE, the first MODEL_IN of them in the warm-up
 * segment, each named by a kernel with both activations, then one on an
 * activation, for six steps.  Under a 512 MiB limit, 128 MiB of room is
 * left beside the warm-up segment and the activations once these are on
 * the device: eight of the 18 weights with segments of their own.
 *
 * @asize 16 MiB, prefill: each weight is half of what its kernel names.
 * The warm-up segment, 352 MiB, is too large to send back: it stays on
 * the device throughout, and the weights past it stream through the room
 * left, each on the device at its launch once the first step is done, at
 * most 12 brought in a step (Belady's least for 18 through eight places is
 * 10 or 11; checked with the moves ahead inline, VMMX_RUN_PLACE_MOVER=0,
 * as the mover's timing varies).
 *
 * @asize 64 KiB, decode: each weight is read once.  None is brought in;
 * the weights in host memory are read in place, and nothing is sent back.
 *
 * @late: the warm-up segment made last, so that it lies in host memory
 * (vmmx-run's allocator puts a segment in one place), 16 MiB activations:
 * a launch naming it, finding too little free room, leaves it where it
 * lies (counted: too large), and sends nothing back for it.
 */
static int place_model(size_t asize, int late, int torture_run)
{
	static struct fake_kernel kg = { "kg", 0, 0, 3, { 0, 8, 16 }, { 8, 8, 8 } },
				  kr = { "kr", 0, 0, 1, { 0 }, { 8 } };
	void *warm = NULL, *w[MODEL_W] = { 0 }, *act[2] = { 0 };
	int bad = 0, warm_gone = 0, missing = 0, in[MODEL_STEPS] = { 0 }, most = 0, ok_data = 1;
	struct vmmx_residency r0 = { 0, 0 }, r = { 0, 0 };
	struct vmmx_chunk_info ci;

	if (!torture_run)
		plan_lazy();
	if (!late)
		bad += cudaMalloc(&warm, MODEL_IN * MODEL_WSIZE) != 0;
	for (int i = MODEL_IN; i < MODEL_W; i++)
		bad += cudaMalloc(&w[i], MODEL_WSIZE) != 0;
	for (int i = 0; i < 2; i++)
		bad += cudaMalloc(&act[i], asize) != 0;
	if (late)
		bad += cudaMalloc(&warm, MODEL_IN * MODEL_WSIZE) != 0;
	for (int i = 0; !bad && i < MODEL_W; i++) {
		if (i < MODEL_IN)
			w[i] = (char *)warm + (size_t)i * MODEL_WSIZE;
		bad += !ends(w[i], (unsigned char)(0x40 + i), 0);
	}
	if (torture_run && bad) {
		printf("skip: the fault hit the setup\n");
		return 0;
	}
	if (torture_run)
		return model_torture(w, act);
	is_int(0, bad, "a %d MiB warm-up segment, 18 weights with segments of their own and two activations made, each weight filled",
	       (int)(MODEL_IN * MODEL_WSIZE / MiB));
	if (!late)
		ok(on_device_range(warm, MODEL_IN * MODEL_WSIZE) &&
			   !on_device_range(w[MODEL_W - 1], MODEL_WSIZE) && !on_device_range(act[1], asize),
		   "the warm-up segment on the device; the last weight and the activations in host memory");
	bad += vmmx_lookup(ctx_of(0), warm, &ci) ||
	       vmmx_buf_residency(ci.buf, 0, MODEL_IN * MODEL_WSIZE, &r0);
	if (late)
		ok(!bad && r0.host, "the warm-up segment, made last, lies in host memory (%zu MiB of it)",
		   r0.host / MiB);
	for (int step = 0; step < MODEL_STEPS; step++) {
		for (int i = 0; i < MODEL_W; i++) {
			void *pg[] = { &act[i % 2], &w[i], &act[(i + 1) % 2] };
			void *pr[] = { &act[(i + 1) % 2] };
			int was[MODEL_W];

			for (int j = MODEL_IN; j < MODEL_W; j++)
				was[j] = on_device_range(w[j], MODEL_WSIZE);
			bad += cuLaunchKernel(&kg, 1, 1, 1, 32, 1, 1, 0, NULL, pg, NULL) != 0;
			missing += step > 0 && i >= MODEL_IN && !on_device_range(w[i], MODEL_WSIZE);
			bad += cuLaunchKernel(&kr, 1, 1, 1, 32, 1, 1, 0, NULL, pr, NULL) != 0;
			for (int j = MODEL_IN; j < MODEL_W; j++)
				in[step] += !was[j] && on_device_range(w[j], MODEL_WSIZE);
			bad += vmmx_buf_residency(ci.buf, 0, MODEL_IN * MODEL_WSIZE, &r) != 0;
			/* Made last, it is in host memory: it must not move at all. */
			warm_gone += late ? r.device != r0.device || r.host != r0.host : r.device < r0.device;
		}
		diag("step %d: %d weights brought in", step, in[step]);
		if (step >= 2 && in[step] > most)
			most = in[step];
	}
	is_int(0, bad, "%d launches succeed", 2 * MODEL_W * MODEL_STEPS);
	if (!in_pieces(warm))
		is_int(0, warm_gone, late ? "the warm-up segment (too large to make room for) stays where it lies at every launch" :
					    "the warm-up segment (too large to send back) keeps its device part at every launch");
	else if (late)
		ok(r.device > r0.device, "the warm-up segment, in pieces of a chunk, made last: brought in piece by piece as launches name it (%zu MiB on the device, %zu MiB in host memory)",
		   r.device / MiB, r.host / MiB);
	else if (asize >= MiB)
		ok(warm_gone > 0, "the warm-up segment, in pieces of a chunk, makes room: pieces of it sent back at %d launches",
		   warm_gone);
	if (late) {
		if (!in_pieces(warm))
			ok(r.host == r0.host, "it stays where it lies (%zu MiB on the device, %zu MiB in host memory)",
			   r.device / MiB, r.host / MiB);
	} else if (asize >= MiB) {
		is_int(0, missing, "from the second step, every weight past it is on the device at its launch");
		/* The mover's timing varies: the count is checked with moves ahead made inline. */
		if (getenv("VMMX_RUN_PLACE_MOVER") && !strcmp(getenv("VMMX_RUN_PLACE_MOVER"), "0"))
			ok(most >= 8 && most <= 12,
			   "from the third step, %d weights brought in a step at most (12 allowed; 18 through 8 places: 10 or 11 for Belady)",
			   most);
	} else {
		ok(in[2] + in[3] + in[4] + in[5] == 0,
		   "from the third step, no weight is brought in: each is read once, in place (got %d)",
		   in[2] + in[3] + in[4] + in[5]);
	}
	for (int i = 0; i < MODEL_W; i++)
		ok_data &= ends(w[i], (unsigned char)(0x40 + i), 1);
	ok(ok_data, "every weight still holds its bytes");
	for (int i = MODEL_IN; i < MODEL_W; i++)
		cudaFree(w[i]);
	cudaFree(warm);
	cudaFree(act[0]);
	cudaFree(act[1]);
	return finish_tap();
}

/* The weights of place_park(), for its check at the unseen launch. */
static void *park_w[NW];

/* fake_launch_check(): some weight of place_park() is unreachable by a kernel now. */
static int weight_unmapped(const void *f, void **params)
{
	int bad = 0;

	(void)f;
	(void)params;
	for (int i = 0; i < NW; i++)
		bad |= unmapped((uintptr_t)park_w[i]);
	return bad;
}

/* The first weight of place_park() that is parked (unmapped), or -1. */
static int first_parked(void)
{
	for (int i = 0; i < NW; i++)
		if (unmapped((uintptr_t)park_w[i]))
			return i;
	return -1;
}

/* One step of place_park()'s weights, each named by a launch of its own; the failures counted. */
static int park_step(void)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	int bad = 0;

	for (int i = 0; i < NW; i++) {
		void *params[] = { &park_w[i] };

		bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
	}
	return bad;
}

/*
 * VMMX_RUN_PLACE_PARK=1 (launches.sh): six weights of 64 MiB, four of
 * which fit, each named by a launch of its own, three steps: those sent
 * back once they have a verified host copy are parked, their addresses
 * unmapped.  Then a copy from a parked weight, and after another step a
 * memset into one, each find their memory mapped at the driver (mapped in
 * place for them); a launch of a kernel with no parameter layout (what it
 * uses unknown), or with @nccl one of NCCL's (which reach their buffers
 * through work descriptors in device memory), finds every weight mapped,
 * and nothing is parked after it.
 */
static int place_park(int nccl)
{
	static struct fake_kernel kn = { "ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0, 0, 1, { 0 }, { 8 } };
	static unsigned char host[256];
	void *pu[] = { &park_w[0] };
	struct vmmx_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
	int bad = 0, p1 = -1, p2 = -1, ok_data = 1;

	plan_lazy();
	for (int i = 0; i < NW; i++)
		bad += cudaMalloc(&park_w[i], WSIZE) != 0 ||
		       !pattern(park_w[i], (unsigned char)(0x20 + i), 0);
	is_int(0, bad, "six weights of 64 MiB made and filled");
	/* Three steps, or more until one is parked: the movers may be bringing it in again. */
	for (int step = 0; step < 8 && (step < 3 || p1 < 0); step++) {
		bad += park_step();
		p1 = step >= 2 ? first_parked() : -1;
	}
	is_int(0, bad, "the launches succeed");
	ok(p1 >= 0, "after three steps or a few more, a weight is parked, its addresses unmapped (w%d)", p1);
	if (p1 < 0)
		return finish_tap();
	bad += cuMemcpyDtoHAsync_v2(host, (uintptr_t)park_w[p1] + 4096, sizeof(host), NULL) != 0;
	is_int(0, bad, "a copy from it passed on");
	ok(!unmapped((uintptr_t)park_w[p1]), "it is mapped in place for the copy");
	for (int step = 0; step < 6 && p2 < 0; step++) {
		bad += park_step();
		p2 = first_parked();
	}
	ok(!bad && p2 >= 0, "another step or a few park a weight again (w%d)", p2);
	if (p2 < 0)
		return finish_tap();
	bad += cuMemsetD8Async((uintptr_t)park_w[p2] + 4096, (unsigned char)(0x20 + p2), 64, NULL) != 0;
	is_int(0, bad, "a memset into it passed on");
	is_int(0, (int)fake_use_bad(),
	       "the copy and the memset each found their memory mapped at the driver");
	for (int step = 0; step < 6 && (!step || first_parked() < 0); step++)
		bad += park_step();
	ok(!bad && first_parked() >= 0, "another step or a few park a weight again");
	set_check(weight_unmapped);
	bad += cuLaunchKernel(nccl ? &kn : &k5, 1, 1, 1, 32, 1, 1, 0, NULL, pu, NULL) != 0;
	set_check(NULL);
	is_int(0, (int)fake_launch_bad(), "a launch of %s found every weight mapped: what was parked was mapped in place before it",
	       nccl ? "an NCCL kernel" : "a kernel with no parameter layout");
	bad += vmmx_stats_get(ctx_of(0), &st0) != 0;
	bad += park_step() + park_step();
	bad += vmmx_stats_get(ctx_of(0), &st1) != 0;
	is_int(0, bad, "two more steps succeed");
	ok(st1.parks == st0.parks && st1.parked_bytes == 0 && st1.copies_saved > st0.copies_saved,
	   "nothing parked after it: weights sent back are mapped in host memory (%llu copies mapped again, %llu bytes parked)",
	   (unsigned long long)(st1.copies_saved - st0.copies_saved),
	   (unsigned long long)st1.parked_bytes);
	for (int i = 0; i < NW; i++)
		ok_data &= pattern(park_w[i], (unsigned char)(0x20 + i), 1);
	ok(ok_data, "every weight still holds its bytes");
	for (int i = 0; i < NW; i++)
		cudaFree(park_w[i]);
	return finish_tap();
}

/* place_pointers(): the addresses its tables hold, the weights they point into, and where those lay. */
static uintptr_t ptr_at[2];
static void *ptr_w[2];
static int ptr_dev[2];

/*
 * fake_launch_check(): an address a table holds is unmapped (the GPU would
 * fault reading it), or a weight it points into moved since (its move
 * could have unmapped it under a kernel reading through the table).
 */
static int pointed_moved(const void *f, void **params)
{
	struct vmmx_chunk_info ci;
	size_t size;

	(void)f;
	(void)params;
	if (unmapped(ptr_at[0]) || unmapped(ptr_at[1]) ||
	    on_device_range(ptr_w[0], WSIZE) != ptr_dev[0])
		return 1;
	size = vmmx_lookup(ctx_of(0), ptr_w[1], &ci) ? WSIZE : vmmx_buf_size(ci.buf);
	return on_device_range(ptr_w[1], size) != ptr_dev[1];
}

/* The first weight of place_park() in host memory (parked or not), or -1. */
static int first_in_host(void)
{
	for (int i = 0; i < NW; i++)
		if (!on_device_range(park_w[i], WSIZE))
			return i;
	return -1;
}

/*
 * launches.sh, with and without VMMX_RUN_PLACE_PARK=1, the weights of
 * place_park(): a table of addresses built on the CPU and copied to the
 * device, which a kernel naming only the table reads through (a grouped
 * GEMM's operands).  A weight in host memory (parked: unmapped) when a
 * table pointing inside it is copied is mapped where it lies before the
 * copy is passed on (a move of it under way done first), and a weight on
 * the device when a second table pointing to it is copied
 * (cuMemcpyHtoDAsync); neither moves after (a move unmaps for a moment),
 * though a launch names each every step; the other weights still move.
 * With @many, one table points into 260 chunks of one buffer, more than a
 * copy keeps at once (launches.sh sets VMMX_CHUNK_MAX=2MiB): that buffer
 * never moves, the others still do; under VMMX_RUN_PLACE_PIECES=1 the
 * buffer moves in pieces, and nothing moves or parks after, every parked
 * weight mapped in place first.  With @how POINTERS_UNIFIED the two tables
 * go through the calls of unified addressing, cudaMemcpy with
 * cudaMemcpyDefault and cuMemcpyAsync, read as their source is host memory
 * and their destination device memory; a third table, copied between two
 * host buffers with cudaMemcpyDefault, points to another weight, which is
 * not marked (launches.sh counts 2).
 */
enum { POINTERS_ONE, POINTERS_MANY, POINTERS_UNIFIED };

static int place_pointers(int how)
{
	static struct fake_kernel kg = { "kg_gather", 0, 0, 1, { 0 }, { 8 } };
	enum { SMALL = 260 };
	struct vmmx_stats st0 = { .size = sizeof(st0) }, st1 = { .size = sizeof(st1) };
	uint64_t tab_host[SMALL + 4], other[2];
	void *tab = NULL, *big = NULL, *gp[] = { &tab };
	const char *pv = getenv("VMMX_RUN_PLACE_PIECES");
	int bad = 0, p1 = -1, q = -1, ok_data = 1, pieces = pv && !strcmp(pv, "1");
	int many = how == POINTERS_MANY, unified = how == POINTERS_UNIFIED;

	plan_lazy();
	for (int i = 0; i < NW; i++)
		bad += cudaMalloc(&park_w[i], WSIZE) != 0 ||
		       !pattern(park_w[i], (unsigned char)(0x20 + i), 0);
	bad += cudaMalloc(&tab, sizeof(tab_host)) != 0;
	is_int(0, bad, "six weights of 64 MiB and a table made, the weights filled");
	for (int step = 0; step < 8 && (step < 3 || p1 < 0); step++) {
		bad += park_step();
		p1 = step >= 2 ? first_in_host() : -1;
	}
	is_int(0, bad, "the launches succeed");
	ok(p1 >= 0, "after three steps or a few more, a weight is in host memory (w%d)%s", p1,
	   park_on() && p1 >= 0 && unmapped((uintptr_t)park_w[p1]) ? ", parked" : "");
	if (p1 < 0)
		return finish_tap();
	if (many) {
		/* Chunks of 2 MiB, an address in each. */
		bad += cudaMalloc(&big, SMALL * (2 * MiB)) != 0;
		for (int i = 0; i < SMALL; i++)
			tab_host[i] = (uintptr_t)big + (size_t)i * (2 * MiB) + 64;
		tab_host[SMALL] = (uintptr_t)park_w[p1];
		bad += cudaMemcpy(tab, tab_host, sizeof(tab_host), 1 /* cudaMemcpyHostToDevice */) != 0;
		bad += vmmx_stats_get(ctx_of(0), &st0) != 0;
		is_int(0, bad, "a table of %d addresses in as many chunks copied to the device", SMALL + 1);
		ok(!unmapped((uintptr_t)park_w[p1]), "the weight it points into is mapped before the copy is passed on");
		if (pieces) {
			ok(first_parked() < 0, "every weight is mapped (the buffer in pieces: nothing moves)");
			bad += park_step() + park_step();
			bad += vmmx_stats_get(ctx_of(0), &st1) != 0;
			ok(!bad && first_parked() < 0 && st1.migrations == st0.migrations,
			   "two more steps succeed, nothing moved or parked (%llu chunks moved)",
			   (unsigned long long)(st1.migrations - st0.migrations));
		} else {
			ptr_at[0] = ptr_at[1] = (uintptr_t)park_w[p1];
			ptr_w[0] = park_w[p1];
			ptr_dev[0] = on_device_range(ptr_w[0], WSIZE);
			ptr_w[1] = big;
			ptr_dev[1] = on_device_range(big, SMALL * (2 * MiB));
			set_check(pointed_moved);
			for (int step = 0; step < 4; step++)
				bad += park_step();
			set_check(NULL);
			bad += vmmx_stats_get(ctx_of(0), &st1) != 0;
			is_int(0, bad, "four more steps succeed");
			is_int(0, (int)fake_launch_bad(), "neither the weight nor the buffer moved");
			ok(st1.migrations > st0.migrations, "the other weights still move (%llu chunks moved)",
			   (unsigned long long)(st1.migrations - st0.migrations));
		}
		cudaFree(big);
		goto out;
	}
	/* Inside w[p1]; the other words no libvmmx address. */
	tab_host[0] = (uintptr_t)park_w[p1] + 4096;
	tab_host[1] = 0x12345678;
	tab_host[2] = (uintptr_t)&tab_host[0];
	tab_host[3] = 0;
	ptr_at[0] = ptr_at[1] = (uintptr_t)tab_host[0];
	ptr_w[0] = park_w[p1];
	bad += cudaMemcpy(tab, tab_host, 4 * sizeof(uint64_t),
			  unified ? 4 /* cudaMemcpyDefault */ : 1 /* cudaMemcpyHostToDevice */) != 0;
	is_int(0, bad, "a table pointing inside that weight copied to the device (cudaMemcpy, %s)",
	       unified ? "cudaMemcpyDefault" : "cudaMemcpyHostToDevice");
	ok(!unmapped(ptr_at[0]), "the weight is mapped where it lies before the copy is passed on");
	/* Where it lies now, after a move under way then (the copy waited for it). */
	ptr_dev[0] = on_device_range(ptr_w[0], WSIZE);
	for (int i = 0; i < NW && q < 0; i++)
		if (i != p1 && on_device_range(park_w[i], WSIZE))
			q = i;
	ok(q >= 0, "another weight is on the device (w%d)", q);
	if (q < 0)
		goto out;
	/* From a host address 4 bytes off alignment: the word lands aligned on the device. */
	memcpy((unsigned char *)&tab_host[4] + 4, &park_w[q], sizeof(void *));
	ptr_at[1] = (uintptr_t)park_w[q];
	ptr_w[1] = park_w[q];
	if (unified)
		bad += cuMemcpyAsync((uintptr_t)tab + 32, (uintptr_t)&tab_host[4] + 4, 8, NULL) != 0;
	else
		bad += cuMemcpyHtoDAsync_v2((uintptr_t)tab + 32, (unsigned char *)&tab_host[4] + 4, 8,
					    NULL) != 0;
	is_int(0, bad, "a table pointing to it copied (%s, from an unaligned host address)",
	       unified ? "cuMemcpyAsync" : "cuMemcpyHtoDAsync");
	if (unified) {
		/* Between two host buffers: no table the GPU reads, nothing marked. */
		int o = 0;

		while (o == p1 || o == q)
			o++;
		tab_host[8] = (uintptr_t)park_w[o];
		bad += cudaMemcpy(other, &tab_host[8], sizeof(uint64_t), 4 /* cudaMemcpyDefault */) != 0;
		is_int(0, bad, "a table pointing to w%d copied between two host buffers (cudaMemcpyDefault)", o);
	}
	ptr_dev[1] = on_device_range(ptr_w[1], WSIZE);
	bad += vmmx_stats_get(ctx_of(0), &st0) != 0;
	set_check(pointed_moved);
	for (int step = 0; step < 4; step++) {
		bad += park_step();
		bad += cuLaunchKernel(&kg, 1, 1, 1, 32, 1, 1, 0, NULL, gp, NULL) != 0;
	}
	set_check(NULL);
	bad += vmmx_stats_get(ctx_of(0), &st1) != 0;
	is_int(0, bad, "four more steps, each with a kernel reading through the tables, succeed");
	is_int(0, (int)fake_launch_bad(),
	       "no launch found a weight the tables point into unmapped or moved");
	ok(st1.migrations > st0.migrations, "the other weights still move (%llu chunks moved)",
	   (unsigned long long)(st1.migrations - st0.migrations));
out:
	for (int i = 0; i < NW; i++)
		ok_data &= pattern(park_w[i], (unsigned char)(0x20 + i), 1);
	ok(ok_data, "every weight still holds its bytes");
	for (int i = 0; i < NW; i++)
		cudaFree(park_w[i]);
	cudaFree(tab);
	return finish_tap();
}

/*
 * --placement launch when the victims cannot make the room: under the
 * 256 MiB limit, a 128 MiB buffer every launch names, two of 16 MiB named
 * once each, 96 MiB no launch names, then a 48 MiB one in host memory.
 * A launch naming it finds 32 MiB of victims for 48 MiB: none is sent
 * back (they would come back for nothing), and it is read in place.
 */
static int place_plan(void)
{
	static struct fake_kernel kp = { "kp", 0, 0, 2, { 0, 8 }, { 8, 8 } };
	void *a = NULL, *s1 = NULL, *s2 = NULL, *f = NULL, *h = NULL;
	void *p1[] = { &a, &s1 }, *p2[] = { &a, &s2 }, *p3[] = { &a, &h };
	int bad = 0;

	plan_lazy();
	bad += cudaMalloc(&a, 128 * MiB) != 0;
	bad += cudaMalloc(&s1, 16 * MiB) != 0;
	bad += cudaMalloc(&s2, 16 * MiB) != 0;
	bad += cudaMalloc(&f, 96 * MiB) != 0;
	bad += cudaMalloc(&h, 48 * MiB) != 0;
	bad += !ends(h, 0x5a, 0);
	is_int(0, bad, "buffers of 128, 16, 16, 96 and 48 MiB made");
	ok(on_device_range(a, 128 * MiB) && on_device_range(s1, 16 * MiB) &&
		   on_device_range(s2, 16 * MiB) && !on_device_range(h, 48 * MiB),
	   "the first four on the device, the last in host memory");
	bad += cuLaunchKernel(&kp, 1, 1, 1, 32, 1, 1, 0, NULL, p1, NULL) != 0;
	bad += cuLaunchKernel(&kp, 1, 1, 1, 32, 1, 1, 0, NULL, p2, NULL) != 0;
	bad += cuLaunchKernel(&kp, 1, 1, 1, 32, 1, 1, 0, NULL, p3, NULL) != 0;
	is_int(0, bad, "3 launches succeed");
	ok(on_device_range(s1, 16 * MiB) && on_device_range(s2, 16 * MiB),
	   "neither 16 MiB buffer sent back: together they make two thirds of the room needed");
	ok(!on_device_range(h, 48 * MiB) && ends(h, 0x5a, 1),
	   "the 48 MiB buffer read in place, its data intact");
	cudaFree(h);
	cudaFree(f);
	cudaFree(s2);
	cudaFree(s1);
	cudaFree(a);
	return finish_tap();
}

/*
 * --placement launch on a buffer in pieces (more than a quarter of the
 * 256 MiB limit, in 64 MiB chunks: each chunk moves alone), with the
 * moves on the launching thread: a 256 MiB buffer b fills the device, a
 * 64 MiB one, s, lies in host memory.  A kernel named inside b is taken to
 * read on to b's end: a launch naming s and b's second piece sends back
 * b's first piece (below it), not its last (above it), though the last
 * was named longer ago (least recently named); the next, naming b's first
 * piece alone, brings it in by sending s back, not a piece of b above it.
 */
static int place_pieces(void)
{
	static struct fake_kernel kp = { "kp", 0, 0, 2, { 0, 8 }, { 8, 8 } };
	void *b = NULL, *s = NULL, *piece[4], *at1, *at3, *none = NULL;
	void *p1[] = { &at3, &none }, *p2[] = { &b, &none }, *p3[] = { &s, &at1 };
	int bad = 0, ok_data = 1;

	plan_lazy();
	bad += cudaMalloc(&b, 256 * MiB) != 0;
	bad += cudaMalloc(&s, 64 * MiB) != 0;
	for (int i = 0; !bad && i < 4; i++) {
		piece[i] = (char *)b + (size_t)i * 64 * MiB;
		bad += !ends(piece[i], (unsigned char)(0x60 + i), 0);
	}
	bad += bad || !ends(s, 0x6f, 0);
	is_int(0, bad, "a 256 MiB buffer and a 64 MiB one made, each piece filled with its own byte");
	if (bad)
		return finish_tap();
	ok(in_pieces(b) && on_device_range(b, 256 * MiB) && !on_device_range(s, 64 * MiB),
	   "the first in pieces, on the device; the second in host memory");
	at1 = (char *)piece[1] + 4096;
	at3 = (char *)piece[3] + MiB;
	bad += cuLaunchKernel(&kp, 1, 1, 1, 32, 1, 1, 0, NULL, p1, NULL) != 0;
	bad += cuLaunchKernel(&kp, 1, 1, 1, 32, 1, 1, 0, NULL, p2, NULL) != 0;
	bad += cuLaunchKernel(&kp, 1, 1, 1, 32, 1, 1, 0, NULL, p3, NULL) != 0;
	is_int(0, bad, "launches naming b's last piece, its first, then s and b's second succeed");
	ok(on_device_range(s, 64 * MiB) && !on_device_range(piece[0], 64 * MiB) &&
		   on_device_range(piece[1], 64 * MiB) && on_device_range(piece[3], 64 * MiB),
	   "s brought in for the third; b's first piece sent back for it (below the second, which it names), not its last (above it, named least recently)");
	bad += cuLaunchKernel(&kp, 1, 1, 1, 32, 1, 1, 0, NULL, p2, NULL) != 0;
	is_int(0, bad, "a launch naming b's first piece succeeds");
	ok(on_device_range(piece[0], 64 * MiB) && on_device_range(piece[1], 64 * MiB) &&
		   on_device_range(piece[2], 64 * MiB) && on_device_range(piece[3], 64 * MiB) &&
		   !on_device_range(s, 64 * MiB),
	   "b's first piece brought back in by sending s back: no piece of b above it is a victim");
	for (int i = 0; i < 4; i++)
		ok_data &= ends(piece[i], (unsigned char)(0x60 + i), 1);
	ok(ok_data && ends(s, 0x6f, 1), "every piece and s still hold their bytes");
	cudaFree(s);
	cudaFree(b);
	return finish_tap();
}

/*
 * --placement launch with the mover thread (the default): 40 buffers of
 * 16 MiB, 16 of which fit, each named by one launch, for eight steps: a
 * cycle of 40 launches, longer than the 32 looked ahead, so that victims
 * Belady would choose lie beyond the window.  The moves ahead run on the
 * mover while the launches go on, so where a buffer lies between launches
 * depends on timing; what must hold is checked where it matters: at each
 * launch, inside the fake driver, its buffer is wholly on the device, and
 * the data survives every move.
 *
 * @spread (VMMX_RUN_PLACE_SPREAD=1, moves on the launching thread, launches
 * back to back): allocation leaves the first 16 on the device; the kept set
 * is spread over the cycle instead, so that after the steps each third of
 * the cycle has 4 buffers or more on the device.  @spread 2: the same with
 * a place of the cycle that no pass after the first reaches (the first
 * step's extra launch before w5's, learned into the cycle of 41 launches,
 * is passed over from then on, as a Hugging Face forward's first-pass
 * launch order is): the kept set is chosen all the same.
 */
static int place_mover(int spread)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } },
				  kx = { "kx", 0, 0, 1, { 0 }, { 8 } };
	void *w[MW] = { 0 };
	int ok_fill = 1, ok_data = 1, bad = 0, third[3] = { 0 };

	plan_lazy();
	for (int i = 0; i < MW; i++) {
		bad += cudaMalloc(&w[i], MSIZE) != 0;
		ok_fill &= !bad && ends(w[i], (unsigned char)(0x10 + i), 0);
	}
	ok(ok_fill, "40 buffers of 16 MiB made, each filled with its own byte");
	if (spread)
		ok(on_device_range(w[15], MSIZE) && !on_device_range(w[16], MSIZE) &&
			   !on_device_range(w[39], MSIZE),
		   "the first 16 on the device, the rest in host memory");
	set_check(buffer_off_device);
	for (int step = 0; step < 8; step++)
		for (int i = 0; i < MW; i++) {
			void *params[] = { &w[i] };

			/* spread 2: the first step's extra launch, a place every later pass passes over. */
			if (spread == 2 && step == 0 && i == 5)
				bad += cuLaunchKernel(&kx, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
			bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
			/* The program's own work between launches, a kernel's time: the mover's chance. */
			if (!spread)
				usleep(2000);
		}
	set_check(NULL);
	is_int(0, bad, "320 launches succeed");
	is_int(0, (int)fake_launch_bad(), "each launch found its buffer wholly on the device when the driver got it");
	if (spread) {
		for (int i = 0; i < MW; i++)
			third[i * 3 / MW] += on_device_range(w[i], MSIZE);
		ok(third[0] >= 4 && third[1] >= 4 && third[2] >= 4,
		   "each third of the cycle keeps 4 buffers or more on the device (%d, %d, %d)",
		   third[0], third[1], third[2]);
	}
	for (int i = 0; i < MW; i++)
		ok_data &= ends(w[i], (unsigned char)(0x10 + i), 1);
	ok(ok_data, "every buffer still holds its byte after the moves");
	for (int i = 0; i < MW; i++)
		cudaFree(w[i]);
	return finish_tap();
}

/*
 * A training step's churn (PyTorch's cudaMallocAsync backend): CW weights
 * of 32 MiB (half fit), each step a forward that makes an activation a
 * layer with cudaMallocAsync, a backward that reads each and frees it with
 * cudaFreeAsync and makes a gradient, and an optimizer pass over weights
 * and gradients that frees each gradient.  Launches find their buffers
 * wherever the placement left them; the weights keep their bytes.
 */
#define CW 12
static int place_churn(void)
{
	static struct fake_kernel kt = { "kt", 0, 0, 2, { 0, 8 }, { 8, 8 } }, kf[CW], kb[CW], ko[CW];
	void *w[CW] = { 0 }, *act[CW] = { 0 }, *grad[CW] = { 0 };
	int bad = 0, ok_data = 1;

	for (int i = 0; i < CW; i++)
		kf[i] = kb[i] = ko[i] = kt;
	plan_lazy();
	for (int i = 0; i < CW; i++) {
		bad += cudaMalloc(&w[i], 2 * MSIZE) != 0;
		bad += !ends(w[i], (unsigned char)(0x40 + i), 0);
	}
	is_int(0, bad, "12 weights of 32 MiB made, each filled with its own byte");
	for (int step = 0; step < 10; step++) {
		for (int i = 0; i < CW; i++) {
			void *in = i ? act[i - 1] : w[0];
			void *params[] = { &w[i], &in };

			bad += cudaMallocAsync(&act[i], MSIZE, NULL) != 0;
			params[1] = &act[i];
			bad += cuLaunchKernel(&kf[i], 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
		}
		for (int i = CW - 1; i >= 0; i--) {
			void *params[] = { &act[i], &grad[i] };

			bad += cudaMallocAsync(&grad[i], 2 * MSIZE, NULL) != 0;
			bad += cuLaunchKernel(&kb[i], 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
			bad += cudaFreeAsync(act[i], NULL) != 0;
		}
		for (int i = 0; i < CW; i++) {
			void *params[] = { &w[i], &grad[i] };

			bad += cuLaunchKernel(&ko[i], 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
			bad += cudaFreeAsync(grad[i], NULL) != 0;
		}
	}
	is_int(0, bad, "10 steps: every allocation, launch and free succeeds");
	for (int i = 0; i < CW; i++)
		ok_data &= ends(w[i], (unsigned char)(0x40 + i), 1);
	ok(ok_data, "every weight still holds its byte after the moves");
	for (int i = 0; i < CW; i++)
		cudaFree(w[i]);
	return finish_tap();
}

/*
 * VMMX_RUN_PLACE_SPREAD=1 with weights far apart in the cycle: each of the
 * MW weights is followed by FAR_GAP launches naming only x (an activation,
 * kept; each launch, as each weight's, of a kernel of its own, so that
 * the cycle is the step), so the next weight is FAR_GAP + 1 launches ahead, past a look of
 * AHEAD (32) launches.  Moves on the launching thread (where each buffer
 * lies does not depend on timing): once the kept set is chosen, a weight in
 * host memory when the one before it is launched is brought in within
 * @want launches naming x (0: by that launch's look already).  Each launch
 * still finds its buffer on the device, the data intact.
 */
#define FAR_GAP 40
static int place_far(int want)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } }, kws[MW], kx[FAR_GAP];
	void *w[MW] = { 0 }, *x = NULL;
	int bad = 0, ok_data = 1, streamed = 0, late = 0;

	for (int i = 0; i < MW; i++)
		kws[i] = kw;
	for (int g = 0; g < FAR_GAP; g++)
		kx[g] = kw;
	plan_lazy();
	is_int(0, cudaMalloc(&x, MSIZE), "cudaMalloc x, 16 MiB");
	for (int i = 0; i < MW; i++) {
		bad += cudaMalloc(&w[i], MSIZE) != 0;
		bad += !ends(w[i], (unsigned char)(0x10 + i), 0);
	}
	is_int(0, bad, "40 weights of 16 MiB made, each filled with its own byte");
	for (int step = 0; step < 6; step++)
		for (int i = 0; i < MW; i++) {
			void *params[] = { &w[i] }, *xparams[] = { &x };
			void *next = w[(i + 1) % MW];
			int waited = on_device_range(next, MSIZE) ? -1 : 0;

			bad += cuLaunchKernel(&kws[i], 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
			bad += !on_device_range(w[i], MSIZE);
			for (int g = 0; g < FAR_GAP; g++) {
				if (waited >= 0 && !on_device_range(next, MSIZE))
					waited++;
				bad += cuLaunchKernel(&kx[g], 1, 1, 1, 32, 1, 1, 0, NULL, xparams, NULL) != 0;
			}
			/* From the fourth step: the cycle known, the kept set chosen, the plan written. */
			if (step >= 3 && waited >= 0) {
				streamed++;
				if (waited > want) {
					diag("step %d: w%d brought in after %d launches of x", step,
					     (i + 1) % MW, waited);
					late++;
				}
			}
		}
	is_int(0, bad, "%d launches succeed, each weight on the device at its launch", 6 * MW * (FAR_GAP + 1));
	ok(streamed > 0, "weights streamed through the device in the last three steps (%d)", streamed);
	is_int(0, late, "each brought in within %d launches after the weight before it", want);
	for (int i = 0; i < MW; i++)
		ok_data &= ends(w[i], (unsigned char)(0x10 + i), 1);
	ok(ok_data, "every weight still holds its byte after the moves");
	for (int i = 0; i < MW; i++)
		cudaFree(w[i]);
	cudaFree(x);
	return finish_tap();
}

/*
 * A segment too large to make room for that nothing names (PyTorch's cached
 * block of transformers' warm-up allocation, left unsplit): H, 128 MiB of
 * the 256 MiB device limit, allocated first and filled through libvmmx
 * (no copy the watch sees), then IW weights of 16 MiB, a kernel each,
 * launched in turn for 8 steps (10 when H is never named); 8 of them fit
 * beside H.  Once a cycle has passed since H's allocation, H is sent back,
 * mapped (never parked), and the weights all stay on the device at once:
 * the cycle settles, then XW weights more make the device too small again.  @named 1: a launch
 * names H once, before the steps (a stale word in a parameter block), and
 * an odd address in H in every step after (a word that may be no
 * pointer); two whole cycles later H is idle again and sent back so, in
 * 12 steps.
 * @named 3: the first launch of each step names H beside its weight (the
 * program uses it); H stays on the device, never a victim, and the weights
 * take turns beside it.  @named 2: H named by words that read as two
 * integers only.  @named 4: H, across a 4 GiB boundary B, named in every
 * step by words that may be no pointer only (vmmxp_word_kind()): B + 96
 * KiB (its low half under 1 MiB) and an odd address in H; it is sent back
 * as if never named.  H's data intact every time.
 */
#define IW 12
#define XW 5
static int place_idle(int named)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } }, kws[IW], kh, ku;
	static unsigned char buf[MiB], want[MiB];
	void *h = NULL, *w[IW] = { 0 };
	int bad = 0, ok_data = 1, resident = 0, steps = named == 1 || named == 3 ? 12 : named ? 8 : 10;
	uintptr_t b = 0;
	uint64_t odd;

	for (int i = 0; i < IW; i++)
		kws[i] = kw;
	if (named == 3)
		kws[0] = (struct fake_kernel){ "kw2", 0, 0, 2, { 0, 8 }, { 8, 8 } };
	kh = ku = kw;
	ku.name = "ku";
	plan_lazy();
	memset(want, 0x5a, sizeof(want));
	if (named == 2 || named == 4) {
		h = malloc_across_4g(128 * MiB, &b);
		if (!h)
			skip_all("H, 128 MiB, did not land across a 4 GiB boundary");
		ok(1, "cudaMalloc H, 128 MiB, half the device limit, across a 4 GiB boundary");
	} else {
		is_int(0, cudaMalloc(&h, 128 * MiB), "cudaMalloc H, 128 MiB, half the device limit");
	}
	for (size_t off = 0; off < 128 * MiB; off += 127 * MiB)
		bad += test_copy((char *)h + off, want, MiB, 1) != 0;
	for (int i = 0; i < IW; i++) {
		bad += cudaMalloc(&w[i], MSIZE) != 0;
		bad += !ends(w[i], (unsigned char)(0x20 + i), 0);
	}
	is_int(0, bad, "H filled; %d weights of 16 MiB made, each filled with its own byte", IW);
	/* An odd address in H whose low half is not near 0 (not a pair: vmmxp_word_kind()). */
	odd = (uint64_t)(uintptr_t)h + 0x1001;
	if ((uint32_t)odd < (1u << 20) || (uint32_t)odd > UINT32_MAX - (1u << 20))
		odd += 64 * MiB;
	ok(where(h) == VMMX_LOC_DEVICE, "H lies on the device");
	if (named == 1) {
		void *params[] = { &h };

		is_int(0, cuLaunchKernel(&kh, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL),
		       "a launch names H");
	}
	for (int step = 0; step < steps; step++)
		for (int i = 0; i < IW; i++) {
			void *params[] = { &w[i] }, *both[] = { &w[i], &h };
			struct { int32_t lo, hi; uint64_t n; } pr = { 3, (int32_t)(b >> 32), 5 };
			void *pparams[] = { &pr };

			bad += cuLaunchKernel(&kws[i], 1, 1, 1, 32, 1, 1, 0, NULL,
					      named == 3 && !i ? both : params, NULL) != 0;
			bad += !on_device_range(w[i], MSIZE);
			/* Every other weight, a kernel whose struct holds { 3, B >> 32 }: H by a pair. */
			if (named == 2 && i % 2)
				bad += cuLaunchKernel(&pair_k, 1, 1, 1, 32, 1, 1, 0, NULL, pparams, NULL) != 0;
			/* After the first two weights, H by B + 96 KiB, then by an odd address. */
			if (named == 4 && i < 2) {
				uint64_t u = i ? odd : b + (96u << 10);
				void *uparams[] = { &u };

				bad += cuLaunchKernel(&ku, 1, 1, 1, 32, 1, 1, 0, NULL, uparams, NULL) != 0;
			}
			/* Named once by a pointer: after the first weight, by an odd address. */
			if (named == 1 && !i) {
				void *uparams[] = { &odd };

				bad += cuLaunchKernel(&ku, 1, 1, 1, 32, 1, 1, 0, NULL, uparams, NULL) != 0;
			}
		}
	is_int(0, bad, "%d launches succeed, each weight on the device at its launch", steps * IW);
	for (int i = 0; i < IW; i++)
		resident += on_device_range(w[i], MSIZE);
	if (named == 3) {
		ok(where(h) == VMMX_LOC_DEVICE, "H, named every step, stays on the device");
		ok(resident < IW, "the weights take turns beside it (%d of %d on the device)",
		   resident, IW);
	} else {
		ok(where(h) == VMMX_LOC_HOST, "H, %s, was sent back to host memory",
		   named == 2 ? "never named but by words that read as two integers" :
		   named == 4 ? "named in every step by words that may be no pointer only" :
		   named == 1 ? "named once before the steps" : "never named");
		ok(!unmapped((uintptr_t)h) && !unmapped((uintptr_t)h + 127 * MiB),
		   "H is still mapped at its addresses for the GPU (not parked)");
		is_int(IW, resident, "every weight on the device at once in its place");
	}
	for (size_t off = 0; off < 128 * MiB; off += 127 * MiB)
		ok_data &= test_copy((char *)h + off, buf, MiB, 0) == 0 && !memcmp(buf, want, MiB);
	for (int i = 0; i < IW; i++)
		ok_data &= ends(w[i], (unsigned char)(0x20 + i), 1);
	ok(ok_data, "H and every weight still hold their bytes");
	/*
	 * Never named: the cycle settled once H went back (nothing moved in a
	 * whole pass).  Then XW weights more, 4 steps over all: the device is
	 * too small again, and moves begin after launches passed settled.
	 */
	if (!named) {
		static struct fake_kernel kx[XW];
		void *x[XW] = { 0 };

		bad = 0;
		for (int i = 0; i < XW; i++) {
			kx[i] = kw;
			kx[i].name = "kx";
			bad += cudaMalloc(&x[i], MSIZE) != 0;
			bad += !ends(x[i], (unsigned char)(0x40 + i), 0);
		}
		for (int step = 0; step < 4; step++)
			for (int i = 0; i < IW + XW; i++) {
				void *p = i < IW ? w[i] : x[i - IW], *params[] = { &p };

				bad += cuLaunchKernel(i < IW ? &kws[i] : &kx[i - IW], 1, 1, 1, 32, 1, 1, 0,
						      NULL, params, NULL) != 0;
				bad += !on_device_range(p, MSIZE);
			}
		is_int(0, bad, "%d weights more, 4 steps over all %d: each on the device at its launch",
		       XW, IW + XW);
		ok_data = 1;
		for (int i = 0; i < IW; i++)
			ok_data &= ends(w[i], (unsigned char)(0x20 + i), 1);
		for (int i = 0; i < XW; i++)
			ok_data &= ends(x[i], (unsigned char)(0x40 + i), 1);
		ok(ok_data, "every weight still holds its byte after the moves that followed the settled cycle");
		for (int i = 0; i < XW; i++)
			cudaFree(x[i]);
	}
	for (int i = 0; i < IW; i++)
		cudaFree(w[i]);
	cudaFree(h);
	return finish_tap();
}

/*
 * --placement launch with an activation: x is named by every other launch,
 * five weights once per step each; four buffers fit.  Once the cycle is
 * known, x, needed again two launches later, is never the one sent back.
 * @burst: x named twice in a row after every other weight (PyTorch's
 * activations and small-allocation segment are named in bursts): between
 * two bursts, its use expected by its gap of 1 has passed, and it is still
 * needed sooner than any weight.
 */
static int place_act(int burst)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	/* A step: each weight, x after each (-1); with @burst, x twice after every other weight. */
	static const int plain[] = { 0, -1, 1, -1, 2, -1, 3, -1, 4, -1 },
			 bursts[] = { 0, -1, -1, 1, 2, -1, -1, 3, 4, -1, -1 };
	const int *order = burst ? bursts : plain;
	int len = burst ? 11 : 10;
	void *x = NULL, *w[5] = { 0 };
	int gone = 0, bad = 0;

	plan_lazy();
	is_int(0, cudaMalloc(&x, WSIZE), "cudaMalloc x, 64 MiB");
	for (int i = 0; i < 5; i++)
		is_int(0, cudaMalloc(&w[i], WSIZE), "cudaMalloc w%d, 64 MiB", i);
	ok(all_on_device(x) && all_on_device(w[2]) && !all_on_device(w[3]),
	   "x, w0-w2 on the device, w3 and w4 in host memory");
	for (int step = 0; step < 3; step++)
		for (int i = 0; i < len; i++) {
			void *const *b = order[i] < 0 ? &x : &w[order[i]];
			void *params[] = { (void *)b };

			bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
			if (!all_on_device(*b))
				bad++;
			if (step > 0 && !all_on_device(x)) {
				diag("step %d launch %d: x sent back", step, i);
				gone++;
			}
		}
	is_int(0, bad, "%d launches succeed, each with its buffer on the device", 3 * len);
	is_int(0, gone, "with the cycle known, x (named %s) is never sent back",
	       burst ? "twice in a row after every other weight" : "every other launch");
	cudaFree(x);
	for (int i = 0; i < 5; i++)
		cudaFree(w[i]);
	return finish_tap();
}

/* Which of the NW weights at @w went from host memory to the device between @before and @after. */
static int brought_in(unsigned before, unsigned after)
{
	return __builtin_popcount(~before & after & ((1u << NW) - 1));
}

/* The test's clock for the fake's timed events (place-trial): units of simulated work, as ms. */
static double vclock;

static double trial_clock(void)
{
	return vclock;
}

#define TRIAL_STEPS 12

/* The end of a trial scenario: each weight still holds its byte; all freed, the clock gone. */
static int trial_done(void **w)
{
	int ok_data = 1;

	for (int i = 0; i < NW; i++)
		ok_data &= pattern(w[i], (unsigned char)(0x10 + i), 1);
	ok(ok_data, "every buffer still holds its byte");
	for (int i = 0; i < NW; i++)
		cudaFree(w[i]);
	fake_event_clock_impl(NULL);
	return finish_tap();
}

/*
 * --placement launch's trial of moving against reading in place: the six
 * weights of place() (four fit), each named by one launch, for
 * TRIAL_STEPS steps (the mover off: each move is seen at its launch).  The
 * test keeps the clock the fake's timed events read: a launch costs 1 with
 * its weight on the device, @in_place_cost with it in host memory, and
 * each weight moved either way @move_cost.  After a cycle moving and one
 * measured, then a cycle reading in place and one measured, the trial
 * chooses the cheaper for the steps after.  @timed 0: no clock, so no
 * timed event can be made: no trial, moving all along.  @hot (1 + its
 * index): a weight named three times a step, or, @tiled, once by a tiled
 * launch (48 KiB of dynamic shared memory: its naming weighs more than the
 * two plain namings of @hot's other weight, which it must win against).
 * @pin: the first @pin steps each make host memory first (a buffer of
 * libvmmx's own, kept to the end), which costs PIN_COST: a program's first
 * sends back pinning theirs.  The trial must not measure such a step, or
 * moving would look dearer than reading in place; it settles past them,
 * and the steps run that many more.
 */
#define PIN_COST 1000.0
#define PIN_MAX 8

static int place_trial(int timed, double in_place_cost, double move_cost, int hot, int tiled,
		       int pin)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	/* @tiled: the weight named twice a step by plain launches, which the tiled one outranks. */
	int twice = hot == 1 ? 1 : 0;
	int steps = TRIAL_STEPS + pin;
	int in[TRIAL_STEPS + PIN_MAX] = { 0 }, out[TRIAL_STEPS + PIN_MAX] = { 0 };
	int host[TRIAL_STEPS + PIN_MAX] = { 0 };
	int bad = 0, still = -1, moving_late = 0, still_late = 0, all_moving = 1;
	int hot_late = 0, pinned = 0;
	struct vmmx_buf *pb[PIN_MAX] = { 0 };
	void *w[NW] = { 0 };

	if (timed)
		fake_event_clock_impl(trial_clock);
	six_weights(w);
	for (int step = 0; step < steps; step++) {
		if (step < pin && step < PIN_MAX) {
			pinned += !vmmx_buf_create(ctx_of(0), 2 * MiB, "host", &pb[step]) &&
				  !vmmx_buf_resize(pb[step], 2 * MiB);
			vclock += PIN_COST;
		}
		/*
		 * @hot: reading in place chosen by now, the hot weight is sent to
		 * host memory and a weight in host memory brought in in its place,
		 * as another placement might have left them: the next launch of
		 * the hot one must bring it back in place of one named once.
		 */
		if (hot && step == TRIAL_STEPS / 2) {
			struct vmmx_loc hl = { VMMX_LOC_HOST, 0 }, dl = { VMMX_LOC_DEVICE, 0 };
			unsigned r = resident(w);
			int x = 0;

			while (x < NW && (r >> x & 1))
				x++;
			ok(x < NW && !vmmx_prefetch(ctx_of(0), w[hot - 1], WSIZE, hl, NULL) &&
				   !vmmx_prefetch(ctx_of(0), w[x], WSIZE, dl, NULL) &&
				   !all_on_device(w[hot - 1]) && all_on_device(w[x]),
			   "step %d: w%d sent to host memory, w%d brought in in its place", step, hot - 1, x);
		}
		for (int l = 0; l < NW + (tiled ? 1 : 2 * !!hot); l++) {
			int i = l < NW ? l : tiled ? twice : hot - 1;
			void *params[] = { &w[i] };
			unsigned before = resident(w), after;
			unsigned shared = tiled && i == hot - 1 ? 48u << 10 : 0;

			bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, shared, NULL, params, NULL) != 0;
			after = resident(w);
			in[step] += brought_in(before, after);
			out[step] += __builtin_popcount(before & ~after);
			host[step] += !all_on_device(w[i]);
			vclock += all_on_device(w[i]) ? 1 : in_place_cost;
			vclock += (brought_in(before, after) + __builtin_popcount(before & ~after)) * move_cost;
		}
		diag("step %d: %d brought in, %d sent back, %d launches read in place", step, in[step],
		     out[step], host[step]);
		if (step >= 2 && step < steps - 4 && !in[step] && !out[step] && still < 0)
			still = step;
		if (step >= 2)
			all_moving &= in[step] > 0 && !host[step];
		if (step >= steps - 4) {
			moving_late += in[step] > 0 && out[step] > 0 && !host[step];
			still_late += !in[step] && !out[step] && host[step] == 2;
			hot_late += hot && !in[step] && !out[step] && host[step] == 2 &&
				    all_on_device(w[hot - 1]);
		}
	}
	is_int(0, bad, "%d launches succeed", steps * (NW + (tiled ? 1 : 2 * !!hot)));
	if (pin)
		is_int(pin, pinned, "host memory made at the start of each of the first %d steps", pin);
	if (hot && !tiled)
		is_int(4, hot_late, "reading in place: w%d (named 3 times a step) is on the device again in each of the last 4 steps, nothing moves, and the 2 weights read in place are named once", hot - 1);
	if (tiled)
		is_int(4, hot_late, "reading in place: w%d (named once a step, by a tiled launch) is on the device again in each of the last 4 steps, nothing moves, and the 2 weights read in place are named once by plain launches", hot - 1);
	if (!timed) {
		ok(all_moving, "no timed event: no trial; from the third step on, every step brings weights in and reads none in place");
	} else if (in_place_cost > move_cost) {
		ok(still >= 0, "the trial's side reading in place: step %d moved nothing", still);
		is_int(4, moving_late, "moving chosen: each of the last 4 steps brings weights in, sends others back, reads none in place");
	} else {
		ok(still >= 0, "the trial's side reading in place: step %d moved nothing", still);
		is_int(4, still_late, "reading in place chosen: each of the last 4 steps moves nothing and reads the 2 weights that do not fit in place");
	}
	for (int i = 0; i < PIN_MAX; i++)
		if (pb[i])
			vmmx_buf_destroy(pb[i]);
	return trial_done(w);
}

/*
 * The trial cut short: the weights of place_trial() under its dear moves,
 * step after step until one moves nothing (the trial's side reading in
 * place under way; when depends on the passes settled while host memory
 * was made), then 60 launches of another kernel on them in a scrambled
 * order: the cycle goes, and the trial with it; moving resumes (a weight
 * not on the device is brought in for its launch), rather than reading in
 * place for a cycle no longer run.
 */
static int place_trial_drop(void)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } },
				  kx = { "kx", 0, 0, 1, { 0 }, { 8 } };
	void *w[NW] = { 0 };
	int bad = 0, brought = 0, still = -1, launched = 0;
	unsigned x = 12345;

	fake_event_clock_impl(trial_clock);
	six_weights(w);
	/* Until a step past the second moves nothing: the trial's side reading in place. */
	for (int step = 0; step < 12 && still < 0; step++) {
		int in = 0, out = 0;

		for (int i = 0; i < NW; i++) {
			void *params[] = { &w[i] };
			unsigned before = resident(w), after;

			bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
			launched++;
			after = resident(w);
			vclock += all_on_device(w[i]) ? 1 : 2;
			vclock += (brought_in(before, after) + __builtin_popcount(before & ~after)) * 1000;
			in += brought_in(before, after);
			out += __builtin_popcount(before & ~after);
		}
		if (step >= 2 && !in && !out)
			still = step;
	}
	ok(still >= 0, "the trial's side reading in place under way: step %d moved nothing", still);
	for (int l = 0; l < 60; l++) {
		int i;
		void *params[1];
		unsigned before = resident(w);

		x = x * 1103515245u + 12345u;
		i = (int)((x >> 16) % NW);
		params[0] = &w[i];
		bad += cuLaunchKernel(&kx, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
		launched++;
		brought += brought_in(before, resident(w));
	}
	is_int(0, bad, "%d launches succeed", launched);
	ok(brought > 0, "the order scrambled, the cycle gone: moving resumed, %d weights brought in for their launches",
	   brought);
	return trial_done(w);
}

/*
 * --placement launch on a step that varies: six 64 MiB weights (four fit),
 * each with a kernel that also names a 16 MiB input, a 16 MiB output and a
 * 16 MiB workspace (a compute-bound layer: the weight is not read once), a
 * kernel on the output after each, a workspace that is a new allocation at
 * every step (two alive at once, so its address alternates), two extra
 * launches before the first step and one inside the second.  The cycle
 * must still be learned, and from then on room made by next use: with
 * four weights' room, two steps bring in at most 7 (least recently named,
 * all 6 at every step).
 *
 * @once: the same with 1 MiB activations and no workspace: the weight is
 * then 97% of what its kernel names, read once; once the cycle is known,
 * the weights that do not fit are read in place, none is brought in.
 */
static int place_step(int once)
{
	static struct fake_kernel kg = { "kg", 0, 0, 4, { 0, 8, 16, 24 }, { 8, 8, 8, 8 } },
				  kr = { "kr", 0, 0, 1, { 0 }, { 8 } },
				  kx = { "kx", 0, 0, 1, { 0 }, { 8 } };
	size_t asize = once ? MiB : 16 * MiB;
	void *w[NW] = { 0 }, *act[2] = { 0 }, *ws[5] = { 0 }, *none = NULL;
	int bad = 0, in[5] = { 0 }, in_place = 0, ahead = 0, ahead_late = 0;
	unsigned early = 0; /* weights brought in by a launch that does not name them */

	plan_lazy();
	for (int i = 0; i < NW; i++)
		is_int(0, cudaMalloc(&w[i], WSIZE), "cudaMalloc w%d, 64 MiB", i);
	for (int i = 0; i < 2; i++)
		is_int(0, cudaMalloc(&act[i], asize), "cudaMalloc act%d, %zu MiB", i, asize / MiB);
	for (int step = 0; step < 5; step++) {
		void *pws[] = { &ws[step] };

		if (!once && cudaMalloc(&ws[step], 16 * MiB))
			bad++;
		if (!once && step >= 2)
			cudaFree(ws[step - 2]);
		for (int e = 0; step == 0 && e < 2; e++)
			bad += cuLaunchKernel(&kx, 1, 1, 1, 32, 1, 1, 0, NULL, pws, NULL) != 0;
		for (int i = 0; i < NW; i++) {
			void *pg[] = { &w[i], once ? &none : &ws[step], &act[i % 2], &act[(i + 1) % 2] };
			void *pr[] = { &act[(i + 1) % 2] };
			unsigned before = resident(w);

			/* Brought in early: it must still be there at its launch, before it. */
			if (early & (1u << i)) {
				ahead += step >= 3;
				ahead_late += !(before & (1u << i));
			}
			early &= ~(1u << i);
			bad += cuLaunchKernel(&kg, 1, 1, 1, 32, 1, 1, 0, NULL, pg, NULL) != 0;
			early |= ~before & resident(w) & ~(1u << i);
			in[step] += brought_in(before, resident(w));
			if (!all_on_device(w[i])) {
				in_place += step >= 2;
				if (!once)
					diag("step %d: w%d not on the device at its launch", step, i), bad++;
			}
			before = resident(w);
			bad += cuLaunchKernel(&kr, 1, 1, 1, 32, 1, 1, 0, NULL, pr, NULL) != 0;
			early |= ~before & resident(w);
			in[step] += brought_in(before, resident(w));
			if (step == 1 && i == 2)
				bad += cuLaunchKernel(&kx, 1, 1, 1, 32, 1, 1, 0, NULL, pws, NULL) != 0;
		}
		diag("step %d: %d weights brought in", step, in[step]);
	}
	if (!once) {
		is_int(0, bad, "66 launches succeed, each with its weight on the device when passed on");
		/* Four fit beside the workspace and activations: 2 or 3 a step; 6 when LRU. */
		ok(in[3] + in[4] <= 7, "steps 4 and 5 bring in at most 7 of their 12 weights (got %d and %d)",
		   in[3], in[4]);
		ok(ahead > 0 && !ahead_late,
		   "steps 4 and 5: %d weights brought in ahead, by an earlier launch; all still on the device when their own came",
		   ahead);
	} else {
		is_int(0, bad, "63 launches succeed");
		ok(in[2] + in[3] + in[4] == 0 && in_place >= 6,
		   "steps 3 to 5 bring in no weight: the %d launches of weights that do not fit read them in place",
		   in_place);
	}
	for (int step = 3; step < 5; step++)
		cudaFree(ws[step]);
	for (int i = 0; i < NW; i++)
		cudaFree(w[i]);
	cudaFree(act[0]);
	cudaFree(act[1]);
	return finish_tap();
}

/*
 * --placement launch with the kernels still running (fake_event_hold()):
 * no last-use event completes until it is waited for.  Every buffer that
 * moves during a launch must have had its last use waited for first, while
 * it still lay where that use saw it: wait_seen() checks each wait (the
 * buffer named by the launch the event followed), after_launch() each move.
 */
static void *const *wait_w;
static unsigned wait_before, done;
static unsigned long named_at[NW]; /* the fake's launch count after each buffer's last launch */
static int wait_bad, wait_n;

static void wait_seen(unsigned long launches)
{
	int i = (int)((launches - 1) % NW);

	wait_n++;
	if (launches == named_at[i])
		done |= 1u << i;
	if ((resident(wait_w) ^ wait_before) & (1u << i)) {
		diag("w%d moved before its last use (launch %lu) was waited for", i, launches);
		wait_bad++;
	}
}

static int place_wait(void)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	void *w[NW] = { 0 };
	int bad = 0, moves = 0;

	plan_lazy();
	for (int i = 0; i < NW; i++)
		is_int(0, cudaMalloc(&w[i], WSIZE), "cudaMalloc w%d, 64 MiB", i);
	wait_w = w;
	fake_event_hold(1);
	fake_event_sync_impl(wait_seen);
	for (int step = 0; step < 3; step++)
		for (int i = 0; i < NW; i++) {
			void *params[] = { &w[i] };
			unsigned moved;

			wait_before = resident(w);
			bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
			moved = (resident(w) ^ wait_before) & ~(1u << i);
			/* The launch's own buffer moved in before it, after its use a step ago. */
			if (!(wait_before & (1u << i)))
				moved |= 1u << i;
			/* The first step's first moves wait for the device: nothing named them yet. */
			if (step > 0) {
				moves += __builtin_popcount(moved);
				if (moved & ~done) {
					diag("step %d launch %d: moved 0x%x, last uses complete 0x%x", step,
					     i, moved, done);
					bad++;
				}
			}
			named_at[i] = fake_calls(FAKE_launch);
			done &= ~(1u << i);
		}
	fake_event_hold(0);
	is_int(0, bad, "18 launches: from the second step, every buffer that moved had its last use complete, by a wait");
	is_int(0, wait_bad, "no buffer moved before the wait for its last use");
	ok(moves > 0 && wait_n > 0, "%d moves in steps 2 and 3, %d waits", moves, wait_n);
	for (int i = 0; i < NW; i++)
		cudaFree(w[i]);
	return finish_tap();
}

/*
 * --placement launch with copies and memsets between the kernels, as
 * PyTorch makes them: after its kernel, each weight is read by a copy to
 * the host (even ones) or written by a memset (odd ones).  The fake's
 * events are held until waited for, and work completes in order: all of
 * it up to the last event waited for (copy_done()).  No weight may move
 * before the work that last used it, its copy or memset included, is
 * complete.  The first step is not checked: its first moves wait for the
 * device (nothing was named before memory spilled).
 */
static unsigned long complete;          /* the fake's work done, as far as waited for */
static unsigned long used_at[NW];       /* the fake's work when each weight was last used */

static void copy_done(unsigned long work)
{
	if (work > complete)
		complete = work;
}

static unsigned long work_seen(void)
{
	return fake_calls(FAKE_launch) + fake_calls(FAKE_copy) + fake_calls(FAKE_memset);
}

/* The last copy reached the fake as @call from @src to @dst, @n bytes, on @stream. */
static int copied(const char *call, uintptr_t dst, uintptr_t src, size_t n, void *stream)
{
	const struct fake_copy *log;
	size_t k = fake_copy_log(&log);

	return k && !strcmp(log[k - 1].call, call) && log[k - 1].dst == dst &&
	       log[k - 1].src == src && log[k - 1].n == n && log[k - 1].stream == stream;
}

/* Each copy entry point reaches the driver as given (@w: two buffers of libvmmx). */
static void copies_pass(void *const *w, unsigned char *host)
{
	struct fake_memcpy2d p2 = { .src_type = 1, .src_host = host, .dst_type = 2,
				    .dst_device = (uintptr_t)w[1], .dst_x = 128, .dst_y = 2,
				    .dst_pitch = 1024, .width = 64, .height = 3 };
	uintptr_t w0 = (uintptr_t)w[0], w1 = (uintptr_t)w[1], h = (uintptr_t)host;

	ok(!cudaMemcpyAsync(w[0], w[1], 512, 3, STREAM) &&
	   copied("cudaMemcpyAsync", w0, w1, 512, STREAM), "cudaMemcpyAsync passed on");
	ok(!cudaMemcpy(host, w[0], 256, 2) && copied("cudaMemcpy", h, w0, 256, NULL),
	   "cudaMemcpy passed on");
	ok(!cuMemcpyAsync(w0, w1, 512, NULL) && copied("cuMemcpyAsync", w0, w1, 512, NULL),
	   "cuMemcpyAsync passed on");
	ok(!cuMemcpyHtoDAsync_v2(w1, host, 128, STREAM) &&
	   copied("cuMemcpyHtoDAsync_v2", w1, h, 128, STREAM), "cuMemcpyHtoDAsync_v2 passed on");
	ok(!cuMemcpyDtoDAsync_v2(w1, w0, 128, STREAM) &&
	   copied("cuMemcpyDtoDAsync_v2", w1, w0, 128, STREAM), "cuMemcpyDtoDAsync_v2 passed on");
	ok(!cuMemcpy2DAsync_v2(&p2, STREAM) &&
	   copied("cuMemcpy2DAsync_v2", w1 + 2 * 1024 + 128, h, 192, STREAM),
	   "cuMemcpy2DAsync_v2 passed on");
	/* Host to host: libvmmx maps neither end, so nothing is held for it. */
	ok(!cudaMemcpyAsync(host, host + 128, 64, 0, STREAM) &&
	   copied("cudaMemcpyAsync", h, h + 128, 64, STREAM), "a host-to-host copy passed on");
}

static int place_copy(void)
{
	void *cs = STREAM;
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	static unsigned char host[256];
	void *w[NW] = { 0 };
	int bad = 0, moves = 0, late = 0, passed = 1;

	plan_lazy();
	for (int i = 0; i < NW; i++)
		is_int(0, cudaMalloc(&w[i], WSIZE), "cudaMalloc w%d, 64 MiB", i);
	fake_event_hold(1);
	fake_event_sync_impl(copy_done);
	for (int step = 0; step < 3; step++)
		for (int i = 0; i < NW; i++) {
			void *params[] = { &w[i] };
			uintptr_t at = (uintptr_t)w[i] + 4096;
			unsigned before = resident(w), moved;

			bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, STREAM, params, NULL) != 0;
			moved = (resident(w) ^ before) & ~(1u << i);
			if (!(before & (1u << i)))
				moved |= 1u << i; /* brought in: its last use was a step ago */
			for (int j = 0; j < NW && step > 0; j++)
				if ((moved >> j & 1) && used_at[j] > complete) {
					diag("step %d launch %d: w%d moved with the work done to %lu of %lu",
					     step, i, j, complete, used_at[j]);
					late++;
				}
			moves += step > 0 ? __builtin_popcount(moved) : 0;
			if (i % 2 == 0) {
				bad += cuMemcpyDtoHAsync_v2(host, at, sizeof(host), cs) != 0;
				passed &= copied("cuMemcpyDtoHAsync_v2", (uintptr_t)host, at,
						 sizeof(host), cs);
			} else {
				bad += cuMemsetD8Async(at, 0x5a, 64, cs) != 0;
			}
			used_at[i] = work_seen();
		}
	fake_event_hold(0);
	is_int(0, bad, "18 launches and 18 copies or memsets passed on");
	ok(passed, "each copy reached the driver with its arguments unchanged");
	is_int(0, late, "from the second step, no weight moved before its last copy or memset was done");
	ok(moves > 0, "%d moves in steps 2 and 3", moves);
	copies_pass(w, host);
	for (int i = 0; i < NW; i++)
		cudaFree(w[i]);
	return finish_tap();
}

/*
 * --placement launch with each weight used on two streams at once, as
 * JAX's and PyTorch's side-stream copies are: its kernel on stream SA,
 * then a copy of it to the host on SB; with @nstreams 3, every third
 * weight also a memset on SC, so that its last uses lie on three streams.
 * The fake's events are held until waited for, and each stream's work
 * completes in its own order only: the fake tells stream_done() how far
 * each stream is known done (a join, cuStreamWaitEvent, too: see
 * fakecuda.h).  No weight may move before its last use on every stream is
 * done.  The first step is not checked: its first moves wait for the
 * device, which this model does not see.
 */
#define SA ((void *)0x5a)
#define SB ((void *)0x5b)
#define SC ((void *)0x5c)
#define NSTREAMS 3
#define WORK_MAX 4096
static void *const stream_id[NSTREAMS] = { SA, SB, SC };
static unsigned long stream_upto[NSTREAMS]; /* per stream, the work known done (atomic) */
static unsigned long last_on[NW][NSTREAMS];  /* per weight and stream, the work of its last use */
static void *ran_on[WORK_MAX];               /* per work, the stream it ran on */
static int stream_wrong;

/* Stream @s done up to the fake's work @work at least. */
static void stream_upto_at_least(int s, unsigned long work)
{
	for (unsigned long was = __atomic_load_n(&stream_upto[s], __ATOMIC_ACQUIRE);
	     work > was && !__atomic_compare_exchange_n(&stream_upto[s], &was, work, 0,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);)
		;
}

/* The fake's word: @stream is done up to the fake's work @work (maybe from the mover). */
static void stream_done(void *stream, unsigned long work)
{
	int s = 0;

	while (s < NSTREAMS && stream_id[s] != stream)
		s++;
	if (s == NSTREAMS || work >= WORK_MAX || ran_on[work] != stream) {
		diag("the fake said stream %p done to work %lu, which ran on %p", stream, work,
		     work < WORK_MAX ? ran_on[work] : NULL);
		__atomic_add_fetch(&stream_wrong, 1, __ATOMIC_RELAXED);
		return;
	}
	stream_upto_at_least(s, work);
}

/* libvmmx's device syncs so far (vmmx_sync(), which placement's waits for the device make). */
static uint64_t device_syncs(void)
{
	struct vmmx_stats st = { .size = sizeof(st) };

	return vmmx_stats_get(ctx_of(0), &st) ? 0 : st.driver_calls[VMMX_OP_SYNC];
}

/*
 * The weights at @w that moved since *@seen (which is updated); from the
 * second step (@check), each one's last use on every stream must be done.
 * Their number is added to *@moves; returns the uses found not done.
 */
static int moved_early(void *const *w, unsigned *seen, int check, int *moves)
{
	unsigned now = resident(w), moved = now ^ *seen;
	int late = 0;

	*seen = now;
	if (!check)
		return 0;
	*moves += __builtin_popcount(moved);
	for (int j = 0; j < NW; j++)
		for (int s = 0; s < NSTREAMS && (moved >> j & 1); s++) {
			unsigned long upto = __atomic_load_n(&stream_upto[s], __ATOMIC_ACQUIRE);

			if (last_on[j][s] > upto) {
				diag("w%d moved to the %s with its use on stream %p (work %lu) not done: "
				     "that stream done to %lu", j, now >> j & 1 ? "device" : "host",
				     stream_id[s], last_on[j][s], upto);
				late++;
			}
		}
	return late;
}

static int place_streams(int nstreams)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	static unsigned char host[256];
	void *w[NW] = { 0 };
	int bad = 0, late = 0, moves = 0, calls = 0;
	/* LC_NO_EVENT=I: the kernel on w<I> in the second step gets no event (its use unknown). */
	const char *ne = getenv("LC_NO_EVENT");
	int no_event = ne ? atoi(ne) : -1;
	unsigned seen;

	plan_lazy();
	for (int i = 0; i < NW; i++)
		is_int(0, cudaMalloc(&w[i], WSIZE), "cudaMalloc w%d, 64 MiB", i);
	fake_event_hold(1);
	fake_event_sync_stream_impl(stream_done);
	seen = resident(w);
	for (int step = 0; step < 3; step++)
		for (int i = 0; i < NW; i++) {
			void *params[] = { &w[i] };
			uintptr_t at = (uintptr_t)w[i] + 4096;

			for (int s = 0; s < NSTREAMS; s++) {
				unsigned long work, before = work_seen();
				uint64_t syncs = no_event >= 0 ? device_syncs() : 0;

				if (s == 2 && (nstreams < 3 || i % 3))
					continue;
				if (s == 0) {
					int fail = step == 1 && i == no_event;

					fake_event_fail(fail);
					bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, SA, params,
							      NULL) != 0;
					fake_event_fail(0);
					/*
					 * No event: only a device sync completes it, which the
					 * model sees (device_syncs()).
					 */
				} else if (s == 1)
					bad += cuMemcpyDtoHAsync_v2(host, at, sizeof(host), SB) != 0;
				else
					bad += cuMemsetD8Async(at, 0x5a, 64, SC) != 0;
				calls++;
				/*
				 * A device sync made for this call (its moves) completed
				 * every stream's work before it.  Only with the mover off
				 * (LC_NO_EVENT runs): the mover's syncs come at any time.
				 */
				if (no_event >= 0 && device_syncs() > syncs)
					for (int k = 0; k < NSTREAMS; k++)
						stream_upto_at_least(k, before);
				/* Checked before this use counts: what moved for it came first. */
				late += moved_early(w, &seen, step > 0, &moves);
				work = work_seen();
				if (work < WORK_MAX)
					ran_on[work] = stream_id[s];
				last_on[i][s] = work;
			}
		}
	fake_event_hold(0);
	fake_event_sync_stream_impl(NULL);
	is_int(0, bad, "%d launches, copies and memsets on %d streams passed on", calls, nstreams);
	is_int(0, late, "from the second step, no weight moved before its last use on every stream was done");
	is_int(0, stream_wrong, "the fake told each stream's work on that stream");
	ok(moves > 0, "%d moves in steps 2 and 3", moves);
	if (nstreams > 2)
		ok(fake_calls(FAKE_stream_wait) > 0,
		   "a use on a third stream made its stream wait for the oldest (%lu stream waits)",
		   fake_calls(FAKE_stream_wait));
	else
		is_int(0, (int)fake_calls(FAKE_stream_wait), "two streams: no stream wait");
	for (int i = 0; i < NW; i++)
		cudaFree(w[i]);
	return finish_tap();
}

/*
 * --placement launch sends segments back granted to the GPU only
 * (VMMX_HOST_CPU_ACCESS=placed, vmmx-run's default there), whose copy by the
 * driver to or from pageable memory would kill the process: a copy between
 * such a segment and pageable memory has the CPU granted its part of the
 * segment first; so does a copy with host memory at both ends, both ends.
 * A copy of device memory, at one end or both, grants nothing.  With
 * LC_GRANT_FAULT set (and VMMX_FAULT failing that grant's set_access, the
 * call counted by the run without it), the copy is refused with
 * cudaErrorInvalidValue, not passed on.
 */
static int place_grant(void)
{
	static struct fake_kernel kw = { "kw", 0, 0, 1, { 0 }, { 8 } };
	static unsigned char host[256], peek[16];
	const struct fake_copy *log;
	struct vmmx_stats s0 = { .size = sizeof(s0) }, s1 = { .size = sizeof(s1) };
	void *w[NW] = { 0 };
	int bad = 0, fault = getenv("LC_GRANT_FAULT") != NULL, data = 1;
	size_t logged;

	plan_lazy();
	for (int i = 0; i < NW; i++) {
		is_int(0, cudaMalloc(&w[i], WSIZE), "cudaMalloc w%d, 64 MiB", i);
		data &= pattern(w[i], (unsigned char)(0x10 + i), 0);
	}
	ok(data, "each buffer filled with its own byte");
	/* Before any launch (nothing spilled for placement), moved to host by libvmmx itself. */
	is_int(0, vmmx_prefetch(ctx_of(0), w[0], WSIZE, (struct vmmx_loc){ VMMX_LOC_HOST, 0 }, NULL),
	       "w0 moved to host memory by vmmx_prefetch, before any launch");
	is_int(-VMMX_EFAULT, vmmx_memcpy(ctx_of(0), peek, w[0], sizeof(peek)),
	       "... granted to the GPU only");
	ok(!cudaMemcpyAsync((char *)w[0] + 512, host, 128, 1, STREAM) &&
	   !vmmx_memcpy(ctx_of(0), peek, w[0], sizeof(peek)),
	   "cudaMemcpyAsync from pageable memory into it, before anything spilled: the CPU granted first");
	is_int(0, vmmx_prefetch(ctx_of(0), w[0], WSIZE, (struct vmmx_loc){ VMMX_LOC_DEVICE, 0 }, NULL),
	       "w0 back on the device");
	for (int i = 0; i < NW; i++) {
		void *params[] = { &w[i] };

		bad += cuLaunchKernel(&kw, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL) != 0;
	}
	is_int(0, bad, "6 launches passed on");
	is_int(0x3c, (int)resident(w), "w4 and w5 brought in, w0 and w1 sent back");
	is_int(-VMMX_EFAULT, vmmx_memcpy(ctx_of(0), peek, w[0], sizeof(peek)),
	       "w0 sent back granted to the GPU only: vmmx_memcpy to pageable memory refuses it");
	vmmx_stats_get(ctx_of(0), &s0);
	diag("set_access calls before the grant: %llu",
	     (unsigned long long)s0.driver_calls[VMMX_OP_SET_ACCESS]);
	logged = fake_copy_log(&log);
	if (fault) {
		is_int(1, cudaMemcpy(host, (char *)w[0] + 4096, sizeof(host), 2),
		       "the grant failing, cudaMemcpy of w0 to pageable memory is refused: cudaErrorInvalidValue");
		is_uint(logged, fake_copy_log(&log), "... and not passed on to the driver");
		is_int(-VMMX_EFAULT, vmmx_memcpy(ctx_of(0), peek, w[0], sizeof(peek)),
		       "... w0 still granted to the GPU only");
		ok(pattern(w[0], 0x10, 1), "... its data intact");
		return finish_tap();
	}
	ok(!cudaMemcpy(host, (char *)w[0] + 4096, sizeof(host), 2) &&
	   copied("cudaMemcpy", (uintptr_t)host, (uintptr_t)w[0] + 4096, sizeof(host), NULL),
	   "cudaMemcpy of w0 to pageable memory passed on unchanged");
	is_int(0, vmmx_memcpy(ctx_of(0), peek, w[0], sizeof(peek)),
	       "... after the CPU was granted w0");
	is_int(-VMMX_EFAULT, vmmx_memcpy(ctx_of(0), peek, w[1], sizeof(peek)),
	       "w1, sent back too but not copied, still granted to the GPU only");
	vmmx_stats_get(ctx_of(0), &s0);
	ok(!cudaMemcpyAsync(w[3], w[1], sizeof(host), 3, STREAM) &&
	   !cuMemcpyDtoDAsync_v2((uintptr_t)w[1] + 256, (uintptr_t)w[2], 64, STREAM),
	   "copies from w1 to w3 and from w2 to w1, on the device, passed on");
	vmmx_stats_get(ctx_of(0), &s1);
	ok(s0.driver_calls[VMMX_OP_SET_ACCESS] == s1.driver_calls[VMMX_OP_SET_ACCESS] &&
	   vmmx_memcpy(ctx_of(0), peek, w[1], sizeof(peek)) == -VMMX_EFAULT,
	   "... device memory at one end: nothing granted, w1 still granted to the GPU only");
	{
		struct fake_memcpy2d p2 = { .src_type = 1, .src_host = host, .src_x = 8,
					    .src_pitch = 64, .dst_type = 2,
					    .dst_device = (uintptr_t)w[1], .dst_y = 1,
					    .dst_pitch = 1024, .width = 32, .height = 2 };

		ok(!cuMemcpy2DAsync_v2(&p2, STREAM) &&
		   copied("cuMemcpy2DAsync_v2", (uintptr_t)w[1] + 1024, (uintptr_t)host, 64, STREAM) &&
		   !vmmx_memcpy(ctx_of(0), peek, w[1], sizeof(peek)),
		   "cuMemcpy2DAsync_v2 from pageable memory into w1: the CPU granted w1 first");
	}
	ok(!cuMemcpyHtoDAsync_v2((uintptr_t)w[1] + 64, host, 64, STREAM) &&
	   copied("cuMemcpyHtoDAsync_v2", (uintptr_t)w[1] + 64, (uintptr_t)host, 64, STREAM),
	   "cuMemcpyHtoDAsync_v2 from pageable memory into w1 passed on unchanged");
	is_int(0, vmmx_memcpy(ctx_of(0), peek, w[1], sizeof(peek)), "... after the CPU was granted w1");
	vmmx_stats_get(ctx_of(0), &s0);
	ok(!cudaMemcpyAsync(host, w[2], sizeof(host), 2, STREAM) &&
	   !cudaMemcpyAsync(w[3], w[1], sizeof(host), 3, STREAM), "copies of device memory passed on");
	vmmx_stats_get(ctx_of(0), &s1);
	is_uint(s0.driver_calls[VMMX_OP_SET_ACCESS], s1.driver_calls[VMMX_OP_SET_ACCESS],
		"... a copy of w2, on the device, to pageable memory, and one between two libvmmx buffers grant nothing");
	/* Host memory at both ends: the driver copies it through the CPU's mapping too. */
	ok(!vmmx_prefetch(ctx_of(0), w[2], WSIZE, (struct vmmx_loc){ VMMX_LOC_HOST, 0 }, NULL) &&
	   !vmmx_prefetch(ctx_of(0), w[3], WSIZE, (struct vmmx_loc){ VMMX_LOC_HOST, 0 }, NULL) &&
	   vmmx_memcpy(ctx_of(0), peek, w[2], sizeof(peek)) == -VMMX_EFAULT &&
	   vmmx_memcpy(ctx_of(0), peek, w[3], sizeof(peek)) == -VMMX_EFAULT,
	   "w2 and w3 moved to host memory by vmmx_prefetch, granted to the GPU only");
	vmmx_stats_get(ctx_of(0), &s0);
	ok(!cuMemcpyDtoDAsync_v2((uintptr_t)w[2] + 4096, (uintptr_t)w[3] + 8192, 2 << 20, STREAM) &&
	   copied("cuMemcpyDtoDAsync_v2", (uintptr_t)w[2] + 4096, (uintptr_t)w[3] + 8192, 2 << 20,
		  STREAM),
	   "cuMemcpyDtoDAsync_v2 of 2 MiB from w3 to w2, host memory at both ends, passed on");
	vmmx_stats_get(ctx_of(0), &s1);
	ok(s1.driver_calls[VMMX_OP_SET_ACCESS] > s0.driver_calls[VMMX_OP_SET_ACCESS] &&
	   !vmmx_memcpy(ctx_of(0), peek, w[2], sizeof(peek)) &&
	   !vmmx_memcpy(ctx_of(0), peek, w[3], sizeof(peek)),
	   "... the CPU granted both ends first");
	for (int i = 0; i < NW; i++)
		data &= pattern(w[i], (unsigned char)(0x10 + i), 1);
	ok(data, "every buffer still holds its byte");
	for (int i = 0; i < NW; i++)
		cudaFree(w[i]);
	return finish_tap();
}

#define THREADS 4
#define THREAD_LAUNCHES 2000
#define THREAD_KERNELS 32

static struct fake_kernel tk[THREAD_KERNELS];
static void *ta, *tb;

/* Launches of THREAD_KERNELS kernels, new to the layout cache, from every thread at once. */
static void *launcher(void *arg)
{
	void *params[] = { &ta, &tb };
	long bad = 0;

	(void)arg;
	for (int i = 0; i < THREAD_LAUNCHES; i++)
		bad += cuLaunchKernel(&tk[i % THREAD_KERNELS], 1, 1, 1, 32, 1, 1, 0, NULL, params,
				      NULL) != 0;
	return (void *)bad;
}

static int threads(void)
{
	pthread_t t[THREADS];
	long bad = 0;

	plan_lazy();
	for (int k = 0; k < THREAD_KERNELS; k++)
		tk[k] = (struct fake_kernel){ "tk", 0, 0, 2, { 0, 8 }, { 8, 8 } };
	is_int(0, cudaMalloc(&ta, 256 * MiB), "cudaMalloc 256 MiB (the device limit)");
	is_int(0, cudaMalloc(&tb, 64 * MiB), "cudaMalloc 64 MiB (past it)");
	for (int i = 0; i < THREADS; i++)
		pthread_create(&t[i], NULL, launcher, NULL);
	for (int i = 0; i < THREADS; i++) {
		void *r;

		pthread_join(t[i], &r);
		bad += (long)r;
	}
	is_int(0, (int)bad, "%d threads x %d launches of %d kernels succeed", THREADS,
	       THREAD_LAUNCHES, THREAD_KERNELS);
	is_int(THREADS * THREAD_LAUNCHES, (int)fake_calls(FAKE_launch),
	       "every launch reaches the driver once");
	cudaFree(ta);
	cudaFree(tb);
	return finish_tap();
}

/* Not a test: nanoseconds per cuLaunchKernel(k1, a, n, b), for a look at the watch's CPU cost. */
static int bench(long n)
{
	void *a = NULL, *b = NULL;
	int v = 7;
	void *params[] = { &a, &v, &b };
	struct timespec t0, t1;

	if (cudaMalloc(&a, 256 * MiB) || cudaMalloc(&b, 64 * MiB))
		return 1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0; i < n; i++)
		cuLaunchKernel(&k1, 1, 1, 1, 32, 1, 1, 0, NULL, params, NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	printf("%.1f ns per launch\n",
	       ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)n);
	return 0;
}

/* cuGetProcAddress and dlsym hand back the interposer's launch when watching, else the driver's. */
static int lookups(void)
{
	const char *const names[] = { "cuLaunchKernel", "cuLaunchKernelEx",
				      "cuLaunchCooperativeKernel" };
	const char *pl = getenv("VMMX_RUN_PLACEMENT");
	int placed = pl && !strcmp(pl, "launch"), on = getenv("VMMX_RUN_LAUNCHES") || placed;
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	plan_lazy();
	ok(drv != NULL, "dlopen(libcuda.so.1)");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *p = NULL, *own = fake_own(names[i]);
		int st = -1;

		is_int(0, cuGetProcAddress_v2(names[i], &p, 12000, 0, &st), "cuGetProcAddress_v2(%s)",
		       names[i]);
		ok(on ? p && p != own : p == own, "cuGetProcAddress_v2(%s) is %s", names[i],
		   on ? "the interposer's" : "the driver's own (launches not watched)");
		p = drv ? dlsym(drv, names[i]) : NULL;
		ok(on ? p && p != own : p == own, "dlsym(libcuda, %s) is %s", names[i],
		   on ? "the interposer's" : "the driver's own (launches not watched)");
	}
	{
		void *p = NULL;

		is_int(0, cuGetProcAddress_v2("cuLaunchKernel", &p, 12000, 2, NULL),
		       "cuGetProcAddress_v2(cuLaunchKernel, per-thread stream)");
		ok(on ? p && p != fake_own("cuLaunchKernel_ptsz") : p == fake_own("cuLaunchKernel_ptsz"),
		   "... is %s _ptsz form", on ? "the interposer's" : "the driver's own");
	}
	/* The copies: the interposer's only under --placement launch (its copies are uses). */
	{
		const char *const copies[][2] = { { "cuMemcpyAsync", "cuMemcpyAsync" },
						  { "cuMemcpyDtoHAsync", "cuMemcpyDtoHAsync_v2" } };

		for (size_t i = 0; i < sizeof(copies) / sizeof(copies[0]); i++) {
			void *p = NULL, *own = fake_own(copies[i][1]);

			is_int(0, cuGetProcAddress_v2(copies[i][0], &p, 12000, 0, NULL),
			       "cuGetProcAddress_v2(%s)", copies[i][0]);
			ok(placed ? p && p != own : p == own, "... is %s", placed ?
			   "the interposer's (--placement launch)" : "the driver's own");
			p = drv ? dlsym(drv, copies[i][1]) : NULL;
			ok(placed ? p && p != own : p == own, "dlsym(libcuda, %s) is %s", copies[i][1],
			   placed ? "the interposer's" : "the driver's own");
		}
	}
	if (drv)
		dlclose(drv);
	return finish_tap();
}

/* ---- graphs (graphs.sh) ---- */

/*
 * Instantiate @g with @inst (@what), which must read it with @reads calls
 * of cuGraphGetNodes (0: launches not watched), then launch it @n times on
 * STREAM with @launch (@call), each reaching the driver unchanged.
 * Returns the executable graph.
 */
static void *inst_launch(int (*inst)(void **, void *, unsigned long long), const char *what,
			 struct fake_graph *g, int reads, int (*launch)(void *, void *),
			 const char *call, int n)
{
	unsigned long asked = fake_calls(FAKE_graph_get_nodes);
	void *e = NULL;

	is_int(0, inst(&e, g, 0), "%s", what);
	is_int(reads, (int)(fake_calls(FAKE_graph_get_nodes) - asked),
	       "... read with %d cuGraphGetNodes calls%s", reads,
	       reads ? "" : " (launches not watched: nothing read)");
	for (int i = 0; i < n; i++) {
		is_int(0, launch(e, STREAM), "%s %d", call, i);
		reached(call, e, STREAM, NULL, NULL);
	}
	return e;
}

/*
 * Mode "graphs": a graph whose kernel nodes name a and a2 (device) and b,
 * c and d (host) through an interior pointer, one in b's second chunk, one
 * in a by-value struct, and in a child graph a CUfunction's and a
 * CUkernel's, beside a memcpy and a memset node and a kernel without a
 * layout (whose x is not read); instantiated, launched three times.  Then a runtime graph, an executable graph
 * destroyed and its handle made again for another graph, one the driver
 * would not describe, one changed in place then updated, one never
 * instantiated.  Each call reaches the fake driver unchanged; graphs.sh
 * checks what was counted and traced (the bases are printed for it).
 */
static int graphs(void)
{
	static struct fake_graph g, gc, g2, g3;
	void *a = NULL, *a2 = NULL, *b = NULL, *c = NULL, *d = NULL, *x = NULL, *ai, *bfar, *foreign;
	void *e1, *e2, *e3 = NULL, *e4 = NULL, *unknown = (void *)0x6a6a60;
	struct k2_arg s2;
	int n = 7, on = getenv("VMMX_RUN_LAUNCHES") || getenv("VMMX_RUN_LAUNCH_TRACE");
	float f = 1.5f;

	plan_lazy();
	is_int(0, cudaMalloc(&a, 128 * MiB), "cudaMalloc a, 128 MiB");
	is_int(0, cudaMalloc(&a2, 128 * MiB), "cudaMalloc a2, 128 MiB (the device limit reached)");
	is_int(0, cudaMalloc(&b, 128 * MiB), "cudaMalloc b, 128 MiB (past the limit)");
	is_int(0, cudaMalloc(&c, 64 * MiB), "cudaMalloc c, 64 MiB (past the limit)");
	is_int(0, cudaMalloc(&d, 64 * MiB), "cudaMalloc d, 64 MiB (past the limit)");
	is_int(0, cudaMalloc(&x, 64 * MiB), "cudaMalloc x, 64 MiB (past the limit)");
	ok(where(a) == VMMX_LOC_DEVICE && where(a2) == VMMX_LOC_DEVICE &&
		   where(b) == VMMX_LOC_HOST && where(c) == VMMX_LOC_HOST &&
		   where(d) == VMMX_LOC_HOST,
	   "a and a2 lie on the device, b, c and d in host memory");
	diag("bases a=%p a2=%p b=%p c=%p d=%p x=%p", a, a2, b, c, d, x);
	ai = (char *)a + 4096 + 3;
	bfar = (char *)b + 100 * MiB;
	foreign = fake_real_alloc();
	s2 = (struct k2_arg){ 3, 0, a2, foreign };
	{
		void *p1[] = { &ai, &n, &bfar }, *p2[] = { &s2, &f }, *p5[] = { &x };

		/* an interior pointer (a), one in b's second chunk, a struct's (a2), x unread */
		fake_graph_kernel(&g, &k1, p1);
		fake_graph_kernel(&g, &k2, p2);
		fake_graph_node(&g, 1, NULL);
		fake_graph_node(&g, 2, NULL);
		fake_graph_node(&g, 4, &gc);
		fake_graph_kernel(&g, &k5, p5);
		/* the child: c by a CUfunction, d by a CUkernel (the node's kern) */
		fake_graph_kernel(&gc, &k3, (void *[]){ &c });
		fake_graph_kernel(&gc, &k4, (void *[]){ &d });
		fake_graph_kernel(&g2, &k3, (void *[]){ &a2 });
		fake_graph_kernel(&g3, &k3, (void *[]){ &b });
	}
	/* The nodes hold copies: what the program's variables say later does not count. */
	s2.p = ai = bfar = NULL;

	/* g and its child read once each (2 cuGraphGetNodes calls each). */
	e1 = inst_launch(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags(g)", &g,
			 on ? 4 : 0, cuGraphLaunch, "cuGraphLaunch", 3);
	/* The runtime's reads g2 once, not again in the driver's instantiate inside it. */
	e2 = inst_launch(cudaGraphInstantiate, "cudaGraphInstantiate(g2)", &g2, on ? 2 : 0,
			 cudaGraphLaunch, "cudaGraphLaunch", 2);

	is_int(0, cuGraphExecDestroy(e1), "cuGraphExecDestroy(g's)");
	ok(fake_exec_graph(e1) == NULL, "... reached the driver");
	is_int(0, cuGraphInstantiateWithFlags(&e3, &g3, 0), "cuGraphInstantiateWithFlags(g3)");
	ok(e3 == e1, "g3's executable graph has the handle g's had");
	is_int(0, cuGraphLaunch_ptsz(e3, NULL), "cuGraphLaunch_ptsz(g3)");
	reached("cuGraphLaunch_ptsz", e3, NULL, NULL, NULL);

	fake_graph_fail(1);
	is_int(0, cuGraphInstantiateWithFlags(&e4, &g2, 0),
	       "cuGraphInstantiateWithFlags(g2) succeeds with cuGraphGetNodes refused");
	fake_graph_fail(0);
	is_int(0, cuGraphLaunch(e4, STREAM), "its launch is passed on");
	reached("cuGraphLaunch", e4, STREAM, NULL, NULL);

	is_int(0, cuGraphExecKernelNodeSetParams_v2(e2, &g2.node[0], NULL),
	       "cuGraphExecKernelNodeSetParams_v2(g2's)");
	is_int(0, cudaGraphLaunch(e2, STREAM), "cudaGraphLaunch(g2's, changed in place)");
	is_int(0, cuGraphExecUpdate_v2(e2, &g3, NULL), "cuGraphExecUpdate_v2(g2's, g3)");
	ok(fake_exec_graph(e2) == &g3, "... reached the driver");
	is_int(0, cudaGraphLaunch(e2, STREAM), "cudaGraphLaunch(g2's, updated to g3)");
	is_int(0, cuGraphLaunch(unknown, STREAM), "cuGraphLaunch of a handle never instantiated");
	reached("cuGraphLaunch", unknown, STREAM, NULL, NULL);
	is_int(0, cudaGraphExecDestroy(e2), "cudaGraphExecDestroy(g2's)");
	is_int(0, cudaGraphExecDestroy(e3), "cudaGraphExecDestroy(g3's)");
	is_int(0, cudaGraphExecDestroy(e4), "cudaGraphExecDestroy(the unread one)");
	return finish_tap();
}

/*
 * Mode "graph-place" (--placement launch): six 64 MiB buffers, four fit;
 * a graph naming w4 and, through a child graph, w5 (both in host memory)
 * brings both in before its launch is passed on, sending back w0 and w1,
 * which another graph named before; that one's next launch brings them
 * back.  The data survives.
 */
static int graph_place(void)
{
	static struct fake_graph ga, gac, gb;
	void *w[NW] = { 0 }, *ea = NULL, *eb = NULL;
	int ok_data = 1;

	six_weights(w);
	fake_graph_kernel(&ga, &k3, (void *[]){ &w[4] });
	fake_graph_node(&ga, 4, &gac);
	fake_graph_kernel(&gac, &k3, (void *[]){ &w[5] });
	fake_graph_kernel(&gb, &k3, (void *[]){ &w[0] });
	fake_graph_kernel(&gb, &k3, (void *[]){ &w[1] });
	is_int(0, cuGraphInstantiateWithFlags(&ea, &ga, 0), "instantiate ga (w4, child: w5)");
	is_int(0, cudaGraphInstantiate(&eb, &gb, 0), "instantiate gb (w0, w1)");
	/* Only segments named before are sent back for room: gb's first. */
	is_int(0, cudaGraphLaunch(eb, NULL), "cudaGraphLaunch(gb)");
	is_int(0x0f, (int)resident(w), "nothing moved: w0 and w1 were on the device");
	/* A launch into a capture is recorded, not run: nothing is placed for it
	 * (w0 and w1, named, could make room). */
	fake_capture(1);
	is_int(0, cuLaunchKernel(&k3, 1, 1, 1, 32, 1, 1, 0, NULL, (void *[]){ &w[4] }, NULL),
	       "cuLaunchKernel(k3, w4) while the stream captures");
	fake_capture(0);
	is_int(0x0f, (int)resident(w), "w4 left in host memory: a captured launch is not placed");
	is_int(0, cuGraphLaunch(ea, NULL), "cuGraphLaunch(ga)");
	is_int(0x3c, (int)resident(w),
	       "w4 and w5 brought to the device for ga's launch, w0 and w1 sent back for room");
	is_int(0, cudaGraphLaunch(eb, NULL), "cudaGraphLaunch(gb) again");
	is_int(0x0f, (int)resident(w), "w0 and w1 brought back for gb's, w4 and w5 sent back");
	for (int i = 0; i < NW; i++)
		ok_data &= pattern(w[i], (unsigned char)(0x10 + i), 1);
	ok(ok_data, "every buffer still holds its byte after the moves");
	is_int(0, cuGraphExecDestroy(ea), "cuGraphExecDestroy(ga's)");
	is_int(0, cudaGraphExecDestroy(eb), "cudaGraphExecDestroy(gb's)");
	for (int i = 0; i < NW; i++)
		cudaFree(w[i]);
	return finish_tap();
}

/* Mode "graph-lookups": the graph entry points by dlsym and cuGetProcAddress, watched or not. */
static int graph_lookups(void)
{
	static const struct {
		const char *name, *own;
	} names[] = {
		{ "cuGraphInstantiateWithFlags", "cuGraphInstantiateWithFlags" },
		{ "cuGraphExecDestroy", "cuGraphExecDestroy" },
		{ "cuGraphExecUpdate", "cuGraphExecUpdate_v2" },
		{ "cuGraphExecKernelNodeSetParams", "cuGraphExecKernelNodeSetParams_v2" },
	};
	int on = getenv("VMMX_RUN_LAUNCHES") != NULL;
	void *drv = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);

	plan_lazy();
	ok(drv != NULL, "dlopen(libcuda.so.1)");
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		void *p = NULL, *own = fake_own(names[i].own);

		is_int(0, cuGetProcAddress_v2(names[i].name, &p, 12000, 0, NULL),
		       "cuGetProcAddress_v2(%s, 12000)", names[i].name);
		ok(on ? p && p != own : p == own, "... is %s %s",
		   on ? "the interposer's" : "the driver's own", names[i].own);
		p = drv ? dlsym(drv, names[i].own) : NULL;
		ok(on ? p && p != own : p == own, "dlsym(libcuda, %s) is %s", names[i].own,
		   on ? "the interposer's" : "the driver's own (launches not watched)");
	}
	if (drv)
		dlclose(drv);
	return finish_tap();
}

/* The graph modes (graph*); an unknown one fails. */
static int graph_mode(const char *mode)
{
	if (!strcmp(mode, "graphs"))
		return graphs();
	if (!strcmp(mode, "graph-place"))
		return graph_place();
	if (!strcmp(mode, "graph-lookups"))
		return graph_lookups();
	fprintf(stderr, "launchclient: no mode %s\n", mode);
	return 2;
}

int main(int argc, char **argv)
{
	if (argc > 2 && !strcmp(argv[1], "bench"))
		return bench(atol(argv[2]));
	if (!getenv("LD_PRELOAD"))
		skip_all("not under vmmx-run (launches.sh runs this)");
	if (park_on()) {
		set_check(NULL);
		fake_use_check(use_unmapped);
	}
	if (argc > 1 && !strncmp(argv[1], "graph", 5))
		return graph_mode(argv[1]);
	if (argc > 1 && !strcmp(argv[1], "lookups"))
		return lookups();
	if (argc > 1 && !strcmp(argv[1], "threads"))
		return threads();
	if (argc > 1 && !strcmp(argv[1], "cycle-shared"))
		return cycle_shared(argc > 2 ? atoi(argv[2]) : 1);
	if (argc > 1 && !strcmp(argv[1], "cycle"))
		return cycle();
	if (argc > 1 && !strcmp(argv[1], "place-mover"))
		return place_mover(0);
	if (argc > 1 && !strcmp(argv[1], "place-spread"))
		return place_mover(1);
	if (argc > 1 && !strcmp(argv[1], "place-spread-skip"))
		return place_mover(2);
	if (argc > 1 && !strcmp(argv[1], "place-churn"))
		return place_churn();
	if (argc > 1 && !strcmp(argv[1], "place-idle"))
		return place_idle(0);
	if (argc > 1 && !strcmp(argv[1], "place-idle-named"))
		return place_idle(1);
	if (argc > 1 && !strcmp(argv[1], "place-idle-pair"))
		return place_idle(2);
	if (argc > 1 && !strcmp(argv[1], "place-idle-used"))
		return place_idle(3);
	if (argc > 1 && !strcmp(argv[1], "place-idle-unsure"))
		return place_idle(4);
	if (argc > 1 && !strcmp(argv[1], "place-far"))
		return place_far(argc > 2 ? atoi(argv[2]) : 0);
	if (argc > 1 && !strcmp(argv[1], "cycle-rotate"))
		return cycle_rotate();
	if (argc > 1 && !strcmp(argv[1], "place"))
		return place();
	if (argc > 1 && !strcmp(argv[1], "place-pair"))
		return place_pair();
	if (argc > 1 && !strcmp(argv[1], "place-late-spill"))
		return place_late_spill();
	if (argc > 1 && !strcmp(argv[1], "quiet-fork"))
		return quiet_fork();
	if (argc > 1 && !strcmp(argv[1], "unload"))
		return unload();
	if (argc > 1 && !strcmp(argv[1], "place-jitter"))
		return place_step(0);
	if (argc > 1 && !strcmp(argv[1], "place-once"))
		return place_step(1);
	if (argc > 1 && !strcmp(argv[1], "place-noevent")) {
		fake_event_fail(1);
		return place();
	}
	if (argc > 1 && !strcmp(argv[1], "place-trial"))
		return place_trial(1, 100, 1, 0, 0, 0);
	if (argc > 1 && !strcmp(argv[1], "place-trial-even"))
		return place_trial(1, 43, 10, 0, 0, 0);
	if (argc > 1 && !strcmp(argv[1], "place-trial-pin"))
		return place_trial(1, 100, 1, 0, 0, 6);
	if (argc > 1 && !strcmp(argv[1], "place-trial-dear"))
		return place_trial(1, 2, 1000, 0, 0, 0);
	if (argc > 1 && !strcmp(argv[1], "place-trial-hot"))
		return place_trial(1, 2, 1000, 6, 0, 0);
	if (argc > 1 && !strcmp(argv[1], "place-trial-tiled"))
		return place_trial(1, 2, 1000, 6, 1, 0);
	if (argc > 1 && !strcmp(argv[1], "place-trial-drop"))
		return place_trial_drop();
	if (argc > 1 && !strcmp(argv[1], "place-trial-untimed"))
		return place_trial(0, 2, 1000, 0, 0, 0);
	if (argc > 1 && !strcmp(argv[1], "place-wait"))
		return place_wait();
	if (argc > 1 && !strcmp(argv[1], "place-copy"))
		return place_copy();
	if (argc > 1 && !strcmp(argv[1], "place-grant"))
		return place_grant();
	if (argc > 1 && !strcmp(argv[1], "place-streams"))
		return place_streams(3);
	if (argc > 1 && !strcmp(argv[1], "place-streams2"))
		return place_streams(2);
	if (argc > 1 && !strcmp(argv[1], "place-model"))
		return place_model(16 * MiB, 0, 0);
	if (argc > 1 && !strcmp(argv[1], "torture-model"))
		return place_model(16 * MiB, 0, 1);
	if (argc > 1 && !strcmp(argv[1], "place-plan"))
		return place_plan();
	if (argc > 1 && !strcmp(argv[1], "place-park"))
		return place_park(0);
	if (argc > 1 && !strcmp(argv[1], "place-pointers"))
		return place_pointers(POINTERS_ONE);
	if (argc > 1 && !strcmp(argv[1], "place-pointers-many"))
		return place_pointers(POINTERS_MANY);
	if (argc > 1 && !strcmp(argv[1], "place-pointers-unified"))
		return place_pointers(POINTERS_UNIFIED);
	if (argc > 1 && !strcmp(argv[1], "place-park-nccl"))
		return place_park(1);
	if (argc > 1 && !strcmp(argv[1], "place-pieces"))
		return place_pieces();
	if (argc > 1 && !strcmp(argv[1], "place-model-late"))
		return place_model(16 * MiB, 1, 0);
	if (argc > 1 && !strcmp(argv[1], "place-decode"))
		return place_model(64 << 10, 0, 0);
	if (argc > 1 && !strcmp(argv[1], "place-act"))
		return place_act(0);
	if (argc > 1 && !strcmp(argv[1], "place-burst"))
		return place_act(1);
	if (argc > 1 && !strcmp(argv[1], "torture"))
		return torture();
	return launches();
}
