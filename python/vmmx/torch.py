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
import functools
import logging
import threading
import weakref

import torch

import vmmx as _v
from vmmx import _args

__all__ = ["enable", "is_enabled", "stats", "empty_cache", "prefetch", "offload", "Offloader"]

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
    libvmmx is skipped.  Returns the bytes asked for.  ``stream``: None or a
    torch.cuda.Stream (torch.cuda.ExternalStream wraps a raw handle).
    """
    fn = "vmmx.torch.prefetch"
    _args.choice(fn, "to", to, ("device", "host"))
    owned_only = _args.flag(fn, "owned_only", owned_only)
    if stream is not None and not isinstance(stream, torch.cuda.Stream):
        raise TypeError(f"{fn}: stream must be None or a torch.cuda.Stream "
                        f"(torch.cuda.ExternalStream(handle) for a raw one), "
                        f"not {type(stream).__name__}")
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


# Units smaller than this never stream: a copy and two events to save the room of a
# norm's weights (the spread used to pick Llama's norms, whose slots then held the
# wrong units: 2.45 copies of every streamed unit a pass)
_MIN_STREAM = 1 << 20


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
        self.pending = set()      # ids of its parameters the stepper has yet to step
        self.deferred = False     # backward is done with it; the stepper releases it
        self.written = torch.cuda.Event()  # its last write-back home is done
        self.wb_stream = None     # the stream of its write-backs this step


def _align(n, a=256):
    return (n + a - 1) // a * a


def _part(u, piece):
    """The parameters of unit u a slot of ``piece`` bytes holds, the largest first,
    in u's order."""
    take, used = set(), 0
    for i in sorted(range(len(u.params)), key=lambda i: -u.params[i][3]):
        if used + _align(u.params[i][3]) <= piece:
            take.add(i)
            used += _align(u.params[i][3])
    return [t for i, t in enumerate(u.params) if i in take]


def _prefixes(u):
    """The slot sizes unit u's largest parameters fill, one more each time."""
    out, used = [], 0
    for n in sorted((t[3] for t in u.params), reverse=True):
        used += _align(n)
        out.append(used)
    return out


class Offloader:
    """Streams the parameters that do not fit through a few device slots.

    Made by :func:`offload`.  Units are the modules that own parameters; a
    unit that contains other units (a model's top module holding its
    embedding), or shares a parameter with another, always stays where it
    is.  At setup the units that do not fit in the device budget (the cap,
    less the rest of the memory in use, ``headroom`` and the slots) are
    chosen evenly spread over the execution order and moved to host memory
    once; the others are moved to the GPU.  A slot's room is streamed bytes
    too, so a unit need not stream whole: the slot size is the one that
    streams the fewest bytes in all (``_piece``), and a streamed unit streams
    the largest of its parameters that fill it, the rest staying on the GPU.
    Each pass, a streamed unit's parameters are copied on a side stream into
    one of ``lookahead`` (at least 2) device buffers, the slots, ahead of its
    turn, the unit runs on views of that slot (its parameters' ``.data`` are
    swapped in by the pre-hook and back by the post-hook), and the slot takes the next unit's copy once the unit's
    kernels are done: the GPU orders all of it with events, the CPU never
    waits.  Copies run while the resident units between two streamed ones
    compute.  A parameter changed in place between passes (an optimizer
    step) is seen by its version counter and copied again.
    """

    def __init__(self, model, lookahead=2, headroom=None, backward=True, home="vmmx",
                 optimizer=None):
        lookahead, headroom, backward = _offload_args(lookahead, headroom, backward)
        if home not in ("vmmx", "pinned"):
            raise _v.VmmxError("vmmx.torch.offload", _v.EINVAL, "bad home",
                               f"{home!r}: use 'vmmx' or 'pinned'")
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise _v.VmmxError("vmmx.torch.offload", _v.EINVAL, "bad optimizer",
                               f"{type(optimizer).__name__} is not a torch.optim.Optimizer")
        self.home_kind = home
        self.nslots = max(2, lookahead)
        self.closed, self.handles = False, []
        self.lock = threading.RLock()
        self.phase, self.training = "fwd", False
        self.counters = {"copies": 0, "recopies": 0, "from_host": 0}
        self.seen, self._order = {}, None  # the forward order of the units (_key)
        self.units, self.owned = self._find_units(model)
        self.streamed, self.slots, self.stepper, self.stepped_by = [], [], None, None
        self.device = self.units[0].params[0][1] if self.units else _first_cuda(optimizer)
        if self.device is None:
            return
        self.headroom = _headroom(headroom, self.device)
        torch.cuda.synchronize(self.device)  # the kernels that made the weights are done
        if optimizer is not None:
            self.stepper = _Stepper(self, model, optimizer)
        self.stepped_by = self.stepper
        if not self.units:
            return
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
        """The units, and the ids of their parameters that fill a libvmmx buffer of their
        own (those move by migration; the others, carved out of a larger segment such as
        transformers' warm-up tensor, move by copy, one tensor at a time)."""
        mods = [m for m in model.modules() if list(m.parameters(recurse=False))]
        owner_count = {}
        for m in mods:
            for p in m.parameters(recurse=False):
                owner_count[id(p)] = owner_count.get(id(p), 0) + 1
        units, owned = [], set()
        for m in mods:
            container = any(c is not m and list(c.parameters(recurse=False))
                            for c in m.modules())
            params = []
            for p in m.parameters(recurse=False):
                if not p.is_cuda or owner_count[id(p)] > 1 or p.untyped_storage().nbytes() == 0:
                    continue
                st = p.untyped_storage()
                if p.data_ptr() != st.data_ptr() or p.nbytes != st.nbytes() \
                        or not p.is_contiguous():
                    continue  # a view into a larger storage: not a home of its own
                ptr, n, d = st.data_ptr(), st.nbytes(), p.device.index
                if _v.lookup(ptr, d) is not None:  # memory from libvmmx only
                    params.append((p, d, ptr, n))
                    if _v.owns_segment(ptr, n, d):
                        owned.add(id(p))
            u = _Unit(len(units), m, params)
            u.container = container
            units.append(u)
        return [u for u in units if u.params], owned

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
        self.streamed, kept = [], []
        if movable and room is not None and total > room - self.headroom:
            piece, deficit = self._piece(movable, total, room)
            part = {id(u): _part(u, piece) for u in movable}
            size = {id(u): sum(n for _, _, _, n in part[id(u)]) for u in movable}
            got = lambda: sum(size[id(w)] for w in self.streamed)  # noqa: E731
            quota, mov = 0.0, sum(size.values())
            for u in movable:  # spread evenly, in proportion to bytes
                quota += deficit * size[id(u)] / mov
                if size[id(u)] >= _MIN_STREAM and quota >= size[id(u)] / 2 and \
                        got() < deficit:
                    self.streamed.append(u)
                    quota -= size[id(u)]
            for u in reversed(movable):  # rounding left some: the last ones
                if got() >= deficit:
                    break
                if size[id(u)] >= _MIN_STREAM and u not in self.streamed:
                    self.streamed.append(u)
            self.streamed.sort(key=lambda w: w.index)
            for u in self.streamed:  # the parameters past the piece stay on the GPU
                mine = {id(t[0]) for t in part[id(u)]}
                kept += [t for t in u.params if id(t[0]) not in mine]
                u.params, u.streamed = part[id(u)], True
                u.nbytes = size[id(u)]
                u.slot_need = sum(_align(n) for _, _, _, n in u.params)
            for t in kept if self.stepper is not None else ():
                self.stepper.unit.pop(id(t[0]), None)  # stepped in place, as resident
        slot_bytes = max((u.slot_need for u in self.streamed), default=0)
        spare = {}  # device storage the streamed parameters left: room for kept ones
        self.ballast = []  # host storage held so that PyTorch's cache never hands it out
        self._make_homes(spare)
        self._bring_in([t for u in self.units if not u.streamed for t in u.params] + kept,
                       spare)
        spare.clear()  # what no kept parameter took: free blocks on the GPU, for activations
        self.strays_moved = 0
        for ptr, n, host in strays:
            if _prefetch_if_room(ptr, n, _v.DEVICE(self.device), self.device):
                self.strays_moved += host
        self.slots = [_slot(slot_bytes, self.device)
                      for _ in range(min(self.nslots, len(self.streamed)))]

    def _make_homes(self, spare):
        """Move the streamed units' parameters to their homes in host memory.

        A parameter filling a libvmmx buffer of its own migrates (home "vmmx").
        The others share a segment with live tensors (transformers loads a
        checkpoint into one warm-up tensor's segment), which must not move under
        them: they are copied, one by one, into an arena of libvmmx host memory
        (or pinned memory for home "pinned"), and the device storage they leave
        goes to ``spare`` (by size) for the kept parameters that lie in host
        memory: the device bytes are reused in place, whatever segment holds them.
        """
        d = self.device
        copied = [t for u in self.streamed for t in u.params
                  if self.home_kind == "pinned" or id(t[0]) not in self.owned]
        arena = None
        if self.home_kind == "vmmx" and copied:
            arena = _arena(sum(_align(n) for _, _, _, n in copied), d)
        off, self.copied_bytes = 0, sum(n for _, _, _, n in copied)
        for u in self.streamed:
            u.src = []
            for i, (p, dd, ptr, n) in enumerate(u.params):
                if self.home_kind == "pinned":
                    old = p.data
                    cpu, p.data = _pin(old, d)
                    u.src.append(cpu)
                elif id(p) in self.owned:
                    _prefetch_if_room(ptr, n, _v.HOST, d)
                    u.src.append(p.data)
                    continue
                else:
                    old = p.data
                    home = arena[off:off + n].view(p.dtype).view(p.shape)
                    off = _align(off + n)
                    _copy_split(home, old, d)
                    p.data = home
                    u.src.append(home)
                if _on_device(old, d) < n:
                    self.ballast.append(old)  # freed, activations would land there
                elif id(p) not in self.owned:
                    spare.setdefault(n, []).append(old)
                u.params[i] = (p, dd, p.data_ptr(), n)
            u.home = [p.data for p, _, _, _ in u.params]
            u.versions = [None] * len(u.params)
        torch.cuda.synchronize(d)

    def _bring_in(self, kept, spare):
        """Put the kept parameters on the GPU: a copy into device storage a streamed
        parameter left, else a migration of the chunks under them, else a copy into a
        new tensor.  What finds no room stays where it is (counted in stats)."""
        d, self.kept_host_bytes, moved = self.device, 0, 0
        for p, _, ptr, n in kept:
            if _on_device(p.data, d) >= n:
                continue
            if spare.get(n):
                new = spare[n].pop().view(-1).view(torch.uint8).view(p.dtype).view(p.shape)
            else:
                # migrate the chunks under it (the GPU is idle: setup synchronized it, so
                # no kernel uses what shares them), room permitting
                _prefetch_if_room(ptr, n, _v.DEVICE(d), d)
                if _on_device(p.data, d) >= n:
                    continue
                new = torch.empty_like(p.data) if id(p) not in self.owned else None
                if new is None or _on_device(new, d) < n:
                    del new
                    self.kept_host_bytes += n - _on_device(p.data, d)
                    continue
            _copy_split(new, p.data, d)
            if _on_device(p.data, d) < n:
                # its old storage stays held: freed, PyTorch's cache would hand that host
                # memory to the next allocations (activations, read over the link)
                self.ballast.append(p.data)
            p.data = new
            self.owned.discard(id(p))
            moved += n
        torch.cuda.synchronize(d)
        self.brought_bytes = moved

    def _piece(self, movable, total, room):
        """The slot size that streams the fewest bytes, and the bytes to stream.

        Each slot costs device room, so it is streamed bytes too: a unit need
        not stream whole.  For each size a unit's largest parameters can fill
        (``_part``), smallest first, the deficit is what does not fit beside
        the headroom and the slots; the first size whose parts cover it wins,
        else the largest (stream all that can be)."""
        sizes = sorted({c for u in movable for c in _prefixes(u)})
        for c in sizes:
            deficit = total - (room - self.headroom - self.nslots * c)
            if sum(sum(n for _, _, _, n in _part(u, c)) for u in movable) >= deficit:
                return c, deficit
        return sizes[-1], total - (room - self.headroom - self.nslots * sizes[-1])

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

    # -- the schedule

    def _key(self, u):
        """u's place in the forward order seen so far; units not seen yet after the
        seen ones, by index (the order of registration, which may differ from the
        order of execution: a Llama layer registers its norms after its MLP)."""
        return self.seen.get(id(u), len(self.units) + u.index)

    def _upcoming(self, after):
        """Streamed units in the order they are expected next, after the unit whose
        key (:meth:`_key`) is ``after``."""
        if self._order is None:
            self._order = sorted(self.streamed, key=self._key)
        s, key = self._order, self._key
        if self.phase == "fwd":
            out = [u for u in s if key(u) > after]
            out += list(reversed(s)) if self.training else [u for u in s if key(u) <= after]
        else:
            out = [u for u in reversed(s) if key(u) < after]
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
            self.side.wait_event(u.written)     # and their last write-back home
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
            if id(u) not in self.seen:  # the order of execution, learnt on the first pass
                with self.lock:
                    self.seen[id(u)] = len(self.seen)
                    self._order = None
            self._enter(u)
        return hook

    def _pre_bwd(self, u):
        def hook(module, grad_output):
            self.phase = "bwd"
            self._enter(u)
            if u.active and self.stepper is not None:
                u.pending = {id(p) for p, _, _, _ in u.params if id(p) in self.stepper.group}
        return hook

    def _post(self, u):
        def hook(*args):
            with self.lock:
                if not u.active:
                    return
                if self.phase == "bwd" and u.pending:
                    u.deferred = True  # the stepper releases it once its parameters stepped
                    return
                self._release(u)
        return hook

    def _release(self, u):
        """u's kernels (and the stepper's write-backs of its parameters) are queued:
        its slot is free after them; swap its parameters back and fill the slots."""
        k, cur = u.slot, torch.cuda.current_stream(self.device)
        if u.wb_stream is not None:  # written back to their home there, reading the slot
            u.wb_stream.wait_stream(cur)
            u.written.record(u.wb_stream)
            self.free[k].record(u.wb_stream)
            u.wb_stream = None
        else:
            self.free[k].record(cur)
        for (p, _, _, _), h in zip(u.params, u.home):
            p.data = h
        u.versions = [p._version for p, _, _, _ in u.params]
        u.active = u.deferred = False
        u.pending = set()
        self._fill(self._key(u))

    def stats(self):
        """Units, bytes streamed per pass, slots, and what the hooks did; with an
        optimizer, what the stepper did (see :class:`_Stepper`)."""
        out = dict(self.counters, units=len(self.units), streamed=len(self.streamed),
                   streamed_bytes=sum(u.nbytes for u in self.streamed),
                   slots=len(self.slots), strays_moved_bytes=getattr(self, "strays_moved", 0),
                   slot_bytes=self.slots[0].nbytes if self.slots else 0,
                   headroom=getattr(self, "headroom", 0), home=self.home_kind,
                   copied_home_bytes=getattr(self, "copied_bytes", 0),
                   brought_in_bytes=getattr(self, "brought_bytes", 0),
                   kept_in_host_bytes=getattr(self, "kept_host_bytes", 0),
                   held_host_bytes=sum(t.nbytes for t in getattr(self, "ballast", ())))
        if self.stepped_by is not None:
            out["optimizer"] = self.stepped_by.stats()
        return out

    def close(self):
        """Remove the hooks; streamed parameters stay in host memory."""
        with self.lock:
            if self.closed:
                return
            self.closed = True
            for h in self.handles:
                h.remove()
            if self.stepper is not None:
                self.stepper.close()
            for u in self.streamed:
                if u.active:
                    for (p, _, _, _), h in zip(u.params, u.home):
                        p.data = h
                    u.active = False
            torch.cuda.synchronize(self.device)
            self.slots = []


_MIN_STATE = 1 << 20  # optimizer state tensors smaller than this stay where they are
# A slot's write-back and the copy of its next owner's state into it go in pieces of
# this size, each copy in waiting only for the write-back of the piece it overwrites:
# the two directions of the link then run at once instead of one after the other
# (H200: 55 GB/s each way alone, 50.6 each at once).  32 MiB is 0.6 ms of the link
# against a few microseconds of call and event per piece.
_PIECE = 32 << 20


class _Stepper:
    """The optimizer's step in backward, with its state streamed through device slots.

    Made by :func:`offload` when given the optimizer.  A hook on each of the
    optimizer's parameters (``register_post_accumulate_grad_hook``) runs the
    optimizer's own ``step()`` for that parameter alone as soon as its
    gradient is complete, then drops the gradient: gradients live for a
    moment instead of a whole step, and the ``optimizer.step()`` after
    backward finds nothing left to do.  A parameter streamed by the
    :class:`Offloader` is stepped in its slot and written back to its home.

    The first step runs as it comes: the optimizer makes its state where
    there is room.  Before the second forward the plan counts the state, the
    gradients' order and the activations that step measured, and moves the
    state of the parameters that do not fit, spread evenly over the backward
    order, to pinned host memory.  From then on that state is copied into
    one of ``lookahead`` (at least 2) device slots on a side stream ahead of
    its parameter's turn, stepped there, and copied back on another stream,
    so both directions of the link work while backward computes.  The copy
    back and the next owner's copy in go piece by piece (``_PIECE``), so that
    a slot is refilled while it is still being written back.
    """

    def __init__(self, off, model, optimizer):
        self.off, self.opt, self.device = off, optimizer, off.device
        self.group, self.params = {}, []
        for gi, g in enumerate(optimizer.param_groups):
            for p in g["params"]:
                if p.requires_grad and p.is_cuda and id(p) not in self.group:
                    self.group[id(p)] = gi
                    self.params.append(p)
        self.unit = {id(p): u for u in off.units for p, _, _, _ in u.params}
        self.nslots = off.nslots
        self.order, self.seen = [], set()      # parameters in the order their grads came
        self.in_backward, self.phase = False, "first"  # first -> measured -> planned
        self.base = self.peak_early = self.activations = None
        self.homes = {}       # id(p) -> [(state tensor, its home, home's CPU view)]: streamed
        self.slot_of, self.owner, self.slots, self.streamed = {}, [], [], []
        self.wb = {}          # id(p) -> event: its state's last write-back is done
        self.d2h = torch.cuda.Stream(self.device)  # the write-backs
        self.counters = dict(steps=0, state_copies=0, state_writebacks=0,
                             param_writebacks=0, steps_on_host=0)
        self.handles = [p.register_post_accumulate_grad_hook(self._hook) for p in self.params]
        self.handles.append(model.register_forward_pre_hook(self._forward))
        # optimizer.step() between two backward passes: the user's (not ours, inner)
        self.awaiting_step, self.inner, self.fallback = False, False, None
        self.handles.append(optimizer.register_step_pre_hook(self._user_step))
        _guard_training_apis()
        _STEPPERS.add(self)

    # -- measuring the first step, planning before the second

    def _forward(self, module, args):
        if self.off.closed or not (torch.is_grad_enabled() and module.training):
            return
        with self.off.lock:
            if self.phase == "first" and self.base is None:
                self.base = _allocated(self.device, reset_peak=True)
            elif self.phase == "measured":
                self._plan()

    def _user_step(self, optimizer, args, kwargs):
        if not self.inner:
            self.awaiting_step = False

    def _end(self):
        """End of a backward (queued by its first hook)."""
        with self.off.lock:
            self.in_backward = False
            self.awaiting_step = True
            for u in self.off.streamed:
                if u.deferred:  # a parameter got no gradient this time
                    self.off._release(u)
            if self.phase == "first":
                peak = _peak(self.device)
                made = sum(t.nbytes for _, t in self._states())
                if self.base is not None and peak is not None:
                    self.activations = max(self.peak_early - self.base, peak - self.base - made)
                self.phase = "measured"

    def _states(self):
        """(parameter, state tensor) for the large CUDA tensors of the optimizer's state."""
        for p in self.order:
            for t in self.opt.state.get(p, {}).values():
                if torch.is_tensor(t) and t.is_cuda and t.nbytes >= _MIN_STATE:
                    yield p, t

    def _plan(self):
        d, off = self.device, self.off
        self.phase = "planned"
        torch.cuda.synchronize(d)
        empty_cache()  # the first step's cache: what is left is in use
        per = {}
        for p, t in self._states():
            per.setdefault(id(p), []).append(t)
        size = {k: sum(_align(t.nbytes) for t in ts) for k, ts in per.items()}
        total = sum(size.values())
        cap, held = _device_cap(d)
        if cap is None or not total:
            return
        on_dev = sum(_on_device(t, d) for ts in per.values() for t in ts)
        # activations (measured by the first step, or the headroom) and the gradients
        # alive at once: a parameter used twice (a tied embedding) holds two buffers
        # until they are summed.  Measured on the H100 at 1.125x: with no margin the
        # step spilled (262 ms), with 2x the largest parameter 500 MiB of gradients still
        # landed in host memory (70 ms), with 4x nothing did (51 ms).
        act = max(off.headroom, self.activations or 0) + 4 * max(p.nbytes for p in self.params)
        room = cap - (held - on_dev) - act
        slot_bytes, deficit = _slot_size(size, total, room, self.nslots)
        self.planned_room, self.planned_activations = room - self.nslots * slot_bytes, act
        # the activations and the gradients alive at once (the margin above) against the
        # whole cap: parameters can stream, these cannot
        alone = cap - (self.activations or 0) - 4 * max(p.nbytes for p in self.params)
        if self.activations is not None and alone < 0:
            # the activations the first step measured do not fit on the GPU even with no
            # parameter and no optimizer state there: they spill whatever the plan, and
            # streaming the state only adds its copies to the link they spill over
            self.fallback = (f"the activations ({self.activations} bytes) do not fit on the "
                             f"GPU even with no parameter and no optimizer state there (short "
                             f"by {-alone} bytes): the optimizer steps after backward, as "
                             f"without offload")
            _log.warning("vmmx.torch.offload: %s", self.fallback)
            self.phase = "off"
            self.close()
            off.stepper = None  # backward no longer waits for steps (stats: off.stepped_by)
            return
        chosen = set()
        if deficit > 0:  # spread the state that does not fit over the backward order
            order = [p for p in self.order if 0 < size.get(id(p), 0) <= slot_bytes]
            fit = sum(size[id(p)] for p in order)
            quota, taken = 0.0, 0
            for p in order:
                n = size[id(p)]
                quota += deficit * n / fit
                if quota >= n / 2 and taken < deficit:
                    chosen.add(id(p))
                    quota -= n
                    taken += n
            for p in reversed(order):
                if taken >= deficit:
                    break
                if id(p) not in chosen:
                    chosen.add(id(p))
                    taken += size[id(p)]
        back = []  # resident state found in host memory: back to the GPU below
        for p in self.order:
            for t in per.get(id(p), ()):
                if id(p) in chosen:
                    cpu, t.data = _pin(t.data, d)
                    self.homes.setdefault(id(p), []).append((t, t.data, cpu))
                elif _on_device(t, d) < t.nbytes:
                    cpu, t.data = _pin(t.data, d)
                    back.append((t, cpu))
        self.streamed = [p for p in self.order if id(p) in chosen]
        self.pos = {id(p): i for i, p in enumerate(self.streamed)}  # tensors' == is elementwise
        empty_cache()  # the blocks the streamed state left: device room for the rest
        torch.cuda.synchronize(d)
        _v.empty_cache(d)  # the segments PyTorch just gave back, freed on a stream
        for t, cpu in back:
            t.data = torch.empty(cpu.shape, dtype=cpu.dtype, device=f"cuda:{d}")
            if _on_device(t, d) < t.nbytes and _v.owns_segment(t.data_ptr(), t.nbytes, d):
                _prefetch_if_room(t.data_ptr(), t.nbytes, _v.DEVICE(d), d)
            _copy_split(t.data, cpu, d)
        # resident state left in host memory: the step updates it over the link (slow)
        self.state_host_bytes = sum(t.nbytes - _on_device(t, d) for p in self.order
                                    if id(p) not in chosen for t in per.get(id(p), ()))
        if self.streamed:
            self.h2d = off.side if off.slots else torch.cuda.Stream(d)
            self.slots = [_slot(slot_bytes, d) for _ in range(min(self.nslots, len(self.streamed)))]
            self.owner = [None] * len(self.slots)
            self.ready = [torch.cuda.Event() for _ in self.slots]
            # one event per piece of a slot: that piece's last write-back is done
            self.free = [[torch.cuda.Event() for _ in range(-(-slot_bytes // _PIECE))]
                         for _ in self.slots]
            self.wb = {id(p): torch.cuda.Event() for p in self.streamed}
            self._fill(None)
        torch.cuda.synchronize(d)

    # -- each step

    def _hook(self, p):
        with self.off.lock:
            if self.off.closed:
                return
            if not self.in_backward:
                if self.awaiting_step:
                    raise RuntimeError(_ACCUMULATE)
                self.in_backward = True
                torch.autograd.Variable._execution_engine.queue_callback(self._end)
                if self.phase == "first":
                    self.peak_early = _peak(self.device) or 0
            if id(p) not in self.seen:
                self.seen.add(id(p))
                self.order.append(p)
            cur = torch.cuda.current_stream(self.device)
            u = self.unit.get(id(p))
            in_slot = u is not None and u.streamed and u.active
            if u is not None and u.streamed and not u.active:
                self.counters["steps_on_host"] += 1
            k = self._bring(p, cur) if id(p) in self.homes else None
            self._step(p)
            if k is not None:
                for t, h, _ in self.homes[id(p)]:
                    t.data = h
            if k is None and not in_slot:
                return
            done, s = torch.cuda.Event(), self.d2h
            done.record(cur)
            with torch.cuda.stream(s):
                s.wait_event(done)
                if k is not None:
                    for j, parts in self._pieces(p, k):
                        for home, part in parts:
                            home.copy_(part, non_blocking=True)  # D2H: a copy engine
                        self.free[k][j].record(s)
                    self.wb[id(p)].record(s)
                    self.counters["state_writebacks"] += 1
                if in_slot:
                    i = next(i for i, (q, _, _, _) in enumerate(u.params) if q is p)
                    u.src[i].copy_(p.data, non_blocking=True)
                    self.counters["param_writebacks"] += 1
            if in_slot:
                u.wb_stream = s
                u.pending.discard(id(p))
                if not u.pending and u.deferred:
                    self.off._release(u)
            if k is not None:
                self._fill(p)

    def _step(self, p):
        """The optimizer's own step for p alone (its group's settings), then no gradient."""
        groups = self.opt.param_groups
        saved = [g["params"] for g in groups]
        gi = self.group[id(p)]
        self.inner = True
        try:
            for i, g in enumerate(groups):
                g["params"] = [p] if i == gi else []
            self.opt.step()
        finally:
            self.inner = False
            for g, ps in zip(groups, saved):
                g["params"] = ps
        p.grad = None
        self.counters["steps"] += 1

    def _layout(self, p):
        """(home, pinned CPU tensor, offset in a slot) for each of p's state tensors."""
        off = 0
        for _, h, cpu in self.homes[id(p)]:
            yield h, cpu, off
            off = _align(off + h.nbytes)

    def _views(self, p, k):
        return [self.slots[k][off:off + h.nbytes].view(h.dtype).view(h.shape)
                for h, _, off in self._layout(p)]

    def _pieces(self, p, k):
        """p's state in slot k cut where the slot's pieces end: [(piece, [(bytes of the
        home in pinned memory, the same bytes of the slot)])], pieces in order (the
        layout's offsets only grow)."""
        slot, out = self.slots[k], {}
        for h, cpu, off in self._layout(p):
            flat = cpu.view(-1).view(torch.uint8)
            a = 0
            while a < h.nbytes:
                j = (off + a) // _PIECE
                b = min(h.nbytes, (j + 1) * _PIECE - off)
                out.setdefault(j, []).append((flat[a:b], slot[off + a:off + b]))
                a = b
        return list(out.items())

    def _copy(self, p, k):
        """Queue the copy of p's state into slot k on the side stream."""
        prev = self.owner[k]
        if prev is not None:
            self.slot_of.pop(id(prev), None)
        self.owner[k], self.slot_of[id(p)] = p, k
        with torch.cuda.stream(self.h2d):
            self.h2d.wait_event(self.wb[id(p)])   # p's own last write-back
            for j, parts in self._pieces(p, k):
                # the piece's last write-back (its step came before): a piece this owner
                # does not reach keeps the event of the last owner that wrote it back
                self.h2d.wait_event(self.free[k][j])
                for home, part in parts:
                    part.copy_(home, non_blocking=True)  # H2D: a copy engine
            self.ready[k].record(self.h2d)
        self.counters["state_copies"] += 1

    def _bring(self, p, cur):
        """p's state in a slot, the step's stream waiting for it; the tensors swapped in."""
        k = self.slot_of.get(id(p))
        if k is None:  # out of the expected order: the slot used longest ago
            k = min(range(len(self.slots)), key=lambda i: self._rank(self.owner[i], p))
            self._copy(p, k)
        cur.wait_event(self.ready[k])
        views = self._views(p, k)
        for (t, _, _), view in zip(self.homes[id(p)], views):
            t.data = view
        return k

    def _rank(self, owner, p):
        """How soon a slot's owner is needed after p (smaller: sooner freed)."""
        n = len(self.streamed)
        if owner is None:
            return -n - 1
        return -((self.pos[id(owner)] - self.pos[id(p)]) % n)

    def _fill(self, after):
        """Copy the state of the next streamed parameters into the slots."""
        s = self.streamed
        start = 0 if after is None else self.pos[id(after)] + 1
        want = [s[(start + j) % len(s)] for j in range(min(len(s), len(self.slots)))]
        for p in want:
            if id(p) in self.slot_of:
                continue
            k = next((i for i, o in enumerate(self.owner)
                      if o is None or all(o is not w for w in want)), None)
            if k is None:
                return
            self._copy(p, k)

    def stats(self):
        return dict(self.counters, phase=self.phase, params=len(self.params),
                    state_streamed=len(self.streamed),
                    state_streamed_bytes=sum(h.nbytes for hs in self.homes.values()
                                             for _, h, _ in hs),
                    state_slots=len(self.slots),
                    state_slot_bytes=self.slots[0].nbytes if self.slots else 0,
                    activations_bytes=self.activations,
                    state_host_bytes=getattr(self, "state_host_bytes", 0),
                    planned_room=getattr(self, "planned_room", None),
                    fallback=self.fallback)

    def close(self):
        for h in self.handles:
            h.remove()
        self.handles = []
        _STEPPERS.discard(self)


_ACCUMULATE = (
    "vmmx.torch.offload(optimizer=...): a second backward before optimizer.step(): the "
    "optimizer steps each parameter inside backward, so gradients cannot accumulate over "
    "micro-batches (the previous backward was stepped already).  Call optimizer.step() "
    "after every backward, or offload without optimizer= to accumulate gradients.")
_CLIP = (
    "vmmx.torch.offload(optimizer=...): {} after backward: the optimizer stepped each "
    "parameter inside backward and dropped its gradient, so there is nothing left to clip "
    "and the step was taken unclipped.  Offload without optimizer= to clip gradients.")
_SCALER = (
    "vmmx.torch.offload(optimizer=...): an enabled GradScaler: the optimizer steps each "
    "parameter inside backward, before the scaler could unscale the gradients or skip a "
    "step on inf/NaN.  Train with bf16 autocast (no scaler), or offload without "
    "optimizer= to use a GradScaler.")
_STEPPERS = weakref.WeakSet()  # the live steppers: what the guards below look at
_log = logging.getLogger("vmmx.torch")


def _stepped(params):
    """Whether a live stepper steps one of params inside backward."""
    ids = {id(p) for p in params}
    return any(ids.intersection(s.group) for s in list(_STEPPERS))


def _guard_training_apis():
    """Make the calls that read gradients after backward, or scale them, refuse the
    parameters a stepper steps inside backward (they would silently do nothing).

    The module attributes are wrapped, once: code that calls
    ``torch.nn.utils.clip_grad_norm_(...)`` (accelerate, transformers' Trainer, most
    loops) is seen; a reference taken before the first offload(optimizer=) is not."""
    if _guard_training_apis.done:
        return
    _guard_training_apis.done = True
    import torch.nn.utils.clip_grad as cg
    for name in ("clip_grad_norm_", "clip_grad_value_"):
        fn = getattr(cg, name, None)
        if fn is None:
            continue

        def guarded(parameters, *args, _fn=fn, _name=name, **kwargs):
            ps = [parameters] if isinstance(parameters, torch.Tensor) else list(parameters)
            if _stepped(ps):
                raise RuntimeError(_CLIP.format(_name))
            return _fn(ps, *args, **kwargs)

        functools.update_wrapper(guarded, fn)
        for mod in (cg, torch.nn.utils):
            if getattr(mod, name, None) is fn:
                setattr(mod, name, guarded)
    scaler = getattr(torch.amp, "GradScaler", None)
    if scaler is not None:
        scale = scaler.scale

        def guarded_scale(self, outputs):
            if self.is_enabled() and list(_STEPPERS):
                raise RuntimeError(_SCALER)
            return scale(self, outputs)

        functools.update_wrapper(guarded_scale, scale)
        scaler.scale = guarded_scale


_guard_training_apis.done = False


def _offload_args(lookahead, headroom, backward):
    """offload()'s scalar arguments, checked: (lookahead, headroom, backward)."""
    fn = "vmmx.torch.offload"
    lookahead = _args.integer(fn, "lookahead", lookahead, 0, _args.INT_MAX, hi_name="INT_MAX")
    if headroom is not None:
        headroom = _args.size_or_text(fn, "headroom", headroom)
    return lookahead, headroom, _args.flag(fn, "backward", backward)


def _slot_size(size, total, room, nslots):
    """(slot bytes, bytes of state to stream): the slot size, among the sizes of the
    parameters' state, that streams the fewest bytes.  Only state no larger than the
    slot can stream, and the slots take room too."""
    if total <= room:
        return 0, 0
    best = None
    for s in sorted(set(size.values())):
        deficit = total - (room - nslots * s)
        if sum(n for n in size.values() if n <= s) >= deficit and \
                (best is None or deficit < best[1]):
            best = (s, deficit)
    return best or (max(size.values()), total)


def _first_cuda(optimizer):
    """The device of the optimizer's first CUDA parameter (None without one)."""
    for g in (optimizer.param_groups if optimizer is not None else ()):
        for p in g["params"]:
            if p.is_cuda:
                return p.device.index
    return None


def _allocated(device, reset_peak=False):
    """PyTorch's allocated bytes on device (None where its allocator keeps no statistics)."""
    try:
        if reset_peak:
            torch.cuda.reset_peak_memory_stats(device)
        return torch.cuda.memory_allocated(device)
    except RuntimeError:
        return None


def _peak(device):
    try:
        return torch.cuda.max_memory_allocated(device)
    except RuntimeError:
        return None


def _on_device(t, device):
    r = _v.residency(t.data_ptr(), t.nbytes, device)
    return r[0] if r else t.nbytes


def _pin(t, device):
    """(pinned CPU copy of t, a CUDA tensor over it): t's bytes in page-locked memory."""
    cpu = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
    _copy_split(cpu, t, device)
    return cpu, _cuda_alias(cpu, device)


def _slot(nbytes, device):
    """A device buffer of nbytes for streaming, wholly on the GPU if there is room; if
    not, one pinned host allocation the GPU reads over the link (slower, but never a
    buffer straddling device and host chunks, which copies must not span)."""
    t = torch.empty(nbytes, dtype=torch.uint8, device=f"cuda:{device}")
    try:
        _v.prefetch(t.data_ptr(), t.nbytes, _v.DEVICE(device), device=device)
    except _v.VmmxError:
        pass
    if _on_device(t, device) == nbytes:
        return t
    del t
    return _cuda_alias(torch.empty(nbytes, dtype=torch.uint8, pin_memory=True), device)


def _copy_split(dst, src, device):
    """dst.copy_(src) (blocking), one piece per run of one location of either side:
    the driver crashes on a copy that runs from device chunks into host chunks."""
    cuts = {0, src.nbytes}
    for t in (dst, src):
        if t.is_cuda:
            cuts.update(off for off, _, _ in _v.runs(t.data_ptr(), t.nbytes, device))
    if len(cuts) <= 2 or not (dst.is_contiguous() and src.is_contiguous()) \
            or dst.dtype != src.dtype:
        dst.copy_(src)
        return
    a, b = dst.view(-1).view(torch.uint8), src.view(-1).view(torch.uint8)
    cuts = sorted(cuts)
    for lo, hi in zip(cuts, cuts[1:]):
        a[lo:hi].copy_(b[lo:hi])


def _prefetch_if_room(ptr, nbytes, loc, device):
    """vmmx.prefetch, where no room at ``loc`` is an answer, not an error: whether
    the range moved (False: it stays where it is)."""
    try:
        _v.prefetch(ptr, nbytes, loc, device=device)
    except _v.VmmxError as e:
        if e.code != _v.ENOMEM:
            raise
        return False
    return True


def _bytes_interface(ptr, nbytes):
    """__cuda_array_interface__ of nbytes of bytes at a GPU-visible address."""
    return {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3,
            "strides": None}


class _CudaArray:
    """A pinned CPU tensor's bytes seen through __cuda_array_interface__ (UVA)."""

    def __init__(self, cpu):
        self.cpu = cpu  # kept alive by the CUDA tensor made from this object
        self.__cuda_array_interface__ = _bytes_interface(cpu.data_ptr(), cpu.nbytes)


class _Arena:
    """A buffer of libvmmx memory moved to host memory, seen through
    __cuda_array_interface__: the homes of streamed parameters that had no buffer
    of their own.  The tensor made over it holds it; the buffer goes back to the
    allocator with the last tensor that views it."""

    def __init__(self, nbytes, device):
        self.device, self.ptr = device, None
        ptr = _v.malloc(nbytes, device=device)
        try:
            _v.prefetch(ptr, nbytes, _v.HOST, device=device)
        except BaseException:
            _v.free(ptr, device=device)
            raise
        self.ptr = ptr
        self.__cuda_array_interface__ = _bytes_interface(ptr, nbytes)

    def __del__(self):
        if self.ptr is not None:
            try:
                _v.free(self.ptr, device=self.device)
            except Exception:  # noqa: BLE001 - at exit the library may be gone
                pass


def _arena(nbytes, device):
    """A uint8 CUDA tensor of nbytes over a new :class:`_Arena`."""
    with torch.cuda.device(device):
        return torch.as_tensor(_Arena(nbytes, device), device=f"cuda:{device}")


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


def offload(model, lookahead=2, headroom=None, backward=True, home="vmmx", optimizer=None):
    """Run a model whose parameters do not fit on the GPU, streaming the rest.

    The model's code is unchanged; forward (and backward) hooks do the work.
    Units that fit stay on the GPU; the others, spread evenly over the
    execution order, live in host memory and are copied into ``lookahead``
    (at least 2) device slots ahead of their turn, overlapping the resident
    units' compute (see :class:`Offloader`).  ``headroom``: device memory left
    for activations (bytes or text such as "1GiB"; default 1/8 of the cap).
    ``lookahead``: an int; ``backward``: a bool (TypeError or ValueError
    otherwise, as the vmmx package's help says).
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

    ``optimizer``: for training, the model's optimizer.  Its step then runs in
    backward, for each parameter as soon as its gradient is complete (with the
    optimizer's own ``step()`` and settings, learning-rate schedules
    included), and the gradient is dropped at once; optimizer state that does
    not fit on the GPU lives in pinned host memory and streams through device
    slots, both directions overlapping backward (see :class:`_Stepper`).  The
    training loop stays ``loss.backward(); optimizer.step();
    optimizer.zero_grad()``: the step finds nothing left to do.  What reads
    or scales gradients after backward raises a RuntimeError saying what to do
    instead of silently training differently: a second backward before
    ``optimizer.step()`` (gradient accumulation), ``clip_grad_norm_`` /
    ``clip_grad_value_`` on its parameters, an enabled ``GradScaler``.  Synchronize
    (``torch.cuda.synchronize()``) before reading streamed state, e.g. to
    save it.  The first step measures the activations; the state is placed
    before the second.
    """
    _offload_args(lookahead, headroom, backward)  # before anything else
    if not _state["mode"]:
        raise _v.VmmxError("vmmx.torch.offload", _v.EINVAL, "libvmmx is not enabled",
                           "call vmmx.torch.enable() before the model is made")
    return Offloader(model, lookahead=lookahead, headroom=headroom, backward=backward, home=home,
                     optimizer=optimizer)


def _check_entry_points():
    """The entry points exist in the library PyTorch will dlopen (a clear error if not)."""
    lib = _v.library()
    for name in ("vmmx_torch_alloc", "vmmx_torch_free"):
        if not hasattr(lib, name):
            raise _v.VmmxError("vmmx.torch", _v.ENOENT, "old libvmmx",
                               f"no {name} in {_v.library_path()}")

# Sleep and wake of tagged memory (python/vmmx/_torch_sleep.py).
from ._torch_sleep import region, sleep, tag_stats, wake  # noqa: E402,F401
