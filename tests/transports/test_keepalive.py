"""One keep-alive timer per idle spell (#31): mrtr serve's httptools protocol, in process.

uvicorn armed a timer at every response and cancelled it at the next request; LazyKeepAlive
(serving/_keepalive.py) keeps one armed across requests. Each test runs a real uvicorn on
127.0.0.1 with the bounded httptools protocol and talks to it over raw sockets: an idle
connection still closes at the keep-alive time, a busy one never does, pipelined requests are
all answered, and a connection that made many requests armed a timer a few times, not once per
request.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from mrtr.http import McpApp
from mrtr.server import Dispatcher
from mrtr.serving._keepalive import LazyKeepAlive
from tests.transports import apps
from tests.transports.conftest import request, run
from tests.transports.dribble import HOST, bounded_server, read_response

IDLE = 0.6  # seconds: the keep-alive time under test
SLACK = 1.0  # seconds a busy machine may add to it
BODY = msgspec.json.encode(request("server/discover"))


def post() -> bytes:
    return (f"POST /mcp HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\n"
            f"Mcp-Method: server/discover\r\nContent-Length: {len(BODY)}\r\n\r\n").encode() + BODY


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    app = McpApp(Dispatcher(apps.app), body_timeout=None)
    with bounded_server(app, "httptools", idle_timeout=IDLE) as bound:
        yield bound


@pytest.fixture
def fired(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Loop times at which a connection's keep-alive timer fired."""
    seen: list[float] = []
    due = LazyKeepAlive._keep_alive_due

    def counted(self: Any) -> None:
        seen.append(self.loop.time())
        due(self)

    monkeypatch.setattr(LazyKeepAlive, "_keep_alive_due", counted)
    return seen


async def requests(port: int, count: int, every: float, *, pipelined: bool = False,
                   ) -> tuple[list[bytes], float | None]:
    """`count` requests on one connection, `every` s apart (or all at once); each response,
    and the seconds from the last one to the server closing (None: still open after 5 s)."""
    loop = asyncio.get_running_loop()
    reader, writer = await asyncio.open_connection(HOST, port)
    answers: list[bytes] = []
    if pipelined:
        writer.write(post() * count)
    for i in range(count):
        if not pipelined:
            if i:
                await asyncio.sleep(every)
            writer.write(post())
        answers.append(await read_response(reader))
    last = loop.time()
    try:
        async with asyncio.timeout(5):
            closed = await reader.read(1) == b""
    except TimeoutError:
        closed = False
    writer.close()
    return answers, (loop.time() - last if closed else None)


def test_31_an_idle_connection_closes_at_the_keep_alive_time(port: int) -> None:
    answers, after = run(requests(port, 1, 0.0))
    assert answers[0].startswith(b"HTTP/1.1 200 ")
    assert after is not None and IDLE - 0.1 <= after <= IDLE + SLACK


def test_31_a_busy_connection_stays_open_and_arms_a_timer_a_few_times(
    port: int, fired: list[float],
) -> None:
    # 12 requests 0.1 s apart: 1.2 s, twice the keep-alive time; uvicorn armed 12 timers.
    answers, after = run(requests(port, 12, 0.1))
    assert all(a.startswith(b"HTTP/1.1 200 ") for a in answers)
    assert after is not None and after <= IDLE + SLACK  # idle at the end: closed again
    assert 1 <= len(fired) <= 6, fired  # ~3: at 0.6 s, 1.2 s and the close


def test_31_a_connection_that_goes_idle_again_gets_the_rest_of_its_time(port: int) -> None:
    # Idle for most of the keep-alive time, one more request, idle again: it closes one whole
    # keep-alive time after the last response, not at the first timer.
    answers, after = run(requests(port, 2, IDLE * 0.7))
    assert all(a.startswith(b"HTTP/1.1 200 ") for a in answers)
    assert after is not None and IDLE - 0.1 <= after <= IDLE + SLACK


def test_31_pipelined_requests_are_all_answered_in_order(port: int) -> None:
    answers, after = run(requests(port, 5, 0.0, pipelined=True))
    assert len(answers) == 5 and all(a.startswith(b"HTTP/1.1 200 ") for a in answers)
    assert after is not None and after <= IDLE + SLACK
