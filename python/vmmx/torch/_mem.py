# SPDX-License-Identifier: MIT
"""Memory helpers of vmmx.torch: where a tensor lies, copies that never span
device and host chunks, pinned and libvmmx host buffers seen by the GPU, the cap."""
import torch

import vmmx as _v
from vmmx import _plan as _planner

_align = _planner.align


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


def _reserve(nbytes, device):
    """nbytes of libvmmx device memory held while offload places the parameters (None
    if it is not all on the device).

    The headroom the plan leaves must not all end up as holes that the streamed
    parameters left in a larger segment (transformers' warm-up tensor's): PyTorch's
    cache hands those to large allocations only.  Its small pool (blocks under
    1 MiB: every activation of a decode step) makes segments of its own, which
    then found no device room and went to host memory, where every kernel of a
    decode step read them over the link: 520 ms a token instead of 144 for a 7B
    Llama on an H100.  Freed after placement, this stays room for new segments."""
    if nbytes <= 0:
        return None
    try:
        ptr = _v.malloc(nbytes, device=device)
    except _v.VmmxError:
        return None
    r = _v.residency(ptr, nbytes, device)
    if not r or r[0] < nbytes:
        _v.free(ptr, device=device)
        return None
    return ptr


def _usage(device):
    """(cap, held, host) from one read of the context's statistics: the device's limit
    (or its memory; None when the context has no such location), the bytes libvmmx
    holds there in use (not cached), and the bytes of host memory it holds in use."""
    cap, held, host = None, 0, 0
    for loc in _v.context_stats(device)["locations"]:
        if loc["location"] == f"device:{device}":
            cap = min(x for x in (loc["limit"], loc["total"]) if x is not None)
            held = loc["held"] - loc["cached"]
        elif not loc["location"].startswith("device:"):
            host += loc["held"] - loc["cached"]
    return cap, held, host


def _device_cap(device):
    """(cap, held) of :func:`_usage`: (None, 0) when the context has no such location."""
    cap, held, _ = _usage(device)
    return cap, held


def _headroom(headroom, device):
    """Bytes of device memory offload leaves for activations (default: 1/8 of the cap)."""
    if headroom is not None:
        return _v.parse_size(headroom)
    cap, _ = _device_cap(device)
    return cap // 8 if cap is not None else 0
