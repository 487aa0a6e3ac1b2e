# SPDX-License-Identifier: MIT
"""Sleep and wake for PyTorch: ``region(tag)``, ``sleep(tags, offload)``,
``wake(tags)`` and ``stats()`` per tag, re-exported by ``vmmx.torch``.

Tensors allocated inside ``with vmmx.torch.region("train"):`` carry the tag
``train``.  PyTorch's caching allocator reuses a freed segment for any later
request, so each tag gets a ``torch.cuda.MemPool`` of its own over libvmmx's
allocator (``vmmx_torch_alloc``); while the region is active the pool takes
the thread's allocations and libvmmx's current tag (``vmmx_tag_scope``) is
the region's, so every segment the pool asks for is a libvmmx buffer of
that tag, shared with no other tag.

``sleep("train")`` gives the tag's device memory back to the driver (other
processes can allocate it) while its tensors, and CUDA graphs captured
over them, keep their addresses; ``wake("train")`` brings it back.  See
docs/FRAMEWORKS.md for the calls of torch_memory_saver and vLLM's
CuMemAllocator they replace.

Rules (each refused with VmmxError where it can be detected):
- entering ``region(tag)`` while ``tag`` sleeps is refused (EBUSY): the pool
  would hand out memory that is not there;
- ``sleep`` synchronizes the device first when ``sync`` is True (the
  default); with ``sync=False`` it is refused (EBUSY) while work queued on
  the current stream has not finished;
- a tensor of an offloaded tag may be read while asleep (its memory is then
  pinned host memory: slow, correct); a tensor of a discarded tag must not
  be touched until the wake (a kernel would fault), and its contents after
  the wake are undefined.
"""
import contextlib
import threading

import vmmx as _v

_lock = threading.Lock()
_pools = {}      # (device, tag) -> torch.cuda.MemPool
_local = threading.local()  # .tags: the stack of the thread's regions


def _torch():
    import torch
    return torch


def _device(device):
    torch = _torch()
    if device is None:
        return torch.cuda.current_device()
    return torch.device(device).index if not isinstance(device, int) else device


def _plug_allocator():
    from . import _alloc as vt
    return vt._state["plug"].allocator()


def _pool(device, tag):
    torch = _torch()
    with _lock:
        pool = _pools.get((device, tag))
        if pool is None:
            with torch.cuda.device(device):
                pool = torch.cuda.MemPool(_plug_allocator())
            _pools[(device, tag)] = pool
        return pool


@contextlib.contextmanager
def region(tag, device=None):
    """Tensors allocated inside carry ``tag``.  Nests: the innermost region's
    tag wins, the outer one's comes back on exit.

    In ``enable(mode="pool")`` the region routes the device's allocations to a
    memory pool of the tag's own (PyTorch serves a request from the first
    pool routed, so the outermost region takes vmmx.torch's own pool out of
    the way for its duration, for every thread: keep regions short and
    allocate in other threads outside them).  In ``mode="allocator"`` every
    tensor is a request to libvmmx, which gives a tagged request a segment
    of its own: the thread's tag is enough.  Yields the pool (None in
    allocator mode)."""
    fn = "vmmx.torch.region"
    tag = _v._tag(fn, "tag", tag)
    torch = _torch()
    from . import _alloc as vt
    if not vt._state.get("mode"):
        raise _v.VmmxError(fn, _v.EINVAL, "libvmmx is not enabled",
                           "call vmmx.torch.enable() before the first CUDA tensor")
    dev = _device(device)
    if _v.sleep_stats(tag, dev)["asleep_bytes"]:
        raise _v.VmmxError(fn, _v.EBUSY, "tag asleep",
                           f"{tag!r} sleeps: vmmx.torch.wake({tag!r}) before allocating in it")
    stack = getattr(_local, "tags", None)
    if stack is None:
        stack = _local.tags = []
    pooled = vt._state["mode"] == "pool"
    pool = _pool(dev, tag) if pooled else None
    glob = vt._state["pools"].get(dev) if pooled and not stack else None
    _v.tag_scope(tag)
    stack.append(tag)
    try:
        if glob is not None:
            torch._C._cuda_endAllocateToPool(dev, glob.id)
        try:
            if pooled:
                with torch.cuda.use_mem_pool(pool, device=dev):
                    yield pool
            else:
                yield None
        finally:
            if glob is not None:
                torch._C._cuda_beginAllocateToPool(dev, glob.id)
    finally:
        stack.pop()
        _v.tag_scope(stack[-1] if stack else None)


def _tags_arg(fn, tags):
    if tags is None:
        return None
    return [tags] if isinstance(tags, str) else list(tags)


def sleep(tags=None, offload=True, sync=True, device=None):
    """Put ``tags`` (None: every tag) to sleep; ``offload`` keeps the contents in
    pinned host memory, False discards them.  ``sync``: synchronize the device
    first (False: refused while the current stream has queued work).  Returns
    the bytes put to sleep."""
    torch = _torch()
    dev = _device(device)
    tags = _tags_arg("vmmx.torch.sleep", tags)
    if sync:
        torch.cuda.synchronize(dev)
    # PyTorch's cached free blocks stay in their pool: they sleep with the tag.
    return _v.sleep(tags, offload=offload, stream=torch.cuda.current_stream(dev).cuda_stream,
                    device=dev)


def wake(tags=None, device=None):
    """Wake ``tags`` (None: every sleeping tag) at the same addresses.  Returns the
    bytes woken."""
    dev = _device(device)
    return _v.wake(_tags_arg("vmmx.torch.wake", tags), device=dev)


def release_host(tags=None, device=None):
    """Give back the pinned host memory kept for the next offload of ``tags``
    (None: every tag); awake tags only.  Returns the bytes given back."""
    dev = _device(device)
    return _v.sleep_release(_tags_arg("vmmx.torch.release_host", tags), device=dev)


def tag_stats(tags=None, device=None):
    """Per tag (default: every tag a region made here): libvmmx's sleep_stats."""
    dev = _device(device)
    if tags is None:
        with _lock:
            tags = sorted({t for d, t in _pools if d == dev})
    elif isinstance(tags, str):
        tags = [tags]
    return {t: _v.sleep_stats(t, dev) for t in tags}
