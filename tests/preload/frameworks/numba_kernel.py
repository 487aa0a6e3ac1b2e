# SPDX-License-Identifier: MIT
"""numba-cuda, unmodified: cuda.device_array of GIB GiB in all and a @cuda.jit kernel.

Three float32 device arrays of GIB/3 GiB each (cuda.device_array, through
numba's memory manager: cuMemAlloc found by cuda-bindings' cuGetProcAddress
or numba's ctypes dlsym), filled and combined by @cuda.jit kernels; the
result is copied back and summed on the host.  Prints one RESULT line.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

ap = argparse.ArgumentParser()
ap.add_argument("--gib", type=float, default=6.0)
args = ap.parse_args()

np = common.need("numpy")
if not hasattr(np, "row_stack"):
    # numba-cuda's compiler still names np.row_stack, an alias of vstack that NumPy
    # 2.4 removed: without it every @cuda.jit fails natively, before anything of ours
    np.row_stack = np.vstack
numba_cuda = common.need("numba.cuda")
cuda = numba_cuda


@cuda.jit
def fill(a, k):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = ((i * k) % 1009) * 0.5


@cuda.jit
def axpy(out, x, y, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]


def main():
    if not cuda.is_available():
        print("SKIP: numba-cuda sees no GPU")
        sys.exit(common.SKIP)
    n = int(args.gib * (1 << 30) / 3 / 4)
    x = cuda.device_array(n, dtype=np.float32)
    y = cuda.device_array(n, dtype=np.float32)
    out = cuda.device_array(n, dtype=np.float32)
    tpb = 256
    blocks = (n + tpb - 1) // tpb
    fill[blocks, tpb](x, 3)
    fill[blocks, tpb](y, 7)
    axpy[blocks, tpb](out, x, y, 2.0)
    cuda.synchronize()
    host = out.copy_to_host()
    return {"n": n, "sum": float(host.astype(np.float64).sum()),
            "head": [float(v) for v in host[:5]], "tail": float(host[-1])}


common.run(main)
