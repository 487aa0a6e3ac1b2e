// SPDX-License-Identifier: MIT
/*
 * resolve.c - where the interposer's entry points come from and where its
 * real counterparts are: the table of hooks, dlsym(), dlvsym(), and the
 * driver's cuGetProcAddress().
 *
 * Four ways reach a CUDA call, and each must land on a hook:
 *  - the dynamic linker: a program or library linked against libcudart.so
 *    or libcuda.so (PyTorch's libc10_cuda, CuPy) binds cudaMalloc,
 *    cuMemAlloc_v2... to the first definition in the global scope, ours,
 *    because LD_PRELOAD puts this library first;
 *  - dlsym() on a handle: a CUDA runtime (nvcc's static one, libcudart.so),
 *    XLA's driver stubs and Triton dlopen libcuda.so.1 RTLD_LOCAL and look
 *    names up there, where the global scope does not apply.  dlsym() is
 *    interposed: a lookup of a hooked name whose real answer lies in the
 *    CUDA driver or runtime (cuda_object()) hands back the hook and
 *    remembers the real address; the same name found in any other object
 *    (a library of the program's that defines its own cuMemAlloc_v2) is
 *    passed through untouched;
 *  - dlvsym(): the same, for lookups by version;
 *  - cuGetProcAddress() (both ABIs): the runtime and cuda-python ask the
 *    driver for every entry point by base name, version and stream flavour.
 *    The hook asks the real one, then swaps the answer for the matching hook
 *    when the name, version and flavour are one the interposer takes
 *    (cuMemAlloc at 3020 and later is cuMemAlloc_v2; an older version still
 *    gets the real 32-bit call).
 *
 * Real counterparts: the first real address seen for a name (from dlsym,
 * dlvsym or cuGetProcAddress) or, failing that, dlsym(RTLD_NEXT), then the
 * handles the program used to look CUDA up, then libcuda.so.1 if it is
 * loaded.  Slots are written once (compare-and-swap) and read with acquire
 * loads.
 *
 * The C library's own dlsym and dlvsym: both names are ours in the global
 * scope, and a reference of ours to dlvsym@GLIBC_2.34 binds to our
 * unversioned dlvsym too (the dynamic linker accepts an unversioned
 * definition for a versioned reference), so asking dlvsym(RTLD_NEXT, "dlsym",
 * ...) as interposers usually do would call ourselves.  They are read from
 * the C library's dynamic symbol table instead (libc_sym(): its GNU or SysV
 * hash table, the default version), once.
 *
 * dlsym(RTLD_NEXT, name) means "after the caller"; through this wrapper the
 * real dlsym() would see the wrapper as the caller.  So RTLD_NEXT is answered
 * here: walk the link map from the caller's object and take the first object
 * after it that defines the name itself (dlvsym(RTLD_NEXT) likewise).
 *
 * Recursion: the thread inside libvmmx (vmmxp_busy()) gets real answers
 * from every lookup, so libvmmx's own driver lookups reach the driver; the
 * lookups here call only the real dlsym/dlvsym, never the hooks.
 *
 * Nothing here initialises CUDA or libvmmx: the table is static and real
 * addresses are resolved when first needed.
 */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"

#define HOOK_NAME(f) #f,
static const char *const fn_names[VMMXP_FN_COUNT] = {
	VMMXP_HOOKS(HOOK_NAME) NULL, VMMXP_HELPERS(HOOK_NAME)
};
#undef HOOK_NAME

/* Hook addresses (cudaGetDevice and cuCtxGetDevice are declared only to be called). */
#define HOOK_ADDR(f) (void *)&f,
static void *const hooks[VMMXP_FN_NHOOKS] = { VMMXP_HOOKS(HOOK_ADDR) };
#undef HOOK_ADDR

static VMMXP_TLS int depth;             /* > 0: the thread is inside libvmmx (state.c) */
static void *reals[VMMXP_FN_COUNT];     /* written once (CAS), acquire loads */
static void *cuda_handle;               /* the last handle a cu* name was looked up in */
static void *cudart_handle;             /* ... a cuda* name */

typedef void *dlsym_fn(void *, const char *);
typedef void *dlvsym_fn(void *, const char *, const char *);

/* VMMX_RUN_DEBUG set: say on standard error which lookups were answered with a hook. */
static void debug(const char *via, const char *name, int fn)
{
	static int on = -1;

	if (on < 0)
		on = getenv("VMMX_RUN_DEBUG") != NULL;
	if (on)
		fprintf(stderr, "vmmx-run: %s(%s) -> %s\n", via, name,
			fn < VMMXP_FN_NHOOKS ? "the interposer's" : "the real one (remembered)");
}

/* Where the dynamic linker left a pointer of the dynamic section relocated or not. */
static const void *dyn_ptr(const struct link_map *lm, ElfW(Addr) v)
{
	return (const void *)(v < lm->l_addr ? v + lm->l_addr : v);
}

static uint32_t gnu_hash(const char *s)
{
	uint32_t h = 5381;

	for (; *s; s++)
		h = h * 33 + (unsigned char)*s;
	return h;
}

static uint32_t sysv_hash(const char *s)
{
	uint32_t h = 0, g;

	for (; *s; s++) {
		h = (h << 4) + (unsigned char)*s;
		g = h & 0xf0000000;
		h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

/*
 * @name's default-version definition in the object @lm, from its dynamic
 * symbol table; NULL if it has none.  A hidden (non-default) version is
 * taken only when there is no default one.
 */
static void *elf_sym(const struct link_map *lm, const char *name)
{
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Half) *versym = NULL;
	const uint32_t *gnu = NULL, *sysv = NULL;
	void *hidden = NULL;

	for (const ElfW(Dyn) *d = lm->l_ld; d->d_tag != DT_NULL; d++) {
		if (d->d_tag == DT_SYMTAB)
			symtab = dyn_ptr(lm, d->d_un.d_ptr);
		else if (d->d_tag == DT_STRTAB)
			strtab = dyn_ptr(lm, d->d_un.d_ptr);
		else if (d->d_tag == DT_VERSYM)
			versym = dyn_ptr(lm, d->d_un.d_ptr);
		else if (d->d_tag == DT_GNU_HASH)
			gnu = dyn_ptr(lm, d->d_un.d_ptr);
		else if (d->d_tag == DT_HASH)
			sysv = dyn_ptr(lm, d->d_un.d_ptr);
	}
	if (!symtab || !strtab)
		return NULL;
#define MATCH(i)                                                                           \
	do {                                                                               \
		const ElfW(Sym) *s = &symtab[i];                                           \
		if (s->st_shndx != SHN_UNDEF && s->st_value &&                             \
		    ELF64_ST_TYPE(s->st_info) == STT_FUNC && !strcmp(strtab + s->st_name, name)) { \
			void *p = (void *)(lm->l_addr + s->st_value);                       \
			if (!versym || !(versym[i] & 0x8000))                               \
				return p;                                                   \
			hidden = p;                                                         \
		}                                                                          \
	} while (0)
	if (gnu) {
		uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
		const uint32_t *buckets = gnu + 4 + bloom_size * (sizeof(ElfW(Addr)) / 4);
		const uint32_t *chain = buckets + nbuckets;
		uint32_t h = gnu_hash(name), i = buckets[h % nbuckets];

		for (; i >= symoffset && i; i++) {
			if ((chain[i - symoffset] | 1) == (h | 1))
				MATCH(i);
			if (chain[i - symoffset] & 1)
				break;
		}
	} else if (sysv) {
		uint32_t nbucket = sysv[0];
		const uint32_t *chain = sysv + 2 + nbucket;

		for (uint32_t i = sysv[2 + sysv_hash(name) % nbucket]; i; i = chain[i])
			MATCH(i);
	}
#undef MATCH
	return hidden;
}

/* The C library's @name (dlsym or dlvsym), never ours; aborts if there is none. */
static void *libc_sym(const char *name)
{
	struct link_map *lm = NULL;
	void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD), *p = NULL;

	if (h && !dlinfo(h, RTLD_DI_LINKMAP, &lm) && lm)
		p = elf_sym(lm, name);
	if (h)
		dlclose(h);
	/* Before glibc 2.34 they lived in libdl. */
	if (!p && (h = dlopen("libdl.so.2", RTLD_LAZY | RTLD_NOLOAD))) {
		if (!dlinfo(h, RTLD_DI_LINKMAP, &lm) && lm)
			p = elf_sym(lm, name);
		dlclose(h);
	}
	if (!p) {
		fprintf(stderr, "vmmx-run: cannot find the C library's %s; giving up\n", name);
		abort();
	}
	return p;
}

static dlsym_fn *real_dlsym(void)
{
	static dlsym_fn *fn;
	dlsym_fn *f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);

	if (!f) {
		f = (dlsym_fn *)libc_sym("dlsym");
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	return f;
}

static dlvsym_fn *real_dlvsym(void)
{
	static dlvsym_fn *fn;
	dlvsym_fn *f = __atomic_load_n(&fn, __ATOMIC_ACQUIRE);

	if (!f) {
		f = (dlvsym_fn *)libc_sym("dlvsym");
		__atomic_store_n(&fn, f, __ATOMIC_RELEASE);
	}
	return f;
}

int vmmxp_busy(void)
{
	return depth > 0;
}

void vmmxp_depth(int d)
{
	depth += d;
}

const char *vmmxp_fn_name(enum vmmxp_fn fn)
{
	return fn_names[fn];
}

void *vmmxp_hook(enum vmmxp_fn fn)
{
	return hooks[fn];
}

int vmmxp_launches_asked(void)
{
	static int asked = -1;
	int v = __atomic_load_n(&asked, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *l = getenv("VMMX_RUN_LAUNCHES");

		v = l && *l && strcmp(l, "0");
		__atomic_store_n(&asked, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* Whether a launch trace is asked for (VMMX_RUN_LAUNCH_TRACE); read once. */
static int trace_asked(void)
{
	static int asked = -1;
	int v = __atomic_load_n(&asked, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *t = getenv("VMMX_RUN_LAUNCH_TRACE");

		v = t && *t;
		__atomic_store_n(&asked, v, __ATOMIC_RELAXED);
	}
	return v;
}

int vmmxp_launch_on(void)
{
	/* --placement launch (vmmxp_copy_on(): the one reading of VMMX_RUN_PLACEMENT) */
	return vmmxp_launches_asked() || trace_asked() || vmmxp_copy_on();
}

int vmmxp_copy_on(void)
{
	static int on = -1;
	int v = __atomic_load_n(&on, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *p = getenv("VMMX_RUN_PLACEMENT");

		v = p && !strcmp(p, "launch");
		__atomic_store_n(&on, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* Whether the hook @fn is handed out by lookups now: launches and copies only when watched. */
static int handed_out(int fn)
{
	return !(vmmxp_fn_is_launch(fn) && !vmmxp_launch_on()) &&
	       !(vmmxp_fn_is_copy(fn) && !vmmxp_copy_on());
}

int vmmxp_fn_is_launch(int fn)
{
	return fn >= VMMXP_FN_cuLaunchKernel && fn <= VMMXP_FN_cuLibraryUnload;
}

static int fn_find(const char *name)
{
	if (!name || name[0] != 'c' || name[1] != 'u')
		return -1;
	for (int i = 0; i < VMMXP_FN_COUNT; i++)
		if (fn_names[i] && !strcmp(fn_names[i], name))
			return i;
	return -1;
}

/* Remember @p as the real @fn unless one is known; never one of ours. */
static void offer_real(int fn, void *p)
{
	void *none = NULL;

	if (!p || (fn < VMMXP_FN_NHOOKS && p == hooks[fn]))
		return;
	__atomic_compare_exchange_n(&reals[fn], &none, p, false, __ATOMIC_ACQ_REL,
				    __ATOMIC_ACQUIRE);
}

void *vmmxp_real(enum vmmxp_fn fn)
{
	void *p = __atomic_load_n(&reals[fn], __ATOMIC_ACQUIRE);
	void *h;

	if (p)
		return p;
	p = real_dlsym()(RTLD_NEXT, fn_names[fn]);
	if (!p) {
		h = __atomic_load_n(fn_names[fn][2] == 'd' ? &cudart_handle : &cuda_handle,
				    __ATOMIC_ACQUIRE);
		if (h)
			p = real_dlsym()(h, fn_names[fn]);
	}
	if (!p && fn_names[fn][2] != 'd') {
		h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
		if (h) {
			p = real_dlsym()(h, fn_names[fn]);
			dlclose(h);
		}
	}
	offer_real(fn, p);
	return __atomic_load_n(&reals[fn], __ATOMIC_ACQUIRE);
}

/*
 * dlsym(RTLD_NEXT, @name) (dlvsym with @version when not NULL) on behalf of
 * the object that contains @caller.
 */
static void *next_after(const void *caller, const char *name, const char *version)
{
	struct link_map *lm = NULL, *l;
	Dl_info di;

	if (!dladdr1(caller, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return version ? real_dlvsym()(RTLD_NEXT, name, version) :
				 real_dlsym()(RTLD_NEXT, name);
	for (l = lm->l_next; l; l = l->l_next) {
		Dl_info pi;
		void *h, *p;

		/* No file: the program itself (never "next") or the vDSO. */
		if (!l->l_name || !strchr(l->l_name, '/'))
			continue;
		h = dlopen(l->l_name, RTLD_LAZY | RTLD_NOLOAD);
		if (!h)
			continue;
		p = version ? real_dlvsym()(h, name, version) : real_dlsym()(h, name);
		dlclose(h);
		/* dlsym on a handle searches the object's dependencies too: keep only its own. */
		if (p && dladdr(p, &pi) && pi.dli_fname && !strcmp(pi.dli_fname, l->l_name))
			return p;
	}
	return NULL;
}

static int prefix(const char *base, const char *pre)
{
	return !strncmp(base, pre, strlen(pre));
}

/*
 * Whether @p, a real lookup's answer for a hooked name, lies in the CUDA
 * driver or runtime: the object libcuda.so.1 is (by whatever name it was
 * opened: dlopen(RTLD_NOLOAD) finds a loaded object by its file), or an
 * object whose file is named libcuda.so* or libcudart.so*.  Anything else
 * defining a CUDA name (a shim, a test double, a program's own wrapper)
 * is not ours to replace.
 */
static int cuda_object(const void *p)
{
	struct link_map *lm = NULL, *cuda = NULL;
	const char *base;
	Dl_info di;
	void *h;
	int r;

	if (!dladdr1(p, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
		return 0;
	base = lm->l_name ? strrchr(lm->l_name, '/') : NULL;
	base = base ? base + 1 : lm->l_name ? lm->l_name : "";
	if (prefix(base, "libcuda.so") || prefix(base, "libcudart.so"))
		return 1;
	h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	if (!h)
		return 0;
	r = !dlinfo(h, RTLD_DI_LINKMAP, &cuda) && cuda == lm;
	dlclose(h);
	return r;
}

/* Lookups answered with a hook, by path, for the report (relaxed atomics). */
static uint64_t n_answered[VMMXP_NPATHS];

uint64_t vmmxp_lookups(enum vmmxp_path path)
{
	return __atomic_load_n(&n_answered[path], __ATOMIC_RELAXED);
}

/* The answer to a lookup of @name on @handle whose real answer is @p. */
static void *answer(void *handle, const char *name, void *p, enum vmmxp_path path)
{
	int fn = fn_find(name);

	if (!p || fn < 0 || vmmxp_busy())
		return p;
	if (fn < VMMXP_FN_NHOOKS && p == hooks[fn])
		return p; /* the global scope found ours already */
	if (!cuda_object(p))
		return p;
	if (handle != RTLD_DEFAULT)
		__atomic_store_n(name[2] == 'd' ? &cudart_handle : &cuda_handle, handle,
				 __ATOMIC_RELEASE);
	offer_real(fn, p);
	if (fn >= VMMXP_FN_NHOOKS || !handed_out(fn))
		return p;
	__atomic_fetch_add(&n_answered[path], 1, __ATOMIC_RELAXED);
	debug(path == VMMXP_PATH_DLSYM ? "dlsym" : "dlvsym", name, fn);
	return hooks[fn];
}

VMMXP_EXPORT void *dlsym(void *handle, const char *name)
{
	void *p;

	if (handle == RTLD_NEXT)
		return next_after(__builtin_return_address(0), name, NULL);
	p = real_dlsym()(handle, name);
	return answer(handle, name, p, VMMXP_PATH_DLSYM);
}

VMMXP_EXPORT void *dlvsym(void *handle, const char *name, const char *version)
{
	void *p;

	if (handle == RTLD_NEXT)
		return next_after(__builtin_return_address(0), name, version);
	p = real_dlvsym()(handle, name, version);
	return answer(handle, name, p, VMMXP_PATH_DLVSYM);
}

/*
 * The driver's base names the interposer answers for: from version @from on,
 * @fn (or @fn_pt for the per-thread default stream flavour, when there is
 * one); before it, @old (-1: the real call, e.g. the 32-bit cuMemAlloc of
 * before CUDA 3.2).
 */
struct proc_entry {
	const char *name;
	int from;
	int fn, fn_pt, old;
};

#define FN(f) VMMXP_FN_##f
static const struct proc_entry proc_table[] = {
	{ "cuMemAlloc", 3020, FN(cuMemAlloc_v2), -1, -1 },
	{ "cuMemFree", 3020, FN(cuMemFree_v2), -1, -1 },
	{ "cuMemGetInfo", 3020, FN(cuMemGetInfo_v2), -1, -1 },
	{ "cuMemAllocPitch", 3020, FN(cuMemAllocPitch_v2), -1, -1 },
	{ "cuMemAllocAsync", 0, FN(cuMemAllocAsync), FN(cuMemAllocAsync_ptsz), -1 },
	{ "cuMemFreeAsync", 0, FN(cuMemFreeAsync), FN(cuMemFreeAsync_ptsz), -1 },
	{ "cuMemsetD8", 3020, FN(cuMemsetD8_v2), FN(cuMemsetD8_v2_ptds), -1 },
	{ "cuMemsetD16", 3020, FN(cuMemsetD16_v2), FN(cuMemsetD16_v2_ptds), -1 },
	{ "cuMemsetD32", 3020, FN(cuMemsetD32_v2), FN(cuMemsetD32_v2_ptds), -1 },
	{ "cuMemsetD8Async", 0, FN(cuMemsetD8Async), FN(cuMemsetD8Async_ptsz), -1 },
	{ "cuMemsetD16Async", 0, FN(cuMemsetD16Async), FN(cuMemsetD16Async_ptsz), -1 },
	{ "cuMemsetD32Async", 0, FN(cuMemsetD32Async), FN(cuMemsetD32Async_ptsz), -1 },
	{ "cuMemcpy", 0, FN(cuMemcpy), FN(cuMemcpy_ptds), -1 },
	{ "cuMemcpyAsync", 0, FN(cuMemcpyAsync), FN(cuMemcpyAsync_ptsz), -1 },
	{ "cuMemcpyHtoD", 3020, FN(cuMemcpyHtoD_v2), FN(cuMemcpyHtoD_v2_ptds), -1 },
	{ "cuMemcpyDtoH", 3020, FN(cuMemcpyDtoH_v2), FN(cuMemcpyDtoH_v2_ptds), -1 },
	{ "cuMemcpyDtoD", 3020, FN(cuMemcpyDtoD_v2), FN(cuMemcpyDtoD_v2_ptds), -1 },
	{ "cuMemcpyHtoDAsync", 3020, FN(cuMemcpyHtoDAsync_v2), FN(cuMemcpyHtoDAsync_v2_ptsz), -1 },
	{ "cuMemcpyDtoHAsync", 3020, FN(cuMemcpyDtoHAsync_v2), FN(cuMemcpyDtoHAsync_v2_ptsz), -1 },
	{ "cuMemcpyDtoDAsync", 3020, FN(cuMemcpyDtoDAsync_v2), FN(cuMemcpyDtoDAsync_v2_ptsz), -1 },
	{ "cuMemcpyPeer", 0, FN(cuMemcpyPeer), FN(cuMemcpyPeer_ptds), -1 },
	{ "cuMemcpyPeerAsync", 0, FN(cuMemcpyPeerAsync), FN(cuMemcpyPeerAsync_ptsz), -1 },
	{ "cuMemcpy2D", 3020, FN(cuMemcpy2D_v2), FN(cuMemcpy2D_v2_ptds), -1 },
	{ "cuMemcpy2DUnaligned", 3020, FN(cuMemcpy2DUnaligned_v2), FN(cuMemcpy2DUnaligned_v2_ptds),
	  -1 },
	{ "cuMemcpy2DAsync", 3020, FN(cuMemcpy2DAsync_v2), FN(cuMemcpy2DAsync_v2_ptsz), -1 },
	{ "cuIpcGetMemHandle", 0, FN(cuIpcGetMemHandle), -1, -1 },
	{ "cuGetProcAddress", 12000, FN(cuGetProcAddress_v2), -1, FN(cuGetProcAddress) },
	{ "cuCtxGetDevice", 0, FN(cuCtxGetDevice), -1, -1 },
	{ "cuMemAllocFromPoolAsync", 0, FN(cuMemAllocFromPoolAsync),
	  FN(cuMemAllocFromPoolAsync_ptsz), -1 },
	{ "cuDeviceGetDefaultMemPool", 0, FN(cuDeviceGetDefaultMemPool), -1, -1 },
	{ "cuDeviceGetMemPool", 0, FN(cuDeviceGetMemPool), -1, -1 },
	{ "cuMemPoolCreate", 0, FN(cuMemPoolCreate), -1, -1 },
	{ "cuMemPoolDestroy", 0, FN(cuMemPoolDestroy), -1, -1 },
	{ "cuMemPoolTrimTo", 0, FN(cuMemPoolTrimTo), -1, -1 },
	{ "cuMemPoolGetAttribute", 0, FN(cuMemPoolGetAttribute), -1, -1 },
	{ "cuMemCreate", 0, FN(cuMemCreate), -1, -1 },
	{ "cuMemRelease", 0, FN(cuMemRelease), -1, -1 },
	{ "cuMemMap", 0, FN(cuMemMap), -1, -1 },
	{ "cuLaunchKernel", 0, FN(cuLaunchKernel), FN(cuLaunchKernel_ptsz), -1 },
	{ "cuLaunchKernelEx", 0, FN(cuLaunchKernelEx), FN(cuLaunchKernelEx_ptsz), -1 },
	{ "cuLaunchCooperativeKernel", 0, FN(cuLaunchCooperativeKernel),
	  FN(cuLaunchCooperativeKernel_ptsz), -1 },
	{ "cuGraphLaunch", 0, FN(cuGraphLaunch), FN(cuGraphLaunch_ptsz), -1 },
	/* the 5-argument instantiate of CUDA 10 and 11 (12's cuda.h names WithFlags so) */
	{ "cuGraphInstantiate", 11000, FN(cuGraphInstantiate_v2), -1, FN(cuGraphInstantiate) },
	{ "cuGraphInstantiateWithFlags", 0, FN(cuGraphInstantiateWithFlags), -1, -1 },
	{ "cuGraphInstantiateWithParams", 0, FN(cuGraphInstantiateWithParams),
	  FN(cuGraphInstantiateWithParams_ptsz), -1 },
	{ "cuGraphExecDestroy", 0, FN(cuGraphExecDestroy), -1, -1 },
	{ "cuGraphExecUpdate", 12000, FN(cuGraphExecUpdate_v2), -1, FN(cuGraphExecUpdate) },
	{ "cuGraphExecKernelNodeSetParams", 12000, FN(cuGraphExecKernelNodeSetParams_v2), -1,
	  FN(cuGraphExecKernelNodeSetParams) },
	{ "cuGraphExecNodeSetParams", 0, FN(cuGraphExecNodeSetParams), -1, -1 },
	{ "cuGraphExecChildGraphNodeSetParams", 0, FN(cuGraphExecChildGraphNodeSetParams), -1, -1 },
	{ "cuGraphGetNodes", 0, FN(cuGraphGetNodes), -1, -1 },
	{ "cuGraphNodeGetType", 0, FN(cuGraphNodeGetType), -1, -1 },
	{ "cuGraphKernelNodeGetParams", 12000, FN(cuGraphKernelNodeGetParams_v2), -1, -1 },
	{ "cuGraphChildGraphNodeGetGraph", 0, FN(cuGraphChildGraphNodeGetGraph), -1, -1 },
	{ "cuModuleUnload", 0, FN(cuModuleUnload), -1, -1 },
	{ "cuLibraryUnload", 0, FN(cuLibraryUnload), -1, -1 },
	{ "cuFuncGetParamInfo", 0, FN(cuFuncGetParamInfo), -1, -1 },
	{ "cuKernelGetParamInfo", 0, FN(cuKernelGetParamInfo), -1, -1 },
	{ "cuFuncGetName", 0, FN(cuFuncGetName), -1, -1 },
	{ "cuKernelGetName", 0, FN(cuKernelGetName), -1, -1 },
};
#undef FN

/* The hook that answers cuGetProcAddress(@symbol, @version, @flags), or -1. */
static int proc_map(const char *symbol, int version, unsigned long long flags)
{
	if (!symbol || strncmp(symbol, "cu", 2))
		return -1;
	for (size_t i = 0; i < sizeof(proc_table) / sizeof(proc_table[0]); i++) {
		const struct proc_entry *e = &proc_table[i];

		if (strcmp(symbol, e->name))
			continue;
		if (version < e->from)
			return e->old;
		return (flags & CU_GET_PROC_ADDRESS_PER_THREAD) && e->fn_pt >= 0 ? e->fn_pt : e->fn;
	}
	return -1;
}

static void proc_swap(const char *symbol, int version, unsigned long long flags, void **pfn)
{
	int fn = proc_map(symbol, version, flags);

	if (fn < 0 || !*pfn || vmmxp_busy())
		return;
	offer_real(fn, *pfn);
	if (!handed_out(fn))
		return;
	debug("cuGetProcAddress", symbol, fn);
	if (fn < VMMXP_FN_NHOOKS) {
		*pfn = hooks[fn];
		__atomic_fetch_add(&n_answered[VMMXP_PATH_PROC], 1, __ATOMIC_RELAXED);
	}
}

/*
 * The driver's own lookup, CUDA 11.3 to 12 ABI (cuda.h maps cuGetProcAddress
 * to cuGetProcAddress_v2 from 12.0 on; libcuda exports both).
 */
VMMXP_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int version,
				       unsigned long long flags)
{
	CUresult (*real)(const char *, void **, int, unsigned long long);
	CUresult r;

	real = (CUresult(*)(const char *, void **, int, unsigned long long))vmmxp_real(
		VMMXP_FN_cuGetProcAddress);
	if (!real)
		return CUDA_ENOTFOUND;
	r = real(symbol, pfn, version, flags);
	if (r == CUDA_OK && pfn)
		proc_swap(symbol, version, flags, pfn);
	return r;
}

VMMXP_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version,
					  unsigned long long flags, int *status)
{
	CUresult (*real)(const char *, void **, int, unsigned long long, int *);
	CUresult r;

	real = (CUresult(*)(const char *, void **, int, unsigned long long, int *))vmmxp_real(
		VMMXP_FN_cuGetProcAddress_v2);
	if (!real)
		return CUDA_ENOTFOUND;
	r = real(symbol, pfn, version, flags, status);
	if (r == CUDA_OK && pfn)
		proc_swap(symbol, version, flags, pfn);
	return r;
}
