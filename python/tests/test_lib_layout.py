# SPDX-License-Identifier: MIT
"""vmmx/_lib.py against include/vmmx.h, through the C compiler: every mirrored
structure (its size, each field's offset and size) and every constant, and
every function given a prototype exists in the header.  Skips when no C
compiler or header is found (an installed package without its sources)."""
import ctypes
import os
import shlex
import shutil
import subprocess

import pytest

from vmmx import _lib

HERE = os.path.dirname(os.path.abspath(__file__))
INCLUDE = os.path.join(os.path.dirname(os.path.dirname(HERE)), "include")


def _c_program():
    lines = ["#include <stddef.h>", "#include <stdio.h>", "#include <vmmx.h>",
             "int main(void)", "{"]
    for cname, cls in _lib.STRUCTS.items():
        t = f"struct vmmx_{cname}"
        lines.append(f'\tprintf("{cname} size=%zu\\n", sizeof({t}));')
        for field, _ in cls._fields_:
            lines.append(f'\tprintf("{cname}.{field}=%zu %zu\\n", offsetof({t}, {field}), '
                         f'sizeof((({t} *)0)->{field}));')
    for name in _lib.CONSTANTS:
        lines.append(f'\tprintf("{name}=%lld\\n", (long long)VMMX_{name});')
    for fn in _lib.PROTOS:  # each exists with this name in the header
        lines.append(f"\t(void)&{fn};")
    lines += ["\treturn 0;", "}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def header_says(tmp_path_factory):
    cc = shlex.split(os.environ.get("CC") or "cc")  # make check's $CC, options and all
    if not cc or not shutil.which(cc[0]):
        pytest.skip(f"no C compiler ({' '.join(cc)}) to read include/vmmx.h with")
    if not os.path.exists(os.path.join(INCLUDE, "vmmx.h")):
        pytest.skip(f"no {INCLUDE}/vmmx.h (not in a source tree)")
    d = tmp_path_factory.mktemp("layout")
    src, exe = d / "layout.c", d / "layout"
    src.write_text(_c_program())
    r = subprocess.run(cc + ["-std=gnu11", "-Wall", "-Werror", "-I", INCLUDE, "-o", str(exe),
                        str(src)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


@pytest.mark.parametrize("cname", sorted(_lib.STRUCTS))
def test_structure_matches_the_header(header_says, cname):
    cls = _lib.STRUCTS[cname]
    assert int(header_says[f"{cname} size"]) == ctypes.sizeof(cls), f"sizeof(struct vmmx_{cname})"
    for field, _ in cls._fields_:
        off, size = map(int, header_says[f"{cname}.{field}"].split())
        f = getattr(cls, field)
        assert (f.offset, f.size) == (off, size), \
            f"struct vmmx_{cname}.{field}: offset, size {off}, {size} in C"


@pytest.mark.parametrize("name", _lib.CONSTANTS)
def test_constant_matches_the_header(header_says, name):
    assert getattr(_lib, name) == int(header_says[name]), f"VMMX_{name}"


def test_every_constant_is_listed():
    """A constant in _lib (an upper-case int) is in CONSTANTS, so it is checked."""
    ints = {n for n, v in vars(_lib).items() if n.isupper() and isinstance(v, int)}
    assert ints == set(_lib.CONSTANTS), sorted(ints ^ set(_lib.CONSTANTS))


def test_the_package_reexports_what_torch_and_cupy_use():
    import vmmx
    for n in ("VmmxError", "EBUSY", "EINVAL", "ENOENT", "ENOMEM", "DEVICE", "HOST", "library",
              "library_path", "configure", "allocator", "alloc_stats", "context_stats",
              "empty_cache", "owns_segment", "parse_size", "prefetch", "residency", "runs",
              "_config_entries", "_check", "AllocStats", "ChunkInfo", "Residency", "Loc"):
        assert hasattr(vmmx, n), n
    assert vmmx.VmmxError is _lib.VmmxError and vmmx.Loc is _lib.Loc
