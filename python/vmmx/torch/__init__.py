# SPDX-License-Identifier: MIT
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
from ._alloc import _state, disable, empty_cache, enable, is_enabled, stats  # noqa: F401
from ._offload import Offloader, offload
from ._prefetch import prefetch
from ._sleep import region, release_host, sleep, tag_stats, wake

__all__ = ["enable", "disable", "is_enabled", "stats", "empty_cache", "prefetch", "offload",
           "Offloader", "region", "sleep", "wake", "tag_stats",
           "release_host"]
