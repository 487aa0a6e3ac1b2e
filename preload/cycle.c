// SPDX-License-Identifier: MIT
/*
 * cycle.c - the launch cycle: a training or inference step launches the
 * same kernels on the same memory in the same order, step after step.  The
 * watch (launch.c) gives each launch a signature (its kernel and the chunks
 * it named, in order); this file learns the cycle they repeat and says
 * where in it each launch falls, so that placement can know the next use
 * of every chunk (the furthest one is the best victim).
 *
 * Learning: the signatures of a first pass are recorded; when the first
 * one comes back, the record is the cycle.  While the cycle holds, each
 * launch must be the one the cycle expects next; the first that is not
 * drops the cycle (the order changed: another phase, a new shape), and
 * recording starts again from that launch.  A repeat inside a step (the
 * first launch again before the step ends) makes a short, wrong cycle,
 * which the next launch drops; the next record then starts elsewhere and
 * holds the step, rotated, which is as good.  A first pass longer than
 * MAX_CYCLE launches is not learned: recording starts over.
 *
 * Locking: one mutex over all of it: the cycle is the process's order of
 * launches, whatever thread made them.  A forked child gets it afresh.
 */
#include "config.h"

#include <pthread.h>

#include "preload/preload.h"

/* The longest step learned, in launches (a 7B model's training step is a few thousand). */
#define MAX_CYCLE 65536

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rec[MAX_CYCLE]; /* lock: the record, then the cycle */
static size_t rec_n;            /* lock: signatures recorded */
static size_t cycle_len;        /* lock: 0 while recording */
static size_t pos;              /* lock: the cycle's next position */
static struct vmmxp_cycle_stats st; /* lock */

/* A forked child's lock afresh (launch.c's fork handler). */
void vmmxp_cycle_after_fork(void)
{
	pthread_mutex_init(&lock, NULL);
}

/* lock held: start a record with @sig. */
static void record(uint64_t sig)
{
	if (rec_n == MAX_CYCLE) {
		st.overflows++;
		rec_n = 0;
	}
	if (rec_n && sig == rec[0]) {
		cycle_len = rec_n;
		pos = 1 % cycle_len;
		st.learned++;
		st.last_len = cycle_len;
		st.in_cycle++;
		return;
	}
	rec[rec_n++] = sig;
}

long vmmxp_cycle_note(uint64_t sig)
{
	long at = -1;

	pthread_mutex_lock(&lock);
	if (cycle_len && rec[pos] == sig) {
		at = (long)pos;
		pos = (pos + 1) % cycle_len;
		st.in_cycle++;
	} else {
		if (cycle_len) {
			st.dropped++;
			cycle_len = 0;
			rec_n = 0;
		}
		record(sig);
		if (cycle_len)
			at = 0;
	}
	pthread_mutex_unlock(&lock);
	return at;
}

struct vmmxp_cycle_stats vmmxp_cycle_stats(void)
{
	struct vmmxp_cycle_stats s;

	pthread_mutex_lock(&lock);
	s = st;
	pthread_mutex_unlock(&lock);
	return s;
}

uint64_t vmmxp_cycle_len(void)
{
	uint64_t n;

	pthread_mutex_lock(&lock);
	n = cycle_len;
	pthread_mutex_unlock(&lock);
	return n;
}
