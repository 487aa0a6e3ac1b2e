# SPDX-License-Identifier: MIT
# env.sh - sourced by the interposer's shell tests: the sim backend and the
# build tree's vmmx-run and libvmmx-preload, nothing of the caller's VMMX_*.
# The test sets $tmp first.
for v in $(env | sed -n 's/^\(VMMX_[A-Z_0-9]*\)=.*/\1/p'); do unset "$v"; done
VMMX_BACKEND=sim
VMMX_RUN_PRELOAD="$top_builddir/preload/.libs/libvmmx-preload.so"
# The fake driver also answers to libcuda.so.1, as the real one does, for the
# programs that dlopen it by that name (the interposer knows the driver by it).
mkdir -p "$tmp/cudalib"
ln -sf "$top_builddir/tests/preload/.libs/libvmmxfakecuda.so" "$tmp/cudalib/libcuda.so.1"
LD_LIBRARY_PATH="$tmp/cudalib:$top_builddir/lib/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export VMMX_BACKEND VMMX_RUN_PRELOAD LD_LIBRARY_PATH
run="$top_builddir/tools/vmmx-run"
client="$top_builddir/tests/preload/client"
# Under AddressSanitizer the interposer would have to be preloaded into every
# program, non-instrumented ones (the shell) included, behind the ASan runtime,
# whose start calls the interposed dlsym() before its own interceptors are
# ready (a crash in glibc's dlopen): skip, and say so.
if ldd "$VMMX_RUN_PRELOAD" 2>/dev/null | grep -q 'libasan'; then
	echo "1..0 # SKIP the LD_PRELOAD tests do not run under AddressSanitizer (its runtime calls the interposed dlsym while it starts)"
	exit 0
fi
n=0
check() {
	n=$((n + 1))
	if [ "$1" -eq 0 ]; then echo "ok $n - $2"; else echo "not ok $n - $2"; fi
}
skip() {
	n=$((n + 1))
	echo "ok $n # SKIP $1"
}
