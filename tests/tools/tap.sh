# SPDX-License-Identifier: MIT
# tap.sh - sourced by the tools' shell tests: the sim backend and nothing else
# of the caller's VMMX_* environment, and TAP helpers.  The test sets $tmp (a
# scratch directory) before sourcing this file.
#   check STATUS DESCRIPTION     ok when STATUS is 0
#   skip REASON                  a skipped assertion
#   usage_error TOOL DESCRIPTION NEEDLE ARGS...
#                                TOOL -q ARGS exits 2, says NEEDLE on stderr
#                                and nothing on stdout
#   pycheck DESCRIPTION FILE EXPR  EXPR (Python, over d = the JSON in FILE;
#                                r = d["results"] and row(size, placement) for
#                                vmmx-place output) is true; skipped without python3
#   $plot_why                    empty when vmmx-plot can draw (matplotlib is
#                                there), else why not: plot tests skip with it
for v in $(env | sed -n 's/^\(VMMX_[A-Z_0-9]*\)=.*/\1/p'); do unset "$v"; done
VMMX_BACKEND=sim
export VMMX_BACKEND

if command -v python3 >/dev/null 2>&1; then py=python3; else py=; fi
n=0
check() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
skip() {
	n=$((n + 1))
	echo "ok $n # SKIP $1"
}
usage_error() {
	tool=$1 d=$2 needle=$3
	shift 3
	"$tool" -q "$@" >"$tmp/out" 2>"$tmp/err"
	st=$?
	[ $st -eq 2 ] && grep -q -- "$needle" "$tmp/err" && test ! -s "$tmp/out"
	check $? "$d (exit 2, names $needle)"
	[ $st -eq 2 ] || echo "# exit status $st"
}
pycheck() {
	if [ -z "$py" ]; then skip "no python3: $1"; return; fi
	$py -c 'import json, math, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
r = d.get("results", []) if isinstance(d, dict) else []
def row(size, name): return [x for x in r if x["size"] == size and x["placement"] == name][0]
sys.exit(0 if eval(sys.argv[2]) else 1)' "$2" "$3" 2>"$tmp/py.err"
	st=$?
	check $st "$1"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/py.err"
}

# vmmx-plot from the build tree, its module from the source tree.
PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONPATH
plot_why=
if [ -z "$py" ]; then
	plot_why="no python3"
elif ! "$top_builddir/tools/vmmx-plot" --check >/dev/null 2>"$tmp/plot.why"; then
	plot_why=$(head -n 1 "$tmp/plot.why")
	plot_why=${plot_why:-vmmx-plot --check failed}
fi
# png_ok FILE: a PNG (its signature) of 1 byte to 256 KiB (five residency charts: 126 KB).
png_ok() {
	[ "$(od -An -tx1 -N8 "$1" | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
		[ "$(wc -c <"$1")" -gt 0 ] && [ "$(wc -c <"$1")" -lt 262144 ]
}
