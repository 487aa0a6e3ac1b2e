#!/bin/sh
# SPDX-License-Identifier: MIT
# graph_gpu.sh - CUDA graphs under vmmx-run's launch watch on the GPU (not
# part of make check): an unmodified PyTorch program replaying a captured
# graph (torch_graph.py) natively, under --launches --trace, and under
# --placement launch past a device limit.  Run from the build tree:
#   sh tests/preload/graph_gpu.sh [PYTHON]
# Prints one "ok"/"not ok" line per check, and exits 1 if any failed.
py=${1:-python3}
src=$(cd "$(dirname "$0")" && pwd)
run=${RUN:-tools/vmmx-run}
out=${OUT:-/tmp/vmmx-graph-gpu}
mkdir -p "$out"
unset VMMX_DEVICE_LIMIT VMMX_POLICY
bad=0
check() {
	if [ "$1" -eq 0 ]; then echo "ok - $2"; else echo "not ok - $2"; bad=1; fi
}
sum() { sed -n 's/.*checksum \([^ ]*\).*/\1/p' "$1"; }

"$py" "$src/torch_graph.py" >"$out/native" 2>&1
st=$?
echo "native       : $(tail -1 "$out/native")"
[ $st -eq 0 ] && grep -q 'eager_equal True' "$out/native"
check $? "natively, the replayed graph gives the eager result"

"$run" --launches --report-file "$out/watch.report" --trace "$out/watch.trace" -- \
	"$py" "$src/torch_graph.py" >"$out/watch" 2>&1
st=$?
echo "--launches   : $(tail -1 "$out/watch")"
grep -A2 '^  launches' "$out/watch.report"
[ $st -eq 0 ] && [ "$(sum "$out/watch")" = "$(sum "$out/native")" ] && grep -q 'eager_equal True' "$out/watch"
check $? "under vmmx-run --launches, the checksum equals native's"
grep -q 'graphs  *[6-9][0-9]* launches watched, 0 not read; [1-9][0-9]* graphs read at instantiation ([1-9][0-9]* kernel nodes' "$out/watch.report"
check $? "--report: the 6 replays watched, none unread, the graph read with its kernel nodes"
n=$(grep '"event":"launch"' "$out/watch.trace" | grep -c '"kernel":"graph:[1-9][0-9]*".*"chunks_named":[1-9]')
[ "$n" -ge 6 ]
check $? "--trace: each replay recorded as one launch naming chunks ($n records)"

"$run" --device-limit 2GiB --placement launch --report-file "$out/place.report" -- \
	"$py" "$src/torch_graph.py" >"$out/place" 2>&1
st=$?
echo "--placement launch, 2 GiB limit: $(tail -1 "$out/place")"
grep -A4 '^  launches' "$out/place.report"
[ $st -eq 0 ] && [ "$(sum "$out/place")" = "$(sum "$out/native")" ] && grep -q 'eager_equal True' "$out/place"
check $? "--placement launch past a 2 GiB limit (3 GiB of weights): the checksum equals native's"
grep -q 'placement  *launch: [1-9][0-9]* segments brought to the device' "$out/place.report"
check $? "--report: segments brought to the device for the graph's replays"
exit $bad
