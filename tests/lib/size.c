// SPDX-License-Identifier: MIT
/* size.c - the size grammar of vmmx_parse_size(). */
#include "config.h"

#include <stdint.h>

#include "vmmx.h"
#include "tests/tap/basic.h"

static const struct {
	const char *s;
	uint64_t total;
	int err;
	uint64_t want;
} cases[] = {
	{ "0", 0, 0, 0 },
	{ "4096", 0, 0, 4096 },
	{ "7B", 0, 0, 7 },
	{ "1K", 0, 0, 1024 },
	{ "1KiB", 0, 0, 1024 },
	{ "1KB", 0, 0, 1000 },
	{ "3M", 0, 0, 3ull << 20 },
	{ "3MiB", 0, 0, 3ull << 20 },
	{ "3MB", 0, 0, 3000000 },
	{ "2G", 0, 0, 2ull << 30 },
	{ "2GiB", 0, 0, 2ull << 30 },
	{ "2GB", 0, 0, 2000000000ull },
	{ "5T", 0, 0, 5ull << 40 },
	{ "5TiB", 0, 0, 5ull << 40 },
	{ "5TB", 0, 0, 5000000000000ull },
	{ "50%", 1000, 0, 500 },
	{ "100%", 8ull << 30, 0, 8ull << 30 },
	{ "0%", 1000, 0, 0 },
	{ "33%", 100, 0, 33 },
	{ "18446744073709551615", 0, 0, UINT64_MAX },
	/* errors */
	{ "", 0, -VMMX_EINVAL, 0 },
	{ "GiB", 0, -VMMX_EINVAL, 0 },
	{ "4 GiB", 0, -VMMX_EINVAL, 0 },
	{ " 4GiB", 0, -VMMX_EINVAL, 0 },
	{ "4gib", 0, -VMMX_EINVAL, 0 },
	{ "4Gi", 0, -VMMX_EINVAL, 0 },
	{ "4XB", 0, -VMMX_EINVAL, 0 },
	{ "1.5GiB", 0, -VMMX_EINVAL, 0 },
	{ "-1", 0, -VMMX_EINVAL, 0 },
	{ "+1", 0, -VMMX_EINVAL, 0 },
	{ "4GiBx", 0, -VMMX_EINVAL, 0 },
	{ "50%", 0, -VMMX_EINVAL, 0 },
	{ "101%", 1000, -VMMX_ERANGE, 0 },
	{ "18446744073709551616", 0, -VMMX_ERANGE, 0 },
	{ "17179869184GiB", 0, -VMMX_ERANGE, 0 },
	{ "16777216TiB", 0, -VMMX_ERANGE, 0 },
};

int main(void)
{
	size_t n = sizeof(cases) / sizeof(cases[0]);
	uint64_t v;

	plan(n * 2 + 2);
	for (size_t i = 0; i < n; i++) {
		v = 0xdeadbeef;
		is_err(cases[i].err, vmmx_parse_size(cases[i].s, cases[i].total, &v),
		       "vmmx_parse_size(\"%s\", %llu) returns %s", cases[i].s,
		       (unsigned long long)cases[i].total, vmmx_strerror(cases[i].err));
		if (cases[i].err)
			is_uint(0xdeadbeef, v, "vmmx_parse_size(\"%s\") leaves the output alone on error",
				cases[i].s);
		else
			is_uint(cases[i].want, v, "vmmx_parse_size(\"%s\") is %llu", cases[i].s,
				(unsigned long long)cases[i].want);
	}
	is_err(-VMMX_EINVAL, vmmx_parse_size(NULL, 0, &v), "vmmx_parse_size(NULL) is EINVAL");
	is_err(-VMMX_EINVAL, vmmx_parse_size("1", 0, NULL), "vmmx_parse_size with NULL out is EINVAL");
	return tap_done();
}
