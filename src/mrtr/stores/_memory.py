"""MemoryStore: one process (tests, a single worker)."""

# Design: a dict plus a heap of (expires, key) so cleanup is bounded: each call drops at most
# _SWEEP expired entries. Single-threaded asyncio makes every method atomic without a lock.
# Entries live until their flow deadline (up to an hour), so `max_entries` bounds the memory:
# when full (after the sweep), a new entry is refused with StoreUnavailable, and the server
# fails closed (the frozen -32603, reason logged) rather than grow or forget a redeemed round.
# A key's slots are one entry (under "\x00s:" + key) holding {member: expires}, itself expiring
# with its last member; admit prunes lapsed members first (at most `limit` of them).
from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable

from mrtr.stores._store import NEW, RUNNING, Claim, ClaimStatus, StoreUnavailable

__all__ = ["MemoryStore"]

_SWEEP = 64  # expired entries dropped per call at most


class _Entry:
    __slots__ = ("count", "expires", "lease_until", "members", "outcome")

    def __init__(self, expires: float, lease_until: float = 0.0) -> None:
        self.expires = expires
        self.lease_until = lease_until
        self.outcome: bytes | None = None
        self.count = 0
        self.members: dict[str, float] | None = None  # slots: member -> its deadline


class MemoryStore:
    """A Store in this process's memory; `clock` returns epoch seconds.

    At most `max_entries` live entries: past that, calls that would add one raise
    StoreUnavailable until expired entries make room.
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.time, max_entries: int = 100_000
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        self._clock = clock
        self.max_entries = max_entries
        self._entries: dict[str, _Entry] = {}
        self._heap: list[tuple[float, str]] = []
        self._waiting: dict[str, asyncio.Future[bytes]] = {}  # collect() calls, by key

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None or not now < entry.expires:
            return None
        if entry.outcome is None and entry.count == 0 and not now < entry.lease_until:
            return None  # a lapsed claim counts as absent
        return entry

    def _put(self, key: str, entry: _Entry, now: float) -> None:
        for _ in range(_SWEEP):
            if not self._heap or now < self._heap[0][0]:
                break
            _, old = heapq.heappop(self._heap)
            stale = self._entries.get(old)
            if stale is not None and not now < stale.expires:
                del self._entries[old]
        if len(self._entries) >= self.max_entries and key not in self._entries:
            raise StoreUnavailable(f"memory store full ({self.max_entries} entries)")
        self._entries[key] = entry
        heapq.heappush(self._heap, (entry.expires, key))
        if len(self._heap) > 2 * self.max_entries:  # stale items of replaced/released entries
            self._heap = [(e.expires, k) for k, e in self._entries.items()]
            heapq.heapify(self._heap)

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

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        now = self._clock()
        entry = self._live(key, now)
        if entry is not None:
            return Claim(ClaimStatus.DONE, entry.outcome) if entry.outcome is not None else RUNNING
        stored = _Entry(expires)
        stored.outcome = bytes(outcome)
        self._put(key, stored, now)
        return NEW

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

    async def add_once(self, key: str, amount: int, *, token: str, expires: float) -> int:
        now = self._clock()
        counter = self._live(key, now)
        if counter is None:  # first, so that a full store refuses before anything applies
            counter = _Entry(expires)
            self._put(key, counter, now)
        mark = f"{key}\x00{token}"
        if self._live(mark, now) is None:
            applied = _Entry(expires)
            applied.outcome = b""
            self._put(mark, applied, now)
            counter.count += amount
        return counter.count

    def _slots(self, key: str, now: float) -> dict[str, float]:
        entry = self._live("\x00s:" + key, now)
        if entry is None or entry.members is None:
            return {}
        members = entry.members
        for member in [m for m, until in members.items() if not now < until]:
            del members[member]
        return members

    async def admit(self, key: str, member: str, *, limit: int, expires: float) -> bool:
        now = self._clock()
        members = self._slots(key, now)
        if member in members:
            return True
        if len(members) >= limit or not now < expires:
            return False
        name = "\x00s:" + key
        entry = self._entries.get(name)
        if entry is None or entry.members is not members or entry.expires < expires:
            grown = _Entry(max(expires, *members.values()) if members else expires)
            grown.lease_until = grown.expires  # never a lapsed claim: live until its last member
            grown.members = members
            self._put(name, grown, now)
        members[member] = expires
        return True

    async def dismiss(self, key: str, member: str) -> None:
        entry = self._entries.get("\x00s:" + key)
        if entry is not None and entry.members is not None:
            entry.members.pop(member, None)

    async def admitted(self, key: str) -> int:
        return len(self._slots(key, self._clock()))

    async def deliver(self, key: str, message: bytes, *, expires: float) -> None:
        waiter = self._waiting.pop(key, None)
        if waiter is not None and not waiter.done():
            waiter.set_result(bytes(message))
            return
        await self.complete("\x00m:" + key, message, expires=expires)

    async def collect(self, key: str, *, timeout: float) -> bytes | None:
        box = "\x00m:" + key
        entry = self._live(box, self._clock())
        if entry is not None and entry.outcome is not None:
            del self._entries[box]
            return entry.outcome
        waiter: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._waiting[key] = waiter
        try:
            async with asyncio.timeout(timeout):
                return await waiter
        except TimeoutError:
            return None
        finally:
            if self._waiting.get(key) is waiter:
                del self._waiting[key]

    async def aclose(self) -> None:
        self._entries.clear()
        self._heap.clear()

    def __len__(self) -> int:
        return len(self._entries)
