# SPDX-License-Identifier: MIT
"""CuPy over libvmmx, on a GPU: a kernel over memory that spilled to host."""
import os
import subprocess
import sys
import textwrap

import pytest

cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
try:
    if cupy.cuda.runtime.getDeviceCount() == 0:
        raise RuntimeError("no device")
except Exception as e:  # noqa: BLE001 - any failure means no usable GPU
    pytest.skip(f"no CUDA device for CuPy: {e}", allow_module_level=True)
if os.environ.get("VMMX_BACKEND", "cuda") != "cuda":
    pytest.skip("CuPy needs VMMX_BACKEND=cuda (a real GPU)", allow_module_level=True)


@pytest.mark.gpu
def test_kernel_over_spilled_memory():
    code = """
        import cupy, vmmx, vmmx.cupy
        vmmx.cupy.enable(device_limit="128MiB")
        a = cupy.arange(48 << 20, dtype=cupy.int32)          # 192 MiB: spills past 128 MiB
        st = vmmx.cupy.stats()["allocator"]
        assert st["host_reserved"] > 0, st
        k = cupy.ElementwiseKernel("int32 x", "int32 y", "y = x * 2 + 1", "twice")
        b = k(a)                                                # reads and writes host chunks
        n = a.size
        assert int(b.sum(dtype=cupy.int64)) == n * (n - 1) + n
        assert int(b[-1]) == 2 * (n - 1) + 1
        print("OK", st["host_reserved"])
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr
