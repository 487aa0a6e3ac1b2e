# SPDX-License-Identifier: MIT
"""CuPy on libvmmx::

    import vmmx.cupy
    vmmx.cupy.enable(device_limit="8GiB")

Every CuPy allocation then comes from libvmmx's process-wide allocator of its
device (``vmmx_cupy_malloc``/``vmmx_cupy_free`` through
``cupy.cuda.memory.CFunctionAllocator``): placed by the policy (default
device-first, falling back to pinned host memory), cached and reused.  CuPy
passes no stream to an allocator, so frees are ordered on the default
(legacy) stream, which orders CuPy's blocking streams too; memory used on a
non-blocking stream must be synchronised by the caller before it is freed.
"""
import ctypes

import cupy

import vmmx as _v
from vmmx import _args

__all__ = ["enable", "disable", "stats"]

_state = {"allocator": None, "previous": None}


def _index(fn, name, device):
    """A device index from an int or a cupy.cuda.Device, checked."""
    if isinstance(device, cupy.cuda.Device):
        device = device.id
    return _args.device(fn, name, device)


def enable(policy=None, device_limit=None, host_limit=None, device_headroom=None,
           devices=None, **settings):
    """Make CuPy allocate through libvmmx (``cupy.cuda.set_allocator``).

    Settings as in vmmx.configure().  ``devices``: the process-wide
    allocators to make now, so that a bad setting raises here (default: the
    current device): ints or cupy.cuda.Device.  Raises VmmxError when called
    twice or when a setting is refused; TypeError or ValueError, before
    anything is done, for an argument of the wrong type or out of range (the
    rules are in the vmmx package's help).
    """
    fn = "vmmx.cupy.enable"
    _v._config_entries(fn, dict(policy=policy, device_limit=device_limit,
                                host_limit=host_limit, device_headroom=device_headroom,
                                **settings))
    if devices is not None:
        if isinstance(devices, (str, bytes)) or not hasattr(devices, "__iter__"):
            raise TypeError(f"{fn}: devices must be a list of devices, not "
                            f"{type(devices).__name__}")
        devices = [_index(fn, f"devices[{i}]", d) for i, d in enumerate(devices)]
    if _state["allocator"] is not None:
        raise _v.VmmxError("vmmx.cupy.enable", _v.EBUSY, "already enabled", "")
    _v.configure(policy=policy, device_limit=device_limit, host_limit=host_limit,
                 device_headroom=device_headroom, **settings)
    for d in (devices if devices is not None else [cupy.cuda.Device().id]):
        _v.allocator(d)
    lib = _v.library()
    malloc = ctypes.cast(lib.vmmx_cupy_malloc, ctypes.c_void_p).value
    free = ctypes.cast(lib.vmmx_cupy_free, ctypes.c_void_p).value
    # CFunctionAllocator(param, malloc_func, free_func, owner): owner keeps the library alive
    alloc = cupy.cuda.memory.CFunctionAllocator(0, malloc, free, lib)
    _state["previous"] = cupy.cuda.get_allocator()
    _state["allocator"] = alloc
    cupy.cuda.set_allocator(alloc.malloc)


def disable():
    """Give CuPy its previous allocator back (memory already allocated stays libvmmx's)."""
    if _state["allocator"] is None:
        return
    cupy.cuda.set_allocator(_state["previous"])
    _state["allocator"] = _state["previous"] = None


def stats(device=None):
    """libvmmx's allocator and context statistics of a device (default: the current one)."""
    d = cupy.cuda.Device().id if device is None else _index("vmmx.cupy.stats", "device", device)
    return {"allocator": _v.alloc_stats(d), "context": _v.context_stats(d)}
