// SPDX-License-Identifier: MIT
/*
 * basic.c - TAP producer.  Output goes to stdout, diagnostics to stdout as
 * "# " lines (tap-driver.sh reads both).  The plan is checked at exit.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/tap/basic.h"

static unsigned long planned, run, failed;
static bool lazy, planned_once;

static void vreport(bool pass, const char *fmt, va_list ap)
{
	run++;
	if (!pass)
		failed++;
	printf("%sok %lu - ", pass ? "" : "not ", run);
	vprintf(fmt, ap);
	putchar('\n');
	fflush(stdout);
}

void plan(unsigned long n)
{
	planned = n;
	planned_once = true;
	printf("1..%lu\n", n);
	fflush(stdout);
}

void plan_lazy(void)
{
	lazy = true;
	planned_once = true;
}

void skip_all(const char *fmt, ...)
{
	va_list ap;

	printf("1..0 # SKIP ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	exit(0);
}

bool ok(bool pass, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vreport(pass, fmt, ap);
	va_end(ap);
	return pass;
}

#define REPORT(pass)                       \
	do {                               \
		va_list ap;                \
		va_start(ap, fmt);         \
		vreport((pass), fmt, ap);  \
		va_end(ap);                \
	} while (0)

bool is_int(long long want, long long got, const char *fmt, ...)
{
	REPORT(want == got);
	if (want != got)
		diag("wanted: %lld\n#      got: %lld", want, got);
	return want == got;
}

bool is_uint(unsigned long long want, unsigned long long got, const char *fmt, ...)
{
	REPORT(want == got);
	if (want != got)
		diag("wanted: %llu\n#      got: %llu", want, got);
	return want == got;
}

bool is_string(const char *want, const char *got, const char *fmt, ...)
{
	bool pass = (!want && !got) || (want && got && !strcmp(want, got));

	REPORT(pass);
	if (!pass)
		diag("wanted: \"%s\"\n#      got: \"%s\"", want ? want : "(null)", got ? got : "(null)");
	return pass;
}

bool is_err(int want, int got, const char *fmt, ...)
{
	REPORT(want == got);
	if (want != got)
		diag("wanted: %d (%s)\n#      got: %d (%s); last error: %s", want, vmmx_strerror(want),
		     got, vmmx_strerror(got), vmmx_last_error());
	return want == got;
}

bool like(const char *got, const char *needle, const char *fmt, ...)
{
	bool pass = got && needle && strstr(got, needle);

	REPORT(pass);
	if (!pass)
		diag("wanted a string containing: \"%s\"\n#      got: \"%s\"", needle,
		     got ? got : "(null)");
	return pass;
}

void skip(const char *fmt, ...)
{
	va_list ap;

	run++;
	printf("ok %lu # SKIP ", run);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

void diag(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	printf("# ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

void bail(const char *fmt, ...)
{
	va_list ap;

	printf("Bail out! ");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	exit(255);
}

int tap_done(void)
{
	if (lazy) {
		printf("1..%lu\n", run);
		planned = run;
	}
	fflush(stdout);
	if (!planned_once) {
		diag("no plan was given");
		return 255;
	}
	if (planned != run) {
		diag("planned %lu tests but ran %lu", planned, run);
		return 255;
	}
	if (failed) {
		diag("%lu of %lu tests failed", failed, run);
		return 1;
	}
	return 0;
}
