# SPDX-License-Identifier: MIT
"""vmmx.torch.offload: parameters that do not fit on the GPU, streamed through slots."""
import bisect
import logging
import threading

import torch

import vmmx as _v
from vmmx import _args
from vmmx import _plan as _planner

from ._alloc import _state
from ._mem import (_align, _arena, _copy_split, _device_cap, _first_cuda, _headroom,
                   _on_device, _pin, _prefetch_if_room, _reserve, _slot, _usage)
from ._stepper import _Stepper

_log = logging.getLogger("vmmx.torch")

# Device room _adapt leaves free beyond what the passes so far held (at least; a quarter
# of the headroom when that is more): new segments for activations that vary a little.
_MARGIN = 256 << 20


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
        self.on_gpu = None        # promoted: its parameters' device tensors (see _adapt)
        self.views = {}           # slot -> its parameters' views of that slot
        self.active = False       # running from its slot now
        self.pending = set()      # ids of its parameters the stepper has yet to step
        self.deferred = False     # backward is done with it; the stepper releases it
        self.written = torch.cuda.Event()  # its last write-back home is done
        self.wb_stream = None     # the stream of its write-backs this step


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
    streams the fewest bytes in all (``vmmx._plan``), and a streamed unit streams
    the largest of its parameters that fill it, the rest staying on the GPU.
    Each pass, a streamed unit's parameters are copied on a side stream into
    one of ``lookahead`` (at least 2) device buffers, the slots, ahead of its
    turn, the unit runs on views of that slot (its parameters' ``.data`` are
    swapped in by the pre-hook and back by the post-hook), and the slot takes the next unit's copy once the unit's
    kernels are done: the GPU orders all of it with events, the CPU never
    waits.  Copies run while the resident units between two streamed ones
    compute.  A parameter changed in place between passes (an optimizer
    step) is seen by its version counter and copied again.

    The headroom is a guess made before any pass ran.  With ``adapt`` (and
    no optimizer stepping), each pass from the second starts by looking at
    what the passes so far left unused (:meth:`_adapt`): streamed units that
    fit in the device room nobody holds, beyond a margin, are promoted to
    device tensors of their own and stop streaming; if memory then spills to
    host memory (a later pass needs more than the first ones did), every
    promoted unit streams again and promotion stops.
    """

    def __init__(self, model, lookahead=2, headroom=None, backward=True, home="vmmx",
                 optimizer=None, adapt=True):
        lookahead, headroom, backward = _offload_args(lookahead, headroom, backward)
        adapt = _args.flag("vmmx.torch.offload", "adapt", adapt)
        home = _args.choice("vmmx.torch.offload", "home", home, ("vmmx", "pinned"))
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError("vmmx.torch.offload: optimizer must be a torch.optim.Optimizer, "
                            f"not {type(optimizer).__name__}")
        self.home_kind = home
        self.nslots = max(2, lookahead)
        self.closed, self.handles = False, []
        self.lock = threading.RLock()
        self.phase, self.training = "fwd", False
        self.counters = {"copies": 0, "recopies": 0, "from_host": 0, "promotions": 0,
                         "demotions": 0}
        self.adapt, self.promoted, self.host_base = adapt, [], None
        self.seen, self._order = {}, None  # the forward order of the units (_key)
        self.units, self.owned = self._find_units(model)
        self.streamed, self.slots, self.stepper, self.stepped_by = [], [], None, None
        self.device = self.units[0].params[0][1] if self.units else _first_cuda(optimizer)
        if self.device is None:
            return
        self.headroom = _headroom(headroom, self.device)
        self.margin = max(_MARGIN, self.headroom // 4)
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
        self.now = [torch.cuda.Event() for _ in self.slots]
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
        if movable and room is not None:
            plan = _planner.choose([[t[3] for t in u.params] for u in movable], total, room,
                                self.headroom, self.nslots)
            for k, idx in plan.streamed:  # the parameters past the piece stay on the GPU
                u = movable[k]
                kept += [t for i, t in enumerate(u.params) if i not in idx]
                u.params, u.streamed = [u.params[i] for i in idx], True
                u.nbytes = sum(n for _, _, _, n in u.params)
                u.slot_need = sum(_align(n) for _, _, _, n in u.params)
                self.streamed.append(u)
            for t in kept if self.stepper is not None else ():
                self.stepper.resident(t[0])  # stepped in place
        slot_bytes = max((u.slot_need for u in self.streamed), default=0)
        spare = {}  # device storage the streamed parameters left: room for kept ones
        self.ballast = []  # host storage held so that PyTorch's cache never hands it out
        reserve = _reserve(self.headroom // 4, self.device)
        try:
            self._make_homes(spare)
            self._bring_in([t for u in self.units if not u.streamed for t in u.params] + kept,
                           spare)
        finally:
            spare.clear()  # what no kept parameter took: free blocks on the GPU
            if reserve is not None:
                _v.free(reserve, device=self.device)
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
        parameter of the same size left; then, with the rest of that storage given
        back to PyTorch's cache (``spare`` is emptied), a migration of the chunks
        under a parameter, else a copy into a new tensor (which PyTorch carves out
        of the storage just given back).  What finds no room stays where it is
        (counted in stats)."""
        d, self.kept_host_bytes, moved, rest = self.device, 0, 0, []
        for t in kept:
            p, _, _, n = t
            if _on_device(p.data, d) >= n:
                continue
            if spare.get(n):
                new = spare[n].pop().view(-1).view(torch.uint8).view(p.dtype).view(p.shape)
                moved += self._move(p, new)
            else:
                rest.append(t)
        spare.clear()
        for p, _, ptr, n in rest:
            new = torch.empty_like(p.data)
            if _on_device(new, d) >= n:
                moved += self._move(p, new)
                continue
            del new
            # else migrate the chunks under it (the GPU is idle: setup synchronized it,
            # so no kernel uses what shares them), room permitting
            _prefetch_if_room(ptr, n, _v.DEVICE(d), d)
            self.kept_host_bytes += n - _on_device(p.data, d)
        torch.cuda.synchronize(d)
        self.brought_bytes = moved

    def _move(self, p, new):
        """p's data into device tensor new; its bytes."""
        d = self.device
        _copy_split(new, p.data, d)
        if _on_device(p.data, d) < p.nbytes:
            # its old storage stays held: freed, PyTorch's cache would hand that host
            # memory to the next allocations (activations, read over the link)
            self.ballast.append(p.data)
        p.data = new
        self.owned.discard(id(p))
        return p.nbytes

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
        key (:meth:`_key`) is ``after``.  The hooks ask this for every streamed
        unit of every pass: slices of the sorted order, no scan."""
        if self._order is None:
            self._order = sorted(self.streamed, key=self._key)
            self._keys = [self._key(u) for u in self._order]
        s = self._order
        if self.phase == "fwd":
            i = bisect.bisect_right(self._keys, after)
            return s[i:] + (s[::-1] if self.training else s[:i])
        # the optimizer step comes next and changes the parameters: no wrap-around
        return s[:bisect.bisect_left(self._keys, after)][::-1]

    def _views(self, u, k):
        """u's parameters as views of slot k (made once: the hooks are the CPU's cost
        of every streamed unit of every pass)."""
        v = u.views.get(k)
        if v is None:
            off, v = 0, []
            for h in u.home:
                v.append(self.slots[k][off:off + h.nbytes].view(h.dtype).view(h.shape))
                off = _align(off + h.nbytes)
            u.views[k] = v
        return v

    def _copy(self, u, k):
        """Queue the copy of u's parameters into slot k on the side stream."""
        prev = self.owner[k]
        if prev is not None:
            prev.slot = None
        self.owner[k], u.slot = u, k
        side, now = self.side, self.now[k]
        # one event per slot will do: a wait takes the event's last record when queued
        now.record(torch.cuda.current_stream(self.device))
        side.wait_event(self.free[k])  # the slot's last user is done
        side.wait_event(now)           # and the parameters' last writer
        side.wait_event(u.written)     # and their last write-back home
        with torch.cuda.stream(side):
            for dst, h in zip(self._views(u, k), u.src):
                dst.copy_(h, non_blocking=True)
        self.ready[k].record(side)
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
            if self.closed or u.active or not u.streamed:
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
            for (p, _, _, _), v in zip(u.params, self._views(u, k)):
                p.data = v
            u.active = True

    def _pre_fwd(self, u):
        def hook(module, args):
            # grad mode is per thread: read it here
            self.phase, self.training = "fwd", torch.is_grad_enabled() and module.training
            if id(u) not in self.seen:  # the order of execution, learnt on the first pass
                with self.lock:
                    self.seen[id(u)] = len(self.seen)
                    self._order = None
            elif self.seen[id(u)] == 0 and self.adapt and self.stepper is None:
                with self.lock:  # a new pass starts: the ones before have been measured
                    self._adapt()
            self._enter(u)
        return hook

    def _pre_bwd(self, u):
        def hook(module, grad_output):
            self.phase = "bwd"
            self._enter(u)
            if u.active and self.stepper is not None:
                u.pending = {id(p) for p, _, _, _ in u.params if self.stepper.steps(p)}
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

    # -- what the stepper (_Stepper) asks of the offloader.  Besides these it reads
    # lock (held around its hooks), closed, device, nslots and headroom, and sets
    # nothing else of the offloader's.

    def units_by_param(self):
        """Map each unit's parameters to their unit.

        Return: {id(parameter): its :class:`_Unit`} over every unit.
        """
        return {id(p): u for u in self.units for p, _, _, _ in u.params}

    def where(self, u):
        """Where a stepped parameter of unit u lies now.

        Return: "slot" (u streams and runs from its slot: the step updates the
        slot's copy), "home" (u streams but is not in a slot: the step updates
        its home over the link), None (u is resident, or None).
        """
        if u is None or not u.streamed:
            return None
        return "slot" if u.active else "home"

    def param_home(self, u, p):
        """Return the tensor a write-back of p (a parameter of u, in its slot) copies into."""
        i = next(i for i, (q, _, _, _) in enumerate(u.params) if q is p)
        return u.src[i]

    def param_stepped(self, u, p, stream):
        """p (a parameter of u, in its slot) was stepped and its write-back queued on
        stream: u's slot waits for that stream, and u is released once backward is
        done with it and none of its parameters awaits a step.  Call under lock.
        """
        u.wb_stream = stream
        u.pending.discard(id(p))
        if not u.pending and u.deferred:
            self._release(u)

    def release_deferred(self):
        """At the end of a backward: release the units backward is done with whose
        parameters got no gradient (no step will release them).  Call under lock."""
        for u in self.streamed:
            if u.deferred:
                self._release(u)

    def copy_stream(self):
        """Return the stream the slots' copies in run on, None when nothing streams."""
        return self.side if self.slots else None

    def stop_stepping(self):
        """Backward no longer waits for steps (the stepper gave up: stats' stepped_by
        keeps it)."""
        self.stepper = None

    # -- adapting to what the passes used

    def _adapt(self):
        """At the start of a pass: promote streamed units into the device room the
        passes so far left unused, or demote them all if memory spilled since.

        The room is the cap less what libvmmx holds on the device for anyone
        (PyTorch's cached blocks included: they are the activations the passes
        needed), less ``margin``.  Promoted units are chosen spread over the
        execution order, as the plan chose the streamed ones, so that copies
        still overlap compute everywhere.  A spill is host memory in use growing
        past what it was when the first promotion was made: a later pass needed
        more than the earlier ones, so the promoted units give their device
        memory back (to PyTorch's cache, for the activations) and promotion
        stops for the life of the offloader."""
        cap, used, host = _usage(self.device)  # one read of the statistics a pass
        if cap is None:
            self.adapt = False
            return
        if self.promoted and host > self.host_base:
            n = len(self.promoted)
            for w in reversed(self.promoted):
                self._demote(w)
            self.promoted, self.adapt = [], False
            _log.warning("vmmx.torch.offload: %d bytes spilled to host memory since %d "
                         "units were promoted to the GPU: they stream again", host -
                         self.host_base, n)
            return
        room = cap - used - self.margin
        cands = [w for w in sorted(self.streamed, key=self._key) if not w.active]
        total = sum(w.nbytes for w in cands)
        if room <= 0 or not total:
            return
        quota, got, take = 0.0, 0, []
        for w in cands:  # spread evenly, in proportion to bytes
            quota += min(1.0, room / total) * w.nbytes
            if quota >= w.nbytes / 2 and got + w.nbytes <= room:
                take.append(w)
                got += w.nbytes
                quota -= w.nbytes
        for w in take:
            if not self._promote(w):
                break
        if self.promoted and self.host_base is None:
            self.host_base = host
        if take:
            _log.info("vmmx.torch.offload: %d units (%d bytes) promoted to the GPU, into "
                      "room the passes left unused", len(self.promoted),
                      sum(w.nbytes for w in self.promoted))

    def _promote(self, w):
        """Give streamed unit w device tensors of its own (False: no device room)."""
        d = self.device
        new = []
        for h in w.home:
            t = torch.empty_like(h)
            if _on_device(t, d) < t.nbytes:
                return False  # freed with new: back to PyTorch's cache
            new.append(t)
        cur = torch.cuda.current_stream(d)
        cur.wait_event(w.written)
        for t, src in zip(new, w.src):
            t.copy_(src, non_blocking=True)
        for (p, _, _, _), t in zip(w.params, new):
            p.data = t
        if w.slot is not None:  # the copy queued into it is harmless: nobody waits on it
            self.owner[w.slot], w.slot = None, None
        w.on_gpu, w.versions = new, [p._version for p, _, _, _ in w.params]
        w.streamed = False
        self.streamed.remove(w)
        self._order = None
        self.promoted.append(w)
        self.counters["promotions"] += 1
        return True

    def _demote(self, w):
        """Stream promoted unit w again: its home gets what changed on the GPU."""
        cur = torch.cuda.current_stream(self.device)
        for (p, _, _, _), h, v in zip(w.params, w.home, w.versions):
            if p._version != v:
                h.copy_(p.data, non_blocking=True)
        w.written.record(cur)  # the slot copies of w wait for this write-back
        for (p, _, _, _), h in zip(w.params, w.home):
            p.data = h
        w.on_gpu, w.streamed = None, True
        w.versions = [None] * len(w.params)
        self.streamed.append(w)
        self._order = None
        self.counters["demotions"] += 1

    def stats(self):
        """Units, bytes streamed per pass, slots, and what the hooks did; with an
        optimizer, what the stepper did (see :class:`_Stepper`)."""
        out = dict(self.counters, units=len(self.units), streamed=len(self.streamed),
                   promoted=len(self.promoted),
                   promoted_bytes=sum(w.nbytes for w in self.promoted),
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
                u.views = {}  # they hold the slots
            torch.cuda.synchronize(self.device)
            self.slots = []


def _offload_args(lookahead, headroom, backward):
    """offload()'s scalar arguments, checked: (lookahead, headroom, backward)."""
    fn = "vmmx.torch.offload"
    lookahead = _args.integer(fn, "lookahead", lookahead, 0, _args.INT_MAX, hi_name="INT_MAX")
    if headroom is not None:
        headroom = _args.size_or_text(fn, "headroom", headroom)
    return lookahead, headroom, _args.flag(fn, "backward", backward)


def offload(model, lookahead=2, headroom=None, backward=True, home="vmmx", optimizer=None,
            adapt=True):
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

    ``adapt`` (a bool, default True): the headroom is a guess made before
    any pass; from the second pass on, streamed units that fit in the device
    room the passes so far left unused (less a margin of 256 MiB, or a
    quarter of the headroom) are promoted to the GPU and stop streaming.  If
    a later pass needs more memory than those did and something spills to
    host memory, the promoted units stream again and promotion stops (a
    warning on the ``vmmx.torch`` logger).  ``stats()`` counts
    ``promotions``, ``demotions``, ``promoted`` and ``promoted_bytes``.
    Without an optimizer only (with one, the stepper plans the room).

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
                     optimizer=optimizer, adapt=adapt)
