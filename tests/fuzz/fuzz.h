/* SPDX-License-Identifier: MIT */
/*
 * fuzz.h - what the fuzz harnesses share.  Each harness defines
 * LLVMFuzzerTestOneInput(); built with --enable-fuzz it links libFuzzer
 * (clang -fsanitize=fuzzer), otherwise replay.c's main() feeds it every file
 * of the directories named on its command line, so that the seed corpus and
 * every input that once crashed run in `make check` as regression tests.
 */
#ifndef TESTS_FUZZ_FUZZ_H
#define TESTS_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>

#include "vmmx.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A NUL-terminated copy of the input (the APIs take C strings); free() it. */
char *fuzz_string(const uint8_t *data, size_t size);

/*
 * Load every policy plugin of the build tree once for the whole run, with
 * RTLD_NODELETE, so that the library's dlclose never unmaps one: libFuzzer
 * keeps pointers to each instrumented object's coverage counters and
 * crashes on an object that went away (it does not support dlclose).
 */
void fuzz_pin_plugins(void);

/* A log sink that drops every line (the harnesses run at debug level). */
void fuzz_log_sink(void *arg, enum vmmx_log_level level, const char *msg);

#endif
