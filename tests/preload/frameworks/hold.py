# SPDX-License-Identifier: MIT
"""Hold all but LEAVE GiB of device 0 until standard input closes (frameworks.sh's reduced memory).

ctypes on libcuda.so.1 only, so it needs no framework.  Prints "held N GiB,
free F GiB" once the memory is taken.
"""
import ctypes
import sys

leave = float(sys.argv[1]) * (1 << 30)
cu = ctypes.CDLL("libcuda.so.1")
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
free, total = ctypes.c_size_t(), ctypes.c_size_t()
if cu.cuInit(0) or cu.cuDeviceGet(ctypes.byref(dev), 0) or \
        cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) or cu.cuCtxSetCurrent(ctx):
    sys.exit("hold: cannot make a CUDA context")
cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
want = int(free.value - leave)
ptrs, step, held = [], 1 << 30, 0
while held + (1 << 20) <= want:
    p = ctypes.c_uint64()
    n = min(step, want - held)
    if cu.cuMemAlloc_v2(ctypes.byref(p), ctypes.c_size_t(n)):
        if step == 1 << 20:
            break
        step >>= 1
        continue
    ptrs.append(p)
    held += n
cu.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total))
print(f"held {held / 2**30:.1f} GiB, free {free.value / 2**30:.1f} GiB", flush=True)
sys.stdin.read()
