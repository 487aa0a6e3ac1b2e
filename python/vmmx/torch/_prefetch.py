# SPDX-License-Identifier: MIT
"""vmmx.torch.prefetch: tensors, modules and optimizers to a location."""
import torch

import vmmx as _v
from vmmx import _args

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
