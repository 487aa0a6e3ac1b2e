#!/bin/sh
# SPDX-License-Identifier: MIT
# vmmx-place on the sim backend: the table under its "not GPU figures"
# banner, --json (parsed and checked), --csv, --plot (a PNG), the managed
# memory refusal (--assume-free), every workload's data check, the window
# workload (lru migrating a hot window in, device-first reading it where it
# is, the migration counters), progress on stderr only, and usage errors
# (exit 2, the problem named).  Sizes are MiB.
place="$top_builddir/tools/vmmx-place"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-place-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

M=1048576
# The sweep of the issue, scaled down: two sizes, two policies (one with
# arguments), a device limit, every baseline.
"$place" --workload read --size 4MiB,8MiB --policy device-first,interleave:device=3,host=1 \
	--device-limit 4MiB --baselines all -n 2 --warmup 1 >"$tmp/table" 2>"$tmp/err"
check $? "a sweep of sizes and policies exits 0"
grep -q 'NOT GPU figures' "$tmp/table"
check $? "the table starts with the banner: not GPU figures"
grep -q '^8 MiB  *device-first  *[0-9]' "$tmp/table" &&
	grep -q '^8 MiB  *interleave:device=3,host=1  *[0-9]' "$tmp/table"
check $? "one row per size and policy, the policy's arguments kept"
grep -q '^4 MiB  *managed  *unavailable: sim backend' "$tmp/table"
check $? "managed memory is listed as unavailable on the sim, with why"
grep -q '^vmmx-place: \[1/16\] 4 MiB cudaMalloc: read' "$tmp/err" &&
	grep -q '^vmmx-place: \[16/16\] ' "$tmp/err"
check $? "progress goes to stderr, step by step"
! grep -q '^vmmx-place: \[' "$tmp/table"
check $? "no progress on stdout"

"$place" -q -s 4MiB,8MiB -p device-first,interleave:device=3,host=1 -L 4MiB -b all -n 2 \
	--warmup 1 --json >"$tmp/json" 2>"$tmp/err"
check $? "--json exits 0"
test ! -s "$tmp/err" || grep -q 'NOT GPU figures' "$tmp/err"
check $? "--quiet --json: stderr holds the banner at most"
pycheck "--json is valid JSON" "$tmp/json" 'True'
pycheck "--json: sim, not GPU figures, the workload and timing" "$tmp/json" \
	'd["backend"] == "sim" and d["gpu_figures"] is False and "not GPU figures" in d["note"] and d["workload"] == "read" and d["timing"] == {"figure": "median", "warmup": 1, "runs": 2}'
pycheck "--json: 2 sizes x (2 policies + 6 baselines) results" "$tmp/json" 'len(r) == 16'
pycheck "--json: the policies ran, data checked, with GB/s and times" "$tmp/json" \
	'all(row(s, p)["status"] == "ok" and row(s, p)["gbps"] > 0 and row(s, p)["time_s"] > 0 and row(s, p)["time_best_s"] <= row(s, p)["time_s"] for s in (4*'$M', 8*'$M') for p in ("device-first", "interleave:device=3,host=1"))'
pycheck "--json: residency of device-first past the 4 MiB limit" "$tmp/json" \
	'row(4*'$M', "device-first")["host_bytes"] == 0 and row(8*'$M', "device-first")["device_bytes"] == 4*'$M' and row(8*'$M', "device-first")["host_bytes"] == 4*'$M' and row(8*'$M', "device-first")["host_fraction"] == 0.5'
pycheck "--json: the references' model fraction is 1, the policies' is finite" "$tmp/json" \
	'abs(row(8*'$M', "cudaMalloc")["model_fraction"] - 1) < 1e-9 and abs(row(8*'$M', "cudaHostAlloc")["model_fraction"] - 1) < 1e-9 and row(8*'$M', "device-first")["model_fraction"] > 0 and row(8*'$M', "device-first")["model_time_s"] > 0'
pycheck "--json: sim stand-ins say what stands in" "$tmp/json" \
	'"policy device" in row(4*'$M', "cudaMalloc")["note"] and "policy host" in row(4*'$M', "cudaHostAlloc")["note"]'
pycheck "--json: driver baselines unavailable on the sim, with a reason" "$tmp/json" \
	'all(row(4*'$M', b)["status"] == "unavailable" and row(4*'$M', b)["reason"] and row(4*'$M', b)["gbps"] is None for b in ("malloc+register", "hmm-malloc", "managed", "managed+prefetch"))'

# The managed-memory rule: larger than free device memory (less the margin) is refused.
"$place" -q -s 8MiB -p none -b managed,managed-prefetch --assume-free 256MiB --json \
	>"$tmp/refuse" 2>"$tmp/err"
check $? "a refused placement is not a failure (exit 0)"
pycheck "managed memory beyond free device memory is refused, and why" "$tmp/refuse" \
	'all(x["status"] == "refused" and "hang the GPU" in x["reason"] and "256 MiB" in x["reason"] for x in r) and len(r) == 2'
"$place" -q -s 8MiB -p none -b managed --assume-free 8MiB >"$tmp/out" 2>"$tmp/err"
grep -q '^8 MiB  *managed  *refused: managed memory of 8 MiB is more than the device' "$tmp/out"
check $? "the table says refused and why"

for w in write copy gather; do
	"$place" -q -w $w -s 8MiB -p device-first,host -L 4MiB -n 2 --warmup 1 --json \
		>"$tmp/$w" 2>"$tmp/err"
	check $? "--workload $w exits 0"
	pycheck "--workload $w: every placement ran and passed the data check" "$tmp/$w" \
		'd["workload"] == "'$w'" and len(r) == 4 and all(x["status"] == "ok" and x["bytes_moved"] == 8*'$M' for x in r)'
done
"$place" -q -w gather -s 8MiB --working-set 2MiB -p device-first -L 4MiB -n 2 --json \
	>"$tmp/ws" 2>"$tmp/err"
pycheck "--working-set: residency of the working set only" "$tmp/ws" \
	'd["working_set"] == 2*'$M' and row(8*'$M', "device-first")["device_bytes"] == 2*'$M' and row(8*'$M', "device-first")["host_bytes"] == 0'

# The window workload: a 4 MiB window over 16 MiB past an 8 MiB device limit,
# 4 positions, 2 passes, one read per step.  device-first leaves the second
# half in host memory; lru brings each window in when advised.
"$place" -q -w window -s 16MiB -L 8MiB --window 4MiB --steps 4 --passes 2 -n 1 \
	-p lru,device-first --json >"$tmp/win" 2>"$tmp/err"
check $? "--workload window exits 0"
pycheck "window: the workload, its steps, passes and reads per step" "$tmp/win" \
	'd["workload"] == "window" and d["window"] == {"bytes": 4*'$M', "steps": 4, "passes": 2, "reads_per_step": 1} and [x["placement"] for x in r] == ["cudaMalloc", "cudaHostAlloc", "lru", "device-first", "managed+prefetch"]'
pycheck "window: every libvmmx placement and reference read every window, data checked" "$tmp/win" \
	'all(row(16*'$M', p)["status"] == "ok" and row(16*'$M', p)["bytes_read"] == 4*'$M'*4*2 and row(16*'$M', p)["gbps"] > 0 and row(16*'$M', p)["gbps_pass1"] > 0 and row(16*'$M', p)["gbps_with_advise"] > 0 for p in ("cudaMalloc", "cudaHostAlloc", "lru", "device-first"))'
pycheck "window: lru migrates and promotes, its advise takes time, every read finds the device" "$tmp/win" \
	'row(16*'$M', "lru")["migrations"] > 0 and row(16*'$M', "lru")["migrated_bytes"] > 0 and row(16*'$M', "lru")["promotions"] > 0 and row(16*'$M', "lru")["evictions"] >= 0 and row(16*'$M', "lru")["advise_s"] > 0 and row(16*'$M', "lru")["device_read_fraction"] == 1'
pycheck "window: device-first moves nothing and reads half the windows from host memory" "$tmp/win" \
	'row(16*'$M', "device-first")["migrations"] == 0 and row(16*'$M', "device-first")["migrated_bytes"] == 0 and row(16*'$M', "device-first")["promotions"] == 0 and row(16*'$M', "device-first")["device_read_fraction"] == 0.5 and row(16*'$M', "device-first")["host_bytes"] == 8*'$M
pycheck "window: the model's ends, and the baselines have no counters" "$tmp/win" \
	'abs(row(16*'$M', "cudaMalloc")["model_fraction"] - 1) < 1e-9 and abs(row(16*'$M', "cudaHostAlloc")["model_fraction"] - 1) < 1e-9 and row(16*'$M', "lru")["model_fraction"] > 0 and row(16*'$M', "cudaMalloc")["migrations"] is None and row(16*'$M', "managed+prefetch")["status"] == "unavailable"'
"$place" -w window -s 16MiB -L 8MiB --window 4MiB --steps 4 -n 1 -b none >"$tmp/wt" 2>"$tmp/err"
check $? "window: a table with the default policies exits 0"
grep -q '^size  *placement  *window  *GB/s  *pass1  *+advise  *advise ms  *setup ms  *migrated  *migr  *evict  *promo  *dev%  *model' "$tmp/wt" &&
	grep -q '^16 MiB  *lru  *4 MiB  *[0-9.]*  *[0-9.]*  *[0-9.]*  *[0-9.]*  *[0-9.]*  *[0-9.]* MiB  *[1-9]' "$tmp/wt" &&
	grep -q '^16 MiB  *device-first  *4 MiB .* 0 B  *0  *0  *0  *50.0 ' "$tmp/wt"
check $? "window: the table: lru (default) migrated, device-first did not"
grep -q '^vmmx-place: \[1/2\] 16 MiB lru: window of 4 MiB, 4 steps x 2 passes, 1 reads per step' "$tmp/err"
check $? "window: progress names the window, steps, passes and reads"
"$place" -q -w window -s 8MiB -n 1 --steps 2 --passes 1 -b none --csv >"$tmp/wcsv" 2>"$tmp/err"
check $? "window: --csv exits 0"
head -n 1 "$tmp/wcsv" | grep -q '^size_bytes,placement,kind,status,reason,window_bytes,steps,passes,reads_per_step,bytes_read,read_s,gbps,gbps_pass1,advise_s,gbps_with_advise,' &&
	head -n 1 "$tmp/wcsv" | grep -q ',migrations,migrated_bytes,evictions,promotions,' &&
	[ "$(wc -l <"$tmp/wcsv")" -eq 3 ] && grep -q '^8388608,"lru",policy,ok,"",2097152,2,1,1,' "$tmp/wcsv"
check $? "window: --csv: its own header, the default window a quarter of the buffer"

"$place" -q -s 4MiB,8MiB -p device-first -L 4MiB -n 2 --csv >"$tmp/csv" 2>"$tmp/err"
check $? "--csv exits 0"
head -n 1 "$tmp/csv" | grep -q '^size_bytes,placement,kind,status,reason,bytes_moved,gbps,' &&
	[ "$(wc -l <"$tmp/csv")" -eq 7 ] && grep -q '^8388608,"device-first",policy,ok,' "$tmp/csv"
check $? "--csv: a header and one row per size and placement"

if [ -n "$plot_why" ]; then
	skip "--plot: $plot_why"
	skip "--plot PNG: $plot_why"
else
	"$place" -q -s 4MiB,8MiB -p device-first,tiered -L 4MiB -n 2 --plot "$tmp/out.png" \
		>"$tmp/out" 2>"$tmp/err"
	check $? "--plot exits 0"
	png_ok "$tmp/out.png"
	check $? "--plot writes a compressed PNG (under 100 KB) through vmmx-plot"
fi
# The plot's file is checked before anything is measured.
"$place" -s 4MiB -n 1 --plot "$tmp/no/such/dir/out.png" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "^vmmx-place: --plot $tmp/no/such/dir/out.png: cannot write: No such file or directory" "$tmp/err" &&
	test ! -s "$tmp/out" && ! grep -q '^vmmx-place: \[' "$tmp/err"
check $? "--plot into a missing directory: exit 2 before measuring, the file named"
"$place" -s 4MiB -n 1 --plot "$tmp" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "^vmmx-place: --plot $tmp: expected a file name ending in .png, .svg or .pdf" "$tmp/err" &&
	test ! -s "$tmp/out"
check $? "--plot without a chart extension: exit 2 before measuring"
mkdir "$tmp/adir.png"
"$place" -s 4MiB -n 1 --plot "$tmp/adir.png" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q "^vmmx-place: --plot $tmp/adir.png: cannot write: Is a directory" "$tmp/err" &&
	test ! -s "$tmp/out"
check $? "--plot onto a directory: exit 2 before measuring"
# A run that fails after the check (no such backend) leaves no file behind.
VMMX_BACKEND=bogus "$place" -q -s 4MiB -n 1 --plot "$tmp/new.svg" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'VMMX_BACKEND' "$tmp/err" && test ! -e "$tmp/new.svg"
check $? "--plot's check leaves no empty file behind"

# Results that cannot be written are a failure.
if [ -c /dev/full ]; then
	"$place" -q -s 4MiB -p device-first -b none -n 1 --warmup 0 >/dev/full 2>"$tmp/err"
	st=$?
	[ $st -eq 1 ] && grep -q '^vmmx-place: write error on standard output: No space left on device' "$tmp/err"
	check $? "stdout on /dev/full: exit 1, the write error said"
	[ $st -eq 1 ] || echo "# exit status $st"
else
	skip "no /dev/full"
fi

usage_error "$place" "a size outside the grammar" '"4gib"' --size 4gib
usage_error "$place" "a zero size" 'bad size "0"' --size 8MiB,0
usage_error "$place" "a size not a multiple of 64 KiB" 'not a multiple of 64 KiB' --size 100KiB
usage_error "$place" "an unknown workload" 'foo' --workload foo
usage_error "$place" "an unknown policy" 'nosuchpolicy' --policy device-first,nosuchpolicy
usage_error "$place" "a policy's bad argument" 'bogus' --policy interleave:bogus=1
usage_error "$place" "an unknown baseline" 'bogus' --baselines cudaMalloc,bogus
usage_error "$place" "a working set larger than the buffer" 'larger than the buffer' -w gather -s 4MiB --working-set 8MiB
usage_error "$place" "--csv with --json" 'exclude each other' --csv --json
usage_error "$place" "--window without the window workload" 'window workload only' --window 2MiB
usage_error "$place" "a window larger than the buffer" 'larger than the buffer' -w window -s 4MiB --window 8MiB
usage_error "$place" "more steps than 64 KiB units" 'more positions' -w window -s 1MiB --steps 17
usage_error "$place" "--plot with the window workload" 'does not apply to the window' -w window --plot "$tmp/w.png"
usage_error "$place" "an unknown option" 'unknown option --bogus' --bogus
"$place" --help >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q '^usage: vmmx-place' "$tmp/out"
check $? "--help prints the usage on stdout, exit 0"

echo "1..$n"
