"""The task sweep: each replica adopts tasks whose runner died, frees their slots and purges
expired entries, without waiting for a client to ask (#28)."""

# Design: every `sweep_every` seconds (TaskPolicy; lease/2 by default) one bounded pass asks the
# store for at most `batch` run leases that lapsed (Store.lapsed reads its index: no scan), then
# for each takes the lease itself first (a claim: atomic, so two sweeping replicas never adopt
# one task, and a lease another replica just took is never dropped) and decides with the lease
# held (TaskRunner.adopt): an ended task's slot is freed (a crash between its end and its slot),
# a parked one is left parked (an answer replays it), a working one runs here. Then up to
# _PURGE expired entries are deleted (Store.purge). A pass costs two store operations when
# nothing is due, whatever the number of tasks. A lapsed lease is adopted within lease/2 of
# lapsing, so within 2 x lease of its runner's death. Started and stopped with the app's
# lifespan (McpApp), only for servers with task tools; a failing pass is logged and retried.
from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mrtr.server.tasks._runner import TaskRunner

__all__ = ["TaskSweep"]

_PURGE = 500  # expired entries deleted per pass at most


class TaskSweep:
    """The background sweep of one replica's TaskRunner."""

    def __init__(self, runner: TaskRunner, *, batch: int = 16) -> None:
        self._runner = runner
        self.batch = batch
        policy = runner.book.policy
        self.every = policy.sweep_every if policy.sweep_every is not None else policy.lease / 2
        self._task: asyncio.Task[None] | None = None
        self.adopted = 0  # tasks this sweep took over, since it started

    async def once(self) -> int:
        """One pass; the number of tasks adopted."""
        runner, adopted = self._runner, 0
        for task_id in await runner.book.lapsed(self.batch):
            if task_id in runner.live:
                continue
            if await runner.adopt(task_id):
                adopted += 1
        await runner.book.store.purge(most=_PURGE)
        self.adopted += adopted
        return adopted

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.every)
            try:
                await self.once()
            except Exception as exc:  # StoreUnavailable and the like: next pass
                self._runner.log.warning("task sweep failed: %r", exc)
