# SPDX-License-Identifier: MIT
"""An unmodified PyTorch workload for vmmx-run: no `import vmmx`.

A bf16 chain of LAYERS 8192x8192 matmul + ReLU layers (72 layers: 9 GiB of
weights) with random weights from a fixed seed, BATCH rows, STEPS timed
steps after one warm-up.  Prints the checksum of the last output and the
milliseconds per step; run it natively and under vmmx-run and compare the
checksums (docs/PRELOAD.md has the commands).
"""
import argparse
import time

import torch

ap = argparse.ArgumentParser()
ap.add_argument("--layers", type=int, default=72)
ap.add_argument("--batch", type=int, default=16)
ap.add_argument("--steps", type=int, default=3)
ap.add_argument("--dim", type=int, default=8192)
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
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        out = step()
    torch.cuda.synchronize()
    ms = (time.perf_counter() - t0) * 1e3 / args.steps
checksum = out.float().sum().item()
free, total = torch.cuda.mem_get_info()
print(f"layers {args.layers} batch {args.batch} weights {args.layers * args.dim * args.dim * 2 / 2**30:.1f} GiB "
      f"checksum {checksum!r} ms/step {ms:.2f} mem_get_info free {free / 2**30:.2f} GiB total {total / 2**30:.2f} GiB "
      f"max_allocated {torch.cuda.max_memory_allocated() / 2**30:.2f} GiB")
