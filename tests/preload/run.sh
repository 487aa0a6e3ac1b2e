#!/bin/sh
# SPDX-License-Identifier: MIT
# vmmx-run itself: options refused by name (exit 2), a program that never
# uses CUDA runs unchanged, cudaMemGetInfo in each --meminfo mode, a pool
# sized from it as XLA's BFC allocator sizes its own, --report and --trace
# on a program that spills.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-run.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$top_srcdir/tests/preload/env.sh"
export VMMX_SIM_DEVICE_MEM=1GiB VMMX_HOST_LIMIT=1GiB

echo "1..33"

refused() { # OPTION VALUE: exit 2 and the option named on stderr
	"$run" "$1" "$2" -- true 2>"$tmp/err"
	st=$?
	[ $st -eq 2 ] && grep -q -- "$1 '$2'" "$tmp/err"
	check $? "vmmx-run $1 $2 is refused by name with exit 2"
}
refused --device-limit 12XB
refused --headroom -1
refused --host-limit 101%
refused --policy no-such-policy
refused --policy device-first:bogus=1
refused --meminfo both
refused --meminfo device+host:12XB
"$run" --bogus -- true 2>/dev/null
check $([ $? -eq 2 ]; echo $?) "an unknown option: exit 2"
"$run" 2>/dev/null
check $([ $? -eq 2 ]; echo $?) "no program: exit 2"
"$run" -- /nonexistent/program 2>/dev/null
check $([ $? -eq 127 ]; echo $?) "a program that is not there: exit 127"
"$run" --help | grep -q -- '--device-limit SIZE'
check $? "--help lists the options"

# A program that never uses CUDA: same output, same exit code.
prog='echo out; echo err >&2; printf "%s\n" "$@"; exit 3'
sh -c "$prog" x a "b c" >"$tmp/out1" 2>"$tmp/err1"
st1=$?
"$run" --report --device-limit 1GiB -- sh -c "$prog" x a "b c" >"$tmp/out2" 2>"$tmp/err2"
st2=$?
check $([ $st1 -eq 3 ] && [ $st2 -eq 3 ]; echo $?) "a program without CUDA keeps its exit code"
cmp -s "$tmp/out1" "$tmp/out2" && cmp -s "$tmp/err1" "$tmp/err2"
check $? "a program without CUDA keeps its output (standard output and error)"
"$run" -- "$client" spill >"$tmp/out" 2>"$tmp/err"
check $? "a CUDA program without hooks of its own runs (the client's spill mode)"

# VMMX_RUN_CACHE_FIRST: a caching allocator as PyTorch's gives its cached
# block back when a request that would spill is refused once (client.c).
cache_first() { # MODE CHECKS PATTERN TEXT: client cache-first MODE (VMMX_RUN_CACHE_FIRST=1 but off), its report matching PATTERN
	rm -f "$tmp/cf"
	if [ "$1" = off ]; then unset VMMX_RUN_CACHE_FIRST; else export VMMX_RUN_CACHE_FIRST=1; fi
	"$run" --policy device-first --device-limit 256MiB --headroom 0 --report-file "$tmp/cf" -- \
		"$client" cache-first "$1" >"$tmp/cft" 2>&1
	st=$?
	grep -q '^not ok' "$tmp/cft" && st=1
	[ "$(grep -c '^ok' "$tmp/cft")" -eq "$2" ] || st=1
	if [ -n "$3" ]; then grep -q "$3" "$tmp/cf" || st=1; else ! grep -q 'cache first' "$tmp/cf" || st=1; fi
	check $st "$4 ($2 checks and the report)"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/cft" "$tmp/cf"
	unset VMMX_RUN_CACHE_FIRST
}
cache_first on 16 '^  cache first      2 requests refused once; asked again, 1 landed on the device, 1 spilled; 0 followed by another request (refusals stopped there)$' \
	"VMMX_RUN_CACHE_FIRST=1: a request of 0 bytes passes; a weight that would spill beside an unused segment refused once, the program's cached block given back, the weight on the device; none refused in a capture (the mode left as it was) nor cudaMallocAsync; a cuMemAlloc with nothing to give back refused, asked again, spilled, and none refused after it"
cache_first off 16 '' \
	"without VMMX_RUN_CACHE_FIRST nothing is refused: the weights spill beside the cached block, no report line"
cache_first none 4 '^  cache first      0 requests refused once; asked again, 0 landed on the device, 0 spilled; 0 followed by another request (refusals go on)$' \
	"VMMX_RUN_CACHE_FIRST=1, the device full of memory in use (a large segment set by a memset): a request that spills is not refused"
cache_first graph 6 '^  cache first      0 requests refused once; asked again, 0 landed on the device, 0 spilled; 0 followed by another request (refusals stopped there)$' \
	"VMMX_RUN_CACHE_FIRST=1, beside an unused segment: a pitched allocation is not refused; in a program that launched a CUDA graph (PyTorch frees no cache while it captures) neither is a plain one: refusals stop"
cache_first other 8 '^  cache first      1 requests refused once; asked again, 0 landed on the device, 0 spilled; 1 followed by another request (refusals stopped there)$' \
	"VMMX_RUN_CACHE_FIRST=1, beside an unused segment: a request libvmmx's cache serves and one larger than the segment are not refused; a program that asks for less after a refusal: served, and no request refused after it"

# cudaMemGetInfo, each mode (client meminfo prints 3 TAP lines each; renumbered here)
for mode in device device+host device+host:512MiB; do
	"$run" --policy device-first --device-limit 256MiB --headroom 0 --meminfo $mode -- \
		"$client" meminfo >"$tmp/mi" 2>&1
	st=$?
	grep -q '^not ok' "$tmp/mi" && st=1
	[ "$(grep -c '^ok' "$tmp/mi")" -eq 3 ] || st=1
	check $st "cudaMemGetInfo in --meminfo $mode mode: $(grep '^ok 2' "$tmp/mi" | sed 's/^ok 2 - //')"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/mi"
done

# A pool sized from cuMemGetInfo in one cuMemAlloc of 3/4 of the total (XLA's
# BFC allocator with preallocation), found through dlsym on libcuda.so.1: in
# device mode it fits the device; in device+host modes it is larger than the
# device limit, is made, and lies in host memory (one location per segment).
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$top_builddir/tests/preload/.libs"
export LD_LIBRARY_PATH
bfc() { # MODE EXPECTED-POOL-MiB HOST-PEAK
	"$run" --policy device-first --device-limit 256MiB --headroom 0 --meminfo "$1" \
		--report-file "$tmp/bfc.rep" -- "$top_builddir/tests/preload/dlclient" bfc >"$tmp/bfc" 2>&1
	st=$?
	grep -q "bfc pool of $2 MiB (3/4 of .*): made" "$tmp/bfc" || st=1
	grep -q "peak  *device .*, host $3 (mapped)" "$tmp/bfc.rep" || st=1
	check $st "--meminfo $1: a BFC-style pool of 3/4 of the total ($2 MiB) is made, $3 of it in host memory"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/bfc" "$tmp/bfc.rep"
	rm -f "$tmp/bfc.rep"
}
bfc device 192 '0 B'
bfc device+host 960 '960.0 MiB'
bfc device+host:512MiB 576 '576.0 MiB'

# --report and --trace on a program that spills (plain device-first: every
# host chunk is a fallback at the limit)
"$run" --policy device-first --device-limit 256MiB --headroom 0 --report --trace "$tmp/trace.json" -- \
	"$client" spill >"$tmp/out" 2>"$tmp/rep"
check $? "the spilling client exits 0 under --report --trace"
grep -q '^vmmx-run report' "$tmp/rep" && grep -q 'allocations  *3 ' "$tmp/rep"
check $? "--report counts the allocations"
grep -q 'peak  *device 256.0 MiB, host 128.0 MiB' "$tmp/rep"
check $? "--report gives the peak bytes per location"
grep -q 'fallbacks  *[1-9][0-9]* chunks: limit [1-9]' "$tmp/rep"
check $? "--report gives fallbacks by reason"
grep -q 'largest spilled allocations' "$tmp/rep" && grep -q '128.0 MiB at 0x.*(cudaMalloc): 128.0 MiB in host memory' "$tmp/rep"
check $? "--report lists the largest spilled allocations"
grep -q '"host"' "$tmp/trace.json" 2>/dev/null || grep -qi 'host' "$tmp/trace.json" 2>/dev/null
check $? "--trace writes the JSON trace with host placements"
sed 's/^/# /' "$tmp/rep"

# The default placement, and VMMX_POLICY from the environment kept.
"$run" --device-limit 256MiB --headroom 0 --report -- "$client" spill >"$tmp/out" 2>"$tmp/rep"
grep -q 'policy device-first:reserve=64MiB$' "$tmp/rep" &&
	grep -q 'peak  *device 128.0 MiB, host 256.0 MiB' "$tmp/rep"
check $? "the default policy, device-first:reserve=64MiB, keeps 64 MiB of the device for small allocations (the second 128 MiB goes whole to host memory)"
VMMX_POLICY=host "$run" --device-limit 256MiB --headroom 0 --report -- "$client" spill >"$tmp/out" 2>"$tmp/rep"
grep -q 'policy host$' "$tmp/rep"
check $? "VMMX_POLICY from the environment is kept"
