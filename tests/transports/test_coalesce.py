"""Replies of one loop turn written together (serving/_coalesce.py) on `mrtr serve`'s direct path.

A direct whole reply is held to the start of the next loop turn while other requests are in
flight; the tests check that nothing is lost or reordered on the way: what uvicorn writes
later, a shutdown, a keep-alive close, a closed transport, pipelined requests on real sockets.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from mrtr.http import McpApp
from mrtr.server import Dispatcher
from mrtr.serving import _coalesce
from mrtr.serving._coalesce import Replies
from mrtr.serving._direct import DirectCycle
from tests.transports.conftest import LiveServer, call
from tests.transports.test_direct import Recorder, _protocol, app, connect, raw, text

SCOPE = {"method": "POST", "http_version": "1.1", "path": "/mcp", "raw_path": b"/mcp",
         "query_string": b"", "client": ("127.0.0.1", 2)}
WHOLE = b"HTTP/1.1 200 OK\r\ndate: today\r\ncontent-length: 2\r\n\r\n{}"


class Closing(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.gone = False

    def is_closing(self) -> bool:
        return self.gone


def test_replies_are_held_to_the_next_turn_in_order_one_write_per_transport() -> None:
    async def scenario() -> None:
        replies = Replies(asyncio.get_running_loop())
        first, second = Recorder(), Recorder()
        replies.later(first, b"a")
        replies.later(second, b"x")
        replies.later(first, b"b")
        assert first.writes == second.writes == [] and len(replies) == 2
        await asyncio.sleep(0)
        assert (first.writes, second.writes, len(replies)) == ([b"ab"], [b"x"], 0)

    asyncio.run(scenario())


def test_now_writes_what_is_held_first_and_the_turn_does_not_write_it_again() -> None:
    async def scenario() -> None:
        replies = Replies(asyncio.get_running_loop())
        transport = Recorder()
        replies.later(transport, b"held ")
        replies.now(transport, b"now")
        assert transport.writes == [b"held now"]
        replies.now(transport)  # nothing held, nothing given: no write
        await asyncio.sleep(0)
        assert transport.writes == [b"held now"]

    asyncio.run(scenario())


def test_a_transport_closed_before_the_turn_gets_nothing() -> None:
    async def scenario() -> None:
        replies = Replies(asyncio.get_running_loop())
        gone, kept = Closing(), Recorder()
        replies.later(gone, b"lost")
        replies.later(kept, b"kept")
        gone.gone = True  # the client went: uvicorn too drops writes to a closed transport
        await asyncio.sleep(0)
        assert (gone.writes, kept.writes) == ([], [b"kept"])

    asyncio.run(scenario())


class State:
    """Stands for uvicorn's ServerState, which every connection of one server shares."""


def test_a_server_has_one_replies_on_its_loop() -> None:
    async def scenario(state: State) -> Replies:
        replies = _coalesce.replies_of(state, asyncio.get_running_loop())
        assert _coalesce.replies_of(state, asyncio.get_running_loop()) is replies
        assert _coalesce.replies_of(State(), asyncio.get_running_loop()) is not replies
        return replies

    state = State()
    first = asyncio.run(scenario(state))
    assert asyncio.run(scenario(state)) is not first  # a server run again on a new loop


def _busy_cycle(protocol: Any, *, others: int, keep_alive: bool = True) -> DirectCycle:
    """A cycle with `others` requests of other connections in flight beside its own."""
    protocol.tasks.clear()
    protocol.tasks.update(object() for _ in range(others + 1))
    return DirectCycle(protocol, SCOPE, b"", keep_alive)


def test_a_reply_is_held_only_while_other_requests_are_in_flight() -> None:
    async def scenario() -> None:
        transport = Recorder()
        protocol = _protocol(transport)
        assert _busy_cycle(protocol, others=0).reply(200, [(b"content-length", b"2")], b"{}")
        assert transport.writes == [WHOLE]  # alone: written at once, no turn waited for
        transport.writes.clear()
        assert _busy_cycle(protocol, others=1).reply(200, [(b"content-length", b"2")], b"{}")
        assert transport.writes == [] and len(protocol.replies) == 1
        await asyncio.sleep(0)
        assert transport.writes == [WHOLE]

    asyncio.run(scenario())


def test_a_closing_connections_reply_is_written_before_it_closes() -> None:
    async def scenario() -> None:
        transport = Recorder()
        protocol = _protocol(transport)
        cycle = _busy_cycle(protocol, others=3, keep_alive=False)
        cycle.reply(200, [(b"content-length", b"2")], b"{}")
        assert transport.writes == [WHOLE.replace(b"\r\n\r\n", b"\r\nconnection: close\r\n\r\n"),
                                    b"<closed>"]

    asyncio.run(scenario())


@pytest.mark.parametrize("event", ["shutdown", "keep-alive timeout", "more bytes"])
def test_what_uvicorn_writes_or_closes_next_goes_after_the_held_reply(event: str) -> None:
    async def scenario() -> None:
        transport = Recorder()
        protocol = _protocol(transport)
        _busy_cycle(protocol, others=2).reply(200, [(b"content-length", b"2")], b"{}")
        assert transport.writes == []
        if event == "shutdown":
            protocol.shutdown()
            assert transport.writes == [WHOLE, b"<closed>"]
        elif event == "keep-alive timeout":
            protocol.timeout_keep_alive_handler()
            assert transport.writes == [WHOLE, b"<closed>"]
        else:  # bytes uvicorn cannot parse: its 400 follows the reply
            protocol.data_received(b"NOT HTTP\r\n\r\n")
            assert transport.writes[0] == WHOLE
            assert transport.writes[1].startswith(b"HTTP/1.1 400 ")
        await asyncio.sleep(0)
        assert transport.writes.count(WHOLE) == 1

    asyncio.run(scenario())


@pytest.fixture
def server() -> Iterator[LiveServer]:
    with LiveServer(McpApp(Dispatcher(app)), server_header=False) as live:
        yield live


@pytest.fixture
def held(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many replies were held for the next turn (so the tests below cannot pass without)."""
    count = [0]
    later = Replies.later

    def counted(self: Replies, transport: Any, data: bytes) -> None:
        count[0] += 1
        later(self, transport, data)

    monkeypatch.setattr(Replies, "later", counted)
    return count


def test_pipelined_replies_held_behind_a_slow_request_come_back_whole_and_in_order(
        server: LiveServer, held: list[int]) -> None:
    slow, slow_reader = connect(server)
    sock, reader = connect(server)
    with slow, sock:
        slow.sendall(raw(call("nap", {"seconds": 0.5}, id=0)))
        sock.sendall(b"".join(raw(call("echo", {"text": f"n{n}"}, id=n)) for n in range(1, 6)))
        replies = [reader.reply() for _ in range(5)]
        assert slow_reader.reply()[0] == 200
    assert [msgspec.json.decode(body)["id"] for _, _, body in replies] == [1, 2, 3, 4, 5]
    assert [text(body) for _, _, body in replies] == [f"n{n}" for n in range(1, 6)]
    assert held[0] >= 5


def test_many_connections_at_once_each_get_their_own_replies(
        server: LiveServer, held: list[int], tmp_path: Path) -> None:
    failures: list[str] = []
    slow, _ = connect(server)  # in flight all along: every reply below is held
    slow.sendall(raw(call("wait", {"marker": str(tmp_path / "cancelled")}, id=0)))

    def client(n: int) -> None:
        sock, reader = connect(server)
        with sock:
            for i in range(20):
                sock.sendall(raw(call("echo", {"text": f"{n}.{i}"}, id=i)))
                status, _, body = reader.reply()
                if status != 200 or text(body) != f"{n}.{i}":
                    failures.append(f"{n}.{i}: {status} {body[:80]!r}")

    threads = [threading.Thread(target=client, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    slow.close()  # the client goes: its handler is cancelled
    assert failures == []
    assert held[0] >= 16 * 20
