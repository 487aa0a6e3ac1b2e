# SPDX-License-Identifier: MIT
"""A kernel that reaches weights through a table of their addresses held in
device memory (as a grouped GEMM reads its operands), for vmmx-run with
VMMX_RUN_PLACE_PARK=1 and a device limit the weights exceed.

NW weights of 256 MiB (fp32, 8192 x 8192) are used each step by a chain of
matmuls (so that placement moves them, and parks those sent back); after
each step a raw kernel sums the first 1 MiB elements of three of them,
named only through the table, and the sums are compared with the host's.
The table is built (argv[2]):
  host     on the CPU and copied to the device (cudaMemcpyAsync, host to
           device): vmmx-run reads such copies for addresses, and never
           moves nor parks what they point into;
  default  the same, copied with cudaMemcpy's cudaMemcpyDefault (unified
           addressing: the driver tells host from device memory), read
           the same way;
  device   on the GPU, an element at a time (kernels that write the
           addresses): unseen, so a weight being moved or parked faults
           the kernel; VMMX_RUN_PLACE_WAIT=device is the way to run it.
Prints PASS or FAIL with the steps run; exits 1 on a wrong sum."""
import sys

import cupy as cp
import numpy as np

nw = int(sys.argv[1]) if len(sys.argv) > 1 else 24
way = sys.argv[2] if len(sys.argv) > 2 else "host"
steps = int(sys.argv[3]) if len(sys.argv) > 3 else 8
if way not in ("host", "default", "device"):
    sys.exit(f"cupy_pointers.py: unknown way {way!r} (host, default or device)")
side, k, picked = 8192, 1 << 20, (0, nw // 2, nw - 1)
ws = [cp.random.default_rng(i).standard_normal((side, side), dtype=cp.float32) * 0.01
      for i in range(nw)]
want = [float(cp.asnumpy(ws[i].ravel()[:k]).astype(np.float64).sum()) for i in picked]
if way == "host":
    tab = cp.asarray(np.array([ws[i].data.ptr for i in picked], dtype=np.uint64))
elif way == "default":
    addrs = np.array([ws[i].data.ptr for i in picked], dtype=np.uint64)
    tab = cp.empty(len(picked), dtype=cp.uint64)
    cp.cuda.runtime.memcpy(tab.data.ptr, addrs.ctypes.data, addrs.nbytes,
                           cp.cuda.runtime.memcpyDefault)
else:
    tab = cp.zeros(len(picked), dtype=cp.uint64)
    for j, i in enumerate(picked):
        tab[j] = ws[i].data.ptr
gather = cp.RawKernel(r'''
extern "C" __global__ void gather_sum(const unsigned long long *tab, double *out, long long n)
{
    const float *p = (const float *)tab[blockIdx.x];
    double s = 0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x)
        s += p[i];
    atomicAdd(&out[blockIdx.x], s);
}
''', "gather_sum")
x0 = cp.full((256, side), 0.01, dtype=cp.float32)
bad = 0
for step in range(steps):
    x = x0
    for w in ws:
        x = cp.tanh(x @ w)
    out = cp.zeros(len(picked), dtype=cp.float64)
    gather((len(picked),), (256,), (tab, out, cp.int64(k)))
    got = cp.asnumpy(out)
    bad += sum(abs(g - w) > 1e-9 * max(1.0, abs(w)) for g, w in zip(got, want))
chk = float(cp.asnumpy(x).astype(np.float64).sum())
print(f"{'PASS' if bad == 0 else 'FAIL'}: {nw} weights of 256 MiB, table built on the {way}, "
      f"{steps} steps, {bad} wrong sums; chain checksum {chk:.6g}")
sys.exit(0 if bad == 0 else 1)
