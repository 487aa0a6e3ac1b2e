#!/bin/sh
# SPDX-License-Identifier: MIT
# libvmmx.so exports vmmx_* functions only: no vmm_*, no vmmx__* internals.
lib="$top_builddir/lib/.libs/libvmmx.so"
# vmmx.h and the headers it includes (the framework allocator's)
hdr="$top_srcdir/include/vmmx.h $top_srcdir/include/vmmx/alloc.h"
NM=${NM:-nm}
if [ ! -f "$lib" ]; then
	echo "1..0 # SKIP no shared library built ($lib)"
	exit 0
fi
exports=$($NM -D --defined-only "$lib" | awk '$2 ~ /^[TDBRW]$/ { print $3 }' | sed 's/@.*//' | sort -u)
# shellcheck disable=SC2086 # $hdr is a list
declared=$(sed -n 's/^VMMX_API [^(]*[ *]\(vmmx_[a-z_0-9]*\)(.*/\1/p' $hdr | sort -u)
echo "1..4"
bad=$(echo "$exports" | grep -v '^vmmx_[a-z]' || true)
if [ -z "$bad" ]; then echo "ok 1 - libvmmx.so exports only vmmx_* names"; else echo "not ok 1 - libvmmx.so exports only vmmx_* names"; echo "$bad" | sed 's/^/# unexpected: /'; fi
missing=$(echo "$declared" | while read -r f; do echo "$exports" | grep -qx "$f" || echo "$f"; done)
if [ -z "$missing" ]; then echo "ok 2 - every function declared in vmmx.h is exported"; else echo "not ok 2 - every function declared in vmmx.h is exported"; echo "$missing" | sed 's/^/# missing: /'; fi
extra=$(echo "$exports" | while read -r f; do echo "$declared" | grep -qx "$f" || echo "$f"; done)
if [ -z "$extra" ]; then echo "ok 3 - every export is declared in vmmx.h"; else echo "not ok 3 - every export is declared in vmmx.h"; echo "$extra" | sed 's/^/# undeclared: /'; fi
n=$(echo "$declared" | grep -c .)
if [ "$n" -ge 20 ]; then echo "ok 4 - vmmx.h declares $n functions"; else echo "not ok 4 - vmmx.h declares $n functions (parse failed?)"; fi
