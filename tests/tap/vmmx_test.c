// SPDX-License-Identifier: MIT
/* vmmx_test.c - helpers shared by the libvmmx tests (see vmmx_test.h). */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/vmmx_test.h"

static char logbuf[16384];
static size_t loglen;

void test_log_sink(void *arg, enum vmmx_log_level level, const char *msg)
{
	int n = snprintf(logbuf + loglen, sizeof(logbuf) - loglen, "%s%s", loglen ? "\n" : "", msg);

	if (n > 0 && (size_t)n < sizeof(logbuf) - loglen)
		loglen += (size_t)n;
	if (getenv("TEST_VERBOSE"))
		diag("log: %s", msg);
}

const char *test_log(void)
{
	return logbuf;
}

void test_log_clear(void)
{
	loglen = 0;
	logbuf[0] = '\0';
}

const char *test_backend(void)
{
	const char *b = getenv("VMMX_BACKEND");

	return b && *b ? b : "sim";
}

bool test_on_sim(void)
{
	return !strcmp(test_backend(), "sim");
}

int test_ctx_try(const char *const *vars, struct vmmx_ctx **ctx_p)
{
	static char sim_devices[64];
	const char *all[64];
	const char *env = getenv("VMMX_SIM_DEVICES");
	struct vmmx_config cfg;
	size_t n = 0;

	/*
	 * VMMX_SIM_DEVICES passes through, so that `VMMX_SIM_DEVICES=2 make
	 * check` runs the suite as a two-GPU machine would; it goes first, so
	 * that a test's own setting (the last one wins) overrides it.
	 */
	if (env && *env && strlen(env) < sizeof(sim_devices) - 18) {
		snprintf(sim_devices, sizeof(sim_devices), "VMMX_SIM_DEVICES=%s", env);
		all[n++] = sim_devices;
	}
	for (size_t i = 0; vars && vars[i]; i++) {
		if (n == sizeof(all) / sizeof(all[0]) - 1)
			bail("test_ctx_try: more than %zu settings", n);
		all[n++] = vars[i];
	}
	all[n] = NULL;
	vmmx_config_init(&cfg);
	cfg.flags = VMMX_CONFIG_NO_ENV;
	cfg.backend = test_backend();
	cfg.log = getenv("TEST_VERBOSE") ? "debug" : "info";
	cfg.vars = all;
	cfg.log_fn = test_log_sink;
	return vmmx_ctx_create(&cfg, ctx_p);
}

struct vmmx_ctx *test_ctx(const char *const *vars)
{
	struct vmmx_ctx *ctx;
	int err = test_ctx_try(vars, &ctx);

	if (err)
		bail("vmmx_ctx_create on %s failed: %s: %s", test_backend(), vmmx_strerror(err),
		     vmmx_last_error());
	return ctx;
}

void require_gpu(void)
{
	struct vmmx_ctx *ctx;
	int err;

	if (strcmp(test_backend(), "cuda"))
		skip_all("needs VMMX_BACKEND=cuda and a GPU (running on %s)", test_backend());
	err = test_ctx_try(NULL, &ctx);
	if (err)
		skip_all("no usable GPU: %s", vmmx_last_error());
	vmmx_ctx_destroy(ctx);
}

uint64_t test_driver_calls(struct vmmx_ctx *ctx, enum vmmx_op op)
{
	struct vmmx_stats st = { .size = sizeof(st) };

	if (vmmx_stats_get(ctx, &st))
		bail("vmmx_stats_get: %s", vmmx_last_error());
	return st.driver_calls[op];
}

int test_fill(struct vmmx_ctx *ctx, void *dst, size_t off, size_t len, uint32_t seed)
{
	uint8_t *tmp = malloc(len ? len : 1);
	int err;

	if (!tmp)
		bail("out of memory");
	for (size_t i = 0; i < len; i++)
		tmp[i] = test_pattern_byte(off + i, seed);
	err = vmmx_memcpy(ctx, (uint8_t *)dst + off, tmp, len);
	free(tmp);
	return err;
}

size_t test_check(struct vmmx_ctx *ctx, const void *src, size_t off, size_t len, uint32_t seed)
{
	uint8_t *tmp = malloc(len ? len : 1);
	size_t bad = SIZE_MAX;

	if (!tmp)
		bail("out of memory");
	if (vmmx_memcpy(ctx, tmp, (const uint8_t *)src + off, len)) {
		free(tmp);
		return SIZE_MAX - 1;
	}
	for (size_t i = 0; i < len; i++) {
		if (tmp[i] != test_pattern_byte(off + i, seed)) {
			bad = off + i;
			break;
		}
	}
	free(tmp);
	return bad;
}

const char *test_layout(struct vmmx_buf *buf)
{
	static char out[65];
	struct vmmx_chunk_info c[64];
	size_t n;

	if (vmmx_buf_chunks(buf, c, 64, &n) || n > 64)
		return "?";
	for (size_t i = 0; i < n; i++)
		out[i] = c[i].loc.kind != VMMX_LOC_DEVICE ? 'H'
			 : c[i].loc.id >= 0 && c[i].loc.id < 10 ? (char)('0' + c[i].loc.id)
								 : '?';
	out[n] = '\0';
	return out;
}

const char *test_build_tree(void)
{
	static char top[2048];
	const char *env = getenv("top_builddir");
	ssize_t n;

	if (top[0])
		return top;
	if (env && env[0] == '/') {
		snprintf(top, sizeof(top), "%s", env);
		return top;
	}
	n = readlink("/proc/self/exe", top, sizeof(top) - 1);
	if (n <= 0)
		bail("top_builddir is not set and /proc/self/exe cannot be read");
	top[n] = '\0';
	for (int i = 0; i < 3; i++) {
		char *slash = strrchr(top, '/');

		if (!slash)
			bail("cannot find the build tree from %s", top);
		*slash = '\0';
	}
	return top;
}

struct json *test_stats_json(struct vmmx_ctx *ctx)
{
	static char text[65536];
	const char *err;
	struct json *j;
	int e = vmmx_stats_json(ctx, text, sizeof(text), NULL);

	if (e)
		bail("vmmx_stats_json: %s: %s", vmmx_strerror(e), vmmx_last_error());
	j = json_parse(text, &err);
	if (!j)
		bail("vmmx_stats_json is not JSON (%s): %s", err, text);
	return j;
}

struct vmmx_stats test_stats(struct vmmx_ctx *ctx)
{
	struct vmmx_stats st;

	memset(&st, 0, sizeof(st));
	st.size = sizeof(st);
	if (vmmx_stats_get(ctx, &st))
		bail("vmmx_stats_get: %s", vmmx_last_error());
	return st;
}

void test_copy_file(const char *from, const char *to, mode_t mode)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	if (in < 0)
		bail("open %s: %s", from, strerror(errno));
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	if (out < 0)
		bail("create %s: %s", to, strerror(errno));
	while ((n = read(in, buf, sizeof(buf))) > 0)
		if (write(out, buf, (size_t)n) != n)
			bail("write %s: %s", to, strerror(errno));
	if (n < 0)
		bail("read %s: %s", from, strerror(errno));
	close(in);
	close(out);
	/* The umask may have taken bits away: set exactly what was asked. */
	if (chmod(to, mode))
		bail("chmod %s: %s", to, strerror(errno));
}

const struct json *test_find_policy(const struct json *st, const char *spec)
{
	const struct json *pols = json_get(st, "policies");

	for (size_t i = 0; i < json_len(pols); i++) {
		const char *s = json_str(json_get(json_index(pols, i), "spec"));

		if (s && !strcmp(s, spec))
			return json_index(pols, i);
	}
	return NULL;
}

int test_child_fails;

void test_expect(bool cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "child %d: %s (last error: %s)\n", (int)getpid(), what,
			vmmx_last_error());
		test_child_fails++;
	}
}

#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifndef TEST_TSAN
#define TEST_TSAN 0
#endif

/*
 * The stack of hung child @pid, by gdb where there is one, as diagnostics.
 * 1 when this is a ThreadSanitizer build and the child waits inside the
 * runtime itself: a __sanitizer:: frame inner to the first interceptor
 * frame (a lock of ours, or libc's, waits in libc, under the interceptor).
 */
static int child_stack(pid_t pid)
{
	char cmd[128], line[512];
	int frames = 0, inner = 1, runtime = 0, rc;
	FILE *f;

	snprintf(cmd, sizeof(cmd),
		 "timeout -k 5 60 gdb -q -nx -batch -p %d -ex 'thread apply all bt' 2>&1", (int)pid);
	f = popen(cmd, "r");
	if (!f) {
		diag("child %d hung; its stack not taken: popen: %s", (int)pid, strerror(errno));
		return 0;
	}
	while (fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		if (line[0] != '#')
			continue;
		if (frames++ < 40)
			diag("child %d: %s", (int)pid, line);
		if (strstr(line, "interceptor_"))
			inner = 0;
		else if (inner && strstr(line, "__sanitizer::"))
			runtime = 1;
	}
	rc = pclose(f);
	if (!frames)
		diag("child %d hung; no stack taken (gdb: status %#x; is it installed, may it "
		     "trace?)",
		     (int)pid, rc);
	return TEST_TSAN && runtime;
}

int test_wait_child(pid_t pid, int seconds)
{
	struct timespec t = { 0, 10 * 1000 * 1000 };
	int status, tsan;

	for (int i = 0; i < seconds * 100; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG);

		if (r == pid)
			return status;
		if (r < 0 && errno != EINTR)
			return -2;
		nanosleep(&t, NULL);
	}
	tsan = child_stack(pid);
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	return tsan ? TEST_HUNG_IN_TSAN : -1;
}

struct vmmx_buf *test_host_buf(struct vmmx_ctx *ctx, size_t size, uint32_t seed)
{
	struct vmmx_buf *buf;

	if (vmmx_buf_create(ctx, 64 * MiB, "host", &buf) || vmmx_buf_resize(buf, size) ||
	    test_fill(ctx, vmmx_buf_ptr(buf), 0, size, seed))
		bail("test_host_buf: %s", vmmx_last_error());
	return buf;
}

void test_migrate_all(struct vmmx_buf *buf, struct vmmx_loc to)
{
	if (vmmx_buf_migrate(buf, 0, vmmx_buf_size(buf), to, NULL))
		bail("vmmx_buf_migrate: %s", vmmx_last_error());
}

uint8_t *test_pattern(size_t len, uint32_t seed)
{
	uint8_t *p = malloc(len);

	if (!p)
		bail("out of memory");
	for (size_t i = 0; i < len; i++)
		p[i] = test_pattern_byte(i, seed);
	return p;
}

bool test_holds(struct vmmx_ctx *ctx, struct vmmx_buf *buf, const uint8_t *want, size_t off,
		size_t len)
{
	uint8_t *got = malloc(len);
	bool same;

	if (!got)
		bail("out of memory");
	same = !vmmx_memcpy(ctx, got, (uint8_t *)vmmx_buf_ptr(buf) + off, len) &&
	       !memcmp(got, want + off, len);
	free(got);
	return same;
}
