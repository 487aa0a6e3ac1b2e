// SPDX-License-Identifier: MIT
/*
 * cudaload.c - the one place that dlopen()s libcuda.so.1 (see cudaload.h):
 * the library is opened and every entry point of VMM_CUDA_FNS resolved at
 * the first vmm_cuda_load(), under pthread_once; later calls only check
 * that the groups they ask for were all found.
 *
 * Why dlopen and not a link: libcuda.so.1 belongs to the driver, not to the
 * toolkit, and is absent on machines without an NVIDIA GPU; a program
 * linked to it would fail to start there before it could say why.
 *
 * State: one process-wide table per copy of this unit (libvmmx has one, a
 * tool linked to libvmmx has its own: they share the driver through
 * dlopen's reference count).  It is written once inside pthread_once and
 * read-only afterwards, so readers take no lock.
 */
#include "config.h"

#ifdef VMMX_HAVE_CUDA

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "vmmx.h"
#include "vmm/cudaload.h"

#define CUDA_LIB "libcuda.so.1"

#define SYM_STR_(x)   #x
#define SYM_STR(x)    SYM_STR_(x)
#define SYM(group, f) {SYM_STR(f), offsetof(struct vmm_cuda_api, f), group},
static const struct {
	const char *name;
	size_t off;
	unsigned int group;
} syms[] = {VMM_CUDA_FNS(SYM)};
#undef SYM

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct {
	struct vmm_cuda_api api;
	unsigned int missing; /* groups with an entry point not found */
	char why[256];	      /* why the library did not load; "" when it did */
	char miss[3][96];     /* per group bit: the first missing name */
} L;

static int group_index(unsigned int group)
{
	return group == VMM_CUDA_CORE ? 0 : group == VMM_CUDA_LAUNCH ? 1 : 2;
}

static void load_once(void)
{
	/*
	 * RTLD_NODELETE and no dlclose(): cuInit starts driver threads and
	 * registers handlers that outlive any one user of the table.
	 */
	void *lib = dlopen(CUDA_LIB, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	const char *e;

	if (!lib) {
		e = dlerror();
		snprintf(L.why, sizeof(L.why), "%s", e ? e : CUDA_LIB ": unknown dlopen error");
		return;
	}
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *fn;
		int g = group_index(syms[i].group);

		dlerror();
		fn = dlsym(lib, syms[i].name);
		if (!fn) {
			if (!(L.missing & syms[i].group))
				snprintf(L.miss[g], sizeof(L.miss[g]), "%s", syms[i].name);
			L.missing |= syms[i].group;
			continue;
		}
		/* memcpy: ISO C has no conversion from void * to a function pointer. */
		memcpy((char *)&L.api + syms[i].off, &fn, sizeof(fn));
	}
}

int vmm_cuda_load(unsigned int groups, const struct vmm_cuda_api **api_p, char *why, size_t len)
{
	unsigned int miss;

	pthread_once(&once, load_once);
	if (L.why[0]) {
		snprintf(why, len,
			 "cannot load the CUDA driver: %s (is the NVIDIA driver installed?)",
			 L.why);
		return -VMMX_ENODRIVER;
	}
	miss = L.missing & groups;
	if (miss) {
		snprintf(why, len, "%s has no %s: the driver is older than the CUDA headers",
			 CUDA_LIB, L.miss[group_index(miss & -miss)]);
		return -VMMX_ENODRIVER;
	}
	*api_p = &L.api;
	return 0;
}

const char *vmm_cuda_error_name(CUresult r, char *buf, size_t len)
{
	const char *s = NULL;

	/* It returns CUDA_ERROR_INVALID_VALUE and NULL for codes it does not know. */
	if (L.api.cuGetErrorName && L.api.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
		return s;
	snprintf(buf, len, "CUresult %d", (int)r);
	return buf;
}

#endif /* VMMX_HAVE_CUDA */
