# SPDX-License-Identifier: MIT
"""The vmmx package's own PEP 517 build backend: a pure-Python wheel, no setuptools.

`pip install ./python` works offline on any Python with pip >= 19.1 and
nothing else: setuptools below 70.1 needs the separate `wheel` package for
bdist_wheel, which Debian's python3 (setuptools 66, no python3-wheel) and a
venv made from it lack, so the setuptools backend failed there with
"invalid command 'bdist_wheel'".  The packages (vmmx, with its subpackage
vmmx/torch/, and the tools' vmmx_tools) are directories of .py files, so the
wheel is a zip of them and four metadata files (PEP 427, PEP 376,
core metadata 2.1); the metadata is read from pyproject.toml's [project]
table (tomllib, or tomli on Python < 3.11, asked for as a build requirement).
Left out: vmmx/_build.py, which `make` writes with its own libdir.
"""
import base64
import hashlib
import io
import os
import sys
import tarfile
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "vmmx"
PACKAGES = (PACKAGE, "vmmx_tools")
SKIP = {"_build.py"}


def _toml():
    try:
        import tomllib
    except ImportError:
        import tomli as tomllib
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _project():
    return _toml()["project"]


def _metadata():
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + p["version"],
             "Summary: " + p["description"], "License: " + p["license"]["text"],
             "Requires-Python: " + p["requires-python"]]
    for extra, reqs in sorted(p.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s ; extra == "%s"' % (r, extra) for r in reqs]
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(HERE, p["readme"]), encoding="utf-8") as f:
        readme = f.read()
    return ("\n".join(lines) + "\n\n" + readme).encode()


def _entry_points():
    scripts = _project().get("scripts", {})
    if not scripts:
        return None
    return ("[console_scripts]\n" + "".join("%s = %s\n" % kv for kv in sorted(scripts.items()))).encode()


def _sources():
    """The packages' .py files, paths relative to python/ ("vmmx/torch/_offload.py")."""
    out = []
    for pkg in PACKAGES:
        for d, dirs, files in os.walk(os.path.join(HERE, pkg)):
            dirs[:] = sorted(x for x in dirs if x != "__pycache__")
            rel = os.path.relpath(d, HERE).replace(os.sep, "/")
            out += [rel + "/" + f for f in files if f.endswith(".py") and f not in SKIP]
    return sorted(out)


def _dist_info():
    p = _project()
    return "%s-%s.dist-info" % (p["name"], p["version"]), "%s-%s" % (p["name"], p["version"])


def _wheel(wheel_directory, files):
    """Write a py3-none-any wheel of FILES (archive name -> bytes) and its metadata."""
    info, stem = _dist_info()
    files = dict(files)
    files[info + "/METADATA"] = _metadata()
    files[info + "/WHEEL"] = (b"Wheel-Version: 1.0\nGenerator: vmmx_backend\n"
                              b"Root-Is-Purelib: true\nTag: py3-none-any\n")
    ep = _entry_points()
    if ep:
        files[info + "/entry_points.txt"] = ep
    record = []
    for name, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (name, digest, len(data)))
    record.append(info + "/RECORD,,")
    files[info + "/RECORD"] = ("\n".join(record) + "\n").encode()
    name = stem + "-py3-none-any.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for arc, data in files.items():
            zi = zipfile.ZipInfo(arc, date_time=(1980, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return name


def _requires():
    return [] if sys.version_info >= (3, 11) else ["tomli"]


def get_requires_for_build_wheel(config_settings=None):
    return _requires()


def get_requires_for_build_sdist(config_settings=None):
    return _requires()


def get_requires_for_build_editable(config_settings=None):
    return _requires()


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = {}
    for f in _sources():
        with open(os.path.join(HERE, f), "rb") as fh:
            files[f] = fh.read()
    return _wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel holding only a .pth file that puts this source tree on sys.path."""
    return _wheel(wheel_directory, {"__editable__.%s.pth" % PACKAGE: (HERE + "\n").encode()})


def build_sdist(sdist_directory, config_settings=None):
    _, stem = _dist_info()
    name = stem + ".tar.gz"
    paths = ["pyproject.toml", _project()["readme"], "_backend/vmmx_backend.py"]
    paths += _sources()
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for rel in paths:
            t.add(os.path.join(HERE, rel), arcname=stem + "/" + rel)
        pkg = _metadata()
        ti = tarfile.TarInfo(stem + "/PKG-INFO")
        ti.size = len(pkg)
        ti.mode = 0o644
        t.addfile(ti, io.BytesIO(pkg))
    return name
