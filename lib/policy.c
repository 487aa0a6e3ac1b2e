// SPDX-License-Identifier: MIT
/*
 * policy.c - the policy host: finding, checking, loading and unloading
 * placement policies, the services table they get, and what the library
 * tells a policy (chunk events, advice: the end of the file).
 *
 * Search, for a spec "name[:args]": every directory of VMMX_POLICY_PATH
 * (absolute directories only, empty elements ignored), then the build
 * tree's policies when this library runs uninstalled from it, then
 * $(pkglibdir)/policies; the first file vmmx_policy_<name>.so there that
 * passes every check is loaded.  Checks, each refusal explained at info
 * level and collected for the error message: the path, walked from / one
 * component at a time, passes only through directories owned by root or by
 * us and writable by nobody else unless sticky, and through symbolic links
 * owned by root or by us; the file is a regular file (not a link) owned by
 * root or by us and writable by nobody else (open_checked()); dlopen
 * (RTLD_NOW | RTLD_LOCAL) of the descriptor that walk opened, through
 * /proc/PID/fd, succeeds (plugin_dlopen()); vmmx_policy_entry exists and
 * returns a table whose major ABI matches, whose size covers the mandatory
 * members, whose mandatory callbacks are set and whose name is the one
 * asked for.  The built-in policies (device-first, device, host) answer when no file
 * does, so libvmmx works with no plugin directory.  vmmx__policy_scan walks
 * the same directories with the same checks, without calling init, for
 * vmmx_policy_list (info.c).
 *
 * One instance per distinct spec per context, shared by the buffers that
 * name it and reference-counted under ctx->lock.  The instance list is
 * RCU-published for lock-free readers (stats); unloading unlinks under the
 * lock, waits for a grace period, then calls fini and dlclose.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal/obj.h"

#ifndef VMMX_POLICY_DIR
#define VMMX_POLICY_DIR "/usr/local/lib/libvmmx/policies"
#endif

/* Built-in policies: the same sources as the plugins, compiled into the core. */
extern vmmx_policy_entry_fn vmmx__policy_device_first_entry;
extern vmmx_policy_entry_fn vmmx__policy_device_entry;
extern vmmx_policy_entry_fn vmmx__policy_host_entry;

static const struct {
	const char *name;
	vmmx_policy_entry_fn *entry;
} builtins[] = {
	{ "device-first", vmmx__policy_device_first_entry },
	{ "device", vmmx__policy_device_entry },
	{ "host", vmmx__policy_host_entry },
};

const char *vmmx__policy_builtin_names(void)
{
	return "device-first, device, host";
}

/* ---- host services ---- */

static struct vmmx__policy *of_host(const struct vmmx_policy_host *host)
{
	return (struct vmmx__policy *)((char *)host - offsetof(struct vmmx__policy, host));
}

static void host_log(const struct vmmx_policy_host *host, int level, const char *fmt, ...)
{
	struct vmmx__policy *pol = of_host(host);
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	vmmx__logf(&pol->ctx->conf.log, (enum vmmx_log_level)level, "policy %s: %s", pol->name,
		   msg);
	/* Kept so that a refused init can say why in vmmx_last_error(); only
	 * during init, which runs alone (under ctx->lock). */
	if (level <= VMMX_LOG_WARN && pol->in_init)
		snprintf(pol->msg, sizeof(pol->msg), "%.255s", msg);
}

static int host_device_count(const struct vmmx_policy_host *host)
{
	return of_host(host)->ctx->ndev;
}

static int host_mem_info(const struct vmmx_policy_host *host, struct vmmx_loc loc,
			 uint64_t *free_p, uint64_t *total_p)
{
	struct vmmx_ctx *ctx = of_host(host)->ctx;

	if (vmmx__slot(ctx, loc) < 0)
		return -VMMX_EINVAL;
	return vmm_mem_info(ctx->vmm, loc, free_p, total_p);
}

static int host_limit(const struct vmmx_policy_host *host, struct vmmx_loc loc, uint64_t *limit_p,
		      uint64_t *held_p)
{
	struct vmmx_ctx *ctx = of_host(host)->ctx;
	int s = vmmx__slot(ctx, loc);

	if (s < 0)
		return -VMMX_EINVAL;
	*limit_p = ctx->limit[s];
	*held_p = __atomic_load_n(&ctx->held[s], __ATOMIC_RELAXED);
	return 0;
}

static void host_counter_add(const struct vmmx_policy_host *host, const char *name,
			     uint64_t delta)
{
	struct vmmx__policy *pol = of_host(host);

	for (int i = 0; i < VMMX__POLICY_COUNTERS; i++) {
		struct vmmx__policy_counter *c = &pol->counters[i];
		char *cur = __atomic_load_n(&c->name_set, __ATOMIC_ACQUIRE) ? c->name : NULL;

		if (!cur) {
			/* Claim a free slot; a racing claimer with the same name is
			 * harmless (two slots of one name are summed by readers). */
			int expected = 0;

			if (!__atomic_compare_exchange_n(&c->claimed, &expected, 1, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				continue;
			snprintf(c->name, sizeof(c->name), "%s", name);
			__atomic_store_n(&c->name_set, 1, __ATOMIC_RELEASE);
			__atomic_fetch_add(&c->value, delta, __ATOMIC_RELAXED);
			return;
		}
		if (!strncmp(cur, name, sizeof(c->name) - 1)) {
			__atomic_fetch_add(&c->value, delta, __ATOMIC_RELAXED);
			return;
		}
	}
	/* Out of slots: dropped on purpose, the policy keeps working. */
}

/* ---- loading ---- */

struct refusals {
	char text[1024];
	size_t len;
};

static void refuse(struct vmmx_ctx *ctx, struct refusals *r, const char *path, const char *fmt,
		   ...) VMMX__FMT(4, 5);

static void refuse(struct vmmx_ctx *ctx, struct refusals *r, const char *path, const char *fmt, ...)
{
	char why[384];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO, "policy loader: refused %s: %s", path, why);
	n = snprintf(r->text + r->len, sizeof(r->text) - r->len, "%s%s: %s", r->len ? "; " : "",
		     path, why);
	if (n > 0)
		r->len = r->len + (size_t)n < sizeof(r->text) ? r->len + (size_t)n : sizeof(r->text) - 1;
}

/* Owned by root or by us: the effective user, whose rights a plugin gets. */
static bool owner_trusted(const struct stat *st)
{
	return st->st_uid == 0 || st->st_uid == geteuid();
}

/* The plugin file: owned by root or by us, and writable by no one else. */
static const char *unsafe(const struct stat *st)
{
	if (!owner_trusted(st))
		return "owned by another user";
	if (st->st_mode & (S_IWGRP | S_IWOTH))
		return "writable by group or others";
	return NULL;
}

/*
 * A directory on the way to it: owned by root or by us, and writable by no
 * one else unless sticky.  In a sticky directory (/tmp) others may add
 * entries but cannot rename or remove ours, and an entry of theirs is
 * refused by its owner when the walk reaches it.
 */
static const char *unsafe_dir(const struct stat *st)
{
	if (!owner_trusted(st))
		return "owned by another user";
	if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(st->st_mode & S_ISVTX))
		return "writable by group or others and not sticky";
	return NULL;
}

/* Check an ops table against what this library needs; NULL when acceptable. */
static const char *check_ops(const struct vmmx_policy_ops *ops, const char *name, size_t len,
			     char *why, size_t whylen)
{
	if (!ops)
		return "vmmx_policy_entry returned NULL (the policy refuses this libvmmx)";
	if (VMMX_POLICY_ABI_MAJOR_OF(ops->abi_version) != VMMX_POLICY_ABI_MAJOR) {
		snprintf(why, whylen, "ABI %u.%u, libvmmx speaks %u.x",
			 VMMX_POLICY_ABI_MAJOR_OF(ops->abi_version), ops->abi_version & 0xffff,
			 VMMX_POLICY_ABI_MAJOR);
		return why;
	}
	if (ops->size < VMMX_POLICY_SIZE_THROUGH(struct vmmx_policy_ops, place)) {
		snprintf(why, whylen, "ops table size %u is smaller than the mandatory %zu bytes",
			 ops->size, VMMX_POLICY_SIZE_THROUGH(struct vmmx_policy_ops, place));
		return why;
	}
	if (!ops->init || !ops->fini || !ops->place)
		return "a mandatory callback (init, fini or place) is NULL";
	if (!ops->name || strlen(ops->name) != len || memcmp(ops->name, name, len)) {
		snprintf(why, whylen, "it calls itself \"%s\", not \"%.*s\"",
			 ops->name ? ops->name : "(null)", (int)len, name);
		return why;
	}
	return NULL;
}

/* check_file()'s answer for a file that does not exist: not a refusal. */
static const char not_found[] = "no such file";

/* ---- the plugin files this process loaded ---- */

/*
 * A plugin is loaded through /proc/PID/fd/N (fd_name(): as /proc/self/fd/N,
 * but a name other processes can read too), N a descriptor of the file
 * that was checked.  But glibc's dlopen() first looks the name it is given
 * up among the names of the objects loaded, aliases included (the name of
 * every dlopen that found the file already loaded), and answers with that
 * object without opening anything; and a descriptor's number is reused once
 * closed.  So "/proc/PID/fd/N" must name no loaded object unless N is still
 * open on that object's file.  Each plugin file loaded (device and inode)
 * has one entry here with a descriptor of its own; every load of that file
 * goes through that descriptor's name, so no second name is ever added; and
 * the descriptor is closed only when no loaded object carries its name any
 * more (dlopen(RTLD_NOLOAD) says so: another user of the object, or
 * -z nodelete, keeps it and the entry after our last dlclose).
 *
 * plugin_lock is innermost: nothing of ours is taken under it (glibc's
 * loader lock is, and the plugins' ELF constructors and destructors run
 * under it; a plugin never calls libvmmx).  A context that
 * fork.c abandons in a child dlcloses without coming here; its entries then
 * keep their descriptors in that child, which is harmless.
 */
struct plugin_file {
	struct plugin_file *next;
	dev_t dev;
	ino_t ino;
	int fd;                 /* O_PATH, on the file; its name is the one glibc knows */
	void *dl;               /* what the last dlopen through it returned */
	unsigned long refs;     /* handles of ours not closed yet */
};

static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static struct plugin_file *plugin_files; /* plugin_lock */

static void plugin_lock_take(void)
{
	pthread_mutex_lock(&plugin_lock);
}

static void plugin_lock_drop(void)
{
	pthread_mutex_unlock(&plugin_lock);
}

/*
 * A fork while another thread loads or unloads a plugin must leave the
 * child's plugin_lock free and the list whole.  Registered when the library
 * is loaded, so before fork.c's handlers (first context creation): prepare
 * handlers run in the reverse order of registration, so this lock is taken
 * after every ctx->lock, the order a load nests them in.
 */
__attribute__((constructor)) static void plugin_atfork(void)
{
	/* Fails only without memory; a fork during a load could then leave the
	 * child unable to load a plugin, nothing worse. */
	(void)pthread_atfork(plugin_lock_take, plugin_lock_drop, plugin_lock_drop);
}

/*
 * The name descriptor @fd of this process is loaded by: /proc/PID/fd/N,
 * PID this process as /proc knows it (the target of /proc/self, read now),
 * else /proc/self/fd/N.  Not /proc/self/fd/N when /proc answers: the name
 * stays in the loader's list of objects, and a debugger, profiler or
 * symbolizer that reads that list from another process (gdb -p, perf, a
 * sanitizer's symbolizer) opens the name there, where /proc/self is that
 * process and fd N one of its own (gdb read its own pipe and hung).
 */
static void fd_name(char *name, size_t len, int fd)
{
	char pid[24];
	ssize_t n = readlink("/proc/self", pid, sizeof(pid) - 1);

	if (n > 0 && (size_t)n < sizeof(pid) - 1) {
		pid[n] = '\0';
		if (!pid[strspn(pid, "0123456789")]) {
			snprintf(name, len, "/proc/%s/fd/%d", pid, fd);
			return;
		}
	}
	snprintf(name, len, "/proc/self/fd/%d", fd);
}

/* Drop @*pp, closing its descriptor, unless a loaded object still carries its name. */
static void plugin_forget(struct plugin_file **pp)
{
	struct plugin_file *f = *pp;
	char name[48];
	void *still;

	fd_name(name, sizeof(name), f->fd);
	still = dlopen(name, RTLD_LAZY | RTLD_NOLOAD);
	if (still) {
		dlclose(still);
		return;
	}
	(void)dlerror();
	*pp = f->next;
	close(f->fd);
	free(f);
}

/*
 * dlopen the file open at @fd (checked, with @st its fstat) through
 * /proc/PID/fd (fd_name()); the handle, or NULL with the reason in @why.  Without /proc
 * (or with something else mounted there) the file is refused: loading it by
 * its path would load whatever that path names by then.
 */
static void *plugin_dlopen(int fd, const struct stat *st, char *why, size_t whylen)
{
	struct plugin_file *f, **pp;
	struct stat pst;
	char name[48];
	const char *err;
	size_t nl;
	void *dl;

	pthread_mutex_lock(&plugin_lock);
	for (pp = &plugin_files; (f = *pp); pp = &f->next)
		if (f->dev == st->st_dev && f->ino == st->st_ino)
			break;
	if (!f) {
		f = calloc(1, sizeof(*f));
		if (!f) {
			snprintf(why, whylen, "out of memory");
			goto err_unlock;
		}
		f->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
		if (f->fd < 0) {
			snprintf(why, whylen, "cannot duplicate its descriptor: %s",
				 strerror(errno));
			free(f);
			goto err_unlock;
		}
		f->dev = st->st_dev;
		f->ino = st->st_ino;
		f->next = plugin_files;
		plugin_files = f;
		pp = &plugin_files;
	}
	fd_name(name, sizeof(name), f->fd);
	if (stat(name, &pst)) {
		snprintf(why, whylen, "cannot load it through %s (is /proc mounted?): %s", name,
			 strerror(errno));
		goto err_forget;
	}
	if (pst.st_dev != st->st_dev || pst.st_ino != st->st_ino) {
		snprintf(why, whylen, "cannot load it through %s: not that file (is /proc procfs?)",
			 name);
		goto err_forget;
	}
	(void)dlerror();
	dl = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!dl) {
		/* Said of the file, not of its /proc name. */
		err = dlerror();
		nl = strlen(name);
		if (err && !strncmp(err, name, nl) && !strncmp(err + nl, ": ", 2))
			err += nl + 2;
		snprintf(why, whylen, "dlopen: %s", err ? err : "failed");
		goto err_forget;
	}
	f->dl = dl;
	f->refs++;
	pthread_mutex_unlock(&plugin_lock);
	return dl;

err_forget:
	if (!f->refs)
		plugin_forget(pp);
err_unlock:
	pthread_mutex_unlock(&plugin_lock);
	return NULL;
}

/* dlclose a handle plugin_dlopen() returned. */
static void plugin_dlclose(void *dl)
{
	struct plugin_file *f, **pp;

	pthread_mutex_lock(&plugin_lock);
	for (pp = &plugin_files; (f = *pp); pp = &f->next)
		if (f->refs && f->dl == dl)
			break;
	dlclose(dl);
	if (f && !--f->refs)
		plugin_forget(pp);
	pthread_mutex_unlock(&plugin_lock);
}

/* ---- the walk to a plugin file ---- */

/* Symbolic links followed in one path: the kernel's own limit. */
#define MAX_LINKS 40

/* @at = @at + "/" + @name, or its parent for "..": 0, or -1 when too long. */
static int at_step(char *at, size_t atlen, const char *name)
{
	size_t l = strlen(at);
	char *slash;

	if (!strcmp(name, "..")) {
		slash = strrchr(at, '/');
		if (slash == at)
			at[1] = '\0';
		else
			*slash = '\0';
		return 0;
	}
	if (snprintf(at + l, atlen - l, "%s%s", l > 1 ? "/" : "", name) >= (int)(atlen - l))
		return -1;
	return 0;
}

/* The reason a component of the walk is refused, in @why. */
static void walk_refusal(char *why, size_t whylen, const char *what, const char *at,
			 const struct stat *st, const char *bad)
{
	if (!owner_trusted(st))
		snprintf(why, whylen, "%s %.200s owned by another user (uid %u)", what, at,
			 (unsigned int)st->st_uid);
	else
		snprintf(why, whylen, "%s %.200s %s", what, at, bad);
}

/* Open "/" as the walk's start, checked; -1 with the reason in @why. */
static int walk_root(char *at, char *why, size_t whylen)
{
	struct stat st;
	const char *bad;
	int fd;

	strcpy(at, "/");
	fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(why, whylen, "directory / cannot be examined: %s", strerror(errno));
		goto err_close;
	}
	if ((bad = unsafe_dir(&st))) {
		walk_refusal(why, whylen, "directory", "/", &st, bad);
		goto err_close;
	}
	return fd;

err_close:
	if (fd >= 0)
		close(fd);
	return -1;
}

/*
 * Open the plugin file @path as it may be loaded: the path is walked from /
 * one component at a time (openat, O_PATH | O_NOFOLLOW), each step from the
 * directory the step before checked, so that what is checked is what is
 * loaded, whatever is renamed or relinked meanwhile:
 *  - every directory passed through, / included, is owned by root or by us
 *    and is not writable by group or others unless sticky;
 *  - a symbolic link on the way is owned by root or by us (its directory is
 *    checked, so only they can change it) and its target is walked the same
 *    way, from / when absolute; MAX_LINKS of them at most;
 *  - the file itself is not a symbolic link, is a regular file, owned by
 *    root or by us and writable by no one else.
 * Returns an O_PATH descriptor of the file with *st its fstat, or -1 with
 * *bad_p the reason (in @why or static; a component that fails is named by
 * its path, links resolved), or not_found when a component does not exist.
 */
static int open_checked(const char *path, struct stat *st, const char **bad_p, char *why,
			size_t whylen)
{
	char at[PATH_MAX], rest[PATH_MAX], link[PATH_MAX], name[NAME_MAX + 1];
	int dirfd, fd = -1, links = 0, err;
	const char *bad;
	char *p = rest;
	struct stat cst;
	size_t len;
	ssize_t n;

	*bad_p = why;
	if (path[0] != '/' || strlen(path) >= sizeof(rest)) {
		*bad_p = "not an absolute path shorter than PATH_MAX";
		return -1;
	}
	strcpy(rest, path);
	dirfd = walk_root(at, why, whylen);
	if (dirfd < 0)
		return -1;
	for (;;) {
		while (*p == '/')
			p++;
		len = strcspn(p, "/");
		if (len > NAME_MAX) {
			snprintf(why, whylen, "a component of %.200s is longer than NAME_MAX", at);
			goto err_close;
		}
		memcpy(name, p, len);
		name[len] = '\0';
		p += len;
		if (!p[strspn(p, "/")])
			break; /* the file */
		if (!strcmp(name, "."))
			continue;
		fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
		err = fd < 0 || fstat(fd, &cst) ? errno : 0;
		if (at_step(at, sizeof(at), name)) {
			snprintf(why, whylen, "a path in %.200s is longer than PATH_MAX", path);
			goto err_close;
		}
		if (err == ENOENT) {
			*bad_p = not_found;
			goto err_close;
		}
		if (err) {
			snprintf(why, whylen, "%.200s cannot be examined: %s", at, strerror(err));
			goto err_close;
		}
		if (S_ISLNK(cst.st_mode)) {
			if (!owner_trusted(&cst)) {
				walk_refusal(why, whylen, "symbolic link", at, &cst, NULL);
				goto err_close;
			}
			if (++links > MAX_LINKS) {
				snprintf(why, whylen, "%.200s: more than %d symbolic links", at,
					 MAX_LINKS);
				goto err_close;
			}
			n = readlinkat(fd, "", link, sizeof(link));
			if (n <= 0 || (size_t)n >= sizeof(link) ||
			    (size_t)n + strlen(p) >= sizeof(rest)) {
				snprintf(why, whylen, "symbolic link %.200s cannot be followed: %s",
					 at, n < 0 ? strerror(errno) : n ? "too long" : "empty");
				goto err_close;
			}
			close(fd);
			fd = -1;
			/* The target, then what was left after the link (p starts with '/'). */
			memmove(rest + n, p, strlen(p) + 1);
			memcpy(rest, link, (size_t)n);
			p = rest;
			at_step(at, sizeof(at), "..");
			if (rest[0] == '/') {
				close(dirfd);
				dirfd = walk_root(at, why, whylen);
				if (dirfd < 0)
					return -1;
			}
			continue;
		}
		if (!S_ISDIR(cst.st_mode)) {
			snprintf(why, whylen, "%.200s is not a directory", at);
			goto err_close;
		}
		if ((bad = unsafe_dir(&cst))) {
			walk_refusal(why, whylen, "directory", at, &cst, bad);
			goto err_close;
		}
		close(dirfd);
		dirfd = fd;
		fd = -1;
	}
	fd = openat(dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && errno == ENOENT) {
		*bad_p = not_found;
		goto err_close;
	}
	if (fd < 0 || fstat(fd, st)) {
		snprintf(why, whylen, "cannot be examined: %s", strerror(errno));
		goto err_close;
	}
	if (S_ISLNK(st->st_mode)) {
		*bad_p = "a symbolic link (the plugin file itself is never followed)";
		goto err_close;
	}
	if (!S_ISREG(st->st_mode)) {
		*bad_p = "not a regular file";
		goto err_close;
	}
	if ((bad = unsafe(st))) {
		snprintf(why, whylen, "file %s", bad);
		goto err_close;
	}
	close(dirfd);
	return fd;

err_close:
	if (fd >= 0)
		close(fd);
	close(dirfd);
	return -1;
}

/*
 * Every check of one file, shared by the loader and vmmx__policy_scan (which
 * lists what could load without loading it): NULL when the file is
 * acceptable, else the reason (in @why or static), or not_found.  Whatever
 * the answer, *dl_p is the dlopen handle when dlopen got that far (the
 * caller closes it with plugin_dlclose) and *ops_p the table
 * vmmx_policy_entry returned, if any.  Never calls the policy's init.
 */
static const char *check_file(const char *path, const char *name, size_t len, void **dl_p,
			      const struct vmmx_policy_ops **ops_p, char *why, size_t whylen)
{
	vmmx_policy_entry_fn *entry;
	const char *bad;
	struct stat st;
	int fd;

	*dl_p = NULL;
	*ops_p = NULL;
	fd = open_checked(path, &st, &bad, why, whylen);
	if (fd < 0)
		return bad;
	/* The descriptor checked is what is loaded; open until dlopen returns. */
	*dl_p = plugin_dlopen(fd, &st, why, whylen);
	close(fd);
	if (!*dl_p)
		return why;
	*(void **)&entry = dlsym(*dl_p, "vmmx_policy_entry");
	if (!entry)
		return "no vmmx_policy_entry symbol";
	*ops_p = entry(VMMX_POLICY_ABI);
	return check_ops(*ops_p, name, len, why, whylen);
}

/* Try one file; 0 with *dl_p and *ops_p set, or -1 after recording why not. */
static int try_file(struct vmmx_ctx *ctx, struct refusals *r, const char *path, const char *name,
		    size_t len, void **dl_p, const struct vmmx_policy_ops **ops_p)
{
	const struct vmmx_policy_ops *ops;
	const char *bad;
	char why[384];
	void *dl;

	bad = check_file(path, name, len, &dl, &ops, why, sizeof(why));
	if (bad) {
		if (bad != not_found)
			refuse(ctx, r, path, "%s", bad);
		if (dl)
			plugin_dlclose(dl);
		return -1;
	}
	vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO, "policy loader: loaded %s (ABI %u.%u)", path,
		   ops->abi_version >> 16, ops->abi_version & 0xffff);
	*dl_p = dl;
	*ops_p = ops;
	return 0;
}

/* Try vmmx_policy_<name>.so in @dir; 0 when loaded (@where names the file). */
static int try_dir(struct vmmx_ctx *ctx, struct refusals *r, const char *dir, const char *name,
		   size_t len, void **dl_p, const struct vmmx_policy_ops **ops_p, char *where,
		   size_t wherelen)
{
	char file[PATH_MAX];
	int n = snprintf(file, sizeof(file), "%s/vmmx_policy_%.*s.so", dir, (int)len, name);

	if (n < 0 || (size_t)n >= sizeof(file)) {
		refuse(ctx, r, dir, "path too long");
		return -1;
	}
	if (try_file(ctx, r, file, name, len, dl_p, ops_p))
		return -1;
	n = snprintf(where, wherelen, "%s", file);
	if (n < 0 || (size_t)n >= wherelen) /* a long path is shown by its end */
		snprintf(where, wherelen, "...%s", file + (size_t)n - (wherelen - 4));
	return 0;
}

/* The build tree's policies, when this library runs from it (not installed). */
static const char *build_tree_dir(void)
{
#ifdef VMMX_BUILD_POLICY_DIR
	static const char tree[] = VMMX_ABS_BUILDDIR "/";
	Dl_info info;

	char real[PATH_MAX];
	ssize_t n;

	/* The object holding this code: libvmmx.so, or a test linked statically,
	 * whose name dladdr may not give (then /proc/self/exe does). */
	if (dladdr((void *)build_tree_dir, &info) && info.dli_fname && strchr(info.dli_fname, '/') &&
	    realpath(info.dli_fname, real))
		return strncmp(real, tree, sizeof(tree) - 1) ? NULL : VMMX_BUILD_POLICY_DIR;
	n = readlink("/proc/self/exe", real, sizeof(real) - 1);
	if (n > 0) {
		real[n] = '\0';
		if (!strncmp(real, tree, sizeof(tree) - 1))
			return VMMX_BUILD_POLICY_DIR;
	}
#endif
	return NULL;
}

typedef int dir_fn(struct vmmx_ctx *ctx, void *arg, const char *dir, const char *bad);

/*
 * The search order, shared by the loader and vmmx__policy_scan: every
 * VMMX_POLICY_PATH element (a relative one comes with @bad set: it is never
 * searched), the build tree's policies when running from it, then
 * $(pkglibdir)/policies.  Stops at the first nonzero answer of @fn and
 * returns it.
 */
static int walk_dirs(struct vmmx_ctx *ctx, dir_fn *fn, void *arg)
{
	const char *path = ctx->conf.policy_path;
	const char *dirs[2];
	int ndirs = 0, ret;

	/* VMMX_POLICY_PATH first, element by element. */
	while (path && *path) {
		const char *end = strchr(path, ':');
		size_t dl = end ? (size_t)(end - path) : strlen(path);
		char dir[PATH_MAX];

		if (dl && dl < sizeof(dir)) {
			memcpy(dir, path, dl);
			dir[dl] = '\0';
			ret = fn(ctx, arg, dir,
				 dir[0] != '/' ? "VMMX_POLICY_PATH element is not absolute" : NULL);
			if (ret)
				return ret;
		}
		path = end ? end + 1 : NULL;
	}
	if ((dirs[ndirs] = build_tree_dir()))
		ndirs++;
	dirs[ndirs++] = VMMX_POLICY_DIR;
	for (int i = 0; i < ndirs; i++)
		if ((ret = fn(ctx, arg, dirs[i], NULL)))
			return ret;
	return 0;
}

struct load_state {
	struct refusals r;
	const char *name;
	size_t len;
	void **dl_p;
	const struct vmmx_policy_ops **ops_p;
	char *where;
	size_t wherelen;
	char searched[512];     /* the directories looked in, for "not found" */
};

/* walk_dirs callback of load(): 1 once loaded, which ends the walk. */
static int load_dir(struct vmmx_ctx *ctx, void *arg, const char *dir, const char *bad)
{
	struct load_state *s = arg;
	size_t l = strlen(s->searched);

	if (bad) {
		refuse(ctx, &s->r, dir, "%s", bad);
		return 0;
	}
	snprintf(s->searched + l, sizeof(s->searched) - l, "%s%s", l ? ", " : "", dir);
	return !try_dir(ctx, &s->r, dir, s->name, s->len, s->dl_p, s->ops_p, s->where,
			s->wherelen);
}

/* Find and load @name: plugins first, then the built-ins. */
static int load(struct vmmx_ctx *ctx, const char *name, size_t len, void **dl_p,
		const struct vmmx_policy_ops **ops_p, char *where, size_t wherelen)
{
	struct load_state s = {
		.r = { "", 0 }, .name = name, .len = len, .dl_p = dl_p, .ops_p = ops_p,
		.where = where, .wherelen = wherelen,
	};
	struct refusals *r = &s.r;

	if (walk_dirs(ctx, load_dir, &s))
		return 0;
	for (size_t i = 0; i < sizeof(builtins) / sizeof(builtins[0]); i++) {
		if (strlen(builtins[i].name) != len || memcmp(builtins[i].name, name, len))
			continue;
		*dl_p = NULL;
		*ops_p = builtins[i].entry(VMMX_POLICY_ABI);
		snprintf(where, wherelen, "built-in");
		vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO, "policy loader: using built-in %.*s%s",
			   (int)len, name, r->len ? " (plugin files refused)" : "");
		return 0;
	}
	if (r->len)
		return vmmx__fail(&ctx->conf.log, -VMMX_EPOLICY, "policy \"%.*s\" not loaded: %s",
				  (int)len, name, r->text);
	return vmmx__fail(&ctx->conf.log, -VMMX_ENOENT,
			  "policy \"%.*s\" not found (no vmmx_policy_%.*s.so in %s; built-in: %s)",
			  (int)len, name, (int)len, name, s.searched, vmmx__policy_builtin_names());
}

/* ---- listing what could load (vmmx_policy_list) ---- */

#define FILE_PREFIX "vmmx_policy_"
#define FILE_SUFFIX ".so"

/* The policy name in a file name vmmx_policy_<name>.so (0 when it is none). */
static size_t file_policy_name(const char *file)
{
	size_t n = strlen(file), pre = sizeof(FILE_PREFIX) - 1, suf = sizeof(FILE_SUFFIX) - 1;
	char name[VMMX__POLICY_NAME_MAX + 1];
	size_t len;

	if (n <= pre + suf || strncmp(file, FILE_PREFIX, pre) || strcmp(file + n - suf, FILE_SUFFIX))
		return 0;
	len = n - pre - suf;
	if (len > VMMX__POLICY_NAME_MAX)
		return 0;
	/* Names the loader could never be asked for (a spec's name) are not policies. */
	memcpy(name, file + pre, len);
	name[len] = '\0';
	if (vmmx__policy_spec_check(name, &len) || len != n - pre - suf)
		return 0;
	return len;
}

static int is_policy_file(const struct dirent *d)
{
	return file_policy_name(d->d_name) != 0;
}

struct scan_state {
	vmmx__policy_scan_fn *fn;
	void *arg;
};

/* walk_dirs callback of vmmx__policy_scan: every policy file of @dir, by name. */
static int scan_dir(struct vmmx_ctx *ctx, void *arg, const char *dir, const char *bad)
{
	struct scan_state *s = arg;
	struct dirent **list;
	int n, ret = 0;

	if (bad) {
		vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO, "policy list: skipped %s: %s", dir, bad);
		return 0;
	}
	n = scandir(dir, &list, is_policy_file, alphasort);
	if (n < 0) {
		if (errno == ENOMEM)
			return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM,
					  "policy list: %s: out of memory", dir);
		/* A directory that is missing or unreadable holds nothing to load. */
		vmmx__logf(&ctx->conf.log, VMMX_LOG_DEBUG, "policy list: %s: %s", dir,
			   strerror(errno));
		return 0;
	}
	for (int i = 0; i < n; i++) {
		const char *file = list[i]->d_name;
		size_t len = file_policy_name(file);
		struct vmmx__policy_file f;
		const struct vmmx_policy_ops *ops;
		char path[PATH_MAX], name[VMMX__POLICY_NAME_MAX + 1], why[384];
		const char *why_not;
		void *dl;

		if (ret)
			goto next;
		snprintf(name, sizeof(name), "%.*s", (int)len, file + sizeof(FILE_PREFIX) - 1);
		if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path)) {
			vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO, "policy list: refused %s/%s: %s",
				   dir, file, "path too long");
			goto next;
		}
		why_not = check_file(path, name, len, &dl, &ops, why, sizeof(why));
		if (why_not == not_found) /* gone since scandir saw it */
			goto next;
		if (why_not)
			vmmx__logf(&ctx->conf.log, VMMX_LOG_INFO, "policy list: refused %s: %s", path,
				   why_not);
		f = (struct vmmx__policy_file){
			.name = name, .path = path, .ops = ops, .why = why_not,
		};
		ret = s->fn(s->arg, &f);
		if (dl)
			plugin_dlclose(dl);
next:
		free(list[i]);
	}
	free(list);
	return ret;
}

int vmmx__policy_scan(struct vmmx_ctx *ctx, vmmx__policy_scan_fn *fn, void *arg)
{
	struct scan_state s = { fn, arg };
	int ret = walk_dirs(ctx, scan_dir, &s);

	for (size_t i = 0; !ret && i < sizeof(builtins) / sizeof(builtins[0]); i++) {
		struct vmmx__policy_file f = {
			.name = builtins[i].name,
			.path = "built-in",
			.ops = builtins[i].entry(VMMX_POLICY_ABI),
			.why = NULL,
		};

		ret = fn(arg, &f);
	}
	return ret;
}

int vmmx__policy_get(struct vmmx_ctx *ctx, const char *spec, struct vmmx__policy **pol_p)
{
	struct vmmx__policy *pol;
	const char *args;
	size_t len;
	int err;

	if (vmmx__policy_spec_check(spec, &len))
		return vmmx__fail(&ctx->conf.log, -VMMX_EINVAL,
				  "policy spec \"%s\": expected name[:key=value,...] with a name of "
				  "a-z, 0-9, '-' and '_'",
				  spec);
	/* Loading and init run under the lock: one instance per spec, even when
	 * two threads ask at once; it only happens on a buffer's creation. */
	pthread_mutex_lock(&ctx->lock);
	for (pol = ctx->policies; pol; pol = pol->next) {
		if (!strcmp(pol->spec, spec)) {
			pol->refs++;
			pthread_mutex_unlock(&ctx->lock);
			*pol_p = pol;
			return 0;
		}
	}
	pol = calloc(1, sizeof(*pol));
	if (!pol) {
		pthread_mutex_unlock(&ctx->lock);
		return vmmx__fail(&ctx->conf.log, -VMMX_ENOMEM, "policy %s: out of memory", spec);
	}
	pol->ctx = ctx;
	snprintf(pol->spec, sizeof(pol->spec), "%s", spec);
	snprintf(pol->name, sizeof(pol->name), "%.*s", (int)len, spec);
	err = load(ctx, spec, len, &pol->dl, &pol->ops, pol->where, sizeof(pol->where));
	if (err)
		goto err_free;
	pol->host = (struct vmmx_policy_host){
		.abi_version = VMMX_POLICY_ABI,
		.size = sizeof(struct vmmx_policy_host),
		.policy_name = pol->name,
		.device = ctx->device,
		.log = host_log,
		.device_count = host_device_count,
		.mem_info = host_mem_info,
		.limit = host_limit,
		.parse_size = vmmx_parse_size,
		.counter_add = host_counter_add,
	};
	args = spec[len] == ':' ? spec + len + 1 : "";
	vmmx__clear_last_error();
	pol->in_init = true;
	err = pol->ops->init(&pol->host, args, &pol->state);
	pol->in_init = false;
	if (err) {
		err = vmmx__fail(&ctx->conf.log, err > 0 ? -err : err,
				 "policy %s (%s): init refused the arguments \"%s\"%s%s", pol->name,
				 pol->where, args, pol->msg[0] ? ": " : "", pol->msg);
		goto err_dl;
	}
	pol->refs = 1;
	pol->next = ctx->policies;
	rcu_assign_pointer(ctx->policies, pol);
	pthread_mutex_unlock(&ctx->lock);
	*pol_p = pol;
	return 0;

err_dl:
	if (pol->dl)
		plugin_dlclose(pol->dl);
err_free:
	pthread_mutex_unlock(&ctx->lock);
	free(pol);
	return err;
}

void vmmx__policy_put(struct vmmx_ctx *ctx, struct vmmx__policy *pol)
{
	struct vmmx__policy **pp;

	if (!pol)
		return;
	pthread_mutex_lock(&ctx->lock);
	if (--pol->refs) {
		pthread_mutex_unlock(&ctx->lock);
		return;
	}
	for (pp = &ctx->policies; *pp && *pp != pol; pp = &(*pp)->next)
		;
	if (*pp)
		rcu_assign_pointer(*pp, pol->next);
	pthread_mutex_unlock(&ctx->lock);
	/* Readers (stats) may still walk this instance: let them finish before
	 * its code and memory go. */
	urcu_bp_synchronize_rcu();
	pol->ops->fini(pol->state);
	if (pol->dl)
		plugin_dlclose(pol->dl);
	free(pol);
}

void vmmx__policy_buf_event(struct vmmx__policy *pol, uint64_t id, size_t capacity, int created)
{
	if (pol->ops->size >= VMMX_POLICY_SIZE_THROUGH(struct vmmx_policy_ops, buf_event) &&
	    pol->ops->buf_event)
		pol->ops->buf_event(pol->state, id, capacity, created);
}

void vmmx__policy_abandon(struct vmmx_ctx *ctx)
{
	struct vmmx__policy *pol;

	/*
	 * A plugin's fini may take a lock a thread of the parent held at the
	 * fork, and its state may point at the parent's driver objects: it is
	 * not called.  What the plugin allocated stays allocated; the plugin
	 * itself is unloaded.
	 */
	while ((pol = ctx->policies)) {
		ctx->policies = pol->next;
		if (pol->dl)
			dlclose(pol->dl);
		free(pol);
	}
}

/* ---- what the library tells a policy ---- */

void vmmx__policy_chunk_event(struct vmmx_buf *buf, const struct vmmx__chunk *c, int event)
{
	struct vmmx__policy *pol = buf->policy;
	struct vmmx_policy_chunk pc;

	if (!VMMX__POLICY_HAS(pol, chunk_event))
		return;
	pc = (struct vmmx_policy_chunk){ .buf_id = buf->id, .offset = c->off, .size = c->size,
					 .loc = c->loc };
	pol->ops->chunk_event(pol->state, &pc, event);
}

bool vmmx__policy_can_evict(const struct vmmx__policy *pol)
{
	return VMMX__POLICY_HAS(pol, evict);
}

void vmmx__policy_advise(struct vmmx__policy *pol, uint64_t buf_id, size_t off, size_t len,
			 int advice)
{
	if (VMMX__POLICY_HAS(pol, advise))
		pol->ops->advise(pol->state, buf_id, off, len, advice);
}
