# SPDX-License-Identifier: MIT
"""A stand-in for the `filecheck` package, which numba-cuda's test helpers
(numba.cuda.testing) import at load time but which the GPU machine does not
have.  numba_suite.sh puts this directory on PYTHONPATH only when the real
package is missing, so that the suite's modules import; a test that really
runs FileCheck then fails, in the native run and under vmmx-run alike, and
the comparison lists no difference for it.  Any submodule
(filecheck.matcher, filecheck.options, ...) and any name in it resolves to
a class whose instances fail when used."""
import importlib.abc
import importlib.machinery
import sys
import types


class _Missing:
    def __init__(self, *args, **kwargs):
        raise RuntimeError("filecheck is not installed (numba_suite.sh stand-in)")


def __getattr__(name):
    return _Missing


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname, path, target=None):
        if fullname.startswith(__name__ + "."):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        m = types.ModuleType(spec.name)
        m.__getattr__ = __getattr__
        m.__path__ = []
        return m

    def exec_module(self, module):
        pass


sys.meta_path.insert(0, _Finder())
