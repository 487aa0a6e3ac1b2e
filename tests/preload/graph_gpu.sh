#!/bin/sh
# SPDX-License-Identifier: MIT
# graph_gpu.sh - CUDA graphs under vmmx-run's launch watch on the GPU (not
# part of make check): an unmodified PyTorch program replaying a captured
# graph (torch_chain.py --graph: 24 layers, 3 GiB of weights, 5 replays
# timed after one) natively, under --launches --trace, and under
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
# chain NAME [VMMX-RUN OPTIONS...]: the graph chain natively (no options) or
# under vmmx-run; its output in $out/NAME, its report in $out/NAME.report.
chain() {
	name=$1
	shift
	rm -f "$out/$name.report"
	if [ $# -eq 0 ]; then
		"$py" "$src/torch_chain.py" --graph --layers 24 --steps 5 >"$out/$name" 2>&1
	else
		"$run" "$@" --report-file "$out/$name.report" -- \
			"$py" "$src/torch_chain.py" --graph --layers 24 --steps 5 >"$out/$name" 2>&1
	fi
	st=$?
	echo "$name: $(tail -2 "$out/$name" | tr '\n' ' ')"
	[ -f "$out/$name.report" ] && grep -A4 '^  launches' "$out/$name.report"
	[ $st -eq 0 ] && grep -q 'eager_equal True' "$out/$name" &&
		{ [ "$name" = native ] || [ "$(sum "$out/$name")" = "$(sum "$out/native")" ]; }
}

chain native
check $? "natively, the replayed graph gives the eager result"
chain watch --launches --trace "$out/watch.trace"
check $? "under vmmx-run --launches, the replays give the eager result and native's checksum"
grep -q 'graphs  *[6-9][0-9]* launches watched, 0 not read; [1-9][0-9]* graphs read at instantiation ([1-9][0-9]* kernel nodes' "$out/watch.report"
check $? "--report: the 6 replays watched, none unread, the graph read with its kernel nodes"
n=$(grep '"event":"launch"' "$out/watch.trace" | grep -c '"kernel":"graph:[1-9][0-9]*".*"chunks_named":[1-9]')
[ "$n" -ge 6 ]
check $? "--trace: each replay recorded as one launch naming chunks ($n records)"
chain place --device-limit 2GiB --placement launch
check $? "--placement launch past a 2 GiB limit (3 GiB of weights): the eager result and native's checksum"
grep -q 'placement  *launch: [1-9][0-9]* segments brought to the device' "$out/place.report"
check $? "--report: segments brought to the device for the graph's replays"
exit $bad
