"""MemoryStore: one process (tests, a single worker)."""

# Design: a dict plus a heap of (expires, key) so cleanup is bounded: each call drops at most
# _SWEEP expired entries. Single-threaded asyncio makes every method atomic without a lock.
# Entries live until their flow deadline (up to an hour), so the memory is bounded twice: at
# most `max_entries` entries and `max_bytes` bytes of keys, values and slot members. When
# either is reached (after dropping every expired entry), a write that would add is refused
# with StoreUnavailable, and the server fails closed (the frozen -32603, HTTP 503, reason
# logged) rather than grow or forget a redeemed round: nothing is ever evicted. A claim or a
# slot starts new work, so it is refused earlier, once the entries take max_bytes minus
# 1/_HEADROOM: the outcomes of the work already running still find room. Values are kept as
# exact-size copies, so the bytes counted are the bytes held. A key's slots are one entry
# (under "\x00s:" + key) holding {member: (expires, weight)} and their running total, itself
# expiring with its last member; lapsed members are dropped in deadline order (a heap).
# Indexes of tracked leases and notification waiters live beside the entries (_local.py);
# index members are not counted in max_bytes (one per running task, dropped when it ends).
from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Callable

from mrtr.stores._local import Channels, LeaseIndex
from mrtr.stores._store import NEW, RUNNING, Claim, ClaimStatus, StoreUnavailable

__all__ = ["MemoryStore"]

_SWEEP = 64  # expired entries dropped per call at most
_MEMBER = 16  # bytes a slot member counts beyond its name: its deadline and weight
_HEADROOM = 8  # claims leave max_bytes / _HEADROOM for the outcomes of running work
MAX_BYTES = 256 * 1024 * 1024  # the defaults: memory: in a URL, MemoryStore()
MAX_ENTRIES = 100_000


def _kept(value: bytes) -> bytes:
    """A copy of `value` of its exact size: an encoder's output may hold half as much again
    unused (msgspec grows its buffer), which max_bytes would not see."""
    return bytes(memoryview(value))


class _Entry:
    __slots__ = ("count", "expires", "holder", "lease_until", "members", "outcome", "size")

    def __init__(self, expires: float, lease_until: float = 0.0, holder: str = "") -> None:
        self.expires = expires
        self.holder = holder
        self.lease_until = lease_until
        self.outcome: bytes | None = None
        self.count = 0
        self.members: _Slots | None = None  # a key's slots
        self.size = 0  # bytes counted against max_bytes


class _Slots:
    """The members of one key's slots: {member: (deadline, weight)}, a heap of deadlines to
    drop lapsed members in order, their total weight and the bytes they count."""

    __slots__ = ("heap", "members", "size", "total")

    def __init__(self) -> None:
        self.members: dict[str, tuple[float, int]] = {}
        self.heap: list[tuple[float, str]] = []
        self.total = 0
        self.size = 0

    def add(self, member: str, until: float, weight: int) -> None:
        self.members[member] = (until, weight)
        self.total += weight
        self.size += len(member) + _MEMBER
        heapq.heappush(self.heap, (until, member))

    def reweigh(self, member: str, weight: int) -> None:
        until, old = self.members[member]
        self.members[member] = (until, weight)
        self.total += weight - old

    def remove(self, member: str) -> int:
        """Drop `member` (nothing when absent); the bytes freed."""
        held = self.members.pop(member, None)
        if held is None:
            return 0
        self.total -= held[1]
        self.size -= len(member) + _MEMBER
        if len(self.heap) > 2 * len(self.members) + 64:  # items of members dismissed early
            self.heap = [(until, m) for m, (until, _) in self.members.items()]
            heapq.heapify(self.heap)
        return len(member) + _MEMBER

    def prune(self, now: float) -> int:
        """Drop the members whose deadline passed; the bytes freed."""
        freed = 0
        while self.heap and not now < self.heap[0][0]:
            until, member = heapq.heappop(self.heap)
            held = self.members.get(member)
            if held is not None and held[0] == until:  # else dismissed, or admitted again
                freed += self.remove(member)
        return freed


class MemoryStore:
    """A Store in this process's memory; `clock` returns epoch seconds.

    At most `max_entries` live entries and `max_bytes` bytes of keys, values and slot members:
    past either, calls that would add raise StoreUnavailable until expired entries make room
    (claims already at seven eighths of `max_bytes`).
    """

    def __init__(
        self, *, clock: Callable[[], float] = time.time, max_entries: int = MAX_ENTRIES,
        max_bytes: int = MAX_BYTES,
    ) -> None:
        if max_entries < 1:
            raise ValueError(f"max_entries must be at least 1, not {max_entries}")
        if max_bytes < 1:
            raise ValueError(f"max_bytes must be at least 1, not {max_bytes}")
        self._clock = clock
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._bytes = 0
        self._entries: dict[str, _Entry] = {}
        self._heap: list[tuple[float, str]] = []
        self._waiting: dict[str, asyncio.Future[bytes]] = {}  # collect() calls, by key
        self._indexes: dict[str, LeaseIndex] = {}
        self._channels = Channels()

    @property
    def held_bytes(self) -> int:
        """The bytes of keys, values and slot members held now (expired ones until dropped)."""
        return self._bytes

    def _live(self, key: str, now: float) -> _Entry | None:
        entry = self._entries.get(key)
        if entry is None or not now < entry.expires:
            return None
        if entry.outcome is None and entry.count == 0 and not now < entry.lease_until:
            return None  # a lapsed claim counts as absent
        return entry

    def _sweep(self, now: float, most: int | None) -> None:
        """Drop expired entries, `most` at a time (None: all of them)."""
        dropped = 0
        while self._heap and not now < self._heap[0][0] and (most is None or dropped < most):
            _, old = heapq.heappop(self._heap)
            stale = self._entries.get(old)
            if stale is not None and not now < stale.expires:
                self._drop(old)
            dropped += 1

    def _drop(self, key: str) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._bytes -= entry.size

    def _put(self, key: str, entry: _Entry, now: float, *, new_work: bool = False) -> None:
        self._sweep(now, _SWEEP)
        entry.size = len(key) + (len(entry.outcome) if entry.outcome is not None else 0)
        if entry.members is not None:
            entry.size += entry.members.size
        self._make_room(key, entry.size, now, new_work=new_work)
        old = self._entries.get(key)
        self._bytes += entry.size - (old.size if old is not None else 0)
        self._entries[key] = entry
        heapq.heappush(self._heap, (entry.expires, key))
        if len(self._heap) > 2 * self.max_entries:  # stale items of replaced/released entries
            self._heap = [(e.expires, k) for k, e in self._entries.items()]
            heapq.heapify(self._heap)

    def _make_room(self, key: str, size: int, now: float, *, new_work: bool) -> None:
        """Raise StoreUnavailable unless `size` more bytes under `key` fit (nothing evicted)."""
        old = self._entries.get(key)
        grow = size - (old.size if old is not None else 0)
        budget = self.max_bytes - (self.max_bytes // _HEADROOM if new_work else 0)
        if (old is None and len(self._entries) >= self.max_entries) or (
                grow > 0 and self._bytes + grow > budget):
            self._sweep(now, None)  # only on this path: every expired entry goes first
            old = self._entries.get(key)
            grow = size - (old.size if old is not None else 0)
        if old is None and len(self._entries) >= self.max_entries:
            raise StoreUnavailable(f"memory store full ({self.max_entries} entries)")
        if grow > 0 and self._bytes + grow > budget:
            raise StoreUnavailable(
                f"memory store full ({self._bytes} bytes held, {grow} more would pass "
                f"{'7/8 of ' if new_work else ''}max_bytes={self.max_bytes})")

    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "",
                    index: str | None = None) -> Claim:
        now = self._clock()
        entry = self._live(key, now)
        if entry is not None:
            if entry.outcome is not None:
                return Claim(ClaimStatus.DONE, entry.outcome)
            if not (holder and entry.holder == holder and entry.count == 0):
                return RUNNING
        self._put(key, _Entry(expires, now + lease, holder), now, new_work=True)
        if index is not None:
            self._indexes.setdefault(index, LeaseIndex()).put(key, now + lease, expires)
        return NEW

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        now = self._clock()
        entry = _Entry(expires)
        entry.outcome = _kept(outcome)
        self._put(key, entry, now)

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        now = self._clock()
        entry = self._live(key, now)
        if entry is not None:
            return Claim(ClaimStatus.DONE, entry.outcome) if entry.outcome is not None else RUNNING
        stored = _Entry(expires)
        stored.outcome = _kept(outcome)
        self._put(key, stored, now)
        return NEW

    async def renew(self, key: str, *, lease: float, index: str | None = None) -> bool:
        now = self._clock()
        entry = self._live(key, now)
        if entry is None or entry.outcome is not None or entry.count:
            return False
        entry.lease_until = now + lease
        if index is not None:
            self._indexes.setdefault(index, LeaseIndex()).put(key, now + lease, entry.expires)
        return True

    async def release(self, key: str, *, holder: str | None = None,
                      index: str | None = None) -> None:
        entry = self._entries.get(key)
        if entry is not None and entry.outcome is None and (holder is None
                                                            or entry.holder == holder):
            self._drop(key)
        tracked = self._indexes.get(index) if index is not None else None
        if tracked is not None:
            tracked.drop(key)

    async def lapsed(self, index: str, *, limit: int) -> list[str]:
        tracked, now = self._indexes.get(index), self._clock()
        if tracked is None:
            return []
        found: list[str] = []
        for key, expires in tracked.due(now, limit):
            entry = self._entries.get(key)
            if not now < expires or entry is None or not now < entry.expires or (
                    entry.outcome is not None or entry.count):
                tracked.drop(key)  # expired, or done: nothing to take over
            elif now < entry.lease_until:  # renewed without the index: look again then
                tracked.put(key, entry.lease_until, expires)
            else:
                found.append(key)
        return found

    async def purge(self, *, most: int) -> int:
        before = len(self._entries)
        self._sweep(self._clock(), most)
        return before - len(self._entries)

    async def notify(self, channel: str) -> None:
        self._channels.wake(channel)

    async def wait(self, channel: str, *, timeout: float) -> bool:
        return await self._channels.wait(channel, timeout)

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

    def _slots(self, name: str, now: float) -> tuple[_Entry, _Slots] | None:
        """The live slots entry `name` with its lapsed members dropped; None when absent."""
        entry = self._live(name, now)
        if entry is None or entry.members is None:
            return None
        freed = entry.members.prune(now)
        entry.size -= freed
        self._bytes -= freed
        return entry, entry.members

    async def admit(self, key: str, member: str, *, limit: int, expires: float,
                    weight: int = 1) -> bool:
        now, name = self._clock(), "\x00s:" + key
        found = self._slots(name, now)
        if found is not None:
            entry, slots = found
            held = slots.members.get(member)
            if held is not None:  # it holds a slot: only a heavier weight must fit
                if weight > held[1] and slots.total - held[1] + weight > limit:
                    return False
                slots.reweigh(member, weight)
                return True
        if (found[1].total if found is not None else 0) + weight > limit or not now < expires:
            return False
        if found is None:
            entry = _Entry(expires, lease_until=expires)  # never a lapsed claim
            entry.members = _Slots()
            entry.members.add(member, expires, weight)
            self._put(name, entry, now, new_work=True)
            return True
        entry, slots = found
        grow = len(member) + _MEMBER
        self._make_room(name, entry.size + grow, now, new_work=True)
        slots.add(member, expires, weight)
        entry.size += grow
        self._bytes += grow
        if entry.expires < expires:  # the entry lives as long as its last member
            entry.expires = entry.lease_until = expires
            heapq.heappush(self._heap, (expires, name))
        return True

    async def dismiss(self, key: str, member: str) -> None:
        entry = self._entries.get("\x00s:" + key)
        if entry is not None and entry.members is not None:
            freed = entry.members.remove(member)
            entry.size -= freed
            self._bytes -= freed

    async def admitted(self, key: str) -> int:
        found = self._slots("\x00s:" + key, self._clock())
        return found[1].total if found is not None else 0

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
            self._drop(box)
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
        self._indexes.clear()
        self._bytes = 0

    def __len__(self) -> int:
        return len(self._entries)
