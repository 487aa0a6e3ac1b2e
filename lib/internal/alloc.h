/* SPDX-License-Identifier: MIT */
/*
 * internal/alloc.h - layer 4 of lib/: the framework allocator (alloc.c) and
 * its process-wide instances and framework entry points
 * (alloc_frameworks.c).  Its public part is include/vmmx/alloc.h.  Includes
 * addr.h (every layer below); alloc.c's top comment says which internals it
 * still uses and why.
 */
#ifndef VMMX_LIB_INTERNAL_ALLOC_H
#define VMMX_LIB_INTERNAL_ALLOC_H

#include "addr.h"

/*
 * The process-wide allocators' lock (alloc_frameworks.c: making one,
 * vmmx_alloc_global_config): the outermost lock of the library, taken first
 * by the atfork handlers (alloc.c).
 */
extern pthread_mutex_t vmmx__alloc_global_lock;
/* Install the atfork handlers with the allocators' (before any of their
 * locks is first taken); 0 or -VMMX_ENOMEM. */
int vmmx__alloc_atfork_install(void);
/* Whether @a is the parent's (a forked child): then the last error says so,
 * for @fn, and nothing may be done with it. */
bool vmmx__alloc_inherited(const struct vmmx_alloc *a, const char *fn);

#endif /* VMMX_LIB_INTERNAL_ALLOC_H */
