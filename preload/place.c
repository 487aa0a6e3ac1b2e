// SPDX-License-Identifier: MIT
/*
 * place.c - vmmx-run --placement launch: before a watched launch is passed
 * on, the segments it names that lie in host memory, wholly or partly, are
 * brought to the device under the same address (vmmx_prefetch()); when the
 * device is full, a segment an earlier launch named is sent back to host
 * memory to make room.  With a known launch cycle, the segments the next
 * launches will name are brought in ahead, right after a launch is passed
 * on, so that their copies run while its kernel does.
 *
 * The unit is the segment (the libvmmx buffer a named chunk belongs to),
 * not the chunk: a kernel given a tensor's base reads the whole tensor,
 * which spans many chunks.  An allocation of 10 MiB or more is a segment
 * of its own; smaller ones share the allocator's segments, which then move
 * together.
 *
 * Pieces (VMMX_RUN_PLACE_PIECES=1).  A segment of more than a quarter of
 * the device (its limit) in several chunks moves a chunk at a time: each
 * chunk is a piece, a unit of its own.  Such a segment holds many tensors (transformers' warm-up
 * segment, which PyTorch carves half a model's weights out of); moved
 * whole, it would send back a good part of the device for a kernel that
 * reads one of its tensors.  A piece is named by a launch whose pointer
 * lies in it.  Where a tensor ends is not known, so a kernel named at an
 * address is taken to read from there on, to the end of the segment, and
 * never below: a piece moves only
 *  - after the last uses of the pieces at and below it in its segment
 *    (wait_last_use());
 *  - when no piece at or below it is named by the newest launch (which may
 *    be on its way to the driver, its use not recorded yet) or held by a
 *    copy being passed on (piece_blocked(): never a victim, never begun by
 *    a mover meanwhile);
 * and a launch or copy naming a piece waits for the moves under way of
 * the pieces at and above it (wait_pieces_above()).  So the pieces below
 * the ones in use move freely (a forward's weights already used make room
 * for those it needs next), and those above wait for the kernels below
 * them.  vmmx-run then cuts the program's allocations into chunks of at
 * most 128 MiB (VMMX_CHUNK_MAX, unless set).  Not the default: on the H200
 * it made a Hugging Face 7B prefill at 1.5x the cap 47% slower and its
 * decode 13% (the first half of a forward still moves nothing: its next
 * 32 launches name only resident pieces, and the pieces it used are
 * expected again a gap from now, named in bursts), a 1B training step 8%
 * faster (docs/PRELOAD.md).
 *
 * Parked (VMMX_RUN_PLACE_PARK=1).  A send back parks (vmmx_park()): a
 * segment whose verified host copy is current leaves its addresses
 * unmapped, the copy mapped at libvmmx's own, so that neither it nor the
 * bring-in maps or grants host memory at the segment's addresses (what a
 * round trip's driver time went to).  A segment the watch may have parked
 * is mapped in place (vmmx_unpark(), unpark()) before a launch, copy or
 * memset that names it is passed on while it lies in host memory; and the
 * first launch the watch cannot read whole stops parking for good, with
 * everything parked mapped in place first (vmmxp_place_unseen()).  A
 * piece is never parked, nor a segment that host data copied to the
 * device points into (copy.c reads small copies for addresses:
 * vmmxp_place_pointed()).  Not the default: a kernel reaching a parked
 * segment through a pointer the GPU wrote to device memory would fault (on the
 * H200 it made a 7B prefill 29% faster, the matmul chain a median 12%:
 * docs/PRELOAD.md).
 *
 * Spread.  Which segments stay is chosen for the cycle rather than left to
 * allocation's order (spread_choose()): a step then has moves to overlap
 * all along it, not only after its first, resident, segments (on the H200
 * the matmul chain at batch 4096 parked 11-13% faster, sent back mapped
 * 9-12%), and moves are looked for further ahead (AHEAD_SPREAD launches:
 * the 7B Hugging Face prefill loaded a segment a weight, parked, 103 ms
 * against 136 with AHEAD).  By default only for a cycle the trial timed
 * moving clearly faster for (SPREAD_MARGIN; spread_now()): the trial
 * measures moving as allocation's order keeps it, and a cycle reading in
 * place, not yet decided, or about even keeps Belady's set.  Spread over
 * every moving cycle, the trial's too, a Hugging Face training step took
 * 337-341 ms against 279-293 (its cycles changing, those undecided moving
 * spread; H200).  VMMX_RUN_PLACE_SPREAD=1 spreads every moving cycle (the
 * trial's moving side too), 0 none.
 *
 * The victim: never a segment this launch names, nor one the launches
 * ahead name before the segment brought in ahead is used (see
 * bring_in_ahead(), "do no harm").  With a known launch cycle (cycle.c)
 * of L launches, a segment last named at launch s is next needed at about
 * s + L (a step later: exact for one named once per step, as a layer's
 * weights are), or at s + g when the gap g between its last two uses is
 * shorter (an activation buffer named by layer after layer), and the one
 * needed furthest in the future goes (Belady); without a cycle, the least
 * recently named.  Only segments some launch named are tracked, so memory
 * no kernel was seen to use is never pushed out by this.  The victims a
 * move needs are all chosen before the first goes: when those allowed
 * cannot make the room, none goes, and the segment is read in place.
 * They are chosen again before each next one goes, from where things are
 * then (on the mover, which lets the lock go around each move, what was
 * chosen may have been named or moved meanwhile).
 * A segment of more than a quarter of the device (its limit) is too large
 * to make room for: never a victim, brought in only into free room (see
 * promote()), unless it moves in pieces (above).
 *
 * Pairs.  A segment a launch names only by words that read as two 32-bit
 * integers (vmmxp_word_kind(): PyTorch's index calculators hold sizes such
 * as { 3, 4 }, the address 0x400000003) is held as the launch's (never a
 * victim for it, its mover waited for, mapped in place if parked, the
 * launch its last use) but is not brought in, and the launch is not a
 * naming of it (last, named, the plan): a kernel that did read there reads
 * it where it lies, and one that did not holds nothing on the device.
 *
 * When not to move: a segment that is at least two thirds of the bytes its
 * launch names, beside other segments, is taken to be read once by it (a
 * matrix-vector product: batch 1 to a few dozen, decode; a launch naming
 * one segment only is not judged; segments too large to move do not
 * count, see below): a copy crosses the link with the same
 * bytes the kernel would read in place, and sending a victim back crosses
 * it again.
 * Such a segment is brought in only into free room or, a cycle known, in
 * place of a segment needed later than it; when the device is full of
 * segments needed sooner, or no cycle is known yet, it is read in place
 * (counted).
 *
 * Ordering: last uses, not the whole device.  After each launch is passed
 * on, an event is recorded on its stream (a ring of EVENTS events, one per
 * launch that named a segment), and every segment it named remembers that
 * event as its last use.  Before a segment moves, either way, its last use
 * is waited for (a query first: the wait is counted only when the kernel
 * was still running).  The moves themselves complete before
 * vmmx_prefetch() returns (libvmmx has no move that returns before its
 * copy is done), so the launch that needs them is passed on after them in
 * program order and no stream wait is needed for them.  A ring slot is
 * recorded again only after its previous event completed, so a use older
 * than the ring is known complete.  When an event cannot be made or recorded (a
 * launch on another device's context, a driver without events) the moves
 * of a segment it covered wait for the whole device (vmmx_sync()), as
 * before, counted.  Copies and memsets are uses too (copy.c,
 * vmmxp_place_use()): the segments one reads or writes are held while it is
 * passed on (never a victim, never moved by the mover or a launch), then
 * the event recorded after it is their last use.  Two streams a segment:
 * it keeps its last use on up to two streams, the latest and the last one
 * on another stream (a copy on a side stream beside a kernel that still
 * runs, as JAX and PyTorch make), and a move waits for both, the older
 * first.  A use on the stream of one replaces that one: a stream runs its
 * work in order.  A use on a third stream would drop the older: unless it
 * is complete, that stream is first made to wait for it on the GPU
 * (cuStreamWaitEvent, before the new event is recorded), so the new event
 * completes after it (counted, "streams joined"); when that call fails,
 * the segment's use is unknown, and its next move waits for the whole
 * device, whatever uses are recorded before it (so does one's after a
 * launch with no event, before memory spilled).
 * No device sync is made for this: one instead broke XLA's graph
 * captures on the GPU.  A launch or copy on a capturing stream is
 * not placed, and leaves the uses as they were, so no stream is joined
 * inside a capture.  Streams are told apart by their handle: the legacy
 * default stream, which also waits for the others, counts as one more
 * (more waits, never fewer); the per-thread default stream's one handle
 * stands for a stream of each thread, so its uses are never taken for
 * one stream's.
 * Work the watch cannot see (a pointer inside a kernel's own data
 * structure, a 3D or batched copy) is not waited for: such memory must be
 * named by the launches that use it, or VMMX_RUN_PLACE_WAIT=device set,
 * which makes every wait one for the whole device, as the first version
 * did.
 *
 * The movers: moves ahead run on threads of their own (started at the
 * first one), so that the program goes on launching while a segment it
 * needs a few launches later is copied in and its victim sent back.  The
 * launching thread queues them (bring_in_ahead()), in the order they are
 * needed; each mover takes the next one and lets the lock go around each
 * wait and move.  Two movers by default: a send back is driver calls on
 * the CPU (remapping: about 1.7 ms per 128 MiB on the H200) and a bring-in
 * mostly a copy over the link (2.4 ms), so one mover's send backs run
 * while the other's copy does, where one mover did them one after the
 * other.  Each move is still whole and in order for its own segment; two
 * movers never choose the same victim (it is marked moving), and a move
 * that finds its room taken by the other's chooses again.  A segment
 * queued or being moved by a mover, to the device
 * or back for room, is marked moving: never a victim, and a launch that
 * names it waits for the mover to be done with it, then looks where it lies
 * (on the device, or sent back meanwhile and brought in on demand).  So a
 * launch is still passed on only with its segments where they were placed
 * for it, after the moves, in program order.  A queued move is dropped when
 * the cycle changed since, and a move that finds no room without harm drops
 * the rest of the queue.  At exit the moves in flight finish first.
 * VMMX_RUN_PLACE_MOVER=N sets the movers (1 to MOVERS_MAX, default 2);
 * 0 makes moves ahead on the launching thread, one launch's worth after
 * each launch, as the first version did, and so does
 * VMMX_RUN_PLACE_WAIT=device (movers_wanted()).
 *
 * The trial: moving against reading in place, timed.  Once a cycle is
 * confirmed, a timed event is recorded at its first launch each pass: a
 * cycle moving settles and one is measured, then a cycle reading in place
 * settles and one is measured, and the side the GPU timed faster is kept
 * for that cycle (and one as long: the same step learned again; and while
 * no cycle is known).  With its moving side spread
 * (VMMX_RUN_PLACE_SPREAD=1), a pass in which libvmmx made host memory (a
 * send back's first) is settled past or measured again, up to TRIAL_SETTLE
 * passes more a side.  Reading in place: no moves ahead, and a segment is
 * brought in on demand only in place of segments named fewer times in the
 * last cycle (freq), so that the device settles on those read most.  The
 * cycle gone mid-trial cuts the trial short, moving again.
 * VMMX_RUN_PLACE_TRIAL: the cycles measured each way (0: no trial).
 * A naming by a tiled kernel weighs TILED_WEIGHT: one launched with
 * TILED_SHARED bytes of dynamic shared memory or more works on tiles it
 * reads again (a GEMM, an attention), so reading its operands in place
 * crosses the link many times over, where an elementwise kernel (an
 * optimizer's, named as often) reads each byte once.  On a Hugging Face
 * training step, ranked by namings alone, parameters that the GEMMs read
 * were left in host memory while the optimizer's state held the device.
 *
 * Locking: lock over the table, the plan, the events, the mover's queue
 * and the counters; gate, outer, serialises the launching threads: held by
 * vmmxp_place_launch() until vmmxp_place_done(), around the real launch, so
 * another thread's launch cannot slip in between the moves and the launch
 * they were made for; lock is let go around the real launch (and while
 * waiting for the mover), so that the mover is not starved by a program
 * that launches back to back.  cur is the gate's.  Moves
 * keep the data: each chunk moves whole or not at all (vmmx_buf_migrate()),
 * and a move that fails leaves it where it was, to be read in place as
 * before.  A forked child gets both locks afresh, and no mover
 * (vmmxp_place_after_fork()).
 */
#include "config.h"

#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "preload/preload.h"

/* Segments tracked: past this, new ones are moved but never chosen as victims. */
#define MAX_TRACKED 16384
#define INDEX_SLOTS (2 * MAX_TRACKED)
/* Buffers in pieces whose busy floor is kept until the next launch (busy_floor_kept()). */
#define FLOORS 8
/* Victims tried for one segment before it is left where it is. */
#define MAX_EVICT 16
/* Last-use events in the ring: far more launches than a GPU's queue holds. */
#define EVENTS 1024
/* Cycle positions whose segments are kept for bringing in ahead. */
#define PLAN_SLOTS 65536
/* Segments kept per position (the launch's first ones). */
#define PLAN_SEGS 8
/*
 * Launches looked ahead for segments to bring in (each a few hash lookups):
 * by default, while the kept set is spread (spread_choose()), and at most
 * (VMMX_RUN_PLACE_AHEAD).
 */
#define AHEAD 32
#define AHEAD_SPREAD 128
#define AHEAD_MAX 1024
/* Launches between two looks at whether the context holds host memory, until it does. */
#define SPILL_CHECK 64
/* Launches a move ahead of a segment read once waits after finding no free room. */
#define ONCE_RECHECK 64
/* Mover threads at most (VMMX_RUN_PLACE_MOVER), and by default. */
#define MOVERS_MAX 4
#define MOVERS_DEFAULT 2
/*
 * Moves ahead queued or under way at once (see bring_in_ahead()): the
 * movers' ring holds DEPTH_MAX; depth() of them are used, the movers and
 * two more.
 */
#define DEPTH_MAX (MOVERS_MAX + 2)
/* Cycles the trial may measure each way (VMMX_RUN_PLACE_TRIAL). */
#define TRIAL_MAX 8
/* Passes more a side of the trial may settle while host memory is still being made. */
#define TRIAL_SETTLE 2
/* By default the kept set is spread over a cycle moving timed at most this much of reading in place. */
#define SPREAD_MARGIN 0.9
/* spread_choose(): a pass is known enough with all but at most 1 / SPREAD_GAPS of its places. */
#define SPREAD_GAPS 8
/* Dynamic shared memory from which a launch is taken for tiled, and what its namings weigh. */
#define TILED_SHARED (32u << 10)
#define TILED_WEIGHT 4
/* CU_EVENT_DISABLE_TIMING, CUDA_ERROR_NOT_READY (cuda.h) */
#define EVENT_DISABLE_TIMING 0x2
#define CU_NOT_READY 600

struct tracked {
	void *base;
	size_t size;
	void *whole;            /* a piece's buffer (its base; see the top), NULL for a segment */
	struct vmmx_ctx *ctx;
	uint64_t last;          /* the launch (seq) that last named it */
	uint64_t prev;          /* ... the one before, 0 if none */
	uint64_t use;           /* its last use: the event ring's number, 0 if unknown */
	uint64_t use2;          /* its last use on another stream than use's, 0 if none */
	uint64_t unknown;       /* work with no event used it (1 + uses then), 0 if none:
				 * its next move waits for the device, whatever it used since */
	uint32_t named;         /* launches, copies and memsets that named it (tiled: weighed) */
	uint32_t named0;        /* ... as counted at the cycle's last first launch */
	uint32_t freq;          /* ... over the last whole cycle (reading in place: who stays) */
	int on_device;          /* as last seen or made here; checked before eviction */
	int moving;             /* queued for the mover or being moved by it (either way) */
	int held;               /* copies and memsets being passed on that use it (never moved) */
	int parked;             /* sent back with vmmx_park(): some of it may be unmapped until
				 * brought in or mapped in place (unpark()) */
	int keep;               /* in the kept set spread over the cycle (spread_choose()) */
	int pointed;            /* an address in it was seen in data copied to the device
				 * (vmmxp_place_pointed()): never moved nor parked again */
	uint64_t seen;          /* spread_choose()'s stamp: counted once a choice */
	uint64_t pair_seq;      /* the launch (seq) that last named it by two integers only */
	int idle;               /* too large to move, tracked from its allocation
				 * (vmmxp_place_allocated()) and not named since, or
				 * not named for QUIET_CYCLES whole cycles (idle_again()) */
	uint64_t born;          /* ... the launch (seq) it was allocated after */
	int big;                /* tracked from its allocation, too large to move */
	uint32_t sure, sure0;   /* ... namings by sure words (vmmxp_word_kind()), as named(0) */
	uint32_t quiet;         /* ... whole cycles in a row that no sure word named it */
};

/* A segment (or a piece) one launch names. */
struct seg {
	void *base;
	size_t size;
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf;
	void *whole;            /* a piece's buffer base, NULL for a segment */
	int host;               /* some of it lies in host memory */
	int pair;               /* named only by words that read as two integers */
	int unsure;             /* ... by words that may be no pointer (a pair is too) */
};

/* What the launch at one position of the cycle named. */
struct plan {
	uint64_t generation;    /* the cycle's; 0: never written */
	uint32_t n;
	uint32_t once;          /* bit i: segment i is read once (see the top) */
	void *base[PLAN_SEGS];
};

static pthread_mutex_t gate = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct tracked track[MAX_TRACKED]; /* lock */
static int ntracked;                      /* lock */
static int index_[INDEX_SLOTS];           /* lock: 1 + the segment's slot in track[], 0 empty */
static uint64_t seq;                      /* lock: launches placed */
static struct plan plan[PLAN_SLOTS];      /* lock */
static void *events[EVENTS];              /* lock: CUevent, made on first use */
static int event_ok[EVENTS];              /* lock: the slot's last record succeeded */
static CUstream ev_stream[EVENTS];        /* lock: the stream it was recorded on */
static uint64_t uses;                     /* lock: events recorded (uses numbered from 1) */
static struct vmmxp_place_stats st;       /* lock */
static int spilled;                       /* memory was seen in host memory (sticky): written
					   * under lock, atomically (vmmxp_place_quiet() reads it) */
static uint64_t unspilled_launches;       /* lock: launches placed before that */
/*
 * lock: settled (see settled_launch()): the cycle of generation settle_gen
 * moved nothing and named nothing in host memory in a whole pass; the
 * moves counted at its first launch (settle_moves) and whether a launch
 * named host memory since (settle_host).
 */
static int settled;
static uint64_t settle_gen, settle_moves;
static int settle_host;
/* Set (atomically, under lock) by vmmxp_place_unseen(): nothing parks any more. */
static int unseen;
/* lock: set by vmmxp_place_pointed() when it could not mark them all: nothing moves any more. */
static int frozen;

/*
 * lock held: whether @t may never move: a kernel may read it through an
 * address held in device memory, at any time (vmmxp_place_pointed()).
 */
static int unmovable(const struct tracked *t)
{
	return t->pointed || frozen;
}
/* lock: the launch (seq) that named a piece the table had no room for: no piece moves meanwhile */
static uint64_t untracked_piece = UINT64_MAX;
/* lock: changes of what the newest launch names or copies hold (busy_floor_kept() asks again) */
static uint64_t floor_epoch;
/* vmmxp_place_quiet(): launches that asked (its look every SPILL_CHECK), those
 * passed unread, and those of them not yet back from the driver. */
static uint64_t quiet_asked, quiet_launches;
static int quiet_in_flight;

/* A move ahead for the mover thread: bring @t in, for the cycle of @generation. */
struct job {
	struct tracked *t;
	uint64_t generation, cycle_len, bound;
	int once;
};

/*
 * The movers (see the top): jobs[head % DEPTH_MAX .. tail % DEPTH_MAX)
 * queued; @busy taken by a mover and under way; @running movers alive;
 * all under lock.
 */
static struct job jobs[DEPTH_MAX];
static uint64_t head, tail;
static int busy, running;
static enum { MOVER_NONE, MOVER_RUNNING, MOVER_OFF, MOVER_QUIT } mover_state;
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER; /* a job was queued, or quit */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* a move finished, or the mover stopped */

/* The launch between vmmxp_place_launch() and vmmxp_place_done(); lock. */
static struct {
	CUstream stream;
	long at;
	uint64_t generation, cycle_len;
	struct tracked *t[VMMXP_PLACE_MAX]; /* the tracked segments it named */
	size_t nt;
} cur;

/*
 * The trial (see the top): moving against reading in place, over the
 * cycle of @generation (@len launches); lock.  Its boundaries are the
 * launches at the cycle's first position: the first starts a cycle moving
 * that settles, the next @cycles are measured (ev[0] to ev[1]), then one
 * cycle reading in place settles and @cycles more are measured (ev[2] to
 * ev[3]), timed on the GPU.  Its moving side spread
 * (VMMX_RUN_PLACE_SPREAD=1), a pass in which libvmmx made host memory (a
 * send back's first, pinned at 40-70 ms a 128 MiB segment on the H200) is
 * not the step the side will run: the settling pass is followed by
 * another, and the measured ones are measured again, up to TRIAL_SETTLE
 * passes more a side.
 */
static struct {
	int cycles;             /* measured each way; 0: no trial; -1: not read yet */
	enum { TRIAL_NONE, TRIAL_MOVING, TRIAL_IN_PLACE, TRIAL_PENDING, TRIAL_DONE } state;
	uint64_t generation;    /* the cycle tried, or decided for */
	uint64_t len;           /* its length */
	int boundary;           /* the trial's boundaries passed, after its first */
	int settled;            /* passes this side settled or measured again (TRIAL_SETTLE) */
	uint64_t made;          /* trial_made() when this side's pass in hand began */
	void *ev[4];            /* CUevent, timed: made at first use */
	unsigned recorded;      /* bit i: ev[i] recorded this trial */
	int untimed;            /* timed events cannot be had: no trial */
	int chose_in_place;     /* TRIAL_DONE: what was chosen for cycles of @len */
	int clear;              /* ... both sides timed, moving at most SPREAD_MARGIN of reading in place */
} trial = { .cycles = -1 };
/*
 * lock: reading in place (the trial's side, or its choice): no moves
 * ahead, and a segment is brought in on demand only in place of ones named
 * fewer times in the last cycle (freq), so that the device settles on the
 * segments read most often.
 */
static int in_place_mode;
/* lock: the cycle (generation) whose kept set spread_choose() chose; 0: none. */
static uint64_t spread_gen;
/* VMMX_RUN_PLACE_SPREAD (spread_wanted()): where the kept set is spread. */
enum { SPREAD_NEVER, SPREAD_ALWAYS, SPREAD_CHOSEN };

/*
 * A forked child's lock afresh (launch.c's fork handler, and state.c's: the
 * program's allocations and frees take it, vmmxp_place_hold(), whether or
 * not launches were watched; run twice, it does the same again).
 */
void vmmxp_place_after_fork(void)
{
	pthread_mutex_init(&gate, NULL);
	pthread_mutex_init(&lock, NULL);
	pthread_cond_init(&work_cv, NULL);
	pthread_cond_init(&done_cv, NULL);
	/* The mover is not copied into the child: its queue goes, a new one starts on demand. */
	for (int i = 0; i < ntracked; i++) {
		track[i].moving = 0;
		track[i].held = 0; /* the copies of the parent's other threads are not here */
	}
	/* Nor the launches they were passing on unread: a spill would wait for them forever. */
	__atomic_store_n(&quiet_in_flight, 0, __ATOMIC_RELAXED);
	head = tail = 0;
	busy = running = 0;
	if (mover_state != MOVER_OFF)
		mover_state = MOVER_NONE;
}

/* One reading of VMMX_RUN_PLACEMENT: resolve.c's, which hands the copy hooks out by it. */
int vmmxp_place_on(void)
{
	return vmmxp_copy_on();
}

/*
 * The tracked record of the segment at @base; made if new and @make.  NULL
 * when it is not tracked (or the table is full).
 */
static struct tracked *find(void *base, int make)
{
	size_t i = (size_t)(((uint64_t)(uintptr_t)base * 0x9e3779b97f4a7c15ull) >> 40) &
		   (INDEX_SLOTS - 1);

	for (;; i = (i + 1) & (INDEX_SLOTS - 1)) {
		int t = index_[i];

		if (t && track[t - 1].base == base)
			return &track[t - 1];
		if (!t)
			break;
	}
	if (!make || ntracked == MAX_TRACKED)
		return NULL;
	/* Launches passed unread (vmmxp_place_quiet()) may have used it, on any stream. */
	track[ntracked] = (struct tracked){
		.base = base,
		.unknown = __atomic_load_n(&quiet_launches, __ATOMIC_RELAXED) ? uses + 1 : 0
	};
	index_[i] = ++ntracked;
	return &track[ntracked - 1];
}

/*
 * The buffer that maps @t's base, the residency of @t in *@r (a segment:
 * its whole buffer; a piece: its chunk) and the chunk at its base in
 * *@ci; NULL when none answers.
 */
static struct vmmx_buf *seg_residency(const struct tracked *t, struct vmmx_residency *r,
				      struct vmmx_chunk_info *ci)
{
	size_t off = 0, size;

	if (vmmx_lookup(t->ctx, t->base, ci))
		return NULL;
	size = vmmx_buf_size(ci->buf);
	if (t->whole) {
		off = (size_t)((char *)ci->base - (char *)vmmx_buf_ptr(ci->buf));
		size = ci->size;
	}
	return vmmx_buf_residency(ci->buf, off, size, r) ? NULL : ci->buf;
}

/*
 * The bytes of @t on the device, 0 unless it is still what it was: a
 * buffer of its context at its base (a segment), or a chunk of its buffer
 * starting at its base (a piece); its size is updated (a segment freed and
 * made again at the same base may have another).
 */
static size_t on_device_bytes(struct tracked *t)
{
	struct vmmx_residency r = { 0, 0 };
	struct vmmx_chunk_info ci;
	struct vmmx_buf *buf = seg_residency(t, &r, &ci);

	if (!buf || vmmx_buf_ptr(buf) != (t->whole ? t->whole : t->base) ||
	    (t->whole && ci.base != t->base))
		return 0;
	t->size = t->whole ? ci.size : vmmx_buf_size(buf);
	return (size_t)r.device;
}

/* Monotonic nanoseconds, for the report's time spent moving and waiting. */
static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* VMMX_RUN_PLACE_WAIT=device: moves wait for the whole device (see the top); read once. */
static int wait_device(void)
{
	static int device = -1;

	if (device < 0) {
		const char *s = getenv("VMMX_RUN_PLACE_WAIT");

		device = s && !strcmp(s, "device");
	}
	return device;
}

/*
 * lock held; with @unlocked (the mover) it is let go around the waits
 * themselves.  vmmx_sync(), counted.
 */
static int sync_device(struct vmmx_ctx *ctx, int unlocked)
{
	int err;

	st.device_syncs++;
	if (unlocked)
		pthread_mutex_unlock(&lock);
	err = vmmx_sync(ctx);
	if (unlocked)
		pthread_mutex_lock(&lock);
	return err;
}

/* Whether the use @u is known complete without asking: none, or older than the ring. */
static int use_done(uint64_t u)
{
	return !u || u + EVENTS <= uses;
}

/*
 * Wait for the use @u's event: a query first, then cuEventSynchronize with
 * the lock let go when @unlocked; *@waited set when it was not complete at
 * the query.  Return: 0 when it is complete, -1 when it cannot be waited
 * for (the caller waits for the device instead).
 */
static int wait_event(uint64_t u, int unlocked, int *waited)
{
	CUresult (*query)(void *) = VMMXP_REAL(cuEventQuery);
	CUresult (*sync)(void *) = VMMXP_REAL(cuEventSynchronize);
	void *ev;
	CUresult r;

	/* A use older than the ring is complete: its slot was recorded again only after it. */
	if (use_done(u))
		return 0;
	if (!query || !sync)
		return -1;
	ev = events[u % EVENTS];
	r = query(ev);
	if (r == CUDA_OK)
		return 0;
	*waited = 1;
	if (r == CU_NOT_READY) {
		if (unlocked)
			pthread_mutex_unlock(&lock);
		r = sync(ev);
		if (unlocked)
			pthread_mutex_lock(&lock);
	}
	return r == CUDA_OK ? 0 : -1;
}

/*
 * Wait until the work that last used @t's segment is done: its last use on
 * another stream, then its last use (see the top), or the whole device
 * when an event could not be recorded or failed.  A move that waited is
 * one wait counted, for one event or two.
 * lock held (let go around the waits with @unlocked: an event recorded
 * again meanwhile is one recorded after the use, so waiting for it waits
 * for more, never less).
 * Return: 0, or -VMMX_E* when the wait failed (nothing may move then).
 */
static int wait_for_use(struct tracked *t, int unlocked)
{
	/* Read before the lock is let go; the older first. */
	uint64_t u[2] = { t->use2, t->use }, before = uses, t0 = now_ns();
	void *base = t->base;
	int waited = 0, err = 0;

	if (wait_device() || t->unknown || !t->use) {
		err = sync_device(t->ctx, unlocked);
		vmmxp_trace_wait("device", base, now_ns() - t0, unlocked);
		/* Unknown work marked meanwhile (the lock let go) is not covered. */
		if (!err && t->unknown <= before + 1) {
			t->unknown = 0;
			t->use2 = 0;
		}
		return err;
	}
	for (int i = 0; i < 2 && !err; i++)
		err = wait_event(u[i], unlocked, &waited);
	st.waits += waited;
	if (waited)
		vmmxp_trace_wait("event", base, now_ns() - t0, unlocked);
	/* An event failed: the device is waited for instead. */
	return err ? sync_device(t->ctx, unlocked) : 0;
}

/*
 * wait_for_use(), its time counted; for a piece, also the last uses of the
 * pieces below it in its buffer (a kernel named there may read on into it,
 * see the top).
 */
static int wait_last_use(struct tracked *t, int unlocked)
{
	uint64_t t0 = now_ns();
	int err = wait_for_use(t, unlocked);

	/*
	 * Entries are never taken out of track[]: its slots stay valid while
	 * the lock is let go.  One with neither a use nor unknown work was
	 * not named since the device was last waited for (nothing to wait for).
	 */
	for (int i = 0; !err && t->whole && i < ntracked; i++)
		if (&track[i] != t && track[i].whole == t->whole &&
		    (char *)track[i].base < (char *)t->base && (track[i].use || track[i].unknown))
			err = wait_for_use(&track[i], unlocked);
	st.wait_ns += now_ns() - t0;
	return err;
}

/*
 * lock held: the lowest piece of the buffer @whole that the newest launch
 * named (it may be on its way to the driver, its use not yet recorded) or
 * that a copy being passed on holds; NULL when none.  Nothing at or above
 * it in that buffer may begin to move (see the top).
 */
static void *busy_floor(const void *whole)
{
	void *low = NULL;

	for (int i = 0; i < ntracked; i++) {
		const struct tracked *q = &track[i];

		if (q->whole == whole && (q->last == seq || q->pair_seq == seq || q->held) &&
		    (!low || (char *)q->base < (char *)low))
			low = q->base;
	}
	return low;
}

/*
 * lock held: busy_floor(), kept for FLOORS buffers until the next launch
 * marks what it names or the next change of a held count (floor_epoch): asked for each segment
 * of the launches ahead, it would walk the table each time.
 */
static void *busy_floor_kept(void *whole)
{
	static struct {
		void *whole, *low;
		uint64_t seq, epoch;
	} kept[FLOORS];
	static unsigned next;
	unsigned i;

	for (i = 0; i < FLOORS; i++)
		if (kept[i].whole == whole && kept[i].seq == seq && kept[i].epoch == floor_epoch)
			return kept[i].low;
	i = next++ % FLOORS;
	kept[i].whole = whole;
	kept[i].seq = seq;
	kept[i].epoch = floor_epoch;
	kept[i].low = busy_floor(whole);
	return kept[i].low;
}

/* lock held: whether the piece @t may not begin to move now (see busy_floor()). */
static int piece_blocked(const struct tracked *t)
{
	void *low;

	if (!t->whole)
		return 0;
	if (untracked_piece == seq)
		return 1;
	low = busy_floor_kept(t->whole);
	return low && (char *)t->base >= (char *)low;
}

static int park_wanted(void);
static int spread_wanted(void);
static void unpark(struct tracked *t);

/*
 * vmmx_prefetch() of @t's segment to @to, its time added to *@ns and
 * recorded in the launch trace with @bytes, those that had to move (the
 * caller's count of them away from @to); lock let go with @unlocked.  A
 * send back parks (vmmx_park()) under VMMX_RUN_PLACE_PARK, but a piece's:
 * a kernel named below a piece may read it unnamed (see the top).
 */
static int move(struct tracked *t, struct vmmx_loc to, size_t bytes, int unlocked,
		uint64_t *ns)
{
	/* Read under the lock: a launch naming the segment meanwhile writes them. */
	struct vmmx_ctx *ctx = t->ctx;
	void *base = t->base;
	size_t size = t->size;
	int park = to.kind != VMMX_LOC_DEVICE && !t->whole && !t->pointed && !t->idle &&
		   park_wanted();
	size_t parked = 0;
	uint64_t t0;
	int err;

	/*
	 * Let go, the program may free the segment meanwhile: libvmmx holds
	 * the buffer for the call (its destroy waits), and a segment freed
	 * before is in no buffer (-VMMX_ENOENT: a failed move).
	 */
	if (unlocked)
		pthread_mutex_unlock(&lock);
	t0 = now_ns();
	err = park ? vmmx_park(ctx, base, size, to, NULL, &parked)
		   : vmmx_prefetch(ctx, base, size, to, NULL);
	t0 = now_ns() - t0;
	vmmxp_trace_move(base, bytes, to.kind == VMMX_LOC_DEVICE, t0, err, unlocked);
	if (unlocked)
		pthread_mutex_lock(&lock);
	*ns += t0;
	if (parked) {
		/* Of what was parked, some may have moved since (a failed move
		 * after): parked means "maybe", and is cleared by unpark(). */
		t->parked = 1;
		st.parked++;
		/*
		 * An unseen launch stopped parking, or a copy's data pointed into
		 * it, while the lock was let go.
		 */
		if (__atomic_load_n(&unseen, __ATOMIC_RELAXED) || t->pointed)
			unpark(t);
	} else if (to.kind == VMMX_LOC_DEVICE && !err) {
		t->parked = 0;
	}
	return err;
}

static int swap_wanted(void);

/*
 * vmmx_swap(): victim @vt's segment sent back to @host and @t's brought to
 * @dev in one call, the send back's mapping of its host copy made while the
 * bring-in's copy runs (libvmmx makes the two moves in turn where @vt has no
 * such copy).  Its time added to st.in_ns (a pair's: not split), both moves
 * traced (the send back with no time of its own) with @out_bytes and
 * @in_bytes; lock let go with @unlocked, as move() does.
 */
static int swap_move(struct tracked *vt, size_t out_bytes, struct vmmx_loc host,
		     struct tracked *t, size_t in_bytes, struct vmmx_loc dev, int unlocked)
{
	struct vmmx_ctx *ctx = t->ctx;
	void *out = vt->base, *in = t->base;
	size_t out_size = vt->size, in_size = t->size;
	uint64_t t0;
	int err;

	if (unlocked)
		pthread_mutex_unlock(&lock);
	t0 = now_ns();
	err = vmmx_swap(ctx, out, out_size, host, in, in_size, dev, NULL);
	t0 = now_ns() - t0;
	vmmxp_trace_move(out, out_bytes, 0, 0, err, unlocked);
	vmmxp_trace_move(in, in_bytes, 1, t0, err, unlocked);
	if (unlocked)
		pthread_mutex_lock(&lock);
	st.in_ns += t0;
	st.swaps++;
	return err;
}

/*
 * lock held: @t, maybe parked, mapped at its addresses again (its chunks
 * on the device left alone): a launch or a copy is about to use it where
 * it lies.  Counted and timed; a failure is counted and logged (the use
 * then faults on the GPU: nothing else can be done for it).
 */
static void unpark(struct tracked *t)
{
	size_t done = 0;
	uint64_t t0;
	int err;

	if (!t->parked)
		return;
	t0 = now_ns();
	err = vmmx_unpark(t->ctx, t->base, t->size, &done);
	st.unpark_ns += now_ns() - t0;
	if (err) {
		st.failed++;
		fprintf(stderr, "vmmx-run: placement: the parked segment at %p could not be mapped in place: %s\n",
			t->base, vmmx_last_error());
		return;
	}
	t->parked = 0;
	st.unparked += done != 0;
}

/*
 * The next use's event, recorded on @stream after the launch: returns its
 * number, or 0 when it could not be made or recorded (the segments then
 * have no last-use event, and their moves wait for the device).  The
 * slot's previous event is waited for first (see the top).
 */
static uint64_t record_use(CUstream stream)
{
	CUresult (*create)(void **, unsigned int) = VMMXP_REAL(cuEventCreate);
	CUresult (*record)(void *, CUstream) = VMMXP_REAL(cuEventRecord);
	CUresult (*query)(void *) = VMMXP_REAL(cuEventQuery);
	CUresult (*sync)(void *) = VMMXP_REAL(cuEventSynchronize);
	size_t slot = ++uses % EVENTS;

	if (event_ok[slot] && query && query(events[slot]) != CUDA_OK) {
		st.waits++;
		/* Swallowed: a failed event is re-recorded below, or marked not usable. */
		if (sync)
			(void)sync(events[slot]);
	}
	event_ok[slot] = 0;
	if (!events[slot] && (!create || create(&events[slot], EVENT_DISABLE_TIMING) != CUDA_OK))
		events[slot] = NULL;
	if (events[slot] && record && record(events[slot], stream) == CUDA_OK) {
		event_ok[slot] = 1;
		ev_stream[slot] = stream;
	}
	return event_ok[slot] ? uses : 0;
}

/* The stream the use @u was recorded on; asked only of a use not known complete. */
static CUstream use_stream(uint64_t u)
{
	return ev_stream[u % EVENTS];
}

/*
 * Whether work on @a and on @b runs in one order: the same handle, except
 * the per-thread default stream, whose one handle stands for a stream of
 * each thread (so never the same: its uses are kept or joined as another
 * stream's are).
 */
static int same_stream(CUstream a, CUstream b)
{
	return a == b && a != CU_STREAM_PER_THREAD_;
}

/*
 * Before work passed on to @stream becomes @t's last use: when @t's last
 * uses lie on two other streams, the older one would be forgotten (see
 * used()), so @stream is made to wait for it on the GPU first, unless it
 * is complete; the event recorded next on @stream then completes after it.
 * Each event is joined once per call (@joined, *@nj of them so far, @ok:
 * whether that join was made).  Return: 0, or -1 when the join could not
 * be made (@t's use is then unknown: its moves wait for the device).
 */
static int join(const struct tracked *t, CUstream stream, uint64_t *joined, int *ok, size_t *nj)
{
	CUresult (*query)(void *) = VMMXP_REAL(cuEventQuery);
	CUresult (*wait)(CUstream, void *, unsigned int) = VMMXP_REAL(cuStreamWaitEvent);
	size_t i;

	if (use_done(t->use) || same_stream(use_stream(t->use), stream) || use_done(t->use2) ||
	    same_stream(use_stream(t->use2), stream))
		return 0;
	for (i = 0; i < *nj; i++)
		if (joined[i] == t->use2)
			return ok[i] ? 0 : -1;
	if (query && query(events[t->use2 % EVENTS]) == CUDA_OK)
		return 0;
	joined[*nj] = t->use2;
	ok[*nj] = wait && wait(stream, events[t->use2 % EVENTS], 0) == CUDA_OK;
	st.joins += ok[*nj];
	return ok[(*nj)++] ? 0 : -1;
}

/*
 * The work just passed on to @stream used the @n segments @t (a launch's,
 * or a copy's or memset's): its event is recorded and becomes their last
 * use.  Each keeps its last use on up to two streams (see the top): a use
 * on the stream of neither replaces the older, joined to @stream first
 * (join()); a use on the stream of one replaces that one.  When the event
 * cannot be recorded, or a join made, their use is unknown (@unknown):
 * their next move waits for the device, whatever uses are recorded
 * before it.  lock held.
 */
static void used(struct tracked *const *t, size_t n, CUstream stream)
{
	uint64_t joined[VMMXP_PLACE_MAX], u;
	int ok[VMMXP_PLACE_MAX], lost[VMMXP_PLACE_MAX];
	size_t nj = 0;

	/* VMMX_RUN_PLACE_WAIT=device: every move waits for the device, nothing to join. */
	for (size_t i = 0; i < n; i++)
		lost[i] = !wait_device() && join(t[i], stream, joined, ok, &nj);
	u = record_use(stream);
	for (size_t i = 0; i < n; i++) {
		struct tracked *s = t[i];

		if (!u || lost[i]) {
			s->unknown = uses + 1;
			continue;
		}
		if (!use_done(s->use) && !same_stream(use_stream(s->use), stream)) {
			s->use2 = s->use;
		} else if (use_done(s->use2) || same_stream(use_stream(s->use2), stream)) {
			/* Complete, or before this use in its stream's order. */
			s->use2 = 0;
		}
		s->use = u;
	}
}

/*
 * lock held: whether the kept set of spread_choose() rules the victims:
 * spread (spread_now() when it was chosen), a cycle known (@cycle_len)
 * and moving, and the set chosen for the cycle now known.
 */
static int spread_on(uint64_t cycle_len)
{
	return cycle_len && !in_place_mode && spread_gen && spread_gen == cur.generation;
}

/* Whether @t counts as kept under spread_on(): in the kept set, or a piece (left out of it). */
static int kept(const struct tracked *t)
{
	return t->keep || t->whole;
}

/*
 * When @t is next needed, a cycle of @cycle_len launches being known: a
 * step after its last use, or sooner by the gap between its last two uses
 * when that is shorter (an activation named by every layer is needed again
 * at once, a layer's weights a step later).  A use expected by its gap
 * that has not come yet, within a step of the last, is expected a gap from
 * now: an activation or the allocator's small segment is named in bursts,
 * a few launches apart, and between two bursts it is needed soon, not a
 * step later (ranking it a step ahead made it the first victim and sent it
 * back and forth dozens of times a forward of a Hugging Face Llama).  A
 * use expected that did not come within a step (memory freed, a phase
 * over) means nothing is known to need it: it ranks past every expected
 * use, the longest unused first.
 */
static uint64_t next_use(const struct tracked *t, uint64_t cycle_len)
{
	uint64_t gap = t->prev && t->last - t->prev < cycle_len ? t->last - t->prev : cycle_len;

	if (t->last + gap > seq)
		return t->last + gap;
	if (t->last + cycle_len > seq)
		return seq + gap;
	return UINT64_MAX - t->last;
}

/*
 * Whether @a is a better victim than @b (see the top): the later next use,
 * or the less recent; reading in place, the one named fewer times a cycle,
 * then the less recent.
 */
static int better(const struct tracked *a, const struct tracked *b, uint64_t cycle_len)
{
	if (in_place_mode && a->freq != b->freq)
		return a->freq < b->freq;
	if (spread_on(cycle_len) && kept(a) != kept(b))
		return !kept(a);
	return cycle_len && !in_place_mode ? next_use(a, cycle_len) > next_use(b, cycle_len) :
					     a->last < b->last;
}

/*
 * lock held: whether @t is a segment too large to move that nothing has
 * named since its allocation, a cycle of @cycle_len launches ago or more
 * (see vmmxp_place_allocated()).
 */
static int idle_gone(const struct tracked *t, uint64_t cycle_len)
{
	return t->idle && cycle_len && seq - t->born > cycle_len;
}

static size_t most_moved(struct vmmx_ctx *ctx);

/*
 * lock held: whether naming @s keeps a cycle from settling: some of it in
 * host memory, named by more than pairs, and not too large to make room
 * for (one that is, transformers' warm-up block sent back, comes in only
 * into free room, and is read where it lies meanwhile).
 */
static int unsettles(const struct seg *s)
{
	return s->host && !s->pair && s->size <= most_moved(s->ctx);
}

/* lock held: the moves begun and failed so far, every kind (settled_launch()). */
static uint64_t moves_so_far(void)
{
	return st.promoted + st.evicted + st.queued + st.failed;
}

/*
 * lock held, at the first launch of a cycle (@host_now: it names host
 * memory): whether the whole pass of the cycle just done moved nothing and
 * named nothing in host memory.  Then each launch after is passed on as
 * before a spill (settled_launch()).
 */
static void settle_boundary(int host_now)
{
	uint64_t moves = moves_so_far();

	settled = settle_gen == cur.generation && moves == settle_moves && !settle_host;
	settle_gen = cur.generation;
	settle_moves = moves;
	settle_host = host_now;
}

/*
 * lock held: whether the launch that names the @nseg segments @seg (@t
 * tracked) may be passed on as before a spill, with no last-use event and
 * no look ahead: the cycle settled (a whole pass of it moved nothing and
 * named nothing in host memory: a program that fits once an idle segment
 * went back, or once its set is on the device), nothing queued for the
 * movers, and this launch naming nothing in host memory (but by pairs,
 * or too large to make room for: unsettles()), being moved or parked.
 * The caller passes it on (pass_on()), each segment it names marked used
 * with no event (unknown), so its next move waits for the whole device:
 * the one sync that leaving the settled state costs.  Under the inference preset
 * a 7B model that fits, every weight on the device once the warm-up block
 * went back, decoded 8-10 ms a token (about 700 launches) slower than
 * native on the H200, the placement's per-launch work moving nothing.
 */
static int settled_launch(struct tracked *const *t, const struct seg *seg, size_t nseg)
{
	if (!settled || !cur.cycle_len || cur.generation != settle_gen || head != tail)
		return 0;
	for (size_t i = 0; i < nseg; i++)
		if (unsettles(&seg[i]) || (seg[i].host && !t[i]) ||
		    (t[i] && (t[i]->moving || t[i]->parked)))
			return 0;
	st.settled++;
	return 1;
}

/*
 * lock and gate held: pass the launch that names the @nseg segments @seg
 * (@t tracked) on with no last-use event, where each lies now noted; with
 * @unknown, each is marked used with no event, so that its next move
 * waits for the whole device.  Drops gate and lock; returns 0.
 */
static int pass_on(struct tracked *const *t, const struct seg *seg, size_t nseg, int unknown)
{
	for (size_t i = 0; i < nseg; i++)
		if (t[i]) {
			if (unknown)
				t[i]->unknown = uses + 1;
			t[i]->on_device = !seg[i].host;
		}
	pthread_mutex_unlock(&lock);
	pthread_mutex_unlock(&gate);
	return 0;
}

/*
 * lock held, at the first launch of a cycle: a segment too large to move,
 * tracked from its allocation (vmmxp_place_allocated()), that launches,
 * copies or memsets named since but that no sure word (a pointer, a
 * copy's end: vmmxp_word_kind()) named in QUIET_CYCLES whole cycles in a
 * row, is idle again, as if allocated a cycle ago; words that may be no
 * pointer then leave it idle.  The namings that stop a segment being idle
 * are words in parameter blocks, and a word a kernel does not read (a
 * slot of a by-value struct past the sizes it uses, left as the stack held
 * it) may name PyTorch's cached warm-up block; without this, one such
 * word read as a pointer keeps the block on the device for good, and the
 * weights spill beside it.  A segment the program uses is named every
 * cycle; one used less often (a buffer read every few steps) goes back
 * mapped, and comes back into free room when named (too large to make
 * room for), its data never at risk.
 */
#define QUIET_CYCLES 2
static void idle_again(struct tracked *t)
{
	uint32_t sure = t->sure - t->sure0;

	t->sure0 = t->sure;
	if (!t->big || t->idle)
		return;
	t->quiet = sure ? 0 : t->quiet + 1;
	if (t->quiet < QUIET_CYCLES || t->moving || t->held)
		return;
	t->idle = 1;
	t->born = seq - cur.cycle_len - 1;
	st.idle_again++;
}

/*
 * The segments of @ctx on the device that may be sent back for room, best
 * first, up to MAX_EVICT, in @v, with their bytes on the device in @dev;
 * their number.  Never one this launch named, one being moved, or one of
 * more than @most bytes (see promote()) but one unnamed since its
 * allocation a cycle ago (idle_gone()).  For a move ahead the caller
 * checks that each is needed after the launches ahead (promote(), @bound).
 */
static int victims(struct vmmx_ctx *ctx, uint64_t cycle_len, size_t most, struct tracked **v,
		   size_t *dev)
{
	int n = 0;

	for (int i = 0; i < ntracked; i++) {
		struct tracked *t = &track[i];
		size_t bytes;
		int j;

		if (t->ctx != ctx || !t->on_device || t->moving || t->held || t->last == seq ||
		    t->pair_seq == seq || (t->size > most && !idle_gone(t, cycle_len)) ||
		    unmovable(t))
			continue;
		/* A piece at or above one in use in its buffer stays. */
		if (piece_blocked(t))
			continue;
		if (n == MAX_EVICT && !better(t, v[n - 1], cycle_len))
			continue;
		bytes = on_device_bytes(t);
		if (!bytes || (t->size > most && !idle_gone(t, cycle_len))) {
			t->on_device = bytes != 0;
			continue;
		}
		/* Insert in order; the worst falls off a full list. */
		for (j = n < MAX_EVICT ? n++ : n - 1; j > 0 && better(t, v[j - 1], cycle_len); j--) {
			v[j] = v[j - 1];
			dev[j] = dev[j - 1];
		}
		v[j] = t;
		dev[j] = bytes;
	}
	return n;
}

/*
 * The bytes of @t's segment in host memory that the device @dev has no
 * room for, as far as known (0: it has room, or cannot tell), in *@lack;
 * its bytes in host memory in *@host.
 */
static void room_for(const struct tracked *t, struct vmmx_loc dev, size_t *lack, size_t *host)
{
	struct vmmx_residency r = { 0, 0 };
	struct vmmx_chunk_info ci;
	size_t room;

	*lack = 0;
	*host = t->size;
	if (!seg_residency(t, &r, &ci))
		return;
	*host = r.host;
	if (!vmmx_ctx_room(t->ctx, dev, r.host, &room) && room < r.host)
		*lack = r.host - room;
}

enum how {
	ON_DEMAND,      /* for the launch about to be passed on */
	AHEAD_OF,       /* for a launch ahead in the cycle, on the launching thread */
	MOVER,          /* ... on the mover thread: the lock is let go around waits and moves */
};

/* Why no room can be made: not for these victims (0), or counted in the report as which. */
enum refusal { REFUSE_QUIET, REFUSE_NO_ROOM, REFUSE_IN_PLACE };

/*
 * The victims to send back, in @v (their bytes on the device in @dev),
 * for @lack bytes of room for @t: the first of victims() up to those whose
 * bytes make the room, each one that may go for this move (see promote());
 * their number, or 0
 * when they cannot make it, with the reason in *@why.  Nothing moves: a
 * move is never begun that the victims allowed could not finish (sending
 * back segments for a move that then fails would cost their copies back
 * in for nothing).  promote() asks again before each victim goes; on the
 * mover, things may have changed meanwhile, and a later answer may be no
 * after some went.
 */
static int plan_victims(struct tracked *t, enum how how, int once, uint64_t cycle_len,
			uint64_t bound, size_t lack, size_t most, struct tracked **v, size_t *dev,
			enum refusal *why)
{
	int n = victims(t->ctx, cycle_len, most, v, dev), k;
	size_t freed = 0;

	*why = how == ON_DEMAND ? REFUSE_NO_ROOM : REFUSE_QUIET;
	for (k = 0; k < n && freed < lack; k++) {
		/*
		 * Reading in place, on demand: only in place of segments named
		 * fewer times a cycle than @t (never back: no swap repeats).
		 */
		if (in_place_mode) {
			if (v[k]->freq >= t->freq) {
				*why = REFUSE_IN_PLACE;
				return 0;
			}
			freed += dev[k];
			continue;
		}
		/* Spread (see spread_choose()): one not kept never sends back one kept. */
		if (spread_on(cycle_len) && kept(v[k]) && !kept(t))
			return 0;
		/* Ahead: only a victim Belady would also choose once the launches ahead are done. */
		if (how != ON_DEMAND && next_use(v[k], cycle_len) <= bound)
			return 0;
		/*
		 * Read once, on demand (a cycle known: promote()): only in place
		 * of one needed after it is needed again.
		 */
		if (once && next_use(v[k], cycle_len) < next_use(t, cycle_len)) {
			if (how == ON_DEMAND)
				*why = REFUSE_IN_PLACE;
			return 0;
		}
		freed += dev[k];
	}
	return freed >= lack ? k : 0;
}

/* What is kept of a context (one per device used): lock. */
struct ctx_state {
	struct vmmx_ctx *ctx;
	int device;             /* its device's ordinal */
	size_t most;            /* most_moved() */
	uint64_t once_wait;     /* once_room(): no move ahead of a segment read once before */
};

/*
 * The state of @ctx, made at first use; NULL past VMMXP_MAX_DEVICES
 * contexts or when it cannot be asked.  The most a segment of @ctx may hold
 * to be made room for, or sent back, is a quarter of its device (its
 * limit), as first asked (a context's limit is set when it is made).
 */
/* lock: the contexts seen, in the order first asked (state_of()). */
static struct ctx_state known[VMMXP_MAX_DEVICES];

static struct ctx_state *state_of(struct vmmx_ctx *ctx)
{
	struct vmmx_ctx_info ci;
	int i;

	for (i = 0; i < VMMXP_MAX_DEVICES && known[i].ctx; i++)
		if (known[i].ctx == ctx)
			return &known[i];
	/* Filled only here: the launches that find their context (all but the first) clear no 400 bytes. */
	ci = (struct vmmx_ctx_info){ .size = sizeof(ci) };
	if (i == VMMXP_MAX_DEVICES || vmmx_ctx_query(ctx, &ci))
		return NULL;
	known[i] = (struct ctx_state){
		.ctx = ctx,
		.device = ci.device,
		.most = (size_t)((ci.device_limit < ci.device_total ? ci.device_limit :
								      ci.device_total) / 4),
	};
	return &known[i];
}

/*
 * lock held: the most host memory the contexts seen have held at once, as
 * this is called (chunks mapped there and the host copies kept of chunks on
 * a device), for the trial.  Once every segment that moves has its host
 * copy, a send back maps it and a bring-in keeps it, and this stops
 * growing; a pass in which it grew made host memory (pinned it).
 */
static uint64_t host_most(void)
{
	static uint64_t most;
	uint64_t held = 0;

	for (int i = 0; i < VMMXP_MAX_DEVICES && known[i].ctx; i++) {
		struct vmmx_stats sts = { .size = sizeof(sts) };

		if (!vmmx_stats_get(known[i].ctx, &sts))
			held += sts.host_bytes + sts.shadow_bytes;
	}
	if (held > most)
		most = held;
	return most;
}

/* lock held: host_most() where the trial settles past passes that made host memory
 * (its moving side spread: VMMX_RUN_PLACE_SPREAD=1), else 0: the default pays no
 * walk of the buffers for it. */
static uint64_t trial_made(void)
{
	return spread_wanted() == SPREAD_ALWAYS ? host_most() : 0;
}

/* lock held: see state_of(); SIZE_MAX when it cannot be told. */
static size_t most_moved(struct vmmx_ctx *ctx)
{
	struct ctx_state *cs = state_of(ctx);

	return cs ? cs->most : SIZE_MAX;
}

/* lock held: @t brought to the device, counted (@ahead: for a launch ahead). */
static void promoted(struct tracked *t, int ahead)
{
	st.promoted++;
	st.promoted_bytes += t->size;
	if (ahead)
		st.ahead++;
	else
		st.on_demand++;
	t->on_device = 1;
}

/* lock held: victim @vt sent back for room, counted (by next use when a cycle is known). */
static void evicted(struct tracked *vt, uint64_t cycle_len)
{
	vt->on_device = 0;
	st.idle_sent += vt->idle;
	st.evicted++;
	st.evicted_bytes += vt->size;
	if (cycle_len)
		st.evicted_next_use++;
	else
		st.evicted_lru++;
}

/*
 * Bring @t's segment to its context's device, sending victims back as
 * needed.  @once: the launch reads it once (see the top); @t was named by
 * the current launch (ON_DEMAND) or is held for one ahead (AHEAD_OF,
 * MOVER).  A victim sent back by the mover is marked moving meanwhile, so
 * that a launch naming it waits for it.
 *
 * Too large to make room for: a segment of more than a quarter of the
 * device (its limit) in one chunk is brought in only into free room, and
 * never sent back for another.  Such a segment holds many tensors
 * (transformers' warm-up segment, when VMMX_CHUNK_MAX lets it be one
 * chunk): sending it back would send back a good part of the device, and
 * the first launch to name it again would send back everything else to
 * bring it in, whole, for a kernel that reads one of its tensors.  It
 * stays where it lies, read in place where that is host memory, as the
 * default placement does.  In several chunks it moves in pieces (see the
 * top).
 *
 * lock held.  Return: 0 when it is on the device, -VMMX_ENOMEM when no
 * room was made for it, another code when a move or a wait failed.
 */
static int promote(struct tracked *t, enum how how, int once, uint64_t cycle_len, uint64_t bound)
{
	struct vmmx_ctx_info ci = { .size = sizeof(ci) };
	struct vmmx_loc host = { VMMX_LOC_HOST, 0 };
	int unlocked = how == MOVER, ahead = how != ON_DEMAND, waited = 0, sent = 0, nv, swap;
	struct tracked *v[MAX_EVICT];
	size_t dev_bytes[MAX_EVICT], most;
	int err;

	if (t->held)
		return -VMMX_ENOMEM; /* a copy on another thread uses it: read in place */
	/* It stays where it lies, mapped (read there). */
	if (unmovable(t))
		return -VMMX_ENOMEM;
	if (vmmx_ctx_query(t->ctx, &ci)) {
		st.failed++;
		return -VMMX_EINVAL;
	}
	most = most_moved(t->ctx);
	for (;;) {
		struct vmmx_loc dev = { VMMX_LOC_DEVICE, ci.device };
		size_t lack, in_host;
		enum refusal why;
		struct tracked *vt;

		/*
		 * A move the device has no room for is not tried: it would fail,
		 * maybe slowly.  Nothing queued may still use what moves (see the
		 * top of the file): waited for once a move is to be made, not
		 * before (a move that will not happen waits for nothing).
		 */
		room_for(t, dev, &lack, &in_host);
		err = -VMMX_ENOMEM;
		if (!lack) {
			err = waited ? 0 : wait_last_use(t, unlocked);
			waited = 1;
			if (err) {
				st.failed++;
				return err;
			}
			err = move(t, dev, in_host, unlocked, &st.in_ns);
		}
		if (!err) {
			promoted(t, ahead);
			return 0;
		}
		if (err != -VMMX_ENOMEM) {
			st.failed++;
			return err;
		}
		if (t->size > most) {
			if (!ahead)
				st.too_large++;
			return -VMMX_ENOMEM;
		}
		/*
		 * Reading in place (the trial, see the top): nothing ahead; on
		 * demand, only in place of segments named less often (below).
		 */
		if (in_place_mode && ahead)
			return -VMMX_ENOMEM;
		/* Read once: never brought in ahead at the cost of another (see below). */
		if (once && ahead)
			return -VMMX_ENOMEM;
		/* ... nor on demand without a cycle: nothing says a victim is needed later (no scan). */
		if (once && !cycle_len) {
			st.in_place++;
			return -VMMX_ENOMEM;
		}
		/*
		 * The victims are chosen before the first goes: all of those
		 * needed, or none; and chosen again before each of the next, from
		 * where things are then (the mover lets the lock go around each
		 * move: a victim may have been named, moved or freed meanwhile).
		 * A move that found room and still failed for want of it (the
		 * device's own memory short of the limit) asks for its segment's
		 * bytes in host memory again.  At most MAX_EVICT go for one move.
		 */
		if (sent == MAX_EVICT) {
			st.no_room += !ahead;
			return -VMMX_ENOMEM;
		}
		/*
		 * Room seen, move refused for want of it: another thread took
		 * the room meanwhile, or part of the segment moved; ask again.
		 */
		if (!lack)
			room_for(t, dev, &lack, &in_host);
		nv = plan_victims(t, how, once, cycle_len, bound, lack ? lack : in_host, most, v,
				  dev_bytes, &why);
		if (!nv) {
			st.no_room += why == REFUSE_NO_ROOM;
			st.in_place += why == REFUSE_IN_PLACE;
			return -VMMX_ENOMEM;
		}
		vt = v[0];
		sent++;
		vt->moving = 1;
		/*
		 * One victim makes the room: sent back and @t brought in by one
		 * vmmx_swap() (not when sends back park: a park maps nothing).
		 * Whatever both queued uses is waited for first.
		 */
		swap = nv == 1 && swap_wanted() && !park_wanted();
		err = wait_last_use(vt, unlocked);
		if (!err && swap && !waited) {
			err = wait_last_use(t, unlocked);
			waited = 1;
		}
		if (!err && swap) {
			err = swap_move(vt, dev_bytes[0], host, t, in_host, dev, unlocked);
		} else if (!err) {
			err = move(vt, host, dev_bytes[0], unlocked, &st.out_ns);
		}
		vt->moving = 0;
		if (unlocked)
			pthread_cond_broadcast(&done_cv);
		if (swap && (!err || (err == -VMMX_ENOMEM && !on_device_bytes(vt)))) {
			/* Sent back; @t in, or (ENOMEM) room taken meanwhile: ask again. */
			evicted(vt, cycle_len);
			if (err)
				continue;
			t->parked = 0;
			promoted(t, ahead);
			return 0;
		}
		if (err) {
			/* What moved stays moved; what did not is still on the device. */
			vt->on_device = on_device_bytes(vt) != 0;
			st.failed++;
			return err;
		}
		evicted(vt, cycle_len);
	}
}

/*
 * The count in the variable @name, 0 to @most, or @dflt when it is unset;
 * a bad value is said (@what: what it counts, and what 0 means) and @dflt
 * used.
 */
static int env_count(const char *name, int most, int dflt, const char *what)
{
	const char *s = getenv(name);
	char *end;
	long v;

	if (!s || !*s)
		return dflt;
	v = strtol(s, &end, 10);
	if (*end || v < 0 || v > most) {
		fprintf(stderr, "vmmx-run: %s=%s: expected %s to %d; using %d\n", name, s, what, most,
			dflt);
		return dflt;
	}
	return (int)v;
}

/*
 * VMMX_RUN_PLACE_MOVER, read once: the mover threads, 0 to MOVERS_MAX
 * (0: moves ahead on the launching thread, as the first version did).
 * None under VMMX_RUN_PLACE_WAIT=device: that mode is for programs whose
 * kernels reach memory the watch cannot see (through addresses the GPU
 * wrote, in copies passed on unwatched), and a mover moves with the lock
 * let go, so such a kernel launched meanwhile, naming nothing that moves,
 * would find its memory unmapped; on the launching thread a move holds the
 * lock and the gate, after the device is idle, and the program's launches
 * wait for it (a kernel that waits for another thread's launch, as NCCL's
 * with a thread a GPU, then waits forever: that mode is for programs that
 * launch from one thread).
 */
static int movers_wanted(void)
{
	static int n = -1;

	if (n < 0 && wait_device()) {
		const char *v = getenv("VMMX_RUN_PLACE_MOVER");

		if (v && *v && strcmp(v, "0"))
			fprintf(stderr,
				"vmmx-run: VMMX_RUN_PLACE_MOVER=%s: no movers under "
				"VMMX_RUN_PLACE_WAIT=device (a kernel the watch cannot see "
				"whole could run while one moves its memory); moves are made "
				"on the launching thread\n",
				v);
		n = 0;
	}
	if (n < 0)
		n = env_count("VMMX_RUN_PLACE_MOVER", MOVERS_MAX, MOVERS_DEFAULT,
			      "the mover threads, 0 (moves on the launching thread)");
	return n;
}

/*
 * VMMX_RUN_PLACE_AHEAD, read once: the launches bring_in_ahead() looks at,
 * 1 to AHEAD_MAX; 0 (unset) for the default, AHEAD, or AHEAD_SPREAD while
 * the kept set rules (@spread).
 */
static uint64_t ahead(int spread)
{
	static int n = -1;

	if (n < 0)
		n = env_count("VMMX_RUN_PLACE_AHEAD", AHEAD_MAX, 0,
			      "0 (the default: 32 launches, 128 while the kept set is spread)");
	return n ? (uint64_t)n : spread ? AHEAD_SPREAD : AHEAD;
}

/* lock held: the moves ahead queued or under way at once: one per mover running, and two more. */
static uint64_t depth(void)
{
	return (uint64_t)running + 2;
}

/* lock held: drop the queued jobs (not those under way), their segments no longer moving. */
static void drop_queue(void)
{
	for (uint64_t i = head; i < tail; i++)
		if (jobs[i % DEPTH_MAX].t)
			jobs[i % DEPTH_MAX].t->moving = 0;
	tail = head;
	pthread_cond_broadcast(&done_cv);
}

/*
 * A mover thread: takes the next queued move ahead, in the order queued,
 * and runs it beside the other movers' (see the top), with the lock let go
 * around each wait and move, so that the program's launches go on
 * meanwhile.  A move that finds no room without harm (see
 * bring_in_ahead()) drops the rest of the queue: the next launch queues
 * again what is still worth it.
 */
static void *mover(void *arg)
{
	(void)arg;
	vmmxp_depth(1); /* for life: this thread only calls libvmmx and the driver */
	pthread_mutex_lock(&lock);
	for (;;) {
		uint64_t generation;
		struct job j;
		int err;

		while (head == tail && mover_state == MOVER_RUNNING)
			pthread_cond_wait(&work_cv, &lock);
		if (mover_state != MOVER_RUNNING)
			break;
		j = jobs[head++ % DEPTH_MAX];
		if (!j.t)
			continue; /* cancelled: its launch came first */
		if ((uint64_t)++busy > st.busy_most)
			st.busy_most = (uint64_t)busy;
		err = -VMMX_ENOMEM;
		(void)vmmxp_cycle_len(&generation);
		if (j.generation == generation && !j.t->on_device && !j.t->held &&
		    !piece_blocked(j.t))
			err = promote(j.t, MOVER, j.once, j.cycle_len, j.bound);
		j.t->moving = 0;
		busy--;
		if (err)
			drop_queue();
		pthread_cond_broadcast(&done_cv);
	}
	if (!--running) {
		drop_queue();
		mover_state = MOVER_OFF;
	}
	pthread_cond_broadcast(&done_cv);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* At exit: the moves in flight finish, the rest is dropped, before libvmmx goes. */
static void mover_stop(void)
{
	pthread_mutex_lock(&lock);
	if (mover_state == MOVER_RUNNING) {
		mover_state = MOVER_QUIT;
		pthread_cond_broadcast(&work_cv);
		while (mover_state == MOVER_QUIT)
			pthread_cond_wait(&done_cv, &lock);
	}
	pthread_mutex_unlock(&lock);
}

/*
 * lock held: whether the movers run, started on first use (as many as
 * could start, of movers_wanted()); off when none can.
 */
static int mover_on(void)
{
	static int armed;
	pthread_attr_t attr;
	int want = movers_wanted();

	if (mover_state == MOVER_RUNNING)
		return 1;
	if (mover_state != MOVER_NONE)
		return 0;
	mover_state = MOVER_OFF;
	if (!want || pthread_attr_init(&attr))
		return 0;
	(void)pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	mover_state = MOVER_RUNNING;
	for (int i = 0; i < want; i++) {
		pthread_t th;

		if (pthread_create(&th, &attr, mover, NULL))
			break;
		running++;
	}
	st.movers = (uint64_t)running;
	pthread_attr_destroy(&attr);
	if (!running) {
		mover_state = MOVER_OFF;
		return 0;
	}
	/* Swallowed: without it, exit may tear libvmmx down under a move in flight. */
	if (!armed++)
		(void)atexit(mover_stop);
	return 1;
}

/*
 * An allocation, a free or a trim of the program's is about to call the
 * allocator, which may destroy a buffer (a segment it lets go): the
 * placement, which looks buffers up and works on them under the lock
 * (seg_residency(), unpark()), must not meanwhile.  Taken: the lock.  A
 * mover in libvmmx with the lock let go (move()) is not waited for:
 * libvmmx holds a buffer it moves by address for the call, and a destroy
 * waits for that part to finish (waiting here for every move under way
 * instead held up each of the program's allocations and frees for a move:
 * under PyTorch's cudaMallocAsync backend, one every few launches).
 */
void vmmxp_place_hold(void)
{
	pthread_mutex_lock(&lock);
}

void vmmxp_place_hold_done(void)
{
	pthread_mutex_unlock(&lock);
}

/* lock held: queue @t to be brought in ahead; the caller saw room in the ring (depth()). */
static void enqueue(struct tracked *t, int once, uint64_t cycle_len, uint64_t bound)
{
	jobs[tail % DEPTH_MAX] = (struct job){ t, cur.generation, cycle_len, bound, once };
	tail++;
	t->moving = 1;
	st.queued++;
	pthread_cond_signal(&work_cv);
}

/*
 * lock held: a launch names @t.  Queued and not begun, its move is
 * cancelled (the launch brings it in on demand, or reads it in place, as
 * it would have without the mover); begun, or @t is a victim the mover is
 * sending back, it is waited for.  Timed and counted.
 */
static void wait_mover(struct tracked *t)
{
	uint64_t t0;

	if (!t->moving)
		return;
	for (uint64_t i = head; i < tail; i++)
		if (jobs[i % DEPTH_MAX].t == t) {
			jobs[i % DEPTH_MAX].t = NULL;
			t->moving = 0;
			st.cancelled++;
			return;
		}
	t0 = now_ns();
	st.mover_waits++;
	while (t->moving)
		pthread_cond_wait(&done_cv, &lock);
	t0 = now_ns() - t0;
	st.mover_wait_ns += t0;
	vmmxp_trace_wait("mover", t->base, t0, 0);
}

/* lock held: whether @t is queued for a mover, not begun. */
static int queued(const struct tracked *t)
{
	for (uint64_t i = head; i < tail; i++)
		if (jobs[i % DEPTH_MAX].t == t)
			return 1;
	return 0;
}

/* lock held: a piece at or above @q in its buffer that a mover is moving now, if any. */
static const struct tracked *moving_above(const struct tracked *q)
{
	for (int i = 0; q->whole && i < ntracked; i++) {
		const struct tracked *p = &track[i];

		if (p->moving && p->whole == q->whole && (char *)p->base >= (char *)q->base &&
		    !queued(p))
			return p;
	}
	return NULL;
}

/*
 * lock held: a launch or copy names the piece @q, marked named or held
 * already (so that no move at or above it begins meanwhile: piece_blocked()):
 * wait until no piece at or above it in its buffer is being moved, as a
 * kernel named at @q may read on into them (see the top).  Those queued
 * and not begun stay queued: the mover leaves them while @q is in use.
 * Timed and counted with the waits for the mover.
 */
static void wait_pieces_above(const struct tracked *q)
{
	uint64_t t0;

	if (!moving_above(q))
		return;
	t0 = now_ns();
	st.mover_waits++;
	while (moving_above(q))
		pthread_cond_wait(&done_cv, &lock);
	t0 = now_ns() - t0;
	st.mover_wait_ns += t0;
	vmmxp_trace_wait("pieces", q->base, t0, 0);
}

/* VMMX_RUN_PLACE_TRIAL, read once: the cycles the trial measures each way, 0 for none. */
static int trial_cycles(void)
{
	return env_count("VMMX_RUN_PLACE_TRIAL", TRIAL_MAX, 1,
			 "the cycles to measure each way, 0 (no trial)");
}

/* lock held: the trial's event @i, made at first use (timed); 0 and untimed set when it cannot be. */
static int trial_event(int i)
{
	CUresult (*create)(void **, unsigned int) = VMMXP_REAL(cuEventCreate);

	if (!trial.ev[i] && (!create || !VMMXP_REAL(cuEventElapsedTime) ||
			     create(&trial.ev[i], 0) != CUDA_OK)) {
		trial.ev[i] = NULL;
		trial.untimed = 1;
	}
	return trial.ev[i] != NULL;
}

/* lock held: record the trial's event @i on @stream; made at first use (timed). */
static void trial_record(int i, CUstream stream)
{
	CUresult (*record)(void *, CUstream) = VMMXP_REAL(cuEventRecord);

	if (trial_event(i) && record && record(trial.ev[i], stream) == CUDA_OK)
		trial.recorded |= 1u << i;
}

/* lock held: the trial's result: reading in place when @in_place, else moving. */
static void trial_end(int measured, int in_place, float moving_ms, float in_place_ms)
{
	trial.state = TRIAL_DONE;
	trial.clear = measured && moving_ms <= (float)SPREAD_MARGIN * in_place_ms;
	trial.chose_in_place = in_place_mode = measured && in_place;
	if (!measured) {
		st.trial_unmeasured++;
		return;
	}
	st.trials++;
	st.trial_in_place += (uint64_t)in_place;
	st.trial_len = trial.len;
	st.trial_moving_ns = (uint64_t)((double)moving_ms * 1e6 / trial.cycles);
	st.trial_in_place_ns = (uint64_t)((double)in_place_ms * 1e6 / trial.cycles);
}

/*
 * lock held: the trial measured both ways: decide once the GPU has timed
 * both (a query a launch until then, the last side meanwhile going on).
 * Reading in place wins only when strictly faster.
 */
static void trial_decide(void)
{
	CUresult (*query)(void *) = VMMXP_REAL(cuEventQuery);
	CUresult (*elapsed)(float *, void *, void *) = VMMXP_REAL(cuEventElapsedTime);
	float moving, still;
	CUresult r;

	if (trial.recorded != 0xf || !query || !elapsed) {
		trial_end(0, 0, 0, 0);
		return;
	}
	r = query(trial.ev[3]);
	if (r == CUDA_OK)
		r = elapsed(&moving, trial.ev[0], trial.ev[1]);
	if (r == CUDA_OK)
		r = elapsed(&still, trial.ev[2], trial.ev[3]);
	if (r == CU_NOT_READY)
		return; /* not yet (the first side on another stream may still run) */
	if (r != CUDA_OK) {
		trial_end(0, 0, 0, 0);
		return;
	}
	trial_end(1, still < moving, moving, still);
}

/*
 * lock held: the trial decided, and its choice holds for the current
 * cycle: the one it was decided for, or one as long (the same step learned
 * again).
 */
static int trial_holds(void)
{
	return trial.state == TRIAL_DONE && cur.cycle_len &&
	       (cur.generation == trial.generation || cur.cycle_len == trial.len);
}

/*
 * lock held, at each placed launch: the cycle the trial is under way for
 * went (dropped, or another proposed): the trial is cut short, and moving
 * resumes.  Decided: its choice holds for its cycle and any as long (the
 * same step learned again), and while no cycle is known (between two
 * learnings); another cycle moves until it is tried.
 */
static void trial_follow(void)
{
	if (trial.state == TRIAL_MOVING || trial.state == TRIAL_IN_PLACE ||
	    trial.state == TRIAL_PENDING) {
		if (cur.cycle_len && cur.generation == trial.generation)
			return;
		trial.state = TRIAL_NONE;
		in_place_mode = 0;
		st.trial_cut++;
		return;
	}
	if (trial.state == TRIAL_DONE && cur.cycle_len)
		in_place_mode = trial.chose_in_place && trial_holds();
}

/*
 * lock held: the current launch is at the cycle's first position (a
 * boundary), on @stream, before its moves.  A new cycle starts a trial,
 * unless it is as long as the one last decided for (the same step learned
 * again: the choice stands); then each boundary moves the trial on (see
 * trial's comment).
 */
static void trial_boundary(CUstream stream)
{
	uint64_t made;
	int k;

	if (trial.cycles < 0)
		trial.cycles = trial_cycles();
	k = trial.cycles;
	if (!k || trial.untimed)
		return;
	if (trial.generation != cur.generation) {
		/* A cycle only proposed may be a part of the step: tried once confirmed. */
		if (!vmmxp_cycle_confirmed(cur.generation))
			return;
		trial.generation = cur.generation;
		if (trial.state == TRIAL_DONE && trial.len == cur.cycle_len)
			return;
		trial.len = cur.cycle_len;
		trial.state = TRIAL_MOVING;
		trial.boundary = 0;
		trial.settled = 0;
		trial.made = trial_made();
		trial.recorded = 0;
		in_place_mode = 0;
		/* No timed event to be had: no trial (and no pass settled for one). */
		if (!trial_event(0))
			trial_end(0, 0, 0, 0);
		return;
	}
	if (trial.state != TRIAL_MOVING && trial.state != TRIAL_IN_PLACE)
		return;
	made = trial_made();
	/*
	 * The pass (or the passes measured) just ended made host memory: once
	 * more.  Only with the moving side spread (VMMX_RUN_PLACE_SPREAD=1;
	 * trial_made() is 0 otherwise), which sends back segments that
	 * allocation's order kept, each pinning its first host memory then; a
	 * Hugging Face training step, whose moves make host memory pass after
	 * pass, paid 2.7-3.3 s for each pass more (the trial reads in place
	 * there: 257.5 ms a step without, 416.5 and 472.6 with, H200).
	 */
	if (made != trial.made && trial.settled < TRIAL_SETTLE &&
	    (trial.boundary == 0 || trial.boundary == k || trial.boundary == 1 + k ||
	     trial.boundary == 1 + 2 * k)) {
		trial.settled++;
		st.trial_settled++;
		trial.made = made;
		if (trial.boundary == k || trial.boundary == 1 + 2 * k) {
			/* Measured from here again. */
			trial.boundary += 1 - k;
			trial_record(trial.boundary == 1 ? 0 : 2, stream);
		}
		return;
	}
	trial.boundary++;
	/* Each pass settling, and each run of measured ones, from its start. */
	if (trial.boundary == 1 || trial.boundary == 1 + k || trial.boundary == 2 + k)
		trial.made = made;
	if (trial.boundary == 1) {
		trial_record(0, stream);
	} else if (trial.boundary == 1 + k) {
		trial_record(1, stream);
		trial.state = TRIAL_IN_PLACE;
		trial.settled = 0;
		in_place_mode = 1;
		drop_queue();
	} else if (trial.boundary == 2 + k) {
		trial_record(2, stream);
	} else if (trial.boundary == 2 + 2 * k) {
		trial_record(3, stream);
		trial.state = TRIAL_PENDING;
	}
	if (trial.untimed) {
		in_place_mode = 0;
		trial_end(0, 0, 0, 0);
	}
}

/*
 * Whether any of the @size bytes of @buf at @base (a segment: the whole
 * buffer; a piece: its chunk) lies in host memory: a reason to move it (a
 * segment may straddle); @loc, a named chunk's, when that cannot be told.
 */
static int in_host(struct vmmx_buf *buf, const void *base, size_t size, struct vmmx_loc loc)
{
	struct vmmx_residency r = { 0, 0 };
	size_t off = (size_t)((const char *)base - (const char *)vmmx_buf_ptr(buf));

	if (vmmx_buf_residency(buf, off, size, &r))
		return loc.kind != VMMX_LOC_DEVICE;
	return r.host != 0;
}

/* Whether @ctx holds any host memory (a walk of its buffers' chunks: not every launch). */
static int in_host_memory(struct vmmx_ctx *ctx)
{
	struct vmmx_stats sts = { .size = sizeof(sts) };

	return vmmx_stats_get(ctx, &sts) || sts.host_bytes > 0;
}

/*
 * lock held: memory spilled (sticky).  Launches passed unread that are
 * still on their way to the driver are waited for: one may name what moves
 * next, and a move waits for the device only for work already queued.
 * vmmxp_place_quiet() counts itself in flight before it looks at @spilled
 * again, so that either it sees @spilled or this sees it in flight.  The
 * lock is let go while waiting: a launch in flight may reach a copy hook
 * (vmmxp_place_use()) inside the runtime.
 */
static void set_spilled(void)
{
	if (__atomic_load_n(&spilled, __ATOMIC_RELAXED))
		return;
	__atomic_store_n(&spilled, 1, __ATOMIC_SEQ_CST);
	/* Read (and a bad value said) before the first move. */
	(void)park_wanted();
	(void)spread_wanted();
	(void)ahead(0);
	if (!__atomic_load_n(&quiet_in_flight, __ATOMIC_SEQ_CST))
		return;
	pthread_mutex_unlock(&lock);
	while (__atomic_load_n(&quiet_in_flight, __ATOMIC_SEQ_CST))
		sched_yield();
	pthread_mutex_lock(&lock);
}

/* Whether any of the program's contexts holds host memory. */
static int any_in_host_memory(void)
{
	struct vmmx_ctx *ctx[VMMXP_MAX_DEVICES];
	int n = vmmxp_ctxs(ctx, VMMXP_MAX_DEVICES);

	for (int i = 0; i < n; i++)
		if (in_host_memory(ctx[i]))
			return 1;
	return 0;
}

int vmmxp_place_quiet(void)
{
	int spill;

	/*
	 * Only launch placement passes launches unread, and not under
	 * --launches (under a trace alone it does: vmmxp_launches_asked()).
	 */
	if (__atomic_load_n(&spilled, __ATOMIC_RELAXED) || !vmmxp_place_on() ||
	    vmmxp_launches_asked())
		return 0;
	__atomic_fetch_add(&quiet_in_flight, 1, __ATOMIC_SEQ_CST);
	/* Looked at on the first launch, then every SPILL_CHECK-th. */
	spill = __atomic_load_n(&spilled, __ATOMIC_SEQ_CST) ||
		(!(__atomic_fetch_add(&quiet_asked, 1, __ATOMIC_RELAXED) % SPILL_CHECK) &&
		 any_in_host_memory());
	if (!spill) {
		__atomic_fetch_add(&quiet_launches, 1, __ATOMIC_RELAXED);
		return 1;
	}
	/* Out of flight first: set_spilled() waits for the launches in flight. */
	__atomic_fetch_sub(&quiet_in_flight, 1, __ATOMIC_SEQ_CST);
	pthread_mutex_lock(&lock);
	set_spilled();
	pthread_mutex_unlock(&lock);
	return 0;
}

void vmmxp_place_quiet_done(void)
{
	__atomic_fetch_sub(&quiet_in_flight, 1, __ATOMIC_SEQ_CST);
}

uint64_t vmmxp_place_quiet_count(void)
{
	return __atomic_load_n(&quiet_launches, __ATOMIC_RELAXED);
}

/*
 * VMMX_RUN_PLACE_PIECES, read once: 1 moves a segment of more than a
 * quarter of the device in pieces of a chunk (see the top), 0 (the
 * default) whole.
 */
/*
 * VMMX_RUN_PLACE_PARK=1: sends back park (see move()); read once, and off
 * under VMMX_RUN_PLACE_WAIT=device (a program with uses the watch cannot
 * see) and once vmmxp_place_unseen() has been called.
 */
static int park_wanted(void)
{
	static int on = -1;

	if (on < 0)
		on = env_count("VMMX_RUN_PLACE_PARK", 1, 0,
			       "0 (segments sent back stay mapped in host memory)") &&
		     !wait_device();
	return on && !__atomic_load_n(&unseen, __ATOMIC_RELAXED);
}

/*
 * VMMX_RUN_PLACE_SWAP, read once: 1, a bring-in that one send back makes
 * room for is one vmmx_swap(), the send back's remap made while the
 * bring-in's copy runs; 0 (the default), two moves in turn.  Not the
 * default: with two movers a pair is 4-8% faster in libvmmx alone (H200,
 * 128 MiB), and no workload measured faster (docs/PRELOAD.md).
 */
static int swap_wanted(void)
{
	static int on = -1;

	if (on < 0)
		on = env_count("VMMX_RUN_PLACE_SWAP", 1, 0,
			       "0 (the default: a send back, then the bring-in it makes room for)");
	return on;
}

static size_t segments_of(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx,
			  const unsigned char *kind, size_t n, struct seg *seg);

/*
 * lock held: nothing parks any more, for @why (1 a launch, 2 a copy's
 * pointers); what is parked is mapped in place.
 */
static void stop_parking(int why)
{
	if (!__atomic_load_n(&unseen, __ATOMIC_RELAXED)) {
		__atomic_store_n(&unseen, 1, __ATOMIC_RELAXED);
		st.park_stopped = (uint64_t)why;
	}
	/*
	 * Parks under way finish (move() maps them back: unseen is set), also
	 * when another thread stopped parking and waits for them still: none
	 * returns before all is mapped in place.
	 */
	drop_queue();
	while (busy)
		pthread_cond_wait(&done_cv, &lock);
	for (int i = 0; i < ntracked; i++)
		unpark(&track[i]);
}

void vmmxp_place_unseen(void)
{
	if (!park_wanted())
		return;
	pthread_mutex_lock(&lock);
	stop_parking(1);
	pthread_mutex_unlock(&lock);
}

void vmmxp_place_pointed(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx,
			 size_t n)
{
	struct seg seg[VMMXP_PLACE_MAX];
	struct tracked *t[VMMXP_PLACE_MAX];
	size_t nseg;
	int lost = 0, again;

	if (n > VMMXP_PLACE_MAX)
		n = VMMXP_PLACE_MAX;
	pthread_mutex_lock(&lock);
	nseg = segments_of(chunk, ctx, NULL, n, seg);
	for (size_t i = 0; i < nseg; i++) {
		/*
		 * Made untracked (no context) when no launch named it yet: never
		 * a victim until one does, which keeps the mark.
		 */
		t[i] = find(seg[i].base, 1);
		if (!t[i]) {
			lost = 1;
			continue;
		}
		if (!t[i]->pointed) {
			t[i]->pointed = 1;
			st.pointed++;
		}
		/*
		 * A piece (VMMX_RUN_PLACE_PIECES): a kernel reading through the
		 * address may read on to the end of its buffer, whose pieces
		 * above move on their own: nothing moves any more.
		 */
		if (seg[i].whole)
			lost = 1;
	}
	/*
	 * Marked, none begins a move; one under way is waited for (the lock
	 * is let go meanwhile: all are looked at again after a wait), then
	 * what is parked is mapped in place.
	 */
	do {
		again = 0;
		for (size_t i = 0; i < nseg && !again; i++)
			if (t[i] && t[i]->moving) {
				wait_mover(t[i]);
				again = 1;
			}
	} while (again);
	for (size_t i = 0; i < nseg; i++)
		if (t[i])
			unpark(t[i]);
	/*
	 * What could not be marked may be anywhere: nothing moves or parks any
	 * more, and what moves or parks now is waited for and mapped in place
	 * (by every copy that finds so, until none is under way).
	 */
	if (lost) {
		frozen = 1;
		st.frozen = 1;
		stop_parking(2);
	}
	pthread_mutex_unlock(&lock);
}

/* The flag @name (0 or 1, 0 when unset), read once into *@v (-1 until then); see env_count(). */
static int env_flag(int *v, const char *name, const char *what)
{
	if (*v < 0)
		*v = env_count(name, 1, 0, what);
	return *v;
}

static int pieces_wanted(void)
{
	static int n = -1;

	return env_flag(&n, "VMMX_RUN_PLACE_PIECES", "0 (large segments move whole)");
}

/*
 * Called with the lock held (vmmxp_place_hold()): the program's allocation
 * at @ptr, on @ctx, just made.  A segment too large to make room for (more
 * than a quarter of the device: most_moved()) is tracked from now on, idle
 * until a launch, copy or memset names it.  One still unnamed a cycle
 * after its allocation may be sent back for room, first (victims(),
 * idle_gone()), mapped in host memory, never parked: nothing known reads
 * it, and whatever the watch missed still finds it mapped there.  Such a
 * segment is memory the program took and does not use: PyTorch's cached
 * block of transformers' warm-up allocation, when PyTorch does not split
 * it (max_split_size_mb below its size).  Left alone it would hold the
 * device for good, as nothing else may send it back.  A segment in
 * pieces (VMMX_RUN_PLACE_PIECES=1) is not tracked so.
 */
void vmmxp_place_allocated(struct vmmx_ctx *ctx, void *ptr)
{
	struct vmmx_chunk_info ci;
	struct tracked *t;
	void *base;
	size_t size;

	if (!vmmxp_place_on() || pieces_wanted() || vmmx_lookup(ctx, ptr, &ci))
		return;
	base = vmmx_buf_ptr(ci.buf);
	size = vmmx_buf_size(ci.buf);
	if (size <= most_moved(ctx)) {
		/* A freed idle segment's entry, met again by a smaller buffer: not idle. */
		t = find(base, 0);
		if (t && !t->moving && !t->held)
			t->idle = t->big = 0;
		return;
	}
	t = find(base, 1);
	/* One being moved or used is a buffer of this base not yet gone: left as it is. */
	if (!t || t->moving || t->held)
		return;
	t->ctx = ctx;
	t->size = size;
	t->whole = NULL;
	t->last = t->prev = 0;
	t->named = t->named0 = t->freq = 0;
	t->sure = t->sure0 = 0;
	t->keep = 0;
	t->on_device = 1; /* asked again before it is chosen (victims()) */
	st.idle_tracked += !t->idle;
	t->idle = t->big = 1;
	t->quiet = 0;
	t->born = seq;
	/* Used by nothing the watch saw: its move waits for the whole device. */
	t->unknown = uses + 1;
}

int vmmxp_place_idle_held(struct vmmx_ctx *ctx, size_t size)
{
	for (int i = 0; i < ntracked; i++) {
		struct tracked *t = &track[i];

		if (t->ctx == ctx && t->idle && !t->moving && !t->held && on_device_bytes(t) >= size)
			return 1;
	}
	return 0;
}

/*
 * lock held: the unit that moves for each named chunk, once each: its
 * buffer (allocator segment), or the chunk itself when that buffer is in
 * pieces (VMMX_RUN_PLACE_PIECES=1, more than a quarter of the device, in
 * several chunks: see the top).
 */
static size_t segments_of(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx,
			  const unsigned char *kind, size_t n, struct seg *seg)
{
	size_t nseg = 0;

	for (size_t i = 0; i < n; i++) {
		void *base = vmmx_buf_ptr(chunk[i].buf), *whole = NULL;
		size_t j, size = vmmx_buf_size(chunk[i].buf);
		unsigned int k;
		int host;

		if (pieces_wanted() && size > most_moved(ctx[i]) && chunk[i].size < size) {
			whole = base;
			base = chunk[i].base;
			size = chunk[i].size;
			host = chunk[i].loc.kind != VMMX_LOC_DEVICE;
		} else {
			host = in_host(chunk[i].buf, base, size, chunk[i].loc);
		}
		for (j = 0; j < nseg && seg[j].base != base; j++)
			;
		k = kind ? kind[i] : 0;
		if (j < nseg) {
			/* A pointer to any of its chunks names it. */
			seg[j].pair &= (k & VMMXP_WORD_PAIR) != 0;
			seg[j].unsure &= (k & VMMXP_WORD_UNSURE) != 0;
			continue;
		}
		seg[nseg++] = (struct seg){ base, size, ctx[i], chunk[i].buf, whole, host,
					    (k & VMMXP_WORD_PAIR) != 0, (k & VMMXP_WORD_UNSURE) != 0 };
	}
	return nseg;
}

/*
 * lock held: a launch or copy names a piece of @whole that the table has
 * no room for, so its use goes unrecorded: no piece moves while it is the
 * newest launch's, and the next move of each piece of that buffer waits
 * for the device (see the top).
 */
static void unrecorded_piece(const void *whole)
{
	untracked_piece = seq;
	for (int k = 0; k < ntracked; k++)
		if (track[k].whole == whole)
			track[k].unknown = uses + 1;
}

/*
 * Whether a segment of @size is read once by a launch that names @nseg
 * segments of @total bytes: it is at least two thirds of them, beside
 * others (a launch that names one segment only is not judged).
 */
static int read_once(size_t size, size_t total, size_t nseg)
{
	return nseg > 1 && size >= total - total / 3;
}

/*
 * VMMX_RUN_PLACE_SPREAD, read once: where the kept set is spread over the
 * cycle: SPREAD_CHOSEN when unset (cycles the trial timed moving clearly
 * faster for), SPREAD_ALWAYS at 1 (every moving cycle), SPREAD_NEVER at 0;
 * a bad value is said, and the default used.
 */
static int spread_wanted(void)
{
	static int mode = -1;

	if (mode < 0) {
		const char *s = getenv("VMMX_RUN_PLACE_SPREAD");

		mode = !s || !*s ? SPREAD_CHOSEN : !strcmp(s, "0") ? SPREAD_NEVER :
			!strcmp(s, "1") ? SPREAD_ALWAYS : -1;
		if (mode < 0) {
			fprintf(stderr,
				"vmmx-run: VMMX_RUN_PLACE_SPREAD=%s: expected 0 (the segments that stay are those Belady keeps) "
				"or 1 (spread over every moving cycle); using the default (spread over the cycles the "
				"trial timed moving clearly faster for)\n",
				s);
			mode = SPREAD_CHOSEN;
		}
	}
	return mode;
}

/*
 * lock held: whether the kept set is spread over the current cycle now
 * (see the top): every cycle under SPREAD_ALWAYS, none under SPREAD_NEVER;
 * by default one the trial timed moving clearly faster for (at most
 * SPREAD_MARGIN of reading in place), where its choice holds (trial_holds());
 * not one moving for want of a trial
 * (VMMX_RUN_PLACE_TRIAL=0, no timed events), nor one whose sides timed
 * about the same (a decode step's cycles: their choice is noise, and a
 * kept set chosen again costs the first sends back of the segments it
 * changes).
 */
static int spread_now(void)
{
	int mode = spread_wanted();

	if (mode != SPREAD_CHOSEN)
		return mode == SPREAD_ALWAYS;
	return trial.clear && trial_holds();
}

/*
 * lock held, at the first launch of a pass over the cycle of @len launches
 * (spread_now(): see the top): choose the segments that stay on the device,
 * spread over the cycle.  Belady's choice keeps a set and streams the rest
 * through the room left, but which set is left to history: allocation put
 * the first segments on the device, so a step's first launches run on
 * resident segments with the link idle, and its last ones wait for the
 * link.  Here a segment the cycle names at two places or more (an
 * activation, a workspace) is kept; the others, taken in the order the
 * cycle first names them, are kept in the proportion the device holds for
 * them (its room: the cycle's bytes on the device now and its free room,
 * less those kept and depth() moves of the largest of the others, the
 * stream's), evenly (an accumulator of bytes, as a line is drawn), so that
 * each stretch of the step has moves to overlap.  No more bytes cross a
 * step than Belady's choice moves; they cross beside the kernels.  Kept
 * segments are sent back only for kept ones (plan_victims()); the others
 * go first (better()).
 * Pieces are left out: as victims and for room they count as kept, so
 * that among themselves and the kept set Belady's choice stands.  Chosen
 * again when the cycle changes; the plan must hold the pass, but for at
 * most an eighth of its places (SPREAD_GAPS), which the cycle may have
 * passed over in every pass (a launch that matched a place further on,
 * the ones between then extra: a Hugging Face forward's rotary embedding,
 * whose activations the allocator hands out in another order each
 * forward); a cycle learned mid-pass waits for the next.  Segments of one
 * device only: a cycle over several is left to Belady.
 */
/* lock held: spread_choose() chose nothing for this pass, for @why (counted, reported). */
static void spread_refused(const char *why)
{
	st.spread_refused++;
	st.spread_why = why;
}

static void spread_choose(uint64_t len)
{
	struct vmmx_ctx *ctx = NULL;
	size_t total = 0, held = 0, hot = 0, biggest = 0, room = 0, kept = 0, nkept = 0, nall = 0;
	static uint64_t stamps;
	struct ctx_state *cs;
	uint64_t stamp;
	double frac, acc = 0;
	uint64_t gaps = 0;

	if (!spread_now() || spread_gen == cur.generation || len > PLAN_SLOTS)
		return;
	stamp = ++stamps;
	for (int i = 0; i < ntracked; i++)
		track[i].keep = 0;
	/* The cycle's segments that may move; one named at two places or more is kept (hot). */
	for (uint64_t q = 0; q < len; q++) {
		const struct plan *pl = &plan[q];

		if (pl->generation != cur.generation) {
			if (++gaps > len / SPREAD_GAPS) {
				spread_refused("more than an eighth of the pass's places unknown");
				return;
			}
			continue;
		}
		for (uint32_t i = 0; i < pl->n; i++) {
			struct tracked *t = find(pl->base[i], 0);

			if (!t || !t->ctx || t->whole || t->size > most_moved(t->ctx))
				continue;
			if (ctx && t->ctx != ctx) {
				spread_refused("segments on several devices");
				return;
			}
			ctx = t->ctx;
			if (t->seen == stamp) {
				t->keep = 1;
				continue;
			}
			t->seen = stamp;
			total += t->size;
			held += on_device_bytes(t);
		}
	}
	for (int i = 0; i < ntracked; i++) {
		const struct tracked *t = &track[i];

		if (t->seen == stamp && t->keep)
			hot += t->size;
		else if (t->seen == stamp && t->size > biggest)
			biggest = t->size;
	}
	cs = ctx ? state_of(ctx) : NULL;
	if (!cs || vmmx_ctx_room(ctx, (struct vmmx_loc){ VMMX_LOC_DEVICE, cs->device }, SIZE_MAX,
				 &room)) {
		spread_refused(cs ? "the device's room not known" : "no segment of the pass may move");
		return;
	}
	spread_gen = cur.generation;
	/* Segments unnamed since their allocation go first: their room is the set's. */
	for (int i = 0; i < ntracked; i++)
		if (track[i].ctx == ctx && idle_gone(&track[i], len) && !track[i].moving &&
		    !track[i].held && !unmovable(&track[i]))
			held += on_device_bytes(&track[i]);
	room += held;
	room = room > hot + depth() * biggest ? room - hot - depth() * biggest : 0;
	frac = total > hot ? (double)room / (double)(total - hot) : 0;
	/* The rest, in the order the cycle first names them, kept in the proportion @frac, evenly. */
	for (uint64_t q = 0; q < len; q++) {
		const struct plan *pl = &plan[q];

		for (uint32_t i = 0; pl->generation == cur.generation && i < pl->n; i++) {
			struct tracked *t = find(pl->base[i], 0);

			if (!t || t->seen != stamp)
				continue;
			t->seen = 0; /* counted: once */
			nall++;
			if (!t->keep) {
				acc += frac * (double)t->size;
				if (acc < (double)t->size)
					continue;
				acc -= (double)t->size;
				t->keep = 1;
			}
			kept += t->size;
			nkept++;
		}
	}
	st.spread_chosen++;
	st.spread_gaps = gaps;
	st.spread_kept = nkept;
	st.spread_kept_bytes = kept;
	st.spread_segments = nall;
	st.spread_bytes = total;
}

int vmmxp_place_launch(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx,
		       const unsigned char *kind, size_t n, long at, CUstream stream, size_t shared,
		       int (*capturing)(CUstream))
{
	static struct seg seg[VMMXP_PLACE_MAX]; /* lock */
	struct tracked *t[VMMXP_PLACE_MAX];
	uint32_t weight = shared >= TILED_SHARED ? TILED_WEIGHT : 1;
	size_t nseg, total = 0, judged = 0;
	struct plan *pl = NULL;
	int host_now = 0;

	if (n > VMMXP_PLACE_MAX)
		n = VMMXP_PLACE_MAX;
	pthread_mutex_lock(&gate);
	pthread_mutex_lock(&lock);
	seq++;
	st.tiled += weight > 1;
	cur.stream = stream;
	cur.at = at;
	cur.cycle_len = vmmxp_cycle_len(&cur.generation);
	nseg = segments_of(chunk, ctx, kind, n, seg);
	/*
	 * An idle segment named by words that may be no pointer only (stale
	 * slots of by-value structs, packed descriptors: vmmxp_word_kind()) is
	 * held as one named by pairs is, and stays idle.
	 */
	for (size_t i = 0; i < nseg; i++) {
		struct tracked *it;

		if (seg[i].unsure && !seg[i].pair && (it = find(seg[i].base, 0)) && it->idle) {
			seg[i].pair = 1;
			st.idle_unsure++;
		}
	}
	cur.nt = 0;
	if (at >= 0 && (uint64_t)at < PLAN_SLOTS && cur.cycle_len) {
		pl = &plan[at];
		*pl = (struct plan){ .generation = cur.generation };
	}
	/*
	 * Read once is judged among the segments that may move: one too large
	 * to (transformers' warm-up segment, named beside each weight a
	 * decode GEMV reads) would make every weight beside it look small.
	 */
	for (size_t i = 0; i < nseg; i++) {
		if (seg[i].size <= most_moved(seg[i].ctx) && !seg[i].pair) {
			total += seg[i].size;
			judged++;
		}
		if (seg[i].host)
			set_spilled();
		if (unsettles(&seg[i]))
			host_now = 1;
	}
	settle_host |= host_now;
	if (!spilled && nseg && !(unspilled_launches++ % SPILL_CHECK) && in_host_memory(seg[0].ctx))
		set_spilled();
	/* First mark them all named now, so that none is a victim for another. */
	for (size_t i = 0; i < nseg; i++) {
		t[i] = find(seg[i].base, 1);
		if (pl && pl->n < PLAN_SEGS && !seg[i].pair) {
			if (read_once(seg[i].size, total, judged))
				pl->once |= 1u << pl->n;
			pl->base[pl->n++] = seg[i].base;
		}
		if (!t[i]) {
			if (seg[i].whole)
				unrecorded_piece(seg[i].whole);
			continue;
		}
		cur.t[cur.nt++] = t[i];
		t[i]->size = seg[i].size;
		t[i]->whole = seg[i].whole;
		t[i]->ctx = seg[i].ctx;
		/* Two integers, maybe: held as this launch's, not a naming (see the top). */
		if (seg[i].pair) {
			t[i]->pair_seq = seq;
		} else if (t[i]->last != seq) {
			t[i]->prev = t[i]->last;
			t[i]->last = seq;
			t[i]->named += weight;
			t[i]->sure += !seg[i].unsure;
			st.idle_named += t[i]->idle;
			t[i]->idle = 0;
		}
	}
	floor_epoch++;
	/*
	 * Until some of the program's memory lies in host memory (a launch
	 * names it, or the context holds any, looked at every SPILL_CHECK
	 * launches), nothing moves: no last-use event is recorded (a driver
	 * call a launch), nothing is looked ahead for, and a segment named
	 * meanwhile that moves later waits for the whole device (its use
	 * unknown).  A program that fits pays the watch and little more.
	 */
	if (!spilled || (capturing && capturing(stream))) {
		/*
		 * Not spilled: the launch runs with no event, its use unknown.
		 * Captured (spilled, then): it runs nothing now, and the graph's
		 * launch is placed as one; the uses stand as they were.
		 */
		return pass_on(t, seg, nseg, !spilled);
	}
	if (cur.cycle_len && cur.at == 0) {
		/* A cycle done: each segment's namings in it. */
		for (int i = 0; i < ntracked; i++) {
			track[i].freq = track[i].named - track[i].named0;
			track[i].named0 = track[i].named;
			idle_again(&track[i]);
		}
		trial_boundary(stream);
		if (!in_place_mode)
			spread_choose(cur.cycle_len);
		settle_boundary(host_now);
	}
	trial_follow();
	if (trial.state == TRIAL_PENDING)
		trial_decide();
	if (settled_launch(t, seg, nseg))
		return pass_on(t, seg, nseg, 1);
	/*
	 * One the mover is bringing in, or sending back for room, is waited
	 * for; then where it lies is looked at again.
	 */
	for (size_t i = 0; i < nseg; i++) {
		if (!t[i])
			continue;
		if (t[i]->moving) {
			struct vmmx_loc unknown = { VMMX_LOC_HOST, 0 };

			wait_mover(t[i]);
			seg[i].host = in_host(seg[i].buf, seg[i].base, seg[i].size, unknown);
		}
		wait_pieces_above(t[i]);
		t[i]->on_device = !seg[i].host;
	}
	for (size_t i = 0; i < nseg; i++) {
		int once = read_once(seg[i].size, total, judged);

		if (!seg[i].host || seg[i].pair)
			continue;
		if (t[i]) {
			(void)promote(t[i], ON_DEMAND, once, cur.cycle_len, 0);
		} else {
			struct tracked tmp = { .base = seg[i].base, .size = seg[i].size,
					       .whole = seg[i].whole, .ctx = seg[i].ctx,
					       .last = seq };

			(void)promote(&tmp, ON_DEMAND, once, cur.cycle_len, 0);
		}
	}
	/* What stays in host memory is read where it lies: mapped there. */
	for (size_t i = 0; i < nseg; i++)
		if (t[i] && t[i]->parked)
			unpark(t[i]);
	/* The mover may go on meanwhile: what this launch named is no victim until the next (seq). */
	pthread_mutex_unlock(&lock);
	return 1;
}

/*
 * lock held: whether the device has free room for @t, read once, to be
 * brought in ahead (never at the cost of another: promote()).  Asked at
 * most once every ONCE_RECHECK launches on a device while the answer there
 * is no (a smaller segment that would fit waits as well): decode
 * reads every weight once, and each launch would otherwise queue moves
 * that the mover then finds no room for.
 */
static int once_room(const struct tracked *t)
{
	struct ctx_state *cs = state_of(t->ctx);
	size_t lack, in_host;

	if (!cs || seq < cs->once_wait)
		return 0;
	room_for(t, (struct vmmx_loc){ VMMX_LOC_DEVICE, cs->device }, &lack, &in_host);
	if (lack)
		cs->once_wait = seq + ONCE_RECHECK;
	return !lack;
}

/*
 * Bring in what the launches after the current one name, the cycle being
 * known: the segments of the launches ahead (up to ahead(): AHEAD, or
 * AHEAD_SPREAD under the kept set, whose segments in host memory are the
 * ones not kept, a layer's two weights some 40 launches apart in a Hugging
 * Face forward: the next layer's moves are queued while the one before
 * still runs) in host memory
 * are queued for the mover in the order they are needed, so that their
 * copies run beside the kernels and the program goes on launching.
 * Without the mover (VMMX_RUN_PLACE_MOVER=0, or it could not start) the
 * first launch ahead with segments in host memory has them brought in
 * here, one launch's worth per call, as the first version did.
 *
 * Victims.  On the launching thread, do no harm: a victim must be one
 * Belady would also send back when that launch comes, after the segments
 * of the launches ahead have been used, so its next use must come after
 * theirs that follow the window (@bound): one of them is never a victim
 * for a move ahead.  Otherwise bringing in early sends back a segment that
 * waiting would have kept (a cycle of weights would stream through the
 * device, each sent back after its use), and it stops, as it does where no
 * room can be made.  The mover streams instead: a victim must only not be
 * needed before the launch its move is for, and at most depth() moves ahead
 * are queued or under way.  Each segment brought in early holds a slot
 * that waiting would have left to a resident one, so streaming depth() deep
 * costs up to depth() - 1 more transfers a step than Belady's, in exchange
 * for copies that run beside the kernels instead of between them.
 */
static void bring_in_ahead(void)
{
	uint64_t len = cur.cycle_len, far = ahead(spread_on(len)), horizon = len - 1 < far ? len - 1 : far;
	uint64_t bound = 0;
	int queue = mover_on();

	if (frozen)
		return; /* nothing moves any more (vmmxp_place_pointed()) */
	for (uint64_t d = 1; d <= horizon; d++) {
		uint64_t q = ((uint64_t)cur.at + d) % len;
		const struct plan *pl = q < PLAN_SLOTS ? &plan[q] : NULL;
		uint32_t live = 0;
		int moved = 0;

		if (!pl || pl->generation != cur.generation)
			return;
		for (uint32_t i = 0; i < pl->n; i++) {
			struct tracked *t = find(pl->base[i], 0);
			uint64_t after, period;

			if (!t || !t->ctx)
				continue;
			/*
			 * Its use expected from its period is past: the plan is out of
			 * date there (the workspace of the last step, freed since).
			 */
			period = t->prev && t->last - t->prev < len ? t->last - t->prev : len;
			if (t->last + period <= seq)
				continue;
			live |= 1u << i;
			/* Its use in the window, then its period again. */
			after = seq + d + period;
			if (after > bound && t->on_device)
				bound = after;
		}
		for (uint32_t i = 0; i < pl->n; i++) {
			struct tracked *t = find(pl->base[i], 0);
			int once = (pl->once >> i) & 1;

			/*
			 * As last seen here: one that libvmmx moved meanwhile is left
			 * to its launch, as is one too large to make room for.
			 */
			if (!(live >> i & 1) || t->on_device || t->moving || t->size > most_moved(t->ctx) ||
			    piece_blocked(t) || unmovable(t))
				continue;
			if (once && !once_room(t))
				continue;
			if (queue) {
				if (tail - head + (uint64_t)busy >= depth())
					return;
				enqueue(t, once, len, seq + d);
			} else if (promote(t, AHEAD_OF, once, len, bound)) {
				return;
			}
			moved = 1;
		}
		if (moved && !queue)
			return;
	}
}

/*
 * VMMX_RUN_PLACE_CHECK=1, a diagnosis (slow): each launch placed is waited
 * for, on its stream, once it is passed on, and the launch trace records the
 * wait's outcome after it ("event":"check"); the first failure is also
 * printed.  The mover goes on meanwhile, so a launch that fails names what
 * the moves around it broke.
 */
static int check_wanted(void)
{
	static int wanted = -1;

	if (wanted < 0) {
		const char *s = getenv("VMMX_RUN_PLACE_CHECK");

		wanted = s && *s && strcmp(s, "0");
	}
	return wanted;
}

/*
 * No lock held (a kernel may wait for another thread's launch): wait for
 * the launch just passed on, on @stream (see check_wanted()).
 */
static void check_launch(CUstream stream, uint64_t at)
{
	__typeof__(&cuStreamSynchronize) sync = VMMXP_REAL(cuStreamSynchronize);
	static int said;
	int err;

	if (!sync)
		return;
	err = (int)sync(stream);
	vmmxp_trace_check(err);
	if (err && !__atomic_fetch_add(&said, 1, __ATOMIC_RELAXED))
		fprintf(stderr, "vmmx-run: placement check: launch %llu (placed) failed on the GPU "
			"with CUDA error %d; the launch trace (--trace) shows what it named and "
			"what moved before it\n", (unsigned long long)at, err);
}

void vmmxp_place_done(void)
{
	CUstream stream;
	uint64_t at;
	int check;

	pthread_mutex_lock(&lock);
	/* Each segment the launch named has this launch as its last use. */
	if (cur.nt)
		used(cur.t, cur.nt, cur.stream);
	if (cur.cycle_len && cur.at >= 0 && !in_place_mode)
		bring_in_ahead();
	check = check_wanted();
	stream = cur.stream;
	at = seq;
	pthread_mutex_unlock(&lock);
	pthread_mutex_unlock(&gate);
	if (check)
		check_launch(stream, at);
}

/* The segments of the copies being passed on, per thread (lock: their held counts). */
static __thread struct tracked *use_t[VMMXP_PLACE_MAX];
static __thread size_t use_n;

int vmmxp_place_use(const struct vmmx_chunk_info *chunk, struct vmmx_ctx *const *ctx, size_t n,
		    CUstream stream, int (*capturing)(CUstream))
{
	/* Per thread: another thread's copy runs while this one waits for the mover. */
	static __thread struct seg seg[VMMXP_PLACE_MAX];
	size_t nseg;
	int again;

	if (n > VMMXP_PLACE_MAX)
		n = VMMXP_PLACE_MAX;
	pthread_mutex_lock(&lock);
	/* Before memory spills nothing moves (and a later move waits for the device). */
	if (!spilled || (capturing && capturing(stream))) {
		/* Named all the same: no longer idle (vmmxp_place_allocated()). */
		for (size_t i = 0; st.idle_tracked && i < n; i++) {
			struct tracked *t = find(vmmx_buf_ptr(chunk[i].buf), 0);

			if (t && t->idle) {
				st.idle_named++;
				t->idle = 0;
			}
		}
		pthread_mutex_unlock(&lock);
		return 0;
	}
	nseg = segments_of(chunk, ctx, NULL, n, seg);
	/*
	 * One the mover is moving is waited for (one queued, dropped): the
	 * lock is let go meanwhile, so all are looked at again after a wait.
	 */
	do {
		again = 0;
		for (size_t i = 0; i < nseg && !again; i++) {
			struct tracked *t = find(seg[i].base, 0);

			if (t && t->moving) {
				wait_mover(t);
				again = 1;
			}
		}
	} while (again);
	use_n = 0;
	for (size_t i = 0; i < nseg; i++) {
		struct tracked *t = find(seg[i].base, 1);

		if (!t) {
			if (seg[i].whole) /* as for a launch (vmmxp_place_launch()) */
				unrecorded_piece(seg[i].whole);
			continue;
		}
		if (!t->ctx) { /* first met here: as if named now */
			t->size = seg[i].size;
			t->ctx = seg[i].ctx;
			t->last = seq;
			t->on_device = !seg[i].host;
		}
		t->whole = seg[i].whole;
		t->held++;
		floor_epoch++;
		t->named++;
		t->sure++;
		st.idle_named += t->idle;
		t->idle = 0;
		use_t[use_n++] = t;
	}
	/* Held now, so that no move at or above one begins: those under way are waited for. */
	for (size_t i = 0; i < use_n; i++) {
		wait_pieces_above(use_t[i]);
		unpark(use_t[i]);
	}
	if (use_n)
		st.copies++;
	pthread_mutex_unlock(&lock);
	return use_n != 0;
}

void vmmxp_place_use_done(CUstream stream)
{
	pthread_mutex_lock(&lock);
	used(use_t, use_n, stream);
	for (size_t i = 0; i < use_n; i++)
		use_t[i]->held--;
	floor_epoch++;
	use_n = 0;
	pthread_mutex_unlock(&lock);
}

struct vmmxp_place_stats vmmxp_place_stats(void)
{
	struct vmmxp_place_stats s;

	pthread_mutex_lock(&lock);
	s = st;
	s.trial_in_place_now = (uint64_t)in_place_mode;
	pthread_mutex_unlock(&lock);
	return s;
}
