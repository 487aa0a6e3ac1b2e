// SPDX-License-Identifier: MIT
/*
 * control.c - sleep and wake from outside: a running program's device
 * memory given back to the driver and taken again, at a user's request,
 * without the program's knowledge (vmmx-run --control, vmmx-run --ctl).
 *
 * The way in: a Unix stream socket, one per process, opened by one
 * background thread that the first allocation starts (no constructor: the
 * interposer does nothing before the program's first hooked call, state.c).
 * Its path is VMMX_RUN_CONTROL (vmmx-run --control=PATH, made absolute),
 * or, for VMMX_RUN_CONTROL=1 (vmmx-run --control), vmmx-run-PID.sock in
 * $XDG_RUNTIME_DIR, else in /tmp (ctl.h): a process that execs another one
 * under the same environment gets a socket of its own.  A socket is chosen
 * over signals because a request needs an answer (bytes given back, the
 * time it took, why it failed) and a mode; a signal carries neither, and
 * its handler could do none of the work.  A connection from another user
 * than the process's (root aside) is refused (SO_PEERCRED); the file is
 * made 0600 too.  The socket is removed at exit (atexit); a process killed
 * by a signal leaves it behind, and the next bind to that path, finding
 * nothing listening, removes it.
 *
 * The protocol: the client sends one line, "sleep [offload|discard]",
 * "wake" or "status", and reads the answer until the server closes: a
 * first line "ok ..." or "error: why", then, for status, one line per
 * device.  Requests are served one at a time, on the control thread.
 *
 * The memory: every segment of the interposer's process-wide allocators
 * (one per device) that holds a live allocation.  Tagging the interposer's
 * allocations as they are made (vmmx_tag_scope around vmmx_alloc_malloc)
 * would give each allocation a segment of its own, 2 MiB at least
 * (lib/alloc.c: a tagged request gets a huge segment): a program of many
 * small cudaMallocs would need many times its memory.  So the segments
 * are counted instead (segment buffer -> live allocations, from the
 * allocation and free hooks); a sleep tags them VMMXP_CTL_TAG and sleeps
 * that tag (vmmx_sleep), a wake wakes it and takes the tag away again
 * (a tagged huge segment would only serve requests of its tag afterwards).
 * Idle cached segments are not slept: the sleep gives them back first
 * (vmmx_alloc_empty_cache), so the device keeps none of the program's.
 *
 * Safety:
 *  - A sleep waits until the device is idle (vmmx_sync on each device's
 *    context) and then sleeps with the default stream's check: work queued
 *    after that instant makes it refuse (-VMMX_EBUSY), all or nothing.
 *  - The program must not touch its device memory while asleep: what a
 *    sleeping range maps is libvmmx's to choose (vmmx_sleep(): the range is
 *    unmapped, so that a kernel touching it faults the CUDA context, except
 *    where the library keeps an offloaded range mapped to host memory),
 *    and a discarded one is undefined at the wake.
 *    The intended use is a program idle between phases, waiting for input;
 *    a stopped one (SIGSTOP) cannot answer, as this thread stops with it.
 *  - While asleep, the interposer's allocations and frees wait for the
 *    wake (the gate below): the allocator would hand out free blocks of
 *    sleeping segments (its small and large pools look at no tag), and a
 *    free of discarded memory could not be looked up.  A thread that waits
 *    there holds no lock of the interposer's.
 *  - A wake that fails (a device is full) leaves what it could not wake
 *    asleep, intact, and the process asleep: another wake finishes it.
 *
 * Locking: gate_lock guards the gate (closed while a request runs and while
 * asleep; the hooks count themselves in and out); segs_lock guards the
 * segment table; asleep and mode belong to the control thread.  The control
 * thread is marked inside libvmmx for life (vmmxp_depth), so libvmmx's
 * driver calls made on it pass the hooks.  A forked child has no control
 * thread: its gate and table start afresh and stay open, unused (its
 * allocators are its parent's and fail, state.c).
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "preload/ctl.h"
#include "preload/preload.h"

/* Buckets of the segment table: a program has hundreds to thousands of segments. */
#define NBUCKETS 1024
/* A client has this long to send its line: a silent one must not block the control. */
#define RECV_TIMEOUT_S 5

struct seg_ref {
	struct vmmx_buf *buf;   /* a segment of one of the interposer's allocators */
	uint64_t live;          /* allocations in it */
	struct seg_ref *next;
};

static int control = -1;                       /* -1 unread; atomic */
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static char sock_path[VMMXP_CTL_PATH_MAX];     /* set once, before the thread starts */
static pid_t sock_pid;                         /* the process that made the socket */
static int listen_fd = -1;

static pthread_mutex_t gate_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_closed;                        /* gate_lock */
static unsigned long gate_users;               /* gate_lock: hooked calls inside */
static int wait_said;                          /* gate_lock: a waiting call was reported */

static pthread_mutex_t segs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct seg_ref *segs[NBUCKETS];         /* segs_lock */
static size_t nsegs;                           /* segs_lock */

static int asleep;                             /* written by the control thread; atomic */
static int asleep_mode;                        /* control thread: enum vmmx_sleep_mode */

int vmmxp_control_on(void)
{
	int v = __atomic_load_n(&control, __ATOMIC_RELAXED);

	if (v < 0) {
		const char *s = getenv("VMMX_RUN_CONTROL");

		v = s && *s && strcmp(s, "0");
		__atomic_store_n(&control, v, __ATOMIC_RELAXED);
	}
	return v;
}

/* ---- the gate ---- */

void vmmxp_gate_enter(void)
{
	if (!vmmxp_control_on())
		return;
	pthread_mutex_lock(&gate_lock);
	if (gate_closed && __atomic_load_n(&asleep, __ATOMIC_RELAXED) && !wait_said) {
		wait_said = 1;
		fprintf(stderr, "vmmx-run: process %d: an allocation or free waits: the process's "
				"device memory is asleep (vmmx-run --ctl %d wake)\n",
			(int)getpid(), (int)getpid());
	}
	while (gate_closed)
		pthread_cond_wait(&gate_cv, &gate_lock);
	gate_users++;
	pthread_mutex_unlock(&gate_lock);
}

void vmmxp_gate_leave(void)
{
	if (!vmmxp_control_on())
		return;
	pthread_mutex_lock(&gate_lock);
	if (!--gate_users && gate_closed)
		pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_lock);
}

/* Close the gate and wait for the calls inside to leave. */
static void gate_close(void)
{
	pthread_mutex_lock(&gate_lock);
	gate_closed = 1;
	wait_said = 0;
	while (gate_users)
		pthread_cond_wait(&gate_cv, &gate_lock);
	pthread_mutex_unlock(&gate_lock);
}

static void gate_open(void)
{
	pthread_mutex_lock(&gate_lock);
	gate_closed = 0;
	pthread_cond_broadcast(&gate_cv);
	pthread_mutex_unlock(&gate_lock);
}

/* ---- the segments ---- */

static size_t bucket(const struct vmmx_buf *buf)
{
	return (size_t)(((uintptr_t)buf >> 4) * 0x9E3779B97F4A7C15ull >> 32) % NBUCKETS;
}

int vmmxp_control_track(struct vmmx_buf *buf, int delta)
{
	struct seg_ref **pp, *r;

	if (!vmmxp_control_on() || !buf)
		return 0;
	pthread_mutex_lock(&segs_lock);
	for (pp = &segs[bucket(buf)]; *pp && (*pp)->buf != buf; pp = &(*pp)->next)
		;
	r = *pp;
	if (delta > 0 && !r) {
		r = calloc(1, sizeof(*r));
		if (!r) {
			pthread_mutex_unlock(&segs_lock);
			return -VMMX_ENOMEM;
		}
		r->buf = buf;
		*pp = r;
		nsegs++;
	}
	if (r && delta > 0) {
		r->live++;
	} else if (r && !--r->live) {
		/* Its last allocation freed: the allocator may release the segment. */
		*pp = r->next;
		free(r);
		nsegs--;
	}
	pthread_mutex_unlock(&segs_lock);
	return 0;
}

/*
 * Give every counted segment the tag @tag (NULL: take VMMXP_CTL_TAG away).
 * Segments that carry another tag are the program's own business and are
 * left as they are.  The gate is closed, so no segment comes or goes.
 */
static int tag_segs(const char *tag, char *why, size_t len)
{
	int err = 0;

	pthread_mutex_lock(&segs_lock);
	for (size_t i = 0; i < NBUCKETS && !err; i++) {
		for (struct seg_ref *r = segs[i]; r && !err; r = r->next) {
			char t[VMMX_TAG_MAX];

			err = vmmx_buf_tag(r->buf, t, sizeof(t));
			if (!err && !strcmp(t, tag ? "" : VMMXP_CTL_TAG))
				err = vmmx_buf_set_tag(r->buf, tag);
			if (err)
				snprintf(why, len, "tagging segment %p: %s", vmmx_buf_ptr(r->buf),
					 vmmx_last_error());
		}
	}
	pthread_mutex_unlock(&segs_lock);
	return err;
}

static size_t count_segs(void)
{
	size_t n;

	pthread_mutex_lock(&segs_lock);
	n = nsegs;
	pthread_mutex_unlock(&segs_lock);
	return n;
}

/* ---- the requests ---- */

static const char *const tags[] = { VMMXP_CTL_TAG };

static double since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/* libvmmx's message for @err, or the code's own words when a step left none. */
static const char *error_of(int err)
{
	const char *m = vmmx_last_error();

	return m && *m ? m : vmmx_strerror(err);
}

static const char *mode_name(int mode)
{
	return mode == VMMX_SLEEP_DISCARD ? "discard" : "offload";
}

/* Wake the first @n allocators' memory; the first error's message in @why. */
static int wake_all(struct vmmx_alloc *const *a, const int *dev, int n, size_t *bytes_p,
		    char *why, size_t len)
{
	int err, first = 0;
	size_t b;

	*bytes_p = 0;
	for (int i = 0; i < n; i++) {
		b = 0;
		err = vmmx_wake(vmmx_alloc_ctx(a[i]), tags, 1, &b);
		*bytes_p += b;
		if (err && !first) {
			first = err;
			snprintf(why, len, "device %d: %s", dev[i], error_of(err));
		}
	}
	return first;
}

static void do_sleep(int mode, char *out, size_t len)
{
	struct vmmx_alloc *a[VMMXP_MAX_DEVICES];
	int dev[VMMXP_MAX_DEVICES], n, i, slept = 0, err = 0;
	char why[512] = "", undo[512] = "";
	size_t bytes = 0, b, woken;
	struct timespec t0;

	if (asleep) {
		snprintf(out, len, "error: already asleep (%s): wake it first\n",
			 mode_name(asleep_mode));
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	gate_close();
	n = vmmxp_allocs(a, dev, VMMXP_MAX_DEVICES);
	for (i = 0; i < n && !err; i++) {
		err = vmmx_sync(vmmx_alloc_ctx(a[i]));
		if (err)
			snprintf(why, sizeof(why), "device %d: waiting for the device: %s", dev[i],
				 vmmx_last_error());
	}
	/* Idle cached segments go back to the driver rather than to sleep. */
	for (i = 0; i < n && !err; i++) {
		vmmxp_place_hold();
		err = vmmx_alloc_empty_cache(a[i]);
		vmmxp_place_hold_done();
		if (err)
			snprintf(why, sizeof(why), "device %d: giving cached segments back: %s",
				 dev[i], vmmx_last_error());
	}
	if (!err)
		err = tag_segs(VMMXP_CTL_TAG, why, sizeof(why));
	while (!err && slept < n) {
		b = 0;
		err = vmmx_sleep(vmmx_alloc_ctx(a[slept]), tags, 1, mode, NULL, &b);
		if (err == -VMMX_EBUSY)
			snprintf(why, sizeof(why), "device %d: %s (the program queued work after the "
				 "device went idle: it must be idle for a sleep)", dev[slept],
				 vmmx_last_error());
		else if (err)
			snprintf(why, sizeof(why), "device %d: %s", dev[slept], error_of(err));
		else
			slept++;
		bytes += b;
	}
	if (!err) {
		__atomic_store_n(&asleep, 1, __ATOMIC_RELAXED);
		asleep_mode = mode;
		snprintf(out, len, "ok slept bytes=%zu mode=%s seconds=%.3f\n", bytes,
			 mode_name(mode), since(&t0));
		return; /* the gate stays closed until the wake */
	}
	/* The devices before the one that failed (vmmx_sleep undid its own). */
	if (wake_all(a, dev, slept, &woken, undo, sizeof(undo))) {
		__atomic_store_n(&asleep, 1, __ATOMIC_RELAXED);
		asleep_mode = mode;
		snprintf(out, len, "error: sleep failed: %s; waking the devices already asleep "
			 "failed too (%s): they stay asleep, send wake\n", why, undo);
		return;
	}
	/* Swallowed: the tag only matters while asleep; a later sleep sets it again. */
	(void)tag_segs(NULL, undo, sizeof(undo));
	gate_open();
	snprintf(out, len, "error: sleep failed, nothing is asleep: %s\n", why);
}

static void do_wake(char *out, size_t len)
{
	struct vmmx_alloc *a[VMMXP_MAX_DEVICES];
	int dev[VMMXP_MAX_DEVICES], n, err;
	char why[512] = "";
	struct timespec t0;
	size_t bytes;

	if (!asleep) {
		snprintf(out, len, "error: not asleep\n");
		return;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	n = vmmxp_allocs(a, dev, VMMXP_MAX_DEVICES);
	err = wake_all(a, dev, n, &bytes, why, sizeof(why));
	if (err) {
		snprintf(out, len, "error: woke %zu bytes, the rest stays asleep, intact: %s; send "
			 "wake again when there is room\n", bytes, why);
		return;
	}
	err = tag_segs(NULL, why, sizeof(why));
	__atomic_store_n(&asleep, 0, __ATOMIC_RELAXED);
	gate_open();
	if (err)
		snprintf(out, len, "ok woke bytes=%zu seconds=%.3f (but %s)\n", bytes, since(&t0),
			 why);
	else
		snprintf(out, len, "ok woke bytes=%zu seconds=%.3f\n", bytes, since(&t0));
}

/*
 * Give back the pinned host memory the last offload keeps for the next one
 * (vmmx_sleep_release).  The segments carry the tag only while asleep, so
 * they carry it again for the call, behind the closed gate.
 */
static void do_release(char *out, size_t len)
{
	struct vmmx_alloc *a[VMMXP_MAX_DEVICES];
	int dev[VMMXP_MAX_DEVICES], n, err = 0;
	char why[512] = "";
	size_t bytes = 0, b;

	if (asleep) {
		snprintf(out, len, "error: asleep: the host memory holds the contents; wake first\n");
		return;
	}
	gate_close();
	n = vmmxp_allocs(a, dev, VMMXP_MAX_DEVICES);
	err = tag_segs(VMMXP_CTL_TAG, why, sizeof(why));
	for (int i = 0; i < n && !err; i++) {
		b = 0;
		err = vmmx_sleep_release(vmmx_alloc_ctx(a[i]), tags, 1, &b);
		if (err)
			snprintf(why, sizeof(why), "device %d: %s", dev[i], vmmx_last_error());
		bytes += b;
	}
	if (tag_segs(NULL, err ? NULL : why, err ? 0 : sizeof(why)) && !err)
		err = -VMMX_EDRIVER;
	gate_open();
	if (err)
		snprintf(out, len, "error: released %zu bytes: %s\n", bytes, why);
	else
		snprintf(out, len, "ok released bytes=%zu\n", bytes);
}

static void do_status(char *out, size_t len)
{
	struct vmmx_alloc *a[VMMXP_MAX_DEVICES];
	int dev[VMMXP_MAX_DEVICES], n;
	size_t used;

	n = vmmxp_allocs(a, dev, VMMXP_MAX_DEVICES);
	used = (size_t)snprintf(out, len, "ok state=%s mode=%s devices=%d segments=%zu\n",
				asleep ? "asleep" : "awake", asleep ? mode_name(asleep_mode) : "none",
				n, count_segs());
	for (int i = 0; i < n && used < len; i++) {
		struct vmmx_alloc_stats as = { .size = sizeof(as) };
		struct vmmx_stats st = { .size = sizeof(st) };
		struct vmmx_sleep_stats ss, su;
		struct vmmx_ctx *ctx = vmmx_alloc_ctx(a[i]);

		/* Asleep, the segments carry the tag; awake, none (su): their
		 * stashes, kept for the next offload, are counted either way. */
		if (vmmx_alloc_stats(a[i], &as) || vmmx_stats_get(ctx, &st) ||
		    vmmx_sleep_stats(ctx, VMMXP_CTL_TAG, &ss) || vmmx_sleep_stats(ctx, "", &su)) {
			used += (size_t)snprintf(out + used, len - used, "device=%d error: %s\n",
						 dev[i], vmmx_last_error());
			continue;
		}
		used += (size_t)snprintf(out + used, len - used,
					 "device=%d allocated_bytes=%llu asleep_bytes=%llu "
					 "offloaded_bytes=%llu device_bytes=%llu host_bytes=%llu "
					 "stash_bytes=%llu\n",
					 dev[i], (unsigned long long)as.allocated_bytes,
					 (unsigned long long)ss.asleep_bytes,
					 (unsigned long long)ss.offloaded_bytes,
					 (unsigned long long)st.device_bytes,
					 (unsigned long long)st.host_bytes,
					 (unsigned long long)(ss.stash_bytes + su.stash_bytes));
	}
}

/* One request line (NUL-terminated, newline stripped) into its answer. */
static void serve_line(char *line, char *out, size_t len)
{
	char *save = NULL, *cmd = strtok_r(line, " \t", &save);
	char *arg = cmd ? strtok_r(NULL, " \t", &save) : NULL;
	char *extra = arg ? strtok_r(NULL, " \t", &save) : NULL;

	if (!cmd) {
		snprintf(out, len, "error: empty request: expected sleep [offload|discard], wake, "
			 "release or status\n");
	} else if (!strcmp(cmd, "sleep") && !extra &&
		   (!arg || !strcmp(arg, "offload") || !strcmp(arg, "discard"))) {
		do_sleep(arg && !strcmp(arg, "discard") ? VMMX_SLEEP_DISCARD : VMMX_SLEEP_OFFLOAD,
			 out, len);
	} else if (!strcmp(cmd, "sleep")) {
		snprintf(out, len, "error: sleep '%s%s%s': expected sleep, sleep offload or sleep "
			 "discard\n", arg, extra ? " " : "", extra ? extra : "");
	} else if ((!strcmp(cmd, "wake") || !strcmp(cmd, "status") || !strcmp(cmd, "release")) &&
		   arg) {
		snprintf(out, len, "error: %s takes no argument (got '%s')\n", cmd, arg);
	} else if (!strcmp(cmd, "wake")) {
		do_wake(out, len);
	} else if (!strcmp(cmd, "status")) {
		do_status(out, len);
	} else if (!strcmp(cmd, "release")) {
		do_release(out, len);
	} else {
		snprintf(out, len, "error: unknown command '%.64s': expected sleep "
			 "[offload|discard], wake, release or status\n", cmd);
	}
}

/* Whether the peer may control this process: the same user, or root. */
static int peer_allowed(int fd)
{
	struct ucred cr;
	socklen_t l = sizeof(cr);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &l) &&
	       (cr.uid == geteuid() || cr.uid == 0);
}

static void serve_conn(int fd)
{
	struct timeval tv = { RECV_TIMEOUT_S, 0 };
	char line[VMMXP_CTL_LINE], out[VMMXP_CTL_REPLY];
	size_t got = 0;
	ssize_t r;
	char *nl = NULL;

	if (!peer_allowed(fd)) {
		snprintf(out, sizeof(out), "error: refused: another user's process\n");
		goto reply;
	}
	/* Swallowed: without the timeout a silent client only blocks the control longer. */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	while (got < sizeof(line) - 1 && !nl) {
		r = recv(fd, line + got, sizeof(line) - 1 - got, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		got += (size_t)r;
		line[got] = '\0';
		nl = strchr(line, '\n');
	}
	line[got] = '\0';
	if (!nl) {
		snprintf(out, sizeof(out), "error: %s\n",
			 got == sizeof(line) - 1 ? "request line too long" :
						  "no request line (one line ending in a newline)");
		goto reply;
	}
	*nl = '\0';
	serve_line(line, out, sizeof(out));
reply:
	/* Swallowed: a client gone before the answer loses it; the request was done. */
	(void)send(fd, out, strlen(out), MSG_NOSIGNAL);
	close(fd);
}

static void *control_main(void *arg)
{
	(void)arg;
	vmmxp_depth(1); /* for life: this thread only calls libvmmx */
	for (;;) {
		int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC);

		if (fd >= 0) {
			serve_conn(fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EINVAL) /* EINVAL: shut down at exit */
			fprintf(stderr, "vmmx-run: process %d: the control socket %s stops: "
					"accept: %s\n", (int)getpid(), sock_path, strerror(errno));
		return NULL;
	}
}

static void remove_socket(void)
{
	if (getpid() != sock_pid)
		return; /* a forked child's exit: the socket is its parent's */
	unlink(sock_path);
	shutdown(listen_fd, SHUT_RDWR);
}

/* Bind @fd to sock_path; a socket file nobody listens on (left by a killed process) is replaced. */
static int bind_path(int fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int probe, in_use;

	memcpy(sa.sun_path, sock_path, strlen(sock_path) + 1);
	if (!bind(fd, (struct sockaddr *)&sa, sizeof(sa)))
		return 0;
	if (errno != EADDRINUSE)
		return -1;
	probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (probe < 0)
		return -1;
	in_use = !connect(probe, (struct sockaddr *)&sa, sizeof(sa)) || errno != ECONNREFUSED;
	close(probe);
	if (in_use) {
		errno = EADDRINUSE;
		return -1;
	}
	unlink(sock_path);
	return bind(fd, (struct sockaddr *)&sa, sizeof(sa));
}

static void start(void)
{
	const char *s = getenv("VMMX_RUN_CONTROL");
	sigset_t all, old;
	pthread_t t;
	int fd, err;
	const char *step;

	if (!s)
		return; /* the program unset it since the first read: nothing asked for */
	if (!strcmp(s, "1")) {
		if (vmmxp_ctl_path(vmmxp_ctl_dir(), getpid(), sock_path, sizeof(sock_path))) {
			errno = ENAMETOOLONG;
			step = "the default path";
			goto err_path;
		}
	} else if (strlen(s) >= sizeof(sock_path)) {
		snprintf(sock_path, sizeof(sock_path), "%.100s...", s);
		errno = ENAMETOOLONG;
		step = "VMMX_RUN_CONTROL";
		goto err_path;
	} else {
		memcpy(sock_path, s, strlen(s) + 1);
	}
	step = "socket";
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		goto err_path;
	step = "bind";
	if (bind_path(fd))
		goto err_socket;
	/* Swallowed: SO_PEERCRED checks every client anyway. */
	(void)chmod(sock_path, 0600);
	step = "listen";
	if (listen(fd, 8))
		goto err_bound;
	listen_fd = fd;
	sock_pid = getpid();
	/* The program's signals go to its own threads, never to this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = pthread_create(&t, NULL, control_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		errno = err;
		step = "pthread_create";
		listen_fd = -1;
		goto err_bound;
	}
	pthread_detach(t);
	if (atexit(remove_socket))
		fprintf(stderr, "vmmx-run: process %d: atexit failed: %s stays after the exit\n",
			(int)getpid(), sock_path);
	return;

err_bound:
	unlink(sock_path);
err_socket:
	close(fd);
err_path:
	fprintf(stderr, "vmmx-run: process %d: no control socket (%s %s: %s); sleep and wake "
			"from outside are off for this process\n",
		(int)getpid(), step, sock_path, strerror(errno));
}

void vmmxp_control_start(void)
{
	if (vmmxp_control_on())
		pthread_once(&start_once, start);
}

void vmmxp_control_after_fork(void)
{
	pthread_mutex_init(&gate_lock, NULL);
	pthread_cond_init(&gate_cv, NULL);
	pthread_mutex_init(&segs_lock, NULL);
	gate_closed = 0;
	gate_users = 0;
	/* The parent's thread and socket are not the child's: no control here. */
	__atomic_store_n(&control, 0, __ATOMIC_RELAXED);
}
