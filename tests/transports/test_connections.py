"""Deadlines for a request's headers and body (#26): mrtr serve's uvicorn protocols, in process.

Each test runs a real uvicorn on 127.0.0.1 with the bounded protocol of both parsers and talks
to it over raw sockets, a byte at a time where the point is a slow client.
"""

from __future__ import annotations

import asyncio
import dataclasses
import pickle
import re
from typing import Any

import httpx
import msgspec
import pytest

from mrtr.cli import main
from mrtr.http import McpApp
from mrtr.server import Dispatcher
from mrtr.serving import ConnectionLimits, _serve
from mrtr.serving._connections import MAX_HEAD_BYTES
from mrtr.serving._uvicorn import BoundedConfig, protocol_class
from tests.transports import apps
from tests.transports.conftest import asgi_client, post_args, request, run
from tests.transports.dribble import HOST, bounded_server, dribble, head, read_response

PARSERS = ["httptools", "h11"]
DISCOVER = msgspec.json.encode(request("server/discover"))
SHORT = 0.6  # seconds: the deadline under test
SLACK = 1.0  # seconds a busy machine may add to it


def mcp_app() -> McpApp:
    # body_timeout=None, as mrtr serve builds it: only the protocol's deadline is under test.
    return McpApp(Dispatcher(apps.app), body_timeout=None)


def closed_near(after: float | None, deadline: float) -> bool:
    return after is not None and deadline - 0.1 <= after <= deadline + SLACK


@pytest.fixture(scope="module", params=PARSERS)
def port(request: pytest.FixtureRequest) -> Any:
    with bounded_server(mcp_app(), request.param, header_timeout=SHORT, body_timeout=SHORT,
                        idle_timeout=5.0) as bound:
        yield bound


def test_26_a_client_that_sends_nothing_is_closed_at_the_header_deadline(port: int) -> None:
    seen = run(dribble(port))
    assert closed_near(seen.after, SHORT) and seen.received == b""


def test_26_headers_dribbled_get_408_at_the_header_deadline(port: int) -> None:
    seen = run(dribble(port, drip=head(), every=0.1))
    assert closed_near(seen.after, SHORT)
    assert seen.status == 408 and b"headers did not arrive within 0.6 s" in seen.received


def test_26_a_body_dribbled_gets_408_at_the_body_deadline(port: int) -> None:
    seen = run(dribble(port, head(length=len(DISCOVER)), DISCOVER, every=0.1))
    assert closed_near(seen.after, SHORT)
    assert seen.status == 408 and b"body did not arrive within 0.6 s" in seen.received


def test_26_a_request_sent_in_pieces_within_the_deadlines_is_served(port: int) -> None:
    whole = head(length=len(DISCOVER)) + DISCOVER
    pieces = [whole[:20], whole[20:60], whole[60:-10], whole[-10:]]

    async def go() -> bytes:
        reader, writer = await asyncio.open_connection(HOST, port)
        for piece in pieces:  # each phase takes about half its deadline
            writer.write(piece)
            await asyncio.sleep(SHORT / 4)
        reply = await asyncio.wait_for(read_response(reader), 5)
        writer.close()
        return reply

    assert run(go()).startswith(b"HTTP/1.1 200 ")


def test_26_each_request_on_a_kept_alive_connection_gets_its_own_header_deadline(
    port: int,
) -> None:
    whole = head(length=len(DISCOVER)) + DISCOVER

    async def go() -> list[bytes]:
        reader, writer = await asyncio.open_connection(HOST, port)
        replies = []
        for _ in range(3):  # together longer than one deadline, each shorter
            writer.write(whole[:30])
            await asyncio.sleep(SHORT / 2)
            writer.write(whole[30:])
            replies.append(await asyncio.wait_for(read_response(reader), 5))
        # then the next request's first bytes, and no more: its header deadline applies
        writer.write(b"POST /mcp HT")
        started = asyncio.get_running_loop().time()
        replies.append(await asyncio.wait_for(reader.read(65536), 5))
        replies.append(str(asyncio.get_running_loop().time() - started).encode())
        writer.close()
        return replies

    *served, late, took = run(go())
    assert all(reply.startswith(b"HTTP/1.1 200 ") for reply in served)
    assert late.startswith(b"HTTP/1.1 408 ") and float(took) <= SHORT + SLACK


def test_26_a_body_left_unread_after_an_early_reply_is_bounded_too(port: int) -> None:
    # 404 before the body is read: the rest of the body dribbling in must not hold the
    # connection (each byte re-arms uvicorn's keep-alive timer).
    seen = run(dribble(port, head("/elsewhere", length=100), b"x" * 100, every=0.1))
    assert seen.status == 404 and closed_near(seen.after, SHORT)


def test_26_an_oversized_head_is_refused_and_closed(port: int) -> None:
    junk = b"X-Junk: " + b"j" * (MAX_HEAD_BYTES + 1) + b"\r\n"
    seen = run(dribble(port, b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n" + junk))
    assert seen.after is not None and seen.after < SHORT
    assert seen.status in (431, 400)  # h11 refuses it first, with its own 400


@pytest.mark.parametrize("parser", PARSERS)
def test_26_an_idle_kept_alive_connection_is_closed_after_the_idle_timeout(parser: str) -> None:
    with bounded_server(mcp_app(), parser, header_timeout=5.0, idle_timeout=0.5) as bound:
        seen = run(dribble(bound, head(length=len(DISCOVER)) + DISCOVER))
    assert seen.status == 200 and seen.after is not None and 0.45 <= seen.after <= 0.5 + SLACK


def test_26_the_limits_reach_uvicorn_and_survive_the_trip_to_a_worker() -> None:
    limits = ConnectionLimits(header_timeout=3, body_timeout=4, idle_timeout=2,
                              max_connections=7, backlog=9)
    config = BoundedConfig("tests.transports.apps:app", limits=limits,
                           http=protocol_class("h11"))
    copy = pickle.loads(pickle.dumps(config))  # uvicorn spawns workers with a pickled Config
    assert copy.limits == limits and copy.http is protocol_class("h11")
    assert (copy.limit_concurrency, copy.timeout_keep_alive, copy.backlog,
            copy.h11_max_incomplete_event_size) == (7, 2, 9, MAX_HEAD_BYTES)
    with pytest.raises(ValueError, match="no bounded protocol"):
        protocol_class("zttp")


@pytest.mark.parametrize(("field", "value"), [
    ("header_timeout", 0), ("body_timeout", -1), ("idle_timeout", float("inf")),
    ("header_timeout", float("nan")), ("max_connections", 0), ("backlog", 1.5),
    ("max_connections", True)])
def test_26_limits_refuse_values_that_bound_nothing(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=field.replace("_", "-")):
        ConnectionLimits(**{field: value})


def test_26_mcp_app_answers_a_body_that_does_not_arrive_in_time_with_408() -> None:
    # Under another ASGI server (no bounded protocol), McpApp's own deadline applies.
    app = McpApp(Dispatcher(apps.app), body_timeout=0.3)

    async def never() -> Any:
        yield b"{"
        await asyncio.sleep(30)

    async def go() -> httpx.Response:
        async with asgi_client(app) as client:
            headers = post_args(request("server/discover"))["headers"]
            return await client.post("/mcp", content=never(), headers=headers)

    response = run(go(), timeout=10)
    assert response.status_code == 408 and response.headers["connection"] == "close"
    assert "did not arrive within 0.3 s" in response.json()["error"]["message"]
    assert McpApp(Dispatcher(apps.app)).body_timeout == 30.0


# -- mrtr serve hands the limits over --------------------------------------------------------------

@pytest.fixture
def uvicorn_runs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What serve() would hand to uvicorn, instead of starting it."""
    for name in ("MRTR_STATE_KEYS", "MRTR_SERVE_TARGET", "MRTR_SERVE_PATH",
                 "MRTR_SERVE_ALLOWED_HOSTS", "MRTR_SERVE_EXPOSE_WORKER", "MRTR_SERVE_ASK_TIMEOUT"):
        monkeypatch.delenv(name, raising=False)  # restored afterwards: serve() writes them
    runs: list[dict[str, Any]] = []

    def fake(app: object, **options: Any) -> int:
        runs.append({"app": app, **options})
        return 0

    monkeypatch.setattr(_serve, "_run_uvicorn", fake)
    return runs


@pytest.mark.parametrize("workers", ["1", "2"])
def test_26_mrtr_serve_applies_the_limits_by_default_and_takes_flags(
    uvicorn_runs: list[dict[str, Any]], workers: str
) -> None:
    target = ["serve", "tests.transports.apps:app", "--port", "9", "--workers", workers,
              "--store", "none", "--allow-unshared-store"]
    assert main(target) == 0
    assert uvicorn_runs[-1]["limits"] == ConnectionLimits()
    assert main([*target, "--header-timeout", "3", "--body-timeout", "4.5", "--idle-timeout",
                 "2", "--max-connections", "77", "--backlog", "99"]) == 0
    assert uvicorn_runs[-1]["limits"] == ConnectionLimits(3, 4.5, 2, 77, 99)
    app = uvicorn_runs[-1]["app"] if workers == "1" else _serve._worker_app()
    assert isinstance(app, McpApp) and app.body_timeout is None  # the protocol's deadline rules


def test_26_the_help_shows_the_defaults_connection_limits_has(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    for field in dataclasses.fields(ConnectionLimits):
        flag = "--" + field.name.replace("_", "-")
        assert re.search(rf"{flag} \S+ (?:(?! --).)*\(default {field.default:g}\)", shown), flag


@pytest.mark.parametrize(("flag", "value", "message"), [
    ("--header-timeout", "0", "--header-timeout must be a positive number of seconds, got 0.0"),
    ("--body-timeout", "inf", "--body-timeout must be a positive number of seconds, got inf"),
    ("--max-connections", "0", "--max-connections must be a whole number of at least 1, got 0"),
])
def test_26_a_limit_that_bounds_nothing_is_one_line_exit_2(
    capsys: pytest.CaptureFixture[str], flag: str, value: str, message: str
) -> None:
    assert main(["serve", "tests.transports.apps:app", flag, value]) == 2
    assert capsys.readouterr().err == f"mrtr serve: {message}\n"


@pytest.mark.parametrize("parser", ["h11", "httptools"])
def test_31_a_websocket_upgrade_passes_through_both_bounded_protocols(parser: str) -> None:
    # The bounded protocols share one mixin; h11 hands handle_websocket_upgrade the request
    # event and httptools nothing. The upgrade must reach uvicorn's WebSocket protocol and stop
    # our deadline: the socket outlives the 0.3 s header timeout and no 408 is written into it.
    import socket

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":
            await receive()  # websocket.connect
            await send({"type": "websocket.accept"})
            await asyncio.sleep(0.6)  # past the header deadline
            await send({"type": "websocket.send", "text": "hi"})
            await send({"type": "websocket.close", "code": 1000})
        elif scope["type"] == "lifespan":
            await receive()
            await send({"type": "lifespan.startup.complete"})
            await receive()
            await send({"type": "lifespan.shutdown.complete"})

    upgrade = (b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
               b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
               b"Sec-WebSocket-Version: 13\r\n\r\n")
    with bounded_server(app, parser, header_timeout=0.3) as port, \
            socket.create_connection((HOST, port), timeout=5) as sock:
        sock.sendall(upgrade)
        data = b""
        while b"\x88" not in data.partition(b"\r\n\r\n")[2] and (chunk := sock.recv(4096)):
            data += chunk  # up to the close frame (uvicorn then waits for ours)
    assert data.startswith(b"HTTP/1.1 101"), data
    assert b"\x81\x02hi" in data and b"408" not in data  # the text frame, after 0.6 s
