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
    """A module that owns parameters directly: what offload streams or keeps."""

    def __init__(self, index, module, params):
        self.index, self.module = index, module
        self.params = params      # [(param, device, ptr, nbytes)]: owned segments only
        self.nbytes = sum(n for _, _, _, n in params)
        self.slot_need = sum(_align(n) for _, _, _, n in params)
        self.streamed = False
        self.home = []            # the parameters' own tensors (host memory once streamed)
        self.src = []             # what slot copies read: home, or its pinned CPU view
        self.versions = []        # their _version when last copied into a slot
        self.slot = None          # the slot holding (or loading) its parameters
        self.active = False       # running from its slot now


def _align(n, a=256):
    return (n + a - 1) // a * a


class Offloader:
    """Streams the parameters that do not fit through a few device slots.

    Made by :func:`offload`.  Units are the modules that own parameters; a
    unit that contains other units (a model's top module holding its
    embedding), or shares a parameter with another, always stays where it
    is.  At setup the units that do not fit in the device budget (the cap,
    less the rest of the memory in use, ``headroom`` and the slots) are
    chosen evenly spread over the execution order and moved to host memory
    once; the others are moved to the GPU.  Each pass, a streamed unit's
    parameters are copied on a side stream into one of ``lookahead`` (at
    least 2) device buffers, the slots, ahead of its turn, the unit runs on views of that slot (its
    parameters' ``.data`` are swapped in by the pre-hook and back by the
    post-hook), and the slot takes the next unit's copy once the unit's
    kernels are done: the GPU orders all of it with events, the CPU never
    waits.  Copies run while the resident units between two streamed ones
    compute.  A parameter changed in place between passes (an optimizer
    step) is seen by its version counter and copied again.
    """

    def __init__(self, model, lookahead=2, headroom=None, backward=True, home="vmmx"):
        if home not in ("vmmx", "pinned"):
            raise _v.VmmxError("vmmx.torch.offload", _v.EINVAL, "bad home",
                               f"{home!r}: use 'vmmx' or 'pinned'")
        self.home_kind = home
        self.nslots = max(2, int(lookahead))
        self.closed, self.handles = False, []
        self.lock = threading.RLock()
        self.phase, self.training = "fwd", False
        self.counters = {"copies": 0, "recopies": 0, "from_host": 0}
        self.units = self._find_units(model)
        if not self.units:
            self.streamed, self.slots = [], []
            return
        self.device = self.units[0].params[0][1]
        self.headroom = _headroom(headroom, self.device)
        torch.cuda.synchronize(self.device)  # the kernels that made the weights are done
        self._plan()
        self.side = torch.cuda.Stream(self.device)
        self.ready = [torch.cuda.Event() for _ in self.slots]
        self.free = [torch.cuda.Event() for _ in self.slots]
        self.owner = [None] * len(self.slots)
        for u in self.streamed:
            self.handles.append(u.module.register_forward_pre_hook(self._pre_fwd(u)))
            self.handles.append(u.module.register_forward_hook(self._post(u)))
            if backward:
                self.handles.append(u.module.register_full_backward_pre_hook(self._pre_bwd(u)))
                self.handles.append(u.module.register_full_backward_hook(self._post(u)))
        with self.lock:
            self._fill(-1)

    # -- setup

    @staticmethod
    def _find_units(model):
        mods = [m for m in model.modules() if list(m.parameters(recurse=False))]
        owner_count = {}
        for m in mods:
            for p in m.parameters(recurse=False):
                owner_count[id(p)] = owner_count.get(id(p), 0) + 1
        units = []
        for m in mods:
            container = any(c is not m and list(c.parameters(recurse=False))
                            for c in m.modules())
            params = []
            for p in m.parameters(recurse=False):
                if not p.is_cuda or owner_count[id(p)] > 1 or p.untyped_storage().nbytes() == 0:
                    continue
                st = p.untyped_storage()
                if p.data_ptr() != st.data_ptr() or p.nbytes != st.nbytes():
                    continue  # a view into a larger storage: not a home of its own
                ptr, n, d = st.data_ptr(), st.nbytes(), p.device.index
                if _v.owns_segment(ptr, n, d):
                    params.append((p, d, ptr, n))
            u = _Unit(len(units), m, params)
            u.container = container
            units.append(u)
        return [u for u in units if u.params]

    def _room(self):
        """Device bytes the units may use: the cap less the rest of the memory in use."""
        d = self.device
        cap, held = _device_cap(d)
        if cap is None:
            return None
        on_dev = 0
        for u in self.units:
            for _, dd, ptr, n in u.params:
                r = _v.residency(ptr, n, dd)
                on_dev += r[0] if r else 0
        return cap - (held - on_dev)

    def _plan(self):
        """Choose the streamed units, move them out and the others in, make the slots."""
        total = sum(u.nbytes for u in self.units)
        strays = self._strays()
        room = self._room()
        if room is not None:
            room -= sum(host for _, _, host in strays)  # they come to the GPU below
        movable = [u for u in self.units if not u.container]
        slot_bytes = max(u.slot_need for u in movable) if movable else 0
        budget = None if room is None else room - self.headroom - self.nslots * slot_bytes
        self.streamed = []
        if movable and budget is not None and budget < total:
            deficit = total - max(0, budget)
            quota, mov = 0.0, sum(u.nbytes for u in movable)
            for u in movable:  # spread evenly, in proportion to bytes
                quota += deficit * u.nbytes / mov
                if quota >= u.nbytes / 2 and sum(w.nbytes for w in self.streamed) < deficit:
                    u.streamed = True
                    self.streamed.append(u)
                    quota -= u.nbytes
            for u in reversed(movable):  # rounding left some: the last ones
                if sum(w.nbytes for w in self.streamed) >= deficit:
                    break
                if not u.streamed:
                    u.streamed = True
                    self.streamed.append(u)
            self.streamed.sort(key=lambda w: w.index)
        for u in self.streamed:
            self._make_home(u)
        if self.home_kind == "pinned" and self.streamed:
            empty_cache()  # the streamed parameters' old segments: device room for the rest
        for u in self.units:
            if u.streamed:
                continue
            for p, d, ptr, n in u.params:
                try:
                    _v.prefetch(ptr, n, _v.DEVICE(d), device=d)
                except _v.VmmxError as e:
                    if e.code != _v.ENOMEM:
                        raise
        self.strays_moved = 0
        for ptr, n, host in strays:
            try:
                _v.prefetch(ptr, n, _v.DEVICE(self.device), device=self.device)
                self.strays_moved += host
            except _v.VmmxError as e:
                if e.code != _v.ENOMEM:
                    raise
        self.slots = []
        if self.streamed:
            for _ in range(min(self.nslots, len(self.streamed))):
                t = torch.empty(slot_bytes, dtype=torch.uint8, device=f"cuda:{self.device}")
                try:
                    _v.prefetch(t.data_ptr(), t.nbytes, _v.DEVICE(self.device),
                                device=self.device)
                except _v.VmmxError:
                    pass  # shared or no room: it works where it is, slower
                self.slots.append(t)

    def _strays(self):
        """Tensors in use outside the units that lie partly in host memory, as
        [(ptr, nbytes, host bytes)]: made while the device was full (the model's
        inputs, made after its weights), every kernel would read them over PCIe."""
        d = self.device
        mine = {ptr for u in self.units for _, _, ptr, _ in u.params}
        out = []
        for seg in torch.cuda.memory_snapshot():
            if seg.get("device") != d:
                continue
            addr = seg["address"]
            for b in seg["blocks"]:
                ptr, n = b.get("address", addr), b["size"]
                addr = ptr + n
                if b["state"] != "active_allocated" or ptr in mine:
                    continue
                r = _v.residency(ptr, n, d)
                if r and r[1]:
                    out.append((ptr, n, r[1]))
        return out

    def _make_home(self, u):
        """Move a streamed unit's parameters to their home in host memory."""
        u.src = []
        for p, d, ptr, n in u.params:
            if self.home_kind == "pinned":
                cpu = torch.empty(p.shape, dtype=p.dtype, pin_memory=True)
                cpu.copy_(p.data)
                p.data = _cuda_alias(cpu, d)  # the segment goes back to the pool
                u.src.append(cpu)
                continue
            try:
                _v.prefetch(ptr, n, _v.HOST, device=d)
            except _v.VmmxError as e:
                if e.code != _v.ENOMEM:
                    raise
            u.src.append(p.data)
        u.home = [p.data for p, _, _, _ in u.params]
        u.versions = [None] * len(u.params)

    # -- the schedule

    def _upcoming(self, after):
        """Streamed units in the order they are expected next, after unit index ``after``."""
        s = self.streamed
        if self.phase == "fwd":
            out = [u for u in s if u.index > after]
            out += list(reversed(s)) if self.training else [u for u in s if u.index <= after]
        else:
            out = [u for u in reversed(s) if u.index < after]
            # the optimizer step comes next and changes the parameters: no wrap-around
        return out

    def _copy(self, u, k):
        """Queue the copy of u's parameters into slot k on the side stream."""
        prev = self.owner[k]
        if prev is not None:
            prev.slot = None
        self.owner[k], u.slot = u, k
        now = torch.cuda.Event()
        now.record(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(self.side):
            self.side.wait_event(self.free[k])  # the slot's last user is done
            self.side.wait_event(now)           # and the parameters' last writer
            off = 0
            for h in u.src:
                n = h.nbytes
                self.slots[k][off:off + n].view(h.dtype).view(h.shape).copy_(h, non_blocking=True)
                off = _align(off + n)
            self.ready[k].record(self.side)
        u.versions = [p._version for p, _, _, _ in u.params]
        self.counters["copies"] += 1

    def _fill(self, after):
        """Copy the next streamed units into the slots no active unit holds."""
        want = []
        for u in self._upcoming(after):
            if len(want) == len(self.slots):
                break
            if not u.active:
                want.append(u)
        for u in want:
            if u.slot is not None:
                continue
            k = next((i for i, o in enumerate(self.owner)
                      if o is None or (not o.active and o not in want)), None)
            if k is None:
                return
            self._copy(u, k)

    def _enter(self, u):
        with self.lock:
            if self.closed or u.active:
                return
            stale = u.slot is not None and any(
                p._version != v for (p, _, _, _), v in zip(u.params, u.versions))
            if u.slot is None or stale:
                k = u.slot if u.slot is not None else next(
                    (i for i, o in enumerate(self.owner) if o is None or not o.active), None)
                if k is None:  # every slot busy (nested units): run from host memory
                    self.counters["from_host"] += 1
                    return
                if stale:
                    self.counters["recopies"] += 1
                self._copy(u, k)
            k = u.slot
            torch.cuda.current_stream(self.device).wait_event(self.ready[k])
            off = 0
            for (p, _, _, _), h in zip(u.params, u.home):
                p.data = self.slots[k][off:off + h.nbytes].view(h.dtype).view(h.shape)
                off = _align(off + h.nbytes)
            u.active = True

    def _pre_fwd(self, u):
        def hook(module, args):
            # grad mode is per thread: read it here
            self.phase, self.training = "fwd", torch.is_grad_enabled() and module.training
            self._enter(u)
        return hook

    def _pre_bwd(self, u):
        def hook(module, grad_output):
            self.phase = "bwd"
            self._enter(u)
        return hook

    def _post(self, u):
        def hook(*args):
            with self.lock:
                if not u.active:
                    return
                k = u.slot
                self.free[k].record(torch.cuda.current_stream(self.device))
                for (p, _, _, _), h in zip(u.params, u.home):
                    p.data = h
                u.versions = [p._version for p, _, _, _ in u.params]
                u.active = False
                self._fill(u.index)
        return hook

    def stats(self):
        """Units, bytes streamed per pass, slots, and what the hooks did."""
        return dict(self.counters, units=len(self.units), streamed=len(self.streamed),
                    streamed_bytes=sum(u.nbytes for u in self.streamed),
                    slots=len(self.slots), strays_moved_bytes=getattr(self, "strays_moved", 0),
                    slot_bytes=self.slots[0].nbytes if self.slots else 0,
                    headroom=getattr(self, "headroom", 0), home=self.home_kind)

    def close(self):
        """Remove the hooks; streamed parameters stay in host memory."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            for h in self.handles:
                h.remove()
            for u in self.streamed:
                if u.active:
                    for (p, _, _, _), h in zip(u.params, u.home):
                        p.data = h
                    u.active = False
            torch.cuda.synchronize(self.device)
            self.slots = []


class _CudaArray:
    """A pinned CPU tensor's bytes seen through __cuda_array_interface__ (UVA)."""

    def __init__(self, cpu):
        self.cpu = cpu  # kept alive by the CUDA tensor made from this object
        self.__cuda_array_interface__ = {"shape": (cpu.nbytes,), "typestr": "|u1",
                                         "data": (cpu.data_ptr(), False), "version": 3,
                                         "strides": None}


def _cuda_alias(cpu, device):
    """A CUDA tensor over the pinned memory of ``cpu`` (same shape and dtype)."""
    with torch.cuda.device(device):
        raw = torch.as_tensor(_CudaArray(cpu), device=f"cuda:{device}")
    return raw.view(cpu.dtype).view(cpu.shape)


def _device_cap(device):
    """(cap, held): the device's limit (or its memory) and the bytes libvmmx holds there
    that are in use (not cached); (None, 0) when the context has no such location."""
    for loc in _v.context_stats(device)["locations"]:
        if loc["location"] == f"device:{device}":
            return (min(x for x in (loc["limit"], loc["total"]) if x is not None),
                    loc["held"] - loc["cached"])
    return None, 0


def _headroom(headroom, device):
    """Bytes of device memory offload leaves for activations (default: 1/8 of the cap)."""
    if headroom is not None:
        return _v.parse_size(headroom)
    cap, _ = _device_cap(device)
    return cap // 8 if cap is not None else 0


def offload(model, lookahead=2, headroom=None, backward=True, home="vmmx"):
    """Run a model whose parameters do not fit on the GPU, streaming the rest.

    The model's code is unchanged; forward (and backward) hooks do the work.
    Units that fit stay on the GPU; the others, spread evenly over the
    execution order, live in host memory and are copied into ``lookahead``
    (at least 2) device slots ahead of their turn, overlapping the resident
    units' compute (see :class:`Offloader`).  ``headroom``: device memory left
    for activations (bytes or text such as "1GiB"; default 1/8 of the cap).
    ``backward``: also stream in backward order, through full backward hooks
    (PyTorch refuses those on a module whose output is then modified in place,
    e.g. by ``ReLU(inplace=True)``: pass False there; backward then reads
    such parameters from host memory, correct but slower).  Returns the
    :class:`Offloader` (``.stats()``, ``.close()``).  ``home``: where streamed
    parameters live between uses: ``"vmmx"`` (their own buffers, moved to
    host memory) or ``"pinned"`` (page-locked host memory from PyTorch, seen
    by the GPU at the same address; copies run on the copy engines).  Needs
    vmmx.torch.enable() before the model is made (parameters must live in
    libvmmx buffers).
    """
    if not _state["mode"]:
        raise _v.VmmxError("vmmx.torch.offload", _v.EINVAL, "libvmmx is not enabled",
                           "call vmmx.torch.enable() before the model is made")
    return Offloader(model, lookahead=lookahead, headroom=headroom, backward=backward, home=home)


def _check_entry_points():
    """The entry points exist in the library PyTorch will dlopen (a clear error if not)."""
    lib = _v.library()
    for name in ("vmmx_torch_alloc", "vmmx_torch_free"):
        if not hasattr(lib, name):
            raise _v.VmmxError("vmmx.torch", _v.ENOENT, "old libvmmx",
                               f"no {name} in {_v.library_path()}")
