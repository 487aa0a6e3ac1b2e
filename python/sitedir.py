# SPDX-License-Identifier: MIT
"""Print where this Python looks for packages under PREFIX, relative to PREFIX.

Run by configure: `python3 python/sitedir.py PREFIX`.  The answer is the
first of the interpreter's own site directories (site.getsitepackages())
that lies under PREFIX: /usr/local/lib/python3.X/dist-packages for Debian's
/usr/bin/python3 and PREFIX /usr/local, the venv's site-packages for a venv's
python and PREFIX the venv.  When none does (a prefix this Python does not
look in: PYTHONPATH must name it), the interpreter's purelib path for its
default scheme, rebased on PREFIX: Debian's posix_local scheme (which
assumes a base of /usr and adds local/) becomes lib/python3.X/dist-packages.
"""
import os
import site
import sys
import sysconfig


def relative(prefix):
    prefix = os.path.normpath(prefix)
    dirs = site.getsitepackages() if hasattr(site, "getsitepackages") else []
    under = [os.path.relpath(os.path.normpath(d), prefix) for d in dirs
             if os.path.normpath(d).startswith(prefix.rstrip("/") + "/")]
    # PREFIX's own lib/ first: for PREFIX /usr, Debian's /usr/lib/python3/dist-packages,
    # not /usr/local/lib/python3.X/dist-packages (that is PREFIX /usr/local's).
    for rel in sorted(under, key=lambda r: not r.startswith("lib")):
        return rel
    get_scheme = getattr(sysconfig, "get_default_scheme", None)
    scheme = get_scheme() if get_scheme else "posix_prefix"
    if scheme == "posix_local":  # Debian: {base}/local/lib/python3.X/dist-packages
        return "lib/python%d.%d/dist-packages" % sys.version_info[:2]
    if scheme not in sysconfig.get_scheme_names():
        scheme = "posix_prefix"
    d = sysconfig.get_path("purelib", scheme, vars={"base": prefix, "platbase": prefix})
    return os.path.relpath(d, prefix)


if __name__ == "__main__":
    if len(sys.argv) != 2 or not sys.argv[1].startswith("/"):
        sys.exit("usage: sitedir.py ABSOLUTE-PREFIX")
    print(relative(sys.argv[1]))
