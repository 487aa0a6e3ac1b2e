# SPDX-License-Identifier: MIT
"""Unmodified CuPy past the device limit, for vmmx-run: allocates SIZE_GIB in
512 MiB arrays through CuPy's own memory pool (which calls cudaMalloc), fills
each with a pattern, checks every element on the GPU, then zeroes a 1 GiB
array past the limit with fill(0) (cudaMemsetAsync over memory that may
straddle device and host chunks) and checks it; prints PASS or FAIL."""
import sys

import cupy as cp

size_gib = float(sys.argv[1]) if len(sys.argv) > 1 else 6.0
n = int(size_gib * 2)  # 512 MiB pieces
arrays = []
for i in range(n):
    a = cp.arange(64 << 20, dtype=cp.uint64)  # 512 MiB
    a *= cp.uint64(2654435761)
    a += cp.uint64(i)
    arrays.append(a)
bad = 0
for i, a in enumerate(arrays):
    want = cp.arange(64 << 20, dtype=cp.uint64) * cp.uint64(2654435761) + cp.uint64(i)
    bad += int((a != want).sum())
    del want
z = cp.full(256 << 20, 7, dtype=cp.uint32)  # 1 GiB
z.fill(0)                                    # a memset, split by vmmx-run where needed
zbad = int(cp.count_nonzero(z))
bad += zbad
free, total = cp.cuda.runtime.memGetInfo()
pool = cp.get_default_memory_pool()
print(f"{'PASS' if bad == 0 else 'FAIL'}: {n} x 512 MiB = {n / 2:.1f} GiB through CuPy, {bad} wrong elements ({zbad} after fill(0) of 1 GiB); "
      f"pool {pool.total_bytes() / 2**30:.1f} GiB; memGetInfo free {free / 2**30:.2f} of {total / 2**30:.2f} GiB")
sys.exit(0 if bad == 0 else 1)
