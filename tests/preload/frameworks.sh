#!/bin/bash
# SPDX-License-Identifier: MIT
# frameworks.sh - unmodified JAX, Triton and numba-cuda programs past a device
# limit (not part of make check; the GPU machine).  Run from a configured and
# built tree (cuda backend):
#   cd build && bash ../tests/preload/frameworks.sh [PYTHON]
# Each client (tests/preload/frameworks/*.py) runs three ways: natively on
# the whole GPU (the reference), natively with all but LIMIT GiB of the GPU
# held by a helper process (hold.py: the reduced memory situation; out of
# memory expected), and under vmmx-run --device-limit LIMIT GiB, in each of
# its modes; the vmmx-run results are compared with the reference and one
# summary line per client and mode is printed at the end:
#   jax bfc-prealloc: native ok, native at 4 GiB oom, vmmx-run ok, results match: ok | report: ...
# A client whose framework is missing is skipped (its script exits 77 with
# the reason).  Environment: LIMIT (GiB, default 4), GIB (the JAX arrays,
# default 8), TGIB (the Triton and numba arrays, default 6), HOSTCAP (GiB
# of host memory --meminfo device+host:SIZE lets a pool plan for, default
# 16), CLIENTS (default "jax triton numba"), OUT (logs, default
# /tmp/vmmx-frameworks), TIMEOUT (seconds per run, default 150), RUN_OPTS
# (more vmmx-run options for every mode, e.g. "--placement launch"), RUN_ENV
# (variables for every vmmx-run, e.g. "VMMX_RUN_PLACE_PARK=1": the VMMX_
# variables of the caller's environment are dropped).
# Exit status: 0 when every client that ran is ok, 1 otherwise.
set -u
build=$(pwd)
src=$(cd "$(dirname "$0")" && pwd)/frameworks
py=${1:-${PYTHON:-python3}}
limit=${LIMIT:-4}
gib=${GIB:-8}
tgib=${TGIB:-6}
hostcap=${HOSTCAP:-16}
clients=${CLIENTS:-jax triton numba}
out=${OUT:-/tmp/vmmx-frameworks}
tmo=${TIMEOUT:-150}
run="$build/tools/vmmx-run"
[ -x "$run" ] || { echo "frameworks.sh: no $run: run me from a built tree"; exit 2; }
for v in $(env | sed -n 's/^\(VMMX_[A-Z_0-9]*\)=.*/\1/p'); do unset "$v"; done
export VMMX_RUN_PRELOAD="$build/preload/.libs/libvmmx-preload.so"
export LD_LIBRARY_PATH="$build/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
mkdir -p "$out"
rm -f "$out"/*.rep
summary=()
fail=0
start=$(date +%s)

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1
"$py" --version 2>&1

# status RC: the word for a run's exit code
status() {
	case $1 in
	0) echo ok ;;
	3) echo oom ;;
	77) echo skipped ;;
	124 | 137) echo timeout ;;
	*) echo "failed($1)" ;;
	esac
}

# The report's figures on one line.
report_line() {
	local r=$1
	[ -s "$r" ] || { echo "no report"; return; }
	local a l p v
	a=$(sed -n 's/^  allocations *\([0-9]*\) (\([^)]*\)): \(.*\); failed \([0-9]*\)$/\1 allocations (\2): \3, failed \4/p' "$r" | head -1)
	l=$(sed -n "s/^  lookups *answered with the interposer's: /lookups /p" "$r" | head -1)
	p=$(sed -n 's/^    peak *\(device .*\) (mapped).*/peak \1/p' "$r" | head -1)
	v=$(sed -n "s/^  passed through *the program's own VMM: /own VMM /p" "$r" | head -1)
	echo "${a:-no allocation through libvmmx}; ${p:-no peak}; ${l}; ${v}"
}

# client NAME SCRIPT ARGS... ; then MODES: lines of "mode|env|vmmx-run options"
client() {
	local name=$1 script=$2; shift 2
	local args=("$@")
	echo "== $name: reference (native, whole GPU)"
	env $ref_env timeout "$tmo" "$py" "$src/$script" "${args[@]}" >"$out/$name.native" 2>&1
	local rc=$?
	tail -3 "$out/$name.native"
	if [ $rc -eq 77 ]; then
		summary+=("$name: skipped: $(grep -m1 '^SKIP' "$out/$name.native")")
		return
	fi
	local native
	native=$(status $rc)
	echo "== $name: native with ${limit} GiB left free"
	local fifo="$out/hold.fifo"
	rm -f "$fifo"; mkfifo "$fifo"
	"$py" "$src/hold.py" "$limit" <"$fifo" >"$out/hold.log" 2>&1 &
	local holder=$!
	exec 9>"$fifo"
	for _ in $(seq 60); do grep -q held "$out/hold.log" && break; sleep 0.5; done
	cat "$out/hold.log"
	env $ref_env timeout "$tmo" "$py" "$src/$script" "${args[@]}" >"$out/$name.held" 2>&1
	local held
	held=$(status $?)
	tail -2 "$out/$name.held"
	exec 9>&-
	wait $holder 2>/dev/null
	rm -f "$fifo"
	local mode menv mopts
	while IFS='|' read -r mode menv mopts; do
		[ -n "$mode" ] || continue
		echo "== $name $mode: vmmx-run --device-limit ${limit}GiB $mopts ($menv)"
		local rep="$out/$name-$mode.rep"
		# shellcheck disable=SC2086
		env $menv ${RUN_ENV:-} timeout "$tmo" "$run" --device-limit "${limit}GiB" $mopts ${RUN_OPTS:-} \
			--report-file "$rep" -- \
			"$py" "$src/$script" "${args[@]}" >"$out/$name-$mode.vmmx" 2>&1
		local rc2=$? cmp verdict
		tail -3 "$out/$name-$mode.vmmx"
		cmp=$("$py" "$src/compare.py" "$out/$name.native" "$out/$name-$mode.vmmx" 2>&1)
		if [ $rc2 -eq 0 ] && [ "$cmp" = match ]; then verdict=ok; else verdict=FAIL; fail=1; fi
		summary+=("$name $mode: native $native, native at ${limit} GiB $held, vmmx-run $(status $rc2), results $cmp: $verdict | report: $(report_line "$rep")")
	done <<<"$modes"
}

for c in $clients; do
	case $c in
	jax)
		ref_env="XLA_PYTHON_CLIENT_PREALLOCATE=false"
		modes="bfc-prealloc|XLA_PYTHON_CLIENT_PREALLOCATE=true XLA_PYTHON_CLIENT_ALLOCATOR=bfc|--meminfo device+host:${hostcap}GiB
bfc-grow|XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=bfc|--meminfo device+host:${hostcap}GiB
platform|XLA_PYTHON_CLIENT_ALLOCATOR=platform|--meminfo device
cuda_async|XLA_PYTHON_CLIENT_PREALLOCATE=false XLA_PYTHON_CLIENT_ALLOCATOR=cuda_async|--meminfo device+host:${hostcap}GiB"
		client jax jax_mlp.py --gib "$gib" ;;
	triton)
		ref_env="" modes="kernel||"
		client triton triton_kernel.py --gib "$tgib" ;;
	numba)
		ref_env="" modes="kernel||"
		client numba numba_kernel.py --gib "$tgib" ;;
	*) echo "frameworks.sh: unknown client $c"; fail=1 ;;
	esac
done

echo "== summary ($(( $(date +%s) - start )) s; logs and reports in $out)"
for s in "${summary[@]}"; do echo "$s"; done
exit $fail
