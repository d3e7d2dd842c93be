"""RunningLoop: the running loop without a getpid() per call, and never a stale one."""

from __future__ import annotations

import asyncio
import threading
from unittest import mock

import pytest

from mrtr.stores._local import RunningLoop


def test_the_loop_seen_last_is_reused_while_it_runs() -> None:
    running = RunningLoop()

    async def twice() -> tuple[asyncio.AbstractEventLoop, asyncio.AbstractEventLoop]:
        first = running.get()
        with mock.patch("asyncio.get_running_loop", side_effect=AssertionError("asked again")):
            return first, running.get()

    first, second = asyncio.run(twice())
    assert first is second


def test_each_asyncio_run_gets_its_own_loop() -> None:
    running = RunningLoop()

    async def current() -> tuple[asyncio.AbstractEventLoop, asyncio.AbstractEventLoop]:
        return running.get(), asyncio.get_running_loop()

    for _ in range(3):
        got, actual = asyncio.run(current())
        assert got is actual


def test_a_loop_in_another_thread_is_not_taken_for_this_threads() -> None:
    running = RunningLoop()
    seen: dict[str, object] = {}
    started, release = threading.Event(), threading.Event()

    async def hold() -> None:
        seen["other"] = running.get()
        started.set()
        await asyncio.get_running_loop().run_in_executor(None, release.wait)

    other = threading.Thread(target=lambda: asyncio.run(hold()))
    other.start()
    try:
        assert started.wait(5)

        async def here() -> tuple[asyncio.AbstractEventLoop, asyncio.AbstractEventLoop]:
            return running.get(), asyncio.get_running_loop()

        got, actual = asyncio.run(here())  # the other thread's loop is still running
        assert got is actual and got is not seen["other"]
    finally:
        release.set()
        other.join(5)


def test_outside_a_loop_it_raises_as_asyncio_does() -> None:
    with pytest.raises(RuntimeError):
        RunningLoop().get()
