// SPDX-License-Identifier: MIT
/*
 * replay.c - main() for a fuzz harness built without libFuzzer: feed it
 * every file of the directories (or the files) given, in name order, and
 * print one TAP line per input.  With no argument, a program named
 * replay-NAME replays $top_srcdir/tests/fuzz/corpus/NAME (the seed corpus)
 * and .../regress/NAME (every input that once crashed NAME): that is how
 * `make check` runs them.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tests/fuzz/fuzz.h"
#include "tests/tap/basic.h"

static void run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *data;
	long n;

	if (!f)
		bail("%s: cannot open", path);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	data = malloc(n > 0 ? (size_t)n : 1);
	if (!data || (n > 0 && fread(data, 1, (size_t)n, f) != (size_t)n))
		bail("%s: cannot read", path);
	fclose(f);
	LLVMFuzzerTestOneInput(data, (size_t)n);
	free(data);
	ok(true, "%s", path);
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	const char *name = strrchr(argv[0], '/'), *top = getenv("top_srcdir");
	char corpus[4096], regress[4096];
	char *dflt[] = { argv[0], corpus, regress, NULL };

	name = name ? name + 1 : argv[0];
	if (!strncmp(name, "lt-", 3))
		name += 3; /* libtool's wrapper */
	if (argc < 2 && !strncmp(name, "replay-", 7)) {
		snprintf(corpus, sizeof(corpus), "%s/tests/fuzz/corpus/%s", top ? top : ".",
			 name + 7);
		snprintf(regress, sizeof(regress), "%s/tests/fuzz/regress/%s", top ? top : ".",
			 name + 7);
		argv = dflt;
		argc = 3;
	}
	plan_lazy();
	for (int i = 1; i < argc; i++) {
		struct dirent **names;
		struct stat st;
		int n;

		if (stat(argv[i], &st))
			continue; /* a harness may have no regression directory yet */
		if (!S_ISDIR(st.st_mode)) {
			run_file(argv[i]);
			continue;
		}
		n = scandir(argv[i], &names, NULL, by_name);
		for (int k = 0; k < n; k++) {
			char path[4096];

			if (names[k]->d_name[0] != '.') {
				snprintf(path, sizeof(path), "%s/%s", argv[i], names[k]->d_name);
				run_file(path);
			}
			free(names[k]);
		}
		free(n >= 0 ? names : NULL);
	}
	return tap_done();
}
