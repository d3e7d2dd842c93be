"""What a task tool's Context and the task runner tell each other (the tasks extension)."""

from __future__ import annotations

from typing import Protocol

__all__ = ["StartTask", "TaskHooks"]


class StartTask(BaseException):  # noqa: N818 - control flow, like Suspend
    """`ctx.begin_task()` in a task tool's MRTR phase: the rest of the handler runs as a task."""


class TaskHooks(Protocol):
    """What a Context of a task tool tells the task runner."""

    async def begin(self) -> None: ...

    async def status(self, message: str) -> None: ...
