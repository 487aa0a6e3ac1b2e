// SPDX-License-Identifier: MIT
/*
 * longrun.c - a long-lived process: create and destroy contexts, buffers
 * and policy loads over and over on sim, and show that nothing
 * accumulates: resident memory, open file descriptors, loaded objects
 * (dl_iterate_phdr) and mappings of the policy plugin (/proc/self/maps) are
 * the same at the end as after a warm-up.
 *
 * Bounded time: each of the three loops runs LONGRUN_ITERS times (default
 * 100000) or until its share of LONGRUN_SECONDS (default 6) is spent,
 * whichever comes first, and says how many it did.  `make check` keeps the
 * default; CI and a person who wants the full count raise the time.  RSS is
 * not compared under AddressSanitizer, whose quarantine holds freed memory
 * on purpose (LeakSanitizer checks leaks there instead).
 */
#include "config.h"

#include <dirent.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

#if defined(__SANITIZE_ADDRESS__)
#define ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ASAN 1
#endif
#endif

/* Growth of resident memory tolerated between the warm-up and the end:
 * malloc's arenas and the kernel's page accounting move by a few pages. */
#define RSS_SLACK (2 * MiB)
#define WARMUP	  200

struct sample {
	long rss; /* bytes */
	int fds;
	int objects;	 /* loaded ELF objects */
	int plugin_maps; /* mappings of vmmx_policy_interleave.so */
};

static int count_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	(*(int *)arg)++;
	return 0;
}

static struct sample sample(void)
{
	struct sample s = { 0 };
	char line[4096];
	long pages = 0, resident = 0;
	struct dirent *e;
	FILE *f;
	DIR *d;

	f = fopen("/proc/self/statm", "r");
	if (f && fscanf(f, "%ld %ld", &pages, &resident) == 2)
		s.rss = resident * sysconf(_SC_PAGESIZE);
	if (f)
		fclose(f);
	d = opendir("/proc/self/fd");
	while (d && (e = readdir(d)))
		if (e->d_name[0] != '.')
			s.fds++;
	if (d)
		closedir(d);
	s.fds--; /* the directory stream's own descriptor */
	dl_iterate_phdr(count_object, &s.objects);
	f = fopen("/proc/self/maps", "r");
	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "vmmx_policy_interleave"))
			s.plugin_maps++;
	if (f)
		fclose(f);
	return s;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

enum loop { CONTEXTS, BUFFERS, POLICIES };
static const char *const loop_names[] = { "contexts", "buffers", "policy loads" };

static struct vmmx_ctx *shared_ctx;

/* One round of a loop; false on failure (described by diag). */
static bool round_of(enum loop l, unsigned long i)
{
	struct vmmx_ctx *ctx = shared_ctx;
	struct vmmx_buf *buf;
	unsigned char b[64];
	const char *spec = l == POLICIES ? "interleave:device=1,host=1" : NULL;

	if (l == CONTEXTS && test_ctx_try(NULL, &ctx)) {
		diag("context %lu: %s", i, vmmx_last_error());
		return false;
	}
	if (vmmx_buf_create(ctx, 8 * MiB, spec, &buf) || vmmx_buf_resize(buf, 4 * MiB) ||
	    vmmx_memset(ctx, (char *)vmmx_buf_ptr(buf) + 3 * MiB, (int)(i & 0xff), 4096) ||
	    vmmx_memcpy(ctx, b, (char *)vmmx_buf_ptr(buf) + 3 * MiB, sizeof(b)) ||
	    b[63] != (unsigned char)i) {
		diag("%s round %lu: %s", loop_names[l], i, vmmx_last_error());
		return false;
	}
	vmmx_buf_destroy(buf);
	if (l == CONTEXTS)
		vmmx_ctx_destroy(ctx);
	return true;
}

int main(void)
{
	const char *e = getenv("LONGRUN_ITERS");
	unsigned long iters = e ? strtoul(e, NULL, 0) : 100000;
	double budget = getenv("LONGRUN_SECONDS") ? atof(getenv("LONGRUN_SECONDS")) : 6;
	static const char *const vars[] = { "VMMX_CACHE_LIMIT=0", NULL };

	plan(3 * 6);
	shared_ctx = test_ctx(vars);
	for (int l = CONTEXTS; l <= POLICIES; l++) {
		struct sample before, after;
		unsigned long i, done = 0;
		double t0, deadline;
		bool good = true;

		for (i = 0; i < WARMUP && good; i++)
			good = round_of((enum loop)l, i);
		before = sample();
		t0 = now();
		deadline = t0 + budget / 3;
		for (i = 0; i < iters && good; i++) {
			good = round_of((enum loop)l, i);
			done++;
			if (!(i & 63) && now() > deadline)
				break;
		}
		after = sample();
		ok(good, "%s: %lu created and destroyed in %.1f s (%.0f/s)%s", loop_names[l], done,
		   now() - t0, (double)done / (now() - t0),
		   done < iters ? ", stopped by the time bound" : "");
#ifdef ASAN
		skip("RSS under AddressSanitizer: its quarantine keeps freed memory");
#else
		ok(after.rss <= before.rss + (long)RSS_SLACK,
		   "%s: resident memory constant (%ld KiB after warm-up, %ld KiB at the end)",
		   loop_names[l], before.rss / 1024, after.rss / 1024);
#endif
		is_int(before.fds, after.fds, "%s: file descriptors constant", loop_names[l]);
		is_int(before.objects, after.objects,
		       "%s: loaded objects constant (dl_iterate_phdr)", loop_names[l]);
		is_int(0, after.plugin_maps, "%s: the policy plugin is not mapped between loads",
		       loop_names[l]);
		ok(done > 0, "%s: made progress", loop_names[l]);
	}
	vmmx_ctx_destroy(shared_ctx);
	return tap_done();
}
