"""Reporting: what a handler tells the client while it runs (progress and log messages)."""

# Design: both are request-scoped notifications that the client opts in to in the request's own
# `_meta` (a `progressToken`, a `logLevel`): without it nothing is sent (spec: LOG-01), so a
# handler may report unconditionally. Inside a task (no stream to carry notifications) progress
# becomes the task's `statusMessage` and log messages are dropped. A handler runs again in every
# round: until it reaches an ask the last round sent (or reads `input_responses`), it replays
# code whose notifications that round already sent, so they are not sent twice and a person
# sees each line once. `debug`/`info`/`warning`/`error` are FastMCP's spellings of `log`.
from __future__ import annotations

from typing import get_args

from mrtr.protocol import (
    JSON,
    UNSET,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    ProgressNotification,
    ProgressNotificationParams,
    RequestMeta,
)
from mrtr.server._asks import Settler, TaskHooks
from mrtr.server._peer import Notifier

__all__ = ["LEVELS", "Reporting"]

LEVELS: tuple[str, ...] = get_args(LoggingLevel)  # lowest first, as the spec lists them
_RANK = {level: rank for rank, level in enumerate(LEVELS)}


class Reporting:
    """The notification half of Context: `report_progress`, `log` and its short forms."""

    meta: RequestMeta
    task_hooks: TaskHooks | None
    task_id: str | None
    _sink: Notifier | None
    _progress_last: float | None
    _settler: Settler

    async def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Send notifications/progress if the request carried a progressToken (else no-op).

        Inside a task, updates the task's `statusMessage` instead (`message`, or "progress/total").
        """
        if self.task_hooks is not None and self.task_id is not None:
            shown = f"{progress:g}/{total:g}" if total is not None else f"{progress:g}"
            await self.task_hooks.status(message if message is not None else shown, progress)
            return
        token = self.meta.progress_token
        if token is UNSET or self._sink is None or not self._settler.caught_up:
            return
        if self._progress_last is not None and progress <= self._progress_last:
            return  # the spec: progress MUST increase
        self._progress_last = progress
        params = ProgressNotificationParams(
            progress_token=token,
            progress=progress,
            total=UNSET if total is None else total,
            message=UNSET if message is None else message,
        )
        await self._sink(ProgressNotification(params=params))

    async def log(self, level: str, data: JSON, *, logger: str | None = None) -> None:
        """Send notifications/message at `level`, only when the request set a logLevel at or
        below it (the client's choice: `mrtr call --log-level`, `Client(on_log=...)`), once per
        flow (not again when a later round replays this part of the handler).

        `level` is one of debug, info, notice, warning, error, critical, alert, emergency
        (raises ValueError otherwise); `data` is any JSON value, usually a string; `logger`
        names the part of the server that speaks.
        """
        rank = _RANK.get(level)
        if rank is None:
            raise ValueError(f"unknown log level {level!r}: use one of {', '.join(LEVELS)}")
        wanted = self.meta.log_level
        if wanted is UNSET or self._sink is None or rank < _RANK[wanted]:
            return
        if not self._settler.caught_up:
            return  # sent by an earlier round, which ran this part of the handler already
        params = LoggingMessageNotificationParams(
            level=level,  # type: ignore[arg-type]  # checked against LEVELS above
            data=data,
            logger=UNSET if logger is None else logger,
        )
        await self._sink(LoggingMessageNotification(params=params))

    async def debug(self, data: JSON, *, logger: str | None = None) -> None:
        """`log("debug", data)`."""
        await self.log("debug", data, logger=logger)

    async def info(self, data: JSON, *, logger: str | None = None) -> None:
        """`log("info", data)`."""
        await self.log("info", data, logger=logger)

    async def warning(self, data: JSON, *, logger: str | None = None) -> None:
        """`log("warning", data)`."""
        await self.log("warning", data, logger=logger)

    async def error(self, data: JSON, *, logger: str | None = None) -> None:
        """`log("error", data)`."""
        await self.log("error", data, logger=logger)
