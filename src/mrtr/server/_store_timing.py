"""TimedStore: a Store that reports its latency and the rounds it replays to telemetry."""

# Design: the Ledger stays unaware of telemetry; the Dispatcher wraps its store in this only when
# OpenTelemetry is installed. A DONE claim on a `round:` key is a replayed round (the stored
# outcome is served, the handler does not run): the request's Probe records a store hit.
from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from mrtr.server._probe import note_store_hit
from mrtr.server._telemetry import ServerTelemetry
from mrtr.stores import Claim, ClaimStatus, Store

__all__ = ["TimedStore"]

T = TypeVar("T")


class TimedStore:
    """Wraps `store`; each call's duration goes to `mrtr.store.operation.duration`."""

    def __init__(self, store: Store, telemetry: ServerTelemetry) -> None:
        self.store = store
        self._telemetry = telemetry

    async def _timed(self, operation: str, call: Callable[[], Awaitable[T]]) -> T:
        instruments = self._telemetry.instruments()
        if instruments is None:
            return await call()
        started = time.perf_counter()
        try:
            return await call()
        finally:
            instruments.store.record(time.perf_counter() - started,
                                     {"mrtr.store.operation": operation})

    async def claim(self, key: str, *, lease: float, expires: float, holder: str = "",
                    index: str | None = None) -> Claim:
        claim = await self._timed("claim", lambda: self.store.claim(
            key, lease=lease, expires=expires, holder=holder, index=index))
        if claim.status is ClaimStatus.DONE and key.startswith("round:"):
            note_store_hit()
        return claim

    async def complete(self, key: str, outcome: bytes, *, expires: float) -> None:
        await self._timed("complete", lambda: self.store.complete(key, outcome, expires=expires))

    async def put_if_absent(self, key: str, outcome: bytes, *, expires: float) -> Claim:
        return await self._timed("put_if_absent", lambda: self.store.put_if_absent(
            key, outcome, expires=expires))

    async def renew(self, key: str, *, lease: float, index: str | None = None) -> bool:
        return await self._timed("renew", lambda: self.store.renew(key, lease=lease,
                                                                   index=index))

    async def release(self, key: str, *, holder: str | None = None,
                      index: str | None = None) -> None:
        await self._timed("release", lambda: self.store.release(key, holder=holder,
                                                                index=index))

    async def lapsed(self, index: str, *, limit: int) -> list[str]:
        return await self._timed("lapsed", lambda: self.store.lapsed(index, limit=limit))

    async def purge(self, *, most: int) -> int:
        return await self._timed("purge", lambda: self.store.purge(most=most))

    async def notify(self, channel: str) -> None:
        await self._timed("notify", lambda: self.store.notify(channel))

    async def wait(self, channel: str, *, timeout: float) -> bool:
        # Not timed: it waits for another process, not for the store.
        return await self.store.wait(channel, timeout=timeout)

    async def get(self, key: str) -> Claim | None:
        return await self._timed("get", lambda: self.store.get(key))

    async def add(self, key: str, amount: int, *, expires: float) -> int:
        return await self._timed("add", lambda: self.store.add(key, amount, expires=expires))

    async def add_once(self, key: str, amount: int, *, token: str, expires: float) -> int:
        return await self._timed("add_once", lambda: self.store.add_once(
            key, amount, token=token, expires=expires))

    async def admit(self, key: str, member: str, *, limit: int, expires: float,
                    weight: int = 1) -> bool:
        return await self._timed("admit", lambda: self.store.admit(
            key, member, limit=limit, expires=expires, weight=weight))

    async def dismiss(self, key: str, member: str) -> None:
        await self._timed("dismiss", lambda: self.store.dismiss(key, member))

    async def admitted(self, key: str) -> int:
        return await self._timed("admitted", lambda: self.store.admitted(key))

    async def deliver(self, key: str, message: bytes, *, expires: float) -> None:
        await self._timed("deliver", lambda: self.store.deliver(key, message, expires=expires))

    async def collect(self, key: str, *, timeout: float) -> bytes | None:
        # Not timed: most of it is waiting for a client's answer, not the store's latency.
        return await self.store.collect(key, timeout=timeout)

    async def aclose(self) -> None:
        await self.store.aclose()
