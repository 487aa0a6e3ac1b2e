#!/bin/bash
# SPDX-License-Identifier: MIT
# gpu.sh - vmmx-run's GPU measurements (not part of make check): run on the
# GPU machine from a build tree of the dist tarball configured with
# --prefix=PREFIX, after `make install` (libtool refuses to install the
# preload library anywhere but the configured prefix).  Usage:
#   bash tests/preload/gpu.sh PREFIX [PYTHON]
# It builds the CUDA programs of tests/preload both ways, then prints, each
# under a heading: the C program past a real cap (a helper process holding
# the device) natively and under vmmx-run; the same under --device-limit; the
# allocation-cost table; the unmodified PyTorch chain natively and under
# vmmx-run (checksums compared); CuPy past the cap; the placement candidates.
# A threaded program that forks (fork_threads.cu) natively and under
# vmmx-run: every child's cudaMalloc refused, none hung.
# The launch rate of empty kernels natively, under vmmx-run --placement alloc
# (launches not watched), with --launches too (watched only), and under
# vmmx-run's default (launch placement); the PyTorch chain fitting on the
# device the same ways (launch_bench.cu, torch_chain.py).
# The PyTorch chain under --placement launch against --placement alloc.
# GPU_SECTIONS picks some of them (default: all): c fork alloc launch torch
# placement cupy candidates; CANDIDATES replaces the list of policies the last one runs;
# BATCHES the PyTorch chain's batch sizes (default 1 16 256 4096); ALLOC_BATCHES
# those of them that also run under the default placement (default: all); STEPS
# the placement section's timed steps (default 8), SETTLE its untimed steps before them
# (default 8: --placement launch's trial settles).
set -u
sections=" ${GPU_SECTIONS:-c fork alloc launch torch placement cupy candidates} "
want() { case $sections in *" $1 "*) return 0 ;; esac; return 1; }
prefix=${1:?usage: gpu.sh PREFIX [PYTHON]}
py=${2:-/opt/torch/.venv/bin/python}
src=$(cd "$(dirname "$0")" && pwd)
run="$prefix/bin/vmmx-run"
out=${OUT:-/tmp/vmmx-run-gpu}
mkdir -p "$out"
nvcc=${NVCC:-nvcc}
arch=${NVCC_ARCH:--arch=sm_90}
unset VMMX_DEVICE_LIMIT VMMX_POLICY VMMX_BACKEND

echo "== machine"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
$nvcc --version | tail -2
"$py" -c 'import torch, cupy; print("torch", torch.__version__, "cupy", cupy.__version__)' 2>&1

if want c || want fork || want alloc || want launch; then
echo "== build"
$nvcc -O2 $arch -o "$out/gpu_fill_static" "$src/gpu_fill.cu" -lcuda || exit 1
$nvcc -O2 $arch -cudart shared -o "$out/gpu_fill_shared" "$src/gpu_fill.cu" -lcuda || exit 1
$nvcc -O2 $arch -cudart shared -o "$out/alloc_bench" "$src/alloc_bench.cu" || exit 1
$nvcc -O2 $arch -o "$out/alloc_bench_static" "$src/alloc_bench.cu" || exit 1
$nvcc -O2 $arch -cudart shared -o "$out/fork_threads" "$src/fork_threads.cu" || exit 1
$nvcc -O2 $arch -cudart shared -o "$out/launch_bench" "$src/launch_bench.cu" -lcuda || exit 1
$nvcc -O2 $arch -o "$out/launch_bench_static" "$src/launch_bench.cu" -lcuda || exit 1
echo "static runtime: $(ldd "$out/gpu_fill_static" | grep -c cudart) cudart libraries linked (0 expected)"
echo "shared runtime: $(ldd "$out/gpu_fill_shared" | grep cudart)"
fi

# 1. A real cap: a helper holds all but 8 GiB; the program wants 12 GiB (1.5x).
if want c; then
echo "== C program, 12 GiB wanted, 8 GiB left free by a helper process"
mkfifo "$out/hold.fifo"
"$out/gpu_fill_shared" hold 8192 <"$out/hold.fifo" &
holder=$!
exec 9>"$out/hold.fifo"
sleep 20
for b in static shared; do
	"$out/gpu_fill_$b" 12288; echo "native $b: exit $? (3 = out of memory expected)"
	"$run" --report -- "$out/gpu_fill_$b" 12288; echo "vmmx-run $b: exit $? (0 expected)"
done
exec 9>&-
wait $holder
rm -f "$out/hold.fifo"

echo "== C program, 12 GiB wanted, --device-limit 8GiB"
for b in static shared; do
	"$run" --device-limit 8GiB --report -- "$out/gpu_fill_$b" 12288; echo "vmmx-run $b: exit $?"
done
# 64 MiB chunks: each spilled allocation spans 8 host chunks, which one driver memset refuses.
echo "== C program, 12 GiB wanted, --device-limit 8GiB, VMMX_CHUNK_MAX=64MiB"
for b in static shared; do
	VMMX_CHUNK_MAX=64MiB "$run" --device-limit 8GiB -- "$out/gpu_fill_$b" 12288; echo "vmmx-run $b: exit $?"
done

fi
if want fork; then
echo "== a threaded program that forks: children's cudaMalloc, natively and under vmmx-run"
"$out/fork_threads"; echo "native: exit $?"
"$run" --device-limit 8GiB -- "$out/fork_threads"; echo "vmmx-run: exit $? (0 expected)"

fi
if want alloc; then
echo "== allocation cost: cudaMalloc + cudaFree, native against vmmx-run (us per pair)"
for b in alloc_bench alloc_bench_static; do
	"$out/$b" 200 >"$out/$b.native"
	"$run" -- "$out/$b" 200 >"$out/$b.vmmx"
	echo "-- $b"
	join <(grep -v '^#' "$out/$b.native") <(grep -v '^#' "$out/$b.vmmx") 2>/dev/null |
		awk '{ printf "%12d B  native %9.2f us  vmmx-run %9.2f us  ratio %.3f\n", $1, $2, $4, $4 / $2 }' ||
		paste "$out/$b.native" "$out/$b.vmmx"
done

fi
if want launch; then
# Target: watching costs under 1 us per launch (the --launches column less
# the native one); passed straight through (vmmx-run without it), nothing.
echo "== launch cost: empty kernels, native against vmmx-run --placement alloc, with --launches, and the default (us per launch)"
for b in launch_bench launch_bench_static; do
	"$out/$b" 200 >"$out/$b.native"
	"$run" --placement alloc -- "$out/$b" 200 >"$out/$b.off"
	"$run" --placement alloc --launches --report -- "$out/$b" 200 >"$out/$b.on" 2>"$out/$b.report"
	"$run" -- "$out/$b" 200 >"$out/$b.default"
	echo "-- $b"
	join <(grep -v '^#' "$out/$b.native") <(grep -v '^#' "$out/$b.off") |
		join - <(grep -v '^#' "$out/$b.on") | join - <(grep -v '^#' "$out/$b.default") |
		awk '{ printf "%-26s native %7.3f  alloc %7.3f  --launches %7.3f  default %7.3f  cost %+.3f us\n", $1, $3, $5, $7, $9, $9 - $3 }'
	grep -A1 '^  launches' "$out/$b.report"
done
# Target: at most 2% slower than native when everything fits.
echo "== PyTorch chain fitting on the device (batch 16, 30 steps): native, vmmx-run --placement alloc, the default"
for r in 1 2 3; do
	"$py" "$src/torch_chain.py" --batch 16 --steps 30 2>&1 | tail -1 | sed 's/^/native : /'
	"$run" --placement alloc -- "$py" "$src/torch_chain.py" --batch 16 --steps 30 2>&1 | tail -1 | sed 's/^/alloc  : /'
	"$run" --report-file "$out/torch.launch.report" -- "$py" "$src/torch_chain.py" --batch 16 --steps 30 2>&1 |
		tail -1 | sed 's/^/default: /'
done
grep -A1 '^  launches' "$out/torch.launch.report"

fi
if want torch; then
echo "== PyTorch: bf16 chain of 72 8192x8192 layers (9 GiB), unmodified"
BATCHES_=${BATCHES:-1 16 256 4096} steps=${STEPS:-8}
for batch in $BATCHES_; do
	"$py" "$src/torch_chain.py" --batch $batch >"$out/torch.native.$batch" 2>&1
	echo "native    : $(cat "$out/torch.native.$batch")"
	"$run" --device-limit 6GiB --report-file "$out/torch.report.$batch" -- \
		"$py" "$src/torch_chain.py" --batch $batch >"$out/torch.vmmx.$batch" 2>&1
	echo "vmmx 6GiB : $(cat "$out/torch.vmmx.$batch")"
	a=$(sed -n 's/.*checksum \([^ ]*\).*/\1/p' "$out/torch.native.$batch")
	b=$(sed -n 's/.*checksum \([^ ]*\).*/\1/p' "$out/torch.vmmx.$batch")
	[ -n "$a" ] && [ "$a" = "$b" ] && echo "batch $batch: checksums equal" || echo "batch $batch: CHECKSUMS DIFFER ($a vs $b)"
done
cat "$out/torch.report.16" 2>/dev/null
echo "-- native capped (set_per_process_memory_fraction would be needed; a helper holding all but 6 GiB):"
mkfifo "$out/hold.fifo"
"$out/gpu_fill_shared" hold 7168 <"$out/hold.fifo" &
holder=$!
exec 9>"$out/hold.fifo"
sleep 20
"$py" "$src/torch_chain.py" --batch 16 2>&1 | tail -1
exec 9>&-
wait $holder
rm -f "$out/hold.fifo"

fi
if want placement; then
# Targets: batch 4096 within 1.5x the floor (about 64 ms); batches 1 and 16
# not slower than placement by allocation; checksums equal to native.
echo "== PyTorch chain, 6 GiB limit: --placement launch (the default) against --placement alloc"
# The floor: the larger of native's time and the weights past the limit
# crossing the link once a step at the pinned copy rate measured here.
rate=$("$py" -c 'import torch, time
h = torch.empty(1 << 32, dtype=torch.uint8, pin_memory=True); d = torch.empty_like(h, device="cuda")
d.copy_(h); torch.cuda.synchronize(); t = time.perf_counter()
for _ in range(3): d.copy_(h, non_blocking=True)
torch.cuda.synchronize(); print("%.2f" % (3 * h.numel() / (time.perf_counter() - t) / 1e9))')
echo "pinned host-to-device copies: $rate GB/s"
ms_of() { sed -n 's/.*ms\/step \([0-9.]*\).*/\1/p' "$1"; }
BATCHES_=${BATCHES:-1 16 256 4096} steps="${STEPS:-8} --settle ${SETTLE:-8}"
for batch in $BATCHES_; do
	"$py" "$src/torch_chain.py" --batch $batch --steps $steps >"$out/pl.native.$batch" 2>&1
	case " ${ALLOC_BATCHES-$BATCHES_} " in *" $batch "*)
	"$run" --device-limit 6GiB --placement alloc -- "$py" "$src/torch_chain.py" --batch $batch --steps $steps >"$out/pl.alloc.$batch" 2>&1 ;;
	*) echo "ms/step 0 (not run: ALLOC_BATCHES)" >"$out/pl.alloc.$batch" ;;
	esac
	rm -f "$out/pl.report.$batch" "$out/pl.trace.$batch"
	"$run" --device-limit 6GiB --placement launch --report-file "$out/pl.report.$batch" \
		--trace "$out/pl.trace.$batch" -- \
		"$py" "$src/torch_chain.py" --batch $batch --steps $steps >"$out/pl.launch.$batch" 2>&1
	echo "batch $batch native : $(tail -1 "$out/pl.native.$batch")"
	echo "batch $batch alloc  : $(tail -1 "$out/pl.alloc.$batch")"
	echo "batch $batch launch : $(tail -1 "$out/pl.launch.$batch")"
	awk -v n="$(ms_of "$out/pl.native.$batch")" -v a="$(ms_of "$out/pl.alloc.$batch")" \
		-v l="$(ms_of "$out/pl.launch.$batch")" -v r="$rate" -v b=$batch 'BEGIN {
		x = (72 * 8192 * 8192 * 2 - 6 * 2^30) / (r * 1e9) * 1e3; f = n > x ? n : x
		if (n > 0 && l > 0 && f > 0) {
			printf "batch %d floor %.1f ms: launch %.2fx native %.2fx floor", b, f, l / n, l / f
			if (a > 0) printf "; alloc %.2fx native %.2fx floor", a / n, a / f
			printf "\n" } }'
	a=$(sed -n 's/.*checksum \([^ ]*\).*/\1/p' "$out/pl.native.$batch")
	b=$(sed -n 's/.*checksum \([^ ]*\).*/\1/p' "$out/pl.launch.$batch")
	[ -n "$a" ] && [ "$a" = "$b" ] && echo "batch $batch: checksums equal" || echo "batch $batch: CHECKSUMS DIFFER ($a vs $b)"
	grep -A4 '^  launches' "$out/pl.report.$batch"
	# the replay's prediction against the step time just measured
	"$prefix/bin/vmmx-place" --replay "$out/pl.trace.$batch" --pcie "$rate" \
		>"$out/pl.replay.$batch" 2>&1 || echo "batch $batch: replay failed: $(tail -1 "$out/pl.replay.$batch")"
	sed 's/^/  replay: /' "$out/pl.replay.$batch" | head -${REPLAY_LINES:-30}
done

fi
if want cupy; then
echo "== CuPy: 6 GiB past a 4 GiB device limit, unmodified"
"$run" --device-limit 4GiB --report -- "$py" "$src/cupy_fill.py" 6; echo "exit $?"
echo "== CuPy: the same with VMMX_CHUNK_MAX=64MiB (the 1 GiB array zeroed spans 16 host chunks)"
VMMX_CHUNK_MAX=64MiB "$run" --device-limit 4GiB -- "$py" "$src/cupy_fill.py" 6; echo "exit $?"
echo "== CuPy, parked (VMMX_RUN_PLACE_PARK=1): a kernel reading weights through a table of their addresses copied to the device"
VMMX_RUN_PLACE_PARK=1 "$run" --device-limit 4GiB --report -- "$py" "$src/cupy_pointers.py" 24 host; echo "exit $?"
echo "== CuPy, parked: the same table copied with cudaMemcpyDefault (unified addressing)"
VMMX_RUN_PLACE_PARK=1 "$run" --device-limit 4GiB --report -- "$py" "$src/cupy_pointers.py" 24 default; echo "exit $?"
echo "== CuPy: a table the GPU writes (unseen) under VMMX_RUN_PLACE_WAIT=device (no mover, every move after a device sync)"
VMMX_RUN_PLACE_WAIT=device "$run" --device-limit 4GiB --report -- "$py" "$src/cupy_pointers.py" 24 device; echo "exit $?"
fi

if want candidates; then
# device-first:reserve= is "largest allocations to the host first" in its
# static form: big buffers (weights) spill before the small, hot ones
# (activations, cuBLAS's workspace) find the device full.
echo "== placement candidates on the PyTorch chain (6 GiB limit, batch 1, 16 and 256)"
for pol in ${CANDIDATES:-device-first device-first:reserve=64MiB device-first:reserve=128MiB \
	device-first:reserve=256MiB device-first:reserve=512MiB device-first:reserve=1GiB lru host}; do
	for batch in 1 16 256; do
		printf '%-30s batch %4d: ' "$pol" $batch
		"$run" --device-limit 6GiB --policy $pol -- "$py" "$src/torch_chain.py" --batch $batch --steps 3 2>&1 | tail -1
	done
done
fi
