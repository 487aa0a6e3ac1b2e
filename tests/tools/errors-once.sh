#!/bin/sh
# SPDX-License-Identifier: MIT
# Each error printed once: a bad VMMX_* variable makes the library's
# context fail; the library shows the mistake on its log at warn level (for
# programs that merely link it) and the tool prints it as its error.  The
# tools (tools/ctx.c) show it once, under the tool's name, and fail; an
# unknown variable, a warning and no error, is still shown once, by the
# library.  Counted in every tool that opens a context.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-once-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

LD_LIBRARY_PATH="$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
VMMX_RUN_PRELOAD="$top_builddir/preload/.libs/libvmmx-preload.so"
export LD_LIBRARY_PATH VMMX_RUN_PRELOAD

# once TOOL ARGS...: with VMMX_CHUNK_SIZE=bogus, TOOL fails (not 0) and
# stderr names the variable on exactly one line, which names TOOL.
once() {
	tool=$1
	shift
	VMMX_CHUNK_SIZE=bogus "$top_builddir/tools/$tool" "$@" >"$tmp/out" 2>"$tmp/err"
	st=$?
	lines=$(grep -c 'VMMX_CHUNK_SIZE="bogus"' "$tmp/err")
	[ $st -ne 0 ] && [ "$lines" -eq 1 ] && grep -q "^$tool: .*VMMX_CHUNK_SIZE=\"bogus\"" "$tmp/err"
	check $? "$tool with VMMX_CHUNK_SIZE=bogus: fails, the error on one line of stderr, under its name"
	[ "$lines" -eq 1 ] || { echo "# $lines lines, exit status $st:"; sed 's/^/# /' "$tmp/err"; }
}
once vmmx-info
once vmmx-info --json
once vmmx-demo
once vmmx-bench -q --only grow --reps 1
once vmmx-place -q -s 4MiB -n 1
once vmmx-run -- true

VMMX_LOG=none VMMX_CHUNK_SIZE=bogus "$top_builddir/tools/vmmx-info" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 1 ] && [ "$(grep -c 'VMMX_CHUNK_SIZE="bogus"' "$tmp/err")" -eq 1 ]
check $? "vmmx-info with VMMX_LOG=none: the error is the tool's, still printed once"

VMMX_NOT_A_VARIABLE=1 "$top_builddir/tools/vmmx-info" >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && [ "$(grep -c 'VMMX_NOT_A_VARIABLE is not a libvmmx variable' "$tmp/err")" -eq 1 ] &&
	grep -q '^libvmmx: warn: VMMX_NOT_A_VARIABLE' "$tmp/err"
check $? "vmmx-info with an unknown variable: the library's warning, once, and exit 0"

echo "1..$n"
