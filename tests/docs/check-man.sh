#!/bin/sh
# SPDX-License-Identifier: MIT
# .ci/check-man on a copy of the sources: it passes on the tree as it is,
# and fails, naming what is missing, when the copy of a man page loses an
# entry, when the copy of the code reads a variable or declares a function
# that no page has, when a page names what nothing has, and when a page
# renders with a warning.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/check-man-sh.XXXXXX") || exit 1
trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

if ! command -v bash >/dev/null 2>&1; then
	echo "1..0 # SKIP no bash to run .ci/check-man"
	exit 0
fi

# The files .ci/check-man reads, copied (writable: a distcheck's are not).
src=$tmp/src
mkdir -p "$src"
(cd "$top_srcdir" &&
	{ find lib preload tools include python/vmmx python/vmmx_tools docs/man -type f \
		\( -name '*.[ch]' -o -name '*.in' -o -name '*.py' -o -name '*.[1-9]' \);
	  echo .ci/check-man; } | tar -cf - -T -) | tar -C "$src" -xf - || exit 1
chmod -R u+w "$src"

# run: .ci/check-man on the copy, its output in $tmp/out, its status in $st.
run() {
	bash "$src/.ci/check-man" "$src" >"$tmp/out" 2>&1
	st=$?
}
# fails DESCRIPTION NEEDLE: the check exits 1 and its output has NEEDLE.
fails() {
	run
	[ $st -eq 1 ] && grep -qF -- "$2" "$tmp/out"
	check $? "$1 (exit 1, says: $2)"
	[ $st -eq 1 ] || echo "# exit status $st"
	grep -qF -- "$2" "$tmp/out" || sed 's/^/# /' "$tmp/out"
}
# restore FILE: the copy of FILE as in the source tree again.
restore() {
	cp "$top_srcdir/$1" "$src/$1" && chmod u+w "$src/$1"
}
# drop_entry PAGE NAME: the copy of PAGE without the .TP entry whose tag
# line is ".B NAME" or ".BR NAME ()" (up to the next .TP, .SH or .SS).
drop_entry() {
	awk -v tag="$2" '
		/^\.(TP|SH|SS|PP)( |$)/ && skip { skip = 0 }
		/^\.TP( |$)/ { held = $0; next }
		held != "" {
			if ($0 == ".B " tag || $0 == ".BR " tag " ()") { held = ""; skip = 1; next }
			print held; held = ""
		}
		!skip' "$top_srcdir/$1" >"$src/$1"
}
# appended FILE TEXT DESCRIPTION NEEDLE: the copy of FILE with TEXT (printf's
# %b escapes) at its end fails the check, saying NEEDLE; then it is restored.
appended() {
	printf '%b' "$2" >>"$src/$1"
	fails "$3" "$4"
	restore "$1"
}
# missing PAGE NAME DESCRIPTION NEEDLE: the copy of PAGE without the entry
# of NAME fails the check, saying NEEDLE; then the copy is restored.
missing() {
	drop_entry "$1" "$2"
	fails "$3" "$4"
	restore "$1"
}

run
[ $st -eq 0 ] && grep -q '^check-man: [0-9]* variables in docs/man/vmmx.7, [0-9]* functions' "$tmp/out"
check $? "check-man passes on the tree as it is"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/out"

# (a) variables
drop_entry docs/man/vmmx.7 VMMX_HOST_LIMIT
grep -q 'VMMX_HOST_LIMIT' "$src/docs/man/vmmx.7" && ! grep -q '^\.B VMMX_HOST_LIMIT$' "$src/docs/man/vmmx.7"
check $? "the copy of vmmx.7 lost the VMMX_HOST_LIMIT entry and still mentions it in the text"
fails "vmmx.7 without the entry of a variable of lib/config.c's table" \
	"docs/man/vmmx.7 has no entry for VMMX_HOST_LIMIT (read in lib/config.c (the variable table))"
restore docs/man/vmmx.7

missing docs/man/vmmx.7 VMMX_DEVICE "vmmx.7 without VMMX_DEVICE, though VMMX_DEVICE_LIMIT is there" \
	"docs/man/vmmx.7 has no entry for VMMX_DEVICE (read in"
grep -q 'VMMX_DEVICE_' "$tmp/out"
check $((!$?)) "check-man names only VMMX_DEVICE, not the names it is a prefix of"

sed 's/^\.B VMMX_RUN_DEBUG$/.RB ( VMMX_RUN_DEBUG )/' "$top_srcdir/docs/man/vmmx.7" >"$src/docs/man/vmmx.7"
grep -q '^\.RB ( VMMX_RUN_DEBUG )$' "$src/docs/man/vmmx.7" && run && [ $st -eq 0 ]
check $? "a tag line \".RB ( VMMX_RUN_DEBUG )\" is the variable's entry, escapes and punctuation aside"
restore docs/man/vmmx.7
sed 's/^\.BR VMMX_DEVICE_HEADROOM ", " VMMX_HEADROOM$/.B VMMX_DEVICE_HEADROOM\n.TQ\n.B VMMX_HEADROOM/' \
	"$top_srcdir/docs/man/vmmx.7" >"$src/docs/man/vmmx.7"
grep -q '^\.TQ$' "$src/docs/man/vmmx.7" && run && [ $st -eq 0 ]
check $? "a second tag under .TQ (VMMX_HEADROOM) is an entry too"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/out"
restore docs/man/vmmx.7
sed '/^\.TP$/{N;s/^\.TP\n\.B VMMX_RUN_DEBUG$/.PP\nSee VMMX_RUN_DEBUG./}' "$top_srcdir/docs/man/vmmx.7" \
	>"$src/docs/man/vmmx.7"
fails "vmmx.7 that mentions VMMX_RUN_DEBUG in the text but has no entry for it" \
	"docs/man/vmmx.7 has no entry for VMMX_RUN_DEBUG (read in preload/resolve.c)"
restore docs/man/vmmx.7

sed 's/^\(\t{ "VMMX_LOG", .*\)$/\1\n\t{ "VMMX_NEW_SETTING", -1, parse_bool, "0 or 1", CONF(sim_pageable) },/' \
	"$top_srcdir/lib/config.c" >"$src/lib/config.c"
grep -q '"VMMX_NEW_SETTING"' "$src/lib/config.c"
check $? "the copy of lib/config.c has a new variable in its table"
fails "a variable added to lib/config.c's table" \
	"docs/man/vmmx.7 has no entry for VMMX_NEW_SETTING (read in lib/config.c (the variable table))"
restore lib/config.c

appended preload/state.c 'static const char *run_new(void)\n{\n\treturn getenv("VMMX_RUN_NEW_KNOB");\n}\n' \
	"a getenv() of a new VMMX_ name in preload/" \
	"docs/man/vmmx.7 has no entry for VMMX_RUN_NEW_KNOB (read in preload/state.c)"

appended tools/vmmx-info.c 'static int tool_new(void)\n{\n\treturn env_flag("VMMX_TOOL_NEW", 0);\n}\n' \
	"a new VMMX_ name passed to a helper in tools/" \
	"docs/man/vmmx.7 has no entry for VMMX_TOOL_NEW (read in tools/vmmx-info.c)"

printf 'static const char *mode_name(void)\n{\n\treturn "VMMX_SLEEP_OFFLOAD";\n}\n' \
	>>"$src/lib/sleep.c"
run
check $st "a string naming a constant of vmmx.h (VMMX_SLEEP_OFFLOAD) is not taken for a variable"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/out"
restore lib/sleep.c

appended python/vmmx/_lib.py '\n\ndef _new():\n    return os.environ.get("VMMX_PY_NEW")\n' \
	"an os.environ read of a new VMMX_ name in the Python package" \
	"docs/man/vmmx.7 has no entry for VMMX_PY_NEW (read in python/vmmx/_lib.py (Python))"

appended docs/man/vmmx.7 '.TP\n.B VMMX_NOBODY_READS\nA variable of nothing.\n' \
	"vmmx.7 with an entry for a variable nothing reads" \
	"docs/man/vmmx.7 documents VMMX_NOBODY_READS, which nothing in lib/, preload/, tools/ or python/ reads"

sed 's/^static const struct var vars\[\] = {$/static const struct var table[] = {/' \
	"$top_srcdir/lib/config.c" >"$src/lib/config.c"
fails "lib/config.c whose table is not where check-man looks" \
	"lib/config.c: no \"static const struct var vars[] = {\" table found"
restore lib/config.c

# (b) functions
missing docs/man/vmmx.3 vmmx_buf_trim "vmmx.3 without the entry of vmmx_buf_trim()" \
	"docs/man/vmmx.3 has no entry for vmmx_buf_trim() (declared in include/vmmx.h)"
missing docs/man/vmmx.3 vmmx_policy_entry "vmmx.3 without the policy entry point" \
	"docs/man/vmmx.3 has no entry for vmmx_policy_entry() (declared in include/vmmx/policy.h)"

sed 's|^#endif /\* VMMX_ALLOC_H \*/$|VMMX_API int\nvmmx_alloc_new_thing(struct vmmx_alloc *a);\n&|' \
	"$top_srcdir/include/vmmx/alloc.h" >"$src/include/vmmx/alloc.h"
grep -q '^vmmx_alloc_new_thing(' "$src/include/vmmx/alloc.h"
check $? "the copy of vmmx/alloc.h declares a new function over two lines"
fails "a VMMX_API function added to vmmx/alloc.h, its name on the line after VMMX_API" \
	"docs/man/vmmx.3 has no entry for vmmx_alloc_new_thing() (declared in include/vmmx/alloc.h)"
restore include/vmmx/alloc.h

appended docs/man/vmmx.3 '.TP\n.BR vmmx_gone ()\nA function of nothing.\n' \
	"vmmx.3 with an entry for a function no header declares" \
	"docs/man/vmmx.3 lists vmmx_gone(), which no public header declares"

# (c) rendering
if command -v groff >/dev/null 2>&1; then
	printf '.XX an unknown macro\n' >>"$src/docs/man/vmmx.3"
	fails "vmmx.3 with an unknown macro" "docs/man/vmmx.3 renders with warnings:"
	grep -q "macro 'XX' not defined" "$tmp/out"
	check $? "check-man shows groff's warning"
	restore docs/man/vmmx.3
	appended docs/man/vmmx.7 'a stray \\q escape\n' \
		"vmmx.7 with a bad escape" "docs/man/vmmx.7 renders with warnings:"
else
	skip "no groff: vmmx.3 with an unknown macro"
	skip "no groff: check-man shows groff's warning"
	skip "no groff: vmmx.7 with a bad escape"
fi

# Without groff: the names are still checked, the rendering is skipped and
# says so.  PATH is a directory of the other programs check-man runs.
mkdir -p "$tmp/bin"
for t in bash cat grep sed awk sort find xargs tr wc mktemp rm head dirname; do
	p=$(command -v "$t") && ln -s "$p" "$tmp/bin/$t"
done
printf '.XX an unknown macro\n' >>"$src/docs/man/vmmx.3"
PATH=$tmp/bin "$tmp/bin/bash" "$src/.ci/check-man" "$src" >"$tmp/out" 2>&1
st=$?
[ $st -eq 0 ] && grep -q '^check-man: groff is not installed: rendering not checked' "$tmp/out" &&
	grep -q 'rendering not checked (no groff)$' "$tmp/out"
check $? "without groff, check-man says the rendering is not checked and passes on the names"
[ $st -eq 0 ] || sed 's/^/# /' "$tmp/out"
drop_entry docs/man/vmmx.3 vmmx_wake
PATH=$tmp/bin "$tmp/bin/bash" "$src/.ci/check-man" "$src" >"$tmp/out" 2>&1
[ $? -eq 1 ] && grep -q 'no entry for vmmx_wake() ' "$tmp/out"
check $? "without groff, a missing function still fails the check"
restore docs/man/vmmx.3

# Several problems at once are all named, and counted.
drop_entry docs/man/vmmx.7 VMMX_TRACE
drop_entry docs/man/vmmx.3 vmmx_sleep
run
[ $st -eq 1 ] && grep -q 'no entry for VMMX_TRACE ' "$tmp/out" &&
	grep -q 'no entry for vmmx_sleep() ' "$tmp/out" && grep -q '^check-man: 2 problem(s)$' "$tmp/out"
check $? "two pages each missing one name: both named, 2 problems counted"
restore docs/man/vmmx.7
restore docs/man/vmmx.3

run
check $st "check-man passes again on the restored copy"

echo "1..$n"
