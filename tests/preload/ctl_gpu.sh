#!/bin/sh
# SPDX-License-Identifier: MIT
# ctl_gpu.sh - sleep and wake from outside on a real GPU (not part of make
# check: the lead's GPU machine).  An unmodified PyTorch program
# (ctl_torch.py) fills SIZE MiB of device memory under vmmx-run --control
# and idles; vmmx-run --ctl puts it to sleep (offload, then discard) and
# wakes it, while nvidia-smi, a second process, reads the device memory in
# use: it must drop by about SIZE while asleep and come back at the wake;
# the program then checks its tensors (offload) or refills them (discard).
# Run from a build tree configured with CUDA:
#   VMMX_BACKEND=cuda sh SRCDIR/tests/preload/ctl_gpu.sh [SIZE_MIB]
# PYTHON names the interpreter with torch (default: python3, then
# /opt/torch/.venv/bin/python).  Prints TAP; skips without a GPU or torch.
size=${1:-4096}
src=$(cd "$(dirname "$0")" && pwd)
run=${RUN:-tools/vmmx-run}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-ctl-gpu.XXXXXX") || exit 1
pid=
cleanup() {
	[ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

skip() {
	echo "1..0 # SKIP $1"
	exit 0
}
[ -x "$run" ] || skip "no $run here: run from a build tree (or set RUN)"
command -v nvidia-smi >/dev/null 2>&1 || skip "no nvidia-smi: no GPU here"
nvidia-smi -L >/dev/null 2>&1 || skip "nvidia-smi finds no GPU"
py=${PYTHON:-python3}
if ! "$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	py=/opt/torch/.venv/bin/python
	"$py" -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null ||
		skip "no Python with PyTorch and a GPU (set PYTHON)"
fi
export VMMX_BACKEND=cuda
unset VMMX_DEVICE_LIMIT VMMX_POLICY
# The device's memory in use, in MiB, as another process sees it.
used() { nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -i 0 | tr -d ' '; }

n=0
check() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
. "$src/wait_for.sh"
ctl() {
	timeout 300 "$run" --ctl "$pid" "$@" >"$tmp/r" 2>"$tmp/e"
	rc=$?
	sed 's/^/# /' "$tmp/r" "$tmp/e"
}
# within A B SLACK: |A - B| <= SLACK
within() { [ $(($1 - $2)) -le "$3" ] && [ $(($2 - $1)) -le "$3" ]; }

echo "1..12"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | sed 's/^/# /'
base=$(used)
mkfifo "$tmp/in"
"$run" --control -- "$py" "$src/ctl_torch.py" "$size" <"$tmp/in" >>"$tmp/out" 2>"$tmp/err" &
pid=$!
exec 3>"$tmp/in"
wait_for "$tmp/out" '^ready' 120 # PyTorch starts slowly
check $? "ctl_torch.py fills $size MiB under vmmx-run --control (pid $pid)"
sed 's/^/# /' "$tmp/out" "$tmp/err"
full=$(used)
echo "# device memory in use: $base MiB before, $full MiB with the program"

# Offload: the memory leaves the device, the contents come back.
ctl sleep offload
[ $rc -eq 0 ] && grep -q '^ok slept bytes=' "$tmp/r"
check $? "sleep offload"
asleep=$(used)
echo "# in use while asleep: $asleep MiB (the program's CUDA context stays)"
[ $((full - asleep)) -ge $((size * 9 / 10)) ]
check $? "asleep (offload): nvidia-smi sees at least 90% of $size MiB given back ($((full - asleep)) MiB)"
ctl status
grep -q '^ok state=asleep mode=offload' "$tmp/r" && grep -q ' device_bytes=0 ' "$tmp/r"
check $? "status: asleep, no device bytes"
ctl wake
[ $rc -eq 0 ] && grep -q '^ok woke bytes=' "$tmp/r"
check $? "wake"
woke=$(used)
within "$woke" "$full" 512
check $? "awake: in use again as before the sleep ($woke MiB, $full before)"
echo check >&3
wait_for "$tmp/out" '^check' 120
grep -q '^check ok' "$tmp/out"
check $? "every tensor holds its pattern after the offload and the wake"

# Discard: the memory leaves the device, the program refills it.
ctl sleep discard
[ $rc -eq 0 ] && grep -q '^ok slept bytes=.* mode=discard' "$tmp/r"
check $? "sleep discard"
asleep=$(used)
[ $((full - asleep)) -ge $((size * 9 / 10)) ]
check $? "asleep (discard): at least 90% of $size MiB given back ($((full - asleep)) MiB)"
ctl wake
[ $rc -eq 0 ]
check $? "wake after the discard"
: >"$tmp/out"
echo fill >&3
echo check >&3
wait_for "$tmp/out" '^check' 120
grep -q '^fill ok' "$tmp/out" && grep -q '^check ok' "$tmp/out"
check $? "the program refills its tensors after the discard and reads them back"
echo quit >&3
exec 3>&-
wait "$pid"
st=$?
p=$pid
pid=
sed 's/^/# /' "$tmp/out" "$tmp/err"
[ $st -eq 0 ] && [ ! -e "${XDG_RUNTIME_DIR:-/tmp}/vmmx-run-$p.sock" ] && [ ! -e "/tmp/vmmx-run-$p.sock" ]
check $? "the program exits 0 and its socket is gone"
