// SPDX-License-Identifier: MIT
/*
 * error.c - error names and the thread's last-error message.
 *
 * Error codes are small ints; the detail (which variable, which driver call)
 * lives in a thread-local buffer that the function first seeing an error
 * fills, so callers that only pass codes on never lose it.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "internal/base.h"

static __thread char last_error[768];
/* A message of vmmx__fail_addr() not written into last_error yet: its format and address. */
static __thread const char *later_fmt;
static __thread const void *later_addr;

static const struct {
	int code;
	const char *name;
} names[] = {
	{ VMMX_EPERM, "operation not permitted" },
	{ VMMX_ENOENT, "no such object" },
	{ VMMX_ENOMEM, "out of memory or over a limit" },
	{ VMMX_EFAULT, "address not mapped" },
	{ VMMX_EBUSY, "object in use" },
	{ VMMX_EEXIST, "object exists" },
	{ VMMX_ENODEV, "no such device" },
	{ VMMX_EINVAL, "invalid argument" },
	{ VMMX_ERANGE, "out of range" },
	{ VMMX_ENOTSUP, "not supported" },
	{ VMMX_EDRIVER, "driver error" },
	{ VMMX_ENODRIVER, "CUDA driver library not loadable" },
	{ VMMX_ECONFIG, "invalid configuration" },
	{ VMMX_ENOBACKEND, "backend unknown or not built in" },
	{ VMMX_EFAULTINJ, "injected failure" },
	{ VMMX_EPOLICY, "policy refused or failed" },
};

VMMX_API const char *vmmx_strerror(int err)
{
	static __thread char unknown[40];
	/* The magnitude in a wider type: -INT_MIN does not fit an int. */
	long long code = err < 0 ? -(long long)err : err;

	if (err == 0)
		return "success";
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (names[i].code == code)
			return names[i].name;
	snprintf(unknown, sizeof(unknown), "unknown error %lld", code);
	return unknown;
}

/* Write the message vmmx__fail_addr() left for later, if any. */
static void write_later(void)
{
	if (!later_fmt)
		return;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
	snprintf(last_error, sizeof(last_error), later_fmt, later_addr);
#pragma GCC diagnostic pop
	later_fmt = NULL;
}

VMMX_API const char *vmmx_last_error(void)
{
	write_later();
	return last_error;
}

void vmmx__set_last_error(const char *msg)
{
	later_fmt = NULL;
	snprintf(last_error, sizeof(last_error), "%s", msg);
}

void vmmx__clear_last_error(void)
{
	later_fmt = NULL;
	last_error[0] = '\0';
}

int vmmx__fail_addr(const struct vmmx__log *log, int err, const char *fmt, const void *addr)
{
	later_fmt = fmt;
	later_addr = addr;
	last_error[0] = '\0';
	if ((log ? log->level : VMMX_LOG_WARN) >= VMMX_LOG_DEBUG) {
		write_later();
		vmmx__logf(log, VMMX_LOG_DEBUG, "%s (%s)", last_error, vmmx_strerror(err));
	}
	return err;
}

int vmmx__fail(const struct vmmx__log *log, int err, const char *fmt, ...)
{
	char msg[sizeof(last_error)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	vmmx__set_last_error(msg);
	vmmx__logf(log, VMMX_LOG_DEBUG, "%s (%s)", msg, vmmx_strerror(err));
	return err;
}
