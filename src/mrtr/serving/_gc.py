"""The garbage collector of a serving process: the start-up heap frozen once the app is loaded.

A request frees what it allocates by reference counting, yet CPython's collector runs hundreds
of times a second under load, because it counts allocations, not garbage: after each collection
the count starts at zero while the requests in flight still hold their objects, so their
replacements push it past generation 0's threshold (700) again within a few requests. Every
hundredth run is a full collection, and it walked the whole heap, about 30,000 objects of
modules, classes and the app (≈ 12 ms on a 2-core machine, twice a median MRTR round at 32
clients): that was the p99. Frozen, those objects are never walked again (≈ 2 ms).
Measured under `make bench` (docs/performance.md, round 9).
"""

# Design: `gc.freeze()` moves every object alive after start-up to a permanent generation that
# no collection walks; a cycle among them is never freed, and start-up objects live as long as
# the process anyway. The thresholds stay Python's unless the operator sets generation 0's
# (`--gc-threshold`): a larger one makes young collections rarer (+3-10 % throughput measured),
# but a reference cycle holding a request's body (an exception whose traceback keeps the frame
# that read it) then waits proportionally longer to be freed, so the memory a client can make
# the process hold between two collections grows with it. Process-wide settings, so they are
# made by `mrtr serve` (which owns its processes: each worker tunes itself once its app is
# loaded), never by McpApp or a Dispatcher, which may be embedded in someone's process.
from __future__ import annotations

import gc
from dataclasses import dataclass

__all__ = ["GcTuning", "check_threshold", "tune_gc"]


def check_threshold(threshold: int | None) -> None:
    """Raises ValueError unless `threshold` is None (Python's own) or a whole number ≥ 1."""
    if threshold is None:
        return
    if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
        raise ValueError(f"gc-threshold must be a whole number of at least 1, got {threshold!r}")


@dataclass(frozen=True)
class GcTuning:
    """What `mrtr serve` does to each serving process's collector once its app is loaded: freeze
    the heap, and set generation 0's threshold when `threshold` is not None."""

    threshold: int | None = None

    def __post_init__(self) -> None:
        check_threshold(self.threshold)


def tune_gc(tuning: GcTuning) -> None:
    """Freeze what this process allocated so far (after freeing start-up's garbage) and apply
    `tuning.threshold` to generation 0; generations 1 and 2 keep theirs."""
    gc.collect()
    gc.freeze()
    if tuning.threshold is not None:
        _, middle, oldest = gc.get_threshold()
        gc.set_threshold(tuning.threshold, middle, oldest)
