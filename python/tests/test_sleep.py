# SPDX-License-Identifier: MIT
"""Sleep and wake through the ctypes layer (sim backend in CI, no torch):
tags from the thread's scope, offload keeps the data at the same address,
discard gives the memory back, per-tag statistics, a library error.  The
arguments the package refuses are in test_core_args.py; the PyTorch side
(vmmx.torch.region/sleep/wake) runs on the GPU: test_torch_sleep.py."""
import pytest

import vmmx
from test_core import MiB, _copy_in, _copy_out  # the tests' directory is on sys.path


def _tagged(tag, size):
    vmmx.tag_scope(tag)
    try:
        return vmmx.malloc(size)
    finally:
        vmmx.tag_scope(None)


def test_offload_keeps_data_at_the_same_address(vmmx_configured):
    ctx = vmmx.context()
    p = _tagged("py-train", 6 * MiB)
    data = bytes(range(256)) * (6 * MiB // 256)
    _copy_in(ctx, p, data)
    st = vmmx.sleep_stats("py-train")
    assert st["buffers"] == 1 and st["asleep_bytes"] == 0 and st["device_bytes"] >= 6 * MiB
    assert vmmx.sleep("py-train") >= 6 * MiB
    st = vmmx.sleep_stats("py-train")
    assert st["device_bytes"] == 0 and st["offloaded_bytes"] == st["asleep_bytes"] >= 6 * MiB
    assert st["stash_bytes"] == st["asleep_bytes"]  # the contents wait in the host stash
    assert vmmx.lookup(p) is None  # unmapped while asleep
    assert vmmx.sleep("py-train") == 0  # asleep already
    assert vmmx.wake(["py-train"]) >= 6 * MiB
    assert vmmx.lookup(p)["loc"] == "device:0"
    assert _copy_out(ctx, p, len(data)) == data
    st = vmmx.sleep_stats("py-train")
    assert st["asleep_bytes"] == 0 and st["stash_bytes"] >= 6 * MiB  # kept for the next one
    assert vmmx.sleep_release("py-train") == st["stash_bytes"]
    assert vmmx.sleep_stats("py-train")["stash_bytes"] == 0
    assert vmmx.sleep_release("py-train") == 0
    vmmx.free(p)


def test_discard_gives_the_memory_back_and_wake_restores_the_size(vmmx_configured):
    ctx = vmmx.context()
    p = _tagged("py-kv", 8 * MiB)
    before = vmmx.sleep_stats("py-kv")
    assert vmmx.sleep(["py-kv"], offload=False) == before["bytes"]
    st = vmmx.sleep_stats("py-kv")
    assert st["device_bytes"] == st["host_bytes"] == st["offloaded_bytes"] == 0
    assert st["asleep_bytes"] == before["bytes"]
    assert vmmx.lookup(p) is None  # unmapped while asleep
    assert vmmx.wake("py-kv") == before["bytes"]
    data = b"\x5a" * (8 * MiB)
    _copy_in(ctx, p, data)
    assert _copy_out(ctx, p, len(data)) == data
    vmmx.free(p)


def test_other_tags_and_untagged_memory_stay_awake(vmmx_configured):
    ctx = vmmx.context()
    a, b = _tagged("py-a", 4 * MiB), vmmx.malloc(4 * MiB)
    data = b"\xa5" * (4 * MiB)
    _copy_in(ctx, b, data)
    untagged = vmmx.sleep_stats("")
    assert vmmx.sleep("py-a") > 0
    assert vmmx.sleep_stats("") == untagged  # nothing untagged moved or slept
    assert _copy_out(ctx, b, len(data)) == data
    assert vmmx.sleep_stats("py-b")["buffers"] == 0
    assert vmmx.wake() > 0  # every tag
    assert vmmx.sleep_stats("py-a")["asleep_bytes"] == 0
    vmmx.free(a)
    vmmx.free(b)


def test_library_errors_raise_vmmxerror():
    with pytest.raises(vmmx.VmmxError) as e:
        vmmx._check("vmmx_sleep", vmmx.library().vmmx_sleep(None, None, 0, 0, None, None))
    assert e.value.code == vmmx.EINVAL and "ctx is NULL" in e.value.detail
