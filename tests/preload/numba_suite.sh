#!/bin/bash
# SPDX-License-Identifier: MIT
# numba_suite.sh - numba-cuda's own driver and memory tests, shipped in the
# installed package, natively and under vmmx-run; prints the pass/fail
# difference per test (not part of make check; the GPU machine).  Run from a
# configured and built tree (cuda backend):
#   cd build && bash ../tests/preload/numba_suite.sh [PYTHON]
# The tests: SUITE (default numba.cuda.tests.cudadrv: contexts, memory,
# managed memory, IPC, streams, events, the driver's API), found from the
# installed package with pytest --pyargs (numba-cuda's documented runner),
# or python -m numba.runtests when pytest cannot collect them.  vmmx-run
# options: VMMX_OPTS (default --device-limit 8GiB).  Per test it prints
# "native OUTCOME, vmmx-run OUTCOME" for every test whose outcome differs,
# then the counts; docs/PRELOAD.md lists the differences that are by design
# (IPC of libvmmx memory refused, an out-of-memory test that now succeeds).
# Exits 77 when numba-cuda or pytest is missing.
set -u
build=$(pwd)
py=${1:-${PYTHON:-python3}}
suite=${SUITE:-numba.cuda.tests.cudadrv}
opts=${VMMX_OPTS:---device-limit 8GiB}
out=${OUT:-/tmp/vmmx-numba-suite}
tmo=${TIMEOUT:-900}
run="$build/tools/vmmx-run"
[ -x "$run" ] || { echo "numba_suite.sh: no $run: run me from a built tree"; exit 2; }
for v in $(env | sed -n 's/^\(VMMX_[A-Z_0-9]*\)=.*/\1/p'); do [ "$v" = VMMX_OPTS ] || unset "$v"; done
export VMMX_RUN_PRELOAD="$build/preload/.libs/libvmmx-preload.so"
export LD_LIBRARY_PATH="$build/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out"

if ! "$py" -c 'import numba.cuda' 2>"$out/import.err"; then
	echo "SKIP: numba-cuda is not importable: $(tail -1 "$out/import.err")"
	exit 77
fi
"$py" -c 'import numba, numba.cuda as c; print("numba", numba.__version__, "numba.cuda at", c.__file__)'
# numba.cuda.testing imports filecheck at load time; without it no test module
# imports.  A stand-in (numba_shim/filecheck) lets them load; tests that run
# FileCheck fail in both runs alike.
# The fixture its test classes ask for lives in a conftest.py of numba-cuda's
# source tree, not in the package: numba_shim/plugin/numba_fixtures.py.
shim=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/numba_shim
export PYTHONPATH="$shim/plugin${PYTHONPATH:+:$PYTHONPATH}"
if ! "$py" -c 'import filecheck' 2>/dev/null; then
	export PYTHONPATH="$shim:$PYTHONPATH"
	echo "filecheck is not installed: its stand-in from $shim is used"
fi

# runner LABEL PREFIX...: the suite's outcomes into $out/LABEL.tsv (test<TAB>outcome)
runner() {
	local label=$1; shift
	if "$py" -c 'import pytest' 2>/dev/null; then
		timeout "$tmo" "$@" "$py" -m pytest --pyargs "$suite" -q -p no:cacheprovider --import-mode=importlib --continue-on-collection-errors -p numba_fixtures \
			--junitxml="$out/$label.xml" >"$out/$label.log" 2>&1
		echo "$label: pytest exit $?"
		"$py" - "$out/$label.xml" >"$out/$label.tsv" <<'PY'
import sys
import xml.etree.ElementTree as ET
for tc in ET.parse(sys.argv[1]).iter("testcase"):
    name = f"{tc.get('classname')}.{tc.get('name')}"
    kids = {c.tag for c in tc}
    outcome = ("error" if "error" in kids else "failed" if "failure" in kids
               else "skipped" if "skipped" in kids else "passed")
    print(f"{name}\t{outcome}")
PY
		[ -s "$out/$label.tsv" ] && return
		echo "$label: pytest collected nothing; trying numba.runtests"
	fi
	timeout "$tmo" "$@" "$py" -m numba.runtests -v "$suite" >"$out/$label.log" 2>&1
	echo "$label: numba.runtests exit $?"
	sed -n 's/^\(test[^ ]*\) (\([^)]*\)) \.\.\. \(ok\|FAIL\|ERROR\|skipped.*\|expected failure\|unexpected success\)$/\2.\1\t\3/p' \
		"$out/$label.log" | sed 's/\tok$/\tpassed/; s/\tFAIL$/\tfailed/; s/\tERROR$/\terror/; s/\tskipped.*/\tskipped/' >"$out/$label.tsv"
}

start=$(date +%s)
runner native
# shellcheck disable=SC2086
runner vmmx "$run" $opts --report-file "$out/vmmx.rep" --
"$py" - "$out/native.tsv" "$out/vmmx.tsv" <<'PY'
import collections
import sys

def load(p):
    d = {}
    for line in open(p):
        if "\t" in line:
            k, v = line.rstrip("\n").split("\t", 1)
            d[k] = v
    return d

a, b = load(sys.argv[1]), load(sys.argv[2])
diff = 0
for t in sorted(set(a) | set(b)):
    x, y = a.get(t, "absent"), b.get(t, "absent")
    if x != y:
        diff += 1
        print(f"DIFF {t}: native {x}, vmmx-run {y}")
for label, d in (("native", a), ("vmmx-run", b)):
    c = collections.Counter(d.values())
    print(f"{label}: {len(d)} tests: " + ", ".join(f"{k} {c[k]}" for k in sorted(c)))
print(f"{diff} tests differ")
PY
echo "($(( $(date +%s) - start )) s; logs, junit XML and the report in $out)"
sed 's/^/report: /' "$out/vmmx.rep" 2>/dev/null
