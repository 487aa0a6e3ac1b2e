/* SPDX-License-Identifier: MIT */
/*
 * vmmx_test.h - helpers shared by the libvmmx tests: contexts on the backend
 * the suite runs on (VMMX_BACKEND, sim when unset), data patterns, a log
 * sink that captures messages, and require_gpu().
 */
#ifndef TAP_VMMX_TEST_H
#define TAP_VMMX_TEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmmx.h"

#define MiB ((size_t)1 << 20)
#define GiB ((size_t)1 << 30)

/* Whether the suite runs on the sim backend. */
bool test_on_sim(void);
/* The backend name the suite runs on. */
const char *test_backend(void);

/*
 * A context on the suite's backend, ignoring the environment except
 * VMMX_BACKEND and VMMX_SIM_DEVICES (which @vars may override), with @vars ("VMMX_NAME=value", NULL-terminated; may be NULL)
 * and the log captured (see test_log_*).  Bails out on failure.
 */
struct vmmx_ctx *test_ctx(const char *const *vars);
/* As test_ctx() but returns the error instead of bailing. */
int test_ctx_try(const char *const *vars, struct vmmx_ctx **ctx_p);

/* Captured log lines since the last test_log_clear(), joined by '\n'. */
const char *test_log(void);
void test_log_clear(void);
/* The log sink used by test_ctx (also usable in a struct vmmx_config). */
void test_log_sink(void *arg, enum vmmx_log_level level, const char *msg);

/* Skip the whole test unless it runs on the cuda backend with a usable GPU. */
void require_gpu(void);

/*
 * One character per chunk of @buf: the device ordinal ('0' to '9') or 'H'
 * for host memory; "?" when the list cannot be read or has more than 64
 * chunks.  A static buffer: valid until the next call.
 */
const char *test_layout(struct vmmx_buf *buf);
/* vmmx_stats_get() of the whole struct; bails out on failure. */
struct vmmx_stats test_stats(struct vmmx_ctx *ctx);

/*
 * The build tree: $top_builddir (tests/local.mk exports it), else found
 * from the running program's path, <top>/tests/DIR/PROGRAM.  Bails when
 * neither is there.
 */
const char *test_build_tree(void);

struct json;
/* vmmx_stats_json() of @ctx, parsed (json_free() it); bails when it fails or is not JSON. */
struct json *test_stats_json(struct vmmx_ctx *ctx);
/* The entry of policy @spec in the "policies" list of stats JSON @st, or NULL. */
const struct json *test_find_policy(const struct json *st, const char *spec);

/*
 * In a forked child that cannot use TAP: a failed @cond prints @what and
 * vmmx_last_error() on stderr and counts in test_child_fails, which the
 * child returns as its exit status.
 */
extern int test_child_fails;
void test_expect(bool cond, const char *what);
/*
 * Wait for child @pid at most @seconds; when it hangs, print its stack as
 * diagnostics (by gdb, where there is one) and kill it.  Its wait status;
 * -1 when it was killed for hanging; -2 when waitpid failed;
 * TEST_HUNG_IN_TSAN when, in a ThreadSanitizer build, its stack shows it
 * waiting on a lock inside the runtime itself, not one of ours or libc's.
 * That runtime (GCC 12's libtsan) does not take its allocator's locks
 * around fork(), so a child that allocates or frees can wait forever on
 * one another thread of the parent held at the fork (LLVM takes them since
 * its release 19).  A child set an alarm() longer than @seconds, so that
 * the stack is taken before the alarm kills it.
 */
#define TEST_HUNG_IN_TSAN (-3)
int test_wait_child(pid_t pid, int seconds);

/* Deterministic byte pattern: the byte at absolute offset @off for @seed. */
static inline uint8_t test_pattern_byte(size_t off, uint32_t seed)
{
	uint64_t x = (uint64_t)off * 0x9E3779B97F4A7C15ull ^ seed;

	x ^= x >> 29;
	x *= 0xBF58476D1CE4E5B9ull;
	x ^= x >> 32;
	return (uint8_t)x;
}

/* Copy file @from to @to (made or truncated) with exactly @mode; bails on failure. */
void test_copy_file(const char *from, const char *to, mode_t mode);

/* Driver calls of @op the context has made (vmmx_stats_get). */
uint64_t test_driver_calls(struct vmmx_ctx *ctx, enum vmmx_op op);

/* Write the pattern to [off, off+len) of @dst through vmmx_memcpy (works on
 * device chunks too).  Returns 0 or the error. */
int test_fill(struct vmmx_ctx *ctx, void *dst, size_t off, size_t len, uint32_t seed);
/* Read [off, off+len) of @src back through vmmx_memcpy and compare; returns
 * the offset of the first wrong byte, or SIZE_MAX if all are right, or
 * SIZE_MAX - 1 if the copy itself failed. */
size_t test_check(struct vmmx_ctx *ctx, const void *src, size_t off, size_t len, uint32_t seed);

/* A buffer of @size (64 MiB reserved) placed in host memory (the "host"
 * policy) holding the pattern @seed; bails out on failure. */
struct vmmx_buf *test_host_buf(struct vmmx_ctx *ctx, size_t size, uint32_t seed);
/* vmmx_buf_migrate() of the whole of @buf to @to; bails out on failure. */
void test_migrate_all(struct vmmx_buf *buf, struct vmmx_loc to);
/* @len bytes of the pattern @seed as test_fill() writes them from offset 0,
 * malloc'd (the caller frees them); bails out when out of memory. */
uint8_t *test_pattern(size_t len, uint32_t seed);
/* Whether [@off, @off + @len) of @buf holds @want + @off (read back through
 * vmmx_memcpy). */
bool test_holds(struct vmmx_ctx *ctx, struct vmmx_buf *buf, const uint8_t *want, size_t off,
		size_t len);

#endif
