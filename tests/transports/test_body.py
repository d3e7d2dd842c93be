"""McpApp's body reading (#31): no timer for a body that is already there, the timeout for one
that is not, with the first receive() resumed under it, whatever it waits on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from mrtr.errors import MrtrError
from mrtr.http import _body
from mrtr.http._body import receive_body


def run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 10))


@pytest.fixture
def timers(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The delays of every asyncio.timeout the body reader starts."""
    started: list[float] = []
    real = asyncio.timeout

    def counting(delay: float | None) -> Any:
        started.append(delay or 0.0)
        return real(delay)

    monkeypatch.setattr(_body.asyncio, "timeout", counting)
    return started


def messages(*items: dict[str, Any], wait: float = 0.0) -> Any:
    queue = list(items)

    async def receive() -> dict[str, Any]:
        if wait:
            await asyncio.sleep(wait)
        return queue.pop(0)

    return receive


def test_31_a_body_already_received_starts_no_timer(timers: list[float]) -> None:
    receive = messages({"type": "http.request", "body": b"{}", "more_body": False})
    assert run(receive_body(receive, 100, 30.0)) == b"{}"
    assert timers == []


def test_31_a_body_the_first_receive_waits_for_is_read_under_the_timer(
    timers: list[float],
) -> None:
    receive = messages({"type": "http.request", "body": b"ab", "more_body": True},
                       {"type": "http.request", "body": b"cd", "more_body": False}, wait=0.01)
    assert run(receive_body(receive, 100, 30.0)) == b"abcd"
    assert timers == [30.0]


def test_31_a_body_in_chunks_already_there_is_read_under_the_timer(timers: list[float]) -> None:
    receive = messages({"type": "http.request", "body": b"ab", "more_body": True},
                       {"type": "http.request", "body": b"cd", "more_body": False})
    assert run(receive_body(receive, 100, 30.0)) == b"abcd"
    assert timers == [30.0]


def assert_timed_out(receive: Callable[[], Awaitable[dict[str, Any]]]) -> None:
    """The body read under a 0.05 s deadline is refused with 408, naming the deadline."""
    with pytest.raises(MrtrError) as refused:
        run(receive_body(receive, 100, 0.05))
    assert refused.value.status == 408  # type: ignore[attr-defined]
    assert b"did not arrive within 0.05 s" in refused.value.body  # type: ignore[attr-defined]


def test_31_a_first_receive_that_never_answers_times_out() -> None:
    async def receive() -> dict[str, Any]:
        await asyncio.sleep(30)
        raise AssertionError("not reached")

    assert_timed_out(receive)


def test_31_a_later_chunk_that_never_comes_times_out() -> None:
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": b"{", "more_body": True}
        await asyncio.sleep(30)
        raise AssertionError("not reached")

    assert_timed_out(receive)


def test_31_limits_and_disconnects_hold_on_both_paths() -> None:
    big = {"type": "http.request", "body": b"x" * 11, "more_body": False}
    for receive in (messages(big), messages(big, wait=0.01)):
        with pytest.raises(MrtrError) as refused:
            run(receive_body(receive, 10, 30.0))
        assert refused.value.status == 413  # type: ignore[attr-defined]
    gone = {"type": "http.disconnect"}
    assert run(receive_body(messages(gone), 10, 30.0)) is None
    assert run(receive_body(messages(gone, wait=0.01), 10, None)) is None


def test_31_a_receive_that_is_not_a_coroutine_is_awaited_as_it_is(timers: list[float]) -> None:
    async def go() -> bytes | None:
        future = asyncio.get_running_loop().create_future()
        future.set_result({"type": "http.request", "body": b"ok", "more_body": False})
        return await receive_body(lambda: future, 100, 30.0)

    assert run(go()) == b"ok"
    assert timers == [30.0]


def test_31_cancelling_the_request_while_the_first_receive_waits_cancels_it() -> None:
    closed: list[str] = []

    async def receive() -> dict[str, Any]:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            closed.append("cancelled")
            raise
        raise AssertionError("not reached")

    async def go() -> None:
        task = asyncio.ensure_future(receive_body(receive, 100, 30.0))
        await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(go())
    assert closed == ["cancelled"]
