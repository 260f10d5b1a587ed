"""The free chunks of `flux start --test-size`'s heap are taken before it forks (broker/testsize_heap.py), so the
brokers' allocations go to fresh pages of their own instead of holes in pages they share."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys

import pytest

from broker import testsize_heap
from broker.testsize_heap import TCACHE_COUNT, TCACHE_REQUESTS, settle_heap, take_free_chunks


class FakeHeap:
    """Free chunks of given sizes and a top chunk; malloc takes the smallest free chunk that fits, else the top."""

    def __init__(self, chunks: list[int], top: int) -> None:
        self.chunks = sorted(chunks)
        self.top = top

    def malloc(self, size: int) -> int | None:
        for i, chunk in enumerate(self.chunks):
            if chunk >= size + 16:
                del self.chunks[i]
                return 1
        if self.top < size + 16:
            return None
        self.top -= size + 16
        return 1

    def heap(self) -> tuple[int, int]:
        return sum(self.chunks) + self.top, self.top


def test_the_free_chunks_are_taken_and_the_top_is_left_for_the_brokers() -> None:
    heap = FakeHeap([40] * 20 + [300] * 700 + [5000] * 3, top=1_000_000)
    taken = take_free_chunks(heap.malloc, heap.heap)
    assert taken > len(TCACHE_REQUESTS) * TCACHE_COUNT
    assert heap.chunks == [] or max(heap.chunks) < 24 + 16  # what is left fits no request
    # the top gave only what no free chunk could: the per-thread cache's requests (none here), a few more
    cache = sum(size + 16 for size in TCACHE_REQUESTS) * TCACHE_COUNT
    assert heap.top >= 1_000_000 - cache - 5 * (4096 + 16)


def test_taking_stops_when_malloc_fails_or_at_the_bound() -> None:
    assert take_free_chunks(lambda size: None, lambda: (10**6, 0)) == 0
    assert take_free_chunks(lambda size: 1, lambda: (10**9, 0), bound=50) == 50


def test_a_one_thread_process_has_no_free_chunk_left_outside_its_top() -> None:
    """As `flux start` is when it forks: one thread, so one heap (mallinfo2 also counts other threads' heaps)."""
    script = (
        "import json, sys\n"
        "from broker import testsize_heap as h\n"
        "libc = h._glibc()\n"
        "taken = h.settle_heap()\n"
        "info = libc.mallinfo2() if libc else None\n"
        "print(json.dumps([taken, info.fordblks - info.keepcost if info else None]))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True)
    taken, left = json.loads(done.stdout)
    if left is None:  # another libc: nothing to take, and nothing failed
        assert taken == 0
        return
    assert taken > 0 and left < 4096 + 16  # what glibc could have handed a broker from a shared page was taken


def test_without_mallinfo2_nothing_is_taken(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(testsize_heap, "_glibc", lambda: None)
    assert settle_heap() == 0
    assert ctypes.sizeof(testsize_heap._MallInfo2) == 10 * ctypes.sizeof(ctypes.c_size_t)
