# SPDX-License-Identifier: MIT
"""Argument checks of the public functions, before any ctypes call.

ctypes converts silently: a size past SIZE_MAX wraps (2**64 becomes 0), a
float is cut (1.9 becomes 1), a device index past INT_MAX loses its high
bits, a str with a NUL byte ends there, and a str passed for a pointer
becomes its own address.  So every value that reaches the library is checked
here first, and refused with TypeError (wrong type) or ValueError (out of
range) naming the function and the argument.

The rules (the package's docstring states them for users):

- integers: int or anything with ``__index__`` (numpy integers); never bool
  (``True`` is not a size nor a device) and never float, not even an integral
  one (sizes and addresses are exact: the caller rounds, not ctypes);
- sizes: 0 to SIZE_MAX; device indices: 0 to INT_MAX; addresses: 0 to
  UINTPTR_MAX;
- streams: None, an int handle, or a stream object: ``.cuda_stream``
  (torch.cuda.Stream), ``.ptr`` (cupy.cuda.Stream) or ``._as_parameter_``
  (the ctypes protocol), or a ctypes.c_void_p;
- text: str without NUL bytes;
- flags: bool (numpy's too), or an integer 0 or 1.
"""
import ctypes
import operator

SIZE_MAX = (1 << 8 * ctypes.sizeof(ctypes.c_size_t)) - 1
UINTPTR_MAX = (1 << 8 * ctypes.sizeof(ctypes.c_void_p)) - 1
U64_MAX = (1 << 64) - 1
INT_MAX = (1 << 8 * ctypes.sizeof(ctypes.c_int) - 1) - 1
INT_MIN = -INT_MAX - 1


def _type(v):
    return type(v).__name__


def _is_bool(v):
    # numpy's bool has __index__ (deprecated), so it would pass as 0 or 1
    return isinstance(v, bool) or (type(v).__module__ == "numpy" and
                                   type(v).__name__ in ("bool_", "bool"))


def integer(fn, name, v, lo, hi, what="an int", lo_name=None, hi_name=None):
    """v as a Python int in [lo, hi]."""
    if _is_bool(v) or isinstance(v, float):
        raise TypeError(f"{fn}: {name} must be {what}, not {_type(v)}")
    try:
        i = operator.index(v)
    except TypeError:
        raise TypeError(f"{fn}: {name} must be {what}, not {_type(v)}") from None
    if i < lo:
        raise ValueError(f"{fn}: {name} {i} is negative" if lo == 0 else
                         f"{fn}: {name} {i} is below {lo_name or lo}")
    if i > hi:
        raise ValueError(f"{fn}: {name} {i} is past {hi_name or hi}" +
                         (f" ({hi})" if hi_name else ""))
    return i


def size(fn, name, v, hi=SIZE_MAX, hi_name="SIZE_MAX"):
    """Bytes: an int from 0 to SIZE_MAX (hi)."""
    return integer(fn, name, v, 0, hi, "an int", hi_name=hi_name)


def device(fn, name, v):
    """A device index: an int from 0 to INT_MAX."""
    return integer(fn, name, v, 0, INT_MAX, "an int", hi_name="INT_MAX")


def c_int(fn, name, v):
    """A C int (an enum, advice): INT_MIN to INT_MAX; the library judges the value."""
    return integer(fn, name, v, INT_MIN, INT_MAX, "an int", lo_name="INT_MIN",
                   hi_name="INT_MAX")


def pointer(fn, name, v, null=False):
    """An address: an int from 0 to UINTPTR_MAX or a ctypes.c_void_p; None (NULL)
    only where the C function takes NULL (null=True)."""
    if isinstance(v, ctypes.c_void_p):
        v = v.value
    if v is None:
        if null:
            return None
        raise TypeError(f"{fn}: {name} must be an int address, not None")
    return integer(fn, name, v, 0, UINTPTR_MAX, "an int address", hi_name="UINTPTR_MAX")


STREAM_ATTRS = ("cuda_stream", "ptr", "_as_parameter_")


def stream(fn, name, v):
    """A CUstream handle (an int, or None for no stream) from None, an int, a
    ctypes.c_void_p, or an object carrying one of STREAM_ATTRS."""
    what = ("None, an int handle or a stream object (with .cuda_stream, .ptr or "
            "._as_parameter_)")
    if v is not None and not isinstance(v, (int, ctypes.c_void_p)):
        for attr in STREAM_ATTRS:
            if hasattr(v, attr):
                h = getattr(v, attr)
                if h is not None and not isinstance(h, ctypes.c_void_p) and (
                        _is_bool(h) or not hasattr(h, "__index__")):
                    raise TypeError(f"{fn}: {name}.{attr} must be an int handle, "
                                    f"not {_type(h)}")
                v = h
                break
    if isinstance(v, ctypes.c_void_p):
        v = v.value
    if v is None:
        return None
    h = integer(fn, name, v, 0, UINTPTR_MAX, what, hi_name="UINTPTR_MAX")
    return h or None


def text(fn, name, v, none=False):
    """A str without NUL bytes (C would stop reading at the first); None if none=True."""
    if v is None and none:
        return None
    if not isinstance(v, str):
        raise TypeError(f"{fn}: {name} must be a str, not {_type(v)}")
    if "\0" in v:
        raise ValueError(f"{fn}: {name} contains a NUL byte: {v!r}")
    return v


def size_or_text(fn, name, v, hi=U64_MAX, hi_name="UINT64_MAX"):
    """A size as an int, or as text for the library's grammar ("8GiB", "50%")."""
    if isinstance(v, str):
        return text(fn, name, v)
    if _is_bool(v) or isinstance(v, float) or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}: {name} must be an int or a str such as '8GiB', "
                        f"not {_type(v)}")
    return size(fn, name, v, hi, hi_name)


def flag(fn, name, v):
    """A bool (or an int 0 or 1)."""
    if _is_bool(v):
        return bool(v)
    if isinstance(v, float) or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}: {name} must be a bool, not {_type(v)}")
    i = operator.index(v)
    if i not in (0, 1):
        raise ValueError(f"{fn}: {name} must be a bool, not {i}")
    return bool(i)


def choice(fn, name, v, choices):
    """One of the strs in choices."""
    text(fn, name, v)
    if v not in choices:
        raise ValueError(f"{fn}: {name} {v!r} is not one of " +
                         ", ".join(repr(c) for c in choices))
    return v
