"""The request line (#27): one `info` record per MCP request on `mrtr.requests`, with its
method, target, outcome, round, flow, request id, principal digest and duration."""

from __future__ import annotations

import asyncio
import hashlib
import io
import json
import logging
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest

from mrtr.server import Context, Dispatcher, Form, Peer, Server, SessionServer
from mrtr.server._request_log import REQUEST_LOGGER, RequestLog
from mrtr.serving._logging import JsonFormatter, RequestContext, TextFormatter
from mrtr.stores import MemoryStore
from mrtr.testing import Clock, TestClient
from tests.transports.conftest import call

app = Server("request-log-tests", version="1")
LOGGER = logging.getLogger(REQUEST_LOGGER)


class Name(Form):
    name: str


@app.tool()
async def greet(ctx: Context) -> str:
    name = await ctx.elicit("Your name?", Name, key="name")
    if not await ctx.confirm(f"Greet {name.name}?", key="sure"):
        return "No."
    return f"Hello {name.name}"


@app.tool()
async def boom() -> str:
    raise ZeroDivisionError("division by zero")


@app.prompt()
async def broken() -> str:
    raise KeyError("secret-path")


class Captured:
    """What a handler on `mrtr.requests` wrote, as JSON objects (or text lines)."""

    def __init__(self, stream: io.StringIO) -> None:
        self.stream = stream

    @property
    def lines(self) -> list[str]:
        return self.stream.getvalue().splitlines()

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]


def capture(formatter: logging.Formatter, level: int = logging.INFO) -> Iterator[Captured]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(RequestContext())
    handler.setFormatter(formatter)
    before = LOGGER.level
    LOGGER.addHandler(handler)
    LOGGER.setLevel(level)
    try:
        yield Captured(stream)
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(before)


@pytest.fixture
def json_lines() -> Iterator[Captured]:
    yield from capture(JsonFormatter())


@pytest.fixture
def text_lines() -> Iterator[Captured]:
    yield from capture(TextFormatter())


def test_a_three_round_flow_writes_three_lines_with_one_flow_id(json_lines: Captured) -> None:
    with TestClient(app, principal="alice@example.com") as client:
        flow = client.call_tool("greet", answers={"name": {"name": "Ada"}, "sure": True})
    assert flow.text == "Hello Ada"
    entries = json_lines.entries
    assert [(e["round"], e["outcome"], e["request_id"]) for e in entries] == [
        (1, "input_required", "1"), (2, "input_required", "2"), (3, "complete", "3")]
    assert len({e["flow_id"] for e in entries}) == 1 and len(entries[0]["flow_id"]) >= 12
    assert {(e["logger"], e["level"], e["method"], e["target"]) for e in entries} == {
        ("mrtr.requests", "info", "tools/call", "greet")}
    digest = hashlib.sha256(b"alice@example.com").hexdigest()[:16]
    assert {e["principal"] for e in entries} == {digest}
    assert "alice" not in json_lines.stream.getvalue()
    assert all(isinstance(e["duration_ms"], float) and e["duration_ms"] >= 0 for e in entries)
    assert entries[0]["message"].startswith("tools/call greet: input_required (")


def test_errors_tool_errors_and_replays_are_named(json_lines: Captured) -> None:
    clock = Clock()
    with TestClient(app, clock=clock, store=MemoryStore(clock=clock)) as client:
        client.send("tools/call", {"name": "nope", "arguments": {}})
        client.send("tools/call", {"name": "boom", "arguments": {}})
        client.send("prompts/get", {"name": "broken"})
        client.send("tools/list")
        first = client.request("tools/call", {"name": "greet", "arguments": {}})
        retry = {"name": "greet", "arguments": {}, "requestState": first["requestState"],
                 "inputResponses": {"name": {"action": "accept", "content": {"name": "A"}}}}
        client.send("tools/call", retry)
        client.send("tools/call", retry)  # the same round again: replayed from the store
    unknown, bug, prompt, listed, _, answered, replayed = json_lines.entries
    assert (unknown["outcome"], unknown["code"], unknown["target"]) == ("error", -32602, "nope")
    assert unknown["message"].startswith("tools/call nope: error -32602 (")
    assert (bug["outcome"], bug["is_error"]) == ("complete", True)
    assert "ZeroDivisionError" not in bug["message"]
    assert (prompt["method"], prompt["outcome"], prompt["code"]) == ("prompts/get", "error",
                                                                      -32603)
    assert listed["method"] == "tools/list" and "target" not in listed
    assert "replayed" not in answered and replayed["replayed"] is True
    assert replayed["message"].endswith(")") and ", replayed (" in replayed["message"]


def test_text_lines_carry_the_request_fields_and_escape_client_text(text_lines: Captured) -> None:
    with TestClient(app) as client:
        client.request("tools/call", {"name": "greet", "arguments": {}})
        client.send("tools/call", {"name": "forged: complete\nINFO x", "arguments": {}})
        client.send_raw(msgspec.json.encode(call("greet", id="a\nb")))
    first, forged, odd_id = text_lines.lines[:3]
    assert first.startswith("INFO mrtr.requests: tools/call greet: input_required (")
    assert first.endswith(" round=1 principal=-]") and "[request=1 flow=" in first
    assert len(text_lines.lines) == 3  # no newline from the client made a line of its own
    assert "tools/call 'forged: complete\\nINFO x': error -32602" in forged
    assert "[request='a\\nb' " in odd_id


def test_a_2025_session_logs_what_it_answers_itself(json_lines: Captured) -> None:
    server = SessionServer(Dispatcher(app))
    peer = Peer(principal="bob", transport="test")
    hello = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t",
                                                                           "version": "1"}}}
    session, _ = server.initialize(hello, peer)
    assert session is not None

    async def outbound(message: bytes) -> None:
        return None

    async def scenario() -> None:
        for id_, method, params in [(1, "ping", {}), (2, "logging/setLevel", {"level": "nope"}),
                                    (3, "no/such", {})]:
            message = {"jsonrpc": "2.0", "id": id_, "method": method, "params": params}
            await server.serve(session, message, peer, outbound)

    asyncio.run(scenario())
    assert [(e["method"], e["outcome"], e.get("code")) for e in json_lines.entries] == [
        ("initialize", "complete", None), ("ping", "complete", None),
        ("logging/setLevel", "error", -32602), ("no/such", "error", -32601)]
    assert {e["principal"] for e in json_lines.entries} == {
        hashlib.sha256(b"bob").hexdigest()[:16]}


class Exploding(RequestLog):
    def write(self, *args: Any) -> None:
        raise AssertionError("the request line was built although its logger is off")


def test_with_the_logger_off_nothing_is_timed_or_built() -> None:
    dispatcher = Dispatcher(app)
    dispatcher.request_log = Exploding()
    before = LOGGER.level
    LOGGER.setLevel(logging.WARNING)
    try:
        assert dispatcher.request_log.start() is None
        body = msgspec.json.encode(call("greet"))
        reply = asyncio.run(dispatcher.handle_bytes(body, Peer(principal=None, transport="t")))
        assert reply is not None and reply.error is None
        LOGGER.setLevel(logging.INFO)
        with pytest.raises(AssertionError, match="logger is off"):
            asyncio.run(dispatcher.handle_bytes(body, Peer(principal=None, transport="t")))
    finally:
        LOGGER.setLevel(before)
