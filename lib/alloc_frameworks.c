// SPDX-License-Identifier: MIT
/*
 * alloc_frameworks.c - the process-wide framework allocators and the entry
 * points PyTorch and CuPy call: vmmx_alloc_global_config(),
 * vmmx_alloc_global() (one allocator per device ordinal, made on first use
 * from the VMMX_* environment, never torn down: a framework frees tensors
 * during its own exit, after any destructor of ours), vmmx_torch_alloc/free
 * (the signatures of PyTorch's CUDAPluggableAllocator) and
 * vmmx_cupy_malloc/free (CuPy's PythonFunctionAllocator via ctypes).
 *
 * Why these live in libvmmx.so and not in a library of their own: the
 * Python package (python/vmmx) dlopens libvmmx.so and hands its path to
 * torch.cuda.memory.CUDAPluggableAllocator, which looks up
 * vmmx_torch_alloc/vmmx_torch_free by name in that file; CuPy's hook gets
 * its function pointers from the same handle.  A second .so would be a
 * second file to find, install and version in lockstep, for about 200
 * lines that call only the public allocator API.  They are in a file of
 * their own, over that API, so moving them out later changes no code.
 *
 * Over the public API (vmmx/alloc.h) except: vmmx__fail/vmmx__logf and the
 * context's log (the library's one error and log path, so that a failed
 * tensor allocation says why at VMMX_LOG's level), vmmx__alloc_inherited
 * (the fork rule of alloc.c) and vmmx__alloc_global_lock with
 * vmmx__alloc_atfork_install() (the atfork handlers must hold the lock
 * across a fork, outer to every other lock of the library).
 *
 * Locking: vmmx__alloc_global_lock (alloc.c: the atfork handlers take it
 * first) serialises making an allocator and vmmx_alloc_global_config();
 * global[] is written under it with release stores and read with acquire
 * loads, so the hot path (an allocator that exists) takes no lock.
 */
#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "internal/alloc.h"

/* acquire loads; written (release) under vmmx__alloc_global_lock */
static struct vmmx_alloc *global[VMMX__MAX_DEVICES];
static char **global_vars;                           /* vmmx__alloc_global_lock */
static bool global_made;                             /* vmmx__alloc_global_lock */

static void vars_free(char **v)
{
	for (size_t i = 0; v && v[i]; i++)
		free(v[i]);
	free(v);
}

VMMX_API int vmmx_alloc_global_config(const char *const *vars)
{
	char **copy = NULL;
	size_t n = 0;
	int err;

	vmmx__clear_last_error();
	for (; vars && vars[n]; n++) {
		const char *eq = strchr(vars[n], '=');

		if (strncmp(vars[n], "VMMX_", 5) || !eq || eq == vars[n] + 5)
			return vmmx__fail(NULL, -VMMX_EINVAL,
					  "vmmx_alloc_global_config: \"%s\" is not VMMX_NAME=value",
					  vars[n]);
	}
	if (vars) {
		copy = calloc(n + 1, sizeof(*copy));
		for (size_t i = 0; copy && i < n; i++) {
			copy[i] = strdup(vars[i]);
			if (!copy[i]) {
				vars_free(copy);
				copy = NULL;
			}
		}
		if (!copy)
			return vmmx__fail(NULL, -VMMX_ENOMEM,
					  "vmmx_alloc_global_config: out of memory");
	}
	err = vmmx__alloc_atfork_install();
	if (err) {
		vars_free(copy);
		return vmmx__fail(NULL, err, "vmmx_alloc_global_config: pthread_atfork failed "
					     "(out of memory)");
	}
	pthread_mutex_lock(&vmmx__alloc_global_lock);
	if (global_made) {
		pthread_mutex_unlock(&vmmx__alloc_global_lock);
		vars_free(copy);
		return vmmx__fail(NULL, -VMMX_EBUSY,
				  "vmmx_alloc_global_config: a process-wide allocator exists "
				  "already; settings are read when it is made");
	}
	vars_free(global_vars);
	global_vars = copy;
	pthread_mutex_unlock(&vmmx__alloc_global_lock);
	return 0;
}

VMMX_API int vmmx_alloc_global(int device, struct vmmx_alloc **a_p)
{
	struct vmmx_config cfg;
	struct vmmx_ctx *ctx;
	struct vmmx_alloc *a;
	int err;

	if (!a_p) {
		vmmx__clear_last_error();
		return vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_alloc_global: a_p is NULL");
	}
	if (device < 0 || device >= VMMX__MAX_DEVICES) {
		vmmx__clear_last_error();
		return vmmx__fail(NULL, -VMMX_ENODEV,
				  "vmmx_alloc_global: device %d is out of range", device);
	}
	a = __atomic_load_n(&global[device], __ATOMIC_ACQUIRE);
	if (a) {
		*a_p = a;
		return 0;
	}
	vmmx__clear_last_error();
	/*
	 * The atfork handlers hold vmmx__alloc_global_lock across a fork: installed before
	 * it is first taken (the first context would install them, but only
	 * with vmmx__alloc_global_lock held already).
	 */
	err = vmmx__alloc_atfork_install();
	if (err)
		return vmmx__fail(NULL, err,
				  "vmmx_alloc_global: pthread_atfork failed (out of memory)");
	pthread_mutex_lock(&vmmx__alloc_global_lock);
	a = global[device];
	if (a)
		goto out;
	vmmx_config_init(&cfg);
	cfg.device = device;
	cfg.vars = (const char *const *)global_vars;
	err = vmmx_ctx_create(&cfg, &ctx);
	if (err)
		goto err_unlock;
	err = vmmx_alloc_create(ctx, NULL, &a);
	if (err)
		goto err_ctx;
	global_made = true;
	__atomic_store_n(&global[device], a, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&vmmx__alloc_global_lock);
	*a_p = a;
	return 0;

err_ctx:
	vmmx_ctx_destroy(ctx);
err_unlock:
	pthread_mutex_unlock(&vmmx__alloc_global_lock);
	return err;
}

/* vmmx_alloc_malloc() on the process-wide allocator of @device, for @fn; NULL on failure. */
static void *global_malloc(const char *fn, size_t size, int device, void *stream)
{
	struct vmmx_alloc *a;
	void *p;

	if (vmmx_alloc_global(device, &a))
		return NULL;
	if (vmmx__alloc_inherited(a, fn))
		return NULL;
	if (vmmx_alloc_malloc(a, size, stream, &p)) {
		vmmx__logf(vmmx__ctx_log(vmmx_alloc_ctx(a)), VMMX_LOG_INFO, "%s(%zu, device %d): %s", fn, size,
			   device, vmmx_last_error());
		return NULL;
	}
	return p;
}

/* vmmx_alloc_free() on the process-wide allocator of @device, for @fn; failures logged. */
static void global_free(const char *fn, void *ptr, int device, void *stream)
{
	struct vmmx_alloc *a;

	if (!ptr)
		return;
	if (vmmx_alloc_global(device, &a)) {
		vmmx__logf(NULL, VMMX_LOG_ERROR, "%s(%p, device %d): %s", fn, ptr, device,
			   vmmx_last_error());
		return;
	}
	/* An inherited allocator's failure is set by vmmx__alloc_inherited. */
	if (!vmmx__alloc_inherited(a, fn) && !vmmx_alloc_free(a, ptr, stream))
		return;
	vmmx__logf(vmmx__ctx_log(vmmx_alloc_ctx(a)), VMMX_LOG_ERROR, "%s: %s", fn, vmmx_last_error());
}

VMMX_API void *vmmx_torch_alloc(ssize_t size, int device, void *stream)
{
	if (size < 0) {
		vmmx__clear_last_error();
		vmmx__fail(NULL, -VMMX_EINVAL, "vmmx_torch_alloc: negative size %zd", size);
		return NULL;
	}
	return global_malloc("vmmx_torch_alloc", (size_t)size, device, stream);
}

VMMX_API void vmmx_torch_free(void *ptr, ssize_t size, int device, void *stream)
{
	(void)size;
	global_free("vmmx_torch_free", ptr, device, stream);
}

VMMX_API void *vmmx_cupy_malloc(void *param, size_t size, int device)
{
	(void)param;
	if (size > (size_t)SSIZE_MAX) {
		vmmx__clear_last_error();
		vmmx__fail(NULL, -VMMX_ENOMEM, "vmmx_cupy_malloc: %zu bytes is too many", size);
		return NULL;
	}
	return global_malloc("vmmx_cupy_malloc", size, device, NULL);
}

VMMX_API void vmmx_cupy_free(void *param, void *ptr, int device)
{
	(void)param;
	global_free("vmmx_cupy_free", ptr, device, NULL);
}

