# SPDX-License-Identifier: MIT
"""PyTorch's allocations on libvmmx: enable(), disable(), stats(), empty_cache()."""
import atexit
import threading

import torch

import vmmx as _v
from vmmx import _args

from ._mem import _device_cap

_state = {"mode": None, "pools": {}, "plug": None, "devices": []}


_lock = threading.Lock()


def _device_list(fn, devices):
    """The indices of ``devices`` (None: None), checked, before anything is done."""
    if devices is None:
        return None
    if isinstance(devices, (str, bytes, torch.device)) or not hasattr(devices, "__iter__"):
        raise TypeError(f"{fn}: devices must be a list of devices, not "
                        f"{type(devices).__name__}")
    return [_index(d, fn, f"devices[{i}]") for i, d in enumerate(devices)]


def _devices(devices):
    n = torch.cuda.device_count()
    if n == 0:
        raise _v.VmmxError("vmmx.torch.enable", _v.ENOENT, "no CUDA device",
                           "torch.cuda.device_count() is 0")
    if devices is None:
        return list(range(n))
    out = list(devices)
    for d in out:
        if not 0 <= d < n:
            raise _v.VmmxError("vmmx.torch.enable", _v.EINVAL, "no such device", f"cuda:{d}")
    return out


def _index(device, fn="vmmx.torch.stats", name="device"):
    """A CUDA device's index from None (the current one), an int, "cuda:N" or a
    torch.device of type cuda."""
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, (str, torch.device)):
        if isinstance(device, str):
            _args.text(fn, name, device)
        try:
            dev = torch.device(device)
        except RuntimeError as e:
            raise ValueError(f"{fn}: {name} {device!r} is not a device: {e}") from None
        if dev.type != "cuda":
            raise ValueError(f"{fn}: {name} {device!r} is not a CUDA device")
        return dev.index or 0
    return _args.device(fn, name, device)


def _native_bytes(devices):
    """Bytes PyTorch's own allocator holds now (0 when CUDA is not initialised)."""
    if not torch.cuda.is_initialized():
        return {}
    used = {}
    for d in devices:
        b = torch.cuda.memory_reserved(d)
        if b:
            used[d] = b
    return used


def _end_routing():
    """At exit: stop routing to our pools before PyTorch destroys MemPools.  A
    MemPool's destructor asserts that no allocation is routed to any pool
    (captures_underway.empty()); ours stays routed for the program's life, so a
    tag's pool (vmmx.torch.region) destroyed at exit aborted the process."""
    for d, pool in list(_state["pools"].items()):
        try:
            torch._C._cuda_endAllocateToPool(d, pool.id)
        except Exception:  # noqa: BLE001 - at exit, nothing to report to
            pass


def _route(d):
    """Make a pool on device d and route every allocation there."""
    with torch.cuda.device(d):
        pool = torch.cuda.MemPool(_state["plug"].allocator())
    torch._C._cuda_beginAllocateToPool(d, pool.id)
    _state["pools"][d] = pool
    if not _state.get("atexit"):
        atexit.register(_end_routing)
        _state["atexit"] = True


def _unroute(d):
    pool = _state["pools"].pop(d)
    torch._C._cuda_endAllocateToPool(d, pool.id)
    torch._C._cuda_releasePool(d, pool.id)
    return pool


def enable(policy=None, device_limit=None, host_limit=None, device_headroom=None,
           mode="pool", devices=None, force=False, **settings):
    """Put PyTorch's CUDA allocations on libvmmx.

    Call before the first CUDA tensor.  ``policy`` (default ``device-first``),
    ``device_limit``, ``host_limit``, ``device_headroom`` and ``settings``
    (other VMMX_* names, lower case, without the prefix) configure the
    process-wide allocators, as the environment would; sizes are ints
    (bytes) or text ("8GiB", "50%").  ``mode`` is ``"pool"`` or
    ``"allocator"`` (see the module's help).  ``devices``: the GPUs to route
    (default all): ints, "cuda:N" or torch.device.  Arguments of the wrong
    type or out of range raise TypeError or ValueError before anything is
    done (the rules are in the vmmx package's help).

    Under a device limit, ``torch.cuda.mem_get_info`` then answers with the
    limit as the total and what it still allows as free, so that libraries
    that size their allocations from it (transformers' ``from_pretrained``
    warm-up, accelerate's ``device_map="auto"``) plan for the limit; the
    native answer stays in ``vmmx.torch._state["mem_get_info"]``.

    Raises VmmxError when a setting is refused (with libvmmx's message), when
    it is too late (PyTorch already holds CUDA memory; ``force=True`` lets
    the pool mode go on, leaving what exists where it is), or when called
    twice.
    """
    fn = "vmmx.torch.enable"
    # every argument checked before anything is done (settings again by configure())
    _v._config_entries(fn, dict(policy=policy, device_limit=device_limit,
                                host_limit=host_limit, device_headroom=device_headroom,
                                **settings))
    devices, force = _device_list(fn, devices), _args.flag(fn, "force", force)
    mode = _args.choice(fn, "mode", mode, ("pool", "allocator"))
    _check_torch(mode)
    with _lock:
        if _state["mode"]:
            raise _v.VmmxError("vmmx.torch.enable", _v.EBUSY, "already enabled",
                               f"mode {_state['mode']!r} on devices {_state['devices']}")
        devs = _devices(devices)
        used = _native_bytes(devs)
        if mode == "allocator" and torch.cuda.is_initialized():
            raise _v.VmmxError(
                "vmmx.torch.enable", _v.EBUSY, "too late",
                "mode='allocator' must come before CUDA is initialised (PyTorch swaps its "
                "allocator only before first use); call vmmx.torch.enable() first, or use "
                "mode='pool'")
        if used and not force:
            raise _v.VmmxError(
                "vmmx.torch.enable", _v.EBUSY, "too late",
                "PyTorch already holds CUDA memory (" +
                ", ".join(f"cuda:{d}: {b} bytes" for d, b in used.items()) +
                "); call vmmx.torch.enable() before the first CUDA tensor "
                "(force=True keeps those tensors where they are)")
        cfg = dict(policy=policy, device_limit=device_limit, host_limit=host_limit,
                   device_headroom=device_headroom, **settings)
        if _state.get("settings") is None:
            _v.configure(**cfg)
            _state["settings"] = cfg
        elif _state["settings"] != cfg:  # after disable(): the allocator exists already
            raise _v.VmmxError(
                "vmmx.torch.enable", _v.EBUSY, "settings fixed",
                f"an earlier enable() made libvmmx's allocator with {_state['settings']}, "
                "and its settings are read once: enable() again with the same ones")
        _check_entry_points()
        for d in devs:  # made now, so that a bad setting raises here
            _v.allocator(d)
        plug = torch.cuda.memory.CUDAPluggableAllocator(_v.library_path(), "vmmx_torch_alloc",
                                                        "vmmx_torch_free")
        _state["plug"] = plug
        if mode == "allocator":
            torch.cuda.memory.change_current_allocator(plug)
        else:
            for d in devs:
                _route(d)
        _state["mode"], _state["devices"] = mode, devs
        _cap_mem_get_info()


def _cap_mem_get_info():
    """Make torch.cuda.mem_get_info tell the device limit.

    Libraries size what they put on a GPU from torch.cuda.mem_get_info:
    transformers' from_pretrained makes one tensor as large as the model, up
    to the total less 1.2 GiB (caching_allocator_warmup), and accelerate's
    device_map="auto" plans with the free memory.  Told the whole GPU under
    a limit, the warm-up tensor outgrew the limit, went to host memory whole
    (a segment lies in one location), and PyTorch's pool carved every weight
    out of it: 20 MiB of a 2 GiB limit on the device, 2.5 GiB in host
    memory.  Told the limit, the warm-up fits on the device and the weights
    fill it.  Devices without a limit, or not routed, answer as before.
    """
    if "mem_get_info" in _state:
        return
    native = torch.cuda.mem_get_info
    _state["mem_get_info"] = native

    def mem_get_info(device=None):
        free, total = native(device)
        d = torch.cuda._utils._get_device_index(device, optional=True)
        if d not in _state["devices"]:
            return free, total
        cap, used = _device_cap(d)
        if cap is None or cap >= total:
            return free, total
        # what the limit still allows libvmmx there (cached handles are reusable)
        return min(free, max(0, cap - used)), cap

    mem_get_info.__doc__ = (native.__doc__ or "") + (
        "\n\nUnder vmmx.torch.enable() with a device limit: (what the limit still "
        "allows, the limit).")
    torch.cuda.mem_get_info = torch.cuda.memory.mem_get_info = mem_get_info


def disable():
    """Stop putting PyTorch's new CUDA allocations on libvmmx (the pool mode).

    Each routed device's pool stops taking allocations and is released: the
    tensors made under libvmmx stay valid, on libvmmx memory, until they are
    freed (PyTorch frees the pool's segments once its last block is free).
    ``torch.cuda.mem_get_info`` answers natively again.  New allocations go
    to PyTorch's own allocator.  Then :func:`is_enabled` answers None and
    :func:`enable` may be called again, by its own rules (``force=True`` once
    PyTorch holds native memory).  An :class:`Offloader` made before keeps
    working: its slots and homes are libvmmx memory it holds.  Nothing to do
    when not enabled.

    Raises VmmxError (EBUSY) in the ``"allocator"`` mode: PyTorch cannot put
    its own allocator back once another served an allocation (use the
    default ``"pool"`` mode to be able to disable).
    """
    with _lock:
        mode = _state["mode"]
        if mode is None:
            return
        if mode == "allocator":
            raise _v.VmmxError(
                "vmmx.torch.disable", _v.EBUSY, "allocator mode",
                "PyTorch cannot swap its allocator back once libvmmx's served an "
                "allocation; enable(mode='pool') (the default) can be disabled")
        for d in list(_state["pools"]):
            _unroute(d)  # the pool goes with its last tensor; the plug stays loaded
        native = _state.pop("mem_get_info", None)
        if native is not None:
            torch.cuda.mem_get_info = torch.cuda.memory.mem_get_info = native
        _state["mode"], _state["devices"] = None, []


def is_enabled():
    """The mode enable() installed, or None."""
    return _state["mode"]


def stats(device=None):
    """Where the memory of a device is, and what libvmmx did.

    A dict: ``mode``; ``allocator``, libvmmx's allocator statistics
    (allocated/reserved bytes on the device and in host memory, segments,
    cache hits, fallbacks...: in the pool mode its allocations are PyTorch's
    segments); ``context``, the context's statistics (placements, fallbacks
    by reason, migrations, evictions, bytes held per location); and in the
    pool mode ``torch``, PyTorch's allocated and reserved bytes.
    """
    d = _index(device, "vmmx.torch.stats", "device")
    out = {"mode": _state["mode"], "device": d, "allocator": _v.alloc_stats(d),
           "context": _v.context_stats(d)}
    if _state["mode"] == "pool":
        out["torch"] = {"allocated_bytes": torch.cuda.memory_allocated(d),
                        "reserved_bytes": torch.cuda.memory_reserved(d)}
    return out


def empty_cache():
    """Give cached memory back: PyTorch's and libvmmx's.

    In the pool mode the pool is retired (PyTorch releases its free segments
    once no allocation is routed to it) and a new one takes its place.
    """
    with _lock:
        if _state["mode"] == "pool":
            for d in list(_state["pools"]):
                _unroute(d)  # the MemPool's destructor drops its last use
            torch.cuda.empty_cache()
            for d in _state["devices"]:
                _route(d)
        else:
            torch.cuda.empty_cache()
        for d in _state["devices"]:
            _v.empty_cache(d)


# The PyTorch calls each mode relies on, private ones included (PyTorch 2.8 and later
# have them all): checked before anything is done, so that a PyTorch without one fails
# with its name instead of an AttributeError half-way through enable().
_TORCH_NEEDS = {
    "pool": ("torch.cuda.MemPool", "torch.cuda.memory.CUDAPluggableAllocator",
             "torch._C._cuda_beginAllocateToPool", "torch._C._cuda_endAllocateToPool",
             "torch._C._cuda_releasePool"),
    "allocator": ("torch.cuda.memory.CUDAPluggableAllocator",
                  "torch.cuda.memory.change_current_allocator"),
}


def _check_torch(mode):
    """Raise VmmxError (ENOTSUP) naming what this PyTorch lacks for ``mode``."""
    missing = []
    for path in _TORCH_NEEDS[mode]:
        obj = torch
        for part in path.split(".")[1:]:
            obj = getattr(obj, part, None)
            if obj is None:
                missing.append(path)
                break
    if missing:
        raise _v.VmmxError(
            "vmmx.torch.enable", _v.ENOTSUP, "PyTorch too old or changed",
            f"PyTorch {torch.__version__} has no {', '.join(missing)}, which mode={mode!r} "
            "needs (PyTorch 2.8 or later has them)")


def _check_entry_points():
    """The entry points exist in the library PyTorch will dlopen (a clear error if not)."""
    lib = _v.library()
    for name in ("vmmx_torch_alloc", "vmmx_torch_free"):
        if not hasattr(lib, name):
            raise _v.VmmxError("vmmx.torch", _v.ENOENT, "old libvmmx",
                               f"no {name} in {_v.library_path()}")
