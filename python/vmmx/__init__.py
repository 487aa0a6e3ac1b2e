# SPDX-License-Identifier: MIT
"""libvmmx from Python: ctypes over the library's exported API, nothing compiled.

The library is found, in order, at ``$VMMX_LIBRARY`` (a path, e.g. a build
tree's ``lib/.libs/libvmmx.so``), where ``make install`` put it (recorded in
``vmmx/_build.py``), or by the dynamic linker's search (``libvmmx.so.0``).

Library failures raise :class:`VmmxError`, which carries the code, its name
(``vmmx_strerror``) and the detail of the failure (``vmmx_last_error()``);
arguments the package refuses raise TypeError or ValueError (below).  The
C interface as ctypes sees it (prototypes, structures, constants) is
``vmmx._lib``, checked against the header by the tests; its names are
re-exported here.  ``__version__`` is the package's release (the same as
libvmmx's, known without loading it); :func:`version` is the loaded
library's.

Statistics make nothing: :func:`alloc_stats` before the process-wide
allocator of a device exists gives every count 0, :func:`context_stats` an
empty dict, :func:`lookup` None; :func:`configure` can still be called.

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
  headroom), "8GiB" or "50%" in libvmmx's grammar ("8GB": powers of 1000),
  checked at once (ValueError naming the argument); ``device_limit`` and
  ``device_headroom`` also per device, as accelerate's max_memory has it:
  ``{0: "8GiB", 1: "4GiB"}`` (or "0:8GiB,1:4GiB");
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
import json
import re
import threading

from . import _args
from ._lib import (  # noqa: F401 (re-exported: vmmx.EINVAL, vmmx.library()...)
    ADVISE_COLD, ADVISE_CPU, ADVISE_HOT, ADVISE_NOT_READ_MOSTLY, ADVISE_READ_MOSTLY,
    ADVISE_WILL_NEED,
    ALLOC_STATS_VERSION, EBUSY, ECONFIG, EDRIVER, EEXIST, EFAULT, EINVAL, ENOBACKEND, ENODEV,
    ENODRIVER, ENOENT, ENOMEM, ENOTSUP, EPERM, EPOLICY, ERANGE, LOC_DEVICE, LOC_HOST,
    LOC_HOST_NUMA, LOC_NONE, SLEEP_DISCARD, SLEEP_OFFLOAD, TAG_MAX, AllocStats, ChunkInfo, Loc,
    Residency, SleepStats, VmmxError, library, library_path)
from ._lib import check as _check
from ._lib import c_char_p, c_size_t, c_void_p

__all__ = [
    "VmmxError", "Loc", "DEVICE", "HOST", "library", "library_path", "version",
    "configure", "allocator", "alloc_stats", "context_stats", "empty_cache",
    "prefetch", "advise", "lookup", "residency", "owns_segment", "parse_size", "ADVISE_HOT",
    "ADVISE_COLD", "ADVISE_READ_MOSTLY", "ADVISE_WILL_NEED", "ADVISE_NOT_READ_MOSTLY",
    "ADVISE_CPU", "tag_scope", "sleep", "wake", "sleep_release", "sleep_stats", "SLEEP_OFFLOAD", "SLEEP_DISCARD",
]

# The package's version: the libvmmx release it came with (configure.ac's
# AC_INIT, python/pyproject.toml), known without loading the library.  The
# loaded library's own is version().
__version__ = "0.1.0"


def DEVICE(i=0):
    """The location of GPU ``i``."""
    return Loc(LOC_DEVICE, _args.device("vmmx.DEVICE", "i", i))


HOST = Loc(LOC_HOST, 0)

_lock = threading.Lock()
# What this package knows of the process-wide allocators: the devices whose
# allocator it made or was given (allocator()), and the settings it last gave
# the library (configure()), to ask whether one exists without making one.
_made = set()
_entries = []


def version():
    """libvmmx's version as (major, minor, patch)."""
    v = library().vmmx_version()
    return (v >> 16, (v >> 8) & 0xFF, v & 0xFF)


def _parse_text(fn, name, v, total):
    """Bytes of size text in the library's grammar, or ValueError naming the argument."""
    out = ctypes.c_uint64()
    if library().vmmx_parse_size(v.encode(), total, ctypes.byref(out)):
        raise ValueError(f"{fn}: {name} {v!r} is not a size (examples: 8GiB, 8GB, 512M, 50%)")
    return out.value


def parse_size(v, total=0):
    """Bytes of a size: an int, or text in libvmmx's grammar ("8GiB" and "512M" in
    powers of 1024, "8GB" in powers of 1000, "50%" of ``total``).  Raises
    TypeError or ValueError for a value that is neither (a float, a negative
    int, text with a NUL byte) and ValueError for text that is not a size."""
    fn = "vmmx.parse_size"
    v = _args.size_or_text(fn, "v", v)
    total = _args.size(fn, "total", total, _args.U64_MAX, "UINT64_MAX")
    if not isinstance(v, str):
        return v
    return _parse_text(fn, "v", v, total)


# The settings configure() takes as sizes (int or text); the others are text (or ints,
# written in decimal), which the library reads and judges when the allocator is made.
_SIZE_SETTINGS = frozenset((
    "device_limit", "host_limit", "device_headroom", "headroom", "chunk_size", "chunk_max",
    "cache_limit", "device_prealloc", "sim_device_mem", "sim_host_mem"))


# The sizes that take a value per device: "0:8GiB,1:4GiB" in the library's
# grammar, or a dict {0: "8GiB", 1: "4GiB"} (accelerate's max_memory form).
_DEVICE_SETTINGS = frozenset(("device_limit", "device_headroom", "headroom"))
# The sizes that take "N%" (of the device's or the host's memory).
_PCT_SETTINGS = _DEVICE_SETTINGS | {"host_limit", "device_prealloc"}


def _size_item(fn, name, v, pct):
    """One size: an int, or text the library reads as a size (a % where pct)."""
    v = _args.size_or_text(fn, name, v)
    if isinstance(v, str):
        _parse_text(fn, name, v, 100 if pct and v.strip().endswith("%") else 0)
    return str(v)


def _size_setting(fn, name, v):
    """The text of a size setting, every piece checked here: TypeError or
    ValueError naming the argument, never the library's verdict later."""
    key = name.lower()
    per_device = key in _DEVICE_SETTINGS
    if isinstance(v, dict):
        if not per_device:
            raise TypeError(f"{fn}: {name} must be an int or a str such as '8GiB', not dict "
                            "(a size per device: device_limit and device_headroom only)")
        if not v:
            raise ValueError(f"{fn}: {name} is an empty dict (a size per device: "
                             "{0: '8GiB', 1: '4GiB'})")
        items = []
        for d in sorted(v, key=lambda k: (str(type(k)), str(k))):
            if d == "cpu":
                raise ValueError(f"{fn}: {name} has a 'cpu' key: host memory is host_limit")
            i = _args.device(fn, f"{name} key", d)
            items.append(f"{i}:{_size_item(fn, f'{name}[{i}]', v[d], True)}")
        return ",".join(items)
    if not isinstance(v, str) or not per_device:
        return _size_item(fn, name, v, key in _PCT_SETTINGS)
    _args.text(fn, name, v)
    for item in v.split(","):  # "8GiB", "0:8GiB,1:4GiB", "8GiB,1:4GiB"
        dev, colon, size = item.rpartition(":")
        if colon and not (dev.isascii() and dev.isdigit()):
            raise ValueError(f"{fn}: {name} {v!r}: {dev!r} is not a device index "
                             "(per device: '0:8GiB,1:4GiB')")
        if not size:
            raise ValueError(f"{fn}: {name} {v!r} has an empty item "
                             "(per device: '0:8GiB,1:4GiB')")
        _parse_text(fn, name, size, 100 if size.strip().endswith("%") else 0)
    return v


def _setting(fn, name, v):
    if not isinstance(name, str) or not name or \
            not all(c.isascii() and (c.isalnum() or c == "_") for c in name):
        raise ValueError(f"{fn}: setting name {name!r} is not a VMMX_ name "
                         "(letters, digits and _, without the prefix)")
    if v is None:
        return None
    if name.lower() in _SIZE_SETTINGS:
        return _size_setting(fn, name, v)
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
    with _lock:
        _check("vmmx_alloc_global_config", library().vmmx_alloc_global_config(arr))
        _entries[:] = entries


def _config_error(e):
    """A setting the library refused when it made the allocator, told in
    configure()'s terms where configure() gave it (the library names the
    VMMX_ variable and the C structure it came through)."""
    given = {x.decode().split("=", 1)[0] for x in _entries}

    def say(m):
        var = m.group(1)
        return f"{var[5:].lower()}={m.group(2)!r} (vmmx.configure)" if var in given else m.group(0)
    e.detail = re.sub(r'(VMMX_[A-Z0-9_]+)="([^"]*)" \(struct vmmx_config vars\)', say,
                      e.detail or "")
    e.args = (f"{e.call}: {e.name}" + (f": {e.detail}" if e.detail else ""),)
    return e


def _exists(device):
    """The process-wide allocator of a device if it exists, else None; never
    makes one.  Known to exist: made through this package.  Else, whether any
    exists is asked of the library without making one: giving it again the
    settings configure() last gave (no change) fails with EBUSY once one is
    made (by the C entry points of PyTorch's or CuPy's hooks, say)."""
    with _lock:
        if device in _made:
            return _made_alloc(device)
        arr = (c_char_p * (len(_entries) + 1))(*_entries, None)
        if library().vmmx_alloc_global_config(arr) != -EBUSY:
            return None
    return allocator(device)


def _made_alloc(device):
    a = c_void_p()
    _check("vmmx_alloc_global", library().vmmx_alloc_global(device, ctypes.byref(a)))
    return a.value


def allocator(device=0):
    """The process-wide allocator of a device (made on first use), as an address."""
    device = _args.device("vmmx.allocator", "device", device)
    try:
        a = _made_alloc(device)
    except VmmxError as e:
        raise _config_error(e) from None
    with _lock:
        _made.add(device)
    return a


def context(device=0):
    """The context under the process-wide allocator of a device, as an address."""
    device = _args.device("vmmx.context", "device", device)
    return library().vmmx_alloc_ctx(allocator(device))


def alloc_stats(device=0):
    """The process-wide allocator's statistics (struct vmmx_alloc_stats) as a dict.

    Makes nothing: before the allocator of the device exists, every count is
    0 (and :func:`configure` may still be called)."""
    device = _args.device("vmmx.alloc_stats", "device", device)
    st = AllocStats(size=ctypes.sizeof(AllocStats), version=ALLOC_STATS_VERSION, device=device)
    a = _exists(device)
    if a is not None:
        _check("vmmx_alloc_stats", library().vmmx_alloc_stats(a, ctypes.byref(st)))
    return st.as_dict()


def context_stats(device=0):
    """The context's statistics (vmmx_stats_json) as a dict.

    Makes nothing: before the allocator of the device exists, an empty dict."""
    device = _args.device("vmmx.context_stats", "device", device)
    a = _exists(device)
    if a is None:
        return {}
    lib, size = library(), 1 << 16
    ctx = lib.vmmx_alloc_ctx(a)
    while True:
        buf, need = ctypes.create_string_buffer(size), c_size_t()
        err = lib.vmmx_stats_json(ctx, buf, size, ctypes.byref(need))
        if err == -ERANGE and need.value > size:  # grow and retry
            size = need.value
            continue
        _check("vmmx_stats_json", err)
        return json.loads(buf.value.decode())


def empty_cache(device=0):
    """Give the process-wide allocator's idle segments back to libvmmx (none made
    yet: nothing to do, and nothing made)."""
    device = _args.device("vmmx.empty_cache", "device", device)
    a = _exists(device)
    if a is not None:
        _check("vmmx_alloc_empty_cache", library().vmmx_alloc_empty_cache(a))


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
    a = _exists(device)
    if a is None:  # no allocator: in no buffer of it, and none made
        return None
    info = ChunkInfo()
    err = library().vmmx_lookup(library().vmmx_alloc_ctx(a), ptr, ctypes.byref(info))
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
    a = _exists(device)
    if a is None:
        return None
    info, r, lib = ChunkInfo(), Residency(), library()
    if lib.vmmx_lookup(lib.vmmx_alloc_ctx(a), ptr, ctypes.byref(info)):
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
    a = _exists(device)
    if a is None:
        return False
    info = ChunkInfo()
    lib = library()
    if lib.vmmx_lookup(lib.vmmx_alloc_ctx(a), ptr, ctypes.byref(info)):
        return False
    base, size = lib.vmmx_buf_ptr(info.buf), lib.vmmx_buf_size(info.buf)
    return base == ptr and nbytes <= size and size - nbytes <= (1 << 20)


# ---- sleep and wake (vmmx_sleep, vmmx_wake: include/vmmx.h) ----

def _tag(fn, name, v):
    v = _args.text(fn, name, v)
    if not v:
        raise ValueError(f"{fn}: {name} must not be empty")
    if len(v.encode()) >= TAG_MAX:
        raise ValueError(f"{fn}: {name} {v!r} is longer than {TAG_MAX - 1} bytes")
    return v


def _tags(fn, tags):
    """None (every tag), one tag, or an iterable of tags: a ctypes array and its length."""
    if tags is None:
        return None, 0
    if isinstance(tags, str):
        tags = [tags]
    try:
        tags = list(tags)
    except TypeError:
        raise TypeError(f"{fn}: tags must be None, a str or an iterable of str, "
                        f"not {type(tags).__name__}") from None
    arr = (c_char_p * max(len(tags), 1))(*[_tag(fn, "tag", t).encode() for t in tags])
    return arr, len(tags)


def tag_scope(tag):
    """Set the calling thread's current tag (None: none): every buffer, and every
    block of the process-wide allocators, made in this thread from now on
    carries it (a tagged block gets a segment of its own).  The library does
    not stack tags: ``vmmx.torch.region`` restores the outer one."""
    fn = "vmmx.tag_scope"
    tag = None if tag is None else _tag(fn, "tag", tag)
    _check("vmmx_tag_scope", library().vmmx_tag_scope(tag.encode() if tag else None))


def sleep(tags=None, offload=True, stream=None, device=0):
    """Put the memory of ``tags`` (None: every tag) to sleep: its addresses stay
    reserved, its device memory goes back to the driver.  ``offload``: keep the
    contents in pinned host memory (False: discard them).  Refused (VmmxError
    EBUSY) while work queued on ``stream`` (None: the default stream) has not
    finished.  Returns the bytes put to sleep."""
    fn = "vmmx.sleep"
    arr, n = _tags(fn, tags)
    offload = _args.flag(fn, "offload", offload)
    stream, device = _args.stream(fn, "stream", stream), _args.device(fn, "device", device)
    done = c_size_t()
    _check("vmmx_sleep", library().vmmx_sleep(context(device), arr, n,
                                               SLEEP_OFFLOAD if offload else SLEEP_DISCARD,
                                               stream, ctypes.byref(done)))
    return done.value


def wake(tags=None, device=0):
    """Bring the memory of sleeping ``tags`` (None: every tag) back at the same
    addresses (offloaded contents copied back).  Returns the bytes woken."""
    fn = "vmmx.wake"
    arr, n = _tags(fn, tags)
    device = _args.device(fn, "device", device)
    done = c_size_t()
    _check("vmmx_wake", library().vmmx_wake(context(device), arr, n, ctypes.byref(done)))
    return done.value


def sleep_release(tags=None, device=0):
    """Give back the pinned host memory that awake buffers of ``tags`` (None:
    every tag) keep from their last offload, so that the next one pins and maps
    nothing new.  Returns the bytes given back."""
    fn = "vmmx.sleep_release"
    arr, n = _tags(fn, tags)
    device = _args.device(fn, "device", device)
    done = c_size_t()
    _check("vmmx_sleep_release", library().vmmx_sleep_release(context(device), arr, n,
                                                               ctypes.byref(done)))
    return done.value


def sleep_stats(tag, device=0):
    """A tag's memory as a dict (struct vmmx_sleep_stats): buffers, bytes,
    asleep_bytes, offloaded_bytes, device_bytes, host_bytes, stash_bytes (host
    memory holding or kept for its offloaded contents).  "" for untagged
    buffers.  Makes nothing: before the allocator of the device exists, all 0."""
    fn = "vmmx.sleep_stats"
    tag, device = _args.text(fn, "tag", tag), _args.device(fn, "device", device)
    st = SleepStats()
    a = _exists(device)
    if a is not None:
        _check("vmmx_sleep_stats", library().vmmx_sleep_stats(library().vmmx_alloc_ctx(a),
                                                               tag.encode(), ctypes.byref(st)))
    return st.as_dict()
