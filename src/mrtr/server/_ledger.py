"""Ledger: exactly-once rounds and `ctx.once` through a shared Store."""

# Design: a round is named by the random `round_id` sealed in its state, so the store key can
# not be forged or varied (token text is malleable in its last base64 character). Redeeming a
# round claims `round:<id>`; the first redemption runs and stores its outcome with a digest of
# the canonical inputResponses; a later one with the same answers gets the stored outcome, with
# other answers the frozen InvalidRequestState. A concurrent duplicate waits (bounded) for the
# first one's outcome. A failure that is not an outcome (a ProtocolError, a crash) releases the
# claim; a running claim is renewed every lease/3 (from lease/3 on: a timer, not a task, for
# the many rounds that finish sooner), so only a process that dies holding one
# lets it lapse (after the lease) for a retry to run. `once` is the same
# claim per flow and key: exactly once, except a crash inside fn, which runs fn again; an
# effect keyed by ctx.idempotency_key (Store.add_once, a provider's key) stays exactly once.
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from hmac import compare_digest
from typing import Any, TypeVar

import msgspec

from mrtr.errors import InternalError, InvalidRequestState
from mrtr.protocol import CreateTaskResult, InputRequiredResult, resolve_contents
from mrtr.server._sealing import digest_arguments
from mrtr.stores import Claim, ClaimStatus, Store, StoreUnavailable

__all__ = ["Ledger"]

R = TypeVar("R")
_DIGEST = 32
_INPUT = b"i"  # the stored outcome is an InputRequiredResult
_FINAL = b"r"  # it is the method's own result type
_TASK = b"t"  # it is a CreateTaskResult (a tools/call whose last round started a task)
_ENCODER = msgspec.json.Encoder()


class Ledger:
    """Records each round's outcome and each `once` result in `store`.

    `lease` bounds how long a claim outlives a process that died holding it (seconds);
    `wait` bounds how long a duplicate waits for the first redemption's outcome.
    """

    def __init__(
        self, store: Store, log: logging.Logger, *, lease: float = 30.0, wait: float = 60.0
    ) -> None:
        self.store = store
        self._log = log
        self._lease = lease
        self._wait = wait

    async def redeem(
        self,
        round_id: str,
        responses: Mapping[str, object],
        deadline: float,
        kind: type[R],
        run: Callable[[], Awaitable[R | InputRequiredResult]],
    ) -> R | InputRequiredResult:
        """Run this round once; replays get the stored outcome. Raises InvalidRequestState."""
        # The flow deadline first (fixed width, so keys sort by flow start): rounds of live
        # flows cluster at the end of an ordered index, and a SQLite commit writes a few pages,
        # not one per round. The deadline is sealed with the state, so replays name the same key.
        key = f"round:{int(deadline * 1000):012x}:{round_id}"
        digest = digest_arguments(msgspec.to_builtins(responses))
        claim = await self._claim(key, deadline)
        if claim.status is ClaimStatus.DONE:
            return self._replay(claim.outcome or b"", digest, kind)
        result: R | InputRequiredResult = await self._guarded(key, run)
        tag = (_INPUT if isinstance(result, InputRequiredResult)
               else _TASK if isinstance(result, CreateTaskResult) else _FINAL)
        await self._complete(key, digest + tag + _ENCODER.encode(result), deadline)
        return result

    async def once(
        self, flow_id: str, key: str, deadline: float, fn: Callable[[], object]
    ) -> tuple[bool, object]:
        """(stored, value): fn's value when it ran here, else the JSON another run stored."""
        name = f"once:{flow_id}:{key}"
        claim = await self._claim(name, deadline)
        if claim.status is ClaimStatus.DONE:
            return True, msgspec.json.decode(claim.outcome or b"null")

        async def call() -> object:
            value = fn()
            return await value if inspect.isawaitable(value) else value

        value = await self._guarded(name, call)
        await self._complete(name, _ENCODER.encode(msgspec.to_builtins(value)), deadline)
        return False, value

    # -- steps -------------------------------------------------------------------------------------
    async def _claim(self, key: str, deadline: float) -> Claim:
        """Claim `key`, waiting (bounded) while another process holds it."""
        give_up = time.monotonic() + self._wait
        delay = 0.002
        while True:
            try:
                claim = await self.store.claim(key, lease=self._lease, expires=deadline)
            except StoreUnavailable as exc:
                self._log.error("store unavailable, refusing to run %s: %s", key, exc.reason)
                raise
            if claim.status is not ClaimStatus.RUNNING:
                return claim
            if time.monotonic() > give_up:
                self._log.error("%s still running after %.0fs: refusing a duplicate", key,
                                self._wait)
                raise InternalError()
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)

    async def _guarded(self, key: str, run: Callable[[], Awaitable[Any]]) -> Any:
        # Most rounds finish well inside lease/3: a timer, not a task, until one does not.
        keeper = _Keeper(self, key)
        timer = asyncio.get_running_loop().call_later(self._lease / 3, keeper.start)
        try:
            return await run()
        except BaseException:
            try:
                await asyncio.shield(self.store.release(key))
            except (StoreUnavailable, asyncio.CancelledError) as exc:
                self._log.warning("could not release %s (its lease will): %r", key, exc)
            raise
        finally:
            timer.cancel()
            keeper.stop()

    async def _keep(self, key: str) -> None:
        """Renew the claim on `key` every lease/3 while its work runs: only a dead process lets
        it lapse. Started lease/3 after the claim."""
        while True:
            try:
                if not await self.store.renew(key, lease=self._lease):
                    return
            except StoreUnavailable as exc:
                self._log.warning("could not renew the claim on %s: %s", key, exc.reason)
            await asyncio.sleep(self._lease / 3)

    async def _complete(self, key: str, outcome: bytes, deadline: float) -> None:
        try:
            await self.store.complete(key, outcome, expires=deadline)
        except StoreUnavailable as exc:
            # It ran: the client gets its result. A replay after the lease lapses may run again.
            self._log.error("store unavailable, outcome of %s not recorded: %s", key, exc.reason)

    def _replay(self, outcome: bytes, digest: bytes, kind: type[R]) -> R | InputRequiredResult:
        if not compare_digest(outcome[:_DIGEST], digest):
            self._log.warning("a redeemed round was presented again with other answers")
            raise InvalidRequestState("round already redeemed with other answers")
        tag, body = outcome[_DIGEST:_DIGEST + 1], outcome[_DIGEST + 1:]
        if tag == _INPUT:
            return msgspec.json.decode(body, type=InputRequiredResult)
        if tag == _TASK:
            return msgspec.json.decode(body, type=CreateTaskResult)  # type: ignore[return-value]
        return msgspec.json.decode(body, type=kind, dec_hook=resolve_contents)


class _Keeper:
    """Starts (from a timer) and stops the task renewing one claim."""

    __slots__ = ("key", "ledger", "task")

    def __init__(self, ledger: Ledger, key: str) -> None:
        self.ledger = ledger
        self.key = key
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.ledger._keep(self.key))

    def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
