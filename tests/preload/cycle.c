// SPDX-License-Identifier: MIT
/*
 * cycle.c - the launch cycle learner (preload/cycle.c) driven directly, on
 * the launches an unmodified PyTorch chain makes (torch_chain.py: LAYERS
 * layers of x = relu(x @ w), 128 MiB weights, 64 MiB activations), their
 * memory handed out as PyTorch's caching allocator hands it out: the free
 * block of the size at the lowest address first, a new one when none is
 * free.  Each GEMM names its weights, its input and its output; each ReLU
 * its output then its input (equal sizes: its largest segment is its
 * output).  The GEMM's output lands in the same block at every layer, the
 * ReLU's output in one of two at even layers and, at odd layers, in one
 * of two others by turns from step to step (the last step's output is
 * still held while the next runs): the ReLU's largest segment comes round
 * after four launches inside a step, and at half the layers it is another
 * block at the next step.  The step is 2 * LAYERS launches, whatever the
 * batch: that cycle must be learned, and no other length known through
 * the last two steps.
 */
#include "config.h"

#include <stdint.h>

#include "preload/preload.h"
#include "tests/tap/basic.h"

#define LAYERS 72
#define STEPS 4 /* one warm-up and three timed */
#define MiB ((size_t)1 << 20)
#define BLOCKS (LAYERS + 8)

enum { K_RANDN = 1, K_MUL, K_GEMM, K_RELU };

/* The caching allocator's blocks of one size. */
struct pool {
	size_t size;
	uint64_t base;             /* where the next new block goes */
	uint64_t addr[BLOCKS];     /* in the order made: increasing */
	int used[BLOCKS], n;
};

static uint64_t pool_alloc(struct pool *p)
{
	for (int i = 0; i < p->n; i++)
		if (!p->used[i]) {
			p->used[i] = 1;
			return p->addr[i];
		}
	if (p->n == BLOCKS)
		bail("more than %d blocks of %zu MiB", BLOCKS, p->size / MiB);
	p->addr[p->n] = p->base;
	p->base += p->size;
	p->used[p->n] = 1;
	return p->addr[p->n++];
}

static void pool_free(struct pool *p, uint64_t a)
{
	for (int i = 0; i < p->n; i++)
		if (p->addr[i] == a)
			p->used[i] = 0;
}

static long launch(uint64_t kernel, uint64_t a, size_t sa, uint64_t b, size_t sb, uint64_t c,
		   size_t sc)
{
	uint64_t segs[3] = { a, b, c };
	size_t sizes[3] = { sa, sb, sc };

	return vmmxp_cycle_note(kernel, segs, sizes, c ? 3 : b ? 2 : 1, SIZE_MAX);
}

int main(void)
{
	struct pool big = { 128 * MiB, 1ull << 40, { 0 }, { 0 }, 0 };
	struct pool act = { 64 * MiB, 1ull << 41, { 0 }, { 0 }, 0 };
	uint64_t w[LAYERS], x0, out = 0;
	struct vmmxp_cycle_stats st;
	int unknown = 0, short_known = 0;

	plan(5);
	/* The weights: randn into a temporary, times a scale into the weights. */
	for (int i = 0; i < LAYERS; i++) {
		uint64_t tmp = pool_alloc(&big);

		launch(K_RANDN, tmp, big.size, 0, 0, 0, 0);
		w[i] = pool_alloc(&big);
		launch(K_MUL, w[i], big.size, tmp, big.size, 0, 0);
		pool_free(&big, tmp);
	}
	x0 = pool_alloc(&act);
	launch(K_RANDN, x0, act.size, 0, 0, 0, 0);
	for (int step = 0; step < STEPS; step++) {
		uint64_t x = x0;

		for (int i = 0; i < LAYERS; i++) {
			uint64_t t = pool_alloc(&act), y, len;

			launch(K_GEMM, w[i], big.size, x, act.size, t, act.size);
			y = pool_alloc(&act);
			launch(K_RELU, y, act.size, t, act.size, 0, 0);
			pool_free(&act, t);
			if (x != x0)
				pool_free(&act, x);
			x = y;
			len = vmmxp_cycle_len(NULL);
			if (step >= 2 && len != 2 * LAYERS) {
				unknown++;
				if (len)
					short_known++;
			}
		}
		if (out)
			pool_free(&act, out);
		out = x;
	}
	st = vmmxp_cycle_stats();
	diag("learned %llu, last %llu launches long, dropped %llu, proposed %llu, rejected %llu, "
	     "refused %llu, %llu launches in a cycle",
	     (unsigned long long)st.learned, (unsigned long long)st.last_len,
	     (unsigned long long)st.dropped, (unsigned long long)st.proposed,
	     (unsigned long long)st.rejected, (unsigned long long)st.refused,
	     (unsigned long long)st.in_cycle);
	ok(act.n >= 4, "the allocator's activations rotate among %d blocks", act.n);
	ok(st.learned >= 1, "vmmxp_cycle_note: a cycle learned (%llu times)",
	   (unsigned long long)st.learned);
	is_int(2 * LAYERS, (int)st.last_len,
	       "vmmxp_cycle_note: the cycle learned is the step's %d launches", 2 * LAYERS);
	is_int(0, short_known, "vmmxp_cycle_len: no other length known through the last two steps");
	ok(st.refused > 0,
	   "vmmxp_cycle_note: the short cycles of keys repeating inside a step refused (%llu)",
	   (unsigned long long)st.refused);
	diag("%d launches of the last two steps without the cycle known", unknown);
	return tap_done();
}
