"""`client.tasks`: the tasks extension by hand (get, update, cancel, wait) and task clean-up."""

# Design: the transparent path (`call_tool`) and the manual one share `task_flow` and
# `abandon_on_exit`. A call that stops waiting for a live task for any reason — the caller
# cancelled it, Ctrl-C, the Client deadline, a handler refused, a malformed reply — sends
# `tasks/cancel` (best effort, within CANCEL_GRACE) so no task keeps working for nobody. Tasks
# exist only in 2026-07-28: a 2025 session is refused locally, never sent `tasks/*`.
from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, TypeVar

import msgspec

from mrtr.protocol import (
    CallToolResult,
    CancelTaskResult,
    GetTaskResult,
    JSONObject,
    UpdateTaskResult,
)

from ._errors import ClientError, UnexpectedResult
from ._flow import drive
from ._handlers import fulfil
from ._requester import Requester
from ._steps import FlowRequest, Fulfil, TaskRequest
from ._tasks_flow import (
    TaskObserver,
    TaskState,
    as_result,
    cancel_request,
    get_request,
    task_flow,
    update_request,
)

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["CANCEL_GRACE", "TaskObserver", "Tasks", "TaskState", "abandon_on_exit", "send_cancel"]

ResultT = TypeVar("ResultT")
CANCEL_GRACE = 5.0  # seconds a best-effort `tasks/cancel` may take when a call gives up


async def send_cancel(requester: Requester, task_id: str) -> None:
    """`tasks/cancel` with no deadline of its own: `abandon_on_exit` gives it CANCEL_GRACE."""
    request: TaskRequest = cancel_request(requester.next_id(), task_id, requester.meta())
    _expect(await requester.send(request), CancelTaskResult)


async def abandon_on_exit(
    work: Awaitable[ResultT], state: TaskState | None,
    cancel: Callable[[str], Awaitable[object]],
) -> ResultT:
    """Await `work`; if it ends in any exception while the task in `state` is live, cancel it.

    A TimeoutError is re-raised naming the cancelled task.
    """
    try:
        return await work
    except BaseException as exc:
        if state is None or state.task_id is None or not state.live:
            raise
        task_id = state.task_id
        with contextlib.suppress(Exception):
            async with asyncio.timeout(CANCEL_GRACE):
                await cancel(task_id)
        if isinstance(exc, TimeoutError):
            raise TimeoutError(f"{exc}; task {task_id} was cancelled") from None
        raise


class Tasks:
    """The tasks extension by hand, as `client.tasks` (each call under the Client `timeout`).

    Raises ClientError when the Client was made with `declare_tasks=False` or the server
    speaks MCP 2025, and `mrtr.errors` classes for errors the server sends (-32602 for an
    unknown task id).
    """

    def __init__(self, client: Client, requester: Requester) -> None:
        self._client = client
        self._requester = requester

    async def get(self, task_id: str) -> GetTaskResult:
        """`tasks/get`: the task with its status-specific member (inputRequests, result, error)."""
        r = await self._ready()
        result = await r.send_bounded(get_request(r.next_id(), task_id, r.meta()))
        return _expect(result, GetTaskResult)

    async def update(self, task_id: str, responses: Mapping[str, object]) -> None:
        """`tasks/update` with `responses` ({key: InputResponse Struct or dict}); an ack only."""
        r = await self._ready()
        wire: dict[str, JSONObject] = {k: msgspec.to_builtins(v) for k, v in responses.items()}
        request = update_request(r.next_id(), task_id, wire, r.meta())
        _expect(await r.send_bounded(request), UpdateTaskResult)

    async def cancel(self, task_id: str) -> None:
        """`tasks/cancel` (cooperative: the task may still end in another terminal status)."""
        r = await self._ready()
        await r.bounded(send_cancel(r, task_id))

    async def wait(self, task_id: str, *, on_task: TaskObserver | None = None) -> CallToolResult:
        """Follow a known task to its result, as `call_tool` does (e.g. after a restart).

        Raises TaskFailed, TaskCancelled, or what `call_tool` raises.
        """
        r, c = await self._ready(), self._client
        state = TaskState(observer=on_task, task_id=task_id)
        flow = task_flow(state, new_id=r.next_id, new_meta=r.meta, max_rounds=c.max_rounds,
                         limits=c.limits)

        async def send(request: FlowRequest | TaskRequest) -> object:
            return await r.send(request)

        async def answer(step: Fulfil) -> Mapping[str, object]:
            return await fulfil(c.handlers, step.input_requests, step.round)

        work = r.bounded(drive(flow, send=send, fulfil=answer))
        cancel = functools.partial(send_cancel, r)
        return as_result(await abandon_on_exit(work, state, cancel), CallToolResult)

    async def _ready(self) -> Requester:
        """The Requester, once the era allows `tasks/*` (raises ClientError otherwise)."""
        c = self._client
        if not c.declare_tasks:
            raise ClientError("the tasks extension is off (Client(declare_tasks=False))")
        if c.era.mode == "auto" and c.era.probes == 0 and c.era.session is None:
            await c.discover()  # decides the era before anything `tasks/*` is sent
        if c.era.mode == "legacy" or c.era.session is not None:
            raise ClientError("tasks need a 2026-07-28 server; this one speaks MCP 2025")
        return self._requester


def _expect(result: object, expect: type[ResultT]) -> ResultT:
    if not isinstance(result, expect):
        raise UnexpectedResult(f"expected {expect.__name__}, got {type(result).__name__}")
    return result

