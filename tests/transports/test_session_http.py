"""Streamable HTTP sessions (#12): initialize, Mcp-Session-Id, pushed asks, GET and DELETE."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import msgspec

from mrtr.server import Dispatcher, Sealer
from mrtr.transports import McpApp
from tests.transports import apps
from tests.transports.conftest import (
    LiveServer,
    asgi_client,
    free_port,
    post_args,
    request,
    run,
)

JSON_HEADERS = {"content-type": "application/json",
                "accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}},
    "clientInfo": {"name": "raw", "version": "0"}}}


async def open_session(client: httpx.AsyncClient, **headers: str) -> dict[str, str]:
    reply = await client.post("/mcp", content=msgspec.json.encode(INITIALIZE),
                              headers={**JSON_HEADERS, **headers})
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"]["protocolVersion"] == "2025-11-25"
    return {**JSON_HEADERS, "mcp-session-id": reply.headers["mcp-session-id"],
            "mcp-protocol-version": "2025-11-25"}


async def post(client: httpx.AsyncClient, message: dict[str, Any],
               headers: dict[str, str]) -> httpx.Response:
    return await client.post("/mcp", content=msgspec.json.encode(message), headers=headers)


def ping(id: int = 2) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id, "method": "ping"}


def test_initialize_opens_a_session_with_or_without_the_version_header() -> None:
    async def go() -> None:
        async with asgi_client() as client:
            for extra in ({}, {"mcp-protocol-version": "2025-11-25", "mcp-method": "initialize"}):
                session = await open_session(client, **extra)
                assert re.fullmatch(r"[\x21-\x7e]+", session["mcp-session-id"])
                reply = await post(client, ping(), session)
                assert reply.status_code == 200 and reply.json() == {
                    "jsonrpc": "2.0", "id": 2, "result": {}}

    run(go())


def test_a_2026_initialize_is_an_unknown_method() -> None:
    async def go() -> list[httpx.Response]:
        async with asgi_client() as client:
            modern_header = await client.post("/mcp", content=msgspec.json.encode(INITIALIZE),
                                              headers={**JSON_HEADERS,
                                                       "mcp-protocol-version": "2026-07-28"})
            with_meta = await client.post("/mcp", **post_args(request("initialize")))
            return [modern_header, with_meta]

    for reply in run(go()):
        assert reply.status_code == 404 and reply.json()["error"]["code"] == -32601
        assert "mcp-session-id" not in reply.headers


def test_a_session_request_without_an_id_is_400_with_a_clear_error() -> None:
    async def go() -> httpx.Response:
        async with asgi_client() as client:
            return await post(client, ping(5), {**JSON_HEADERS,
                                                "mcp-protocol-version": "2025-11-25"})

    reply = run(go())
    assert reply.status_code == 400
    error = reply.json()
    assert error["id"] == 5 and error["error"]["code"] == -32600
    assert "Mcp-Session-Id" in error["error"]["message"]


def test_forged_expired_and_deleted_session_ids_are_404() -> None:
    now = [1_000.0]
    sealer = Sealer(keys=[bytes(range(32))], audience="t", clock=lambda: now[0])
    app = McpApp(Dispatcher(apps.app, sealer=sealer))

    async def go() -> list[int]:
        statuses = []
        async with asgi_client(app) as client:
            session = await open_session(client)
            forged = {**session, "mcp-session-id": session["mcp-session-id"][:-3] + "xyz"}
            statuses.append((await post(client, ping(), forged)).status_code)
            statuses.append((await post(client, ping(), {**session, "mcp-session-id": "nope"}))
                            .status_code)
            now[0] += 25 * 3600  # past the session lifetime
            statuses.append((await post(client, ping(), session)).status_code)
            now[0] = 1_000.0
            fresh = await open_session(client)
            statuses.append((await client.delete("/mcp", headers=fresh)).status_code)
            gone = await post(client, ping(), fresh)
            statuses.append(gone.status_code)
            assert gone.json()["error"]["code"] == -32001
            statuses.append((await post(client, {"jsonrpc": "2.0", "method":
                                                 "notifications/initialized"}, fresh)).status_code)
        return statuses

    assert run(go()) == [404, 404, 404, 200, 404, 404]


def test_version_header_must_match_the_session() -> None:
    async def go() -> httpx.Response:
        async with asgi_client() as client:
            session = await open_session(client)
            return await post(client, ping(), {**session, "mcp-protocol-version": "2025-06-18"})

    reply = run(go())
    assert reply.status_code == 400 and "2025-11-25" in reply.json()["error"]["message"]


def test_get_and_delete_without_a_session_are_405_and_notifications_202() -> None:
    async def go() -> list[int]:
        async with asgi_client() as client:
            session = await open_session(client)
            initialized = await post(client, {"jsonrpc": "2.0",
                                              "method": "notifications/initialized"}, session)
            return [(await client.get("/mcp", headers=JSON_HEADERS)).status_code,
                    (await client.delete("/mcp", headers=JSON_HEADERS)).status_code,
                    initialized.status_code]

    assert run(go()) == [405, 405, 202]


def test_sessions_can_be_turned_off() -> None:
    async def go() -> httpx.Response:
        async with asgi_client(McpApp(Dispatcher(apps.app), sessions=False)) as client:
            return await client.post("/mcp", content=msgspec.json.encode(INITIALIZE),
                                     headers=JSON_HEADERS)

    assert run(go()).json()["error"]["code"] == -32601


# -- over a real uvicorn -----------------------------------------------------------------------
def live_app(port: int, **options: Any) -> McpApp:
    return McpApp(Dispatcher(apps.app), allowed_hosts=[f"127.0.0.1:{port}"], keepalive=0.2,
                  **options)


def test_pushed_asks_on_the_post_stream_over_uvicorn() -> None:
    port = free_port()

    async def go(url: str) -> tuple[list[dict[str, Any]], httpx.Headers, list[int]]:
        events: list[dict[str, Any]] = []
        answers: list[int] = []
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            session = await open_session(client)
            call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "greet", "arguments": {}}}
            replies = iter([{"name": "Ada"}, {"color": "teal"}])
            async with client.stream("POST", "/mcp", content=msgspec.json.encode(call),
                                     headers=session) as stream:
                headers = stream.headers
                async for text in stream.aiter_lines():
                    if not text.startswith("data:"):
                        continue
                    event = json.loads(text[5:])
                    events.append(event)
                    if event.get("method") == "elicitation/create":
                        stray = await post(client, {"jsonrpc": "2.0", "id": 99,
                                                    "result": {"action": "accept"}}, session)
                        answer = {"jsonrpc": "2.0", "id": event["id"],
                                  "result": {"action": "accept", "content": next(replies)}}
                        answers += [stray.status_code, (await post(client, answer, session))
                                    .status_code]
        return events, headers, answers

    with LiveServer(live_app(port), port) as server:
        events, headers, answers = run(go(server.url))
    assert headers["content-type"] == "text/event-stream"
    assert headers["x-accel-buffering"] == "no"
    assert [e.get("method") for e in events] == ["elicitation/create", "elicitation/create", None]
    assert events[-1] == {"jsonrpc": "2.0", "id": 2, "result": {
        "content": [{"type": "text", "text": "Hello Ada, you like teal"}]}}
    assert answers == [202, 202, 202, 202]


def test_get_stream_and_disconnect_cancels_the_handler(tmp_path: Path) -> None:
    port = free_port()
    marker = tmp_path / "marker"

    async def go(url: str) -> httpx.Headers:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            session = await open_session(client)
            async with client.stream("GET", "/mcp", headers=session) as listening:
                headers = listening.headers
            call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                    "params": {"name": "hang", "arguments": {"marker": str(marker)}}}
            async with client.stream("POST", "/mcp", content=msgspec.json.encode(call),
                                     headers=session) as stream:
                assert stream.status_code == 200
                await asyncio.sleep(0.3)  # the handler is now waiting; then we hang up
            for _ in range(100):
                if marker.exists():
                    break
                await asyncio.sleep(0.05)
        return headers

    with LiveServer(live_app(port), port) as server:
        headers = run(go(server.url))
    assert headers["content-type"] == "text/event-stream"
    assert headers["x-accel-buffering"] == "no"
    assert marker.read_text() == "cancelled"


def test_a_2025_03_26_session_accepts_a_batch_without_the_version_header() -> None:
    async def go() -> tuple[httpx.Response, httpx.Response]:
        async with asgi_client() as client:
            old = {**INITIALIZE,
                   "params": {**INITIALIZE["params"], "protocolVersion": "2025-03-26"}}
            reply = await post(client, old, JSON_HEADERS)
            session = {**JSON_HEADERS, "mcp-session-id": reply.headers["mcp-session-id"]}
            batch = [ping(2), {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}]
            newer = await open_session(client)
            refused = await client.post("/mcp", content=msgspec.json.encode(batch), headers=newer)
            return await client.post("/mcp", content=msgspec.json.encode(batch),
                                     headers=session), refused

    reply, refused = run(go())
    assert reply.status_code == 200 and reply.headers["content-type"] == "text/event-stream"
    events = [json.loads(ln[5:]) for ln in reply.text.splitlines() if ln.startswith("data:")]
    assert sorted(e["id"] for e in events) == [2, 3]
    assert refused.status_code == 400  # batches were removed in 2025-06-18


def test_notifications_cancelled_ends_the_call_without_a_reply(tmp_path: Path) -> None:
    port = free_port()
    marker = tmp_path / "marker"

    async def go(url: str) -> str:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            session = await open_session(client)
            call = {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                    "params": {"name": "hang", "arguments": {"marker": str(marker)}}}
            async with client.stream("POST", "/mcp", content=msgspec.json.encode(call),
                                     headers=session) as stream:
                await asyncio.sleep(0.3)
                cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 4, "reason": "user"}}
                assert (await post(client, cancel, session)).status_code == 202
                return (await stream.aread()).decode()

    with LiveServer(live_app(port), port) as server:
        body = run(go(server.url))
    assert "data:" not in body  # the stream ended with no response
    assert marker.read_text() == "cancelled"


def test_another_worker_with_the_same_keys_accepts_the_session_id() -> None:
    def worker() -> McpApp:
        app = McpApp(Dispatcher(apps.app))
        # As `mrtr serve --workers N` does: the shared keys arrive after the app was built.
        app.dispatcher = Dispatcher(apps.app, sealer=Sealer(keys=[bytes(range(32))],
                                                            audience=apps.app.name))
        return app

    async def go() -> tuple[int, int]:
        async with asgi_client(worker()) as first, asgi_client(worker()) as second:
            session = await open_session(first)
            elsewhere = await post(second, ping(), session)
            stranger = await post(asgi_client(), ping(), session)  # another key ring
            return elsewhere.status_code, stranger.status_code

    assert run(go()) == (200, 404)
