"""Era choice: one probe per Client, then no extra round trip; what counts as a 2026 reply (#12)."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from mrtr.client import Client
from mrtr.client._era import Era, speaks_modern
from mrtr.client._handlers import Handlers
from mrtr.client.transports._http import HTTPTransport
from mrtr.http._app import McpApp
from mrtr.protocol import Implementation
from mrtr.server import Dispatcher
from tests.cli.app import app


class Counting(httpx.AsyncBaseTransport):
    """An ASGI transport that records each POST's JSON-RPC method and version header."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self.inner = inner
        self.posts: list[tuple[str, str | None]] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            body = json.loads(request.content)
            self.posts.append((body["method"], request.headers.get("mcp-protocol-version")))
        return await self.inner.handle_async_request(request)


def modern_client(**options: object) -> tuple[Client, Counting]:
    counting = Counting(httpx.ASGITransport(app=McpApp(Dispatcher(app))))
    client = Client(HTTPTransport("http://127.0.0.1/mcp", transport=counting), **options)  # type: ignore[arg-type]
    return client, counting


def test_auto_negotiates_2026_and_probes_only_once() -> None:
    async def go() -> Counting:
        client, counting = modern_client()
        async with client:
            await client.list_tools()
            assert [m for m, _ in counting.posts] == ["server/discover", "tools/list"]
            await client.list_tools(refresh=True)
            await client.call_tool("add", {"a": 1, "b": 2})
            assert client.era.session is None and client.era.probes == 1
        return counting

    counting = asyncio.run(go())
    assert [m for m, _ in counting.posts] == [
        "server/discover", "tools/list", "tools/list", "tools/call"]
    assert {v for _, v in counting.posts} == {"2026-07-28"}


def test_a_first_discover_is_its_own_probe() -> None:
    async def go() -> Counting:
        client, counting = modern_client()
        async with client:
            found = await client.discover()
            assert "2026-07-28" in found.supported_versions
        return counting

    assert [m for m, _ in asyncio.run(go()).posts] == ["server/discover"]


def test_modern_mode_never_probes() -> None:
    async def go() -> Counting:
        client, counting = modern_client(mode="modern")
        async with client:
            await client.list_tools()
        return counting

    assert [m for m, _ in asyncio.run(go()).posts] == ["tools/list"]


def test_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="mode must be"):
        Era(HTTPTransport("http://x/mcp"), "both",  # type: ignore[arg-type]
            handlers=Handlers(), client_info=Implementation(name="t", version="1"))


def reply(body: object) -> bytes:
    return json.dumps(body).encode()


def error(code: int, data: object = None) -> bytes:
    err: dict[str, object] = {"code": code, "message": "x"}
    if data is not None:
        err["data"] = data
    return reply({"jsonrpc": "2.0", "id": 1, "error": err})


@pytest.mark.parametrize(("raw", "modern"), [
    (reply({"jsonrpc": "2.0", "id": 1, "result": {
        "resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {}}}), True),
    (error(-32022, {"supported": ["2026-07-28"], "requested": "2026-07-28"}), True),
    (error(-32022, {"supported": ["2099-01-01"], "requested": "2026-07-28"}), True),
    (error(-32022, {"supported": ["2025-11-25"], "requested": "2026-07-28"}), False),
    (error(-32020), True),
    (error(-32021, {"requiredCapabilities": {}}), True),
    (error(-32601), False),
    (error(-32600), False),
    (error(-32000), False),
    (reply({"jsonrpc": "2.0", "id": 1, "result": {}}), False),  # a mock answering anything
    (b"<html>Not Found</html>", False),
    (b"", False),
])
def test_what_counts_as_a_2026_reply(raw: bytes, modern: bool) -> None:
    assert speaks_modern(raw) is modern
