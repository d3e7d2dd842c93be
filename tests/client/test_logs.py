"""`Client(on_log=...)`: the server's log messages, asked for in both eras (#27)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from mrtr.client import Client, Handlers, Mode
from mrtr.client._requests import LogRoute
from mrtr.client.transports._http import HTTPTransport
from mrtr.http import McpApp
from mrtr.protocol import UNSET, LoggingLevel, LoggingMessageNotificationParams, TextContent
from mrtr.server import Context, Dispatcher, Server
from tests.transports.logged_app import answer_booking
from tests.transports.logged_app import app as logged

from .rogue import serve
from .session_mock import SessionMock

HANDLERS = Handlers(elicitation=answer_booking)
Seen = list[LoggingMessageNotificationParams]

echo = Server("echo-level", version="1")


@echo.tool()
async def level(ctx: Context) -> str:
    """The log level this request asked for."""
    return str(ctx.meta.log_level)


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    for base in serve(McpApp(Dispatcher(logged))):
        yield base + "/mcp"


def book(client: Client) -> str:
    async def go() -> str:
        async with client:
            result = await client.call_tool("book", {"order_id": "A-1"})
        block = result.content[0]
        return block.text if isinstance(block, TextContent) else ""

    return asyncio.run(go())


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_each_message_reaches_the_handler_once_in_both_eras_issue27(url: str, mode: Mode) -> None:
    seen: Seen = []
    client = Client(HTTPTransport(url), handlers=HANDLERS, mode=mode, on_log=seen.append)
    assert book(client) == "Booked A-1: 2 box(es)."
    assert [(p.level, p.data, p.logger) for p in seen] == [
        ("info", "booking A-1", "carrier"), ("warning", "the carrier is late today", UNSET)]


@pytest.mark.parametrize("mode", ["modern", "legacy"])
def test_the_level_filters_on_the_server_issue27(url: str, mode: Mode) -> None:
    seen: Seen = []
    warning: LoggingLevel = "warning"
    client = Client(HTTPTransport(url), handlers=HANDLERS, mode=mode, on_log=seen.append,
                    log_level=warning)
    book(client)
    assert [p.level for p in seen] == ["warning"]


def test_no_handler_asks_for_no_level_issue27() -> None:
    async def go(client: Client) -> str:
        async with client:
            block = (await client.call_tool("level")).content[0]
        return block.text if isinstance(block, TextContent) else ""

    assert asyncio.run(go(Client(echo))) == "UNSET"
    assert asyncio.run(go(Client(echo, on_log=lambda p: None))) == "info"
    assert asyncio.run(go(Client(echo, on_log=lambda p: None, log_level="debug"))) == "debug"


def test_a_failing_handler_is_logged_and_the_call_goes_on_issue27(
        url: str, caplog: pytest.LogCaptureFixture) -> None:
    def broken(params: LoggingMessageNotificationParams) -> None:
        raise RuntimeError("handler bug")

    with caplog.at_level(logging.ERROR, logger="mrtr.client"):
        assert book(Client(HTTPTransport(url), handlers=HANDLERS, on_log=broken)) == (
            "Booked A-1: 2 box(es).")
    assert caplog.text.count("the log handler failed") == 2 and "handler bug" in caplog.text


def test_one_message_seen_by_several_sinks_is_handled_once_issue27() -> None:
    # Over stdio a message without a request id reaches every request in flight.
    seen: Seen = []
    route = LogRoute(seen.append)
    params = LoggingMessageNotificationParams(level="info", data="x")
    message = b'{"jsonrpc":"2.0","method":"notifications/message","params":{}}'
    route(message, params)
    route(message, params)  # the same bytes, handed to a second request's sink
    route(bytes(bytearray(message)), params)  # the next message, equal by chance
    assert seen == [params, params]


def test_a_2025_server_without_logging_is_not_asked_for_a_level_issue27() -> None:
    mock = SessionMock()

    async def go(url: str) -> None:
        async with Client(HTTPTransport(url), mode="legacy", on_log=print) as client:
            await client.call_tool("anything", {})

    for base in serve(mock):
        asyncio.run(go(base + "/mcp"))
    assert "POST initialize" in mock.methods()
    assert "POST logging/setLevel" not in mock.methods()
