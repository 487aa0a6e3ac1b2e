# SPDX-License-Identifier: MIT
# Fuzzing.  Each harness (size, config, policy, json) is built twice:
#  - replay-NAME, always, a test of `make check` that feeds it the seed
#    corpus (corpus/NAME) and every input that once crashed it (regress/NAME);
#  - fuzz-NAME, with configure --enable-fuzz (clang, libFuzzer, ASan and
#    UBSan), which `make fuzz` runs for FUZZ_TIME seconds each (default 30),
#    growing a corpus in the build tree from the seeds.
FUZZ_TIME = 30
FUZZ_NAMES = size config policy json
FUZZ_COMMON = %D%/fuzz.h %D%/common.c
FUZZ_CPPFLAGS = $(TEST_CPPFLAGS) -DFUZZ_POLICY_DIR='"$(abs_top_builddir)/policies/.libs"'
REPLAY_PROGS = %D%/replay-size %D%/replay-config %D%/replay-policy %D%/replay-json
check_PROGRAMS += $(REPLAY_PROGS)
TESTS += $(REPLAY_PROGS)
%C%_replay_size_SOURCES = %D%/size.c %D%/replay.c $(FUZZ_COMMON)
%C%_replay_size_LDADD = $(TEST_LDADD)
%C%_replay_size_CPPFLAGS = $(FUZZ_CPPFLAGS)
%C%_replay_config_SOURCES = %D%/config.c %D%/replay.c $(FUZZ_COMMON)
%C%_replay_config_LDADD = $(TEST_LDADD)
%C%_replay_config_CPPFLAGS = $(FUZZ_CPPFLAGS)
%C%_replay_policy_SOURCES = %D%/policy.c %D%/replay.c $(FUZZ_COMMON)
%C%_replay_policy_LDADD = $(TEST_LDADD)
%C%_replay_policy_CPPFLAGS = $(FUZZ_CPPFLAGS)
%C%_replay_json_SOURCES = %D%/json.c %D%/replay.c $(FUZZ_COMMON)
%C%_replay_json_LDADD = $(TEST_LDADD)
%C%_replay_json_CPPFLAGS = $(FUZZ_CPPFLAGS)
EXTRA_DIST += %D%/corpus %D%/regress

if ENABLE_FUZZ
FUZZ_PROGS = %D%/fuzz-size %D%/fuzz-config %D%/fuzz-policy %D%/fuzz-json
noinst_PROGRAMS += $(FUZZ_PROGS)
%C%_fuzz_size_SOURCES = %D%/size.c $(FUZZ_COMMON)
%C%_fuzz_size_LDADD = $(TEST_LDADD)
%C%_fuzz_size_CPPFLAGS = $(FUZZ_CPPFLAGS)
%C%_fuzz_size_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
%C%_fuzz_config_SOURCES = %D%/config.c $(FUZZ_COMMON)
%C%_fuzz_config_LDADD = $(TEST_LDADD)
%C%_fuzz_config_CPPFLAGS = $(FUZZ_CPPFLAGS)
%C%_fuzz_config_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
%C%_fuzz_policy_SOURCES = %D%/policy.c $(FUZZ_COMMON)
%C%_fuzz_policy_LDADD = $(TEST_LDADD)
%C%_fuzz_policy_CPPFLAGS = $(FUZZ_CPPFLAGS)
%C%_fuzz_policy_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
%C%_fuzz_json_SOURCES = %D%/json.c $(FUZZ_COMMON)
%C%_fuzz_json_LDADD = $(TEST_LDADD)
%C%_fuzz_json_CPPFLAGS = $(FUZZ_CPPFLAGS)
%C%_fuzz_json_LDFLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer

# One run per harness; a crash stops `make fuzz` and leaves crash-* in the
# build tree: copy it to $(srcdir)/%D%/regress/NAME/ so `make check` keeps it.
fuzz: $(FUZZ_PROGS) policies/vmmx_policy_lru.la
	$(AM_V_at)for n in $(FUZZ_NAMES); do \
	  mkdir -p %D%/work/$$n || exit 1; \
	  echo "fuzz-$$n: $(FUZZ_TIME) s"; \
	  if %D%/fuzz-$$n -max_total_time=$(FUZZ_TIME) -print_final_stats=1 -timeout=10 \
	    -rss_limit_mb=4096 -artifact_prefix=%D%/work/$$n- \
	    %D%/work/$$n $(srcdir)/%D%/corpus/$$n $(FUZZ_ARGS) >%D%/work/$$n.log 2>&1; \
	  then r=0; else r=1; fi; \
	  grep -E '^(stat::number_of_executed_units|stat::new_units_added|stat::peak_rss_mb)' %D%/work/$$n.log; \
	  test $$r = 0 || { tail -60 %D%/work/$$n.log; exit 1; }; \
	  ls %D%/work/$$n-crash-* %D%/work/$$n-leak-* %D%/work/$$n-timeout-* >/dev/null 2>&1 && \
	    { echo "fuzz-$$n: found a failing input in %D%/work/"; exit 1; }; \
	done; echo "fuzz: no crash"
else
fuzz:
	@echo "make fuzz needs: ./configure --enable-fuzz CC=clang"; exit 1
endif
.PHONY: fuzz
clean-local: clean-fuzz
clean-fuzz:
	-rm -rf %D%/work
.PHONY: clean-fuzz
