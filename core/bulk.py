"""Bulk loads and CPython's cycle collector.

An import builds millions of small objects (parsed JSON lines, parsed records, rows for COPY)
that live until their batch is stored. With CPython's default thresholds the cycle collector
runs every 700 allocations and walks them again each time, and promotes them to the older
generations, whose collections walk the whole heap: a quarter of the PRM800K import's time
(100,000 lines on PostgreSQL, 77 s with the default, 60 s with `rare_collections`). The objects
hold no reference cycles, so collecting less often frees the same memory.
"""

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# Allocations between two collections of the youngest generation inside the block (CPython's
# default is 700); the older generations' factors are kept.
BULK_THRESHOLD = 100_000

_lock = threading.Lock()
_holders = 0
_saved: tuple[int, int, int] = (700, 10, 10)


@contextmanager
def rare_collections() -> Iterator[None]:
    """Run the cycle collector less often inside the block; cycles are still collected.

    The thresholds are the process's: blocks that nest or overlap in threads keep the bulk
    setting until the last one ends, and then the thresholds before the first are restored.
    """
    global _holders, _saved
    with _lock:
        if _holders == 0:
            _saved = gc.get_threshold()
            gc.set_threshold(max(BULK_THRESHOLD, _saved[0]), *_saved[1:])
        _holders += 1
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                gc.set_threshold(*_saved)
