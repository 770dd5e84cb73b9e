"""Keep glibc's malloc from holding on to freed frame buffers (a host's RSS stays flat).

A host allocates and frees many buffers of a few MB (decoded frames, OCR inputs) from many
threads. glibc serves a freed mmap-sized block's size from its heaps from then on (the mmap
threshold adapts upwards, to 32 MB) and gives each thread its own heap (up to 8 per core),
so freed frames stay in the process as fragmented heap: the soak's RSS grew by a third in
six minutes while Python's own allocations (tracemalloc) grew by 2 MB. Fixing the threshold
at 128 KB (large blocks are mmapped and returned on free) and capping the heaps at 2 kept it
within 5 % (docs/fleet.md, *Chaos soak*). Costs nothing measurable here: a large block's
mmap and munmap are microseconds beside the work done on it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameters (malloc.h)
M_ARENA_MAX = -8
MMAP_THRESHOLD = 128 * 1024
ARENA_MAX = 2


def bound_malloc() -> bool:
    """Set the threshold and the heap cap on glibc; whether it did. Leaves malloc alone on
    other C libraries, and where the environment already tunes it (MALLOC_ARENA_MAX,
    MALLOC_MMAP_THRESHOLD_) or MOBAGENT_MALLOC=default asks for glibc's defaults."""
    if (not sys.platform.startswith("linux") or os.environ.get("MOBAGENT_MALLOC") == "default"
            or "MALLOC_ARENA_MAX" in os.environ or "MALLOC_MMAP_THRESHOLD_" in os.environ):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_ARENA_MAX, ARENA_MAX))
