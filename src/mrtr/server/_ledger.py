"""Ledger: exactly-once rounds and `ctx.once` through a shared Store."""

# Design: a round is named by the random `round_id` sealed in its state, so the store key can
# not be forged or varied (token text is malleable in its last base64 character). The first
# redemption of `round:<id>` stores its outcome with a digest of the canonical inputResponses;
# a later one with the same answers gets the stored outcome, with other answers the frozen
# InvalidRequestState. `once` is a claim per flow and key, `once:<flow>:<key>`, whose outcome
# is fn's JSON value. A duplicate waits (bounded) for the first run's outcome: on its task when
# it runs in this process (up to `wait`), else polling the store (up to `poll`, a few seconds):
# a holder elsewhere may be dead and its claim wait for the lease, so the duplicate gets the
# retryable OutcomePending rather than block a client.
#
# One write per round unless it acts (docs/performance.md, "One write per round"). A round's
# handler is deterministic from the sealed journal and its answers except for what it does in
# `ctx.once` or by starting a task, so a round runs first *unclaimed*: one that ends without
# acting stores its outcome with put_if_absent, and when another redemption got there first it
# answers that one's outcome instead of its own (same answers: the same bytes; other answers:
# InvalidRequestState), so single use and frozen answers hold as before. The first effect of a
# round (hold(): `ctx.once`, a task started) claims the round before it acts; the claim finding
# the round recorded or running elsewhere stops this run (Redeemed, a BaseException) and
# answers the recorded outcome, so no effect of a second redemption ever starts. A held round
# ends as every claim does (below). An unclaimed round whose write fails answers
# StoreUnavailable (503, retry): nothing it did needs protecting.
#
# The life of a claim (docs/deploy.md, "What exactly once means"):
#
#   absent --claim--> CLAIMED --work starts--> RUNNING --outcome written--> RECORDED (DONE)
#     ^       \--answer lost--> ABANDONED         |  \--write fails--> IN DOUBT --written--/
#     |                          |                |--the work raised: not an outcome--> absent
#     \--dropped by its holder---/                \--the holder died: the lease lapses--> absent
#
# - ABANDONED: the store did not answer the claim (timed out, failed, the request cancelled),
#   yet the write may have landed, held by nobody. The work never started under it: the
#   process drops it once the store answers again (release by this attempt's holder, retried
#   in the background up to the lease), so a retry can claim it at once rather than wait for
#   the lease. The holder name (unique per attempt) makes sure no other claim is dropped.
# - CLAIMED, RUNNING, IN DOUBT and ABANDONED all read RUNNING in the store. The holder renews
#   the lease every lease/3 (from lease/3 on: a timer, not a task, for the many claims that
#   end sooner), so only a process that died, or lost the store for longer than the lease,
#   lets it lapse.
# - Cancellation never releases a claim whose work may still act. `once` runs fn in its own
#   task, shielded from the request: a client that disconnects (or the request timeout)
#   cancels the handler awaiting it, never fn, which finishes in the background and has its
#   outcome recorded; the client's retry waits for it and gets fn's value. Only fn raising
#   releases its claim (fn said it did not act); fn cancelled (the process shutting down)
#   keeps it until the lease lapses. A round's handler runs in the request's task: cancelled by
#   a disconnect, the round claim is released so that the retry runs the handler again. That is
#   safe because every effect of a handler sits in a `once` (handlers re-run every round
#   anyway), whose claim the cancellation left alone. Once a round's handler returned, its
#   outcome is written even if the request is cancelled meanwhile.
# - IN DOUBT: the work finished but the store refused the write. The claim stays held, and
#   the process that ran the work retries the write in the background (backoff up to
#   _RETRY_MAX, renewing the lease, until the flow deadline). The request and every replay
#   meanwhile get OutcomePending (HTTP 503, Retry-After, data type "outcome_pending"); after the
#   write, replays get the recorded outcome. Never a success a replay contradicts, never a rerun.
# - The limit: a holder that dies (SIGKILL, power) lets its claim lapse, and a retry runs the
#   work again: an effect keyed by ctx.idempotency_key (Store.add_once, a provider's key)
#   stays exactly once. A process that stops in order first drains its background work (drain,
#   called by the transports at shutdown).
# - Bounded: an outcome over max_outcome bytes (StoreLimits) is answered to the request that
#   ran it, and the store keeps a marker in its place: a replay gets OutcomeTooLarge, never a
#   second run, and no caller makes the store hold more than max_outcome per round or `once`.
from __future__ import annotations

import asyncio
import inspect
import itertools
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from typing import Any, TypeVar

import msgspec

from mrtr.errors import OutcomePending
from mrtr.protocol import InputRequiredResult
from mrtr.server._held import CURRENT_ROUND, HeldRound, Keeper, Redeemed
from mrtr.server._probe import note_store_hit
from mrtr.server._recorded import once_outcome, once_value, replayed, round_outcome
from mrtr.server._sealing import digest_arguments
from mrtr.stores import Claim, ClaimStatus, Store, StoreUnavailable

__all__ = ["Ledger"]

R = TypeVar("R")
_KEEP = (asyncio.CancelledError, KeyboardInterrupt, SystemExit)  # fn may have acted: keep it
_RETRY_FIRST = 0.05  # seconds before an in-doubt outcome is written again, doubling ...
_RETRY_MAX = 2.0  # ... up to this


class Ledger:
    """Records each round's outcome and each `once` result in `store`.

    `lease` bounds how long a claim outlives a process that died holding it (seconds);
    `wait` bounds how long a duplicate waits for the first redemption's outcome when it runs
    in this process, `poll` when it runs elsewhere (then OutcomePending). An outcome
    over `max_outcome` bytes is answered to its first request but kept as a marker only: a
    replay of it gets OutcomeTooLarge (it is never run again).
    """

    def __init__(
        self, store: Store, log: logging.Logger, *, lease: float = 30.0, wait: float = 60.0,
        poll: float = 5.0, max_outcome: int = 1024 * 1024,
    ) -> None:
        self.store = store
        self._log = log
        self._lease = lease
        self._wait = wait
        self._poll = min(poll, wait)
        self._holder = secrets.token_hex(6) + ":"  # + a serial: each claim attempt's holder
        self._serial = itertools.count()
        self._max_outcome = max_outcome
        self._running: dict[str, asyncio.Task[Any]] = {}  # once fns running here, by claim key
        self._doubt: dict[str, asyncio.Task[None]] = {}  # outcomes still being written, by key
        self._background: set[asyncio.Task[None]] = set()  # releases nobody waits for

    async def redeem(
        self,
        round_id: str,
        responses: Mapping[str, object],
        deadline: float,
        kind: type[R],
        run: Callable[[], Awaitable[R | InputRequiredResult]],
    ) -> R | InputRequiredResult:
        """Run this round once; replays get the stored outcome.

        Raises InvalidRequestState (other answers), OutcomePending, StoreUnavailable.
        """
        # The flow deadline first (fixed width, so keys sort by flow start): rounds of live
        # flows cluster at the end of an ordered index, and a SQLite commit writes a few pages,
        # not one per round. The deadline is sealed with the state, so replays name the same key.
        key = f"round:{int(deadline * 1000):012x}:{round_id}"
        if key in self._doubt:  # it ran here; its outcome is on its way to the store
            raise OutcomePending()
        # Decoded request params are plain JSON already (digest_arguments canonicalises them
        # without a copy); anything else is made so first.
        digest = digest_arguments(responses if type(responses) is dict
                                  else msgspec.to_builtins(responses))
        current = HeldRound(self, key, deadline)
        token = CURRENT_ROUND.set(current)
        try:
            result: R | InputRequiredResult = await run()
            del run  # what the handler ran with (its round, Context, ...) goes before the write
        except BaseException as exc:
            if current.redeemed is not None and not isinstance(exc, asyncio.CancelledError):
                note_store_hit()  # hold() met the recorded outcome: answer it
                return self._replay(current.redeemed, digest, kind)
            if current.held:
                await self._failed(key, current.holder, exc)
            raise  # unclaimed: nothing acted, nothing to release
        finally:
            CURRENT_ROUND.reset(token)
            del token
            current.stop()
        if current.redeemed is not None:  # the handler swallowed Redeemed
            note_store_hit()
            return self._replay(current.redeemed, digest, kind)
        return await self._keep_outcome(current, result, digest, kind)

    async def _keep_outcome(
        self, current: HeldRound, result: R | InputRequiredResult, digest: bytes, kind: type[R]
    ) -> R | InputRequiredResult:
        """Record a finished round's outcome: complete a held claim, else put it if absent;
        the outcome another redemption recorded first, when it did."""
        key, deadline = current.key, current.deadline
        outcome = round_outcome(digest, result, self._max_outcome, key, self._log)
        if current.held:
            await self._record(key, outcome, deadline)
            return result
        try:
            claim = await self.store.put_if_absent(key, outcome, expires=deadline)
        except StoreUnavailable as exc:  # nothing this round did needs the record: retry it
            self._log.error("store unavailable, %s not recorded: %s", key, exc.reason)
            raise
        if claim.status is ClaimStatus.RUNNING:  # a redemption that acts holds it: wait for it
            claim, _ = await self._claim(key, deadline)
            if claim.status is ClaimStatus.NEW:  # it gave up (released, or its lease lapsed)
                await self._record(key, outcome, deadline)
                return result
        if claim.status is ClaimStatus.DONE:
            note_store_hit()
            return self._replay(claim.outcome or b"", digest, kind)
        return result

    async def hold_round(self) -> None:
        """Before an effect (`ctx.once`, a task started): claim the round being redeemed, once.

        A no-op outside a redeemed round (round 1, no store) and once the round is held; raises
        Redeemed when another redemption recorded the round (its outcome is answered instead).
        """
        current = CURRENT_ROUND.get()
        if current is None or current.held or current.ledger is not self:
            return
        claim, holder = await self._claim(current.key, current.deadline)
        if claim.status is ClaimStatus.DONE:
            current.redeemed = claim.outcome or b""
            raise Redeemed()
        current.held, current.holder = True, holder
        # Most rounds finish well inside lease/3: a timer, not a task, until one does not.
        current.keeper = Keeper(lambda: self._keep(current.key))
        current.timer = asyncio.get_running_loop().call_later(self._lease / 3,
                                                              current.keeper.start)

    async def once(
        self, flow_id: str, key: str, deadline: float, fn: Callable[[], object]
    ) -> tuple[bool, object]:
        """(stored, value): fn's value when it ran here, else the JSON another run stored.

        Raises OutcomePending or StoreUnavailable; fn's own exception when it raised.
        """
        name = f"once:{flow_id}:{key}"
        claim, holder = await self._claim(name, deadline)
        if claim.status is ClaimStatus.DONE:
            return True, once_value(claim.outcome or b"null", key)
        # Claimed: from here on fn's outcome is recorded, whatever happens to this request.
        task = asyncio.get_running_loop().create_task(self._run_once(name, holder, deadline, fn))
        self._running[name] = task
        task.add_done_callback(lambda done: self._ran(name, done))
        return False, await asyncio.shield(task)

    async def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the work this process still does in the background
        (fns whose requests went away, outcomes written again); True when none is left."""
        pending = {*self._running.values(), *self._doubt.values(), *self._background}
        if not pending:
            return True
        _, left = await asyncio.wait(pending, timeout=timeout)
        if left:
            self._log.error("stopping with %d claims still held by work in progress: they "
                            "lapse after the lease, and a retry then runs that work again",
                            len(left))
        return not left

    # -- steps -------------------------------------------------------------------------------------
    async def _claim(self, key: str, deadline: float) -> tuple[Claim, str]:
        """Claim `key`, waiting (bounded) while another run holds it; the claim and its holder."""
        started = time.monotonic()
        holder = self._holder + str(next(self._serial))
        delay = 0.002
        while True:
            if key in self._doubt:  # it ran here; its outcome is on its way to the store
                raise OutcomePending()
            try:
                claim = await self.store.claim(key, lease=self._lease, expires=deadline,
                                               holder=holder)
            except StoreUnavailable as exc:
                self._log.error("store unavailable, refusing to run %s: %s", key, exc.reason)
                self._spawn(self._abandon(key, holder))  # it may have landed: ABANDONED
                raise
            except asyncio.CancelledError:
                self._spawn(self._abandon(key, holder))
                raise
            if claim.status is not ClaimStatus.RUNNING:
                return claim, holder
            waited = time.monotonic() - started
            here = self._running.get(key)
            if here is not None and waited < self._wait:
                # fn runs in this process: wait for its task, not the store
                await asyncio.wait((here,), timeout=self._wait - waited)
                continue
            if here is None and waited < self._poll:
                await asyncio.sleep(delay)
                delay = min(delay * 2, 0.05)
                continue
            self._log.warning("%s still running %s after %.1fs: answering outcome pending", key,
                              "here" if here is not None else "elsewhere", waited)
            raise OutcomePending()

    async def _failed(self, key: str, holder: str, exc: BaseException) -> None:
        """A held round's handler did not finish: release its claim (see above)."""
        if isinstance(exc, (StoreUnavailable, OutcomePending)):
            self._spawn(self._abandon(key, holder))  # the store is failing: answer now
        else:  # a ProtocolError, a crash, or the request cancelled: see above
            await self._release(key, holder)

    async def _run_once(
        self, name: str, holder: str, deadline: float, fn: Callable[[], object]
    ) -> object:
        """fn, then its outcome recorded: a task of its own, so no request cancels it."""
        keeper = Keeper(lambda: self._keep(name))
        timer = asyncio.get_running_loop().call_later(self._lease / 3, keeper.start)
        try:
            value = fn()
            if inspect.isawaitable(value):
                value = await value
        except _KEEP:
            self._log.warning("%s interrupted: its claim stays until the lease lapses", name)
            raise
        except BaseException:  # fn failed (or asked for input): it may run again
            await self._release(name, holder)
            raise
        finally:
            timer.cancel()
            keeper.stop()
        # fn acted: a value JSON cannot carry keeps the claim (it lapses), it never frees it.
        await self._record(name, once_outcome(value, self._max_outcome, name, self._log),
                           deadline)
        return value

    def _ran(self, name: str, task: asyncio.Task[Any]) -> None:
        if self._running.get(name) is task:
            del self._running[name]
        if not task.cancelled():
            task.exception()  # its awaiter may be gone (cancelled): the error was answered

    async def _record(self, key: str, outcome: bytes, deadline: float) -> None:
        """Write the outcome; if the store refuses, keep the claim and write it again later."""
        try:
            await self.store.complete(key, outcome, expires=deadline)
        except StoreUnavailable as exc:
            self._log.error("store unavailable, outcome of %s not recorded yet (%s): the claim"
                            " stays held while it is written again", key, exc.reason)
            self._in_doubt(key, outcome, deadline)
            raise OutcomePending() from exc
        except asyncio.CancelledError:
            # The request went away mid-write: the write may or may not land. Writing the same
            # bytes again is harmless, so finish it from here, whatever this request does.
            self._in_doubt(key, outcome, deadline)
            raise

    def _in_doubt(self, key: str, outcome: bytes, deadline: float) -> None:
        if key not in self._doubt:
            task = asyncio.get_running_loop().create_task(self._rewrite(key, outcome, deadline))
            self._doubt[key] = task
            task.add_done_callback(lambda done: self._doubt.pop(key, None))

    async def _rewrite(self, key: str, outcome: bytes, deadline: float) -> None:
        """Write an in-doubt outcome until it lands (or the flow deadline passes)."""
        delay = _RETRY_FIRST
        renewed = time.monotonic()
        try:
            while time.time() < deadline:
                try:
                    await self.store.complete(key, outcome, expires=deadline)
                except StoreUnavailable as exc:
                    self._log.debug("outcome of %s still not recorded: %s", key, exc.reason)
                else:
                    self._log.warning("outcome of %s recorded after all", key)
                    return
                if time.monotonic() - renewed > self._lease / 3:
                    renewed = time.monotonic()
                    try:  # the write fails but a renewal may not (a full disk): keep the claim
                        await self.store.renew(key, lease=self._lease)
                    except StoreUnavailable:
                        pass
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)
            self._log.error("outcome of %s not recorded before its flow deadline", key)
        except asyncio.CancelledError:
            self._log.error("stopping with the outcome of %s not recorded: its claim lapses "
                            "after the lease, and a retry then runs it again", key)
            raise

    async def _release(self, key: str, holder: str) -> None:
        try:
            await asyncio.shield(self.store.release(key, holder=holder))
        except (StoreUnavailable, asyncio.CancelledError) as exc:
            self._log.warning("could not release %s yet (%r): trying again in the background",
                              key, exc)
            self._spawn(self._abandon(key, holder))

    async def _abandon(self, key: str, holder: str) -> None:
        """Drop `holder`'s claim on `key` once the store answers, whose work never ran (or
        raised): tried again with backoff until the lease would have freed it anyway."""
        give_up = time.monotonic() + self._lease
        delay = _RETRY_FIRST
        while True:
            try:
                await self.store.release(key, holder=holder)
                return
            except StoreUnavailable as exc:
                if time.monotonic() + delay > give_up:
                    self._log.warning("could not release %s (its lease will): %s", key,
                                      exc.reason)
                    return
            await asyncio.sleep(delay)
            delay = min(delay * 2, _RETRY_MAX)

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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

    def _replay(self, outcome: bytes, digest: bytes, kind: type[R]) -> R | InputRequiredResult:
        return replayed(outcome, digest, kind, self._log)
