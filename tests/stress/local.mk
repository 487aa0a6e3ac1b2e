# SPDX-License-Identifier: MIT
# The torture test: its own targets, kept out of `make check` except for a
# short smoke run.  `make stress` runs it for STRESS_DURATION seconds
# (default 60; STRESS_ARGS adds options, e.g. -t 16 -f 20000 -s 7);
# `make lookup-bench` measures vmmx_lookup per thread for 1 to 16 threads.
STRESS_DURATION = 60
STRESS_ARGS =
check_PROGRAMS += %D%/stress
%C%_stress_LDADD = $(TEST_LDADD)
%C%_stress_CPPFLAGS = $(TEST_CPPFLAGS)
TESTS += %D%/smoke.sh
EXTRA_DIST += %D%/smoke.sh %D%/tsan.supp

stress: %D%/stress$(EXEEXT)
	$(AM_V_at): $${VMMX_BACKEND:=sim}; export VMMX_BACKEND; \
	TSAN_OPTIONS="suppressions=$(abs_top_srcdir)/%D%/tsan.supp $$TSAN_OPTIONS" \
	%D%/stress$(EXEEXT) -d $(STRESS_DURATION) $(STRESS_ARGS)
lookup-bench: %D%/stress$(EXEEXT)
	$(AM_V_at): $${VMMX_BACKEND:=sim}; export VMMX_BACKEND; \
	%D%/stress$(EXEEXT) -m lookup $(STRESS_ARGS)
.PHONY: stress lookup-bench
