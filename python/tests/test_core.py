# SPDX-License-Identifier: MIT
"""The vmmx package's ctypes layer over libvmmx (sim backend in CI): loading,
errors carrying vmmx_last_error(), the process-wide allocator, prefetch and
advice by address, statistics, threads."""
import ctypes
import os
import threading

import pytest

import vmmx

MiB = 1 << 20


def _copy_in(ctx, dst, data):
    buf = ctypes.create_string_buffer(data, len(data))
    assert vmmx.library().vmmx_memcpy(ctx, dst, buf, len(data)) == 0


def _copy_out(ctx, src, n):
    buf = ctypes.create_string_buffer(n)
    assert vmmx.library().vmmx_memcpy(ctx, buf, src, n) == 0
    return buf.raw


def test_version_and_path():
    assert vmmx.version() >= (0, 1, 0)
    assert vmmx.library_path()


def test_bad_size_setting_raises_valueerror_naming_the_argument():
    with pytest.raises(ValueError) as e:
        vmmx.configure(device_limit="4 lots")
    assert str(e.value).startswith("vmmx.configure: device_limit '4 lots' is not a size"), e.value


def test_setting_the_library_refuses_raises_in_configure_terms():
    if vmmx.library().vmmx_alloc_global_config(None) != 0:
        pytest.skip("the process-wide allocator exists already")
    vmmx.configure(log="loud")  # not a size: the library judges it when the allocator is made
    with pytest.raises(vmmx.VmmxError) as e:
        vmmx.allocator(0)
    assert e.value.code == vmmx.ECONFIG
    assert "log='loud' (vmmx.configure)" in e.value.detail, e.value.detail
    assert "struct vmmx_config" not in str(e.value), str(e.value)
    vmmx.configure()  # forget the bad one


def test_parse_size_uses_the_library_grammar():
    assert vmmx.parse_size("8GiB") == 8 << 30
    assert vmmx.parse_size("8GB") == 8 * 10 ** 9  # accelerate's decimal form
    assert vmmx.parse_size("512M") == 512 * MiB
    assert vmmx.parse_size("50%", 1000) == 500
    assert vmmx.parse_size(123) == 123
    for bad in ("8 lightyears", ""):  # text the library does not read as a size
        with pytest.raises(ValueError) as e:
            vmmx.parse_size(bad)
        assert str(e.value).startswith(f"vmmx.parse_size: v {bad!r} is not a size"), e.value
    for bad, exc in ((-1, ValueError), (1.5, TypeError)):  # not a size at all
        with pytest.raises(exc) as e:
            vmmx.parse_size(bad)
        assert str(e.value).startswith("vmmx.parse_size: v "), str(e.value)


def test_unknown_setting_name_is_refused_by_the_library():
    with pytest.raises(vmmx.VmmxError) as e:
        vmmx.library()  # loaded
        arr = (ctypes.c_char_p * 2)(b"POLICY=host", None)
        vmmx._check("vmmx_alloc_global_config", vmmx.library().vmmx_alloc_global_config(arr))
    assert e.value.code == vmmx.EINVAL
    assert "POLICY=host" in e.value.detail


def test_malloc_free_and_stats(vmmx_configured):
    v = vmmx_configured
    s0 = v.alloc_stats(0)
    p = v.malloc(1000)
    assert p and p % 512 == 0
    s1 = v.alloc_stats(0)
    assert s1["active_blocks"] == s0["active_blocks"] + 1
    assert s1["requested_bytes"] == s0["requested_bytes"] + 1000
    v.free(p)
    q = v.malloc(1000)
    assert q == p, "a freed block is reused at once"
    v.free(q)
    assert v.alloc_stats(0)["cache_hits"] > s1["cache_hits"]


def test_free_of_foreign_pointer_raises(vmmx_configured):
    with pytest.raises(vmmx.VmmxError) as e:
        vmmx_configured.free(0x1000)
    assert e.value.code == vmmx.EINVAL
    assert "not an address this allocator returned" in e.value.detail
    assert e.value.call == "vmmx_alloc_free"


def test_data_survives_prefetch_both_ways(vmmx_configured):
    v = vmmx_configured
    ctx = v.context(0)
    n = 12 * MiB
    p = v.malloc(n)
    try:
        assert v.owns_segment(p, n)
        assert not v.owns_segment(p + 4096, 4096)
        data = os.urandom(n)
        _copy_in(ctx, p, data)
        v.prefetch(p, n, v.HOST)
        assert v.lookup(p)["loc"] == "host"
        assert v.residency(p, n) == (0, n)
        v.prefetch(p, n)  # to the device
        assert v.lookup(p)["loc"] == "device:0"
        assert _copy_out(ctx, p, n) == data
        st = v.alloc_stats(0)
        assert st["device_allocated"] >= n
    finally:
        v.free(p)


def test_runs_split_a_range_where_its_location_changes(vmmx_configured):
    v = vmmx_configured
    n = 12 * MiB
    p = v.malloc(n)
    try:
        v.prefetch(p, n)  # all on the device: one piece
        assert v.runs(p, n) == [(0, n, "device:0")]
        v.prefetch(p + 4 * MiB, 4 * MiB, v.HOST)  # the middle to host memory
        r = v.runs(p, n)
        assert [loc for _, _, loc in r] == ["device:0", "host", "device:0"], r
        assert r[0][0] == 0 and sum(length for _, length, _ in r) == n
        assert all(a[0] + a[1] == b[0] for a, b in zip(r, r[1:])), r
        assert r[1][1] == v.residency(p, n)[1]
        assert v.runs(p + MiB, 2 * MiB) == [(0, 2 * MiB, "device:0")]
    finally:
        v.free(p)
    x = ctypes.create_string_buffer(64)
    assert v.runs(ctypes.addressof(x), 64) == [(0, 64, None)]


def test_prefetch_errors(vmmx_configured):
    v = vmmx_configured
    x = ctypes.create_string_buffer(64)
    with pytest.raises(vmmx.VmmxError) as e:
        v.prefetch(ctypes.addressof(x), 64)
    assert e.value.code == vmmx.ENOENT and "in no buffer" in e.value.detail
    with pytest.raises(vmmx.VmmxError) as e:
        v.prefetch(ctypes.addressof(x), 64, to=v.DEVICE(7))
    assert e.value.code == vmmx.EINVAL and "device:7" in e.value.detail
    p = v.malloc(4096)
    try:
        with pytest.raises(vmmx.VmmxError) as e:
            v.advise(p, 4096, 42)
        assert e.value.code == vmmx.EINVAL and "advice 42" in e.value.detail
        v.advise(p, 4096, v.ADVISE_HOT)
    finally:
        v.free(p)
    assert v.lookup(ctypes.addressof(x)) is None


def test_read_mostly_comes_back_to_host_without_a_copy(vmmx_configured):
    v = vmmx_configured
    p = v.malloc(16 * MiB)
    ctx = v.context(0)
    try:
        data = bytes(range(256)) * (16 * MiB // 256)
        v.prefetch(p, 16 * MiB, to=v.HOST)
        _copy_in(ctx, p, data)
        v.advise(p, 16 * MiB, v.ADVISE_READ_MOSTLY)
        before = v.context_stats(0)
        v.prefetch(p, 16 * MiB)
        kept = v.context_stats(0)["shadow_bytes"]
        assert kept >= 4 * MiB  # the 4 MiB chunks wholly inside the block
        v.prefetch(p, 16 * MiB, to=v.HOST)
        after = v.context_stats(0)
        assert after["copies_saved"] - before["copies_saved"] == kept // (4 * MiB)
        assert after["copy_bytes_saved"] - before["copy_bytes_saved"] == kept
        assert after["shadow_bytes"] == 0
        assert _copy_out(ctx, p, 16 * MiB) == data
        v.advise(p, 16 * MiB, v.ADVISE_NOT_READ_MOSTLY)
        v.prefetch(p, 16 * MiB)
        assert v.context_stats(0)["shadow_bytes"] == 0
    finally:
        v.free(p)


def test_fallback_to_host_is_visible(vmmx_configured):
    v = vmmx_configured
    ptrs = [v.malloc(24 * MiB) for _ in range(4)]  # 96 MiB past a 64 MiB device limit
    try:
        st = v.alloc_stats(0)
        assert st["host_reserved"] > 0 and st["device_reserved"] > 0
        assert st["fallback_segments"] >= 1
        ctx = v.context_stats(0)
        assert ctx["fallbacks"] >= 1
        assert any(loc["location"] == "host" and loc["held"] > 0 for loc in ctx["locations"])
    finally:
        for p in ptrs:
            v.free(p)
    v.empty_cache(0)
    st = v.alloc_stats(0)
    assert st["segments"] == 0 and st["reserved_bytes"] == 0


def test_out_of_memory_raises(vmmx_configured):
    v = vmmx_configured
    ptrs = []
    with pytest.raises(vmmx.VmmxError) as e:
        for _ in range(64):
            ptrs.append(v.malloc(32 * MiB))
    for p in ptrs:
        v.free(p)
    v.empty_cache(0)
    assert e.value.code == vmmx.ENOMEM
    assert "limit" in e.value.detail


def test_threads(vmmx_configured):
    v = vmmx_configured
    errors = []

    def work(k):
        try:
            for i in range(300):
                p = v.malloc(512 * (1 + (i * 7 + k) % 64))
                v.free(p)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    th = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    assert not errors
    st = v.alloc_stats(0)
    assert st["active_blocks"] == 0
