"""glibc's malloc seen from inside the process: what it holds in use and
free (``mallinfo2``), how many arenas it runs, and what ``malloc_trim(0)``
gives back. The report tells the allocator's growth (memory freed by the
job but kept by malloc: fragmentation, one arena per contending thread)
from objects that grow with these.

Only glibc has these calls (2.33+ for ``mallinfo2``); elsewhere every
function returns None. Nothing here allocates through malloc in a way that
changes what it measures beyond a few hundred bytes.
"""

import ctypes
import os

_libc = None
_tried = False


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
        "uordblks", "fordblks", "keepcost")]


def _load():
    global _libc, _tried
    if _tried:
        return _libc
    _tried = True
    try:
        libc = ctypes.CDLL(None)
        f = libc.mallinfo2
        f.restype = _Mallinfo2
        f.argtypes = []
        libc.malloc_trim.restype = ctypes.c_int
        libc.malloc_trim.argtypes = [ctypes.c_size_t]
        libc.open_memstream.restype = ctypes.c_void_p
        libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_void_p),
                                        ctypes.POINTER(ctypes.c_size_t)]
        libc.malloc_info.restype = ctypes.c_int
        libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
        libc.fclose.restype = ctypes.c_int
        libc.fclose.argtypes = [ctypes.c_void_p]
        libc.free.restype = None
        libc.free.argtypes = [ctypes.c_void_p]
        _libc = libc
    except (AttributeError, OSError, TypeError):
        _libc = None
    return _libc


def _arenas(libc):
    """The number of arenas, from ``malloc_info``'s XML (one ``<heap>`` each)."""
    # (Plain pointers: ctypes.cast would leave a reference cycle per call,
    # which the paused collector would let pile up during a census.)
    buf = ctypes.c_void_p()
    size = ctypes.c_size_t()
    f = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not f:
        return None
    try:
        libc.malloc_info(0, f)
    finally:
        libc.fclose(f)
    try:
        text = ctypes.string_at(buf.value, size.value) if buf.value else b""
    finally:
        libc.free(buf)
    return text.count(b"<heap nr=")


def stats():
    """``{"heap", "mmapped", "in_use", "free", "arenas"}`` in bytes (arenas a
    count), or None without glibc."""
    libc = _load()
    if libc is None:
        return None
    try:
        m = libc.mallinfo2()
        out = {"heap": int(m.arena), "mmapped": int(m.hblkhd), "in_use": int(m.uordblks),
               "free": int(m.fordblks)}
        n = _arenas(libc)
        if n:
            out["arenas"] = n
        return out
    except Exception:
        return None


def _rss():
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


# malloc_trim is tried at exit only where malloc holds this much free, and
# this share of its heap: otherwise there is nothing to learn.
TRIM_MIN_FREE = 16 << 20
TRIM_MIN_SHARE = 0.25


def trim_experiment():
    """At the end of the run, where malloc holds much freed memory: resident
    memory before and after ``malloc_trim(0)`` (which hands free pages back
    to the system; it changes no object), or None."""
    libc = _load()
    s = stats()
    if libc is None or s is None:
        return None
    if s["free"] < TRIM_MIN_FREE or s["free"] < TRIM_MIN_SHARE * max(s["heap"], 1):
        return None
    try:
        before = _rss()
        libc.malloc_trim(0)
        after = _rss()
    except Exception:
        return None
    return {"rss_before": before, "rss_after": after}
