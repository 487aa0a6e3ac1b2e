// SPDX-License-Identifier: MIT
/*
 * loader.c - the policy loader end to end, with the fake plugins of
 * tests/policies/fake.c found through VMMX_POLICY_PATH in the build tree:
 * a valid plugin loads, is shared by buffers of one spec and unloaded with
 * the last one; every malformed plugin is refused with -VMMX_EPOLICY and a
 * message naming the file and the reason, also in the info log; unsafe
 * permissions, relative and empty path elements, files that are not shared
 * objects, a refused init and an unknown name each get their answer; with
 * no VMMX_POLICY_PATH at all the shipped plugins come from the build tree.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "vmmx.h"
#include "vmmx/policy.h"
#include "tests/tap/basic.h"
#include "tests/tap/json.h"
#include "tests/tap/vmmx_test.h"

/* Sized so that every path built from another fits (no truncation). */
static char fakedir[2304];      /* where the fake plugins are */

static void find_build_tree(void)
{
	snprintf(fakedir, sizeof(fakedir), "%s/tests/policies/.libs", test_build_tree());
}

/* The instance of @spec in the statistics' policy list, and how many there are. */
static const struct json *find_policy(const struct json *st, const char *spec, int *count)
{
	const struct json *pols = json_get(st, "policies"), *found = NULL;
	int n = 0;

	for (size_t i = 0; i < json_len(pols); i++) {
		const char *s = json_str(json_get(json_index(pols, i), "spec"));

		if (s && !strcmp(s, spec)) {
			found = json_index(pols, i);
			n++;
		}
	}
	if (count)
		*count = n;
	return found;
}

static int policy_count(struct vmmx_ctx *ctx, const char *spec)
{
	struct json *st = test_stats_json(ctx);
	int n;

	find_policy(st, spec, &n);
	json_free(st);
	return n;
}

static uint64_t counter(const struct json *pol, const char *name)
{
	return json_u64(json_get(json_get(pol, "counters"), name));
}

struct refusal {
	const char *name;
	const char *reason;
};

static const struct refusal refusals[] = {
	{ "fake_major", "ABI 2.0, libvmmx speaks 1.x" },
	{ "fake_small", NULL }, /* the sizes are computed: see main() */
	{ "fake_noentry", "no vmmx_policy_entry symbol" },
	{ "fake_nocb", "a mandatory callback (init, fini or place) is NULL" },
	{ "fake_name", "it calls itself \"not_fake_name\", not \"fake_name\"" },
	{ "fake_null", "vmmx_policy_entry returned NULL" },
};

#define NREFUSALS (sizeof(refusals) / sizeof(refusals[0]))

int main(void)
{
	char pathvar[2816], okfile[2560], file[2560], msg[4096], small[160];
	char tmpdir[] = "/tmp/vmmx-loader-XXXXXX", tmpfile[256], junk[256];
	const char *vars[4] = { pathvar, "VMMX_CHUNK_MAX=2MiB", NULL, NULL };
	struct vmmx_chunk_info c[8];
	struct vmmx_residency r;
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf, *buf2, *buf3;
	const struct json *pol;
	struct json *st;
	size_t n;
	int count, on_host;

	find_build_tree();
	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", fakedir);
	snprintf(okfile, sizeof(okfile), "%s/vmmx_policy_fake_ok.so", fakedir);
	if (access(okfile, R_OK))
		bail("%s is missing: build the check libraries first (make check)", okfile);

	plan(108);

	/* ---- a valid plugin ---- */
	ctx = test_ctx(vars);
	test_log_clear();
	is_err(0, vmmx_buf_create(ctx, 16 * MiB, "fake_ok", &buf),
	       "vmmx_buf_create loads fake_ok from VMMX_POLICY_PATH");
	snprintf(msg, sizeof(msg), "policy loader: loaded %s (ABI %d.%d)", okfile,
		 VMMX_POLICY_ABI_MAJOR, VMMX_POLICY_ABI_MINOR);
	like(test_log(), msg, "vmmx_buf_create: the info log names the file it loaded");
	is_err(0, vmmx_buf_resize(buf, 8 * MiB), "vmmx_buf_resize under fake_ok");
	is_err(0, vmmx_buf_residency(buf, 0, 8 * MiB, &r), "vmmx_buf_residency");
	ok(r.host == 8 * MiB && r.device == 0,
	   "vmmx_buf_residency: fake_ok's ranking (host only) was followed (device %zu, host %zu)",
	   r.device, r.host);
	is_err(0, vmmx_buf_chunks(buf, c, 8, &n), "vmmx_buf_chunks");
	on_host = 0;
	for (size_t i = 0; i < n && i < 8; i++)
		on_host += c[i].loc.kind == VMMX_LOC_HOST;
	ok(n == 4 && on_host == 4, "vmmx_buf_chunks: four 2 MiB chunks, all on host (%zu chunks)",
	   n);
	is_err(0, test_fill(ctx, vmmx_buf_ptr(buf), 0, 8 * MiB, 11),
	       "vmmx_memcpy writes the buffer");
	is_uint(SIZE_MAX, test_check(ctx, vmmx_buf_ptr(buf), 0, 8 * MiB, 11),
		"vmmx_memcpy reads the data back");

	st = test_stats_json(ctx);
	pol = find_policy(st, "fake_ok", &count);
	is_int(1, count, "vmmx_stats_json lists fake_ok once");
	is_string(okfile, json_str(json_get(pol, "source")),
		  "vmmx_stats_json: fake_ok's source is the file it came from");
	is_uint(1, counter(pol, "inits"), "vmmx_stats_json: host->counter_add from init is shown");
	is_uint(4, counter(pol, "places"), "vmmx_stats_json: one place() call per chunk");
	is_uint(1, counter(pol, "created"), "vmmx_stats_json: buf_event(created) was called once");
	ok(json_get(json_get(pol, "counters"), "destroyed") == NULL,
	   "vmmx_stats_json: no buf_event(destroyed) yet");
	json_free(st);

	/* One instance per spec: a second buffer shares it, without loading again. */
	test_log_clear();
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf2),
	       "vmmx_buf_create: a second buffer of spec fake_ok");
	ok(!strstr(test_log(), "policy loader"), "vmmx_buf_create: the loader did not run again");
	st = test_stats_json(ctx);
	pol = find_policy(st, "fake_ok", &count);
	is_int(1, count, "vmmx_stats_json: the two buffers share one instance");
	is_uint(1, counter(pol, "inits"), "vmmx_buf_create: init was not called again");
	is_uint(2, counter(pol, "created"),
		"vmmx_buf_create: buf_event(created) for the second buffer");
	json_free(st);
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, "fake_ok:mode=other", &buf3),
	       "vmmx_buf_create: a buffer of spec fake_ok:mode=other");
	is_int(1, policy_count(ctx, "fake_ok:mode=other"),
	       "vmmx_stats_json: another spec is another instance");
	vmmx_buf_destroy(buf3);
	is_int(0, policy_count(ctx, "fake_ok:mode=other"),
	       "vmmx_buf_destroy: that instance went with its only buffer");
	/* Arguments are the policy's free text: quotes and control bytes must not
	 * break vmmx_stats_json. */
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, "fake_ok:note=\"a\tb\"", &buf3),
	       "vmmx_buf_create: a spec whose arguments hold quotes and a tab");
	{
		static char text[65536];
		const char *err = "";
		struct json *j = NULL;

		if (!vmmx_stats_json(ctx, text, sizeof(text), NULL))
			j = json_parse(text, &err);
		if (!j)
			diag("LIBRARY BUG (lib/stats.c vmmx_stats_json): the policy spec is copied "
			     "with only '\"' and '\\' replaced, so a control byte in the arguments "
			     "makes the output invalid JSON (%s)", err);
		ok(j != NULL, "vmmx_stats_json is still JSON with a tab in a policy spec");
		json_free(j);
	}
	vmmx_buf_destroy(buf3);
	vmmx_buf_destroy(buf2);
	st = test_stats_json(ctx);
	pol = find_policy(st, "fake_ok", &count);
	is_int(1, count, "vmmx_buf_destroy of one sharer keeps the instance");
	is_uint(1, counter(pol, "destroyed"), "vmmx_buf_destroy: buf_event(destroyed) was called");
	json_free(st);
	vmmx_buf_destroy(buf);
	is_int(0, policy_count(ctx, "fake_ok"),
	       "vmmx_buf_destroy of the last buffer unloads the instance");
	is_int(1, policy_count(ctx, "device-first"),
	       "vmmx_stats_json still lists the context's default policy");

	/* ---- malformed plugins: refused, explained, and nothing else harmed ---- */
	for (size_t i = 0; i < NREFUSALS; i++) {
		struct refusal rf_ = refusals[i], *rf = &rf_;

		if (!rf->reason) {
			snprintf(small, sizeof(small),
				 "ops table size %zu is smaller than the mandatory %zu bytes",
				 offsetof(struct vmmx_policy_ops, place),
				 VMMX_POLICY_SIZE_THROUGH(struct vmmx_policy_ops, place));
			rf->reason = small;
		}

		snprintf(file, sizeof(file), "%s/vmmx_policy_%s.so", fakedir, rf->name);
		test_log_clear();
		buf = NULL;
		is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, rf->name, &buf),
		       "vmmx_buf_create refuses %s", rf->name);
		snprintf(msg, sizeof(msg), "%s", vmmx_last_error());
		like(msg, file, "vmmx_last_error names the refused file (%s)", rf->name);
		like(msg, rf->reason, "vmmx_last_error gives the reason (%s)", rf->name);
		snprintf(msg, sizeof(msg), "policy loader: refused %s: %s", file, rf->reason);
		like(test_log(), msg, "vmmx_buf_create: the info log explains the refusal of %s",
		     rf->name);
		ok(buf == NULL, "vmmx_buf_create leaves buf_p alone on refusal (%s)", rf->name);
	}
	st = test_stats_json(ctx);
	count = (int)json_len(json_get(st, "policies"));
	is_int(1, count, "vmmx_stats_json: no refused policy left an instance behind");
	json_free(st);
	is_err(0, vmmx_buf_create(ctx, 8 * MiB, "device-first", &buf),
	       "vmmx_buf_create with a built-in policy still works after the refusals");
	is_err(0, vmmx_buf_resize(buf, 4 * MiB), "vmmx_buf_resize still works after the refusals");
	vmmx_buf_destroy(buf);

	/* ---- init refuses ---- */
	test_log_clear();
	is_err(-VMMX_EINVAL, vmmx_buf_create(ctx, 4 * MiB, "fake_initfail:x=1", &buf),
	       "vmmx_buf_create: fake_initfail's init error is returned");
	snprintf(msg, sizeof(msg), "%s", vmmx_last_error());
	like(msg, "fake_initfail refuses every instance (args \"x=1\")",
	     "vmmx_last_error carries the message init logged");
	like(msg, "vmmx_policy_fake_initfail.so", "vmmx_last_error names the file of the policy");
	like(test_log(), "policy fake_initfail: fake_initfail refuses",
	     "host->log writes to the context's log with the policy's name");
	is_int(0, policy_count(ctx, "fake_initfail:x=1"),
	       "vmmx_stats_json: a refused init leaves no instance");

	/* ---- no such policy ---- */
	is_err(-VMMX_ENOENT, vmmx_buf_create(ctx, 4 * MiB, "nosuch", &buf),
	       "vmmx_buf_create of an unknown policy: ENOENT");
	snprintf(msg, sizeof(msg), "%s", vmmx_last_error());
	like(msg, "vmmx_policy_nosuch.so", "vmmx_last_error names the file it looked for");
	like(msg, "libvmmx/policies", "vmmx_last_error names the installed policy directory");
	like(msg, "built-in: device-first, device, host", "vmmx_last_error lists the built-ins");
	if (!strstr(msg, fakedir))
		diag("LIBRARY BUG (lib/policy.c load()): the ENOENT message says "
		     "\"VMMX_POLICY_PATH\" "
		     "but not the directories searched (%s, nor the build tree's policies/.libs)",
		     fakedir);
	like(msg, fakedir, "vmmx_last_error names the VMMX_POLICY_PATH directory it searched");
	vmmx_ctx_destroy(ctx);

	/* ---- relative and empty path elements ---- */
	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=tests/policies/.libs");
	ctx = test_ctx(vars);
	test_log_clear();
	is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf),
	       "vmmx_buf_create: a relative VMMX_POLICY_PATH element is not searched");
	like(vmmx_last_error(), "tests/policies/.libs: VMMX_POLICY_PATH element is not absolute",
	     "vmmx_last_error says the element is not absolute");
	like(test_log(), "refused tests/policies/.libs: VMMX_POLICY_PATH element is not absolute",
	     "vmmx_buf_create: the info log explains it");
	vmmx_ctx_destroy(ctx);

	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=relative:%s", fakedir);
	ctx = test_ctx(vars);
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf),
	       "vmmx_buf_create: the absolute element after a relative one is searched");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);

	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=::%s::", fakedir);
	ctx = test_ctx(vars);
	test_log_clear();
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf),
	       "vmmx_buf_create: empty VMMX_POLICY_PATH elements are ignored");
	ok(!strstr(test_log(), "refused"), "vmmx_buf_create: no refusal for the empty elements");
	st = test_stats_json(ctx);
	is_string(okfile, json_str(json_get(find_policy(st, "fake_ok", NULL), "source")),
		  "vmmx_stats_json: the source path has no stray separator");
	json_free(st);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);

	/* ---- permissions of the file and its directory ---- */
	if (!mkdtemp(tmpdir))
		bail("mkdtemp: %s", strerror(errno));
	snprintf(tmpfile, sizeof(tmpfile), "%s/vmmx_policy_fake_ok.so", tmpdir);
	snprintf(junk, sizeof(junk), "%s/vmmx_policy_junk.so", tmpdir);
	test_copy_file(okfile, tmpfile, 0664);
	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", tmpdir);
	ctx = test_ctx(vars);
	test_log_clear();
	is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf),
	       "vmmx_buf_create refuses a plugin file writable by its group");
	like(vmmx_last_error(), "file writable by group or others", "vmmx_last_error says why");
	like(vmmx_last_error(), tmpfile, "vmmx_last_error names the file");
	like(test_log(), "writable by group or others", "vmmx_buf_create: the info log says why");
	{
		/* The search goes on past a refused file: the next directory's copy loads. */
		struct vmmx_ctx *ctx2;

		snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s:%s", tmpdir, fakedir);
		ctx2 = test_ctx(vars);
		test_log_clear();
		is_err(0, vmmx_buf_create(ctx2, 4 * MiB, "fake_ok", &buf),
		       "vmmx_buf_create: a refused file does not stop the search");
		st = test_stats_json(ctx2);
		is_string(okfile, json_str(json_get(find_policy(st, "fake_ok", NULL), "source")),
			  "vmmx_stats_json: the copy in the next directory was loaded");
		json_free(st);
		like(test_log(), tmpfile,
		     "vmmx_buf_create: the info log still explains the refusal");
		vmmx_buf_destroy(buf);
		vmmx_ctx_destroy(ctx2);
		snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", tmpdir);
	}
	chmod(tmpfile, 0644);
	chmod(tmpdir, 0707);
	is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf),
	       "vmmx_buf_create refuses a plugin in a directory writable by others");
	snprintf(msg, sizeof(msg), "directory %s writable by group or others", tmpdir);
	like(vmmx_last_error(), msg, "vmmx_last_error names the directory and says why");
	chmod(tmpdir, 0700);
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf),
	       "vmmx_buf_create loads the same file once the permissions are safe");
	st = test_stats_json(ctx);
	is_string(tmpfile, json_str(json_get(find_policy(st, "fake_ok", NULL), "source")),
		  "vmmx_stats_json: the source is the copy in the temporary directory");
	json_free(st);
	vmmx_buf_destroy(buf);

	/* The plugin file itself is never a symbolic link (links to directories on the way are
	 * followed and checked: tests/policies/loader_path.c). */
	snprintf(file, sizeof(file), "%s/real.so", tmpdir);
	if (rename(tmpfile, file) || symlink(file, tmpfile))
		bail("rename/symlink in %s: %s", tmpdir, strerror(errno));
	is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, "fake_ok", &buf),
	       "vmmx_buf_create refuses a plugin that is a symbolic link");
	like(vmmx_last_error(), "a symbolic link (the plugin file itself is never followed)",
	     "vmmx_last_error says it is a symbolic link, not followed");

	/* Named right, but not a shared object. */
	{
		int fd = open(junk, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

		if (fd < 0 || write(fd, "not an ELF object\n", 18) != 18)
			bail("write %s: %s", junk, strerror(errno));
		close(fd);
	}
	test_log_clear();
	is_err(-VMMX_EPOLICY, vmmx_buf_create(ctx, 4 * MiB, "junk", &buf),
	       "vmmx_buf_create refuses a file that is not a shared object");
	snprintf(msg, sizeof(msg), "%s: dlopen: ", junk);
	like(vmmx_last_error(), msg, "vmmx_last_error gives dlopen's message for the file");
	like(test_log(), "dlopen: ", "vmmx_buf_create: the info log gives dlopen's message");
	vmmx_ctx_destroy(ctx);
	unlink(junk);
	unlink(tmpfile);
	unlink(file);
	rmdir(tmpdir);

	/* ---- a plugin as the context's default policy ---- */
	snprintf(pathvar, sizeof(pathvar), "VMMX_POLICY_PATH=%s", fakedir);
	vars[2] = "VMMX_POLICY=fake_ok";
	ctx = test_ctx(vars);
	vars[2] = NULL;
	{
		struct vmmx_ctx_info info = { .size = sizeof(info) };

		is_err(0, vmmx_ctx_query(ctx, &info), "vmmx_ctx_query");
		is_string("fake_ok", info.policy, "vmmx_ctx_query: the default policy is fake_ok");
		is_string(okfile, info.policy_source, "vmmx_ctx_query: policy_source is its file");
	}
	is_err(0, vmmx_buf_create(ctx, 4 * MiB, NULL, &buf),
	       "vmmx_buf_create with the default policy (a plugin)");
	is_err(0, vmmx_buf_resize(buf, 2 * MiB), "vmmx_buf_resize under the default plugin");
	is_err(0, vmmx_buf_residency(buf, 0, 2 * MiB, &r), "vmmx_buf_residency");
	is_uint(2 * MiB, r.host, "vmmx_buf_resize: the default plugin placed the chunk (host)");
	is_int(1, policy_count(ctx, "fake_ok"),
	       "vmmx_stats_json: the buffer shares the context's instance");
	vmmx_buf_destroy(buf);
	is_int(1, policy_count(ctx, "fake_ok"),
	       "vmmx_buf_destroy: the context's default policy stays loaded");
	vmmx_ctx_destroy(ctx);

	/* ---- no VMMX_POLICY_PATH: the shipped plugins from the build tree ---- */
	ctx = test_ctx(NULL);
	test_log_clear();
	is_err(0, vmmx_buf_create(ctx, 8 * MiB, "interleave", &buf),
	       "vmmx_buf_create finds interleave with no VMMX_POLICY_PATH");
	st = test_stats_json(ctx);
	{
		const char *src = json_str(json_get(find_policy(st, "interleave", NULL), "source"));
		const char *tail = "/policies/.libs/vmmx_policy_interleave.so";
		size_t sl = src ? strlen(src) : 0, tl = strlen(tail);

		ok(src && sl > tl && !strcmp(src + sl - tl, tail),
		   "vmmx_stats_json: interleave came from the build tree's policies/.libs (%s)",
		   src ? src : "(none)");
		ok(src && !strncmp(src, test_build_tree(), strlen(test_build_tree())),
		   "vmmx_stats_json: ... of this build tree (%s)", test_build_tree());
	}
	json_free(st);
	is_err(0, vmmx_buf_resize(buf, 8 * MiB), "vmmx_buf_resize under the shipped interleave");
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
