"""Idempotency keys on `tools/call`: one logical call, one effect, its outcome replayed."""

# Design (docs/deploy.md, "Idempotency keys", is the definition this implements). One record per
# (principal, key) in the Store, named by a hash of both, holding the digest of the call (tool
# name + canonical arguments), a tag and the outcome:
# - Round 1 (no requestState) claims the record. NEW: the call runs and its outcome is stored
#   (the final result, the input_required that suspends the flow, or the task it created). DONE:
#   the stored outcome is replayed when the digest matches, else IdempotencyKeyConflict.
#   RUNNING: IdempotencyKeyInProgress, retryable, at once (no wait holds a worker).
# - A round carrying requestState is single-use through the round ledger already. It runs; when
#   it continues the very round the record holds (its stored input_required carries this
#   requestState) the record moves on to this round's outcome. So the record names the newest
#   point of the flow, and at last its final result: a retry of round 1 continues where the
#   flow is, never starts a second one.
# - A keyed round 1 gets a flow id derived from the record and the call, so a retry after a
#   JSON-RPC error (not an outcome: the claim is released and the call may run again) shares the
#   first try's `ctx.once` records and `ctx.idempotency_key` values: those effects never repeat.
# - Once the call runs, the request going away (a client that disconnected or timed out) does
#   not stop it: it runs on in a task of its own and records its outcome, which the retry gets.
#   The claim is renewed every lease/3 while it runs; only a dead process lets it lapse. The
#   claim's life is the ledger's (_ledger.py): the call raising is not an outcome (released);
#   the task cancelled (the process stopping) keeps the claim until the lease; an outcome the
#   store refuses is IN DOUBT: the claim stays held, the write is retried in the background
#   and the caller (and any duplicate here) gets OutcomePending, never a success that a replay
#   could contradict. `drain` lets a stopping process finish that work first.
from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from hmac import compare_digest
from typing import Any

import msgspec

from mrtr.errors import (
    IdempotencyKeyConflict,
    IdempotencyKeyInProgress,
    InternalError,
    OutcomePending,
)
from mrtr.protocol import (
    UNSET,
    CallToolRequest,
    CallToolResult,
    CreateTaskResult,
    InputRequiredResult,
    resolve_contents,
)
from mrtr.server._peer import Notifier, Peer
from mrtr.server._probe import note_store_hit
from mrtr.server._sealing import digest_arguments
from mrtr.stores import ClaimStatus, Store, StoreUnavailable

__all__ = ["IdempotencyKeys", "IdempotencyPolicy", "call_digest", "record_name"]

Outcome = CallToolResult | InputRequiredResult | CreateTaskResult
# Runner.call_tool: runs one tools/call; `flow_id` names a round 1's flow ("" for a fresh one).
CallTool = Callable[..., Awaitable[Outcome]]

_DIGEST = 32
_FINAL, _INPUT, _TASK, _TOO_LARGE = b"r", b"i", b"t", b"x"
_ENCODER = msgspec.json.Encoder()
_STATE = msgspec.json.Decoder(InputRequiredResult)
_KEEP = (asyncio.CancelledError, KeyboardInterrupt, SystemExit)  # the call may have acted
_RETRY_FIRST, _RETRY_MAX = 0.05, 2.0  # seconds between writes of an in-doubt outcome


@dataclass(frozen=True, kw_only=True, slots=True)
class IdempotencyPolicy:
    """How a Dispatcher keeps `idempotencyKey` records (docs/deploy.md, "Idempotency keys").

    `ttl`: seconds a record lives after its latest outcome; a key sent again later runs the
    call again. `max_record`: bytes of one stored outcome at most; a larger result is still
    answered, but only a marker is kept, and a duplicate gets -32603 (never a second run).
    `retry_after`: seconds `idempotency_key_in_progress` tells a duplicate to wait. `clock`:
    epoch seconds. (How long a running call holds its key is the Dispatcher's `lease`.)
    """

    ttl: float = 3600.0
    max_record: int = 1024 * 1024
    retry_after: float = 1.0
    clock: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        for name in ("ttl", "max_record", "retry_after"):
            if not getattr(self, name) > 0:
                raise ValueError(f"IdempotencyPolicy.{name} must be positive")


def record_name(principal: str | None, key: str) -> str:
    """The store key of `key` sent by `principal` (None: anonymous, one shared scope)."""
    who = b"a" if principal is None else b"p:" + principal.encode()
    return "idem:" + hashlib.sha256(b"mrtr-idem\x00" + who + b"\x00" + key.encode()).hexdigest()


def call_digest(name: str, arguments: object) -> bytes:
    """What a key is bound to: the tool's name and the canonical JSON of its arguments."""
    return digest_arguments([name, arguments if arguments is not UNSET else {}])


class IdempotencyKeys:
    """Serves `tools/call` with an `idempotencyKey` through `store`; others go to `call`."""

    def __init__(
        self, store: Store, policy: IdempotencyPolicy, log: logging.Logger, call: CallTool,
        *, lease: float = 30.0,
    ) -> None:
        self.store = store
        self.policy = policy
        self.lease = lease
        self._log = log
        self._call = call
        self._running: set[asyncio.Task[Any]] = set()  # first calls and late writes, held
        self._doubt: set[str] = set()  # records whose outcome is still being written

    def call_tool(
        self, request: CallToolRequest, peer: Peer, sink: Notifier | None
    ) -> Awaitable[Outcome]:
        """The Dispatcher's `tools/call` route: a call without a key costs nothing more."""
        if request.params.idempotency_key is UNSET:
            return self._call(request, peer, sink)
        return self._keyed(request, peer, sink)

    async def _keyed(self, request: CallToolRequest, peer: Peer, sink: Notifier | None) -> Outcome:
        params = request.params
        assert isinstance(params.idempotency_key, str)
        name = record_name(peer.principal, params.idempotency_key)
        digest = call_digest(params.name, params.arguments)
        if params.request_state is not UNSET:
            return await self._continue(name, digest, request, peer, sink)
        policy = self.policy
        if name in self._doubt:  # it ran here; its outcome is on its way to the store
            raise OutcomePending()
        claim = await self.store.claim(name, lease=self.lease,
                                       expires=policy.clock() + policy.ttl)
        if claim.status is ClaimStatus.DONE:
            note_store_hit()  # the request line says "replayed": the call did not run again
            return self._replay(claim.outcome or b"", digest)
        if claim.status is ClaimStatus.RUNNING:
            raise IdempotencyKeyInProgress(retry_after=policy.retry_after)
        flow_id = hashlib.sha256(f"mrtr-idem-flow\x00{name}\x00".encode() + digest).hexdigest()
        first = self._hold(self._first(name, digest, lambda: self._call(
            request, peer, sink, flow_id=flow_id[:24])))
        return await asyncio.shield(first)  # a request that goes away leaves it running

    async def _first(
        self, name: str, digest: bytes, run: Callable[[], Awaitable[Outcome]]
    ) -> Outcome:
        """Run the call under the claim on `name`, then record its outcome."""
        renewal = _Renewal(self.store, name, self.lease, self._log)
        try:
            result = await run()
        except _KEEP:
            self._log.warning("%s interrupted: its claim stays until the lease lapses", name)
            raise
        except (StoreUnavailable, OutcomePending):
            self._hold(self._release(name))  # the store is failing: answer without waiting
            raise
        except BaseException:  # a JSON-RPC error is no outcome: the key is free again
            await self._release(name)
            raise
        finally:
            renewal.stop()
        await self._record(name, digest, result, first=True)
        return result

    async def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for first calls whose requests went away and for
        outcomes still being written; True when none is left."""
        if not self._running:
            return True
        _, left = await asyncio.wait(set(self._running), timeout=timeout)
        if left:
            self._log.error("stopping with %d idempotency keys still held by calls in progress:"
                            " they lapse after the lease, and a retry then runs the call again",
                            len(left))
        return not left

    async def _continue(
        self, name: str, digest: bytes, request: CallToolRequest, peer: Peer,
        sink: Notifier | None,
    ) -> Outcome:
        """A later round: the round ledger keeps it single-use; the record follows the flow."""
        found = await self.store.get(name)
        stored = found.outcome if found is not None and found.status is ClaimStatus.DONE else None
        if stored is not None and not compare_digest(stored[:_DIGEST], digest):
            raise IdempotencyKeyConflict()
        result = await self._call(request, peer, sink)
        if stored is not None and stored[_DIGEST:_DIGEST + 1] == _INPUT:
            held = _STATE.decode(stored[_DIGEST + 1:]).request_state
            if held == request.params.request_state:  # this round continues the record's
                await self._record(name, digest, result, first=False)
        return result

    async def _record(self, name: str, digest: bytes, result: Outcome, *, first: bool) -> None:
        """Write `result` as the record's outcome. The first call's outcome, refused by the
        store, is in doubt: its claim stays held while it is written again (OutcomePending);
        a later round's is only logged (the round ledger holds that round's outcome)."""
        tag = (_INPUT if isinstance(result, InputRequiredResult)
               else _TASK if isinstance(result, CreateTaskResult) else _FINAL)
        body = _ENCODER.encode(result)
        if len(body) > self.policy.max_record:
            self._log.warning("the outcome of %s is %d bytes, over max_record (%d): not kept",
                              name, len(body), self.policy.max_record)
            tag, body = _TOO_LARGE, b""
        outcome = digest + tag + body
        try:
            await self.store.complete(name, outcome, expires=self.policy.clock() + self.policy.ttl)
        except StoreUnavailable as exc:
            if not first:
                self._log.warning("store unavailable, %s not moved to its newest round: %s",
                                  name, exc.reason)
                return
            self._log.error("store unavailable, outcome of %s not recorded yet (%s): the claim"
                            " stays held while it is written again", name, exc.reason)
            self._doubt.add(name)
            self._hold(self._rewrite(name, outcome))
            raise OutcomePending() from exc

    async def _rewrite(self, name: str, outcome: bytes) -> None:
        """Write an in-doubt outcome until it lands (renewing the claim), or the ttl passes."""
        delay, renewed = _RETRY_FIRST, time.monotonic()
        give_up = time.monotonic() + self.policy.ttl
        try:
            while time.monotonic() < give_up:
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)
                try:
                    await self.store.complete(name, outcome,
                                              expires=self.policy.clock() + self.policy.ttl)
                except StoreUnavailable as exc:
                    self._log.debug("outcome of %s still not recorded: %s", name, exc.reason)
                else:
                    self._log.warning("outcome of %s recorded after all", name)
                    return
                if time.monotonic() - renewed > self.lease / 3:
                    renewed = time.monotonic()
                    try:  # the write fails but a renewal may not: keep the claim
                        await self.store.renew(name, lease=self.lease)
                    except StoreUnavailable:
                        pass
            self._log.error("outcome of %s not recorded within its ttl", name)
        finally:
            self._doubt.discard(name)

    async def _release(self, name: str) -> None:
        try:
            await asyncio.shield(self.store.release(name))
        except (StoreUnavailable, asyncio.CancelledError) as exc:
            self._log.warning("could not release %s (its lease will): %r", name, exc)

    def _replay(self, outcome: bytes, digest: bytes) -> Outcome:
        if not compare_digest(outcome[:_DIGEST], digest):
            raise IdempotencyKeyConflict()
        tag, body = outcome[_DIGEST:_DIGEST + 1], outcome[_DIGEST + 1:]
        if tag == _FINAL:
            return msgspec.json.decode(body, type=CallToolResult, dec_hook=resolve_contents)
        if tag == _INPUT:
            return msgspec.json.decode(body, type=InputRequiredResult)
        if tag == _TASK:
            return msgspec.json.decode(body, type=CreateTaskResult)
        raise InternalError("The call with this idempotency key completed, but its result was "
                            "too large to keep for a replay")

    def _hold(self, work: Awaitable[Any]) -> asyncio.Task[Any]:
        """Run `work` in a task this object holds until it ends (so it is never collected)."""
        task = asyncio.ensure_future(work)
        self._running.add(task)
        task.add_done_callback(self._settled)
        return task

    def _settled(self, task: asyncio.Task[Any]) -> None:
        self._running.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: the awaiting request (if still there) got it


class _Renewal:
    """Renews the claim on `key` every lease/3 while its call runs: a timer until lease/3."""

    __slots__ = ("key", "lease", "log", "store", "task", "timer")

    def __init__(self, store: Store, key: str, lease: float, log: logging.Logger) -> None:
        self.store, self.key, self.lease, self.log = store, key, lease, log
        self.task: asyncio.Task[None] | None = None
        self.timer = asyncio.get_running_loop().call_later(lease / 3, self.start)

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self.renew())

    async def renew(self) -> None:
        while True:
            try:
                if not await self.store.renew(self.key, lease=self.lease):
                    return
            except StoreUnavailable as exc:
                self.log.warning("could not renew the claim on %s: %s", self.key, exc.reason)
            await asyncio.sleep(self.lease / 3)

    def stop(self) -> None:
        self.timer.cancel()
        if self.task is not None:
            self.task.cancel()
