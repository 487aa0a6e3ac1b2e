// SPDX-License-Identifier: MIT
/*
 * size.c - the one grammar for sizes, and the reverse: sizes for humans.
 *
 *   size    := digits [unit] | digits "%"
 *   unit    := "B" | "K" | "M" | "G" | "T"            (powers of 1024)
 *            | "KiB" | "MiB" | "GiB" | "TiB"          (powers of 1024)
 *            | "KB" | "MB" | "GB" | "TB"              (powers of 1000)
 *
 * The single letters follow GNU coreutils (dd, truncate): K is 1024 and KB
 * is 1000.  Nothing else is accepted: no spaces, signs, fractions, lower
 * case units or trailing text, so a typo fails instead of meaning something
 * unintended.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "internal/base.h"

static const struct {
	const char *suffix;
	uint64_t mult;
} units[] = {
	{ "", 1 },
	{ "B", 1 },
	{ "K", 1ull << 10 },         { "M", 1ull << 20 },          { "G", 1ull << 30 },
	{ "T", 1ull << 40 },         { "KiB", 1ull << 10 },        { "MiB", 1ull << 20 },
	{ "GiB", 1ull << 30 },       { "TiB", 1ull << 40 },        { "KB", 1000ull },
	{ "MB", 1000ull * 1000 },    { "GB", 1000ull * 1000 * 1000 },
	{ "TB", 1000ull * 1000 * 1000 * 1000 },
};

VMMX_API int vmmx_parse_size(const char *s, uint64_t total, uint64_t *out)
{
	uint64_t n = 0;
	const char *p = s;

	if (!s || !out || *s < '0' || *s > '9')
		return -VMMX_EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		if (n > (UINT64_MAX - (uint64_t)(*p - '0')) / 10)
			return -VMMX_ERANGE;
		n = n * 10 + (uint64_t)(*p - '0');
	}
	if (!strcmp(p, "%")) {
		if (!total)
			return -VMMX_EINVAL;
		if (n > 100)
			return -VMMX_ERANGE;
		/* total * n / 100 without overflow for totals up to 2^64 / 100 and beyond */
		*out = total / 100 * n + total % 100 * n / 100;
		return 0;
	}
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(p, units[i].suffix))
			continue;
		if (n > UINT64_MAX / units[i].mult)
			return -VMMX_ERANGE;
		*out = n * units[i].mult;
		return 0;
	}
	return -VMMX_EINVAL;
}

const char *vmmx__fmt_size(uint64_t bytes, char *buf, size_t len)
{
	static const char *const sfx[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = (double)bytes;
	int i = 0;

	while (v >= 1024 && i < 5) {
		v /= 1024;
		i++;
	}
	if (i == 0 || v == (double)(uint64_t)v)
		snprintf(buf, len, "%llu %s", (unsigned long long)v, sfx[i]);
	else
		snprintf(buf, len, "%.2f %s", v, sfx[i]);
	return buf;
}
