# SPDX-License-Identifier: MIT
"""The ctypes layer runs on libvmmx's sim backend unless VMMX_BACKEND says otherwise.

The process-wide allocators are made once per process, so the settings every
test relies on are given here, before any test runs: a small device limit
makes the fallback to host memory visible on any backend.
"""
import os

import pytest

os.environ.setdefault("VMMX_BACKEND", "sim")


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and a framework")


@pytest.fixture(scope="session")
def vmmx_configured():
    import vmmx
    try:
        vmmx.configure(device_limit="64MiB", host_limit="256MiB", cache_limit="0",
                       chunk_max="4MiB")  # several chunks per buffer: ranges that mix
    except vmmx.VmmxError as e:
        if e.code != vmmx.EBUSY:  # made already by an earlier test: keep its settings
            raise
    return vmmx
