#!/bin/sh
# SPDX-License-Identifier: MIT
# quickstart.sh - set up, build and run libvmmx from a fresh clone (Debian/Ubuntu).
#
#   ./quickstart.sh demo    install what is missing, build, run the demo (the main job)
#   ./quickstart.sh test    install what is missing, build, run the test suite
#
# Packages are installed with apt-get when missing (as root, or through sudo).
# The build lives in ./build; configure options can be passed in CONFIGURE_FLAGS.
set -eu
cd "$(dirname "$0")"
what=${1:-demo}
case $what in
demo|test) ;;
*) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac

pkgs="build-essential autoconf automake libtool pkg-config liburcu-dev zlib1g-dev"
missing=
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing="$missing $p"
done
if [ -n "$missing" ]; then
	echo "quickstart: installing$missing"
	if [ "$(id -u)" = 0 ]; then sudo=; else sudo=sudo; fi
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi

[ -x configure ] && [ configure -nt configure.ac ] || autoreconf -fi
mkdir -p build
cd build
[ -f Makefile ] || ../configure ${CONFIGURE_FLAGS:-}
jobs=$(nproc 2>/dev/null || echo 2)
make -s -j"$jobs"
case $what in
demo) exec ./tools/vmmx-demo ;;
test) exec make -s -j"$jobs" check ;;
esac
