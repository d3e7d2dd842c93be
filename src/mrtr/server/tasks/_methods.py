"""`tasks/get`, `tasks/update` and `tasks/cancel`: any replica answers from the task record."""

# Design: every call first checks the tasks extension in this request's `_meta` (-32021), then
# finds the record under the caller's principal: an unknown id, an expired one and another
# principal's all get the same -32602. A call on a task that can move (its runner died, answers
# wait) resumes it here (TaskRunner.resume). `input_required` lists only keys still unanswered.
# Answers and cancels ring the task's channel: a live runner, here or on another replica, waiting
# for them in place wakes at once where the store's notifications reach it (#28).
from __future__ import annotations

import msgspec

from mrtr.errors import InvalidParams, MissingRequiredClientCapability
from mrtr.protocol import (
    METHODS,
    TASKS_EXTENSION,
    UNSET,
    CancelTaskRequest,
    CancelTaskResult,
    ErrorObject,
    GetTaskRequest,
    GetTaskResult,
    InputRequest,
    RequestMeta,
    UpdateTaskRequest,
    UpdateTaskResult,
)
from mrtr.server._peer import Notifier, Peer
from mrtr.server.tasks._records import TaskRecord, iso_time
from mrtr.server.tasks._runner import TaskRunner

__all__ = ["TaskMethods", "declares_tasks"]

_REQUIRED = METHODS["tasks/get"].required_capability() or {}


def declares_tasks(meta: RequestMeta) -> bool:
    """Whether this request's client capabilities declare the tasks extension."""
    extensions = meta.client_capabilities.extensions
    return extensions is not UNSET and TASKS_EXTENSION in extensions


class TaskMethods:
    """The `tasks/*` routes of one Dispatcher."""

    def __init__(self, runner: TaskRunner) -> None:
        self.runner = runner

    async def get(self, request: GetTaskRequest, peer: Peer,
                  sink: Notifier | None) -> GetTaskResult:
        record = await self._find(request.params.meta, request.params.task_id, peer)
        await self.runner.resume(record)
        return await self.detailed(record)

    async def update(self, request: UpdateTaskRequest, peer: Peer,
                     sink: Notifier | None) -> UpdateTaskResult:
        params = request.params
        record = await self._find(params.meta, params.task_id, peer)
        if not record.terminal:
            book = self.runner.book
            # Unknown, settled and superseded keys: acked, ignored. Every answer is measured
            # before any is stored: one over StoreLimits.max_answer stores none.
            blobs = {key: book.encoded_answer(key, response)
                     for key, response in params.input_responses.items() if key in record.open}
            for key, blob in blobs.items():
                await book.answer(record, key, blob)
            if blobs:
                await book.ring(record.task_id)  # its live runner takes them, wherever it runs
            await self.runner.resume(record)
        return UpdateTaskResult(meta=self.runner.meta)

    async def cancel(self, request: CancelTaskRequest, peer: Peer,
                     sink: Notifier | None) -> CancelTaskResult:
        params = request.params
        record = await self._find(params.meta, params.task_id, peer)
        if not record.terminal:
            await self.runner.book.cancel(record)
            if not self.runner.stop(record.task_id, "cancel"):
                await self._cancel_idle(record)
        return CancelTaskResult(meta=self.runner.meta)

    async def _cancel_idle(self, record: TaskRecord) -> None:
        """Settle a task nobody runs here; a runner elsewhere is rung, and its lease broken so
        that its next renewal shows the cancel even where the ring does not reach."""
        runner = self.runner
        if not await runner.book.acquire(record):
            await runner.book.ring(record.task_id)
            await runner.book.break_lease(record.task_id)
            return
        fresh = await runner.book.load(record.task_id)
        if fresh is None or fresh.terminal:
            await runner.book.release(record.task_id)
            return
        await runner.settle(fresh, "cancelled")

    async def _find(self, meta: RequestMeta, task_id: str, peer: Peer) -> TaskRecord:
        if not declares_tasks(meta):
            raise MissingRequiredClientCapability(_REQUIRED)
        record = await self.runner.book.load(task_id)
        if record is None or record.principal != peer.principal:
            raise InvalidParams("Unknown task")
        return record

    async def detailed(self, record: TaskRecord) -> GetTaskResult:
        """The DetailedTask for `record` as `tasks/get` returns it."""
        status = record.status
        requests: dict[str, InputRequest] | None = None
        if status == "input_required":
            answered = await self.runner.book.answers(record)
            waiting = {k: v for k, v in record.asked.items() if k not in answered}
            if waiting:
                requests = msgspec.convert(waiting, dict[str, InputRequest])
            else:
                status = "working"  # every ask is answered: the task is about to move on
        return GetTaskResult(
            task_id=record.task_id,
            status=status,  # type: ignore[arg-type]
            status_message=record.status_message if record.status_message is not None else UNSET,
            created_at=iso_time(record.created_at),
            last_updated_at=iso_time(record.updated_at),
            ttl_ms=record.ttl_ms,
            poll_interval_ms=record.poll_interval_ms,
            input_requests=requests if requests is not None else UNSET,
            result=record.result if record.result is not None else UNSET,
            error=(msgspec.convert(record.error, ErrorObject) if record.error is not None
                   else UNSET),
            meta=self.runner.meta,
        )
