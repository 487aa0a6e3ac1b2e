#!/bin/sh
# SPDX-License-Identifier: MIT
# vmmx-run finds its interposer: VMMX_RUN_PRELOAD first, the build tree's when
# it runs from the build tree, else the installed one; a missing one is named
# with a hint that names VMMX_RUN_PRELOAD.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-lookup.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT
. "$top_srcdir/tests/preload/env.sh"
export VMMX_SIM_DEVICE_MEM=1GiB VMMX_HOST_LIMIT=1GiB
tree=$(cd "$top_builddir" && pwd -P)

echo "1..5"

# From the build tree, with no VMMX_RUN_PRELOAD: the build tree's interposer.
unset VMMX_RUN_PRELOAD
"$run" -- sh -c 'echo "$LD_PRELOAD"' >"$tmp/out" 2>"$tmp/err"
st=$?
[ $st -eq 0 ] && [ "$(cat "$tmp/out")" = "$tree/preload/.libs/libvmmx-preload.so" ]
check $? "vmmx-run from the build tree preloads the build tree's libvmmx-preload.so"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/err"
"$run" -- "$client" spill >"$tmp/out" 2>"$tmp/err"
check $? "vmmx-run from the build tree, no VMMX_RUN_PRELOAD: a CUDA program runs"

# VMMX_RUN_PRELOAD names a missing file: exit 2, the file and the variable named.
VMMX_RUN_PRELOAD=$tmp/none.so "$run" -- true 2>"$tmp/err"
st=$?
[ $st -eq 2 ] && grep -q "$tmp/none.so: No such file" "$tmp/err" && grep -q VMMX_RUN_PRELOAD "$tmp/err"
check $? "a missing VMMX_RUN_PRELOAD: exit 2, the file and VMMX_RUN_PRELOAD named"

# vmmx-run outside the build tree looks for the installed interposer only;
# when that is missing the message says how to point at one.
cp "$top_builddir/tools/.libs/vmmx-run" "$tmp/vmmx-run" 2>/dev/null ||
	cp "$top_builddir/tools/vmmx-run" "$tmp/vmmx-run"
case $(cd "$tmp" && pwd -P)/ in
"$tree"/*) skip=" # SKIP the temporary directory is inside the build tree" ;;
*) skip= ;;
esac
"$tmp/vmmx-run" -- sh -c 'echo "$LD_PRELOAD"' >"$tmp/out" 2>"$tmp/err"
st=$?
lib=$(sed -n 's/^vmmx-run: \(.*libvmmx-preload\.so\): .*/\1/p' "$tmp/err")
if [ -z "$skip" ] && [ $st -eq 0 ]; then
	skip=" # SKIP an installed libvmmx-preload.so is there ($(cat "$tmp/out"))"
fi
if [ -n "$skip" ]; then
	echo "ok 4 - vmmx-run outside the build tree names the installed interposer$skip"
	echo "ok 5 - vmmx-run outside the build tree: the hint names VMMX_RUN_PRELOAD$skip"
	exit 0
fi
n=3
case $lib in
"$tree"/*|'') r=1 ;;
*) r=0 ;;
esac
[ $st -eq 2 ] && [ $r -eq 0 ]
check $? "vmmx-run outside the build tree names the installed interposer (${lib:-none named})"
grep -q 'hint:.*VMMX_RUN_PRELOAD' "$tmp/err"
check $? "vmmx-run outside the build tree: the hint names VMMX_RUN_PRELOAD"
sed "s/^/# /" "$tmp/err"
