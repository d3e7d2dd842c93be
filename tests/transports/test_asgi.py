"""McpApp in-process (httpx.ASGITransport, or driven by hand): statuses, errors, SSE, cancel."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Mapping, MutableMapping
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from mrtr import Context, Server
from mrtr.errors import Unauthorized
from mrtr.http import McpApp
from mrtr.http._exchange import Watchlist
from mrtr.protocol import PromptMessage, SSEParser, TextContent
from mrtr.server import Dispatcher
from tests.transports import apps
from tests.transports.conftest import VERSION, asgi_client, call, post_args, request, run


async def post(
    body: Mapping[str, Any], app: McpApp | None = None, /, **headers: str
) -> httpx.Response:
    async with asgi_client(app) as client:
        return await client.post("/mcp", **post_args(body, **headers))


def post_sync(
    body: Mapping[str, Any], app: McpApp | None = None, /, **headers: str
) -> httpx.Response:
    return run(post(body, app, **headers))


def raw_post(content: bytes, headers: Mapping[str, Any], app: McpApp | None = None,
             path: str = "/mcp", method: str = "POST") -> httpx.Response:
    async def go() -> httpx.Response:
        async with asgi_client(app) as client:
            return await client.request(method, path, content=content, headers=headers)

    return run(go())


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert "result" not in body
    error: dict[str, Any] = body["error"]
    return error


def sse_messages(response: httpx.Response) -> list[dict[str, Any]]:
    parser = SSEParser()
    events = parser.feed(response.content) + parser.close()
    return [json.loads(e.data) for e in events]


# -- server-stateless probes (conformance) --------------------------------------------------------

def test_discover_answers_json_without_a_session() -> None:
    response = post_sync(request("server/discover"))
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    assert "mcp-session-id" not in response.headers
    assert VERSION in response.json()["result"]["supportedVersions"]


@pytest.mark.parametrize("drop", [
    "_meta",
    "io.modelcontextprotocol/protocolVersion",
    "io.modelcontextprotocol/clientCapabilities",
])
def test_missing_meta_pieces_are_400_invalid_params(drop: str) -> None:
    body = request("server/discover", id=7)
    if drop == "_meta":
        del body["params"]["_meta"]
    else:
        del body["params"]["_meta"][drop]
    response = post_sync(body)
    assert response.status_code == 400
    assert error_of(response)["code"] == -32602
    assert response.json()["id"] == 7


def test_missing_client_info_is_fine() -> None:
    body = request("server/discover")
    del body["params"]["_meta"]["io.modelcontextprotocol/clientInfo"]
    assert post_sync(body).status_code == 200


def test_unsupported_version_is_400_with_supported_and_requested() -> None:
    body = request("server/discover", id="v")
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999.0.0"
    response = post_sync(body, mcp_protocol_version="v999.0.0")
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == -32022
    assert error["data"] == {"supported": [VERSION], "requested": "v999.0.0"}
    assert response.json()["id"] == "v"


def test_header_and_meta_version_mismatch_is_32020() -> None:
    body = request("server/discover", id=3)
    body["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"] = "v999.0.0"
    response = post_sync(body)
    assert (response.status_code, error_of(response)["code"]) == (400, -32020)
    assert response.json()["id"] == 3


@pytest.mark.parametrize("method", [
    "initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe",
    "unknown/method",
])
def test_removed_and_unknown_methods_are_404(method: str) -> None:
    response = post_sync(request(method, id=11))
    assert response.status_code == 404
    assert error_of(response)["code"] == -32601
    assert response.json()["id"] == 11


def test_three_concurrent_lists_succeed() -> None:
    async def go() -> list[httpx.Response]:
        async with asgi_client() as client:
            posts = [client.post("/mcp", **post_args(request("tools/list", id=i)))
                     for i in range(3)]
            return list(await asyncio.gather(*posts))

    assert [r.status_code for r in run(go())] == [200, 200, 200]


# -- HTTP-level rejections --------------------------------------------------------------------

@pytest.mark.parametrize("method", ["GET", "DELETE", "PUT"])
def test_other_http_methods_are_405(method: str) -> None:
    response = raw_post(b"", {}, method=method)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


def test_other_paths_are_404() -> None:
    response = raw_post(b"{}", {"content-type": "application/json"}, path="/other")
    assert response.status_code == 404
    assert error_of(response)["code"] == -32600


def test_wrong_content_type_is_415() -> None:
    body = request("tools/list")
    response = post_sync(body, content_type="text/plain")
    assert response.status_code == 415
    assert error_of(response)["code"] == -32600


def test_content_type_parameters_are_accepted() -> None:
    response = post_sync(request("tools/list"), content_type="Application/JSON; charset=utf-8")
    assert response.status_code == 200


def test_invalid_json_is_400_parse_error() -> None:
    response = raw_post(b"{not json", {"content-type": "application/json"})
    assert (response.status_code, error_of(response)["code"]) == (400, -32700)


def test_json_array_is_400_invalid_request() -> None:
    response = raw_post(b"[]", {"content-type": "application/json"})
    assert (response.status_code, error_of(response)["code"]) == (400, -32600)


def test_body_over_the_limit_is_413_by_content_length() -> None:
    app = McpApp(Dispatcher(apps.app), max_body=1024)
    response = raw_post(b" " * 2048, {"content-type": "application/json"}, app)
    assert response.status_code == 413


def test_body_over_the_limit_is_413_while_streaming() -> None:
    app = McpApp(Dispatcher(apps.app), max_body=1024)

    async def chunks() -> Any:
        for _ in range(10):
            yield b" " * 512

    async def go() -> httpx.Response:
        async with asgi_client(app) as client:
            return await client.post("/mcp", content=chunks(),
                                     headers={"content-type": "application/json"})

    response = run(go())
    assert response.status_code == 413


@pytest.mark.parametrize("value", [b"\xff\xfe\xfd", b"x" * 100_000])
def test_garbage_headers_are_400(value: bytes) -> None:
    body = request("tools/list")
    headers = {**post_args(body)["headers"], "x-junk": value}
    response = raw_post(msgspec.json.encode(body), headers)
    assert (response.status_code, error_of(response)["code"]) == (400, -32600)


def test_notification_is_202_without_body() -> None:
    note = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}}
    response = raw_post(msgspec.json.encode(note), {"content-type": "application/json"})
    assert response.status_code == 202
    assert response.content == b""


def test_unexpected_exception_is_a_json_500_without_traceback() -> None:
    class Broken(Dispatcher):
        def receive(self, body: bytes, headers: Mapping[str, str] | None = None) -> Any:
            raise RuntimeError("boom")

    response = post_sync(request("tools/list"), McpApp(Broken(apps.app)))
    assert response.status_code == 500
    assert error_of(response)["code"] == -32603
    assert "boom" not in response.text


# -- DNS rebinding (conformance: dns-rebinding-protection) ---------------------------------------

@pytest.mark.parametrize(("host", "origin", "status"), [
    ("evil.example.com", "http://evil.example.com", 403),
    ("127.0.0.1:8000", "http://evil.example.com", 403),
    ("127.0.0.1:8000", "null", 403),
    ("evil.example.com", None, 403),
    ("127.0.0.1:8000", "http://127.0.0.1:8000", 200),
    ("localhost:8000", "https://localhost:3000", 200),
    ("[::1]:8000", None, 200),
])
def test_host_and_origin_are_checked(host: str, origin: str | None, status: int) -> None:
    headers = {"host": host} | ({"origin": origin} if origin else {})
    assert post_sync(request("server/discover"), **headers).status_code == status


def test_explicit_allow_lists() -> None:
    app = McpApp(Dispatcher(apps.app), allowed_hosts=["127.0.0.1:8000"],
                 allowed_origins=["https://app.example.com"])
    ok = post_sync(request("server/discover"), app, origin="https://app.example.com")
    assert ok.status_code == 200
    assert post_sync(request("server/discover"), app, host="localhost:8000").status_code == 403


# -- header validation (conformance, representative rows) ---------------------------------------

@pytest.mark.parametrize(("body", "headers", "status"), [
    (request("tools/list"), {"mcp_method": "prompts/list"}, 400),
    (request("tools/list"), {"mcp_method": "TOOLS/LIST"}, 400),
    (call("fast"), {"mcp_name": "wrong_tool_name"}, 400),
    (call("fast"), {"mcp_name": "  fast  "}, 200),
])
def test_routing_headers(body: dict[str, Any], headers: dict[str, str], status: int) -> None:
    response = post_sync(body, **headers)
    assert response.status_code == status
    if status == 400:
        assert error_of(response)["code"] == -32020
    else:
        assert "error" not in response.json()


@pytest.mark.parametrize(("body", "header"), [
    (request("tools/list"), "mcp-method"), (call("fast"), "mcp-name"),
])
def test_missing_routing_header_is_32020(body: dict[str, Any], header: str) -> None:
    headers = post_args(body)["headers"]
    del headers[header]
    response = raw_post(msgspec.json.encode(body), headers)
    assert (response.status_code, error_of(response)["code"]) == (400, -32020)


# -- authentication ---------------------------------------------------------------------------

async def bearer(headers: Mapping[str, str]) -> str | None:
    if headers.get("authorization") != "Bearer s3cret":
        raise Unauthorized("a valid bearer token is required")
    return "user:42"


def test_authenticator_rejects_with_401_and_challenge() -> None:
    response = post_sync(call("whoami"), McpApp(Dispatcher(apps.app), authenticator=bearer))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"


def test_authenticator_principal_reaches_the_handler() -> None:
    app = McpApp(Dispatcher(apps.app), authenticator=bearer)
    response = post_sync(call("whoami"), app, authorization="Bearer s3cret")
    assert response.json()["result"]["content"][0]["text"] == "user:42"


def test_worker_header_only_when_asked() -> None:
    assert "mcp-debug-worker" not in post_sync(request("tools/list")).headers
    exposed = post_sync(request("tools/list"), McpApp(Dispatcher(apps.app), expose_worker=True))
    assert exposed.headers["mcp-debug-worker"].isdigit()


# -- SSE ----------------------------------------------------------------------------------------

def test_progress_streams_as_sse_before_the_result() -> None:
    body = call("count", {"steps": 4}, id="p", extra_meta={"progressToken": "tok"})
    response = post_sync(body)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    messages = sse_messages(response)
    assert [m.get("method") for m in messages] == ["notifications/progress"] * 4 + [None]
    assert [m["params"]["progress"] for m in messages[:-1]] == [1, 2, 3, 4]
    assert messages[-1]["id"] == "p"
    assert messages[-1]["result"]["content"][0]["text"] == "counted 4"


def test_without_a_progress_token_the_reply_is_json() -> None:
    response = post_sync(call("count", {"steps": 3}))
    assert response.headers["content-type"] == "application/json"


def test_timeout_gives_an_error_not_a_hang() -> None:
    app = McpApp(Dispatcher(apps.app), request_timeout=0.2)
    response = post_sync(call("slow", {"seconds": 30}, id=5), app)
    assert response.status_code == 500
    assert error_of(response)["code"] == -32603
    assert response.json()["id"] == 5


def test_sse_keepalives_then_the_timeout_error_as_last_event(tmp_path: Path) -> None:
    app = McpApp(Dispatcher(apps.app), request_timeout=0.5, keepalive=0.05)
    marker = tmp_path / "cancelled"
    body = call("hang", {"marker": str(marker)}, extra_meta={"progressToken": 1})
    response = post_sync(body, app)
    assert response.status_code == 200  # the status line left before the error existed
    assert b": keep-alive" in response.content
    assert sse_messages(response)[-1]["error"]["code"] == -32603
    assert marker.read_text() == "cancelled"


# -- driven by hand: disconnect, lifespan, websocket -------------------------------------------

class Wire:
    """Hand-driven ASGI receive/send: the client disconnects after the first SSE event."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.sent: list[MutableMapping[str, Any]] = []
        self.first_event = asyncio.Event()
        self.read = False

    async def receive(self) -> dict[str, Any]:
        if not self.read:
            self.read = True
            return {"type": "http.request", "body": self.body, "more_body": False}
        await self.first_event.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.sent.append(message)
        if message["type"] == "http.response.body" and message.get("body"):
            self.first_event.set()


def scope_for(body: dict[str, Any]) -> dict[str, Any]:
    headers = [(k.encode(), v.encode()) for k, v in post_args(body)["headers"].items()]
    return {"type": "http", "method": "POST", "path": "/mcp",
            "headers": [*headers, (b"host", b"127.0.0.1:8000")]}


def test_disconnect_cancels_the_handler_and_writes_nothing_more(tmp_path: Path) -> None:
    marker = tmp_path / "cancelled"
    body = call("hang", {"marker": str(marker)}, extra_meta={"progressToken": 1})
    wire = Wire(msgspec.json.encode(body))

    async def go() -> None:
        await McpApp(Dispatcher(apps.app))(scope_for(body), wire.receive, wire.send)
        await asyncio.sleep(0.05)

    run(go(), timeout=5)
    assert marker.read_text() == "cancelled"
    assert len([m for m in wire.sent if m["type"] == "http.response.body"]) == 1
    assert wire.sent[-1].get("more_body") is True  # no final event after the disconnect


def test_a_quick_request_runs_in_the_request_task() -> None:
    """No task per request for the handler, the disconnect watch or the deadline."""
    body = call("tasks_seen")
    wire = Wire(msgspec.json.encode(body))

    async def go() -> int:
        before = len(asyncio.all_tasks())
        await McpApp(Dispatcher(apps.app))(scope_for(body), wire.receive, wire.send)
        return before

    before = run(go())
    reply = msgspec.json.decode(wire.sent[-1]["body"])
    assert reply["result"]["content"][0]["text"] == str(before)


def test_disconnect_cancels_a_slow_json_request() -> None:
    """A handler still running after WATCH_AFTER is watched: hanging up cancels it."""
    body = call("slow", {"seconds": 30})
    sent: list[MutableMapping[str, Any]] = []
    reads = 0

    async def receive() -> dict[str, Any]:
        nonlocal reads
        reads += 1
        if reads == 1:
            return {"type": "http.request", "body": msgspec.json.encode(body), "more_body": False}
        await asyncio.sleep(0.1)
        return {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    async def go() -> float:
        loop = asyncio.get_running_loop()
        started = loop.time()
        await McpApp(Dispatcher(apps.app))(scope_for(body), receive, send)
        return loop.time() - started

    assert run(go(), timeout=5) < 2.0
    assert sent == []  # the client is gone: nothing is written


def test_one_timer_starts_the_watchers_of_requests_due_in_turn() -> None:
    """The Watchlist's single timer: a finished request is skipped, a due one is watched, and
    the timer re-arms for the next pending one, then stays unarmed when none is left."""
    watched: list[str] = []

    class Request:
        def __init__(self, name: str) -> None:
            self.name = name

        def watch(self) -> None:
            watched.append(self.name)

    async def go() -> tuple[bool, bool]:
        loop = asyncio.get_running_loop()
        watchlist = Watchlist(loop)
        quick, slow, later = Request("quick"), Request("slow"), Request("later")
        now = loop.time()
        watchlist.add(quick, now + 0.01)  # type: ignore[arg-type]
        watchlist.add(slow, now + 0.02)  # type: ignore[arg-type]
        watchlist.add(later, now + 0.3)  # type: ignore[arg-type]
        watchlist.discard(quick)  # type: ignore[arg-type]  # answered in time: no watcher
        await asyncio.sleep(0.1)
        rearmed = watchlist.timer is not None
        watchlist.discard(later)  # type: ignore[arg-type]
        await asyncio.sleep(0.3)
        return rearmed, watchlist.timer is None

    rearmed, idle = run(go(), timeout=5)
    assert watched == ["slow"]
    assert rearmed and idle


def test_watchlist_is_per_thread_and_per_loop() -> None:
    """The cached Watchlist (and its loop) is never handed to another thread's or a later
    loop's requests."""
    app = McpApp(Dispatcher(apps.app))
    both_running = threading.Barrier(2, timeout=5)
    wrong: list[str] = []

    async def probe(together: bool) -> None:
        for round_no in range(50):
            if app.watchlist().loop is not asyncio.get_running_loop():
                wrong.append(f"{threading.current_thread().name} round {round_no}")
            if round_no == 0 and together:  # both loops are running from here on
                await asyncio.to_thread(both_running.wait)
            await asyncio.sleep(0)

    threads = [threading.Thread(target=asyncio.run, args=(probe(True),), name=f"t{i}")
               for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    asyncio.run(probe(False))  # a later loop on this thread
    assert wrong == []


def test_lifespan_completes() -> None:
    messages = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return messages.pop(0)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    run(McpApp(Dispatcher(apps.app))({"type": "lifespan"}, receive, send))
    assert [m["type"] for m in sent] == ["lifespan.startup.complete", "lifespan.shutdown.complete"]


@pytest.mark.parametrize(("body", "status", "code"), [
    (call("no_such_tool", id=9), 400, -32602),
    (request("no/such/method", id=9), 404, -32601),
    (request("tools/list", id=9, **{"io.modelcontextprotocol/protocolVersion": "1999-01-01"}),
     400, -32022),
])
def test_error_statuses_come_from_the_error_class(
    body: dict[str, Any], status: int, code: int
) -> None:
    # Literal values: comparing with the attributes the code reads could never fail.
    response = post_sync(body, mcp_protocol_version=body["params"]["_meta"][
        "io.modelcontextprotocol/protocolVersion"])
    assert (response.status_code, error_of(response)["code"]) == (status, code)
    assert response.json()["id"] == 9


def test_forbidden_host_says_what_to_configure_issue_11() -> None:
    # A reverse proxy on another port forwards Host: localhost:<its port>: accepted.
    assert post_sync(request("server/discover"), host="localhost:8443").status_code == 200
    response = post_sync(request("server/discover"), host="mcp.example.com")
    assert response.status_code == 403
    assert error_of(response)["message"] == (
        "Forbidden: Host 'mcp.example.com' not allowed; start mrtr serve with "
        "--allow-host mcp.example.com (McpApp: allowed_hosts)")


# -- a reply JSON cannot carry (#11): -32603 with the id, as JSON or as the last SSE event --------

unsendable = Server("unsendable-http")


@unsendable.prompt()
async def complex_text(ctx: Context, steps: str = "0") -> PromptMessage:
    for step in range(int(steps)):
        await ctx.report_progress(step + 1, int(steps))
    return PromptMessage(role="user", content=TextContent(text=1j))  # type: ignore[arg-type]


@unsendable.resource("mem://surrogate")
async def surrogate() -> str:
    return "\ud800"


@pytest.mark.parametrize("body", [
    request("prompts/get", {"name": "complex_text"}, id=21),
    request("resources/read", {"uri": "mem://surrogate"}, id=21),
])
def test_a_reply_json_cannot_carry_is_an_internal_error_issue_11(body: dict[str, Any]) -> None:
    response = post_sync(body, McpApp(Dispatcher(unsendable)))
    assert response.status_code == 500
    assert response.json() == {"jsonrpc": "2.0", "id": 21,
                               "error": {"code": -32603, "message": "Internal error"}}


def test_a_streamed_reply_json_cannot_carry_ends_with_an_internal_error_issue_11() -> None:
    body = request("prompts/get", {"name": "complex_text", "arguments": {"steps": "2"}}, id=22,
                   progressToken="tok")
    response = post_sync(body, McpApp(Dispatcher(unsendable)))
    assert response.status_code == 200 and response.headers["content-type"] == "text/event-stream"
    messages = sse_messages(response)
    assert [m.get("method") for m in messages] == ["notifications/progress"] * 2 + [None]
    assert messages[-1] == {"jsonrpc": "2.0", "id": 22,
                            "error": {"code": -32603, "message": "Internal error"}}


class _BrokenDispatcher(Dispatcher):
    async def handle(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug in a dispatcher")


def test_a_dispatcher_that_raises_still_answers_with_the_id_issue_11() -> None:
    response = post_sync(call("fast", id=23), McpApp(_BrokenDispatcher(apps.app)))
    assert response.status_code == 500
    assert response.json() == {"jsonrpc": "2.0", "id": 23,
                               "error": {"code": -32603, "message": "Internal error"}}


# -- request checks driven by hand, byte for byte (mutation baseline, #20) ----------------------

class Sent:
    """What McpApp sent for one ASGI request: status, raw headers and the joined body."""

    def __init__(self, messages: list[MutableMapping[str, Any]]) -> None:
        self.messages = messages
        starts = [m for m in messages if m["type"] == "http.response.start"]
        self.status: int | None = starts[0]["status"] if starts else None
        self.headers: list[tuple[bytes, bytes]] = list(starts[0]["headers"]) if starts else []
        self.body = b"".join(m.get("body", b"") for m in messages
                             if m["type"] == "http.response.body")

    def json(self) -> Any:
        return msgspec.json.decode(self.body)


def drive(app: McpApp, headers: list[tuple[bytes, bytes]], chunks: list[bytes], *,
          method: str = "POST", path: str = "/mcp", hang_up: bool = False) -> Sent:
    """One HTTP request through `app`, its body in `chunks` (one ASGI message each).

    With `hang_up` the client disconnects after the chunks, before the body is complete.
    """
    incoming: list[dict[str, Any]] = [
        {"type": "http.request", "body": chunk, "more_body": hang_up or i < len(chunks) - 1}
        for i, chunk in enumerate(chunks)]
    if hang_up:
        incoming.append({"type": "http.disconnect"})
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if incoming:
            return incoming.pop(0)
        await asyncio.Event().wait()  # the client stays connected
        raise AssertionError("unreachable")

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": method, "path": path,
             "headers": [(b"host", b"127.0.0.1:8000"), *headers]}
    run(app(scope, receive, send), timeout=10)
    return Sent(sent)


def raw_headers(body: Mapping[str, Any], **extra: str) -> list[tuple[bytes, bytes]]:
    merged = {**post_args(body)["headers"], **{k.replace("_", "-"): v for k, v in extra.items()}}
    return [(k.encode(), v.encode()) for k, v in merged.items()]


def padded(body: Mapping[str, Any], size: int) -> bytes:
    """`body` encoded and padded with JSON whitespace to exactly `size` bytes."""
    encoded = msgspec.json.encode(body)
    assert len(encoded) <= size
    return encoded + b" " * (size - len(encoded))


def refusal(sent: Sent) -> tuple[int | None, dict[str, Any]]:
    return sent.status, sent.json()


LIMITED = McpApp(Dispatcher(apps.app), max_body=1000)
TOO_LARGE = {"jsonrpc": "2.0",
             "error": {"code": -32600, "message": "Payload Too Large: the limit is 1000 bytes"}}


@pytest.mark.parametrize("declared", ["abc", "", "-1", "+5", "1.5", "12abc", "0x10", "²", "١٢"])
def test_an_invalid_content_length_is_400(declared: str) -> None:
    body = request("tools/list")
    sent = drive(McpApp(Dispatcher(apps.app)), raw_headers(body, content_length=declared),
                 [msgspec.json.encode(body)])
    assert refusal(sent) == (400, {"jsonrpc": "2.0", "error": {
        "code": -32600, "message": "Bad Request: invalid Content-Length"}})


def test_a_superscript_content_length_is_400_not_500() -> None:
    # "²".isdigit() is True but int("²") raises: the old check answered 500 and logged a bug.
    body = request("tools/list")
    sent = drive(McpApp(Dispatcher(apps.app)), raw_headers(body, content_length="²"),
                 [msgspec.json.encode(body)])
    assert sent.status == 400


def test_a_content_length_with_surrounding_spaces_is_read() -> None:
    body = msgspec.json.encode(request("tools/list"))
    sent = drive(McpApp(Dispatcher(apps.app)),
                 raw_headers(request("tools/list"), content_length=f"  {len(body)} "), [body])
    assert sent.status == 200 and "result" in sent.json()


def test_exactly_max_body_bytes_are_accepted_one_more_is_413_by_content_length() -> None:
    body = request("tools/list")
    fits = padded(body, 1000)
    ok = drive(LIMITED, raw_headers(body, content_length="1000"), [fits])
    assert ok.status == 200 and "result" in ok.json()
    over = drive(LIMITED, raw_headers(body, content_length="1001"), [fits + b" "])
    assert refusal(over) == (413, TOO_LARGE)


@pytest.mark.parametrize("pieces", [1, 3])
def test_exactly_max_body_bytes_are_accepted_one_more_is_413_without_content_length(
    pieces: int
) -> None:
    body = request("tools/list")
    fits = padded(body, 1000)
    cut = [len(fits) * i // pieces for i in range(pieces + 1)]
    chunks = [fits[a:b] for a, b in zip(cut, cut[1:], strict=False)]
    ok = drive(LIMITED, raw_headers(body), chunks)
    assert ok.status == 200 and "result" in ok.json()
    over = drive(LIMITED, raw_headers(body), [*chunks, b" "])
    assert refusal(over) == (413, TOO_LARGE)


def test_a_chunked_body_is_joined_in_order() -> None:
    encoded = msgspec.json.encode(call("add", {"a": 2, "b": 40}, id="chunks"))
    chunks = [encoded[:10], b"", encoded[10:25], encoded[25:]]
    sent = drive(McpApp(Dispatcher(apps.app)), raw_headers(call("add")), chunks)
    assert sent.status == 200
    assert sent.json()["id"] == "chunks"
    assert sent.json()["result"]["content"][0]["text"] == "42"


def test_a_client_that_hangs_up_while_sending_gets_nothing() -> None:
    encoded = msgspec.json.encode(request("tools/list"))
    sent = drive(McpApp(Dispatcher(apps.app)), raw_headers(request("tools/list")),
                 [encoded[:10]], hang_up=True)
    assert sent.messages == []


def recording_app(seen: list[dict[str, str]], **options: Any) -> McpApp:
    """An McpApp whose authenticator records the decoded headers and lets everyone in."""

    async def record(headers: Mapping[str, str]) -> str | None:
        seen.append(dict(headers))
        return None

    return McpApp(Dispatcher(apps.app), authenticator=record, **options)


def test_header_names_are_lowercased_and_repeated_headers_joined_with_comma_space() -> None:
    seen: list[dict[str, str]] = []
    body = request("tools/list")
    extra = [(b"X-Tag", b"one"), (b"x-tag", b"two"), (b"X-TAG", b"three"),
             (b"X-Name", "Zoë".encode())]
    sent = drive(recording_app(seen), [*raw_headers(body), *extra], [msgspec.json.encode(body)])
    assert sent.status == 200
    assert seen[0]["x-tag"] == "one, two, three"
    assert seen[0]["x-name"] == "Zoë"
    assert seen[0]["host"] == "127.0.0.1:8000"
    assert seen[0]["content-type"] == "application/json"


@pytest.mark.parametrize("header", [
    (b"x-junk", b"\xff\xfe\xfd"), ("x-é".encode(), b"ok"), (b"\xff", b"ok"),
])
def test_a_header_name_not_ascii_or_a_value_not_utf8_is_400(header: tuple[bytes, bytes]) -> None:
    body = request("tools/list")
    sent = drive(McpApp(Dispatcher(apps.app)), [*raw_headers(body), header],
                 [msgspec.json.encode(body)])
    assert refusal(sent) == (400, {"jsonrpc": "2.0", "error": {
        "code": -32600, "message": "Bad Request: header is not valid UTF-8"}})


def test_headers_of_exactly_64_kib_are_accepted_one_byte_more_is_400() -> None:
    body = request("tools/list")
    headers = [(b"host", b"127.0.0.1:8000"), *raw_headers(body)]
    used = sum(len(name) + len(value) for name, value in headers) + len(b"x-pad")
    fits = (b"x-pad", b"p" * (64 * 1024 - used))
    ok = drive(McpApp(Dispatcher(apps.app)), [*raw_headers(body), fits],
               [msgspec.json.encode(body)])
    assert ok.status == 200
    over = drive(McpApp(Dispatcher(apps.app)), [*raw_headers(body), (fits[0], fits[1] + b"p")],
                 [msgspec.json.encode(body)])
    assert refusal(over) == (400, {"jsonrpc": "2.0", "error": {
        "code": -32600, "message": "Bad Request: headers too large"}})


def test_header_names_count_toward_the_size_limit() -> None:
    body = request("tools/list")
    headers = [(b"host", b"127.0.0.1:8000"), *raw_headers(body)]
    used = sum(len(name) + len(value) for name, value in headers)
    long_name = (b"x-" + b"n" * (64 * 1024 - used - 2), b"v")  # one byte too many
    sent = drive(McpApp(Dispatcher(apps.app)), [*raw_headers(body), long_name],
                 [msgspec.json.encode(body)])
    assert sent.status == 400


# -- who is calling: the Peer the handler sees ------------------------------------------------

peers = Server("peer-http")


@peers.tool()
async def peer(ctx: Context) -> str:
    return f"{ctx.peer.principal}|{ctx.peer.transport}"


def peer_text(app: McpApp, **headers: str) -> str:
    response = post_sync(call("peer"), app, **headers)
    assert response.status_code == 200, response.text
    text: str = response.json()["result"]["content"][0]["text"]
    return text


def test_the_handler_sees_an_http_peer_with_the_authenticated_principal() -> None:
    authed = McpApp(Dispatcher(peers), authenticator=bearer)
    assert peer_text(authed, authorization="Bearer s3cret") == "user:42|http"
    assert peer_text(McpApp(Dispatcher(peers))) == "None|http"


def test_a_refusal_from_the_authenticator_carries_its_message_and_challenge() -> None:
    async def deny(headers: Mapping[str, str]) -> str | None:
        raise Unauthorized("token expired", challenge='Bearer realm="zoë €"')

    body = call("whoami")
    sent = drive(McpApp(Dispatcher(apps.app), authenticator=deny), raw_headers(body),
                 [msgspec.json.encode(body)])
    assert refusal(sent) == (401, {"jsonrpc": "2.0", "error": {
        "code": -32600, "message": "token expired"}})
    # Latin-1 where it can, "?" where it cannot: a challenge never breaks the reply.
    assert (b"www-authenticate", b'Bearer realm="zo\xeb ?"') in sent.headers


def test_the_authenticator_is_asked_before_the_body_is_read() -> None:
    async def deny(headers: Mapping[str, str]) -> str | None:
        raise Unauthorized()

    sent = drive(McpApp(Dispatcher(apps.app), authenticator=deny),
                 [(b"content-type", b"text/plain")], [b"{not json"])
    assert sent.status == 401
    assert (b"www-authenticate", b"Bearer") in sent.headers


# -- which era serves a request: the Dispatcher, or a 2025 session ------------------------------

SESSION_HEADERS = {"content-type": "application/json",
                   "accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {},
    "clientInfo": {"name": "raw", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def exchange_all(app: McpApp, steps: list[tuple[str, dict[str, Any] | None, dict[str, str]]]
                 ) -> list[httpx.Response]:
    """Send (method, JSON body, headers) in order; "{sid}" in a header is the session id."""
    async def go() -> list[httpx.Response]:
        replies: list[httpx.Response] = []
        sid = "none-yet"
        async with asgi_client(app) as client:
            for method, body, headers in steps:
                filled = {k: v.replace("{sid}", sid) for k, v in headers.items()}
                content = msgspec.json.encode(body) if body is not None else b""
                reply = await client.request(method, "/mcp", content=content, headers=filled)
                sid = reply.headers.get("mcp-session-id", sid)
                replies.append(reply)
        return replies

    return run(go())


def session_headers(**extra: str) -> dict[str, str]:
    return {**SESSION_HEADERS, "mcp-session-id": "{sid}", "mcp-protocol-version": "2025-11-25",
            **{k.replace("_", "-"): v for k, v in extra.items()}}


@pytest.mark.parametrize(("options", "version", "status"), [
    ({}, None, 200), ({}, "2025-11-25", 200), ({}, "2026-07-28", 404),
    ({"sessions": False}, None, 404),
])
def test_an_initialize_opens_a_session_only_in_a_session_era(
    options: dict[str, Any], version: str | None, status: int
) -> None:
    headers = SESSION_HEADERS | ({"mcp-protocol-version": version} if version else {})
    [reply] = exchange_all(McpApp(Dispatcher(apps.app), **options),
                           [("POST", INITIALIZE, headers)])
    assert reply.status_code == status
    assert ("mcp-session-id" in reply.headers) == (status == 200)
    if status == 404:
        assert reply.json()["error"]["code"] == -32601


def test_a_2026_request_without_its_version_header_keeps_its_2026_error() -> None:
    body = request("tools/list", id=4)
    headers = post_args(body)["headers"]
    del headers["mcp-protocol-version"]
    response = raw_post(msgspec.json.encode(body), headers)
    assert (response.status_code, error_of(response)["code"]) == (400, -32020)
    assert response.json()["id"] == 4


def test_the_authenticated_principal_reaches_a_session_and_binds_it() -> None:
    auth = {"authorization": "Bearer s3cret"}
    whoami = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
              "params": {"name": "whoami", "arguments": {}}}
    replies = exchange_all(McpApp(Dispatcher(apps.app), authenticator=bearer), [
        ("POST", INITIALIZE, SESSION_HEADERS | auth),
        ("POST", INITIALIZED, session_headers(**auth)),
        ("POST", whoami, session_headers(**auth)),
        ("DELETE", None, session_headers()),
        ("DELETE", None, session_headers(**auth)),
    ])
    assert [r.status_code for r in replies[:2]] == [200, 202]
    assert "user:42" in replies[2].text
    assert replies[3].status_code == 401 and replies[3].headers["www-authenticate"] == "Bearer"
    assert replies[4].status_code == 200


@pytest.mark.parametrize(("options", "headers", "status"), [
    ({}, {"mcp-session-id": "nope"}, 404),
    ({}, {"mcp-session-id": "nope", "mcp-protocol-version": "2025-06-18"}, 404),
    ({}, {"mcp-session-id": "nope", "mcp-protocol-version": VERSION}, 202),
    ({}, {}, 202),
    ({"sessions": False}, {"mcp-session-id": "nope"}, 202),
])
def test_a_notification_goes_to_a_session_only_with_its_id_in_a_session_era(
    options: dict[str, Any], headers: dict[str, str], status: int
) -> None:
    [reply] = exchange_all(McpApp(Dispatcher(apps.app), **options),
                           [("POST", INITIALIZED, SESSION_HEADERS | headers)])
    assert reply.status_code == status
    if status == 404:
        assert reply.json()["error"]["code"] == -32001


@pytest.mark.parametrize(("options", "method", "headers", "status"), [
    ({}, "GET", {"mcp-session-id": "nope"}, 404),
    ({}, "DELETE", {"mcp-session-id": "nope"}, 404),
    ({}, "GET", {}, 405),
    ({}, "PUT", {"mcp-session-id": "nope"}, 405),
    ({}, "PATCH", {"mcp-session-id": "nope"}, 405),
    ({"sessions": False}, "GET", {"mcp-session-id": "nope"}, 405),
    ({"sessions": False}, "DELETE", {"mcp-session-id": "nope"}, 405),
])
def test_get_and_delete_are_served_only_within_a_session(
    options: dict[str, Any], method: str, headers: dict[str, str], status: int
) -> None:
    [reply] = exchange_all(McpApp(Dispatcher(apps.app), **options),
                           [(method, None, SESSION_HEADERS | headers)])
    assert reply.status_code == status
    if status == 405:
        assert reply.headers["allow"] == "POST"
        assert reply.json() == {"jsonrpc": "2.0", "error": {
            "code": -32600, "message": "Method Not Allowed: use POST"}}
    else:
        assert reply.json()["error"]["code"] == -32001


# -- the other ASGI scopes, and the log of an unexpected error ---------------------------------

def asgi_events(scope: dict[str, Any], incoming: list[dict[str, Any]]) -> list[dict[str, Any]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    run(McpApp(Dispatcher(apps.app))(scope, receive, send), timeout=5)
    return sent


def test_a_websocket_is_closed_with_policy_violation() -> None:
    sent = asgi_events({"type": "websocket", "path": "/mcp", "headers": []},
                       [{"type": "websocket.connect"}])
    assert sent == [{"type": "websocket.close", "code": 1008}]


def test_an_unknown_scope_type_is_ignored() -> None:
    assert asgi_events({"type": "telepathy"}, []) == []


def test_an_unexpected_error_is_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture
) -> None:
    class Broken(Dispatcher):
        def receive(self, body: bytes, headers: Mapping[str, str] | None = None) -> Any:
            raise RuntimeError("boom")

    with caplog.at_level("ERROR", logger="mrtr.transports.http"):
        response = post_sync(request("tools/list"), McpApp(Broken(apps.app)))
    assert response.status_code == 500
    [record] = [r for r in caplog.records if r.name == "mrtr.transports.http"]
    assert record.getMessage() == "unexpected error in the HTTP transport"
    assert record.exc_info is not None and str(record.exc_info[1]) == "boom"


# -- path, method and media type, byte for byte ---------------------------------------------

def test_a_wrong_path_names_the_endpoint() -> None:
    sent = drive(McpApp(Dispatcher(apps.app), path="/rpc"), raw_headers(request("tools/list")),
                 [b"{}"])
    assert refusal(sent) == (404, {"jsonrpc": "2.0", "error": {
        "code": -32600, "message": "Not Found: the MCP endpoint is POST /rpc"}})


def test_a_405_sends_a_lowercase_allow_header() -> None:
    # ASGI header names are lowercase; HTTP/2 refuses a response with an uppercase one.
    sent = drive(McpApp(Dispatcher(apps.app)), [], [b""], method="GET")
    assert sent.status == 405
    assert (b"allow", b"POST") in sent.headers


def test_a_scope_without_headers_is_refused_not_a_crash() -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(dict(message))

    scope = {"type": "http", "method": "POST", "path": "/mcp"}  # no Host: 403
    run(McpApp(Dispatcher(apps.app))(scope, receive, send), timeout=5)
    assert sent[0]["status"] == 403


UNSUPPORTED = {"jsonrpc": "2.0", "error": {
    "code": -32600, "message": "Unsupported Media Type: Content-Type must be application/json"}}


@pytest.mark.parametrize(("media", "status"), [
    (None, 415), ("", 415), ("text/plain", 415), ("application/json-seq", 415),
    ("application/json; charset=utf-8; profile=x", 200), ("application/json;charset=utf-8", 200),
    (" application/json ", 200), ("APPLICATION/JSON", 200),
])
def test_the_media_type_is_application_json_with_any_parameters(
    media: str | None, status: int
) -> None:
    body = request("tools/list")
    headers = [h for h in raw_headers(body) if h[0] != b"content-type"]
    if media is not None:
        headers.append((b"content-type", media.encode()))
    sent = drive(McpApp(Dispatcher(apps.app)), headers, [msgspec.json.encode(body)])
    if status == 415:
        assert refusal(sent) == (415, UNSUPPORTED)
    else:
        assert sent.status == 200 and "result" in sent.json()


def test_body_and_more_body_may_be_left_out_of_a_request_message() -> None:
    """ASGI: `body` defaults to b"" and `more_body` to False."""
    encoded = msgspec.json.encode(request("tools/list", id="bare"))
    incoming: list[dict[str, Any]] = [
        {"type": "http.request", "body": encoded, "more_body": True},
        {"type": "http.request"}]
    sent: list[MutableMapping[str, Any]] = []

    async def receive() -> dict[str, Any]:
        # After the body a client that is still waiting; a read past the end means hanging up.
        return incoming.pop(0) if incoming else {"type": "http.disconnect"}

    async def send(message: MutableMapping[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/mcp",
             "headers": [(b"host", b"127.0.0.1:8000"), *raw_headers(request("tools/list"))]}
    run(McpApp(Dispatcher(apps.app))(scope, receive, send), timeout=10)
    reply = Sent(sent)
    assert reply.status == 200
    assert reply.json()["id"] == "bare"


def test_defaults_and_options_are_kept() -> None:
    app = McpApp(Dispatcher(apps.app))
    assert (app.path, app.max_body, app.request_timeout, app.keepalive, app.expose_worker) == (
        "/mcp", 4 * 1024 * 1024, 300.0, 15.0, False)
    assert app.sessions is not None and app.sessions.ask_timeout == 600.0
    tuned = McpApp(Dispatcher(apps.app), request_timeout=5.0, keepalive=0.5, expose_worker=True,
                   ask_timeout=7.0)
    assert (tuned.request_timeout, tuned.keepalive, tuned.expose_worker) == (5.0, 0.5, True)
    assert tuned.sessions is not None and tuned.sessions.ask_timeout == 7.0
    assert McpApp(Dispatcher(apps.app), sessions=False).sessions is None


def test_the_worker_header_name_is_lowercase() -> None:
    body = request("tools/list")
    sent = drive(McpApp(Dispatcher(apps.app), expose_worker=True), raw_headers(body),
                 [msgspec.json.encode(body)])
    assert [name for name, _ in sent.headers if name.lower() == b"mcp-debug-worker"] == [
        b"mcp-debug-worker"]


# -- a trailing slash (#27) -------------------------------------------------------------------
@pytest.mark.parametrize("url", ["/mcp/", "/returns/mcp/", "/returns/mcp"])
def test_27_the_endpoint_with_a_trailing_slash_is_the_endpoint_behind_a_mount_too(
    url: str,
) -> None:
    # Before: `/returns/mcp/` (what a person types after reading "the prefix + /mcp") was 404.
    from starlette.applications import Starlette
    from starlette.routing import Mount

    mcp = McpApp(Dispatcher(apps.app))
    parent = Starlette(routes=[Mount("/returns", app=mcp)]) if url.startswith("/returns") \
        else mcp

    async def go() -> httpx.Response:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=parent),
                                     base_url="http://127.0.0.1:8000") as client:
            return await client.post(url, **post_args(request("tools/list")))

    response = run(go())
    assert response.status_code == 200, response.text
    assert response.json()["result"]["tools"]


def test_27_the_old_http_sse_transport_is_refused_as_docs_legacy_md_says() -> None:
    # MCP Inspector's `--transport sse` opens a GET event stream: 405 on the endpoint, 404 at
    # /sse; docs/legacy.md says so and names the transport to choose instead.
    sse = {"accept": "text/event-stream"}
    assert raw_post(b"", sse, path="/mcp", method="GET").status_code == 405
    assert raw_post(b"", sse, path="/sse", method="GET").status_code == 404
    legacy = " ".join((Path(__file__).parents[2] / "docs" / "legacy.md").read_text().split())
    assert "### The old HTTP+SSE transport is not served" in legacy
    assert "`--transport http`, not `--transport sse`" in legacy
