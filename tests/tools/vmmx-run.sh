#!/bin/sh
# SPDX-License-Identifier: MIT
# vmmx-run's checks of its options and of the VMMX_* environment, against
# the devices the program's backend has (the sim's VMMX_SIM_DEVICES here;
# only the grammar where the cuda backend has no driver), each error once,
# naming the option or the variable (exit 2); and --report-file: a path
# made absolute before the program starts, "0" and "1" as file names, an
# unwritable file refused up front, a failure at exit said on stderr.
# tests/preload/run.sh has the rest of vmmx-run (the program run unchanged,
# --meminfo, --report's contents, --trace).
run="$top_builddir/tools/vmmx-run"
client="$top_builddir/tests/preload/client"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-run-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

LD_LIBRARY_PATH="$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
VMMX_RUN_PRELOAD="$top_builddir/preload/.libs/libvmmx-preload.so"
export LD_LIBRARY_PATH VMMX_RUN_PRELOAD
# Under AddressSanitizer the interposer cannot be preloaded into programs
# that are not instrumented (tests/preload/env.sh says why): the checks,
# which end before the program starts, run with an empty file preloaded
# instead (ld.so ignores it, with a line on stderr), and the tests of the
# report the interposer writes are skipped.
asan=
if ldd "$VMMX_RUN_PRELOAD" 2>/dev/null | grep -q libasan; then
	asan="the interposer does not run under AddressSanitizer"
	: >"$tmp/empty.so"
	VMMX_RUN_PRELOAD="$tmp/empty.so"
fi

# ok_run DESCRIPTION NEEDLE VMMX-RUN-ARGS...: exit 0, not a word from
# vmmx-run, and NEEDLE in the environment the program (env) saw.  The
# variables of a test are its prefix: VAR=value ok_run ...
ok_run() {
	d=$1 needle=$2
	shift 2
	"$run" "$@" -- env >"$tmp/out" 2>"$tmp/err"
	st=$?
	[ $st -eq 0 ] && ! grep -q '^vmmx-run' "$tmp/err" && grep -q -- "$needle" "$tmp/out"
	check $? "$d: accepted"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/err"
}
# refused DESCRIPTION NEEDLE VMMX-RUN-ARGS...: exit 2, NEEDLE on stderr in
# the first line, the error said once, and the program never started.
refused() {
	d=$1 needle=$2
	shift 2
	"$run" "$@" -- sh -c 'echo started' >"$tmp/out" 2>"$tmp/err"
	st=$?
	[ $st -eq 2 ] && head -n 1 "$tmp/err" | grep -q -- "$needle" &&
		[ "$(grep -c '^vmmx-run' "$tmp/err")" -eq 1 ] && test ! -s "$tmp/out"
	check $? "$d: refused (exit 2, once, names $needle)"
	[ $st -eq 2 ] || echo "# exit status $st"
	sed 's/^/# /' "$tmp/err"
}

# ---- two simulated devices: what a machine with two GPUs accepts ----
VMMX_SIM_DEVICES=2
export VMMX_SIM_DEVICES
VMMX_DEVICE=1 ok_run "VMMX_DEVICE=1 on 2 devices" 'VMMX_DEVICE=1'
VMMX_DEVICE_LIMIT=1:4GiB ok_run "VMMX_DEVICE_LIMIT=1:4GiB on 2 devices" 'VMMX_DEVICE_LIMIT=1:4GiB'
ok_run "-p device:id=1 on 2 devices" 'VMMX_POLICY=device:id=1' -p device:id=1
ok_run "-p interleave:device1=2 on 2 devices" 'VMMX_POLICY=interleave:device1=2' \
	-p interleave:device1=2
ok_run "--device-limit 0:8GiB on 2 devices" 'VMMX_DEVICE_LIMIT=0:8GiB' --device-limit 0:8GiB
ok_run "--device-limit 8GiB,1:4GiB, --headroom 1:0 on 2 devices" 'VMMX_DEVICE_HEADROOM=1:0' \
	--device-limit 8GiB,1:4GiB --headroom 1:0

# ---- and what it does not: device 2 ----
VMMX_DEVICE=2 refused "VMMX_DEVICE=2 on 2 devices" 'VMMX_DEVICE="2" (environment): no device 2: the sim backend has 2 devices, 0 to 1'
VMMX_DEVICE_LIMIT=2:4GiB refused "VMMX_DEVICE_LIMIT=2:4GiB on 2 devices" \
	'VMMX_DEVICE_LIMIT="2:4GiB" (environment): names device 2, but the sim backend has 2 devices'
refused "--device-limit 0:8GiB,2:4GiB on 2 devices" "--device-limit '0:8GiB,2:4GiB': names device 2" \
	--device-limit 0:8GiB,2:4GiB
refused "--headroom 2:1GiB on 2 devices" "--headroom '2:1GiB': names device 2" --headroom 2:1GiB
refused "-p device:id=2 on 2 devices" "--policy 'device:id=2': .*id=2: expected an integer from 0 to 1" \
	-p device:id=2
VMMX_POLICY=interleave:device2=1 refused "VMMX_POLICY=interleave:device2=1 on 2 devices" \
	'VMMX_POLICY="interleave:device2=1" (environment): .*device2: no such device'
unset VMMX_SIM_DEVICES
refused "--device-limit 1:1GiB on 1 device" "--device-limit '1:1GiB': names device 1, but the sim backend has 1 device" \
	--device-limit 1:1GiB

# ---- the environment is checked like the options ----
VMMX_POLICY=bogus refused "VMMX_POLICY=bogus" 'VMMX_POLICY="bogus" (environment): policy "bogus" not found'
refused "-p bogus" "--policy 'bogus': policy \"bogus\" not found" -p bogus
VMMX_POLICY=host VMMX_HOST_LIMIT=12XB refused "VMMX_HOST_LIMIT=12XB, VMMX_POLICY set too" \
	'VMMX_HOST_LIMIT="12XB" (environment): expected a size'
VMMX_DEVICE_LIMIT=12XB refused "VMMX_DEVICE_LIMIT=12XB" 'VMMX_DEVICE_LIMIT="12XB" (environment): expected a size'
refused "--device-limit 12XB" "--device-limit '12XB': expected a size" --device-limit 12XB
VMMX_BACKEND=bogus refused "VMMX_BACKEND=bogus" 'VMMX_BACKEND="bogus" (environment): expected cuda or sim'
VMMX_DEVICE=one refused "VMMX_DEVICE=one" 'VMMX_DEVICE="one" (environment): expected a device ordinal'
VMMX_SIM_DEVICES=17 refused "VMMX_SIM_DEVICES=17" 'VMMX_SIM_DEVICES="17" (environment): expected a number of devices from 1 to 16'
VMMX_LOG=debug VMMX_CHUNK_SIZE=3MiB refused "VMMX_CHUNK_SIZE=3MiB, the library's log at debug" \
	'VMMX_CHUNK_SIZE=3 MiB: must be a nonzero multiple of the allocation granularity'
VMMX_LOG=loud refused "VMMX_LOG=loud" 'VMMX_LOG="loud" (environment): expected none, error'
refused "--trace into a missing directory" "--trace '$tmp/no/t.json': cannot open: No such file" \
	--trace "$tmp/no/t.json"
VMMX_POLICY=host ok_run "VMMX_POLICY from the environment is kept" 'VMMX_POLICY=host$'
ok_run "no policy anywhere: the default" 'VMMX_POLICY=device-first:reserve=64MiB$'
ok_run "no placement asked: launch, the default" '^VMMX_RUN_PLACEMENT=launch$'
ok_run "no placement asked: verified host copies" '^VMMX_HOST_COPIES=verified$'
VMMX_RUN_PLACEMENT= ok_run "VMMX_RUN_PLACEMENT empty: launch" '^VMMX_RUN_PLACEMENT=launch$'
VMMX_RUN_PLACEMENT=alloc ok_run "VMMX_RUN_PLACEMENT=alloc from the environment is kept" \
	'^VMMX_RUN_PLACEMENT=alloc$'
! grep -q '^VMMX_HOST_COPIES' "$tmp/out"
check $? "VMMX_RUN_PLACEMENT=alloc: VMMX_HOST_COPIES not set"
VMMX_RUN_PLACEMENT=lanch refused "VMMX_RUN_PLACEMENT=lanch" \
	'VMMX_RUN_PLACEMENT="lanch" (environment): expected alloc or launch'
refused "--placement lanch" "--placement 'lanch': expected alloc or launch" --placement lanch
ok_run "--placement launch: verified host copies" '^VMMX_HOST_COPIES=verified$' --placement launch
ok_run "--placement launch: sent back to the GPU only" '^VMMX_HOST_CPU_ACCESS=placed$' \
	--placement launch
VMMX_HOST_CPU_ACCESS=all ok_run "--placement launch: VMMX_HOST_CPU_ACCESS from the environment is kept" \
	'^VMMX_HOST_CPU_ACCESS=all$' --placement launch
ok_run "--placement alloc: the CPU grant left as it is" '^VMMX_RUN_PLACEMENT=alloc$' --placement alloc
! grep -q '^VMMX_HOST_CPU_ACCESS' "$tmp/out"
check $? "--placement alloc: VMMX_HOST_CPU_ACCESS not set"
ok_run "--placement launch: the chunk sizes left as they are" '^VMMX_RUN_PLACEMENT=launch$' \
	--placement launch
! grep -q '^VMMX_CHUNK_MAX' "$tmp/out"
check $? "--placement launch: VMMX_CHUNK_MAX not set"
# --torch-alloc async: PyTorch's cudaMallocAsync backend, each tensor an allocation
# (the settings the tests start from are their own).
unset PYTORCH_ALLOC_CONF PYTORCH_CUDA_ALLOC_CONF
ok_run "--torch-alloc async: PYTORCH_CUDA_ALLOC_CONF set to the cudaMallocAsync backend" \
	'^PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync$' --torch-alloc async
! grep -q '^PYTORCH_ALLOC_CONF' "$tmp/out"
check $? "--torch-alloc async: PYTORCH_ALLOC_CONF not made when the program has none"
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True ok_run "--torch-alloc async: the program's other settings kept" \
	'^PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,backend:cudaMallocAsync$' --torch-alloc async
PYTORCH_ALLOC_CONF=max_split_size_mb:128 ok_run "--torch-alloc async: PYTORCH_ALLOC_CONF (read first by PyTorch) used where set" \
	'^PYTORCH_ALLOC_CONF=max_split_size_mb:128,backend:cudaMallocAsync$' --torch-alloc async
! grep -q '^PYTORCH_CUDA_ALLOC_CONF' "$tmp/out"
check $? "--torch-alloc async with PYTORCH_ALLOC_CONF set: PYTORCH_CUDA_ALLOC_CONF not made"
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync ok_run "--torch-alloc async: the backend already asked for, left as it is" \
	'^PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync$' --torch-alloc async
VMMX_RUN_TORCH_ALLOC=async ok_run "VMMX_RUN_TORCH_ALLOC=async from the environment" \
	'^PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync$'
ok_run "--torch-alloc program: PyTorch's allocator left to the program" '^VMMX_RUN_TORCH_ALLOC=program$' \
	--torch-alloc program
! grep -q '^PYTORCH_CUDA_ALLOC_CONF\|^PYTORCH_ALLOC_CONF' "$tmp/out"
check $? "--torch-alloc program: no PyTorch setting made"
PYTORCH_CUDA_ALLOC_CONF=backend:native refused "--torch-alloc async with another backend asked for" \
	"--torch-alloc 'async': PYTORCH_CUDA_ALLOC_CONF=\"backend:native\" names another backend" --torch-alloc async
PYTORCH_CUDA_ALLOC_CONF=backend:native VMMX_RUN_TORCH_ALLOC=async refused "VMMX_RUN_TORCH_ALLOC=async with another backend asked for" \
	'VMMX_RUN_TORCH_ALLOC="async" (environment): PYTORCH_CUDA_ALLOC_CONF="backend:native" names another backend'
refused "--torch-alloc asnyc" "--torch-alloc 'asnyc': expected async, split or program" --torch-alloc asnyc
VMMX_RUN_TORCH_ALLOC=1 refused "VMMX_RUN_TORCH_ALLOC=1" 'VMMX_RUN_TORCH_ALLOC="1" (environment): expected async, split or program'
# --preset inference: the launch placement's inference settings, each where unset.
unset VMMX_RUN_PLACE_PARK VMMX_RUN_PLACE_SPREAD VMMX_RUN_TORCH_ALLOC
ok_run "--preset inference: parking and PyTorch's cached blocks of more than 1 GiB left unsplit" \
	'^VMMX_RUN_PLACE_PARK=1$' --preset inference
grep -q '^VMMX_RUN_TORCH_ALLOC=split$' "$tmp/out" &&
	grep -q '^PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:1024$' "$tmp/out" &&
	grep -q '^VMMX_RUN_PLACEMENT=launch$' "$tmp/out" && ! grep -q '^VMMX_RUN_PLACE_SPREAD' "$tmp/out"
check $? "--preset inference: VMMX_RUN_TORCH_ALLOC=split (so PYTORCH_CUDA_ALLOC_CONF) and the launch placement set, the spread left to its default"
VMMX_RUN_PLACE_PARK=0 ok_run "--preset inference: a setting of the program's own wins (VMMX_RUN_PLACE_PARK=0 kept)" \
	'^VMMX_RUN_PLACE_PARK=0$' --preset inference --torch-alloc program
! grep -q '^PYTORCH_CUDA_ALLOC_CONF\|^PYTORCH_ALLOC_CONF' "$tmp/out" && grep -q '^VMMX_RUN_TORCH_ALLOC=program$' "$tmp/out"
check $? "--preset inference with --torch-alloc program: the option wins (no PyTorch setting made)"
VMMX_RUN_PRESET=inference ok_run "VMMX_RUN_PRESET=inference from the environment" '^VMMX_RUN_PLACE_PARK=1$'
VMMX_RUN_PRESET=inference ok_run "--preset none over VMMX_RUN_PRESET=inference: nothing set" '^VMMX_RUN_PRESET=none$' --preset none
! grep -q '^VMMX_RUN_PLACE_PARK\|^VMMX_RUN_PLACE_SPREAD\|^VMMX_RUN_TORCH_ALLOC\|^PYTORCH_CUDA_ALLOC_CONF' "$tmp/out"
check $? "--preset none: no placement or PyTorch setting made"
refused "--preset fast" "--preset 'fast': expected inference or none" --preset fast
VMMX_RUN_PRESET=1 refused "VMMX_RUN_PRESET=1" 'VMMX_RUN_PRESET="1" (environment): expected inference or none'
refused "--preset inference with --placement alloc" \
	"--preset 'inference': its settings are --placement launch's, and --placement alloc was given" --preset inference --placement alloc
refused "--placement alloc with --preset inference (the other order)" \
	"--preset 'inference': its settings are --placement launch's, and --placement alloc was given" --placement alloc --preset inference
VMMX_RUN_PLACEMENT=alloc refused "--preset inference with VMMX_RUN_PLACEMENT=alloc" \
	"--preset 'inference': its settings are --placement launch's, and VMMX_RUN_PLACEMENT is \"alloc\"" --preset inference
VMMX_RUN_PLACEMENT=bogus refused "--preset inference with VMMX_RUN_PLACEMENT=bogus: refused by its own name" \
	'VMMX_RUN_PLACEMENT="bogus" (environment): expected alloc or launch' --preset inference
PYTORCH_CUDA_ALLOC_CONF=backend:native ok_run "--preset inference: the program's own PyTorch backend kept, max_split_size_mb added" \
	'^PYTORCH_CUDA_ALLOC_CONF=backend:native,max_split_size_mb:1024$' --preset inference
PYTORCH_ALLOC_CONF=max_split_size_mb:512 ok_run "--preset inference: the program's own max_split_size_mb kept" \
	'^PYTORCH_ALLOC_CONF=max_split_size_mb:512$' --preset inference
PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync ok_run "--preset inference: the program's own async backend kept, nothing to split" \
	'^PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync$' --preset inference
! grep -q '^VMMX_RUN_TORCH_ALLOC' "$tmp/out" && grep -q '^VMMX_RUN_PLACE_PARK=1$' "$tmp/out"
check $? "--preset inference with the program's async backend: no split asked for, parking still set"
# --torch-alloc split: PyTorch never splits a cached block of more than 1 GiB.
ok_run "--torch-alloc split: PYTORCH_CUDA_ALLOC_CONF set to max_split_size_mb:1024" \
	'^PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:1024$' --torch-alloc split
PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False ok_run "--torch-alloc split: the program's other settings kept" \
	'^PYTORCH_CUDA_ALLOC_CONF=expandable_segments:False,max_split_size_mb:1024$' --torch-alloc split
PYTORCH_ALLOC_CONF=max_split_size_mb:256,garbage_collection_threshold:0.6 ok_run "--torch-alloc split: the program's own max_split_size_mb kept" \
	'^PYTORCH_ALLOC_CONF=max_split_size_mb:256,garbage_collection_threshold:0.6$' --torch-alloc split
VMMX_RUN_TORCH_ALLOC=split ok_run "VMMX_RUN_TORCH_ALLOC=split from the environment" \
	'^PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:1024$'
VMMX_RUN_PLACE_PIECES=1 ok_run "VMMX_RUN_PLACE_PIECES=1: chunks of at most 128 MiB, the pieces a large segment moves in" \
	'^VMMX_CHUNK_MAX=128MiB$' --placement launch
VMMX_RUN_PLACE_PIECES=1 VMMX_CHUNK_MAX=1GiB ok_run "VMMX_RUN_PLACE_PIECES=1: VMMX_CHUNK_MAX from the environment is kept" \
	'^VMMX_CHUNK_MAX=1GiB$' --placement launch
VMMX_RUN_PLACE_PIECES=1 VMMX_CHUNK_SIZE=4MiB ok_run "VMMX_RUN_PLACE_PIECES=1 with VMMX_CHUNK_SIZE set: the chunk sizes left to it" \
	'^VMMX_CHUNK_SIZE=4MiB$' --placement launch
! grep -q '^VMMX_CHUNK_MAX' "$tmp/out"
check $? "VMMX_RUN_PLACE_PIECES=1 with VMMX_CHUNK_SIZE set: VMMX_CHUNK_MAX not set"

# ---- the cuda backend without a driver: the grammar alone ----
if VMMX_BACKEND=cuda "$top_builddir/tools/vmmx-info" >/dev/null 2>&1; then
	for i in 1 2 3 4; do skip "the cuda backend works here: no test of the grammar-only check"; done
else
	VMMX_BACKEND=cuda VMMX_DEVICE=1 ok_run "cuda without a driver: VMMX_DEVICE=1" 'VMMX_DEVICE=1'
	VMMX_BACKEND=cuda ok_run "cuda without a driver: -p device:id=1 --device-limit 1:4GiB" \
		'VMMX_DEVICE_LIMIT=1:4GiB' -p device:id=1 --device-limit 1:4GiB
	VMMX_BACKEND=cuda VMMX_DEVICE=16 refused "cuda without a driver: VMMX_DEVICE=16" \
		'VMMX_DEVICE="16" (environment): libvmmx handles devices 0 to 15'
	VMMX_BACKEND=cuda refused "cuda without a driver: --device-limit 1:1XB" "--device-limit '1:1XB': expected a size" \
		--device-limit 1:1XB
fi

# ---- --report-file ----
mkdir "$tmp/cwd" "$tmp/cwd/sub"
cd "$tmp/cwd" || exit 1
ok_run "--report-file rep.txt" "VMMX_RUN_REPORT=$tmp/cwd/rep.txt\$" --report-file rep.txt
ok_run "--report-file 0" "VMMX_RUN_REPORT=$tmp/cwd/0\$" --report-file 0
ok_run "--report-file 1" "VMMX_RUN_REPORT=$tmp/cwd/1\$" --report-file 1
ok_run "--report then --report-file" "VMMX_RUN_REPORT=$tmp/cwd/r2\$" --report --report-file r2
VMMX_RUN_REPORT=sub/env.txt ok_run "VMMX_RUN_REPORT=sub/env.txt" "VMMX_RUN_REPORT=$tmp/cwd/sub/env.txt\$"
test ! -e rep.txt && test ! -e 0 && test ! -e 1 && test ! -e sub/env.txt
check $? "the checks leave no file behind"
refused "--report-file in a missing directory" "--report-file 'no/such/r.txt': cannot write $tmp/cwd/no/such/r.txt: No such file or directory" \
	--report-file no/such/r.txt
refused "--report-file a directory" "--report-file 'sub': cannot write $tmp/cwd/sub: Is a directory" \
	--report-file sub
VMMX_RUN_REPORT=sub refused "VMMX_RUN_REPORT a directory" \
	"VMMX_RUN_REPORT=\"sub\" (environment): cannot write $tmp/cwd/sub: Is a directory"
refused "--report-file ''" "--report-file '': expected a file name" --report-file ''

if [ -n "$asan" ]; then
	for i in 1 2 3 4 5; do skip "the report at exit: $asan"; done
else
	VMMX_SIM_DEVICE_MEM=1GiB VMMX_HOST_LIMIT=1GiB
	export VMMX_SIM_DEVICE_MEM VMMX_HOST_LIMIT
	set -- --policy device-first --device-limit 256MiB --headroom 0
	# The program changes directories before it exits; the report stays where it was asked.
	"$run" "$@" --report-file rep.txt -- sh -c 'cd sub && exec "$0" spill' "$client" \
		>"$tmp/out" 2>"$tmp/err"
	[ $? -eq 0 ] && grep -q '^vmmx-run report' rep.txt && test ! -e sub/rep.txt &&
		! grep -q 'vmmx-run report' "$tmp/err"
	check $? "--report-file rep.txt: written in vmmx-run's directory, not the program's"
	"$run" "$@" --report-file 0 -- "$client" spill >"$tmp/out" 2>"$tmp/err" &&
		"$run" "$@" --report-file 1 -- "$client" spill >"$tmp/out" 2>>"$tmp/err"
	[ $? -eq 0 ] && grep -q '^vmmx-run report' 0 && grep -q '^vmmx-run report' 1 &&
		! grep -q 'vmmx-run report' "$tmp/err"
	check $? "--report-file 0 and 1 are files named 0 and 1"
	mkdir gone
	"$run" "$@" --report-file gone/r.txt -- sh -c 'rm -r gone && exec "$0" spill' "$client" \
		>"$tmp/out" 2>"$tmp/err"
	st=$?
	[ $st -eq 0 ] && grep -q "^vmmx-run: cannot append the report to $tmp/cwd/gone/r.txt: No such file or directory; it goes to standard error instead" "$tmp/err" &&
		grep -q '^vmmx-run report' "$tmp/err"
	check $? "a report file that cannot be opened at exit: said on stderr, the report there"
	sed 's/^/# /' "$tmp/err"
	if [ -c /dev/full ]; then
		"$run" "$@" --report-file /dev/full -- "$client" spill >"$tmp/out" 2>"$tmp/err"
		grep -q '^vmmx-run: writing the report to /dev/full failed: No space left on device' "$tmp/err"
		check $? "a report that cannot be written at exit (/dev/full): said on stderr"
		sed 's/^/# /' "$tmp/err"
	else
		skip "no /dev/full"
	fi
	"$run" "$@" --report -- "$client" spill >"$tmp/out" 2>"$tmp/err"
	grep -q '^vmmx-run report' "$tmp/err" && ! grep -q '^vmmx-run: ' "$tmp/err"
	check $? "--report: on stderr, and nothing else from vmmx-run"
fi

echo "1..$n"
