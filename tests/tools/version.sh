#!/bin/sh
# SPDX-License-Identifier: MIT
# --version on every tool: "NAME (libvmmx) VERSION" on stdout, the version
# configure was given, nothing on stderr, exit 0, whatever else is on the
# command line after it is not looked at.
tmp=$(mktemp -d "${TMPDIR:-/tmp}/vmmx-version-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

. "$top_srcdir/tests/tools/tap.sh"

version=$(sed -n 's/^#define PACKAGE_VERSION "\(.*\)"$/\1/p' "$top_builddir/config.h")
for t in vmmx-info vmmx-place vmmx-bench vmmx-run vmmx-demo vmmx-plot; do
	if [ "$t" = vmmx-plot ] && [ -z "$py" ]; then
		skip "$t --version: no python3"
		continue
	fi
	"$top_builddir/tools/$t" --version >"$tmp/out" 2>"$tmp/err"
	st=$?
	[ $st -eq 0 ] && [ "$(cat "$tmp/out")" = "$t (libvmmx) $version" ] && test ! -s "$tmp/err"
	check $? "$t --version prints \"$t (libvmmx) $version\" and exits 0"
	[ $st -eq 0 ] || echo "# exit status $st"
done

echo "1..$n"
