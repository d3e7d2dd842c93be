"""Live continuation (#28): an ask inside a task waits for its answer in place while its runner
lives; the task's status and progress only move forward."""

# Design: a TaskRound settles asks like any Round, but where a request's round would raise
# Suspend it returns a Deferred (server/_deferred.py): the handler's coroutine waits right at its
# `await`, holding the run lease (the heartbeat keeps renewing it). LiveWait opens the asks in
# the record (status input_required, wire keys unique over the task's life, as when it parks),
# then waits for their answers: `tasks/update` on any replica stores them and rings the task's
# channel (Store.notify), and the waiter also looks, backing off to the heartbeat's interval,
# for stores whose notifications do not reach this process. The answers are fed to the round as
# if a request had carried them, so they are validated and journaled the same way (a replay
# after a crash finds them in the journal), and the handler goes on: nothing before the ask runs
# again. After `hold` seconds without an answer it raises Suspend: the task parks as before
# (lease released, no coroutine kept), and a later answer replays it. InTask writes the status:
# a progress value lower than or equal to the one recorded (a replay re-reporting its steps) is
# not shown, so what `tasks/get` shows never goes back.
from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

import msgspec

from mrtr.errors import LimitExceeded
from mrtr.protocol import UNSET, InputRequest, InputRequiredResult
from mrtr.server._asks import Ask, Suspend
from mrtr.server._deferred import Deferred
from mrtr.server._journal import FlowState
from mrtr.server._rounds import Round, RoundEngine
from mrtr.server._sealing import Binding
from mrtr.server.tasks._records import TaskBook, TaskRecord

__all__ = ["InTask", "LiveWait", "TaskRound", "fresh_key", "open_keys"]

_FIRST_LOOK = 0.25  # seconds before the first look at the answers; doubling up to lease/3


class _Runner(Protocol):
    book: TaskBook
    clock: Callable[[], float]
    log: Any


class TaskRound(Round):
    """A Round that waits in place for answers (`waiter`), or parks (records its asks)."""

    __slots__ = ("parked", "waiter")

    def __init__(self, engine: RoundEngine, flow: FlowState, deadline: float,
                 waiter: LiveWait | None = None) -> None:
        super().__init__(engine, flow, _never_sealed, deadline)
        self.parked: dict[str, str] | None = None
        self.waiter = waiter

    def settle(self, asks: Sequence[Ask[Any]], /) -> list[Any] | Deferred:
        try:
            return super().settle(asks)
        except Suspend:
            if self.waiter is None:
                raise
            return Deferred(lambda: self._wait_for(asks))

    async def _wait_for(self, asks: Sequence[Ask[Any]]) -> list[Any]:
        assert self.waiter is not None
        keys = [ask.key for ask in asks if ask.key in self.asked]
        requests = {key: self.asked.pop(key) for key in keys}
        shapes = {key: self._sent.pop(key) for key in keys}
        try:
            answers = await self.waiter.wait(requests, shapes)
        except BaseException:  # parking (Suspend) or cancelled: the asks stand
            self.asked.update(requests)
            self._sent.update(shapes)
            raise
        self.flow.pending = {**self.flow.pending, **shapes}  # they were sent: answers count
        self._responses = {**self._responses, **answers}
        values = self.settle(asks)  # validated and journaled as a request's answers would be
        if type(values) is Deferred:  # an answer was refused: asked again, with the reason
            return await values.wait()
        return values  # type: ignore[return-value]

    def _suspend(self, asks: Mapping[str, Any], shapes: dict[str, str],
                 state: Any) -> InputRequiredResult:
        self.parked = dict(shapes)
        self.flow.state = state
        return InputRequiredResult(input_requests=dict(asks) if asks else UNSET)


def _never_sealed() -> Binding:
    raise AssertionError("a task round never seals a state")


class LiveWait:
    """Waits for the answers to a task's asks while its runner holds the lease."""

    def __init__(self, runner: _Runner, record: TaskRecord) -> None:
        self._runner = runner
        self._record = record

    async def wait(self, requests: Mapping[str, InputRequest],
                   shapes: Mapping[str, str]) -> dict[str, object]:
        """The answers ({key: raw answer}) to at least one of the asks; raises Suspend after
        TaskPolicy.hold seconds without any."""
        record, book, clock = self._record, self._runner.book, self._runner.clock
        wires = open_keys(record, shapes, requests)
        record.status, record.updated_at = "input_required", clock()
        await book.save(record)
        policy = book.policy
        held = min(policy.hold, record.expires - clock())  # never past the task's deadline
        give_up, delay = time.monotonic() + held, _FIRST_LOOK
        while True:
            found = {w: a for w, a in (await book.answers(record)).items() if w in wires}
            if found:
                break
            left = give_up - time.monotonic()
            if left <= 0:
                raise Suspend()
            await book.bell(record.task_id, min(delay, left))
            delay = min(delay * 2, policy.lease / 3)
        record.open = [w for w in record.open if w not in found]
        record.asked = {w: r for w, r in record.asked.items() if w not in found}
        if not record.open:
            record.status = "working"
        record.updated_at = clock()
        await book.save(record)  # the answers leave the open list before the handler goes on
        return {record.keys[w][0]: answer for w, answer in found.items()}


def open_keys(record: TaskRecord, shapes: Mapping[str, str],
              requests: Mapping[str, Any]) -> list[str]:
    """Open a wire key in `record` for each ask (an open one asking the same is kept)."""
    opened: list[str] = []
    for key, shape in shapes.items():
        wire = next((w for w in record.open if record.keys[w] == [key, shape]), None)
        if wire is None:
            wire = fresh_key(record.keys, key)
            record.keys[wire] = [key, shape]
            record.open.append(wire)
        record.asked[wire] = msgspec.to_builtins(requests[key])
        opened.append(wire)
    return opened


def fresh_key(keys: Mapping[str, object], key: str) -> str:
    """`key`, or `key.N` when the task already used it (keys are never reused in a task)."""
    if key not in keys:
        return key
    n = 2
    while f"{key}.{n}" in keys:
        n += 1
    return f"{key}.{n}"


class InTask:
    """The hooks inside a task: `begin_task` is done; progress becomes the status message."""

    def __init__(self, runner: _Runner, record: TaskRecord) -> None:
        self._runner = runner
        self._record = record

    async def begin(self) -> None:
        return None

    async def status(self, message: str, progress: float | None = None) -> None:
        record = self._record
        if progress is not None:
            if record.progress is not None and progress <= record.progress:
                return  # a replay re-reporting a step already shown: never backwards
            record.progress = progress
        if record.status_message != message:
            record.status_message = message
            record.updated_at = self._runner.clock()
            try:
                await self._runner.book.save(record)
            except LimitExceeded as exc:  # a status is not worth failing the task for
                self._runner.log.warning("task %s: status not saved: %s", record.task_id, exc)

