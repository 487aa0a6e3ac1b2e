#!/bin/sh
# SPDX-License-Identifier: MIT
# vmmx-place --replay: a launch trace replayed under every policy with the
# cost model.  replay-abc.jsonl is a hand-made trace small enough to work
# out by hand: segments A (a 2-chunk buffer its placement records group),
# B and C of 100 MB, room for 2 on the device, A B C launched three times
# (a cycle of 3 from the second time), 1 ms between launches; every figure
# below is worked out in the comments.  Then a trace recorded for real on
# the sim (launchclient's six 64 MiB buffers in 16 MiB chunks under
# vmmx-run --placement launch), whose launch-cycle replay must move what
# the run itself reported; a segment named at several addresses (many
# tensors in one: replay-places.jsonl) and --cycle; the residency chart;
# and bad input.
place="$top_builddir/tools/vmmx-place"
plot="$top_builddir/tools/vmmx-plot"
abc="$top_srcdir/tests/tools/replay-abc.jsonl"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-replay-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

# figs FILE SCOPE POLICY: "time_ms moved_in moved_out in_place on_device moves_in moves_out no_room"
figs() {
	$py -c 'import json, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
r = [x for x in d[sys.argv[2]] if x["policy"] == sys.argv[3]][0]
print("%.3f %d %d %d %d %d %d %d" % (r["time_s"] * 1e3, r["moved_in"], r["moved_out"], r["read_in_place"], r["read_on_device"], r["moves_in"], r["moves_out"], r["no_room"]))' "$@"
}
# is_figs FILE SCOPE POLICY EXPECTED DESCRIPTION
is_figs() {
	if [ -z "$py" ]; then skip "no python3: $5"; return; fi
	got=$(figs "$1" "$2" "$3" 2>&1)
	[ "$got" = "$4" ]
	check $? "$5"
	if [ "$got" != "$4" ]; then echo "# got:      $got"; echo "# expected: $4"; fi
}
# says TRACE PATTERN DESCRIPTION: the text replay of TRACE (--hbm 1000 --pcie 10)
# exits 0 and, its lines joined, matches PATTERN (grep).
says() {
	"$place" --replay "$1" --hbm 1000 --pcie 10 >"$tmp/says" 2>"$tmp/err"
	st=$?
	tr '\n' ' ' <"$tmp/says" | tr -s ' ' | grep -q "$2" || st=1
	check $st "$3"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/says" "$tmp/err"
}
# refused DESCRIPTION NEEDLE ARGS...: exit 2, NEEDLE on stderr, nothing on stdout.
refused() {
	d=$1 needle=$2
	shift 2
	"$place" "$@" >"$tmp/out" 2>"$tmp/err"
	st=$?
	[ $st -eq 2 ] && grep -q -- "$needle" "$tmp/err" && test ! -s "$tmp/out"
	check $? "$d (exit 2, names $needle; exit status $st)"
}

# ---- the hand-made trace, --hbm 1000 --pcie 10: 100 MB is 0.1 ms from HBM, 10 ms over PCIe ----
# --movers 0: every move before its launch, overlapping nothing (the movers below).
"$place" --replay "$abc" --hbm 1000 --pcie 10 --movers 0 >"$tmp/table" 2>"$tmp/err"
check $? "--replay of a hand-made trace exits 0"
grep -q '^cycle  *3 launches, 2 complete steps; figures for the last step (launches 6-8)' "$tmp/table"
check $? "the table names the cycle (3 launches) and the step its figures are for"
grep -q '^launch-belady  *43\.000 ' "$tmp/table" && ! test -s "$tmp/err"
check $? "one row per policy, step time in ms; nothing on stderr"
"$place" --replay "$abc" --hbm 1000 --pcie 10 --movers 0 --json >"$tmp/abc.json" 2>"$tmp/err"
check $? "--replay --json exits 0"
pycheck "--json parses; the trace: 9 launches of pid 4242, 3 segments (A grouped from its 2 chunks: 300 MB), 2 placement records, the other process's launch left out" \
	"$tmp/abc.json" 'd["mode"] == "replay" and d["trace"]["launches"] == 9 and d["trace"]["pid"] == 4242 and d["trace"]["segments"] == 3 and d["trace"]["segment_bytes"] == 300000000 and d["trace"]["placement_records"] == 2 and d["trace"]["other_process_launches"] == 1 and d["trace"]["moves_seen"] == 0'
pycheck "--json: the device's room from the trace (A and B first seen there: 200 MB), compute from the gaps, the cycle" \
	"$tmp/abc.json" 'd["model"]["device_bytes"] == 200000000 and d["model"]["device_bytes_from"] == "trace" and d["model"]["compute"] == "gaps" and d["cycle"] == {"length": 3, "complete_steps": 2, "step_first_launch": 6, "step_launches": 3} and d["scope"] == "step" and [x["policy"] for x in d["step"]] == ["in-place", "launch-lru", "launch-belady", "launch-cycle", "launch-in-place", "launch-spread"]'
pycheck "the residency chart of launch-belady's step: A, B, C by launch (upper case: named)" \
	"$tmp/abc.json" '[(c["type"], [s["cells"] for s in c["segments"]]) for c in d["charts"] if c["name"] == "residency-launch-belady"] == [("residency", ["Ddh", "dDd", "hhD"])] and len(d["charts"]) == 6'
"$place" --replay "$abc" --hbm 1000 --pcie 10 --movers 0 --compute none --json >"$tmp/none.json" 2>"$tmp/err"
"$place" --replay "$abc" --hbm 1000 --pcie 10 --movers 0 --device-bytes 100MB --json >"$tmp/small.json" 2>"$tmp/err"
"$place" --replay "$abc" --hbm 1000 --pcie 10 --movers 0 --device-bytes 50MB --json >"$tmp/tiny.json" 2>"$tmp/err"
# The figures, worked out by hand: FILE|SCOPE|POLICY|time_ms moved_in moved_out
# in_place on_device moves_in moves_out no_room|what.
while IFS='|' read -r f scope pol want what; do
	case $f in '#'* | '') continue ;; esac
	is_figs "$tmp/$f" "$scope" "$pol" "$want" "$what"
done <<'FIGS'
# in-place: C stays in host memory: A 1 ms, B 1 ms, C max(1, 10) = 10 ms a step.
abc.json|step|in-place|12.000 0 0 100000000 200000000 0 0 0|in-place: 12 ms a step (C read in place: 10 ms), nothing moved
abc.json|total|in-place|36.000 0 0 300000000 600000000 0 0 0|in-place: 36 ms over the trace (the last launch takes the gap one cycle before it)
# LRU on a cycle one larger than the room: every launch from the third misses,
# each 10 ms in + 10 ms out (written back) + 1 ms: 7 moves, 3 a step.
abc.json|step|launch-lru|63.000 300000000 300000000 0 300000000 3 3 0|launch-lru: every launch of the step misses: 3 x (20 + 1) = 63 ms, 300 MB in and out
abc.json|total|launch-lru|149.000 700000000 700000000 0 900000000 7 7 0|launch-lru: 7 moves each way over the trace (700 MB), 149 ms
# Belady: C evicts B (needed after A), B evicts A, A evicts C, C evicts A
# (neither needed again: the least recently named): 4 moves.
abc.json|total|launch-belady|89.000 400000000 400000000 0 900000000 4 4 0|launch-belady: exactly 4 moves each way (400 MB), fewer than launch-lru's 7
abc.json|step|launch-belady|43.000 200000000 200000000 0 300000000 2 2 0|launch-belady: the last step misses A and C: 21 + 1 + 21 = 43 ms
# launch-cycle (place.c's rule): LRU until the cycle is known, then next use
# at last + min(gap, 3): C evicts A, A evicts C, C evicts B, B evicts A.
abc.json|total|launch-cycle|89.000 400000000 400000000 0 900000000 4 4 0|launch-cycle: 4 moves each way over the trace, as many as Belady
abc.json|step|launch-cycle|23.000 100000000 100000000 0 300000000 1 1 0|launch-cycle: the last step misses B only: 1 + 21 + 1 = 23 ms
none.json|step|in-place|10.200 0 0 100000000 200000000 0 0 0|--compute none: in-place is the reads alone: 0.1 + 0.1 + 10 = 10.2 ms
none.json|step|launch-belady|40.300 200000000 200000000 0 300000000 2 2 0|--compute none: launch-belady 20.1 + 0.1 + 20.1 = 40.3 ms
small.json|step|in-place|21.000 0 0 200000000 100000000 0 0 0|--device-bytes 100MB: B no longer fits where the trace saw it and starts in host memory: 1 + 10 + 10 ms
tiny.json|step|launch-lru|30.000 0 0 300000000 0 0 0 3|--device-bytes 50MB: no segment fits: nothing moves, each launch reads in place, 3 times no room
FIGS

# --compute-step 30: the step's 30 ms spread over each step of the cycle
# (launches 3-5 and 6-8) by the bytes each launch reads, 100 MB each: 10 ms
# a launch; launches 0-2, before the cycle, none.  in-place: A, B 10 ms, C
# max(10, 10) = 10 a step; 0.1 + 0.1 + 10 before.  launch-belady misses A
# and C: 20 + 10 twice, B 10; launch-cycle misses B only: 10 + 30 + 10.
"$place" --replay "$abc" --hbm 1000 --pcie 10 --movers 0 --compute-step 30 --json >"$tmp/cs.json" 2>"$tmp/err"
check $? "--compute-step 30 exits 0"
pycheck "--json: compute \"step\", its ms, and why" "$tmp/cs.json" \
	'd["model"]["compute"] == "step" and d["model"]["compute_step_ms"] == 30 and "spread over the step'"'"'s 3 launches by the bytes each reads" in d["model"]["compute_why"]'
while IFS='|' read -r f scope pol want what; do
	case $f in '#'* | '') continue ;; esac
	is_figs "$tmp/$f" "$scope" "$pol" "$want" "$what"
done <<'FIGS'
cs.json|step|in-place|30.000 0 0 100000000 200000000 0 0 0|--compute-step 30: in-place 10 ms a launch: the step is the compute
cs.json|total|in-place|70.200 0 0 300000000 600000000 0 0 0|--compute-step 30: launches before the cycle get none: 10.2 + 30 + 30 ms
cs.json|step|launch-belady|70.000 200000000 200000000 0 300000000 2 2 0|--compute-step 30: launch-belady 30 + 10 + 30 ms
cs.json|step|launch-cycle|50.000 100000000 100000000 0 300000000 1 1 0|--compute-step 30: launch-cycle 10 + 30 + 10 ms
FIGS
# By the bytes read, not evenly: C of 300 MB in host memory, --pcie 6, 50 ms a
# step: A and B 10 ms each, C 30 of compute under its 50 ms read: 70 ms (an
# even spread, 16.7 each, would give 83.3).
sed 's/"0x30000000","size":100000000/"0x30000000","size":300000000/' "$abc" >"$tmp/c3.jsonl"
"$place" --replay "$tmp/c3.jsonl" --hbm 1000 --pcie 6 --movers 0 --compute-step 50ms -p in-place --json >"$tmp/c3.json" 2>"$tmp/err"
is_figs "$tmp/c3.json" step in-place "70.000 0 0 300000000 200000000 0 0 0" \
	"--compute-step 50ms: spread by the bytes each launch reads (C 30 ms of 50)"
"$place" --replay "$tmp/c3.jsonl" --hbm 1000 --pcie 6 --movers 0 --compute-step 0.05s -p in-place --json >"$tmp/c3s.json" 2>"$tmp/err"
is_figs "$tmp/c3s.json" step in-place "70.000 0 0 300000000 200000000 0 0 0" "--compute-step 0.05s: the same in seconds"

# launch-in-place (--placement launch reading in place) and --tiled-reads, on
# replay-freq.jsonl: A and B of 100 MB on the device (room for 2), C in host
# memory; launches A B C C, then a cycle of 4 of the same twice; C's launches
# record 48 KiB of shared memory (tiled).  --compute none (the trace shows C
# moved), --hbm 1000 --pcie 10: 100 MB is 0.1 ms from HBM, 10 ms over the link.
# launch-in-place counts namings over the last 4 launches: at launch 6, C
# (named twice) goes in for A (once; least recent of A and B): a 20 ms move;
# at launch 8, A (once) may not push out B (once) nor C: read in place.
# The step: A 10 + B, C, C 0.1 each; over the trace 20.2 + 20.4 + 10.3.
freq="$top_srcdir/tests/tools/replay-freq.jsonl"
"$place" --replay "$freq" --hbm 1000 --pcie 10 --movers 0 --compute none --json >"$tmp/freq.json" 2>"$tmp/err"
check $? "--replay of replay-freq.jsonl exits 0"
"$place" --replay "$freq" --hbm 1000 --pcie 10 --movers 0 --compute none --tiled-reads 4 --json >"$tmp/freq4.json" 2>"$tmp/err"
check $? "--tiled-reads 4 exits 0"
while IFS='|' read -r f scope pol want what; do
	case $f in '#'* | '') continue ;; esac
	is_figs "$tmp/$f" "$scope" "$pol" "$want" "$what"
done <<'FIGS'
freq.json|step|launch-in-place|10.300 0 0 100000000 300000000 0 0 0|launch-in-place: A, named less than B and C, is read in place: 10 + 0.1 x 3 ms
freq.json|total|launch-in-place|50.900 100000000 100000000 300000000 900000000 1 1 0|launch-in-place: C, named twice a cycle, goes in once for A: 20.2 + 20.4 + 10.3 ms
freq.json|step|in-place|20.200 0 0 200000000 200000000 0 0 0|in-place: C read in place twice a step
freq4.json|step|in-place|80.200 0 0 200000000 200000000 0 0 0|--tiled-reads 4: C's tiled launches read in place 4 times as long: 0.1 + 0.1 + 40 + 40 ms
freq4.json|step|launch-in-place|10.300 0 0 100000000 300000000 0 0 0|--tiled-reads 4: A's launch is not tiled: launch-in-place unchanged
FIGS
pycheck "--json: the model's tiled reads, the launches recorded tiled (6) and those with a shared memory (12)" \
	"$tmp/freq4.json" 'd["model"]["tiled_reads"] == 4 and d["model"]["tiled_launches"] == 6 and d["model"]["shared_recorded"] == 12 and [x["policy"] for x in d["step"]][-2:] == ["launch-in-place", "launch-spread"]'
says "$freq" "no launch records\| 6 of 12 launches tiled (32 KiB of shared memory or more), their reads in place 1 times" \
	"the model line counts the tiled launches"
"$place" --replay "$abc" --tiled-reads 4 >"$tmp/says" 2>"$tmp/err"
tr '\n' ' ' <"$tmp/says" | tr -s ' ' | grep -q "no launch records its shared memory: none tiled"
check $? "a trace without shared memory records: the model line says none is tiled"

# The movers (--movers N, once the cycle is known from launch 3 on): a move
# sends back on the driver (10 ms), then copies in on the link (10 ms), each
# one at a time, and may start up to 32 launches ahead of its launch, a cycle
# less one when that is shorter (here 2).  launch-lru, every launch a move: one mover makes them one after
# another, 20 ms a launch, its 1 ms hidden; two overlap one's send back
# with the other's copy, and the link bounds the step, 10 ms a launch;
# three, the same.  launch-cycle's last step: B's move may start at launch
# 5's start (52 ms), two launches ahead: A back 52-62, B in 62-72; the step
# is launch 6 (1 ms), the wait for that copy (18), then launches 7 and 8.
for m in 1 2 3; do
	"$place" --replay "$abc" --hbm 1000 --pcie 10 --movers $m --json >"$tmp/m$m.json" 2>"$tmp/err"
done
while IFS='|' read -r f scope pol want what; do
	case $f in '#'* | '') continue ;; esac
	is_figs "$tmp/$f" "$scope" "$pol" "$want" "$what"
done <<'FIGS'
m1.json|step|launch-lru|60.000 300000000 300000000 0 300000000 3 3 0|--movers 1, launch-lru: 3 x 20 ms, each launch's 1 ms hidden (63 with none)
m2.json|step|launch-lru|30.000 300000000 300000000 0 300000000 3 3 0|--movers 2, launch-lru: one move's send back beside another's copy, the link bounds it: 3 x 10 ms
m2.json|total|launch-lru|83.000 700000000 700000000 0 900000000 7 7 0|--movers 2, launch-lru over the trace: 83 ms (149 with none; launch 2, no cycle yet, moves on the launching thread)
m3.json|step|launch-lru|30.000 300000000 300000000 0 300000000 3 3 0|--movers 3: 30 ms still: the driver and the link bound it, not the movers
m2.json|step|launch-cycle|21.000 100000000 100000000 0 300000000 1 1 0|--movers 2, launch-cycle: its one move started two launches ahead, 21 ms (23 with none)
m2.json|total|launch-cycle|74.000 400000000 400000000 0 900000000 4 4 0|--movers 2, launch-cycle over the trace: 74 ms (89 with none)
FIGS
pycheck "--json: the model names its movers" "$tmp/m2.json" 'd["model"]["movers"] == 2'
"$place" --replay "$abc" --json >"$tmp/mdef.json" 2>"$tmp/err"
pycheck "--movers defaults to vmmx-run's 2" "$tmp/mdef.json" 'd["model"]["movers"] == 2'
"$place" --replay "$abc" --movers 5 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q -- "--movers" "$tmp/err" && ! test -s "$tmp/out"
check $? "--movers 5: exit 2, the option named ($(head -1 "$tmp/err"))"
"$place" --replay "$abc" -p launch-belady,in-place --json >"$tmp/two.json" 2>"$tmp/err"
pycheck "--policy LIST: only those policies; the default rates (4427 and 51.4 GB/s)" "$tmp/two.json" \
	'[x["policy"] for x in d["total"]] == ["in-place", "launch-belady"] and d["model"]["hbm_gbps"] == 4427 and d["model"]["pcie_gbps"] == 51.4'

# The recorded run's own moves price the replay's: 100 MB in took 20 ms (5
# GB/s), 100 MB back 5 ms (20 GB/s); a failed one is counted, not used.
# launch-belady's step then misses A and C at 20 + 5 + 1 ms each: 53 ms.
{ cat "$abc"
  echo '{"pid":4242,"event":"move","to":"device","base":"0x20000000","size":100000000,"ns":20000000,"ok":true}'
  echo '{"pid":4242,"event":"move","to":"host","base":"0x10000000","size":100000000,"ns":5000000,"ok":true}'
  echo '{"pid":4242,"event":"move","to":"host","base":"0x10000000","size":100000000,"ns":1,"ok":false}'
} >"$tmp/moves.jsonl"
"$place" --replay "$tmp/moves.jsonl" --hbm 1000 --pcie 10 --movers 0 --json >"$tmp/moves.json" 2>"$tmp/err"
check $? "--replay of a trace with move records exits 0"
pycheck "move records: 1 in, 1 back, 1 failed; moves priced at the run's own rates (5 GB/s in, 20 GB/s back)" \
	"$tmp/moves.json" 'd["trace"]["move_records_in"] == 1 and d["trace"]["move_records_out"] == 1 and d["trace"]["move_records_failed"] == 1 and d["model"]["move_in_gbps"] == 5 and d["model"]["move_out_gbps"] == 20 and d["model"]["move_in_from"] == "median" and d["model"]["move_out_from"] == "median"'
is_figs "$tmp/moves.json" step launch-belady "53.000 200000000 200000000 0 300000000 2 2 0" \
	"launch-belady at the recorded rates: 2 x (20 in + 5 back + 1) + 1 = 53 ms (43 at --pcie's 10 GB/s both ways)"
"$place" --replay "$tmp/moves.jsonl" --hbm 1000 --pcie 10 --movers 0 --move-rates pcie --json >"$tmp/mpcie.json" 2>"$tmp/err"
is_figs "$tmp/mpcie.json" step launch-belady "43.000 200000000 200000000 0 300000000 2 2 0" \
	"--move-rates pcie: the moves at --pcie again, 43 ms"
# The median, not the mean: three sends back of 100 MB, one of them a
# first send back that made host memory (200 ms), two at 5 ms: 20 GB/s.
{ cat "$tmp/moves.jsonl"
  echo '{"pid":4242,"event":"move","to":"host","base":"0x20000000","size":100000000,"ns":200000000,"ok":true}'
  echo '{"pid":4242,"event":"move","to":"host","base":"0x30000000","size":100000000,"ns":5000000,"ok":true}'
} >"$tmp/slow.jsonl"
"$place" --replay "$tmp/slow.jsonl" --hbm 1000 --pcie 10 --json >"$tmp/slow.json" 2>"$tmp/err"
pycheck "a run's slow first send back does not skew the rate: the median of 200, 5 and 5 ms for 100 MB, 20 GB/s (the mean would give 1.43)" \
	"$tmp/slow.json" 'd["trace"]["move_records_out"] == 3 and d["model"]["move_out_gbps"] == 20 and d["model"]["move_in_gbps"] == 5'
# Moves of nothing, or timed at 0 ns, count as records but not as rates.
{ cat "$tmp/slow.jsonl"
  echo '{"pid":4242,"event":"move","to":"host","base":"0x20000000","size":0,"ns":3000,"ok":true}'
  echo '{"pid":4242,"event":"move","to":"host","base":"0x20000000","size":0,"ns":3000,"ok":true}'
  echo '{"pid":4242,"event":"move","to":"host","base":"0x20000000","size":100000000,"ns":0,"ok":true}'
} >"$tmp/zero.jsonl"
"$place" --replay "$tmp/zero.jsonl" --hbm 1000 --pcie 10 --move-rates trace --json >"$tmp/zero.json" 2>"$tmp/err"
pycheck "moves of 0 bytes or 0 ns leave the median alone (still 20 GB/s back), and --move-rates trace takes the trace" \
	"$tmp/zero.json" 'd["trace"]["move_records_out"] == 6 and d["model"]["move_out_gbps"] == 20 and d["model"]["move_out_from"] == "median"'
"$place" --replay "$abc" --move-rates trace >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q -- '--move-rates trace: .*holds no move record' "$tmp/err"
check $? "--move-rates trace on a trace without move records: exit 1, said so"
# The recorded step (launches 6-8, at 1000.006-1000.008 s, the last of the
# trace): the moves and waits recorded from its first launch on, by the
# thread that made them; those before it are the earlier steps'.  Its two
# moves in overlap (1000.0055-1000.0065 and 1000.006-1000.0075): under way
# 2 ms, not their 2.5 ms summed, so the model moves in at 200 MB / 2 ms =
# 100 GB/s (each move's own rates, 100 and 66.7 GB/s, would count the
# sharing twice), and back at 100 MB / 0.25 ms = 400 GB/s.
{ cat "$abc"
  echo '{"time":1000.0035,"pid":4242,"event":"move","to":"device","base":"0x20000000","size":100000000,"ns":2000000,"ok":true,"by":"mover"}'
  echo '{"time":1000.004,"pid":4242,"event":"wait","for":"device","base":"0x10000000","ns":700000,"by":"launch"}'
  echo '{"time":1000.0065,"pid":4242,"event":"move","to":"device","base":"0x20000000","size":100000000,"ns":1000000,"ok":true,"by":"mover"}'
  echo '{"time":1000.0066,"pid":4242,"event":"move","to":"host","base":"0x10000000","size":100000000,"ns":250000,"ok":true,"by":"mover"}'
  echo '{"time":1000.007,"pid":4242,"event":"wait","for":"event","base":"0x10000000","ns":500000,"by":"mover"}'
  echo '{"time":1000.0075,"pid":4242,"event":"move","to":"device","base":"0x30000000","size":100000000,"ns":1500000,"ok":true,"by":"launch"}'
  echo '{"time":1000.0078,"pid":4242,"event":"wait","for":"mover","base":"0x20000000","ns":300000,"by":"launch"}'
  echo '{"time":1000.0079,"pid":4242,"event":"wait","for":"pieces","base":"0x20000000","ns":100000,"by":"launch"}'
  echo '{"time":1000.0079,"pid":5151,"event":"wait","for":"mover","base":"0x20000000","ns":900000,"by":"launch"}'
} >"$tmp/step.jsonl"
says "$tmp/step.jsonl" "run the recorded step took 2\.000 ms by the launches' clock (to its last launch); moved in 2 (1 by movers; under way 2\.000 ms), back 1 (1 by movers; under way 0\.250 ms); waits: for the device 0 (0\.000 ms), last uses 1 (0\.500 ms), the movers 1 (0\.300 ms), pieces 1 (0\.100 ms) model .* moves in 100\.0 GB/s, back 400\.0 GB/s (the recorded step's moves: bytes over the time one was under way)" \
	"the recorded step: 2 ms from its first launch to its last; its 2 moves in (1 by a mover, 2 ms under way: they overlap), 1 back, and 3 waits, by kind; the earlier step's and another process's left out; the model moves at the step's busy rates"
"$place" --replay "$tmp/step.jsonl" --hbm 1000 --pcie 10 --json >"$tmp/step.json" 2>"$tmp/err"
pycheck "--json: the recorded step's figures (step_ms 2, in 2 by movers 1, event 0.5 ms)" "$tmp/step.json" \
	'abs(d["recorded"]["step_ms"] - 2) < 1e-6 and d["recorded"]["step_to"] == "last launch" and [d["recorded"][k]["count"] for k in ("in", "out", "device", "event", "mover", "pieces")] == [2, 1, 0, 1, 1, 1] and d["recorded"]["in"]["by_movers"] == 1 and abs(d["recorded"]["event"]["ms"] - 0.5) < 1e-9 and d["recorded"]["in"]["bytes"] == 200000000 and abs(d["recorded"]["in"]["busy_ms"] - 2) < 1e-6 and abs(d["recorded"]["in"]["ms"] - 2.5) < 1e-9 and d["recorded"]["out"]["bytes"] == 100000000 and abs(d["recorded"]["out"]["busy_ms"] - 0.25) < 1e-6 and d["model"]["move_in_from"] == "step" and abs(d["model"]["move_in_gbps"] - 100) < 1e-3 and d["model"]["move_out_from"] == "step" and abs(d["model"]["move_out_gbps"] - 400) < 1e-3'
# A step with a move back only: moves in at the median of the run's (the
# one before the step: 100 MB in 2 ms, 50 GB/s), back at the step's.
{ cat "$abc"
  echo '{"time":1000.0035,"pid":4242,"event":"move","to":"device","base":"0x20000000","size":100000000,"ns":2000000,"ok":true,"by":"mover"}'
  echo '{"time":1000.0066,"pid":4242,"event":"move","to":"host","base":"0x10000000","size":100000000,"ns":500000,"ok":true,"by":"mover"}'
} >"$tmp/half.jsonl"
says "$tmp/half.jsonl" "moves in 50\.0 GB/s, back 200\.0 GB/s (in: the median of the recorded run's moves; back: the recorded step's moves: bytes over the time one was under way)" \
	"a step that moved nothing in: moves in at the run's median (50 GB/s), back at the step's (200 GB/s), each said"
"$place" --replay "$abc" --json >"$tmp/norec.json" 2>"$tmp/err"
pycheck "no move or wait record with a time: no recorded step" "$tmp/norec.json" '"recorded" not in d'
{ cat "$abc"; echo '{"time":1000.007,"pid":4242,"event":"wait","for":"lunch","ns":5}'; } >"$tmp/badwait.jsonl"
"$place" --replay "$tmp/badwait.jsonl" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'badwait.jsonl:13: wait record: expected "for":"device", "event", "mover" or "pieces" and "ns":N' "$tmp/err"
check $? "a malformed wait record: exit 1, its line named"
{ cat "$abc"; echo '{"pid":4242,"event":"move","to":"sideways","size":1,"ns":1,"ok":true}'; } >"$tmp/badmove.jsonl"
"$place" --replay "$tmp/badmove.jsonl" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'badmove.jsonl:13: move record: expected "to":"device" or "host"' "$tmp/err"
check $? "a malformed move record: exit 1, its line named"

# Read once: each launch names a 100 MB weight beside a 1 MB activation X
# (the weight is 99% of its bytes); W0, W1 and X fit, W2 lies in host
# memory.  launch-cycle leaves W2 in place at each of its 3 launches: the
# victim it would take (W1, next needed at 8 by the cycle's reckoning at
# launch 6) is needed before W2 is again (9); launch-lru brings it in.
i=0
for p in 0 1 2 0 1 2 0 1 2; do
	w=$((i % 3))
	loc=device:0
	[ $w -eq 2 ] && loc=host
	echo "{\"pid\":5,\"time\":$i.0,\"event\":\"launch\",\"cycle_pos\":$p,\"chunks\":[{\"base\":\"0x80000000\",\"size\":1000000,\"loc\":\"device:0\"},{\"base\":\"0x9${w}000000\",\"size\":100000000,\"loc\":\"$loc\"}]}"
	i=$((i + 1))
done >"$tmp/once.jsonl"
"$place" --replay "$tmp/once.jsonl" --device-bytes 201MB --json >"$tmp/once.json" 2>"$tmp/err"
pycheck "read once: launch-cycle reads W2 in place at its 3 launches, moves nothing; launch-lru brings it in; launch-in-place never (each weight named once a cycle)" \
	"$tmp/once.json" '[(x["policy"], x["read_once"], x["moves_in"], x["read_in_place"]) for x in d["total"]] == [("in-place", 0, 0, 300000000), ("launch-lru", 0, 7, 0), ("launch-belady", 0, 4, 0), ("launch-cycle", 3, 0, 300000000), ("launch-in-place", 0, 0, 300000000), ("launch-spread", 3, 0, 300000000)]'

# The same after a launch that named Z (100 MB on the device) and nothing
# names again: Z's expected use passes, nothing is known to need it, and
# W2 comes in in its place (once), then stays.
{ echo '{"pid":5,"time":0.5,"event":"launch","cycle_pos":-1,"chunks":[{"base":"0x80000000","size":1000000,"loc":"device:0"},{"base":"0xa0000000","size":100000000,"loc":"device:0"}]}'
  cat "$tmp/once.jsonl"; } >"$tmp/once2.jsonl"
"$place" --replay "$tmp/once2.jsonl" --device-bytes 301MB -p launch-cycle --json >"$tmp/once2.json" 2>"$tmp/err"
pycheck "read once: brought in once in place of a segment whose expected use passed (Z), then read on the device" \
	"$tmp/once2.json" '[(x["read_once"], x["moves_in"], x["moves_out"], x["read_in_place"]) for x in d["total"]] == [(0, 1, 1, 0)]'

# A freed buffer: a second buffer placed over the first one's addresses takes
# its room; the first is gone (100 MB of room is enough for both in turn).
cat >"$tmp/free.jsonl" <<'EOF'
{"pid":7,"buf":"0x40000000","buf_id":1,"offset":0,"size":100000000,"chosen":"device:0"}
{"pid":7,"event":"launch","cycle_pos":-1,"chunks":[{"base":"0x40000000","size":100000000,"loc":"device:0"}]}
{"pid":7,"buf":"0x40000000","buf_id":2,"offset":0,"size":100000000,"chosen":"device:0"}
{"pid":7,"event":"launch","cycle_pos":-1,"chunks":[{"base":"0x40000000","size":100000000,"loc":"device:0"}]}
EOF
"$place" --replay "$tmp/free.jsonl" --device-bytes 100MB --json >"$tmp/free.json" 2>"$tmp/err"
pycheck "a buffer placed over a freed one: two segments, the second on the device in the first's room; no time in the trace: compute 0" \
	"$tmp/free.json" 'd["trace"]["segments"] == 2 and d["cycle"] is None and d["step"] is None and d["model"]["compute"] == "none" and [(x["read_on_device"], x["read_in_place"]) for x in d["total"]] == [(200000000, 0)] * 6'

# Records without a pid (written by hand) are one process's: C in host memory, brought in.
echo '{"event":"launch","cycle_pos":-1,"chunks":[{"base":"0x50000000","size":1000,"loc":"host"}]}' >"$tmp/nopid.jsonl"
"$place" --replay "$tmp/nopid.jsonl" --json >"$tmp/nopid.json" 2>"$tmp/err"
pycheck "a trace without pids: replayed; room for the one launch (1000 B); launch-lru brings it in (launch-in-place and launch-spread too: into free room), in-place reads it in place" \
	"$tmp/nopid.json" 'd["trace"]["pid"] == -1 and d["model"]["device_bytes"] == 1000 and [(x["moved_in"], x["moved_out"], x["read_in_place"]) for x in d["total"]] == [(0, 0, 1000)] + [(1000, 0, 0)] * 5'

# The cycle as the interposer gives it: learned at launch 3, dropped at 10 by
# three launches it did not expect (-1: not a step), learned again at 13; the
# trace ends inside a step (positions 0, 1 of 3: not a step).
i=0
for p in -1 -1 -1 0 1 2 0 1 2 0 -1 -1 -1 0 1 2 0 1; do
	echo "{\"event\":\"launch\",\"cycle_pos\":$p,\"chunks\":[{\"base\":\"0x6$((i % 3))000000\",\"size\":1000,\"loc\":\"device:0\"}]}"
	i=$((i + 1))
done >"$tmp/cyc.jsonl"
"$place" --replay "$tmp/cyc.jsonl" --json >"$tmp/cyc.json" 2>"$tmp/err"
pycheck "the steps: 3 of 3 launches (3-5, 6-8, 13-15); a drop and a trace ending mid-step are not steps" \
	"$tmp/cyc.json" 'd["cycle"] == {"length": 3, "complete_steps": 3, "step_first_launch": 13, "step_launches": 3}'
# A buffer its record placed in host memory starts there, though its first
# launch saw it on the device (moved before it): a move seen.
cat >"$tmp/ahead.jsonl" <<'EOF'
{"pid":9,"buf":"0x70000000","buf_id":1,"offset":0,"size":1000,"chosen":"host"}
{"pid":9,"event":"launch","cycle_pos":-1,"chunks":[{"base":"0x70000000","size":1000,"loc":"device:0"}]}
EOF
"$place" --replay "$tmp/ahead.jsonl" -p in-place --json >"$tmp/ahead.json" 2>"$tmp/err"
pycheck "a buffer starts where its placement record put it (host), not where its first launch saw it; that counts as a move seen" \
	"$tmp/ahead.json" 'd["trace"]["moves_seen"] == 1 and d["total"][0]["read_in_place"] == 1000 and d["model"]["device_bytes"] == 1000'

# ---- a trace recorded for real on the sim ----
# launchclient's "place": six 64 MiB buffers, four fit; 16 MiB chunks, so a
# launch names a buffer's first chunk and the placement records make it whole.
(
	. "$top_srcdir/tests/preload/env.sh"
	# The scenario's moves as launchclient checks them: ahead on the launching thread.
	VMMX_SIM_DEVICE_MEM=1GiB VMMX_HOST_LIMIT=1GiB VMMX_CHUNK_MAX=16MiB VMMX_RUN_PLACE_MOVER=0 \
		"$run" --policy device-first --device-limit 256MiB --headroom 0 --placement launch \
		--report-file "$tmp/rep" --trace "$tmp/rec.jsonl" -- \
		"$top_builddir/tests/preload/launchclient" place >"$tmp/rec.tap" 2>&1
	echo "status $?"
) >"$tmp/rec.out" 2>&1
if grep -q '^1\.\.0 # SKIP' "$tmp/rec.out"; then
	why=$(sed -n 's/^1\.\.0 # SKIP //p' "$tmp/rec.out")
	skip "recorded trace: $why"
	skip "recorded trace: $why"
	skip "recorded trace: $why"
	skip "recorded trace: $why"
else
	grep -q '^status 0$' "$tmp/rec.out" &&
		grep -q 'placement  *launch: 8 segments brought to the device (512.0 MiB[:)].*, 8 sent back (512.0 MiB' "$tmp/rep"
	st=$?
	check $st "recorded: launchclient under vmmx-run --placement launch --trace moved 8 segments in and 8 out (its report)"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/rec.out" "$tmp/rec.tap" "$tmp/rep" 2>/dev/null
	"$place" --replay "$tmp/rec.jsonl" --json >"$tmp/rec.json" 2>"$tmp/err"
	pycheck "recorded: 18 launches, 6 segments of 64 MiB from 24 chunk records, room for 4 (256 MiB), a cycle of 6; the moves seen turn the gaps off" \
		"$tmp/rec.json" 'd["trace"]["launches"] == 18 and d["trace"]["segments"] == 6 and d["trace"]["segment_bytes"] == 6 * 64 << 20 and d["trace"]["placement_records"] == 24 and d["model"]["device_bytes"] == 256 << 20 and d["cycle"]["length"] == 6 and d["model"]["compute"] == "none" and d["trace"]["moves_seen"] > 0'
	pycheck "recorded: the run's 8 moves each way in the trace, which prices the replay's moves" \
		"$tmp/rec.json" 'd["trace"]["move_records_in"] == 8 and d["trace"]["move_records_out"] == 8 and d["trace"]["move_records_failed"] == 0 and all(d["model"]["move_%s_from" % w] == ("step" if d["recorded"][w]["busy_ms"] > 0 else "median") for w in ("in", "out")) and d["model"]["move_in_gbps"] > 0 and (d["recorded"]["in"]["busy_ms"] == 0 or abs(d["model"]["move_in_gbps"] - d["recorded"]["in"]["bytes"] / d["recorded"]["in"]["busy_ms"] / 1e6) < 1e-6 * d["model"]["move_in_gbps"])'
	M=67108864
	pycheck "recorded: launch-cycle predicts what the run did (8 moves in, 8 out, 512 MiB each); launch-belady 6, launch-lru 14, in-place and launch-in-place none (each buffer named once a cycle)" \
		"$tmp/rec.json" '[(x["policy"], x["moves_in"], x["moves_out"], x["moved_in"]) for x in d["total"]] == [("in-place", 0, 0, 0), ("launch-lru", 14, 14, 14 * '$M'), ("launch-belady", 6, 6, 6 * '$M'), ("launch-cycle", 8, 8, 8 * '$M'), ("launch-in-place", 0, 0, 0), ("launch-spread", 8, 8, 8 * '$M')]'
fi

# ---- launch-spread: the kept set spread over the cycle (VMMX_RUN_PLACE_SPREAD) ----
# replay-spread.jsonl: 16 segments W1-W16 of 128 MiB named in turn, one a
# launch, three times (a cycle of 16 from the second pass); the device holds
# 10.  With 2 movers the stream takes (2 + 2) x 128 MiB, so 6 of the 10 are
# kept: 6/16 = 3/8 of each segment accumulated in the order named, one kept
# each time a whole one is reached: W3, W6, W8, W11, W14 and W16 (the
# stream's room holds others between their uses).  launch-cycle (Belady's
# choice by next use) keeps the run of segments allocation left there
# (W6-W13) and streams W14-W5; both move 7 segments each way a step.
spread="$top_srcdir/tests/tools/replay-spread.jsonl"
"$place" --replay "$spread" --device-bytes 1280MiB --hbm 1000 --pcie 10 --compute-step 160 \
	-p launch-cycle,launch-spread --json >"$tmp/spread.json" 2>"$tmp/err"
check $? "--replay -p launch-cycle,launch-spread exits 0"
pycheck "launch-spread: W3, W6, W8, W11, W14 and W16 on the device at every launch of the step; W1, W4 and W12 in host memory but at their own" \
	"$tmp/spread.json" '(c := [c["segments"] for c in d["charts"] if c["name"] == "residency-launch-spread"][0]) and all(c[w - 1]["cells"].lower() == "d" * 16 for w in (3, 6, 8, 11, 14, 16)) and all(c[w - 1]["cells"].count("h") == 15 for w in (1, 4, 12))'
pycheck "launch-cycle: a run of segments kept (W5-W13), W16 in host memory but at its own launch" \
	"$tmp/spread.json" '[i + 1 for i, s in enumerate([c for c in d["charts"] if c["name"] == "residency-launch-cycle"][0]["segments"]) if s["cells"].lower() == "d" * 16] == list(range(6, 14)) and [c for c in d["charts"] if c["name"] == "residency-launch-cycle"][0]["segments"][15]["cells"] == "h" * 15 + "D"'
pycheck "launch-spread moves no more than launch-cycle: 7 segments each way a step" \
	"$tmp/spread.json" '[(x["policy"], x["moves_in"], x["moves_out"]) for x in d["step"]] == [("launch-cycle", 7, 7), ("launch-spread", 7, 7)]'
# The device holding 5: the stream takes 4, 1/16 is kept (W16 alone).
"$place" --replay "$spread" --device-bytes 640MiB --hbm 1000 --pcie 10 -p launch-spread --json \
	>"$tmp/spread5.json" 2>"$tmp/err"
pycheck "launch-spread with room for 5: W16 kept (on the device at every launch of the step), W1-W9 streamed" \
	"$tmp/spread5.json" '(c := d["charts"][0]["segments"]) and c[15]["cells"] == "d" * 15 + "D" and all(c[w]["cells"].count("h") == 15 for w in range(9))'
# replay-spread-extra.jsonl: the same with a launch the cycle did not expect
# (at -1, naming W8) after W8's in each pass over it: the kept set stands
# through it, as the interposer's does (once, it was dropped there and
# Belady's choice ruled the rest of the step: 11 moves each way).
"$place" --replay "$top_srcdir/tests/tools/replay-spread-extra.jsonl" --device-bytes 1280MiB \
	--hbm 1000 --pcie 10 --compute-step 160 -p launch-spread --json >"$tmp/spreadx.json" 2>"$tmp/err"
pycheck "launch-spread through a launch at -1 inside the step: W3, W6, W8, W11, W14 and W16 on the device at all 17 launches, 7 segments each way" \
	"$tmp/spreadx.json" '(c := d["charts"][0]["segments"]) and all(c[w - 1]["cells"].lower() == "d" * 17 for w in (3, 6, 8, 11, 14, 16)) and [(x["moves_in"], x["moves_out"]) for x in d["step"]] == [(7, 7)]'
# --ahead: how far ahead of its launch a move may start (vmmx-run's
# VMMX_RUN_PLACE_AHEAD): by default 32 launches, 128 under launch-spread's
# set; one launch ahead, each move of 128 MiB at 10 GB/s shows in the step.
"$place" --replay "$spread" --device-bytes 1280MiB --hbm 1000 --pcie 10 --compute-step 160 \
	-p launch-spread --json >"$tmp/ahead0.json" 2>"$tmp/err" &&
	"$place" --replay "$spread" --device-bytes 1280MiB --hbm 1000 --pcie 10 --compute-step 160 \
		-p launch-spread --ahead 1 --json >"$tmp/ahead1.json" 2>"$tmp/err"
check $? "--replay --ahead 1 exits 0"
pycheck "--ahead: the model says 32 and 128 by default; the step takes its compute (160 ms) with them, longer one launch ahead, the same moves" \
	"$tmp/ahead0.json" '(e := json.load(open("'"$tmp"'/ahead1.json"))) and (d["model"]["ahead"], d["model"]["ahead_spread"], e["model"]["ahead"], e["model"]["ahead_spread"]) == (32, 128, 1, 1) and abs(d["step"][0]["time_s"] - 0.160) < 1e-5 and e["step"][0]["time_s"] > 0.200 and (d["step"][0]["moves_in"], e["step"][0]["moves_in"]) == (7, 7)'
"$place" --replay "$spread" --ahead 2000 >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st -eq 2 ] && grep -q -- '--ahead 2000: expected a whole number from 0 to 1024' "$tmp/err"
check $? "--replay --ahead 2000 is refused by name with exit 2"

# ---- the plot ----
if [ -z "$py" ]; then
	skip "no python3: vmmx_tools.plot reads a residency chart"
else
	$py -c 'import json, sys
sys.path.insert(0, sys.argv[1])
import vmmx_tools.plot as p
d = json.load(open(sys.argv[2], encoding="utf-8"))
c = [x for x in d["charts"] if x["name"] == "residency-launch-belady"][0]
assert p.residency_grid(c) == ([[1, 1, 2], [1, 1, 1], [2, 2, 1]], [(0, 0), (1, 1), (2, 2)]), p.residency_grid(c)
assert "matplotlib" not in sys.modules
try:
    p.residency_grid({"name": "x", "segments": [{"cells": "dx"}]})
    sys.exit("a bad cell was taken")
except ValueError as e:
    assert "not d, h or ." in str(e)' "$top_srcdir/python" "$tmp/abc.json" 2>"$tmp/py.err"
	check $? "vmmx_tools.plot reads a residency chart without matplotlib: codes by location (1 device, 2 host), the named cells, a bad cell refused"
	sed 's/^/# /' "$tmp/py.err"
fi
if [ -n "$plot_why" ]; then
	skip "residency plot: $plot_why"
	skip "residency plot: $plot_why"
else
	"$plot" "$tmp/abc.json" -o "$tmp/res.png" 2>"$tmp/err" && png_ok "$tmp/res.png" &&
		"$plot" --list "$tmp/abc.json" | cut -f1 | tr '\n' ' ' | grep -q '^residency-in-place residency-launch-lru residency-launch-belady residency-launch-cycle residency-launch-in-place residency-launch-spread $'
	check $? "vmmx-plot draws the replay's residency charts (PNG), one per policy"
	"$place" --replay "$abc" -p launch-cycle --plot "$tmp/cyc.svg" >/dev/null 2>"$tmp/err" &&
		grep -q '<svg' "$tmp/cyc.svg"
	check $? "--replay --plot FILE.svg draws the residency"
fi

# ---- many tensors in one segment (replay-places.jsonl, hand-made) ----
# W, a 400 MB buffer of two 200 MB chunks placed in host memory, named at
# four addresses 100 MB apart (a segment a caching allocator carved four
# tensors out of): launches 0-3 one each, launch 3 with B (100 MB, seen on
# the device), launch 4 C alone (100 MB, in host memory), launch 5 two of
# W's tensors (one in each chunk: 200 MB), launch 6 a graph launch naming
# W by its base (a graph reads many tensors: all 400 MB).
# --hbm 1000 --pcie 10 --compute none --movers 0, 450 MB of device room:
#  - in-place: W read in place, 400 + 200 + 400 MB, and C, 100 MB, at 10
#    GB/s = 110 ms; B first seen with room on the device: 0.1 ms.  110.1 ms.
#  - launch-lru: W brought in into free room at launch 0 (400 MB at 10
#    GB/s, 40 ms), then read from HBM (1000 MB: 1 ms); B (launch 3) and C
#    (launch 4) find no room: W, named at four addresses and over a quarter
#    of the room, is never sent back for another, even by a launch that
#    does not name it (C's); each read in place, 10 ms.  61 ms.
places="$top_srcdir/tests/tools/replay-places.jsonl"
"$place" --replay "$places" --hbm 1000 --pcie 10 --movers 0 --compute none --device-bytes 450000000 --json >"$tmp/places.json" 2>"$tmp/err"
check $? "--replay of a segment named at four addresses exits 0"
is_figs "$tmp/places.json" total in-place "110.100 0 0 1100000000 100000000 0 0 0" \
	"in-place: a launch reads its tensors of the segment (each to the next address named; two tensors in two chunks add up), a graph launch all of it; 110.1 ms"
is_figs "$tmp/places.json" total launch-lru "61.000 400000000 0 200000000 1000000000 1 0 2" \
	"launch-lru: the segment of many tensors brought in into free room, never sent back for another (too large, as vmmx-run has it), not even for a launch that does not name it: B and C read in place, no room 2"
# Launch 4 also names W by a word that reads as two integers ("pair":1): not
# a read of W, as vmmx-run does not place it either; the figures stand.
sed '/"kernel":"kc"/s/"chunks":\[/"chunks":[{"base":"0x100000000","size":200000000,"loc":"host","at":"0x100000003","param":0,"off":8,"pair":1},/' "$places" >"$tmp/pair.jsonl"
grep -q '"pair":1' "$tmp/pair.jsonl" &&
	"$place" --replay "$tmp/pair.jsonl" --hbm 1000 --pcie 10 --movers 0 --compute none --device-bytes 450000000 --json >"$tmp/pair.json" 2>"$tmp/err"
check $? "--replay of the same with a pair naming W at launch 4 exits 0"
is_figs "$tmp/pair.json" total in-place "110.100 0 0 1100000000 100000000 0 0 0" \
	"in-place: a chunk named by two integers (\"pair\":1) is not read: 110.1 ms, as without it"
sed 's/"pair":1/"pair":0/' "$tmp/pair.jsonl" >"$tmp/nopair.jsonl"
"$place" --replay "$tmp/nopair.jsonl" --hbm 1000 --pcie 10 --movers 0 --compute none --device-bytes 450000000 --json >"$tmp/nopair.json" 2>"$tmp/err"
is_figs "$tmp/nopair.json" total in-place "100.100 0 0 1000000003 100000000 0 0 0" \
	"... taken for a pointer (\"pair\":0), the word is a place in W: it cuts W's first tensor 3 bytes in (launch 0 reads 3 bytes, launch 4 from there to the next address): 1000000003 bytes in place, 100.1 ms"
sed 's/,"at":"0x[0-9a-f]*"//g' "$places" >"$tmp/noat.jsonl"
"$place" --replay "$tmp/noat.jsonl" --hbm 1000 --pcie 10 --movers 0 --compute none --device-bytes 450000000 --json >"$tmp/noat.json" 2>"$tmp/err"
is_figs "$tmp/noat.json" total in-place "250.100 0 0 2500000000 100000000 0 0 0" \
	"a trace without \"at\" (older): each launch reads the whole segment, 6 x 400 MB in place"
# --cycle L: the step of that cycle reported (a prefill's among decode steps).
"$place" --replay "$abc" --hbm 1000 --pcie 10 --movers 0 --cycle 3 >"$tmp/table" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q '^cycle  *3 launches, 2 complete steps; figures for the last step (launches 6-8)' "$tmp/table"
check $? "--cycle 3: the last step of the 3-launch cycle reported"
# Steps of 2 launches, then 3 (a prefill's among decode steps), then 2 again.
for pos in 0 1 0 1 0 1 2 0 1 2 0 1 0 1; do
	echo '{"pid":7,"event":"launch","cycle_pos":'$pos',"chunks":[{"base":"0x1000","size":4096,"loc":"device:0"}]}'
done >"$tmp/mixed.jsonl"
"$place" --replay "$tmp/mixed.jsonl" >"$tmp/table" 2>"$tmp/err" &&
	grep -q '^cycle  *2 launches, 6 complete steps; figures for the last step (launches 12-13)' "$tmp/table" &&
	"$place" --replay "$tmp/mixed.jsonl" --cycle 3 >"$tmp/table" 2>"$tmp/err" &&
	grep -q '^cycle  *3 launches, 2 complete steps; figures for the last step (launches 7-9)' "$tmp/table"
check $? "steps of 2, 3, then 2 launches: the last step by default; --cycle 3 the last of the 3-launch steps, earlier in the trace"
"$place" --replay "$abc" --cycle 5 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q -- "--cycle 5: .*replay-abc.jsonl has no complete step of a cycle of 5 launches (its last step is of 3)" "$tmp/err" && test ! -s "$tmp/out"
check $? "--cycle 5 on a trace whose steps are of 3 launches: exit 1, the cycle it has named"
refused "--cycle 0" '--cycle 0: expected a whole number from 1 to 65536' --replay "$abc" --cycle 0

# ---- bad input: the problem named, nonzero exit ----
"$place" --replay "$tmp/no-such.jsonl" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "no-such.jsonl: cannot open: No such file" "$tmp/err" && test ! -s "$tmp/out"
check $? "a missing trace: exit 1, the file and why"
{ head -n 3 "$abc"; echo '{"pid":4242,"event":"launch",'; } >"$tmp/broken.jsonl"
"$place" --replay "$tmp/broken.jsonl" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q "broken.jsonl:4: not JSON: offset" "$tmp/err"
check $? "a malformed line: exit 1, its line number named ($(head -c 120 "$tmp/err"))"
{ head -n 3 "$abc"; echo '{"pid":4242,"event":"launch","cycle_pos":-1,"chunks":[{"base":"12","size":4096,"loc":"device:0"}]}'; } >"$tmp/chunk.jsonl"
"$place" --replay "$tmp/chunk.jsonl" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'chunk.jsonl:4: chunk 1 of the launch: expected {"base":"0x...' "$tmp/err"
check $? "a chunk without a 0x base: exit 1, the line and the chunk named"
echo '{"pid":1,"event":"launch","chunks":[]}' >"$tmp/nopos.jsonl"
"$place" --replay "$tmp/nopos.jsonl" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'nopos.jsonl:1: launch record without a "cycle_pos"' "$tmp/err"
check $? "a launch record without cycle_pos: exit 1, said so"
echo '{"pid":1,"hello":2}' >"$tmp/what.jsonl"
"$place" --replay "$tmp/what.jsonl" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'no launch records' "$tmp/err"
check $? "a file with no launch records: exit 1, and how to record them"
head -n 2 "$abc" >"$tmp/only.jsonl"
echo '{"pid":4242,"something":1}' >>"$tmp/only.jsonl"
sed -n 3p "$abc" >>"$tmp/only.jsonl"
"$place" --replay "$tmp/only.jsonl" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'only.jsonl:3: neither a launch record' "$tmp/err"
check $? "a record of no known kind: exit 1, its line named"
"$place" --replay "$tmp" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q 'not a regular file' "$tmp/err"
check $? "a directory: exit 1, not a regular file"
"$place" --replay "$tmp/free.jsonl" --compute gaps >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q -- '--compute gaps: .*not every launch record has a "time"' "$tmp/err"
check $? "--compute gaps on a trace without times: exit 1, said so"
refused "an unknown policy" '--policy bogus: unknown "bogus"' --replay "$abc" --policy bogus
refused "a policy of the measuring mode" 'unknown "device-first"' --replay "$abc" -p device-first
refused "--pcie 0" '--pcie 0: expected a rate in GB/s' --replay "$abc" --pcie 0
refused "--compute maybe" '--compute maybe: expected auto, gaps or none' --replay "$abc" --compute maybe
"$place" --replay "$tmp/free.jsonl" --compute-step 5 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && grep -q -- '--compute-step: .*free.jsonl: no complete step of a cycle in it' "$tmp/err" && test ! -s "$tmp/out"
check $? "--compute-step on a trace with no cycle: exit 1, said so"
refused "--compute-step 0" '--compute-step 0: expected a step.s time such as 55.4 (ms)' --replay "$abc" --compute-step 0
refused "--compute-step 5min" '--compute-step 5min: expected' --replay "$abc" --compute-step 5min
refused "--compute-step with --compute gaps" '--compute-step and --compute gaps: give one or the other' --replay "$abc" --compute-step 5 --compute gaps
refused "--compute none with --compute-step" '--compute-step and --compute none' --replay "$abc" --compute none --compute-step 5
refused "--tiled-reads 0" '--tiled-reads 0: expected a factor from 1 to 1024' --replay "$abc" --tiled-reads 0
refused "--tiled-reads 0.5" '--tiled-reads 0.5: expected a factor' --replay "$abc" --tiled-reads 0.5
refused "--tiled-reads 8x" '--tiled-reads 8x: expected a factor' --replay "$abc" --tiled-reads 8x
refused "--move-rates maybe" '--move-rates maybe: expected auto, trace or pcie' --replay "$abc" --move-rates maybe
refused "an option of the measuring mode" 'unknown option --size' --replay "$abc" --size 4MiB
refused "--replay without a file" '--replay needs an argument' --replay
"$place" --replay "$abc" --help >"$tmp/out" 2>&1
[ $? -eq 0 ] && grep -q 'usage: vmmx-place --replay TRACE' "$tmp/out" && grep -q 'launch-belady' "$tmp/out"
check $? "--replay --help prints the replay's usage"

echo "1..$n"
