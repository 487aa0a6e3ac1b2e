// SPDX-License-Identifier: MIT
/*
 * place-replay.c - vmmx-place --replay TRACE: a placement experiment on
 * paper, from the launch trace of any real program (vmmx-run --trace).
 *
 * The trace holds, one JSON object a line, the launches the interposer
 * watched ("event":"launch": the chunks each names, with their base, size
 * and location at the launch, and the launch's place in the learned cycle)
 * and libvmmx's placement records (no "event": the buffer, its id, and the
 * offset, size and location of each chunk as it was placed).  This file
 * reads them back, rebuilds the sequence of launches and the segments they
 * name, and replays that sequence under each placement policy with the cost
 * model of replay_policy(), whose top comment states every assumption.
 *
 * Segments: a chunk that a placement record knows belongs to its libvmmx
 * buffer, and the buffer is the segment (the unit --placement launch
 * moves: a kernel given a tensor's base reads the whole tensor, while the
 * trace names only the chunk under the pointer); a chunk no placement
 * record knows is a segment of its own.  A buffer's size is the largest
 * extent its records show.  A newer buffer placed over an older one's
 * addresses means the older was freed: its segment is gone from then on.
 *
 * Only the launches of one process are replayed (the first that launches);
 * the others are counted.  The file is read twice (that process is known
 * only at its first launch), so it must be a regular file.
 *
 * Single-threaded, like the tool.  Reads the file and writes stdout; opens
 * no libvmmx context and needs no GPU.
 *
 * Why one file of about 1,300 lines: the trace reader, the segments, the
 * model and the output are one mode of vmmx-place, in that order below; a
 * split would put every structure in a header for no second user.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/tap/json.h"
#include "tools/place.h"

#define NONE SIZE_MAX

/* The rates when not given: this project's H200 (docs/PERFORMANCE.md): a stream read
 * of cuMemAlloc memory, and of cuMemHostAlloc memory over PCIe Gen5. */
#define DEFAULT_HBM_GBPS  4427.0
#define DEFAULT_PCIE_GBPS 51.4
/* Cells of the residency chart past which it is left out (segments x launches of a step). */
#define MAX_CELLS (4u << 20)
/* What the interposer lists of one launch's chunks (preload/launch.c, TRACE_CHUNKS). */
#define TRACE_CHUNKS 64
/* The longest cycle --cycle takes (preload/cycle.c, MAX_CYCLE). */
#define MAX_CYCLE_LEN 65536
/* Movers modelled by default (vmmx-run's, preload/place.c MOVERS_DEFAULT), and at most. */
#define DEFAULT_MOVERS 2
#define MAX_MOVERS 4
/*
 * Launches ahead of its launch a move may be made, a cycle known: by
 * default, under launch-spread's kept set, and at most (preload/place.c,
 * AHEAD, AHEAD_SPREAD, AHEAD_MAX; --ahead).
 */
#define AHEAD_LAUNCHES 32
#define AHEAD_SPREAD 128
#define AHEAD_MAX 1024
/* Dynamic shared memory from which a kernel is taken to work on tiles (preload/place.c). */
#define TILED_SHARED (32u << 10)

enum rpolicy { RP_IN_PLACE, RP_LRU, RP_BELADY, RP_CYCLE, RP_READ, RP_SPREAD, RP_COUNT };

static const char *const rp_names[RP_COUNT] = {
    [RP_IN_PLACE] = "in-place",
    [RP_LRU] = "launch-lru",
    [RP_BELADY] = "launch-belady",
    [RP_CYCLE] = "launch-cycle",
    [RP_READ] = "launch-in-place",
    [RP_SPREAD] = "launch-spread",
};

enum compute { COMPUTE_AUTO, COMPUTE_GAPS, COMPUTE_NONE };

/* --move-rates: what a move costs. */
enum move_rates { MR_AUTO, MR_TRACE, MR_PCIE };

struct ropts {
	const char *trace;
	int policy[RP_COUNT];
	int policy_given;
	uint64_t device_bytes; /* 0: from the trace */
	double hbm, pcie;      /* GB/s */
	enum compute compute;
	double compute_step;   /* --compute-step (s); 0: not given */
	double tiled_reads;    /* --tiled-reads: a tiled launch's reads in place, times */
	enum move_rates moves;
	unsigned int movers;
	unsigned int ahead;    /* --ahead: launches a move may be made ahead; 0: the default */
	unsigned int cycle;    /* the step reported: the last of a cycle this long; 0: the last */
	int json;
	const char *plot;
};

/* A libvmmx buffer, as its placement records show it. */
struct rbuf {
	unsigned long long id;
	uint64_t base, extent;
	int host;	/* some chunk placed in host memory */
	size_t seg;	/* its segment once a launch names it; NONE before */
	size_t dead_at; /* the first launch after a newer buffer took its addresses; NONE */
};

struct rseg {
	uint64_t base, size;
	int from_buf;	/* a libvmmx buffer (else one chunk) */
	size_t buf;	/* from_buf: its index */
	int first_host; /* where the trace first saw it: some of it in host memory */
	int last_host;	/* ... and last saw it */
	size_t born;	/* the first launch naming it */
	size_t dead_at; /* the first launch at which it is gone; NONE */
	int many;	/* named at two addresses or more ("at"): holds many tensors */
};

/* One segment a launch names, and the next launch that names it (NONE: none). */
struct rref {
	size_t seg;
	size_t next;
	int host;	/* in host memory (some of it) at this launch, in the recorded run */
	uint64_t bytes; /* what the launch reads of it (place_bytes()) */
};

/* An address a launch named a segment by (a chunk's "at"), for ref @ref. */
struct rat {
	size_t ref;
	uint64_t at;
};

struct rlaunch {
	double t;	  /* the time field (s); NAN when absent */
	long pos;	  /* cycle_pos */
	size_t ref, nref; /* T->refs[ref .. ref + nref) */
	int truncated;	  /* chunks_named > the chunks listed */
	double compute;	  /* the compute floor (s) */
	size_t cycle_len; /* the known cycle's length at this launch; 0: none */
	size_t in_cycle;  /* ... of the step it lies in, also for a launch at -1 in one */
	int tiled;	  /* "shared" >= TILED_SHARED: it reads its operands' tiles again */
};

/* A u64 -> index map, open addressing (linear probing), grown at half full. */
struct umap {
	uint64_t *key;
	size_t *val;
	size_t cap, n;
};

/*
 * A move or a wait the recorded run made, with its record's time (when it
 * ended), for the recorded step's figures (replay_recorded()).
 */
enum rkind { R_OUT, R_IN, R_DEVICE, R_EVENT, R_MOVER, R_PIECES, R_KINDS };

struct rtimed {
	double t;
	enum rkind kind;
	int by_mover;	/* "by":"mover" */
	uint64_t ns;
	uint64_t size;	/* a move's bytes (0: a wait) */
};

/* Segment @seg is gone from launch @at on. */
struct rdeath {
	size_t at, seg;
};

struct trace {
	const char *path;
	long pid;
	int have_pid;
	struct rlaunch *l;
	size_t nl, capl;
	struct rref *refs;
	size_t nrefs, caprefs;
	struct rat *ats;
	size_t nats, capats;
	struct rseg *segs;
	size_t nsegs, capsegs;
	struct rbuf *bufs;
	size_t nbufs, capbufs;
	struct umap chunk_buf; /* chunk base -> buffer */
	struct umap buf_id;    /* buffer id -> buffer */
	struct umap chunk_seg; /* chunk base -> segment (chunks no record knows) */
	size_t placements, other_launches, other_events, truncated, moves_seen;
	size_t tiled, have_shared; /* launches recorded tiled; launches with a "shared" */
	/* The recorded run's own moves ("event":"move"), [0] back to host memory, [1] in. */
	uint64_t move_bytes[2], move_ns[2];
	size_t move_n[2], move_failed;
	double *move_rate[2]; /* bytes per second of each that moved some in some time */
	size_t move_nrate[2], move_cap[2];
	/* Its moves and waits with a time, in the order recorded. */
	struct rtimed *timed;
	size_t ntimed, captimed;
	uint64_t devices; /* device ordinals seen, as bits (0-63) */
	int have_times;
	/* The cycle: the step reported, if any (of a cycle of @want_cycle launches when not 0). */
	size_t cycle_len, steps, step_first, step_len, want_cycle, last_len;
	/* The launches the step figures and the residency cover: the step, else all. */
	size_t span_first, span_len;
	/* The step's moves, [0] back and [1] in: bytes, and seconds one was under way. */
	uint64_t step_bytes[2];
	double step_busy[2];
	/* Segments by the launch they are gone at, sorted (dying[k].at ascending). */
	struct rdeath *dying;
	size_t ndying;
};

/* ---- small containers ---- */

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t n = *cap ? *cap : 16;
	void *q;

	if (need <= *cap)
		return 0;
	while (n < need)
		n *= 2;
	q = realloc(*p, n * size);
	if (!q)
		return -1;
	*p = q;
	*cap = n;
	return 0;
}

static size_t umap_slot(const struct umap *m, uint64_t k)
{
	return (size_t)((k * 0x9e3779b97f4a7c15ull) >> 17) & (m->cap - 1);
}

static size_t umap_get(const struct umap *m, uint64_t k)
{
	if (!m->cap)
		return NONE;
	for (size_t i = umap_slot(m, k);; i = (i + 1) & (m->cap - 1)) {
		if (m->val[i] == NONE)
			return NONE;
		if (m->key[i] == k)
			return m->val[i];
	}
}

static int umap_put(struct umap *m, uint64_t k, size_t v)
{
	size_t i;

	if (2 * (m->n + 1) > m->cap) {
		struct umap g = {.cap = m->cap ? 2 * m->cap : 64};

		g.key = malloc(g.cap * sizeof(*g.key));
		g.val = malloc(g.cap * sizeof(*g.val));
		if (!g.key || !g.val) {
			free(g.key);
			free(g.val);
			return -1;
		}
		for (i = 0; i < g.cap; i++)
			g.val[i] = NONE;
		for (i = 0; i < m->cap; i++)
			if (m->val[i] != NONE)
				umap_put(&g, m->key[i], m->val[i]);
		free(m->key);
		free(m->val);
		*m = g;
	}
	for (i = umap_slot(m, k); m->val[i] != NONE && m->key[i] != k; i = (i + 1) & (m->cap - 1))
		;
	if (m->val[i] == NONE)
		m->n++;
	m->key[i] = k;
	m->val[i] = v;
	return 0;
}

static void umap_free(struct umap *m)
{
	free(m->key);
	free(m->val);
}

static void trace_free(struct trace *T)
{
	free(T->l);
	free(T->refs);
	free(T->ats);
	free(T->segs);
	free(T->bufs);
	free(T->dying);
	umap_free(&T->chunk_buf);
	umap_free(&T->buf_id);
	umap_free(&T->chunk_seg);
	free(T->move_rate[0]);
	free(T->move_rate[1]);
	free(T->timed);
}

/* ---- reading the trace ---- */

/* Where a bad line is reported: "vmmx-place: FILE:LINE: ...". */
struct where {
	const char *path;
	size_t line;
};

__attribute__((format(printf, 2, 3))) static int bad(const struct where *w, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, PROG ": %s:%zu: ", w->path, w->line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -1;
}

static int oom(void)
{
	fprintf(stderr, PROG ": out of memory\n");
	return -1;
}

/* A "0x..." address (the traces' %p); 0 when it is none. */
static uint64_t hex_addr(const struct json *j)
{
	const char *s = json_str(j);
	char *end;
	unsigned long long v;

	if (!s || strncmp(s, "0x", 2))
		return 0;
	errno = 0;
	v = strtoull(s + 2, &end, 16);
	return errno || *end || end == s + 2 ? 0 : (uint64_t)v;
}

/* A whole number member @key of @o into *@out; -1 after a message when missing. */
static int need_u64(const struct where *w, const struct json *o, const char *key, const char *rec,
		    uint64_t *out)
{
	uint64_t v = json_u64(json_get(o, key));

	if (v == UINT64_MAX)
		return bad(w, "%s without a whole number \"%s\"", rec, key);
	*out = v;
	return 0;
}

/* Segment @s is gone from launch @at (a newer buffer took its addresses). */
static void seg_dies(struct trace *T, size_t s, size_t at)
{
	if (s != NONE && T->segs[s].dead_at == NONE)
		T->segs[s].dead_at = at;
}

/* Where a chunk lies: 1 host, 0 a device (its ordinal noted), -1 not a location. */
static int loc_host(struct trace *T, const char *loc)
{
	char *end;
	long dev;

	if (!loc)
		return -1;
	if (!strcmp(loc, "host") || !strncmp(loc, "host-numa:", 10))
		return 1;
	if (strncmp(loc, "device:", 7))
		return -1;
	dev = strtol(loc + 7, &end, 10);
	if (*end || end == loc + 7 || dev < 0)
		return -1;
	if (dev < 64)
		T->devices |= 1ull << dev;
	return 0;
}

/* A placement record: the chunk's buffer, its extent, and the buffers it supersedes. */
static int take_placement(struct trace *T, const struct where *w, const struct json *o)
{
	uint64_t base = hex_addr(json_get(o, "buf")), id = 0, off = 0, size = 0;
	int host = loc_host(T, json_str(json_get(o, "chosen")));
	size_t b;

	if (!base)
		return bad(w, "placement record without a \"buf\" address (\"0x...\")");
	if (host < 0)
		return bad(w,
			   "placement record whose \"chosen\" is not a location (\"device:N\" or "
			   "\"host\")");
	if (need_u64(w, o, "buf_id", "placement record", &id) ||
	    need_u64(w, o, "offset", "placement record", &off) ||
	    need_u64(w, o, "size", "placement record", &size))
		return -1;
	T->placements++;
	b = umap_get(&T->buf_id, id);
	if (b == NONE) {
		if (grow((void **)&T->bufs, &T->capbufs, T->nbufs + 1, sizeof(*T->bufs)))
			return oom();
		b = T->nbufs++;
		T->bufs[b] = (struct rbuf){.id = id, .base = base, .seg = NONE, .dead_at = NONE};
		if (umap_put(&T->buf_id, id, b))
			return oom();
	}
	if (off + size > T->bufs[b].extent)
		T->bufs[b].extent = off + size;
	T->bufs[b].host |= host;
	/* Any live buffer over these addresses was freed before this one was placed. */
	for (size_t i = 0; i < T->nbufs; i++) {
		struct rbuf *o2 = &T->bufs[i];

		if (i == b || o2->dead_at != NONE || base + off >= o2->base + o2->extent ||
		    base + off + size <= o2->base)
			continue;
		o2->dead_at = T->nl;
		seg_dies(T, o2->seg, T->nl);
	}
	return umap_put(&T->chunk_buf, base + off, b) ? oom() : 0;
}

/* The segment of the chunk at @base (@size bytes), made on first naming. */
static size_t seg_of(struct trace *T, uint64_t base, uint64_t size, int host)
{
	size_t b = umap_get(&T->chunk_buf, base), s;

	if (b != NONE && T->bufs[b].dead_at == NONE) {
		if (T->bufs[b].seg != NONE)
			return T->bufs[b].seg;
	} else {
		b = NONE;
		s = umap_get(&T->chunk_seg, base);
		if (s != NONE && T->segs[s].size == size && T->segs[s].dead_at == NONE)
			return s;
		/* Another chunk at this base: the old one was freed. */
		if (s != NONE)
			seg_dies(T, s, T->nl);
	}
	if (grow((void **)&T->segs, &T->capsegs, T->nsegs + 1, sizeof(*T->segs)))
		return NONE;
	s = T->nsegs++;
	T->segs[s] = (struct rseg){.base = b != NONE ? T->bufs[b].base : base,
				   .size = size,
				   .from_buf = b != NONE,
				   .buf = b,
				   .first_host = b != NONE ? T->bufs[b].host : host,
				   .last_host = b != NONE ? T->bufs[b].host : host,
				   .born = T->nl,
				   .dead_at = NONE};
	if (b != NONE)
		T->bufs[b].seg = s;
	else if (umap_put(&T->chunk_seg, base, s))
		return NONE;
	return s;
}

/* A launch record: its segments (one ref each, host if any of its chunks is). */
static int take_launch(struct trace *T, const struct where *w, const struct json *o)
{
	const struct json *chunks = json_get(o, "chunks"), *pos = json_get(o, "cycle_pos");
	const struct json *t = json_get(o, "time"), *shared = json_get(o, "shared");
	uint64_t named = json_u64(json_get(o, "chunks_named"));
	const char *api = json_str(json_get(o, "api"));
	/* A graph launch names each segment by its base, and reads many tensors of it. */
	int graph = api && (!strcmp(api, "cuGraphLaunch") || !strcmp(api, "cudaGraphLaunch"));
	struct rlaunch *L;
	size_t first = T->nrefs;

	if (json_type(chunks) != JSON_ARR)
		return bad(w, "launch record without a \"chunks\" array");
	if (json_type(pos) != JSON_NUM || json_num(pos) != floor(json_num(pos)) ||
	    json_num(pos) < -1)
		return bad(w, "launch record without a \"cycle_pos\" (-1 or a place in the cycle)");
	if (grow((void **)&T->l, &T->capl, T->nl + 1, sizeof(*T->l)))
		return oom();
	for (size_t i = 0; i < json_len(chunks); i++) {
		const struct json *c = json_index(chunks, i);
		uint64_t base = hex_addr(json_get(c, "base")), size = json_u64(json_get(c, "size"));
		int host = loc_host(T, json_str(json_get(c, "loc")));
		uint64_t at;
		size_t s, k;

		if (!base || size == UINT64_MAX || !size || host < 0)
			return bad(
			    w,
			    "chunk %zu of the launch: expected {\"base\":\"0x...\",\"size\":N,"
			    "\"loc\":\"device:N\" or \"host\"}",
			    i + 1);
		/* Named by two integers, not a pointer: the interposer does not place it either. */
		if (json_type(json_get(c, "pair")) == JSON_NUM && json_num(json_get(c, "pair")) == 1)
			continue;
		s = seg_of(T, base, size, host);
		if (s == NONE)
			return oom();
		for (k = first; k < T->nrefs && T->refs[k].seg != s; k++)
			;
		if (k < T->nrefs) {
			T->refs[k].host |= host;
		} else {
			if (grow((void **)&T->refs, &T->caprefs, T->nrefs + 1, sizeof(*T->refs)))
				return oom();
			T->refs[T->nrefs++] = (struct rref){.seg = s, .next = NONE, .host = host};
		}
		/* Every address it was named by (a weight and its bias in one segment: two). */
		at = graph ? 0 : hex_addr(json_get(c, "at"));
		if (at) {
			if (grow((void **)&T->ats, &T->capats, T->nats + 1, sizeof(*T->ats)))
				return oom();
			T->ats[T->nats++] = (struct rat){k, at};
		}
	}
	for (size_t k = first; k < T->nrefs; k++) {
		struct rseg *g = &T->segs[T->refs[k].seg];

		/* A chunk's first sighting is where it starts; a buffer's records say. */
		if (g->born == T->nl && !g->from_buf)
			g->first_host = T->refs[k].host;
		else if (g->last_host != T->refs[k].host)
			T->moves_seen++;
		g->last_host = T->refs[k].host;
	}
	L = &T->l[T->nl++];
	*L = (struct rlaunch){.t = json_type(t) == JSON_NUM ? json_num(t) : NAN,
			      .pos = (long)json_num(pos),
			      .ref = first,
			      .nref = T->nrefs - first,
			      .truncated = named != UINT64_MAX && named > json_len(chunks),
			      .tiled = json_type(shared) == JSON_NUM &&
				       json_num(shared) >= (double)TILED_SHARED};
	T->truncated += (size_t)L->truncated;
	T->tiled += (size_t)L->tiled;
	T->have_shared += json_type(shared) == JSON_NUM;
	return 0;
}

/* @o's move or wait of @kind, kept when the record has a time; 0, or -1 after a message. */
static int take_timed(struct trace *T, const struct json *o, enum rkind kind, uint64_t ns,
		      uint64_t size)
{
	const struct json *t = json_get(o, "time");
	const char *by = json_str(json_get(o, "by"));

	if (json_type(t) != JSON_NUM)
		return 0;
	if (grow((void **)&T->timed, &T->captimed, T->ntimed + 1, sizeof(*T->timed)))
		return oom();
	T->timed[T->ntimed++] =
		(struct rtimed){ json_num(t), kind, by && !strcmp(by, "mover"), ns, size };
	return 0;
}

/*
 * A wait the recorded run made (--placement launch): what for, how long;
 * kept for the recorded step's figures.
 */
static int take_wait(struct trace *T, const struct where *w, const struct json *o)
{
	static const char *const fors[] = { "device", "event", "mover", "pieces" };
	const char *f = json_str(json_get(o, "for"));
	uint64_t ns = json_u64(json_get(o, "ns"));

	for (int k = 0; f && ns != UINT64_MAX && k < 4; k++)
		if (!strcmp(f, fors[k]))
			return take_timed(T, o, (enum rkind)(R_DEVICE + k), ns, 0);
	return bad(w, "wait record: expected \"for\":\"device\", \"event\", \"mover\" or "
		      "\"pieces\" and \"ns\":N");
}

/*
 * A move the recorded run made (--placement launch): its bytes and time,
 * by direction, to price the replay's moves with (--move-rates).
 */
static int take_move(struct trace *T, const struct where *w, const struct json *o)
{
	const char *to = json_str(json_get(o, "to"));
	uint64_t size = json_u64(json_get(o, "size")), ns = json_u64(json_get(o, "ns"));
	const struct json *okv = json_get(o, "ok");
	int in;

	if (!to || (strcmp(to, "device") && strcmp(to, "host")) || size == UINT64_MAX ||
	    ns == UINT64_MAX || json_type(okv) != JSON_BOOL)
		return bad(w, "move record: expected \"to\":\"device\" or \"host\", \"size\":N, "
			      "\"ns\":N and \"ok\":true or false");
	if (!json_bool(okv)) {
		T->move_failed++;
		return 0;
	}
	in = !strcmp(to, "device");
	/* Rates of the moves that moved something, in measurable time. */
	if (size && ns) {
		if (grow((void **)&T->move_rate[in], &T->move_cap[in], T->move_nrate[in] + 1,
			 sizeof(double)))
			return oom();
		T->move_rate[in][T->move_nrate[in]++] = (double)size * 1e9 / (double)ns;
	}
	T->move_bytes[in] += size;
	T->move_ns[in] += ns;
	T->move_n[in]++;
	return take_timed(T, o, in ? R_IN : R_OUT, ns, size);
}

/* One line: 0 taken or skipped, -1 after a message. */
static int take_line(struct trace *T, const struct where *w, const char *line, int pass)
{
	const struct json *ev, *pid;
	const char *err = NULL;
	struct json *o;
	int rc = 0, launch;

	if (!line[strspn(line, " \t\r\n")])
		return 0;
	o = json_parse(line, &err);
	if (!o)
		return bad(w, "not JSON: %s", err ? err : "?");
	if (json_type(o) != JSON_OBJ) {
		json_free(o);
		return bad(w, "not a JSON object");
	}
	ev = json_get(o, "event");
	pid = json_get(o, "pid");
	launch = json_str(ev) && !strcmp(json_str(ev), "launch");
	if (pass == 0) {
		/* The first pass only finds the process to replay (-1: records without a pid). */
		if (launch && !T->have_pid) {
			T->pid = json_type(pid) == JSON_NUM ? (long)json_num(pid) : -1;
			T->have_pid = 1;
		}
	} else if (json_type(pid) == JSON_NUM && (long)json_num(pid) != T->pid) {
		T->other_launches += (size_t)launch;
	} else if (launch) {
		rc = take_launch(T, w, o);
	} else if (json_str(ev) && !strcmp(json_str(ev), "move")) {
		rc = take_move(T, w, o);
	} else if (json_str(ev) && !strcmp(json_str(ev), "wait")) {
		rc = take_wait(T, w, o);
	} else if (ev) {
		T->other_events++; /* another kind of event: not this replay's */
	} else if (json_get(o, "buf") && json_get(o, "chosen")) {
		rc = take_placement(T, w, o);
	} else {
		rc = bad(w, "neither a launch record (\"event\":\"launch\") nor a placement record "
			    "(\"buf\", \"offset\", \"size\", \"chosen\")");
	}
	json_free(o);
	return rc;
}

static int read_pass(struct trace *T, FILE *f, int pass)
{
	struct where w = {T->path, 0};
	char *line = NULL;
	size_t cap = 0;
	int rc = 0;

	rewind(f);
	while (!rc && getline(&line, &cap, f) >= 0) {
		w.line++;
		rc = take_line(T, &w, line, pass);
		if (pass == 0 && T->have_pid)
			break;
	}
	if (!rc && ferror(f)) {
		fprintf(stderr, PROG ": %s: read error\n", T->path);
		rc = -1;
	}
	free(line);
	return rc;
}

/* Next uses, buffer sizes, deaths, the cycle, the compute floors; -1 after a message. */
static int trace_finish(struct trace *T);

static int read_trace(struct trace *T, const char *path)
{
	struct stat st;
	FILE *f = fopen(path, "r");
	int rc;

	T->path = path;
	if (!f) {
		fprintf(stderr, PROG ": --replay %s: cannot open: %s\n", path, strerror(errno));
		return -1;
	}
	if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode)) {
		fprintf(stderr,
			PROG ": --replay %s: not a regular file (the trace is read twice)\n", path);
		fclose(f);
		return -1;
	}
	rc = read_pass(T, f, 0);
	if (!rc && !T->have_pid) {
		fprintf(stderr,
			PROG ": --replay %s: no launch records (\"event\":\"launch\"): record them "
			     "with vmmx-run --trace FILE (or --launches with VMMX_TRACE)\n",
			path);
		rc = -1;
	}
	if (!rc)
		rc = read_pass(T, f, 1);
	fclose(f);
	return rc ? rc : trace_finish(T);
}

/* ---- what the replay derives from the trace ---- */

/*
 * The cycle: a step runs from a launch at cycle_pos 0 to the next one
 * (launches the cycle did not expect, at -1, and skipped positions may
 * come between, at most 1 + L/8 of the former, as the interposer's cycle
 * keeps to); its cycle's length L is its largest position + 1, which each
 * of its launches at a position gets (a launch at -1 gets none).  The
 * launches after the last 0 make a step too when they end at position
 * L - 1, L the same as the step before.  The step reported is the last (the steady state: the first
 * pays the warm-up).
 */
static void find_cycle(struct trace *T)
{
	for (size_t a = 0, b; a < T->nl; a = b) {
		size_t extra = 0;
		long top = -1;

		for (b = a + 1; b < T->nl && T->l[b].pos != 0; b++)
			;
		for (size_t i = a; i < b; i++) {
			top = T->l[i].pos > top ? T->l[i].pos : top;
			extra += T->l[i].pos < 0;
		}
		for (size_t i = a; i < b; i++) {
			T->l[i].cycle_len = T->l[i].pos >= 0 ? (size_t)top + 1 : 0;
			T->l[i].in_cycle = (size_t)(top + 1);
		}
		/* More unexpected launches than a cycle keeps (1 + L/8 a pass): not a step. */
		if (T->l[a].pos != 0 || extra > 1 + (size_t)(top + 1) / 8 ||
		    (b == T->nl &&
		     (T->l[b - 1].pos != top || (T->steps && (size_t)top + 1 != T->cycle_len))))
			continue;
		T->last_len = (size_t)top + 1;
		/* --cycle: the steps of another cycle (a prefill's beside a decode's) are not it. */
		if (T->want_cycle && (size_t)top + 1 != T->want_cycle)
			continue;
		T->steps++;
		T->cycle_len = (size_t)top + 1;
		T->step_first = a;
		T->step_len = b - a;
	}
}

/*
 * The gaps: launch i's compute is the time to launch i + 1, when both have
 * a time; the last launch of the trace takes the gap of the launch one
 * cycle before it, where there is one, else 0.
 */
static void find_gaps(struct trace *T)
{
	T->have_times = T->nl > 1;
	for (size_t i = 0; i < T->nl; i++)
		if (isnan(T->l[i].t))
			T->have_times = 0;
	for (size_t i = 0; T->have_times && i < T->nl; i++) {
		struct rlaunch *L = &T->l[i];

		if (i + 1 < T->nl)
			L->compute = T->l[i + 1].t > L->t ? T->l[i + 1].t - L->t : 0;
		else if (L->cycle_len && i >= L->cycle_len)
			L->compute = T->l[i - L->cycle_len].compute;
	}
}

static int cmp_death(const void *a, const void *b)
{
	const struct rdeath *x = a, *y = b;

	return x->at < y->at ? -1 : x->at > y->at;
}

/* A segment's place: an address a launch named it by. */
struct place {
	size_t seg;
	uint64_t at;
};

static int cmp_place(const void *a, const void *b)
{
	const struct place *x = a, *y = b;

	if (x->seg != y->seg)
		return x->seg < y->seg ? -1 : 1;
	return x->at < y->at ? -1 : x->at > y->at;
}

/* ---- the recorded step ---- */

/*
 * The recorded step's window on the launches' clock: from its first launch
 * to the next step's first (@stop the same), or to its own last launch
 * when it ends the trace (@stop then infinite: every record after it
 * counts).  0 without a step or launch times.
 */
static int step_window(const struct trace *T, double *t0, double *t1, double *stop)
{
	size_t end = T->step_first + T->step_len;
	int next = end < T->nl;

	if (!T->have_times || !T->step_len)
		return 0;
	*t0 = T->l[T->step_first].t;
	*t1 = next ? T->l[end].t : T->l[end - 1].t;
	*stop = next ? *t1 : INFINITY;
	return 1;
}

struct span {
	double from, to;
};

static int cmp_span(const void *a, const void *b)
{
	const struct span *x = a, *y = b;

	return x->from < y->from ? -1 : x->from > y->from;
}

/*
 * The time at least one move of kind @k (R_IN or R_OUT) whose record falls
 * in [@t0, @stop) was under way (the union of [end - ns, end] over them), in
 * seconds, and their bytes into @bytes.  -1 when out of memory.
 */
static double busy_s(const struct trace *T, enum rkind k, double t0, double stop,
		     uint64_t *bytes)
{
	struct span *sp = malloc((T->ntimed ? T->ntimed : 1) * sizeof(*sp));
	double busy = 0, from = 0, to = -INFINITY;
	size_t n = 0;

	*bytes = 0;
	if (!sp)
		return -1;
	for (size_t i = 0; i < T->ntimed; i++) {
		const struct rtimed *r = &T->timed[i];

		if (r->kind != k || r->t < t0 || r->t >= stop || !r->size || !r->ns)
			continue;
		sp[n++] = (struct span){ r->t - (double)r->ns / 1e9, r->t };
		*bytes += r->size;
	}
	qsort(sp, n, sizeof(*sp), cmp_span);
	for (size_t i = 0; i < n; i++) {
		if (sp[i].from > to) {
			busy += to > from ? to - from : 0;
			from = sp[i].from;
		}
		to = sp[i].to > to ? sp[i].to : to;
	}
	busy += n && to > from ? to - from : 0;
	free(sp);
	return busy;
}

/* The step's moves each way, once (T->step_bytes, T->step_busy); -1 after a message. */
static int step_moves(struct trace *T)
{
	double t0, t1, stop;

	if (!step_window(T, &t0, &t1, &stop))
		return 0;
	for (int in = 0; in < 2; in++) {
		T->step_busy[in] = busy_s(T, in ? R_IN : R_OUT, t0, stop, &T->step_bytes[in]);
		if (T->step_busy[in] < 0)
			return oom();
	}
	return 0;
}

/*
 * What each launch reads of each segment it names (rref.bytes): the whole
 * segment, unless the trace shows it named at two addresses or more (a
 * segment a caching allocator carved many tensors out of: transformers'
 * warm-up segment holds half a model): then, for each address the launch
 * named it by, from there to the next address any launch named it by, or
 * to its end.  Sets rseg.many.  Traces without "at" (older ones) and graph
 * launches (take_launch()) read whole segments.
 */
static int place_bytes(struct trace *T)
{
	struct place *P = malloc((T->nats ? T->nats : 1) * sizeof(*P));
	size_t n = 0, u = 0;

	if (!P)
		return oom();
	/* rref.bytes is 0 from take_launch(): summed here, then the whole where none. */
	for (size_t i = 0; i < T->nats; i++) {
		const struct rseg *g = &T->segs[T->refs[T->ats[i].ref].seg];
		uint64_t at = T->ats[i].at;

		if (at >= g->base && at - g->base < g->size)
			P[n++] = (struct place){T->refs[T->ats[i].ref].seg, at};
	}
	qsort(P, n, sizeof(*P), cmp_place);
	for (size_t i = 0; i < n; i++)
		if (!u || P[i].seg != P[u - 1].seg || P[i].at != P[u - 1].at)
			P[u++] = P[i];
	for (size_t i = 1; i < u; i++)
		if (P[i].seg == P[i - 1].seg)
			T->segs[P[i].seg].many = 1;
	for (size_t i = 0; i < T->nats; i++) {
		struct rref *r = &T->refs[T->ats[i].ref];
		const struct rseg *g = &T->segs[r->seg];
		struct place key = {r->seg, T->ats[i].at}, *p;

		if (!g->many || !(p = bsearch(&key, P, u, sizeof(*P), cmp_place)))
			continue;
		r->bytes += p + 1 < P + u && p[1].seg == key.seg ? p[1].at - key.at
								 : g->base + g->size - key.at;
	}
	/* Named by no address inside it (or not many): the whole of it. */
	for (size_t k = 0; k < T->nrefs; k++) {
		struct rref *r = &T->refs[k];
		uint64_t size = T->segs[r->seg].size;

		if (!r->bytes || r->bytes > size)
			r->bytes = size;
	}
	free(P);
	return 0;
}

static int trace_finish(struct trace *T)
{
	size_t *next = malloc((T->nsegs ? T->nsegs : 1) * sizeof(*next));

	T->dying = malloc((T->nsegs ? T->nsegs : 1) * sizeof(*T->dying));
	if (!next || !T->dying) {
		free(next);
		return oom();
	}
	for (size_t s = 0; s < T->nsegs; s++)
		if (T->segs[s].dead_at != NONE)
			T->dying[T->ndying++] = (struct rdeath){T->segs[s].dead_at, s};
	qsort(T->dying, T->ndying, sizeof(*T->dying), cmp_death);

	for (size_t s = 0; s < T->nsegs; s++)
		if (T->segs[s].from_buf)
			T->segs[s].size = T->bufs[T->segs[s].buf].extent;
	/* Next uses, from the end. */
	for (size_t s = 0; s < T->nsegs; s++)
		next[s] = NONE;
	for (size_t i = T->nl; i-- > 0;)
		for (size_t k = T->l[i].ref; k < T->l[i].ref + T->l[i].nref; k++) {
			T->refs[k].next = next[T->refs[k].seg];
			next[T->refs[k].seg] = i;
		}
	free(next);
	if (place_bytes(T))
		return -1;
	find_cycle(T);
	find_gaps(T);
	if (step_moves(T))
		return -1;
	T->span_first = T->cycle_len ? T->step_first : 0;
	T->span_len = T->cycle_len ? T->step_len : T->nl;
	return 0;
}

/*
 * The device's room when not given: the most bytes the trace shows on the
 * device at once (the segments first seen there, while alive), or the most
 * one launch names, whichever is larger (a launch must fit to run at all).
 */
static uint64_t trace_device_bytes(const struct trace *T)
{
	uint64_t used = 0, most = 0;
	uint64_t *gone = calloc(T->nl + 1, sizeof(*gone));

	if (!gone)
		return UINT64_MAX;
	for (size_t s = 0; s < T->nsegs; s++)
		if (!T->segs[s].first_host && T->segs[s].dead_at != NONE)
			gone[T->segs[s].dead_at] += T->segs[s].size;
	for (size_t i = 0; i < T->nl; i++) {
		const struct rlaunch *L = &T->l[i];
		uint64_t named = 0;

		used -= gone[i];
		for (size_t k = L->ref; k < L->ref + L->nref; k++) {
			const struct rseg *g = &T->segs[T->refs[k].seg];

			named += g->size;
			if (g->born == i && !g->first_host)
				used += g->size;
		}
		most = used > most ? used : most;
		most = named > most ? named : most;
	}
	free(gone);
	return most;
}

/* ---- the model ---- */

/* Where a move rate of the model came from (move_rates()). */
enum rate_from { RATE_PCIE, RATE_MEDIAN, RATE_STEP };

struct model {
	uint64_t device;  /* bytes of device room */
	double hbm, pcie; /* bytes per second */
	double rate[2];   /* a move's bytes per second: [0] back to host memory, [1] in */
	enum rate_from from[2]; /* ... where each came from */
	unsigned int movers; /* threads that move ahead of the launches (0: none) */
	unsigned int ahead;  /* launches ahead a move may start; 0: AHEAD_LAUNCHES, or AHEAD_SPREAD */
	double tiled_reads;  /* a tiled launch's reads in place take this many times as long */
};

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of @n rates (sorted in place); 0 when @n is 0. */
static double median_rate(double *r, size_t n)
{
	if (!n)
		return 0;
	qsort(r, n, sizeof(*r), cmp_double);
	return n % 2 ? r[n / 2] : (r[n / 2 - 1] + r[n / 2]) / 2;
}

/*
 * @M's move rates under --move-rates @mr, each way, unless @mr is MR_PCIE:
 *  - the recorded step's moves that way (step_moves()), where it has
 *    some: their bytes over the time at least one of them was under way.
 *    The model makes one move at a time each way (move_at()), so it wants
 *    what one way moved while busy, not what each move got: two moves in at
 *    once share the link, each at half its rate (the median of those would
 *    count the sharing twice).  The step, not the whole run: a run's first
 *    sends back make host memory, tens of times slower than later ones;
 *  - else the median rate of the run's own moves that way (not their mean,
 *    for the same reason);
 *  - else, or under MR_PCIE, the link's.
 * -1 when MR_TRACE asks for them and the trace has none (after a message).
 */
static int move_rates(const struct trace *T, enum move_rates mr, struct model *M)
{
	for (int in = 0; in < 2; in++) {
		double med = median_rate(T->move_rate[in], T->move_nrate[in]);

		M->from[in] = RATE_PCIE;
		M->rate[in] = M->pcie;
		if (mr == MR_PCIE)
			continue;
		if (T->step_busy[in] > 0) {
			M->from[in] = RATE_STEP;
			M->rate[in] = (double)T->step_bytes[in] / T->step_busy[in];
		} else if (med > 0) {
			M->from[in] = RATE_MEDIAN;
			M->rate[in] = med;
		}
	}
	if (mr == MR_TRACE && M->from[0] == RATE_PCIE && M->from[1] == RATE_PCIE) {
		fprintf(stderr,
			PROG ": --move-rates trace: %s holds no move record (record one under "
			     "vmmx-run --placement launch --trace)\n",
			T->path);
		return -1;
	}
	return 0;
}

/* One policy's figures over a span of launches. */
struct rfig {
	const char *policy;
	double time_s, move_s;
	uint64_t moved_in, moved_out, read_host, read_device;
	uint64_t moves_in, moves_out, no_room, read_once;
};

/* The rows of the residency chart: the segments the reported step names, in order named. */
struct rows {
	size_t *seg, n;
	size_t *row_of; /* per segment: its row, or NONE */
};

enum sstate { S_NONE, S_DEVICE, S_HOST };

struct rstate {
	enum sstate st;
	int fixed;	   /* too large to make room for: never moved for room (replay_policy()) */
	size_t last, prev; /* launches (from 1) that last named it and the one before; 0: none */
	size_t next;	   /* the next launch naming it (NONE: never) */
	size_t freq;	   /* launch-in-place: launches naming it in the last cycle's window */
	int keep;	   /* launch-spread: in the kept set of the cycle (spread_choose()) */
	size_t seen;	   /* launch-spread: spread_choose()'s count of its namings */
};

/* launch-cycle's next-use rule: launch-cycle itself, and launch-spread (its kept set aside). */
static int cycle_rule(enum rpolicy p)
{
	return p == RP_CYCLE || p == RP_SPREAD;
}

/*
 * launch-cycle's prediction at launch @i (from 1) of @v's next use, as
 * --placement launch makes it (preload/place.c, next_use()): a cycle of
 * @cycle_len after its last use, or sooner by the gap between its last two
 * uses; a use so expected that has not come, within a cycle of the last, a
 * gap from now; one that did not come within a cycle means nothing is
 * known to need it: past every expected use, the longest unused first.
 */
static size_t cycle_next(const struct rstate *v, size_t cycle_len, size_t i)
{
	size_t gap = v->prev && v->last - v->prev < cycle_len ? v->last - v->prev : cycle_len;

	if (v->last + gap > i)
		return v->last + gap;
	if (v->last + cycle_len > i)
		return i + gap;
	return SIZE_MAX - v->last;
}

/*
 * The victim for launch @i (from 1) under @p: a segment on the device that
 * this launch does not name.  NONE when there is none.
 */
static size_t victim(const struct trace *T, const struct rstate *S, enum rpolicy p, size_t i,
		     size_t cycle_len)
{
	size_t best = NONE;

	for (size_t s = 0; s < T->nsegs; s++) {
		const struct rstate *v = &S[s], *b = best == NONE ? NULL : &S[best];

		if (v->st != S_DEVICE || v->last == i || v->fixed)
			continue;
		if (!b) {
			best = s;
		} else if (p == RP_BELADY) {
			/* Furthest next use (never: furthest of all); then least recently named. */
			size_t nv = v->next == NONE ? SIZE_MAX : v->next;
			size_t nb = b->next == NONE ? SIZE_MAX : b->next;

			if (nv > nb || (nv == nb && v->last < b->last))
				best = s;
		} else if (p == RP_SPREAD && cycle_len && v->keep != b->keep) {
			if (!v->keep)
				best = s; /* one not kept goes first (preload/place.c, better()) */
		} else if (cycle_rule(p) && cycle_len) {
			/* preload/place.c: a step after the last use, or sooner by the last gap. */
			if (cycle_next(v, cycle_len, i) > cycle_next(b, cycle_len, i))
				best = s;
		} else if (p == RP_READ && v->freq != b->freq) {
			if (v->freq < b->freq)
				best = s; /* named fewer times in the last cycle */
		} else if (v->last < b->last) {
			best = s; /* least recently named; ties: the first named */
		}
	}
	return best;
}

/*
 * A segment @seg in host memory named by launch @i (from 1), @need bytes
 * short of room, under @p: whether the victims @p would take, in order,
 * make the room with each one allowed (@S is left as it was).
 * launch-cycle and launch-spread, for a segment read once (@once): only
 * victims each needed after it is needed again, never without a cycle
 * (preload/place.c, read once).  launch-spread, its kept set chosen: a
 * segment not kept never sends back one kept (preload/place.c,
 * plan_victims()).
 * launch-in-place: only victims each named fewer times than it over the
 * last cycle (preload/place.c, plan_victims() reading in place).
 */
static int room_allowed(const struct trace *T, struct rstate *S, enum rpolicy p, size_t seg,
			size_t i, size_t cycle_len, uint64_t need, int once)
{
	size_t chosen[64], n = 0;
	int worth = !cycle_rule(p) || cycle_len != 0;

	while (worth && need > 0 && n < sizeof(chosen) / sizeof(chosen[0])) {
		size_t v = victim(T, S, p, i, cycle_len);

		if (v == NONE ||
		    (cycle_rule(p) && once &&
		     cycle_next(&S[v], cycle_len, i) < cycle_next(&S[seg], cycle_len, i)) ||
		    (p == RP_SPREAD && S[v].keep && !S[seg].keep) ||
		    (p == RP_READ && S[v].freq >= S[seg].freq)) {
			worth = 0;
			break;
		}
		S[v].st = S_NONE; /* out of the next victim() until restored below */
		chosen[n++] = v;
		need = need > T->segs[v].size ? need - T->segs[v].size : 0;
	}
	while (n > 0)
		S[chosen[--n]].st = S_DEVICE;
	return worth && need == 0;
}

/*
 * The replay's movers, and the two things their moves take turns at: the
 * driver, which serialises mapping calls (a send back is mapping calls
 * alone under verified host copies), and the link (a bring-in is mostly
 * its copy).  Times in seconds of the replayed timeline.
 */
struct movers {
	double free_at[MAX_MOVERS]; /* when each mover is free */
	double driver, link;        /* when each is free */
};

/*
 * A move that may start at @from: @out_s of sends back on the driver, then
 * @in_s of bringing in on the link, by the mover of @mv free first (none
 * when @n is 0: the launching thread, which waits).  Returns its end.
 */
static double move_at(struct movers *mv, unsigned int n, double from, double out_s, double in_s)
{
	double *f = NULL, t = from;

	for (unsigned int j = 0; j < n; j++)
		if (!f || mv->free_at[j] < *f)
			f = &mv->free_at[j];
	if (f && *f > t)
		t = *f;
	t = (t > mv->driver ? t : mv->driver) + out_s;
	mv->driver = t;
	t = (t > mv->link ? t : mv->link) + in_s;
	mv->link = t;
	if (f)
		*f = t;
	return t;
}

/*
 * launch-spread: the kept set of preload/place.c's spread_choose()
 * (VMMX_RUN_PLACE_SPREAD=1), chosen from the pass over the cycle of @len
 * launches that starts at launch @from (from 0), the one just replayed,
 * as place.c chooses from its plan of the last pass.  A segment that pass
 * names at two launches or more is kept; the others that may move, in the
 * order it first names them, in the proportion of the room for them (the
 * device less what the cycle does not name, less those kept and a move
 * ahead per mover and two more of the largest of the others), evenly.
 * @used: the bytes on the device now.
 */
static void spread_choose(const struct trace *T, struct rstate *S, const struct model *M,
			  size_t from, size_t len, uint64_t used)
{
	uint64_t total = 0, held = 0, hot = 0, biggest = 0, room, margin;
	double frac, acc = 0;

	for (size_t s = 0; s < T->nsegs; s++)
		S[s].keep = 0, S[s].seen = 0;
	for (size_t i = from; i < from + len; i++)
		for (size_t k = T->l[i].ref; k < T->l[i].ref + T->l[i].nref; k++) {
			size_t s = T->refs[k].seg;

			if (S[s].fixed || T->segs[s].size > M->device / 4 || S[s].seen++)
				continue;
			total += T->segs[s].size;
			held += S[s].st == S_DEVICE ? T->segs[s].size : 0;
		}
	for (size_t s = 0; s < T->nsegs; s++) {
		S[s].keep = S[s].seen > 1;
		if (S[s].keep)
			hot += T->segs[s].size;
		else if (S[s].seen && T->segs[s].size > biggest)
			biggest = T->segs[s].size;
	}
	room = M->device - (used < M->device ? used : M->device) + held;
	margin = hot + (uint64_t)(M->movers + 2) * biggest;
	room = room > margin ? room - margin : 0;
	frac = total > hot ? (double)room / (double)(total - hot) : 0;
	for (size_t i = from; i < from + len; i++)
		for (size_t k = T->l[i].ref; k < T->l[i].ref + T->l[i].nref; k++) {
			struct rstate *v = &S[T->refs[k].seg];
			double size = (double)T->segs[T->refs[k].seg].size;

			if (!v->seen || v->keep)
				continue;
			v->seen = 0; /* once */
			acc += frac * size;
			if (acc >= size) {
				acc -= size;
				v->keep = 1;
			}
		}
}

static void fig_add(struct rfig *f, const struct rfig *d)
{
	f->time_s += d->time_s;
	f->move_s += d->move_s;
	f->moved_in += d->moved_in;
	f->moved_out += d->moved_out;
	f->read_host += d->read_host;
	f->read_device += d->read_device;
	f->moves_in += d->moves_in;
	f->moves_out += d->moves_out;
	f->no_room += d->no_room;
	f->read_once += d->read_once;
}

/*
 * replay_policy() - replay @T's launches under policy @p on the model @M;
 * the figures of the whole trace into @total, of the reported step (when
 * the trace has one) into @step, and the residency over T's span (the
 * step, else the whole trace) into @cells (@rows->n rows of T->span_len
 * launches; NULL: not kept).  The model,
 * every assumption of it:
 *
 *  - The unit is the segment (a libvmmx buffer, else a chunk: see the top
 *    of the file).  A launch reads or writes each segment it names at most
 *    once, and the whole of it: a kernel given a tensor touches all of it,
 *    once; of a segment named at two addresses or more (many tensors in
 *    one segment), from each address it named to the next (place_bytes()).
 *    What the watch cannot see (pointers held in device memory, graph
 *    launches not read, copies) costs nothing and takes no room.
 *  - One device with @M->device bytes of room for the named segments (on
 *    a trace of several devices: all of them as one) and host memory
 *    without limit.  Memory no launch names is not modelled: give
 *    --device-bytes less what it holds.
 *  - Segments start where the trace first saw them (the allocation-order
 *    placement of the recorded run), when the device has room for them in
 *    the order they appear; one that does not fit starts in host memory.
 *    A segment whose addresses a newer buffer took is gone from then on:
 *    its room is free, at no cost.
 *  - A launch takes moves + max(compute, device bytes named / hbm + host
 *    bytes named / pcie): reads from HBM and over PCIe add up, compute
 *    overlaps both.  compute is 0, or the gap the recorded run left
 *    between this launch and the next (find_gaps(), and the manual page on
 *    what that gap holds).
 *  - A move is one segment brought in with the segments sent back to make
 *    room for it.  Without a known cycle, or with --movers 0, it is
 *    synchronous, before the launch, and overlaps nothing.  With a cycle
 *    known, @M->movers threads make the moves, as --placement launch's
 *    movers do: each move in the order the launches need them, on the
 *    mover free first, starting no earlier than the start of the launch
 *    AHEAD_LAUNCHES before the one that needs it (a cycle less one launch
 *    when that is shorter, as far as preload/place.c looks ahead); the
 *    launch waits for its moves to end, and launches and moves overlap
 *    otherwise.  The victims
 *    are chosen at the launch that needs the segment (see below), but their
 *    last uses are not waited for: the movers choose theirs when a move is
 *    queued, launches earlier, among segments no launch in between names.  A
 *    move sends back first, on the driver, then brings in, on the link;
 *    each is one at a time (struct movers): a second mover overlaps one
 *    move's send back with another's copy, no more.  Bringing a
 *    segment in costs size / the rate the recorded run's own moves in took
 *    (its "move" records, move_rates()), sending one back size / the rate
 *    of its moves back; where the trace has no such record, or with
 *    --move-rates pcie, size / pcie either way, every segment taken as
 *    written (the trace does not say what a kernel writes).  A run's moves
 *    back hold what its sends back cost, clean or not: under verified host
 *    copies, mostly the remapping.
 *  - in-place: nothing moves; named segments in host memory are read in
 *    place.  The launch-* policies: before each launch, each segment it
 *    names that lies in host memory is brought in, in the order named,
 *    room made by sending back segments this launch does not name, one at
 *    a time, chosen by victim(); a segment that would not fit with all of
 *    those sent back stays in host memory, read in place, and nothing is
 *    sent back for it (counted as "no room").
 *  - launch-lru: the least recently named goes.  launch-belady: the one
 *    named furthest ahead in the trace (never again: furthest), knowing
 *    the whole trace; ties, the least recently named.  launch-cycle:
 *    Belady with the next use predicted as --placement launch predicts it
 *    (preload/place.c): while the recorded run knew a cycle of L launches
 *    (the launch's cycle_pos >= 0), a segment last named at launch s is
 *    next needed at s + L, or at s + g when the gap g between its last two
 *    uses is shorter, and the furthest goes (one whose expected use passed
 *    first: cycle_next()); without a cycle, the least recently named.
 *    Ties: the segment first named first.  A segment read once (at least
 *    two thirds of the bytes of the segments its launch names that may
 *    move, beside others of them) is brought in only into free room or, a
 *    cycle known, in place
 *    of victims each predicted to be needed after it is needed again; else
 *    it is read in place (counted as "read once"), as --placement launch
 *    does.  A segment named at two addresses or more and over a quarter of
 *    the device is too large to make room for, as preload/place.c has it:
 *    brought in only into free room (else counted as "no room"), never
 *    sent back (place.c applies the quarter to every segment; a segment
 *    named at one address is moved here whatever its size).  Not
 *    modelled: the trial of reading in place.  launch-in-place, that
 *    trial's other side: nothing ahead; a segment in host memory is
 *    brought in into free room or in place of segments named fewer times
 *    than it over the last T->cycle_len launches (room_allowed()), the
 *    fewest first, then the least recently named; else read in place.
 *  - launch-spread: launch-cycle with VMMX_RUN_PLACE_SPREAD's kept set
 *    (spread_choose()), chosen once a cycle is known from the pass just
 *    replayed and dropped when the cycle changes: a segment not kept goes
 *    first (victim()), and one not kept never sends back one kept
 *    (room_allowed(); else it is read in place, counted as "no room").
 *  - A tiled launch (recorded with TILED_SHARED bytes of dynamic shared
 *    memory or more) reads what it reads in place @M->tiled_reads times.
 *
 * Return: 0, or -1 when out of memory.
 */
static int replay_policy(const struct trace *T, const struct model *M, enum rpolicy p,
			 const struct rows *rows, struct rfig *total, struct rfig *step,
			 char *cells)
{
	struct rstate *S = calloc(T->nsegs ? T->nsegs : 1, sizeof(*S));
	/* The replayed timeline (s): each launch's start; the last one's end (now). */
	double *start = malloc((T->nl ? T->nl : 1) * sizeof(*start));
	struct movers mv = {{0}, 0, 0};
	double now = 0;
	size_t dk = 0, spread_len = 0; /* launch-spread: the cycle its kept set is for; 0: none */
	uint64_t used = 0;

	if (!S || !start) {
		free(S);
		free(start);
		return -1;
	}
	for (size_t s = 0; s < T->nsegs; s++)
		S[s].fixed = T->segs[s].many && T->segs[s].size > M->device / 4;
	for (size_t i = 0; i < T->nl; i++) {
		const struct rlaunch *L = &T->l[i];
		const struct rref *r = &T->refs[L->ref];
		struct rfig d = {0};
		uint64_t named = 0; /* the bytes of the segments this launch names that may move */
		size_t judged = 0;  /* ... and their number */
		/* Its moves' end: on the launching thread (one after another), or by the movers. */
		double read_s, ready = now;
		int ahead = M->movers && L->pos >= 0 && L->cycle_len > 1 && p != RP_READ;
		size_t reach;

		/*
		 * launch-spread: chosen once a cycle is known, dropped when it
		 * changes; a launch the cycle did not expect (at -1) inside a step
		 * of it leaves it (the interposer's cycle stands through it).
		 */
		if (p == RP_SPREAD && spread_len && L->in_cycle != spread_len) {
			for (size_t s = 0; s < T->nsegs; s++)
				S[s].keep = 0;
			spread_len = 0;
		}
		if (p == RP_SPREAD && !spread_len && L->pos == 0 && L->cycle_len > 1 &&
		    i >= L->cycle_len) {
			spread_choose(T, S, M, i - L->cycle_len, L->cycle_len, used);
			spread_len = L->cycle_len;
		}
		/* As vmmx-run: further under the kept set (its segments in host memory, those not kept). */
		reach = M->ahead ? M->ahead : spread_len ? AHEAD_SPREAD : AHEAD_LAUNCHES;
		if (ahead && L->cycle_len - 1 < reach)
			reach = L->cycle_len - 1;
		/* Gone before this launch: room freed, nothing moved. */
		for (; dk < T->ndying && T->dying[dk].at == i; dk++) {
			size_t s = T->dying[dk].seg;

			if (S[s].st == S_DEVICE)
				used -= T->segs[s].size;
			S[s].st = S_NONE;
		}
		for (size_t k = 0; k < L->nref; k++) {
			const struct rseg *g = &T->segs[r[k].seg];
			struct rstate *v = &S[r[k].seg];

			if (g->born == i) {
				v->st = !g->first_host && used + g->size <= M->device ? S_DEVICE
										      : S_HOST;
				used += v->st == S_DEVICE ? g->size : 0;
			}
			v->prev = v->last;
			v->last = i + 1;
			v->next = r[k].next;
		}
		/* Read once is judged as place.c judges it: among segments that may move. */
		for (size_t k = 0; k < L->nref; k++)
			if (!S[r[k].seg].fixed) {
				named += T->segs[r[k].seg].size;
				judged++;
			}
		for (size_t k = 0; p != RP_IN_PLACE && k < L->nref; k++) {
			const struct rseg *g = &T->segs[r[k].seg];
			uint64_t pinned = 0, out = 0;
			double end;

			if (S[r[k].seg].st != S_HOST)
				continue;
			/* Too large to make room for: only into free room (preload/place.c). */
			if (S[r[k].seg].fixed && used + g->size > M->device) {
				d.no_room++;
				continue;
			}
			/* launch-cycle: read once, left in place unless worth it (see the top). */
			if (cycle_rule(p) && judged > 1 && g->size >= named - named / 3 &&
			    used + g->size > M->device &&
			    !room_allowed(T, S, p, r[k].seg, i + 1,
					  L->pos >= 0 ? L->cycle_len : 0, used + g->size - M->device, 1)) {
				d.read_once++;
				continue;
			}
			/* launch-spread: one not kept never sends back one kept. */
			if (spread_len && !S[r[k].seg].keep && used + g->size > M->device &&
			    !room_allowed(T, S, p, r[k].seg, i + 1, spread_len,
					  used + g->size - M->device, 0)) {
				d.no_room++;
				continue;
			}
			/* launch-in-place: only in place of segments named fewer times. */
			if (p == RP_READ && used + g->size > M->device &&
			    !room_allowed(T, S, RP_READ, r[k].seg, i + 1, 0,
					  used + g->size - M->device, 0))
				continue;
			/*
			 * What this launch names already on the device cannot make
			 * room, nor can a segment too large to be sent back.
			 */
			for (size_t j = 0; j < L->nref; j++)
				if (S[r[j].seg].st == S_DEVICE && !S[r[j].seg].fixed)
					pinned += T->segs[r[j].seg].size;
			for (size_t f = 0; f < T->nsegs; f++)
				if (S[f].st == S_DEVICE && S[f].fixed)
					pinned += T->segs[f].size;
			if (pinned + g->size > M->device) {
				d.no_room++;
				continue;
			}
			while (used + g->size > M->device) {
				size_t v = victim(T, S, p, i + 1, L->pos >= 0 ? L->cycle_len : 0);

				/* pinned + size fit, so an unnamed one that may go is on the device. */
				if (v == NONE)
					abort();
				S[v].st = S_HOST;
				used -= T->segs[v].size;
				out += T->segs[v].size;
				d.moves_out++;
			}
			S[r[k].seg].st = S_DEVICE;
			used += g->size;
			d.moved_out += out;
			d.moved_in += g->size;
			d.moves_in++;
			/* Ahead: by a mover, from @reach launches before; else after the last. */
			end = move_at(&mv, ahead ? M->movers : 0,
				      !ahead ? ready : i >= reach ? start[i - reach] : 0,
				      (double)out / M->rate[0], (double)g->size / M->rate[1]);
			ready = end > ready ? end : ready;
		}
		for (size_t k = 0; k < L->nref; k++) {
			if (S[r[k].seg].st == S_DEVICE)
				d.read_device += r[k].bytes;
			else
				d.read_host += r[k].bytes;
		}
		/* launch-in-place's counts: this launch in, the one a cycle back out. */
		for (size_t k = 0; p == RP_READ && k < L->nref; k++)
			S[r[k].seg].freq++;
		if (p == RP_READ && T->cycle_len && i >= T->cycle_len) {
			const struct rlaunch *B = &T->l[i - T->cycle_len];

			for (size_t k = B->ref; k < B->ref + B->nref; k++)
				S[T->refs[k].seg].freq--;
		}
		d.move_s = (double)d.moved_in / M->rate[1] + (double)d.moved_out / M->rate[0];
		read_s = (double)d.read_device / M->hbm +
			 (double)d.read_host / M->pcie * (L->tiled ? M->tiled_reads : 1.0);
		start[i] = ready;
		d.time_s = start[i] + (L->compute > read_s ? L->compute : read_s) - now;
		now += d.time_s;
		fig_add(total, &d);
		if (i < T->span_first || i >= T->span_first + T->span_len)
			continue;
		fig_add(step, &d);
		for (size_t row = 0; cells && row < rows->n; row++) {
			size_t s = rows->seg[row];
			char *c = &cells[row * T->span_len + (i - T->span_first)];

			*c = S[s].st == S_DEVICE ? 'd' : S[s].st == S_HOST ? 'h' : '.';
			if (S[s].last == i + 1)
				*c = (char)(*c - 'a' + 'A');
		}
	}
	free(S);
	free(start);
	return 0;
}

/* ---- the results ---- */

#define FIG(m) .off = offsetof(struct rfig, m)

/* Each figure of a policy once: its JSON member and its table column. */
static const struct rep_field replay_fields[] = {
    {"policy", REP_S_STR, FIG(policy), .col = 1, .head = "policy", .fmt = REP_F_TEXT},
    {"time_s", REP_S_NUM, FIG(time_s), .col = 2, .head = "time ms", .fmt = REP_F_MS, .prec = 3,
     .right = 1},
    {"move_s", REP_S_NUM, FIG(move_s), .col = 3, .head = "moving ms", .fmt = REP_F_MS, .prec = 3,
     .right = 1},
    {"moved_in", REP_S_BYTES, FIG(moved_in), .col = 4, .head = "moved in", .fmt = REP_F_SIZE,
     .right = 1},
    {"moved_out", REP_S_BYTES, FIG(moved_out), .col = 5, .head = "moved out", .fmt = REP_F_SIZE,
     .right = 1},
    {"read_in_place", REP_S_BYTES, FIG(read_host), .col = 6, .head = "read in place",
     .fmt = REP_F_SIZE, .right = 1},
    {"read_on_device", REP_S_BYTES, FIG(read_device), .col = 7, .head = "read on device",
     .fmt = REP_F_SIZE, .right = 1},
    {"moves_in", REP_S_COUNT, FIG(moves_in), .col = 8, .head = "moves in", .fmt = REP_F_INT,
     .right = 1},
    {"moves_out", REP_S_COUNT, FIG(moves_out), .col = 9, .head = "moves out", .fmt = REP_F_INT,
     .right = 1},
    {"no_room", REP_S_COUNT, FIG(no_room), .col = 10, .head = "no room", .fmt = REP_F_INT,
     .right = 1},
    {"read_once", REP_S_COUNT, FIG(read_once), .col = 11, .head = "read once",
     .fmt = REP_F_INT, .right = 1},
};

/* What the compute floor is, and why: the gaps, or 0. */
struct compute_choice {
	int gaps;
	int step;	/* --compute-step: the step's compute spread over its launches */
	double step_ms;
	char why[256];
};

/*
 * --compute-step: @step_s, a step's compute measured on the GPU where the
 * program fits (its own timing of a native run), spread over each step of
 * the reported cycle in proportion to the bytes each launch reads
 * (place_bytes()); a launch of no such step gets 0.  Host launch gaps
 * cannot give it: a program that does not synchronise each launch queues
 * them far ahead of the GPU, so its gaps are the host's pace, not the
 * kernels' (a traced chain that fits: 10 ms a step by the gaps, 55 ms by
 * its own clock).
 */
static void spread_compute(struct trace *T, double step_s)
{
	size_t i = 0;

	while (i < T->nl) {
		const struct rlaunch *L = &T->l[i];
		size_t n = L->cycle_len, end;
		double w = 0;

		if (!T->cycle_len || n != T->cycle_len || L->pos != 0 || i + n > T->nl) {
			T->l[i++].compute = 0;
			continue;
		}
		end = i + n;
		/* Each launch's bytes first, in its compute, then its share of the step. */
		for (size_t j = i; j < end; j++) {
			T->l[j].compute = 0;
			for (size_t k = T->l[j].ref; k < T->l[j].ref + T->l[j].nref; k++)
				T->l[j].compute += (double)T->refs[k].bytes;
			w += T->l[j].compute;
		}
		for (size_t j = i; j < end; j++)
			T->l[j].compute = w > 0 ? step_s * T->l[j].compute / w : step_s / (double)n;
		i = end;
	}
}

static int choose_compute(const struct trace *T, enum compute c, double step_s,
			  struct compute_choice *cc)
{
	cc->gaps = 0;
	cc->step = 0;
	if (step_s > 0) {
		if (!T->cycle_len) {
			fprintf(stderr, PROG ": --compute-step: %s: no complete step of a cycle in it\n",
				T->path);
			return -1;
		}
		cc->step = 1;
		cc->step_ms = step_s * 1e3;
		snprintf(cc->why, sizeof(cc->why),
			 "%.3f ms a step (--compute-step), spread over the step's %zu launches by "
			 "the bytes each reads",
			 step_s * 1e3, T->cycle_len);
	} else if (c == COMPUTE_NONE) {
		snprintf(cc->why, sizeof(cc->why), "0 (--compute none)");
	} else if (!T->have_times) {
		if (c == COMPUTE_GAPS) {
			fprintf(stderr,
				PROG ": --compute gaps: %s: not every launch record has a "
				     "\"time\"\n",
				T->path);
			return -1;
		}
		snprintf(cc->why, sizeof(cc->why), "0 (the launch records carry no times)");
	} else if (c == COMPUTE_AUTO && T->moves_seen) {
		snprintf(cc->why, sizeof(cc->why),
			 "0 (the recorded run moved segments, %zu times: its gaps hold those moves "
			 "and the waits before them; --compute gaps takes them anyway)",
			 T->moves_seen);
	} else {
		cc->gaps = 1;
		snprintf(cc->why, sizeof(cc->why),
			 "the gap from each launch call to the next in the recorded run");
	}
	return 0;
}

/*
 * What the recorded run did in the step the figures are for, from its
 * launch records' times and its move and wait records: the step's time by
 * the launches' clock (step_window()), the moves and waits recorded in it,
 * and how long moves each way were under way (step_moves()).  Left out
 * without launch times, or without a move or wait record with a time.
 */
static void replay_recorded(const struct trace *T, struct rep *doc)
{
	static const char *const names[R_KINDS] = { "out", "in", "device", "event", "mover",
						    "pieces" };
	size_t n[R_KINDS] = { 0 }, movers[R_KINDS] = { 0 };
	double ms[R_KINDS] = { 0 }, t0, t1, stop;
	int next;
	struct rep *o;

	if (!T->ntimed || !step_window(T, &t0, &t1, &stop))
		return;
	next = stop == t1;
	for (size_t i = 0; i < T->ntimed; i++) {
		const struct rtimed *r = &T->timed[i];

		if (r->t < t0 || r->t >= stop)
			continue;
		n[r->kind]++;
		movers[r->kind] += (size_t)r->by_mover;
		ms[r->kind] += (double)r->ns / 1e6;
	}
	o = rep_label(rep_obj(doc, "recorded"), "run",
		      "the recorded step took %.3f ms by the launches' clock (%s); moved in %zu (%zu by "
		      "movers; under way %.3f ms), back %zu (%zu by movers; under way %.3f ms); "
		      "waits: for the device %zu (%.3f ms), "
		      "last uses %zu (%.3f ms), the movers %zu (%.3f ms), pieces %zu (%.3f ms)",
		      (t1 - t0) * 1e3, next ? "to the next step's first launch" : "to its last launch",
		      n[R_IN], movers[R_IN], T->step_busy[1] * 1e3, n[R_OUT], movers[R_OUT],
		      T->step_busy[0] * 1e3,
		      n[R_DEVICE], ms[R_DEVICE],
		      n[R_EVENT], ms[R_EVENT], n[R_MOVER], ms[R_MOVER], n[R_PIECES], ms[R_PIECES]);
	rep_num(o, "step_ms", (t1 - t0) * 1e3);
	rep_str(o, "step_to", next ? "next step" : "last launch");
	for (int k = 0; k < R_KINDS; k++) {
		struct rep *e = rep_obj(o, names[k]);

		rep_int(e, "count", (long long)n[k]);
		rep_int(e, "by_movers", (long long)movers[k]);
		rep_num(e, "ms", ms[k]);
		if (k <= R_IN) {
			rep_bytes(e, "bytes", T->step_bytes[k]);
			rep_num(e, "busy_ms", T->step_busy[k] * 1e3);
		}
	}
}

static const char *const rate_from_name[] = { "pcie", "median", "step" };
static const char *const rate_from_text[] = {
	"the link's",
	"the median of the recorded run's moves",
	"the recorded step's moves: bytes over the time one was under way",
};

static void replay_head(const struct trace *T, const struct model *M, int dev_given,
			const struct compute_choice *cc, struct rep *doc)
{
	char a[32], b[32], from[160], tiled[160], look[64];
	uint64_t bytes = 0;
	struct rep *o;
	int ndev = 0;

	for (size_t s = 0; s < T->nsegs; s++)
		bytes += T->segs[s].size;
	for (int d = 0; d < 64; d++)
		ndev += (int)(T->devices >> d & 1);
	rep_str(doc, "tool", PROG);
	rep_str(doc, "version", PACKAGE_VERSION);
	rep_str(doc, "mode", "replay");
	o = rep_label(rep_obj(doc, "trace"), "trace",
		      "%s: %zu launches of pid %ld, %zu segments named (%s), %zu placement records",
		      T->path, T->nl, T->pid, T->nsegs, rep_fmt_size(bytes, a, sizeof(a)),
		      T->placements);
	rep_str(o, "file", T->path);
	rep_int(o, "pid", T->pid);
	rep_int(o, "launches", (long long)T->nl);
	rep_int(o, "segments", (long long)T->nsegs);
	rep_bytes(o, "segment_bytes", bytes);
	rep_int(o, "placement_records", (long long)T->placements);
	rep_int(o, "other_process_launches", (long long)T->other_launches);
	rep_int(o, "launches_past_64_chunks", (long long)T->truncated);
	rep_int(o, "moves_seen", (long long)T->moves_seen);
	rep_int(o, "move_records_in", (long long)T->move_n[1]);
	rep_int(o, "move_records_out", (long long)T->move_n[0]);
	rep_int(o, "move_records_failed", (long long)T->move_failed);
	rep_int(o, "devices", ndev);
	if (T->cycle_len) {
		o = rep_label(rep_obj(doc, "cycle"), "cycle",
			      "%zu launches, %zu complete steps; figures for the last step "
			      "(launches %zu-%zu)",
			      T->cycle_len, T->steps, T->step_first,
			      T->step_first + T->step_len - 1);
		rep_int(o, "length", (long long)T->cycle_len);
		rep_int(o, "step_launches", (long long)T->step_len);
		rep_int(o, "complete_steps", (long long)T->steps);
		rep_int(o, "step_first_launch", (long long)T->step_first);
		replay_recorded(T, doc);
	} else {
		rep_label(rep_null(doc, "cycle"), "cycle",
			  "none complete in the trace: figures for the whole trace");
	}
	if (M->from[0] == M->from[1])
		snprintf(from, sizeof(from), "%s", rate_from_text[M->from[0]]);
	else
		snprintf(from, sizeof(from), "in: %s; back: %s", rate_from_text[M->from[1]],
			 rate_from_text[M->from[0]]);
	if (M->ahead)
		snprintf(look, sizeof(look), "up to %u (--ahead)", M->ahead);
	else
		snprintf(look, sizeof(look), "up to %d (%d under launch-spread's kept set)",
			 AHEAD_LAUNCHES, AHEAD_SPREAD);
	if (!T->have_shared)
		snprintf(tiled, sizeof(tiled), "no launch records its shared memory: none tiled");
	else
		snprintf(tiled, sizeof(tiled),
			 "%zu of %zu launches tiled (32 KiB of shared memory or more), their reads "
			 "in place %g times",
			 T->tiled, T->nl, M->tiled_reads);
	o = rep_label(rep_obj(doc, "model"), "model",
		      "device %s (%s), hbm %.1f GB/s, pcie %.1f GB/s; moves in %.1f GB/s, back "
		      "%.1f GB/s (%s), by %u movers once a cycle is known, %s launches ahead; "
		      "compute per launch: %s; %s",
		      rep_fmt_size(M->device, b, sizeof(b)),
		      dev_given ? "--device-bytes" : "the most the trace shows on the device",
		      M->hbm / 1e9, M->pcie / 1e9, M->rate[1] / 1e9, M->rate[0] / 1e9, from,
		      M->movers, look, cc->why, tiled);
	rep_bytes(o, "device_bytes", M->device);
	rep_str(o, "device_bytes_from", dev_given ? "option" : "trace");
	rep_num(o, "hbm_gbps", M->hbm / 1e9);
	rep_num(o, "pcie_gbps", M->pcie / 1e9);
	rep_num(o, "move_in_gbps", M->rate[1] / 1e9);
	rep_num(o, "move_out_gbps", M->rate[0] / 1e9);
	rep_str(o, "move_in_from", rate_from_name[M->from[1]]);
	rep_str(o, "move_out_from", rate_from_name[M->from[0]]);
	rep_int(o, "movers", M->movers);
	rep_int(o, "ahead", M->ahead ? M->ahead : AHEAD_LAUNCHES);
	rep_int(o, "ahead_spread", M->ahead ? M->ahead : AHEAD_SPREAD);
	rep_str(o, "compute", cc->step ? "step" : cc->gaps ? "gaps" : "none");
	if (cc->step)
		rep_num(o, "compute_step_ms", cc->step_ms);
	rep_str(o, "compute_why", cc->why);
	rep_num(o, "tiled_reads", M->tiled_reads);
	rep_int(o, "tiled_launches", (long long)T->tiled);
	rep_int(o, "shared_recorded", (long long)T->have_shared);
	if (T->truncated)
		rep_label(rep_int(doc, "truncated_launches", (long long)T->truncated), "note",
			  "launches that named more than the %d chunks a record lists: %zu (the "
			  "rest of their chunks are not replayed)",
			  TRACE_CHUNKS, T->truncated);
	if (ndev > 1)
		rep_label(rep_int(doc, "devices", ndev), "note",
			  "the trace names memory on %d devices: replayed as one device", ndev);
	if (T->other_launches)
		rep_label(rep_int(doc, "other_process_launches", (long long)T->other_launches),
			  "note", "launches of other processes, left out: %zu", T->other_launches);
	rep_str(doc, "scope", T->cycle_len ? "step" : "total");
}

/* The residency chart of one policy over T's span, for vmmx-plot. */
static void doc_chart(const struct trace *T, const struct rows *rows, const char *policy,
		      const char *cells, struct rep *doc)
{
	struct rep *charts = (struct rep *)rep_get(doc, "charts"), *c, *segs;
	char *line = malloc(T->span_len + 1);

	if (!line)
		return;
	if (!charts)
		charts = rep_arr(doc, "charts");
	c = rep_obj(charts, NULL);
	rep_strf(c, "name", "residency-%s", policy);
	rep_str(c, "type", "residency");
	rep_strf(c, "title", "%s: where each segment is at each launch%s (launches %zu-%zu)",
		 policy, T->cycle_len ? " of the step" : "", T->span_first,
		 T->span_first + T->span_len - 1);
	rep_int(c, "first_launch", (long long)T->span_first);
	rep_str(c, "cells_legend",
		"d: on the device, h: in host memory, .: not allocated; upper case: named by the "
		"launch");
	segs = rep_arr(c, "segments");
	for (size_t r = 0; r < rows->n; r++) {
		const struct rseg *g = &T->segs[rows->seg[r]];
		struct rep *o = rep_obj(segs, NULL);

		rep_strf(o, "base", "0x%llx", (unsigned long long)g->base);
		rep_bytes(o, "size", g->size);
		memcpy(line, cells + r * T->span_len, T->span_len);
		line[T->span_len] = '\0';
		rep_str(o, "cells", line);
	}
	free(line);
}

/* The segments the span names, in the order first named there. */
static int span_rows(const struct trace *T, struct rows *rows)
{
	rows->row_of = malloc((T->nsegs ? T->nsegs : 1) * sizeof(*rows->row_of));
	rows->seg = malloc((T->nsegs ? T->nsegs : 1) * sizeof(*rows->seg));
	rows->n = 0;
	if (!rows->row_of || !rows->seg)
		return -1;
	for (size_t s = 0; s < T->nsegs; s++)
		rows->row_of[s] = NONE;
	for (size_t i = T->span_first; i < T->span_first + T->span_len; i++)
		for (size_t k = T->l[i].ref; k < T->l[i].ref + T->l[i].nref; k++) {
			size_t s = T->refs[k].seg;

			if (rows->row_of[s] == NONE) {
				rows->row_of[s] = rows->n;
				rows->seg[rows->n++] = s;
			}
		}
	return 0;
}

/* ---- options ---- */

static void replay_usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: " PROG " --replay TRACE [OPTIONS]\n"
	    "Replays the launches of a vmmx-run --trace file under placement policies with a\n"
	    "simple cost model, and predicts each one's step time and the bytes it moves.\n\n"
	    "  -p, --policy LIST      in-place, launch-lru, launch-belady, launch-cycle,\n"
	    "                         launch-in-place, launch-spread (comma-separated;\n"
	    "                         default all)\n"
	    "      --device-bytes SIZE  the device's room (default: the most the trace shows\n"
	    "                         on the device, or the most one launch names)\n"
	    "      --hbm GBPS         device memory rate (default %.1f)\n"
	    "      --pcie GBPS        host memory and copy rate over the link (default %.1f)\n"
	    "      --move-rates R     auto, trace or pcie: a move costs its bytes at the rate\n"
	    "                         the recorded run's own moves took that way (trace), or\n"
	    "                         at --pcie; auto: trace where it recorded moves\n"
	    "      --movers N         0 to %d: threads moving ahead of the launches once a\n"
	    "                         cycle is known, as vmmx-run's (default %d); 0: every\n"
	    "                         move before its launch, overlapping nothing\n"
	    "      --ahead N          0 to %d: launches ahead of its launch a move may start\n"
	    "                         (default 0: %d, or %d under launch-spread's kept set,\n"
	    "                         as vmmx-run's VMMX_RUN_PLACE_AHEAD)\n"
	    "      --cycle L          report the last step of a cycle of L launches (a prefill's\n"
	    "                         among decode steps; default: the last step found)\n"
	    "      --compute C        auto, gaps or none: the compute floor of a launch is the\n"
	    "                         gap to the next launch in the recorded run (gaps), or 0;\n"
	    "                         auto: gaps unless the trace has no times or shows moves\n"
	    "      --tiled-reads F    a tiled launch (recorded with 32 KiB of shared memory or\n"
	    "                         more: a GEMM, an attention) reads in place F times\n"
	    "                         what it names (default 1)\n"
	    "      --compute-step T   the step's compute, measured where the program fits\n"
	    "                         (ms, or T with s, ms or us), spread over each step of\n"
	    "                         the cycle by the bytes each launch reads\n"
	    "      --json             JSON output (default: a table)\n"
	    "      --plot FILE        the residency of the step, drawn by vmmx-plot (.png,\n"
	    "                         .svg or .pdf)\n"
	    "  -h, --help\n"
	    "Exit status: 0 done, 1 the trace could not be read, 2 bad usage.\n",
	    DEFAULT_HBM_GBPS, DEFAULT_PCIE_GBPS, MAX_MOVERS, DEFAULT_MOVERS, AHEAD_MAX,
	    AHEAD_LAUNCHES, AHEAD_SPREAD);
}

/* Whether @s is a finite number and nothing else, in *@v. */
static int whole_number(const char *s, double *v)
{
	char *end;

	*v = strtod(s, &end);
	return end != s && !*end && isfinite(*v);
}

static int parse_gbps(const char *opt, const char *s, double *out)
{
	double v;

	if (!whole_number(s, &v) || !(v > 0)) {
		fprintf(stderr, PROG ": %s %s: expected a rate in GB/s such as 51.4\n", opt, s);
		return 2;
	}
	*out = v;
	return 0;
}

static int opt_hbm(void *dest, const char *s)
{
	return parse_gbps("--hbm", s, dest);
}

static int opt_pcie(void *dest, const char *s)
{
	return parse_gbps("--pcie", s, dest);
}

/* @s, one of the three @words of option @opt: its index in *@out; 2 after a message if none. */
static int opt_word3(const char *opt, const char *s, const char *const words[3], int *out)
{
	for (int i = 0; i < 3; i++)
		if (!strcmp(s, words[i])) {
			*out = i;
			return 0;
		}
	fprintf(stderr, PROG ": %s %s: expected %s, %s or %s\n", opt, s, words[0], words[1],
		words[2]);
	return 2;
}

static int opt_compute(void *dest, const char *s)
{
	static const char *const words[] = {"auto", "gaps", "none"};
	int i, rc = opt_word3("--compute", s, words, &i);

	if (!rc)
		*(enum compute *)dest = (enum compute)i;
	return rc;
}

/* --compute-step: a time, milliseconds unless it ends in "s" or "us"; stored in seconds. */
static int opt_compute_step(void *dest, const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (end != s && !errno && v > 0 && v < 1e9) {
		if (!*end || !strcmp(end, "ms")) {
			*(double *)dest = v / 1e3;
			return 0;
		}
		if (!strcmp(end, "s")) {
			*(double *)dest = v;
			return 0;
		}
		if (!strcmp(end, "us")) {
			*(double *)dest = v / 1e6;
			return 0;
		}
	}
	fprintf(stderr,
		PROG ": --compute-step %s: expected a step's time such as 55.4 (ms), 55.4ms, "
		     "0.0554s or 55400us\n",
		s);
	return 2;
}

/* --tiled-reads: how many times a tiled launch reads what it reads in place, 1 to 1024. */
static int opt_tiled_reads(void *dest, const char *s)
{
	double v;

	if (!whole_number(s, &v) || !(v >= 1 && v <= 1024)) {
		fprintf(stderr, PROG ": --tiled-reads %s: expected a factor from 1 to 1024 such as 8\n",
			s);
		return 2;
	}
	*(double *)dest = v;
	return 0;
}

static int opt_moves(void *dest, const char *s)
{
	static const char *const words[] = {"auto", "trace", "pcie"};
	int i, rc = opt_word3("--move-rates", s, words, &i);

	if (!rc)
		*(enum move_rates *)dest = (enum move_rates)i;
	return rc;
}

static int replay_opts(int argc, char **argv, struct ropts *o)
{
	const struct tool_opt tab[] = {
	    {.name = "replay", .kind = TOOL_OPT_STR, .dest = &o->trace},
	    {.name = "policy",
	     .letter = 'p',
	     .kind = TOOL_OPT_NAMES,
	     .dest = o->policy,
	     .names = rp_names,
	     .max = RP_COUNT,
	     .given = &o->policy_given},
	    tool_opt_size("device-bytes", &o->device_bytes, NULL),
	    tool_opt_fn("hbm", 0, opt_hbm, &o->hbm, NULL),
	    tool_opt_fn("pcie", 0, opt_pcie, &o->pcie, NULL),
	    tool_opt_fn("compute", 0, opt_compute, &o->compute, NULL),
	    tool_opt_fn("compute-step", 0, opt_compute_step, &o->compute_step, NULL),
	    tool_opt_fn("tiled-reads", 0, opt_tiled_reads, &o->tiled_reads, NULL),
	    tool_opt_fn("move-rates", 0, opt_moves, &o->moves, NULL),
	    tool_opt_count("movers", 0, &o->movers, 0, MAX_MOVERS, NULL),
	    tool_opt_count("ahead", 0, &o->ahead, 0, AHEAD_MAX, NULL),
	    tool_opt_count("cycle", 0, &o->cycle, 1, MAX_CYCLE_LEN, NULL),
	    tool_opt_json(&o->json),
	    tool_opt_plot(&o->plot),
	    {0},
	};
	int rc;

	o->hbm = DEFAULT_HBM_GBPS;
	o->pcie = DEFAULT_PCIE_GBPS;
	o->movers = DEFAULT_MOVERS;
	o->tiled_reads = 1;
	rc = tool_opts_parse(PROG, replay_usage, tab, argc, argv);
	if (rc)
		return rc;
	if (!o->policy_given)
		for (int p = 0; p < RP_COUNT; p++)
			o->policy[p] = 1;
	if (o->compute_step > 0 && o->compute != COMPUTE_AUTO) {
		fprintf(stderr, PROG ": --compute-step and --compute %s: give one or the other\n",
			o->compute == COMPUTE_GAPS ? "gaps" : "none");
		return 2;
	}
	if (o->plot && rep_plot_check(o->plot, PROG))
		return 2;
	return 0;
}

/* ---- main ---- */

/* Every chosen policy replayed, into @doc; the table on stdout unless --json.  -1: no memory. */
static int replay_all(const struct trace *T, const struct ropts *o, const struct model *M,
		      struct rep *doc)
{
	struct rfig total[RP_COUNT], step[RP_COUNT];
	struct rows rows = {0};
	size_t n = 0;
	char *cells = NULL;
	int rc = span_rows(T, &rows);

	/* The chart only where it stays drawable. */
	if (!rc && rows.n && rows.n <= MAX_CELLS / (T->span_len ? T->span_len : 1))
		cells = malloc(rows.n * T->span_len);
	for (int p = 0; !rc && p < RP_COUNT; p++) {
		if (!o->policy[p])
			continue;
		total[n] = step[n] = (struct rfig){.policy = rp_names[p]};
		rc = replay_policy(T, M, (enum rpolicy)p, &rows, &total[n], &step[n], cells);
		if (!rc && cells)
			doc_chart(T, &rows, rp_names[p], cells, doc);
		n++;
	}
	if (!rc) {
		if (T->cycle_len)
			rep_rows(doc, "step", replay_fields, REP_NFIELDS(replay_fields), step, n,
				 sizeof(*step), NULL);
		else
			rep_null(doc, "step");
		rep_rows(doc, "total", replay_fields, REP_NFIELDS(replay_fields), total, n,
			 sizeof(*total), NULL);
	}
	free(cells);
	free(rows.seg);
	free(rows.row_of);
	return rc;
}

int replay_main(int argc, char **argv)
{
	struct ropts o = {0};
	struct trace T = {0};
	struct compute_choice cc;
	struct model M;
	struct rep *doc;
	int rc;

	tool_close_stdout_at_exit(PROG);
	rc = replay_opts(argc, argv, &o);
	if (rc)
		return rc < 0 ? 0 : rc;
	if (!o.trace) {
		fprintf(stderr, PROG ": --replay needs a trace file\n");
		return 2;
	}
	T.want_cycle = o.cycle;
	if (read_trace(&T, o.trace) || choose_compute(&T, o.compute, o.compute_step, &cc)) {
		trace_free(&T);
		return 1;
	}
	if (o.cycle && !T.steps) {
		char last[64] = "no cycle known in it";

		if (T.last_len)
			snprintf(last, sizeof(last), "its last step is of %zu", T.last_len);
		fprintf(stderr,
			PROG ": --cycle %u: %s has no complete step of a cycle of %u launches (%s)\n",
			o.cycle, o.trace, o.cycle, last);
		trace_free(&T);
		return 1;
	}
	if (cc.step)
		spread_compute(&T, o.compute_step);
	for (size_t i = 0; !cc.gaps && !cc.step && i < T.nl; i++)
		T.l[i].compute = 0;
	M = (struct model){.device = o.device_bytes ? o.device_bytes : trace_device_bytes(&T),
			   .hbm = o.hbm * 1e9,
			   .pcie = o.pcie * 1e9,
			   .movers = o.movers,
			   .ahead = o.ahead,
			   .tiled_reads = o.tiled_reads};
	if (move_rates(&T, o.moves, &M)) {
		trace_free(&T);
		return 1;
	}
	doc = rep_new();
	if (M.device == UINT64_MAX)
		rc = oom();
	if (!rc) {
		replay_head(&T, &M, o.device_bytes != 0, &cc, doc);
		rc = replay_all(&T, &o, &M, doc) ? oom() : 0;
	}
	if (!rc && o.json) {
		rep_json(stdout, doc);
	} else if (!rc) {
		rep_text(stdout, doc, 0, 7);
		printf("\n%s, predicted by the model (no GPU ran):\n",
		       T.cycle_len ? "per step" : "over the whole trace");
		rep_field_table(stdout, rep_get(doc, T.cycle_len ? "step" : "total"), replay_fields,
				REP_NFIELDS(replay_fields), &(struct rep_view){0});
	}
	if (!rc && o.plot) {
		if (!rep_get(doc, "charts")) {
			fprintf(stderr,
				PROG ": --plot %s: no residency to draw (no segment named, "
				     "or too many cells)\n",
				o.plot);
			rc = 1;
		} else if (rep_plot(doc, o.plot, PROG)) {
			rc = 1;
		}
	}
	rep_free(doc);
	trace_free(&T);
	return rc ? 1 : 0;
}
