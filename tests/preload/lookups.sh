#!/bin/sh
# SPDX-License-Identifier: MIT
# Every lookup path on the sim backend: dlclient.c (a program that dlopens
# libcuda.so.1 RTLD_LOCAL and finds the driver through dlsym, dlvsym and
# cuGetProcAddress) prints the TAP; then the report's counts of what it did.
# 2 devices of 1 GiB, a 256 MiB device limit, no headroom.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-lookups.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$top_srcdir/tests/preload/env.sh"
dlclient="$top_builddir/tests/preload/dlclient"
LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$top_builddir/tests/preload/.libs"
export LD_LIBRARY_PATH VMMX_SIM_DEVICES=2 VMMX_SIM_DEVICE_MEM=1GiB VMMX_HOST_LIMIT=1GiB

# Launches not watched (--placement alloc): dlclient checks that their
# lookups give the driver's own entry points (launches.sh, the watched ones).
"$run" --placement alloc --device-limit 256MiB --headroom 0 --report-file "$tmp/rep" -- "$dlclient" >"$tmp/tap" 2>"$tmp/err"
st=$?
# The client's TAP, without its plan; ours follows.
grep -v '^1\.\.' "$tmp/tap"
n=$(grep -c '^\(not \)\{0,1\}ok ' "$tmp/tap")
sed 's/^/# /' "$tmp/err"
check $st "dlclient exits 0 under vmmx-run --placement alloc"
grep -q 'dlsym [1-9][0-9]*, dlvsym [1-9][0-9]*, cuGetProcAddress [1-9]' "$tmp/rep"
check $? "--report counts the lookups answered by dlsym, dlvsym and cuGetProcAddress"
grep -q 'cuMemAlloc 3, cuMemAllocAsync 0, cuMemAllocFromPoolAsync 2;' "$tmp/rep"
check $? "--report counts the allocations made through each path (3 cuMemAlloc, 2 from default pools)"
grep -q "the program's own VMM: cuMemCreate 1 (2.0 MiB), cuMemMap 1 (2.0 MiB), cuMemRelease 1" "$tmp/rep"
check $? "--report counts the program's own VMM calls, passed through"
grep -q 'its own pools: cuMemPoolCreate 1, cuMemAllocFromPoolAsync 1 (1.0 MiB)' "$tmp/rep"
check $? "--report counts the program's own pool and its allocation, passed through"
sed 's/^/# /' "$tmp/rep"
echo "1..$n"
