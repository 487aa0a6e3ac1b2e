#!/bin/sh
# SPDX-License-Identifier: MIT
# The checksum kernel of the cuda backend is hand-written PTX embedded in
# vmm/cuda.c (no nvcc at build time): its lines, between the PTX BEGIN and
# PTX END markers, are taken out of the C strings and given to ptxas, which
# must accept them for an H100 (sm_90) and an sm_60 base.  Skipped where no
# ptxas is installed ($PTXAS, then PATH, then /usr/local/cuda/bin).
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptx-sh.XXXXXX") || exit 1
trap 'rm -rf "$tmp"' EXIT

ptxas=${PTXAS:-$(command -v ptxas 2>/dev/null)}
[ -n "$ptxas" ] || ptxas=/usr/local/cuda/bin/ptxas
if [ ! -x "$ptxas" ]; then
	echo "1..0 # SKIP no ptxas (the CUDA toolkit) to check the checksum kernel's PTX"
	exit 0
fi

# One C string a line: "text\n" and maybe a comment after it.
sed -n '/PTX BEGIN/,/PTX END/p' "$top_srcdir/vmm/cuda.c" |
	sed -n 's/^[[:space:]]*"\(.*\)\\n".*$/\1/p' >"$tmp/k.ptx"

echo "1..3"
grep -q '^\.visible \.entry vmm_checksum(' "$tmp/k.ptx" && grep -q 'atom\.global\.add\.u64' "$tmp/k.ptx"
st=$?
[ $st -eq 0 ] && echo "ok 1 - the kernel's PTX is found in vmm/cuda.c" ||
	echo "not ok 1 - the kernel's PTX is found in vmm/cuda.c"
n=1
for arch in sm_90 sm_60; do
	n=$((n + 1))
	if [ $st -ne 0 ]; then
		echo "not ok $n - ptxas -arch=$arch (no PTX)"
	elif "$ptxas" -arch=$arch "$tmp/k.ptx" -o "$tmp/k.cubin" >"$tmp/err" 2>&1; then
		echo "ok $n - ptxas -arch=$arch accepts the checksum kernel"
	elif grep -q "is not defined for option 'gpu-name'" "$tmp/err"; then
		echo "ok $n # SKIP this ptxas has no $arch"
	else
		echo "not ok $n - ptxas -arch=$arch accepts the checksum kernel"
		sed 's/^/# /' "$tmp/err"
	fi
done
