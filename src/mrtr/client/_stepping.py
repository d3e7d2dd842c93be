"""Manual stepping: run a flow one round at a time, for UIs that ask the user themselves."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Mapping
from typing import Generic, TypeVar

from mrtr.protocol import UNSET, InputRequest, InputRequiredResult

from ._checkpoint import dump_checkpoint
from ._errors import ClientError
from ._flow import FlowRequest, Fulfil, Send, Sender, Step, Suspended
from ._tasks_flow import TaskState

__all__ = ["ManualFlow"]

ResultT = TypeVar("ResultT")


class ManualFlow(Generic[ResultT]):
    """A flow that stops at every round of input requests.

    ```
    pending = await flow.step()           # {} once the result is in
    while pending:
        pending = await flow.answer({key: ElicitResult(...) for key in pending})
    result = flow.result
    ```
    """

    def __init__(
        self,
        original: FlowRequest,
        flow: Generator[Step, object, ResultT],
        *,
        send: Sender,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        suspended: Suspended | None = None,
        tasks: TaskState | None = None,
    ) -> None:
        self._original = original
        self._flow = flow
        self._send = send
        self._sleep = sleep
        self._last: InputRequiredResult | None = suspended.reply if suspended else None
        self._pending: Fulfil | None = None
        self._started = False
        self._done = False
        self._result: ResultT | None = None
        self._tasks = tasks

    @property
    def done(self) -> bool:
        """True once the final result has arrived."""
        return self._done

    @property
    def result(self) -> ResultT:
        """The final result; raises ClientError before the flow is done."""
        if not self._done:
            raise ClientError("the flow has not completed")
        return self._result  # type: ignore[return-value]

    @property
    def pending(self) -> Mapping[str, InputRequest]:
        """The input requests waiting for `answer()` ({} when none)."""
        return self._pending.input_requests if self._pending else {}

    @property
    def round(self) -> int:
        """The round number of the pending input requests (0 before any)."""
        return self._pending.round if self._pending else 0

    @property
    def task_id(self) -> str | None:
        """The id of the task the server made of this call, if it did (see docs/client.md)."""
        return self._tasks.task_id if self._tasks is not None else None

    async def step(self) -> Mapping[str, InputRequest]:
        """Start (or continue) the flow; return the next input requests, or {} when done."""
        if self._pending is not None:
            return self._pending.input_requests
        if self._done:
            return {}
        if self._started:
            raise ClientError("step() while a request is in flight")
        self._started = True
        return await self._run(None, first=True)

    async def answer(self, answers: Mapping[str, object]) -> Mapping[str, InputRequest]:
        """Answer the pending input requests (InputResponse Structs or plain dicts).

        Sends the retry; returns the next input requests, or {} when done.
        """
        if self._pending is None:
            if not self._started:
                await self.step()
            if self._pending is None:
                raise ClientError("no input requests are pending")
        self._pending = None
        return await self._run(answers, first=False)

    def checkpoint(self) -> str:
        """A JSON string to resume this flow with `Client.resume`, even in another process.

        In a task it can also be taken while no input is pending (e.g. after cancelling a
        `step()` that was polling): resuming then polls the task again.
        """
        tasks = self._tasks
        if tasks is not None and tasks.live and not self._done:
            asked = self._pending.input_requests if self._pending else {}
            reply = InputRequiredResult(input_requests=dict(asked) or UNSET)
            suspended = Suspended(reply, self._pending.round if self._pending else tasks.round + 1,
                                  task_id=tasks.task_id, answered=frozenset(tasks.answered))
            return dump_checkpoint(self._original, suspended)
        if self._pending is None or self._last is None:
            raise ClientError("a checkpoint needs pending input requests")
        return dump_checkpoint(self._original, Suspended(self._last, self._pending.round))

    async def aclose(self) -> None:
        """Abandon the flow (the server is not waiting: nothing is sent)."""
        self._flow.close()

    async def _run(self, outcome: object, *, first: bool) -> Mapping[str, InputRequest]:
        try:
            step = next(self._flow) if first else self._flow.send(outcome)
            while not isinstance(step, Fulfil):
                if isinstance(step, Send):
                    outcome = await self._send(step.request)
                    if isinstance(outcome, InputRequiredResult):
                        self._last = outcome
                else:
                    await self._sleep(step.seconds)
                    outcome = None
                step = self._flow.send(outcome)
        except StopIteration as stop:
            self._done, self._result = True, stop.value
            return {}
        self._pending = step
        return step.input_requests
