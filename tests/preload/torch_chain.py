# SPDX-License-Identifier: MIT
"""An unmodified PyTorch workload for vmmx-run: no `import vmmx`.

A bf16 chain of LAYERS 8192x8192 matmul + ReLU layers (72 layers: 9 GiB of
weights) with random weights from a fixed seed, BATCH rows, STEPS timed
steps after one warm-up and SETTLE more untimed ones (a placement that
learns, as --placement launch's trial, settles first).  Prints the checksum of the last output and the
milliseconds per step; run it natively and under vmmx-run and compare the
checksums (docs/PRELOAD.md has the commands).  With --graph, the step is
captured once in a CUDA graph (torch.cuda.graph) and the timed steps are
replays of it; the line adds whether the replayed output equals the eager
one (graph_gpu.sh).
"""
import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=72)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--settle", type=int, default=0)
ap.add_argument("--dim", type=int, default=8192)
ap.add_argument("--graph", action="store_true")
args = ap.parse_args()

dev = torch.device("cuda")
g = torch.Generator(device=dev)
g.manual_seed(1234)
scale = args.dim ** -0.5 * 2.0
ws = [(torch.randn(args.dim, args.dim, device=dev, dtype=torch.bfloat16, generator=g) * scale)
      for _ in range(args.layers)]
x0 = torch.randn(args.batch, args.dim, device=dev, dtype=torch.bfloat16, generator=g)


def step():
    x = x0
    for w in ws:
        x = torch.relu(x @ w)
    return x


with torch.no_grad():
    out = step()
    run = step
    if args.graph:
        eager = out
        # Warm-up on a side stream, as torch.cuda.graph's documentation asks.
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step()
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = step()
        graph.replay()

        def run():
            graph.replay()
            return out
    for _ in range(args.settle):
        out = run()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        out = run()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / args.steps
checksum = out.float().sum().item()
if args.graph:
    print(f"graph replays {args.steps + 1} eager_equal {bool(torch.equal(out, eager))}")
free, total = torch.cuda.mem_get_info()
print(f"layers {args.layers} batch {args.batch} weights {args.layers * args.dim * args.dim * 2 / 2**30:.1f} GiB "
      f"checksum {checksum!r} ms/step {ms:.2f} mem_get_info free {free / 2**30:.2f} GiB total {total / 2**30:.2f} GiB "
      f"max_allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
