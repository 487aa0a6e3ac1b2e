# SPDX-License-Identifier: MIT
"""libvmmx from Python: ctypes over the library's exported API, nothing compiled.

The library is found, in order, at ``$VMMX_LIBRARY`` (a path, e.g. a build
tree's ``lib/.libs/libvmmx.so``), where ``make install`` put it (recorded in
``vmmx/_build.py``), or by the dynamic linker's search (``libvmmx.so.0``).

Errors raise :class:`VmmxError`, which carries the code, its name
(``vmmx_strerror``) and the detail of the failure (``vmmx_last_error()``).

Frameworks: ``vmmx.torch`` installs libvmmx under PyTorch's allocations,
``vmmx.cupy`` under CuPy's.  Both use the process-wide allocator of each
device (``vmmx_alloc_global``); :func:`configure` sets its VMMX_* settings
before it is made.

Arguments are checked before they reach the library (ctypes would cut a
float, wrap a size past SIZE_MAX, keep only the low bits of a device index
and stop a string at a NUL byte, all silently).  A wrong type raises
TypeError, a value out of range ValueError, each naming the function and the
argument (``vmmx.malloc: size must be an int, not float``):

- sizes (``size``, ``nbytes``): int from 0 to SIZE_MAX; anything with
  ``__index__`` (numpy integers) counts as an int, but bool does not, and
  neither does float, not even ``2.0``: sizes are exact bytes, so the caller
  rounds.  Where text is taken too (:func:`configure`, :func:`parse_size`,
  headroom), "8GiB" or "50%" in libvmmx's grammar;
- device indices: int from 0 to INT_MAX (the library says whether the
  device exists);
- addresses (``ptr``): int from 0 to UINTPTR_MAX, or a ctypes.c_void_p;
  None (NULL) only for :func:`free`;
- streams: None (no stream), an int CUstream handle, a ctypes.c_void_p, or a
  stream object carrying its handle: ``.cuda_stream`` (torch.cuda.Stream),
  ``.ptr`` (cupy.cuda.Stream) or ``._as_parameter_``;
- text (policy specs, setting values, sizes as text): str without NUL bytes;
- advice: an int in C's int range (the library refuses unknown advice);
- flags: bool, or an int 0 or 1.

A refused call changes nothing: the checks run before any call into libvmmx.
"""
import ctypes
import ctypes.util
import json
import os
import threading

from . import _args

__all__ = [
    "VmmxError", "Loc", "DEVICE", "HOST", "library", "library_path", "version",
    "configure", "allocator", "alloc_stats", "context_stats", "empty_cache",
    "prefetch", "advise", "lookup", "residency", "owns_segment", "parse_size", "ADVISE_HOT",
    "ADVISE_COLD", "ADVISE_READ_MOSTLY", "ADVISE_WILL_NEED", "ADVISE_NOT_READ_MOSTLY",
]

# enum vmmx_error (vmmx.h)
EINVAL, ENOENT, ENOMEM, EFAULT, EBUSY = 22, 2, 12, 14, 16

LOC_NONE, LOC_DEVICE, LOC_HOST, LOC_HOST_NUMA = 0, 1, 2, 3
ADVISE_HOT, ADVISE_COLD, ADVISE_READ_MOSTLY, ADVISE_WILL_NEED = 1, 2, 3, 4
ADVISE_NOT_READ_MOSTLY = 5


class VmmxError(RuntimeError):
    """A libvmmx call failed.

    Attributes: ``code`` (the positive error code), ``name`` (its
    ``vmmx_strerror`` text), ``detail`` (``vmmx_last_error()`` of the call),
    ``call`` (the function).
    """

    def __init__(self, call, code, name, detail):
        self.call, self.code, self.name, self.detail = call, code, name, detail
        super().__init__(f"{call}: {name}" + (f": {detail}" if detail else ""))


class Loc(ctypes.Structure):
    """struct vmmx_loc: a memory location."""
    _fields_ = [("kind", ctypes.c_int), ("id", ctypes.c_int)]

    def __repr__(self):
        return {LOC_DEVICE: f"device:{self.id}", LOC_HOST: "host",
                LOC_HOST_NUMA: f"host-numa:{self.id}"}.get(self.kind, "none")


def DEVICE(i=0):
    """The location of GPU ``i``."""
    return Loc(LOC_DEVICE, _args.device("vmmx.DEVICE", "i", i))


HOST = Loc(LOC_HOST, 0)


class AllocStats(ctypes.Structure):
    """struct vmmx_alloc_stats (version 1): keep in the header's order."""
    _fields_ = [("size", ctypes.c_size_t), ("version", ctypes.c_uint), ("device", ctypes.c_int)] + [
        (n, ctypes.c_uint64) for n in (
            "allocated_bytes", "allocated_peak", "requested_bytes", "reserved_bytes",
            "reserved_peak", "device_reserved", "host_reserved", "device_allocated",
            "host_allocated", "segments", "active_blocks", "allocs", "frees", "cache_hits",
            "segment_allocs", "segment_frees", "fallback_segments", "fallback_bytes",
            "stream_reuses", "stream_waits", "cross_stream_frees", "reclaims", "failures")]

    def as_dict(self):
        return {n: getattr(self, n) for n, _ in self._fields_ if n != "size"}


class Residency(ctypes.Structure):
    """struct vmmx_residency."""
    _fields_ = [("device", ctypes.c_size_t), ("host", ctypes.c_size_t)]


class ChunkInfo(ctypes.Structure):
    """struct vmmx_chunk_info."""
    _fields_ = [("base", ctypes.c_void_p), ("size", ctypes.c_size_t), ("loc", Loc),
                ("buf", ctypes.c_void_p)]


_lock = threading.Lock()
_lib = None
_path = None
c_int, c_void_p, c_size_t, c_char_p = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p

_PROTOS = {
    "vmmx_strerror": (c_char_p, [c_int]),
    "vmmx_last_error": (c_char_p, []),
    "vmmx_version": (ctypes.c_uint, []),
    "vmmx_alloc_global_config": (c_int, [ctypes.POINTER(c_char_p)]),
    "vmmx_alloc_global": (c_int, [c_int, ctypes.POINTER(c_void_p)]),
    "vmmx_alloc_ctx": (c_void_p, [c_void_p]),
    "vmmx_alloc_stats": (c_int, [c_void_p, ctypes.POINTER(AllocStats)]),
    "vmmx_alloc_empty_cache": (c_int, [c_void_p]),
    "vmmx_alloc_malloc": (c_int, [c_void_p, c_size_t, c_void_p, ctypes.POINTER(c_void_p)]),
    "vmmx_alloc_free": (c_int, [c_void_p, c_void_p, c_void_p]),
    "vmmx_prefetch": (c_int, [c_void_p, c_void_p, c_size_t, Loc, c_void_p]),
    "vmmx_advise": (c_int, [c_void_p, c_void_p, c_size_t, c_int]),
    "vmmx_lookup": (c_int, [c_void_p, c_void_p, ctypes.POINTER(ChunkInfo)]),
    "vmmx_buf_ptr": (c_void_p, [c_void_p]),
    "vmmx_buf_size": (c_size_t, [c_void_p]),
    "vmmx_buf_residency": (c_int, [c_void_p, c_size_t, c_size_t, ctypes.POINTER(Residency)]),
    "vmmx_stats_json": (c_int, [c_void_p, ctypes.c_char_p, c_size_t, ctypes.POINTER(c_size_t)]),
    "vmmx_memcpy": (c_int, [c_void_p, c_void_p, c_void_p, c_size_t]),
    "vmmx_sync": (c_int, [c_void_p]),
    "vmmx_parse_size": (c_int, [c_char_p, ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64)]),
}


def library_path():
    """Where libvmmx is loaded from (a path, or a name for the dynamic linker)."""
    env = os.environ.get("VMMX_LIBRARY")
    if env:
        return env
    try:
        from . import _build  # written by make install
        cand = os.path.join(_build.LIBDIR, "libvmmx.so.0")
        if os.path.exists(cand):
            return cand
    except ImportError:
        pass
    return ctypes.util.find_library("vmmx") or "libvmmx.so.0"


def library():
    """The loaded libvmmx (a ctypes.CDLL with prototypes set)."""
    global _lib, _path
    with _lock:
        if _lib is None:
            path = library_path()
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise VmmxError("load", ENOENT, "libvmmx not found",
                                f"{path}: {e} (set VMMX_LIBRARY to the library's path)") from None
            for name, (res, args) in _PROTOS.items():
                f = getattr(lib, name)
                f.restype, f.argtypes = res, args
            _lib, _path = lib, path
        return _lib


def _check(call, err):
    if err:
        lib = library()
        detail = lib.vmmx_last_error().decode(errors="replace")
        raise VmmxError(call, -err, lib.vmmx_strerror(err).decode(errors="replace"), detail)
    return err


def version():
    """libvmmx's version as (major, minor, patch)."""
    v = library().vmmx_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def parse_size(v, total=0):
    """Bytes of a size: an int, or text in libvmmx's grammar ("8GiB", "512M",
    "50%" of ``total``).  Raises TypeError or ValueError for a value that is
    neither (a float, a negative int, text with a NUL byte), VmmxError
    (EINVAL) naming text the library does not read as a size."""
    v = _args.size_or_text("vmmx.parse_size", "v", v)
    total = _args.size("vmmx.parse_size", "total", total, _args.U64_MAX, "UINT64_MAX")
    if not isinstance(v, str):
        return v
    out = ctypes.c_uint64()
    err = library().vmmx_parse_size(v.encode(), total, ctypes.byref(out))
    if err:
        raise VmmxError("vmmx_parse_size", -err, library().vmmx_strerror(err).decode(),
                        f"{v!r}: not a size (examples: 8GiB, 512M, 50%)")
    return out.value


# The settings configure() takes as sizes (int or text); the others are text (or ints,
# written in decimal), which the library reads and judges when the allocator is made.
_SIZE_SETTINGS = frozenset((
    "device_limit", "host_limit", "device_headroom", "headroom", "chunk_size", "chunk_max",
    "cache_limit", "device_prealloc", "sim_device_mem", "sim_host_mem"))


def _setting(fn, name, v):
    if not isinstance(name, str) or not name or \
            not all(c.isascii() and (c.isalnum() or c == "_") for c in name):
        raise ValueError(f"{fn}: setting name {name!r} is not a VMMX_ name "
                         "(letters, digits and _, without the prefix)")
    if v is None:
        return None
    if name.lower() in _SIZE_SETTINGS:
        return str(_args.size_or_text(fn, name, v))
    if isinstance(v, str):
        return _args.text(fn, name, v)
    if isinstance(v, float) or not hasattr(v, "__index__"):
        raise TypeError(f"{fn}: {name} must be a str or an int, not {type(v).__name__}")
    return str(int(v))  # bool included: a 0/1 setting such as sim_pageable


def _config_entries(fn, settings):
    """The "VMMX_NAME=value" entries of configure()'s settings (None: unset), each
    value checked first; fn names the public function in the errors."""
    vals = {k: _setting(fn, k, v) for k, v in settings.items()}
    return [f"VMMX_{k.upper()}={v}".encode() for k, v in vals.items() if v is not None]


def configure(policy=None, device_limit=None, host_limit=None, device_headroom=None,
              chunk_size=None, chunk_max=None, cache_limit=None, log=None, trace=None,
              backend=None, **more):
    """Settings of the process-wide allocators, before the first is made.

    Each argument is the VMMX_* variable of the same name (sizes as ints in
    bytes or as text: "8GiB", "50%"); ``more`` takes other VMMX_ names
    without the prefix (``sim_device_mem="2GiB"``), as text or ints.  They
    override the environment.  Raises TypeError or ValueError for a value
    that is neither a size nor text (a float, a negative int, text with a NUL
    byte: see the package's help), keeping the earlier settings; VmmxError
    (EBUSY) once an allocator exists.  The library reads the text when the
    allocator is made, and refuses bad text then (VmmxError, ECONFIG).
    """
    settings = dict(policy=policy, device_limit=device_limit, host_limit=host_limit,
                    device_headroom=device_headroom, chunk_size=chunk_size,
                    chunk_max=chunk_max, cache_limit=cache_limit, log=log, trace=trace,
                    backend=backend)
    settings.update(more)
    # every value checked before the library sees any: a refused call keeps the old settings
    entries = _config_entries("vmmx.configure", settings)
    arr = (c_char_p * (len(entries) + 1))(*entries, None)
    _check("vmmx_alloc_global_config", library().vmmx_alloc_global_config(arr))


def allocator(device=0):
    """The process-wide allocator of a device (made on first use), as an address."""
    device = _args.device("vmmx.allocator", "device", device)
    a = c_void_p()
    _check("vmmx_alloc_global", library().vmmx_alloc_global(device, ctypes.byref(a)))
    return a.value


def context(device=0):
    """The context under the process-wide allocator of a device, as an address."""
    device = _args.device("vmmx.context", "device", device)
    return library().vmmx_alloc_ctx(allocator(device))


def alloc_stats(device=0):
    """The process-wide allocator's statistics (struct vmmx_alloc_stats) as a dict."""
    device = _args.device("vmmx.alloc_stats", "device", device)
    st = AllocStats(size=ctypes.sizeof(AllocStats))
    _check("vmmx_alloc_stats", library().vmmx_alloc_stats(allocator(device), ctypes.byref(st)))
    return st.as_dict()


def context_stats(device=0):
    """The context's statistics (vmmx_stats_json) as a dict."""
    device = _args.device("vmmx.context_stats", "device", device)
    lib, ctx, size = library(), context(device), 1 << 16
    while True:
        buf, need = ctypes.create_string_buffer(size), c_size_t()
        err = lib.vmmx_stats_json(ctx, buf, size, ctypes.byref(need))
        if err == -34 and need.value > size:  # -VMMX_ERANGE: grow and retry
            size = need.value
            continue
        _check("vmmx_stats_json", err)
        return json.loads(buf.value.decode())


def empty_cache(device=0):
    """Give the process-wide allocator's idle segments back to libvmmx."""
    device = _args.device("vmmx.empty_cache", "device", device)
    _check("vmmx_alloc_empty_cache", library().vmmx_alloc_empty_cache(allocator(device)))


def malloc(size, stream=None, device=0):
    """Raw memory from the process-wide allocator (tests, tools): an address.

    ``stream``: None, a CUstream handle or a stream object (see the package's
    help); the block is reused first on that stream.
    """
    fn = "vmmx.malloc"
    size, stream = _args.size(fn, "size", size), _args.stream(fn, "stream", stream)
    device = _args.device(fn, "device", device)
    p = c_void_p()
    _check("vmmx_alloc_malloc", library().vmmx_alloc_malloc(allocator(device), size,
                                                             stream, ctypes.byref(p)))
    return p.value


def free(ptr, stream=None, device=0):
    """Give memory from :func:`malloc` back (None: nothing to do)."""
    fn = "vmmx.free"
    ptr, stream = _args.pointer(fn, "ptr", ptr, null=True), _args.stream(fn, "stream", stream)
    device = _args.device(fn, "device", device)
    _check("vmmx_alloc_free", library().vmmx_alloc_free(allocator(device), ptr, stream))


def prefetch(ptr, nbytes, to=None, stream=None, device=0):
    """Move the chunks under [ptr, ptr + nbytes) to ``to`` (default: the GPU).

    ``to``: a :class:`Loc` (``HOST``, ``DEVICE(i)``).  ``stream``: None, a
    CUstream handle or a stream object (``.cuda_stream``, ``.ptr``,
    ``._as_parameter_``) whose queued work uses the range; the move waits for
    it.  Blocks until the data moved; see vmmx_prefetch().
    """
    fn = "vmmx.prefetch"
    ptr, nbytes = _args.pointer(fn, "ptr", ptr), _args.size(fn, "nbytes", nbytes)
    stream, device = _args.stream(fn, "stream", stream), _args.device(fn, "device", device)
    if to is not None and not isinstance(to, Loc):
        raise TypeError(f"{fn}: to must be a vmmx.Loc (vmmx.HOST, vmmx.DEVICE(i)) or None, "
                        f"not {type(to).__name__}")
    loc = DEVICE(device) if to is None else to
    _check("vmmx_prefetch", library().vmmx_prefetch(context(device), ptr, nbytes, loc,
                                                     stream))


def advise(ptr, nbytes, advice, device=0):
    """vmmx_advise(): tell the buffers' policies how the range is used (``advice``:
    an ADVISE_* constant)."""
    fn = "vmmx.advise"
    ptr, nbytes = _args.pointer(fn, "ptr", ptr), _args.size(fn, "nbytes", nbytes)
    advice, device = _args.c_int(fn, "advice", advice), _args.device(fn, "device", device)
    _check("vmmx_advise", library().vmmx_advise(context(device), ptr, nbytes, advice))


def lookup(ptr, device=0):
    """The chunk holding ``ptr``: dict(base, size, loc, buf), or None if in no buffer."""
    fn = "vmmx.lookup"
    ptr, device = _args.pointer(fn, "ptr", ptr), _args.device(fn, "device", device)
    info = ChunkInfo()
    err = library().vmmx_lookup(context(device), ptr, ctypes.byref(info))
    if err in (-ENOENT, -EFAULT):
        return None
    _check("vmmx_lookup", err)
    return dict(base=info.base, size=info.size, loc=repr(info.loc), buf=info.buf)


def runs(ptr, nbytes, device=0):
    """[(offset, length, location)] covering [ptr, ptr + nbytes): the pieces that each
    lie in one location (chunks of one GPU together; host memory as one piece per
    location change).  Memory in no buffer is one piece of location None.

    The driver must see a copy over libvmmx memory one such piece at a time: one
    whose range runs from device chunks into host chunks crashes it (docs/DRIVER.md).
    """
    fn = "vmmx.runs"
    ptr, nbytes = _args.pointer(fn, "ptr", ptr), _args.size(fn, "nbytes", nbytes)
    device = _args.device(fn, "device", device)
    if ptr + nbytes > _args.UINTPTR_MAX + 1:
        raise ValueError(f"{fn}: nbytes {nbytes} from ptr {ptr:#x} runs past the end of "
                         "the address space")
    out, p, end = [], ptr, ptr + nbytes
    while p < end:
        info = lookup(p, device)
        loc = info["loc"] if info else None
        stop = min(end, info["base"] + info["size"]) if info else end
        if out and out[-1][2] == loc:
            off, n, _ = out[-1]
            out[-1] = (off, n + stop - p, loc)
        else:
            out.append((p - ptr, stop - p, loc))
        p = stop
    return out


def residency(ptr, nbytes, device=0):
    """Bytes of [ptr, ptr + nbytes) on a GPU and in host memory: (device, host).

    The range must lie in one buffer (one allocation); None if it is in none.
    """
    fn = "vmmx.residency"
    ptr, nbytes = _args.pointer(fn, "ptr", ptr), _args.size(fn, "nbytes", nbytes)
    device = _args.device(fn, "device", device)
    info, r, lib = ChunkInfo(), Residency(), library()
    if lib.vmmx_lookup(context(device), ptr, ctypes.byref(info)):
        return None
    base = lib.vmmx_buf_ptr(info.buf)
    _check("vmmx_buf_residency",
           lib.vmmx_buf_residency(info.buf, ptr - base, nbytes, ctypes.byref(r)))
    return r.device, r.host


def owns_segment(ptr, nbytes, device=0):
    """Whether [ptr, ptr + nbytes) fills a buffer of its own (nothing else in its chunks).

    Only such ranges are moved by the offload hooks: moving a chunk that other
    live tensors share would race with the kernels using them.  At most 1 MiB
    may be left over: PyTorch's caching allocator splits a block only when
    more than that would remain, so nothing else can live in such a tail.
    """
    fn = "vmmx.owns_segment"
    ptr, nbytes = _args.pointer(fn, "ptr", ptr), _args.size(fn, "nbytes", nbytes)
    device = _args.device(fn, "device", device)
    info = ChunkInfo()
    lib = library()
    if lib.vmmx_lookup(context(device), ptr, ctypes.byref(info)):
        return False
    base, size = lib.vmmx_buf_ptr(info.buf), lib.vmmx_buf_size(info.buf)
    return base == ptr and nbytes <= size and size - nbytes <= (1 << 20)
