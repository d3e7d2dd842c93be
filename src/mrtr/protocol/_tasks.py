"""The tasks extension (`io.modelcontextprotocol/tasks`): Task shapes, `tasks/*`, notifications."""

# Design: DetailedTask is one Struct with the status-specific members optional; `__post_init__`
# enforces the member each status requires (also on decode). `requestState` never appears here.
from __future__ import annotations

from typing import Literal, TypeAlias

import msgspec

from ._input import InputRequest
from ._jsonrpc import ErrorObject, MethodTagged
from ._meta import RequestId, RequestMeta
from ._wire import UNSET, JSONObject, UnsetType, Wire

__all__ = [
    "CancelTaskRequest",
    "CancelTaskRequestParams",
    "CancelTaskResult",
    "CreateTaskResult",
    "DetailedTask",
    "GetTaskRequest",
    "GetTaskRequestParams",
    "GetTaskResult",
    "Task",
    "TaskStatus",
    "TaskStatusNotification",
    "TaskStatusNotificationParams",
    "UpdateTaskRequest",
    "UpdateTaskRequestParams",
    "UpdateTaskResult",
]

TaskStatus: TypeAlias = Literal["working", "input_required", "completed", "failed", "cancelled"]

_REQUIRED_BY_STATUS = {
    "input_required": "input_requests",
    "completed": "result",
    "failed": "error",
}


class Task(Wire, frozen=True, kw_only=True):
    """A durable task; timestamps are ISO 8601, `ttl_ms` None means unlimited."""

    task_id: str
    status: TaskStatus
    status_message: str | UnsetType = UNSET
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | UnsetType = UNSET


class DetailedTask(Task, frozen=True, kw_only=True):
    """A Task with its status-specific member: input_requests, result or error.

    Raises ValueError (a decode error) when the member its status requires is missing.
    """

    input_requests: dict[str, InputRequest] | UnsetType = UNSET
    result: JSONObject | UnsetType = UNSET
    error: ErrorObject | UnsetType = UNSET

    def __post_init__(self) -> None:
        needed = _REQUIRED_BY_STATUS.get(self.status)
        if needed is not None and getattr(self, needed) is UNSET:
            raise ValueError(f"a {self.status!r} task requires `{needed}`")


class CreateTaskResult(Task, frozen=True, kw_only=True):
    """`tools/call` answered as a task (`resultType: "task"`)."""

    result_type: str = "task"
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class GetTaskResult(DetailedTask, frozen=True, kw_only=True):
    """The result of `tasks/get` (`resultType` is "complete")."""

    result_type: str = "complete"
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class UpdateTaskResult(Wire, frozen=True, kw_only=True):
    """The (eventually consistent) ack of `tasks/update`."""

    result_type: str = "complete"
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class CancelTaskResult(Wire, frozen=True, kw_only=True):
    """The ack of `tasks/cancel`; cancellation is cooperative."""

    result_type: str = "complete"
    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class GetTaskRequestParams(Wire, frozen=True, kw_only=True):
    """Params of `tasks/get`."""

    task_id: str
    meta: RequestMeta = msgspec.field(name="_meta")


class GetTaskRequest(MethodTagged, tag_field="method", tag="tasks/get", frozen=True, kw_only=True):
    """`tasks/get`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: GetTaskRequestParams


class UpdateTaskRequestParams(Wire, frozen=True, kw_only=True):
    """Params of `tasks/update`: answers keyed like the task's `input_requests`."""

    task_id: str
    input_responses: dict[str, JSONObject]
    meta: RequestMeta = msgspec.field(name="_meta")


class UpdateTaskRequest(
    MethodTagged, tag_field="method", tag="tasks/update", frozen=True, kw_only=True
):
    """`tasks/update`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: UpdateTaskRequestParams


class CancelTaskRequestParams(Wire, frozen=True, kw_only=True):
    """Params of `tasks/cancel`."""

    task_id: str
    meta: RequestMeta = msgspec.field(name="_meta")


class CancelTaskRequest(
    MethodTagged, tag_field="method", tag="tasks/cancel", frozen=True, kw_only=True
):
    """`tasks/cancel`."""

    jsonrpc: Literal["2.0"] = "2.0"
    id: RequestId
    params: CancelTaskRequestParams


class TaskStatusNotificationParams(DetailedTask, frozen=True, kw_only=True):
    """The full DetailedTask, plus the notification `_meta`."""

    meta: JSONObject | UnsetType = msgspec.field(default=UNSET, name="_meta")


class TaskStatusNotification(
    MethodTagged, tag_field="method", tag="notifications/tasks", frozen=True, kw_only=True
):
    """`notifications/tasks` (opted into with `subscriptions/listen` task_ids)."""

    jsonrpc: Literal["2.0"] = "2.0"
    params: TaskStatusNotificationParams
