"""In-process parts of the stores: waiters woken by `notify`, the memory store's indexes of
tracked leases, and the running loop found without a system call."""

# Design: Channels keeps, per channel, the futures of the `wait` calls in this process; `notify`
# settles them all (Memory and SQLite only reach this process; Redis wakes them from its
# subscription). A LeaseIndex is {key: (until, expires)} plus a heap of (until, key): `due`
# pops the keys whose lease end passed, skipping heap items a later move made stale, so listing
# costs time in the number listed, not in the number tracked.
from __future__ import annotations

import asyncio
import heapq
import threading

__all__ = ["Channels", "LeaseIndex", "RunningLoop"]


class RunningLoop:
    """The event loop running the caller, remembered: on Python 3.11
    `asyncio.get_running_loop()` calls getpid() each time (a system call per store call).

    The loop seen last is reused while it is running and this is the thread that saw it run
    (one loop runs per thread at a time); anything else asks asyncio again, so a store used
    by several `asyncio.run` calls in turn, or from several threads, gets each one's loop.
    """

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: tuple[asyncio.AbstractEventLoop, int] | None = None

    def get(self) -> asyncio.AbstractEventLoop:
        """The running loop (RuntimeError outside one, as asyncio's)."""
        seen = self._seen
        if seen is not None and seen[1] == threading.get_ident() and seen[0].is_running():
            return seen[0]
        loop = asyncio.get_running_loop()
        self._seen = (loop, threading.get_ident())
        return loop


class Channels:
    """The `wait(channel)` calls of this process, woken by `wake(channel)`."""

    def __init__(self) -> None:
        self._waiting: dict[str, set[asyncio.Future[None]]] = {}

    def __contains__(self, channel: str) -> bool:
        return channel in self._waiting

    def wake(self, channel: str) -> None:
        for waiter in self._waiting.pop(channel, ()):
            if not waiter.done():
                waiter.set_result(None)

    async def wait(self, channel: str, timeout: float) -> bool:
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(channel, set()).add(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter
            return True
        except TimeoutError:
            return False
        finally:
            waiting = self._waiting.get(channel)
            if waiting is not None:
                waiting.discard(waiter)
                if not waiting:
                    del self._waiting[channel]


class LeaseIndex:
    """Keys scored by their lease's end (`until`), each tracked until its `expires`."""

    __slots__ = ("heap", "members")

    def __init__(self) -> None:
        self.members: dict[str, tuple[float, float]] = {}
        self.heap: list[tuple[float, str]] = []

    def put(self, key: str, until: float, expires: float) -> None:
        self.members[key] = (until, expires)
        heapq.heappush(self.heap, (until, key))
        if len(self.heap) > 2 * len(self.members) + 64:  # stale items of moved keys
            self.heap = [(u, k) for k, (u, _) in self.members.items()]
            heapq.heapify(self.heap)

    def drop(self, key: str) -> None:
        self.members.pop(key, None)

    def due(self, now: float, limit: int) -> list[tuple[str, float]]:
        """Up to `limit` (key, expires) whose `until` passed, earliest first; they stay."""
        found: list[tuple[float, str]] = []
        while self.heap and len(found) < limit and not now < self.heap[0][0]:
            until, key = heapq.heappop(self.heap)
            held = self.members.get(key)
            if held is not None and held[0] == until and (until, key) not in found:
                found.append((until, key))
        for item in found:
            heapq.heappush(self.heap, item)
        return [(key, self.members[key][1]) for _, key in found]
