// SPDX-License-Identifier: MIT
/*
 * fork.c - fork() without exec: the process's contexts, the atfork handlers,
 * and what an inherited context may still do in the child.
 *
 * A CUDA context cannot be used in a forked child, and the driver's state
 * (handles, mappings, streams) belongs to the parent.  So a context records
 * the process that created it, and in any other process every call on it
 * fails at once with -VMMX_ENODRIVER (vmmx__inherited(), checked first by
 * each entry point, before any lock or driver call); only the destructors
 * run, and they free this process's host-side records without calling the
 * driver or a policy plugin (vmmx__ctx_abandon(), vmmx__buf_abandon()).
 * The sim backend is treated as the driver it emulates.
 *
 * The framework allocators (alloc.c) follow the same rule: in the child
 * every vmmx_alloc_*, vmmx_torch_* and vmmx_cupy_* call on an allocator the
 * parent made fails at once with -VMMX_ENODRIVER ("allocator inherited from
 * the parent process N"), hands out no pointer and calls no driver;
 * vmmx_alloc_destroy() frees the child's copy of its records only.  The
 * process-wide allocators (vmmx_alloc_global()) are inherited like any
 * other: the child's vmmx_alloc_global() answers the parent's, on which
 * every call fails, and vmmx_torch_alloc() returns NULL saying so.  A
 * device the parent made none for gets a new one where the backend allows
 * a context in the child (sim; cuda refuses).
 *
 * A fork while other threads resize, look up, register or allocate must
 * leave the child's copies of libvmmx's locks free and its lists whole,
 * and must not deadlock the parent.  The handlers take, in this order:
 *   1. the framework allocators' locks (alloc.c's handlers, registered with
 *      vmmx__atfork_install_outer()):
 *      the process-wide allocators' lock (vmmx__alloc_global_lock), the allocator
 *      list's lock, then each allocator's a->lock;
 *   2. the context list's lock (ctx_list_lock);
 *   3. each context's ctx->lock, reg_lock, cache_lock, hva_lock (in that
 *      order, the order the library nests them in, never the reverse);
 *   4. urcu-bp's locks (urcu_bp_before_fork(), as its documentation asks of
 *      any fork without exec);
 *   5. the driver layer's process-wide lock (the sim's; vmm_atfork_*).
 * Why that order: global_lock is held while a process-wide allocator's
 * context is made (which takes ctx_list_lock and the context's locks), and
 * a->lock across segment creation and release (buffer, context and RCU
 * locks, grace periods, driver calls), so both come before everything of
 * the contexts'; no thread holding a->lock waits for global_lock or the
 * allocator list's lock.  ctx->lock may be held across a grace period (a
 * buffer list's fallback path), so RCU's locks come after the context
 * locks; no thread waits for the driver layer's lock inside an RCU
 * read-side section or while holding an RCU lock, and the driver layer
 * takes no lock of ours, so its lock may come last.  Buffer locks are not
 * taken: a resize holds one across many driver calls and grace periods,
 * and an inherited buffer is never locked in the child (its destructor
 * frees the published table, which RCU keeps whole at every instant).  The
 * parent's handler releases everything in reverse order; so does the
 * child's, after resetting urcu-bp (threads that did not survive the fork
 * leave its registry).  The handlers are installed when the first context
 * is created or vmmx_alloc_global*() is first called, before global_lock is
 * first taken.
 *
 * Locking: ctx_list_lock protects the list of live contexts; it is outer
 * to every lock of the contexts, inner to the allocators' (internal.h), and
 * held only for list edits and across a fork.
 */
#include "config.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal/obj.h"

static pthread_mutex_t ctx_list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct vmmx_ctx *ctx_list; /* ctx_list_lock */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static int atfork_err; /* written once, under atfork_once */
int vmmx__pid;	       /* atomic: the process we run in */

/* The framework allocators' handlers (alloc.c), outer to ours:
 * set once before their locks are first taken (vmmx__atfork_install_outer);
 * @outer_taken is what this fork's prepare called, so that its release
 * matches it even if they were set in between. */
static void (*outer_prepare)(void), (*outer_release)(void); /* atomic */
static void (*outer_taken)(void); /* between prepare and parent/child */

static void prepare(void)
{
	outer_taken = __atomic_load_n(&outer_release, __ATOMIC_ACQUIRE);
	if (outer_taken)
		__atomic_load_n(&outer_prepare, __ATOMIC_ACQUIRE)();
	pthread_mutex_lock(&ctx_list_lock);
	for (struct vmmx_ctx *c = ctx_list; c; c = c->list_next) {
		pthread_mutex_lock(&c->lock);
		pthread_mutex_lock(&c->reg_lock);
		pthread_mutex_lock(&c->cache_lock);
		pthread_mutex_lock(&c->hva_lock);
	}
	urcu_bp_before_fork();
	vmm_atfork_prepare();
}

static void release_ctx_locks(void)
{
	for (struct vmmx_ctx *c = ctx_list; c; c = c->list_next) {
		pthread_mutex_unlock(&c->hva_lock);
		pthread_mutex_unlock(&c->cache_lock);
		pthread_mutex_unlock(&c->reg_lock);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&ctx_list_lock);
}

static void parent(void)
{
	vmm_atfork_parent();
	urcu_bp_after_fork_parent();
	release_ctx_locks();
	if (outer_taken)
		outer_taken();
}

static void child(void)
{
	vmm_atfork_child();
	urcu_bp_after_fork_child();
	__atomic_store_n(&vmmx__pid, (int)getpid(), __ATOMIC_RELAXED);
	release_ctx_locks();
	if (outer_taken)
		outer_taken();
}

static void atfork_init(void)
{
	__atomic_store_n(&vmmx__pid, (int)getpid(), __ATOMIC_RELAXED);
	atfork_err = pthread_atfork(prepare, parent, child) ? -VMMX_ENOMEM : 0;
}

int vmmx__atfork_install(void)
{
	pthread_once(&atfork_once, atfork_init);
	return atfork_err;
}

int vmmx__atfork_install_outer(void (*take)(void), void (*give)(void))
{
	__atomic_store_n(&outer_prepare, take, __ATOMIC_RELEASE);
	__atomic_store_n(&outer_release, give, __ATOMIC_RELEASE);
	return vmmx__atfork_install();
}

int vmmx__ctx_list_add(struct vmmx_ctx *ctx)
{
	int err = vmmx__atfork_install();

	if (err)
		return vmmx__fail(&ctx->conf.log, err,
				  "vmmx_ctx_create: pthread_atfork failed (out of memory)");
	pthread_mutex_lock(&ctx_list_lock);
	ctx->pid = __atomic_load_n(&vmmx__pid, __ATOMIC_RELAXED);
	ctx->list_prev = NULL;
	ctx->list_next = ctx_list;
	if (ctx_list)
		ctx_list->list_prev = ctx;
	ctx_list = ctx;
	pthread_mutex_unlock(&ctx_list_lock);
	return 0;
}

void vmmx__ctx_list_del(struct vmmx_ctx *ctx)
{
	pthread_mutex_lock(&ctx_list_lock);
	if (ctx->list_prev)
		ctx->list_prev->list_next = ctx->list_next;
	else
		ctx_list = ctx->list_next;
	if (ctx->list_next)
		ctx->list_next->list_prev = ctx->list_prev;
	pthread_mutex_unlock(&ctx_list_lock);
}

int vmmx__fail_inherited(const struct vmmx_ctx *ctx, const char *fn)
{
	return vmmx__fail(&ctx->conf.log, -VMMX_ENODRIVER,
			  "%s: context created in process %d; CUDA cannot be used after fork "
			  "(this is process %d): only vmmx_buf_destroy, vmmx_stream_destroy, "
			  "vmmx_event_destroy and vmmx_ctx_destroy may be called on it here",
			  fn, ctx->pid, __atomic_load_n(&vmmx__pid, __ATOMIC_RELAXED));
}

