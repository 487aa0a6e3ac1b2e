#!/bin/sh
# SPDX-License-Identifier: MIT
# The vmmx Python package's tests (python/tests) under pytest, as TAP: one
# line per pytest test.  The ctypes layer runs on the sim backend against the
# build tree's libvmmx; torch and CuPy tests skip with their reason where those
# are missing.  Skipped as a whole without python3 or pytest, and under ASan
# unless the ASan runtime can be preloaded into python.
# The first python that has pytest: $PYTHON, python3 on the PATH, the system's.
py=
for p in ${PYTHON:-} python3 /usr/bin/python3; do
	if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import pytest' >/dev/null 2>&1; then
		py=$p; break
	fi
done
if [ -z "$py" ]; then
	echo "1..0 # SKIP no python3 with pytest (apt-get install python3-pytest)"; exit 0
fi
lib="$top_builddir/lib/.libs/libvmmx.so"
if [ ! -f "$lib" ]; then
	echo "1..0 # SKIP no shared library built ($lib)"; exit 0
fi
# $NM may carry options ("nm -B"): unquoted on purpose
if ${NM:-nm} -D "$lib" 2>/dev/null | grep -q __asan_init; then
	asan=$(${CC:-cc} -print-file-name=libasan.so 2>/dev/null)
	case $asan in
	/*) LD_PRELOAD="$asan${LD_PRELOAD:+:$LD_PRELOAD}"; export LD_PRELOAD
	    ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"; export ASAN_OPTIONS ;;
	*) echo "1..0 # SKIP ASan build and no libasan.so to preload into $py"; exit 0 ;;
	esac
fi
VMMX_LIBRARY=$lib; export VMMX_LIBRARY
PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}"; export PYTHONPATH
out=$(cd "$top_srcdir/python" && "$py" -m pytest -v -rs -p no:cacheprovider tests 2>&1)
rc=$?
echo "$out" | awk -v rc=$rc '
	/ (PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)( |$)/ && /::/ {
		n++
		name = $1
		if ($0 ~ / PASSED/ || $0 ~ / XFAIL/) print "ok " n " - " name
		else if ($0 ~ / SKIPPED/) n-- # counted from the summary, with its reason
		else print "not ok " n " - " name
	}
	# -rs summary: every skip, a whole module (torch or CuPy missing) or one test
	/^SKIPPED \[[0-9]+\] / {
		s = $0; sub(/^SKIPPED \[[0-9]+\] /, "", s)
		w = s; sub(/: .*/, "", w); r = s; sub(/^[^:]*:[0-9]+: /, "", r)
		n++; print "ok " n " - " w " # SKIP " r
	}
	{ print "# " $0 > "/dev/stderr" }
	END {
		# rc 5: no test collected, which must not pass silently
		if (!n) { print "not ok 1 - pytest collected and ran tests (exit " rc ")"; n = 1 }
		else if (rc != 0 && rc != 1) { n++; print "not ok " n " - pytest exited " rc }
		print "1.." n
	}'
