/* SPDX-License-Identifier: MIT */
/*
 * basic.h - a small TAP library with the C TAP Harness vocabulary, plus
 * is_err() for libvmmx error codes.
 *
 * Not thread-safe: call the assertion functions from the main thread only
 * (worker threads report through their own variables).
 */
#ifndef TAP_BASIC_H
#define TAP_BASIC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TAP_FMT(a, b) __attribute__((format(printf, a, b)))

void plan(unsigned long n);
void plan_lazy(void);
void skip_all(const char *fmt, ...) TAP_FMT(1, 2) __attribute__((noreturn));
bool ok(bool pass, const char *fmt, ...) TAP_FMT(2, 3);
bool is_int(long long want, long long got, const char *fmt, ...) TAP_FMT(3, 4);
bool is_uint(unsigned long long want, unsigned long long got, const char *fmt, ...) TAP_FMT(3, 4);
bool is_string(const char *want, const char *got, const char *fmt, ...) TAP_FMT(3, 4);
bool is_err(int want, int got, const char *fmt, ...) TAP_FMT(3, 4);
bool like(const char *got, const char *needle, const char *fmt, ...) TAP_FMT(3, 4);
void skip(const char *fmt, ...) TAP_FMT(1, 2);
void diag(const char *fmt, ...) TAP_FMT(1, 2);
void bail(const char *fmt, ...) TAP_FMT(1, 2) __attribute__((noreturn));
/* Exit status for main(): nonzero when a test failed or the plan was not met. */
int tap_done(void);

#endif
