# SPDX-License-Identifier: MIT
"""Triton, unmodified: out = a * x + y over GIB GiB of float32 tensors (PyTorch's).

Three tensors of GIB/3 GiB each; under vmmx-run --device-limit smaller than
GIB some of them lie in host memory, and the Triton kernel (launched through
dlsym(libcuda, "cuLaunchKernelEx"), which passes through) reads and writes
them there.  Checksums: float64 sums of a strided sample and of the whole
output, compared with the native run.  Prints one RESULT line (common.py).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--gib", type=float, default=6.0)
args = ap.parse_args()

torch = common.need("torch")
triton = common.need("triton")
tl = common.need("triton.language")


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, a, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    y = tl.load(y_ptr + offs, mask=m)
    tl.store(out_ptr + offs, a * x + y, mask=m)


def main():
    if not torch.cuda.is_available():
        print("SKIP: PyTorch sees no GPU")
        sys.exit(common.SKIP)
    n = int(args.gib * (1 << 30) / 3 / 4)
    g = torch.Generator(device="cuda")
    g.manual_seed(7)
    x = torch.rand(n, device="cuda", generator=g)
    y = torch.rand(n, device="cuda", generator=g)
    out = torch.empty_like(x)
    BLOCK = 4096
    axpy[(triton.cdiv(n, BLOCK),)](x, y, out, 2.5, n, BLOCK=BLOCK)
    torch.cuda.synchronize()
    ok = bool(torch.allclose(out[:: 1 << 16], 2.5 * x[:: 1 << 16] + y[:: 1 << 16]))
    return {"n": n, "sample_ok": ok,
            "sum": round(float(out.double().sum()), 0) if args.gib <= 8 else None,
            "sample": [round(float(v), 6) for v in out[:: max(1, n // 7)].tolist()]}


common.run(main)
