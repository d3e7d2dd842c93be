"""`subscriptions/listen`: `notifications/tasks` for the task ids a client listens to."""

# Design: the stream is bounded by what it can deliver. The acknowledgement honours only task
# ids that resolve for this caller (list-changed kinds are never honoured: this server's lists do
# not change while it runs), then each honoured task's DetailedTask is sent when the stream opens
# and whenever it changes, read from the store (any replica's changes show), until every one of
# them is terminal or gone; then the closing result. Nothing to deliver: closed at once.
from __future__ import annotations

import asyncio

import msgspec

from mrtr.errors import MissingRequiredClientCapability
from mrtr.protocol import (
    METHODS,
    SUBSCRIPTION_ID_KEY,
    UNSET,
    SubscriptionFilter,
    SubscriptionsAcknowledgedNotification,
    SubscriptionsAcknowledgedNotificationParams,
    SubscriptionsListenRequest,
    SubscriptionsListenResult,
    TaskStatusNotification,
    TaskStatusNotificationParams,
)
from mrtr.server._peer import Notifier, Peer
from mrtr.server.tasks._methods import TaskMethods, declares_tasks
from mrtr.server.tasks._records import TaskRecord

__all__ = ["TaskListener"]

_REQUIRED = METHODS["tasks/get"].required_capability() or {}
_TERMINAL = ("completed", "failed", "cancelled")


class TaskListener:
    """Serves `subscriptions/listen` for one Dispatcher; `every` is the store poll (seconds)."""

    def __init__(self, methods: TaskMethods, *, every: float = 0.25) -> None:
        self._methods = methods
        self._every = every

    async def listen(self, request: SubscriptionsListenRequest, peer: Peer,
                     sink: Notifier | None) -> SubscriptionsListenResult:
        wanted = request.params.notifications.task_ids
        if wanted is not UNSET and wanted and not declares_tasks(request.params.meta):
            raise MissingRequiredClientCapability(_REQUIRED)
        meta: dict[str, object] = {SUBSCRIPTION_ID_KEY: request.id}
        records = await self._resolve(wanted if wanted is not UNSET else [], peer)
        if sink is not None:
            honoured = SubscriptionFilter(task_ids=list(records)) if records else (
                SubscriptionFilter())
            await sink(SubscriptionsAcknowledgedNotification(
                params=SubscriptionsAcknowledgedNotificationParams(notifications=honoured,
                                                                   meta=meta)))
            await self._follow(records, peer, sink, meta)
        return SubscriptionsListenResult(meta=meta)

    async def _resolve(self, task_ids: list[str], peer: Peer) -> dict[str, TaskRecord]:
        found: dict[str, TaskRecord] = {}
        for task_id in dict.fromkeys(task_ids):
            record = await self._methods.runner.book.load(task_id)
            if record is not None and record.principal == peer.principal:
                found[task_id] = record
        return found

    async def _follow(self, records: dict[str, TaskRecord], peer: Peer, sink: Notifier,
                      meta: dict[str, object]) -> None:
        sent: dict[str, bytes] = {}
        book, runner = self._methods.runner.book, self._methods.runner
        while records:
            for task_id, record in list(records.items()):
                await runner.resume(record)  # listening is polling: take over a dead runner's
                detailed = await self._methods.detailed(record)
                fields = msgspec.structs.asdict(detailed)
                fields.pop("result_type")
                fields["meta"] = meta
                params = TaskStatusNotificationParams(**fields)
                encoded = msgspec.json.encode(params)
                if sent.get(task_id) != encoded:
                    sent[task_id] = encoded
                    await sink(TaskStatusNotification(params=params))
                if detailed.status in _TERMINAL:
                    del records[task_id]
            if not records:
                return
            await asyncio.sleep(self._every)
            for task_id in list(records):
                fresh = await book.load(task_id)
                if fresh is None:  # expired: nothing more will come
                    del records[task_id]
                else:
                    records[task_id] = fresh
