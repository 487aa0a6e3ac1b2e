// SPDX-License-Identifier: MIT
/*
 * json.c - fuzz the JSON reader the tests read VMMX_TRACE files and
 * vmmx_stats_json() output with (tests/tap/json.c; the library writes JSON
 * but reads none).  A parse either fails with a message or gives a tree
 * every accessor can walk.
 */
#include "config.h"

#include <stdlib.h>

#include "tests/fuzz/fuzz.h"
#include "tests/tap/json.h"

static void walk(const struct json *j, int depth)
{
	if (depth > 1000)
		return;
	for (size_t i = 0; i < json_len(j); i++) {
		(void)json_key(j, i);
		walk(json_index(j, i), depth + 1);
	}
	(void)json_num(j);
	(void)json_str(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *s = fuzz_string(data, size);
	const char *err = NULL;
	struct json *j = json_parse(s, &err);

	if (!j && (!err || !*err))
		abort(); /* a refusal says where and why */
	walk(j, 0);
	json_free(j);
	free(s);
	return 0;
}
