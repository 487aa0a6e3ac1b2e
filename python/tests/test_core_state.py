# SPDX-License-Identifier: MIT
"""What the package tells without making anything (statistics before the
allocator exists), sizes in accelerate's forms ("8GB", {0: "8GiB"}), and
__version__.  Each case that needs a fresh process-wide allocator runs in a
child process."""
import os
import re

import pytest

import vmmx
from subproc import child

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))




def test_stats_before_configure_make_nothing():
    out = child("""
        import ctypes, json, vmmx
        a = vmmx.alloc_stats(0)
        c = vmmx.context_stats(0)
        vmmx.empty_cache(0)
        x = ctypes.create_string_buffer(64)
        lk = vmmx.lookup(ctypes.addressof(x))
        own = vmmx.owns_segment(ctypes.addressof(x), 64)
        res = vmmx.residency(ctypes.addressof(x), 64)
        vmmx.configure(device_limit="48MiB")   # still allowed: nothing was made
        p = vmmx.malloc(4096)
        after = vmmx.alloc_stats(0)
        dev = [l for l in vmmx.context_stats(0)["locations"] if l["location"] == "device:0"]
        vmmx.free(p)
        print(json.dumps(dict(a=a, c=c, lk=lk, own=own, res=res, after=after,
                              limit=dev[0]["limit"])))
    """)
    assert out["c"] == {} and out["lk"] is None and out["own"] is False and out["res"] is None
    assert out["a"]["version"] == vmmx.ALLOC_STATS_VERSION and out["a"]["device"] == 0
    assert all(v == 0 for k, v in out["a"].items() if k not in ("version", "device")), out["a"]
    assert set(out["a"]) == set(out["after"])
    assert out["after"]["allocs"] == 1 and out["limit"] == 48 * MiB, out


def test_stats_see_an_allocator_made_outside_the_package():
    # the C entry points of the framework hooks make it without the package knowing
    out = child("""
        import ctypes, json, vmmx
        lib = vmmx.library()
        a = ctypes.c_void_p()
        assert lib.vmmx_alloc_global(0, ctypes.byref(a)) == 0
        p = ctypes.c_void_p()
        assert lib.vmmx_alloc_malloc(a, 4096, None, ctypes.byref(p)) == 0
        print(json.dumps(vmmx.alloc_stats(0)["allocs"]))
    """)
    assert out == 1


def test_sizes_in_accelerates_forms():
    out = child("""
        import json, vmmx
        e = [x.decode() for x in vmmx._config_entries("f", dict(
            device_limit={1: "4GiB", 0: "8GB"}, device_headroom={0: 1 << 20}))]
        vmmx.configure(device_limit={0: "50MB"}, host_limit="1GB")
        vmmx.allocator(0)
        dev = [l for l in vmmx.context_stats(0)["locations"] if l["location"] == "device:0"]
        print(json.dumps(dict(e=e, limit=dev[0]["limit"])))
    """)
    assert out["e"] == ["VMMX_DEVICE_LIMIT=0:8GB,1:4GiB", "VMMX_DEVICE_HEADROOM=0:1048576"], out
    assert out["limit"] == 50 * 10 ** 6, out


@pytest.mark.parametrize("kw, exc, says", [
    (dict(device_limit={0: "8 lots"}), ValueError, "device_limit[0] '8 lots' is not a size"),
    (dict(device_limit={"cpu": "8GiB"}), ValueError, "host memory is host_limit"),
    (dict(device_limit={-1: "8GiB"}), ValueError, "device_limit key -1 is negative"),
    (dict(device_limit={"0": "8GiB"}), TypeError, "device_limit key must be an int"),
    (dict(device_limit={}), ValueError, "device_limit is an empty dict"),
    (dict(device_limit={0: 1.5}), TypeError, "device_limit[0] must be an int or a str"),
    (dict(device_limit="0:8GiB,x:1GiB"), ValueError, "'x' is not a device index"),
    (dict(device_limit="8GiB,"), ValueError, "has an empty item"),
    (dict(host_limit={0: "8GiB"}), TypeError, "host_limit must be an int or a str"),
    (dict(chunk_max="50%"), ValueError, "chunk_max '50%' is not a size"),
    (dict(device_headroom="lots"), ValueError, "device_headroom 'lots' is not a size"),
])
def test_bad_sizes_are_refused_naming_the_argument(kw, exc, says):
    with pytest.raises(exc) as e:
        vmmx.configure(**kw)
    assert type(e.value) is exc
    assert str(e.value).startswith("vmmx.configure: "), e.value
    assert says in str(e.value), e.value


def test_version_is_the_release():
    # __version__: the package's, known without the library; the same release as
    # configure.ac's AC_INIT, pyproject.toml and the library this tree built
    assert re.fullmatch(r"\d+\.\d+\.\d+", vmmx.__version__)
    with open(os.path.join(TOP, "python", "pyproject.toml")) as f:
        assert f'version = "{vmmx.__version__}"' in f.read()
    ac = os.path.join(TOP, "configure.ac")
    if os.path.exists(ac):
        with open(ac) as f:
            assert f"AC_INIT([libvmmx], [{vmmx.__version__}]" in f.read()
    assert ".".join(map(str, vmmx.version())) == vmmx.__version__
