// SPDX-License-Identifier: MIT
/*
 * copy_range.c - vmmx_memcpy and vmmx_memset check their whole range before
 * they write a byte (lib/copy.c):
 *  - a range that runs past a buffer's size is refused with nothing
 *    written, for a memset, a copy's destination and a copy's source (the
 *    piece before the bad one used to be written first);
 *  - a range that wraps around the end of the address space is refused
 *    (-VMMX_EINVAL naming it) before any memory is touched, for memset and
 *    for both sides of a copy;
 *  - host memory outside every buffer is checked to its end before the CPU
 *    writes it;
 *  - a write through libvmmx's own API into a read-mostly chunk on the
 *    device drops the chunk's host copy, so moving it back brings the new
 *    bytes (it used to map the stale copy again).
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"
#include "vmmx.h"
#include "tests/tap/basic.h"
#include "tests/tap/leaks.h"
#include "tests/tap/vmmx_test.h"

static const struct vmmx_loc DEV = { VMMX_LOC_DEVICE, 0 };
static const struct vmmx_loc HOST = { VMMX_LOC_HOST, 0 };

/* Whether [off, off+len) of @buf holds the pattern @seed. */
static bool intact(struct vmmx_ctx *ctx, struct vmmx_buf *buf, size_t off, size_t len,
		   uint32_t seed)
{
	return test_check(ctx, vmmx_buf_ptr(buf), off, len, seed) == SIZE_MAX;
}

static bool all(const unsigned char *p, size_t n, unsigned char c)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			return false;
	return true;
}

/* ---- 1. past the size: nothing written ---- */

static void past_size(const char *policy)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=2MiB", "VMMX_DEVICE_LIMIT=4MiB",
					    "VMMX_DEVICE_HEADROOM=0", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	const size_t size = 6 * MiB; /* three 2 MiB chunks; the reservation goes on, unmapped */
	unsigned char host[100];
	struct vmmx_buf *buf;
	char *p;

	if (vmmx_buf_create(ctx, 16 * MiB, policy, &buf) || vmmx_buf_resize(buf, size) ||
	    test_fill(ctx, vmmx_buf_ptr(buf), 0, size, 7))
		bail("past_size: %s", vmmx_last_error());
	p = vmmx_buf_ptr(buf);

	is_err(-VMMX_EFAULT, vmmx_memset(ctx, p + size - 10, 0xee, 100),
	       "%s: vmmx_memset over [size-10, size+90) refused", policy);
	like(vmmx_last_error(), "past its size", "%s: the message says the range runs past the size",
	     policy);
	ok(intact(ctx, buf, size - 4096, 4096, 7),
	   "%s: the 10 bytes before the size are not set (nothing written)", policy);

	memset(host, 0xcd, sizeof(host));
	is_err(-VMMX_EFAULT, vmmx_memcpy(ctx, p + size - 10, host, 100),
	       "%s: vmmx_memcpy to [size-10, size+90) refused", policy);
	ok(intact(ctx, buf, size - 4096, 4096, 7), "%s: the destination is untouched", policy);

	/* 0x3c: neither the pattern nor a byte an earlier (refused) write may have left */
	memset(host, 0x3c, sizeof(host));
	is_err(-VMMX_EFAULT, vmmx_memcpy(ctx, host, p + size - 10, 100),
	       "%s: vmmx_memcpy from [size-10, size+90) refused", policy);
	ok(all(host, sizeof(host), 0x3c), "%s: no byte of the destination written", policy);

	/* A range of several runs, the last one bad: device and host chunks, then the tail. */
	is_err(-VMMX_EFAULT, vmmx_memset(ctx, p, 0x11, size + 1),
	       "%s: vmmx_memset of the whole buffer and one byte more refused", policy);
	ok(intact(ctx, buf, 0, size, 7), "%s: no chunk of it set", policy);
	is_err(0, vmmx_memset(ctx, p + size - 10, 0xee, 10), "%s: the good part alone works",
	       policy);
	memset(host, 0, sizeof(host));
	vmmx_memcpy(ctx, host, p + size - 10, 10);
	ok(all(host, 10, 0xee), "%s: and is set", policy);
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "%s: nothing leaked", policy);
	vmmx_ctx_destroy(ctx);
}

/* ---- 2. wrapping ranges ---- */

static void wrapping(void)
{
	struct vmmx_ctx *ctx = test_ctx(NULL);
	unsigned char *m = malloc(4096), *h = malloc(4096);
	struct vmmx_buf *buf;

	if (!m || !h || vmmx_buf_create(ctx, 8 * MiB, NULL, &buf) || vmmx_buf_resize(buf, 4 * MiB))
		bail("wrapping: %s", vmmx_last_error());
	memset(m, 0x5a, 4096);
	memset(h, 0x77, 4096);
	is_err(-VMMX_EINVAL, vmmx_memset(ctx, m, 0, SIZE_MAX), "vmmx_memset(malloc'd, SIZE_MAX) refused");
	like(vmmx_last_error(), "vmmx_memset", "the message names the function");
	like(vmmx_last_error(), "wraps around the address space", "and says the range wraps");
	ok(all(m, 4096, 0x5a), "nothing of the malloc'd block set");
	is_err(-VMMX_EINVAL, vmmx_memset(ctx, vmmx_buf_ptr(buf), 0, SIZE_MAX - 4096),
	       "vmmx_memset(buffer, SIZE_MAX - 4096) refused");
	like(vmmx_last_error(), "wraps", "the message says the range wraps");
	is_err(-VMMX_EINVAL, vmmx_memcpy(ctx, m, h, SIZE_MAX), "vmmx_memcpy of SIZE_MAX bytes refused");
	like(vmmx_last_error(), "destination range wraps", "the message names the side");
	ok(all(m, 4096, 0x5a), "nothing of the destination written");
	is_err(-VMMX_EINVAL, vmmx_memcpy(ctx, (void *)(uintptr_t)4096, (void *)(UINTPTR_MAX - 4095), 8192),
	       "vmmx_memcpy whose source wraps refused");
	like(vmmx_last_error(), "source range wraps", "the message names the source");
	is_err(0, vmmx_memset(ctx, m, 1, 4096), "an ordinary vmmx_memset of the block works");
	ok(all(m, 4096, 1), "and sets it");
	free(m);
	free(h);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

/* ---- 3. host memory outside every buffer ---- */

static void foreign(void)
{
	struct vmmx_ctx *ctx = test_ctx(NULL);
	size_t pg = (size_t)sysconf(_SC_PAGESIZE);
	unsigned char *m = mmap(NULL, 3 * pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
				-1, 0);
	struct vmmx_buf *buf;

	if (m == MAP_FAILED || vmmx_buf_create(ctx, 8 * MiB, "host", &buf) ||
	    vmmx_buf_resize(buf, 4 * MiB) || test_fill(ctx, vmmx_buf_ptr(buf), 0, 4 * MiB, 9))
		bail("foreign: %s", vmmx_last_error());
	memset(m, 0x42, 3 * pg);
	if (mprotect(m + 2 * pg, pg, PROT_READ))
		bail("mprotect");
	is_err(-VMMX_EFAULT, vmmx_memset(ctx, m, 0, 3 * pg),
	       "vmmx_memset over two writable pages and a read-only one refused");
	like(vmmx_last_error(), "is not writable", "the message says why");
	ok(all(m, 2 * pg, 0x42), "the writable pages are untouched");
	is_err(-VMMX_EFAULT, vmmx_memcpy(ctx, m, vmmx_buf_ptr(buf), 3 * pg),
	       "vmmx_memcpy into them refused");
	ok(all(m, 2 * pg, 0x42), "still untouched");
	is_err(0, vmmx_memcpy(ctx, m, vmmx_buf_ptr(buf), 2 * pg), "the writable part alone works");
	ok(m[0] == test_pattern_byte(0, 9) && m[2 * pg - 1] == test_pattern_byte(2 * pg - 1, 9),
	   "and is written");
	munmap(m, 3 * pg);
	vmmx_buf_destroy(buf);
	vmmx_ctx_destroy(ctx);
}

/* ---- 4. a libvmmx write into a read-mostly chunk on the device ---- */

static void read_mostly(void)
{
	static const char *const vars[] = { "VMMX_CHUNK_MAX=4MiB", NULL };
	struct vmmx_ctx *ctx = test_ctx(vars);
	struct vmmx_buf *buf;
	unsigned char got[64];
	size_t moved;
	char *p;

	if (vmmx_buf_create(ctx, 32 * MiB, "host", &buf) || vmmx_buf_resize(buf, 16 * MiB) ||
	    test_fill(ctx, vmmx_buf_ptr(buf), 0, 16 * MiB, 11))
		bail("read_mostly: %s", vmmx_last_error());
	p = vmmx_buf_ptr(buf);
	is_err(0, vmmx_buf_advise(buf, 0, 16 * MiB, VMMX_ADVISE_READ_MOSTLY), "advised read-mostly");
	is_err(0, vmmx_buf_migrate(buf, 0, 16 * MiB, DEV, &moved), "promoted to the device");
	is_uint(16 * MiB, test_stats(ctx).shadow_bytes, "each chunk keeps its host copy");

	/* vmmx_memset into chunk 1 ([4, 8) MiB) */
	is_err(0, vmmx_memset(ctx, p + 5 * MiB, 0xab, 64), "vmmx_memset into chunk 1 on the device");
	is_uint(12 * MiB, test_stats(ctx).shadow_bytes, "its host copy is dropped, the others stay");
	/* vmmx_memcpy across chunks 2 and 3 */
	memset(got, 0xcd, sizeof(got));
	is_err(0, vmmx_memcpy(ctx, p + 12 * MiB - 32, got, 64), "vmmx_memcpy across chunks 2 and 3");
	is_uint(4 * MiB, test_stats(ctx).shadow_bytes, "both their copies are dropped");

	is_err(0, vmmx_buf_migrate(buf, 0, 16 * MiB, HOST, &moved), "moved back to host memory");
	is_string("HHHH", test_layout(buf), "all in host memory");
	memset(got, 0, sizeof(got));
	vmmx_memcpy(ctx, got, p + 5 * MiB, 64);
	ok(all(got, 64, 0xab), "the memset's bytes are there");
	memset(got, 0, sizeof(got));
	vmmx_memcpy(ctx, got, p + 12 * MiB - 32, 64);
	ok(all(got, 64, 0xcd), "the copy's bytes are there");
	ok(intact(ctx, buf, 0, 5 * MiB, 11) && intact(ctx, buf, 5 * MiB + 64, 7 * MiB - 96, 11) &&
	   intact(ctx, buf, 12 * MiB + 32, 4 * MiB - 32, 11),
	   "every other byte as it was");
	is_uint(1, test_stats(ctx).copies_saved, "only the unwritten chunk 0 came back uncopied");

	/* The chunks stay marked: the next promotion keeps fresh copies. */
	is_err(0, vmmx_buf_migrate(buf, 0, 16 * MiB, DEV, &moved), "promoted again");
	is_uint(16 * MiB, test_stats(ctx).shadow_bytes, "every chunk keeps a copy again");
	is_err(0, vmmx_buf_migrate(buf, 0, 16 * MiB, HOST, &moved), "and back");
	memset(got, 0, sizeof(got));
	vmmx_memcpy(ctx, got, p + 5 * MiB, 64);
	ok(all(got, 64, 0xab), "the fresh copy holds the memset's bytes");
	/* A refused write drops nothing and writes nothing. */
	is_err(0, vmmx_buf_migrate(buf, 0, 16 * MiB, DEV, &moved), "promoted a third time");
	is_err(-VMMX_EFAULT, vmmx_memset(ctx, p + 16 * MiB - 10, 0, 100), "a memset past the size");
	is_uint(16 * MiB, test_stats(ctx).shadow_bytes, "drops no copy");
	vmmx_buf_destroy(buf);
	ok(test_no_leaks(ctx), "nothing leaked");
	vmmx_ctx_destroy(ctx);
}

int main(void)
{
	plan(2 * 12 + 13 + 7 + 21);
	/* device-first: two device chunks, then a host chunk past the 4 MiB limit */
	past_size("device-first");
	past_size("host");
	wrapping();
	foreign();
	read_mostly();
	return tap_done();
}
