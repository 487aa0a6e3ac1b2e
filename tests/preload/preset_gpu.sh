#!/bin/bash
# SPDX-License-Identifier: MIT
# preset_gpu.sh - every workload of docs/PERFORMANCE.md's preset table, under
# vmmx-run's default and under `vmmx-run --preset inference`, each beside
# native and the floor of the same run (the GPU machine; not part of make
# check).  Run from the build tree of the dist tarball configured with
# --prefix=PREFIX, after `make install`:
#   bash tests/preload/preset_gpu.sh PREFIX [PYTHON]
# Sections (PRESET_SECTIONS, default all: infer fits train chain frameworks):
#   infer       the Llama-2-7B shape (13.5 GB bf16) at 1.5x the cap, prefill
#               and decode: native, the default, the preset, accelerate's
#               device_map="auto", the floor (vmmx_tools.bench)
#   fits        the same model at 0.9x (it fits under the cap): native, the
#               default, the preset; then the preset with VMMX_RUN_CACHE_FIRST=1
#   train       the 0.95 B Llama, fused AdamW, at 1.5x: native, the default,
#               the preset, the floor
#   chain       the PyTorch matmul chain (9 GiB) under a 6 GiB limit at
#               batch 4096, 16 and 1: native and the preset, checksums compared
#   frameworks  JAX (four allocator modes) and Triton under the preset
#               (frameworks.sh)
# HF_DIR keeps the saved models between calls (default /tmp/vmmx-preset-hf);
# OUT the logs (default /tmp/vmmx-preset-gpu).
set -u
sections=" ${PRESET_SECTIONS:-infer fits train chain frameworks} "
want() { case $sections in *" $1 "*) return 0 ;; esac; return 1; }
prefix=${1:?usage: preset_gpu.sh PREFIX [PYTHON]}
py=${2:-python3}
src=$(cd "$(dirname "$0")" && pwd)
run="$prefix/bin/vmmx-run"
out=${OUT:-/tmp/vmmx-preset-gpu}
hf=${HF_DIR:-/tmp/vmmx-preset-hf}
[ -x "$run" ] || { echo "preset_gpu.sh: no $run: make install first"; exit 2; }
mkdir -p "$out" "$hf"
for v in $(env | sed -n 's/^\(VMMX_[A-Z_0-9]*\)=.*/\1/p'); do unset "$v"; done
site=$(ls -d "$prefix"/lib/python3*/site-packages 2>/dev/null | head -1)
export PYTHONPATH="$site${PYTHONPATH:+:$PYTHONPATH}"

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$py" -c 'import torch, transformers; print("torch", torch.__version__, "transformers", transformers.__version__)'

bench() { # the bench's options; the vmmx-run columns run $run
	"$py" -m vmmx_tools.bench --hf-dir "$hf" --vmmx-run "$run" --timeout 300 "$@"
}
if want infer; then
echo "== 7B inference at 1.5x the cap: the default, the preset, accelerate"
bench --workload hf-infer --ratios 1.5 --hf-new-tokens 16 --warmup 4 --steps 12 \
	--columns native,vmmx-run,vmmx-run-inference,accelerate,floor
fi
if want fits; then
echo "== 7B inference at 0.9x (fits under the cap): the default and the preset (target: 1.02x native)"
bench --workload hf-infer --ratios 0.9 --hf-new-tokens 16 --warmup 4 --steps 12 \
	--columns native,vmmx-run,vmmx-run-inference,floor
echo "== the same, the preset with VMMX_RUN_CACHE_FIRST=1"
VMMX_RUN_CACHE_FIRST=1 bench --workload hf-infer --ratios 0.9 --hf-new-tokens 16 --warmup 4 \
	--steps 12 --columns native,vmmx-run-inference,floor
fi
if want train; then
echo "== 0.95 B training, fused AdamW, at 1.5x the cap: the default and the preset"
bench --workload hf-train --ratios 1.5 --hf-optim fused --warmup 10 --steps 8 \
	--columns native,vmmx-run,vmmx-run-inference,floor
fi

if want chain; then
echo "== PyTorch chain, 6 GiB limit: native and the preset (settled: 6 steps after 26)"
ms_of() { sed -n 's/.*ms\/step \([0-9.]*\).*/\1/p' "$1"; }
sum_of() { sed -n 's/.*checksum \([^ ]*\).*/\1/p' "$1"; }
for batch in 4096 16 1; do
	"$py" "$src/torch_chain.py" --batch $batch --steps 6 --settle 4 >"$out/chain.native.$batch" 2>&1
	rm -f "$out/chain.report.$batch"
	"$run" --preset inference --device-limit 6GiB --report-file "$out/chain.report.$batch" -- \
		"$py" "$src/torch_chain.py" --batch $batch --steps 6 --settle 26 >"$out/chain.preset.$batch" 2>&1
	n=$(ms_of "$out/chain.native.$batch") p=$(ms_of "$out/chain.preset.$batch")
	echo "batch $batch: native ${n:-failed} ms, the preset ${p:-failed} ms$(awk -v n="$n" -v p="$p" \
		'BEGIN { if (n > 0 && p > 0) printf " (%.2fx native)", p / n }')"
	a=$(sum_of "$out/chain.native.$batch") b=$(sum_of "$out/chain.preset.$batch")
	[ -n "$a" ] && [ "$a" = "$b" ] && echo "batch $batch: checksums equal" ||
		{ echo "batch $batch: CHECKSUMS DIFFER ($a vs $b)"; tail -3 "$out/chain.preset.$batch"; }
	grep -E '^  (placement|trial|parking)' "$out/chain.report.$batch"
done
fi

if want frameworks; then
echo "== JAX and Triton under the preset"
CLIENTS="jax triton" TIMEOUT=90 RUN_OPTS="--preset inference" OUT="$out/frameworks" \
	bash "$src/frameworks.sh" "$py" | tail -8
fi
