// SPDX-License-Identifier: MIT
/* common.c - helpers of the fuzz harnesses (see fuzz.h). */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/fuzz/fuzz.h"

char *fuzz_string(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (!s)
		abort(); /* the fuzzer's own limits keep inputs small: this is a broken run */
	memcpy(s, data, size);
	s[size] = '\0';
	return s;
}

void fuzz_log_sink(void *arg, enum vmmx_log_level level, const char *msg)
{
}

void fuzz_pin_plugins(void)
{
	static int done;
	struct dirent *e;
	DIR *d;

	if (done++)
		return;
	d = opendir(FUZZ_POLICY_DIR);
	while (d && (e = readdir(d))) {
		size_t n = strlen(e->d_name);
		char path[4096];

		if (strncmp(e->d_name, "vmmx_policy_", 12) || n < 3 ||
		    strcmp(e->d_name + n - 3, ".so"))
			continue;
		snprintf(path, sizeof(path), "%s/%s", FUZZ_POLICY_DIR, e->d_name);
		/* the handle is dropped on purpose: NODELETE keeps the object for the run */
		(void)dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
	}
	if (d)
		closedir(d);
}
