#!/bin/sh
# SPDX-License-Identifier: MIT
# Sleep and wake from outside: sleepclient.c, run under vmmx-run --control
# on the sim backend (2 devices of 1 GiB), allocates, writes its patterns
# and idles reading commands from a FIFO; vmmx-run --ctl puts its memory to
# sleep (offload, discard), reads the status, wakes it, and the client
# reads its patterns back.  Then: an allocation waits through the sleep;
# bad requests, an unknown PID, a process without a socket and a dead
# socket get their errors; failed sleeps (an injected fault, host memory
# short on the second device) leave nothing asleep; the socket goes at
# exit, a stale one is replaced.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-ctl.XXXXXX") || exit 1
pids=
cleanup() {
	for p in $pids; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$tmp"
}
trap cleanup EXIT
. "$top_srcdir/tests/preload/env.sh"
sc="$top_builddir/tests/preload/sleepclient"
mkdir -m 700 "$tmp/xdg"
XDG_RUNTIME_DIR="$tmp/xdg"
VMMX_SIM_DEVICES=2 VMMX_SIM_DEVICE_MEM=1GiB VMMX_HOST_LIMIT=1GiB
export XDG_RUNTIME_DIR VMMX_SIM_DEVICES VMMX_SIM_DEVICE_MEM VMMX_HOST_LIMIT
MiB=1048576

echo "1..52"

. "$top_srcdir/tests/preload/wait_for.sh"

# start NAME [vmmx-run options]: the client in the background, its commands
# on file descriptor 3 (a FIFO), its output in $tmp/NAME.out and .err; $pid
# (vmmx-run execs the client: the same process).
start() {
	name=$1
	shift
	rm -f "$tmp/$name.in" "$tmp/$name.out"
	mkfifo "$tmp/$name.in"
	# Appending: the test empties the output between commands.
	"$run" --headroom 0 "$@" -- "$sc" <"$tmp/$name.in" >>"$tmp/$name.out" 2>"$tmp/$name.err" &
	pid=$!
	pids="$pids $pid"
	exec 3>"$tmp/$name.in"
	out="$tmp/$name.out"
	wait_for "$out" '^ready\|^setup failed'
}

# stop: quit the client and wait for it; $st its exit status.
stop() {
	echo quit >&3
	exec 3>&-
	wait "$pid"
	st=$?
}

# ctl ARGS...: vmmx-run --ctl; $rc, the answer in $tmp/r, errors in $tmp/e.
ctl() {
	timeout 60 "$run" --ctl "$@" >"$tmp/r" 2>"$tmp/e"
	rc=$?
}

# field DEVICE NAME: a number of the last status answer's DEVICE line.
field() {
	sed -n "/^device=$1 /s/.*[ ]$2=\([0-9]*\).*/\1/p" "$tmp/r"
}

show() { sed 's/^/# /' "$tmp/r" "$tmp/e" "$@"; }

# ---- offload ----
start a --control
grep -q '^ready ' "$out"
check $? "sleepclient allocates and writes its patterns under vmmx-run --control"
# The driver copies and syncs device 0's context made before the sleep: the
# faults injected further down fail the sleep's own.
copies=$(sed -n 's/^ready [0-9]* copies=\([0-9]*\),.*/\1/p' "$out")
syncs=$(sed -n 's/^ready .* syncs=\([0-9]*\),.*/\1/p' "$out")
ready=$(sed -n 's/^ready \([0-9]*\) .*/\1/p' "$out") # bytes its allocations asked for
sock="$tmp/xdg/vmmx-run-$pid.sock"
[ -S "$sock" ] && [ "$(stat -c %a "$sock")" = 600 ]
check $? "--control: the socket is vmmx-run-PID.sock in \$XDG_RUNTIME_DIR, mode 0600"

ctl "$pid" status
d0=$(field 0 device_bytes)
d1=$(field 1 device_bytes)
[ $rc -eq 0 ] && grep -q '^ok state=awake mode=none devices=2 segments=4$' "$tmp/r" &&
	[ "$d0" -ge $((70 * MiB)) ] && [ "$d1" -eq $((96 * MiB)) ]
check $? "status before the sleep: awake, 2 devices, 4 segments, device 0 holds $d0 bytes, device 1 $d1"
show

ctl "$pid" sleep
[ $rc -eq 0 ] && grep -q "^ok slept bytes=$((d0 + d1)) mode=offload seconds=[0-9.]*$" "$tmp/r"
check $? "sleep: every byte the devices held ($((d0 + d1))) is offloaded"
show

ctl "$pid" status
[ $rc -eq 0 ] && grep -q '^ok state=asleep mode=offload ' "$tmp/r" &&
	[ "$(field 0 asleep_bytes)" -eq "$d0" ] && [ "$(field 0 offloaded_bytes)" -eq "$d0" ] &&
	[ "$(field 1 asleep_bytes)" -eq "$d1" ] && [ "$(field 1 offloaded_bytes)" -eq "$d1" ]
check $? "status while asleep: each device's bytes asleep and offloaded"
[ "$(field 0 device_bytes)" -eq 0 ] && [ "$(field 1 device_bytes)" -eq 0 ] &&
	[ "$(field 0 host_bytes)" -eq "$d0" ] && [ "$(field 1 host_bytes)" -eq "$d1" ]
check $? "status while asleep: no device memory in use, the contents in host memory"
show

ctl "$pid" sleep discard
[ $rc -eq 1 ] && grep -q 'error: already asleep (offload): wake it first' "$tmp/e"
check $? "a second sleep is refused (exit 1): already asleep"

echo alloc >&3
wait_for "$out" '^allocating'
sleep 1
! grep -q '^allocated' "$out" && wait_for "$tmp/a.err" 'an allocation or free waits'
check $? "an allocation while asleep waits for the wake (and says so once)"

ctl "$pid" wake
[ $rc -eq 0 ] && grep -q "^ok woke bytes=$((d0 + d1)) seconds=[0-9.]*$" "$tmp/r"
check $? "wake: every byte comes back"
show
wait_for "$out" '^allocated'
grep -q '^allocated ok$' "$out"
check $? "the waiting allocation is served after the wake"

ctl "$pid" status
[ $rc -eq 0 ] && grep -q '^ok state=awake mode=none' "$tmp/r" &&
	[ "$(field 0 device_bytes)" -eq "$d0" ] && [ "$(field 1 device_bytes)" -eq "$d1" ] &&
	[ "$(field 0 asleep_bytes)" -eq 0 ] && [ "$(field 1 asleep_bytes)" -eq 0 ]
check $? "status after the wake: awake, the devices hold what they held"
[ "$(field 0 stash_bytes)" -gt 0 ] && [ "$(field 1 stash_bytes)" -gt 0 ]
check $? "status after the wake: the host memory of the offload is kept for the next one"
show

ctl "$pid" release
rel=$(sed -n 's/^ok released bytes=\([0-9]*\)$/\1/p' "$tmp/r")
[ $rc -eq 0 ] && [ -n "$rel" ] && [ "$rel" -gt 0 ]
check $? "release: gives the kept host memory back ($rel bytes)"
show
ctl "$pid" status
[ "$(field 0 stash_bytes)" -eq 0 ] && [ "$(field 1 stash_bytes)" -eq 0 ] &&
	[ "$(field 0 device_bytes)" -eq "$d0" ]
check $? "status after the release: no host memory kept, the device memory as it was"
ctl "$pid" release
[ $rc -eq 0 ] && grep -q '^ok released bytes=0$' "$tmp/r"
check $? "a second release gives back nothing"

: >"$out"
echo check >&3
wait_for "$out" '^check '
grep -q '^check ok$' "$out"
check $? "after an offload and a wake every allocation reads back its pattern"
sed 's/^/# /' "$out"

# ---- discard ----
ctl "$pid" sleep discard
[ $rc -eq 0 ] && grep -q "^ok slept bytes=$((d0 + d1)) mode=discard " "$tmp/r"
check $? "sleep discard: every byte given back"
ctl "$pid" status
grep -q '^ok state=asleep mode=discard ' "$tmp/r" && [ "$(field 0 asleep_bytes)" -eq "$d0" ] &&
	[ "$(field 0 offloaded_bytes)" -eq 0 ] && [ "$(field 0 device_bytes)" -eq 0 ] &&
	[ "$(field 1 asleep_bytes)" -eq "$d1" ] && [ "$(field 1 device_bytes)" -eq 0 ]
check $? "status after a discard: asleep, nothing offloaded, no device memory in use"
show
ctl "$pid" wake
[ $rc -eq 0 ] && grep -q "^ok woke bytes=$((d0 + d1)) " "$tmp/r"
check $? "wake after a discard: every byte mapped again"
: >"$out"
echo fill >&3
echo check >&3
wait_for "$out" '^check '
grep -q '^fill ok$' "$out" && grep -q '^check ok$' "$out"
check $? "discarded memory is usable after the wake, at the same addresses"

# ---- allocations and frees from 4 threads through sleeps and wakes ----
: >"$out"
echo churn >&3
wait_for "$out" '^churning'
ok=0
for mode in offload discard offload; do
	sleep 0.2
	ctl "$pid" sleep $mode
	[ $rc -eq 0 ] || ok=1
	ctl "$pid" status
	grep -q "^ok state=asleep mode=$mode " "$tmp/r" && [ "$(field 0 device_bytes)" -eq 0 ] || ok=1
	[ $ok -eq 0 ] || show
	sleep 0.2
	ctl "$pid" wake
	[ $rc -eq 0 ] || ok=1
done
check $ok "3 sleeps and wakes while 4 threads allocate and free: each one served, no device memory in use while asleep"
echo stop >&3
wait_for "$out" '^stopped'
grep -q '^stopped iterations=[1-9][0-9]* failures=0$' "$out"
check $? "every allocation and free of the threads succeeded, waiting through the sleeps ($(sed -n 's/^stopped //p' "$out"))"
ctl "$pid" status
grep -q '^ok state=awake mode=none devices=2 segments=4$' "$tmp/r" &&
	[ "$(field 0 allocated_bytes)" -eq $((ready - d1)) ]
check $? "the threads' memory all freed: the 4 segments of the idle program are left, holding its allocations"
show
echo fill >&3
echo check >&3
wait_for "$out" '^check '
grep -q '^check ok$' "$out"
check $? "the program's own allocations read back after the churn"

# ---- bad requests ----
ctl "$pid" frobnicate
[ $rc -eq 1 ] && grep -q "error: unknown command 'frobnicate': expected sleep \[offload|discard\], wake, release or status" "$tmp/e"
check $? "an unknown command: exit 1, named, the commands listed"
ctl "$pid" sleep sideways
[ $rc -eq 1 ] && grep -q "error: sleep 'sideways': expected sleep, sleep offload or sleep discard" "$tmp/e"
check $? "a bad sleep mode: exit 1, named"
ctl "$pid" status now
[ $rc -eq 1 ] && grep -q "error: status takes no argument (got 'now')" "$tmp/e"
check $? "an argument to status: exit 1"
ctl "$pid" wake
[ $rc -eq 1 ] && grep -q "error: not asleep" "$tmp/e"
check $? "a wake while awake: exit 1, not asleep"
ctl "$pid"
[ $rc -eq 2 ] && grep -q "no command: expected sleep \[offload|discard\], wake, release or status" "$tmp/e"
check $? "--ctl without a command: exit 2"
show

stop
[ $st -eq 0 ] && grep -q '^bye$' "$out"
check $? "the client frees everything and exits 0"
[ ! -e "$sock" ]
check $? "the socket is removed at exit"

# ---- nobody to ask ----
sh -c 'exit 0' &
gone=$!
wait $gone
ctl "$gone" status
[ $rc -eq 2 ] && grep -q "no process $gone" "$tmp/e"
check $? "an unknown PID: exit 2, no process"
ctl $$ status
[ $rc -eq 2 ] && grep -q "process $$ has no control socket" "$tmp/e" &&
	grep -q "vmmx-run --control" "$tmp/e"
check $? "a process without a socket: exit 2, and why there may be none"
ctl "$tmp/nothing.sock" status
[ $rc -eq 2 ] && grep -q "cannot reach $tmp/nothing.sock: No such file" "$tmp/e"
check $? "a path with no socket: exit 2"
show

# ---- failed sleeps leave nothing asleep ----
# fail_sleep NAME PATTERN WORDS: under the environment given (an injected
# fault, a host limit), the sleep fails (exit 1) with a message matching
# PATTERN (WORDS says it in the test's name), nothing is asleep, the
# devices hold what they held, an allocation is served at once and the
# patterns read back.
fail_sleep() {
	start "$1" --control
	ctl "$pid" status
	e0=$(field 0 device_bytes)
	e1=$(field 1 device_bytes)
	ctl "$pid" sleep
	[ $rc -eq 1 ] && grep -q "error: sleep failed, nothing is asleep: $2" "$tmp/e"
	check $? "a sleep that fails ($3): exit 1, the device and why named, nothing is asleep"
	show
	ctl "$pid" status
	grep -q '^ok state=awake ' "$tmp/r" && [ "$(field 0 asleep_bytes)" -eq 0 ] &&
		[ "$(field 1 asleep_bytes)" -eq 0 ] && [ "$(field 0 device_bytes)" -eq "$e0" ] &&
		[ "$(field 1 device_bytes)" -eq "$e1" ]
	check $? "... the devices hold what they held"
	echo alloc >&3
	echo check >&3
	wait_for "$out" '^check '
	grep -q '^allocated ok$' "$out" && grep -q '^check ok$' "$out"
	check $? "... allocations are served again and every pattern reads back"
	sed 's/^/# /' "$out"
	stop
}
export VMMX_FAULT=sync:$((syncs + 1))
fail_sleep sync 'device 0: waiting for the device' 'the device sync fails'
VMMX_FAULT=copy:$((copies + 1))
fail_sleep copy 'device 0: .*injected failure' "device 0's first offload copy fails"
unset VMMX_FAULT
# Host memory for device 0's 86 MiB but not for device 1's 96 MiB: device 0 is woken again.
VMMX_HOST_LIMIT=90MiB
fail_sleep host 'device 1: .*\(out of memory\|no host memory\)' \
	'no host memory for device 1, after device 0 slept'
VMMX_HOST_LIMIT=1GiB

# ---- --control=PATH, a stale socket, a path in use ----
cd "$tmp" || exit 1
start p --control=rel.sock
ctl "$tmp/rel.sock" status
[ $rc -eq 0 ] && grep -q '^ok state=awake' "$tmp/r"
check $? "--control=PATH (relative): the socket at the path, made absolute"
kill -9 "$pid"
wait "$pid" 2>/dev/null
exec 3>&-
ctl "$tmp/rel.sock" status
[ $rc -eq 2 ] && grep -q 'nothing listens there: the process that made it has exited' "$tmp/e"
check $? "a socket left by a killed process: exit 2, nothing listens there"
start q --control=rel.sock
ctl "$tmp/rel.sock" status
[ $rc -eq 0 ]
check $? "a new process replaces the stale socket"
qpid=$pid
mkfifo "$tmp/r2.in"
"$run" --headroom 0 --control="$tmp/rel.sock" -- "$sc" <"$tmp/r2.in" >"$tmp/r2.out" 2>"$tmp/r2.err" &
pid2=$!
pids="$pids $pid2"
exec 4>"$tmp/r2.in"
wait_for "$tmp/r2.out" '^ready'
grep -q "no control socket (bind $tmp/rel.sock: Address already in use); sleep and wake from outside are off" "$tmp/r2.err"
check $? "a path in use by a live process: the second process says it has no control, and runs"
echo quit >&4
exec 4>&-
wait $pid2
check $? "... and exits 0"
stop
[ $st -eq 0 ] && [ ! -e "$tmp/rel.sock" ]
check $? "the socket of --control=PATH is removed at exit"
cd / || exit 1

# ---- vmmx-run's checks ----
"$run" --control=/nonexistent/dir/s.sock -- true 2>"$tmp/e"
[ $? -eq 2 ] && grep -q -- "--control '/nonexistent/dir/s.sock': cannot make a socket in /nonexistent/dir" "$tmp/e"
check $? "--control in a directory that is not there: exit 2, named"
long=/tmp/$(printf '%0120d' 0).sock
"$run" --control="$long" -- true 2>"$tmp/e"
[ $? -eq 2 ] && grep -q 'a socket path has at most 107 bytes' "$tmp/e"
check $? "--control with a path too long for a socket: exit 2"
"$run" --help | grep -q -- '--control\[=PATH\]' && "$run" --help | grep -q -- '--ctl PID|PATH'
check $? "--help gives --control and --ctl"
