// SPDX-License-Identifier: MIT
/*
 * size.c - fuzz the size grammar (vmmx_parse_size): any text, with and
 * without percentages.  An accepted size must be consistent: the same text
 * parses the same way again, and a percentage needs a total.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "vmmx.h"
#include "tests/fuzz/fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_string(data, size);
	uint64_t a = 0, b = 0;
	int e1 = vmmx_parse_size(s, 0, &a);
	int e2 = vmmx_parse_size(s, 1ull << 40, &b);

	/* a size without a percentage means the same whatever the total */
	if (!e1 && (e2 || a != b))
		abort();
	if (e1 != 0 && e1 != -VMMX_EINVAL && e1 != -VMMX_ERANGE)
		abort();
	if (!e2 && strchr(s, '%') && b > 1ull << 40)
		abort(); /* at most 100% */
	free(s);
	return 0;
}
