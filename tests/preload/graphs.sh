#!/bin/sh
# SPDX-License-Identifier: MIT
# CUDA graphs under vmmx-run's launch watch, on the sim backend:
# launchclient's graph modes print the TAP of their calls (each reaches the
# fake driver unchanged); then the report's counts, the trace's records of
# graph launches, placement before a graph launch, and the hooks passed
# straight through when launches are not watched.  1 device of 1 GiB, a
# 256 MiB device limit, no headroom, chunks of at most 64 MiB.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-graphs.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$top_srcdir/tests/preload/env.sh"
lc="$top_builddir/tests/preload/launchclient"
export VMMX_SIM_DEVICE_MEM=1GiB VMMX_HOST_LIMIT=1GiB VMMX_CHUNK_MAX=64MiB
opts="--policy device-first --device-limit 256MiB --headroom 0"

# Watched, reported and traced.
"$run" $opts --placement alloc --launches --report-file "$tmp/rep" --trace "$tmp/trace" -- "$lc" graphs >"$tmp/tap" 2>"$tmp/err"
st=$?
grep -v '^1\.\.' "$tmp/tap"
n=$(grep -c '^\(not \)\{0,1\}ok ' "$tmp/tap")
sed 's/^/# /' "$tmp/err"
check $st "launchclient graphs exits 0 under vmmx-run --launches --trace"
grep -q 'graphs  *7 launches watched, 3 not read; 4 graphs read at instantiation (8 kernel nodes, 1 without a parameter layout; 2 memcpy/memset nodes not read; 0 segments past the 256 kept), 1 not read, 1 forgotten when changed in place; 0 launches captured, not placed$' "$tmp/rep"
check $? "--report: 7 graph launches watched; 3 not read (a graph the driver would not describe, one changed in place, a handle never instantiated); 4 graphs read with 8 kernel nodes, 1 without a layout, 2 copy nodes not read"
grep -q 'launches  *0 watched: .*; without a parameter layout 0; passed unread before memory was seen spilled 0$' "$tmp/rep"
check $? "--report: graph launches are not counted as kernel launches"
grep -q 'chunks named  *19, 11 of them in host memory; 5 launches read spilled memory$' "$tmp/rep"
check $? "--report: the chunks the graph launches named: 3 x 5 (3 in host memory), 2 x 1, 1, 1"
sed 's/^/# /' "$tmp/rep"

grep '"event":"launch"' "$tmp/trace" >"$tmp/launches"
[ "$(wc -l <"$tmp/launches")" -eq 7 ]
check $? "--trace writes one record per graph launch watched, none for those not read"
l() { sed -n "${1}p" "$tmp/launches"; }
base() { sed -n "s/.* $1=\(0x[0-9a-f]*\).*/\1/p" "$tmp/tap"; }
st=0
for i in 1 2 3; do
	l $i | grep -q '"api":"cuGraphLaunch","kernel":"graph:5","stream":"0x5eed","params":5,"cycle_pos":-\{0,1\}[0-9]*,"shared":0,"chunks_named":5,"chunks_host":3,' || st=1
done
check $st "the graph's three launches: 5 kernel nodes, 5 segments named, 3 in host memory"
st=0
for v in a a2 b c d; do
	b=$(base $v)
	[ -n "$b" ] && l 1 | grep -q "\"base\":\"$b\"" || { st=1; echo "# $v ($b) not in: $(l 1)"; }
done
check $st "the graph's record names a (interior pointer), b (second chunk), a2 (in a struct), c and d (child graph, CUfunction and CUkernel)"
b=$(base x)
[ -n "$b" ] && ! l 1 | grep -q "\"base\":\"$b\""
check $? "x, named only by a kernel without a parameter layout, is not named"
l 4 | grep -q '"api":"cudaGraphLaunch","kernel":"graph:1","stream":"0x5eed","params":1,.*"chunks_named":1,"chunks_host":0,"chunks":\[{"base":"'"$(base a2)"'"' &&
	l 5 | grep -q '"api":"cudaGraphLaunch","kernel":"graph:1"'
check $? "the runtime's graph launches, read once, name a2"
l 6 | grep -q '"api":"cuGraphLaunch","kernel":"graph:1","stream":"0x2",.*"chunks_named":1,"chunks_host":1,"chunks":\[{"base":"'"$(base b)"'"'
check $? "a new graph at a destroyed one's handle names its own segment (b), on the per-thread stream"
l 7 | grep -q '"api":"cudaGraphLaunch","kernel":"graph:1",.*"chunks":\[{"base":"'"$(base b)"'"'
check $? "an executable graph updated from another graph names that graph's segment"

# tapped N TEXT MODE [OPTIONS...]: launchclient MODE under vmmx-run $opts
# OPTIONS (report in $tmp/repN); exit 0 and every check of its TAP passed
# make one check, TEXT.
tapped() {
	t=$1 text=$2 mode=$3
	shift 3
	"$run" $opts "$@" --report-file "$tmp/rep$t" -- "$lc" "$mode" >"$tmp/tap$t" 2>&1
	st=$?
	grep -q '^not ok' "$tmp/tap$t" && st=1
	check $st "$text ($(grep -c '^ok' "$tmp/tap$t") checks)"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap$t"
}

# Not watched: every call reaches the driver, nothing is read (the client checks it).
tapped 0 "--placement alloc, without --launches: the graph calls reach the driver unchanged and nothing is read" \
	graphs --placement alloc

# --placement launch: what a graph names is on the device when its launch is passed on.
tapped 1 "--placement launch: each graph's segments on the device at its launch, the data intact" \
	graph-place --placement launch
grep -q 'placement  *launch: 4 segments brought to the device (256.0 MiB: ahead 0, on demand 4), 4 sent back' "$tmp/rep1" &&
	grep -q '1 launches captured, not placed$' "$tmp/rep1"
st=$?
check $st "--report: 4 segments brought in on demand for the graph launches (w4, w5, then w0, w1), 4 sent back; the launch into a capture counted, not placed"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/rep1"

# The lookup paths, watched and not.
tapped 2 "watched: cuGetProcAddress and dlsym hand back the interposer's graph entry points" \
	graph-lookups --launches
tapped 3 "not watched (--placement alloc): they hand back the driver's own" graph-lookups \
	--placement alloc
echo "1..$n"
