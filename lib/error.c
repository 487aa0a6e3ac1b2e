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

VMMX_API const char *vmmx_last_error(void)
{
	return last_error;
}

void vmmx__set_last_error(const char *msg)
{
	snprintf(last_error, sizeof(last_error), "%s", msg);
}

void vmmx__clear_last_error(void)
{
	last_error[0] = '\0';
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
