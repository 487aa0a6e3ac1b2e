# SPDX-License-Identifier: MIT
"""The optimizer step inside backward, and optimizer state streamed through slots."""
import functools
import logging
import weakref

import torch

import vmmx as _v

from ._alloc import empty_cache
from ._mem import (_align, _allocated, _copy_split, _device_cap, _on_device, _peak, _pin,
                   _prefetch_if_room, _slot)

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
        self.unit = off.units_by_param()
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

    # -- what the offloader asks of the stepper

    def steps(self, p):
        """Return whether p's step runs in backward (p is one of the optimizer's)."""
        return id(p) in self.group

    def resident(self, p):
        """The offloader keeps p on the device: it is stepped in place, as resident."""
        self.unit.pop(id(p), None)

    def _user_step(self, optimizer, args, kwargs):
        if not self.inner:
            self.awaiting_step = False

    def _end(self):
        """End of a backward (queued by its first hook)."""
        with self.off.lock:
            self.in_backward = False
            self.awaiting_step = True
            self.off.release_deferred()  # a parameter got no gradient this time
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
            off.stop_stepping()
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
            side = off.copy_stream()
            self.h2d = side if side is not None else torch.cuda.Stream(d)
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
            where = self.off.where(u)
            in_slot = where == "slot"
            if where == "home":
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
                    self.off.param_home(u, p).copy_(p.data, non_blocking=True)
                    self.counters["param_writebacks"] += 1
            if in_slot:
                self.off.param_stepped(u, p, s)
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
