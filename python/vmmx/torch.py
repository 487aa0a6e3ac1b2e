# SPDX-License-Identifier: MIT
"""PyTorch on libvmmx: the two lines a user adds::

    import vmmx.torch
    vmmx.torch.enable(device_limit="8GiB")     # before the first CUDA tensor

Then ``vmmx.torch.stats()`` says where the memory is, and
``vmmx.torch.offload(model, lookahead=2)`` streams parameters that did not
fit on the GPU in ahead of the modules that use them.

Two ways in (``mode=``):

``"pool"`` (default)
    PyTorch's own caching allocator keeps running and asks libvmmx only for
    its segments, through a ``torch.cuda.MemPool`` over a
    ``CUDAPluggableAllocator`` of ``vmmx_torch_alloc``/``vmmx_torch_free``.
    Allocations of every thread and stream are routed to that pool
    (``torch._C._cuda_beginAllocateToPool``: the autograd threads too; CUDA
    graph captures push their own pool on top and keep it).  PyTorch's
    ``memory_stats()``, ``memory_allocated()``, ``memory_summary()``,
    ``record_stream`` and CUDA graphs keep working, and allocation costs what
    it costs natively.  ``torch.cuda.empty_cache()`` cannot release the pool
    while allocations are routed to it: use :func:`empty_cache`.

``"allocator"``
    ``torch.cuda.memory.change_current_allocator`` with libvmmx's own caching
    allocator (``lib/alloc.c``).  PyTorch's memory statistics then raise
    (``CUDAPluggableAllocator does not yet support getDeviceStats``),
    ``record_stream`` is ignored (libvmmx orders frees on the allocation
    stream only) and CUDA graphs cannot capture; it must be chosen before
    CUDA is initialised.
"""
import queue
import threading
import warnings

import torch

import vmmx as _v

__all__ = ["enable", "is_enabled", "stats", "empty_cache", "prefetch", "offload", "Offloader"]

_state = {"mode": None, "pools": {}, "plug": None, "devices": []}
_lock = threading.Lock()


def _devices(devices):
    n = torch.cuda.device_count()
    if n == 0:
        raise _v.VmmxError("vmmx.torch.enable", _v.ENOENT, "no CUDA device",
                           "torch.cuda.device_count() is 0")
    if devices is None:
        return list(range(n))
    out = [_index(d) for d in devices]
    for d in out:
        if not 0 <= d < n:
            raise _v.VmmxError("vmmx.torch.enable", _v.EINVAL, "no such device", f"cuda:{d}")
    return out


def _index(device):
    if device is None:
        return torch.cuda.current_device()
    if isinstance(device, int):
        return device
    return torch.device(device).index or 0


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


def _route(d):
    """Make a pool on device d and route every allocation there."""
    with torch.cuda.device(d):
        pool = torch.cuda.MemPool(_state["plug"].allocator())
    torch._C._cuda_beginAllocateToPool(d, pool.id)
    _state["pools"][d] = pool


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
    (default all).

    Raises VmmxError when a setting is refused (with libvmmx's message), when
    it is too late (PyTorch already holds CUDA memory; ``force=True`` lets
    the pool mode go on, leaving what exists where it is), or when called
    twice.
    """
    with _lock:
        if _state["mode"]:
            raise _v.VmmxError("vmmx.torch.enable", _v.EBUSY, "already enabled",
                               f"mode {_state['mode']!r} on devices {_state['devices']}")
        if mode not in ("pool", "allocator"):
            raise _v.VmmxError("vmmx.torch.enable", _v.EINVAL, "bad mode",
                               f"{mode!r}: use 'pool' or 'allocator'")
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
        _v.configure(policy=policy, device_limit=device_limit, host_limit=host_limit,
                     device_headroom=device_headroom, **settings)
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
    d = _index(device)
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


def _tensors(obj):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, torch.nn.Module):
        yield from obj.parameters()
        yield from obj.buffers()
    else:
        for o in obj:
            yield from _tensors(o)


def _ranges(obj, owned_only):
    """(device, ptr, nbytes) of each distinct CUDA storage under obj."""
    seen = set()
    for t in _tensors(obj):
        if not t.is_cuda:
            continue
        st = t.untyped_storage()
        ptr, n = st.data_ptr(), st.nbytes()
        if not n or ptr in seen:
            continue
        seen.add(ptr)
        d = t.device.index
        if owned_only and not _v.owns_segment(ptr, n, d):
            continue
        yield d, ptr, n


def prefetch(obj, to="device", stream=None, owned_only=True):
    """Move the memory of tensors (a tensor, a module's parameters and buffers, a list).

    ``to``: "device" or "host".  The move waits for the work queued on
    ``stream`` (default: the current stream), then blocks until the data
    moved.  ``owned_only`` (default) moves only tensors that fill a libvmmx
    buffer of their own (large ones: see vmmx.owns_segment); others share
    chunks with live tensors that kernels may be using.  Memory not from
    libvmmx is skipped.  Returns the bytes asked for.
    """
    total, waited = 0, set()
    for d, ptr, n in _ranges(obj, owned_only):
        loc = _v.DEVICE(d) if to == "device" else _v.HOST
        if d not in waited:
            # the work queued so far first (an event: the default stream's handle is 0,
            # which vmmx_prefetch would read as "no stream")
            ev = torch.cuda.Event()
            ev.record(stream if stream is not None else torch.cuda.current_stream(d))
            ev.synchronize()
            waited.add(d)
        try:
            _v.prefetch(ptr, n, loc, device=d)
        except _v.VmmxError as e:
            if e.code != _v.ENOENT:
                raise
            continue
        total += n
    return total


class _Unit:
    def __init__(self, index, module, ranges):
        self.index, self.module, self.ranges = index, module, ranges
        self.nbytes = sum(n for _, _, n in ranges)
        self.resident = None      # on the device; None: unknown
        self.job = None           # threading.Event of a move in flight
        self.error = None
        self.warned = False
        self.done = None          # torch.cuda.Event recorded after its last use


class Offloader:
    """Streams the parameters of a model's modules to the GPU ahead of use.

    Made by :func:`offload`.  Units are the modules that own parameters (in
    registration order, the order of execution for most models).  Before a
    unit runs (forward, and backward when training), the next ``lookahead``
    units are moved in on a helper thread, after the work queued so far (an
    event), so copies overlap the current unit's kernels.  When the device is
    full, the resident unit used furthest in the future (forward then
    backward order) is moved out first, after its last use completed.  Only
    parameters in buffers of their own move (see vmmx.owns_segment).
    """

    def __init__(self, model, lookahead=1, headroom=None, backward=True):
        self.lookahead = max(1, int(lookahead))
        self.units, self.handles, self.closed = [], [], False
        for m in model.modules():
            direct = list(m.parameters(recurse=False)) + list(m.buffers(recurse=False))
            rng = list(_ranges(direct, True))
            if rng:
                self.units.append(_Unit(len(self.units), m, rng))
        self.q = queue.Queue()
        self.phase, self.pos, self.training = "fwd", 0, False
        self.worker = threading.Thread(target=self._run, name="vmmx-offload", daemon=True)
        self.worker.start()
        for u in self.units:
            u.resident = self._is_resident(u)
            self.handles.append(u.module.register_forward_pre_hook(self._pre_fwd(u)))
            self.handles.append(u.module.register_forward_hook(self._post(u)))
            if backward:
                self.handles.append(u.module.register_full_backward_pre_hook(self._pre_bwd(u)))
                self.handles.append(u.module.register_full_backward_hook(self._post(u)))
        if headroom:
            self._make_room(int(headroom))

    # -- where things are

    def _is_resident(self, u):
        for d, ptr, n in u.ranges:
            r = _v.residency(ptr, n, d)
            if r is None or r[1]:
                return False
        return True

    def _distance(self, u, i):
        """How far ahead unit u is next used, seen from unit i in the current phase."""
        n = len(self.units)
        if self.phase == "fwd":
            if u > i:
                return u - i
            return (2 * n - 1 - i - u) if self.training else (n - i + u)
        return i - u if u < i else i + 1 + u

    # -- hooks

    def _pre_fwd(self, u):
        def hook(module, args):
            # grad mode is per thread: read it here, not in the helper thread
            self.phase, self.training = "fwd", torch.is_grad_enabled() and module.training
            self._enter(u, range(u.index + 1, u.index + 1 + self.lookahead))
        return hook

    def _pre_bwd(self, u):
        def hook(module, grad_output):
            self.phase = "bwd"
            self._enter(u, range(u.index - 1, u.index - 1 - self.lookahead, -1))
        return hook

    def _post(self, u):
        def hook(*args):
            ev = torch.cuda.Event()
            ev.record()
            u.done = ev
        return hook

    def _enter(self, u, ahead):
        if self.closed:
            return
        self.pos = u.index
        # Moves start after the work queued so far: what they unmap is used by nothing.
        mark = torch.cuda.Event()
        mark.record()
        if not u.resident:
            self._wait(self._submit(u, mark) if u.job is None else u)
        elif u.job is not None:
            self._wait(u)
        for j in ahead:
            if 0 <= j < len(self.units):
                w = self.units[j]
                if not w.resident and w.job is None:
                    self._submit(w, mark)

    def _submit(self, u, mark):
        u.job, u.error = threading.Event(), None
        self.q.put((u, mark, self.pos))
        return u

    def _wait(self, u):
        job = u.job
        if job is not None:
            job.wait()
        if u.error is not None:
            err, u.error = u.error, None
            if not u.warned:
                u.warned = True
                warnings.warn(f"vmmx offload: unit {u.index} stays where it is: {err}")

    # -- the helper thread

    def _run(self):
        while True:
            item = self.q.get()
            if item is None:
                return
            u, mark, pos = item
            try:
                if mark is not None:
                    mark.synchronize()
                self._bring(u, pos)
            except Exception as e:  # reported in the hook that waits for it
                u.error = e
            finally:
                job, u.job = u.job, None
                job.set()

    def _move(self, u, loc):
        for d, ptr, n in u.ranges:
            _v.prefetch(ptr, n, loc(d), device=d)

    def _bring(self, u, pos):
        while True:
            try:
                self._move(u, _v.DEVICE)
                u.resident = True
                return
            except _v.VmmxError as e:
                if e.code != _v.ENOMEM or not self._evict_one(u, pos):
                    raise

    def _evict_one(self, keep, pos):
        cands = [w for w in self.units
                 if w.resident and w is not keep and w.index != pos and w.job is None]
        if not cands:
            return False
        v = max(cands, key=lambda w: self._distance(w.index, pos))
        if v.done is not None:
            v.done.synchronize()
        self._move(v, lambda d: _v.HOST)
        v.resident = False
        return True

    def _make_room(self, headroom):
        if not self.units:
            return
        d, room = self.units[0].ranges[0][0], None
        for loc in _v.context_stats(d)["locations"]:
            if loc["location"] == f"device:{d}":
                cap = min(x for x in (loc["limit"], loc["total"]) if x is not None)
                room = cap - loc["held"] + loc["cached"]
        if room is None:
            return
        torch.cuda.synchronize()  # the kernels that initialised the weights are done
        order = sorted(self.units, key=lambda w: -self._distance(w.index, 0))
        for w in order:
            if room >= headroom:
                break
            if w.resident:
                self._move(w, lambda dd: _v.HOST)
                w.resident = False
                room += w.nbytes

    def close(self):
        """Remove the hooks and stop the helper thread (moves in flight finish)."""
        if self.closed:
            return
        self.closed = True
        for h in self.handles:
            h.remove()
        self.q.put(None)
        self.worker.join()


def offload(model, lookahead=1, headroom=None, backward=True):
    """Stream a model's parameters to the GPU ahead of the modules that use them.

    The model's code is unchanged; forward (and backward) hooks do the work.
    ``lookahead``: how many units ahead to move in.  ``headroom``: bytes of
    device memory to free up front for activations by moving the units used
    last out.  ``backward``: also prefetch in backward order, through full
    backward hooks (PyTorch refuses those on a module whose output is then
    modified in place, e.g. by ``ReLU(inplace=True)``: pass False there).
    Returns the :class:`Offloader` (``.close()`` removes it).  Needs
    vmmx.torch.enable() (parameters must live in libvmmx buffers).
    """
    if not _state["mode"]:
        raise _v.VmmxError("vmmx.torch.offload", _v.EINVAL, "libvmmx is not enabled",
                           "call vmmx.torch.enable() before the model is made")
    return Offloader(model, lookahead=lookahead, headroom=headroom, backward=backward)


def _check_entry_points():
    """The entry points exist in the library PyTorch will dlopen (a clear error if not)."""
    lib = _v.library()
    for name in ("vmmx_torch_alloc", "vmmx_torch_free"):
        if not hasattr(lib, name):
            raise _v.VmmxError("vmmx.torch", _v.ENOENT, "old libvmmx",
                               f"no {name} in {_v.library_path()}")
