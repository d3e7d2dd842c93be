"""2025 sessions: the Client against initialize-based servers over real HTTP and stdio (#12)."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mrtr.client import Client, Handlers, VersionRefused
from mrtr.client.transports._http import HTTPTransport
from mrtr.client.transports._stdio import StdioTransport
from mrtr.errors import MethodNotFound
from mrtr.protocol import (
    CallToolResult,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    Root,
    TextContent,
)

from .rogue import serve
from .session_mock import SessionMock

STDIO_MOCK = [sys.executable, str(Path(__file__).with_name("stdio_session_mock.py"))]


async def name_it(params: ElicitRequestParams) -> ElicitResult:
    return ElicitResult(action="accept", content={"name": "Ada"})


def text(result: CallToolResult) -> str:
    assert isinstance(result.content[0], TextContent)
    return result.content[0].text


@pytest.fixture
def mock() -> Iterator[tuple[SessionMock, str]]:
    app = SessionMock()
    for url in serve(app):
        yield app, url + "/mcp"


def test_auto_falls_back_to_initialize_and_answers_server_requests(
    mock: tuple[SessionMock, str],
) -> None:
    app, url = mock

    async def go() -> str:
        async with Client(HTTPTransport(url), handlers=Handlers(elicitation=name_it)) as client:
            return text(await client.call_tool("ask", {}))

    assert json.loads(asyncio.run(go())) == {"name": "Ada"}
    assert "GET" in app.methods()  # the listen stream, opened in the background (405 here)
    seen = [s for s in app.seen if s.verb != "GET"]
    assert [f"{s.verb} {s.body.get('method', '')}".strip() for s in seen] == [
        "POST server/discover", "POST initialize", "POST notifications/initialized",
        "POST tools/list", "POST tools/call", "POST", "POST", "DELETE",
    ]
    init = seen[1]
    assert "mcp-protocol-version" not in init.headers and "mcp-session-id" not in init.headers
    assert init.body["params"]["protocolVersion"] == "2025-11-25"
    assert init.body["params"]["capabilities"] == {"elicitation": {"form": {}}}
    for later in seen[2:]:
        assert later.headers["mcp-session-id"] == "session-1"
        assert later.headers["mcp-protocol-version"] == "2025-11-25"
    call = seen[4].body
    assert "_meta" not in call["params"]  # no 2026 `_meta`: it would select the modern era
    ping, answer = seen[5].body, seen[6].body
    assert ping == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    assert answer["id"] == "e1" and answer["result"]["action"] == "accept"


def test_a_session_id_on_an_error_reply_is_not_kept() -> None:
    app = SessionMock(id_on_400=True)

    async def go(url: str) -> None:
        async with Client(HTTPTransport(url)) as client:
            assert text(await client.call_tool("other", {})) == "ok"

    for url in serve(app):
        asyncio.run(go(url + "/mcp"))
    init = next(s for s in app.seen if s.body.get("method") == "initialize")
    assert "mcp-session-id" not in init.headers


def test_legacy_mode_never_probes_and_discover_reports_initialize(
    mock: tuple[SessionMock, str],
) -> None:
    app, url = mock

    async def go() -> None:
        async with Client(HTTPTransport(url), mode="legacy") as client:
            found = await client.discover()
            assert found.supported_versions == ["2025-11-25"]
            assert found.instructions == "hi"
            assert found.capabilities.tools == {}
            assert text(await client.call_tool("other", {})) == "ok"

    asyncio.run(go())
    assert "POST server/discover" not in app.methods()


def test_undeclared_elicitation_is_refused_to_the_server(mock: tuple[SessionMock, str]) -> None:
    app, url = mock

    async def go() -> str:
        async with Client(HTTPTransport(url), mode="legacy") as client:
            return text(await client.call_tool("ask", {}))

    assert json.loads(asyncio.run(go()))["code"] == -32602


@pytest.mark.parametrize(("offered", "ok"), [("2025-06-18", True), ("2025-03-26", True),
                                             ("2024-11-05", False), ("2026-07-28", False)])
def test_initialize_version_negotiation(offered: str, ok: bool) -> None:
    app = SessionMock(version=offered)

    async def go(url: str) -> None:
        async with Client(HTTPTransport(url), mode="legacy") as client:
            await client.list_tools()

    for url in serve(app):
        if ok:
            asyncio.run(go(url + "/mcp"))
            assert app.seen[-2].headers["mcp-protocol-version"] == offered
        else:
            with pytest.raises(VersionRefused, match=f"'{offered}'.*2025-11-25"):
                asyncio.run(go(url + "/mcp"))


def test_a_404_reinitializes_once(mock: tuple[SessionMock, str]) -> None:
    app, url = mock

    async def go() -> None:
        async with Client(HTTPTransport(url), mode="legacy") as client:
            await client.list_tools()
            app.expire()
            assert text(await client.call_tool("other", {})) == "ok"

    asyncio.run(go())
    assert app.methods().count("POST initialize") == 2
    assert app.seen[-2].headers["mcp-session-id"] == "session-2"


def test_a_404_to_the_listen_get_keeps_the_session() -> None:
    app = SessionMock(get_status=404)

    async def go(url: str) -> None:
        async with Client(HTTPTransport(url), mode="legacy") as client:
            await client.discover()  # opens the session and starts the GET
            await asyncio.sleep(0.3)  # the GET has had its 404
            assert text(await client.call_tool("other", {})) == "ok"

    for url in serve(app):
        asyncio.run(go(url + "/mcp"))
    assert app.methods().count("POST initialize") == 1
    assert "GET" in app.methods()


def test_a_dropped_stream_resumes_after_retry(mock: tuple[SessionMock, str]) -> None:
    app, url = mock

    async def go() -> tuple[str, float]:
        async with Client(HTTPTransport(url), mode="legacy") as client:
            await client.list_tools()
            started = time.monotonic()
            result = await client.call_tool("resume", {})
            return text(result), time.monotonic() - started

    value, elapsed = asyncio.run(go())
    assert value == "resumed" and elapsed >= 0.1
    resumed = [s for s in app.seen if s.headers.get("last-event-id")]
    assert len(resumed) == 1 and resumed[0].verb == "GET"
    assert resumed[0].headers["last-event-id"] == "ev-1"
    assert app.methods().count("POST tools/call") == 1  # never re-posted


def test_stdio_auto_falls_back_and_answers_on_stdout() -> None:
    async def go() -> tuple[str, str]:
        transport = StdioTransport(STDIO_MOCK)
        async with Client(transport, handlers=Handlers(elicitation=name_it)) as client:
            asked = text(await client.call_tool("ask", {}))
            log = text(await client.call_tool("log", {}))
            return asked, log

    asked, log = asyncio.run(go())
    assert json.loads(asked) == {"name": "Ada"}
    assert [m["method"] for m in json.loads(log)] == [
        "server/discover", "initialize", "notifications/initialized", "tools/call", "tools/call"]


def test_stdio_silent_probe_falls_back_after_the_probe_timeout() -> None:
    async def go() -> float:
        transport = StdioTransport([*STDIO_MOCK, "--silent-discover"])
        async with Client(transport) as client:
            client.era.probe_timeout = 0.3
            started = time.monotonic()
            assert text(await client.call_tool("other", {})) == "ok"
            return time.monotonic() - started

    assert 0.3 <= asyncio.run(go()) < 5


def test_stdio_unknown_server_method_is_method_not_found() -> None:
    async def go() -> str:
        async with Client(StdioTransport(STDIO_MOCK), mode="legacy") as client:
            return text(await client.call_tool("weird", {}))

    error = json.loads(asyncio.run(go()))
    assert error["code"] == MethodNotFound.code


async def sample(params: CreateMessageRequestParams) -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(text="Paris"), model="m")


async def broken(params: ElicitRequestParams) -> ElicitResult:
    raise RuntimeError("handler bug")


def test_stdio_sampling_roots_and_a_failing_handler() -> None:
    handlers = Handlers(sampling=sample, roots=[Root(uri="file:///w", name="w")],
                        elicitation=broken)

    async def go() -> list[object]:
        transport = StdioTransport(STDIO_MOCK)
        async with Client(transport, handlers=handlers, mode="legacy", timeout=8) as c:
            names = ("sample", "roots", "elicit")
            return [json.loads(text(await c.call_tool(n, {}))) for n in names]

    sampled, roots, failed = asyncio.run(go())
    assert sampled == {"role": "assistant", "content": {"type": "text", "text": "Paris"},
                       "model": "m"}
    assert roots == {"roots": [{"uri": "file:///w", "name": "w"}]}
    assert failed == {"code": -32603, "message": "Internal error"}


def test_stdio_roots_without_a_handler_is_method_not_found() -> None:
    async def go() -> str:
        async with Client(StdioTransport(STDIO_MOCK), mode="legacy") as client:
            return text(await client.call_tool("roots", {}))

    assert json.loads(asyncio.run(go()))["code"] == -32601
