#!/bin/sh
# SPDX-License-Identifier: MIT
# vmmx-demo on the sim backend: a small run (the data check passes, the
# address never changes), usage errors that name the bad option or
# argument (exit 2), and standard output that cannot be written (exit 1,
# said on stderr).
demo="$top_builddir/tools/vmmx-demo"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-demo-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

VMMX_SIM_DEVICE_MEM=64MiB
export VMMX_SIM_DEVICE_MEM

"$demo" --size 16MiB --steps 2 >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q '^data written and read back across all 16 MiB: OK (simulated backend)' "$tmp/out" &&
	[ "$(grep -c '^[12]  ' "$tmp/out")" -eq 2 ] && test ! -s "$tmp/err"
check $? "a 16 MiB run in 2 steps on the sim: the data check passes"
[ "$(sed -n 's/^[12]  .* \(0x[0-9a-f]*\)$/\1/p' "$tmp/out" | sort -u | wc -l)" -eq 1 ]
check $? "the buffer keeps its address while it grows"

# demo_usage DESCRIPTION NEEDLE ARGS...: exit 2, NEEDLE on the first line of stderr, the usage after it
demo_usage() {
	d=$1 needle=$2
	shift 2
	"$demo" "$@" >"$tmp/out" 2>"$tmp/err"
	st=$?
	[ $st -eq 2 ] && head -n 1 "$tmp/err" | grep -q -- "$needle" && grep -q '^usage: vmmx-demo' "$tmp/err" &&
		test ! -s "$tmp/out"
	check $? "$d (exit 2, names $needle)"
	[ $st -eq 2 ] || echo "# exit status $st"
	sed 's/^/# /' "$tmp/err"
}
demo_usage "an unknown option" '^vmmx-demo: unknown option --bogus$' --bogus
demo_usage "an unknown option after a good one" '^vmmx-demo: unknown option -x$' --steps 2 -x
demo_usage "a stray argument" '^vmmx-demo: unexpected argument "16MiB"$' 16MiB
demo_usage "an option without its argument" '^vmmx-demo: --size needs an argument$' --size
"$demo" --steps 4x >"$tmp/out" 2>"$tmp/err"
[ $? -eq 2 ] && grep -q '^vmmx-demo: --steps 4x: expected a whole number from 1 to 64' "$tmp/err"
check $? "--steps 4x: refused, not read as 4"
"$demo" --help >"$tmp/out" 2>"$tmp/err"
[ $? -eq 0 ] && grep -q '^usage: vmmx-demo' "$tmp/out" && test ! -s "$tmp/err"
check $? "--help: the usage on stdout, exit 0"

if [ -c /dev/full ]; then
	"$demo" --size 16MiB --steps 2 >/dev/full 2>"$tmp/err"
	st=$?
	[ $st -eq 1 ] && grep -q '^vmmx-demo: write error on standard output: No space left on device' "$tmp/err"
	check $? "stdout on /dev/full: exit 1, the write error said"
	[ $st -eq 1 ] || echo "# exit status $st"
	"$demo" --help >/dev/full 2>"$tmp/err"
	[ $? -eq 1 ] && grep -q '^vmmx-demo: write error on standard output' "$tmp/err"
	check $? "--help on /dev/full: exit 1"
else
	skip "no /dev/full"
	skip "no /dev/full"
fi

echo "1..$n"
