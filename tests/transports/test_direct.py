"""The direct path of `mrtr serve`'s httptools protocol (serving/_direct.py), over real sockets.

A whole POST to McpApp's endpoint is served by DirectCycle instead of uvicorn's
RequestResponseCycle; each test checks the bytes on the wire and which cycle served them.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
from uvicorn.protocols.http.flow_control import FlowControl
from uvicorn.protocols.http.httptools_impl import RequestResponseCycle

from mrtr.http import McpApp
from mrtr.server import Context, Dispatcher, Server
from mrtr.serving import _direct
from mrtr.serving._uvicorn import protocol_class
from tests.transports.conftest import LiveServer, call, headers_for, request

app = Server("direct-tests", version="1.0.0")
BIG = 4 * 1024 * 1024  # far over the transport's write buffer high-water mark (64 KiB)


@app.tool()
async def echo(text: str) -> str:
    """Return the text."""
    return text


@app.tool()
async def big() -> str:
    """A reply far larger than a socket buffer."""
    return "x" * BIG


@app.tool()
async def nap(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return f"napped {seconds}"


@app.tool()
async def wait(marker: str) -> str:
    """Wait (no notifications, so a plain JSON reply); writes `marker` when cancelled."""
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")
        raise
    return "never"


@app.tool()
async def steps(ctx: Context) -> str:
    """Two progress notifications (an SSE stream), then the answer."""
    await ctx.report_progress(1, 2)
    await ctx.report_progress(2, 2)
    return "stepped"


@app.tool()
async def watchers(seconds: float) -> str:
    """Sleep past Exchange.WATCH_AFTER, then count the tasks waiting for a disconnect."""
    await asyncio.sleep(seconds)
    return str(sum(task.get_coro().__qualname__ == "Exchange._wait_for_disconnect"
                   for task in asyncio.all_tasks()))


@app.tool()
async def stream_then_wait(ctx: Context, marker: str) -> str:
    """One progress notification (the stream starts and is watched), then wait until cancelled;
    writes `marker` when cancelled."""
    await ctx.report_progress(1, 2)
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")
        raise
    return "never"


class Served:
    """Counts the requests each kind of cycle ran (patched into the classes' run_asgi)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.direct = 0
        self.uvicorn = 0
        direct_run = _direct.DirectCycle.run_asgi
        uvicorn_run = RequestResponseCycle.run_asgi

        async def run_direct(cycle: Any, asgi: Any) -> None:
            self.direct += 1
            await direct_run(cycle, asgi)

        async def run_uvicorn(cycle: Any, asgi: Any) -> None:
            self.uvicorn += 1
            await uvicorn_run(cycle, asgi)

        monkeypatch.setattr(_direct.DirectCycle, "run_asgi", run_direct)
        monkeypatch.setattr(RequestResponseCycle, "run_asgi", run_uvicorn)


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> Served:
    return Served(monkeypatch)


@pytest.fixture
def server() -> Iterator[LiveServer]:
    mcp = McpApp(Dispatcher(app), keepalive=0.2)
    with LiveServer(mcp, server_header=False) as live:  # as `mrtr serve`
        yield live


def raw(body: dict[str, Any], *, version: str = "1.1", **extra: str) -> bytes:
    """One whole POST /mcp in bytes."""
    data = msgspec.json.encode(body)
    headers = {"host": "127.0.0.1", **headers_for(body), **extra,
               "content-length": str(len(data))}
    head = f"POST /mcp HTTP/{version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    return head.encode() + b"\r\n" + data


class Reader:
    """Reads HTTP/1.1 replies (Content-Length or chunked) off a socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buf = bytearray()

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def _until(self, marker: bytes) -> bytes:
        while marker not in self.buf:
            self._fill()
        end = self.buf.index(marker)
        head = bytes(self.buf[:end])
        del self.buf[:end + len(marker)]
        return head

    def _exactly(self, size: int) -> bytes:
        while len(self.buf) < size:
            self._fill()
        data = bytes(self.buf[:size])
        del self.buf[:size]
        return data

    def reply(self) -> tuple[int, dict[str, str], bytes]:
        lines = self._until(b"\r\n\r\n").decode().split("\r\n")
        status = int(lines[0].split()[1])
        assert lines[0].startswith("HTTP/1.1 ")
        headers = dict(line.split(": ", 1) for line in lines[1:])
        if "content-length" in headers:
            return status, headers, self._exactly(int(headers["content-length"]))
        assert headers["transfer-encoding"] == "chunked"
        body = b""
        while size := int(self._until(b"\r\n"), 16):
            body += self._exactly(size)
            assert self._exactly(2) == b"\r\n"
        assert self._exactly(2) == b"\r\n"
        return status, headers, body

    def closed(self) -> bool:
        """The server closed the connection (after everything read so far)."""
        self.sock.settimeout(5)
        return not self.buf and self.sock.recv(1) == b""


def connect(server: LiveServer) -> tuple[socket.socket, Reader]:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    return sock, Reader(sock)


def text(body: bytes) -> str:
    result: str = msgspec.json.decode(body)["result"]["content"][0]["text"]
    return result


def test_a_whole_post_is_served_directly_and_the_connection_reused(
        server: LiveServer, served: Served) -> None:
    sock, reader = connect(server)
    with sock:
        for n in range(3):
            sock.sendall(raw(call("echo", {"text": f"hi {n}"}, id=n)))
            status, headers, body = reader.reply()
            assert status == 200
            assert text(body) == f"hi {n}"
            assert list(headers) == ["date", "content-type", "content-length"]  # as before
    assert (served.direct, served.uvicorn) == (3, 0)


def test_pipelined_requests_in_one_write_are_answered_in_order(
        server: LiveServer, served: Served) -> None:
    sock, reader = connect(server)
    with sock:  # the first takes longest: the second waits for it
        sock.sendall(raw(call("nap", {"seconds": 0.2}, id=1))
                     + raw(call("echo", {"text": "second"}, id=2))
                     + raw(request("tools/list", id=3)))
        first, second, third = reader.reply(), reader.reply(), reader.reply()
    assert text(first[2]) == "napped 0.2"
    assert text(second[2]) == "second"
    assert msgspec.json.decode(third[2])["id"] == 3
    assert (served.direct, served.uvicorn) == (3, 0)


def test_http_10_and_connection_close_get_close_and_the_socket_closes(
        server: LiveServer, served: Served) -> None:
    for data in (raw(call("echo", {"text": "old"}), version="1.0"),
                 raw(call("echo", {"text": "old"}), connection="close")):
        sock, reader = connect(server)
        with sock:
            sock.sendall(data)
            status, headers, body = reader.reply()
            assert (status, text(body)) == (200, "old")
            assert headers["connection"] == "close"
            assert reader.closed()
    assert (served.direct, served.uvicorn) == (2, 0)


def test_http_10_keep_alive_is_not_kept(server: LiveServer) -> None:
    sock, reader = connect(server)  # as uvicorn: an HTTP/1.0 connection is never kept
    with sock:
        sock.sendall(raw(call("echo", {"text": "a"}), version="1.0", connection="keep-alive"))
        assert reader.reply()[1]["connection"] == "close"
        assert reader.closed()


def test_a_client_gone_mid_handler_cancels_it(server: LiveServer, served: Served,
                                              tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    sock, _ = connect(server)
    with sock:
        sock.sendall(raw(call("wait", {"marker": str(marker)})))
        time.sleep(0.3)  # past Exchange.WATCH_AFTER: the watcher waits on the cycle
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.read_text() == "cancelled"
    assert served.direct == 1


def test_a_watched_direct_request_has_a_timer_not_a_task(server: LiveServer,
                                                         served: Served) -> None:
    # Past WATCH_AFTER the request is watched (test_a_client_gone_mid_handler_cancels_it
    # shows the disconnect still cancels it); over the direct path no task waits for that.
    sock, reader = connect(server)
    with sock:
        sock.sendall(raw(call("watchers", {"seconds": 0.3})))
        assert text(reader.reply()[2]) == "0"
    assert served.direct == 1


def test_the_deadline_holds_over_the_direct_path(served: Served, tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    with LiveServer(McpApp(Dispatcher(app), request_timeout=0.3), server_header=False) as live:
        sock, reader = connect(live)
        with sock:
            began = time.monotonic()
            sock.sendall(raw(call("wait", {"marker": str(marker)}, id=7)))
            status, _, body = reader.reply()
            took = time.monotonic() - began
    assert status == 500 and 0.25 <= took < 5
    reply = msgspec.json.decode(body)
    assert (reply["id"], reply["error"]["code"]) == (7, -32603)
    assert marker.read_text() == "cancelled"
    assert served.direct == 1


def test_a_slow_reader_gets_every_byte_of_large_pipelined_replies(
        server: LiveServer, served: Served, monkeypatch: pytest.MonkeyPatch) -> None:
    paused = []
    pause = FlowControl.pause_writing

    def spy(flow: FlowControl) -> None:
        paused.append(True)
        pause(flow)

    monkeypatch.setattr(FlowControl, "pause_writing", spy)
    sock, reader = connect(server)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    with sock:
        sock.sendall(raw(call("big", id=1)) + raw(call("big", id=2))
                     + raw(call("echo", {"text": "after"}, id=3)))
        time.sleep(0.5)  # the server's writes pile up and pause (flow control)
        replies = [reader.reply() for _ in range(3)]
    assert [text(body) for _, _, body in replies[:2]] == ["x" * BIG] * 2
    assert text(replies[2][2]) == "after"
    assert paused  # the transport's buffer filled: the later writes waited for it to drain
    assert served.direct == 3


def test_a_stream_is_chunked_over_the_direct_path(server: LiveServer, served: Served) -> None:
    sock, reader = connect(server)
    with sock:
        sock.sendall(raw(call("steps", extra_meta={"progressToken": "p"})))
        status, headers, body = reader.reply()
        assert (status, headers["content-type"]) == (200, "text/event-stream")
        assert body.count(b"data: ") == 3
        assert b'"stepped"' in body
        sock.sendall(raw(call("echo", {"text": "next"})))  # still usable afterwards
        assert text(reader.reply()[2]) == "next"
    assert served.direct == 2


def test_a_client_gone_mid_stream_cancels_the_handler(server: LiveServer, served: Served,
                                                     tmp_path: Path) -> None:
    # A stream is watched from its first event, whatever WATCH_AFTER is.
    marker = tmp_path / "cancelled"
    sock, reader = connect(server)
    with sock:
        sock.sendall(raw(call("stream_then_wait", {"marker": str(marker)},
                              extra_meta={"progressToken": "p"})))
        assert b"text/event-stream" in reader._until(b"\r\n\r\n")  # the head
        assert b"notifications/progress" in reader._until(b"\n\n")  # the first event
    deadline = time.monotonic() + 5
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.read_text() == "cancelled"
    assert served.direct == 1


def test_a_body_still_arriving_takes_uvicorns_cycle(server: LiveServer, served: Served) -> None:
    data = raw(call("echo", {"text": "slowly"}))
    sock, reader = connect(server)
    with sock:
        sock.sendall(data[:-5])
        time.sleep(0.2)
        sock.sendall(data[-5:])
        status, _, body = reader.reply()
        assert (status, text(body)) == (200, "slowly")
    assert (served.direct, served.uvicorn) == (0, 1)


def test_other_requests_take_uvicorns_cycle(server: LiveServer, served: Served) -> None:
    sock, reader = connect(server)
    with sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: 127.0.0.1\r\n\r\n")
        assert reader.reply()[0] == 200
        sock.sendall(raw(call("echo", {"text": "x"}), expect="100-continue"))
        assert reader._until(b"\r\n\r\n") == b"HTTP/1.1 100 Continue"
        assert text(reader.reply()[2]) == "x"
    assert served.direct == 0
    assert served.uvicorn == 2


def test_graceful_shutdown_waits_for_a_direct_request(served: Served) -> None:
    mcp = McpApp(Dispatcher(app))
    live = LiveServer(mcp)
    with live:
        sock, reader = connect(live)
        with sock:
            sock.sendall(raw(call("nap", {"seconds": 0.5})))
            time.sleep(0.1)
            live.server.should_exit = True  # as SIGTERM does
            status, headers, body = reader.reply()
            assert (status, text(body)) == (200, "napped 0.5")
            assert headers["connection"] == "close"  # shutdown ends keep-alive
            assert reader.closed()
    assert served.direct == 1


def test_limit_concurrency_still_refuses(served: Served) -> None:
    mcp = McpApp(Dispatcher(app))
    with LiveServer(mcp, limit_concurrency=2) as live:  # connections + tasks
        hold, hold_reader = connect(live)
        hold.sendall(raw(call("nap", {"seconds": 0.5})))
        time.sleep(0.1)
        other, reader = connect(live)
        with hold, other:
            other.sendall(raw(call("echo", {"text": "x"})))
            assert reader.reply()[0] == 503
            assert hold_reader.reply()[0] == 200
    assert served.direct == 1


def test_a_wrapped_app_is_not_served_directly(served: Served) -> None:
    mcp = McpApp(Dispatcher(app))

    async def wrapper(scope: Any, receive: Any, send: Any) -> None:
        await mcp(scope, receive, send)

    with LiveServer(wrapper, lifespan="off") as live:
        sock, reader = connect(live)
        with sock:
            sock.sendall(raw(call("echo", {"text": "wrapped"})))
            assert text(reader.reply()[2]) == "wrapped"
    assert (served.direct, served.uvicorn) == (0, 1)


def test_the_test_servers_run_the_direct_path(served: Served) -> None:
    """LiveServer's default protocol is `mrtr serve`'s: the transport tests go through here."""
    with LiveServer(McpApp(Dispatcher(app))) as live:
        sock, reader = connect(live)
        with sock:
            sock.sendall(raw(call("echo", {"text": "x"})))
            assert reader.reply()[0] == 200
    assert served.direct == 1


class Recorder(asyncio.Transport):
    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.reading = True

    def pause_reading(self) -> None:
        self.reading = False

    def resume_reading(self) -> None:
        self.reading = True

    def write(self, data: Any) -> None:
        self.writes.append(bytes(data))

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ("127.0.0.1", 1), "peername": ("127.0.0.1", 2)}.get(name, default)

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        self.writes.append(b"<closed>")


def test_a_streams_head_is_written_at_once_a_whole_replys_with_its_body() -> None:
    """A 2025 session's SSE reply sends its start and may then wait long for its first event."""
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    async def scenario() -> None:
        config = Config(McpApp(Dispatcher(app)), proxy_headers=False, lifespan="off")
        config.load()
        state = ServerState()
        state.default_headers = [(b"date", b"today")]
        protocol: Any = protocol_class("httptools")(config, state, {}, None)
        transport = Recorder()
        protocol.connection_made(transport)
        scope = {"method": "POST", "http_version": "1.1", "path": "/mcp", "raw_path": b"/mcp",
                 "query_string": b"", "client": ("127.0.0.1", 2)}  # the access log reads them
        stream = _direct.DirectCycle(protocol, scope, b"", True)
        await stream.send({"type": "http.response.start", "status": 200,
                           "headers": [(b"content-type", b"text/event-stream")]})
        assert transport.writes == [b"HTTP/1.1 200 OK\r\ndate: today\r\ncontent-type: "
                                    b"text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"]
        await stream.send({"type": "http.response.body", "body": b"data: 1\n\n",
                           "more_body": True})
        await stream.send({"type": "http.response.body", "body": b""})
        assert transport.writes[1:] == [b"9\r\ndata: 1\n\n\r\n", b"0\r\n\r\n"]
        transport.writes.clear()
        whole = _direct.DirectCycle(protocol, scope, b"", False)
        await whole.send({"type": "http.response.start", "status": 202,
                          "headers": [(b"content-length", b"2")]})
        assert transport.writes == []
        await whole.send({"type": "http.response.body", "body": b"{}"})
        assert transport.writes == [b"HTTP/1.1 202 Accepted\r\ndate: today\r\n"
                                    b"content-length: 2\r\nconnection: close\r\n\r\n{}",
                                    b"<closed>"]

    asyncio.run(scenario())


def _protocol(transport: Recorder) -> Any:
    from uvicorn.config import Config
    from uvicorn.server import ServerState

    config = Config(McpApp(Dispatcher(app)), proxy_headers=False, lifespan="off",
                    access_log=False)
    config.load()
    state = ServerState()
    state.default_headers = [(b"date", b"today")]
    protocol: Any = protocol_class("httptools")(config, state, {}, asyncio.get_running_loop())
    protocol.connection_made(transport)
    return protocol


def test_mcp_app_takes_the_body_and_writes_the_reply_through_the_direct() -> None:
    """The cycle hands itself to McpApp's direct entry (no extensions dict in the scope, so
    no reference cycle outlives the request); McpApp reads no `http.request` message and
    writes head and body in one write."""

    async def scenario() -> None:
        transport = Recorder()
        protocol = _protocol(transport)
        received: list[Any] = []
        real_receive = _direct.DirectCycle.receive

        async def counted(cycle: Any) -> Any:
            message = await real_receive(cycle)
            received.append(message["type"])
            return message

        _direct.DirectCycle.receive = counted  # type: ignore[method-assign]
        try:
            protocol.data_received(raw(call("echo", {"text": "hi"})))
            scope = protocol.scope
            for _ in range(20):
                await asyncio.sleep(0)
        finally:
            _direct.DirectCycle.receive = real_receive  # type: ignore[method-assign]
        assert "extensions" not in scope
        assert received == []
        assert len(transport.writes) == 1
        head, _, body = transport.writes[0].partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200 OK\r\n")
        assert b"content-length: %d" % len(body) in head
        assert msgspec.json.decode(body)["result"]["content"][0]["text"] == "hi"

    asyncio.run(scenario())


@pytest.mark.parametrize("failure", ["raises", "answers nothing"])
def test_31_the_direct_entry_failing_is_uvicorns_500_and_log_line(
    failure: str, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """DirectCycle.run_asgi calls McpApp.serve_direct rather than the ASGI app; what uvicorn's
    run_asgi does when the app fails (its log line, a 500, the request counted) still holds."""

    async def broken(self: McpApp, scope: Any, receive: Any, send: Any, direct: Any) -> None:
        if failure == "raises":
            raise RuntimeError("a bug below McpApp's own handling")

    monkeypatch.setattr(McpApp, "serve_direct", broken)

    logged: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: logged.append(record.getMessage())  # type: ignore[method-assign]
    logger = logging.getLogger("uvicorn.error")  # uvicorn's, which does not reach the root

    async def scenario() -> list[bytes]:
        transport = Recorder()
        protocol = _protocol(transport)  # configures uvicorn's loggers: the handler goes after
        logger.addHandler(handler)
        protocol.data_received(raw(call("echo", {"text": "hi"})))
        assert isinstance(protocol.cycle, _direct.DirectCycle)
        for _ in range(20):
            await asyncio.sleep(0)
        assert protocol.server_state.total_requests == 1
        return transport.writes

    try:
        writes = asyncio.run(scenario())
    finally:
        logger.removeHandler(handler)
    assert writes[0].startswith(b"HTTP/1.1 500 Internal Server Error") and b"connection: close"\
        in writes[0] and writes[1:] == [b"<closed>"]
    expected = ("Exception in ASGI application" if failure == "raises"
                else "ASGI callable returned without starting response.")
    assert any(expected in line for line in logged)


def test_a_direct_whose_client_went_away_writes_nothing() -> None:
    from mrtr.http._exchange import DIRECT

    async def scenario() -> None:
        transport = Recorder()
        protocol = _protocol(transport)
        body = msgspec.json.encode(call("echo", {"text": "hi"}))
        scope = {"type": "http", "method": "POST", "path": "/mcp", "raw_path": b"/mcp",
                 "query_string": b"", "http_version": "1.1", "root_path": "",
                 "headers": [(k.encode(), v.encode()) for k, v in
                             {**headers_for(call("echo", {"text": "hi"})),
                              "host": "127.0.0.1", "content-length": str(len(body))}.items()]}
        cycle = _direct.DirectCycle(protocol, scope, body, True)
        cycle.disconnected = True
        scope["extensions"] = {DIRECT: cycle}
        await protocol.app(scope, cycle.receive, cycle.send)
        assert transport.writes == []
        assert cycle.take_body() is None

    asyncio.run(scenario())


def test_a_direct_reply_waits_for_a_full_buffer_to_drain() -> None:
    """While the transport asked to pause, a whole reply is not written at once: McpApp's
    Exchange sends it as the two messages, which wait for the drain, then the same bytes."""
    from mrtr.http._exchange import Exchange

    async def scenario() -> None:
        transport = Recorder()
        protocol = _protocol(transport)
        scope = {"method": "POST", "http_version": "1.1", "path": "/mcp", "raw_path": b"/mcp",
                 "query_string": b"", "client": ("127.0.0.1", 2)}
        cycle = _direct.DirectCycle(protocol, scope, b"", True)
        protocol.pause_writing()
        assert cycle.reply(200, [(b"content-length", b"2")], b"{}") is False
        assert transport.writes == [] and not cycle.response_started
        exchange = Exchange(protocol.app, cycle.receive, cycle.send, cycle)
        task = asyncio.ensure_future(exchange.respond(200, b"{}"))
        await asyncio.sleep(0)
        assert transport.writes == []
        protocol.resume_writing()
        await task
        assert transport.writes == [b"HTTP/1.1 200 OK\r\ndate: today\r\ncontent-type: "
                                    b"application/json\r\ncontent-length: 2\r\n\r\n{}"]
        assert cycle.response_complete
        assert cycle.reply(200, [(b"content-length", b"2")], b"{}") is False  # once only:
        with pytest.raises(RuntimeError):  # a second reply errs as a second start message would
            await exchange.respond(200, b"{}")

    asyncio.run(scenario())


def test_a_cycle_calls_its_watcher_once_on_a_disconnect_or_at_once_if_gone() -> None:
    """The protocol's own connection_lost calls the watcher McpApp left, once; one left after
    the client went is called soon; a forgotten one, or one after the reply's end, never."""
    async def scenario() -> None:
        heard: list[str] = []

        def cycle_of(protocol: Any) -> _direct.DirectCycle:
            cycle = _direct.DirectCycle(protocol, {}, b"", True)
            protocol.cycle = cycle
            return cycle

        transport = Recorder()
        protocol = _protocol(transport)
        cycle = cycle_of(protocol)
        protocol.flow.pause_reading()
        cycle.on_disconnect(lambda: heard.append("first"))
        assert transport.reading  # a close is seen only while reading
        protocol.connection_lost(None)
        cycle.message_event.set()
        assert heard == ["first"] and cycle.disconnected
        cycle.on_disconnect(lambda: heard.append("late"))  # already gone: soon, from the loop
        assert heard == ["first"]
        await asyncio.sleep(0)
        assert heard == ["first", "late"]

        protocol = _protocol(Recorder())
        quiet = cycle_of(protocol)
        quiet.on_disconnect(lambda: heard.append("forgotten"))
        quiet.on_disconnect(None)
        protocol.connection_lost(None)
        assert heard == ["first", "late"]
        with pytest.raises(TypeError):
            quiet.message_event = asyncio.Event()

        protocol = _protocol(Recorder())
        answered = cycle_of(protocol)
        answered.on_disconnect(lambda: heard.append("answered"))
        assert answered.reply(200, [(b"content-length", b"2")], b"{}")
        protocol.connection_lost(None)
        assert heard == ["first", "late"] and not answered.disconnected

    asyncio.run(scenario())


def test_a_watched_direct_request_leaves_no_timer_or_callback_behind(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A request watched through its Direct: once answered, the cycle holds no callback (so
    no Exchange) and the deadline's timer is cancelled."""
    from mrtr.http._exchange import Exchange

    monkeypatch.setattr(Exchange, "WATCH_AFTER", 0.0)

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        timers: list[asyncio.TimerHandle] = []
        call_at = loop.call_at

        def spied(when: float, callback: Any, *args: Any, **kw: Any) -> asyncio.TimerHandle:
            handle = call_at(when, callback, *args, **kw)
            if args == ("timeout",):
                timers.append(handle)
            return handle

        monkeypatch.setattr(loop, "call_at", spied)
        transport = Recorder()
        protocol = _protocol(transport)
        protocol.data_received(raw(call("nap", {"seconds": 0.05})))
        cycle = protocol.cycle
        for _ in range(100):
            if cycle.response_complete:
                break
            await asyncio.sleep(0.01)
        assert text(transport.writes[0].partition(b"\r\n\r\n")[2]) == "napped 0.05"
        assert len(timers) == 1 and timers[0].cancelled()
        assert cycle._event is not None and cycle._event.hear is None  # watched, then let go

    asyncio.run(scenario())
