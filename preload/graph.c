// SPDX-License-Identifier: MIT
/*
 * graph.c - CUDA graphs under the launch watch: what an executable graph's
 * kernels name is read once, when it is instantiated, and each launch of it
 * (cuGraphLaunch, cudaGraphLaunch, launch.c) is watched as one launch that
 * names all of it.
 *
 * Instantiation (cuGraphInstantiate, _v2, WithFlags, WithParams and its
 * _ptsz form; the runtime's cudaGraphInstantiate, WithFlags, WithParams):
 * once the real call succeeded, the source graph's nodes are walked
 * (cuGraphGetNodes, cuGraphNodeGetType): a kernel node's function (its
 * CUfunction, or its CUkernel when that is NULL) and parameters come from
 * cuGraphKernelNodeGetParams_v2 and are read as a launch's are, with
 * launch.c's layout cache and word scan (vmmxp_name_params()); a child
 * graph node's graph is walked in turn, GRAPH_DEPTH deep at most; memcpy
 * and memset nodes are counted, not read; other nodes are skipped.  What is
 * kept per executable graph: the distinct segments (libvmmx buffers, by
 * base address) its kernels named, GRAPH_SEGS at most (more are counted),
 * and the number of kernel nodes.  A graph the driver refuses to describe
 * (any of those calls failing) is not kept: its launches count as not read.
 * The runtime's handles (cudaGraph_t, cudaGraphExec_t) are the driver's
 * (CUgraph, CUgraphExec), which this file relies on; the runtime's
 * instantiate reaches the driver's inside it, and a thread-local mark keeps
 * the graph from being read twice.
 *
 * Launch: the segments kept are looked up again (vmmx_lookup() on each
 * base: memory may have moved since, and a base no longer mapped is
 * skipped), then the launch is counted, traced (kernel "graph:N", N kernel
 * nodes; "params": the segments kept), fed to the cycle learner with the
 * executable graph as its kernel, and placed, as a kernel launch is
 * (vmmxp_launch_named()).  An executable graph not read (made before the
 * watch, or refused) is counted as a graph launch not read.
 *
 * Forgetting: cuGraphExecDestroy (and the runtime's) drops the entry before
 * the real call, so a new graph given the same handle is never taken for
 * the old one.  A graph changed in place (cuGraphExecKernelNodeSetParams,
 * cuGraphExecNodeSetParams, cuGraphExecChildGraphNodeSetParams and the
 * runtime's) is dropped too: its later launches count as not read, which is
 * right, where keeping the old pointers could be wrong.  cuGraphExecUpdate
 * makes an executable graph match another graph's parameters: the entry is
 * dropped (not counted as forgotten), and that graph is read into it when
 * the update succeeds.
 *
 * Locking: the table is open-addressed, keyed by the executable graph's
 * handle; keys and entries are written under table_lock (entry first, then
 * key, with release stores) and read with acquire loads, lock-free.  An
 * entry is freed when dropped: a launch of an executable graph racing its
 * own destruction is the program's error, in CUDA too; a reader probing past
 * a dropped slot reads keys only.  A dropped slot is marked GONE, or emptied
 * when the slot after it is empty, so that lookups of unknown handles stay
 * short.  Off (launches not watched), each hook calls the real entry point
 * at once and the lookups hand back the real address (resolve.c).
 */
#include "config.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "preload/preload.h"

/* Slots of the table of executable graphs: a power of two. */
#define GRAPH_SLOTS 4096
/* The most segments one executable graph keeps (a launch places at most these). */
#define GRAPH_SEGS VMMXP_PLACE_MAX
/* The deepest child graph read. */
#define GRAPH_DEPTH 8
/* A dropped slot's key (handles are aligned pointers, never 1). */
#define GONE ((void *)1)
/* The cycle learner's key of a graph: its handle xor 3 (launch.c's kinds are 0 and 1). */
#define GRAPH_KEY_KIND 3

struct graph {
	int kernels;            /* kernel nodes */
	int partial;            /* not read whole: segments dropped, copy nodes, kernels unread */
	size_t n;               /* segments */
	uint64_t seg[];         /* their bases, | the kind of the words that named
				 * each (vmmxp_word_kind(): a base is page-aligned) */
};

static void *keys[GRAPH_SLOTS];              /* table_lock; acquire loads */
static struct graph *entries[GRAPH_SLOTS];   /* table_lock; acquire loads */
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static VMMXP_TLS int in_graph_call; /* > 0: a runtime graph call of this thread is passed on */

static uint64_t n_watched, n_unread, n_read, n_failed, n_forgotten, n_kernels, n_kernels_unread,
	n_copies, n_dropped;

static void count(uint64_t *c, uint64_t n)
{
	__atomic_fetch_add(c, n, __ATOMIC_RELAXED);
}

static size_t slot_of(const void *exec)
{
	return (size_t)(((uint64_t)(uintptr_t)exec * 0x9e3779b97f4a7c15ull) >> 40) &
	       (GRAPH_SLOTS - 1);
}

/* @exec's entry, NULL if none; lock-free. */
static const struct graph *find(const void *exec)
{
	size_t i = slot_of(exec);

	for (size_t probes = 0; probes < GRAPH_SLOTS; probes++, i = (i + 1) & (GRAPH_SLOTS - 1)) {
		void *k = __atomic_load_n(&keys[i], __ATOMIC_ACQUIRE);

		if (!k)
			return NULL;
		if (k == exec)
			return __atomic_load_n(&entries[i], __ATOMIC_ACQUIRE);
	}
	return NULL;
}

/* Mark slot @i dropped; emptied (with the dropped run before it) when the next slot is empty. */
static void drop_slot(size_t i)
{
	__atomic_store_n(&entries[i], NULL, __ATOMIC_RELEASE);
	if (__atomic_load_n(&keys[(i + 1) & (GRAPH_SLOTS - 1)], __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&keys[i], GONE, __ATOMIC_RELEASE);
		return;
	}
	do {
		__atomic_store_n(&keys[i], NULL, __ATOMIC_RELEASE);
		i = (i - 1) & (GRAPH_SLOTS - 1);
	} while (keys[i] == GONE);
}

/* Drop @exec's entry, if any; @changed: counted as forgotten (changed in place). */
static void forget(const void *exec, int changed)
{
	struct graph *old = NULL;
	size_t i = slot_of(exec);

	pthread_mutex_lock(&table_lock);
	for (size_t probes = 0; probes < GRAPH_SLOTS; probes++, i = (i + 1) & (GRAPH_SLOTS - 1)) {
		if (!keys[i])
			break;
		if (keys[i] == exec) {
			old = entries[i];
			drop_slot(i);
			break;
		}
	}
	pthread_mutex_unlock(&table_lock);
	if (old && changed)
		count(&n_forgotten, 1);
	free(old);
}

/* Keep @g as @exec's entry, in place of any; returns 0, or -1 when the table is full. */
static int keep(const void *exec, struct graph *g)
{
	struct graph *old = NULL;
	size_t i = slot_of(exec), free_slot = GRAPH_SLOTS;
	int r = -1;

	pthread_mutex_lock(&table_lock);
	for (size_t probes = 0; probes < GRAPH_SLOTS; probes++, i = (i + 1) & (GRAPH_SLOTS - 1)) {
		if (keys[i] == exec) {
			old = entries[i];
			__atomic_store_n(&entries[i], g, __ATOMIC_RELEASE);
			r = 0;
			goto out;
		}
		if (keys[i] == GONE && free_slot == GRAPH_SLOTS)
			free_slot = i;
		if (!keys[i]) {
			if (free_slot == GRAPH_SLOTS)
				free_slot = i;
			break;
		}
	}
	if (free_slot < GRAPH_SLOTS) {
		__atomic_store_n(&entries[free_slot], g, __ATOMIC_RELEASE);
		__atomic_store_n(&keys[free_slot], (void *)exec, __ATOMIC_RELEASE);
		r = 0;
	}
out:
	pthread_mutex_unlock(&table_lock);
	free(old);
	return r;
}

/* One instantiation's reading: the segments so far, and the nodes seen. */
struct walk {
	struct vmmxp_named nm; /* one kernel node's chunks */
	uint64_t seg[GRAPH_SEGS];
	size_t n, dropped;
	int kernels, unread, copies;
};

/* The low bits of a kept segment's base: the kind of the words that named it. */
#define SEG_KIND ((uint64_t)(VMMXP_WORD_PAIR | VMMXP_WORD_UNSURE))

/*
 * The segment at @base, named by words of @kind, added to @w (a surer
 * word names it for all: only the kind every word shares is kept).
 */
static void add_seg(struct walk *w, uint64_t base, unsigned int kind)
{
	for (size_t i = 0; i < w->n; i++)
		if ((w->seg[i] & ~SEG_KIND) == base) {
			w->seg[i] &= ~SEG_KIND | kind;
			return;
		}
	if (w->n < GRAPH_SEGS)
		w->seg[w->n++] = base | (kind & SEG_KIND);
	else
		w->dropped++;
}

/* The segments kernel node @node names, added to @w; -1: the driver gave no parameters. */
static int read_kernel(struct walk *w, CUgraphNode node)
{
	__typeof__(&cuGraphKernelNodeGetParams_v2) get = VMMXP_REAL(cuGraphKernelNodeGetParams_v2);
	struct vmmxp_kernel_node_params p;

	memset(&p, 0, sizeof(p));
	if (!get || get(node, &p) != CUDA_OK)
		return -1;
	w->kernels++;
	vmmxp_named_start(&w->nm);
	if (vmmxp_name_params(&w->nm, p.func ? p.func : p.kern, p.params, p.extra) < 0)
		w->unread++;
	for (size_t i = 0; i < w->nm.n; i++)
		add_seg(w, (uint64_t)(uintptr_t)vmmx_buf_ptr(w->nm.chunk[i].buf), w->nm.kind[i]);
	w->dropped += w->nm.total - w->nm.n;
	return 0;
}

/* The nodes of @graph, @depth deep, read into @w; -1 if the driver refused a call. */
static int walk(struct walk *w, CUgraph graph, int depth)
{
	__typeof__(&cuGraphGetNodes) get_nodes = VMMXP_REAL(cuGraphGetNodes);
	__typeof__(&cuGraphNodeGetType) get_type = VMMXP_REAL(cuGraphNodeGetType);
	__typeof__(&cuGraphChildGraphNodeGetGraph) get_child =
		VMMXP_REAL(cuGraphChildGraphNodeGetGraph);
	CUgraphNode *nodes;
	size_t n = 0, got;
	int r = -1;

	if (depth > GRAPH_DEPTH || !get_nodes || !get_type || !get_child ||
	    get_nodes(graph, NULL, &n) != CUDA_OK)
		return -1;
	nodes = calloc(n ? n : 1, sizeof(*nodes));
	if (!nodes)
		return -1;
	got = n;
	if (get_nodes(graph, nodes, &got) != CUDA_OK)
		goto out;
	for (size_t i = 0; i < got && i < n; i++) {
		CUgraph child;
		int type;

		if (get_type(nodes[i], &type) != CUDA_OK)
			goto out;
		if (type == CU_GRAPH_NODE_KERNEL && read_kernel(w, nodes[i]))
			goto out;
		if (type == CU_GRAPH_NODE_MEMCPY || type == CU_GRAPH_NODE_MEMSET)
			w->copies++;
		if (type == CU_GRAPH_NODE_GRAPH &&
		    (get_child(nodes[i], &child) != CUDA_OK || walk(w, child, depth + 1)))
			goto out;
	}
	r = 0;
out:
	free(nodes);
	return r;
}

/* Read @graph, just instantiated as @exec, and keep what its kernels name. */
static void remember(CUgraphExec exec, CUgraph graph)
{
	struct walk *w;
	struct graph *g = NULL;

	vmmxp_depth(1);
	w = malloc(sizeof(*w));
	if (!w)
		goto err_walk;
	w->n = w->dropped = 0;
	w->kernels = w->unread = w->copies = 0;
	if (walk(w, graph, 0))
		goto err_read;
	g = malloc(sizeof(*g) + w->n * sizeof(g->seg[0]));
	if (!g)
		goto err_read;
	g->kernels = w->kernels;
	g->partial = w->dropped || w->copies || w->unread;
	g->n = w->n;
	memcpy(g->seg, w->seg, w->n * sizeof(g->seg[0]));
	if (keep(exec, g))
		goto err_keep;
	count(&n_read, 1);
	count(&n_kernels, (uint64_t)w->kernels);
	count(&n_kernels_unread, (uint64_t)w->unread);
	count(&n_copies, (uint64_t)w->copies);
	count(&n_dropped, w->dropped);
	free(w);
	vmmxp_depth(-1);
	return;

err_keep:
	free(g);
err_read:
	free(w);
err_walk:
	count(&n_failed, 1);
	forget(exec, 0);
	vmmxp_depth(-1);
}

int vmmxp_graph_watch(const char *api, CUgraphExec exec, CUstream stream)
{
	const struct graph *g = find(exec);
	struct vmmxp_named nm;
	char kernel[32];
	int held;

	vmmxp_depth(1);
	if (!g || g->partial) /* what it uses is not all known: nothing may be parked */
		vmmxp_place_unseen();
	if (!g) {
		vmmxp_depth(-1);
		count(&n_unread, 1);
		return 0;
	}
	count(&n_watched, 1);
	vmmxp_named_start(&nm);
	for (size_t i = 0; i < g->n; i++)
		vmmxp_name_seg(&nm, g->seg[i] & ~SEG_KIND, (unsigned int)(g->seg[i] & SEG_KIND));
	snprintf(kernel, sizeof(kernel), "graph:%d", g->kernels);
	held = vmmxp_launch_named(api, kernel, (int)g->n,
				  (uint64_t)(uintptr_t)exec ^ GRAPH_KEY_KIND, stream, &nm);
	vmmxp_depth(-1);
	return held;
}

void vmmxp_graph_stats(struct vmmxp_launch_stats *st)
{
	st->graphs = __atomic_load_n(&n_watched, __ATOMIC_RELAXED);
	st->graphs_unread = __atomic_load_n(&n_unread, __ATOMIC_RELAXED);
	st->graphs_read = __atomic_load_n(&n_read, __ATOMIC_RELAXED);
	st->graphs_failed = __atomic_load_n(&n_failed, __ATOMIC_RELAXED);
	st->graphs_forgotten = __atomic_load_n(&n_forgotten, __ATOMIC_RELAXED);
	st->kernel_nodes = __atomic_load_n(&n_kernels, __ATOMIC_RELAXED);
	st->kernel_nodes_unread = __atomic_load_n(&n_kernels_unread, __ATOMIC_RELAXED);
	st->copy_nodes = __atomic_load_n(&n_copies, __ATOMIC_RELAXED);
	st->segs_dropped = __atomic_load_n(&n_dropped, __ATOMIC_RELAXED);
}

void vmmxp_graph_after_fork(void)
{
	pthread_mutex_init(&table_lock, NULL);
}

static int graph_watching(void)
{
	return vmmxp_launch_on() && !in_graph_call && !vmmxp_busy();
}

/*
 * The hooks.  GDRV_HOOK: the driver's @name(@params), whose real call is
 * @name@args; watched, @before runs first and @after once the real call
 * succeeded.  GRT_HOOK: the runtime's, likewise, the real call run with the
 * thread marked so that the driver's call inside it is passed straight on.
 */
#define GDRV_HOOK(name, params, args, before, after)                                            \
	VMMXP_EXPORT CUresult name params                                                       \
	{                                                                                       \
		__typeof__(&name) real = VMMXP_REAL(name);                                      \
		CUresult r;                                                                     \
                                                                                                \
		if (!real)                                                                      \
			return CUDA_ENOTFOUND;                                                  \
		if (!graph_watching())                                                          \
			return real args;                                                       \
		before;                                                                         \
		r = real args;                                                                  \
		if (r == CUDA_OK)                                                               \
			after;                                                                  \
		return r;                                                                       \
	}

#define GRT_HOOK(name, params, args, before, after)                                             \
	VMMXP_EXPORT cudaError_t name params                                                    \
	{                                                                                       \
		__typeof__(&name) real = VMMXP_REAL(name);                                      \
		cudaError_t r;                                                                  \
                                                                                                \
		if (!real)                                                                      \
			return RT_ENOTFOUND;                                                    \
		if (!graph_watching())                                                          \
			return real args;                                                       \
		before;                                                                         \
		in_graph_call++;                                                                \
		r = real args;                                                                  \
		in_graph_call--;                                                                \
		if (r == CUDA_OK)                                                               \
			after;                                                                  \
		return r;                                                                       \
	}

#define NOTHING ((void)0)
#define INST_OLD_PARAMS                                                                         \
	(CUgraphExec * exec, CUgraph graph, CUgraphNode *err, char *log, size_t log_size)
#define INST_OLD_ARGS (exec, graph, err, log, log_size)
GDRV_HOOK(cuGraphInstantiate, INST_OLD_PARAMS, INST_OLD_ARGS, NOTHING, remember(*exec, graph))
GDRV_HOOK(cuGraphInstantiate_v2, INST_OLD_PARAMS, INST_OLD_ARGS, NOTHING, remember(*exec, graph))
GDRV_HOOK(cuGraphInstantiateWithFlags,
	  (CUgraphExec * exec, CUgraph graph, unsigned long long flags), (exec, graph, flags),
	  NOTHING, remember(*exec, graph))
#define INST_P_PARAMS (CUgraphExec * exec, CUgraph graph, void *params)
#define INST_P_ARGS (exec, graph, params)
GDRV_HOOK(cuGraphInstantiateWithParams, INST_P_PARAMS, INST_P_ARGS, NOTHING,
	  remember(*exec, graph))
GDRV_HOOK(cuGraphInstantiateWithParams_ptsz, INST_P_PARAMS, INST_P_ARGS, NOTHING,
	  remember(*exec, graph))
GDRV_HOOK(cuGraphExecDestroy, (CUgraphExec exec), (exec), forget(exec, 0), NOTHING)
GDRV_HOOK(cuGraphExecUpdate, (CUgraphExec exec, CUgraph graph, CUgraphNode *err, int *result),
	  (exec, graph, err, result), forget(exec, 0), remember(exec, graph))
GDRV_HOOK(cuGraphExecUpdate_v2, (CUgraphExec exec, CUgraph graph, void *info),
	  (exec, graph, info), forget(exec, 0), remember(exec, graph))
#define SET_PARAMS (CUgraphExec exec, CUgraphNode node, const void *params)
#define SET_ARGS (exec, node, params)
GDRV_HOOK(cuGraphExecKernelNodeSetParams, SET_PARAMS, SET_ARGS, forget(exec, 1), NOTHING)
GDRV_HOOK(cuGraphExecKernelNodeSetParams_v2, SET_PARAMS, SET_ARGS, forget(exec, 1), NOTHING)
GDRV_HOOK(cuGraphExecNodeSetParams, (CUgraphExec exec, CUgraphNode node, void *params), SET_ARGS,
	  forget(exec, 1), NOTHING)
GDRV_HOOK(cuGraphExecChildGraphNodeSetParams, (CUgraphExec exec, CUgraphNode node, CUgraph child),
	  (exec, node, child), forget(exec, 1), NOTHING)

/* CUDA 11's cudaGraphInstantiate takes 5 arguments, 12's 3: all 5 are passed on. */
GRT_HOOK(cudaGraphInstantiate,
	 (CUgraphExec * exec, CUgraph graph, uintptr_t a3, uintptr_t a4, uintptr_t a5),
	 (exec, graph, a3, a4, a5), NOTHING, remember(*exec, graph))
GRT_HOOK(cudaGraphInstantiateWithFlags,
	 (CUgraphExec * exec, CUgraph graph, unsigned long long flags), (exec, graph, flags),
	 NOTHING, remember(*exec, graph))
GRT_HOOK(cudaGraphInstantiateWithParams, INST_P_PARAMS, INST_P_ARGS, NOTHING,
	 remember(*exec, graph))
GRT_HOOK(cudaGraphInstantiateWithParams_ptsz, INST_P_PARAMS, INST_P_ARGS, NOTHING,
	 remember(*exec, graph))
GRT_HOOK(cudaGraphExecDestroy, (CUgraphExec exec), (exec), forget(exec, 0), NOTHING)
/* CUDA 11's cudaGraphExecUpdate takes 4 arguments, 12's 3: all 4 are passed on. */
GRT_HOOK(cudaGraphExecUpdate, (CUgraphExec exec, CUgraph graph, uintptr_t a3, uintptr_t a4),
	 (exec, graph, a3, a4), forget(exec, 0), remember(exec, graph))
GRT_HOOK(cudaGraphExecKernelNodeSetParams, SET_PARAMS, SET_ARGS, forget(exec, 1), NOTHING)
GRT_HOOK(cudaGraphExecNodeSetParams, (CUgraphExec exec, CUgraphNode node, void *params),
	 SET_ARGS, forget(exec, 1), NOTHING)
GRT_HOOK(cudaGraphExecChildGraphNodeSetParams,
	 (CUgraphExec exec, CUgraphNode node, CUgraph child), (exec, node, child),
	 forget(exec, 1), NOTHING)
