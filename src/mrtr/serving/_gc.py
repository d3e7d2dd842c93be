"""The garbage collector of a serving process: the start-up heap frozen, young collections rarer.

A request frees what it allocates by reference counting; the cyclic collector finds almost
nothing in a server's steady state (tens of objects in thousands of requests). It still runs,
because CPython counts allocations, not garbage: with 32 requests in flight their live objects
push the count past generation 0's threshold (700) hundreds of times a second, and every tenth
of those collections runs generation 1, every tenth of those a full collection, which walks the
whole heap, about 30,000 objects of modules, classes and the app (≈ 12 ms on this machine,
twice the median round at c=32). Measured under `make bench`'s mrtr2 at c=32 (docs/
performance.md, round 9): p99 halved with the start-up heap frozen, throughput +7-15 % with
generation 0 collected every 10,000 allocations.
"""

# Design: `gc.freeze()` moves every object alive at start-up to a permanent generation that no
# collection walks (a cycle among them is never freed: start-up objects live as long as the
# process anyway). Only generation 0's threshold changes: a young collection then walks up to
# 10,000 objects (well under a millisecond) instead of 700 each time. Process-wide settings,
# so they are made by `mrtr serve` (which owns its processes: each worker tunes itself once its
# app is loaded), never by McpApp or a Dispatcher, which may be embedded in someone's process.
from __future__ import annotations

import gc

__all__ = ["GC_THRESHOLD", "check_threshold", "tune_gc"]

GC_THRESHOLD = 10_000  # allocations between two young collections under `mrtr serve`


def check_threshold(threshold: int) -> None:
    """Raises ValueError unless `threshold` is a whole number, 0 or more."""
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
        raise ValueError(f"gc-threshold must be a whole number, 0 (Python's own collector) or "
                         f"more, got {threshold!r}")


def tune_gc(threshold: int) -> None:
    """Freeze what this process allocated so far and collect generation 0 every `threshold`
    allocations; 0 leaves the collector as the interpreter set it. Raises ValueError below 0."""
    check_threshold(threshold)
    if threshold == 0:
        return
    gc.collect()  # what start-up left as garbage is freed, not frozen
    gc.freeze()
    _, middle, oldest = gc.get_threshold()
    gc.set_threshold(threshold, middle, oldest)
