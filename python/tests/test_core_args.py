# SPDX-License-Identifier: MIT
"""Arguments are checked before ctypes sees them (it cut, wrapped and truncated
silently): TypeError for a wrong type, ValueError for a value out of range,
each naming the function and the argument, and nothing done by a refused call.

Runs after test_core.py (file order), on the same process-wide allocator: the
settings that need a fresh one are checked in child processes."""
import ctypes
import os

import pytest

import vmmx
from subproc import child
from vmmx_tools import bench

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def refused(exc, fn, arg, call, *args, **kw):
    """call(*args, **kw) raises exc whose message names fn and arg; the allocator's
    statistics (allocations, frees, bytes, segments) are unchanged by it."""
    before = vmmx.alloc_stats(0)
    with pytest.raises(exc) as e:
        call(*args, **kw)
    msg = str(e.value)
    assert type(e.value) is exc, f"{type(e.value).__name__}: {msg}"
    assert msg.startswith(fn + ": "), msg
    assert arg in msg, msg
    assert vmmx.alloc_stats(0) == before, "a refused call changed the allocator"
    return msg




# -- the defects, one test each


def test_malloc_size_past_size_max_is_refused(vmmx_configured):
    # ctypes wrapped 2**64 to 0: malloc returned None as a success
    msg = refused(ValueError, "vmmx.malloc", "size", vmmx.malloc, 2 ** 64)
    assert "SIZE_MAX" in msg


def test_malloc_float_size_is_refused(vmmx_configured):
    # ctypes cut 1.9 to 1: one byte allocated
    msg = refused(TypeError, "vmmx.malloc", "size", vmmx.malloc, 1.9)
    assert msg == "vmmx.malloc: size must be an int, not float"
    refused(TypeError, "vmmx.malloc", "size", vmmx.malloc, 4096.0)  # integral: still a float


CONFIGURED = """
    import json, vmmx
    vmmx.configure(device_limit="64MiB", {good})
    try:
        vmmx.configure({bad})
        err = None
    except Exception as e:
        err = [type(e).__name__, str(e)]
    p = vmmx.malloc(4096)
    dev = [l for l in vmmx.context_stats(0)["locations"] if l["location"] == "device:0"][0]
    print(json.dumps(dict(err=err, limit=dev["limit"], loc=vmmx.lookup(p)["loc"])))
"""


def test_configure_float_device_limit_is_refused_and_keeps_the_settings():
    # device_limit=1.5 was written as VMMX_DEVICE_LIMIT=1: a one-byte device
    out = child(CONFIGURED.format(good="", bad="device_limit=1.5"))
    assert out["err"] == ["TypeError", "vmmx.configure: device_limit must be an int or a str "
                                       "such as '8GiB', not float"], out
    assert out["limit"] == 64 * MiB and out["loc"] == "device:0", out


def test_policy_with_a_nul_byte_is_refused_and_keeps_the_settings():
    # 'host\x00junk' reached C as "host": every buffer placed in host memory
    out = child(CONFIGURED.format(good="policy='device-first'", bad="policy='host\\x00junk'"))
    assert out["err"] and out["err"][0] == "ValueError", out
    assert out["err"][1].startswith("vmmx.configure: policy contains a NUL byte"), out
    assert out["loc"] == "device:0", out


def test_lookup_device_past_int_max_is_refused(vmmx_configured):
    # ctypes kept the low 32 bits of 2**40: device 0's chunk came back
    p = vmmx.malloc(4096)
    try:
        msg = refused(ValueError, "vmmx.lookup", "device", vmmx.lookup, p, device=2 ** 40)
        assert "INT_MAX" in msg and str(2 ** 40) in msg
    finally:
        vmmx.free(p)


def test_prefetch_str_stream_is_refused_and_moves_nothing(vmmx_configured):
    # a str was passed as its own address: a stream the driver never made
    p = vmmx.malloc(4 * MiB)
    try:
        vmmx.prefetch(p, 4 * MiB, vmmx.HOST)
        msg = refused(TypeError, "vmmx.prefetch", "stream", vmmx.prefetch, p, 4 * MiB,
                      stream="s")
        assert msg.endswith("not str"), msg
        assert vmmx.residency(p, 4 * MiB) == (0, 4 * MiB), "moved though refused"
    finally:
        vmmx.free(p)


def test_parse_size_text_with_a_nul_byte_is_refused():
    # C read "8GiB" and ignored the rest
    refused_nul = "vmmx.parse_size: v contains a NUL byte"
    with pytest.raises(ValueError) as e:
        vmmx.parse_size("8GiB\x00junk")
    assert str(e.value).startswith(refused_nul), str(e.value)


def test_advice_past_int_is_refused(vmmx_configured):
    # 2**32 + 1 became 1, ADVISE_HOT
    p = vmmx.malloc(4096)
    try:
        refused(ValueError, "vmmx.advise", "advice", vmmx.advise, p, 4096, 2 ** 32 + 1)
    finally:
        vmmx.free(p)


# -- the general rule, every public function of the ctypes layer

BIG_PTR = 1 << 8 * ctypes.sizeof(ctypes.c_void_p)
BAD_SIZES = [(True, TypeError), (1.0, TypeError), ("4096", TypeError), (None, TypeError),
             (-1, ValueError), (1 << 8 * ctypes.sizeof(ctypes.c_size_t), ValueError)]
BAD_DEVICES = [(True, TypeError), (0.0, TypeError), ("0", TypeError), (None, TypeError),
               (-1, ValueError), (2 ** 31, ValueError)]
BAD_PTRS = [(True, TypeError), (4096.0, TypeError), ("0x1000", TypeError), (b"x", TypeError),
            (None, TypeError), (-1, ValueError), (BIG_PTR, ValueError)]
BAD_STREAMS = [("s", TypeError), (1.5, TypeError), (True, TypeError), (object(), TypeError),
               (-1, ValueError), (BIG_PTR, ValueError)]


def _cases():
    # (function, argument, value, exception, call(p, value)): p is a live 4 KiB block
    out = []

    def add(fn, arg, bad, call):
        out.extend((fn, arg, v, exc, call) for v, exc in bad)

    add("malloc", "size", BAD_SIZES, lambda p, v: vmmx.malloc(v))
    add("malloc", "stream", BAD_STREAMS, lambda p, v: vmmx.malloc(4096, stream=v))
    add("malloc", "device", BAD_DEVICES, lambda p, v: vmmx.malloc(4096, device=v))
    add("free", "ptr", [b for b in BAD_PTRS if b[0] is not None], lambda p, v: vmmx.free(v))
    add("free", "stream", BAD_STREAMS, lambda p, v: vmmx.free(p, stream=v))
    add("free", "device", BAD_DEVICES, lambda p, v: vmmx.free(p, device=v))
    add("prefetch", "ptr", BAD_PTRS, lambda p, v: vmmx.prefetch(v, 4096))
    add("prefetch", "nbytes", BAD_SIZES, lambda p, v: vmmx.prefetch(p, v))
    add("prefetch", "to", [("host", TypeError), (1, TypeError)],
        lambda p, v: vmmx.prefetch(p, 4096, v))
    add("prefetch", "stream", BAD_STREAMS, lambda p, v: vmmx.prefetch(p, 4096, stream=v))
    add("prefetch", "device", BAD_DEVICES, lambda p, v: vmmx.prefetch(p, 4096, device=v))
    add("advise", "ptr", BAD_PTRS, lambda p, v: vmmx.advise(v, 4096, vmmx.ADVISE_HOT))
    add("advise", "nbytes", BAD_SIZES, lambda p, v: vmmx.advise(p, v, vmmx.ADVISE_HOT))
    add("advise", "advice", [(True, TypeError), (1.0, TypeError), ("hot", TypeError),
                             (-2 ** 31 - 1, ValueError), (2 ** 31, ValueError)],
        lambda p, v: vmmx.advise(p, 4096, v))
    add("advise", "device", BAD_DEVICES, lambda p, v: vmmx.advise(p, 4096, 1, device=v))
    add("lookup", "ptr", BAD_PTRS, lambda p, v: vmmx.lookup(v))
    add("lookup", "device", BAD_DEVICES, lambda p, v: vmmx.lookup(p, device=v))
    for name in ("runs", "residency", "owns_segment"):
        f = getattr(vmmx, name)
        add(name, "ptr", BAD_PTRS, lambda p, v, f=f: f(v, 4096))
        add(name, "nbytes", BAD_SIZES, lambda p, v, f=f: f(p, v))
        add(name, "device", BAD_DEVICES, lambda p, v, f=f: f(p, 4096, device=v))
    add("runs", "nbytes", [(BIG_PTR, ValueError)], lambda p, v: vmmx.runs(BIG_PTR - 4096, 8192))
    for name in ("allocator", "context", "alloc_stats", "context_stats", "empty_cache"):
        f = getattr(vmmx, name)
        add(name, "device", BAD_DEVICES, lambda p, v, f=f: f(v))
    add("DEVICE", "i", BAD_DEVICES, lambda p, v: vmmx.DEVICE(v))
    add("parse_size", "v", [b for b in BAD_SIZES if b[0] != "4096"] + [(b"8G", TypeError)],
        lambda p, v: vmmx.parse_size(v))
    add("parse_size", "total", BAD_SIZES[:-1] + [(2 ** 64, ValueError)],  # UINT64_MAX
        lambda p, v: vmmx.parse_size("50%", v))
    bad_size_settings = [b for b in BAD_SIZES if b[0] not in ("4096", None)] + \
        [("1GiB\x00", ValueError), (2 ** 64 + 1, ValueError)]  # past UINT64_MAX too
    for name in ("device_limit", "host_limit", "device_headroom", "chunk_size", "chunk_max",
                 "cache_limit"):
        add("configure", name, bad_size_settings, lambda p, v, n=name: vmmx.configure(**{n: v}))
    for name in ("sim_device_mem", "device_prealloc"):  # sizes by name, through **more
        add("configure", name, bad_size_settings, lambda p, v, n=name: vmmx.configure(**{n: v}))
    for name in ("policy", "log", "trace", "backend", "sim_devices"):
        add("configure", name, [(1.5, TypeError), (b"host", TypeError), ([1], TypeError),
                                ("a\x00b", ValueError)],
            lambda p, v, n=name: vmmx.configure(**{n: v}))
    bad_tags = [(5, TypeError), ([b"x"], TypeError), ([""], ValueError),
                (["x" * 40], ValueError), (["a\x00b"], ValueError)]
    add("sleep", "tag", bad_tags, lambda p, v: vmmx.sleep(v))
    add("sleep", "offload", [(2, ValueError), ("yes", TypeError)],
        lambda p, v: vmmx.sleep("t", offload=v))
    add("sleep", "stream", BAD_STREAMS, lambda p, v: vmmx.sleep("t", stream=v))
    add("sleep", "device", BAD_DEVICES, lambda p, v: vmmx.sleep("t", device=v))
    add("wake", "tag", bad_tags, lambda p, v: vmmx.wake(v))
    add("wake", "device", BAD_DEVICES, lambda p, v: vmmx.wake("t", device=v))
    add("sleep_release", "tag", bad_tags, lambda p, v: vmmx.sleep_release(v))
    add("sleep_release", "device", BAD_DEVICES,
        lambda p, v: vmmx.sleep_release("t", device=v))
    add("tag_scope", "tag", [(3, TypeError), (b"t", TypeError), ("", ValueError),
                             ("x" * 32, ValueError)], lambda p, v: vmmx.tag_scope(v))
    add("sleep_stats", "tag", [(None, TypeError), (3, TypeError), ("a\x00", ValueError)],
        lambda p, v: vmmx.sleep_stats(v))
    add("sleep_stats", "device", BAD_DEVICES, lambda p, v: vmmx.sleep_stats("t", device=v))
    add("configure", "setting name", [("A=B", ValueError), ("", ValueError), ("x\x00", ValueError)],
        lambda p, v: vmmx.configure(**{v: "1"}))
    return out


CASES = _cases()


@pytest.mark.parametrize("fn, arg, value, exc, call", CASES,
                         ids=[f"{c[0]}:{c[1]}={c[2]!r}".replace(" ", "_") for c in CASES])
def test_every_function_checks_its_arguments(vmmx_configured, fn, arg, value, exc, call):
    p = vmmx.malloc(4096)
    try:
        refused(exc, "vmmx." + fn, arg, call, p, value)
    finally:
        vmmx.free(p)


def test_every_public_function_is_covered():
    """A public function of the ctypes layer that takes an argument has cases above."""
    import inspect
    covered = {c[0] for c in CASES}
    takes = {n for n, f in vars(vmmx).items()
             if inspect.isfunction(f) and not n.startswith("_") and f.__module__ == "vmmx"
             and inspect.signature(f).parameters}
    assert takes <= covered, sorted(takes - covered)


# -- what is accepted


class Index:
    """An int-like object (numpy's integers behave so): __index__, no int base."""

    def __init__(self, v):
        self.v = v

    def __index__(self):
        return self.v


class Stream:
    def __init__(self, **attrs):
        self.__dict__.update(attrs)


def test_int_like_values_are_accepted(vmmx_configured):
    p = vmmx.malloc(Index(4096), device=Index(0))
    try:
        assert vmmx.lookup(Index(p), device=Index(0))["loc"] == "device:0"
        assert vmmx.residency(p, Index(4096), Index(0)) == (4096, 0)
        assert vmmx.parse_size(Index(7)) == 7 and vmmx.parse_size("50%", Index(10)) == 5
        assert vmmx.DEVICE(Index(1)).id == 1
        vmmx.advise(p, 4096, Index(vmmx.ADVISE_HOT))
    finally:
        vmmx.free(ctypes.c_void_p(p))
    vmmx.free(None)  # NULL: nothing to do, as in C


def test_numpy_integers_are_accepted(vmmx_configured):
    np = pytest.importorskip("numpy", reason="numpy is not installed")
    p = vmmx.malloc(np.uint64(4096), device=np.int32(0))
    try:
        assert vmmx.lookup(np.uint64(p), device=np.int64(0))["loc"] == "device:0"
    finally:
        vmmx.free(p)
    refused(TypeError, "vmmx.malloc", "size", vmmx.malloc, np.float64(4096))
    refused(TypeError, "vmmx.malloc", "size", vmmx.malloc, np.bool_(True))


@pytest.mark.parametrize("stream", [
    None, 0, Index(0), ctypes.c_void_p(), Stream(cuda_stream=0), Stream(ptr=0),
    Stream(_as_parameter_=ctypes.c_void_p(None)), Stream(_as_parameter_=0)])
def test_streams_the_package_documents_are_accepted(vmmx_configured, stream):
    # None or handle 0: no stream (the sim knows no other); torch.cuda.Stream has
    # .cuda_stream, cupy.cuda.Stream .ptr, the ctypes protocol ._as_parameter_
    s0 = vmmx.alloc_stats(0)
    p = vmmx.malloc(4096, stream=stream)
    vmmx.prefetch(p, 4096, vmmx.HOST, stream=stream)
    assert vmmx.lookup(p)["loc"] == "host"
    vmmx.free(p, stream=stream)
    s1 = vmmx.alloc_stats(0)
    assert (s1["allocs"] - s0["allocs"], s1["frees"] - s0["frees"]) == (1, 1)


def test_stream_object_with_a_bad_handle_is_refused(vmmx_configured):
    msg = refused(TypeError, "vmmx.malloc", "stream.cuda_stream", vmmx.malloc, 4096,
                  stream=Stream(cuda_stream="0x10"))
    assert msg.endswith("not str"), msg
    refused(TypeError, "vmmx.malloc", "stream.ptr", vmmx.malloc, 4096, stream=Stream(ptr=1.0))
    refused(ValueError, "vmmx.free", "stream", vmmx.free, 0x1000, stream=Stream(ptr=-1))


def test_configure_takes_sizes_as_ints_and_text():
    out = child("""
        import json, vmmx
        vmmx.configure(device_limit=48 << 20, host_limit="128MiB", sim_pageable=True,
                       chunk_max=2 << 20)
        vmmx.allocator(0)
        dev = [l for l in vmmx.context_stats(0)["locations"] if l["location"] == "device:0"]
        print(json.dumps(dev[0]["limit"]))
    """)
    assert out == 48 * MiB


# -- vmmx_tools.bench (the command line's sizes)


@pytest.mark.parametrize("value, exc", [
    ("1GiB\x00", ValueError), ("-1G", ValueError), ("-5", ValueError), ("lots", ValueError),
    ("infG", ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)])
def test_bench_parse_size_refuses(value, exc):
    with pytest.raises(exc) as e:
        bench.parse_size(value)
    assert str(e.value).startswith("vmmx_tools.bench.parse_size: s "), str(e.value)


# -- vmmx.torch and vmmx.cupy: their checks come before any call into the framework,
# so they run without a GPU; where torch or CuPy is missing, a stand-in module with
# only the names the checks use takes its place (in a child process, so that
# test_torch.py and test_cupy.py still see the real ones or none).

FRAMEWORKS = r'''
import json, sys, types
try:
    import torch
    fake_torch = False
except ImportError:
    fake_torch = True
    torch = types.ModuleType("torch")

    class device:  # torch.device's parsing: "cuda", "cuda:N", "cpu"
        def __init__(self, s):
            if not isinstance(s, str):
                raise TypeError("device")
            t, _, i = s.partition(":")
            if t not in ("cuda", "cpu") or (i and not i.isdigit()):
                raise RuntimeError(f"Invalid device string: '{s}'")
            self.type, self.index = t, int(i) if i else None

    class Stream:
        pass

    torch.device = device
    torch.cuda = types.SimpleNamespace(Stream=Stream)
    sys.modules["torch"] = torch
try:
    import cupy
except ImportError:
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(Device=type("Device", (), {"id": 0}))
    sys.modules["cupy"] = cupy
import vmmx.torch, vmmx.cupy

out = []
def case(call, **kw):
    try:
        call(**kw)
        out.append(None)
    except Exception as e:
        out.append([type(e).__name__, str(e)])

T = vmmx.torch
for kw in CASES:
    f = {"enable": T.enable, "stats": T.stats, "prefetch": lambda **k: T.prefetch([], **k),
         "offload": lambda **k: T.offload(None, **k),
         "Offloader": lambda **k: T.Offloader(None, **k),
         "cupy.enable": vmmx.cupy.enable, "cupy.stats": vmmx.cupy.stats}[kw.pop("f")]
    case(f, **kw)
print(json.dumps(out))
'''

FRAMEWORK_CASES = [
    # (function, keyword arguments, exception, the message's start)
    ("enable", dict(device_limit=1.5), "TypeError", "vmmx.torch.enable: device_limit must"),
    ("enable", dict(host_limit=-1), "ValueError", "vmmx.torch.enable: host_limit -1"),
    ("enable", dict(policy="host\x00junk"), "ValueError", "vmmx.torch.enable: policy contains"),
    ("enable", dict(sim_device_mem=2.5), "TypeError", "vmmx.torch.enable: sim_device_mem must"),
    ("enable", dict(devices=[0, 2 ** 40]), "ValueError", "vmmx.torch.enable: devices[1] "),
    ("enable", dict(devices=[True]), "TypeError", "vmmx.torch.enable: devices[0] must"),
    ("enable", dict(devices=["cpu"]), "ValueError", "vmmx.torch.enable: devices[0] 'cpu' is not"),
    ("enable", dict(devices=["cuda:0\x00"]), "ValueError",
     "vmmx.torch.enable: devices[0] contains"),
    ("enable", dict(devices=3), "TypeError", "vmmx.torch.enable: devices must be a list"),
    ("enable", dict(force="no"), "TypeError", "vmmx.torch.enable: force must be a bool"),
    ("stats", dict(device=True), "TypeError", "vmmx.torch.stats: device must be an int"),
    ("stats", dict(device=2 ** 40), "ValueError", "vmmx.torch.stats: device 1099511627776"),
    ("stats", dict(device=1.0), "TypeError", "vmmx.torch.stats: device must be an int"),
    ("prefetch", dict(to="cuda"), "ValueError", "vmmx.torch.prefetch: to 'cuda' is not one"),
    ("prefetch", dict(to=None), "TypeError", "vmmx.torch.prefetch: to must be a str"),
    ("prefetch", dict(stream=7), "TypeError", "vmmx.torch.prefetch: stream must be None or"),
    ("prefetch", dict(stream="s"), "TypeError", "vmmx.torch.prefetch: stream must be None or"),
    ("prefetch", dict(owned_only="yes"), "TypeError", "vmmx.torch.prefetch: owned_only must"),
    ("offload", dict(lookahead=2.5), "TypeError", "vmmx.torch.offload: lookahead must be an int"),
    ("offload", dict(lookahead=-1), "ValueError", "vmmx.torch.offload: lookahead -1 is negative"),
    ("offload", dict(headroom=0.5), "TypeError", "vmmx.torch.offload: headroom must"),
    ("offload", dict(headroom="1GiB\x00"), "ValueError", "vmmx.torch.offload: headroom contains"),
    ("offload", dict(backward=2), "ValueError", "vmmx.torch.offload: backward must be a bool"),
    ("Offloader", dict(lookahead=True), "TypeError", "vmmx.torch.offload: lookahead must"),
    ("cupy.enable", dict(device_limit=1.5), "TypeError", "vmmx.cupy.enable: device_limit must"),
    ("cupy.enable", dict(devices=[-1]), "ValueError", "vmmx.cupy.enable: devices[0] -1 is"),
    ("cupy.enable", dict(devices=0), "TypeError", "vmmx.cupy.enable: devices must be a list"),
    ("cupy.stats", dict(device="0"), "TypeError", "vmmx.cupy.stats: device must be an int"),
    ("cupy.stats", dict(device=2 ** 31), "ValueError", "vmmx.cupy.stats: device 2147483648"),
]


def test_torch_and_cupy_check_their_arguments_first():
    cases = [dict(kw, f=f) for f, kw, _, _ in FRAMEWORK_CASES]
    out = child(f"CASES = {cases!r}\n" + FRAMEWORKS)
    assert len(out) == len(FRAMEWORK_CASES)
    for (f, kw, exc, start), got in zip(FRAMEWORK_CASES, out):
        assert got is not None and got[0] == exc and got[1].startswith(start), (f, kw, got)
