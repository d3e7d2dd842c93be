"""Worker: one private thread running blocking calls in order, answering on the event loop."""

# Design: a SimpleQueue of (loop, future, fn) and one daemon thread. The thread drains every job
# that is waiting, runs them in order, then wakes each loop once for the whole batch
# (call_soon_threadsafe), so under concurrency a store call costs a fraction of a loop wake-up
# instead of run_in_executor's concurrent Future, wrap_future chain and one wake-up per call.
from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["settle", "Worker"]

T = TypeVar("T")
_Job = tuple[asyncio.AbstractEventLoop, "asyncio.Future[Any]", Callable[[], Any]]
_Done = tuple["asyncio.Future[Any]", Any, BaseException | None]


class Worker:
    """Runs `fn()` on its own thread (started on first use); `stop()` ends it after the queue."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._jobs: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def submit(self, fn: Callable[[], T]) -> asyncio.Future[T]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[T] = loop.create_future()
        if self._thread is None:
            self._thread = threading.Thread(target=_serve, args=(self._jobs,), name=self._name,
                                            daemon=True)
            self._thread.start()
        self._jobs.put((loop, future, fn))
        return future

    def stop(self) -> None:
        if self._thread is not None:  # the old thread finishes its own queue, then ends
            self._jobs.put(None)
            self._jobs = queue.SimpleQueue()
            self._thread = None


def _serve(jobs: queue.SimpleQueue[_Job | None]) -> None:
    while True:
        batch = [jobs.get()]
        while True:
            try:
                batch.append(jobs.get_nowait())
            except queue.Empty:
                break
        done: dict[asyncio.AbstractEventLoop, list[_Done]] = {}
        stopping = False
        for job in batch:
            if job is None:
                stopping = True
                continue
            loop, future, fn = job
            try:
                done.setdefault(loop, []).append((future, fn(), None))
            except BaseException as exc:  # delivered to the awaiting coroutine
                done.setdefault(loop, []).append((future, None, exc))
        for loop, results in done.items():
            try:
                loop.call_soon_threadsafe(settle, results)
            except RuntimeError:  # the loop closed: nobody awaits these any more
                pass
        if stopping:
            return


def settle(results: list[_Done]) -> None:
    """Hand each waiting future its value or exception (on the loop that owns the futures)."""
    for future, value, exc in results:
        if future.done():  # the caller timed out (cancelled), or another path settled it
            continue
        if exc is not None:
            future.set_exception(exc)
        else:
            future.set_result(value)
