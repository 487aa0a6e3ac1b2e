#!/bin/sh
# SPDX-License-Identifier: MIT
# A short, bounded run of the torture test for `make check` (the full run is
# `make stress`): 8 threads, STRESS_SMOKE seconds (default 3), 1% faults.
TSAN_OPTIONS="suppressions=$top_srcdir/tests/stress/tsan.supp ${TSAN_OPTIONS:-}"
export TSAN_OPTIONS
exec "$top_builddir/tests/stress/stress" -t 8 -d "${STRESS_SMOKE:-3}" -s 42
