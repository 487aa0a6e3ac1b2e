// SPDX-License-Identifier: MIT
/* error.c - vmmx_strerror() and vmmx_last_error(). */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/vmmx_test.h"

static const int codes[] = {
	VMMX_EPERM,  VMMX_ENOENT,  VMMX_ENOMEM,  VMMX_EFAULT,    VMMX_EBUSY,
	VMMX_EEXIST, VMMX_ENODEV,  VMMX_EINVAL,  VMMX_ERANGE,    VMMX_ENOTSUP,
	VMMX_EDRIVER, VMMX_ENODRIVER, VMMX_ECONFIG, VMMX_ENOBACKEND, VMMX_EFAULTINJ, VMMX_EPOLICY,
};

static void *other_thread(void *arg)
{
	/* The last error is per thread: a fresh thread has none. */
	*(int *)arg = vmmx_last_error()[0] == '\0';
	return NULL;
}

int main(void)
{
	size_t n = sizeof(codes) / sizeof(codes[0]);
	struct vmmx_ctx *ctx;
	struct vmmx_buf *buf;
	pthread_t th;
	int clean = 0;

	plan(n * 2 + 11);
	for (size_t i = 0; i < n; i++) {
		const char *s = vmmx_strerror(-codes[i]);

		ok(s && *s && strncmp(s, "unknown error", 13), "vmmx_strerror(-%d) names the error: %s",
		   codes[i], s ? s : "(null)");
		is_string(s, vmmx_strerror(codes[i]), "vmmx_strerror(%d) is the same as for -%d",
			  codes[i], codes[i]);
	}
	for (size_t i = 0; i < n; i++)
		for (size_t j = i + 1; j < n; j++)
			if (!strcmp(vmmx_strerror(codes[i]), vmmx_strerror(codes[j])))
				diag("codes %d and %d share a name", codes[i], codes[j]);
	is_string("success", vmmx_strerror(0), "vmmx_strerror(0)");
	like(vmmx_strerror(-12345), "unknown error 12345", "vmmx_strerror of an unknown code");
	ok(vmmx_strerror(-1000000) != NULL, "vmmx_strerror never returns NULL");
	/* -INT_MIN overflowed an int (UBSan); the magnitude is printed in full. */
	is_string("unknown error 2147483648", vmmx_strerror(INT_MIN), "vmmx_strerror(INT_MIN)");
	is_string("unknown error 2147483647", vmmx_strerror(INT_MAX), "vmmx_strerror(INT_MAX)");
	ok(VMMX_EDRIVER >= 256 && VMMX_EINVAL < 256, "own codes from 256 up, errno codes below");

	ctx = test_ctx(NULL);
	is_err(-VMMX_EINVAL, vmmx_buf_create(ctx, 0, NULL, &buf), "vmmx_buf_create(capacity 0)");
	like(vmmx_last_error(), "capacity", "vmmx_last_error names the bad capacity");
	is_err(-VMMX_ENOENT, vmmx_buf_create(ctx, 4 * MiB, "no-such-policy", &buf),
	       "vmmx_buf_create with an unknown policy");
	like(vmmx_last_error(), "no-such-policy", "vmmx_last_error names the unknown policy");
	pthread_create(&th, NULL, other_thread, &clean);
	pthread_join(th, NULL);
	ok(clean, "vmmx_last_error is per thread");
	vmmx_ctx_destroy(ctx);
	return tap_done();
}
