"""The task phase of a tool call as a sans-I/O generator: poll, answer, settle (ext-tasks)."""

# Design: a `CreateTaskResult` ends the MRTR phase (ext-tasks); `task_flow` then yields the same
# Send / Fulfil / Sleep steps as `call_flow`, so one driver (or ManualFlow) runs both phases and
# input requests of a task reach the very handlers MRTR rounds use. What the caller must know
# to cancel, observe or checkpoint the task lives in one mutable `TaskState` owned by that call
# (never shared). Keys already answered are never sent again: servers may list them until they
# catch up (`tasks/update` is eventually consistent), and the spec says to de-duplicate.
from __future__ import annotations

import functools
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

import msgspec

from mrtr.errors import ProtocolError, from_wire
from mrtr.protocol import (
    UNSET,
    CancelTaskRequest,
    CancelTaskRequestParams,
    GetTaskRequest,
    GetTaskRequestParams,
    GetTaskResult,
    InputRequest,
    JSONObject,
    RequestId,
    RequestMeta,
    Task,
    TaskStatus,
    UpdateTaskRequest,
    UpdateTaskRequestParams,
    UpdateTaskResult,
    decode,
)

from ._errors import ClientError, InputRefused, TooManyInputs, TooManyRounds, UnexpectedResult
from ._limits import ClientLimits
from ._steps import Fulfil, Send, Sleep, Step

__all__ = [
    "TERMINAL",
    "TaskCancelled",
    "TaskFailed",
    "TaskObserver",
    "TaskState",
    "as_result",
    "cancel_request",
    "get_request",
    "task_flow",
    "update_request",
]

ResultT = TypeVar("ResultT")
TERMINAL: frozenset[TaskStatus] = frozenset({"completed", "failed", "cancelled"})


class TaskFailed(ClientError):
    """The task ended `failed`; `error` is the JSON-RPC error it carries (a `mrtr.errors` class)."""

    def __init__(self, task_id: str, error: ProtocolError) -> None:
        super().__init__(f"task {task_id} failed: error {error.code}: {error.message}")
        self.task_id = task_id
        self.error = error


class TaskCancelled(ClientError):
    """The task ended `cancelled` (by `tasks/cancel`, from this client or another)."""

    def __init__(self, task_id: str) -> None:
        super().__init__(f"task {task_id} was cancelled")
        self.task_id = task_id


class TaskObserver(Protocol):
    """Sees the task each time the client learns its state (creation and every `tasks/get`)."""

    def __call__(self, task: Task, /) -> None: ...


@dataclass(eq=False)
class TaskState:
    """What one call knows about its task; `observer` is told of every state seen."""

    observer: TaskObserver | None = None
    task_id: str | None = None
    status: TaskStatus | None = None
    poll_interval_ms: int | None = None
    answered: set[str] = field(default_factory=set)
    round: int = 0  # input rounds of the whole call so far (MRTR rounds included)

    @property
    def live(self) -> bool:
        """Whether a task exists and has not reached a terminal status (as far as we know)."""
        return self.task_id is not None and self.status not in TERMINAL

    def seen(self, task: Task) -> None:
        self.task_id, self.status = task.task_id, task.status
        if task.poll_interval_ms is not UNSET:
            self.poll_interval_ms = task.poll_interval_ms
        if self.observer is not None:
            self.observer(task)

    def poll_seconds(self, limits: ClientLimits) -> float:
        """The wait before the next `tasks/get`: the server's interval, clamped by `limits`."""
        if self.poll_interval_ms is None:
            return limits.poll_interval
        seconds = self.poll_interval_ms / 1000
        return min(max(seconds, limits.min_poll_interval), limits.max_poll_interval)


def get_request(request_id: RequestId, task_id: str, meta: RequestMeta) -> GetTaskRequest:
    return GetTaskRequest(id=request_id, params=GetTaskRequestParams(task_id=task_id, meta=meta))


def update_request(
    request_id: RequestId, task_id: str, answers: dict[str, JSONObject], meta: RequestMeta
) -> UpdateTaskRequest:
    params = UpdateTaskRequestParams(task_id=task_id, input_responses=answers, meta=meta)
    return UpdateTaskRequest(id=request_id, params=params)


def cancel_request(request_id: RequestId, task_id: str, meta: RequestMeta) -> CancelTaskRequest:
    params = CancelTaskRequestParams(task_id=task_id, meta=meta)
    return CancelTaskRequest(id=request_id, params=params)


def task_flow(
    state: TaskState,
    *,
    new_id: Callable[[], RequestId],
    new_meta: Callable[[], RequestMeta],
    max_rounds: int,
    limits: ClientLimits,
    asked: int = 0,
    pending: Mapping[str, InputRequest] | None = None,
) -> Generator[Step, object, JSONObject]:
    """Poll the task in `state` until it settles; return the inlined result of `completed`.

    `pending` answers those input requests first (a resumed checkpoint). Raises TaskFailed,
    TaskCancelled, UnexpectedResult for a malformed reply, TooManyRounds / TooManyInputs past
    the caps (counted over the whole call), InputRefused when answers are missing.
    """
    task_id = state.task_id
    assert task_id is not None
    new_meta = functools.partial(_without_progress, new_meta)  # tasks have no progress
    idle = state.status == "working"
    if pending:
        asked = yield from _answer(pending, state, max_rounds, limits, asked, new_id, new_meta)
        idle = False
    while True:
        if idle:
            yield Sleep(state.poll_seconds(limits))
        reply = yield Send(get_request(new_id(), task_id, new_meta()))
        task = _checked(reply, task_id)
        state.seen(task)
        result = _settled(task)
        if result is not None:
            return result
        todo = _outstanding(task, state)
        idle = not todo
        if todo:
            asked = yield from _answer(todo, state, max_rounds, limits, asked, new_id, new_meta)


def _without_progress(new_meta: Callable[[], RequestMeta]) -> RequestMeta:
    return msgspec.structs.replace(new_meta(), progress_token=UNSET)


def _checked(reply: object, task_id: str) -> GetTaskResult:
    if not isinstance(reply, GetTaskResult):
        raise UnexpectedResult(f"expected a task from tasks/get, got {type(reply).__name__}")
    if reply.task_id != task_id:
        raise UnexpectedResult(f"tasks/get for {task_id!r} answered task {reply.task_id!r}")
    return reply


def _settled(task: GetTaskResult) -> JSONObject | None:
    """The result of a completed task, None while it runs; raises for failed or cancelled."""
    if task.status == "completed":
        assert task.result is not UNSET  # DetailedTask checks it on decode
        return task.result
    if task.status == "failed":
        raise TaskFailed(task.task_id, from_wire(task.error))
    if task.status == "cancelled":
        raise TaskCancelled(task.task_id)
    return None


def _outstanding(task: GetTaskResult, state: TaskState) -> dict[str, InputRequest]:
    if task.status != "input_required" or task.input_requests is UNSET:
        return {}
    return {k: v for k, v in task.input_requests.items() if k not in state.answered}


def _answer(
    todo: Mapping[str, InputRequest],
    state: TaskState,
    max_rounds: int,
    limits: ClientLimits,
    asked: int,
    new_id: Callable[[], RequestId],
    new_meta: Callable[[], RequestMeta],
) -> Generator[Step, object, int]:
    """One input round of the task: Fulfil, then `tasks/update` with those keys only."""
    state.round += 1
    if state.round > max_rounds:
        raise TooManyRounds(max_rounds)
    asked = _count(len(todo), asked, limits)
    answers = yield Fulfil(dict(todo), state.round)
    if not isinstance(answers, Mapping):
        raise InputRefused("input requests were not answered")
    missing = sorted(set(todo) - set(answers))
    if missing:
        raise InputRefused(f"no answer for input request(s) {', '.join(missing)}")
    wire: dict[str, JSONObject] = {k: msgspec.to_builtins(answers[k]) for k in todo}
    assert state.task_id is not None
    ack = yield Send(update_request(new_id(), state.task_id, wire, new_meta()))
    if not isinstance(ack, UpdateTaskResult):
        raise UnexpectedResult(f"expected an ack from tasks/update, got {type(ack).__name__}")
    state.answered.update(todo)
    return asked


def _count(count: int, asked: int, limits: ClientLimits) -> int:
    if count > limits.max_round_inputs:
        raise TooManyInputs(f"the task asked {count} input requests at once "
                            f"(max_round_inputs={limits.max_round_inputs})")
    if asked + count > limits.max_flow_inputs:
        raise TooManyInputs(f"the call asked {asked + count} input requests "
                            f"(max_flow_inputs={limits.max_flow_inputs})")
    return asked + count


def as_result(result: JSONObject, expect: type[ResultT]) -> ResultT:
    """The inlined result of a completed task as `expect`; raises UnexpectedResult."""
    try:
        return decode(msgspec.json.encode(result), expect)
    except (msgspec.DecodeError, RecursionError) as exc:
        raise UnexpectedResult(f"invalid result in the completed task: {exc}") from None
