#!/bin/sh
# SPDX-License-Identifier: MIT
# vmmx-bench on the sim backend: every section's table under the "not GPU
# figures" banner, targets never judged on the sim, --json (parsed and
# checked: one handle per doubling, grow peaks N against realloc's 2N - step,
# cache hits, migration bandwidths beside the PCIe copy stand-in), --only,
# --plot (a PNG), progress on stderr only, and usage errors (exit 2, the
# problem named).  Sizes are the sim's MiB defaults.
bench="$top_builddir/tools/vmmx-bench"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-bench-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

M=1048576
"$bench" --reps 2 --iters 2 --warmup 1 >"$tmp/table" 2>"$tmp/err"
check $? "every section on the sim exits 0"
grep -q 'NOT GPU figures' "$tmp/table"
check $? "the tables start with the banner: not GPU figures"
for s in ops grow doubling copy 'stream read' migrate targets; do
	grep -q "^== $s" "$tmp/table"
	check $? "the $s table is printed"
done
grep -q '^device  *2 MiB  *grow, cache miss (create+map+access)  *[0-9]' "$tmp/table" &&
	grep -q '^host  *8 MiB  *shrink into the cache (unmap)  *[0-9]' "$tmp/table"
check $? "ops: per location and chunk size, through the library"
grep -q '^total: vmmx [0-9.]* us, realloc [0-9.]* us, speedup [0-9.]*x' "$tmp/table"
check $? "grow: totals and speedup against realloc"
[ "$(sed -n '/^== targets/,$p' "$tmp/table" | grep -c 'n/a')" -eq 13 ] &&
	! grep -q 'PASS\|MISS' "$tmp/table"
check $? "the 13 targets are printed and not judged on the sim"
grep -q '^8 MiB  *warm  *2  *[0-9.]*  *[0-9.]*x' "$tmp/table" &&
	grep -q '^2 MiB  *cold  *8  *[0-9.]*  *[0-9.]*x' "$tmp/table" &&
	grep -q '^UVM prefetch  *not measured: sim backend' "$tmp/table" &&
	grep -q '^migration >= 0.8x PCIe copy for ranges >= 64 MiB, default settings  *[0-9.]*x (8 MiB chunks, warm, default settings)' "$tmp/table"
check $? "migrate: per chunk size and cache state, against the PCIe copy; the target line"
grep -q '^vmmx-bench: ops: device chunks of 2 MiB' "$tmp/err" &&
	grep -q '^vmmx-bench: stream: ' "$tmp/err" && ! grep -q '^vmmx-bench: ' "$tmp/table"
check $? "progress goes to stderr, not stdout"

"$bench" -q --reps 2 --iters 2 --warmup 1 --json >"$tmp/json" 2>"$tmp/err"
check $? "--json exits 0"
pycheck "--json is valid JSON" "$tmp/json" 'True'
pycheck "--json: sim, not GPU figures" "$tmp/json" \
	'd["backend"] == "sim" and d["gpu_figures"] is False and "not GPU figures" in d["note"] and d["device"]["granularity"] == 2*'$M
pycheck "--json: ops through the library, no raw calls on the sim" "$tmp/json" \
	'len(d["ops"]) == 16 and all(o["vmmx_s"] > 0 and o["raw_s"] is None for o in d["ops"])'
pycheck "--json: grow 0 -> 32 MiB in 4 MiB steps, one chunk more per step" "$tmp/json" \
	'[s["size"] for s in d["grow"]["steps"]] == [4*'$M'*k for k in range(1, 9)] and [s["vmmx_chunks"] for s in d["grow"]["steps"]] == list(range(1, 9))'
pycheck "--json: grow peaks: N for libvmmx, 2N - step for realloc" "$tmp/json" \
	'd["grow"]["vmmx_peak"] == 32*'$M' and d["grow"]["realloc_peak"] == 60*'$M' and d["grow"]["speedup"] > 1'
pycheck "--json: doubling 2 MiB -> 64 MiB, one handle per grow" "$tmp/json" \
	'[x["size"] for x in d["doubling"]] == [2**k*'$M' for k in range(1, 7)] and all(x["handles"] == 1 and x["vmmx_s"] > 0 for x in d["doubling"])'
pycheck "--json: shrink: a 16 MiB one-chunk buffer cut to 2 and 8 MiB maps just that afterwards" "$tmp/json" \
	'[(x["from"], x["kept"], x["device_after"]) for x in d["shrink"]] == [(16*'$M', 2*'$M', 2*'$M'), (16*'$M', 8*'$M', 8*'$M')] and all(x["shrink_s"] > 0 and x["us_per_gib_kept"] > 0 and x["note"] == "" for x in d["shrink"])'
pycheck "--json: copy: four cases beside their baseline" "$tmp/json" \
	'len(d["copy"]) == 4 and all(c["vmmx_gbps"] > 0 and c["baseline_gbps"] > 0 and c["ratio"] > 0 for c in d["copy"])'
pycheck "--json: stream: device, host, device-first past the limit, data checked" "$tmp/json" \
	'len(d["stream"]) == 3 and all(s["vmmx_s"] > 0 and s["baseline_s"] > 0 and s["why"] == "" for s in d["stream"]) and d["stream"][2]["size"] == 12*'$M' and d["stream"][2]["device_bytes"] == 8*'$M' and d["stream"][2]["host_bytes"] == 4*'$M
pycheck "--json: 13 targets, verdict sim" "$tmp/json" \
	'len(d["targets"]) == 13 and all(t["verdict"] == "sim" for t in d["targets"]) and d["targets"][0]["threshold"] == 0.98 and d["targets"][6]["threshold"] == 0.8 and d["targets"][6]["value"] > 0'
pycheck "--json: migrate: 16 MiB, PCIe copy stand-in both ways, no UVM on the sim" "$tmp/json" \
	'd["migrate"]["size"] == 16*'$M' and d["migrate"]["reps"] == 2 and d["migrate"]["chunks"] == [8*'$M', 2*'$M'] and d["migrate"]["pcie"]["d2h_gbps"] > 0 and d["migrate"]["pcie"]["h2d_gbps"] > 0 and d["migrate"]["pcie"]["why"] == "" and d["migrate"]["uvm"]["d2h_gbps"] is None and "sim" in d["migrate"]["uvm"]["why"]'
pycheck "--json: migrate: 8 and 2 MiB chunks, warm and cold, then 8 MiB warm with GPU-only access to moved chunks and read-mostly, positive bandwidths, ratios" "$tmp/json" \
	'[(x["chunk"], x["cache"], x["chunks"]) for x in d["migrate"]["runs"]] == [(8*'$M', "warm", 2), (8*'$M', "cold", 2), (2*'$M', "warm", 8), (2*'$M', "cold", 8), (8*'$M', "warm-gpu", 2), (8*'$M', "read-mostly", 2)] and all(x["d2h_gbps"] > 0 and x["h2d_gbps"] > 0 and x["d2h_vs_pcie"] > 0 and x["h2d_vs_pcie"] > 0 and x["ratio"] == min(x["d2h_vs_pcie"], x["h2d_vs_pcie"]) and x["d2h_vs_uvm"] is None and x["why"] == "" for x in d["migrate"]["runs"])'
pycheck "--json: migrate: every chunk moved each way, the warm cache hit every time (read-mostly: h->d only), read-mostly saved every d->h copy, best among the copying runs" "$tmp/json" \
	'all(x["migrated_bytes"] == 2*2*16*'$M' and x["migrations"] == 2*2*x["chunks"] and x["cache_hits"] == {"cold": 0, "read-mostly": 2*x["chunks"]}.get(x["cache"], 2*2*x["chunks"]) and x["copies_saved"] == (2*x["chunks"] if x["cache"] == "read-mostly" else 0) for x in d["migrate"]["runs"]) and d["migrate"]["best"]["ratio"] == max(x["ratio"] for x in d["migrate"]["runs"] if x["cache"] != "read-mostly")'


"$bench" -q --only grow,doubling --reps 2 --json >"$tmp/only" 2>"$tmp/err"
check $? "--only grow,doubling exits 0"
pycheck "--only: just those sections and their targets" "$tmp/only" \
	'"grow" in d and "doubling" in d and "ops" not in d and "copy" not in d and "stream" not in d and len(d["targets"]) == 3'
if [ -n "$plot_why" ]; then
	skip "--plot: $plot_why"
	skip "--plot PNG: $plot_why"
else
	"$bench" -q --only grow,doubling --reps 2 --plot "$tmp/grow.png" >"$tmp/out" 2>"$tmp/err"
	check $? "--only grow,doubling --plot exits 0"
	png_ok "$tmp/grow.png"
	check $? "--plot writes a compressed PNG (under 100 KB) of the grow and doubling curves"
fi
"$bench" -q --only migrate --migrate-size 8MiB --migrate-chunk 4MiB --reps 2 --json >"$tmp/mig" 2>"$tmp/err"
check $? "--only migrate --migrate-size --migrate-chunk exits 0"
pycheck "--only migrate: that section, its runs and its targets" "$tmp/mig" \
	'"migrate" in d and "ops" not in d and "stream" not in d and len(d["targets"]) == 5 and [(x["chunk"], x["cache"], x["chunks"]) for x in d["migrate"]["runs"]] == [(4*'$M', "warm", 2), (4*'$M', "cold", 2), (4*'$M', "warm-gpu", 2), (4*'$M', "read-mostly", 2)]'
"$bench" -q --only sleep --migrate-size 8MiB --reps 2 --json >"$tmp/slp" 2>"$tmp/err"
check $? "--only sleep exits 0"
pycheck "--only sleep: its figures beside the pinned copy rate of the same run, no host memory pinned after the first sleep" "$tmp/slp" \
	'"sleep" in d and "migrate" not in d and d["sleep"]["why"] is None and d["sleep"]["size"] == 8*'$M' and all(d["sleep"][k] > 0 for k in ("pinned_d2h_gibps", "pinned_h2d_gibps", "first_sleep_gibps", "sleep_gibps", "wake_gibps", "sleep_over_floor", "wake_over_floor")) and d["sleep"]["warm_creates"] == 0 and d["sleep"]["sim"] is True'
"$bench" -q --only sleep --migrate-size 8MiB --reps 2 >"$tmp/out" 2>"$tmp/err"
grep -q "these figures mean nothing" "$tmp/out"
check $? "--only sleep on sim says its figures mean nothing"
"$bench" -q --only ops --chunk-sizes 2MiB --locations host --reps 2 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && [ "$(grep -c '^host  *2 MiB' "$tmp/out")" -eq 4 ] && ! grep -q '^device ' "$tmp/out"
check $? "--chunk-sizes and --locations select the ops rows"

# Results that cannot be written are a failure.
if [ -c /dev/full ]; then
	"$bench" -q --only shrink --reps 1 >/dev/full 2>"$tmp/err"
	st=$?
	[ $st -eq 1 ] && grep -q '^vmmx-bench: write error on standard output: No space left on device' "$tmp/err"
	check $? "stdout on /dev/full: exit 1, the write error said"
	[ $st -eq 1 ] || echo "# exit status $st"
	"$bench" -q --only shrink --reps 1 --json >/dev/full 2>"$tmp/err"
	[ $? -eq 1 ] && grep -q '^vmmx-bench: write error on standard output' "$tmp/err"
	check $? "--json on /dev/full: exit 1"
else
	skip "no /dev/full"
	skip "no /dev/full"
fi

usage_error "$bench" "an unknown section" 'bogus' --only grow,bogus
usage_error "$bench" "a chunk size off the granularity" 'not a multiple of the granularity' --chunk-sizes 3MiB
usage_error "$bench" "a bad size" '"1.5GiB"' --grow-max 1.5GiB
usage_error "$bench" "a step larger than the final size" 'steps' --grow-max 4MiB --grow-step 8MiB
usage_error "$bench" "an unknown location" 'elsewhere' --locations device,elsewhere
usage_error "$bench" "a migration chunk off the granularity" 'not a multiple of the granularity' --only migrate --migrate-chunk 3MiB
usage_error "$bench" "a migration size not a multiple of the chunk" 'not a multiple of --migrate-chunk' --only migrate --migrate-size 6MiB --migrate-chunk 4MiB
usage_error "$bench" "an unknown option" 'unknown option --bogus' --bogus
"$bench" --help >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q '^usage: vmmx-bench' "$tmp/out"
check $? "--help prints the usage on stdout, exit 0"

echo "1..$n"
