"""The client against the real mrtr server, in process (ASGI, no sockets)."""

from __future__ import annotations

import asyncio

import httpx

from mrtr.client import Client, Handlers
from mrtr.client.transports._http import HTTPTransport
from mrtr.http._app import McpApp
from mrtr.protocol import ElicitRequestParams, ElicitResult, TextContent
from mrtr.server import Dispatcher
from tests.cli.app import app


def make_client(handlers: Handlers) -> Client:
    asgi = httpx.ASGITransport(app=McpApp(Dispatcher(app)))
    return Client(HTTPTransport("http://127.0.0.1/mcp", transport=asgi), handlers=handlers)


def test_multi_round_tool_over_http() -> None:
    asked: list[str] = []

    async def elicit(params: ElicitRequestParams) -> ElicitResult:
        asked.append(params.message)
        if "Return details" in params.message:
            return ElicitResult(action="accept", content={"reason": "broken", "boxes": 2})
        return ElicitResult(action="accept", content={"confirm": True})

    async def go() -> str:
        async with make_client(Handlers(elicitation=elicit)) as client:
            discovered = await client.discover()
            assert "2026-07-28" in discovered.supported_versions
            tools = {t.name for t in await client.list_tools()}
            assert {"book_return", "add"} <= tools
            result = await client.call_tool("book_return", {"order_id": "A1"})
            assert isinstance(result.content[0], TextContent)
            return result.content[0].text

    assert asyncio.run(go()) == "Return booked: A1, 2 box(es), broken."
    assert len(asked) == 2


def test_declined_confirmation() -> None:
    async def elicit(params: ElicitRequestParams) -> ElicitResult:
        if "Return details" in params.message:
            return ElicitResult(action="accept", content={"reason": "other", "boxes": 1})
        return ElicitResult(action="decline")

    async def go() -> str:
        async with make_client(Handlers(elicitation=elicit)) as client:
            result = await client.call_tool("book_return", {"order_id": "B2"})
            assert isinstance(result.content[0], TextContent)
            return result.content[0].text

    assert asyncio.run(go()) == "Return not booked."
