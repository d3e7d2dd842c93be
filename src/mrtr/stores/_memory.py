"""MemoryStore: one process (tests, a single worker)."""

# Design: a dict plus a heap of (expires, key) so cleanup is bounded: each call drops at most
# _SWEEP expired entries. Single-threaded asyncio makes every method atomic without a lock.
from __future__ import annotations

import heapq
import time
from collections.abc import Callable

from mrtr.stores._store import NEW, RUNNING, Claim, ClaimStatus

__all__ = ["MemoryStore"]

_SWEEP = 64  # expired entries dropped per call at most


class _Entry:
    __slots__ = ("count", "expires", "lease_until", "outcome")

    def __init__(self, expires: float, lease_until: float = 0.0) -> None:
        self.expires = expires
        self.lease_until = lease_until
        self.outcome: bytes | None = None
        self.count = 0


class MemoryStore:
    """A Store in this process's memory; `clock` returns epoch seconds."""

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._entries: dict[str, _Entry] = {}
        self._heap: list[tuple[float, str]] = []

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None or not now < entry.expires:
            return None
        if entry.outcome is None and entry.count == 0 and not now < entry.lease_until:
            return None  # a lapsed claim counts as absent
        return entry

    def _put(self, key: str, entry: _Entry, now: float) -> None:
        self._entries[key] = entry
        heapq.heappush(self._heap, (entry.expires, key))
        for _ in range(_SWEEP):
            if not self._heap or now < self._heap[0][0]:
                break
            _, old = heapq.heappop(self._heap)
            stale = self._entries.get(old)
            if stale is not None and not now < stale.expires:
                del self._entries[old]

    async def claim(self, key: str, *, lease: float, expires: float) -> Claim:
        now = self._clock()
        entry = self._live(key, now)
        if entry is not None:
            return Claim(ClaimStatus.DONE, entry.outcome) if entry.outcome is not None else RUNNING
        self._put(key, _Entry(expires, now + lease), now)
        return NEW

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        now = self._clock()
        entry = _Entry(expires)
        entry.outcome = bytes(outcome)
        self._put(key, entry, now)

    async def renew(self, key: str, *, lease: float) -> bool:
        now = self._clock()
        entry = self._live(key, now)
        if entry is None or entry.outcome is not None or entry.count:
            return False
        entry.lease_until = now + lease
        return True

    async def release(self, key: str) -> None:
        entry = self._entries.get(key)
        if entry is not None and entry.outcome is None:
            del self._entries[key]

    async def get(self, key: str) -> Claim | None:
        entry = self._live(key, self._clock())
        if entry is None or entry.count:
            return None
        return Claim(ClaimStatus.DONE, entry.outcome) if entry.outcome is not None else RUNNING

    async def add(self, key: str, amount: int, *, expires: float) -> int:
        now = self._clock()
        entry = self._live(key, now)
        if entry is None:
            entry = _Entry(expires)
            self._put(key, entry, now)
        entry.count += amount
        return entry.count

    async def aclose(self) -> None:
        self._entries.clear()
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._entries)
