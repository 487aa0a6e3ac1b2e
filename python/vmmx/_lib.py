# SPDX-License-Identifier: MIT
"""libvmmx's C interface as ctypes sees it: the library, the prototypes of the
functions the package calls, the structures and the constants, mirrored by
hand from include/vmmx.h.  python/tests/test_lib_layout.py compiles a C
program against the header and checks every structure here (size, each
field's offset) and every constant (CONSTANTS) against it.

The rest of the package uses only this module's names; ``vmmx`` re-exports
them (``vmmx.EINVAL``, ``vmmx.library()``, ``vmmx.VmmxError``...).
"""
import ctypes
import ctypes.util
import os
import threading

# enum vmmx_error: errno values below 256, libvmmx's own from 256
EPERM, ENOENT, ENOMEM, EFAULT, EBUSY, EEXIST, ENODEV, EINVAL, ERANGE = 1, 2, 12, 14, 16, 17, 19, \
    22, 34
ENOTSUP = 95
EDRIVER, ENODRIVER, ECONFIG, ENOBACKEND, EFAULTINJ, EPOLICY = 256, 257, 258, 259, 260, 261
# enum vmmx_loc_kind
LOC_NONE, LOC_DEVICE, LOC_HOST, LOC_HOST_NUMA = 0, 1, 2, 3
# enum vmmx_advice
ADVISE_HOT, ADVISE_COLD, ADVISE_READ_MOSTLY, ADVISE_WILL_NEED = 1, 2, 3, 4
ADVISE_NOT_READ_MOSTLY, ADVISE_CPU = 5, 6
ALLOC_STATS_VERSION = 1
# sleep and wake: enum vmmx_sleep_mode, VMMX_TAG_MAX
SLEEP_OFFLOAD, SLEEP_DISCARD = 0, 1
TAG_MAX = 32

# Every constant above, checked against VMMX_<name> in the header.
CONSTANTS = (
    "EPERM", "ENOENT", "ENOMEM", "EFAULT", "EBUSY", "EEXIST", "ENODEV", "EINVAL", "ERANGE",
    "ENOTSUP", "EDRIVER", "ENODRIVER", "ECONFIG", "ENOBACKEND", "EFAULTINJ", "EPOLICY",
    "LOC_NONE", "LOC_DEVICE", "LOC_HOST", "LOC_HOST_NUMA", "ADVISE_HOT", "ADVISE_COLD",
    "ADVISE_READ_MOSTLY", "ADVISE_WILL_NEED", "ADVISE_NOT_READ_MOSTLY", "ADVISE_CPU",
    "ALLOC_STATS_VERSION",
    "SLEEP_OFFLOAD", "SLEEP_DISCARD", "TAG_MAX")


class VmmxError(RuntimeError):
    """A libvmmx call failed.

    Attributes: ``code`` (the positive error code), ``name`` (its
    ``vmmx_strerror`` text), ``detail`` (``vmmx_last_error()`` of the call),
    ``call`` (the function).  Arguments the package refuses before calling
    the library raise TypeError or ValueError instead.
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


class SleepStats(ctypes.Structure):
    """struct vmmx_sleep_stats: one tag's memory."""
    _fields_ = [(n, ctypes.c_uint64) for n in (
        "buffers", "bytes", "asleep_bytes", "offloaded_bytes", "device_bytes", "host_bytes",
        "stash_bytes")]

    def as_dict(self):
        return {n: getattr(self, n) for n, _ in self._fields_}


# Every structure above, checked against struct vmmx_<name> in the header.
STRUCTS = {"loc": Loc, "alloc_stats": AllocStats, "residency": Residency,
           "chunk_info": ChunkInfo, "sleep_stats": SleepStats}

c_int, c_void_p, c_size_t, c_char_p = ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p

PROTOS = {
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
    "vmmx_tag_scope": (c_int, [c_char_p]),
    "vmmx_sleep": (c_int, [c_void_p, ctypes.POINTER(c_char_p), c_size_t, c_int, c_void_p,
                           ctypes.POINTER(c_size_t)]),
    "vmmx_wake": (c_int, [c_void_p, ctypes.POINTER(c_char_p), c_size_t,
                          ctypes.POINTER(c_size_t)]),
    "vmmx_sleep_stats": (c_int, [c_void_p, c_char_p, ctypes.POINTER(SleepStats)]),
    "vmmx_sleep_release": (c_int, [c_void_p, ctypes.POINTER(c_char_p), c_size_t,
                                   ctypes.POINTER(c_size_t)]),
}

_lock = threading.Lock()
_dll = None


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
    global _dll
    with _lock:
        if _dll is None:
            path = library_path()
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                raise VmmxError("load", ENOENT, "libvmmx not found",
                                f"{path}: {e} (set VMMX_LIBRARY to the library's path)") from None
            for name, (res, args) in PROTOS.items():
                f = getattr(lib, name)
                f.restype, f.argtypes = res, args
            _dll = lib
        return _dll


def check(call, err):
    """Raise VmmxError for a nonzero (negative) libvmmx return; else return it."""
    if err:
        lib = library()
        detail = lib.vmmx_last_error().decode(errors="replace")
        raise VmmxError(call, -err, lib.vmmx_strerror(err).decode(errors="replace"), detail)
    return err
