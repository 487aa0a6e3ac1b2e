# SPDX-License-Identifier: MIT
"""Run the package's tests with pytest, or without it.

Machines without network may have no pytest.  Then this stands in for the
part of it the tests use (importorskip, skip, raises, mark.parametrize, the
vmmx_configured fixture) and runs every test_* function in order, printing
one line per test and exiting nonzero if one failed.  With pytest installed
it simply runs pytest.

    python tests/run.py [test_file.py ...]
"""
import contextlib
import importlib.util
import os
import sys
import traceback
import types

HERE = os.path.dirname(os.path.abspath(__file__))


class Skip(Exception):
    pass


def _shim():
    pt = types.ModuleType("pytest")

    def skip(reason="", allow_module_level=False):
        raise Skip(reason)

    def importorskip(name, reason=None):
        try:
            return importlib.import_module(name)
        except ImportError:
            raise Skip(reason or f"{name} is not installed") from None

    class _Raises:
        def __init__(self, exc):
            self.exc, self.value = exc, None

        def __enter__(self):
            return self

        def __exit__(self, et, ev, tb):
            if et is None:
                raise AssertionError(f"did not raise {self.exc.__name__}")
            if not issubclass(et, self.exc):
                return False
            self.value = ev
            return True

    class _Mark:
        def __getattr__(self, name):
            if name == "parametrize":
                def parametrize(names, values, ids=None):
                    def deco(f):
                        f._params = ([n.strip() for n in names.split(",")], values)
                        return f
                    return deco
                return parametrize
            return lambda f: f

    pt.skip, pt.importorskip, pt.raises, pt.mark = skip, importorskip, _Raises, _Mark()
    pt.fixture = lambda *a, **k: (lambda f: f) if not a or not callable(a[0]) else a[0]
    return pt


def main(argv):
    files = argv or sorted(f for f in os.listdir(HERE) if f.startswith("test_"))
    try:
        import pytest  # noqa: F401
        return pytest_main(files)
    except ImportError:
        pass
    sys.modules["pytest"] = _shim()
    sys.path.insert(0, os.path.dirname(HERE))
    spec = importlib.util.spec_from_file_location("conftest", os.path.join(HERE, "conftest.py"))
    conftest = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conftest)
    fixtures = {"vmmx_configured": conftest.vmmx_configured}
    failed = 0
    for f in files:
        name = os.path.basename(f)
        spec = importlib.util.spec_from_file_location(name[:-3], os.path.join(HERE, name))
        mod = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(mod)
        except Skip as e:
            print(f"SKIP {name}: {e}")
            continue
        for tname in [t for t in dir(mod) if t.startswith("test_")]:
            fn = getattr(mod, tname)
            names, values = getattr(fn, "_params", ([], [()]))
            for vals in values:
                vals = vals if isinstance(vals, tuple) else (vals,)
                label = f"{name}::{tname}" + (f"[{'-'.join(map(str, vals))}]" if names else "")
                kw = dict(zip(names, vals))
                for p in fn.__code__.co_varnames[:fn.__code__.co_argcount]:
                    if p in fixtures:
                        kw[p] = fixtures[p]()
                try:
                    fn(**kw)
                    print(f"PASS {label}")
                except Skip as e:
                    print(f"SKIP {label}: {e}")
                except Exception:  # noqa: BLE001 - every failure is reported
                    failed += 1
                    print(f"FAIL {label}")
                    traceback.print_exc()
    print("failed:", failed)
    return 1 if failed else 0


def pytest_main(files):
    import pytest
    sys.path.insert(0, os.path.dirname(HERE))
    with contextlib.suppress(Exception):
        os.chdir(os.path.dirname(HERE))
    return pytest.main(["-v", "-rs", "-p", "no:cacheprovider"] +
                       [os.path.join("tests", os.path.basename(f)) for f in files])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
