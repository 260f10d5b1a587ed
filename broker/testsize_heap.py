"""Before `flux start --test-size` forks: its free malloc chunks taken, so brokers allocate in pages of their own.

A forked broker's first allocations are served from the chunks that importing left free in the parent's heap
(glibc's per-thread cache and its bins), scattered over pages every broker shares: each write there copies a page.
Measured at 256 brokers (issue 45): about 55 page faults and 0.2 MB per broker. Taking those chunks once in the
parent (about 1 MB it keeps, shared by every broker, in ~6 ms) sends the brokers' allocations to the top of the
heap, fresh pages of their own filled densely. Where glibc's `mallinfo2` is missing (another libc, glibc < 2.33),
nothing is taken.
"""

from __future__ import annotations

import ctypes
from collections.abc import Callable

TCACHE_REQUESTS = range(24, 1040, 16)  # a request of each of glibc's 64 per-thread cache classes (chunks 32-1040)
TCACHE_COUNT = 7  # glibc's default tcache_count: chunks kept per class
BIN_REQUESTS = (4096, 1024, 256, 64, 24)  # large to small: what is left of a bin after the large ones is small
MAX_TAKEN = 100_000  # a bound, whatever the heap says


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks")
    ] + [("keepcost", ctypes.c_size_t)]


def _glibc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None)
        libc.mallinfo2.restype = _MallInfo2
        libc.mallinfo2.argtypes = []
    except (OSError, AttributeError):
        return None
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    return libc


def take_free_chunks(
    malloc: Callable[[int], int | None], heap: Callable[[], tuple[int, int]], bound: int = MAX_TAKEN
) -> int:
    """Allocate (and keep) until the heap has no free chunk outside its top: first the per-thread cache's chunks,
    then the bins', large requests before small. `heap()` is (free bytes, of which the top chunk); returns how
    many allocations were made."""
    taken = 0
    for size in TCACHE_REQUESTS:
        for _ in range(TCACHE_COUNT):
            if taken >= bound or not malloc(size):
                return taken
            taken += 1
    for size in BIN_REQUESTS:
        while taken < bound:
            free, top = heap()
            if free - top < size + 16 or not malloc(size):
                break
            taken += 1
            if heap()[1] < top:  # served from the top: no free chunk of this size is left
                break
    return taken


def settle_heap() -> int:
    """Take this process's free malloc chunks before forking brokers (see the module); 0 where it cannot."""
    libc = _glibc()
    if libc is None:
        return 0

    def heap() -> tuple[int, int]:
        info = libc.mallinfo2()
        return int(info.fordblks), int(info.keepcost)

    return take_free_chunks(libc.malloc, heap)
