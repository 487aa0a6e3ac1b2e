// SPDX-License-Identifier: MIT
/*
 * loader_path.c - what the policy loader checks is what it loads: the path
 * to a plugin is checked component by component from /, and the file loaded
 * is the descriptor that was checked (through /proc/self/fd), so that
 *  - a path through a directory that others may write (world-writable and
 *    not sticky), whether the directory is plain or holds a symbolic link
 *    on the way, is refused with a message naming that directory, as are
 *    directories and links owned by another user (as root only, who can
 *    give them away) and a loop of links; sticky directories (/tmp) and
 *    links in safe directories are fine;
 *  - a thread flipping a symbolic link between a safe plugin directory and
 *    one whose plugin must be refused never gets the refused one loaded
 *    (it counts "impostor" when its init runs: tests/policies/fake.c);
 *  - without /proc (an empty file system mounted over it, in a child in a
 *    mount namespace of its own, where that is allowed) the file is refused
 *    with a message saying so, never loaded by its path;
 *  - the loader's name of a plugin (/proc/PID/fd/N) opens the plugin from
 *    another process too (a debugger attaching reads the list: /proc/self
 *    would be its own descriptor);
 *  - /proc/PID/fd names reused after a descriptor is closed never answer
 *    with a plugin loaded earlier, two contexts share one plugin file, the
 *    logs and statistics name the real file, and no descriptor is left open
 *    once every plugin is unloaded.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <link.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmmx.h"
#include "vmmx/policy.h"
#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/vmmx_test.h"

/*
 * The race runs this long (or until the refused plugin loads).  Before the
 * fix, loading by path after checking it loaded the refused plugin in about
 * 1 load in 100 here, some 10,000 loads a second.
 */
#define RACE_SECONDS 3
/* The whole test, whatever happens: a watchdog. */
#define WATCHDOG_SECONDS 120
/* A user that owns nothing here (nobody), for the ownership checks as root. */
#define OTHER_UID 65534

static char fakedir[2304];      /* the fake plugins, in the build tree */
static char base[64];           /* this test's directory, under /tmp */
static char pathvar[2816];
static const char *vars[3] = { pathvar, "VMMX_CHUNK_MAX=2MiB", NULL };

/* mkdir base/@rel with exactly @mode; returns the path in a static ring. */
static const char *dir_at(const char *rel, mode_t mode)
{
	static char ring[8][256];
	static int next;
	char *p = ring[next++ % 8];

	snprintf(p, sizeof(ring[0]), "%s/%s", base, rel);
	if (mkdir(p, mode) || chmod(p, mode))
		bail("mkdir %s: %s", p, strerror(errno));
	return p;
}

/* Install the fake plugin @variant as vmmx_policy_fake_ok.so in @dir, with @mode. */
static void install(const char *dir, const char *variant, mode_t mode)
{
	char from[2560], to[512];

	snprintf(from, sizeof(from), "%s/vmmx_policy_%s.so", fakedir, variant);
	snprintf(to, sizeof(to), "%s/vmmx_policy_fake_ok.so", dir);
	test_copy_file(from, to, mode);
}

static void link_at(const char *target, const char *rel)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/%s", base, rel);
	if (symlink(target, p))
		bail("symlink %s: %s", p, strerror(errno));
}

/* The counter @name of the instance of fake_ok in @ctx (0 when none). */
static uint64_t fake_counter(struct vmmx_ctx *ctx, const char *name)
{
	struct json *st = test_stats_json(ctx);
	const struct json *c = json_get(json_get(test_find_policy(st, "fake_ok"), "counters"), name);
	uint64_t v = c ? json_u64(c) : 0;

	json_free(st);
	return v;
}

/* The source of fake_ok's instance in @ctx, in @out. */
static const char *fake_source(struct vmmx_ctx *ctx, char *out, size_t len)
{
	struct json *st = test_stats_json(ctx);
	const char *s = json_str(json_get(test_find_policy(st, "fake_ok"), "source"));

	snprintf(out, len, "%s", s ? s : "(none)");
	json_free(st);
	return out;
}

static int open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (!d)
		bail("opendir /proc/self/fd: %s", strerror(errno));
	while ((e = readdir(d)))
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1; /* the directory's own */
}

/*
 * With VMMX_POLICY_PATH=@dir, fake_ok is refused: -VMMX_EPOLICY, and both
 * vmmx_last_error() and the info log carry @reason.
 */
static void refused(const char *dir, const char *reason, const char *what)
{
	struct vmmx_buf *buf = NULL;
	struct vmmx_ctx *ctx;
	char msg[1024];

	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", dir);
	ctx = test_ctx(vars);
	test_log_clear();
	is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf),
	       "vmmx_buf_create refuses fake_ok %s", what);
	snprintf(msg, sizeof(msg), "%s", vmmx_last_error());
	like(msg, reason, "vmmx_last_error names what failed (%s)", what);
	like(test_log(), reason, "the info log explains it (%s)", what);
	if (buf)
		vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

/* With VMMX_POLICY_PATH=@dir, fake_ok loads, and its source is @dir's file. */
static void accepted(const char *dir, const char *what)
{
	struct vmmx_buf *buf = NULL;
	struct vmmx_ctx *ctx;
	char want[512], src[512];
	int err;

	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", dir);
	ctx = test_ctx(vars);
	err = vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf);
	if (err)
		diag("vmmx_last_error: %s", vmmx_last_error());
	is_err(0, err, "vmmx_buf_create loads fake_ok %s", what);
	snprintf(want, sizeof(want), "%s/vmmx_policy_fake_ok.so", dir);
	is_string(want, fake_source(ctx, src, sizeof(src)),
		  "vmmx_stats_json: the source is the path searched (%s)", what);
	if (!err)
		vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

/* ---- the race ---- */

struct flipper {
	char link[256], alt[256];
	int stop;               /* atomic */
	unsigned long flips;
};

/*
 * Swap the links "cur" (-> safe) and "alt" (-> bad) again and again: one
 * atomic renameat2(RENAME_EXCHANGE) a flip, so flips are fast and "cur"
 * always exists.  Where the file system cannot exchange, a new link is
 * renamed over "cur" instead.
 */
static void *flip(void *arg)
{
	struct flipper *f = arg;
	bool exchange = true;

	while (!__atomic_load_n(&f->stop, __ATOMIC_RELAXED)) {
		if (exchange && renameat2(AT_FDCWD, f->link, AT_FDCWD, f->alt, RENAME_EXCHANGE)) {
			if (errno != EINVAL && errno != ENOSYS)
				bail("renameat2 %s: %s", f->link, strerror(errno));
			exchange = false;
			unlink(f->alt);
		}
		if (!exchange && (symlink(f->flips & 1 ? "safe" : "bad", f->alt) ||
				  rename(f->alt, f->link)))
			bail("flip %s: %s", f->link, strerror(errno));
		f->flips++;
	}
	return NULL;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void race(void)
{
	unsigned long loads = 0, good = 0, impostors = 0, refusals = 0, other = 0;
	struct flipper f = { .stop = 0 };
	struct vmmx_ctx *ctx;
	char first_other[512] = "";
	double end = now() + RACE_SECONDS;
	pthread_t t;

	snprintf(f.link, sizeof(f.link), "%s/cur", base);
	snprintf(f.alt, sizeof(f.alt), "%s/alt", base);
	if (symlink("safe", f.link) || symlink("bad", f.alt))
		bail("symlink %s: %s", f.link, strerror(errno));
	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", f.link);
	ctx = test_ctx(vars);
	if (pthread_create(&t, NULL, flip, &f))
		bail("pthread_create");
	while (!impostors && now() < end) {
		struct vmmx_buf *buf = NULL;
		int err = vmmx_buf_create(ctx, 2 * MiB, "fake_ok", &buf);

		loads++;
		if (!err) {
			/* Loaded: which file's code ran? */
			if (fake_counter(ctx, "impostor"))
				impostors++;
			else
				good++;
			vmmx_buf_destroy(buf);
		} else if (err == -VMMX_EPOLICY &&
			   strstr(vmmx_last_error(), "file writable by group or others")) {
			refusals++;
		} else {
			if (!other++)
				snprintf(first_other, sizeof(first_other), "%s: %s",
					 vmmx_strerror(err), vmmx_last_error());
		}
	}
	__atomic_store_n(&f.stop, 1, __ATOMIC_RELAXED);
	pthread_join(t, NULL);
	vmmx_ctx_destroy(ctx);
	diag("race: %lu loads, %lu flips: %lu safe, %lu refused, %lu impostor, %lu other", loads,
	     f.flips, good, refusals, impostors, other);
	is_uint(0, impostors,
		"race: the group-writable plugin behind a flipped link never loaded (%lu of %lu)",
		impostors, loads);
	ok(good > 0 && refusals > 0,
	   "race: both directories were seen (%lu loads of the safe plugin, %lu refusals)", good,
	   refusals);
	is_uint(0, other, "race: no other outcome (%s)", other ? first_other : "none");
}

/*
 * In a child with a mount namespace of its own, /proc hidden under an empty
 * tmpfs: fake_ok from @dir is refused, saying why.  The child reports
 * "ERR MESSAGE" through a pipe; it exits 77 when it may not make the
 * namespace (not root, or no CAP_SYS_ADMIN in a container): skipped.
 */
static void no_proc(const char *dir)
{
	char got[1024] = "", want[256];
	int fds[2], status, err = 0;
	ssize_t n;
	pid_t pid;

	if (pipe(fds))
		bail("pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0)
		bail("fork: %s", strerror(errno));
	if (!pid) {
		struct vmmx_buf *buf = NULL;
		struct vmmx_ctx *ctx;
		char msg[1024];

		close(fds[0]);
		/* Private first, so that nothing mounted here reaches the parent's namespace. */
		if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
		    mount("none", "/proc", "tmpfs", 0, "size=64k"))
			_exit(77);
		snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", dir);
		/* A forked child cannot use CUDA (the parent may have); the
		 * loader's rules are the same on every backend. */
		setenv("VMMX_BACKEND", "sim", 1);
		if (test_ctx_try(vars, &ctx)) {
			snprintf(msg, sizeof(msg), "1 vmmx_ctx_create: %s", vmmx_last_error());
		} else {
			int e = vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf);

			snprintf(msg, sizeof(msg), "%d %s", e, vmmx_last_error());
		}
		if (write(fds[1], msg, strlen(msg)) < 0)
			_exit(1);
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], got, sizeof(got) - 1);
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid)
		bail("waitpid: %s", strerror(errno));
	if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
		skip("no /proc: cannot mount over it here (needs root and CAP_SYS_ADMIN)");
		skip("no /proc: cannot mount over it here (needs root and CAP_SYS_ADMIN)");
		return;
	}
	got[n > 0 ? n : 0] = '\0';
	sscanf(got, "%d", &err);
	is_err(-VMMX_EPOLICY, err, "without /proc, vmmx_buf_create refuses fake_ok (%s)", got);
	snprintf(want, sizeof(want),
		 "%s/vmmx_policy_fake_ok.so: cannot load it through /proc/self/fd/", dir);
	ok(strstr(got, want) && strstr(got, "(is /proc mounted?)"),
	   "without /proc, vmmx_last_error says the file cannot be loaded through /proc/self/fd");
}

/* The loader's name of the object loaded from the file @w->st names. */
struct loaded_name {
	struct stat st;
	char name[256];
};

static int find_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct loaded_name *w = arg;
	struct stat st;

	(void)size;
	if (!info->dlpi_name || !*info->dlpi_name || stat(info->dlpi_name, &st) ||
	    st.st_dev != w->st.st_dev || st.st_ino != w->st.st_ino)
		return 0;
	snprintf(w->name, sizeof(w->name), "%s", info->dlpi_name);
	return 1;
}

/*
 * The name the loader keeps for @file, loaded: /proc/PID/fd/N with PID
 * this process as /proc knows it, and that name, opened by another process
 * (stat(1), exec'd: the plugin's descriptor is close-on-exec, so /proc/self
 * there would not be it), is the plugin file.
 */
static void check_loaded_name(const char *file)
{
	struct loaded_name w = { .name = "" };
	char self[32] = "", want[64], cmd[400], got[64] = "", ids[64];
	ssize_t n = readlink("/proc/self", self, sizeof(self) - 1);
	FILE *f;

	if (stat(file, &w.st))
		bail("stat %s: %s", file, strerror(errno));
	self[n > 0 ? n : 0] = '\0';
	dl_iterate_phdr(find_loaded, &w);
	snprintf(want, sizeof(want), "/proc/%s/fd/", self);
	ok(n > 0 && !strncmp(w.name, want, strlen(want)),
	   "the loader's name for the plugin is %sN, not /proc/self/fd/N (%s)", want, w.name);
	snprintf(cmd, sizeof(cmd), "stat -L -c '%%d %%i' '%s' 2>&1", w.name);
	f = popen(cmd, "r");
	if (!f || !fgets(got, sizeof(got), f))
		got[0] = '\0';
	if (f)
		pclose(f);
	got[strcspn(got, "\n")] = '\0';
	snprintf(ids, sizeof(ids), "%llu %llu", (unsigned long long)w.st.st_dev,
		 (unsigned long long)w.st.st_ino);
	is_string(ids, got, "another process opening that name finds the plugin file (stat -L)");
}

int main(void)
{
	char okfile[2560], impfile[2560], want[2816], src[512];
	struct vmmx_policy_info v[64];
	struct vmmx_ctx *ctx, *ctx2;
	struct vmmx_buf *buf, *buf2, *buf3;
	const char *safe, *ww, *st;
	size_t n;
	int fds;

	alarm(WATCHDOG_SECONDS);
	snprintf(fakedir, sizeof(fakedir), "%s/tests/policies/.libs", test_build_tree());
	snprintf(okfile, sizeof(okfile), "%s/vmmx_policy_fake_ok.so", fakedir);
	snprintf(impfile, sizeof(impfile), "%s/vmmx_policy_fake_impostor.so", fakedir);
	if (access(okfile, R_OK) || access(impfile, R_OK))
		bail("%s/ lacks the fake plugins: build the check libraries first (make check)",
		     fakedir);
	snprintf(base, sizeof(base), "/tmp/vmmx-loader-path-XXXXXX");
	if (!mkdtemp(base))
		bail("mkdtemp: %s", strerror(errno));

	plan(58);

	/*
	 * safe/: fake_ok, 0644.  bad/: the impostor as vmmx_policy_fake_ok.so,
	 * group-writable, refused on its own.  ww/: world-writable, not sticky,
	 * with a link cur -> ../safe and a plain directory plain/ holding
	 * fake_ok.  st/: world-writable and sticky (as /tmp), with dir/ holding
	 * fake_ok.
	 */
	safe = dir_at("safe", 0755);
	install(safe, "fake_ok", 0644);
	install(dir_at("bad", 0755), "fake_impostor", 0664);
	ww = dir_at("ww", 0777);
	link_at("../safe", "ww/cur");
	install(dir_at("ww/plain", 0755), "fake_ok", 0644);
	st = dir_at("st", 01777);
	install(dir_at("st/dir", 0755), "fake_ok", 0644);

	/* ---- the path, component by component ---- */
	accepted(safe, "from a safe directory");
	snprintf(want, sizeof(want), "%s/bad", base);
	refused(want, "file writable by group or others", "when the file is group-writable");

	snprintf(want, sizeof(want), "directory %s writable by group or others and not sticky",
		 ww);
	{
		char through[512];

		snprintf(through, sizeof(through), "%s/cur", ww);
		refused(through, want, "through a link in a world-writable directory");
		snprintf(through, sizeof(through), "%s/plain", ww);
		refused(through, want, "in a directory inside a world-writable one");
	}
	{
		char dir[512];

		snprintf(dir, sizeof(dir), "%s/dir", st);
		accepted(dir, "inside a world-writable sticky directory");
		link_at("safe", "rel");
		snprintf(dir, sizeof(dir), "%s/rel", base);
		accepted(dir, "through a relative link in a safe directory");
		snprintf(dir, sizeof(dir), "%s", base);
		link_at(dir, "abs");
		snprintf(dir, sizeof(dir), "%s/abs/./st/..//safe", base);
		accepted(dir, "through an absolute link, '.', '..' and '//'");
		link_at("loop", "loop");
		snprintf(dir, sizeof(dir), "%s/loop", base);
		snprintf(want, sizeof(want), "%s/loop: more than 40 symbolic links", base);
		refused(dir, want, "through a loop of links");
	}
	if (geteuid() == 0) {
		/* Root can give a directory or a link to another user. */
		const char *theirs = dir_at("st/theirs", 0755);
		char dir[512], lnk[512];

		install(dir_at("st/theirs/sub", 0755), "fake_ok", 0644);
		if (chown(theirs, OTHER_UID, OTHER_UID))
			bail("chown %s: %s", theirs, strerror(errno));
		snprintf(want, sizeof(want), "directory %s owned by another user (uid %d)", theirs,
			 OTHER_UID);
		snprintf(dir, sizeof(dir), "%s/sub", theirs);
		refused(dir, want, "inside a directory owned by another user");
		snprintf(lnk, sizeof(lnk), "%s/theirs-link", st);
		if (symlink(safe, lnk) || lchown(lnk, OTHER_UID, OTHER_UID))
			bail("symlink/lchown %s: %s", lnk, strerror(errno));
		snprintf(want, sizeof(want), "symbolic link %s owned by another user (uid %d)", lnk,
			 OTHER_UID);
		refused(lnk, want, "through a link owned by another user in a sticky directory");
	} else {
		for (int i = 0; i < 6; i++)
			skip("ownership by another user: only root can give files away");
	}

	/* vmmx_policy_list checks the same way. */
	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s/cur:%s", ww, safe);
	ctx = test_ctx(vars);
	is_err(0, vmmx_policy_list(ctx, v, 64, &n), "vmmx_policy_list");
	snprintf(want, sizeof(want), "%s/cur/vmmx_policy_fake_ok.so", ww);
	ok(n >= 2 && !strcmp(v[0].file, want) && !v[0].usable,
	   "vmmx_policy_list: the plugin through the world-writable directory is refused (%s)",
	   n ? v[0].file : "none");
	snprintf(want, sizeof(want), "directory %s writable by group or others", ww);
	like(n ? v[0].why : "", want, "vmmx_policy_list: why, naming the directory");
	ok(n >= 2 && v[1].usable && !strcmp(v[1].name, "fake_ok"),
	   "vmmx_policy_list: the next directory's fake_ok is usable");
	vmmx_ctx_destroy(ctx);

	/* ---- no /proc ---- */
	no_proc(safe);

	/* ---- the race ---- */
	race();

	/* ---- loading through /proc/PID/fd: names, sharing, descriptors ---- */
	fds = open_fds();
	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", fakedir);
	ctx = test_ctx(vars);
	test_log_clear();
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf), "vmmx_buf_create: fake_ok");
	snprintf(want, sizeof(want), "policy loader: loaded %s (ABI", okfile);
	like(test_log(), want, "the info log names the file loaded, not /proc/PID/fd");
	ok(!strstr(test_log(), "/fd/"), "the info log never says /proc/PID/fd");
	check_loaded_name(okfile);
	is_string(okfile, fake_source(ctx, src, sizeof(src)),
		  "vmmx_stats_json: the source is the file");
	/*
	 * fake_ok stays loaded; the descriptor it was opened with is closed.
	 * The next plugin's descriptor may get the same number: it must still
	 * be that plugin that is checked, not fake_ok again.
	 */
	buf2 = NULL;
	is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, "fake_major", &buf2),
	       "vmmx_buf_create refuses fake_major while fake_ok is loaded");
	like(vmmx_last_error(), "ABI 2.0, libvmmx speaks 1.x",
	     "vmmx_last_error: fake_major's own reason, not fake_ok's table");
	is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, "fake_name", &buf2),
	       "vmmx_buf_create refuses fake_name while fake_ok is loaded");
	like(vmmx_last_error(), "it calls itself \"not_fake_name\"",
	     "vmmx_last_error: fake_name's own table");
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, "coinflip:p=50", &buf3),
	       "vmmx_buf_create: another plugin loads while fake_ok is loaded");
	{
		struct json *j = test_stats_json(ctx);
		const char *s = json_str(json_get(test_find_policy(j, "coinflip:p=50"), "source"));

		snprintf(want, sizeof(want), "%s/vmmx_policy_coinflip.so", fakedir);
		is_string(want, s, "vmmx_stats_json: coinflip's source is its own file");
		json_free(j);
	}
	vmmx_buf_destroy(buf3);

	/* A second context loads the same file: both work, either may go first. */
	ctx2 = test_ctx(vars);
	is_err(0, vmmx_buf_create(ctx2, 4 * MiB, "fake_ok", &buf2),
	       "vmmx_buf_create: a second context loads fake_ok too");
	is_uint(1, fake_counter(ctx2, "inits"), "the second context has its own instance");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	is_err(0, vmmx_buf_resize(buf2, 4 * MiB),
	       "vmmx_buf_resize in the second context after the first went");
	is_err(0, test_fill(ctx2, vmmx_buf_ptr(buf2), 0, 4 * MiB, 5), "vmmx_memcpy writes");
	is_uint(SIZE_MAX, test_check(ctx2, vmmx_buf_ptr(buf2), 0, 4 * MiB, 5),
		"vmmx_memcpy reads the data back");
	is_uint(2, fake_counter(ctx2, "places"), "fake_ok placed both chunks");
	vmmx_buf_destroy(buf2);
	vmmx_ctx_destroy(ctx2);
	is_int(fds, open_fds(), "no descriptor is left open once every plugin is unloaded");

	/* Not a shared object: dlopen's message is about the file, not /proc/self/fd. */
	{
		char junk[512];
		int fd;

		snprintf(junk, sizeof(junk), "%s/vmmx_policy_junk.so", safe);
		fd = open(junk, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, "not an ELF object\n", 18) != 18)
			bail("write %s: %s", junk, strerror(errno));
		close(fd);
		snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", safe);
		ctx = test_ctx(vars);
		is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, "junk", &buf),
		       "vmmx_buf_create refuses a file that is not a shared object");
		snprintf(want, sizeof(want), "%s: dlopen: ", junk);
		like(vmmx_last_error(), want, "vmmx_last_error: dlopen's message, for the file");
		ok(!strstr(vmmx_last_error(), "/fd/"),
		   "vmmx_last_error does not say /proc/PID/fd (%s)", vmmx_last_error());
		vmmx_ctx_destroy(ctx);
		is_int(fds, open_fds(), "no descriptor left open after a refused file");
	}

	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
		if (system(cmd))
			diag("could not remove %s", base);
	}
	return tap_done();
}
