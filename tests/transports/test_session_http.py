"""Streamable HTTP sessions (#12): initialize, Mcp-Session-Id, pushed asks, GET and DELETE."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx
import msgspec

from mrtr.http import McpApp
from mrtr.server import Context, Dispatcher, Principal, Sealer, Server
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


# -- the bad inputs of issue 12's acceptance 5, each over a real uvicorn -----------------------
class Edge:
    """A live server whose session ids expire on a clock the test moves, asks time out fast."""

    def __init__(self, url: str, clock: list[float]) -> None:
        self.url = url
        self.clock = clock


def edge_server(port: int, clock: list[float]) -> LiveServer:
    sealer = Sealer(keys=[bytes(range(32))], audience=apps.app.name, clock=lambda: clock[0])
    app = McpApp(Dispatcher(apps.app, sealer=sealer), allowed_hosts=[f"127.0.0.1:{port}"],
                 keepalive=0.2, ask_timeout=0.3)
    return LiveServer(app, port)


def over_uvicorn(test: Any) -> Any:
    """Run `test(client, edge)` against a fresh edge server."""
    port, clock = free_port(), [1_000.0]

    async def go(url: str) -> Any:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            return await test(client, Edge(url, clock))

    with edge_server(port, clock) as server:
        return run(go(server.url), timeout=30)


def sse_messages(body: str) -> list[dict[str, Any]]:
    return [json.loads(line[5:]) for line in body.splitlines() if line.startswith("data:")]


def with_version(version: object) -> dict[str, Any]:
    base: dict[str, Any] = INITIALIZE["params"]  # type: ignore[assignment]
    params = {k: v for k, v in base.items() if k != "protocolVersion"}
    return {**INITIALIZE, "params": params if version is None else
            {**params, "protocolVersion": version}}


def test_unknown_initialize_versions_over_uvicorn_issue12() -> None:
    async def test(client: httpx.AsyncClient, edge: Edge) -> list[httpx.Response]:
        return [await post(client, with_version(v), JSON_HEADERS)
                for v in ("1999-01-01", "2026-07-28", None, 7)]

    unknown, modern, missing, number = over_uvicorn(test)
    for reply in (unknown, modern):  # 2025 rule: answer with a version we speak; client decides
        assert reply.status_code == 200 and "mcp-session-id" in reply.headers
        assert reply.json()["result"]["protocolVersion"] == "2025-11-25"
    for reply, requested in ((missing, None), (number, 7)):
        assert reply.status_code < 500 and "mcp-session-id" not in reply.headers
        assert reply.json()["error"] == {
            "code": -32602, "message": "Invalid params: initialize needs a protocolVersion string",
            "data": {"supported": ["2025-11-25", "2025-06-18", "2025-03-26"],
                     "requested": requested}}


def test_session_requests_without_an_id_are_400_over_uvicorn_issue12() -> None:
    async def test(client: httpx.AsyncClient, edge: Edge) -> list[httpx.Response]:
        await open_session(client)  # a session exists, but these requests do not name it
        greet = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                 "params": {"name": "greet", "arguments": {}}}
        return [await post(client, body, headers) for body in (ping(2), greet)
                for headers in (JSON_HEADERS, {**JSON_HEADERS,
                                               "mcp-protocol-version": "2025-11-25"})]

    for reply in over_uvicorn(test):
        assert reply.status_code == 400
        assert reply.headers["content-type"] == "application/json"
        error = reply.json()
        assert error["id"] in (2, 3) and error["error"] == {
            "code": -32600, "message": "Bad Request: Mcp-Session-Id header is required (send "
            "initialize first, or send a 2026-07-28 request with params._meta)"}


def test_forged_expired_and_garbage_session_ids_are_404_never_500_over_uvicorn_issue12() -> None:
    async def test(client: httpx.AsyncClient, edge: Edge) -> list[tuple[str, int, object]]:
        session = await open_session(client)
        real = session["mcp-session-id"]
        state = (await client.post("/mcp", **post_args(request(
            "tools/call", {"name": "greet", "arguments": {}})))).json()["result"]["requestState"]
        ids = {"forged": real[:-3] + ("xyz" if not real.endswith("xyz") else "abc"),
               "empty": "", "junk": "nope", "huge": "a" * 8000,
               "requestState": state}  # sealed with the same keys, for another audience
        seen = []
        for name, value in ids.items():
            headers = {**session, "mcp-session-id": value}
            for method in ("POST", "GET", "DELETE"):
                reply = await client.request(method, "/mcp", headers=headers,
                                             content=msgspec.json.encode(ping()) if method ==
                                             "POST" else None)
                seen.append((f"{method} {name}", reply.status_code, reply.json()["error"]))
        edge.clock[0] += 25 * 3600  # past the 24 h session lifetime
        for method in ("POST", "GET", "DELETE"):
            reply = await client.request(method, "/mcp", headers=session,
                                         content=msgspec.json.encode(ping()) if method ==
                                         "POST" else None)
            seen.append((f"{method} expired", reply.status_code, reply.json()["error"]))
        return seen

    for name, status, error in over_uvicorn(test):
        assert (name, status, error) == (name, 404, {"code": -32001,
                                                     "message": "Session not found"})


def test_an_unanswered_pushed_ask_times_out_as_an_error_result_over_uvicorn_issue12() -> None:
    async def test(client: httpx.AsyncClient, edge: Edge) -> tuple[list[dict[str, Any]], int]:
        session = await open_session(client)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "greet", "arguments": {}}}
        reply = await post(client, call, session)  # never answered: the stream ends by itself
        after = await post(client, ping(3), session)
        return sse_messages(reply.text), after.status_code

    (ask, final), after = over_uvicorn(test)
    assert ask["method"] == "elicitation/create"
    assert final["id"] == 2 and final["result"]["isError"] is True
    (text,) = [block["text"] for block in final["result"]["content"]]
    assert "did not answer" in text and "0.3 seconds" in text
    assert after == 200  # the session goes on


def test_answers_to_ids_never_sent_are_ignored_over_uvicorn_issue12() -> None:
    async def test(client: httpx.AsyncClient, edge: Edge) -> tuple[list[int], list[Any]]:
        session = await open_session(client)
        strays: list[dict[str, Any]] = [
            {"jsonrpc": "2.0", "id": 4242, "result": {"action": "accept"}},
            {"jsonrpc": "2.0", "id": "s-1", "error": {"code": -1, "message": "no"}},
            {"jsonrpc": "2.0", "id": None, "result": {}}]
        statuses = [(await post(client, stray, session)).status_code for stray in strays]
        events: list[Any] = []
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "greet", "arguments": {}}}
        answers = iter([{"name": "Ada"}, {"color": "teal"}])
        async with client.stream("POST", "/mcp", content=msgspec.json.encode(call),
                                 headers=session) as stream:
            async for line in stream.aiter_lines():
                if not line.startswith("data:"):
                    continue
                events.append(json.loads(line[5:]))
                if events[-1].get("method") == "elicitation/create":
                    answer = {"jsonrpc": "2.0", "id": events[-1]["id"],
                              "result": {"action": "accept", "content": next(answers)}}
                    for _ in range(2):  # the second copy answers an id already answered
                        statuses.append((await post(client, answer, session)).status_code)
        statuses.append((await post(client, ping(9), session)).status_code)
        return statuses, events

    statuses, events = over_uvicorn(test)
    assert statuses == [202] * 7 + [200]
    assert events[-1] == {"jsonrpc": "2.0", "id": 2, "result": {
        "content": [{"type": "text", "text": "Hello Ada, you like teal"}]}}


def test_modern_meta_on_a_session_is_served_modern_over_uvicorn_issue12() -> None:
    async def test(client: httpx.AsyncClient, edge: Edge) -> tuple[httpx.Response, ...]:
        session = await open_session(client)
        body = request("tools/call", {"name": "greet", "arguments": {}})
        modern = post_args(body)
        served = await client.post("/mcp", content=modern["content"],
                                   headers={**modern["headers"],
                                            "mcp-session-id": session["mcp-session-id"]})
        mixed = await client.post("/mcp", content=modern["content"], headers=session)
        return served, mixed

    served, mixed = over_uvicorn(test)
    assert served.status_code == 200 and served.headers["content-type"] == "application/json"
    result = served.json()["result"]
    assert result["resultType"] == "input_required"  # MRTR, not a pushed elicitation/create
    assert list(result["inputRequests"]) == ["name"] and "requestState" in result
    # The session's 2025 header beside a 2026 `_meta` is a header mismatch, not a 500.
    assert mixed.status_code == 400 and mixed.json()["error"]["code"] == -32020


def test_24_a_tool_scope_refusal_without_a_guard_is_the_2026_answer_in_a_session() -> None:
    """Issue 24: a plain authenticator's Principal lacking a tool's scopes got 403 over 2026-07-28
    but 200 with an SSE error event in a session; both now get the Runner's 403 JSON reply."""
    server = Server("scoped")
    runs: list[str] = []

    @server.tool(scopes=["admin"])
    async def purge(ctx: Context) -> str:
        runs.append("purge")
        return "purged"

    async def authenticate(headers: Any) -> str | None:
        held = headers.get("x-scopes", "").split()
        return Principal("https://issuer.example", "ann", scopes=held)

    app = McpApp(Dispatcher(server), authenticator=authenticate)
    body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "purge", "arguments": {}}}

    async def go() -> tuple[httpx.Response, httpx.Response, httpx.Response]:
        async with asgi_client(app) as client:
            modern = await client.post("/mcp", **post_args(request(
                "tools/call", {"name": "purge", "arguments": {}}, id=2)))
            session = await open_session(client)
            legacy = await post(client, body, session)
            allowed = await post(client, body, {**session, "x-scopes": "admin"})
            return modern, legacy, allowed

    modern, legacy, allowed = run(go())
    expected = {"jsonrpc": "2.0", "id": 2, "error": {
        "code": -32600, "message": "Forbidden: insufficient scope",
        "data": {"requiredScopes": ["admin"]}}}
    for reply in (modern, legacy):
        assert reply.status_code == 403, reply.text
        assert reply.headers["content-type"] == "application/json"
        assert "www-authenticate" not in reply.headers  # no guard: no OAuth challenge to send
        assert reply.json() == expected
    assert allowed.status_code == 200 and "purged" in allowed.text and runs == ["purge"]
