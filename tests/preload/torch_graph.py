# SPDX-License-Identifier: MIT
"""An unmodified PyTorch program that replays a CUDA graph, for vmmx-run's
graph watch (graph_gpu.sh runs it): no `import vmmx`.

A bf16 chain of LAYERS DIMxDIM matmul + ReLU layers with random weights
from a fixed seed is captured once in a CUDA graph (torch.cuda.graph) and
replayed REPLAYS times.  Prints the checksum of the replayed output, whether
it equals the same chain run eagerly, and the milliseconds per replay.
"""
import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=24)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--dim", type=int, default=8192)
ap.add_argument("--replays", type=int, default=5)
args = ap.parse_args()

dev = torch.device("cuda")
g = torch.Generator(device=dev)
g.manual_seed(1234)
scale = args.dim ** -0.5 * 2.0
ws = [(torch.randn(args.dim, args.dim, device=dev, dtype=torch.bfloat16, generator=g) * scale)
      for _ in range(args.layers)]
x_static = torch.randn(args.batch, args.dim, device=dev, dtype=torch.bfloat16, generator=g)


def step(x):
    for w in ws:
        x = torch.relu(x @ w)
    return x


with torch.no_grad():
    eager = step(x_static)
    # Warm-up on a side stream, as torch.cuda.graph's documentation asks.
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step(x_static)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        y_static = step(x_static)
    graph.replay()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.replays):
        graph.replay()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / args.replays
print(f"layers {args.layers} batch {args.batch} weights {args.layers * args.dim * args.dim * 2 / 2**30:.1f} GiB "
      f"replays {args.replays + 1} checksum {y_static.float().sum().item()!r} "
      f"eager_equal {bool(torch.equal(y_static, eager))} ms/replay {ms:.2f}")
