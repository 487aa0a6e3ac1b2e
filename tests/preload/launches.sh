#!/bin/sh
# SPDX-License-Identifier: MIT
# Kernel launches through vmmx-run on the sim backend: launchclient.c
# prints the TAP of its launches (each reaches the driver unchanged); then
# the report's counts, the trace's records, and launches passed straight
# through when they are not watched.  1 device of 1 GiB, a 256 MiB device
# limit, no headroom, chunks of at most 64 MiB.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-launches.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$top_srcdir/tests/preload/env.sh"
lc="$top_builddir/tests/preload/launchclient"
export VMMX_SIM_DEVICE_MEM=1GiB VMMX_HOST_LIMIT=1GiB VMMX_CHUNK_MAX=64MiB
opts="--policy device-first --device-limit 256MiB --headroom 0"

# Watched, reported and traced.
"$run" $opts --placement alloc --launches --report-file "$tmp/rep" --trace "$tmp/trace" -- "$lc" >"$tmp/tap" 2>"$tmp/err"
st=$?
grep -v '^1\.\.' "$tmp/tap"
n=$(grep -c '^\(not \)\{0,1\}ok ' "$tmp/tap")
sed 's/^/# /' "$tmp/err"
check $st "launchclient exits 0 under vmmx-run --launches --trace"
grep -q 'launches  *11 watched: cuLaunchKernel 7, cuLaunchKernelEx 1, cuLaunchCooperativeKernel 1, cudaLaunchKernel 1, cudaLaunchKernelExC 1; without a parameter layout 1; passed unread before memory was seen spilled 0$' "$tmp/rep" &&
	grep -q 'graphs  *0 launches watched, 2 not read; 0 graphs read' "$tmp/rep"
check $? "--report counts the watched launches per entry point (_ptsz forms with theirs), one without a layout, and the graph launches (never instantiated: not read)"
grep -q 'chunks named  *11, 5 of them in host memory; 5 launches read spilled memory$' "$tmp/rep"
check $? "--report counts the distinct chunks the launches named: plain, interior and struct-held pointers, extra's buffer; a repeated chunk once; foreign memory and integers never"
sed 's/^/# /' "$tmp/rep"

# The trace: one JSON line per launch, in order, each with its chunks and their locations.
grep '"event":"launch"' "$tmp/trace" >"$tmp/launches"
[ "$(wc -l <"$tmp/launches")" -eq 11 ]
check $? "--trace writes one launch record per launch"
l() { sed -n "${1}p" "$tmp/launches"; }
l 1 | grep -q '"seq":0,"api":"cuLaunchKernel","kernel":"k1_two_pointers","stream":"0x5eed","params":3,"cycle_pos":-1,"shared":0,"chunks_named":2,"chunks_host":1,"chunks":\[{"base":"0x[0-9a-f]*","size":67108864,"loc":"device:0","at":"0x[0-9a-f]*","param":0,"off":0},{"base":"0x[0-9a-f]*","size":67108864,"loc":"host","at":"0x[0-9a-f]*","param":2,"off":16}\]}$'
check $? "a launch record: kernel name, stream, parameters, dynamic shared memory, and each chunk named with its base, size, location, and the parameter and byte offset of the word that named it"
l 2 | grep -q '"stream":"0x2",.*"chunks_named":2,"chunks_host":1'
check $? "a _ptsz launch on stream 0 is recorded on the per-thread stream (0x2)"
l 3 | grep -q '"api":"cuLaunchKernelEx","kernel":"k2_struct",.*"shared":49152,"chunks_named":2,"chunks_host":1'
check $? "pointers inside a by-value struct are named; the config's shared memory recorded"
l 3 | grep -q '"param":0,"off":8},{.*"param":0,"off":16,"unsure":1}\]}$'
check $? "... each by the byte offset of its word inside the struct (8 and 16 of parameter 0); b + 12345, an odd address, marked as a word that may be no pointer (\"unsure\":1)"
l 5 | grep -q '"param":-1,"off":0},{.*"param":-1,"off":16}\]}$'
check $? "words of extra's packed buffer: parameter -1, their offsets in the buffer (0 and 16)"
l 4 | grep -q '"api":"cuLaunchCooperativeKernel",.*"shared":1024,'
check $? "a cooperative launch's shared memory is recorded"
l 7 | grep -q '"api":"cudaLaunchKernelExC","kernel":"k4_cukernel","stream":"0x5eed","params":1,"cycle_pos":-1,"shared":65536,"chunks_named":1,"chunks_host":1'
check $? "the runtime's launch of a CUkernel: its layout and name from cuKernelGetParamInfo and cuKernelGetName"
l 8 | grep -q '"kernel":"k5_no_layout",.*"params":-1,"cycle_pos":-1,"shared":0,"chunks_named":0'
check $? "a kernel without a layout is recorded, nothing read"
b1=$(l 1 | sed 's/.*"loc":"device:0","at":"0x[0-9a-f]*"[^}]*},{"base":"\(0x[0-9a-f]*\)".*/\1/')
l 7 | grep -q "\"base\":\"$b1\""
check $? "an interior pointer maps to its chunk's base"
at7=$(l 7 | sed 's/.*"base":"'"$b1"'","size":[0-9]*,"loc":"[a-z0-9:]*","at":"\(0x[0-9a-f]*\)".*/\1/')
[ -n "$at7" ] && [ "$at7" != "$b1" ] && [ $((at7 > b1)) -eq 1 ] && [ $((at7 - b1 < 67108864)) -eq 1 ]
check $? "the record gives the word that named the chunk: the interior pointer itself ($at7), inside its chunk (base $b1)"
grep -q '"chosen":' "$tmp/trace"
check $? "the same file keeps libvmmx's placement records"

# Not watched (--placement alloc; launch is the default): the same launches
# reach the driver, nothing is counted.
"$run" $opts --placement alloc --report-file "$tmp/rep0" -- "$lc" >"$tmp/tap0" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap0" && st=1
check $st "--placement alloc, without --launches: every launch reaches the driver unchanged ($(grep -c '^ok' "$tmp/tap0") checks)"
grep -q 'launches  *not watched' "$tmp/rep0"
check $? "--report says launches were not watched"

# The default placement (launch) on a program that fits: launches pass
# unread, a counter each, until memory spills; --launches reads every one.
"$run" --device-limit 512MiB --headroom 0 --report-file "$tmp/rep32" -- "$lc" bench 1000 >/dev/null 2>&1
grep -q 'launches  *1000 watched: .*; passed unread before memory was seen spilled 1000$' "$tmp/rep32" &&
	grep -q 'chunks named  *0, ' "$tmp/rep32"
check $? "the default placement, nothing spilled: 1000 launches passed unread, nothing named"
"$run" --device-limit 512MiB --headroom 0 --launches --report-file "$tmp/rep33" -- "$lc" bench 1000 >/dev/null 2>&1
grep -q 'passed unread before memory was seen spilled 0$' "$tmp/rep33" &&
	grep -q 'chunks named  *2000, 0 of them in host memory' "$tmp/rep33"
check $? "... with --launches too: every launch read (2000 chunks named)"
# Spilled from the first launch on (the 64 MiB segment past a 256 MiB limit): none passes unread.
"$run" $opts --report-file "$tmp/rep34" -- "$lc" bench 100 >/dev/null 2>&1
grep -q 'passed unread before memory was seen spilled 0$' "$tmp/rep34" &&
	grep -q 'chunks named  *200, [1-9][0-9]* of them in host memory' "$tmp/rep34"
check $? "the default placement, memory spilled before the first launch: every launch read"
# A fork while another thread's unread launch is in the driver: the child's spill does not wait for it.
"$run" --device-limit 512MiB --headroom 0 -- "$lc" quiet-fork >"$tmp/tap36" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap36" && st=1
check $st "the default placement: a child forked during an unread launch sees a spill without waiting for it ($(grep -c '^ok' "$tmp/tap36") checks)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap36"

# The cycle: proposed at the first launch of the second step, confirmed by
# the launches that follow; when the order changes it goes, and the new
# order takes its place once a step of it repeats: two launches of it whose
# kernel came round are refused first, the launches before them not
# repeating yet.
"$run" $opts --launches --report-file "$tmp/rep4" --trace "$tmp/trace4" -- "$lc" cycle >"$tmp/tap4" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap4" && st=1
check $st "the cycle client runs its 18 launches"
grep -q 'cycle  *learned 2 times (the last 3 launches long), dropped 1 times when the order changed; 11 launches where a known cycle expected them; 2 proposed, 0 of them rejected unconfirmed; 2 refused by verification$' "$tmp/rep4"
check $? "--report: a cycle of 3 launches learned, dropped when the order changed, learned again; 11 launches fell where it expected; 2 proposals refused"
pos=$(sed -n 's/.*"event":"launch".*"cycle_pos":\(-\{0,1\}[0-9]*\).*/\1/p' "$tmp/trace4" | tr '\n' ' ')
[ "$pos" = "-1 -1 -1 0 1 2 0 1 2 0 2 1 -1 -1 0 1 2 0 " ]
check $? "--trace gives each launch's place in the cycle, -1 outside one; after the swap kc and kb at their old places, none while the new order is refused, then the new order from 0 (got: $pos)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap4" "$tmp/rep4"

# A GEMM whose largest segment is shared by every launch (a workspace, a pool
# segment), named at 1, 2, then 3 places in turn (a workspace carved out of a
# pool segment at another offset each launch): the launch is known by its
# layer's weight, and the step's 12 launches are learned.
for m in 1 2 3; do
	rm -f "$tmp/rep17" # the report is appended to
	"$run" $opts --launches --report-file "$tmp/rep17" -- "$lc" cycle-shared $m >"$tmp/tap17" 2>&1
	st=$?
	grep -q '^not ok' "$tmp/tap17" && st=1
	grep -q 'cycle  *learned 1 times (the last 12 launches long), dropped 0 times' "$tmp/rep17" || st=1
	check $st "--launches: GEMMs beside a larger shared segment named at $m places in turn are told apart by their weights; the step's cycle of 12 launches is learned"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap17" "$tmp/rep17"
done
# A chain whose activations rotate among three buffers: the relus' largest
# segments come round inside a step and name other memory from step to
# step; the step's real cycle, 22 launches, is learned all the same and held.
"$run" $opts --launches --report-file "$tmp/rep15" -- "$lc" cycle-rotate >"$tmp/tap15" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap15" && st=1
check $st "the rotating chain runs its 6 steps of 22 launches ($(grep -c '^ok' "$tmp/tap15") checks)"
grep -q 'cycle  *learned 1 times (the last 22 launches long), dropped 0 times' "$tmp/rep15"
check $? "--report: the rotating chain's cycle learned once as its step's 22 launches (got: $(sed -n 's/.*cycle  *\(learned [0-9]* times (the last [0-9]* launches long), dropped [0-9]* times\).*/\1/p' "$tmp/rep15"))"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap15" "$tmp/rep15"
# The same under --placement launch, 120 MiB: about four weights do not fit.
# With its cycle known, weights are brought in ahead of their launch (on the
# launching thread: the mover's timing varies; place-mover below checks it).
VMMX_RUN_PLACE_MOVER=0 "$run" --policy device-first --device-limit 120MiB --headroom 0 --placement launch \
	--report-file "$tmp/rep16" -- "$lc" cycle-rotate >"$tmp/tap16" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap16" && st=1
grep -q 'cycle  *learned 1 times (the last 22 launches long), dropped 0 times' "$tmp/rep16" &&
	grep -q 'brought to the device ([^:]*: ahead [1-9][0-9]*, on demand [0-9]*), [0-9]* sent back ([^:]*: by next use [1-9]' "$tmp/rep16" || st=1
check $st "--placement launch on the rotating chain: its 22-launch cycle known, weights brought in ahead of their launch ($(sed -n 's/.*(\([^:]*: ahead [0-9]*\).*/\1/p' "$tmp/rep16" | head -1))"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap16" "$tmp/rep16"

# An unload empties the layout cache: a new function at the same address is asked for its own.
"$run" $opts --launches --trace "$tmp/trace8" -- "$lc" unload >"$tmp/tap8" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap8" && st=1
named=$(sed -n 's/.*"event":"launch".*"chunks_named":\([0-9]*\).*/\1/p' "$tmp/trace8" | tr '\n' ' ')
[ "$named" = "1 1 2 " ] || st=1
check $st "cuModuleUnload empties the layout cache: chunks named before and after it: $named(1 1 2 expected)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap8"

# --placement launch: spilled chunks brought in before each launch, room made
# by the least recently named, then, the cycle known, by the next use.  These
# check each decision where it is made, so moves ahead run on the launching
# thread (VMMX_RUN_PLACE_MOVER=0); the mover thread is checked after them.
export VMMX_RUN_PLACE_MOVER=0
"$run" $opts --placement launch --report-file "$tmp/rep5" -- "$lc" place >"$tmp/tap5" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap5" && st=1
check $st "--placement launch: $(grep -c '^ok' "$tmp/tap5") checks of residency at each step and of the data after 16 moves"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap5"
grep -q 'placement  *launch: 8 segments brought to the device (512.0 MiB: ahead 3, on demand 5), 8 sent back (512.0 MiB: by next use 6, least recently named 2); left in host memory: no room 0, read in place 0, too large 0, failed moves 0; waits for last uses 0, device syncs 2; time moving in [0-9.]* ms ([0-9]* swaps: a send back with the bring-in it made room for, one call timed here), sending back [0-9.]* ms, waiting [0-9.]* ms; mover: 0 queued, 0 of them cancelled, 0 threads, at most 0 moves under way at once, launches waited for it 0 times, 0.0 ms; copies and memsets held 0; streams joined 0; too large to move, tracked from their allocation 0, named since 0, unnamed two whole cycles since 0, sent back unnamed 0, named by unsure words only 0 times$' "$tmp/rep5"
check $? "--report: 8 segments brought in (3 ahead of their launch, the cycle known), 8 sent back, 2 by least recent use (first step), 6 by next use; no wait (the fake's kernels are done), the first 2 moves after a device sync (nothing named them before)"
grep -q 'host copies  *4 moves to host memory mapped a kept copy (256.0 MiB not copied), 4 of them verified unchanged, 0 found changed (copied); 12 checksums; 256.0 MiB kept now$' "$tmp/rep5"
check $? "--report: of the 8 sends back, the 4 of weights brought in before mapped their verified copy again (8 checksums at the bring-ins, 4 at those sends back); 4 copies kept"
grep -q 'driver time  *reserve [0-9.]* ms ([1-9][0-9]*), .*, map [0-9.]* ms ([1-9][0-9]*), unmap [0-9.]* ms ([1-9][0-9]*), set_access [0-9.]* ms ([1-9][0-9]*), copy [0-9.]* ms ([1-9][0-9]*), .*checksums [0-9.]* ms (12), events [0-9.]* ms ([0-9]*)$' "$tmp/rep5"
check $? "--report: the driver time line names each op called with its time and calls, the 12 checksums among them"
# An activation named every other launch stays; the weights around it move.
"$run" $opts --placement launch --report-file "$tmp/rep9" -- "$lc" place-act >"$tmp/tap9" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap9" && st=1
check $st "--placement launch: a buffer named every other launch is never the victim once the cycle is known ($(grep -c '^ok' "$tmp/tap9") checks)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap9" "$tmp/rep9"
# The same activation named in bursts (twice in a row, then not for two launches): still kept.
"$run" $opts --placement launch -- "$lc" place-burst >"$tmp/tap25" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap25" && st=1
check $st "--placement launch: a buffer named in bursts is never the victim once the cycle is known, though its use expected from its gap of 1 passed between bursts ($(grep -c '^ok' "$tmp/tap25") checks)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap25"
# A step that varies (a workspace at a new address each step, extra launches
# in the first two): the cycle is learned all the same, and room is made by
# next use.  320 MiB: four of the six weights fit beside the activations.
"$run" --policy device-first --device-limit 320MiB --headroom 0 --placement launch --report-file "$tmp/rep10" -- "$lc" place-jitter >"$tmp/tap10" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap10" && st=1
check $st "--placement launch with a varying step: each weight on the device at its launch, at most 7 of 12 brought in over two steps once the cycle is known ($(grep -c '^ok' "$tmp/tap10") checks)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap10"
grep -q 'cycle  *learned 1 times (the last 12 launches long), dropped 0 times' "$tmp/rep10" &&
	grep -q 'brought to the device ([^:]*: ahead [1-9][0-9]*, on demand [0-9]*), [0-9]* sent back ([^:]*: by next use [1-9][0-9]*, least recently named [0-2])' "$tmp/rep10"
st=$?
check $st "--report: the varying step learned as a cycle of 12 launches; segments brought in ahead; victims by next use (least recently named only before it)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/rep10"
# placed N MODE PATTERN TEXT: launchclient MODE under --placement launch; its
# checks and a report matching PATTERN make one check.
placed() {
	rm -f "$tmp/rep$1" # the report is appended to: only this run's
	"$run" $opts --placement launch --report-file "$tmp/rep$1" -- "$lc" "$2" >"$tmp/tap$1" 2>&1
	st=$?
	grep -q '^not ok' "$tmp/tap$1" && st=1
	grep -q "$3" "$tmp/rep$1" || st=1
	check $st "$4 ($(grep -c '^ok' "$tmp/tap$1") checks)"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap$1" "$tmp/rep$1"
}
# Weights read once (their kernels name little else): read in place once the cycle is known.
placed 11 place-once 'read in place [1-9]' \
	"--placement launch: weights read once are read in place when the device is full of segments needed sooner; none brought in after the second step"
# The fake's kernels still running: each move waits for the last use of what moves, not for the device.
placed 12 place-wait 'waits for last uses [1-9][0-9]*, device syncs 2;' \
	"--placement launch with kernels running: every move after the first step waited for its buffer's last-use event, before the move; only the first 2 moves synced the device"
# Copies and memsets between the kernels (PyTorch's): each is its segment's last use, held while passed on.
placed 22 place-copy 'waits for last uses [1-9][0-9]*, device syncs 2;.* copies and memsets held 24; streams joined 0; too large to move, tracked from their allocation 0, named since 0, unnamed two whole cycles since 0, sent back unnamed 0, named by unsure words only 0 times$' \
	"--placement launch with a copy or memset after each kernel: no weight moved before its copy or memset was done; each copy passed on unchanged; 24 held"
# The trial of moving against reading in place, timed on the test's clock
# (the fake times events only with one): a cycle each way after one that
# settles, then the cheaper kept; without timed events, no trial.
placed 40 place-trial 'trial  *1 decided (reading in place chosen 0), 0 cut short by a cycle change, 0 not timed; now moving; the last decided: a cycle of 6 launches, 14.0 ms moving, 204.0 ms reading in place; launches taken for tiled 0$' \
	"--placement launch, the trial: moving (14 a cycle: 6 launches, 4 weights in and 4 back) beats reading in place (204): moving kept after a cycle of each"
placed 41 place-trial-dear 'trial  *1 decided (reading in place chosen 1), 0 cut short by a cycle change, 0 not timed; now reading in place; the last decided: a cycle of 6 launches, 8006.0 ms moving, 8.0 ms reading in place; launches taken for tiled 0$' \
	"--placement launch, the trial: reading in place (8 a cycle) beats moving (8006): nothing moves after the trial, the data intact"
# VMMX_RUN_PLACE_SWAP=1: a bring-in that one send back makes room for is one
# vmmx_swap(); the same placement as the rep5 run above, every move of it a swap.
VMMX_RUN_PLACE_SWAP=1 placed 90 place '8 segments brought to the device (512.0 MiB: ahead 3, on demand 5), 8 sent back (512.0 MiB: by next use 6, least recently named 2);.* time moving in [0-9.]* ms (8 swaps: a send back with the bring-in it made room for, one call timed here), sending back 0.0 ms,' \
	"VMMX_RUN_PLACE_SWAP=1: the same 8 segments brought in and 8 sent back, each pair one vmmx_swap(), residency at each step and the data right"
grep -q 'host copies  *4 moves to host memory mapped a kept copy (256.0 MiB not copied), 4 of them verified unchanged' "$tmp/rep90"
check $? "VMMX_RUN_PLACE_SWAP=1: the 4 sends back of weights brought in before mapped their verified copy again (the swap's remap), as without it"
VMMX_RUN_PLACE_SWAP=2 "$run" $opts --placement launch -- "$lc" place >"$tmp/tap92" 2>&1
grep -q '^vmmx-run: VMMX_RUN_PLACE_SWAP=2: expected 0 (the default: a send back, then the bring-in it makes room for) to 1; using 0$' "$tmp/tap92"
check $? "VMMX_RUN_PLACE_SWAP=2 is refused by name, with the range and the value used"
# A program's first steps pin host memory (each costs 1000 on the clock):
# measured then, moving (over 1000) would lose to reading in place (204).
# Under the spread kept set, such passes are settled past.
VMMX_RUN_PLACE_SPREAD=1 placed 84 place-trial-pin 'trial  *1 decided (reading in place chosen 0), 0 cut short by a cycle change, 0 not timed; now moving; [12] passes more: host memory was made; the last decided: a cycle of 6 launches, 1[0-4].0 ms moving, 204.0 ms reading in place; launches taken for tiled 0$' \
	"--placement launch under VMMX_RUN_PLACE_SPREAD=1, the trial: steps that make host memory (1000 each) are settled past, not measured: moving (10-14) chosen over reading in place (204)"
placed 46 place-trial-hot 'trial  *1 decided (reading in place chosen 1), 0 cut short by a cycle change, 0 not timed; now reading in place; the last decided: a cycle of 8 launches' \
	"--placement launch reading in place: a weight named 3 times a cycle, found in host memory, is brought back in place of one named once, then nothing moves"
placed 53 place-trial-tiled 'trial  *1 decided (reading in place chosen 1), 0 cut short by a cycle change, 0 not timed; now reading in place; the last decided: a cycle of 7 launches.*; launches taken for tiled [1-9][0-9]*$' \
	"--placement launch reading in place: a weight named once a cycle by a tiled launch (48 KiB of shared memory), found in host memory, is brought back in place of one named once by a plain launch, though another is named twice; then nothing moves"
placed 47 place-trial-drop 'trial  *[0-9]* decided (reading in place chosen 0), 1 cut short by a cycle change, 0 not timed; now moving' \
	"--placement launch: the cycle gone while the trial reads in place, the trial is cut short (counted) and moving resumes"
placed 42 place-trial-untimed 'trial  *0 decided (reading in place chosen 0), 0 cut short by a cycle change, 1 not timed; now moving; launches taken for tiled 0$' \
	"--placement launch, no timed event to be had: no trial, moving all along, counted"
VMMX_RUN_PLACE_TRIAL=0 placed 43 place-trial-untimed 'trial  *0 decided (reading in place chosen 0), 0 cut short by a cycle change, 0 not timed; now moving; launches taken for tiled 0$' \
	"VMMX_RUN_PLACE_TRIAL=0: no trial, moving all along, nothing counted"
VMMX_RUN_PLACE_TRIAL=2 placed 44 place-trial-dear 'trial  *1 decided (reading in place chosen 1), 0 cut short by a cycle change, 0 not timed; now reading in place; the last decided: a cycle of 6 launches, 6006.0 ms moving, 8.0 ms reading in place; launches taken for tiled 0$' \
	"VMMX_RUN_PLACE_TRIAL=2: two cycles measured each way (moving: 2 and 4 weights each way, 4006 and 8006), their mean given"
VMMX_RUN_PLACE_TRIAL=many placed 45 place-trial 'trial  *1 decided (reading in place chosen 0)' \
	"VMMX_RUN_PLACE_TRIAL=many: the default, one cycle each way, used"
grep -q '^vmmx-run: VMMX_RUN_PLACE_TRIAL=many: expected the cycles to measure each way, 0 (no trial) to 8; using 1$' "$tmp/tap45"
check $? "VMMX_RUN_PLACE_TRIAL=many: a message names the variable, what it takes, and what is used"
# By default the kept set is spread over a cycle once the trial timed
# moving faster for it, and only then (VMMX_RUN_PLACE_SPREAD unset).
grep -q '^  spread  *2 segments kept (128.0 MiB) of the cycle.s 6 (384.0 MiB), chosen 1 times$' "$tmp/rep40"
check $? "the default, the trial timed moving faster (14 against 204): the kept set spread over that cycle after it, 2 of its 6 weights kept"
! grep -q '^  spread' "$tmp/rep41" "$tmp/rep42" "$tmp/rep43"
check $? "the default: no kept set spread where the trial chose reading in place, nor where moving was kept for want of a trial (no timed events; VMMX_RUN_PLACE_TRIAL=0)"
# Moving timed only a little faster (86 against 90, a move costing 10 and a
# launch reading in place 43): moving kept, but no kept set spread (the
# margin: at most 0.9 of reading in place).
placed 86 place-trial-even 'trial  *1 decided (reading in place chosen 0), 0 cut short by a cycle change, 0 not timed; now moving; the last decided: a cycle of 6 launches, 86.0 ms moving, 90.0 ms reading in place' \
	"the default, the trial timing moving at 86 against 90 reading in place: moving kept"
! grep -q '^  spread' "$tmp/rep86"
check $? "the default: no kept set spread where moving was timed less than clearly faster (86 against 90, over 0.9 of reading in place)"
VMMX_RUN_PLACE_SPREAD=1 placed 87 place-trial-even 'spread  *2 segments kept (128.0 MiB) of the cycle.s 6 (384.0 MiB), chosen 1 times$' \
	"VMMX_RUN_PLACE_SPREAD=1, the same trial: the kept set spread all the same"
VMMX_RUN_PLACE_SPREAD=0 placed 85 place-trial 'trial  *1 decided (reading in place chosen 0), 0 cut short by a cycle change, 0 not timed; now moving; the last decided: a cycle of 6 launches, 14.0 ms moving, 204.0 ms reading in place' \
	"VMMX_RUN_PLACE_SPREAD=0, the trial choosing moving: the same choice"
! grep -q '^  spread' "$tmp/rep85"
check $? "VMMX_RUN_PLACE_SPREAD=0: no kept set spread, though the trial chose moving"
# Segments sent back are granted to the GPU only (VMMX_HOST_CPU_ACCESS=placed,
# vmmx-run's default under --placement launch): a copy between one and
# pageable memory, or host memory at both ends, has the CPU granted first
# (counted in the report); that grant failing (the
# set_access call the first run counted), the copy is refused, not passed on.
placed 29 place-grant 'copies  *1 with host memory at both ends, the CPU granted both first' \
	"--placement launch: a copy between pageable memory and a segment sent back, granted to the GPU only, has the CPU granted its part first, as has one with host memory at both ends; copies of device memory grant nothing"
calls=$(sed -n 's/^# set_access calls before the grant: \([0-9]*\)$/\1/p' "$tmp/tap29")
LC_GRANT_FAULT=1 VMMX_FAULT=set_access:$((${calls:-0} + 1)) \
	"$run" $opts --placement launch -- "$lc" place-grant >"$tmp/tap30" 2>&1
st=$?
{ [ -n "$calls" ] && ! grep -q '^not ok' "$tmp/tap30" && grep -q '^ok .* is refused: cudaErrorInvalidValue' "$tmp/tap30" &&
	grep -q '^vmmx-run: a copy between host memory (pageable, or libvmmx.s) and memory sent back to host memory was refused: granting the CPU that memory failed (vmmx_buf_advise: granting the CPU the host chunk at 0x[0-9a-f]* (67108864 bytes) failed: injected failure)' "$tmp/tap30"; } || st=1
check $st "--placement launch: the grant failing (set_access call $((${calls:-0} + 1))), the copy is refused with cudaErrorInvalidValue and a message, not passed on; the data intact"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap30"
# Each weight used on two streams at once (a kernel, then a copy on a side
# stream), each stream's work done in its own order: a move waits for the
# last use on both; a third stream's use (a memset) makes its stream wait
# for the oldest on the GPU (streams joined), which two never need.
placed 26 place-streams 'waits for last uses [1-9][0-9]*, device syncs 2;.* copies and memsets held 24; streams joined [1-9][0-9]*;' \
	"--placement launch with each weight used on three streams: no weight moved before its last use on every stream was done; the oldest stream joined"
placed 27 place-streams2 'waits for last uses [1-9][0-9]*, device syncs 2;.* copies and memsets held 18; streams joined 0; too large to move, tracked from their allocation 0, named since 0, unnamed two whole cycles since 0, sent back unnamed 0, named by unsure words only 0 times$' \
	"--placement launch with each weight used on two streams: no weight moved before its last use on both was done; no stream joined"
# The kernel on w2 in the second step gets no event (its record fails): its
# use is unknown, and its next move waits for the device, though a copy on
# the other stream records one after it (the model sees the device sync).
export LC_NO_EVENT=2
placed 31 place-streams2 'waits for last uses [1-9][0-9]*, device syncs 3;' \
	"--placement launch, a kernel with no event: its segment's next move waits for the device, though a later use on another stream has one"
unset LC_NO_EVENT
# No event can be recorded (a launch on another context's stream): each move waits for the device.
placed 13 place-noevent 'by next use 6, least recently named 2); .*waits for last uses 0, device syncs [1-9][0-9]*;' \
	"--placement launch without last-use events: the same moves, each after a device sync"
# VMMX_RUN_PLACE_WAIT=device: every move waits for the whole device, none for an event.
export VMMX_RUN_PLACE_WAIT=device
placed 14 place 'by next use 6, least recently named 2); .*waits for last uses 0, device syncs [1-9][0-9]*;' \
	"--placement launch with VMMX_RUN_PLACE_WAIT=device: the same moves, each after a device sync"
unset VMMX_RUN_PLACE_WAIT
# Segments that launches passed unread used, on another stream, wait for the
# whole device at their first move (w0's send back, w4's bring-in).
placed 35 place-late-spill 'device syncs 2;' \
	"a segment launches passed unread used waits for the device at its first move (device syncs 2)"
grep -q 'passed unread before memory was seen spilled 64$' "$tmp/rep35"
check $? "... the 64 launches before the spill was seen passed unread"
# Traced, it places alike: the launches before the spill pass unread (not
# recorded), and the trace names each move's thread and each wait.
rm -f "$tmp/trace35"
"$run" $opts --placement launch --report-file "$tmp/rep35t" --trace "$tmp/trace35" -- \
	"$lc" place-late-spill >"$tmp/tap35t" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap35t" && st=1
grep -q 'passed unread before memory was seen spilled 64$' "$tmp/rep35t" || st=1
grep -q 'device syncs 2;' "$tmp/rep35t" || st=1
n35=$(sed -n 's/^  launches  *\([0-9]*\) watched.*/\1/p' "$tmp/rep35t")
[ "$(grep -c '"event":"launch"' "$tmp/trace35")" = "$((n35 - 64))" ] || st=1
[ "$(grep -c '"event":"wait","for":"device","base":"0x[0-9a-f]*","ns":[0-9]*,"by":"launch"' "$tmp/trace35")" = 2 ] || st=1
[ "$(grep -c '"event":"move",.*"ok":true,"by":"launch"}' "$tmp/trace35")" = \
	"$(grep -c '"event":"move"' "$tmp/trace35")" ] || st=1
grep -q '"event":"move"' "$tmp/trace35" || st=1
check $st "--trace alone places as untraced: 64 launches unread and not recorded ($n35 watched), 2 device syncs, each a wait record; every move on the launching thread"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap35t" "$tmp/rep35t"
# The same with 16 MiB chunks: a launch names a buffer's first chunk, and the whole buffer moves.
VMMX_CHUNK_MAX=16MiB "$run" $opts --placement launch -- "$lc" place >"$tmp/tap7" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap7" && st=1
check $st "--placement launch with 16 MiB chunks: each 64 MiB buffer (4 chunks) moves whole ($(grep -c '^ok' "$tmp/tap7") checks)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap7"
# Victims that cannot make the room a segment needs: none is sent back.
placed 20 place-plan '0 sent back (0 B: .*no room 1, read in place 0, too large 0, failed moves 0;' \
	"--placement launch: a segment that the victims allowed cannot make room for is read in place, and none of them is sent back"
# A model as transformers loads it under a 512 MiB limit: half its weights
# carved out of one 352 MiB warm-up segment, the rest with segments of
# their own.  The warm-up segment is too large to send back; the others
# stream through the room left (prefill) or are read in place (decode).
opts="--policy device-first --device-limit 512MiB --headroom 0"
placed 16 place-model 'too large 0, failed moves 0;' \
	"--placement launch on a model with transformers' warm-up segment: it is never sent back; the weights past it are on the device at their launch, at most 12 of 18 brought in a step"
placed 17 place-decode 'read in place [1-9][0-9]*, too large 0, failed moves 0;' \
	"--placement launch on the same model, decode: the warm-up segment stays, weights read once are read in place, none brought in after the second step"
grep -q 'cycle  *learned [1-9][0-9]* times (the last 80 launches long)' "$tmp/rep17"
check $? "--report: the decode step learned whole, 80 launches, though 22 of its GEMVs name one segment (each known by the address it names there, not by the segment)"
placed 18 place-model-late 'no room 0, read in place 0, too large [1-9][0-9]*, failed moves 0;' \
	"--placement launch, the warm-up segment made last (in host memory): it stays where it lies, its launches counted too large until the cycle settles, nothing sent back for it"
grep -q '^  settled  *[1-9][0-9]* launches' "$tmp/rep18" && ! grep -q 'too large 132,' "$tmp/rep18"
check $? "... a segment too large to make room for, in host memory, does not keep the cycle from settling: the launches after pass on settled, not counted too large"

# VMMX_RUN_PLACE_PIECES=1: the warm-up segment, in chunks of 64 MiB, moves a chunk at a time.
export VMMX_RUN_PLACE_PIECES=1
placed 60 place-model 'too large 0, failed moves 0;' \
	"VMMX_RUN_PLACE_PIECES=1, the warm-up segment in pieces: pieces of it sent back to make room; the weights past it on the device at their launch, at most 12 of 18 brought in a step"
placed 61 place-decode 'read in place [1-9][0-9]*, too large 0, failed moves 0;' \
	"VMMX_RUN_PLACE_PIECES=1, the warm-up segment in pieces, decode: weights read once are read in place, none brought in after the second step"
placed 62 place-model-late 'too large 0, failed moves 0;' \
	"VMMX_RUN_PLACE_PIECES=1, the warm-up segment in pieces made last (in host memory): brought in piece by piece as launches name it"
opts="--policy device-first --device-limit 256MiB --headroom 0"
placed 63 place-pieces 'failed moves 0;' \
	"VMMX_RUN_PLACE_PIECES=1, a buffer in pieces: a kernel named inside it is taken to read on to its end, so the pieces above the one a launch names are no victims for it, those below are"
unset VMMX_RUN_PLACE_PIECES
VMMX_RUN_PLACE_PIECES=2 "$run" $opts --placement launch -- "$lc" place-plan >"$tmp/tap65" 2>&1
grep -q '^vmmx-run: VMMX_RUN_PLACE_PIECES=2: expected 0 (large segments move whole) to 1; using 0$' "$tmp/tap65"
check $? "VMMX_RUN_PLACE_PIECES=2 is refused by name, with the range and the value used"
unset VMMX_RUN_PLACE_MOVER
# The mover thread: moves ahead queued and run beside the launches; every
# launch still finds its buffer on the device, and the data survives.
placed 15 place-mover 'ahead [1-9][0-9]*, .*failed moves 0;.* mover: [1-9][0-9]* queued' \
	"--placement launch with the mover thread: moves ahead queued and made while the launches go on; each launch finds its buffer on the device at the driver, data intact"
# Several movers (the default two, and four): moves ahead under way at once,
# each launch still finds its buffer on the device, the data intact.
placed 49 place-mover 'failed moves 0;.* mover: [1-9][0-9]* queued, [0-9]* of them cancelled, 2 threads, at most 2 moves under way at once,' \
	"--placement launch with two movers (the default): two moves ahead under way at once; each launch finds its buffer on the device, data intact"
VMMX_RUN_PLACE_SWAP=1 placed 91 place-mover 'failed moves 0;.* ([1-9][0-9]* swaps: .* mover: [1-9][0-9]* queued, [0-9]* of them cancelled, 2 threads,' \
	"VMMX_RUN_PLACE_SWAP=1 with two movers: swaps made on both while the launches go on; each launch finds its buffer on the device, data intact"
VMMX_RUN_PLACE_MOVER=4 placed 50 place-mover 'failed moves 0;.* mover: [1-9][0-9]* queued, [0-9]* of them cancelled, 4 threads, at most [2-4] moves under way at once,' \
	"VMMX_RUN_PLACE_MOVER=4: four movers, moves ahead under way at once; each launch finds its buffer on the device, data intact"
VMMX_RUN_PLACE_MOVER=1 placed 51 place-mover 'failed moves 0;.* mover: [1-9][0-9]* queued, [0-9]* of them cancelled, 1 threads, at most 1 moves under way at once,' \
	"VMMX_RUN_PLACE_MOVER=1: one mover, one move at a time, as before; data intact"
VMMX_RUN_PLACE_MOVER=9 placed 52 place-mover 'mover: [1-9][0-9]* queued, [0-9]* of them cancelled, 2 threads,' \
	"VMMX_RUN_PLACE_MOVER=9: two movers used"
grep -q '^vmmx-run: VMMX_RUN_PLACE_MOVER=9: expected the mover threads, 0 (moves on the launching thread) to 4; using 2$' "$tmp/tap52"
check $? "VMMX_RUN_PLACE_MOVER=9 is refused by name, with the range and the number used"
# VMMX_RUN_PLACE_WAIT=device is for kernels that reach memory the watch cannot
# see: no mover (it moves with the lock let go, so such a kernel launched
# meanwhile would find its memory unmapped); moves ahead on the launching thread.
VMMX_RUN_PLACE_WAIT=device placed 98 place-mover 'ahead [1-9][0-9]*, .*failed moves 0;.* device syncs [1-9][0-9]*;.* mover: 0 queued, 0 of them cancelled, 0 threads, at most 0 moves under way at once,' \
	"VMMX_RUN_PLACE_WAIT=device: no mover thread; moves ahead made on the launching thread, each after a device sync; data intact"
VMMX_RUN_PLACE_WAIT=device VMMX_RUN_PLACE_MOVER=9 placed 99 place-mover 'mover: 0 queued, 0 of them cancelled, 0 threads,' \
	"VMMX_RUN_PLACE_WAIT=device with VMMX_RUN_PLACE_MOVER=9: still no mover"
! grep -q 'VMMX_RUN_PLACE_MOVER=9: expected' "$tmp/tap99" &&
	grep -q '^vmmx-run: VMMX_RUN_PLACE_MOVER=9: no movers under VMMX_RUN_PLACE_WAIT=device (a kernel the watch cannot see whole could run while one moves its memory); moves are made on the launching thread$' "$tmp/tap99"
check $? "VMMX_RUN_PLACE_WAIT=device: movers asked for are refused, saying why"
placed 48 place-trial-dear 'trial  *1 decided (reading in place chosen 1), 0 cut short by a cycle change, 0 not timed; now reading in place;' \
	"--placement launch with the mover, the trial: the moves queued when reading in place starts are dropped; reading in place chosen, nothing moves after it"
placed 23 place-copy 'failed moves 0;.* mover: [1-9][0-9]* queued.* copies and memsets held 24; streams joined 0; too large to move, tracked from their allocation 0, named since 0, unnamed two whole cycles since 0, sent back unnamed 0, named by unsure words only 0 times$' \
	"--placement launch with the mover and a copy or memset after each kernel: no weight moved before its copy or memset was done"
placed 28 place-streams 'failed moves 0;.* mover: [1-9][0-9]* queued.* copies and memsets held 24; streams joined [1-9][0-9]*;' \
	"--placement launch with the mover and each weight used on three streams: no weight moved before its last use on every stream was done"
opts="--policy device-first --device-limit 512MiB --headroom 0"
placed 19 place-model 'too large 0, failed moves 0;.* mover: [1-9][0-9]* queued' \
	"--placement launch with the mover on the model with a warm-up segment: it is never sent back; the weights past it on the device at their launch"
placed 21 place-decode 'read in place [1-9][0-9]*, .* mover: [0-9] queued' \
	"--placement launch with the mover, decode: weights read once queue no moves ahead while the device has no free room (242 queued, each refused by the mover, before)"
VMMX_RUN_PLACE_PIECES=1 placed 64 place-model 'too large 0, failed moves 0;.* mover: [1-9][0-9]* queued' \
	"VMMX_RUN_PLACE_PIECES=1 with the mover, the warm-up segment in pieces: pieces of it make room, the weights past it on the device at their launch, data intact"
grep -q 'parking  *0 sends back parked, 0 parked segments mapped in place (0.0 ms)$' "$tmp/rep19"
check $? "without VMMX_RUN_PLACE_PARK nothing is parked (the report says so)"
# VMMX_RUN_PLACE_PARK=1: segments sent back are parked (vmmx_park), their
# addresses unmapped.  Under it launchclient checks, in the fake driver,
# that every launch, copy and memset finds the memory it names mapped, as
# a GPU must, and says so in its last assertion.
export VMMX_RUN_PLACE_PARK=1
placed 67 place-model 'parking  *[1-9][0-9]* sends back parked' \
	"VMMX_RUN_PLACE_PARK=1, the model with the movers: weights sent back parked, each on the device or mapped at its launch, data intact"
VMMX_RUN_PLACE_MOVER=0 placed 68 place-model 'parking  *[1-9][0-9]* sends back parked' \
	"VMMX_RUN_PLACE_PARK=1, the model with the moves inline: the same, Belady's count kept"
placed 69 place-decode 'read in place [1-9][0-9]*, ' \
	"VMMX_RUN_PLACE_PARK=1, decode: weights read once read in place, mapped there"
opts="--policy device-first --device-limit 256MiB --headroom 0"
placed 66 place-park 'parking  *[1-9][0-9]* sends back parked, [1-9][0-9]* parked segments mapped in place (.*); stopped: a launch the watch could not read whole$' \
	"VMMX_RUN_PLACE_PARK=1: weights sent back parked; a copy, a memset, and a launch the watch cannot read find what they use mapped in place; nothing parks after that launch"
placed 74 place-park-nccl 'parking  *[1-9][0-9]* sends back parked, [1-9][0-9]* parked segments mapped in place (.*); stopped: a launch the watch could not read whole$' \
	"VMMX_RUN_PLACE_PARK=1: a launch of an NCCL kernel (buffers reached through device memory) finds every weight mapped; nothing parks after it"
placed 70 place-mover 'parking  *[1-9][0-9]* sends back parked' \
	"VMMX_RUN_PLACE_PARK=1 with two movers: each launch finds its buffer on the device, data intact"
placed 71 place-copy 'failed moves 0;.* copies and memsets held 24; streams joined 0; too large to move, tracked from their allocation 0, named since 0, unnamed two whole cycles since 0, sent back unnamed 0, named by unsure words only 0 times$' \
	"VMMX_RUN_PLACE_PARK=1 with a copy or memset after each kernel: each finds its memory mapped"
placed 72 place-trial-dear 'parking  *[1-9][0-9]* sends back parked, [1-9][0-9]* parked segments mapped in place' \
	"VMMX_RUN_PLACE_PARK=1, the trial choosing reading in place: the parked weights mapped in place for their launches"
# Tables of addresses built on the CPU and copied to the device (a kernel
# reads through them, unseen by the watch): what they point into never
# moves nor parks again.
placed 92 place-pointers 'parking  *[1-9][0-9]* sends back parked, [0-9]* parked segments mapped in place (.*); 2 never moved (data copied to the device points into them)$' \
	"VMMX_RUN_PLACE_PARK=1: a weight parked when a table pointing inside it is copied to the device is mapped in place first; neither weight two tables point to (one copied from an unaligned host address) moves after, the others still do"
VMMX_CHUNK_MAX=2MiB placed 93 place-pointers-many 'parking  *[1-9][0-9]* sends back parked, [0-9]* parked segments mapped in place (.*); 2 never moved (data copied to the device points into them)$' \
	"VMMX_RUN_PLACE_PARK=1: a table pointing into 260 chunks of one buffer, more than a copy keeps at once: marked in turns, that buffer and the weight never move, the others still do"
VMMX_CHUNK_MAX=2MiB VMMX_RUN_PLACE_PIECES=1 placed 96 place-pointers-many 'parking  *[1-9][0-9]* sends back parked, .*; every move stopped: data copied to the device points into a segment moved in pieces or past those tracked$' \
	"VMMX_RUN_PLACE_PARK=1 VMMX_RUN_PLACE_PIECES=1: a table pointing into a buffer moved in pieces stops every move and park (a kernel may read the pieces above), every parked weight mapped in place first"
placed 97 place-pointers-unified 'parking  *[1-9][0-9]* sends back parked, [0-9]* parked segments mapped in place (.*); 2 never moved (data copied to the device points into them)$' \
	"VMMX_RUN_PLACE_PARK=1: tables copied with the calls of unified addressing (cudaMemcpyDefault, cuMemcpyAsync) from host memory are read as the HtoD ones: neither weight they point to moves after; one copied between two host buffers marks nothing"
VMMX_RUN_PLACE_PARK=0 placed 94 place-pointers 'parking  *0 sends back parked, 0 parked segments mapped in place (0.0 ms); 2 never moved (data copied to the device points into them)$' \
	"--placement launch: neither weight two tables copied to the device point into moves after (a move unmaps it for a moment), the others still do"
VMMX_RUN_PLACE_PARK=0 VMMX_CHUNK_MAX=2MiB placed 95 place-pointers-many 'parking  *0 sends back parked, 0 parked segments mapped in place (0.0 ms); 2 never moved (data copied to the device points into them)$' \
	"--placement launch: a table pointing into 260 chunks of one buffer: that buffer and the weight never move, the others still do"
unset VMMX_RUN_PLACE_PARK
VMMX_RUN_PLACE_PARK=2 "$run" $opts --placement launch -- "$lc" place-plan >"$tmp/tap73" 2>&1
grep -q '^vmmx-run: VMMX_RUN_PLACE_PARK=2: expected 0 (segments sent back stay mapped in host memory) to 1; using 0$' "$tmp/tap73"
check $? "VMMX_RUN_PLACE_PARK=2 is refused by name, with the range and the value used"
# The kept set spread over the cycle (moves on the launching thread: where
# each buffer ends up does not depend on timing).
VMMX_RUN_PLACE_SPREAD=1 VMMX_RUN_PLACE_MOVER=0 placed 75 place-spread 'spread  *13 segments kept (208.0 MiB) of the cycle.s 40 (640.0 MiB), chosen 1 times$' \
	"VMMX_RUN_PLACE_SPREAD=1: 13 of 40 buffers kept, spread over the cycle (each third keeps 4 or more on the device, where allocation's first 16 leave the last third 1); each launch finds its buffer on the device, data intact"
# A place of the cycle no pass reaches after the one it was learned from
# (a first pass's extra launch, as a Hugging Face forward has): chosen all
# the same, the place counted.
VMMX_RUN_PLACE_SPREAD=1 VMMX_RUN_PLACE_MOVER=0 placed 78 place-spread-skip 'spread  *13 segments kept (208.0 MiB) of the cycle.s 40 (640.0 MiB), chosen 1 times; 1 of its places passed over$' \
	"VMMX_RUN_PLACE_SPREAD=1, a place of the 41-launch cycle passed over in every pass after the first: 13 of 40 buffers kept all the same, spread over the cycle; each launch finds its buffer on the device, data intact"
# A training step's churn, as PyTorch's cudaMallocAsync backend makes it:
# activations and gradients allocated and freed (cudaFreeAsync) among the
# launches while the movers move.  The allocator lets idle segments go; a
# mover once worked on one destroyed under it (libvmmx's retired tables
# corrupted: a crash about one run in twelve, parked).
placed 82 place-churn 'placement  *launch: [1-9][0-9]* segments brought' \
	"--placement launch, activations and gradients allocated and freed stream-ordered among the launches, two movers: every call succeeds, the weights keep their bytes"
VMMX_RUN_PLACE_PARK=1 VMMX_RUN_PLACE_SPREAD=1 placed 83 place-churn 'parking  *[1-9][0-9]* sends back parked' \
	"the same parked and spread: every launch finds its memory mapped, the weights keep their bytes"
# Weights 41 launches apart, past the 32 looked at without the kept set:
# under it the look reaches 128 launches, and each weight in host memory is
# brought in as the one before it is launched; VMMX_RUN_PLACE_AHEAD=32 brings
# each in 32 launches ahead only (after 9 of the 40 launches between).
VMMX_RUN_PLACE_SPREAD=1 VMMX_RUN_PLACE_MOVER=0 placed 79 place-far 'spread  *14 segments kept (224.0 MiB) of the cycle.s 41 (656.0 MiB)' \
	"VMMX_RUN_PLACE_SPREAD=1, weights 41 launches apart: each in host memory brought in as the one before it is launched (a look of 128 launches); each launch finds its buffer on the device, data intact"
VMMX_RUN_PLACE_AHEAD=32 VMMX_RUN_PLACE_SPREAD=1 VMMX_RUN_PLACE_MOVER=0 "$run" $opts --placement launch -- "$lc" place-far 0 >"$tmp/tap80" 2>&1
grep -q '^# step [3-5]: w[0-9]* brought in after 9 launches of x$' "$tmp/tap80" &&
	! grep -q 'brought in after \([0-8]\|1[0-9]\|[2-9][0-9]\) launches' "$tmp/tap80"
check $? "VMMX_RUN_PLACE_AHEAD=32: the same weights each brought in 32 launches ahead of its own, 9 launches after the one before it"
# A segment too large to move that nothing names (PyTorch's unsplit cached
# warm-up block): sent back, mapped, a cycle after its allocation, so the
# weights all fit; named once, it stays, never a victim.
placed 100 place-idle 'tracked from their allocation 1, named since 0, unnamed two whole cycles since 0, sent back unnamed 1, named by unsure words only 0 times$' \
	"--placement launch: a 128 MiB segment no launch names is sent back a cycle after its allocation; the 12 weights then stay on the device at once, its data and theirs intact"
grep -q '^  settled  *[1-9][0-9]* launches passed on as before a spill' "$tmp/rep100"
check $? "... once a whole pass moved nothing, launches pass on as before a spill (settled); 5 weights more then move again, each on the device at its launch, data intact (the checks above)"
VMMX_RUN_PLACE_PARK=1 placed 101 place-idle 'tracked from their allocation 1, named since 0, unnamed two whole cycles since 0, sent back unnamed 1, named by unsure words only 0 times$' \
	"VMMX_RUN_PLACE_PARK=1: the same segment is sent back mapped, not parked (the GPU still reaches it)"
placed 102 place-idle-named 'tracked from their allocation 1, named since 1, unnamed two whole cycles since 1, sent back unnamed 1, named by unsure words only [1-9][0-9]* times$' \
	"--placement launch: the same segment named once by a pointer before the steps, then in every step by an odd address only (a word that may be no pointer), is idle again two whole cycles later and sent back, mapped; the weights then all fit"
placed 105 place-idle-used 'tracked from their allocation 1, named since 1, unnamed two whole cycles since 0, sent back unnamed 0, named by unsure words only 0 times$' \
	"--placement launch: the same segment named by a launch in every step stays on the device (too large to be a victim); the weights take turns beside it"
grep -q '^  settled  *0 launches passed on as before a spill' "$tmp/rep105"
check $? "... the weights moving every step, no launch passes as settled"
VMMX_RUN_PLACE_AHEAD=2000 "$run" $opts --placement launch -- "$lc" place-plan >"$tmp/tap81" 2>&1
grep -q '^vmmx-run: VMMX_RUN_PLACE_AHEAD=2000: expected 0 (the default: 32 launches, 128 while the kept set is spread) to 1024; using 0$' "$tmp/tap81"
check $? "VMMX_RUN_PLACE_AHEAD=2000 is refused by name, with the range and the value used"
VMMX_RUN_PLACE_SPREAD=1 VMMX_RUN_PLACE_PARK=1 placed 76 place-mover 'spread  *[0-9]* segments kept.* chosen [1-9][0-9]* times$' \
	"VMMX_RUN_PLACE_SPREAD=1 with two movers and parking: each launch finds its buffer on the device, data intact"
VMMX_RUN_PLACE_SPREAD=2 "$run" $opts --placement launch -- "$lc" place-plan >"$tmp/tap77" 2>&1
grep -q '^vmmx-run: VMMX_RUN_PLACE_SPREAD=2: expected 0 (the segments that stay are those Belady keeps) or 1 (spread over every moving cycle); using the default (spread over the cycles the trial timed moving clearly faster for)$' "$tmp/tap77"
check $? "VMMX_RUN_PLACE_SPREAD=2 is refused by name, with the values taken and the default used"
"$run" --placement bogus -- true 2>"$tmp/err"
st=$?
[ $st -eq 2 ] && grep -q -- "--placement 'bogus'" "$tmp/err"
check $? "vmmx-run --placement bogus is refused by name with exit 2"

# tortured MODE LIMIT FAULTS...: launchclient MODE under --placement launch
# and a LIMIT device limit once per VMMX_FAULT in FAULTS; sets runs, lost
# (runs that lost data or failed a launch) and landed (runs whose report
# counts a failed move).
tortured() {
	mode=$1 limit=$2
	shift 2
	lost=0 landed=0 runs=0
	for f in "$@"; do
		VMMX_FAULT=$f "$run" --policy device-first --device-limit "$limit" --headroom 0 \
			--placement launch --report-file "$tmp/rep6" -- "$lc" "$mode" >"$tmp/out6" 2>&1
		st=$?
		runs=$((runs + 1))
		grep -q 'DATA LOST' "$tmp/out6" && { lost=$((lost + 1)); echo "# $f: $(cat "$tmp/out6")"; }
		[ $st -eq 0 ] || { lost=$((lost + 1)); echo "# $f: exit $st: $(cat "$tmp/out6")"; }
		grep -q 'failed moves [1-9]' "$tmp/rep6" && landed=$((landed + 1))
		rm -f "$tmp/rep6"
	done
}
# The torture: one driver call failed in turn through the steps' moves
# (copies, maps, handles, access, unmaps, syncs); the data survives every one.
# The mover thread runs the moves ahead, so where a fault lands varies.
tortured torture 256MiB copy:385 copy:388 copy:391 copy:394 create:7 create:9 create:12 map:7 \
	map:9 map:12 set_access:8 set_access:11 unmap:1 unmap:3 unmap:6 sync:2 sync:5
check $lost "the torture: $runs runs, each with one driver call failed; no data lost, every launch passed on"
[ $landed -gt 0 ]
check $? "the torture: the failure fell in a move in $landed of the runs"
# The same on the model scenario (a warm-up segment, weights streaming
# through the rest, verified host copies), one call failed or two: a
# checksum that fails makes the send back copy instead, an unmap that fails
# is tried again; neither fails the move.
tortured torture-model 512MiB copy:100 copy:120 map:60 map:70 set_access:60 set_access:70 \
	checksum:10 checksum:30 unmap:10 unmap:40 copy:120,map:70 map:60,set_access:70 \
	checksum:12,copy:100
check $lost "the model's torture: $runs runs, one or two driver calls failed in each; no data lost, every launch passed on"
[ $landed -ge 4 ]
check $? "the model's torture: the failures fell in a move in $landed of the runs (4 or more: the mover's timing moves them)"
# Its warm-up segment in pieces (VMMX_RUN_PLACE_PIECES=1): the pieces' moves under the same failures.
export VMMX_RUN_PLACE_PIECES=1
tortured torture-model 512MiB copy:100 copy:120 map:60 set_access:70 checksum:10 unmap:40 \
	copy:120,map:70 checksum:12,copy:100
unset VMMX_RUN_PLACE_PIECES
check $lost "the model's torture in pieces: $runs runs, one or two driver calls failed in each; no data lost, every launch passed on"
[ $landed -ge 2 ]
check $? "the model's torture in pieces: the failures fell in a move in $landed of the runs (2 or more)"
# Parked (VMMX_RUN_PLACE_PARK=1): the same failures, and reservations
# (each parked segment's host copy gets an address of its own).
export VMMX_RUN_PLACE_PARK=1
tortured torture 256MiB copy:385 copy:391 create:9 map:7 map:12 set_access:8 set_access:11 \
	unmap:1 unmap:6 sync:2 reserve:20 reserve:30
check $lost "VMMX_RUN_PLACE_PARK=1, the torture: $runs runs, each with one driver call failed; no data lost, no launch met parked memory"
tortured torture-model 512MiB copy:100 copy:120 map:60 map:70 set_access:60 set_access:70 \
	checksum:10 checksum:30 unmap:10 unmap:40 reserve:30 reserve:60 copy:120,map:70 \
	map:60,set_access:70 unmap:40,reserve:60
check $lost "VMMX_RUN_PLACE_PARK=1, the model's torture: $runs runs, one or two driver calls failed in each; no data lost, no launch met parked memory"
[ $landed -ge 4 ]
check $? "VMMX_RUN_PLACE_PARK=1, the model's torture: the failures fell in a move in $landed of the runs (4 or more)"
unset VMMX_RUN_PLACE_PARK
# The kept set spread (VMMX_RUN_PLACE_SPREAD=1: 6 of the model's 20 segments
# kept, the rest streamed): the same failures in its moves.
export VMMX_RUN_PLACE_SPREAD=1
tortured torture-model 512MiB copy:100 copy:120 map:60 map:70 set_access:60 set_access:70 \
	checksum:10 unmap:40 copy:120,map:70 map:60,set_access:70
check $lost "VMMX_RUN_PLACE_SPREAD=1, the model's torture: $runs runs, one or two driver calls failed in each; no data lost, no launch failed"
[ $landed -ge 4 ]
check $? "VMMX_RUN_PLACE_SPREAD=1, the model's torture: the failures fell in a move in $landed of the runs (4 or more)"
unset VMMX_RUN_PLACE_SPREAD

# Words that read as two 32-bit integers ({ 3, 4 } is the address 0x400000003,
# inside whatever allocation spans 16 GiB): the buffer they fall in is held
# as the launch's but not brought in; a pointer 128 KiB past the same 4 GiB
# boundary brings it in.  Parked, it is mapped in place for such a launch.
for park in 0 1; do
	VMMX_RUN_PLACE_PARK=$park "$run" $opts --placement launch --report-file "$tmp/rep103" --trace "$tmp/trace103" -- "$lc" place-pair >"$tmp/tap103" 2>&1
	st=$?
	grep -q '^not ok' "$tmp/tap103" && st=1
	if grep -q '^1\.\.0 # SKIP' "$tmp/tap103"; then
		skip "$(sed -n 's/^1\.\.0 # SKIP //p' "$tmp/tap103")"
		skip "the same, PARK=$park: the trace and report"
		continue
	fi
	check $st "VMMX_RUN_PLACE_PARK=$park, a word reading as { 3, B >> 32 } inside a spilled buffer across the 4 GiB boundary B: held, never brought in; { 128 KiB, B >> 32 } brings it in ($(grep -c '^ok' "$tmp/tap103") checks)"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap103"
	grep '"kernel":"kpair"' "$tmp/trace103" | head -1 | grep -q '"loc":"host","at":"0x[0-9a-f]*00000003","param":0,"off":0,"pair":1}' &&
		grep '"kernel":"kpair"' "$tmp/trace103" | sed -n 2p | grep -q '"at":"0x[0-9a-f]*00020000","param":0,"off":0,"unsure":1}' &&
		grep -q 'int pairs  *3 of the chunks named only by words that read as two 32-bit integers: held, not placed$' "$tmp/rep103"
	check $? "... the trace marks the pair (\"pair\":1), and the pointer { 128 KiB, B >> 32 } as one that may be no pointer (\"unsure\":1: its low half under 1 MiB), which names it all the same (not idle); --report counts 3 pair namings (two launches' and a graph launch's)"
	rm -f "$tmp/rep103" "$tmp/trace103"
done

# The segment too large to move that no launch names (place-idle, above),
# named every other launch by such a pair only (pair), or in every step by
# words that may be no pointer only (unsure): still sent back, mapped.
for mode in pair unsure; do
for park in 0 1; do
	VMMX_RUN_PLACE_PARK=$park "$run" $opts --placement launch --report-file "$tmp/rep104" -- "$lc" place-idle-$mode >"$tmp/tap104" 2>&1
	st=$?
	grep -q '^not ok' "$tmp/tap104" && st=1
	if grep -q '^1\.\.0 # SKIP' "$tmp/tap104"; then
		skip "$(sed -n 's/^1\.\.0 # SKIP //p' "$tmp/tap104")"
		continue
	fi
	idle='tracked from their allocation 1, named since 0, unnamed two whole cycles since 0, sent back unnamed 1'
	if [ $mode = pair ]; then
		grep -q 'int pairs  *48 of the chunks' "$tmp/rep104" &&
			grep -q "$idle, named by unsure words only 0 times\$" "$tmp/rep104" || st=1
		what="that only words reading as two integers name (48 launches)"
	else
		grep -q "$idle, named by unsure words only [1-9][0-9]* times\$" "$tmp/rep104" || st=1
		what="named in every step only by words that may be no pointer (B + 96 KiB past a 4 GiB boundary B, an odd address)"
	fi
	check $st "VMMX_RUN_PLACE_PARK=$park: a segment too large to move $what is sent back a cycle after its allocation, mapped, as one never named; the weights then all fit ($(grep -c '^ok' "$tmp/tap104") checks)"
	[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap104" "$tmp/rep104"
	rm -f "$tmp/rep104"
done
done

# Many threads launching kernels new to the layout cache at once: every launch counted once.
"$run" $opts --launches --report-file "$tmp/rep3" -- "$lc" threads >"$tmp/tap3" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap3" && st=1
grep -q 'launches  *8000 watched: cuLaunchKernel 8000,' "$tmp/rep3" &&
	grep -q 'chunks named  *16000, 8000 of them in host memory; 8000 launches read spilled memory$' "$tmp/rep3" || st=1
check $st "4 threads launching 32 new kernels at once: 8000 launches, each counted once with its 2 chunks"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap3" "$tmp/rep3"

# The lookup paths, watched and not.
"$run" $opts --launches -- "$lc" lookups >"$tmp/tap1" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap1" && st=1
check $st "watched: cuGetProcAddress and dlsym hand back the interposer's launch entry points ($(grep -c '^ok' "$tmp/tap1") checks)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap1"
"$run" $opts -- "$lc" lookups >"$tmp/tap2" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap2" && st=1
check $st "not watched: they hand back the driver's own, so launches found that way never pass through the interposer ($(grep -c '^ok' "$tmp/tap2") checks)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap2"
"$run" $opts --placement launch -- "$lc" lookups >"$tmp/tap24" 2>&1
st=$?
grep -q '^not ok' "$tmp/tap24" && st=1
check $st "--placement launch: they hand back the interposer's launch and copy entry points, so copies found that way are seen ($(grep -c '^ok' "$tmp/tap24") checks)"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/tap24"
echo "1..$n"
