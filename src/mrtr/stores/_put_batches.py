"""A store's put_if_absent calls of one event-loop turn, written together (PostgreSQL, Redis)."""

# Design: a round that does not act records its outcome with one put_if_absent
# (server/_ledger.py), and under load many flows' rounds finish in the same loop turn. On its
# own each call to a networked store is a connection checkout and a round trip (PostgreSQL: and
# a synchronous commit), ≈ 70-120 µs of the server's CPU at c=32. The calls of one turn go to
# `write` together instead (PostgreSQL: one statement over arrays, one transaction, one commit;
# Redis: one pipeline of the put script). What each caller gets is what its call alone would
# have got:
# - Rows go in key order, so two PostgreSQL batches that share keys (this process's, or another
#   replica's) wait for each other's rows in the same order and cannot deadlock.
# - The same key twice in one batch: the second row meets the first's, as a second call would.
# - A failed write fails every caller of its batch with StoreUnavailable; each retries, as after
#   a failed call of its own (PostgreSQL writes all rows of a batch or none). A row that fails
#   alone (Redis: an error for that command) fails its own caller only.
# - A caller cancelled before its batch is sent is left out; one cancelled later is written.
# At most MAX_ROWS rows go in one write; a larger turn is split into several. A batch is
# written by a task of its own (no caller's cancellation may stop the others' write); a call
# alone in its turn is written by its caller with `write_one`, the store's plain call.
from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from mrtr.stores._local import RunningLoop
from mrtr.stores._store import StoreUnavailable

__all__ = ["PutBatches"]

Found = bytes | None  # a row's answer: None when it was written, else the store's encoded entry
Write = Callable[[list[bytes], list[bytes], list[float]],
                 Awaitable[Sequence[Found | StoreUnavailable]]]
WriteOne = Callable[[bytes, bytes, float], Awaitable[Found]]


class _Alone:
    """A lone caller's answer from the flush: write your row yourself (`write_one`)."""


_ALONE = _Alone()
_Job = tuple[bytes, bytes, float, "asyncio.Future[Found | _Alone]"]


class PutBatches:
    """put_if_absent rows gathered per loop turn and handed to `write` together.

    `write(keys, values, expires)` writes the rows and answers each row's result in the
    order given (a StoreUnavailable for a row that failed alone), or raises StoreUnavailable
    for them all. A call alone in its turn is written by its caller with `write_one(key,
    value, expires)`, the store's plain call (no batch task: ≈ 5 µs of CPU instead of 10.5).
    `what` names the store in the reasons it gives.
    """

    MAX_ROWS = 256

    __slots__ = ("_write", "_write_one", "_what", "_pending", "_pending_loop", "_loop",
                 "_writing")

    def __init__(self, write: Write, write_one: WriteOne, what: str) -> None:
        self._write = write
        self._write_one = write_one
        self._what = what  # e.g. "postgresql put_if_absent"
        self._pending: list[_Job] | None = None  # this turn's rows, flushed at its end
        self._pending_loop: asyncio.AbstractEventLoop | None = None
        self._loop = RunningLoop()  # one getpid() fewer per call on Python 3.11
        self._writing: set[asyncio.Task[None]] = set()

    async def put(self, key: bytes, value: bytes, expires: float) -> Found:
        """This row's result once its batch committed; raises StoreUnavailable."""
        loop = self._loop.get()
        jobs = self._pending
        if jobs is None or self._pending_loop is not loop:
            # A new turn; or another loop's, whose own flush is left to it (a loop stopped
            # before its turn ended flushes when it runs again, a closed one never runs them).
            jobs = self._pending = []
            self._pending_loop = loop
            loop.call_soon(self._flush, jobs)
        future: asyncio.Future[Found | _Alone] = loop.create_future()
        jobs.append((key, value, expires, future))
        found = await future
        if isinstance(found, _Alone):  # nobody else wrote in this turn
            return await self._write_one(key, value, expires)
        return found

    def _flush(self, turn: list[_Job], *, alone: bool = True) -> None:
        if self._pending is turn:
            self._pending = None
        jobs = [job for job in turn if not job[3].done()]  # done: its caller left
        turn.clear()  # flushed once, whoever flushes it first (drain or the loop)
        if alone and len(jobs) == 1:
            jobs[0][3].set_result(_ALONE)
            return
        loop = self._loop.get()
        for start in range(0, len(jobs), self.MAX_ROWS):
            task = loop.create_task(self._send(jobs[start:start + self.MAX_ROWS]))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)

    async def _send(self, jobs: list[_Job]) -> None:
        jobs.sort(key=lambda job: job[0])
        try:
            found = await self._write([job[0] for job in jobs], [job[1] for job in jobs],
                                      [job[2] for job in jobs])
            if len(found) != len(jobs):
                raise StoreUnavailable(f"{self._what}: {len(found)} results for "
                                       f"{len(jobs)} rows")
        except StoreUnavailable as exc:
            _fail(jobs, exc.reason)
            return
        except BaseException:  # cancelled by aclose(), or a bug: no caller may hang
            _fail(jobs, f"{self._what}: the store closed while writing")
            raise
        for (_, _, _, future), value in zip(jobs, found, strict=True):
            if future.done():
                continue
            if isinstance(value, StoreUnavailable):
                future.set_exception(value)
            else:
                future.set_result(value)

    async def drain(self, timeout: float) -> None:
        """Wait up to `timeout` s for the batches being written, then cancel what is left."""
        if self._pending is not None and self._pending_loop is self._loop.get():
            self._flush(self._pending, alone=False)  # written by a task drain waits for
        writing = set(self._writing)
        if writing:
            _, left = await asyncio.wait(writing, timeout=timeout)
            for task in left:
                task.cancel()


def _fail(jobs: list[_Job], reason: str) -> None:
    for *_, future in jobs:
        if not future.done():
            future.set_exception(StoreUnavailable(reason))
